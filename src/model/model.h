/* model.h: a loaded model (hyper-parameters, weights inside the mapped GGUF
 * file, tokenizer, the backend that runs it) and a context (KV cache, thread
 * pool, the backend's buffers) that runs batched forward passes. Each
 * architecture family has one file with its forward pass (llama.c serves
 * llama, qwen2, qwen3, phi3, qwen3moe and llama with experts; gemma3.c
 * serves gemma2 and gemma3; gemma4.c; bert.c), written as a sequence of the
 * backend's ops (backend/backend.h). */
#ifndef PASADA_MODEL_H
#define PASADA_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "base/threadpool.h"
#include "format/gguf.h"
#include "kernels/kernels.h"
#include "pasada.h"
#include "runtime/kv_cache.h"
#include "tokenizer/tokenizer.h"

typedef struct {
  pa_matrix wq, wk, wv, wo, w_gate, w_up, w_down; /* phi3: views of its fused tensors */
  float *attn_norm, *ffn_norm;            /* always present */
  float *q_norm, *k_norm;                 /* per-head RMS norm weights (qwen3, gemma3) */
  float *post_attn_norm, *post_ffn_norm;  /* gemma2, gemma3, gemma4 */
  /* gemma4: V's per-head RMS norm without a weight (the model's ones
   * vector), and the scalar the layer's output is multiplied by (1 when
   * the file has none) */
  float *v_norm;
  float out_scale;
  float *bq, *bk, *bv;                    /* qwen2, bert */
  /* bert: the output and FFN biases, and the two post-norms (LayerNorm:
   * weight and bias) after the attention and the FFN residual adds */
  float *bo, *b_up, *b_down;
  float *attn_out_norm, *attn_out_norm_b, *out_norm, *out_norm_b;
  /* mixture of experts (hp.n_expert > 0; then w_gate, w_up, w_down are
   * empty): the router and each expert's slice of the 3-D tensors */
  pa_matrix router;
  pa_matrix *exp_gate, *exp_up, *exp_down; /* n_expert each, one allocation */
  /* gpt-oss: the attention sinks (n_head logits), the router's bias
   * (n_expert), the experts' biases ([n_expert][n_ff_exp] gate and up,
   * [n_expert][n_embd] down) */
  float *attn_sinks, *router_b, *exp_gate_b, *exp_up_b, *exp_down_b;
  /* gemma4's mixture of experts (beside its dense FFN): the router's input
   * norm (router.scale / sqrt(n_embd), one vector), each expert's weight
   * scale (n_expert), the experts' input norm, the dense FFN's and the
   * experts' output norms (post_ffn_norm then norms their sum), and the
   * fused gate_up tensor's experts copied apart (gate block, up block) */
  float *router_norm, *exp_scale, *ffn_norm_2, *post_ffn_norm_1, *post_ffn_norm_2;
  void *exp_split;
  /* qwen35: a linear-attention layer (hp.recurrent): its products (mixed
   * q/k/v, the output gate z, beta, alpha, the output) and its conv taps
   * ([conv_dim][ssm_conv]), A (-exp(A_log)), dt bias and gated norm; an
   * attention layer's output gate rows (wq_gate), split with wq from the
   * file's per-head [q | gate] rows into q_split */
  pa_matrix ssm_qkv, ssm_z, ssm_beta, ssm_alpha, ssm_out, wq_gate;
  /* qwen35moe: the shared expert's gate (one row of n_embd: sigmoid of
   * its product scales the shared expert, whose matrices are w_gate, w_up
   * and w_down, n_ff wide) */
  pa_matrix shexp_gate;
  /* gemma4's per-layer inputs (hp.n_embd_per_layer > 0): the gate
   * (n_embd -> n_embd_per_layer), the projection back (-> n_embd) and its
   * norm (n_embd) */
  pa_matrix ple_gate, ple_proj;
  float *ple_norm;
  float *ssm_conv, *ssm_a, *ssm_dt, *ssm_norm;
  void *q_split;
} pa_layer;

/* YaRN's parameters (rope.scaling.type "yarn"; factor 0: none), made into
 * the RoPE tables' frequency factors and attention factor at load
 * (pa_model_yarn_factors). truncate: the ramp's ends rounded outward to
 * whole dimensions (llama.cpp always; transformers unless the config says
 * "truncate": false, as gpt-oss's does). */
typedef struct {
  float factor, beta_fast, beta_slow, ext_factor, attn_factor;
  int32_t orig_ctx;
  bool truncate;
} pa_yarn;

