/* x16_amx.c: the AMX kernels of the 16-row interleaved layout (kernels/x16.h)
 * for batches: up to PA_X16_AMX_TOKENS tokens a call. They follow the
 * layout's canonical arithmetic step for step, so their bits equal the
 * reference's (x16.c) and the VNNI kernels' (x16_avx512.c), whatever the
 * number of tokens: only the exact int32 block sums come from the tile unit.
 *
 * Why: with the VNNI kernels, a batch of tokens costs 8 vpdpbusd per token,
 * row group and block (512 multiply-adds each), about two thirds of the
 * vector operations, so prefill and the server's batched steps are bound by
 * them. One tdpbsud does all of it for 16 tokens and 16 rows: the record's
 * 8 weight vectors are exactly the B tile of a block (row k: each of the 16
 * rows' elements 4k .. 4k + 3, unsigned; Q4/Q5 unpacked to bytes first),
 * and the A tile is the tokens' 32 activation quants (signed), one token per
 * tile row. What is left per token and block is the canonical float step:
 * one conversion, the scale's multiply and one or two fmas.
 *
 * Per call: one row group, every block, nt tokens. Two blocks are in
 * flight (tiles 0-2 and 3-5) so that the tile unit and the float steps
 * overlap. Few tokens go to the VNNI kernel (the same bits): the tile work
 * per block is fixed, and below AMX_MIN_TOKENS it costs more than the
 * vpdpbusd it saves.
 *
 * The tile configuration is per thread. Loading it (and releasing the
 * tiles after) on every call took ~4.5% of a serving run's samples (perf,
 * SmolLM2 at 16 users: a call is one 16-row group of ~18 blocks), so each
 * thread keeps the configuration it last loaded and loads another only when
 * the token count changes; the tiles stay in use by the thread (8 KB more
 * state saved on a context switch).
 *
 * Where a block's time goes (Intel with AMX, one thread,
 * Q4_1, 16 tokens, weights in L2, rdtsc ticks per block; ab-x16-amx with
 * parts cut out): the whole 65; without the float steps 42; without the
 * tile instructions 38 (of which unpacking 9); the float steps alone 29,
 * which is their port bound (four 512-bit uops per token: conversion,
 * scale multiply, two fmas, on two ports). The tile work does not overlap
 * the float steps: in a synthetic loop of float steps, adding any one tile
 * instruction per iteration (a load, the store, or zero and tdpbsud) costs
 * 14-17 ticks, and all five together about as much, while the tile group
 * alone runs in 17. Tried, none faster: finishing a block two steps
 * behind its tile work instead of one (4 C tiles, 0.97x), the tile work
 * of 2 or 4 blocks back to back (0.88-0.90x), one A tile shared by two
 * row groups (0.97-0.98x, 32 accumulators), GF2P8AFFINEQB for the high
 * nibbles (0.98x). */
#if defined(__x86_64__) /* x86 SIMD; other targets have the plain C tables */
#include <immintrin.h>
#include <string.h>

#include "kernels/x16.h"

PA_NO_FP_CONTRACT

#include "kernels/cpu/amx.h"
#include "kernels/cpu/x16_simd.h"

