/* avx512.c: the AVX-512 kernel tables (F/BW/VL, and the same kernels with
 * VNNI's vpdpbusd/vpdpwssd when the CPU has them), and the prepared-
 * activation variants pa_matmul takes for 32-element blocks. Built for
 * baseline x86-64 like avx2.c: functions carry target attributes and are
 * reached only through dispatch.c.
 *
 * The 32-block and Q4_K/Q5_K dots stay 256 bits wide: on Intel cores
 * 512-bit uops shut the vector ALU of port 1, and these loops are bound by
 * ALU uops, not by width. What AVX-512 adds there is cheaper bookkeeping:
 * the fp16 scales of 8 blocks come from one or two permutes and one
 * conversion, each block then reads its product of scales by a broadcast
 * load (no shuffle uop), the fifth bits of Q5 become a k-mask, and the last
 * partial group uses masked loads instead of a scalar tail. Q6_K and the
 * float dots, which need more work per byte, are 512 bits wide.
 *
 * VNNI and non-VNNI tables share one body per kernel: `vnni` is a constant
 * of each always-inlined body. vpdpbusd/vpdpwssd are emitted with inline
 * asm so that the shared bodies need no VNNI target (GCC refuses to inline
 * a VNNI intrinsic into a function without it, even in dead code).
 * With VNNI the 4-bit kernels skip the shift of high nibbles: they multiply
 * (q << 4) and take the 16 out of those lanes at the end (vpdpbusd sums
 * four products in 32 bits, so 240 * 127 cannot saturate; pmaddubsw's
 * 16-bit pair sums could, so the non-VNNI path shifts). */
#if defined(__x86_64__) /* x86 SIMD; other targets have the plain C tables */
#include "kernels/kernels.h"
#include "kernels/cpu/blocks32_avx512.h"

/* No floating-point contraction: the GEMM kernels (gemm_avx512.c) repeat
 * these kernels' arithmetic bit for bit, which needs every multiply and add
 * to be the one written, in both files. */
PA_NO_FP_CONTRACT

#include <immintrin.h>
#include <string.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))
#define BODY static inline __attribute__((always_inline)) AVX512

/* ---- helpers ---- */

BODY __m256i dpbusd(__m256i acc, __m256i u, __m256i s, const int vnni) {
  if (vnni) {
    __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "vm"(s));
    return acc;
  }
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
}

BODY float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

BODY __m256i load256(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }


BODY __m512i load512(const void *p) { return _mm512_loadu_si512(p); }

#include "kernels/cpu/avx512_q32.h" /* q4_bytes, q5_bytes, f16_pairs8, f16_singles8 */

/* ---- 32-element blocks. A group of (up to) 8 blocks: scales first, into
 * a small array each block reads by a broadcast load, then the integer
 * dots, one fma per block. ---- */

/* Kinds of 32-block kernels sharing one loop. */
enum { K_Q4_0, K_Q4_1, K_Q5_0, K_Q5_1, K_Q8_0 };

/* The integer sums of one block (8 int32 lanes): w is the weight block, x
 * the activation block's 32 quants. Unless `exact`, the offsets of Q4_0 and
 * Q5_0 (8 and 16 times sum x) are left to the caller (see block_offset).
 * The prepared (inexact) path runs only in the table without VNNI: the VNNI
 * table's prepared dots are blocks32_avx512.c's. */
BODY __m256i block_sums(const int kind, const uint8_t *w, const uint8_t *x, const int exact,
                        const int vnni) {
  const __m256i y = load256(x), zero = _mm256_setzero_si256();
  switch (kind) {
    case K_Q4_0:
    case K_Q4_1: {
      const __m256i q = q4_bytes(w + (kind == K_Q4_0 ? 2 : 4), vnni);
      if (kind == K_Q4_1 || !exact) return dpbusd(zero, q, y, vnni);
      if (!vnni) /* 16-bit pair sums: subtract before widening */
        return _mm256_madd_epi16(_mm256_sub_epi16(_mm256_maddubs_epi16(q, y),
                                                  _mm256_maddubs_epi16(_mm256_set1_epi8(8), y)),
                                 _mm256_set1_epi16(1));
      const __m256i eight =
          _mm256_setr_epi64x(0x0808080808080808, 0x0808080808080808,
                             (long long)0x8080808080808080ULL, (long long)0x8080808080808080ULL);
      return _mm256_sub_epi32(dpbusd(zero, q, y, 1), dpbusd(zero, eight, y, 1));
    }
    case K_Q5_0:
    case K_Q5_1: {
      const __m256i q = q5_bytes(w + (kind == K_Q5_0 ? 6 : 8), w + (kind == K_Q5_0 ? 2 : 4));
      if (kind == K_Q5_1 || !exact) return dpbusd(zero, q, y, vnni);
      const __m256i sixteen = _mm256_set1_epi8(16);
      if (!vnni)
        return _mm256_madd_epi16(
            _mm256_sub_epi16(_mm256_maddubs_epi16(q, y), _mm256_maddubs_epi16(sixteen, y)),
            _mm256_set1_epi16(1));
      return _mm256_sub_epi32(dpbusd(zero, q, y, 1), dpbusd(zero, sixteen, y, 1));
    }
    default: { /* Q8_0 */
      const __m256i q = load256(w + 2);
      /* |w| against x with w's sign (|w| <= 128, |x| <= 127: pairs fit 16 bits) */
      return dpbusd(zero, _mm256_abs_epi8(q), _mm256_sign_epi8(y, q), vnni);
    }
  }
}

