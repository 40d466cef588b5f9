/* x4_avx2.c: the AVX2 kernels of the x4 layout (Q4_K, Q5_K, Q6_K, Q3_K, Q2_K;
 * kernels/x4.h), for one to PA_X4_TOKENS tokens at a time, on CPUs without
 * AVX-512. They
 * follow the layout's canonical arithmetic step for step, so their bits
 * equal the reference's (x4.c), the VNNI kernel's, and do not depend on how
 * many tokens share a call.
 *
 * A 256-bit vector holds 8 of the layout's 16 lanes: half H = rows 2H and
 * 2H + 1 (the record's bytes 32 H .. 32 H + 31 of each 64-byte vector). The
 * activation pattern of a vector (16 bytes, the same for all 4 rows) is
 * packed twice over, 32 bytes, a memory operand of pmaddubsw. Without
 * vpdpbusd the products are pmaddubsw of the nibbles (<= 15) against the
 * activations (Q8_K: |x| <= 127) into
 * 16-bit pair sums (<= 3810), all 8 vectors of a super-block added in 16
 * bits (<= 30480) before one pmaddwd; the high nibbles are shifted down,
 * and their int32 sum shifted back up (x 16: the canonical hi, exactly).
 * Q5_K's values reach 31 (pairs <= 7874): 4 vectors in 16 bits, then 32.
 * Per half and super-block: 8 loads and 16-24 operations to unpack the
 * weights (shared by the tokens), and per token 16 pmaddubsw, 16 adds,
 * 3 pmaddwd (sums and mins) and 7 float operations. */
#if defined(__x86_64__) /* x86 SIMD; other targets have the plain C tables */
#include <immintrin.h>
#include <string.h>

#include "kernels/cpu/ilv_run.h"
#include "kernels/cpu/simd_masks.h"
#include "kernels/x4.h"

PA_NO_FP_CONTRACT

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define BODY static inline __attribute__((always_inline)) AVX2

/* Keeps v as computed here, so GCC does not re-associate a chain of integer
 * adds into a tree over every product (x16_avx2.c: it spills). */
#define KEEP(v) __asm__("" : "+x"(v))

BODY __m256i load256(const uint8_t *p) {
  return _mm256_loadu_si256((const __m256i *)p);
}

/* This kernel's activation record (per super-block, X4A_REC bytes): the
 * x4 record's 16 16-byte patterns each written twice (xq[i][h] at 64 i +
 * 32 h, both 128-bit halves), so that pmaddubsw takes them straight from
 * memory instead of after a broadcast load (16 fewer instructions per
 * token, half and super-block); then xs twice (512) and d (544). */
#define X4A_REC 576
#define X4A_XS 512
#define X4A_XD 544

static size_t x_size_avx2(int64_t cols) {
  return (size_t)(cols / QK_K) * X4A_REC;
}

/* The x4 record's 16 activation patterns of 16 bytes, each twice over. */
static void patterns_twice(uint8_t *out, const uint8_t *rec) {
  for (int k = 0; k < 16; k++) {
    memcpy(out + 32 * k, rec + 16 * k, 16);
    memcpy(out + 32 * k + 16, rec + 16 * k, 16);
  }
}

static void pack_x_avx2(int64_t cols, const void *xq, void *xp) {
  uint8_t rec[PA_X4_XREC];
  for (int64_t b = 0; b < cols / QK_K; b++) {
    pa_x4_pack_x(QK_K, (const uint8_t *)xq + (size_t)b * sizeof(block_q8_K), rec);
    uint8_t *out = (uint8_t *)xp + (size_t)b * X4A_REC;
    patterns_twice(out, rec);
    memcpy(out + X4A_XS, rec + PA_X4_XS, 16);
    memcpy(out + X4A_XS + 16, rec + PA_X4_XS, 16);
    memcpy(out + X4A_XD, rec + PA_X4_XD, 4);
    memset(out + X4A_XD + 4, 0, X4A_REC - X4A_XD - 4);
  }
}

/* 16 in byte j where bit j of the 32-bit word at p is set. */
BODY __m256i fifth_bits(const uint8_t *p) {
  return _mm256_and_si256(pa_bits_to_bytes(p), _mm256_set1_epi8(16));
}

