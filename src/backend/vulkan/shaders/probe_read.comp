/* probe_read: the device's read bandwidth (probe.c). Workgroup w streams
 * its own contiguous chunk of per_wg 16-byte vectors from src: at each step
 * its invocations read four runs of WG consecutive vectors (four loads in
 * flight per invocation, every run one contiguous stretch of memory).
 * The vectors are XORed together; an invocation writes its result only
 * when it equals `magic` (practically never), so the loads are not dead
 * code and the output is one uint. */
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#define WG 256
layout(local_size_x = WG) in;
layout(buffer_reference, std430, buffer_reference_align = 16) buffer V4s { uvec4 v[]; };
layout(push_constant) uniform P {
  uint64_t src, dst;
  uint per_wg; /* vectors per workgroup: a multiple of 4 x WG */
  uint magic;
} p;
void main() {
  V4s S = V4s(p.src + uint64_t(gl_WorkGroupID.x) * p.per_wg * 16);
  uvec4 a0 = uvec4(0), a1 = uvec4(0), a2 = uvec4(0), a3 = uvec4(0);
  for (uint i = gl_LocalInvocationID.x; i < p.per_wg; i += 4 * WG) {
    a0 ^= S.v[i];
    a1 ^= S.v[i + WG];
    a2 ^= S.v[i + 2 * WG];
    a3 ^= S.v[i + 3 * WG];
  }
  const uvec4 a = a0 ^ a1 ^ a2 ^ a3;
  const uint x = a.x ^ a.y ^ a.z ^ a.w;
  if (x == p.magic) U32s(p.dst).v[0] = gl_GlobalInvocationID.x;
}
