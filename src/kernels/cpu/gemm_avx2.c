/* gemm_avx2.c: matrix-matrix kernels for the AVX2 table (AVX2 + FMA + F16C,
 * 16 vector registers). The scheme is gemm_avx512.c's: pa_matmul unpacks a
 * panel of weight rows once, packs each token's activations once, and a
 * tile of GEMM_R rows x GEMM_T tokens keeps the rows' weight blocks in
 * registers while the tokens' blocks pass.
 *
 * Determinism: each (row, token) gets exactly the float operations, in the
 * same order, of avx2.c's one-token kernel for its type: the same integer
 * sums per 32-bit lane (exact, so any instructions giving the same lane
 * values will do), the same products of scales, the same accumulation
 * chains and horizontal sums. Both files are built without floating-point
 * contraction.
 *
 * 32-element blocks (avx2.c's dot_q4_0 ...): per group of 4 blocks,
 * s0 = sc0 f0 then fma(sc2, f2, s0), s1 the same with blocks 1 and 3,
 * acc0 += s0, acc1 += s1; the blocks after the last whole group go into acc0
 * by fma; Q4_1/Q5_1 add up m s per group as ((0 + 1) + (2 + 3)). Here the
 * s of a tile live in registers, acc0 and acc1 in memory (one add each per
 * group). K-quants: the canonical order of gemm_avx512.c's header (exact
 * int32 isum and imin per super-block, then two fmas), with the 8 (row,
 * token) pairs of a tile in the lanes of one vector. */
#if defined(__x86_64__) /* x86 SIMD; other targets have the plain C tables */
#include "kernels/cpu/simd_masks.h"
#include "kernels/kernels.h"

PA_NO_FP_CONTRACT

#include <immintrin.h>
#include <string.h>

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define BODY static inline __attribute__((always_inline)) AVX2

/* ---- helpers (hsum_ps, f16_at: avx2_util.h, shared with avx2.c) ---- */

#include "kernels/cpu/avx2_util.h"

BODY __m256i load256(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }
BODY void store256(void *p, __m256i v) { _mm256_storeu_si256((__m256i *)p, v); }

/* The 32 nibbles of 16 bytes: low nibbles first (elements 0..15), then high. */
BODY __m256i nibbles(const uint8_t *qs) {
  __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
  v = _mm256_srlv_epi32(v, _mm256_set_epi32(4, 4, 4, 4, 0, 0, 0, 0));
  return _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
}

/* ================= 32-element blocks ================= */

enum { K_Q4_0, K_Q4_1, K_Q5_0, K_Q5_1, K_Q8_0 };

#define GEMM_R 2
#define GEMM_T 4

BODY int has_m(const int kind) { return kind == K_Q4_1 || kind == K_Q5_1; }
/* Q4_0/Q5_0: unsigned q against y, less the offset's pair sums. */
BODY int has_off(const int kind) { return kind == K_Q4_0 || kind == K_Q5_0; }

BODY int wsize_of(const int kind) {
  return kind == K_Q4_0   ? (int)sizeof(block_q4_0)
         : kind == K_Q4_1 ? (int)sizeof(block_q4_1)
         : kind == K_Q5_0 ? (int)sizeof(block_q5_0)
         : kind == K_Q5_1 ? (int)sizeof(block_q5_1)
                          : (int)sizeof(block_q8_0);
}

/* Groups of 4 blocks per row, the last maybe partial. */
static int64_t quads_of(int64_t cols) { return (cols / 32 + 3) / 4; }

/* Packed rows: one record per group of 4 blocks; padding blocks are zero.
 * weights: q (4 x 32: unsigned values, |w| for Q8_0); d (4 x 8 floats,
 *   each block's d broadcast); m (4 floats, Q4_1/Q5_1); w (4 x 32: the
 *   signed quants, Q8_0: they give the activations their sign);
 * activations: q (4 x 32); off (4 x 32: pmaddubsw of 8 or 16 against the
 *   quants, Q4_0/Q5_0); d (4 floats); s (4 floats, Q8_1). */
#define W_Q 0
#define W_D 128
#define W_M 256
#define W_S 320
#define W_REC(kind) ((kind) == K_Q8_0 ? 448 : 320)
#define X_Q 0
#define X_OFF 128
#define X_D 256
#define X_S 272
#define X_REC 320

