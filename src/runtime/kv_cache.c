/* kv_cache.c: the paged KV cache with prefix reuse (see kv_cache.h): the
 * block manager, the host storage of the CPU backends, and the reads and
 * writes of values in it. */
#include "runtime/kv_cache.h"

#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "kernels/ops.h"
#include "quant/quant.h"

static uint64_t hash_block(uint64_t parent, const int32_t *tokens, int32_t n) {
  uint64_t h = parent ^ 0x9e3779b97f4a7c15ull;
  for (int32_t i = 0; i < n; i++) {
    h ^= (uint64_t)(uint32_t)tokens[i];
    h *= 0x100000001b3ull;
    h ^= h >> 29;
  }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h ? h : 1;
}

const char *pa_kv_type_name(pa_kv_type type) {
  return type == PA_KV_F16 ? "f16" : type == PA_KV_Q8 ? "q8" : "f32";
}

int pa_kv_init(pa_kv_cache *kv, int32_t n_layer, int32_t n_head_kv, int32_t head_dim_k, int32_t head_dim_v,
               int32_t n_seq, int32_t n_ctx, int32_t block_size, int64_t n_blocks) {
  memset(kv, 0, sizeof *kv);
  if (head_dim_k <= 0 || head_dim_v <= 0 || n_head_kv <= 0)
    return pa_error(PASADA_ERR_ARG, "KV heads of %d x %d/%d values", n_head_kv, head_dim_k, head_dim_v);
  if (n_layer <= 0 || n_layer > 4096) return pa_error(PASADA_ERR_ARG, "a KV cache of %d layers", n_layer);
  pa_kv_shape *shape = malloc((size_t)n_layer * sizeof *shape);
  if (!shape) return pa_error(PASADA_ERR_NOMEM, "out of memory");
  for (int32_t l = 0; l < n_layer; l++) shape[l] = (pa_kv_shape){n_head_kv, head_dim_k, head_dim_v};
  const int rc = pa_kv_init_layers(kv, n_layer, shape, n_seq, n_ctx, block_size, n_blocks);
  free(shape);
  return rc;
}

int pa_kv_init_layers(pa_kv_cache *kv, int32_t n_layer, const pa_kv_shape *shape, int32_t n_seq, int32_t n_ctx,
                      int32_t block_size, int64_t n_blocks) {
  memset(kv, 0, sizeof *kv);
  if (block_size <= 0) block_size = 16;
  if (block_size % 16 != 0 || block_size > 4096)
    return pa_error(PASADA_ERR_ARG, "KV block size %d is not a multiple of 16 in [16, 4096]", block_size);
  int32_t per_seq = (n_ctx + block_size - 1) / block_size;
  if (n_blocks <= 0) n_blocks = (int64_t)per_seq * n_seq;
  if (n_blocks > (1 << 26)) return pa_error(PASADA_ERR_ARG, "too many KV blocks (%lld)", (long long)n_blocks);
  for (int32_t l = 0; l < n_layer; l++)
    if (shape[l].n_head_kv < 0 || (shape[l].n_head_kv > 0 && (shape[l].head_dim_k <= 0 || shape[l].head_dim_v <= 0)))
      return pa_error(PASADA_ERR_ARG, "layer %d: KV heads of %d x %d/%d values", l, shape[l].n_head_kv,
                      shape[l].head_dim_k, shape[l].head_dim_v);
  kv->n_layer = n_layer;
  kv->block_size = block_size;
  kv->n_blocks = (int32_t)n_blocks;
  kv->n_seq = n_seq;
  kv->n_ctx = n_ctx;
  kv->max_blocks_per_seq = per_seq;
  kv->shape = malloc((size_t)n_layer * sizeof *kv->shape);
  if (kv->shape) memcpy(kv->shape, shape, (size_t)n_layer * sizeof *kv->shape);
  size_t nb = (size_t)n_blocks;
  kv->ref = calloc(nb, sizeof(int32_t));
  kv->registered = calloc(nb, 1);
  kv->fill = calloc(nb, sizeof(int32_t));
  kv->hash = calloc(nb, sizeof(uint64_t));
  kv->parent_hash = calloc(nb, sizeof(uint64_t));
  kv->lru = calloc(nb, sizeof(uint64_t));
  kv->tokens = calloc(nb * (size_t)block_size, sizeof(int32_t));
  kv->free_list = malloc(nb * sizeof(int32_t));
  kv->map_cap = 16;
  while (kv->map_cap < 2 * nb) kv->map_cap *= 2;
  kv->map = malloc((size_t)kv->map_cap * sizeof(int32_t));
  kv->table = calloc((size_t)n_seq, sizeof(int32_t *));
  kv->len = calloc((size_t)n_seq, sizeof(int32_t));
  kv->n_seq_blocks = calloc((size_t)n_seq, sizeof(int32_t));
  bool ok = kv->shape && kv->ref && kv->registered && kv->fill && kv->hash && kv->parent_hash && kv->lru && kv->tokens &&
            kv->free_list && kv->map && kv->table && kv->len && kv->n_seq_blocks;
  for (int32_t s = 0; ok && s < n_seq; s++) ok = (kv->table[s] = malloc((size_t)per_seq * sizeof(int32_t)));
  if (!ok) {
    pa_kv_free(kv);
    return pa_error(PASADA_ERR_NOMEM, "out of memory for a KV cache of %lld blocks of %d positions",
                    (long long)n_blocks, block_size);
  }
  for (int32_t i = 0; i < kv->n_blocks; i++) kv->free_list[i] = kv->n_blocks - 1 - i;
  kv->n_free = kv->n_blocks;
  for (uint32_t i = 0; i < kv->map_cap; i++) kv->map[i] = -1;
  return PASADA_OK;
}

