/* qwen35.c: the forward pass of Qwen3.5 (arch "qwen35"), a hybrid of
 * linear-attention layers (Gated DeltaNet: a recurrent state per sequence,
 * kept by the backend, backend.h pa_delta_desc) and, every
 * full_attention_interval-th layer, gated attention layers (Qwen3's
 * attention with q/k head norms and partial RoPE, its output multiplied by
 * sigmoid of a gate projected beside q). The GGUF holds the (1 + w) of
 * its norms already, so they are plain RMS norms here.
 *   x = embed(tokens)
 *   per layer, n = rmsnorm(x):
 *     recurrent: qkv, z, b, a = W n;  x += W_out deltanet(qkv, z, b, a; state)
 *     attention: q, k, v, gate = W n; x += Wo (attention(q, cache) * sigmoid(gate))
 *     x += W_down (silu(W_gate n) * (W_up n)),  n = rmsnorm(x)
 *   logits = W_out rmsnorm(x)
 * Qwen3.5-MoE (arch "qwen35moe", hp.n_expert > 0) has, as every FFN, a
 * mixture of experts (softmax router, top k renormalised) plus a shared
 * expert scaled by sigmoid of its own gate's product:
 *     x += moe(n) + sigmoid(w_sg . n) W_down (silu(W_gate n) * (W_up n))
 * run as: h = silu(W_gate n) * (W_up n); h *= sigmoid(w_sg . n) (one gate
 * per token, sigmoid_mul); x += moe(n); x += W_down h (the scalar moved
 * through the linear W_down).
 * A multi-token-prediction context runs the model's MTP layer instead
 * (pa_forward_qwen35_mtp, below; runtime/speculative.h). */
#include "model/model.h"

#define OP(op, layer, n_tok, call) PA_PROF(c, b, op, layer, n_tok, be->call)

/* qwen35moe's FFN of layer l (the formula above). */
static void moe_ffn(struct pa_context *c, const pa_fwd_batch *b, int l) {
  const pa_hparams *hp = &c->model->hp;
  const pa_layer *L = &c->model->layers[l];
  const pa_backend_ops *be = c->be->ops;
  pa_bctx *bc = c->bc;
  const int32_t n = b->n;
  pa_matmul_desc sh = pa_mm2(&L->w_gate, &L->w_up, PA_BUF_X, PA_BUF_H1, PA_BUF_H2);
  sh.in_norm = L->ffn_norm;
  sh.gate = PA_GATE_SILU;
  OP(PA_OP_GATE_UP, l, n, matmul(bc, b, &sh));
  pa_matmul_desc sg = pa_mm(&L->shexp_gate, PA_BUF_X, PA_BUF_V);
  sg.in_norm = L->ffn_norm;
  OP(PA_OP_GATE_UP, l, n, matmul(bc, b, &sg));
  OP(PA_OP_GATE_UP, l, n, sigmoid_mul(bc, PA_BUF_H1, PA_BUF_V, hp->n_ff, 1, n));
  const pa_moe_desc moe = {.in = PA_BUF_X, .out = PA_BUF_XB, .in_norm = L->ffn_norm, .router = &L->router,
                           .n_expert = hp->n_expert, .n_used = hp->n_expert_used, .norm_topk = true,
                           .gate = L->exp_gate, .up = L->exp_up, .down = L->exp_down, .act = PA_GATE_SILU,
                           .residual = PA_BUF_X};
  OP(PA_OP_MOE, l, n, moe(bc, b, &moe));
  pa_matmul_desc down = pa_mm(&L->w_down, PA_BUF_H1, PA_BUF_XB);
  down.residual = PA_BUF_X;
  OP(PA_OP_DOWN, l, n, matmul(bc, b, &down));
}

/* The gated attention of layer l (its weights), over the cache of kv_l. */
static void attention_block(struct pa_context *c, const pa_fwd_batch *b, int l, int kv_l) {
  const pa_hparams *hp = &c->model->hp;
  const pa_layer *L = &c->model->layers[l];
  const pa_backend_ops *be = c->be->ops;
  pa_bctx *bc = c->bc;
  const int32_t n = b->n;
  pa_matmul_desc qkv = pa_mm3(&L->wq, &L->wk, &L->wv, PA_BUF_X, PA_BUF_Q, PA_BUF_K, PA_BUF_V);
  qkv.in_norm = L->attn_norm;
  qkv.head_norm[0] = L->q_norm, qkv.head_norm[1] = L->k_norm;
  qkv.rope[0] = qkv.rope[1] = PA_ROPE_GLOBAL;
  qkv.kv_layer = kv_l;
  OP(PA_OP_QKV, l, n, matmul(bc, b, &qkv));
  pa_matmul_desc gate = pa_mm(&L->wq_gate, PA_BUF_X, PA_BUF_H1);
  gate.in_norm = L->attn_norm;
  OP(PA_OP_QKV, l, n, matmul(bc, b, &gate));
  OP(PA_OP_ATTENTION, l, n, attention(bc, b, kv_l, 0));
  const int64_t O = (int64_t)hp->n_head * hp->head_dim_v;
  OP(PA_OP_ATTENTION, l, n, sigmoid_mul(bc, PA_BUF_ATT, PA_BUF_H1, O, O, n));
  pa_matmul_desc o = pa_mm(&L->wo, PA_BUF_ATT, PA_BUF_XB);
  o.residual = PA_BUF_X;
  OP(PA_OP_O, l, n, matmul(bc, b, &o));
}

