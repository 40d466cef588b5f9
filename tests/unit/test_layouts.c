/* test_layouts.c: the interleaved weight layouts (kernels/layout.h: Q4_K,
 * Q5_K, Q6_K, Q3_K and Q2_K in groups of 4 rows, kernels/x4.h; Q4_0, Q4_1,
 * Q5_0, Q8_0, IQ4_NL, MXFP4, IQ4_XS, Q4_K and Q5_K in groups of 16, kernels/x16.h) on fresh random inputs, for each (layout,
 * type):
 * (a) repacking keeps every value: each row read back (pa_matrix_get_row)
 *     equals the file layout's reference dequantization bit for bit;
 * (b) the reference kernel agrees with the file layout's reference dot
 *     on the same quantized activations, |got - ref| <= 1e-5 * M,
 *     M = sum |x_i| (|w_i| + |w0_i|) (as test_gemm.c);
 * (c) the AVX2, AVX-512 VNNI and AMX kernels (where the CPU has
 *     them) give the reference kernel's bits, for every token count a
 *     call takes, tokens in order and reversed; their one-token calls
 *     over many groups (run1) the bits of one group at a time;
 * (d) pa_matmul on a repacked matrix under every kernel table, pools of 1,
 *     2 and 3 threads and batches of 1..13 tokens: every token's outputs
 *     are bitwise those of that token alone under the reference table
 *     (the layout's arithmetic is canonical: batch size, table and
 *     threads change no bit), and nothing outside y is written;
 * (e) pa_matmul_multi and pa_matmul_gated take repacked and file-layout
 *     matrices together (separate jobs) and still give each its bits;
 * (f) pa_matmul_group (single and gated items over shared and separate
 *     activations, mixed types and layouts, 1..6 tokens an item) gives every
 *     output the bits of its product run alone, under every table and pool,
 *     writes nothing outside the outputs, and with too little scratch
 *     refuses having written nothing.
 * Returns 0 when all pass. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/threadpool.h"
#include "kernels/kernels.h"
#include "kernels/ops.h"
#include "kernels/layout.h"
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

#define MAX_BATCH 21 /* past one AMX call (16 tokens) */
#define SENTINEL -12345.0f

static uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

typedef struct {
  pa_type type;
  pa_layout layout;
  int64_t rows, cols;
  uint8_t *file; /* rows in file layout */
  pa_matrix m;   /* repacked */
} mat;

/* a matrix in the given layout (make: the one pa_layout_for gives) */
static void make_in(mat *a, pa_layout layout, pa_type type, int64_t rows, int64_t cols) {
  a->type = type;
  a->layout = layout;
  a->rows = rows;
  a->cols = cols;
  const size_t rb = pa_row_size(type, cols);
  a->file = pa_alloc(rb * (size_t)rows);
  for (int64_t r = 0; r < rows; r++) random_weights(type, cols, a->file + (size_t)r * rb);
  uint8_t *p = pa_alloc(pa_layout_bytes(a->layout, type, rows, cols));
  pa_layout_repack(a->layout, type, cols, a->file, p, rows / pa_layout_group_rows(a->layout));
  a->m = (pa_matrix){.type = type, .rows = rows, .cols = cols, .data = p, .layout = a->layout};
}

static void make(mat *a, pa_type type, int64_t rows, int64_t cols) {
  make_in(a, pa_layout_for(type, rows, cols), type, rows, cols);
}

static void drop(mat *a) {
  pa_free(a->file);
  pa_free((void *)a->m.data);
}

/* (a) */
static void check_rows(const mat *a) {
  const size_t rb = pa_row_size(a->type, a->cols);
  float *want = malloc(sizeof(float) * (size_t)a->cols),
        *got = malloc(sizeof(float) * (size_t)a->cols);
  for (int64_t r = 0; r < a->rows; r++) {
    pa_type_get(a->type)->to_float(a->file + (size_t)r * rb, want, a->cols);
    pa_matrix_get_row(&a->m, r, got);
    for (int64_t c = 0; c < a->cols; c++)
      if (bits_of(got[c]) != bits_of(want[c])) {
        printf("FAIL get_row %s cols=%lld row %lld col %lld: %.9g, file layout %.9g\n",
               pa_type_name(a->type), (long long)a->cols, (long long)r, (long long)c, got[c],
               want[c]);
        failures++;
        break;
      }
  }
  free(want);
  free(got);
}

