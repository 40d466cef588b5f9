/* x16_avx2.c: the AVX2 kernels of the 16-row interleaved layout
 * (kernels/x16.h), for one to X16_AVX2_TOKENS tokens at a time, on CPUs
 * without AVX-512 (AMD Zen 2/3, Intel client cores). They follow the
 * layout's canonical arithmetic step for step, so their bits equal the
 * reference's (x16.c) and those of every other table's kernels, and do not
 * depend on how many tokens share a call.
 *
 * A 256-bit vector holds 8 rows' 4 bytes: a block's weights are read as
 * two halves of 8 rows (the record's bytes 32 h .. 32 h + 31 of each
 * 64-byte vector), a vector of each half at a time, so that one activation
 * broadcast serves all 16 rows while the tokens' integer sums and two
 * weight vectors fit the 16 registers (the float accumulators wait in L1,
 * touched once per block). Without vpdpbusd
 * the products are pmaddubsw (unsigned weight bytes against the signed
 * activation bytes broadcast 4 at a time) into 16-bit pair sums:
 *   Q4_0, Q4_1: nibbles <= 15 against |x| <= 127 (the activation
 *     quantizers' range): a pair is at most 3810 in size, so all 8 of a
 *     block's pair sums add up in 16 bits (30480) before one pmaddwd;
 *   Q5_0: values <= 31: pairs up to 7874, summed two at a time in 16 bits
 *     and then in 32;
 *   Q8_0: the stored bytes are q + 128, which pmaddubsw could saturate;
 *     the kernel takes q back (xor 0x80) and multiplies |q| by x with q's
 *     sign (pairs <= 2 * 128 * 127 = 32512). That gives sum - off of the
 *     canonical arithmetic directly: the same integer, so the same float.
 * Every integer sum is exact, and the float steps are the reference's. */
#if defined(__x86_64__) /* x86 SIMD; other targets have the plain C tables */
#include <immintrin.h>
#include <string.h>

#include "kernels/cpu/avx2_util.h"
#include "kernels/cpu/ilv_run.h"
#include "kernels/cpu/simd_masks.h"
#include "kernels/x16.h"

PA_NO_FP_CONTRACT

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define BODY static inline __attribute__((always_inline)) AVX2

#define X16_AVX2_TOKENS 4 /* tokens per call (2 and 3 measured slower) */

enum { K_Q8_0, K_Q4_0, K_Q4_1, K_Q5_0 };

BODY size_t rec_of(const int kind) {
  return kind == K_Q8_0 ? 544 : kind == K_Q4_0 ? 288 : kind == K_Q4_1 ? 320 : 352;
}

/* Keeps v as computed here: GCC otherwise re-associates a block's chain of
 * integer adds into a tree over all its products, which needs more than the
 * 16 registers and spills most of them (measured: 127 stack accesses per
 * block of 4 tokens). */
#define KEEP(v) __asm__("" : "+x"(v))

BODY __m256i bcast4(const uint8_t *p) {
  int32_t v;
  memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

/* 0x10 in byte j where bit j of the 32-bit word at p is set (Q5_0's fifth
 * bits of 8 rows x 4 elements). */
BODY __m256i fifth_bits(const uint8_t *p) {
  return _mm256_and_si256(pa_bits_to_bytes(p), _mm256_set1_epi8(0x10));
}

/* Block b of the group (record o), both halves, T tokens: each activation
 * broadcast serves the 16 rows. acc[2 t + h]: token t's rows 8 h .. 8 h + 7. */
BODY void block_both(const int kind, const uint8_t *o, const uint8_t *const *xp, int64_t b,
                     float *acc, const int T) {
  const size_t d_at = kind == K_Q8_0 ? 512 : kind == K_Q5_0 ? 320 : 256;
  const __m256i ones = _mm256_set1_epi16(1), nib = _mm256_set1_epi8(0x0F);
  __m256i s[2 * X16_AVX2_TOKENS]; /* 16-bit pair sums (Q4), 32-bit sums (Q5_0, Q8_0) */
#pragma GCC unroll 8
  for (int t = 0; t < 2 * T; t++) s[t] = _mm256_setzero_si256();
  if (kind == K_Q8_0) {
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
      __m256i q[2], aq[2];
#pragma GCC unroll 2
      for (int h = 0; h < 2; h++) {
        q[h] = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(o + 64 * i + 32 * h)),
                                _mm256_set1_epi8((char)0x80));
        aq[h] = _mm256_sign_epi8(q[h], q[h]);
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; t++) {
        const __m256i x = bcast4(xp[t] + (size_t)b * PA_X16_XREC + 4 * i);
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
          s[2 * t + h] = _mm256_add_epi32(
              s[2 * t + h],
              _mm256_madd_epi16(_mm256_maddubs_epi16(aq[h], _mm256_sign_epi8(x, q[h])), ones));
          KEEP(s[2 * t + h]);
        }
      }
    }
  } else {
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
      __m256i lo[2], hi[2];
#pragma GCC unroll 2
      for (int h = 0; h < 2; h++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)(o + 64 * i + 32 * h));
        lo[h] = _mm256_and_si256(q, nib);
        hi[h] = _mm256_and_si256(_mm256_srli_epi16(q, 4), nib);
        if (kind == K_Q5_0) {
          lo[h] = _mm256_or_si256(lo[h], fifth_bits(o + 256 + 8 * i + 4 * h));
          hi[h] = _mm256_or_si256(hi[h], fifth_bits(o + 256 + 8 * (4 + i) + 4 * h));
        }
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; t++) {
        const uint8_t *x = xp[t] + (size_t)b * PA_X16_XREC;
        const __m256i xa = bcast4(x + 4 * i), xb = bcast4(x + 16 + 4 * i);
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
          const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(lo[h], xa),
                                             _mm256_maddubs_epi16(hi[h], xb));
          s[2 * t + h] = kind == K_Q5_0 ? _mm256_add_epi32(s[2 * t + h], _mm256_madd_epi16(p, ones))
                                        : _mm256_add_epi16(s[2 * t + h], p);
          KEEP(s[2 * t + h]);
        }
      }
    }
  }
  /* the canonical float step (x16.h) */
