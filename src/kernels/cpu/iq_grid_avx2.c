/* iq_grid_avx2.c: AVX2 dot products of the grid I-quants IQ2_XXS, IQ2_XS,
 * IQ2_S, IQ3_XXS, IQ3_S, IQ1_S and IQ1_M against Q8_K. Their reference
 * twins are in ref.c and compute the same integers: per super-block one
 * exact int32 isum, the sum over scale groups of (2s + 1) times the group's
 * sum of value times activation, then sum = fma(isum, dw * d_x, sum) with
 * dw = d times the type's power of two (the K-quants' float step, which
 * the GEMM kernels of gemm_avx2.c and gemm_avx512.c repeat bit for bit).
 *
 * 32 values at a time: their grid rows (8 or 4 bytes each, looked up by
 * scalar index) assembled into one vector; the signs as +-1 bytes applied
 * to the activations (psignb), so pmaddubsw takes the unsigned grid bytes
 * (<= 62) against signed activations (|y| <= 127): pairs below 2 * 62 *
 * 127 < 32768, nothing saturates. IQ1 values 8g +- 1 (g in {-1, 0, 1}) are
 * signed, so |v| meets y carrying v's sign. pmaddwd by the int16 scales
 * gives int32 lanes. Built for baseline x86-64; reached only through the
 * AVX2 table (which the AVX-512 tables start from) and the GEMM unpackers. */
#if defined(__x86_64__)
#include "kernels/kernels.h"

PA_NO_FP_CONTRACT

#include <immintrin.h>
#include <string.h>

#include "kernels/cpu/avx2_util.h"
#include "quant/iq_grids.h"

#define AVX2 __attribute__((target("avx2,fma,f16c")))

/* pa_ksigns_iq2xs[k] as 8 +-1 bytes (-1 where the bit is set), filled
 * once by pa_kernels_fill_iq_grid_avx2 (under the tables' pthread_once). */
static uint64_t ksigns_pm1[128];

static inline AVX2 __m256i ksigns_x4(int k0, int k1, int k2, int k3) {
  return _mm256_set_epi64x((long long)ksigns_pm1[k3], (long long)ksigns_pm1[k2],
                           (long long)ksigns_pm1[k1], (long long)ksigns_pm1[k0]);
}

/* Bit i of byte k of sw (k = 0..3, value 8k + i of 32) as a +-1 byte:
 * -1 where the bit is set. */
static inline AVX2 __m256i signs32(uint32_t sw) {
  const __m256i spread = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                           0x0101010101010101, 0x0000000000000000);
  const __m256i bits = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
  const __m256i v = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)sw), spread), bits);
  return _mm256_or_si256(_mm256_cmpeq_epi8(v, bits), _mm256_set1_epi8(1));
}

/* The signs of 4 groups of 8 whose 7-bit codes (ksigns) are at bits 7k of aux. */
static inline AVX2 __m256i ksigns_aux(uint32_t aux) {
  return ksigns_x4(aux & 127, (aux >> 7) & 127, (aux >> 14) & 127, (aux >> 21) & 127);
}

/* 16 int16 pair sums of unsigned grid bytes g times y signed by sgn (+-1). */
static inline AVX2 __m256i pairs(__m256i g, __m256i sgn, const int8_t *y) {
  const __m256i q = _mm256_loadu_si256((const __m256i *)y);
  return _mm256_maddubs_epi16(g, _mm256_sign_epi8(q, sgn));
}

/* 8 int32 sums of the pairs, the first 16 values' times s0, the rest s1. */
static inline AVX2 __m256i scaled(__m256i p, int s0, int s1) {
  return _mm256_madd_epi16(p,
                           _mm256_set_m128i(_mm_set1_epi16((short)s1), _mm_set1_epi16((short)s0)));
}

static inline AVX2 __m256i grid8x4(const uint64_t *grid, int r0, int r1, int r2, int r3) {
  return _mm256_set_epi64x((long long)grid[r3], (long long)grid[r2], (long long)grid[r1],
                           (long long)grid[r0]);
}

