/* bench.c: the runs of `pasada bench`. Measures the machine's ceilings (in a
 * child process, so their buffer never counts in the benchmark's peak RSS),
 * or the Vulkan device's when the model runs on one, loads the model, then
 * repeats: a seeded random prompt decoded in batches (pp), then greedy
 * generation one token per pasada_decode (tg), each timed on its own.
 * Derives achieved bandwidth and arithmetic rates from the model's per-token
 * costs (model_stats.c). Uses the public API, and reads one internal: the
 * backend the model was loaded onto (model.h), whose device it probes. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/vulkan/probe.h"
#include "base/base.h"
#include "model/model.h"
#include "pasada.h"
#include "tools/bench.h"

void pa_bench_default_params(pa_bench_params *p) {
  memset(p, 0, sizeof *p);
  p->n_prompt = 512;
  p->n_gen = 128;
  p->repeats = 3;
  p->n_batch = 512;
  p->seed = 1234;
  p->price_per_hour = -1;
  p->progress = true;
}

#define PROGRESS(p, ...)                     \
  do {                                       \
    if ((p)->progress) {                     \
      fprintf(stderr, "bench: " __VA_ARGS__); \
      fflush(stderr);                        \
    }                                        \
  } while (0)

void pa_bench_read_rss(uint64_t *rss, uint64_t *hwm) {
  *rss = *hwm = 0;
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return;
  char line[256];
  unsigned long long kb;
  while (fgets(line, sizeof line, f)) {
    if (sscanf(line, "VmRSS: %llu kB", &kb) == 1) *rss = (uint64_t)kb * 1024;
    if (sscanf(line, "VmHWM: %llu kB", &kb) == 1) *hwm = (uint64_t)kb * 1024;
  }
  fclose(f);
}

/* ---- the model runs ---- */

static uint64_t splitmix64(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static int32_t argmax(const float *x, int32_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; i++)
    if (x[i] > x[best]) best = i;
  return best;
}

typedef struct {
  pasada_context *ctx;
  int32_t n_vocab, n_batch;
  int32_t *tok, *pos, *seq; /* n_batch each */
} runner;

/* Decodes tokens[0..n) at positions start.. of sequence 0 in batches. */
static int decode_prompt(runner *rn, const int32_t *tokens, int32_t n, int32_t start) {
  for (int32_t i = 0; i < n; i += rn->n_batch) {
    int32_t m = n - i < rn->n_batch ? n - i : rn->n_batch;
    for (int32_t j = 0; j < m; j++) {
      rn->tok[j] = tokens[i + j];
      rn->pos[j] = start + i + j;
      rn->seq[j] = 0;
    }
    pasada_batch b = {.n_tokens = m, .token = rn->tok, .pos = rn->pos, .seq_id = rn->seq};
    int rc = pasada_decode(rn->ctx, &b);
    if (rc) return rc;
  }
  return PASADA_OK;
}

/* Greedy generation of n tokens at positions start.., the first one picked
 * from the prompt's logits, or `first` when there was no prompt. */