static size_t w_size_q8(int64_t cols) { return (size_t)quads_of(cols) * 448; }
static size_t w_size_32(int64_t cols) { return (size_t)quads_of(cols) * 320; }
static size_t x_size_32(int64_t cols) { return (size_t)quads_of(cols) * X_REC; }

/* The weight bytes the tile multiplies: unsigned values (Q4_0/Q5_0 without
 * their offset), or Q8_0's signed quants. */
BODY __m256i w_bytes(const int kind, const uint8_t *blk) {
  switch (kind) {
    case K_Q4_0:
      return nibbles(blk + 2);
    case K_Q4_1:
      return nibbles(blk + 4);
    case K_Q5_0:
    case K_Q5_1: {
      const uint8_t *qh = blk + (kind == K_Q5_0 ? 2 : 4), *qs = blk + (kind == K_Q5_0 ? 6 : 8);
      return _mm256_or_si256(nibbles(qs),
                             _mm256_and_si256(pa_bits_to_bytes(qh), _mm256_set1_epi8(0x10)));
    }
    default:
      return load256(blk + 2);
  }
}

BODY void pack_w32(const int kind, int64_t cols, const void *w, void *wp) {
  const int64_t nb = cols / 32, nq = quads_of(cols);
  const int ws = wsize_of(kind);
  const uint8_t *src = w;
  for (int64_t g = 0; g < nq; g++) {
    uint8_t *rec = (uint8_t *)wp + g * W_REC(kind);
    float *m = (float *)(rec + W_M);
    for (int k = 0; k < 4; k++) {
      const int64_t b = 4 * g + k;
      const uint8_t *blk = src + b * ws;
      const __m256i q = b < nb ? w_bytes(kind, blk) : _mm256_setzero_si256();
      if (kind == K_Q8_0) {
        store256(rec + W_Q + 32 * k, _mm256_sign_epi8(q, q));
        store256(rec + W_S + 32 * k, q);
      } else {
        store256(rec + W_Q + 32 * k, q);
      }
      _mm256_storeu_ps((float *)(rec + W_D) + 8 * k, _mm256_set1_ps(b < nb ? f16_at(blk) : 0.0f));
      m[k] = b < nb && has_m(kind) ? f16_at(blk + 2) : 0.0f;
    }
    memset(rec + W_M + 16, 0, W_S - W_M - 16);
  }
}

BODY void pack_x32(const int kind, int64_t cols, const void *xq, void *xp) {
  const int64_t nb = cols / 32, nq = quads_of(cols);
  const int pairs = has_m(kind);
  const size_t bs = pairs ? sizeof(block_q8_1) : sizeof(block_q8_0), qo = pairs ? 4 : 2;
  const __m256i off = _mm256_set1_epi8(kind == K_Q4_0 ? 8 : 16);
  const uint8_t *src = xq;
  for (int64_t g = 0; g < nq; g++) {
    uint8_t *rec = (uint8_t *)xp + g * X_REC;
    float *d = (float *)(rec + X_D), *s = (float *)(rec + X_S);
    for (int k = 0; k < 4; k++) {
      const int64_t b = 4 * g + k;
      const uint8_t *blk = src + b * bs;
      const __m256i y = b < nb ? load256(blk + qo) : _mm256_setzero_si256();
      store256(rec + X_Q + 32 * k, y);
      store256(rec + X_OFF + 32 * k, has_off(kind) ? _mm256_maddubs_epi16(off, y) : y);
      d[k] = b < nb ? f16_at(blk) : 0.0f;
      s[k] = b < nb && pairs ? f16_at(blk + 2) : 0.0f;
    }
    memset(rec + X_S + 16, 0, X_REC - X_S - 16);
  }
}

/* One block's 8 lane sums (exact, as avx2.c's qN_sums give them). */
BODY __m256i block_sums(const int kind, __m256i w, const uint8_t *x, const uint8_t *wsigned,
                        const uint8_t *xoff) {
  const __m256i ones = _mm256_set1_epi16(1);
  if (kind == K_Q8_0) {
    const __m256i y = _mm256_sign_epi8(load256(x), load256(wsigned));
    return _mm256_madd_epi16(_mm256_maddubs_epi16(w, y), ones);
  }
  __m256i p = _mm256_maddubs_epi16(w, load256(x));
  if (has_off(kind)) p = _mm256_sub_epi16(p, load256(xoff));
  return _mm256_madd_epi16(p, ones);
}

