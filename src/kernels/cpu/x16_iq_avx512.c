/* x16_iq_avx512.c: the AVX-512 VNNI kernels of the 16-row interleaved
 * layout (kernels/x16.h) for the table-lookup 4-bit types IQ4_NL, MXFP4
 * and IQ4_XS, one to PA_X16_TOKENS tokens a call, with the reference's
 * bits (x16.c) for any number of tokens.
 *
 * As x16_avx512.c, lane l of a 512-bit vector is row l of the group and
 * each vpdpbusd adds 4 products into each of the 16 rows' sums. The
 * nibbles become unsigned bytes with one vpshufb each (the 16-entry table
 * in every 128-bit lane), once per call for all its tokens: the level plus
 * 128 (IQ4_NL, IQ4_XS) or plus 12 (MXFP4), so vpdpbusd takes them against
 * the signed activation quants, and the activation record's offset (that
 * constant times the block's, or the sub-block's, sum of quants: x16.h)
 * comes off the int32 sum, which leaves the canonical sum of level x quant
 * exactly. IQ4_XS multiplies each sub-block's sum by the row's sub-block
 * scale (vpmulld) and adds them up in int32, as the canonical arithmetic
 * does; the float step is the layout's. */
#if defined(__x86_64__) /* x86 SIMD; other targets have the plain C tables */
#include <immintrin.h>
#include <string.h>

#include "kernels/x16.h"

PA_NO_FP_CONTRACT

#include "kernels/cpu/ilv_run.h"
#include "kernels/cpu/x16_simd.h"

#define VNNI X16_VNNI
#define BODY X16_INLINE

enum { K_IQ4_NL = 16, K_MXFP4, K_IQ4_XS };

/* The levels plus 128 (MXFP4: plus 12) as unsigned bytes, in every lane. */
BODY __m512i lut_of(const int kind) {
  uint8_t t[16];
  for (int k = 0; k < 16; k++)
    t[k] = kind == K_MXFP4 ? (uint8_t)(pa_kvalues_mxfp4[k] + 12)
                           : (uint8_t)(pa_kvalues_iq4nl[k] + 128);
  return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)t));
}

/* 32 elements' nibbles (4 vectors of 64 bytes at q) as 8 vectors of
 * unsigned levels, vector k holding elements 4k .. 4k + 3 of each row. */
BODY void unpack(const uint8_t *q, __m512i lut, __m512i w[8]) {
  const __m512i nib = _mm512_set1_epi8(0x0F);
#pragma GCC unroll 4
  for (int i = 0; i < 4; i++) {
    const __m512i raw = _mm512_loadu_si512(q + 64 * i);
    w[i] = _mm512_shuffle_epi8(lut, _mm512_and_si512(raw, nib));
    w[4 + i] = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(raw, 4), nib));
  }
}

/* pa_e8m0_to_f32_half of the 16 exponent bytes at p. */
BODY __m512 e8m0_half(const uint8_t *p) {
  const __m512i e = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)p));
  const __m512i big = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
  const __m512i small = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
  const __mmask16 is_big = _mm512_cmpgt_epi32_mask(e, _mm512_set1_epi32(1));
  return _mm512_castsi512_ps(_mm512_mask_blend_epi32(is_big, small, big));
}

/* A record per group and block of 32 (IQ4_NL 288 bytes, MXFP4 272), or
 * per group and super-block of 256 (IQ4_XS: PA_X16_REC_XS). */
BODY void run_body(const int kind, int64_t cols, const uint8_t *wg, const uint8_t *const *xp,
                   float *y, int64_t ldy, const int T, const pa_prefetch *stream) {
  const bool xs = kind == K_IQ4_XS;
  const int64_t nb = xs ? cols / QK_K : cols / 32;
  const size_t rec = xs ? PA_X16_REC_XS : kind == K_IQ4_NL ? 288 : 272;
  const size_t xrec = xs ? PA_X16_XREC_XS : PA_X16_XREC;
  const int pf = pa_prefetch_distance(stream, stream ? stream->avx512 : 0, T);
  const __m512i lut = lut_of(kind);
  __m512 acc[PA_X16_TOKENS];
#pragma GCC unroll 8
  for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *o = wg + (size_t)b * rec;
    if (pf) /* weights from memory: ask for them ahead (kernels.h) */
      for (size_t c = 0; c < rec; c += 64) _mm_prefetch((const char *)o + pf + c, _MM_HINT_T1);
    const uint8_t *x[PA_X16_TOKENS];
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) x[t] = xp[t] + (size_t)b * xrec;
    __m512i w[8];
    if (!xs) {
      unpack(o, lut, w);
      const __m512 dl = kind == K_IQ4_NL
                            ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(o + 256)))
                            : e8m0_half(o + 256);
      /* x16_step's Q4_0 form: fma((float)(sum - off), dl * dx, acc) */
#pragma GCC unroll 8
      for (int t = 0; t < T; t++)
        acc[t] = x16_step(K_Q4_0, x16_dot32(w, x[t]), dl, dl, x[t], acc[t]);
      continue;
    }
    __m512i isum[PA_X16_TOKENS], ds[8]; /* ds: one token's 8 sub-block sums */
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) isum[t] = _mm512_setzero_si512();
    for (int ib = 0; ib < 8; ib++) {
      unpack(o + 256 * ib, lut, w);
      if (T == 1) { /* the sub-block's sum kept; the scales after the last one */
        int32_t off;
        memcpy(&off, x[0] + PA_X16_XS_XOFF + 4 * ib, 4);
        ds[ib] = _mm512_sub_epi32(x16_dot32(w, x[0] + 32 * ib), _mm512_set1_epi32(off));
        continue;
      }
      const __m512i sc = _mm512_cvtepi8_epi32(
          _mm_loadu_si128((const __m128i *)(const void *)(o + PA_X16_XS_SC + 16 * ib)));
#pragma GCC unroll 8
      for (int t = 0; t < T; t++) {
        int32_t off;
        memcpy(&off, x[t] + PA_X16_XS_XOFF + 4 * ib, 4);
        const __m512i d = _mm512_sub_epi32(x16_dot32(w, x[t] + 32 * ib), _mm512_set1_epi32(off));
        isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(d, sc));
      }
    }
    /* one token: the scales read after the record's last weight vector, so
     * that its lines are asked for in address order (kernels/x16.h, Q5_K) */
    if (T == 1)
#pragma GCC unroll 8
      for (int ib = 0; ib < 8; ib++) {
        const __m512i sc = _mm512_cvtepi8_epi32(
            _mm_loadu_si128((const __m128i *)(const void *)(o + PA_X16_XS_SC + 16 * ib)));
        isum[0] = _mm512_add_epi32(isum[0], _mm512_mullo_epi32(ds[ib], sc));
      }
    const __m512 dl = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(o + PA_X16_XS_D)));
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) {
      float dx;
      memcpy(&dx, x[t] + PA_X16_XS_XD, 4);
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(dl, _mm512_set1_ps(dx)),
                               acc[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; t++) _mm512_storeu_ps(y + t * ldy, acc[t]);
}

PA_ILV_RUN8(VNNI, run_iq4_nl, K_IQ4_NL)
PA_ILV_RUN8(VNNI, run_mxfp4, K_MXFP4)
PA_ILV_RUN8(VNNI, run_iq4_xs, K_IQ4_XS)

PA_X16_KERNEL(vnni, iq4_nl, PA_X16_TOKENS);
PA_X16_KERNEL(vnni, mxfp4, PA_X16_TOKENS);
PA_X16_KERNEL(vnni, iq4_xs, PA_X16_TOKENS);

#endif /* __x86_64__ */
