/* context.h: what the Vulkan backend's files share (vulkan.c: weights,
 * contexts, graphs and the dense ops; moe.c: the mixture of experts; kv.c:
 * the KV cache's values; delta.c: the linear-attention ops): the device's
 * weight map, a context's memory and graph, and the helpers that append
 * nodes to the graph. Internal to src/backend/vulkan. */
#ifndef PASADA_VULKAN_CONTEXT_H
#define PASADA_VULKAN_CONTEXT_H

#include "backend/vulkan/vk.h"
#include "model/model.h"
#include "quant/quant.h"

/* ---- the device and the weights ---- */

typedef struct {
  const void *key; /* host pointer */
  uint64_t addr;   /* device address */
} wmap_entry;

typedef struct {
  pa_vk_dev *d;
  pa_vk_buf *chunks; /* the weights' memory */
  int n_chunks;
  wmap_entry *map; /* open addressing, key NULL = empty */
  uint32_t map_cap;
} vk_backend;

/* The device address of the weight whose host pointer is key (prepare
 * uploaded it); aborts on one it did not see (a bug in the model code). */
uint64_t pa_vkc_weight(const vk_backend *vb, const void *key);
static inline uint64_t pa_vkc_matrix_bytes(const pa_matrix *m) {
  return (uint64_t)pa_row_size(m->type, m->cols) * (uint64_t)m->rows;
}

/* ---- a context ---- */

enum { MAX_NODES = 4096, N_CACHED = 4, MAX_DL = 16 };
/* Products of up to this many tokens run as matrix-vector products (the
 * weights read once per 8 tokens); more, as tiled products. */
enum { MATVEC_MAX_TOKENS = 8 };

typedef enum { NODE_DISPATCH, NODE_COPY } node_kind;

typedef struct {
  node_kind kind;
  char shader[24]; /* the shader's name ("copy" for copies) */
  VkPipeline pipe;
  uint32_t gx, gy, gz;
  uint8_t push[PA_VK_PUSH];
  VkBuffer src, dst; /* NODE_COPY */
  uint64_t src_off, dst_off, size;
} node;

typedef struct {
  node *nodes;
  int n_nodes;
  VkCommandBuffer cb;
  uint64_t used; /* clock of the last submission */
} cached_graph;

typedef struct {
  uint64_t staging_off, bytes;
  void *dst;
} pending_download;

struct pa_bctx {
  vk_backend *vb;
  pa_vk_dev *d;
  const pa_hparams *hp;
  pa_kv_cache *kv;
  int32_t n_batch, n_seq_max;
  const float *rope_freqs;
  const float *const *attn_sinks; /* pa_bctx_params' */
  /* activations (device) */
  pa_vk_buf act;
  uint64_t off[PA_BUF_COUNT], off_xn;
  uint64_t off_xg, off_hg, off_hu, off_yg; /* the moe op's: one expert's tokens */
  uint64_t s_moe_logits, s_moe_idx, s_moe_w; /* the moe op's, in the step buffer */
  int32_t *moe_chosen, *moe_count, *moe_first; /* the moe op's routing, on the host */
  float *moe_weight;
  float *ple_row; /* one row of the per-layer token table, on the host (per_layer_embed) */
  /* the step buffer (host-visible) */
  pa_vk_buf step;
  uint64_t s_tok, s_pos, s_seq, s_ckpt, s_out, s_slot, s_cos, s_sin, s_cos_swa, s_sin_swa, s_tables;
  uint64_t s_staging, staging_bytes, staging_used, s_logits;
  uint64_t s_att_pos; /* bidirectional attention's last position per token */
  int32_t max_blocks;
  /* the KV cache's values (device), per layer */
  pa_kv_values vals;
  pa_vk_buf *kvb;
  /* per layer: offsets of K, V and (Q8) their scales inside its buffer */
  struct kv_offsets {
    uint64_t k, v, ks, vs;
  } *kvo;
  /* the recurrent layers' state (delta.c): [slot][recurrent layer][state]
   * floats (pa_ssm_state_floats) for the n_seq_max sequences, then the
   * snapshots; ssm_index[l]: layer l's place in a slot (-1: none here) */
  pa_vk_buf ssm;
  int32_t n_recurrent, n_slots;
  int16_t ssm_index[PA_MAX_LAYERS];
  /* the graph being built, and those recorded before */
  node *nodes;
  int n_nodes;
  pending_download dl[MAX_DL];
  int n_dl;
  cached_graph cache[N_CACHED];
  uint64_t clock;
  int64_t n_run, n_recorded; /* graphs run, and those recorded for it (PASADA_LOG=debug) */
  VkCommandPool pool;
  VkFence fence;
  /* timing (pa_vk_timing): a timestamp after every node */
  VkQueryPool queries;
  bool timing;
  pa_vk_time *times;
  int n_times, cap_times;
};