#pragma GCC unroll 2
  for (int h = 0; h < 2; h++) {
    const __m256 dl = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(o + d_at + 16 * h)));
    const __m256 ml =
        kind == K_Q4_1 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(o + 288 + 16 * h))) : dl;
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) {
      const uint8_t *x = xp[t] + (size_t)b * PA_X16_XREC;
      float dx, sx;
      int32_t off;
      memcpy(&dx, x + 32, 4);
      const __m256 dd = _mm256_mul_ps(dl, _mm256_set1_ps(dx));
      __m256i sum = s[2 * t + h];
      if (kind == K_Q4_0 || kind == K_Q4_1) sum = _mm256_madd_epi16(sum, ones);
      if (kind == K_Q4_0 || kind == K_Q5_0) {
        memcpy(&off, x + 36, 4);
        sum = _mm256_sub_epi32(sum, _mm256_set1_epi32(off));
      }
      __m256 a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), dd, _mm256_load_ps(acc + 8 * (2 * t + h)));
      if (kind == K_Q4_1) {
        memcpy(&sx, x + 36, 4);
        a = _mm256_fmadd_ps(ml, _mm256_set1_ps(sx), a);
      }
      _mm256_store_ps(acc + 8 * (2 * t + h), a);
    }
  }
}

BODY void run_body(const int kind, int64_t cols, const uint8_t *wg, const uint8_t *const *xp,
                   float *y, int64_t ldy, const int T, const pa_prefetch *stream) {
  /* several tokens: no prefetch (measured on AVX-512 CPUs only, kernels.h) */
  const int64_t nb = cols / 32;
  const size_t rec = rec_of(kind);
  const int pf = stream ? stream->avx2 : 0;
  /* the accumulators live in L1: the integer sums need the registers */
  float acc[2 * X16_AVX2_TOKENS * 8] __attribute__((aligned(32)));
#pragma GCC unroll 8
  for (int t = 0; t < 2 * T; t++) _mm256_store_ps(acc + 8 * t, _mm256_setzero_ps());
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *o = wg + (size_t)b * rec;
    if (T == 1 && pf) /* decode streams the weights: ask for them ahead (kernels.h) */
      for (size_t c = 0; c < rec; c += 64)
        _mm_prefetch((const char *)o + pf + c, _MM_HINT_T1);
    block_both(kind, o, xp, b, acc, T);
  }
  store_rows16(y, ldy, acc, T);
}

PA_ILV_RUN4(AVX2, run_q8_0, K_Q8_0)
PA_ILV_RUN4(AVX2, run_q4_0, K_Q4_0)
PA_ILV_RUN4(AVX2, run_q4_1, K_Q4_1)
PA_ILV_RUN4(AVX2, run_q5_0, K_Q5_0)

PA_X16_KERNEL(avx2, q8_0, X16_AVX2_TOKENS);
PA_X16_KERNEL(avx2, q4_0, X16_AVX2_TOKENS);
PA_X16_KERNEL(avx2, q4_1, X16_AVX2_TOKENS);
PA_X16_KERNEL(avx2, q5_0, X16_AVX2_TOKENS);

#endif /* __x86_64__ */