/* The rows qs[h], h = 0..7, of a 4-byte grid. */
static inline AVX2 __m256i grid4x8(const uint32_t *grid, const uint8_t *qs) {
#define R(h) (int)grid[qs[h]]
  return _mm256_set_epi32(R(7), R(6), R(5), R(4), R(3), R(2), R(1), R(0));
#undef R
}

/* ---- the decoders: values 32 ib .. 32 ib + 31 of super-block a as
 * magnitudes (unsigned bytes, <= 62) and a vector whose byte signs are the
 * values' (nonzero), with the scale factors (2s + 1) of their first and
 * second 16; dw_*: d times the type's power of two (exact) ---- */

typedef struct {
  __m256i mag, sgn;
  int s0, s1;
} dec32;

static inline AVX2 float dw_iq2_xxs(const block_iq2_xxs *a) {
  return f16_at(&a->d) * 0.125f;
}
static inline AVX2 dec32 dec_iq2_xxs(const block_iq2_xxs *a, const uint16_t *rows, int ib) {
  (void)rows;
  const uint32_t idx = pa_load_u32(a->qs + 4 * ib), aux = pa_load_u32(a->qs + 4 * ib + 2);
  const int s = 2 * (int)(aux >> 28) + 1;
  return (dec32){
      grid8x4(pa_iq2xxs_grid, idx & 0xFF, (idx >> 8) & 0xFF, (idx >> 16) & 0xFF, idx >> 24),
      ksigns_aux(aux), s, s};
}

static inline AVX2 float dw_iq2_xs(const block_iq2_xs *a) {
  return f16_at(&a->d) * 0.125f;
}
static inline AVX2 dec32 dec_iq2_xs(const block_iq2_xs *a, const uint16_t *rows, int ib) {
  (void)rows;
  uint16_t q[4];
  memcpy(q, a->qs + 4 * ib, 8);
  const int sc = a->scales[ib];
  return (dec32){grid8x4(pa_iq2xs_grid, q[0] & 511, q[1] & 511, q[2] & 511, q[3] & 511),
                 ksigns_x4(q[0] >> 9, q[1] >> 9, q[2] >> 9, q[3] >> 9), 2 * (sc & 0xF) + 1,
                 2 * (sc >> 4) + 1};
}

static inline AVX2 float dw_iq2_s(const block_iq2_s *a) {
  return f16_at(&a->d) * 0.125f;
}
static inline AVX2 dec32 dec_iq2_s(const block_iq2_s *a, const uint16_t *rows, int ib) {
  (void)rows;
  const uint8_t *qs = a->qs + 4 * ib;
  const int qh = a->qh[ib], sc = a->scales[ib];
  return (dec32){grid8x4(pa_iq2s_grid, qs[0] | (qh & 3) << 8, qs[1] | (qh & 12) << 6,
                         qs[2] | (qh & 48) << 4, qs[3] | (qh & 192) << 2),
                 signs32(pa_load_u32(a->signs + 4 * ib)), 2 * (sc & 0xF) + 1, 2 * (sc >> 4) + 1};
}

static inline AVX2 float dw_iq3_xxs(const block_iq3_xxs *a) {
  return f16_at(&a->d) * 0.25f;
}
static inline AVX2 dec32 dec_iq3_xxs(const block_iq3_xxs *a, const uint16_t *rows, int ib) {
  (void)rows;
  const uint32_t aux = pa_load_u32(a->qs + QK_K / 4 + 4 * ib);
  const int s = 2 * (int)(aux >> 28) + 1;
  return (dec32){grid4x8(pa_iq3xxs_grid, a->qs + 8 * ib), ksigns_aux(aux), s, s};
}

static inline AVX2 float dw_iq3_s(const block_iq3_s *a) {
  return f16_at(&a->d);
}
/* IQ3_S's 64 grid rows of super-block a, qs[k] | (bit k % 8 of qh[k / 8])
 * << 8, computed 16 at a time for its decoder to look up (a vector op per
 * 16 rows instead of scalar shifts and masks per row): the two qh bytes
 * broadcast, each lane testing its own bit of the little-endian pair. */
