/* env.h: every environment variable the engine reads, in one place.
 *
 *   PASADA_CPU=scalar|avx2|avx512|avx512_vnni   caps the instruction sets the
 *       CPU kernels may use (base.c, pa_cpu()); for tests and measurements.
 *   PASADA_LOG=info|debug                       log level (base.c; default:
 *       warnings only).
 *   PASADA_REPACK=0                             keep the file's weight layout
 *       (no interleaved repacking at load; slower decode, for measurements).
 *   PASADA_PREFETCH=BYTES                       every one-token prefetch
 *       distance of the CPU kernels (kernels.h, pa_prefetch);
 *   PASADA_PREFETCH_X4, PASADA_PREFETCH_START, PASADA_PREFETCH_BATCH
 *       one distance each; 0 to 1048576 bytes.
 *   PASADA_API_KEY                              the server's bearer token
 *       (read by `pasada serve` only).
 *   PASADA_VULKAN_LOADER=FILE                   the Vulkan loader the GPU
 *       backend opens (default libvulkan.so.1, then libvulkan.so).
 *   PASADA_TEMPLATE_NOW=SECONDS                 the time (unix seconds) a chat
 *       template's strftime_now() formats, instead of the current time (tests).
 * Values are read when first needed and never change afterwards; a value
 * that does not parse is ignored with a warning. */
#ifndef PASADA_ENV_H
#define PASADA_ENV_H

#include <stdbool.h>
#include <stdint.h>

/* -1: not set */
typedef struct {
  int one_token, x4, start, batch;
} pa_env_prefetch;
void pa_env_get_prefetch(pa_env_prefetch *out);
/* PASADA_REPACK=0 */
bool pa_env_no_repack(void);
/* PASADA_CPU, when it is one of the caps (else NULL, with a warning on
 * stderr for a value that is not) */
const char *pa_env_cpu_cap(void);
/* PASADA_LOG: 0 (unset), 1 info, 2 debug */
int pa_env_log_level(void);
/* PASADA_VULKAN_LOADER, or NULL when unset or empty */
const char *pa_env_vulkan_loader(void);
/* PASADA_TEMPLATE_NOW: true with the seconds when set to an integer */
bool pa_env_template_now(int64_t *out);

#endif
