/* test_blocks.h: random quantized rows for the kernel tests (test_kernels.c,
 * test_gemm.c): where each block type keeps its fp16 scales and its quant
 * payload, rows of random payload bytes with sane scales of either sign
 * (never all zeros), the dequantized row with its block offsets (payload
 * zeroed), and random activations. Header-only, after test_util.h. */
#ifndef PASADA_TEST_BLOCKS_H
#define PASADA_TEST_BLOCKS_H

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "quant/quant.h"
#include "test_util.h"

static inline float rnd_sym(void) { return (float)(2.0 * rnd_unit() - 1.0); }

/* Where a block keeps its fp16 scales, and its quant payload (bytes that
 * are zeroed to find the block offsets). */
typedef struct {
  pa_type type;
  int n_f16;
  size_t f16_at[2];
  int n_payload;
  size_t payload_at[2], payload_size[2];
} block_shape;

#define F16S(a) \
  1, { a, 0 }
#define F16S2(a, b) \
  2, { a, b }
#define PAY(s, f) \
  1, {offsetof(s, f), 0}, { sizeof(((s *)0)->f), 0 }
#define PAY2(s, f, g) \
  2, {offsetof(s, f), offsetof(s, g)}, { sizeof(((s *)0)->f), sizeof(((s *)0)->g) }
static const block_shape shapes[] = {
    {PA_TYPE_Q4_0, F16S(offsetof(block_q4_0, d)), PAY(block_q4_0, qs)},
    {PA_TYPE_Q4_1, F16S2(offsetof(block_q4_1, d), offsetof(block_q4_1, m)), PAY(block_q4_1, qs)},
    {PA_TYPE_Q5_0, F16S(offsetof(block_q5_0, d)), PAY2(block_q5_0, qh, qs)},
    {PA_TYPE_Q5_1, F16S2(offsetof(block_q5_1, d), offsetof(block_q5_1, m)),
     PAY2(block_q5_1, qh, qs)},
    {PA_TYPE_Q8_0, F16S(offsetof(block_q8_0, d)), PAY(block_q8_0, qs)},
    {PA_TYPE_Q2_K, F16S2(offsetof(block_q2_K, d), offsetof(block_q2_K, dmin)), PAY(block_q2_K, qs)},
    {PA_TYPE_Q3_K, F16S(offsetof(block_q3_K, d)), PAY2(block_q3_K, hmask, qs)},
    {PA_TYPE_Q4_K, F16S2(offsetof(block_q4_K, d), offsetof(block_q4_K, dmin)), PAY(block_q4_K, qs)},
    {PA_TYPE_Q5_K, F16S2(offsetof(block_q5_K, d), offsetof(block_q5_K, dmin)),
     PAY2(block_q5_K, qh, qs)},
    {PA_TYPE_Q6_K, F16S(offsetof(block_q6_K, d)), PAY2(block_q6_K, ql, qh)},
    {PA_TYPE_IQ4_NL, F16S(offsetof(block_iq4_nl, d)), PAY(block_iq4_nl, qs)},
    {PA_TYPE_IQ4_XS, F16S(offsetof(block_iq4_xs, d)), PAY(block_iq4_xs, qs)},
    {PA_TYPE_MXFP4, 0, {0, 0}, PAY(block_mxfp4, qs)}, /* exponent: random_weights */
    {PA_TYPE_IQ2_XXS, F16S(offsetof(block_iq2_xxs, d)), PAY(block_iq2_xxs, qs)},
    {PA_TYPE_IQ2_XS, F16S(offsetof(block_iq2_xs, d)), PAY(block_iq2_xs, qs)},
    {PA_TYPE_IQ2_S, F16S(offsetof(block_iq2_s, d)), PAY(block_iq2_s, qs)},
    {PA_TYPE_IQ3_XXS, F16S(offsetof(block_iq3_xxs, d)), PAY(block_iq3_xxs, qs)},
    {PA_TYPE_IQ3_S, F16S(offsetof(block_iq3_s, d)), PAY(block_iq3_s, qs)},
    {PA_TYPE_IQ1_S, F16S(offsetof(block_iq1_s, d)), PAY(block_iq1_s, qs)},
    {PA_TYPE_IQ1_M, 0, {0, 0}, PAY(block_iq1_m, qs)}, /* d: random_weights */
};

static inline const block_shape *shape_of(pa_type t) {
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    if (shapes[i].type == t) return &shapes[i];
  return NULL;
}

static inline void put_f16(uint8_t *p, float f) {
  pa_f16 h = pa_f32_to_f16(f);
  memcpy(p, &h, 2);
}

/* A random row of n elements of `type` into dst (pa_row_size bytes). */
static inline void random_weights(pa_type type, int64_t n, uint8_t *dst) {
  const pa_type_traits *t = pa_type_get(type);
  if (!t->quantized) {
    float *f = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) f[i] = rnd_sym();
    f[rng() % (uint64_t)n] = 0.75f; /* never all zeros */
    t->from_float(f, dst, n);
    free(f);
    return;
  }
  const size_t bytes = pa_row_size(type, n);
  for (size_t i = 0; i < bytes; i++) dst[i] = (uint8_t)rng();
  const block_shape *s = shape_of(type);
  for (int64_t b = 0; b < n / t->block_size; b++) {
    uint8_t *blk = dst + (size_t)b * t->type_size;
    for (int k = 0; k < s->n_f16; k++) {
      /* magnitudes 1e-3 .. 1e-1, either sign */
      float mag = 1e-3f * powf(100.0f, rnd_unit());
      put_f16(blk + s->f16_at[k], (rng() & 1) ? mag : -mag);
    }
    /* MXFP4's shared exponent: scales 2^-10 .. 2^0 (times levels up to 12) */
    if (type == PA_TYPE_MXFP4) blk[0] = (uint8_t)(118 + rng() % 11);
    /* IQ1_M's fp16 d: the top nibbles of its four scale words */
    if (type == PA_TYPE_IQ1_M) {
      const pa_f16 d = pa_f32_to_f16(1e-3f * powf(100.0f, rnd_unit()));
      uint8_t *sc = blk + offsetof(block_iq1_m, scales);
      for (int k = 0; k < 4; k++) sc[2 * k + 1] = (uint8_t)((sc[2 * k + 1] & 0x0F) | ((d >> (4 * k)) & 0xF) << 4);
    }
  }
}

/* Dequantized row and the block offsets (payload zeroed), as floats. */
static inline void dequantize_with_offsets(pa_type type, int64_t n, const uint8_t *row, float *w,
                                    float *w0) {
  const pa_type_traits *t = pa_type_get(type);
  t->to_float(row, w, n);
  const block_shape *s = shape_of(type);
  if (!s) {
    memset(w0, 0, (size_t)n * sizeof(float));
    return;
  }
  const size_t bytes = pa_row_size(type, n);
  uint8_t *z = pa_alloc(bytes);
  memcpy(z, row, bytes);
  for (int64_t b = 0; b < n / t->block_size; b++)
    for (int k = 0; k < s->n_payload; k++)
      memset(z + (size_t)b * t->type_size + s->payload_at[k], 0, s->payload_size[k]);
  t->to_float(z, w0, n);
  pa_free(z);
}

static inline void random_floats(float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) x[i] = rnd_sym() * (1.0f + 4.0f * (float)((rng() & 63) == 0));
  x[rng() % (uint64_t)n] = -1.5f;
}

#endif
