/* attn_q8.c: the integer tile kernels of a Q8 KV cache (qk_q8 and pv_q8,
 * model/attention.h), for AVX2 and for AVX-512 BW + VNNI. Built for
 * baseline x86-64: functions carry target attributes and are reached only
 * through the tables of model/attention.c, which check the CPU.
 *
 * Both products are 16-bit by 8-bit integer dot products over pairs, the
 * cache's quants sign-extended to 16 bits: qk pairs two dimensions of a
 * position (K is stored as pairs of d), pv two positions of a dimension (V
 * as pairs of positions), so one vpdpwssd (AVX-512 VNNI) or vpmaddwd +
 * vpaddd (AVX2) takes 16 or 8 lanes two steps further, each lane a column
 * (qk) or a dimension (pv). The int32 sums are exact, so every table gives
 * the plain twin's bits. Per 16 columns, d and row the F16 kernels spend a
 * conversion and a multiply-add; these spend half a sign extension and
 * half a dot step.
 *
 * pv reads the pairs over the union of the block's rows' ranges: the
 * weights are 0 outside a row's range, so the V quants there (written or
 * not) add exactly nothing. */
#if defined(__x86_64__) /* x86 SIMD; other targets have the plain C tables */
#include <immintrin.h>
#include <stdbool.h>
#include <string.h>

#include "base/base.h"
#include "kernels/cpu/simd_masks.h"
#include "kernels/attention.h"
#include "quant/quant.h"

/* pv8_tail rounds its two products before adding them, as the SIMD blocks do. */
PA_NO_FP_CONTRACT

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))

/* The union [a, b) of rows r0 .. r0 + nr - 1's ranges; false when all are empty. */
static inline bool rows_union(const pa_attn_tile *t, int32_t r0, int nr, int32_t *a, int32_t *b) {
  *a = PA_ATTN_TILE;
  *b = 0;
  for (int i = 0; i < nr; i++)
    if (t->jlo[r0 + i] < t->jhi[r0 + i]) {
      *a = t->jlo[r0 + i] < *a ? t->jlo[r0 + i] : *a;
      *b = t->jhi[r0 + i] > *b ? t->jhi[r0 + i] : *b;
    }
  return *a < *b;
}

/* Row r's 16-bit pair p (of q16 or w16) as an int32. */
static inline int32_t pair_of(const int16_t *row, int32_t p) {
  int32_t x;
  memcpy(&x, row + 2 * p, sizeof x);
  return x;
}

/* A row's weights' scale from their largest (the plain twin's steps):
 * returns 32767 / mx, or 0 (wf = 0) below 1e-30 or past 3e38. */
static inline float weights_inv(float mx, float *wf) {
  const float inv = mx >= 1e-30f && mx <= 3.0e38f ? 32767.0f / mx : 0.0f;
  *wf = inv > 0.0f ? mx / 32767.0f : 0.0f;
  return inv;
}

/* pv of rows r0 .. r0 + nr - 1 for dimensions d0 .. head_dim_v - 1 (the
 * few past the SIMD blocks), pairs p0 .. p1 - 1: the plain twin's steps. */
static void pv8_tail(const pa_attn_tile *t, int32_t r0, int32_t nr, int32_t d0, int32_t p0,
                     int32_t p1) {
  const int64_t hdv = t->head_dim_v;
  for (int32_t r = r0; r < r0 + nr; r++) {
    if (t->jlo[r] >= t->jhi[r]) continue;
    const int16_t *w = t->w16 + (int64_t)r * PA_ATTN_TILE;
    float *o = t->acc + r * t->acc_stride;
    for (int64_t d = d0; d < hdv; d++) {
      int32_t sum = 0;
      for (int32_t p = p0; p < p1; p++) {
        const int8_t *v = (const int8_t *)t->vc[p >> 3] + ((p & 7) * hdv + d) * 2;
        sum += w[2 * p] * v[0] + w[2 * p + 1] * v[1];
      }
      const float kept = o[d] * t->alpha[r], added = (float)sum * t->wf[r];
      o[d] = kept + added;
    }
  }
}

/* ---- AVX2 ---- */

#define BODY2 static inline __attribute__((always_inline)) AVX2

/* 16 int16 lanes of 16 bytes, sign-extended */
BODY2 __m256i widen2(const int8_t *p) {
  return _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)p));
}

