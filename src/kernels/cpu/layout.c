/* layout.c: kernels/layout.h over the layouts' own files (x4.c, x16.c),
 * and the tables' entries for their kernels. */
#include <string.h>

#include "kernels/layout.h"
#include "kernels/x16.h"
#include "kernels/x4.h"

bool pa_layout_fits(pa_layout layout, pa_type type, int64_t rows, int64_t cols) {
  return layout == PA_LAYOUT_K_X4      ? pa_x4_fits(type, rows, cols)
         : layout == PA_LAYOUT_B32_X16 ? pa_x16_fits(type, rows, cols)
                                       : false;
}

/* The interleaved layouts, the preferred first (layout.h). */
static const pa_layout preference[] = {PA_LAYOUT_B32_X16, PA_LAYOUT_K_X4};

pa_layout pa_layout_for(pa_type type, int64_t rows, int64_t cols) {
  for (size_t i = 0; i < sizeof preference / sizeof preference[0]; i++)
    if (pa_layout_fits(preference[i], type, rows, cols)) return preference[i];
  return PA_LAYOUT_ROWS;
}

pa_layout pa_layout_pick(const pa_cpu_kernels *k, pa_type type, int64_t rows, int64_t cols) {
  for (size_t i = 0; i < sizeof preference / sizeof preference[0]; i++)
    if (pa_layout_fits(preference[i], type, rows, cols) &&
        pa_kernels_ilv_fast(k, preference[i], type))
      return preference[i];
  return PA_LAYOUT_ROWS;
}

int pa_layout_group_rows(pa_layout layout) {
  return layout == PA_LAYOUT_K_X4 ? 4 : layout == PA_LAYOUT_B32_X16 ? 16 : 1;
}

size_t pa_layout_bytes(pa_layout layout, pa_type type, int64_t rows, int64_t cols) {
  switch (layout) {
    case PA_LAYOUT_K_X4:
      return pa_x4_bytes(type, rows, cols);
    case PA_LAYOUT_B32_X16:
      return pa_x16_bytes(type, rows, cols);
    default:
      return pa_row_size(type, cols) * (size_t)rows;
  }
}

size_t pa_matrix_bytes(const pa_matrix *w) {
  return pa_layout_bytes(w->layout, w->type, w->rows, w->cols);
}

void pa_layout_repack(pa_layout layout, pa_type type, int64_t cols, const void *src, void *dst,
                      int64_t n_groups) {
  if (layout == PA_LAYOUT_ROWS) memcpy(dst, src, pa_row_size(type, cols) * (size_t)n_groups);
  if (layout == PA_LAYOUT_K_X4) pa_x4_repack(type, cols, src, dst, n_groups);
  if (layout == PA_LAYOUT_B32_X16) pa_x16_repack(type, cols, src, dst, n_groups);
}

void pa_layout_get_row(const pa_matrix *w, int64_t r, float *out) {
  if (w->layout == PA_LAYOUT_K_X4) pa_x4_get_row(w, r, out);
  if (w->layout == PA_LAYOUT_B32_X16) pa_x16_get_row(w, r, out);
}

const pa_ilv_kernel *pa_kernels_ilv(const pa_cpu_kernels *k, pa_layout layout, pa_type type) {
  if (!k || (unsigned)layout >= PA_LAYOUT_COUNT || (unsigned)type >= PA_TYPE_COUNT) return NULL;
  return k->ilv[layout][type];
}

bool pa_kernels_ilv_fast(const pa_cpu_kernels *k, pa_layout layout, pa_type type) {
  const pa_ilv_kernel *p = pa_kernels_ilv(k, layout, type);
  return p && p != pa_kernels_ilv(pa_kernels_reference(), layout, type);
}

