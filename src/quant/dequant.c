/* dequant.c: the reference dequantization of every quantized GGUF type,
 * block by block. The arithmetic order (scale products first, then one
 * multiply and one subtract per element, all in float32) is part of the
 * specification: results are bit-exact with the `gguf` Python package and
 * with llama.cpp, so no fused multiply-add may be formed here. */
#include <string.h>

#include "quant/quant.h"

PA_NO_FP_CONTRACT

void pa_dequantize_q4_0(const void *src, float *dst, int64_t n) {
  const block_q4_0 *x = src;
  for (int64_t b = 0; b < n / QK4_0; b++, dst += QK4_0) {
    const float d = pa_load_f16(&x[b].d);
    for (int l = 0; l < QK4_0 / 2; l++) {
      dst[l] = d * (float)((x[b].qs[l] & 0xF) - 8);
      dst[l + QK4_0 / 2] = d * (float)((x[b].qs[l] >> 4) - 8);
    }
  }
}

void pa_dequantize_q4_1(const void *src, float *dst, int64_t n) {
  const block_q4_1 *x = src;
  for (int64_t b = 0; b < n / QK4_1; b++, dst += QK4_1) {
    const float d = pa_load_f16(&x[b].d), m = pa_load_f16(&x[b].m);
    for (int l = 0; l < QK4_1 / 2; l++) {
      dst[l] = d * (float)(x[b].qs[l] & 0xF) + m;
      dst[l + QK4_1 / 2] = d * (float)(x[b].qs[l] >> 4) + m;
    }
  }
}

