/* attention.c: causal attention of a batch's tokens over the paged KV
 * cache (pa_attention in model.h), by tiles with online softmax (see
 * attention.h), and the plain C twin of the SIMD tile kernels.
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
#include "model/attention.h"

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

VECTORIZE static void normalize_row(float *restrict o, const float *restrict a, float inv, int32_t n) {
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
  table_avx2 = table_plain;
  table_avx2.name = "avx2";
  pa_attn_fill_avx2(&table_avx2);
  pa_attn_fill_q8_avx2(&table_avx2);
  table_avx512 = table_avx2;
  table_avx512.name = "avx512";
  pa_attn_fill_avx512(&table_avx512);
  pa_attn_fill_q8_avx512(&table_avx512);
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

static _Atomic(const pa_attn_kernels *) forced;

void pa_attn_set(const pa_attn_kernels *k) { atomic_store(&forced, k); }

const pa_attn_kernels *pa_attn_current(void) {
  const pa_attn_kernels *k = atomic_load_explicit(&forced, memory_order_relaxed);
  return k ? k : pa_attn_best();
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

static void kv_lines(const pa_kv_cache *kv, int layer, int32_t seq, int kv_head, int32_t p0,
                     int32_t p1, pa_attn_lines *lk, pa_attn_lines *lv) {
  const int64_t vb = (int64_t)kv->head_dim_v * (int64_t)kv->elt;
  const bool q8 = kv->type == PA_KV_Q8;
  lk->nr = lv->nr = 0;
  for (int32_t p = p0; p <= p1;) {
    const int32_t off = p % kv->block_size;
    const int32_t n_here = kv->block_size - off < p1 - p + 1 ? kv->block_size - off : p1 - p + 1;
    const uint8_t *v = pa_kv_v_at(kv, layer, seq, p, kv_head);
    add_run(lk, pa_kv_k_block(kv, layer, seq, p, kv_head), kv->k_part);
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
    kv_lines(kv, layer, seq, kv_head, a, a + PA_ATTN_TILE - 1 < p1 ? a + PA_ATTN_TILE - 1 : p1, &lk,
             &lv);
    lines_prefetch(&lk);
    lines_prefetch(&lv);
  }
}

/* The merge of two segments' states (attention.h): (M, L, ACC) and (m, l,
 * acc) of one row become that of their union (M = -inf: none yet). One
 * function for pa_attn_rows and seg_split, so the one merge order gives one
 * result whatever thread ran which segment. */
