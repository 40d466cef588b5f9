/* kernels.h: the op interface the model code is written against.
 *
 * Matrix products dispatch on the weight type: activations are converted
 * once per op to the weight type's vec_dot_type (quant/quant.h), then each
 * output is one fused dequantize-and-dot over a weight row. A backend is a
 * table of function pointers filled once at start-up; the scalar reference
 * table is the specification SIMD tables are tested against. Element-wise
 * ops work on float rows. */
#ifndef PASADA_KERNELS_H
#define PASADA_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/threadpool.h"
#include "quant/quant.h"

/* out[0] = dot(weight row w (n elements of the weight type),
 *              activation row x (n elements of that type's vec_dot_type)). */
typedef void (*pa_vec_dot_fn)(int64_t n, float *out, const void *w, const void *x);
/* Converts n floats to a row of an activation type (Q8_0, Q8_1, Q8_K, F32, F16...). */
typedef void (*pa_quantize_row_fn)(const float *x, void *y, int64_t n);

/* How a matrix's bytes are arranged. PA_LAYOUT_ROWS: as in GGUF files,
 * row after row, row stride pa_row_size(type, cols). The interleaved
 * layouts (kernels/layout.h), into which the loader repacks weights when
 * the CPU has fast kernels for them, store groups of rows together so that
 * each 32-bit lane of a vector belongs to one row: PA_LAYOUT_K_X4, Q4_K
 * and Q5_K in groups of 4 rows (kernels/x4.h); PA_LAYOUT_B32_X16, Q4_0, Q4_1, Q5_0
 * and Q8_0 in groups of 16 rows (kernels/x16.h). The one-token and the batched
 * paths read them alike. */
typedef enum { PA_LAYOUT_ROWS = 0, PA_LAYOUT_K_X4 = 1, PA_LAYOUT_B32_X16 = 2, PA_LAYOUT_COUNT } pa_layout;

/* The kernels of an interleaved layout for one weight type. Activations
 * are quantized to the type's vec_dot_type and each token's row packed
 * once (pack_x, x_size(cols) bytes); run computes the `rows` rows of one
 * group (wg) for nt <= `tokens` tokens: y[t * ldy + r] = dot(row r of the
 * group, token xp[t]), with the same bits whatever nt is, so results never
 * depend on the batch. stream: nonzero when the call reads the group from
 * memory (a product's first pass over it), so that the kernel may ask for
 * the weights ahead (pa_prefetch_*, below); later passes find them in L2.
 * Every table has one (its `ilv` entry) for each (layout, type) the layout
 * takes: the plain C reference where it has no faster. */
