/* moe.c: the host backends' mixture-of-experts op (backend.h,
 * pa_moe_desc): the router, the top-k choice and the experts' gated
 * products, run by expert: the batch's tokens are grouped by the experts
 * they chose, so each chosen expert's weights are read once per forward
 * pass with the product kernels of kernels.h on its slice (a decode step
 * reads only its n_used experts). The reference backend runs the same
 * steps with the exact product.
 *
 * Batches of up to MOE_GROUP_TOKENS tokens (decode steps) run the chosen
 * experts' products as one pool job for the gate and up matrices and one
 * for the down matrices (pa_matmul_group), rather than a job per expert
 * and matrix: the threads go from one expert's rows to the next without
 * meeting at a barrier, and the experts that take the same rows (all of
 * them in a one-token step) share one quantization of them. The bits are
 * those of the products run one by one (pa_matmul_group's contract), so
 * the path taken never shows in the results. */
#include <string.h>

#include "backend/cpu/cpu.h"
#include "base/base.h"

#define MOE_GROUP_TOKENS 16

/* Rows of the gathered inputs and of the experts' outputs: one expert's
 * tokens at a time (n_batch), or every chosen expert's at once (the
 * grouped path: n_used per token). */
static size_t slot_rows(const pa_hparams *hp, int32_t n_batch) {
  const size_t B = (size_t)n_batch, G = (size_t)(n_batch < MOE_GROUP_TOKENS ? n_batch : MOE_GROUP_TOKENS);
  const size_t S = G * (size_t)hp->n_expert_used;
  return B > S ? B : S;
}

/* The scratch's floats and ints for a context of n_batch tokens. */
static void moe_sizes(const pa_hparams *hp, int32_t n_batch, size_t *floats, size_t *ints) {
  const size_t B = (size_t)n_batch, E = (size_t)hp->n_embd, FE = (size_t)hp->n_ff_exp;
  const size_t NE = (size_t)hp->n_expert, K = (size_t)hp->n_expert_used, R = slot_rows(hp, n_batch);
  /* logits, the tokens' chosen weights, gathered inputs, gate and up
   * outputs, the down outputs */
  *floats = B * NE + B * K + R * E + 2 * R * FE + R * E;
  /* the chosen experts, per expert: the count, the first slot, the slots */
  *ints = B * K + 2 * NE + B * K;
}

size_t pa_cpu_moe_group_work_size(const pa_hparams *hp, int32_t n_batch, size_t work1) {
  if (hp->n_expert <= 0) return 0;
  const size_t G = (size_t)(n_batch < MOE_GROUP_TOKENS ? n_batch : MOE_GROUP_TOKENS);
  const size_t S = G * (size_t)hp->n_expert_used; /* slots: the items' tokens together */
  const size_t items = S < (size_t)hp->n_expert ? S : (size_t)hp->n_expert;
  /* an item of m tokens needs at most m x one token's work + 191 bytes
   * (pa_matmul_work_size's roundings), + 64 to align it */
  const pa_matrix *none = NULL;
  const int64_t zero = 0;
  return pa_matmul_group_work_size(&none, &zero, 0) + S * work1 + items * 256;
}

size_t pa_cpu_moe_scratch_size(const pa_hparams *hp, int32_t n_batch) {
  if (hp->n_expert <= 0) return 0;
  size_t f, i;
  moe_sizes(hp, n_batch, &f, &i);
  return f * sizeof(float) + i * sizeof(int32_t);
}

void pa_cpu_moe_bind(pa_bctx *c, void *mem) {
  const pa_hparams *hp = c->hp;
  if (hp->n_expert <= 0) return;
  const size_t B = (size_t)c->n_batch, E = (size_t)hp->n_embd, FE = (size_t)hp->n_ff_exp;
  const size_t NE = (size_t)hp->n_expert, K = (size_t)hp->n_expert_used, R = slot_rows(hp, c->n_batch);
  float *f = mem;
  c->moe.logits = f, f += B * NE;
  c->moe.weight = f, f += B * K;
  c->moe.xg = f, f += R * E;
  c->moe.hg = f, f += R * FE;
  c->moe.hu = f, f += R * FE;
  c->moe.yg = f, f += R * E;
  int32_t *i = (int32_t *)f;
  c->moe.chosen = i, i += B * K;
  c->moe.count = i, i += NE;
  c->moe.first = i, i += NE;
  c->moe.slots = i;
}

/* Expert e's input rows: xn as it is when every token chose it, else its
 * tokens' rows gathered into dst. */
static const float *expert_input(pa_bctx *c, const pa_moe_desc *d, int32_t e, int32_t n, float *dst) {
  const int64_t E = c->hp->n_embd;
  const int32_t m = c->moe.count[e], *s = c->moe.slots + c->moe.first[e];
  if (m == n) return c->xn;
  for (int32_t i = 0; i < m; i++) memcpy(dst + i * E, c->xn + (s[i] / d->n_used) * E, (size_t)E * sizeof(float));
  return dst;
}

