/* x16_simd.h: what the AVX-512 kernels of the 16-row layout (x16_avx512.c,
 * x16_amx.c) share: a block record's fields, its weights unpacked to 8
 * vectors of bytes, and the layout's canonical float step (kernels/x16.h)
 * for one token's 16 block sums. Include after PA_NO_FP_CONTRACT. */
#ifndef PASADA_X16_SIMD_H
#define PASADA_X16_SIMD_H

#include <immintrin.h>
#include <string.h>

#include "kernels/x16.h"

#define X16_VNNI \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")))
#define X16_INLINE static inline __attribute__((always_inline)) X16_VNNI

enum { K_Q8_0, K_Q4_0, K_Q4_1, K_Q5_0 };

X16_INLINE size_t x16_rec(const int kind) {
  return kind == K_Q8_0 ? 544 : kind == K_Q4_0 ? 288 : kind == K_Q4_1 ? 320 : 352;
}

/* The 16 rows' d as floats, and (Q4_1) their m; dl again for the others. */
X16_INLINE void x16_scales(const int kind, const uint8_t *o, __m512 *dl, __m512 *ml) {
  const size_t d_at = kind == K_Q8_0 ? 512 : kind == K_Q5_0 ? 320 : 256;
  *dl = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(o + d_at)));
  *ml = kind == K_Q4_1 ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(o + 288))) : *dl;
}

/* The block's weights as 8 vectors of unsigned bytes, vector k holding
 * each row's elements 4k .. 4k + 3 (lane = row): Q8_0's as stored; Q4/Q5's
 * low nibbles of vector i (elements 4i + e) as vector i, the high ones
 * (16 + 4i + e) as vector 4 + i, Q5_0's fifth bits added by k-mask. */
X16_INLINE void x16_unpack(const int kind, const uint8_t *o, __m512i w[8]) {
  if (kind == K_Q8_0) {
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) w[i] = _mm512_loadu_si512(o + 64 * i);
    return;
  }
  const __m512i nib = _mm512_set1_epi8(0x0F);
#pragma GCC unroll 4
  for (int i = 0; i < 4; i++) {
    const __m512i q = _mm512_loadu_si512(o + 64 * i);
    w[i] = _mm512_and_si512(q, nib);
    w[4 + i] = _mm512_and_si512(_mm512_srli_epi16(q, 4), nib);
    if (kind == K_Q5_0) {
      uint64_t lo, hi;
      memcpy(&lo, o + 256 + 8 * i, 8);
      memcpy(&hi, o + 256 + 8 * (4 + i), 8);
      w[i] = _mm512_mask_add_epi8(w[i], lo, w[i], _mm512_set1_epi8(0x10));
      w[4 + i] = _mm512_mask_add_epi8(w[4 + i], hi, w[4 + i], _mm512_set1_epi8(0x10));
    }
  }
}

/* 4 activation bytes at p broadcast to every 32-bit lane. */
X16_INLINE __m512i x16_bcast4(const uint8_t *p) {
  int32_t v;
  memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

/* One token's 16 block sums: the 8 weight vectors against its 32 quants
 * at x (vector i takes the bytes 4 i .. 4 i + 3), in two chains of
 * dependent vpdpbusd. */
X16_INLINE __m512i x16_dot32(const __m512i w[8], const uint8_t *x) {
  __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int i = 0; i < 4; i++) {
    s0 = _mm512_dpbusd_epi32(s0, w[i], x16_bcast4(x + 4 * i));
    s1 = _mm512_dpbusd_epi32(s1, w[4 + i], x16_bcast4(x + 16 + 4 * i));
  }
  return _mm512_add_epi32(s0, s1);
}

/* The canonical float step: one token's 16 rows' block sums (sum) into
 * acc, with the token's packed block record x (d at 32, off or s at 36). */
X16_INLINE __m512 x16_step(const int kind, __m512i sum, __m512 dl, __m512 ml, const uint8_t *x,
                           __m512 acc) {
  float dx, s;
  int32_t off;
  memcpy(&dx, x + 32, 4);
  const __m512 dd = _mm512_mul_ps(dl, _mm512_set1_ps(dx));
  if (kind == K_Q4_1) {
    memcpy(&s, x + 36, 4);
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), dd, acc);
    return _mm512_fmadd_ps(ml, _mm512_set1_ps(s), acc);
  }
  memcpy(&off, x + 36, 4);
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(sum, _mm512_set1_epi32(off))), dd,
                         acc);
}

#endif
