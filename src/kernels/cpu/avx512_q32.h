/* avx512_q32.h: the parts of 32-element blocks the AVX-512 kernel files
 * (avx512.c, blocks32_avx512.c, gemm_avx512.c) share: their quants as
 * unsigned bytes and their fp16 scales gathered with permutes. Include it
 * after defining BODY (static inline, always_inline, with the files'
 * AVX-512 target attribute) and load512, and after <immintrin.h> and
 * <string.h>. */
#ifndef PASADA_AVX512_Q32_H
#define PASADA_AVX512_Q32_H

/* Q4_0/Q4_1 quants (16 bytes at qs) as unsigned bytes in element order:
 * low nibbles (elements 0..15), then high nibbles (16..31); with `in_place`
 * the high ones stay where they are (16x their value, for a vpdpbusd whose
 * high half the caller divides by 16). */
BODY __m256i q4_bytes(const uint8_t *qs, const int in_place) {
  const __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
  if (in_place)
    return _mm256_and_si256(
        v, _mm256_setr_epi64x(0x0F0F0F0F0F0F0F0F, 0x0F0F0F0F0F0F0F0F,
                              (long long)0xF0F0F0F0F0F0F0F0ULL, (long long)0xF0F0F0F0F0F0F0F0ULL));
  return _mm256_and_si256(_mm256_srlv_epi64(v, _mm256_setr_epi64x(0, 0, 4, 4)),
                          _mm256_set1_epi8(0x0F));
}

/* Q5_0/Q5_1 quants (16 bytes of nibbles at qs, 32 fifth bits at qh) as
 * unsigned bytes 0..31 in element order. */
BODY __m256i q5_bytes(const uint8_t *qs, const uint8_t *qh) {
  uint32_t bits;
  memcpy(&bits, qh, 4);
  const __m256i v = _mm256_and_si256(
      _mm256_srlv_epi64(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs)),
                        _mm256_setr_epi64x(0, 0, 4, 4)),
      _mm256_set1_epi8(0x0F));
  return _mm256_mask_add_epi8(v, (__mmask32)bits, v, _mm256_set1_epi8(16));
}

/* The fp16 scales of up to 8 consecutive blocks, gathered by permutes
 * from 64-byte windows. Windows are placed so that for 8 whole blocks they
 * never reach past them; `avail` (bytes readable from p) masks the part of
 * a window beyond a last, partial group (masked loads do not fault and read
 * zeros). Dword permutes (one uop) take (d, m) or (d, s) pairs, which sit
 * at 4-byte aligned offsets; word permutes take the lone d of the others. */
#define ALL_AVAILABLE (1 << 30)

BODY __m512i window(const uint8_t *p, int64_t avail) {
  if (avail >= 64) return load512(p);
  return _mm512_maskz_loadu_epi8(avail <= 0 ? 0 : ((__mmask64)1 << avail) - 1, p);
}

/* 8 (d, m) / (d, s) pairs at p + k * stride, as 16 floats (pair k in lanes
 * 2k, 2k + 1). stride is 20 (Q4_1), 24 (Q5_1) or 36 (Q8_1). */
BODY __m512 f16_pairs8(const uint8_t *p, const int stride, const int64_t avail) {
  __m512i v;
  if (stride == 20) { /* windows at blocks 0 and 4: dwords 0, 5, 10, 15 of each */
    v = _mm512_permutex2var_epi32(
        window(p, avail), _mm512_setr_epi32(0, 5, 10, 15, 16, 21, 26, 31, 0, 0, 0, 0, 0, 0, 0, 0),
        window(p + 80, avail - 80));
  } else if (stride == 24) { /* blocks 0..5 in bytes 0..127, blocks 6, 7 at 144, 168 */
    const __m512i a = _mm512_maskz_permutex2var_epi32(
        0x3F, window(p, avail),
        _mm512_setr_epi32(0, 6, 12, 18, 24, 30, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
        window(p + 64, avail - 64));
    const __m512i b = _mm512_maskz_permutexvar_epi32(
        0xC0, _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 4, 10, 0, 0, 0, 0, 0, 0, 0, 0),
        window(p + 128, avail - 128));
    v = _mm512_or_si512(a, b);
  } else { /* 36: blocks 0..3 in bytes 0..127, 4..7 in 144..271 */
    const __m512i idx = _mm512_setr_epi32(0, 9, 18, 27, 0, 9, 18, 27, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i a =
        _mm512_maskz_permutex2var_epi32(0x0F, window(p, avail), idx, window(p + 64, avail - 64));
    const __m512i b = _mm512_maskz_permutex2var_epi32(0xF0, window(p + 144, avail - 144), idx,
                                                      window(p + 208, avail - 208));
    v = _mm512_or_si512(a, b);
  }
  return _mm512_cvtph_ps(_mm512_castsi512_si256(v));
}

/* 8 lone fp16 scales at p + k * stride, as 8 floats. stride is 18 (Q4_0),
 * 22 (Q5_0) or 34 (Q8_0). */
BODY __m256 f16_singles8(const uint8_t *p, const int stride, const int64_t avail) {
  __m512i v;
  if (stride == 18) { /* all 8 in bytes 0..127 */
    v = _mm512_permutex2var_epi16(
        window(p, avail),
        _mm512_setr_epi32(9 << 16, 27 << 16 | 18, 45 << 16 | 36, 63 << 16 | 54, 0, 0, 0, 0, 0, 0, 0,
                          0, 0, 0, 0, 0),
        window(p + 64, avail - 64));
  } else if (stride == 22) { /* blocks 0..5 in bytes 0..127, blocks 6, 7 at 132, 154 */
    const __m512i a =
        _mm512_maskz_permutex2var_epi16(0x3F, window(p, avail),
                                        _mm512_setr_epi32(11 << 16, 33 << 16 | 22, 55 << 16 | 44, 0,
                                                          0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
                                        window(p + 64, avail - 64));
    const __m512i b = _mm512_maskz_permutexvar_epi16(
        0xC0, _mm512_setr_epi32(0, 0, 0, 21 << 16 | 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
        window(p + 112, avail - 112));
    v = _mm512_or_si512(a, b);
  } else { /* 34: blocks 0..3 in bytes 0..127, 4..7 in 136..263 */
    const __m512i idx = _mm512_setr_epi32(17 << 16, 51 << 16 | 34, 17 << 16, 51 << 16 | 34, 0, 0, 0,
                                          0, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i a =
        _mm512_maskz_permutex2var_epi16(0x0F, window(p, avail), idx, window(p + 64, avail - 64));
    const __m512i b = _mm512_maskz_permutex2var_epi16(0xF0, window(p + 136, avail - 136), idx,
                                                      window(p + 200, avail - 200));
    v = _mm512_or_si512(a, b);
  }
  return _mm256_cvtph_ps(_mm512_castsi512_si128(v));
}

#endif
