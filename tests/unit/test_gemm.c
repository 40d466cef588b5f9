/* test_gemm.c: the matrix-matrix path of pa_matmul (prefill, batched
 * decode) against the one-token path and the reference.
 *
 * For every kernel table this CPU has (scalar, avx2, avx512, avx512_vnni,
 * each forced with pa_kernels_set), every weight type, awkward shapes
 * (rows not a multiple of any tile; 32-element rows of k blocks ending in
 * every kind of last group: k mod 16 = 0, 1..8 (the VNNI table's short
 * tails) and 9..15, with and without full groups before; 256 k for
 * K-quants, up to 67 super-blocks so that long rows go through the
 * K-blocked path) and
 * thread pools of 1, 2 and 3 threads:
 * (a) determinism: for batches of 1..37 tokens cut at different places
 *     from a pool of random tokens, each token's outputs are bitwise equal
 *     to those of a one-token call on that token alone (with 1 thread);
 *     nothing outside y's rows and tokens is written (every batch size
 *     where the table has a GEMM kernel for the type, a few elsewhere);
 * (b) the one-token results agree with the scalar reference table's
 *     vec_dot on the same quantized activations, |got - ref| <= 1e-5 * M
 *     with M = sum |x_i| (|w_i| + |w0_i|) (w0: the row with its quant
 *     payload zeroed, i.e. the block offsets), as in test_kernels.c.
 * It also prints which (table, type) pairs have a GEMM kernel, and fails
 * if the AVX-512 tables lack one for the types they are meant to have.
 * Returns 0 when all pass. */
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

#define POOL_TOKENS 40
#define MAX_BATCH 37
#define SENTINEL -12345.0f

static const pa_cpu_kernels *tables[4];
static int n_tables;

static uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

