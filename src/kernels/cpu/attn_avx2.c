/* attn_avx2.c: the AVX2 + FMA tile kernels of the attention (model/
 * attention.h). Built for baseline x86-64: functions carry target attributes
 * and are reached only through pa_attn_avx2(), which checks the CPU.
 *
 * The shapes of attn_avx512.c at half the width: qk in blocks of 2 rows x 4
 * positions (8 accumulators over 8-float chunks of head_dim, one transpose-
 * reduction with the same tree for every slot: lanes i and i+4, i+2, i+1),
 * softmax over 8-column chunks fixed by position, pv in blocks of 2 rows x
 * 32 floats of head_dim_v with V rows in ascending position. Partial blocks
 * repeat a row or position instead of taking another path. */
#include <immintrin.h>
#include <math.h>
#include <stdbool.h>

#include "kernels/ops.h"
#include "model/attention.h"

#define AVX2 __attribute__((target("avx2,fma")))
#define BODY static inline __attribute__((always_inline)) AVX2

BODY __m256i lanes_below(int32_t n) { /* lanes 0..n-1 all ones */
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* a[2c + i]: the dot of row i and position c. Returns lane 4i + c = its sum. */
BODY __m256 reduce8(const __m256 *a) {
  __m256 b[4], c[2];
#pragma GCC unroll 4
  for (int m = 0; m < 4; m++) /* (i, i+4) */
    b[m] = _mm256_add_ps(_mm256_permute2f128_ps(a[2 * m], a[2 * m + 1], 0x20),
                         _mm256_permute2f128_ps(a[2 * m], a[2 * m + 1], 0x31));
#pragma GCC unroll 2
  for (int n = 0; n < 2; n++) { /* (i, i+2) */
    __m256d x = _mm256_castps_pd(b[2 * n]), y = _mm256_castps_pd(b[2 * n + 1]);
    c[n] = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(x, y)), _mm256_castpd_ps(_mm256_unpackhi_pd(x, y)));
  }
  /* (i, i+1) */
  return _mm256_add_ps(_mm256_shuffle_ps(c[0], c[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm256_shuffle_ps(c[0], c[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

AVX2 static void qk_avx2(const pa_attn_tile *t) {
  const int32_t hd = t->head_dim;
  const __m256 scale = _mm256_set1_ps(t->scale);
  for (int32_t r0 = 0; r0 < t->n_rows; r0 += 2) {
    const int32_t nr = t->n_rows - r0 < 2 ? t->n_rows - r0 : 2;
    int32_t a = PA_ATTN_TILE, b = 0;
    for (int32_t i = 0; i < nr; i++)
      if (t->jlo[r0 + i] < t->jhi[r0 + i]) {
        a = t->jlo[r0 + i] < a ? t->jlo[r0 + i] : a;
        b = t->jhi[r0 + i] > b ? t->jhi[r0 + i] : b;
      }
    if (a >= b) continue;
    const float *q[2] = {t->q[r0], t->q[r0 + (nr > 1 ? 1 : 0)]};
    for (int32_t j = a; j < b; j += 4) {
      const float *k[4];
      for (int c = 0; c < 4; c++) k[c] = t->k[j + c < b ? j + c : b - 1];
      __m256 acc[8];
#pragma GCC unroll 8
      for (int i = 0; i < 8; i++) acc[i] = _mm256_setzero_ps();
      int32_t d = 0;
      for (; d + 8 <= hd; d += 8) {
        __m256 kv[4];
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) kv[c] = _mm256_loadu_ps(k[c] + d);
#pragma GCC unroll 2
        for (int i = 0; i < 2; i++) {
          const __m256 qv = _mm256_loadu_ps(q[i] + d);
#pragma GCC unroll 4
          for (int c = 0; c < 4; c++) acc[2 * c + i] = _mm256_fmadd_ps(qv, kv[c], acc[2 * c + i]);
        }
      }
      if (d < hd) {
        const __m256i m = lanes_below(hd - d);
        __m256 kv[4];
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) kv[c] = _mm256_maskload_ps(k[c] + d, m);
#pragma GCC unroll 2
        for (int i = 0; i < 2; i++) {
          const __m256 qv = _mm256_maskload_ps(q[i] + d, m);
#pragma GCC unroll 4
          for (int c = 0; c < 4; c++) acc[2 * c + i] = _mm256_fmadd_ps(qv, kv[c], acc[2 * c + i]);
        }
      }
      const __m256 sc = _mm256_mul_ps(reduce8(acc), scale);
      const __m128i cols = _mm_cmpgt_epi32(_mm_set1_epi32(b - j), _mm_setr_epi32(0, 1, 2, 3));
      float *s0 = t->s + (int64_t)r0 * PA_ATTN_TILE + j;
      _mm_maskstore_ps(s0, cols, _mm256_castps256_ps128(sc));
      if (nr > 1) _mm_maskstore_ps(s0 + PA_ATTN_TILE, cols, _mm256_extractf128_ps(sc, 1));
    }
  }
}

AVX2 static void softmax_avx2(const pa_attn_tile *t) {
  const __m256 ninf = _mm256_set1_ps(-INFINITY);
  for (int32_t r = 0; r < t->n_rows; r++) {
    const int32_t lo = t->jlo[r], hi = t->jhi[r];
    if (lo >= hi) continue;
    float *s = t->s + (int64_t)r * PA_ATTN_TILE;
    const int32_t c0 = lo & ~7, c1 = (hi + 7) & ~7;
    __m256 mx = ninf;
    for (int32_t c = c0; c < c1; c += 8) {
      const __m256 in = _mm256_castsi256_ps(_mm256_andnot_si256(lanes_below(lo - c), lanes_below(hi - c)));
      mx = _mm256_max_ps(mx, _mm256_blendv_ps(ninf, _mm256_loadu_ps(s + c), in));
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float mt = _mm_cvtss_f32(m4), mo = t->m[r], mn = mt > mo ? mt : mo;
    t->alpha[r] = mn > mo ? expf(mo - mn) : 1.0f;
    t->m[r] = mn;
    const __m256 mnv = _mm256_set1_ps(mn);
    for (int32_t c = c0; c < c1; c += 8) {
      const __m256 in = _mm256_castsi256_ps(_mm256_andnot_si256(lanes_below(lo - c), lanes_below(hi - c)));
      _mm256_storeu_ps(s + c, _mm256_blendv_ps(ninf, _mm256_sub_ps(_mm256_loadu_ps(s + c), mnv), in));
    }
    pa_exp_avx2(s + c0, s + c0, c1 - c0);
    __m256 sum = _mm256_setzero_ps();
    for (int32_t c = c0; c < c1; c += 8) sum = _mm256_add_ps(sum, _mm256_loadu_ps(s + c));
    /* fixed tree: (i, i+4), (i, i+2), (i, i+1) */
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps(sum, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    q = _mm_add_ss(q, _mm_movehdup_ps(q));
    t->l[r] = t->l[r] * t->alpha[r] + _mm_cvtss_f32(q);
  }
}

AVX2 static void pv_avx2(const pa_attn_tile *t) {
  const int32_t hdv = t->head_dim_v;
  for (int32_t r0 = 0; r0 < t->n_rows; r0 += 2) {
    const int32_t nr = t->n_rows - r0 < 2 ? t->n_rows - r0 : 2;
    /* slots past the rows or with an empty range repeat the first row
     * with a range (computed, never stored) */
    int32_t f = -1;
    for (int32_t i = 0; i < nr && f < 0; i++)
      if (t->jlo[r0 + i] < t->jhi[r0 + i]) f = r0 + i;
    if (f < 0) continue;
    int32_t lo[2], hi[2];
    bool store[2];
    const float *s[2];
    float *acc[2];
    __m256 alpha[2];
    for (int i = 0; i < 2; i++) {
      store[i] = i < nr && t->jlo[r0 + i] < t->jhi[r0 + i];
      const int32_t r = store[i] ? r0 + i : f;
      lo[i] = t->jlo[r];
      hi[i] = t->jhi[r];
      s[i] = t->s + (int64_t)r * PA_ATTN_TILE;
      acc[i] = t->acc + r * t->acc_stride;
      alpha[i] = _mm256_set1_ps(t->alpha[r]);
    }
    const int32_t a = lo[0] < lo[1] ? lo[0] : lo[1], b = hi[0] > hi[1] ? hi[0] : hi[1];
    const int32_t ca = lo[0] > lo[1] ? lo[0] : lo[1], cb = hi[0] < hi[1] ? hi[0] : hi[1];
    for (int32_t d0 = 0; d0 < hdv; d0 += 32) {
      __m256i m[4];
      __m256 o[2][4];
#pragma GCC unroll 4
      for (int c = 0; c < 4; c++) m[c] = lanes_below(hdv - d0 - 8 * c);
#pragma GCC unroll 2
      for (int i = 0; i < 2; i++)
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) o[i][c] = _mm256_mul_ps(_mm256_maskload_ps(acc[i] + d0 + 8 * c, m[c]), alpha[i]);
      for (int32_t j = a; j < b; j++) {
        __m256 v[4];
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) v[c] = _mm256_maskload_ps(t->v[j] + d0 + 8 * c, m[c]);
        const bool all = j >= ca && j < cb;
#pragma GCC unroll 2
        for (int i = 0; i < 2; i++)
          if (all || (j >= lo[i] && j < hi[i])) {
            const __m256 e = _mm256_set1_ps(s[i][j]);
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++) o[i][c] = _mm256_fmadd_ps(e, v[c], o[i][c]);
          }
      }
#pragma GCC unroll 2
      for (int i = 0; i < 2; i++)
        if (store[i])
#pragma GCC unroll 4
          for (int c = 0; c < 4; c++) _mm256_maskstore_ps(acc[i] + d0 + 8 * c, m[c], o[i][c]);
    }
  }
}

void pa_attn_fill_avx2(pa_attn_kernels *k) {
  k->qk = qk_avx2;
  k->softmax = softmax_avx2;
  k->pv = pv_avx2;
}
