/* cpu.c: the CPU backend: the ops of backend.h on host memory, run on the
 * context's thread pool with the kernels of src/kernels. A product and
 * the ops around it run as one pool job where the matrices allow
 * (kernels.h, pa_matmul_multi_fused): the input norm as the activations
 * are quantized, the bias, head norms, RoPE and KV stores per task over
 * whole heads as they come out, the residual add while the rows are in
 * cache. Otherwise, and always in the reference backend (src/backend/ref),
 * op after op. The same bits either way. Nothing here allocates after
 * context_init. */
#include "backend/cpu/cpu.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "model/model.h"

/* ---- row-wise ops split over the pool ----
 * Norms, residual adds and RoPE of a batch of several tokens are spread
 * over the pool in contiguous ranges of tokens: each row's result is the
 * same whichever thread computes it. Serial, at 16 users they kept the
 * other threads waiting ~5% of a decode step; fewer than PA_ROWS_PAR
 * tokens stay on the calling thread (a pool job costs more than they do). */

typedef enum { ROWS_NORM, ROWS_ADD, ROWS_ROPE, ROWS_SCALE } rows_op;

typedef struct {
  pa_bctx *c;
  float *out;
  const float *in, *w;
  int64_t n;
  int32_t n_tok;
  rows_op op;
  const float *cos_t, *sin_t; /* ROWS_ROPE: the tables; out = q rows, (float *)in = k rows */
  pa_attn_shape a;            /* ROWS_ROPE: the layer's heads */
  int rope_dim;               /* ROWS_ROPE: the tables' rotated dims */
  float s;                    /* ROWS_SCALE: out *= s */
} rows_job;

static void rope_rows(const rows_job *j, int32_t t0, int32_t t1) {
  const pa_hparams *hp = j->c->hp;
  const pa_ops_kernels *ops = j->c->be->ex.ops;
  const int half = j->rope_dim / 2, hd = j->a.head_dim;
  const int64_t Q = (int64_t)hp->n_head * hd, K = (int64_t)j->a.n_head_kv * hd;
  for (int32_t t = t0; t < t1; t++) {
    if (j->out)
      ops->rope(j->out + t * Q, hp->n_head, hd, j->rope_dim, j->cos_t + t * half, j->sin_t + t * half,
                hp->rope_neox);
    if (j->in)
      ops->rope((float *)j->in + t * K, j->a.n_head_kv, hd, j->rope_dim, j->cos_t + t * half,
                j->sin_t + t * half, hp->rope_neox);
  }
}

static void rows_task(void *arg, int i, int n_tasks) {
  const rows_job *j = arg;
  const int32_t t0 = (int32_t)((int64_t)j->n_tok * i / n_tasks);
  const int32_t t1 = (int32_t)((int64_t)j->n_tok * (i + 1) / n_tasks);
  const pa_ops_kernels *ops = j->c->be->ex.ops;
  switch (j->op) {
    case ROWS_NORM:
      for (int32_t t = t0; t < t1; t++)
        ops->rmsnorm(j->out + t * j->n, j->in + t * j->n, j->w, j->n, j->c->hp->norm_eps);
      break;
    case ROWS_ADD: ops->add(j->out + t0 * j->n, j->in + t0 * j->n, (int64_t)(t1 - t0) * j->n); break;
    case ROWS_ROPE: rope_rows(j, t0, t1); break;
    case ROWS_SCALE: pa_scale(j->out + t0 * j->n, j->s, (int64_t)(t1 - t0) * j->n); break;
  }
}

static void run_rows(pa_bctx *c, rows_job *j) {
  if (j->n_tok < PA_ROWS_PAR || !c->pool) {
    rows_task(j, 0, 1);
    return;
  }
  const int32_t n_tasks = j->n_tok < 2 * c->n_threads ? j->n_tok : 2 * c->n_threads;
  pa_pool_run_tasks(c->pool, rows_task, j, n_tasks);
}

