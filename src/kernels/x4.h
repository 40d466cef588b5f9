/* x4.h: Q4_K, Q5_K, Q6_K, Q3_K and Q2_K weights interleaved four rows at a time (PA_LAYOUT_K_X4),
 * the layout the loader repacks those matrices into when the CPU has a fast
 * kernel for it, and the one canonical arithmetic every kernel of the
 * layout follows.
 *
 * Why: the GGUF layout puts a row's 8 sub-blocks of 32 weights in 8 lanes
 * each of a 512-bit int8 dot, so every sub-block sum must be reduced across
 * lanes (or widened and multiplied by its scale lane by lane) before its
 * scale applies: in the one-token kernel that costs as many vector
 * operations as the dot itself. Here each 32-bit lane l = 4 r + p of a
 * 512-bit vector belongs to one row r (0..3) and one pair p (0..3) of
 * sub-blocks (2p in the low nibbles, 2p + 1 in the high ones), and the 8
 * vectors of a super-block walk the 32 elements of those sub-blocks 4 at a
 * time: every vpdpbusd adds into lanes that already hold one sub-block
 * each, and one conversion and one fma per vector apply 16 scales at once.
 *
 * Group g (rows 4g .. 4g + 3), super-block b: a record of PA_X4_REC bytes
 * at data + (g * (cols / 256) + b) * PA_X4_REC:
 *   qs[8][64]  byte 4 l + e of vector i (l = 4 r + p, e = 0..3): low nibble
 *              = quant of row r, sub-block 2p, element 4 i + e; high nibble
 *              = the same of sub-block 2p + 1
 *   sc[2][16]  sc[h][l] = 6-bit scale of row r, sub-block 2p + h
 *   mn[16][2]  mn[l][h] = 6-bit min of row r, sub-block 2p + h
 *   dm[8]      fp16: d of rows 0..3, then dmin of rows 0..3
 * 592 bytes for 4 x 144 of the file: 2.8% more, for scales and mins kept
 * one per byte (unpacking the 6-bit fields costs the kernel more than the
 * bytes cost the memory bus). Q5_K: the same 592 bytes, then
 *   qh[16]     64-bit masks at 592: bit 4 l + e of mask 2 i + h = fifth bit
 *              of row r, sub-block 2p + h, element 4 i + e (a k-mask that
 *              sets bit 4 of the unpacked bytes)
 * 720 bytes for 4 x 176 (+2.3%).
 *
 * A token's activations: its Q8_K row (quant.h) packed per super-block into
 * PA_X4_XREC bytes:
 *   xq[8][2][16]  xq[i][h][4 p + e] = x[64 p + 32 h + 4 i + e]
 *   xs[4][2]      int16 sum of x over sub-block 2p + h
 *   d             float, the Q8_K block's scale
 *
 * The canonical arithmetic (x4.c's reference is the specification; the
 * SIMD kernels repeat it bit for bit). Per token, 16 float accumulators
 * acc[l], zero at start; per super-block, with dr, mr = d, dmin of row r
 * as floats and dx the activation scale:
 *   lo[l] = sum_{i,e} (qs & 0x0F) * xq[i][0][4p + e]          (int32)
 *   hi[l] = sum_{i,e} (qs & 0xF0) * xq[i][1][4p + e]          (int32, 16x)
 *   (Q5_K: the values with their fifth bit, and hi not 16x: (qs >> 4) | bit)
 *   mi[l] = mn[l][0] * xs[p][0] + mn[l][1] * xs[p][1]        (int32)
 *   v     = (float)lo[l] * ((float)sc[0][l] * dr)
 *   v     = fma((float)hi[l], (float)sc[1][l] * (dr * 0.0625f), v)
 *           (Q5_K: (float)sc[1][l] * dr)
 *   v     = fma(-(float)mi[l], mr, v)
 *   acc[l] = fma(v, dx, acc[l])
 * and at the end y[r] = (acc[4r] + acc[4r+1]) + (acc[4r+2] + acc[4r+3]).
 * The integers are exact (|hi| < 2^20 < 2^24), so every path that follows
 * these float steps gives the same bits for any number of tokens.
 *
 * Q6_K (16 sub-blocks of 16 with an int8 scale each, 6-bit values q in
 * 0..63 standing for q - 32): lane l = 4 r + p walks the same columns as
 * above, 64 p + 32 hh + 4 i + e (hh = 0 the low nibbles, 1 the high), so
 * the activation patterns are Q4_K's; those columns are the 4 sub-blocks
 * 4 p + k, k = 2 hh + i / 4. A record of PA_X4_REC6 = 840 bytes, as many
 * as the file's 4 x 210:
 *   q[4][3][64]  at 0, a group of 3 vectors per j = 0..3 holding the
 *              values of the 4 vectors (i, hh) = (2 j, 0), (2 j, 1),
 *              (2 j + 1, 0), (2 j + 1, 1); vector (i, hh), byte 4 l + e
 *              is q of row r, column 64 p + 32 hh + 4 i + e. Byte n of
 *              q[j][a] (a = 0, 1, 2): bits 0..5 = byte n of the group's
 *              vector a, bits 6, 7 = bits 2 a, 2 a + 1 of byte n of its
 *              vector 3. Three vectors give four with 3 ands and, for the
 *              fourth, 3 shifts and 3 logic operations (keeping the low
 *              nibbles and the top bits apart took 13 operations per 4
 *              vectors instead of 9)
 *   sc[4][16]  at 768: int8 scale of row r, sub-block 4 p + k at sc[k][l]
 *   d[4]       at 832: fp16 d of rows 0..3
 * Its activations (PA_X4_XREC6 bytes): xq as above, bs[16] int16 at 256
 * (the Q8_K block's bsums: sums over each 16 columns), d at 288. Per
 * token, acc[l] zero at start; per super-block, the integer
 *   S[l] = sum_k sc[k][l] * (sum over sub-block 4p + k of q * x
 *                            - 32 * bs[4 p + k])                  (exact)
 * then acc[l] = fma((float)S[l], dr * dx, acc[l]) (dr * dx rounded), and
 * y[r] as above. |S| < 2^27: exact in int32, and every kernel converts it
 * with the same rounding.
 *
 * Q3_K (16 sub-blocks of 16 with 6-bit scales s - 32 in -32..31, 3-bit
 * values q in -4..3, d): Q6_K's lanes, columns, activation record and
 * arithmetic, with u = q + 4 (0..7) in place of Q6_K's q and 4 in place of
 * 32. A record of PA_X4_REC3 = 456 bytes (the file's 4 x 110, +3.6%):
 *   t[2][3][64] at 0: byte 4 l + e of x = t[j][0], y = t[j][1], z =
 *              t[j][2] holds u of vectors (i, hh) with i = 4 j + 0..3:
 *              x: bits 0..2 (4j, 0), 3..5 (4j, 1), 6..7 bits 0, 1 of (4j+3, 1)
 *              y: bits 0..2 (4j+1, 0), 3..5 (4j+1, 1), 6..7 bits 0, 1 of (4j+3, 0)
 *              z: bits 0..2 (4j+2, 0), 3..5 (4j+2, 1), bit 6 bit 2 of
 *              (4j+3, 1), bit 7 bit 2 of (4j+3, 0)
 *              Six vectors come out with one and each (those of hh = 1 as
 *              8 u, in place), the other two with 2 shifts, a merge and an
 *              and: 14 operations per 8 vectors.
 *   sc[4][16]  at 384: int8 s - 32 of row r, sub-block 4 p + k at sc[k][l]
 *   d[4]       at 448: fp16 d of rows 0..3
 * (vector (i, hh), byte 4 l + e: row r, column 64 p + 32 hh + 4 i + e, as
 * for Q6_K). Per token and super-block
 *   S[l] = sum_k sc[k][l] * (sum over sub-block 4p + k of u * x
 *                            - 4 * bs[4 p + k])                 (exact)
 * then acc[l] = fma((float)S[l], dr * dx, acc[l]) and y[r] as above.
 *
 * Q2_K (16 sub-blocks of 16 with a 4-bit scale sc and a 4-bit min m each,
 * 2-bit values u, d and dmin): Q6_K's lanes, columns and activation record.
 * A record of PA_X4_REC2 = 336 bytes, as many as the file's 4 x 84:
 *   q[4][64]   at 0: byte 4 l + e of vector m holds at bits 2 k, 2 k + 1
 *              the value of vector (i, hh) with i % 4 = m and column
 *              k = 2 hh + i / 4 (row r, column 64 p + 32 hh + 4 i + e):
 *              each value comes out with one and, 4^k x in place
 *   scm[4][16] at 256: the file's byte of row r, sub-block 4 p + k at
 *              scm[k][l] (sc in the low nibble, m in the high one)
 *   d[4], dmin[4] at 320, 328: fp16, rows 0..3
 * Per token and super-block, the integers
 *   S[l] = sum_k sc[k][l] * (sum over sub-block 4 p + k of u * x)
 *   M[l] = sum_k m[k][l] * bs[4 p + k]
 * then acc[l] = fma((float)S[l], dr * dx, acc[l]),
 *      acc[l] = fma(-(float)M[l], dminr * dx, acc[l]), and y[r] as above. */
