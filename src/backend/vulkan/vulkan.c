/* vulkan.c: the GPU backend: the ops of backend.h as Vulkan compute
 * shaders (shaders/), on one device opened through vk.h: the weights, a
 * context's memory and its graph, and the dense ops here; the mixture of
 * experts in moe.c, the KV cache's values in kv_values.c, the
 * linear-attention ops in delta.c (context.h: what they share).
 *
 * Weights: prepare_weights copies every matrix and vector the model's
 * forward pass reads into device memory once (in the file's layout;
 * shaders dequantize as they read), and keeps a map from the host
 * pointer the ops name them by to the device address.
 *
 * A context's memory: the activation buffers (pa_buf) and scratch in one
 * device-local buffer; the KV cache's values in one device buffer per
 * layer (shaders/kv.glsl); and a host-visible "step" buffer holding what a
 * pass reads from the host (tokens, positions, slots, block tables, RoPE
 * tables), staging for uploads and downloads, and the logits.
 *
 * Ops are not run as they are called: each appends nodes (a dispatch with
 * its push constants, or a copy) to the context's graph, and the graph is
 * submitted when the host needs a result (download, logits, synchronize,
 * a KV read). A graph equal node for node to one submitted before (every
 * decode step of the same batch shape: what varies between steps is in
 * the step buffer, not in the commands) re-submits that command buffer
 * instead of recording it again. Nothing is allocated after
 * context_init. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/vulkan/context.h"
#include "base/base.h"
#include "kernels/ops.h"
#include "model/model.h"
#include "quant/iq_grids.h"
#include "quant/quant.h"

/* ---- the device and the weights ---- */

static uint32_t ptr_hash(const void *p) {
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return (uint32_t)x;
}

uint64_t pa_vkc_weight(const vk_backend *vb, const void *key) {
  if (!key || !vb->map) return 0;
  for (uint32_t i = ptr_hash(key) & (vb->map_cap - 1);; i = (i + 1) & (vb->map_cap - 1)) {
    if (vb->map[i].key == key) return vb->map[i].addr;
    if (!vb->map[i].key) break;
  }
  /* an op named memory prepare_weights did not see: a bug in the model code */
  fprintf(stderr, "pasada: vulkan: a tensor the model did not declare was used\n");
  abort();
}

typedef struct {
  const void *ptr;
  uint64_t bytes;
} wtensor;

static int collect(wtensor *t, int *n, int cap, const void *p, uint64_t bytes) {
  if (!p) return PASADA_OK;
  for (int i = 0; i < *n; i++)
    if (t[i].ptr == p) return PASADA_OK; /* tied weights */
  if (*n == cap) return pa_error(PASADA_ERR_NOMEM, "vulkan: too many tensors");
  t[(*n)++] = (wtensor){p, bytes};
  return PASADA_OK;
}

static const char *type_suffix(pa_type t);

/* The tables the grid I-quants' shaders read (iq_grids.h), uploaded with
 * every model's weights; grid_addrs gives a type's grid and sign table. */
static const struct {
  const void *p;
  uint64_t bytes;
} grid_tables[] = {
    {pa_iq2xxs_grid, sizeof pa_iq2xxs_grid}, {pa_iq2xs_grid, sizeof pa_iq2xs_grid},
    {pa_iq2s_grid, sizeof pa_iq2s_grid},     {pa_iq3xxs_grid, sizeof pa_iq3xxs_grid},
    {pa_iq3s_grid, sizeof pa_iq3s_grid},     {pa_iq1s_grid, sizeof pa_iq1s_grid},
    {pa_ksigns_iq2xs, sizeof pa_ksigns_iq2xs},
};
enum { N_GRID_TABLES = (int)(sizeof grid_tables / sizeof grid_tables[0]) };

/* The device addresses of weight type t's grid and sign tables (0 for
 * the types without). */
static void grid_addrs(const vk_backend *vb, pa_type t, uint64_t *grid, uint64_t *ksigns) {
  const void *g = t == PA_TYPE_IQ2_XXS ? (const void *)pa_iq2xxs_grid
                  : t == PA_TYPE_IQ2_XS ? (const void *)pa_iq2xs_grid
                  : t == PA_TYPE_IQ2_S ? (const void *)pa_iq2s_grid
                  : t == PA_TYPE_IQ3_XXS ? (const void *)pa_iq3xxs_grid
                  : t == PA_TYPE_IQ3_S ? (const void *)pa_iq3s_grid
                  : t == PA_TYPE_IQ1_S || t == PA_TYPE_IQ1_M ? (const void *)pa_iq1s_grid
                                                             : NULL;
  const bool k = t == PA_TYPE_IQ2_XXS || t == PA_TYPE_IQ2_XS || t == PA_TYPE_IQ3_XXS;
  *grid = g ? pa_vkc_weight(vb, g) : 0;
  *ksigns = k ? pa_vkc_weight(vb, pa_ksigns_iq2xs) : 0;
}

/* PASADA_OK when the shaders read matrix m's type (dequant.glsl), else a
 * one-line error naming the tensor type. */
static int check_type(const pa_matrix *m) {
  if (!m->data || type_suffix(m->type)) return PASADA_OK;
  return pa_error(PASADA_ERR_UNSUPPORTED, "vulkan: tensor type %s is not supported on this backend (use the CPU)",
                  pa_type_name(m->type));
}

/* A layer's matrices, into lm[N_LAYER_MATS] (those it lacks have no data). */
enum { N_LAYER_MATS = 16 };
static void layer_matrices(const pa_layer *L, const pa_matrix **lm) {
  const pa_matrix *all[N_LAYER_MATS] = {&L->wq,     &L->wk,    &L->wv,       &L->wo,        &L->w_gate,
                                        &L->w_up,   &L->w_down, &L->wq_gate, &L->ssm_qkv,   &L->ssm_z,
                                        &L->ssm_beta, &L->ssm_alpha, &L->ssm_out, &L->shexp_gate,
                                        &L->ple_gate, &L->ple_proj};
  memcpy(lm, all, sizeof all);
}

/* Uploads the tensors of layers [0, n_layers), the embedding table when
 * `embed`, the output norm and matrix when `output`. */
