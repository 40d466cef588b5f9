/* bench_kernels.c: decode-shaped matmul speed (one token, a ~64 MB weight
 * matrix) per weight type and kernel table, in GB/s of weights streamed.
 * Not a test. Build after the library (scripts/build release: build/):
 *   cc -O2 -Iinclude -Isrc bench/kernels/bench_kernels.c build/libpasada_internal.a build/libpasada.a \
 *      -lcjson -lpcre2-8 -lpthread -lm -ldl -o build-kern/bench_kernels
 *   build-kern/bench_kernels [threads] [MB] [types...]   (e.g. 1 64 Q4_1 Q8_0)
 *   build-kern/bench_kernels [threads] shapes   (the default models' matrices)
 *   build-kern/bench_kernels [threads] vsread [MB] [types...]
 *      (one token through ~MB (256) of weights against a plain AVX2 read
 *      of the same bytes on the same threads, alternated 15 times: the
 *      median ratio; BENCH_ILV=1 for the layouts the loader gives;
 *      BENCH_COLS=N: rows of N columns instead of 4096; BENCH_HUGE=1: the
 *      weights in 2 MB pages, as the loader maps a model's)
 *   build-kern/bench_kernels [threads] seq [TOKENS] [type] [rows] [cols] [N] [passes]
 *      (TOKENS (16) through N (60) distinct matrices in turn, as a model's
 *      layers, against N products on one cache-resident matrix: Q4_1 1536
 *      x 576 by default, SmolLM2's gate and up; with BENCH_ILV=1 as loaded)
 *   build-kern/bench_kernels [threads] layers [LAYERS] [ROUNDS]
 *      (one token through LAYERS (16) layers of the Llama-3.2-1B shape in
 *      Q4_K_M's types, the four product jobs a layer runs, against plain
 *      reads of the same matrices in the same jobs and one plain read of
 *      as many bytes, alternated ROUNDS (9) times: medians; BENCH_ILV=1
 *      BENCH_HUGE=1 as the loader gives them)
 *   build-kern/bench_kernels [threads] gemm [TOKENS] [types...] [cols...]
 *      (prefill-shaped: GOP/s of TOKENS tokens (512) at once through
 *      1024-row matrices of a few column counts (576 .. 14336, or those
 *      given), per SIMD table (BENCH_TABLE=avx512_vnni: that one only);
 *      default: every GEMM type; BENCH_ROWS=N: N rows instead of 1024,
 *      to read the weights from beyond L2) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/threadpool.h"
#include "kernels/kernels.h"
#include "kernels/layout.h"
#include "tools/bench.h"

static uint64_t rng_state = 88172645463325252ULL;
static uint64_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

/* A random value in [-1, 1], in steps of 0.001. */
static float rand_unit(void) {
  return (float)((int)(rng() % 2001) - 1000) * 1e-3f;
}

/* n random activations (rand_unit), pa_alloc'd. */
static float *random_floats(int64_t n) {
  float *x = pa_alloc(sizeof(float) * (size_t)n);
  for (int64_t i = 0; x && i < n; i++) x[i] = rand_unit();
  return x;
}

/* Random payload; every 16-bit word that could be a scale is set to a sane
 * fp16 value by sweeping with the block stride (scales sit at fixed block
 * offsets; other bytes stay random). */
static void fill(pa_type type, uint8_t *p, size_t bytes) {
  const pa_type_traits *t = pa_type_get(type);
  if (!t->quantized) {
    if (type == PA_TYPE_F32) {
      for (size_t i = 0; i + 4 <= bytes; i += 4) {
        float f = rand_unit();
        memcpy(p + i, &f, 4);
      }
    } else {
      for (size_t i = 0; i + 2 <= bytes; i += 2) {
        float f = rand_unit();
        uint16_t h = type == PA_TYPE_F16 ? pa_f32_to_f16(f) : pa_f32_to_bf16(f);
        memcpy(p + i, &h, 2);
      }
    }
    return;
  }
  for (size_t i = 0; i < bytes; i++) p[i] = (uint8_t)rng();
  /* overwrite every fp16 scale field with 0.01: a reference dequantize of
   * one zeroed block tells where they are is overkill; the known offsets: */
  size_t offs[2] = {0, 2};
  int nf = 1;
  switch (type) {
    case PA_TYPE_Q4_1:
    case PA_TYPE_Q5_1:
    case PA_TYPE_Q4_K:
    case PA_TYPE_Q5_K:
      nf = 2;
      break;
    case PA_TYPE_Q2_K:
      offs[0] = 80;
      offs[1] = 82;
      nf = 2;
      break;
    case PA_TYPE_Q3_K:
      offs[0] = 108;
      break;
    case PA_TYPE_Q6_K:
      offs[0] = 208;
      break;
    default:
      break;
  }
  const uint16_t h = pa_f32_to_f16(0.01f);
  for (size_t b = 0; b + t->type_size <= bytes; b += t->type_size)
    for (int k = 0; k < nf; k++) memcpy(p + b + offs[k], &h, 2);
}

