/* quant.h: the tensor types of GGUF (GGML numbering), their block layouts,
 * and one traits table (block size, bytes per block, reference dequantize
 * and quantize, the activation type their dot products take).
 * The scalar functions here are the specification every SIMD kernel is
 * tested against. Block layouts are the GGUF on-disk format. */
#ifndef PASADA_QUANT_H
#define PASADA_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef enum {
  PA_TYPE_F32 = 0,
  PA_TYPE_F16 = 1,
  PA_TYPE_Q4_0 = 2,
  PA_TYPE_Q4_1 = 3,
  PA_TYPE_Q5_0 = 6,
  PA_TYPE_Q5_1 = 7,
  PA_TYPE_Q8_0 = 8,
  PA_TYPE_Q8_1 = 9,
  PA_TYPE_Q2_K = 10,
  PA_TYPE_Q3_K = 11,
  PA_TYPE_Q4_K = 12,
  PA_TYPE_Q5_K = 13,
  PA_TYPE_Q6_K = 14,
  PA_TYPE_Q8_K = 15,
  PA_TYPE_IQ2_XXS = 16,
  PA_TYPE_IQ2_XS = 17,
  PA_TYPE_IQ3_XXS = 18,
  PA_TYPE_IQ1_S = 19,
  PA_TYPE_IQ4_NL = 20,
  PA_TYPE_IQ3_S = 21,
  PA_TYPE_IQ2_S = 22,
  PA_TYPE_IQ4_XS = 23,
  PA_TYPE_IQ1_M = 29,
  PA_TYPE_BF16 = 30,
  PA_TYPE_MXFP4 = 39,
  PA_TYPE_COUNT = 40 /* table size; unknown numbers have no traits */
} pa_type;

#define QK4_0 32
#define QK4_1 32
#define QK5_0 32
#define QK5_1 32
#define QK8_0 32
#define QK8_1 32
#define QK_K 256
#define K_SCALE_SIZE 12
#define QK4_NL 32
#define QK_MXFP4 32

typedef uint16_t pa_f16;  /* IEEE half, raw bits */
typedef uint16_t pa_bf16; /* bfloat16, raw bits */

typedef struct { pa_f16 d; uint8_t qs[QK4_0 / 2]; } block_q4_0;
typedef struct { pa_f16 d, m; uint8_t qs[QK4_1 / 2]; } block_q4_1;
typedef struct { pa_f16 d; uint8_t qh[4]; uint8_t qs[QK5_0 / 2]; } block_q5_0;
typedef struct { pa_f16 d, m; uint8_t qh[4]; uint8_t qs[QK5_1 / 2]; } block_q5_1;
typedef struct { pa_f16 d; int8_t qs[QK8_0]; } block_q8_0;
/* activation type of Q4_1/Q5_1 dots: s = d * sum(qs) */
typedef struct { pa_f16 d, s; int8_t qs[QK8_1]; } block_q8_1;
typedef struct { uint8_t scales[QK_K / 16]; uint8_t qs[QK_K / 4]; pa_f16 d, dmin; } block_q2_K;
typedef struct { uint8_t hmask[QK_K / 8]; uint8_t qs[QK_K / 4]; uint8_t scales[12]; pa_f16 d; } block_q3_K;
typedef struct { pa_f16 d, dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qs[QK_K / 2]; } block_q4_K;
typedef struct { pa_f16 d, dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qh[QK_K / 8]; uint8_t qs[QK_K / 2]; } block_q5_K;
typedef struct { uint8_t ql[QK_K / 2]; uint8_t qh[QK_K / 4]; int8_t scales[QK_K / 16]; pa_f16 d; } block_q6_K;
/* IQ4_NL: 32 elements, d * kvalues_iq4nl[nibble]; element l < 16 is the
 * low nibble of qs[l], element l + 16 its high nibble (as Q4_0). */
typedef struct { pa_f16 d; uint8_t qs[QK4_NL / 2]; } block_iq4_nl;
/* IQ4_XS: 256 elements in 8 sub-blocks of 32, each with a 6-bit scale
 * (low 4 bits: nibble ib % 2 of scales_l[ib / 2]; high 2 bits: bits
 * 2 ib .. 2 ib + 1 of scales_h) giving d * (scale - 32); qs as IQ4_NL per
 * sub-block (16 bytes each). */
typedef struct { pa_f16 d; uint16_t scales_h; uint8_t scales_l[QK_K / 64]; uint8_t qs[QK_K / 2]; } block_iq4_xs;
/* MXFP4 (OCP microscaling): 32 E2M1 values sharing one E8M0 exponent e;
 * element = kvalues_mxfp4[nibble] * 2^(e - 128) (the table holds the E2M1
 * values doubled, so half of 2^(e - 127)); nibbles as IQ4_NL. 17 bytes: a
 * block may start at any address. */
