/* quantize_iq.c: reference quantizers of the non-linear 4-bit types IQ4_NL
 * (blocks of 32) and IQ4_XS (super-blocks of 256), and of MXFP4.
 *
 * IQ4_NL/IQ4_XS: each block of 32 searches its scale against the
 * non-linear levels (pa_kvalues_iq4nl): a first weighted least-squares
 * scale from the largest element on the most negative level, then 15
 * trial grids (the largest element on level values[0] + t, t = -7..7), each
 * rounded to the nearest levels and refitted, keeping the best weighted fit
 * (weights x^2). IQ4_XS then quantizes the 8 sub-block scales to 6 bits
 * against one fp16 super-block scale and re-rounds the elements with the
 * decoded scales. MXFP4: the shared exponent puts the largest magnitude in
 * [4, 8) times the scale, each element takes the nearest E2M1 value (the
 * first on ties). All of it follows llama.cpp's reference quantizers (no
 * importance matrix) in the same float32 arithmetic, so the bytes are
 * identical (tests/e2e/test_quant.py against tests/fixtures/quant). */
#include <math.h>
#include <string.h>

#include "quant/quant.h"

PA_NO_FP_CONTRACT

#define GROUP_EPS 1e-15f

/* Round to nearest, ties to even (|v| < 2^22; see quantize_k.c). */
static inline int nearest_int(float v) {
  float shifted = v + 12582912.0f;
  int32_t bits;
  memcpy(&bits, &shifted, sizeof bits);
  return (bits & 0x007FFFFF) - 0x00400000;
}

/* The index of the level of values[16] (ascending) nearest to x; the upper
 * one on ties, as a bisection finds it. NaN goes to the top level. */
static int nearest_level(const int8_t values[16], float x) {
  if (x <= values[0]) return 0;
  if (!(x < values[15])) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (x < values[mid])
      hi = mid;
    else
      lo = mid;
  }
  return x - values[hi - 1] < values[hi] - x ? hi - 1 : hi;
}

/* The scale of one block of 32 (x, weights w), its levels in L; 0 (L
 * untouched) when the block is all but zero. */