#ifndef PASADA_X4_H
#define PASADA_X4_H

#include "kernels/kernels.h"

#define PA_X4_TOKENS 4 /* tokens per kernel call */
#define PA_X4_REC 592
#define PA_X4_XREC 288
#define PA_X4_QS 0
#define PA_X4_SC 512
#define PA_X4_MN 544
#define PA_X4_DM 576
#define PA_X4_QH 592
#define PA_X4_REC5 720
#define PA_X4_XS 256
#define PA_X4_XD 272
#define PA_X4_REC6 840
#define PA_X4_SC6 768
#define PA_X4_D6 832
#define PA_X4_XREC6 320
#define PA_X4_XBS6 256
#define PA_X4_XD6 288
#define PA_X4_REC3 456
#define PA_X4_REC2 336
#define PA_X4_SCM2 256
#define PA_X4_D2 320
#define PA_X4_SC3 384
#define PA_X4_D3 448

/* Whether a matrix of this type and shape can take the layout. */
bool pa_x4_fits(pa_type type, int64_t rows, int64_t cols);
/* Bytes per group and super-block (0: a type the layout does not take), and
 * of a matrix in the layout. */
size_t pa_x4_rec(pa_type type);
size_t pa_x4_bytes(pa_type type, int64_t rows, int64_t cols);
/* Repacks n_groups groups: src, their 4 * n_groups rows in file layout;
 * dst, their records. */
