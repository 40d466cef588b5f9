/* delta_net: Gated DeltaNet's recurrence and gated norm (backend.h,
 * pa_delta_desc) over the conv's output (delta_conv): one workgroup per
 * (value head h, sequence s), the pass's tokens of s in batch order. Per
 * token: q and k of key head h % kh L2-normalised into shared memory (q
 * also by 1/sqrt(kd)); g = a[h] softplus(alpha + dt[h]), beta =
 * sigmoid(beta_in); then each invocation updates its own columns y of the
 * state S (kd x vd, in device memory, S[x][y] at x * vd + y):
 *   u = sum_x S[x][y] k[x],  d = beta (v[y] - e^g u)
 *   S[x][y] = e^g S[x][y] + k[x] d,  o[y] = sum_x S[x][y] q[x]
 * (S decayed, the delta rule, the read: backend.h's steps in two passes
 * over the column); out = rmsnorm(o) * norm * silu(z). state: the layer's
 * matrices in slot 0 (past the conv's inputs), slots slot_stride floats
 * apart; a token at position 0 starts from zeros; when ckpt[t] >= 0 the
 * state after t is also written to that slot. kd <= KMAX. */
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#define WG 128
#define KMAX 256
layout(local_size_x = WG) in;
layout(push_constant) uniform P {
  uint64_t qkv, z, beta, alpha, out_, state, seq, pos, ckpt, a, dt, norm;
  uint n_tok, kh, vh, kd, vd, slot_stride;
  float eps;
} p;
shared float qs[KMAX], ks[KMAX], red[WG];
void main() {
  const uint h = gl_WorkGroupID.x, s = gl_WorkGroupID.y, lid = gl_LocalInvocationID.x;
  const uint kd = p.kd, vd = p.vd, khh = h % p.kh, cd = 2 * p.kh * kd + p.vh * vd, wz = p.vh * vd;
  F32s X = F32s(p.qkv), Z = F32s(p.z), B = F32s(p.beta), A = F32s(p.alpha), O = F32s(p.out_);
  F32s N = F32s(p.norm);
  I32s SQ = I32s(p.seq), PS = I32s(p.pos), CK = I32s(p.ckpt);
  F32s St = F32s(p.state + (uint64_t(s) * uint64_t(p.slot_stride) + uint64_t(h) * kd * vd) * 4ul);
  const float ah = F32s(p.a).v[h], dth = F32s(p.dt).v[h];
  for (uint t = 0; t < p.n_tok; t++) {
    if (uint(SQ.v[t]) != s) continue; /* uniform over the workgroup */
    const uint row = t * cd;
    float sq = 0.0, sk = 0.0;
    for (uint x = lid; x < kd; x += WG) {
      const float qv = X.v[row + khh * kd + x], kv = X.v[row + p.kh * kd + khh * kd + x];
      qs[x] = qv, ks[x] = kv;
      sq += qv * qv, sk += kv * kv;
    }
    float tq, tk;
    PA_WG_SUM(red, WG, sq, tq);
    PA_WG_SUM(red, WG, sk, tk);
    const float iq = 1.0 / sqrt(tq + 1e-6) / sqrt(float(kd)), ik = 1.0 / sqrt(tk + 1e-6);
    const float av = A.v[t * p.vh + h] + dth;
    const float g = ah * (av > 20.0 ? av : log(1.0 + exp(av)));
    const float decay = exp(g), beta = 1.0 / (1.0 + exp(-B.v[t * p.vh + h]));
    const bool fresh = PS.v[t] == 0;
    const int ckpt = CK.v[t];
    const uint64_t ck_slot = uint64_t(ckpt < 0 ? 0 : ckpt);
    F32s Ck = F32s(p.state + (ck_slot * uint64_t(p.slot_stride) + uint64_t(h) * kd * vd) * 4ul);
    float ss = 0.0;
    for (uint y = lid; y < vd; y += WG) {
      float u = 0.0;
      if (fresh)
        for (uint x = 0; x < kd; x++) St.v[x * vd + y] = 0.0;
      for (uint x = 0; x < kd; x++) u += St.v[x * vd + y] * (ks[x] * ik);
      const float d = beta * (X.v[row + 2 * p.kh * kd + h * vd + y] - decay * u);
      float o = 0.0;
      for (uint x = 0; x < kd; x++) {
        const float sn = decay * St.v[x * vd + y] + (ks[x] * ik) * d;
        St.v[x * vd + y] = sn;
        if (ckpt >= 0) Ck.v[x * vd + y] = sn;
        o += sn * (qs[x] * iq);
      }
      O.v[t * wz + h * vd + y] = o;
      ss += o * o;
    }
    float tot;
    PA_WG_SUM(red, WG, ss, tot); /* its barriers also end the reads of qs, ks */
    const float inv = 1.0 / sqrt(tot / float(vd) + p.eps);
    for (uint y = lid; y < vd; y += WG) {
      const float zv = Z.v[t * wz + h * vd + y];
      O.v[t * wz + h * vd + y] = O.v[t * wz + h * vd + y] * inv * N.v[y] * (zv / (1.0 + exp(-zv)));
    }
  }
}
