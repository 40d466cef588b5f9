/* llama.c: the forward pass of the Llama family: Llama 2/3, Mistral,
 * TinyLlama, SmolLM2 (arch "llama"), Qwen2 (adds q/k/v biases), Qwen3
 * (adds per-head RMS norms of q and k), Phi-3 (its fused QKV and gate-up
 * tensors are row views, loader.c; LongRoPE factors in the RoPE tables; an
 * optional window over every layer), and the mixtures of experts Qwen3-MoE
 * (arch "qwen3moe") and Mixtral (arch "llama" with expert_count > 0), whose
 * FFN is the backend's moe op, and gpt-oss (q/k/v/o biases, attention
 * sinks, every other layer windowed, YaRN in the RoPE tables, experts with
 * biases and a clamped SwiGLU). Pre-norm decoder:
 *   x = embed(tokens)
 *   per layer: x += Wo · attention(rope(Wq·n), rope(Wk·n), Wv·n),  n = rmsnorm(x)
 *              x += W_down · (silu(W_gate·n) * (W_up·n)),            n = rmsnorm(x)
 *   logits = W_out · rmsnorm(x)
 * Each step is one op of the context's backend (backend/backend.h), timed
 * by `pasada profile` when it is on. */
#include "model/model.h"

#define OP(op, layer, n_tok, call) PA_PROF(c, b, op, layer, n_tok, be->call)

void pa_forward_llama(struct pa_context *c, const pa_fwd_batch *b) {
  const struct pa_model *m = c->model;
  const pa_hparams *hp = &m->hp;
  const pa_backend_ops *be = c->be->ops;
  pa_bctx *bc = c->bc;
  const int32_t n = b->n;
  const pa_gate gate = hp->act == PA_ACT_SILU ? PA_GATE_SILU : PA_GATE_GELU_TANH;

  pa_fwd_begin(c, b, 1.0f);
  for (int l = 0; l < hp->n_layer; l++) {
    const pa_layer *L = &m->layers[l];
    if (be->layer) be->layer(bc, l);
    /* attention: q, k, v = W rmsnorm(x) (+ biases, head norms), RoPE on q
     * and k, k and v into the cache; then x += Wo attention(q, cache) */
    pa_matmul_desc qkv = pa_mm3(&L->wq, &L->wk, &L->wv, PA_BUF_X, PA_BUF_Q, PA_BUF_K, PA_BUF_V);
    qkv.in_norm = L->attn_norm;
    qkv.bias[0] = L->bq, qkv.bias[1] = L->bk, qkv.bias[2] = L->bv;
    qkv.head_norm[0] = L->q_norm, qkv.head_norm[1] = L->k_norm;
    qkv.rope[0] = qkv.rope[1] = PA_ROPE_GLOBAL;
    qkv.kv_layer = l;
    OP(PA_OP_QKV, l, n, matmul(bc, b, &qkv));
    OP(PA_OP_ATTENTION, l, n, attention(bc, b, l, hp->swa_layer[l] ? hp->sliding_window : 0));
    pa_matmul_desc o = pa_mm(&L->wo, PA_BUF_ATT, PA_BUF_XB);
    o.bias[0] = L->bo; /* gpt-oss */
    o.residual = PA_BUF_X;
    OP(PA_OP_O, l, n, matmul(bc, b, &o));
    if (hp->n_expert > 0) {
      /* x += sum over the chosen experts e of w_e W_down[e] (silu(W_gate[e] n) * (W_up[e] n));
       * both families renormalise the chosen weights (Mixtral: softmax over
       * the top k; Qwen3-MoE: norm_topk_prob, true in every released model
       * and fixed so by llama.cpp; gpt-oss: softmax over the top k's logits,
       * biases on the router and every expert, the clamped SwiGLU) */
      const pa_moe_desc moe = {.in = PA_BUF_X, .out = PA_BUF_XB, .in_norm = L->ffn_norm, .router = &L->router,
                               .n_expert = hp->n_expert, .n_used = hp->n_expert_used, .norm_topk = true,
                               .gate = L->exp_gate, .up = L->exp_up, .down = L->exp_down,
                               .act = hp->arch == PA_ARCH_GPT_OSS ? PA_GATE_SWIGLU_OAI : gate,
                               .residual = PA_BUF_X, .router_bias = L->router_b, .gate_bias = L->exp_gate_b,
                               .up_bias = L->exp_up_b, .down_bias = L->exp_down_b};
      OP(PA_OP_MOE, l, n, moe(bc, b, &moe));
      pa_layer_done(c, l, n);
      continue;
    }
    /* feed-forward: h = silu(W_gate n) * (W_up n), n = rmsnorm(x); x += W_down h */
    pa_fwd_ffn(c, b, l, gate, false);
    pa_layer_done(c, l, n);
  }
  pa_fwd_end(c, b);
}
