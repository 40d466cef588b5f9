/* cmd_profile.c: argument parsing and output files for `pasada profile`;
 * the profiler itself is src/tools/profile.c. Usage errors exit 2, runtime
 * failures 1, each with one line on stderr. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
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
          "On a Vulkan device (--device vulkan[:N]) an op only records GPU commands, so\n"
          "each shader is timed on the GPU instead (a timestamp after every command):\n"
          "per phase, the GPU time per shader and the wall time outside the GPU; no\n"
          "ceilings, per-op or per-layer rows, and no --trace there.\n"
          "Progress goes to stderr.\n"
          "\n"
          "options:\n"
          "  -m, --model FILE        GGUF model (required)\n"
          "  -p, --prompt N          prefill tokens (default 512; at least 1)\n"
          "  -n, --gen N             decode steps (default 64; 0: prefill only)\n"
          "  -t, --threads N         threads (default: every online core)\n"
          "  -b, --batch N           tokens per decode call during prefill (default 512)\n"
          CLI_KV_TYPE_HELP CLI_QUANTIZE_HELP
          CLI_DEVICE_HELP
          CLI_GPU_LAYERS_HELP
          "      --parallel N        decode N sequences together, one token each per step\n"
          "                          with logits for all (a server's step; default 1); the\n"
          "                          other N-1 prompts are the text shifted by 1..N-1\n"
          "                          tokens, prefilled untimed\n"
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

/* Opens an output file before the run, so a bad path fails at once. */
static FILE *open_out(const char *what, const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) fprintf(stderr, "pasada profile: cannot write the %s file '%s': %s\n", what, path, strerror(errno));
  return f;
}

enum { OPT_TOP = 2500, OPT_TRACE, OPT_SVG, OPT_JSON, OPT_NO_CEILINGS, OPT_OFF, OPT_PARALLEL };

int cmd_profile(int argc, char **argv) {
  static const struct option opts[] = {CLI_SHAPE_LONG_OPTIONS,
                                       {"top", required_argument, 0, OPT_TOP},
                                       {"trace", required_argument, 0, OPT_TRACE},
                                       {"svg", required_argument, 0, OPT_SVG},
                                       {"json", no_argument, 0, OPT_JSON},
                                       {"no-ceilings", no_argument, 0, OPT_NO_CEILINGS},
                                       {"off", no_argument, 0, OPT_OFF},
                                       {"parallel", required_argument, 0, OPT_PARALLEL},
                                       {0, 0, 0, 0}};
  const char *cmd = "profile";
  pa_profile_params p;
  pa_profile_default_params(&p);
  bool json = false;
  const char *trace_path = NULL, *svg_path = NULL;
  opterr = 0;
  const char *device = NULL;
  int32_t gpu_layers = 0;
  char backend[CLI_BACKEND_NAME_MAX];
  const cli_shape_options shape = {&p.n_prompt, &p.n_gen,   &p.n_threads, &p.n_batch, &p.seed,
                                   1,           &p.kv_type, &device,      &gpu_layers};
  optind = 0;
  int c;
  while ((c = getopt_long(argc, argv, ":m:p:n:t:b:qh", opts, NULL)) != -1) {
    switch (c) {
      case 'h': usage(stdout); return CLI_OK;
      case 'm': p.model_path = optarg; break;
      case 'q': p.progress = false; break;
      case OPT_JSON: json = true; break;
      case OPT_NO_CEILINGS: p.skip_ceilings = true; break;
      case OPT_OFF: p.off = true; break;
      case OPT_TOP:
        if (!cli_parse_i32(optarg, 0, 1000000, &p.top))
          return cli_usage_line(cmd, "--top: '%s' is not a row count in [0, 1000000]", optarg);
        break;
      case OPT_PARALLEL:
        if (!cli_parse_i32(optarg, 1, 1024, &p.n_parallel))
          return cli_usage_line(cmd, "--parallel: '%s' is not a sequence count in [1, 1024]", optarg);
        break;
      case OPT_TRACE:
        if (!*optarg) return cli_usage_line(cmd, "--trace needs a file name");
        trace_path = optarg;
        break;
      case OPT_SVG:
        if (!*optarg) return cli_usage_line(cmd, "--svg needs a file name");
        svg_path = optarg;
        break;
      default: {
        const int rc = cli_shape_option(cmd, c, argv, &shape);
        if (rc != CLI_OK) return rc;
      }
    }
  }
  if (optind < argc) return cli_usage_line(cmd, "unexpected argument '%s'", argv[optind]);
  if (!p.model_path) return cli_usage_line(cmd, "no model given: use -m MODEL");
  if (!cli_backend_name(device, gpu_layers, backend, sizeof backend, &p.backend))
    return cli_usage_line(cmd, CLI_GPU_LAYERS_NEEDS_GPU);
  if (p.off && (trace_path || svg_path)) return cli_usage_line(cmd, "--off records nothing to trace or draw");
  if (trace_path && p.backend && !strncmp(p.backend, "vulkan", 6) && !strchr(p.backend, '/'))
    return cli_usage_line(cmd, "--trace: on a Vulkan device the ops are timed on the GPU per shader, not one by "
                          "one: there is no op trace to write");
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
