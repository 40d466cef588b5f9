/* llama.c: the forward pass of the Llama family: Llama 2/3, Mistral,
 * TinyLlama, SmolLM2 (arch "llama"), Qwen2 (adds q/k/v biases) and Qwen3
 * (adds per-head RMS norms of q and k). Pre-norm decoder:
 *   x = embed(tokens)
 *   per layer: x += Wo · attention(rope(Wq·n), rope(Wk·n), Wv·n),  n = rmsnorm(x)
 *              x += W_down · (silu(W_gate·n) * (W_up·n)),            n = rmsnorm(x)
 *   logits = W_out · rmsnorm(x)                                              */
#include "kernels/ops.h"
#include "model/model.h"

void pa_forward_llama(struct pa_context *c, const pa_fwd_batch *b) {
  const struct pa_model *m = c->model;
  const pa_hparams *hp = &m->hp;
  const int32_t n = b->n;
  pa_scratch *s = &c->s;

  PA_PROF(c, b, PA_OP_EMBED, -1, n, pa_embed(c, b, 1.0f));
  PA_PROF(c, b, PA_OP_ROPE_TABLE, -1, n, pa_rope_prepare(c, b));
  for (int l = 0; l < hp->n_layer; l++) {
    const pa_layer *L = &m->layers[l];
    /* attention block (PA_PROF: `pasada profile` times each op when on):
     * norm, q/k/v (qwen2's biases, qwen3's head norms), RoPE, KV store */
    pa_attn_input(c, b, L, l, false);
    PA_PROF(c, b, PA_OP_ATTENTION, l, n, pa_attention(c, b, l, 0));
    /* the residual adds ride in the products' jobs (pa_linear_add) */
    PA_PROF(c, b, PA_OP_O, l, n, pa_linear_add(c, &L->wo, s->att, s->xb, s->x, n));
    /* feed-forward block */
    pa_ffn(c, L, s->x, L->ffn_norm, s->xb, s->x, n); /* with its norm */
    pa_layer_done(c, l, n);
  }
  pa_output(c, b);
}
