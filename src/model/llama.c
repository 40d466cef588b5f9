/* llama.c: the forward pass of the Llama family: Llama 2/3, Mistral,
 * TinyLlama, SmolLM2 (arch "llama"), Qwen2 (adds q/k/v biases) and Qwen3
 * (adds per-head RMS norms of q and k). Pre-norm decoder:
 *   x = embed(tokens)
 *   per layer: x += Wo · attention(rope(Wq·n), rope(Wk·n), Wv·n),  n = rmsnorm(x)
 *              x += W_down · (silu(W_gate·n) * (W_up·n)),            n = rmsnorm(x)
 *   logits = W_out · rmsnorm(x)                                              */
#include "kernels/ops.h"
#include "model/model.h"

/* qwen2's q, k, v biases */
static void add_qkv_bias(struct pa_context *c, const pa_layer *L, int32_t n) {
  pa_add_bias(c->s.q, L->bq, n, L->wq.rows);
  pa_add_bias(c->s.k, L->bk, n, L->wk.rows);
  pa_add_bias(c->s.v, L->bv, n, L->wv.rows);
}

void pa_forward_llama(struct pa_context *c, const pa_fwd_batch *b) {
  const struct pa_model *m = c->model;
  const pa_hparams *hp = &m->hp;
  const int32_t n = b->n;
  const int64_t E = hp->n_embd;
  pa_scratch *s = &c->s;

  PA_PROF(c, b, PA_OP_EMBED, -1, n, pa_embed(c, b, 1.0f));
  PA_PROF(c, b, PA_OP_ROPE_TABLE, -1, n, pa_rope_prepare(c, b));
  for (int l = 0; l < hp->n_layer; l++) {
    const pa_layer *L = &m->layers[l];
    /* attention block (PA_PROF: `pasada profile` times each op when on) */
    PA_PROF(c, b, PA_OP_ATTN_NORM, l, n, pa_norm_rows(c, s->xb, s->x, L->attn_norm, n, E));
    PA_PROF(c, b, PA_OP_QKV, l, n, pa_qkv(c, L, s->xb, n));
    if (L->bq || L->bk || L->bv) PA_PROF(c, b, PA_OP_QKV_BIAS, l, n, add_qkv_bias(c, L, n)); /* qwen2 */
    if (L->q_norm) { /* qwen3 */
      PA_PROF(c, b, PA_OP_Q_NORM, l, n, pa_head_norm(c, s->q, L->q_norm, n, hp->n_head));
      PA_PROF(c, b, PA_OP_K_NORM, l, n, pa_head_norm(c, s->k, L->k_norm, n, hp->n_head_kv));
    }
    PA_PROF(c, b, PA_OP_ROPE, l, n, pa_rope_apply(c, b, false));
    PA_PROF(c, b, PA_OP_ATTENTION, l, n, pa_attention(c, b, l, 0));
    PA_PROF(c, b, PA_OP_O, l, n, pa_linear(c, &L->wo, s->att, s->xb, n));
    PA_PROF(c, b, PA_OP_ATTN_RESIDUAL, l, n, pa_add_rows(c, s->x, s->xb, n, E));
    /* feed-forward block */
    PA_PROF(c, b, PA_OP_FFN_NORM, l, n, pa_norm_rows(c, s->xb, s->x, L->ffn_norm, n, E));
    pa_ffn(c, L, s->xb, s->xb, n);
    PA_PROF(c, b, PA_OP_FFN_RESIDUAL, l, n, pa_add_rows(c, s->x, s->xb, n, E));
    pa_layer_done(c, l, n);
  }
  pa_output(c, b);
}
