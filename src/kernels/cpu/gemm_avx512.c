/* gemm_avx512.c: matrix-matrix kernels (prefill, batched decode) for the
 * AVX-512 tables, with and without VNNI. pa_matmul (matmul.c) unpacks a
 * panel of weight rows once (pack_w), packs each token's quantized
 * activations once (pack_x), and calls `tile` for GEMM_R rows x GEMM_T
 * tokens at a time: the weight blocks of GEMM_R rows stay in registers
 * while GEMM_T tokens' blocks pass, each (row, token) accumulating in its
 * own register.
 *
 * Determinism: for every (row, token) a tile computes exactly the float
 * operations, in the same order, of the table's one-token kernel
 * (avx512.c: dot32 with prepared activations; dot_k4; dot_q6_K_body):
 * the same integer sums per 32-bit lane (integer sums are exact, so any
 * instruction sequence giving the same lane values will do), the same
 * float products, the same accumulation chains and the same final
 * horizontal sums. So y[t][r] has the same bits whatever the batch, and
 * pa_matmul may pick either path for any n_tokens. Both files are built
 * with floating-point contraction off, so the compiler cannot fuse a
 * multiply and an add in one file and not in the other.
 *
 * 32-element blocks. The one-token kernel keeps four 8-lane accumulators:
 * acc[k & 3] takes block k of each group of 8, and the blocks of a last,
 * partial group all go to acc[0]. Here two blocks are interleaved by dwords
 * (dword j of block 2p in lane 2j, of block 2p+1 in lane 2j+1), so one
 * 512-bit vpdpbusd gives both blocks' 8 lane sums, and one 512-bit
 * accumulator holds acc[0] (even lanes) and acc[1] (odd lanes); a second
 * pass over the other pairs of each group fills acc[2] and acc[3]. The
 * products of scales d_w * d_x come from one multiply of two broadcast
 * (d, d) pairs. The per-block offsets (8, 16 or 128 times d_w d_x sum x, or
 * m s) are an 8-lane chain of their own, as in the one-token kernel.
 *
 * K-quants: the same integer lanes per super-block, then the same fma into
 * the same 8 or 16 float lanes. */
#include "kernels/kernels.h"
#include "kernels/cpu/blocks32_avx512.h"

PA_NO_FP_CONTRACT

#include <immintrin.h>
#include <string.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))
#define BODY static inline __attribute__((always_inline)) AVX512

/* ---- helpers (the same instruction sequences as avx512.c) ---- */

BODY float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

BODY __m512i load512(const void *p) { return _mm512_loadu_si512(p); }
BODY __m256i load256(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* Two floats at p as (a, b, a, b, ...). */
BODY __m512 bcast_pair(const float *p) {
  double d;
  memcpy(&d, p, 8);
  return _mm512_castpd_ps(_mm512_set1_pd(d));
}

/* Dword j of a in lane 2j, of b in lane 2j + 1. */
BODY __m512i interleave_dwords(__m256i a, __m256i b) {
  const __m512i idx =
      _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  return _mm512_permutex2var_epi32(_mm512_castsi256_si512(a), idx, _mm512_castsi256_si512(b));
}

/* ================= 32-element blocks ================= */

/* (The plain AVX-512 table's; the VNNI table takes blocks32_avx512.c's.) */

enum { K_Q4_0, K_Q4_1, K_Q5_0, K_Q5_1, K_Q8_0 };

/* Tile shape: GEMM_R rows x GEMM_T tokens, one 512-bit accumulator each
 * (the final sums below are written for 4 x 4). */
#define GEMM_R 4
#define GEMM_T 4

/* Groups of 8 blocks per row, the last one maybe partial. */
static int64_t groups_of(int64_t cols) { return (cols / 32 + 7) / 8; }

/* Packed rows are records of one group of 8 blocks, each record 64-byte
 * aligned so that no load splits a cache line:
 * weights (384 bytes): q, the unsigned bytes the one-token kernel feeds its
 *   dot, four pairs of blocks interleaved by dwords (256); d (8 floats);
 *   m (8 floats, Q4_1 and Q5_1); neg (4 64-bit masks of the pairs' negative
 *   quants: Q8_0 without VNNI, whose dot is |w| against x with w's sign);
 * activations (320 bytes): q (256, the same interleaving); d (8 floats);
 *   sum (8 floats: sum of the quants for Q8_0, s for Q8_1), as
 *   pa_prepare_x_sums gives them to the one-token kernel.
 * Blocks past the end of the row are zero. */
#define WREC 384
#define XREC 320
#define REC_D 256
#define REC_M 288
#define REC_NEG 320
static size_t w32_size(int64_t cols) { return (size_t)groups_of(cols) * WREC; }
static size_t x32_size(int64_t cols) { return (size_t)groups_of(cols) * XREC; }

BODY int has_m(const int kind) { return kind == K_Q4_1 || kind == K_Q5_1; }

/* What the prepared one-token kernel subtracts per block, times d d sum x. */
BODY float block_offset(const int kind, const int vnni) {
  return kind == K_Q4_0 ? 8.0f : kind == K_Q5_0 ? 16.0f : kind == K_Q8_0 && vnni ? 128.0f : 0.0f;
}

BODY int wsize_of(const int kind) {
  return kind == K_Q4_0   ? (int)sizeof(block_q4_0)
         : kind == K_Q4_1 ? (int)sizeof(block_q4_1)
         : kind == K_Q5_0 ? (int)sizeof(block_q5_0)
         : kind == K_Q5_1 ? (int)sizeof(block_q5_1)
                          : (int)sizeof(block_q8_0);
}

/* The 32 unsigned (or, for Q8_0 without VNNI, signed) weight bytes of one
 * block in element order, as avx512.c's block_sums feeds them to its dot
 * when the activations are prepared. */
BODY __m256i w32_bytes(const int kind, const uint8_t *blk, const int vnni) {
  switch (kind) {
    case K_Q4_0:
    case K_Q4_1: {
      const uint8_t *qs = blk + (kind == K_Q4_0 ? 2 : 4);
      const __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
      if (vnni) /* high nibbles stay in place (16x); undone at the end */
        return _mm256_and_si256(v, _mm256_setr_epi64x(0x0F0F0F0F0F0F0F0F, 0x0F0F0F0F0F0F0F0F,
                                                      (long long)0xF0F0F0F0F0F0F0F0ULL,
                                                      (long long)0xF0F0F0F0F0F0F0F0ULL));
      return _mm256_and_si256(_mm256_srlv_epi64(v, _mm256_setr_epi64x(0, 0, 4, 4)),
                              _mm256_set1_epi8(0x0F));
    }
    case K_Q5_0:
    case K_Q5_1: {
      const uint8_t *qh = blk + (kind == K_Q5_0 ? 2 : 4), *qs = blk + (kind == K_Q5_0 ? 6 : 8);
      uint32_t bits;
      memcpy(&bits, qh, 4);
      const __m256i v = _mm256_and_si256(
          _mm256_srlv_epi64(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs)),
                            _mm256_setr_epi64x(0, 0, 4, 4)),
          _mm256_set1_epi8(0x0F));
      return _mm256_mask_add_epi8(v, (__mmask32)bits, v, _mm256_set1_epi8(16));
    }
    default: {
      const __m256i q = load256(blk + 2);
      return vnni ? _mm256_xor_si256(q, _mm256_set1_epi8((char)0x80)) : q;
    }
  }
}

