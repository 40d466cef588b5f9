/* blocks32_avx512.c: 32-element block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0
 * against Q8_0/Q8_1 activations) for the AVX-512 VNNI table: the prepared
 * one-token dot (pa_vec_dot_xs_fn) and the GEMM kernel (pa_gemm_kernel),
 * which give the same bits for every (row, token).
 *
 * Canonical arithmetic of one (row, token), blocks b = 0 .. nb - 1 taken in
 * groups of 16 (lane j of a group: block 16 g + j; lanes past the row's end
 * hold zeros), except a short tail (below):
 *   S_b  = the exact integer dot of block b (offsets such as Q4_0's -8,
 *          Q5_0's -16 or the +128 that makes Q8_0 weights unsigned for
 *          vpdpbusd taken off exactly, in integers, with the activation
 *          block's quant sum);
 *   acc  = fma(float(S_b), d_w[b] * d_x[b], acc)      16 float lanes, per group
 *   acc  = fma(m_w[b], s_x[b], acc)                   Q4_1 and Q5_1 only
 *   out  = hsum16(acc)                                a fixed tree (hsum512)
 * Short tail: when n = nb mod 16 is 1..8, the last n blocks are no group
 * but n' = 4 (n <= 4) or 8 lanes (block j in lane j, zero past n), which
 * costs at most 4 (n = 1), else 2 times the integer work of the n blocks
 * instead of 16 / n:
 *   T_j  = float(S_j) * (d_w[j] * d_x[j])
 *   T_j  = fma(m_w[j], s_x[j], T_j)                   Q4_1 and Q5_1 only
 *   u_j  = T_j + T_(j+4) (n' = 8), else T_j            j < 4
 *   out  = hsum16(acc) + ((u_0 + u_2) + (u_1 + u_3))
 * (acc: the groups before, all zero when nb < 16). n = 9..15 stays a
 * zero-padded group of 16. A lane past n has S = 0 and scales d_w = d_x =
 * m_w = s_x = +0 in both paths (zeros packed or loaded under a mask, never
 * computed), so T_j = +0 * +0 = +0 and fma(+0, +0, +0) = +0: never -0,
 * never a NaN from a neighbouring block; and as both paths add the same
 * lanes in the same tree, even a real -0 term meets the same +0s in both.
 * Integer sums are exact, so each path computes S_b in the lane layout that
 * suits it:
 * - GEMM: rows and tokens are packed so that 64 bytes hold dword k of 16
 *   consecutive blocks (a 16 x 8 dword transpose, once per row per panel
 *   and once per token); 8 vpdpbusd then give S_b of 16 blocks of one
 *   (row, token) in one register, followed by one conversion, one product of
 *   scales and one fma: ~11 uops per 16 blocks instead of ~2 per block.
 *   Short tail: each row's record keeps the n' blocks compact (dword k of
 *   4 blocks in 16 bytes), so a 512-bit vector holds 4 rows x 4 blocks
 *   (quarter r: row r; one load and three vinserti32x4 in the tile), and
 *   each token's tail is packed with its 16-byte pieces repeated in the 4
 *   quarters; 8 vpdpbusd per token and half (4 blocks) give S of 4 rows,
 *   the float steps run in that layout, and two shuffle-add steps and a
 *   permute give lane 4 t + r of (u_0 + u_2) + (u_1 + u_3), added to the
 *   groups' sums: 32 vpdpbusd per tile for n <= 4 and 64 for 5..8, not 128.
 * - One token: each block's dot as 8 lanes of vpdpbusd (256 bits), then a
 *   transposing reduction of 16 blocks (in-lane shuffles, then 128-bit
 *   moves) into one register with S_b in lane b, and the same float steps;
 *   the short tail by the same block dots reduced to n' lanes (256 bits),
 *   its floats in 256 and 128 bits.
 * Built with floating-point contraction off: every multiply and add is the
 * one written, in both paths. */
#if defined(__x86_64__) /* x86 SIMD; other targets have the plain C tables */
#include "kernels/cpu/blocks32_avx512.h"

PA_NO_FP_CONTRACT

#include <immintrin.h>
#include <string.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))
#define BODY static inline __attribute__((always_inline)) AVX512

enum { K_Q4_0, K_Q4_1, K_Q5_0, K_Q5_1, K_Q8_0 };

BODY int has_m(const int kind) { return kind == K_Q4_1 || kind == K_Q5_1; }
BODY int wsize_of(const int kind) {
  return kind == K_Q4_0   ? (int)sizeof(block_q4_0)
         : kind == K_Q4_1 ? (int)sizeof(block_q4_1)
         : kind == K_Q5_0 ? (int)sizeof(block_q5_0)
         : kind == K_Q5_1 ? (int)sizeof(block_q5_1)
                          : (int)sizeof(block_q8_0);
}
BODY int xsize_of(const int kind) {
  return has_m(kind) ? (int)sizeof(block_q8_1) : (int)sizeof(block_q8_0);
}
/* S_b = (dot of the unsigned weight bytes) - (sum x << shift): the offset
 * of Q4_0 (8), Q5_0 (16) and Q8_0 read as unsigned (128); none for the
 * Q8_1 kinds (their m s term is a float of its own). */