static void norm_rows(pa_bctx *c, float *out, const float *in, const float *w, int64_t n, int32_t n_tok) {
  rows_job j = {.c = c, .out = out, .in = in, .w = w, .n = n, .n_tok = n_tok, .op = ROWS_NORM};
  run_rows(c, &j);
}

static void add_rows(pa_bctx *c, float *x, const float *y, int64_t n, int32_t n_tok) {
  rows_job j = {.c = c, .out = x, .in = y, .n = n, .n_tok = n_tok, .op = ROWS_ADD};
  run_rows(c, &j);
}

/* ---- memory ---- */

static void op_upload(pa_bctx *c, pa_buf dst, int64_t off, const float *src, int64_t n) {
  memcpy(c->buf[dst] + off, src, (size_t)n * sizeof(float));
}

static void op_download(pa_bctx *c, pa_buf src, int64_t off, float *dst, int64_t n) {
  memcpy(dst, c->buf[src] + off, (size_t)n * sizeof(float));
}

static void op_synchronize(pa_bctx *c) { (void)c; /* every op has finished when it returns */ }

/* ---- ops ---- */

static void op_begin(pa_bctx *c, const pa_fwd_batch *b) {
  const pa_hparams *hp = c->hp;
  const int half = hp->rope_dim / 2, rd_swa = pa_rope_dim_of(hp, 1), half_swa = rd_swa / 2;
  for (int32_t t = 0; t < b->n; t++) {
    pa_rope_table_ext(c->rope_cos + t * half, c->rope_sin + t * half, hp->rope_dim, b->pos[t], hp->rope_base,
                      hp->rope_freq_scale, c->rope_freqs, hp->rope_attn_factor);
    if (hp->sliding_window)
      pa_rope_table(c->rope_cos_swa + t * half_swa, c->rope_sin_swa + t * half_swa, rd_swa, b->pos[t],
                    hp->rope_base_swa, hp->rope_freq_scale_swa, NULL);
  }
}

static void op_embed(pa_bctx *c, const pa_fwd_batch *b, const pa_matrix *table, float scale) {
  const int64_t E = c->hp->n_embd;
  for (int32_t t = 0; t < b->n; t++) {
    float *x = c->buf[PA_BUF_X] + t * E;
    pa_matrix_get_row(table, b->token[t], x);
    if (scale != 1.0f) pa_scale(x, scale, E);
  }
}

/* X[t] += row (by_pos ? pos[t] : 0) of table. */
static void op_embed_add(pa_bctx *c, const pa_fwd_batch *b, const pa_matrix *table, bool by_pos) {
  const int64_t E = c->hp->n_embd;
  float *row = c->xn; /* free between ops */
  for (int32_t t = 0; t < b->n; t++) {
    pa_matrix_get_row(table, by_pos ? b->pos[t] : 0, row);
    c->be->ex.ops->add(c->buf[PA_BUF_X] + t * E, row, E);
  }
}

/* One row's layer norm, the mean and the variance summed in double (the
 * same function on every host table: the reference's bits). */
static void layer_norm_row(float *out, const float *x, const float *w, const float *bias, int64_t n, float eps) {
  double s = 0, ss = 0;
  for (int64_t i = 0; i < n; i++) s += x[i];
  const double mean = s / (double)n;
  for (int64_t i = 0; i < n; i++) ss += (x[i] - mean) * (x[i] - mean);
  const float inv = (float)(1.0 / sqrt(ss / (double)n + eps)), m = (float)mean;
  for (int64_t i = 0; i < n; i++) out[i] = (x[i] - m) * inv * (w ? w[i] : 1.0f) + (bias ? bias[i] : 0.0f);
}

static void op_layer_norm(pa_bctx *c, pa_buf out, pa_buf in, const float *w, const float *bias, int64_t n,
                          int32_t n_tok) {
  for (int32_t t = 0; t < n_tok; t++)
    layer_norm_row(c->buf[out] + t * n, c->buf[in] + t * n, w, bias, n, c->hp->norm_eps);
}

/* GELU with the exact erf over n floats, in place. */
static void gelu_erf(float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
}

