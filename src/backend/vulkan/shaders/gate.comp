/* gate: g[i] = act(g[i]) * u[i], act SiLU (kind 0) or GELU's tanh form
 * (kind 1), in the CPU tables' arithmetic (kernels/ops.c). */
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform P {
  uint64_t g, u;
  uint n, kind;
} p;
void main() {
  F32s G = F32s(p.g), U = F32s(p.u);
  const uint stride = gl_NumWorkGroups.x * 256;
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
    const float g = G.v[i];
    precise float z;
    if (p.kind == 0) {
      z = -g;
    } else {
      precise float g2 = g * g;
      z = g * (-1.5957691216057308 + -0.07135481627260025 * g2);
    }
    precise float den = 1.0 + pa_exp(z);
    precise float q = g / den;
    precise float out_ = q * U.v[i];
    G.v[i] = out_;
  }
}
