/* test_kernels.c: the CPU kernel tables against their specification.
 *
 * 1. Every SIMD vec_dot against the reference vec_dot on random rows of
 *    awkward lengths. Bound: |simd - ref| <= 1e-5 * M, M = sum_i |x_i| *
 *    (|w_i| + |w0_i|), where w0 is the row with its quant payload zeroed
 *    (the block offsets: -8d, m, -dmin*m...). Every float term either path
 *    adds is at most M in size, and both round each term and each partial
 *    sum to float (~6e-8 relative), so 1e-5 leaves room for long rows.
 *    The int8 paths agree far more closely: their integer sums are exact.
 * 2. Every SIMD activation quantizer against the reference: identical bytes
 *    (both round x * (1/d) to nearest even; a test row is made of ties).
 * 3. The reference vec_dot against dequantize(w) . dequantize(x) in double:
 *    same bound, plus for Q4_1/Q5_1 the rounding of Q8_1's s = d * sum(q)
 *    to fp16 (|m * s| * 2^-10 per block), which dequantized rows lack.
 * 4. pa_matmul with 1, 2, 3 threads, 1, 3, 17, 49 tokens, 37 and 5 rows, strided x
 *    and y, with each table, against a double loop over dequantized weights
 *    and the same quantized activations (reference quantizer), same bound.
 * Returns 0 when all pass; prints each failure with type, n and path. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/threadpool.h"
#include "kernels/kernels.h"
#include "test_util.h"
#include "test_blocks.h"

/* The table under test and its settings (pa_cpu_exec; set_table). */
static pa_cpu_exec test_exec;
static void set_table(const pa_cpu_kernels *k) { pa_cpu_exec_init(&test_exec, k, 0); }
static const pa_cpu_exec *ex(void) {
  if (!test_exec.k) set_table(NULL);
  return &test_exec;
}

static int failures;

static const pa_type weight_types[] = {PA_TYPE_F32,  PA_TYPE_F16,  PA_TYPE_BF16, PA_TYPE_Q4_0,
                                       PA_TYPE_Q4_1, PA_TYPE_Q5_0, PA_TYPE_Q5_1, PA_TYPE_Q8_0,
                                       PA_TYPE_Q2_K, PA_TYPE_Q3_K, PA_TYPE_Q4_K, PA_TYPE_Q5_K,
                                       PA_TYPE_Q6_K, PA_TYPE_IQ4_NL, PA_TYPE_IQ4_XS, PA_TYPE_MXFP4,
                                       PA_TYPE_IQ2_XXS, PA_TYPE_IQ2_XS, PA_TYPE_IQ2_S, PA_TYPE_IQ3_XXS,
                                       PA_TYPE_IQ3_S, PA_TYPE_IQ1_S, PA_TYPE_IQ1_M};
#define N_WEIGHT_TYPES (int)(sizeof weight_types / sizeof weight_types[0])

/* The extra error allowance of Q4_1/Q5_1: sum over blocks |m| * |s| * 2^-10. */
static double min_term_allowance(pa_type type, int64_t n, const uint8_t *w, const uint8_t *xq) {
  if (type != PA_TYPE_Q4_1 && type != PA_TYPE_Q5_1) return 0.0;
  const pa_type_traits *t = pa_type_get(type);
  double sum = 0.0;
  for (int64_t b = 0; b < n / 32; b++) {
    pa_f16 m, s;
    memcpy(&m, w + (size_t)b * t->type_size + 2, 2); /* m follows d in both */
    memcpy(&s, xq + (size_t)b * sizeof(block_q8_1) + offsetof(block_q8_1, s), 2);
    sum += fabs((double)pa_f16_to_f32(m) * pa_f16_to_f32(s)) * (1.0 / 1024.0);
  }
  return sum;
}

static const pa_cpu_kernels *tables[4];
static int n_tables;

static int64_t sizes_for(pa_type type, int64_t out[8]) {
  const pa_type_traits *t = pa_type_get(type);
  if (!t->quantized) {
    const int64_t s[] = {1, 7, 33, 1000, 4096 + 13};
    memcpy(out, s, sizeof s);
    return 5;
  }
  /* 8 and 16 blocks end a SIMD group of 8 exactly at the end of the row */
  const int64_t mult[] = {1, 3, 7, 8, 13, 16};
  for (int i = 0; i < 6; i++) out[i] = t->block_size * mult[i];
  return 6;
}

