/* test_attention.c: the tiled attention (model/attention.h) on a small
 * paged KV cache filled with fresh random K and V (the seed comes from the
 * clock and is printed; PASADA_TEST_SEED=N replays a run), for every kernel
 * table the CPU has (plain, avx2, avx512, as capped by PASADA_CPU), over
 * shapes with head sizes that are and are not multiples of the vector width,
 * block sizes 16, 32 and 64, GQA groups of 1 to 4, sliding windows and none,
 * scores soft-capped (Gemma 2) and not,
 * with an F32, an F16 and a Q8 cache (read back: F32 exactly, F16 rounded
 * to nearest even, Q8 within half a step of its row's scale; the exact
 * reference reads the values the cache holds):
 * 1. pa_attn_rows against a double-precision softmax(q K^T * scale) V over
 *    the same float inputs: max |out - exact| <= 1e-5 * max |v| (float dots
 *    of <= 256 terms, ~1 ulp exp, a float sum of <= 1200 weights over up
 *    to three segments (attention.h) merged; the
 *    largest error seen is printed, about 1e-7 to 1e-6 of max |v|); Q8,
 *    whose kernels round queries and weights to 16 bits, within Q8_TOL;
 *    and each SIMD table's Q8 integer kernels, next to the plain softmax,
 *    give the plain twin's bits (PASADA_TEST_SCALE below 1: that share of
 *    the 96 rows per sequence and head, 24 at least).
 * 2. Determinism: every row computed alone, and inside groups of rows of
 *    other tokens and heads in shuffled orders (so that it sits in every
 *    slot of the register blocks and next to rows with other ranges), gives
 *    the same bits.
 * 3. pa_attention through a minimal context, with 1 and 2 threads: a batch
 *    mixing three sequences (a long prefill, a short one, one decode token),
 *    then each token decoded alone in order: identical bits for every token.
 * 4. pa_attention over a decode step of 12 sequences, some sharing their
 *    first blocks (so that neighbours share items): each token's output
 *    has the bits it has alone.
 * 5. One token decoding alone over ranges of one to five segments
 *    (attention.h), on 2 threads: the bits of pa_attn_rows on one thread
 *    (pa_attention cuts the positions over the threads).
 * Returns 0 when all pass. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/base.h"
#include "backend/cpu/cpu.h"
#include "kernels/attention.h"
#include "model/model.h"
#include "quant/quant.h"
#include "test_util.h"

static int failures;
/* uniform in (-a, a), never 0 */
static float rnd_sym(float a) {
  for (;;) {
    float x = a * (float)((double)(rng() >> 11) / 4503599627370496.0 - 1.0);
    if (x != 0.0f) return x;
  }
}

typedef struct {
  int32_t hd, hdv, n_kv, group, block, window;
  float softcap; /* > 0: scores soft-capped (Gemma 2) */
  float sink;    /* != 0: each row has an attention sink of this logit (gpt-oss) */
} shape;

static const shape shapes[] = {
    {64, 64, 3, 3, 16, 0, 0, 0},     /* SmolLM2-like */
    {256, 256, 1, 4, 16, 45, 0, 0},  /* gemma3-like, sliding window */
    {40, 24, 2, 2, 32, 0, 0, 0},     /* head sizes off the vector widths, longer blocks */
    {72, 72, 1, 1, 64, 19, 0, 0},    /* no GQA, long blocks, a window inside one tile */
    {8, 12, 2, 1, 16, 0, 0, 0},
    {48, 48, 2, 2, 16, 27, 1.5f, 0}, /* gemma2-like: a window, scores soft-capped within their range */
    {24, 24, 1, 3, 32, 0, 0.75f, 0}, /* soft-capped, no window */
    {64, 64, 2, 4, 16, 0, 0, 2.5f},  /* gpt-oss-like: a sink per row, no window */
    {64, 64, 2, 2, 16, 33, 0, 1.0f}, /* a sink and a window */
};
#define N_SHAPES (int)(sizeof shapes / sizeof shapes[0])
/* A Q8 cache's kernels quantize each query row and each tile's weights to
 * 16 bits (model/attention.h): at most half a step of 1/32767 of the row's
 * largest value per term, of random sign. A score's error is then about
 * 2.5 / sqrt(hd) x sqrt(hd) x 1.5e-5 / sqrt(3) ~ 2e-5 (at most 6e-4 at hd =
 * 256 if every term erred the same way), and it moves the weights by as
 * much relatively; the weights' own rounding adds ~1.5e-5 x max |v| a term,
 * also of random sign. The largest error seen over many seeds is ~5.5e-5
 * of max |v| (printed); 2.5e-4 leaves room for the tails. This bounds the
 * accuracy, not the rounding rule (weights truncated instead of rounded
 * gave ~8e-5, inside it); a dropped scale, a misread pair or a V quant
 * read unsigned (tried: 2.4 x max |v|) are off by orders more. */