/* s[r][t] = the products of block k of the group (first: a multiply; else
 * an fma into s), or, for the blocks after the last whole group, acc0 by
 * fma directly (tail). */
BODY void block32(const int kind, const uint8_t *const *wr, const uint8_t *const *xr, const int k,
                  const int first, __m256 s[GEMM_R][GEMM_T]) {
  __m256i wq[GEMM_R];
#pragma GCC unroll 8
  for (int r = 0; r < GEMM_R; r++) wq[r] = load256(wr[r] + W_Q + 32 * k);
#pragma GCC unroll 8
  for (int t = 0; t < GEMM_T; t++) {
    const __m256 dx = _mm256_broadcast_ss((const float *)(xr[t] + X_D) + k);
#pragma GCC unroll 8
    for (int r = 0; r < GEMM_R; r++) {
      const __m256 f = _mm256_cvtepi32_ps(block_sums(kind, wq[r], xr[t] + X_Q + 32 * k,
                                                     wr[r] + W_S + 32 * k,
                                                     xr[t] + X_OFF + 32 * k));
      const __m256 sc = _mm256_mul_ps(_mm256_loadu_ps((const float *)(wr[r] + W_D) + 8 * k), dx);
      s[r][t] = first ? _mm256_mul_ps(sc, f) : _mm256_fmadd_ps(sc, f, s[r][t]);
    }
  }
}

/* ((m0 s0 + m1 s1) + (m2 s2 + m3 s3)) for the first n blocks of a group
 * (n < 4: in turn, as the one-token kernel's tail does). */
BODY float ms_group(const uint8_t *w, const uint8_t *x, const int n, float acc) {
  const __m128 v = _mm_mul_ps(_mm_loadu_ps((const float *)(w + W_M)),
                              _mm_loadu_ps((const float *)(x + X_S)));
  if (n == 4) {
    const __m128 a = _mm_add_ps(v, _mm_shuffle_ps(v, v, 0xB1));
    return acc + _mm_cvtss_f32(_mm_add_ss(a, _mm_movehl_ps(a, a)));
  }
  float lane[4];
  _mm_storeu_ps(lane, v);
  for (int k = 0; k < n; k++) acc += lane[k];
  return acc;
}

