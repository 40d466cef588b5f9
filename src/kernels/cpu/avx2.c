/* avx2.c: the AVX2 + FMA + F16C kernel table. The file builds for baseline
 * x86-64: every function carries its target attribute and is only reached
 * through the table, which dispatch.c hands out when pa_cpu() has AVX2.
 *
 * Integer dots use pmaddubsw (unsigned x signed bytes, pairs summed into
 * saturating 16-bit lanes) then pmaddwd; the operands are kept in ranges
 * where a pair cannot reach 32768: weights as unsigned values below 64 (the
 * offset of a signed format is taken off through the activation sums), or
 * |w| <= 128 against activations in [-127, 127], which the quantizers
 * guarantee. Each block's integer sum is scaled once, in float. */
#if defined(__x86_64__) /* x86 SIMD; other targets have the plain C tables */
#include "kernels/cpu/simd_masks.h"
#include "kernels/kernels.h"

/* No floating-point contraction: the GEMM kernels (gemm_avx2.c) repeat
 * these kernels' arithmetic bit for bit, which needs every multiply and add
 * to be the one written, in both files. */
PA_NO_FP_CONTRACT

#include <immintrin.h>
#include <string.h>

#define AVX2 __attribute__((target("avx2,fma,f16c")))

/* ---- helpers ---- */

#include "kernels/cpu/avx2_util.h"

/* Two adjacent fp16 values (d and m of a weight block, d and s of a Q8_1
 * block) as floats in lanes 0 and 1. */
static inline AVX2 __m128 f16x2_at(const void *p) {
  int32_t v;
  memcpy(&v, p, 4);
  return _mm_cvtph_ps(_mm_cvtsi32_si128(v));
}

static inline AVX2 __m256i load256(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* 8 int32 sums of 4 products each: u unsigned, s signed bytes. */
static inline AVX2 __m256i dot_us(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

/* Both signed: |a| against s with a's sign moved onto s. */
static inline AVX2 __m256i dot_ss(__m256i a, __m256i s) {
  return dot_us(_mm256_sign_epi8(a, a), _mm256_sign_epi8(s, a));
}

/* The 32 nibbles of 16 bytes: low nibbles first (elements 0..15), then high. */
static inline AVX2 __m256i nibbles(const uint8_t *qs) {
  __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
  v = _mm256_srlv_epi32(v, _mm256_set_epi32(4, 4, 4, 4, 0, 0, 0, 0));
  return _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
}

/* ---- float weights ---- */

static AVX2 void dot_f32(int64_t n, float *out, const void *w, const void *x) {
  const float *a = w, *b = x;
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), s2);
    s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), s3);
  }
  for (; i + 8 <= n; i += 8)
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
  float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
  for (; i < n; i++) sum += a[i] * b[i];
  *out = sum;
}

static inline AVX2 __m256 load_f16x8(const uint8_t *p) {
  return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

static inline AVX2 __m256 load_bf16x8(const uint8_t *p) {
  __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

static AVX2 void dot_f16(int64_t n, float *out, const void *w, const void *x) {
  const uint8_t *a = w;
  const float *b = x;
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm256_fmadd_ps(load_f16x8(a + 2 * i), _mm256_loadu_ps(b + i), s0);
    s1 = _mm256_fmadd_ps(load_f16x8(a + 2 * i + 16), _mm256_loadu_ps(b + i + 8), s1);
    s2 = _mm256_fmadd_ps(load_f16x8(a + 2 * i + 32), _mm256_loadu_ps(b + i + 16), s2);
    s3 = _mm256_fmadd_ps(load_f16x8(a + 2 * i + 48), _mm256_loadu_ps(b + i + 24), s3);
  }
  for (; i + 8 <= n; i += 8)
    s0 = _mm256_fmadd_ps(load_f16x8(a + 2 * i), _mm256_loadu_ps(b + i), s0);
  float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
  for (; i < n; i++) sum += f16_at(a + 2 * i) * b[i];
  *out = sum;
}

static AVX2 void dot_bf16(int64_t n, float *out, const void *w, const void *x) {
  const uint8_t *a = w;
  const float *b = x;
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm256_fmadd_ps(load_bf16x8(a + 2 * i), _mm256_loadu_ps(b + i), s0);
    s1 = _mm256_fmadd_ps(load_bf16x8(a + 2 * i + 16), _mm256_loadu_ps(b + i + 8), s1);
    s2 = _mm256_fmadd_ps(load_bf16x8(a + 2 * i + 32), _mm256_loadu_ps(b + i + 16), s2);
    s3 = _mm256_fmadd_ps(load_bf16x8(a + 2 * i + 48), _mm256_loadu_ps(b + i + 24), s3);
  }
  for (; i + 8 <= n; i += 8)
    s0 = _mm256_fmadd_ps(load_bf16x8(a + 2 * i), _mm256_loadu_ps(b + i), s0);
  float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
  for (; i < n; i++) {
    uint16_t h;
    memcpy(&h, a + 2 * i, 2);
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    sum += f * b[i];
  }
  *out = sum;
}