/* Bit l of the four qh bytes, read as one little-endian 32-bit word. */
static inline uint32_t load_qh(const uint8_t qh[4]) {
  return (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
}

void pa_dequantize_q5_0(const void *src, float *dst, int64_t n) {
  const block_q5_0 *x = src;
  for (int64_t b = 0; b < n / QK5_0; b++, dst += QK5_0) {
    const float d = pa_load_f16(&x[b].d);
    const uint32_t qh = load_qh(x[b].qh);
    for (int l = 0; l < QK5_0 / 2; l++) {
      int lo = (x[b].qs[l] & 0xF) | (int)((qh >> l) & 1) << 4;
      int hi = (x[b].qs[l] >> 4) | (int)((qh >> (l + 16)) & 1) << 4;
      dst[l] = d * (float)(lo - 16);
      dst[l + QK5_0 / 2] = d * (float)(hi - 16);
    }
  }
}

void pa_dequantize_q5_1(const void *src, float *dst, int64_t n) {
  const block_q5_1 *x = src;
  for (int64_t b = 0; b < n / QK5_1; b++, dst += QK5_1) {
    const float d = pa_load_f16(&x[b].d), m = pa_load_f16(&x[b].m);
    const uint32_t qh = load_qh(x[b].qh);
    for (int l = 0; l < QK5_1 / 2; l++) {
      int lo = (x[b].qs[l] & 0xF) | (int)((qh >> l) & 1) << 4;
      int hi = (x[b].qs[l] >> 4) | (int)((qh >> (l + 16)) & 1) << 4;
      dst[l] = d * (float)lo + m;
      dst[l + QK5_1 / 2] = d * (float)hi + m;
    }
  }
}

void pa_dequantize_q8_0(const void *src, float *dst, int64_t n) {
  const block_q8_0 *x = src;
  for (int64_t b = 0; b < n / QK8_0; b++, dst += QK8_0) {
    const float d = pa_load_f16(&x[b].d);
    for (int l = 0; l < QK8_0; l++) dst[l] = (float)x[b].qs[l] * d;
  }
}

void pa_dequantize_q8_1(const void *src, float *dst, int64_t n) {
  const block_q8_1 *x = src;
  for (int64_t b = 0; b < n / QK8_1; b++, dst += QK8_1) {
    const float d = pa_load_f16(&x[b].d);
    for (int l = 0; l < QK8_1; l++) dst[l] = (float)x[b].qs[l] * d;
  }
}

/* Q2_K: 16 groups of 16 with a 4-bit scale and a 4-bit min each. The 2-bit
 * values of 128 elements share 32 bytes: group of 32 elements k takes bits
 * 2k..2k+1 of each byte. */
void pa_dequantize_q2_K(const void *src, float *dst, int64_t n) {
  const block_q2_K *x = src;
  for (int64_t b = 0; b < n / QK_K; b++, dst += QK_K) {
    const float d = pa_load_f16(&x[b].d), dmin = pa_load_f16(&x[b].dmin);
    for (int e = 0; e < QK_K; e++) {
      const int half = e / 128, shift = 2 * ((e % 128) / 32), l = e % 32;
      const uint8_t sc = x[b].scales[e / 16];
      const float dl = d * (float)(sc & 0xF), ml = dmin * (float)(sc >> 4);
      const int q = (x[b].qs[half * 32 + l] >> shift) & 3;
      dst[e] = dl * (float)q - ml;
    }
  }
}

/* Q3_K: signed 3-bit values, 2 low bits in qs (as Q2_K) and the third in
 * hmask; a clear hmask bit means "minus 4". */
void pa_dequantize_q3_K(const void *src, float *dst, int64_t n) {
  const block_q3_K *x = src;
  for (int64_t b = 0; b < n / QK_K; b++, dst += QK_K) {
    const float d = pa_load_f16(&x[b].d);
    for (int e = 0; e < QK_K; e++) {
      const int half = e / 128, k = (e % 128) / 32, l = e % 32;
      const float dl = d * (float)pa_q3_K_scale(x[b].scales, e / 16);
      const int low = (x[b].qs[half * 32 + l] >> (2 * k)) & 3;
      const int high = (x[b].hmask[l] >> (half * 4 + k)) & 1;
      dst[e] = dl * (float)(low - (high ? 0 : 4));
    }
  }
}

/* Q4_K: 8 sub-blocks of 32 with 6-bit scales and mins; sub-blocks 2c and
 * 2c+1 share bytes qs[32c .. 32c+31] (low and high nibbles). */
void pa_dequantize_q4_K(const void *src, float *dst, int64_t n) {
  const block_q4_K *x = src;
  for (int64_t b = 0; b < n / QK_K; b++, dst += QK_K) {
    const float d = pa_load_f16(&x[b].d), dmin = pa_load_f16(&x[b].dmin);
    for (int j = 0; j < QK_K / 32; j++) {
      uint8_t sc, m;
      pa_get_scale_min_k4(j, x[b].scales, &sc, &m);
      const float dl = d * (float)sc, ml = dmin * (float)m;
      const uint8_t *q = x[b].qs + 32 * (j / 2);
      const int shift = 4 * (j % 2);
      for (int l = 0; l < 32; l++) dst[32 * j + l] = dl * (float)((q[l] >> shift) & 0xF) - ml;
    }
  }
}

/* Q5_K: Q4_K plus a fifth bit: bit j of qh[l] for element 32j + l. */
void pa_dequantize_q5_K(const void *src, float *dst, int64_t n) {
  const block_q5_K *x = src;
  for (int64_t b = 0; b < n / QK_K; b++, dst += QK_K) {
    const float d = pa_load_f16(&x[b].d), dmin = pa_load_f16(&x[b].dmin);
    for (int j = 0; j < QK_K / 32; j++) {
      uint8_t sc, m;
      pa_get_scale_min_k4(j, x[b].scales, &sc, &m);
      const float dl = d * (float)sc, ml = dmin * (float)m;
      const uint8_t *q = x[b].qs + 32 * (j / 2);
      const int shift = 4 * (j % 2);
      for (int l = 0; l < 32; l++) {
        int v = ((q[l] >> shift) & 0xF) | ((x[b].qh[l] >> j) & 1) << 4;
        dst[32 * j + l] = dl * (float)v - ml;
      }
    }
  }
}

/* Q6_K: signed 6-bit values with an 8-bit scale per 16. Per half of 128:
 * low nibbles from ql[64h .. 64h+63] (elements 0..63 low nibble, 64..127
 * high nibble), two high bits from qh[32h + l] at bits 2k (k = quarter). */
void pa_dequantize_q6_K(const void *src, float *dst, int64_t n) {
  const block_q6_K *x = src;
  for (int64_t b = 0; b < n / QK_K; b++, dst += QK_K) {
    const float d = pa_load_f16(&x[b].d);
    for (int e = 0; e < QK_K; e++) {
      const int h = e / 128, r = e % 128;
      const int low = (x[b].ql[64 * h + r % 64] >> (4 * (r / 64))) & 0xF;
      const int high = (x[b].qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
      const float dl = d * (float)x[b].scales[e / 16];
      dst[e] = dl * (float)((low | high << 4) - 32);
    }
  }
}

void pa_dequantize_q8_K(const void *src, float *dst, int64_t n) {
  const block_q8_K *x = src;
  for (int64_t b = 0; b < n / QK_K; b++, dst += QK_K) {
    float d;
    memcpy(&d, &x[b].d, sizeof d);
    for (int l = 0; l < QK_K; l++) dst[l] = d * (float)x[b].qs[l];
  }
}

const int8_t pa_kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                     1,    13,   25,  38,  53,  69,  89,  113};
const int8_t pa_kvalues_mxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

void pa_dequantize_iq4_nl(const void *src, float *dst, int64_t n) {
  const block_iq4_nl *x = src;
  for (int64_t b = 0; b < n / QK4_NL; b++, dst += QK4_NL) {
    const float d = pa_load_f16(&x[b].d);
    for (int l = 0; l < QK4_NL / 2; l++) {
      dst[l] = d * (float)pa_kvalues_iq4nl[x[b].qs[l] & 0xF];
      dst[l + QK4_NL / 2] = d * (float)pa_kvalues_iq4nl[x[b].qs[l] >> 4];
    }
  }
}

/* IQ4_XS: sub-block ib's scale dl = d * (6-bit scale - 32), then one
 * multiply per element, as gguf and ggml. */
void pa_dequantize_iq4_xs(const void *src, float *dst, int64_t n) {
  const block_iq4_xs *x = src;
  for (int64_t b = 0; b < n / QK_K; b++) {
    const float d = pa_load_f16(&x[b].d);
    for (int ib = 0; ib < QK_K / 32; ib++, dst += 32) {
      const float dl = d * (float)(pa_iq4_xs_scale(&x[b], ib) - 32);
      const uint8_t *q = x[b].qs + 16 * ib;
      for (int l = 0; l < 16; l++) {
        dst[l] = dl * (float)pa_kvalues_iq4nl[q[l] & 0xF];
        dst[l + 16] = dl * (float)pa_kvalues_iq4nl[q[l] >> 4];
      }
    }
  }
}

void pa_dequantize_mxfp4(const void *src, float *dst, int64_t n) {
  const block_mxfp4 *x = src;
  for (int64_t b = 0; b < n / QK_MXFP4; b++, dst += QK_MXFP4) {
    const float d = pa_e8m0_to_f32_half(x[b].e);
    for (int l = 0; l < QK_MXFP4 / 2; l++) {
      dst[l] = d * (float)pa_kvalues_mxfp4[x[b].qs[l] & 0xF];
      dst[l + QK_MXFP4 / 2] = d * (float)pa_kvalues_mxfp4[x[b].qs[l] >> 4];
    }
  }
}