/* (b), (c): each group through the kernels directly */
static void check_kernels(const mat *a) {
  const int64_t cols = a->cols;
  const pa_type vt = pa_type_get(a->type)->vec_dot_type;
  const pa_ilv_kernel *ref = pa_kernels_ilv(pa_kernels_reference(), a->layout, a->type);
  const pa_ilv_kernel *vnni = pa_kernels_avx512_vnni()
                                  ? pa_kernels_ilv(pa_kernels_avx512_vnni(), a->layout, a->type)
                                  : NULL;
  if (!ref || (pa_kernels_avx512_vnni() && (!vnni || vnni == ref))) {
    printf("FAIL %s: no reference or no VNNI kernel\n", pa_type_name(a->type));
    failures++;
    return;
  }
  /* the fast kernels: AVX2's, VNNI's, and AMX's (batches; its few-token
   * calls are VNNI's) where the CPU has them */
  const pa_ilv_kernel *fast[3] = {NULL, vnni, NULL};
  const char *fast_name[3] = {"avx2", "vnni", "amx"};
  /* Q4_K and Q5_K in 16-row groups have no AVX2 kernel: that table keeps
   * them in 4 */
  const bool avx2_kernel = !(a->layout == PA_LAYOUT_B32_X16 &&
                             (a->type == PA_TYPE_Q4_K || a->type == PA_TYPE_Q5_K));
  if (pa_kernels_avx2() && avx2_kernel) {
    fast[0] = pa_kernels_ilv(pa_kernels_avx2(), a->layout, a->type);
    if (!fast[0] || fast[0] == ref) {
      printf("FAIL %s: no AVX2-table kernel\n", pa_type_name(a->type));
      failures++;
      return;
    }
  }
  if (pa_kernels_amx()) {
    fast[2] = pa_kernels_ilv(pa_kernels_amx(), a->layout, a->type);
    if (!fast[2] || fast[2] == ref) {
      printf("FAIL %s: no AMX-table kernel\n", pa_type_name(a->type));
      failures++;
      return;
    }
  }
  const int G = ref->rows;
  int T = ref->tokens;
  for (int f = 0; f < 3; f++)
    if (fast[f] && fast[f]->tokens > T) T = fast[f]->tokens;
  const size_t rb = pa_row_size(a->type, cols), gb = pa_layout_bytes(a->layout, a->type, G, cols);
  const size_t xq_row = pa_row_size(vt, cols), xp_row = ref->x_size(cols);
  uint8_t *xq = malloc(xq_row * (size_t)T), *xp = pa_alloc(xp_row * (size_t)T);
  float *x = malloc(sizeof(float) * (size_t)cols), *xd = malloc(sizeof(float) * (size_t)cols);
  float *wd = malloc(sizeof(float) * (size_t)cols), *w0 = malloc(sizeof(float) * (size_t)cols);
  float *want_t = malloc(sizeof(float) * (size_t)(G * T)),
        *got = malloc(sizeof(float) * (size_t)(G * T));
  const uint8_t *xptr[PA_ILV_MAX_TOKENS];
  for (int t = 0; t < T; t++) {
    random_floats(x, cols);
    pa_kernels_reference()->quantize_row[vt](x, xq + t * xq_row, cols);
    ref->pack_x(cols, xq + t * xq_row, xp + t * xp_row);
    xptr[t] = xp + t * xp_row;
  }
  /* each fast kernel's own packing of the same quantized rows (the AVX2 x4
   * kernel's record is wider) */
  uint8_t *fxp[3] = {NULL, NULL, NULL};
  size_t fxp_row[3] = {0, 0, 0};
  for (int f = 0; f < 3; f++)
    if (fast[f]) {
      fxp_row[f] = fast[f]->x_size(cols);
      fxp[f] = pa_alloc(fxp_row[f] * (size_t)T);
      for (int t = 0; t < T; t++)
        fast[f]->pack_x(cols, xq + t * xq_row, fxp[f] + t * fxp_row[f]);
    }
  for (int64_t g = 0; g < a->rows / G; g++) {
    const uint8_t *wg = (const uint8_t *)a->m.data + (size_t)g * gb;
    for (int t0 = 0; t0 < T; t0 += ref->tokens)
      ref->run(cols, wg, xptr + t0, T - t0 < ref->tokens ? T - t0 : ref->tokens, want_t + G * t0,
               G, t0 == 0 ? pa_prefetch_defaults() : NULL);
    for (int t = 0; t < T; t++) {
      pa_type_get(vt)->to_float(xq + t * xq_row, xd, cols);
      for (int r = 0; r < G; r++) {
        const uint8_t *wr = a->file + (size_t)(G * g + r) * rb;
        float want;
        pa_kernels_reference()->vec_dot[a->type](cols, &want, wr, xq + t * xq_row);
        dequantize_with_offsets(a->type, cols, wr, wd, w0);
        double mag = 0.0;
        for (int64_t c = 0; c < cols; c++)
          mag += fabs((double)xd[c]) * (fabs((double)wd[c]) + fabs((double)w0[c]));
        const float v = want_t[G * t + r];
        if (!(fabs((double)v - want) <= 1e-5 * mag + 1e-30)) {
          printf(
              "FAIL %s layout reference vs file dot, %lld cols, row %lld token %d: %.9g vs %.9g\n",
              pa_type_name(a->type), (long long)cols, (long long)(G * g + r), t, v, want);
          failures++;
        }
      }
    }
    /* every token count, the tokens' rows evenly spaced (as matmul packs
     * them), then in reverse order (not evenly spaced) */
    for (int f = 0; f < 3; f++)
      for (int nt = 1; fast[f] && nt <= fast[f]->tokens; nt++)
        for (int rev = 0; rev < 2; rev++) {
          const uint8_t *xr[PA_ILV_MAX_TOKENS];
          int src[PA_ILV_MAX_TOKENS];
          for (int t = 0; t < nt; t++) {
            src[t] = rev ? T - 1 - t : T - nt + t;
            xr[t] = fxp[f] + (size_t)src[t] * fxp_row[f];
          }
          fast[f]->run(cols, wg, xr, nt, got, G, rev ? pa_prefetch_defaults() : NULL); /* with and without prefetching */
          for (int t = 0; t < nt; t++)
            for (int r = 0; r < G; r++) {
              const float want = want_t[G * src[t] + r];
              if (bits_of(got[G * t + r]) != bits_of(want)) {
                printf(
                    "FAIL %s %s layout kernel, %lld cols, %d tokens%s, group %lld row %d token "
                    "%d: %.9g, reference %.9g\n",
                    pa_type_name(a->type), fast_name[f], (long long)cols, nt,
                    rev ? " (reversed)" : "", (long long)g, r, t, got[G * t + r], want);
                failures++;
              }
            }
        }
  }
  /* run1 (one token through consecutive groups in one call, where a
   * kernel has it): the bits of run with that token, group by group, for
   * 1, 2, ... groups from the first (odd and even counts), and nothing
   * written past them */
  const int64_t n_groups = a->rows / G;
  float *one = malloc(sizeof(float) * (size_t)(a->rows + 1));
  for (int f = 0; f < 3; f++) {
    if (!fast[f] || !fast[f]->run1) continue;
    const uint8_t *x1 = fxp[f] + (size_t)(T - 1) * fxp_row[f];
    float *each = malloc(sizeof(float) * (size_t)a->rows);
    for (int64_t g = 0; g < n_groups; g++)
      fast[f]->run(cols, (const uint8_t *)a->m.data + (size_t)g * gb, &x1, 1, each + G * g, G,
                   NULL);
    for (int64_t ng = 1; ng <= n_groups; ng++) {
      one[G * ng] = 12345.0f;
      fast[f]->run1(cols, a->m.data, gb, ng, x1, one, ng % 2 ? pa_prefetch_defaults() : NULL);
      for (int64_t r = 0; r < G * ng; r++)
        if (bits_of(one[r]) != bits_of(each[r])) {
          printf("FAIL %s %s layout run1, %lld cols, %lld groups, row %lld: %.9g, run %.9g\n",
                 pa_type_name(a->type), fast_name[f], (long long)cols, (long long)ng,
                 (long long)r, one[r], each[r]);
          failures++;
          break;
        }
      if (one[G * ng] != 12345.0f) {
        printf("FAIL %s %s layout run1 wrote past %lld groups\n", pa_type_name(a->type),
               fast_name[f], (long long)ng);
        failures++;
      }
    }
    free(each);
  }
  free(one);
  free(xq);
  pa_free(xp);
  for (int f = 0; f < 3; f++) pa_free(fxp[f]);
  free(x);
  free(xd);
  free(wd);
  free(w0);
  free(want_t);
  free(got);
}

