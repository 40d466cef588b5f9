/* test_threadpool.c: the pool's jobs and the products built on them.
 *
 * (a) Every task of a job runs exactly once, with n = n_tasks, for pools of
 *     1-4 threads and jobs of 1 to 1000 tasks, thousands of jobs in a row
 *     (the ticket's hand-over between jobs), with tasks of uneven length
 *     (some sleep, so workers arrive late or find the job over), and after
 *     pauses long enough for the workers to sleep on the futex.
 * (b) pa_matmul_multi gives each output the bits pa_matmul gives it alone,
 *     and pa_matmul_gated the bits of two pa_matmul calls and the gate
 *     function over the whole rows, for every kernel table this CPU has,
 *     weight types sharing or not their activation type and GEMM kernel
 *     (so the one-job route and the fallback's job per matrix, in one pool
 *     job or in one each, all run), 1-9 tokens and
 *     1-3 threads, on random weights and activations (never zeros).
 * (c) pa_matmul_multi_fused and pa_matmul_gated_fused (kernels.h,
 *     pa_matmul_fuse) give the bits of pa_rmsnorm, then the plain products,
 *     then the epilogue's work over the whole rows; the epilogue sees every
 *     row of every output exactly once, in ranges on the grain; for matrices
 *     in the file's layout and repacked, the same tables, threads and
 *     1-20 tokens; pa_matmul_can_norm refuses F32 and F16 weights (their
 *     products read x as floats) and rows longer than PA_MATMUL_NORM_COLS.
 * Returns 0 when all pass. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/base.h"
#include "base/threadpool.h"
#include "kernels/kernels.h"
#include "kernels/layout.h"
#include "kernels/ops.h"
#include "test_util.h"
#include "test_check.h"

/* The table under test and its settings (pa_cpu_exec; set_table). */
static pa_cpu_exec test_exec;
static void set_table(const pa_cpu_kernels *k) { pa_cpu_exec_init(&test_exec, k, 0); }
static const pa_cpu_exec *ex(void) {
  if (!test_exec.k) set_table(NULL);
  return &test_exec;
}

static float rnd(void) { return (float)rnd_unit() * 2.0f - 1.0f; }

/* ---- (a) the pool ---- */

#define MAX_TASKS 1000
typedef struct {
  atomic_int runs[MAX_TASKS];
  atomic_int bad_n;
  int n_tasks;
  int sleepy; /* every 7th task sleeps this many microseconds */
} count_job;

static void count_task(void *arg, int i, int n) {
  count_job *j = arg;
  if (n != j->n_tasks || i < 0 || i >= n) {
    atomic_fetch_add(&j->bad_n, 1);
    return;
  }
  if (j->sleepy && i % 7 == 3) {
    struct timespec ts = {0, j->sleepy * 1000L};
    nanosleep(&ts, NULL);
  }
  atomic_fetch_add(&j->runs[i], 1);
}

static void run_and_check(pa_pool *pool, count_job *j, int n_tasks, int sleepy, const char *what) {
  for (int i = 0; i < MAX_TASKS; i++) atomic_store(&j->runs[i], 0);
  atomic_store(&j->bad_n, 0);
  j->n_tasks = n_tasks;
  j->sleepy = sleepy;
  pa_pool_run_tasks(pool, count_task, j, n_tasks);
  int wrong = 0;
  for (int i = 0; i < n_tasks; i++) wrong += atomic_load(&j->runs[i]) != 1;
  CHECK(wrong == 0 && atomic_load(&j->bad_n) == 0, "%s: %d threads, %d tasks: %d tasks not run once, %d bad calls",
        what, pa_pool_size(pool), n_tasks, wrong, atomic_load(&j->bad_n));
}