/* Each token's activation record of super-block b (rec bytes apart),
 * laundered: the two halves load the same activation patterns, and GCC,
 * left to see that, keeps all of them from the first half for the second,
 * on the stack. */
BODY void token_records(const uint8_t *const *xp, int64_t b, size_t rec, const uint8_t **xb,
                        const int T) {
#pragma GCC unroll 4
  for (int t = 0; t < T; t++) {
    xb[t] = xp[t] + (size_t)b * rec;
    __asm__ volatile("" : "+r"(xb[t]));
  }
}

/* Super-block w, half H, T tokens: the canonical step into acc[8 (2 t + H)]. */
BODY void half_step(const int q5, const uint8_t *w, const uint8_t *const *xp, int64_t b, float *acc,
                    const int T, const int H) {
  const __m256i nib = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  __m256i l16[PA_X4_TOKENS], h16[PA_X4_TOKENS], l32[PA_X4_TOKENS], h32[PA_X4_TOKENS];
  const uint8_t *xb[PA_X4_TOKENS];
#pragma GCC unroll 4
  for (int t = 0; t < T; t++) l16[t] = h16[t] = l32[t] = h32[t] = _mm256_setzero_si256();
  token_records(xp, b, X4A_REC, xb, T);
#pragma GCC unroll 8
  for (int i = 0; i < 8; i++) {
    const __m256i q = _mm256_loadu_si256((const __m256i *)(w + PA_X4_QS + 64 * i + 32 * H));
    __m256i ql = _mm256_and_si256(q, nib), qh = _mm256_and_si256(_mm256_srli_epi16(q, 4), nib);
    if (q5) {
      ql = _mm256_or_si256(ql, fifth_bits(w + PA_X4_QH + 8 * (2 * i) + 4 * H));
      qh = _mm256_or_si256(qh, fifth_bits(w + PA_X4_QH + 8 * (2 * i + 1) + 4 * H));
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) {
      const uint8_t *x = xb[t] + 64 * i;
      l16[t] = _mm256_add_epi16(l16[t], _mm256_maddubs_epi16(ql, load256(x)));
      KEEP(l16[t]);
      h16[t] = _mm256_add_epi16(h16[t], _mm256_maddubs_epi16(qh, load256(x + 32)));
      KEEP(h16[t]);
      if (q5 && (i & 3) == 3) { /* 4 vectors of values up to 31: widen */
        l32[t] = _mm256_add_epi32(l32[t], _mm256_madd_epi16(l16[t], ones));
        h32[t] = _mm256_add_epi32(h32[t], _mm256_madd_epi16(h16[t], ones));
        l16[t] = h16[t] = _mm256_setzero_si256();
      }
    }
  }
  /* the weights' scales for the half's 8 lanes (rows 2H, 2H + 1) */
  const __m256 dm = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + PA_X4_DM)));
  const __m256i idx_d =
      _mm256_setr_epi32(2 * H, 2 * H, 2 * H, 2 * H, 2 * H + 1, 2 * H + 1, 2 * H + 1, 2 * H + 1);
  const __m256 dr = _mm256_permutevar8x32_ps(dm, idx_d);
  const __m256 mr = _mm256_permutevar8x32_ps(dm, _mm256_add_epi32(idx_d, _mm256_set1_epi32(4)));
  const __m256 s_lo = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(
                                        _mm_loadl_epi64((const __m128i *)(w + PA_X4_SC + 8 * H)))),
                                    dr);
  const __m256 s_hi = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(
                                        (const __m128i *)(w + PA_X4_SC + 16 + 8 * H)))),
                                    q5 ? dr : _mm256_mul_ps(dr, _mm256_set1_ps(0.0625f)));
  const __m256i mn =
      _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(w + PA_X4_MN + 16 * H)));
