/* forward.c: the steps the families' forward passes share (model.h
 * "shared steps"): the embeddings and RoPE tables before the first layer,
 * the output after the last, Gemma's normed attention output, and the
 * gated feed-forward block. Each step is one or more ops of the context's
 * backend, timed by PA_PROF like the families' own. */
#include "model/model.h"

#define OP(op, layer, n_tok, call) PA_PROF(c, b, op, layer, n_tok, be->call)

void pa_fwd_begin(struct pa_context *c, const pa_fwd_batch *b, float embed_scale) {
  const pa_backend_ops *be = c->be->ops;
  pa_bctx *bc = c->bc;
  OP(PA_OP_EMBED, -1, b->n, embed(bc, b, &c->model->tok_embd, embed_scale));
  OP(PA_OP_ROPE_TABLE, -1, b->n, begin(bc, b)); /* RoPE tables of the positions */
}

void pa_fwd_end(struct pa_context *c, const pa_fwd_batch *b) {
  const struct pa_model *m = c->model;
  const pa_backend_ops *be = c->be->ops;
  pa_bctx *bc = c->bc;
  if (be->layer) be->layer(bc, m->hp.n_layer);
  if (c->pooling) /* an embedding context: the normed hidden states, no logits */
    OP(PA_OP_OUTPUT, -1, b->n_out, hidden(bc, b, m->output_norm, c->hidden));
  else
    OP(PA_OP_OUTPUT, -1, b->n_out, logits(bc, b, m->output_norm, &m->output, c->logits));
}

void pa_fwd_attn_out_postnorm(struct pa_context *c, const pa_fwd_batch *b, int l) {
  const pa_layer *L = &c->model->layers[l];
  const int64_t E = c->model->hp.n_embd;
  const pa_backend_ops *be = c->be->ops;
  pa_bctx *bc = c->bc;
  const int32_t n = b->n;
  const pa_matmul_desc o = pa_mm(&L->wo, PA_BUF_ATT, PA_BUF_XB);
  OP(PA_OP_O, l, n, matmul(bc, b, &o));
  OP(PA_OP_POST_ATTN_NORM, l, n, rms_norm(bc, PA_BUF_XB, PA_BUF_XB, L->post_attn_norm, E, n));
  OP(PA_OP_ATTN_RESIDUAL, l, n, add(bc, PA_BUF_X, PA_BUF_XB, E, n));
}

void pa_fwd_ffn(struct pa_context *c, const pa_fwd_batch *b, int l, pa_gate gate, bool post_norm) {
  const pa_layer *L = &c->model->layers[l];
  const int64_t E = c->model->hp.n_embd;
  const pa_backend_ops *be = c->be->ops;
  pa_bctx *bc = c->bc;
  const int32_t n = b->n;
  pa_matmul_desc up = pa_mm2(&L->w_gate, &L->w_up, PA_BUF_X, PA_BUF_H1, PA_BUF_H2);
  up.in_norm = L->ffn_norm;
  up.gate = gate;
  OP(PA_OP_GATE_UP, l, n, matmul(bc, b, &up));
  pa_matmul_desc down = pa_mm(&L->w_down, PA_BUF_H1, PA_BUF_XB);
  if (!post_norm) down.residual = PA_BUF_X; /* x += W_down h inside the matmul */
  OP(PA_OP_DOWN, l, n, matmul(bc, b, &down));
  if (post_norm) {
    OP(PA_OP_POST_FFN_NORM, l, n, rms_norm(bc, PA_BUF_XB, PA_BUF_XB, L->post_ffn_norm, E, n));
    OP(PA_OP_FFN_RESIDUAL, l, n, add(bc, PA_BUF_X, PA_BUF_XB, E, n));
  }
}