static void test_pool(void) {
  static count_job j;
  static const int sizes[] = {1, 2, 3, 4, 7, 64, 1000};
  for (int nth = 1; nth <= 4; nth++) {
    pa_pool *pool = pa_pool_create(nth);
    CHECK(pool && pa_pool_size(pool) == nth, "pool of %d threads", nth);
    if (!pool) continue;
    for (int rep = 0; rep < 3000; rep++) /* back to back: the hand-over between jobs */
      run_and_check(pool, &j, sizes[rep % 7], 0, "back to back");
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) /* late workers */
      run_and_check(pool, &j, sizes[s] > 64 ? 64 : sizes[s], 200, "uneven tasks");
    for (int rep = 0; rep < 3; rep++) { /* the workers fall asleep between jobs */
      struct timespec ts = {0, 60 * 1000000L};
      nanosleep(&ts, NULL);
      run_and_check(pool, &j, 5, 0, "after a pause");
    }
    pa_pool_run(pool, count_task, &j); /* one task per thread */
    pa_pool_free(pool);
  }
  run_and_check(NULL, &j, 9, 0, "no pool");
}

/* ---- (b) the fused products ---- */

static void fill_matrix(pa_type type, int64_t rows, int64_t cols, void **data) {
  const pa_type_traits *t = pa_type_get(type);
  const size_t row = pa_row_size(type, cols);
  uint8_t *p = pa_alloc(row * (size_t)rows);
  float *f = pa_alloc(sizeof(float) * (size_t)cols);
  for (int64_t r = 0; r < rows; r++) {
    for (int64_t c = 0; c < cols; c++) f[c] = rnd() * (1.0f + (float)(r % 5));
    t->from_float(f, p + (size_t)r * row, cols);
  }
  pa_free(f);
  *data = p;
}

static size_t most_work(const pa_matrix *const *m, int n, int64_t tokens) {
  size_t w = 0;
  for (int i = 0; i < n; i++) {
    size_t s = pa_matmul_work_size(m[i], tokens);
    if (s > w) w = s;
  }
  return w + 64;
}

/* q/k/v-like triple of types (cols shared), rows of each */
static void test_multi(const pa_pool *const *pools, const pa_type types[3], int64_t cols,
                       const int64_t rows[3]) {
  pa_matrix w[3];
  for (int i = 0; i < 3; i++) {
    void *d;
    fill_matrix(types[i], rows[i], cols, &d);
    w[i] = (pa_matrix){.type = types[i], .rows = rows[i], .cols = cols, .data = d};
  }
  const pa_matrix *wp[3] = {&w[0], &w[1], &w[2]};
  const int64_t T = 9;
  float *x = pa_alloc(sizeof(float) * (size_t)(T * cols));
  for (int64_t i = 0; i < T * cols; i++) x[i] = rnd();
  void *work = pa_alloc(most_work(wp, 3, T));
  float *alone[3], *fused[3];
  for (int i = 0; i < 3; i++) {
    alone[i] = pa_alloc(sizeof(float) * (size_t)(T * rows[i]));
    fused[i] = pa_alloc(sizeof(float) * (size_t)(T * rows[i]));
  }
  for (int p = 0; p < 3; p++) {
    pa_pool *pool = (pa_pool *)pools[p];
    for (int64_t n = 1; n <= T; n += (n < 5 ? 1 : 4)) {
      for (int i = 0; i < 3; i++) {
        pa_matmul(ex(), pool, &w[i], x, cols, alone[i], rows[i], n, work);
        memset(fused[i], 0xFF, sizeof(float) * (size_t)(T * rows[i]));
      }
      pa_matmul_out outs[3];
      for (int i = 0; i < 3; i++) outs[i] = (pa_matmul_out){&w[i], fused[i], rows[i]};
      pa_matmul_multi(ex(), pool, outs, 3, x, cols, n, work);
      for (int i = 0; i < 3; i++)
        CHECK(!memcmp(alone[i], fused[i], sizeof(float) * (size_t)(n * rows[i])),
              "multi %s/%s/%s table %s, %d threads, %lld tokens: output %d differs from pa_matmul",
              pa_type_name(types[0]), pa_type_name(types[1]), pa_type_name(types[2]),
              ex()->k->name, pa_pool_size(pool), (long long)n, i);
    }
  }
  /* gated: matrices 0 and 1 made the same shape (rows[0]) */
  pa_matrix g = w[0], u = w[1];
  u.rows = g.rows < w[1].rows ? g.rows : w[1].rows;
  g.rows = u.rows;
  const int64_t R = g.rows;
  float *h = pa_alloc(sizeof(float) * (size_t)(T * R)), *hu = pa_alloc(sizeof(float) * (size_t)(T * R));
  float *eg = pa_alloc(sizeof(float) * (size_t)(T * R)), *eu = pa_alloc(sizeof(float) * (size_t)(T * R));
  for (int p = 0; p < 3; p++) {
    pa_pool *pool = (pa_pool *)pools[p];
    for (int64_t n = 1; n <= T; n += (n < 5 ? 1 : 4)) {
      for (int act = 0; act < 2; act++) {
        pa_gate_fn fn = act ? pa_gelu_tanh_mul : pa_silu_mul;
        pa_matmul(ex(), pool, &g, x, cols, eg, R, n, work);
        pa_matmul(ex(), pool, &u, x, cols, eu, R, n, work);
        fn(eg, eu, n * R);
        pa_matmul_gated(ex(), pool, &g, &u, fn, x, cols, h, hu, R, n, work);
        CHECK(!memcmp(eg, h, sizeof(float) * (size_t)(n * R)),
              "gated %s/%s %s, table %s, %d threads, %lld tokens: differs from matmul + gate",
              pa_type_name(g.type), pa_type_name(u.type), act ? "gelu" : "silu", ex()->k->name,
              pa_pool_size(pool), (long long)n);
      }
    }
  }
  pa_free(h), pa_free(hu), pa_free(eg), pa_free(eu);
  for (int i = 0; i < 3; i++) {
    pa_free((void *)w[i].data);
    pa_free(alone[i]);
    pa_free(fused[i]);
  }
  pa_free(x);
  pa_free(work);
}

