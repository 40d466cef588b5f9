/* avx512_scales.h: gathering the fp16 scales of 32-element blocks with
 * permutes, shared by the AVX-512 kernel files (avx512.c,
 * blocks32_avx512.c). Include it after defining BODY (static inline,
 * always_inline, with the files' AVX-512 target attribute) and load512, and
 * after <immintrin.h>. */
#ifndef PASADA_AVX512_SCALES_H
#define PASADA_AVX512_SCALES_H

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