/* What the prepared path subtracts per block, times d * d * sum x. */
BODY float block_offset(const int kind) {
  return kind == K_Q4_0 ? 8.0f : kind == K_Q5_0 ? 16.0f : 0.0f;
}

/* State of one 32-block dot. */
typedef struct {
  __m256 acc[4];
  __m512 acc_ms;  /* vec_dot of Q4_1/Q5_1: odd lanes sum m * s */
  __m256 acc_off; /* prepared: sum m * s (pairs) or d * d * sum x (Q4_0, Q5_0) */
} dot32_state;

/* One group of r blocks (r = 8 unless `full` is 0) at block i. xs is NULL
 * for vec_dot (scales from the activation blocks, offsets in the integer
 * sums) or the prepared floats of pa_vec_dot_xs_fn. */
BODY void dot32_group(dot32_state *st, const int kind, const uint8_t *wg, const int wsize,
                      const uint8_t *xg, const int xsize, const float *xd, const float *xsum,
                      const int prepared, const int full, const int r, const int vnni) {
  const int pairs = kind == K_Q4_1 || kind == K_Q5_1, offset = block_offset(kind) != 0.0f;
  const int64_t w_avail = full ? ALL_AVAILABLE : (int64_t)r * wsize;
  const int64_t x_avail = full ? ALL_AVAILABLE : (int64_t)r * xsize;
  const __mmask8 lanes = full ? 0xFF : (__mmask8)((1u << r) - 1);
  float sc[16];
  int step = 1;
  if (prepared) {
    __m256 dd;
    if (pairs) { /* (d, m) pairs -> d in the low half, m in the high */
      const __m512 dm = _mm512_permutexvar_ps(
          _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15),
          f16_pairs8(wg, wsize, w_avail));
      dd = _mm256_mul_ps(_mm512_castps512_ps256(dm), _mm256_maskz_loadu_ps(lanes, xd));
      st->acc_off = _mm256_fmadd_ps(_mm512_extractf32x8_ps(dm, 1),
                                    _mm256_maskz_loadu_ps(lanes, xsum), st->acc_off);
    } else {
      dd = _mm256_mul_ps(f16_singles8(wg, wsize, w_avail), _mm256_maskz_loadu_ps(lanes, xd));
      if (offset)
        st->acc_off = _mm256_fmadd_ps(dd, _mm256_maskz_loadu_ps(lanes, xsum), st->acc_off);
    }
    _mm256_storeu_ps(sc, dd);
  } else if (pairs) {
    const __m512 dm = _mm512_mul_ps(f16_pairs8(wg, wsize, w_avail), f16_pairs8(xg, xsize, x_avail));
    st->acc_ms = _mm512_add_ps(st->acc_ms, dm);
    _mm512_storeu_ps(sc, dm);
    step = 2;
  } else {
    _mm256_storeu_ps(
        sc, _mm256_mul_ps(f16_singles8(wg, wsize, w_avail), f16_singles8(xg, xsize, x_avail)));
  }
  /* Make the compiler read sc back from memory: a broadcast load costs no
   * ALU uop, the in-register shuffles GCC would use instead cost two. */
  __asm__("" : "+m"(sc));
  const int x_q = pairs ? 4 : 2;
  if (full) {
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) {
      const __m256i s = block_sums(kind, wg + k * wsize, xg + k * xsize + x_q, !prepared, vnni);
      st->acc[k & 3] =
          _mm256_fmadd_ps(_mm256_set1_ps(sc[step * k]), _mm256_cvtepi32_ps(s), st->acc[k & 3]);
    }
  } else {
    for (int k = 0; k < r; k++) {
      const __m256i s = block_sums(kind, wg + k * wsize, xg + k * xsize + x_q, !prepared, vnni);
      st->acc[0] = _mm256_fmadd_ps(_mm256_set1_ps(sc[step * k]), _mm256_cvtepi32_ps(s), st->acc[0]);
    }
  }
}