/* The multi-token-prediction layer (block n_layer) of an MTP context, over
 * the batch's tokens and the hidden states they pair with (c->mtp_in):
 *   x = W_e rmsnorm(embed(token)) * enorm + W_h rmsnorm(h) * hnorm
 *       (eh_proj's two column halves: [embedding, hidden])
 *   x = the layer (gated attention over this context's cache, the FFN)
 *   logits = W_out rmsnorm(x) * norm;  hidden_out = rmsnorm(x) * norm */
void pa_forward_qwen35_mtp(struct pa_context *c, const pa_fwd_batch *b) {
  const struct pa_model *m = c->model;
  const pa_hparams *hp = &m->hp;
  const pa_backend_ops *be = c->be->ops;
  pa_bctx *bc = c->bc;
  const int32_t n = b->n, l = hp->n_layer;
  const int64_t E = hp->n_embd;
  pa_fwd_begin(c, b, 1.0f);
  pa_matmul_desc fe = pa_mm(&m->mtp_eh, PA_BUF_X, PA_BUF_H1);
  fe.in_norm = m->mtp_enorm;
  OP(PA_OP_EMBED, -1, n, matmul(bc, b, &fe));
  OP(PA_OP_EMBED, -1, n,
     upload(bc, PA_BUF_XB, 0, c->mtp_in + (size_t)c->fwd_first * (size_t)E, (int64_t)n * E));
  pa_matmul_desc fh = pa_mm(&m->mtp_eh_h, PA_BUF_XB, PA_BUF_X);
  fh.in_norm = m->mtp_hnorm;
  OP(PA_OP_EMBED, -1, n, matmul(bc, b, &fh));
  OP(PA_OP_EMBED, -1, n, add(bc, PA_BUF_X, PA_BUF_H1, E, n));
  attention_block(c, b, l, 0);
  if (hp->n_expert > 0)
    moe_ffn(c, b, l);
  else
    pa_fwd_ffn(c, b, l, PA_GATE_SILU, false);
  OP(PA_OP_OUTPUT, -1, b->n_out, logits(bc, b, m->mtp_norm, &m->output, c->logits));
  OP(PA_OP_OUTPUT, -1, b->n_out, hidden(bc, b, m->mtp_norm, c->hidden_out));
}

void pa_forward_qwen35(struct pa_context *c, const pa_fwd_batch *b) {
  const struct pa_model *m = c->model;
  const pa_hparams *hp = &m->hp;
  const pa_backend_ops *be = c->be->ops;
  pa_bctx *bc = c->bc;
  const int32_t n = b->n;

  pa_fwd_begin(c, b, 1.0f);
  for (int l = 0; l < hp->n_layer; l++) {
    const pa_layer *L = &m->layers[l];
    if (be->layer) be->layer(bc, l);
    if (hp->recurrent[l]) {
      /* the mixed q, k, v (into Q), z (K) and beta (V) of rmsnorm(x), alpha (H1) */
      pa_matmul_desc in = pa_mm3(&L->ssm_qkv, &L->ssm_z, &L->ssm_beta, PA_BUF_X, PA_BUF_Q, PA_BUF_K, PA_BUF_V);
      in.in_norm = L->attn_norm;
      OP(PA_OP_QKV, l, n, matmul(bc, b, &in));
      pa_matmul_desc al = pa_mm(&L->ssm_alpha, PA_BUF_X, PA_BUF_H1);
      al.in_norm = L->attn_norm;
      OP(PA_OP_QKV, l, n, matmul(bc, b, &al));
      const pa_delta_desc dn = {.layer = l, .qkv = PA_BUF_Q, .z = PA_BUF_K, .beta = PA_BUF_V, .alpha = PA_BUF_H1,
                                .out = PA_BUF_ATT, .conv_w = L->ssm_conv, .a = L->ssm_a, .dt_bias = L->ssm_dt,
                                .norm = L->ssm_norm};
      OP(PA_OP_ATTENTION, l, n, delta_net(bc, b, &dn));
      pa_matmul_desc o = pa_mm(&L->ssm_out, PA_BUF_ATT, PA_BUF_XB);
      o.residual = PA_BUF_X;
      OP(PA_OP_O, l, n, matmul(bc, b, &o));
    } else {
      attention_block(c, b, l, l);
    }
    if (hp->n_expert > 0)
      moe_ffn(c, b, l);
    else
      pa_fwd_ffn(c, b, l, PA_GATE_SILU, false);
    pa_layer_done(c, l, n);
  }
  pa_fwd_end(c, b);
}
