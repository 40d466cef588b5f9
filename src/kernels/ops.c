/* ops.c: plain C float ops (see ops.h), and the choice of the SIMD
 * element-wise table (src/kernels/cpu/ops_avx2.c, ops_avx512.c). */
#include "kernels/ops.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "base/base.h"
#include "quant/quant.h"

/* Plain C twins that SIMD tables match bit for bit: no product and sum may
 * fuse into one rounding, whatever the target. */
PA_NO_FP_CONTRACT

/* The sum of squares in 8 independent double chains, joined by a fixed
 * tree: one chain was bound by the add latency (~1.3 us for a 576-float
 * row, a few percent of a decode step or a 16-token serving step, on the
 * calling thread while the pool waits). The chains are exact to well below
 * the float result's rounding. */
static void rmsnorm_plain(float *out, const float *x, const float *w, int64_t n, float eps) {
  double s[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; k++) s[k] += (double)x[i + k] * x[i + k];
  double ss = ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
  for (; i < n; i++) ss += (double)x[i] * x[i];
  float scale = (float)(1.0 / sqrt(ss / (double)n + (double)eps));
  if (w)
    for (int64_t i = 0; i < n; i++) out[i] = x[i] * scale * w[i];
  else
    for (int64_t i = 0; i < n; i++) out[i] = x[i] * scale;
}

void pa_rope_table_ext(float *cos_t, float *sin_t, int rope_dim, int32_t pos, float base, float freq_scale,
                       const float *freq_factors, float mscale) {
  for (int i = 0; i < rope_dim / 2; i++) {
    double inv = pow((double)base, -2.0 * i / rope_dim);
    double theta = (double)pos * inv * freq_scale;
    if (freq_factors) theta /= freq_factors[i];
    cos_t[i] = (float)(cos(theta) * mscale);
    sin_t[i] = (float)(sin(theta) * mscale);
  }
}

void pa_rope_table(float *cos_t, float *sin_t, int rope_dim, int32_t pos, float base,
                   float freq_scale, const float *freq_factors) {
  pa_rope_table_ext(cos_t, sin_t, rope_dim, pos, base, freq_scale, freq_factors, 1.0f);
}

void pa_softcap(float *x, float cap, int64_t n) {
  const float inv = 1.0f / cap;
  for (int64_t i = 0; i < n; i++) x[i] = cap * tanhf(x[i] * inv);
}

static void rope_plain(float *x, int n_heads, int head_dim, int rope_dim, const float *cos_t,
                       const float *sin_t, bool neox) {
  int half = rope_dim / 2;
  for (int h = 0; h < n_heads; h++) {
    float *v = x + (int64_t)h * head_dim;
    if (neox) {
      for (int i = 0; i < half; i++) {
        float a = v[i], b = v[i + half];
        v[i] = a * cos_t[i] - b * sin_t[i];
        v[i + half] = a * sin_t[i] + b * cos_t[i];
      }
    } else {
      for (int i = 0; i < half; i++) {
        float a = v[2 * i], b = v[2 * i + 1];
        v[2 * i] = a * cos_t[i] - b * sin_t[i];
        v[2 * i + 1] = a * sin_t[i] + b * cos_t[i];
      }
    }
  }
}

/* ---- exp and the gates: plain C twins of ops_avx2.c / ops_avx512.c ---- */

static inline float bits_to_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* The algorithm of ops.h, one element: no FMA (baseline x86-64 has none). */
static inline float exp_plain(float x) {
  float xc = PA_EXP_HI < x ? PA_EXP_HI : x; /* NaN stays NaN */
  xc = xc < -88.0f ? -88.0f : xc;
  const float magic = 12582912.0f;          /* 1.5 * 2^23: adding it rounds to an integer */
  float n = (xc * PA_EXP_LOG2E + magic) - magic;
  float r = xc - n * PA_EXP_C1;
  r = r - n * PA_EXP_C2;
  float p = PA_EXP_P0;
  p = p * r + PA_EXP_P1;
  p = p * r + PA_EXP_P2;
  p = p * r + PA_EXP_P3;
  p = p * r + PA_EXP_P4;
  p = p * r + PA_EXP_P5;
  p = p * (r * r) + r + 1.0f;
  /* n is in [-127, 127] here (NaN aside): 2^n from its exponent bits;
   * n = -127 only when x < PA_EXP_LO, which gives 0 below */
  int32_t e = (n >= -127.0f && n <= 127.0f ? (int32_t)n : 0) + 127;
  float y = p * bits_to_f32((uint32_t)(e > 0 ? e : 0) << 23);
  return x < PA_EXP_LO ? 0.0f : y;
}

static void exp_plain_rows(float *y, const float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = exp_plain(x[i]);
}

static void silu_mul_plain(float *gate, const float *up, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    float g = gate[i];
    gate[i] = g / (1.0f + exp_plain(-g)) * up[i];
  }
}

static void gelu_tanh_mul_plain(float *gate, const float *up, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    float g = gate[i];
    float z = g * (PA_GELU_K1 + PA_GELU_K2 * (g * g));
    gate[i] = g / (1.0f + exp_plain(z)) * up[i];
  }
}

static void f32_to_f16_plain(uint16_t *y, const float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = pa_f32_to_f16(x[i]);
}

static void f16_to_f32_plain(float *y, const uint16_t *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = pa_f16_to_f32(x[i]);
}

