/* attention.c: attention of a set of query rows of one sequence and KV
 * head over the paged KV cache, by tiles with online softmax (see
 * attention.h), the plain C twin of the SIMD tile kernels, and the tables.
 * The scheduling of a whole batch over the threads is the CPU backend's
 * (src/backend/cpu/attention.c).
 *
 * pa_attention groups the batch's tokens by sequence, cuts each sequence's
 * run into chunks of up to ~64 query rows (tokens times the query heads of
 * one KV head), and hands (chunk, KV head) items to the threads, largest
 * first (with many chunks, as when many sequences decode, (chunk, every KV
 * head) items); when there are too few items for the threads (decoding a
 * single sequence) a token's positions are cut by segment (attention.h)
 * over the threads and merged after, or, within one segment, an item's rows
 * are split. No step of a row depends on the item it lands in, so outputs
 * do not depend on batching or threads. */
#include "kernels/attention.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "kernels/ops.h"
#include "quant/quant.h"

/* pv_q8_plain rounds its two products before adding them, as the SIMD
 * tables do. */
PA_NO_FP_CONTRACT

/* The output's normalization, a loop over a row per call, vectorized for
 * the baseline SSE2 at -O2 too: the same product per element, so the same
 * bits. */
#if defined(__GNUC__) && !defined(__clang__)
#define VECTORIZE __attribute__((optimize("tree-vectorize", "vect-cost-model=dynamic", "fp-contract=off")))
#else
#define VECTORIZE
#endif

float pa_attn_inv(float m, float l, const float *sink) {
  return sink ? 1.0f / (l + expf(*sink - m)) : 1.0f / l;
}

VECTORIZE void pa_attn_normalize_row(float *restrict o, const float *restrict a, float inv, int32_t n) {
  for (int32_t d = 0; d < n; d++) o[d] = a[d] * inv;
}

/* ---- plain C tile kernels ---- */

/* value d of column j of the tile's K, as a float (F32, F16) */
static float k_value(const pa_attn_tile *t, int32_t j, int32_t d) {
  const int64_t i = (int64_t)d * t->k_stride + (j & 15);
  if (t->kind == PA_KV_F16) return pa_f16_to_f32(((const uint16_t *)t->kc[j >> 4])[i]);
  return ((const float *)t->kc[j >> 4])[i];
}

static float v_value(const pa_attn_tile *t, int32_t j, int32_t d) {
  if (t->kind == PA_KV_F16) return pa_f16_to_f32(((const uint16_t *)t->v[j])[d]);
  return ((const float *)t->v[j])[d];
}

/* A Q8 tile's quants (the layouts in attention.h) */
static int32_t kq_value(const pa_attn_tile *t, int32_t j, int32_t d) {
  return ((const int8_t *)t->kc[j >> 4])[((d >> 1) * t->k_stride + (j & 15)) * 2 + (d & 1)];
}

static int32_t vq_value(const pa_attn_tile *t, int32_t j, int32_t d) {
  return ((const int8_t *)t->vc[j >> 4])[(((j & 15) >> 1) * (int64_t)t->head_dim_v + d) * 2 + (j & 1)];
}

static void qk_plain(const pa_attn_tile *t) {
  const int32_t hd = t->head_dim;
  for (int32_t r = 0; r < t->n_rows; r++) {
    const float *q = t->q[r];
    float *s = t->s + (int64_t)r * PA_ATTN_TILE;
    for (int32_t j = t->jlo[r]; j < t->jhi[r]; j++) {
      float p = 0.0f;
      for (int32_t d = 0; d < hd; d++) p += q[d] * k_value(t, j, d);
      s[j] = p * t->scale;
    }
  }
}

static void softmax_plain(const pa_attn_tile *t) {
  for (int32_t r = 0; r < t->n_rows; r++) {
    const int32_t lo = t->jlo[r], hi = t->jhi[r];
    if (lo >= hi) continue;
    float *s = t->s + (int64_t)r * PA_ATTN_TILE;
    float mt = -INFINITY;
    for (int32_t j = lo; j < hi; j++) mt = s[j] > mt ? s[j] : mt;
    const float mo = t->m[r], mn = mt > mo ? mt : mo;
    t->alpha[r] = mn > mo ? expf(mo - mn) : 1.0f;
    t->m[r] = mn;
    /* the 16-column chunks around [lo, hi), -inf outside it: exp gives 0 */
    const int32_t c0 = lo & ~15, c1 = (hi + 15) & ~15;
    for (int32_t j = c0; j < c1; j++) s[j] = j >= lo && j < hi ? s[j] - mn : -INFINITY;
    pa_ops_plain()->exp(s + c0, s + c0, c1 - c0);
    float lane[16] = {0};
    for (int32_t c = c0; c < c1; c += 16)
      for (int i = 0; i < 16; i++) lane[i] += s[c + i];
    for (int w = 8; w > 0; w >>= 1)
      for (int i = 0; i < w; i++) lane[i] += lane[i + w];
    t->l[r] = t->l[r] * t->alpha[r] + lane[0];
  }
}

