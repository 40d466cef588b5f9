/* dequant.glsl: the weight types on the GPU. For the one type the build
 * defines (TYPE_F32, TYPE_F16, TYPE_BF16, TYPE_Q4_0 ... TYPE_Q6_K, TYPE_IQ4_NL,
 * TYPE_IQ4_XS, TYPE_MXFP4, TYPE_IQ2_XXS ... TYPE_IQ1_M) it gives
 *   QK           elements per block (8 for the float types, so that every
 *                type is read in groups of 8 that lie inside one block),
 *   BLOCK_BYTES  bytes per block, and
 *   dq8(row, g, v)  elements [8g, 8g + 8) of the row whose first byte is at
 *                device address `row`, as float32.
 * Included after common.glsl and the push constants (which hold grid and
 * ksigns, read by the grid I-quants). Rows are the GGUF bytes: consecutive blocks,
 * starting on a block boundary, so every block but MXFP4's starts at an even
 * address and every field below that holds two bytes read together sits at
 * an even offset (16-bit loads). The results are bit-exact with src/quant/dequant.c:
 * the same float32 operations in the same order (scale products first, then
 * one multiply and one add or subtract per element); `precise` keeps the
 * compiler from fusing a multiply and an add into one rounding. */

/* The 8 bytes at the even address a, as four 16-bit loads. */
void ld_bytes8(uint64_t a, out uint b[8]) {
  U16s p = U16s(a);
  for (int k = 0; k < 4; k++) {
    uint w = uint(p.v[k]);
    b[2 * k] = w & 0xFFu;
    b[2 * k + 1] = w >> 8;
  }
}

#if defined(TYPE_F32)
#define QK 8
#define BLOCK_BYTES 32
void dq8(uint64_t row, uint g, out float v[8]) {
  U32s p = U32s(row + uint64_t(g) * BLOCK_BYTES);
  for (int i = 0; i < 8; i++) v[i] = uintBitsToFloat(p.v[i]);
}

#elif defined(TYPE_F16) || defined(TYPE_BF16)
#define QK 8
#define BLOCK_BYTES 16
void dq8(uint64_t row, uint g, out float v[8]) {
  U16s p = U16s(row + uint64_t(g) * BLOCK_BYTES);
  for (int i = 0; i < 8; i++) {
#if defined(TYPE_F16)
    v[i] = half_bits(uint(p.v[i]));
#else
    v[i] = bf16_bits(uint(p.v[i]));
#endif
  }
}

/* Q4_0, Q4_1, Q5_0, Q5_1: blocks of 32; element l (l < 16) is the low
 * nibble of qs[l], element l + 16 its high nibble, so group j (0..3) reads
 * qs[8 (j % 2) .. +7] at nibble j / 2. The Q5 types keep the fifth bit of
 * element e at bit e of the 32-bit qh, which for group j is all of byte j. */
#elif defined(TYPE_Q4_0) || defined(TYPE_Q4_1) || defined(TYPE_Q5_0) || defined(TYPE_Q5_1)
#define QK 32
#if defined(TYPE_Q4_0)
#define BLOCK_BYTES 18 /* d, qs[16] */
#define QS_OFFSET 2
#elif defined(TYPE_Q4_1)
#define BLOCK_BYTES 20 /* d, m, qs[16] */
#define QS_OFFSET 4
#elif defined(TYPE_Q5_0)
#define BLOCK_BYTES 22 /* d, qh[4], qs[16] */
#define QH_OFFSET 2
#define QS_OFFSET 6
#else
#define BLOCK_BYTES 24 /* d, m, qh[4], qs[16] */
#define QH_OFFSET 4
#define QS_OFFSET 8
#endif
void dq8(uint64_t row, uint g, out float v[8]) {
  const uint j = g % 4;
  const uint64_t blk = row + uint64_t(g / 4) * BLOCK_BYTES;
  const float d = half_bits(ld_u16(blk));
#if defined(TYPE_Q4_1) || defined(TYPE_Q5_1)
  const float m = half_bits(ld_u16(blk + 2));
#endif
  uint qs[8];
  ld_bytes8(blk + QS_OFFSET + 8 * (j % 2), qs);
  const uint shift = 4 * (j / 2);
#if defined(TYPE_Q5_0) || defined(TYPE_Q5_1)
  const uint qh = ld_u8(blk + QH_OFFSET + j);
#endif
  for (int i = 0; i < 8; i++) {
    int q = int((qs[i] >> shift) & 0xFu);
#if defined(TYPE_Q5_0) || defined(TYPE_Q5_1)
    q |= int((qh >> i) & 1u) << 4;
#endif
#if defined(TYPE_Q4_0)
    precise float r = d * float(q - 8);
#elif defined(TYPE_Q5_0)
    precise float r = d * float(q - 16);
#else
    precise float r = d * float(q) + m;
#endif
    v[i] = r;
  }
}
#undef QS_OFFSET
#undef QH_OFFSET