/* ---- 32-element blocks ----
 * Each type has a block function giving the block's 8 int32 partial sums
 * and its scale; the loop takes 4 blocks per step so that no accumulator
 * chain costs more than one add per 4 blocks (an fma or add per block on
 * one register would bound the loop at its 4-cycle latency per block). */

static inline AVX2 __m256i q4_0_sums(const block_q4_0 *a, const block_q8_0 *b) {
  const __m256i q = nibbles(a->qs), y = load256(b->qs);
  /* sum (q - 8) y = sum q y - 8 sum y, both as 16-bit pair sums */
  const __m256i p =
      _mm256_sub_epi16(_mm256_maddubs_epi16(q, y), _mm256_maddubs_epi16(_mm256_set1_epi8(8), y));
  return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

static inline AVX2 __m256i q4_1_sums(const block_q4_1 *a, const block_q8_1 *b) {
  return dot_us(nibbles(a->qs), load256(b->qs));
}

static inline AVX2 __m256i q5_0_sums(const block_q5_0 *a, const block_q8_0 *b) {
  /* q - 16 as a signed byte: the nibble, with 0xF0 or-ed in where the fifth
   * bit is clear */
  const __m256i hi = _mm256_andnot_si256(pa_bits_to_bytes(a->qh), _mm256_set1_epi8((char)0xF0));
  return dot_ss(_mm256_or_si256(nibbles(a->qs), hi), load256(b->qs));
}

static inline AVX2 __m256i q5_1_sums(const block_q5_1 *a, const block_q8_1 *b) {
  const __m256i hi = _mm256_and_si256(pa_bits_to_bytes(a->qh), _mm256_set1_epi8(0x10));
  return dot_us(_mm256_or_si256(nibbles(a->qs), hi), load256(b->qs));
}

static inline AVX2 __m256i q8_0_sums(const block_q8_0 *a, const block_q8_0 *b) {
  return dot_ss(load256(a->qs), load256(b->qs));
}

static inline AVX2 __m256 scaled(const void *dw, const void *dx, __m256i sums) {
  return _mm256_mul_ps(_mm256_set1_ps(f16_at(dw) * f16_at(dx)), _mm256_cvtepi32_ps(sums));
}

static inline AVX2 __m256 scaled_fma(const void *dw, const void *dx, __m256i sums, __m256 acc) {
  return _mm256_fmadd_ps(_mm256_set1_ps(f16_at(dw) * f16_at(dx)), _mm256_cvtepi32_ps(sums), acc);
}

static AVX2 void dot_q4_0(int64_t n, float *out, const void *w, const void *x) {
  const block_q4_0 *a = w;
  const block_q8_0 *b = x;
  const int64_t nb = n / QK4_0;
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 4 <= nb; i += 4) {
    __m256 s0 = scaled(&a[i].d, &b[i].d, q4_0_sums(&a[i], &b[i]));
    __m256 s1 = scaled(&a[i + 1].d, &b[i + 1].d, q4_0_sums(&a[i + 1], &b[i + 1]));
    s0 = scaled_fma(&a[i + 2].d, &b[i + 2].d, q4_0_sums(&a[i + 2], &b[i + 2]), s0);
    s1 = scaled_fma(&a[i + 3].d, &b[i + 3].d, q4_0_sums(&a[i + 3], &b[i + 3]), s1);
    acc0 = _mm256_add_ps(acc0, s0);
    acc1 = _mm256_add_ps(acc1, s1);
  }
  for (; i < nb; i++) acc0 = scaled_fma(&a[i].d, &b[i].d, q4_0_sums(&a[i], &b[i]), acc0);
  *out = hsum_ps(_mm256_add_ps(acc0, acc1));
}