BODY void tile32(const int kind, int64_t cols, const uint8_t *const *wp,
                 const uint8_t *const *xp, float *out, int64_t ldy) {
  const int64_t nb = cols / 32, full = nb / 4;
  const size_t wrec = W_REC(kind);
  __m256 acc0[GEMM_R][GEMM_T], acc1[GEMM_R][GEMM_T], s[GEMM_R][GEMM_T];
  float accm[GEMM_R][GEMM_T];
#pragma GCC unroll 8
  for (int r = 0; r < GEMM_R; r++)
#pragma GCC unroll 8
    for (int t = 0; t < GEMM_T; t++) {
      acc0[r][t] = acc1[r][t] = _mm256_setzero_ps();
      accm[r][t] = 0.0f;
    }
  __asm__("" : "+m"(acc0), "+m"(acc1)); /* in memory: one add per group */
  const uint8_t *wr[GEMM_R], *xr[GEMM_T];
  for (int64_t g = 0; g < full; g++) {
#pragma GCC unroll 8
    for (int r = 0; r < GEMM_R; r++) wr[r] = wp[r] + g * wrec;
#pragma GCC unroll 8
    for (int t = 0; t < GEMM_T; t++) xr[t] = xp[t] + g * X_REC;
    block32(kind, wr, xr, 0, 1, s);
    block32(kind, wr, xr, 2, 0, s);
#pragma GCC unroll 8
    for (int r = 0; r < GEMM_R; r++)
#pragma GCC unroll 8
      for (int t = 0; t < GEMM_T; t++) acc0[r][t] = _mm256_add_ps(acc0[r][t], s[r][t]);
    block32(kind, wr, xr, 1, 1, s);
    block32(kind, wr, xr, 3, 0, s);
#pragma GCC unroll 8
    for (int r = 0; r < GEMM_R; r++)
#pragma GCC unroll 8
      for (int t = 0; t < GEMM_T; t++) acc1[r][t] = _mm256_add_ps(acc1[r][t], s[r][t]);
    if (has_m(kind))
#pragma GCC unroll 8
      for (int r = 0; r < GEMM_R; r++)
#pragma GCC unroll 8
        for (int t = 0; t < GEMM_T; t++) accm[r][t] = ms_group(wr[r], xr[t], 4, accm[r][t]);
  }
  const int n = (int)(nb - 4 * full);
  if (n) { /* the tail: each block in turn into acc0 */
#pragma GCC unroll 8
    for (int r = 0; r < GEMM_R; r++) wr[r] = wp[r] + full * wrec;
#pragma GCC unroll 8
    for (int t = 0; t < GEMM_T; t++) xr[t] = xp[t] + full * X_REC;
    for (int k = 0; k < n; k++) {
#pragma GCC unroll 8
      for (int r = 0; r < GEMM_R; r++)
#pragma GCC unroll 8
        for (int t = 0; t < GEMM_T; t++) s[r][t] = acc0[r][t];
      block32(kind, wr, xr, k, 0, s);
#pragma GCC unroll 8
      for (int r = 0; r < GEMM_R; r++)
#pragma GCC unroll 8
        for (int t = 0; t < GEMM_T; t++) acc0[r][t] = s[r][t];
    }
    if (has_m(kind))
#pragma GCC unroll 8
      for (int r = 0; r < GEMM_R; r++)
#pragma GCC unroll 8
        for (int t = 0; t < GEMM_T; t++) accm[r][t] = ms_group(wr[r], xr[t], n, accm[r][t]);
  }
#pragma GCC unroll 8
  for (int r = 0; r < GEMM_R; r++)
#pragma GCC unroll 8
    for (int t = 0; t < GEMM_T; t++) {
      float sum = hsum_ps(_mm256_add_ps(acc0[r][t], acc1[r][t]));
      if (has_m(kind)) sum += accm[r][t];
      out[t * ldy + r] = sum;
    }
}

#define GEMM32(name, kind, wsize)                                                             \
  static AVX2 void pack_w_##name(int64_t cols, const void *w, void *wp) {                     \
    pack_w32(kind, cols, w, wp);                                                              \
  }                                                                                           \
  static AVX2 void pack_x_##name(int64_t cols, const void *xq, void *xp) {                    \
    pack_x32(kind, cols, xq, xp);                                                             \
  }                                                                                           \
  static AVX2 void tile_##name(int64_t cols, const uint8_t *const *wp,                        \
                               const uint8_t *const *xp, float *out, int64_t ldy) {                        \
    tile32(kind, cols, wp, xp, out, ldy);                                                          \
  }                                                                                           \
  static const pa_gemm_kernel gemm_##name = {GEMM_R,    GEMM_T,         wsize,      pack_w_##name, \
                                             x_size_32, pack_x_##name, tile_##name};

GEMM32(q4_0, K_Q4_0, w_size_32)
GEMM32(q4_1, K_Q4_1, w_size_32)
GEMM32(q5_0, K_Q5_0, w_size_32)
GEMM32(q5_1, K_Q5_1, w_size_32)
GEMM32(q8_0, K_Q8_0, w_size_q8)

/* ================= K-quants against Q8_K ================= */

#define GEMM_KR 2
#define GEMM_KT 4

/* Packed Q8_K row, a 320-byte record per super-block: qs (256), bsums
 * (16 int16), the sums of sub-blocks of 32 (8 int16: bsums[2j] +
 * bsums[2j + 1], as pmaddwd's operand for the Q4_K/Q5_K min sums), d. */
#define XK_REC 320
#define XK_BSUMS 256
#define XK_BS8 288
#define XK_D 304
static size_t xk_size(int64_t cols) { return (size_t)(cols / QK_K) * XK_REC; }

