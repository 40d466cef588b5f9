/* dequant_iq.c: the reference dequantization of the grid I-quants IQ2_XXS,
 * IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S and IQ1_M (256-element super-blocks
 * whose groups of 8 or 4 values are rows of a fixed grid, iq_grids.h, with
 * sign bits and small per-group scales). The float operations and their
 * order are those of the `gguf` Python package's dequantizers (the scale
 * products left to right in float32, then one multiply per value), so the
 * results are bit-exact with it (tests/e2e/test_quant.py). */
#include <string.h>

#include "quant/iq_grids.h"
#include "quant/quant.h"

PA_NO_FP_CONTRACT

static inline uint8_t grid8(const uint64_t *grid, int r, int i) {
  return (uint8_t)(grid[r] >> (8 * i));
}
static inline uint8_t grid4(const uint32_t *grid, int r, int i) {
  return (uint8_t)(grid[r] >> (8 * i));
}

/* 8 values db * grid * sign, sign bit i of `signs` negating value i. */
static inline void put8(float *y, float db, const uint64_t *grid, int r, unsigned signs) {
  for (int i = 0; i < 8; i++) {
    const float v = db * (float)grid8(grid, r, i);
    y[i] = (signs >> i) & 1 ? -v : v;
  }
}

/* IQ2_XXS: per 32 values two words: 4 grid indices (bytes of the first),
 * and in the second 4 x 7 sign bits (expanded by ksigns) and the scale in
 * the top 4 bits: db = d * (0.5 + s) * 0.25. */
void pa_dequantize_iq2_xxs(const void *src, float *dst, int64_t n) {
  const block_iq2_xxs *x = src;
  for (int64_t b = 0; b < n / QK_K; b++) {
    const float d = pa_load_f16(&x[b].d);
    for (int ib = 0; ib < QK_K / 32; ib++, dst += 32) {
      const uint32_t aux0 = pa_load_u32(x[b].qs + 4 * ib), aux1 = pa_load_u32(x[b].qs + 4 * ib + 2);
      const float db = d * (0.5f + (float)(aux1 >> 28)) * 0.25f;
      for (int k = 0; k < 4; k++)
        put8(dst + 8 * k, db, pa_iq2xxs_grid, (aux0 >> (8 * k)) & 0xFF,
             pa_ksigns_iq2xs[(aux1 >> (7 * k)) & 127]);
    }
  }
}

/* IQ2_XS: 32 16-bit words of 9 index bits and 7 sign bits; a 4-bit scale
 * per 16 values. */
void pa_dequantize_iq2_xs(const void *src, float *dst, int64_t n) {
  const block_iq2_xs *x = src;
  for (int64_t b = 0; b < n / QK_K; b++) {
    const float d = pa_load_f16(&x[b].d);
    for (int g = 0; g < QK_K / 8; g++, dst += 8) {
      const int s = (x[b].scales[g / 4] >> (4 * ((g / 2) % 2))) & 0xF;
      const float db = d * (0.5f + (float)s) * 0.25f;
      const uint16_t q = pa_load_u16(&x[b].qs[g]);
      put8(dst, db, pa_iq2xs_grid, q & 511, pa_ksigns_iq2xs[q >> 9]);
    }
  }
}

/* IQ2_S: 10-bit indices (8 bits in qs, 2 in qh), explicit sign bytes, a
 * 4-bit scale per 16 values. */
void pa_dequantize_iq2_s(const void *src, float *dst, int64_t n) {
  const block_iq2_s *x = src;
  for (int64_t b = 0; b < n / QK_K; b++) {
    const float d = pa_load_f16(&x[b].d);
    for (int g = 0; g < QK_K / 8; g++, dst += 8) {
      const int s = (x[b].scales[g / 4] >> (4 * ((g / 2) % 2))) & 0xF;
      const float db = d * (0.5f + (float)s) * 0.25f;
      const int r = x[b].qs[g] | ((x[b].qh[g / 4] >> (2 * (g % 4))) & 3) << 8;
      put8(dst, db, pa_iq2s_grid, r, x[b].signs[g]);
    }
  }
}

/* IQ3_XXS: 64 index bytes (4 values each), then per 32 values a word of 4 x
 * 7 sign bits and a 4-bit scale: db = d * (0.5 + s) * 0.5. */
