/* gemma3.c: the forward pass of Gemma 3. Differences from Llama: embeddings
 * scaled by sqrt(n_embd); per-head RMS norms of q and k; norms after the
 * attention and the FFN as well as before (the GGUF weights already hold
 * Gemma's 1 + w); GELU (tanh) gating; layers alternate between sliding-window
 * attention with a local RoPE base and global attention with the long one.
 *   x = embed(tokens) * sqrt(n_embd)
 *   per layer: x += postnorm(Wo · attention(...)),  window and RoPE base by layer
 *              x += postnorm(W_down · (gelu(W_gate·n) * (W_up·n)))
 *   logits = W_out · rmsnorm(x)        (W_out tied to the embeddings)        */
#include <math.h>

#include "kernels/ops.h"
#include "model/model.h"

void pa_forward_gemma3(struct pa_context *c, const pa_fwd_batch *b) {
  const struct pa_model *m = c->model;
  const pa_hparams *hp = &m->hp;
  const int32_t n = b->n;
  const int64_t E = hp->n_embd;
  pa_scratch *s = &c->s;

  PA_PROF(c, b, PA_OP_EMBED, -1, n, pa_embed(c, b, hp->embed_scale));
  PA_PROF(c, b, PA_OP_ROPE_TABLE, -1, n, pa_rope_prepare(c, b));
  for (int l = 0; l < hp->n_layer; l++) {
    const pa_layer *L = &m->layers[l];
    const bool local = hp->swa_layer[l];
    /* attention block (PA_PROF: `pasada profile` times each op when on) */
    pa_attn_input(c, b, L, l, local); /* norm, q/k/v, head norms, RoPE, KV store */
    PA_PROF(c, b, PA_OP_ATTENTION, l, n, pa_attention(c, b, l, local ? hp->sliding_window : 0));
    PA_PROF(c, b, PA_OP_O, l, n, pa_linear(c, &L->wo, s->att, s->xb, n));
    PA_PROF(c, b, PA_OP_POST_ATTN_NORM, l, n, pa_norm_rows(c, s->xb, s->xb, L->post_attn_norm, n, E));
    PA_PROF(c, b, PA_OP_ATTN_RESIDUAL, l, n, pa_add_rows(c, s->x, s->xb, n, E));
    /* feed-forward block */
    pa_ffn(c, L, s->x, L->ffn_norm, s->xb, NULL, n); /* with its norm */
    PA_PROF(c, b, PA_OP_POST_FFN_NORM, l, n, pa_norm_rows(c, s->xb, s->xb, L->post_ffn_norm, n, E));
    PA_PROF(c, b, PA_OP_FFN_RESIDUAL, l, n, pa_add_rows(c, s->x, s->xb, n, E));
    pa_layer_done(c, l, n);
  }
  pa_output(c, b);
}
