/* attention.c: causal attention of a batch's tokens over the paged KV
 * cache (pa_attention in model.h). Each (token, head) pair is one work item:
 * scores over the sequence's positions, softmax, weighted sum of V. A
 * token's result does not depend on the other tokens of the batch, so
 * batched and one-by-one decoding give the same bits. */
#include <string.h>

#include "base/base.h"
#include "kernels/ops.h"
#include "model/model.h"

typedef struct {
  struct pa_context *c;
  const pa_fwd_batch *b;
  int layer;
  int32_t window;
} attn_job;

static void attention_worker(void *arg, int ith, int nth) {
  attn_job *j = arg;
  struct pa_context *c = j->c;
  const pa_kv_cache *kv = &c->kv;
  const pa_hparams *hp = &c->model->hp;
  const int hd = hp->head_dim, hdv = hp->head_dim_v, group = hp->n_head / hp->n_head_kv;
  const int64_t Q = (int64_t)hp->n_head * hd, O = (int64_t)hp->n_head * hdv;
  float *scores = c->s.scores + (size_t)ith * (size_t)c->n_ctx;
  long lo, hi;
  pa_split((long)j->b->n * hp->n_head, ith, nth, &lo, &hi);
  for (long item = lo; item < hi; item++) {
    int32_t t = (int32_t)(item / hp->n_head);
    int h = (int)(item % hp->n_head), g = h / group;
    int32_t pos = j->b->pos[t], seq = j->b->seq[t];
    int32_t first = 0;
    if (j->window > 0 && pos - j->window + 1 > 0) first = pos - j->window + 1;
    const float *q = c->s.q + t * Q + (int64_t)h * hd;
    int32_t n = pos - first + 1;
    for (int32_t p = 0; p < n; p++)
      scores[p] = pa_dot_f32(q, pa_kv_k(kv, j->layer, seq, first + p) + (int64_t)g * hd, hd) * hp->attn_scale;
    pa_softmax(scores, n);
    float *out = c->s.att + t * O + (int64_t)h * hdv;
    memset(out, 0, (size_t)hdv * sizeof(float));
    for (int32_t p = 0; p < n; p++)
      pa_axpy(out, scores[p], pa_kv_v(kv, j->layer, seq, first + p) + (int64_t)g * hdv, hdv);
  }
}

void pa_attention(struct pa_context *c, const pa_fwd_batch *b, int layer, int32_t window) {
  const pa_hparams *hp = &c->model->hp;
  const int64_t K = (int64_t)hp->n_head_kv * hp->head_dim, VV = (int64_t)hp->n_head_kv * hp->head_dim_v;
  for (int32_t t = 0; t < b->n; t++) {
    memcpy(pa_kv_k(&c->kv, layer, b->seq[t], b->pos[t]), c->s.k + t * K, (size_t)K * sizeof(float));
    memcpy(pa_kv_v(&c->kv, layer, b->seq[t], b->pos[t]), c->s.v + t * VV, (size_t)VV * sizeof(float));
  }
  attn_job j = {.c = c, .b = b, .layer = layer, .window = window};
  pa_pool_run(c->pool, attention_worker, &j);
}
