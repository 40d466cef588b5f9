/* attention.h: the tiled attention kernels behind the CPU backend's
 * attention op (src/backend/cpu/attention.c): the tile interface its SIMD
 * kernels (src/kernels/cpu/attn_*.c) implement, and the walk over one
 * sequence's cache (pa_attn_rows).
 *
 * A call of pa_attn_rows takes a set of query rows of one sequence that
 * share one KV head (under GQA: several tokens of the sequence times the
 * query heads of that KV head), each with its own causal (and, for sliding
 * window layers, windowed) range of positions [lo, hi], and walks the KV
 * cache in tiles of PA_ATTN_TILE positions, [64k, 64k + 64): the tiles are
 * fixed by position (with the default 16-position blocks a tile is 4 whole
 * blocks, each head's rows of a block contiguous), so a tile's K and V rows
 * are read once for all the rows (an F16 cache's values are converted to
 * floats exactly). Per tile and row, flash-attention style: scores s_j = scale *
 * q . k_j, the running maximum m and sum l, the output accumulator rescaled
 * by exp(m_old - m_new) when m grows; no score matrix over the whole
 * sequence. At the end out = acc / l.
 *
 * A Q8 cache takes integer kernels (qk_q8, pv_q8) whose sums are exact, so
 * every table gives the same bits:
 * - each query row is quantized once per call to 16 bits, q16 = round(q *
 *   32767 / max |q|) (qf = scale * max |q| / 32767); s_j = (qf * (q16 .
 *   kq_j)) * ks_j, an int32 dot product of 16-bit by 8-bit values, times
 *   the position's K scale;
 * - after the softmax, per tile and row, the weights times the V scales,
 *   w_j = s_j * vs_j, are quantized to 16 bits against their largest,
 *   w16_j = (int)(w_j * (32767 / max w) + 0.5) (0 outside the row's range;
 *   wf = max w / 32767), and acc = acc * alpha + wf * (sum_j w16_j vq_j),
 *   the sum in int32.
 * The 16-bit steps add ~1.5e-5 of the row's largest value to each term,
 * well under the cache's own 8-bit rounding. int32 cannot overflow: a
 * tile's 64 weights times |vq| <= 127 stay under 2^28, and a dot product
 * over head_dim <= 512 under 2^31.
 *
 * Segments: positions are cut into segments of PA_ATTN_SEG, [512 k, 512 k
 * + 512). A row's result is computed segment by segment, each from a fresh
 * state (m = -inf, l = 0, acc = 0) over its tiles, and the segments'
 * states are merged in ascending order (m = max(M, m_s), L
 * = L e^(M - m) + l_s e^(m_s - m), ACC likewise), then out = ACC / L. With
 * one segment (positions under 512) that is the single tiled pass above.
 * Because the cut is fixed by position, the segments of one row can run on
 * different threads (pa_attention does so when a batch has too few
 * (token, KV head) items for its threads: a single sequence decoding) and
 * be merged after, with the bits of one thread doing all.
 *
 * Determinism: every step of a row depends on that row's data and range
 * only, never on which other rows share the call (each score is one
 * multiply-add chain over the head dimension in a lane fixed by position,
 * whatever the register block; the weights are summed in lanes fixed by
 * position, and V accumulated in ascending position order), so a token's
 * output has the
 * same bits decoded alone, in a prefill batch or next to other sequences.
 * Different tables (plain, avx2, avx512) agree to rounding only. */
#ifndef PASADA_KERNELS_ATTENTION_H
#define PASADA_KERNELS_ATTENTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/kv_cache.h"

#define PA_ATTN_TILE 64 /* positions per tile; a multiple of 16 */
_Static_assert(PA_ATTN_TILE % 16 == 0, "tiles are whole 16-lane chunks");
#define PA_ATTN_SEG 512 /* positions per segment (see above); a multiple of the tile */
_Static_assert(PA_ATTN_SEG % PA_ATTN_TILE == 0, "segments are whole tiles");

/* One tile, as the kernels see it. Columns j in [0, PA_ATTN_TILE) are the
 * positions tile_start + j; they come in chunks of 16 (16c .. 16c + 15),
 * each inside one KV block. */
#define PA_ATTN_CHUNKS (PA_ATTN_TILE / 16)

