/* x16.h: 32-element block weights (Q4_0, Q4_1, Q5_0, Q8_0, and the table-lookup
 * 4-bit types IQ4_NL, MXFP4, IQ4_XS) and Q4_K and Q5_K, whose super-blocks
 * are 8 blocks of 32, interleaved sixteen rows at a time (PA_LAYOUT_B32_X16), and
 * the canonical arithmetic every kernel of the layout follows.
 *
 * Why: in the file layout a block's 32 weights fill 8 lanes of a 256-bit
 * int8 dot (or 16 of 512), so every block's sum has to be reduced across
 * lanes or carried as 8 float lanes with its scale: conversions, scale
 * multiplies and fmas per block that cost as much as the dot, and in the
 * batched path a per-pass unpacking of the weights. Here lane l of a
 * 512-bit vector is row l of the group, and the vectors of a block walk its
 * 32 elements 4 at a time: every vpdpbusd adds 4 products into each of 16
 * rows' block sums, against 4 activation bytes broadcast to all lanes (an
 * embedded broadcast: no shuffle), and one conversion and one fma apply 16
 * rows' scales. The tokens of a batch share the weight vectors.
 *
 * Group g (rows 16g .. 16g + 15), block b: a record of pa_x16_rec(type)
 * bytes at data + (g * (cols / 32) + b) * rec, the same bytes as the
 * file's 16 blocks:
 *   Q8_0  qs[8][64]: byte 4 l + e of vector i = quant 4 i + e of row l,
 *         plus 128 (as unsigned); d[16] fp16 at 512.          (544 bytes)
 *   Q4_0  qs[4][64]: byte 4 l + e of vector i = the file's byte 4 i + e of
 *         row l (low nibble: element 4 i + e, high: 16 + 4 i + e);
 *         d[16] fp16 at 256.                                  (288 bytes)
 *   Q4_1  as Q4_0, then m[16] fp16 at 288.                   (320 bytes)
 *   Q5_0  qs as Q4_0; then 8 64-bit masks at 256: bit 4 l + e of mask i
 *         (i < 4) = fifth bit of element 4 i + e of row l, of mask 4 + i
 *         = that of element 16 + 4 i + e (a k-mask that sets bit 4 of
 *         the unpacked bytes); d[16] fp16 at 320.             (352 bytes)
 *   IQ4_NL  qs as Q4_0 (each nibble indexes pa_kvalues_iq4nl); d[16] fp16
 *         at 256.                                             (288 bytes)
 *   MXFP4 qs as Q4_0 (indexes into pa_kvalues_mxfp4); e[16], the E8M0
 *         exponent bytes, at 256.                             (272 bytes)
 *   IQ4_XS  one record per super-block of 256 (group g, super-block b at
 *         data + (g * (cols / 256) + b) * 2208): sub-block ib's nibbles
 *         as Q4_0's qs at 256 ib; sc[8][16] int8 at 2048, sc[ib][l] = the
 *         6-bit scale of row l, sub-block ib, minus 32; d[16] fp16 at
 *         2176.                              (2208 bytes for the file's 2176)
 *         The one-token kernel reads sc after the last nibbles, as Q4_K's
 *         reads its header (below): one AMD Zen 4 core from memory 0.94-0.96
 *         of a plain read against 0.82-0.84 with each sub-block's scales
 *         read beside it (bench_kernels 1 vsread 256 IQ4_XS, BENCH_ILV=1
 *         BENCH_HUGE=1, builds alternated).
 *   Q4_K  one record per super-block (PA_X16_REC_K bytes): qs[32][64] at
 *         0, vector 8 p + i (p = 0..3, i = 0..7): byte 4 l + e = the
 *         file's qs[32 p + 4 i + e] of row l (low nibble: sub-block 2 p,
 *         column 64 p + 4 i + e; high nibble: sub-block 2 p + 1, column
 *         64 p + 32 + 4 i + e); then at 2048 sc[8][16], sc[j][l] = the
 *         6-bit scale of row l, sub-block j; at 2176 mn[4][16][2],
 *         mn[k][l][h] = the 6-bit min of row l, sub-block 2 k + h (widened
 *         to int16 pairs, one vpdpwssd per 2 sub-blocks); d[16] fp16 at
 *         2304, dmin[16] fp16 at 2336.       (2368 bytes for the file's 2304)
 *   Q5_K  per pair p, at 640 p: qh[8][2][8], two 64-bit masks per
 *         vector i, bit 4 l + e of mask h = the fifth bit of row l,
 *         sub-block 2 p + h, element 4 i + e (a k-mask that adds 16 to the
 *         unpacked bytes), then at 640 p + 128 its 8 vectors as Q4_K's (the
 *         low four bits); then Q4_K's sc, mn, d, dmin from 2560.
 *                                            (2880 bytes for the file's 2816)
 *         On AMD Zen 4 one core's read from memory depends on the order in
 *         which a record's lines are first asked for: ascending, it keeps
 *         up with a plain read. So the masks sit beside their vectors, and
 *         ahead of them (512 bytes apart, as a second stream: 0.37 of a
 *         plain read; after the vectors: 0.80-0.82; ahead: 1.00-1.01), and
 *         the one-token kernel reads the header after the last vector
 *         (each pair's scales read after the pair: Q4_K 0.90-0.91, Q5_K
 *         0.76-0.78; at the end: 0.95-0.97; the header at the record's
 *         start: 0.82-0.88, Q5_K 0.36; bench_kernels 1 vsread 256 Q4_K
 *         Q5_K, BENCH_ILV=1 BENCH_HUGE=1, builds alternated).
 *         Against Q4_K's 4-row layout (x4.h), the 4-byte activation
 *         operands are embedded broadcasts (x4's 16-byte patterns cost a
 *         shuffle each on AMD Zen 4) and each sub-block's scale is one
 *         vpmulld for 16 rows: on Zen 4, one core's one-token product ran
 *         60-65 GB/s from L2 against x4's 46-51 (bench_kernels 1 0.5 Q4_K,
 *         BENCH_ILV=1), and from memory 0.95-0.97 of a plain read against
 *         0.78-0.88 (bench_kernels 1 vsread 256 Q4_K, BENCH_ILV=1
 *         BENCH_HUGE=1, builds alternated); Q5_K 50-52 against 42 GB/s
 *         from L2, 1.00-1.01 against 0.70 of a read.
 *
 * A token's activations: its row of the type's vec_dot_type (Q8_0 or Q8_1)
 * packed per block into PA_X16_XREC bytes: qs[32] (int8), then the float
 * d, then a 32-bit word: Q8_0, Q4_0 and Q5_0, the int32 offset off = 128
 * (Q8_0), 8 (Q4_0) or 16 (Q5_0) times the block's sum of quants; Q4_1, the
 * float s of the Q8_1 block. IQ4_NL, MXFP4: as Q8_0's, with off = 128
 * (IQ4_NL) or 12 (MXFP4) times the block's sum (for kernels that read the
 * levels offset to unsigned, level + 128 or level + 12). IQ4_XS: its Q8_K
 * row per super-block in PA_X16_XREC_XS bytes: qs[256], the float d at
 * 256, then off[8] int32 at 260, 128 times each sub-block's sum. Q4_K:
 * its Q8_K row per super-block in PA_X16_XREC_K bytes: qs[256], xs[8]
 * int16 at 256 (each sub-block's sum of quants), the float d at 272;
 * Q5_K's the same.
 *
 * The canonical arithmetic (x16.c's reference is the specification; the
 * SIMD kernels repeat it bit for bit). Per token and row l, a float acc,
 * zero at start; per block, with dl (ml) the row's d (m) as float and dx
 * the activation's d:
 *   sum = sum over the block's 32 elements of (unsigned weight byte or
 *         nibble, with Q5_0's fifth bit) * (activation quant)   (int32)
 *   Q8_0, Q4_0, Q5_0: acc = fma((float)(sum - off), dl * dx, acc)
 *   Q4_1:       acc = fma((float)sum, dl * dx, acc); acc = fma(ml, s, acc)
 *   IQ4_NL, MXFP4: sum = sum over the block of level * (activation quant)
 *         (int32, the level signed: the table's entry for the nibble);
 *         acc = fma((float)sum, dl * dx, acc), dl the row's d (IQ4_NL) or
 *         pa_e8m0_to_f32_half(e) (MXFP4)
 *   IQ4_XS, per super-block: sum = sum over ib of sc[ib][l] * (sum over
 *         sub-block ib of level * quant) (int32, |sum| < 2^28);
 *         acc = fma((float)sum, dl * dx, acc), dx the Q8_K block's d
 *   Q4_K, Q5_K, per super-block: sum = sum over j of sc[j][l] * (sum
 *         over sub-block j of value * quant) (int32, |sum| < 2^26; the
 *         value: Q4_K's nibble, Q5_K's nibble plus 16 x its fifth bit), mins =
 *         sum over j of mn[j][l] * xs[j] (int32); acc = fma((float)sum,
 *         dl * dx, acc); acc = fma(-(float)mins, ml * dx, acc), dl and ml
 *         the row's d and dmin
 * and y[l] = acc. The integers are exact (|sum| < 2^21), so every path
 * that follows these float steps gives the same bits for any number of
 * tokens. */