#define Q8_TOL 2.5e-4
#define N_SEQ 3
#define N_CTX 1200 /* seq 0 spans three segments (PA_ATTN_SEG) */
#define N_LAYER 2

/* What a cache of `type` must give back for a head's stored row x: F32
 * exactly; F16 rounded to nearest even; Q8 within half a step of
 * max |x| / 127 of the row (plus the float rounding of quant times step,
 * a few 1e-7 of the value), and the largest one within a few 1e-7 of
 * itself. */
static void check_read_back(pa_kv_type type, const float *x, const float *got, int32_t n, const char *what) {
  float amax = 0.0f;
  for (int32_t i = 0; i < n; i++) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
  const double step = amax / 127.0;
  for (int32_t i = 0; i < n; i++) {
    bool ok;
    if (type == PA_KV_F16)
      ok = got[i] == pa_f16_to_f32(pa_f32_to_f16(x[i]));
    else if (type == PA_KV_Q8)
      ok = fabs((double)got[i] - x[i]) <= 0.5 * step + 1e-6 * fabsf(x[i]) + 1e-30 &&
           (fabsf(x[i]) != amax || fabs(fabs((double)got[i]) - amax) <= 4e-7 * amax);
    else
      ok = got[i] == x[i];
    if (!ok && failures++ < 10) printf("FAIL %s read back %g, stored %g (%s cache)\n", what, got[i], x[i], pa_kv_type_name(type));
  }
}

static void fill_cache(pa_kv_cache *kv, const int32_t *len) {
  float *k = malloc(sizeof(float) * (size_t)kv->values->k_row[0]), *v = malloc(sizeof(float) * (size_t)kv->values->v_row[0]);
  for (int32_t s = 0; s < N_SEQ; s++)
    for (int32_t p = 0; p < len[s]; p++) {
      int32_t seq = s;
      if (pa_kv_reserve(kv, 1, &seq, &p)) {
        printf("FAIL pa_kv_reserve\n");
        exit(1);
      }
      for (int l = 0; l < N_LAYER; l++) {
        for (int64_t i = 0; i < kv->values->k_row[0]; i++) k[i] = rnd_sym(1.0f);
        for (int64_t i = 0; i < kv->values->v_row[0]; i++) v[i] = rnd_sym(2.0f);
        pa_kv_store(kv, l, s, p, k, v);
        /* read back: exact for F32, rounded to nearest even for F16 */
        for (int32_t h = 0; h < kv->shape[0].n_head_kv; h++) {
          float kb[256], vb[256];
          pa_kv_load(kv, l, s, p, h, kb, vb);
          check_read_back(kv->values->type, k + h * kv->shape[0].head_dim_k, kb, kv->shape[0].head_dim_k, "K");
          check_read_back(kv->values->type, v + h * kv->shape[0].head_dim_v, vb, kv->shape[0].head_dim_v, "V");
        }
      }
    }
  free(k);
  free(v);
}

