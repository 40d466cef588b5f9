/* bench_ceilings.c: the machine's own limits, measured on the threads the
 * benchmark uses: read bandwidth (each thread streams its part of a buffer
 * far larger than the caches with vector loads), the fp32 FMA peak and the
 * int8-dot peak (independent chains in registers). The SIMD variants carry
 * their own target attributes and are picked at run time from pa_cpu(), so
 * the library still builds for baseline x86-64. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "base/base.h"
#include "tools/bench.h"
#if defined(__x86_64__)
#include "kernels/cpu/amx.h"
#endif

/* ---- running one probe on every thread ---- */

typedef enum { PROBE_READ, PROBE_FMA, PROBE_INT8 } probe_kind;

typedef struct probe probe;
typedef struct {
  probe *pr;
  int ith;
} probe_thread;

struct probe {
  probe_kind kind;
  int n_threads;
  pthread_barrier_t barrier;
  /* read */
  uint8_t *buf;
  uint64_t bytes;
  /* compute */
  int64_t iters;
  int isa; /* index into the variant tables below */
  /* timing, written by thread 0 */
  double t0, t1;
  uint64_t sink[256]; /* per-thread results, so no loop is dead code */
};

/* ---- read bandwidth ---- */

static uint64_t read_scalar(const uint8_t *p, uint64_t n) {
  const uint64_t *v = (const uint64_t *)p;
  uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  for (uint64_t i = 0; i + 4 <= n / 8; i += 4) {
    a0 ^= v[i];
    a1 ^= v[i + 1];
    a2 ^= v[i + 2];
    a3 ^= v[i + 3];
  }
  return a0 ^ a1 ^ a2 ^ a3;
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) static uint64_t read_avx2(const uint8_t *p, uint64_t n) {
  const __m256i *v = (const __m256i *)p;
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (uint64_t i = 0; i + 4 <= n / 32; i += 4) {
    a0 = _mm256_xor_si256(a0, _mm256_load_si256(v + i));
    a1 = _mm256_xor_si256(a1, _mm256_load_si256(v + i + 1));
    a2 = _mm256_xor_si256(a2, _mm256_load_si256(v + i + 2));
    a3 = _mm256_xor_si256(a3, _mm256_load_si256(v + i + 3));
  }
  __m256i a = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
  uint64_t out[4];
  _mm256_storeu_si256((__m256i *)out, a);
  return out[0] ^ out[1] ^ out[2] ^ out[3];
}

__attribute__((target("avx512f"))) static uint64_t read_avx512(const uint8_t *p, uint64_t n) {
  const __m512i *v = (const __m512i *)p;
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  for (uint64_t i = 0; i + 4 <= n / 64; i += 4) {
    a0 = _mm512_xor_si512(a0, _mm512_load_si512(v + i));
    a1 = _mm512_xor_si512(a1, _mm512_load_si512(v + i + 1));
    a2 = _mm512_xor_si512(a2, _mm512_load_si512(v + i + 2));
    a3 = _mm512_xor_si512(a3, _mm512_load_si512(v + i + 3));
  }
  __m512i a = _mm512_xor_si512(_mm512_xor_si512(a0, a1), _mm512_xor_si512(a2, a3));
  uint64_t out[8];
  _mm512_storeu_si512(out, a);
  uint64_t r = 0;
  for (int i = 0; i < 8; i++) r ^= out[i];
  return r;
}
#endif

/* ---- compute peaks: independent chains in registers ----
 * Written as inline assembly so the instruction stream is exactly the one
 * counted (a compiler is free to add register copies or spills around
 * three-operand accumulating instructions, and did). Each loop iteration
 * runs every chain once; there are enough chains to cover the instruction's
 * latency on two ports. */

static double fma_scalar(int64_t iters, uint64_t *sink) {
  float acc[8];
  for (int j = 0; j < 8; j++) acc[j] = (float)j;
  for (int64_t i = 0; i < iters; i++)
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) acc[j] = acc[j] * 0.999999f + 1e-6f;
  float s = 0;
  for (int j = 0; j < 8; j++) s += acc[j];
  *sink += (uint64_t)s;
  return (double)iters * 8 * 2;
}

