/* probe_fma: the device's fp32 FMA rate (probe.c). Each invocation runs
 * eight independent chains of vec4 fused multiply-adds in registers
 * (a = a * b + c: 32 FMAs, 64 FLOP, per iteration), enough independent
 * work per invocation to hide the FMA latency on devices that run few
 * invocations at once (a CPU implementation's SIMD lanes). b and c come
 * from the push constants, so nothing folds at compile time; an
 * invocation writes its sum only when it equals `magic` (practically
 * never), so the chains are not dead code. */
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform P {
  uint64_t dst;
  uint iters;
  float b, c, magic;
} p;
void main() {
  const vec4 b = vec4(p.b), c = vec4(p.c);
  const float s0 = float(gl_GlobalInvocationID.x & 1023u) * 1e-4;
  vec4 a0 = vec4(s0), a1 = a0 + 0.1, a2 = a0 + 0.2, a3 = a0 + 0.3;
  vec4 a4 = a0 + 0.4, a5 = a0 + 0.5, a6 = a0 + 0.6, a7 = a0 + 0.7;
  for (uint i = 0; i < p.iters; i++) {
    a0 = fma(a0, b, c);
    a1 = fma(a1, b, c);
    a2 = fma(a2, b, c);
    a3 = fma(a3, b, c);
    a4 = fma(a4, b, c);
    a5 = fma(a5, b, c);
    a6 = fma(a6, b, c);
    a7 = fma(a7, b, c);
  }
  const vec4 s = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7));
  const float t = (s.x + s.y) + (s.z + s.w);
  if (t == p.magic) F32s(p.dst).v[0] = t;
}
