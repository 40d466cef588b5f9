/* profile_gpu.h: `pasada profile` on a Vulkan device (profile_gpu.c). On a
 * GPU an op of the forward pass only records commands; the work runs when
 * the pass is submitted, so host timers around the ops would time the
 * recording. Instead the context's GPU timing is on (a timestamp after
 * every command: backend/vulkan/probe.h) and each phase reports the GPU
 * time of each shader, beside the phase's wall time on the host. profile.c
 * drives the run and prints the parts of the report both paths share. */
#ifndef PASADA_PROFILE_GPU_H
#define PASADA_PROFILE_GPU_H

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>

#include "backend/vulkan/probe.h"
#include "model/model.h"

typedef struct {
  char shader[24];  /* "matmul_q4_k", "copy" (buffer copies) */
  const char *kind; /* "matmul", "attention", "kv_store", "norm", "rope", "activation", "add",
                       "embed", "copy", "other" */
  int64_t commands;
  double gpu_s;
} pa_gpu_shader_row;

typedef struct {
  pa_gpu_shader_row *rows; /* longest first */
  int n_rows;
  double gpu_s;                /* their sum: the phase's GPU time */
  double tokenize_s, sample_s; /* host: timed around the public API calls */
} pa_gpu_phase;

typedef struct {
  pa_device_info dev;
  pa_gpu_phase ph[2]; /* prefill, decode */
} pa_profile_gpu;

/* Turns the context's GPU timing on (and its totals to zero); g->dev is
 * the device. Returns a pasada_status (message set). */
int pa_profile_gpu_begin(pa_profile_gpu *g, struct pa_context *ctx);
/* Waits for the context's work, moves its per-shader totals into phase
 * `phase` and sets them to zero. */
int pa_profile_gpu_end_phase(pa_profile_gpu *g, struct pa_context *ctx, int phase);
/* Drops the totals so far (work that belongs to no phase). */
void pa_profile_gpu_discard(struct pa_context *ctx);
/* Turns the context's GPU timing off. */
void pa_profile_gpu_end(struct pa_context *ctx);
void pa_profile_gpu_free(pa_profile_gpu *g);

/* "vulkan:0, llvmpipe (LLVM 15.0.6, 256 bits) (cpu, Vulkan 1.3.230)" */
void pa_profile_gpu_device(char *buf, size_t cap, const pa_profile_gpu *g);
/* The table of one phase's shaders, wall_s the phase's wall time. */
void pa_profile_gpu_print_phase(FILE *f, const pa_gpu_phase *ph, double wall_s);
/* A Vulkan device as the JSON reports of profile and bench name it, and
 * one phase's GPU keys. */
cJSON *pa_device_info_json(const pa_device_info *dev);
void pa_profile_gpu_phase_json(cJSON *o, const pa_gpu_phase *ph, double wall_s, int32_t tokens);
/* One phase's block of the SVG chart (at y, `block` pixels high). */
void pa_profile_gpu_svg_phase(FILE *f, const pa_gpu_phase *ph, const char *name, int32_t tokens,
                              double wall_s, int y, int width);

/* profile.c's, shared: a kind's colour in the chart, and SVG-escaped text. */
const char *pa_profile_kind_color(const char *kind);
void pa_profile_svg_text(FILE *f, const char *s);

#endif
