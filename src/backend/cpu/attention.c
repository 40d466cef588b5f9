/* attention.c: the CPU backend's attention op: causal attention of a
 * batch's tokens over the paged KV cache, scheduled over the context's
 * threads, on the tile kernels of src/kernels/attention.h.
 *
 * The batch's tokens are grouped by sequence, each sequence's run cut into
 * chunks of up to ~64 query rows (tokens times the query heads of one KV
 * head), and (chunk, KV head) items handed to the threads, largest first
 * (with many chunks, as when many sequences decode, (chunk, every KV head)
 * items); when there are too few items for the threads (decoding a single
 * sequence) a token's positions are cut by segment (attention.h) over the
 * threads and merged after, or, within one segment, an item's rows are
 * split. No step of a row depends on the item it lands in, so outputs do
 * not depend on batching or threads. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "base/base.h"
#include "kernels/attention.h"

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

/* ---- the batch ---- */

/* Tokens per chunk: about 64 rows of queries (tokens x the query heads of a
 * KV head), which keeps a chunk's accumulators and scores in L2 next to the
 * tile of K and V they reuse. */
static int32_t chunk_tokens(int32_t group) { return group >= 64 ? 1 : 64 / group; }

/* The largest of either kind of layer's (pa_layer_attn): rows of a chunk,
 * a KV head's query heads, head sizes; the scratch is sized by them. */
static int32_t rows_max_of(const pa_hparams *hp) {
  const int32_t g0 = hp->n_head / hp->n_head_kv, g1 = hp->n_head / pa_or_(hp->n_head_kv_swa, hp->n_head_kv);
  const int32_t r0 = chunk_tokens(g0) * g0, r1 = chunk_tokens(g1) * g1;
  return r0 > r1 ? r0 : r1;
}
static int32_t group_max_of(const pa_hparams *hp) {
  const int32_t g0 = hp->n_head / hp->n_head_kv, g1 = hp->n_head / pa_or_(hp->n_head_kv_swa, hp->n_head_kv);
  return g0 > g1 ? g0 : g1;
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
  const int32_t rows = rows_max_of(hp);
  const pa_attn_shape a = pa_attn_max(hp);
  return align64((size_t)rows * (2 * sizeof(float *) + 2 * sizeof(int32_t) + sizeof(float))) +
         pa_attn_work_size(rows, a.head_dim, a.head_dim_v);
}

static size_t shared_size(int32_t n_batch, int32_t n_seq_max) {
  return align64(((size_t)n_batch * 4 + 1 + (size_t)n_seq_max + 1) * sizeof(int32_t)) +
         align64((size_t)n_seq_max * sizeof(uint64_t));
}