static float q8_row_plain(int8_t *q, const float *x, int64_t n) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; i++) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
  const float scale = amax / 127.0f;
  for (int64_t i = 0; i < n; i++) {
    float y = scale > 0.0f ? x[i] / scale : 0.0f;
    y = y == y ? y : 0.0f; /* NaN (or inf / inf) */
    y = y < 127.0f ? y : 127.0f;
    y = y > -127.0f ? y : -127.0f;
    /* roundf(y) without the call: y - trunc(y) is exact here */
    const float t = (float)(int32_t)y, f = y - t;
    q[i] = (int8_t)(int32_t)(t + (f >= 0.5f ? 1.0f : f <= -0.5f ? -1.0f : 0.0f));
  }
  return scale;
}

static void add_plain(float *x, const float *y, int64_t n) {
  for (int64_t i = 0; i < n; i++) x[i] += y[i];
}

static const pa_ops_kernels table_plain = {"plain",          exp_plain_rows,   silu_mul_plain,
                                           gelu_tanh_mul_plain, f32_to_f16_plain, f16_to_f32_plain,
                                           q8_row_plain,     rmsnorm_plain,    rope_plain,
                                           add_plain};
#if defined(__x86_64__) /* ops_avx2.c, ops_avx512.c */
static const pa_ops_kernels table_avx2 = {"avx2",          pa_exp_avx2,        pa_silu_mul_avx2,
                                          pa_gelu_tanh_mul_avx2, pa_f32_to_f16_avx2, pa_f16_to_f32_avx2,
                                          pa_q8_row_avx2,  pa_rmsnorm_avx2,    pa_rope_avx2,
                                          pa_add_avx2};
static const pa_ops_kernels table_avx512 = {"avx512",          pa_exp_avx512,        pa_silu_mul_avx512,
                                            pa_gelu_tanh_mul_avx512, pa_f32_to_f16_avx512, pa_f16_to_f32_avx512,
                                            pa_q8_row_avx512,  pa_rmsnorm_avx512,    pa_rope_avx512,
                                            pa_add_avx512};

const pa_ops_kernels *pa_ops_avx2(void) {
  const pa_cpu_features *f = pa_cpu();
  return f->avx2 && f->fma && f->f16c ? &table_avx2 : NULL;
}

const pa_ops_kernels *pa_ops_avx512(void) {
  const pa_cpu_features *f = pa_cpu();
  return f->avx2 && f->fma && f->f16c && f->avx512f ? &table_avx512 : NULL;
}
#else
const pa_ops_kernels *pa_ops_avx2(void) { return NULL; }
const pa_ops_kernels *pa_ops_avx512(void) { return NULL; }
#endif

const pa_ops_kernels *pa_ops_plain(void) { return &table_plain; }

static _Atomic(const pa_ops_kernels *) best;

const pa_ops_kernels *pa_ops_best(void) {
  const pa_ops_kernels *k = atomic_load_explicit(&best, memory_order_relaxed);
  if (k) return k;
  k = pa_ops_avx512();
  if (!k) k = pa_ops_avx2();
  if (!k) k = pa_ops_plain();
  atomic_store_explicit(&best, k, memory_order_relaxed);
  return k;
}

void pa_exp(float *y, const float *x, int64_t n) { pa_ops_best()->exp(y, x, n); }
void pa_rmsnorm(float *out, const float *x, const float *w, int64_t n, float eps) {
  pa_ops_best()->rmsnorm(out, x, w, n, eps);
}
void pa_rope(float *x, int n_heads, int head_dim, int rope_dim, const float *cos_t, const float *sin_t, bool neox) {
  pa_ops_best()->rope(x, n_heads, head_dim, rope_dim, cos_t, sin_t, neox);
}
void pa_silu_mul(float *gate, const float *up, int64_t n) { pa_ops_best()->silu_mul(gate, up, n); }
void pa_gelu_tanh_mul(float *gate, const float *up, int64_t n) {
  pa_ops_best()->gelu_tanh_mul(gate, up, n);
}

void pa_softmax(float *x, int64_t n) {
  float mx = -INFINITY;
  for (int64_t i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
  for (int64_t i = 0; i < n; i++) x[i] -= mx;
  pa_exp(x, x, n);
  double sum = 0.0;
  for (int64_t i = 0; i < n; i++) sum += x[i];
  float inv = (float)(1.0 / sum);
  for (int64_t i = 0; i < n; i++) x[i] *= inv;
}

void pa_add(float *x, const float *y, int64_t n) { pa_ops_best()->add(x, y, n); }

void pa_scale(float *x, float s, int64_t n) {
  for (int64_t i = 0; i < n; i++) x[i] *= s;
}

float pa_dot_f32(const float *a, const float *b, int64_t n) {
  float s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    s0 += a[i] * b[i];
    s1 += a[i + 1] * b[i + 1];
    s2 += a[i + 2] * b[i + 2];
    s3 += a[i + 3] * b[i + 3];
    s4 += a[i + 4] * b[i + 4];
    s5 += a[i + 5] * b[i + 5];
    s6 += a[i + 6] * b[i + 6];
    s7 += a[i + 7] * b[i + 7];
  }
  for (; i < n; i++) s0 += a[i] * b[i];
  return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7));
}

void pa_axpy(float *y, float a, const float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}
