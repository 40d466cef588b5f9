/* none.c: the Vulkan entry points (backend.h, probe.h) of a build without
 * the Vulkan backend (CMake's PASADA_VULKAN found no Vulkan headers or
 * glslc, or was OFF). */
#include <string.h>

#include "backend/backend.h"
#include "backend/vulkan/probe.h"
#include "base/base.h"

bool pa_vulkan_built(void) { return false; }

int pa_vulkan_devices(pa_device_info *out, int cap, int *n) {
  (void)out, (void)cap;
  *n = 0;
  return pa_error(PASADA_ERR_UNSUPPORTED, "Vulkan: this build of pasada has no Vulkan backend (build it with the "
                  "Vulkan headers and glslc installed: scripts/setup-deps)");
}

int pa_backend_vulkan_create(int device, pa_backend **out) {
  (void)device;
  *out = NULL;
  int n;
  return pa_vulkan_devices(NULL, 0, &n);
}

/* the tools' probes (probe.h): no Vulkan backend is ever made here */
int pa_vulkan_backend_info(const pa_backend *be, pa_device_info *out) {
  (void)be;
  memset(out, 0, sizeof *out);
  int n;
  return pa_vulkan_devices(NULL, 0, &n);
}

int pa_vulkan_measure_ceilings(const pa_backend *be, pa_vulkan_ceilings *out) {
  (void)be;
  memset(out, 0, sizeof *out);
  int n;
  return pa_vulkan_devices(NULL, 0, &n);
}

int pa_vulkan_context_timing(pa_bctx *bc, bool on) {
  (void)bc, (void)on;
  int n;
  return pa_vulkan_devices(NULL, 0, &n);
}

int pa_vulkan_context_times(pa_bctx *bc, pa_vulkan_shader_time *out, int cap) {
  (void)bc, (void)out, (void)cap;
  return 0;
}

void pa_vulkan_context_times_reset(pa_bctx *bc) { (void)bc; }

int pa_vulkan_prepare_layers(const pa_backend *be, struct pa_model *m, int32_t n_layers, bool output) {
  (void)be, (void)m, (void)n_layers, (void)output;
  int n;
  return pa_vulkan_devices(NULL, 0, &n);
}
