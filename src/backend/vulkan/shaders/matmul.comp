/* matmul (matrix times a few vectors, decode): y[t][r] = sum_k W[r][k]
 * x[t][k] for the tokens of one block of up to TB (workgroup y). A
 * workgroup owns RPW consecutive rows; each subgroup takes one row at a
 * time, its invocations splitting the row into groups of eight values
 * (dq8: dequantized as read) and summing with subgroupAdd, so any
 * subgroup size works and no barrier is needed. Sums in float. */
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common.glsl"
#define TB 8
#define RPW 8
layout(local_size_x = 64) in;
layout(push_constant) uniform P {
  uint64_t w, x, y, row_bytes, grid, ksigns; /* grid, ksigns: dequant.glsl */
  uint rows, cols, n_tok, ldx, ldy;
} p;
#include "dequant.glsl"
void main() {
  const uint wg = gl_WorkGroupID.z * 65535 + gl_WorkGroupID.x;
  const uint t0 = gl_WorkGroupID.y * TB;
  const uint nt = min(TB, p.n_tok - t0);
  const uint lane = gl_SubgroupInvocationID, ns = gl_SubgroupSize;
  const uint n_groups = p.cols / 8;
  F32s X = F32s(p.x), Y = F32s(p.y);
  for (uint r = wg * RPW + gl_SubgroupID; r < min(wg * RPW + RPW, p.rows); r += gl_NumSubgroups) {
    const uint64_t row = p.w + uint64_t(r) * p.row_bytes;
    float acc[TB];
    for (uint t = 0; t < TB; t++) acc[t] = 0.0;
    for (uint g = lane; g < n_groups; g += ns) {
      float v[8];
      dq8(row, g, v);
      /* constant bounds (a guard, not a variable count): the compiler
       * unrolls them and keeps acc in registers */
      [[unroll]] for (uint t = 0; t < TB; t++) {
        if (t < nt) {
          const uint xb = (t0 + t) * p.ldx + g * 8;
          float s = 0.0;
          [[unroll]] for (uint i = 0; i < 8; i++) s += v[i] * X.v[xb + i];
          acc[t] += s;
        }
      }
    }
    [[unroll]] for (uint t = 0; t < TB; t++) {
      if (t < nt) {
        const float s = subgroupAdd(acc[t]);
        if (lane == 0) Y.v[(t0 + t) * p.ldy + r] = s;
      }
    }
  }
}
