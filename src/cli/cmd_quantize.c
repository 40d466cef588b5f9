/* cmd_quantize.c: `pasada quantize IN OUT --type T`: argument parsing, the
 * progress display on stderr, and the report on stdout. The plan and the
 * conversion are src/tools/quantize.c. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "cli.h"
#include "cmd_quantize.h"
#include "tools/quantize.h"

static void help(FILE *out) {
  fputs(
      "usage: pasada quantize IN OUT --type TYPE [options]\n"
      "       pasada quantize IN --type TYPE --dry-run\n"
      "\n"
      "Writes OUT, a copy of the GGUF file IN whose weight matrices are converted to\n"
      "TYPE. Every metadata key is kept (the tokenizer included); general.file_type\n"
      "and general.quantization_version are set. Any input type works: quantized\n"
      "tensors are dequantized to floats first (which adds the two errors up).\n"
      "Norms, 1-D tensors and a few small tensors stay as they are; a tensor already\n"
      "in its target type is copied byte for byte. The rules (after llama.cpp's):\n"
      "  - the output matrix (the token embedding when tied) becomes Q6_K for every\n"
      "    quantized TYPE but Q8_0, or Q8_0 when its rows do not fit TYPE's blocks;\n"
      "  - _M mixes: attn_v and ffn_down of the first and last eighth of the layers\n"
      "    and of every third layer between them become Q6_K;\n"
      "  - a row length that is not a multiple of 256 turns Q4_K into Q5_0, Q5_K\n"
      "    into Q5_1, Q6_K into Q8_0, Q3_K and Q2_K into Q4_0, IQ4_XS into IQ4_NL\n"
      "    (F16 if not a multiple of 32 either).\n"
      "The file is written to OUT.tmp, then renamed to OUT: a failed run leaves no\n"
      "OUT. A progress bar goes to stderr (lines when stderr is not a terminal).\n"
      "\n"
      "types:\n",
      out);
  size_t n;
  const pa_quant_preset *p = pa_quant_presets(&n);
  for (size_t i = 0; i < n; i++) fprintf(out, "  %-8s %s\n", p[i].name, p[i].about);
  fputs(
      "\n"
      "options:\n"
      "  --type TYPE        output type (required; case does not matter)\n"
      "  --dry-run          print the plan (each tensor: name, shape, from -> to type,\n"
      "                     MiB, rule) and the output's exact size; write nothing\n"
      "  --pure             every quantizable matrix in TYPE: no mix, no Q6_K output\n"
      "                     (row-length fallbacks still apply)\n"
      "  -t, --threads N    threads converting rows (default: every online core);\n"
      "                     the output's bytes do not depend on it\n"
      "  -v, --verbose      print the per-tensor table after a real run too\n"
      "  -q, --quiet        no progress on stderr\n"
      "  --json             one JSON object on stdout instead of the tables\n"
      "  -h, --help         show this help\n"
      "\n"
      "exit status: 0 success, 1 runtime error, 2 usage error\n",
      out);
}

typedef struct {
  bool tty, quiet;
  double start, last;
  int last_decile;
} progress_state;

static void show_progress(void *user, int64_t done, int64_t total) {
  progress_state *ps = user;
  if (ps->quiet) return;
  double now = pa_time_s(), frac = total > 0 ? (double)done / (double)total : 1.0;
  if (ps->tty) {
    if (done < total && now - ps->last < 0.1) return;
    ps->last = now;
    char bar[41];
    int fill = (int)(frac * 40.0);
    for (int i = 0; i < 40; i++) bar[i] = i < fill ? '#' : '.';
    bar[40] = 0;
    fprintf(stderr, "\rquantizing [%s] %3d%%  %.1f s", bar, (int)(frac * 100.0), now - ps->start);
    if (done >= total) fputc('\n', stderr);
  } else {
    int decile = (int)(frac * 10.0);
    if (decile <= ps->last_decile) return;
    ps->last_decile = decile;
    fprintf(stderr, "quantizing: %d%% (%.1f s)\n", decile * 10, now - ps->start);
  }
}

enum { OPT_TYPE = 2000, OPT_DRY_RUN, OPT_PURE, OPT_JSON };

int cmd_quantize(int argc, char **argv) {
  static const struct option opts[] = {{"type", required_argument, 0, OPT_TYPE},
                                       {"dry-run", no_argument, 0, OPT_DRY_RUN},
                                       {"pure", no_argument, 0, OPT_PURE},
                                       {"threads", required_argument, 0, 't'},
                                       {"verbose", no_argument, 0, 'v'},
                                       {"quiet", no_argument, 0, 'q'},
                                       {"json", no_argument, 0, OPT_JSON},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  const char *cmd = "quantize", *type_name = NULL;
  bool dry_run = false, pure = false, verbose = false, quiet = false, json = false;
  int32_t n_threads = 0;
  opterr = 0;
  optind = 0;
  int c;
  while ((c = getopt_long(argc, argv, ":t:vqh", opts, NULL)) != -1) {
    switch (c) {
      case 'h': help(stdout); return CLI_OK;
      case OPT_TYPE: type_name = optarg; break;
      case OPT_DRY_RUN: dry_run = true; break;
      case OPT_PURE: pure = true; break;
      case OPT_JSON: json = true; break;
      case 'v': verbose = true; break;
      case 'q': quiet = true; break;
      case 't':
        if (!cli_parse_i32(optarg, 1, 256, &n_threads))
          return cli_usage(cmd, "--threads: '%s' is not a thread count in [1, 256]", optarg);
        break;
      default: return cli_getopt_error(cmd, c, argv);
    }
  }
  const char *in = optind < argc ? argv[optind++] : NULL;
  const char *out = optind < argc ? argv[optind++] : NULL;
  if (optind < argc) return cli_usage(cmd, "unexpected argument '%s'", argv[optind]);
  if (!in) return cli_usage(cmd, "no input file given");
  if (!out && !dry_run) return cli_usage(cmd, "no output file given");
  if (!type_name) return cli_usage(cmd, "no output type given (--type, e.g. Q4_K_M)");
  const pa_quant_preset *preset = pa_quant_preset_find(type_name);
  if (!preset) {
    char list[256] = "";
    size_t n, k = 0;
    const pa_quant_preset *p = pa_quant_presets(&n);
    for (size_t i = 0; i < n && k < sizeof list; i++)
      k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", i ? ", " : "", p[i].name);
    return cli_usage(cmd, "--type: unknown type '%s' (one of %s)", type_name, list);
  }

  gguf_file *f = NULL;
  if (gguf_open_model(in, &f) != PASADA_OK) return cli_fail("%s", pasada_last_error());
  pa_quant_plan plan;
  int rc = CLI_OK;
  if (pa_quant_plan_make(f, preset, pure, &plan) != PASADA_OK) {
    rc = cli_fail("%s: %s", in, pasada_last_error());
    gguf_close(f);
    return rc;
  }
  double seconds = -1;
  if (!dry_run) {
    progress_state ps = {.tty = isatty(2), .quiet = quiet, .start = pa_time_s(), .last_decile = -1};
    if (pa_quant_write(f, &plan, out, n_threads, show_progress, &ps) != PASADA_OK)
      rc = cli_fail("%s", pasada_last_error());
    seconds = pa_time_s() - ps.start;
  }
  if (rc == CLI_OK) {
    if (json) {
      if (pa_quant_print_json(stdout, f, &plan, out, dry_run, true, seconds))
        rc = cli_fail("out of memory writing the JSON report");
    } else {
      pa_quant_print_plan(stdout, f, &plan, dry_run || verbose);
      if (dry_run)
        printf("dry run   nothing written\n");
      else
        printf("wrote     %s in %.1f s\n", out, seconds);
    }
    if (rc == CLI_OK && fflush(stdout) != 0) rc = cli_fail("writing to stdout failed");
  }
  pa_quant_plan_free(&plan);
  gguf_close(f);
  return rc;
}
