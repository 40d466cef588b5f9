/* attn_block.h: what the SIMD pv kernels (attn_avx2.c, attn_avx512.c) set
 * up for a block of rows: per slot its row (a row with an empty range
 * repeats the block's first row that has one: computed, never stored), its
 * range of columns, weights, accumulator and rescale factor; and the
 * columns every slot attends [ca, cb) and any slot attends [a, b). */
#ifndef PASADA_ATTN_BLOCK_H
#define PASADA_ATTN_BLOCK_H

#include <stdbool.h>

#include "kernels/attention.h"

typedef struct {
  int32_t lo[4], hi[4], ca, cb, a, b;
  bool store[4];
  const float *s[4];
  float *acc[4];
  float alpha[4];
} pa_pv_block;

/* Rows r0 .. r0 + nr - 1 (nr <= 4); false when none has a range. */
static inline __attribute__((always_inline)) bool pa_pv_block_init(const pa_attn_tile *t, int32_t r0, int nr, pa_pv_block *p) {
  int32_t f = -1;
  for (int32_t i = 0; i < nr && f < 0; i++)
    if (t->jlo[r0 + i] < t->jhi[r0 + i]) f = r0 + i;
  if (f < 0) return false;
  p->ca = 0;
  p->cb = PA_ATTN_TILE;
  p->a = PA_ATTN_TILE;
  p->b = 0;
  for (int i = 0; i < nr; i++) {
    p->store[i] = t->jlo[r0 + i] < t->jhi[r0 + i];
    const int32_t r = p->store[i] ? r0 + i : f;
    p->lo[i] = t->jlo[r];
    p->hi[i] = t->jhi[r];
    p->s[i] = t->s + (int64_t)r * PA_ATTN_TILE;
    p->acc[i] = t->acc + r * t->acc_stride;
    p->alpha[i] = t->alpha[r];
    p->ca = p->lo[i] > p->ca ? p->lo[i] : p->ca;
    p->cb = p->hi[i] < p->cb ? p->hi[i] : p->cb;
    p->a = p->lo[i] < p->a ? p->lo[i] : p->a;
    p->b = p->hi[i] > p->b ? p->hi[i] : p->b;
  }
  return true;
}

#endif
