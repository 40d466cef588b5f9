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

  pa_fwd_begin(c, b, hp->embed_scale);
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
    pa_fwd_attn_out_postnorm(c, b, l); /* x += postnorm(Wo att) */
    /* feed-forward: x += postnorm(W_down (gelu(W_gate n) * (W_up n))) */
    pa_fwd_ffn(c, b, l, PA_GATE_GELU_TANH, true);
    pa_layer_done(c, l, n);
  }
  pa_fwd_end(c, b);
}
