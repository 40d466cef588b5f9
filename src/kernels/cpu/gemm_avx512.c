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
 * 32-element blocks, for the AVX-512 table without VNNI (the VNNI table's
 * are in blocks32_avx512.c). The one-token kernel keeps four 8-lane
 * accumulators: acc[k & 3] takes block k of each group of 8, and the blocks
 * of a last, partial group all go to acc[0]. Here two blocks are
 * interleaved by dwords (dword j of block 2p in lane 2j, of block 2p+1 in
 * lane 2j+1), so one 512-bit pmaddubsw + pmaddwd gives both blocks' 8 lane
 * sums, and one 512-bit accumulator holds acc[0] (even lanes) and acc[1]
 * (odd lanes); a second pass over the other pairs of each group fills
 * acc[2] and acc[3]. The products of scales d_w * d_x come from one
 * multiply of two broadcast (d, d) pairs. The per-block offsets (8 or 16
 * times d_w d_x sum x, or m s) are an 8-lane chain of their own, as in the
 * one-token kernel.
 *
 * K-quants (Q4_K, Q5_K, Q6_K against Q8_K) have one canonical order,
 * shared by both paths of every SIMD table (avx512.c, avx2.c, gemm_avx2.c
 * point here; the grid I-quants of iq_grid_avx2.c take it too, as Q6_K). Per super-block i, in order, from acc = accm = 0:
 *   isum = sum_j sc_j dot_j          exact int32 (Q6_K: sum_g sc_g
 *                                    (dot_g - 32 bsum_g), the -32 exact too)
 *   imin = sum_j m_j (bsums[2j] + bsums[2j+1])   exact int32 (Q4_K, Q5_K)
 *   acc  = fmaf((float)isum, d_w * d_x, acc)     d_w: the fp16 d as float,
 *   accm = fmaf((float)imin, dmin_w * d_x, accm)    d_x: Q8_K's d; products
 *                                                   rounded to float
 * and the result is acc - accm (Q6_K: acc). The integers are exact, so each
 * path computes them however is fastest for it (lanes, instructions, order
 * of the integer additions) and only the float steps above must match. The
 * tiles here keep all the integer work of a super-block dense: both rows
 * and tokens packed once in a permuted order where every 32-bit lane of
 * every 64-byte chunk belongs to one sub-block, so vpdpbusd sums a lane
 * over all chunks (16-bit safe: <= 16 products of 15 x 127, 8 of 31 x 127,
 * 8 of 32 x 127 for Q6_K's q - 32), two tokens' lanes are packed to 16 bits
 * and pmaddwd applies the sub-block scales exactly; a transposed reduction
 * leaves the 16 (row, token) isums of a 4 x 4 tile in one vector, and the
 * float steps are a few 16-lane operations per super-block and tile.
 * Long rows are cut into chunks of super-blocks (pa_gemm_parts: tile_part
 * runs the same loop over a chunk, acc and accm stored between chunks,
 * tile_end the final steps), which changes no float operation. */
#if defined(__x86_64__) /* x86 SIMD; other targets have the plain C tables */
#include "kernels/kernels.h"
#include "kernels/cpu/blocks32_avx512.h"

PA_NO_FP_CONTRACT

#include <immintrin.h>
#include <string.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))
#define BODY static inline __attribute__((always_inline)) AVX512

/* ---- helpers (the same instruction sequences as avx512.c) ---- */

BODY __m512i load512(const void *p) { return _mm512_loadu_si512(p); }
BODY __m256i load256(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

#include "kernels/cpu/avx512_q32.h" /* q4_bytes, q5_bytes */

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
BODY float block_offset(const int kind) {
  return kind == K_Q4_0 ? 8.0f : kind == K_Q5_0 ? 16.0f : 0.0f;
}

BODY int wsize_of(const int kind) {
  return kind == K_Q4_0   ? (int)sizeof(block_q4_0)
         : kind == K_Q4_1 ? (int)sizeof(block_q4_1)
         : kind == K_Q5_0 ? (int)sizeof(block_q5_0)
         : kind == K_Q5_1 ? (int)sizeof(block_q5_1)
                          : (int)sizeof(block_q8_0);
}

/* The 32 unsigned (Q8_0: signed) weight bytes of one block in element
 * order, as avx512.c's block_sums feeds them to its dot without VNNI when
 * the activations are prepared. */
BODY __m256i w32_bytes(const int kind, const uint8_t *blk) {
  switch (kind) {
    case K_Q4_0:
    case K_Q4_1:
      return q4_bytes(blk + (kind == K_Q4_0 ? 2 : 4), 0);
    case K_Q5_0:
    case K_Q5_1:
      return q5_bytes(blk + (kind == K_Q5_0 ? 6 : 8), blk + (kind == K_Q5_0 ? 2 : 4));
    default:
      return load256(blk + 2);
  }
}

BODY void pack_w32(const int kind, int64_t cols, const void *w, void *wp) {
  const int64_t nb = cols / 32, ng = groups_of(cols);
  const int ws = wsize_of(kind);
  const uint8_t *src = w;
  for (int64_t g = 0; g < ng; g++) {
    uint8_t *rec = (uint8_t *)wp + g * WREC;
    float *d = (float *)(rec + REC_D), *m = (float *)(rec + REC_M);
    uint64_t *neg = (uint64_t *)(rec + REC_NEG);
    for (int p = 0; p < 4; p++) {
      const int64_t b0 = 8 * g + 2 * p, b1 = b0 + 1;
      const __m256i a = b0 < nb ? w32_bytes(kind, src + b0 * ws) : _mm256_setzero_si256();
      const __m256i b = b1 < nb ? w32_bytes(kind, src + b1 * ws) : _mm256_setzero_si256();
      __m512i v = interleave_dwords(a, b);
      neg[p] = 0;
      if (kind == K_Q8_0) {
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
BODY __m512i pair_sums(const int kind, __m512i w, const uint8_t *x, __mmask64 neg) {
  __m512i xv = load512(x);
  if (kind == K_Q8_0) xv = _mm512_mask_sub_epi8(xv, neg, _mm512_setzero_si512(), xv);
  return _mm512_madd_epi16(_mm512_maddubs_epi16(w, xv), _mm512_set1_epi16(1));
}

/* acc[r][t] += pair p of the group at wr[r], xr[t]: both blocks, their
 * lanes interleaved. With `tail`, the pair's blocks are those of a last,
 * partial group and go in turn into acc[0] (even lanes), the second only
 * when `second`. */
BODY void pair32(const int kind, const uint8_t *const *wr,
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
    if (kind == K_Q8_0) memcpy(&neg[r], wr[r] + REC_NEG + 8 * p, 8);
  }
#pragma GCC unroll 8
  for (int t = 0; t < GEMM_T; t++) {
    const __m512 dx = bcast_pair((const float *)(xr[t] + REC_D) + 2 * p);
#pragma GCC unroll 8
    for (int r = 0; r < GEMM_R; r++) {
      const __m512 f = _mm512_cvtepi32_ps(pair_sums(kind, wq[r], xr[t] + 64 * p, neg[r]));
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

BODY void tile32(const int kind, int64_t cols, const uint8_t *const *wp,
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
    pair32(kind, wr, xr, 0, 0, 0, acc);
    pair32(kind, wr, xr, 2, 0, 0, acc);
  }
  if (full < ng) {
#pragma GCC unroll 8
    for (int r = 0; r < GEMM_R; r++) wr[r] = wp[r] + full * WREC;
#pragma GCC unroll 8
    for (int t = 0; t < GEMM_T; t++) xr[t] = xp[t] + full * XREC;
    const int n = (int)(nb - 8 * full);
    for (int p = 0; 2 * p < n; p++) pair32(kind, wr, xr, p, 1, 2 * p + 1 < n, acc);
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
    pair32(kind, wr, xr, 1, 0, 0, acc);
    pair32(kind, wr, xr, 3, 0, 0, acc);
  }
  /* the 16 sums of 8 lanes (even lanes of v) by hsum256's tree, four at
   * a time per step, v[k] for k = 4 t + r */
  __m512 v[16];
#pragma GCC unroll 8
  for (int r = 0; r < GEMM_R; r++)
#pragma GCC unroll 8
    for (int t = 0; t < GEMM_T; t++) {
      v[4 * t + r] =
          _mm512_add_ps(even[r][t], _mm512_add_ps(acc[r][t], _mm512_permute_ps(acc[r][t], 0xB1)));
    }
  const __m512 sums = hsum16_even(v);
  /* the offsets: an 8-lane chain over groups, two tokens per register */
  const float off = block_offset(kind);
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

/* Tile: 4 rows x 4 tokens. Per super-block the integer sums of the 16
 * (row, token) pairs end in one vector (lane 4 r + t), so the canonical
 * float work (header) is a few 16-lane operations per tile. */
#define GEMM_KR 4
#define GEMM_KT 4

/* Weights and activations of a super-block are packed permuted, the same
 * way for both: 64-byte chunk c holds in qword s the elements 32 s + 8 c
 * .. + 7, so dword lane l of every chunk belongs to sub-block l / 2 (Q4_K,
 * Q5_K) and the dot lanes of all chunks may be summed before the scales. */
static void permute_sb(const uint8_t *in, uint8_t *out) {
  for (int c = 0; c < 4; c++)
    for (int s = 0; s < 8; s++) memcpy(out + 64 * c + 8 * s, in + 8 * (4 * s + c), 8);
}

/* Packed Q8_K rows: per super-block q (256, permuted), then
 * Q4_K/Q5_K (320 bytes): the 8 sums of 32 quants (int16) at 256, d at 272;
 * Q6_K (448 bytes): offsets (128) at 256, d at 384: with VNNI, dword l of
 *   half h is -32 times the sum of the 8 quants lane l of chunks 2h, 2h + 1
 *   covers (the start of that lane's vpdpbusd, so that q - 32 is what
 *   multiplies); without, word w of half h is 32 times the sum of the 4
 *   quants word w of chunks 2h, 2h + 1 covers (taken off pmaddubsw's). */
#define XK4_REC 320
#define XK4_BS 256
#define XK4_D 272
#define XK6_REC 448
#define XK6_OFF 256
#define XK6_D 384
static size_t xk4_size(int64_t cols) { return (size_t)(cols / QK_K) * XK4_REC; }
static size_t xk6_size(int64_t cols) { return (size_t)(cols / QK_K) * XK6_REC; }

BODY void pack_xk(const int kind, const int vnni, int64_t cols, const void *xq, void *xp) {
  const block_q8_K *b = xq;
  const size_t rec_size = kind == 6 ? XK6_REC : XK4_REC;
  for (int64_t i = 0; i < cols / QK_K; i++) {
    uint8_t *rec = (uint8_t *)xp + i * rec_size;
    memset(rec, 0, rec_size);
    permute_sb((const uint8_t *)b[i].qs, rec);
    const int8_t *q = (const int8_t *)rec;
    if (kind != 6) {
      int16_t *bs = (int16_t *)(rec + XK4_BS);
      for (int j = 0; j < 8; j++) bs[j] = (int16_t)(b[i].bsums[2 * j] + b[i].bsums[2 * j + 1]);
      memcpy(rec + XK4_D, &b[i].d, 4);
    } else {
      if (vnni) {
        int32_t *off = (int32_t *)(rec + XK6_OFF);
        for (int h = 0; h < 2; h++)
          for (int l = 0; l < 16; l++) {
            const int8_t *a = q + 128 * h + 4 * l, *c = a + 64;
            off[16 * h + l] = -32 * (a[0] + a[1] + a[2] + a[3] + c[0] + c[1] + c[2] + c[3]);
          }
      } else {
        int16_t *off = (int16_t *)(rec + XK6_OFF);
        for (int h = 0; h < 2; h++)
          for (int w = 0; w < 32; w++) {
            const int8_t *a = q + 128 * h + 2 * w, *c = a + 64;
            off[32 * h + w] = (int16_t)(32 * (a[0] + a[1] + c[0] + c[1]));
          }
      }
      memcpy(rec + XK6_D, &b[i].d, 4);
    }
  }
}

/* Packed Q4_K/Q5_K row, 384 bytes per super-block: q (256, values 0..31,
 * permuted); scale words (64) at 256: with VNNI what multiplies the pack of
 * two tokens' dword sums (128-bit lane k: sub-blocks 2k, 2k, 2k+1, 2k+1,
 * twice), without it pmaddubsw's words (word w: sub-block w / 4); the 8
 * mins (int16) at 320; d and dmin (floats) at 336. */
#define K4_REC 384
#define K4_S 256
#define K4_M 320
#define K4_D 336
static size_t k4_size(int64_t cols) { return (size_t)(cols / QK_K) * K4_REC; }

/* Packed Q6_K row, 448 bytes per super-block: q (256, values 0..63,
 * permuted); two 64-byte scale operands at 256 (for chunks 0, 1 and 2, 3:
 * group of 16 g of each word as laid out, VNNI: the pack of two tokens'
 * dword sums, 128-bit lane k word j: 4k + 2 ((j % 4) / 2) + c / 2; without:
 * pmaddubsw's words summed over two chunks, word w: 2 (w / 4) + c / 2);
 * d (float) at 384. */
#define K6_REC 448
#define K6_S 256
#define K6_D 384
static size_t k6_size(int64_t cols) { return (size_t)(cols / QK_K) * K6_REC; }

/* The permuted order (permute_sb) of a super-block given as four vectors
 * of two sub-blocks each (qwords 0-3 one, 4-7 the other): i01 and i23
 * pick, from a and b (qwords 8-15: b's), sub-blocks 0..3's qwords 0, 1 and
 * 2, 3; c and d hold sub-blocks 4..7 the same way. */
BODY void store_permuted(uint8_t *rec, __m512i a, __m512i b, __m512i c, __m512i d, __m512i i01,
                         __m512i i23) {
  const __m512i u01 = _mm512_permutex2var_epi64(a, i01, b), u23 = _mm512_permutex2var_epi64(a, i23, b);
  const __m512i v01 = _mm512_permutex2var_epi64(c, i01, d), v23 = _mm512_permutex2var_epi64(c, i23, d);
  _mm512_store_si512(rec, _mm512_shuffle_i64x2(u01, v01, 0x44));
  _mm512_store_si512(rec + 64, _mm512_shuffle_i64x2(u01, v01, 0xEE));
  _mm512_store_si512(rec + 128, _mm512_shuffle_i64x2(u23, v23, 0x44));
  _mm512_store_si512(rec + 192, _mm512_shuffle_i64x2(u23, v23, 0xEE));
}

/* Q4_K/Q5_K records, by vectors: the nibbles of qs[0..63] are
 * sub-blocks 0 and 2 (low), 1 and 3 (high), of qs[64..127] 4..7 alike;
 * Q5_K's fifth bit of sub-block s is bit s of qh[l]. */
BODY void pack_k4(const int has_qh, const int vnni, int64_t cols, const void *w, void *wp) {
  const size_t bs = has_qh ? sizeof(block_q5_K) : sizeof(block_q4_K);
  const __m512i i01 = _mm512_setr_epi64(0, 8, 4, 12, 1, 9, 5, 13);
  const __m512i i23 = _mm512_setr_epi64(2, 10, 6, 14, 3, 11, 7, 15);
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m256i sidx =
      vnni ? _mm256_setr_epi8(0, 0, 1, 1, 0, 0, 1, 1, 2, 2, 3, 3, 2, 2, 3, 3, 4, 4, 5, 5, 4, 4, 5,
                              5, 6, 6, 7, 7, 6, 6, 7, 7)
           : _mm256_setr_epi8(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5,
                              5, 6, 6, 6, 6, 7, 7, 7, 7);
  for (int64_t i = 0; i < cols / QK_K; i++) {
    const uint8_t *blk = (const uint8_t *)w + i * bs;
    const uint8_t *scales = blk + 4, *qh = blk + 16, *qs = blk + (has_qh ? 48 : 16);
    uint8_t *rec = (uint8_t *)wp + i * K4_REC;
    const __m512i z0 = load512(qs), z1 = load512(qs + 64);
    __m512i v[4] = {_mm512_and_si512(z0, m4), _mm512_and_si512(_mm512_srli_epi16(z0, 4), m4),
                    _mm512_and_si512(z1, m4), _mm512_and_si512(_mm512_srli_epi16(z1, 4), m4)};
    if (has_qh) {
      const __m512i h = _mm512_broadcast_i64x4(load256(qh));
#pragma GCC unroll 4
      for (int k = 0; k < 4; k++) { /* sub-blocks lo, lo + 2 */
        const int lo = 4 * (k / 2) + k % 2;
        const __m512i sel = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << lo)),
                                               _mm256_set1_epi8((char)(1 << (lo + 2))), 1);
        v[k] = _mm512_mask_add_epi8(v[k], _mm512_test_epi8_mask(h, sel), v[k], _mm512_set1_epi8(16));
      }
    }
    store_permuted(rec, v[0], v[1], v[2], v[3], i01, i23);
    /* pa_get_scale_min_k4 by dwords (x: the 12 scale bytes, then 4 of
     * qh or qs, unused): scales 0..3 are bytes 0..3 and mins 0..3 bytes
     * 4..7, low 6 bits; scales 4..7 the low nibbles of bytes 8..11 with
     * bytes 0..3's top 2 bits above them, mins 4..7 the high nibbles with
     * bytes 4..7's. */
    const __m128i x = _mm_loadu_si128((const __m128i *)scales);
    const __m128i lo = _mm_and_si128(x, _mm_set1_epi8(63)); /* dwords: sc 0..3, m 0..3 */
    const __m128i hi = _mm_or_si128(
        _mm_and_si128(_mm_srlv_epi32(_mm_shuffle_epi32(x, 0xAA), _mm_setr_epi32(0, 4, 0, 0)),
                      _mm_set1_epi8(0x0F)),
        _mm_and_si128(_mm_srli_epi32(x, 2), _mm_set1_epi8(0x30))); /* sc 4..7, m 4..7 */
    const __m128i sm = _mm_unpacklo_epi32(lo, hi);                  /* qwords: sc, m */
    _mm512_store_si512(rec + K4_S, _mm512_cvtepu8_epi16(_mm256_shuffle_epi8(
                                       _mm256_broadcastsi128_si256(sm), sidx)));
    const __m128i m8 = _mm_unpackhi_epi64(sm, sm);
    uint32_t dd;
    memcpy(&dd, blk, 4);
    const __m128 df = _mm_cvtph_ps(_mm_cvtsi32_si128((int)dd)); /* d, dmin, 0, 0 */
    _mm512_store_si512(rec + K4_M, _mm512_inserti32x4(_mm512_zextsi128_si512(_mm_cvtepu8_epi16(m8)),
                                                      _mm_castps_si128(df), 1));
  }
}

/* Q6_K records, by vectors: ql[64h ..] gives elements 128h + 0..63
 * (low nibbles) and + 64..127 (high), qh[32h + l] their two high bits. */
BODY void pack_k6(const int vnni, int64_t cols, const void *w, void *wp) {
  const block_q6_K *a = w;
  const __m512i i01 = _mm512_setr_epi64(0, 4, 8, 12, 1, 5, 9, 13);
  const __m512i i23 = _mm512_setr_epi64(2, 6, 10, 14, 3, 7, 11, 15);
  const __m512i m4 = _mm512_set1_epi8(0x0F), m3 = _mm512_set1_epi8(3);
  const __m512i cnt_lo = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
  const __m512i cnt_hi =
      _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(6), 1);
  const __m512i sidx =
      vnni ? _mm512_set_epi8(15, 15, 13, 13, 15, 15, 13, 13, 11, 11, 9, 9, 11, 11, 9, 9, 7, 7, 5, 5,
                             7, 7, 5, 5, 3, 3, 1, 1, 3, 3, 1, 1, 14, 14, 12, 12, 14, 14, 12, 12,
                             10, 10, 8, 8, 10, 10, 8, 8, 6, 6, 4, 4, 6, 6, 4, 4, 2, 2, 0, 0, 2,
                             2, 0, 0)
           : _mm512_set_epi8(15, 15, 15, 15, 13, 13, 13, 13, 11, 11, 11, 11, 9, 9, 9, 9, 7, 7, 7,
                             7, 5, 5, 5, 5, 3, 3, 3, 3, 1, 1, 1, 1, 14, 14, 14, 14, 12, 12, 12,
                             12, 10, 10, 10, 10, 8, 8, 8, 8, 6, 6, 6, 6, 4, 4, 4, 4, 2, 2, 2, 2,
                             0, 0, 0, 0);
  for (int64_t i = 0; i < cols / QK_K; i++) {
    uint8_t *rec = (uint8_t *)wp + i * K6_REC;
    __m512i v[4];
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
      const __m512i zl = load512(a[i].ql + 64 * h);
      const __m512i q = _mm512_broadcast_i64x4(load256(a[i].qh + 32 * h));
      const __m512i hl = _mm512_and_si512(_mm512_srlv_epi16(q, cnt_lo), m3);
      const __m512i hh = _mm512_and_si512(_mm512_srlv_epi16(q, cnt_hi), m3);
      v[2 * h] = _mm512_or_si512(_mm512_and_si512(zl, m4), _mm512_slli_epi16(hl, 4));
      v[2 * h + 1] =
          _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(zl, 4), m4), _mm512_slli_epi16(hh, 4));
    }
    store_permuted(rec, v[0], v[1], v[2], v[3], i01, i23);
    const __m512i sv = _mm512_shuffle_epi8(
        _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)a[i].scales)), sidx);
    _mm512_store_si512(rec + K6_S, _mm512_cvtepi8_epi16(_mm512_castsi512_si256(sv)));
    _mm512_store_si512(rec + K6_S + 64, _mm512_cvtepi8_epi16(_mm512_extracti64x4_epi64(sv, 1)));
    uint16_t dh;
    memcpy(&dh, &a[i].d, 2);
    _mm512_store_si512(rec + K6_D,
                       _mm512_zextsi128_si512(_mm_castps_si128(_mm_cvtph_ps(_mm_cvtsi32_si128(dh)))));
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

