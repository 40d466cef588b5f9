/* rms_norm: out[r] = in[src(r)] * 1/sqrt(mean(in^2) + eps) * w, rows of n
 * floats; src(r) = gather[r] when gather is set, else r. One row per
 * workgroup; out may be in (each invocation rewrites what it read). */
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#define WG 64
layout(local_size_x = WG) in;
layout(push_constant) uniform P {
  uint64_t in_, out_, w, gather;
  uint n, n_rows;
  float eps;
} p;
shared float red[WG];
void main() {
  const uint r = gl_WorkGroupID.y * 32768 + gl_WorkGroupID.x;
  if (r >= p.n_rows) return;
  const uint src = p.gather != 0 ? uint(I32s(p.gather).v[r]) : r;
  F32s I = F32s(p.in_), O = F32s(p.out_), W = F32s(p.w);
  const uint ib = src * p.n, ob = r * p.n;
  float ss = 0.0;
  for (uint i = gl_LocalInvocationID.x; i < p.n; i += WG) ss += I.v[ib + i] * I.v[ib + i];
  float tot;
  PA_WG_SUM(red, WG, ss, tot);
  const float scale = 1.0 / sqrt(tot / float(p.n) + p.eps);
  for (uint i = gl_LocalInvocationID.x; i < p.n; i += WG) {
    precise float v = I.v[ib + i] * scale;
    if (p.w != 0) v = v * W.v[i];
    O.v[ob + i] = v;
  }
}