/* ---- (c) fused norm and epilogue ---- */

#define FUSE_T 20
typedef struct {
  float *y[3];
  int64_t rows[3], grain;
  atomic_int *seen[3]; /* per row: times the epilogue covered it */
  atomic_int off_grain;
} epi_job;

/* an element-wise change the epilogue makes (the reference does it after) */
static float epi_value(float v, int m, int64_t r) {
  return v * 0.75f + (float)(m + 1) - (float)(r % 3);
}

static void test_epi(void *arg, int m, int64_t r0, int64_t r1) {
  epi_job *e = arg;
  if (r0 % e->grain || (r1 % e->grain && r1 != e->rows[m]) || r0 >= r1 || r1 > e->rows[m])
    atomic_fetch_add(&e->off_grain, 1);
  for (int64_t r = r0; r < r1 && r < e->rows[m]; r++) atomic_fetch_add(&e->seen[m][r], 1);
  for (int t = 0; t < FUSE_T; t++)
    for (int64_t r = r0; r < r1 && r < e->rows[m]; r++)
      e->y[m][t * e->rows[m] + r] = epi_value(e->y[m][t * e->rows[m] + r], m, r);
}

/* Matrix i of types[i] (rows[i] x cols), in the file's layout or repacked
 * into the layout the loader would give it. */
static pa_matrix make_matrix(pa_type type, int64_t rows, int64_t cols, bool repack) {
  void *d;
  fill_matrix(type, rows, cols, &d);
  pa_matrix w = {.type = type, .rows = rows, .cols = cols, .data = d};
  const pa_layout to = repack ? pa_layout_for(type, rows, cols) : PA_LAYOUT_ROWS;
  if (to != PA_LAYOUT_ROWS) {
    void *dst = pa_alloc(pa_layout_bytes(to, type, rows, cols));
    pa_layout_repack(to, type, cols, d, dst, rows / pa_layout_group_rows(to));
    pa_free(d);
    w.data = dst;
    w.layout = to;
  }
  return w;
}