BODY int offset_shift(const int kind) {
  return kind == K_Q4_0 ? 3 : kind == K_Q5_0 ? 4 : kind == K_Q8_0 ? 7 : -1;
}

/* ---- helpers ---- */

BODY __m256i load256(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }
BODY __m512i load512(const void *p) { return _mm512_loadu_si512(p); }

#include "kernels/cpu/avx512_q32.h" /* q4_bytes, q5_bytes, f16_pairs8, f16_singles8 */

BODY __m512i dpbusd512(__m512i acc, __m512i u, const void *s) {
  __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "m"(*(const __m512i *)s));
  return acc;
}

BODY float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
/* The final sum of 16 lanes: i + (i + 8), then hsum256's tree. */
BODY float hsum512(__m512 v) {
  return hsum256(_mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)));
}

/* The weight bytes of one block in element order as the one-token dot
 * takes them: Q4 nibbles with the high ones left in place (16x; divided
 * out after the reduction), Q5 values 0..31, Q8_0 + 128. */
BODY __m256i w_bytes_1t(const int kind, const uint8_t *blk) {
  switch (kind) {
    case K_Q4_0:
    case K_Q4_1:
      return q4_bytes(blk + (kind == K_Q4_0 ? 2 : 4), 1);
    case K_Q5_0:
    case K_Q5_1:
      return q5_bytes(blk + (kind == K_Q5_0 ? 6 : 8), blk + (kind == K_Q5_0 ? 2 : 4));
    default:
      return _mm256_xor_si256(load256(blk + 2), _mm256_set1_epi8((char)0x80));
  }
}

/* The same bytes with the Q4 high nibbles shifted down (the GEMM's packing). */
BODY __m256i w_bytes_exact(const int kind, const uint8_t *blk) {
  if (kind == K_Q4_0 || kind == K_Q4_1) return q4_bytes(blk + (kind == K_Q4_0 ? 2 : 4), 0);
  return w_bytes_1t(kind, blk);
}


/* fp16 scales of 16 blocks at p + k * stride (k < n, zero beyond), as
 * floats; with has_m also the second fp16 (m) of each block. */
BODY void scales16(const uint8_t *p, const int stride, const int n, const int with_m, __m512 *d,
                   __m512 *m) {
  const int64_t avail = n == 16 ? ALL_AVAILABLE : (int64_t)n * stride;
  if (with_m) {
    const __m512 a = f16_pairs8(p, stride, avail);
    const __m512 b = n > 8 ? f16_pairs8(p + 8 * stride, stride, avail - 8 * stride)
                           : _mm512_setzero_ps();
    *d = _mm512_permutex2var_ps(
        a, _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30), b);
    *m = _mm512_permutex2var_ps(
        a, _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31), b);
    return;
  }
  const __m256 a = f16_singles8(p, stride, avail);
  const __m256 b = n > 8 ? f16_singles8(p + 8 * stride, stride, avail - 8 * stride)
                         : _mm256_setzero_ps();
  *d = _mm512_insertf32x8(_mm512_castps256_ps512(a), b, 1);
}

/* fp16 scales of n <= 8 blocks at p + k * stride (zero beyond n), as 8
 * floats; with has_m also the second fp16 (m) of each block. */
BODY void scales8(const uint8_t *p, const int stride, const int n, const int with_m, __m256 *d,
                  __m256 *m) {
  const int64_t avail = (int64_t)n * stride;
  if (with_m) {
    const __m512 a = _mm512_permutexvar_ps(
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15),
        f16_pairs8(p, stride, avail));
    *d = _mm512_castps512_ps256(a);
    *m = _mm512_extractf32x8_ps(a, 1);
    return;
  }
  *d = f16_singles8(p, stride, avail);
  *m = _mm256_setzero_ps();
}

/* Blocks of a row: nb; its short tail (header comment): n = nb mod 16 when
 * that is 1..8 (else 0), in H = 1 (n <= 4) or 2 halves of 4 blocks; the
 * groups of 16 before it, the last one zero-padded when nb mod 16 > 8. */
static inline int short_tail(int64_t nb) { return nb % 16 <= 8 ? (int)(nb % 16) : 0; }
static inline int halves_of(int n) { return n == 0 ? 0 : n <= 4 ? 1 : 2; }
static inline int64_t groups_of(int64_t nb) { return (nb - short_tail(nb) + 15) / 16; }

/* ---- one token ---- */

/* Two blocks' 8 lanes each -> 4 lanes each (lanes 0, 1 and 4, 5 of a
 * 128-bit half... see below): (a0+a2, a1+a3, b0+b2, b1+b3 | a4+a6, ...). */
BODY __m256i red1(__m256i a, __m256i b) {
  return _mm256_add_epi32(_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b));
}
/* Two red1 results (blocks a, b and c, d) -> one lane per block and half:
 * (a, b, c, d | a', b', c', d'), the halves still apart. */
