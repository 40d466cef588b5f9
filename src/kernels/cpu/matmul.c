/* matmul.c: y = W x over the thread pool, for any weight type, with the
 * current kernel table; and the row dequantizer.
 *
 * Ceilings (the numbers this code is judged against; bench/kernels/):
 * - The dev machine: 2 Sapphire Rapids cores with AVX-512 VNNI, ~2.7 GHz
 *   as seen by one thread, shared with other workloads.
 * - Decode (one token) reads every weight byte once per token, so it is
 *   memory-bound at best: time >= bytes(W) / bandwidth. A streaming read
 *   of a fresh 64 MB buffer gave one thread 2-5 GB/s on this (loaded) VM
 *   and a quiet Sapphire Rapids core gives roughly 20-30 GB/s; so the
 *   kernels must consume a 32-weight Q4 block (18-20 bytes) in ~2 cycles
 *   for one thread to keep up. Measured with the weights in L2 (one thread,
 *   avx512_vnni table): Q4_1 ~17-20 GB/s, Q8_0 ~23-25, Q5_0 ~11-14,
 *   Q4_K ~13-16, Q6_K ~19-21 (avx2 table: 9-12, 15-20, 6-8, 10-12, 17-19).
 *   The kernels are therefore still the limit on one core; two cores
 *   reach a quiet machine's DRAM bandwidth for the 8-bit and 6-bit types.
 * - Int8 dots (vpdpbusd, or pmaddubsw + pmaddwd) on whole blocks with one
 *   float multiply per block; for 32-element blocks what depends on the
 *   activations alone (their scales and sums) is prepared once per token
 *   (pa_vec_dot_xs_fn) rather than once per weight row.
 * - Activations are quantized once per call (Q8_0/Q8_1/Q8_K, ~1.1 bytes
 *   per element per token) and stay in L1/L2 while weight rows stream by.
 * - Prefill (many tokens) could reuse each weight block across tokens from
 *   registers; here a block of 16 rows stays in cache while every token
 *   uses it, a tiling, not yet a GEMM kernel (a later issue). */
#include <sched.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <string.h>

#include "base/base.h"
#include "kernels/kernels.h"

/* Rows per thread come in multiples of this, so two threads never write
 * the same 64-byte line of y (16 floats). */
#define ROW_GRAIN 16
/* Rows whose weights stay in cache while all tokens pass over them. */
#define ROW_BLOCK 16
/* Activations of fewer elements than this (all tokens) are quantized by the
 * calling thread before the others start: for a decode step that is a few
 * hundred nanoseconds, less than the barrier a split would need. */
#define SPLIT_QUANTIZE_MIN 16384

typedef struct {
  const pa_cpu_kernels *k;
  const pa_matrix *w;
  const float *x;
  int64_t x_stride; /* floats */
  float *y;
  int64_t y_stride; /* floats */
  int64_t n_tokens;
  pa_type vt;    /* activation type of the dot products */
  void *work;    /* quantized activations, n_tokens rows */
  size_t xq_row; /* bytes per quantized activation row */
  float *xs;     /* per token 2 * nb floats (pa_vec_dot_xs_fn), or NULL */
  pa_vec_dot_xs_fn dot_xs;
  bool split_quantize;  /* threads quantize their shares, then meet */
  atomic_int quantized; /* threads done quantizing */
} matmul_job;

/* Activation types whose rows also get per-block float scales and sums. */
static bool has_x_sums(pa_type vt) { return vt == PA_TYPE_Q8_0 || vt == PA_TYPE_Q8_1; }

/* Bytes of the quantized rows, rounded up so that the sums that follow
 * them are aligned. */
static size_t xq_bytes(pa_type vt, int64_t cols, int64_t n_tokens) {
  return ((size_t)n_tokens * pa_row_size(vt, cols) + 63) & ~(size_t)63;
}

size_t pa_matmul_work_size(const pa_matrix *w, int64_t n_tokens) {
  const pa_type_traits *t = pa_type_get(w->type);
  if (!t || n_tokens <= 0) return 0;
  const pa_type vt = t->vec_dot_type;
  if (vt == PA_TYPE_F32) return 0; /* x is used in place */
  size_t size = xq_bytes(vt, w->cols, n_tokens);
  if (has_x_sums(vt)) size += (size_t)n_tokens * 2 * (size_t)(w->cols / 32) * sizeof(float) + 64;
  return size;
}

/* This thread's share of the activation blocks (all tokens laid end to
 * end), so that a one-token decode also splits its quantization. */
