/* x16_k_avx512.c: the AVX-512 VNNI kernels of Q4_K and Q5_K in the 16-row
 * layout (kernels/x16.h), one to PA_X16_TOKENS tokens a call, with the
 * reference's bits (x16.c) for any number of tokens.
 *
 * Lane l of a 512-bit vector is row l of the group. Per super-block and
 * group: 32 loads of 64 weight bytes and 64 ands (the low nibbles as they
 * are, the high ones kept in place: 16 x, which the scales of the low
 * sub-blocks match by being taken 16 x too); per token 64 vpdpbusd whose
 * activation operand is a 4-byte broadcast from memory, 8 vpmulld of the
 * sub-block sums by their scales, a shift that takes the 16 off again
 * (exactly: every term is a multiple of 16), 4 vpdpwssd of the mins
 * against the sub-blocks' activation sums, and the layout's two fmas:
 * about 180 vector operations per 16 rows and super-block for one token,
 * where x4.h's kernel spends about 250 on the same rows. Q5_K: the high
 * nibbles shifted down, the fifth bits added by k-mask (two 64-bit masks
 * per weight vector), the scales as they are and no shift. */
#if defined(__x86_64__) /* x86 SIMD; other targets have the plain C tables */
#include <immintrin.h>
#include <string.h>

#include "kernels/x16.h"

PA_NO_FP_CONTRACT

#include "kernels/cpu/ilv_run.h"
#include "kernels/cpu/x16_simd.h"

#define VNNI X16_VNNI
#define BODY X16_INLINE

/* Sub-block j's 16 scales as int32; Q4_K's 16 x for the low nibbles' (even
 * j), to match its high nibbles kept in place. */
BODY __m512i scale_of(const int q5, const uint8_t *o, int j) {
  const __m512i s = _mm512_cvtepu8_epi32(
      _mm_loadu_si128((const __m128i *)(o + PA_X16_K_HDR(q5) + PA_X16_K_SC + 16 * j)));
  return j % 2 || q5 ? s : _mm512_slli_epi32(s, 4);
}

/* kind: 0 Q4_K, 1 Q5_K (compile-time) */
BODY void run_body(const int kind, int64_t cols, const uint8_t *wg, const uint8_t *const *xp,
                   float *y, int64_t ldy, const int T, const pa_prefetch *stream) {
  const int q5 = kind == 1;
  const size_t rec = q5 ? PA_X16_REC_K5 : PA_X16_REC_K;
  const int64_t nsb = cols / QK_K;
  const int pf = pa_prefetch_distance(stream, stream ? stream->avx512 : 0, T);
  const __m512i m_lo = _mm512_set1_epi8(0x0F), m_hi = _mm512_set1_epi8((char)0xF0);
  __m512 acc[PA_X16_TOKENS];
#pragma GCC unroll 8
  for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nsb; b++) {
    const uint8_t *o = wg + (size_t)b * rec;
    if (pf) /* weights from memory: ask for them ahead (kernels.h) */
      for (size_t c = 0; c < rec; c += 64) _mm_prefetch((const char *)o + pf + c, _MM_HINT_T1);
    const uint8_t *x[PA_X16_TOKENS];
    __m512i isum[PA_X16_TOKENS], ps[8]; /* ps: one token's 8 sub-block sums */
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) {
      x[t] = xp[t] + (size_t)b * PA_X16_XREC_K;
      isum[t] = _mm512_setzero_si512();
    }
    /* a pair of sub-blocks at a time, two chains a token, the record's
     * bytes in order: on AMD Zen 4 the 4 pairs side by side (8 chains,
     * the loads jumping 512 bytes) read one core's stream from memory at
     * 0.39 of a plain read against 0.88 in order (bench_kernels 1 vsread
     * 256 Q4_K, BENCH_ILV=1 BENCH_HUGE=1), at the same speed from L2 */