static void op_rms_norm(pa_bctx *c, pa_buf out, pa_buf in, const float *w, int64_t n, int32_t n_tok) {
  norm_rows(c, c->buf[out], c->buf[in], w, n, n_tok);
}

static void op_add(pa_bctx *c, pa_buf x, pa_buf y, int64_t n, int32_t n_tok) {
  add_rows(c, c->buf[x], c->buf[y], n, n_tok);
}

static void op_scale(pa_bctx *c, pa_buf x, float s, int64_t n, int32_t n_tok) {
  rows_job j = {.c = c, .out = c->buf[x], .n = n, .n_tok = n_tok, .op = ROWS_SCALE, .s = s};
  run_rows(c, &j);
}

static void op_per_layer_embed(pa_bctx *c, const pa_fwd_batch *b, const pa_matrix *table, float scale,
                               float out_scale) {
  const int64_t n = table->cols;
  float *row = c->ple_row;
  for (int32_t t = 0; t < b->n; t++) {
    float *y = c->buf[PA_BUF_PLE] + t * n;
    pa_matrix_get_row(table, b->token[t], row);
    for (int64_t i = 0; i < n; i++) {
      const float r = row[i] * scale, s = y[i] + r;
      y[i] = s * out_scale;
    }
  }
}

static void op_gelu_mul(pa_bctx *c, pa_buf x, pa_buf y, int64_t n, int64_t y_stride, int64_t y_off,
                        int32_t n_tok) {
  for (int32_t t = 0; t < n_tok; t++)
    c->be->ex.ops->gelu_tanh_mul(c->buf[x] + t * n, c->buf[y] + t * y_stride + y_off, n);
}

/* A product's rows: out[m] has rows_of(m) floats per token. */
static int64_t out_rows(const pa_matmul_desc *d, int m) { return d->w[m]->rows; }

/* What one task does with rows [r0, r1) of output m, whole heads, for
 * every token, once the product has computed them: what the ops would do
 * one after another over all rows (the same functions, so the same bits):
 * the bias, the per-head norm, RoPE, the store into the cache, and the
 * residual add. */
typedef struct {
  pa_bctx *c;
  const pa_fwd_batch *b;
  const pa_matmul_desc *d;
} out_job;

/* The heads of the product's layer (backend.h: kv_layer's, else layer's). */
static pa_attn_shape shape_of(const pa_bctx *c, const pa_matmul_desc *d) {
  return pa_layer_attn(c->hp, d->kv_layer >= 0 ? d->kv_layer : d->layer);
}

static int head_dim_of(const pa_bctx *c, const pa_matmul_desc *d, int m) {
  const pa_attn_shape a = shape_of(c, d);
  return d->kv_layer >= 0 && m == 2 ? a.head_dim_v : a.head_dim;
}

static int rope_dim_of(const pa_hparams *hp, pa_rope_kind k) { return pa_rope_dim_of(hp, k == PA_ROPE_SWA); }

static void out_rows_epi(void *arg, int m, int64_t r0, int64_t r1) {
  const out_job *j = arg;
  pa_bctx *c = j->c;
  const pa_matmul_desc *d = j->d;
  const pa_hparams *hp = c->hp;
  const pa_ops_kernels *ops = c->be->ex.ops;
  const int64_t stride = out_rows(d, m);
  float *y = c->buf[d->out[m]];
  const float *bias = d->bias[m], *hnorm = d->head_norm[m];
  const bool rope = d->rope[m] != PA_ROPE_NONE;
  const bool store = d->kv_layer >= 0 && m >= 1;
  if (bias || hnorm || rope || store || (d->unary && m == 0)) {
    const int hd = head_dim_of(c, d, m), rd = rope_dim_of(hp, d->rope[m]), half = rd / 2;
    const int h0 = (int)(r0 / hd), h1 = (int)(r1 / hd);
    const float *ct = d->rope[m] == PA_ROPE_SWA ? c->rope_cos_swa : c->rope_cos;
    const float *st = d->rope[m] == PA_ROPE_SWA ? c->rope_sin_swa : c->rope_sin;
    for (int32_t t = 0; t < j->b->n; t++) {
      float *row = y + t * stride;
      if (bias) ops->add(row + r0, bias + r0, r1 - r0);
      if (d->unary == PA_UNARY_GELU_ERF && m == 0) gelu_erf(row + r0, r1 - r0);
      for (int h = h0; h < h1; h++) {
        float *head = row + (int64_t)h * hd;
        if (hnorm) ops->rmsnorm(head, head, hnorm, hd, hp->norm_eps);
        if (rope) ops->rope(head, 1, hd, rd, ct + t * half, st + t * half, hp->rope_neox);
        if (store && m == 1) pa_kv_store_k(c->kv, d->kv_layer, j->b->seq[t], j->b->pos[t], h, head);
        if (store && m == 2) pa_kv_store_v(c->kv, d->kv_layer, j->b->seq[t], j->b->pos[t], h, head);
      }
    }
  }
  if (d->residual != PA_BUF_NONE && m == 0) {
    float *r = c->buf[d->residual];
    for (int32_t t = 0; t < j->b->n; t++) ops->add(r + t * stride + r0, y + t * stride + r0, r1 - r0);
  }
}

