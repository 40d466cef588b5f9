/* matmul_tiled (prefill and batches): y[t][r] = sum_k W[r][k] x[t][k] in
 * tiles of BM rows by BN tokens per workgroup (x: row tiles, y: token
 * tiles, z: row tiles past 65535). Each step of BK values along k
 * dequantizes the weights' tile (dq8) and copies the activations' tile
 * into shared memory once, then every invocation accumulates TM x TN
 * outputs from them. cols is a multiple of 8 (of BK for every quantized
 * type); the last step and the edges are guarded. Sums in float. */
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#define BM 64
#define BN 32
#define BK 32
#define TM 4
#define TN 4
#define WG 128 /* (BM / TM) * (BN / TN) */
layout(local_size_x = WG) in;
layout(push_constant) uniform P {
  uint64_t w, x, y, row_bytes, grid, ksigns; /* grid, ksigns: dequant.glsl */
  uint rows, cols, n_tok, ldx, ldy;
} p;
#include "dequant.glsl"
shared float Ws[BK][BM + 1];
shared float Xs[BK][BN + 1];
void main() {
  const uint lid = gl_LocalInvocationID.x;
  const uint r0 = (gl_WorkGroupID.z * 65535 + gl_WorkGroupID.x) * BM, t0 = gl_WorkGroupID.y * BN;
  const uint tr = lid % (BM / TM), tt = lid / (BM / TM); /* this invocation's rows tr + i * BM/TM, tokens tt + j * BN/TN */
  float acc[TM][TN];
  [[unroll]] for (uint i = 0; i < TM; i++)
    [[unroll]] for (uint j = 0; j < TN; j++) acc[i][j] = 0.0;
  F32s X = F32s(p.x), Y = F32s(p.y);
  for (uint k0 = 0; k0 < p.cols; k0 += BK) {
    /* the weights' tile: BM rows x BK/8 groups, WG invocations at a time */
    for (uint e = lid; e < BM * (BK / 8); e += WG) {
      const uint rr = e / (BK / 8), gg = e % (BK / 8);
      const uint r = r0 + rr, k = k0 + gg * 8;
      float v[8] = float[8](0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
      if (r < p.rows && k < p.cols) dq8(p.w + uint64_t(r) * p.row_bytes, k / 8, v);
      [[unroll]] for (uint i = 0; i < 8; i++) Ws[gg * 8 + i][rr] = v[i];
    }
    /* the activations' tile: BN tokens x BK values */
    for (uint e = lid; e < BN * BK; e += WG) {
      const uint tt_ = e / BK, kk = e % BK;
      const uint t = t0 + tt_, k = k0 + kk;
      Xs[kk][tt_] = t < p.n_tok && k < p.cols ? X.v[t * p.ldx + k] : 0.0;
    }
    barrier();
    for (uint kk = 0; kk < BK; kk++) {
      float a[TM], b[TN];
      [[unroll]] for (uint i = 0; i < TM; i++) a[i] = Ws[kk][tr + i * (BM / TM)];
      [[unroll]] for (uint j = 0; j < TN; j++) b[j] = Xs[kk][tt + j * (BN / TN)];
      [[unroll]] for (uint i = 0; i < TM; i++)
        [[unroll]] for (uint j = 0; j < TN; j++) acc[i][j] += a[i] * b[j];
    }
    barrier();
  }
  [[unroll]] for (uint i = 0; i < TM; i++)
    [[unroll]] for (uint j = 0; j < TN; j++) {
      const uint r = r0 + tr + i * (BM / TM), t = t0 + tt + j * (BN / TN);
      if (r < p.rows && t < p.n_tok) Y.v[t * p.ldy + r] = acc[i][j];
    }
}
