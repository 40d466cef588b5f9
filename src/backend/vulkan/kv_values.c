/* kv_values.c: the KV cache's values on the Vulkan device (pa_kv_values,
 * runtime/kv_cache.h): a block copied (copy-on-write, prefix reuse) as
 * copies in the graph, one position's row of a head written through the
 * staging buffer or read back (a flush), in the cache's type (F32, F16,
 * or Q8 with a scale per row: shaders/kv.glsl). */
#include <stddef.h>
#include <string.h>

#include "backend/vulkan/context.h"
#include "kernels/ops.h"

static pa_bctx *ctx_of(pa_kv_values *vals) {
  return (pa_bctx *)(void *)((uint8_t *)vals - offsetof(pa_bctx, vals));
}

static void kv_copy_block(pa_kv_values *vals, const pa_kv_cache *kv, int32_t dst, int32_t src) {
  pa_bctx *c = ctx_of(vals);
  const uint64_t bs = (uint64_t)kv->block_size;
  const uint64_t elt = vals->type == PA_KV_F32 ? 4 : vals->type == PA_KV_F16 ? 2 : 1;
  for (int l = 0; l < kv->n_layer; l++) {
    const VkBuffer B = c->kvb[l].buf;
    if (!B) continue; /* a layer another backend holds (src/backend/split), or one of no heads */
    const struct kv_offsets *o = &c->kvo[l];
    const uint64_t nk = (uint64_t)kv->shape[l].n_head_kv;
    const uint64_t kb = nk * bs * (uint64_t)kv->shape[l].head_dim_k * elt;
    const uint64_t vb = nk * bs * (uint64_t)kv->shape[l].head_dim_v * elt;
    pa_vkc_copy(c, B, o->k + (uint64_t)src * kb, B, o->k + (uint64_t)dst * kb, kb);
    pa_vkc_copy(c, B, o->v + (uint64_t)src * vb, B, o->v + (uint64_t)dst * vb, vb);
    if (vals->type == PA_KV_Q8) {
      pa_vkc_copy(c, B, o->ks + (uint64_t)src * nk * bs * 4, B, o->ks + (uint64_t)dst * nk * bs * 4, nk * bs * 4);
      pa_vkc_copy(c, B, o->vs + (uint64_t)src * nk * bs * 4, B, o->vs + (uint64_t)dst * nk * bs * 4, nk * bs * 4);
    }
  }
}

/* one KV head's row of one position: its byte offsets in the layer's buffer */
static void kv_row_offsets(const pa_bctx *c, const pa_kv_cache *kv, int layer, int32_t seq, int32_t pos, int32_t h,
                           uint64_t *k, uint64_t *v, uint64_t *ks, uint64_t *vs) {
  const uint64_t bs = (uint64_t)kv->block_size;
  const uint64_t b = (uint64_t)kv->table[seq][pos / kv->block_size];
  const pa_kv_shape *sh = &kv->shape[layer];
  const struct kv_offsets *o = &c->kvo[layer];
  const uint64_t row = (b * (uint64_t)sh->n_head_kv + (uint64_t)h) * bs + (uint64_t)(pos % kv->block_size);
  const uint64_t elt = c->vals.type == PA_KV_F32 ? 4 : c->vals.type == PA_KV_F16 ? 2 : 1;
  *k = o->k + row * (uint64_t)sh->head_dim_k * elt;
  *v = o->v + row * (uint64_t)sh->head_dim_v * elt;
  *ks = o->ks + row * 4;
  *vs = o->vs + row * 4;
}

