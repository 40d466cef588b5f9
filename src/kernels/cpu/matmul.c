/* matmul.c: y = W x over the thread pool, for any weight type, with the
 * current kernel table; and the row dequantizer.
 *
 * Ceilings (the numbers this code is judged against; bench/kernels/):
 * - The dev machine: 2 Sapphire Rapids cores with AVX-512 VNNI, ~2.7 GHz
 *   as seen by one thread, shared with other workloads.
 * - Decode (one token) reads every weight byte once per token, so it is
 *   memory-bound at best: time >= bytes(W) / bandwidth. A streaming read
 *   of a fresh 64 MB buffer gave one thread 2-5 GB/s on this (loaded) VM
 *   and a quiet Sapphire Rapids core gives roughly 20-30 GB/s; so the
 *   kernels must consume a 32-weight Q4 block (18-20 bytes) in ~2 cycles
 *   for one thread to keep up. Measured with the weights in L2 (one thread,
 *   avx512_vnni table): Q4_1 ~17-20 GB/s, Q8_0 ~23-25, Q5_0 ~11-14,
 *   Q4_K ~13-16, Q6_K ~19-21 (avx2 table: 9-12, 15-20, 6-8, 10-12, 17-19).
 *   The kernels are therefore still the limit on one core; two cores
 *   reach a quiet machine's DRAM bandwidth for the 8-bit and 6-bit types.
 * - Int8 dots (vpdpbusd, or pmaddubsw + pmaddwd) on whole blocks with one
 *   float multiply per block; for 32-element blocks what depends on the
 *   activations alone (their scales and sums) is prepared once per token
 *   (pa_vec_dot_xs_fn) rather than once per weight row.
 * - Activations are quantized once per call (Q8_0/Q8_1/Q8_K, ~1.1 bytes
 *   per element per token) and stay in L1/L2 while weight rows stream by.
 * - Prefill and batched decode (n_tokens >= GEMM_MIN_TOKENS, types with a
 *   pa_gemm_kernel: Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q4_K Q5_K Q6_K in the avx2,
 *   avx512 and avx512_vnni tables) go through matrix-matrix kernels
 *   (gemm_avx512.c, gemm_avx2.c): each thread unpacks a panel of its rows
 *   once (the bytes the int8 dot takes, scales as floats) into a stack
 *   buffer that stays in L1/L2, activations are packed once per token, and
 *   a register tile of 4 rows x 4 tokens (AVX-512, 32-element blocks; 2 x 4
 *   for K-quants and AVX2) accumulates while the tokens' blocks pass.
 *   Every (row, token) gets the bits of the one-token kernel (same integer
 *   lanes, same float operations in the same order: see those files), so
 *   outputs never depend on the batch and either path may serve any
 *   n_tokens; tests/unit/test_gemm.c checks it bit for bit.
 * - Ceiling of the 32-element-block scheme: the int8 peak is one 512-bit
 *   vpdpbusd (64 multiply-adds) per port per cycle on ports 0 and 5,
 *   ~1.1-1.5 TOP/s for 2 cores here (pasada bench, quiet machine; ~2.2 GHz
 *   under AVX-512). Reproducing the one-token arithmetic (8 float lanes per
 *   block) costs a conversion, a multiply of scales and an fma per 8-lane
 *   block sum besides the dot: 4 uops per two blocks and token, so at most
 *   1/4 of that peak (~140 GOP/s per core). Measured (one thread, 512
 *   tokens, a loaded VM, best of 10; GOP/s, one-token path -> GEMM): Q4_1
 *   576 cols 47 -> 107, Q4_1 1536 cols 60 -> 128, Q5_0 640/2048 cols 34/40
 *   -> 104/127, Q8_0 and Q4_0 2048 cols 58/61 -> 133. AVX2 table: 1.6-2.5x
 *   its one-token path (45-85 GOP/s). Below 4 tokens the one-token path is
 *   as fast (the weights are used too few times to repay the unpacking).
 * - K-quants (Q4_K, Q5_K, Q6_K) take another canonical arithmetic in both
 *   paths of every SIMD table (gemm_avx512.c's header): exact int32 sums per
 *   256-weight super-block (sub-block scales and mins applied in integer),
 *   then two float fmas per super-block. Integers being exact, the GEMM
 *   keeps the integer work dense (a permuted packing where each 32-bit lane
 *   holds one sub-block, pmaddwd for the scales, a transposed reduction)
 *   and pays a few float operations per super-block and 4 x 4 tile: one
 *   thread, 2048 x 2048, 512 tokens, AVX-512 VNNI: Q4_K ~157 -> ~265 GOP/s,
 *   Q5_K ~157 -> ~245, Q6_K ~142 -> ~210 (bench_kernels gemm, loaded VM).
 * - K-quant rows longer than 4 super-blocks are K-blocked (AVX-512 and
 *   AVX2 tables, gemm_rows_chunked, GEMM_K_CHUNK below): a whole-row tile
 *   walked 4 packed rows and 4 tokens (2.7 KB per super-block: 150 KB at
 *   14336 columns) from L2, and Q6_K rows of 14336 columns overflowed the
 *   96 KB panel and fell back to the one-token path. Weights are packed
 *   with vectors (about a third of the byte loops' time; at 4-64 tokens the
 *   packing had been a third or more of the total). bench_kernels gemm, 1024
 *   rows, VNNI, 2 threads, medians of 3 alternated runs on a shared VM
 *   (GOP/s, before -> after): 64 tokens Q4_K 8192/14336 columns 328/354 ->
 *   435/346, Q6_K 8192/14336 275/92 -> 340/311; 512 tokens Q4_K 4096/14336
 *   272/261 -> 443/412, Q6_K 4096/14336 224/101 -> 315/295; 2048 columns
 *   alike; 4-16 tokens 2-4x (4 tokens, 4096-14336 columns: ~22-40 ->
 *   ~90-125). The Q4_K/Q5_K scales and mins are then decoded with xmm ops
 *   too (they had gone through a scalar loop and the stack): pack_w ~23-31
 *   -> ~12 ns per super-block, its share of a 64-token Q4_K GEMM (1
 *   thread, 4096 columns, perf) 19% -> 9%; bench_kernels gemm, 1 thread,
 *   VNNI, medians of 15 alternated runs, Q4_K/Q5_K 2048/8192 columns: 16
 *   tokens +21-25%, 64 tokens +2-9%; pasada bench pp256 of the 1B Q4_K_M
 *   (2 threads, 14 alternated rounds, very noisy): about +2-6%.
 * - The same exact-integer scheme would lift the 32-element types: their
 *   one-token kernels would have to change with it, since both paths must
 *   agree bit for bit. */
#include <stdbool.h>
#include <string.h>

#include "base/base.h"
#include "kernels/kernels.h"
#include "kernels/layout.h"
#include "kernels/ops.h"

/* Rows per thread come in multiples of this, so two threads never write
 * the same 64-byte line of y (16 floats). */
#define ROW_GRAIN 16
/* Rows whose weights stay in cache while all tokens pass over them. */
#define ROW_BLOCK 16
/* Activations of fewer elements than this (all tokens) are quantized by the
 * calling thread before the others start: for a decode step that is a few
 * hundred nanoseconds, less than the barrier a split would need. */