#define PA_ILV_MAX_TOKENS 16
/* How the one-token calls of the SIMD kernels (x4, x16 and the file
 * layout's that prefetch for themselves, pa_kernels_self_prefetch) get
 * the weights they stream from memory: how far ahead (bytes) each record's
 * kernel asks for the bytes it will read next (0: it asks for nothing),
 * pa_prefetch_x4 for the AVX-512 x4 kernels (Q4_K, Q5_K, Q6_K),
 * pa_prefetch_avx512 for the other AVX-512 ones, pa_prefetch_avx2 for the
 * AVX2 ones; pa_prefetch_start, how many bytes at the start of a thread's
 * rows of an interleaved matrix (where a new stream starts) are asked for
 * at once before the kernels run (0: none); pa_prefetch_batch, how far
 * ahead the AVX-512 kernels ask for the weights in a call of several
 * tokens that reads them from memory (`stream`: a product's first pass over
 * a panel; 0: they ask for nothing). Set once with the kernel
 * tables (dispatch.c), before any kernel runs, from what was measured per
 * CPU; PASADA_PREFETCH=BYTES sets every one-token distance,
 * PASADA_PREFETCH_X4 the x4 one, PASADA_PREFETCH_START the start and
 * PASADA_PREFETCH_BATCH the batched one, for measuring a CPU, and a
 * process may change them between decode steps (an in-process A/B).
 *   - Intel with AVX-512, no start; ahead by the model
 *     (pa_kernels_fit_prefetch): 3 KB when its weights stream from memory,
 *     8 KB when they fit in a quarter of the L3 cache, 16 KB before a
 *     model says (Sapphire Rapids, session 5: 16 KB, 15 -> 20-25 GB/s
 *     against asking for a group's bytes at once; session 22, a 480 MB L3,
 *     decode steps alternated in one process: against 16 KB, 3 KB took
 *     0.947-0.954 of the step time on the Llama-1B shape Q4_K_M and 0.949
 *     on its Q8_0, 0.96 on Gemma 3 270M (235 MB; 8 KB there 1.03 of 3
 *     KB's), 2-2.5 KB about as much and 4-8 KB 0.98-1.00; on SmolLM2
 *     (92 MB, 37-40 GB/s: from the L3 cache) 8 KB took 0.954-0.958 of 16
 *     KB's and 3 KB 1.05, 5-12 KB within 2% of 8 KB). Batched calls ask
 *     as far ahead in their first pass (they had asked for nothing): steps
 *     of 2, 4 and 8 users (the VNNI kernels) took 0.69, 0.66-0.68 and 0.73
 *     of the time on SmolLM2 (8 KB; 2 KB 0.76), 0.87-0.88 and 0.92 with 4
 *     and 8 on the 1B Q4_K_M (3 KB; 8 KB 0.91), 0.77 with 4 on Gemma 3;
 *     16 users (AMX, which asks for its own) 0.99 and 0.97-0.99; prefill
 *     the same within 1%.
 *   - AMD with AVX-512 (Zen 4, sessions 19-20): 32 KB at each start, and
 *     16 KB ahead in the x4 kernels only. One 256 MB matrix alone
 *     (`bench_kernels 2 vsread`) streams closer to a plain read without
 *     the kernels' prefetches (Q4_K x4 0.90 -> 0.97 of the read, Q8_0 x16
 *     0.92 -> 0.98), but in the model, where each thread starts a new
 *     stream at every task, dropping them lost up to 28%. Session 19,
 *     decode steps alternated in one process, 32 KB at the start and
 *     nothing ahead over 16 KB ahead everywhere: step time 0.91-0.96
 *     (Llama-1B shape Q8_0, 5 runs), 0.94 (8B Q8_0), 0.98-1.00 (1B
 *     Q4_K_M, 4 runs), 1.03 (8B Q4_K_M), 0.92-0.96 (SmolLM2), 0.82-0.96
 *     (Gemma 3). Session 20, the same machine type on another day, the x4
 *     kernels' 16 KB ahead over nothing (the start kept), 11 runs: step
 *     time 0.76, 0.82, 0.87, 0.88, 0.90, 0.90, 0.91, 0.92, 0.96, 1.01,
 *     1.01 (1B Q4_K_M), 0.80, 0.85, 1.01 (8B Q4_K_M), 0.97, 1.01 (Gemma 3);
 *     16 KB over 8 KB 1.01, 1.02. The x16 kernels' 16 KB ahead over
 *     nothing that day: 0.93, 1.01 (1B Q8_0), 0.97 (8B Q8_0), 1.00, 1.01
 *     (SmolLM2), 1.02, 1.13 (Gemma 3): they keep nothing ahead.
 *     Batched calls (session 20), 4 KB ahead in the first pass over
 *     nothing: 16-user decode steps 0.93, 0.93, 0.93, 0.94 (SmolLM2),
 *     0.83, 0.86 (Gemma 3), 0.97, 1.00 (1B Q4_K_M); prefill of 128
 *     tokens 1.00, 0.96 (1B Q8_0), 0.97, 1.00 (1B Q4_K_M), 1.02, 0.98
 *     (Gemma 3). In every pass (no `stream`) prefill lost up to 12% (1B
 *     Q8_0 1.05, 1.12); 1 KB ahead lost 8-9% against 4 KB, 2 and 8 KB
 *     were 0-5% slower, and asking for the next group's bytes at once
 *     before each call (matmul.c) 7-11% slower than the kernels' 4 KB.
 *     AVX2-only CPUs ask for nothing ahead in batched calls (not measured).
 *   - AVX2 kernels (x16_avx2.c, x4_avx2.c), 8 KB ahead, no start (Zen 3,
 *     session 12: against 16 KB, Q8_0 0.865 -> 0.879, Q4_K 0.885 -> 0.904,
 *     Q6_K 0.886 -> 0.922, Q4_1 0.860 -> 0.901 of the read; 32 and 64 KB
 *     no better; nothing ahead was not measured there). */
extern int pa_prefetch_avx512, pa_prefetch_x4, pa_prefetch_avx2, pa_prefetch_start, pa_prefetch_batch;
/* Sets the one-token and batched distances for a model whose matrices
 * hold weight_bytes, where the CPU's best distance was measured to depend
 * on it (above: Intel with AVX-512), unless PASADA_PREFETCH(_X4, _BATCH)
 * set them. For the whole process: the last model a context was made for
 * decides. */
