/* x16_iq_avx2.c: the AVX2 kernels of the 16-row interleaved layout
 * (kernels/x16.h) for the table-lookup 4-bit types IQ4_NL, MXFP4 and
 * IQ4_XS, one to IQ_AVX2_TOKENS tokens a call. They follow the layout's
 * canonical arithmetic, so their bits are the reference's (x16.c) for any
 * number of tokens; the plain AVX-512 table (a copy of the AVX2 one) uses
 * them as well, the AVX-512 VNNI one has its own (x16_iq_avx512.c).
 *
 * As x16_avx2.c, a 256-bit vector holds 8 rows' 4 bytes, and a block is
 * read as two halves of 8 rows: here one half at a time, all of its
 * vectors, so that the tokens' sums, the weights' levels and the table fit
 * the 16 registers. Each vector of nibbles becomes two of int8 levels with
 * one pshufb each (the 16-entry table in both lanes), once per call for
 * all its tokens:
 *   IQ4_NL, IQ4_XS: levels up to 127 in size. pmaddubsw takes |level|
 *     against the activation carrying the level's sign (pairs at most
 *     2 * 127 * 127 = 32258: nothing saturates), then pmaddwd widens the
 *     pair sums to 32 bits, against ones (IQ4_NL) or against the row's
 *     sub-block scale (IQ4_XS: the scaled sum of the canonical arithmetic
 *     in the same instruction; |pair| * 32 fits).
 *   MXFP4: the table holds level + 12 (0..24), unsigned: pmaddubsw against
 *     the activations directly (pairs <= 2 * 24 * 127), and the packed
 *     activation's off (12 times the block's sum) comes off the int32 sum.
 * Every integer is the reference's exactly; the float step is its own. */
#if defined(__x86_64__) /* x86 SIMD; other targets have the plain C tables */
#include <immintrin.h>
#include <string.h>

#include "kernels/cpu/avx2_util.h"
#include "kernels/cpu/ilv_run.h"
#include "kernels/x16.h"

PA_NO_FP_CONTRACT

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define BODY static inline __attribute__((always_inline)) AVX2

#define IQ_AVX2_TOKENS 4

enum { K_IQ4_NL, K_MXFP4, K_IQ4_XS };

/* Keeps v as computed here (x16_avx2.c: GCC otherwise reassociates the
 * adds of a block into a tree that spills). */
#define KEEP(v) __asm__("" : "+x"(v))

BODY __m256i bcast4(const uint8_t *p) {
  int32_t v;
  memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

/* The levels (MXFP4: plus 12) in both 128-bit lanes. */
BODY __m256i lut_of(const int kind) {
  int8_t t[16];
  for (int k = 0; k < 16; k++)
    t[k] = kind == K_MXFP4 ? (int8_t)(pa_kvalues_mxfp4[k] + 12) : pa_kvalues_iq4nl[k];
  return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)t));
}

/* Signed levels of one half (8 rows) of a 32-element block, record bytes
 * q (vector i at q + 64 i), against T tokens' activations at xp[t] + xo:
 * s[t] += pair sums widened by pmaddwd against m (ones or scales). */
BODY void signed_half(const uint8_t *q, __m256i lut, const uint8_t *const *xp, size_t xo,
                      __m256i m, __m256i *s, const int T) {
  const __m256i nib = _mm256_set1_epi8(0x0F);
#pragma GCC unroll 4
  for (int i = 0; i < 4; i++) {
    const __m256i raw = _mm256_loadu_si256((const __m256i *)(q + 64 * i));
    const __m256i lo = _mm256_shuffle_epi8(lut, _mm256_and_si256(raw, nib));
    const __m256i hi = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(raw, 4), nib));
    const __m256i alo = _mm256_sign_epi8(lo, lo), ahi = _mm256_sign_epi8(hi, hi);
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) {
      const uint8_t *x = xp[t] + xo;
      const __m256i pa = _mm256_maddubs_epi16(alo, _mm256_sign_epi8(bcast4(x + 4 * i), lo));
      const __m256i pb = _mm256_maddubs_epi16(ahi, _mm256_sign_epi8(bcast4(x + 16 + 4 * i), hi));
      s[t] = _mm256_add_epi32(s[t], _mm256_add_epi32(_mm256_madd_epi16(pa, m), _mm256_madd_epi16(pb, m)));
      KEEP(s[t]);
    }
  }
}