static AVX2 void dot_q5_0(int64_t n, float *out, const void *w, const void *x) {
  const block_q5_0 *a = w;
  const block_q8_0 *b = x;
  const int64_t nb = n / QK5_0;
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 4 <= nb; i += 4) {
    __m256 s0 = scaled(&a[i].d, &b[i].d, q5_0_sums(&a[i], &b[i]));
    __m256 s1 = scaled(&a[i + 1].d, &b[i + 1].d, q5_0_sums(&a[i + 1], &b[i + 1]));
    s0 = scaled_fma(&a[i + 2].d, &b[i + 2].d, q5_0_sums(&a[i + 2], &b[i + 2]), s0);
    s1 = scaled_fma(&a[i + 3].d, &b[i + 3].d, q5_0_sums(&a[i + 3], &b[i + 3]), s1);
    acc0 = _mm256_add_ps(acc0, s0);
    acc1 = _mm256_add_ps(acc1, s1);
  }
  for (; i < nb; i++) acc0 = scaled_fma(&a[i].d, &b[i].d, q5_0_sums(&a[i], &b[i]), acc0);
  *out = hsum_ps(_mm256_add_ps(acc0, acc1));
}

static AVX2 void dot_q8_0(int64_t n, float *out, const void *w, const void *x) {
  const block_q8_0 *a = w;
  const block_q8_0 *b = x;
  const int64_t nb = n / QK8_0;
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 4 <= nb; i += 4) {
    __m256 s0 = scaled(&a[i].d, &b[i].d, q8_0_sums(&a[i], &b[i]));
    __m256 s1 = scaled(&a[i + 1].d, &b[i + 1].d, q8_0_sums(&a[i + 1], &b[i + 1]));
    s0 = scaled_fma(&a[i + 2].d, &b[i + 2].d, q8_0_sums(&a[i + 2], &b[i + 2]), s0);
    s1 = scaled_fma(&a[i + 3].d, &b[i + 3].d, q8_0_sums(&a[i + 3], &b[i + 3]), s1);
    acc0 = _mm256_add_ps(acc0, s0);
    acc1 = _mm256_add_ps(acc1, s1);
  }
  for (; i < nb; i++) acc0 = scaled_fma(&a[i].d, &b[i].d, q8_0_sums(&a[i], &b[i]), acc0);
  *out = hsum_ps(_mm256_add_ps(acc0, acc1));
}

/* Q4_1/Q5_1 against Q8_1: (d, m) and (d, s) are adjacent fp16 pairs, so
 * one conversion each gives [d*d, m*s]; the m*s lanes add up separately. */
static inline AVX2 __m128 dm_pair(const void *w, const void *x) {
  return _mm_mul_ps(f16x2_at(w), f16x2_at(x));
}

static AVX2 void dot_q4_1(int64_t n, float *out, const void *w, const void *x) {
  const block_q4_1 *a = w;
  const block_q8_1 *b = x;
  const int64_t nb = n / QK4_1;
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  __m128 acc_m = _mm_setzero_ps(); /* lane 1: sum of m * s */
  int64_t i = 0;
  for (; i + 4 <= nb; i += 4) {
    const __m128 dm0 = dm_pair(&a[i].d, &b[i].d), dm1 = dm_pair(&a[i + 1].d, &b[i + 1].d);
    const __m128 dm2 = dm_pair(&a[i + 2].d, &b[i + 2].d), dm3 = dm_pair(&a[i + 3].d, &b[i + 3].d);
    __m256 s0 =
        _mm256_mul_ps(_mm256_broadcastss_ps(dm0), _mm256_cvtepi32_ps(q4_1_sums(&a[i], &b[i])));
    __m256 s1 = _mm256_mul_ps(_mm256_broadcastss_ps(dm1),
                              _mm256_cvtepi32_ps(q4_1_sums(&a[i + 1], &b[i + 1])));
    s0 = _mm256_fmadd_ps(_mm256_broadcastss_ps(dm2),
                         _mm256_cvtepi32_ps(q4_1_sums(&a[i + 2], &b[i + 2])), s0);
    s1 = _mm256_fmadd_ps(_mm256_broadcastss_ps(dm3),
                         _mm256_cvtepi32_ps(q4_1_sums(&a[i + 3], &b[i + 3])), s1);
    acc0 = _mm256_add_ps(acc0, s0);
    acc1 = _mm256_add_ps(acc1, s1);
    acc_m = _mm_add_ps(acc_m, _mm_add_ps(_mm_add_ps(dm0, dm1), _mm_add_ps(dm2, dm3)));
  }
  for (; i < nb; i++) {
    const __m128 dm = dm_pair(&a[i].d, &b[i].d);
    acc0 = _mm256_fmadd_ps(_mm256_broadcastss_ps(dm), _mm256_cvtepi32_ps(q4_1_sums(&a[i], &b[i])),
                           acc0);
    acc_m = _mm_add_ps(acc_m, dm);
  }
  *out = hsum_ps(_mm256_add_ps(acc0, acc1)) + _mm_cvtss_f32(_mm_movehdup_ps(acc_m));
}