#pragma GCC unroll 4
  for (int t = 0; t < T; t++) {
    const uint8_t *x = xp[t] + (size_t)b * X4A_REC;
    __m256i lo, hi;
    if (q5) {
      lo = l32[t];
      hi = h32[t];
    } else {
      lo = _mm256_madd_epi16(l16[t], ones);
      hi = _mm256_slli_epi32(_mm256_madd_epi16(h16[t], ones), 4);
    }
    const __m256i mi = _mm256_madd_epi16(mn, load256(x + X4A_XS));
    float dx;
    memcpy(&dx, x + X4A_XD, 4);
    __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(lo), s_lo);
    v = _mm256_fmadd_ps(_mm256_cvtepi32_ps(hi), s_hi, v);
    v = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mi), mr, v);
    float *a = acc + 8 * (2 * t + H);
    _mm256_store_ps(a, _mm256_fmadd_ps(v, _mm256_set1_ps(dx), _mm256_load_ps(a)));
  }
}

/* ---- Q6_K ----
 * Values up to 63 against |x| <= 127: pair sums up to 16002, two vectors
 * of one sub-block added in 16 bits (32004), then one pmaddwd with the
 * sub-block's scale in both 16-bit halves of each lane gives sc * (those
 * products) in 32 bits. The -32 comes off as sc * 32 * bs per sub-block:
 * a pmaddwd of the scales with 16 bs in both halves (|16 bs| <= 32512),
 * packed with the activations. Per half and super-block: 12 loads and 44
 * operations to unpack the weights (68 with separate low nibbles and top
 * bits, x4.h; one thread, weights in L2, one token: 31.7 against 33.9 GB/s) and 8 for
 * the scales (shared by the tokens), and per token 16 pmaddubsw, 8 16-bit
 * adds, 12 pmaddwd, 12 32-bit adds and 3 float operations. */

/* The activation record (per super-block, X6A_REC bytes): the 16 patterns
 * twice over as X4A (0), then per sub-block column k = 0..3 a vector of
 * 16 bs[4 p + k] in both halves of lane p (512 + 32 k, the same for both
 * halves of the rows), and d (640). */
#define X6A_REC 704
#define X6A_BS 512
#define X6A_XD 640

static size_t x_size6_avx2(int64_t cols) {
  return (size_t)(cols / QK_K) * X6A_REC;
}

/* bs[k] holds (o01 or o23) x bs in both halves for columns k = 0, 1 or 2, 3
 * (a pmaddwd with the scale in both halves takes 2x that off): Q6_K 16, 16;
 * Q3_K 2 and, for its 8x sums, 16; Q2_K 1, 1 (against (m, 0) lanes: m x bs). */
static void pack_x_off(int64_t cols, const void *xq, void *xp, int o01, int o23) {
  uint8_t rec[PA_X4_XREC6];
  for (int64_t b = 0; b < cols / QK_K; b++) {
    pa_x4_pack_x6(QK_K, (const uint8_t *)xq + (size_t)b * sizeof(block_q8_K), rec);
    uint8_t *out = (uint8_t *)xp + (size_t)b * X6A_REC;
    patterns_twice(out, rec);
    for (int k = 0; k < 4; k++)
      for (int lane = 0; lane < 8; lane++) {
        int16_t bs;
        memcpy(&bs, rec + PA_X4_XBS6 + 2 * (4 * (lane % 4) + k), 2);
        const int16_t o = (int16_t)((k < 2 ? o01 : o23) * bs), v[2] = {o, o};
        memcpy(out + X6A_BS + 32 * k + 4 * lane, v, 4);
      }
    memcpy(out + X6A_XD, rec + PA_X4_XD6, 4);
    memset(out + X6A_XD + 4, 0, X6A_REC - X6A_XD - 4);
  }
}

static void pack_x6_avx2(int64_t cols, const void *xq, void *xp) {
  pack_x_off(cols, xq, xp, 16, 16);
}

static void pack_x3_avx2(int64_t cols, const void *xq, void *xp) {
  pack_x_off(cols, xq, xp, 2, 16);
}

/* The int8 scales of sub-block column k for the half's 8 lanes, in both
 * 16-bit halves of each lane. */
BODY __m256i scale_pairs(const uint8_t *sc, int k, const int H) {
  const __m256i s = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(sc + 16 * k + 8 * H)));
  return _mm256_blend_epi16(s, _mm256_slli_epi32(s, 16), 0xAA);
}