/* The separate path's step between the products: expert e's biases on its
 * m rows of gate (hg) and up (hu) outputs, then the gate into hg. */
static void expert_gate(pa_bctx *c, const pa_moe_desc *d, int32_t e, int32_t m, float *hg, float *hu,
                        pa_gate_fn act) {
  const pa_ops_kernels *ops = c->be->ex.ops;
  const int64_t FE = d->gate[0].rows;
  for (int32_t i = 0; i < m; i++) {
    if (d->gate_bias) ops->add(hg + i * FE, d->gate_bias + e * FE, FE);
    if (d->up_bias) ops->add(hu + i * FE, d->up_bias + e * FE, FE);
  }
  if (d->act == PA_GATE_SWIGLU_OAI)
    pa_swiglu_oai(hg, hu, (int64_t)m * FE);
  else
    act(hg, hu, (int64_t)m * FE);
}

/* The grouped path (see the top): the chosen experts' gate and up products
 * in one job, the activation where it is not fused, the down products in
 * another. Expert e's rows are at first[e] of xg, hg, hu and yg. False,
 * having computed nothing, where pa_matmul_group cannot take them. */
static bool grouped(pa_bctx *c, const pa_moe_desc *d, int32_t n, bool separate, pa_gate_fn act) {
  const int32_t NE = d->n_expert;
  const int64_t E = c->hp->n_embd, FE = d->gate[0].rows;
  const int32_t *count = c->moe.count, *first = c->moe.first;
  pa_matmul_item it[PA_MATMUL_GROUP_MAX];
  int ni = 0;
  for (int32_t e = 0; e < NE; e++) {
    const int32_t m = count[e];
    if (!m) continue;
    if (ni + (separate ? 2 : 1) > PA_MATMUL_GROUP_MAX) return false;
    const float *x = expert_input(c, d, e, n, c->moe.xg + (int64_t)first[e] * E);
    float *hg = c->moe.hg + (int64_t)first[e] * FE, *hu = c->moe.hu + (int64_t)first[e] * FE;
    const pa_matmul_item gate = {.w = &d->gate[e], .x = x, .x_stride = E, .y = hg, .y_stride = FE, .n_tokens = m};
    if (separate) {
      it[ni++] = gate;
      it[ni++] = (pa_matmul_item){.w = &d->up[e], .x = x, .x_stride = E, .y = hu, .y_stride = FE, .n_tokens = m};
    } else {
      it[ni] = gate;
      it[ni].up = &d->up[e], it[ni].gate = act, it[ni].y_up = hu;
      ni++;
    }
  }
  if (ni == 0 || !pa_matmul_group(&c->be->ex, c->pool, it, ni, c->moe_group, c->moe_group_bytes))
    return false;
  int nd = 0;
  for (int32_t e = 0; e < NE; e++) {
    const int32_t m = count[e];
    if (!m) continue;
    float *hg = c->moe.hg + (int64_t)first[e] * FE, *hu = c->moe.hu + (int64_t)first[e] * FE;
    if (separate) expert_gate(c, d, e, m, hg, hu, act);
    it[nd++] = (pa_matmul_item){.w = &d->down[e], .x = hg, .x_stride = FE,
                                .y = c->moe.yg + (int64_t)first[e] * E, .y_stride = E, .n_tokens = m};
  }
  if (!pa_matmul_group(&c->be->ex, c->pool, it, nd, c->moe_group, c->moe_group_bytes)) {
    for (int i = 0; i < nd; i++) /* the gate and up products are done: the rest one by one */
      pa_matmul(&c->be->ex, c->pool, it[i].w, it[i].x, it[i].x_stride, it[i].y, it[i].y_stride, it[i].n_tokens,
                c->work);
  }
  return true;
}

/* out[t] += weight x expert e's outputs (its rows yg[0..m)), for its tokens */
static void mix(pa_bctx *c, const pa_moe_desc *d, int32_t e, const float *yg, float *out) {
  const int64_t E = c->hp->n_embd;
  const int32_t K = d->n_used, m = c->moe.count[e];
  const int32_t *s = c->moe.slots + c->moe.first[e];
  if (d->down_bias)
    for (int32_t i = 0; i < m; i++) c->be->ex.ops->add((float *)yg + i * E, d->down_bias + e * E, E);
  for (int32_t i = 0; i < m; i++) {
    const float w = c->moe.weight[s[i]];
    float *o = out + (s[i] / K) * E;
    const float *y = yg + i * E;
    for (int64_t j = 0; j < E; j++) o[j] += w * y[j];
  }
}