BODY float dot32(const int kind, int64_t nb, const uint8_t *w, const int wsize, const uint8_t *x,
                 const int xsize, const float *xs, const int prepared, const int vnni) {
  dot32_state st = {
      {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()},
      _mm512_setzero_ps(),
      _mm256_setzero_ps()};
  const float *xd = prepared ? xs : NULL, *xsum = prepared ? xs + nb : NULL;
  int64_t i = 0;
  for (; i + 8 <= nb; i += 8)
    dot32_group(&st, kind, w + i * wsize, wsize, x + i * xsize, xsize, prepared ? xd + i : NULL,
                prepared ? xsum + i : NULL, prepared, 1, 8, vnni);
  if (i < nb)
    dot32_group(&st, kind, w + i * wsize, wsize, x + i * xsize, xsize, prepared ? xd + i : NULL,
                prepared ? xsum + i : NULL, prepared, 0, (int)(nb - i), vnni);
  __m256 all =
      _mm256_add_ps(_mm256_add_ps(st.acc[0], st.acc[1]), _mm256_add_ps(st.acc[2], st.acc[3]));
  /* with VNNI the 4-bit kernels' lanes 4..7 carry their high nibbles times 16 */
  if (vnni && (kind == K_Q4_0 || kind == K_Q4_1))
    all = _mm256_mul_ps(all, _mm256_setr_ps(1, 1, 1, 1, 0.0625f, 0.0625f, 0.0625f, 0.0625f));
  float sum = hsum256(all);
  if (kind == K_Q4_1 || kind == K_Q5_1)
    sum += prepared ? hsum256(st.acc_off)
                    : _mm512_reduce_add_ps(_mm512_maskz_mov_ps(0xAAAA, st.acc_ms));
  else if (prepared && block_offset(kind) != 0.0f)
    sum -= block_offset(kind) * hsum256(st.acc_off);
  return sum;
}

/* vec_dot and the prepared (matmul) variant, without and with VNNI. The
 * VNNI table's prepared variants are blocks32_avx512.c's (whole-block
 * integer sums, the arithmetic its GEMM kernels repeat). */
static AVX512 void dot_q4_0(int64_t n, float *out, const void *w, const void *x) {
  *out = dot32(K_Q4_0, n / 32, w, sizeof(block_q4_0), x, sizeof(block_q8_0), NULL, 0, 0);
}
static AVX512 void dot_q4_0_vnni(int64_t n, float *out, const void *w, const void *x) {
  *out = dot32(K_Q4_0, n / 32, w, sizeof(block_q4_0), x, sizeof(block_q8_0), NULL, 0, 1);
}
static AVX512 void dot_q4_0_xs(int64_t n, float *out, const void *w, const void *x,
                               const float *xs) {
  *out = dot32(K_Q4_0, n / 32, w, sizeof(block_q4_0), x, sizeof(block_q8_0), xs, 1, 0);
}
static AVX512 void dot_q4_1(int64_t n, float *out, const void *w, const void *x) {
  *out = dot32(K_Q4_1, n / 32, w, sizeof(block_q4_1), x, sizeof(block_q8_1), NULL, 0, 0);
}
static AVX512 void dot_q4_1_vnni(int64_t n, float *out, const void *w, const void *x) {
  *out = dot32(K_Q4_1, n / 32, w, sizeof(block_q4_1), x, sizeof(block_q8_1), NULL, 0, 1);
}
static AVX512 void dot_q4_1_xs(int64_t n, float *out, const void *w, const void *x,
                               const float *xs) {
  *out = dot32(K_Q4_1, n / 32, w, sizeof(block_q4_1), x, sizeof(block_q8_1), xs, 1, 0);
}
static AVX512 void dot_q5_0(int64_t n, float *out, const void *w, const void *x) {
  *out = dot32(K_Q5_0, n / 32, w, sizeof(block_q5_0), x, sizeof(block_q8_0), NULL, 0, 0);
}
static AVX512 void dot_q5_0_vnni(int64_t n, float *out, const void *w, const void *x) {
  *out = dot32(K_Q5_0, n / 32, w, sizeof(block_q5_0), x, sizeof(block_q8_0), NULL, 0, 1);
}
static AVX512 void dot_q5_0_xs(int64_t n, float *out, const void *w, const void *x,
                               const float *xs) {
  *out = dot32(K_Q5_0, n / 32, w, sizeof(block_q5_0), x, sizeof(block_q8_0), xs, 1, 0);
}
static AVX512 void dot_q5_1(int64_t n, float *out, const void *w, const void *x) {
  *out = dot32(K_Q5_1, n / 32, w, sizeof(block_q5_1), x, sizeof(block_q8_1), NULL, 0, 0);
}
static AVX512 void dot_q5_1_vnni(int64_t n, float *out, const void *w, const void *x) {
  *out = dot32(K_Q5_1, n / 32, w, sizeof(block_q5_1), x, sizeof(block_q8_1), NULL, 0, 1);
}
static AVX512 void dot_q5_1_xs(int64_t n, float *out, const void *w, const void *x,
                               const float *xs) {
  *out = dot32(K_Q5_1, n / 32, w, sizeof(block_q5_1), x, sizeof(block_q8_1), xs, 1, 0);
}
static AVX512 void dot_q8_0(int64_t n, float *out, const void *w, const void *x) {
  *out = dot32(K_Q8_0, n / 32, w, sizeof(block_q8_0), x, sizeof(block_q8_0), NULL, 0, 0);
}
static AVX512 void dot_q8_0_vnni(int64_t n, float *out, const void *w, const void *x) {
  *out = dot32(K_Q8_0, n / 32, w, sizeof(block_q8_0), x, sizeof(block_q8_0), NULL, 0, 1);
}
static AVX512 void dot_q8_0_xs(int64_t n, float *out, const void *w, const void *x,
                               const float *xs) {
  *out = dot32(K_Q8_0, n / 32, w, sizeof(block_q8_0), x, sizeof(block_q8_0), xs, 1, 0);
}