/* Scores of rows r0 .. r0 + NR - 1 over chunk c (two halves of 8 columns). */
BODY2 void qk8_block2(const pa_attn_tile *t, pa_attn_pfc *pf, int32_t r0, const int NR, int32_t c) {
  const int32_t np = t->head_dim / 2;
  const int64_t ps = 2 * t->k_stride;
  const int8_t *kc = t->kc[c];
  __m256i acc[4][2];
  const int16_t *q[4];
#pragma GCC unroll 4
  for (int i = 0; i < NR; i++) {
    q[i] = t->q16 + (r0 + i) * t->q16_stride;
    acc[i][0] = acc[i][1] = _mm256_setzero_si256();
  }
  for (int32_t p = 0; p < np; p++) {
    pa_attn_pfc_step(pf);
    const __m256i k0 = widen2(kc + p * ps), k1 = widen2(kc + p * ps + 16);
#pragma GCC unroll 4
    for (int i = 0; i < NR; i++) {
      const __m256i qb = _mm256_set1_epi32(pair_of(q[i], p));
      acc[i][0] = _mm256_add_epi32(acc[i][0], _mm256_madd_epi16(k0, qb));
      acc[i][1] = _mm256_add_epi32(acc[i][1], _mm256_madd_epi16(k1, qb));
    }
  }
  const __m256 ks0 = _mm256_loadu_ps(t->ks + 16 * c), ks1 = _mm256_loadu_ps(t->ks + 16 * c + 8);
#pragma GCC unroll 4
  for (int i = 0; i < NR; i++) {
    const __m256 f = _mm256_set1_ps(t->qf[r0 + i]);
    float *s = t->s + (int64_t)(r0 + i) * PA_ATTN_TILE + 16 * c;
    _mm256_storeu_ps(s, _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(acc[i][0]), f), ks0));
    _mm256_storeu_ps(s + 8, _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(acc[i][1]), f), ks1));
  }
}

AVX2 static void qk_q8_avx2(const pa_attn_tile *t) {
  pa_attn_pfc pf = pa_attn_pfc_start(t->next_k); /* the next tile's K, a line per step */
  for (int32_t r0 = 0; r0 < t->n_rows; r0 += 4) {
    const int32_t nr = t->n_rows - r0 < 4 ? t->n_rows - r0 : 4;
    int32_t a, b;
    if (!rows_union(t, r0, nr, &a, &b)) continue;
    for (int32_t c = a >> 4; c <= (b - 1) >> 4; c++) switch (nr) {
        case 1:
          qk8_block2(t, &pf, r0, 1, c);
          break;
        case 2:
          qk8_block2(t, &pf, r0, 2, c);
          break;
        case 3:
          qk8_block2(t, &pf, r0, 3, c);
          break;
        default:
          qk8_block2(t, &pf, r0, 4, c);
          break;
      }
  }
  pa_attn_pfc_finish(&pf);
}