static int64_t gcd64(int64_t a, int64_t b) {
  while (b) {
    const int64_t r = a % b;
    a = b, b = r;
  }
  return a;
}

/* The products of d on input x (already normalised when norm is NULL),
 * with the epilogue when epi (tasks of whole heads when headwise): one
 * pool job where the matrices share one. */
static void products(pa_bctx *c, const pa_fwd_batch *b, const pa_matmul_desc *d, const float *x,
                     const float *norm, bool epi, bool headwise) {
  const int32_t n = b->n;
  const int64_t cols = d->w[0]->cols;
  if (c->be->exact) {
    for (int m = 0; m < d->n_w; m++)
      pa_matmul_exact(c->pool, d->w[m], x, cols, c->buf[d->out[m]], out_rows(d, m), n, c->work);
    return;
  }
  pa_matmul_out outs[3];
  for (int m = 0; m < d->n_w; m++) outs[m] = (pa_matmul_out){d->w[m], c->buf[d->out[m]], out_rows(d, m)};
  if (d->gate != PA_GATE_NONE) {
    const pa_matmul_fuse f = {.norm_w = norm, .norm_eps = c->hp->norm_eps};
    const pa_ops_kernels *ops = c->be->ex.ops;
    pa_matmul_gated_fused(&c->be->ex, c->pool, d->w[0], d->w[1],
                          d->gate == PA_GATE_SILU ? ops->silu_mul : ops->gelu_tanh_mul, x, cols,
                          outs[0].y, outs[1].y, outs[0].y_stride, n, c->work, &f);
    return;
  }
  out_job j = {c, b, d};
  pa_matmul_fuse f = {.norm_w = norm, .norm_eps = c->hp->norm_eps};
  if (epi) {
    f.epi = out_rows_epi;
    f.epi_arg = &j;
  }
  if (epi && headwise) { /* rows per task in whole heads of every output, and in 16s */
    int64_t grain = 16;
    for (int m = 0; m < d->n_w; m++) {
      const int64_t hd = head_dim_of(c, d, m);
      grain = grain / gcd64(grain, hd) * hd;
    }
    f.grain = grain;
  }
  pa_matmul_multi_fused(&c->be->ex, c->pool, outs, d->n_w, x, cols, n, c->work, &f);
}