/* Host storage: whole parts of block src into block dst, every layer and
 * KV head (K is transposed, so a block's positions are not contiguous). */
static void host_copy_block(pa_kv_values *vals, const pa_kv_cache *kv, int32_t dst, int32_t src) {
  const int64_t nb = kv->n_blocks;
  for (int32_t l = 0; l < kv->n_layer; l++) {
    const int64_t kp = vals->k_part[l], vp = vals->v_part[l];
    for (int64_t h = 0; h < kv->shape[l].n_head_kv; h++) {
      memcpy(vals->k[l] + (h * nb + dst) * kp, vals->k[l] + (h * nb + src) * kp, (size_t)kp);
      memcpy(vals->v[l] + (h * nb + dst) * vp, vals->v[l] + (h * nb + src) * vp, (size_t)vp);
    }
  }
}

void pa_kv_values_free(pa_kv_values *vals) {
  if (!vals) return;
  pa_unmap_huge(vals->mem, vals->mem_bytes);
  free(vals->k);
  free(vals->v);
  free(vals->k_row);
  free(vals);
}

int pa_kv_host_create(const pa_kv_cache *kv, pa_kv_type type, pa_kv_values **out) {
  *out = NULL;
  if (type != PA_KV_F32 && type != PA_KV_F16 && type != PA_KV_Q8)
    return pa_error(PASADA_ERR_ARG, "unknown KV cache type %d", (int)type);
  const int32_t n_layer = kv->n_layer, block_size = kv->block_size;
  for (int32_t l = 0; l < n_layer; l++) {
    const pa_kv_shape *sh = &kv->shape[l];
    if (type == PA_KV_Q8 && sh->n_head_kv > 0 && (sh->head_dim_k % 2 || sh->head_dim_k > 512 || sh->head_dim_v > 512))
      return pa_error(PASADA_ERR_ARG,
                      "a Q8 KV cache needs an even key head dimension and head dimensions of at most 512, not %d/%d",
                      sh->head_dim_k, sh->head_dim_v);
  }
  const size_t elt = type == PA_KV_F16 ? 2 : type == PA_KV_Q8 ? 1 : 4;
  /* a part: its values, then (Q8) a float scale per position */
  const int64_t scales = type == PA_KV_Q8 ? (int64_t)block_size * 4 : 0;
  const size_t nb = (size_t)kv->n_blocks;
  pa_kv_values *vals = calloc(1, sizeof *vals);
  if (!vals) return pa_error(PASADA_ERR_NOMEM, "out of memory");
  vals->type = type;
  vals->elt = elt;
  vals->copy_block = host_copy_block;
  vals->k = calloc((size_t)n_layer, sizeof(uint8_t *));
  vals->v = calloc((size_t)n_layer, sizeof(uint8_t *));
  vals->k_row = calloc(4 * (size_t)n_layer, sizeof(int64_t)); /* k_row, v_row, k_part, v_part */
  if (!vals->k || !vals->v || !vals->k_row) {
    pa_kv_values_free(vals);
    return pa_error(PASADA_ERR_NOMEM, "out of memory");
  }
  vals->v_row = vals->k_row + n_layer, vals->k_part = vals->v_row + n_layer, vals->v_part = vals->k_part + n_layer;
  /* per layer its K then V, each + 64 bytes (SIMD loads of a last row's
   * tail may read, and drop, past it), in 2 MB pages: a step's attention
   * reads blocks scattered over the whole cache; a layer of no heads has
   * none */
  double total_d = 0;
  uint64_t total = 0;
  for (int32_t l = 0; l < n_layer; l++) {
    const pa_kv_shape *sh = &kv->shape[l];
    vals->k_row[l] = (int64_t)sh->n_head_kv * sh->head_dim_k;
    vals->v_row[l] = (int64_t)sh->n_head_kv * sh->head_dim_v;
    vals->k_part[l] = (int64_t)block_size * sh->head_dim_k * (int64_t)elt + scales;
    vals->v_part[l] = (int64_t)block_size * sh->head_dim_v * (int64_t)elt + scales;
    if (sh->n_head_kv == 0) continue;
    total_d += (double)nb * (double)sh->n_head_kv * (double)(vals->k_part[l] + vals->v_part[l]) + 256;
  }
  if (total_d > 0x1p50) {
    pa_kv_values_free(vals);
    return pa_error(PASADA_ERR_ARG, "a KV cache of %lld blocks of %d positions is too large", (long long)nb,
                    block_size);
  }
  for (int32_t l = 0; l < n_layer; l++) {
    if (kv->shape[l].n_head_kv == 0) continue;
    const size_t kl = (nb * (size_t)kv->shape[l].n_head_kv * (size_t)vals->k_part[l] + 64 + 63) & ~(size_t)63;
    const size_t vl = (nb * (size_t)kv->shape[l].n_head_kv * (size_t)vals->v_part[l] + 64 + 63) & ~(size_t)63;
    total += kl + vl;
  }
  vals->bytes = 0;
  for (int32_t l = 0; l < n_layer; l++)
    vals->bytes += (int64_t)nb * kv->shape[l].n_head_kv * (vals->k_part[l] + vals->v_part[l]);
  if (total > 0 && total < SIZE_MAX / 2) {
    vals->mem = pa_map_huge((size_t)total);
    vals->mem_bytes = (size_t)total;
  }
  if (total > 0 && !vals->mem) {
    pa_kv_values_free(vals);
    return pa_error(PASADA_ERR_NOMEM, "out of memory for a KV cache of %lld blocks of %d positions",
                    (long long)nb, block_size);
  }
  size_t at = 0;
  for (int32_t l = 0; l < n_layer; l++) {
    if (kv->shape[l].n_head_kv == 0) continue;
    const size_t kl = (nb * (size_t)kv->shape[l].n_head_kv * (size_t)vals->k_part[l] + 64 + 63) & ~(size_t)63;
    const size_t vl = (nb * (size_t)kv->shape[l].n_head_kv * (size_t)vals->v_part[l] + 64 + 63) & ~(size_t)63;
    vals->k[l] = (uint8_t *)vals->mem + at;
    vals->v[l] = vals->k[l] + kl;
    at += kl + vl;
  }
  /* Committed now, as a server's "memory allocated once at start" means:
   * an overcommitted machine would otherwise fail at some later first
   * store, in the middle of a request, rather than here. (The faults
   * themselves had 4.6% of perf's samples of a 16-user SmolLM2 serving
   * run, a fresh 1 GB pool, the kernel zeroing pages under the KV stores;
   * the run's throughput moved less than its noise without them.) */
  if (vals->mem && !pa_populate(vals->mem, vals->mem_bytes)) {
    const double mib = (double)vals->mem_bytes / (1 << 20);
    pa_kv_values_free(vals);
    return pa_error(PASADA_ERR_NOMEM, "the system could not supply the KV cache's %.0f MiB", mib);
  }
  *out = vals;
  return PASADA_OK;
}