/* Cache lines to prefetch: runs of n[i] lines from p[i]. The next tile's
 * K and V, which a table whose kernels spread their prefetches
 * (pa_attn_kernels.spread) asks for a line per step of its inner loops
 * (qk the K, pv the V) while this tile computes: a burst of a tile's lines
 * at once (16 KB of SmolLM2's K and V, 64 KB of Gemma 3's) waits on the
 * core's few outstanding misses instead of computing. The lines go to L2
 * (prefetcht1, locality 2), not L1: on Zen 4, one thread
 * through 16 sequences' K and V of 170 positions from memory
 * (bench_attn) took 3100-3300 ticks per tile and head against 3800-4600
 * with prefetcht0, and `pasada profile` gave SmolLM2's attention 107-139
 * against 161-180 ms per 48 steps of 16 users, 152-173 against 252-277 ms
 * per 64 steps of one user at 3000 positions; the AVX2 table there 4500-
 * 4670 -> 3675 ticks, the Q8 cache's kernels 2450-2500 -> 1970-2030; a
 * tile is still computed from L1 after its first reads. On an Intel CPU
 * with AMX prefetcht0 and t1 were the same (1877-1907 against
 * 1905-1921 ticks, 2 threads from memory) and prefetchnta 1.45x slower in
 * the model. (Other CPUs: not measured.) */
#define PA_ATTN_PF_RUNS 16
typedef struct {
  const char *p[PA_ATTN_PF_RUNS];
  int32_t n[PA_ATTN_PF_RUNS];
  int32_t nr;
} pa_attn_lines;

/* A kernel's cursor over one (a local, kept in registers). */
typedef struct {
  const pa_attn_lines *l;
  const char *p;
  int32_t left, ri;
} pa_attn_pfc;

static inline __attribute__((always_inline)) pa_attn_pfc pa_attn_pfc_start(const pa_attn_lines *l) {
  pa_attn_pfc c = {l, l->nr ? l->p[0] : NULL, l->nr ? l->n[0] : 0, 0};
  return c;
}

static inline __attribute__((always_inline)) void pa_attn_pfc_step(pa_attn_pfc *c) {
  if (c->left <= 0) return;
  __builtin_prefetch(c->p, 0, 2);
  c->p += 64;
  if (--c->left == 0 && ++c->ri < c->l->nr) {
    c->p = c->l->p[c->ri];
    c->left = c->l->n[c->ri];
  }
}

/* the lines the loops did not reach */
static inline void pa_attn_pfc_finish(pa_attn_pfc *c) {
  while (c->left > 0) pa_attn_pfc_step(c);
}

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
  const void *const *v; /* [PA_ATTN_TILE] V rows (set where some row reads; F32, F16) */
  pa_kv_type kind;      /* what K and V hold: floats, IEEE halves, or (Q8) int8
                           quants, in the layouts of kv_cache.h */
  int32_t head_dim, head_dim_v;
  float scale;
  float softcap; /* > 0: the walk soft-caps the scores after qk (pa_attn_softcap_tile) */
  /* Q8 only. K: value d of column 16c + i is byte (d / 2 * k_stride + i) * 2
   * + d % 2 of kc[c]. V: of chunk c, pairs of positions: value d of column
   * 16c + i is byte (i / 2 * head_dim_v + d) * 2 + i % 2 of vc[c]. */
  const void *vc[PA_ATTN_CHUNKS];
  const int16_t *q16; /* [n_rows][q16_stride] the rows' quantized queries */
  int64_t q16_stride;
  const float *qf;    /* [n_rows] s = qf * integer dot product * K scale */
  const float *ks, *vs; /* [PA_ATTN_TILE] the tile's K and V scales by column */
  int16_t *w16;       /* [n_rows][PA_ATTN_TILE] pv_q8's quantized weights */
  float *wf;          /* [n_rows] and their scales */
  /* the next tile's K and V lines, for tables that spread their prefetches
   * (empty for the last tile) */
  const pa_attn_lines *next_k, *next_v;
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
  /* A Q8 cache's (see above): s[r][j] = (qf_r * (q16_r . kq_j)) * ks_j for
   * j in [jlo_r, jhi_r); pv_q8 sets w16 and wf from s and vs, then acc_r =
   * acc_r * alpha_r + wf_r * (sum_j w16[r][j] vq_j) (the two products
   * rounded, then added: no fused multiply-add). Rows with an empty range
   * get w16 = 0 and keep their acc. */
  void (*qk_q8)(const pa_attn_tile *t);
  void (*pv_q8)(const pa_attn_tile *t);
  /* A query row of n values as 16-bit integers (see above; rounded half
   * away from zero, NaN as 0); returns max |q| / 32767. */
  float (*quantize_q)(const float *q, int32_t n, int16_t *q16);
  /* whether qk and pv (qk_q8 and pv_q8) prefetch next_k and next_v, all
   * of them: if not, the next tile's lines are prefetched at once before
   * the tile */
  bool spread, spread_q8;
} pa_attn_kernels;

