/* gemma4.c: the forward pass of Gemma 4's text model. Its differences
 * from Gemma 3 (gemma3.c): norms multiply by their weight as stored (no
 * 1 + w); v is RMS-normed per head too (no weight), and the attention
 * scores are not scaled (q and k are normed); the global layers rotate
 * part of each head (the file's rope_freqs hold the frozen pairs); where
 * a layer has no V projection, V is K's projection (before k's norm);
 * the last attention.shared_kv_layers layers compute q only and attend
 * over the cache of the last earlier layer of their kind (hp->kv_from);
 * each layer's output is multiplied by its scalar; the logits may be
 * soft-capped. The sliding and the global layers may have different head
 * sizes and KV head counts (pa_layer_attn). A model with per-layer inputs
 * (E2B/E4B: n_embd_per_layer P > 0) gives each layer a P-wide input per
 * token, made once from the token and the embedding, and adds a gated
 * projection of it to x after the FFN. A model with experts (26B-A4B:
 * hp.n_expert > 0) runs them beside the dense FFN, on x normed by a norm
 * of their own, and norms each output before their sum is post-normed.
 * The router reads rmsnorm(x) times its own weight and scales each chosen
 * expert's weight (pa_moe_desc.router_norm, expert_scale).
 *   x = embed(tokens) * sqrt(n_embd)
 *   [ple = (rmsnorm_P(W_ple · x / sqrt(n_embd)) * w + ple_embed(tokens) * sqrt(P)) / sqrt(2),
 *          n_layer slices of P, each normed on its own]
 *   per layer: x += postnorm(Wo · attention(...)),  window and RoPE by layer
 *              x += postnorm(W_down · (gelu(W_gate·n) * (W_up·n)))
 *              [with experts: x += postnorm(norm1(W_down · ...) + norm2(moe(norm_2(x))))]
 *              [x += postnorm(W_proj · (gelu(W_inp_gate · x) * ple[layer]))]
 *              x *= layer scalar
 *   logits = softcap(W_out · rmsnorm(x))
 * Each step is one op of the context's backend (backend/backend.h). */
#include <math.h>

#include "model/model.h"

#define OP(op, layer, n_tok, call) PA_PROF(c, b, op, layer, n_tok, be->call)

/* The per-layer inputs of the pass into PLE (transformers'
 * project_per_layer_inputs, in its order of float steps). */
static void per_layer_inputs(struct pa_context *c, const pa_fwd_batch *b) {
  const struct pa_model *m = c->model;
  const pa_hparams *hp = &m->hp;
  const pa_backend_ops *be = c->be->ops;
  pa_bctx *bc = c->bc;
  const int32_t n = b->n;
  const int64_t P = hp->n_embd_per_layer, LP = (int64_t)hp->n_layer * P;
  if (be->layer) be->layer(bc, -1); /* the embedding stage */
  const pa_matmul_desc proj = pa_mm(&m->ple_model_proj, PA_BUF_X, PA_BUF_PLE);
  OP(PA_OP_PER_LAYER_INPUT, -1, n, matmul(bc, b, &proj));
  OP(PA_OP_PER_LAYER_INPUT, -1, n, scale(bc, PA_BUF_PLE, (float)(1.0 / sqrt((double)hp->n_embd)), LP, n));
  OP(PA_OP_PER_LAYER_INPUT, -1, n, rms_norm(bc, PA_BUF_PLE, PA_BUF_PLE, m->ple_proj_norm, P, n * hp->n_layer));
  OP(PA_OP_PER_LAYER_INPUT, -1, n, per_layer_embed(bc, b, &m->ple_embd, sqrtf((float)P), (float)(1.0 / sqrt(2.0))));
}

/* The FFN of a layer with experts: the dense FFN's output normed (XB),
 * the experts' normed (ATT), their sum post-normed and added to x. */
static void ffn_with_experts(struct pa_context *c, const pa_fwd_batch *b, int l) {
  const struct pa_model *m = c->model;
  const pa_layer *L = &m->layers[l];
  const pa_hparams *hp = &m->hp;
  const pa_backend_ops *be = c->be->ops;
  pa_bctx *bc = c->bc;
  const int32_t n = b->n;
  const int64_t E = hp->n_embd;
  pa_matmul_desc up = pa_mm2(&L->w_gate, &L->w_up, PA_BUF_X, PA_BUF_H1, PA_BUF_H2);
  up.in_norm = L->ffn_norm;
  up.gate = PA_GATE_GELU_TANH;
  OP(PA_OP_GATE_UP, l, n, matmul(bc, b, &up));
  const pa_matmul_desc down = pa_mm(&L->w_down, PA_BUF_H1, PA_BUF_XB);
  OP(PA_OP_DOWN, l, n, matmul(bc, b, &down));
  OP(PA_OP_POST_FFN_NORM, l, n, rms_norm(bc, PA_BUF_XB, PA_BUF_XB, L->post_ffn_norm_1, E, n));
  const pa_moe_desc moe = {.in = PA_BUF_X, .out = PA_BUF_ATT, .in_norm = L->ffn_norm_2, .router = &L->router,
                           .n_expert = hp->n_expert, .n_used = hp->n_expert_used, .norm_topk = true,
                           .gate = L->exp_gate, .up = L->exp_up, .down = L->exp_down, .act = PA_GATE_GELU_TANH,
                           .residual = PA_BUF_NONE, .router_norm = L->router_norm, .expert_scale = L->exp_scale};
  OP(PA_OP_MOE, l, n, moe(bc, b, &moe));
  OP(PA_OP_POST_FFN_NORM, l, n, rms_norm(bc, PA_BUF_ATT, PA_BUF_ATT, L->post_ffn_norm_2, E, n));
  OP(PA_OP_POST_FFN_NORM, l, n, add(bc, PA_BUF_XB, PA_BUF_ATT, E, n));
  OP(PA_OP_POST_FFN_NORM, l, n, rms_norm(bc, PA_BUF_XB, PA_BUF_XB, L->post_ffn_norm, E, n));
  OP(PA_OP_FFN_RESIDUAL, l, n, add(bc, PA_BUF_X, PA_BUF_XB, E, n));
}