/* softmax(cap(scale q.k)) v over [lo, hi] in double (cap: sh->softcap's soft-cap, if any) */
static void exact_row(const pa_kv_cache *kv, int layer, int32_t seq, int g, const shape *sh, float scale,
                      const float *q, int32_t lo, int32_t hi, double *out) {
  double *w = malloc(sizeof(double) * (size_t)(hi - lo + 1)), mx = sh->sink ? sh->sink : -INFINITY, sum = 0;
  float k[256], v[256];
  for (int32_t p = lo; p <= hi; p++) {
    pa_kv_load(kv, layer, seq, p, g, k, v);
    double d = 0;
    for (int i = 0; i < sh->hd; i++) d += (double)q[i] * k[i];
    w[p - lo] = d * scale;
    if (sh->softcap > 0) w[p - lo] = sh->softcap * tanh(w[p - lo] / sh->softcap);
    mx = w[p - lo] > mx ? w[p - lo] : mx;
  }
  for (int32_t p = lo; p <= hi; p++) sum += w[p - lo] = exp(w[p - lo] - mx);
  if (sh->sink) sum += exp(sh->sink - mx); /* a logit with no value */
  for (int i = 0; i < sh->hdv; i++) out[i] = 0;
  for (int32_t p = lo; p <= hi; p++) {
    pa_kv_load(kv, layer, seq, p, g, k, v);
    for (int i = 0; i < sh->hdv; i++) out[i] += w[p - lo] / sum * v[i];
  }
  free(w);
}

/* Checks 1 and 2 for one shape and table. */
static void check_rows(const pa_attn_kernels *kt, const shape *sh, pa_kv_type type, double *worst) {
  pa_kv_cache kv;
  const int32_t len[N_SEQ] = {N_CTX - 3, 70, 5};
  if (pa_kv_init_host(&kv, N_LAYER, sh->n_kv, sh->hd, sh->hdv, type, N_SEQ, N_CTX, sh->block, 0)) {
    printf("FAIL pa_kv_init\n");
    exit(1);
  }
  fill_cache(&kv, len);
  const float scale = 2.5f / sqrtf((float)sh->hd); /* peaked and flat softmaxes both occur */
  enum { MAXR = 96 };
  float sinks[MAXR];
  for (int i = 0; i < MAXR; i++) sinks[i] = sh->sink;
  /* PASADA_TEST_SCALE below 1: fewer of each sequence's last tokens (24
   * rows at least, still several register blocks of rows) */
  const int32_t n_tok = test_reps(MAXR, 24) / sh->group;
  float *q = malloc(sizeof(float) * MAXR * (size_t)sh->hd);
  float *out = malloc(sizeof(float) * MAXR * (size_t)sh->hdv);
  float *alone = malloc(sizeof(float) * MAXR * (size_t)sh->hdv);
  double *ex = malloc(sizeof(double) * (size_t)sh->hdv);
  const float *qp[MAXR];
  float *op[MAXR];
  int32_t lo[MAXR], hi[MAXR], perm[MAXR];
  void *work = pa_alloc(pa_attn_work_size(MAXR, sh->hd, sh->hdv));
  for (int32_t s = 0; s < N_SEQ; s++)
    for (int layer = 0; layer < N_LAYER; layer++)
      for (int g = 0; g < sh->n_kv; g++) {
        /* rows: the last n tokens of the sequence (up to n_tok) x the group's heads */
        const int32_t nt = len[s] < n_tok ? len[s] : n_tok, R = nt * sh->group;
        for (int32_t i = 0; i < R * sh->hd; i++) q[i] = rnd_sym(1.0f);
        for (int32_t r = 0; r < R; r++) {
          const int32_t pos = len[s] - nt + r / sh->group;
          hi[r] = pos;
          lo[r] = sh->window > 0 && pos - sh->window + 1 > 0 ? pos - sh->window + 1 : 0;
          qp[r] = q + (int64_t)r * sh->hd;
          op[r] = alone + (int64_t)r * sh->hdv;
          pa_attn_query one = {1, &qp[r], &op[r], &lo[r], &hi[r], NULL, NULL, NULL, 0, sh->softcap, sh->sink ? sinks : NULL};
          pa_attn_rows(kt, &kv, layer, s, g, sh->hd, sh->hdv, scale, &one, work);
          exact_row(&kv, layer, s, g, sh, scale, qp[r], lo[r], hi[r], ex);
          double err = 0, vmax = 2.0;
          for (int i = 0; i < sh->hdv; i++) err = fmax(err, fabs(op[r][i] - ex[i]));
          if (err / vmax > *worst) *worst = err / vmax;
          if (err > (type == PA_KV_Q8 ? Q8_TOL : 1e-5) * vmax && failures++ < 10)
            printf("FAIL %s %s hd %d group %d window %d seq %d row %d: error %.3g\n", kt->name,
                   pa_kv_type_name(type), sh->hd, sh->group, sh->window, s, r, err);
          if (type == PA_KV_Q8 && kt != pa_attn_plain()) {
            /* the table's integer kernels next to the plain softmax (each
             * table has its own exp): exact sums, so the plain twin's bits */
            pa_attn_kernels mixed = *pa_attn_plain();
            mixed.qk_q8 = kt->qk_q8;
            mixed.pv_q8 = kt->pv_q8;
            mixed.quantize_q = kt->quantize_q;
            float twin[256], mine[256];
            float *tp = twin, *mp = mine;
            pa_attn_query tq = {1, &qp[r], &tp, &lo[r], &hi[r], NULL, NULL, NULL, 0, sh->softcap, sh->sink ? sinks : NULL},
                          mq = {1, &qp[r], &mp, &lo[r], &hi[r], NULL, NULL, NULL, 0, sh->softcap, sh->sink ? sinks : NULL};
            pa_attn_rows(pa_attn_plain(), &kv, layer, s, g, sh->hd, sh->hdv, scale, &tq, work);
            pa_attn_rows(&mixed, &kv, layer, s, g, sh->hd, sh->hdv, scale, &mq, work);
            if (memcmp(twin, mine, sizeof(float) * (size_t)sh->hdv) && failures++ < 10)
              printf("FAIL %s q8 hd %d group %d window %d seq %d row %d: not the plain twin's bits\n", kt->name,
                     sh->hd, sh->group, sh->window, s, r);
          }
        }
        /* the same rows in groups: all in order, then shuffled subsets */
        for (int trial = 0; trial < 4; trial++) {
          int32_t n = R;
          for (int32_t r = 0; r < R; r++) perm[r] = r;
          if (trial > 0) {
            for (int32_t r = R - 1; r > 0; r--) {
              int32_t x = (int32_t)(rng() % (uint64_t)(r + 1)), tmp = perm[r];
              perm[r] = perm[x];
              perm[x] = tmp;
            }
            n = 1 + (int32_t)(rng() % (uint64_t)R);
          }
          const float *gq[MAXR];
          float *go[MAXR];
          int32_t glo[MAXR], ghi[MAXR];
          for (int32_t i = 0; i < n; i++) {
            gq[i] = qp[perm[i]];
            go[i] = out + (int64_t)i * sh->hdv;
            glo[i] = lo[perm[i]];
            ghi[i] = hi[perm[i]];
          }
          pa_attn_query grp = {n, gq, go, glo, ghi, NULL, NULL, NULL, 0, sh->softcap, sh->sink ? sinks : NULL};
          pa_attn_rows(kt, &kv, layer, s, g, sh->hd, sh->hdv, scale, &grp, work);
          for (int32_t i = 0; i < n; i++)
            if (memcmp(go[i], op[perm[i]], sizeof(float) * (size_t)sh->hdv) && failures++ < 10)
              printf("FAIL %s hd %d group %d window %d seq %d: row %d in a group of %d (slot %d) differs from "
                     "alone\n",
                     kt->name, sh->hd, sh->group, sh->window, s, perm[i], n, i);
        }
      }
  pa_free(work);
  free(q);
  free(out);
  free(alone);
  free(ex);
  pa_kv_free(&kv);
}