int pa_kv_init_host(pa_kv_cache *kv, int32_t n_layer, int32_t n_head_kv, int32_t head_dim_k, int32_t head_dim_v,
                    pa_kv_type type, int32_t n_seq, int32_t n_ctx, int32_t block_size, int64_t n_blocks) {
  int rc = pa_kv_init(kv, n_layer, n_head_kv, head_dim_k, head_dim_v, n_seq, n_ctx, block_size, n_blocks);
  pa_kv_values *vals = NULL;
  if (!rc) rc = pa_kv_host_create(kv, type, &vals);
  if (rc) {
    pa_kv_free(kv);
    return rc;
  }
  pa_kv_attach(kv, vals);
  kv->owns_values = true;
  return PASADA_OK;
}

void pa_kv_free(pa_kv_cache *kv) {
  if (kv->owns_values) pa_kv_values_free(kv->values);
  if (kv->table)
    for (int32_t s = 0; s < kv->n_seq; s++) free(kv->table[s]);
  void *p[] = {kv->shape, kv->ref, kv->registered, kv->fill, kv->hash, kv->parent_hash, kv->lru,
               kv->tokens, kv->free_list, kv->map, kv->table, kv->len, kv->n_seq_blocks};
  for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) free(p[i]);
  memset(kv, 0, sizeof *kv);
}