/* (d) */
static void check_matmul(const mat *a, pa_pool **pools, const pa_cpu_kernels **tables,
                         int n_tables) {
  const int64_t rows = a->rows, cols = a->cols, xs = cols + 3, ys = rows + 5,
                n_pool = 2 * MAX_BATCH;
  float *x = malloc(sizeof(float) * (size_t)(n_pool * xs));
  for (int64_t k = 0; k < n_pool; k++) random_floats(x + k * xs, cols);
  float *alone = malloc(sizeof(float) * (size_t)(n_pool * rows));
  void *work = malloc(pa_matmul_work_size(&a->m, MAX_BATCH) + 1);
  set_table(pa_kernels_reference());
  for (int64_t k = 0; k < n_pool; k++)
    pa_matmul(ex(), NULL, &a->m, x + k * xs, xs, alone + k * rows, rows, 1, work);
  float *y = malloc(sizeof(float) * (size_t)(MAX_BATCH * ys));
  for (int k = 0; k < n_tables; k++) {
    set_table(tables[k]);
    int reported = 0;
    for (int p = 0; p < 3; p++)
      for (int64_t n = 1; n <= MAX_BATCH; n++) {
        const int64_t start = (int64_t)(rng() % (uint64_t)(n_pool - n + 1));
        for (int64_t i = 0; i < MAX_BATCH * ys; i++) y[i] = SENTINEL;
        pa_matmul(ex(), pools[p], &a->m, x + start * xs, xs, y, ys, n, work);
        for (int64_t t = 0; t < MAX_BATCH; t++)
          for (int64_t r = 0; r < ys; r++) {
            const float got = y[t * ys + r];
            const bool inside = t < n && r < rows;
            const float want = inside ? alone[(start + t) * rows + r] : SENTINEL;
            if (bits_of(got) != bits_of(want) && reported++ < 5) {
              printf(
                  "FAIL %s layout matmul table=%s cols=%lld threads=%d tokens=%lld y[%lld][%lld]: "
                  "%.9g, %s %.9g\n",
                  pa_type_name(a->type), tables[k]->name, (long long)cols, p + 1, (long long)n,
                  (long long)t, (long long)r, got, inside ? "alone (reference table)" : "untouched",
                  want);
              failures++;
            }
          }
      }
  }
  set_table(NULL);
  free(x);
  free(alone);
  free(work);
  free(y);
}