struct pa_model {
  gguf_file *gguf;
  pa_tokenizer *tok;
  char *arch_name;
  bool vocab_only;
  pa_hparams hp;
  pa_matrix tok_embd, output;
  float *output_norm;
  pa_matrix pos_embd, type_embd; /* bert: learned positions, token-type rows (F32) */
  float *embd_norm, *embd_norm_b; /* bert: the embeddings' LayerNorm */
  float *rope_freqs; /* rope_dim/2 factors or NULL (llama 3.1+) */
  /* LongRoPE (phi3): rope_dim/2 factors each, or NULL; a context uses the
   * long ones when its n_ctx exceeds n_ctx_orig, else the short ones */
  float *rope_long, *rope_short;
  int32_t n_ctx_orig;
  pa_yarn yarn;
  /* gemma4's per-layer inputs (hp.n_embd_per_layer > 0): the token table
   * (n_vocab rows of n_layer * n_embd_per_layer), the embedding's
   * projection to the same width, and the norm of each layer's slice */
  pa_matrix ple_embd, ple_model_proj;
  float *ple_proj_norm;
  float *ones;     /* gemma4: ones of the widest head (the weight of V's norm) */
  int32_t ff_layer[PA_MAX_LAYERS]; /* gemma4: each layer's FFN width (its KV-sharing layers may be twice as wide) */
  int32_t kv_heads_layer[PA_MAX_LAYERS]; /* each layer's attention.head_count_kv (gemma4: one per kind) */
  pa_layer *layers; /* hp.n_layer, then the hp.n_mtp multi-token-prediction layers */
  /* multi-token prediction (hp.n_mtp > 0; llama.cpp's nextn names):
   * eh_proj (2 n_embd -> n_embd over [rmsnorm(embedding) * enorm,
   * rmsnorm(hidden) * hnorm]) copied apart into its columns of the
   * embedding's half (mtp_eh) and the hidden state's (mtp_eh_h), one
   * allocation (mtp_split); the norm before the shared output */
  pa_matrix mtp_eh, mtp_eh_h;
  void *mtp_split;
  float *mtp_enorm, *mtp_hnorm, *mtp_norm;
  const float **attn_sinks; /* per layer its attn_sinks, or NULL (no layer has sinks) */
  int32_t pooling;       /* pasada_pooling the file declares ({arch}.pooling_type) */
  pa_backend *be;        /* the backend that runs the model; it prepared the weights */
  void *repacked;        /* the weights repacked at load (kernels/x4.h): a mapping, or NULL */
  size_t repacked_bytes; /* the size asked of pa_map_huge */
};

/* Called after each layer with the residual stream x ([n_tok][n_embd]) of
 * the batch: pasada verify compares these between the fast and the
 * reference path. NULL (the default) costs one branch per layer. */
typedef void (*pa_layer_hook)(void *user, int layer, const float *x, int32_t n_tok, int64_t n_embd);

/* The ops PA_PROF (below) times: the backend ops of the forward passes (a
 * product with what is fused into it is one op: attn_qkv holds the
 * attention norm, biases, head norms, RoPE and the KV store; output holds
 * the final norm). */
typedef enum {
  PA_OP_EMBED, PA_OP_ROPE_TABLE,
  PA_OP_QKV, PA_OP_ATTENTION, PA_OP_O, PA_OP_POST_ATTN_NORM, PA_OP_ATTN_RESIDUAL,
  PA_OP_GATE_UP, PA_OP_DOWN, PA_OP_POST_FFN_NORM, PA_OP_FFN_RESIDUAL, PA_OP_MOE,
  PA_OP_PER_LAYER_INPUT, /* gemma4's per-layer inputs: made after the embedding (layer -1), used per layer */
  PA_OP_OUTPUT,
  PA_OP_TOKENIZE, PA_OP_SAMPLE, /* timed by the profile driver around the public API */
  PA_OP_COUNT
} pa_prof_op;

struct pa_profiler; /* runtime/profiler.h; set by `pasada profile` (tools/profile.c) */

