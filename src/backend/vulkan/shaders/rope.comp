/* rope: rotates the first rope_dim values of every head of x (n_tok rows
 * of `stride` floats, n_heads heads of head_dim) by the pass's tables
 * (cos, sin: half = rope_dim / 2 per token): pairs (i, i + half) when
 * neox, else (2i, 2i + 1). One invocation per pair. */
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform P {
  uint64_t x, cos_, sin_;
  uint n_tok, n_heads, head_dim, rope_dim, neox, stride;
} p;
void main() {
  const uint half_ = p.rope_dim / 2;
  const uint i = gl_GlobalInvocationID.x, h = gl_WorkGroupID.y, t = gl_WorkGroupID.z;
  if (i >= half_) return;
  F32s X = F32s(p.x);
  const float c = F32s(p.cos_).v[t * half_ + i], s = F32s(p.sin_).v[t * half_ + i];
  const uint base = t * p.stride + h * p.head_dim;
  const uint ia = base + (p.neox != 0 ? i : 2 * i), ib = base + (p.neox != 0 ? i + half_ : 2 * i + 1);
  const float a = X.v[ia], b = X.v[ib];
  precise float ra = a * c - b * s;
  precise float rb = a * s + b * c;
  X.v[ia] = ra;
  X.v[ib] = rb;
}