static void op_matmul(pa_bctx *c, const pa_fwd_batch *b, const pa_matmul_desc *d) {
  const int32_t n = b->n;
  const float *x = c->buf[d->in];
  const bool headwise = d->bias[0] || d->bias[1] || d->bias[2] || d->head_norm[0] || d->head_norm[1] ||
                        d->head_norm[2] || d->rope[0] || d->rope[1] || d->rope[2] || d->kv_layer >= 0 ||
                        d->unary != PA_UNARY_NONE;
  bool fuse = !c->be->exact && (d->gate == PA_GATE_NONE || d->n_w == 2);
  for (int m = 0; m < d->n_w && fuse && d->in_norm; m++) fuse = pa_matmul_can_norm(d->w[m]);
  if (fuse && (d->gate != PA_GATE_NONE || !headwise)) {
    /* one job: the norm as the activations are quantized (when it can),
     * the gate or the residual add as the rows come out */
    const bool norm_fused = d->in_norm && pa_matmul_can_norm(d->w[0]);
    products(c, b, d, x, norm_fused ? d->in_norm : NULL, d->residual != PA_BUF_NONE, false);
    return;
  }
  if (fuse) { /* norm, products and the head-wise ops in one job */
    products(c, b, d, x, d->in_norm, true, true);
    return;
  }
  /* op after op: the reference backend, and matrices whose activations
   * stay floats */
  const int64_t cols = d->w[0]->cols;
  if (d->in_norm) {
    norm_rows(c, c->xn, x, d->in_norm, cols, n);
    x = c->xn;
  }
  products(c, b, d, x, NULL, false, false);
  const pa_ops_kernels *ops = c->be->ex.ops;
  for (int m = 0; m < d->n_w; m++) {
    float *y = c->buf[d->out[m]];
    const int64_t rows = out_rows(d, m);
    if (d->bias[m])
      for (int32_t t = 0; t < n; t++) ops->add(y + t * rows, d->bias[m], rows);
    if (d->unary == PA_UNARY_GELU_ERF && m == 0) gelu_erf(y, (int64_t)n * rows);
    if (d->head_norm[m]) {
      const int hd = head_dim_of(c, d, m);
      for (int64_t i = 0; i < (int64_t)n * (rows / hd); i++)
        ops->rmsnorm(y + i * hd, y + i * hd, d->head_norm[m], hd, c->hp->norm_eps);
    }
  }
  /* RoPE of q (out 0) and k (out 1), as the model asks */
  if (d->rope[0] || (d->n_w > 1 && d->rope[1])) {
    const pa_rope_kind kind = d->rope[0] ? d->rope[0] : d->rope[1];
    rows_job j = {.c = c, .n_tok = n, .op = ROWS_ROPE,
                  .out = d->rope[0] ? c->buf[d->out[0]] : NULL,
                  .in = d->n_w > 1 && d->rope[1] ? c->buf[d->out[1]] : NULL,
                  .cos_t = kind == PA_ROPE_SWA ? c->rope_cos_swa : c->rope_cos,
                  .sin_t = kind == PA_ROPE_SWA ? c->rope_sin_swa : c->rope_sin,
                  .a = shape_of(c, d), .rope_dim = rope_dim_of(c->hp, kind)};
    run_rows(c, &j);
  }
  if (d->kv_layer >= 0) pa_cpu_kv_store_batch(c, b, d->kv_layer);
  if (d->gate != PA_GATE_NONE && c->be->exact) { /* the fast products gated as they went */
    const int64_t F = out_rows(d, 0);
    (d->gate == PA_GATE_SILU ? ops->silu_mul : ops->gelu_tanh_mul)(c->buf[d->out[0]], c->buf[d->out[1]],
                                                                     (int64_t)n * F);
  }
  if (d->residual != PA_BUF_NONE) add_rows(c, c->buf[d->residual], c->buf[d->out[0]], out_rows(d, 0), n);
}

static void op_attention(pa_bctx *c, const pa_fwd_batch *b, int layer, int32_t window) {
  if (!c->hp->bidirectional) {
    pa_cpu_attention(c, b, layer, window);
    return;
  }
  /* every token up to its sequence's last position of the pass: the same
   * attention with that position as each token's own (positions only
   * bound the range attention reads) */
  for (int32_t t = 0; t < b->n; t++) {
    int32_t last = b->pos[t];
    for (int32_t u = 0; u < b->n; u++)
      if (b->seq[u] == b->seq[t] && b->pos[u] > last) last = b->pos[u];
    c->att_pos[t] = last;
  }
  pa_fwd_batch wide = *b;
  wide.pos = c->att_pos;
  pa_cpu_attention(c, &wide, layer, 0);
}