static AVX2 void dot_q5_1(int64_t n, float *out, const void *w, const void *x) {
  const block_q5_1 *a = w;
  const block_q8_1 *b = x;
  const int64_t nb = n / QK5_1;
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  __m128 acc_m = _mm_setzero_ps();
  int64_t i = 0;
  for (; i + 4 <= nb; i += 4) {
    const __m128 dm0 = dm_pair(&a[i].d, &b[i].d), dm1 = dm_pair(&a[i + 1].d, &b[i + 1].d);
    const __m128 dm2 = dm_pair(&a[i + 2].d, &b[i + 2].d), dm3 = dm_pair(&a[i + 3].d, &b[i + 3].d);
    __m256 s0 =
        _mm256_mul_ps(_mm256_broadcastss_ps(dm0), _mm256_cvtepi32_ps(q5_1_sums(&a[i], &b[i])));
    __m256 s1 = _mm256_mul_ps(_mm256_broadcastss_ps(dm1),
                              _mm256_cvtepi32_ps(q5_1_sums(&a[i + 1], &b[i + 1])));
    s0 = _mm256_fmadd_ps(_mm256_broadcastss_ps(dm2),
                         _mm256_cvtepi32_ps(q5_1_sums(&a[i + 2], &b[i + 2])), s0);
    s1 = _mm256_fmadd_ps(_mm256_broadcastss_ps(dm3),
                         _mm256_cvtepi32_ps(q5_1_sums(&a[i + 3], &b[i + 3])), s1);
    acc0 = _mm256_add_ps(acc0, s0);
    acc1 = _mm256_add_ps(acc1, s1);
    acc_m = _mm_add_ps(acc_m, _mm_add_ps(_mm_add_ps(dm0, dm1), _mm_add_ps(dm2, dm3)));
  }
  for (; i < nb; i++) {
    const __m128 dm = dm_pair(&a[i].d, &b[i].d);
    acc0 = _mm256_fmadd_ps(_mm256_broadcastss_ps(dm), _mm256_cvtepi32_ps(q5_1_sums(&a[i], &b[i])),
                           acc0);
    acc_m = _mm_add_ps(acc_m, dm);
  }
  *out = hsum_ps(_mm256_add_ps(acc0, acc1)) + _mm_cvtss_f32(_mm_movehdup_ps(acc_m));
}

/* ---- K-quants against Q8_K ---- */

/* Word g of a 256-bit vector whose 128-bit lanes both hold 8 scales as
 * 16-bit values, spread so that lane 0 has scale g and lane 1 scale g + 1
 * (g even): the scales of two groups of 16 inside 32 elements. */
static inline AVX2 __m256i pair_scales(__m256i both, int g) {
  const char lo = (char)(2 * g), hi = (char)(2 * g + 2);
  const __m256i idx =
      _mm256_setr_epi8(lo, lo + 1, lo, lo + 1, lo, lo + 1, lo, lo + 1, lo, lo + 1, lo, lo + 1, lo,
                       lo + 1, lo, lo + 1, hi, hi + 1, hi, hi + 1, hi, hi + 1, hi, hi + 1, hi,
                       hi + 1, hi, hi + 1, hi, hi + 1, hi, hi + 1);
  return _mm256_shuffle_epi8(both, idx);
}

