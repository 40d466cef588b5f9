/* x4_avx512.c: the AVX-512 VNNI kernels of the x4 layout (Q4_K, Q5_K, Q6_K,
 * Q3_K, Q2_K) (kernels/x4.h), for one to 8 tokens at a time (Q6_K, Q3_K and
 * Q2_K: 4). It follows the
 * layout's canonical arithmetic step for step, so its bits equal the
 * reference's (x4.c) and do not depend on how many tokens share a call.
 * 8 tokens against two calls of 4 share the weights' unpacking and scales
 * between twice as many tokens: prefill of 128 tokens 0.93-1.00 of the
 * time (1B Q4_K_M 0.93, 0.95, 1.00; 8B 0.97; Gemma 3 0.96, 1.01), 16-user
 * decode steps 0.96, 0.96, 0.97 (1B Q4_K_M), alternated in one process.
 *
 * Per group of 4 rows and super-block: 8 loads of 64 weight bytes, 16 ands
 * (the high nibbles stay in place: 16x, taken out by the scale), and per
 * token 16 vpdpbusd against 16-byte activation patterns broadcast to the
 * 4 rows, one vpdpwssd for the mins, 3 conversions and 4 float operations;
 * the scales as floats (2 zero-extensions, conversions and multiplies, 3
 * permutes) are shared by the tokens. About 13 vector operations per row
 * and super-block for one token, against ~25 for the file layout's
 * one-token kernel (avx512.c), where every sub-block sum has to be widened
 * or reduced across lanes before its scale applies. */
#if defined(__x86_64__) /* x86 SIMD; other targets have the plain C tables */
#include <immintrin.h>
#include <string.h>

#include "kernels/cpu/ilv_run.h"
#include "kernels/x4.h"

PA_NO_FP_CONTRACT

#define VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")))
#define BODY static inline __attribute__((always_inline)) VNNI
#define X4_VNNI_TOKENS 8 /* tokens per call of the Q4_K / Q5_K kernels here */

BODY __m512i bcast16(const uint8_t *p) {
  return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)p));
}

/* Weights from memory (pf > 0): ask for the record's bytes pf ahead
 * (kernels.h). */
BODY void prefetch_rec(const uint8_t *w, size_t rec, int pf) {
  if (pf)
    for (size_t c = 0; c < rec; c += 64) _mm_prefetch((const char *)w + pf + c, _MM_HINT_T1);
}

/* y[t * ldy + r] = (acc[4r] + acc[4r + 1]) + (acc[4r + 2] + acc[4r + 3]) of
 * each token's 16 lanes (x4.h) */
BODY void store_rows(const __m512 *acc, float *y, int64_t ldy, const int T) {
  const __m512i idx_out = _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
#pragma GCC unroll 8
  for (int t = 0; t < T; t++) {
    __m512 a = _mm512_add_ps(acc[t], _mm512_permute_ps(acc[t], 0xB1)); /* l0 + l1, l2 + l3 */
    a = _mm512_add_ps(a, _mm512_permute_ps(a, 0x4E));                  /* (l0 + l1) + (l2 + l3) */
    _mm_storeu_ps(y + t * ldy, _mm512_castps512_ps128(_mm512_permutexvar_ps(idx_out, a)));
  }
}

/* A Q4_K / Q5_K super-block record's scales as floats (x4.h): s_lo, s_hi
 * (Q4_K's 1/16 for its high nibbles folded in), each lane's row's dmin mr,
 * and the mins widened for vpdpwssd. */
BODY void scales45(const int q5, const uint8_t *w, __m512 *s_lo, __m512 *s_hi, __m512 *mr,
                   __m512i *mn) {
  const __m512i idx_d = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  const __m512i idx_m = _mm512_add_epi32(idx_d, _mm512_set1_epi32(4));
  const __m512 dm =
      _mm512_castps256_ps512(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + PA_X4_DM))));
  const __m512 dr = _mm512_permutexvar_ps(idx_d, dm);
  *mr = _mm512_permutexvar_ps(idx_m, dm);
  *s_lo = _mm512_mul_ps(
      _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(w + PA_X4_SC)))), dr);
  *s_hi = _mm512_mul_ps(
      _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(w + PA_X4_SC + 16)))),
      q5 ? dr : _mm512_mul_ps(dr, _mm512_set1_ps(0.0625f)));
  *mn = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(w + PA_X4_MN)));
}