#elif defined(TYPE_Q8_0)
#define QK 32
#define BLOCK_BYTES 34 /* d, qs[32] (signed) */
void dq8(uint64_t row, uint g, out float v[8]) {
  const uint64_t blk = row + uint64_t(g / 4) * BLOCK_BYTES;
  const float d = half_bits(ld_u16(blk));
  uint qs[8];
  ld_bytes8(blk + 2 + 8 * (g % 4), qs);
  for (int i = 0; i < 8; i++) {
    precise float r = float(bitfieldExtract(int(qs[i]), 0, 8)) * d;
    v[i] = r;
  }
}

/* The K-quants: blocks of 256 in sub-blocks of 16 (Q2_K, Q3_K, Q6_K) or 32
 * (Q4_K, Q5_K), so the 8 elements of a group share one scale (and min),
 * computed once. G is the group within the block (0..31), element 8G + i. */
#elif defined(TYPE_Q2_K)
#define QK 256
#define BLOCK_BYTES 84 /* scales[16], qs[64], d, dmin */
/* Scale byte G / 2: low nibble scales, high nibble mins. The 2-bit values
 * of each half of 128 share 32 bytes: its quarter k takes bits 2k..2k+1, so
 * group G reads qs[32 (G / 16) + 8 (G % 4) .. +7] at shift 2 ((G % 16) / 4). */
void dq8(uint64_t row, uint g, out float v[8]) {
  const uint G = g % 32;
  const uint64_t blk = row + uint64_t(g / 32) * BLOCK_BYTES;
  const float d = half_bits(ld_u16(blk + 80)), dmin = half_bits(ld_u16(blk + 82));
  const uint sc = ld_u8(blk + G / 2);
  precise float dl = d * float(sc & 0xFu);
  precise float ml = dmin * float(sc >> 4);
  uint qs[8];
  ld_bytes8(blk + 16 + 32 * (G / 16) + 8 * (G % 4), qs);
  const uint shift = 2 * ((G % 16) / 4);
  for (int i = 0; i < 8; i++) {
    precise float r = dl * float((qs[i] >> shift) & 3u) - ml;
    v[i] = r;
  }
}

#elif defined(TYPE_Q3_K)
#define QK 256
#define BLOCK_BYTES 110 /* hmask[32], qs[64], scales[12], d */
/* The low two bits as in Q2_K; the third bit of the same element is bit
 * 4 (G / 16) + (G % 16) / 4 of hmask[8 (G % 4) + i], a clear bit meaning
 * "minus 4". Signed 6-bit scale s of sub-block s = G / 2: low nibble in
 * scales[s % 8] (high nibble when s >= 8), top two bits in scales[8 + s % 4]
 * at bit 2 (s / 4). */