/* y = W x for n tokens (rows of cols floats in, rows floats out). */
static void product(pa_bctx *c, const pa_matrix *w, const float *x, float *y, int32_t n) {
  if (c->be->exact)
    pa_matmul_exact(c->pool, w, x, w->cols, y, w->rows, n, c->work);
  else
    pa_matmul(&c->be->ex, c->pool, w, x, w->cols, y, w->rows, n, c->work);
}

void pa_cpu_moe(pa_bctx *c, const pa_fwd_batch *b, const pa_moe_desc *d) {
  const pa_hparams *hp = c->hp;
  const pa_ops_kernels *ops = c->be->ex.ops;
  const int32_t n = b->n, NE = d->n_expert, K = d->n_used;
  const int64_t E = hp->n_embd, FE = d->gate[0].rows;
  /* n = rmsnorm(x) (the same bits on every table), the router's logits in
   * the exact product on every host backend, so that cpu and ref choose
   * the same experts */
  float *xn = c->xn;
  for (int32_t t = 0; t < n; t++)
    ops->rmsnorm(xn + t * E, c->buf[d->in] + t * E, d->in_norm, E, hp->norm_eps);
  const float *rx = xn;
  if (d->router_norm) { /* the router's own input norm (xg is free until the experts run) */
    for (int32_t t = 0; t < n; t++)
      ops->rmsnorm(c->moe.xg + t * E, c->buf[d->in] + t * E, d->router_norm, E, hp->norm_eps);
    rx = c->moe.xg;
  }
  pa_matmul_exact(c->pool, d->router, rx, E, c->moe.logits, NE, n, c->moe_work);
  if (d->router_bias)
    for (int32_t t = 0; t < n; t++) ops->add(c->moe.logits + (int64_t)t * NE, d->router_bias, NE);
  int32_t *count = c->moe.count, *first = c->moe.first, *slots = c->moe.slots;
  memset(count, 0, (size_t)NE * sizeof *count);
  for (int32_t t = 0; t < n; t++) {
    pa_moe_route(c->moe.logits + (int64_t)t * NE, NE, K, d->norm_topk, c->moe.chosen + t * K,
                 c->moe.weight + t * K);
    if (d->expert_scale)
      for (int32_t k = 0; k < K; k++) c->moe.weight[t * K + k] *= d->expert_scale[c->moe.chosen[t * K + k]];
    for (int32_t k = 0; k < K; k++) count[c->moe.chosen[t * K + k]]++;
  }
  /* slots (t * K + k) grouped by expert, tokens in order within each */
  for (int32_t e = 0, at = 0; e < NE; e++) first[e] = at, at += count[e];
  for (int32_t e = 0; e < NE; e++) count[e] = 0;
  for (int32_t t = 0; t < n; t++)
    for (int32_t k = 0; k < K; k++) {
      const int32_t e = c->moe.chosen[t * K + k];
      slots[first[e] + count[e]++] = t * K + k;
    }
  float *out = c->buf[d->out];
  memset(out, 0, (size_t)(n * E) * sizeof(float));
  const pa_gate_fn act = d->act == PA_GATE_GELU_TANH ? ops->gelu_tanh_mul : ops->silu_mul;
  /* biases or gpt-oss's clamped gate: the two products, then the biases and
   * the gate, op after op (the fused gated product knows neither) */
  const bool separate = c->be->exact || d->gate_bias || d->up_bias || d->act == PA_GATE_SWIGLU_OAI;
  if (!c->be->exact && n <= MOE_GROUP_TOKENS && c->moe_group && grouped(c, d, n, separate, act)) {
    for (int32_t e = 0; e < NE; e++)
      if (count[e]) mix(c, d, e, c->moe.yg + (int64_t)first[e] * E, out);
  } else {
    for (int32_t e = 0; e < NE; e++) {
      const int32_t m = count[e];
      if (!m) continue;
      const float *x = expert_input(c, d, e, n, c->moe.xg);
      if (separate) {
        product(c, &d->gate[e], x, c->moe.hg, m);
        product(c, &d->up[e], x, c->moe.hu, m);
        expert_gate(c, d, e, m, c->moe.hg, c->moe.hu, act);
      } else {
        pa_matmul_gated(&c->be->ex, c->pool, &d->gate[e], &d->up[e], act, x, E, c->moe.hg, c->moe.hu,
                        FE, m, c->work);
      }
      product(c, &d->down[e], c->moe.hg, c->moe.yg, m);
      mix(c, d, e, c->moe.yg, out);
    }
  }
  if (d->residual != PA_BUF_NONE) {
    float *r = c->buf[d->residual];
    for (int32_t t = 0; t < n; t++) ops->add(r + t * E, out + t * E, E);
  }
}