BODY void run_body45(const int q5, int64_t cols, const uint8_t *wg, const uint8_t *const *xp,
                     float *y, int64_t ldy, const int T, const pa_prefetch *stream) {
  const int64_t nsb = cols / QK_K;
  const size_t rec = q5 ? PA_X4_REC5 : PA_X4_REC;
  const int pf = pa_prefetch_distance(stream, stream ? stream->x4 : 0, T);
  const __m512i m_lo = _mm512_set1_epi8(0x0F), m_hi = _mm512_set1_epi8((char)0xF0);
  __m512 acc[X4_VNNI_TOKENS];
#pragma GCC unroll 8
  for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nsb; b++) {
    const uint8_t *w = wg + (size_t)b * rec;
    prefetch_rec(w, rec, pf);
    __m512 s_lo, s_hi, mr;
    __m512i mn;
    scales45(q5, w, &s_lo, &s_hi, &mr, &mn);
    /* two chains per sum for few tokens (integer sums: exact in any order),
     * so the vpdpbusd latency does not bound the one-token kernel */
    const int NA = T <= 2 ? 2 : 1;
    __m512i lo[2][X4_VNNI_TOKENS], hi[2][X4_VNNI_TOKENS];
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) lo[0][t] = hi[0][t] = lo[1][t] = hi[1][t] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
      const __m512i q = _mm512_loadu_si512(w + PA_X4_QS + 64 * i);
      __m512i ql = _mm512_and_si512(q, m_lo), qh;
      if (q5) { /* fifth bits by k-mask; the high values shifted down (not 16x) */
        uint64_t kl, kh;
        memcpy(&kl, w + PA_X4_QH + 16 * i, 8);
        memcpy(&kh, w + PA_X4_QH + 16 * i + 8, 8);
        qh = _mm512_and_si512(_mm512_srli_epi16(q, 4), m_lo);
        ql = _mm512_mask_add_epi8(ql, kl, ql, _mm512_set1_epi8(16));
        qh = _mm512_mask_add_epi8(qh, kh, qh, _mm512_set1_epi8(16));
      } else {
        qh = _mm512_and_si512(q, m_hi);
      }
#pragma GCC unroll 8
      for (int t = 0; t < T; t++) {
        const uint8_t *x = xp[t] + (size_t)b * PA_X4_XREC + 32 * i;
        const int a = NA == 2 ? (i & 1) : 0;
        lo[a][t] = _mm512_dpbusd_epi32(lo[a][t], ql, bcast16(x));
        hi[a][t] = _mm512_dpbusd_epi32(hi[a][t], qh, bcast16(x + 16));
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) {
      const uint8_t *x = xp[t] + (size_t)b * PA_X4_XREC;
      const __m512i mi = _mm512_dpwssd_epi32(_mm512_setzero_si512(), mn, bcast16(x + PA_X4_XS));
      float dx;
      memcpy(&dx, x + PA_X4_XD, 4);
      const __m512i l = NA == 2 ? _mm512_add_epi32(lo[0][t], lo[1][t]) : lo[0][t];
      const __m512i h = NA == 2 ? _mm512_add_epi32(hi[0][t], hi[1][t]) : hi[0][t];
      __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(l), s_lo);
      v = _mm512_fmadd_ps(_mm512_cvtepi32_ps(h), s_hi, v);
      v = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mi), mr, v);
      acc[t] = _mm512_fmadd_ps(v, _mm512_set1_ps(dx), acc[t]);
    }
  }
  store_rows(acc, y, ldy, T);
}

/* Q6_K (x4.h). The activation record here (X6V_REC bytes per super-block)
 * is x4.h's xq (256 bytes), then each sub-block column k's starting sums,
 * nb[k][p] = -32 * bs[4 p + k] (int32), so that the dots start from the
 * offset's share and no step takes it off after them (the same integers),
 * then d. 336 bytes keep 4 tokens' records of an 8192-column row (43 KB) in
 * L1 beside the weights: with the 16 lanes' sums written out (576 bytes,
 * 73 KB) prefill's ffn_down took 4.5% longer. */
#define X6V_REC 336
#define X6V_NB 256 /* int32 nb[4][4] */
#define X6V_XD 320

static size_t x_size6_vnni(int64_t cols) {
  return (size_t)(cols / QK_K) * X6V_REC;
}

