/* profile_report.c: the reports of `pasada profile` (profile.h) on a
 * finished run (profile.c): the table, JSON (cJSON), Chrome trace-event
 * JSON and an SVG chart. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h" /* PA_ROWS_PAR, named in the table's notes */
#include "tools/profile_internal.h"

/* ==== the table ==== */

static double ms(double s) { return s * 1e3; }

static void rates(char *gbs, char *gfl, char *pct, size_t cap, const pa_profile_result *r, const prof_row *w) {
  snprintf(gbs, cap, "-");
  snprintf(gfl, cap, "-");
  snprintf(pct, cap, "-");
  if (w->op < 0 || w->time_s <= 0) return;
  snprintf(gbs, cap, "%.2f", w->bytes / w->time_s / 1e9);
  if (w->flops > 0) snprintf(gfl, cap, "%.2f", w->flops / w->time_s / 1e9);
  if (r->have_ceilings) snprintf(pct, cap, "%.1f%%", 100 * w->roof / w->time_s);
}

static void print_op_table(FILE *f, const pa_profile_result *r, const prof_phase *ph, const prof_row *rows,
                           int n, int limit) {
  fprintf(f, "%-24s %7s %10s %6s %6s %8s %9s %6s %-9s %9s\n", "op", "calls", "time ms", "%wall", "idle%",
          "GB/s", "GFLOP/s", "%ceil", "bound", "gap ms");
  for (int i = 0; i < n && i < limit; i++) {
    const prof_row *w = &rows[i];
    char gbs[32], gfl[32], pct[32], idle[32] = "-", gap[32] = "-";
    rates(gbs, gfl, pct, sizeof gbs, r, w);
    if (w->op >= 0 && PROF_OPS[w->op].parallel && w->time_s > 0 && r->n_threads > 1)
      snprintf(idle, sizeof idle, "%.1f%%", 100 * w->idle_s / (w->time_s * r->n_threads));
    if (r->have_ceilings || w->op < 0) snprintf(gap, sizeof gap, "%.3f", ms(w->gap));
    fprintf(f, "%-24s %7lld %10.3f %5.1f%% %6s %8s %9s %6s %-9s %9s\n", w->name, (long long)w->calls,
            ms(w->time_s), ph->wall_s > 0 ? 100 * w->time_s / ph->wall_s : 0, idle, gbs, gfl, pct,
            w->verdict ? w->verdict : "-", gap);
  }
}

/* The table of a run on a Vulkan device: per phase, the wall time and the
 * GPU time per shader. */
static void print_table_gpu(FILE *f, const pa_profile_result *r) {
  const pa_profile_params *p = &r->p;
  const pa_profile_gpu *g = r->gpu;
  char dev[400];
  pa_profile_gpu_device(dev, sizeof dev, g);
  fprintf(f, "model     %s (%s, %d layers)\n", r->model_name, r->arch, r->n_layer);
  fprintf(f, "setup     device %s, batch %d, context %d, %d sequence%s, KV %s, sampler seed %llu\n", dev,
          r->n_batch, r->n_ctx, p->n_parallel, p->n_parallel > 1 ? "s" : "", r->kv_type,
          (unsigned long long)p->seed);
  if (!p->off)
    fprintf(f, "timing    GPU timestamps per shader: a timestamp after every command of a pass, each command's\n"
               "          time added to its shader's (on a GPU the ops only record commands; they run when the\n"
               "          pass is submitted). No ceilings: `pasada bench --device` sets the model's rates\n"
               "          against the device's.\n");
  fprintf(f, "\n%-8s %7s %11s %10s %11s %7s %15s %10s\n", "phase", "tokens", "wall ms", "ms/token", "GPU ms",
          "GPU%", "outside GPU ms", "tok/s");
  for (int i = 0; i < 2; i++) {
    const prof_phase *ph = &r->ph[i];
    if (i == 1 && p->n_gen == 0) continue;
    const double tps = ph->wall_s > 0 ? ph->tokens / ph->wall_s : 0;
    const double mspt = ph->tokens > 0 ? ms(ph->wall_s) / ph->tokens : 0;
    if (p->off) {
      fprintf(f, "%-8s %7d %11.3f %10.3f %11s %7s %15s %10.2f\n", PROF_PHASE_NAME[i], ph->tokens, ms(ph->wall_s), mspt,
              "-", "-", "-", tps);
      continue;
    }
    const pa_gpu_phase *gp = &g->ph[i];
    fprintf(f, "%-8s %7d %11.3f %10.3f %11.3f %6.1f%% %15.3f %10.2f\n", PROF_PHASE_NAME[i], ph->tokens, ms(ph->wall_s),
            mspt, ms(gp->gpu_s), ph->wall_s > 0 ? 100 * gp->gpu_s / ph->wall_s : 0, ms(ph->wall_s - gp->gpu_s),
            tps);
  }
  if (p->off) {
    fprintf(f, "\nprofiler off (--off): phase wall times only\n");
    return;
  }
  for (int i = 0; i < 2; i++) {
    const prof_phase *ph = &r->ph[i];
    const pa_gpu_phase *gp = &g->ph[i];
    if (i == 1 && p->n_gen == 0) continue;
    fprintf(f, "\n%s: GPU time per shader (timestamps), longest first\n", PROF_PHASE_NAME[i]);
    pa_profile_gpu_print_phase(f, gp, ph->wall_s);
    if (i == 0)
      fprintf(f, "host: tokenization %.3f ms\n", ms(gp->tokenize_s));
    else
      fprintf(f, "host: sampling %.3f ms (%.3f ms a step)\n", ms(gp->sample_s),
              p->n_gen > 0 ? ms(gp->sample_s) / p->n_gen : 0);
  }
  fprintf(f,
          "\nnotes  GPU ms: a command's time is from the timestamp after the command before it to the one\n"
          "       after it (its barrier included). outside GPU: the phase's wall time in which the GPU ran none\n"
          "       of its commands: recording and submitting them, waiting for results, tokenization, sampling\n"
          "       and the engine's host work. With timing on, every pass is recorded anew (an untimed run\n"
          "       submits a repeated pass's commands again): compare the wall times with --off.\n");
}