/* ---- prefix map ---- */
static int32_t map_find(const pa_kv_cache *kv, uint64_t h) {
  uint32_t mask = kv->map_cap - 1;
  for (uint32_t i = (uint32_t)h & mask, n = 0; n < kv->map_cap; i = (i + 1) & mask, n++) {
    int32_t b = kv->map[i];
    if (b == -1) return -1;
    if (b >= 0 && kv->hash[b] == h) return b;
  }
  return -1;
}

static void map_insert(pa_kv_cache *kv, int32_t block) {
  uint32_t mask = kv->map_cap - 1;
  for (uint32_t i = (uint32_t)kv->hash[block] & mask;; i = (i + 1) & mask)
    if (kv->map[i] < 0) {
      kv->map[i] = block;
      return;
    }
}

static void map_remove(pa_kv_cache *kv, int32_t block) {
  uint32_t mask = kv->map_cap - 1;
  for (uint32_t i = (uint32_t)kv->hash[block] & mask, n = 0; n < kv->map_cap; i = (i + 1) & mask, n++) {
    if (kv->map[i] == -1) return;
    if (kv->map[i] == block) {
      kv->map[i] = -2;
      return;
    }
  }
}

static void unregister(pa_kv_cache *kv, int32_t b) {
  if (!kv->registered[b]) return;
  if (kv->registered[b] == PA_KV_FULL) {
    map_remove(kv, b);
    if (kv->on_event)
      kv->on_event(kv->event_user, &(pa_kv_event){.kind = PA_KV_EVENT_REMOVED, .hash = kv->hash[b]});
  }
  kv->registered[b] = PA_KV_NONE;
  if (kv->ref[b] == 0) kv->n_evictable--;
}

/* ---- block allocation ---- */
int32_t pa_kv_available(const pa_kv_cache *kv) { return kv->n_free + kv->n_evictable; }

int32_t pa_kv_cached_hashes(const pa_kv_cache *kv, uint64_t *hashes, uint64_t *parent_hashes,
                            int32_t max) {
  int32_t n = 0;
  for (int32_t b = 0; b < kv->n_blocks; b++) {
    if (kv->registered[b] != PA_KV_FULL) continue;
    if (n < max) {
      hashes[n] = kv->hash[b];
      if (parent_hashes) parent_hashes[n] = kv->parent_hash[b];
    }
    n++;
  }
  return n;
}

static int32_t take_block(pa_kv_cache *kv) {
  int32_t b = -1;
  if (kv->n_free > 0) {
    b = kv->free_list[--kv->n_free];
  } else {
    uint64_t best = UINT64_MAX;
    for (int32_t i = 0; i < kv->n_blocks; i++)
      if (kv->ref[i] == 0 && kv->registered[i] && kv->lru[i] < best) best = kv->lru[i], b = i;
    if (b < 0) return -1;
    unregister(kv, b);
  }
  kv->ref[b] = 1;
  return b;
}