/* The record for values offset by off01 in the sums of columns k = 0, 1 and
 * off23 in those of 2, 3 (Q6_K 32, 32; Q3_K 4, and 32 for its 8x sums). */
static void pack_x_off(int64_t cols, const void *xq, void *xp, int off01, int off23) {
  uint8_t rec[PA_X4_XREC6];
  for (int64_t b = 0; b < cols / QK_K; b++) {
    uint8_t *out = (uint8_t *)xp + (size_t)b * X6V_REC;
    pa_x4_pack_x6(QK_K, (const uint8_t *)xq + (size_t)b * sizeof(block_q8_K), rec);
    memcpy(out, rec, 256);
    for (int k = 0; k < 4; k++)
      for (int p = 0; p < 4; p++) {
        int16_t bs;
        memcpy(&bs, rec + PA_X4_XBS6 + 2 * (4 * p + k), 2);
        const int32_t nb = -(k < 2 ? off01 : off23) * (int32_t)bs;
        memcpy(out + X6V_NB + 16 * k + 4 * p, &nb, 4);
      }
    memcpy(out + X6V_XD, rec + PA_X4_XD6, 4);
    memset(out + X6V_XD + 4, 0, X6V_REC - X6V_XD - 4);
  }
}

static void pack_x6_vnni(int64_t cols, const void *xq, void *xp) {
  pack_x_off(cols, xq, xp, 32, 32);
}

static void pack_x3_vnni(int64_t cols, const void *xq, void *xp) {
  pack_x_off(cols, xq, xp, 4, 32);
}

/* Q6_K's vectors of group j of a super-block record w (x4.h): three
 * vectors give the values of vectors (2 j, 0), (2 j, 1), (2 j + 1, 0) in
 * their low 6 bits and, two bits in each, those of (2 j + 1, 1): v[a] is
 * vector (2 j + a / 2, a % 2). */
BODY void unpack6(const uint8_t *w, int j, __m512i v[4]) {
  const __m512i six = _mm512_set1_epi8(0x3F);
  const uint8_t *g = w + 192 * j;
  const __m512i a0 = _mm512_loadu_si512(g), a1 = _mm512_loadu_si512(g + 64),
                a2 = _mm512_loadu_si512(g + 128);
  v[0] = _mm512_and_si512(a0, six);
  v[1] = _mm512_and_si512(a1, six);
  v[2] = _mm512_and_si512(a2, six);
  /* top bits down by 6, 4, 2 (16-bit shifts bring the next byte's bits
   * in above them), merged under bit masks (c ? a : b is table 0xE4) */
  __m512i m = _mm512_ternarylogic_epi32(_mm512_srli_epi16(a0, 6), _mm512_srli_epi16(a1, 4),
                                        _mm512_set1_epi8(0x03), 0xE4);
  m = _mm512_ternarylogic_epi32(m, _mm512_srli_epi16(a2, 2), _mm512_set1_epi8(0x0F), 0xE4);
  v[3] = _mm512_and_si512(m, six);
}

/* Q6_K's 16 vectors of a super-block and their dots into D[k][t]. */
BODY void unpack_dot6(const uint8_t *w, const uint8_t *const *xp, int64_t b,
                      __m512i D[4][PA_X4_TOKENS], const int T) {
#pragma GCC unroll 4
  for (int j = 0; j < 4; j++) {
    __m512i v[4];
    unpack6(w, j, v);
#pragma GCC unroll 4
    for (int a = 0; a < 4; a++) {
      const int i = 2 * j + a / 2, hh = a % 2, k = 2 * hh + i / 4;
#pragma GCC unroll 4
      for (int t = 0; t < T; t++) {
        const uint8_t *x = xp[t] + (size_t)b * X6V_REC + 32 * i + 16 * hh;
        D[k][t] = _mm512_dpbusd_epi32(D[k][t], v[a], bcast16(x));
      }
    }
  }
}

/* Q3_K's (x4.h): per triple j, six vectors by one and each (those of
 * hh = 1 left in place, as 8 u: their sums D[2], D[3] are 8x, and so are
 * their starting sums), and (4j+3, 0) / (4j+3, 1) from the two bits on top
 * of y / x shifted down under the top bit from z, merged by bit masks
 * (c ? a : b is table 0xE4) and masked (the 16-bit shifts bring the next
 * byte's bits in). */