/* What the CPU backend's attention op needs, at its smallest: the shape,
 * a cache, the query, K, V and output buffers and the scratch; cur_dev
 * holds the tile kernels under test. */
static pa_cpu_backend cur_dev;
typedef struct {
  pa_hparams hp;
} tmodel;
typedef struct {
  pa_kv_cache kv;
  pa_bctx b;
  struct {
    float *q, *k, *v, *att;
  } s;
} tctx;

/* Shape sh, a cache of `type` for n_seq sequences of n_ctx positions,
 * batches of up to n_batch tokens, n_threads threads. */
static void ctx_open(tmodel *m, tctx *c, const shape *sh, pa_kv_type type, int n_threads, int32_t n_seq,
                     int32_t n_ctx, int32_t n_batch) {
  memset(m, 0, sizeof *m);
  pa_hparams *hp = &m->hp;
  hp->n_head_kv = sh->n_kv;
  hp->n_head = sh->n_kv * sh->group;
  hp->head_dim = sh->hd;
  hp->head_dim_v = sh->hdv;
  hp->attn_scale = 1.0f / sqrtf((float)sh->hd);
  hp->attn_softcap = sh->softcap;
  memset(c, 0, sizeof *c);
  if (pa_kv_init_host(&c->kv, N_LAYER, sh->n_kv, sh->hd, sh->hdv, type, n_seq, n_ctx, sh->block, 0)) exit(1);
  c->s.q = pa_alloc(sizeof(float) * (size_t)n_batch * (size_t)hp->n_head * (size_t)sh->hd);
  c->s.k = pa_alloc(sizeof(float) * (size_t)n_batch * (size_t)sh->n_kv * (size_t)sh->hd);
  c->s.v = pa_alloc(sizeof(float) * (size_t)n_batch * (size_t)sh->n_kv * (size_t)sh->hdv);
  c->s.att = pa_alloc(sizeof(float) * (size_t)n_batch * (size_t)hp->n_head * (size_t)sh->hdv);
  pa_bctx *b = &c->b;
  b->be = &cur_dev;
  b->hp = hp;
  b->kv = &c->kv;
  b->n_seq_max = n_seq;
  b->n_batch = n_batch;
  b->n_threads = n_threads;
  b->pool = n_threads > 1 ? pa_pool_create(n_threads) : NULL;
  b->buf[PA_BUF_Q] = c->s.q;
  b->buf[PA_BUF_K] = c->s.k;
  b->buf[PA_BUF_V] = c->s.v;
  b->buf[PA_BUF_ATT] = c->s.att;
  b->scores = pa_alloc(pa_cpu_attention_scratch_size(n_threads, n_batch, n_seq, hp));
}

