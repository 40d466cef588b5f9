/* profiler.h: the recorder behind PA_PROF (model/model.h), in the library so
 * that the forward pass links without the tools. pa_prof_record adds an op's
 * time, the thread pool's barrier idle time since the last record and its
 * tokens (and, for attention, the positions attended) to a slot per (phase,
 * op, layer), and, when a trace is wanted, appends the op's start and end to
 * a buffer allocated before the run. `pasada profile` (tools/profile.c) sets
 * a context's profiler, drives the run and reports. */
#ifndef PASADA_PROFILER_H
#define PASADA_PROFILER_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"

typedef struct {
  int64_t ns;       /* wall time of the op on the calling thread */
  uint64_t idle_ns; /* thread-ns idle at the thread pool's barriers inside it */
  int64_t calls, tokens;
  double span; /* attention: positions attended, summed over tokens */
} prof_slot;

enum { EV_STEP = PA_OP_COUNT, EV_PHASE }; /* trace-only events: a decode call, a phase */

typedef struct {
  int64_t t0, t1;
  uint64_t idle_ns;
  int32_t n_tok;
  int16_t op, layer;
  uint8_t phase;
} prof_event;

struct pa_profiler {
  const struct pa_model *model;
  int n_layer;
  int phase; /* 0 prefill, 1 decode */
  prof_slot *slots; /* [2][PA_OP_COUNT][n_layer + 1]; layer -1 at index 0 */
  uint64_t last_idle;
  prof_event *ev; /* NULL: no trace */
  size_t n_ev, cap_ev, dropped;
};

/* The slot of (phase, op, layer); layer -1 holds the ops outside the layers. */
prof_slot *pa_prof_slot(struct pa_profiler *p, int phase, int op, int layer);
/* Appends an event to the trace when there is one (counted as dropped when it is full). */
void pa_prof_push_event(struct pa_profiler *p, int64_t t0, int64_t t1, uint64_t idle, int32_t n_tok,
                        int op, int layer);

#endif
