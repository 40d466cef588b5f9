/* cmd_profile.c: argument parsing and output files for `pasada profile`;
 * the profiler itself is src/tools/profile.c. Usage errors exit 2, runtime
 * failures 1, each with one line on stderr. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmd_profile.h"
#include "pasada.h"
#include "tools/profile.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: pasada profile -m MODEL [options]\n"
          "\n"
          "Where the time goes: one prefill (a built-in English text, tokenized, its first\n"
          "-p tokens decoded in batches) and one decode (-n tokens, each sampled with the\n"
          "default sampler then decoded alone), with every op of the forward pass timed:\n"
          "each matrix product by weight name (blk.3.ffn_up), attention, norms, RoPE, the\n"
          "activation, residual adds, the embedding, plus tokenization and sampling. Per\n"
          "op, per layer and per phase: time, the thread pool's barrier idle time, bytes\n"
          "moved and FLOPs (the least the op needs), achieved GB/s and GFLOP/s against the\n"
          "machine's ceilings (read bandwidth, fp32 FMA, int8 dot: measured once at start,\n"
          "a few seconds), a verdict (memory-, compute- or overhead-bound) and the gap\n"
          "(time minus the time at the ceilings), largest gaps first. What the ops do not\n"
          "cover of a phase's wall time is the engine's own overhead. Profiling costs two\n"
          "clock reads and a record per op (it measures and prints its own cost: well\n"
          "under 1%% on real models); off (every other command) one branch per op.\n"
          "Progress goes to stderr.\n"
          "\n"
          "options:\n"
          "  -m, --model FILE        GGUF model (required)\n"
          "  -p, --prompt N          prefill tokens (default 512; at least 1)\n"
          "  -n, --gen N             decode steps (default 64; 0: prefill only)\n"
          "  -t, --threads N         threads (default: every online core)\n"
          "  -b, --batch N           tokens per decode call during prefill (default 512)\n"
          "      --seed N            the sampler's seed (default 1234)\n"
          "      --top N             single ops listed per phase in the table (default 20)\n"
          "      --trace FILE        write every op as Chrome trace-event JSON (open it in\n"
          "                          https://ui.perfetto.dev or chrome://tracing)\n"
          "      --svg FILE          draw the breakdown as an SVG chart\n"
          "      --json              print one JSON object on stdout instead of the table\n"
          "      --no-ceilings       skip the ceiling probes (no verdicts, gaps or %%ceil)\n"
          "      --off               the same run with the profiler off: phase wall times\n"
          "                          only (to measure what profiling costs)\n"
          "  -q, --quiet             no progress on stderr\n"
          "  -h, --help              this help\n");
}

static int bad(const char *fmt, const char *a, const char *b) {
  fprintf(stderr, "pasada profile: ");
  fprintf(stderr, fmt, a, b);
  fprintf(stderr, " (see pasada profile --help)\n");
  return 2;
}

static bool parse_int(const char *s, long lo, long hi, long *out) {
  if (!s || !*s) return false;
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || *end || v < lo || v > hi) return false;
  *out = v;
  return true;
}

/* Opens an output file before the run, so a bad path fails at once. */
static FILE *open_out(const char *what, const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) fprintf(stderr, "pasada profile: cannot write the %s file '%s': %s\n", what, path, strerror(errno));
  return f;
}