static inline AVX2 void rows_iq3_s(const block_iq3_s *a, uint16_t *rows) {
  const __m256i bit = _mm256_set_epi16((short)0x8000, 0x4000, 0x2000, 0x1000, 0x800, 0x400, 0x200,
                                       0x100, 0x80, 0x40, 0x20, 0x10, 8, 4, 2, 1);
  for (int m = 0; m < 4; m++) {
    const __m256i q = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(a->qs + 16 * m)));
    const __m256i h = _mm256_and_si256(_mm256_set1_epi16((short)pa_load_u16(a->qh + 2 * m)), bit);
    const __m256i hi = _mm256_and_si256(_mm256_cmpeq_epi16(h, bit), _mm256_set1_epi16(256));
    _mm256_storeu_si256((__m256i *)(rows + 16 * m), _mm256_or_si256(q, hi));
  }
}
/* Two rows at a time in a 64-bit scalar: fewer vector inserts, which
 * compete for the shuffle ports (25% faster here on Zen 4; IQ3_XXS's byte
 * rows are faster one at a time). */
static inline AVX2 dec32 dec_iq3_s(const block_iq3_s *a, const uint16_t *rows, int ib) {
  const uint16_t *r = rows + 8 * ib;
  const uint32_t *g = pa_iq3s_grid;
  const int s = 2 * ((a->scales[ib / 2] >> (4 * (ib % 2))) & 0xF) + 1;
#define PAIR(k) (long long)((uint64_t)g[r[k + 1]] << 32 | g[r[k]])
  return (dec32){_mm256_set_epi64x(PAIR(6), PAIR(4), PAIR(2), PAIR(0)),
                 signs32(pa_load_u32(a->signs + 4 * ib)), s, s};
#undef PAIR
}

/* IQ1: values 8 g + delta for the signed grid bytes g (-1, 0, 1) and the
 * deltas (+-1 bytes): |v| <= 9, v itself carries the sign. */
static inline AVX2 dec32 iq1_dec(__m256i g, __m256i delta, int s0, int s1) {
  const __m256i v = _mm256_add_epi8(_mm256_sign_epi8(_mm256_set1_epi8(8), g), delta);
  return (dec32){_mm256_abs_epi8(v), v, s0, s1};
}

static inline AVX2 float dw_iq1_s(const block_iq1_s *a) {
  return f16_at(&a->d) * 0.125f;
}
static inline AVX2 dec32 dec_iq1_s(const block_iq1_s *a, const uint16_t *rows, int ib) {
  (void)rows;
  const uint8_t *qs = a->qs + 4 * ib;
  const int qh = pa_load_u16(&a->qh[ib]);
  const __m256i g = grid8x4(pa_iq1s_grid, qs[0] | (qh & 7) << 8, qs[1] | (qh & 0x38) << 5,
                            qs[2] | (qh & 0x1C0) << 2, qs[3] | (qh & 0xE00) >> 1);
  const int s = 2 * ((qh >> 12) & 7) + 1;
  return iq1_dec(g, _mm256_set1_epi8((char)(1 - ((qh >> 14) & 2))), s, s);
}

/* IQ1_M's deltas of 4 groups of 8: bits 3, 7, 11, 15 of h (two qh bytes)
 * as +-1 bytes, -1 where set. */
static inline AVX2 __m256i iq1m_delta(int h) {
  const __m256i spread = _mm256_set_epi64x(0x0101010101010101, 0x0101010101010101, 0, 0);
  const __m256i bit = _mm256_set_epi64x((long long)0x8080808080808080ULL, 0x0808080808080808,
                                        (long long)0x8080808080808080ULL, 0x0808080808080808);
  const __m256i v = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi16((short)h), spread), bit);
  return _mm256_or_si256(_mm256_cmpeq_epi8(v, bit), _mm256_set1_epi8(1));
}

