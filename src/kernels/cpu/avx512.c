/* avx512.c: placeholder while the AVX-512 kernels are written. */
#include "kernels/kernels.h"

void pa_kernels_fill_avx512(pa_cpu_kernels *k, int vnni) { (void)k; (void)vnni; }