/* The fp16 d of rows 2H, 2H + 1 (of the 4 at d4) for the half's 8 lanes. */
BODY __m256 half_d(const uint8_t *d4, const int H) {
  const __m256 dm = _mm256_cvtph_ps(_mm_loadl_epi64((const __m128i *)d4));
  const __m256i idx_d =
      _mm256_setr_epi32(2 * H, 2 * H, 2 * H, 2 * H, 2 * H + 1, 2 * H + 1, 2 * H + 1, 2 * H + 1);
  return _mm256_permutevar8x32_ps(dm, idx_d);
}

/* v[k0] x bs[k0] + v[k0 + 1] x bs[k0 + 1] (pmaddwd, 32-bit lanes) against a
 * token's X6A record x. */
BODY __m256i bs_pair(const __m256i *v, const uint8_t *x, int k0) {
  return _mm256_add_epi32(_mm256_madd_epi16(v[k0], load256(x + X6A_BS + 32 * k0)),
                          _mm256_madd_epi16(v[k0 + 1], load256(x + X6A_BS + 32 * k0 + 32)));
}

/* acc[8 (2 t + H)] = fma((float)s, dr * dx, acc), dx from the X6A record x. */
BODY void acc_step(float *acc, int t, const int H, __m256i s, __m256 dr, const uint8_t *x) {
  float dx;
  memcpy(&dx, x + X6A_XD, 4);
  float *a = acc + 8 * (2 * t + H);
  _mm256_store_ps(a, _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dr, _mm256_set1_ps(dx)),
                                     _mm256_load_ps(a)));
}

/* Super-block w, half H, T tokens: S into acc[8 (2 t + H)] (x4.h). */
BODY void half_step6(const uint8_t *w, const uint8_t *const *xp, int64_t b, float *acc, const int T,
                     const int H) {
  const __m256i six = _mm256_set1_epi8(0x3F);
  __m256i sc[4], S[PA_X4_TOKENS];
#pragma GCC unroll 4
  for (int k = 0; k < 4; k++) sc[k] = scale_pairs(w + PA_X4_SC6, k, H);
  const uint8_t *xb[PA_X4_TOKENS];
#pragma GCC unroll 4
  for (int t = 0; t < T; t++) S[t] = _mm256_setzero_si256();
  token_records(xp, b, X6A_REC, xb, T);
  /* group j (x4.h): the values of vectors (2 j, 0), (2 j, 1), (2 j + 1, 0)
   * in the low 6 bits of its three, those of (2 j + 1, 1) two bits in the
   * top of each (16-bit shifts bring the next byte's bits in above them) */
#pragma GCC unroll 4
  for (int j = 0; j < 4; j++) {
    const uint8_t *g = w + 192 * j + 32 * H;
    const __m256i a0 = load256(g), a1 = load256(g + 64), a2 = load256(g + 128);
    const __m256i l0 = _mm256_and_si256(a0, six), u0 = _mm256_and_si256(a1, six),
                  l1 = _mm256_and_si256(a2, six);
    const __m256i u1 = _mm256_or_si256(
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a0, 6), _mm256_set1_epi8(0x03)),
                        _mm256_and_si256(_mm256_srli_epi16(a1, 4), _mm256_set1_epi8(0x0C))),
        _mm256_and_si256(_mm256_srli_epi16(a2, 2), _mm256_set1_epi8(0x30)));
    const int k = j / 2;
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) {
      const uint8_t *x = xb[t] + 128 * j;
      const __m256i pl = _mm256_add_epi16(_mm256_maddubs_epi16(l0, load256(x)),
                                          _mm256_maddubs_epi16(l1, load256(x + 64)));
      S[t] = _mm256_add_epi32(S[t], _mm256_madd_epi16(pl, sc[k]));
      KEEP(S[t]);
      const __m256i pu = _mm256_add_epi16(_mm256_maddubs_epi16(u0, load256(x + 32)),
                                          _mm256_maddubs_epi16(u1, load256(x + 96)));
      S[t] = _mm256_add_epi32(S[t], _mm256_madd_epi16(pu, sc[2 + k]));
      KEEP(S[t]);
    }
  }
  const __m256 dr = half_d(w + PA_X4_D6, H);