/* sum over the 16 groups of scale[g] * bsums[g]; scales as 16 int16. */
static inline AVX2 int scaled_bsums(const int16_t *bsums, __m256i scales16) {
  return hsum_epi32(_mm256_madd_epi16(load256(bsums), scales16));
}

static AVX2 void dot_q2_K(int64_t n, float *out, const void *w, const void *x) {
  const block_q2_K *a = w;
  const block_q8_K *b = x;
  __m256 acc = _mm256_setzero_ps();
  float acc_min = 0.0f;
  for (int64_t i = 0; i < n / QK_K; i++) {
    const __m128i sc8 = _mm_loadu_si128((const __m128i *)a[i].scales);
    const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(sc8, _mm_set1_epi8(0x0F)));
    const __m256i m16 =
        _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc8, 4), _mm_set1_epi8(0x0F)));
    const int msum = scaled_bsums(b[i].bsums, m16);
    __m256i sumi = _mm256_setzero_si256();
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
      const __m256i both = h ? _mm256_permute2x128_si256(sc16, sc16, 0x11)
                             : _mm256_permute2x128_si256(sc16, sc16, 0x00);
      const __m256i qs = load256(a[i].qs + 32 * h);
#pragma GCC unroll 4
      for (int k = 0; k < 4; k++) {
        const __m256i q = _mm256_and_si256(_mm256_srli_epi16(qs, 2 * k), _mm256_set1_epi8(3));
        const __m256i p = _mm256_maddubs_epi16(q, load256(b[i].qs + 128 * h + 32 * k));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, pair_scales(both, 2 * k)));
      }
    }
    const float dx = b[i].d;
    acc = _mm256_fmadd_ps(_mm256_set1_ps(dx * f16_at(&a[i].d)), _mm256_cvtepi32_ps(sumi), acc);
    acc_min += dx * f16_at(&a[i].dmin) * (float)msum;
  }
  *out = hsum_ps(acc) - acc_min;
}

/* The 16 Q3_K scales (minus 32) as int16, unpacked from 12 bytes. */
static inline AVX2 __m256i q3_K_scales(const uint8_t s[12]) {
  uint32_t u[3];
  memcpy(u, s, 12);
  uint32_t v[4];
  v[0] = (u[0] & 0x0F0F0F0F) | ((u[2] << 4) & 0x30303030);
  v[1] = (u[1] & 0x0F0F0F0F) | ((u[2] << 2) & 0x30303030);
  v[2] = ((u[0] >> 4) & 0x0F0F0F0F) | (u[2] & 0x30303030);
  v[3] = ((u[1] >> 4) & 0x0F0F0F0F) | ((u[2] >> 2) & 0x30303030);
  const __m128i b = _mm_loadu_si128((const __m128i *)v);
  return _mm256_sub_epi16(_mm256_cvtepu8_epi16(b), _mm256_set1_epi16(32));
}

static AVX2 void dot_q3_K(int64_t n, float *out, const void *w, const void *x) {
  const block_q3_K *a = w;
  const block_q8_K *b = x;
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / QK_K; i++) {
    const __m256i sc16 = q3_K_scales(a[i].scales);
    /* values are (q + 4) - 4 with q + 4 in 0..7: the 4 comes off via bsums */
    const int corr = 4 * scaled_bsums(b[i].bsums, sc16);
    const __m256i hm = load256(a[i].hmask);
    __m256i sumi = _mm256_setzero_si256();
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
      const __m256i both = h ? _mm256_permute2x128_si256(sc16, sc16, 0x11)
                             : _mm256_permute2x128_si256(sc16, sc16, 0x00);
      const __m256i qs = load256(a[i].qs + 32 * h);
#pragma GCC unroll 4
      for (int k = 0; k < 4; k++) {
        const int bit = 4 * h + k;
        __m256i q = _mm256_and_si256(_mm256_srli_epi16(qs, 2 * k), _mm256_set1_epi8(3));
        const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(hm, bit), _mm256_set1_epi8(1));
        q = _mm256_or_si256(q, _mm256_slli_epi16(hb, 2));
        const __m256i p = _mm256_maddubs_epi16(q, load256(b[i].qs + 128 * h + 32 * k));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, pair_scales(both, 2 * k)));
      }
    }
    const float dx = b[i].d * f16_at(&a[i].d);
    const __m256i total = _mm256_sub_epi32(sumi, _mm256_setr_epi32(corr, 0, 0, 0, 0, 0, 0, 0));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(dx), _mm256_cvtepi32_ps(total), acc);
  }
  *out = hsum_ps(acc);
}