static int prepare(const pa_backend *be, struct pa_model *m, int32_t n_layers, bool embed, bool output) {
  vk_backend *vb = be->impl;
  pa_vk_dev *d = vb->d;
  const pa_hparams *hp = &m->hp;
  const int cap = (n_layers > hp->n_layer ? n_layers : hp->n_layer) * 56 + 20 + N_GRID_TABLES;
  wtensor *t = pa_calloc((size_t)cap, sizeof *t);
  if (!t) return pa_error(PASADA_ERR_NOMEM, "out of memory");
  int n = 0, rc = PASADA_OK;
  const uint64_t E = (uint64_t)hp->n_embd * 4, HDM = (uint64_t)pa_attn_max(hp).head_dim * 4;
  if (embed) rc = check_type(&m->tok_embd);
  if (!rc && output) rc = check_type(&m->output);
  for (int l = 0; l < n_layers && !rc; l++) {
    const pa_layer *L = &m->layers[l];
    const pa_matrix *lm[N_LAYER_MATS];
    layer_matrices(L, lm);
    for (int i = 0; i < N_LAYER_MATS && !rc; i++) rc = check_type(lm[i]);
  }
  /* the grid I-quants' tables (34 KB), read by their shaders (dequant.glsl) */
  for (int i = 0; i < N_GRID_TABLES && !rc; i++)
    rc = collect(t, &n, cap, grid_tables[i].p, grid_tables[i].bytes);
  if (!rc && embed && m->tok_embd.data) rc = collect(t, &n, cap, m->tok_embd.data, pa_vkc_matrix_bytes(&m->tok_embd));
  if (!rc && output && m->output.data) rc = collect(t, &n, cap, m->output.data, pa_vkc_matrix_bytes(&m->output));
  if (!rc && output) rc = collect(t, &n, cap, m->output_norm, E);
  /* multi-token prediction (its layer is among n_layers when it is run) */
  if (!rc && output && n_layers > hp->n_layer && m->mtp_eh.data) {
    rc = check_type(&m->mtp_eh);
    if (!rc) rc = collect(t, &n, cap, m->mtp_eh.data, pa_vkc_matrix_bytes(&m->mtp_eh));
    if (!rc) rc = collect(t, &n, cap, m->mtp_eh_h.data, pa_vkc_matrix_bytes(&m->mtp_eh_h));
    if (!rc) rc = collect(t, &n, cap, m->mtp_enorm, E);
    if (!rc) rc = collect(t, &n, cap, m->mtp_hnorm, E);
    if (!rc) rc = collect(t, &n, cap, m->mtp_norm, E);
  }
  /* bert: learned positions and token types (F32), the embeddings' LayerNorm */
  if (!rc && embed && m->pos_embd.data) rc = collect(t, &n, cap, m->pos_embd.data, pa_vkc_matrix_bytes(&m->pos_embd));
  if (!rc && embed && m->type_embd.data) rc = collect(t, &n, cap, m->type_embd.data, pa_vkc_matrix_bytes(&m->type_embd));
  if (!rc && embed) rc = collect(t, &n, cap, m->embd_norm, E);
  if (!rc && embed) rc = collect(t, &n, cap, m->embd_norm_b, E);
  /* per-layer inputs: the projection of the embedding and its norm (the
   * token table stays on the host: per_layer_embed) */
  if (!rc && embed && m->ple_model_proj.data) rc = check_type(&m->ple_model_proj);
  if (!rc && embed && m->ple_model_proj.data)
    rc = collect(t, &n, cap, m->ple_model_proj.data, pa_vkc_matrix_bytes(&m->ple_model_proj));
  if (!rc && embed) rc = collect(t, &n, cap, m->ple_proj_norm, (uint64_t)hp->n_embd_per_layer * 4);
  for (int l = 0; l < n_layers && !rc; l++) {
    const pa_layer *L = &m->layers[l];
    const pa_matrix *lm[N_LAYER_MATS];
    layer_matrices(L, lm);
    for (int i = 0; i < N_LAYER_MATS && !rc; i++) {
      if (lm[i]->data && lm[i]->layout != PA_LAYOUT_ROWS)
        rc = pa_error(PASADA_ERR_UNSUPPORTED, "vulkan: the weights were repacked for another backend");
      if (!rc && lm[i]->data) rc = collect(t, &n, cap, lm[i]->data, pa_vkc_matrix_bytes(lm[i]));
    }
    const void *vec[] = {L->attn_norm, L->ffn_norm,      L->post_attn_norm, L->post_ffn_norm, L->q_norm, L->k_norm,
                         L->bq,        L->bk,           L->bv,             L->bo,            L->b_up,    L->b_down,
                         L->attn_out_norm, L->attn_out_norm_b, L->out_norm, L->out_norm_b, L->v_norm,
                         L->ple_norm, L->router_norm, L->ffn_norm_2, L->post_ffn_norm_1, L->post_ffn_norm_2};
    const uint64_t FB = (uint64_t)hp->n_ff * 4;
    /* the layer's head sizes (pa_layer_attn); gemma4's v_norm (the model's
     * ones, shared by every layer) is as wide as the widest head */
    const pa_attn_shape a = pa_layer_attn(hp, l);
    const uint64_t HD = (uint64_t)a.head_dim * 4, QB = (uint64_t)hp->n_head * a.head_dim * 4;
    const uint64_t KB = (uint64_t)a.n_head_kv * a.head_dim * 4, VB = (uint64_t)a.n_head_kv * a.head_dim_v * 4;
    const uint64_t vb_[] = {E, E, E, E, HD, HD, QB, KB, VB, E, FB, E, E, E, E, E, HDM, E, E, E, E, E};
    for (int i = 0; i < 22 && !rc; i++) rc = collect(t, &n, cap, vec[i], vb_[i]);
    /* qwen35's linear attention: the conv's taps, A, the dt bias, the gated norm */
    const uint64_t VH = (uint64_t)hp->ssm_v_heads * 4;
    const void *sv[] = {L->ssm_conv, L->ssm_a, L->ssm_dt, L->ssm_norm};
    const uint64_t sb[] = {(uint64_t)pa_ssm_conv_dim(hp) * (uint64_t)hp->ssm_conv * 4, VH, VH,
                           (uint64_t)hp->ssm_v_dim * 4};
    for (int i = 0; i < 4 && !rc; i++) rc = collect(t, &n, cap, sv[i], sb[i]);
    /* experts: the router, and each kind's n_expert slices as one block
     * (the loader's 3-D tensor; an expert's address is the block's plus its
     * offset, expert_product) */
    if (L->exp_gate && !rc) rc = collect(t, &n, cap, L->router.data, pa_vkc_matrix_bytes(&L->router));
    /* gpt-oss: the sinks, the router's and the experts' biases */
    const uint64_t NE = (uint64_t)hp->n_expert, FEB = (uint64_t)hp->n_ff_exp * 4;
    const void *ov[] = {L->attn_sinks, L->router_b, L->exp_gate_b, L->exp_up_b, L->exp_down_b};
    const uint64_t ob[] = {(uint64_t)hp->n_head * 4, NE * 4, NE * FEB, NE * FEB, NE * E};
    for (int i = 0; i < 5 && !rc; i++) rc = collect(t, &n, cap, ov[i], ob[i]);
    const pa_matrix *kinds[3] = {L->exp_gate, L->exp_up, L->exp_down};
    for (int k = 0; k < 3 && L->exp_gate && !rc; k++) {
      for (int e = 1; e < hp->n_expert && !rc; e++)
        if (kinds[k][e].layout != PA_LAYOUT_ROWS ||
            (const uint8_t *)kinds[k][e].data != (const uint8_t *)kinds[k][0].data + pa_vkc_matrix_bytes(&kinds[k][0]) * e)
          rc = pa_error(PASADA_ERR_UNSUPPORTED, "vulkan: the experts are not one block of the file's layout");
      if (!rc) rc = collect(t, &n, cap, kinds[k][0].data, pa_vkc_matrix_bytes(&kinds[k][0]) * (uint64_t)hp->n_expert);
    }
  }
  /* chunks: tensors in order, 256-byte aligned, each chunk at most one
   * allocation (and 1 GiB, unless one tensor needs more) */
  uint64_t chunk_max = d->max_alloc < (1ull << 30) ? d->max_alloc : (1ull << 30);
  for (int i = 0; i < n; i++)
    if (t[i].bytes > chunk_max) chunk_max = t[i].bytes;
  uint64_t *off = pa_calloc((size_t)n + 1, sizeof *off);
  int *chunk_of = pa_calloc((size_t)n + 1, sizeof *chunk_of);
  uint64_t *chunk_size = pa_calloc((size_t)n + 1, sizeof *chunk_size);
  if (!off || !chunk_of || !chunk_size) rc = rc ? rc : pa_error(PASADA_ERR_NOMEM, "out of memory");
  int nc = 0;
  uint64_t used = 0;
  for (int i = 0; i < n && !rc; i++) {
    const uint64_t a = (used + 255) & ~255ull;
    if (nc == 0 || a + t[i].bytes > chunk_max) {
      if (nc) chunk_size[nc - 1] = used;
      nc++;
      used = 0;
    }
    off[i] = (used + 255) & ~255ull;
    chunk_of[i] = nc - 1;
    used = off[i] + t[i].bytes;
  }
  if (nc) chunk_size[nc - 1] = used;
  vb->chunks = rc ? NULL : pa_calloc((size_t)nc + 1, sizeof *vb->chunks);
  if (!rc && !vb->chunks) rc = pa_error(PASADA_ERR_NOMEM, "out of memory");
  for (int c = 0; c < nc && !rc; c++) {
    rc = pa_vk_buf_create(d, chunk_size[c], false, &vb->chunks[c]);
    if (!rc) vb->n_chunks++;
  }
  uint32_t cap_map = 16;
  while (cap_map < 2u * (uint32_t)n + 2) cap_map *= 2;
  vb->map = rc ? NULL : pa_calloc(cap_map, sizeof *vb->map);
  if (!rc && !vb->map) rc = pa_error(PASADA_ERR_NOMEM, "out of memory");
  vb->map_cap = cap_map;
  for (int i = 0; i < n && !rc; i++) {
    pa_vk_buf *c = &vb->chunks[chunk_of[i]];
    rc = pa_vk_write(d, c, off[i], t[i].ptr, t[i].bytes);
    uint32_t j = ptr_hash(t[i].ptr) & (cap_map - 1);
    while (vb->map[j].key) j = (j + 1) & (cap_map - 1);
    vb->map[j] = (wmap_entry){t[i].ptr, c->addr + off[i]};
  }
  if (rc) pa_error_prefix("loading the weights onto %s: ", d->info.name);
  pa_free(off);
  pa_free(chunk_of);
  pa_free(chunk_size);
  pa_free(t);
  return rc;
}

