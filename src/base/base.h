/* base.h: the engine's plumbing shared by every module: status codes with a
 * thread-local error message, logging, aligned allocation, clocks, checked
 * arithmetic and CPU feature detection. */
#ifndef PASADA_BASE_H
#define PASADA_BASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pasada.h" /* pasada_status codes */

/* Records a formatted error message for the calling thread and returns
 * `status`, so a failing function can `return pa_error(PASADA_ERR_FORMAT, ...)`.
 * The message is what the CLI prints on one line. */
int pa_error(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prefixes the current message with "prefix: " (used to add a file name). */
void pa_error_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *pa_last_error(void);

/* Logging to stderr; level 0 = errors only, 1 = info, 2 = debug.
 * PASADA_LOG=debug|info|quiet sets the level. */
void pa_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int pa_log_level(void);

/* 64-byte aligned allocation (cache line, AVX-512 register). NULL on
 * failure; sizes are the caller's checked values. */
void *pa_alloc(size_t size);
void *pa_calloc(size_t n, size_t size); /* checks n*size overflow; zeroed */
void pa_free(void *p);
char *pa_strdup(const char *s);
/* A zeroed mapping of `size` bytes in 2 MB pages where the kernel gives
 * them (transparent huge pages, asked for with madvise, as THP's usual
 * setting wants): it starts on a 2 MB boundary and ends on the next 4 KB
 * one, so that a last, partial 2 MB stays in small pages and costs no
 * memory beyond the bytes. For memory read in scattered pieces or streamed
 * (weights, the KV cache), where with 4 KB pages each page is a TLB miss
 * whose walk misses the cache too. NULL on failure. */
void *pa_map_huge(size_t size);
void pa_unmap_huge(void *p, size_t size); /* the same size */
/* Faults in every page of [p, p + size) for writing now (MADV_POPULATE_WRITE;
 * on a kernel without it, a zero written to each 4 KB page: for memory known
 * to be zero), so the memory is committed here and not on first use; the
 * pages come as madvise asked (pa_map_huge's 2 MB ones). False when the
 * kernel could not supply them (ENOMEM). */
bool pa_populate(void *p, size_t size);

/* Monotonic clock in seconds. */
double pa_time_s(void);

/* Overflow-checked arithmetic: return false when the result does not fit. */
static inline bool pa_mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
  return !__builtin_mul_overflow(a, b, out);
}
static inline bool pa_add_u64(uint64_t a, uint64_t b, uint64_t *out) {
  return !__builtin_add_overflow(a, b, out);
}

/* CPU features detected once at start-up (cpuid + xgetbv). */
typedef struct {
  bool avx2, fma, f16c;
  bool avx512f, avx512bw, avx512vl, avx512dq;
  bool avx512vnni, avx512bf16, avxvnni;
  bool amx_int8; /* AMX-TILE + AMX-INT8, enabled by the OS and granted to the process */
  bool amd;      /* vendor AuthenticAMD (a tuning measured per vendor: kernels.h) */
} pa_cpu_features;
const pa_cpu_features *pa_cpu(void);
/* "AVX512_VNNI", "AVX2", "scalar"...: the best path this CPU takes. */
const char *pa_cpu_describe(void);

#endif