static double int8_scalar(int64_t iters, uint64_t *sink) {
  int32_t acc[8] = {0};
  uint8_t a[8];
  int8_t b[8];
  for (int j = 0; j < 8; j++) {
    a[j] = (uint8_t)(j * 7 + 1);
    b[j] = (int8_t)(j - 3);
  }
  for (int64_t i = 0; i < iters; i++) {
    __asm__ volatile("" : : : "memory");
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) acc[j] += a[j] * b[j];
  }
  for (int j = 0; j < 8; j++) *sink += (uint64_t)acc[j];
  return (double)iters * 8 * 2;
}

#if defined(__x86_64__)
#define REP4(f, a, b, c, d) f(a) f(b) f(c) f(d)

/* fp32 FMA, 512-bit: zmm2..zmm17 = zmm2..17 * zmm0 + zmm1 (x < 1 keeps them finite) */
#define FMA512(r) "vfmadd132ps %%zmm0, %%zmm1, %%zmm" #r "\n\t"
#define MOV512(r) "vmovaps %%zmm1, %%zmm" #r "\n\t"
__attribute__((target("avx512f"))) static double fma_avx512(int64_t iters, uint64_t *sink) {
  float x = 0.999999f, y = 1e-6f;
  int64_t n = iters;
  __asm__ volatile(
      "vbroadcastss %1, %%zmm0\n\t"
      "vbroadcastss %2, %%zmm1\n\t"
      REP4(MOV512, 2, 3, 4, 5) REP4(MOV512, 6, 7, 8, 9) REP4(MOV512, 10, 11, 12, 13) REP4(MOV512, 14, 15, 16, 17)
      "1:\n\t"
      REP4(FMA512, 2, 3, 4, 5) REP4(FMA512, 6, 7, 8, 9) REP4(FMA512, 10, 11, 12, 13) REP4(FMA512, 14, 15, 16, 17)
      "dec %0\n\t"
      "jnz 1b\n\t"
      : "+r"(n)
      : "m"(x), "m"(y)
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
        "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "cc");
  *sink += (uint64_t)n;
  return (double)iters * 16 * 16 * 2;
}

/* fp32 FMA, 256-bit: 12 chains in ymm2..ymm13 (16 registers without AVX-512) */
#define FMA256(r) "vfmadd132ps %%ymm0, %%ymm1, %%ymm" #r "\n\t"
#define MOV256(r) "vmovaps %%ymm1, %%ymm" #r "\n\t"
__attribute__((target("avx2,fma"))) static double fma_avx2(int64_t iters, uint64_t *sink) {
  float x = 0.999999f, y = 1e-6f;
  int64_t n = iters;
  __asm__ volatile(
      "vbroadcastss %1, %%ymm0\n\t"
      "vbroadcastss %2, %%ymm1\n\t"
      REP4(MOV256, 2, 3, 4, 5) REP4(MOV256, 6, 7, 8, 9) REP4(MOV256, 10, 11, 12, 13)
      "1:\n\t"
      REP4(FMA256, 2, 3, 4, 5) REP4(FMA256, 6, 7, 8, 9) REP4(FMA256, 10, 11, 12, 13)
      "dec %0\n\t"
      "jnz 1b\n\t"
      "vzeroupper\n\t"
      : "+r"(n)
      : "m"(x), "m"(y)
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
        "xmm11", "xmm12", "xmm13", "cc");
  *sink += (uint64_t)n;
  return (double)iters * 12 * 8 * 2;
}

/* int8 dot, AVX-512 VNNI: vpdpbusd sums 4 u8 x s8 products into each of 16
 * int32 lanes: 64 multiply-adds (128 ops) per instruction. */
#define DP512(r) "vpdpbusd %%zmm1, %%zmm0, %%zmm" #r "\n\t"
__attribute__((target("avx512f,avx512vnni"))) static double int8_avx512vnni(int64_t iters, uint64_t *sink) {
  int32_t a = 0x05050505, b = 0x03fd03fd;
  int64_t n = iters;
  __asm__ volatile(
      "vpbroadcastd %1, %%zmm0\n\t"
      "vpbroadcastd %2, %%zmm1\n\t"
      REP4(MOV512, 2, 3, 4, 5) REP4(MOV512, 6, 7, 8, 9) REP4(MOV512, 10, 11, 12, 13) REP4(MOV512, 14, 15, 16, 17)
      "1:\n\t"
      REP4(DP512, 2, 3, 4, 5) REP4(DP512, 6, 7, 8, 9) REP4(DP512, 10, 11, 12, 13) REP4(DP512, 14, 15, 16, 17)
      "dec %0\n\t"
      "jnz 1b\n\t"
      : "+r"(n)
      : "m"(a), "m"(b)
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
        "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "cc");
  *sink += (uint64_t)n;
  return (double)iters * 16 * 64 * 2;
}

/* int8 dot, AVX-VNNI (VEX, 256-bit): 32 multiply-adds per instruction. */
#define DP256(r) "%{vex%} vpdpbusd %%ymm1, %%ymm0, %%ymm" #r "\n\t"
__attribute__((target("avx2,avxvnni"))) static double int8_avxvnni(int64_t iters, uint64_t *sink) {
  int32_t a = 0x05050505, b = 0x03fd03fd;
  int64_t n = iters;
  __asm__ volatile(
      "vpbroadcastd %1, %%ymm0\n\t"
      "vpbroadcastd %2, %%ymm1\n\t"
      REP4(MOV256, 2, 3, 4, 5) REP4(MOV256, 6, 7, 8, 9) REP4(MOV256, 10, 11, 12, 13)
      "1:\n\t"
      REP4(DP256, 2, 3, 4, 5) REP4(DP256, 6, 7, 8, 9) REP4(DP256, 10, 11, 12, 13)
      "dec %0\n\t"
      "jnz 1b\n\t"
      "vzeroupper\n\t"
      : "+r"(n)
      : "m"(a), "m"(b)
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
        "xmm11", "xmm12", "xmm13", "cc");
  *sink += (uint64_t)n;
  return (double)iters * 12 * 32 * 2;
}

/* int8 dot, AVX2 (no dot instruction): vpmaddubsw (u8 x s8, pairs summed to
 * s16), vpmaddwd with ones (to s32), vpaddd into the accumulator: 32
 * multiply-adds per step. Six accumulators ymm3..8 with temporaries ymm9..14. */
#define I8STEP(acc, tmp)                         \
  "vpmaddubsw %%ymm1, %%ymm0, %%ymm" #tmp "\n\t" \
  "vpmaddwd %%ymm2, %%ymm" #tmp ", %%ymm" #tmp "\n\t" \
  "vpaddd %%ymm" #tmp ", %%ymm" #acc ", %%ymm" #acc "\n\t"
__attribute__((target("avx2"))) static double int8_avx2(int64_t iters, uint64_t *sink) {
  int32_t a = 0x05050505, b = 0x03fd03fd, ones = 0x00010001;
  int64_t n = iters;
  __asm__ volatile(
      "vpbroadcastd %1, %%ymm0\n\t"
      "vpbroadcastd %2, %%ymm1\n\t"
      "vpbroadcastd %3, %%ymm2\n\t"
      "vpxor %%ymm3, %%ymm3, %%ymm3\n\t"
      "vpxor %%ymm4, %%ymm4, %%ymm4\n\t"
      "vpxor %%ymm5, %%ymm5, %%ymm5\n\t"
      "vpxor %%ymm6, %%ymm6, %%ymm6\n\t"
      "vpxor %%ymm7, %%ymm7, %%ymm7\n\t"
      "vpxor %%ymm8, %%ymm8, %%ymm8\n\t"
      "1:\n\t"
      I8STEP(3, 9) I8STEP(4, 10) I8STEP(5, 11) I8STEP(6, 12) I8STEP(7, 13) I8STEP(8, 14)
      "dec %0\n\t"
      "jnz 1b\n\t"
      "vzeroupper\n\t"
      : "+r"(n)
      : "m"(a), "m"(b), "m"(ones)
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
        "xmm11", "xmm12", "xmm13", "xmm14", "cc");
  *sink += (uint64_t)n;
  return (double)iters * 6 * 32 * 2;
}

/* AMX int8: four independent tile products (16 x 16 int32 += 16 x 64 int8
 * times 64 x 16 int8) in flight, 16 * 16 * 64 multiply-adds each. */
__attribute__((target("amx-tile,amx-int8"))) static double int8_amx(int64_t iters,
                                                                     uint64_t *sink) {
  /* the thread's own tile configuration (the AMX kernels keep theirs
   * loaded between calls) comes back at the end */
  pa_tile_config saved, c;
  _tile_storeconfig(&saved);
  memset(&c, 0, sizeof c);
  c.palette = 1;
  for (int t = 0; t < 8; t++) {
    c.rows[t] = 16;
    c.colsb[t] = 64;
  }
  pa_tile_load_config(&c);
  static const int8_t a[16 * 64] = {1, 2, 3}, b[16 * 64] = {3, 2, 1};
  _Alignas(64) int32_t out[16 * 16];
  _tile_loadd(4, a, 64);
  _tile_loadd(5, b, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t i = 0; i < iters; i++) {
    _tile_dpbssd(0, 4, 5);
    _tile_dpbssd(1, 4, 5);
    _tile_dpbssd(2, 4, 5);
    _tile_dpbssd(3, 4, 5);
  }
  _tile_stored(0, out, 64);
  pa_tile_load_config(&saved); /* palette 0 (none was loaded): the tiles released */
  *sink += (uint64_t)out[0];
  return (double)iters * 4 * 16 * 16 * 64 * 2;
}
#endif

typedef uint64_t (*read_fn)(const uint8_t *, uint64_t);
typedef double (*compute_fn)(int64_t, uint64_t *);

typedef struct {
  const char *name;
  compute_fn fn;
} compute_variant;

/* The best variant of each probe this CPU runs (pa_cpu(), as capped by PASADA_CPU). */
static read_fn pick_read(void) {
#if defined(__x86_64__)
  const pa_cpu_features *c = pa_cpu();
  if (c->avx512f) return read_avx512;
  if (c->avx2) return read_avx2;
#endif
  return read_scalar;
}

uint64_t pa_bench_read(const uint8_t *p, uint64_t n) { return pick_read()(p, n); }

static compute_variant pick_fma(void) {
#if defined(__x86_64__)
  const pa_cpu_features *c = pa_cpu();
  if (c->avx512f) return (compute_variant){"avx512", fma_avx512};
  if (c->avx2 && c->fma) return (compute_variant){"avx2", fma_avx2};
#endif
  return (compute_variant){"scalar", fma_scalar};
}

static compute_variant pick_int8(void) {
#if defined(__x86_64__)
  const pa_cpu_features *c = pa_cpu();
  if (c->amx_int8) return (compute_variant){"amx", int8_amx};
  if (c->avx512f && c->avx512vnni) return (compute_variant){"avx512_vnni", int8_avx512vnni};
  if (c->avx2 && c->avxvnni) return (compute_variant){"avx_vnni", int8_avxvnni};
  if (c->avx2) return (compute_variant){"avx2", int8_avx2};
#endif
  return (compute_variant){"scalar", int8_scalar};
}

static void *probe_main(void *arg) {
  probe_thread *pt = arg;
  probe *pr = pt->pr;
  int ith = pt->ith;
  pthread_barrier_wait(&pr->barrier);
  if (ith == 0) pr->t0 = pa_time_s();
  if (pr->kind == PROBE_READ) {
    /* disjoint, 4 KiB-aligned parts */
    uint64_t pages = pr->bytes / 4096, lo = pages * ith / pr->n_threads, hi = pages * (ith + 1) / pr->n_threads;
    pr->sink[ith] += pick_read()(pr->buf + lo * 4096, (hi - lo) * 4096);
  } else {
    compute_variant v = pr->kind == PROBE_FMA ? pick_fma() : pick_int8();
    v.fn(pr->iters, &pr->sink[ith]);
  }
  pthread_barrier_wait(&pr->barrier);
  if (ith == 0) pr->t1 = pa_time_s();
  return NULL;
}

/* One timed pass of the probe on every thread; returns its wall time. */
static int run_pass(probe *pr, double *seconds) {
  pthread_t th[256];
  probe_thread pts[256];
  int n = pr->n_threads, started = 0;
  if (pthread_barrier_init(&pr->barrier, NULL, (unsigned)n))
    return pa_error(PASADA_ERR_NOMEM, "cannot create a barrier for %d threads", n);
  for (int i = 0; i < n; i++) pts[i] = (probe_thread){pr, i};
  for (int i = 1; i < n; i++) {
    if (pthread_create(&th[i], NULL, probe_main, &pts[i])) break;
    started++;
  }
  if (started != n - 1) {
    /* cannot happen once the barrier counts on them: give up loudly */
    fprintf(stderr, "pasada bench: cannot create probe threads\n");
    exit(1);
  }
  probe_main(&pts[0]);
  for (int i = 1; i < n; i++) pthread_join(th[i], NULL);
  pthread_barrier_destroy(&pr->barrier);
  *seconds = pr->t1 - pr->t0;
  return PASADA_OK;
}

/* The "KEY: N kB" line of a /proc file, in bytes, or 0. fmt: "KEY: %llu kB". */
static uint64_t proc_kb(const char *path, const char *fmt) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  char line[256];
  unsigned long long kb = 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, fmt, &kb) == 1) break;
  fclose(f);
  return (uint64_t)kb * 1024;
}

