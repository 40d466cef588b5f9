/* scale: x[i] *= s for i < n. Grid-stride over n. */
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform P {
  uint64_t x;
  uint n;
  float s;
} p;
void main() {
  F32s X = F32s(p.x);
  const uint stride = gl_NumWorkGroups.x * 256;
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
    precise float v = X.v[i] * p.s;
    X.v[i] = v;
  }
}
