/* model.h: a loaded model (hyper-parameters, weights inside the mapped GGUF
 * file, tokenizer) and a context (KV cache, scratch, thread pool) that runs
 * batched forward passes. Each architecture family has one file with its
 * forward pass (llama.c serves llama, qwen2, qwen3; gemma3.c); they share the
 * building blocks of layers.c. */
#ifndef PASADA_MODEL_H
#define PASADA_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "base/threadpool.h"
#include "format/gguf.h"
#include "kernels/kernels.h"
#include "pasada.h"
#include "runtime/kv_cache.h"
#include "tokenizer/tokenizer.h"

typedef enum { PA_ARCH_LLAMA, PA_ARCH_QWEN2, PA_ARCH_QWEN3, PA_ARCH_GEMMA3 } pa_arch;
typedef enum { PA_ACT_SILU, PA_ACT_GELU_TANH } pa_activation;

#define PA_MAX_LAYERS 512

typedef struct {
  pa_arch arch;
  int32_t n_layer, n_embd, n_head, n_head_kv, head_dim, head_dim_v, n_ff, n_vocab, n_ctx_train;
  int32_t rope_dim;
  bool rope_neox;       /* rotate halves (qwen, gemma) rather than adjacent pairs (llama) */
  float rope_base;      /* global layers */
  float rope_base_swa;  /* sliding-window layers */
  float rope_freq_scale, rope_freq_scale_swa; /* 1/linear scaling factor */
  float norm_eps;
  float attn_scale;     /* applied to q.k */
  float embed_scale;    /* embeddings multiplied by this (gemma: sqrt(n_embd)) */
  int32_t sliding_window;  /* 0: none */
  bool swa_layer[PA_MAX_LAYERS];
  pa_activation act;
} pa_hparams;

typedef struct {
  pa_matrix wq, wk, wv, wo, w_gate, w_up, w_down;
  float *attn_norm, *ffn_norm;            /* always present */
  float *q_norm, *k_norm;                 /* per-head RMS norm weights (qwen3, gemma3) */
  float *post_attn_norm, *post_ffn_norm;  /* gemma3 */
  float *bq, *bk, *bv;                    /* qwen2 */
} pa_layer;

struct pa_model {
  gguf_file *gguf;
  pa_tokenizer *tok;
  char *arch_name;
  bool vocab_only;
  pa_hparams hp;
  pa_matrix tok_embd, output;
  float *output_norm;
  float *rope_freqs; /* rope_dim/2 factors or NULL (llama 3.1+) */
  pa_layer *layers;
  void *repacked;        /* the weights repacked at load (kernels/x4.h): a mapping, or NULL */
  size_t repacked_bytes; /* the size asked of pa_map_huge */
};

/* Scratch of one forward pass, sized for n_batch tokens. q, k, v and att
 * lie in one allocation that h2 reuses: the FFN must not run while the
 * attention block's buffers are live (context.c). */
typedef struct {
  float *x, *xb, *q, *k, *v, *att, *h1, *h2;
  float *rope_cos, *rope_sin;         /* [n_batch][rope_dim/2] per base */
  float *rope_cos_swa, *rope_sin_swa;
  float *scores;                      /* attention scratch (pa_attention_scratch_size, model/attention.h) */
  void *work;                         /* matmul activation scratch */
  int32_t *out_rows;                  /* batch index of each logits row */
} pa_scratch;

/* Called after each layer with the residual stream x ([n_tok][n_embd]) of
 * the batch: pasada verify compares these between the fast and the
 * reference path. NULL (the default) costs one branch per layer. */
typedef void (*pa_layer_hook)(void *user, int layer, const float *x, int32_t n_tok, int64_t n_embd);

struct pa_profiler; /* `pasada profile` (tools/profile.c) */