#define SPLIT_QUANTIZE_MIN 16384
/* The same for jobs whose threads take whole tokens (interleaved and GEMM
 * kernels, rows normalised first), from two tokens: a token of 576 columns
 * costs ~1200 ticks (norm ~420, quantize ~500, packing ~300), so a 16-user
 * step of SmolLM2 spent ~20k of a 576-column product's 130-350k ticks
 * (qkv, gate-up) with one thread waiting. Split from 8192 instead of
 * 16384, 16-user decode steps alternated in one process (Zen 4): SmolLM2 0.933-0.967 of the step time (5 runs; from 4096: 0.96-0.99
 * and one 1.10), Gemma 3 0.98, 1.00, 1.00; serve-load c = 16, 6 rounds
 * alternated: median 969 tok/s against 929 unsplit and 933 in shares of a
 * token (4 per thread at most). */
#define SPLIT_QUANTIZE_TOKENS_MIN 8192
/* GEMM path: the stack buffer a thread unpacks its weight panel into
 * (matrices whose rows do not fit a tile's worth keep the one-token path),
 * the panel size aimed at (rows that stay in L1 while every token passes),
 * and the fewest tokens worth it. */
#define GEMM_PANEL_BYTES (96 * 1024)
#define GEMM_PANEL_TARGET (32 * 1024)
#define GEMM_MIN_TOKENS 4
#define GEMM_MAX_TILE 64 /* rows x tokens of a tile */
/* K-blocked GEMM kernels (pa_gemm_parts): rows longer than GEMM_K_CHUNK
 * units (super-blocks) are cut into chunks of that many; a thread's panel
 * holds the chunk of as many rows as fit GEMM_K_PANEL bytes (Q4_K: 16
 * rows of 1.5 KB, Q6_K: 12 of 1.75 KB), so that it stays in L1 (48 KB)
 * beside a tile's 4 tokens' chunk (5 KB) while every token passes; the
 * tiles' float accumulators (GEMM_ACC_FLOATS, 64 KB) carry from chunk to
 * chunk and bound the tokens of a block (Q4_K: 512). Measured (bench_kernels
 * gemm, one thread, VNNI, 64 and 512 tokens, 4096 and 14336 columns; a
 * shared, noisy machine): chunks of 2-8 super-blocks and panels of 16-32 KB
 * were alike within the noise, 16 or more super-blocks 5-15% slower on
 * the long rows; token blocks of 64-128 no faster than 512. */
#define GEMM_K_CHUNK 4
#define GEMM_K_PANEL (24 * 1024)
#define GEMM_ACC_FLOATS 16384
/* A product job's tasks are claimed dynamically (base/threadpool.h), so a
 * thread the OS delays leaves its share to the others, and shrink as they
 * go out (guided): each takes 1 / (TASK_GUIDE x threads) of the grains
 * left, at least 1 / (TASK_MIN_SHARE x threads) of all of them, so the
 * first tasks are long and the last ones short, and the threads finish
 * within a short task of each other (equal tasks, 4 per thread, left the
 * last thread alone for half a task on average: ~6% of a 16-token step's
 * products idle at their barriers). */
#ifndef TASK_GUIDE
#define TASK_GUIDE 2
#endif
#ifndef TASK_MIN_SHARE
#define TASK_MIN_SHARE 16
#endif
/* A one-token product reads its weights from memory once, and each task is
 * a new stream for the thread that claims it: on AMD Zen 4 with the
 * memory's high bandwidth (a read probe of ~60 GB/s on 2 threads) the
 * guided tasks' many stream starts cost decode ~5%. So the first task of
 * each thread takes an equal share of 7/8 of the rows, the last eighth goes
 * out guided (1B shape Q4_K_M, 2 threads, interleaved runs at the high
 * bandwidth: 1.03-1.06x in 4 of 5 pairs, 0.99x in one; one long task per
 * thread, nothing guided: 1.05x; at ~36 GB/s all alike). */
#ifndef TASK_FIRST_EIGHTHS
#define TASK_FIRST_EIGHTHS 7
#endif
/* ~6 tasks per thread and one per matrix come out of the rule above */
#define MAX_TASKS 2048

/* One pool job: up to PA_MATMUL_MAX_OUTS matrices over the same
 * activations (quantized once), their rows cut into tasks of whole
 * ROW_GRAIN groups; or, gated, two matrices of the same shape whose tasks
 * cover the same rows of both, then apply the gate to those rows. */
typedef struct {
  const pa_cpu_exec *ex; /* tables and prefetch distances */
  int n_mats;
  const pa_matrix *w[PA_MATMUL_MAX_OUTS];
  float *y[PA_MATMUL_MAX_OUTS];
  int64_t y_stride[PA_MATMUL_MAX_OUTS]; /* floats */
  pa_vec_dot_xs_fn dot_xs[PA_MATMUL_MAX_OUTS]; /* per matrix, or NULL: vec_dot */
  int64_t g0[PA_MATMUL_MAX_OUTS + 1]; /* matrix m's grains: [g0[m], g0[m + 1]) of the job's */
  int n_tasks;
  int64_t *tg; /* task i's grains: [tg[i], tg[i + 1]), inside one matrix (job_run's) */
  pa_gate_fn gate;                             /* gated: y[0] = gate(y[0], y[1]) per task */
  const float *x;
  int64_t x_stride; /* floats */
  int64_t n_tokens, cols;
  pa_type vt;    /* activation type of the dot products */
  void *work;    /* quantized activations, n_tokens rows */
  size_t xq_row; /* bytes per quantized activation row */
  float *xs;     /* per token 2 * nb floats (pa_vec_dot_xs_fn), or NULL */
  const pa_gemm_kernel *gemm; /* the GEMM path (the same kernel for every matrix), or NULL */
  const pa_gemm_parts *parts; /* its K-blocked entries, when rows are cut into chunks */
  uint8_t *xp;                /* packed activations (gemm->x_size), or NULL */
  size_t xp_row;              /* bytes per packed row */
  int64_t kcols;              /* columns per chunk of the packed rows (cols: one chunk) */
  const pa_ilv_kernel *ilv;   /* interleaved weights (every matrix): their kernel, or NULL */
  /* pa_matmul_fuse: x's rows normalised before they are quantized, the
   * epilogue per task, rows per task in multiples of grain */
  const float *norm_w;
  float norm_eps;
  pa_matmul_epi_fn epi;
  void *epi_arg;
  int m_base; /* the epilogue's index of this job's first matrix */
  int64_t grain;
  int n_threads; /* the pool's */
} matmul_job;

/* Activation types whose rows also get per-block float scales and sums. */
static bool has_x_sums(pa_type vt) { return vt == PA_TYPE_Q8_0 || vt == PA_TYPE_Q8_1; }

/* Bytes of the quantized rows, rounded up so that the sums that follow
 * them are aligned. */
static size_t xq_bytes(pa_type vt, int64_t cols, int64_t n_tokens) {
  return ((size_t)n_tokens * pa_row_size(vt, cols) + 63) & ~(size_t)63;
}

static size_t xs_bytes(pa_type vt, int64_t cols, int64_t n_tokens) {
  return has_x_sums(vt) ? (size_t)n_tokens * 2 * (size_t)(cols / 32) * sizeof(float) + 64 : 0;
}

/* Bytes of a packed activation row, the most any table's kernel for the
 * matrix needs (the work size does not depend on the table): its layout's
 * interleaved kernel (the AVX2 x4 kernel packs wider than the others), or
 * for the file layout its type's GEMM kernel. */
