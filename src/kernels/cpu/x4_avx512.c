/* x4_avx512.c: the AVX-512 VNNI kernels of the x4 layout (Q4_K, Q5_K, Q6_K)
 * (kernels/x4.h), for one to 8 tokens at a time (Q6_K: 4). It follows the
 * layout's canonical arithmetic step for step, so its bits equal the
 * reference's (x4.c) and do not depend on how many tokens share a call.
 * 8 tokens against two calls of 4 share the weights' unpacking and scales
 * between twice as many tokens: prefill of 128 tokens 0.93-1.00 of the
 * time (1B Q4_K_M 0.93, 0.95, 1.00; 8B 0.97; Gemma 3 0.96, 1.01), 16-user
 * decode steps 0.96, 0.96, 0.97 (1B Q4_K_M), alternated in one process.
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
#define X4_VNNI_TOKENS 8 /* tokens per call of the Q4_K / Q5_K kernels here */

BODY __m512i bcast16(const uint8_t *p) {
  return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)p));
}

/* y[t * ldy + r] = (acc[4r] + acc[4r + 1]) + (acc[4r + 2] + acc[4r + 3]) of
 * each token's 16 lanes (x4.h) */
BODY void store_rows(const __m512 *acc, float *y, int64_t ldy, const int T) {
  const __m512i idx_out = _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
#pragma GCC unroll 8
  for (int t = 0; t < T; t++) {
    __m512 a = _mm512_add_ps(acc[t], _mm512_permute_ps(acc[t], 0xB1)); /* l0 + l1, l2 + l3 */
    a = _mm512_add_ps(a, _mm512_permute_ps(a, 0x4E));                  /* (l0 + l1) + (l2 + l3) */
    _mm_storeu_ps(y + t * ldy, _mm512_castps512_ps128(_mm512_permutexvar_ps(idx_out, a)));
  }
}

BODY void run_body45(const int q5, int64_t cols, const uint8_t *wg, const uint8_t *const *xp,
                     float *y, int64_t ldy, const int T, int stream) {
  const int64_t nsb = cols / QK_K;
  const size_t rec = q5 ? PA_X4_REC5 : PA_X4_REC;
  const int pf = pa_prefetch_distance(pa_prefetch_x4, T, stream);
  const __m512i m_lo = _mm512_set1_epi8(0x0F), m_hi = _mm512_set1_epi8((char)0xF0);
  const __m512i idx_d = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  const __m512i idx_m = _mm512_add_epi32(idx_d, _mm512_set1_epi32(4));
  const __m512 sixteenth = _mm512_set1_ps(0.0625f);
  __m512 acc[X4_VNNI_TOKENS];
#pragma GCC unroll 8
  for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nsb; b++) {
    const uint8_t *w = wg + (size_t)b * rec;
    if (pf) /* weights from memory: ask for them ahead (kernels.h) */
      for (size_t c = 0; c < rec; c += 64)
        _mm_prefetch((const char *)w + pf + c, _MM_HINT_T1);
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
    __m512i lo[2][X4_VNNI_TOKENS], hi[2][X4_VNNI_TOKENS];
#pragma GCC unroll 8
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
#pragma GCC unroll 8
      for (int t = 0; t < T; t++) {
        const uint8_t *x = xp[t] + (size_t)b * PA_X4_XREC + 32 * i;
        const int a = NA == 2 ? (i & 1) : 0;
        lo[a][t] = _mm512_dpbusd_epi32(lo[a][t], ql, bcast16(x));
        hi[a][t] = _mm512_dpbusd_epi32(hi[a][t], qh, bcast16(x + 16));
      }
    }
#pragma GCC unroll 8
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
  store_rows(acc, y, ldy, T);
}

/* Q6_K (x4.h): per group of 4 rows and super-block, 8 loads of 64 nibble
 * bytes and 4 of 64 top-bit bytes, the 6-bit values put together with a
 * shift, an and and a ternary-logic merge each (shared by the tokens); per
 * token 16 vpdpbusd into four sums, one per sub-block column k, each
 * multiplied by its lane's int8 scale (vpmulld), and the -32 x the
 * activations' 16-column sums taken off with two vpdpwssd of the scales
 * (times -32, in 16-bit pairs) against the sums in pairs; then one
 * conversion and one fma per 16 lanes. */
BODY void run_body6(int64_t cols, const uint8_t *wg, const uint8_t *const *xp, float *y,
                    int64_t ldy, const int T, int stream) {
  const int64_t nsb = cols / QK_K;
  const int pf = pa_prefetch_distance(pa_prefetch_x4, T, stream);
  const __m512i nib = _mm512_set1_epi8(0x0F), top = _mm512_set1_epi8(0x30);
  const __m512i idx_d = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  /* lane l = 4 r + p takes the activation sums 4 p + k: dwords 2 p, 2 p + 1
   * of the 16 int16 sums hold the pairs k = 0, 1 and k = 2, 3 */
  const __m512i idx_b01 = _mm512_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6);
  const __m512i idx_b23 = _mm512_add_epi32(idx_b01, _mm512_set1_epi32(1));
  __m512 acc[PA_X4_TOKENS];
