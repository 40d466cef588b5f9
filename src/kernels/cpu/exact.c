/* exact.c: the matrix product of the plain reference path used by `verify`
 * and the parity tests: weights dequantized to F32 row by row (the traits'
 * reference to_float), activations kept in F32 (no 8-bit quantization),
 * sums in double. Slow by design: it is the yardstick the fast path is
 * measured against. */
#include "base/base.h"
#include "kernels/kernels.h"

typedef struct {
  const pa_matrix *w;
  const float *x;
  int64_t x_stride;
  float *y;
  int64_t y_stride, n_tokens;
  float *rows; /* [nth][cols] */
} exact_job;

/* Eight partial sums in double (a fixed order, so the same inputs give the
 * same bits): the rounding error is far below float's, and the independent
 * chains run ~8x faster than one. Compiled also for AVX2 and AVX-512
 * (picked at load time): the wider the vectors, the less the yardstick
 * costs; FMA contraction may change the last bits between machines, far
 * below what verify and the parity tests resolve. */
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__) /* ThreadSanitizer is not up when ifunc resolvers run */
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
static double dot_double(const float *a, const float *b, int64_t n) {
  double s[8] = {0};
  int64_t c = 0;
  for (; c + 8 <= n; c += 8)
    for (int k = 0; k < 8; k++) s[k] += (double)a[c + k] * (double)b[c + k];
  for (; c < n; c++) s[0] += (double)a[c] * (double)b[c];
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

static void exact_worker(void *arg, int ith, int nth) {
  exact_job *j = arg;
  const pa_type_traits *tr = pa_type_get(j->w->type);
  const size_t rs = pa_row_size(j->w->type, j->w->cols);
  float *row = j->rows + (size_t)ith * (size_t)j->w->cols;
  long lo, hi;
  pa_split((long)j->w->rows, ith, nth, &lo, &hi);
  for (long r = lo; r < hi; r++) {
    if (j->w->layout == PA_LAYOUT_ROWS)
      tr->to_float((const char *)j->w->data + (size_t)r * rs, row, j->w->cols);
    else
      pa_matrix_get_row(j->w, r, row);
    for (int64_t t = 0; t < j->n_tokens; t++) {
      const float *x = j->x + t * j->x_stride;
      j->y[t * j->y_stride + r] = (float)dot_double(row, x, j->w->cols);
    }
  }
}

size_t pa_matmul_exact_work_size(const pa_matrix *w, int n_threads) {
  return (size_t)n_threads * (size_t)w->cols * sizeof(float);
}

void pa_matmul_exact(pa_pool *pool, const pa_matrix *w, const float *x, int64_t x_stride, float *y,
                     int64_t y_stride, int64_t n_tokens, void *work) {
  exact_job j = {.w = w, .x = x, .x_stride = x_stride, .y = y, .y_stride = y_stride,
                 .n_tokens = n_tokens, .rows = work};
  pa_pool_run(pool, exact_worker, &j);
}
