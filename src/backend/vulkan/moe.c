/* moe.c: the Vulkan backend's mixture-of-experts op (backend.h,
 * pa_moe_desc): the router's product on the device, the choice of experts
 * on the host, each chosen expert's products over its tokens. */
#include <string.h>

#include "backend/vulkan/context.h"

/* Expert e of kind ex (one block on the device, prepare). */
static void expert_product(pa_bctx *c, const pa_matrix *ex, int e, uint64_t x, uint64_t y, uint32_t n_tok) {
  const uint64_t wa = pa_vkc_weight(c->vb, ex[0].data) + pa_vkc_matrix_bytes(&ex[0]) * (uint64_t)e;
  pa_vkc_product_at(c, &ex[e], wa, x, (uint32_t)ex[e].cols, y, (uint32_t)ex[e].rows, n_tok);
}

/* moe_scatter: out[idx[i]] += w[i] * y[i] (rows of n floats), i < n_rows;
 * idx 0: out's first n_rows rows zeroed */
static void moe_scatter(pa_bctx *c, uint64_t out, uint64_t y, uint64_t idx, uint64_t w, uint32_t n, uint32_t rows) {
  struct {
    uint64_t out, y, idx, w;
    uint32_t n, n_rows;
  } p = {out, y, idx, w, n, rows};
  pa_vkc_dispatch(c, "moe_scatter", &p, sizeof p, 1, rows, 1);
}

/* The mixture of experts (backend.h): the router's logits on the device,
 * read back (a flush) and the top k chosen on the host (pa_moe_route, as
 * the host backends do), then per chosen expert, over its tokens: their
 * rows of X gathered and normalised (rms_norm's gather), gate and up, the
 * gate, down, and the weighted rows added into out (moe_scatter), experts
 * in increasing index. */
void pa_vkc_moe(pa_bctx *c, const pa_fwd_batch *b, const pa_moe_desc *d) {
  const uint32_t n = (uint32_t)b->n, E = (uint32_t)c->hp->n_embd, FE = (uint32_t)d->gate[0].rows;
  const int32_t NE = d->n_expert, K = d->n_used;
  const uint64_t xn = c->act.addr + c->off_xn, out = buf_addr(c, d->out);
  const uint64_t xg = c->act.addr + c->off_xg, hg = c->act.addr + c->off_hg, hu = c->act.addr + c->off_hu;
  pa_vkc_norm_rows(c, xn, buf_addr(c, d->in), d->in_norm, E, n, 0);
  /* the router's own input norm, into xg (free until the experts run) */
  if (d->router_norm) pa_vkc_norm_rows(c, xg, buf_addr(c, d->in), d->router_norm, E, n, 0);
  pa_vkc_product(c, d->router, d->router_norm ? xg : xn, E, step_addr(c, c->s_moe_logits), (uint32_t)NE, n);
  if (d->router_bias)
    pa_vkc_add(c, step_addr(c, c->s_moe_logits), pa_vkc_weight(c->vb, d->router_bias), (uint64_t)NE * n, (uint32_t)NE);
  pa_vkc_flush(c);
  const float *logits = (const float *)(const void *)((const uint8_t *)c->step.map + c->s_moe_logits);
  int32_t *count = c->moe_count, *first = c->moe_first;
  memset(count, 0, (size_t)NE * sizeof *count);
  for (uint32_t t = 0; t < n; t++) {
    pa_moe_route(logits + (size_t)t * NE, NE, K, d->norm_topk, c->moe_chosen + t * K, c->moe_weight + t * K);
    if (d->expert_scale)
      for (int32_t k = 0; k < K; k++) c->moe_weight[t * K + k] *= d->expert_scale[c->moe_chosen[t * K + k]];
    for (int32_t k = 0; k < K; k++) count[c->moe_chosen[t * K + k]]++;
  }
  /* per expert, its tokens (in order) and their weights, into the step buffer */
  int32_t *idx = (int32_t *)(void *)((uint8_t *)c->step.map + c->s_moe_idx);
  float *wts = (float *)(void *)((uint8_t *)c->step.map + c->s_moe_w);
  for (int32_t e = 0, at = 0; e < NE; e++) first[e] = at, at += count[e], count[e] = 0;
  for (uint32_t t = 0; t < n; t++)
    for (int32_t k = 0; k < K; k++) {
      const int32_t e = c->moe_chosen[t * K + k], i = first[e] + count[e]++;
      idx[i] = (int32_t)t, wts[i] = c->moe_weight[t * K + k];
    }
  moe_scatter(c, out, 0, 0, 0, E, n);
  const uint64_t yg = c->act.addr + c->off_yg;
  for (int32_t e = 0; e < NE; e++) {
    const uint32_t m = (uint32_t)count[e];
    if (!m) continue;
    const uint64_t ia = step_addr(c, c->s_moe_idx + 4 * (uint64_t)first[e]);
    pa_vkc_norm_rows(c, xg, buf_addr(c, d->in), d->in_norm, E, m, ia);
    expert_product(c, d->gate, e, xg, hg, m);
    expert_product(c, d->up, e, xg, hu, m);
    if (d->gate_bias) pa_vkc_add(c, hg, pa_vkc_weight(c->vb, d->gate_bias) + 4 * (uint64_t)e * FE, (uint64_t)m * FE, FE);
    if (d->up_bias) pa_vkc_add(c, hu, pa_vkc_weight(c->vb, d->up_bias) + 4 * (uint64_t)e * FE, (uint64_t)m * FE, FE);
    struct {
      uint64_t g, u;
      uint32_t n, kind;
    } p = {hg, hu, m * FE, d->act == PA_GATE_SILU ? 0u : d->act == PA_GATE_SWIGLU_OAI ? 3u : 1u};
    pa_vkc_dispatch(c, "gate", &p, sizeof p, groups_for((uint64_t)m * FE, 256), 1, 1);
    expert_product(c, d->down, e, hg, yg, m);
    if (d->down_bias) pa_vkc_add(c, yg, pa_vkc_weight(c->vb, d->down_bias) + 4 * (uint64_t)e * E, (uint64_t)m * E, E);
    moe_scatter(c, out, yg, ia, step_addr(c, c->s_moe_w + 4 * (uint64_t)first[e]), E, m);
  }
  if (d->residual != PA_BUF_NONE) pa_vkc_add(c, buf_addr(c, d->residual), out, (uint64_t)E * n, 0);
}