static size_t x_row_max(const pa_matrix *w) {
  const pa_cpu_kernels *tables[] = {pa_kernels_reference(), pa_kernels_avx2(), pa_kernels_avx512(),
                                    pa_kernels_avx512_vnni(), pa_kernels_amx()};
  size_t most = 0;
  for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
    if (!tables[i]) continue;
    size_t n = 0;
    if (w->layout == PA_LAYOUT_ROWS) {
      const pa_gemm_kernel *g = pa_kernels_gemm(tables[i], w->type);
      n = g && g->x_size ? g->x_size(w->cols) : 0;
    } else {
      const pa_ilv_kernel *k = pa_kernels_ilv(tables[i], w->layout, w->type);
      n = k ? k->x_size(w->cols) : 0;
    }
    if (n > most) most = n;
  }
  return most;
}

size_t pa_matmul_work_size(const pa_matrix *w, int64_t n_tokens) {
  const pa_type_traits *t = pa_type_get(w->type);
  if (!t || n_tokens <= 0) return 0;
  const pa_type vt = t->vec_dot_type;
  if (vt == PA_TYPE_F32) return 0; /* x is used in place */
  size_t size = xq_bytes(vt, w->cols, n_tokens) + xs_bytes(vt, w->cols, n_tokens);
  const size_t xp_row = x_row_max(w);
  if (xp_row) size += (size_t)n_tokens * xp_row + 64;
  return size;
}

/* Share ith of nth of the activation blocks (all tokens laid end to end),
 * so that a one-token decode also splits its quantization. */
static void quantize_share(const matmul_job *j, int ith, int nth) {
  const int64_t bs = pa_type_get(j->vt)->block_size;
  const int64_t nb = j->cols / bs; /* blocks per token */
  const size_t bbytes = pa_type_get(j->vt)->type_size;
  long lo, hi;
  pa_split((long)(nb * j->n_tokens), ith, nth, &lo, &hi);
  pa_quantize_row_fn quantize = j->ex->k->quantize_row[j->vt];
  while (lo < hi) {
    const int64_t t = lo / nb, b0 = lo % nb;
    const int64_t b1 = (hi - t * nb) < nb ? (hi - t * nb) : nb;
    uint8_t *xq = (uint8_t *)j->work + t * j->xq_row + b0 * bbytes;
    quantize(j->x + t * j->x_stride + b0 * bs, xq, (b1 - b0) * bs);
    if (j->xs) {
      float *xs = j->xs + t * 2 * nb;
      pa_prepare_x_sums(j->vt, xq, (b1 - b0) * bs, xs + b0, xs + nb + b0);
    }
    lo = t * nb + b1;
  }
}

/* Where chunk [c0, c0 + kcols) of token t's packed activations starts:
 * chunk by chunk, each chunk token by token, so that a chunk's activations
 * of every token are one stream (one chunk: the tokens' rows in order). */
static const uint8_t *packed_x(const matmul_job *j, int64_t c0, int64_t t) {
  const pa_gemm_kernel *g = j->gemm;
  const int64_t cc = j->cols - c0 < j->kcols ? j->cols - c0 : j->kcols;
  return j->xp + (size_t)j->n_tokens * (c0 ? g->x_size(c0) : 0) + (size_t)t * g->x_size(cc);
}

/* Token t's activations quantized (after the norm, when the job has one,
 * into tmp: the normalised row is never written anywhere else), with their
 * block sums when the kernels take them, and packed for the kernel (the
 * GEMM's chunk by chunk). */
static void quantize_token(const matmul_job *j, int64_t t, float *tmp) {
  const float *x = j->x + t * j->x_stride;
  if (j->norm_w) {
    j->ex->ops->rmsnorm(tmp, x, j->norm_w, j->cols, j->norm_eps);
    x = tmp;
  }
  uint8_t *xq = (uint8_t *)j->work + (size_t)t * j->xq_row;
  j->ex->k->quantize_row[j->vt](x, xq, j->cols);
  if (j->xs) {
    const int64_t nb = j->cols / pa_type_get(j->vt)->block_size;
    float *xs = j->xs + t * 2 * nb;
    pa_prepare_x_sums(j->vt, xq, j->cols, xs, xs + nb);
  }
  if (j->ilv)
    j->ilv->pack_x(j->cols, xq, j->xp + (size_t)t * j->xp_row);
  else if (j->xp)
    for (int64_t c0 = 0; c0 < j->cols; c0 += j->kcols) {
      const int64_t cc = j->cols - c0 < j->kcols ? j->cols - c0 : j->kcols;
      j->gemm->pack_x(cc, xq + pa_row_size(j->vt, c0), (uint8_t *)packed_x(j, c0, t));
    }
}

/* Whole tokens per thread: the GEMM and interleaved paths, and any job
 * whose rows are normalised first (a norm needs the whole row). */
static void quantize_share_tokens(const matmul_job *j, int ith, int nth) {
  _Alignas(64) float tmp[PA_MATMUL_NORM_COLS];
  long lo, hi;
  pa_split((long)j->n_tokens, ith, nth, &lo, &hi);
  for (long t = lo; t < hi; t++) quantize_token(j, t, tmp);
}

/* Whether the job's activations are shared out in whole tokens. */
static bool whole_tokens(const matmul_job *j) { return j->ilv || j->gemm || j->norm_w; }

static void quantize_task(void *arg, int ith, int nth) {
  const matmul_job *j = arg;
  if (whole_tokens(j))
    quantize_share_tokens(j, ith, nth);
  else
    quantize_share(j, ith, nth);
}

/* Tests: tokens per block of the K-blocked path (0: as many as fit). */
static int64_t gemm_token_block;
void pa_matmul_set_gemm_token_block(int64_t tokens) { gemm_token_block = tokens; }

/* The K-blocked entries of kernel g, or NULL. */
static const pa_gemm_parts *parts_of(const pa_gemm_kernel *g) {
#if defined(__x86_64__)
  const pa_gemm_parts *p = pa_gemm_parts_avx512(g);
  return p ? p : pa_gemm_parts_avx2(g);
#else
  return NULL; /* GEMM kernels are x86 SIMD */
#endif
}

/* Rows of a panel of chunks of kc columns. */
static int64_t chunk_rows(const pa_gemm_kernel *g, int64_t kc) {
  const int64_t rp = (int64_t)(GEMM_K_PANEL / g->w_size(kc)) / g->rows * g->rows;
  return rp < g->rows ? g->rows : rp;
}

/* gemm_rows_chunked: rows [r_begin, r_end) of matrix m for every token,
 * rows cut into chunks of j->kcols columns. For each panel of rows and
 * block of tokens, chunk after chunk: the panel's part of the chunk is
 * unpacked (into L1), then every tile of the block runs over it (the
 * tokens' part of the chunk: one stream from L2), the tiles' accumulators
 * kept in acc between chunks; then every tile writes its results. */
