/* x16.c: the 16-row interleaved layout of 32-element block types
 * (kernels/x16.h): repacking at load, rows back to floats, activation
 * packing, and the reference kernels that specify the layout's arithmetic. */
#include <math.h>
#include <string.h>

#include "base/base.h"
#include "kernels/x16.h"

PA_NO_FP_CONTRACT

size_t pa_x16_rec(pa_type type) {
  switch (type) {
    case PA_TYPE_Q8_0:
      return 544;
    case PA_TYPE_Q4_0:
      return 288;
    case PA_TYPE_Q4_1:
      return 320;
    case PA_TYPE_Q5_0:
      return 352;
    case PA_TYPE_IQ4_NL:
      return 288;
    case PA_TYPE_MXFP4:
      return 272;
    case PA_TYPE_IQ4_XS:
      return PA_X16_REC_XS;
    case PA_TYPE_Q4_K:
      return PA_X16_REC_K;
    case PA_TYPE_Q5_K:
      return PA_X16_REC_K5;
    default:
      return 0;
  }
}

/* Whether the type is one of the layout's K-quants (Q4_K, Q5_K). */
static bool is_k(pa_type type) { return type == PA_TYPE_Q4_K || type == PA_TYPE_Q5_K; }

/* Elements per record: 32, IQ4_XS's and the K-quants' 256. */
static int64_t rec_cols(pa_type type) {
  return type == PA_TYPE_IQ4_XS || is_k(type) ? QK_K : 32;
}

bool pa_x16_fits(pa_type type, int64_t rows, int64_t cols) {
  return pa_x16_rec(type) && rows > 0 && rows % 16 == 0 && cols > 0 && cols % rec_cols(type) == 0;
}

size_t pa_x16_bytes(pa_type type, int64_t rows, int64_t cols) {
  return (size_t)(rows / 16) * (size_t)(cols / rec_cols(type)) * pa_x16_rec(type);
}

/* IQ4_NL, MXFP4, IQ4_XS (x16.h): the 16 rows' qs of a 32-element block as
 * Q4_0's, each row's 16 bytes from q(l). */
static void put_nibbles(uint8_t *o, int l, const uint8_t *qs) {
  for (int i = 0; i < 4; i++) memcpy(o + 64 * i + 4 * l, qs + 4 * i, 4);
}

static void repack_iq(pa_type type, int64_t cols, const uint8_t *in, uint8_t *out,
                      int64_t n_groups) {
  const int64_t nb = cols / rec_cols(type);
  const size_t rec = pa_x16_rec(type), in_size = pa_type_get(type)->type_size;
  for (int64_t g = 0; g < n_groups; g++)
    for (int64_t b = 0; b < nb; b++) {
      uint8_t *o = out + (size_t)(g * nb + b) * rec;
      for (int l = 0; l < 16; l++) {
        const uint8_t *blk = in + ((size_t)(16 * g + l) * (size_t)nb + (size_t)b) * in_size;
        if (type == PA_TYPE_IQ4_NL) {
          const block_iq4_nl *q = (const block_iq4_nl *)blk;
          put_nibbles(o, l, q->qs);
          memcpy(o + 256 + 2 * l, &q->d, 2);
        } else if (type == PA_TYPE_MXFP4) {
          const block_mxfp4 *q = (const block_mxfp4 *)blk;
          put_nibbles(o, l, q->qs);
          o[256 + l] = q->e;
        } else {
          const block_iq4_xs *q = (const block_iq4_xs *)blk;
          for (int ib = 0; ib < 8; ib++) {
            put_nibbles(o + 256 * ib, l, q->qs + 16 * ib);
            o[PA_X16_XS_SC + 16 * ib + l] = (uint8_t)(int8_t)(pa_iq4_xs_scale(q, ib) - 32);
          }
          memcpy(o + PA_X16_XS_D + 2 * l, &q->d, 2);
        }
      }
    }
}

/* Q4_K, Q5_K (x16.h): per super-block, each row's qs 4 bytes at a time,
 * its unpacked scales and mins, d and dmin; Q5_K's fifth bits as masks. */