BODY void unpack_dot3(const uint8_t *w, const uint8_t *const *xp, int64_t b,
                      __m512i D[4][PA_X4_TOKENS], const int T) {
  const __m512i lo3 = _mm512_set1_epi8(0x07), hi3 = _mm512_set1_epi8(0x38);
#pragma GCC unroll 2
  for (int j = 0; j < 2; j++) {
    const uint8_t *g = w + 192 * j;
    const __m512i x = _mm512_loadu_si512(g), y = _mm512_loadu_si512(g + 64),
                  z = _mm512_loadu_si512(g + 128);
    __m512i v[8]; /* vector (4j + a / 2, a % 2) */
    v[0] = _mm512_and_si512(x, lo3);
    v[1] = _mm512_and_si512(x, hi3);
    v[2] = _mm512_and_si512(y, lo3);
    v[3] = _mm512_and_si512(y, hi3);
    v[4] = _mm512_and_si512(z, lo3);
    v[5] = _mm512_and_si512(z, hi3);
    v[6] =
        _mm512_and_si512(_mm512_ternarylogic_epi32(_mm512_srli_epi16(y, 6), _mm512_srli_epi16(z, 5),
                                                   _mm512_set1_epi8(0x03), 0xE4),
                         lo3);
    v[7] =
        _mm512_and_si512(_mm512_ternarylogic_epi32(_mm512_srli_epi16(x, 3), _mm512_srli_epi16(z, 1),
                                                   _mm512_set1_epi8(0x18), 0xE4),
                         hi3);
#pragma GCC unroll 8
    for (int a = 0; a < 8; a++) {
      const int i = 4 * j + a / 2, hh = a % 2, k = 2 * hh + j;
#pragma GCC unroll 4
      for (int t = 0; t < T; t++) {
        const uint8_t *xr = xp[t] + (size_t)b * X6V_REC + 32 * i + 16 * hh;
        D[k][t] = _mm512_dpbusd_epi32(D[k][t], v[a], bcast16(xr));
      }
    }
  }
}

/* Q6_K and Q3_K (whose unpacking is unpack_dot3's, the rest the same). Q6_K,
 * per group of 4 rows and super-block: 12 loads of 64 bytes, 3 ands and,
 * for the fourth vector of each group of three, 3 shifts and 3 logic
 * operations to unpack the 6-bit values, 4 sign extensions for the scales
 * (shared by the tokens); per token 16 vpdpbusd into four sums, one per
 * sub-block column k, started at -32 x the activations' 16-column sums,
 * each multiplied by its lane's int8 scale (vpmulld), then one conversion
 * and one fma per 16 lanes. Against a layout and kernel that took the
 * offset off after the dots (two vpdpwssd of -32 x the scales against the
 * sums: 16 more operations per super-block), one thread, weights in L2
 * (bench_kernels, 3-4 alternations): one token 53.2-53.5 against 43.1-43.3
 * GB/s; 16 tokens 280-291 against 235-236 GOP/s. GF2P8AFFINEQB for
 * the fourth vector (3 bit moves and an or instead of 6 operations) gave
 * 55.3 GB/s against 53.4 for one token: not worth a second kernel for the
 * CPUs with GFNI. */
/* A Q6_K / Q3_K super-block record's scales sc[k] (lanes as D[k]) and d
 * of each lane's row. */
BODY void scales6(const uint8_t *w, size_t sc_at, size_t d_at, __m512i idx_d, __m512i sc[4],
                  __m512 *dr) {
#pragma GCC unroll 4
  for (int k = 0; k < 4; k++)
    sc[k] = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(w + sc_at + 16 * k)));
  const __m512 dm =
      _mm512_castps128_ps512(_mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(w + d_at))));
  *dr = _mm512_permutexvar_ps(idx_d, dm);
}

/* acc plus one token's super-block: its sums D0..D3 times the scales, times
 * d and the token's scale (at xd). */
BODY __m512 add6(const int q3, const __m512i sc[4], __m512 dr, __m512i D0, __m512i D1, __m512i D2,
                 __m512i D3, const uint8_t *xd, __m512 acc) {
  __m512i s23 = _mm512_add_epi32(_mm512_mullo_epi32(sc[2], D2), _mm512_mullo_epi32(sc[3], D3));
  if (q3) s23 = _mm512_srai_epi32(s23, 3); /* 8x sums: exact */
  const __m512i s = _mm512_add_epi32(
      _mm512_add_epi32(_mm512_mullo_epi32(sc[0], D0), _mm512_mullo_epi32(sc[1], D1)), s23);
  float dx;
  memcpy(&dx, xd, 4);
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dr, _mm512_set1_ps(dx)), acc);
}