static __attribute__((noinline)) void gemm_rows_chunked(const matmul_job *j, int m,
                                                        int64_t r_begin, int64_t r_end) {
  const pa_gemm_kernel *g = j->gemm;
  const pa_gemm_parts *gp = j->parts;
  const pa_matrix *w = j->w[m];
  _Alignas(64) uint8_t panel[GEMM_K_PANEL];
  _Alignas(64) float acc[GEMM_ACC_FLOATS];
  const int64_t kc = j->kcols;
  const size_t w_row = pa_row_size(w->type, w->cols);
  const int64_t rp = chunk_rows(g, kc); /* job_init checked that they fit */
  const int64_t row_tiles = rp / g->rows;
  int64_t tb = GEMM_ACC_FLOATS / gp->acc_floats / row_tiles * g->tokens; /* tokens per block */
  if (gemm_token_block > 0 && tb > gemm_token_block) tb = gemm_token_block;
  if (tb > j->n_tokens) tb = j->n_tokens;
  const int64_t ys = j->y_stride[m];
  const uint8_t *wptr[GEMM_MAX_TILE], *xptr[GEMM_MAX_TILE];
  float out[GEMM_MAX_TILE];
  for (int64_t r0 = r_begin; r0 < r_end; r0 += rp) {
    const int64_t r1 = r0 + rp < r_end ? r0 + rp : r_end;
    for (int64_t b0 = 0; b0 < j->n_tokens; b0 += tb) {
      const int64_t b1 = b0 + tb < j->n_tokens ? b0 + tb : j->n_tokens;
      const int64_t token_tiles = (b1 - b0 + g->tokens - 1) / g->tokens;
      memset(acc, 0, sizeof(float) * (size_t)(token_tiles * row_tiles * gp->acc_floats));
      for (int64_t c0 = 0; c0 < w->cols; c0 += kc) {
        const int64_t cc = w->cols - c0 < kc ? w->cols - c0 : kc;
        const size_t wc_row = g->w_size(cc);
        for (int64_t r = r0; r < r1; r++)
          g->pack_w(cc, (const uint8_t *)w->data + (size_t)r * w_row + pa_row_size(w->type, c0),
                    panel + (size_t)(r - r0) * wc_row);
        float *a = acc;
        /* The next token tile's chunk (contiguous) is asked for into L1 a
         * slice per row tile: with 512 tokens of 4096-14336 columns the
         * activations come from L3, and their latency showed (2 threads,
         * 512 tokens, Q4_K/Q6_K: ~250-280 -> ~290-410 GOP/s, noisy). */
        const size_t xc_tile = (size_t)g->tokens * g->x_size(cc); /* a token tile's chunk */
        const size_t pf_step = (xc_tile / (size_t)row_tiles + 63) & ~(size_t)63;
        for (int64_t t0 = b0; t0 < b1; t0 += g->tokens) {
          const int nt = (int)(b1 - t0 < g->tokens ? b1 - t0 : g->tokens);
          for (int t = 0; t < g->tokens; t++) xptr[t] = packed_x(j, c0, t0 + (t < nt ? t : nt - 1));
          const uint8_t *pf = packed_x(j, c0, t0) + xc_tile, *pf_end = pf + xc_tile;
          for (int64_t ra = r0; ra < r1; ra += g->rows, a += gp->acc_floats) {
            const int nr = (int)(r1 - ra < g->rows ? r1 - ra : g->rows);
            for (size_t o = 0; o < pf_step && pf < pf_end; o += 64, pf += 64) __builtin_prefetch(pf);
            for (int r = 0; r < g->rows; r++)
              wptr[r] = panel + (size_t)(ra - r0 + (r < nr ? r : nr - 1)) * wc_row;
            gp->tile_part(cc, wptr, xptr, a);
          }
        }
      }
      const float *a = acc;
      for (int64_t t0 = b0; t0 < b1; t0 += g->tokens) {
        const int nt = (int)(b1 - t0 < g->tokens ? b1 - t0 : g->tokens);
        for (int64_t ra = r0; ra < r1; ra += g->rows, a += gp->acc_floats) {
          const int nr = (int)(r1 - ra < g->rows ? r1 - ra : g->rows);
          float *y = j->y[m] + t0 * ys + ra;
          if (nr == g->rows && nt == g->tokens) {
            gp->tile_end(a, y, ys);
          } else { /* an edge tile: through a buffer, so nothing outside y is written */
            gp->tile_end(a, out, g->rows);
            for (int t = 0; t < nt; t++)
              for (int r = 0; r < nr; r++) y[t * ys + r] = out[t * g->rows + r];
          }
        }
      }
    }
  }
}

/* Rows [r_begin, r_end) of matrix m for every token, by the GEMM kernel:
 * panels of rows unpacked into a stack buffer, then tiles of rows x tokens. */
static void gemm_rows(const matmul_job *j, int m, int64_t r_begin, int64_t r_end) {
  const pa_gemm_kernel *g = j->gemm;
  if (j->kcols < j->cols) {
    gemm_rows_chunked(j, m, r_begin, r_end);
    return;
  }
  const pa_matrix *w = j->w[m];
  _Alignas(64) uint8_t panel[GEMM_PANEL_BYTES];
  const size_t w_row = pa_row_size(w->type, w->cols), wp_row = g->w_size(w->cols);
  int64_t rp = (int64_t)(GEMM_PANEL_TARGET / wp_row) / g->rows * g->rows;
  if (rp < g->rows) rp = g->rows; /* job_init checked that this fits */
  const uint8_t *xbase = j->xp ? j->xp : (const uint8_t *)j->work;
  const size_t x_row = j->xp ? j->xp_row : j->xq_row;
  const int64_t ys = j->y_stride[m];
  const uint8_t *wptr[GEMM_MAX_TILE], *xptr[GEMM_MAX_TILE];
  float out[GEMM_MAX_TILE];
  for (int64_t r0 = r_begin; r0 < r_end; r0 += rp) {
    const int64_t r1 = r0 + rp < r_end ? r0 + rp : r_end;
    for (int64_t r = r0; r < r1; r++)
      g->pack_w(w->cols, (const uint8_t *)w->data + (size_t)r * w_row,
                panel + (size_t)(r - r0) * wp_row);
    for (int64_t t0 = 0; t0 < j->n_tokens; t0 += g->tokens) {
      const int nt = (int)(j->n_tokens - t0 < g->tokens ? j->n_tokens - t0 : g->tokens);
      for (int t = 0; t < g->tokens; t++)
        xptr[t] = xbase + (size_t)(t0 + (t < nt ? t : nt - 1)) * x_row;
      for (int64_t ra = r0; ra < r1; ra += g->rows) {
        const int nr = (int)(r1 - ra < g->rows ? r1 - ra : g->rows);
        for (int r = 0; r < g->rows; r++)
          wptr[r] = panel + (size_t)(ra - r0 + (r < nr ? r : nr - 1)) * wp_row;
        float *y = j->y[m] + t0 * ys + ra;
        if (nr == g->rows && nt == g->tokens) {
          g->tile(w->cols, wptr, xptr, y, ys);
        } else { /* an edge tile: through a buffer, so nothing outside y is written */
          g->tile(w->cols, wptr, xptr, out, g->rows);
          for (int t = 0; t < nt; t++)
            for (int r = 0; r < nr; r++) y[t * ys + r] = out[t * g->rows + r];
        }
      }
    }
  }
}

/* The one-token path streams each thread's rows in order, yet read a
 * 170 MB matrix (Gemma 3's Q8_0 output) at ~20 of the ~34 GB/s a plain
 * read loop gets on 2 threads: the hardware prefetchers stop at each 4 KB
 * page and start cold on the next. So each row asks for the bytes
 * PF_DISTANCE ahead of it (into L2). Measured alternately against no
 * prefetch on a loaded machine (8, 16, 32 KB and L1/L2 hints
 * were all alike): Gemma 3 270M decode 24 -> 34-38 tok/s, the Q4_K_M
 * Llama-1B shape 8 -> 10.5. Prefetches never fault: past the matrix's end
 * they are harmless. */
#ifndef PF_DISTANCE
#define PF_DISTANCE 16384
#endif
#ifndef PF_LOCALITY
#define PF_LOCALITY 2
#endif
static inline void prefetch_ahead(const uint8_t *row, size_t bytes) {
  for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch(row + PF_DISTANCE + o, 0, PF_LOCALITY);
}