typedef struct { uint8_t e; uint8_t qs[QK_MXFP4 / 2]; } block_mxfp4;
/* The grid I-quants (256 elements; dequant_iq.c has how each is read):
 * groups of 8 (IQ2, IQ1) or 4 (IQ3) values are rows of a fixed grid
 * (iq_grids.h) picked by an index, with sign bits and small scales. */
typedef struct { pa_f16 d; uint16_t qs[QK_K / 8]; } block_iq2_xxs;
typedef struct { pa_f16 d; uint16_t qs[QK_K / 8]; uint8_t scales[QK_K / 32]; } block_iq2_xs;
typedef struct { pa_f16 d; uint8_t qs[QK_K / 8]; uint8_t signs[QK_K / 8]; uint8_t qh[QK_K / 32]; uint8_t scales[QK_K / 32]; } block_iq2_s;
typedef struct { pa_f16 d; uint8_t qs[3 * QK_K / 8]; } block_iq3_xxs;
typedef struct { pa_f16 d; uint8_t qs[QK_K / 4]; uint8_t qh[QK_K / 32]; uint8_t signs[QK_K / 8]; uint8_t scales[QK_K / 64]; } block_iq3_s;
typedef struct { pa_f16 d; uint8_t qs[QK_K / 8]; uint16_t qh[QK_K / 32]; } block_iq1_s;
typedef struct { uint8_t qs[QK_K / 8]; uint8_t qh[QK_K / 16]; uint8_t scales[QK_K / 32]; } block_iq1_m;
/* activation type of K-quant dots: bsums[i] = sum of qs[16*i .. 16*i+15] */
typedef struct { float d; int8_t qs[QK_K]; int16_t bsums[QK_K / 16]; } block_q8_K;

typedef void (*pa_to_float_fn)(const void *src, float *dst, int64_t n);
typedef void (*pa_from_float_fn)(const float *src, void *dst, int64_t n);

typedef struct {
  const char *name;     /* "Q4_K" */
  int64_t block_size;   /* elements per block */
  size_t type_size;     /* bytes per block */
  bool quantized;
  pa_to_float_fn to_float;     /* reference dequantize; n a multiple of block_size */
  pa_from_float_fn from_float; /* reference quantize; NULL when not provided */
  pa_type vec_dot_type;        /* type activations are converted to for dot products */
} pa_type_traits;

/* NULL for a type number without traits (unknown or unsupported). */
const pa_type_traits *pa_type_get(uint32_t type);
const char *pa_type_name(uint32_t type); /* "?" when unknown */
/* Bytes of a row of n elements; n must be a multiple of the block size. */
size_t pa_row_size(pa_type type, int64_t n);

float pa_f16_to_f32(pa_f16 h);
pa_f16 pa_f32_to_f16(float f); /* round to nearest even */
float pa_bf16_to_f32(pa_bf16 h);
pa_bf16 pa_f32_to_bf16(float f); /* round to nearest even; NaN kept quiet */

/* The scalar reference kernels behind the traits table, by type. Each takes
 * n elements (a multiple of the block size). Callers normally go through
 * pa_type_get(type)->to_float / ->from_float; these names exist so kernels
 * and tests can call one directly. Block pointers must be 2-byte aligned
 * (4 for Q8_K), which GGUF tensor data always is (every block size but
 * MXFP4's is even and tensor offsets are aligned); F16/BF16 and MXFP4 rows
 * may be at any address.
 * Dequantization is bit-exact with ggml and the `gguf` package; the
 * quantizers write the same bytes as ggml's reference (quantize_row_*_ref,
 * no importance matrix). */
void pa_dequantize_f32(const void *src, float *dst, int64_t n);
void pa_dequantize_f16(const void *src, float *dst, int64_t n);
void pa_dequantize_bf16(const void *src, float *dst, int64_t n);
void pa_dequantize_q4_0(const void *src, float *dst, int64_t n);
void pa_dequantize_q4_1(const void *src, float *dst, int64_t n);
void pa_dequantize_q5_0(const void *src, float *dst, int64_t n);
void pa_dequantize_q5_1(const void *src, float *dst, int64_t n);
void pa_dequantize_q8_0(const void *src, float *dst, int64_t n);
void pa_dequantize_q8_1(const void *src, float *dst, int64_t n);
void pa_dequantize_q2_K(const void *src, float *dst, int64_t n);
void pa_dequantize_q3_K(const void *src, float *dst, int64_t n);
void pa_dequantize_q4_K(const void *src, float *dst, int64_t n);
void pa_dequantize_q5_K(const void *src, float *dst, int64_t n);
void pa_dequantize_q6_K(const void *src, float *dst, int64_t n);
void pa_dequantize_q8_K(const void *src, float *dst, int64_t n);
void pa_dequantize_iq4_nl(const void *src, float *dst, int64_t n);
void pa_dequantize_iq4_xs(const void *src, float *dst, int64_t n);
void pa_dequantize_mxfp4(const void *src, float *dst, int64_t n);
void pa_dequantize_iq2_xxs(const void *src, float *dst, int64_t n);
void pa_dequantize_iq2_xs(const void *src, float *dst, int64_t n);
void pa_dequantize_iq2_s(const void *src, float *dst, int64_t n);
void pa_dequantize_iq3_xxs(const void *src, float *dst, int64_t n);
void pa_dequantize_iq3_s(const void *src, float *dst, int64_t n);
void pa_dequantize_iq1_s(const void *src, float *dst, int64_t n);
void pa_dequantize_iq1_m(const void *src, float *dst, int64_t n);

