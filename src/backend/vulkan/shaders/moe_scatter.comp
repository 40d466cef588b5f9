/* moe_scatter: the mixture of experts' weighted sum (vulkan.c, op_moe):
 * out[idx[i]] += w[i] * y[i] for rows i < n_rows of n floats (one expert's
 * tokens, each at most once, so no two rows of a dispatch meet); idx 0:
 * out's rows [0, n_rows) set to zero. One row per workgroup row. */
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform P {
  uint64_t out_, y, idx, w;
  uint n, n_rows;
} p;
void main() {
  const uint i = gl_WorkGroupID.y;
  if (i >= p.n_rows) return;
  F32s O = F32s(p.out_);
  if (p.idx == 0) {
    for (uint j = gl_LocalInvocationID.x; j < p.n; j += 256) O.v[i * p.n + j] = 0.0;
    return;
  }
  F32s Y = F32s(p.y), W = F32s(p.w);
  const uint dst = uint(I32s(p.idx).v[i]) * p.n;
  const float wi = W.v[i];
  for (uint j = gl_LocalInvocationID.x; j < p.n; j += 256) {
    precise float s = O.v[dst + j] + wi * Y.v[i * p.n + j];
    O.v[dst + j] = s;
  }
}
