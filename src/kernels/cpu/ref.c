/* ref.c: the plain C kernel table, the specification every SIMD table is
 * tested against: one fused dequantize-and-dot per weight type (GGML
 * semantics: integer sums inside a block, one float multiply per block,
 * the min terms of Q4_1/Q5_1 and of the K-quants taken from the
 * activation's precomputed sums), and the activation quantizers. */
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/x16.h"
#include "kernels/x4.h"
#include "quant/iq_grids.h"

/* The quantizers must round exactly like the SIMD versions (x * id, then
 * round to nearest even): a fused multiply-add here would change ties. */
PA_NO_FP_CONTRACT

static inline float f16_at(const void *p) {
  pa_f16 h;
  memcpy(&h, p, sizeof h);
  return pa_f16_to_f32(h);
}

static inline void f16_put(void *p, float f) {
  pa_f16 h = pa_f32_to_f16(f);
  memcpy(p, &h, sizeof h);
}

/* Rounds to nearest, ties to even, for |v| < 2^22: adding 1.5 * 2^23 leaves
 * no fraction bits, so the float add itself rounds (as cvtps2dq does). */
static inline int round_even(float v) {
  float t = v + 12582912.0f;
  return (int)(t - 12582912.0f);
}

/* ---- float weights: accumulated in double, the most exact answer ---- */

static void dot_f32(int64_t n, float *out, const void *w, const void *x) {
  const float *a = w, *b = x;
  double sum = 0.0;
  for (int64_t i = 0; i < n; i++) sum += (double)a[i] * b[i];
  *out = (float)sum;
}

static void dot_f16(int64_t n, float *out, const void *w, const void *x) {
  const uint8_t *a = w;
  const float *b = x;
  double sum = 0.0;
  for (int64_t i = 0; i < n; i++) sum += (double)f16_at(a + 2 * i) * b[i];
  *out = (float)sum;
}

static void dot_bf16(int64_t n, float *out, const void *w, const void *x) {
  const uint8_t *a = w;
  const float *b = x;
  double sum = 0.0;
  for (int64_t i = 0; i < n; i++) {
    pa_bf16 h;
    memcpy(&h, a + 2 * i, 2);
    sum += (double)pa_bf16_to_f32(h) * b[i];
  }
  *out = (float)sum;
}

/* ---- 32-element blocks: element l is the low nibble of qs[l], element
 * l + 16 the high nibble; the fifth bit of Q5 element l is bit l of qh ---- */

