/* x16_avx512.c: the AVX-512 VNNI kernels of the 16-row interleaved layout
 * (kernels/x16.h), for one to PA_X16_TOKENS tokens at a time. They follow
 * the layout's canonical arithmetic step for step, so their bits equal the
 * reference's (x16.c) and do not depend on how many tokens share a call.
 *
 * Per group of 16 rows and block: 8 weight vectors (Q8_0: 8 loads; Q4:
 * 4 loads, the nibbles split with 12 operations), shared by the tokens;
 * per token 8 vpdpbusd whose activation operand is a 4-byte broadcast
 * from memory, one add of the two partial sums, the offset (or the Q4_1
 * min's fma), one conversion, one multiply of scales and one fma:
 * 12-13 vector operations for 16 x 32 multiply-adds, where the file
 * layout's kernels spend about as much on each block's scale and lanes as
 * on its dot. */
#if defined(__x86_64__) /* x86 SIMD; other targets have the plain C tables */
#include <immintrin.h>
#include <string.h>

#include "kernels/x16.h"

PA_NO_FP_CONTRACT

#include "kernels/cpu/ilv_run.h"
#include "kernels/cpu/x16_simd.h"

#define VNNI X16_VNNI
#define BODY X16_INLINE

BODY void run_body(const int kind, int64_t cols, const uint8_t *wg, const uint8_t *const *xp,
                   float *y, int64_t ldy, const int T, const pa_prefetch *stream) {
  const int64_t nb = cols / 32;
  const size_t rec = x16_rec(kind);
  const int pf = pa_prefetch_distance(stream, stream ? stream->avx512 : 0, T);
  __m512 acc[PA_X16_TOKENS];
#pragma GCC unroll 8
  for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *o = wg + (size_t)b * rec;
    if (pf) /* weights from memory: ask for them ahead (kernels.h) */
      for (size_t c = 0; c < rec; c += 64)
        _mm_prefetch((const char *)o + pf + c, _MM_HINT_T1);
    __m512i w[8];
    x16_unpack(kind, o, w);
    __m512 dl, ml;
    x16_scales(kind, o, &dl, &ml);
    if (T <= 4) {
#pragma GCC unroll 4
      for (int t = 0; t < T; t++) {
        const uint8_t *x = xp[t] + (size_t)b * PA_X16_XREC;
        /* two chains per token: few tokens to overlap */
        acc[t] = x16_step(kind, x16_dot32(w, x), dl, ml, x, acc[t]);
      }
    } else {
      /* one chain per token, the tokens' steps adjacent in the program so
       * that their chains overlap without a deep scheduler window */
      const uint8_t *x[PA_X16_TOKENS];
      __m512i sum[PA_X16_TOKENS];
#pragma GCC unroll 8
      for (int t = 0; t < T; t++) {
        x[t] = xp[t] + (size_t)b * PA_X16_XREC;
        sum[t] = _mm512_setzero_si512();
      }
#pragma GCC unroll 8
      for (int i = 0; i < 8; i++)
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) sum[t] = _mm512_dpbusd_epi32(sum[t], w[i], x16_bcast4(x[t] + 4 * i));
#pragma GCC unroll 8
      for (int t = 0; t < T; t++) acc[t] = x16_step(kind, sum[t], dl, ml, x[t], acc[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; t++) _mm512_storeu_ps(y + t * ldy, acc[t]);
}

PA_ILV_RUN8(VNNI, run_q8_0, K_Q8_0)
PA_ILV_RUN8(VNNI, run_q4_0, K_Q4_0)
PA_ILV_RUN8(VNNI, run_q4_1, K_Q4_1)
PA_ILV_RUN8(VNNI, run_q5_0, K_Q5_0)

PA_X16_KERNEL(vnni, q8_0, PA_X16_TOKENS);
PA_X16_KERNEL(vnni, q4_0, PA_X16_TOKENS);
PA_X16_KERNEL(vnni, q4_1, PA_X16_TOKENS);
PA_X16_KERNEL(vnni, q5_0, PA_X16_TOKENS);

#endif /* __x86_64__ */