#pragma GCC unroll 4
  for (int t = 0; t < T; t++) {
    const uint8_t *x = xp[t] + (size_t)b * X6A_REC;
    const __m256i c = _mm256_add_epi32(bs_pair(sc, x, 0), bs_pair(sc, x, 2));
    acc_step(acc, t, H, _mm256_sub_epi32(S[t], c), dr, x);
  }
}

/* Q3_K (x4.h), super-block w, half H, T tokens: the same steps as Q6_K's,
 * the values 0..7 (pairs <= 1778: the 4 vectors of a column k < 2 added in
 * 16 bits, 7112) and, for k = 2, 3, 8x in place (pairs <= 14224: 2 at a
 * time); those sums, less 8 x their offset, are shifted back down (exact).
 * Unpacking per half and triple: 6 ands, and 5 operations for each of the
 * two vectors put together from 3 pieces. */
BODY void half_step3(const uint8_t *w, const uint8_t *const *xp, int64_t b, float *acc, const int T,
                     const int H) {
  const __m256i lo3 = _mm256_set1_epi8(0x07), hi3 = _mm256_set1_epi8(0x38);
  __m256i sc[4], S[PA_X4_TOKENS], S8[PA_X4_TOKENS];
#pragma GCC unroll 4
  for (int k = 0; k < 4; k++) sc[k] = scale_pairs(w + PA_X4_SC3, k, H);
  const uint8_t *xb[PA_X4_TOKENS];
#pragma GCC unroll 4
  for (int t = 0; t < T; t++) S[t] = S8[t] = _mm256_setzero_si256();
  token_records(xp, b, X6A_REC, xb, T);
#pragma GCC unroll 2
  for (int j = 0; j < 2; j++) {
    const uint8_t *g = w + 192 * j + 32 * H;
    const __m256i x = load256(g), y = load256(g + 64), z = load256(g + 128);
    /* vectors (4j + a, 0) in l[a], (4j + a, 1) in u[a] (8x) */
    const __m256i l[4] = {
        _mm256_and_si256(x, lo3), _mm256_and_si256(y, lo3), _mm256_and_si256(z, lo3),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(y, 6), _mm256_set1_epi8(0x03)),
                        _mm256_and_si256(_mm256_srli_epi16(z, 5), _mm256_set1_epi8(0x04)))};
    const __m256i u[4] = {
        _mm256_and_si256(x, hi3), _mm256_and_si256(y, hi3), _mm256_and_si256(z, hi3),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(x, 3), _mm256_set1_epi8(0x18)),
                        _mm256_and_si256(_mm256_srli_epi16(z, 1), _mm256_set1_epi8(0x20)))};
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) {
      const uint8_t *xr = xb[t] + 256 * j; /* pattern (i, hh) at 64 i + 32 hh */
      const __m256i pl =
          _mm256_add_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(l[0], load256(xr)),
                                            _mm256_maddubs_epi16(l[1], load256(xr + 64))),
                           _mm256_add_epi16(_mm256_maddubs_epi16(l[2], load256(xr + 128)),
                                            _mm256_maddubs_epi16(l[3], load256(xr + 192))));
      S[t] = _mm256_add_epi32(S[t], _mm256_madd_epi16(pl, sc[j]));
      KEEP(S[t]);
      const __m256i p0 = _mm256_add_epi16(_mm256_maddubs_epi16(u[0], load256(xr + 32)),
                                          _mm256_maddubs_epi16(u[1], load256(xr + 96)));
      S8[t] = _mm256_add_epi32(S8[t], _mm256_madd_epi16(p0, sc[2 + j]));
      const __m256i p1 = _mm256_add_epi16(_mm256_maddubs_epi16(u[2], load256(xr + 160)),
                                          _mm256_maddubs_epi16(u[3], load256(xr + 224)));
      S8[t] = _mm256_add_epi32(S8[t], _mm256_madd_epi16(p1, sc[2 + j]));
      KEEP(S8[t]);
    }
  }
  const __m256 dr = half_d(w + PA_X4_D3, H);