BODY void pack_w32(const int kind, const int vnni, int64_t cols, const void *w, void *wp) {
  const int64_t nb = cols / 32, ng = groups_of(cols);
  const int ws = wsize_of(kind);
  const uint8_t *src = w;
  for (int64_t g = 0; g < ng; g++) {
    uint8_t *rec = (uint8_t *)wp + g * WREC;
    float *d = (float *)(rec + REC_D), *m = (float *)(rec + REC_M);
    uint64_t *neg = (uint64_t *)(rec + REC_NEG);
    for (int p = 0; p < 4; p++) {
      const int64_t b0 = 8 * g + 2 * p, b1 = b0 + 1;
      const __m256i a = b0 < nb ? w32_bytes(kind, src + b0 * ws, vnni) : _mm256_setzero_si256();
      const __m256i b = b1 < nb ? w32_bytes(kind, src + b1 * ws, vnni) : _mm256_setzero_si256();
      __m512i v = interleave_dwords(a, b);
      neg[p] = 0;
      if (kind == K_Q8_0 && !vnni) {
        neg[p] = _mm512_movepi8_mask(v);
        v = _mm512_abs_epi8(v);
      }
      _mm512_storeu_si512(rec + 64 * p, v);
    }
    for (int k = 0; k < 8; k++) {
      const int64_t b = 8 * g + k;
      uint16_t h = 0, hm = 0;
      if (b < nb) {
        memcpy(&h, src + b * ws, 2);
        if (has_m(kind)) memcpy(&hm, src + b * ws + 2, 2);
      }
      d[k] = _cvtsh_ss(h);
      m[k] = _cvtsh_ss(hm);
    }
    memset(rec + REC_NEG + 32, 0, WREC - REC_NEG - 32);
  }
}

BODY void pack_x32(const pa_type act, int64_t cols, const void *xq, void *xp) {
  const int64_t nb = cols / 32, ng = groups_of(cols);
  const size_t bs = act == PA_TYPE_Q8_1 ? sizeof(block_q8_1) : sizeof(block_q8_0);
  const size_t qo = act == PA_TYPE_Q8_1 ? 4 : 2;
  const uint8_t *src = xq;
  for (int64_t g = 0; g < ng; g++) {
    uint8_t *rec = (uint8_t *)xp + g * XREC;
    for (int p = 0; p < 4; p++) {
      const int64_t b0 = 8 * g + 2 * p, b1 = b0 + 1;
      const __m256i a = b0 < nb ? load256(src + b0 * bs + qo) : _mm256_setzero_si256();
      const __m256i b = b1 < nb ? load256(src + b1 * bs + qo) : _mm256_setzero_si256();
      _mm512_storeu_si512(rec + 64 * p, interleave_dwords(a, b));
    }
    const int64_t n = nb - 8 * g < 8 ? nb - 8 * g : 8;
    float *d = (float *)(rec + REC_D), *s = (float *)(rec + REC_M);
    pa_prepare_x_sums(act, src + 8 * g * bs, 32 * n, d, s);
    for (int64_t k = n; k < 8; k++) d[k] = s[k] = 0.0f;
  }
}