struct pa_context {
  struct pa_model *model;
  pa_layer_hook layer_hook;
  void *layer_hook_user;
  int32_t fwd_first; /* batch index of the running forward pass's first token: a layer
                        hook sees tokens [fwd_first, fwd_first + n_tok) of the batch */
  struct pa_profiler *prof; /* NULL (the default): profiling off, one branch per op */
  int32_t n_ctx, n_seq_max, n_threads;
  /* pasada_decode accepts batches of up to n_batch_max tokens (the params'
   * n_batch) and runs them as forward passes of at most n_batch tokens each,
   * the rows the scratch holds (context.c: kept small to bound memory). */
  int32_t n_batch_max, n_batch;
  bool reference_path; /* pa_matmul_exact instead of the fast kernels */
  pa_pool *pool;
  pa_kv_cache kv; /* paged: block pool, block tables, prefix cache */
  pa_scratch s;
  /* logits of the last batch: n_logits rows of n_vocab; row_of[i] = row of
   * batch token i or -1 */
  float *logits;
  int32_t n_logits, cap_logits;
  int32_t *row_of;
  int32_t row_of_n;
};

/* The batch as the forward pass sees it (validated by pasada_decode). */
typedef struct {
  int32_t n;
  const int32_t *token, *pos, *seq;
  int32_t n_out;          /* tokens whose logits are computed */
  const int32_t *out_idx; /* their batch indices */
} pa_fwd_batch;

int pa_model_load_hparams(struct pa_model *m);
int pa_model_load_weights(struct pa_model *m);
/* Repacks the matrices an interleaved layout exists for (kernels/layout.h:
 * Q4_K and Q5_K in groups of 4 rows, Q4_0, Q4_1, Q5_0 and Q8_0 in groups of 16) when the
 * current kernel table (pa_kernels_current) has a fast kernel for it, unless
 * PASADA_REPACK=0; then the other matrices are copied beside them, and
 * none of the file's weight pages stays mapped. */
int pa_model_repack(struct pa_model *m);

void pa_forward_llama(struct pa_context *ctx, const pa_fwd_batch *b);
void pa_forward_gemma3(struct pa_context *ctx, const pa_fwd_batch *b);

/* ---- shared building blocks (layers.c) ---- */
/* x[t] = embedding of token[t] * scale */
void pa_embed(struct pa_context *ctx, const pa_fwd_batch *b, float scale);
/* out[t] = rmsnorm(in[t]) * w for every token; rows of n floats */
void pa_norm_rows(struct pa_context *ctx, float *out, const float *in, const float *w, int32_t n_tok,
                  int64_t n);
/* Norms, residual adds and RoPE of at least this many tokens run on the
 * pool (rows split over the threads), fewer on the calling thread. */
#define PA_ROWS_PAR 4
/* x += y over n_tok rows of n (the residual adds). */
void pa_add_rows(struct pa_context *ctx, float *x, const float *y, int32_t n_tok, int64_t n);
/* The attention block's inputs for layer l: n = rmsnorm(x) (attn_norm);
 * q, k, v = Wq n, Wk n, Wv n (+ biases); the per-head norms of q and k
 * (when the layer has them); RoPE of q and k (swa: the sliding-window
 * tables); k and v into the cache. Where the three matrices allow it
 * (kernels.h, pa_matmul_can_norm) one pool job does all of it: the norm as
 * the activations are quantized, the rest per task over whole heads as they
 * come out of the product (profiled as attn_qkv); otherwise op by op. The
 * same bits either way. */
void pa_attn_input(struct pa_context *ctx, const pa_fwd_batch *b, const pa_layer *L, int l,
                   bool swa);
/* y = W x over n_tok rows (strides are the row lengths) */
void pa_linear(struct pa_context *ctx, const pa_matrix *w, const float *x, float *y, int32_t n_tok);
/* y = W x, then r += y (a residual add, the bits of pa_add_rows): in the
 * product's pool job, each task adding the rows it computed while they are
 * in cache (the reference path: one op after the other) */
void pa_linear_add(struct pa_context *ctx, const pa_matrix *w, const float *x, float *y, float *r,
                   int32_t n_tok);
/* q, k, v = Wq x, Wk x, Wv x into ctx->s.q/k/v: one pool job when the
 * three matrices can share it (kernels.h, pa_matmul_multi) */
