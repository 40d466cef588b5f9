/* attn_avx512.c: the AVX-512 tile kernels of the attention (model/
 * attention.h). Built for baseline x86-64: functions carry target attributes
 * and are reached only through pa_attn_avx512(), which checks the CPU.
 *
 * qk: blocks of 4 rows x 4 positions, 16 accumulators over head_dim in
 * 16-float chunks (a masked last chunk), then one transpose-reduction of the
 * 16 accumulators into one vector: every dot product is summed by the same
 * tree (lanes i and i+8, then i+4, i+2, i+1) whatever its slot. A partial
 * block repeats its first row or last position, so there is one code path.
 * softmax: per row over the 16-column chunks around its range (lanes fixed
 * by position, -inf outside the range so exp gives 0), exp by ops_avx512.c.
 * pv: blocks of 4 rows x 64 floats of head_dim_v (16 accumulators), V rows
 * in ascending position; where every row of the block attends the position
 * plain FMAs, at the edges of the ranges a per-row test (same FMA). */
#include <immintrin.h>
#include <math.h>
#include <stdbool.h>

#include "kernels/ops.h"
#include "model/attention.h"

#define AVX512 __attribute__((target("avx512f,avx2,fma")))
#define BODY static inline __attribute__((always_inline)) AVX512

static inline __mmask16 lanes_below(int32_t n) {
  return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1u);
}

/* pairs (x, y) of vectors: lanes of x then of y, each the sum of two lanes */
BODY __m512 fold_quarters(__m512 x, __m512 y) { /* (i, i+8) */
  return _mm512_add_ps(_mm512_shuffle_f32x4(x, y, 0x44), _mm512_shuffle_f32x4(x, y, 0xEE));
}
BODY __m512 fold_halves_of_halves(__m512 x, __m512 y) { /* (i, i+4) within 8-lane groups */
  return _mm512_add_ps(_mm512_shuffle_f32x4(x, y, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(x, y, _MM_SHUFFLE(3, 1, 3, 1)));
}
BODY __m512 fold_pairs(__m512 x, __m512 y) { /* (i, i+2) within 4-lane groups */
  return _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(x), _mm512_castps_pd(y))),
                       _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(x), _mm512_castps_pd(y))));
}
BODY __m512 fold_singles(__m512 x, __m512 y) { /* (i, i+1) within 2-lane groups */
  return _mm512_add_ps(_mm512_shuffle_ps(x, y, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_ps(x, y, _MM_SHUFFLE(3, 1, 3, 1)));
}

/* a[4c + i]: the dot of row i and position c. Returns lane 4i + c = its sum. */
BODY __m512 reduce16(const __m512 *a) {
  __m512 b[8], c[4], d[2];
#pragma GCC unroll 8
  for (int i = 0; i < 8; i++) b[i] = fold_quarters(a[2 * i], a[2 * i + 1]);
#pragma GCC unroll 4
  for (int i = 0; i < 4; i++) c[i] = fold_halves_of_halves(b[2 * i], b[2 * i + 1]);
#pragma GCC unroll 2
  for (int i = 0; i < 2; i++) d[i] = fold_pairs(c[2 * i], c[2 * i + 1]);
  return fold_singles(d[0], d[1]);
}

AVX512 static void qk_avx512(const pa_attn_tile *t) {
  const int32_t hd = t->head_dim;
  const __m512 scale = _mm512_set1_ps(t->scale);
  for (int32_t r0 = 0; r0 < t->n_rows; r0 += 4) {
    const int32_t nr = t->n_rows - r0 < 4 ? t->n_rows - r0 : 4;
    int32_t a = PA_ATTN_TILE, b = 0;
    for (int32_t i = 0; i < nr; i++)
      if (t->jlo[r0 + i] < t->jhi[r0 + i]) {
        a = t->jlo[r0 + i] < a ? t->jlo[r0 + i] : a;
        b = t->jhi[r0 + i] > b ? t->jhi[r0 + i] : b;
      }
    if (a >= b) continue;
    const float *q[4];
    for (int i = 0; i < 4; i++) q[i] = t->q[r0 + (i < nr ? i : 0)];
    for (int32_t j = a; j < b; j += 4) {
      const float *k[4];
      for (int c = 0; c < 4; c++) k[c] = t->k[j + c < b ? j + c : b - 1];
      __m512 acc[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; i++) acc[i] = _mm512_setzero_ps();
      for (int32_t d = 0; d < hd; d += 16) {
        const __mmask16 m = lanes_below(hd - d);
        __m512 kv[4];
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) kv[c] = _mm512_maskz_loadu_ps(m, k[c] + d);
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) {
          const __m512 qv = _mm512_maskz_loadu_ps(m, q[i] + d);
#pragma GCC unroll 4
          for (int c = 0; c < 4; c++) acc[4 * c + i] = _mm512_fmadd_ps(qv, kv[c], acc[4 * c + i]);
        }
      }
      const __m512 sc = _mm512_mul_ps(reduce16(acc), scale);
      /* lane 4i + c: row i, position j + c */
      const __m128i cols = _mm_cmpgt_epi32(_mm_set1_epi32(b - j), _mm_setr_epi32(0, 1, 2, 3));
      float *s0 = t->s + (int64_t)r0 * PA_ATTN_TILE + j;
      _mm_maskstore_ps(s0, cols, _mm512_extractf32x4_ps(sc, 0));
      if (nr > 1) _mm_maskstore_ps(s0 + PA_ATTN_TILE, cols, _mm512_extractf32x4_ps(sc, 1));
      if (nr > 2) _mm_maskstore_ps(s0 + 2 * PA_ATTN_TILE, cols, _mm512_extractf32x4_ps(sc, 2));
      if (nr > 3) _mm_maskstore_ps(s0 + 3 * PA_ATTN_TILE, cols, _mm512_extractf32x4_ps(sc, 3));
    }
  }
}