/* One weight type and shape, with the table currently set. */
static void check(pa_type type, int64_t rows, int64_t cols, pa_pool **pools, const char *path) {
  const pa_type_traits *t = pa_type_get(type);
  const pa_type vt = t->vec_dot_type;
  const size_t row_bytes = pa_row_size(type, cols);
  const int64_t x_stride = cols + 3, y_stride = rows + 5;
  uint8_t *wdata = pa_alloc(row_bytes * (size_t)rows);
  float *wd = malloc(sizeof(float) * (size_t)cols), *w0 = malloc(sizeof(float) * (size_t)cols);
  for (int64_t r = 0; r < rows; r++) random_weights(type, cols, wdata + (size_t)r * row_bytes);
  const pa_matrix m = {.type = type, .rows = rows, .cols = cols, .data = wdata};
  float *x = malloc(sizeof(float) * (size_t)(POOL_TOKENS * x_stride));
  for (int64_t k = 0; k < POOL_TOKENS; k++) random_floats(x + k * x_stride, cols);

  /* each token alone, one thread: the outputs every batch must reproduce */
  float *alone = malloc(sizeof(float) * (size_t)(POOL_TOKENS * rows));
  {
    void *work = malloc(pa_matmul_work_size(&m, 1) + 1);
    for (int64_t k = 0; k < POOL_TOKENS; k++)
      pa_matmul(ex(), NULL, &m, x + k * x_stride, x_stride, alone + k * rows, rows, 1, work);
    free(work);
  }

  /* (b) against the reference vec_dot on the same quantized activations */
  const size_t xq_bytes = vt == PA_TYPE_F32 ? sizeof(float) * (size_t)cols : pa_row_size(vt, cols);
  uint8_t *xq = malloc(xq_bytes);
  float *xd = malloc(sizeof(float) * (size_t)cols);
  for (int64_t k = 0; k < POOL_TOKENS; k += 3) {
    pa_kernels_reference()->quantize_row[vt](x + k * x_stride, xq, cols);
    pa_type_get(vt)->to_float(xq, xd, cols);
    for (int64_t r = 0; r < rows; r++) {
      const uint8_t *wr = wdata + (size_t)r * row_bytes;
      float want;
      pa_kernels_reference()->vec_dot[type](cols, &want, wr, xq);
      dequantize_with_offsets(type, cols, wr, wd, w0);
      double mag = 0.0;
      for (int64_t c = 0; c < cols; c++)
        mag += fabs((double)xd[c]) * (fabs((double)wd[c]) + fabs((double)w0[c]));
      const double tol = 1e-5 * mag + 1e-30;
      const float got = alone[k * rows + r];
      if (!(fabs((double)got - want) <= tol)) {
        printf("FAIL ref type=%s cols=%lld path=%s y[%lld][%lld]: got %.9g, ref %.9g, tol %.3g\n",
               t->name, (long long)cols, path, (long long)k, (long long)r, got, want, tol);
        failures++;
      }
    }
  }

  /* (a) batches of every size 1..MAX_BATCH, from varying starts, on 1-3 threads */
  float *y = malloc(sizeof(float) * (size_t)(MAX_BATCH * y_stride));
  void *work = malloc(pa_matmul_work_size(&m, MAX_BATCH) + 1);
  int reported = 0;
  /* every batch size where the table has a GEMM kernel for the type; a few
   * elsewhere (the one-token path then serves every batch) */
  const int has_gemm = pa_kernels_gemm(ex()->k, type) != NULL;
  for (int p = 0; p < 3; p++)
    for (int64_t n = 1; n <= MAX_BATCH; n += has_gemm ? 1 : n < 4 ? 1 : 11) {
      const int64_t start = (int64_t)(rng() % (uint64_t)(POOL_TOKENS - n + 1));
      for (int64_t i = 0; i < MAX_BATCH * y_stride; i++) y[i] = SENTINEL;
      pa_matmul(ex(), pools[p], &m, x + start * x_stride, x_stride, y, y_stride, n, work);
      for (int64_t tk = 0; tk < MAX_BATCH; tk++)
        for (int64_t r = 0; r < y_stride; r++) {
          const float got = y[tk * y_stride + r];
          if (tk >= n || r >= rows) {
            if (bits_of(got) != bits_of(SENTINEL) && reported++ < 5) {
              printf("FAIL type=%s path=%s threads=%d tokens=%lld: wrote outside y at [%lld][%lld]\n",
                     t->name, path, p + 1, (long long)n, (long long)tk, (long long)r);
              failures++;
            }
            continue;
          }
          const float want = alone[(start + tk) * rows + r];
          if (bits_of(got) != bits_of(want) && reported++ < 5) {
            printf(
                "FAIL batch type=%s rows=%lld cols=%lld path=%s threads=%d tokens=%lld "
                "y[%lld][%lld]: %.9g (0x%08x), alone %.9g (0x%08x)\n",
                t->name, (long long)rows, (long long)cols, path, p + 1, (long long)n,
                (long long)tk, (long long)r, got, bits_of(got), want, bits_of(want));
            failures++;
          }
        }
    }
  free(y);
  free(work);
  free(xq);
  free(xd);
  free(alone);
  free(x);
  free(wd);
  free(w0);
  pa_free(wdata);
}

static const pa_type weight_types[] = {
    PA_TYPE_Q4_0,  PA_TYPE_Q4_1,    PA_TYPE_Q5_0,   PA_TYPE_Q5_1,  PA_TYPE_Q8_0,    PA_TYPE_Q4_K,
    PA_TYPE_Q5_K,  PA_TYPE_Q6_K,    PA_TYPE_Q2_K,   PA_TYPE_Q3_K,  PA_TYPE_F16,     PA_TYPE_BF16,
    PA_TYPE_F32,   PA_TYPE_IQ4_NL,  PA_TYPE_IQ4_XS, PA_TYPE_MXFP4, PA_TYPE_IQ2_XXS, PA_TYPE_IQ2_XS,
    PA_TYPE_IQ2_S, PA_TYPE_IQ3_XXS, PA_TYPE_IQ3_S,  PA_TYPE_IQ1_S, PA_TYPE_IQ1_M};
#define N_TYPES (int)(sizeof weight_types / sizeof weight_types[0])