/* Every layer's K and V of block src into block dst (by the storage), and
 * the tokens of its first `rows` positions. */
static void copy_block(pa_kv_cache *kv, int32_t dst, int32_t src, int32_t rows) {
  if (kv->values) kv->values->copy_block(kv->values, kv, dst, src);
  memcpy(kv->tokens + (int64_t)dst * kv->block_size, kv->tokens + (int64_t)src * kv->block_size,
         (size_t)rows * sizeof(int32_t));
}

/* One more sequence uses block b (a cached block no sequence used stops
 * being evictable); release_block undoes it. */
static void hold_block(pa_kv_cache *kv, int32_t b) {
  if (kv->ref[b] == 0) kv->n_evictable--;
  kv->ref[b]++;
}

/* Whether registered block b holds tk[0..block_size) after the chain ending
 * in hash `parent` (the map's hash alone could collide). */
static bool holds(const pa_kv_cache *kv, int32_t b, uint64_t parent, const int32_t *tk) {
  return kv->parent_hash[b] == parent && !memcmp(kv->tokens + (int64_t)b * kv->block_size, tk,
                                                 (size_t)kv->block_size * sizeof(int32_t));
}

static void release_block(pa_kv_cache *kv, int32_t b) {
  if (--kv->ref[b] > 0) return;
  if (kv->registered[b]) {
    kv->lru[b] = ++kv->clock;
    kv->n_evictable++;
  } else {
    kv->free_list[kv->n_free++] = b;
  }
}

int pa_kv_reserve(pa_kv_cache *kv, int32_t n, const int32_t *seq, const int32_t *pos) {
  /* blocks needed = for each sequence, blocks up to its largest position */
  int64_t need = 0;
  for (int32_t i = 0; i < n; i++) {
    int32_t s = seq[i], nb = pos[i] / kv->block_size + 1;
    bool last = true; /* count each sequence once, at its largest position */
    for (int32_t j = i + 1; j < n; j++)
      if (seq[j] == s && pos[j] >= pos[i]) last = false;
    if (last && nb > kv->n_seq_blocks[s]) need += nb - kv->n_seq_blocks[s];
  }
  if (need > pa_kv_available(kv))
    return pa_error(PASADA_ERR_CONTEXT_FULL, "the KV cache is full: %lld blocks needed, %d available",
                    (long long)need, pa_kv_available(kv));
  for (int32_t i = 0; i < n; i++) {
    int32_t s = seq[i], nb = pos[i] / kv->block_size + 1;
    while (kv->n_seq_blocks[s] < nb) kv->table[s][kv->n_seq_blocks[s]++] = take_block(kv);
  }
  return PASADA_OK;
}

void pa_kv_commit(pa_kv_cache *kv, int32_t n, const int32_t *token, const int32_t *seq,
                  const int32_t *pos) {
  const int32_t bs = kv->block_size;
  for (int32_t i = 0; i < n; i++) {
    int32_t s = seq[i], p = pos[i], b = kv->table[s][p / bs];
    kv->tokens[(int64_t)b * bs + p % bs] = token[i];
    if (p + 1 > kv->len[s]) kv->len[s] = p + 1;
  }
  /* register the blocks that are now full, in order along each sequence */
  for (int32_t i = 0; i < n; i++) {
    int32_t s = seq[i], p = pos[i];
    if ((p + 1) % bs != 0 || p + 1 > kv->len[s]) continue;
    int32_t bi = p / bs, b = kv->table[s][bi];
    if (kv->registered[b]) continue;
    uint64_t parent = bi == 0 ? 0 : kv->hash[kv->table[s][bi - 1]];
    if (bi > 0 && kv->registered[kv->table[s][bi - 1]] != PA_KV_FULL) continue; /* chain broken */
    uint64_t h = hash_block(parent, kv->tokens + (int64_t)b * bs, bs);
    const int32_t d = map_find(kv, h);
    if (d >= 0) {
      /* An identical block is cached already (another sequence computed the
       * same prefix meanwhile): the sequence takes it instead of its own
       * copy, which goes back to the pool, so its later blocks still chain
       * on (a conversation sent again with more turns finds them). b is
       * unregistered, so this sequence's alone; same tokens after the same
       * prefix, so the same values. */
      if (d != b && holds(kv, d, parent, kv->tokens + (int64_t)b * bs)) {
        hold_block(kv, d);
        kv->lru[d] = ++kv->clock;
        kv->table[s][bi] = d;
        release_block(kv, b);
      }
      continue;
    }
    kv->hash[b] = h;
    kv->parent_hash[b] = parent;
    kv->registered[b] = PA_KV_FULL;
    map_insert(kv, b);
    if (kv->on_event)
      kv->on_event(kv->event_user, &(pa_kv_event){.kind = PA_KV_EVENT_STORED,
                                                  .hash = h,
                                                  .parent_hash = parent,
                                                  .tokens = kv->tokens + (int64_t)b * bs,
                                                  .n_tokens = bs});
  }
}