BODY __m256i red2(__m256i u, __m256i w) {
  const __m256 uf = _mm256_castsi256_ps(u), wf = _mm256_castsi256_ps(w);
  return _mm256_add_epi32(_mm256_castps_si256(_mm256_shuffle_ps(uf, wf, 0x88)),
                          _mm256_castps_si256(_mm256_shuffle_ps(uf, wf, 0xDD)));
}

/* One block's dot as 8 lanes, from a zero idiom (no register copy). */
BODY __m256i block_dot(const int kind, const uint8_t *w, const uint8_t *xq) {
  __m256i acc;
  __asm__("vpxord %x0, %x0, %x0\n\tvpdpbusd %2, %1, %0"
          : "=&v"(acc)
          : "v"(w_bytes_1t(kind, w)), "m"(*(const __m256i *)xq));
  return acc;
}

/* Blocks j0..j0+3 reduced to one lane per block and 128-bit half. */
BODY __m256i quad_1t(const int kind, const uint8_t *w, const uint8_t *x, const int j0) {
  const int ws = wsize_of(kind), xs = xsize_of(kind), xq = has_m(kind) ? 4 : 2;
  const __m256i a = block_dot(kind, w + j0 * ws, x + j0 * xs + xq);
  const __m256i b = block_dot(kind, w + (j0 + 1) * ws, x + (j0 + 1) * xs + xq);
  const __m256i ab = red1(a, b);
  const __m256i c = block_dot(kind, w + (j0 + 2) * ws, x + (j0 + 2) * xs + xq);
  const __m256i d = block_dot(kind, w + (j0 + 3) * ws, x + (j0 + 3) * xs + xq);
  return red2(ab, red1(c, d));
}

/* The last step: four quads (blocks 0-3, 4-7, 8-11, 12-15) -> S in lanes. */
BODY __m512i quads_to_lanes(const int kind, __m256i q0, __m256i q1, __m256i q2, __m256i q3) {
  /* 128-bit chunks: A = (b0-3 lo, b0-3 hi, b4-7 lo, b4-7 hi), B likewise */
  __m512i a = _mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1);
  __m512i b = _mm512_inserti64x4(_mm512_castsi256_si512(q2), q3, 1);
  if (kind == K_Q4_0 || kind == K_Q4_1) { /* the high halves carry 16x their sums (exact) */
    const __m512i sh = _mm512_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4, 0, 0, 0, 0, 4, 4, 4, 4);
    a = _mm512_srav_epi32(a, sh);
    b = _mm512_srav_epi32(b, sh);
  }
  return _mm512_add_epi32(_mm512_shuffle_i64x2(a, b, 0x88), _mm512_shuffle_i64x2(a, b, 0xDD));
}

/* S of the 16 (full) or n < 16 blocks of a group at w, x, in lanes 0..15. */
BODY __m512i group_sums_1t(const int kind, const uint8_t *w, const uint8_t *x, const int n,
                           const int full) {
  if (full)
    return quads_to_lanes(kind, quad_1t(kind, w, x, 0), quad_1t(kind, w, x, 4),
                          quad_1t(kind, w, x, 8), quad_1t(kind, w, x, 12));
  const int ws = wsize_of(kind), xs = xsize_of(kind), xq = has_m(kind) ? 4 : 2;
  const __m256i zero = _mm256_setzero_si256();
  __m256i v[16];
  for (int j = 0; j < 16; j++) v[j] = j < n ? block_dot(kind, w + j * ws, x + j * xs + xq) : zero;
  __m256i q[4];
  q[0] = red2(red1(v[0], v[1]), red1(v[2], v[3]));
  q[1] = n > 4 ? red2(red1(v[4], v[5]), red1(v[6], v[7])) : zero;
  q[2] = n > 8 ? red2(red1(v[8], v[9]), red1(v[10], v[11])) : zero;
  q[3] = n > 12 ? red2(red1(v[12], v[13]), red1(v[14], v[15])) : zero;
  return quads_to_lanes(kind, q[0], q[1], q[2], q[3]);
}

/* acc += one group (16 blocks, or the n < 16 of a last one) of a row. */
BODY __m512 group_1t(const int kind, __m512 acc, const uint8_t *w, const uint8_t *x,
                     const float *xd, const float *xsum, const int n, const int full) {
  const int ws = wsize_of(kind), shift = offset_shift(kind);
  const __mmask16 lanes = full ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1);
  __m512i s = group_sums_1t(kind, w, x, n, full);
  if (shift >= 0)
    s = _mm512_sub_epi32(
        s, _mm512_slli_epi32(_mm512_cvttps_epi32(_mm512_maskz_loadu_ps(lanes, xsum)),
                             (unsigned)shift));
  __m512 dw, mw = _mm512_setzero_ps();
  scales16(w, ws, full ? 16 : n, has_m(kind), &dw, &mw);
  const __m512 sc = _mm512_mul_ps(dw, _mm512_maskz_loadu_ps(lanes, xd));
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), sc, acc);
  if (has_m(kind)) acc = _mm512_fmadd_ps(mw, _mm512_maskz_loadu_ps(lanes, xsum), acc);
  return acc;
}