/* Rows [r_begin, r_end) of matrix m for every token, one dot per output. */
static void dot_rows(const matmul_job *j, int m, int64_t r_begin, int64_t r_end) {
  const pa_matrix *w = j->w[m];
  const uint8_t *xq = j->vt == PA_TYPE_F32 ? (const uint8_t *)j->x : (const uint8_t *)j->work;
  const size_t xq_stride =
      j->vt == PA_TYPE_F32 ? (size_t)j->x_stride * sizeof(float) : j->xq_row;
  const size_t w_row = pa_row_size(w->type, w->cols);
  const uint8_t *wd = w->data;
  const pa_vec_dot_fn dot = j->ex->k->vec_dot[w->type];
  const pa_vec_dot_xs_fn dot_xs = j->dot_xs[m];
  const bool pf = !pa_kernels_self_prefetch(j->ex->k, w->type);
  for (int64_t r0 = r_begin; r0 < r_end; r0 += ROW_BLOCK) {
    const int64_t r1 = r0 + ROW_BLOCK < r_end ? r0 + ROW_BLOCK : r_end;
    for (int64_t t = 0; t < j->n_tokens; t++) {
      const uint8_t *xt = xq + (size_t)t * xq_stride;
      float *yt = j->y[m] + t * j->y_stride[m];
      if (dot_xs) {
        const float *xs = j->xs + t * 2 * (w->cols / 32);
        for (int64_t r = r0; r < r1; r++) {
          if (t == 0) prefetch_ahead(wd + (size_t)r * w_row, w_row);
          dot_xs(w->cols, &yt[r], wd + (size_t)r * w_row, xt, xs);
        }
      } else {
        for (int64_t r = r0; r < r1; r++) {
          if (t == 0 && pf) prefetch_ahead(wd + (size_t)r * w_row, w_row);
          dot(w->cols, &yt[r], wd + (size_t)r * w_row, xt);
        }
      }
    }
  }
}

/* Rows [r_begin, r_end) (whole groups) of an interleaved matrix for every
 * token: groups in panels of about ILV_PANEL bytes (which stay in L2
 * while the tokens pass), the kernel's tokens at a time. One token: the
 * groups stream in order, and the kernels ask for the bytes some way
 * ahead of each record they read, or leave it to the hardware, as
 * measured per CPU (kernels.h, pa_prefetch_avx512; asking for a whole
 * group's bytes at once, 6-40 KB, as dot_rows does per row, left Q4_1 at
 * 15 GB/s on 2 threads where the file layout reached 20-25). */
#define ILV_PANEL (128 * 1024)

/* A span of weight bytes to ask for (into L2) while a panel's later passes
 * run from the cache: the next panel, or after a task's last panel the
 * first panel of the task this thread likely takes next. With 16 tokens
 * (4 passes) a task of a layer's matrices is about one panel, whose first
 * pass read the weights from memory; asked for a task ahead, they come
 * from L2 (bench_kernels 2 seq 16 Q4_1, distinct matrices, alternated: 4
 * rounds 187-215 against 167-198 GOP/s). */
typedef struct {
  const uint8_t *p;
  size_t n;
} pf_span;

/* Groups per panel of interleaved matrix w (kernel k), and a group's bytes. */
static int64_t panel_groups(const pa_matrix *w, const pa_ilv_kernel *k, size_t *gbytes) {
  *gbytes = pa_layout_bytes(w->layout, w->type, k->rows, w->cols);
  const int64_t pg = (int64_t)(ILV_PANEL / *gbytes);
  return pg < 1 ? 1 : pg;
}

/* The first panel of rows [r0, r1) of interleaved matrix m (whole groups). */
static pf_span ilv_first_panel(const matmul_job *j, int m, int64_t r0, int64_t r1) {
  const pa_matrix *w = j->w[m];
  const pa_ilv_kernel *k = j->ilv;
  size_t gbytes;
  const int64_t pg = panel_groups(w, k, &gbytes);
  const int64_t g0 = r0 / k->rows, g1 = r1 / k->rows < g0 + pg ? r1 / k->rows : g0 + pg;
  pf_span sp = {(const uint8_t *)w->data + (size_t)g0 * gbytes, g1 > g0 ? (size_t)(g1 - g0) * gbytes : 0};
  return sp;
}

static void ilv_rows(const matmul_job *j, int m, int64_t r_begin, int64_t r_end, pf_span after) {
  const pa_matrix *w = j->w[m];
  const pa_ilv_kernel *k = j->ilv;
  size_t gbytes;
  const int64_t pg = panel_groups(w, k, &gbytes);
  const uint8_t *wd = w->data;
  const int64_t ys = j->y_stride[m];
  const uint8_t *xptr[PA_ILV_MAX_TOKENS];
  const int64_t passes = (j->n_tokens + k->tokens - 1) / k->tokens;
  if (j->n_tokens == 1 && j->ex->pf.start > 0) { /* a new stream: its start at once (kernels.h) */
    const uint8_t *st = wd + (size_t)(r_begin / k->rows) * gbytes;
    const size_t all = (size_t)(r_end / k->rows - r_begin / k->rows) * gbytes;
    const size_t n = all < (size_t)j->ex->pf.start ? all : (size_t)j->ex->pf.start;
    for (size_t o = 0; o < n; o += 64) __builtin_prefetch(st + o, 0, 2);
  }
  if (j->n_tokens == 1 && k->run1) { /* one pass: every group in one call */
    const int64_t gb = r_begin / k->rows;
    k->run1(w->cols, wd + (size_t)gb * gbytes, gbytes, r_end / k->rows - gb, j->xp,
            j->y[m] + k->rows * gb, &j->ex->pf);
    return;
  }
  for (int64_t g0 = r_begin / k->rows; g0 < r_end / k->rows; g0 += pg) {
    const int64_t g1 = g0 + pg < r_end / k->rows ? g0 + pg : r_end / k->rows;
    /* the span to ask for during passes 2.. (a slice per group and pass) */
    const pf_span next = g1 < r_end / k->rows ? ilv_first_panel(j, m, g1 * k->rows, r_end) : after;
    const uint8_t *pf = next.p, *pf_end = next.p ? next.p + next.n : NULL;
    const size_t slice =
        passes > 1 && next.n ? ((next.n / (size_t)((passes - 1) * (g1 - g0)) + 64) & ~(size_t)63) : 0;
    for (int64_t t0 = 0; t0 < j->n_tokens; t0 += k->tokens) {
      const int nt = (int)(j->n_tokens - t0 < k->tokens ? j->n_tokens - t0 : k->tokens);
      for (int t = 0; t < nt; t++) xptr[t] = j->xp + (size_t)(t0 + t) * j->xp_row;
      for (int64_t g = g0; g < g1; g++) {
        if (t0 > 0)
          for (size_t o = 0; o < slice && pf < pf_end; o += 64, pf += 64) __builtin_prefetch(pf, 0, 2);
        k->run(w->cols, wd + (size_t)g * gbytes, xptr, nt, j->y[m] + t0 * ys + k->rows * g, ys, t0 == 0 ? &j->ex->pf : NULL);
      }
    }
  }
}

static void rows_of(const matmul_job *j, int m, int64_t r0, int64_t r1, pf_span after) {
  if (r0 >= r1) return;
  if (j->ilv)
    ilv_rows(j, m, r0, r1, after);
  else if (j->gemm)
    gemm_rows(j, m, r0, r1);
  else
    dot_rows(j, m, r0, r1);
}

