/* simd_masks.h: the lane masks of a vector's first n lanes, shared by the
 * SIMD op and attention kernels (ops_avx2.c, ops_avx512.c, attn_avx2.c,
 * attn_avx512.c) for their tails and ranges. n may be anything: at most 0
 * gives no lane, at least the width every lane. */
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

#endif
