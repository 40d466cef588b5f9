/* split.c: a model across a GPU backend and the CPU ("vulkan:N/L",
 * --gpu-layers L): layers [0, L) run on the GPU, the embedding, layers
 * [L, n_layer) and the output on the CPU, so a model larger than the
 * GPU's memory still runs; with L = n_layer the output runs on the GPU
 * too. The GPU holds only its layers' weights and KV values; the CPU
 * reads its weights in the file's layout (they are not repacked: the
 * GPU's copies were made from the same host tensors) and keeps KV values
 * for every layer in host memory.
 *
 * Ops go to the side of the layer the model code last named (the layer
 * op; the embedding stage, layer -1, is the CPU's); the residual stream X
 * and the per-layer inputs PLE are the only buffers that live across
 * layers, so when an op runs on the other side from X's, their rows of the
 * pass are downloaded from one and uploaded to the other first. The KV cache's
 * block manager is the context's; each side reads it through a copy of
 * the manager's struct whose `values` are its own (the tables it points
 * to are shared), and the values the context sees route by layer. The
 * recurrent layers' state (linear attention) is kept the same way: the GPU
 * holds its layers' (those whose KV values it holds), the CPU every
 * layer's, and a state copy runs on both. */
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "base/base.h"
#include "model/model.h"

typedef struct {
  pa_backend *gpu, *cpu;
  int32_t n_gpu; /* layers on the GPU */
} split_backend;

struct pa_bctx {
  const split_backend *sb;
  const pa_hparams *hp;
  pa_bctx *g, *c;      /* the two sides' contexts */
  pa_kv_cache kg, kc;  /* the block manager as each side sees it */
  pa_kv_values vals;   /* what the context's manager holds: routes by layer */
  pa_kv_cache *kv;
  int layer;           /* the layer of the ops that come (n_layer: the output) */
  int x_side;          /* 0: X is on the GPU, 1: on the CPU */
  int32_t n_tok;       /* rows of X in the pass */
  float *xfer;         /* X (or PLE) on its way between the sides */
};

static bool on_gpu(const pa_bctx *s, int layer) {
  if (layer < 0) return false; /* the embedding stage: where the embedding is */
  return layer < s->sb->n_gpu || (layer >= s->hp->n_layer && s->sb->n_gpu == s->hp->n_layer);
}

static const pa_backend_ops *ops_of(const pa_bctx *s, bool gpu) { return gpu ? s->sb->gpu->ops : s->sb->cpu->ops; }
static pa_bctx *ctx_of_side(const pa_bctx *s, bool gpu) { return gpu ? s->g : s->c; }

/* X onto the side of the current layer */
static bool side(pa_bctx *s) {
  const bool gpu = on_gpu(s, s->layer);
  const int want = gpu ? 0 : 1;
  if (s->x_side != want && s->n_tok > 0) {
    const pa_buf moving[2] = {PA_BUF_X, PA_BUF_PLE};
    for (int i = 0; i < 2; i++) {
      const int64_t n = (int64_t)s->n_tok * pa_buf_width(s->hp, moving[i]);
      if (n == 0) continue;
      ops_of(s, !gpu)->download(ctx_of_side(s, !gpu), moving[i], 0, s->xfer, n);
      ops_of(s, gpu)->upload(ctx_of_side(s, gpu), moving[i], 0, s->xfer, n);
    }
  }
  s->x_side = want;
  return gpu;
}

/* ---- memory: the side X is on ---- */

static void op_upload(pa_bctx *s, pa_buf dst, int64_t off, const float *src, int64_t n) {
  const bool gpu = s->x_side == 0;
  ops_of(s, gpu)->upload(ctx_of_side(s, gpu), dst, off, src, n);
}

static void op_download(pa_bctx *s, pa_buf src, int64_t off, float *dst, int64_t n) {
  const bool gpu = s->x_side == 0;
  ops_of(s, gpu)->download(ctx_of_side(s, gpu), src, off, dst, n);
}

