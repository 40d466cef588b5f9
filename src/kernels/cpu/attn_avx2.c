/* attn_avx2.c: the AVX2 + FMA tile kernels of the attention (model/
 * attention.h). Built for baseline x86-64: functions carry target attributes
 * and are reached only through pa_attn_avx2(), which checks the CPU.
 *
 * The shapes of attn_avx512.c at half the width: qk in blocks of up to 3
 * rows x two chunks of 16 positions (4 rows: one chunk; 8-column quarters
 * of the transposed K, one vertical multiply-add per row, quarter and d),
 * softmax over 8-column chunks fixed by position, pv in blocks of 3 rows x
 * 24 floats of head_dim_v (then 2 or 1 rows x 32), V rows in ascending
 * position, each V
 * vector loaded (and converted) once per block. With 3 query heads per KV
 * head (SmolLM2) the old blocks of 2 rows read V twice per 3 rows:
 * `PASADA_CPU=avx2 profile -p 150 -n 32 --parallel 16 -t 1`, four
 * alternated pairs, attention over ffn_gate_up time 0.260-0.267 ->
 * 0.238-0.247. Partial blocks repeat a row instead of taking another
 * path. The pv passes are whole (unmasked) up to head_dim_v's last partial
 * pass, which takes only the vectors it needs (bench_attn f16 192
 * positions, 1 thread: 0.304-0.310 ms against 0.349-0.350 all masked). qk and pv ask
 * for the next tile's lines (t->next_k, t->next_v) one per step of their
 * inner loops (kernels/attention.h, pa_attn_lines). */
#if defined(__x86_64__) /* x86 SIMD; other targets have the plain C tables */
#include <immintrin.h>
#include <math.h>
#include <stdbool.h>

#include "kernels/cpu/attn_block.h"
#include "kernels/cpu/simd_masks.h"
#include "kernels/ops.h"
#include "kernels/attention.h"

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define BODY static inline __attribute__((always_inline)) AVX2

/* value d of 8 columns (16h .. 16h + 7 of the chunk, h = 0 or 1) */
BODY __m256 load_k(const void *kc, int64_t i, int kind) {
  if (kind == PA_KV_F16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)kc + i)));
  return _mm256_loadu_ps((const float *)kc + i);
}

/* 8 floats of a V row from element d, lanes from `n` on zero (an F16
 * row's load may read past the row, into the next one or the cache's
 * padding) */
BODY __m256 load_v(const void *v, int32_t d, int32_t n, __m256i m, int kind) {
  if (n <= 0) return _mm256_setzero_ps();
  if (kind == PA_KV_F16)
    return _mm256_and_ps(_mm256_castsi256_ps(m), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)v + d))));
  return _mm256_maskload_ps((const float *)v + d, m);
}

/* Scores of rows r0 .. r0 + NR - 1 over the 16 NC columns of chunks c ..
 * c + NC - 1 (NC = 1 or 2): NR x 2 NC accumulators of 8 columns, one
 * multiply-add per d (a chain over d in the column's lane, the same
 * whatever NR and NC). Two chunks for up to 3 rows keep 12 independent
 * chains where one chunk's 6 would wait on the multiply-add latency. */
BODY void qk_block(const pa_attn_tile *t, pa_attn_pfc *pf, int32_t r0, const int NR, const int NC,
                   int32_t c, const int kind) {
  const int32_t hd = t->head_dim;
  const int64_t ks = t->k_stride;
  const void *kc[2] = {t->kc[c], NC == 2 ? t->kc[c + 1] : NULL};
  __m256 acc[4][4];
  const float *q[4];
#pragma GCC unroll 4
  for (int i = 0; i < NR; i++) {
    q[i] = t->q[r0 + i];
#pragma GCC unroll 4
    for (int v = 0; v < 2 * NC; v++) acc[i][v] = _mm256_setzero_ps();
  }
  for (int32_t d = 0; d < hd; d++) {
    pa_attn_pfc_step(pf);
    __m256 qb[4];
#pragma GCC unroll 4
    for (int i = 0; i < NR; i++) qb[i] = _mm256_broadcast_ss(q[i] + d);
#pragma GCC unroll 4
    for (int v = 0; v < 2 * NC; v++) {
      const __m256 k = load_k(kc[v >> 1], d * ks + 8 * (v & 1), kind);
#pragma GCC unroll 4
      for (int i = 0; i < NR; i++) acc[i][v] = _mm256_fmadd_ps(qb[i], k, acc[i][v]);
    }
  }
  const __m256 scale = _mm256_set1_ps(t->scale);
#pragma GCC unroll 4
  for (int i = 0; i < NR; i++) {
    float *s = t->s + (int64_t)(r0 + i) * PA_ATTN_TILE + 16 * c;
#pragma GCC unroll 4
    for (int v = 0; v < 2 * NC; v++) _mm256_storeu_ps(s + 8 * v, _mm256_mul_ps(acc[i][v], scale));
  }
}

