/* blocks32_avx512.h: the AVX-512 VNNI kernels for 32-element block types
 * (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) built on whole-block integer sums
 * (blocks32_avx512.c): the prepared one-token dots and the GEMM kernels
 * that give the same bits. Internal to kernels/cpu (avx512.c and
 * gemm_avx512.c put them in the avx512_vnni table). */
#ifndef PASADA_BLOCKS32_AVX512_H
#define PASADA_BLOCKS32_AVX512_H

#include "kernels/kernels.h"

void pa_b32_dot_xs_q4_0(int64_t n, float *out, const void *w, const void *x, const float *xs);
void pa_b32_dot_xs_q4_1(int64_t n, float *out, const void *w, const void *x, const float *xs);
void pa_b32_dot_xs_q5_0(int64_t n, float *out, const void *w, const void *x, const float *xs);
void pa_b32_dot_xs_q5_1(int64_t n, float *out, const void *w, const void *x, const float *xs);
void pa_b32_dot_xs_q8_0(int64_t n, float *out, const void *w, const void *x, const float *xs);

extern const pa_gemm_kernel pa_b32_gemm_q4_0;
extern const pa_gemm_kernel pa_b32_gemm_q4_1;
extern const pa_gemm_kernel pa_b32_gemm_q5_0;
extern const pa_gemm_kernel pa_b32_gemm_q5_1;
extern const pa_gemm_kernel pa_b32_gemm_q8_0;

#endif