#pragma GCC unroll 4
  for (int t = 0; t < T; t++) {
    const uint8_t *x = xp[t] + (size_t)b * X6A_REC;
    const __m256i s =
        _mm256_add_epi32(_mm256_sub_epi32(S[t], bs_pair(sc, x, 0)),
                         _mm256_srai_epi32(_mm256_sub_epi32(S8[t], bs_pair(sc, x, 2)), 3));
    acc_step(acc, t, H, s, dr, x);
  }
}

/* Q2_K (x4.h), super-block w, half H, T tokens. Its values sit at bits 2k
 * 4^k x, and pmaddubsw's 16-bit pairs would overflow at 64 x 3: each is
 * shifted down (and masked), then the 4 vectors of a column (pairs <= 768)
 * add in 16 bits and one pmaddwd applies the scale; the mins go through a
 * pmaddwd with (m, 0) lanes against bs in both halves (pack_x_off 1, 1). */
BODY void half_step2(const uint8_t *w, const uint8_t *const *xp, int64_t b, float *acc, const int T,
                     const int H) {
  const __m256i two = _mm256_set1_epi8(3);
  __m256i sc[4], mn[4], S[PA_X4_TOKENS];
#pragma GCC unroll 4
  for (int k = 0; k < 4; k++) {
    const __m128i scm = _mm_loadl_epi64((const __m128i *)(w + PA_X4_SCM2 + 16 * k + 8 * H));
    const __m256i s = _mm256_cvtepu8_epi32(_mm_and_si128(scm, _mm_set1_epi8(0x0F)));
    sc[k] = _mm256_blend_epi16(s, _mm256_slli_epi32(s, 16), 0xAA); /* (sc, sc) */
    mn[k] = _mm256_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(scm, 4), _mm_set1_epi8(0x0F)));
  }
  const uint8_t *xb[PA_X4_TOKENS];
#pragma GCC unroll 4
  for (int t = 0; t < T; t++) S[t] = _mm256_setzero_si256();
  token_records(xp, b, X6A_REC, xb, T);
  __m256i q[4];
#pragma GCC unroll 4
  for (int m = 0; m < 4; m++) q[m] = load256(w + 64 * m + 32 * H);
#pragma GCC unroll 4
  for (int k = 0; k < 4; k++) {
    __m256i v[4]; /* vector (i, hh) = (4 (k % 2) + m, k / 2) */
#pragma GCC unroll 4
    for (int m = 0; m < 4; m++)
      v[m] = _mm256_and_si256(k ? _mm256_srli_epi16(q[m], 2 * k) : q[m], two);
    const int i0 = 4 * (k % 2), hh = k / 2;
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) {
      const uint8_t *xr = xb[t] + 64 * i0 + 32 * hh; /* pattern (i, hh) at 64 i + 32 hh */
      const __m256i p =
          _mm256_add_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(v[0], load256(xr)),
                                            _mm256_maddubs_epi16(v[1], load256(xr + 64))),
                           _mm256_add_epi16(_mm256_maddubs_epi16(v[2], load256(xr + 128)),
                                            _mm256_maddubs_epi16(v[3], load256(xr + 192))));
      S[t] = _mm256_add_epi32(S[t], _mm256_madd_epi16(p, sc[k]));
      KEEP(S[t]);
    }
  }
  const __m256 dr = half_d(w + PA_X4_D2, H), mr = half_d(w + PA_X4_D2 + 8, H);
#pragma GCC unroll 4
  for (int t = 0; t < T; t++) {
    const uint8_t *x = xp[t] + (size_t)b * X6A_REC;
    const __m256i M = _mm256_add_epi32(bs_pair(mn, x, 0), bs_pair(mn, x, 2));
    float dx;
    memcpy(&dx, x + X6A_XD, 4);
    const __m256 vdx = _mm256_set1_ps(dx);
    float *a = acc + 8 * (2 * t + H);
    __m256 v = _mm256_fmadd_ps(_mm256_cvtepi32_ps(S[t]), _mm256_mul_ps(dr, vdx), _mm256_load_ps(a));
    v = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(M), _mm256_mul_ps(mr, vdx), v);
    _mm256_store_ps(a, v);
  }
}

static void pack_x2_avx2(int64_t cols, const void *xq, void *xp) {
  pack_x_off(cols, xq, xp, 1, 1);
}