#ifndef PASADA_X16_H
#define PASADA_X16_H

#include "kernels/kernels.h"

#define PA_X16_TOKENS 8 /* tokens per kernel call */
#define PA_X16_AMX_TOKENS 16 /* tokens per call of the AMX kernels */
#define PA_X16_XREC 40
#define PA_X16_REC_XS 2208  /* IQ4_XS: bytes per group and super-block */
#define PA_X16_XS_SC 2048
#define PA_X16_XS_D 2176
#define PA_X16_XREC_XS 292  /* IQ4_XS: activation bytes per super-block */
#define PA_X16_XS_XD 256
#define PA_X16_XS_XOFF 260
#define PA_X16_REC_K 2368 /* Q4_K: bytes per group and super-block */
#define PA_X16_REC_K5 2880 /* Q5_K */
/* Q4_K's (q5 0) and Q5_K's (q5 1) record: weight vector v's bytes, Q5_K's
 * masks of v, and where the scales, mins, d and dmin start (HDR + SC, MN,
 * D, DMIN) */
#define PA_X16_K_QSV(q5, v) ((q5) ? 640 * ((v) / 8) + 128 + 64 * ((v) % 8) : 64 * (v))
#define PA_X16_K_QHV(v) (640 * ((v) / 8) + 16 * ((v) % 8))
#define PA_X16_K_HDR(q5) ((q5) ? 2560 : 2048)
#define PA_X16_K_SC 0
#define PA_X16_K_MN 128
#define PA_X16_K_D 256
#define PA_X16_K_DMIN 288
#define PA_X16_XREC_K 288 /* Q4_K: activation bytes per super-block */
#define PA_X16_K_XS 256
#define PA_X16_K_XD 272