static int prepare_weights(const pa_backend *be, struct pa_model *m) {
  return prepare(be, m, m->hp.n_layer + m->hp.n_mtp, true, true);
}

int pa_vulkan_prepare_layers(const pa_backend *be, struct pa_model *m, int32_t n_layers, bool output) {
  return prepare(be, m, n_layers, false, output);
}

/* ---- a context ---- */


void pa_vkc_dispatch(pa_bctx *c, const char *shader, const void *push, size_t push_bytes, uint32_t gx,
                          uint32_t gy, uint32_t gz) {
  if (c->n_nodes == MAX_NODES) pa_vkc_flush(c); /* a longer pass runs as several graphs */
  VkPipeline pipe = pa_vk_pipeline(c->d, shader);
  if (!pipe) {
    fprintf(stderr, "pasada: %s\n", pasada_last_error());
    abort();
  }
  node *n = &c->nodes[c->n_nodes++];
  memset(n, 0, sizeof *n);
  n->kind = NODE_DISPATCH;
  snprintf(n->shader, sizeof n->shader, "%s", shader);
  n->pipe = pipe;
  n->gx = gx, n->gy = gy, n->gz = gz;
  memcpy(n->push, push, push_bytes);
}

void pa_vkc_copy(pa_bctx *c, VkBuffer src, uint64_t src_off, VkBuffer dst, uint64_t dst_off, uint64_t size) {
  if (c->n_nodes == MAX_NODES) pa_vkc_flush(c);
  node *n = &c->nodes[c->n_nodes++];
  memset(n, 0, sizeof *n);
  n->kind = NODE_COPY;
  snprintf(n->shader, sizeof n->shader, "copy");
  n->src = src, n->dst = dst, n->src_off = src_off, n->dst_off = dst_off, n->size = size;
}

static void record(pa_bctx *c, VkCommandBuffer cb, const node *nodes, int n_nodes) {
  const pa_vk_fns *f = &c->d->f;
  const VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  f->vkBeginCommandBuffer(cb, &bi);
  VkPipeline bound = VK_NULL_HANDLE;
  if (c->timing) {
    f->vkCmdResetQueryPool(cb, c->queries, 0, (uint32_t)n_nodes + 1);
    f->vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, c->queries, 0);
  }
  const VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                              .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                              .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                                               VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT};
  const VkPipelineStageFlags st = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  for (int i = 0; i < n_nodes; i++) {
    const node *n = &nodes[i];
    if (i) f->vkCmdPipelineBarrier(cb, st, st, 0, 1, &mb, 0, NULL, 0, NULL);
    if (n->kind == NODE_COPY) {
      const VkBufferCopy cp = {.srcOffset = n->src_off, .dstOffset = n->dst_off, .size = n->size};
      f->vkCmdCopyBuffer(cb, n->src, n->dst, 1, &cp);
      if (c->timing) f->vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, c->queries, (uint32_t)i + 1);
      continue;
    }
    if (n->pipe != bound) f->vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, n->pipe), bound = n->pipe;
    f->vkCmdPushConstants(cb, c->d->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, PA_VK_PUSH, n->push);
    f->vkCmdDispatch(cb, n->gx, n->gy, n->gz);
    if (c->timing) f->vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, c->queries, (uint32_t)i + 1);
  }
  const VkMemoryBarrier host = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                                .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                                .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
  f->vkCmdPipelineBarrier(cb, st, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &host, 0, NULL, 0, NULL);
  f->vkEndCommandBuffer(cb);
}

/* Adds each node's time (between the timestamps before and after it) to
 * its shader's total. */
static void collect_times(pa_bctx *c, cached_graph *g) {
  uint64_t ts[MAX_NODES + 1];
  const pa_vk_fns *f = &c->d->f;
  if (f->vkGetQueryPoolResults(c->d->dev, c->queries, 0, (uint32_t)g->n_nodes + 1, sizeof ts, ts, sizeof ts[0],
                               VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT) != VK_SUCCESS)
    return;
  for (int i = 0; i < g->n_nodes; i++) {
    const double ns = (double)(ts[i + 1] - ts[i]) * c->d->timestamp_ns;
    int j = 0;
    while (j < c->n_times && strcmp(c->times[j].shader, g->nodes[i].shader)) j++;
    if (j == c->n_times) {
      if (c->n_times == c->cap_times) continue;
      snprintf(c->times[j].shader, sizeof c->times[j].shader, "%s", g->nodes[i].shader);
      c->times[j].ns = 0, c->times[j].count = 0;
      c->n_times++;
    }
    c->times[j].ns += ns;
    c->times[j].count++;
  }
}

/* Runs the graph built so far and waits for it; then the downloads it
 * ended with are copied out. */
void pa_vkc_flush(pa_bctx *c) {
  if (c->n_nodes == 0) return;
  cached_graph *g = NULL;
  for (int i = 0; i < N_CACHED && !g && !c->timing; i++)
    if (c->cache[i].n_nodes == c->n_nodes && !memcmp(c->cache[i].nodes, c->nodes, sizeof(node) * (size_t)c->n_nodes))
      g = &c->cache[i];
  if (!g) { /* the least recently used slot, recorded again */
    g = &c->cache[0];
    for (int i = 1; i < N_CACHED; i++)
      if (c->cache[i].used < g->used) g = &c->cache[i];
    c->d->f.vkResetCommandBuffer(g->cb, 0);
    record(c, g->cb, c->nodes, c->n_nodes);
    c->n_recorded++;
    memcpy(g->nodes, c->nodes, sizeof(node) * (size_t)c->n_nodes);
    g->n_nodes = c->n_nodes;
  }
  g->used = ++c->clock;
  c->n_run++;
  const VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &g->cb};
  pthread_mutex_lock(&c->d->lock);
  VkResult r = c->d->f.vkQueueSubmit(c->d->queue, 1, &si, c->fence);
  pthread_mutex_unlock(&c->d->lock);
  if (r == VK_SUCCESS) r = c->d->f.vkWaitForFences(c->d->dev, 1, &c->fence, VK_TRUE, UINT64_MAX);
  c->d->f.vkResetFences(c->d->dev, 1, &c->fence);
  if (r != VK_SUCCESS) {
    /* a lost device cannot be recovered mid-pass; nothing else is safe */
    fprintf(stderr, "pasada: vulkan: %s stopped (device lost: %d)\n", c->d->info.name, (int)r);
    abort();
  }
  if (c->timing) collect_times(c, g);
  for (int i = 0; i < c->n_dl; i++)
    memcpy(c->dl[i].dst, (const uint8_t *)c->step.map + c->dl[i].staging_off, c->dl[i].bytes);
  c->n_dl = 0;
  c->n_nodes = 0;
  c->staging_used = 0;
}