BODY void qk_body(const pa_attn_tile *t, const int kind) {
  pa_attn_pfc pf = pa_attn_pfc_start(t->next_k);
  for (int32_t r0 = 0; r0 < t->n_rows; r0 += 4) {
    const int32_t nr = t->n_rows - r0 < 4 ? t->n_rows - r0 : 4;
    int32_t a = PA_ATTN_TILE, b = 0;
    for (int32_t i = 0; i < nr; i++)
      if (t->jlo[r0 + i] < t->jhi[r0 + i]) {
        a = t->jlo[r0 + i] < a ? t->jlo[r0 + i] : a;
        b = t->jhi[r0 + i] > b ? t->jhi[r0 + i] : b;
      }
    const int32_t c_end = a < b ? ((b - 1) >> 4) + 1 : 0;
    for (int32_t c = a >> 4; c < c_end;) {
      if (nr < 4 && c + 1 < c_end) {
        switch (nr) {
          case 1: qk_block(t, &pf, r0, 1, 2, c, kind); break;
          case 2: qk_block(t, &pf, r0, 2, 2, c, kind); break;
          default: qk_block(t, &pf, r0, 3, 2, c, kind); break;
        }
        c += 2;
        continue;
      }
      switch (nr) {
        case 1: qk_block(t, &pf, r0, 1, 1, c, kind); break;
        case 2: qk_block(t, &pf, r0, 2, 1, c, kind); break;
        case 3: qk_block(t, &pf, r0, 3, 1, c, kind); break;
        default: qk_block(t, &pf, r0, 4, 1, c, kind); break;
      }
      c++;
    }
  }
  pa_attn_pfc_finish(&pf);
}