static void ctx_close(tctx *c) {
  pa_free(c->s.q);
  pa_free(c->s.k);
  pa_free(c->s.v);
  pa_free(c->s.att);
  pa_free(c->b.scores);
  pa_kv_free(&c->kv);
  pa_pool_free(c->b.pool);
}

/* Check 3: pa_attention on a minimal context. */
static void check_batch(const shape *sh, pa_kv_type type, int n_threads) {
  tmodel m;
  tctx c;
  ctx_open(&m, &c, sh, type, n_threads, N_SEQ, N_CTX, 160);
  const pa_hparams *hp = &m.hp;
  const int64_t Q = (int64_t)hp->n_head * sh->hd, K = (int64_t)sh->n_kv * sh->hd;
  const int64_t V = (int64_t)sh->n_kv * sh->hdv, O = (int64_t)hp->n_head * sh->hdv;
  /* the batch: seq 0 positions 0..129, seq 2 positions 0..21 and seq 1
   * position 0, interleaved near the start */
  enum { N = 153 };
  int32_t pos[N], seq[N], tok[N] = {0};
  int32_t n = 0, next[N_SEQ] = {0};
  for (int32_t i = 0; i < 130; i++) {
    if (i == 3) seq[n] = 1, pos[n++] = next[1]++;
    if (i % 5 == 1 && next[2] < 22) seq[n] = 2, pos[n++] = next[2]++;
    seq[n] = 0, pos[n++] = next[0]++;
  }
  while (next[2] < 22) seq[n] = 2, pos[n++] = next[2]++;
  if (n != N) {
    printf("FAIL test batch has %d tokens\n", n);
    exit(1);
  }
  float *qa = malloc(sizeof(float) * (size_t)(N * Q)), *ka = malloc(sizeof(float) * (size_t)(N * K));
  float *va = malloc(sizeof(float) * (size_t)(N * V)), *batched = malloc(sizeof(float) * (size_t)(N * O));
  for (int64_t i = 0; i < N * Q; i++) qa[i] = rnd_sym(1.0f);
  for (int64_t i = 0; i < N * K; i++) ka[i] = rnd_sym(1.0f);
  for (int64_t i = 0; i < N * V; i++) va[i] = rnd_sym(1.0f);
  for (int layer = 0; layer < N_LAYER; layer++) {
    const int32_t window = layer == 1 ? 37 : 0;
    if (pa_kv_reserve(&c.kv, N, seq, pos)) exit(1);
    memcpy(c.s.q, qa, sizeof(float) * (size_t)(N * Q));
    memcpy(c.s.k, ka, sizeof(float) * (size_t)(N * K));
    memcpy(c.s.v, va, sizeof(float) * (size_t)(N * V));
    pa_fwd_batch b = {.n = N, .token = tok, .pos = pos, .seq = seq};
    pa_cpu_kv_store_batch(&c.b, &b, layer);
    pa_cpu_attention(&c.b, &b, layer, window);
    memcpy(batched, c.s.att, sizeof(float) * (size_t)(N * O));
    /* each token alone, in batch order (positions ascend within a sequence) */
    for (int32_t t = 0; t < N; t++) {
      memcpy(c.s.q, qa + t * Q, sizeof(float) * (size_t)Q);
      memcpy(c.s.k, ka + t * K, sizeof(float) * (size_t)K);
      memcpy(c.s.v, va + t * V, sizeof(float) * (size_t)V);
      pa_fwd_batch one = {.n = 1, .token = tok, .pos = &pos[t], .seq = &seq[t]};
      pa_cpu_kv_store_batch(&c.b, &one, layer);
      pa_cpu_attention(&c.b, &one, layer, window);
      if (memcmp(c.s.att, batched + t * O, sizeof(float) * (size_t)O) && failures++ < 10)
        printf("FAIL %s pa_attention hd %d group %d, %d threads, layer %d: token %d (seq %d pos %d) differs "
               "batched vs alone\n",
               cur_dev.attn->name, sh->hd, sh->group, n_threads, layer, t, seq[t], pos[t]);
    }
  }
  free(qa);
  free(ka);
  free(va);
  free(batched);
  ctx_close(&c);
}

