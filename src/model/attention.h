/* attention.h: the tiled attention behind pa_attention (model.h), exposed
 * for its SIMD kernels (src/kernels/cpu/attn_*.c) and the unit test.
 *
 * A call of pa_attn_rows takes a set of query rows of one sequence that
 * share one KV head (under GQA: several tokens of the sequence times the
 * query heads of that KV head), each with its own causal (and, for sliding
 * window layers, windowed) range of positions [lo, hi], and walks the KV
 * cache in tiles of PA_ATTN_TILE positions, [64k, 64k + 64): the tiles are
 * fixed by position (with the default 16-position blocks a tile is 4 whole
 * blocks, each head's rows of a block contiguous), so a tile's K and V rows
 * are read once for all the rows (an F16 cache's values are converted to
 * floats exactly; a Q8 cache's int8 quants are used as floats, and pa_attn_rows
 * applies their scales: s_j = scale * q . kq_j then s_j *= ks_j, and after the
 * softmax w_j *= vs_j). Per tile and row, flash-attention style: scores s_j = scale *
 * q . k_j, the running maximum m and sum l, the output accumulator rescaled
 * by exp(m_old - m_new) when m grows; no score matrix over the whole
 * sequence. At the end out = acc / l.
 *
 * Determinism: every step of a row depends on that row's data and range
 * only, never on which other rows share the call (each score is one
 * multiply-add chain over the head dimension in a lane fixed by position,
 * whatever the register block; the weights are summed in lanes fixed by
 * position, and V accumulated in ascending position order), so a token's
 * output has the
 * same bits decoded alone, in a prefill batch or next to other sequences.
 * Different tables (plain, avx2, avx512) agree to rounding only. */
#ifndef PASADA_ATTENTION_H
#define PASADA_ATTENTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/model.h"
#include "runtime/kv_cache.h"

#define PA_ATTN_TILE 64 /* positions per tile; a multiple of 16 */
_Static_assert(PA_ATTN_TILE % 16 == 0, "tiles are whole 16-lane chunks");

/* One tile, as the kernels see it. Columns j in [0, PA_ATTN_TILE) are the
 * positions tile_start + j; they come in chunks of 16 (16c .. 16c + 15),
 * each inside one KV block. */
#define PA_ATTN_CHUNKS (PA_ATTN_TILE / 16)
typedef struct {
  int32_t n_rows;
  const float *const *q;    /* [n_rows] query rows of head_dim floats */
  const int32_t *jlo, *jhi; /* [n_rows] the row's columns [jlo, jhi) in this tile; empty: jlo >= jhi */
  float *s;                 /* [n_rows][PA_ATTN_TILE] scores, then weights */
  float *m, *l, *alpha;     /* [n_rows] running max, running sum, this tile's rescale factor */
  float *acc;               /* [n_rows][acc_stride] output accumulators */
  int64_t acc_stride;
  /* K, transposed: value d of column 16c + i is element d * k_stride + i of
   * kc[c] (set for the chunks some row reads; the chunk's 16 columns are
   * all readable; those outside a row's range may hold anything, even
   * NaN bit patterns in a block never written there: softmax masks them) */
  const void *kc[PA_ATTN_CHUNKS];
  int64_t k_stride;
  const void *const *v; /* [PA_ATTN_TILE] V rows (set where some row reads) */
  pa_kv_type kind;      /* what K and V hold: floats, IEEE halves, or (Q8) int8
                           quants whose scales the kernels never see: pa_attn_rows
                           multiplies the scores by the K scales after qk, and
                           the weights by the V scales after softmax */
  int32_t head_dim, head_dim_v;
  float scale;
} pa_attn_tile;

/* Rows with an empty range are left alone by every function. */
typedef struct {
  const char *name; /* "plain", "avx2", "avx512" */
  /* s[r][j] = scale * (q_r . k_j) for j in [jlo_r, jhi_r) (other columns
   * of the tile: anything; each dot product is one multiply-add chain over
   * d = 0, 1, ... in the SIMD tables) */
  void (*qk)(const pa_attn_tile *t);
  /* the online softmax step: m_r = max(m_r, max_j s[r][j]); alpha_r =
   * exp(m_old - m_r) (1 when m did not grow); s[r][j] = exp(s[r][j] - m_r)
   * for j in [jlo, jhi); l_r = l_r * alpha_r + sum_j s[r][j] */
  void (*softmax)(const pa_attn_tile *t);
  /* acc_r = acc_r * alpha_r + sum_j s[r][j] v_j, j ascending in [jlo, jhi) */
  void (*pv)(const pa_attn_tile *t);
} pa_attn_kernels;

const pa_attn_kernels *pa_attn_plain(void);
const pa_attn_kernels *pa_attn_avx2(void);   /* NULL when the CPU (as capped by PASADA_CPU) lacks AVX2/FMA */
const pa_attn_kernels *pa_attn_avx512(void); /* NULL when it lacks AVX-512 F */
const pa_attn_kernels *pa_attn_best(void);
/* What pa_attention uses: the forced table, or the best (NULL restores it). */
void pa_attn_set(const pa_attn_kernels *k);
const pa_attn_kernels *pa_attn_current(void);
/* Filled by attn_avx2.c / attn_avx512.c. */
void pa_attn_fill_avx2(pa_attn_kernels *k);
void pa_attn_fill_avx512(pa_attn_kernels *k);

/* Query rows of one sequence and one KV head. */
typedef struct {
  int32_t n_rows;
  const float *const *q; /* [n_rows] head_dim floats each */
  float *const *out;     /* [n_rows] head_dim_v floats each */
  const int32_t *lo, *hi; /* [n_rows] positions attended: lo..hi inclusive, lo <= hi */
} pa_attn_query;

/* Bytes of `work` pa_attn_rows needs for up to n_rows rows. */
size_t pa_attn_work_size(int32_t n_rows, int32_t head_dim_v);
/* Attention of the rows over positions of sequence `seq` in layer `layer`
 * of the cache, KV head kv_head. work: 64-byte aligned. */
void pa_attn_rows(const pa_attn_kernels *kt, const pa_kv_cache *kv, int layer, int32_t seq, int kv_head,
                  int32_t head_dim, int32_t head_dim_v, float scale, const pa_attn_query *qr, void *work);

/* Prefetches KV head kv_head's K and V values of positions p0..p1. */
void pa_attn_prefetch(const pa_kv_cache *kv, int layer, int32_t seq, int kv_head, int32_t p0, int32_t p1);

/* Bytes of the context's attention scratch (pa_scratch.scores) pa_attention
 * needs. */
size_t pa_attention_scratch_size(int32_t n_threads, int32_t n_batch, int32_t n_seq_max, const pa_hparams *hp);

#endif