void dq8(uint64_t row, uint g, out float v[8]) {
  const uint G = g % 32;
  const uint64_t blk = row + uint64_t(g / 32) * BLOCK_BYTES;
  const float d = half_bits(ld_u16(blk + 108));
  const uint s = G / 2;
  const uint lo = (ld_u8(blk + 96 + s % 8) >> (4 * (s / 8))) & 0xFu;
  const uint hi = (ld_u8(blk + 104 + s % 4) >> (2 * (s / 4))) & 3u;
  precise float dl = d * float(int(lo | hi << 4) - 32);
  uint qs[8], hm[8];
  ld_bytes8(blk + 32 + 32 * (G / 16) + 8 * (G % 4), qs);
  ld_bytes8(blk + 8 * (G % 4), hm);
  const uint shift = 2 * ((G % 16) / 4), hbit = 4 * (G / 16) + (G % 16) / 4;
  for (int i = 0; i < 8; i++) {
    int q = int((qs[i] >> shift) & 3u) - (((hm[i] >> hbit) & 1u) != 0u ? 0 : 4);
    precise float r = dl * float(q);
    v[i] = r;
  }
}

#elif defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
#define QK 256
#if defined(TYPE_Q4_K)
#define BLOCK_BYTES 144 /* d, dmin, scales[12], qs[128] */
#define QS_OFFSET 16
#else
#define BLOCK_BYTES 176 /* d, dmin, scales[12], qh[32], qs[128] */
#define QS_OFFSET 48
#endif
/* Sub-block j = G / 4 (of 32 elements): 6-bit scale and min packed in the
 * 12 scale bytes (see pa_get_scale_min_k4). Sub-blocks 2c and 2c + 1 share
 * qs[32c .. 32c + 31], low and high nibbles; Q5_K's fifth bit of element
 * 32j + l is bit j of qh[l]. */
void dq8(uint64_t row, uint g, out float v[8]) {
  const uint G = g % 32, j = G / 4;
  const uint64_t blk = row + uint64_t(g / 32) * BLOCK_BYTES;
  const float d = half_bits(ld_u16(blk)), dmin = half_bits(ld_u16(blk + 2));
  const uint a = ld_u8(blk + 4 + j % 4), b = ld_u8(blk + 8 + j % 4);
  uint sc, mn;
  if (j < 4) {
    sc = a & 63u;
    mn = b & 63u;
  } else {
    const uint c = ld_u8(blk + 12 + j % 4);
    sc = (c & 0xFu) | (a >> 6) << 4;
    mn = (c >> 4) | (b >> 6) << 4;
  }
  precise float dl = d * float(sc);
  precise float ml = dmin * float(mn);
  uint qs[8];
  ld_bytes8(blk + QS_OFFSET + 32 * (j / 2) + 8 * (G % 4), qs);
  const uint shift = 4 * (j % 2);
#if defined(TYPE_Q5_K)
  uint qh[8];
  ld_bytes8(blk + 16 + 8 * (G % 4), qh);
#endif
  for (int i = 0; i < 8; i++) {
    uint q = (qs[i] >> shift) & 0xFu;
#if defined(TYPE_Q5_K)
    q |= ((qh[i] >> j) & 1u) << 4;
#endif
    precise float r = dl * float(q) - ml;
    v[i] = r;
  }
}
#undef QS_OFFSET

#elif defined(TYPE_Q6_K)
#define QK 256
#define BLOCK_BYTES 210 /* ql[128], qh[64], scales[16] (signed), d */
/* Per half h = G / 16 of 128, r = 8 (G % 16) + i: the low nibble is
 * ql[64h + r % 64] at nibble r / 64, the two high bits qh[32h + r % 32] at
 * bit 2 (r / 32); signed 8-bit scale per 16 elements. */
void dq8(uint64_t row, uint g, out float v[8]) {
  const uint G = g % 32, h = G / 16, R = G % 16;
  const uint64_t blk = row + uint64_t(g / 32) * BLOCK_BYTES;
  const float d = half_bits(ld_u16(blk + 208));
  precise float dl = d * float(int(I8s(blk + 192 + G / 2).v[0]));
  uint ql[8], qh[8];
  ld_bytes8(blk + 64 * h + 8 * (R % 8), ql);
  ld_bytes8(blk + 128 + 32 * h + 8 * (R % 4), qh);
  const uint lshift = 4 * (R / 8), hshift = 2 * (R / 4);
  for (int i = 0; i < 8; i++) {
    int q = int(((ql[i] >> lshift) & 0xFu) | ((qh[i] >> hshift) & 3u) << 4) - 32;
    precise float r = dl * float(q);
    v[i] = r;
  }
}

