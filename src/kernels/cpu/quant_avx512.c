/* quant_avx512.c: the AVX-512 activation quantizers: Q8_0 and Q8_1 (32
 * elements a block) sixteen blocks at a time, and Q8_K (256 a block).
 * Built for baseline x86-64: functions carry target attributes and are
 * reached only through dispatch.c.
 *
 * The arithmetic is ref.c's, so the bytes are identical: per block,
 * d = max |x| / 127, q = x * (1 / d) rounded to nearest even (0 when d is
 * 0), d stored as fp16 (Q8_K: as float) and (Q8_1) s = d * sum(q) as
 * fp16; Q8_K's bsums, its 16-element groups' sums of q.
 *
 * Why: per block the AVX2 quantizer reduces the block's maximum and its
 * quants' sum across lanes, divides twice in scalar and converts d and s
 * one at a time: in a 16-user decode step of SmolLM2 it took 2.5-3% of
 * the samples (perf), about as much as the residual adds and norms
 * together. Here the 16 blocks' maxima and sums come out of one transpose
 * tree each, and the divisions and fp16 conversions are one vector
 * operation for all 16. One thread, 16 tokens of 1536 columns: 13.0 rdtsc
 * ticks a block against 21.0 (Q8_1), 9.8 against 13.2 (Q8_0), and for
 * Q8_K 105 against 155 a 256-element block. In a serving run (serve-load,
 * c = 16) SmolLM2's throughput rose ~5% with these and the attention's
 * unmasked V loads together; Gemma 3's 16-user decode (Q8_K) moved less
 * than the noise. */
#if defined(__x86_64__) /* x86 SIMD; other targets have the plain C tables */
#include <immintrin.h>
#include <string.h>

#include "kernels/kernels.h"
#include "quant/quant.h"

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))
#define BODY static inline __attribute__((always_inline)) AVX512

/* The 16 lanes' reductions of v[0..15], lane b holding v[b]'s (max or
 * integer add: both exact, so the order does not matter). Four levels of
 * pairing halves, quarters, pairs and lanes. */
#define TREE(OP, SH4, SH)                                                              \
  do {                                                                                 \
    for (int i = 0; i < 8; i++) /* 8 lanes per vector left */                          \
      v[i] = OP(SH4(v[2 * i], v[2 * i + 1], 0x44), SH4(v[2 * i], v[2 * i + 1], 0xEE)); \
    for (int i = 0; i < 4; i++) /* 4 */                                                \
      v[i] = OP(SH4(v[2 * i], v[2 * i + 1], 0x88), SH4(v[2 * i], v[2 * i + 1], 0xDD)); \
    for (int i = 0; i < 2; i++) /* 2 */                                                \
      v[i] = OP(SH(v[2 * i], v[2 * i + 1], 0x44), SH(v[2 * i], v[2 * i + 1], 0xEE));   \
    v[0] = OP(SH(v[0], v[1], 0x88), SH(v[0], v[1], 0xDD));                             \
  } while (0)

/* The 4 x 4 transpose of 32-bit lanes (lane b <- lane 4 (b % 4) + b / 4),
 * with permutexvar. After TREE, lane 4 q + j holds block q + 4 j's value
 * (quarter q of the third level's pairs, j from the last two): this puts
 * block b in lane b. After packs_epi32(a, c) then packs_epi16(that, 0),
 * 128-bit lane L holds a[4 L .. 4 L + 3] as bytes in dword 4 L, c's in
 * dword 4 L + 1, then zeros: this puts a's 16 bytes, then c's, first. */
BODY __m512i transpose4x4(void) {
  return _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
}

/* 32 quants, a's 16 then c's (int32, within +-127: the packs' saturation
 * never acts), stored as bytes at q. */
BODY void store_quants32(int8_t *q, __m512i a, __m512i c) {
  const __m512i p = _mm512_packs_epi16(_mm512_packs_epi32(a, c), _mm512_setzero_si512());
  _mm256_storeu_si256((__m256i *)q,
                      _mm512_castsi512_si256(_mm512_permutexvar_epi32(transpose4x4(), p)));
}

#define SHF4(a, b, i) _mm512_shuffle_f32x4(a, b, i)
#define SHF(a, b, i) _mm512_shuffle_ps(a, b, i)
#define SHI4(a, b, i) _mm512_shuffle_i32x4(a, b, i)
#define SHI(a, b, i) \
  _mm512_castps_si512(_mm512_shuffle_ps(_mm512_castsi512_ps(a), _mm512_castsi512_ps(b), i))

/* max |x| of each of blocks 0 .. n - 1 (n <= 16) of x, in lane b; 0 beyond */
BODY __m512 block_amax(const float *x, int n) {
  __m512 v[16];
#pragma GCC unroll 16
  for (int b = 0; b < 16; b++)
    v[b] = b < n ? _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x + 32 * b)),
                                 _mm512_abs_ps(_mm512_loadu_ps(x + 32 * b + 16)))
                 : _mm512_setzero_ps();
  TREE(_mm512_max_ps, SHF4, SHF);
  return _mm512_permutexvar_ps(transpose4x4(), v[0]);
}

