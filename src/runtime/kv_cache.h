/* kv_cache.h: the paged KV cache. One pool of fixed-size blocks per layer
 * (block_size positions of K and of V each); every sequence has a block
 * table. Full blocks are registered in a prefix cache keyed by a hash chain
 * over their tokens and all tokens before them, so a new sequence whose
 * prompt starts the same way attaches them instead of recomputing; after
 * them, the leading positions another block holds of the prompt's rest (a
 * cached block that follows the same prefix, or a running sequence's
 * block at that index) are copied into a block of its own, so a prompt
 * that repeats one ending inside a block recomputes only its last token.
 * A block that fills with the same tokens, after the same prefix, as one
 * already registered (two sequences prefilling one prompt at once) is
 * replaced in its sequence by the registered one and freed, so the
 * sequence's later blocks still join the chain.
 * A block is shared only when full and registered; a sequence writes only
 * into blocks it owns alone (truncating into a shared block copies it
 * first).
 * When a sequence ends (is truncated) inside a block, that partial last
 * block is kept as a cached tail (not in the map: found through its parent
 * hash, like a full block's leading positions), so a prompt that repeats
 * the ended sequence, or continues it (the next turn of a conversation),
 * reuses it to the token; a tail another cached block already covers is
 * freed instead, and a longer tail replaces a shorter one it extends.
 * Blocks no sequence uses but that hold a cached prefix (full or tail) are
 * evicted least recently used first when the pool runs out.
 *
 * The block manager (this header's pa_kv_cache: paging, prefix hashes,
 * LRU, copy-on-write) never reads a value: the values live in storage a
 * backend owns (pa_kv_values), attached to the cache when the backend's
 * context is made, which copies a block's values when the manager asks.
 *
 * Host storage (the CPU backends', pa_kv_host_create): per layer, K and V each [n_head_kv][n_blocks][part] (a KV
 * head's parts of consecutive blocks are contiguous, so a sequence whose
 * blocks came in order, as a lone sequence's do, is one run per head and
 * layer: SmolLM2 decoding at 4000 positions, attention read its K and V at
 * 10.5-11.3 GB/s, against 6.3-9.2 with [n_blocks][n_head_kv][part]), a part
 * holding one KV head's values of a block in the cache's type: F32; IEEE
 * half (F16 halves the memory and the bytes attention reads; values are
 * rounded to nearest even when stored and read back exactly); or Q8, 8-bit
 * integers with one float scale per position and KV head (a quarter of
 * F32's bytes plus the scales: per head and position, scale = max |x| /
 * 127 and q = x / scale rounded to nearest, ties away from zero; read back
 * as q * scale). A part is contiguous: V as rows [block_size][head_dim_v],
 * K transposed, [head_dim_k][block_size] (value d of the block's position
 * i at d * block_size + i), so attention takes the scores of 16 positions
 * at a time with vertical multiply-adds and no horizontal sums. Q8 parts
 * interleave pairs for 16-bit integer dot products (model/attention.h): K
 * as [head_dim_k / 2][block_size][2] (values d and d + 1 of a position
 * side by side; head_dim_k must be even), V as [block_size / 2][head_dim_v]
 * [2] (value d of positions i and i + 1 side by side); each ends with its
 * block_size float scales (K: of the positions' K rows; V: of the V rows).
 * The block size is a multiple of 16. Each layer has its own KV heads and
 * head sizes (pa_kv_shape: Gemma 4's global layers have fewer, wider
 * heads than its sliding ones), and a layer of no heads (one that reads
 * another layer's cache) has no storage. */
#ifndef PASADA_KV_CACHE_H
#define PASADA_KV_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { PA_KV_F32 = 0, PA_KV_F16 = 1, PA_KV_Q8 = 2 } pa_kv_type;
/* A block's place in the prefix cache (pa_kv_cache.registered). */
enum { PA_KV_NONE = 0, PA_KV_FULL = 1, PA_KV_TAIL = 2 };

typedef struct pa_kv_cache pa_kv_cache;

/* A layer's values: n_head_kv heads of head_dim_k K values and head_dim_v
 * V values per position (n_head_kv 0: the layer stores none). */
typedef struct {
  int32_t n_head_kv, head_dim_k, head_dim_v;
} pa_kv_shape;

/* A change of the prefix cache's map of full blocks, for an observer (a
 * server publishing them to a router): a block entered the map (STORED,
 * with its parent's hash, 0 for a sequence's first block, and its
 * block_size tokens) or left it (REMOVED: evicted, or rewritten by the one
 * sequence holding it). Partial tails are not in the map and not reported.
 * Called on the thread that changes the cache; the tokens are valid only
 * during the call. */
