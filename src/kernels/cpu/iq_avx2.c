/* iq_avx2.c: AVX2 dot products of the table-lookup 4-bit types IQ4_NL,
 * MXFP4 (32-element blocks against Q8_0) and IQ4_XS (256-element
 * super-blocks against Q8_K); the reference twins are in ref.c. Each
 * nibble becomes its int8 level with one pshufb from the 16-entry table,
 * then the levels (|v| <= 127) meet the activations (|y| <= 127) in a
 * signed dot: pmaddubsw of |v| against y carrying v's sign, pairs below
 * 2 * 127 * 127 < 32768, so nothing saturates and integer sums are exact.
 * Built for baseline x86-64; reached only through the AVX2 table. */
#if defined(__x86_64__)
#include "kernels/kernels.h"

PA_NO_FP_CONTRACT

#include <immintrin.h>
#include <stddef.h>
#include <string.h>

#define AVX2 __attribute__((target("avx2,fma,f16c")))

#include "kernels/cpu/avx2_util.h"

/* The 16 levels in both 128-bit lanes, for pshufb. */
static inline AVX2 __m256i lut256(const int8_t *levels) {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)levels));
}

/* The 32 levels of 16 packed bytes: low nibbles (elements 0..15), then high. */
static inline AVX2 __m256i levels32(const uint8_t *qs, __m256i lut) {
  __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
  v = _mm256_srlv_epi32(v, _mm256_set_epi32(4, 4, 4, 4, 0, 0, 0, 0));
  return _mm256_shuffle_epi8(lut, _mm256_and_si256(v, _mm256_set1_epi8(0x0F)));
}

/* 16 int16 pair sums of v . y (both signed, |v|, |y| <= 127). */
static inline AVX2 __m256i pairs_ss(__m256i v, const int8_t *y) {
  const __m256i s = _mm256_loadu_si256((const __m256i *)y);
  return _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(s, v));
}

static inline AVX2 __m256i block_sums(const uint8_t *qs, __m256i lut, const int8_t *y) {
  return _mm256_madd_epi16(pairs_ss(levels32(qs, lut), y), _mm256_set1_epi16(1));
}

/* IQ4_NL and MXFP4: 32-element blocks that differ only in the level table
 * and the scale (IQ4_NL's fp16 d, MXFP4's E8M0 exponent), one body. */
enum { B_IQ4_NL, B_MXFP4 };

static inline __attribute__((always_inline)) AVX2 float w_scale(const int kind, const uint8_t *blk) {
  return kind == B_MXFP4 ? pa_e8m0_to_f32_half(blk[offsetof(block_mxfp4, e)])
                         : f16_at(blk + offsetof(block_iq4_nl, d));
}

static inline __attribute__((always_inline)) AVX2 void dot_b32(const int kind, int64_t n, float *out,
                                                               const void *w, const void *x) {
  const size_t size = kind == B_MXFP4 ? sizeof(block_mxfp4) : sizeof(block_iq4_nl);
  const size_t qs = kind == B_MXFP4 ? offsetof(block_mxfp4, qs) : offsetof(block_iq4_nl, qs);
  const uint8_t *a = w;
  const block_q8_0 *b = x;
  const __m256i lut = lut256(kind == B_MXFP4 ? pa_kvalues_mxfp4 : pa_kvalues_iq4nl);
  const int64_t nb = n / 32;
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 2 <= nb; i += 2) {
    const uint8_t *a0 = a + (size_t)i * size, *a1 = a0 + size;
    const __m256i s0 = block_sums(a0 + qs, lut, b[i].qs);
    const __m256i s1 = block_sums(a1 + qs, lut, b[i + 1].qs);
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(w_scale(kind, a0) * f16_at(&b[i].d)),
                           _mm256_cvtepi32_ps(s0), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_set1_ps(w_scale(kind, a1) * f16_at(&b[i + 1].d)),
                           _mm256_cvtepi32_ps(s1), acc1);
  }
  for (; i < nb; i++) {
    const uint8_t *a0 = a + (size_t)i * size;
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(w_scale(kind, a0) * f16_at(&b[i].d)),
                           _mm256_cvtepi32_ps(block_sums(a0 + qs, lut, b[i].qs)), acc0);
  }
  *out = hsum_ps(_mm256_add_ps(acc0, acc1));
}

static AVX2 void dot_iq4_nl(int64_t n, float *out, const void *w, const void *x) {
  dot_b32(B_IQ4_NL, n, out, w, x);
}

static AVX2 void dot_mxfp4(int64_t n, float *out, const void *w, const void *x) {
  dot_b32(B_MXFP4, n, out, w, x);
}

/* IQ4_XS: per super-block one exact int32 sum, each sub-block's 16-bit
 * pair sums weighted by its signed scale in pmaddwd (|pair| * 32 fits). */
static AVX2 void dot_iq4_xs(int64_t n, float *out, const void *w, const void *x) {
  const block_iq4_xs *a = w;
  const block_q8_K *b = x;
  const __m256i lut = lut256(pa_kvalues_iq4nl);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK_K; i++) {
    __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
    for (int ib = 0; ib < QK_K / 32; ib += 2) {
      const __m256i p0 = pairs_ss(levels32(a[i].qs + 16 * ib, lut), b[i].qs + 32 * ib);
      const __m256i p1 = pairs_ss(levels32(a[i].qs + 16 * ib + 16, lut), b[i].qs + 32 * ib + 32);
      const int s0 = pa_iq4_xs_scale(&a[i], ib) - 32, s1 = pa_iq4_xs_scale(&a[i], ib + 1) - 32;
      acc0 = _mm256_add_epi32(acc0, _mm256_madd_epi16(p0, _mm256_set1_epi16((int16_t)s0)));
      acc1 = _mm256_add_epi32(acc1, _mm256_madd_epi16(p1, _mm256_set1_epi16((int16_t)s1)));
    }
    sum += b[i].d * f16_at(&a[i].d) * (float)hsum_epi32(_mm256_add_epi32(acc0, acc1));
  }
  *out = sum;
}

void pa_kernels_fill_iq_avx2(pa_cpu_kernels *k) {
  k->vec_dot[PA_TYPE_IQ4_NL] = dot_iq4_nl;
  k->vec_dot[PA_TYPE_IQ4_XS] = dot_iq4_xs;
  k->vec_dot[PA_TYPE_MXFP4] = dot_mxfp4;
}
#endif
