/* ops_avx2.c: exp, SiLU and GELU-tanh gates over float rows with AVX2 and
 * FMA (8 lanes), the algorithm of ops.h. Built for baseline x86-64: the
 * functions carry target attributes and are reached only through
 * pa_ops_avx2() (kernels/ops.c), which checks the CPU. The last partial
 * vector goes through a padded copy, so an element's bits never depend on
 * where it sits. */
#if defined(__x86_64__) /* x86 SIMD; other targets have the plain C tables */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/cpu/simd_masks.h"
#include "kernels/ops.h"
#include "quant/quant.h"

#define AVX2 __attribute__((target("avx2,fma")))
#define BODY static inline __attribute__((always_inline)) AVX2

BODY __m256 exp8(__m256 x) {
  __m256 xc = _mm256_min_ps(_mm256_set1_ps(PA_EXP_HI), x); /* NaN: the second operand */
  xc = _mm256_max_ps(_mm256_set1_ps(-88.0f), xc);
  __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(PA_EXP_LOG2E)),
                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(PA_EXP_C1), xc);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(PA_EXP_C2), r);
  __m256 p = _mm256_set1_ps(PA_EXP_P0);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(PA_EXP_P1));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(PA_EXP_P2));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(PA_EXP_P3));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(PA_EXP_P4));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(PA_EXP_P5));
  p = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
  __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
  e = _mm256_max_epi32(e, _mm256_setzero_si256());
  __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(e, 23)));
  __m256 under = _mm256_cmp_ps(x, _mm256_set1_ps(PA_EXP_LO), _CMP_LT_OQ);
  return _mm256_andnot_ps(under, y);
}

BODY __m256 silu8(__m256 g) {
  __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), g));
  return _mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

BODY __m256 gelu8(__m256 g) {
  __m256 k = _mm256_fmadd_ps(_mm256_set1_ps(PA_GELU_K2), _mm256_mul_ps(g, g), _mm256_set1_ps(PA_GELU_K1));
  __m256 e = exp8(_mm256_mul_ps(g, k));
  return _mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

AVX2 void pa_exp_avx2(float *y, const float *x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, exp8(_mm256_loadu_ps(x + i)));
  if (i < n) {
    float b[8] = {0};
    memcpy(b, x + i, (size_t)(n - i) * sizeof(float));
    _mm256_storeu_ps(b, exp8(_mm256_loadu_ps(b)));
    memcpy(y + i, b, (size_t)(n - i) * sizeof(float));
  }
}

AVX2 void pa_add_avx2(float *x, const float *y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(x + i, _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; i++) x[i] += y[i];
}

AVX2 void pa_silu_mul_avx2(float *gate, const float *up, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(gate + i, _mm256_mul_ps(silu8(_mm256_loadu_ps(gate + i)), _mm256_loadu_ps(up + i)));
  if (i < n) {
    float g[8] = {0}, u[8] = {0};
    memcpy(g, gate + i, (size_t)(n - i) * sizeof(float));
    memcpy(u, up + i, (size_t)(n - i) * sizeof(float));
    _mm256_storeu_ps(g, _mm256_mul_ps(silu8(_mm256_loadu_ps(g)), _mm256_loadu_ps(u)));
    memcpy(gate + i, g, (size_t)(n - i) * sizeof(float));
  }
}

AVX2 void pa_gelu_tanh_mul_avx2(float *gate, const float *up, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(gate + i, _mm256_mul_ps(gelu8(_mm256_loadu_ps(gate + i)), _mm256_loadu_ps(up + i)));
  if (i < n) {
    float g[8] = {0}, u[8] = {0};
    memcpy(g, gate + i, (size_t)(n - i) * sizeof(float));
    memcpy(u, up + i, (size_t)(n - i) * sizeof(float));
    _mm256_storeu_ps(g, _mm256_mul_ps(gelu8(_mm256_loadu_ps(g)), _mm256_loadu_ps(u)));
    memcpy(gate + i, g, (size_t)(n - i) * sizeof(float));
  }
}

