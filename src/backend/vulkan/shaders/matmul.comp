/* matmul: y[t][r] = sum_k W[r][k] x[t][k] for the tokens of one block of
 * up to TB, one row per workgroup (row = row0 + z * 32768 + x). The
 * weights are dequantized (dq8) eight values at a time and multiplied
 * with float activations; sums in float. */
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "dequant.glsl"
#define WG 64
#define TB 8
layout(local_size_x = WG) in;
layout(push_constant) uniform P {
  uint64_t w, x, y, row_bytes;
  uint rows, cols, n_tok, ldx, ldy;
} p;
shared float red[WG];
void main() {
  const uint r = gl_WorkGroupID.z * 32768 + gl_WorkGroupID.x;
  if (r >= p.rows) return;
  const uint t0 = gl_WorkGroupID.y * TB;
  const uint nt = min(TB, p.n_tok - t0);
  const uint64_t row = p.w + uint64_t(r) * p.row_bytes;
  F32s X = F32s(p.x);
  float acc[TB];
  for (uint t = 0; t < TB; t++) acc[t] = 0.0;
  for (uint g = gl_LocalInvocationID.x; g * 8 < p.cols; g += WG) {
    float v[8];
    dq8(row, g, v);
    for (uint t = 0; t < nt; t++) {
      const uint xb = (t0 + t) * p.ldx + g * 8;
      float s = 0.0;
      for (uint i = 0; i < 8; i++) s += v[i] * X.v[xb + i];
      acc[t] += s;
    }
  }
  F32s Y = F32s(p.y);
  for (uint t = 0; t < nt; t++) {
    float s;
    PA_WG_SUM(red, WG, acc[t], s);
    if (gl_LocalInvocationID.x == 0) Y.v[(t0 + t) * p.ldy + r] = s;
  }
}