static float iq4_block_scale(const float *x, const float *w, uint8_t *L) {
  const int8_t *v = pa_kvalues_iq4nl;
  const int ntry = 7;
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 32; j++) {
    if (fabsf(x[j]) > amax) {
      amax = fabsf(x[j]);
      max = x[j];
    }
  }
  if (amax < GROUP_EPS) return 0.0f;
  float d = -max / (float)v[0];
  float id = 1.0f / d, sumqx = 0.0f, sumq2 = 0.0f;
  for (int j = 0; j < 32; j++) {
    const int l = nearest_level(v, id * x[j]);
    L[j] = (uint8_t)l;
    const float q = (float)v[l];
    sumqx += w[j] * q * x[j];
    sumq2 += w[j] * q * q;
  }
  d = sumqx / sumq2;
  float best = d * sumqx;
  for (int t = -ntry; t <= ntry; t++) {
    id = (float)(t + v[0]) / max;
    sumqx = sumq2 = 0.0f;
    for (int j = 0; j < 32; j++) {
      const float q = (float)v[nearest_level(v, id * x[j])];
      sumqx += w[j] * q * x[j];
      sumq2 += w[j] * q * q;
    }
    if (sumq2 > 0.0f && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

/* Packs 32 levels: element l (l < 16) low nibble of qs[l], l + 16 high. */
static void pack_nibbles(const uint8_t *L, uint8_t qs[16]) {
  for (int l = 0; l < 16; l++) qs[l] = (uint8_t)(L[l] | L[l + 16] << 4);
}

void pa_quantize_iq4_nl(const float *src, void *dst, int64_t n) {
  block_iq4_nl *y = dst;
  for (int64_t b = 0; b < n / QK4_NL; b++, src += QK4_NL) {
    float w[QK4_NL];
    uint8_t L[QK4_NL];
    for (int j = 0; j < QK4_NL; j++) w[j] = src[j] * src[j];
    const float d = iq4_block_scale(src, w, L);
    pa_store_f16(&y[b].d, d);
    /* the levels again, for the scale as found (not as fp16 rounds it) */
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < QK4_NL; j++) L[j] = (uint8_t)nearest_level(pa_kvalues_iq4nl, id * src[j]);
    pack_nibbles(L, y[b].qs);
  }
}

void pa_quantize_iq4_xs(const float *src, void *dst, int64_t n) {
  block_iq4_xs *y = dst;
  for (int64_t b = 0; b < n / QK_K; b++, src += QK_K) {
    float scales[QK_K / 32], max_scale = 0.0f, amax_scale = 0.0f;
    uint8_t L[QK_K];
    for (int ib = 0; ib < QK_K / 32; ib++) {
      const float *xb = src + 32 * ib;
      float w[32];
      for (int j = 0; j < 32; j++) w[j] = xb[j] * xb[j];
      scales[ib] = iq4_block_scale(xb, w, L + 32 * ib);
      if (fabsf(scales[ib]) > amax_scale) {
        amax_scale = fabsf(scales[ib]);
        max_scale = scales[ib];
      }
    }
    /* 6-bit signed sub-block scales; the largest maps to -32. */
    const float d = -max_scale / 32.0f;
    pa_store_f16(&y[b].d, d);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    uint16_t scales_h = 0;
    memset(y[b].scales_l, 0, sizeof y[b].scales_l);
    for (int ib = 0; ib < QK_K / 32; ib++) {
      int l = nearest_int(id * scales[ib]);
      l = l < -32 ? -32 : l > 31 ? 31 : l;
      const float dl = d * (float)l;
      const float idl = dl != 0.0f ? 1.0f / dl : 0.0f;
      for (int j = 0; j < 32; j++)
        L[32 * ib + j] = (uint8_t)nearest_level(pa_kvalues_iq4nl, idl * src[32 * ib + j]);
      l += 32;
      y[b].scales_l[ib / 2] |= (uint8_t)((l & 0xF) << (4 * (ib % 2)));
      scales_h |= (uint16_t)((l >> 4) << (2 * ib));
    }
    memcpy(&y[b].scales_h, &scales_h, sizeof scales_h);
    for (int ib = 0; ib < QK_K / 32; ib++) pack_nibbles(L + 32 * ib, y[b].qs + 16 * ib);
  }
}

/* The index of the E2M1 level nearest to x at scale d: the first of the
 * smallest |kvalue * d - x| (so +0 before -0). */
static int nearest_mxfp4(float x, float d) {
  int best = 0;
  float best_err = fabsf((float)pa_kvalues_mxfp4[0] * d - x);
  for (int i = 1; i < 16; i++) {
    const float err = fabsf((float)pa_kvalues_mxfp4[i] * d - x);
    if (err < best_err) {
      best = i;
      best_err = err;
    }
  }
  return best;
}

void pa_quantize_mxfp4(const float *src, void *dst, int64_t n) {
  block_mxfp4 *y = dst;
  for (int64_t b = 0; b < n / QK_MXFP4; b++, src += QK_MXFP4) {
    float amax = 0.0f;
    for (int j = 0; j < QK_MXFP4; j++)
      if (amax < fabsf(src[j])) amax = fabsf(src[j]);
    /* floor(log2(amax)) - 2 + 127, the exponent of amax / 4; below 2^-125
     * it is negative and wraps as the int-to-byte conversion does on the
     * reference (x86-64) build. */
    const uint8_t e = amax > 0.0f ? (uint8_t)(int)(floorf(log2f(amax)) - 2.0f + 127.0f) : 0;
    const float d = pa_e8m0_to_f32_half(e);
    y[b].e = e;
    for (int l = 0; l < QK_MXFP4 / 2; l++)
      y[b].qs[l] =
          (uint8_t)(nearest_mxfp4(src[l], d) | nearest_mxfp4(src[l + QK_MXFP4 / 2], d) << 4);
  }
}
