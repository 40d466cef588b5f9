/* gate: g[i] = act(g[i]) * u[i], act SiLU (kind 0) or GELU's tanh form
 * (kind 1), in the CPU tables' arithmetic (kernels/ops.c); kind 2: g[i] =
 * GELU with erf of g[i], no gate (u unused; erf from a rational
 * approximation of erfc, fractional error below 1.2e-7: Numerical
 * Recipes' erfcc); kind 3: gpt-oss's clamped SwiGLU, g[i] = (clamp(u[i],
 * -7, 7) + 1) * m * sigmoid(1.702 m), m = min(g[i], 7) (backend.h,
 * pa_swiglu_oai); kind 4: g[i] = g[i] * sigmoid(u[i / per_gate])
 * (backend.h's sigmoid_mul: the gated attention's output gate, per_gate
 * 1; qwen35moe's shared-expert gate, one per row of per_gate values;
 * the other kinds leave per_gate unset); kind 5: kind 1 with u[i]
 * read at (i / per_gate) * u_stride + i % per_gate (backend.h's gelu_mul:
 * rows of per_gate values against rows u_stride apart). */
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform P {
  uint64_t g, u;
  uint n, kind, per_gate, u_stride;
} p;
float erf_(float x) {
  const float z = abs(x), t = 1.0 / (1.0 + 0.5 * z);
  const float r =
      t * exp(-z * z - 1.26551223 +
              t * (1.00002368 +
                   t * (0.37409196 +
                        t * (0.09678418 +
                             t * (-0.18628806 +
                                  t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
  return x >= 0.0 ? 1.0 - r : r - 1.0;
}
void main() {
  F32s G = F32s(p.g), U = F32s(p.u);
  if (p.kind == 2) {
    const uint stride2 = gl_NumWorkGroups.x * 256;
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride2) {
      const float g = G.v[i];
      G.v[i] = 0.5 * g * (1.0 + erf_(g * 0.70710678118654752));
    }
    return;
  }
  const uint stride = gl_NumWorkGroups.x * 256;
  if (p.kind == 4) {
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
      precise float den = 1.0 + pa_exp(-U.v[i / p.per_gate]);
      precise float out_ = G.v[i] / den;
      G.v[i] = out_;
    }
    return;
  }
  if (p.kind == 3) {
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
      const float m = min(G.v[i], 7.0), u = clamp(U.v[i], -7.0, 7.0);
      precise float den = 1.0 + pa_exp(-1.702 * m);
      precise float out_ = (u + 1.0) * (m / den);
      G.v[i] = out_;
    }
    return;
  }
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
    const uint ui = p.kind == 5 ? (i / p.per_gate) * p.u_stride + i % p.per_gate : i;
    precise float out_ = q * U.v[ui];
    G.v[i] = out_;
  }
}