static void pv_plain(const pa_attn_tile *t) {
  const int32_t hdv = t->head_dim_v;
  for (int32_t r = 0; r < t->n_rows; r++) {
    const int32_t lo = t->jlo[r], hi = t->jhi[r];
    if (lo >= hi) continue;
    const float *s = t->s + (int64_t)r * PA_ATTN_TILE;
    float *acc = t->acc + r * t->acc_stride, a = t->alpha[r];
    for (int32_t d = 0; d < hdv; d++) acc[d] *= a;
    for (int32_t j = lo; j < hi; j++)
      for (int32_t d = 0; d < hdv; d++) acc[d] += s[j] * v_value(t, j, d);
  }
}

static void qk_q8_plain(const pa_attn_tile *t) {
  for (int32_t r = 0; r < t->n_rows; r++) {
    const int16_t *q = t->q16 + r * t->q16_stride;
    float *s = t->s + (int64_t)r * PA_ATTN_TILE;
    for (int32_t j = t->jlo[r]; j < t->jhi[r]; j++) {
      int32_t p = 0;
      for (int32_t d = 0; d < t->head_dim; d++) p += q[d] * kq_value(t, j, d);
      s[j] = (float)p * t->qf[r] * t->ks[j];
    }
  }
}

/* Q8, after the softmax: per row, the weights times the V scales quantized
 * to 16 bits against their largest (0 outside the row's range, and all 0
 * when the largest is under 1e-30: nothing a row whose weights reach 1
 * somewhere would notice). */
static void quantize_weights(const pa_attn_tile *t) {
  for (int32_t r = 0; r < t->n_rows; r++) {
    const int32_t lo = t->jlo[r], hi = t->jhi[r];
    const float *s = t->s + (int64_t)r * PA_ATTN_TILE;
    int16_t *w = t->w16 + (int64_t)r * PA_ATTN_TILE;
    memset(w, 0, PA_ATTN_TILE * sizeof(int16_t));
    float mx = 0.0f;
    for (int32_t j = lo; j < hi; j++) {
      const float x = s[j] * t->vs[j];
      mx = x > mx ? x : mx;
    }
    const float inv = mx >= 1e-30f && mx <= 3.0e38f ? 32767.0f / mx : 0.0f;
    t->wf[r] = inv > 0.0f ? mx / 32767.0f : 0.0f;
    for (int32_t j = lo; j < hi; j++) {
      const float x = s[j] * t->vs[j] * inv + 0.5f; /* weights are >= 0: rounds half up */
      w[j] = (int16_t)(x >= 0.0f ? (x < 32767.0f ? x : 32767.0f) : 0.0f); /* NaN: 0 */
    }
  }
}

static void pv_q8_plain(const pa_attn_tile *t) {
  quantize_weights(t);
  for (int32_t r = 0; r < t->n_rows; r++) {
    const int32_t lo = t->jlo[r], hi = t->jhi[r];
    if (lo >= hi) continue;
    const int16_t *w = t->w16 + (int64_t)r * PA_ATTN_TILE;
    float *acc = t->acc + r * t->acc_stride;
    for (int32_t d = 0; d < t->head_dim_v; d++) {
      int32_t p = 0;
      for (int32_t j = lo; j < hi; j++) p += w[j] * vq_value(t, j, d);
      const float kept = acc[d] * t->alpha[r], added = (float)p * t->wf[r];
      acc[d] = kept + added;
    }
  }
}