static void quantize_share(matmul_job *j, int ith, int nth) {
  const int64_t bs = pa_type_get(j->vt)->block_size;
  const int64_t nb = j->w->cols / bs; /* blocks per token */
  const size_t bbytes = pa_type_get(j->vt)->type_size;
  long lo, hi;
  pa_split((long)(nb * j->n_tokens), ith, nth, &lo, &hi);
  pa_quantize_row_fn quantize = j->k->quantize_row[j->vt];
  while (lo < hi) {
    const int64_t t = lo / nb, b0 = lo % nb;
    const int64_t b1 = (hi - t * nb) < nb ? (hi - t * nb) : nb;
    uint8_t *xq = (uint8_t *)j->work + t * j->xq_row + b0 * bbytes;
    quantize(j->x + t * j->x_stride + b0 * bs, xq, (b1 - b0) * bs);
    if (j->xs) {
      float *xs = j->xs + t * 2 * nb;
      pa_prepare_x_sums(j->vt, xq, (b1 - b0) * bs, xs + b0, xs + nb + b0);
    }
    lo = t * nb + b1;
  }
}

/* All threads wait until every thread has quantized its share. */
static void wait_quantized(matmul_job *j, int nth) {
  atomic_fetch_add_explicit(&j->quantized, 1, memory_order_acq_rel);
  int spins = 0;
  while (atomic_load_explicit(&j->quantized, memory_order_acquire) < nth) {
    if (++spins > 20000) sched_yield();
#if defined(__x86_64__)
    else
      __builtin_ia32_pause();
#endif
  }
}

static void matmul_thread(void *arg, int ith, int nth) {
  matmul_job *j = arg;
  const pa_matrix *w = j->w;
  const uint8_t *xq;
  size_t xq_stride;
  if (j->vt == PA_TYPE_F32) {
    xq = (const uint8_t *)j->x;
    xq_stride = (size_t)j->x_stride * sizeof(float);
  } else {
    if (j->split_quantize) {
      quantize_share(j, ith, nth);
      if (nth > 1) wait_quantized(j, nth);
    }
    xq = j->work;
    xq_stride = j->xq_row;
  }

  long lo, hi;
  pa_split((long)((w->rows + ROW_GRAIN - 1) / ROW_GRAIN), ith, nth, &lo, &hi);
  const int64_t r_begin = lo * ROW_GRAIN;
  const int64_t r_end = hi * ROW_GRAIN < w->rows ? hi * ROW_GRAIN : w->rows;
  const size_t w_row = pa_row_size(w->type, w->cols);
  const uint8_t *wd = w->data;
  const pa_vec_dot_fn dot = j->k->vec_dot[w->type];

  for (int64_t r0 = r_begin; r0 < r_end; r0 += ROW_BLOCK) {
    const int64_t r1 = r0 + ROW_BLOCK < r_end ? r0 + ROW_BLOCK : r_end;
    for (int64_t t = 0; t < j->n_tokens; t++) {
      const uint8_t *xt = xq + (size_t)t * xq_stride;
      float *yt = j->y + t * j->y_stride;
      if (j->dot_xs) {
        const float *xs = j->xs + t * 2 * (w->cols / 32);
        for (int64_t r = r0; r < r1; r++)
          j->dot_xs(w->cols, &yt[r], wd + (size_t)r * w_row, xt, xs);
      } else {
        for (int64_t r = r0; r < r1; r++) dot(w->cols, &yt[r], wd + (size_t)r * w_row, xt);
      }
    }
  }
}

void pa_matmul(pa_pool *pool, const pa_matrix *w, const float *x, int64_t x_stride, float *y,
               int64_t y_stride, int64_t n_tokens, void *work) {
  const pa_type_traits *t = pa_type_get(w->type);
  if (!t || n_tokens <= 0 || w->rows <= 0) return;
  matmul_job j = {
      .k = pa_kernels_current(),
      .w = w,
      .x = x,
      .x_stride = x_stride,
      .y = y,
      .y_stride = y_stride,
      .n_tokens = n_tokens,
      .vt = t->vec_dot_type,
      .work = work,
      .xq_row = pa_row_size(t->vec_dot_type, w->cols),
  };
  if (has_x_sums(j.vt)) {
    j.dot_xs = pa_kernels_vec_dot_xs(j.k, w->type);
    if (j.dot_xs) { /* floats after the quantized rows, 64-byte aligned whatever work is */
      const uintptr_t at = (uintptr_t)work + xq_bytes(j.vt, w->cols, n_tokens);
      j.xs = (float *)((at + 63) & ~(uintptr_t)63);
    }
  }
  atomic_init(&j.quantized, 0);
  if (j.vt != PA_TYPE_F32) {
    j.split_quantize = pa_pool_size(pool) > 1 && n_tokens * w->cols >= SPLIT_QUANTIZE_MIN;
    if (!j.split_quantize) quantize_share(&j, 0, 1);
  }
  pa_pool_run(pool, matmul_thread, &j);
}

void pa_matrix_get_row(const pa_matrix *w, int64_t r, float *out) {
  const pa_type_traits *t = pa_type_get(w->type);
  const size_t row = pa_row_size(w->type, w->cols);
  t->to_float((const uint8_t *)w->data + (size_t)r * row, out, w->cols);
}