/* acc += u . s by groups of 4 bytes (VNNI only). */
BODY __m512i dpbusd512(__m512i acc, __m512i u, __m512i s) {
  __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "vm"(s));
  return acc;
}

/* The same from zero (a zero idiom, no uop on a port). */
BODY __m512i dpbusd512_0(__m512i u, const void *s) {
  __m512i acc;
  __asm__("vpxord %0, %0, %0\n\tvpdpbusd %2, %1, %0" : "=&v"(acc) : "v"(u), "m"(*(const __m512i *)s));
  return acc;
}

/* Two pairs' 16 lanes each -> one vector, 128-bit lane k: (a, a, b, b). */
BODY __m512i fold_pair(__m512i a, __m512i b) {
  return _mm512_add_epi32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
}

/* p[r + 4 u] holds (row r, token 2u) and (row r, token 2u + 1) as fold_pair
 * lays them out; returns each pair's total in lane 4 r + t. */
BODY __m512i reduce_pairs(const __m512i *p) {
  __m512i q[4], rr[2];
#pragma GCC unroll 4
  for (int m = 0; m < 4; m++)
    q[m] = _mm512_add_epi32(_mm512_shuffle_i64x2(p[2 * m], p[2 * m + 1], 0x44),
                            _mm512_shuffle_i64x2(p[2 * m], p[2 * m + 1], 0xEE));
#pragma GCC unroll 2
  for (int n = 0; n < 2; n++) /* 128-bit lane k: p[4n + k] */
    rr[n] = _mm512_add_epi32(_mm512_shuffle_i64x2(q[2 * n], q[2 * n + 1], 0x88),
                             _mm512_shuffle_i64x2(q[2 * n], q[2 * n + 1], 0xDD));
  const __m512 a = _mm512_castsi512_ps(rr[0]), b = _mm512_castsi512_ps(rr[1]);
  return _mm512_add_epi32(_mm512_castps_si512(_mm512_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0))),
                          _mm512_castps_si512(_mm512_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1))));
}

