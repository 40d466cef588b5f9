/* quant.c: the table of type traits (block size, bytes, reference kernels,
 * the activation type of dot products), and the scalar conversions between
 * float32 and the 16-bit floats (IEEE half, bfloat16) with their rows.
 * The per-type block kernels live in dequant.c, quantize.c and quantize_k.c. */
#include <string.h>

#include "quant/quant.h"

_Static_assert(sizeof(block_q4_0) == 18, "block_q4_0 layout");
_Static_assert(sizeof(block_q4_1) == 20, "block_q4_1 layout");
_Static_assert(sizeof(block_q5_0) == 22, "block_q5_0 layout");
_Static_assert(sizeof(block_q5_1) == 24, "block_q5_1 layout");
_Static_assert(sizeof(block_q8_0) == 34, "block_q8_0 layout");
_Static_assert(sizeof(block_q8_1) == 36, "block_q8_1 layout");
_Static_assert(sizeof(block_q2_K) == 84, "block_q2_K layout");
_Static_assert(sizeof(block_q3_K) == 110, "block_q3_K layout");
_Static_assert(sizeof(block_q4_K) == 144, "block_q4_K layout");
_Static_assert(sizeof(block_q5_K) == 176, "block_q5_K layout");
_Static_assert(sizeof(block_q6_K) == 210, "block_q6_K layout");
_Static_assert(sizeof(block_q8_K) == 292, "block_q8_K layout");
_Static_assert(sizeof(block_iq4_nl) == 18, "block_iq4_nl layout");
_Static_assert(sizeof(block_iq4_xs) == 136, "block_iq4_xs layout");
_Static_assert(sizeof(block_mxfp4) == 17, "block_mxfp4 layout");
_Static_assert(sizeof(block_iq2_xxs) == 66, "block_iq2_xxs layout");
_Static_assert(sizeof(block_iq2_xs) == 74, "block_iq2_xs layout");
_Static_assert(sizeof(block_iq2_s) == 82, "block_iq2_s layout");
_Static_assert(sizeof(block_iq3_xxs) == 98, "block_iq3_xxs layout");
_Static_assert(sizeof(block_iq3_s) == 110, "block_iq3_s layout");
_Static_assert(sizeof(block_iq1_s) == 50, "block_iq1_s layout");
_Static_assert(sizeof(block_iq1_m) == 56, "block_iq1_m layout");

#define TRAITS(type_, name_, bs_, size_, quantized_, to_, from_, dot_)                   \
  [type_] = {.name = name_, .block_size = bs_, .type_size = size_, .quantized = quantized_, \
             .to_float = to_, .from_float = from_, .vec_dot_type = dot_}

/* F16/BF16 weights take float32 activations: their dot products are then
 * exact up to float32 accumulation, which is what a reference wants. */
