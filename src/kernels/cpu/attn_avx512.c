/* attn_avx512.c: the AVX-512 tile kernels of the attention (model/
 * attention.h). Built for baseline x86-64: functions carry target attributes
 * and are reached only through pa_attn_avx512(), which checks the CPU.
 *
 * qk: blocks of up to 4 rows x 4 chunks of 16 positions (K is stored
 * transposed, so a chunk's value d is one vector: F32 loaded, F16 converted
 * by vcvtph2ps), one vertical multiply-add per row, chunk and d: no
 * horizontal sums, and each score's chain the same whatever the block.
 * softmax: per row over the 16-column chunks around its range (lanes fixed
 * by position, -inf outside the range so exp gives 0), exp by ops_avx512.c.
 * pv: blocks of up to 4 rows x 64 floats of head_dim_v (16 accumulators), V rows
 * in ascending position; where every row of the block attends the position
 * plain FMAs, at the edges of the ranges a per-row test (same FMA). */
#if defined(__x86_64__) /* x86 SIMD; other targets have the plain C tables */
#include <immintrin.h>
#include <math.h>
#include <stdbool.h>

#include "kernels/cpu/attn_block.h"
#include "kernels/cpu/simd_masks.h"
#include "kernels/ops.h"
#include "kernels/attention.h"

#define AVX512 __attribute__((target("avx512f,avx2,fma,f16c")))
#define BODY static inline __attribute__((always_inline)) AVX512

/* value d of the 16 columns of a K chunk */
BODY __m512 load_k(const void *kc, int64_t i, int kind) {
  if (kind == PA_KV_F16) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)kc + i)));
  return _mm512_loadu_ps((const float *)kc + i);
}

/* 16 floats of a V row from element d (lanes at or past `m`'s end: 0; an
 * F16 row's load may read past the row, into the next one or the cache's
 * padding). full: m is all 16 lanes (head_dim_v a multiple of 64), so no
 * masking uop: a conversion is two uops and each V vector feeds 1-4 FMAs,
 * so the masking move was a sixth of pv's uops with SmolLM2's 3 rows
 * (bench_attn f16 112 16, one thread: 1790 against 1865-1870 ticks per
 * tile and head). */
BODY __m512 load_v(const void *v, int32_t d, __mmask16 m, int kind, const int full) {
  if (kind == PA_KV_F16) {
    if (full) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)v + d)));
    if (!m) return _mm512_setzero_ps(); /* past the row: read nothing */
    return _mm512_maskz_mov_ps(m, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)v + d))));
  }
  if (full) return _mm512_loadu_ps((const float *)v + d);
  return _mm512_maskz_loadu_ps(m, (const float *)v + d);
}

/* Scores of rows r0 .. r0 + NR - 1 over chunks c0 .. c0 + NC - 1: NR x NC
 * accumulators of 16 columns, one multiply-add per d (a chain over d in
 * the column's lane, the same whatever NR and NC). */
BODY void qk_block(const pa_attn_tile *t, pa_attn_pfc *pf, int32_t r0, const int NR, int32_t c0, const int NC,
                   const int kind) {
  const int32_t hd = t->head_dim;
  const int64_t ks = t->k_stride;
  __m512 acc[4][4];
  const float *q[4];
  const void *kc[4];
#pragma GCC unroll 4
  for (int i = 0; i < NR; i++) {
    q[i] = t->q[r0 + i];
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) acc[i][c] = _mm512_setzero_ps();
  }
#pragma GCC unroll 4
  for (int c = 0; c < NC; c++) kc[c] = t->kc[c0 + c];
  for (int32_t d = 0; d < hd; d++) {
    pa_attn_pfc_step(pf);
    __m512 k[4];
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) k[c] = load_k(kc[c], d * ks, kind);
#pragma GCC unroll 4
    for (int i = 0; i < NR; i++) {
      const __m512 qb = _mm512_set1_ps(q[i][d]);
#pragma GCC unroll 4
      for (int c = 0; c < NC; c++) acc[i][c] = _mm512_fmadd_ps(qb, k[c], acc[i][c]);
    }
  }
  const __m512 scale = _mm512_set1_ps(t->scale);
#pragma GCC unroll 4
  for (int i = 0; i < NR; i++)
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++)
      _mm512_storeu_ps(t->s + (int64_t)(r0 + i) * PA_ATTN_TILE + 16 * (c0 + c), _mm512_mul_ps(acc[i][c], scale));
}

#define QK_CHUNKS(NR, KIND)                              \
  switch (nc) {                                         \
    case 1: qk_block(t, &pf, r0, NR, c0, 1, KIND); break; \
    case 2: qk_block(t, &pf, r0, NR, c0, 2, KIND); break; \
    case 3: qk_block(t, &pf, r0, NR, c0, 3, KIND); break; \
    default: qk_block(t, &pf, r0, NR, c0, 4, KIND); break; \
  }

BODY void qk_body(const pa_attn_tile *t, const int kind) {
  _Static_assert(PA_ATTN_CHUNKS == 4, "qk_block covers a tile in at most 4 chunks");
  pa_attn_pfc pf = pa_attn_pfc_start(t->next_k);
  for (int32_t r0 = 0; r0 < t->n_rows; r0 += 4) {
    const int32_t nr = t->n_rows - r0 < 4 ? t->n_rows - r0 : 4;
    int32_t a = PA_ATTN_TILE, b = 0;
    for (int32_t i = 0; i < nr; i++)
      if (t->jlo[r0 + i] < t->jhi[r0 + i]) {
        a = t->jlo[r0 + i] < a ? t->jlo[r0 + i] : a;
        b = t->jhi[r0 + i] > b ? t->jhi[r0 + i] : b;
      }
    if (a >= b) continue;
    const int32_t c0 = a >> 4, nc = ((b - 1) >> 4) + 1 - c0;
    switch (nr) {
      case 1: QK_CHUNKS(1, kind) break;
      case 2: QK_CHUNKS(2, kind) break;
      case 3: QK_CHUNKS(3, kind) break;
      default: QK_CHUNKS(4, kind) break;
    }
  }
  pa_attn_pfc_finish(&pf);
}