/* The types each AVX-512 table must have a GEMM kernel for. */
static const pa_type avx512_gemm_types[] = {
    PA_TYPE_Q4_0,  PA_TYPE_Q4_1,    PA_TYPE_Q5_0,  PA_TYPE_Q5_1,    PA_TYPE_Q8_0,
    PA_TYPE_Q4_K,  PA_TYPE_Q5_K,    PA_TYPE_Q6_K,  PA_TYPE_IQ2_XXS, PA_TYPE_IQ2_XS,
    PA_TYPE_IQ2_S, PA_TYPE_IQ3_XXS, PA_TYPE_IQ3_S, PA_TYPE_IQ1_S,   PA_TYPE_IQ1_M};

int main(void) {
  test_seed("test_gemm");
  tables[n_tables++] = pa_kernels_reference();
  const pa_cpu_kernels *simd[] = {pa_kernels_avx2(), pa_kernels_avx512(), pa_kernels_avx512_vnni()};
  for (int i = 0; i < 3; i++)
    if (simd[i]) tables[n_tables++] = simd[i];
  printf("cpu: %s; GEMM kernels:", pa_cpu_describe());
  for (int k = 0; k < n_tables; k++) {
    printf(" %s[", tables[k]->name);
    for (int i = 0; i < N_TYPES; i++)
      if (pa_kernels_gemm(tables[k], weight_types[i]))
        printf(" %s", pa_type_name(weight_types[i]));
    printf(" ]");
  }
  printf("\n");
  for (int i = 1; i <= 2; i++) {
    const pa_cpu_kernels *tk = simd[i];
    if (!tk) continue;
    for (size_t j = 0; j < sizeof avx512_gemm_types / sizeof avx512_gemm_types[0]; j++)
      if (!pa_kernels_gemm(tk, avx512_gemm_types[j])) {
        printf("FAIL table %s has no GEMM kernel for %s\n", tk->name,
               pa_type_name(avx512_gemm_types[j]));
        failures++;
      }
  }

  pa_pool *pools[3] = {NULL, pa_pool_create(2), pa_pool_create(3)};
  for (int k = 0; k < n_tables; k++) {
    set_table(tables[k]);
    for (int i = 0; i < N_TYPES; i++) {
      const pa_type type = weight_types[i];
      const pa_type_traits *t = pa_type_get(type);
      if (!t->quantized) { /* one shape: these have no GEMM kernel of their own yet */
        check(type, 21, 45, pools, tables[k]->name);
        continue;
      }
      if (t->block_size == 32) {
        /* last groups of 1, 2, 3, 4, 5, 7, 8 blocks (AVX-512 VNNI: the short
         * tail), 9 and 15 (padded to 16), alone, after one full group of 16
         * and (41) after two; 16 and 32: none */
        const int64_t ks[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 18, 19, 20, 21, 23, 24, 25, 31, 32, 41};
        const int64_t rs[] = {37, 13, 6, 9, 7, 10, 5, 6, 11, 7, 7, 70, 5, 9, 6, 5, 13, 6, 5, 6, 19};
        for (int s = 0; s < (int)(sizeof ks / sizeof ks[0]); s++)
          check(type, rs[s], 32 * ks[s], pools, tables[k]->name);
      } else {
        const int64_t ks[] = {1, 3, 5};
        const int64_t rs[] = {37, 70, 6};
        for (int s = 0; s < 3; s++) check(type, rs[s], QK_K * ks[s], pools, tables[k]->name);
        /* long rows, cut into chunks by the K-blocked path (the last one
         * partial); 4 rows of 67 super-blocks (Q4_K) or 57 (Q6_K) hold
         * more than a 96 KB whole-row panel. The 57 with token blocks of 6,
         * so that batches span several blocks and end in partial ones.
         * (Only where the table has a GEMM kernel for the type.) */
        if (!pa_kernels_gemm(tables[k], type)) continue;
        pa_matmul_set_gemm_token_block(6);
        check(type, 13, QK_K * 57, pools, tables[k]->name);
        pa_matmul_set_gemm_token_block(0);
        check(type, 5, QK_K * 67, pools, tables[k]->name);
      }
    }
  }
  set_table(NULL);
  pa_pool_free(pools[1]);
  pa_pool_free(pools[2]);

  printf("%s: %d failure(s)\n", failures ? "FAIL" : "ok", failures);
  return failures ? 1 : 0;
}