static int generate(runner *rn, int32_t n, int32_t start, int32_t first) {
  int32_t token = first;
  for (int32_t i = 0; i < n; i++) {
    const float *logits = i > 0 || start > 0 ? pasada_get_logits(rn->ctx, -1) : NULL;
    if (logits) token = argmax(logits, rn->n_vocab);
    int32_t pos = start + i, seq = 0;
    pasada_batch b = {.n_tokens = 1, .token = &token, .pos = &pos, .seq_id = &seq};
    int rc = pasada_decode(rn->ctx, &b);
    if (rc) return rc;
  }
  return PASADA_OK;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static pa_bench_rate summarize(double *rates, int n) {
  pa_bench_rate r = {0, 0, 0};
  if (n <= 0) return r;
  qsort(rates, (size_t)n, sizeof *rates, cmp_double);
  r.min = rates[0];
  r.max = rates[n - 1];
  r.median = n % 2 ? rates[n / 2] : 0.5 * (rates[n / 2 - 1] + rates[n / 2]);
  return r;
}

static const char *base_name(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

static int check_params(const pa_bench_params *p) {
  if (!p->model_path) return pa_error(PASADA_ERR_ARG, "no model given (-m)");
  if (p->n_prompt < 0 || p->n_gen < 0 || (p->n_prompt == 0 && p->n_gen == 0))
    return pa_error(PASADA_ERR_ARG, "nothing to measure: -p and -n are both 0");
  if (p->repeats < 1) return pa_error(PASADA_ERR_ARG, "repeats must be at least 1");
  if (p->n_batch < 1) return pa_error(PASADA_ERR_ARG, "batch size must be at least 1");
  return PASADA_OK;
}

/* Per-token costs and the rates derived from them. */
static void derive(const pasada_model *model, const pasada_model_stats *st, const pa_bench_params *p,
                   double kv_bytes_per_row, pa_bench_result *r) {
  /* pp: every layer matrix for every prompt token, the output matrix for the
   * last one only (the others' logits are not computed), attention */
  double attn = 0;
  for (int64_t pos = 0; pos < p->n_prompt; pos++) {
    double f;
    pasada_model_attention_cost(model, pos, &f, NULL);
    attn += f;
  }
  r->pp_flops_per_run = 2.0 * (double)st->n_params_layers * p->n_prompt +
                        (p->n_prompt ? 2.0 * (double)st->n_params_output : 0) + attn;
  if (p->n_prompt && r->pp.median > 0) {
    r->pp_gflops = r->pp_flops_per_run * r->pp.median / p->n_prompt / 1e9;
    if (r->have_ceilings && r->ceil.fma_gflops > 0) r->pp_pct_fma = 100 * r->pp_gflops / r->ceil.fma_gflops;
    if (r->have_ceilings && st->int8_dot && r->ceil.int8_gops > 0) /* (none on a GPU) */
      r->pp_pct_int8 = 100 * r->pp_gflops / r->ceil.int8_gops;
  }
  /* tg: every layer matrix, the output matrix and one embedding row per
   * token, plus the KV rows attention reads at that token's position */
  r->tg_weight_bytes = (double)(st->bytes_layers + st->bytes_output + st->bytes_embd_row);
  double rows = 0;
  for (int64_t i = 0; i < p->n_gen; i++) {
    int64_t kv_rows;
    pasada_model_attention_cost(model, p->n_prompt + i, NULL, &kv_rows);
    rows += (double)kv_rows;
  }
  if (p->n_gen) {
    r->tg_kv_bytes = rows / p->n_gen * kv_bytes_per_row;
    r->tg_avg_ctx = p->n_prompt + (p->n_gen + 1) / 2.0;
  }
  if (p->n_gen && r->tg.median > 0) {
    r->tg_gbs = (r->tg_weight_bytes + r->tg_kv_bytes) * r->tg.median / 1e9;
    if (r->have_ceilings && r->ceil.read_gbs > 0) r->tg_pct_bw = 100 * r->tg_gbs / r->ceil.read_gbs;
  }
  if (r->have_ceilings && r->ceil.read_gbs > 0) {
    /* the compute peak the products run against: int8 dots on a CPU where
     * the layer weights take them, else fp32 FMA */
    const double peak = (!r->gpu && st->int8_dot && r->ceil.int8_gops > 0 ? r->ceil.int8_gops : r->ceil.fma_gflops) * 1e9;
    if (p->n_prompt && peak > 0) {
      const double batches = (double)((p->n_prompt + p->n_batch - 1) / p->n_batch);
      const double t_mem = batches * (double)st->bytes_file_tensors / (r->ceil.read_gbs * 1e9);
      const double t_cmp = r->pp_flops_per_run / peak;
      r->pp_mem_tok_s = p->n_prompt / t_mem, r->pp_cmp_tok_s = p->n_prompt / t_cmp;
      r->pp_bound = t_mem > t_cmp ? "memory" : "compute";
      r->pp_ceiling_tok_s = p->n_prompt / (t_mem > t_cmp ? t_mem : t_cmp);
      r->pp_pct_ceiling = 100 * r->pp.median / r->pp_ceiling_tok_s;
    }
    if (p->n_gen && peak > 0) {
      double attn = 0;
      for (int64_t i = 0; i < p->n_gen; i++) {
        double f;
        pasada_model_attention_cost(model, p->n_prompt + i, &f, NULL);
        attn += f;
      }
      const double flops = 2.0 * (double)(st->n_params_layers + st->n_params_output) + attn / p->n_gen;
      const double t_mem = (r->tg_weight_bytes + r->tg_kv_bytes) / (r->ceil.read_gbs * 1e9);
      const double t_cmp = flops / peak;
      r->tg_mem_tok_s = 1 / t_mem, r->tg_cmp_tok_s = 1 / t_cmp;
      r->tg_bound = t_mem > t_cmp ? "memory" : "compute";
      r->tg_ceiling_tok_s = 1 / (t_mem > t_cmp ? t_mem : t_cmp);
      r->tg_pct_ceiling = 100 * r->tg.median / r->tg_ceiling_tok_s;
    }
  }
  r->pp_usd_per_mtok = r->tg_usd_per_mtok = -1;
  if (p->price_per_hour >= 0) {
    if (r->pp.median > 0) r->pp_usd_per_mtok = p->price_per_hour / 3600.0 / r->pp.median * 1e6;
    if (r->tg.median > 0) r->tg_usd_per_mtok = p->price_per_hour / 3600.0 / r->tg.median * 1e6;
  }
}

/* The ceilings of the Vulkan device the model runs on, in the CPU probes'
 * struct (read bandwidth and FMA peak; no threads, ISA or int8 peak). */
static int device_ceilings(const pa_backend *be, pa_bench_result *r, pa_bench_ceilings *out) {
  memset(out, 0, sizeof *out);
  pa_vulkan_ceilings vc;
  int rc = pa_vulkan_measure_ceilings(be, &vc);
  if (rc) return rc;
  out->read_gbs = vc.read_gbs;
  out->read_bytes = vc.read_bytes;
  out->fma_gflops = vc.fma_gflops;
  r->gpu_timestamps = vc.timestamps;
  return PASADA_OK;
}

int pa_bench_run(const pa_bench_params *p, pa_bench_result *r) {
  memset(r, 0, sizeof *r);
  int rc = check_params(p);
  if (rc) return rc;
  int32_t n_threads = p->n_threads;
  if (n_threads <= 0) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    n_threads = n > 0 ? (int32_t)n : 1;
  }
  if (n_threads > 256) return pa_error(PASADA_ERR_ARG, "thread count %d is above 256", n_threads);
  r->n_threads = n_threads;
  r->cpu_path = pa_cpu_describe();
  snprintf(r->model_name, sizeof r->model_name, "%s", base_name(p->model_path));

  /* The probes' child process first (forked while this process is small:
   * see pa_bench_prober), then the model (mapping and validating it is
   * quick), so a bad file fails before seconds of probes; the probes run
   * before any weight is touched and before the context's threads exist. */
  pasada_model *model = NULL;
  pasada_context *ctx = NULL;
  runner rn = {0};
  int32_t *prompt = NULL;
  double *pp_rates = NULL, *tg_rates = NULL;
  pa_bench_prober prober = {0};
  /* a model on a Vulkan device is set against the device's ceilings, not
   * the CPU's: no CPU probes (a model split across a GPU and the CPU,
   * "vulkan:N/L", is set against the CPU's) */
  const bool vulkan_named = p->backend && !strncmp(p->backend, "vulkan", 6) && !strchr(p->backend, '/');
  if (!p->skip_ceilings && !vulkan_named) pa_bench_prober_start(&prober, n_threads);
  pasada_model_params mp = pasada_model_default_params();
  mp.backend = p->backend;
  if ((rc = pasada_model_load(p->model_path, &mp, &model))) {
    pa_bench_prober_close(&prober);
    return rc;
  }
  PROGRESS(p, "loaded %s (%s)\n", p->model_path, pasada_model_arch(model));
  const pa_backend *be = model->be;
  snprintf(r->backend, sizeof r->backend, "%s", be->name);
  r->gpu = pa_backend_is_vulkan(be);
  if (r->gpu && (rc = pa_vulkan_backend_info(be, &r->device))) goto done;

  if (!p->skip_ceilings && r->gpu) {
    PROGRESS(p, "measuring the ceilings of vulkan:%d, %s (%s)...\n", r->device.index, r->device.name,
             r->device.type);
    if ((rc = device_ceilings(be, r, &r->ceil_before))) goto done;
    r->ceil = r->ceil_before;
    r->have_ceilings = true;
    PROGRESS(p, "read %.1f GB/s (%.0f MiB buffer), fp32 FMA %.1f GFLOP/s\n", r->ceil.read_gbs,
             (double)r->ceil.read_bytes / (1 << 20), r->ceil.fma_gflops);
  } else if (!p->skip_ceilings) {
    PROGRESS(p, "measuring ceilings on %d thread%s...\n", n_threads, n_threads > 1 ? "s" : "");
    if ((rc = pa_bench_prober_measure(&prober, n_threads, &r->ceil_before))) goto done;
    r->ceil = r->ceil_before;
    r->have_ceilings = true;
    PROGRESS(p,
             "read %.1f GB/s (%.0f MiB buffer, %.0f MiB of it in 2 MB pages), fp32 FMA %.1f GFLOP/s (%s), "
             "int8 dot %.1f GOP/s (%s)\n",
             r->ceil.read_gbs, (double)r->ceil.read_bytes / (1 << 20),
             (double)r->ceil.read_huge_bytes / (1 << 20), r->ceil.fma_gflops,
             r->ceil.fma_isa, r->ceil.int8_gops, r->ceil.int8_isa);
  }
  pasada_model_stats st;
  pasada_model_get_stats(model, &st);
  snprintf(r->arch, sizeof r->arch, "%s", pasada_model_arch(model));
  memcpy(r->main_type, st.main_type, sizeof r->main_type);
  memcpy(r->output_type, st.output_type, sizeof r->output_type);
  r->mixed = st.mixed;
  r->int8_dot = st.int8_dot;
  r->n_params_layers = st.n_params_layers;
  r->n_params_output = st.n_params_output;
  r->weight_bytes_file = (uint64_t)st.bytes_file_tensors;

  pasada_context_params cp = pasada_context_default_params();
  int64_t need = (int64_t)p->n_prompt + p->n_gen + 1;
  if (need > pasada_model_n_ctx_train(model) && pasada_model_n_ctx_train(model) > 0)
    PROGRESS(p, "note: %lld positions exceed the model's training context %d\n", (long long)need,
             pasada_model_n_ctx_train(model));
  if (need > (1 << 22)) {
    rc = pa_error(PASADA_ERR_ARG, "-p + -n = %lld positions is too many", (long long)need - 1);
    goto done;
  }
  cp.n_ctx = (int32_t)need;
  cp.n_seq_max = 1;
  cp.kv_type = p->kv_type;
  cp.n_batch = p->n_prompt > 0 && p->n_prompt < p->n_batch ? p->n_prompt : p->n_batch;
  cp.n_threads = n_threads;
  if ((rc = pasada_context_create(model, &cp, &ctx))) goto done;
  r->n_batch = cp.n_batch;
  r->n_ctx = pasada_context_n_ctx(ctx);
  pasada_kv_stats kvs;
  pasada_kv_get_stats(ctx, &kvs);
  r->kv_bytes = (uint64_t)kvs.bytes;
  r->kv_type = pasada_kv_type_name(kvs.type);
  double kv_bytes_per_row = 0; /* one position of one layer, K and V */
  if (kvs.n_blocks > 0 && kvs.block_size > 0 && st.n_layer > 0)
    kv_bytes_per_row = (double)kvs.bytes / ((double)kvs.n_blocks * kvs.block_size * st.n_layer);

  rn.ctx = ctx;
  rn.n_vocab = pasada_model_n_vocab(model);
  rn.n_batch = cp.n_batch;
  rn.tok = malloc((size_t)rn.n_batch * sizeof(int32_t));
  rn.pos = malloc((size_t)rn.n_batch * sizeof(int32_t));
  rn.seq = malloc((size_t)rn.n_batch * sizeof(int32_t));
  prompt = malloc(((size_t)p->n_prompt + 1) * sizeof(int32_t));
  pp_rates = calloc((size_t)p->repeats, sizeof(double));
  tg_rates = calloc((size_t)p->repeats, sizeof(double));
  if (!rn.tok || !rn.pos || !rn.seq || !prompt || !pp_rates || !tg_rates) {
    rc = pa_error(PASADA_ERR_NOMEM, "out of memory");
    goto done;
  }

  /* Warm-up: touches every weight page (the file is mapped lazily) and lets
   * the threads and caches settle; not timed. */
  {
    uint64_t s = p->seed ^ 0xabcdefull;
    int32_t n_warm = p->n_prompt < 16 ? p->n_prompt : 16;
    if (n_warm > rn.n_batch) n_warm = rn.n_batch;
    for (int32_t i = 0; i < n_warm; i++) prompt[i] = (int32_t)(splitmix64(&s) % (uint64_t)rn.n_vocab);
    PROGRESS(p, "warm-up\n");
    if (n_warm && (rc = decode_prompt(&rn, prompt, n_warm, 0))) goto done;
    int32_t n_gen_warm = p->n_gen < 2 ? p->n_gen : 2;
    if ((rc = generate(&rn, n_gen_warm, n_warm, 0))) goto done;
    pasada_seq_truncate(ctx, 0, 0);
  }

  for (int rep = 0; rep < p->repeats; rep++) {
    uint64_t s = p->seed + (uint64_t)rep * 0x1000193ull;
    for (int32_t i = 0; i < p->n_prompt; i++) prompt[i] = (int32_t)(splitmix64(&s) % (uint64_t)rn.n_vocab);
    int32_t first = (int32_t)(splitmix64(&s) % (uint64_t)rn.n_vocab);
    pasada_seq_truncate(ctx, 0, 0);
    double t0 = pa_time_s();
    if (p->n_prompt && (rc = decode_prompt(&rn, prompt, p->n_prompt, 0))) goto done;
    double t1 = pa_time_s();
    if (p->n_gen && (rc = generate(&rn, p->n_gen, p->n_prompt, first))) goto done;
    double t2 = pa_time_s();
    pp_rates[rep] = p->n_prompt && t1 > t0 ? p->n_prompt / (t1 - t0) : 0;
    tg_rates[rep] = p->n_gen && t2 > t1 ? p->n_gen / (t2 - t1) : 0;
    if (rep == p->repeats - 1) pa_bench_read_rss(&r->rss_bytes, &r->hwm_bytes);
    PROGRESS(p, "run %d/%d: pp%d %.2f tok/s, tg%d %.2f tok/s\n", rep + 1, p->repeats, p->n_prompt,
             pp_rates[rep], p->n_gen, tg_rates[rep]);
  }
  pasada_seq_truncate(ctx, 0, 0);
  if (r->have_ceilings) { /* again, after the runs: each ceiling the higher of the two */
    PROGRESS(p, "measuring ceilings again...\n");
    rc = r->gpu ? device_ceilings(be, r, &r->ceil_after) : pa_bench_prober_measure(&prober, n_threads, &r->ceil_after);
    if (rc) goto done;
    pa_bench_prober_close(&prober);
    if (r->ceil_after.read_gbs > r->ceil.read_gbs) r->ceil.read_gbs = r->ceil_after.read_gbs;
    if (r->ceil_after.fma_gflops > r->ceil.fma_gflops) r->ceil.fma_gflops = r->ceil_after.fma_gflops;
    if (r->ceil_after.int8_gops > r->ceil.int8_gops) r->ceil.int8_gops = r->ceil_after.int8_gops;
    if (r->gpu)
      PROGRESS(p, "read %.1f GB/s, fp32 FMA %.1f GFLOP/s\n", r->ceil_after.read_gbs, r->ceil_after.fma_gflops);
    else
      PROGRESS(p, "read %.1f GB/s, fp32 FMA %.1f GFLOP/s, int8 dot %.1f GOP/s\n", r->ceil_after.read_gbs,
               r->ceil_after.fma_gflops, r->ceil_after.int8_gops);
  }
  if (p->n_prompt) r->pp = summarize(pp_rates, p->repeats);
  if (p->n_gen) r->tg = summarize(tg_rates, p->repeats);
  derive(model, &st, p, kv_bytes_per_row, r);
  double budget = (double)r->weight_bytes_file + (double)r->kv_bytes;
  r->rss_over_budget = budget > 0 ? (double)r->rss_bytes / budget : 0;

done:
  pa_bench_prober_close(&prober);
  free(rn.tok);
  free(rn.pos);
  free(rn.seq);
  free(prompt);
  free(pp_rates);
  free(tg_rates);
  pasada_context_free(ctx);
  pasada_model_free(model);
  return rc;
}