/* The short tail's terms in one token: S_j of its n <= 4 H blocks
 * (j < 4 H, zero beyond n) by the same block dots and reductions as a group,
 * then T_j and the fixed tree of the header comment. w, x: its first block;
 * xd, xsum: its d and sums in pa_prepare_x_sums's arrays. */
BODY float tail_1t(const int kind, const int H, const uint8_t *w, const uint8_t *x,
                   const float *xd, const float *xsum, const int n) {
  const int ws = wsize_of(kind), xs = xsize_of(kind), xq = has_m(kind) ? 4 : 2;
  const int shift = offset_shift(kind);
  const __m256i zero = _mm256_setzero_si256();
  __m256i v[8];
#pragma GCC unroll 8
  for (int j = 0; j < 4 * H; j++)
    v[j] = j < n ? block_dot(kind, w + j * ws, x + j * xs + xq) : zero;
  /* (S_0..3 of the low 16 bytes | of the high 16 bytes), per quad */
  const __m256i q0 = red2(red1(v[0], v[1]), red1(v[2], v[3]));
  __m256i lo, hi;
  if (H == 1) {
    lo = _mm256_zextsi128_si256(_mm256_castsi256_si128(q0));
    hi = _mm256_zextsi128_si256(_mm256_extracti128_si256(q0, 1));
  } else {
    const __m256i q1 = red2(red1(v[4], v[5]), red1(v[6], v[7]));
    lo = _mm256_permute2x128_si256(q0, q1, 0x20);
    hi = _mm256_permute2x128_si256(q0, q1, 0x31);
  }
  if (kind == K_Q4_0 || kind == K_Q4_1) hi = _mm256_srai_epi32(hi, 4); /* 16x, exact */
  __m256i s = _mm256_add_epi32(lo, hi);
  const __mmask8 lanes = (__mmask8)((1u << n) - 1);
  if (shift >= 0)
    s = _mm256_sub_epi32(
        s, _mm256_slli_epi32(_mm256_cvttps_epi32(_mm256_maskz_loadu_ps(lanes, xsum)),
                             (unsigned)shift));
  __m256 dw, mw;
  scales8(w, ws, n, has_m(kind), &dw, &mw);
  const __m256 sc = _mm256_mul_ps(dw, _mm256_maskz_loadu_ps(lanes, xd));
  __m256 t = _mm256_mul_ps(_mm256_cvtepi32_ps(s), sc);
  if (has_m(kind)) t = _mm256_fmadd_ps(mw, _mm256_maskz_loadu_ps(lanes, xsum), t);
  const __m128 u = H == 1 ? _mm256_castps256_ps128(t)
                          : _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
  const __m128 u2 = _mm_add_ps(u, _mm_movehl_ps(u, u)); /* u0 + u2, u1 + u3 */
  return _mm_cvtss_f32(_mm_add_ss(u2, _mm_movehdup_ps(u2)));
}

BODY float dot_1t(const int kind, int64_t nb, const uint8_t *w, const uint8_t *x,
                  const float *xs) {
  const int ws = wsize_of(kind), xsz = xsize_of(kind);
  const int n = short_tail(nb);
  const int64_t nl = nb - n; /* blocks in groups of 16 (the last one perhaps padded) */
  __m512 acc = _mm512_setzero_ps();
  int64_t b0 = 0;
  for (; b0 + 16 <= nl; b0 += 16)
    acc = group_1t(kind, acc, w + b0 * ws, x + b0 * xsz, xs + b0, xs + nb + b0, 16, 1);
  if (b0 < nl)
    acc = group_1t(kind, acc, w + b0 * ws, x + b0 * xsz, xs + b0, xs + nb + b0, (int)(nl - b0), 0);
  const float out = hsum512(acc);
  if (n == 0) return out;
  const uint8_t *wt = w + nl * ws, *xt = x + nl * xsz;
  return out + (n <= 4 ? tail_1t(kind, 1, wt, xt, xs + nl, xs + nb + nl, n)
                       : tail_1t(kind, 2, wt, xt, xs + nl, xs + nb + nl, n));
}

AVX512 void pa_b32_dot_xs_q4_0(int64_t n, float *out, const void *w, const void *x,
                               const float *xs) {
  *out = dot_1t(K_Q4_0, n / 32, w, x, xs);
}
AVX512 void pa_b32_dot_xs_q4_1(int64_t n, float *out, const void *w, const void *x,
                               const float *xs) {
  *out = dot_1t(K_Q4_1, n / 32, w, x, xs);
}
AVX512 void pa_b32_dot_xs_q5_0(int64_t n, float *out, const void *w, const void *x,
                               const float *xs) {
  *out = dot_1t(K_Q5_0, n / 32, w, x, xs);
}
AVX512 void pa_b32_dot_xs_q5_1(int64_t n, float *out, const void *w, const void *x,
                               const float *xs) {
  *out = dot_1t(K_Q5_1, n / 32, w, x, xs);
}
AVX512 void pa_b32_dot_xs_q8_0(int64_t n, float *out, const void *w, const void *x,
                               const float *xs) {
  *out = dot_1t(K_Q8_0, n / 32, w, x, xs);
}