/* Both blocks' 8 lane sums of one interleaved pair (see block_sums in
 * avx512.c: the same integers lane by lane). */
BODY __m512i pair_sums(const int kind, const int vnni, __m512i w, const uint8_t *x,
                       __mmask64 neg) {
  if (vnni) { /* from a zero idiom (no uop on a port), not a copy of a zero register */
    __m512i acc;
    __asm__("vpxord %0, %0, %0\n\tvpdpbusd %2, %1, %0" : "=&v"(acc) : "v"(w), "m"(*(const __m512i *)x));
    return acc;
  }
  __m512i xv = load512(x);
  if (kind == K_Q8_0) xv = _mm512_mask_sub_epi8(xv, neg, _mm512_setzero_si512(), xv);
  return _mm512_madd_epi16(_mm512_maddubs_epi16(w, xv), _mm512_set1_epi16(1));
}

/* acc[r][t] += pair p of the group at wr[r], xr[t]: both blocks, their
 * lanes interleaved. With `tail`, the pair's blocks are those of a last,
 * partial group and go in turn into acc[0] (even lanes), the second only
 * when `second`. */
BODY void pair32(const int kind, const int vnni, const uint8_t *const *wr,
                 const uint8_t *const *xr, const int p, const int tail, const int second,
                 __m512 acc[GEMM_R][GEMM_T]) {
  __m512i wq[GEMM_R];
  __m512 wd[GEMM_R];
  __mmask64 neg[GEMM_R];
#pragma GCC unroll 8
  for (int r = 0; r < GEMM_R; r++) {
    wq[r] = load512(wr[r] + 64 * p);
    wd[r] = bcast_pair((const float *)(wr[r] + REC_D) + 2 * p);
    neg[r] = 0;
    if (kind == K_Q8_0 && !vnni) memcpy(&neg[r], wr[r] + REC_NEG + 8 * p, 8);
  }
#pragma GCC unroll 8
  for (int t = 0; t < GEMM_T; t++) {
    const __m512 dx = bcast_pair((const float *)(xr[t] + REC_D) + 2 * p);
#pragma GCC unroll 8
    for (int r = 0; r < GEMM_R; r++) {
      const __m512 f = _mm512_cvtepi32_ps(pair_sums(kind, vnni, wq[r], xr[t] + 64 * p, neg[r]));
      const __m512 sc = _mm512_mul_ps(wd[r], dx);
      if (!tail) {
        acc[r][t] = _mm512_fmadd_ps(sc, f, acc[r][t]);
      } else {
        acc[r][t] = _mm512_mask3_fmadd_ps(sc, f, acc[r][t], 0x5555);
        if (second) /* block 2p + 1: its lanes moved to the even ones */
          acc[r][t] = _mm512_mask3_fmadd_ps(_mm512_permute_ps(sc, 0xB1),
                                            _mm512_permute_ps(f, 0xB1), acc[r][t], 0x5555);
      }
    }
  }
}

/* hsum256 of the 8 even lanes of each of v[0..15] (what the one-token
 * kernel sums after compacting them), in lane k of the result: the same
 * additions (lanes j + j + 8, then 0 + 4 and 2 + 6 of those, then the two),
 * done for four vectors per instruction. */
BODY __m512 hsum16_even(const __m512 *v) {
  __m512 u[8], w[4], f[2];
#pragma GCC unroll 8
  for (int m = 0; m < 8; m++) /* 256-bit half h: v[2m + h], lanes 2i: lanes 2i + 2i + 8 */
    u[m] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * m], v[2 * m + 1], 0x44),
                         _mm512_shuffle_f32x4(v[2 * m], v[2 * m + 1], 0xEE));
#pragma GCC unroll 4
  for (int n = 0; n < 4; n++) /* 128-bit lane j: v[4n + j], w0 at 0, w1 at 2 */
    w[n] = _mm512_add_ps(_mm512_shuffle_f32x4(u[2 * n], u[2 * n + 1], 0x88),
                         _mm512_shuffle_f32x4(u[2 * n], u[2 * n + 1], 0xDD));
