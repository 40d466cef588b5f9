/* profile_internal.h: what profile.c (the driver and the cost model) and
 * profile_report.c (the table, JSON, trace and SVG reports) share: the
 * ops' names, kinds and threading, and the result's rows and phases. */
#ifndef PASADA_TOOLS_PROFILE_INTERNAL_H
#define PASADA_TOOLS_PROFILE_INTERNAL_H

#include <stdint.h>

#include "model/model.h"
#include "runtime/profiler.h"
#include "tools/bench.h"
#include "tools/profile.h"
#include "tools/profile_gpu.h"

enum { ROWS = 2 };

/* Each profiled op (model.h pa_prof_op): its name (as the GGUF names its
 * tensor), its kind, and where it runs. */
typedef struct {
  const char *name, *kind;
  int parallel; /* 1: runs on the thread pool; ROWS: there for calls of at least
                   PA_ROWS_PAR tokens (backend/cpu/cpu.c); 0: on the calling thread alone */
} prof_op_info;
extern const prof_op_info PROF_OPS[PA_OP_COUNT];
extern const char *const PROF_PHASE_NAME[2]; /* "prefill", "decode" */
/* An op's label in the trace: blk.<layer>.<name>, or the name alone. */
void prof_op_label(char *buf, size_t cap, int op, int layer);

#define FAR_BELOW 0.1  /* both ceilings would take under a tenth of the time */
#define TINY_CALL 50e-6 /* seconds per call */

typedef struct {
  char name[64];
  const char *kind;
  int op, layer; /* op -1: the engine's overhead */
  int64_t calls, tokens;
  double time_s, idle_s, bytes, flops;
  double t_mem, t_comp, roof, gap; /* seconds at the ceilings (0 without them) */
  const char *verdict;             /* NULL without ceilings */
  double sort_key;                 /* the gap, or the time without ceilings */
} prof_row;

typedef struct {
  int32_t tokens, decode_calls;
  double wall_s, ops_s, idle_s;
  double self_s; /* the profiler's own cost in the phase, estimated (calibrate) */
  prof_row *rows; /* per (op, layer), largest gap first (time without ceilings) */
  int n_rows;
  prof_row *names; /* per op name over every layer, plus the engine overhead; same order */
  int n_names;
  double *layer_s; /* [n_layer] */
} prof_phase;

struct pa_profile_result {
  pa_profile_params p;
  char model_name[256], arch[32];
  const char *cpu_path;
  int32_t n_threads, n_batch, n_ctx, n_layer;
  double kv_elt;       /* bytes per KV cache value */
  const char *kv_type; /* "f16", "f32", "q8" */
  bool have_ceilings;
  pa_bench_ceilings ceil;
  prof_phase ph[2];
  prof_event *ev;
  size_t n_ev, dropped;
  int64_t t_origin;
  double record_ns, clock_ns; /* the profiler's own costs (calibrate) */
  char backend[32];           /* the model's backend ("cpu", "vulkan:0") */
  pa_profile_gpu *gpu; /* the model ran on a Vulkan device (else NULL): its GPU time per shader (with
                          --off, the device only); then no op rows, layers, trace nor ceilings */
};

#endif