/* Four floats at byte offset off of the four records, in lanes 4r + t as
 * (r: the record's, per = 0) or (t: the record's, per = 1). */
BODY __m512 four(const uint8_t *const *rec, size_t off, const int per_token) {
  const __m128 f = _mm_setr_ps(*(const float *)(rec[0] + off), *(const float *)(rec[1] + off),
                               *(const float *)(rec[2] + off), *(const float *)(rec[3] + off));
  if (per_token) return _mm512_broadcast_f32x4(f);
  return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                               _mm512_castps128_ps512(f));
}

/* kind 4 (Q4_K), 5 (Q5_K), 6 (Q6_K): the canonical order of the header,
 * over the super-blocks of `cols` columns from wp and xp on, continuing
 * the chains acc and accm (lane 4 r + t: row r, token t). */
BODY void tile_k_loop(const int kind, const int vnni, int64_t cols, const uint8_t *const *wp,
                      const uint8_t *const *xp, __m512 *acc_io, __m512 *accm_io) {
  const int64_t nsb = cols / QK_K;
  const size_t wrec = kind == 6 ? K6_REC : K4_REC, xrec = kind == 6 ? XK6_REC : XK4_REC;
  const size_t xd = kind == 6 ? XK6_D : XK4_D;
  __m512 acc = *acc_io, accm = *accm_io;
  for (int64_t i = 0; i < nsb; i++) {
    const uint8_t *wr[GEMM_KR], *xr[GEMM_KT];
#pragma GCC unroll 8
    for (int r = 0; r < GEMM_KR; r++) wr[r] = wp[r] + i * wrec;
#pragma GCC unroll 8
    for (int t = 0; t < GEMM_KT; t++) xr[t] = xp[t] + i * xrec;
    __m512i p[8]; /* p[r + 4u]: row r, tokens 2u, 2u + 1 */
    if (vnni) {
      /* dword sums of up to 16 (Q4_K) or 8 (Q5_K; Q6_K, from its offsets)
       * products fit 16 bits */
      const int per = kind == 4 ? 4 : 2;
#pragma GCC unroll 2
      for (int c0 = 0; c0 < 4; c0 += per) {
        __m512i s[GEMM_KR][GEMM_KT];
#pragma GCC unroll 4
        for (int c = c0; c < c0 + per; c++) {
          __m512i wq[GEMM_KR];
#pragma GCC unroll 4
          for (int r = 0; r < GEMM_KR; r++) wq[r] = load512(wr[r] + 64 * c);
#pragma GCC unroll 4
          for (int t = 0; t < GEMM_KT; t++) {
            const __m512i x = load512(xr[t] + 64 * c);
#pragma GCC unroll 4
            for (int r = 0; r < GEMM_KR; r++)
              s[r][t] = c != c0    ? dpbusd512(s[r][t], wq[r], x)
                        : kind == 6 ? dpbusd512(load512(xr[t] + XK6_OFF + 32 * c0), wq[r], x)
                                    : dpbusd512_0(wq[r], xr[t] + 64 * c);
          }
        }
#pragma GCC unroll 4
        for (int r = 0; r < GEMM_KR; r++) {
          const __m512i sw = load512(wr[r] + (kind == 6 ? K6_S + 32 * c0 : K4_S));
#pragma GCC unroll 2
          for (int u = 0; u < 2; u++) {
            const __m512i pk = _mm512_packs_epi32(s[r][2 * u], s[r][2 * u + 1]);
            p[r + 4 * u] = c0 == 0 ? _mm512_madd_epi16(pk, sw) : dpwssd512(p[r + 4 * u], pk, sw, 1);
          }
        }
      }
    } else { /* pmaddubsw's words: Q4_K/Q5_K summed over 4 chunks (8 products,
              * <= 8 * 31 * 127), Q6_K over 2 (less 32 times the quants) */
      __m512i ws[GEMM_KR][GEMM_KT];
      const int per = kind == 6 ? 2 : 4;
#pragma GCC unroll 2
      for (int c0 = 0; c0 < 4; c0 += per) {
        __m512i w16[GEMM_KR][GEMM_KT];
#pragma GCC unroll 4
        for (int c = c0; c < c0 + per; c++) {
          __m512i wq[GEMM_KR];
#pragma GCC unroll 4
          for (int r = 0; r < GEMM_KR; r++) wq[r] = load512(wr[r] + 64 * c);
#pragma GCC unroll 4
          for (int t = 0; t < GEMM_KT; t++) {
            const __m512i x = load512(xr[t] + 64 * c);
#pragma GCC unroll 4
            for (int r = 0; r < GEMM_KR; r++) {
              const __m512i m = _mm512_maddubs_epi16(wq[r], x);
              w16[r][t] = c == c0 ? m : _mm512_add_epi16(w16[r][t], m);
            }
          }
        }
#pragma GCC unroll 4
        for (int r = 0; r < GEMM_KR; r++) {
          const __m512i sw = load512(wr[r] + (kind == 6 ? K6_S + 64 * (c0 / 2) : K4_S));
#pragma GCC unroll 4
          for (int t = 0; t < GEMM_KT; t++) {
            __m512i v = w16[r][t];
            if (kind == 6) v = _mm512_sub_epi16(v, load512(xr[t] + XK6_OFF + 64 * (c0 / 2)));
            ws[r][t] = c0 == 0 ? _mm512_madd_epi16(v, sw) : dpwssd512(ws[r][t], v, sw, 0);
          }
        }
      }
#pragma GCC unroll 4
      for (int r = 0; r < GEMM_KR; r++)
#pragma GCC unroll 2
        for (int u = 0; u < 2; u++) p[r + 4 * u] = fold_pair(ws[r][2 * u], ws[r][2 * u + 1]);
    }
    const __m512i isum = reduce_pairs(p);
    /* scales in lane 4 r + t: d_w of row r, d_x of token t */
    const __m512 dx = four(xr, xd, 1);
    if (kind == 6) {
      acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(four(wr, K6_D, 0), dx), acc);
    } else {
      /* (d, dmin) of the 4 rows, then the min sums: 128-bit lane r holds
       * row r's mins against each token's 8 sums of 32, reduced to lane t */
      const __m256 dm = _mm256_setr_m128(
          _mm_castpd_ps(_mm_loadh_pd(_mm_load_sd((const double *)(wr[0] + K4_D)),
                                     (const double *)(wr[1] + K4_D))),
          _mm_castpd_ps(_mm_loadh_pd(_mm_load_sd((const double *)(wr[2] + K4_D)),
                                     (const double *)(wr[3] + K4_D))));
      const __m512 dw = _mm512_permutexvar_ps(
          _mm512_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2, 4, 4, 4, 4, 6, 6, 6, 6), _mm512_castps256_ps512(dm));
      const __m512 dmin = _mm512_permutexvar_ps(
          _mm512_setr_epi32(1, 1, 1, 1, 3, 3, 3, 3, 5, 5, 5, 5, 7, 7, 7, 7), _mm512_castps256_ps512(dm));
      __m512i mv = _mm512_castsi128_si512(_mm_load_si128((const __m128i *)(wr[0] + K4_M)));
      mv = _mm512_inserti32x4(mv, _mm_load_si128((const __m128i *)(wr[1] + K4_M)), 1);
      mv = _mm512_inserti32x4(mv, _mm_load_si128((const __m128i *)(wr[2] + K4_M)), 2);
      mv = _mm512_inserti32x4(mv, _mm_load_si128((const __m128i *)(wr[3] + K4_M)), 3);
      __m512i v[GEMM_KT];
#pragma GCC unroll 4
      for (int t = 0; t < GEMM_KT; t++)
        v[t] = _mm512_madd_epi16(
            mv, _mm512_broadcast_i32x4(_mm_load_si128((const __m128i *)(xr[t] + XK4_BS))));
      const __m512i a = _mm512_add_epi32(_mm512_unpacklo_epi32(v[0], v[1]), _mm512_unpackhi_epi32(v[0], v[1]));
      const __m512i b = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2], v[3]), _mm512_unpackhi_epi32(v[2], v[3]));
      const __m512i imin = _mm512_add_epi32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
      acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, dx), acc);
      accm = _mm512_fmadd_ps(_mm512_cvtepi32_ps(imin), _mm512_mul_ps(dmin, dx), accm);
    }
  }
  *acc_io = acc;
  *accm_io = accm;
}

