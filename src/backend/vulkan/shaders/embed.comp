/* embed: out[t] = row tok[t] of the table * scale, dequantized (dq8). */
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform P {
  uint64_t w, tok, out_, row_bytes, grid, ksigns; /* grid, ksigns: dequant.glsl */
  uint n_tok, cols;
  float scale;
} p;
#include "dequant.glsl"
void main() {
  const uint g = gl_GlobalInvocationID.x, t = gl_WorkGroupID.y;
  if (g * 8 >= p.cols) return;
  const uint r = uint(I32s(p.tok).v[t]);
  float v[8];
  dq8(p.w + uint64_t(r) * p.row_bytes, g, v);
  F32s o = F32s(p.out_);
  const uint base = t * p.cols + g * 8;
  for (uint i = 0; i < 8; i++) {
    precise float s = v[i] * p.scale;
    o.v[base + i] = p.scale == 1.0 ? v[i] : s;
  }
}
