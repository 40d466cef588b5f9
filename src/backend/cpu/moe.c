/* moe.c: the host backends' mixture-of-experts op (backend.h,
 * pa_moe_desc): the router, the top-k choice and the experts' gated
 * products, run by expert: the batch's tokens are grouped by the experts
 * they chose, so each chosen expert's weights are read once per forward
 * pass with the product kernels of kernels.h on its slice (a decode step
 * reads only its n_used experts). The reference backend runs the same
 * steps with the exact product. */
#include <string.h>

#include "backend/cpu/cpu.h"
#include "base/base.h"

/* The scratch's floats and ints for a context of n_batch tokens. */
static void moe_sizes(const pa_hparams *hp, int32_t n_batch, size_t *floats, size_t *ints) {
  const size_t B = (size_t)n_batch, E = (size_t)hp->n_embd, FE = (size_t)hp->n_ff_exp;
  const size_t NE = (size_t)hp->n_expert, K = (size_t)hp->n_expert_used;
  /* logits, the tokens' chosen weights, gathered inputs, gate and up
   * outputs, the down outputs */
  *floats = B * NE + B * K + B * E + 2 * B * FE + B * E;
  /* the chosen experts, per expert: the count, the first slot, the slots */
  *ints = B * K + 2 * NE + B * K;
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
  const size_t NE = (size_t)hp->n_expert, K = (size_t)hp->n_expert_used;
  float *f = mem;
  c->moe.logits = f, f += B * NE;
  c->moe.weight = f, f += B * K;
  c->moe.xg = f, f += B * E;
  c->moe.hg = f, f += B * FE;
  c->moe.hu = f, f += B * FE;
  c->moe.yg = f, f += B * E;
  int32_t *i = (int32_t *)f;
  c->moe.chosen = i, i += B * K;
  c->moe.count = i, i += NE;
  c->moe.first = i, i += NE;
  c->moe.slots = i;
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
  for (int32_t e = 0; e < NE; e++) {
    const int32_t m = count[e];
    if (!m) continue;
    const int32_t *s = slots + first[e];
    const float *x = xn;
    if (m < n) { /* the chosen tokens' rows, gathered (all of them: xn as it is) */
      for (int32_t i = 0; i < m; i++)
        memcpy(c->moe.xg + i * E, xn + (s[i] / K) * E, (size_t)E * sizeof(float));
      x = c->moe.xg;
    }
    if (separate) {
      product(c, &d->gate[e], x, c->moe.hg, m);
      product(c, &d->up[e], x, c->moe.hu, m);
      for (int32_t i = 0; i < m; i++) {
        if (d->gate_bias) ops->add(c->moe.hg + i * FE, d->gate_bias + e * FE, FE);
        if (d->up_bias) ops->add(c->moe.hu + i * FE, d->up_bias + e * FE, FE);
      }
      if (d->act == PA_GATE_SWIGLU_OAI)
        pa_swiglu_oai(c->moe.hg, c->moe.hu, (int64_t)m * FE);
      else
        act(c->moe.hg, c->moe.hu, (int64_t)m * FE);
    } else {
      pa_matmul_gated(&c->be->ex, c->pool, &d->gate[e], &d->up[e], act, x, E, c->moe.hg, c->moe.hu,
                      FE, m, c->work);
    }
    product(c, &d->down[e], c->moe.hg, c->moe.yg, m);
    if (d->down_bias)
      for (int32_t i = 0; i < m; i++) ops->add(c->moe.yg + i * E, d->down_bias + e * E, E);
    for (int32_t i = 0; i < m; i++) {
      const float w = c->moe.weight[s[i]];
      float *o = out + (s[i] / K) * E;
      const float *y = c->moe.yg + i * E;
      for (int64_t j = 0; j < E; j++) o[j] += w * y[j];
    }
  }
  if (d->residual != PA_BUF_NONE) {
    float *r = c->buf[d->residual];
    for (int32_t t = 0; t < n; t++) ops->add(r + t * E, out + t * E, E);
  }
}