static size_t seg_size(const pa_hparams *hp) {
  const int32_t group = group_max_of(hp);
  return align64(SEG_ITEMS * 4 * sizeof(int32_t)) +
         align64((size_t)SEG_ITEMS * (size_t)group * (size_t)(pa_attn_max(hp).head_dim_v + 2) * sizeof(float));
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

size_t pa_cpu_attention_scratch_size(int32_t n_threads, int32_t n_batch, int32_t n_seq_max, const pa_hparams *hp) {
  return shared_size(n_batch, n_seq_max) + (size_t)n_threads * per_thread_size(hp) + seg_size(hp);
}

typedef struct {
  pa_bctx *c;
  const pa_fwd_batch *b;
  const pa_attn_kernels *kt;
  attn_scratch sc;
  int layer;
  pa_attn_shape a; /* the layer's heads */
  int32_t group;   /* query heads per KV head */
  int32_t rows_max; /* the scratch's rows per thread (rows_max_of) */
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
  const int32_t group = j->group, first = j->sc.chunk_first[ch];
  const int32_t t_first = j->sc.order[first + r0 / group], t_last = j->sc.order[first + (r1 - 1) / group];
  const int32_t pos0 = j->b->pos[t_first], pos1 = j->b->pos[t_last];
  *lo = j->window > 0 && pos0 - j->window + 1 > 0 ? pos0 - j->window + 1 : 0;
  const int32_t end = (*lo / PA_ATTN_TILE + 1) * PA_ATTN_TILE - 1;
  *hi = end < pos1 ? end : pos1;
  return j->b->seq[t_first];
}

/* The rows item `it` takes of its k-th chunk. */
static void item_rows(const attn_job *j, const attn_item *it, int32_t k, int32_t *r0, int32_t *r1) {
  if (it->nch == 1) {
    *r0 = it->r0;
    *r1 = it->r1;
  } else {
    *r0 = 0;
    *r1 = j->sc.chunk_n[it->ch0 + k] * j->group;
  }
}

/* The lines of the first tile of KV head g for item it's k-th chunk. */
static void item_lines(const attn_job *j, const attn_item *it, int32_t k, int g, pa_attn_lines *lk,
                       pa_attn_lines *lv) {
  int32_t r0, r1, lo, hi;
  item_rows(j, it, k, &r0, &r1);
  const int32_t seq = chunk_span(j, it->ch0 + k, r0, r1, &lo, &hi);
  pa_attn_kv_lines(j->c->kv, j->layer, seq, g, lo, hi, lk, lv);
}

/* The next item with rows; false when none is left. */
static bool claim_item(attn_job *j, attn_item *it) {
  const int32_t group = j->group, n_kv = j->a.n_head_kv;
  for (;;) {
    const int32_t item = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
    if (item >= j->n_items) return false;
    if (j->all_heads) { /* runs of chunks, the last first */
      const int32_t i = j->n_items - 1 - item;
      it->ch0 = j->sc.item_chunk[i];
      it->nch = j->sc.item_chunk[i + 1] - it->ch0;
      it->g0 = 0;
      it->g1 = n_kv;
      it->r0 = 0;
      it->r1 = j->sc.chunk_n[it->ch0] * group;
      return true;
    }
    /* last chunks (the longest prefixes) first */
    const int32_t part = item % j->split;
    const int32_t ch = j->n_chunks - 1 - item / j->split / n_kv;
    const int32_t rows = j->sc.chunk_n[ch] * group;
    it->ch0 = ch;
    it->nch = 1;
    it->g0 = item / j->split % n_kv;
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
  pa_attn_prefetch(j->c->kv, j->layer, seq, it->g0, lo, hi);
}

/* Thread ith's part of the scratch: the rows' query and output pointers
 * and ranges (up to a chunk's rows), then pa_attn_rows' work. */
typedef struct {
  const float **q;
  float **out;
  int32_t *lo, *hi;
  float *sink; /* the rows' attention sinks, when the layer has them */
  void *work;
} attn_thread;

static attn_thread thread_area(const attn_job *j, int ith) {
  const int32_t rows_max = j->rows_max;
  char *mine = j->sc.threads + (size_t)ith * j->sc.per_thread;
  attn_thread a;
  a.q = (const float **)(void *)mine;
  a.out = (float **)(a.q + rows_max);
  a.lo = (int32_t *)(a.out + rows_max);
  a.hi = a.lo + rows_max;
  a.sink = (float *)(a.hi + rows_max);
  a.work = mine + align64((size_t)rows_max * (2 * sizeof(float *) + 2 * sizeof(int32_t) + sizeof(float)));
  return a;
}

static void attention_worker(void *arg, int ith, int nth) {
  attn_job *j = arg;
  pa_bctx *c = j->c;
  const pa_hparams *hp = c->hp;
  const int32_t hd = j->a.head_dim, hdv = j->a.head_dim_v, group = j->group;
  const int64_t Q = (int64_t)hp->n_head * hd, O = (int64_t)hp->n_head * hdv;
  const attn_thread area = thread_area(j, ith);
  const float **q = area.q;
  float **out = area.out;
  int32_t *lo = area.lo, *hi = area.hi;
  void *work = area.work;
  const float *sinks = c->attn_sinks ? c->attn_sinks[j->layer] : NULL;
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
          q[r - r0] = c->buf[PA_BUF_Q] + t * Q + (int64_t)h * hd;
          out[r - r0] = c->buf[PA_BUF_ATT] + t * O + (int64_t)h * hdv;
          lo[r - r0] = j->window > 0 && pos - j->window + 1 > 0 ? pos - j->window + 1 : 0;
          hi[r - r0] = pos;
          if (sinks) area.sink[r - r0] = sinks[h];
        }
        pa_attn_lines then_k = {.nr = 0}, then_v = {.nr = 0};
        if (k + 1 < cur.nch)
          item_lines(j, &cur, k + 1, g, &then_k, &then_v);
        else if (g + 1 < cur.g1)
          item_lines(j, &cur, 0, g + 1, &then_k, &then_v);
        else if (more)
          item_lines(j, &nxt, 0, nxt.g0, &then_k, &then_v);
        pa_attn_query qr = {.n_rows = r1 - r0, .q = q, .out = out, .lo = lo, .hi = hi,
                            .then_k = &then_k, .then_v = &then_v, .softcap = hp->attn_softcap,
                            .sink = sinks ? area.sink : NULL};
        pa_attn_rows(j->kt, c->kv, j->layer, seq, g, hd, hdv, hp->attn_scale, &qr, work);
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
  pa_bctx *c = j->c;
  const pa_hparams *hp = c->hp;
  const int32_t hd = j->a.head_dim, hdv = j->a.head_dim_v, group = j->group;
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
      area.q[r] = c->buf[PA_BUF_Q] + t * Q + (int64_t)(g * group + r) * hd;
      area.out[r] = NULL; /* the state goes to part */
      area.lo[r] = a;
      area.hi[r] = z;
    }
    const int32_t s0 = sg * PA_ATTN_SEG > a ? sg * PA_ATTN_SEG : a;
    pa_attn_prefetch(c->kv, j->layer, seq, g, s0, s0 + PA_ATTN_TILE - 1 < z ? s0 + PA_ATTN_TILE - 1 : z);
    pa_attn_query qr = {.n_rows = group, .q = area.q, .out = area.out, .lo = area.lo, .hi = area.hi,
                        .part = j->sc.seg_part + (int64_t)i * group * (hdv + 2), .seg = sg,
                        .softcap = hp->attn_softcap};
    pa_attn_rows(j->kt, c->kv, j->layer, seq, g, hd, hdv, hp->attn_scale, &qr, area.work);
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
  pa_bctx *c = j->c;
  const pa_hparams *hp = c->hp;
  const int32_t H = j->a.n_head_kv, nth = c->n_threads, items = j->n_chunks * H;
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
  const int32_t hdv = j->a.head_dim_v, group = j->group;
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
        pa_attn_merge_row(&M, &L, ACC, st[0], st[1], st + 2, hdv);
      }
      const float *sink = c->attn_sinks && c->attn_sinks[j->layer] ? &c->attn_sinks[j->layer][g * group + r] : NULL;
      pa_attn_normalize_row(c->buf[PA_BUF_ATT] + t * O + (int64_t)(g * group + r) * hdv, ACC, pa_attn_inv(M, L, sink),
                            hdv);
    }
    i0 = i1;
  }
  return true;
}