#pragma GCC unroll 4
  for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nsb; b++) {
    const uint8_t *w = wg + (size_t)b * PA_X4_REC6;
    if (pf)
      for (size_t c = 0; c < PA_X4_REC6; c += 64)
        _mm_prefetch((const char *)w + pf + c, _MM_HINT_T1);
    /* scales: int32 per lane for the sums; -32 x scale in 16-bit pairs */
    __m512i sc[4], neg[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
      sc[k] = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(w + PA_X4_SC6 + 16 * k)));
      neg[k] = _mm512_slli_epi32(_mm512_sub_epi32(_mm512_setzero_si512(), sc[k]), 5);
    }
    const __m512i m01 = _mm512_mask_blend_epi16(0xAAAAAAAAu, neg[0], _mm512_slli_epi32(neg[1], 16));
    const __m512i m23 = _mm512_mask_blend_epi16(0xAAAAAAAAu, neg[2], _mm512_slli_epi32(neg[3], 16));
    __m512i D[4][PA_X4_TOKENS];
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) D[0][t] = D[1][t] = D[2][t] = D[3][t] = _mm512_setzero_si512();
    /* vectors 2 j and 2 j + 1 share top-bit vector j: bits 2 m, 2 m + 1 of
     * its bytes belong to vector 2 j + m / 2, half m % 2 */
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
      const __m512i qh = _mm512_loadu_si512(w + PA_X4_QH6 + 64 * j);
      const __m512i tops[4] = {
          _mm512_and_si512(_mm512_slli_epi16(qh, 4), top), _mm512_and_si512(_mm512_slli_epi16(qh, 2), top),
          _mm512_and_si512(qh, top), _mm512_and_si512(_mm512_srli_epi16(qh, 2), top)};
#pragma GCC unroll 2
      for (int v = 0; v < 2; v++) {
        const int i = 2 * j + v, k = i / 4;
        const __m512i q = _mm512_loadu_si512(w + 64 * i);
        /* (a & nib) | b: ternary-logic table 0xEC */
        const __m512i lo = _mm512_ternarylogic_epi32(q, tops[2 * v], nib, 0xEC);
        const __m512i hi = _mm512_ternarylogic_epi32(_mm512_srli_epi16(q, 4), tops[2 * v + 1], nib, 0xEC);
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
          const uint8_t *x = xp[t] + (size_t)b * PA_X4_XREC6 + 32 * i;
          D[k][t] = _mm512_dpbusd_epi32(D[k][t], lo, bcast16(x));
          D[2 + k][t] = _mm512_dpbusd_epi32(D[2 + k][t], hi, bcast16(x + 16));
        }
      }
    }
    const __m512 dm = _mm512_castps128_ps512(_mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(w + PA_X4_D6))));
    const __m512 dr = _mm512_permutexvar_ps(idx_d, dm);
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) {
      const uint8_t *x = xp[t] + (size_t)b * PA_X4_XREC6;
      const __m512i bs = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(x + PA_X4_XBS6)));
      __m512i s = _mm512_add_epi32(
          _mm512_add_epi32(_mm512_mullo_epi32(sc[0], D[0][t]), _mm512_mullo_epi32(sc[1], D[1][t])),
          _mm512_add_epi32(_mm512_mullo_epi32(sc[2], D[2][t]), _mm512_mullo_epi32(sc[3], D[3][t])));
      s = _mm512_dpwssd_epi32(s, m01, _mm512_permutexvar_epi32(idx_b01, bs));
      s = _mm512_dpwssd_epi32(s, m23, _mm512_permutexvar_epi32(idx_b23, bs));
      float dx;
      memcpy(&dx, x + PA_X4_XD6, 4);
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dr, _mm512_set1_ps(dx)), acc[t]);
    }
  }
  store_rows(acc, y, ldy, T);
}

/* The kernels' bodies (ilv_run.h): kind 0 Q4_K, 1 Q5_K, 2 Q6_K (compile-time). */
BODY void run_body(const int kind, int64_t cols, const uint8_t *wg, const uint8_t *const *xp,
                   float *y, int64_t ldy, const int T, int stream) {
  if (kind == 2)
    run_body6(cols, wg, xp, y, ldy, T, stream);
  else
    run_body45(kind, cols, wg, xp, y, ldy, T, stream);
}

/* Q4_K and Q5_K take up to 8 tokens a call, Q6_K 4 (its four sums per
 * token, D[4][T], would not fit the registers at 8). */
PA_ILV_RUN8(VNNI, run_q4k, 0)
PA_ILV_RUN8(VNNI, run_q5k, 1)
PA_ILV_RUN4(VNNI, run_q6k, 2)

const pa_ilv_kernel pa_x4_q4k_vnni = {4, X4_VNNI_TOKENS, pa_x4_x_size, pa_x4_pack_x, run_q4k};
const pa_ilv_kernel pa_x4_q5k_vnni = {4, X4_VNNI_TOKENS, pa_x4_x_size, pa_x4_pack_x, run_q5k};
const pa_ilv_kernel pa_x4_q6k_vnni = {4, PA_X4_TOKENS, pa_x4_x_size6, pa_x4_pack_x6, run_q6k};