/* The results of the chains: out[t * ldy + r]. */
BODY void tile_k_end(const int kind, __m512 acc, __m512 accm, float *out, int64_t ldy) {
  const __m512 res = kind == 6 ? acc : _mm512_sub_ps(acc, accm);
  /* lane 4 r + t -> lane 4 t + r, then token t's rows */
  const __m512 tr = _mm512_permutexvar_ps(
      _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), res);
#pragma GCC unroll 4
  for (int t = 0; t < GEMM_KT; t++)
    _mm512_mask_storeu_ps(out + t * ldy - 4 * t, (__mmask16)(0xF << (4 * t)), tr);
}

BODY void tile_k(const int kind, const int vnni, int64_t cols, const uint8_t *const *wp,
                 const uint8_t *const *xp, float *out, int64_t ldy) {
  __m512 acc = _mm512_setzero_ps(), accm = _mm512_setzero_ps();
  tile_k_loop(kind, vnni, cols, wp, xp, &acc, &accm);
  tile_k_end(kind, acc, accm, out, ldy);
}

/* K-blocked: acc[0..15] and acc[16..31] hold the chains between parts (a
 * store and a load do not change a float's bits). */
#define K_ACC_FLOATS 32
BODY void tile_k_part(const int kind, const int vnni, int64_t cols, const uint8_t *const *wp,
                      const uint8_t *const *xp, float *acc) {
  __m512 a = _mm512_load_ps(acc), am = _mm512_load_ps(acc + 16);
  tile_k_loop(kind, vnni, cols, wp, xp, &a, &am);
  _mm512_store_ps(acc, a);
  _mm512_store_ps(acc + 16, am);
}