static inline uint64_t buf_addr(const pa_bctx *c, pa_buf b) { return c->act.addr + c->off[b]; }
static inline uint64_t step_addr(const pa_bctx *c, uint64_t off) { return c->step.addr + off; }
/* workgroups of wg invocations for n grid-stride items (at most 4096) */
static inline uint32_t groups_for(uint64_t n, uint32_t wg) {
  const uint64_t g = (n + wg - 1) / wg;
  return g > 4096 ? 4096 : g ? (uint32_t)g : 1;
}

/* The graph (vulkan.c): a dispatch of shader variant `shader` with its push
 * constants and a copy appended; flush runs the graph and waits; staging
 * hands out n bytes of the step buffer's staging for this graph. */
void pa_vkc_dispatch(pa_bctx *c, const char *shader, const void *push, size_t push_bytes, uint32_t gx, uint32_t gy,
                     uint32_t gz);
void pa_vkc_copy(pa_bctx *c, VkBuffer src, uint64_t src_off, VkBuffer dst, uint64_t dst_off, uint64_t size);
void pa_vkc_flush(pa_bctx *c);
uint64_t pa_vkc_staging(pa_bctx *c, uint64_t n);

/* Ops on device addresses (vulkan.c): rows of n floats RMS-normalised
 * (times w when set; src rows by gather's indices when gather is set);
 * x[i] += y[period ? i % period : i]; y = W x for n_tok rows (W's bytes at
 * wa, or the weight's own address). */
void pa_vkc_norm_rows(pa_bctx *c, uint64_t out, uint64_t in, const float *w, int64_t n, uint32_t rows,
                      uint64_t gather);
void pa_vkc_add(pa_bctx *c, uint64_t x, uint64_t y, uint64_t n, uint32_t period);
void pa_vkc_product_at(pa_bctx *c, const pa_matrix *w, uint64_t wa, uint64_t x, uint32_t ldx, uint64_t y,
                       uint32_t ldy, uint32_t n_tok);
void pa_vkc_product(pa_bctx *c, const pa_matrix *w, uint64_t x, uint32_t ldx, uint64_t y, uint32_t ldy,
                    uint32_t n_tok);

/* The ops of the other files. */
void pa_vkc_moe(pa_bctx *c, const pa_fwd_batch *b, const pa_moe_desc *d);               /* moe.c */
pa_kv_values pa_vkc_kv_values(pa_kv_type type, int64_t bytes);                          /* kv.c */
int pa_vkc_delta_init(pa_bctx *c, const pa_bctx_params *p);                             /* delta.c */
void pa_vkc_delta_net(pa_bctx *c, const pa_fwd_batch *b, const pa_delta_desc *d);
void pa_vkc_sigmoid_mul(pa_bctx *c, pa_buf x, pa_buf g, int64_t n, int64_t ng, int32_t n_tok);
void pa_vkc_state_copy(pa_bctx *c, int32_t dst, int32_t src);

#endif