/* Rows r0 .. r0 + NR - 1, dimensions d0 .. d0 + 15, pairs p0 .. p1 - 1. */
BODY2 void pv8_block2(const pa_attn_tile *t, pa_attn_pfc *pf, int32_t r0, const int NR, int32_t d0,
                      int32_t p0, int32_t p1) {
  const int64_t hdv = t->head_dim_v;
  __m256i acc[4][2];
  const int16_t *w[4];
#pragma GCC unroll 4
  for (int i = 0; i < NR; i++) {
    w[i] = t->w16 + (int64_t)(r0 + i) * PA_ATTN_TILE;
    acc[i][0] = acc[i][1] = _mm256_setzero_si256();
  }
  for (int32_t p = p0; p < p1; p++) {
    pa_attn_pfc_step(pf);
    const int8_t *vp = (const int8_t *)t->vc[p >> 3] + ((p & 7) * hdv + d0) * 2;
    const __m256i v0 = widen2(vp), v1 = widen2(vp + 16);
#pragma GCC unroll 4
    for (int i = 0; i < NR; i++) {
      const __m256i wb = _mm256_set1_epi32(pair_of(w[i], p));
      acc[i][0] = _mm256_add_epi32(acc[i][0], _mm256_madd_epi16(v0, wb));
      acc[i][1] = _mm256_add_epi32(acc[i][1], _mm256_madd_epi16(v1, wb));
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < NR; i++) {
    const int32_t r = r0 + i;
    if (t->jlo[r] >= t->jhi[r]) continue;
    const __m256 alpha = _mm256_set1_ps(t->alpha[r]), f = _mm256_set1_ps(t->wf[r]);
    float *o = t->acc + r * t->acc_stride + d0;
#pragma GCC unroll 2
    for (int c = 0; c < 2; c++) {
      const __m256 kept = _mm256_mul_ps(_mm256_loadu_ps(o + 8 * c), alpha);
      _mm256_storeu_ps(o + 8 * c,
                       _mm256_add_ps(kept, _mm256_mul_ps(_mm256_cvtepi32_ps(acc[i][c]), f)));
    }
  }
}

/* w16 and wf of every row (the plain twin's quantize_weights: the same
 * products in the same order, max is exact, NaN gives 0). */
AVX2 static void weights_avx2(const pa_attn_tile *t) {
  const __m256 zero = _mm256_setzero_ps(), top = _mm256_set1_ps(32767.0f),
               half = _mm256_set1_ps(0.5f);
  for (int32_t r = 0; r < t->n_rows; r++) {
    const int32_t lo = t->jlo[r], hi = t->jhi[r];
    const float *s = t->s + (int64_t)r * PA_ATTN_TILE;
    int16_t *w = t->w16 + (int64_t)r * PA_ATTN_TILE;
    __m256 x[PA_ATTN_TILE / 8], mx = zero;
    __m256i in[PA_ATTN_TILE / 8];
    for (int c = 0; c < PA_ATTN_TILE / 8; c++) {
      in[c] = _mm256_andnot_si256(pa_lanes8(lo - 8 * c), pa_lanes8(hi - 8 * c));
      x[c] =
          _mm256_and_ps(_mm256_castsi256_ps(in[c]),
                        _mm256_mul_ps(_mm256_loadu_ps(s + 8 * c), _mm256_loadu_ps(t->vs + 8 * c)));
      mx = _mm256_max_ps(x[c], mx); /* NaN: keeps mx */
    }
    const __m256 inv = _mm256_set1_ps(weights_inv(pa_hmax8(mx), &t->wf[r]));
    for (int c = 0; c < PA_ATTN_TILE / 16; c++) {
      __m256i q[2];
      for (int h = 0; h < 2; h++) {
        const __m256 y = _mm256_add_ps(_mm256_mul_ps(x[2 * c + h], inv), half);
        const __m256 ok =
            _mm256_and_ps(_mm256_castsi256_ps(in[2 * c + h]), _mm256_cmp_ps(y, zero, _CMP_GE_OQ));
        q[h] = _mm256_cvttps_epi32(_mm256_and_ps(ok, _mm256_min_ps(y, top)));
      }
      /* int32 -> int16 in order (packs interleaves the 128-bit halves) */
      const __m256i p = _mm256_permute4x64_epi64(_mm256_packs_epi32(q[0], q[1]), 0xD8);
      _mm256_storeu_si256((__m256i *)(w + 16 * c), p);
    }
  }
}

AVX2 static void pv_q8_avx2(const pa_attn_tile *t) {
  pa_attn_pfc pf = pa_attn_pfc_start(t->next_v); /* the next tile's V, a line per step */
  weights_avx2(t);
  const int32_t hd16 = t->head_dim_v & ~15;
  for (int32_t r0 = 0; r0 < t->n_rows; r0 += 4) {
    const int32_t nr = t->n_rows - r0 < 4 ? t->n_rows - r0 : 4;
    int32_t a, b;
    if (!rows_union(t, r0, nr, &a, &b)) continue;
    const int32_t p0 = a >> 1, p1 = (b + 1) >> 1;
    for (int32_t d0 = 0; d0 < hd16; d0 += 16) switch (nr) {
        case 1:
          pv8_block2(t, &pf, r0, 1, d0, p0, p1);
          break;
        case 2:
          pv8_block2(t, &pf, r0, 2, d0, p0, p1);
          break;
        case 3:
          pv8_block2(t, &pf, r0, 3, d0, p0, p1);
          break;
        default:
          pv8_block2(t, &pf, r0, 4, d0, p0, p1);
          break;
      }
    pv8_tail(t, r0, nr, hd16, p0, p1);
  }
  pa_attn_pfc_finish(&pf);
}

/* The plain twin's quantize_q: the same operations per value (max is
 * exact; NaN skipped by the max and set to 0). */
static inline float q_inv(float amax) {
  return amax > 0.0f && amax <= 3.0e38f ? 32767.0f / amax : 0.0f;
}

AVX2 static float quantize_q_avx2(const float *q, int32_t n, int16_t *out) {
  const float amax = pa_absmax8(q, n), inv = q_inv(amax);
  const __m256 vinv = _mm256_set1_ps(inv), top = _mm256_set1_ps(32767.0f),
               bot = _mm256_set1_ps(-32767.0f);
  const __m256 half = _mm256_set1_ps(0.5f), mhalf = _mm256_set1_ps(-0.5f),
               zero = _mm256_setzero_ps();
  for (int32_t d = 0; d < n; d += 8) {
    __m256 x = _mm256_mul_ps(_mm256_maskload_ps(q + d, pa_lanes8(n - d)), vinv);
    x = _mm256_and_ps(x, _mm256_cmp_ps(x, x, _CMP_ORD_Q));
    x = _mm256_max_ps(_mm256_min_ps(x, top), bot);
    x = _mm256_add_ps(x, _mm256_blendv_ps(mhalf, half, _mm256_cmp_ps(x, zero, _CMP_GE_OQ)));
    const __m256i v = _mm256_cvttps_epi32(x);
    const __m128i p = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    int16_t tmp[8];
    _mm_storeu_si128((__m128i *)tmp, p);
    memcpy(out + d, tmp, sizeof(int16_t) * (size_t)(n - d < 8 ? n - d : 8));
  }
  return inv > 0.0f ? amax / 32767.0f : 0.0f;
}

void pa_attn_fill_q8_avx2(pa_attn_kernels *k) {
  k->qk_q8 = qk_q8_avx2;
  k->pv_q8 = pv_q8_avx2;
  k->quantize_q = quantize_q_avx2;
  k->spread_q8 = true;
}

/* ---- AVX-512 BW + VNNI ---- */

#define BODY512 static inline __attribute__((always_inline)) AVX512

/* Scores of rows r0 .. r0 + NR - 1 over chunks c0 .. c0 + NC - 1. */
BODY512 void qk8_block512(const pa_attn_tile *t, pa_attn_pfc *pf, int32_t r0, const int NR,
                          int32_t c0, const int NC) {
  const int32_t np = t->head_dim / 2;
  const int64_t ps = 2 * t->k_stride; /* bytes from one pair of d to the next */
  __m512i acc[4][4];
  const int16_t *q[4];
  const int8_t *kc[4];
#pragma GCC unroll 4
  for (int i = 0; i < NR; i++) {
    q[i] = t->q16 + (r0 + i) * t->q16_stride;
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) acc[i][c] = _mm512_setzero_si512();
  }
#pragma GCC unroll 4
  for (int c = 0; c < NC; c++) kc[c] = t->kc[c0 + c];
  for (int32_t p = 0; p < np; p++) {
    pa_attn_pfc_step(pf);
    __m512i k[4];
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++)
      k[c] = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(kc[c] + p * ps)));