static void repack_k(pa_type type, int64_t cols, const uint8_t *in, uint8_t *out,
                     int64_t n_groups) {
  const int64_t nsb = cols / QK_K;
  const bool q5 = type == PA_TYPE_Q5_K;
  const size_t rec = pa_x16_rec(type), in_size = pa_type_get(type)->type_size;
  for (int64_t g = 0; g < n_groups; g++)
    for (int64_t b = 0; b < nsb; b++) {
      uint8_t *o = out + (size_t)(g * nsb + b) * rec;
      if (q5) memset(o, 0, rec); /* the masks are set bit by bit */
      for (int l = 0; l < 16; l++) {
        const uint8_t *blk = in + ((size_t)(16 * g + l) * (size_t)nsb + (size_t)b) * in_size;
        /* Q4_K and Q5_K share d, dmin, scales and qs (quant.h) */
        const block_q4_K *q4 = (const block_q4_K *)blk;
        const block_q5_K *q5b = (const block_q5_K *)blk;
        const uint8_t *qs = q5 ? q5b->qs : q4->qs, *scales = q5 ? q5b->scales : q4->scales;
        for (int v = 0; v < 32; v++) memcpy(o + PA_X16_K_QSV(q5, v) + 4 * l, qs + 4 * v, 4);
        for (int j = 0; j < 8; j++) {
          uint8_t sc, m;
          pa_get_scale_min_k4(j, scales, &sc, &m);
          o[PA_X16_K_HDR(q5) + PA_X16_K_SC + 16 * j + l] = sc;
          o[PA_X16_K_HDR(q5) + PA_X16_K_MN + 32 * (j / 2) + 2 * l + j % 2] = m;
        }
        memcpy(o + PA_X16_K_HDR(q5) + PA_X16_K_D + 2 * l, q5 ? &q5b->d : &q4->d, 2);
        memcpy(o + PA_X16_K_HDR(q5) + PA_X16_K_DMIN + 2 * l, q5 ? &q5b->dmin : &q4->dmin, 2);
        if (q5) /* the fifth bit of sub-block j, element k: bit j of qh[k] */
          for (int j = 0; j < 8; j++)
            for (int k = 0; k < 32; k++)
              if ((q5b->qh[k] >> j) & 1) {
                const int v = 8 * (j / 2) + k / 4, bit = 4 * l + k % 4;
                o[PA_X16_K_QHV(v) + 8 * (j % 2) + bit / 8] |= (uint8_t)(1u << (bit % 8));
              }
      }
    }
}

void pa_x16_repack(pa_type type, int64_t cols, const void *src, void *dst, int64_t n_groups) {
  const int64_t nb = cols / 32;
  const size_t rec = pa_x16_rec(type), in_size = pa_type_get(type)->type_size;
  const uint8_t *in = src;
  uint8_t *out = dst;
  if (type == PA_TYPE_IQ4_NL || type == PA_TYPE_MXFP4 || type == PA_TYPE_IQ4_XS) {
    repack_iq(type, cols, in, out, n_groups);
    return;
  }
  if (is_k(type)) {
    repack_k(type, cols, in, out, n_groups);
    return;
  }
  for (int64_t g = 0; g < n_groups; g++)
    for (int64_t b = 0; b < nb; b++) {
      uint8_t *o = out + (size_t)(g * nb + b) * rec;
      if (type == PA_TYPE_Q5_0) memset(o + 256, 0, 64);
      for (int l = 0; l < 16; l++) {
        const uint8_t *blk = in + ((size_t)(16 * g + l) * (size_t)nb + (size_t)b) * in_size;
        if (type == PA_TYPE_Q8_0) {
          const block_q8_0 *q = (const block_q8_0 *)blk;
          for (int i = 0; i < 8; i++)
            for (int e = 0; e < 4; e++) o[64 * i + 4 * l + e] = (uint8_t)q->qs[4 * i + e] ^ 0x80;
          memcpy(o + 512 + 2 * l, &q->d, 2);
        } else if (type == PA_TYPE_Q4_0) {
          const block_q4_0 *q = (const block_q4_0 *)blk;
          for (int i = 0; i < 4; i++) memcpy(o + 64 * i + 4 * l, q->qs + 4 * i, 4);
          memcpy(o + 256 + 2 * l, &q->d, 2);
        } else if (type == PA_TYPE_Q5_0) {
          const block_q5_0 *q = (const block_q5_0 *)blk;
          for (int i = 0; i < 4; i++) memcpy(o + 64 * i + 4 * l, q->qs + 4 * i, 4);
          const uint32_t qh = (uint32_t)q->qh[0] | (uint32_t)q->qh[1] << 8 |
                              (uint32_t)q->qh[2] << 16 | (uint32_t)q->qh[3] << 24;
          for (int i = 0; i < 8; i++) { /* 4 bits of mask i per row: byte (4l + e) / 8 */
            const uint32_t nib = (qh >> (i < 4 ? 4 * i : 16 + 4 * (i - 4))) & 0xF;
            o[256 + 8 * i + l / 2] |= (uint8_t)(nib << (4 * (l % 2)));
          }
          memcpy(o + 320 + 2 * l, &q->d, 2);
        } else {
          const block_q4_1 *q = (const block_q4_1 *)blk;
          for (int i = 0; i < 4; i++) memcpy(o + 64 * i + 4 * l, q->qs + 4 * i, 4);
          memcpy(o + 256 + 2 * l, &q->d, 2);
          memcpy(o + 288 + 2 * l, &q->m, 2);
        }
      }
    }
}