void pa_profile_print_table(FILE *f, const pa_profile_result *r) {
  const pa_profile_params *p = &r->p;
  if (r->gpu) {
    print_table_gpu(f, r);
    return;
  }
  fprintf(f, "model     %s (%s, %d layers)\n", r->model_name, r->arch, r->n_layer);
  fprintf(f, "setup     %d thread%s, batch %d, context %d, %d sequence%s, KV %s, kernels %s, sampler seed %llu\n",
          r->n_threads, r->n_threads > 1 ? "s" : "", r->n_batch, r->n_ctx, p->n_parallel, p->n_parallel > 1 ? "s" : "",
          r->kv_type, r->cpu_path, (unsigned long long)p->seed);
  if (r->have_ceilings)
    fprintf(f, "ceilings  read %.1f GB/s | fp32 FMA %.1f GFLOP/s (%s) | int8 dot %.1f GOP/s (%s)\n",
            r->ceil.read_gbs, r->ceil.fma_gflops, r->ceil.fma_isa, r->ceil.int8_gops, r->ceil.int8_isa);
  else if (!p->off)
    fprintf(f, "ceilings  not measured (--no-ceilings): no %%ceil, verdict or gap\n");
  fprintf(f, "\n%-8s %7s %11s %11s %8s %12s %8s %10s\n", "phase", "tokens", "wall ms", "ops ms", "covered",
          "overhead ms", "idle%", "tok/s");
  for (int i = 0; i < 2; i++) {
    const prof_phase *ph = &r->ph[i];
    if (i == 1 && p->n_gen == 0) continue;
    double tps = ph->wall_s > 0 ? ph->tokens / ph->wall_s : 0;
    if (p->off) {
      fprintf(f, "%-8s %7d %11.3f %11s %8s %12s %8s %10.2f\n", PROF_PHASE_NAME[i], ph->tokens, ms(ph->wall_s), "-",
              "-", "-", "-", tps);
      continue;
    }
    double par = 0; /* time of the ops that run on the pool */
    for (int k = 0; k < ph->n_names; k++)
      if (ph->names[k].op >= 0 && PROF_OPS[ph->names[k].op].parallel) par += ph->names[k].time_s;
    char idle[32] = "-";
    if (par > 0 && r->n_threads > 1) snprintf(idle, sizeof idle, "%.1f%%", 100 * ph->idle_s / (par * r->n_threads));
    fprintf(f, "%-8s %7d %11.3f %11.3f %7.1f%% %12.3f %8s %10.2f\n", PROF_PHASE_NAME[i], ph->tokens, ms(ph->wall_s),
            ms(ph->ops_s), 100 * pa_profile_coverage(r, i), ms(ph->wall_s - ph->ops_s), idle, tps);
  }
  if (p->off) {
    fprintf(f, "\nprofiler off (--off): phase wall times only\n");
    return;
  }
  fprintf(f, "profiler  its own cost, measured here: %.0f ns per op recorded; est. %.3f ms of prefill (%.2f%%)",
          r->record_ns, ms(r->ph[0].self_s), r->ph[0].wall_s > 0 ? 100 * r->ph[0].self_s / r->ph[0].wall_s : 0);
  if (p->n_gen)
    fprintf(f, ", %.3f ms of decode (%.2f%%)", ms(r->ph[1].self_s),
            r->ph[1].wall_s > 0 ? 100 * r->ph[1].self_s / r->ph[1].wall_s : 0);
  fprintf(f, "\n");
  for (int i = 0; i < 2; i++) {
    const prof_phase *ph = &r->ph[i];
    if (i == 1 && p->n_gen == 0) continue;
    fprintf(f, "\n%s: ops by name over every layer, %s\n", PROF_PHASE_NAME[i],
            r->have_ceilings ? "largest gap to the ceilings first" : "longest first");
    print_op_table(f, r, ph, ph->names, ph->n_names, ph->n_names);
  }
  fprintf(f, "\nper layer: every op with that layer index\n%-6s %12s %12s\n", "layer", "prefill ms",
          p->n_gen ? "decode ms" : "");
  for (int l = 0; l < r->n_layer; l++) {
    fprintf(f, "%-6d %12.3f", l, ms(r->ph[0].layer_s[l]));
    if (p->n_gen)
      fprintf(f, " %12.3f", ms(r->ph[1].layer_s[l]));
    fprintf(f, "\n");
  }
  for (int i = 0; i < 2; i++) {
    const prof_phase *ph = &r->ph[i];
    if (i == 1 && p->n_gen == 0) continue;
    int top = p->top < ph->n_rows ? p->top : ph->n_rows;
    fprintf(f, "\n%s: the %d single ops (weight or op, layer) with the %s (--top N; --json lists all)\n",
            PROF_PHASE_NAME[i], top, r->have_ceilings ? "largest gaps" : "longest times");
    print_op_table(f, r, ph, ph->rows, ph->n_rows, top);
  }
  fprintf(f,
          "\nnotes  time: the calling thread's, barrier waits included; idle%%: the pool threads' time idle at\n"
          "       the op's barriers. bytes: the least traffic the op needs. %%ceil: time at the nearer ceiling /\n"
          "       time (over 100%%: cached data, faster than the DRAM read ceiling). bound: memory or compute\n"
          "       within %.0fx of that ceiling; further from both: overhead (under %.0f us a call, no FLOPs counted,\n"
          "       or idle >= 50%%), else compute (the op's own instructions). Ops off the thread pool (embedding,\n"
          "       sampling, tokenization; norms, RoPE and residual adds of calls under %d tokens) get one thread's\n"
          "       share of the ceilings.\n",
          1 / FAR_BELOW, TINY_CALL * 1e6, PA_ROWS_PAR);
}

