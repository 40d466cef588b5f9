/* bench.h: `pasada bench`: prompt-processing (pp) and generation (tg)
 * throughput of a model, set against the machine's own ceilings measured on
 * the same threads (read bandwidth, FMA peak, int8-dot peak), or, when the
 * model runs on a Vulkan device, against that device's own (read bandwidth,
 * FMA peak: backend/vulkan/probe.h). bench_ceilings.c measures the CPU's
 * ceilings, bench.c runs the model and derives the figures, bench_report.c
 * prints them (table or JSON). */
#ifndef PASADA_BENCH_H
#define PASADA_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "backend/vulkan/probe.h"
#include "pasada.h"

/* ---- machine ceilings (bench_ceilings.c) ---- */
typedef struct {
  int n_threads;
  double read_gbs;        /* best pass, 1e9 bytes/s, every thread streaming its part */
  uint64_t read_bytes;    /* size of the buffer streamed (far above the caches) */
  uint64_t read_huge_bytes; /* of it in 2 MB pages, as the kernel gave them (the
                             * buffer is mapped as the weights are: pa_map_huge) */
  double fma_gflops;      /* fp32 FMA, independent chains in registers */
  const char *fma_isa;    /* "avx512", "avx2", "scalar" */
  double int8_gops;       /* 8-bit multiply-adds counted as 2 ops */
  const char *int8_isa;   /* "amx", "avx512_vnni", "avx_vnni", "avx2", "scalar" */
} pa_bench_ceilings;

/* Measures the three ceilings on n_threads threads. buffer_bytes 0 picks the
 * read buffer's size: max(1 GiB, 4 x the last-level cache), capped at a
 * quarter of the available memory. Returns a pasada_status (message set). */
int pa_bench_measure_ceilings(int n_threads, uint64_t buffer_bytes, pa_bench_ceilings *out);
/* The probes in a child process that keeps its read buffer mapped from one
 * measurement to the next and frees it only at pa_bench_prober_close.
 * Why a child: the buffer stays out of the benchmark's VmRSS and VmHWM. Why
 * it waits: freeing gigabytes is not free on a virtual machine. A guest
 * with free page reporting (virtio-balloon) hands freed 2 MB pages back to
 * the host a second or two later, in a kernel worker that takes a CPU from
 * the run being timed: on a 2-vCPU KVM guest, a freed 1.9 GB probe buffer
 * slowed the second and fourth tg runs after it by 17% and 8% (1B Q4_K_M,
 * 28.6-31.6 against 34.3 tok/s). Start it before loading the model, so the
 * child shares none of the weights' pages (a parent writing to a page the
 * child shares copies it); measure starts it if start was not called, and
 * measures here when fork fails. Zero-initialize the struct. */
typedef struct {
  int pid, req_fd, rep_fd, n_threads;
} pa_bench_prober;
void pa_bench_prober_start(pa_bench_prober *pr, int n_threads);
int pa_bench_prober_measure(pa_bench_prober *pr, int n_threads, pa_bench_ceilings *out);
void pa_bench_prober_close(pa_bench_prober *pr); /* ends the child, freeing its buffer */
/* The read probe's loop on one thread: streams bytes [p, p + n) (p 64-byte
 * aligned; a tail past the last multiple of 256 bytes is not read) with the
 * widest loads this CPU has, and returns a value of every byte read (so the
 * reads are not dead code). */
uint64_t pa_bench_read(const uint8_t *p, uint64_t n);

/* ---- the benchmark (bench.c) ---- */
typedef struct {
  const char *model_path;
  int32_t n_prompt;      /* pp tokens (0: no pp; tg then starts at position 0) */
  int32_t n_gen;         /* tg tokens (0: no tg) */
  int32_t n_threads;     /* 0: every online core */
  int32_t repeats;
  int32_t n_batch;       /* tokens per pasada_decode during pp */
  uint64_t seed;         /* prompt token ids */
  double price_per_hour; /* < 0: no cost figures */
  pasada_kv_type kv_type; /* the context's KV cache (PASADA_KV_DEFAULT: the engine's) */
  const char *backend;   /* the model's backend, as pasada_model_params.backend (NULL: cpu) */
  bool skip_ceilings;
  bool progress;         /* lines on stderr while it runs */
} pa_bench_params;