BODY void run_body6(const int q3, int64_t cols, const uint8_t *wg, const uint8_t *const *xp,
                    float *y, int64_t ldy, const int T, const pa_prefetch *stream) {
  const int64_t nsb = cols / QK_K;
  const size_t rec = q3 ? PA_X4_REC3 : PA_X4_REC6, sc_at = q3 ? PA_X4_SC3 : PA_X4_SC6,
               d_at = q3 ? PA_X4_D3 : PA_X4_D6;
  const int pf = pa_prefetch_distance(stream, stream ? stream->x4 : 0, T);
  const __m512i idx_d = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  __m512 acc[PA_X4_TOKENS];
#pragma GCC unroll 4
  for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nsb; b++) {
    const uint8_t *w = wg + (size_t)b * rec;
    prefetch_rec(w, rec, pf);
    __m512i D[4][PA_X4_TOKENS];
#pragma GCC unroll 4
    for (int t = 0; t < T; t++)
#pragma GCC unroll 4
      for (int k = 0; k < 4; k++)
        D[k][t] =
            bcast16(xp[t] + (size_t)b * X6V_REC + X6V_NB + 16 * k); /* lane 4 r + p: nb[k][p] */
    if (q3)
      unpack_dot3(w, xp, b, D, T);
    else
      unpack_dot6(w, xp, b, D, T);
    __m512i sc[4];
    __m512 dr;
    scales6(w, sc_at, d_at, idx_d, sc, &dr);
#pragma GCC unroll 4
    for (int t = 0; t < T; t++)
      acc[t] = add6(q3, sc, dr, D[0][t], D[1][t], D[2][t], D[3][t],
                    xp[t] + (size_t)b * X6V_REC + X6V_XD, acc[t]);
  }
  store_rows(acc, y, ldy, T);
}

/* Q2_K (x4.h). The activation record here (X2V_REC bytes per super-block):
 * xq, then the 16-column sums in the pairs a vpdpwssd takes, (bs[4 p],
 * bs[4 p + 1]) in dword p at X2V_B and (bs[4 p + 2], bs[4 p + 3]) at
 * X2V_B + 16, then d. */
#define X2V_REC 304
#define X2V_B 256
#define X2V_XD 288

static size_t x_size2_vnni(int64_t cols) {
  return (size_t)(cols / QK_K) * X2V_REC;
}

static void pack_x2_vnni(int64_t cols, const void *xq, void *xp) {
  uint8_t rec[PA_X4_XREC6];
  for (int64_t b = 0; b < cols / QK_K; b++) {
    uint8_t *out = (uint8_t *)xp + (size_t)b * X2V_REC;
    pa_x4_pack_x6(QK_K, (const uint8_t *)xq + (size_t)b * sizeof(block_q8_K), rec);
    memcpy(out, rec, 256);
    for (int p = 0; p < 4; p++) {
      memcpy(out + X2V_B + 4 * p, rec + PA_X4_XBS6 + 8 * p, 4);
      memcpy(out + X2V_B + 16 + 4 * p, rec + PA_X4_XBS6 + 8 * p + 4, 4);
    }
    memcpy(out + X2V_XD, rec + PA_X4_XD6, 4);
    memset(out + X2V_XD + 4, 0, X2V_REC - X2V_XD - 4);
  }
}

/* Per group of 4 rows and super-block: 4 loads of 64 bytes and 16 ands (a
 * column k's values 4^k x in place, and so its sums: the scales are taken
 * 4^(3 - k) x, and the sum of the four products shifted down by 6, exactly);
 * the scales and mins out of their bytes (shared by the tokens); per token
 * 16 vpdpbusd, 4 vpmulld, two vpdpwssd of the mins against the 16-column
 * sums in pairs, two conversions and two fmas per 16 lanes. */