/* ==== JSON ==== */

static void add_num_or_null(cJSON *o, const char *key, bool present, double v) {
  if (present && isfinite(v))
    cJSON_AddNumberToObject(o, key, v);
  else
    cJSON_AddNullToObject(o, key);
}

static cJSON *row_json(const pa_profile_result *r, const prof_row *w) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  cJSON_AddStringToObject(o, "name", w->name);
  cJSON_AddStringToObject(o, "kind", w->kind);
  if (w->layer >= 0)
    cJSON_AddNumberToObject(o, "layer", w->layer);
  else
    cJSON_AddNullToObject(o, "layer");
  cJSON_AddNumberToObject(o, "calls", (double)w->calls);
  cJSON_AddNumberToObject(o, "tokens", (double)w->tokens);
  cJSON_AddNumberToObject(o, "time_s", w->time_s);
  bool op = w->op >= 0;
  add_num_or_null(o, "barrier_idle_s", op, w->idle_s / r->n_threads);
  add_num_or_null(o, "bytes", op, w->bytes);
  add_num_or_null(o, "flops", op, w->flops);
  add_num_or_null(o, "gbs", op && w->time_s > 0, w->bytes / w->time_s / 1e9);
  add_num_or_null(o, "gflops", op && w->time_s > 0, w->flops / w->time_s / 1e9);
  bool c = r->have_ceilings && op;
  add_num_or_null(o, "time_at_bandwidth_s", c, w->t_mem);
  add_num_or_null(o, "time_at_compute_s", c, w->t_comp);
  add_num_or_null(o, "pct_of_ceiling", c && w->time_s > 0, 100 * w->roof / w->time_s);
  add_num_or_null(o, "gap_s", r->have_ceilings || !op, w->gap);
  if (w->verdict)
    cJSON_AddStringToObject(o, "bound", w->verdict);
  else
    cJSON_AddNullToObject(o, "bound");
  return o;
}