static const pa_type_traits type_traits[PA_TYPE_COUNT] = {
    TRAITS(PA_TYPE_F32, "F32", 1, sizeof(float), false, pa_dequantize_f32, pa_quantize_f32,
           PA_TYPE_F32),
    TRAITS(PA_TYPE_F16, "F16", 1, sizeof(pa_f16), false, pa_dequantize_f16, pa_quantize_f16,
           PA_TYPE_F32),
    TRAITS(PA_TYPE_BF16, "BF16", 1, sizeof(pa_bf16), false, pa_dequantize_bf16,
           pa_quantize_bf16, PA_TYPE_F32),
    TRAITS(PA_TYPE_Q4_0, "Q4_0", QK4_0, sizeof(block_q4_0), true, pa_dequantize_q4_0,
           pa_quantize_q4_0, PA_TYPE_Q8_0),
    TRAITS(PA_TYPE_Q4_1, "Q4_1", QK4_1, sizeof(block_q4_1), true, pa_dequantize_q4_1,
           pa_quantize_q4_1, PA_TYPE_Q8_1),
    TRAITS(PA_TYPE_Q5_0, "Q5_0", QK5_0, sizeof(block_q5_0), true, pa_dequantize_q5_0,
           pa_quantize_q5_0, PA_TYPE_Q8_0),
    TRAITS(PA_TYPE_Q5_1, "Q5_1", QK5_1, sizeof(block_q5_1), true, pa_dequantize_q5_1,
           pa_quantize_q5_1, PA_TYPE_Q8_1),
    TRAITS(PA_TYPE_Q8_0, "Q8_0", QK8_0, sizeof(block_q8_0), true, pa_dequantize_q8_0,
           pa_quantize_q8_0, PA_TYPE_Q8_0),
    TRAITS(PA_TYPE_Q8_1, "Q8_1", QK8_1, sizeof(block_q8_1), true, pa_dequantize_q8_1,
           pa_quantize_q8_1, PA_TYPE_Q8_1),
    TRAITS(PA_TYPE_Q2_K, "Q2_K", QK_K, sizeof(block_q2_K), true, pa_dequantize_q2_K,
           pa_quantize_q2_K, PA_TYPE_Q8_K),
    TRAITS(PA_TYPE_Q3_K, "Q3_K", QK_K, sizeof(block_q3_K), true, pa_dequantize_q3_K,
           pa_quantize_q3_K, PA_TYPE_Q8_K),
    TRAITS(PA_TYPE_Q4_K, "Q4_K", QK_K, sizeof(block_q4_K), true, pa_dequantize_q4_K,
           pa_quantize_q4_K, PA_TYPE_Q8_K),
    TRAITS(PA_TYPE_Q5_K, "Q5_K", QK_K, sizeof(block_q5_K), true, pa_dequantize_q5_K,
           pa_quantize_q5_K, PA_TYPE_Q8_K),
    TRAITS(PA_TYPE_Q6_K, "Q6_K", QK_K, sizeof(block_q6_K), true, pa_dequantize_q6_K,
           pa_quantize_q6_K, PA_TYPE_Q8_K),
    TRAITS(PA_TYPE_Q8_K, "Q8_K", QK_K, sizeof(block_q8_K), true, pa_dequantize_q8_K,
           pa_quantize_q8_K, PA_TYPE_Q8_K),
    TRAITS(PA_TYPE_IQ4_NL, "IQ4_NL", QK4_NL, sizeof(block_iq4_nl), true, pa_dequantize_iq4_nl,
           pa_quantize_iq4_nl, PA_TYPE_Q8_0),
    TRAITS(PA_TYPE_IQ4_XS, "IQ4_XS", QK_K, sizeof(block_iq4_xs), true, pa_dequantize_iq4_xs,
           pa_quantize_iq4_xs, PA_TYPE_Q8_K),
    TRAITS(PA_TYPE_MXFP4, "MXFP4", QK_MXFP4, sizeof(block_mxfp4), true, pa_dequantize_mxfp4,
           pa_quantize_mxfp4, PA_TYPE_Q8_0),
    /* the grid I-quants: dequantization only (no quantizer) */
    TRAITS(PA_TYPE_IQ2_XXS, "IQ2_XXS", QK_K, sizeof(block_iq2_xxs), true, pa_dequantize_iq2_xxs, NULL,
           PA_TYPE_Q8_K),
    TRAITS(PA_TYPE_IQ2_XS, "IQ2_XS", QK_K, sizeof(block_iq2_xs), true, pa_dequantize_iq2_xs, NULL,
           PA_TYPE_Q8_K),
    TRAITS(PA_TYPE_IQ2_S, "IQ2_S", QK_K, sizeof(block_iq2_s), true, pa_dequantize_iq2_s, NULL,
           PA_TYPE_Q8_K),
    TRAITS(PA_TYPE_IQ3_XXS, "IQ3_XXS", QK_K, sizeof(block_iq3_xxs), true, pa_dequantize_iq3_xxs, NULL,
           PA_TYPE_Q8_K),
    TRAITS(PA_TYPE_IQ3_S, "IQ3_S", QK_K, sizeof(block_iq3_s), true, pa_dequantize_iq3_s, NULL,
           PA_TYPE_Q8_K),
    TRAITS(PA_TYPE_IQ1_S, "IQ1_S", QK_K, sizeof(block_iq1_s), true, pa_dequantize_iq1_s, NULL,
           PA_TYPE_Q8_K),
    TRAITS(PA_TYPE_IQ1_M, "IQ1_M", QK_K, sizeof(block_iq1_m), true, pa_dequantize_iq1_m, NULL,
           PA_TYPE_Q8_K),
};

const pa_type_traits *pa_type_get(uint32_t type) {
  if (type >= PA_TYPE_COUNT || type_traits[type].name == NULL) return NULL;
  return &type_traits[type];
}

const char *pa_type_name(uint32_t type) {
  const pa_type_traits *t = pa_type_get(type);
  return t ? t->name : "?";
}

size_t pa_row_size(pa_type type, int64_t n) {
  const pa_type_traits *t = pa_type_get((uint32_t)type);
  if (t == NULL || n < 0) return 0;
  return (size_t)(n / t->block_size) * t->type_size;
}