static float f16_at(const uint8_t *p) {
  pa_f16 h;
  memcpy(&h, p, 2);
  return pa_f16_to_f32(h);
}

/* Where the 16 rows' d (fp16) start in a record. */
static size_t d_at(pa_type type) {
  return type == PA_TYPE_Q8_0 ? 512 : type == PA_TYPE_Q5_0 ? 320 : 256;
}

/* The unsigned quant of element k (0..31) of row l in a record, as the
 * kernels multiply it: Q8_0's byte (quant + 128); Q4's nibble (low: k <
 * 16), with Q5_0's fifth bit from its mask. */
static int quant_at(const uint8_t *o, pa_type type, int l, int k) {
  if (type == PA_TYPE_Q8_0) return o[64 * (k / 4) + 4 * l + k % 4];
  const int h = k / 16, i = (k % 16) / 4, e = k % 4;
  const uint8_t q = o[64 * i + 4 * l + e];
  int v = h ? q >> 4 : q & 0x0F;
  if (type == PA_TYPE_Q5_0) {
    const int bit = 4 * l + e;
    v |= ((o[256 + 8 * (4 * h + i) + bit / 8] >> (bit % 8)) & 1) << 4;
  }
  return v;
}

/* The level (signed) of element k (0..31) of row l in the nibbles at o. */
static int level_at(const uint8_t *o, const int8_t *levels, int l, int k) {
  const uint8_t q = o[64 * ((k % 16) / 4) + 4 * l + k % 4];
  return levels[k < 16 ? q & 0x0F : q >> 4];
}

/* The 32-bit scale of row l of an IQ4_NL or MXFP4 record, or of IQ4_XS's
 * super-block record. */
static float iq_scale(pa_type type, const uint8_t *o, int l) {
  return type == PA_TYPE_MXFP4    ? pa_e8m0_to_f32_half(o[256 + l])
         : type == PA_TYPE_IQ4_XS ? f16_at(o + PA_X16_XS_D + 2 * l)
                                  : f16_at(o + 256 + 2 * l);
}

static void get_row_iq(const pa_matrix *w, int64_t row, float *out) {
  const int64_t nb = w->cols / rec_cols(w->type), g = row / 16;
  const int l = (int)(row % 16);
  const size_t rec = pa_x16_rec(w->type);
  const int8_t *levels = w->type == PA_TYPE_MXFP4 ? pa_kvalues_mxfp4 : pa_kvalues_iq4nl;
  const uint8_t *data = w->data;
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *o = data + (size_t)(g * nb + b) * rec;
    const float d = iq_scale(w->type, o, l);
    if (w->type == PA_TYPE_IQ4_XS) {
      for (int ib = 0; ib < 8; ib++) {
        const float dl = d * (float)(int8_t)o[PA_X16_XS_SC + 16 * ib + l];
        for (int k = 0; k < 32; k++)
          out[QK_K * b + 32 * ib + k] = dl * (float)level_at(o + 256 * ib, levels, l, k);
      }
    } else {
      for (int k = 0; k < 32; k++) out[32 * b + k] = d * (float)level_at(o, levels, l, k);
    }
  }
}

/* The value of column c (0..255) of row l in a Q4_K (q5 false) or Q5_K
 * super-block record: the nibble, plus 16 x Q5_K's fifth bit. */
static int k_value(const uint8_t *o, bool q5, int l, int c) {
  const int p = c / 64, h = (c % 64) / 32, k = c % 32; /* k = 4 i + e */
  const int v = 8 * p + k / 4, bit = 4 * l + k % 4;
  const uint8_t q = o[PA_X16_K_QSV(q5, v) + bit];
  const int nib = h ? q >> 4 : q & 0x0F;
  if (!q5) return nib;
  return nib | ((o[PA_X16_K_QHV(v) + 8 * h + bit / 8] >> (bit % 8)) & 1) << 4;
}