static void op_logits(pa_bctx *c, const pa_fwd_batch *b, const float *norm, const pa_matrix *out,
                      float *logits) {
  if (b->n_out == 0) return;
  const int64_t E = c->hp->n_embd;
  const pa_ops_kernels *ops = c->be->ex.ops;
  for (int32_t i = 0; i < b->n_out; i++)
    ops->rmsnorm(c->xn + i * E, c->buf[PA_BUF_X] + (int64_t)b->out_idx[i] * E, norm, E, c->hp->norm_eps);
  if (c->be->exact)
    pa_matmul_exact(c->pool, out, c->xn, E, logits, out->rows, b->n_out, c->work);
  else
    pa_matmul(&c->be->ex, c->pool, out, c->xn, E, logits, out->rows, b->n_out, c->work);
  if (c->hp->final_softcap > 0) pa_softcap(logits, c->hp->final_softcap, out->rows * (int64_t)b->n_out);
}

static void op_hidden(pa_bctx *c, const pa_fwd_batch *b, const float *norm, float *hidden) {
  const int64_t E = c->hp->n_embd;
  const pa_ops_kernels *ops = c->be->ex.ops;
  for (int32_t i = 0; i < b->n_out; i++)
    if (!norm)
      memcpy(hidden + i * E, c->buf[PA_BUF_X] + (int64_t)b->out_idx[i] * E, (size_t)E * sizeof(float));
    else
      ops->rmsnorm(hidden + i * E, c->buf[PA_BUF_X] + (int64_t)b->out_idx[i] * E, norm, E, c->hp->norm_eps);
}

/* ---- contexts ---- */

static size_t max_sz(size_t a, size_t b) { return a > b ? a : b; }
static size_t align16(size_t n_floats) { return (n_floats + 15) & ~(size_t)15; } /* 64 bytes */

static void context_free(pa_bctx *c) {
  if (!c) return;
  if (c->kv && c->kv->values == c->values) pa_kv_attach(c->kv, NULL);
  pa_kv_values_free(c->values);
  pa_free(c->mem);
  pa_free(c->moe_mem);
  pa_free(c->moe_work);
  pa_free(c->moe_group);
  pa_free(c->scores);
  pa_free(c->work);
  pa_free(c->att_pos);
  pa_free(c->ssm);
  pa_free(c);
}