int pa_profile_print_json(FILE *f, const pa_profile_result *r) {
  const pa_profile_params *p = &r->p;
  cJSON *root = cJSON_CreateObject();
  if (!root) return -1;
  cJSON_AddStringToObject(root, "model", r->model_name);
  cJSON_AddStringToObject(root, "path", p->model_path);
  cJSON_AddStringToObject(root, "arch", r->arch);
  cJSON_AddNumberToObject(root, "layers", r->n_layer);
  cJSON_AddNumberToObject(root, "threads", r->n_threads);
  cJSON_AddNumberToObject(root, "n_batch", r->n_batch);
  cJSON_AddNumberToObject(root, "n_parallel", p->n_parallel);
  cJSON_AddStringToObject(root, "kv_type", r->kv_type);
  cJSON_AddNumberToObject(root, "n_ctx", r->n_ctx);
  cJSON_AddNumberToObject(root, "seed", (double)p->seed);
  cJSON_AddStringToObject(root, "backend", r->backend);
  if (r->gpu) {
    char kernels[32];
    snprintf(kernels, sizeof kernels, "vulkan:%d", r->gpu->dev.index);
    cJSON_AddStringToObject(root, "kernels", kernels);
    cJSON_AddItemToObject(root, "device", pa_device_info_json(&r->gpu->dev));
  } else {
    cJSON_AddStringToObject(root, "kernels", r->cpu_path ? r->cpu_path : "");
    cJSON_AddNullToObject(root, "device");
  }
  cJSON_AddBoolToObject(root, "profiler", !p->off);
  if (p->off)
    cJSON_AddNullToObject(root, "timing");
  else
    cJSON_AddStringToObject(root, "timing", r->gpu ? "gpu_timestamps_per_shader" : "host_per_op");
  if (!p->off && !r->gpu) {
    cJSON_AddNumberToObject(root, "profiler_record_ns", r->record_ns);
    cJSON_AddNumberToObject(root, "clock_read_ns", r->clock_ns);
  }
  if (r->have_ceilings) {
    cJSON *c = cJSON_AddObjectToObject(root, "ceilings");
    if (c) {
      cJSON_AddNumberToObject(c, "threads", r->ceil.n_threads);
      cJSON_AddNumberToObject(c, "read_gbs", r->ceil.read_gbs);
      cJSON_AddNumberToObject(c, "fma_gflops", r->ceil.fma_gflops);
      cJSON_AddStringToObject(c, "fma_isa", r->ceil.fma_isa);
      cJSON_AddNumberToObject(c, "int8_gops", r->ceil.int8_gops);
      cJSON_AddStringToObject(c, "int8_isa", r->ceil.int8_isa);
    }
  } else {
    cJSON_AddNullToObject(root, "ceilings");
  }
  cJSON *phases = cJSON_AddObjectToObject(root, "phases");
  for (int i = 0; phases && i < 2; i++) {
    const prof_phase *ph = &r->ph[i];
    if (i == 1 && p->n_gen == 0) {
      cJSON_AddNullToObject(phases, PROF_PHASE_NAME[i]);
      continue;
    }
    cJSON *o = cJSON_AddObjectToObject(phases, PROF_PHASE_NAME[i]);
    if (!o) continue;
    cJSON_AddNumberToObject(o, "tokens", ph->tokens);
    cJSON_AddNumberToObject(o, "decode_calls", ph->decode_calls);
    cJSON_AddNumberToObject(o, "wall_s", ph->wall_s);
    cJSON_AddNumberToObject(o, "tok_s", ph->wall_s > 0 ? ph->tokens / ph->wall_s : 0);
    if (p->off) continue;
    if (r->gpu) {
      pa_profile_gpu_phase_json(o, &r->gpu->ph[i], ph->wall_s, ph->tokens);
      continue;
    }
    cJSON_AddNumberToObject(o, "ops_s", ph->ops_s);
    cJSON_AddNumberToObject(o, "overhead_s", ph->wall_s - ph->ops_s);
    cJSON_AddNumberToObject(o, "coverage", pa_profile_coverage(r, i));
    cJSON_AddNumberToObject(o, "barrier_idle_s", ph->idle_s / r->n_threads);
    cJSON_AddNumberToObject(o, "profiler_cost_s", ph->self_s);
    cJSON *names = cJSON_AddArrayToObject(o, "by_name");
    for (int k = 0; names && k < ph->n_names; k++) cJSON_AddItemToArray(names, row_json(r, &ph->names[k]));
    cJSON *ops = cJSON_AddArrayToObject(o, "ops");
    for (int k = 0; ops && k < ph->n_rows; k++) cJSON_AddItemToArray(ops, row_json(r, &ph->rows[k]));
    cJSON *layers = cJSON_AddArrayToObject(o, "layers_s");
    for (int l = 0; layers && l < r->n_layer; l++) cJSON_AddItemToArray(layers, cJSON_CreateNumber(ph->layer_s[l]));
  }
  char *text = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  if (!text) return -1;
  fprintf(f, "%s\n", text);
  cJSON_free(text);
  return fflush(f) == 0 && !ferror(f) ? 0 : -1;
}

