/* base.c: error messages, logging, allocation, clocks and CPU features. */
#include "base/base.h"

#include <pthread.h>

#include "base/env.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

static _Thread_local char err_msg[1024];

int pa_error(int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err_msg, sizeof err_msg, fmt, ap);
  va_end(ap);
  return status;
}

void pa_error_prefix(const char *fmt, ...) {
  char prefix[512], old[sizeof err_msg];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  memcpy(old, err_msg, sizeof old);
  size_t n = strlen(prefix);
  if (n > sizeof err_msg - 3) n = sizeof err_msg - 3;
  memcpy(err_msg, prefix, n);
  memcpy(err_msg + n, ": ", 2);
  size_t rest = sizeof err_msg - n - 3;
  size_t m = strlen(old);
  if (m > rest) m = rest;
  memcpy(err_msg + n + 2, old, m);
  err_msg[n + 2 + m] = 0;
}

const char *pa_last_error(void) { return err_msg[0] ? err_msg : "unknown error"; }

static int log_level;
static pthread_once_t log_once = PTHREAD_ONCE_INIT;

static void log_init(void) { log_level = pa_env_log_level(); }

int pa_log_level(void) {
  pthread_once(&log_once, log_init);
  return log_level;
}

void pa_log(int level, const char *fmt, ...) {
  if (level > pa_log_level()) return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

void *pa_alloc(size_t size) {
  void *p = NULL;
  if (size == 0) size = 1;
  size = (size + 63) & ~(size_t)63;
  if (posix_memalign(&p, 64, size) != 0) return NULL;
  return p;
}

void *pa_calloc(size_t n, size_t size) {
  uint64_t total;
  if (!pa_mul_u64(n, size, &total) || total > SIZE_MAX - 64) return NULL;
  void *p = pa_alloc((size_t)total);
  if (p) memset(p, 0, (size_t)total);
  return p;
}

void pa_free(void *p) { free(p); }

void *pa_map_huge(size_t size) {
  const size_t huge = (size_t)2 << 20;
  if (size == 0 || size > SIZE_MAX - 2 * huge) return NULL;
  const size_t len = (size + 4095) / 4096 * 4096;
  uint8_t *map = mmap(NULL, len + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) return NULL;
  uint8_t *p = (uint8_t *)(((uintptr_t)map + huge - 1) & ~(uintptr_t)(huge - 1));
  if (p > map) munmap(map, (size_t)(p - map));
  if (map + len + huge > p + len) munmap(p + len, (size_t)(map + len + huge - (p + len)));
#ifdef MADV_HUGEPAGE
  (void)madvise(p, len, MADV_HUGEPAGE);
#endif
  return p;
}

void pa_unmap_huge(void *p, size_t size) {
  if (p) munmap(p, (size + 4095) / 4096 * 4096);
}

bool pa_populate(void *p, size_t size) {
  if (!p || !size) return true;
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif
  uint8_t *b = p;
  uintptr_t lo = (uintptr_t)b & ~(uintptr_t)4095;
  const size_t len = (size_t)((uintptr_t)b + size - lo);
  if (madvise((void *)lo, len, MADV_POPULATE_WRITE) == 0) return true;
  if (errno == ENOMEM) return false; /* the memory is not there */
  volatile uint8_t *v = b; /* a kernel without it (EINVAL), or one that refuses: a write per page */
  for (size_t i = 0; i < size; i += 4096) v[i] = 0;
  v[size - 1] = 0;
  return true;
}

char *pa_strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *p = malloc(n);
  if (p) memcpy(p, s, n);
  return p;
}

double pa_time_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static pa_cpu_features cpu;
static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;
static void cpu_detect(void);

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
static uint64_t xgetbv0(void) {
  uint32_t a, d;
  __asm__ volatile("xgetbv" : "=a"(a), "=d"(d) : "c"(0));
  return ((uint64_t)d << 32) | a;
}
#endif

/* Read once (the first call from any thread), then constant. */
const pa_cpu_features *pa_cpu(void) {
  pthread_once(&cpu_once, cpu_detect);
  return &cpu;
}

static void cpu_detect(void) {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  if (__get_cpuid(0, &a, &b, &c, &d)) /* "AuthenticAMD" in EBX, EDX, ECX */
    cpu.amd = b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u;
  if (__get_cpuid(1, &a, &b, &c, &d)) {
    bool osxsave = c & (1u << 27);
    uint64_t xcr0 = osxsave ? xgetbv0() : 0;
    bool ymm = (xcr0 & 6) == 6, zmm = (xcr0 & 0xe6) == 0xe6;
    cpu.fma = ymm && (c & (1u << 12));
    cpu.f16c = ymm && (c & (1u << 29));
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
      cpu.avx2 = ymm && (b & (1u << 5));
      cpu.avx512f = zmm && (b & (1u << 16));
      cpu.avx512dq = zmm && (b & (1u << 17));
      cpu.avx512bw = zmm && (b & (1u << 30));
      cpu.avx512vl = zmm && (b & (1u << 31));
      cpu.avx512vnni = zmm && (c & (1u << 11));
      /* AMX: tile and int8 units (EDX 24, 25), tile state enabled (XCR0 17, 18) */
      cpu.amx_int8 = zmm && (d & (1u << 24)) && (d & (1u << 25)) &&
                     (xcr0 & 0x60000) == 0x60000;
    }
    if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) {
      cpu.avxvnni = ymm && (a & (1u << 4));
      cpu.avx512bf16 = zmm && (a & (1u << 5));
    }
  }
  /* PASADA_CPU=scalar|avx2|avx512|avx512_vnni caps the path (tests and comparisons). */
  const char *cap = pa_env_cpu_cap();
  if (cap && !strcmp(cap, "scalar")) {
    const bool amd = cpu.amd;
    memset(&cpu, 0, sizeof cpu);
    cpu.amd = amd;
  }
  if (cap && !strcmp(cap, "avx2")) {
    cpu.avx512f = cpu.avx512bw = cpu.avx512vl = cpu.avx512dq = false;
    cpu.avx512vnni = cpu.avx512bf16 = cpu.amx_int8 = false;
  }
  if (cap && !strcmp(cap, "avx512")) cpu.avx512vnni = cpu.avx512bf16 = cpu.amx_int8 = false;
  if (cap && !strcmp(cap, "avx512_vnni")) cpu.amx_int8 = false;
#if defined(__linux__) && defined(__x86_64__)
  /* Linux hands the tile state (8 KB) only to processes that ask for it:
   * ARCH_REQ_XCOMP_PERM (0x1023) for XFEATURE_XTILEDATA (18). Without the
   * grant the first tile instruction would be a SIGILL. */
  if (cpu.amx_int8 && syscall(SYS_arch_prctl, 0x1023, 18) != 0) cpu.amx_int8 = false;
#elif defined(__x86_64__)
  cpu.amx_int8 = false;
#endif
#endif
}

const char *pa_cpu_describe(void) {
  const pa_cpu_features *f = pa_cpu();
  if (f->avx512f && f->avx512bw && f->avx512vl && f->avx512vnni && f->amx_int8)
    return "AVX512_VNNI+AMX";
  if (f->avx512f && f->avx512bw && f->avx512vl && f->avx512vnni) return "AVX512_VNNI";
  if (f->avx512f && f->avx512bw && f->avx512vl) return "AVX512";
  if (f->avx2 && f->fma) return "AVX2";
  return "scalar";
}