struct pa_context {
  struct pa_model *model;
  const pa_backend *be; /* the backend the forward passes run on */
  pa_bctx *bc;          /* its state for this context: buffers, scratch */
  pa_layer_hook layer_hook;
  void *layer_hook_user;
  float *hook_x;     /* the residual stream downloaded for the hook ([n_batch][n_embd];
                        allocated by pa_context_set_layer_hook) */
  int32_t fwd_first; /* batch index of the running forward pass's first token: a layer
                        hook sees tokens [fwd_first, fwd_first + n_tok) of the batch */
  struct pa_profiler *prof; /* NULL (the default): profiling off, one branch per op */
  int32_t n_ctx, n_seq_max, n_threads;
  /* pasada_decode accepts batches of up to n_batch_max tokens (the params'
   * n_batch) and runs them as forward passes of at most n_batch tokens each,
   * the rows the backend's buffers hold (context.c: kept small to bound memory). */
  int32_t n_batch_max, n_batch;
  pa_pool *pool;  /* the context's host threads (the CPU backend runs its ops on them) */
  pa_kv_cache kv; /* paged: block pool, block tables, prefix cache */
  pasada_kv_event_fn kv_event_fn; /* pasada_kv_set_event_callback's (kv.on_event relays to it) */
  void *kv_event_user;
  int32_t *out_rows; /* pass index of each logits row */
  /* logits of the last batch: n_logits rows of n_vocab; row_of[i] = row of
   * batch token i or -1 */
  float *logits;
  int32_t n_logits, cap_logits;
  int32_t *row_of;
  int32_t row_of_n;
  /* a model with recurrent layers (hybrid.c): n_snap snapshots of a
   * sequence's state (two per sequence slot: backend slots n_seq_max + i), each of snap_len[i]
   * tokens (snap_tokens: n_ctx per snapshot), least recently used first to go */
  int32_t n_snap;
  int32_t *snap_len, *snap_tokens, *seq_tokens;
  uint64_t *snap_lru, snap_clock;
  /* rollback checkpoints (pasada_context_params.n_rollback, hybrid.c):
   * per sequence the states after the positions [ckpt_lo, ckpt_hi] (none
   * when ckpt_hi < ckpt_lo), position p's in backend slot n_seq_max +
   * n_snap + seq * n_ckpt + p % n_ckpt; ckpt_slot, ckpt_first and
   * ckpt_last are a pass's slot per token (-1: none) and each sequence's
   * first and last position in it (ckpt_lo holds all four arrays of
   * n_seq_max) */
  int32_t n_ckpt;
  int32_t *ckpt_lo, *ckpt_hi, *ckpt_first, *ckpt_last, *ckpt_slot;
  /* an embedding context (pooling != PASADA_POOLING_NONE): the pass's final
   * hidden states ([n_batch][n_embd]) and each sequence's pool: the sum
   * (mean), the first row (cls) or the latest row (last), of pool_n tokens */
  int32_t pooling;
  bool embd_normalize;
  float *hidden;
  double *embd_pool;
  int32_t *pool_n;
  /* a multi-token-prediction context (pa_context_create_mtp): it runs the
   * model's MTP layer (hp_own: its shape, one attention layer; its KV
   * cache is that layer's) over the rows of hidden states mtp_in
   * ([batch][n_embd], set before each pasada_decode), and each pass writes
   * its output rows' hidden states (after the MTP norm) at hidden_out,
   * within hidden (n_batch_max rows) as the logits within logits */
  bool mtp;
  pa_hparams *hp_own;
  const float *mtp_in;
  float *hidden_out;
  /* a context whose hidden states a drafter reads (pa_context_keep_hidden):
   * per sequence the final hidden states (after output_norm) of positions
   * [h_pos0, h_pos0 + h_n), h_cap rows allocated; h_pass and all_idx a
   * pass's rows and the identity index */
  bool keep_hidden;
  float **h_rows, *h_pass;
  int32_t *h_pos0, *h_n, *h_cap, *all_idx;
};

/* pasada_model_load with backend be (adopted, freed with the model, also
 * on failure) instead of the one params name; be NULL: by name. */
int pa_model_load_backend(const char *path, const pasada_model_params *params, pa_backend *be,
                          pasada_model **out);
int pa_model_load_hparams(struct pa_model *m);
int pa_model_load_weights(struct pa_model *m);
/* m->yarn into m->rope_freqs (allocated, or multiplied into the file's)
 * and hp.rope_attn_factor; nothing without YaRN. */
int pa_model_yarn_factors(struct pa_model *m);
/* Repacks the matrices an interleaved layout exists for (kernels/layout.h:
 * the K-quants in groups of 4 rows, Q4_0, Q4_1, Q5_0 and Q8_0 in groups of
 * 16) when kernel table k has a fast kernel for it, unless PASADA_REPACK=0;
 * then the other matrices are copied beside them, and none of the file's
 * weight pages stays mapped. The CPU backend's prepare_weights. */
int pa_model_repack(struct pa_model *m, const pa_cpu_kernels *k);