/* Q8: a query row as 16-bit integers (pa_attn_kernels.quantize_q). */
static float quantize_q_plain(const float *q, int32_t n, int16_t *out) {
  float amax = 0.0f;
  for (int32_t d = 0; d < n; d++) {
    const float a = fabsf(q[d]);
    amax = a > amax ? a : amax;
  }
  const float inv = amax > 0.0f && amax <= 3.0e38f ? 32767.0f / amax : 0.0f;
  for (int32_t d = 0; d < n; d++) {
    float x = q[d] * inv;
    x = x == x ? x : 0.0f;
    x = x < 32767.0f ? x : 32767.0f;
    x = x > -32767.0f ? x : -32767.0f;
    out[d] = (int16_t)(int32_t)(x + (x >= 0.0f ? 0.5f : -0.5f));
  }
  return inv > 0.0f ? amax / 32767.0f : 0.0f;
}

/* ---- tables ---- */

static pa_attn_kernels table_plain = {"plain",     qk_plain,    softmax_plain,    pv_plain,
                                      qk_q8_plain, pv_q8_plain, quantize_q_plain, false,
                                      false};
static pa_attn_kernels table_avx2, table_avx512;
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void tables_init(void) {
#if defined(__x86_64__) /* elsewhere pa_cpu() reports neither table's features */
  table_avx2 = table_plain;
  table_avx2.name = "avx2";
  pa_attn_fill_avx2(&table_avx2);
  pa_attn_fill_q8_avx2(&table_avx2);
  table_avx512 = table_avx2;
  table_avx512.name = "avx512";
  pa_attn_fill_avx512(&table_avx512);
  pa_attn_fill_q8_avx512(&table_avx512);
#endif
}

const pa_attn_kernels *pa_attn_plain(void) { return &table_plain; }

const pa_attn_kernels *pa_attn_avx2(void) {
  const pa_cpu_features *f = pa_cpu();
  if (!(f->avx2 && f->fma && f->f16c)) return NULL;
  pthread_once(&tables_once, tables_init);
  return &table_avx2;
}

const pa_attn_kernels *pa_attn_avx512(void) {
  const pa_cpu_features *f = pa_cpu();
  if (!(f->avx2 && f->fma && f->f16c && f->avx512f)) return NULL;
  pthread_once(&tables_once, tables_init);
  return &table_avx512;
}

const pa_attn_kernels *pa_attn_best(void) {
  const pa_attn_kernels *k = pa_attn_avx512();
  if (!k) k = pa_attn_avx2();
  return k ? k : pa_attn_plain();
}

/* ---- one set of rows of one sequence and KV head ---- */

static int64_t acc_stride_of(int32_t head_dim_v) { return ((int64_t)head_dim_v + 15) & ~(int64_t)15; }
static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

size_t pa_attn_work_size(int32_t n_rows, int32_t head_dim, int32_t head_dim_v) {
  size_t r = (size_t)(n_rows > 0 ? n_rows : 1);
  return align64(r * (size_t)acc_stride_of(head_dim_v) * sizeof(float)) + /* acc */
         align64(r * PA_ATTN_TILE * sizeof(float)) +                      /* s */
         align64(r * 5 * sizeof(float)) +                                 /* m, l, alpha, qf, wf */
         align64(r * 2 * sizeof(int32_t)) +                               /* jlo, jhi */
         align64(PA_ATTN_TILE * sizeof(const void *)) +                   /* v */
         align64(2 * PA_ATTN_TILE * sizeof(float)) +                      /* Q8: K and V scales */
         align64(r * (size_t)(head_dim > 0 ? head_dim : 1) * sizeof(int16_t)) + /* Q8: q16 */
         align64(r * PA_ATTN_TILE * sizeof(int16_t)) +                    /* Q8: w16 */
         align64(r * (size_t)acc_stride_of(head_dim_v) * sizeof(float)) + /* segments: running acc */
         align64(r * 2 * sizeof(float)) +                                 /* and m, l */
         align64(r * 2 * sizeof(int32_t));                                /* ranges in the segment */
}

/* The lines of KV head kv_head's K and V values of positions p0..p1: a
 * run per block and kind (K: the head's whole part of the block, with the
 * Q8 scales; V: the rows, for Q8 the pairs that hold them, and the
 * scales); what does not fit is left out. */
static void add_run(pa_attn_lines *l, const void *at, int64_t bytes) {
  if (bytes <= 0 || l->nr >= PA_ATTN_PF_RUNS) return;
  const uintptr_t a = (uintptr_t)at; /* whole lines from the one holding the first byte */
  l->p[l->nr] = (const char *)at - (a & 63);
  l->n[l->nr++] = (int32_t)(((a & 63) + (uint64_t)bytes + 63) / 64);
}

