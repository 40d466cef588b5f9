/* layout.h: the interleaved weight layouts (pa_layout in kernels.h) as one
 * interface: which layout a matrix can take, its size, repacking from the
 * file layout, and rows back to floats. Each layout's own header
 * (kernels/x4.h, kernels/x16.h) describes its bytes and its canonical
 * arithmetic. */
#ifndef PASADA_LAYOUT_H
#define PASADA_LAYOUT_H

#include "kernels/kernels.h"

/* Whether a matrix of this type and shape can take an interleaved layout. */
bool pa_layout_fits(pa_layout layout, pa_type type, int64_t rows, int64_t cols);
/* The first interleaved layout, in order of preference, that a matrix of
 * this type and shape fits (whatever the kernel tables hold), or
 * PA_LAYOUT_ROWS. Where a type can take two (Q4_K, Q5_K: groups of 16
 * rows, kernels/x16.h, and of 4, kernels/x4.h), the 16-row one comes
 * first: its one-token kernel spends fewer vector operations per byte; the
 * 4-row one takes the matrices whose rows are not a multiple of 16, and
 * (pa_layout_pick) the tables with no fast 16-row kernel for the type. */
pa_layout pa_layout_for(pa_type type, int64_t rows, int64_t cols);
/* What the loader repacks a matrix into under kernel table k: the first
 * layout in pa_layout_for's order that the matrix fits and k has a fast
 * kernel for (pa_kernels_ilv_fast), or PA_LAYOUT_ROWS. */
pa_layout pa_layout_pick(const pa_cpu_kernels *k, pa_type type, int64_t rows, int64_t cols);
/* Rows per group of the layout (1 for PA_LAYOUT_ROWS). */
int pa_layout_group_rows(pa_layout layout);
/* Bytes of a rows x cols matrix of type in the layout (rows a multiple of
 * the group). */
size_t pa_layout_bytes(pa_layout layout, pa_type type, int64_t rows, int64_t cols);
/* Repacks n_groups groups of rows: src, their rows in file layout; dst,
 * their bytes in the layout (a matrix's groups follow one another in both,
 * so a part of a matrix is repacked by offsetting both pointers).
 * PA_LAYOUT_ROWS: a copy of n_groups rows. */
void pa_layout_repack(pa_layout layout, pa_type type, int64_t cols, const void *src, void *dst,
                      int64_t n_groups);
/* Dequantizes row r of an interleaved matrix (the file's values exactly). */
void pa_layout_get_row(const pa_matrix *w, int64_t r, float *out);

#endif