#define AMX                                                                          \
  __attribute__((                                                                    \
      target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c,amx-tile," \
             "amx-int8")))
#define BODY static inline __attribute__((always_inline)) AMX

/* Fewer tokens than this take the VNNI kernel, 8 at a time. One thread,
 * weights in L2, Q4_1, ns per 256 weights and token, VNNI against AMX
 * (2 alternated runs, a noisy machine): 4 tokens 3.0-3.8 against 5.6-6.8,
 * 8 tokens 2.9 against 3.1-3.2, 12 tokens 3.3-4.2 against 2.3-2.4, 16
 * tokens 3.3-3.5 against 1.4-2.3. */
#define AMX_MIN_TOKENS 10

static __thread int configured_nt;

static AMX void configure(int nt) {
  if (configured_nt == nt) return;
  configured_nt = nt;
  pa_tile_config c;
  memset(&c, 0, sizeof c);
  c.palette = 1;
  for (int s = 0; s < 2; s++) {
    c.rows[3 * s + 0] = (uint8_t)nt; /* C: tokens x 16 int32 */
    c.colsb[3 * s + 0] = 64;
    c.rows[3 * s + 1] = (uint8_t)nt; /* A: tokens x 32 int8 */
    c.colsb[3 * s + 1] = 32;
    c.rows[3 * s + 2] = 8; /* B: 8 x (16 rows x 4 bytes) */
    c.colsb[3 * s + 2] = 64;
  }
  pa_tile_load_config(&c);
}

/* Q4/Q5 blocks b0 .. b0 + n - 1 of a group unpacked to bytes in wb, each as
 * the 8 rows of its B tile (x16_unpack's vectors). */
BODY void unpack_chunk(const int kind, const uint8_t *wg, int64_t b0, int n, uint8_t (*wb)[8][64]) {
  const size_t rec = x16_rec(kind);
  for (int i = 0; i < n; i++) {
    __m512i w[8];
    x16_unpack(kind, wg + (size_t)(b0 + i) * rec, w);
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) _mm512_store_si512(wb[i][k], w[k]);
  }
}

/* The canonical float step of one block for every token, from its sums. */
BODY void finish(const int kind, const int32_t (*c)[16], const uint8_t *o, const uint8_t *x0,
                 size_t xs, __m512 *acc, const int nt) {
  __m512 dl, ml;
  x16_scales(kind, o, &dl, &ml);
#pragma GCC unroll 16
  for (int t = 0; t < nt; t++)
    acc[t] = x16_step(kind, _mm512_load_si512(c[t]), dl, ml, x0 + (size_t)t * xs, acc[t]);
}

/* Block b's activations as an A tile: where they lie when the tokens'
 * rows are evenly spaced (stride *s), else copied into xa (stride XREC). */
BODY const uint8_t *a_tile(const uint8_t *const *xp, int nt, bool even, int64_t b,
                           uint8_t (*xa)[PA_X16_XREC]) {
  if (even) return xp[0] + (size_t)b * PA_X16_XREC;
  for (int t = 0; t < nt; t++) memcpy(xa[t], xp[t] + (size_t)b * PA_X16_XREC, PA_X16_XREC);
  return xa[0];
}

/* One block on the tile unit: its sums for every token into c. Tiles
 * C, A, B are numbers (constants for the intrinsics). */
#define TILE_BLOCK(C, A, B, xa, sa, wb, c) \
  do {                                     \
    _tile_loadd(A, xa, (long)(sa));        \
    _tile_loadd(B, wb, 64);                \
    _tile_zero(C);                         \
    _tile_dpbsud(C, A, B);                 \
    _tile_stored(C, c, 64);                \
  } while (0)

/* Software-pipelined: while block b is on the tile unit, block b - 1's
 * sums (stored one step earlier) go through the float step. Two sets of
 * tiles and buffers alternate.
 *
 * Q4/Q5 weights are unpacked a chunk of CHUNK blocks at a time, ahead of
 * the chunk's tile steps: a tile load of bytes that vector stores wrote
 * just before waits for them to reach the cache. One thread, weights in
 * L2, 16 tokens, Q4_1, 1536 columns, the two versions alternated in one
 * process (400 rounds): unpacking each block one step ahead took 1.17-1.19
 * times as long as unpacking a chunk of 16 ahead (8: the same; 4 and 32:
 * slower). Q8_0's tile rows are the record itself. */
#define CHUNK 16
/* Weights that stream from memory (every matrix of a batched step is read
 * once) leave the kernel waiting on its loads: the same A/B with 2048-4096
 * groups (16-126 MB) took 1.6-2x the ticks per block of weights in L2. A
 * prefetch of each record's lines AMX_PREFETCH bytes ahead into L2, per
 * block, took 1.24-1.35x off (Q4_1 and Q8_0), and nothing measurable when
 * the weights are in L2 (0.97, inside the quartiles). Tried first inside
 * the unpack pass: 4 KB ahead gave nothing, 16-128 KB with T0, T1 or T2
 * 1.07-1.20x (32 KB T2 and 128 KB T1 equal). Prefetches past the matrix's
 * end never fault. */
#define AMX_PREFETCH 32768
/* And Q8_0, whose B tiles are loaded from the records themselves, asks in
 * a call's first pass over the weights (`stream`) for each record's lines
 * AMX_PREFETCH_L1 bytes ahead into L1 as well, so that the tile loads find
 * them there (Intel with AMX, alternated in one process:
 * SmolLM2's output head alone for 16 tokens, weights cold, 1.77-1.90 ->
 * 1.58-1.59 ms with 1-4 KB; ab-x16-amx, one thread, 4096 groups of 576
 * columns from memory: 1.062-1.067x faster; 16-user decode steps
 * 0.963-0.977 of the time on Gemma 3, 0.985-0.998 on SmolLM2, whose output
 * heads are Q8_0; prefill 1.00-1.01; in every pass, prefill of the 1B
 * Q8_0 shape took 1.038). Q4/Q5 read their records a chunk ahead, where
 * it cost 2.3% (0.977). */
#define AMX_PREFETCH_L1 2048

BODY void run_body(const int kind, int64_t cols, const uint8_t *wg, const uint8_t *const *xp,
                   int nt, float *y, int64_t ldy, const pa_prefetch *stream) {
  const int64_t nb = cols / 32;
  const size_t rec = x16_rec(kind);
  /* The A tile is read with one stride: the tokens' packed rows when they
   * are evenly spaced (matmul's are), else copies of them. */
  const size_t xs = (size_t)(xp[1] - xp[0]); /* nt >= AMX_MIN_TOKENS */
  bool even = xp[1] > xp[0];
  for (int t = 2; t < nt && even; t++) even = xp[t] == xp[0] + (size_t)t * xs;
  const size_t sa = even ? xs : PA_X16_XREC;
  _Alignas(64) int32_t c[2][PA_X16_AMX_TOKENS][16];
  _Alignas(64) uint8_t wb[CHUNK][8][64];
  _Alignas(64) uint8_t xa[2][PA_X16_AMX_TOKENS][PA_X16_XREC];
  const uint8_t *xb[2];
  __m512 acc[PA_X16_AMX_TOKENS];
#pragma GCC unroll 16
  for (int t = 0; t < nt; t++) acc[t] = _mm512_setzero_ps();
  configure(nt);
  for (int64_t b = 0; b < nb; b++) {
    const int s = (int)(b & 1), i = (int)(b % CHUNK);
    for (size_t l = 0; l < rec; l += 64)
      _mm_prefetch((const char *)wg + (size_t)b * rec + AMX_PREFETCH + l, _MM_HINT_T2);
    if (kind == K_Q8_0 && stream)
      for (size_t l = 0; l < rec; l += 64)
        _mm_prefetch((const char *)wg + (size_t)b * rec + AMX_PREFETCH_L1 + l, _MM_HINT_T0);
    if (kind != K_Q8_0 && i == 0) unpack_chunk(kind, wg, b, nb - b < CHUNK ? (int)(nb - b) : CHUNK, wb);
    const uint8_t *bt = kind == K_Q8_0 ? wg + (size_t)b * rec : wb[i][0];
    xb[s] = a_tile(xp, nt, even, b, xa[s]);
    if (s == 0)
      TILE_BLOCK(0, 1, 2, xb[0], sa, bt, c[0]);
    else
      TILE_BLOCK(3, 4, 5, xb[1], sa, bt, c[1]);
    if (b > 0)
      finish(kind, (const int32_t(*)[16])c[s ^ 1], wg + (size_t)(b - 1) * rec, xb[s ^ 1], sa, acc,
             nt);
  }
  finish(kind, (const int32_t(*)[16])c[(nb - 1) & 1], wg + (size_t)(nb - 1) * rec, xb[(nb - 1) & 1],
         sa, acc, nt);
#pragma GCC unroll 16
  for (int t = 0; t < nt; t++) _mm512_storeu_ps(y + t * ldy, acc[t]);
}

#define RUN(name, kind, vnni)                                                             \
  static AMX void name(int64_t cols, const uint8_t *wg, const uint8_t *const *xp, int nt, \
                       float *y, int64_t ldy, const pa_prefetch *stream) {                               \
    if (nt < AMX_MIN_TOKENS)                                                              \
      for (int t0 = 0; t0 < nt; t0 += PA_X16_TOKENS)                                      \
        vnni.run(cols, wg, xp + t0, nt - t0 < PA_X16_TOKENS ? nt - t0 : PA_X16_TOKENS,    \
                 y + t0 * ldy, ldy, stream);                                              \
    else if (nt == 16)                                                                    \
      run_body(kind, cols, wg, xp, 16, y, ldy, stream);                                   \
    else                                                                                  \
      run_body(kind, cols, wg, xp, nt, y, ldy, stream);                                   \
  }
RUN(run_q8_0, K_Q8_0, pa_x16_vnni_q8_0)
RUN(run_q4_0, K_Q4_0, pa_x16_vnni_q4_0)
RUN(run_q4_1, K_Q4_1, pa_x16_vnni_q4_1)
RUN(run_q5_0, K_Q5_0, pa_x16_vnni_q5_0)

PA_X16_KERNEL(amx, q8_0, PA_X16_AMX_TOKENS);
PA_X16_KERNEL(amx, q4_0, PA_X16_AMX_TOKENS);
PA_X16_KERNEL(amx, q4_1, PA_X16_AMX_TOKENS);
PA_X16_KERNEL(amx, q5_0, PA_X16_AMX_TOKENS);

#endif /* __x86_64__ */