/* ==== Chrome trace-event JSON ==== */

/* a JSON string body: the names here are ASCII identifiers, the model's
 * file name is escaped */
static void json_escaped(FILE *f, const char *s) {
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\')
      fprintf(f, "\\%c", ch);
    else if (ch < 0x20)
      fprintf(f, "\\u%04x", ch);
    else
      fputc(ch, f);
  }
}

int pa_profile_write_trace(FILE *f, const pa_profile_result *r) {
  fprintf(f, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"model\":\"");
  json_escaped(f, r->model_name);
  fprintf(f, "\",\"threads\":%d,\"dropped_events\":%zu},\"traceEvents\":[\n", r->n_threads, r->dropped);
  fprintf(f, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":1,\"args\":{\"name\":\"pasada profile ");
  json_escaped(f, r->model_name);
  fprintf(f, "\"}},\n");
  static const char *TID_NAME[4] = {"", "ops", "pasada_decode calls", "phases"};
  for (int t = 1; t <= 3; t++)
    fprintf(f, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"args\":{\"name\":\"%s\"}},\n", t,
            TID_NAME[t]);
  for (size_t i = 0; i < r->n_ev; i++) {
    const prof_event *e = &r->ev[i];
    char name[64];
    const char *cat;
    int tid;
    if (e->op == EV_PHASE) {
      snprintf(name, sizeof name, "%s", PROF_PHASE_NAME[e->phase]);
      cat = "phase";
      tid = 3;
    } else if (e->op == EV_STEP) {
      prof_op_label(name, sizeof name, e->op, e->layer);
      cat = "step";
      tid = 2;
    } else {
      prof_op_label(name, sizeof name, e->op, e->layer);
      cat = PROF_OPS[e->op].kind;
      tid = 1;
    }
    fprintf(f, "{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":1,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,"
               "\"args\":{\"phase\":\"%s\",\"tokens\":%d",
            name, cat, tid, (double)(e->t0 - r->t_origin) / 1e3, (double)(e->t1 - e->t0) / 1e3,
            PROF_PHASE_NAME[e->phase], e->n_tok);
    if (e->layer >= 0) fprintf(f, ",\"layer\":%d", e->layer);
    if (tid == 1 && PROF_OPS[e->op].parallel)
      fprintf(f, ",\"barrier_idle_us\":%.3f", (double)e->idle_ns / 1e3 / r->n_threads);
    fprintf(f, "}}%s\n", i + 1 < r->n_ev ? "," : "");
  }
  fprintf(f, "]}\n");
  return fflush(f) == 0 && !ferror(f) ? 0 : -1;
}

/* ==== SVG ==== */