void pa_kernels_fill_avx512_xs(pa_vec_dot_xs_fn *t, int vnni) {
  t[PA_TYPE_Q4_0] = vnni ? pa_b32_dot_xs_q4_0 : dot_q4_0_xs;
  t[PA_TYPE_Q4_1] = vnni ? pa_b32_dot_xs_q4_1 : dot_q4_1_xs;
  t[PA_TYPE_Q5_0] = vnni ? pa_b32_dot_xs_q5_0 : dot_q5_0_xs;
  t[PA_TYPE_Q5_1] = vnni ? pa_b32_dot_xs_q5_1 : dot_q5_1_xs;
  t[PA_TYPE_Q8_0] = vnni ? pa_b32_dot_xs_q8_0 : dot_q8_0_xs;
}

/* ---- K-quants against Q8_K, in the canonical order of gemm_avx512.c's
 * header ("K-quants"): per super-block exact int32 sums (isum: scales times
 * sub-block dots; imin: mins times bsums), then two fmas in float. Any
 * instructions giving the same integers will do; these use 512 bits. ---- */

/* Q4_K/Q5_K scales and mins of 8 sub-blocks as bytes (see quant.h). */
/* The 6-bit scales and mins of a Q4_K/Q5_K super-block, 8 bytes each. */
static inline void k4_scales(const uint8_t s[12], uint64_t *sc, uint64_t *m) {
  uint32_t u[3];
  memcpy(u, s, 12);
  const uint64_t sc0 = u[0] & 0x3F3F3F3F, m0 = u[1] & 0x3F3F3F3F;
  const uint64_t sc1 = (u[2] & 0x0F0F0F0F) | ((u[0] >> 6) & 0x03030303) << 4;
  const uint64_t m1 = ((u[2] >> 4) & 0x0F0F0F0F) | ((u[1] >> 6) & 0x03030303) << 4;
  *sc = sc0 | sc1 << 32;
  *m = m0 | m1 << 32;
}

BODY __m512i dpbusd512_0(__m512i u, __m512i s, const int vnni) {
  if (vnni) {
    __m512i acc;
    __asm__("vpxord %0, %0, %0\n\tvpdpbusd %2, %1, %0" : "=&v"(acc) : "v"(u), "v"(s));
    return acc;
  }
  return _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1));
}

/* acc += pairs of int16 products (pmaddwd), fused with VNNI. */
BODY __m512i dpwssd512(__m512i acc, __m512i a, __m512i b, const int vnni) {
  if (vnni) {
    __asm__("vpdpwssd %2, %1, %0" : "+v"(acc) : "v"(a), "vm"(b));
    return acc;
  }
  return _mm512_add_epi32(acc, _mm512_madd_epi16(a, b));
}