void pa_dequantize_iq3_xxs(const void *src, float *dst, int64_t n) {
  const block_iq3_xxs *x = src;
  for (int64_t b = 0; b < n / QK_K; b++) {
    const float d = pa_load_f16(&x[b].d);
    for (int ib = 0; ib < QK_K / 32; ib++, dst += 32) {
      const uint32_t aux = pa_load_u32(x[b].qs + QK_K / 4 + 4 * ib);
      const float db = d * (0.5f + (float)(aux >> 28)) * 0.5f;
      for (int k = 0; k < 4; k++) {
        const unsigned signs = pa_ksigns_iq2xs[(aux >> (7 * k)) & 127];
        for (int h = 0; h < 2; h++) {
          const int r = x[b].qs[8 * ib + 2 * k + h];
          for (int i = 0; i < 4; i++) {
            const float v = db * (float)grid4(pa_iq3xxs_grid, r, i);
            dst[8 * k + 4 * h + i] = (signs >> (4 * h + i)) & 1 ? -v : v;
          }
        }
      }
    }
  }
}

/* IQ3_S: 9-bit indices (8 in qs, 1 in qh), sign bits in element order, a
 * 4-bit scale per 32 values: db = d * (1 + 2 s). */
void pa_dequantize_iq3_s(const void *src, float *dst, int64_t n) {
  const block_iq3_s *x = src;
  for (int64_t b = 0; b < n / QK_K; b++) {
    const float d = pa_load_f16(&x[b].d);
    for (int ib = 0; ib < QK_K / 32; ib++) {
      const int s = (x[b].scales[ib / 2] >> (4 * (ib % 2))) & 0xF;
      const float db = d * (float)(1 + 2 * s);
      for (int j = 0; j < 8; j++, dst += 4) {
        const int g = 8 * ib + j; /* group of 4 */
        const int r = x[b].qs[g] | ((x[b].qh[g / 8] >> (g % 8)) & 1) << 8;
        for (int i = 0; i < 4; i++) {
          const int e = 4 * g + i;
          const float v = db * (float)grid4(pa_iq3s_grid, r, i);
          dst[i] = (x[b].signs[e / 8] >> (e % 8)) & 1 ? -v : v;
        }
      }
    }
  }
}

/* IQ1 values: dl * (grid + delta), grid in {-1, 0, 1}, delta +-1/8. */
static inline void put8_iq1(float *y, float dl, int r, float delta) {
  for (int i = 0; i < 8; i++) y[i] = dl * ((float)(int8_t)grid8(pa_iq1s_grid, r, i) + delta);
}

/* IQ1_S: 11-bit indices (8 in qs, 3 in qh[ib]); qh[ib] also holds the 3-bit
 * scale (bits 12..14, dl = d * (2 s + 1)) and the sign of delta (bit 15). */
void pa_dequantize_iq1_s(const void *src, float *dst, int64_t n) {
  const block_iq1_s *x = src;
  for (int64_t b = 0; b < n / QK_K; b++) {
    const float d = pa_load_f16(&x[b].d);
    for (int ib = 0; ib < QK_K / 32; ib++) {
      const uint16_t qh = pa_load_u16(&x[b].qh[ib]);
      const float dl = d * (float)(2 * ((qh >> 12) & 7) + 1);
      const float delta = qh & 0x8000 ? -0.125f : 0.125f;
      for (int k = 0; k < 4; k++, dst += 8)
        put8_iq1(dst, dl, x[b].qs[4 * ib + k] | ((qh >> (3 * k)) & 7) << 8, delta);
    }
  }
}

/* IQ1_M: no separate d: its 16 bits are the top nibbles of the four scale
 * words; 3-bit scales per 16 values (dl = d * (2 s + 1)); each qh byte
 * holds two indices' top 3 bits and delta signs (bits 3 and 7). */
void pa_dequantize_iq1_m(const void *src, float *dst, int64_t n) {
  const block_iq1_m *x = src;
  for (int64_t b = 0; b < n / QK_K; b++) {
    uint16_t sc[4];
    for (int i = 0; i < 4; i++) sc[i] = pa_load_u16(x[b].scales + 2 * i);
    const pa_f16 dh =
        (pa_f16)((sc[0] >> 12) | (sc[1] >> 12) << 4 | (sc[2] >> 12) << 8 | (sc[3] >> 12) << 12);
    const float d = pa_f16_to_f32(dh);
    for (int g = 0; g < QK_K / 8; g++, dst += 8) {
      const int s = (sc[g / 8] >> (3 * ((g / 2) % 4))) & 7;
      const float dl = d * (float)(2 * s + 1);
      const int nib = (x[b].qh[g / 2] >> (4 * (g % 2))) & 0xF;
      put8_iq1(dst, dl, x[b].qs[g] | (nib & 7) << 8, nib & 8 ? -0.125f : 0.125f);
    }
  }
}