void pa_kernels_fit_prefetch(uint64_t weight_bytes);
/* How far ahead a SIMD kernel's call of nt tokens asks for its weights:
 * one_token (its family's one-token distance) for one token, else
 * pa_prefetch_batch when the call reads them from memory (stream), else
 * nothing (0). */
static inline int pa_prefetch_distance(int one_token, int nt, int stream) {
  return nt == 1 ? one_token : stream ? pa_prefetch_batch : 0;
}
typedef struct {
  int rows, tokens;
  size_t (*x_size)(int64_t cols);
  void (*pack_x)(int64_t cols, const void *xq, void *xp);
  void (*run)(int64_t cols, const uint8_t *wg, const uint8_t *const *xp, int nt, float *y,
              int64_t ldy, int stream);
} pa_ilv_kernel;

typedef struct {
  const char *name; /* "scalar", "avx2", "avx512", "avx512_vnni", "amx" */
  pa_vec_dot_fn vec_dot[PA_TYPE_COUNT];          /* indexed by weight type */
  pa_quantize_row_fn quantize_row[PA_TYPE_COUNT]; /* indexed by activation type */
  const pa_ilv_kernel *ilv[PA_LAYOUT_COUNT][PA_TYPE_COUNT]; /* interleaved layouts' kernels, or NULL */
} pa_cpu_kernels;

const pa_cpu_kernels *pa_kernels_reference(void); /* plain C, every type */
const pa_cpu_kernels *pa_kernels_best(void);      /* best for this CPU (pa_cpu()) */
/* Forces a table (verify and tests); NULL restores the best. */
void pa_kernels_set(const pa_cpu_kernels *k);
const pa_cpu_kernels *pa_kernels_current(void);

/* Each SIMD table on its own (tests, bench, verify): NULL when this CPU, as
 * capped by PASADA_CPU, lacks its instructions. Types without a SIMD kernel
 * hold the reference function, so every table is complete. */
const pa_cpu_kernels *pa_kernels_avx2(void);        /* AVX2 + FMA + F16C */
const pa_cpu_kernels *pa_kernels_avx512(void);      /* AVX-512 F/BW/VL (+ the above) */
const pa_cpu_kernels *pa_kernels_avx512_vnni(void); /* ... + VNNI (vpdpbusd) */
const pa_cpu_kernels *pa_kernels_amx(void);         /* ... + AMX-INT8 (batches) */
/* Overwrite the entries a SIMD file implements (avx2.c, avx512.c). */
void pa_kernels_fill_avx2(pa_cpu_kernels *k);
void pa_kernels_fill_avx512(pa_cpu_kernels *k, int vnni);
/* The AVX-512 activation quantizers (quant_avx512.c: Q8_0, Q8_1, Q8_K). */
void pa_kernels_fill_avx512_quant(pa_cpu_kernels *k);
/* k->ilv[layout][type] (NULL when the layout does not take the type), and
 * whether it is faster than the reference's (worth repacking weights for). */
const pa_ilv_kernel *pa_kernels_ilv(const pa_cpu_kernels *k, pa_layout layout, pa_type type);
bool pa_kernels_ilv_fast(const pa_cpu_kernels *k, pa_layout layout, pa_type type);
void pa_kernels_fill_ilv_avx2(pa_cpu_kernels *k); /* layout.c */
void pa_kernels_fill_ilv_avx2_k16(pa_cpu_kernels *k); /* layout.c: Q6_K, Q3_K, Q2_K x4 (AVX2) */
void pa_kernels_fill_ilv_vnni(pa_cpu_kernels *k); /* layout.c */
void pa_kernels_fill_ilv_amx(pa_cpu_kernels *k);  /* the VNNI ones, then AMX where it has them */
/* Whether table k's one-token kernel for the type asks for the weights
 * ahead itself (then pa_matmul does not). */
bool pa_kernels_self_prefetch(const pa_cpu_kernels *k, pa_type type);

/* The fast path pa_matmul takes for 32-element block types (Q4_0, Q4_1,
 * Q5_0, Q5_1, Q8_0) when a table has it: the same dot as vec_dot, given
 * besides the quantized activation row x (nb blocks) what depends on x
 * alone, prepared once per token instead of once per weight row:
 * xs[b] = d of block b as a float, and xs[nb + b] = sum of its quants (Q8_0)
 * or its s (Q8_1), as a float. See pa_prepare_x_sums. */