/* (e): a repacked gate with a file-layout up, and a multi of both kinds */
static void check_mixed(pa_pool *pool, pa_type type, pa_layout layout) {
  const int64_t rows = 48, cols = 512, n = 5;
  mat a;
  make_in(&a, layout, type, rows, cols);
  const pa_matrix f = {.type = type, .rows = rows, .cols = cols, .data = a.file};
  float *x = malloc(sizeof(float) * (size_t)(n * cols));
  random_floats(x, n * cols);
  float *want_a = malloc(sizeof(float) * (size_t)(n * rows)),
        *want_f = malloc(sizeof(float) * (size_t)(n * rows));
  float *ya = malloc(sizeof(float) * (size_t)(n * rows)),
        *yf = malloc(sizeof(float) * (size_t)(n * rows));
  size_t ws = pa_matmul_work_size(&a.m, n);
  if (pa_matmul_work_size(&f, n) > ws) ws = pa_matmul_work_size(&f, n);
  void *work = malloc(ws + 1);
  pa_matmul(ex(), pool, &a.m, x, cols, want_a, rows, n, work);
  pa_matmul(ex(), pool, &f, x, cols, want_f, rows, n, work);
  const pa_matmul_out outs[2] = {{&f, yf, rows}, {&a.m, ya, rows}};
  pa_matmul_multi(ex(), pool, outs, 2, x, cols, n, work);
  for (int64_t i = 0; i < n * rows; i++)
    if (bits_of(ya[i]) != bits_of(want_a[i]) || bits_of(yf[i]) != bits_of(want_f[i])) {
      printf("FAIL matmul_multi of a repacked and a file-layout matrix differs at %lld\n",
             (long long)i);
      failures++;
      break;
    }
  pa_matmul_gated(ex(), pool, &a.m, &f, pa_silu_mul, x, cols, ya, yf, rows, n, work);
  for (int64_t i = 0; i < n * rows; i++) {
    float g = want_a[i];
    pa_silu_mul(&g, &want_f[i], 1);
    if (bits_of(ya[i]) != bits_of(g)) {
      printf("FAIL matmul_gated with a repacked gate differs at %lld: %.9g vs %.9g\n", (long long)i,
             ya[i], g);
      failures++;
      break;
    }
  }
  free(x);
  free(want_a);
  free(want_f);
  free(ya);
  free(yf);
  free(work);
  drop(&a);
}