static void get_row_k(const pa_matrix *w, int64_t row, float *out) {
  const int64_t nsb = w->cols / QK_K, g = row / 16;
  const int l = (int)(row % 16);
  const bool q5 = w->type == PA_TYPE_Q5_K;
  const size_t rec = pa_x16_rec(w->type);
  const uint8_t *data = w->data;
  for (int64_t b = 0; b < nsb; b++) {
    const uint8_t *o = data + (size_t)(g * nsb + b) * rec;
    const float d = f16_at(o + PA_X16_K_HDR(q5) + PA_X16_K_D + 2 * l),
                dmin = f16_at(o + PA_X16_K_HDR(q5) + PA_X16_K_DMIN + 2 * l);
    for (int j = 0; j < 8; j++) {
      const float dl = d * (float)o[PA_X16_K_HDR(q5) + PA_X16_K_SC + 16 * j + l];
      const float ml =
          dmin * (float)o[PA_X16_K_HDR(q5) + PA_X16_K_MN + 32 * (j / 2) + 2 * l + j % 2];
      for (int k = 0; k < 32; k++)
        out[QK_K * b + 32 * j + k] = dl * (float)k_value(o, q5, l, 32 * j + k) - ml;
    }
  }
}

/* The file's reference dequantizers' expressions (dequant.c), exactly. */
void pa_x16_get_row(const pa_matrix *w, int64_t row, float *out) {
  if (w->type == PA_TYPE_IQ4_NL || w->type == PA_TYPE_MXFP4 || w->type == PA_TYPE_IQ4_XS) {
    get_row_iq(w, row, out);
    return;
  }
  if (is_k(w->type)) {
    get_row_k(w, row, out);
    return;
  }
  const int64_t nb = w->cols / 32, g = row / 16;
  const int l = (int)(row % 16);
  const size_t rec = pa_x16_rec(w->type);
  const uint8_t *data = w->data;
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *o = data + (size_t)(g * nb + b) * rec;
    const float d = f16_at(o + d_at(w->type) + 2 * l);
    float *y = out + 32 * b;
    for (int k = 0; k < 32; k++) {
      const int q = quant_at(o, w->type, l, k);
      switch (w->type) {
        case PA_TYPE_Q8_0:
          y[k] = (float)(q - 128) * d;
          break;
        case PA_TYPE_Q4_0:
          y[k] = d * (float)(q - 8);
          break;
        case PA_TYPE_Q5_0:
          y[k] = d * (float)(q - 16);
          break;
        default:
          y[k] = d * (float)q + f16_at(o + 288 + 2 * l);
          break; /* Q4_1 */
      }
    }
  }
}

size_t pa_x16_x_size(int64_t cols) {
  return (size_t)(cols / 32) * PA_X16_XREC;
}

/* Q8_0 activations with the offset of weights read unsigned: off = scale
 * x the block's sum, scale 128 (Q8_0 + 128), 8 (Q4_0's), 16 (Q5_0's) or
 * 12 (MXFP4: weights read as level + 12, 0..24). */
static void pack_q8_0(int64_t cols, const void *xq, void *xp, int32_t scale) {
  const block_q8_0 *x = xq;
  uint8_t *out = xp;
  for (int64_t b = 0; b < cols / 32; b++) {
    uint8_t *o = out + (size_t)b * PA_X16_XREC;
    memcpy(o, x[b].qs, 32);
    const float d = pa_f16_to_f32(x[b].d);
    int32_t sum = 0;
    for (int k = 0; k < 32; k++) sum += x[b].qs[k];
    const int32_t off = sum * scale;
    memcpy(o + 32, &d, 4);
    memcpy(o + 36, &off, 4);
  }
}
void pa_x16_pack_x_q8_0(int64_t cols, const void *xq, void *xp) {
  pack_q8_0(cols, xq, xp, 128);
}
void pa_x16_pack_x_q4_0(int64_t cols, const void *xq, void *xp) {
  pack_q8_0(cols, xq, xp, 8);
}
void pa_x16_pack_x_q5_0(int64_t cols, const void *xq, void *xp) {
  pack_q8_0(cols, xq, xp, 16);
}
void pa_x16_pack_x_mxfp4(int64_t cols, const void *xq, void *xp) {
  pack_q8_0(cols, xq, xp, 12);
}