/* How many of tk[0..want) block b holds from its first position on, of
 * its `fill` written positions. */
static int32_t common_run(const pa_kv_cache *kv, int32_t b, int32_t fill, const int32_t *tk,
                          int32_t want) {
  const int32_t *have = kv->tokens + (int64_t)b * kv->block_size;
  const int32_t n = fill < want ? fill : want;
  int32_t m = 0;
  while (m < n && have[m] == tk[m]) m++;
  return m;
}

/* Positions a cached block holds: all of a full one, a tail's fill. */
static int32_t cached_fill(const pa_kv_cache *kv, int32_t b) {
  return kv->registered[b] == PA_KV_TAIL ? kv->fill[b] : kv->block_size;
}

/* Before seq's last block goes back: when it is partial, ours alone and
 * follows a chain of full cached blocks (or starts the sequence), it stays
 * cached as a tail, unless a cached block with the same parent already
 * holds its positions; a shorter tail it extends is freed. */
static void keep_tail(pa_kv_cache *kv, int32_t seq) {
  const int32_t bs = kv->block_size, nb = kv->n_seq_blocks[seq];
  if (nb <= 0) return;
  const int32_t b = kv->table[seq][nb - 1], fill = kv->len[seq] - (nb - 1) * bs;
  if (fill <= 0 || fill >= bs || kv->ref[b] != 1 || kv->registered[b]) return;
  if (nb > 1 && kv->registered[kv->table[seq][nb - 2]] != PA_KV_FULL) return;
  const uint64_t parent = nb > 1 ? kv->hash[kv->table[seq][nb - 2]] : 0;
  const int32_t *tk = kv->tokens + (int64_t)b * bs;
  for (int32_t o = 0; o < kv->n_blocks; o++) {
    if (o == b || !kv->registered[o] || kv->parent_hash[o] != parent) continue;
    const int32_t fo = cached_fill(kv, o);
    const int32_t m = common_run(kv, o, fo, tk, fill);
    if (m == fill) return; /* covered already */
    if (m == fo && kv->registered[o] == PA_KV_TAIL && kv->ref[o] == 0) {
      unregister(kv, o); /* a shorter tail this one extends */
      kv->free_list[kv->n_free++] = o;
    }
  }
  kv->registered[b] = PA_KV_TAIL;
  kv->parent_hash[b] = parent;
  kv->fill[b] = fill;
}

void pa_kv_truncate(pa_kv_cache *kv, int32_t seq, int32_t p0) {
  const int32_t bs = kv->block_size;
  if (p0 >= kv->len[seq]) return;
  int32_t keep = (p0 + bs - 1) / bs; /* blocks holding positions < p0 */
  if (kv->n_seq_blocks[seq] > keep) keep_tail(kv, seq);
  while (kv->n_seq_blocks[seq] > keep) release_block(kv, kv->table[seq][--kv->n_seq_blocks[seq]]);
  kv->len[seq] = p0;
  if (p0 % bs == 0) return;
  /* the last kept block will be written again from p0 on: it must be ours alone */
  int32_t b = kv->table[seq][keep - 1];
  if (kv->ref[b] == 1) {
    unregister(kv, b);
    return;
  }
  int32_t nb = take_block(kv);
  if (nb < 0) { /* no block to copy into: drop the partial block instead */
    release_block(kv, b);
    kv->n_seq_blocks[seq]--;
    kv->len[seq] = (keep - 1) * bs;
    return;
  }
  copy_block(kv, nb, b, p0 % bs);
  release_block(kv, b);
  kv->table[seq][keep - 1] = nb;
}