/* Tests 1 and 3 for one type and one length. */
static void check_vec_dot(pa_type type, int64_t n) {
  const pa_type_traits *t = pa_type_get(type);
  const pa_type vt = t->vec_dot_type;
  const pa_type_traits *vtt = pa_type_get(vt);
  const pa_cpu_kernels *ref = pa_kernels_reference();
  /* exact sizes (malloc, not the rounded-up pa_alloc): under ASan a kernel
   * reading past the end of a row fails here */
  uint8_t *w = malloc(pa_row_size(type, n));
  uint8_t *xq = malloc(vt == PA_TYPE_F32 ? sizeof(float) * (size_t)n : pa_row_size(vt, n));
  float *x = pa_alloc(sizeof(float) * (size_t)n), *xd = pa_alloc(sizeof(float) * (size_t)n);
  float *wd = pa_alloc(sizeof(float) * (size_t)n), *w0 = pa_alloc(sizeof(float) * (size_t)n);
  for (int trial = 0; trial < 4; trial++) {
    random_weights(type, n, w);
    random_floats(x, n);
    ref->quantize_row[vt](x, xq, n);
    vtt->to_float(xq, xd, n);
    dequantize_with_offsets(type, n, w, wd, w0);
    double exact = 0.0, mag = 0.0;
    for (int64_t i = 0; i < n; i++) {
      exact += (double)wd[i] * xd[i];
      mag += fabs((double)xd[i]) * (fabs((double)wd[i]) + fabs((double)w0[i]));
    }
    const double tol = 1e-5 * mag + 1e-30;
    float want;
    ref->vec_dot[type](n, &want, w, xq);
    const double tol3 = tol + min_term_allowance(type, n, w, xq);
    if (!(fabs(want - exact) <= tol3)) {
      printf(
          "FAIL ref-vs-dequant type=%s n=%lld path=scalar: ref %.9g, dequant dot %.9g, tol %.3g\n",
          t->name, (long long)n, want, exact, tol3);
      failures++;
    }
    for (int k = 1; k < n_tables; k++) {
      float got;
      tables[k]->vec_dot[type](n, &got, w, xq);
      if (!(fabs((double)got - want) <= tol)) {
        printf("FAIL vec_dot type=%s n=%lld path=%s: got %.9g, ref %.9g, |diff| %.3g > tol %.3g\n",
               t->name, (long long)n, tables[k]->name, got, want, fabs((double)got - want), tol);
        failures++;
      }
      /* the matmul fast path with prepared activation scales and sums */
      const pa_vec_dot_xs_fn dot_xs = pa_kernels_vec_dot_xs(tables[k], type);
      if (dot_xs) {
        const int64_t nb = n / 32;
        float *xs = malloc(sizeof(float) * 2 * (size_t)nb);
        pa_prepare_x_sums(vt, xq, n, xs, xs + nb);
        dot_xs(n, &got, w, xq, xs);
        if (!(fabs((double)got - want) <= tol)) {
          printf(
              "FAIL vec_dot_xs type=%s n=%lld path=%s: got %.9g, ref %.9g, |diff| %.3g > tol "
              "%.3g\n",
              t->name, (long long)n, tables[k]->name, got, want, fabs((double)got - want), tol);
          failures++;
        }
        free(xs);
      }
    }
  }
  free(w);
  free(xq);
  pa_free(x);
  pa_free(xd);
  pa_free(wd);
  pa_free(w0);
}

/* Test 2 for one activation type, over rows of several lengths: the
 * AVX-512 quantizers take 16 blocks at a time, so lengths of one block,
 * a partial group, exactly a group, a group and one, and several groups
 * with a tail. */