size_t pa_x16_x_size_xs(int64_t cols) {
  return (size_t)(cols / QK_K) * PA_X16_XREC_XS;
}

/* IQ4_XS: the Q8_K block's quants and d, and per sub-block 128 x its sum
 * (from bsums) */
void pa_x16_pack_x_iq4_xs(int64_t cols, const void *xq, void *xp) {
  const block_q8_K *x = xq;
  uint8_t *out = xp;
  for (int64_t b = 0; b < cols / QK_K; b++) {
    uint8_t *o = out + (size_t)b * PA_X16_XREC_XS;
    memcpy(o, x[b].qs, QK_K);
    memcpy(o + PA_X16_XS_XD, &x[b].d, 4);
    for (int ib = 0; ib < 8; ib++) {
      const int32_t off = 128 * ((int32_t)x[b].bsums[2 * ib] + x[b].bsums[2 * ib + 1]);
      memcpy(o + PA_X16_XS_XOFF + 4 * ib, &off, 4);
    }
  }
}

size_t pa_x16_x_size_k(int64_t cols) {
  return (size_t)(cols / QK_K) * PA_X16_XREC_K;
}

/* Q4_K, Q5_K: the Q8_K block's quants, each sub-block's sum of them (from
 * bsums) as int16, and d */
void pa_x16_pack_x_q4_k(int64_t cols, const void *xq, void *xp) {
  const block_q8_K *x = xq;
  uint8_t *out = xp;
  for (int64_t b = 0; b < cols / QK_K; b++) {
    uint8_t *o = out + (size_t)b * PA_X16_XREC_K;
    memset(o + QK_K, 0, PA_X16_XREC_K - QK_K);
    memcpy(o, x[b].qs, QK_K);
    for (int j = 0; j < 8; j++) {
      const int16_t s = (int16_t)(x[b].bsums[2 * j] + x[b].bsums[2 * j + 1]);
      memcpy(o + PA_X16_K_XS + 2 * j, &s, 2);
    }
    memcpy(o + PA_X16_K_XD, &x[b].d, 4);
  }
}

void pa_x16_pack_x_q4_1(int64_t cols, const void *xq, void *xp) {
  const block_q8_1 *x = xq;
  uint8_t *out = xp;
  for (int64_t b = 0; b < cols / 32; b++) {
    uint8_t *o = out + (size_t)b * PA_X16_XREC;
    memcpy(o, x[b].qs, 32);
    const float d = pa_f16_to_f32(x[b].d), s = pa_f16_to_f32(x[b].s);
    memcpy(o + 32, &d, 4);
    memcpy(o + 36, &s, 4);
  }
}

/* The specification (x16.h): one token at a time, the steps in order. */
static void run_ref(pa_type type, int64_t cols, const uint8_t *wg, const uint8_t *const *xp, int nt,
                    float *y, int64_t ldy) {
  const int64_t nb = cols / 32;
  const size_t rec = pa_x16_rec(type);
  for (int t = 0; t < nt; t++)
    for (int l = 0; l < 16; l++) {
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; b++) {
        const uint8_t *o = wg + (size_t)b * rec, *x = xp[t] + (size_t)b * PA_X16_XREC;
        const int8_t *xq = (const int8_t *)x;
        float dx;
        memcpy(&dx, x + 32, 4);
        int32_t sum = 0;
        for (int k = 0; k < 32; k++) sum += (int32_t)quant_at(o, type, l, k) * xq[k];
        const float dl = f16_at(o + d_at(type) + 2 * l);
        if (type == PA_TYPE_Q4_1) {
          float s;
          memcpy(&s, x + 36, 4);
          acc = fmaf((float)sum, dl * dx, acc);
          acc = fmaf(f16_at(o + 288 + 2 * l), s, acc);
        } else {
          int32_t off;
          memcpy(&off, x + 36, 4);
          acc = fmaf((float)(sum - off), dl * dx, acc);
        }
      }
      y[t * ldy + l] = acc;
    }
}