typedef void (*pa_vec_dot_xs_fn)(int64_t n, float *out, const void *w, const void *x, const float *xs);
/* NULL when table k has no such kernel for the type. */
pa_vec_dot_xs_fn pa_kernels_vec_dot_xs(const pa_cpu_kernels *k, pa_type type);
/* For an activation row (or part of one) of type Q8_0 or Q8_1 of n
 * elements: d[b] and sums[b] as described above, b < n / 32. */
void pa_prepare_x_sums(pa_type act_type, const void *x, int64_t n, float *d, float *sums);
void pa_kernels_fill_avx512_xs(pa_vec_dot_xs_fn *table, int vnni); /* indexed by weight type */

/* Matrix-matrix kernels (prefill, batched decode), for the weight types
 * a table has one for. pa_matmul unpacks a panel of weight rows once
 * (pack_w, w_size bytes per row), packs each token's quantized activation
 * row once (pack_x, x_size bytes per token; x_size NULL: tiles read the
 * quantized rows as they are), then calls tile for `rows` x `tokens` at a
 * time: y[t * ldy + r] = dot(row wp[r], token xp[t]), with exactly the
 * bits the table's one-token path (vec_dot, or pa_vec_dot_xs_fn where the
 * table has one) gives that row and token; so results never depend on the
 * batch. Pointers may repeat (edge tiles); ldy >= rows; packed rows are
 * 64-byte aligned (w_size and x_size are multiples of 64). */
typedef struct {
  int rows, tokens; /* tile shape */
  size_t (*w_size)(int64_t cols);
  void (*pack_w)(int64_t cols, const void *w, void *wp);
  size_t (*x_size)(int64_t cols);
  void (*pack_x)(int64_t cols, const void *xq, void *xp);
  void (*tile)(int64_t cols, const uint8_t *const *wp, const uint8_t *const *xp, float *y,
               int64_t ldy);
} pa_gemm_kernel;
/* The K-blocked entries of some GEMM kernels: the tile over a part of the
 * rows, so that long rows are cut into chunks of whole `kblock`-element
 * units that stay in cache while every tile uses them. Packing is then per
 * unit: pack_w and pack_x of a part of a row give that part of the whole
 * row's packing, which w_size(c0) (x_size(c0)) bytes in for a part from
 * column c0. tile_part runs `cols` columns from wp and xp on, continuing
 * the tile's float accumulators in acc (acc_floats floats, 64-byte
 * aligned, all zero before a row's first part); tile_end writes what tile
 * would have written. The accumulators travel through memory unchanged, so
 * the results are tile's bits wherever the rows are cut. */
typedef struct {
  const pa_gemm_kernel *gemm; /* the kernel these extend */
  int64_t kblock;
  int acc_floats;
  void (*tile_part)(int64_t cols, const uint8_t *const *wp, const uint8_t *const *xp, float *acc);
  void (*tile_end)(const float *acc, float *y, int64_t ldy);
} pa_gemm_parts;
/* Those of kernel g from each file's kernels, or NULL. */
const pa_gemm_parts *pa_gemm_parts_avx512(const pa_gemm_kernel *g);
const pa_gemm_parts *pa_gemm_parts_avx2(const pa_gemm_kernel *g);
/* For tests: at most this many tokens per block of pa_matmul's K-blocked
 * GEMM path (whose weight chunks are unpacked again for every block); 0,
 * the default: as many as its accumulator buffer holds. Not while a
 * pa_matmul runs. */
void pa_matmul_set_gemm_token_block(int64_t tokens);
/* NULL when table k has no GEMM kernel for the type. */
const pa_gemm_kernel *pa_kernels_gemm(const pa_cpu_kernels *k, pa_type type);
void pa_kernels_fill_avx512_gemm(const pa_gemm_kernel **table, int vnni); /* by weight type */
void pa_kernels_fill_avx2_gemm(const pa_gemm_kernel **table);

/* A weight matrix: `rows` rows of `cols` elements of `type`, arranged as
 * `layout` says (zero: PA_LAYOUT_ROWS). */
typedef struct {
  pa_type type;
  int64_t rows, cols;
  const void *data;
  pa_layout layout;
} pa_matrix;

/* Bytes of the matrix's data. */
size_t pa_matrix_bytes(const pa_matrix *w);



/* y[t][r] = sum_c W[r][c] * x[t][c] for t < n_tokens, r < rows.
 * x is n_tokens rows of `cols` floats (stride x_stride floats); y has stride
 * y_stride floats. `work` is scratch of at least pa_matmul_work_size bytes.
 * Runs on the pool's threads (rows split between them). */