/* Check 4: a decode step of many sequences of which some share their
 * first blocks (the same tokens: the cache makes them one block), so that
 * pa_attention puts sharing neighbours in one item: each token's output
 * has the bits it has decoded alone. */
enum { SH_SEQ = 12, SH_KINDS = 4, SH_PREFIX = 70 }; /* a whole first block of 64 */
static void check_shared(const shape *sh, pa_kv_type type, int n_threads) {
  tmodel m;
  tctx c;
  ctx_open(&m, &c, sh, type, n_threads, SH_SEQ, 128, SH_SEQ);
  const pa_hparams *hp = &m.hp;
  const int64_t Q = (int64_t)hp->n_head * sh->hd, K = (int64_t)sh->n_kv * sh->hd;
  const int64_t V = (int64_t)sh->n_kv * sh->hdv, O = (int64_t)hp->n_head * sh->hdv;
  /* sequence s: SH_PREFIX tokens of prompt s % SH_KINDS, then 3 + s of
   * its own; each position's K and V fresh (a twin block's are dropped
   * for the registered block's) */
  float *k = malloc(sizeof(float) * (size_t)K), *v = malloc(sizeof(float) * (size_t)V);
  int32_t len[SH_SEQ];
  for (int32_t s = 0; s < SH_SEQ; s++) len[s] = SH_PREFIX + 3 + s;
  for (int32_t p = 0; p < SH_PREFIX + 3 + SH_SEQ; p++)
    for (int32_t s = 0; s < SH_SEQ; s++) {
      if (p >= len[s]) continue;
      int32_t seq = s, pos = p, tok = p < SH_PREFIX ? 1000 * (s % SH_KINDS) + p : 100000 + 100 * s + p;
      if (pa_kv_reserve(&c.kv, 1, &seq, &pos)) exit(1);
      for (int l = 0; l < N_LAYER; l++) {
        for (int64_t i = 0; i < K; i++) k[i] = rnd_sym(1.0f);
        for (int64_t i = 0; i < V; i++) v[i] = rnd_sym(2.0f);
        pa_kv_store(&c.kv, l, s, p, k, v);
      }
      pa_kv_commit(&c.kv, 1, &tok, &seq, &pos);
    }
  for (int32_t s = SH_KINDS; s < SH_SEQ; s++)
    if (c.kv.table[s][0] != c.kv.table[s % SH_KINDS][0] && failures++ < 10)
      printf("FAIL test setup: sequences %d and %d do not share their first block\n", s, s % SH_KINDS);
  /* one decode step: every sequence's next position, in sequence order */
  int32_t pos[SH_SEQ], seq[SH_SEQ], tok[SH_SEQ] = {0};
  for (int32_t s = 0; s < SH_SEQ; s++) seq[s] = s, pos[s] = len[s];
  float *qa = malloc(sizeof(float) * (size_t)(SH_SEQ * Q)), *ka = malloc(sizeof(float) * (size_t)(SH_SEQ * K));
  float *va = malloc(sizeof(float) * (size_t)(SH_SEQ * V)), *batched = malloc(sizeof(float) * (size_t)(SH_SEQ * O));
  for (int64_t i = 0; i < SH_SEQ * Q; i++) qa[i] = rnd_sym(1.0f);
  for (int64_t i = 0; i < SH_SEQ * K; i++) ka[i] = rnd_sym(1.0f);
  for (int64_t i = 0; i < SH_SEQ * V; i++) va[i] = rnd_sym(1.0f);
  if (pa_kv_reserve(&c.kv, SH_SEQ, seq, pos)) exit(1);
  for (int layer = 0; layer < N_LAYER; layer++) {
    const int32_t window = layer == 1 ? 23 : 0;
    memcpy(c.s.q, qa, sizeof(float) * (size_t)(SH_SEQ * Q));
    memcpy(c.s.k, ka, sizeof(float) * (size_t)(SH_SEQ * K));
    memcpy(c.s.v, va, sizeof(float) * (size_t)(SH_SEQ * V));
    pa_fwd_batch b = {.n = SH_SEQ, .token = tok, .pos = pos, .seq = seq};
    pa_cpu_kv_store_batch(&c.b, &b, layer);
    pa_cpu_attention(&c.b, &b, layer, window);
    memcpy(batched, c.s.att, sizeof(float) * (size_t)(SH_SEQ * O));
    for (int32_t t = 0; t < SH_SEQ; t++) {
      memcpy(c.s.q, qa + t * Q, sizeof(float) * (size_t)Q);
      pa_fwd_batch one = {.n = 1, .token = tok, .pos = &pos[t], .seq = &seq[t]};
      pa_cpu_attention(&c.b, &one, layer, window);
      if (memcmp(c.s.att, batched + t * O, sizeof(float) * (size_t)O) && failures++ < 10)
        printf("FAIL %s pa_attention hd %d group %d, %d threads, layer %d: sequence %d sharing its prefix "
               "differs batched vs alone\n",
               cur_dev.attn->name, sh->hd, sh->group, n_threads, layer, t);
    }
  }
  free(k);
  free(v);
  free(qa);
  free(ka);
  free(va);
  free(batched);
  ctx_close(&c);
}