/* Staging space for n bytes in this graph (flushing first when full). */
uint64_t pa_vkc_staging(pa_bctx *c, uint64_t n) {
  n = (n + 255) & ~255ull;
  /* room for the few nodes that use it too: a flush between them would
   * hand the region out again */
  if (c->staging_used + n > c->staging_bytes || c->n_nodes + 8 > MAX_NODES) pa_vkc_flush(c);
  const uint64_t o = c->s_staging + c->staging_used;
  c->staging_used += n;
  return o;
}

static void op_upload(pa_bctx *c, pa_buf dst, int64_t off, const float *src, int64_t n) {
  const uint64_t bytes = (uint64_t)n * 4;
  for (uint64_t done = 0; done < bytes;) {
    const uint64_t m = bytes - done < c->staging_bytes ? bytes - done : c->staging_bytes;
    const uint64_t so = pa_vkc_staging(c, m);
    memcpy((uint8_t *)c->step.map + so, (const uint8_t *)src + done, m);
    pa_vkc_copy(c, c->step.buf, so, c->act.buf, c->off[dst] + (uint64_t)off * 4 + done, m);
    done += m;
  }
}

static void op_download(pa_bctx *c, pa_buf src, int64_t off, float *dst, int64_t n) {
  const uint64_t bytes = (uint64_t)n * 4;
  for (uint64_t done = 0; done < bytes;) {
    const uint64_t m = bytes - done < c->staging_bytes ? bytes - done : c->staging_bytes;
    if (c->n_dl == MAX_DL) pa_vkc_flush(c);
    const uint64_t so = pa_vkc_staging(c, m);
    pa_vkc_copy(c, c->act.buf, c->off[src] + (uint64_t)off * 4 + done, c->step.buf, so, m);
    c->dl[c->n_dl++] = (pending_download){so, m, (uint8_t *)dst + done};
    done += m;
  }
  pa_vkc_flush(c);
}

static void op_synchronize(pa_bctx *c) { pa_vkc_flush(c); }

/* ---- ops ---- */

static void op_begin(pa_bctx *c, const pa_fwd_batch *b) {
  const pa_hparams *hp = c->hp;
  uint8_t *s = c->step.map;
  const int half = hp->rope_dim / 2, rd_swa = pa_rope_dim_of(hp, 1), half_swa = rd_swa / 2;
  int32_t *pos = (int32_t *)(void *)(s + c->s_pos), *seq = (int32_t *)(void *)(s + c->s_seq);
  int32_t *slot = (int32_t *)(void *)(s + c->s_slot), *tables = (int32_t *)(void *)(s + c->s_tables);
  int32_t *tok = (int32_t *)(void *)(s + c->s_tok);
  const int32_t bs = c->kv->block_size;
  for (int32_t t = 0; t < b->n; t++) {
    tok[t] = b->token ? b->token[t] : 0;
    pos[t] = b->pos[t];
    seq[t] = b->seq[t];
    slot[t] = c->kv->table[b->seq[t]][b->pos[t] / bs] * bs + b->pos[t] % bs;
    pa_rope_table_ext((float *)(void *)(s + c->s_cos) + t * half, (float *)(void *)(s + c->s_sin) + t * half,
                      hp->rope_dim, b->pos[t], hp->rope_base, hp->rope_freq_scale, c->rope_freqs,
                      hp->rope_attn_factor);
    if (hp->sliding_window)
      pa_rope_table((float *)(void *)(s + c->s_cos_swa) + t * half_swa,
                    (float *)(void *)(s + c->s_sin_swa) + t * half_swa, rd_swa, b->pos[t], hp->rope_base_swa,
                    hp->rope_freq_scale_swa, NULL);
  }
  /* the block tables of the batch's sequences, up to their last position */
  for (int32_t t = 0; t < b->n; t++) {
    const int32_t sq = b->seq[t], nb = b->pos[t] / bs + 1;
    for (int32_t i = 0; i < nb; i++) tables[sq * c->max_blocks + i] = c->kv->table[sq][i];
  }
  int32_t *out = (int32_t *)(void *)(s + c->s_out);
  for (int32_t i = 0; i < b->n_out; i++) out[i] = b->out_idx[i];
}

static const char *type_suffix(pa_type t) {
  switch (t) {
    case PA_TYPE_F32: return "f32";
    case PA_TYPE_F16: return "f16";
    case PA_TYPE_BF16: return "bf16";
    case PA_TYPE_Q4_0: return "q4_0";
    case PA_TYPE_Q4_1: return "q4_1";
    case PA_TYPE_Q5_0: return "q5_0";
    case PA_TYPE_Q5_1: return "q5_1";
    case PA_TYPE_Q8_0: return "q8_0";
    case PA_TYPE_Q2_K: return "q2_k";
    case PA_TYPE_Q3_K: return "q3_k";
    case PA_TYPE_Q4_K: return "q4_k";
    case PA_TYPE_Q5_K: return "q5_k";
    case PA_TYPE_Q6_K: return "q6_k";
    case PA_TYPE_IQ4_NL: return "iq4_nl";
    case PA_TYPE_IQ4_XS: return "iq4_xs";
    case PA_TYPE_MXFP4: return "mxfp4";
    case PA_TYPE_IQ2_XXS: return "iq2_xxs";
    case PA_TYPE_IQ2_XS: return "iq2_xs";
    case PA_TYPE_IQ2_S: return "iq2_s";
    case PA_TYPE_IQ3_XXS: return "iq3_xxs";
    case PA_TYPE_IQ3_S: return "iq3_s";
    case PA_TYPE_IQ1_S: return "iq1_s";
    case PA_TYPE_IQ1_M: return "iq1_m";
    default: return NULL;
  }
}

static void op_embed(pa_bctx *c, const pa_fwd_batch *b, const pa_matrix *table, float scale) {
  /* the tokens: op_begin may not have run yet in this pass */
  int32_t *tok = (int32_t *)(void *)((uint8_t *)c->step.map + c->s_tok);
  for (int32_t t = 0; t < b->n; t++) tok[t] = b->token[t];
  struct {
    uint64_t w, tok, out, row_bytes, grid, ksigns;
    uint32_t n_tok, cols;
    float scale;
  } p = {pa_vkc_weight(c->vb, table->data), step_addr(c, c->s_tok), buf_addr(c, PA_BUF_X),
         pa_row_size(table->type, table->cols), 0, 0, (uint32_t)b->n, (uint32_t)table->cols, scale};
  grid_addrs(c->vb, table->type, &p.grid, &p.ksigns);
  char name[32];
  snprintf(name, sizeof name, "embed_%s", type_suffix(table->type));
  pa_vkc_dispatch(c, name, &p, sizeof p, (uint32_t)((table->cols / 8 + 63) / 64), (uint32_t)b->n, 1);
}

void pa_vkc_norm_rows(pa_bctx *c, uint64_t out, uint64_t in, const float *w, int64_t n, uint32_t rows,
                      uint64_t gather) {
  struct {
    uint64_t in, out, w, gather;
    uint32_t n, n_rows;
    float eps;
  } p = {in, out, w ? pa_vkc_weight(c->vb, w) : 0, gather, (uint32_t)n, rows, c->hp->norm_eps};
  pa_vkc_dispatch(c, "rms_norm", &p, sizeof p, rows < 32768 ? rows : 32768, (rows + 32767) / 32768, 1);
}