#if defined(__x86_64__) /* the kernels below are x86 SIMD (x4_avx*.c, x16_*.c) */
void pa_kernels_fill_ilv_avx2(pa_cpu_kernels *k) {
  k->ilv[PA_LAYOUT_K_X4][PA_TYPE_Q4_K] = &pa_x4_q4k_avx2;
  k->ilv[PA_LAYOUT_K_X4][PA_TYPE_Q5_K] = &pa_x4_q5k_avx2;
  k->ilv[PA_LAYOUT_B32_X16][PA_TYPE_Q8_0] = &pa_x16_avx2_q8_0;
  k->ilv[PA_LAYOUT_B32_X16][PA_TYPE_Q4_0] = &pa_x16_avx2_q4_0;
  k->ilv[PA_LAYOUT_B32_X16][PA_TYPE_Q4_1] = &pa_x16_avx2_q4_1;
  k->ilv[PA_LAYOUT_B32_X16][PA_TYPE_Q5_0] = &pa_x16_avx2_q5_0;
  k->ilv[PA_LAYOUT_B32_X16][PA_TYPE_IQ4_NL] = &pa_x16_avx2_iq4_nl;
  k->ilv[PA_LAYOUT_B32_X16][PA_TYPE_MXFP4] = &pa_x16_avx2_mxfp4;
  k->ilv[PA_LAYOUT_B32_X16][PA_TYPE_IQ4_XS] = &pa_x16_avx2_iq4_xs;
}

void pa_kernels_fill_ilv_avx2_k16(pa_cpu_kernels *k) {
  k->ilv[PA_LAYOUT_K_X4][PA_TYPE_Q6_K] = &pa_x4_q6k_avx2;
  k->ilv[PA_LAYOUT_K_X4][PA_TYPE_Q3_K] = &pa_x4_q3k_avx2;
  k->ilv[PA_LAYOUT_K_X4][PA_TYPE_Q2_K] = &pa_x4_q2k_avx2;
}

void pa_kernels_fill_ilv_vnni(pa_cpu_kernels *k) {
  k->ilv[PA_LAYOUT_K_X4][PA_TYPE_Q4_K] = &pa_x4_q4k_vnni;
  k->ilv[PA_LAYOUT_K_X4][PA_TYPE_Q5_K] = &pa_x4_q5k_vnni;
  k->ilv[PA_LAYOUT_K_X4][PA_TYPE_Q6_K] = &pa_x4_q6k_vnni;
  k->ilv[PA_LAYOUT_K_X4][PA_TYPE_Q3_K] = &pa_x4_q3k_vnni;
  k->ilv[PA_LAYOUT_K_X4][PA_TYPE_Q2_K] = &pa_x4_q2k_vnni;
  k->ilv[PA_LAYOUT_B32_X16][PA_TYPE_Q8_0] = &pa_x16_vnni_q8_0;
  k->ilv[PA_LAYOUT_B32_X16][PA_TYPE_Q4_0] = &pa_x16_vnni_q4_0;
  k->ilv[PA_LAYOUT_B32_X16][PA_TYPE_Q4_1] = &pa_x16_vnni_q4_1;
  k->ilv[PA_LAYOUT_B32_X16][PA_TYPE_Q5_0] = &pa_x16_vnni_q5_0;
  k->ilv[PA_LAYOUT_B32_X16][PA_TYPE_IQ4_NL] = &pa_x16_vnni_iq4_nl;
  k->ilv[PA_LAYOUT_B32_X16][PA_TYPE_MXFP4] = &pa_x16_vnni_mxfp4;
  k->ilv[PA_LAYOUT_B32_X16][PA_TYPE_IQ4_XS] = &pa_x16_vnni_iq4_xs;
  k->ilv[PA_LAYOUT_B32_X16][PA_TYPE_Q4_K] = &pa_x16_vnni_q4_k;
  k->ilv[PA_LAYOUT_B32_X16][PA_TYPE_Q5_K] = &pa_x16_vnni_q5_k;
}

void pa_kernels_fill_ilv_amx(pa_cpu_kernels *k) {
  pa_kernels_fill_ilv_vnni(k);
  k->ilv[PA_LAYOUT_B32_X16][PA_TYPE_Q8_0] = &pa_x16_amx_q8_0;
  k->ilv[PA_LAYOUT_B32_X16][PA_TYPE_Q4_0] = &pa_x16_amx_q4_0;
  k->ilv[PA_LAYOUT_B32_X16][PA_TYPE_Q4_1] = &pa_x16_amx_q4_1;
  k->ilv[PA_LAYOUT_B32_X16][PA_TYPE_Q5_0] = &pa_x16_amx_q5_0;
}
#endif