/* Q4_K/Q5_K scales and mins of 8 sub-blocks, as 8 bytes each. */
static inline void k4_scales(const uint8_t s[12], uint32_t sc[2], uint32_t m[2]) {
  uint32_t u[3];
  memcpy(u, s, 12);
  sc[0] = u[0] & 0x3F3F3F3F;
  m[0] = u[1] & 0x3F3F3F3F;
  sc[1] = (u[2] & 0x0F0F0F0F) | ((u[0] >> 6) & 0x03030303) << 4;
  m[1] = ((u[2] >> 4) & 0x0F0F0F0F) | ((u[1] >> 6) & 0x03030303) << 4;
}

/* One Q4_K/Q5_K super-block: returns the int32 lanes of sum sc_j * q * x,
 * and *msum = sum m_j * (bsums of sub-block j). qh is NULL for Q4_K. */
static inline AVX2 __m256i k4_superblock(const uint8_t scales[12], const uint8_t *qs,
                                         const uint8_t *qh, const block_q8_K *b, int *msum) {
  uint32_t sc[2], m[2];
  k4_scales(scales, sc, m);
  const __m128i sc8 = _mm_set_epi32(0, 0, (int)sc[1], (int)sc[0]);
  const __m128i m8 = _mm_set_epi32(0, 0, (int)m[1], (int)m[0]);
  /* bsums of sub-block j = bsums[2j] + bsums[2j+1] */
  const __m128i bs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)b->bsums),
                                    _mm_loadu_si128((const __m128i *)(b->bsums + 8)));
  __m128i ms = _mm_madd_epi16(bs, _mm_cvtepu8_epi16(m8));
  ms = _mm_add_epi32(ms, _mm_shuffle_epi32(ms, 0x4E));
  ms = _mm_add_epi32(ms, _mm_shuffle_epi32(ms, 0xB1));
  *msum = _mm_cvtsi128_si32(ms);

  /* scale j as int16 in every lane: broadcast word j of the 8 scales */
  const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sc8));
  const __m256i mask4 = _mm256_set1_epi8(0x0F);
  __m256i qhv = qh ? load256(qh) : _mm256_setzero_si256();
  __m256i sumi = _mm256_setzero_si256();
#pragma GCC unroll 4
  for (int c = 0; c < 4; c++) {
    const __m256i q = load256(qs + 32 * c);
    __m256i lo = _mm256_and_si256(q, mask4);
    __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), mask4);
    if (qh) {
      lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(qhv, 4), _mm256_set1_epi8(0x10)));
      hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(qhv, 3), _mm256_set1_epi8(0x10)));
      qhv = _mm256_srli_epi16(qhv, 2);
    }
    const __m256i s_lo =
        _mm256_shuffle_epi8(sc16, _mm256_set1_epi16((short)(0x0100 + 0x0202 * 2 * c)));
    const __m256i s_hi =
        _mm256_shuffle_epi8(sc16, _mm256_set1_epi16((short)(0x0100 + 0x0202 * (2 * c + 1))));
    const __m256i p_lo = _mm256_maddubs_epi16(lo, load256(b->qs + 64 * c));
    const __m256i p_hi = _mm256_maddubs_epi16(hi, load256(b->qs + 64 * c + 32));
    sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p_lo, s_lo));
    sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p_hi, s_hi));
  }
  return sumi;
}

/* Q4_K/Q5_K in the canonical K-quant order (gemm_avx512.c's header): per
 * super-block the exact isum and imin, then two fmas (lanes 0 and 1). */
static inline AVX2 __m128 k4_step(__m128 acc, __m256i sumi, int msum, const void *dm, float dx) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(sumi), _mm256_extracti128_si256(sumi, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  const __m128i v = _mm_unpacklo_epi32(s, _mm_cvtsi32_si128(msum)); /* isum, imin */
  int32_t h;
  memcpy(&h, dm, 4); /* d, dmin */
  const __m128 dd = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128(h)), _mm_set1_ps(dx));
  return _mm_fmadd_ps(_mm_cvtepi32_ps(v), dd, acc);
}