/* Quantizes blocks 0 .. n - 1 (n <= 16) of x: their quants into
 * q + b * stride, their d as fp16 into dh[b], and (sums) their quants'
 * sums into sum[b]. d[b] is returned in lane b. */
BODY __m512 quantize16(const float *x, int n, int8_t *q, size_t stride, uint16_t *dh, int32_t *sum,
                       const int sums) {
  const __m512 d = _mm512_div_ps(block_amax(x, n), _mm512_set1_ps(127.0f));
  const __mmask16 nz = _mm512_cmp_ps_mask(d, _mm512_setzero_ps(), _CMP_NEQ_OQ);
  _Alignas(64) float id[16];
  _mm512_store_ps(id, _mm512_maskz_div_ps(nz, _mm512_set1_ps(1.0f), d));
  _mm256_storeu_si256((__m256i *)dh, _mm512_cvtps_ph(d, _MM_FROUND_TO_NEAREST_INT));
  __m512i v[16];
#pragma GCC unroll 16
  for (int b = 0; b < 16; b++) {
    if (b >= n) {
      v[b] = _mm512_setzero_si512();
      continue;
    }
    const __m512 m = _mm512_set1_ps(id[b]);
    const __m512i a = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 32 * b), m));
    const __m512i c = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 32 * b + 16), m));
    store_quants32(q + b * stride, a, c);
    v[b] = _mm512_add_epi32(a, c);
  }
  if (sums) {
    TREE(_mm512_add_epi32, SHI4, SHI);
    _mm512_storeu_si512(sum, _mm512_permutexvar_epi32(transpose4x4(), v[0]));
  }
  return d;
}

static AVX512 void quantize_q8_0(const float *x, void *vy, int64_t n) {
  block_q8_0 *y = vy;
  const int64_t nb = n / QK8_0;
  for (int64_t i = 0; i < nb; i += 16) {
    const int m = nb - i < 16 ? (int)(nb - i) : 16;
    uint16_t dh[16];
    quantize16(x + 32 * i, m, y[i].qs, sizeof(block_q8_0), dh, NULL, 0);
    for (int b = 0; b < m; b++) memcpy(&y[i + b].d, &dh[b], 2);
  }
}

static AVX512 void quantize_q8_1(const float *x, void *vy, int64_t n) {
  block_q8_1 *y = vy;
  const int64_t nb = n / QK8_1;
  for (int64_t i = 0; i < nb; i += 16) {
    const int m = nb - i < 16 ? (int)(nb - i) : 16;
    uint16_t dh[16], sh[16];
    _Alignas(64) int32_t sum[16];
    const __m512 d = quantize16(x + 32 * i, m, y[i].qs, sizeof(block_q8_1), dh, sum, 1);
    const __m512 s = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_load_si512(sum)));
    _mm256_storeu_si256((__m256i *)sh, _mm512_cvtps_ph(s, _MM_FROUND_TO_NEAREST_INT));
    for (int b = 0; b < m; b++) {
      memcpy(&y[i + b].d, &dh[b], 2);
      memcpy(&y[i + b].s, &sh[b], 2);
    }
  }
}

/* Q8_K: one 256-element block at a time. Its 16 vectors are its 16
 * groups of 16, so the bsums are one transpose tree of the vectors' int32
 * quants (each group's sum is within +-2032: the int16 narrowing is exact). */
static AVX512 void quantize_q8_K(const float *x, void *vy, int64_t n) {
  block_q8_K *y = vy;
  for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
    __m512 m = _mm512_abs_ps(_mm512_loadu_ps(x));
#pragma GCC unroll 15
    for (int g = 1; g < 16; g++) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(x + 16 * g)));
    const float d = _mm512_reduce_max_ps(m) / 127.0f;
    const __m512 id = _mm512_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
    __m512i v[16];
#pragma GCC unroll 16
    for (int g = 0; g < 16; g++)
      v[g] = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 16 * g), id));
#pragma GCC unroll 8
    for (int g = 0; g < 16; g += 2) store_quants32(y[i].qs + 16 * g, v[g], v[g + 1]);
    TREE(_mm512_add_epi32, SHI4, SHI);
    _mm256_storeu_si256((__m256i *)y[i].bsums,
                        _mm512_cvtepi32_epi16(_mm512_permutexvar_epi32(transpose4x4(), v[0])));
    y[i].d = d;
  }
}

void pa_kernels_fill_avx512_quant(pa_cpu_kernels *k) {
  k->quantize_row[PA_TYPE_Q8_K] = quantize_q8_K;
  k->quantize_row[PA_TYPE_Q8_0] = quantize_q8_0;
  k->quantize_row[PA_TYPE_Q8_1] = quantize_q8_1;
}

#endif /* __x86_64__ */