static uint64_t mem_available(void) { return proc_kb("/proc/meminfo", "MemAvailable: %llu kB"); }

static uint64_t llc_bytes(void) {
  long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (l3 > 0) return (uint64_t)l3;
  long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  return l2 > 0 ? (uint64_t)l2 : 0;
}

/* This process's anonymous memory in 2 MB pages, or 0. */
static uint64_t anon_huge_bytes(void) { return proc_kb("/proc/self/smaps_rollup", "AnonHugePages: %llu kB"); }

/* The read probe's buffer, kept from one measurement to the next by the
 * probes' child (pa_bench_prober). */
typedef struct {
  uint8_t *p;
  uint64_t bytes, huge; /* size, and of it in 2 MB pages */
  bool mapped;          /* by pa_map_huge (else pa_alloc) */
} read_buffer;

static void buffer_release(read_buffer *b) {
  if (b->p) {
    if (b->mapped)
      pa_unmap_huge(b->p, b->bytes);
    else
      pa_free(b->p);
  }
  memset(b, 0, sizeof *b);
}

/* The buffer is mapped as the loader maps a model's weights (pa_map_huge:
 * 2 MB pages where the kernel gives them), so the ceiling is that of the
 * memory the weights are read from: on Zen 3 with 4 KB pages the same loop
 * read 5-9% slower (a TLB miss, and its page walk, every 4 KB). */