const char *pa_profile_kind_color(const char *kind) {
  static const struct {
    const char *kind, *color;
  } K[] = {{"matmul", "#756bb1"},     {"attention", "#31a354"},    {"norm", "#a1d99b"},
           {"rope", "#fdae6b"},       {"activation", "#e7ba52"},   {"add", "#9ecae1"},
           {"embed", "#8c6d31"},      {"tokenization", "#e377c2"}, {"sampling", "#17becf"},
           {"overhead", "#bdbdbd"},   {"kv_store", "#74c476"},     {"copy", "#c6dbef"}};
  for (size_t i = 0; i < sizeof K / sizeof K[0]; i++)
    if (!strcmp(kind, K[i].kind)) return K[i].color;
  return "#888888";
}

static const char *KINDS[] = {"matmul", "attention", "norm",         "rope",     "activation",
                              "add",    "embed",     "tokenization", "sampling", "overhead"};
#define N_KINDS (sizeof KINDS / sizeof KINDS[0])

static const char *verdict_color(const char *v) {
  if (!v) return "#9e9ac8";
  if (!strcmp(v, "memory")) return "#3182bd";
  if (!strcmp(v, "compute")) return "#e6550d";
  return "#969696";
}

void pa_profile_svg_text(FILE *f, const char *s) {
  for (; *s; s++) {
    if (*s == '<')
      fputs("&lt;", f);
    else if (*s == '>')
      fputs("&gt;", f);
    else if (*s == '&')
      fputs("&amp;", f);
    else if (*s == '"')
      fputs("&quot;", f);
    else if ((unsigned char)*s >= 0x20)
      fputc(*s, f);
  }
}

static int cmp_time_desc(const void *a, const void *b) {
  const prof_row *x = a, *y = b;
  return x->time_s < y->time_s ? 1 : x->time_s > y->time_s ? -1 : 0;
}

#define SVG_BARS 12