static void test_fused(const pa_pool *const *pools, const pa_type types[3], int64_t cols,
                       const int64_t rows[3], int64_t grain, bool repack) {
  pa_matrix w[3];
  for (int i = 0; i < 3; i++) w[i] = make_matrix(types[i], rows[i], cols, repack);
  const pa_matrix *wp[3] = {&w[0], &w[1], &w[2]};
  for (int i = 0; i < 3; i++)
    CHECK(pa_matmul_can_norm(&w[i]), "can_norm %s", pa_type_name(types[i]));
  float *x = pa_alloc(sizeof(float) * (size_t)(FUSE_T * cols)),
        *xn = pa_alloc(sizeof(float) * (size_t)(FUSE_T * cols));
  float *nw = pa_alloc(sizeof(float) * (size_t)cols);
  for (int64_t i = 0; i < FUSE_T * cols; i++) x[i] = rnd() * 3.0f;
  for (int64_t i = 0; i < cols; i++) nw[i] = 0.5f + rnd();
  const float eps = 1e-5f;
  void *work = pa_alloc(most_work(wp, 3, FUSE_T));
  float *ref[3], *got[3];
  epi_job e = {.grain = grain};
  for (int i = 0; i < 3; i++) {
    ref[i] = pa_alloc(sizeof(float) * (size_t)(FUSE_T * rows[i]));
    got[i] = pa_alloc(sizeof(float) * (size_t)(FUSE_T * rows[i]));
    e.y[i] = got[i];
    e.rows[i] = rows[i];
    e.seen[i] = calloc((size_t)rows[i], sizeof(atomic_int));
  }
  const int64_t counts[] = {1, 2, 5, 16, 20};
  for (int p = 0; p < 3; p++) {
    pa_pool *pool = (pa_pool *)pools[p];
    for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
      const int64_t n = counts[ci];
      for (int64_t t = 0; t < n; t++) pa_rmsnorm(xn + t * cols, x + t * cols, nw, cols, eps);
      pa_matmul_out outs[3];
      for (int i = 0; i < 3; i++) {
        pa_matmul(ex(), pool, &w[i], xn, cols, ref[i], rows[i], n, work);
        for (int64_t t = 0; t < n; t++)
          for (int64_t r = 0; r < rows[i]; r++)
            ref[i][t * rows[i] + r] = epi_value(ref[i][t * rows[i] + r], i, r);
        memset(got[i], 0xFF, sizeof(float) * (size_t)(FUSE_T * rows[i]));
        for (int64_t r = 0; r < rows[i]; r++) atomic_store(&e.seen[i][r], 0);
        outs[i] = (pa_matmul_out){&w[i], got[i], rows[i]};
      }
      atomic_store(&e.off_grain, 0);
      /* the epilogue edits tokens [0, FUSE_T) of its rows: those past n
       * are 0xFF garbage on both sides, compared only up to n */
      const pa_matmul_fuse f = {
          .norm_w = nw, .norm_eps = eps, .epi = test_epi, .epi_arg = &e, .grain = grain};
      pa_matmul_multi_fused(ex(), pool, outs, 3, x, cols, n, work, &f);
      for (int i = 0; i < 3; i++) {
        CHECK(!memcmp(ref[i], got[i], sizeof(float) * (size_t)(n * rows[i])),
              "fused %s/%s/%s %s, table %s, %d threads, %lld tokens, grain %lld: output %d differs "
              "from "
              "norm + products + epilogue",
              pa_type_name(types[0]), pa_type_name(types[1]), pa_type_name(types[2]),
              repack ? "repacked" : "file layout", ex()->k->name, pa_pool_size(pool),
              (long long)n, (long long)grain, i);
        int bad = 0;
        for (int64_t r = 0; r < rows[i]; r++) bad += atomic_load(&e.seen[i][r]) != 1;
        CHECK(!bad, "fused: %d rows of output %d not covered exactly once by the epilogue", bad, i);
      }
      CHECK(!atomic_load(&e.off_grain), "fused: %d epilogue ranges off the grain %lld",
            atomic_load(&e.off_grain), (long long)grain);
      /* gated, norm only: matrices 0 and 1 at the shape they share */
      pa_matrix g = w[0], u = w[1];
      if (g.rows == u.rows) {
        const int64_t R = g.rows;
        pa_matmul_gated(ex(), pool, &g, &u, pa_silu_mul, xn, cols, ref[0], ref[1], R, n, work);
        const pa_matmul_fuse fn = {.norm_w = nw, .norm_eps = eps};
        pa_matmul_gated_fused(ex(), pool, &g, &u, pa_silu_mul, x, cols, got[0], got[1], R, n, work, &fn);
        CHECK(!memcmp(ref[0], got[0], sizeof(float) * (size_t)(n * R)),
              "gated fused %s/%s %s, table %s, %d threads, %lld tokens: differs from norm + gated",
              pa_type_name(g.type), pa_type_name(u.type), repack ? "repacked" : "file layout",
              ex()->k->name, pa_pool_size(pool), (long long)n);
      }
    }
  }
  for (int i = 0; i < 3; i++) {
    pa_free((void *)w[i].data);
    pa_free(ref[i]);
    pa_free(got[i]);
    free(e.seen[i]);
  }
  pa_free(x), pa_free(xn), pa_free(nw), pa_free(work);
}

