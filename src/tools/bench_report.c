/* bench_report.c: the two faces of a `pasada bench` result: a table for
 * people and one JSON object (cJSON, so it is always valid) for scripts such
 * as bench/compare-llamacpp. Field meanings are in bench.h. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "tools/bench.h"
#include "tools/profile_gpu.h"

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

static void weights_desc(char *buf, size_t cap, const pa_bench_result *r) {
  snprintf(buf, cap, "%s%s layers, %s output", r->main_type, r->mixed ? "-mostly" : "", r->output_type);
}

/* "vulkan:0, llvmpipe (LLVM 15.0.6, 256 bits) (cpu, Vulkan 1.3.230)" */
static void device_desc(char *buf, size_t cap, const pa_bench_result *r) {
  snprintf(buf, cap, "vulkan:%d, %s (%s, Vulkan %s)", r->device.index, r->device.name, r->device.type,
           r->device.api);
}

static void print_ceilings(FILE *f, const pa_bench_result *r) {
  if (!r->have_ceilings) {
    fprintf(f, "ceilings  not measured (--no-ceilings)\n");
  } else if (r->gpu) {
    fprintf(f,
            "ceilings  the device's: read %.1f GB/s (%.0f MiB buffer) | fp32 FMA %.1f GFLOP/s (timed by %s)\n"
            "          the higher of two probes, before the runs (read %.1f, FMA %.1f) and after (read %.1f,\n"
            "          FMA %.1f)\n",
            r->ceil.read_gbs, mib(r->ceil.read_bytes), r->ceil.fma_gflops,
            r->gpu_timestamps ? "its timestamps" : "the host clock", r->ceil_before.read_gbs,
            r->ceil_before.fma_gflops, r->ceil_after.read_gbs, r->ceil_after.fma_gflops);
  } else {
    fprintf(f,
            "ceilings  read %.1f GB/s | fp32 FMA %.1f GFLOP/s (%s) | int8 dot %.1f GOP/s (%s)\n"
            "          the higher of two probes, before the runs (read %.1f, FMA %.1f, int8 %.1f) and after\n"
            "          (read %.1f, FMA %.1f, int8 %.1f)\n",
            r->ceil.read_gbs, r->ceil.fma_gflops, r->ceil.fma_isa, r->ceil.int8_gops, r->ceil.int8_isa,
            r->ceil_before.read_gbs, r->ceil_before.fma_gflops, r->ceil_before.int8_gops, r->ceil_after.read_gbs,
            r->ceil_after.fma_gflops, r->ceil_after.int8_gops);
  }
}