static inline uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline float f32_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

float pa_f16_to_f32(pa_f16 h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1F;
  uint32_t mant = h & 0x3FF;
  if (exp == 0x1F) return f32_from_bits(sign | 0x7F800000u | (mant << 13)); /* inf, NaN */
  if (exp != 0) return f32_from_bits(sign | ((exp + 112) << 23) | (mant << 13));
  if (mant == 0) return f32_from_bits(sign);
  /* Subnormal half: mant * 2^-24, normal as a float. Shift the leading one
   * up to bit 10 and lower the exponent once per shift. */
  uint32_t e = 113;
  while ((mant & 0x400) == 0) {
    mant <<= 1;
    e--;
  }
  return f32_from_bits(sign | (e << 23) | ((mant & 0x3FF) << 13));
}

/* Rounds `value >> shift` to nearest, ties to even (shift >= 1). */
static inline uint32_t shift_round_even(uint32_t value, uint32_t shift) {
  uint32_t q = value >> shift;
  uint32_t rem = value & ((1u << shift) - 1);
  uint32_t halfway = 1u << (shift - 1);
  if (rem > halfway || (rem == halfway && (q & 1))) q++;
  return q;
}

pa_f16 pa_f32_to_f16(float f) {
  uint32_t x = f32_bits(f);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
  uint32_t ax = x & 0x7FFFFFFFu;
  if (ax > 0x7F800000u) /* NaN: keep it quiet, keep the top of the payload */
    return (pa_f16)(sign | 0x7E00 | ((ax >> 13) & 0x3FF));
  /* 65520 is halfway between 65504 (largest half) and 2^16: ties go to the
   * even neighbour, which is infinity. */
  if (ax >= 0x477FF000u) return (pa_f16)(sign | 0x7C00);
  uint32_t exp = ax >> 23;
  if (exp >= 113) { /* normal half; a carry out of the mantissa bumps the exponent */
    uint32_t bits = (exp - 112) << 23 | (ax & 0x7FFFFF);
    return (pa_f16)(sign | shift_round_even(bits, 13));
  }
  /* Subnormal half (or zero): in units of 2^-24 the value is
   * mant * 2^(exp - 126) with the implicit bit; below 2^-25 it rounds to 0. */
  if (exp < 102) return (pa_f16)sign;
  uint32_t mant = (ax & 0x7FFFFF) | 0x800000;
  return (pa_f16)(sign | shift_round_even(mant, 126 - exp));
}

float pa_bf16_to_f32(pa_bf16 h) { return f32_from_bits((uint32_t)h << 16); }

pa_bf16 pa_f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (pa_bf16)((u >> 16) | 0x40); /* quiet NaN */
  /* Round to nearest even; overflow past the largest finite value gives inf. */
  return (pa_bf16)((u + 0x7FFFu + ((u >> 16) & 1)) >> 16);
}

void pa_dequantize_f32(const void *src, float *dst, int64_t n) {
  memmove(dst, src, (size_t)n * sizeof(float));
}

void pa_quantize_f32(const float *src, void *dst, int64_t n) {
  memmove(dst, src, (size_t)n * sizeof(float));
}

/* 16-bit rows are read and written with memcpy: callers may hand rows of a
 * memory-mapped file at any even (or odd) address. */
void pa_dequantize_f16(const void *src, float *dst, int64_t n) {
  const uint8_t *p = src;
  for (int64_t i = 0; i < n; i++) {
    pa_f16 h;
    memcpy(&h, p + 2 * i, 2);
    dst[i] = pa_f16_to_f32(h);
  }
}

void pa_quantize_f16(const float *src, void *dst, int64_t n) {
  uint8_t *p = dst;
  for (int64_t i = 0; i < n; i++) {
    pa_f16 h = pa_f32_to_f16(src[i]);
    memcpy(p + 2 * i, &h, 2);
  }
}

void pa_dequantize_bf16(const void *src, float *dst, int64_t n) {
  const uint8_t *p = src;
  for (int64_t i = 0; i < n; i++) {
    pa_bf16 h;
    memcpy(&h, p + 2 * i, 2);
    dst[i] = pa_bf16_to_f32(h);
  }
}

void pa_quantize_bf16(const float *src, void *dst, int64_t n) {
  uint8_t *p = dst;
  for (int64_t i = 0; i < n; i++) {
    pa_bf16 h = pa_f32_to_bf16(src[i]);
    memcpy(p + 2 * i, &h, 2);
  }
}
