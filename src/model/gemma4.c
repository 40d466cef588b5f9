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
 * sizes and KV head counts (pa_layer_attn).
 *   x = embed(tokens) * sqrt(n_embd)
 *   per layer: x += postnorm(Wo · attention(...)),  window and RoPE by layer
 *              x += postnorm(W_down · (gelu(W_gate·n) * (W_up·n)))
 *              x *= layer scalar
 *   logits = softcap(W_out · rmsnorm(x))
 * Each step is one op of the context's backend (backend/backend.h). */
#include "model/model.h"

#define OP(op, layer, n_tok, call) PA_PROF(c, b, op, layer, n_tok, be->call)

void pa_forward_gemma4(struct pa_context *c, const pa_fwd_batch *b) {
  const struct pa_model *m = c->model;
  const pa_hparams *hp = &m->hp;
  const pa_backend_ops *be = c->be->ops;
  pa_bctx *bc = c->bc;
  const int32_t n = b->n;
  const int64_t E = hp->n_embd;

  pa_fwd_begin(c, b, hp->embed_scale);
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
    pa_fwd_ffn(c, b, l, PA_GATE_GELU_TANH, true);
    if (L->out_scale != 1.0f) OP(PA_OP_FFN_RESIDUAL, l, n, scale(bc, PA_BUF_X, L->out_scale, E, n));
    pa_layer_done(c, l, n);
  }
  pa_fwd_end(c, b);
}