void pa_bench_default_params(pa_bench_params *p);

typedef struct {
  double min, median, max; /* tok/s over the repeats */
} pa_bench_rate;

typedef struct {
  /* conditions */
  char model_name[256];
  char arch[32];
  char main_type[16], output_type[16];
  bool mixed, int8_dot;
  const char *cpu_path; /* the best kernel path of this CPU (pa_cpu_describe) */
  /* the model's backend ("cpu", "vulkan:0"), and whether it is a Vulkan
   * device (then described by `device`, its ceilings in ceil* are the
   * device's: read_gbs, read_bytes and fma_gflops; no thread count, ISA,
   * huge pages or int8 peak) */
  char backend[32];
  bool gpu;
  pa_device_info device;
  bool gpu_timestamps; /* the device's probes were timed by its timestamps */
  int32_t n_threads, n_batch, n_ctx;
  int64_t n_params_layers, n_params_output;
  uint64_t weight_bytes_file; /* every tensor in the file */
  /* ceilings (zero when skipped): the probes run before the model runs and
   * again after them, and each ceiling is the higher of the two (a shared
   * machine only ever slows a probe down; the percentages are then against
   * the best the machine showed) */
  pa_bench_ceilings ceil;
  pa_bench_ceilings ceil_before, ceil_after;
  bool have_ceilings;
  /* prompt processing */
  pa_bench_rate pp;
  double pp_flops_per_run;       /* layer matmuls x tokens, output x 1, attention */
  double pp_gflops;              /* at the median rate */
  double pp_pct_fma, pp_pct_int8; /* of the measured peaks (int8: quantized weights only) */
  /* generation */
  pa_bench_rate tg;
  double tg_weight_bytes;        /* per token: layer + output matrices, one embedding row */
  double tg_kv_bytes;            /* per token: KV read at the average context length */
  double tg_avg_ctx;
  double tg_gbs;                 /* at the median rate */
  double tg_pct_bw;
  /* the bound the ceilings put on each test (with ceilings): the time a
   * run needs at the read ceiling (pp: every tensor of the file once per
   * batch of n_batch prompt tokens, an upper bound on its reads; tg: the
   * bytes above) and at the compute ceiling (the FLOPs above; the int8-dot
   * peak where the layer weights take int8 dots on a CPU, else the fp32
   * FMA peak); the larger is the bound ("memory" or "compute"), and
   * *_ceiling_tok_s the rate it allows, of which the median reached
   * *_pct_ceiling percent */
  const char *pp_bound, *tg_bound;
  double pp_ceiling_tok_s, tg_ceiling_tok_s, pp_pct_ceiling, tg_pct_ceiling;
  double pp_mem_tok_s, pp_cmp_tok_s, tg_mem_tok_s, tg_cmp_tok_s; /* each ceiling alone */
  /* memory */
  uint64_t rss_bytes;            /* VmRSS right after the last generation */
  uint64_t hwm_bytes;            /* VmHWM: peak */
  uint64_t kv_bytes;             /* the whole KV pool */
  const char *kv_type;           /* its values: "f16", "f32", "q8" */
  double rss_over_budget;        /* rss / (weights in file + KV pool) */
  /* cost per million tokens at price_per_hour (< 0 when not asked) */
  double pp_usd_per_mtok, tg_usd_per_mtok;
} pa_bench_result;

/* Runs the whole benchmark. Returns a pasada_status; on failure the reason
 * is in pasada_last_error(). */
