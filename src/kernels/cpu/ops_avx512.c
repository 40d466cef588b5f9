/* ops_avx512.c: exp, SiLU and GELU-tanh gates over float rows with
 * AVX-512 (16 lanes), the algorithm of ops.h with FMA. Built for baseline
 * x86-64: the functions carry target attributes and are reached only through
 * pa_ops_avx512() (kernels/ops.c), which checks the CPU. The tail is a
 * masked vector, so an element's bits never depend on where it sits. */
#if defined(__x86_64__) /* x86 SIMD; other targets have the plain C tables */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/cpu/simd_masks.h"
#include "kernels/ops.h"
#include "quant/quant.h"

#define AVX512 __attribute__((target("avx512f,avx2,fma,f16c")))
#define BODY static inline __attribute__((always_inline)) AVX512

BODY __m512 exp16(__m512 x) {
  __m512 xc = _mm512_min_ps(_mm512_set1_ps(PA_EXP_HI), x); /* NaN: the second operand */
  xc = _mm512_max_ps(_mm512_set1_ps(-88.0f), xc);
  __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(PA_EXP_LOG2E)),
                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(PA_EXP_C1), xc);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(PA_EXP_C2), r);
  __m512 p = _mm512_set1_ps(PA_EXP_P0);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(PA_EXP_P1));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(PA_EXP_P2));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(PA_EXP_P3));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(PA_EXP_P4));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(PA_EXP_P5));
  p = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
  __m512i e = _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127));
  e = _mm512_max_epi32(e, _mm512_setzero_si512());
  __m512 y = _mm512_mul_ps(p, _mm512_castsi512_ps(_mm512_slli_epi32(e, 23)));
  __mmask16 under = _mm512_cmp_ps_mask(x, _mm512_set1_ps(PA_EXP_LO), _CMP_LT_OQ);
  return _mm512_mask_mov_ps(y, under, _mm512_setzero_ps());
}

BODY __m512 silu16(__m512 g) {
  __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), g));
  return _mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

BODY __m512 gelu16(__m512 g) {
  __m512 k = _mm512_fmadd_ps(_mm512_set1_ps(PA_GELU_K2), _mm512_mul_ps(g, g), _mm512_set1_ps(PA_GELU_K1));
  __m512 e = exp16(_mm512_mul_ps(g, k));
  return _mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

AVX512 void pa_exp_avx512(float *y, const float *x, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = pa_lanes16(n - i);
    _mm512_mask_storeu_ps(y + i, m, exp16(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

AVX512 void pa_silu_mul_avx512(float *gate, const float *up, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = pa_lanes16(n - i);
    __m512 g = silu16(_mm512_maskz_loadu_ps(m, gate + i));
    _mm512_mask_storeu_ps(gate + i, m, _mm512_mul_ps(g, _mm512_maskz_loadu_ps(m, up + i)));
  }
}

AVX512 void pa_add_avx512(float *x, const float *y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(x + i, _mm512_add_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
  if (i < n) {
    const __mmask16 m = pa_lanes16(n - i);
    const __m512 a = _mm512_maskz_loadu_ps(m, x + i), b = _mm512_maskz_loadu_ps(m, y + i);
    _mm512_mask_storeu_ps(x + i, m, _mm512_add_ps(a, b));
  }
}

AVX512 void pa_gelu_tanh_mul_avx512(float *gate, const float *up, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = pa_lanes16(n - i);
    __m512 g = gelu16(_mm512_maskz_loadu_ps(m, gate + i));
    _mm512_mask_storeu_ps(gate + i, m, _mm512_mul_ps(g, _mm512_maskz_loadu_ps(m, up + i)));
  }
}

/* ---- half <-> float: 16 at a time, the tail masked ---- */

AVX512 void pa_f32_to_f16_avx512(uint16_t *y, const float *x, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256((__m256i *)(y + i), _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  if (i < n) {
    uint16_t out[16];
    const __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);
    _mm256_storeu_si256((__m256i *)out,
                        _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + i), _MM_FROUND_TO_NEAREST_INT));
    memcpy(y + i, out, (size_t)(n - i) * sizeof(uint16_t));
  }
}

AVX512 void pa_f16_to_f32_avx512(float *y, const uint16_t *x, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(x + i))));
  if (i < n) {
    uint16_t in[16] = {0};
    memcpy(in, x + i, (size_t)(n - i) * sizeof(uint16_t));
    const __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);
    _mm512_mask_storeu_ps(y + i, m, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)in)));
  }
}

/* ---- a Q8 KV row (ops.h): the plain version's operations, 16 at a time ---- */