bool pa_x16_fits(pa_type type, int64_t rows, int64_t cols);
size_t pa_x16_rec(pa_type type); /* bytes per group and block; 0: not a layout type */
size_t pa_x16_bytes(pa_type type, int64_t rows, int64_t cols);
void pa_x16_repack(pa_type type, int64_t cols, const void *src, void *dst, int64_t n_groups);
void pa_x16_get_row(const pa_matrix *w, int64_t r, float *out);

/* The reference kernels (plain C, x16.c) and the AVX-512 VNNI ones
 * (x16_avx512.c). */
extern const pa_ilv_kernel pa_x16_ref_q8_0, pa_x16_ref_q4_0, pa_x16_ref_q4_1, pa_x16_ref_q5_0;
extern const pa_ilv_kernel pa_x16_ref_iq4_nl, pa_x16_ref_mxfp4, pa_x16_ref_iq4_xs, pa_x16_ref_q4_k,
    pa_x16_ref_q5_k;
extern const pa_ilv_kernel pa_x16_vnni_q8_0, pa_x16_vnni_q4_0, pa_x16_vnni_q4_1, pa_x16_vnni_q5_0;
/* The AVX2 ones (x16_avx2.c): 4 tokens a call, the same bits. */
extern const pa_ilv_kernel pa_x16_avx2_q8_0, pa_x16_avx2_q4_0, pa_x16_avx2_q4_1, pa_x16_avx2_q5_0;
/* IQ4_NL, MXFP4, IQ4_XS: AVX2 (x16_iq_avx2.c), 4 tokens a call, which the
 * AVX-512 table without VNNI uses too; AVX-512 VNNI (x16_iq_avx512.c), 8
 * tokens a call. The reference's bits. */
