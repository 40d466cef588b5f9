/* probe.h: what the tools ask of a Vulkan device besides running a model:
 * its own ceilings (read bandwidth and fp32 FMA rate, measured by
 * shaders/probe_read.comp and probe_fma.comp: `pasada bench --device
 * vulkan`), and the GPU time of each shader a context ran (timestamps after
 * every command, vk.h's pa_vk_timing: `pasada profile --device vulkan`).
 * Free of Vulkan types, so src/tools includes it in every build; a build
 * without the Vulkan backend answers PASADA_ERR_UNSUPPORTED (none.c). */
#ifndef PASADA_VULKAN_PROBE_H
#define PASADA_VULKAN_PROBE_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "backend/backend.h"

/* Whether be is a Vulkan backend (pa_backend_vulkan_create). */
static inline bool pa_backend_is_vulkan(const pa_backend *be) {
  return be && be->ops && be->ops->name && !strcmp(be->ops->name, "vulkan");
}

/* The device a Vulkan backend runs on. */
int pa_vulkan_backend_info(const pa_backend *be, pa_device_info *out);

typedef struct {
  pa_device_info dev;
  double read_gbs;     /* best pass, 1e9 bytes/s: a device buffer read once per dispatch */
  uint64_t read_bytes; /* that buffer's size */
  double fma_gflops;   /* best pass, fp32, an FMA counted as 2 FLOP */
  bool timestamps;     /* passes timed by the GPU's timestamps (else the host clock
                          around submission and wait) */
} pa_vulkan_ceilings;

/* Measures the ceilings of the device a Vulkan backend runs on: the read
 * buffer is 256 MiB (64 MiB on a CPU implementation; less where the device
 * has less memory or refuses an allocation that large), each ceiling the
 * best of a few passes of a few milliseconds (tens on a CPU
 * implementation). Allocates its buffers and command pool for the call
 * only. Returns a pasada_status (message set). */
int pa_vulkan_measure_ceilings(const pa_backend *be, pa_vulkan_ceilings *out);

/* GPU time per shader of a context of a Vulkan backend: with timing on,
 * each pass's commands are followed by timestamps and each command's time
 * is added to its shader's total ("matmul_q4_k", "copy" for copies) until
 * reset. Turning it on or off first runs what the context has recorded. */
typedef struct {
  char shader[24];
  double ns;     /* total */
  int64_t count; /* commands */
} pa_vulkan_shader_time;
int pa_vulkan_context_timing(pa_bctx *bc, bool on);
/* Copies up to cap totals into out; returns how many there are. */
int pa_vulkan_context_times(pa_bctx *bc, pa_vulkan_shader_time *out, int cap);
void pa_vulkan_context_times_reset(pa_bctx *bc);

#endif