#pragma GCC unroll 4
    for (int p = 0; p < 4; p++) {
      /* one token: two chains per sum (integer sums: exact in any order) */
      const int NC = T == 1 ? 2 : 1;
      __m512i sl[2][PA_X16_TOKENS], sh[2][PA_X16_TOKENS];
#pragma GCC unroll 8
      for (int t = 0; t < T; t++)
        sl[0][t] = sh[0][t] = sl[1][t] = sh[1][t] = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int i = 0; i < 8; i++) {
        const int v = 8 * p + i;
        const __m512i q = _mm512_loadu_si512(o + PA_X16_K_QSV(q5, v));
        __m512i ql = _mm512_and_si512(q, m_lo), qh;
        if (q5) { /* fifth bits by k-mask; the high values shifted down (not 16x) */
          uint64_t kl, kh;
          memcpy(&kl, o + PA_X16_K_QHV(v), 8);
          memcpy(&kh, o + PA_X16_K_QHV(v) + 8, 8);
          qh = _mm512_and_si512(_mm512_srli_epi16(q, 4), m_lo);
          ql = _mm512_mask_add_epi8(ql, kl, ql, _mm512_set1_epi8(16));
          qh = _mm512_mask_add_epi8(qh, kh, qh, _mm512_set1_epi8(16));
        } else {
          qh = _mm512_and_si512(q, m_hi);
        }
        const int c = NC == 2 ? i & 1 : 0;
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
          sl[c][t] = _mm512_dpbusd_epi32(sl[c][t], ql, x16_bcast4(x[t] + 64 * p + 4 * i));
          sh[c][t] = _mm512_dpbusd_epi32(sh[c][t], qh, x16_bcast4(x[t] + 64 * p + 32 + 4 * i));
        }
      }
      if (NC == 2) {
        sl[0][0] = _mm512_add_epi32(sl[0][0], sl[1][0]);
        sh[0][0] = _mm512_add_epi32(sh[0][0], sh[1][0]);
      }
      if (T == 1) { /* the pair's sums kept; their scales after the last pair */
        ps[2 * p] = sl[0][0];
        ps[2 * p + 1] = sh[0][0];
        continue;
      }
      const __m512i cl = scale_of(q5, o, 2 * p), ch = scale_of(q5, o, 2 * p + 1);
#pragma GCC unroll 8
      for (int t = 0; t < T; t++)
        isum[t] = _mm512_add_epi32(isum[t], _mm512_add_epi32(_mm512_mullo_epi32(sl[0][t], cl),
                                                             _mm512_mullo_epi32(sh[0][t], ch)));
    }
    /* one token: the header read after the record's last weight vector,
     * so that its lines are asked for in address order (kernels/x16.h) */
    if (T == 1)
#pragma GCC unroll 8
      for (int j = 0; j < 8; j++)
        isum[0] = _mm512_add_epi32(isum[0], _mm512_mullo_epi32(ps[j], scale_of(q5, o, j)));
    __m512i mn[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++)
      mn[k] = _mm512_cvtepu8_epi16(
          _mm256_loadu_si256((const __m256i *)(o + PA_X16_K_HDR(q5) + PA_X16_K_MN + 32 * k)));
    const __m512 dl =
        _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(o + PA_X16_K_HDR(q5) + PA_X16_K_D)));
    const __m512 ml = _mm512_cvtph_ps(
        _mm256_loadu_si256((const __m256i *)(o + PA_X16_K_HDR(q5) + PA_X16_K_DMIN)));
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) {
      __m512i mi = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int k = 0; k < 4; k++)
        mi = _mm512_dpwssd_epi32(mi, mn[k], x16_bcast4(x[t] + PA_X16_K_XS + 4 * k));
      float dx;
      memcpy(&dx, x[t] + PA_X16_K_XD, 4);
      const __m512 vdx = _mm512_set1_ps(dx);
      /* Q4_K: the 16 x off, exactly */
      const __m512i sum = q5 ? isum[t] : _mm512_srai_epi32(isum[t], 4);
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(dl, vdx), acc[t]);
      acc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mi), _mm512_mul_ps(ml, vdx), acc[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; t++) _mm512_storeu_ps(y + t * ldy, acc[t]);
}

PA_ILV_RUN8(VNNI, run_q4_k, 0)
PA_ILV_RUN8(VNNI, run_q5_k, 1)

PA_X16_KERNEL(vnni, q4_k, PA_X16_TOKENS);
PA_X16_KERNEL(vnni, q5_k, PA_X16_TOKENS);

#endif /* __x86_64__ */