/* The table-lookup 4-bit types: each nibble indexes 16 int8 levels (the
 * tables of src/quant/dequant.c). IQ4_NL and MXFP4 lay a block of 32 out as
 * Q4_0 does (group j reads qs[8 (j % 2) .. +7] at nibble j / 2); IQ4_XS
 * holds 8 such sub-blocks of 16 bytes each with a 6-bit scale per
 * sub-block, sub-block G / 4 for group G. MXFP4 blocks are 17 bytes, so
 * they (and its rows) may start at odd addresses: byte loads only. */
#elif defined(TYPE_IQ4_NL) || defined(TYPE_IQ4_XS)
const int KV_IQ4NL[16] = int[16](-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
#if defined(TYPE_IQ4_NL)
#define QK 32
#define BLOCK_BYTES 18 /* d, qs[16] */
void dq8(uint64_t row, uint g, out float v[8]) {
  const uint j = g % 4;
  const uint64_t blk = row + uint64_t(g / 4) * BLOCK_BYTES;
  const float d = half_bits(ld_u16(blk));
  uint qs[8];
  ld_bytes8(blk + 2 + 8 * (j % 2), qs);
  const uint shift = 4 * (j / 2);
  for (int i = 0; i < 8; i++) {
    precise float r = d * float(KV_IQ4NL[(qs[i] >> shift) & 0xFu]);
    v[i] = r;
  }
}
#else
#define QK 256
#define BLOCK_BYTES 136 /* d, scales_h, scales_l[4], qs[128] */
/* Sub-block s = G / 4: scale low nibble s % 2 of scales_l[s / 2], high two
 * bits 2s of scales_h; dl = d * (scale - 32). Its 16 bytes of qs start at
 * 8 + 16 s; group G % 4 = j reads 8 (j % 2) .. +7 at nibble j / 2. */
void dq8(uint64_t row, uint g, out float v[8]) {
  const uint G = g % 32, s = G / 4, j = G % 4;
  const uint64_t blk = row + uint64_t(g / 32) * BLOCK_BYTES;
  const float d = half_bits(ld_u16(blk));
  const uint sh = ld_u16(blk + 2), sl = ld_u8(blk + 4 + s / 2);
  const int ls = int(((sl >> (4 * (s % 2))) & 0xFu) | ((sh >> (2 * s)) & 3u) << 4);
  precise float dl = d * float(ls - 32);
  uint qs[8];
  ld_bytes8(blk + 8 + 16 * s + 8 * (j % 2), qs);
  const uint shift = 4 * (j / 2);
  for (int i = 0; i < 8; i++) {
    precise float r = dl * float(KV_IQ4NL[(qs[i] >> shift) & 0xFu]);
    v[i] = r;
  }
}
#endif

#elif defined(TYPE_MXFP4)
#define QK 32
#define BLOCK_BYTES 17 /* e, qs[16] */
const int KV_MXFP4[16] = int[16](0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
/* 2^(e - 128): the bits of ggml_e8m0_to_fp32_half (subnormal for e < 2). */
void dq8(uint64_t row, uint g, out float v[8]) {
  const uint j = g % 4;
  const uint64_t blk = row + uint64_t(g / 4) * BLOCK_BYTES;
  const uint e = ld_u8(blk);
  const float d = uintBitsToFloat(e < 2u ? 0x00200000u << e : (e - 1u) << 23);
  const uint64_t q = blk + 1 + 8 * (j % 2);
  const uint shift = 4 * (j / 2);
  for (int i = 0; i < 8; i++) {
    precise float r = d * float(KV_MXFP4[(ld_u8(q + i) >> shift) & 0xFu]);
    v[i] = r;
  }
}

/* The grid I-quants (src/quant/dequant_iq.c): 256-element super-blocks of
 * even size whose groups of 8 (two of 4 for IQ3) values are grid rows
 * with sign bits and small scales; group g of a row is
 * group G = g % 32 of super-block g / 32. The scale products left to right
 * in float32, then one multiply per value (IQ1: one add, then the multiply),
 * as the CPU's dequantizer. */
#elif defined(TYPE_IQ2_XXS) || defined(TYPE_IQ2_XS) || defined(TYPE_IQ2_S) || \
    defined(TYPE_IQ3_XXS) || defined(TYPE_IQ3_S) || defined(TYPE_IQ1_S) || defined(TYPE_IQ1_M)
#define QK 256
/* The tables (src/quant/iq_grids.h) are in device memory at the addresses
 * p.grid and p.ksigns of the includer's push constants (vulkan.c). Row r
 * of an 8-byte grid, of a 4-byte one, and the sign bits of code k: */
uint64_t grid8(uint r) {
  U32s g = U32s(p.grid);
  return uint64_t(g.v[2 * r]) | uint64_t(g.v[2 * r + 1]) << 32;
}
uint grid4(uint r) { return U32s(p.grid).v[r]; }
uint ksigns(uint k) { return ld_u8(p.ksigns + k); }
/* value i of a grid row (8 or 4 values, one per byte) */
uint grid_b(uint64_t row, uint i) { return uint(row >> (8u * i)) & 0xFFu; }
uint ld_u32(uint64_t a) { return ld_u16(a) | ld_u16(a + 2) << 16; } /* a even */
/* 8 values db * grid row r, negated where bit i of signs is set */
void put8(float db, uint64_t row, uint signs, out float v[8]) {
  for (uint i = 0; i < 8; i++) {
    precise float r = db * float(grid_b(row, i));
    v[i] = (signs >> i & 1u) != 0u ? -r : r;
  }
}
#if defined(TYPE_IQ2_XXS)
#define BLOCK_BYTES 66 /* d, qs: per 32 values 4 index bytes, then 4 x 7 sign bits and a scale */
void dq8(uint64_t row, uint g, out float v[8]) {
  const uint G = g % 32, ib = G / 4, k = G % 4;
  const uint64_t blk = row + uint64_t(g / 32) * BLOCK_BYTES;
  const float d = half_bits(ld_u16(blk));
  const uint aux0 = ld_u32(blk + 2 + 8 * ib), aux1 = ld_u32(blk + 6 + 8 * ib);
  precise float db = d * (0.5 + float(aux1 >> 28));
  db = db * 0.25;
  put8(db, grid8((aux0 >> (8 * k)) & 0xFFu), ksigns((aux1 >> (7 * k)) & 127u), v);
}
#elif defined(TYPE_IQ2_XS) || defined(TYPE_IQ2_S)
#if defined(TYPE_IQ2_XS)
#define BLOCK_BYTES 74 /* d, qs[32] (16-bit: 9 index bits, 7 sign bits), scales[8] */
#define SCALES 66
#else
#define BLOCK_BYTES 82 /* d, qs[32], signs[32], qh[8], scales[8] */
#define SCALES 74
#endif
/* a 4-bit scale per 16 values: nibble (G / 2) % 2 of scales[G / 4] */
void dq8(uint64_t row, uint g, out float v[8]) {
  const uint G = g % 32;
  const uint64_t blk = row + uint64_t(g / 32) * BLOCK_BYTES;
  const float d = half_bits(ld_u16(blk));
  const uint s = (ld_u8(blk + SCALES + G / 4) >> (4 * ((G / 2) % 2))) & 0xFu;
  precise float db = d * (0.5 + float(s));
  db = db * 0.25;
#if defined(TYPE_IQ2_XS)
  const uint q = ld_u16(blk + 2 + 2 * G);
  put8(db, grid8(q & 511u), ksigns(q >> 9), v);
#else
  const uint r = ld_u8(blk + 2 + G) | ((ld_u8(blk + 66 + G / 4) >> (2 * (G % 4))) & 3u) << 8;
  put8(db, grid8(r), ld_u8(blk + 34 + G), v);
#endif
}
#elif defined(TYPE_IQ3_XXS) || defined(TYPE_IQ3_S)
#if defined(TYPE_IQ3_XXS)
#define BLOCK_BYTES 98 /* d, 64 index bytes, per 32 values 4 x 7 sign bits and a scale */
#else
#define BLOCK_BYTES 110 /* d, qs[64], qh[8], signs[32], scales[4] */
#endif
void dq8(uint64_t row, uint g, out float v[8]) {
  const uint G = g % 32, ib = G / 4;
  const uint64_t blk = row + uint64_t(g / 32) * BLOCK_BYTES;
  const float d = half_bits(ld_u16(blk));
#if defined(TYPE_IQ3_XXS)
  const uint aux = ld_u32(blk + 66 + 4 * ib);
  precise float db = d * (0.5 + float(aux >> 28));
  db = db * 0.5;
  const uint signs = ksigns((aux >> (7 * (G % 4))) & 127u);
  const uint r0 = ld_u8(blk + 2 + 2 * G), r1 = ld_u8(blk + 3 + 2 * G);
  const uint64_t row8 = uint64_t(grid4(r0)) | uint64_t(grid4(r1)) << 32;
#else
  const uint s = (ld_u8(blk + 106 + ib / 2) >> (4 * (ib % 2))) & 0xFu;
  precise float db = d * float(1u + 2u * s);
  const uint qh = ld_u8(blk + 66 + ib), h = 2 * (G % 4);
  const uint r0 = ld_u8(blk + 2 + 2 * G) | ((qh >> h) & 1u) << 8;
  const uint r1 = ld_u8(blk + 3 + 2 * G) | ((qh >> (h + 1)) & 1u) << 8;
  const uint signs = ld_u8(blk + 74 + G);
  const uint64_t row8 = uint64_t(grid4(r0)) | uint64_t(grid4(r1)) << 32;
#endif
  put8(db, row8, signs, v);
}
#else
/* IQ1: values dl * (grid + delta), grid in {-1, 0, 1} (signed bytes),
 * delta +-1/8 */
void put8_iq1(float dl, uint64_t row, float delta, out float v[8]) {
  for (uint i = 0; i < 8; i++) {
    precise float t = float(int(grid_b(row, i) << 24) >> 24) + delta;
    precise float r = dl * t;
    v[i] = r;
  }
}
#if defined(TYPE_IQ1_S)
#define BLOCK_BYTES 50 /* d, qs[32], qh[8] (16-bit: 4 x 3 index bits, a scale, delta sign) */
void dq8(uint64_t row, uint g, out float v[8]) {
  const uint G = g % 32, ib = G / 4, k = G % 4;
  const uint64_t blk = row + uint64_t(g / 32) * BLOCK_BYTES;
  const float d = half_bits(ld_u16(blk));
  const uint qh = ld_u16(blk + 34 + 2 * ib);
  precise float dl = d * float(2u * ((qh >> 12) & 7u) + 1u);
  const uint r = ld_u8(blk + 2 + G) | ((qh >> (3 * k)) & 7u) << 8;
  put8_iq1(dl, grid8(r), (qh & 0x8000u) != 0u ? -0.125 : 0.125, v);
}
#else
#define BLOCK_BYTES 56 /* qs[32], qh[16], scales[8] (4 x 16 bits; d in their top nibbles) */
void dq8(uint64_t row, uint g, out float v[8]) {
  const uint G = g % 32;
  const uint64_t blk = row + uint64_t(g / 32) * BLOCK_BYTES;
  U16s sc = U16s(blk + 48);
  const uint s0 = uint(sc.v[0]), s1 = uint(sc.v[1]), s2 = uint(sc.v[2]), s3 = uint(sc.v[3]);
  const float d = half_bits((s0 >> 12) | (s1 >> 12) << 4 | (s2 >> 12) << 8 | (s3 >> 12) << 12);
  const uint s = (uint(sc.v[G / 8]) >> (3 * ((G / 2) % 4))) & 7u;
  precise float dl = d * float(2u * s + 1u);
  const uint nib = (ld_u8(blk + 32 + G / 2) >> (4 * (G % 2))) & 0xFu;
  put8_iq1(dl, grid8(ld_u8(blk + G) | (nib & 7u) << 8), (nib & 8u) != 0u ? -0.125 : 0.125, v);
}
#endif
#endif

#else
#error "dequant.glsl: define one weight type (TYPE_F32, TYPE_F16, ..., TYPE_Q6_K)"
#endif