BODY void run_body2(int64_t cols, const uint8_t *wg, const uint8_t *const *xp, float *y,
                    int64_t ldy, const int T, const pa_prefetch *stream) {
  const int64_t nsb = cols / QK_K;
  const int pf = pa_prefetch_distance(stream, stream ? stream->x4 : 0, T);
  const __m512i nib = _mm512_set1_epi32(0x0F);
  const __m512i idx_d = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  const __m512i idx_m = _mm512_add_epi32(idx_d, _mm512_set1_epi32(4));
  __m512 acc[PA_X4_TOKENS];
#pragma GCC unroll 4
  for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nsb; b++) {
    const uint8_t *w = wg + (size_t)b * PA_X4_REC2;
    prefetch_rec(w, PA_X4_REC2, pf);
    __m512i D[4][PA_X4_TOKENS];
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) D[0][t] = D[1][t] = D[2][t] = D[3][t] = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int m = 0; m < 4; m++) {
      const __m512i q = _mm512_loadu_si512(w + 64 * m);
#pragma GCC unroll 4
      for (int k = 0; k < 4; k++) {
        const __m512i v = _mm512_and_si512(q, _mm512_set1_epi8((char)(3 << (2 * k))));
        const int hh = k / 2, i = 4 * (k % 2) + m; /* x4.h */
#pragma GCC unroll 4
        for (int t = 0; t < T; t++)
          D[k][t] = _mm512_dpbusd_epi32(D[k][t], v,
                                        bcast16(xp[t] + (size_t)b * X2V_REC + 32 * i + 16 * hh));
      }
    }
    __m512i sc[4], mn[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
      const __m512i scm =
          _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(w + PA_X4_SCM2 + 16 * k)));
      sc[k] = _mm512_slli_epi32(_mm512_and_si512(scm, nib), 6 - 2 * k);
      mn[k] = _mm512_srli_epi32(scm, 4);
    }
    const __m512i m01 = _mm512_or_si512(mn[0], _mm512_slli_epi32(mn[1], 16)),
                  m23 = _mm512_or_si512(mn[2], _mm512_slli_epi32(mn[3], 16));
    const __m512 dm =
        _mm512_castps256_ps512(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + PA_X4_D2))));
    const __m512 dr = _mm512_permutexvar_ps(idx_d, dm), mr = _mm512_permutexvar_ps(idx_m, dm);
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) {
      const uint8_t *x = xp[t] + (size_t)b * X2V_REC;
      __m512i s = _mm512_add_epi32(
          _mm512_add_epi32(_mm512_mullo_epi32(sc[0], D[0][t]), _mm512_mullo_epi32(sc[1], D[1][t])),
          _mm512_add_epi32(_mm512_mullo_epi32(sc[2], D[2][t]), _mm512_mullo_epi32(sc[3], D[3][t])));
      s = _mm512_srai_epi32(s, 6); /* 64 x S: exact */
      const __m512i mi =
          _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(_mm512_setzero_si512(), m01, bcast16(x + X2V_B)),
                              m23, bcast16(x + X2V_B + 16));
      float dx;
      memcpy(&dx, x + X2V_XD, 4);
      const __m512 vdx = _mm512_set1_ps(dx);
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dr, vdx), acc[t]);
      acc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mi), _mm512_mul_ps(mr, vdx), acc[t]);
    }
  }
  store_rows(acc, y, ldy, T);
}

/* The kernels' bodies (ilv_run.h): kind 0 Q4_K, 1 Q5_K, 2 Q6_K, 3 Q3_K, 4 Q2_K (compile-time). */
BODY void run_body(const int kind, int64_t cols, const uint8_t *wg, const uint8_t *const *xp,
                   float *y, int64_t ldy, const int T, const pa_prefetch *stream) {
  if (kind == 4)
    run_body2(cols, wg, xp, y, ldy, T, stream);
  else if (kind >= 2)
    run_body6(kind == 3, cols, wg, xp, y, ldy, T, stream);
  else
    run_body45(kind, cols, wg, xp, y, ldy, T, stream);
}

/* Q4_K and Q5_K take up to 8 tokens a call, Q6_K, Q3_K and Q2_K 4 (their
 * four sums per token, D[4][T], would not fit the registers at 8). */
PA_ILV_RUN8(VNNI, run_q4k, 0)
PA_ILV_RUN8(VNNI, run_q5k, 1)
PA_ILV_RUN4(VNNI, run_q6k, 2)
PA_ILV_RUN4(VNNI, run_q3k, 3)
PA_ILV_RUN4(VNNI, run_q2k, 4)

