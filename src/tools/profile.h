/* profile.h: `pasada profile`: where a model's time goes. One run of a real
 * prompt (tokenized, then decoded in batches: prefill) and of sampled
 * generation (one token per decode step: decode), with the forward pass's
 * ops timed one by one through the context's profiler (model.h, PA_PROF):
 * every matrix product by weight name, attention, norms, RoPE, the
 * activation, the residual adds, the embedding lookup, plus tokenization and
 * sampling timed around the public API calls. What the ops do not cover is
 * the engine's own overhead. Each op's bytes moved and FLOPs give achieved
 * GB/s and GFLOP/s, set against the machine's ceilings (bench_ceilings.c),
 * and a verdict: memory-, compute- or overhead-bound. Reports: a table,
 * JSON, Chrome trace-event JSON, an SVG chart. On a Vulkan device the ops
 * are timed on the GPU per shader instead (profile_gpu.h): no op rows,
 * ceilings or trace there. */
#ifndef PASADA_PROFILE_H
#define PASADA_PROFILE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "pasada.h"

typedef struct {
  const char *model_path;
  int32_t n_prompt;  /* prefill tokens (>= 1) */
  int32_t n_gen;     /* decode steps (0: none) */
  int32_t n_threads; /* 0: every online core */
  int32_t n_batch;   /* tokens per decode call during prefill */
  pasada_kv_type kv_type; /* the context's KV cache (PASADA_KV_DEFAULT: the engine's) */
  const char *backend; /* the model's backend, as pasada_model_params.backend (NULL: cpu) */
  int32_t n_parallel; /* sequences decoded together in the decode phase (>= 1): a
                         server's step; sequences 2.. are prefilled untimed */
  uint64_t seed;     /* the sampler's */
  int32_t top;       /* rows of the table's "largest gaps" list */
  bool skip_ceilings; /* no probes: no achieved-vs-ceiling figures nor verdicts */
  bool off;           /* same run with the profiler off: phase wall times only */
  bool keep_events;   /* keep every op's start and end (for the trace) */
  bool progress;      /* lines on stderr */
} pa_profile_params;

void pa_profile_default_params(pa_profile_params *p);

typedef struct pa_profile_result pa_profile_result;

/* Runs the profile. Returns a pasada_status; on failure the reason is in
 * pasada_last_error() and *out is NULL. */
int pa_profile_run(const pa_profile_params *p, pa_profile_result **out);
void pa_profile_free(pa_profile_result *r);

/* Share of the phase's wall time the ops cover (phase 0 prefill, 1 decode;
 * 0 on a Vulkan device, whose ops are not timed one by one). */
double pa_profile_coverage(const pa_profile_result *r, int phase);

void pa_profile_print_table(FILE *f, const pa_profile_result *r);
/* Each writer returns 0, or -1 on a write error or out of memory. */
int pa_profile_print_json(FILE *f, const pa_profile_result *r);
int pa_profile_write_trace(FILE *f, const pa_profile_result *r); /* needs keep_events */
int pa_profile_write_svg(FILE *f, const pa_profile_result *r);

#endif