/* a row of n floats in the cache's type, into staging, and copied at off */
static void kv_put_row(pa_bctx *c, int layer, uint64_t off, uint64_t scale_off, const float *x, int32_t n) {
  const pa_ops_kernels *ops = pa_ops_best();
  const uint64_t elt = c->vals.type == PA_KV_F32 ? 4 : c->vals.type == PA_KV_F16 ? 2 : 1;
  const uint64_t so = pa_vkc_staging(c, (uint64_t)n * elt + 4);
  uint8_t *s = (uint8_t *)c->step.map + so;
  if (c->vals.type == PA_KV_F32) {
    memcpy(s, x, (size_t)n * 4);
  } else if (c->vals.type == PA_KV_F16) {
    ops->f32_to_f16((uint16_t *)(void *)s, x, n);
  } else {
    const float scale = ops->q8_row((int8_t *)s, x, n);
    memcpy(s + n, &scale, 4);
    pa_vkc_copy(c, c->step.buf, so + (uint64_t)n, c->kvb[layer].buf, scale_off, 4);
  }
  pa_vkc_copy(c, c->step.buf, so, c->kvb[layer].buf, off, (uint64_t)n * elt);
}

static void kv_write(pa_kv_values *vals, const pa_kv_cache *kv, int layer, int32_t seq, int32_t pos, int32_t h,
                     const float *k, const float *v) {
  pa_bctx *c = ctx_of(vals);
  uint64_t ko, vo, kso, vso;
  kv_row_offsets(c, kv, layer, seq, pos, h, &ko, &vo, &kso, &vso);
  if (k) kv_put_row(c, layer, ko, kso, k, kv->shape[layer].head_dim_k);
  if (v) kv_put_row(c, layer, vo, vso, v, kv->shape[layer].head_dim_v);
}

static void kv_read(pa_kv_values *vals, const pa_kv_cache *kv, int layer, int32_t seq, int32_t pos, int32_t h,
                    float *k, float *v) {
  pa_bctx *c = ctx_of(vals);
  uint64_t ko, vo, kso, vso;
  kv_row_offsets(c, kv, layer, seq, pos, h, &ko, &vo, &kso, &vso);
  const uint64_t elt = c->vals.type == PA_KV_F32 ? 4 : c->vals.type == PA_KV_F16 ? 2 : 1;
  const int32_t hk = kv->shape[layer].head_dim_k, hv = kv->shape[layer].head_dim_v;
  const uint64_t nk = (uint64_t)hk * elt, nv = (uint64_t)hv * elt;
  /* one region: a second call could flush and hand the first out again */
  const uint64_t sk = pa_vkc_staging(c, ((nk + 15) & ~15ull) + ((nv + 15) & ~15ull) + 8);
  const uint64_t sv = sk + ((nk + 15) & ~15ull), ss = sv + ((nv + 15) & ~15ull);
  const VkBuffer B = c->kvb[layer].buf;
  pa_vkc_copy(c, B, ko, c->step.buf, sk, nk);
  pa_vkc_copy(c, B, vo, c->step.buf, sv, nv);
  if (c->vals.type == PA_KV_Q8) {
    pa_vkc_copy(c, B, kso, c->step.buf, ss, 4);
    pa_vkc_copy(c, B, vso, c->step.buf, ss + 4, 4);
  }
  pa_vkc_flush(c);
  const uint8_t *m = c->step.map;
  for (int32_t d = 0; d < hk || d < hv; d++) {
    for (int w = 0; w < 2; w++) {
      if (d >= (w ? hv : hk)) continue;
      const uint8_t *src = m + (w ? sv : sk);
      float x;
      if (c->vals.type == PA_KV_F32)
        memcpy(&x, src + (uint64_t)d * 4, 4);
      else if (c->vals.type == PA_KV_F16) {
        uint16_t hbits;
        memcpy(&hbits, src + (uint64_t)d * 2, 2);
        x = pa_f16_to_f32(hbits);
      } else {
        float sc;
        memcpy(&sc, m + ss + (w ? 4 : 0), 4);
        x = (float)((const int8_t *)src)[d] * sc;
      }
      (w ? v : k)[d] = x;
    }
  }
}

pa_kv_values pa_vkc_kv_values(pa_kv_type type, int64_t bytes) {
  return (pa_kv_values){.type = type, .bytes = bytes, .copy_block = kv_copy_block, .write = kv_write, .read = kv_read};
}
