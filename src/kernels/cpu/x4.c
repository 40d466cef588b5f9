/* x4.c: the x4 layout of Q4_K, Q5_K, Q6_K, Q3_K, Q2_K (kernels/x4.h): repacking at
 * load, rows back to floats, activation packing, and the reference kernels that
 * specify the layout's arithmetic. */
#include <math.h>
#include <string.h>

#include "base/base.h"
#include "kernels/x4.h"

PA_NO_FP_CONTRACT

bool pa_x4_fits(pa_type type, int64_t rows, int64_t cols) {
  return pa_x4_rec(type) && rows > 0 && rows % 4 == 0 && cols > 0 && cols % QK_K == 0;
}

size_t pa_x4_rec(pa_type type) {
  return type == PA_TYPE_Q4_K   ? PA_X4_REC
         : type == PA_TYPE_Q5_K ? PA_X4_REC5
         : type == PA_TYPE_Q6_K ? PA_X4_REC6
         : type == PA_TYPE_Q3_K ? PA_X4_REC3
         : type == PA_TYPE_Q2_K ? PA_X4_REC2
                                : 0;
}

/* Q6_K's value q (0..63) of element c of a block: per half of 128, the low
 * nibble of ql[64 h + r % 64] (high nibble when r >= 64) and bits 2 k,
 * 2 k + 1 (k = r / 32) of qh[32 h + r % 32], r = c % 128. */