/* ---- GEMM ---- */

/* Tile: GEMM_R rows x GEMM_T tokens (the final transposed sums are
 * written for 4 x 4). */
#define GEMM_R 4
#define GEMM_T 4

/* Packed rows: one record per group of 16 blocks (the last one
 * zero-padded when nb mod 16 > 8), 64-byte aligned, then the short tail's.
 * Weights (640 bytes): q (8 x 64: vector k holds dword k of each block's 32
 * bytes, block j in lane j), d (16 floats), m (16 floats, Q4_1/Q5_1).
 * Activations (704 bytes): q (the same layout), d (16 floats), s (16 floats:
 * Q8_1's s), the integer offset -(sum x << shift) (16 int32), what the
 * one-token kernel gets from pa_prepare_x_sums.
 * Short tail of H halves (4 blocks each, zero past n), weights
 * (WTAIL(H) bytes): q (16 bytes at 128 h + 16 k: dword k of the half's 4
 * blocks), d (4 floats at 128 H + 16 h), m (4 floats at 144 H + 16 h);
 * activations: one 704-byte record per half in the group layout, each
 * 16-byte piece (q: dword k of the 4 blocks; d; s; offset) repeated in the
 * four 128-bit quarters, as the tile's vectors of 4 rows x 4 blocks want. */
#define WREC 640
#define XREC 704
#define REC_D 512
#define REC_M 576
#define REC_OFF 640
#define WTAIL(H) ((160 * (H) + 63) / 64 * 64)

static size_t w_size(int64_t cols) {
  const int64_t nb = cols / 32;
  return (size_t)groups_of(nb) * WREC + (size_t)WTAIL(halves_of(short_tail(nb)));
}
static size_t x_size(int64_t cols) {
  const int64_t nb = cols / 32;
  return (size_t)(groups_of(nb) + halves_of(short_tail(nb))) * XREC;
}

/* 4 blocks' 32 bytes (v[j]) -> a[k] (k < 4) = (dword k | dword k + 4) of
 * each, block j in dword j of the 128-bit half: a 4 x 8 dword transpose.
 * (The callers store the halves straight from these registers: a copy
 * through an array on the stack costs a failed store forward per vector.) */
BODY void transpose4x8(const __m256i v[4], __m256i a[4]) {
  const __m256i t0 = _mm256_unpacklo_epi32(v[0], v[1]), t1 = _mm256_unpackhi_epi32(v[0], v[1]);
  const __m256i t2 = _mm256_unpacklo_epi32(v[2], v[3]), t3 = _mm256_unpackhi_epi32(v[2], v[3]);
  a[0] = _mm256_unpacklo_epi64(t0, t2);
  a[1] = _mm256_unpackhi_epi64(t0, t2);
  a[2] = _mm256_unpacklo_epi64(t1, t3);
  a[3] = _mm256_unpackhi_epi64(t1, t3);
}

/* 16 blocks' 32 bytes (v[j]) -> out[k] (k < 8) = dword k of every block,
 * block j in lane j: a 16 x 8 dword transpose by two-source permutes. */
BODY void transpose16x8(const __m256i v[16], uint8_t *out) {
  __m512i z[8], y[4][2], x[2][2][2];
#pragma GCC unroll 8
  for (int i = 0; i < 8; i++)
    z[i] = _mm512_inserti64x4(_mm512_castsi256_si512(v[2 * i]), v[2 * i + 1], 1);
  const __m512i i1[2] = {
      _mm512_setr_epi32(0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27),
      _mm512_setr_epi32(4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31)};
  const __m512i i2[2] = {
      _mm512_setr_epi32(0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29),
      _mm512_setr_epi32(2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31)};
  const __m512i i3[2] = {
      _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30),
      _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31)};
  for (int i = 0; i < 4; i++) /* blocks 4i..4i+3, dwords 4h..4h+3: lane 4 jj + k' */
    for (int h = 0; h < 2; h++) y[i][h] = _mm512_permutex2var_epi32(z[2 * i], i1[h], z[2 * i + 1]);
  for (int i = 0; i < 2; i++) /* blocks 8i..8i+7, dwords 4h+2q, +1: lane 2 jjj + k'' */
    for (int h = 0; h < 2; h++)
      for (int q = 0; q < 2; q++)
        x[i][h][q] = _mm512_permutex2var_epi32(y[2 * i][h], i2[q], y[2 * i + 1][h]);
  for (int h = 0; h < 2; h++)
    for (int q = 0; q < 2; q++)
      for (int r = 0; r < 2; r++)
        _mm512_store_si512(out + 64 * (4 * h + 2 * q + r),
                           _mm512_permutex2var_epi32(x[0][h][q], i3[r], x[1][h][q]));
}