#define GEMMK(name, kind, vnni, wsize, xsize)                                                    \
  static AVX512 void pack_w_##name(int64_t cols, const void *w, void *wp) {                    \
    if (kind == 6)                                                                             \
      pack_k6(vnni, cols, w, wp);                                                              \
    else                                                                                       \
      pack_k4(kind == 5, vnni, cols, w, wp);                                                   \
  }                                                                                            \
  static AVX512 void pack_x_##name(int64_t cols, const void *xq, void *xp) {                   \
    pack_xk(kind, vnni, cols, xq, xp);                                                         \
  }                                                                                            \
  static AVX512 void tile_##name(int64_t cols, const uint8_t *const *wp,                       \
                                 const uint8_t *const *xp, float *out, int64_t ldy) {          \
    tile_k(kind, vnni, cols, wp, xp, out, ldy);                                                \
  }                                                                                            \
  static AVX512 void tile_part_##name(int64_t cols, const uint8_t *const *wp,                  \
                                      const uint8_t *const *xp, float *acc) {                  \
    tile_k_part(kind, vnni, cols, wp, xp, acc);                                                \
  }                                                                                            \
  static AVX512 void tile_end_##name(const float *acc, float *out, int64_t ldy) {              \
    tile_k_end(kind, _mm512_load_ps(acc), _mm512_load_ps(acc + 16), out, ldy);                 \
  }                                                                                            \
  static const pa_gemm_kernel gemm_##name = {GEMM_KR, GEMM_KT,       wsize,      pack_w_##name, \
                                             xsize,   pack_x_##name, tile_##name};             \
  static const pa_gemm_parts parts_##name = {&gemm_##name, QK_K, K_ACC_FLOATS, tile_part_##name, \
                                             tile_end_##name};