/* After nb whole blocks (the chain ending in hash `parent`) of an empty
 * sequence: the block that follows the same prefix elsewhere and starts
 * with most of tk[0..want) (a cached full block whose parent is `parent`,
 * or the block at index nb of a running sequence with the same whole
 * blocks before it), its first m positions copied into a block of seq's
 * own. Returns m (0: none, or no block to copy into). */
static int32_t reuse_tail(pa_kv_cache *kv, int32_t seq, int32_t nb, uint64_t parent,
                          const int32_t *tk, int32_t want) {
  const int32_t bs = kv->block_size;
  if (want <= 0 || nb >= kv->max_blocks_per_seq) return 0;
  int32_t best = -1, best_m = 0;
  for (int32_t b = 0; b < kv->n_blocks; b++)
    if (kv->registered[b] && kv->parent_hash[b] == parent) {
      const int32_t m = common_run(kv, b, cached_fill(kv, b), tk, want);
      if (m > best_m) best = b, best_m = m;
    }
  for (int32_t s = 0; s < kv->n_seq; s++) {
    if (s == seq || kv->n_seq_blocks[s] <= nb || kv->len[s] <= nb * bs) continue;
    if (nb > 0) { /* the same whole blocks before it: its previous block is the chain's */
      const int32_t prev = kv->table[s][nb - 1];
      if (kv->registered[prev] != PA_KV_FULL || kv->hash[prev] != parent) continue;
    }
    const int32_t b = kv->table[s][nb],
                  fill = kv->len[s] - nb * bs < bs ? kv->len[s] - nb * bs : bs;
    const int32_t m = common_run(kv, b, fill, tk, want);
    if (m > best_m) best = b, best_m = m;
  }
  if (best < 0) return 0;
  /* held while a block is taken, so that eviction cannot pick it */
  hold_block(kv, best);
  const int32_t dst = take_block(kv);
  release_block(kv, best);
  if (dst < 0) return 0;
  copy_block(kv, dst, best, best_m);
  kv->table[seq][nb] = dst;
  return best_m;
}

int32_t pa_kv_reuse_prefix(pa_kv_cache *kv, int32_t seq, const int32_t *tokens, int32_t n) {
  const int32_t bs = kv->block_size;
  if (kv->len[seq] != 0 || n <= 1) return kv->len[seq];
  uint64_t parent = 0;
  int32_t nb = 0;
  /* whole cached blocks first, leaving at least one token to decode */
  while ((nb + 1) * bs <= n - 1 && nb < kv->max_blocks_per_seq) {
    const int32_t *tk = tokens + (int64_t)nb * bs;
    uint64_t h = hash_block(parent, tk, bs);
    int32_t b = map_find(kv, h);
    if (b < 0 || !holds(kv, b, parent, tk)) break;
    hold_block(kv, b);
    kv->lru[b] = ++kv->clock;
    kv->table[seq][nb++] = b;
    parent = h;
  }
  kv->n_seq_blocks[seq] = nb;
  kv->len[seq] = nb * bs;
  /* then what another block holds of the rest, short of the last token */
  const int32_t m = reuse_tail(kv, seq, nb, parent, tokens + (int64_t)nb * bs, n - 1 - nb * bs);
  if (m > 0) {
    kv->n_seq_blocks[seq] = nb + 1;
    kv->len[seq] += m;
  }
  return kv->len[seq];
}

/* ---- values ---- */

/* Byte of value d of position `off` in a Q8 K part (pairs of d). */
static int64_t q8_k_at(int32_t d, int32_t off, int32_t bs) { return ((int64_t)(d >> 1) * bs + off) * 2 + (d & 1); }