static int measure_read(probe *pr, uint64_t bytes, read_buffer *keep, double *gbs,
                        uint64_t *huge) {
  pr->kind = PROBE_READ;
  read_buffer local = {0};
  read_buffer *b = keep ? keep : &local;
  if (b->p && b->bytes != bytes) buffer_release(b);
  if (!b->p) {
    const uint64_t huge0 = anon_huge_bytes();
    b->mapped = true;
    b->p = pa_map_huge(bytes);
    if (!b->p) b->mapped = false, b->p = pa_alloc(bytes);
    if (!b->p)
      return pa_error(PASADA_ERR_NOMEM, "cannot allocate the %.0f MiB bandwidth buffer",
                      (double)bytes / (1 << 20));
    b->bytes = bytes;
    /* nonzero contents, so every page is really backed (no shared zero page) */
    memset(b->p, 0x5a, bytes);
    const uint64_t huge1 = anon_huge_bytes();
    b->huge = huge1 > huge0 ? (huge1 - huge0 < bytes ? huge1 - huge0 : bytes) : 0;
  }
  *huge = b->huge;
  pr->buf = b->p;
  pr->bytes = bytes;
  double best = 0, t;
  int rc = PASADA_OK;
  for (int pass = 0; pass < 6 && !rc; pass++) {
    rc = run_pass(pr, &t);
    /* the first pass is a warm-up (TLB, frequency) */
    if (!rc && pass > 0 && t > 0 && bytes / t > best) best = (double)bytes / t;
  }
  pr->buf = NULL;
  buffer_release(&local);
  *gbs = best / 1e9;
  return rc;
}