GEMMK(q4_K, 4, 0, k4_size, xk4_size)
GEMMK(q4_K_vnni, 4, 1, k4_size, xk4_size)
GEMMK(q5_K, 5, 0, k4_size, xk4_size)
GEMMK(q5_K_vnni, 5, 1, k4_size, xk4_size)
GEMMK(q6_K, 6, 0, k6_size, xk6_size)
GEMMK(q6_K_vnni, 6, 1, k6_size, xk6_size)

/* ================= grid I-quants against Q8_K (VNNI) ================= */

/* IQ2_XXS ... IQ1_M, whose one-token kernel is the AVX2 one
 * (iq_grid_avx2.c): the same exact int32 per super-block, then its fma.
 * A super-block's values are permuted so that dword l of every 64-byte
 * chunk c belongs to group of 16 l (values 16l + 4c .. + 3), in the
 * weights and the activations alike: a lane sums its group over the four
 * chunks (vpdpbusd of q + 128 against v: 16 products of at most 255 * 62),
 * then one vpmulld by the groups' factors. Packed rows, 576 bytes per
 * super-block: the 256 signed values (pa_iq_grid_unpack_avx2, |v| <= 62),
 * permuted; at 256 the 16 factors (int32); at 320 corr = 128 sum_g sc_g
 * sum v_g (int32), which takes the activations' 128 off; at 324 dw.
 * Packed activations, 320 bytes: q + 128 as unsigned bytes (permuted),
 * d at 256. */
