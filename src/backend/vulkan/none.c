/* none.c: the Vulkan entry points of a build without the Vulkan backend
 * (CMake's PASADA_VULKAN found no Vulkan headers or glslc, or was OFF). */
#include "backend/backend.h"
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