static void op_synchronize(pa_bctx *s) {
  ops_of(s, true)->synchronize(s->g);
  ops_of(s, false)->synchronize(s->c);
}

/* ---- ops ---- */

static void op_begin(pa_bctx *s, const pa_fwd_batch *b) {
  s->n_tok = b->n;
  ops_of(s, true)->begin(s->g, b);
  ops_of(s, false)->begin(s->c, b);
}

static void op_embed(pa_bctx *s, const pa_fwd_batch *b, const pa_matrix *table, float scale) {
  s->n_tok = b->n;
  s->x_side = 1; /* the embedding table stays on the host */
  ops_of(s, false)->embed(s->c, b, table, scale);
}

static void op_layer(pa_bctx *s, int layer) { s->layer = layer; }

static void op_rms_norm(pa_bctx *s, pa_buf out, pa_buf in, const float *w, int64_t n, int32_t n_tok) {
  const bool gpu = side(s);
  ops_of(s, gpu)->rms_norm(ctx_of_side(s, gpu), out, in, w, n, n_tok);
}

static void op_add(pa_bctx *s, pa_buf x, pa_buf y, int64_t n, int32_t n_tok) {
  const bool gpu = side(s);
  ops_of(s, gpu)->add(ctx_of_side(s, gpu), x, y, n, n_tok);
}

static void op_scale(pa_bctx *s, pa_buf x, float v, int64_t n, int32_t n_tok) {
  const bool gpu = side(s);
  ops_of(s, gpu)->scale(ctx_of_side(s, gpu), x, v, n, n_tok);
}

static void op_per_layer_embed(pa_bctx *s, const pa_fwd_batch *b, const pa_matrix *table, float scale,
                               float out_scale) {
  const bool gpu = side(s);
  ops_of(s, gpu)->per_layer_embed(ctx_of_side(s, gpu), b, table, scale, out_scale);
}

static void op_gelu_mul(pa_bctx *s, pa_buf x, pa_buf y, int64_t n, int64_t y_stride, int64_t y_off, int32_t n_tok) {
  const bool gpu = side(s);
  ops_of(s, gpu)->gelu_mul(ctx_of_side(s, gpu), x, y, n, y_stride, y_off, n_tok);
}

static void op_matmul(pa_bctx *s, const pa_fwd_batch *b, const pa_matmul_desc *d) {
  const bool gpu = side(s);
  ops_of(s, gpu)->matmul(ctx_of_side(s, gpu), b, d);
}

static void op_moe(pa_bctx *s, const pa_fwd_batch *b, const pa_moe_desc *d) {
  const bool gpu = side(s);
  ops_of(s, gpu)->moe(ctx_of_side(s, gpu), b, d);
}

static void op_attention(pa_bctx *s, const pa_fwd_batch *b, int layer, int32_t window) {
  s->layer = layer;
  const bool gpu = side(s);
  ops_of(s, gpu)->attention(ctx_of_side(s, gpu), b, layer, window);
}

static void op_delta_net(pa_bctx *s, const pa_fwd_batch *b, const pa_delta_desc *d) {
  s->layer = d->layer;
  const bool gpu = side(s);
  ops_of(s, gpu)->delta_net(ctx_of_side(s, gpu), b, d);
}

static void op_sigmoid_mul(pa_bctx *s, pa_buf x, pa_buf g, int64_t n, int64_t ng, int32_t n_tok) {
  const bool gpu = side(s);
  ops_of(s, gpu)->sigmoid_mul(ctx_of_side(s, gpu), x, g, n, ng, n_tok);
}

/* each side keeps the state of its own recurrent layers: both copy */
static void op_state_copy(pa_bctx *s, int32_t dst, int32_t src) {
  ops_of(s, true)->state_copy(s->g, dst, src);
  ops_of(s, false)->state_copy(s->c, dst, src);
}