static int context_init(const pa_backend *be, const pa_bctx_params *p, pa_bctx **out) {
  *out = NULL;
  const pa_hparams *hp = p->hp;
  pa_bctx *c = pa_calloc(1, sizeof *c);
  if (!c) return pa_error(PASADA_ERR_NOMEM, "out of memory");
  c->be = be->impl;
  c->hp = hp;
  c->rope_freqs = p->rope_freqs;
  c->attn_sinks = p->attn_sinks;
  c->kv = p->kv;
  c->pool = p->pool;
  int rc = pa_kv_host_create(p->kv, p->kv_type, &c->values);
  if (rc) {
    pa_free(c);
    return rc;
  }
  pa_kv_attach(p->kv, c->values);
  c->n_threads = pa_pool_size(p->pool);
  c->n_batch = p->n_batch;
  c->n_seq_max = p->n_seq_max;
  const int64_t B = p->n_batch, E = hp->n_embd, F = hp->n_ff;
  const int64_t Q = pa_buf_width(hp, PA_BUF_Q), K = pa_buf_width(hp, PA_BUF_K);
  const int64_t VV = pa_buf_width(hp, PA_BUF_V), O = pa_buf_width(hp, PA_BUF_ATT);
  /* q, k, v and att are dead once the attention block has added its
   * output to x, and h2 (the up projection) lives only inside the FFN:
   * they share one region (SmolLM2, 128 tokens: 0.75 MiB less) */
  const size_t fq = align16((size_t)(B * Q)), fk = align16((size_t)(B * K)), fv = align16((size_t)(B * VV)),
               fo = align16((size_t)(B * O));
  const size_t n_x = align16((size_t)(B * E)), n_xb = align16((size_t)B * max_sz((size_t)E, (size_t)O));
  const size_t n_qkv = align16(max_sz(fq + fk + fv + fo, (size_t)(B * F)));
  const size_t n_h1 = align16((size_t)(B * pa_buf_width(hp, PA_BUF_H1)));
  const size_t n_rt = align16((size_t)(B * (pa_rope_dim_max(hp) / 2)));
  const size_t n_ple = align16((size_t)(B * pa_buf_width(hp, PA_BUF_PLE)));
  const size_t n_ple_row = align16((size_t)pa_buf_width(hp, PA_BUF_PLE));
  const size_t total = 2 * n_x + n_xb + n_qkv + n_h1 + 4 * n_rt + n_ple + n_ple_row;
  float *m = c->mem = pa_alloc(total * sizeof(float));
  c->scores = pa_alloc(pa_cpu_attention_scratch_size(c->n_threads, c->n_batch, c->n_seq_max, hp));
  size_t work = 0;
  const pa_cpu_backend *dev = c->be;
  for (int32_t i = 0; i < p->n_mats; i++)
    work = max_sz(work, dev->exact ? pa_matmul_exact_work_size(p->mats[i], c->n_threads)
                                   : pa_matmul_work_size(p->mats[i], B));
  c->work = pa_alloc(work ? work : 64);
  c->att_pos = pa_alloc((size_t)B * sizeof(int32_t));
  if (hp->n_expert > 0) {
    size_t ew = 0;
    for (int32_t i = 0; i < p->n_mats; i++) ew = max_sz(ew, pa_matmul_exact_work_size(p->mats[i], c->n_threads));
    c->moe_work = pa_alloc(ew ? ew : 64);
    c->moe_mem = pa_alloc(pa_cpu_moe_scratch_size(hp, c->n_batch));
    if (!dev->exact) { /* the grouped path's scratch; without it, expert by expert */
      size_t w1 = 0;
      for (int32_t i = 0; i < p->n_mats; i++) w1 = max_sz(w1, pa_matmul_work_size(p->mats[i], 1));
      c->moe_group_bytes = pa_cpu_moe_group_work_size(hp, c->n_batch, w1);
      c->moe_group = pa_alloc(c->moe_group_bytes);
      if (!c->moe_group) c->moe_group_bytes = 0;
    }
  }
  if (hp->ssm_conv > 0) { /* every recurrent layer's state per sequence and snapshot */
    for (int l = 0; l < hp->n_layer; l++) c->ssm_index[l] = hp->recurrent[l] ? c->n_recurrent++ : -1;
    c->n_slots = p->n_seq_max + p->n_snap;
    c->ssm = pa_calloc((size_t)c->n_slots * (size_t)c->n_recurrent, (size_t)pa_ssm_state_floats(hp) * sizeof(float));
    if (!c->ssm) {
      context_free(c);
      return pa_error(PASADA_ERR_NOMEM, "out of memory for the recurrent state of %d sequences", c->n_slots);
    }
  }
  if (!m || !c->scores || !c->work || !c->att_pos ||
      (hp->n_expert > 0 && (!c->moe_work || !c->moe_mem))) {
    context_free(c);
    return pa_error(PASADA_ERR_NOMEM, "out of memory for the buffers of %d tokens", p->n_batch);
  }
  c->buf[PA_BUF_X] = m, m += n_x;
  c->xn = m, m += n_x;
  c->buf[PA_BUF_XB] = m, m += n_xb;
  c->buf[PA_BUF_Q] = m;
  c->buf[PA_BUF_K] = m + fq;
  c->buf[PA_BUF_V] = m + fq + fk;
  c->buf[PA_BUF_ATT] = m + fq + fk + fv;
  c->buf[PA_BUF_H2] = m, m += n_qkv;
  c->buf[PA_BUF_H1] = m, m += n_h1;
  c->rope_cos = m, m += n_rt;
  c->rope_sin = m, m += n_rt;
  c->rope_cos_swa = m, m += n_rt;
  c->rope_sin_swa = m, m += n_rt;
  c->buf[PA_BUF_PLE] = m, m += n_ple;
  c->ple_row = m;
  pa_cpu_moe_bind(c, c->moe_mem);
  *out = c;
  return PASADA_OK;
}