static void op_layer_norm(pa_bctx *c, pa_buf out, pa_buf in, const float *w, const float *bias, int64_t n,
                          int32_t n_tok) {
  struct {
    uint64_t in, out, w, b;
    uint32_t n, n_rows;
    float eps;
  } p = {buf_addr(c, in), buf_addr(c, out), w ? pa_vkc_weight(c->vb, w) : 0, bias ? pa_vkc_weight(c->vb, bias) : 0,
         (uint32_t)n, (uint32_t)n_tok, c->hp->norm_eps};
  const uint32_t rows = (uint32_t)n_tok;
  pa_vkc_dispatch(c, "layer_norm", &p, sizeof p, rows < 32768 ? rows : 32768, (rows + 32767) / 32768, 1);
}

static void op_rms_norm(pa_bctx *c, pa_buf out, pa_buf in, const float *w, int64_t n, int32_t n_tok) {
  pa_vkc_norm_rows(c, buf_addr(c, out), buf_addr(c, in), w, n, (uint32_t)n_tok, 0);
}

void pa_vkc_add(pa_bctx *c, uint64_t x, uint64_t y, uint64_t n, uint32_t period) {
  struct {
    uint64_t x, y;
    uint32_t n, period;
  } p = {x, y, (uint32_t)n, period};
  pa_vkc_dispatch(c, "add", &p, sizeof p, groups_for(n, 256), 1, 1);
}

static void op_add(pa_bctx *c, pa_buf x, pa_buf y, int64_t n, int32_t n_tok) {
  pa_vkc_add(c, buf_addr(c, x), buf_addr(c, y), (uint64_t)n * (uint64_t)n_tok, 0);
}

static void op_scale(pa_bctx *c, pa_buf x, float s, int64_t n, int32_t n_tok) {
  const uint64_t N = (uint64_t)n * (uint64_t)n_tok;
  struct {
    uint64_t x;
    uint32_t n;
    float s;
  } p = {buf_addr(c, x), (uint32_t)N, s};
  pa_vkc_dispatch(c, "scale", &p, sizeof p, groups_for(N, 256), 1, 1);
}

/* X[t] += row (by_pos ? pos[t] : 0) of an F32 table: one add per run of
 * tokens with consecutive positions (a sequence's), or one for all. */
static void op_embed_add(pa_bctx *c, const pa_fwd_batch *b, const pa_matrix *table, bool by_pos) {
  const uint64_t E = (uint64_t)c->hp->n_embd, x = buf_addr(c, PA_BUF_X), w = pa_vkc_weight(c->vb, table->data);
  if (!by_pos) {
    pa_vkc_add(c, x, w, E * (uint64_t)b->n, (uint32_t)E);
    return;
  }
  for (int32_t t0 = 0, t1; t0 < b->n; t0 = t1) {
    for (t1 = t0 + 1; t1 < b->n && b->pos[t1] == b->pos[t1 - 1] + 1;) t1++;
    pa_vkc_add(c, x + (uint64_t)t0 * E * 4, w + (uint64_t)b->pos[t0] * E * 4, E * (uint64_t)(t1 - t0), 0);
  }
}

/* PLE[t] = (PLE[t] + row token[t] of table * scale) * out_scale: the rows
 * read on the host where the file maps them (the table is never
 * uploaded), times scale into staging, then the add and scale shaders. */
static void op_per_layer_embed(pa_bctx *c, const pa_fwd_batch *b, const pa_matrix *table, float scale,
                               float out_scale) {
  const uint64_t n = (uint64_t)table->cols, total = n * (uint64_t)b->n, x = buf_addr(c, PA_BUF_PLE);
  for (uint64_t done = 0; done < total;) {
    const uint64_t m = total - done < c->staging_bytes / 4 ? total - done : c->staging_bytes / 4;
    const uint64_t so = pa_vkc_staging(c, m * 4);
    float *dst = (float *)(void *)((uint8_t *)c->step.map + so);
    for (uint64_t e = done; e < done + m;) { /* whole rows, or a row's part at a chunk's ends */
      const uint64_t t = e / n, i0 = e % n, i1 = n < i0 + (done + m - e) ? n : i0 + (done + m - e);
      pa_matrix_get_row(table, b->token[t], c->ple_row);
      for (uint64_t i = i0; i < i1; i++) dst[e - done + i - i0] = c->ple_row[i] * scale;
      e += i1 - i0;
    }
    pa_vkc_add(c, x + done * 4, step_addr(c, so), m, 0);
    done += m;
  }
  op_scale(c, PA_BUF_PLE, out_scale, (int64_t)n, b->n);
}

/* x[t][i] = gelu_tanh(x[t][i]) * y[t * y_stride + y_off + i]: the gate
 * shader's kind 5 (kind 1's arithmetic, u read by rows y_stride apart) */
static void op_gelu_mul(pa_bctx *c, pa_buf x, pa_buf y, int64_t n, int64_t y_stride, int64_t y_off, int32_t n_tok) {
  const uint64_t N = (uint64_t)n * (uint64_t)n_tok;
  struct {
    uint64_t g, u;
    uint32_t n, kind, per_gate, u_stride;
  } p = {buf_addr(c, x), buf_addr(c, y) + (uint64_t)y_off * 4, (uint32_t)N, 5u, (uint32_t)n, (uint32_t)y_stride};
  pa_vkc_dispatch(c, "gate", &p, sizeof p, groups_for(N, 256), 1, 1);
}

/* y = W x for n_tok rows of x (ldx floats apart) into rows ldy apart, W's
 * bytes at device address wa */
void pa_vkc_product_at(pa_bctx *c, const pa_matrix *w, uint64_t wa, uint64_t x, uint32_t ldx, uint64_t y,
                       uint32_t ldy, uint32_t n_tok) {
  struct {
    uint64_t w, x, y, row_bytes, grid, ksigns;
    uint32_t rows, cols, n_tok, ldx, ldy;
  } p = {wa, x, y, pa_row_size(w->type, w->cols), 0, 0, (uint32_t)w->rows,
         (uint32_t)w->cols, n_tok, ldx, ldy};
  grid_addrs(c->vb, w->type, &p.grid, &p.ksigns);
  char name[32];
  const uint32_t rows = (uint32_t)w->rows;
  if (n_tok <= MATVEC_MAX_TOKENS) { /* 8 rows per workgroup, 8 tokens per block */
    snprintf(name, sizeof name, "matmul_%s", type_suffix(w->type));
    const uint32_t wgs = (rows + 7) / 8;
    pa_vkc_dispatch(c, name, &p, sizeof p, wgs < 65535 ? wgs : 65535, (n_tok + 7) / 8, (wgs + 65534) / 65535);
  } else { /* tiles of 64 rows by 32 tokens */
    snprintf(name, sizeof name, "matmul_tiled_%s", type_suffix(w->type));
    const uint32_t wgs = (rows + 63) / 64;
    pa_vkc_dispatch(c, name, &p, sizeof p, wgs < 65535 ? wgs : 65535, (n_tok + 31) / 32, (wgs + 65534) / 65535);
  }
}

void pa_vkc_product(pa_bctx *c, const pa_matrix *w, uint64_t x, uint32_t ldx, uint64_t y, uint32_t ldy,
                    uint32_t n_tok) {
  pa_vkc_product_at(c, w, pa_vkc_weight(c->vb, w->data), x, ldx, y, ldy, n_tok);
}