#pragma GCC unroll 2
  for (int p = 0; p < 2; p++) /* lane 4j: v[8p + j]; lane 4j + 2: v[8p + 4 + j] */
    f[p] = _mm512_add_ps(_mm512_shuffle_ps(w[2 * p], w[2 * p + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_ps(w[2 * p], w[2 * p + 1], _MM_SHUFFLE(0, 2, 0, 2)));
  return _mm512_permutex2var_ps(
      f[0], _mm512_setr_epi32(0, 4, 8, 12, 2, 6, 10, 14, 16, 20, 24, 28, 18, 22, 26, 30), f[1]);
}

/* hsum256 of both 256-bit halves of ao[r][h] (tokens 2h and 2h + 1 of row
 * r), in lane 4 t + r of the result. */
BODY __m512 hsum16_pairs(__m512 ao[GEMM_R][2]) {
  __m512 u[4], w[2];
#pragma GCC unroll 4
  for (int n = 0; n < 4; n++) { /* z = 2n, 2n + 1 (z = 2r + h); lane j: z = 2n + j/2, half j%2 */
    const __m512 a = ao[n][0], b = ao[n][1];
    u[n] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x88), _mm512_shuffle_f32x4(a, b, 0xDD));
  }
#pragma GCC unroll 2
  for (int q = 0; q < 2; q++) /* positions 0, 1: w0, w1 of u[2q]; 2, 3: of u[2q + 1] */
    w[q] = _mm512_add_ps(_mm512_shuffle_ps(u[2 * q], u[2 * q + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(u[2 * q], u[2 * q + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  /* lane 4j + i: u[i] lane j, i.e. row i, token j */
  return _mm512_add_ps(_mm512_shuffle_ps(w[0], w[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_ps(w[0], w[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

BODY void tile32(const int kind, const int vnni, int64_t cols, const uint8_t *const *wp,
                 const uint8_t *const *xp, float *out, int64_t ldy) {
  const int64_t nb = cols / 32, full = nb / 8, ng = groups_of(cols);
  const uint8_t *wr[GEMM_R], *xr[GEMM_T];
  __m512 acc[GEMM_R][GEMM_T];
  __m512 even[GEMM_R][GEMM_T]; /* acc[0] + acc[1] in the even lanes */
  /* pass 1: acc[0] and acc[1] of the one-token kernel: pairs 0 and 2 of
   * each full group, then the blocks of a partial one */
#pragma GCC unroll 8
  for (int r = 0; r < GEMM_R; r++)
#pragma GCC unroll 8
    for (int t = 0; t < GEMM_T; t++) acc[r][t] = _mm512_setzero_ps();
  for (int64_t g = 0; g < full; g++) {
#pragma GCC unroll 8
    for (int r = 0; r < GEMM_R; r++) wr[r] = wp[r] + g * WREC;
#pragma GCC unroll 8
    for (int t = 0; t < GEMM_T; t++) xr[t] = xp[t] + g * XREC;
    pair32(kind, vnni, wr, xr, 0, 0, 0, acc);
    pair32(kind, vnni, wr, xr, 2, 0, 0, acc);
  }
  if (full < ng) {
#pragma GCC unroll 8
    for (int r = 0; r < GEMM_R; r++) wr[r] = wp[r] + full * WREC;
#pragma GCC unroll 8
    for (int t = 0; t < GEMM_T; t++) xr[t] = xp[t] + full * XREC;
    const int n = (int)(nb - 8 * full);
    for (int p = 0; 2 * p < n; p++) pair32(kind, vnni, wr, xr, p, 1, 2 * p + 1 < n, acc);
  }
#pragma GCC unroll 8
  for (int r = 0; r < GEMM_R; r++)
#pragma GCC unroll 8
    for (int t = 0; t < GEMM_T; t++) {
      even[r][t] = _mm512_add_ps(acc[r][t], _mm512_permute_ps(acc[r][t], 0xB1));
      acc[r][t] = _mm512_setzero_ps();
    }
  __asm__("" : "+m"(even)); /* kept in memory during the second pass */
  /* pass 2: acc[2] and acc[3]: pairs 1 and 3 of each full group */
  for (int64_t g = 0; g < full; g++) {
#pragma GCC unroll 8
    for (int r = 0; r < GEMM_R; r++) wr[r] = wp[r] + g * WREC;
#pragma GCC unroll 8
    for (int t = 0; t < GEMM_T; t++) xr[t] = xp[t] + g * XREC;
    pair32(kind, vnni, wr, xr, 1, 0, 0, acc);
    pair32(kind, vnni, wr, xr, 3, 0, 0, acc);
  }
  /* the 16 sums of 8 lanes (even lanes of v) by hsum256's tree, four at
   * a time per step, v[k] for k = 4 t + r */
  __m512 v[16];
#pragma GCC unroll 8
  for (int r = 0; r < GEMM_R; r++)
#pragma GCC unroll 8
    for (int t = 0; t < GEMM_T; t++) {
      __m512 e = _mm512_add_ps(even[r][t], _mm512_add_ps(acc[r][t], _mm512_permute_ps(acc[r][t], 0xB1)));
      if (vnni && (kind == K_Q4_0 || kind == K_Q4_1)) /* lanes 4..7 of all: 16x */
        e = _mm512_mul_ps(e, _mm512_setr_ps(1, 1, 1, 1, 1, 1, 1, 1, 0.0625f, 0.0625f, 0.0625f,
                                            0.0625f, 0.0625f, 0.0625f, 0.0625f, 0.0625f));
      v[4 * t + r] = e;
    }
  const __m512 sums = hsum16_even(v);
  /* the offsets: an 8-lane chain over groups, two tokens per register */
  const float off = block_offset(kind, vnni);
  __m512 result = sums;
  if (has_m(kind) || off != 0.0f) {
    __m512 ao[GEMM_R][2];
#pragma GCC unroll 8
    for (int r = 0; r < GEMM_R; r++) ao[r][0] = ao[r][1] = _mm512_setzero_ps();
    for (int64_t g = 0; g < ng; g++) {
      __m512 xd[2], xs[2];
#pragma GCC unroll 2
      for (int h = 0; h < 2; h++) {
        const uint8_t *x0 = xp[2 * h] + g * XREC, *x1 = xp[2 * h + 1] + g * XREC;
        xd[h] = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_load_ps((const float *)(x0 + REC_D))),
                                   _mm256_load_ps((const float *)(x1 + REC_D)), 1);
        xs[h] = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_load_ps((const float *)(x0 + REC_M))),
                                   _mm256_load_ps((const float *)(x1 + REC_M)), 1);
      }
#pragma GCC unroll 8
      for (int r = 0; r < GEMM_R; r++) {
        const __m512 wv = _mm512_broadcast_f32x8(
            _mm256_load_ps((const float *)(wp[r] + g * WREC + (has_m(kind) ? REC_M : REC_D))));
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++)
          ao[r][h] = _mm512_fmadd_ps(has_m(kind) ? wv : _mm512_mul_ps(wv, xd[h]), xs[h], ao[r][h]);
      }
    }
    const __m512 aos = hsum16_pairs(ao);
    result = has_m(kind) ? _mm512_add_ps(sums, aos)
                         : _mm512_sub_ps(sums, _mm512_mul_ps(_mm512_set1_ps(off), aos));
  }
#pragma GCC unroll 8
  for (int t = 0; t < GEMM_T; t++) /* lanes 4 t .. 4 t + 3: token t's rows */
    _mm512_mask_storeu_ps(out + t * ldy - 4 * t, (__mmask16)(0xF << (4 * t)), result);
}

/* ================= K-quants against Q8_K ================= */

/* Tile shape: integer and float accumulators per (row, token) in
 * registers, the weights and scale words of GEMM_KR rows. */
#define GEMM_KR 2
#define GEMM_KT 4

/* Packed Q8_K row, one 384-byte record per super-block: qs (256), then 64
 * bytes of which the second half holds bsums (the operand that puts the
 * min sums of Q4_K/Q5_K in the high 8 lanes), d (float) at 320. */
#define XK_REC 384
#define XK_BSUMS 288
#define XK_D 320
static size_t xk_size(int64_t cols) { return (size_t)(cols / QK_K) * XK_REC; }

static AVX512 void pack_x_q8_K(int64_t cols, const void *xq, void *xp) {
  const block_q8_K *b = xq;
  for (int64_t i = 0; i < cols / QK_K; i++) {
    uint8_t *rec = (uint8_t *)xp + i * XK_REC;
    memcpy(rec, b[i].qs, QK_K);
    memset(rec + QK_K, 0, 32);
    memcpy(rec + XK_BSUMS, b[i].bsums, 32);
    memcpy(rec + XK_D, &b[i].d, 4);
    memset(rec + XK_D + 4, 0, XK_REC - XK_D - 4);
  }
}

/* Packed Q4_K/Q5_K row, one 640-byte record per super-block: q (256, the
 * values 0..31 in element order); four 64-byte scale operands, one per 64
 * elements: the scale of sub-block 2c in both words of dwords 0..7, of 2c+1
 * in 8..15 (what vpdpwssd multiplies pmaddubsw's pair sums with); 64 bytes
 * whose words 16..31 are the mins, each twice (against bsums: the min sums
 * land in lanes 8..15); d (8 floats) and dmin (8 floats). */
#define K4_REC 640
#define K4_S 256
#define K4_M 512
#define K4_DD 576
static size_t k4_size(int64_t cols) { return (size_t)(cols / QK_K) * K4_REC; }

BODY void pack_k4(const int has_qh, int64_t cols, const void *w, void *wp) {
  const size_t bs = has_qh ? sizeof(block_q5_K) : sizeof(block_q4_K);
  for (int64_t i = 0; i < cols / QK_K; i++) {
    const uint8_t *blk = (const uint8_t *)w + i * bs;
    const uint8_t *scales = blk + 4, *qh = blk + 16, *qs = blk + (has_qh ? 48 : 16);
    uint8_t *rec = (uint8_t *)wp + i * K4_REC;
    const __m256i qhv = has_qh ? load256(qh) : _mm256_setzero_si256();
    for (int c = 0; c < 4; c++) {
      const __m256i q = load256(qs + 32 * c);
      __m256i lo = _mm256_and_si256(q, _mm256_set1_epi8(0x0F));
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), _mm256_set1_epi8(0x0F));
      if (has_qh) {
        lo = _mm256_mask_add_epi8(
            lo, _mm256_test_epi8_mask(qhv, _mm256_set1_epi8((char)(1 << (2 * c)))), lo,
            _mm256_set1_epi8(16));
        hi = _mm256_mask_add_epi8(
            hi, _mm256_test_epi8_mask(qhv, _mm256_set1_epi8((char)(1 << (2 * c + 1)))), hi,
            _mm256_set1_epi8(16));
      }
      _mm256_storeu_si256((__m256i *)(rec + 64 * c), lo);
      _mm256_storeu_si256((__m256i *)(rec + 64 * c + 32), hi);
    }
    uint8_t sc[8], m[8];
    for (int j = 0; j < 8; j++) pa_get_scale_min_k4(j, scales, &sc[j], &m[j]);
    for (int c = 0; c < 4; c++) {
      uint32_t *sw = (uint32_t *)(rec + K4_S + 64 * c);
      for (int l = 0; l < 8; l++) {
        sw[l] = (uint32_t)sc[2 * c] * 0x10001u;
        sw[8 + l] = (uint32_t)sc[2 * c + 1] * 0x10001u;
      }
    }
    uint16_t *mw = (uint16_t *)(rec + K4_M);
    for (int l = 0; l < 16; l++) mw[l] = 0;
    for (int j = 0; j < 8; j++) mw[16 + 2 * j] = mw[17 + 2 * j] = m[j];
    float *dd = (float *)(rec + K4_DD);
    uint16_t h;
    memcpy(&h, blk, 2);
    const float d = _cvtsh_ss(h);
    memcpy(&h, blk + 2, 2);
    const float dmin = _cvtsh_ss(h);
    for (int l = 0; l < 8; l++) {
      dd[l] = d;
      dd[8 + l] = dmin;
    }
  }
}

/* Packed Q6_K row, one 640-byte record per super-block: q (256, values
 * 0..63 in element order); four 64-byte scale operands, one per 64
 * elements (the scale of elements 64k + 16j .. + 15 in both words of dwords
 * 4j .. 4j + 3, as dot_q6_K_body permutes them); the 16 scales as int16;
 * d (16 floats) at 576. */
#define K6_REC 640
#define K6_S 256
#define K6_SC16 512
#define K6_D 576
static size_t k6_size(int64_t cols) { return (size_t)(cols / QK_K) * K6_REC; }

static AVX512 void pack_w_q6_K(int64_t cols, const void *w, void *wp) {
  const block_q6_K *a = w;
  const __m512i mask4 = _mm512_set1_epi8(0x0F), mask2 = _mm512_set1_epi8(0x30);
  /* as dot_q6_K_body: qh bits (2k, 2k+1) to bits 4, 5 */
  const __m512i shl = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
  const __m512i shr = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
  for (int64_t i = 0; i < cols / QK_K; i++) {
    uint8_t *rec = (uint8_t *)wp + i * K6_REC;
    for (int h = 0; h < 2; h++) {
      const __m512i l = load512(a[i].ql + 64 * h);
      const __m512i qh = _mm512_broadcast_i64x4(load256(a[i].qh + 32 * h));
      _mm512_storeu_si512(rec + 128 * h,
                          _mm512_or_si512(_mm512_and_si512(l, mask4),
                                          _mm512_and_si512(_mm512_sllv_epi16(qh, shl), mask2)));
      _mm512_storeu_si512(rec + 128 * h + 64,
                          _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), mask4),
                                          _mm512_and_si512(_mm512_srlv_epi16(qh, shr), mask2)));
    }
    const __m512i s16 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)a[i].scales));
    const __m512i scw = _mm512_or_si512(_mm512_and_si512(s16, _mm512_set1_epi32(0xFFFF)),
                                        _mm512_slli_epi32(s16, 16));
    for (int k = 0; k < 4; k++) {
      const __m512i idx = _mm512_add_epi32(
          _mm512_set1_epi32(4 * k),
          _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3));
      _mm512_storeu_si512(rec + K6_S + 64 * k, _mm512_permutexvar_epi32(idx, scw));
    }
    _mm256_storeu_si256((__m256i *)(rec + K6_SC16),
                        _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)a[i].scales)));
    memset(rec + K6_SC16 + 32, 0, K6_D - K6_SC16 - 32);
    uint16_t h;
    memcpy(&h, &a[i].d, 2);
    _mm512_storeu_ps(rec + K6_D, _mm512_set1_ps(_cvtsh_ss(h)));
  }
}

