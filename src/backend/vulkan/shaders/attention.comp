/* attention: out[t][h] = softmax(cap(scale * q[t][h] . K[p])) V[p] over the
 * positions p of token t's sequence from lo to pos[t] (lo = pos[t] -
 * window + 1 when window > 0, else 0), K and V of KV head h / (n_head /
 * n_kv) read from the paged cache through the sequence's block table
 * (tables + seq * max_blocks). One workgroup per (query head, token):
 * tiles of WG positions, one score per invocation, then the running
 * maximum and sum rescale the output (online softmax); each invocation
 * owns head_dim_v / WG of the output's values (at most NACC: head_dim_v
 * <= 512, Gemma 4's global layers). cap(s) = softcap * tanh(s / softcap) when softcap > 0 (Gemma 2),
 * else s. sinks != 0: head h's attention sink (gpt-oss), one more logit in
 * the softmax's denominator, sinks[h], with no value. */
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "kv.glsl"
#define WG 64
#define MAXD 512
#define NACC (MAXD / WG)
layout(local_size_x = WG) in;
layout(push_constant) uniform P {
  uint64_t q, out_, kc, vc, ks, vs, pos, seq, tables, sinks;
  uint n_head, n_kv, hd_k, hd_v, q_stride, o_stride, bs, max_blocks, window;
  float scale, softcap;
} p;
shared float qs[MAXD];
shared float w[WG];
shared float red[WG];
void main() {
  const uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, lid = gl_LocalInvocationID.x;
  const uint kvh = h / (p.n_head / p.n_kv);
  const int pos = I32s(p.pos).v[t];
  const uint sq = uint(I32s(p.seq).v[t]);
  const int lo = p.window > 0 ? max(0, pos - int(p.window) + 1) : 0;
  I32s T = I32s(p.tables);
  const uint tb = sq * p.max_blocks;
  F32s Q = F32s(p.q);
  for (uint i = lid; i < p.hd_k; i += WG) qs[i] = Q.v[t * p.q_stride + h * p.hd_k + i];
  barrier();
  float acc[NACC];
  for (uint j = 0; j < NACC; j++) acc[j] = 0.0;
  float M = uintBitsToFloat(0xff800000u), L = 0.0;
  for (int p0 = lo; p0 <= pos; p0 += WG) {
    const int pp = p0 + int(lid);
    float s = uintBitsToFloat(0xff800000u);
    if (pp <= pos) {
      const uint slot = uint(T.v[tb + uint(pp) / p.bs]) * p.bs + uint(pp) % p.bs;
      const uint row = kv_row(slot, kvh, p.n_kv, p.bs);
      float d = 0.0;
      for (uint i = 0; i < p.hd_k; i++) d += qs[i] * kv_get(p.kc, row * p.hd_k + i);
#if defined(KV_Q8)
      d *= F32s(p.ks).v[row];
#endif
      s = d * p.scale;
      /* tanh of the clamped value: tanh(15) is 1 in float, and some drivers
       * compute tanh from exponentials that overflow far out */
      if (p.softcap > 0.0) s = p.softcap * tanh(clamp(s / p.softcap, -15.0, 15.0));
    }
    float m;
    PA_WG_MAX(red, WG, s, m);
    const float Mn = max(M, m);
    const float corr = pa_exp(M - Mn);
    const float e = pp <= pos ? pa_exp(s - Mn) : 0.0;
    w[lid] = e;
    float es;
    PA_WG_SUM(red, WG, e, es);
    L = L * corr + es;
    M = Mn;
    const int n = min(WG, pos - p0 + 1);
    for (uint j = 0; j < NACC; j++) acc[j] *= corr;
    for (int k = 0; k < n; k++) {
      const int pk = p0 + k;
      const uint slot = uint(T.v[tb + uint(pk) / p.bs]) * p.bs + uint(pk) % p.bs;
      const uint row = kv_row(slot, kvh, p.n_kv, p.bs);
      float wk = w[k];
#if defined(KV_Q8)
      wk *= F32s(p.vs).v[row];
#endif
      for (uint j = 0; j < NACC; j++) {
        const uint d = lid + j * WG;
        if (d < p.hd_v) acc[j] += wk * kv_get(p.vc, row * p.hd_v + d);
      }
    }
    barrier();
  }
  if (p.sinks != 0) L += pa_exp(F32s(p.sinks).v[h] - M);
  F32s O = F32s(p.out_);
  for (uint j = 0; j < NACC; j++) {
    const uint d = lid + j * WG;
    if (d < p.hd_v) O.v[t * p.o_stride + h * p.hd_v + d] = acc[j] / L;
  }
}