/* Check 5: one token decoding alone at positions whose range spans one to
 * five segments (PA_ATTN_SEG), on 2 threads, with and without a window
 * across a segment's edge: pa_attention, which cuts a KV head's positions
 * by segment over the threads when the token's KV heads would leave one
 * idle (3 or 1 of them on 2 threads), gives the bits pa_attn_rows gives
 * on one thread, segment after segment. */
static void check_segments(const shape *sh, pa_kv_type type) {
  tmodel m;
  tctx c;
  enum { LEN = 2100 }; /* five segments: one KV head's make enough items to cut */
  ctx_open(&m, &c, sh, type, 2, 1, LEN + 16, 4);
  const pa_hparams *hp = &m.hp;
  float *k = malloc(sizeof(float) * (size_t)c.kv.values->k_row[0]), *v = malloc(sizeof(float) * (size_t)c.kv.values->v_row[0]);
  for (int32_t p = 0; p < LEN; p++) {
    int32_t s0 = 0;
    if (pa_kv_reserve(&c.kv, 1, &s0, &p)) exit(1);
    for (int l = 0; l < N_LAYER; l++) {
      for (int64_t i = 0; i < c.kv.values->k_row[0]; i++) k[i] = rnd_sym(1.0f);
      for (int64_t i = 0; i < c.kv.values->v_row[0]; i++) v[i] = rnd_sym(2.0f);
      pa_kv_store(&c.kv, l, 0, p, k, v);
    }
  }
  const int64_t Q = (int64_t)hp->n_head * sh->hd, O = (int64_t)hp->n_head * sh->hdv;
  float *ref = malloc(sizeof(float) * (size_t)O);
  void *work = pa_alloc(pa_attn_work_size(sh->group, sh->hd, sh->hdv));
  const int32_t probes[] = {LEN - 1, 2048, 2047, 1030, 600, 512, 511, 530};
  /* a shape with sinks: a different one per layer and head, merged after
   * the segments on both paths */
  float sink_vals[N_LAYER][16];
  const float *sink_layers[N_LAYER];
  for (int l = 0; l < N_LAYER; l++) {
    for (int h = 0; h < 16; h++) sink_vals[l][h] = sh->sink + 0.25f * (float)h - 0.5f * (float)l;
    sink_layers[l] = sink_vals[l];
  }
  if (sh->sink) c.b.attn_sinks = sink_layers;
  int32_t tok = 0, seq0 = 0;
  for (int layer = 0; layer < N_LAYER; layer++)
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
      const int32_t pos = probes[i], window = layer == 1 ? 45 : 0;
      for (int64_t e = 0; e < Q; e++) c.s.q[e] = rnd_sym(1.0f);
      pa_fwd_batch one = {.n = 1, .token = &tok, .pos = &pos, .seq = &seq0};
      pa_cpu_attention(&c.b, &one, layer, window);
      const int32_t lo = window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
      for (int g = 0; g < sh->n_kv; g++) {
        const float *qp[4];
        float *op[4];
        int32_t los[4], his[4];
        for (int r = 0; r < sh->group; r++) {
          qp[r] = c.s.q + (int64_t)(g * sh->group + r) * sh->hd;
          op[r] = ref + (int64_t)(g * sh->group + r) * sh->hdv;
          los[r] = lo;
          his[r] = pos;
        }
        pa_attn_query qr = {.n_rows = sh->group, .q = qp, .out = op, .lo = los, .hi = his,
                            .softcap = hp->attn_softcap,
                            .sink = sh->sink ? &sink_vals[layer][g * sh->group] : NULL};
        pa_attn_rows(cur_dev.attn, &c.kv, layer, 0, g, sh->hd, sh->hdv, hp->attn_scale, &qr, work);
      }
      if (memcmp(c.s.att, ref, sizeof(float) * (size_t)O) && failures++ < 10)
        printf("FAIL %s pa_attention hd %d group %d, 2 threads, layer %d, position %d (%s cache): the "
               "segments cut over the threads differ from one thread's\n",
               cur_dev.attn->name, sh->hd, sh->group, layer, pos, pa_kv_type_name(type));
    }
  free(k);
  free(v);
  free(ref);
  pa_free(work);
  ctx_close(&c);
}