int pa_bench_run(const pa_bench_params *p, pa_bench_result *r);

/* ---- reports (bench_report.c) ---- */
void pa_bench_print_table(FILE *f, const pa_bench_params *p, const pa_bench_result *r);
/* Exactly one JSON object and a newline; returns 0, or -1 if out of memory. */
int pa_bench_print_json(FILE *f, const pa_bench_params *p, const pa_bench_result *r);

/* ---- constrained decoding (bench_grammar.c) ---- */
#define PA_BENCH_MAX_USERS 8 /* user counts in one run */
typedef struct {
  const char *model_path;
  const char *backend;
  const char *source; /* the grammar's file, for the report */
  const char *gbnf;
  size_t gbnf_len;
  int32_t users[PA_BENCH_MAX_USERS]; /* sequences decoding together, one run each */
  int n_users;
  int32_t n_gen;     /* steps */
  int32_t n_threads; /* 0: every online core */
  uint64_t seed;
  float temp;        /* the samplers' (top-k/top-p/min-p off: every token a candidate) */
  bool shared;       /* one grammar for every user (else each compiles its own) */
  bool progress;
  pasada_kv_type kv_type;
} pa_bench_grammar_params;

typedef struct {
  int32_t users, steps, restarts;
  double decode_ms;        /* the batched forward pass, mean per step */
  double mask_ms;          /* every user's full mask, one after another: mean per step */
  double mask_p50_ms, mask_max_ms; /* per step, over the steps */
  double mask_user_max_ms; /* the slowest single mask */
  double sample_plain_ms, sample_grammar_ms; /* the sampling phase without and with the grammar */
} pa_bench_grammar_row;

typedef struct {
  int32_t n_vocab;
  uint32_t n_states;
  double compile_ms;
  pa_bench_grammar_row rows[PA_BENCH_MAX_USERS];
  int n_rows;
} pa_bench_grammar_result;

int pa_bench_grammar_run(const pa_bench_grammar_params *p, pa_bench_grammar_result *r);
/* The table (or one JSON object). */
void pa_bench_grammar_print(FILE *f, const pa_bench_grammar_params *p, const pa_bench_grammar_result *r,
                            bool json);

/* /proc/self/status fields in bytes (0 when unreadable). */
void pa_bench_read_rss(uint64_t *rss, uint64_t *hwm);

/* ---- speculative decoding (bench_spec.c) ---- */
#define PA_BENCH_SPEC_COSTS 6
typedef struct {
  const char *model_path, *draft_path; /* draft_path: mode PA_SPEC_DRAFT */
  const char *text_path;               /* the prompt's text (NULL: a built-in code edit) */
  int mode;                            /* pa_spec_mode: lookup, draft or mtp */
  int32_t draft_max, lookup_ngram, n_gen, n_threads, repeats;
  pasada_kv_type kv_type;
  const char *backend;
  bool progress;
} pa_bench_spec_params;
typedef struct {
  int32_t n_prompt;
  pa_bench_rate plain, spec; /* generation tok/s over the interleaved repeats */
  int64_t drafted, accepted, steps;
  bool identical; /* every speculative run's tokens equal the first plain run's */
  int n_costs;    /* one forward pass of cost_tokens[i] tokens, all logits: cost_ms[i] */
  int32_t cost_tokens[PA_BENCH_SPEC_COSTS];
  double cost_ms[PA_BENCH_SPEC_COSTS];
} pa_bench_spec_result;
/* Greedy generation of n_gen tokens after the prompt, plain and speculative
 * in turn, repeats times; and the cost of one pass of k tokens. */
int pa_bench_spec_run(const pa_bench_spec_params *p, pa_bench_spec_result *r);
/* The table (or one JSON object {"speculative": {...}}). */
void pa_bench_spec_print(FILE *f, const pa_bench_spec_params *p, const pa_bench_spec_result *r,
                         bool json);

#endif