/* One token through two groups at a time (kernels.h, run1), group g of
 * the first half of the call's groups with group g of the second (two long
 * streams; pairs of neighbouring groups, two streams of 4.7 KB each on 2048
 * columns, halved what one core read from memory: 13-14 against 22 GB/s).
 * Each activation pattern, broadcast once, serves both groups' dots; each
 * group's arithmetic is run_body45's for one token, step for step (the
 * integer sums in any order are the same integers). On AMD Zen 4 a 512-bit
 * broadcast of 16 bytes costs a shuffle besides its load: one core, weights
 * in L2, Q4_K 58 against 48 GB/s group by group, Q6_K 59-60 against 51-52;
 * from memory 0.85-0.86 of a plain read against 0.82-0.84 (bench_kernels 1
 * vsread 1 | 128 Q4_K, BENCH_ILV=1 BENCH_HUGE=1 BENCH_COLS=2048). With no
 * broadcasts at all (an experiment with wrong sums) one core read Q4_K from
 * memory at a plain read's rate. */
BODY void run_pair45(const int q5, int64_t cols, const uint8_t *wa, const uint8_t *wb,
                     const uint8_t *x0, float *y, int64_t ldy, const pa_prefetch *stream) {
  const int64_t nsb = cols / QK_K;
  const size_t rec = q5 ? PA_X4_REC5 : PA_X4_REC;
  const int pf = pa_prefetch_distance(stream, stream ? stream->x4 : 0, 1);
  const __m512i m_lo = _mm512_set1_epi8(0x0F), m_hi = _mm512_set1_epi8((char)0xF0);
  __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  for (int64_t b = 0; b < nsb; b++) {
    const uint8_t *x = x0 + (size_t)b * PA_X4_XREC;
    const uint8_t *w[2] = {wa + (size_t)b * rec, wb + (size_t)b * rec};
    __m512 s_lo[2], s_hi[2], mr[2];
    __m512i mn[2], lo[2][2], hi[2][2];
#pragma GCC unroll 2
    for (int g = 0; g < 2; g++) {
      prefetch_rec(w[g], rec, pf);
      scales45(q5, w[g], &s_lo[g], &s_hi[g], &mr[g], &mn[g]);
      lo[0][g] = hi[0][g] = lo[1][g] = hi[1][g] = _mm512_setzero_si512();
    }
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
      const __m512i xl = bcast16(x + 32 * i), xh = bcast16(x + 32 * i + 16);
#pragma GCC unroll 2
      for (int g = 0; g < 2; g++) {
        const __m512i q = _mm512_loadu_si512(w[g] + PA_X4_QS + 64 * i);
        __m512i ql = _mm512_and_si512(q, m_lo), qh;
        if (q5) {
          uint64_t kl, kh;
          memcpy(&kl, w[g] + PA_X4_QH + 16 * i, 8);
          memcpy(&kh, w[g] + PA_X4_QH + 16 * i + 8, 8);
          qh = _mm512_and_si512(_mm512_srli_epi16(q, 4), m_lo);
          ql = _mm512_mask_add_epi8(ql, kl, ql, _mm512_set1_epi8(16));
          qh = _mm512_mask_add_epi8(qh, kh, qh, _mm512_set1_epi8(16));
        } else {
          qh = _mm512_and_si512(q, m_hi);
        }
        lo[i & 1][g] = _mm512_dpbusd_epi32(lo[i & 1][g], ql, xl);
        hi[i & 1][g] = _mm512_dpbusd_epi32(hi[i & 1][g], qh, xh);
      }
    }
    const __m512i xs = bcast16(x + PA_X4_XS);
    float dx;
    memcpy(&dx, x + PA_X4_XD, 4);
#pragma GCC unroll 2
    for (int g = 0; g < 2; g++) {
      const __m512i mi = _mm512_dpwssd_epi32(_mm512_setzero_si512(), mn[g], xs);
      __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(lo[0][g], lo[1][g])), s_lo[g]);
      v = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(hi[0][g], hi[1][g])), s_hi[g], v);
      v = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mi), mr[g], v);
      acc[g] = _mm512_fmadd_ps(v, _mm512_set1_ps(dx), acc[g]);
    }
  }
  store_rows(acc, y, ldy, 2);
}

