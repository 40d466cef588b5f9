/* simd_masks.h: the lane masks of a vector's first n lanes, shared by the
 * SIMD op and attention kernels (ops_avx2.c, ops_avx512.c, attn_avx2.c,
 * attn_avx512.c, attn_q8.c) for their tails and ranges (n may be anything:
 * at most 0 gives no lane, at least the width every lane), the small
 * maximum reductions they share, and the AVX2 bit-to-byte mask of the
 * weight kernels. */
#ifndef PASADA_SIMD_MASKS_H
#define PASADA_SIMD_MASKS_H

#include <immintrin.h>
#include <stdint.h>

/* AVX2: lanes 0 .. n - 1 of 8 all ones (a mask for maskload / and). */
static inline __attribute__((always_inline, target("avx2"))) __m256i pa_lanes8(int64_t n) {
  const int k = n <= 0 ? 0 : n >= 8 ? 8 : (int)n;
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* AVX-512: bits 0 .. n - 1 of a 16-lane mask. */
static inline __mmask16 pa_lanes16(int64_t n) {
  return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1u);
}

/* AVX2: byte j = 0xFF where bit j of the 32-bit word at p is set (the fifth
 * bits of Q5 blocks; avx2.c, gemm_avx2.c, x16_avx2.c, x4_avx2.c). */
static inline __attribute__((always_inline, target("avx2"))) __m256i pa_bits_to_bytes(
    const uint8_t *p) {
  uint32_t bits;
  __builtin_memcpy(&bits, p, 4);
  __m256i v = _mm256_set1_epi32((int)bits);
  v = _mm256_shuffle_epi8(v, _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                               0x0101010101010101, 0x0000000000000000));
  const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
  return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}

/* AVX2: the largest of 8 lanes (halves, then pairs, then the last two). */
static inline __attribute__((always_inline, target("avx2"))) float pa_hmax8(__m256 m) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/* max |x[i]| over n values, NaN skipped (maxps(v, m) keeps m when v is
 * NaN), 0 for none; the tail read through a mask. AVX2, then AVX-512 F. */
static inline __attribute__((always_inline, target("avx2"))) float pa_absmax8(const float *x,
                                                                               int64_t n) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 8)
    m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_maskload_ps(x + i, pa_lanes8(n - i))), m);
  return pa_hmax8(m);
}

static inline __attribute__((always_inline, target("avx512f"))) float pa_absmax16(const float *x,
                                                                                  int64_t n) {
  __m512 m = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16)
    m = _mm512_max_ps(_mm512_abs_ps(_mm512_maskz_loadu_ps(pa_lanes16(n - i), x + i)), m);
  return _mm512_reduce_max_ps(m);
}

#endif