void pa_bench_print_table(FILE *f, const pa_bench_params *p, const pa_bench_result *r) {
  char wd[96];
  weights_desc(wd, sizeof wd, r);
  fprintf(f, "model     %s (%s; %s; %.0f MiB of tensors)\n", r->model_name, r->arch, wd,
          mib(r->weight_bytes_file));
  if (r->gpu) {
    char dev[400];
    device_desc(dev, sizeof dev, r);
    fprintf(f, "setup     device %s, batch %d, context %d, %d repeat%s\n", dev, r->n_batch, r->n_ctx,
            p->repeats, p->repeats > 1 ? "s" : "");
  } else {
    fprintf(f, "setup     %d thread%s, batch %d, context %d, %d repeat%s, kernels %s\n", r->n_threads,
            r->n_threads > 1 ? "s" : "", r->n_batch, r->n_ctx, p->repeats, p->repeats > 1 ? "s" : "",
            r->cpu_path);
  }
  print_ceilings(f, r);
  fprintf(f, "\n%-8s %10s %10s %10s   %-16s %s\n", "test", "min tok/s", "median", "max", "achieved",
          "of the ceiling");
  if (p->n_prompt) {
    char test[32], ach[32], pct[96] = "-";
    snprintf(test, sizeof test, "pp%d", p->n_prompt);
    snprintf(ach, sizeof ach, "%.1f GFLOP/s", r->pp_gflops);
    if (r->have_ceilings) {
      if (r->int8_dot && !r->gpu)
        snprintf(pct, sizeof pct, "%.1f%% of int8 dot, %.1f%% of fp32 FMA", r->pp_pct_int8, r->pp_pct_fma);
      else
        snprintf(pct, sizeof pct, "%.1f%% of fp32 FMA", r->pp_pct_fma);
    }
    fprintf(f, "%-8s %10.2f %10.2f %10.2f   %-16s %s\n", test, r->pp.min, r->pp.median, r->pp.max, ach, pct);
  }
  if (p->n_gen) {
    char test[32], ach[32], pct[64] = "-";
    snprintf(test, sizeof test, "tg%d", p->n_gen);
    snprintf(ach, sizeof ach, "%.2f GB/s", r->tg_gbs);
    if (r->have_ceilings) snprintf(pct, sizeof pct, "%.1f%% of read bandwidth", r->tg_pct_bw);
    fprintf(f, "%-8s %10.2f %10.2f %10.2f   %-16s %s\n", test, r->tg.min, r->tg.median, r->tg.max, ach, pct);
  }
  fprintf(f, "\n");
  const char *peak = r->int8_dot && !r->gpu && r->ceil.int8_gops > 0 ? "int8 dot" : "fp32 FMA";
  for (int i = 0; i < 2; i++) {
    const char *bound = i ? r->tg_bound : r->pp_bound;
    if (!bound) continue;
    const double at = i ? r->tg_ceiling_tok_s : r->pp_ceiling_tok_s, pct = i ? r->tg_pct_ceiling : r->pp_pct_ceiling;
    const double mem = i ? r->tg_mem_tok_s : r->pp_mem_tok_s, cmp = i ? r->tg_cmp_tok_s : r->pp_cmp_tok_s;
    const bool m = !strcmp(bound, "memory");
    fprintf(f, "%-9s %s: %s-bound, %s allows %.1f tok/s (%s %.1f); median at %.0f%%\n",
            i == 0 || !r->pp_bound ? "bound" : "", i ? "tg" : "pp", bound, m ? "read" : peak, at,
            m ? peak : "read", m ? cmp : mem, pct);
  }
  if (p->n_prompt)
    fprintf(f, "pp work   %.3g FLOP per run (layer matrices x %d tokens, output x 1, attention)\n",
            r->pp_flops_per_run, p->n_prompt);
  if (p->n_gen)
    fprintf(f, "tg reads  %.1f MiB per token: %.1f MiB weights + %.2f MiB KV at average context %.0f\n",
            mib((uint64_t)(r->tg_weight_bytes + r->tg_kv_bytes)), mib((uint64_t)r->tg_weight_bytes),
            mib((uint64_t)r->tg_kv_bytes), r->tg_avg_ctx);
  fprintf(f, "memory    RSS %.0f MiB (peak %.0f MiB); weights %.0f MiB + KV pool %.1f MiB (%s); RSS = %.2f x (weights + KV)\n",
          mib(r->rss_bytes), mib(r->hwm_bytes), mib(r->weight_bytes_file), mib(r->kv_bytes),
          r->kv_type ? r->kv_type : "?", r->rss_over_budget);
  if (p->price_per_hour >= 0) {
    fprintf(f, "cost      at $%.4g/hour:", p->price_per_hour);
    if (r->pp_usd_per_mtok >= 0) fprintf(f, " pp $%.4g", r->pp_usd_per_mtok);
    if (r->tg_usd_per_mtok >= 0) fprintf(f, "%s tg $%.4g", r->pp_usd_per_mtok >= 0 ? "," : "", r->tg_usd_per_mtok);
    fprintf(f, " per million tokens\n");
  }
}

static cJSON *rate_json(const pa_bench_rate *rate) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  cJSON_AddNumberToObject(o, "min", rate->min);
  cJSON_AddNumberToObject(o, "median", rate->median);
  cJSON_AddNumberToObject(o, "max", rate->max);
  return o;
}

/* a number, or null when absent (negative) */
static void add_opt(cJSON *o, const char *key, bool present, double v) {
  if (present)
    cJSON_AddNumberToObject(o, key, v);
  else
    cJSON_AddNullToObject(o, key);
}