const pa_attn_kernels *pa_attn_plain(void);
const pa_attn_kernels *pa_attn_avx2(void);   /* NULL when the CPU (as capped by PASADA_CPU) lacks AVX2/FMA */
const pa_attn_kernels *pa_attn_avx512(void); /* NULL when it lacks AVX-512 F */
const pa_attn_kernels *pa_attn_best(void);
/* Filled by attn_avx2.c / attn_avx512.c (the Q8 kernels by attn_q8.c). */
void pa_attn_fill_avx2(pa_attn_kernels *k);
void pa_attn_fill_avx512(pa_attn_kernels *k);
void pa_attn_fill_q8_avx2(pa_attn_kernels *k);
void pa_attn_fill_q8_avx512(pa_attn_kernels *k); /* leaves k alone without AVX-512 BW and VNNI */

/* Query rows of one sequence and one KV head. */
typedef struct {
  int32_t n_rows;
  const float *const *q; /* [n_rows] head_dim floats each */
  float *const *out;     /* [n_rows] head_dim_v floats each */
  const int32_t *lo, *hi; /* [n_rows] positions attended: lo..hi inclusive, lo <= hi */
  /* optional (NULL: none): the lines the caller reads next (the next
   * head's or item's first tile), prefetched while the last tile computes */
  const pa_attn_lines *then_k, *then_v;
  /* optional (NULL: the whole result into out): only segment seg, its
   * state per row into part[r * (head_dim_v + 2)]: m, l, then the
   * head_dim_v floats of acc (not normalized), for the caller to merge */
  float *part;
  int32_t seg;
  /* > 0: every score s = scale * q . k becomes softcap * tanh(s / softcap)
   * before the softmax (Gemma 2); 0: none */
  float softcap;
  /* optional (NULL: none): [n_rows] attention sinks (gpt-oss), each row's
   * extra logit in the softmax's denominator: out = acc / (l + e^(sink -
   * m)) (pa_attn_inv) */
  const float *sink;
} pa_attn_query;

/* The soft-cap step of a tile (s[r][j] = cap * tanh(s[r][j] / cap) for j
 * in [jlo_r, jhi_r), cap = t->softcap), between qk and softmax: one plain
 * function for every table (tanhf per score), so the tables agree on it
 * bit for bit and the SIMD kernels need no twin of it. */
void pa_attn_softcap_tile(const pa_attn_tile *t);


/* Bytes of `work` pa_attn_rows needs for up to n_rows rows. */
size_t pa_attn_work_size(int32_t n_rows, int32_t head_dim, int32_t head_dim_v);
/* Attention of the rows over positions of sequence `seq` in layer `layer`
 * of the cache, KV head kv_head. work: 64-byte aligned. */
void pa_attn_rows(const pa_attn_kernels *kt, const pa_kv_cache *kv, int layer, int32_t seq, int kv_head,
                  int32_t head_dim, int32_t head_dim_v, float scale, const pa_attn_query *qr, void *work);

/* The cache lines of KV head kv_head's K and V values of positions
 * p0..p1 (sequence seq, layer `layer`), as runs. */
void pa_attn_kv_lines(const pa_kv_cache *kv, int layer, int32_t seq, int kv_head, int32_t p0, int32_t p1,
                      pa_attn_lines *lk, pa_attn_lines *lv);
/* The merge of two segments' states of one row (see above): (M, L, ACC)
 * and (m, l, acc) become their union's (M = -inf: none yet); one function
 * for every caller, so one merge order gives one result. */
void pa_attn_merge_row(float *M, float *L, float *restrict ACC, float m, float l, const float *restrict acc,
                       int32_t n);
/* The final normalisation's factor of a row whose state is (m, l): 1 / l,
 * or with a sink (non-NULL) 1 / (l + e^(*sink - m)). */
float pa_attn_inv(float m, float l, const float *sink);
/* o = a * inv, n values (the final normalisation of a row). */
void pa_attn_normalize_row(float *restrict o, const float *restrict a, float inv, int32_t n);

/* Prefetches KV head kv_head's K and V values of positions p0..p1. */
void pa_attn_prefetch(const pa_kv_cache *kv, int layer, int32_t seq, int kv_head, int32_t p0, int32_t p1);

#endif