static AVX2 void dot_q4_K(int64_t n, float *out, const void *w, const void *x) {
  const block_q4_K *a = w;
  const block_q8_K *b = x;
  __m128 acc = _mm_setzero_ps();
  for (int64_t i = 0; i < n / QK_K; i++) {
    int msum;
    const __m256i sumi = k4_superblock(a[i].scales, a[i].qs, NULL, &b[i], &msum);
    acc = k4_step(acc, sumi, msum, &a[i].d, b[i].d);
  }
  *out = _mm_cvtss_f32(acc) - _mm_cvtss_f32(_mm_movehdup_ps(acc));
}

static AVX2 void dot_q5_K(int64_t n, float *out, const void *w, const void *x) {
  const block_q5_K *a = w;
  const block_q8_K *b = x;
  __m128 acc = _mm_setzero_ps();
  for (int64_t i = 0; i < n / QK_K; i++) {
    int msum;
    const __m256i sumi = k4_superblock(a[i].scales, a[i].qs, a[i].qh, &b[i], &msum);
    acc = k4_step(acc, sumi, msum, &a[i].d, b[i].d);
  }
  *out = _mm_cvtss_f32(acc) - _mm_cvtss_f32(_mm_movehdup_ps(acc));
}

static AVX2 void dot_q6_K(int64_t n, float *out, const void *w, const void *x) {
  const block_q6_K *a = w;
  const block_q8_K *b = x;
  const __m256i mask4 = _mm256_set1_epi8(0x0F), mask2 = _mm256_set1_epi8(0x30);
  __m128 acc = _mm_setzero_ps();
  for (int64_t i = 0; i < n / QK_K; i++) {
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)a[i].scales));
    /* values are q - 32 with q in 0..63: the 32 comes off via bsums */
    const int corr = 32 * scaled_bsums(b[i].bsums, sc16);
    __m256i sumi = _mm256_setzero_si256();
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
      const __m256i both = h ? _mm256_permute2x128_si256(sc16, sc16, 0x11)
                             : _mm256_permute2x128_si256(sc16, sc16, 0x00);
      const __m256i l0 = load256(a[i].ql + 64 * h), l1 = load256(a[i].ql + 64 * h + 32);
      const __m256i qh = load256(a[i].qh + 32 * h);
      const __m256i q[4] = {
          _mm256_or_si256(_mm256_and_si256(l0, mask4),
                          _mm256_and_si256(_mm256_slli_epi16(qh, 4), mask2)),
          _mm256_or_si256(_mm256_and_si256(l1, mask4),
                          _mm256_and_si256(_mm256_slli_epi16(qh, 2), mask2)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), mask4),
                          _mm256_and_si256(qh, mask2)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), mask4),
                          _mm256_and_si256(_mm256_srli_epi16(qh, 2), mask2)),
      };
#pragma GCC unroll 4
      for (int k = 0; k < 4; k++) {
        const __m256i p = _mm256_maddubs_epi16(q[k], load256(b[i].qs + 128 * h + 32 * k));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, pair_scales(both, 2 * k)));
      }
    }
    /* canonical K-quant order (gemm_avx512.c's header) */
    const int isum = hsum_epi32(sumi) - corr;
    acc = _mm_fmadd_ss(_mm_cvtepi32_ps(_mm_cvtsi32_si128(isum)),
                       _mm_set_ss(f16_at(&a[i].d) * b[i].d), acc);
  }
  *out = _mm_cvtss_f32(acc);
}

/* ---- activation quantizers: same arithmetic as ref.c (x * (1/d) rounded
 * to nearest even by cvtps2dq), so the bytes are identical ---- */

static inline AVX2 float max_abs(const float *x, int n) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_setzero_ps();
  for (int l = 0; l < n; l += 8)
    m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + l)));
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/* Quantizes 32 floats with multiplier id into q; returns the 8 partial sums. */
static inline AVX2 __m256i quantize32(const float *x, float id, int8_t *q) {
  const __m256 m = _mm256_set1_ps(id);
  const __m256i v0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x), m));
  const __m256i v1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8), m));
  const __m256i v2 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16), m));
  const __m256i v3 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 24), m));
  /* packs interleave the 128-bit lanes; one dword permute restores order */
  __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(v0, v1), _mm256_packs_epi32(v2, v3));
  p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256((__m256i *)q, p);
  return _mm256_add_epi32(_mm256_add_epi32(v0, v1), _mm256_add_epi32(v2, v3));
}