/* IQ4_NL, MXFP4, IQ4_XS's specification (x16.h), one token at a time. */
static void run_ref_iq(pa_type type, int64_t cols, const uint8_t *wg, const uint8_t *const *xp,
                       int nt, float *y, int64_t ldy) {
  const int64_t nb = cols / rec_cols(type);
  const size_t rec = pa_x16_rec(type), xrec = type == PA_TYPE_IQ4_XS ? PA_X16_XREC_XS : PA_X16_XREC;
  const int8_t *levels = type == PA_TYPE_MXFP4 ? pa_kvalues_mxfp4 : pa_kvalues_iq4nl;
  for (int t = 0; t < nt; t++)
    for (int l = 0; l < 16; l++) {
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; b++) {
        const uint8_t *o = wg + (size_t)b * rec, *x = xp[t] + (size_t)b * xrec;
        const int8_t *xq = (const int8_t *)x;
        float dx;
        memcpy(&dx, x + (type == PA_TYPE_IQ4_XS ? PA_X16_XS_XD : 32), 4);
        int32_t sum = 0;
        if (type == PA_TYPE_IQ4_XS) {
          for (int ib = 0; ib < 8; ib++) {
            int32_t s = 0;
            for (int k = 0; k < 32; k++)
              s += level_at(o + 256 * ib, levels, l, k) * (int32_t)xq[32 * ib + k];
            sum += (int8_t)o[PA_X16_XS_SC + 16 * ib + l] * s;
          }
        } else {
          for (int k = 0; k < 32; k++) sum += level_at(o, levels, l, k) * (int32_t)xq[k];
        }
        acc = fmaf((float)sum, iq_scale(type, o, l) * dx, acc);
      }
      y[t * ldy + l] = acc;
    }
}

/* Q4_K's and Q5_K's specification (x16.h), one token at a time. */
static void run_ref_k(pa_type type, int64_t cols, const uint8_t *wg, const uint8_t *const *xp,
                      int nt, float *y, int64_t ldy) {
  const int64_t nsb = cols / QK_K;
  const bool q5 = type == PA_TYPE_Q5_K;
  const size_t rec = pa_x16_rec(type);
  for (int t = 0; t < nt; t++)
    for (int l = 0; l < 16; l++) {
      float acc = 0.0f;
      for (int64_t b = 0; b < nsb; b++) {
        const uint8_t *o = wg + (size_t)b * rec, *x = xp[t] + (size_t)b * PA_X16_XREC_K;
        const int8_t *xq = (const int8_t *)x;
        float dx;
        memcpy(&dx, x + PA_X16_K_XD, 4);
        int32_t sum = 0, mins = 0;
        for (int j = 0; j < 8; j++) {
          int32_t s = 0;
          for (int k = 0; k < 32; k++) s += k_value(o, q5, l, 32 * j + k) * (int32_t)xq[32 * j + k];
          int16_t xs;
          memcpy(&xs, x + PA_X16_K_XS + 2 * j, 2);
          sum += o[PA_X16_K_HDR(q5) + PA_X16_K_SC + 16 * j + l] * s;
          mins += o[PA_X16_K_HDR(q5) + PA_X16_K_MN + 32 * (j / 2) + 2 * l + j % 2] * (int32_t)xs;
        }
        acc = fmaf((float)sum, f16_at(o + PA_X16_K_HDR(q5) + PA_X16_K_D + 2 * l) * dx, acc);
        acc = fmaf(-(float)mins, f16_at(o + PA_X16_K_HDR(q5) + PA_X16_K_DMIN + 2 * l) * dx, acc);
      }
      y[t * ldy + l] = acc;
    }
}

/* The reference kernel of each type: run_##sfx calls body (run_ref,
 * run_ref_iq or run_ref_k) for type. */
#define X16_REF(sfx, body, type)                                                                   \
  static void run_##sfx(int64_t cols, const uint8_t *wg, const uint8_t *const *xp, int nt, float *y, \
                        int64_t ldy, const pa_prefetch *stream) {                                 \
    (void)stream;                                                                                \
    body(type, cols, wg, xp, nt, y, ldy);                                                        \
  }                                                                                              \
  PA_X16_KERNEL(ref, sfx, PA_X16_TOKENS);
X16_REF(iq4_nl, run_ref_iq, PA_TYPE_IQ4_NL)
X16_REF(mxfp4, run_ref_iq, PA_TYPE_MXFP4)
X16_REF(iq4_xs, run_ref_iq, PA_TYPE_IQ4_XS)
X16_REF(q4_k, run_ref_k, PA_TYPE_Q4_K)
X16_REF(q5_k, run_ref_k, PA_TYPE_Q5_K)
X16_REF(q8_0, run_ref, PA_TYPE_Q8_0)
X16_REF(q4_0, run_ref, PA_TYPE_Q4_0)
X16_REF(q4_1, run_ref, PA_TYPE_Q4_1)
X16_REF(q5_0, run_ref, PA_TYPE_Q5_0)