int cmd_profile(int argc, char **argv) {
  pa_profile_params p;
  pa_profile_default_params(&p);
  bool json = false;
  const char *trace_path = NULL, *svg_path = NULL;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
      usage(stdout);
      return 0;
    }
    if (!strcmp(arg, "--json")) {
      json = true;
      continue;
    }
    if (!strcmp(arg, "--no-ceilings")) {
      p.skip_ceilings = true;
      continue;
    }
    if (!strcmp(arg, "--off")) {
      p.off = true;
      continue;
    }
    if (!strcmp(arg, "-q") || !strcmp(arg, "--quiet")) {
      p.progress = false;
      continue;
    }
    /* options with a value: "-p 512", "--prompt 512" or "--prompt=512" */
    char name[64];
    const char *val = NULL;
    const char *eq = strncmp(arg, "--", 2) == 0 ? strchr(arg, '=') : NULL;
    if (eq) {
      size_t n = (size_t)(eq - arg);
      if (n >= sizeof name) return bad("unknown option '%s'%s", arg, "");
      memcpy(name, arg, n);
      name[n] = 0;
      val = eq + 1;
    } else {
      snprintf(name, sizeof name, "%s", arg);
    }
    const char *opts[][2] = {{"-m", "--model"}, {"-p", "--prompt"}, {"-n", "--gen"},  {"-t", "--threads"},
                             {"-b", "--batch"}, {"", "--seed"},     {"", "--top"},    {"", "--trace"},
                             {"", "--svg"}};
    int which = -1;
    for (int k = 0; k < (int)(sizeof opts / sizeof opts[0]); k++)
      if ((opts[k][0][0] && !strcmp(name, opts[k][0])) || !strcmp(name, opts[k][1])) which = k;
    if (which < 0) {
      if (arg[0] == '-') return bad("unknown option '%s'%s", arg, "");
      return bad("unexpected argument '%s'%s", arg, "");
    }
    if (!val) {
      if (i + 1 >= argc) return bad("%s needs a value%s", name, "");
      val = argv[++i];
    }
    long v = 0;
    switch (which) {
    case 0: p.model_path = val; break;
    case 1:
      if (!parse_int(val, 1, 1 << 20, &v)) return bad("%s: '%s' is not a token count in [1, 1048576]", name, val);
      p.n_prompt = (int32_t)v;
      break;
    case 2:
      if (!parse_int(val, 0, 1 << 20, &v)) return bad("%s: '%s' is not a token count in [0, 1048576]", name, val);
      p.n_gen = (int32_t)v;
      break;
    case 3:
      if (!parse_int(val, 1, 256, &v)) return bad("%s: '%s' is not a thread count in [1, 256]", name, val);
      p.n_threads = (int32_t)v;
      break;
    case 4:
      if (!parse_int(val, 1, 65536, &v)) return bad("%s: '%s' is not a batch size in [1, 65536]", name, val);
      p.n_batch = (int32_t)v;
      break;
    case 5: {
      char *end;
      errno = 0;
      unsigned long long s = strtoull(val, &end, 10);
      if (errno || *end || !*val || val[0] == '-') return bad("%s: '%s' is not a seed", name, val);
      p.seed = (uint64_t)s;
      break;
    }
    case 6:
      if (!parse_int(val, 0, 1000000, &v)) return bad("%s: '%s' is not a row count in [0, 1000000]", name, val);
      p.top = (int32_t)v;
      break;
    case 7:
      if (!*val) return bad("%s needs a file name%s", name, "");
      trace_path = val;
      break;
    case 8:
      if (!*val) return bad("%s needs a file name%s", name, "");
      svg_path = val;
      break;
    }
  }
  if (!p.model_path) return bad("no model given: use -m MODEL%s%s", "", "");
  if (p.off && (trace_path || svg_path)) return bad("--off records nothing to trace or draw%s%s", "", "");
  p.keep_events = trace_path != NULL;

  FILE *trace = NULL, *svg = NULL;
  if (trace_path && !(trace = open_out("trace", trace_path))) return 1;
  if (svg_path && !(svg = open_out("SVG", svg_path))) {
    if (trace) {
      fclose(trace);
      remove(trace_path);
    }
    return 1;
  }
  pa_profile_result *r = NULL;
  int status = 0;
  if (pa_profile_run(&p, &r)) {
    fprintf(stderr, "pasada profile: %s\n", pasada_last_error());
    status = 1;
    goto done;
  }
  if (json) {
    if (pa_profile_print_json(stdout, r)) {
      fprintf(stderr, "pasada profile: cannot write the JSON report\n");
      status = 1;
      goto done;
    }
  } else {
    pa_profile_print_table(stdout, r);
  }
  if (trace) {
    int rc = pa_profile_write_trace(trace, r);
    rc |= fclose(trace);
    trace = NULL;
    if (rc) {
      fprintf(stderr, "pasada profile: writing the trace file '%s' failed\n", trace_path);
      status = 1;
      goto done;
    }
    if (p.progress) fprintf(stderr, "profile: wrote %s (Chrome trace events; open in https://ui.perfetto.dev)\n", trace_path);
  }
  if (svg) {
    int rc = pa_profile_write_svg(svg, r);
    rc |= fclose(svg);
    svg = NULL;
    if (rc) {
      fprintf(stderr, "pasada profile: writing the SVG file '%s' failed\n", svg_path);
      status = 1;
      goto done;
    }
    if (p.progress) fprintf(stderr, "profile: wrote %s\n", svg_path);
  }
done:
  if (trace) fclose(trace);
  if (svg) fclose(svg);
  if (status && trace_path) remove(trace_path); /* no half-written outputs */
  if (status && svg_path) remove(svg_path);
  pa_profile_free(r);
  return status;
}