#define GW_REC 384
#define GW_S 256
#define GW_CORR 320
#define GW_D 324
#define GX_REC 320
#define GX_D 256
static size_t gw_size(int64_t cols) { return (size_t)(cols / QK_K) * GW_REC; }
static size_t gx_size(int64_t cols) { return (size_t)(cols / QK_K) * GX_REC; }

/* The permuted order: byte 64c + 4l + j holds value 16l + 4c + j. */
BODY void permute_groups(const uint8_t *in, uint8_t *out) {
  for (int c = 0; c < 4; c++)
    for (int l = 0; l < 16; l++) memcpy(out + 64 * c + 4 * l, in + 16 * l + 4 * c, 4);
}

BODY void pack_grid(const pa_type type, int64_t cols, const void *w, void *wp) {
  const size_t bs = pa_type_get(type)->type_size;
  _Alignas(64) int8_t v[QK_K];
  _Alignas(64) int16_t sc[16];
  for (int64_t i = 0; i < cols / QK_K; i++) {
    uint8_t *rec = (uint8_t *)wp + i * GW_REC;
    const float dw = pa_iq_grid_unpack_avx2(type, (const uint8_t *)w + (size_t)i * bs, v, sc);
    permute_groups((const uint8_t *)v, rec);
    int32_t corr = 0;
    for (int g = 0; g < 16; g++) {
      int sum = 0;
      for (int k = 0; k < 16; k++) sum += v[16 * g + k];
      corr += 128 * sc[g] * sum;
    }
    _mm512_storeu_si512(rec + GW_S, _mm512_cvtepi16_epi32(_mm256_load_si256((const __m256i *)sc)));
    memcpy(rec + GW_CORR, &corr, 4);
    memcpy(rec + GW_D, &dw, 4);
    memset(rec + GW_D + 4, 0, GW_REC - GW_D - 4);
  }
}

BODY void pack_xg(int64_t cols, const void *xq, void *xp) {
  const block_q8_K *b = xq;
  _Alignas(64) uint8_t u[QK_K];
  for (int64_t i = 0; i < cols / QK_K; i++) {
    uint8_t *rec = (uint8_t *)xp + i * GX_REC;
    for (int c = 0; c < 4; c++)
      _mm512_store_si512(u + 64 * c, _mm512_xor_si512(load512(b[i].qs + 64 * c),
                                                      _mm512_set1_epi8((char)0x80)));
    permute_groups(u, rec);
    memcpy(rec + GX_D, &b[i].d, 4);
    memset(rec + GX_D + 4, 0, GX_REC - GX_D - 4);
  }
}

/* v[4r + t] -> lane 4r + t of one vector: each vector's 16 lanes summed. */
BODY __m512i reduce16(const __m512i *v) {
  __m512i u[8], w[4];
#pragma GCC unroll 8
  for (int m = 0; m < 8; m++) /* 128-bit lanes: (a, b, a, b) of v[2m], v[2m + 1] */
    u[m] = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2 * m], v[2 * m + 1]),
                            _mm512_unpackhi_epi32(v[2 * m], v[2 * m + 1]));
#pragma GCC unroll 4
  for (int n = 0; n < 4; n++) /* 128-bit lanes: v[4n .. 4n + 3] */
    w[n] = _mm512_add_epi32(_mm512_unpacklo_epi64(u[2 * n], u[2 * n + 1]),
                            _mm512_unpackhi_epi64(u[2 * n], u[2 * n + 1]));
  const __m512i p = _mm512_add_epi32(_mm512_shuffle_i32x4(w[0], w[1], 0x44),
                                     _mm512_shuffle_i32x4(w[0], w[1], 0xEE));
  const __m512i q = _mm512_add_epi32(_mm512_shuffle_i32x4(w[2], w[3], 0x44),
                                     _mm512_shuffle_i32x4(w[2], w[3], 0xEE));
  return _mm512_add_epi32(_mm512_shuffle_i32x4(p, q, 0x88), _mm512_shuffle_i32x4(p, q, 0xDD));
}

BODY void tile_grid_loop(int64_t cols, const uint8_t *const *wp, const uint8_t *const *xp,
                         __m512 *acc_io) {
  __m512 acc = *acc_io;
  for (int64_t i = 0; i < cols / QK_K; i++) {
    const uint8_t *wr[GEMM_KR], *xr[GEMM_KT];
#pragma GCC unroll 4
    for (int r = 0; r < GEMM_KR; r++) wr[r] = wp[r] + i * GW_REC;
#pragma GCC unroll 4
    for (int t = 0; t < GEMM_KT; t++) xr[t] = xp[t] + i * GX_REC;
    __m512i a[GEMM_KR * GEMM_KT];
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
      __m512i wq[GEMM_KR];
#pragma GCC unroll 4
      for (int r = 0; r < GEMM_KR; r++) wq[r] = load512(wr[r] + 64 * c);
#pragma GCC unroll 4
      for (int t = 0; t < GEMM_KT; t++) {
        const __m512i x = load512(xr[t] + 64 * c);
#pragma GCC unroll 4
        for (int r = 0; r < GEMM_KR; r++)
          a[4 * r + t] = dpbusd512(c == 0 ? _mm512_setzero_si512() : a[4 * r + t], x, wq[r]);
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < GEMM_KR; r++) {
      const __m512i sw = load512(wr[r] + GW_S);
#pragma GCC unroll 4
      for (int t = 0; t < GEMM_KT; t++) a[4 * r + t] = _mm512_mullo_epi32(a[4 * r + t], sw);
    }
    const __m512i corr = _mm512_castps_si512(four(wr, GW_CORR, 0));
    const __m512i isum = _mm512_sub_epi32(reduce16(a), corr);
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum),
                          _mm512_mul_ps(four(wr, GW_D, 0), four(xr, GX_D, 1)), acc);
  }
  *acc_io = acc;
}

