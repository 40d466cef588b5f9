/* perplexity.h: `pasada perplexity`, and the evaluation windows it shares
 * with `pasada kld` (kld.h).
 *
 * The method is llama.cpp's perplexity tool's: the text is tokenized once
 * (BOS first when the model's add_bos flag says so, special-token text kept
 * as text), cut into non-overlapping windows of n_ctx tokens, each window
 * evaluated from an empty cache (its first token replaced by BOS when the
 * model adds BOS), and only the second half of each window is scored: the
 * logits at positions n_ctx/2 .. n_ctx-2 predict the tokens after them, so
 * every scored token has at least n_ctx/2 tokens of context. */
#ifndef PASADA_TOOLS_PERPLEXITY_H
#define PASADA_TOOLS_PERPLEXITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pasada.h"

/* ---- evaluation windows (shared with kld) ---- */
typedef struct {
  int32_t n_ctx;     /* tokens per window (>= 16, even) */
  int32_t n_batch;   /* tokens per decode call (0: n_ctx; at most n_ctx) */
  int32_t n_threads; /* 0: every online core */
  int32_t n_chunks;  /* windows to evaluate (<= 0: all the text holds) */
  pasada_kv_type kv_type; /* the context's KV cache (PASADA_KV_DEFAULT: the engine's) */
  const char *backend;    /* the model's backend, as pasada_model_params.backend (NULL: cpu) */
  const char *quantize;   /* a Hugging Face folder's matrices quantized to this type at
                             load (hf_set_load_type's names; NULL: as stored) */
} pa_eval_params;

typedef struct {
  pasada_model *model;
  pasada_context *ctx;
  const pasada_tokenizer *tok;
  int32_t n_vocab;
  bool add_bos;
  int32_t bos;
  double decode_seconds; /* time in pasada_decode, summed */
  int64_t decode_tokens; /* tokens decoded */
} pa_eval_model;

/* Loads the model and creates a context for one window (n_ctx positions,
 * n_batch tokens per decode). Returns a pasada_status (message set). */
int pa_eval_model_open(const char *path, const pa_eval_params *p, pa_eval_model *out);
void pa_eval_model_close(pa_eval_model *m);

/* Tokenizes the whole text the way llama.cpp's perplexity does: BOS as the
 * model's flag says, no EOS, special-token text as plain text. */
int pa_eval_tokenize(const pa_eval_model *m, const char *text, size_t len, int32_t **tokens,
                     size_t *n_tokens);

/* Windows the text gives: min(n_tokens / n_ctx, n_chunks when > 0); fails
 * (message set) when the text holds fewer than 2 * n_ctx tokens, as
 * llama.cpp's tool does. */
int pa_eval_n_windows(size_t n_tokens, const pa_eval_params *p, int32_t *n_windows);

/* The first scored position of a window and the scored count per window. */
static inline int32_t pa_eval_first(int32_t n_ctx) { return n_ctx / 2; }
static inline int32_t pa_eval_n_scored(int32_t n_ctx) { return n_ctx - n_ctx / 2 - 1; }

/* Receives the logits of scored row k (0 .. n_scored-1) of the window and
 * the token that follows it. Returns non-zero to stop (a status). */
typedef int (*pa_eval_row_fn)(void *user, int32_t k, const float *logits, int32_t next_token);

/* Evaluates one window (n_ctx tokens starting at `window`) from an empty
 * cache and calls fn for each scored row, in order. */
int pa_eval_window(pa_eval_model *m, const pa_eval_params *p, const int32_t *window,
                   pa_eval_row_fn fn, void *user);

/* log-softmax of n logits, computed in double: *lse gets log(sum(exp)),
 * so a token's log-probability is logits[t] - *lse; out (when not NULL)
 * gets every log-probability as floats. Returns the index of the largest
 * logit (the lowest on ties). The same logits always give the same bits. */
int32_t pa_log_softmax(const float *logits, int32_t n, float *out, double *lse);

/* Reads a whole text file into a malloc'd NUL-terminated buffer. */
int pa_eval_read_text(const char *path, char **out, size_t *len);

/* ---- perplexity ---- */
typedef struct {
  const char *model_path;
  const char *text_path;
  pa_eval_params eval;
  bool progress; /* the running value on stderr after each window */
} pa_ppl_params;

typedef struct {
  size_t n_text_tokens;
  int32_t n_windows, n_ctx, n_batch, n_threads;
  const char *kv_type; /* the KV cache's values: "f16", "f32", "q8" */
  int64_t n_scored;
  double nll_mean; /* mean negative log-likelihood per scored token (nats) */
  double nll_se;   /* its standard error */
  double ppl;      /* exp(nll_mean) */
  double ppl_se;   /* ppl * nll_se (propagated) */
  double seconds;  /* the evaluation, without loading and tokenizing */
  double tokens_per_s;
  double *window_nll; /* n_windows sums of the window's scored NLL (malloc'd) */
  char model_name[256], text_name[256];
} pa_ppl_result;

int pa_ppl_run(const pa_ppl_params *p, pa_ppl_result *r);
void pa_ppl_result_free(pa_ppl_result *r);
void pa_ppl_print_table(FILE *out, const pa_ppl_result *r);
/* One JSON object and a newline; 0, or -1 if out of memory. */
int pa_ppl_print_json(FILE *out, const pa_ppl_result *r);

/* Mean and standard error of the mean from sums of x and x^2 over n
 * values (the sample standard deviation over sqrt(n - 1), as llama.cpp). */
void pa_mean_se(double sum, double sum2, int64_t n, double *mean, double *se);

#endif