/* acc += pairs of int16 products (pmaddwd), fused with VNNI. */
BODY __m512i dpwssd512(__m512i acc, __m512i a, __m512i b, const int vnni) {
  if (vnni) {
    __asm__("vpdpwssd %2, %1, %0" : "+v"(acc) : "v"(a), "vm"(b));
    return acc;
  }
  return _mm512_add_epi32(acc, _mm512_madd_epi16(a, b));
}

/* The same from zero (with VNNI: from a zero idiom, not a register copy). */
BODY __m512i dpwssd512_0(__m512i a, const void *b, const int vnni) {
  if (vnni) {
    __m512i acc;
    __asm__("vpxord %0, %0, %0\n\tvpdpwssd %2, %1, %0"
            : "=&v"(acc)
            : "v"(a), "m"(*(const __m512i *)b));
    return acc;
  }
  return _mm512_madd_epi16(a, load512(b));
}

/* Q6_K's 32 sum_g bsums[g] scales[g] for GEMM_KR = 2 rows and 4 tokens:
 * the dot products of 16 words as pmaddwd pairs, then a transposed
 * reduction. c[8 r + t] for row r, token t. */
BODY void q6_corr4(const uint8_t *const *wr, const uint8_t *const *xr, int32_t *c) {
  const __m512i sc = _mm512_inserti64x4(_mm512_castsi256_si512(load256(wr[0] + K6_SC16)),
                                        load256(wr[1] + K6_SC16), 1);
  __m512i s[4];
#pragma GCC unroll 4
  for (int k = 0; k < 4; k++) { /* 128-bit lanes 0, 1: row 0; 2, 3: row 1 */
    const __m512i m = _mm512_madd_epi16(_mm512_broadcast_i64x4(load256(xr[k] + XK_BSUMS)), sc);
    s[k] = _mm512_add_epi32(m, _mm512_shuffle_i64x2(m, m, 0xB1));
  }
  const __m512i ab = _mm512_add_epi32(_mm512_unpacklo_epi32(s[0], s[1]),
                                      _mm512_unpackhi_epi32(s[0], s[1]));
  const __m512i cd = _mm512_add_epi32(_mm512_unpacklo_epi32(s[2], s[3]),
                                      _mm512_unpackhi_epi32(s[2], s[3]));
  const __m512i all = _mm512_add_epi32(_mm512_unpacklo_epi64(ab, cd), _mm512_unpackhi_epi64(ab, cd));
  _mm512_storeu_si512(c, _mm512_slli_epi32(all, 5));
}