/* ---- the device ---- */

static int prepare_weights(const pa_backend *be, struct pa_model *m) {
  const pa_cpu_backend *dev = be->impl;
  /* the reference reads every layout; the CPU repacks for its table */
  return dev->exact ? PASADA_OK : pa_model_repack(m, dev->ex.k);
}

#define HOST_OPS(NAME, KV)                                                                      \
  {.name = NAME, .default_kv_type = KV, .prepare_weights = prepare_weights,                    \
   .context_init = context_init, .context_free = context_free, .upload = op_upload,             \
   .download = op_download, .synchronize = op_synchronize, .begin = op_begin, .embed = op_embed, \
   .rms_norm = op_rms_norm, .add = op_add, .scale = op_scale, .layer_norm = op_layer_norm, .embed_add = op_embed_add, \
   .per_layer_embed = op_per_layer_embed, .gelu_mul = op_gelu_mul,                               \
   .matmul = op_matmul, .attention = op_attention, .moe = pa_cpu_moe, .logits = op_logits,        \
   .hidden = op_hidden, .delta_net = pa_cpu_delta_net, .sigmoid_mul = pa_cpu_sigmoid_mul,         \
   .state_copy = pa_cpu_state_copy}

const pa_backend_ops pa_cpu_backend_ops = HOST_OPS("cpu", PA_KV_F16);
const pa_backend_ops pa_ref_backend_ops = HOST_OPS("ref", PA_KV_F32);

int pa_cpu_backend_make(const pa_backend_ops *ops, const char *name, const pa_cpu_backend *dev,
                        pa_backend **out) {
  *out = NULL;
  pa_backend *be = pa_calloc(1, sizeof *be);
  pa_cpu_backend *d = pa_calloc(1, sizeof *d);
  if (!be || !d) {
    pa_free(be);
    pa_free(d);
    return pa_error(PASADA_ERR_NOMEM, "out of memory");
  }
  *d = *dev;
  be->ops = ops;
  be->impl = d;
  snprintf(be->name, sizeof be->name, "%s", name);
  snprintf(be->kernels, sizeof be->kernels, "%s", dev->exact ? "plain" : dev->ex.k->name);
  *out = be;
  return PASADA_OK;
}

int pa_backend_cpu_create(const char *table, uint64_t weight_bytes, pa_backend **out) {
  *out = NULL;
  const pa_cpu_kernels *k = table ? pa_kernels_by_name(table) : pa_kernels_best();
  if (!k && !pa_kernels_is_name(table))
    return pa_error(PASADA_ERR_ARG, "backend cpu:%s: no such kernel table (have: " PA_KERNEL_TABLE_NAMES ")",
                    table);
  if (!k)
    return pa_error(PASADA_ERR_ARG, "backend cpu:%s: this CPU has no %s instructions (or PASADA_CPU caps "
                    "them; it has %s)", table, table, pa_cpu_describe());
  pa_backend *be;
  int rc = pa_backend_cpu_create_with(k, weight_bytes, &be);
  if (!rc && !table) snprintf(be->name, sizeof be->name, "cpu"); /* the default, as asked */
  if (!rc) *out = be;
  return rc;
}

int pa_backend_cpu_create_with(const pa_cpu_kernels *k, uint64_t weight_bytes, pa_backend **out) {
  *out = NULL;
  pa_cpu_backend dev = {.exact = false};
  pa_cpu_exec_init(&dev.ex, k, weight_bytes);
  /* attention's tile kernels of the same instruction set */
  const pa_isa isa = pa_kernels_isa(k);
  dev.attn = isa == PA_ISA_PLAIN ? pa_attn_plain() : isa == PA_ISA_AVX2 ? pa_attn_avx2() : pa_attn_avx512();
  if (!dev.attn) dev.attn = pa_attn_best();
  char name[32];
  snprintf(name, sizeof name, "cpu:%s", k->name);
  return pa_cpu_backend_make(&pa_cpu_backend_ops, name, &dev, out);
}
