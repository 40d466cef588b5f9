/* amx.h: the AMX tile configuration (the 64-byte operand of ldtilecfg) and
 * its one safe loader, for the code that programs the tile unit
 * (x16_amx.c, tools/bench_ceilings.c). */
#ifndef PASADA_AMX_H
#define PASADA_AMX_H

#include <immintrin.h>
#include <stdint.h>

typedef struct {
  uint8_t palette, start_row, reserved[14];
  uint16_t colsb[16]; /* bytes per row of tile i */
  uint8_t rows[16];   /* rows of tile i */
} pa_tile_config;

/* ldtilecfg c. gcc 12 takes the instruction's operand for a pointer it does
 * not read and drops the stores that filled *c without the barrier (the
 * tiles then stay unconfigured and the first tile load is a SIGILL). */
static inline __attribute__((always_inline, target("amx-tile"))) void pa_tile_load_config(
    const pa_tile_config *c) {
  __asm__ volatile("" : : "r"(c) : "memory");
  _tile_loadconfig(c);
}

#endif