/* (f) */
#define GROUP_ITEMS 9
static void check_group(pa_pool **pools, const pa_cpu_kernels **tables, int n_tables) {
  /* x4 K-quants, 16-row types (Q4_K among them, beside Q4_K in 4-row groups), file-layout
   * rows (6 rows), one of 16 rows whose columns no layout takes; gated pairs of one type */
  const struct { pa_type type; int64_t rows, cols; } shapes[GROUP_ITEMS] = {
      {PA_TYPE_Q4_K, 36, 512}, {PA_TYPE_Q6_K, 20, 256}, {PA_TYPE_Q8_0, 48, 96},
      {PA_TYPE_Q4_K, 6, 512},  {PA_TYPE_Q4_1, 32, 576}, {PA_TYPE_Q4_K, 32, 512},
      {PA_TYPE_MXFP4, 16, 64}, {PA_TYPE_Q6_K, 20, 256}, {PA_TYPE_Q4_K, 8, 512}};
  mat m[GROUP_ITEMS], up[GROUP_ITEMS];
  const bool gated[GROUP_ITEMS] = {true, false, true, false, false, false, true, false, false};
  for (int i = 0; i < GROUP_ITEMS; i++) {
    make(&m[i], shapes[i].type, shapes[i].rows, shapes[i].cols);
    if (gated[i]) make(&up[i], shapes[i].type, shapes[i].rows, shapes[i].cols);
  }
  const int64_t max_t = 6, xs_pad = 3;
  float *xa = malloc(sizeof(float) * (size_t)(max_t * (576 + xs_pad))); /* shared by items 0, 3, 5, 8 */
  random_floats(xa, max_t * (576 + xs_pad));
  float *xo[GROUP_ITEMS], *y[GROUP_ITEMS], *yu[GROUP_ITEMS], *want[GROUP_ITEMS], *want_u[GROUP_ITEMS];
  size_t ws_alone = 0;
  for (int i = 0; i < GROUP_ITEMS; i++) {
    xo[i] = malloc(sizeof(float) * (size_t)(max_t * (shapes[i].cols + xs_pad)));
    random_floats(xo[i], max_t * (shapes[i].cols + xs_pad));
    const size_t n = (size_t)(max_t * (shapes[i].rows + 2));
    y[i] = malloc(sizeof(float) * n), yu[i] = malloc(sizeof(float) * n);
    want[i] = malloc(sizeof(float) * n), want_u[i] = malloc(sizeof(float) * n);
    const size_t w = pa_matmul_work_size(&m[i].m, max_t);
    if (w > ws_alone) ws_alone = w;
  }
  void *alone_work = malloc(ws_alone + 1);
  int reported = 0;
  for (int k = 0; k < n_tables; k++) {
    set_table(tables[k]);
    for (int p = 0; p < 3; p++)
      for (int round = 0; round < 4; round++) {
        pa_matmul_item it[GROUP_ITEMS];
        const pa_matrix *ws[GROUP_ITEMS];
        int64_t nt[GROUP_ITEMS];
        for (int i = 0; i < GROUP_ITEMS; i++) {
          const int64_t cols = shapes[i].cols, rows = shapes[i].rows, ys = rows + 2;
          const int64_t n = 1 + (int64_t)(rng() % (uint64_t)max_t);
          /* the 512-column items read xa (with one token count, so that they share it) */
          const bool shares = cols == 512;
          const int64_t tn = shares ? 1 + round : n;
          const float *x = shares ? xa : xo[i];
          const int64_t xs = cols + xs_pad;
          it[i] = (pa_matmul_item){.w = &m[i].m, .x = x, .x_stride = xs, .y = y[i], .y_stride = ys, .n_tokens = tn};
          if (gated[i]) it[i].up = &up[i].m, it[i].gate = pa_silu_mul, it[i].y_up = yu[i];
          ws[i] = &m[i].m, nt[i] = tn;
          for (int64_t e = 0; e < max_t * ys; e++) y[i][e] = yu[i][e] = SENTINEL;
          for (int64_t e = 0; e < max_t * ys; e++) want[i][e] = want_u[i][e] = SENTINEL;
          if (gated[i])
            pa_matmul_gated(ex(), pools[p], &m[i].m, &up[i].m, pa_silu_mul, x, xs, want[i], want_u[i], ys, tn,
                            alone_work);
          else
            pa_matmul(ex(), pools[p], &m[i].m, x, xs, want[i], ys, tn, alone_work);
        }
        const size_t gw = pa_matmul_group_work_size(ws, nt, GROUP_ITEMS);
        void *work = malloc(gw);
        if (round == 3) { /* too little scratch: refused, nothing written */
          if (pa_matmul_group(ex(), pools[p], it, GROUP_ITEMS, work, 4096)) {
            printf("FAIL matmul_group ran with 4096 bytes of scratch\n");
            failures++;
          }
          for (int i = 0; i < GROUP_ITEMS; i++)
            if (bits_of(y[i][0]) != bits_of(SENTINEL) && reported++ < 5) {
              printf("FAIL matmul_group refused yet wrote item %d\n", i);
              failures++;
            }
        }
        if (!pa_matmul_group(ex(), pools[p], it, GROUP_ITEMS, work, gw)) {
          printf("FAIL matmul_group refused %zu bytes of scratch (table %s)\n", gw, tables[k]->name);
          failures++;
        }
        free(work);
        for (int i = 0; i < GROUP_ITEMS; i++)
          for (int64_t e = 0; e < max_t * (shapes[i].rows + 2); e++)
            if ((bits_of(y[i][e]) != bits_of(want[i][e]) ||
                 (gated[i] && bits_of(yu[i][e]) != bits_of(want_u[i][e]))) &&
                reported++ < 5) {
              printf("FAIL matmul_group table=%s threads=%d item %d (%s %lldx%lld, %lld tokens%s) at %lld: "
                     "%.9g vs alone %.9g\n",
                     tables[k]->name, p + 1, i, pa_type_name(shapes[i].type), (long long)shapes[i].rows,
                     (long long)shapes[i].cols, (long long)it[i].n_tokens, gated[i] ? ", gated" : "",
                     (long long)e, y[i][e], want[i][e]);
              failures++;
            }
      }
  }
  set_table(NULL);
  for (int i = 0; i < GROUP_ITEMS; i++) {
    drop(&m[i]);
    if (gated[i]) drop(&up[i]);
    free(xo[i]), free(y[i]), free(yu[i]), free(want[i]), free(want_u[i]);
  }
  free(xa);
  free(alone_work);
}