VECTORIZE static void merge_row(float *M, float *L, float *restrict ACC, float m, float l,
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

/* The tiles of positions [pmin, pmax] for rows whose ranges are [lo_r,
 * hi_r] (empty: lo_r > hi_r), into t's running m, l and acc (not reset
 * here); then_k / then_v: the lines to ask for during the last tile. */
static void rows_tiles(const pa_attn_kernels *kt, const pa_kv_cache *kv, int layer, int32_t seq, int kv_head,
                       pa_attn_tile *t, const int32_t *lo, const int32_t *hi, int32_t pmin, int32_t pmax,
                       const pa_attn_lines *then_k, const pa_attn_lines *then_v) {
  const int32_t n = t->n_rows;
  const bool q8 = kv->type == PA_KV_Q8;
  const bool spread = q8 ? kt->spread_q8 : kt->spread;
  pa_attn_lines *next_k = (pa_attn_lines *)t->next_k, *next_v = (pa_attn_lines *)t->next_v;
  const void **vp = (const void **)t->v;
  float *ksc = (float *)t->ks, *vsc = (float *)t->vs;
  int32_t *jlo = (int32_t *)t->jlo, *jhi = (int32_t *)t->jhi;
  const int64_t vb = (int64_t)t->head_dim_v * (int64_t)kv->elt;
  for (int32_t base = pmin / PA_ATTN_TILE * PA_ATTN_TILE; base <= pmax; base += PA_ATTN_TILE) {
    const int32_t p0 = base > pmin ? base : pmin;
    const int32_t p1 = base + PA_ATTN_TILE - 1 < pmax ? base + PA_ATTN_TILE - 1 : pmax;
    /* the next tile's values travel while this one is computed */
    next_k->nr = next_v->nr = 0;
    if (p1 < pmax) {
      const int32_t n1 = p1 + PA_ATTN_TILE < pmax ? p1 + PA_ATTN_TILE : pmax;
      kv_lines(kv, layer, seq, kv_head, p1 + 1, n1, next_k, next_v);
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
        memcpy(ksc + 16 * c, pa_kv_k_scales(kv, kb) + c0 % kv->block_size, 16 * sizeof(float));
        memcpy(vsc + 16 * c, pa_kv_v_scale(kv, layer, seq, c0, kv_head), 16 * sizeof(float));
      } else {
        t->kc[c] = kb + (int64_t)(c0 % kv->block_size) * (int64_t)kv->elt;
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
      kt->softmax(t);
      kt->pv_q8(t);
    } else {
      kt->qk(t);
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
  const bool q8 = kv->type == PA_KV_Q8;
  pa_attn_lines next_k = {.nr = 0}, next_v = {.nr = 0};

  int32_t pmin = qr->lo[0], pmax = qr->hi[0];
  for (int32_t r = 0; r < n; r++) {
    pmin = qr->lo[r] < pmin ? qr->lo[r] : pmin;
    pmax = qr->hi[r] > pmax ? qr->hi[r] : pmax;
  }
  pa_attn_tile t = {.n_rows = n, .q = qr->q, .jlo = jlo, .jhi = jhi, .s = s, .m = m, .l = l,
                    .alpha = alpha, .acc = acc, .acc_stride = stride, .k_stride = kv->block_size,
                    .v = vp, .kind = kv->type, .head_dim = head_dim, .head_dim_v = head_dim_v,
                    .scale = scale, .q16 = q16, .q16_stride = head_dim, .qf = qf, .ks = ksc,
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
    if (!last) kv_lines(kv, layer, seq, kv_head, b + 1, b + PA_ATTN_TILE < pmax ? b + PA_ATTN_TILE : pmax, &seg_k, &seg_v);
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
      merge_row(&run_m[r], &run_l[r], run_acc + r * stride, m[r], l[r], acc + r * stride, head_dim_v);
    }
  }
  const float *res = s0 == s1 ? acc : run_acc, *lr = s0 == s1 ? l : run_l;
  for (int32_t r = 0; r < n; r++) normalize_row(qr->out[r], res + r * stride, 1.0f / lr[r], head_dim_v);
}

/* ---- the batch ---- */

/* Tokens per chunk: about 64 rows of queries (tokens x the query heads of a
 * KV head), which keeps a chunk's accumulators and scores in L2 next to the
 * tile of K and V they reuse. */
static int32_t chunk_tokens(const pa_hparams *hp) {
  int32_t group = hp->n_head / hp->n_head_kv;
  return group >= 64 ? 1 : 64 / group;
}

/* The scratch: per batch token its index in sequence order, per chunk its
 * first token and count, the items' first chunks, a count per sequence,
 * the batch's sequences in cache order, then per thread the rows' pointers
 * and ranges and pa_attn_rows' work. */
typedef struct {
  int32_t *order, *chunk_first, *chunk_n, *item_chunk, *count;
  uint64_t *seqs;
  char *threads;
  size_t per_thread;
  /* segment items (SEG_ITEMS at most): chunk, KV head and segment each,
   * and their states (group rows of head_dim_v + 2 floats) */
  int32_t *seg_item, *seg_order; /* seg_order: the items as the threads claim them */
  float *seg_part;
} attn_scratch;

/* The most (token, KV head, segment) items pa_attention splits a batch
 * into (beyond, it keeps (token, KV head) items): 16 segments (8192
 * positions) of 3 KV heads, 64 of one. */
#define SEG_ITEMS 256

static size_t per_thread_size(const pa_hparams *hp) {
  int32_t rows = chunk_tokens(hp) * (hp->n_head / hp->n_head_kv);
  return align64((size_t)rows * (2 * sizeof(float *) + 2 * sizeof(int32_t))) +
         pa_attn_work_size(rows, hp->head_dim, hp->head_dim_v);
}

static size_t shared_size(int32_t n_batch, int32_t n_seq_max) {
  return align64(((size_t)n_batch * 4 + 1 + (size_t)n_seq_max + 1) * sizeof(int32_t)) +
         align64((size_t)n_seq_max * sizeof(uint64_t));
}

static size_t seg_size(const pa_hparams *hp) {
  const int32_t group = hp->n_head / hp->n_head_kv;
  return align64(SEG_ITEMS * 4 * sizeof(int32_t)) +
         align64((size_t)SEG_ITEMS * (size_t)group * (size_t)(hp->head_dim_v + 2) * sizeof(float));
}

static attn_scratch scratch_layout(void *base, int32_t n_threads, int32_t n_batch, int32_t n_seq_max,
                                   const pa_hparams *hp) {
  attn_scratch a;
  char *p = base;
  a.order = (int32_t *)p;
  a.chunk_first = a.order + n_batch;
  a.chunk_n = a.chunk_first + n_batch;
  a.item_chunk = a.chunk_n + n_batch;
  a.count = a.item_chunk + n_batch + 1;
  p += align64(((size_t)n_batch * 4 + 1 + (size_t)n_seq_max + 1) * sizeof(int32_t));
  a.seqs = (uint64_t *)p;
  a.threads = base;
  a.threads += shared_size(n_batch, n_seq_max);
  a.per_thread = per_thread_size(hp);
  a.seg_item = (int32_t *)(void *)(a.threads + a.per_thread * (size_t)n_threads);
  a.seg_order = a.seg_item + 3 * SEG_ITEMS;
  a.seg_part = (float *)(void *)((char *)a.seg_item + align64(SEG_ITEMS * 4 * sizeof(int32_t)));
  return a;
}

size_t pa_attention_scratch_size(int32_t n_threads, int32_t n_batch, int32_t n_seq_max, const pa_hparams *hp) {
  return shared_size(n_batch, n_seq_max) + (size_t)n_threads * per_thread_size(hp) + seg_size(hp);
}

typedef struct {
  struct pa_context *c;
  const pa_fwd_batch *b;
  const pa_attn_kernels *kt;
  attn_scratch sc;
  int layer;
  int32_t window, n_chunks, split, n_items;
  bool all_heads; /* an item is a run of chunks with every KV head (else one chunk, one head) */
  atomic_int next;
} attn_job;

/* One work item: chunks [ch0, ch0 + nch) (with several, every row of
 * each), or rows [r0, r1) of chunk ch0 (their tokens' query heads), for
 * KV heads [g0, g1). */
typedef struct {
  int32_t ch0, nch, g0, g1, r0, r1;
} attn_item;

/* Rows [r0, r1) of chunk ch: their sequence and their first tile's
 * positions [*lo, *hi]: from the first row's window start to the tile's
 * end or the last row. */
static int32_t chunk_span(const attn_job *j, int32_t ch, int32_t r0, int32_t r1, int32_t *lo,
                          int32_t *hi) {
  const pa_hparams *hp = &j->c->model->hp;
  const int32_t group = hp->n_head / hp->n_head_kv, first = j->sc.chunk_first[ch];
  const int32_t t_first = j->sc.order[first + r0 / group], t_last = j->sc.order[first + (r1 - 1) / group];
  const int32_t pos0 = j->b->pos[t_first], pos1 = j->b->pos[t_last];
  *lo = j->window > 0 && pos0 - j->window + 1 > 0 ? pos0 - j->window + 1 : 0;
  const int32_t end = (*lo / PA_ATTN_TILE + 1) * PA_ATTN_TILE - 1;
  *hi = end < pos1 ? end : pos1;
  return j->b->seq[t_first];
}

/* The rows item `it` takes of its k-th chunk. */
static void item_rows(const attn_job *j, const attn_item *it, int32_t k, int32_t *r0, int32_t *r1) {
  const pa_hparams *hp = &j->c->model->hp;
  if (it->nch == 1) {
    *r0 = it->r0;
    *r1 = it->r1;
  } else {
    *r0 = 0;
    *r1 = j->sc.chunk_n[it->ch0 + k] * (hp->n_head / hp->n_head_kv);
  }
}

/* The lines of the first tile of KV head g for item it's k-th chunk. */
static void item_lines(const attn_job *j, const attn_item *it, int32_t k, int g, pa_attn_lines *lk,
                       pa_attn_lines *lv) {
  int32_t r0, r1, lo, hi;
  item_rows(j, it, k, &r0, &r1);
  const int32_t seq = chunk_span(j, it->ch0 + k, r0, r1, &lo, &hi);
  kv_lines(&j->c->kv, j->layer, seq, g, lo, hi, lk, lv);
}

/* The next item with rows; false when none is left. */
static bool claim_item(attn_job *j, attn_item *it) {
  const pa_hparams *hp = &j->c->model->hp;
  const int32_t group = hp->n_head / hp->n_head_kv;
  for (;;) {
    const int32_t item = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
    if (item >= j->n_items) return false;
    if (j->all_heads) { /* runs of chunks, the last first */
      const int32_t i = j->n_items - 1 - item;
      it->ch0 = j->sc.item_chunk[i];
      it->nch = j->sc.item_chunk[i + 1] - it->ch0;
      it->g0 = 0;
      it->g1 = hp->n_head_kv;
      it->r0 = 0;
      it->r1 = j->sc.chunk_n[it->ch0] * group;
      return true;
    }
    /* last chunks (the longest prefixes) first */
    const int32_t part = item % j->split;
    const int32_t ch = j->n_chunks - 1 - item / j->split / hp->n_head_kv;
    const int32_t rows = j->sc.chunk_n[ch] * group;
    it->ch0 = ch;
    it->nch = 1;
    it->g0 = item / j->split % hp->n_head_kv;
    it->g1 = it->g0 + 1;
    it->r0 = (int32_t)((int64_t)rows * part / j->split);
    it->r1 = (int32_t)((int64_t)rows * (part + 1) / j->split);
    if (it->r0 < it->r1) return true;
  }
}

static void item_prefetch(const attn_job *j, const attn_item *it) {
  int32_t r0, r1, lo, hi;
  item_rows(j, it, 0, &r0, &r1);
  const int32_t seq = chunk_span(j, it->ch0, r0, r1, &lo, &hi);
  pa_attn_prefetch(&j->c->kv, j->layer, seq, it->g0, lo, hi);
}

/* Thread ith's part of the scratch: the rows' query and output pointers
 * and ranges (up to a chunk's rows), then pa_attn_rows' work. */
typedef struct {
  const float **q;
  float **out;
  int32_t *lo, *hi;
  void *work;
} attn_thread;

static attn_thread thread_area(const attn_job *j, int ith) {
  const pa_hparams *hp = &j->c->model->hp;
  const int32_t rows_max = chunk_tokens(hp) * (hp->n_head / hp->n_head_kv);
  char *mine = j->sc.threads + (size_t)ith * j->sc.per_thread;
  attn_thread a;
  a.q = (const float **)(void *)mine;
  a.out = (float **)(a.q + rows_max);
  a.lo = (int32_t *)(a.out + rows_max);
  a.hi = a.lo + rows_max;
  a.work = mine + align64((size_t)rows_max * (2 * sizeof(float *) + 2 * sizeof(int32_t)));
  return a;
}

static void attention_worker(void *arg, int ith, int nth) {
  attn_job *j = arg;
  struct pa_context *c = j->c;
  const pa_hparams *hp = &c->model->hp;
  const int32_t hd = hp->head_dim, hdv = hp->head_dim_v, group = hp->n_head / hp->n_head_kv;
  const int64_t Q = (int64_t)hp->n_head * hd, O = (int64_t)hp->n_head * hdv;
  const attn_thread area = thread_area(j, ith);
  const float **q = area.q;
  float **out = area.out;
  int32_t *lo = area.lo, *hi = area.hi;
  void *work = area.work;
  /* The last tile of each call asks for the first tile of the next one
   * (the item's next chunk, its first chunk's next head, or the next
   * item), while it computes. With several items per thread they are
   * claimed one ahead for that; with fewer, a claim ahead could take the
   * item an idle thread was about to. */
  const bool ahead = j->n_items >= 4 * nth;
  attn_item cur, nxt;
  bool have = claim_item(j, &cur);
  if (have) item_prefetch(j, &cur); /* nothing before it to hide this one behind */
  while (have) {
    const bool more = ahead && claim_item(j, &nxt);
    for (int32_t g = cur.g0; g < cur.g1; g++) {
      for (int32_t k = 0; k < cur.nch; k++) {
        const int32_t ch = cur.ch0 + k, first = j->sc.chunk_first[ch];
        int32_t r0, r1;
        item_rows(j, &cur, k, &r0, &r1);
        const int32_t seq = j->b->seq[j->sc.order[first]]; /* a chunk is one sequence's */
        for (int32_t r = r0; r < r1; r++) {
          const int32_t t = j->sc.order[first + r / group], h = g * group + r % group;
          const int32_t pos = j->b->pos[t];
          q[r - r0] = c->s.q + t * Q + (int64_t)h * hd;
          out[r - r0] = c->s.att + t * O + (int64_t)h * hdv;
          lo[r - r0] = j->window > 0 && pos - j->window + 1 > 0 ? pos - j->window + 1 : 0;
          hi[r - r0] = pos;
        }
        pa_attn_lines then_k = {.nr = 0}, then_v = {.nr = 0};
        if (k + 1 < cur.nch)
          item_lines(j, &cur, k + 1, g, &then_k, &then_v);
        else if (g + 1 < cur.g1)
          item_lines(j, &cur, 0, g + 1, &then_k, &then_v);
        else if (more)
          item_lines(j, &nxt, 0, nxt.g0, &then_k, &then_v);
        pa_attn_query qr = {.n_rows = r1 - r0, .q = q, .out = out, .lo = lo, .hi = hi,
                            .then_k = &then_k, .then_v = &then_v};
        pa_attn_rows(j->kt, &c->kv, j->layer, seq, g, hd, hdv, hp->attn_scale, &qr, work);
      }
    }
    if (ahead) {
      cur = nxt;
      have = more;
    } else if ((have = claim_item(j, &cur))) {
      item_prefetch(j, &cur);
    }
  }
}

/* ---- one token's KV heads cut by segment ---- */

/* The row range of chunk ch's token (a one-token chunk): seq, lo, hi. */
static int32_t token_range(const attn_job *j, int32_t ch, int32_t *lo, int32_t *hi) {
  const int32_t t = j->sc.order[j->sc.chunk_first[ch]], pos = j->b->pos[t];
  *lo = j->window > 0 && pos - j->window + 1 > 0 ? pos - j->window + 1 : 0;
  *hi = pos;
  return t;
}

static void seg_worker(void *arg, int ith, int nth) {
  (void)nth;
  attn_job *j = arg;
  struct pa_context *c = j->c;
  const pa_hparams *hp = &c->model->hp;
  const int32_t hd = hp->head_dim, hdv = hp->head_dim_v, group = hp->n_head / hp->n_head_kv;
  const int64_t Q = (int64_t)hp->n_head * hd;
  const attn_thread area = thread_area(j, ith);
  for (;;) {
    const int32_t k = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
    if (k >= j->n_items) return;
    const int32_t i = j->sc.seg_order[k];
    const int32_t ch = j->sc.seg_item[3 * i], g = j->sc.seg_item[3 * i + 1], sg = j->sc.seg_item[3 * i + 2];
    int32_t a, z;
    const int32_t t = token_range(j, ch, &a, &z), seq = j->b->seq[t];
    for (int32_t r = 0; r < group; r++) {
      area.q[r] = c->s.q + t * Q + (int64_t)(g * group + r) * hd;
      area.out[r] = NULL; /* the state goes to part */
      area.lo[r] = a;
      area.hi[r] = z;
    }
    const int32_t s0 = sg * PA_ATTN_SEG > a ? sg * PA_ATTN_SEG : a;
    pa_attn_prefetch(&c->kv, j->layer, seq, g, s0, s0 + PA_ATTN_TILE - 1 < z ? s0 + PA_ATTN_TILE - 1 : z);
    pa_attn_query qr = {.n_rows = group, .q = area.q, .out = area.out, .lo = area.lo, .hi = area.hi,
                        .part = j->sc.seg_part + (int64_t)i * group * (hdv + 2), .seg = sg};
    pa_attn_rows(j->kt, &c->kv, j->layer, seq, g, hd, hdv, hp->attn_scale, &qr, area.work);
  }
}

/* When every chunk is one token (sequences decoding) and their (token, KV
 * head) items would leave threads idle (3 KV heads on 2 threads, or
 * Gemma 3's one, whose rows would otherwise be split, each part reading
 * all of K and V), and the tokens' ranges make at least two (token, KV
 * head, segment) items per thread: those items on the pool, whole
 * segments first, then each row's segments merged in ascending order by
 * this thread (attention.h: the bits of one thread doing all). False
 * (nothing done) otherwise: with fewer, the pieces would not balance (a
 * sliding window of 512 positions is two segments of any sizes; Gemma 3's
 * local layers: attention 44-48 -> 63-66 ms at 2000 positions, one thread
 * idle 30% of it). */
static bool seg_split(attn_job *j) {
  struct pa_context *c = j->c;
  const pa_hparams *hp = &c->model->hp;
  const int32_t H = hp->n_head_kv, nth = c->n_threads, items = j->n_chunks * H;
  if (nth < 2 || !c->pool || items >= 2 * nth || items % nth == 0) return false;
  int32_t n = 0;
  for (int32_t ch = 0; ch < j->n_chunks; ch++) {
    if (j->sc.chunk_n[ch] != 1) return false;
    int32_t a, z;
    token_range(j, ch, &a, &z);
    n += (z / PA_ATTN_SEG - a / PA_ATTN_SEG + 1) * H;
  }
  if (n <= items || n < 2 * nth || n > SEG_ITEMS) return false;
  /* the items (token, KV head, segment ascending), and the order the
   * threads take them in: the whole segments from the front, the partial
   * ones from the back */
  j->n_items = n;
  int32_t whole = 0, partial = n;
  n = 0;
  for (int32_t ch = 0; ch < j->n_chunks; ch++) {
    int32_t a, z;
    token_range(j, ch, &a, &z);
    for (int32_t g = 0; g < H; g++)
      for (int32_t sg = a / PA_ATTN_SEG; sg <= z / PA_ATTN_SEG; sg++) {
        j->sc.seg_item[3 * n] = ch;
        j->sc.seg_item[3 * n + 1] = g;
        j->sc.seg_item[3 * n + 2] = sg;
        if (a <= sg * PA_ATTN_SEG && (sg + 1) * PA_ATTN_SEG - 1 <= z)
          j->sc.seg_order[whole++] = n;
        else
          j->sc.seg_order[--partial] = n;
        n++;
      }
  }
  atomic_init(&j->next, 0);
  pa_pool_run(c->pool, seg_worker, j);
  /* the merge, item by item: a (token, KV head)'s segments are neighbours, ascending */
  const int32_t hdv = hp->head_dim_v, group = hp->n_head / H;
  const int64_t O = (int64_t)hp->n_head * hdv;
  float *ACC = thread_area(j, 0).work; /* the job is over: the calling thread's work area is free */
  for (int32_t i0 = 0; i0 < n;) {
    const int32_t ch = j->sc.seg_item[3 * i0], g = j->sc.seg_item[3 * i0 + 1];
    int32_t i1 = i0;
    while (i1 < n && j->sc.seg_item[3 * i1] == ch && j->sc.seg_item[3 * i1 + 1] == g) i1++;
    int32_t a, z;
    const int32_t t = token_range(j, ch, &a, &z);
    for (int32_t r = 0; r < group; r++) {
      float M = -INFINITY, L = 0.0f;
      for (int32_t i = i0; i < i1; i++) {
        const float *st = j->sc.seg_part + ((int64_t)i * group + r) * (hdv + 2);
        merge_row(&M, &L, ACC, st[0], st[1], st + 2, hdv);
      }
      normalize_row(c->s.att + t * O + (int64_t)(g * group + r) * hdv, ACC, 1.0f / L, hdv);
    }
    i0 = i1;
  }
  return true;
}

/* The batch's K and V rows into the cache, tokens split in contiguous
 * ranges over the threads (a store converts, and for Q8 quantizes, every
 * value: serial, it took ~5% of a 16-user decode step). */
typedef struct {
  struct pa_context *c;
  const pa_fwd_batch *b;
  int layer;
} store_job;

static void store_task(void *arg, int i, int n) {
  const store_job *j = arg;
  const pa_hparams *hp = &j->c->model->hp;
  const int64_t K = (int64_t)hp->n_head_kv * hp->head_dim, VV = (int64_t)hp->n_head_kv * hp->head_dim_v;
  const int32_t t0 = (int32_t)((int64_t)j->b->n * i / n), t1 = (int32_t)((int64_t)j->b->n * (i + 1) / n);
  for (int32_t t = t0; t < t1; t++)
    pa_kv_store(&j->c->kv, j->layer, j->b->seq[t], j->b->pos[t], j->c->s.k + t * K, j->c->s.v + t * VV);
}

void pa_kv_store_batch(struct pa_context *c, const pa_fwd_batch *b, int layer) {
  store_job sj = {.c = c, .b = b, .layer = layer};
  const int32_t n_store = b->n < 4 * c->n_threads ? b->n : 4 * c->n_threads;
  if (n_store <= 1 || !c->pool)
    store_task(&sj, 0, 1);
  else
    pa_pool_run_tasks(c->pool, store_task, &sj, n_store);
}

static int cmp_u64(const void *a, const void *b) {
  const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Sequence s's first block (sequences sharing a prefix share it), or
 * UINT32_MAX when it has none. */
static uint32_t first_block(const pa_kv_cache *kv, int32_t s) {
  return kv->n_seq_blocks[s] > 0 ? (uint32_t)kv->table[s][0] : UINT32_MAX;
}

void pa_attention(struct pa_context *c, const pa_fwd_batch *b, int layer, int32_t window) {
  const pa_hparams *hp = &c->model->hp;
  /* the reference path takes the plain twin, as its products take exact.c */
  attn_job j = {.c = c, .b = b, .kt = c->reference_path ? pa_attn_plain() : pa_attn_current(),
                .layer = layer, .window = window};
  j.sc = scratch_layout(c->s.scores, c->n_threads, c->n_batch, c->n_seq_max, hp);
  /* tokens in sequence order (stable: within a sequence, ascending positions) */
  int32_t *count = j.sc.count;
  memset(count, 0, ((size_t)c->n_seq_max + 1) * sizeof(int32_t));
  for (int32_t t = 0; t < b->n; t++) count[b->seq[t] + 1]++;
  /* the batch's sequences by their first block, so that sequences sharing
   * a prefix are neighbours (below, in one item: the second reads the
   * shared blocks from the cache) */
  int32_t n_seqs = 0;
  for (int32_t s = 0; s < c->n_seq_max; s++)
    if (count[s + 1] > 0) j.sc.seqs[n_seqs++] = (uint64_t)first_block(&c->kv, s) << 32 | (uint32_t)s;
  qsort(j.sc.seqs, (size_t)n_seqs, sizeof(uint64_t), cmp_u64);
  for (int32_t s = 0; s < c->n_seq_max; s++) count[s + 1] += count[s];
  for (int32_t t = 0; t < b->n; t++) j.sc.order[count[b->seq[t]]++] = t;
  /* count[s] is now the end of sequence s's run */
  const int32_t per = chunk_tokens(hp);
  for (int32_t i = 0; i < n_seqs; i++) {
    const int32_t s = (int32_t)(uint32_t)j.sc.seqs[i], start = s > 0 ? count[s - 1] : 0;
    for (int32_t k = start; k < count[s]; k += per) {
      j.sc.chunk_first[j.n_chunks] = k;
      j.sc.chunk_n[j.n_chunks++] = count[s] - k < per ? count[s] - k : per;
    }
  }
  if (seg_split(&j)) return;
  /* With many chunks (many sequences decoding) an item takes every KV
   * head of a run of chunks: neighbouring sequences that share their
   * first block, a run short enough to leave 3 items per thread (16
   * users on 2 threads: pairs), each chunk prefetching the next one's
   * first tile; with fewer, one head of one chunk; with fewer items than
   * threads (one sequence decoding, as Gemma 3's single KV head), part of
   * one head's rows, in as few parts as keep every thread busy: each part
   * reads all of the head's K and V, so 4 rows as 4 parts of 1 on 2
   * threads read them twice per thread (Gemma 3 270M, pp512 then 64
   * tokens: attention 155-172 -> 124-128 ms), and 3 heads on 2 threads
   * run faster whole than cut in 6 (SmolLM2: 140-144 -> 120-130 ms). */
  const int32_t want = 3 * c->n_threads;
  j.all_heads = j.n_chunks >= want;
  if (j.all_heads) {
    const int32_t cap = j.n_chunks / want;
    int32_t run = 0, prev = -1;
    for (int32_t ch = 0; ch < j.n_chunks; ch++) {
      const int32_t s = b->seq[j.sc.order[j.sc.chunk_first[ch]]];
      if (run == cap || s == prev || prev < 0 || first_block(&c->kv, s) != first_block(&c->kv, prev)) {
        j.sc.item_chunk[j.n_items++] = ch;
        run = 0;
      }
      run++;
      prev = s;
    }
    j.sc.item_chunk[j.n_items] = j.n_chunks;
    j.split = 1;
  } else {
    const int32_t items = j.n_chunks * hp->n_head_kv;
    const int32_t rows_min = hp->n_head / hp->n_head_kv; /* a one-token chunk */
    j.split = items >= c->n_threads ? 1 : (c->n_threads + items - 1) / items;
    if (j.split > rows_min) j.split = rows_min;
    j.n_items = items * j.split;
  }
  atomic_init(&j.next, 0);
  pa_pool_run(c->pool, attention_worker, &j);
}