AVX512 static void softmax_avx512(const pa_attn_tile *t) {
  const __m512 ninf = _mm512_set1_ps(-INFINITY);
  for (int32_t r = 0; r < t->n_rows; r++) {
    const int32_t lo = t->jlo[r], hi = t->jhi[r];
    if (lo >= hi) continue;
    float *s = t->s + (int64_t)r * PA_ATTN_TILE;
    const int32_t c0 = lo & ~15, c1 = (hi + 15) & ~15;
    __m512 mx = ninf;
    for (int32_t c = c0; c < c1; c += 16) {
      const __mmask16 m = lanes_below(hi - c) & (__mmask16)~lanes_below(lo - c);
      mx = _mm512_mask_max_ps(mx, m, mx, _mm512_loadu_ps(s + c));
    }
    const float mt = _mm512_reduce_max_ps(mx), mo = t->m[r], mn = mt > mo ? mt : mo;
    t->alpha[r] = mn > mo ? expf(mo - mn) : 1.0f;
    t->m[r] = mn;
    const __m512 mnv = _mm512_set1_ps(mn);
    for (int32_t c = c0; c < c1; c += 16) {
      const __mmask16 m = lanes_below(hi - c) & (__mmask16)~lanes_below(lo - c);
      _mm512_storeu_ps(s + c, _mm512_mask_sub_ps(ninf, m, _mm512_loadu_ps(s + c), mnv));
    }
    pa_exp_avx512(s + c0, s + c0, c1 - c0);
    __m512 sum = _mm512_setzero_ps();
    for (int32_t c = c0; c < c1; c += 16) sum = _mm512_add_ps(sum, _mm512_loadu_ps(s + c));
    /* fixed tree: (i, i+8), (i, i+4), (i, i+2), (i, i+1) */
    __m256 h = _mm256_add_ps(_mm512_castps512_ps256(sum), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(sum), 1)));
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    q = _mm_add_ss(q, _mm_movehdup_ps(q));
    t->l[r] = t->l[r] * t->alpha[r] + _mm_cvtss_f32(q);
  }
}

AVX512 static void pv_avx512(const pa_attn_tile *t) {
  const int32_t hdv = t->head_dim_v;
  for (int32_t r0 = 0; r0 < t->n_rows; r0 += 4) {
    const int32_t nr = t->n_rows - r0 < 4 ? t->n_rows - r0 : 4;
    /* slots past the rows or with an empty range repeat the first row
     * with a range (computed, never stored) */
    int32_t f = -1;
    for (int32_t i = 0; i < nr && f < 0; i++)
      if (t->jlo[r0 + i] < t->jhi[r0 + i]) f = r0 + i;
    if (f < 0) continue;
    int32_t lo[4], hi[4], ca = 0, cb = PA_ATTN_TILE;
    bool store[4];
    const float *s[4];
    float *acc[4];
    __m512 alpha[4];
    for (int i = 0; i < 4; i++) {
      store[i] = i < nr && t->jlo[r0 + i] < t->jhi[r0 + i];
      const int32_t r = store[i] ? r0 + i : f;
      lo[i] = t->jlo[r];
      hi[i] = t->jhi[r];
      s[i] = t->s + (int64_t)r * PA_ATTN_TILE;
      acc[i] = t->acc + r * t->acc_stride;
      alpha[i] = _mm512_set1_ps(t->alpha[r]);
      ca = lo[i] > ca ? lo[i] : ca; /* the positions every slot attends */
      cb = hi[i] < cb ? hi[i] : cb;
    }
    int32_t a = PA_ATTN_TILE, b = 0;
    for (int i = 0; i < 4; i++) {
      a = lo[i] < a ? lo[i] : a;
      b = hi[i] > b ? hi[i] : b;
    }
    for (int32_t d0 = 0; d0 < hdv; d0 += 64) {
      __mmask16 m[4];
      __m512 o[4][4];
#pragma GCC unroll 4
      for (int c = 0; c < 4; c++) m[c] = lanes_below(hdv - d0 - 16 * c);
#pragma GCC unroll 4
      for (int i = 0; i < 4; i++)
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++)
          o[i][c] = _mm512_mul_ps(_mm512_maskz_loadu_ps(m[c], acc[i] + d0 + 16 * c), alpha[i]);
      for (int32_t j = a; j < b; j++) {
        __m512 v[4];
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) v[c] = _mm512_maskz_loadu_ps(m[c], t->v[j] + d0 + 16 * c);
        if (j >= ca && j < cb) {
#pragma GCC unroll 4
          for (int i = 0; i < 4; i++) {
            const __m512 e = _mm512_set1_ps(s[i][j]);
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++) o[i][c] = _mm512_fmadd_ps(e, v[c], o[i][c]);
          }
        } else {
#pragma GCC unroll 4
          for (int i = 0; i < 4; i++) {
            const __mmask16 in = j >= lo[i] && j < hi[i] ? (__mmask16)0xFFFF : (__mmask16)0;
            const __m512 e = _mm512_set1_ps(s[i][j]);
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++) o[i][c] = _mm512_mask3_fmadd_ps(e, v[c], o[i][c], in);
          }
        }
      }
#pragma GCC unroll 4
      for (int i = 0; i < 4; i++)
        if (store[i])
#pragma GCC unroll 4
          for (int c = 0; c < 4; c++) _mm512_mask_storeu_ps(acc[i] + d0 + 16 * c, m[c], o[i][c]);
    }
  }
}

void pa_attn_fill_avx512(pa_attn_kernels *k) {
  k->qk = qk_avx512;
  k->softmax = softmax_avx512;
  k->pv = pv_avx512;
}
