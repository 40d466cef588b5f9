/* quantize_k.c: reference quantizers of the K-quant super-blocks (256
 * elements): Q2_K, Q3_K, Q4_K, Q5_K, Q6_K.
 *
 * Each works in two levels. First every sub-block (16 or 32 elements) gets
 * its own float scale (and min) from a small search that minimises a
 * weighted error; then those are themselves quantized against one fp16
 * super-block scale, and the elements are re-quantized with the scales as
 * they will be decoded. The searches follow llama.cpp's reference
 * quantizers step by step, in the same float32 arithmetic, so the bytes are
 * the same as those of the files llama.cpp writes without an importance
 * matrix. */
#include <math.h>
#include <string.h>

#include "quant/quant.h"

PA_NO_FP_CONTRACT

/* Below this a sub-block is treated as all zeros. */
#define GROUP_EPS 1e-15f

/* Round to nearest, ties to even. Adding 1.5 * 2^23 leaves the rounded
 * integer in the low mantissa bits; exact for |v| < 2^22. Beyond that (only
 * when the data overflow fp16 scales: inf, NaN) the result is meaningless
 * but defined, and the same as llama.cpp's, so even such blocks match. */
static inline int nearest_int(float v) {
  float shifted = v + 12582912.0f;
  int32_t bits;
  memcpy(&bits, &shifted, sizeof bits);
  return (bits & 0x007FFFFF) - 0x00400000;
}

static inline int clamp_int(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Asymmetric fit of n values: x ~= scale * L + min with L in [0, nmax] and
 * min <= 0, weighted by w. Starts from the plain min/max grid, then for
 * nstep+1 grid densities (nmax + rmin + rdelta * k levels across the range)
 * rounds, solves the weighted least-squares scale and min for those levels,
 * and keeps the best by weighted squared (or absolute) error.
 * Returns the scale; *neg_min receives -min (>= 0). `aux` is scratch of n. */
static float fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L,
                           uint8_t *aux, float *neg_min, float rmin, float rdelta, int nstep,
                           bool abs_error) {
  float min = x[0], max = x[0];
  float sum_w = w[0], sum_x = w[0] * x[0];
  for (int i = 1; i < n; i++) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0.0f) min = 0.0f;
  if (max == min) {
    memset(L, 0, (size_t)n);
    *neg_min = -min;
    return 0.0f;
  }
  float iscale = (float)nmax / (max - min);
  float scale = 1.0f / iscale;
  float best_error = 0.0f;
  for (int i = 0; i < n; i++) {
    L[i] = (uint8_t)clamp_int(nearest_int(iscale * (x[i] - min)), 0, nmax);
    float diff = scale * (float)L[i] + min - x[i];
    best_error += w[i] * (abs_error ? fabsf(diff) : diff * diff);
  }
  for (int step = 0; step <= nstep; step++) {
    iscale = (rmin + rdelta * (float)step + (float)nmax) / (max - min);
    float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
    for (int i = 0; i < n; i++) {
      int l = clamp_int(nearest_int(iscale * (x[i] - min)), 0, nmax);
      aux[i] = (uint8_t)l;
      sum_l += w[i] * (float)l;
      sum_l2 += w[i] * (float)l * (float)l;
      sum_xl += w[i] * (float)l * x[i];
    }
    /* Normal equations of min_{s,m} sum w (s*l + m - x)^2. */
    float det = sum_w * sum_l2 - sum_l * sum_l;
    if (!(det > 0.0f)) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (this_min > 0.0f) { /* the min must stay <= 0: refit the scale alone */
      this_min = 0.0f;
      this_scale = sum_xl / sum_l2;
    }
    float error = 0.0f;
    for (int i = 0; i < n; i++) {
      float diff = this_scale * (float)aux[i] + this_min - x[i];
      error += w[i] * (abs_error ? fabsf(diff) : diff * diff);
    }
    if (error < best_error) {
      memcpy(L, aux, (size_t)n);
      best_error = error;
      scale = this_scale;
      min = this_min;
    }
  }
  *neg_min = -min;
  return scale;
}