/* ---- a Q8 KV row (ops.h): the plain version's operations, 8 at a time ---- */

__attribute__((target("avx2,fma"))) float pa_q8_row_avx2(int8_t *q, const float *x, int64_t n) {
  const float scale = pa_absmax8(x, n) / 127.0f;
  const __m256 vs = _mm256_set1_ps(scale), top = _mm256_set1_ps(127.0f), bot = _mm256_set1_ps(-127.0f);
  const __m256 half = _mm256_set1_ps(0.5f), mhalf = _mm256_set1_ps(-0.5f), one = _mm256_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 8) {
    __m256 y = scale > 0.0f ? _mm256_div_ps(_mm256_maskload_ps(x + i, pa_lanes8(n - i)), vs) : _mm256_setzero_ps();
    y = _mm256_and_ps(y, _mm256_cmp_ps(y, y, _CMP_ORD_Q));
    y = _mm256_max_ps(_mm256_min_ps(y, top), bot);
    const __m256 t = _mm256_cvtepi32_ps(_mm256_cvttps_epi32(y)), f = _mm256_sub_ps(y, t);
    const __m256 up = _mm256_and_ps(one, _mm256_cmp_ps(f, half, _CMP_GE_OQ));
    const __m256 down = _mm256_and_ps(one, _mm256_cmp_ps(f, mhalf, _CMP_LE_OQ));
    const __m256i r = _mm256_cvttps_epi32(_mm256_sub_ps(_mm256_add_ps(t, up), down));
    const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    int8_t out[8];
    _mm_storel_epi64((__m128i *)out, _mm_packs_epi16(w, w));
    memcpy(q + i, out, (size_t)(n - i < 8 ? n - i : 8));
  }
  return scale;
}

/* ---- half <-> float (F16C): 8 at a time, the tail through a small buffer ---- */

__attribute__((target("avx2,fma,f16c"))) void pa_f32_to_f16_avx2(uint16_t *y, const float *x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  if (i < n) {
    float in[8] = {0};
    uint16_t out[8];
    memcpy(in, x + i, (size_t)(n - i) * sizeof(float));
    _mm_storeu_si128((__m128i *)out, _mm256_cvtps_ph(_mm256_loadu_ps(in), _MM_FROUND_TO_NEAREST_INT));
    memcpy(y + i, out, (size_t)(n - i) * sizeof(uint16_t));
  }
}

__attribute__((target("avx2,fma,f16c"))) void pa_f16_to_f32_avx2(float *y, const uint16_t *x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
  if (i < n) {
    uint16_t in[8] = {0};
    float out[8];
    memcpy(in, x + i, (size_t)(n - i) * sizeof(uint16_t));
    _mm256_storeu_ps(out, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)in)));
    memcpy(y + i, out, (size_t)(n - i) * sizeof(float));
  }
}

/* ---- rmsnorm and RoPE with the plain versions' bits (ops.h): no product
 * and sum may fuse into one rounding from here on ---- */
PA_NO_FP_CONTRACT

AVX2 void pa_rmsnorm_avx2(float *out, const float *x, const float *w, int64_t n, float eps) {
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd(); /* chains 0-3 and 4-7 */
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256d a = _mm256_cvtps_pd(_mm_loadu_ps(x + i)), b = _mm256_cvtps_pd(_mm_loadu_ps(x + i + 4));
    lo = _mm256_fmadd_pd(a, a, lo);
    hi = _mm256_fmadd_pd(b, b, hi);
  }
  double s[8];
  _mm256_storeu_pd(s, lo);
  _mm256_storeu_pd(s + 4, hi);
  double ss = ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
  for (; i < n; i++) ss += (double)x[i] * x[i];
  const __m256 scale = _mm256_set1_ps((float)(1.0 / sqrt(ss / (double)n + (double)eps)));
  /* whole vectors with plain loads and stores, the tail masked (a masked
   * store costs Zen 3 about ten times a plain one: 16 rows of 576 took
   * ~9 us masked throughout, ~2.8 us so) */
  for (i = 0; i + 8 <= n; i += 8) {
    __m256 y = _mm256_mul_ps(_mm256_loadu_ps(x + i), scale);
    if (w) y = _mm256_mul_ps(y, _mm256_loadu_ps(w + i));
    _mm256_storeu_ps(out + i, y);
  }
  if (i < n) {
    const __m256i m = pa_lanes8(n - i);
    __m256 y = _mm256_mul_ps(_mm256_maskload_ps(x + i, m), scale);
    if (w) y = _mm256_mul_ps(y, _mm256_maskload_ps(w + i, m));
    _mm256_maskstore_ps(out + i, m, y);
  }
}