static inline AVX2 void f16_put(void *p, float f) {
  uint16_t h = _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
  memcpy(p, &h, 2);
}

static AVX2 void quantize_q8_0(const float *x, void *vy, int64_t n) {
  block_q8_0 *y = vy;
  for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) {
    const float d = max_abs(x, 32) / 127.0f;
    quantize32(x, d != 0.0f ? 1.0f / d : 0.0f, y[i].qs);
    f16_put(&y[i].d, d);
  }
}

static AVX2 void quantize_q8_1(const float *x, void *vy, int64_t n) {
  block_q8_1 *y = vy;
  for (int64_t i = 0; i < n / QK8_1; i++, x += QK8_1) {
    const float d = max_abs(x, 32) / 127.0f;
    const int sum = hsum_epi32(quantize32(x, d != 0.0f ? 1.0f / d : 0.0f, y[i].qs));
    f16_put(&y[i].d, d);
    f16_put(&y[i].s, d * (float)sum);
  }
}

static AVX2 void quantize_q8_K(const float *x, void *vy, int64_t n) {
  block_q8_K *y = vy;
  for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
    const float d = max_abs(x, QK_K) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int c = 0; c < QK_K / 32; c++) quantize32(x + 32 * c, id, y[i].qs + 32 * c);
    /* bsums: byte pairs summed by pmaddubsw against ones, then pairs of
     * those by pmaddwd, then two hadds make sums of 16 */
    for (int c = 0; c < QK_K / 64; c++) {
      const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
      const __m256i s0 =
          _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, load256(y[i].qs + 64 * c)), ones16);
      const __m256i s1 =
          _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, load256(y[i].qs + 64 * c + 32)), ones16);
      /* s0 lanes: [4 sums of 4 (elements 0..15) | 4 sums (16..31)] */
      __m256i h = _mm256_hadd_epi32(s0, s1);
      h = _mm256_hadd_epi32(h, h); /* lane0: g0, g2, g0, g2; lane1: g1, g3, ... */
      y[i].bsums[4 * c + 0] = (int16_t)_mm256_extract_epi32(h, 0);
      y[i].bsums[4 * c + 1] = (int16_t)_mm256_extract_epi32(h, 4);
      y[i].bsums[4 * c + 2] = (int16_t)_mm256_extract_epi32(h, 1);
      y[i].bsums[4 * c + 3] = (int16_t)_mm256_extract_epi32(h, 5);
    }
    y[i].d = d;
  }
}

void pa_kernels_fill_avx2(pa_cpu_kernels *k) {
  k->vec_dot[PA_TYPE_F32] = dot_f32;
  k->vec_dot[PA_TYPE_F16] = dot_f16;
  k->vec_dot[PA_TYPE_BF16] = dot_bf16;
  k->vec_dot[PA_TYPE_Q4_0] = dot_q4_0;
  k->vec_dot[PA_TYPE_Q4_1] = dot_q4_1;
  k->vec_dot[PA_TYPE_Q5_0] = dot_q5_0;
  k->vec_dot[PA_TYPE_Q5_1] = dot_q5_1;
  k->vec_dot[PA_TYPE_Q8_0] = dot_q8_0;
  k->vec_dot[PA_TYPE_Q2_K] = dot_q2_K;
  k->vec_dot[PA_TYPE_Q3_K] = dot_q3_K;
  k->vec_dot[PA_TYPE_Q4_K] = dot_q4_K;
  k->vec_dot[PA_TYPE_Q5_K] = dot_q5_K;
  k->vec_dot[PA_TYPE_Q6_K] = dot_q6_K;
  k->quantize_row[PA_TYPE_Q8_0] = quantize_q8_0;
  k->quantize_row[PA_TYPE_Q8_1] = quantize_q8_1;
  k->quantize_row[PA_TYPE_Q8_K] = quantize_q8_K;
}

#endif /* __x86_64__ */