static AVX2 void pack_x_q8_K(int64_t cols, const void *xq, void *xp) {
  const block_q8_K *b = xq;
  for (int64_t i = 0; i < cols / QK_K; i++) {
    uint8_t *rec = (uint8_t *)xp + i * XK_REC;
    memcpy(rec, b[i].qs, QK_K);
    memcpy(rec + XK_BSUMS, b[i].bsums, 32);
    _mm_storeu_si128((__m128i *)(rec + XK_BS8),
                     _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)b[i].bsums),
                                    _mm_loadu_si128((const __m128i *)(b[i].bsums + 8))));
    memcpy(rec + XK_D, &b[i].d, 4);
    memset(rec + XK_D + 4, 0, XK_REC - XK_D - 4);
  }
}

/* Packed Q4_K/Q5_K and Q6_K rows, a 576-byte record per super-block: q
 * (256, values in element order); eight 32-byte scale operands, one per 32
 * elements (Q4_K/Q5_K: sub-block j's scale in every word; Q6_K: the scales
 * of its two groups of 16, as avx2.c's pair_scales); then Q4_K/Q5_K: the 8
 * mins as int16, d, dmin; Q6_K: the 16 scales as int16, d. */
#define KW_REC 576
#define KW_S 256
#define KW_M 512 /* Q4_K/Q5_K mins; Q6_K: the 16 scales */
#define KW_D 544
#define KW_DMIN 548
static size_t kw_size(int64_t cols) { return (size_t)(cols / QK_K) * KW_REC; }

BODY void pack_k4(const int has_qh, int64_t cols, const void *w, void *wp) {
  const size_t bs = has_qh ? sizeof(block_q5_K) : sizeof(block_q4_K);
  for (int64_t i = 0; i < cols / QK_K; i++) {
    const uint8_t *blk = (const uint8_t *)w + i * bs;
    const uint8_t *scales = blk + 4, *qh = blk + 16, *qs = blk + (has_qh ? 48 : 16);
    uint8_t *rec = (uint8_t *)wp + i * KW_REC;
    __m256i qhv = has_qh ? load256(qh) : _mm256_setzero_si256();
    for (int c = 0; c < 4; c++) {
      const __m256i q = load256(qs + 32 * c);
      __m256i lo = _mm256_and_si256(q, _mm256_set1_epi8(0x0F));
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), _mm256_set1_epi8(0x0F));
      if (has_qh) {
        lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(qhv, 4), _mm256_set1_epi8(0x10)));
        hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(qhv, 3), _mm256_set1_epi8(0x10)));
        qhv = _mm256_srli_epi16(qhv, 2);
      }
      store256(rec + 64 * c, lo);
      store256(rec + 64 * c + 32, hi);
    }
    int16_t *m16 = (int16_t *)(rec + KW_M);
    for (int j = 0; j < 8; j++) {
      uint8_t sc, m;
      pa_get_scale_min_k4(j, scales, &sc, &m);
      store256(rec + KW_S + 32 * j, _mm256_set1_epi16(sc));
      m16[j] = m;
    }
    memset(rec + KW_M + 16, 0, KW_D - KW_M - 16);
    const float d = f16_at(blk), dmin = f16_at(blk + 2);
    memcpy(rec + KW_D, &d, 4);
    memcpy(rec + KW_DMIN, &dmin, 4);
    memset(rec + KW_DMIN + 4, 0, KW_REC - KW_DMIN - 4);
  }
}

static AVX2 void pack_w_q4_K(int64_t cols, const void *w, void *wp) { pack_k4(0, cols, w, wp); }
static AVX2 void pack_w_q5_K(int64_t cols, const void *w, void *wp) { pack_k4(1, cols, w, wp); }