/* pshufb indices that widen the 8 scale bytes (in every qword) to the
 * scale words of a pack. Chunk c of 64 elements gives dword sums of
 * sub-blocks 2c (lanes 0..7) and 2c + 1 (8..15). VNNI: the pack of chunks
 * 2h and 2h + 1 holds in 128-bit lane k words of sub-blocks 4h + (k / 2),
 * then 4h + 2 + (k / 2). Without: pmaddubsw's words of chunk c, sub-block
 * 2c then 2c + 1 by 256-bit halves. 128: a zero high byte. */
static const uint8_t k4_shuf_vnni[2][64] = {
    {0, 128, 0, 128, 0, 128, 0, 128, 2, 128, 2, 128, 2, 128, 2, 128, 0, 128, 0, 128, 0, 128, 0, 128, 2, 128, 2, 128, 2, 128, 2, 128, 1, 128, 1, 128, 1, 128, 1, 128, 3, 128, 3, 128, 3, 128, 3, 128, 1, 128, 1, 128, 1, 128, 1, 128, 3, 128, 3, 128, 3, 128, 3, 128},
    {4, 128, 4, 128, 4, 128, 4, 128, 6, 128, 6, 128, 6, 128, 6, 128, 4, 128, 4, 128, 4, 128, 4, 128, 6, 128, 6, 128, 6, 128, 6, 128, 5, 128, 5, 128, 5, 128, 5, 128, 7, 128, 7, 128, 7, 128, 7, 128, 5, 128, 5, 128, 5, 128, 5, 128, 7, 128, 7, 128, 7, 128, 7, 128}};
static const uint8_t k4_shuf[4][64] = {
    {0, 128, 0, 128, 0, 128, 0, 128, 0, 128, 0, 128, 0, 128, 0, 128, 0, 128, 0, 128, 0, 128, 0, 128, 0, 128, 0, 128, 0, 128, 0, 128, 1, 128, 1, 128, 1, 128, 1, 128, 1, 128, 1, 128, 1, 128, 1, 128, 1, 128, 1, 128, 1, 128, 1, 128, 1, 128, 1, 128, 1, 128, 1, 128},
    {2, 128, 2, 128, 2, 128, 2, 128, 2, 128, 2, 128, 2, 128, 2, 128, 2, 128, 2, 128, 2, 128, 2, 128, 2, 128, 2, 128, 2, 128, 2, 128, 3, 128, 3, 128, 3, 128, 3, 128, 3, 128, 3, 128, 3, 128, 3, 128, 3, 128, 3, 128, 3, 128, 3, 128, 3, 128, 3, 128, 3, 128, 3, 128},
    {4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 5, 128, 5, 128, 5, 128, 5, 128, 5, 128, 5, 128, 5, 128, 5, 128, 5, 128, 5, 128, 5, 128, 5, 128, 5, 128, 5, 128, 5, 128, 5, 128},
    {6, 128, 6, 128, 6, 128, 6, 128, 6, 128, 6, 128, 6, 128, 6, 128, 6, 128, 6, 128, 6, 128, 6, 128, 6, 128, 6, 128, 6, 128, 6, 128, 7, 128, 7, 128, 7, 128, 7, 128, 7, 128, 7, 128, 7, 128, 7, 128, 7, 128, 7, 128, 7, 128, 7, 128, 7, 128, 7, 128, 7, 128, 7, 128}};
/* the 8 mins, each doubled into a pair of words */
static const uint8_t k4_shuf_min[32] = {0, 128, 0, 128, 1, 128, 1, 128, 2, 128, 2, 128, 3, 128, 3, 128, 4, 128, 4, 128, 5, 128, 5, 128, 6, 128, 6, 128, 7, 128, 7, 128};