/* IQ1_M has no d field: its fp16 bits are the top nibbles of the four scale words. */
static inline AVX2 float dw_iq1_m(const block_iq1_m *a) {
  uint16_t sc[4];
  memcpy(sc, a->scales, 8);
  const uint16_t dh =
      (uint16_t)((sc[0] >> 12) | (sc[1] >> 12) << 4 | (sc[2] >> 12) << 8 | (sc[3] >> 12) << 12);
  return _cvtsh_ss(dh) * 0.125f;
}
static inline AVX2 dec32 dec_iq1_m(const block_iq1_m *a, const uint16_t *rows, int ib) {
  (void)rows;
  const uint8_t *qs = a->qs + 4 * ib;
  const int h0 = a->qh[2 * ib], h1 = a->qh[2 * ib + 1];
  const __m256i g = grid8x4(pa_iq1s_grid, qs[0] | (h0 & 7) << 8, qs[1] | (h0 & 0x70) << 4,
                            qs[2] | (h1 & 7) << 8, qs[3] | (h1 & 0x70) << 4);
  const int s = pa_load_u16(a->scales + 2 * (ib / 2)) >> (6 * (ib % 2));
  return iq1_dec(g, iq1m_delta(h0 | h1 << 8), 2 * (s & 7) + 1, 2 * ((s >> 3) & 7) + 1);
}

/* The types whose rows are looked up from their own fields as they go. */
#define NO_ROWS(name)                                                          \
  static inline AVX2 void rows_##name(const block_##name *a, uint16_t *rows) { \
    (void)a, (void)rows;                                                       \
  }
NO_ROWS(iq2_xxs)
NO_ROWS(iq2_xs)
NO_ROWS(iq2_s)
NO_ROWS(iq3_xxs)
NO_ROWS(iq1_s)
NO_ROWS(iq1_m)

/* ---- per type: the one-token dot and the GEMM unpacker ----
 * dot: per super-block the exact isum, then sum = fma(isum, dw * d_x, sum)
 * (the canonical K-quant float steps, which gemm_avx2.c's tile repeats).
 * unpack: super-block i as its 256 signed values, 16 scale factors and dw
 * (kernels.h, pa_iq_grid_unpack_avx2). */
#define GRID_DOT(name)                                                                           \
  static AVX2 void dot_##name(int64_t n, float *out, const void *w, const void *x) {             \
    const block_##name *a = w;                                                                   \
    const block_q8_K *b = x;                                                                     \
    __m128 sum = _mm_setzero_ps();                                                               \
    uint16_t rows[64];                                                                           \
    for (int64_t i = 0; i < n / QK_K; i++) {                                                     \
      rows_##name(&a[i], rows);                                                                  \
      __m256i acc = _mm256_setzero_si256();                                                      \
      _Pragma("GCC unroll 8") for (int ib = 0; ib < QK_K / 32; ib++) {                           \
        const dec32 d = dec_##name(&a[i], rows, ib);                                             \
        acc = _mm256_add_epi32(acc, scaled(pairs(d.mag, d.sgn, b[i].qs + 32 * ib), d.s0, d.s1)); \
      }                                                                                          \
      sum = _mm_fmadd_ss(_mm_set_ss((float)hsum_epi32(acc)),                                     \
                         _mm_set_ss(dw_##name(&a[i]) * b[i].d), sum);                            \
    }                                                                                            \
    *out = _mm_cvtss_f32(sum);                                                                   \
  }
#define GRID_UNPACK(name)                                                            \
  static AVX2 float unpack_##name(const void *blk, int8_t *v, int16_t *sc) {         \
    const block_##name *a = blk;                                                     \
    uint16_t rows[64];                                                               \
    rows_##name(a, rows);                                                            \
    for (int ib = 0; ib < QK_K / 32; ib++) {                                         \
      const dec32 d = dec_##name(a, rows, ib);                                       \
      _mm256_storeu_si256((__m256i *)(v + 32 * ib), _mm256_sign_epi8(d.mag, d.sgn)); \
      sc[2 * ib] = (int16_t)d.s0;                                                    \
      sc[2 * ib + 1] = (int16_t)d.s1;                                                \
    }                                                                                \
    return dw_##name(a);                                                             \
  }
#define GRID_TYPE(name) \
  GRID_DOT(name)        \
  GRID_UNPACK(name)