void pa_attn_kv_lines(const pa_kv_cache *kv, int layer, int32_t seq, int kv_head, int32_t p0,
                     int32_t p1, pa_attn_lines *lk, pa_attn_lines *lv) {
  const int64_t vb = (int64_t)kv->shape[layer].head_dim_v * (int64_t)kv->values->elt;
  const bool q8 = kv->values->type == PA_KV_Q8;
  lk->nr = lv->nr = 0;
  for (int32_t p = p0; p <= p1;) {
    const int32_t off = p % kv->block_size;
    const int32_t n_here = kv->block_size - off < p1 - p + 1 ? kv->block_size - off : p1 - p + 1;
    const uint8_t *v = pa_kv_v_at(kv, layer, seq, p, kv_head);
    add_run(lk, pa_kv_k_block(kv, layer, seq, p, kv_head), kv->values->k_part[layer]);
    if (q8) {
      add_run(lv, v - (off & 1), (int64_t)(((off + n_here + 1) & ~1) - (off & ~1)) * vb);
      add_run(lv, pa_kv_v_scale(kv, layer, seq, p, kv_head), (int64_t)n_here * 4);
    } else {
      add_run(lv, v, n_here * vb);
    }
    p += n_here;
  }
}

static void lines_prefetch(const pa_attn_lines *l) {
  pa_attn_pfc c = pa_attn_pfc_start(l);
  pa_attn_pfc_finish(&c);
}

void pa_attn_prefetch(const pa_kv_cache *kv, int layer, int32_t seq, int kv_head, int32_t p0,
                      int32_t p1) {
  for (int32_t a = p0; a <= p1; a += PA_ATTN_TILE) { /* a tile's runs at a time */
    pa_attn_lines lk, lv;
    pa_attn_kv_lines(kv, layer, seq, kv_head, a, a + PA_ATTN_TILE - 1 < p1 ? a + PA_ATTN_TILE - 1 : p1, &lk,
             &lv);
    lines_prefetch(&lk);
    lines_prefetch(&lv);
  }
}

/* The merge of two segments' states (attention.h): (M, L, ACC) and (m, l,
 * acc) of one row become that of their union (M = -inf: none yet). One
 * function for pa_attn_rows and seg_split, so the one merge order gives one
 * result whatever thread ran which segment. */
VECTORIZE void pa_attn_merge_row(float *M, float *L, float *restrict ACC, float m, float l,
                                const float *restrict acc, int32_t n) {
  if (m == -INFINITY) return; /* the segment held none of the row's positions */
  if (*M == -INFINITY) {
    *M = m, *L = l;
    memcpy(ACC, acc, (size_t)n * sizeof(float));
    return;
  }
  const float mx = m > *M ? m : *M, a = expf(*M - mx), b = expf(m - mx);
  *L = *L * a + l * b;
  *M = mx;
  for (int32_t d = 0; d < n; d++) ACC[d] = ACC[d] * a + acc[d] * b;
}

void pa_attn_softcap_tile(const pa_attn_tile *t) {
  const float cap = t->softcap, inv = 1.0f / t->softcap;
  for (int32_t r = 0; r < t->n_rows; r++) {
    float *s = t->s + (int64_t)r * PA_ATTN_TILE;
    for (int32_t j = t->jlo[r]; j < t->jhi[r]; j++) s[j] = cap * tanhf(s[j] * inv);
  }
}

/* The tiles of positions [pmin, pmax] for rows whose ranges are [lo_r,
 * hi_r] (empty: lo_r > hi_r), into t's running m, l and acc (not reset
 * here); then_k / then_v: the lines to ask for during the last tile. */
