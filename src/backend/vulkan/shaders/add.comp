/* add: x[i] += y[period ? i % period : i] for i < n (period: a bias row
 * added to every token's row). Grid-stride over n. */
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform P {
  uint64_t x, y;
  uint n, period;
} p;
void main() {
  F32s X = F32s(p.x), Y = F32s(p.y);
  const uint stride = gl_NumWorkGroups.x * 256;
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
    precise float s = X.v[i] + Y.v[p.period != 0 ? i % p.period : i];
    X.v[i] = s;
  }
}
