/* pasada.h: the public C API of the pasada inference engine.
 *
 * Load a GGUF model, create a context (KV cache + scratch), submit batches of
 * tokens from one or more sequences, read logits, sample, and turn tokens back
 * into text. Every function that can fail returns a pasada_status; the reason
 * is in pasada_last_error() (thread-local). */
#ifndef PASADA_H
#define PASADA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  PASADA_OK = 0,
  PASADA_ERR_IO = 1,          /* file cannot be opened, read or mapped */
  PASADA_ERR_FORMAT = 2,      /* malformed or truncated file */
  PASADA_ERR_UNSUPPORTED = 3, /* valid but not supported (architecture, type) */
  PASADA_ERR_NOMEM = 4,
  PASADA_ERR_ARG = 5,         /* invalid argument from the caller */
  PASADA_ERR_CONTEXT_FULL = 6 /* the KV cache has no room for the batch */
} pasada_status;

const char *pasada_last_error(void);

typedef struct pa_model pasada_model;
typedef struct pa_context pasada_context;
typedef struct pa_tokenizer pasada_tokenizer;
typedef struct pa_sampler pasada_sampler;

/* ---- models ---- */
typedef struct {
  bool vocab_only; /* load the tokenizer only (no tensors needed) */
} pasada_model_params;

pasada_model_params pasada_model_default_params(void);
int pasada_model_load(const char *path, const pasada_model_params *params, pasada_model **out);
void pasada_model_free(pasada_model *model);
const pasada_tokenizer *pasada_model_tokenizer(const pasada_model *model);
int32_t pasada_model_n_vocab(const pasada_model *model);
int32_t pasada_model_n_ctx_train(const pasada_model *model);
const char *pasada_model_arch(const pasada_model *model);
/* Writes a human-readable description (architecture, hyper-parameters,
 * tokenizer, tensor types with counts and bytes) to `f` (a FILE*). */
void pasada_model_print_info(const pasada_model *model, void *file);

/* ---- contexts and batches ---- */
typedef struct {
  int32_t n_ctx;     /* positions per sequence (0: min(model's training context, 4096)) */
  int32_t n_seq_max; /* sequences that can be live at once */
  int32_t n_batch;   /* most tokens in one forward pass */
  int32_t n_threads; /* 0: all cores */
} pasada_context_params;

pasada_context_params pasada_context_default_params(void);
int pasada_context_create(pasada_model *model, const pasada_context_params *params,
                          pasada_context **out);
void pasada_context_free(pasada_context *ctx);
int32_t pasada_context_n_ctx(const pasada_context *ctx);

/* A batch of tokens, each with its sequence, its position in that sequence,
 * and whether its logits are wanted. Positions of one sequence must continue
 * that sequence's cache (pos == cached length for the first token, then +1). */
typedef struct {
  int32_t n_tokens;
  const int32_t *token;
  const int32_t *pos;
  const int32_t *seq_id;
  const int8_t *want_logits; /* NULL: only the last token's logits */
} pasada_batch;

int pasada_decode(pasada_context *ctx, const pasada_batch *batch);
/* Logits of the i-th token of the last batch that asked for them, n_vocab
 * floats; NULL if that token's logits were not requested. */
const float *pasada_get_logits(const pasada_context *ctx, int32_t i);
/* Drops sequence `seq` from position `p0` on (p0 = 0: the whole sequence). */
void pasada_seq_truncate(pasada_context *ctx, int32_t seq, int32_t p0);
int32_t pasada_seq_length(const pasada_context *ctx, int32_t seq);

#ifdef __cplusplus
}
#endif
#endif