/* The element of largest magnitude, signed (first on ties); *amax gets |it|. */
static float signed_absmax(const float *x, int n, float *amax) {
  float best = 0.0f, max = 0.0f;
  for (int i = 0; i < n; i++) {
    if (fabsf(x[i]) > best) {
      best = fabsf(x[i]);
      max = x[i];
    }
  }
  *amax = best;
  return max;
}

/* Symmetric fit with x^2 weights: levels L - nmax in [-nmax, nmax - 1],
 * the largest magnitude mapped to -nmax. Tries 18 grid densities around it
 * and keeps the one whose least-squares scale explains most of the
 * weighted energy (max sumlx^2 / suml2). Returns the scale; L gets the
 * biased levels (0 .. 2*nmax - 1). */
static float fit_scale_symmetric(int n, int nmax, const float *x, uint8_t *L) {
  float amax;
  const float max = signed_absmax(x, n, &amax);
  if (amax < GROUP_EPS) {
    memset(L, 0, (size_t)n);
    return 0.0f;
  }
  float iscale = (float)-nmax / max;
  float sumlx = 0.0f, suml2 = 0.0f;
  for (int i = 0; i < n; i++) {
    int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = (uint8_t)(l + nmax);
    float w = x[i] * x[i];
    sumlx += w * x[i] * (float)l;
    suml2 += w * (float)l * (float)l;
  }
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int step = -9; step <= 9; step++) {
    if (step == 0) continue;
    iscale = -((float)nmax + 0.1f * (float)step) / max;
    sumlx = suml2 = 0.0f;
    for (int i = 0; i < n; i++) {
      int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
      float w = x[i] * x[i];
      sumlx += w * x[i] * (float)l;
      suml2 += w * (float)l * (float)l;
    }
    if (suml2 > 0.0f && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; i++)
        L[i] = (uint8_t)(nmax + clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1));
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

/* Symmetric fit for 3-bit levels ([-nmax, nmax - 1]) with x^2 weights,
 * improved by coordinate descent: each level in turn moves to the value
 * that is best for the current least-squares scale, while that raises the
 * explained energy; at most 5 sweeps. L gets biased levels. */
