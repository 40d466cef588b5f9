/* attention.c: causal attention of a batch's tokens over the paged KV
 * cache (pa_attention in model.h), by tiles with online softmax (see
 * attention.h), and the plain C twin of the SIMD tile kernels.
 *
 * pa_attention groups the batch's tokens by sequence, cuts each sequence's
 * run into chunks of up to ~64 query rows (tokens times the query heads of
 * one KV head), and hands (chunk, KV head) items to the threads, largest
 * first; when there are too few items for the threads (decoding a single
 * sequence) an item's rows are split further. No step of a row depends on
 * the item it lands in, so outputs do not depend on batching or threads. */
#include "model/attention.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "base/base.h"
#include "kernels/ops.h"

/* ---- plain C tile kernels ---- */

static void qk_plain(const pa_attn_tile *t) {
  const int32_t hd = t->head_dim;
  for (int32_t r = 0; r < t->n_rows; r++) {
    const float *q = t->q[r];
    float *s = t->s + (int64_t)r * PA_ATTN_TILE;
    for (int32_t j = t->jlo[r]; j < t->jhi[r]; j++) {
      const float *k = t->k[j];
      float p[8] = {0};
      int32_t d = 0;
      for (; d + 8 <= hd; d += 8)
        for (int i = 0; i < 8; i++) p[i] += q[d + i] * k[d + i];
      for (; d < hd; d++) p[0] += q[d] * k[d];
      s[j] = (((p[0] + p[4]) + (p[2] + p[6])) + ((p[1] + p[5]) + (p[3] + p[7]))) * t->scale;
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
    for (int32_t j = lo; j < hi; j++) {
      const float *v = t->v[j], e = s[j];
      int32_t d = 0;
      for (; d + 16 <= hdv; d += 16) /* a fixed trip count: vectorized at -O2 */
        for (int i = 0; i < 16; i++) acc[d + i] += e * v[d + i];
      for (; d < hdv; d++) acc[d] += e * v[d];
    }
  }
}

/* ---- tables ---- */

static pa_attn_kernels table_plain = {"plain", qk_plain, softmax_plain, pv_plain};
static pa_attn_kernels table_avx2, table_avx512;
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void tables_init(void) {
  table_avx2 = table_plain;
  table_avx2.name = "avx2";
  pa_attn_fill_avx2(&table_avx2);
  table_avx512 = table_avx2;
  table_avx512.name = "avx512";
  pa_attn_fill_avx512(&table_avx512);
}

const pa_attn_kernels *pa_attn_plain(void) { return &table_plain; }

const pa_attn_kernels *pa_attn_avx2(void) {
  const pa_cpu_features *f = pa_cpu();
  if (!(f->avx2 && f->fma)) return NULL;
  pthread_once(&tables_once, tables_init);
  return &table_avx2;
}

const pa_attn_kernels *pa_attn_avx512(void) {
  const pa_cpu_features *f = pa_cpu();
  if (!(f->avx2 && f->fma && f->avx512f)) return NULL;
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

size_t pa_attn_work_size(int32_t n_rows, int32_t head_dim_v) {
  size_t r = (size_t)(n_rows > 0 ? n_rows : 1);
  return align64(r * (size_t)acc_stride_of(head_dim_v) * sizeof(float)) + /* acc */
         align64(r * PA_ATTN_TILE * sizeof(float)) +                      /* s */
         align64(r * 3 * sizeof(float)) +                                 /* m, l, alpha */
         align64(r * 2 * sizeof(int32_t)) +                               /* jlo, jhi */
         align64(2 * PA_ATTN_TILE * sizeof(const float *));               /* k, v */
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
  float *m = (float *)w, *l = m + n, *alpha = l + n;
  w += align64((size_t)n * 3 * sizeof(float));
  int32_t *jlo = (int32_t *)w, *jhi = jlo + n;
  w += align64((size_t)n * 2 * sizeof(int32_t));
  const float **kp = (const float **)w, **vp = kp + PA_ATTN_TILE;

  int32_t pmin = qr->lo[0], pmax = qr->hi[0];
  for (int32_t r = 0; r < n; r++) {
    pmin = qr->lo[r] < pmin ? qr->lo[r] : pmin;
    pmax = qr->hi[r] > pmax ? qr->hi[r] : pmax;
    m[r] = -INFINITY;
    l[r] = 0.0f;
  }
  memset(acc, 0, (size_t)n * (size_t)stride * sizeof(float));
  pa_attn_tile t = {.n_rows = n, .q = qr->q, .jlo = jlo, .jhi = jhi, .s = s, .m = m, .l = l,
                    .alpha = alpha, .acc = acc, .acc_stride = stride, .k = kp, .v = vp,
                    .head_dim = head_dim, .head_dim_v = head_dim_v, .scale = scale};
  const int64_t koff = (int64_t)kv_head * head_dim, voff = (int64_t)kv_head * head_dim_v;
  for (int32_t base = pmin / PA_ATTN_TILE * PA_ATTN_TILE; base <= pmax; base += PA_ATTN_TILE) {
    const int32_t p0 = base > pmin ? base : pmin;
    const int32_t p1 = base + PA_ATTN_TILE - 1 < pmax ? base + PA_ATTN_TILE - 1 : pmax;
    /* K and V rows block by block (one table look-up per block) */
    for (int32_t p = p0; p <= p1;) {
      const int32_t off = p % kv->block_size, blk = kv->table[seq][p / kv->block_size];
      const int32_t n_here = kv->block_size - off < p1 - p + 1 ? kv->block_size - off : p1 - p + 1;
      const int64_t row = (int64_t)blk * kv->block_size + off;
      const float *k = kv->k[layer] + row * kv->k_row + koff, *v = kv->v[layer] + row * kv->v_row + voff;
      for (int32_t i = 0; i < n_here; i++) {
        kp[p - base + i] = k + i * kv->k_row;
        vp[p - base + i] = v + i * kv->v_row;
      }
      p += n_here;
    }
    for (int32_t r = 0; r < n; r++) {
      int32_t a = qr->lo[r] - base, b = qr->hi[r] + 1 - base;
      a = a < 0 ? 0 : a;
      b = b > PA_ATTN_TILE ? PA_ATTN_TILE : b;
      jlo[r] = a < b ? a : 0;
      jhi[r] = a < b ? b : 0;
    }
    kt->qk(&t);
    kt->softmax(&t);
    kt->pv(&t);
  }
  for (int32_t r = 0; r < n; r++) {
    const float inv = 1.0f / l[r], *a = acc + r * stride;
    float *o = qr->out[r];
    for (int32_t d = 0; d < head_dim_v; d++) o[d] = a[d] * inv;
  }
}

/* ---- the batch ---- */

/* Tokens per chunk: about 64 rows of queries (tokens x the query heads of a
 * KV head), which keeps a chunk's accumulators and scores in L2 next to the
 * tile of K and V they reuse. */
static int32_t chunk_tokens(const pa_hparams *hp) {
  int32_t group = hp->n_head / hp->n_head_kv;
  return group >= 64 ? 1 : 64 / group;
}

/* The scratch: per batch token its index in sequence order and its chunk
 * bookkeeping, a count per sequence, then per thread the rows' pointers and
 * ranges and pa_attn_rows' work. */
typedef struct {
  int32_t *order, *chunk_first, *chunk_n, *count;
  char *threads;
  size_t per_thread;
} attn_scratch;

static size_t per_thread_size(const pa_hparams *hp) {
  int32_t rows = chunk_tokens(hp) * (hp->n_head / hp->n_head_kv);
  return align64((size_t)rows * (2 * sizeof(float *) + 2 * sizeof(int32_t))) +
         pa_attn_work_size(rows, hp->head_dim_v);
}

static attn_scratch scratch_layout(void *base, int32_t n_batch, int32_t n_seq_max, const pa_hparams *hp) {
  attn_scratch a;
  char *p = base;
  a.order = (int32_t *)p;
  a.chunk_first = a.order + n_batch;
  a.chunk_n = a.chunk_first + n_batch;
  a.count = a.chunk_n + n_batch;
  p += align64(((size_t)n_batch * 3 + (size_t)n_seq_max + 1) * sizeof(int32_t));
  a.threads = p;
  a.per_thread = per_thread_size(hp);
  return a;
}

size_t pa_attention_scratch_size(int32_t n_threads, int32_t n_batch, int32_t n_seq_max, const pa_hparams *hp) {
  return align64(((size_t)n_batch * 3 + (size_t)n_seq_max + 1) * sizeof(int32_t)) +
         (size_t)n_threads * per_thread_size(hp);
}

typedef struct {
  struct pa_context *c;
  const pa_fwd_batch *b;
  const pa_attn_kernels *kt;
  attn_scratch sc;
  int layer;
  int32_t window, n_chunks, split, n_items;
  atomic_int next;
} attn_job;

static void attention_worker(void *arg, int ith, int nth) {
  attn_job *j = arg;
  struct pa_context *c = j->c;
  const pa_hparams *hp = &c->model->hp;
  const int32_t hd = hp->head_dim, hdv = hp->head_dim_v, group = hp->n_head / hp->n_head_kv;
  const int64_t Q = (int64_t)hp->n_head * hd, O = (int64_t)hp->n_head * hdv;
  const int32_t rows_max = chunk_tokens(hp) * group;
  char *mine = j->sc.threads + (size_t)ith * j->sc.per_thread;
  const float **q = (const float **)mine;
  float **out = (float **)(q + rows_max);
  int32_t *lo = (int32_t *)(out + rows_max), *hi = lo + rows_max;
  void *work = mine + align64((size_t)rows_max * (2 * sizeof(float *) + 2 * sizeof(int32_t)));
  (void)nth;
  for (;;) {
    int32_t item = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
    if (item >= j->n_items) break;
    /* last chunks (the longest prefixes) first */
    const int32_t part = item % j->split, g = item / j->split % hp->n_head_kv;
    const int32_t ch = j->n_chunks - 1 - item / j->split / hp->n_head_kv;
    const int32_t first = j->sc.chunk_first[ch], rows = j->sc.chunk_n[ch] * group;
    const int32_t r0 = (int32_t)((int64_t)rows * part / j->split);
    const int32_t r1 = (int32_t)((int64_t)rows * (part + 1) / j->split);
    if (r0 >= r1) continue;
    int32_t seq = 0;
    for (int32_t r = r0; r < r1; r++) {
      const int32_t t = j->sc.order[first + r / group], h = g * group + r % group;
      const int32_t pos = j->b->pos[t];
      seq = j->b->seq[t];
      q[r - r0] = c->s.q + t * Q + (int64_t)h * hd;
      out[r - r0] = c->s.att + t * O + (int64_t)h * hdv;
      lo[r - r0] = j->window > 0 && pos - j->window + 1 > 0 ? pos - j->window + 1 : 0;
      hi[r - r0] = pos;
    }
    pa_attn_query qr = {.n_rows = r1 - r0, .q = q, .out = out, .lo = lo, .hi = hi};
    pa_attn_rows(j->kt, &c->kv, j->layer, seq, g, hd, hdv, hp->attn_scale, &qr, work);
  }
}

void pa_attention(struct pa_context *c, const pa_fwd_batch *b, int layer, int32_t window) {
  const pa_hparams *hp = &c->model->hp;
  const int64_t K = (int64_t)hp->n_head_kv * hp->head_dim, VV = (int64_t)hp->n_head_kv * hp->head_dim_v;
  for (int32_t t = 0; t < b->n; t++) {
    memcpy(pa_kv_k(&c->kv, layer, b->seq[t], b->pos[t]), c->s.k + t * K, (size_t)K * sizeof(float));
    memcpy(pa_kv_v(&c->kv, layer, b->seq[t], b->pos[t]), c->s.v + t * VV, (size_t)VV * sizeof(float));
  }
  /* the reference path takes the plain twin, as its products take exact.c */
  attn_job j = {.c = c, .b = b, .kt = c->reference_path ? pa_attn_plain() : pa_attn_current(),
                .layer = layer, .window = window};
  j.sc = scratch_layout(c->s.scores, c->n_batch, c->n_seq_max, hp);
  /* tokens in sequence order (stable: within a sequence, ascending positions) */
  int32_t *count = j.sc.count;
  memset(count, 0, ((size_t)c->n_seq_max + 1) * sizeof(int32_t));
  for (int32_t t = 0; t < b->n; t++) count[b->seq[t] + 1]++;
  for (int32_t s = 0; s < c->n_seq_max; s++) count[s + 1] += count[s];
  for (int32_t t = 0; t < b->n; t++) j.sc.order[count[b->seq[t]]++] = t;
  /* count[s] is now the end of sequence s's run */
  const int32_t per = chunk_tokens(hp);
  int32_t start = 0;
  for (int32_t s = 0; s < c->n_seq_max; s++) {
    for (int32_t i = start; i < count[s]; i += per) {
      j.sc.chunk_first[j.n_chunks] = i;
      j.sc.chunk_n[j.n_chunks++] = count[s] - i < per ? count[s] - i : per;
    }
    start = count[s];
  }
  /* enough items for every thread to have a few */
  const int32_t items = j.n_chunks * hp->n_head_kv, want = 3 * c->n_threads;
  const int32_t rows_min = hp->n_head / hp->n_head_kv; /* a one-token chunk */
  j.split = items >= want ? 1 : (want + items - 1) / items;
  if (j.split > rows_min) j.split = rows_min;
  j.n_items = items * j.split;
  atomic_init(&j.next, 0);
  pa_pool_run(c->pool, attention_worker, &j);
}