BODY void tile_grid(int64_t cols, const uint8_t *const *wp, const uint8_t *const *xp, float *out,
                    int64_t ldy) {
  __m512 acc = _mm512_setzero_ps();
  tile_grid_loop(cols, wp, xp, &acc);
  tile_k_end(6, acc, acc, out, ldy);
}

#define GEMMG(name, type)                                                                       \
  static AVX512 void pack_w_##name(int64_t cols, const void *w, void *wp) {                     \
    pack_grid(type, cols, w, wp);                                                               \
  }                                                                                             \
  static AVX512 void pack_x_##name(int64_t cols, const void *xq, void *xp) {                    \
    pack_xg(cols, xq, xp);                                                                      \
  }                                                                                             \
  static AVX512 void tile_##name(int64_t cols, const uint8_t *const *wp,                        \
                                 const uint8_t *const *xp, float *out, int64_t ldy) {           \
    tile_grid(cols, wp, xp, out, ldy);                                                          \
  }                                                                                             \
  static AVX512 void tile_part_##name(int64_t cols, const uint8_t *const *wp,                   \
                                      const uint8_t *const *xp, float *acc) {                   \
    __m512 a = _mm512_load_ps(acc);                                                             \
    tile_grid_loop(cols, wp, xp, &a);                                                           \
    _mm512_store_ps(acc, a);                                                                    \
  }                                                                                             \
  static AVX512 void tile_end_##name(const float *acc, float *out, int64_t ldy) {               \
    tile_k_end(6, _mm512_load_ps(acc), _mm512_load_ps(acc), out, ldy);                          \
  }                                                                                             \
  static const pa_gemm_kernel gemm_##name = {GEMM_KR, GEMM_KT,       gw_size,    pack_w_##name, \
                                             gx_size, pack_x_##name, tile_##name};              \
  static const pa_gemm_parts parts_##name = {&gemm_##name, QK_K, 16, tile_part_##name,          \
                                             tile_end_##name};

GEMMG(iq2_xxs, PA_TYPE_IQ2_XXS)
GEMMG(iq2_xs, PA_TYPE_IQ2_XS)
GEMMG(iq2_s, PA_TYPE_IQ2_S)
GEMMG(iq3_xxs, PA_TYPE_IQ3_XXS)
GEMMG(iq3_s, PA_TYPE_IQ3_S)
GEMMG(iq1_s, PA_TYPE_IQ1_S)
GEMMG(iq1_m, PA_TYPE_IQ1_M)

const pa_gemm_parts *pa_gemm_parts_avx512(const pa_gemm_kernel *g) {
  const pa_gemm_parts *all[] = {&parts_q4_K,    &parts_q4_K_vnni, &parts_q5_K,   &parts_q5_K_vnni,
                                &parts_q6_K,    &parts_q6_K_vnni, &parts_iq2_xxs, &parts_iq2_xs,
                                &parts_iq2_s,   &parts_iq3_xxs,   &parts_iq3_s,  &parts_iq1_s,
                                &parts_iq1_m};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (all[i]->gemm == g) return all[i];
  return NULL;
}

/* ---- instances ---- */

#define GEMM32(name, kind, act)                                                                 \
  static AVX512 void pack_w_##name(int64_t cols, const void *w, void *wp) {                     \
    pack_w32(kind, cols, w, wp);                                                                \
  }                                                                                             \
  static AVX512 void tile_##name(int64_t cols, const uint8_t *const *wp,                        \
                                 const uint8_t *const *xp, float *out, int64_t ldy) {           \
    tile32(kind, cols, wp, xp, out, ldy);                                                       \
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

GEMM32(q4_0, K_Q4_0, PA_TYPE_Q8_0)
GEMM32(q4_1, K_Q4_1, PA_TYPE_Q8_1)
GEMM32(q5_0, K_Q5_0, PA_TYPE_Q8_0)
GEMM32(q5_1, K_Q5_1, PA_TYPE_Q8_1)
GEMM32(q8_0, K_Q8_0, PA_TYPE_Q8_0)

void pa_kernels_fill_avx512_gemm(const pa_gemm_kernel **t, int vnni) {
  t[PA_TYPE_Q4_0] = vnni ? &pa_b32_gemm_q4_0 : &gemm_q4_0;
  t[PA_TYPE_Q4_1] = vnni ? &pa_b32_gemm_q4_1 : &gemm_q4_1;
  t[PA_TYPE_Q5_0] = vnni ? &pa_b32_gemm_q5_0 : &gemm_q5_0;
  t[PA_TYPE_Q5_1] = vnni ? &pa_b32_gemm_q5_1 : &gemm_q5_1;
  t[PA_TYPE_Q8_0] = vnni ? &pa_b32_gemm_q8_0 : &gemm_q8_0;
  t[PA_TYPE_Q4_K] = vnni ? &gemm_q4_K_vnni : &gemm_q4_K;
  t[PA_TYPE_Q5_K] = vnni ? &gemm_q5_K_vnni : &gemm_q5_K;
  t[PA_TYPE_Q6_K] = vnni ? &gemm_q6_K_vnni : &gemm_q6_K;
  if (vnni) { /* without VNNI the table takes gemm_avx2.c's (dispatch.c) */
    t[PA_TYPE_IQ2_XXS] = &gemm_iq2_xxs;
    t[PA_TYPE_IQ2_XS] = &gemm_iq2_xs;
    t[PA_TYPE_IQ2_S] = &gemm_iq2_s;
    t[PA_TYPE_IQ3_XXS] = &gemm_iq3_xxs;
    t[PA_TYPE_IQ3_S] = &gemm_iq3_s;
    t[PA_TYPE_IQ1_S] = &gemm_iq1_s;
    t[PA_TYPE_IQ1_M] = &gemm_iq1_m;
  }
}

#endif /* __x86_64__ */