void pa_qkv(struct pa_context *ctx, const pa_layer *L, const float *x, int32_t n_tok);
/* adds a bias to every row */
void pa_add_bias(float *y, const float *bias, int32_t n_tok, int64_t n);
/* Per-head RMS norm of q/k rows (n_heads heads of head_dim) */
void pa_head_norm(struct pa_context *ctx, float *x, const float *w, int32_t n_tok, int n_heads);
/* Fills the RoPE tables for the batch's positions. */
void pa_rope_prepare(struct pa_context *ctx, const pa_fwd_batch *b);
/* Rotates q and k of the batch; swa selects the sliding-window tables. */
void pa_rope_apply(struct pa_context *ctx, const pa_fwd_batch *b, bool swa);
/* Writes the batch's k, v (ctx->s.k, s.v) into the cache of layer l. */
void pa_kv_store_batch(struct pa_context *ctx, const pa_fwd_batch *b, int layer);
/* Causal (windowed when window > 0) attention of every batch token over its
 * sequence in the cache of layer l (the batch's own k and v already stored);
 * result in ctx->s.att ([n_tok][n_head*head_dim_v]). */
void pa_attention(struct pa_context *ctx, const pa_fwd_batch *b, int layer, int32_t window);
/* Gated FFN of n = rmsnorm(x) * norm: h = act(W_gate n) * (W_up n) (one
 * pool job with the activation fused, and the norm too where the matrices
 * allow: kernels.h, pa_matmul_gated_fused); out = W_down h, and with resid
 * (not NULL) resid += out (pa_linear_add). out may be ctx->s.xb (not x). */
void pa_ffn(struct pa_context *ctx, const pa_layer *L, const float *x, const float *norm,
            float *out, float *resid, int32_t n_tok);
/* Reports layer l's output to the context's layer hook, if any. */
static inline void pa_layer_done(struct pa_context *c, int l, int32_t n_tok) {
  if (c->layer_hook) c->layer_hook(c->layer_hook_user, l, c->s.x, n_tok, c->model->hp.n_embd);
}
/* Final norm and output projection for the batch's output tokens. */
void pa_output(struct pa_context *ctx, const pa_fwd_batch *b);

/* ---- profiling hooks (`pasada profile`, tools/profile.c) ----
 * PA_PROF(c, b, op, layer, n_tok, stmt) runs stmt; when c->prof is set it
 * also records stmt's start and end time as op `op` of `layer` (-1: none)
 * over n_tok tokens of batch b. Off, it costs one predictable branch. */
typedef enum {
  PA_OP_EMBED, PA_OP_ROPE_TABLE,
  PA_OP_ATTN_NORM, PA_OP_QKV, PA_OP_QKV_BIAS, PA_OP_Q_NORM, PA_OP_K_NORM,
  PA_OP_ROPE, PA_OP_KV_STORE, PA_OP_ATTENTION, PA_OP_O, PA_OP_POST_ATTN_NORM, PA_OP_ATTN_RESIDUAL,
  PA_OP_FFN_NORM, PA_OP_GATE_UP, PA_OP_DOWN, PA_OP_POST_FFN_NORM,
  PA_OP_FFN_RESIDUAL, PA_OP_OUTPUT_NORM, PA_OP_OUTPUT,
  PA_OP_TOKENIZE, PA_OP_SAMPLE, /* timed by the profile driver around the public API */
  PA_OP_COUNT
} pa_prof_op;
int64_t pa_prof_now_ns(void);
void pa_prof_record(struct pa_context *c, const pa_fwd_batch *b, pa_prof_op op, int layer, int32_t n_tok,
                    int64_t t0_ns);
#define PA_PROF(c, b, op, layer, n_tok, ...)                         \
  do {                                                               \
    if (__builtin_expect((c)->prof != NULL, 0)) {                    \
      int64_t pa_prof_t0_ = pa_prof_now_ns();                        \
      __VA_ARGS__;                                                   \
      pa_prof_record((c), (b), (op), (layer), (n_tok), pa_prof_t0_); \
    } else {                                                         \
      __VA_ARGS__;                                                   \
    }                                                                \
  } while (0)

#endif
