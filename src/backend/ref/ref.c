/* ref.c: the reference backend, the specification every other backend is
 * measured against (pasada verify, tests/unit/test_backend_ops.c): weights
 * dequantized to F32 row by row as they are read (in whatever layout the
 * model holds them), activations kept in F32 (no 8-bit quantization),
 * products summed in double (kernels/cpu/exact.c), every op on its own with
 * the plain C kernels, and an F32 KV cache unless a context asks for
 * another. It runs on the host backends' code (src/backend/cpu/cpu.c) with
 * those kernels; slow by design. */
#include "backend/cpu/cpu.h"
#include "base/base.h"

int pa_backend_ref_create(pa_backend **out) {
  pa_cpu_backend dev = {.exact = true, .attn = pa_attn_plain()};
  pa_cpu_exec_init(&dev.ex, pa_kernels_reference(), 0);
  dev.ex.ops = pa_ops_plain();
  return pa_cpu_backend_make(&pa_ref_backend_ops, "ref", &dev, out);
}
