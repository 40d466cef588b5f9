/* kv_cache.h: the paged KV cache. One pool of fixed-size blocks per layer
 * (block_size positions of K and of V each); every sequence has a block
 * table. Full blocks are registered in a prefix cache keyed by a hash chain
 * over their tokens and all tokens before them, so a new sequence whose
 * prompt starts the same way attaches them instead of recomputing. A block
 * is shared only when full and registered; a sequence writes only into
 * blocks it owns alone (truncating into a shared block copies it first).
 * Blocks no sequence uses but that hold a cached prefix are evicted least
 * recently used first when the pool runs out. */
#ifndef PASADA_KV_CACHE_H
#define PASADA_KV_CACHE_H

#include <stdbool.h>
#include <stdint.h>

typedef struct {
  int32_t n_layer, block_size, n_blocks, n_seq, n_ctx, max_blocks_per_seq;
  int64_t k_row, v_row; /* floats per position */
  float **k, **v;       /* per layer: [n_blocks][block_size][k_row or v_row] */
  /* per block */
  int32_t *ref;         /* sequences using the block */
  uint8_t *registered;  /* in the prefix cache */
  uint64_t *hash, *parent_hash, *lru;
  int32_t *tokens;      /* [n_blocks][block_size] tokens written, for verification */
  int32_t *free_list, n_free;
  int32_t n_evictable;  /* ref == 0 && registered */
  /* prefix cache: open-addressing map hash -> block (-1 empty, -2 deleted) */
  int32_t *map;
  uint32_t map_cap;
  /* per sequence */
  int32_t **table, *len, *n_seq_blocks;
  uint64_t clock;
} pa_kv_cache;

int pa_kv_init(pa_kv_cache *kv, int32_t n_layer, int64_t k_row, int64_t v_row, int32_t n_seq,
               int32_t n_ctx, int32_t block_size, int64_t n_blocks);
void pa_kv_free(pa_kv_cache *kv);

/* Makes sure every (seq, pos) of the batch has a block, all or nothing:
 * PASADA_ERR_CONTEXT_FULL (nothing changed) when the pool cannot supply them. */
int pa_kv_reserve(pa_kv_cache *kv, int32_t n, const int32_t *seq, const int32_t *pos);
/* After a forward pass: records the batch's tokens, advances lengths and
 * registers blocks that became full in the prefix cache. */
void pa_kv_commit(pa_kv_cache *kv, int32_t n, const int32_t *token, const int32_t *seq,
                  const int32_t *pos);
void pa_kv_truncate(pa_kv_cache *kv, int32_t seq, int32_t p0);
int32_t pa_kv_reuse_prefix(pa_kv_cache *kv, int32_t seq, const int32_t *tokens, int32_t n);
int32_t pa_kv_available(const pa_kv_cache *kv);

static inline float *pa_kv_k(const pa_kv_cache *kv, int layer, int32_t seq, int32_t pos) {
  int32_t b = kv->table[seq][pos / kv->block_size];
  return kv->k[layer] + ((int64_t)b * kv->block_size + pos % kv->block_size) * kv->k_row;
}
static inline float *pa_kv_v(const pa_kv_cache *kv, int layer, int32_t seq, int32_t pos) {
  int32_t b = kv->table[seq][pos / kv->block_size];
  return kv->v[layer] + ((int64_t)b * kv->block_size + pos % kv->block_size) * kv->v_row;
}

#endif