static inline uint32_t qh_word(const uint8_t qh[4]) {
  return (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
}

static void dot_q4_0(int64_t n, float *out, const void *w, const void *x) {
  const block_q4_0 *a = w;
  const block_q8_0 *b = x;
  double sum = 0.0;
  for (int64_t i = 0; i < n / QK4_0; i++) {
    int isum = 0;
    for (int l = 0; l < 16; l++) {
      isum += ((a[i].qs[l] & 0xF) - 8) * b[i].qs[l];
      isum += ((a[i].qs[l] >> 4) - 8) * b[i].qs[l + 16];
    }
    sum += f16_at(&a[i].d) * f16_at(&b[i].d) * (float)isum;
  }
  *out = (float)sum;
}

static void dot_q4_1(int64_t n, float *out, const void *w, const void *x) {
  const block_q4_1 *a = w;
  const block_q8_1 *b = x;
  double sum = 0.0;
  for (int64_t i = 0; i < n / QK4_1; i++) {
    int isum = 0;
    for (int l = 0; l < 16; l++) {
      isum += (a[i].qs[l] & 0xF) * b[i].qs[l];
      isum += (a[i].qs[l] >> 4) * b[i].qs[l + 16];
    }
    sum += f16_at(&a[i].d) * f16_at(&b[i].d) * (float)isum + f16_at(&a[i].m) * f16_at(&b[i].s);
  }
  *out = (float)sum;
}

static void dot_q5_0(int64_t n, float *out, const void *w, const void *x) {
  const block_q5_0 *a = w;
  const block_q8_0 *b = x;
  double sum = 0.0;
  for (int64_t i = 0; i < n / QK5_0; i++) {
    const uint32_t qh = qh_word(a[i].qh);
    int isum = 0;
    for (int l = 0; l < 16; l++) {
      int lo = (a[i].qs[l] & 0xF) | (int)((qh >> l) & 1) << 4;
      int hi = (a[i].qs[l] >> 4) | (int)((qh >> (l + 16)) & 1) << 4;
      isum += (lo - 16) * b[i].qs[l] + (hi - 16) * b[i].qs[l + 16];
    }
    sum += f16_at(&a[i].d) * f16_at(&b[i].d) * (float)isum;
  }
  *out = (float)sum;
}

static void dot_q5_1(int64_t n, float *out, const void *w, const void *x) {
  const block_q5_1 *a = w;
  const block_q8_1 *b = x;
  double sum = 0.0;
  for (int64_t i = 0; i < n / QK5_1; i++) {
    const uint32_t qh = qh_word(a[i].qh);
    int isum = 0;
    for (int l = 0; l < 16; l++) {
      int lo = (a[i].qs[l] & 0xF) | (int)((qh >> l) & 1) << 4;
      int hi = (a[i].qs[l] >> 4) | (int)((qh >> (l + 16)) & 1) << 4;
      isum += lo * b[i].qs[l] + hi * b[i].qs[l + 16];
    }
    sum += f16_at(&a[i].d) * f16_at(&b[i].d) * (float)isum + f16_at(&a[i].m) * f16_at(&b[i].s);
  }
  *out = (float)sum;
}

static void dot_q8_0(int64_t n, float *out, const void *w, const void *x) {
  const block_q8_0 *a = w;
  const block_q8_0 *b = x;
  double sum = 0.0;
  for (int64_t i = 0; i < n / QK8_0; i++) {
    int isum = 0;
    for (int l = 0; l < QK8_0; l++) isum += a[i].qs[l] * b[i].qs[l];
    sum += f16_at(&a[i].d) * f16_at(&b[i].d) * (float)isum;
  }
  *out = (float)sum;
}

/* ---- K-quants (256-element super-blocks) against Q8_K. Integer sums are
 * exact within a super-block; the min terms use the activation's bsums. ---- */

static void dot_q2_K(int64_t n, float *out, const void *w, const void *x) {
  const block_q2_K *a = w;
  const block_q8_K *b = x;
  double sum = 0.0;
  for (int64_t i = 0; i < n / QK_K; i++) {
    int isum = 0, msum = 0;
    for (int g = 0; g < 16; g++) {
      int gsum = 0;
      for (int e = 16 * g; e < 16 * g + 16; e++) {
        const int half = e / 128, shift = 2 * ((e % 128) / 32), l = e % 32;
        gsum += ((a[i].qs[32 * half + l] >> shift) & 3) * b[i].qs[e];
      }
      isum += (a[i].scales[g] & 0xF) * gsum;
      msum += (a[i].scales[g] >> 4) * b[i].bsums[g];
    }
    sum += b[i].d * (f16_at(&a[i].d) * (float)isum - f16_at(&a[i].dmin) * (float)msum);
  }
  *out = (float)sum;
}

static void dot_q3_K(int64_t n, float *out, const void *w, const void *x) {
  const block_q3_K *a = w;
  const block_q8_K *b = x;
  double sum = 0.0;
  for (int64_t i = 0; i < n / QK_K; i++) {
    int isum = 0;
    for (int g = 0; g < 16; g++) {
      int gsum = 0;
      for (int e = 16 * g; e < 16 * g + 16; e++) {
        const int half = e / 128, k = (e % 128) / 32, l = e % 32;
        const int low = (a[i].qs[32 * half + l] >> (2 * k)) & 3;
        const int high = (a[i].hmask[l] >> (4 * half + k)) & 1;
        gsum += (low - (high ? 0 : 4)) * b[i].qs[e];
      }
      isum += pa_q3_K_scale(a[i].scales, g) * gsum;
    }
    sum += b[i].d * f16_at(&a[i].d) * (float)isum;
  }
  *out = (float)sum;
}

/* Q4_K and Q5_K: 8 sub-blocks of 32; sub-blocks 2c and 2c+1 are the low
 * and high nibbles of qs[32c .. 32c+31]; Q5_K's fifth bit of element 32j+l
 * is bit j of qh[l]. `qh` is NULL for Q4_K. */
static double dot_k4_superblock(const uint8_t scales[12], const uint8_t *qs, const uint8_t *qh,
                                float d, float dmin, const block_q8_K *b) {
  int isum = 0, msum = 0;
  for (int j = 0; j < 8; j++) {
    uint8_t sc, m;
    pa_get_scale_min_k4(j, scales, &sc, &m);
    int jsum = 0;
    for (int l = 0; l < 32; l++) {
      int q = (qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0xF;
      if (qh) q |= ((qh[l] >> j) & 1) << 4;
      jsum += q * b->qs[32 * j + l];
    }
    isum += sc * jsum;
    msum += m * (b->bsums[2 * j] + b->bsums[2 * j + 1]);
  }
  return b->d * (d * (float)isum - dmin * (float)msum);
}

static void dot_q4_K(int64_t n, float *out, const void *w, const void *x) {
  const block_q4_K *a = w;
  const block_q8_K *b = x;
  double sum = 0.0;
  for (int64_t i = 0; i < n / QK_K; i++)
    sum +=
        dot_k4_superblock(a[i].scales, a[i].qs, NULL, f16_at(&a[i].d), f16_at(&a[i].dmin), &b[i]);
  *out = (float)sum;
}

static void dot_q5_K(int64_t n, float *out, const void *w, const void *x) {
  const block_q5_K *a = w;
  const block_q8_K *b = x;
  double sum = 0.0;
  for (int64_t i = 0; i < n / QK_K; i++)
    sum += dot_k4_superblock(a[i].scales, a[i].qs, a[i].qh, f16_at(&a[i].d), f16_at(&a[i].dmin),
                             &b[i]);
  *out = (float)sum;
}

/* Q6_K: per half h of 128, element r takes the low nibble of ql[64h + r%64]
 * (high nibble when r >= 64) and bits 2k..2k+1 (k = r/32) of qh[32h + r%32]. */
static void dot_q6_K(int64_t n, float *out, const void *w, const void *x) {
  const block_q6_K *a = w;
  const block_q8_K *b = x;
  double sum = 0.0;
  for (int64_t i = 0; i < n / QK_K; i++) {
    int isum = 0;
    for (int g = 0; g < 16; g++) {
      int gsum = 0;
      for (int e = 16 * g; e < 16 * g + 16; e++) {
        const int h = e / 128, r = e % 128;
        const int low = (a[i].ql[64 * h + r % 64] >> (4 * (r / 64))) & 0xF;
        const int high = (a[i].qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
        gsum += ((low | high << 4) - 32) * b[i].qs[e];
      }
      isum += a[i].scales[g] * gsum;
    }
    sum += b[i].d * f16_at(&a[i].d) * (float)isum;
  }
  *out = (float)sum;
}

/* ---- non-linear 4-bit types: each nibble indexes an int8 level table;
 * IQ4_NL and MXFP4 (32-element blocks) take Q8_0, IQ4_XS (256) Q8_K ---- */

static int dot_levels32(const uint8_t qs[16], const int8_t levels[16], const int8_t *y) {
  int isum = 0;
  for (int l = 0; l < 16; l++) isum += levels[qs[l] & 0xF] * y[l] + levels[qs[l] >> 4] * y[l + 16];
  return isum;
}

static void dot_iq4_nl(int64_t n, float *out, const void *w, const void *x) {
  const block_iq4_nl *a = w;
  const block_q8_0 *b = x;
  double sum = 0.0;
  for (int64_t i = 0; i < n / QK4_NL; i++)
    sum +=
        f16_at(&a[i].d) * f16_at(&b[i].d) * (float)dot_levels32(a[i].qs, pa_kvalues_iq4nl, b[i].qs);
  *out = (float)sum;
}

static void dot_mxfp4(int64_t n, float *out, const void *w, const void *x) {
  const block_mxfp4 *a = w;
  const block_q8_0 *b = x;
  double sum = 0.0;
  for (int64_t i = 0; i < n / QK_MXFP4; i++)
    sum += pa_e8m0_to_f32_half(a[i].e) * f16_at(&b[i].d) *
           (float)dot_levels32(a[i].qs, pa_kvalues_mxfp4, b[i].qs);
  *out = (float)sum;
}

static void dot_iq4_xs(int64_t n, float *out, const void *w, const void *x) {
  const block_iq4_xs *a = w;
  const block_q8_K *b = x;
  double sum = 0.0;
  for (int64_t i = 0; i < n / QK_K; i++) {
    int isum = 0;
    for (int ib = 0; ib < QK_K / 32; ib++)
      isum += (pa_iq4_xs_scale(&a[i], ib) - 32) *
              dot_levels32(a[i].qs + 16 * ib, pa_kvalues_iq4nl, b[i].qs + 32 * ib);
    sum += b[i].d * f16_at(&a[i].d) * (float)isum;
  }
  *out = (float)sum;
}

/* ---- grid I-quants (IQ2_XXS ... IQ1_M) against Q8_K: every value is an
 * odd multiple of its super-block's d over a power of two (IQ2: d (2s + 1)
 * g / 8; IQ3_XXS: d (2s + 1) g / 4; IQ3_S: d (2s + 1) g; IQ1: d (2s + 1)
 * (8g +- 1) / 8), so one exact int32 per super-block, sum of scale times
 * group sum, meets one float scale d * d_x times that power of two (the
 * SIMD kernels in iq_grid_avx2.c compute the same integers). ---- */

static inline int grid_at(uint64_t row, int i) {
  return (int)((row >> (8 * i)) & 0xFF);
}

/* sum over i < n of grid value i times y[i], negated where bit i of signs is set */
static int grid_sum(uint64_t row, int n, unsigned signs, const int8_t *y) {
  int s = 0;
  for (int i = 0; i < n; i++) s += ((signs >> i) & 1 ? -1 : 1) * grid_at(row, i) * y[i];
  return s;
}

static void dot_iq2_xxs(int64_t n, float *out, const void *w, const void *x) {
  const block_iq2_xxs *a = w;
  const block_q8_K *b = x;
  double sum = 0.0;
  for (int64_t i = 0; i < n / QK_K; i++) {
    int isum = 0;
    for (int ib = 0; ib < QK_K / 32; ib++) {
      const uint32_t idx = pa_load_u32(a[i].qs + 4 * ib), aux = pa_load_u32(a[i].qs + 4 * ib + 2);
      int s = 0;
      for (int k = 0; k < 4; k++)
        s += grid_sum(pa_iq2xxs_grid[(idx >> (8 * k)) & 0xFF], 8,
                      pa_ksigns_iq2xs[(aux >> (7 * k)) & 127], b[i].qs + 32 * ib + 8 * k);
      isum += (2 * (int)(aux >> 28) + 1) * s;
    }
    sum += (double)(f16_at(&a[i].d) * b[i].d) * isum * 0.125;
  }
  *out = (float)sum;
}

/* IQ2_XS and IQ2_S: a 4-bit scale per 16 values, nibble (g / 2) % 2 of
 * scales[g / 4] for the group of 8 g */
static inline int scale16(const uint8_t *scales, int g) {
  return (scales[g / 4] >> (4 * ((g / 2) % 2))) & 0xF;
}

static void dot_iq2_xs(int64_t n, float *out, const void *w, const void *x) {
  const block_iq2_xs *a = w;
  const block_q8_K *b = x;
  double sum = 0.0;
  for (int64_t i = 0; i < n / QK_K; i++) {
    int isum = 0;
    for (int g = 0; g < QK_K / 8; g++) {
      const uint16_t q = pa_load_u16(&a[i].qs[g]);
      isum += (2 * scale16(a[i].scales, g) + 1) *
              grid_sum(pa_iq2xs_grid[q & 511], 8, pa_ksigns_iq2xs[q >> 9], b[i].qs + 8 * g);
    }
    sum += (double)(f16_at(&a[i].d) * b[i].d) * isum * 0.125;
  }
  *out = (float)sum;
}

static void dot_iq2_s(int64_t n, float *out, const void *w, const void *x) {
  const block_iq2_s *a = w;
  const block_q8_K *b = x;
  double sum = 0.0;
  for (int64_t i = 0; i < n / QK_K; i++) {
    int isum = 0;
    for (int g = 0; g < QK_K / 8; g++) {
      const int r = a[i].qs[g] | ((a[i].qh[g / 4] >> (2 * (g % 4))) & 3) << 8;
      isum += (2 * scale16(a[i].scales, g) + 1) *
              grid_sum(pa_iq2s_grid[r], 8, a[i].signs[g], b[i].qs + 8 * g);
    }
    sum += (double)(f16_at(&a[i].d) * b[i].d) * isum * 0.125;
  }
  *out = (float)sum;
}

static void dot_iq3_xxs(int64_t n, float *out, const void *w, const void *x) {
  const block_iq3_xxs *a = w;
  const block_q8_K *b = x;
  double sum = 0.0;
  for (int64_t i = 0; i < n / QK_K; i++) {
    int isum = 0;
    for (int ib = 0; ib < QK_K / 32; ib++) {
      const uint32_t aux = pa_load_u32(a[i].qs + QK_K / 4 + 4 * ib);
      int s = 0;
      for (int h = 0; h < 8; h++) {
        const unsigned signs = pa_ksigns_iq2xs[(aux >> (7 * (h / 2))) & 127] >> (4 * (h % 2));
        s += grid_sum(pa_iq3xxs_grid[a[i].qs[8 * ib + h]], 4, signs, b[i].qs + 32 * ib + 4 * h);
      }
      isum += (2 * (int)(aux >> 28) + 1) * s;
    }
    sum += (double)(f16_at(&a[i].d) * b[i].d) * isum * 0.25;
  }
  *out = (float)sum;
}

static void dot_iq3_s(int64_t n, float *out, const void *w, const void *x) {
  const block_iq3_s *a = w;
  const block_q8_K *b = x;
  double sum = 0.0;
  for (int64_t i = 0; i < n / QK_K; i++) {
    int isum = 0;
    for (int ib = 0; ib < QK_K / 32; ib++) {
      int s = 0;
      for (int h = 0; h < 8; h++) {
        const int g = 8 * ib + h; /* group of 4 */
        const int r = a[i].qs[g] | ((a[i].qh[ib] >> h) & 1) << 8;
        s += grid_sum(pa_iq3s_grid[r], 4, a[i].signs[g / 2] >> (4 * (g % 2)), b[i].qs + 4 * g);
      }
      isum += (2 * ((a[i].scales[ib / 2] >> (4 * (ib % 2))) & 0xF) + 1) * s;
    }
    sum += (double)(f16_at(&a[i].d) * b[i].d) * isum;
  }
  *out = (float)sum;
}

/* IQ1: sum over 8 values of (8 g + delta) y, g the signed grid value in
 * {-1, 0, 1}, delta +-1 */
static int iq1_sum(int r, int delta, const int8_t *y) {
  int s = 0;
  for (int i = 0; i < 8; i++) s += (8 * (int8_t)grid_at(pa_iq1s_grid[r], i) + delta) * y[i];
  return s;
}

static void dot_iq1_s(int64_t n, float *out, const void *w, const void *x) {
  const block_iq1_s *a = w;
  const block_q8_K *b = x;
  double sum = 0.0;
  for (int64_t i = 0; i < n / QK_K; i++) {
    int isum = 0;
    for (int ib = 0; ib < QK_K / 32; ib++) {
      const uint16_t qh = pa_load_u16(&a[i].qh[ib]);
      const int delta = qh & 0x8000 ? -1 : 1;
      int s = 0;
      for (int k = 0; k < 4; k++)
        s += iq1_sum(a[i].qs[4 * ib + k] | ((qh >> (3 * k)) & 7) << 8, delta,
                     b[i].qs + 32 * ib + 8 * k);
      isum += (2 * ((qh >> 12) & 7) + 1) * s;
    }
    sum += (double)(f16_at(&a[i].d) * b[i].d) * isum * 0.125;
  }
  *out = (float)sum;
}

static void dot_iq1_m(int64_t n, float *out, const void *w, const void *x) {
  const block_iq1_m *a = w;
  const block_q8_K *b = x;
  double sum = 0.0;
  for (int64_t i = 0; i < n / QK_K; i++) {
    uint16_t sc[4];
    for (int k = 0; k < 4; k++) sc[k] = pa_load_u16(a[i].scales + 2 * k);
    const pa_f16 dh =
        (pa_f16)((sc[0] >> 12) | (sc[1] >> 12) << 4 | (sc[2] >> 12) << 8 | (sc[3] >> 12) << 12);
    int isum = 0;
    for (int g = 0; g < QK_K / 8; g++) {
      const int nib = (a[i].qh[g / 2] >> (4 * (g % 2))) & 0xF;
      isum += (2 * ((sc[g / 8] >> (3 * ((g / 2) % 4))) & 7) + 1) *
              iq1_sum(a[i].qs[g] | (nib & 7) << 8, nib & 8 ? -1 : 1, b[i].qs + 8 * g);
    }
    sum += (double)(pa_f16_to_f32(dh) * b[i].d) * isum * 0.125;
  }
  *out = (float)sum;
}

/* ---- activation quantizers: symmetric, d = max|x| / 127, q = round(x / d)
 * computed as x * (1/d) and rounded to nearest even, so |q| <= 127 (never
 * -128: the SIMD dots rely on it to keep 16-bit pair sums from saturating) ---- */

static void quantize_f32(const float *x, void *y, int64_t n) { memmove(y, x, (size_t)n * 4); }

/* Writes 32 quants of one block; returns their sum; *d_out gets the scale. */
static int quantize_block32(const float *x, int8_t *q, float *d_out) {
  float amax = 0.0f;
  for (int l = 0; l < 32; l++) {
    float v = x[l] < 0 ? -x[l] : x[l];
    if (v > amax) amax = v;
  }
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  int sum = 0;
  for (int l = 0; l < 32; l++) {
    q[l] = (int8_t)round_even(x[l] * id);
    sum += q[l];
  }
  *d_out = d;
  return sum;
}

static void quantize_q8_0(const float *x, void *vy, int64_t n) {
  block_q8_0 *y = vy;
  for (int64_t i = 0; i < n / QK8_0; i++) {
    float d;
    quantize_block32(x + 32 * i, y[i].qs, &d);
    f16_put(&y[i].d, d);
  }
}

static void quantize_q8_1(const float *x, void *vy, int64_t n) {
  block_q8_1 *y = vy;
  for (int64_t i = 0; i < n / QK8_1; i++) {
    float d;
    int sum = quantize_block32(x + 32 * i, y[i].qs, &d);
    f16_put(&y[i].d, d);
    f16_put(&y[i].s, d * (float)sum);
  }
}

static void quantize_q8_K(const float *x, void *vy, int64_t n) {
  block_q8_K *y = vy;
  for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
    float amax = 0.0f;
    for (int l = 0; l < QK_K; l++) {
      float v = x[l] < 0 ? -x[l] : x[l];
      if (v > amax) amax = v;
    }
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int l = 0; l < QK_K; l++) y[i].qs[l] = (int8_t)round_even(x[l] * id);
    for (int g = 0; g < QK_K / 16; g++) {
      int s = 0;
      for (int l = 0; l < 16; l++) s += y[i].qs[16 * g + l];
      y[i].bsums[g] = (int16_t)s;
    }
    y[i].d = d;
  }
}

static const pa_cpu_kernels reference = {
    .name = "scalar",
    .vec_dot =
        {
            [PA_TYPE_F32] = dot_f32,
            [PA_TYPE_F16] = dot_f16,
            [PA_TYPE_BF16] = dot_bf16,
            [PA_TYPE_Q4_0] = dot_q4_0,
            [PA_TYPE_Q4_1] = dot_q4_1,
            [PA_TYPE_Q5_0] = dot_q5_0,
            [PA_TYPE_Q5_1] = dot_q5_1,
            [PA_TYPE_Q8_0] = dot_q8_0,
            [PA_TYPE_Q2_K] = dot_q2_K,
            [PA_TYPE_Q3_K] = dot_q3_K,
            [PA_TYPE_Q4_K] = dot_q4_K,
            [PA_TYPE_Q5_K] = dot_q5_K,
            [PA_TYPE_Q6_K] = dot_q6_K,
            [PA_TYPE_IQ4_NL] = dot_iq4_nl,
            [PA_TYPE_IQ4_XS] = dot_iq4_xs,
            [PA_TYPE_MXFP4] = dot_mxfp4,
            [PA_TYPE_IQ2_XXS] = dot_iq2_xxs,
            [PA_TYPE_IQ2_XS] = dot_iq2_xs,
            [PA_TYPE_IQ2_S] = dot_iq2_s,
            [PA_TYPE_IQ3_XXS] = dot_iq3_xxs,
            [PA_TYPE_IQ3_S] = dot_iq3_s,
            [PA_TYPE_IQ1_S] = dot_iq1_s,
            [PA_TYPE_IQ1_M] = dot_iq1_m,
        },
    .quantize_row =
        {
            [PA_TYPE_F32] = quantize_f32,
            [PA_TYPE_Q8_0] = quantize_q8_0,
            [PA_TYPE_Q8_1] = quantize_q8_1,
            [PA_TYPE_Q8_K] = quantize_q8_K,
        },
    .ilv =
        {
            [PA_LAYOUT_K_X4] = {[PA_TYPE_Q4_K] = &pa_x4_q4k_ref,
                                [PA_TYPE_Q5_K] = &pa_x4_q5k_ref,
                                [PA_TYPE_Q6_K] = &pa_x4_q6k_ref,
                                [PA_TYPE_Q3_K] = &pa_x4_q3k_ref,
                                [PA_TYPE_Q2_K] = &pa_x4_q2k_ref},
            [PA_LAYOUT_B32_X16] = {[PA_TYPE_Q8_0] = &pa_x16_ref_q8_0,
                                   [PA_TYPE_Q4_0] = &pa_x16_ref_q4_0,
                                   [PA_TYPE_Q4_1] = &pa_x16_ref_q4_1,
                                   [PA_TYPE_Q5_0] = &pa_x16_ref_q5_0,
                                   [PA_TYPE_IQ4_NL] = &pa_x16_ref_iq4_nl,
                                   [PA_TYPE_MXFP4] = &pa_x16_ref_mxfp4,
                                   [PA_TYPE_IQ4_XS] = &pa_x16_ref_iq4_xs,
                                   [PA_TYPE_Q4_K] = &pa_x16_ref_q4_k,
                                   [PA_TYPE_Q5_K] = &pa_x16_ref_q5_k},
        },
};

const pa_cpu_kernels *pa_kernels_reference(void) { return &reference; }
