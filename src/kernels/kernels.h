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
#include "kernels/ops.h"
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
 * each 32-bit lane of a vector belongs to one row: PA_LAYOUT_K_X4, Q4_K,
 * Q5_K, Q6_K, Q3_K and Q2_K in groups of 4 rows (kernels/x4.h);
 * PA_LAYOUT_B32_X16, Q4_0, Q4_1, Q5_0, Q8_0, IQ4_NL, MXFP4 and IQ4_XS in
 * groups of 16 rows (kernels/x16.h). The one-token and the batched
 * paths read them alike. */
typedef enum { PA_LAYOUT_ROWS = 0, PA_LAYOUT_K_X4 = 1, PA_LAYOUT_B32_X16 = 2, PA_LAYOUT_COUNT } pa_layout;

/* How the streaming kernels ask for the weights ahead of their reads
 * (bytes; 0: they ask for nothing). One-token calls: `x4` for the AVX-512
 * x4 kernels (Q4_K, Q5_K, Q6_K, Q3_K, Q2_K), `avx512` for the other
 * AVX-512 ones (and the file layout's Q6_K dot), `avx2` for the AVX2 ones;
 * `start`: how many bytes at the start of a thread's rows of an
 * interleaved matrix (where a new stream starts) are asked for at once
 * before the kernels run; `batch`: how far ahead the AVX-512 kernels ask
 * in a call of several tokens that reads the weights from memory (a
 * product's first pass over a panel). The values per CPU, and why, are in
 * docs/architecture.md (tuning constants); PASADA_PREFETCH (every
 * one-token distance), PASADA_PREFETCH_X4, PASADA_PREFETCH_START and
 * PASADA_PREFETCH_BATCH override them (base/env.c reads them). */
typedef struct {
  int avx512, x4, avx2, start, batch;
} pa_prefetch;
/* The CPU's defaults (immutable once computed). */
const pa_prefetch *pa_prefetch_defaults(void);
/* The defaults fitted to a model whose matrices hold weight_bytes, where
 * the CPU's best distance was measured to depend on it (Intel with
 * AVX-512: 8 KB when the weights fit in a quarter of the L3 cache, else
 * 3 KB), unless the environment set them. */
pa_prefetch pa_prefetch_fit(uint64_t weight_bytes);
/* The distance of the file layout's AVX-512 Q6_K dot (a vec_dot, which
 * takes no settings): the CPU's default one-token distance, set once with
 * the kernel tables and read-only after. */
extern int pa_prefetch_q6k_file;
/* How far ahead an interleaved kernel's call of nt tokens asks: stream is
 * NULL when the call does not read the weights from memory (a later pass
 * over a panel that is in L2 by then): nothing; else one_token (the
 * family's one-token distance) for one token, stream->batch for more. */
static inline int pa_prefetch_distance(const pa_prefetch *stream, int one_token, int nt) {
  return !stream ? 0 : nt == 1 ? one_token : stream->batch;
}
/* The kernels of an interleaved layout for one weight type. Activations
 * are quantized to the type's vec_dot_type and each token's row packed
 * once (pack_x, x_size(cols) bytes); run computes the `rows` rows of one
 * group (wg) for nt <= `tokens` tokens: y[t * ldy + r] = dot(row r of the
 * group, token xp[t]), with the same bits whatever nt is, so results never
 * depend on the batch. stream: the prefetch distances when the call reads
 * the group from memory (a product's first pass over it), NULL otherwise
 * (see pa_prefetch_distance). Every table has one (its `ilv` entry) for
 * each (layout, type) the layout takes: the plain C reference where it has
 * no faster. */
#define PA_ILV_MAX_TOKENS 16
typedef struct {
  int rows, tokens;
  size_t (*x_size)(int64_t cols);
  void (*pack_x)(int64_t cols, const void *xq, void *xp);
  void (*run)(int64_t cols, const uint8_t *wg, const uint8_t *const *xp, int nt, float *y,
              int64_t ldy, const pa_prefetch *stream);
  /* optional (NULL: run per group): one token (its record x, as pack_x
   * made it) through ng consecutive groups of gbytes each from wg, group g's
   * rows to y[rows * g ..]; the bits of run with nt = 1 group by group */
  void (*run1)(int64_t cols, const uint8_t *wg, size_t gbytes, int64_t ng, const uint8_t *x,
               float *y, const pa_prefetch *stream);
} pa_ilv_kernel;

