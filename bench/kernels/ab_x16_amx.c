/* ab_x16_amx.c: two builds of src/kernels/cpu/x16_amx.c (A and B, linked
 * under renamed symbols by bench/kernels/ab-x16-amx) timed in one process,
 * alternating every round, so that both see the same machine: on a shared
 * machine whose speed drifts by 2x from minute to minute, separate runs of
 * the two cannot tell a 10% change. One thread, 16 row groups' worth of
 * random weights per call and the tokens' packed activations; per round,
 * every group of the matrix once. Prints rdtsc ticks per (16 tokens x 16
 * rows x 32 columns) block, min and median per build, the median of the
 * per-round ratios A/B with its quartiles, and whether both builds gave
 * the same bits (they must: same canonical arithmetic).
 *
 * Both builds keep, per thread, the tile configuration they last loaded
 * (x16_amx.c's `configured_nt`), each in its own copy of that variable,
 * so a B whose configuration differs from A's (other tiles) would run on
 * A's after A's pass and give wrong bits: compare such builds with both
 * loading their configuration on every call.
 *
 *   ab_x16_amx [COLS (1536)] [TOKENS (16)] [q4_1|q8_0]
 *   env: AB_GROUPS (48: weights in L2; 4096: beyond), ROUNDS (400),
 *        THRASH=MB (write that many MB before each timed pass, so the
 *        weights come from memory) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <x86intrin.h>

#include "base/base.h"
#include "kernels/x16.h"

extern const pa_ilv_kernel A_q4_1, B_q4_1, A_q8_0, B_q8_0;

static int cmp(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static long env_or(const char *name, long dflt) {
  const char *v = getenv(name);
  return v && *v ? atol(v) : dflt;
}

int main(int argc, char **argv) {
  if (!pa_cpu()->amx_int8) {
    fprintf(stderr, "ab_x16_amx: this CPU (or kernel) gives no AMX\n");
    return 1;
  }
  const int64_t cols = argc > 1 ? atoll(argv[1]) : 1536;
  const int nt = argc > 2 ? atoi(argv[2]) : 16;
  const int q8 = argc > 3 && !strcmp(argv[3], "q8_0");
  const int64_t groups = env_or("AB_GROUPS", 48);
  const int rounds = (int)env_or("ROUNDS", 400);
  const size_t thrash = (size_t)env_or("THRASH", 0) << 20;
  if (cols <= 0 || cols % 32 || nt < 1 || nt > 16 || groups < 1 || rounds < 1) {
    fprintf(stderr, "ab_x16_amx: COLS a multiple of 32, TOKENS 1..16, AB_GROUPS and ROUNDS >= 1\n");
    return 2;
  }
  const pa_ilv_kernel *ks[2] = {q8 ? &A_q8_0 : &A_q4_1, q8 ? &B_q8_0 : &B_q4_1};
  const pa_type type = q8 ? PA_TYPE_Q8_0 : PA_TYPE_Q4_1;
  const size_t rec = pa_x16_rec(type), nb = (size_t)cols / 32;
  uint8_t *w = aligned_alloc(64, (size_t)groups * nb * rec);
  const size_t xs = ks[0]->x_size(cols);
  uint8_t *x = aligned_alloc(64, 16 * xs + 64);
  float *y[2] = {aligned_alloc(64, (size_t)groups * 16 * 16 * 4),
                 aligned_alloc(64, (size_t)groups * 16 * 16 * 4)};
  char *tb = thrash ? malloc(thrash) : NULL;
  double *v[2] = {malloc(sizeof(double) * rounds), malloc(sizeof(double) * rounds)};
  double *ratio = malloc(sizeof(double) * rounds);
  if (!w || !x || !y[0] || !y[1] || (thrash && !tb) || !v[0] || !v[1] || !ratio) {
    fprintf(stderr, "ab_x16_amx: out of memory\n");
    return 1;
  }
  srand(1);
  for (size_t i = 0; i < (size_t)groups * nb * rec; i++) w[i] = (uint8_t)rand();
  /* the records' fp16 scales (after the quants): small, finite values */
  const size_t d_at = q8 ? 512 : 256;
  for (size_t r = 0; r < (size_t)groups * nb; r++)
    for (size_t j = d_at; j < rec; j += 2) {
      const uint16_t h = (uint16_t)(0x1c00 + (rand() & 0x3ff));
      memcpy(w + r * rec + j, &h, 2);
    }
  /* activations: random quants, then per block a float d and (Q8_0) the
   * int32 offset or (Q4_1) the float s */
  for (size_t i = 0; i < 16 * xs; i++) x[i] = (uint8_t)rand();
  for (int t = 0; t < 16; t++)
    for (size_t b = 0; b < nb; b++) {
      const float d = 0.001f * (float)(1 + rand() % 100), s = 0.01f * (float)(rand() % 100 - 50);
      const int32_t off = 128 * (rand() % 200 - 100);
      memcpy(x + t * xs + b * PA_X16_XREC + 32, &d, 4);
      if (q8)
        memcpy(x + t * xs + b * PA_X16_XREC + 36, &off, 4);
      else
        memcpy(x + t * xs + b * PA_X16_XREC + 36, &s, 4);
    }
  const uint8_t *xp[16];
  for (int t = 0; t < 16; t++) xp[t] = x + t * xs;
  for (int r = 0; r < rounds; r++) {
    for (int i = 0; i < 2; i++) {
      const int k = r & 1 ? 1 - i : i; /* alternate which goes first */
      if (tb) memset(tb, r + k, thrash);
      const uint64_t t0 = __rdtsc();
      for (int64_t g = 0; g < groups; g++)
        ks[k]->run(cols, w + (size_t)g * nb * rec, xp, nt, y[k] + g * 16, groups * 16, pa_prefetch_defaults());
      v[k][r] = (double)(__rdtsc() - t0) / (double)((size_t)groups * nb);
    }
    ratio[r] = v[0][r] / v[1][r];
  }
  const int same = !memcmp(y[0], y[1], (size_t)groups * 16 * 16 * 4);
  qsort(v[0], rounds, sizeof(double), cmp);
  qsort(v[1], rounds, sizeof(double), cmp);
  qsort(ratio, rounds, sizeof(double), cmp);
  printf("%s, %lld cols, %d tokens, %lld groups%s: ticks per block A min %.1f median %.1f | "
         "B min %.1f median %.1f | A/B median %.3f (quartiles %.3f %.3f) | bits %s\n",
         q8 ? "Q8_0" : "Q4_1", (long long)cols, nt, (long long)groups, thrash ? ", thrashed" : "",
         v[0][0], v[0][rounds / 2], v[1][0], v[1][rounds / 2], ratio[rounds / 2],
         ratio[rounds / 4], ratio[3 * rounds / 4], same ? "same" : "DIFFER");
  return same ? 0 : 3;
}