/* kind: 4 (Q4_K/Q5_K: dot_k4) or 6 (Q6_K: dot_q6_K_body). */
BODY void tile_k(const int kind, const int vnni, int64_t cols, const uint8_t *const *wp,
                 const uint8_t *const *xp, float *out, int64_t ldy) {
  const int64_t nsb = cols / QK_K;
  const size_t wrec = kind == 6 ? K6_REC : K4_REC, srec = kind == 6 ? K6_S : K4_S;
  __m512 acc[GEMM_KR][GEMM_KT];
#pragma GCC unroll 8
  for (int r = 0; r < GEMM_KR; r++)
#pragma GCC unroll 8
    for (int t = 0; t < GEMM_KT; t++) acc[r][t] = _mm512_setzero_ps();
  for (int64_t i = 0; i < nsb; i++) {
    const uint8_t *wr[GEMM_KR], *xr[GEMM_KT];
#pragma GCC unroll 8
    for (int r = 0; r < GEMM_KR; r++) wr[r] = wp[r] + i * wrec;
#pragma GCC unroll 8
    for (int t = 0; t < GEMM_KT; t++) xr[t] = xp[t] + i * XK_REC;
    __m512i isum[GEMM_KR][GEMM_KT];
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
      __m512i wq[GEMM_KR], ws[GEMM_KR];
#pragma GCC unroll 8
      for (int r = 0; r < GEMM_KR; r++) {
        wq[r] = load512(wr[r] + 64 * c);
        ws[r] = load512(wr[r] + srec + 64 * c);
      }
#pragma GCC unroll 8
      for (int t = 0; t < GEMM_KT; t++) {
        const __m512i x = load512(xr[t] + 64 * c);
#pragma GCC unroll 8
        for (int r = 0; r < GEMM_KR; r++) {
          const __m512i p = _mm512_maddubs_epi16(wq[r], x);
          isum[r][t] = c == 0 ? _mm512_madd_epi16(p, ws[r]) : dpwssd512(isum[r][t], p, ws[r], vnni);
        }
      }
    }
    _Alignas(64) int32_t corr[GEMM_KT / 4][16];
    if (kind == 6)
#pragma GCC unroll 4
      for (int t = 0; t < GEMM_KT; t += 4) q6_corr4(wr, xr + t, corr[t / 4]);
#pragma GCC unroll 8
    for (int t = 0; t < GEMM_KT; t++) {
      const __m512 dx = _mm512_set1_ps(*(const float *)(xr[t] + XK_D));
#pragma GCC unroll 8
      for (int r = 0; r < GEMM_KR; r++) {
        __m512i total;
        __m512 sc;
        if (kind == 6) {
          /* values are q - 32: 32 sum_g bsums[g] scales[g] comes off lane 0 */
          total = _mm512_mask_sub_epi32(isum[r][t], 1, isum[r][t],
                                        _mm512_set1_epi32(corr[t / 4][8 * r + t % 4]));
          sc = _mm512_mul_ps(dx, _mm512_load_ps((const float *)(wr[r] + K6_D)));
        } else {
          /* lanes 0..7: the two halves' sums (sub-blocks 2c and 2c + 1);
           * lanes 8..15: the min sums */
          const __m512i mins = dpwssd512_0(load512(xr[t] + QK_K), wr[r] + K4_M, vnni);
          const __m512i hi = _mm512_shuffle_i64x2(isum[r][t], mins, 0xEE);
          total = _mm512_mask_add_epi32(hi, 0x00FF, hi, isum[r][t]);
          sc = _mm512_mul_ps(dx, _mm512_load_ps((const float *)(wr[r] + K4_DD)));
        }
        acc[r][t] = _mm512_fmadd_ps(sc, _mm512_cvtepi32_ps(total), acc[r][t]);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < GEMM_KR; r++)
#pragma GCC unroll 8
    for (int t = 0; t < GEMM_KT; t++) {
      if (kind == 6)
        out[t * ldy + r] = _mm512_reduce_add_ps(acc[r][t]);
      else
        out[t * ldy + r] = hsum256(_mm256_sub_ps(_mm512_castps512_ps256(acc[r][t]),
                                                     _mm512_extractf32x8_ps(acc[r][t], 1)));
    }
}

static AVX512 void pack_w_q4_K(int64_t cols, const void *w, void *wp) { pack_k4(0, cols, w, wp); }
static AVX512 void pack_w_q5_K(int64_t cols, const void *w, void *wp) { pack_k4(1, cols, w, wp); }

#define GEMMK(name, kind, vnni, pack, size)                                                       \
  static AVX512 void tile_##name(int64_t cols, const uint8_t *const *wp,                         \
                                 const uint8_t *const *xp, float *out, int64_t ldy) {                         \
    tile_k(kind, vnni, cols, wp, xp, out, ldy);                                                       \
  }                                                                                              \
  static const pa_gemm_kernel gemm_##name = {GEMM_KR, GEMM_KT,     size,       pack, \
                                             xk_size, pack_x_q8_K, tile_##name};

