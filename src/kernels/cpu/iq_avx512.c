/* iq_avx512.c: AVX-512 VNNI dot products of IQ4_NL and MXFP4 (two
 * 32-element blocks per 512-bit step, against Q8_0) and IQ4_XS (two
 * sub-blocks per step, against Q8_K); the reference twins are in ref.c and
 * the AVX2 ones (which the plain AVX-512 table keeps) in iq_avx2.c. Levels
 * come from one vpshufb over the 16-entry table; vpdpbusd takes |level|
 * against the activation negated where the level is negative, so the int32
 * sums are exact. Built for baseline x86-64; reached only through the
 * avx512_vnni (and amx) tables. */
#if defined(__x86_64__)
#include "kernels/kernels.h"

PA_NO_FP_CONTRACT

#include <immintrin.h>
#include <stddef.h>
#include <string.h>

#define VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")))

static inline VNNI float f16_at(const void *p) {
  uint16_t h;
  memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

static inline VNNI __m512i lut512(const int8_t *levels) {
  return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)levels));
}

/* The levels of two blocks' 16 packed bytes each: 128-bit lanes q0 low
 * nibbles, q0 high, q1 low, q1 high (elements 0..31 of each block). */
static inline VNNI __m512i levels64(const uint8_t *q0, const uint8_t *q1, __m512i lut) {
  const __m256i v =
      _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)q0)),
                              _mm_loadu_si128((const __m128i *)q1), 1);
  __m512i w =
      _mm512_permutexvar_epi64(_mm512_set_epi64(3, 2, 3, 2, 1, 0, 1, 0), _mm512_castsi256_si512(v));
  w = _mm512_srlv_epi64(w, _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0));
  return _mm512_shuffle_epi8(lut, _mm512_and_si512(w, _mm512_set1_epi8(0x0F)));
}

static inline VNNI __m512i load2x256(const int8_t *y0, const int8_t *y1) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)y0)),
                            _mm256_loadu_si256((const __m256i *)y1), 1);
}

/* 16 int32 sums of 4 products v . y each (both signed, |v|, |y| <= 127). */
static inline VNNI __m512i sums_ss(__m512i v, __m512i y) {
  const __mmask64 neg = _mm512_movepi8_mask(v);
  const __m512i ys = _mm512_mask_sub_epi8(y, neg, _mm512_setzero_si512(), y);
  return _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(v), ys);
}

static inline VNNI __m512 two_scales(float d0, float d1) {
  return _mm512_insertf32x8(_mm512_set1_ps(d0), _mm256_set1_ps(d1), 1);
}

static inline VNNI float hsum_ps512(__m512 v) {
  return _mm512_reduce_add_ps(v);
}

/* 16 int32 sums of one block (the upper 8 lanes zero). */
static inline VNNI __m512i one_block(const uint8_t *qs, __m512i lut, const int8_t *y) {
  const __m512i v = levels64(qs, qs, lut);
  const __m512i ys = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)y));
  return _mm512_maskz_mov_epi32(0x00FF, sums_ss(v, ys));
}

/* IQ4_NL and MXFP4: 32-element blocks that differ only in the level table
 * and the scale (IQ4_NL's fp16 d, MXFP4's E8M0 exponent), one body. */
enum { B_IQ4_NL, B_MXFP4 };

static inline __attribute__((always_inline)) VNNI float w_scale(const int kind, const uint8_t *blk) {
  return kind == B_MXFP4 ? pa_e8m0_to_f32_half(blk[offsetof(block_mxfp4, e)])
                         : f16_at(blk + offsetof(block_iq4_nl, d));
}

static inline __attribute__((always_inline)) VNNI void dot_b32(const int kind, int64_t n, float *out,
                                                               const void *w, const void *x) {
  const size_t size = kind == B_MXFP4 ? sizeof(block_mxfp4) : sizeof(block_iq4_nl);
  const size_t qs = kind == B_MXFP4 ? offsetof(block_mxfp4, qs) : offsetof(block_iq4_nl, qs);
  const uint8_t *a = w;
  const block_q8_0 *b = x;
  const __m512i lut = lut512(kind == B_MXFP4 ? pa_kvalues_mxfp4 : pa_kvalues_iq4nl);
  const int64_t nb = n / 32;
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 4 <= nb; i += 4) {
    const uint8_t *a0 = a + (size_t)i * size, *a1 = a0 + size, *a2 = a1 + size, *a3 = a2 + size;
    const __m512i s0 = sums_ss(levels64(a0 + qs, a1 + qs, lut), load2x256(b[i].qs, b[i + 1].qs));
    const __m512i s1 =
        sums_ss(levels64(a2 + qs, a3 + qs, lut), load2x256(b[i + 2].qs, b[i + 3].qs));
    acc0 = _mm512_fmadd_ps(two_scales(w_scale(kind, a0) * f16_at(&b[i].d),
                                      w_scale(kind, a1) * f16_at(&b[i + 1].d)),
                           _mm512_cvtepi32_ps(s0), acc0);
    acc1 = _mm512_fmadd_ps(two_scales(w_scale(kind, a2) * f16_at(&b[i + 2].d),
                                      w_scale(kind, a3) * f16_at(&b[i + 3].d)),
                           _mm512_cvtepi32_ps(s1), acc1);
  }
  for (; i < nb; i++) {
    const uint8_t *a0 = a + (size_t)i * size;
    acc0 = _mm512_fmadd_ps(_mm512_set1_ps(w_scale(kind, a0) * f16_at(&b[i].d)),
                           _mm512_cvtepi32_ps(one_block(a0 + qs, lut, b[i].qs)), acc0);
  }
  *out = hsum_ps512(_mm512_add_ps(acc0, acc1));
}

static VNNI void dot_iq4_nl(int64_t n, float *out, const void *w, const void *x) {
  dot_b32(B_IQ4_NL, n, out, w, x);
}

static VNNI void dot_mxfp4(int64_t n, float *out, const void *w, const void *x) {
  dot_b32(B_MXFP4, n, out, w, x);
}

/* IQ4_XS: sub-blocks 2k and 2k + 1 per step; their int32 sums times the
 * signed 6-bit scales (vpmulld), one exact int32 total per super-block. */
static VNNI void dot_iq4_xs(int64_t n, float *out, const void *w, const void *x) {
  const block_iq4_xs *a = w;
  const block_q8_K *b = x;
  const __m512i lut = lut512(pa_kvalues_iq4nl);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK_K; i++) {
    __m512i acc = _mm512_setzero_si512();
    for (int ib = 0; ib < QK_K / 32; ib += 2) {
      const uint8_t *q = a[i].qs + 16 * ib;
      const __m512i s =
          sums_ss(levels64(q, q + 16, lut), load2x256(b[i].qs + 32 * ib, b[i].qs + 32 * ib + 32));
      const __m512i sc =
          _mm512_inserti64x4(_mm512_set1_epi32(pa_iq4_xs_scale(&a[i], ib) - 32),
                             _mm256_set1_epi32(pa_iq4_xs_scale(&a[i], ib + 1) - 32), 1);
      acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(s, sc));
    }
    sum += b[i].d * f16_at(&a[i].d) * (float)_mm512_reduce_add_epi32(acc);
  }
  *out = sum;
}

void pa_kernels_fill_iq_avx512_vnni(pa_cpu_kernels *k) {
  k->vec_dot[PA_TYPE_IQ4_NL] = dot_iq4_nl;
  k->vec_dot[PA_TYPE_IQ4_XS] = dot_iq4_xs;
  k->vec_dot[PA_TYPE_MXFP4] = dot_mxfp4;
}
#endif