static void test_can_norm(void) {
  pa_matrix f32 = {.type = PA_TYPE_F32, .rows = 16, .cols = 64}, f16 = f32;
  f16.type = PA_TYPE_F16;
  CHECK(!pa_matmul_can_norm(&f32),
        "can_norm: F32 weights take x as it is, no quantization to fuse into");
  CHECK(!pa_matmul_can_norm(&f16), "can_norm: F16 weights take x as floats too");
  pa_matrix wide = {.type = PA_TYPE_Q8_0, .rows = 16, .cols = PA_MATMUL_NORM_COLS + 32};
  CHECK(!pa_matmul_can_norm(&wide), "can_norm: rows longer than PA_MATMUL_NORM_COLS");
  pa_matrix ok = {.type = PA_TYPE_Q8_0, .rows = 16, .cols = PA_MATMUL_NORM_COLS};
  CHECK(pa_matmul_can_norm(&ok), "can_norm: Q8_0 of PA_MATMUL_NORM_COLS columns");
}

int main(void) {
  test_seed("test_threadpool");
  test_pool();
  const pa_pool *pools[3] = {NULL, pa_pool_create(2), pa_pool_create(3)};
  const pa_cpu_kernels *tabs[] = {pa_kernels_reference(), pa_kernels_avx2(), pa_kernels_avx512(),
                                  pa_kernels_avx512_vnni()};
  for (size_t k = 0; k < sizeof tabs / sizeof tabs[0]; k++) {
    if (!tabs[k]) continue;
    set_table(tabs[k]);
    /* shared type (one job); shared activation type, different GEMM kernels
     * (one job for 1-3 tokens, fallback from 4); different activation types */
    test_multi(pools, (pa_type[3]){PA_TYPE_Q4_1, PA_TYPE_Q4_1, PA_TYPE_Q4_1}, 576, (int64_t[3]){576, 200, 200});
    test_multi(pools, (pa_type[3]){PA_TYPE_Q5_0, PA_TYPE_Q5_0, PA_TYPE_Q8_0}, 640, (int64_t[3]){1024, 256, 256});
    test_multi(pools, (pa_type[3]){PA_TYPE_Q4_K, PA_TYPE_Q4_K, PA_TYPE_Q6_K}, 512, (int64_t[3]){520, 136, 136});
    test_multi(pools, (pa_type[3]){PA_TYPE_Q4_0, PA_TYPE_Q4_K, PA_TYPE_F16}, 512, (int64_t[3]){64, 48, 33});
    /* fused: heads of 64 (SmolLM2's q/k/v), of 80 (grain 80), of 256 */
    for (int rp = 0; rp < 2; rp++) {
      test_fused(pools, (pa_type[3]){PA_TYPE_Q4_1, PA_TYPE_Q4_1, PA_TYPE_Q4_1}, 576,
                 (int64_t[3]){576, 192, 192}, 64, rp);
      test_fused(pools, (pa_type[3]){PA_TYPE_Q8_0, PA_TYPE_Q8_0, PA_TYPE_Q8_0}, 640,
                 (int64_t[3]){640, 160, 160}, 80, rp);
      test_fused(pools, (pa_type[3]){PA_TYPE_Q4_K, PA_TYPE_Q4_K, PA_TYPE_Q6_K}, 512,
                 (int64_t[3]){1024, 256, 256}, 256, rp);
      test_fused(pools, (pa_type[3]){PA_TYPE_Q5_0, PA_TYPE_Q4_0, PA_TYPE_Q8_0}, 256,
                 (int64_t[3]){256, 64, 48}, 16, rp);
    }
  }
  test_can_norm();
  set_table(NULL);
  pa_pool_free((pa_pool *)pools[1]);
  pa_pool_free((pa_pool *)pools[2]);
  if (failures) {
    fprintf(stderr, "test_threadpool: %d failures\n", failures);
    return 1;
  }
  printf("test_threadpool: all passed\n");
  return 0;
}