static void rows_tiles(const pa_attn_kernels *kt, const pa_kv_cache *kv, int layer, int32_t seq, int kv_head,
                       pa_attn_tile *t, const int32_t *lo, const int32_t *hi, int32_t pmin, int32_t pmax,
                       const pa_attn_lines *then_k, const pa_attn_lines *then_v) {
  const int32_t n = t->n_rows;
  const bool q8 = kv->values->type == PA_KV_Q8;
  const bool spread = q8 ? kt->spread_q8 : kt->spread;
  pa_attn_lines *next_k = (pa_attn_lines *)t->next_k, *next_v = (pa_attn_lines *)t->next_v;
  const void **vp = (const void **)t->v;
  float *ksc = (float *)t->ks, *vsc = (float *)t->vs;
  int32_t *jlo = (int32_t *)t->jlo, *jhi = (int32_t *)t->jhi;
  const int64_t vb = (int64_t)t->head_dim_v * (int64_t)kv->values->elt;
  for (int32_t base = pmin / PA_ATTN_TILE * PA_ATTN_TILE; base <= pmax; base += PA_ATTN_TILE) {
    const int32_t p0 = base > pmin ? base : pmin;
    const int32_t p1 = base + PA_ATTN_TILE - 1 < pmax ? base + PA_ATTN_TILE - 1 : pmax;
    /* the next tile's values travel while this one is computed */
    next_k->nr = next_v->nr = 0;
    if (p1 < pmax) {
      const int32_t n1 = p1 + PA_ATTN_TILE < pmax ? p1 + PA_ATTN_TILE : pmax;
      pa_attn_kv_lines(kv, layer, seq, kv_head, p1 + 1, n1, next_k, next_v);
    } else if (then_k && then_v) {
      *next_k = *then_k;
      *next_v = *then_v;
    }
    if (!spread) { /* this table's kernels do not ask for them: all at once */
      lines_prefetch(next_k);
      lines_prefetch(next_v);
      next_k->nr = next_v->nr = 0;
    }
    /* the chunks of 16 positions that hold [p0, p1] (each inside one block,
     * the block size being a multiple of 16), and the V rows */
    for (int32_t c = 0; c < PA_ATTN_CHUNKS; c++) {
      const int32_t c0 = base + 16 * c;
      if (c0 + 15 < p0 || c0 > p1) {
        t->kc[c] = NULL;
        continue;
      }
      uint8_t *kb = pa_kv_k_block(kv, layer, seq, c0, kv_head);
      const uint8_t *v = pa_kv_v_at(kv, layer, seq, c0, kv_head);
      if (q8) {
        t->kc[c] = kb + (int64_t)(c0 % kv->block_size) * 2;
        t->vc[c] = v; /* c0 is even: the first pair of the chunk */
        memcpy(ksc + 16 * c, pa_kv_k_scales(kv, layer, kb) + c0 % kv->block_size, 16 * sizeof(float));
        memcpy(vsc + 16 * c, pa_kv_v_scale(kv, layer, seq, c0, kv_head), 16 * sizeof(float));
      } else {
        t->kc[c] = kb + (int64_t)(c0 % kv->block_size) * (int64_t)kv->values->elt;
        for (int32_t i = 0; i < 16; i++) vp[16 * c + i] = v + i * vb;
      }
    }
    for (int32_t r = 0; r < n; r++) {
      int32_t a = lo[r] - base, b = hi[r] + 1 - base;
      a = a < 0 ? 0 : a;
      b = b > PA_ATTN_TILE ? PA_ATTN_TILE : b;
      jlo[r] = a < b ? a : 0;
      jhi[r] = a < b ? b : 0;
    }
    if (q8) {
      kt->qk_q8(t);
      if (t->softcap > 0) pa_attn_softcap_tile(t);
      kt->softmax(t);
      kt->pv_q8(t);
    } else {
      kt->qk(t);
      if (t->softcap > 0) pa_attn_softcap_tile(t);
      kt->softmax(t);
      kt->pv(t);
    }
  }
}