/* One Q4_K/Q5_K super-block's integers: *isum as 16 lanes, *imin as 8. */
BODY void k4_ints(const uint8_t *blk, const int has_qh, const block_q8_K *b, const int vnni,
                  __m512i *isum, __m256i *imin) {
  const uint8_t *scales = blk + 4, *qh = blk + 16, *qs = blk + (has_qh ? 48 : 16);
  uint64_t sc, m;
  k4_scales(scales, &sc, &m);
  const __m512i scb = _mm512_set1_epi64((long long)sc);
  const __m512i qhv = has_qh ? _mm512_broadcast_i64x4(load256(qh)) : _mm512_setzero_si512();
  const __m512i mask4 = _mm512_set1_epi8(0x0F);
  /* the 32 bytes of a chunk in both halves: low nibbles, then high */
  const __m512i shift = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
  __m512i d[4], acc = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int c = 0; c < 4; c++) {
    __m512i q = _mm512_and_si512(
        _mm512_srlv_epi16(_mm512_broadcast_i64x4(load256(qs + 32 * c)), shift), mask4);
    if (has_qh) /* fifth bit of sub-block j: bit j of qh[l] */
      q = _mm512_mask_add_epi8(
          q,
          _mm512_test_epi8_mask(qhv, _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << (2 * c))),
                                                        _mm256_set1_epi8((char)(2 << (2 * c))), 1)),
          q, _mm512_set1_epi8(16));
    const __m512i x = load512(b->qs + 64 * c);
    if (vnni) { /* dword sums (<= 4 * 31 * 127) fit the pack's 16 bits */
      d[c] = dpbusd512_0(q, x, 1);
      if (c & 1) {
        const __m512i s = _mm512_shuffle_epi8(scb, load512(k4_shuf_vnni[c / 2]));
        acc = dpwssd512(acc, _mm512_packs_epi32(d[c - 1], d[c]), s, 1);
      }
    } else {
      const __m512i s = _mm512_shuffle_epi8(scb, load512(k4_shuf[c]));
      acc = _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(q, x), s));
    }
  }
  *isum = acc;
  /* the mins, each doubled into a pair of words, against the 16 bsums */
  *imin = _mm256_madd_epi16(load256(b->bsums),
                            _mm256_shuffle_epi8(_mm256_set1_epi64x((long long)m), load256(k4_shuf_min)));
}

/* Totals of two super-blocks' lanes: (isum a, imin a, isum b, imin b). */
BODY __m128i k_totals2(__m512i ia, __m256i ma, __m512i ib, __m256i mb) {
  const __m512i x = _mm512_add_epi32(_mm512_shuffle_i64x2(ia, ib, 0x44), _mm512_shuffle_i64x2(ia, ib, 0xEE));
  const __m512i y = _mm512_inserti64x4(_mm512_castsi256_si512(ma), mb, 1);
  __m512i z = _mm512_add_epi32(_mm512_shuffle_i64x2(x, y, 0x88), _mm512_shuffle_i64x2(x, y, 0xDD));
  z = _mm512_add_epi32(z, _mm512_shuffle_epi32(z, 0x4E));
  z = _mm512_add_epi32(z, _mm512_shuffle_epi32(z, 0xB1)); /* ia, ib, ma, mb in lanes 0, 4, 8, 12 */
  return _mm512_castsi512_si128(
      _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 8, 4, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), z));
}

/* The float steps of two super-blocks (or one, b = NULL): lanes 0, 1 of
 * acc are acc and accm. dm: (d, dmin) fp16 pairs; Q6_K passes imin = 0. */
BODY __m128 k_float2(__m128 acc, __m128i tot, const void *dma, float dxa, const void *dmb,
                     float dxb) {
  int32_t ha, hb = 0;
  memcpy(&ha, dma, 4);
  if (dmb) memcpy(&hb, dmb, 4);
  const __m128 dd = _mm_mul_ps(_mm_cvtph_ps(_mm_unpacklo_epi32(_mm_cvtsi32_si128(ha), _mm_cvtsi32_si128(hb))),
                               _mm_setr_ps(dxa, dxa, dxb, dxb));
  const __m128 v = _mm_cvtepi32_ps(tot);
  acc = _mm_fmadd_ps(v, dd, acc);
  if (dmb) acc = _mm_fmadd_ps(_mm_movehl_ps(v, v), _mm_movehl_ps(dd, dd), acc);
  return acc;
}

BODY float dot_k4(int64_t nsb, const uint8_t *w, const int wsize, const int has_qh,
                  const block_q8_K *b, const int vnni) {
  __m128 acc = _mm_setzero_ps(); /* lane 0: acc, lane 1: accm */
  int64_t i = 0;
  for (; i + 2 <= nsb; i += 2) {
    __m512i ia, ib;
    __m256i ma, mb;
    k4_ints(w + i * wsize, has_qh, &b[i], vnni, &ia, &ma);
    k4_ints(w + (i + 1) * wsize, has_qh, &b[i + 1], vnni, &ib, &mb);
    acc = k_float2(acc, k_totals2(ia, ma, ib, mb), w + i * wsize, b[i].d, w + (i + 1) * wsize,
                   b[i + 1].d);
  }
  if (i < nsb) {
    __m512i ia;
    __m256i ma;
    k4_ints(w + i * wsize, has_qh, &b[i], vnni, &ia, &ma);
    acc = k_float2(acc, k_totals2(ia, ma, _mm512_setzero_si512(), _mm256_setzero_si256()),
                   w + i * wsize, b[i].d, NULL, 0.0f);
  }
  return _mm_cvtss_f32(acc) - _mm_cvtss_f32(_mm_movehdup_ps(acc));
}

