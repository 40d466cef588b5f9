/* layers.c: the building blocks every architecture's forward pass uses:
 * embedding lookup, norms, linear layers, RoPE, attention over the KV cache,
 * the gated FFN and the output head. Work is split over the context's
 * thread pool; nothing here allocates. */
#include <math.h>
#include <string.h>

#include "base/base.h"
#include "kernels/ops.h"
#include "model/model.h"
#include "runtime/kv_cache.h"

void pa_embed(struct pa_context *c, const pa_fwd_batch *b, float scale) {
  int64_t E = c->model->hp.n_embd;
  for (int32_t t = 0; t < b->n; t++) {
    float *x = c->s.x + t * E;
    pa_matrix_get_row(&c->model->tok_embd, b->token[t], x);
    if (scale != 1.0f) pa_scale(x, scale, E);
  }
}

/* Row-wise ops (norms, residual adds, RoPE) of a batch of several tokens
 * spread over the pool in contiguous ranges of tokens: each row's result
 * is the same whichever thread computes it. Serial, at 16 users they kept
 * the other threads waiting ~5% of a decode step; fewer than PA_ROWS_PAR
 * tokens stay on the calling thread (a pool job costs more than they do). */

typedef struct {
  struct pa_context *c;
  const pa_fwd_batch *b;
  float *out, *x;
  const float *in, *w;
  int64_t n;
  int32_t n_tok;
  int op; /* 0 norm, 1 add, 2 rope, 3 rope (sliding window tables) */
} rows_job;

static void rope_rows(struct pa_context *c, int32_t t0, int32_t t1, bool swa);

static void rows_task(void *arg, int i, int n_tasks) {
  const rows_job *j = arg;
  const int32_t t0 = (int32_t)((int64_t)j->n_tok * i / n_tasks);
  const int32_t t1 = (int32_t)((int64_t)j->n_tok * (i + 1) / n_tasks);
  const float eps = j->c->model->hp.norm_eps;
  switch (j->op) {
    case 0:
      for (int32_t t = t0; t < t1; t++) pa_rmsnorm(j->out + t * j->n, j->in + t * j->n, j->w, j->n, eps);
      break;
    case 1: pa_add(j->x + t0 * j->n, j->in + t0 * j->n, (int64_t)(t1 - t0) * j->n); break;
    default: rope_rows(j->c, t0, t1, j->op == 3); break;
  }
}

static void run_rows(struct pa_context *c, rows_job *j) {
  if (j->n_tok < PA_ROWS_PAR || !c->pool) {
    rows_task(j, 0, 1);
    return;
  }
  const int32_t n_tasks = j->n_tok < 2 * c->n_threads ? j->n_tok : 2 * c->n_threads;
  pa_pool_run_tasks(c->pool, rows_task, j, n_tasks);
}

void pa_norm_rows(struct pa_context *c, float *out, const float *in, const float *w, int32_t n_tok,
                  int64_t n) {
  rows_job j = {.c = c, .out = out, .in = in, .w = w, .n = n, .n_tok = n_tok, .op = 0};
  run_rows(c, &j);
}

void pa_add_rows(struct pa_context *c, float *x, const float *y, int32_t n_tok, int64_t n) {
  rows_job j = {.c = c, .x = x, .in = y, .n = n, .n_tok = n_tok, .op = 1};
  run_rows(c, &j);
}

void pa_linear(struct pa_context *c, const pa_matrix *w, const float *x, float *y, int32_t n_tok) {
  if (c->reference_path) {
    pa_matmul_exact(c->pool, w, x, w->cols, y, w->rows, n_tok, c->s.work);
    return;
  }
  pa_matmul(c->pool, w, x, w->cols, y, w->rows, n_tok, c->s.work);
}

typedef struct {
  float *r;
  const float *y;
  int64_t n; /* row length */
  int32_t n_tok;
} add_job;

static void add_rows_epi(void *arg, int m, int64_t r0, int64_t r1) {
  (void)m;
  const add_job *a = arg;
  for (int32_t t = 0; t < a->n_tok; t++) pa_add(a->r + t * a->n + r0, a->y + t * a->n + r0, r1 - r0);
}