/* The forward pass of each family: the backend's ops, layer by layer. */
void pa_forward_llama(struct pa_context *ctx, const pa_fwd_batch *b);
void pa_forward_gemma3(struct pa_context *ctx, const pa_fwd_batch *b);
void pa_forward_gemma4(struct pa_context *ctx, const pa_fwd_batch *b);
void pa_forward_bert(struct pa_context *ctx, const pa_fwd_batch *b);
void pa_forward_qwen35(struct pa_context *ctx, const pa_fwd_batch *b);
/* Shared steps of the forward passes (forward.c), each timed by PA_PROF.
 * pa_fwd_begin: the embeddings of batch b times embed_scale into X, and
 * the RoPE tables of its positions. pa_fwd_end: after the last layer, the
 * normed hidden states (an embedding context) or the logits.
 * pa_fwd_attn_out_postnorm (Gemma): x += rmsnorm(Wo att) with the layer's
 * post_attn_norm. pa_fwd_ffn: the gated feed-forward block of layer l,
 * h = gate(W_gate n) * (W_up n) with n = rmsnorm(x) by ffn_norm; then
 * x += W_down h, or with post_norm (Gemma) x += rmsnorm(W_down h) by
 * post_ffn_norm. */
void pa_fwd_begin(struct pa_context *c, const pa_fwd_batch *b, float embed_scale);
void pa_fwd_end(struct pa_context *c, const pa_fwd_batch *b);
void pa_fwd_attn_out_postnorm(struct pa_context *c, const pa_fwd_batch *b, int l);
void pa_fwd_ffn(struct pa_context *c, const pa_fwd_batch *b, int l, pa_gate gate, bool post_norm);
/* A hybrid model's state snapshots and rollback checkpoints (hybrid.c):
 * made with the context, the truncation and prefix reuse that keep a
 * sequence's recurrent state consistent with its KV positions, and the
 * checkpoint slots of a forward pass (b->ckpt: pa_hybrid_pass fills
 * c->ckpt_slot for it and records what the pass will leave valid). */
int pa_hybrid_init(struct pa_context *c, int32_t n_snap, int32_t n_ckpt);
void pa_hybrid_pass(struct pa_context *c, const pa_fwd_batch *b);
void pa_hybrid_free(struct pa_context *c);
void pa_hybrid_snapshot(struct pa_context *c, int32_t seq);
void pa_hybrid_truncate(struct pa_context *c, int32_t seq, int32_t p0);
int32_t pa_hybrid_reuse_prefix(struct pa_context *c, int32_t seq, const int32_t *tokens, int32_t n);
/* Multi-token prediction (speculative decoding's drafts from a model's MTP
 * layer, runtime/speculative.c):
 * pa_context_create_mtp makes a context of model m that runs its MTP
 * layer (hp.n_mtp > 0; PASADA_ERR_UNSUPPORTED otherwise, or on a backend
 * split by layers). Each pasada_decode on it needs the rows of hidden
 * states the batch's tokens pair with (pa_context_set_mtp_input: n_tokens
 * rows of n_embd, valid during the call); its logits are the MTP's, and
 * pa_context_mtp_hidden gives the MTP's own output hidden state of a
 * logits row (what a next draft step pairs with).
 * pa_context_keep_hidden makes a context keep the final hidden states of
 * the positions it decodes, per sequence, until a drafter drops them
 * (pa_context_hidden_drop); pa_context_hidden_rows gives them: rows of
 * positions [*pos0, *pos0 + *n), contiguous. A truncation drops the rows
 * past its position; a batch that does not continue a sequence's rows
 * (positions skipped by prefix reuse) starts them anew. */
int pa_context_create_mtp(struct pa_model *m, const pasada_context_params *params,
                          struct pa_context **out);
void pa_context_set_mtp_input(struct pa_context *c, const float *rows);
const float *pa_context_mtp_hidden(const struct pa_context *c, int32_t i);
int pa_context_keep_hidden(struct pa_context *c);
const float *pa_context_hidden_rows(const struct pa_context *c, int32_t seq, int32_t *pos0,
                                    int32_t *n);
void pa_context_hidden_drop(struct pa_context *c, int32_t seq, int32_t upto);
/* The forward pass of a multi-token-prediction context (qwen35.c). */
void pa_forward_qwen35_mtp(struct pa_context *ctx, const pa_fwd_batch *b);
/* Sets the context's layer hook (NULL: none) and the host buffer it reads. */
int pa_context_set_layer_hook(struct pa_context *c, pa_layer_hook hook, void *user);
/* After layer l: the residual stream to the context's layer hook, if any. */
void pa_layer_done(struct pa_context *c, int l, int32_t n_tok);

/* ---- profiling hooks (recorder: runtime/profiler.c; driver: tools/profile.c) ----
 * PA_PROF(c, b, op, layer, n_tok, stmt) runs stmt; when c->prof is set it
 * also records stmt's start and end time as op `op` of `layer` (-1: none)
 * over n_tok tokens of batch b (runtime/profiler.c). Off, it costs one
 * predictable branch. */
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