/* Calibrates the iteration count to ~0.15 s a pass, then the best of three. */
static int measure_compute(probe *pr, probe_kind kind, double *per_s, const char **isa) {
  pr->kind = kind;
  compute_variant v = kind == PROBE_FMA ? pick_fma() : pick_int8();
  *isa = v.name;
  uint64_t sink = 0;
  double ops_per_iter = v.fn(1, &sink);
  pr->iters = 1 << 16;
  double t = 0;
  int rc;
  for (int tries = 0; tries < 20; tries++) {
    if ((rc = run_pass(pr, &t))) return rc;
    if (t >= 0.02) break;
    pr->iters *= 4;
  }
  if (t > 0) pr->iters = (int64_t)((double)pr->iters * 0.15 / t) + 1;
  double best = 0;
  for (int pass = 0; pass < 3; pass++) {
    if ((rc = run_pass(pr, &t))) return rc;
    double rate = ops_per_iter * (double)pr->iters * pr->n_threads / t;
    if (t > 0 && rate > best) best = rate;
  }
  *per_s = best;
  return PASADA_OK;
}

/* pa_bench_measure_ceilings, reading from *keep's buffer when it holds one
 * (buffer_bytes 0: its size) and leaving the buffer there for the next
 * call; keep NULL: a buffer of this call's own. */
