/* cmd_kld.c: `pasada kld --base BASE --model QUANT -f TEXT`: argument
 * parsing and the report (one table, or one JSON object). The comparison is
 * src/tools/kld.c; the windows are those of `pasada perplexity`. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cmd_kld.h"
#include "cmd_perplexity.h"
#include "tools/kld.h"

static const char KLD_HELP[] =
    "usage: pasada kld --base BASE --model QUANT -f TEXT [options]\n"
    "\n"
    "What a quantization cost and what it bought, in one table. BASE (the reference,\n"
    "e.g. F16 or Q8_0) and QUANT (its quantization) run on the same windows of the\n"
    "text, cut and scored as `pasada perplexity` does (the second half of each window\n"
    "of --ctx tokens). For every scored token it compares the two next-token\n"
    "distributions over the whole vocabulary and reports:\n"
    "  - KL(base || quant) in nats: mean (+/- standard error), median, 99th\n"
    "    percentile and maximum;\n"
    "  - top-1 agreement: how often both models put the same token first;\n"
    "  - each model's perplexity and the change (with the standard error of\n"
    "    ln(ppl_quant / ppl_base), from the per-token differences);\n"
    "  - each file's size (and bits per weight) and each model's speed: tokens per\n"
    "    second of decoding the windows during this run (prompt processing in\n"
    "    batches; use `pasada bench` for generation speed).\n"
    "Both models are loaded at once, and BASE's log-probabilities of one window\n"
    "are held in memory (ctx/2 x vocabulary floats). A model against itself gives\n"
    "KL exactly 0 and 100% agreement. Progress goes to stderr after each window.\n"
    "\n"
    "options:\n"
    "  --base FILE          the reference GGUF model or Hugging Face folder (required)\n"
    "  -m, --model FILE     the quantized GGUF model or Hugging Face folder (required)\n"
    "  -f, --file FILE      the text (required; scripts/fetch-eval-text fetches one)\n"
    "  -c, --ctx N          tokens per window (default 512; even, 16..1048576)\n"
    "  -b, --batch N        tokens per decode call (default: the window)\n"
    "  --chunks N           evaluate only the first N windows (default: all)\n"
    "  -t, --threads N      threads (default: every online core)\n"
    "  --kv-type T          the KV cache's values: f16 (default), f32 or q8\n"
    "  --device DEV         run both models on cpu (the default), vulkan (the first\n"
    "                       GPU) or vulkan:N (device N of `pasada devices`)\n"
    "  --gpu-layers N       with a GPU --device: run the first N layers of each\n"
    "                       model there, the rest on the CPU (default: all layers\n"
    "                       on the GPU)\n"
    "  --quantize T         a Hugging Face folder (-m DIR): quantize its matrices to T\n"
    "                       at load (Q8_0, Q4_K, Q6_K, ...; default: as stored); QUANT\n"
    "                       only, so --base DIR -m DIR --quantize T measures what T\n"
    "                       costs\n"
    "  -q, --quiet          no progress on stderr\n"
    "  --json               one JSON object on stdout instead of the table\n"
    "  -h, --help           show this help\n"
    "\n"
    "exit status: 0 success, 1 runtime error, 2 usage error\n";

enum { OPT_BASE = 2200, OPT_JSON };

int cmd_kld(int argc, char **argv) {
  static const struct option opts[] = {{"base", required_argument, 0, OPT_BASE},
                                       {"model", required_argument, 0, 'm'},
                                       {"file", required_argument, 0, 'f'},
                                       CLI_EVAL_OPTIONS,
                                       {"quiet", no_argument, 0, 'q'},
                                       {"json", no_argument, 0, OPT_JSON},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  const char *cmd = "kld";
  pa_kld_params p = {.eval = {.n_ctx = 512}, .progress = true};
  cli_eval_device dev = {0};
  bool json = false;
  opterr = 0;
  optind = 0;
  int c;
  while ((c = getopt_long(argc, argv, ":m:f:qh" CLI_EVAL_SHORT, opts, NULL)) != -1) {
    switch (c) {
      case 'h': fputs(KLD_HELP, stdout); return CLI_OK;
      case OPT_BASE: p.base_path = optarg; break;
      case 'm': p.quant_path = optarg; break;
      case 'f': p.text_path = optarg; break;
      case 'q': p.progress = false; break;
      case OPT_JSON: json = true; break;
      default: {
        int rc = cli_eval_option(cmd, c, argv, &p.eval, &dev);
        if (rc != CLI_OK) return rc;
      }
    }
  }
  if (optind < argc) return cli_usage(cmd, "unexpected argument '%s'", argv[optind]);
  if (!p.base_path) return cli_usage(cmd, "no base model given (--base FILE)");
  if (!p.quant_path) return cli_usage(cmd, "no quantized model given (-m FILE)");
  if (!p.text_path) return cli_usage(cmd, "no text given (-f FILE)");
  if (cli_eval_backend(cmd, &dev, &p.eval)) return CLI_USAGE_ERROR;

  pa_kld_result r;
  if (pa_kld_run(&p, &r) != PASADA_OK) return cli_fail("%s", pasada_last_error());
  int rc = CLI_OK;
  if (json) {
    if (pa_kld_print_json(stdout, &r)) rc = cli_fail("out of memory writing the JSON report");
  } else {
    pa_kld_print_table(stdout, &r);
  }
  if (rc == CLI_OK && fflush(stdout) != 0) rc = cli_fail("writing to stdout failed");
  return rc;
}