int main(void) {
  test_seed("test_attention");
  {
    pa_kv_cache bad; /* K is stored in 16-position lanes */
    if (pa_kv_init_host(&bad, 1, 1, 8, 8, PA_KV_F16, 1, 64, 7, 0) == PASADA_OK) {
      printf("FAIL a KV block size of 7 was accepted\n");
      failures++;
      pa_kv_free(&bad);
    }
  }
  const pa_attn_kernels *tables[] = {pa_attn_plain(), pa_attn_avx2(), pa_attn_avx512()};
  for (int k = 0; k < 3; k++) {
    if (!tables[k]) continue;
    double worst = 0;
    for (int ty = 0; ty < 3; ty++) {
      const pa_kv_type type = ty == 2 ? PA_KV_Q8 : ty ? PA_KV_F16 : PA_KV_F32;
      worst = 0;
      for (int s = 0; s < N_SHAPES; s++) check_rows(tables[k], &shapes[s], type, &worst);
      printf("  %-7s %s cache: max |out - exact| / max |v|: %.2e\n", tables[k]->name, pa_kv_type_name(type), worst);
      cur_dev.attn = tables[k];
      for (int s = 0; s < N_SHAPES; s++) {
        check_batch(&shapes[s], type, 1);
        check_batch(&shapes[s], type, 2);
        check_shared(&shapes[s], type, 1);
        check_shared(&shapes[s], type, 2);
        if (shapes[s].group <= 4) check_segments(&shapes[s], type);
      }
    }
  }
  printf("%s: %d failure(s)\n", failures ? "FAIL" : "ok", failures);
  return failures ? 1 : 0;
}