/* x += postnorm(W_proj · (gelu(W_inp_gate · x) * ple[l])) */
static void per_layer_block(struct pa_context *c, const pa_fwd_batch *b, int l) {
  const struct pa_model *m = c->model;
  const pa_layer *L = &m->layers[l];
  const pa_hparams *hp = &m->hp;
  const pa_backend_ops *be = c->be->ops;
  pa_bctx *bc = c->bc;
  const int32_t n = b->n;
  const int64_t P = hp->n_embd_per_layer, E = hp->n_embd;
  const pa_matmul_desc gate = pa_mm(&L->ple_gate, PA_BUF_X, PA_BUF_H1);
  OP(PA_OP_PER_LAYER_INPUT, l, n, matmul(bc, b, &gate));
  OP(PA_OP_PER_LAYER_INPUT, l, n, gelu_mul(bc, PA_BUF_H1, PA_BUF_PLE, P, P * hp->n_layer, P * l, n));
  const pa_matmul_desc proj = pa_mm(&L->ple_proj, PA_BUF_H1, PA_BUF_XB);
  OP(PA_OP_PER_LAYER_INPUT, l, n, matmul(bc, b, &proj));
  OP(PA_OP_PER_LAYER_INPUT, l, n, rms_norm(bc, PA_BUF_XB, PA_BUF_XB, L->ple_norm, E, n));
  OP(PA_OP_PER_LAYER_INPUT, l, n, add(bc, PA_BUF_X, PA_BUF_XB, E, n));
}

void pa_forward_gemma4(struct pa_context *c, const pa_fwd_batch *b) {
  const struct pa_model *m = c->model;
  const pa_hparams *hp = &m->hp;
  const pa_backend_ops *be = c->be->ops;
  pa_bctx *bc = c->bc;
  const int32_t n = b->n;
  const int64_t E = hp->n_embd;

  pa_fwd_begin(c, b, hp->embed_scale);
  if (hp->n_embd_per_layer > 0) per_layer_inputs(c, b);
  for (int l = 0; l < hp->n_layer; l++) {
    const pa_layer *L = &m->layers[l];
    if (be->layer) be->layer(bc, l);
    const bool local = hp->swa_layer[l];
    const pa_rope_kind rope = local ? PA_ROPE_SWA : PA_ROPE_GLOBAL;
    const int from = hp->n_kv_shared > 0 ? hp->kv_from[l] : l;
    /* attention: q = Wq rmsnorm(x), head-normed and rotated; a layer with
     * its own cache also k (head norm, RoPE) and v (head norm, no
     * weight) into it */
    pa_matmul_desc qkv;
    if (from == l) {
      qkv = pa_mm3(&L->wq, &L->wk, &L->wv, PA_BUF_X, PA_BUF_Q, PA_BUF_K, PA_BUF_V);
      qkv.head_norm[1] = L->k_norm, qkv.head_norm[2] = L->v_norm;
      qkv.rope[1] = rope;
      qkv.kv_layer = l;
    } else {
      qkv = pa_mm(&L->wq, PA_BUF_X, PA_BUF_Q);
    }
    qkv.layer = l; /* its kind's head sizes (sliding and global layers may differ) */
    qkv.in_norm = L->attn_norm;
    qkv.head_norm[0] = L->q_norm;
    qkv.rope[0] = rope;
    OP(PA_OP_QKV, l, n, matmul(bc, b, &qkv));
    OP(PA_OP_ATTENTION, l, n, attention(bc, b, from, local ? hp->sliding_window : 0));
    pa_fwd_attn_out_postnorm(c, b, l); /* x += postnorm(Wo att) */
    /* feed-forward: x += postnorm(W_down (gelu(W_gate n) * (W_up n))) */
    if (hp->n_expert > 0)
      ffn_with_experts(c, b, l);
    else
      pa_fwd_ffn(c, b, l, PA_GATE_GELU_TANH, true);
    if (hp->n_embd_per_layer > 0) per_layer_block(c, b, l);
    if (L->out_scale != 1.0f) OP(PA_OP_FFN_RESIDUAL, l, n, scale(bc, PA_BUF_X, L->out_scale, E, n));
    pa_layer_done(c, l, n);
  }
  pa_fwd_end(c, b);
}