/* One group's record from its gn <= 16 blocks at blk (zero-padded). */
BODY void pack_w_group(const int kind, const uint8_t *blk, uint8_t *rec, const int gn) {
  const int ws = wsize_of(kind);
  __m256i v[16];
#pragma GCC unroll 16
  for (int j = 0; j < 16; j++)
    v[j] = j < gn ? w_bytes_exact(kind, blk + j * ws) : _mm256_setzero_si256();
  transpose16x8(v, rec);
  __m512 d, m = _mm512_setzero_ps();
  scales16(blk, ws, gn, has_m(kind), &d, &m);
  _mm512_store_ps(rec + REC_D, d);
  _mm512_store_ps(rec + REC_M, m);
}

BODY void pack_w32(const int kind, int64_t cols, const void *w, void *wp) {
  const int64_t nb = cols / 32, ng = groups_of(nb);
  const int ws = wsize_of(kind), n = short_tail(nb), H = halves_of(n);
  const uint8_t *src = w;
  for (int64_t g = 0; g < ng; g++) {
    uint8_t *rec = (uint8_t *)wp + g * WREC;
    const int gn = nb - 16 * g >= 16 ? 16 : (int)(nb - 16 * g);
    const uint8_t *blk = src + 16 * g * ws;
    if (gn == 16) /* unrolled, with the block count known */
      pack_w_group(kind, blk, rec, 16);
    else
      pack_w_group(kind, blk, rec, gn);
  }
  if (!H) return;
  uint8_t *rec = (uint8_t *)wp + ng * WREC;
  const uint8_t *blk = src + 16 * ng * ws;
  for (int h = 0; h < H; h++) {
    __m256i v[4], a[4];
    for (int j = 0; j < 4; j++)
      v[j] = 4 * h + j < n ? w_bytes_exact(kind, blk + (4 * h + j) * ws) : _mm256_setzero_si256();
    transpose4x8(v, a);
    uint8_t *q = rec + 128 * h; /* dwords 0, 1 | 2, 3 | 4, 5 | 6, 7 */
    _mm256_store_si256((__m256i *)q, _mm256_permute2x128_si256(a[0], a[1], 0x20));
    _mm256_store_si256((__m256i *)(q + 32), _mm256_permute2x128_si256(a[2], a[3], 0x20));
    _mm256_store_si256((__m256i *)(q + 64), _mm256_permute2x128_si256(a[0], a[1], 0x31));
    _mm256_store_si256((__m256i *)(q + 96), _mm256_permute2x128_si256(a[2], a[3], 0x31));
  }
  __m256 d, m;
  scales8(blk, ws, n, has_m(kind), &d, &m);
  if (H == 1) {
    _mm_store_ps((float *)(rec + 128), _mm256_castps256_ps128(d));
    _mm_store_ps((float *)(rec + 144), _mm256_castps256_ps128(m));
  } else {
    _mm256_store_ps((float *)(rec + 256), d);
    _mm256_store_ps((float *)(rec + 288), m);
  }
}

/* d, s and offsets of n blocks at blk (zero beyond n, up to `lanes`). */
BODY void x_sums(const int kind, const uint8_t *blk, const int n, const int lanes, float *d,
                 float *s, int32_t *off) {
  const int shift = offset_shift(kind);
  pa_prepare_x_sums(has_m(kind) ? PA_TYPE_Q8_1 : PA_TYPE_Q8_0, blk, 32 * n, d, s);
  for (int j = n; j < lanes; j++) d[j] = s[j] = 0.0f;
  for (int j = 0; j < lanes; j++) {
    off[j] = shift >= 0 && j < n ? -((int32_t)s[j] * (1 << shift)) : 0;
    if (shift >= 0) s[j] = 0.0f; /* Q8_0: the sums live on as off */
  }
}

BODY void pack_x32(const int kind, int64_t cols, const void *xq, void *xp) {
  const int64_t nb = cols / 32, ng = groups_of(nb);
  const int xs = xsize_of(kind), xo = has_m(kind) ? 4 : 2, n = short_tail(nb), H = halves_of(n);
  const uint8_t *src = xq;
  for (int64_t g = 0; g < ng; g++) {
    uint8_t *rec = (uint8_t *)xp + g * XREC;
    const int gn = nb - 16 * g >= 16 ? 16 : (int)(nb - 16 * g);
    const uint8_t *blk = src + 16 * g * xs;
    __m256i v[16];
    for (int j = 0; j < 16; j++) v[j] = j < gn ? load256(blk + j * xs + xo) : _mm256_setzero_si256();
    transpose16x8(v, rec);
    x_sums(kind, blk, gn, 16, (float *)(rec + REC_D), (float *)(rec + REC_M),
           (int32_t *)(rec + REC_OFF));
  }
  if (!H) return;
  const uint8_t *blk = src + 16 * ng * xs;
  _Alignas(32) float d[8], s[8];
  _Alignas(32) int32_t off[8];
  x_sums(kind, blk, n, 8, d, s, off);
  for (int h = 0; h < H; h++) {
    uint8_t *rec = (uint8_t *)xp + (ng + h) * XREC;
    __m256i v[4], a[4];
    for (int j = 0; j < 4; j++)
      v[j] = 4 * h + j < n ? load256(blk + (4 * h + j) * xs + xo) : _mm256_setzero_si256();
    transpose4x8(v, a);
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
      const __m512i b = _mm512_castsi256_si512(a[k]);
      _mm512_store_si512(rec + 64 * k, _mm512_shuffle_i64x2(b, b, 0x00));
      _mm512_store_si512(rec + 64 * (k + 4), _mm512_shuffle_i64x2(b, b, 0x55));
    }
    _mm512_store_ps(rec + REC_D, _mm512_broadcast_f32x4(_mm_load_ps(d + 4 * h)));
    _mm512_store_ps(rec + REC_M, _mm512_broadcast_f32x4(_mm_load_ps(s + 4 * h)));
    _mm512_store_si512(rec + REC_OFF, _mm512_broadcast_i32x4(_mm_load_si128((const __m128i *)(off + 4 * h))));
  }
}