static int measure_ceilings_keep(int n_threads, uint64_t buffer_bytes, read_buffer *keep,
                                 pa_bench_ceilings *out) {
  memset(out, 0, sizeof *out);
  if (n_threads < 1 || n_threads > 256)
    return pa_error(PASADA_ERR_ARG, "thread count %d is out of range [1, 256]", n_threads);
  if (!buffer_bytes && keep && keep->p) buffer_bytes = keep->bytes;
  if (!buffer_bytes) {
    uint64_t avail = mem_available(), llc4 = 4 * llc_bytes();
    buffer_bytes = (uint64_t)1 << 30;
    if (llc4 > buffer_bytes) buffer_bytes = llc4;
    if (avail && buffer_bytes > avail / 4) buffer_bytes = avail / 4;
    if (buffer_bytes < ((uint64_t)64 << 20))
      return pa_error(PASADA_ERR_NOMEM,
                      "only %.0f MiB of memory available: too little to measure the read bandwidth",
                      (double)avail / (1 << 20));
  }
  /* whole pages per thread */
  buffer_bytes -= buffer_bytes % ((uint64_t)4096 * (uint64_t)n_threads);

  probe *pr = pa_calloc(1, sizeof *pr);
  if (!pr) return pa_error(PASADA_ERR_NOMEM, "out of memory");
  pr->n_threads = n_threads;
  out->n_threads = n_threads;
  out->read_bytes = buffer_bytes;
  double flops = 0, ops = 0;
  int rc = measure_read(pr, buffer_bytes, keep, &out->read_gbs, &out->read_huge_bytes);
  if (!rc) rc = measure_compute(pr, PROBE_FMA, &flops, &out->fma_isa);
  if (!rc) rc = measure_compute(pr, PROBE_INT8, &ops, &out->int8_isa);
  out->fma_gflops = flops / 1e9;
  out->int8_gops = ops / 1e9;
  pa_free(pr);
  return rc;
}