static void rope_rows(pa_bctx *c, uint64_t x, uint32_t n_tok, uint32_t n_heads, uint32_t head_dim, uint32_t stride,
                      pa_rope_kind k) {
  const pa_hparams *hp = c->hp;
  const uint32_t rd = (uint32_t)pa_rope_dim_of(hp, k == PA_ROPE_SWA);
  struct {
    uint64_t x, cos, sin;
    uint32_t n_tok, n_heads, head_dim, rope_dim, neox, stride;
  } p = {x, step_addr(c, k == PA_ROPE_SWA ? c->s_cos_swa : c->s_cos),
         step_addr(c, k == PA_ROPE_SWA ? c->s_sin_swa : c->s_sin), n_tok, n_heads, head_dim, rd, hp->rope_neox, stride};
  pa_vkc_dispatch(c, "rope", &p, sizeof p, (rd / 2 + 63) / 64, n_heads, n_tok);
}

static const char *kv_suffix(pa_kv_type t) { return t == PA_KV_F16 ? "f16" : t == PA_KV_Q8 ? "q8" : "f32"; }

static void kv_store(pa_bctx *c, int layer, uint32_t n_tok) {
  const pa_vk_buf *L = &c->kvb[layer];
  const struct kv_offsets *o = &c->kvo[layer];
  const pa_kv_shape a = c->kv->shape[layer];
  struct {
    uint64_t k, v, kc, vc, ks, vs, slot;
    uint32_t n_kv, hd_k, hd_v, k_stride, v_stride, bs;
  } p = {buf_addr(c, PA_BUF_K), buf_addr(c, PA_BUF_V), L->addr + o->k, L->addr + o->v, L->addr + o->ks,
         L->addr + o->vs, step_addr(c, c->s_slot), (uint32_t)a.n_head_kv, (uint32_t)a.head_dim_k,
         (uint32_t)a.head_dim_v, (uint32_t)(a.n_head_kv * a.head_dim_k), (uint32_t)(a.n_head_kv * a.head_dim_v),
         (uint32_t)c->kv->block_size};
  char name[32];
  snprintf(name, sizeof name, "kv_store_%s", kv_suffix(c->vals.type));
  pa_vkc_dispatch(c, name, &p, sizeof p, (uint32_t)a.n_head_kv, n_tok, 2);
}

static void op_matmul(pa_bctx *c, const pa_fwd_batch *b, const pa_matmul_desc *d) {
  const pa_hparams *hp = c->hp;
  const uint32_t n = (uint32_t)b->n;
  const uint32_t cols = (uint32_t)d->w[0]->cols;
  uint64_t x = buf_addr(c, d->in);
  if (d->in_norm) {
    pa_vkc_norm_rows(c, c->act.addr + c->off_xn, x, d->in_norm, cols, n, 0);
    x = c->act.addr + c->off_xn;
  }
  for (int m = 0; m < d->n_w; m++) {
    const uint32_t rows = (uint32_t)d->w[m]->rows;
    const uint64_t y = buf_addr(c, d->out[m]);
    pa_vkc_product(c, d->w[m], x, cols, y, rows, n);
    if (d->bias[m]) pa_vkc_add(c, y, pa_vkc_weight(c->vb, d->bias[m]), (uint64_t)rows * n, rows);
    /* the heads of the product's layer (backend.h) */
    const pa_attn_shape a = pa_layer_attn(hp, d->kv_layer >= 0 ? d->kv_layer : d->layer);
    const uint32_t hd = d->kv_layer >= 0 && m == 2 ? (uint32_t)a.head_dim_v : (uint32_t)a.head_dim;
    if (d->head_norm[m]) pa_vkc_norm_rows(c, y, y, d->head_norm[m], hd, n * (rows / hd), 0);
    if (d->rope[m] != PA_ROPE_NONE) rope_rows(c, y, n, rows / hd, hd, rows, d->rope[m]);
  }
  if (d->kv_layer >= 0) kv_store(c, d->kv_layer, n);
  if (d->gate != PA_GATE_NONE) {
    const uint64_t N = (uint64_t)d->w[0]->rows * n;
    struct {
      uint64_t g, u;
      uint32_t n, kind;
    } p = {buf_addr(c, d->out[0]), buf_addr(c, d->out[1]), (uint32_t)N, d->gate == PA_GATE_SILU ? 0u : 1u};
    pa_vkc_dispatch(c, "gate", &p, sizeof p, groups_for(N, 256), 1, 1);
  }
  if (d->unary == PA_UNARY_GELU_ERF) { /* the gate shader's kind 2: out[0] alone */
    const uint64_t N = (uint64_t)d->w[0]->rows * n;
    struct {
      uint64_t g, u;
      uint32_t n, kind;
    } p = {buf_addr(c, d->out[0]), buf_addr(c, d->out[0]), (uint32_t)N, 2u};
    pa_vkc_dispatch(c, "gate", &p, sizeof p, groups_for(N, 256), 1, 1);
  }
  if (d->residual != PA_BUF_NONE)
    pa_vkc_add(c, buf_addr(c, d->residual), buf_addr(c, d->out[0]), (uint64_t)d->w[0]->rows * n, 0);
}

static void op_attention(pa_bctx *c, const pa_fwd_batch *b, int layer, int32_t window) {
  const pa_hparams *hp = c->hp;
  const pa_vk_buf *L = &c->kvb[layer];
  const struct kv_offsets *o = &c->kvo[layer];
  const pa_attn_shape a = pa_layer_attn(hp, layer);
  struct {
    uint64_t q, out, kc, vc, ks, vs, pos, seq, tables, sinks;
    uint32_t n_head, n_kv, hd_k, hd_v, q_stride, o_stride, bs, max_blocks, window;
    float scale, softcap;
  } p = {buf_addr(c, PA_BUF_Q), buf_addr(c, PA_BUF_ATT), L->addr + o->k, L->addr + o->v,
         L->addr + o->ks, L->addr + o->vs, step_addr(c, c->s_pos), step_addr(c, c->s_seq),
         step_addr(c, c->s_tables),
         c->attn_sinks && c->attn_sinks[layer] ? pa_vkc_weight(c->vb, c->attn_sinks[layer]) : 0, (uint32_t)hp->n_head,
         (uint32_t)a.n_head_kv, (uint32_t)a.head_dim, (uint32_t)a.head_dim_v, (uint32_t)(hp->n_head * a.head_dim),
         (uint32_t)(hp->n_head * a.head_dim_v),
         (uint32_t)c->kv->block_size, (uint32_t)c->max_blocks, (uint32_t)(window > 0 ? window : 0), hp->attn_scale,
         hp->attn_softcap};
  if (hp->bidirectional) {
    /* every token up to its sequence's last position of the pass: the
     * shader bounds a token's keys by the position it reads here */
    int32_t *ap = (int32_t *)(void *)((uint8_t *)c->step.map + c->s_att_pos);
    for (int32_t t = 0; t < b->n; t++) {
      int32_t last = b->pos[t];
      for (int32_t u = 0; u < b->n; u++)
        if (b->seq[u] == b->seq[t] && b->pos[u] > last) last = b->pos[u];
      ap[t] = last;
    }
    p.pos = step_addr(c, c->s_att_pos);
    p.window = 0;
  }
  char name[32];
  snprintf(name, sizeof name, "attention_%s", kv_suffix(c->vals.type));
  pa_vkc_dispatch(c, name, &p, sizeof p, (uint32_t)hp->n_head, (uint32_t)b->n, 1);
}

