/* quantize.c: the reference quantizers of the 32-element block types (Q4_0,
 * Q4_1, Q5_0, Q5_1, Q8_0, Q8_1) and of Q8_K, the activation type of K-quant
 * dot products. Their arithmetic (float32 throughout, the scale kept
 * unrounded for the division, truncation after adding one half) is the one
 * of ggml's reference and of the `gguf` Python package, so the bytes they
 * write are identical to those. */
#include <math.h>
#include <string.h>

#include "quant/quant.h"

PA_NO_FP_CONTRACT

/* The element of largest magnitude, signed; the first one on ties. */
static float signed_absmax(const float *x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; j++) {
    if (fabsf(x[j]) > amax) {
      amax = fabsf(x[j]);
      max = x[j];
    }
  }
  return max;
}

static void min_max(const float *x, int n, float *min, float *max) {
  float lo = x[0], hi = x[0];
  for (int j = 1; j < n; j++) {
    if (x[j] < lo) lo = x[j];
    if (x[j] > hi) hi = x[j];
  }
  *min = lo;
  *max = hi;
}

/* (int)trunc(v) clamped to [0, top]; v is never far outside that range. */
static inline int trunc_clamp(float v, int top) {
  if (!(v > 0.0f)) return 0; /* also NaN */
  if (v >= (float)top) return top;
  return (int)v;
}

void pa_quantize_q4_0(const float *src, void *dst, int64_t n) {
  block_q4_0 *y = dst;
  for (int64_t b = 0; b < n / QK4_0; b++, src += QK4_0) {
    /* The largest magnitude maps to -8 exactly, so the full range is used
     * on the side that has one more level. */
    const float d = signed_absmax(src, QK4_0) / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    pa_store_f16(&y[b].d, d);
    for (int l = 0; l < QK4_0 / 2; l++) {
      int lo = trunc_clamp(src[l] * id + 8.5f, 15);
      int hi = trunc_clamp(src[l + QK4_0 / 2] * id + 8.5f, 15);
      y[b].qs[l] = (uint8_t)(lo | hi << 4);
    }
  }
}

void pa_quantize_q4_1(const float *src, void *dst, int64_t n) {
  block_q4_1 *y = dst;
  for (int64_t b = 0; b < n / QK4_1; b++, src += QK4_1) {
    float min, max;
    min_max(src, QK4_1, &min, &max);
    const float d = (max - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    pa_store_f16(&y[b].d, d);
    pa_store_f16(&y[b].m, min);
    for (int l = 0; l < QK4_1 / 2; l++) {
      int lo = trunc_clamp((src[l] - min) * id + 0.5f, 15);
      int hi = trunc_clamp((src[l + QK4_1 / 2] - min) * id + 0.5f, 15);
      y[b].qs[l] = (uint8_t)(lo | hi << 4);
    }
  }
}

static inline void store_qh(uint8_t qh[4], uint32_t bits) {
  for (int i = 0; i < 4; i++) qh[i] = (uint8_t)(bits >> (8 * i));
}

void pa_quantize_q5_0(const float *src, void *dst, int64_t n) {
  block_q5_0 *y = dst;
  for (int64_t b = 0; b < n / QK5_0; b++, src += QK5_0) {
    const float d = signed_absmax(src, QK5_0) / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    uint32_t qh = 0;
    pa_store_f16(&y[b].d, d);
    for (int l = 0; l < QK5_0 / 2; l++) {
      int lo = trunc_clamp(src[l] * id + 16.5f, 31);
      int hi = trunc_clamp(src[l + QK5_0 / 2] * id + 16.5f, 31);
      y[b].qs[l] = (uint8_t)((lo & 0xF) | (hi & 0xF) << 4);
      qh |= (uint32_t)(lo >> 4) << l | (uint32_t)(hi >> 4) << (l + QK5_0 / 2);
    }
    store_qh(y[b].qh, qh);
  }
}

void pa_quantize_q5_1(const float *src, void *dst, int64_t n) {
  block_q5_1 *y = dst;
  for (int64_t b = 0; b < n / QK5_1; b++, src += QK5_1) {
    float min, max;
    min_max(src, QK5_1, &min, &max);
    const float d = (max - min) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    uint32_t qh = 0;
    pa_store_f16(&y[b].d, d);
    pa_store_f16(&y[b].m, min);
    for (int l = 0; l < QK5_1 / 2; l++) {
      int lo = trunc_clamp((src[l] - min) * id + 0.5f, 31);
      int hi = trunc_clamp((src[l + QK5_1 / 2] - min) * id + 0.5f, 31);
      y[b].qs[l] = (uint8_t)((lo & 0xF) | (hi & 0xF) << 4);
      qh |= (uint32_t)(lo >> 4) << l | (uint32_t)(hi >> 4) << (l + QK5_1 / 2);
    }
    store_qh(y[b].qh, qh);
  }
}

/* Symmetric 8-bit: d = amax / 127, q = round half away from zero (roundf). */
static float quantize_block_q8(const float *x, int8_t *qs, int n, int *sum) {
  float amax = 0.0f;
  for (int j = 0; j < n; j++) amax = fmaxf(amax, fabsf(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  int s = 0;
  for (int j = 0; j < n; j++) {
    float v = roundf(x[j] * id);
    int q = v > 127.0f ? 127 : v < -127.0f ? -127 : (int)v;
    qs[j] = (int8_t)q;
    s += q;
  }
  *sum = s;
  return d;
}

void pa_quantize_q8_0(const float *src, void *dst, int64_t n) {
  block_q8_0 *y = dst;
  for (int64_t b = 0; b < n / QK8_0; b++, src += QK8_0) {
    int sum;
    pa_store_f16(&y[b].d, quantize_block_q8(src, y[b].qs, QK8_0, &sum));
  }
}

void pa_quantize_q8_1(const float *src, void *dst, int64_t n) {
  block_q8_1 *y = dst;
  for (int64_t b = 0; b < n / QK8_1; b++, src += QK8_1) {
    int sum;
    const float d = quantize_block_q8(src, y[b].qs, QK8_1, &sum);
    pa_store_f16(&y[b].d, d);
    pa_store_f16(&y[b].s, (float)sum * d); /* lets Q4_1/Q5_1 dots fold in their min */
  }
}

/* Q8_K keeps d in float32 and maps the largest magnitude to -127 (so the
 * other side may reach 128, clamped to 127); rounding is to nearest even.
 * bsums hold the sums of each 16 values for the K-quant mins. */
void pa_quantize_q8_K(const float *src, void *dst, int64_t n) {
  block_q8_K *y = dst;
  for (int64_t b = 0; b < n / QK_K; b++, src += QK_K) {
    const float max = signed_absmax(src, QK_K);
    if (max == 0.0f) {
      memset(&y[b], 0, sizeof y[b]);
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < QK_K; j++) {
      long v = lrintf(iscale * src[j]);
      y[b].qs[j] = (int8_t)(v > 127 ? 127 : v);
    }
    for (int g = 0; g < QK_K / 16; g++) {
      int s = 0;
      for (int l = 0; l < 16; l++) s += y[b].qs[16 * g + l];
      y[b].bsums[g] = (int16_t)s;
    }
    const float d = 1.0f / iscale;
    memcpy(&y[b].d, &d, sizeof d);
  }
}