AVX2 static void qk_avx2(const pa_attn_tile *t) {
  switch (t->kind) {
    case PA_KV_F16: qk_body(t, PA_KV_F16); break;
    default: qk_body(t, PA_KV_F32); break;
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
      const __m256 in = _mm256_castsi256_ps(_mm256_andnot_si256(pa_lanes8(lo - c), pa_lanes8(hi - c)));
      mx = _mm256_max_ps(mx, _mm256_blendv_ps(ninf, _mm256_loadu_ps(s + c), in));
    }
    const float mt = pa_hmax8(mx), mo = t->m[r], mn = mt > mo ? mt : mo;
    t->alpha[r] = mn > mo ? expf(mo - mn) : 1.0f;
    t->m[r] = mn;
    const __m256 mnv = _mm256_set1_ps(mn);
    for (int32_t c = c0; c < c1; c += 8) {
      const __m256 in = _mm256_castsi256_ps(_mm256_andnot_si256(pa_lanes8(lo - c), pa_lanes8(hi - c)));
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

/* One pass of pv over head_dim_v elements d0 .. d0 + 8 W - 1 for rows
 * r0 .. r0 + NR - 1 (NR = 1, 2 or 3; set up by attn_block.h) and columns
 * [ja, jb): NR x W accumulators, W V vectors and a broadcast weight fit the
 * 16 registers (W = 4 up to 2 rows, 3 for 3). The accumulators come from
 * and go back to acc; `first` (the block's first columns) applies the
 * rescale factor. FULL: every lane of the W vectors is inside head_dim_v,
 * so no mask applies. */
BODY void pv_pass(const pa_attn_tile *t, pa_attn_pfc *pf, const pa_pv_block *p, const __m256 *alpha,
                  int32_t d0, int32_t ja, int32_t jb, bool first, const int NR, const int W,
                  const bool FULL, const int kind) {
  const int32_t hdv = t->head_dim_v;
  __m256i m[4];
  __m256 o[3][4];
#pragma GCC unroll 4
  for (int c = 0; c < W; c++) m[c] = FULL ? _mm256_set1_epi32(-1) : pa_lanes8(hdv - d0 - 8 * c);
#pragma GCC unroll 3
  for (int i = 0; i < NR; i++)
#pragma GCC unroll 4
    for (int c = 0; c < W; c++) {
      o[i][c] = FULL ? _mm256_loadu_ps(p->acc[i] + d0 + 8 * c)
                     : _mm256_maskload_ps(p->acc[i] + d0 + 8 * c, m[c]);
      if (first) o[i][c] = _mm256_mul_ps(o[i][c], alpha[i]);
    }
  for (int32_t j = ja; j < jb; j++) {
    pa_attn_pfc_step(pf);
    __m256 v[4];
#pragma GCC unroll 4
    for (int c = 0; c < W; c++)
      v[c] = FULL ? load_k(t->v[j], d0 + 8 * c, kind)
                  : load_v(t->v[j], d0 + 8 * c, hdv - d0 - 8 * c, m[c], kind);
    const bool all = j >= p->ca && j < p->cb;
#pragma GCC unroll 3
    for (int i = 0; i < NR; i++)
      if (all || (j >= p->lo[i] && j < p->hi[i])) {
        const __m256 e = _mm256_set1_ps(p->s[i][j]);
#pragma GCC unroll 4
        for (int c = 0; c < W; c++) o[i][c] = _mm256_fmadd_ps(e, v[c], o[i][c]);
      }
  }
#pragma GCC unroll 3
  for (int i = 0; i < NR; i++)
    if (p->store[i])
#pragma GCC unroll 4
      for (int c = 0; c < W; c++) {
        if (FULL)
          _mm256_storeu_ps(p->acc[i] + d0 + 8 * c, o[i][c]);
        else
          _mm256_maskstore_ps(p->acc[i] + d0 + 8 * c, m[c], o[i][c]);
      }
}

/* Rows r0 .. r0 + NR - 1, columns [ja, jb): whole passes of W vectors,
 * then one pass over what is left with only as many vectors as it needs
 * (head_dim_v 64 with W = 3: 24 + 24 + 16, the last pass 2 vectors where a
 * third, all masked, used to load, convert and multiply zeros), unmasked
 * where whole. */
BODY void pv_cols(const pa_attn_tile *t, pa_attn_pfc *pf, const pa_pv_block *p, const __m256 *alpha,
                  int32_t ja, int32_t jb, bool first, const int NR, const int W, const int kind) {
  const int32_t hdv = t->head_dim_v;
  int32_t d0 = 0;
  for (; d0 + 8 * W <= hdv; d0 += 8 * W)
    pv_pass(t, pf, p, alpha, d0, ja, jb, first, NR, W, true, kind);
  const int32_t left = hdv - d0;
  if (left <= 0) return;
  const int nv = (left + 7) / 8; /* < W */
  const bool full = left % 8 == 0;
  switch (nv) {
    case 1:
      if (full) pv_pass(t, pf, p, alpha, d0, ja, jb, first, NR, 1, true, kind);
      else pv_pass(t, pf, p, alpha, d0, ja, jb, first, NR, 1, false, kind);
      break;
    case 2:
      if (full) pv_pass(t, pf, p, alpha, d0, ja, jb, first, NR, 2, true, kind);
      else pv_pass(t, pf, p, alpha, d0, ja, jb, first, NR, 2, false, kind);
      break;
    default:
      if (full) pv_pass(t, pf, p, alpha, d0, ja, jb, first, NR, 3, true, kind);
      else pv_pass(t, pf, p, alpha, d0, ja, jb, first, NR, 3, false, kind);
      break;
  }
}

/* Rows r0 .. r0 + NR - 1. Long V rows (over PV_ROW_BYTES) are taken 16
 * columns at a time, every pass over head_dim_v for those 16 before the
 * next 16: a pass reads one slice of each V row, and a tile's V rows of
 * 256 F16 values (32 KB) do not stay in the 32 KB L1 from one pass to the
 * next, while 16 of them (8 KB) do. Each output element's multiply-adds
 * over j are those of any other split, in the same order. */
#define PV_ROW_BYTES 256
BODY void pv_block(const pa_attn_tile *t, pa_attn_pfc *pf, int32_t r0, const int NR, const int W,
                   const int kind) {
  pa_pv_block p;
  if (!pa_pv_block_init(t, r0, NR, &p)) return;
  __m256 alpha[3];
#pragma GCC unroll 3
  for (int i = 0; i < NR; i++) alpha[i] = _mm256_set1_ps(p.alpha[i]);
  const int32_t row = t->head_dim_v * (kind == PA_KV_F16 ? 2 : 4);
  if (row <= PV_ROW_BYTES) {
    pv_cols(t, pf, &p, alpha, p.a, p.b, true, NR, W, kind);
    return;
  }
  for (int32_t ja = p.a; ja < p.b;) {
    const int32_t jb = ((ja >> 4) + 1) << 4 < p.b ? ((ja >> 4) + 1) << 4 : p.b;
    pv_cols(t, pf, &p, alpha, ja, jb, ja == p.a, NR, W, kind);
    ja = jb;
  }
}

/* Blocks of 3 rows while 3 are left (every block reads the V rows once, so
 * fewer blocks read less: 4 rows as 3 + 1 read as much as 2 + 2, 5 as 3 + 2
 * less than 2 + 2 + 1), then 2 or 1. */
BODY void pv_body(const pa_attn_tile *t, const int kind) {
  pa_attn_pfc pf = pa_attn_pfc_start(t->next_v);
  for (int32_t r0 = 0; r0 < t->n_rows;) {
    const int32_t left = t->n_rows - r0;
    if (left >= 3) {
      pv_block(t, &pf, r0, 3, 3, kind);
      r0 += 3;
    } else if (left == 2) {
      pv_block(t, &pf, r0, 2, 4, kind);
      r0 += 2;
    } else {
      pv_block(t, &pf, r0, 1, 4, kind);
      r0 += 1;
    }
  }
  pa_attn_pfc_finish(&pf);
}

AVX2 static void pv_avx2(const pa_attn_tile *t) {
  switch (t->kind) {
    case PA_KV_F16: pv_body(t, PA_KV_F16); break;
    default: pv_body(t, PA_KV_F32); break;
  }
}

void pa_attn_fill_avx2(pa_attn_kernels *k) {
  k->qk = qk_avx2;
  k->softmax = softmax_avx2;
  k->pv = pv_avx2;
  k->spread = true;
}

#endif /* __x86_64__ */