AVX512 static void qk_avx512(const pa_attn_tile *t) {
  switch (t->kind) {
    case PA_KV_F16: qk_body(t, PA_KV_F16); break;
    default: qk_body(t, PA_KV_F32); break;
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
      const __mmask16 m = pa_lanes16(hi - c) & (__mmask16)~pa_lanes16(lo - c);
      mx = _mm512_mask_max_ps(mx, m, mx, _mm512_loadu_ps(s + c));
    }
    const float mt = _mm512_reduce_max_ps(mx), mo = t->m[r], mn = mt > mo ? mt : mo;
    t->alpha[r] = mn > mo ? expf(mo - mn) : 1.0f;
    t->m[r] = mn;
    const __m512 mnv = _mm512_set1_ps(mn);
    for (int32_t c = c0; c < c1; c += 16) {
      const __mmask16 m = pa_lanes16(hi - c) & (__mmask16)~pa_lanes16(lo - c);
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

/* Rows r0 .. r0 + NR - 1 (NR accumulators of 64 floats of head_dim_v at a
 * time; the block's rows as attn_block.h sets them up). */
BODY void pv_block(const pa_attn_tile *t, pa_attn_pfc *pf, int32_t r0, const int NR, const int kind,
                   const int full) {
  const int32_t hdv = t->head_dim_v;
  pa_pv_block p;
  if (!pa_pv_block_init(t, r0, NR, &p)) return;
  __m512 alpha[4];
#pragma GCC unroll 4
  for (int i = 0; i < NR; i++) alpha[i] = _mm512_set1_ps(p.alpha[i]);
  for (int32_t d0 = 0; d0 < hdv; d0 += 64) {
    __mmask16 m[4];
    __m512 o[4][4];
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) m[c] = pa_lanes16(hdv - d0 - 16 * c);
#pragma GCC unroll 4
    for (int i = 0; i < NR; i++)
#pragma GCC unroll 4
      for (int c = 0; c < 4; c++)
        o[i][c] = _mm512_mul_ps(_mm512_maskz_loadu_ps(m[c], p.acc[i] + d0 + 16 * c), alpha[i]);
    for (int32_t j = p.a; j < p.b; j++) {
      pa_attn_pfc_step(pf);
      __m512 v[4];
#pragma GCC unroll 4
      for (int c = 0; c < 4; c++) v[c] = load_v(t->v[j], d0 + 16 * c, m[c], kind, full);
      if (j >= p.ca && j < p.cb) {
#pragma GCC unroll 4
        for (int i = 0; i < NR; i++) {
          const __m512 e = _mm512_set1_ps(p.s[i][j]);
#pragma GCC unroll 4
          for (int c = 0; c < 4; c++) o[i][c] = _mm512_fmadd_ps(e, v[c], o[i][c]);
        }
      } else {
#pragma GCC unroll 4
        for (int i = 0; i < NR; i++) {
          const __mmask16 in = j >= p.lo[i] && j < p.hi[i] ? (__mmask16)0xFFFF : (__mmask16)0;
          const __m512 e = _mm512_set1_ps(p.s[i][j]);
#pragma GCC unroll 4
          for (int c = 0; c < 4; c++) o[i][c] = _mm512_mask3_fmadd_ps(e, v[c], o[i][c], in);
        }
      }
    }
#pragma GCC unroll 4
    for (int i = 0; i < NR; i++)
      if (p.store[i])
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) _mm512_mask_storeu_ps(p.acc[i] + d0 + 16 * c, m[c], o[i][c]);
  }
}

BODY void pv_rows(const pa_attn_tile *t, const int kind, const int full) {
  pa_attn_pfc pf = pa_attn_pfc_start(t->next_v);
  for (int32_t r0 = 0; r0 < t->n_rows; r0 += 4) switch (t->n_rows - r0) {
      case 1: pv_block(t, &pf, r0, 1, kind, full); break;
      case 2: pv_block(t, &pf, r0, 2, kind, full); break;
      case 3: pv_block(t, &pf, r0, 3, kind, full); break;
      default: pv_block(t, &pf, r0, 4, kind, full); break;
    }
  pa_attn_pfc_finish(&pf);
}

BODY void pv_body(const pa_attn_tile *t, const int kind) {
  if (t->head_dim_v % 64 == 0)
    pv_rows(t, kind, 1);
  else
    pv_rows(t, kind, 0);
}

AVX512 static void pv_avx512(const pa_attn_tile *t) {
  switch (t->kind) {
    case PA_KV_F16: pv_body(t, PA_KV_F16); break;
    default: pv_body(t, PA_KV_F32); break;
  }
}

void pa_attn_fill_avx512(pa_attn_kernels *k) {
  k->qk = qk_avx512;
  k->softmax = softmax_avx512;
  k->pv = pv_avx512;
  k->spread = true; /* qk and pv ask for the next tile's K and V a line per step */
}

#endif /* __x86_64__ */