static AVX2 void pack_w_q6_K(int64_t cols, const void *w, void *wp) {
  const block_q6_K *a = w;
  const __m256i mask4 = _mm256_set1_epi8(0x0F), mask2 = _mm256_set1_epi8(0x30);
  for (int64_t i = 0; i < cols / QK_K; i++) {
    uint8_t *rec = (uint8_t *)wp + i * KW_REC;
    for (int h = 0; h < 2; h++) { /* as avx2.c's dot_q6_K */
      const __m256i l0 = load256(a[i].ql + 64 * h), l1 = load256(a[i].ql + 64 * h + 32);
      const __m256i qh = load256(a[i].qh + 32 * h);
      uint8_t *q = rec + 128 * h;
      store256(q, _mm256_or_si256(_mm256_and_si256(l0, mask4),
                                  _mm256_and_si256(_mm256_slli_epi16(qh, 4), mask2)));
      store256(q + 32, _mm256_or_si256(_mm256_and_si256(l1, mask4),
                                       _mm256_and_si256(_mm256_slli_epi16(qh, 2), mask2)));
      store256(q + 64, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), mask4),
                                       _mm256_and_si256(qh, mask2)));
      store256(q + 96, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), mask4),
                                       _mm256_and_si256(_mm256_srli_epi16(qh, 2), mask2)));
    }
    for (int k = 0; k < 8; k++) /* 32 elements: groups 2k, 2k + 1 */
      store256(rec + KW_S + 32 * k,
               _mm256_setr_m128i(_mm_set1_epi16(a[i].scales[2 * k]),
                                 _mm_set1_epi16(a[i].scales[2 * k + 1])));
    store256(rec + KW_M, _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)a[i].scales)));
    const float d = f16_at(&a[i].d);
    memcpy(rec + KW_D, &d, 4);
    memset(rec + KW_D + 4, 0, KW_REC - KW_D - 4);
  }
}

/* The grid I-quants (IQ2_XXS ... IQ1_M) in the Q6_K record: values v + 64
 * (|v| <= 62, so the unsigned bytes stay below 128 and pmaddubsw's pairs
 * below 2^15), the scale factors (2s + 1) per 16 as Q6_K's scales, and
 * dw (iq_grid_avx2.c's decoders, its dot kernels' float steps). */
BODY void pack_grid(const pa_type type, int64_t cols, const void *w, void *wp) {
  const size_t bs = pa_type_get(type)->type_size;
  _Alignas(32) int8_t v[QK_K];
  _Alignas(32) int16_t sc[16];
  for (int64_t i = 0; i < cols / QK_K; i++) {
    uint8_t *rec = (uint8_t *)wp + i * KW_REC;
    const float dw = pa_iq_grid_unpack_avx2(type, (const uint8_t *)w + (size_t)i * bs, v, sc);
    for (int k = 0; k < QK_K / 32; k++) {
      store256(rec + 32 * k, _mm256_add_epi8(load256(v + 32 * k), _mm256_set1_epi8(64)));
      store256(rec + KW_S + 32 * k,
               _mm256_setr_m128i(_mm_set1_epi16(sc[2 * k]), _mm_set1_epi16(sc[2 * k + 1])));
    }
    memcpy(rec + KW_M, sc, sizeof sc);
    memcpy(rec + KW_D, &dw, 4);
    memset(rec + KW_D + 4, 0, KW_REC - KW_D - 4);
  }
}

#define PACK_GRID(name, type)                                             \
  static AVX2 void pack_w_##name(int64_t cols, const void *w, void *wp) { \
    pack_grid(type, cols, w, wp);                                         \
  }
PACK_GRID(iq2_xxs, PA_TYPE_IQ2_XXS)
PACK_GRID(iq2_xs, PA_TYPE_IQ2_XS)
PACK_GRID(iq2_s, PA_TYPE_IQ2_S)
PACK_GRID(iq3_xxs, PA_TYPE_IQ3_XXS)
PACK_GRID(iq3_s, PA_TYPE_IQ3_S)
PACK_GRID(iq1_s, PA_TYPE_IQ1_S)
PACK_GRID(iq1_m, PA_TYPE_IQ1_M)

/* The 4 tokens' totals of row r's vectors v[0..3] (8 or 4 int32 lanes). */
BODY __m128i hsum4x8(const __m256i *v) {
  const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}
BODY __m128i hsum4x4(const __m128i *v) {
  return _mm_hadd_epi32(_mm_hadd_epi32(v[0], v[1]), _mm_hadd_epi32(v[2], v[3]));
}

/* kind: 4 (Q4_K/Q5_K), 6 (Q6_K) or 7 (the grid I-quants: Q6_K's record
 * with values offset by 64 rather than 32), in the canonical K-quant order
 * (gemm_avx512.c's header): the exact isum (and imin) of the 8 (row, token)
 * pairs in lane 4 r + t, then the float steps on 8 lanes at once. */
