/* bench_attn.c: decode-shaped attention speed, pa_attn_rows alone, one
 * thread: S sequences of CTX positions in a paged cache of L layers and
 * KV heads of 64 dimensions (SmolLM2's shape by default: 30 layers, 3 KV
 * heads, 3 query heads each), blocks handed out round-robin across the
 * sequences as a server's growing sequences take them. Per pass every
 * (sequence, layer, KV head) once with its G query rows at the last
 * position, as one decode step of S users. Prints ns per pass, GB/s of K
 * and V read, and ticks per 64-position tile and head (the time-stamp
 * counter on x86-64, the generic timer's count on aarch64). Not a test.
 *   cc -O2 -Iinclude -Isrc bench/kernels/bench_attn.c build/libpasada.a \
 *      -lpcre2-8 -lpthread -lm -ldl -o /tmp/bench_attn
 *   /tmp/bench_attn [f16|f32|q8] [CTX (170)] [S (16)] [passes (40)]
 *   env: SHAPE=L,KVH,G,HD (layers, KV heads, query heads per KV head, head
 *   dimension; Gemma 3 270M: 18,1,4,256), BENCH_TABLE=plain|avx2|avx512,
 *   SEQ_MAJOR=1 (each sequence's blocks taken in one run instead of
 *   round-robin), THREADS=N (sequences split over a pool of N threads, each
 *   with its own work area), THRASH=MB (read that many MB before each pass,
 *   so that K and V come from memory with clean caches, as after a model
 *   step's weights), SHARE=K (sequences in runs of K hold the same tokens,
 *   so the cache makes their blocks one: users of one prompt; default 1,
 *   every sequence its own blocks), GROUPED=1 (with SHARE: a task takes a
 *   run's K sequences, head by head, as pa_attention's items do; else a
 *   task is one sequence) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "base/base.h"
#include "base/threadpool.h"
#include "kernels/attention.h"
#include "runtime/kv_cache.h"

static uint64_t ticks(void) {
#if defined(__x86_64__)
  return __rdtsc();
#elif defined(__aarch64__)
  uint64_t v;
  __asm__ volatile("mrs %0, cntvct_el0" : "=r"(v));
  return v;
#else
  return 0;
#endif
}

static uint64_t rs = 88172645463325252ULL;
static float frand(void) {
  rs ^= rs << 13;
  rs ^= rs >> 7;
  rs ^= rs << 17;
  return (float)((int)(rs % 20001) - 10000) * 1e-4f;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

/* One layer's attention of sequence i (all its KV heads), with work area
 * i: one decode step's item as pa_attention hands them out. */
typedef struct {
  const pa_attn_kernels *kt;
  const pa_kv_cache *kv;
  const pa_attn_query *qr;
  char *work;
  size_t wsize;
  int l, L, S, KVH, HD, per_task;
} pass_job;

static void pass_task(void *arg, int i, int n) {
  const pass_job *j = arg;
  (void)n;
  pa_attn_query qr = *j->qr;
  for (int h = 0; h < j->KVH; h++)
    for (int s = i * j->per_task; s < (i + 1) * j->per_task; s++)
      pa_attn_rows(j->kt, j->kv, j->l, s, h, j->HD, j->HD, 0.125f, &qr,
                   j->work + (size_t)(i % 64) * j->wsize);
}