#pragma GCC unroll 4
    for (int i = 0; i < NR; i++) {
      const __m512i qb = _mm512_set1_epi32(pair_of(q[i], p));
#pragma GCC unroll 4
      for (int c = 0; c < NC; c++) acc[i][c] = _mm512_dpwssd_epi32(acc[i][c], k[c], qb);
    }
  }
  __m512 ks[4];
#pragma GCC unroll 4
  for (int c = 0; c < NC; c++) ks[c] = _mm512_loadu_ps(t->ks + 16 * (c0 + c));
#pragma GCC unroll 4
  for (int i = 0; i < NR; i++) {
    const __m512 f = _mm512_set1_ps(t->qf[r0 + i]);
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++)
      _mm512_storeu_ps(t->s + (int64_t)(r0 + i) * PA_ATTN_TILE + 16 * (c0 + c),
                       _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(acc[i][c]), f), ks[c]));
  }
}

#define QK8_CHUNKS(NR)                \
  switch (nc) {                       \
    case 1:                           \
      qk8_block512(t, pf, r0, NR, c0, 1); \
      break;                          \
    case 2:                           \
      qk8_block512(t, pf, r0, NR, c0, 2); \
      break;                          \
    case 3:                           \
      qk8_block512(t, pf, r0, NR, c0, 3); \
      break;                          \
    default:                          \
      qk8_block512(t, pf, r0, NR, c0, 4); \
      break;                          \
  }