static void check_quantizer(pa_type vt) {
  const pa_type_traits *t = pa_type_get(vt);
  const pa_cpu_kernels *ref = pa_kernels_reference();
  static const int64_t block_counts[] = {1, 5, 16, 17, 37};
  for (size_t c = 0; c < sizeof block_counts / sizeof block_counts[0]; c++) {
    const int64_t n = t->block_size * block_counts[c];
    float *x = pa_alloc(sizeof(float) * (size_t)n);
    const size_t bytes = pa_row_size(vt, n);
    uint8_t *want = pa_alloc(bytes), *got = pa_alloc(bytes);
    for (int trial = 0; trial < 4; trial++) {
      random_floats(x, n);
      if (trial == 1) /* a zero block, then blocks of exact ties: max 127 gives d = 1 */
        for (int64_t i = 0; i < n; i++)
          x[i] = i < t->block_size
                     ? 0.0f
                     : (i % 7 == 0 ? 127.0f : (float)((int)(rng() % 253) - 126) + 0.5f);
      if (trial == 2) /* tiny and huge magnitudes (fp16 subnormal and large scales) */
        for (int64_t i = 0; i < n; i++) x[i] *= (i / t->block_size) % 2 ? 1e-6f : 3e3f;
      ref->quantize_row[vt](x, want, n);
      for (int k = 1; k < n_tables; k++) {
        memset(got, 0xAB, bytes);
        tables[k]->quantize_row[vt](x, got, n);
        if (memcmp(got, want, bytes) != 0) {
          size_t first = 0;
          while (got[first] == want[first]) first++;
          printf(
              "FAIL quantize type=%s n=%lld path=%s trial=%d: bytes differ from offset %zu (block "
              "%zu)\n",
              t->name, (long long)n, tables[k]->name, trial, first, first / t->type_size);
          failures++;
        }
      }
    }
    pa_free(x);
    pa_free(want);
    pa_free(got);
  }
}

/* Test 4 for one weight type, with the table currently set. */
static void check_matmul(pa_type type, int64_t rows, pa_pool **pools, const char *path) {
  const pa_type_traits *t = pa_type_get(type);
  const pa_type vt = t->vec_dot_type;
  const pa_type_traits *vtt = pa_type_get(vt);
  /* 11 blocks of 32: one group of 8 in the SIMD loops, and a tail */
  const int64_t cols = !t->quantized ? 45 : t->block_size == 32 ? 32 * 11 : QK_K * 3;
  const int64_t max_tok = 49, x_stride = cols + 5, y_stride = rows + 3;
  const size_t row_bytes = pa_row_size(type, cols);
  uint8_t *wdata = pa_alloc(row_bytes * (size_t)rows);
  float *wd = pa_alloc(sizeof(float) * (size_t)(rows * cols));
  float *w0 = pa_alloc(sizeof(float) * (size_t)(rows * cols));
  for (int64_t r = 0; r < rows; r++) {
    random_weights(type, cols, wdata + (size_t)r * row_bytes);
    dequantize_with_offsets(type, cols, wdata + (size_t)r * row_bytes, wd + r * cols,
                            w0 + r * cols);
  }
  const pa_matrix m = {.type = type, .rows = rows, .cols = cols, .data = wdata};
  float *x = pa_alloc(sizeof(float) * (size_t)(max_tok * x_stride));
  float *y = pa_alloc(sizeof(float) * (size_t)(max_tok * y_stride));
  float *xd = pa_alloc(sizeof(float) * (size_t)(max_tok * cols));
  uint8_t *xq = pa_alloc(pa_row_size(vt, cols) + 4 * (size_t)cols);
  for (int64_t tk = 0; tk < max_tok; tk++) {
    random_floats(x + tk * x_stride, cols);
    pa_kernels_reference()->quantize_row[vt](x + tk * x_stride, xq, cols);
    vtt->to_float(xq, xd + tk * cols, cols);
  }
  /* get_row gives the dequantized row */
  float *row = pa_alloc(sizeof(float) * (size_t)cols);
  pa_matrix_get_row(&m, rows / 2, row);
  if (memcmp(row, wd + rows / 2 * cols, sizeof(float) * (size_t)cols) != 0) {
    printf("FAIL get_row type=%s\n", t->name);
    failures++;
  }
  /* 49 tokens pass the size above which threads split the quantization */
  const int64_t toks[] = {1, 3, 17, 49};
  for (int p = 0; p < 3; p++)
    for (int ti = 0; ti < 4; ti++) {
      const int64_t nt = toks[ti];
      void *work = pa_alloc(pa_matmul_work_size(&m, nt));
      for (int64_t i = 0; i < max_tok * y_stride; i++) y[i] = -12345.0f;
      pa_matmul(ex(), pools[p], &m, x, x_stride, y, y_stride, nt, work);
      for (int64_t tk = 0; tk < max_tok; tk++)
        for (int64_t r = 0; r < y_stride; r++) {
          const float got = y[tk * y_stride + r];
          if (tk >= nt || r >= rows) {
            if (got != -12345.0f) {
              printf(
                  "FAIL matmul type=%s path=%s threads=%d tokens=%lld: wrote outside y at "
                  "[%lld][%lld]\n",
                  t->name, path, p + 1, (long long)nt, (long long)tk, (long long)r);
              failures++;
            }
            continue;
          }
          double exact = 0.0, mag = 0.0;
          const float *xr = xd + tk * cols;
          for (int64_t c = 0; c < cols; c++) {
            exact += (double)wd[r * cols + c] * xr[c];
            mag += fabs((double)xr[c]) *
                   (fabs((double)wd[r * cols + c]) + fabs((double)w0[r * cols + c]));
          }
          double tol = 1e-5 * mag + 1e-30;
          if (vt == PA_TYPE_Q8_1) {
            pa_kernels_reference()->quantize_row[vt](x + tk * x_stride, xq, cols);
            tol += min_term_allowance(type, cols, wdata + (size_t)r * row_bytes, xq);
          }
          if (!(fabs(got - exact) <= tol)) {
            printf(
                "FAIL matmul type=%s n=%lld path=%s threads=%d tokens=%lld y[%lld][%lld]: got "
                "%.9g, want "
                "%.9g, tol %.3g\n",
                t->name, (long long)cols, path, p + 1, (long long)nt, (long long)tk, (long long)r,
                got, exact, tol);
            failures++;
          }
        }
      pa_free(work);
    }
  pa_free(row);
  pa_free(wdata);
  pa_free(wd);
  pa_free(w0);
  pa_free(x);
  pa_free(y);
  pa_free(xd);
  pa_free(xq);
}

