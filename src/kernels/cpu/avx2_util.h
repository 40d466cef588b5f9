/* avx2_util.h: the AVX2 helpers every AVX2 kernel file shares (avx2.c,
 * gemm_avx2.c, iq_avx2.c, x16_avx2.c, x16_iq_avx2.c): horizontal sums, the
 * fp16 scalar load and the x16 kernels' store of their sums, one
 * instruction sequence each, so kernels that must agree bit for bit (the
 * GEMM kernels repeat the dot kernels' arithmetic) reduce alike. Include
 * after <immintrin.h>, in a file built with PA_NO_FP_CONTRACT. */
#ifndef PASADA_AVX2_UTIL_H
#define PASADA_AVX2_UTIL_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define PA_AVX2_FN static inline __attribute__((always_inline, target("avx2,fma,f16c")))

/* The sum of v's 8 floats: halves added, then pairs, then the last two. */
PA_AVX2_FN float hsum_ps(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/* The sum of v's 8 int32 lanes (wrapping). */
PA_AVX2_FN int hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

/* The fp16 value at p (any alignment) as a float. */
PA_AVX2_FN float f16_at(const void *p) {
  uint16_t h;
  memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

/* T tokens' 16 row sums, token t's at acc + 16t (32-byte aligned), into
 * y + t * ldy (an x16 kernel's output, kernels/x16.h). */
PA_AVX2_FN void store_rows16(float *y, int64_t ldy, const float *acc, const int T) {
#pragma GCC unroll 4
  for (int t = 0; t < T; t++) {
    _mm256_storeu_ps(y + t * ldy, _mm256_load_ps(acc + 16 * t));
    _mm256_storeu_ps(y + t * ldy + 8, _mm256_load_ps(acc + 16 * t + 8));
  }
}

#endif