/* Task `task`'s matrix and rows. */
static int task_rows(const matmul_job *j, int task, int64_t *r0, int64_t *r1) {
  int m = 0;
  while (j->tg[task] >= j->g0[m + 1]) m++;
  const int64_t rows = j->w[m]->rows, grain = j->grain;
  const int64_t hi = (j->tg[task + 1] - j->g0[m]) * grain;
  *r0 = (j->tg[task] - j->g0[m]) * grain;
  *r1 = hi < rows ? hi : rows;
  return m;
}

/* Cuts grains [0, g0[n]) into guided tasks (see TASK_GUIDE) that stay
 * inside the spans [g0[m], g0[m + 1]) (a job's matrices, a group's
 * products); when tasks run short, the last ones take whole spans, so
 * there are at most max. One token (one_token): the first nth tasks take
 * TASK_FIRST_EIGHTHS / 8 of the grains between them, the rest is guided.
 * tg: the n_tasks + 1 bounds. Returns n_tasks. */
static int plan_spans(const int64_t *g0, int n, int nth, int64_t *tg, int max, bool one_token) {
  const int64_t total = g0[n];
  const int64_t least = (total + (int64_t)TASK_MIN_SHARE * nth - 1) / ((int64_t)TASK_MIN_SHARE * nth);
  const int64_t first = one_token ? total * TASK_FIRST_EIGHTHS / (8 * nth) : 0;
  int t = 0, m = 0;
  tg[0] = 0;
  for (int64_t at = 0; at < total;) {
    while (at >= g0[m + 1]) m++;
    int64_t size = nth > 1 ? (total - at + (int64_t)TASK_GUIDE * nth - 1) / ((int64_t)TASK_GUIDE * nth) : total;
    if (t < nth && first > size) size = first;
    if (size < least) size = least;
    if (size > g0[m + 1] - at || t >= max - (n - m)) size = g0[m + 1] - at;
    at += size;
    tg[++t] = at;
  }
  return t;
}

/* The job's tasks: guided, one matrix each. */
static void plan_tasks(matmul_job *j, int n, int nth) { j->n_tasks = plan_spans(j->g0, n, nth, j->tg, MAX_TASKS, j->n_tokens == 1); }

/* Rows [r0, r1) of job j's products (of both matrices of a gated job,
 * then its gate), and the epilogue. */
static void job_rows(const matmul_job *j, int m, int64_t r0, int64_t r1, pf_span after) {
  if (r0 >= r1) return;
  if (j->gate) {
    rows_of(j, 0, r0, r1, j->ilv ? ilv_first_panel(j, 1, r0, r1) : after);
    rows_of(j, 1, r0, r1, after);
    for (int64_t t = 0; t < j->n_tokens; t++)
      j->gate(j->y[0] + t * j->y_stride[0] + r0, j->y[1] + t * j->y_stride[1] + r0, r1 - r0);
    return;
  }
  rows_of(j, m, r0, r1, after);
  if (j->epi) j->epi(j->epi_arg, j->m_base + m, r0, r1);
}

static void matmul_task(void *arg, int task, int n_tasks) {
  const matmul_job *j = arg;
  int64_t r0, r1;
  const int m = task_rows(j, task, &r0, &r1);
  /* interleaved weights, several passes: the first panel of the task
   * this thread likely claims next (tasks go out in order) is asked for
   * during this one's last panel */
  pf_span after = {NULL, 0};
  if (j->ilv && j->n_tokens > j->ilv->tokens && task + j->n_threads < n_tasks) {
    int64_t a0, a1;
    const int ma = task_rows(j, task + j->n_threads, &a0, &a1);
    after = ilv_first_panel(j, ma, a0, a1);
  }
  job_rows(j, m, r0, r1, after);
}

/* Sets up the job for outs[0..n) over x; false when they cannot share one
 * (columns, activation type or GEMM kernel differ). */
static bool job_init(matmul_job *j, const pa_cpu_exec *ex, const pa_matmul_out *outs, int n, const float *x,
                     int64_t x_stride, int64_t n_tokens, void *work) {
  const pa_type_traits *t = pa_type_get(outs[0].w->type);
  if (!t || n < 1 || n > PA_MATMUL_MAX_OUTS) return false;
  if (!ex) ex = pa_cpu_exec_best();
  *j = (matmul_job){.ex = ex, .n_mats = n, .x = x, .x_stride = x_stride,
                    .n_tokens = n_tokens, .cols = outs[0].w->cols, .vt = t->vec_dot_type,
                    .work = work, .xq_row = pa_row_size(t->vec_dot_type, outs[0].w->cols),
                    .grain = ROW_GRAIN};
  const pa_layout layout = outs[0].w->layout;
  for (int m = 0; m < n; m++)
    if (outs[m].w->layout != layout) return false;
  if (layout != PA_LAYOUT_ROWS) { /* interleaved: its kernel whatever n_tokens is */
    for (int m = 0; m < n; m++) {
      const pa_matrix *w = outs[m].w;
      if (w->type != outs[0].w->type || w->cols != j->cols || w->rows <= 0) return false;
      j->w[m] = w;
      j->y[m] = outs[m].y;
      j->y_stride[m] = outs[m].y_stride;
    }
    j->ilv = pa_kernels_ilv(j->ex->k, layout, outs[0].w->type);
    if (!j->ilv) return false;
    j->kcols = j->cols;
    const uintptr_t at = (uintptr_t)work + xq_bytes(j->vt, j->cols, n_tokens);
    j->xp = (uint8_t *)((at + 63) & ~(uintptr_t)63);
    j->xp_row = j->ilv->x_size(j->cols);
    return true;
  }
  const pa_gemm_kernel *g = pa_kernels_gemm(j->ex->k, outs[0].w->type);
  /* columns per chunk: whole rows when the kernel cannot cut them, or
   * when they are short enough */
  const pa_gemm_parts *gp = g ? parts_of(g) : NULL;
  const int64_t chunk = gp ? GEMM_K_CHUNK * gp->kblock : 0;
  const bool chunked = gp && g->x_size && j->cols > chunk && j->cols % gp->kblock == 0 &&
                       (size_t)g->rows * g->w_size(chunk) <= GEMM_K_PANEL &&
                       chunk_rows(g, chunk) / g->rows * gp->acc_floats <= GEMM_ACC_FLOATS;
  j->kcols = chunked ? chunk : j->cols;
  const bool use_gemm = g && n_tokens >= GEMM_MIN_TOKENS && g->rows * g->tokens <= GEMM_MAX_TILE &&
                        (size_t)g->rows * g->w_size(j->kcols) <= GEMM_PANEL_BYTES;
  for (int m = 0; m < n; m++) {
    const pa_matrix *w = outs[m].w;
    const pa_type_traits *tm = pa_type_get(w->type);
    if (!tm || w->cols != j->cols || tm->vec_dot_type != j->vt || w->rows <= 0) return false;
    if (use_gemm ? pa_kernels_gemm(j->ex->k, w->type) != g : false) return false;
    j->w[m] = w;
    j->y[m] = outs[m].y;
    j->y_stride[m] = outs[m].y_stride;
  }
  if (use_gemm) {
    j->gemm = g;
    j->parts = chunked ? gp : NULL;
    if (g->x_size) { /* packed rows after the quantized rows and their sums, 64-byte aligned */
      const uintptr_t at = (uintptr_t)work + xq_bytes(j->vt, j->cols, n_tokens) +
                           xs_bytes(j->vt, j->cols, n_tokens);
      j->xp = (uint8_t *)((at + 63) & ~(uintptr_t)63);
      j->xp_row = g->x_size(j->cols);
    }
  } else {
    j->kcols = j->cols;
  }
  if (!use_gemm && has_x_sums(j->vt)) {
    bool any = false;
    for (int m = 0; m < n; m++) any |= (j->dot_xs[m] = pa_kernels_vec_dot_xs(j->ex->k, j->w[m]->type)) != NULL;
    if (any) { /* floats after the quantized rows, 64-byte aligned whatever work is */
      const uintptr_t at = (uintptr_t)work + xq_bytes(j->vt, j->cols, n_tokens);
      j->xs = (float *)((at + 63) & ~(uintptr_t)63);
    }
  }
  return true;
}

