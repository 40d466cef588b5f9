/* verify.h: `pasada verify`: does the optimized engine still compute what
 * the model means?
 *
 * The same tokens run through two contexts of one model on two backends
 * (backend/backend.h): the one under test (by default "cpu": the SIMD
 * kernels of this CPU on 8-bit quantized activations) and the one it is
 * measured against (by default "ref": weights dequantized to F32,
 * activations kept in float, sums in double). After every layer
 * the residual stream of each token is compared, and at the end the logits:
 *   - hidden state, per layer: the relative error of a token's state,
 *     max_i |fast_i - ref_i| / max_i |ref_i|, its maximum and mean over
 *     every token of every prompt;
 *   - logits: KL(reference || fast) over the full vocabulary (mean and
 *     max), top-1 agreement and the largest absolute difference.
 * Each measure has a tolerance (pa_verify_tol, defaults in verify.c and
 * docs/tools.md); the run fails when any is exceeded and names the first.
 *
 * With `against`, the logits come instead from a file written by another
 * engine (or by `--save`): a GGUF file with the keys logits.source (string)
 * and logits.n_vocab (uint32), and the tensors `tokens` (I32, every
 * prompt's token ids end to end), `prompt_offsets` (I32, n_prompts + 1
 * entries, the first 0 and the last the token count) and `logits` (F32,
 * ne = [n_vocab, n_tokens]: a row of logits per token). pasada runs those
 * tokens and compares its logits with the file's (no layers). */
#ifndef PASADA_TOOLS_VERIFY_H
#define PASADA_TOOLS_VERIFY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "kernels/kernels.h"

typedef struct {
  double hidden_mean; /* per layer: mean over tokens of the hidden state's relative error */
  double hidden_max;  /* per layer: its maximum at any one token */
  double kl_mean;    /* nats */
  double kl_max;     /* nats, at any one position */
  double top1;       /* least fraction of positions whose argmax agree */
} pa_verify_tol;

/* The documented defaults (same-engine comparison, and --against). */
pa_verify_tol pa_verify_default_tol(void);
pa_verify_tol pa_verify_default_tol_against(void);

typedef struct {
  const char *model_path;
  const char *prompts_path; /* one prompt per line; NULL: the built-in prompts */
  const char *against_path; /* compare with this logits file instead of the reference path */
  const char *save_path;    /* write the fast path's logits (logits-file format) */
  const char *backend;          /* the backend under test (NULL: "cpu") */
  const char *against_backend;  /* what it is compared with (NULL: "ref") */
  const pa_cpu_kernels *kernels; /* tests: a CPU backend on this table instead of `backend` */
  int32_t n_threads;             /* 0: every online core */
  int32_t n_batch;               /* tokens per decode call (0: a whole prompt at once) */
  int32_t max_tokens;            /* per prompt; longer prompts are cut (0: 256) */
  pa_verify_tol tol;
  bool progress;
} pa_verify_params;

typedef struct {
  char model_name[256], kernels[32], against_source[256];
  char backend[32], against_backend[32];
  bool against;
  int32_t n_prompts, n_layer;
  int64_t n_positions;
  double *layer_max, *layer_mean; /* n_layer each (NULL with against) */
  double kl_mean, kl_max, top1, max_abs;
  int32_t kl_max_pos;       /* position (over all prompts) of kl_max */
  int32_t first_bad_layer;  /* -1: none */
  pa_verify_tol tol;
  bool pass;
  char failure[256]; /* the first tolerance exceeded, "" when pass */
  double seconds;
} pa_verify_result;

/* Runs the comparison. Returns PASADA_OK when it ran (whether or not it
 * passed: see r->pass), an error status (message set) otherwise. */
int pa_verify_run(const pa_verify_params *p, pa_verify_result *r);
void pa_verify_result_free(pa_verify_result *r);
void pa_verify_print_table(FILE *out, const pa_verify_result *r);
/* One JSON object and a newline; 0, or -1 if out of memory. */
int pa_verify_print_json(FILE *out, const pa_verify_result *r);

#endif