void pa_quantize_f32(const float *src, void *dst, int64_t n);
void pa_quantize_f16(const float *src, void *dst, int64_t n);
void pa_quantize_bf16(const float *src, void *dst, int64_t n);
void pa_quantize_q4_0(const float *src, void *dst, int64_t n);
void pa_quantize_q4_1(const float *src, void *dst, int64_t n);
void pa_quantize_q5_0(const float *src, void *dst, int64_t n);
void pa_quantize_q5_1(const float *src, void *dst, int64_t n);
void pa_quantize_q8_0(const float *src, void *dst, int64_t n);
void pa_quantize_q8_1(const float *src, void *dst, int64_t n);
void pa_quantize_q2_K(const float *src, void *dst, int64_t n);
void pa_quantize_q3_K(const float *src, void *dst, int64_t n);
void pa_quantize_q4_K(const float *src, void *dst, int64_t n);
void pa_quantize_q5_K(const float *src, void *dst, int64_t n);
void pa_quantize_q6_K(const float *src, void *dst, int64_t n);
void pa_quantize_q8_K(const float *src, void *dst, int64_t n);
void pa_quantize_iq4_nl(const float *src, void *dst, int64_t n);
void pa_quantize_iq4_xs(const float *src, void *dst, int64_t n);
void pa_quantize_mxfp4(const float *src, void *dst, int64_t n);

/* The non-linear 4-bit levels of IQ4_NL and IQ4_XS, and the E2M1 values
 * of MXFP4 doubled (ggml's kvalues_iq4nl and kvalues_mxfp4). */
extern const int8_t pa_kvalues_iq4nl[16];
extern const int8_t pa_kvalues_mxfp4[16];
/* The scale of an MXFP4 block of exponent e: 2^(e - 128) as a float32
 * (half the E8M0 value; subnormal for e < 2), as ggml_e8m0_to_fp32_half. */
static inline float pa_e8m0_to_f32_half(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}
/* The 6-bit scale (0..63, the stored value; d * (it - 32) is the
 * sub-block's) of sub-block ib (0..7) of an IQ4_XS block. */
static inline int pa_iq4_xs_scale(const block_iq4_xs *b, int ib) {
  uint16_t h;
  memcpy(&h, &b->scales_h, sizeof h);
  return ((b->scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | ((h >> (2 * ib)) & 3) << 4;
}

/* The signed scale (-32..31) of sub-block g (0..15) of a Q3_K block's 12
 * packed scale bytes: low nibbles in bytes 0..7 (scale g in byte g % 8, the
 * high nibble when g >= 8), the top two bits in bytes 8..11. */
static inline int pa_q3_K_scale(const uint8_t s[12], int g) {
  const int low = (s[g % 8] >> (4 * (g / 8))) & 0xF, high = (s[8 + g % 4] >> (2 * (g / 4))) & 3;
  return (low | high << 4) - 32;
}

/* Unpacks the 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K
 * block's 12 packed scale bytes. */
static inline void pa_get_scale_min_k4(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

/* Helpers of the reference kernels. */
/* An fp16 field read with memcpy: blocks inside a mapped file need not be
 * aligned for the compiler's idea of a uint16_t. */
static inline float pa_load_f16(const pa_f16 *p) {
  pa_f16 h;
  memcpy(&h, p, sizeof h);
  return pa_f16_to_f32(h);
}
/* Little-endian 16- and 32-bit fields at any alignment (the grid I-quants'
 * index and sign words). */
static inline uint16_t pa_load_u16(const void *p) {
  uint16_t v;
  memcpy(&v, p, 2);
  return v;
}
static inline uint32_t pa_load_u32(const void *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}
static inline void pa_store_f16(pa_f16 *p, float f) {
  pa_f16 h = pa_f32_to_f16(f);
  memcpy(p, &h, sizeof h);
}
/* Files whose float arithmetic must be bit-exact with other implementations
 * (the reference kernels) start with PA_NO_FP_CONTRACT, so that a build for
 * an FMA-capable target cannot fuse a*b+c into one rounding. */
#if defined(__clang__)
#define PA_NO_FP_CONTRACT _Pragma("STDC FP_CONTRACT OFF")
#elif defined(__GNUC__)
#define PA_NO_FP_CONTRACT _Pragma("GCC optimize(\"fp-contract=off\")")
#else
#define PA_NO_FP_CONTRACT
#endif

#endif