int pa_profile_write_svg(FILE *f, const pa_profile_result *r) {
  const int W = 1100, X0 = 190, BW = 520;
  int n_phases = r->p.n_gen ? 2 : 1;
  const int BLOCK = 98 + SVG_BARS * 22; /* one phase: title, stacked bar, op bars */
  int H = 80 + n_phases * BLOCK + 60;
  fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
  fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
             "font-family=\"sans-serif\" font-size=\"12\">\n", W, H, W, H);
  fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", W, H);
  fprintf(f, "<text x=\"20\" y=\"30\" font-size=\"18\" font-weight=\"bold\">pasada profile: ");
  pa_profile_svg_text(f, r->model_name);
  if (r->gpu) { /* per phase: GPU time by kind and per shader */
    char dev[400];
    pa_profile_gpu_device(dev, sizeof dev, r->gpu);
    fprintf(f, "</text>\n<text x=\"20\" y=\"52\" fill=\"#444\">%s, %d layers, on ", r->arch, r->n_layer);
    pa_profile_svg_text(f, dev);
    fprintf(f, ". GPU time per shader (timestamps), coloured by kind; grey: wall time outside the GPU.</text>\n");
    for (int i = 0; i < n_phases; i++)
      pa_profile_gpu_svg_phase(f, &r->gpu->ph[i], PROF_PHASE_NAME[i], r->ph[i].tokens, r->ph[i].wall_s, 80 + i * BLOCK, W);
    fprintf(f, "</svg>\n");
    return fflush(f) == 0 && !ferror(f) ? 0 : -1;
  }
  fprintf(f, "</text>\n<text x=\"20\" y=\"52\" fill=\"#444\">%s, %d layers, %d thread%s, kernels %s. ", r->arch,
          r->n_layer, r->n_threads, r->n_threads > 1 ? "s" : "", r->cpu_path);
  fprintf(f, "Bars: share of each phase's wall time; op bars coloured by what bounds them.</text>\n");
  int y = 80;
  for (int i = 0; i < n_phases; i++) {
    const prof_phase *ph = &r->ph[i];
    int y_block = y;
    fprintf(f, "<text x=\"20\" y=\"%d\" font-size=\"15\" font-weight=\"bold\">%s: %d tokens, %.1f ms "
               "(%.2f tok/s), ops cover %.1f%%</text>\n",
            y + 16, PROF_PHASE_NAME[i], ph->tokens, ms(ph->wall_s), ph->wall_s > 0 ? ph->tokens / ph->wall_s : 0,
            100 * pa_profile_coverage(r, i));
    y += 28;
    /* stacked bar by kind */
    double by_kind[N_KINDS] = {0};
    for (int k = 0; k < ph->n_names; k++)
      for (size_t j = 0; j < N_KINDS; j++)
        if (!strcmp(ph->names[k].kind, KINDS[j])) by_kind[j] += ph->names[k].time_s > 0 ? ph->names[k].time_s : 0;
    double total = 0;
    for (size_t j = 0; j < N_KINDS; j++) total += by_kind[j];
    fprintf(f, "<text x=\"20\" y=\"%d\">by kind of op</text>\n", y + 18);
    double x = X0;
    for (size_t j = 0; j < N_KINDS; j++) {
      if (by_kind[j] <= 0 || total <= 0) continue;
      double w = (W - X0 - 20) * by_kind[j] / total;
      fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"26\" fill=\"%s\"><title>%s: %.3f ms "
                 "(%.1f%%)</title></rect>\n",
              x, y, w, pa_profile_kind_color(KINDS[j]), KINDS[j], ms(by_kind[j]), 100 * by_kind[j] / total);
      char label[64];
      snprintf(label, sizeof label, "%s %.0f%%", KINDS[j], 100 * by_kind[j] / total);
      if (w > 7.0 * (double)strlen(label) + 8)
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" fill=\"white\">%s %.0f%%</text>\n", x + 4, y + 17, KINDS[j],
                100 * by_kind[j] / total);
      x += w;
    }
    y += 40;
    /* the longest ops by name */
    prof_row sorted[PA_OP_COUNT + 1];
    int n = ph->n_names;
    memcpy(sorted, ph->names, (size_t)n * sizeof(prof_row));
    qsort(sorted, (size_t)n, sizeof(prof_row), cmp_time_desc);
    double longest = n > 0 && sorted[0].time_s > 0 ? sorted[0].time_s : 1;
    for (int k = 0; k < n && k < SVG_BARS; k++) {
      const prof_row *w = &sorted[k];
      double bw = w->time_s > 0 ? BW * w->time_s / longest : 0;
      fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">", X0 - 8, y + 13);
      pa_profile_svg_text(f, w->name);
      fprintf(f, "</text>\n<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"16\" fill=\"%s\"/>\n", X0, y, bw,
              w->op < 0 ? pa_profile_kind_color("overhead") : verdict_color(w->verdict));
      fprintf(f, "<text x=\"%.1f\" y=\"%d\" fill=\"#222\">%.2f ms, %.1f%%", X0 + bw + 6, y + 13, ms(w->time_s),
              ph->wall_s > 0 ? 100 * w->time_s / ph->wall_s : 0);
      if (w->verdict && w->op >= 0 && w->time_s > 0 && w->roof > w->time_s)
        fprintf(f, ", %s-bound, above the DRAM ceiling (cached)", w->verdict);
      else if (w->verdict && w->op >= 0 && w->time_s > 0)
        fprintf(f, ", %s-bound at %.0f%% of its ceiling", w->verdict, 100 * w->roof / w->time_s);
      else if (w->op < 0)
        fprintf(f, ", engine overhead");
      fprintf(f, "</text>\n");
      y += 22;
    }
    y = y_block + BLOCK;
  }
  /* legends */
  y += 10;
  fprintf(f, "<text x=\"20\" y=\"%d\" font-weight=\"bold\">kinds</text>\n", y);
  int lx = 70;
  for (size_t j = 0; j < N_KINDS; j++) {
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/><text x=\"%d\" y=\"%d\">%s</text>\n",
            lx, y - 10, pa_profile_kind_color(KINDS[j]), lx + 16, y, KINDS[j]);
    lx += 30 + 7 * (int)strlen(KINDS[j]);
  }
  y += 22;
  fprintf(f, "<text x=\"20\" y=\"%d\" font-weight=\"bold\">bound</text>\n", y);
  const char *V[] = {"memory", "compute", "overhead"};
  lx = 70;
  for (int j = 0; j < 3; j++) {
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/><text x=\"%d\" y=\"%d\">%s</text>\n",
            lx, y - 10, verdict_color(V[j]), lx + 16, y, V[j]);
    lx += 90;
  }
  if (!r->have_ceilings)
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/><text x=\"%d\" y=\"%d\">not "
               "measured (--no-ceilings)</text>\n",
            lx, y - 10, verdict_color(NULL), lx + 16, y);
  fprintf(f, "</svg>\n");
  return fflush(f) == 0 && !ferror(f) ? 0 : -1;
}
