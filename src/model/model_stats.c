/* model_stats.c: the per-token costs of a loaded model for `pasada bench`:
 * the bytes of weights a token reads, the multiply-adds its matrix products
 * and its attention do, and the KV rows attention reads. Read-only use of the
 * model's structs (model/model.h); the numbers follow the forward pass of
 * llama.c / gemma3.c (every layer matrix and its bias once per token, of a
 * mixture of experts the router and n_expert_used experts, the output matrix
 * once per token whose logits are wanted, one embedding row per token). */
#include <stdio.h>
#include <string.h>

#include "model/model.h"

static void matrix_add(const pa_matrix *w, int64_t *params, int64_t *bytes) {
  if (!w->data) return;
  *params += w->rows * w->cols;
  *bytes += (int64_t)pa_matrix_bytes(w);
}

/* The F32 bias of a product with w's rows, when the layer has one. */
static int64_t bias_bytes(const float *b, const pa_matrix *w) {
  return b ? w->rows * (int64_t)sizeof(float) : 0;
}

void pasada_model_get_stats(const pasada_model *m, pasada_model_stats *out) {
  memset(out, 0, sizeof *out);
  if (m->vocab_only) return;
  const pa_hparams *hp = &m->hp;
  out->n_layer = hp->n_layer;
  /* bytes of layer matrices per type, to name the main one */
  int64_t by_type[PA_TYPE_COUNT] = {0};
  for (int l = 0; l < hp->n_layer; l++) {
    const pa_layer *L = &m->layers[l];
    const pa_matrix *mats[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
    for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++) {
      int64_t params = 0, bytes = 0;
      matrix_add(mats[i], &params, &bytes);
      out->n_params_layers += params;
      out->bytes_layers += bytes;
      if (mats[i]->data && (unsigned)mats[i]->type < PA_TYPE_COUNT) by_type[mats[i]->type] += bytes;
    }
    /* the products' biases (qwen2, bert, gpt-oss) and gpt-oss's sinks */
    out->bytes_layers += bias_bytes(L->bq, &L->wq) + bias_bytes(L->bk, &L->wk) + bias_bytes(L->bv, &L->wv) +
                         bias_bytes(L->bo, &L->wo) + bias_bytes(L->b_up, &L->w_up) +
                         bias_bytes(L->b_down, &L->w_down) + bias_bytes(L->router_b, &L->router) +
                         (L->attn_sinks ? hp->n_head * (int64_t)sizeof(float) : 0);
    if (!L->exp_gate) continue;
    /* experts: the router and n_expert_used experts (what a token reads),
     * with their biases (gpt-oss) */
    matrix_add(&L->router, &out->n_params_layers, &out->bytes_layers);
    out->bytes_layers += hp->n_expert_used * (bias_bytes(L->exp_gate_b, &L->exp_gate[0]) +
                                              bias_bytes(L->exp_up_b, &L->exp_up[0]) +
                                              bias_bytes(L->exp_down_b, &L->exp_down[0]));
    const pa_matrix *ex[] = {&L->exp_gate[0], &L->exp_up[0], &L->exp_down[0]};
    for (int i = 0; i < 3; i++) {
      int64_t params = 0, bytes = 0;
      matrix_add(ex[i], &params, &bytes);
      out->n_params_layers += params * hp->n_expert_used;
      out->bytes_layers += bytes * hp->n_expert_used;
      if ((unsigned)ex[i]->type < PA_TYPE_COUNT) by_type[ex[i]->type] += bytes * hp->n_expert_used;
    }
  }
  matrix_add(&m->output, &out->n_params_output, &out->bytes_output);
  out->bytes_embd_row = (int64_t)pa_row_size(m->tok_embd.type, m->tok_embd.cols);
  snprintf(out->output_type, sizeof out->output_type, "%s", pa_type_name(m->output.type));

  int main = -1, n_types = 0;
  for (int t = 0; t < PA_TYPE_COUNT; t++) {
    if (!by_type[t]) continue;
    n_types++;
    if (main < 0 || by_type[t] > by_type[main]) main = t;
  }
  out->mixed = n_types > 1;
  if (main >= 0) {
    snprintf(out->main_type, sizeof out->main_type, "%s", pa_type_name((uint32_t)main));
    const pa_type_traits *tr = pa_type_get((uint32_t)main);
    pa_type dot = tr ? tr->vec_dot_type : PA_TYPE_F32;
    out->int8_dot = dot == PA_TYPE_Q8_0 || dot == PA_TYPE_Q8_1 || dot == PA_TYPE_Q8_K;
  }

  const gguf_file *g = m->gguf;
  for (uint64_t i = 0; i < g->n_tensors; i++) out->bytes_file_tensors += (int64_t)g->tensors[i].nbytes;
}

void pasada_model_attention_cost(const pasada_model *m, int64_t pos, double *flops, int64_t *kv_rows) {
  const pa_hparams *hp = &m->hp;
  double f = 0;
  int64_t rows = 0;
  for (int l = 0; l < hp->n_layer; l++) {
    const pa_attn_shape a = pa_layer_attn(hp, l);
    const double per_position = 2.0 * hp->n_head * (double)(a.head_dim + a.head_dim_v);
    int64_t span = pos + 1;
    if (hp->sliding_window > 0 && hp->swa_layer[l] && span > hp->sliding_window) span = hp->sliding_window;
    rows += span;
    f += per_position * (double)span;
  }
  if (flops) *flops = f;
  if (kv_rows) *kv_rows = rows;
}