static float fit_scale_q3(int n, int nmax, const float *x, int8_t *L) {
  float amax;
  const float max = signed_absmax(x, n, &amax);
  if (amax < GROUP_EPS) {
    memset(L, 0, (size_t)n);
    return 0.0f;
  }
  const float iscale = (float)-nmax / max;
  float sumlx = 0.0f, suml2 = 0.0f;
  for (int i = 0; i < n; i++) {
    int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = (int8_t)l;
    float w = x[i] * x[i];
    sumlx += w * x[i] * (float)l;
    suml2 += w * (float)l * (float)l;
  }
  for (int sweep = 0; sweep < 5; sweep++) {
    int changed = 0;
    for (int i = 0; i < n; i++) {
      float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * (float)L[i];
      if (!(slx > 0.0f)) continue;
      float sl2 = suml2 - w * (float)L[i] * (float)L[i];
      int l = clamp_int(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
      if (l == L[i]) continue;
      slx += w * x[i] * (float)l;
      sl2 += w * (float)l * (float)l;
      if (sl2 > 0.0f && slx * slx * suml2 > sumlx * sumlx * sl2) {
        L[i] = (int8_t)l;
        sumlx = slx;
        suml2 = sl2;
        changed++;
      }
    }
    if (changed == 0) break;
  }
  for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* Packs 2-bit levels: element 128h + 32k + l goes to bits 2k of qs[32h + l]. */
static void pack_2bit(const uint8_t *L, uint8_t qs[QK_K / 4]) {
  for (int h = 0; h < QK_K / 128; h++)
    for (int l = 0; l < 32; l++) {
      const uint8_t *p = L + 128 * h + l;
      qs[32 * h + l] = (uint8_t)(p[0] | p[32] << 2 | p[64] << 4 | p[96] << 6);
    }
}

void pa_quantize_q2_K(const float *src, void *dst, int64_t n) {
  block_q2_K *y = dst;
  uint8_t L[QK_K], aux[16];
  float weights[16], scales[QK_K / 16], mins[QK_K / 16];
  for (int64_t b = 0; b < n / QK_K; b++, src += QK_K) {
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < QK_K / 16; j++) {
      const float *x = src + 16 * j;
      for (int l = 0; l < 16; l++) weights[l] = fabsf(x[l]);
      scales[j] =
          fit_scale_min(16, 3, x, weights, L + 16 * j, aux, &mins[j], -0.5f, 0.1f, 15, true);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    /* 4-bit sub-block scales and mins against fp16 super-block ones. */
    memset(y[b].scales, 0, sizeof y[b].scales);
    pa_store_f16(&y[b].d, max_scale > 0.0f ? max_scale / 15.0f : 0.0f);
    pa_store_f16(&y[b].dmin, max_min > 0.0f ? max_min / 15.0f : 0.0f);
    if (max_scale > 0.0f) {
      const float iscale = 15.0f / max_scale;
      for (int j = 0; j < QK_K / 16; j++)
        y[b].scales[j] = (uint8_t)clamp_int(nearest_int(iscale * scales[j]), 0, 15);
    }
    if (max_min > 0.0f) {
      const float imin = 15.0f / max_min;
      for (int j = 0; j < QK_K / 16; j++)
        y[b].scales[j] |= (uint8_t)(clamp_int(nearest_int(imin * mins[j]), 0, 15) << 4);
    }
    const float d = pa_load_f16(&y[b].d), dmin = pa_load_f16(&y[b].dmin);
    for (int j = 0; j < QK_K / 16; j++) {
      const float dl = d * (float)(y[b].scales[j] & 0xF);
      if (dl == 0.0f) continue;
      const float ml = dmin * (float)(y[b].scales[j] >> 4);
      for (int l = 0; l < 16; l++)
        L[16 * j + l] = (uint8_t)clamp_int(nearest_int((src[16 * j + l] + ml) / dl), 0, 3);
    }
    pack_2bit(L, y[b].qs);
  }
}

/* Sub-block j's 6-bit Q3_K scale field, biased by 32 (see pa_q3_K_scale in
 * quant.h for the layout). */
static void put_q3_K_scale(uint8_t s[12], int j, int v) {
  s[j % 8] |= (uint8_t)((v & 0xF) << (4 * (j / 8)));
  s[8 + j % 4] |= (uint8_t)((v >> 4) << (2 * (j / 4)));
}

static int get_q3_K_scale(const uint8_t s[12], int j) {
  return ((s[j % 8] >> (4 * (j / 8))) & 0xF) | ((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4;
}

void pa_quantize_q3_K(const float *src, void *dst, int64_t n) {
  block_q3_K *y = dst;
  int8_t L[QK_K];
  float scales[QK_K / 16];
  for (int64_t b = 0; b < n / QK_K; b++, src += QK_K) {
    float max_scale = 0.0f, amax = 0.0f;
    for (int j = 0; j < QK_K / 16; j++) {
      scales[j] = fit_scale_q3(16, 4, src + 16 * j, L + 16 * j);
      if (fabsf(scales[j]) > amax) {
        amax = fabsf(scales[j]);
        max_scale = scales[j];
      }
    }
    memset(y[b].scales, 0, sizeof y[b].scales);
    if (max_scale != 0.0f) {
      const float iscale = -32.0f / max_scale;
      for (int j = 0; j < QK_K / 16; j++)
        put_q3_K_scale(y[b].scales, j, clamp_int(nearest_int(iscale * scales[j]), -32, 31) + 32);
      pa_store_f16(&y[b].d, 1.0f / iscale);
    } else {
      pa_store_f16(&y[b].d, 0.0f);
    }
    const float d = pa_load_f16(&y[b].d);
    for (int j = 0; j < QK_K / 16; j++) {
      const float dl = d * (float)(get_q3_K_scale(y[b].scales, j) - 32);
      if (dl == 0.0f) continue;
      for (int l = 0; l < 16; l++)
        L[16 * j + l] = (int8_t)(clamp_int(nearest_int(src[16 * j + l] / dl), -4, 3) + 4);
    }
    /* Third bit of element e into bit e/32 of hmask[e % 32]; two low bits
     * packed as in Q2_K. */
    uint8_t low[QK_K];
    memset(y[b].hmask, 0, sizeof y[b].hmask);
    for (int e = 0; e < QK_K; e++) {
      int v = L[e];
      if (v > 3) {
        y[b].hmask[e % 32] |= (uint8_t)(1u << (e / 32));
        v -= 4;
      }
      low[e] = (uint8_t)v;
    }
    pack_2bit(low, y[b].qs);
  }
}

/* Packs the 6-bit scale and min of sub-block j (the inverse of
 * pa_get_scale_min_k4). `s` must start zeroed. */
static void put_scale_min_k4(uint8_t s[K_SCALE_SIZE], int j, int sc, int m) {
  if (j < 4) {
    s[j] |= (uint8_t)sc;
    s[j + 4] |= (uint8_t)m;
  } else {
    s[j + 4] = (uint8_t)((sc & 0xF) | (m & 0xF) << 4);
    s[j - 4] |= (uint8_t)((sc >> 4) << 6);
    s[j] |= (uint8_t)((m >> 4) << 6);
  }
}

/* The shared part of Q4_K and Q5_K: per 32 elements an asymmetric fit
 * weighted by (rms of the sub-block + |x|), then 6-bit scales and mins
 * against fp16 d and dmin, then re-quantization to levels 0..nmax in L. */
static void quantize_k4_levels(const float *x, int nmax, float rmin, int nstep,
                               pa_f16 *d_out, pa_f16 *dmin_out, uint8_t scales_out[K_SCALE_SIZE],
                               uint8_t L[QK_K]) {
  uint8_t aux[32];
  float weights[32], scales[QK_K / 32], mins[QK_K / 32];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < QK_K / 32; j++) {
    const float *xs = x + 32 * j;
    float sum_x2 = 0.0f;
    for (int l = 0; l < 32; l++) sum_x2 += xs[l] * xs[l];
    const float rms = sqrtf(sum_x2 / 32.0f);
    for (int l = 0; l < 32; l++) weights[l] = rms + fabsf(xs[l]);
    scales[j] = fit_scale_min(32, nmax, xs, weights, L + 32 * j, aux, &mins[j], rmin, 0.1f, nstep,
                              false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
  memset(scales_out, 0, K_SCALE_SIZE);
  for (int j = 0; j < QK_K / 32; j++) {
    int ls = clamp_int(nearest_int(inv_scale * scales[j]), 0, 63);
    int lm = clamp_int(nearest_int(inv_min * mins[j]), 0, 63);
    put_scale_min_k4(scales_out, j, ls, lm);
  }
  pa_store_f16(d_out, max_scale / 63.0f);
  pa_store_f16(dmin_out, max_min / 63.0f);
  const float d = pa_load_f16(d_out), dmin = pa_load_f16(dmin_out);
  for (int j = 0; j < QK_K / 32; j++) {
    uint8_t sc, m;
    pa_get_scale_min_k4(j, scales_out, &sc, &m);
    const float dl = d * (float)sc;
    if (dl == 0.0f) continue;
    const float ml = dmin * (float)m;
    for (int l = 0; l < 32; l++)
      L[32 * j + l] = (uint8_t)clamp_int(nearest_int((x[32 * j + l] + ml) / dl), 0, nmax);
  }
}

void pa_quantize_q4_K(const float *src, void *dst, int64_t n) {
  block_q4_K *y = dst;
  uint8_t L[QK_K];
  for (int64_t b = 0; b < n / QK_K; b++, src += QK_K) {
    quantize_k4_levels(src, 15, -1.0f, 20, &y[b].d, &y[b].dmin, y[b].scales, L);
    /* Sub-blocks 2c and 2c+1 share qs[32c ..]: low and high nibbles. */
    for (int c = 0; c < QK_K / 64; c++)
      for (int l = 0; l < 32; l++)
        y[b].qs[32 * c + l] = (uint8_t)(L[64 * c + l] | L[64 * c + 32 + l] << 4);
  }
}

void pa_quantize_q5_K(const float *src, void *dst, int64_t n) {
  block_q5_K *y = dst;
  uint8_t L[QK_K];
  for (int64_t b = 0; b < n / QK_K; b++, src += QK_K) {
    quantize_k4_levels(src, 31, -0.5f, 15, &y[b].d, &y[b].dmin, y[b].scales, L);
    /* Low nibbles as in Q4_K; the fifth bit of sub-block j in bit j of qh. */
    memset(y[b].qh, 0, sizeof y[b].qh);
    for (int c = 0; c < QK_K / 64; c++)
      for (int l = 0; l < 32; l++) {
        int lo = L[64 * c + l], hi = L[64 * c + 32 + l];
        y[b].qs[32 * c + l] = (uint8_t)((lo & 0xF) | (hi & 0xF) << 4);
        y[b].qh[l] |= (uint8_t)((lo >> 4) << (2 * c) | (hi >> 4) << (2 * c + 1));
      }
  }
}

void pa_quantize_q6_K(const float *src, void *dst, int64_t n) {
  block_q6_K *y = dst;
  uint8_t L[QK_K];
  float scales[QK_K / 16];
  for (int64_t b = 0; b < n / QK_K; b++, src += QK_K) {
    float max_scale = 0.0f, amax = 0.0f;
    for (int j = 0; j < QK_K / 16; j++) {
      scales[j] = fit_scale_symmetric(16, 32, src + 16 * j, L + 16 * j);
      if (fabsf(scales[j]) > amax) {
        amax = fabsf(scales[j]);
        max_scale = scales[j];
      }
    }
    if (amax < GROUP_EPS) {
      memset(&y[b], 0, sizeof y[b]);
      continue;
    }
    /* 8-bit signed scales; the largest maps to -128. */
    const float iscale = -128.0f / max_scale;
    pa_store_f16(&y[b].d, 1.0f / iscale);
    for (int j = 0; j < QK_K / 16; j++)
      y[b].scales[j] = (int8_t)clamp_int(nearest_int(iscale * scales[j]), -128, 127);
    const float d = pa_load_f16(&y[b].d);
    for (int j = 0; j < QK_K / 16; j++) {
      const float dl = d * (float)y[b].scales[j];
      if (dl == 0.0f) continue;
      for (int l = 0; l < 16; l++)
        L[16 * j + l] = (uint8_t)(clamp_int(nearest_int(src[16 * j + l] / dl), -32, 31) + 32);
    }
    /* Per half h: low nibbles of elements r and r+64 share ql[64h + r]
     * (r < 64); the two high bits of quarter k go to bits 2k of qh[32h + l]. */
    for (int h = 0; h < QK_K / 128; h++) {
      const uint8_t *p = L + 128 * h;
      for (int r = 0; r < 64; r++)
        y[b].ql[64 * h + r] = (uint8_t)((p[r] & 0xF) | (p[r + 64] & 0xF) << 4);
      for (int l = 0; l < 32; l++)
        y[b].qh[32 * h + l] = (uint8_t)(p[l] >> 4 | (p[l + 32] >> 4) << 2 |
                                        (p[l + 64] >> 4) << 4 | (p[l + 96] >> 4) << 6);
    }
  }
}
