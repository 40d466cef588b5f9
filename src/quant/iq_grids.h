/* iq_grids.h: the grid tables of the I-quant types (iq_grids.c, generated
 * by scripts/make-iq-grids.py from the gguf package). Row r of a grid holds
 * its values in bytes 0..7 (0..3 for the IQ3 grids), little-endian: value i
 * is (grid[r] >> 8i) & 0xFF (a signed byte for IQ1). pa_ksigns_iq2xs[k]: 7
 * sign bits k and an eighth making the count of set bits even. */
#ifndef PASADA_IQ_GRIDS_H
#define PASADA_IQ_GRIDS_H

#include <stdint.h>

extern const uint64_t pa_iq2xxs_grid[256];
extern const uint64_t pa_iq2xs_grid[512];
extern const uint64_t pa_iq2s_grid[1024];
extern const uint32_t pa_iq3xxs_grid[256];
extern const uint32_t pa_iq3s_grid[512];
extern const uint64_t pa_iq1s_grid[2048];
extern const uint8_t pa_ksigns_iq2xs[128];

#endif