GEMMK(q4_K, 4, 0, pack_w_q4_K, k4_size)
GEMMK(q4_K_vnni, 4, 1, pack_w_q4_K, k4_size)
GEMMK(q5_K, 4, 0, pack_w_q5_K, k4_size)
GEMMK(q5_K_vnni, 4, 1, pack_w_q5_K, k4_size)
GEMMK(q6_K, 6, 0, pack_w_q6_K, k6_size)
GEMMK(q6_K_vnni, 6, 1, pack_w_q6_K, k6_size)

/* ---- instances ---- */

#define GEMM32(name, kind, vnni, act)                                                           \
  static AVX512 void pack_w_##name(int64_t cols, const void *w, void *wp) {                     \
    pack_w32(kind, vnni, cols, w, wp);                                                          \
  }                                                                                             \
  static AVX512 void tile_##name(int64_t cols, const uint8_t *const *wp,                        \
                                 const uint8_t *const *xp, float *out, int64_t ldy) {                        \
    tile32(kind, vnni, cols, wp, xp, out, ldy);                                                 \
  }                                                                                             \
  static const pa_gemm_kernel gemm_##name = {GEMM_R,        GEMM_T, w32_size, pack_w_##name, \
                                             x32_size,      pack_x_##act, tile_##name};

static AVX512 void pack_x_q8_0(int64_t cols, const void *xq, void *xp) {
  pack_x32(PA_TYPE_Q8_0, cols, xq, xp);
}
static AVX512 void pack_x_q8_1(int64_t cols, const void *xq, void *xp) {
  pack_x32(PA_TYPE_Q8_1, cols, xq, xp);
}
#define pack_x_PA_TYPE_Q8_0 pack_x_q8_0
#define pack_x_PA_TYPE_Q8_1 pack_x_q8_1