/* name: run1 (kernels.h) by pairs (pair: a call on wa, wb, x, y, ldy,
 * stream), an odd last group by one (the one-token entry) */
#define PA_X4_RUN1(name, pair, one)                                                               \
  static VNNI __attribute__((noinline)) void name(int64_t cols, const uint8_t *wg, size_t gbytes, \
                                                  int64_t ng, const uint8_t *x, float *y,         \
                                                  const pa_prefetch *stream) {                    \
    const int64_t half = ng / 2, ldy = 4 * half;                                                  \
    for (int64_t g = 0; g < half; g++, y += 4) {                                                  \
      const uint8_t *wa = wg + (size_t)g * gbytes, *wb = wg + (size_t)(g + half) * gbytes;        \
      pair;                                                                                       \
    }                                                                                             \
    if (ng % 2) one(cols, wg + (size_t)(ng - 1) * gbytes, &x, y + 4 * half, stream);              \
  }
/* Q6_K the same way: run_body6's steps for one token in each of groups
 * wa and wb, the patterns broadcast once for both. */
BODY void run_pair6(int64_t cols, const uint8_t *wa, const uint8_t *wb, const uint8_t *x0, float *y,
                    int64_t ldy, const pa_prefetch *stream) {
  const int64_t nsb = cols / QK_K;
  const int pf = pa_prefetch_distance(stream, stream ? stream->x4 : 0, 1);
  const __m512i idx_d = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  for (int64_t b = 0; b < nsb; b++) {
    const uint8_t *x = x0 + (size_t)b * X6V_REC;
    const uint8_t *w[2] = {wa + (size_t)b * PA_X4_REC6, wb + (size_t)b * PA_X4_REC6};
    prefetch_rec(w[0], PA_X4_REC6, pf);
    prefetch_rec(w[1], PA_X4_REC6, pf);
    __m512i D[4][2];
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) D[k][0] = D[k][1] = bcast16(x + X6V_NB + 16 * k);
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
      __m512i v[2][4];
      unpack6(w[0], j, v[0]);
      unpack6(w[1], j, v[1]);
#pragma GCC unroll 4
      for (int a = 0; a < 4; a++) {
        const int i = 2 * j + a / 2, hh = a % 2, k = 2 * hh + i / 4;
        const __m512i xb = bcast16(x + 32 * i + 16 * hh);
        D[k][0] = _mm512_dpbusd_epi32(D[k][0], v[0][a], xb);
        D[k][1] = _mm512_dpbusd_epi32(D[k][1], v[1][a], xb);
      }
    }
#pragma GCC unroll 2
    for (int g = 0; g < 2; g++) {
      __m512i sc[4];
      __m512 dr;
      scales6(w[g], PA_X4_SC6, PA_X4_D6, idx_d, sc, &dr);
      acc[g] = add6(0, sc, dr, D[0][g], D[1][g], D[2][g], D[3][g], x + X6V_XD, acc[g]);
    }
  }
  store_rows(acc, y, ldy, 2);
}

PA_X4_RUN1(run1_q4k, run_pair45(0, cols, wa, wb, x, y, ldy, stream), run_q4k_4_one)
PA_X4_RUN1(run1_q5k, run_pair45(1, cols, wa, wb, x, y, ldy, stream), run_q5k_4_one)
PA_X4_RUN1(run1_q6k, run_pair6(cols, wa, wb, x, y, ldy, stream), run_q6k_one)

const pa_ilv_kernel pa_x4_q4k_vnni = {4,       X4_VNNI_TOKENS, pa_x4_x_size, pa_x4_pack_x,
                                      run_q4k, run1_q4k};
const pa_ilv_kernel pa_x4_q5k_vnni = {4,       X4_VNNI_TOKENS, pa_x4_x_size, pa_x4_pack_x,
                                      run_q5k, run1_q5k};
const pa_ilv_kernel pa_x4_q6k_vnni = {4,       PA_X4_TOKENS, x_size6_vnni, pack_x6_vnni,
                                      run_q6k, run1_q6k};
const pa_ilv_kernel pa_x4_q3k_vnni = {4, PA_X4_TOKENS, x_size6_vnni, pack_x3_vnni, run_q3k, NULL};
const pa_ilv_kernel pa_x4_q2k_vnni = {4, PA_X4_TOKENS, x_size2_vnni, pack_x2_vnni, run_q2k, NULL};

#endif /* __x86_64__ */