AVX512 static void qk_q8_avx512(const pa_attn_tile *t) {
  _Static_assert(PA_ATTN_CHUNKS == 4, "qk8_block512 covers a tile in at most 4 chunks");
  pa_attn_pfc pfc = pa_attn_pfc_start(t->next_k), *pf = &pfc; /* a line per step */
  for (int32_t r0 = 0; r0 < t->n_rows; r0 += 4) {
    const int32_t nr = t->n_rows - r0 < 4 ? t->n_rows - r0 : 4;
    int32_t a, b;
    if (!rows_union(t, r0, nr, &a, &b)) continue;
    const int32_t c0 = a >> 4, nc = ((b - 1) >> 4) + 1 - c0;
    switch (nr) {
      case 1:
        QK8_CHUNKS(1) break;
      case 2:
        QK8_CHUNKS(2) break;
      case 3:
        QK8_CHUNKS(3) break;
      default:
        QK8_CHUNKS(4) break;
    }
  }
  pa_attn_pfc_finish(pf);
}

/* Rows r0 .. r0 + NR - 1, dimensions d0 .. d0 + 16 ND - 1, the tile's pairs
 * p0 .. p1 - 1. */
BODY512 void pv8_block512(const pa_attn_tile *t, pa_attn_pfc *pf, int32_t r0, const int NR,
                          int32_t d0, const int ND, int32_t p0, int32_t p1) {
  const int64_t hdv = t->head_dim_v;
  __m512i acc[4][4];
  const int16_t *w[4];
#pragma GCC unroll 4
  for (int i = 0; i < NR; i++) {
    w[i] = t->w16 + (int64_t)(r0 + i) * PA_ATTN_TILE;
#pragma GCC unroll 4
    for (int c = 0; c < ND; c++) acc[i][c] = _mm512_setzero_si512();
  }
  for (int32_t p = p0; p < p1; p++) {
    pa_attn_pfc_step(pf);
    const int8_t *vp = (const int8_t *)t->vc[p >> 3] + ((p & 7) * hdv + d0) * 2;
    __m512i v[4];
#pragma GCC unroll 4
    for (int c = 0; c < ND; c++)
      v[c] = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(vp + 32 * c)));
#pragma GCC unroll 4
    for (int i = 0; i < NR; i++) {
      const __m512i wb = _mm512_set1_epi32(pair_of(w[i], p));
#pragma GCC unroll 4
      for (int c = 0; c < ND; c++) acc[i][c] = _mm512_dpwssd_epi32(acc[i][c], v[c], wb);
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < NR; i++) {
    const int32_t r = r0 + i;
    if (t->jlo[r] >= t->jhi[r]) continue;
    const __m512 alpha = _mm512_set1_ps(t->alpha[r]), f = _mm512_set1_ps(t->wf[r]);
    float *o = t->acc + r * t->acc_stride + d0;
#pragma GCC unroll 4
    for (int c = 0; c < ND; c++) {
      const __m512 kept = _mm512_mul_ps(_mm512_loadu_ps(o + 16 * c), alpha);
      _mm512_storeu_ps(o + 16 * c,
                       _mm512_add_ps(kept, _mm512_mul_ps(_mm512_cvtepi32_ps(acc[i][c]), f)));
    }
  }
}

#define PV8_DIMS(NR)                                                    \
  for (int32_t d0 = 0; d0 < hd16; d0 += 64) switch ((hd16 - d0) / 16) { \
      case 1:                                                           \
        pv8_block512(t, pf, r0, NR, d0, 1, p0, p1);                     \
        break;                                                          \
      case 2:                                                           \
        pv8_block512(t, pf, r0, NR, d0, 2, p0, p1);                     \
        break;                                                          \
      case 3:                                                           \
        pv8_block512(t, pf, r0, NR, d0, 3, p0, p1);                     \
        break;                                                          \
      default:                                                          \
        pv8_block512(t, pf, r0, NR, d0, 4, p0, p1);                     \
        break;                                                          \
    }