/* lane 4 t + r of the result: hsum512(v[4 r + t]), by the same additions
 * done for 16 vectors at once (lanes i + (i + 8), then within each 128-bit
 * quarter 0 + 2, 1 + 3, then the two). */
BODY __m512 hsum512_x16(const __m512 *v) {
  __m512 u[8], w[4], x[2];
#pragma GCC unroll 8
  for (int m = 0; m < 8; m++) /* lanes 0..7: v[2m] i + i+8; 8..15: v[2m+1] */
    u[m] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * m], v[2 * m + 1], 0x44),
                         _mm512_shuffle_f32x4(v[2 * m], v[2 * m + 1], 0xEE));
#pragma GCC unroll 4
  for (int n = 0; n < 4; n++) /* quarter c: v[4n + c], lanes i + (i + 4) of the 8 */
    w[n] = _mm512_add_ps(_mm512_shuffle_f32x4(u[2 * n], u[2 * n + 1], 0x88),
                         _mm512_shuffle_f32x4(u[2 * n], u[2 * n + 1], 0xDD));
#pragma GCC unroll 2
  for (int p = 0; p < 2; p++) /* quarter c: (v[8p + c]: 0+2, 1+3; v[8p + 4 + c]: 0+2, 1+3) */
    x[p] = _mm512_add_ps(_mm512_shuffle_ps(w[2 * p], w[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(w[2 * p], w[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  /* quarter c: v[c], v[4 + c], v[8 + c], v[12 + c] */
  return _mm512_add_ps(_mm512_shuffle_ps(x[0], x[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_ps(x[0], x[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

/* 16 bytes at p[r] + off in quarter r. */
BODY __m512i quarters(const uint8_t *const *p, const size_t off) {
  __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(p[0] + off)));
  v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p[1] + off)), 1);
  v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p[2] + off)), 2);
  return _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p[3] + off)), 3);
}

/* The short tails of 4 rows x 4 tokens (H halves; wt, xt: the rows' and
 * tokens' tail records), lane 4 t + r. Lane 4 r + j of the vectors below
 * is block 4 h + j of row r; 8 vpdpbusd per token and half. */
BODY __m512 tail_tile(const int kind, const int H, const uint8_t *const *wt,
                      const uint8_t *const *xt) {
  __m512 u[GEMM_T];
#pragma GCC unroll 2
  for (int h = 0; h < H; h++) {
    __m512i wq[8], s[GEMM_T];
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) wq[k] = quarters(wt, (size_t)(128 * h + 16 * k));
#pragma GCC unroll 4
    for (int t = 0; t < GEMM_T; t++)
      s[t] = offset_shift(kind) >= 0 ? _mm512_load_si512(xt[t] + h * XREC + REC_OFF)
                                     : _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++)
#pragma GCC unroll 4
      for (int t = 0; t < GEMM_T; t++) s[t] = dpbusd512(s[t], wq[k], xt[t] + h * XREC + 64 * k);
    const __m512 dw = _mm512_castsi512_ps(quarters(wt, (size_t)(128 * H + 16 * h)));
    const __m512 mw = has_m(kind) ? _mm512_castsi512_ps(quarters(wt, (size_t)(144 * H + 16 * h)))
                                  : _mm512_setzero_ps();