/* bound ("memory" / "compute"), the rate the ceilings allow, the median's
 * share of it, each ceiling's rate alone; nulls without ceilings */
static void add_bound(cJSON *o, const char *bound, double tok_s, double pct, double mem, double cmp) {
  bound ? cJSON_AddStringToObject(o, "bound", bound) : cJSON_AddNullToObject(o, "bound");
  add_opt(o, "ceiling_tok_s", bound != NULL, tok_s);
  add_opt(o, "pct_ceiling", bound != NULL, pct);
  add_opt(o, "read_ceiling_tok_s", bound != NULL, mem);
  add_opt(o, "compute_ceiling_tok_s", bound != NULL, cmp);
}

int pa_bench_print_json(FILE *f, const pa_bench_params *p, const pa_bench_result *r) {
  cJSON *root = cJSON_CreateObject();
  if (!root) return -1;
  cJSON_AddStringToObject(root, "model", r->model_name);
  cJSON_AddStringToObject(root, "path", p->model_path);
  cJSON_AddStringToObject(root, "arch", r->arch);
  cJSON *w = cJSON_AddObjectToObject(root, "weights");
  if (w) {
    cJSON_AddStringToObject(w, "main_type", r->main_type);
    cJSON_AddBoolToObject(w, "mixed", r->mixed);
    cJSON_AddStringToObject(w, "output_type", r->output_type);
    cJSON_AddBoolToObject(w, "int8_dot", r->int8_dot);
    cJSON_AddNumberToObject(w, "file_tensor_bytes", (double)r->weight_bytes_file);
    cJSON_AddNumberToObject(w, "params_layers", (double)r->n_params_layers);
    cJSON_AddNumberToObject(w, "params_output", (double)r->n_params_output);
  }
  cJSON_AddNumberToObject(root, "threads", r->n_threads);
  cJSON_AddNumberToObject(root, "n_batch", r->n_batch);
  cJSON_AddNumberToObject(root, "n_ctx", r->n_ctx);
  cJSON_AddNumberToObject(root, "repeats", p->repeats);
  cJSON_AddNumberToObject(root, "seed", (double)p->seed);
  cJSON_AddStringToObject(root, "backend", r->backend);
  if (r->gpu) {
    char kernels[32];
    snprintf(kernels, sizeof kernels, "vulkan:%d", r->device.index);
    cJSON_AddStringToObject(root, "kernels", kernels);
    cJSON_AddItemToObject(root, "device", pa_device_info_json(&r->device));
  } else {
    cJSON_AddStringToObject(root, "kernels", r->cpu_path ? r->cpu_path : "");
    cJSON_AddNullToObject(root, "device");
  }
  if (r->have_ceilings) {
    /* the CPU's probes, or the device's: the same keys, null where a GPU
     * has no such figure */
    const bool g = r->gpu;
    cJSON *c = cJSON_AddObjectToObject(root, "ceilings");
    if (c) {
      cJSON_AddStringToObject(c, "source", g ? "device" : "cpu");
      g ? cJSON_AddNullToObject(c, "threads") : cJSON_AddNumberToObject(c, "threads", r->ceil.n_threads);
      cJSON_AddNumberToObject(c, "read_gbs", r->ceil.read_gbs);
      cJSON_AddNumberToObject(c, "read_buffer_bytes", (double)r->ceil.read_bytes);
      g ? cJSON_AddNullToObject(c, "read_buffer_huge_bytes")
        : cJSON_AddNumberToObject(c, "read_buffer_huge_bytes", (double)r->ceil.read_huge_bytes);
      cJSON_AddNumberToObject(c, "fma_gflops", r->ceil.fma_gflops);
      g ? cJSON_AddNullToObject(c, "fma_isa") : cJSON_AddStringToObject(c, "fma_isa", r->ceil.fma_isa);
      g ? cJSON_AddNullToObject(c, "int8_gops") : cJSON_AddNumberToObject(c, "int8_gops", r->ceil.int8_gops);
      g ? cJSON_AddNullToObject(c, "int8_isa") : cJSON_AddStringToObject(c, "int8_isa", r->ceil.int8_isa);
      if (g) cJSON_AddBoolToObject(c, "timestamps", r->gpu_timestamps);
      /* the two probes the ceilings are the higher of */
      const pa_bench_ceilings *pr[2] = {&r->ceil_before, &r->ceil_after};
      const char *names[2] = {"before", "after"};
      for (int i = 0; i < 2; i++) {
        cJSON *o = cJSON_AddObjectToObject(c, names[i]);
        if (!o) continue;
        cJSON_AddNumberToObject(o, "read_gbs", pr[i]->read_gbs);
        cJSON_AddNumberToObject(o, "fma_gflops", pr[i]->fma_gflops);
        g ? cJSON_AddNullToObject(o, "int8_gops") : cJSON_AddNumberToObject(o, "int8_gops", pr[i]->int8_gops);
      }
    }
  } else {
    cJSON_AddNullToObject(root, "ceilings");
  }
  if (p->n_prompt) {
    cJSON *pp = cJSON_AddObjectToObject(root, "pp");
    if (pp) {
      cJSON_AddNumberToObject(pp, "tokens", p->n_prompt);
      cJSON_AddItemToObject(pp, "tok_s", rate_json(&r->pp));
      cJSON_AddNumberToObject(pp, "flops_per_run", r->pp_flops_per_run);
      cJSON_AddNumberToObject(pp, "gflops", r->pp_gflops);
      add_opt(pp, "pct_fma_peak", r->have_ceilings, r->pp_pct_fma);
      add_opt(pp, "pct_int8_peak", r->have_ceilings && r->int8_dot && !r->gpu, r->pp_pct_int8);
      add_opt(pp, "usd_per_mtok", r->pp_usd_per_mtok >= 0, r->pp_usd_per_mtok);
      add_bound(pp, r->pp_bound, r->pp_ceiling_tok_s, r->pp_pct_ceiling, r->pp_mem_tok_s, r->pp_cmp_tok_s);
    }
  } else {
    cJSON_AddNullToObject(root, "pp");
  }
  if (p->n_gen) {
    cJSON *tg = cJSON_AddObjectToObject(root, "tg");
    if (tg) {
      cJSON_AddNumberToObject(tg, "tokens", p->n_gen);
      cJSON_AddItemToObject(tg, "tok_s", rate_json(&r->tg));
      cJSON_AddNumberToObject(tg, "weight_bytes_per_token", r->tg_weight_bytes);
      cJSON_AddNumberToObject(tg, "kv_bytes_per_token", r->tg_kv_bytes);
      cJSON_AddNumberToObject(tg, "avg_context", r->tg_avg_ctx);
      cJSON_AddNumberToObject(tg, "gbs", r->tg_gbs);
      add_opt(tg, "pct_read_bw", r->have_ceilings, r->tg_pct_bw);
      add_opt(tg, "usd_per_mtok", r->tg_usd_per_mtok >= 0, r->tg_usd_per_mtok);
      add_bound(tg, r->tg_bound, r->tg_ceiling_tok_s, r->tg_pct_ceiling, r->tg_mem_tok_s, r->tg_cmp_tok_s);
    }
  } else {
    cJSON_AddNullToObject(root, "tg");
  }
  cJSON *m = cJSON_AddObjectToObject(root, "memory");
  if (m) {
    cJSON_AddNumberToObject(m, "rss_bytes", (double)r->rss_bytes);
    cJSON_AddNumberToObject(m, "hwm_bytes", (double)r->hwm_bytes);
    cJSON_AddNumberToObject(m, "kv_bytes", (double)r->kv_bytes);
    cJSON_AddStringToObject(m, "kv_type", r->kv_type ? r->kv_type : "?");
    cJSON_AddNumberToObject(m, "weights_bytes", (double)r->weight_bytes_file);
    cJSON_AddNumberToObject(m, "rss_over_weights_plus_kv", r->rss_over_budget);
  }
  add_opt(root, "price_per_hour", p->price_per_hour >= 0, p->price_per_hour);
  char *text = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  if (!text) return -1;
  fprintf(f, "%s\n", text);
  fflush(f);
  cJSON_free(text);
  return 0;
}
