/* delta_conv: Gated DeltaNet's causal depthwise conv with SiLU (backend.h,
 * pa_delta_desc), in place over the pass's qkv rows (n_tok rows of cd
 * channels): per channel, the tokens in batch order, each reading the
 * last taps - 1 inputs of its sequence from the state and then pushing its
 * own (a token at position 0 starts from zeros), and copying them to
 * slot ckpt[t] when that is >= 0. state: the layer's state
 * in slot 0, slots slot_stride floats apart, its first (taps - 1) * cd
 * floats the conv's inputs, oldest first. One invocation per channel. */
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform P {
  uint64_t qkv, w, state, seq, pos, ckpt;
  uint n_tok, cd, taps, slot_stride;
} p;
void main() {
  const uint ch = gl_GlobalInvocationID.x;
  if (ch >= p.cd) return;
  F32s X = F32s(p.qkv), W = F32s(p.w);
  I32s S = I32s(p.seq), P = I32s(p.pos), C = I32s(p.ckpt);
  const uint T = p.taps - 1, wb = ch * p.taps;
  for (uint t = 0; t < p.n_tok; t++) {
    F32s st = F32s(p.state + uint64_t(S.v[t]) * uint64_t(p.slot_stride) * 4ul);
    if (P.v[t] == 0)
      for (uint j = 0; j < T; j++) st.v[j * p.cd + ch] = 0.0;
    const float x = X.v[t * p.cd + ch];
    float acc = W.v[wb + T] * x;
    for (uint j = 0; j < T; j++) acc += W.v[wb + j] * st.v[j * p.cd + ch];
    for (uint j = 0; j + 1 < T; j++) st.v[j * p.cd + ch] = st.v[(j + 1) * p.cd + ch];
    if (T > 0) st.v[(T - 1) * p.cd + ch] = x;
    if (C.v[t] >= 0) {
      F32s ck = F32s(p.state + uint64_t(C.v[t]) * uint64_t(p.slot_stride) * 4ul);
      for (uint j = 0; j < T; j++) ck.v[j * p.cd + ch] = st.v[j * p.cd + ch];
    }
    X.v[t * p.cd + ch] = acc / (1.0 + pa_exp(-acc));
  }
}