enum { PA_KV_EVENT_STORED = 1, PA_KV_EVENT_REMOVED = 2 };
typedef struct {
  int kind;
  uint64_t hash, parent_hash;
  const int32_t *tokens; /* STORED: n_tokens of them; REMOVED: NULL */
  int32_t n_tokens;
} pa_kv_event;
typedef void (*pa_kv_event_fn)(void *user, const pa_kv_event *ev);

/* The cache's values: storage a backend owns. */
typedef struct pa_kv_values {
  pa_kv_type type;
  int64_t bytes;          /* of every block of every layer */
  /* Copies every layer's values of block src into block dst (the manager's
   * copy-on-write and partial-block reuse). */
  void (*copy_block)(struct pa_kv_values *vals, const pa_kv_cache *kv, int32_t dst, int32_t src);
  /* Storage in a device's memory (NULL for host storage): KV head h of
   * position (seq, pos) of a layer written from floats (k or v may be
   * NULL: that half is left alone) and read back as floats, each in the
   * storage's own order with what the device has pending; pa_kv_store*
   * and pa_kv_load call these. */
  void (*write)(struct pa_kv_values *vals, const pa_kv_cache *kv, int layer, int32_t seq, int32_t pos,
                int32_t h, const float *k, const float *v);
  void (*read)(struct pa_kv_values *vals, const pa_kv_cache *kv, int layer, int32_t seq, int32_t pos,
               int32_t h, float *k, float *v);
  /* host storage (pa_kv_host_create; NULL and 0 for another device's) */
  size_t elt;             /* bytes per value: 4, 2 or 1 */
  /* per layer: */
  int64_t *k_row, *v_row;   /* values per position (every head) */
  int64_t *k_part, *v_part; /* bytes of one KV head's part of a block (Q8: with its scales) */
  uint8_t **k, **v;       /* K [n_head_kv][n_blocks][head_dim_k][block_size],
                             V [n_head_kv][n_blocks][block_size][head_dim_v], each part
                             followed by its scales when Q8 */
  void *mem;              /* one mapping (pa_map_huge) holding every layer's K and V */
  size_t mem_bytes;
} pa_kv_values;

/* The block manager. */
struct pa_kv_cache {
  int32_t n_layer, block_size, n_blocks, n_seq, n_ctx, max_blocks_per_seq;
  pa_kv_shape *shape;   /* per layer */
  pa_kv_values *values; /* the backend's storage (pa_kv_attach) */
  bool owns_values;     /* made by pa_kv_init_host: freed with the cache */
  /* per block */
  int32_t *ref;         /* sequences using the block */
  uint8_t *registered;  /* in the prefix cache: PA_KV_FULL (in the map) or PA_KV_TAIL */
  int32_t *fill;        /* a tail's positions written */
  uint64_t *hash, *parent_hash, *lru;
  int32_t *tokens;      /* [n_blocks][block_size] tokens written, for verification */
  int32_t *free_list, n_free;
  int32_t n_evictable;  /* ref == 0 && registered (full or tail) */
  /* prefix cache: open-addressing map hash -> block (-1 empty, -2 deleted) */
  int32_t *map;
  uint32_t map_cap;
  /* per sequence */
  int32_t **table, *len, *n_seq_blocks;
  uint64_t clock;
  pa_kv_event_fn on_event; /* NULL: nobody observes the map */
  void *event_user;
};

/* The block manager of n_blocks blocks of block_size positions (0: 16;
 * n_blocks 0: enough for n_seq sequences of n_ctx), for values of n_layer
 * layers of n_head_kv heads of head_dim_k / head_dim_v; no values yet. */
int pa_kv_init(pa_kv_cache *kv, int32_t n_layer, int32_t n_head_kv, int32_t head_dim_k, int32_t head_dim_v,
               int32_t n_seq, int32_t n_ctx, int32_t block_size, int64_t n_blocks);
/* The same with each layer's shape (copied). */
int pa_kv_init_layers(pa_kv_cache *kv, int32_t n_layer, const pa_kv_shape *shape, int32_t n_seq, int32_t n_ctx,
                      int32_t block_size, int64_t n_blocks);
/* Host storage of `type` for the blocks of kv (in 2 MB pages, committed
 * now: a machine that cannot supply it fails here, not mid-request). */
int pa_kv_host_create(const pa_kv_cache *kv, pa_kv_type type, pa_kv_values **out);
void pa_kv_values_free(pa_kv_values *vals);
static inline void pa_kv_attach(pa_kv_cache *kv, pa_kv_values *vals) { kv->values = vals; }
/* pa_kv_init with host storage of `type` that the cache owns (tests, tools). */
int pa_kv_init_host(pa_kv_cache *kv, int32_t n_layer, int32_t n_head_kv, int32_t head_dim_k, int32_t head_dim_v,
                    pa_kv_type type, int32_t n_seq, int32_t n_ctx, int32_t block_size, int64_t n_blocks);
