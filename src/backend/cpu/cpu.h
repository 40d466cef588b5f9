/* cpu.h: the state of the host backends (src/backend/cpu, and the
 * reference backend of src/backend/ref, which is the same code run with the
 * plain tables, the exact product and no fusion). Internal to them. */
#ifndef PASADA_BACKEND_CPU_H
#define PASADA_BACKEND_CPU_H

#include "backend/backend.h"
#include "kernels/attention.h"
#include "kernels/kernels.h"
#include "kernels/ops.h"

/* The device: which kernels run. Immutable once made. */
typedef struct {
  pa_cpu_exec ex;              /* products: kernel table, element-wise table, prefetch */
  const pa_attn_kernels *attn; /* attention's tile kernels */
  bool exact;                  /* the reference: pa_matmul_exact, op by op */
} pa_cpu_backend;

/* A context's state. */
struct pa_bctx {
  const pa_cpu_backend *be;
  const pa_hparams *hp;
  const float *rope_freqs;
  const float *const *attn_sinks; /* per layer n_head, or NULL (pa_bctx_params) */
  pa_kv_cache *kv;               /* the context's block manager */
  pa_kv_values *values;          /* the cache's values, in host memory: this backend's */
  pa_pool *pool;
  int32_t n_threads, n_batch, n_seq_max;
  float *buf[PA_BUF_COUNT];
  float *xn;                     /* a product's normalised input, when not fused */
  float *ple_row;                /* one row of the per-layer token table (per_layer_embed) */
  float *rope_cos, *rope_sin;    /* [n_batch][rope_dim / 2] of the pass's positions */
  float *rope_cos_swa, *rope_sin_swa;
  float *scores;                 /* attention's scratch (pa_cpu_attention_scratch_size) */
  void *work;                    /* the products' activation scratch */
  int32_t *att_pos;              /* [n_batch] bidirectional attention's last position per token */
  void *mem;                     /* the buffers above but scores and work, in one allocation */
  /* the mixture-of-experts op's scratch (moe.c; NULL without experts) */
  struct {
    float *logits, *weight;      /* [n_batch][n_expert], [n_batch][n_used] */
    float *xg, *hg, *hu, *yg;    /* one expert's tokens: inputs, gate, up, outputs */
    int32_t *chosen;             /* [n_batch][n_used] experts, increasing */
    int32_t *count, *first, *slots; /* per expert: its slots (t * n_used + k), grouped */
  } moe;
  void *moe_mem;
  void *moe_work;                /* the router's exact product's scratch */
  void *moe_group;               /* the grouped products' scratch (moe.c), or NULL */
  size_t moe_group_bytes;
  /* recurrent layers' state (delta.c): [slot][recurrent layer][pa_ssm_state_floats]
   * for n_seq_max sequences then the snapshots; ssm_index[l]: layer l's
   * index among the recurrent layers */
  float *ssm;
  int32_t n_recurrent, n_slots;
  int32_t ssm_index[PA_MAX_LAYERS];
};

/* Norms, residual adds and RoPE of at least this many tokens run on the
 * pool (rows split over the threads), fewer on the calling thread. */
#define PA_ROWS_PAR 4

/* The attention op (attention.c) and its scratch. */
void pa_cpu_attention(pa_bctx *c, const pa_fwd_batch *b, int layer, int32_t window);
size_t pa_cpu_attention_scratch_size(int32_t n_threads, int32_t n_batch, int32_t n_seq_max,
                                     const pa_hparams *hp);
/* K and V of the batch (buffers K, V) into the cache of `layer`. */
void pa_cpu_kv_store_batch(pa_bctx *c, const pa_fwd_batch *b, int layer);

/* The mixture-of-experts op (moe.c), its scratch's bytes for a context of
 * n_batch tokens (0 without experts), and its pointers into mem. */
void pa_cpu_moe(pa_bctx *c, const pa_fwd_batch *b, const pa_moe_desc *d);
size_t pa_cpu_moe_scratch_size(const pa_hparams *hp, int32_t n_batch);
/* The grouped products' scratch (pa_matmul_group) for a context of n_batch
 * tokens whose matrices need at most work1 bytes of pa_matmul_work_size for
 * one token. */
size_t pa_cpu_moe_group_work_size(const pa_hparams *hp, int32_t n_batch, size_t work1);
void pa_cpu_moe_bind(pa_bctx *c, void *mem);

/* The linear-attention ops (delta.c) and a slot's state of a recurrent layer. */
void pa_cpu_delta_net(pa_bctx *c, const pa_fwd_batch *b, const pa_delta_desc *d);
void pa_cpu_sigmoid_mul(pa_bctx *c, pa_buf x, pa_buf g, int64_t n, int64_t ng, int32_t n_tok);
void pa_cpu_state_copy(pa_bctx *c, int32_t dst, int32_t src);
float *pa_cpu_ssm_state(pa_bctx *c, int32_t slot, int layer);

/* The host backends' ops table with `exact` deciding the kernels. */
extern const pa_backend_ops pa_cpu_backend_ops, pa_ref_backend_ops;
int pa_cpu_backend_make(const pa_backend_ops *ops, const char *name, const pa_cpu_backend *dev,
                        pa_backend **out);

#endif
