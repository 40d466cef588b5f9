/* gemma3.c: the forward pass of Gemma 3 and Gemma 2 (the same layer
 * without the q/k head norms, with the attention scores and the logits
 * soft-capped inside the backend's ops, hp->attn_softcap and
 * hp->final_softcap; its local layers are every other one from the first,
 * with the global RoPE base). Gemma 3's differences from Llama: embeddings
 * scaled by sqrt(n_embd); per-head RMS norms of q and k; norms after the
 * attention and the FFN as well as before (the GGUF weights already hold
 * Gemma's 1 + w); GELU (tanh) gating; layers alternate between sliding-window
 * attention with a local RoPE base and global attention with the long one.
 *   x = embed(tokens) * sqrt(n_embd)
 *   per layer: x += postnorm(Wo · attention(...)),  window and RoPE base by layer
 *              x += postnorm(W_down · (gelu(W_gate·n) * (W_up·n)))
 *   logits = W_out · rmsnorm(x)        (W_out tied to the embeddings)
 * Each step is one op of the context's backend (backend/backend.h). */
#include "model/model.h"

#define OP(op, layer, n_tok, call) PA_PROF(c, b, op, layer, n_tok, be->call)

void pa_forward_gemma3(struct pa_context *c, const pa_fwd_batch *b) {
  const struct pa_model *m = c->model;
  const pa_hparams *hp = &m->hp;
  const pa_backend_ops *be = c->be->ops;
  pa_bctx *bc = c->bc;
  const int32_t n = b->n;
  const int64_t E = hp->n_embd;

  OP(PA_OP_EMBED, -1, n, embed(bc, b, &m->tok_embd, hp->embed_scale));
  OP(PA_OP_ROPE_TABLE, -1, n, begin(bc, b));
  for (int l = 0; l < hp->n_layer; l++) {
    const pa_layer *L = &m->layers[l];
    if (be->layer) be->layer(bc, l);
    const bool local = hp->swa_layer[l];
    /* attention: q, k, v = W rmsnorm(x), head norms of q and k (Gemma 3), RoPE (the
     * local or global base), k and v into the cache */
    pa_matmul_desc qkv = pa_mm3(&L->wq, &L->wk, &L->wv, PA_BUF_X, PA_BUF_Q, PA_BUF_K, PA_BUF_V);
    qkv.in_norm = L->attn_norm;
    qkv.head_norm[0] = L->q_norm, qkv.head_norm[1] = L->k_norm;
    qkv.rope[0] = qkv.rope[1] = local ? PA_ROPE_SWA : PA_ROPE_GLOBAL;
    qkv.kv_layer = l;
    OP(PA_OP_QKV, l, n, matmul(bc, b, &qkv));
    OP(PA_OP_ATTENTION, l, n, attention(bc, b, l, local ? hp->sliding_window : 0));
    const pa_matmul_desc o = pa_mm(&L->wo, PA_BUF_ATT, PA_BUF_XB);
    OP(PA_OP_O, l, n, matmul(bc, b, &o));
    OP(PA_OP_POST_ATTN_NORM, l, n, rms_norm(bc, PA_BUF_XB, PA_BUF_XB, L->post_attn_norm, E, n));
    OP(PA_OP_ATTN_RESIDUAL, l, n, add(bc, PA_BUF_X, PA_BUF_XB, E, n));
    /* feed-forward: x += postnorm(W_down (gelu(W_gate n) * (W_up n))) */
    pa_matmul_desc up = pa_mm2(&L->w_gate, &L->w_up, PA_BUF_X, PA_BUF_H1, PA_BUF_H2);
    up.in_norm = L->ffn_norm;
    up.gate = PA_GATE_GELU_TANH;
    OP(PA_OP_GATE_UP, l, n, matmul(bc, b, &up));
    const pa_matmul_desc down = pa_mm(&L->w_down, PA_BUF_H1, PA_BUF_XB);
    OP(PA_OP_DOWN, l, n, matmul(bc, b, &down));
    OP(PA_OP_POST_FFN_NORM, l, n, rms_norm(bc, PA_BUF_XB, PA_BUF_XB, L->post_ffn_norm, E, n));
    OP(PA_OP_FFN_RESIDUAL, l, n, add(bc, PA_BUF_X, PA_BUF_XB, E, n));
    pa_layer_done(c, l, n);
  }
  if (be->layer) be->layer(bc, hp->n_layer);
  if (c->pooling) /* an embedding context: the normed hidden states, no logits */
    OP(PA_OP_OUTPUT, -1, b->n_out, hidden(bc, b, m->output_norm, c->hidden));
  else
    OP(PA_OP_OUTPUT, -1, b->n_out, logits(bc, b, m->output_norm, &m->output, c->logits));
}
