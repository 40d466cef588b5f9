/* ops.c: plain C float ops (see ops.h). */
#include "kernels/ops.h"

#include <math.h>

void pa_rmsnorm(float *out, const float *x, const float *w, int64_t n, float eps) {
  double ss = 0.0;
  for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
  float scale = (float)(1.0 / sqrt(ss / (double)n + (double)eps));
  if (w)
    for (int64_t i = 0; i < n; i++) out[i] = x[i] * scale * w[i];
  else
    for (int64_t i = 0; i < n; i++) out[i] = x[i] * scale;
}

void pa_rope_table(float *cos_t, float *sin_t, int rope_dim, int32_t pos, float base,
                   float freq_scale, const float *freq_factors) {
  for (int i = 0; i < rope_dim / 2; i++) {
    double inv = pow((double)base, -2.0 * i / rope_dim);
    double theta = (double)pos * inv * freq_scale;
    if (freq_factors) theta /= freq_factors[i];
    cos_t[i] = (float)cos(theta);
    sin_t[i] = (float)sin(theta);
  }
}

void pa_rope(float *x, int n_heads, int head_dim, int rope_dim, const float *cos_t,
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

void pa_softmax(float *x, int64_t n) {
  float mx = -INFINITY;
  for (int64_t i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
  double sum = 0.0;
  for (int64_t i = 0; i < n; i++) {
    x[i] = expf(x[i] - mx);
    sum += x[i];
  }
  float inv = (float)(1.0 / sum);
  for (int64_t i = 0; i < n; i++) x[i] *= inv;
}

void pa_silu_mul(float *gate, const float *up, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    float g = gate[i];
    gate[i] = g / (1.0f + expf(-g)) * up[i];
  }
}

void pa_gelu_tanh_mul(float *gate, const float *up, int64_t n) {
  const float c = 0.7978845608028654f; /* sqrt(2/pi) */
  for (int64_t i = 0; i < n; i++) {
    float g = gate[i];
    gate[i] = 0.5f * g * (1.0f + tanhf(c * (g + 0.044715f * g * g * g))) * up[i];
  }
}

void pa_add(float *x, const float *y, int64_t n) {
  for (int64_t i = 0; i < n; i++) x[i] += y[i];
}

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