void pa_linear_add(struct pa_context *c, const pa_matrix *w, const float *x, float *y, float *r,
                   int32_t n_tok) {
  if (c->reference_path) {
    pa_linear(c, w, x, y, n_tok);
    pa_add_rows(c, r, y, n_tok, w->rows);
    return;
  }
  add_job a = {r, y, w->rows, n_tok};
  const pa_matmul_fuse f = {.epi = add_rows_epi, .epi_arg = &a};
  const pa_matmul_out out = {w, y, w->rows};
  pa_matmul_multi_fused(c->pool, &out, 1, x, w->cols, n_tok, c->s.work, &f);
}

void pa_qkv(struct pa_context *c, const pa_layer *L, const float *x, int32_t n_tok) {
  if (c->reference_path) {
    pa_linear(c, &L->wq, x, c->s.q, n_tok);
    pa_linear(c, &L->wk, x, c->s.k, n_tok);
    pa_linear(c, &L->wv, x, c->s.v, n_tok);
    return;
  }
  const pa_matmul_out outs[3] = {
      {&L->wq, c->s.q, L->wq.rows}, {&L->wk, c->s.k, L->wk.rows}, {&L->wv, c->s.v, L->wv.rows}};
  pa_matmul_multi(c->pool, outs, 3, x, L->wq.cols, n_tok, c->s.work);
}

void pa_add_bias(float *y, const float *bias, int32_t n_tok, int64_t n) {
  if (!bias) return;
  for (int32_t t = 0; t < n_tok; t++) pa_add(y + t * n, bias, n);
}

void pa_head_norm(struct pa_context *c, float *x, const float *w, int32_t n_tok, int n_heads) {
  int hd = c->model->hp.head_dim;
  for (int64_t i = 0; i < (int64_t)n_tok * n_heads; i++)
    pa_rmsnorm(x + i * hd, x + i * hd, w, hd, c->model->hp.norm_eps);
}

void pa_rope_prepare(struct pa_context *c, const pa_fwd_batch *b) {
  const pa_hparams *hp = &c->model->hp;
  int half = hp->rope_dim / 2;
  for (int32_t t = 0; t < b->n; t++) {
    pa_rope_table(c->s.rope_cos + t * half, c->s.rope_sin + t * half, hp->rope_dim, b->pos[t],
                  hp->rope_base, hp->rope_freq_scale, c->model->rope_freqs);
    if (hp->sliding_window)
      pa_rope_table(c->s.rope_cos_swa + t * half, c->s.rope_sin_swa + t * half, hp->rope_dim, b->pos[t],
                    hp->rope_base_swa, hp->rope_freq_scale_swa, NULL);
  }
}

void pa_rope_apply(struct pa_context *c, const pa_fwd_batch *b, bool swa) {
  rows_job j = {.c = c, .b = b, .n_tok = b->n, .op = swa ? 3 : 2};
  run_rows(c, &j);
}

static void rope_rows(struct pa_context *c, int32_t t0, int32_t t1, bool swa) {
  const pa_hparams *hp = &c->model->hp;
  int half = hp->rope_dim / 2;
  const float *ct = swa ? c->s.rope_cos_swa : c->s.rope_cos;
  const float *st = swa ? c->s.rope_sin_swa : c->s.rope_sin;
  int64_t Q = (int64_t)hp->n_head * hp->head_dim, K = (int64_t)hp->n_head_kv * hp->head_dim;
  for (int32_t t = t0; t < t1; t++) {
    pa_rope(c->s.q + t * Q, hp->n_head, hp->head_dim, hp->rope_dim, ct + t * half, st + t * half,
            hp->rope_neox);
    pa_rope(c->s.k + t * K, hp->n_head_kv, hp->head_dim, hp->rope_dim, ct + t * half, st + t * half,
            hp->rope_neox);
  }
}

/* ---- the attention block's inputs (pa_attn_input) ---- */

/* What one task does with rows [r0, r1) of q (m 0), k (1) or v (2), whole
 * heads, for every token, once the product has computed them: what the ops
 * would do one after another over all rows (the same functions, so the same
 * bits): the bias, the per-head norm, RoPE, the store into the cache. */