int main(int argc, char **argv) {
  const char *ty = argc > 1 ? argv[1] : "f16";
  const int32_t ctx = argc > 2 ? atoi(argv[2]) : 170, S = argc > 3 ? atoi(argv[3]) : 16;
  const int passes = argc > 4 ? atoi(argv[4]) : 40;
  int32_t L = 30, KVH = 3, G = 3, HD = 64;
  if (getenv("SHAPE") && sscanf(getenv("SHAPE"), "%d,%d,%d,%d", &L, &KVH, &G, &HD) != 4) return 1;
  if (L < 1 || KVH < 1 || KVH > 64 || G < 1 || G > 64 || HD < 1 || HD > 1024) return 1;
  pa_kv_type type = !strcmp(ty, "f32") ? PA_KV_F32 : !strcmp(ty, "q8") ? PA_KV_Q8 : PA_KV_F16;
  const char *tn = getenv("BENCH_TABLE");
  const pa_attn_kernels *kt = !tn                    ? pa_attn_best()
                              : !strcmp(tn, "plain") ? pa_attn_plain()
                              : !strcmp(tn, "avx2")  ? pa_attn_avx2()
                                                     : pa_attn_avx512();
  if (!kt) return 1;
  pa_kv_cache kv;
  const int32_t bs = getenv("BLOCK") ? atoi(getenv("BLOCK")) : 16;
  if (pa_kv_init_host(&kv, L, KVH, HD, HD, type, S, ctx + bs, bs, 0)) return 1;
  float *k = malloc(sizeof(float) * KVH * HD), *v = malloc(sizeof(float) * KVH * HD);
  const int seq_major = getenv("SEQ_MAJOR") != NULL; /* each sequence's blocks contiguous */
  const int share = getenv("SHARE") ? atoi(getenv("SHARE")) : 1;
  if (share < 1 || S % share) return 1;
  for (int32_t i = 0; i < ctx * S; i++) {
    int32_t p = seq_major ? i % ctx : i / S, s = seq_major ? i / ctx : i % S;
    if (pa_kv_reserve(&kv, 1, &s, &p)) return 1;
    for (int l = 0; l < L; l++) {
      for (int e = 0; e < KVH * HD; e++) k[e] = frand(), v[e] = frand();
      pa_kv_store(&kv, l, s, p, k, v);
    }
    int32_t tok = 1 + s / share; /* the same tokens: the cache shares the blocks */
    pa_kv_commit(&kv, 1, &tok, &s, &p);
  }
  const int nth = getenv("THREADS") ? atoi(getenv("THREADS")) : 1;
  pa_pool *pool = nth > 1 ? pa_pool_create(nth) : NULL;
  float *q = malloc(sizeof(float) * G * HD), *out = malloc(sizeof(float) * G * HD * 64);
  for (int i = 0; i < G * HD; i++) q[i] = frand();
  const float *qp[64];
  float *op[64];
  int32_t lo[64], hi[64];
  for (int g = 0; g < G; g++) qp[g] = q + g * HD, op[g] = out + g * HD, lo[g] = 0, hi[g] = ctx - 1;
  char *work = pa_alloc(64 * pa_attn_work_size(G, HD, HD));
  pa_attn_query qr = {.n_rows = G, .q = qp, .out = op, .lo = lo, .hi = hi};
  pass_job pj = {.kt = kt,
                 .kv = &kv,
                 .qr = &qr,
                 .work = work,
                 .wsize = pa_attn_work_size(G, HD, HD),
                 .L = L,
                 .S = S,
                 .KVH = KVH,
                 .HD = HD,
                 .per_task = getenv("GROUPED") ? share : 1};
  const size_t thrash = (size_t)(getenv("THRASH") ? atol(getenv("THRASH")) : 0) << 20;
  uint64_t *junk = thrash ? malloc(thrash) : NULL, sink = 0;
  if (junk) memset(junk, 1, thrash);
  double best = 1e30;
  uint64_t tbest = 0;
  for (int it = 0; it < passes; it++) {
    if (junk)
      for (size_t i = 0; i < thrash / 8; i += 8) sink += junk[i];
    double t0 = now();
    uint64_t c0 = ticks();
    for (pj.l = 0; pj.l < L; pj.l++) {
      if (pool)
        pa_pool_run_tasks(pool, pass_task, &pj, S / pj.per_task);
      else
        for (int32_t s = 0; s < S / pj.per_task; s++) pass_task(&pj, s, S);
    }
    uint64_t c1 = ticks();
    double t = now() - t0;
    if (t < best) best = t, tbest = c1 - c0;
  }
  const double bytes = (double)S * L * KVH * ctx * (double)(kv.values->k_part + kv.values->v_part) / bs;
  const double tiles = (double)S * L * KVH * ((ctx + 63) / 64);
  printf("%s %s ctx %d, %d seqs: %.3f ms per pass, %.2f GB/s, %.0f ticks per tile and head\n",
         kt->name, ty, ctx, S, best * 1e3, bytes / best * 1e-9, (double)tbest / tiles);
  return out[0] == 12345.f || sink == 1;
}