AVX512 float pa_q8_row_avx512(int8_t *q, const float *x, int64_t n) {
  const float scale = pa_absmax16(x, n) / 127.0f;
  const __m512 vs = _mm512_set1_ps(scale), top = _mm512_set1_ps(127.0f), bot = _mm512_set1_ps(-127.0f);
  const __m512 half = _mm512_set1_ps(0.5f), mhalf = _mm512_set1_ps(-0.5f), one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = pa_lanes16(n - i);
    __m512 y = scale > 0.0f ? _mm512_div_ps(_mm512_maskz_loadu_ps(m, x + i), vs) : _mm512_setzero_ps();
    y = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(y, y, _CMP_ORD_Q), y);
    y = _mm512_max_ps(_mm512_min_ps(y, top), bot);
    const __m512 t = _mm512_cvtepi32_ps(_mm512_cvttps_epi32(y)), f = _mm512_sub_ps(y, t);
    __m512 r = _mm512_mask_add_ps(t, _mm512_cmp_ps_mask(f, half, _CMP_GE_OQ), t, one);
    r = _mm512_mask_sub_ps(r, _mm512_cmp_ps_mask(f, mhalf, _CMP_LE_OQ), t, one);
    _mm512_mask_cvtepi32_storeu_epi8(q + i, m, _mm512_cvttps_epi32(r));
  }
  return scale;
}

/* ---- rmsnorm and RoPE with the plain versions' bits (ops.h): no product
 * and sum may fuse into one rounding from here on ---- */
PA_NO_FP_CONTRACT

AVX512 void pa_rmsnorm_avx512(float *out, const float *x, const float *w, int64_t n, float eps) {
  __m512d acc = _mm512_setzero_pd(); /* lane k: the plain version's chain k */
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m512d v = _mm512_cvtps_pd(_mm256_loadu_ps(x + i));
    acc = _mm512_fmadd_pd(v, v, acc);
  }
  double s[8];
  _mm512_storeu_pd(s, acc);
  double ss = ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
  for (; i < n; i++) ss += (double)x[i] * x[i];
  const __m512 scale = _mm512_set1_ps((float)(1.0 / sqrt(ss / (double)n + (double)eps)));
  for (i = 0; i < n; i += 16) {
    const __mmask16 m = pa_lanes16(n - i);
    __m512 y = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), scale);
    if (w) y = _mm512_mul_ps(y, _mm512_maskz_loadu_ps(m, w + i));
    _mm512_mask_storeu_ps(out + i, m, y);
  }
}

AVX512 void pa_rope_avx512(float *x, int n_heads, int head_dim, int rope_dim, const float *cos_t,
                           const float *sin_t, bool neox) {
  const int half = rope_dim / 2;
  /* adjacent pairs: each table entry twice, and the pair's other element */
  const __m512i dup = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
  for (int h = 0; h < n_heads; h++) {
    float *v = x + (int64_t)h * head_dim;
    if (neox) {
      for (int i = 0; i < half; i += 16) {
        const __mmask16 m = pa_lanes16(half - i);
        const __m512 a = _mm512_maskz_loadu_ps(m, v + i), b = _mm512_maskz_loadu_ps(m, v + i + half);
        const __m512 c = _mm512_maskz_loadu_ps(m, cos_t + i), s = _mm512_maskz_loadu_ps(m, sin_t + i);
        _mm512_mask_storeu_ps(v + i, m, _mm512_sub_ps(_mm512_mul_ps(a, c), _mm512_mul_ps(b, s)));
        _mm512_mask_storeu_ps(v + i + half, m, _mm512_add_ps(_mm512_mul_ps(a, s), _mm512_mul_ps(b, c)));
      }
    } else {
      for (int i = 0; i < half; i += 8) { /* pairs i .. i + 7: 16 floats */
        const int np = half - i < 8 ? half - i : 8;
        const __mmask16 m = pa_lanes16(2 * (int64_t)np);
        const __mmask16 mt = pa_lanes16(np);
        const __m512 xv = _mm512_maskz_loadu_ps(m, v + 2 * i);
        const __m512 c = _mm512_permutexvar_ps(dup, _mm512_maskz_loadu_ps(mt, cos_t + i));
        const __m512 s = _mm512_permutexvar_ps(dup, _mm512_maskz_loadu_ps(mt, sin_t + i));
        const __m512 t1 = _mm512_mul_ps(xv, c);                              /* a c | b c */
        const __m512 t2 = _mm512_mul_ps(_mm512_permute_ps(xv, 0xB1), s);   /* b s | a s */
        /* even lanes a c - b s; odd lanes b c + a s (= a s + b c exactly) */
        _mm512_mask_storeu_ps(v + 2 * i, m, _mm512_mask_add_ps(_mm512_sub_ps(t1, t2), 0xAAAA, t1, t2));
      }
    }
  }
}

#endif /* __x86_64__ */