/* The batch's K and V rows into the cache, tokens split in contiguous
 * ranges over the threads (a store converts, and for Q8 quantizes, every
 * value: serial, it took ~5% of a 16-user decode step). */
typedef struct {
  pa_bctx *c;
  const pa_fwd_batch *b;
  int layer;
} store_job;

static void store_task(void *arg, int i, int n) {
  const store_job *j = arg;
  const pa_attn_shape a = pa_layer_attn(j->c->hp, j->layer);
  const int64_t K = (int64_t)a.n_head_kv * a.head_dim, VV = (int64_t)a.n_head_kv * a.head_dim_v;
  const int32_t t0 = (int32_t)((int64_t)j->b->n * i / n), t1 = (int32_t)((int64_t)j->b->n * (i + 1) / n);
  for (int32_t t = t0; t < t1; t++)
    pa_kv_store(j->c->kv, j->layer, j->b->seq[t], j->b->pos[t], j->c->buf[PA_BUF_K] + t * K, j->c->buf[PA_BUF_V] + t * VV);
}

void pa_cpu_kv_store_batch(pa_bctx *c, const pa_fwd_batch *b, int layer) {
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

void pa_cpu_attention(pa_bctx *c, const pa_fwd_batch *b, int layer, int32_t window) {
  const pa_hparams *hp = c->hp;
  /* the backend's tile kernels (the reference: the plain twins) */
  attn_job j = {.c = c, .b = b, .kt = c->be->attn,
                .layer = layer, .window = window, .a = pa_layer_attn(hp, layer), .rows_max = rows_max_of(hp)};
  j.group = hp->n_head / j.a.n_head_kv;
  j.sc = scratch_layout(c->scores, c->n_threads, c->n_batch, c->n_seq_max, hp);
  /* tokens in sequence order (stable: within a sequence, ascending positions) */
  int32_t *count = j.sc.count;
  memset(count, 0, ((size_t)c->n_seq_max + 1) * sizeof(int32_t));
  for (int32_t t = 0; t < b->n; t++) count[b->seq[t] + 1]++;
  /* the batch's sequences by their first block, so that sequences sharing
   * a prefix are neighbours (below, in one item: the second reads the
   * shared blocks from the cache) */
  int32_t n_seqs = 0;
  for (int32_t s = 0; s < c->n_seq_max; s++)
    if (count[s + 1] > 0) j.sc.seqs[n_seqs++] = (uint64_t)first_block(c->kv, s) << 32 | (uint32_t)s;
  qsort(j.sc.seqs, (size_t)n_seqs, sizeof(uint64_t), cmp_u64);
  for (int32_t s = 0; s < c->n_seq_max; s++) count[s + 1] += count[s];
  for (int32_t t = 0; t < b->n; t++) j.sc.order[count[b->seq[t]]++] = t;
  /* count[s] is now the end of sequence s's run */
  const int32_t per = chunk_tokens(j.group);
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
      if (run == cap || s == prev || prev < 0 || first_block(c->kv, s) != first_block(c->kv, prev)) {
        j.sc.item_chunk[j.n_items++] = ch;
        run = 0;
      }
      run++;
      prev = s;
    }
    j.sc.item_chunk[j.n_items] = j.n_chunks;
    j.split = 1;
  } else {
    const int32_t items = j.n_chunks * j.a.n_head_kv;
    const int32_t rows_min = j.group; /* a one-token chunk */
    j.split = items >= c->n_threads ? 1 : (c->n_threads + items - 1) / items;
    if (j.split > rows_min) j.split = rows_min;
    j.n_items = items * j.split;
  }
  atomic_init(&j.next, 0);
  pa_pool_run(c->pool, attention_worker, &j);
}