extern const pa_ilv_kernel pa_x16_avx2_iq4_nl, pa_x16_avx2_mxfp4, pa_x16_avx2_iq4_xs;
extern const pa_ilv_kernel pa_x16_vnni_iq4_nl, pa_x16_vnni_mxfp4, pa_x16_vnni_iq4_xs;
/* Q4_K, Q5_K: AVX-512 VNNI (x16_k_avx512.c), 8 tokens a call, the
 * reference's bits. Tables without them keep these types in the 4-row
 * layout (layout.h). */
extern const pa_ilv_kernel pa_x16_vnni_q4_k, pa_x16_vnni_q5_k;
/* The AMX ones (x16_amx.c): batches on the tile unit, fewer than 10 tokens
 * through the VNNI kernels; the same bits. */
extern const pa_ilv_kernel pa_x16_amx_q8_0, pa_x16_amx_q4_0, pa_x16_amx_q4_1, pa_x16_amx_q5_0;
size_t pa_x16_x_size(int64_t cols);
void pa_x16_pack_x_q8_0(int64_t cols, const void *xq, void *xp);
void pa_x16_pack_x_q4_0(int64_t cols, const void *xq, void *xp);
void pa_x16_pack_x_q4_1(int64_t cols, const void *xq, void *xp);
void pa_x16_pack_x_q5_0(int64_t cols, const void *xq, void *xp);
void pa_x16_pack_x_mxfp4(int64_t cols, const void *xq, void *xp);
size_t pa_x16_x_size_xs(int64_t cols);
void pa_x16_pack_x_iq4_xs(int64_t cols, const void *xq, void *xp);
size_t pa_x16_x_size_k(int64_t cols);
void pa_x16_pack_x_q4_k(int64_t cols, const void *xq, void *xp);
/* The activation size and packer each type's x16 kernels read (IQ4_NL's
 * activations are Q8_0's), and PA_X16_KERNEL(isa, sfx, n_tok), which
 * defines pa_x16_<isa>_<sfx>: the kernel of type sfx whose entry run_<sfx>
 * takes up to n_tok tokens a call. */
#define PA_X16_X_q8_0 pa_x16_x_size, pa_x16_pack_x_q8_0
#define PA_X16_X_q4_0 pa_x16_x_size, pa_x16_pack_x_q4_0
#define PA_X16_X_q4_1 pa_x16_x_size, pa_x16_pack_x_q4_1
#define PA_X16_X_q5_0 pa_x16_x_size, pa_x16_pack_x_q5_0
#define PA_X16_X_iq4_nl pa_x16_x_size, pa_x16_pack_x_q8_0
#define PA_X16_X_mxfp4 pa_x16_x_size, pa_x16_pack_x_mxfp4
#define PA_X16_X_iq4_xs pa_x16_x_size_xs, pa_x16_pack_x_iq4_xs
#define PA_X16_X_q4_k pa_x16_x_size_k, pa_x16_pack_x_q4_k
#define PA_X16_X_q5_k pa_x16_x_size_k, pa_x16_pack_x_q4_k
#define PA_X16_KERNEL(isa, sfx, n_tok) \
  const pa_ilv_kernel pa_x16_##isa##_##sfx = {16, (n_tok), PA_X16_X_##sfx, run_##sfx, NULL}

#endif