const char *pa_kv_type_name(pa_kv_type type); /* "f32", "f16", "q8" */
/* Frees the manager (and its values when it owns them). */
void pa_kv_free(pa_kv_cache *kv);

/* Makes sure every (seq, pos) of the batch has a block, all or nothing:
 * PASADA_ERR_CONTEXT_FULL (nothing changed) when the pool cannot supply them. */
int pa_kv_reserve(pa_kv_cache *kv, int32_t n, const int32_t *seq, const int32_t *pos);
/* After a forward pass: records the batch's tokens, advances lengths and
 * registers blocks that became full in the prefix cache (or, for one whose
 * twin is registered already, puts the twin in its place). */
void pa_kv_commit(pa_kv_cache *kv, int32_t n, const int32_t *token, const int32_t *seq,
                  const int32_t *pos);
void pa_kv_truncate(pa_kv_cache *kv, int32_t seq, int32_t p0);
int32_t pa_kv_reuse_prefix(pa_kv_cache *kv, int32_t seq, const int32_t *tokens, int32_t n);
int32_t pa_kv_available(const pa_kv_cache *kv);
/* The hashes of the full blocks in the prefix map (at most max of them into
 * hashes, parents into parent_hashes when non-NULL); returns how many the map
 * holds, which may exceed max. */
int32_t pa_kv_cached_hashes(const pa_kv_cache *kv, uint64_t *hashes, uint64_t *parent_hashes,
                            int32_t max);

/* KV head h's part of the block holding position pos of sequence seq: K
 * (transposed, see above) and V (the first value of pos's row: the next
 * ones follow contiguously, or for Q8 every 2 bytes). */
static inline uint8_t *pa_kv_k_block(const pa_kv_cache *kv, int layer, int32_t seq, int32_t pos, int32_t h) {
  const int64_t b = kv->table[seq][pos / kv->block_size];
  return kv->values->k[layer] + ((int64_t)h * kv->n_blocks + b) * kv->values->k_part[layer];
}
static inline uint8_t *pa_kv_v_at(const pa_kv_cache *kv, int layer, int32_t seq, int32_t pos, int32_t h) {
  const int64_t b = kv->table[seq][pos / kv->block_size];
  const int32_t off = pos % kv->block_size;
  const int64_t hv = kv->shape[layer].head_dim_v;
  return kv->values->v[layer] + ((int64_t)h * kv->n_blocks + b) * kv->values->v_part[layer] +
         (kv->values->type == PA_KV_Q8 ? (int64_t)(off & ~1) * hv + (off & 1) : (int64_t)off * hv * (int64_t)kv->values->elt);
}
/* Q8: the K scales of a K part (pa_kv_k_block's pointer; one per position
 * of the block), and the V scale of position pos. */
static inline float *pa_kv_k_scales(const pa_kv_cache *kv, int layer, uint8_t *k_block) {
  return (float *)(void *)(k_block + (int64_t)kv->block_size * kv->shape[layer].head_dim_k);
}
static inline float *pa_kv_v_scale(const pa_kv_cache *kv, int layer, int32_t seq, int32_t pos, int32_t h) {
  const int64_t b = kv->table[seq][pos / kv->block_size];
  return (float *)(void *)(kv->values->v[layer] + ((int64_t)h * kv->n_blocks + b) * kv->values->v_part[layer] +
                           (int64_t)kv->block_size * kv->shape[layer].head_dim_v) +
         pos % kv->block_size;
}
/* Writes position pos of sequence seq in layer `layer`: the layer's k_row and v_row
 * floats (every head, head after head), converted to the cache's type. */
void pa_kv_store(const pa_kv_cache *kv, int layer, int32_t seq, int32_t pos, const float *k, const float *v);
/* The same for KV head h's K (head_dim_k floats) or V (head_dim_v) alone:
 * pa_kv_store is these for every head. */
void pa_kv_store_k(const pa_kv_cache *kv, int layer, int32_t seq, int32_t pos, int32_t h,
                   const float *k);
void pa_kv_store_v(const pa_kv_cache *kv, int layer, int32_t seq, int32_t pos, int32_t h,
                   const float *v);
/* Reads KV head h of that position back as floats (head_dim_k and
 * head_dim_v of them; tests and references). */
void pa_kv_load(const pa_kv_cache *kv, int layer, int32_t seq, int32_t pos, int32_t h, float *k, float *v);

#endif