/* Quantizes the activations (split over the pool when they are many), then
 * runs the products: guided tasks (plan_tasks), shared between the
 * matrices by their rows. */
static void job_run(pa_pool *pool, matmul_job *j) {
  const int nth = pa_pool_size(pool);
  j->n_threads = nth;
  if (j->vt != PA_TYPE_F32) {
    const int64_t elems = j->n_tokens * j->cols;
    const bool split = whole_tokens(j) ? j->n_tokens >= 2 && elems >= SPLIT_QUANTIZE_TOKENS_MIN
                                       : elems >= SPLIT_QUANTIZE_MIN;
    if (nth > 1 && split)
      pa_pool_run(pool, quantize_task, j);
    else
      quantize_task(j, 0, 1);
  }
  const int n = j->gate ? 1 : j->n_mats; /* gated: the tasks cut the shared rows */
  int64_t tg[MAX_TASKS + 1];
  j->tg = tg;
  j->g0[0] = 0;
  for (int m = 0; m < n; m++) j->g0[m + 1] = j->g0[m] + (j->w[m]->rows + j->grain - 1) / j->grain;
  plan_tasks(j, n, nth);
  pa_pool_run_tasks(pool, matmul_task, j, j->n_tasks);
}

void pa_matmul(const pa_cpu_exec *ex, pa_pool *pool, const pa_matrix *w, const float *x, int64_t x_stride, float *y,
               int64_t y_stride, int64_t n_tokens, void *work) {
  const pa_matmul_out out = {w, y, y_stride};
  pa_matmul_multi(ex, pool, &out, 1, x, x_stride, n_tokens, work);
}

bool pa_matmul_can_norm(const pa_matrix *w) {
  const pa_type_traits *t = pa_type_get(w->type);
  return t && t->vec_dot_type != PA_TYPE_F32 && w->cols > 0 && w->cols <= PA_MATMUL_NORM_COLS;
}

/* The fusion's parts in job j (set up by job_init); m_base: the epilogue's
 * index of j's first matrix. */
static void job_fuse(matmul_job *j, const pa_matmul_fuse *f, int m_base) {
  if (!f) return;
  j->norm_w = f->norm_w;
  j->norm_eps = f->norm_eps;
  j->epi = f->epi;
  j->epi_arg = f->epi_arg;
  j->m_base = m_base;
  if (f->grain > ROW_GRAIN) j->grain = f->grain;
}

/* Jobs run as one pool job: their grains laid end to end and cut into
 * guided tasks that stay inside one job (plan_spans). */
typedef struct {
  const matmul_job *j;
  const int64_t *g0; /* job i's grains: [g0[i], g0[i + 1]) of the group's */
  const int64_t *tg; /* task k's grains: [tg[k], tg[k + 1]) */
  int n;             /* jobs */
} group_view;

static void group_task(void *arg, int task, int n_tasks) {
  (void)n_tasks;
  const group_view *g = arg;
  int lo = 0, hi = g->n - 1; /* the job holding the task: the last whose grains start at or before it */
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (g->g0[mid] <= g->tg[task]) lo = mid; else hi = mid - 1;
  }
  const matmul_job *j = &g->j[lo];
  const int64_t rows = j->w[0]->rows;
  const int64_t r0 = (g->tg[task] - g->g0[lo]) * j->grain, r1 = (g->tg[task + 1] - g->g0[lo]) * j->grain;
  const pf_span none = {NULL, 0};
  job_rows(j, 0, r0, r1 < rows ? r1 : rows, none);
}

/* Whether job b can use job a's quantized activations. */
static bool same_activations(const matmul_job *a, const matmul_job *b) {
  return a->x == b->x && a->x_stride == b->x_stride && a->n_tokens == b->n_tokens && a->cols == b->cols &&
         a->vt == b->vt && a->ilv == b->ilv && a->gemm == b->gemm && a->parts == b->parts &&
         a->kcols == b->kcols && a->xp_row == b->xp_row && a->xq_row == b->xq_row &&
         (a->xs != NULL) == (b->xs != NULL);
}

/* Points job j[m] at the activations of the first earlier job that owns
 * its own (!shared) and takes the same ones; whether it found one. */
static bool share_activations(matmul_job *j, const bool *shared, int m) {
  for (int k = 0; k < m; k++)
    if (!shared[k] && same_activations(&j[k], &j[m])) {
      j[m].work = j[k].work, j[m].xs = j[k].xs, j[m].xp = j[k].xp;
      return true;
    }
  return false;
}

/* Runs jobs j[0..n) as one pool job (group_task): the activations of those
 * that own theirs quantized by the calling thread, then the tasks
 * plan_spans cuts from their rows (one_token: its first shares). g0: n + 1
 * bounds, tg: MAX_TASKS + 1, the caller's. */
static void run_jobs(pa_pool *pool, const matmul_job *j, const bool *shared, int n, int64_t *g0,
                     int64_t *tg, bool one_token) {
  g0[0] = 0;
  for (int i = 0; i < n; i++) {
    if (!shared[i] && j[i].vt != PA_TYPE_F32) quantize_task((void *)&j[i], 0, 1);
    g0[i + 1] = g0[i] + (j[i].w[0]->rows + j[i].grain - 1) / j[i].grain;
  }
  const int n_tasks = plan_spans(g0, n, pa_pool_size(pool), tg, MAX_TASKS, one_token);
  const group_view g = {j, g0, tg, n};
  pa_pool_run_tasks(pool, group_task, (void *)&g, n_tasks);
}

/* A multi product whose matrices cannot share one job (their layouts or
 * types differ: Q4_K_M's attention q and k in 16-row groups, v in Q6_K's
 * 4-row ones) as one pool job of a job per matrix, those that take the
 * same activations sharing one quantization; false, having computed
 * nothing, where the activations of the jobs after the first do not fit
 * MULTI_SCRATCH bytes (many tokens, long rows): then a pool job each. One
 * pool job in place of three saves two starts and ends of a product's
 * streams (docs/architecture.md has the measurement). */
