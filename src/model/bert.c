/* bert.c: the forward pass of BERT encoders (arch "bert": all-MiniLM,
 * BGE, ...), bidirectional and post-norm:
 *   x = LayerNorm(embed(tokens) + positions[pos] + token_types[0])
 *   per layer: x = LayerNorm(x + Wo · attention(Wq·x, Wk·x, Wv·x) + bo)
 *              x = LayerNorm(x + W_down · gelu(W_up·x + b_up) + b_down)
 * every product with its bias, attention over the whole input (no RoPE,
 * no mask: the input is one sequence's tokens, in one pass), GELU with the
 * exact erf. The output is the hidden states an embedding context pools;
 * there is no language-model head. */
#include "model/model.h"

#define OP(op, layer, n_tok, call) PA_PROF(c, b, op, layer, n_tok, be->call)

void pa_forward_bert(struct pa_context *c, const pa_fwd_batch *b) {
  const struct pa_model *m = c->model;
  const pa_hparams *hp = &m->hp;
  const pa_backend_ops *be = c->be->ops;
  pa_bctx *bc = c->bc;
  const int32_t n = b->n, E = hp->n_embd;

  OP(PA_OP_EMBED, -1, n, embed(bc, b, &m->tok_embd, 1.0f));
  OP(PA_OP_EMBED, -1, n, embed_add(bc, b, &m->pos_embd, true));   /* learned positions */
  OP(PA_OP_EMBED, -1, n, embed_add(bc, b, &m->type_embd, false)); /* token type 0 ("sentence A") */
  OP(PA_OP_EMBED, -1, n, layer_norm(bc, PA_BUF_X, PA_BUF_X, m->embd_norm, m->embd_norm_b, E, n));
  OP(PA_OP_ROPE_TABLE, -1, n, begin(bc, b));
  for (int l = 0; l < hp->n_layer; l++) {
    const pa_layer *L = &m->layers[l];
    if (be->layer) be->layer(bc, l);
    /* attention: q, k, v = W x + b (k and v into the cache), over every
     * position of the sequence; x = LayerNorm(x + Wo att + bo) */
    pa_matmul_desc qkv = pa_mm3(&L->wq, &L->wk, &L->wv, PA_BUF_X, PA_BUF_Q, PA_BUF_K, PA_BUF_V);
    qkv.bias[0] = L->bq, qkv.bias[1] = L->bk, qkv.bias[2] = L->bv;
    qkv.kv_layer = l;
    OP(PA_OP_QKV, l, n, matmul(bc, b, &qkv));
    OP(PA_OP_ATTENTION, l, n, attention(bc, b, l, 0));
    pa_matmul_desc o = pa_mm(&L->wo, PA_BUF_ATT, PA_BUF_XB);
    o.bias[0] = L->bo;
    o.residual = PA_BUF_X;
    OP(PA_OP_O, l, n, matmul(bc, b, &o));
    OP(PA_OP_POST_ATTN_NORM, l, n,
       layer_norm(bc, PA_BUF_X, PA_BUF_X, L->attn_out_norm, L->attn_out_norm_b, E, n));
    /* feed-forward: x = LayerNorm(x + W_down gelu(W_up x + b_up) + b_down) */
    pa_matmul_desc up = pa_mm(&L->w_up, PA_BUF_X, PA_BUF_H1);
    up.bias[0] = L->b_up;
    up.unary = PA_UNARY_GELU_ERF;
    OP(PA_OP_GATE_UP, l, n, matmul(bc, b, &up));
    pa_matmul_desc down = pa_mm(&L->w_down, PA_BUF_H1, PA_BUF_XB);
    down.bias[0] = L->b_down;
    down.residual = PA_BUF_X;
    OP(PA_OP_DOWN, l, n, matmul(bc, b, &down));
    OP(PA_OP_POST_FFN_NORM, l, n,
       layer_norm(bc, PA_BUF_X, PA_BUF_X, L->out_norm, L->out_norm_b, E, n));
    pa_layer_done(c, l, n);
  }
  if (be->layer) be->layer(bc, hp->n_layer);
  OP(PA_OP_OUTPUT, -1, b->n_out,
     hidden(bc, b, NULL, c->hidden)); /* the last LayerNorm was the output's */
}