typedef struct {
  const char *name; /* "scalar", "avx2", "avx512", "avx512_vnni", "amx" */
  pa_vec_dot_fn vec_dot[PA_TYPE_COUNT];          /* indexed by weight type */
  pa_quantize_row_fn quantize_row[PA_TYPE_COUNT]; /* indexed by activation type */
  const pa_ilv_kernel *ilv[PA_LAYOUT_COUNT][PA_TYPE_COUNT]; /* interleaved layouts' kernels, or NULL */
} pa_cpu_kernels;

const pa_cpu_kernels *pa_kernels_reference(void); /* plain C, every type */
const pa_cpu_kernels *pa_kernels_best(void);      /* best for this CPU (pa_cpu()) */
/* The tables' names, for messages and help texts. */
#define PA_KERNEL_TABLE_NAMES "scalar, avx2, avx512, avx512_vnni, amx"
/* Whether name is one of those. */
bool pa_kernels_is_name(const char *name);
/* The table of that name, or NULL when unknown or this CPU lacks its
 * instructions. */
const pa_cpu_kernels *pa_kernels_by_name(const char *name);
/* The instruction set of table k, which the element-wise and attention
 * tables that go with it follow: PA_ISA_PLAIN (scalar), PA_ISA_AVX2, or
 * PA_ISA_AVX512 (avx512, avx512_vnni, amx). */
typedef enum { PA_ISA_PLAIN, PA_ISA_AVX2, PA_ISA_AVX512 } pa_isa;
pa_isa pa_kernels_isa(const pa_cpu_kernels *k);

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
/* The table-lookup 4-bit types IQ4_NL, IQ4_XS, MXFP4 (iq_avx2.c, iq_avx512.c). */
void pa_kernels_fill_iq_avx2(pa_cpu_kernels *k);
void pa_kernels_fill_iq_avx512_vnni(pa_cpu_kernels *k);
/* The grid I-quants IQ2_XXS ... IQ1_M (iq_grid_avx2.c). */
void pa_kernels_fill_iq_grid_avx2(pa_cpu_kernels *k);
/* Super-block blk of a grid I-quant as 256 signed values v (|v| <= 62),
 * 16 scale factors sc (one per 16 values) and the returned dw, so that
 * its dot with a Q8_K block x is dw * x.d * sum_g sc[g] sum_{i in g} v[i]
 * x.qs[i] (the integer sum exact). For the GEMM kernels' unpacking
 * (gemm_avx2.c, gemm_avx512.c); only where the AVX2 table is. */
float pa_iq_grid_unpack_avx2(pa_type type, const void *blk, int8_t *v, int16_t *sc);
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



/* What the products run with: a kernel table, the element-wise table of
 * the same instruction set (the norms fused into products), and the
 * prefetch distances. Held by whoever runs products (the CPU backend keeps
 * one per model); never changed while a product runs. Every product
 * function below takes one; NULL means pa_cpu_exec_best(). */
typedef struct {
  const pa_cpu_kernels *k;
  const pa_ops_kernels *ops;
  pa_prefetch pf;
} pa_cpu_exec;
/* The best tables with the CPU's default distances (immutable). */
const pa_cpu_exec *pa_cpu_exec_best(void);
/* *e = table k (NULL: the best), the element-wise table of its
 * instruction set (scalar: plain; avx2: AVX2; the AVX-512 ones: AVX-512),
 * the distances fitted to weight_bytes of weights (pa_prefetch_fit). */
void pa_cpu_exec_init(pa_cpu_exec *e, const pa_cpu_kernels *k, uint64_t weight_bytes);

/* y[t][r] = sum_c W[r][c] * x[t][c] for t < n_tokens, r < rows.
 * x is n_tokens rows of `cols` floats (stride x_stride floats); y has stride
 * y_stride floats. `work` is scratch of at least pa_matmul_work_size bytes.
 * Runs on the pool's threads (rows split between them). */