static AVX512 void dot_q4_K(int64_t n, float *out, const void *w, const void *x) {
  *out = dot_k4(n / QK_K, w, sizeof(block_q4_K), 0, x, 0);
}
static AVX512 void dot_q4_K_vnni(int64_t n, float *out, const void *w, const void *x) {
  *out = dot_k4(n / QK_K, w, sizeof(block_q4_K), 0, x, 1);
}
static AVX512 void dot_q5_K(int64_t n, float *out, const void *w, const void *x) {
  *out = dot_k4(n / QK_K, w, sizeof(block_q5_K), 1, x, 0);
}
static AVX512 void dot_q5_K_vnni(int64_t n, float *out, const void *w, const void *x) {
  *out = dot_k4(n / QK_K, w, sizeof(block_q5_K), 1, x, 1);
}

/* Q6_K in 512 bits: the 64 bytes of ql of a half hold its 128 values' low
 * nibbles (elements 0..63 low, 64..127 high), and one copy of qh in each
 * 256-bit half gives both halves' top bits with one variable shift. */
/* One Q6_K super-block's isum as 16 lanes. */
BODY __m512i q6_ints(const block_q6_K *a, const block_q8_K *b, const int vnni) {
  const __m512i mask4 = _mm512_set1_epi8(0x0F), mask2 = _mm512_set1_epi8(0x30);
  /* word shifts putting qh bits (2k, 2k+1) at bits 4, 5 for k = 0, 1 (left)
   * and k = 2, 3 (right); qh is duplicated in the two 256-bit halves */
  const __m512i shl = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
  const __m512i shr = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
  /* scales as dwords of two equal words; 128-bit lane j of the products
   * of a quarter covers scale group 4 * quarter + j */
  const __m128i sc8 = _mm_loadu_si128((const __m128i *)a->scales);
  const __m512i s16 = _mm512_cvtepi8_epi32(sc8);
  const __m512i scw = _mm512_or_si512(_mm512_and_si512(s16, _mm512_set1_epi32(0xFFFF)),
                                      _mm512_slli_epi32(s16, 16));
  __m512i sum0 = _mm512_setzero_si512(), sum1 = _mm512_setzero_si512();
#pragma GCC unroll 2
  for (int h = 0; h < 2; h++) {
    const __m512i l = _mm512_loadu_si512(a->ql + 64 * h);
    const __m512i qh = _mm512_broadcast_i64x4(load256(a->qh + 32 * h));
    const __m512i q_lo = _mm512_or_si512(_mm512_and_si512(l, mask4),
                                         _mm512_and_si512(_mm512_sllv_epi16(qh, shl), mask2));
    const __m512i q_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), mask4),
                                         _mm512_and_si512(_mm512_srlv_epi16(qh, shr), mask2));
    const __m512i p_lo = _mm512_maddubs_epi16(q_lo, _mm512_loadu_si512(b->qs + 128 * h));
    const __m512i p_hi = _mm512_maddubs_epi16(q_hi, _mm512_loadu_si512(b->qs + 128 * h + 64));
    const __m512i idx_lo = _mm512_setr_epi32(
        8 * h, 8 * h, 8 * h, 8 * h, 8 * h + 1, 8 * h + 1, 8 * h + 1, 8 * h + 1, 8 * h + 2,
        8 * h + 2, 8 * h + 2, 8 * h + 2, 8 * h + 3, 8 * h + 3, 8 * h + 3, 8 * h + 3);
    const __m512i idx_hi = _mm512_add_epi32(idx_lo, _mm512_set1_epi32(4));
    sum0 = dpwssd512(sum0, p_lo, _mm512_permutexvar_epi32(idx_lo, scw), vnni);
    sum1 = dpwssd512(sum1, p_hi, _mm512_permutexvar_epi32(idx_hi, scw), vnni);
  }
  /* values are q - 32 with q in 0..63: 32 sum_g sc_g bsums_g comes off */
  const __m256i corr = _mm256_slli_epi32(
      _mm256_madd_epi16(load256(b->bsums), _mm256_cvtepi8_epi16(sc8)), 5);
  return _mm512_sub_epi32(_mm512_add_epi32(sum0, sum1), _mm512_zextsi256_si512(corr));
}