BODY void tile_k_loop(const int kind, int64_t cols, const uint8_t *const *wp,
                      const uint8_t *const *xp, __m256 *acc_io, __m256 *accm_io) {
  const int64_t nsb = cols / QK_K;
  __m256 acc = *acc_io, accm = *accm_io;
  for (int64_t i = 0; i < nsb; i++) {
    const uint8_t *wr[GEMM_KR], *xr[GEMM_KT];
#pragma GCC unroll 8
    for (int r = 0; r < GEMM_KR; r++) wr[r] = wp[r] + i * KW_REC;
#pragma GCC unroll 8
    for (int t = 0; t < GEMM_KT; t++) xr[t] = xp[t] + i * XK_REC;
    __m256i isum[GEMM_KR][GEMM_KT];
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) {
      __m256i wq[GEMM_KR];
#pragma GCC unroll 8
      for (int r = 0; r < GEMM_KR; r++) wq[r] = load256(wr[r] + 32 * j);
#pragma GCC unroll 8
      for (int t = 0; t < GEMM_KT; t++) {
        const __m256i x = load256(xr[t] + 32 * j);
#pragma GCC unroll 8
        for (int r = 0; r < GEMM_KR; r++) {
          const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(wq[r], x),
                                              load256(wr[r] + KW_S + 32 * j));
          isum[r][t] = j == 0 ? p : _mm256_add_epi32(isum[r][t], p);
        }
      }
    }
    __m128i tot[GEMM_KR], mins[GEMM_KR];
#pragma GCC unroll 8
    for (int r = 0; r < GEMM_KR; r++) {
      if (kind >= 6) { /* values are q - 32 (q - 64): 32 (64) sum_g sc_g bsums_g comes off */
#pragma GCC unroll 8
        for (int t = 0; t < GEMM_KT; t++)
          isum[r][t] = _mm256_sub_epi32(
              isum[r][t],
              _mm256_slli_epi32(_mm256_madd_epi16(load256(xr[t] + XK_BSUMS), load256(wr[r] + KW_M)),
                                kind == 6 ? 5 : 6));
      } else {
        __m128i ms[GEMM_KT];
#pragma GCC unroll 8
        for (int t = 0; t < GEMM_KT; t++)
          ms[t] = _mm_madd_epi16(_mm_loadu_si128((const __m128i *)(xr[t] + XK_BS8)),
                                 _mm_loadu_si128((const __m128i *)(wr[r] + KW_M)));
        mins[r] = hsum4x4(ms);
      }
      tot[r] = hsum4x8(isum[r]);
    }
    const __m128 dx4 = _mm_setr_ps(*(const float *)(xr[0] + XK_D), *(const float *)(xr[1] + XK_D),
                                   *(const float *)(xr[2] + XK_D), *(const float *)(xr[3] + XK_D));
    const __m256 dx = _mm256_setr_m128(dx4, dx4);
    const __m256 dw = _mm256_setr_m128(_mm_set1_ps(*(const float *)(wr[0] + KW_D)),
                                       _mm_set1_ps(*(const float *)(wr[1] + KW_D)));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_setr_m128i(tot[0], tot[1])),
                          _mm256_mul_ps(dw, dx), acc);
    if (kind < 6) {
      const __m256 dmin = _mm256_setr_m128(_mm_set1_ps(*(const float *)(wr[0] + KW_DMIN)),
                                           _mm_set1_ps(*(const float *)(wr[1] + KW_DMIN)));
      accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_setr_m128i(mins[0], mins[1])),
                             _mm256_mul_ps(dmin, dx), accm);
    }
  }
  *acc_io = acc;
  *accm_io = accm;
}

BODY void tile_k_end(const int kind, __m256 acc, __m256 accm, float *out, int64_t ldy) {
  float res[8];
  _mm256_storeu_ps(res, kind >= 6 ? acc : _mm256_sub_ps(acc, accm));
#pragma GCC unroll 8
  for (int r = 0; r < GEMM_KR; r++)
#pragma GCC unroll 8
    for (int t = 0; t < GEMM_KT; t++) out[t * ldy + r] = res[4 * r + t];
}