int pa_bench_measure_ceilings(int n_threads, uint64_t buffer_bytes, pa_bench_ceilings *out) {
  return measure_ceilings_keep(n_threads, buffer_bytes, NULL, out);
}

/* ---- the probes in a child process ---- */

typedef struct {
  int status;
  char message[512];
  pa_bench_ceilings ceil;
} prober_reply;

static int write_all(int fd, const void *buf, size_t n) {
  const char *p = buf;
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

static int read_all(int fd, void *buf, size_t n) {
  char *p = buf;
  while (n) {
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    p += r;
    n -= (size_t)r;
  }
  return 0;
}

/* The child: waits for a request, measures, answers, and keeps its buffer
 * mapped for the next request; the end of the request pipe (the parent
 * closed it, or died) ends it. */
static void prober_child(int n_threads, int req_fd, int rep_fd) {
  read_buffer buf = {0};
  char c;
  while (read_all(req_fd, &c, 1) == 0) {
    prober_reply rep;
    memset(&rep, 0, sizeof rep);
    rep.status = measure_ceilings_keep(n_threads, 0, &buf, &rep.ceil);
    if (rep.status) snprintf(rep.message, sizeof rep.message, "%s", pa_last_error());
    if (write_all(rep_fd, &rep, sizeof rep)) break;
  }
  buffer_release(&buf);
  _exit(0);
}

static void prober_stop(pa_bench_prober *pr) {
  if (pr->req_fd > 0) close(pr->req_fd);
  if (pr->rep_fd > 0) close(pr->rep_fd);
  if (pr->pid > 0) {
    int wstatus = 0;
    while (waitpid(pr->pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
  }
  pr->pid = pr->req_fd = pr->rep_fd = 0;
}

void pa_bench_prober_start(pa_bench_prober *pr, int n_threads) {
  if (pr->pid > 0) {
    if (pr->n_threads == n_threads) return;
    prober_stop(pr);
  }
  pr->n_threads = n_threads;
  /* requests on a socket, so that one sent to a child that died fails
   * (MSG_NOSIGNAL) instead of killing this process with SIGPIPE */
  int req[2], rep[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, req) != 0) return;
  if (pipe(rep) != 0) {
    close(req[0]), close(req[1]);
    return;
  }
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    close(req[0]), close(req[1]), close(rep[0]), close(rep[1]);
    return;
  }
  if (pid == 0) {
    close(req[1]);
    close(rep[0]);
    prober_child(n_threads, req[0], rep[1]);
  }
  close(req[0]);
  close(rep[1]);
  pr->pid = pid;
  pr->req_fd = req[1];
  pr->rep_fd = rep[0];
}

int pa_bench_prober_measure(pa_bench_prober *pr, int n_threads, pa_bench_ceilings *out) {
  if (n_threads < 1 || n_threads > 256)
    return pa_error(PASADA_ERR_ARG, "thread count %d is out of range [1, 256]", n_threads);
  pa_bench_prober_start(pr, n_threads);
  if (pr->pid <= 0) return pa_bench_measure_ceilings(n_threads, 0, out); /* no child */
  char c = 'm';
  prober_reply rep;
  ssize_t sent;
  while ((sent = send(pr->req_fd, &c, 1, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
  }
  if (sent != 1 || read_all(pr->rep_fd, &rep, sizeof rep)) {
    prober_stop(pr);
    return pa_error(PASADA_ERR_IO, "the ceiling probes' process ended without an answer");
  }
  if (rep.status) return pa_error(rep.status, "%s", rep.message);
  *out = rep.ceil;
  return PASADA_OK;
}

void pa_bench_prober_close(pa_bench_prober *pr) { prober_stop(pr); }
