/* layer_norm: out[r] = (in[r] - mean) / sqrt(var + eps) * w + b, rows of n
 * floats (the mean, then the mean of the squared deviations, each summed
 * in float over the workgroup); w and b optional (0). One row per
 * workgroup; out may be in (each invocation rewrites what it read). */
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#define WG 64
layout(local_size_x = WG) in;
layout(push_constant) uniform P {
  uint64_t in_, out_, w, b;
  uint n, n_rows;
  float eps;
} p;
shared float red[WG];
void main() {
  const uint r = gl_WorkGroupID.y * 32768 + gl_WorkGroupID.x;
  if (r >= p.n_rows) return;
  F32s I = F32s(p.in_), O = F32s(p.out_), W = F32s(p.w), B = F32s(p.b);
  const uint base = r * p.n;
  float s = 0.0;
  for (uint i = gl_LocalInvocationID.x; i < p.n; i += WG) s += I.v[base + i];
  float tot;
  PA_WG_SUM(red, WG, s, tot);
  const float mean = tot / float(p.n);
  float ss = 0.0;
  for (uint i = gl_LocalInvocationID.x; i < p.n; i += WG) {
    const float d = I.v[base + i] - mean;
    ss += d * d;
  }
  float var;
  PA_WG_SUM(red, WG, ss, var);
  const float inv = 1.0 / sqrt(var / float(p.n) + p.eps);
  for (uint i = gl_LocalInvocationID.x; i < p.n; i += WG) {
    precise float v = (I.v[base + i] - mean) * inv;
    if (p.w != 0) v = v * W.v[i];
    if (p.b != 0) v = v + B.v[i];
    O.v[base + i] = v;
  }
}