int main(void) {
  test_seed("test_layouts");
  const pa_cpu_kernels *tables[5];
  int n_tables = 0;
  tables[n_tables++] = pa_kernels_reference();
  const pa_cpu_kernels *simd[] = {pa_kernels_avx2(), pa_kernels_avx512(), pa_kernels_avx512_vnni(),
                                  pa_kernels_amx()};
  for (int i = 0; i < 4; i++)
    if (simd[i]) tables[n_tables++] = simd[i];
  printf("cpu: %s; fast Q4_K x4 / Q8_0 x16 kernels in:", pa_cpu_describe());
  for (int k = 0; k < n_tables; k++)
    if (pa_kernels_ilv_fast(tables[k], PA_LAYOUT_K_X4, PA_TYPE_Q4_K) &&
        pa_kernels_ilv_fast(tables[k], PA_LAYOUT_B32_X16, PA_TYPE_Q8_0))
      printf(" %s", tables[k]->name);
  printf("\n");
  if (pa_kernels_avx512_vnni() &&
      !pa_kernels_ilv_fast(pa_kernels_avx512_vnni(), PA_LAYOUT_K_X4, PA_TYPE_Q4_K)) {
    printf("FAIL the avx512_vnni table has no fast Q4_K x4 kernel\n");
    failures++;
  }
  if (pa_layout_for(PA_TYPE_Q4_K, 8, 512) != PA_LAYOUT_K_X4 ||
      pa_layout_for(PA_TYPE_Q4_K, 6, 512) != PA_LAYOUT_ROWS ||
      pa_layout_for(PA_TYPE_Q4_K, 8, 320) != PA_LAYOUT_ROWS ||
      pa_layout_for(PA_TYPE_Q6_K, 8, 512) != PA_LAYOUT_K_X4 ||
      pa_layout_for(PA_TYPE_Q6_K, 10, 512) != PA_LAYOUT_ROWS ||
      pa_layout_for(PA_TYPE_Q3_K, 4, 256) != PA_LAYOUT_K_X4 ||
      pa_layout_for(PA_TYPE_Q2_K, 4, 256) != PA_LAYOUT_K_X4 ||
      pa_layout_for(PA_TYPE_Q2_K, 4, 320) != PA_LAYOUT_ROWS ||
      pa_layout_for(PA_TYPE_Q8_0, 24, 64) != PA_LAYOUT_ROWS ||
      pa_layout_for(PA_TYPE_Q4_1, 32, 576) != PA_LAYOUT_B32_X16) {
    printf("FAIL pa_layout_for\n");
    failures++;
  }

  pa_pool *pools[3] = {NULL, pa_pool_create(2), pa_pool_create(3)};
  /* Q4_K, Q5_K, Q6_K, Q3_K and Q2_K, groups of 4: rows of 1 to 57 super-blocks */
  const int64_t ks[] = {1, 2, 3, 5, 16, 57};
  const int64_t rs[] = {4, 8, 36, 12, 20, 8};
  const pa_type kq[] = {PA_TYPE_Q4_K, PA_TYPE_Q5_K, PA_TYPE_Q6_K, PA_TYPE_Q3_K, PA_TYPE_Q2_K};
  for (int q = 0; q < 5; q++)
    for (int s = 0; s < (int)(sizeof ks / sizeof ks[0]); s++) {
      mat a;
      make(&a, kq[q], rs[s], QK_K * ks[s]);
      if (a.layout != PA_LAYOUT_K_X4) {
        printf("FAIL %s does not take the x4 layout\n", pa_type_name(kq[q]));
        failures++;
      }
      check_rows(&a);
      check_kernels(&a);
      check_matmul(&a, pools, tables, n_tables);
      drop(&a);
    }
  /* the 32-element types, groups of 16: rows of 1 to 131 blocks */
  const pa_type b32[] = {PA_TYPE_Q8_0, PA_TYPE_Q4_0, PA_TYPE_Q4_1, PA_TYPE_Q5_0, PA_TYPE_IQ4_NL,
                         PA_TYPE_MXFP4};
  const int64_t kb[] = {1, 2, 7, 18, 20, 131};
  const int64_t rb[] = {16, 48, 32, 16, 80, 16};
  for (int i = 0; i < (int)(sizeof b32 / sizeof b32[0]); i++) {
    if (pa_layout_for(b32[i], 16, 32) != PA_LAYOUT_B32_X16) {
      printf("FAIL %s does not take the 16-row layout\n", pa_type_name(b32[i]));
      failures++;
      continue;
    }
    for (int s = 0; s < (int)(sizeof kb / sizeof kb[0]); s++) {
      mat a;
      make(&a, b32[i], rb[s], 32 * kb[s]);
      check_rows(&a);
      check_kernels(&a);
      check_matmul(&a, pools, tables, n_tables);
      drop(&a);
    }
    check_mixed(pools[1], b32[i], PA_LAYOUT_B32_X16);
  }
  /* IQ4_XS, Q4_K and Q5_K, groups of 16 rows, a record per super-block: rows of 1 to 13 */
  const int64_t kx[] = {1, 2, 3, 13};
  const int64_t rx[] = {16, 48, 32, 16};
  if (pa_layout_for(PA_TYPE_IQ4_XS, 16, 256) != PA_LAYOUT_B32_X16 ||
      pa_layout_for(PA_TYPE_IQ4_XS, 16, 288) != PA_LAYOUT_ROWS ||
      pa_layout_for(PA_TYPE_Q4_K, 16, 256) != PA_LAYOUT_B32_X16 ||
      pa_layout_for(PA_TYPE_Q5_K, 32, 512) != PA_LAYOUT_B32_X16) {
    printf("FAIL IQ4_XS's, Q4_K's or Q5_K's 16-row layout\n");
    failures++;
  }
  /* the loader's choice: Q4_K (Q5_K) in 16-row groups where the table has
   * that kernel, else in 4-row groups; none without a fast kernel */
  if (pa_layout_pick(pa_kernels_reference(), PA_TYPE_Q4_K, 16, 256) != PA_LAYOUT_ROWS ||
      (pa_kernels_avx2() &&
       pa_layout_pick(pa_kernels_avx2(), PA_TYPE_Q4_K, 16, 256) != PA_LAYOUT_K_X4) ||
      (pa_kernels_avx512_vnni() &&
       (pa_layout_pick(pa_kernels_avx512_vnni(), PA_TYPE_Q4_K, 16, 256) != PA_LAYOUT_B32_X16 ||
        pa_layout_pick(pa_kernels_avx512_vnni(), PA_TYPE_Q4_K, 20, 256) != PA_LAYOUT_K_X4 ||
        pa_layout_pick(pa_kernels_avx512_vnni(), PA_TYPE_Q5_K, 16, 256) != PA_LAYOUT_B32_X16)) ||
      (pa_kernels_avx2() &&
       pa_layout_pick(pa_kernels_avx2(), PA_TYPE_Q5_K, 16, 256) != PA_LAYOUT_K_X4)) {
    printf("FAIL pa_layout_pick for Q4_K or Q5_K\n");
    failures++;
  }
  const pa_type kx_types[] = {PA_TYPE_IQ4_XS, PA_TYPE_Q4_K, PA_TYPE_Q5_K};
  for (int i = 0; i < 3; i++)
    for (int s = 0; s < (int)(sizeof kx / sizeof kx[0]); s++) {
      mat a;
      make(&a, kx_types[i], rx[s], QK_K * kx[s]);
      check_rows(&a);
      check_kernels(&a);
      check_matmul(&a, pools, tables, n_tables);
      drop(&a);
    }
  check_mixed(pools[1], PA_TYPE_IQ4_XS, PA_LAYOUT_B32_X16);
  check_mixed(pools[1], PA_TYPE_Q4_K, PA_LAYOUT_B32_X16);
  check_mixed(pools[1], PA_TYPE_Q4_K, PA_LAYOUT_K_X4);
  check_mixed(pools[1], PA_TYPE_Q5_K, PA_LAYOUT_B32_X16);
  check_mixed(pools[1], PA_TYPE_Q5_K, PA_LAYOUT_K_X4);
  check_mixed(pools[1], PA_TYPE_Q6_K, PA_LAYOUT_K_X4);
  check_mixed(pools[1], PA_TYPE_Q3_K, PA_LAYOUT_K_X4);
  check_mixed(pools[1], PA_TYPE_Q2_K, PA_LAYOUT_K_X4);
  check_group(pools, tables, n_tables);
  for (int p = 1; p < 3; p++) pa_pool_free(pools[p]);
  if (failures) {
    printf("test_layouts: %d failure(s)\n", failures);
    return 1;
  }
  printf("test_layouts: all passed\n");
  return 0;
}