static int q6_value(const block_q6_K *b, int c) {
  const int h = c / 128, r = c % 128;
  const int low = (b->ql[64 * h + r % 64] >> (4 * (r / 64))) & 0xF;
  const int high = (b->qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
  return low | high << 4;
}

/* Column of a super-block that lane p, vector i, element e, half hh holds. */
static int x4_col(int p, int i, int e, int hh) {
  return 64 * p + 32 * hh + 4 * i + e;
}

static void repack_q6k(int64_t cols, const void *src, void *dst, int64_t n_groups) {
  const int64_t nsb = cols / QK_K;
  const block_q6_K *in = src;
  uint8_t *out = dst;
  for (int64_t g = 0; g < n_groups; g++)
    for (int64_t b = 0; b < nsb; b++) {
      uint8_t *rec = out + (size_t)(g * nsb + b) * PA_X4_REC6;
      memset(rec, 0, PA_X4_REC6);
      for (int r = 0; r < 4; r++) {
        const block_q6_K *blk = &in[(4 * g + r) * nsb + b];
        for (int p = 0; p < 4; p++) {
          const int l = 4 * r + p;
          for (int i = 0; i < 8; i++)
            for (int e = 0; e < 4; e++)
              for (int hh = 0; hh < 2; hh++) {
                const int q = q6_value(blk, x4_col(p, i, e, hh)), a = 2 * (i % 2) + hh;
                uint8_t *grp = rec + 192 * (i / 2) + 4 * l + e; /* x4.h: group j = i / 2 */
                if (a < 3)
                  grp[64 * a] |= (uint8_t)q;
                else /* the fourth vector: two bits in the top of each of the three */
                  for (int v = 0; v < 3; v++) grp[64 * v] |= (uint8_t)(((q >> (2 * v)) & 3) << 6);
              }
          for (int k = 0; k < 4; k++) rec[PA_X4_SC6 + 16 * k + l] = (uint8_t)blk->scales[4 * p + k];
        }
        memcpy(rec + PA_X4_D6 + 2 * r, &blk->d, 2);
      }
    }
}

/* q (0..63) of a Q6_K record's lane l, vector i, element e, half hh. */
static int x4_q6(const uint8_t *rec, int i, int l, int e, int hh) {
  const int a = 2 * (i % 2) + hh;
  const uint8_t *grp = rec + 192 * (i / 2) + 4 * l + e;
  if (a < 3) return grp[64 * a] & 0x3F;
  return (grp[0] >> 6) | (grp[64] >> 6) << 2 | (grp[128] >> 6) << 4;
}

/* Q3_K's u = q + 4 (0..7) of element c of a block: bits 0, 1 in
 * qs[32 h + c % 32] at 2 k (h = c / 128, k = c % 128 / 32), bit 2 in
 * hmask[c % 32] at 4 h + k (a clear bit is the file's "minus 4"). */
static int q3_value(const block_q3_K *b, int c) {
  const int h = c / 128, k = c % 128 / 32, l = c % 32;
  return ((b->qs[32 * h + l] >> (2 * k)) & 3) | ((b->hmask[l] >> (4 * h + k)) & 1) << 2;
}

static void repack_q3k(int64_t cols, const void *src, void *dst, int64_t n_groups) {
  const int64_t nsb = cols / QK_K;
  const block_q3_K *in = src;
  uint8_t *out = dst;
  for (int64_t g = 0; g < n_groups; g++)
    for (int64_t b = 0; b < nsb; b++) {
      uint8_t *rec = out + (size_t)(g * nsb + b) * PA_X4_REC3;
      memset(rec, 0, PA_X4_REC3);
      for (int r = 0; r < 4; r++) {
        const block_q3_K *blk = &in[(4 * g + r) * nsb + b];
        for (int p = 0; p < 4; p++) {
          const int l = 4 * r + p;
          for (int i = 0; i < 8; i++)
            for (int e = 0; e < 4; e++)
              for (int hh = 0; hh < 2; hh++) {
                const int u = q3_value(blk, x4_col(p, i, e, hh)), n = 4 * l + e;
                uint8_t *t = rec + 192 * (i / 4) + n; /* x4.h: triple i / 4 */
                if (i % 4 < 3) {
                  t[64 * (i % 4)] |= (uint8_t)(u << (3 * hh));
                } else { /* (4j+3, hh): bits 0, 1 on top of y (hh 0) or x, bit 2 in z */
                  t[64 * (1 - hh)] |= (uint8_t)((u & 3) << 6);
                  t[128] |= (uint8_t)((u >> 2) << (7 - hh));
                }
              }
          for (int k = 0; k < 4; k++)
            rec[PA_X4_SC3 + 16 * k + l] = (uint8_t)(int8_t)pa_q3_K_scale(blk->scales, 4 * p + k);
        }
        memcpy(rec + PA_X4_D3 + 2 * r, &blk->d, 2);
      }
    }
}

/* u (0..7) of a Q3_K record's lane l, vector i, element e, half hh. */
static int x4_q3(const uint8_t *rec, int i, int l, int e, int hh) {
  const uint8_t *t = rec + 192 * (i / 4) + 4 * l + e;
  if (i % 4 < 3) return (t[64 * (i % 4)] >> (3 * hh)) & 7;
  return t[64 * (1 - hh)] >> 6 | ((t[128] >> (7 - hh)) & 1) << 2;
}

/* Q2_K's u (0..3) of element c of a block: qs[32 h + c % 32] at bits 2 k
 * (h = c / 128, k = c % 128 / 32). */
static int q2_value(const block_q2_K *b, int c) {
  return (b->qs[32 * (c / 128) + c % 32] >> (2 * (c % 128 / 32))) & 3;
}

static void repack_q2k(int64_t cols, const void *src, void *dst, int64_t n_groups) {
  const int64_t nsb = cols / QK_K;
  const block_q2_K *in = src;
  uint8_t *out = dst;
  for (int64_t g = 0; g < n_groups; g++)
    for (int64_t b = 0; b < nsb; b++) {
      uint8_t *rec = out + (size_t)(g * nsb + b) * PA_X4_REC2;
      memset(rec, 0, PA_X4_REC2);
      for (int r = 0; r < 4; r++) {
        const block_q2_K *blk = &in[(4 * g + r) * nsb + b];
        for (int p = 0; p < 4; p++) {
          const int l = 4 * r + p;
          for (int i = 0; i < 8; i++)
            for (int e = 0; e < 4; e++)
              for (int hh = 0; hh < 2; hh++) /* x4.h: vector i % 4, bits 2 k */
                rec[64 * (i % 4) + 4 * l + e] |=
                    (uint8_t)(q2_value(blk, x4_col(p, i, e, hh)) << (2 * (2 * hh + i / 4)));
          for (int k = 0; k < 4; k++) rec[PA_X4_SCM2 + 16 * k + l] = blk->scales[4 * p + k];
        }
        memcpy(rec + PA_X4_D2 + 2 * r, &blk->d, 2);
        memcpy(rec + PA_X4_D2 + 8 + 2 * r, &blk->dmin, 2);
      }
    }
}

/* u (0..3) of a Q2_K record's lane l, vector i, element e, half hh. */
static int x4_q2(const uint8_t *rec, int i, int l, int e, int hh) {
  return (rec[64 * (i % 4) + 4 * l + e] >> (2 * (2 * hh + i / 4))) & 3;
}

static void get_row_q2k(const pa_matrix *w, int64_t row, float *out) {
  const int64_t nsb = w->cols / QK_K, g = row / 4;
  const int r = (int)(row % 4);
  const uint8_t *data = w->data;
  for (int64_t b = 0; b < nsb; b++) {
    const uint8_t *rec = data + (size_t)(g * nsb + b) * PA_X4_REC2;
    pa_f16 hd, hm;
    memcpy(&hd, rec + PA_X4_D2 + 2 * r, 2);
    memcpy(&hm, rec + PA_X4_D2 + 8 + 2 * r, 2);
    const float d = pa_f16_to_f32(hd), dmin = pa_f16_to_f32(hm);
    for (int p = 0; p < 4; p++) {
      const int l = 4 * r + p;
      for (int i = 0; i < 8; i++)
        for (int e = 0; e < 4; e++)
          for (int hh = 0; hh < 2; hh++) {
            /* the file's dequantizer: (d * sc) * u - dmin * m */
            const uint8_t scm = rec[PA_X4_SCM2 + 16 * (2 * hh + i / 4) + l];
            const float dl = d * (float)(scm & 0xF), ml = dmin * (float)(scm >> 4);
            out[b * QK_K + x4_col(p, i, e, hh)] = dl * (float)x4_q2(rec, i, l, e, hh) - ml;
          }
    }
  }
}

/* Q2_K's specification (x4.h), one token at a time. */
static void run_q2k(int64_t cols, const uint8_t *wg, const uint8_t *const *xp, int nt, float *y,
                    int64_t ldy, const pa_prefetch *stream) {
  (void)stream;
  const int64_t nsb = cols / QK_K;
  for (int t = 0; t < nt; t++) {
    float acc[16] = {0};
    for (int64_t b = 0; b < nsb; b++) {
      const uint8_t *w = wg + (size_t)b * PA_X4_REC2, *x = xp[t] + (size_t)b * PA_X4_XREC6;
      float dx;
      memcpy(&dx, x + PA_X4_XD6, 4);
      for (int l = 0; l < 16; l++) {
        const int r = l / 4, p = l % 4;
        pa_f16 hd, hm;
        memcpy(&hd, w + PA_X4_D2 + 2 * r, 2);
        memcpy(&hm, w + PA_X4_D2 + 8 + 2 * r, 2);
        int32_t dot[4] = {0};
        for (int i = 0; i < 8; i++)
          for (int e = 0; e < 4; e++)
            for (int hh = 0; hh < 2; hh++)
              dot[2 * hh + i / 4] +=
                  x4_q2(w, i, l, e, hh) * (int8_t)x[32 * i + 16 * hh + 4 * p + e];
        int32_t S = 0, M = 0;
        for (int k = 0; k < 4; k++) {
          int16_t bs;
          memcpy(&bs, x + PA_X4_XBS6 + 2 * (4 * p + k), 2);
          const uint8_t scm = w[PA_X4_SCM2 + 16 * k + l];
          S += (int32_t)(scm & 0xF) * dot[k];
          M += (int32_t)(scm >> 4) * bs;
        }
        acc[l] = fmaf((float)S, pa_f16_to_f32(hd) * dx, acc[l]);
        acc[l] = fmaf(-(float)M, pa_f16_to_f32(hm) * dx, acc[l]);
      }
    }
    for (int r = 0; r < 4; r++)
      y[t * ldy + r] = (acc[4 * r] + acc[4 * r + 1]) + (acc[4 * r + 2] + acc[4 * r + 3]);
  }
}

/* Q6_K and Q3_K, whose records share lanes, columns and arithmetic (x4.h):
 * value, offset, scale and d places. */
typedef struct {
  int (*u)(const uint8_t *rec, int i, int l, int e, int hh);
  int off;
  size_t rec, sc, d;
} s16_kind;

static const s16_kind kind_q6k = {x4_q6, 32, PA_X4_REC6, PA_X4_SC6, PA_X4_D6};
static const s16_kind kind_q3k = {x4_q3, 4, PA_X4_REC3, PA_X4_SC3, PA_X4_D3};

static void get_row_s16(const s16_kind *kd, const pa_matrix *w, int64_t row, float *out) {
  const int64_t nsb = w->cols / QK_K, g = row / 4;
  const int r = (int)(row % 4);
  const uint8_t *data = w->data;
  for (int64_t b = 0; b < nsb; b++) {
    const uint8_t *rec = data + (size_t)(g * nsb + b) * kd->rec;
    pa_f16 hd;
    memcpy(&hd, rec + kd->d + 2 * r, 2);
    const float d = pa_f16_to_f32(hd);
    for (int p = 0; p < 4; p++) {
      const int l = 4 * r + p;
      for (int i = 0; i < 8; i++)
        for (int e = 0; e < 4; e++)
          for (int hh = 0; hh < 2; hh++) {
            /* the file's dequantizers: (d * scale) * value */
            const float dl = d * (float)(int8_t)rec[kd->sc + 16 * (2 * hh + i / 4) + l];
            out[b * QK_K + x4_col(p, i, e, hh)] = dl * (float)(kd->u(rec, i, l, e, hh) - kd->off);
          }
    }
  }
}

size_t pa_x4_bytes(pa_type type, int64_t rows, int64_t cols) {
  return (size_t)(rows / 4) * (size_t)(cols / QK_K) * pa_x4_rec(type);
}

/* The fifth bit of element k of sub-block s in a Q5_K super-block's qh, as
 * its mask bit in a record: mask 2 i + h, bit 4 l + e (x4.h). */
static void set_qh_bits(uint8_t *rec, const uint8_t *qh, int r) {
  for (int p = 0; p < 4; p++)
    for (int h = 0; h < 2; h++)
      for (int i = 0; i < 8; i++)
        for (int e = 0; e < 4; e++) {
          const int s = 2 * p + h, k = 4 * i + e, bit = 4 * (4 * r + p) + e;
          if ((qh[k] >> s) & 1)
            rec[PA_X4_QH + 8 * (2 * i + h) + bit / 8] |= (uint8_t)(1u << (bit % 8));
        }
}

void pa_x4_repack(pa_type type, int64_t cols, const void *src, void *dst, int64_t n_groups) {
  if (type == PA_TYPE_Q3_K) {
    repack_q3k(cols, src, dst, n_groups);
    return;
  }
  if (type == PA_TYPE_Q2_K) {
    repack_q2k(cols, src, dst, n_groups);
    return;
  }
  if (type == PA_TYPE_Q6_K) {
    repack_q6k(cols, src, dst, n_groups);
    return;
  }
  const int64_t nsb = cols / QK_K;
  const bool q5 = type == PA_TYPE_Q5_K;
  const size_t in_size = q5 ? sizeof(block_q5_K) : sizeof(block_q4_K), rec_size = pa_x4_rec(type);
  const uint8_t *in = src;
  uint8_t *out = dst;
  for (int64_t g = 0; g < n_groups; g++)
    for (int64_t b = 0; b < nsb; b++) {
      uint8_t *rec = out + (size_t)(g * nsb + b) * rec_size;
      if (q5) memset(rec + PA_X4_QH, 0, PA_X4_REC5 - PA_X4_QH);
      for (int r = 0; r < 4; r++) {
        /* Q4_K and Q5_K share d, dmin and the scales; Q5_K's qh comes
         * before its qs */
        const uint8_t *blk = in + ((size_t)(4 * g + r) * (size_t)nsb + (size_t)b) * in_size;
        const uint8_t *scales = blk + 4, *qs = blk + (q5 ? 48 : 16);
        uint8_t sc[8], m[8];
        for (int j = 0; j < 8; j++) pa_get_scale_min_k4(j, scales, &sc[j], &m[j]);
        for (int p = 0; p < 4; p++) {
          const int l = 4 * r + p;
          /* byte j of pair p holds element j of sub-blocks 2p (low) and
           * 2p + 1 (high) already: only the order of the bytes changes */
          for (int i = 0; i < 8; i++)
            memcpy(rec + PA_X4_QS + 64 * i + 4 * l, qs + 32 * p + 4 * i, 4);
          rec[PA_X4_SC + l] = sc[2 * p];
          rec[PA_X4_SC + 16 + l] = sc[2 * p + 1];
          rec[PA_X4_MN + 2 * l] = m[2 * p];
          rec[PA_X4_MN + 2 * l + 1] = m[2 * p + 1];
        }
        memcpy(rec + PA_X4_DM + 2 * r, blk, 2);
        memcpy(rec + PA_X4_DM + 8 + 2 * r, blk + 2, 2);
        if (q5) set_qh_bits(rec, blk + 16, r);
      }
    }
}

/* Value e of vector i, lane l, half h of a record: the 4-bit quant, with
 * Q5_K's fifth bit. */
static int x4_quant(const uint8_t *rec, bool q5, int i, int l, int e, int h) {
  const uint8_t q = rec[PA_X4_QS + 64 * i + 4 * l + e];
  int v = h ? q >> 4 : q & 0x0F;
  if (q5) {
    const int bit = 4 * l + e;
    v |= ((rec[PA_X4_QH + 8 * (2 * i + h) + bit / 8] >> (bit % 8)) & 1) << 4;
  }
  return v;
}

void pa_x4_get_row(const pa_matrix *w, int64_t row, float *out) {
  if (w->type == PA_TYPE_Q2_K) {
    get_row_q2k(w, row, out);
    return;
  }
  if (w->type == PA_TYPE_Q6_K || w->type == PA_TYPE_Q3_K) {
    get_row_s16(w->type == PA_TYPE_Q6_K ? &kind_q6k : &kind_q3k, w, row, out);
    return;
  }
  const int64_t nsb = w->cols / QK_K, g = row / 4;
  const int r = (int)(row % 4);
  const bool q5 = w->type == PA_TYPE_Q5_K;
  const size_t rec_size = pa_x4_rec(w->type);
  const uint8_t *data = w->data;
  for (int64_t b = 0; b < nsb; b++) {
    const uint8_t *rec = data + (size_t)(g * nsb + b) * rec_size;
    pa_f16 hd, hm;
    memcpy(&hd, rec + PA_X4_DM + 2 * r, 2);
    memcpy(&hm, rec + PA_X4_DM + 8 + 2 * r, 2);
    const float d = pa_f16_to_f32(hd), dmin = pa_f16_to_f32(hm);
    for (int p = 0; p < 4; p++) {
      const int l = 4 * r + p;
      for (int h = 0; h < 2; h++) {
        /* the file's reference dequantizer computes d * sc, dmin * m first */
        const float ds = d * (float)rec[PA_X4_SC + 16 * h + l];
        const float dm = dmin * (float)rec[PA_X4_MN + 2 * l + h];
        float *o = out + b * QK_K + 32 * (2 * p + h);
        for (int i = 0; i < 8; i++)
          for (int e = 0; e < 4; e++) o[4 * i + e] = ds * (float)x4_quant(rec, q5, i, l, e, h) - dm;
      }
    }
  }
}

size_t pa_x4_x_size(int64_t cols) {
  return (size_t)(cols / QK_K) * PA_X4_XREC;
}

void pa_x4_pack_x(int64_t cols, const void *xq, void *xp) {
  const block_q8_K *x = xq;
  uint8_t *out = xp;
  for (int64_t b = 0; b < cols / QK_K; b++) {
    uint8_t *rec = out + (size_t)b * PA_X4_XREC;
    for (int i = 0; i < 8; i++)
      for (int h = 0; h < 2; h++)
        for (int p = 0; p < 4; p++)
          memcpy(rec + 32 * i + 16 * h + 4 * p, x[b].qs + 64 * p + 32 * h + 4 * i, 4);
    for (int s = 0; s < 8; s++) { /* sub-block s = 2p + h: xs[p][h] */
      const int16_t sum = (int16_t)(x[b].bsums[2 * s] + x[b].bsums[2 * s + 1]);
      memcpy(rec + PA_X4_XS + 2 * s, &sum, 2);
    }
    memcpy(rec + PA_X4_XD, &x[b].d, 4);
    memset(rec + PA_X4_XD + 4, 0, PA_X4_XREC - PA_X4_XD - 4);
  }
}

size_t pa_x4_x_size6(int64_t cols) {
  return (size_t)(cols / QK_K) * PA_X4_XREC6;
}

void pa_x4_pack_x6(int64_t cols, const void *xq, void *xp) {
  const block_q8_K *x = xq;
  uint8_t *out = xp;
  for (int64_t b = 0; b < cols / QK_K; b++) {
    uint8_t *rec = out + (size_t)b * PA_X4_XREC6;
    pa_x4_pack_x(QK_K, &x[b], rec); /* xq, then what Q6_K replaces */
    memcpy(rec + PA_X4_XBS6, x[b].bsums, 32);
    memcpy(rec + PA_X4_XD6, &x[b].d, 4);
    memset(rec + PA_X4_XD6 + 4, 0, PA_X4_XREC6 - PA_X4_XD6 - 4);
  }
}

/* Q6_K's and Q3_K's specification (x4.h), one token at a time. */
static void run_s16(const s16_kind *kd, int64_t cols, const uint8_t *wg, const uint8_t *const *xp,
                    int nt, float *y, int64_t ldy) {
  const int64_t nsb = cols / QK_K;
  for (int t = 0; t < nt; t++) {
    float acc[16] = {0};
    for (int64_t b = 0; b < nsb; b++) {
      const uint8_t *w = wg + (size_t)b * kd->rec, *x = xp[t] + (size_t)b * PA_X4_XREC6;
      float dx;
      memcpy(&dx, x + PA_X4_XD6, 4);
      for (int l = 0; l < 16; l++) {
        const int r = l / 4, p = l % 4;
        pa_f16 hd;
        memcpy(&hd, w + kd->d + 2 * r, 2);
        int32_t dot[4] = {0};
        for (int i = 0; i < 8; i++)
          for (int e = 0; e < 4; e++)
            for (int hh = 0; hh < 2; hh++)
              dot[2 * hh + i / 4] +=
                  kd->u(w, i, l, e, hh) * (int8_t)x[32 * i + 16 * hh + 4 * p + e];
        int32_t S = 0;
        for (int k = 0; k < 4; k++) {
          int16_t bs;
          memcpy(&bs, x + PA_X4_XBS6 + 2 * (4 * p + k), 2);
          S += (int32_t)(int8_t)w[kd->sc + 16 * k + l] * (dot[k] - kd->off * (int32_t)bs);
        }
        acc[l] = fmaf((float)S, pa_f16_to_f32(hd) * dx, acc[l]);
      }
    }
    for (int r = 0; r < 4; r++)
      y[t * ldy + r] = (acc[4 * r] + acc[4 * r + 1]) + (acc[4 * r + 2] + acc[4 * r + 3]);
  }
}

static void run_q6k(int64_t cols, const uint8_t *wg, const uint8_t *const *xp, int nt, float *y,
                    int64_t ldy, const pa_prefetch *stream) {
  (void)stream;
  run_s16(&kind_q6k, cols, wg, xp, nt, y, ldy);
}
static void run_q3k(int64_t cols, const uint8_t *wg, const uint8_t *const *xp, int nt, float *y,
                    int64_t ldy, const pa_prefetch *stream) {
  (void)stream;
  run_s16(&kind_q3k, cols, wg, xp, nt, y, ldy);
}

/* The specification (x4.h): one token at a time, the steps in order. */
static void run_ref(pa_type type, int64_t cols, const uint8_t *wg, const uint8_t *const *xp, int nt,
                    float *y, int64_t ldy) {
  const int64_t nsb = cols / QK_K;
  const bool q5 = type == PA_TYPE_Q5_K;
  const size_t rec_size = pa_x4_rec(type);
  for (int t = 0; t < nt; t++) {
    float acc[16] = {0};
    for (int64_t b = 0; b < nsb; b++) {
      const uint8_t *w = wg + (size_t)b * rec_size, *x = xp[t] + (size_t)b * PA_X4_XREC;
      float dx, dr[4], mr[4];
      memcpy(&dx, x + PA_X4_XD, 4);
      for (int r = 0; r < 4; r++) {
        pa_f16 hd, hm;
        memcpy(&hd, w + PA_X4_DM + 2 * r, 2);
        memcpy(&hm, w + PA_X4_DM + 8 + 2 * r, 2);
        dr[r] = pa_f16_to_f32(hd);
        mr[r] = pa_f16_to_f32(hm);
      }
      for (int l = 0; l < 16; l++) {
        const int r = l / 4, p = l % 4;
        int32_t lo = 0, hi = 0;
        for (int i = 0; i < 8; i++)
          for (int e = 0; e < 4; e++) {
            const int32_t ql = x4_quant(w, q5, i, l, e, 0), qh = x4_quant(w, q5, i, l, e, 1);
            lo += ql * (int8_t)x[32 * i + 4 * p + e];
            hi += (q5 ? qh : qh << 4) * (int8_t)x[32 * i + 16 + 4 * p + e]; /* Q4_K: 16x */
          }
        int16_t xs0, xs1;
        memcpy(&xs0, x + PA_X4_XS + 4 * p, 2);
        memcpy(&xs1, x + PA_X4_XS + 4 * p + 2, 2);
        const int32_t mi =
            (int32_t)w[PA_X4_MN + 2 * l] * xs0 + (int32_t)w[PA_X4_MN + 2 * l + 1] * xs1;
        float v = (float)lo * ((float)w[PA_X4_SC + l] * dr[r]);
        v = fmaf((float)hi, (float)w[PA_X4_SC + 16 + l] * (q5 ? dr[r] : dr[r] * 0.0625f), v);
        v = fmaf(-(float)mi, mr[r], v);
        acc[l] = fmaf(v, dx, acc[l]);
      }
    }
    for (int r = 0; r < 4; r++)
      y[t * ldy + r] = (acc[4 * r] + acc[4 * r + 1]) + (acc[4 * r + 2] + acc[4 * r + 3]);
  }
}

static void run_q4k(int64_t cols, const uint8_t *wg, const uint8_t *const *xp, int nt, float *y,
                    int64_t ldy, const pa_prefetch *stream) {
  (void)stream;
  run_ref(PA_TYPE_Q4_K, cols, wg, xp, nt, y, ldy);
}
static void run_q5k(int64_t cols, const uint8_t *wg, const uint8_t *const *xp, int nt, float *y,
                    int64_t ldy, const pa_prefetch *stream) {
  (void)stream;
  run_ref(PA_TYPE_Q5_K, cols, wg, xp, nt, y, ldy);
}

const pa_ilv_kernel pa_x4_q4k_ref = {4, PA_X4_TOKENS, pa_x4_x_size, pa_x4_pack_x, run_q4k, NULL};
const pa_ilv_kernel pa_x4_q5k_ref = {4, PA_X4_TOKENS, pa_x4_x_size, pa_x4_pack_x, run_q5k, NULL};
const pa_ilv_kernel pa_x4_q6k_ref = {4, PA_X4_TOKENS, pa_x4_x_size6, pa_x4_pack_x6, run_q6k, NULL};
const pa_ilv_kernel pa_x4_q3k_ref = {4, PA_X4_TOKENS, pa_x4_x_size6, pa_x4_pack_x6, run_q3k, NULL};
const pa_ilv_kernel pa_x4_q2k_ref = {4, PA_X4_TOKENS, pa_x4_x_size6, pa_x4_pack_x6, run_q2k, NULL};