static void op_logits(pa_bctx *s, const pa_fwd_batch *b, const float *norm, const pa_matrix *out, float *logits) {
  s->layer = s->hp->n_layer;
  const bool gpu = side(s);
  ops_of(s, gpu)->logits(ctx_of_side(s, gpu), b, norm, out, logits);
}

static void op_hidden(pa_bctx *s, const pa_fwd_batch *b, const float *norm, float *hidden) {
  s->layer = s->hp->n_layer;
  const bool gpu = side(s);
  ops_of(s, gpu)->hidden(ctx_of_side(s, gpu), b, norm, hidden);
}

/* ---- the KV values: by layer ---- */

static pa_bctx *split_of(pa_kv_values *v) { return (pa_bctx *)(void *)((uint8_t *)v - offsetof(pa_bctx, vals)); }

static void kv_copy_block(pa_kv_values *v, const pa_kv_cache *kv, int32_t dst, int32_t src) {
  (void)kv;
  pa_bctx *s = split_of(v);
  s->kg.values->copy_block(s->kg.values, &s->kg, dst, src);
  s->kc.values->copy_block(s->kc.values, &s->kc, dst, src);
}

static void kv_write(pa_kv_values *v, const pa_kv_cache *kv, int layer, int32_t seq, int32_t pos, int32_t h,
                     const float *k, const float *vv) {
  (void)kv;
  pa_bctx *s = split_of(v);
  pa_kv_cache *side_kv = layer < s->sb->n_gpu ? &s->kg : &s->kc;
  if (k) pa_kv_store_k(side_kv, layer, seq, pos, h, k);
  if (vv) pa_kv_store_v(side_kv, layer, seq, pos, h, vv);
}

static void kv_read(pa_kv_values *v, const pa_kv_cache *kv, int layer, int32_t seq, int32_t pos, int32_t h,
                    float *k, float *vv) {
  (void)kv;
  pa_bctx *s = split_of(v);
  pa_kv_load(layer < s->sb->n_gpu ? &s->kg : &s->kc, layer, seq, pos, h, k, vv);
}

/* ---- contexts ---- */

static void context_free(pa_bctx *s) {
  if (!s) return;
  if (s->kv && s->kv->values == &s->vals) pa_kv_attach(s->kv, NULL);
  if (s->g) s->sb->gpu->ops->context_free(s->g);
  if (s->c) s->sb->cpu->ops->context_free(s->c);
  pa_free(s->xfer);
  pa_free(s);
}

static int context_init(const pa_backend *be, const pa_bctx_params *p, pa_bctx **out) {
  *out = NULL;
  const split_backend *sb = be->impl;
  pa_bctx *s = pa_calloc(1, sizeof *s);
  if (!s) return pa_error(PASADA_ERR_NOMEM, "out of memory");
  s->sb = sb, s->hp = p->hp, s->kv = p->kv;
  s->x_side = 1;
  s->kg = *p->kv, s->kc = *p->kv;
  s->kg.values = s->kc.values = NULL;
  s->kg.owns_values = s->kc.owns_values = false;
  const int64_t ple = pa_buf_width(p->hp, PA_BUF_PLE);
  s->xfer = pa_alloc(sizeof(float) * (size_t)p->n_batch * (size_t)(ple > p->hp->n_embd ? ple : p->hp->n_embd));
  int rc = s->xfer ? PASADA_OK : pa_error(PASADA_ERR_NOMEM, "out of memory");
  pa_bctx_params gp = *p, cp = *p;
  gp.kv = &s->kg, gp.kv_layers = sb->n_gpu;
  cp.kv = &s->kc, cp.kv_layers = 0;
  if (!rc) rc = sb->gpu->ops->context_init(sb->gpu, &gp, &s->g);
  if (!rc) rc = sb->cpu->ops->context_init(sb->cpu, &cp, &s->c);
  if (rc) {
    context_free(s);
    return rc;
  }
  s->vals = (pa_kv_values){.type = p->kv_type, .bytes = s->kg.values->bytes + s->kc.values->bytes,
                           .copy_block = kv_copy_block, .write = kv_write, .read = kv_read};
  pa_kv_attach(p->kv, &s->vals);
  *out = s;
  return PASADA_OK;
}