size_t pa_matmul_work_size(const pa_matrix *w, int64_t n_tokens);
void pa_matmul(pa_pool *pool, const pa_matrix *w, const float *x, int64_t x_stride, float *y,
               int64_t y_stride, int64_t n_tokens, void *work);

/* Products of the same activations in one pool job: outs[m].y = outs[m].w x
 * for m < n_outs (<= PA_MATMUL_MAX_OUTS), e.g. attention's q, k and v. When
 * the matrices share their columns, their activation type and (for 4+
 * tokens) their GEMM kernel, x is quantized once and one job covers every
 * row of every matrix; otherwise each product runs as its own job. Each
 * output has exactly the bits pa_matmul gives it. work: at least the
 * largest pa_matmul_work_size of the matrices. */
#define PA_MATMUL_MAX_OUTS 3
typedef struct {
  const pa_matrix *w;
  float *y;
  int64_t y_stride; /* floats */
} pa_matmul_out;
void pa_matmul_multi(pa_pool *pool, const pa_matmul_out *outs, int n_outs, const float *x,
                     int64_t x_stride, int64_t n_tokens, void *work);

/* The gated feed-forward's first half in one job: h = gate W_gate x,
 * h_up = W_up x, then h = fn(h, h_up) row range by row range as each is
 * computed (fn: pa_silu_mul or pa_gelu_tanh_mul, element-wise, so its bits do
 * not depend on the ranges). gate and up have the same shape; h and h_up
 * n_tokens rows of stride h_stride floats. */
typedef void (*pa_gate_fn)(float *gate, const float *up, int64_t n);
void pa_matmul_gated(pa_pool *pool, const pa_matrix *gate, const pa_matrix *up, pa_gate_fn fn,
                     const float *x, int64_t x_stride, float *h, float *h_up, int64_t h_stride,
                     int64_t n_tokens, void *work);

/* What a product job can do besides the products, so that the ops around
 * a product need no job (and no pass over their rows) of their own; every
 * result has the bits of the ops run one after another:
 * - norm_w (non-NULL): each row of x is first RMS-normalised with these
 *   weights (pa_rmsnorm, eps norm_eps) as it is quantized; the normalised
 *   row lives only in a per-thread buffer. Only for matrices for which
 *   pa_matmul_can_norm is true (quantized activations, at most
 *   PA_MATMUL_NORM_COLS columns);
 * - epi (non-NULL): epi(epi_arg, m, r0, r1) once rows [r0, r1) of output m
 *   are computed for every token, by the task that computed them, before
 *   the job ends; r0 and r1 are multiples of grain (or r1 = the rows), so
 *   an epilogue can work on whole heads. grain: a multiple of 16 (0: 16). */
#define PA_MATMUL_NORM_COLS 8192
typedef void (*pa_matmul_epi_fn)(void *arg, int m, int64_t r0, int64_t r1);
typedef struct {
  const float *norm_w;
  float norm_eps;
  pa_matmul_epi_fn epi;
  void *epi_arg;
  int64_t grain;
} pa_matmul_fuse;
bool pa_matmul_can_norm(const pa_matrix *w);
void pa_matmul_multi_fused(pa_pool *pool, const pa_matmul_out *outs, int n_outs, const float *x,
                           int64_t x_stride, int64_t n_tokens, void *work, const pa_matmul_fuse *f);
/* pa_matmul_gated with f's norm (its epilogue and grain are not used). */
void pa_matmul_gated_fused(pa_pool *pool, const pa_matrix *gate, const pa_matrix *up, pa_gate_fn fn,
                           const float *x, int64_t x_stride, float *h, float *h_up,
                           int64_t h_stride, int64_t n_tokens, void *work, const pa_matmul_fuse *f);

/* The reference path's product (kernels/cpu/exact.c): weights dequantized
 * to F32, activations not quantized, double sums. work: at least
 * pa_matmul_exact_work_size bytes for a pool of n_threads. */
size_t pa_matmul_exact_work_size(const pa_matrix *w, int n_threads);
void pa_matmul_exact(pa_pool *pool, const pa_matrix *w, const float *x, int64_t x_stride, float *y,
                     int64_t y_stride, int64_t n_tokens, void *work);

/* Dequantizes row `r` of W into out (cols floats). */
void pa_matrix_get_row(const pa_matrix *w, int64_t r, float *out);

#endif