BODY void tile_k(const int kind, int64_t cols, const uint8_t *const *wp, const uint8_t *const *xp,
                 float *out, int64_t ldy) {
  __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
  tile_k_loop(kind, cols, wp, xp, &acc, &accm);
  tile_k_end(kind, acc, accm, out, ldy);
}

/* K-blocked (pa_gemm_parts): acc[0..7] and acc[8..15] hold the chains
 * between parts. */
#define K_ACC_FLOATS 16

#define GEMMK(name, kind, pack)                                                                 \
  static AVX2 void tile_##name(int64_t cols, const uint8_t *const *wp,                         \
                               const uint8_t *const *xp, float *out, int64_t ldy) {            \
    tile_k(kind, cols, wp, xp, out, ldy);                                                      \
  }                                                                                            \
  static AVX2 void tile_part_##name(int64_t cols, const uint8_t *const *wp,                    \
                                    const uint8_t *const *xp, float *acc) {                    \
    __m256 a = _mm256_load_ps(acc), am = _mm256_load_ps(acc + 8);                              \
    tile_k_loop(kind, cols, wp, xp, &a, &am);                                                  \
    _mm256_store_ps(acc, a);                                                                   \
    _mm256_store_ps(acc + 8, am);                                                              \
  }                                                                                            \
  static AVX2 void tile_end_##name(const float *acc, float *out, int64_t ldy) {                \
    tile_k_end(kind, _mm256_load_ps(acc), _mm256_load_ps(acc + 8), out, ldy);                  \
  }                                                                                            \
  static const pa_gemm_kernel gemm_##name = {GEMM_KR, GEMM_KT,     kw_size,    pack,           \
                                             xk_size, pack_x_q8_K, tile_##name};               \
  static const pa_gemm_parts parts_##name = {&gemm_##name, QK_K, K_ACC_FLOATS, tile_part_##name, \
                                             tile_end_##name};

GEMMK(q4_K, 4, pack_w_q4_K)
GEMMK(q5_K, 4, pack_w_q5_K)
GEMMK(q6_K, 6, pack_w_q6_K)
GEMMK(iq2_xxs, 7, pack_w_iq2_xxs)
GEMMK(iq2_xs, 7, pack_w_iq2_xs)
GEMMK(iq2_s, 7, pack_w_iq2_s)
GEMMK(iq3_xxs, 7, pack_w_iq3_xxs)
GEMMK(iq3_s, 7, pack_w_iq3_s)
GEMMK(iq1_s, 7, pack_w_iq1_s)
GEMMK(iq1_m, 7, pack_w_iq1_m)

void pa_kernels_fill_avx2_gemm(const pa_gemm_kernel **t) {
  t[PA_TYPE_Q4_0] = &gemm_q4_0;
  t[PA_TYPE_Q4_1] = &gemm_q4_1;
  t[PA_TYPE_Q5_0] = &gemm_q5_0;
  t[PA_TYPE_Q5_1] = &gemm_q5_1;
  t[PA_TYPE_Q8_0] = &gemm_q8_0;
  t[PA_TYPE_Q4_K] = &gemm_q4_K;
  t[PA_TYPE_Q5_K] = &gemm_q5_K;
  t[PA_TYPE_Q6_K] = &gemm_q6_K;
  t[PA_TYPE_IQ2_XXS] = &gemm_iq2_xxs;
  t[PA_TYPE_IQ2_XS] = &gemm_iq2_xs;
  t[PA_TYPE_IQ2_S] = &gemm_iq2_s;
  t[PA_TYPE_IQ3_XXS] = &gemm_iq3_xxs;
  t[PA_TYPE_IQ3_S] = &gemm_iq3_s;
  t[PA_TYPE_IQ1_S] = &gemm_iq1_s;
  t[PA_TYPE_IQ1_M] = &gemm_iq1_m;
}

const pa_gemm_parts *pa_gemm_parts_avx2(const pa_gemm_kernel *g) {
  const pa_gemm_parts *all[] = {&parts_q4_K,   &parts_q5_K,  &parts_q6_K,    &parts_iq2_xxs,
                                &parts_iq2_xs, &parts_iq2_s, &parts_iq3_xxs, &parts_iq3_s,
                                &parts_iq1_s,  &parts_iq1_m};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (all[i]->gemm == g) return all[i];
  return NULL;
}

#endif /* __x86_64__ */