void pa_attn_rows(const pa_attn_kernels *kt, const pa_kv_cache *kv, int layer, int32_t seq, int kv_head,
                  int32_t head_dim, int32_t head_dim_v, float scale, const pa_attn_query *qr, void *work) {
  const int32_t n = qr->n_rows;
  if (n <= 0) return;
  const int64_t stride = acc_stride_of(head_dim_v);
  char *w = work;
  float *acc = (float *)w;
  w += align64((size_t)n * (size_t)stride * sizeof(float));
  float *s = (float *)w;
  w += align64((size_t)n * PA_ATTN_TILE * sizeof(float));
  float *m = (float *)w, *l = m + n, *alpha = l + n, *qf = alpha + n, *wf = qf + n;
  w += align64((size_t)n * 5 * sizeof(float));
  int32_t *jlo = (int32_t *)w, *jhi = jlo + n;
  w += align64((size_t)n * 2 * sizeof(int32_t));
  const void **vp = (const void **)w;
  w += align64(PA_ATTN_TILE * sizeof(const void *));
  float *ksc = (float *)w, *vsc = ksc + PA_ATTN_TILE; /* Q8: the tile's scales by column */
  w += align64(2 * PA_ATTN_TILE * sizeof(float));
  int16_t *q16 = (int16_t *)w; /* Q8 */
  w += align64((size_t)n * (size_t)head_dim * sizeof(int16_t));
  int16_t *w16 = (int16_t *)w;
  w += align64((size_t)n * PA_ATTN_TILE * sizeof(int16_t));
  /* with several segments: their running merge, and the rows' ranges
   * clipped to the segment */
  float *run_acc = (float *)w;
  w += align64((size_t)n * (size_t)stride * sizeof(float));
  float *run_m = (float *)w, *run_l = run_m + n;
  w += align64((size_t)n * 2 * sizeof(float));
  int32_t *slo = (int32_t *)w, *shi = slo + n;
  const bool q8 = kv->values->type == PA_KV_Q8;
  pa_attn_lines next_k = {.nr = 0}, next_v = {.nr = 0};

  int32_t pmin = qr->lo[0], pmax = qr->hi[0];
  for (int32_t r = 0; r < n; r++) {
    pmin = qr->lo[r] < pmin ? qr->lo[r] : pmin;
    pmax = qr->hi[r] > pmax ? qr->hi[r] : pmax;
  }
  pa_attn_tile t = {.n_rows = n, .q = qr->q, .jlo = jlo, .jhi = jhi, .s = s, .m = m, .l = l,
                    .alpha = alpha, .acc = acc, .acc_stride = stride, .k_stride = kv->block_size,
                    .v = vp, .kind = kv->values->type, .head_dim = head_dim, .head_dim_v = head_dim_v,
                    .scale = scale, .softcap = qr->softcap, .q16 = q16, .q16_stride = head_dim, .qf = qf, .ks = ksc,
                    .vs = vsc, .w16 = w16, .wf = wf, .next_k = &next_k, .next_v = &next_v};
  if (q8)
    for (int32_t r = 0; r < n; r++) qf[r] = scale * kt->quantize_q(qr->q[r], head_dim, q16 + (int64_t)r * head_dim);
  /* the segments the call covers: all of them, or qr->seg's alone */
  int32_t s0 = pmin / PA_ATTN_SEG, s1 = pmax / PA_ATTN_SEG;
  if (qr->part) s0 = s1 = qr->seg;
  for (int32_t sg = s0; sg <= s1; sg++) {
    const int32_t a = sg * PA_ATTN_SEG, b = a + PA_ATTN_SEG - 1;
    const int32_t q0 = pmin > a ? pmin : a, q1 = pmax < b ? pmax : b;
    for (int32_t r = 0; r < n; r++) {
      m[r] = -INFINITY;
      l[r] = 0.0f;
      slo[r] = qr->lo[r] > a ? qr->lo[r] : a;
      shi[r] = qr->hi[r] < b ? qr->hi[r] : b;
    }
    memset(acc, 0, (size_t)n * (size_t)stride * sizeof(float));
    /* the last tile asks for the next segment's first, or the caller's next lines */
    pa_attn_lines seg_k = {.nr = 0}, seg_v = {.nr = 0};
    const bool last = sg == s1;
    if (!last) pa_attn_kv_lines(kv, layer, seq, kv_head, b + 1, b + PA_ATTN_TILE < pmax ? b + PA_ATTN_TILE : pmax, &seg_k, &seg_v);
    if (q0 <= q1)
      rows_tiles(kt, kv, layer, seq, kv_head, &t, slo, shi, q0, q1, last ? qr->then_k : &seg_k,
                 last ? qr->then_v : &seg_v);
    if (qr->part) { /* the segment's own state, for the caller's merge */
      for (int32_t r = 0; r < n; r++) {
        float *st = qr->part + (int64_t)r * (head_dim_v + 2);
        st[0] = m[r];
        st[1] = l[r];
        memcpy(st + 2, acc + r * stride, (size_t)head_dim_v * sizeof(float));
      }
      return;
    }
    if (s0 == s1) break; /* one segment: its state is the result */
    for (int32_t r = 0; r < n; r++) {
      if (sg == s0) run_m[r] = -INFINITY, run_l[r] = 0.0f;
      pa_attn_merge_row(&run_m[r], &run_l[r], run_acc + r * stride, m[r], l[r], acc + r * stride, head_dim_v);
    }
  }
  const float *res = s0 == s1 ? acc : run_acc, *lr = s0 == s1 ? l : run_l, *mr = s0 == s1 ? m : run_m;
  for (int32_t r = 0; r < n; r++)
    pa_attn_normalize_row(qr->out[r], res + r * stride, pa_attn_inv(mr[r], lr[r], qr->sink ? qr->sink + r : NULL),
                          head_dim_v);
}