int main(void) {
  test_seed("test_kernels");
  tables[n_tables++] = pa_kernels_reference();
  const pa_cpu_kernels *simd[] = {pa_kernels_avx2(), pa_kernels_avx512(), pa_kernels_avx512_vnni()};
  for (int i = 0; i < 3; i++)
    if (simd[i]) tables[n_tables++] = simd[i];
  printf("cpu: %s; best table: %s; testing:", pa_cpu_describe(), pa_kernels_best()->name);
  for (int k = 0; k < n_tables; k++) printf(" %s", tables[k]->name);
  printf("\n");

  for (int k = 0; k < n_tables; k++)
    for (int i = 0; i < N_WEIGHT_TYPES; i++) {
      const pa_type vt = pa_type_get(weight_types[i])->vec_dot_type;
      if (!tables[k]->vec_dot[weight_types[i]] || !tables[k]->quantize_row[vt]) {
        printf("FAIL table %s lacks type %s\n", tables[k]->name, pa_type_name(weight_types[i]));
        failures++;
      }
    }
  if (failures) return 1;

  for (int i = 0; i < N_WEIGHT_TYPES; i++) {
    int64_t sizes[8];
    const int64_t ns = sizes_for(weight_types[i], sizes);
    for (int64_t s = 0; s < ns; s++) check_vec_dot(weight_types[i], sizes[s]);
  }
  const pa_type acts[] = {PA_TYPE_Q8_0, PA_TYPE_Q8_1, PA_TYPE_Q8_K};
  for (int i = 0; i < 3; i++) check_quantizer(acts[i]);

  pa_pool *pools[3] = {NULL, pa_pool_create(2), pa_pool_create(3)};
  for (int k = 0; k < n_tables; k++) {
    set_table(tables[k]);
    if (ex()->k != tables[k]) {
      printf("FAIL pa_cpu_exec_init(%s) holds another table\n", tables[k]->name);
      failures++;
    }
    /* 37 rows: not a multiple of 16; 5 rows: threads without rows still
     * quantize their share of the activations and meet at the barrier */
    for (int i = 0; i < N_WEIGHT_TYPES; i++) {
      check_matmul(weight_types[i], 37, pools, tables[k]->name);
      check_matmul(weight_types[i], 5, pools, tables[k]->name);
    }
  }
  set_table(NULL);
  if (ex()->k != pa_kernels_best()) {
    printf("FAIL pa_cpu_exec_init(NULL) does not hold the best table\n");
    failures++;
  }
  pa_pool_free(pools[1]);
  pa_pool_free(pools[2]);

  printf("%s: %d failure(s)\n", failures ? "FAIL" : "ok", failures);
  return failures ? 1 : 0;
}