/* ---- the backend ---- */

static int prepare_weights(const pa_backend *be, struct pa_model *m) {
  const split_backend *sb = be->impl;
  if (sb->n_gpu > m->hp.n_layer)
    return pa_error(PASADA_ERR_ARG, "--gpu-layers %d: the model has %d layers", sb->n_gpu, m->hp.n_layer);
  /* bert's embedding stage (learned positions, a LayerNorm: layer_norm and
   * embed_add, which this backend does not route) runs on one device */
  if (m->hp.arch == PA_ARCH_BERT)
    return pa_error(PASADA_ERR_UNSUPPORTED, "--gpu-layers: a bert model runs whole on one device (drop --gpu-layers)");
  /* a layer that reads another's KV cache (gemma4) runs where that cache is */
  for (int l = 0; m->hp.n_kv_shared > 0 && l < m->hp.n_layer; l++)
    if ((l < sb->n_gpu) != (m->hp.kv_from[l] < sb->n_gpu))
      return pa_error(PASADA_ERR_UNSUPPORTED, "--gpu-layers %d: layer %d attends over layer %d's KV cache, which "
                      "would be on the other device (put both on one side)", sb->n_gpu, l, m->hp.kv_from[l]);
  /* the GPU's layers (and the output when it holds every layer); the CPU
   * reads the rest as the file lays them out */
  return pa_vulkan_prepare_layers(sb->gpu, m, sb->n_gpu, sb->n_gpu == m->hp.n_layer);
}

static const pa_backend_ops split_ops = {
    .name = "split", .default_kv_type = PA_KV_F16, .prepare_weights = prepare_weights,
    .context_init = context_init, .context_free = context_free, .upload = op_upload, .download = op_download,
    .synchronize = op_synchronize, .begin = op_begin, .embed = op_embed, .rms_norm = op_rms_norm, .add = op_add, .scale = op_scale,
    .per_layer_embed = op_per_layer_embed, .gelu_mul = op_gelu_mul, .matmul = op_matmul, .moe = op_moe,
    .attention = op_attention, .logits = op_logits, .hidden = op_hidden,
    .delta_net = op_delta_net, .sigmoid_mul = op_sigmoid_mul, .state_copy = op_state_copy, .layer = op_layer};

static void split_free(pa_backend *be) {
  split_backend *sb = be->impl;
  if (!sb) return;
  pa_backend_free(sb->gpu);
  pa_backend_free(sb->cpu);
  pa_free(sb);
}

int pa_backend_split_create(const char *gpu, int32_t n_gpu_layers, uint64_t weight_bytes, pa_backend **out) {
  *out = NULL;
  split_backend *sb = pa_calloc(1, sizeof *sb);
  pa_backend *be = pa_calloc(1, sizeof *be);
  int rc = sb && be ? PASADA_OK : pa_error(PASADA_ERR_NOMEM, "out of memory");
  if (!rc) rc = pa_backend_create(gpu, weight_bytes, &sb->gpu);
  if (!rc) rc = pa_backend_cpu_create(NULL, weight_bytes, &sb->cpu);
  if (rc) {
    if (sb) {
      pa_backend_free(sb->gpu);
      pa_backend_free(sb->cpu);
    }
    pa_free(sb);
    pa_free(be);
    return rc;
  }
  sb->n_gpu = n_gpu_layers;
  be->ops = &split_ops;
  be->impl = sb;
  be->free_impl = split_free;
  snprintf(be->name, sizeof be->name, "%.20s/%d", gpu, n_gpu_layers);
  snprintf(be->kernels, sizeof be->kernels, "%.15s+%.15s", sb->gpu->kernels, sb->cpu->kernels);
  *out = be;
  return PASADA_OK;
}