static void op_logits(pa_bctx *c, const pa_fwd_batch *b, const float *norm, const pa_matrix *out,
                      float *logits) {
  if (b->n_out == 0) return;
  const int64_t E = c->hp->n_embd;
  int32_t *oi = (int32_t *)(void *)((uint8_t *)c->step.map + c->s_out);
  for (int32_t i = 0; i < b->n_out; i++) oi[i] = b->out_idx[i];
  pa_vkc_norm_rows(c, c->act.addr + c->off_xn, buf_addr(c, PA_BUF_X), norm, E, (uint32_t)b->n_out, step_addr(c, c->s_out));
  pa_vkc_product(c, out, c->act.addr + c->off_xn, (uint32_t)E, step_addr(c, c->s_logits), (uint32_t)out->rows,
          (uint32_t)b->n_out);
  pa_vkc_flush(c);
  memcpy(logits, (const uint8_t *)c->step.map + c->s_logits, sizeof(float) * (size_t)out->rows * (size_t)b->n_out);
  /* soft-capping on the host: the logits are here anyway, and it is one
   * tanh per value (the CPU backend's function, so the same bits) */
  if (c->hp->final_softcap > 0) pa_softcap(logits, c->hp->final_softcap, out->rows * (int64_t)b->n_out);
}

/* The final norm of the output rows, written straight into the host-visible
 * step buffer (the logits' room, sized for either) and copied out. */
static void op_hidden(pa_bctx *c, const pa_fwd_batch *b, const float *norm, float *hidden) {
  if (b->n_out == 0) return;
  const int64_t E = c->hp->n_embd;
  if (!norm) { /* the rows as they are: a copy each, one flush */
    const uint64_t row = (uint64_t)E * 4;
    for (int32_t i = 0; i < b->n_out; i++) {
      if (c->n_dl == MAX_DL) pa_vkc_flush(c);
      const uint64_t so = pa_vkc_staging(c, row);
      pa_vkc_copy(c, c->act.buf, c->off[PA_BUF_X] + (uint64_t)b->out_idx[i] * row, c->step.buf, so, row);
      c->dl[c->n_dl++] = (pending_download){so, row, (uint8_t *)(hidden + (int64_t)i * E)};
    }
    pa_vkc_flush(c);
    return;
  }
  int32_t *oi = (int32_t *)(void *)((uint8_t *)c->step.map + c->s_out);
  for (int32_t i = 0; i < b->n_out; i++) oi[i] = b->out_idx[i];
  pa_vkc_norm_rows(c, step_addr(c, c->s_logits), buf_addr(c, PA_BUF_X), norm, E, (uint32_t)b->n_out,
            step_addr(c, c->s_out));
  pa_vkc_flush(c);
  memcpy(hidden, (const uint8_t *)c->step.map + c->s_logits, sizeof(float) * (size_t)E * (size_t)b->n_out);
}

/* ---- contexts ---- */

static void context_free(pa_bctx *c) {
  if (!c) return;
  pa_vk_dev *d = c->d;
  pa_log(2, "vulkan: a context ran %lld graphs, recorded %lld of them", (long long)c->n_run, (long long)c->n_recorded);
  if (c->kv && c->kv->values == &c->vals) pa_kv_attach(c->kv, NULL);
  if (c->fence) d->f.vkDeviceWaitIdle(d->dev);
  for (int i = 0; i < N_CACHED; i++) pa_free(c->cache[i].nodes);
  if (c->pool) d->f.vkDestroyCommandPool(d->dev, c->pool, NULL);
  if (c->fence) d->f.vkDestroyFence(d->dev, c->fence, NULL);
  if (c->queries) d->f.vkDestroyQueryPool(d->dev, c->queries, NULL);
  pa_free(c->times);
  if (c->kvb)
    for (int l = 0; l < c->hp->n_layer; l++) pa_vk_buf_free(d, &c->kvb[l]);
  pa_free(c->kvb);
  pa_free(c->kvo);
  pa_vk_buf_free(d, &c->act);
  pa_vk_buf_free(d, &c->ssm);
  pa_vk_buf_free(d, &c->step);
  pa_free(c->nodes);
  pa_free(c->moe_chosen);
  pa_free(c->moe_weight);
  pa_free(c->moe_count);
  pa_free(c->moe_first);
  pa_free(c->ple_row);
  pa_free(c);
}

static uint64_t take(uint64_t *at, uint64_t bytes) {
  const uint64_t o = *at;
  *at += (bytes + 255) & ~255ull;
  return o;
}

