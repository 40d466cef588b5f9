/* kv_store: writes every token's K and V rows (every KV head) into the
 * cache of one layer at the token's slot (kv.glsl). One workgroup per
 * (token, KV head, K or V). */
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "kv.glsl"
#define WG 64
layout(local_size_x = WG) in;
layout(push_constant) uniform P {
  uint64_t k, v, kc, vc, ks, vs, slot;
  uint n_kv, hd_k, hd_v, k_stride, v_stride, bs;
} p;
shared float red[WG];
void main() {
  const uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, which = gl_WorkGroupID.z;
  const uint hd = which == 0 ? p.hd_k : p.hd_v;
  const uint64_t src = which == 0 ? p.k + uint64_t(t * p.k_stride + h * p.hd_k) * 4
                                  : p.v + uint64_t(t * p.v_stride + h * p.hd_v) * 4;
  const uint64_t dst = which == 0 ? p.kc : p.vc;
  const uint row = kv_row(uint(I32s(p.slot).v[t]), h, p.n_kv, p.bs);
  F32s S = F32s(src);
#if defined(KV_Q8)
  float amax = 0.0;
  for (uint i = gl_LocalInvocationID.x; i < hd; i += WG) amax = max(amax, abs(S.v[i]));
  float m;
  PA_WG_MAX(red, WG, amax, m);
  const float scale = m / 127.0;
  for (uint i = gl_LocalInvocationID.x; i < hd; i += WG) I8s(dst).v[row * hd + i] = int8_t(q8_round(S.v[i], scale));
  if (gl_LocalInvocationID.x == 0) F32s(which == 0 ? p.ks : p.vs).v[row] = scale;
#else
  for (uint i = gl_LocalInvocationID.x; i < hd; i += WG) kv_put(dst, row * hd + i, S.v[i]);
#endif
}
