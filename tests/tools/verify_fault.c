/* verify_fault: `pasada verify` with a deliberately broken kernel, to prove
 * verify catches one (tests/e2e/test_verify.py).
 *
 *   verify_fault MODEL MODE [MAX_TOKENS]
 *
 * Builds a kernel table that is this CPU's best with every weight type's dot
 * product wrapped, and every interleaved layout's kernel (the path weights
 * repacked at load take), then runs pa_verify_run with it and the default
 * tolerances, printing the JSON report. MODE:
 *   none   the wrapper calls the real kernel unchanged (must pass)
 *   tail   drops the last block of every row (the classic loop-bound bug)
 *   sign   flips the sign of every 64th row's result
 * Exit status: 0 pass, 3 outside the tolerances, 1 error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "pasada.h"
#include "tools/verify.h"

static pa_vec_dot_fn real[PA_TYPE_COUNT];
static int mode; /* 0 none, 1 tail, 2 sign */
static _Thread_local unsigned long calls;

#define WRAP(T)                                                                   \
  static void dot_##T(int64_t n, float *out, const void *w, const void *x) {      \
    const int64_t bs = pa_type_get((pa_type)(T))->block_size;                     \
    if (mode == 1 && n > bs)                                                      \
      real[T](n - bs, out, w, x); /* the row's and x's blocks start the same */   \
    else                                                                          \
      real[T](n, out, w, x);                                                      \
    if (mode == 2 && calls++ % 64 == 0) *out = -*out;                             \
  }
WRAP(1) WRAP(2) WRAP(3) WRAP(6) WRAP(7) WRAP(8) WRAP(10) WRAP(11) WRAP(12) WRAP(13) WRAP(14) WRAP(30)

/* The same faults in the interleaved layouts' kernels: the last block
 * (super-block) of every row left out, or every 64th output negated. */
static const pa_ilv_kernel *real_ilv[PA_LAYOUT_COUNT][PA_TYPE_COUNT];
static pa_ilv_kernel wrapped_ilv[PA_LAYOUT_COUNT][PA_TYPE_COUNT];
#define WRAP_ILV(L, T)                                                                          \
  static void run_##L##_##T(int64_t cols, const uint8_t *wg, const uint8_t *const *xp, int nt, \
                            float *y, int64_t ldy, const pa_prefetch *stream) {                \
    const pa_ilv_kernel *k = real_ilv[L][T];                                                   \
    const int64_t bs = pa_type_get((pa_type)(T))->block_size;                                  \
    k->run(mode == 1 && cols > bs ? cols - bs : cols, wg, xp, nt, y, ldy, stream);             \
    if (mode == 2)                                                                             \
      for (int t = 0; t < nt; t++)                                                             \
        for (int r = 0; r < k->rows; r++)                                                      \
          if (calls++ % 64 == 0) y[t * ldy + r] = -y[t * ldy + r];                             \
  }
WRAP_ILV(1, 12) WRAP_ILV(1, 13) WRAP_ILV(2, 2) WRAP_ILV(2, 3) WRAP_ILV(2, 6) WRAP_ILV(2, 8)

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: verify_fault MODEL none|tail|sign [MAX_TOKENS]\n");
    return 2;
  }
  if (!strcmp(argv[2], "none"))
    mode = 0;
  else if (!strcmp(argv[2], "tail"))
    mode = 1;
  else if (!strcmp(argv[2], "sign"))
    mode = 2;
  else {
    fprintf(stderr, "verify_fault: unknown mode %s\n", argv[2]);
    return 2;
  }
  static pa_cpu_kernels broken;
  broken = *pa_kernels_best();
  broken.name = "broken";
  pa_vec_dot_fn wrappers[PA_TYPE_COUNT] = {[1] = dot_1,   [2] = dot_2,   [3] = dot_3,   [6] = dot_6,
                                           [7] = dot_7,   [8] = dot_8,   [10] = dot_10, [11] = dot_11,
                                           [12] = dot_12, [13] = dot_13, [14] = dot_14, [30] = dot_30};
  for (int t = 0; t < PA_TYPE_COUNT; t++)
    if (wrappers[t] && broken.vec_dot[t]) {
      real[t] = broken.vec_dot[t];
      broken.vec_dot[t] = wrappers[t];
    }
  const struct {
    int layout, type;
    void (*run)(int64_t, const uint8_t *, const uint8_t *const *, int, float *, int64_t, const pa_prefetch *);
  } ilv[] = {{1, 12, run_1_12}, {1, 13, run_1_13}, {2, 2, run_2_2}, {2, 3, run_2_3}, {2, 6, run_2_6}, {2, 8, run_2_8}};
  for (size_t i = 0; i < sizeof ilv / sizeof ilv[0]; i++) {
    const pa_ilv_kernel *k = broken.ilv[ilv[i].layout][ilv[i].type];
    if (!k) continue;
    real_ilv[ilv[i].layout][ilv[i].type] = k;
    wrapped_ilv[ilv[i].layout][ilv[i].type] = *k;
    wrapped_ilv[ilv[i].layout][ilv[i].type].run = ilv[i].run;
    broken.ilv[ilv[i].layout][ilv[i].type] = &wrapped_ilv[ilv[i].layout][ilv[i].type];
  }
  pa_verify_params p = {.model_path = argv[1], .kernels = &broken, .n_batch = 64,
                        .max_tokens = argc > 3 ? atoi(argv[3]) : 32, .tol = pa_verify_default_tol()};
  pa_verify_result r;
  if (pa_verify_run(&p, &r) != PASADA_OK) {
    fprintf(stderr, "verify_fault: %s\n", pasada_last_error());
    return 1;
  }
  pa_verify_print_json(stdout, &r);
  int rc = r.pass ? 0 : 3;
  pa_verify_result_free(&r);
  return rc;
}