#define MULTI_SCRATCH (32 * 1024)
static bool multi_jobs(const pa_cpu_exec *ex, pa_pool *pool, const pa_matmul_out *outs, int n,
                       const float *x, int64_t x_stride, int64_t n_tokens, void *work,
                       const pa_matmul_fuse *f) {
  matmul_job j[PA_MATMUL_MAX_OUTS];
  bool shared[PA_MATMUL_MAX_OUTS];
  int64_t g0[PA_MATMUL_MAX_OUTS + 1], tg[MAX_TASKS + 1];
  _Alignas(64) uint8_t scratch[MULTI_SCRATCH];
  const int nth = pa_pool_size(pool);
  size_t used = 0;
  for (int m = 0; m < n; m++) {
    /* the first job's activations in work, the others' in scratch */
    uint8_t *at = m == 0 ? work : scratch + used;
    if (!pa_type_get(outs[m].w->type) || outs[m].w->rows <= 0 ||
        !job_init(&j[m], ex, &outs[m], 1, x, x_stride, n_tokens, at))
      return false;
    job_fuse(&j[m], f, m);
    j[m].n_threads = nth;
    shared[m] = share_activations(j, shared, m);
    if (m > 0 && !shared[m]) {
      used += (pa_matmul_work_size(outs[m].w, n_tokens) + 127) & ~(size_t)63;
      if (used > sizeof scratch) return false;
    }
  }
  run_jobs(pool, j, shared, n, g0, tg, n_tokens == 1);
  return true;
}

void pa_matmul_multi_fused(const pa_cpu_exec *ex, pa_pool *pool, const pa_matmul_out *outs, int n_outs, const float *x,
                           int64_t x_stride, int64_t n_tokens, void *work,
                           const pa_matmul_fuse *f) {
  if (n_tokens <= 0 || n_outs <= 0) return;
  matmul_job j;
  if (job_init(&j, ex, outs, n_outs, x, x_stride, n_tokens, work)) {
    job_fuse(&j, f, 0);
    job_run(pool, &j);
    return;
  }
  if (multi_jobs(ex, pool, outs, n_outs, x, x_stride, n_tokens, work, f)) return;
  for (int m = 0; m < n_outs; m++) /* one job each */
    if (pa_type_get(outs[m].w->type) && outs[m].w->rows > 0 &&
        job_init(&j, ex, &outs[m], 1, x, x_stride, n_tokens, work)) {
      job_fuse(&j, f, m);
      job_run(pool, &j);
    }
}

void pa_matmul_multi(const pa_cpu_exec *ex, pa_pool *pool, const pa_matmul_out *outs, int n_outs, const float *x,
                     int64_t x_stride, int64_t n_tokens, void *work) {
  pa_matmul_multi_fused(ex, pool, outs, n_outs, x, x_stride, n_tokens, work, NULL);
}

/* The gate applied on its own (pa_matmul_gated when the two products
 * cannot share a job): tokens split over the pool. */
typedef struct {
  pa_gate_fn fn;
  float *h;
  const float *h_up;
  int64_t stride, rows, n_tokens;
} gate_job;

static void gate_task(void *arg, int ith, int nth) {
  const gate_job *g = arg;
  long lo, hi;
  pa_split((long)g->n_tokens, ith, nth, &lo, &hi);
  for (long t = lo; t < hi; t++) g->fn(g->h + t * g->stride, g->h_up + t * g->stride, g->rows);
}

void pa_matmul_gated_fused(const pa_cpu_exec *ex, pa_pool *pool, const pa_matrix *gate, const pa_matrix *up, pa_gate_fn fn,
                           const float *x, int64_t x_stride, float *h, float *h_up,
                           int64_t h_stride, int64_t n_tokens, void *work,
                           const pa_matmul_fuse *f) {
  if (n_tokens <= 0) return;
  const pa_matmul_out outs[2] = {{gate, h, h_stride}, {up, h_up, h_stride}};
  const pa_matmul_fuse norm_only = {.norm_w = f ? f->norm_w : NULL,
                                    .norm_eps = f ? f->norm_eps : 0};
  matmul_job j;
  if (gate->rows == up->rows && job_init(&j, ex, outs, 2, x, x_stride, n_tokens, work)) {
    job_fuse(&j, &norm_only, 0);
    j.gate = fn;
    job_run(pool, &j);
    return;
  }
  pa_matmul_multi_fused(ex, pool, outs, 2, x, x_stride, n_tokens, work, &norm_only); /* two jobs */
  gate_job gj = {fn, h, h_up, h_stride, gate->rows, n_tokens};
  pa_pool_run(pool, gate_task, &gj);
}

void pa_matmul_gated(const pa_cpu_exec *ex, pa_pool *pool, const pa_matrix *gate, const pa_matrix *up, pa_gate_fn fn,
                     const float *x, int64_t x_stride, float *h, float *h_up, int64_t h_stride,
                     int64_t n_tokens, void *work) {
  pa_matmul_gated_fused(ex, pool, gate, up, fn, x, x_stride, h, h_up, h_stride, n_tokens, work, NULL);
}

/* pa_matmul_group's state (at the start of its work): a job per item. */
typedef struct {
  matmul_job j[PA_MATMUL_GROUP_MAX];
  int64_t g0[PA_MATMUL_GROUP_MAX + 1];
  int64_t tg[MAX_TASKS + 1];
} matmul_group;

bool pa_matmul_group(const pa_cpu_exec *ex, pa_pool *pool, const pa_matmul_item *items, int n_items,
                     void *work, size_t work_bytes) {
  if (n_items < 1 || n_items > PA_MATMUL_GROUP_MAX) return false;
  const uintptr_t at = ((uintptr_t)work + 63) & ~(uintptr_t)63;
  const size_t head = (size_t)(at - (uintptr_t)work) + sizeof(matmul_group);
  if (work_bytes < head) return false;
  matmul_group *g = (matmul_group *)at; /* the state first, then the activations */
  work = (uint8_t *)work + head;
  work_bytes -= head;
  const int nth = pa_pool_size(pool);
  bool shared[PA_MATMUL_GROUP_MAX];
  size_t used = 0;
  for (int i = 0; i < n_items; i++) {
    const pa_matmul_item *it = &items[i];
    matmul_job *j = &g->j[i];
    const pa_matmul_out outs[2] = {{it->w, it->y, it->y_stride}, {it->up, it->y_up, it->y_stride}};
    const uintptr_t base = ((uintptr_t)work + used + 63) & ~(uintptr_t)63;
    if (it->n_tokens <= 0 || (it->up && (it->up->rows != it->w->rows || !it->gate)) ||
        !job_init(j, ex, outs, it->up ? 2 : 1, it->x, it->x_stride, it->n_tokens, (void *)base))
      return false;
    j->gate = it->up ? it->gate : NULL;
    j->n_threads = nth;
    shared[i] = share_activations(g->j, shared, i);
    if (!shared[i]) {
      size_t need = pa_matmul_work_size(it->w, it->n_tokens);
      if (it->up && pa_matmul_work_size(it->up, it->n_tokens) > need) need = pa_matmul_work_size(it->up, it->n_tokens);
      used = (base - (uintptr_t)work) + need;
      if (used > work_bytes) return false;
    }
  }
  run_jobs(pool, g->j, shared, n_items, g->g0, g->tg, false);
  return true;
}

size_t pa_matmul_group_work_size(const pa_matrix *const *w, const int64_t *n_tokens, int n) {
  size_t s = sizeof(matmul_group) + 64;
  for (int i = 0; i < n; i++) s += pa_matmul_work_size(w[i], n_tokens[i]) + 64;
  return s;
}

void pa_matrix_get_row(const pa_matrix *w, int64_t r, float *out) {
  if (w->layout != PA_LAYOUT_ROWS) {
    pa_layout_get_row(w, r, out);
    return;
  }
  const pa_type_traits *t = pa_type_get(w->type);
  const size_t row = pa_row_size(w->type, w->cols);
  t->to_float((const uint8_t *)w->data + (size_t)r * row, out, w->cols);
}