void pa_x4_repack(pa_type type, int64_t cols, const void *src, void *dst, int64_t n_groups);
/* Dequantizes row r (the file's values exactly). */
void pa_x4_get_row(const pa_matrix *w, int64_t r, float *out);

/* The reference kernel (plain C; every table without a faster one). */
extern const pa_ilv_kernel pa_x4_q4k_ref, pa_x4_q5k_ref, pa_x4_q6k_ref, pa_x4_q3k_ref,
    pa_x4_q2k_ref;
/* The AVX-512 VNNI kernel (x4_avx512.c). */
extern const pa_ilv_kernel pa_x4_q4k_vnni, pa_x4_q5k_vnni, pa_x4_q6k_vnni, pa_x4_q3k_vnni,
    pa_x4_q2k_vnni;
/* The AVX2 kernel (x4_avx2.c): the same bits. */
extern const pa_ilv_kernel pa_x4_q4k_avx2, pa_x4_q5k_avx2, pa_x4_q6k_avx2, pa_x4_q3k_avx2,
    pa_x4_q2k_avx2;
size_t pa_x4_x_size(int64_t cols);
void pa_x4_pack_x(int64_t cols, const void *xq, void *xp);
/* Q6_K's and Q3_K's activation record (PA_X4_XREC6 bytes per super-block) */
size_t pa_x4_x_size6(int64_t cols);
void pa_x4_pack_x6(int64_t cols, const void *xq, void *xp);

#endif
