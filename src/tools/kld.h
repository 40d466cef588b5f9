/* kld.h: `pasada kld`: the quantization experiment in one command. BASE and
 * QUANT run on the same evaluation windows (perplexity.h: same tokens, same
 * scored positions); per scored token it measures KL(base || quant) over
 * the full vocabulary, whether the top tokens agree, and each model's
 * negative log-likelihood; with each file's size and each model's speed
 * during the run, one table says what the quantization cost and bought. */
#ifndef PASADA_TOOLS_KLD_H
#define PASADA_TOOLS_KLD_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tools/perplexity.h"

typedef struct {
  const char *base_path, *quant_path, *text_path;
  pa_eval_params eval;
  bool progress;
} pa_kld_params;

typedef struct {
  char name[256];
  uint64_t file_bytes;
  int64_t n_params; /* elements of every tensor in the file */
  double bits_per_weight;
  double ppl, ppl_se, nll_mean, nll_se;
  double tokens_per_s; /* windows decoded per second of pasada_decode */
} pa_kld_side;

typedef struct {
  pa_kld_side base, quant;
  char text_name[256];
  size_t n_text_tokens;
  int32_t n_windows, n_ctx, n_threads;
  const char *kv_type; /* both models' KV cache values: "f16", "f32", "q8" */
  int64_t n_scored;
  double kl_mean, kl_se, kl_median, kl_p99, kl_max; /* nats */
  double top1, top1_se;         /* fraction of scored tokens whose argmax agree */
  double ln_ratio, ln_ratio_se; /* mean of nll_quant - nll_base = ln(ppl_q / ppl_b) */
  double seconds;
} pa_kld_result;

int pa_kld_run(const pa_kld_params *p, pa_kld_result *r);
void pa_kld_print_table(FILE *out, const pa_kld_result *r);
/* One JSON object and a newline; 0, or -1 if out of memory. */
int pa_kld_print_json(FILE *out, const pa_kld_result *r);

#endif