/* MXFP4's half: unsigned level + 12 against the activations. */
BODY void offset_half(const uint8_t *q, __m256i lut, const uint8_t *const *xp, size_t xo,
                      __m256i *s, const int T) {
  const __m256i nib = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
#pragma GCC unroll 4
  for (int i = 0; i < 4; i++) {
    const __m256i raw = _mm256_loadu_si256((const __m256i *)(q + 64 * i));
    const __m256i lo = _mm256_shuffle_epi8(lut, _mm256_and_si256(raw, nib));
    const __m256i hi = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(raw, 4), nib));
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) {
      const uint8_t *x = xp[t] + xo;
      const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(lo, bcast4(x + 4 * i)),
                                         _mm256_maddubs_epi16(hi, bcast4(x + 16 + 4 * i)));
      s[t] = _mm256_add_epi32(s[t], _mm256_madd_epi16(p, ones));
      KEEP(s[t]);
    }
  }
}

/* 8 rows' int8 scales at p as int16 pairs (both halves of each 32-bit lane). */
BODY __m256i scale_pairs(const uint8_t *p) {
  const __m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p));
  return _mm256_or_si256(_mm256_and_si256(v, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(v, 16));
}

/* pa_e8m0_to_f32_half of 8 exponent bytes at p. */
BODY __m256 e8m0_half(const uint8_t *p) {
  const __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
  const __m256i big = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
  const __m256i small = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
  const __m256i is_big = _mm256_cmpgt_epi32(e, _mm256_set1_epi32(1));
  return _mm256_castsi256_ps(_mm256_blendv_epi8(small, big, is_big));
}

BODY void run_body(const int kind, int64_t cols, const uint8_t *wg, const uint8_t *const *xp,
                   float *y, int64_t ldy, const int T, const pa_prefetch *stream) {
  const int64_t nb = kind == K_IQ4_XS ? cols / QK_K : cols / 32;
  const size_t rec = kind == K_IQ4_NL ? 288 : kind == K_MXFP4 ? 272 : PA_X16_REC_XS;
  const size_t xrec = kind == K_IQ4_XS ? PA_X16_XREC_XS : PA_X16_XREC;
  const int pf = stream ? stream->avx2 : 0;
  const __m256i lut = lut_of(kind), ones = _mm256_set1_epi16(1);
  float acc[2 * IQ_AVX2_TOKENS * 8] __attribute__((aligned(32)));
#pragma GCC unroll 8
  for (int t = 0; t < 2 * T; t++) _mm256_store_ps(acc + 8 * t, _mm256_setzero_ps());
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *o = wg + (size_t)b * rec;
    const size_t xo = (size_t)b * xrec;
    if (T == 1 && pf) /* decode streams the weights: ask for them ahead (kernels.h) */
      for (size_t c = 0; c < rec; c += 64) _mm_prefetch((const char *)o + pf + c, _MM_HINT_T1);
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
      __m256i s[IQ_AVX2_TOKENS];
#pragma GCC unroll 4
      for (int t = 0; t < T; t++) s[t] = _mm256_setzero_si256();
      __m256 dl;
      if (kind == K_IQ4_XS) {
        for (int ib = 0; ib < 8; ib++)
          signed_half(o + 256 * ib + 32 * h, lut, xp, xo + 32 * (size_t)ib,
                      scale_pairs(o + PA_X16_XS_SC + 16 * ib + 8 * h), s, T);
        dl = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(o + PA_X16_XS_D + 16 * h)));
      } else if (kind == K_IQ4_NL) {
        signed_half(o + 32 * h, lut, xp, xo, ones, s, T);
        dl = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(o + 256 + 16 * h)));
      } else {
        offset_half(o + 32 * h, lut, xp, xo, s, T);
        dl = e8m0_half(o + 256 + 8 * h);
      }
      /* the canonical float step (x16.h) */
#pragma GCC unroll 4
      for (int t = 0; t < T; t++) {
        const uint8_t *x = xp[t] + xo;
        float dx;
        memcpy(&dx, x + (kind == K_IQ4_XS ? PA_X16_XS_XD : 32), 4);
        __m256i sum = s[t];
        if (kind == K_MXFP4) {
          int32_t off;
          memcpy(&off, x + 36, 4);
          sum = _mm256_sub_epi32(sum, _mm256_set1_epi32(off));
        }
        float *a = acc + 8 * (2 * t + h);
        _mm256_store_ps(a, _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(dl, _mm256_set1_ps(dx)),
                                           _mm256_load_ps(a)));
      }
    }
  }
  store_rows16(y, ldy, acc, T);
}

PA_ILV_RUN4(AVX2, run_iq4_nl, K_IQ4_NL)
PA_ILV_RUN4(AVX2, run_mxfp4, K_MXFP4)
PA_ILV_RUN4(AVX2, run_iq4_xs, K_IQ4_XS)

PA_X16_KERNEL(avx2, iq4_nl, IQ_AVX2_TOKENS);
PA_X16_KERNEL(avx2, mxfp4, IQ_AVX2_TOKENS);
PA_X16_KERNEL(avx2, iq4_xs, IQ_AVX2_TOKENS);

#endif /* __x86_64__ */