void pa_kv_store_k(const pa_kv_cache *kv, int layer, int32_t seq, int32_t pos, int32_t h,
                   const float *ks) {
  if (kv->values->write) {
    kv->values->write(kv->values, kv, layer, seq, pos, h, ks, NULL);
    return;
  }
  const int32_t hk = kv->shape[layer].head_dim_k, bs = kv->block_size, off = pos % bs;
  const pa_ops_kernels *ops = pa_ops_best();
  uint8_t *kd = pa_kv_k_block(kv, layer, seq, pos, h);
  if (kv->values->type == PA_KV_F16) {
    uint16_t buf[256];
    for (int32_t d0 = 0; d0 < hk; d0 += 256) {
      const int32_t n = hk - d0 < 256 ? hk - d0 : 256;
      ops->f32_to_f16(buf, ks + d0, n);
      for (int32_t d = 0; d < n; d++)
        ((uint16_t *)(void *)kd)[(int64_t)(d0 + d) * bs + off] = buf[d];
    }
  } else if (kv->values->type == PA_KV_Q8) {
    int8_t kq[512];
    pa_kv_k_scales(kv, layer, kd)[off] = ops->q8_row(kq, ks, hk);
    for (int32_t d = 0; d < hk; d++) ((int8_t *)kd)[q8_k_at(d, off, bs)] = kq[d];
  } else {
    for (int32_t d = 0; d < hk; d++) ((float *)(void *)kd)[(int64_t)d * bs + off] = ks[d];
  }
}

void pa_kv_store_v(const pa_kv_cache *kv, int layer, int32_t seq, int32_t pos, int32_t h,
                   const float *vs) {
  if (kv->values->write) {
    kv->values->write(kv->values, kv, layer, seq, pos, h, NULL, vs);
    return;
  }
  const int32_t hv = kv->shape[layer].head_dim_v;
  const pa_ops_kernels *ops = pa_ops_best();
  uint8_t *vd = pa_kv_v_at(kv, layer, seq, pos, h);
  if (kv->values->type == PA_KV_F16) {
    ops->f32_to_f16((uint16_t *)(void *)vd, vs, hv);
  } else if (kv->values->type == PA_KV_Q8) {
    int8_t vq[512];
    *pa_kv_v_scale(kv, layer, seq, pos, h) = ops->q8_row(vq, vs, hv);
    for (int32_t d = 0; d < hv; d++) ((int8_t *)vd)[2 * d] = vq[d];
  } else {
    memcpy(vd, vs, (size_t)hv * sizeof(float));
  }
}

void pa_kv_store(const pa_kv_cache *kv, int layer, int32_t seq, int32_t pos, const float *k,
                 const float *v) {
  const pa_kv_shape *sh = &kv->shape[layer];
  for (int32_t h = 0; h < sh->n_head_kv; h++) {
    pa_kv_store_k(kv, layer, seq, pos, h, k + (int64_t)h * sh->head_dim_k);
    pa_kv_store_v(kv, layer, seq, pos, h, v + (int64_t)h * sh->head_dim_v);
  }
}

void pa_kv_load(const pa_kv_cache *kv, int layer, int32_t seq, int32_t pos, int32_t h, float *k, float *v) {
  if (kv->values->read) {
    kv->values->read(kv->values, kv, layer, seq, pos, h, k, v);
    return;
  }
  uint8_t *ks = pa_kv_k_block(kv, layer, seq, pos, h), *vs = pa_kv_v_at(kv, layer, seq, pos, h);
  const int32_t bs = kv->block_size, off = pos % bs, hk = kv->shape[layer].head_dim_k, hv = kv->shape[layer].head_dim_v;
  if (kv->values->type == PA_KV_F16) {
    const uint16_t *kh = (const uint16_t *)(const void *)ks;
    for (int32_t d = 0; d < hk; d++) k[d] = pa_f16_to_f32(kh[(int64_t)d * bs + off]);
    pa_ops_best()->f16_to_f32(v, (const uint16_t *)(const void *)vs, hv);
  } else if (kv->values->type == PA_KV_Q8) {
    const float sk = pa_kv_k_scales(kv, layer, ks)[off], sv = *pa_kv_v_scale(kv, layer, seq, pos, h);
    for (int32_t d = 0; d < hk; d++) k[d] = (float)((const int8_t *)ks)[q8_k_at(d, off, bs)] * sk;
    for (int32_t d = 0; d < hv; d++) v[d] = (float)((const int8_t *)vs)[2 * d] * sv;
  } else {
    for (int32_t d = 0; d < hk; d++) k[d] = ((const float *)(const void *)ks)[(int64_t)d * bs + off];
    memcpy(v, vs, (size_t)hv * sizeof(float));
  }
}