typedef struct {
  struct pa_context *c;
  const pa_fwd_batch *b;
  const pa_layer *L;
  int layer;
  bool swa;
} attn_in_job;

static void attn_in_rows(void *arg, int m, int64_t r0, int64_t r1) {
  const attn_in_job *j = arg;
  struct pa_context *c = j->c;
  const pa_hparams *hp = &c->model->hp;
  const pa_layer *L = j->L;
  const int hd = m == 2 ? hp->head_dim_v : hp->head_dim, half = hp->rope_dim / 2;
  const int h0 = (int)(r0 / hd), h1 = (int)(r1 / hd);
  const int64_t stride = m == 0 ? L->wq.rows : m == 1 ? L->wk.rows : L->wv.rows;
  float *y = m == 0 ? c->s.q : m == 1 ? c->s.k : c->s.v;
  const float *bias = m == 0 ? L->bq : m == 1 ? L->bk : L->bv;
  const float *hnorm = m == 0 ? L->q_norm : m == 1 ? L->k_norm : NULL;
  const float *ct = j->swa ? c->s.rope_cos_swa : c->s.rope_cos;
  const float *st = j->swa ? c->s.rope_sin_swa : c->s.rope_sin;
  for (int32_t t = 0; t < j->b->n; t++) {
    float *row = y + t * stride;
    if (bias) pa_add(row + r0, bias + r0, r1 - r0);
    for (int h = h0; h < h1; h++) {
      float *head = row + (int64_t)h * hd;
      if (hnorm) pa_rmsnorm(head, head, hnorm, hd, hp->norm_eps);
      if (m < 2) pa_rope(head, 1, hd, hp->rope_dim, ct + t * half, st + t * half, hp->rope_neox);
      if (m == 1) pa_kv_store_k(&c->kv, j->layer, j->b->seq[t], j->b->pos[t], h, head);
      if (m == 2) pa_kv_store_v(&c->kv, j->layer, j->b->seq[t], j->b->pos[t], h, head);
    }
  }
}

static int64_t gcd64(int64_t a, int64_t b) {
  while (b) {
    const int64_t r = a % b;
    a = b, b = r;
  }
  return a;
}

void pa_attn_input(struct pa_context *c, const pa_fwd_batch *b, const pa_layer *L, int l,
                   bool swa) {
  const pa_hparams *hp = &c->model->hp;
  const int32_t n = b->n;
  pa_scratch *s = &c->s;
  if (!c->reference_path && pa_matmul_can_norm(&L->wq) && pa_matmul_can_norm(&L->wk) &&
      pa_matmul_can_norm(&L->wv)) {
    /* rows per task in whole heads of q, k and v, and in 16s */
    int64_t grain = 16;
    grain = grain / gcd64(grain, hp->head_dim) * hp->head_dim;
    grain = grain / gcd64(grain, hp->head_dim_v) * hp->head_dim_v;
    attn_in_job j = {c, b, L, l, swa};
    const pa_matmul_fuse f = {.norm_w = L->attn_norm,
                              .norm_eps = hp->norm_eps,
                              .epi = attn_in_rows,
                              .epi_arg = &j,
                              .grain = grain};
    const pa_matmul_out outs[3] = {
        {&L->wq, s->q, L->wq.rows}, {&L->wk, s->k, L->wk.rows}, {&L->wv, s->v, L->wv.rows}};
    PA_PROF(c, b, PA_OP_QKV, l, n,
            pa_matmul_multi_fused(c->pool, outs, 3, s->x, hp->n_embd, n, s->work, &f));
    return;
  }
  /* op by op: the reference path, and matrices whose activations stay floats */
  PA_PROF(c, b, PA_OP_ATTN_NORM, l, n, pa_norm_rows(c, s->xb, s->x, L->attn_norm, n, hp->n_embd));
  PA_PROF(c, b, PA_OP_QKV, l, n, pa_qkv(c, L, s->xb, n));
  if (L->bq || L->bk || L->bv) {
    PA_PROF(c, b, PA_OP_QKV_BIAS, l, n, {
      pa_add_bias(s->q, L->bq, n, L->wq.rows);
      pa_add_bias(s->k, L->bk, n, L->wk.rows);
      pa_add_bias(s->v, L->bv, n, L->wv.rows);
    });
  }
  if (L->q_norm) PA_PROF(c, b, PA_OP_Q_NORM, l, n, pa_head_norm(c, s->q, L->q_norm, n, hp->n_head));
  if (L->k_norm)
    PA_PROF(c, b, PA_OP_K_NORM, l, n, pa_head_norm(c, s->k, L->k_norm, n, hp->n_head_kv));
  PA_PROF(c, b, PA_OP_ROPE, l, n, pa_rope_apply(c, b, swa));
  PA_PROF(c, b, PA_OP_KV_STORE, l, n, pa_kv_store_batch(c, b, l));
}