/* weights_avx2 at twice the width */
AVX512 static void weights_avx512(const pa_attn_tile *t) {
  const __m512 top = _mm512_set1_ps(32767.0f), half = _mm512_set1_ps(0.5f);
  for (int32_t r = 0; r < t->n_rows; r++) {
    const int32_t lo = t->jlo[r], hi = t->jhi[r];
    const float *s = t->s + (int64_t)r * PA_ATTN_TILE;
    int16_t *w = t->w16 + (int64_t)r * PA_ATTN_TILE;
    __m512 x[PA_ATTN_CHUNKS], mx = _mm512_setzero_ps();
    __mmask16 in[PA_ATTN_CHUNKS];
    for (int c = 0; c < PA_ATTN_CHUNKS; c++) {
      in[c] = pa_lanes16(hi - 16 * c) & (__mmask16)~pa_lanes16(lo - 16 * c);
      x[c] =
          _mm512_maskz_mul_ps(in[c], _mm512_loadu_ps(s + 16 * c), _mm512_loadu_ps(t->vs + 16 * c));
      mx = _mm512_max_ps(x[c], mx); /* NaN: keeps mx */
    }
    const __m512 inv = _mm512_set1_ps(weights_inv(_mm512_reduce_max_ps(mx), &t->wf[r]));
    for (int c = 0; c < PA_ATTN_CHUNKS; c++) {
      const __m512 y = _mm512_add_ps(_mm512_mul_ps(x[c], inv), half);
      const __mmask16 ok = in[c] & _mm512_cmp_ps_mask(y, _mm512_setzero_ps(), _CMP_GE_OQ);
      _mm256_storeu_si256(
          (__m256i *)(w + 16 * c),
          _mm512_cvtepi32_epi16(_mm512_cvttps_epi32(_mm512_maskz_min_ps(ok, y, top))));
    }
  }
}

AVX512 static void pv_q8_avx512(const pa_attn_tile *t) {
  weights_avx512(t);
  pa_attn_pfc pfc = pa_attn_pfc_start(t->next_v), *pf = &pfc; /* a line per step */
  const int32_t hd16 = t->head_dim_v & ~15;
  for (int32_t r0 = 0; r0 < t->n_rows; r0 += 4) {
    const int32_t nr = t->n_rows - r0 < 4 ? t->n_rows - r0 : 4;
    int32_t a, b;
    if (!rows_union(t, r0, nr, &a, &b)) continue;
    const int32_t p0 = a >> 1, p1 = (b + 1) >> 1;
    switch (nr) {
      case 1:
        PV8_DIMS(1) break;
      case 2:
        PV8_DIMS(2) break;
      case 3:
        PV8_DIMS(3) break;
      default:
        PV8_DIMS(4) break;
    }
    pv8_tail(t, r0, nr, hd16, p0, p1);
  }
  pa_attn_pfc_finish(pf);
}

AVX512 static float quantize_q_avx512(const float *q, int32_t n, int16_t *out) {
  const float amax = pa_absmax16(q, n), inv = q_inv(amax);
  const __m512 vinv = _mm512_set1_ps(inv), top = _mm512_set1_ps(32767.0f),
               bot = _mm512_set1_ps(-32767.0f);
  const __m512 half = _mm512_set1_ps(0.5f), mhalf = _mm512_set1_ps(-0.5f);
  for (int32_t d = 0; d < n; d += 16) {
    const __mmask16 m = pa_lanes16(n - d);
    __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, q + d), vinv);
    x = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, x, _CMP_ORD_Q), x);
    x = _mm512_max_ps(_mm512_min_ps(x, top), bot);
    x = _mm512_add_ps(x, _mm512_mask_blend_ps(
                             _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GE_OQ), mhalf, half));
    _mm256_mask_storeu_epi16(out + d, m, _mm512_cvtepi32_epi16(_mm512_cvttps_epi32(x)));
  }
  return inv > 0.0f ? amax / 32767.0f : 0.0f;
}

void pa_attn_fill_q8_avx512(pa_attn_kernels *k) {
  const pa_cpu_features *f = pa_cpu();
  if (!(f->avx512f && f->avx512bw && f->avx512vl && f->avx512vnni)) return;
  k->qk_q8 = qk_q8_avx512;
  k->pv_q8 = pv_q8_avx512;
  k->quantize_q = quantize_q_avx512;
  k->spread_q8 = true; /* they ask for the next tile's lines too */
}

#endif /* __x86_64__ */