/* One chunk of RoPE: NEOX, elements i .. i + 7 of each half (and their
 * cos / sin); else pairs i .. i + 3 (8 floats). MASKED for a partial
 * chunk (n its lanes), plain loads and stores for whole ones (see the
 * norm's masked stores). */
static inline __attribute__((always_inline)) AVX2 void rope_chunk(float *v, int half, int i, const float *cos_t,
                                                                  const float *sin_t, bool neox, bool masked) {
  const __m256i dup = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
  if (neox) {
    const __m256i m = pa_lanes8(half - i);
    const __m256 a = masked ? _mm256_maskload_ps(v + i, m) : _mm256_loadu_ps(v + i);
    const __m256 b = masked ? _mm256_maskload_ps(v + i + half, m) : _mm256_loadu_ps(v + i + half);
    const __m256 c = masked ? _mm256_maskload_ps(cos_t + i, m) : _mm256_loadu_ps(cos_t + i);
    const __m256 s = masked ? _mm256_maskload_ps(sin_t + i, m) : _mm256_loadu_ps(sin_t + i);
    const __m256 ya = _mm256_sub_ps(_mm256_mul_ps(a, c), _mm256_mul_ps(b, s));
    const __m256 yb = _mm256_add_ps(_mm256_mul_ps(a, s), _mm256_mul_ps(b, c));
    if (masked) {
      _mm256_maskstore_ps(v + i, m, ya);
      _mm256_maskstore_ps(v + i + half, m, yb);
    } else {
      _mm256_storeu_ps(v + i, ya);
      _mm256_storeu_ps(v + i + half, yb);
    }
    return;
  }
  const int np = half - i < 4 ? half - i : 4;
  const __m256i m = pa_lanes8(2 * (int64_t)np), mt = pa_lanes8(np);
  const __m256 xv = masked ? _mm256_maskload_ps(v + 2 * i, m) : _mm256_loadu_ps(v + 2 * i);
  const __m128 c4 = masked ? _mm_maskload_ps(cos_t + i, _mm256_castsi256_si128(mt)) : _mm_loadu_ps(cos_t + i);
  const __m128 s4 = masked ? _mm_maskload_ps(sin_t + i, _mm256_castsi256_si128(mt)) : _mm_loadu_ps(sin_t + i);
  const __m256 c = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(c4), dup);
  const __m256 s = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(s4), dup);
  /* even lanes a c - b s; odd lanes b c + a s (= a s + b c exactly) */
  const __m256 y = _mm256_addsub_ps(_mm256_mul_ps(xv, c), _mm256_mul_ps(_mm256_permute_ps(xv, 0xB1), s));
  if (masked)
    _mm256_maskstore_ps(v + 2 * i, m, y);
  else
    _mm256_storeu_ps(v + 2 * i, y);
}

AVX2 void pa_rope_avx2(float *x, int n_heads, int head_dim, int rope_dim, const float *cos_t, const float *sin_t,
                       bool neox) {
  const int half = rope_dim / 2, step = neox ? 8 : 4;
  for (int h = 0; h < n_heads; h++) {
    float *v = x + (int64_t)h * head_dim;
    int i = 0;
    for (; i + step <= half; i += step) rope_chunk(v, half, i, cos_t, sin_t, neox, false);
    if (i < half) rope_chunk(v, half, i, cos_t, sin_t, neox, true);
  }
}

#endif /* __x86_64__ */