/* BENCH_CPUTIME=1: every mode times by the process's CPU time, not the
 * wall clock (steadier on a shared machine; divide by the threads). */
#include <time.h>

/* The table under test and its settings (pa_cpu_exec; set_table). */
static pa_cpu_exec test_exec;
static void set_table(const pa_cpu_kernels *k) { pa_cpu_exec_init(&test_exec, k, 0); }
static const pa_cpu_exec *ex(void) {
  if (!test_exec.k) set_table(NULL);
  return &test_exec;
}
static double bench_time(void) {
  static int cpu = -1;
  if (cpu < 0) cpu = getenv("BENCH_CPUTIME") && atoi(getenv("BENCH_CPUTIME"));
  if (!cpu) return pa_time_s();
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The type named `name` (pa_type_name), or PA_TYPE_COUNT. */
static pa_type type_named(const char *name) {
  for (int t = 0; t < PA_TYPE_COUNT; t++)
    if (pa_type_get(t) && !strcmp(pa_type_name(t), name)) return (pa_type)t;
  return PA_TYPE_COUNT;
}

/* BENCH_ILV=1: matrices are repacked into the interleaved layout their
 * type and shape take (kernels/layout.h), as the loader does; *w becomes
 * the repacked copy. */
/* Weight memory: pa_alloc, or with BENCH_HUGE=1 2 MB pages (pa_map_huge),
 * as the loader gives a model's weights. */
static struct {
  void *p;
  size_t n;
} huge_maps[4096];

static uint8_t *weights_alloc(size_t bytes) {
  if (!getenv("BENCH_HUGE") || !atoi(getenv("BENCH_HUGE"))) return pa_alloc(bytes);
  for (int i = 0; i < 4096; i++)
    if (!huge_maps[i].p) {
      uint8_t *p = pa_map_huge(bytes);
      huge_maps[i].p = p, huge_maps[i].n = bytes;
      return p;
    }
  return pa_alloc(bytes); /* the table is full: small pages */
}

static void weights_free(void *p) {
  for (int i = 0; p && i < 4096; i++)
    if (huge_maps[i].p == p) {
      pa_unmap_huge(p, huge_maps[i].n);
      huge_maps[i].p = NULL;
      return;
    }
  pa_free(p);
}

static void maybe_ilv(pa_matrix *m, uint8_t **w) {
  const pa_layout to = pa_layout_for(m->type, m->rows, m->cols);
  if (!getenv("BENCH_ILV") || !atoi(getenv("BENCH_ILV")) || to == PA_LAYOUT_ROWS) return;
  uint8_t *p = weights_alloc(pa_layout_bytes(to, m->type, m->rows, m->cols));
  pa_layout_repack(to, m->type, m->cols, *w, p, m->rows / pa_layout_group_rows(to));
  weights_free(*w);
  *w = p;
  m->data = p;
  m->layout = to;
}

/* A random rows x cols matrix of `type` (fill), as loaded with BENCH_ILV=1
 * (maybe_ilv); *w: its bytes, to pa_free. */
static void random_matrix(pa_matrix *m, uint8_t **w, pa_type type, int64_t rows, int64_t cols) {
  const size_t bytes = pa_row_size(type, cols) * (size_t)rows;
  *w = weights_alloc(bytes);
  fill(type, *w, bytes);
  *m = (pa_matrix){.type = type, .rows = rows, .cols = cols, .data = *w};
  maybe_ilv(m, w);
}

/* n_tokens tokens through one random `rows` x `cols` matrix of `type`:
 * the best time of reps runs (after one untimed run). */
static double best_seconds(pa_pool *pool, pa_type type, int64_t rows, int64_t cols,
                           int64_t n_tokens, int reps) {
  pa_matrix m;
  uint8_t *w;
  random_matrix(&m, &w, type, rows, cols);
  float *x = random_floats(cols * n_tokens);
  float *y = pa_alloc(sizeof(float) * (size_t)(rows * n_tokens));
  void *work = pa_alloc(pa_matmul_work_size(&m, n_tokens) + 64);
  pa_matmul(ex(), pool, &m, x, cols, y, rows, n_tokens, work);
  double best = 1e30;
  for (int r = 0; r < reps; r++) {
    double t0 = bench_time();
    pa_matmul(ex(), pool, &m, x, cols, y, rows, n_tokens, work);
    double dt = bench_time() - t0;
    if (dt < best) best = dt;
  }
  weights_free(w);
  pa_free(x);
  pa_free(y);
  pa_free(work);
  return best;
}

/* A decode-shaped case: ~mb MB of random `type` weights in rows of 4096
 * (as loaded, with BENCH_ILV=1), one token's activations, its output and
 * work area; bytes: the matrix's bytes as stored. */
typedef struct {
  pa_matrix m;
  uint8_t *w;
  float *x, *y;
  void *work;
  size_t bytes;
} decode_case;

static void decode_case_make(decode_case *d, pa_type type, double mb) {
  const char *env = getenv("BENCH_COLS");
  const int64_t cols = env && atoll(env) >= 256 ? atoll(env) / 256 * 256 : 4096;
  const int64_t rows = (int64_t)(mb * 1048576.0 / (double)pa_row_size(type, cols)) / 16 * 16;
  random_matrix(&d->m, &d->w, type, rows, cols);
  d->bytes = pa_matrix_bytes(&d->m);
  d->x = random_floats(cols);
  d->y = pa_alloc(sizeof(float) * (size_t)rows);
  d->work = pa_alloc(pa_matmul_work_size(&d->m, 1) + 64);
}

static void decode_case_run(const decode_case *d, pa_pool *pool) {
  pa_matmul(ex(), pool, &d->m, d->x, d->m.cols, d->y, d->m.rows, 1, d->work);
}

static void decode_case_free(decode_case *d) {
  weights_free(d->w), pa_free(d->x), pa_free(d->y), pa_free(d->work);
}

/* One matrix, decode (one token): best GB/s of weights over reps runs. */
static double bench_one(pa_pool *pool, pa_type type, int64_t rows, int64_t cols, int reps) {
  const size_t bytes = pa_row_size(type, cols) * (size_t)rows;
  return (double)bytes / best_seconds(pool, type, rows, cols, 1, reps) / 1e9;
}

/* The matrices of SmolLM2-135M (Q4_1 + Q8_0 output) and gemma-3-270m
 * (Q4_K_M: Q5_0, Q4_K, Q6_K, Q8_0 output): type, cols, rows. */
static void bench_shapes(pa_pool *pool) {
  static const struct {
    pa_type type;
    int64_t cols, rows;
    const char *what;
  } shapes[] = {
      {PA_TYPE_Q4_1, 576, 576, "smollm q/o"},      {PA_TYPE_Q4_1, 576, 1536, "smollm gate/up"},
      {PA_TYPE_Q4_1, 1536, 576, "smollm down"},    {PA_TYPE_Q8_0, 576, 49152, "smollm output"},
      {PA_TYPE_Q5_0, 640, 1024, "gemma q"},        {PA_TYPE_Q5_0, 640, 2048, "gemma gate/up"},
      {PA_TYPE_Q4_K, 1024, 640, "gemma o"},        {PA_TYPE_Q6_K, 2048, 640, "gemma down"},
      {PA_TYPE_Q8_0, 640, 262144, "gemma output"},
  };
  const pa_cpu_kernels *tabs[] = {pa_kernels_avx2(), pa_kernels_avx512(), pa_kernels_avx512_vnni()};
  printf("%-16s %-5s %6s %7s %8s", "matrix", "type", "cols", "rows", "MB");
  for (int k = 0; k < 3; k++)
    if (tabs[k]) printf(" %12s", tabs[k]->name);
  printf("   (GB/s)\n");
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    const double mb =
        (double)pa_row_size(shapes[i].type, shapes[i].cols) * (double)shapes[i].rows / 1048576.0;
    printf("%-16s %-5s %6lld %7lld %8.2f", shapes[i].what, pa_type_name(shapes[i].type),
           (long long)shapes[i].cols, (long long)shapes[i].rows, mb);
    for (int k = 0; k < 3; k++) {
      if (!tabs[k]) continue;
      set_table(tabs[k]);
      printf(" %12.2f",
             bench_one(pool, shapes[i].type, shapes[i].rows, shapes[i].cols, mb < 8 ? 300 : 15));
      fflush(stdout);
    }
    printf("\n");
  }
  set_table(NULL);
}