GEMM32(q4_0, K_Q4_0, 0, PA_TYPE_Q8_0)
GEMM32(q4_1, K_Q4_1, 0, PA_TYPE_Q8_1)
GEMM32(q5_0, K_Q5_0, 0, PA_TYPE_Q8_0)
GEMM32(q5_1, K_Q5_1, 0, PA_TYPE_Q8_1)
GEMM32(q8_0, K_Q8_0, 0, PA_TYPE_Q8_0)

void pa_kernels_fill_avx512_gemm(const pa_gemm_kernel **t, int vnni) {
  t[PA_TYPE_Q4_0] = vnni ? &pa_b32_gemm_q4_0 : &gemm_q4_0;
  t[PA_TYPE_Q4_1] = vnni ? &pa_b32_gemm_q4_1 : &gemm_q4_1;
  t[PA_TYPE_Q5_0] = vnni ? &pa_b32_gemm_q5_0 : &gemm_q5_0;
  t[PA_TYPE_Q5_1] = vnni ? &pa_b32_gemm_q5_1 : &gemm_q5_1;
  t[PA_TYPE_Q8_0] = vnni ? &pa_b32_gemm_q8_0 : &gemm_q8_0;
  t[PA_TYPE_Q4_K] = vnni ? &gemm_q4_K_vnni : &gemm_q4_K;
  t[PA_TYPE_Q5_K] = vnni ? &gemm_q5_K_vnni : &gemm_q5_K;
  t[PA_TYPE_Q6_K] = vnni ? &gemm_q6_K_vnni : &gemm_q6_K;
}