void pa_ffn(struct pa_context *c, const pa_layer *L, const float *x, const float *norm, float *out,
            float *resid, int32_t n_tok) {
  const pa_hparams *hp = &c->model->hp;
  int64_t F = hp->n_ff;
  int l = (int)(L - c->model->layers); /* for the profiler */
  const bool silu = hp->act == PA_ACT_SILU;
  const bool fuse =
      !c->reference_path && pa_matmul_can_norm(&L->w_gate) && pa_matmul_can_norm(&L->w_up);
  if (!fuse) { /* the norm on its own, into xb */
    PA_PROF(c, NULL, PA_OP_FFN_NORM, l, n_tok,
            pa_norm_rows(c, c->s.xb, x, norm, n_tok, hp->n_embd));
    x = c->s.xb;
  }
  if (c->reference_path) {
    PA_PROF(c, NULL, PA_OP_GATE_UP, l, n_tok, {
      pa_linear(c, &L->w_gate, x, c->s.h1, n_tok);
      pa_linear(c, &L->w_up, x, c->s.h2, n_tok);
      const pa_ops_kernels *plain = pa_ops_plain(); /* the reference path's twin */
      (silu ? plain->silu_mul : plain->gelu_tanh_mul)(c->s.h1, c->s.h2, (int64_t)n_tok * F);
    });
  } else {
    /* with the norm as the activations are quantized, when fused */
    const pa_matmul_fuse f = {.norm_w = fuse ? norm : NULL, .norm_eps = hp->norm_eps};
    PA_PROF(
        c, NULL, PA_OP_GATE_UP, l, n_tok,
        pa_matmul_gated_fused(c->pool, &L->w_gate, &L->w_up, silu ? pa_silu_mul : pa_gelu_tanh_mul,
                              x, L->w_gate.cols, c->s.h1, c->s.h2, F, n_tok, c->s.work, &f));
  }
  if (resid)
    PA_PROF(c, NULL, PA_OP_DOWN, l, n_tok, pa_linear_add(c, &L->w_down, c->s.h1, out, resid, n_tok));
  else
    PA_PROF(c, NULL, PA_OP_DOWN, l, n_tok, pa_linear(c, &L->w_down, c->s.h1, out, n_tok));
}

/* the output tokens' hidden states, normalised, gathered into xb */
static void output_norm(struct pa_context *c, const pa_fwd_batch *b) {
  const struct pa_model *m = c->model;
  int64_t E = m->hp.n_embd;
  for (int32_t i = 0; i < b->n_out; i++)
    pa_rmsnorm(c->s.xb + i * E, c->s.x + (int64_t)b->out_idx[i] * E, m->output_norm, E, m->hp.norm_eps);
}

static void output_logits(struct pa_context *c, const pa_fwd_batch *b) {
  const struct pa_model *m = c->model;
  int64_t E = m->hp.n_embd;
  for (int32_t i0 = 0; i0 < b->n_out; i0 += c->n_batch) {
    int32_t n = b->n_out - i0 < c->n_batch ? b->n_out - i0 : c->n_batch;
    pa_linear(c, &m->output, c->s.xb + i0 * E, c->logits + (size_t)i0 * m->hp.n_vocab, n);
  }
}

void pa_output(struct pa_context *c, const pa_fwd_batch *b) {
  if (b->n_out == 0) return;
  PA_PROF(c, b, PA_OP_OUTPUT_NORM, -1, b->n_out, output_norm(c, b));
  PA_PROF(c, b, PA_OP_OUTPUT, -1, b->n_out, output_logits(c, b));
}