size_t pa_matmul_work_size(const pa_matrix *w, int64_t n_tokens);
void pa_matmul(const pa_cpu_exec *ex, pa_pool *pool, const pa_matrix *w, const float *x, int64_t x_stride, float *y,
               int64_t y_stride, int64_t n_tokens, void *work);

/* Products of the same activations in one pool job: outs[m].y = outs[m].w x
 * for m < n_outs (<= PA_MATMUL_MAX_OUTS), e.g. attention's q, k and v. When
 * the matrices share their columns, their activation type and (for 4+
 * tokens) their GEMM kernel, x is quantized once and one job covers every
 * row of every matrix; otherwise each product runs as its own job, all of
 * them claimed from one pool job where their activations fit a scratch on
 * the stack (a few tokens), else a pool job each. Each
 * output has exactly the bits pa_matmul gives it. work: at least the
 * largest pa_matmul_work_size of the matrices. */
#define PA_MATMUL_MAX_OUTS 3
typedef struct {
  const pa_matrix *w;
  float *y;
  int64_t y_stride; /* floats */
} pa_matmul_out;
void pa_matmul_multi(const pa_cpu_exec *ex, pa_pool *pool, const pa_matmul_out *outs, int n_outs, const float *x,
                     int64_t x_stride, int64_t n_tokens, void *work);

/* The gated feed-forward's first half in one job: h = gate W_gate x,
 * h_up = W_up x, then h = fn(h, h_up) row range by row range as each is
 * computed (fn: pa_silu_mul or pa_gelu_tanh_mul, element-wise, so its bits do
 * not depend on the ranges). gate and up have the same shape; h and h_up
 * n_tokens rows of stride h_stride floats. */
typedef void (*pa_gate_fn)(float *gate, const float *up, int64_t n);
void pa_matmul_gated(const pa_cpu_exec *ex, pa_pool *pool, const pa_matrix *gate, const pa_matrix *up, pa_gate_fn fn,
                     const float *x, int64_t x_stride, float *h, float *h_up, int64_t h_stride,
                     int64_t n_tokens, void *work);

/* Independent products in one pool job, for many small ones (a
 * mixture-of-experts layer's chosen experts in a decode step): item i is
 * y = w x over its own n_tokens rows of x, or, with up set, the gated pair
 * of pa_matmul_gated (y = gate(w x, up x), y_up = up x; w and up of one
 * shape). Items whose x, x_stride and n_tokens are the same and whose
 * matrices take the same activations share one quantization. Every output
 * has exactly the bits pa_matmul (pa_matmul_gated) gives it. The
 * activations are quantized by the calling thread, so this is for few
 * tokens per item. work: work_bytes of scratch, at least
 * pa_matmul_group_work_size of the items' matrices (w; up's type and shape
 * are w's) and token counts. Returns false, having
 * computed nothing, when an item cannot run this way (more than
 * PA_MATMUL_GROUP_MAX items, a gated pair of different types or layouts,
 * too little work): the caller runs the products one by one. */
#define PA_MATMUL_GROUP_MAX 128
typedef struct {
  const pa_matrix *w, *up; /* up: NULL, or the gated pair's second matrix */
  pa_gate_fn gate;         /* with up */
  const float *x;
  int64_t x_stride; /* floats */
  float *y, *y_up;  /* y_up: with up */
  int64_t y_stride; /* floats, y's and y_up's */
  int64_t n_tokens;
} pa_matmul_item;
bool pa_matmul_group(const pa_cpu_exec *ex, pa_pool *pool, const pa_matmul_item *items, int n_items,
                     void *work, size_t work_bytes);
size_t pa_matmul_group_work_size(const pa_matrix *const *w, const int64_t *n_tokens, int n);

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
void pa_matmul_multi_fused(const pa_cpu_exec *ex, pa_pool *pool, const pa_matmul_out *outs, int n_outs, const float *x,
                           int64_t x_stride, int64_t n_tokens, void *work, const pa_matmul_fuse *f);
/* pa_matmul_gated with f's norm (its epilogue and grain are not used). */
void pa_matmul_gated_fused(const pa_cpu_exec *ex, pa_pool *pool, const pa_matrix *gate, const pa_matrix *up, pa_gate_fn fn,
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