BODY float dot_q6_K_body(int64_t nsb, const block_q6_K *a, const block_q8_K *b, const int vnni) {
  __m128 acc = _mm_setzero_ps(); /* lane 0 (lane 1 takes 0 times 0) */
  const __m256i zero = _mm256_setzero_si256();
  const int pf = pa_prefetch_q6k_file;
  int64_t i = 0;
  for (; i + 2 <= nsb; i += 2) {
    if (pf)
      for (int c = 0; c < 2 * (int)sizeof(block_q6_K); c += 64)
        _mm_prefetch((const char *)&a[i] + pf + c, _MM_HINT_T1);
    const __m128i tot = k_totals2(q6_ints(&a[i], &b[i], vnni), zero, q6_ints(&a[i + 1], &b[i + 1], vnni), zero);
    const uint32_t da = a[i].d, db = a[i + 1].d; /* (d, 0) as fp16 pairs */
    acc = k_float2(acc, tot, &da, b[i].d, &db, b[i + 1].d);
  }
  if (i < nsb) {
    const uint32_t da = a[i].d;
    acc = k_float2(acc, k_totals2(q6_ints(&a[i], &b[i], vnni), zero, _mm512_setzero_si512(), zero),
                   &da, b[i].d, NULL, 0.0f);
  }
  return _mm_cvtss_f32(acc);
}

static AVX512 void dot_q6_K(int64_t n, float *out, const void *w, const void *x) {
  *out = dot_q6_K_body(n / QK_K, w, x, 0);
}
static AVX512 void dot_q6_K_vnni(int64_t n, float *out, const void *w, const void *x) {
  *out = dot_q6_K_body(n / QK_K, w, x, 1);
}

/* ---- float weights, 512 bits wide (these are bound by loads, not ALU
 * uops); the last partial vector is a masked load, which cannot fault. ---- */

BODY __m512 f32x16(const float *p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
BODY __m512 f16x16(const uint8_t *p, __mmask16 m) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}
BODY __m512 bf16x16(const uint8_t *p, __mmask16 m) {
  return _mm512_castsi512_ps(
      _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
}

enum { F_F32, F_F16, F_BF16 };

BODY __m512 load_w16(const int kind, const uint8_t *w, int64_t i, __mmask16 m) {
  return kind == F_F32   ? f32x16((const float *)w + i, m)
         : kind == F_F16 ? f16x16(w + 2 * i, m)
                         : bf16x16(w + 2 * i, m);
}

BODY float dot_float(const int kind, int64_t n, const uint8_t *w, const float *x) {
  __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    s0 = _mm512_fmadd_ps(load_w16(kind, w, i, 0xFFFF), _mm512_loadu_ps(x + i), s0);
    s1 = _mm512_fmadd_ps(load_w16(kind, w, i + 16, 0xFFFF), _mm512_loadu_ps(x + i + 16), s1);
    s2 = _mm512_fmadd_ps(load_w16(kind, w, i + 32, 0xFFFF), _mm512_loadu_ps(x + i + 32), s2);
    s3 = _mm512_fmadd_ps(load_w16(kind, w, i + 48, 0xFFFF), _mm512_loadu_ps(x + i + 48), s3);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
    s0 = _mm512_fmadd_ps(load_w16(kind, w, i, m), f32x16(x + i, m), s0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
}

static AVX512 void dot_f32(int64_t n, float *out, const void *w, const void *x) {
  *out = dot_float(F_F32, n, w, x);
}
static AVX512 void dot_f16(int64_t n, float *out, const void *w, const void *x) {
  *out = dot_float(F_F16, n, w, x);
}
static AVX512 void dot_bf16(int64_t n, float *out, const void *w, const void *x) {
  *out = dot_float(F_BF16, n, w, x);
}

void pa_kernels_fill_avx512(pa_cpu_kernels *k, int vnni) {
  k->vec_dot[PA_TYPE_F32] = dot_f32;
  k->vec_dot[PA_TYPE_F16] = dot_f16;
  k->vec_dot[PA_TYPE_BF16] = dot_bf16;
  k->vec_dot[PA_TYPE_Q4_0] = vnni ? dot_q4_0_vnni : dot_q4_0;
  k->vec_dot[PA_TYPE_Q4_1] = vnni ? dot_q4_1_vnni : dot_q4_1;
  k->vec_dot[PA_TYPE_Q5_0] = vnni ? dot_q5_0_vnni : dot_q5_0;
  k->vec_dot[PA_TYPE_Q5_1] = vnni ? dot_q5_1_vnni : dot_q5_1;
  k->vec_dot[PA_TYPE_Q8_0] = vnni ? dot_q8_0_vnni : dot_q8_0;
  k->vec_dot[PA_TYPE_Q4_K] = vnni ? dot_q4_K_vnni : dot_q4_K;
  k->vec_dot[PA_TYPE_Q5_K] = vnni ? dot_q5_K_vnni : dot_q5_K;
  k->vec_dot[PA_TYPE_Q6_K] = vnni ? dot_q6_K_vnni : dot_q6_K;
}

#endif /* __x86_64__ */