#pragma GCC unroll 4
    for (int t = 0; t < GEMM_T; t++) {
      const __m512 sc = _mm512_mul_ps(dw, _mm512_load_ps(xt[t] + h * XREC + REC_D));
      __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(s[t]), sc);
      if (has_m(kind)) v = _mm512_fmadd_ps(mw, _mm512_load_ps(xt[t] + h * XREC + REC_M), v);
      u[t] = h ? _mm512_add_ps(u[t], v) : v; /* u_j = T_j + T_(j+4) */
    }
  }
  /* quarter r: (u0 + u2, u1 + u3) of tokens 0, 1 (a) and 2, 3 (b) */
  const __m512 a = _mm512_add_ps(_mm512_shuffle_ps(u[0], u[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm512_shuffle_ps(u[0], u[1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 b = _mm512_add_ps(_mm512_shuffle_ps(u[2], u[3], _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm512_shuffle_ps(u[2], u[3], _MM_SHUFFLE(3, 2, 3, 2)));
  /* lane 4 r + t: (u0 + u2) + (u1 + u3) of row r, token t; then transposed */
  const __m512 y = _mm512_add_ps(_mm512_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_permutexvar_ps(
      _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), y);
}

BODY void tile32(const int kind, int64_t cols, const uint8_t *const *wp,
                 const uint8_t *const *xp, float *out, int64_t ldy) {
  const int64_t nb = cols / 32, ng = groups_of(nb);
  const int H = halves_of(short_tail(nb));
  __m512 acc[GEMM_R * GEMM_T];
#pragma GCC unroll 16
  for (int i = 0; i < GEMM_R * GEMM_T; i++) acc[i] = _mm512_setzero_ps();
  for (int64_t g = 0; g < ng; g++) {
    const uint8_t *wr[GEMM_R], *xr[GEMM_T];
#pragma GCC unroll 8
    for (int r = 0; r < GEMM_R; r++) wr[r] = wp[r] + g * WREC;
#pragma GCC unroll 8
    for (int t = 0; t < GEMM_T; t++) xr[t] = xp[t] + g * XREC;
    __m512i s[GEMM_R][GEMM_T];
#pragma GCC unroll 8
    for (int r = 0; r < GEMM_R; r++)
#pragma GCC unroll 8
      for (int t = 0; t < GEMM_T; t++)
        s[r][t] = offset_shift(kind) >= 0 ? _mm512_load_si512(xr[t] + REC_OFF)
                                          : _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) {
      __m512i wq[GEMM_R];
#pragma GCC unroll 8
      for (int r = 0; r < GEMM_R; r++) wq[r] = _mm512_load_si512(wr[r] + 64 * k);
#pragma GCC unroll 8
      for (int t = 0; t < GEMM_T; t++)
#pragma GCC unroll 8
        for (int r = 0; r < GEMM_R; r++) s[r][t] = dpbusd512(s[r][t], wq[r], xr[t] + 64 * k);
    }
#pragma GCC unroll 8
    for (int r = 0; r < GEMM_R; r++) {
      const __m512 dw = _mm512_load_ps(wr[r] + REC_D);
#pragma GCC unroll 8
      for (int t = 0; t < GEMM_T; t++) {
        const __m512 sc = _mm512_mul_ps(dw, _mm512_load_ps(xr[t] + REC_D));
        __m512 a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[r][t]), sc, acc[GEMM_T * r + t]);
        if (has_m(kind))
          a = _mm512_fmadd_ps(_mm512_load_ps(wr[r] + REC_M), _mm512_load_ps(xr[t] + REC_M), a);
        acc[GEMM_T * r + t] = a;
      }
    }
  }
  __m512 sums = hsum512_x16(acc); /* lane 4 t + r */
  if (H) {
    const uint8_t *wt[GEMM_R], *xt[GEMM_T];
#pragma GCC unroll 8
    for (int r = 0; r < GEMM_R; r++) wt[r] = wp[r] + ng * WREC;
#pragma GCC unroll 8
    for (int t = 0; t < GEMM_T; t++) xt[t] = xp[t] + ng * XREC;
    sums = _mm512_add_ps(sums, H == 1 ? tail_tile(kind, 1, wt, xt) : tail_tile(kind, 2, wt, xt));
  }
#pragma GCC unroll 8
  for (int t = 0; t < GEMM_T; t++)
    _mm512_mask_storeu_ps(out + t * ldy - 4 * t, (__mmask16)(0xF << (4 * t)), sums);
}

#define GEMM32(name, kind)                                                                   \
  static AVX512 void pack_w_##name(int64_t cols, const void *w, void *wp) {                  \
    pack_w32(kind, cols, w, wp);                                                             \
  }                                                                                          \
  static AVX512 void pack_x_##name(int64_t cols, const void *xq, void *xp) {                 \
    pack_x32(kind, cols, xq, xp);                                                            \
  }                                                                                          \
  static AVX512 void tile_##name(int64_t cols, const uint8_t *const *wp,                     \
                                 const uint8_t *const *xp, float *out, int64_t ldy) {        \
    tile32(kind, cols, wp, xp, out, ldy);                                                    \
  }                                                                                          \
  const pa_gemm_kernel pa_b32_gemm_##name = {GEMM_R, GEMM_T,        w_size,     pack_w_##name, \
                                             x_size, pack_x_##name, tile_##name};

GEMM32(q4_0, K_Q4_0)
GEMM32(q4_1, K_Q4_1)
GEMM32(q5_0, K_Q5_0)
GEMM32(q5_1, K_Q5_1)
GEMM32(q8_0, K_Q8_0)

#endif /* __x86_64__ */