static int context_init(const pa_backend *be, const pa_bctx_params *p, pa_bctx **out) {
  *out = NULL;
  vk_backend *vb = be->impl;
  pa_vk_dev *d = vb->d;
  const pa_hparams *hp = p->hp;
  const pa_attn_shape amax = pa_attn_max(hp);
  if (amax.head_dim_v > 512 || amax.head_dim > 512)
    return pa_error(PASADA_ERR_UNSUPPORTED, "vulkan: heads of more than 512 values");
  pa_bctx *c = pa_calloc(1, sizeof *c);
  if (!c) return pa_error(PASADA_ERR_NOMEM, "out of memory");
  c->vb = vb, c->d = d, c->hp = hp, c->kv = p->kv;
  c->n_batch = p->n_batch, c->n_seq_max = p->n_seq_max, c->rope_freqs = p->rope_freqs;
  c->attn_sinks = p->attn_sinks;
  c->max_blocks = p->kv->max_blocks_per_seq;
  int rc = PASADA_OK;
  c->nodes = pa_calloc(MAX_NODES, sizeof(node));
  for (int i = 0; i < N_CACHED && c->nodes; i++)
    if (!(c->cache[i].nodes = pa_calloc(MAX_NODES, sizeof(node)))) rc = PASADA_ERR_NOMEM;
  if (!c->nodes || rc) {
    context_free(c);
    return pa_error(PASADA_ERR_NOMEM, "out of memory");
  }
  /* activations: X, XB, Q, K, V, ATT, H1, H2 and the normed input, each
   * n_batch rows */
  const uint64_t B = (uint64_t)p->n_batch, E = (uint64_t)hp->n_embd, F = (uint64_t)hp->n_ff;
  uint64_t at = 0;
  for (int i = 0; i < PA_BUF_COUNT; i++) c->off[i] = take(&at, B * (uint64_t)pa_buf_width(hp, (pa_buf)i) * 4);
  c->off_xn = take(&at, B * (E > F ? E : F) * 4);
  const uint64_t NE = (uint64_t)hp->n_expert, KU = (uint64_t)hp->n_expert_used, FE = (uint64_t)hp->n_ff_exp;
  c->off_xg = take(&at, B * E * 4 * (NE > 0)), c->off_yg = take(&at, B * E * 4 * (NE > 0));
  c->off_hg = take(&at, B * FE * 4 * (NE > 0)), c->off_hu = take(&at, B * FE * 4 * (NE > 0));
  rc = pa_vk_buf_create(d, at, false, &c->act);
  if (!rc && hp->n_embd_per_layer > 0 &&
      !(c->ple_row = pa_alloc((size_t)pa_buf_width(hp, PA_BUF_PLE) * sizeof(float))))
    rc = pa_error(PASADA_ERR_NOMEM, "out of memory");
  if (!rc) rc = pa_vkc_delta_init(c, p); /* the recurrent layers' state */
  if (NE > 0 && !rc) {
    c->moe_chosen = pa_alloc(B * KU * sizeof(int32_t)), c->moe_weight = pa_alloc(B * KU * sizeof(float));
    c->moe_count = pa_alloc(NE * sizeof(int32_t)), c->moe_first = pa_alloc(NE * sizeof(int32_t));
    if (!c->moe_chosen || !c->moe_weight || !c->moe_count || !c->moe_first)
      rc = pa_error(PASADA_ERR_NOMEM, "out of memory");
  }
  /* the step buffer */
  const uint64_t half = (uint64_t)pa_rope_dim_max(hp) / 2;
  at = 0;
  c->s_tok = take(&at, B * 4), c->s_pos = take(&at, B * 4), c->s_seq = take(&at, B * 4);
  c->s_ckpt = take(&at, B * 4);
  c->s_out = take(&at, B * 4), c->s_slot = take(&at, B * 4), c->s_att_pos = take(&at, B * 4);
  c->s_cos = take(&at, B * half * 4), c->s_sin = take(&at, B * half * 4);
  c->s_cos_swa = take(&at, B * half * 4), c->s_sin_swa = take(&at, B * half * 4);
  c->s_tables = take(&at, (uint64_t)p->n_seq_max * (uint64_t)c->max_blocks * 4);
  c->staging_bytes = 4ull << 20;
  c->s_staging = take(&at, c->staging_bytes);
  /* the logits, or the hidden states of an embedding context */
  c->s_logits = take(&at, B * (uint64_t)(hp->n_vocab > hp->n_embd ? hp->n_vocab : hp->n_embd) * 4);
  c->s_moe_logits = take(&at, B * NE * 4), c->s_moe_idx = take(&at, B * KU * 4), c->s_moe_w = take(&at, B * KU * 4);
  if (!rc) rc = pa_vk_buf_create(d, at, true, &c->step);
  /* the KV cache's values, one buffer per layer of its own shape (none
   * for a layer of no heads) */
  const pa_kv_cache *kv = p->kv;
  const uint64_t elt = p->kv_type == PA_KV_F32 ? 4 : p->kv_type == PA_KV_F16 ? 2 : 1;
  const int32_t kv_layers = p->kv_layers > 0 && p->kv_layers < hp->n_layer ? p->kv_layers : hp->n_layer;
  c->kvb = rc ? NULL : pa_calloc((size_t)hp->n_layer, sizeof *c->kvb);
  c->kvo = rc ? NULL : pa_calloc((size_t)hp->n_layer, sizeof *c->kvo);
  if (!rc && (!c->kvb || !c->kvo)) rc = pa_error(PASADA_ERR_NOMEM, "out of memory");
  int64_t kv_bytes = 0;
  for (int l = 0; l < kv_layers && !rc; l++) {
    const pa_kv_shape *sh = &kv->shape[l];
    if (sh->n_head_kv == 0) continue;
    const uint64_t slots = (uint64_t)kv->n_blocks * (uint64_t)kv->block_size * (uint64_t)sh->n_head_kv;
    at = 0;
    c->kvo[l].k = take(&at, slots * (uint64_t)sh->head_dim_k * elt);
    c->kvo[l].v = take(&at, slots * (uint64_t)sh->head_dim_v * elt);
    c->kvo[l].ks = take(&at, p->kv_type == PA_KV_Q8 ? slots * 4 : 0);
    c->kvo[l].vs = take(&at, p->kv_type == PA_KV_Q8 ? slots * 4 : 0);
    rc = pa_vk_buf_create(d, at, false, &c->kvb[l]);
    kv_bytes += (int64_t)at;
  }
  c->vals = pa_vkc_kv_values(p->kv_type, kv_bytes);
  if (!rc) {
    const VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                         .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                         .queueFamilyIndex = d->queue_family};
    const VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkCommandBuffer cbs[N_CACHED];
    const VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                             .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                             .commandBufferCount = N_CACHED};
    if (d->f.vkCreateCommandPool(d->dev, &pci, NULL, &c->pool) != VK_SUCCESS ||
        d->f.vkCreateFence(d->dev, &fci, NULL, &c->fence) != VK_SUCCESS)
      rc = pa_error(PASADA_ERR_NOMEM, "vulkan: no command pool or fence");
    VkCommandBufferAllocateInfo ai = cai;
    ai.commandPool = c->pool;
    if (!rc && d->f.vkAllocateCommandBuffers(d->dev, &ai, cbs) != VK_SUCCESS)
      rc = pa_error(PASADA_ERR_NOMEM, "vulkan: no command buffers");
    for (int i = 0; i < N_CACHED && !rc; i++) c->cache[i].cb = cbs[i];
    const VkQueryPoolCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                       .queryType = VK_QUERY_TYPE_TIMESTAMP, .queryCount = MAX_NODES + 1};
    if (!rc && d->timestamp_ns > 0 && d->f.vkCreateQueryPool(d->dev, &qci, NULL, &c->queries) != VK_SUCCESS)
      c->queries = VK_NULL_HANDLE;
  }
  if (rc) {
    pa_error_prefix("a context on %s: ", d->info.name);
    context_free(c);
    return rc;
  }
  pa_kv_attach(p->kv, &c->vals);
  *out = c;
  return PASADA_OK;
}

/* ---- timing ---- */

int pa_vk_timing(pa_bctx *c, bool on) {
  if (on && !c->queries)
    return pa_error(PASADA_ERR_UNSUPPORTED, "%s has no timestamps on its compute queue", c->d->info.name);
  if (on && !c->times) {
    c->cap_times = 64;
    if (!(c->times = pa_calloc((size_t)c->cap_times, sizeof *c->times))) return pa_error(PASADA_ERR_NOMEM, "out of memory");
  }
  pa_vkc_flush(c);
  c->timing = on;
  return PASADA_OK;
}

int pa_vk_times(pa_bctx *c, const pa_vk_time **times) {
  *times = c->times;
  return c->n_times;
}

void pa_vk_times_reset(pa_bctx *c) { c->n_times = 0; }

/* ---- the backend ---- */

pa_vk_dev *pa_vk_backend_dev(const pa_backend *be) { return ((const vk_backend *)be->impl)->d; }

static const pa_backend_ops vulkan_ops = {
    .name = "vulkan", .default_kv_type = PA_KV_F16, .prepare_weights = prepare_weights,
    .context_init = context_init, .context_free = context_free, .upload = op_upload, .download = op_download,
    .synchronize = op_synchronize, .begin = op_begin, .embed = op_embed, .rms_norm = op_rms_norm, .add = op_add, .scale = op_scale,
    .layer_norm = op_layer_norm, .embed_add = op_embed_add, .per_layer_embed = op_per_layer_embed,
    .gelu_mul = op_gelu_mul, .matmul = op_matmul, .attention = op_attention, .moe = pa_vkc_moe, .logits = op_logits,
    .hidden = op_hidden, .delta_net = pa_vkc_delta_net, .sigmoid_mul = pa_vkc_sigmoid_mul,
    .state_copy = pa_vkc_state_copy};

static void vk_backend_free_impl(vk_backend *vb) {
  if (!vb) return;
  for (int i = 0; i < vb->n_chunks; i++) pa_vk_buf_free(vb->d, &vb->chunks[i]);
  pa_free(vb->chunks);
  pa_free(vb->map);
  pa_vk_close(vb->d);
  pa_free(vb);
}

void pa_backend_vulkan_free(pa_backend *be) { vk_backend_free_impl(be->impl); }

int pa_backend_vulkan_create(int device, pa_backend **out) {
  *out = NULL;
  pa_vk_dev *d;
  int rc = pa_vk_open(device, &d);
  if (rc) return rc;
  pa_backend *be = pa_calloc(1, sizeof *be);
  vk_backend *vb = pa_calloc(1, sizeof *vb);
  if (!be || !vb) {
    pa_free(be);
    pa_free(vb);
    pa_vk_close(d);
    return pa_error(PASADA_ERR_NOMEM, "out of memory");
  }
  vb->d = d;
  be->ops = &vulkan_ops;
  be->impl = vb;
  be->free_impl = pa_backend_vulkan_free;
  if (device >= 0)
    snprintf(be->name, sizeof be->name, "vulkan:%d", device);
  else
    snprintf(be->name, sizeof be->name, "vulkan");
  snprintf(be->kernels, sizeof be->kernels, "vulkan:%d", d->info.index);
  *out = be;
  return PASADA_OK;
}
