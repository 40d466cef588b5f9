/* profiler.c: the recorder behind PA_PROF (profiler.h): an op's time, the
 * thread pool's idle time inside it and its tokens go to a slot per (phase,
 * op, layer), and to the trace when there is one. */
#include "runtime/profiler.h"

#include <time.h>

#include "base/threadpool.h"

int64_t pa_prof_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

prof_slot *pa_prof_slot(struct pa_profiler *p, int phase, int op, int layer) {
  const size_t row = (size_t)phase * PA_OP_COUNT + (size_t)op;
  return &p->slots[row * (size_t)(p->n_layer + 1) + (size_t)(layer + 1)];
}

/* Positions the batch's tokens attend to in layer l (as pa_attention does). */
static double attention_span(const struct pa_model *m, const pa_fwd_batch *b, int l) {
  const pa_hparams *hp = &m->hp;
  int32_t window = hp->swa_layer[l] ? hp->sliding_window : 0;
  double span = 0;
  for (int32_t t = 0; t < b->n; t++) {
    int32_t pos = b->pos[t], first = 0;
    if (window > 0 && pos - window + 1 > 0) first = pos - window + 1;
    span += pos - first + 1;
  }
  return span;
}

void pa_prof_push_event(struct pa_profiler *p, int64_t t0, int64_t t1, uint64_t idle, int32_t n_tok,
                        int op, int layer) {
  if (!p->ev) return;
  if (p->n_ev == p->cap_ev) {
    p->dropped++;
    return;
  }
  prof_event *e = &p->ev[p->n_ev++];
  e->t0 = t0;
  e->t1 = t1;
  e->idle_ns = idle;
  e->n_tok = n_tok;
  e->op = (int16_t)op;
  e->layer = (int16_t)layer;
  e->phase = (uint8_t)p->phase;
}

void pa_prof_record(struct pa_context *c, const pa_fwd_batch *b, pa_prof_op op, int layer, int32_t n_tok,
                    int64_t t0) {
  int64_t t1 = pa_prof_now_ns();
  struct pa_profiler *p = c->prof;
  uint64_t idle = pa_pool_idle_ns(c->pool), d_idle = idle - p->last_idle;
  p->last_idle = idle;
  if ((unsigned)op >= PA_OP_COUNT || layer < -1 || layer >= p->n_layer) return;
  prof_slot *s = pa_prof_slot(p, p->phase, op, layer);
  s->ns += t1 - t0;
  s->idle_ns += d_idle;
  s->calls++;
  s->tokens += n_tok;
  if (op == PA_OP_ATTENTION && b && layer >= 0) s->span += attention_span(p->model, b, layer);
  pa_prof_push_event(p, t0, t1, d_idle, n_tok, op, layer);
}