GRID_TYPE(iq2_xxs)
GRID_TYPE(iq2_xs)
GRID_TYPE(iq2_s)
GRID_TYPE(iq3_xxs)
GRID_TYPE(iq3_s)
GRID_TYPE(iq1_s)
GRID_UNPACK(iq1_m)

/* IQ1_M's dot with its 16 scale factors (2s + 1) made once per super-block
 * in one vector, the way ggml lays them out: the four scale words
 * broadcast and shifted right by 0, 6 (low lane) and 3, 9 (high lane), so
 * that a lane's 16-bit element t holds group 2 ib's factor in the low lane
 * and group 2 ib + 1's in the high one for t = ib / 2 + 4 (ib % 2); one
 * byte shuffle per 32 values then spreads them, instead of building the
 * pair from scalars. */
static AVX2 void dot_iq1_m(int64_t n, float *out, const void *w, const void *x) {
  const block_iq1_m *a = w;
  const block_q8_K *b = x;
  const __m256i shift = _mm256_set_epi64x(9, 3, 6, 0);
  __m128 sum = _mm_setzero_ps();
  for (int64_t i = 0; i < n / QK_K; i++) {
    uint64_t words;
    memcpy(&words, a[i].scales, 8);
    const __m256i sw = _mm256_srlv_epi64(_mm256_set1_epi64x((long long)words), shift);
    const __m256i sc = _mm256_add_epi16(
        _mm256_slli_epi16(_mm256_and_si256(sw, _mm256_set1_epi16(7)), 1), _mm256_set1_epi16(1));
    __m256i acc = _mm256_setzero_si256();
    _Pragma("GCC unroll 8") for (int ib = 0; ib < QK_K / 32; ib++) {
      const int t = ib / 2 + 4 * (ib % 2);
      const __m256i s =
          _mm256_shuffle_epi8(sc, _mm256_set1_epi16((short)(2 * t | (2 * t + 1) << 8)));
      const dec32 d = dec_iq1_m(&a[i], NULL, ib);
      acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pairs(d.mag, d.sgn, b[i].qs + 32 * ib), s));
    }
    sum =
        _mm_fmadd_ss(_mm_set_ss((float)hsum_epi32(acc)), _mm_set_ss(dw_iq1_m(&a[i]) * b[i].d), sum);
  }
  *out = _mm_cvtss_f32(sum);
}

float pa_iq_grid_unpack_avx2(pa_type type, const void *blk, int8_t *v, int16_t *sc) {
  switch (type) {
    case PA_TYPE_IQ2_XXS:
      return unpack_iq2_xxs(blk, v, sc);
    case PA_TYPE_IQ2_XS:
      return unpack_iq2_xs(blk, v, sc);
    case PA_TYPE_IQ2_S:
      return unpack_iq2_s(blk, v, sc);
    case PA_TYPE_IQ3_XXS:
      return unpack_iq3_xxs(blk, v, sc);
    case PA_TYPE_IQ3_S:
      return unpack_iq3_s(blk, v, sc);
    case PA_TYPE_IQ1_S:
      return unpack_iq1_s(blk, v, sc);
    default:
      return unpack_iq1_m(blk, v, sc);
  }
}

void pa_kernels_fill_iq_grid_avx2(pa_cpu_kernels *k) {
  for (int c = 0; c < 128; c++) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
      v |= (uint64_t)((pa_ksigns_iq2xs[c] >> i) & 1 ? 0xFF : 0x01) << (8 * i);
    ksigns_pm1[c] = v;
  }
  k->vec_dot[PA_TYPE_IQ2_XXS] = dot_iq2_xxs;
  k->vec_dot[PA_TYPE_IQ2_XS] = dot_iq2_xs;
  k->vec_dot[PA_TYPE_IQ2_S] = dot_iq2_s;
  k->vec_dot[PA_TYPE_IQ3_XXS] = dot_iq3_xxs;
  k->vec_dot[PA_TYPE_IQ3_S] = dot_iq3_s;
  k->vec_dot[PA_TYPE_IQ1_S] = dot_iq1_s;
  k->vec_dot[PA_TYPE_IQ1_M] = dot_iq1_m;
}
#endif
