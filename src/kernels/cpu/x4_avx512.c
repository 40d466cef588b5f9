/* x4_avx512.c: the AVX-512 VNNI kernels of the x4 layout (Q4_K, Q5_K)
 * (kernels/x4.h), for one to PA_X4_TOKENS tokens at a time. It follows the
 * layout's canonical arithmetic step for step, so its bits equal the
 * reference's (x4.c) and do not depend on how many tokens share a call.
 *
 * Per group of 4 rows and super-block: 8 loads of 64 weight bytes, 16 ands
 * (the high nibbles stay in place: 16x, taken out by the scale), and per
 * token 16 vpdpbusd against 16-byte activation patterns broadcast to the
 * 4 rows, one vpdpwssd for the mins, 3 conversions and 4 float operations;
 * the scales as floats (2 zero-extensions, conversions and multiplies, 3
 * permutes) are shared by the tokens. About 13 vector operations per row
 * and super-block for one token, against ~25 for the file layout's
 * one-token kernel (avx512.c), where every sub-block sum has to be widened
 * or reduced across lanes before its scale applies. */
#include <immintrin.h>
#include <string.h>

#include "kernels/cpu/ilv_run.h"
#include "kernels/x4.h"

PA_NO_FP_CONTRACT

#define VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")))
#define BODY static inline __attribute__((always_inline)) VNNI

BODY __m512i bcast16(const uint8_t *p) {
  return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)p));
}

BODY void run_body(const int q5, int64_t cols, const uint8_t *wg, const uint8_t *const *xp,
                   float *y, int64_t ldy, const int T) {
  const int64_t nsb = cols / QK_K;
  const size_t rec = q5 ? PA_X4_REC5 : PA_X4_REC;
  const __m512i m_lo = _mm512_set1_epi8(0x0F), m_hi = _mm512_set1_epi8((char)0xF0);
  const __m512i idx_d = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  const __m512i idx_m = _mm512_add_epi32(idx_d, _mm512_set1_epi32(4));
  const __m512 sixteenth = _mm512_set1_ps(0.0625f);
  __m512 acc[PA_X4_TOKENS];
#pragma GCC unroll 4
  for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nsb; b++) {
    const uint8_t *w = wg + (size_t)b * rec;
    if (T == 1) /* decode streams the weights: ask for them ahead, a record at a time */
      for (size_t c = 0; c < rec; c += 64)
        _mm_prefetch((const char *)w + PA_ILV_PREFETCH + c, _MM_HINT_T1);
    const __m512 dm =
        _mm512_castps256_ps512(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + PA_X4_DM))));
    const __m512 dr = _mm512_permutexvar_ps(idx_d, dm), mr = _mm512_permutexvar_ps(idx_m, dm);
    const __m512 s_lo = _mm512_mul_ps(
        _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(w + PA_X4_SC)))),
        dr);
    const __m512 s_hi = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(
                                          _mm_loadu_si128((const __m128i *)(w + PA_X4_SC + 16)))),
                                      q5 ? dr : _mm512_mul_ps(dr, sixteenth));
    const __m512i mn = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(w + PA_X4_MN)));
    /* two chains per sum for few tokens (integer sums: exact in any order),
     * so the vpdpbusd latency does not bound the one-token kernel */
    const int NA = T <= 2 ? 2 : 1;
    __m512i lo[2][PA_X4_TOKENS], hi[2][PA_X4_TOKENS];
#pragma GCC unroll 4
    for (int t = 0; t < T; t++)
      lo[0][t] = hi[0][t] = lo[1][t] = hi[1][t] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
      const __m512i q = _mm512_loadu_si512(w + PA_X4_QS + 64 * i);
      __m512i ql = _mm512_and_si512(q, m_lo), qh;
      if (q5) { /* fifth bits by k-mask; the high values shifted down (not 16x) */
        uint64_t kl, kh;
        memcpy(&kl, w + PA_X4_QH + 16 * i, 8);
        memcpy(&kh, w + PA_X4_QH + 16 * i + 8, 8);
        qh = _mm512_and_si512(_mm512_srli_epi16(q, 4), m_lo);
        ql = _mm512_mask_add_epi8(ql, kl, ql, _mm512_set1_epi8(16));
        qh = _mm512_mask_add_epi8(qh, kh, qh, _mm512_set1_epi8(16));
      } else {
        qh = _mm512_and_si512(q, m_hi);
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; t++) {
        const uint8_t *x = xp[t] + (size_t)b * PA_X4_XREC + 32 * i;
        const int a = NA == 2 ? (i & 1) : 0;
        lo[a][t] = _mm512_dpbusd_epi32(lo[a][t], ql, bcast16(x));
        hi[a][t] = _mm512_dpbusd_epi32(hi[a][t], qh, bcast16(x + 16));
      }
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) {
      const uint8_t *x = xp[t] + (size_t)b * PA_X4_XREC;
      const __m512i mi = _mm512_dpwssd_epi32(_mm512_setzero_si512(), mn, bcast16(x + PA_X4_XS));
      float dx;
      memcpy(&dx, x + PA_X4_XD, 4);
      const __m512i l = NA == 2 ? _mm512_add_epi32(lo[0][t], lo[1][t]) : lo[0][t];
      const __m512i h = NA == 2 ? _mm512_add_epi32(hi[0][t], hi[1][t]) : hi[0][t];
      __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(l), s_lo);
      v = _mm512_fmadd_ps(_mm512_cvtepi32_ps(h), s_hi, v);
      v = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mi), mr, v);
      acc[t] = _mm512_fmadd_ps(v, _mm512_set1_ps(dx), acc[t]);
    }
  }
  const __m512i idx_out = _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
#pragma GCC unroll 4
  for (int t = 0; t < T; t++) {
    __m512 a = _mm512_add_ps(acc[t], _mm512_permute_ps(acc[t], 0xB1)); /* l0 + l1, l2 + l3 */
    a = _mm512_add_ps(a, _mm512_permute_ps(a, 0x4E));                  /* (l0 + l1) + (l2 + l3) */
    _mm_storeu_ps(y + t * ldy, _mm512_castps512_ps128(_mm512_permutexvar_ps(idx_out, a)));
  }
}

PA_ILV_RUN4(VNNI, run_q4k, 0)
PA_ILV_RUN4(VNNI, run_q5k, 1)

const pa_ilv_kernel pa_x4_q4k_vnni = {4, PA_X4_TOKENS, pa_x4_x_size, pa_x4_pack_x, run_q4k};
const pa_ilv_kernel pa_x4_q5k_vnni = {4, PA_X4_TOKENS, pa_x4_x_size, pa_x4_pack_x, run_q5k};