/* The kernels' bodies: kind 0 Q4_K, 1 Q5_K, 2 Q6_K, 3 Q3_K, 4 Q2_K (compile-time). */
BODY void run_body(const int kind, int64_t cols, const uint8_t *wg, const uint8_t *const *xp,
                   float *y, int64_t ldy, const int T, const pa_prefetch *stream) {
  /* several tokens: no prefetch (measured on AVX-512 CPUs only, kernels.h) */
  const int64_t nsb = cols / QK_K;
  const size_t rec = kind == 4   ? PA_X4_REC2
                     : kind == 3 ? PA_X4_REC3
                     : kind == 2 ? PA_X4_REC6
                     : kind == 1 ? PA_X4_REC5
                                 : PA_X4_REC;
  const int pf = stream ? stream->avx2 : 0;
  /* the accumulators live in L1: the integer sums need the registers */
  float acc[2 * PA_X4_TOKENS * 8] __attribute__((aligned(32)));
#pragma GCC unroll 8
  for (int t = 0; t < 2 * T; t++) _mm256_store_ps(acc + 8 * t, _mm256_setzero_ps());
  for (int64_t b = 0; b < nsb; b++) {
    const uint8_t *w = wg + (size_t)b * rec;
    if (T == 1 && pf) /* decode streams the weights: ask for them ahead (kernels.h) */
      for (size_t c = 0; c < rec; c += 64) _mm_prefetch((const char *)w + pf + c, _MM_HINT_T1);
    if (kind == 4) {
      half_step2(w, xp, b, acc, T, 0);
      half_step2(w, xp, b, acc, T, 1);
    } else if (kind == 3) {
      half_step3(w, xp, b, acc, T, 0);
      half_step3(w, xp, b, acc, T, 1);
    } else if (kind == 2) {
      half_step6(w, xp, b, acc, T, 0);
      half_step6(w, xp, b, acc, T, 1);
    } else {
      half_step(kind, w, xp, b, acc, T, 0);
      half_step(kind, w, xp, b, acc, T, 1);
    }
  }
  /* y[r] = (acc[4r] + acc[4r + 1]) + (acc[4r + 2] + acc[4r + 3]) */
#pragma GCC unroll 4
  for (int t = 0; t < T; t++)
#pragma GCC unroll 2
    for (int H = 0; H < 2; H++) {
      const __m256 c = _mm256_load_ps(acc + 8 * (2 * t + H));
      __m256 a = _mm256_add_ps(c, _mm256_permute_ps(c, 0xB1)); /* l0 + l1, l2 + l3 */
      a = _mm256_add_ps(a, _mm256_permute_ps(a, 0x4E));        /* (l0 + l1) + (l2 + l3) */
      y[t * ldy + 2 * H] = _mm256_cvtss_f32(a);
      y[t * ldy + 2 * H + 1] = _mm_cvtss_f32(_mm256_extractf128_ps(a, 1));
    }
}

PA_ILV_RUN4(AVX2, run_q4k, 0)
PA_ILV_RUN4(AVX2, run_q5k, 1)
PA_ILV_RUN4(AVX2, run_q6k, 2)
PA_ILV_RUN4(AVX2, run_q3k, 3)
PA_ILV_RUN4(AVX2, run_q2k, 4)

const pa_ilv_kernel pa_x4_q4k_avx2 = {4, PA_X4_TOKENS, x_size_avx2, pack_x_avx2, run_q4k, NULL};
const pa_ilv_kernel pa_x4_q5k_avx2 = {4, PA_X4_TOKENS, x_size_avx2, pack_x_avx2, run_q5k, NULL};
const pa_ilv_kernel pa_x4_q6k_avx2 = {4, PA_X4_TOKENS, x_size6_avx2, pack_x6_avx2, run_q6k, NULL};
const pa_ilv_kernel pa_x4_q3k_avx2 = {4, PA_X4_TOKENS, x_size6_avx2, pack_x3_avx2, run_q3k, NULL};
const pa_ilv_kernel pa_x4_q2k_avx2 = {4, PA_X4_TOKENS, x_size6_avx2, pack_x2_avx2, run_q2k, NULL};

#endif /* __x86_64__ */