/* Prefill / batched decode: n_tokens tokens through one matrix of `rows` x
 * `cols`, best GOP/s (2 rows cols n_tokens / time) over reps runs. */
static double bench_gemm(pa_pool *pool, pa_type type, int64_t rows, int64_t cols,
                         int64_t n_tokens, int reps) {
  return 2.0 * (double)rows * (double)cols * (double)n_tokens /
         best_seconds(pool, type, rows, cols, n_tokens, reps) / 1e9;
}

static void gemm_mode(pa_pool *pool, int64_t n_tokens, int n_args, char **args) {
  const char *all[] = {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K"};
  /* numbers among the names: the column counts instead of these */
  int64_t cols[16] = {576, 640, 1536, 2048, 4096, 8192, 14336};
  size_t n_cols = 7;
  char *names[16];
  int n_names = 0, own_cols = 0;
  for (int i = 0; i < n_args; i++) {
    if (args[i][0] >= '0' && args[i][0] <= '9') {
      if (!own_cols++) n_cols = 0;
      if (n_cols < 16) cols[n_cols++] = atoll(args[i]);
    } else if (n_names < 16) {
      names[n_names++] = args[i];
    }
  }
  const int64_t rows = getenv("BENCH_ROWS") ? atoll(getenv("BENCH_ROWS")) : 1024;
  /* BENCH_TABLE=name: that table only */
  const char *only = getenv("BENCH_TABLE");
  const pa_cpu_kernels *tabs[] = {pa_kernels_avx2(), pa_kernels_avx512(), pa_kernels_avx512_vnni(),
                                  pa_kernels_amx()};
  for (int k = 0; k < 4; k++)
    if (only && tabs[k] && strcmp(tabs[k]->name, only)) tabs[k] = NULL;
  printf("%-6s %6s", "type", "cols");
  for (int k = 0; k < 4; k++)
    if (tabs[k]) printf(" %12s", tabs[k]->name);
  printf("   (GOP/s, %lld tokens, %lld rows)\n", (long long)n_tokens, (long long)rows);
  const int n_types = n_names ? n_names : (int)(sizeof all / sizeof all[0]);
  for (int ni = 0; ni < n_types; ni++) {
    const char *name = n_names ? names[ni] : all[ni];
    const pa_type type = type_named(name);
    if (type == PA_TYPE_COUNT) continue;
    for (size_t c = 0; c < n_cols; c++) {
      if (cols[c] % pa_type_get(type)->block_size) continue; /* K-quants: 256-column rows */
      printf("%-6s %6lld", name, (long long)cols[c]);
      for (int k = 0; k < 4; k++) {
        if (!tabs[k]) continue;
        set_table(tabs[k]);
        const int reps = n_tokens >= 128 ? 5 : 60;
        printf(" %12.1f", bench_gemm(pool, type, rows, cols[c], n_tokens, reps));
        fflush(stdout);
      }
      printf("\n");
    }
  }
  set_table(NULL);
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* A model's shape of work: TOKENS tokens through N distinct rows x cols
 * matrices in turn (N x the matrix's bytes, beyond the caches, as a decode
 * step of many users reads its layers), against the same N products on one
 * matrix (cache-resident). Median GOP/s of `passes` passes each. */
static void seq_mode(pa_pool *pool, int64_t n_tokens, const char *name, int64_t rows, int64_t cols,
                     int n_mats, int passes) {
  const pa_type type = type_named(name);
  if (type == PA_TYPE_COUNT || n_mats < 1 || passes < 1) {
    fprintf(stderr, "bench_kernels seq: unknown type %s or bad counts\n", name);
    return;
  }
  pa_matrix *m = calloc((size_t)n_mats, sizeof *m);
  uint8_t **w = calloc((size_t)n_mats, sizeof *w);
  const size_t bytes = pa_row_size(type, cols) * (size_t)rows;
  for (int i = 0; i < n_mats; i++) random_matrix(&m[i], &w[i], type, rows, cols);
  float *x = random_floats(cols * n_tokens);
  float *y = pa_alloc(sizeof(float) * (size_t)(rows * n_tokens));
  void *work = pa_alloc(pa_matmul_work_size(&m[0], n_tokens) + 64);
  double *t = calloc((size_t)passes, sizeof *t);
  const double ops = 2.0 * (double)rows * (double)cols * (double)n_tokens * n_mats;
  printf("%s %lld x %lld, %d matrices (%.1f MB), %lld tokens: GOP/s, median of %d passes\n", name,
         (long long)rows, (long long)cols, n_mats, (double)bytes * n_mats / 1e6, (long long)n_tokens,
         passes);
  for (int same = 0; same < 2; same++) {
    for (int r = -1; r < passes; r++) { /* r = -1: warm-up */
      const double t0 = bench_time();
      for (int i = 0; i < n_mats; i++)
        pa_matmul(ex(), pool, &m[same ? 0 : i], x, cols, y, rows, n_tokens, work);
      if (r >= 0) t[r] = bench_time() - t0;
    }
    qsort(t, (size_t)passes, sizeof *t, cmp_double);
    printf("  %-28s %8.1f (best %.1f)\n", same ? "one matrix, again and again" : "distinct matrices in turn",
           ops / t[passes / 2] / 1e9, ops / t[0] / 1e9);
  }
  for (int i = 0; i < n_mats; i++) weights_free(w[i]);
  free(w), free(m), free(t);
  pa_free(x), pa_free(y), pa_free(work);
}

/* ---- vsread: decode's matmul against a plain read of the same bytes ---- */
typedef struct {
  const uint8_t *p;
  size_t bytes;
  uint64_t sink[64];
} read_job;

/* the `pasada bench` read probe's loop over this thread's share */
static void read_task(void *arg, int ith, int nth) {
  read_job *j = arg;
  const size_t per = j->bytes / 256 / (size_t)nth * 256, lo = per * (size_t)ith;
  j->sink[ith & 63] ^= pa_bench_read(j->p + lo, ith == nth - 1 ? j->bytes - lo : per);
}

/* One token through a ~MB matrix (as loaded: BENCH_ILV=1 for the
 * interleaved layouts) and a plain AVX2 read of the same bytes on the same
 * pool, alternated `rounds` times: each side's GB/s and the median of the
 * per-round ratio matmul / read (what the decode kernels leave of the
 * bandwidth a bare read gets at that moment). */
static void vsread_mode(pa_pool *pool, double mb, const char *name, int rounds) {
  const pa_type type = type_named(name);
  if (type == PA_TYPE_COUNT || rounds < 1) return;
  decode_case d;
  decode_case_make(&d, type, mb);
  read_job rj = {.p = d.w, .bytes = d.bytes};
  double *r = calloc((size_t)rounds, sizeof *r), *gm = calloc((size_t)rounds, sizeof *gm),
         *gr = calloc((size_t)rounds, sizeof *gr);
  decode_case_run(&d, pool); /* warm-up */
  pa_pool_run(pool, read_task, &rj);
  for (int k = 0; k < rounds; k++) {
    double t0 = pa_time_s();
    pa_pool_run(pool, read_task, &rj);
    const double tr = pa_time_s() - t0;
    t0 = pa_time_s();
    decode_case_run(&d, pool);
    const double tm = pa_time_s() - t0;
    gm[k] = (double)d.bytes / tm / 1e9, gr[k] = (double)d.bytes / tr / 1e9, r[k] = gm[k] / gr[k];
  }
  qsort(r, (size_t)rounds, sizeof *r, cmp_double);
  qsort(gm, (size_t)rounds, sizeof *gm, cmp_double);
  qsort(gr, (size_t)rounds, sizeof *gr, cmp_double);
  printf("%-6s %7.1f MB  matmul %6.2f GB/s  read %6.2f GB/s  (medians)  matmul / read: median %.3f "
         "(quartiles %.3f %.3f)\n",
         name, (double)d.bytes / 1e6, gm[rounds / 2], gr[rounds / 2], r[rounds / 2], r[rounds / 4],
         r[3 * rounds / 4]);
  free(r), free(gm), free(gr);
  decode_case_free(&d);
}

/* ---- layers: one token through a decode step's sequence of jobs ---- */
/* A read job over several buffers: each thread reads its share of each. */
typedef struct {
  const uint8_t *p[3];
  size_t bytes[3];
  int n;
  uint64_t sink[64];
} read_multi_job;

static void read_multi_task(void *arg, int ith, int nth) {
  read_multi_job *j = arg;
  for (int k = 0; k < j->n; k++) {
    const size_t per = j->bytes[k] / 256 / (size_t)nth * 256, lo = per * (size_t)ith;
    j->sink[ith & 63] ^= pa_bench_read(j->p[k] + lo, ith == nth - 1 ? j->bytes[k] - lo : per);
  }
}

/* n_layers layers of the Llama-3.2-1B shape in Q4_K_M's types (q, k, o,
 * gate, up Q4_K; v, down Q6_K; as loaded with BENCH_ILV=1), one token
 * through each layer's four jobs as the model runs them (q/k/v in one job,
 * o, gate+up gated, down), against a plain read of the same matrices in
 * the same jobs, and a plain read of one buffer of the same bytes,
 * alternated `rounds` times: medians in GB/s and the ratios. */
static void layers_mode(pa_pool *pool, int n_layers, int rounds) {
  enum { Q, K, V, O, G, U, D, N_M };
  static const struct {
    const char *type;
    int64_t rows, cols;
  } shape[N_M] = {{"Q4_K", 2048, 2048}, {"Q4_K", 512, 2048},  {"Q6_K", 512, 2048},
                  {"Q4_K", 2048, 2048}, {"Q4_K", 8192, 2048}, {"Q4_K", 8192, 2048},
                  {"Q6_K", 2048, 8192}};
  pa_matrix(*m)[N_M] = calloc((size_t)n_layers, sizeof *m);
  uint8_t *(*w)[N_M] = calloc((size_t)n_layers, sizeof *w);
  size_t total = 0, work_bytes = 0;
  for (int l = 0; l < n_layers; l++)
    for (int k = 0; k < N_M; k++) {
      random_matrix(&m[l][k], &w[l][k], type_named(shape[k].type), shape[k].rows, shape[k].cols);
      total += (pa_matrix_bytes(&m[l][k]) + 63) & ~(size_t)63;
      const size_t ws = pa_matmul_work_size(&m[l][k], 1);
      if (ws > work_bytes) work_bytes = ws;
    }
  /* one mapping, the matrices side by side in this order, as the loader
   * places the ones it repacks */
  uint8_t *arena = weights_alloc(total);
  size_t at = 0;
  for (int l = 0; l < n_layers; l++)
    for (int k = 0; k < N_M; k++) {
      const size_t b = pa_matrix_bytes(&m[l][k]);
      memcpy(arena + at, w[l][k], b);
      weights_free(w[l][k]);
      w[l][k] = arena + at;
      m[l][k].data = arena + at;
      at += (b + 63) & ~(size_t)63;
    }
  float *x = random_floats(8192), *y = pa_alloc(sizeof(float) * 8192 * 4);
  void *work = pa_alloc(work_bytes + 64);
  uint8_t *flat = weights_alloc(total);
  memset(flat, 1, total);
  read_job one = {.p = flat, .bytes = total};
  double *gm = calloc((size_t)rounds, sizeof *gm), *gr = calloc((size_t)rounds, sizeof *gr),
         *gf = calloc((size_t)rounds, sizeof *gf), *rr = calloc((size_t)rounds, sizeof *rr),
         *rf = calloc((size_t)rounds, sizeof *rf);
  for (int r = -1; r < rounds; r++) { /* r = -1: warm-up */
    double t0 = pa_time_s();
    for (int l = 0; l < n_layers; l++) {
      pa_matmul_out qkv[3] = {
          {&m[l][Q], y, 2048}, {&m[l][K], y + 2048, 512}, {&m[l][V], y + 2560, 512}};
      pa_matmul_multi(ex(), pool, qkv, 3, x, 2048, 1, work);
      pa_matmul(ex(), pool, &m[l][O], x, 2048, y, 2048, 1, work);
      pa_matmul_gated(ex(), pool, &m[l][G], &m[l][U], pa_silu_mul, x, 2048, y, y + 8192, 8192, 1,
                      work);
      pa_matmul(ex(), pool, &m[l][D], x, 8192, y, 2048, 1, work);
    }
    const double tm = pa_time_s() - t0;
    t0 = pa_time_s();
    for (int l = 0; l < n_layers; l++) {
      read_multi_job jobs[4] = {{.p = {w[l][Q], w[l][K], w[l][V]},
                                 .bytes = {pa_matrix_bytes(&m[l][Q]), pa_matrix_bytes(&m[l][K]),
                                           pa_matrix_bytes(&m[l][V])},
                                 .n = 3},
                                {.p = {w[l][O]}, .bytes = {pa_matrix_bytes(&m[l][O])}, .n = 1},
                                {.p = {w[l][G], w[l][U]},
                                 .bytes = {pa_matrix_bytes(&m[l][G]), pa_matrix_bytes(&m[l][U])},
                                 .n = 2},
                                {.p = {w[l][D]}, .bytes = {pa_matrix_bytes(&m[l][D])}, .n = 1}};
      for (int j = 0; j < 4; j++) pa_pool_run(pool, read_multi_task, &jobs[j]);
    }
    const double tr = pa_time_s() - t0;
    t0 = pa_time_s();
    pa_pool_run(pool, read_task, &one);
    const double tf = pa_time_s() - t0;
    if (r < 0) continue;
    gm[r] = (double)total / tm / 1e9, gr[r] = (double)total / tr / 1e9,
    gf[r] = (double)total / tf / 1e9;
    rr[r] = gm[r] / gr[r], rf[r] = gm[r] / gf[r];
  }
  qsort(gm, (size_t)rounds, sizeof *gm, cmp_double);
  qsort(gr, (size_t)rounds, sizeof *gr, cmp_double);
  qsort(gf, (size_t)rounds, sizeof *gf, cmp_double);
  qsort(rr, (size_t)rounds, sizeof *rr, cmp_double);
  qsort(rf, (size_t)rounds, sizeof *rf, cmp_double);
  printf(
      "%d layers (%.1f MB), medians of %d rounds: matmul jobs %.2f GB/s, reads in the same jobs "
      "%.2f, one read %.2f; matmul / same jobs %.3f, matmul / one read %.3f\n",
      n_layers, (double)total / 1e6, rounds, gm[rounds / 2], gr[rounds / 2], gf[rounds / 2],
      rr[rounds / 2], rf[rounds / 2]);
  weights_free(arena);
  weights_free(flat);
  free(m), free(w), free(gm), free(gr), free(gf), free(rr), free(rf);
  pa_free(x), pa_free(y), pa_free(work);
}

int main(int argc, char **argv) {
  const int threads = argc > 1 ? atoi(argv[1]) : 1;
  if (argc > 2 && !strcmp(argv[2], "layers")) {
    pa_pool *pool = pa_pool_create(threads > 0 ? threads : 1);
    printf("cpu %s, %d thread(s), one token through a decode step's jobs\n", pa_cpu_describe(),
           threads);
    layers_mode(pool, argc > 3 ? atoi(argv[3]) : 16, argc > 4 ? atoi(argv[4]) : 9);
    pa_pool_free(pool);
    return 0;
  }
  if (argc > 2 && !strcmp(argv[2], "vsread")) {
    pa_pool *pool = pa_pool_create(threads > 0 ? threads : 1);
    printf("cpu %s, %d thread(s), one token, matmul against a plain read of its bytes\n",
           pa_cpu_describe(), threads);
    const double mb = argc > 3 ? atof(argv[3]) : 256.0;
    for (int i = 4; i < (argc > 4 ? argc : 5); i++) vsread_mode(pool, mb, argc > 4 ? argv[i] : "Q4_K", 15);
    pa_pool_free(pool);
    return 0;
  }
  if (argc > 2 && !strcmp(argv[2], "seq")) {
    pa_pool *pool = threads > 1 ? pa_pool_create(threads) : NULL;
    printf("cpu %s, %d thread(s)\n", pa_cpu_describe(), threads);
    seq_mode(pool, argc > 3 ? atoll(argv[3]) : 16, argc > 4 ? argv[4] : "Q4_1",
             argc > 5 ? atoll(argv[5]) : 1536, argc > 6 ? atoll(argv[6]) : 576,
             argc > 7 ? atoi(argv[7]) : 60, argc > 8 ? atoi(argv[8]) : 21);
    pa_pool_free(pool);
    return 0;
  }
  if (argc > 2 && !strcmp(argv[2], "gemm")) {
    pa_pool *pool = threads > 1 ? pa_pool_create(threads) : NULL;
    printf("cpu %s, %d thread(s), prefill-shaped (GEMM)\n", pa_cpu_describe(), threads);
    gemm_mode(pool, argc > 3 ? atoll(argv[3]) : 512, argc > 4 ? argc - 4 : 0, argv + 4);
    pa_pool_free(pool);
    return 0;
  }
  if (argc > 2 && !strcmp(argv[2], "shapes")) {
    pa_pool *pool = threads > 1 ? pa_pool_create(threads) : NULL;
    printf("cpu %s, %d thread(s), decode (one token)\n", pa_cpu_describe(), threads);
    bench_shapes(pool);
    pa_pool_free(pool);
    return 0;
  }
  const double mb = argc > 2 ? atof(argv[2]) : 64.0;
  const char *all[] = {"Q4_1", "Q8_0", "Q5_0", "Q4_K", "Q6_K", "Q4_0", "Q5_K",
                       "Q5_1", "Q2_K", "Q3_K", "F32",  "F16",  "BF16"};
  const char **names = argc > 3 ? (const char **)argv + 3 : all;
  const int n_names = argc > 3 ? argc - 3 : (int)(sizeof all / sizeof all[0]);
  pa_pool *pool = threads > 1 ? pa_pool_create(threads) : NULL;
  const pa_cpu_kernels *tabs[] = {pa_kernels_reference(), pa_kernels_avx2(), pa_kernels_avx512(),
                                  pa_kernels_avx512_vnni()};
  printf("cpu %s, %d thread(s), ~%.0f MB of weights, GB/s of weights per decode matmul\n",
         pa_cpu_describe(), threads, mb);
  printf("%-6s", "type");
  for (int k = 0; k < 4; k++)
    if (tabs[k]) printf(" %12s", tabs[k]->name);
  printf("\n");
  for (int ni = 0; ni < n_names; ni++) {
    const pa_type type = type_named(names[ni]);
    if (type == PA_TYPE_COUNT) continue;
    decode_case d;
    decode_case_make(&d, type, mb);
    printf("%-6s", names[ni]);
    for (int k = 0; k < 4; k++) {
      if (!tabs[k]) continue;
      set_table(tabs[k]);
      decode_case_run(&d, pool); /* warm-up */
      double best = 1e30;
      const int reps = k == 0 ? 2 : (mb < 8 ? 200 : 20);
      for (int r = 0; r < reps; r++) {
        double t0 = pa_time_s();
        decode_case_run(&d, pool);
        double dt = pa_time_s() - t0;
        if (dt < best) best = dt;
      }
      printf(" %12.2f", (double)d.bytes / best / 1e9);
      fflush(stdout);
    }
    printf("\n");
    decode_case_free(&d);
  }
  set_table(NULL);
  pa_pool_free(pool);
  return 0;
}
