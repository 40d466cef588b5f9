/* cmd_perplexity.c: `pasada perplexity -m MODEL -f TEXT`: argument parsing
 * and the report (a table, or one JSON object). The windows, the scoring and
 * the running value on stderr are src/tools/perplexity.c. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cmd_perplexity.h"
#include "tools/perplexity.h"
#include "base/base.h"
#include "format/hf.h"

static const char PPL_HELP[] =
    "usage: pasada perplexity -m MODEL -f TEXT [options]\n"
    "\n"
    "Perplexity of MODEL on the text of FILE, by llama.cpp's perplexity method: the\n"
    "text is tokenized once (BOS first when the model adds one; special-token text\n"
    "stays text), cut into non-overlapping windows of --ctx tokens, and each window\n"
    "is evaluated from an empty cache with its first token replaced by BOS when the\n"
    "model adds one. Only the second half of each window is scored (the logits at\n"
    "positions ctx/2 .. ctx-2 predict the next token), so every scored token has at\n"
    "least ctx/2 tokens of context. Reports exp(mean negative log-likelihood) with\n"
    "its standard error (that of the mean NLL, carried through exp). The text must\n"
    "hold at least two windows. The running value goes to stderr after each window.\n"
    "scripts/fetch-eval-text fetches the project's evaluation text.\n"
    "\n"
    "options:\n"
    "  -m, --model FILE     GGUF model or Hugging Face folder (required)\n"
    "  -f, --file FILE      the text (required)\n"
    "  -c, --ctx N          tokens per window (default 512; even, 16..1048576)\n"
    "  -b, --batch N        tokens per decode call (default: the window; smaller\n"
    "                       batches use less memory, same result up to rounding)\n"
    "  --chunks N           evaluate only the first N windows (default: all)\n"
    "  -t, --threads N      threads (default: every online core)\n"
    "  --kv-type T          the KV cache's values: f16 (default), f32 or q8\n"
    "  --device DEV         run on cpu (the default), vulkan (the first GPU) or\n"
    "                       vulkan:N (device N of `pasada devices`)\n"
    "  --gpu-layers N       with a GPU --device: run the first N layers there,\n"
    "                       the rest on the CPU (default: all layers on the GPU)\n"
    "  --quantize T         a Hugging Face folder (-m DIR): quantize its matrices to T\n"
    "                       at load (Q8_0, Q4_K, Q6_K, ...; default: as stored)\n"
    "  -q, --quiet          no progress on stderr\n"
    "  --json               one JSON object on stdout instead of the table\n"
    "  -h, --help           show this help\n"
    "\n"
    "exit status: 0 success, 1 runtime error, 2 usage error\n";

enum { OPT_JSON = 2100 };

int cmd_perplexity(int argc, char **argv) {
  static const struct option opts[] = {{"model", required_argument, 0, 'm'},
                                       {"file", required_argument, 0, 'f'},
                                       CLI_EVAL_OPTIONS,
                                       {"quiet", no_argument, 0, 'q'},
                                       {"json", no_argument, 0, OPT_JSON},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  const char *cmd = "perplexity";
  pa_ppl_params p = {.eval = {.n_ctx = 512}, .progress = true};
  cli_eval_device dev = {0};
  bool json = false;
  opterr = 0;
  optind = 0;
  int c;
  while ((c = getopt_long(argc, argv, ":m:f:qh" CLI_EVAL_SHORT, opts, NULL)) != -1) {
    switch (c) {
      case 'h': fputs(PPL_HELP, stdout); return CLI_OK;
      case 'm': p.model_path = optarg; break;
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
  if (!p.model_path) return cli_usage(cmd, "no model given (-m MODEL)");
  if (!p.text_path) return cli_usage(cmd, "no text given (-f FILE)");
  if (cli_eval_backend(cmd, &dev, &p.eval)) return CLI_USAGE_ERROR;

  pa_ppl_result r;
  if (pa_ppl_run(&p, &r) != PASADA_OK) return cli_fail("%s", pasada_last_error());
  int rc = CLI_OK;
  if (json) {
    if (pa_ppl_print_json(stdout, &r)) rc = cli_fail("out of memory writing the JSON report");
  } else {
    pa_ppl_print_table(stdout, &r);
  }
  pa_ppl_result_free(&r);
  if (rc == CLI_OK && fflush(stdout) != 0) rc = cli_fail("writing to stdout failed");
  return rc;
}

int cli_eval_option(const char *cmd, int opt, char **argv, pa_eval_params *e, cli_eval_device *dev) {
  switch (opt) {
    case 'c':
      if (!cli_parse_i32(optarg, 16, 1 << 20, &e->n_ctx) || e->n_ctx % 2)
        return cli_usage(cmd, "--ctx: '%s' is not an even token count in [16, 1048576]", optarg);
      return CLI_OK;
    case 'b':
      if (!cli_parse_i32(optarg, 1, 1 << 20, &e->n_batch))
        return cli_usage(cmd, "--batch: '%s' is not a token count in [1, 1048576]", optarg);
      return CLI_OK;
    case CLI_OPT_CHUNKS:
      if (!cli_parse_i32(optarg, 1, INT32_MAX, &e->n_chunks))
        return cli_usage(cmd, "--chunks: '%s' is not a positive count", optarg);
      return CLI_OK;
    case 't':
      if (!cli_parse_i32(optarg, 1, 256, &e->n_threads))
        return cli_usage(cmd, "--threads: '%s' is not a thread count in [1, 256]", optarg);
      return CLI_OK;
    case CLI_OPT_EVAL_KV_TYPE:
      if (!cli_parse_kv_type(optarg, &e->kv_type)) return cli_usage(cmd, "--kv-type: '%s' is not f16, f32 or q8", optarg);
      return CLI_OK;
    case CLI_OPT_EVAL_DEVICE:
      if (!cli_parse_device(optarg)) return cli_usage(cmd, CLI_DEVICE_ERROR, optarg);
      dev->device = optarg;
      return CLI_OK;
    case CLI_OPT_EVAL_GPU_LAYERS:
      if (!cli_parse_gpu_layers(optarg, &dev->gpu_layers)) return cli_usage(cmd, CLI_GPU_LAYERS_ERROR, optarg);
      return CLI_OK;
    case CLI_OPT_EVAL_QUANTIZE: /* checked here, applied at load (pa_eval_model_open) */
      if (hf_set_load_type(optarg) != PASADA_OK) return cli_usage(cmd, "--quantize: %s", pa_last_error());
      hf_set_load_type(NULL);
      e->quantize = optarg;
      return CLI_OK;
    default: return cli_getopt_error(cmd, opt, argv);
  }
}

int cli_eval_backend(const char *cmd, cli_eval_device *dev, pa_eval_params *e) {
  if (!cli_backend_name(dev->device, dev->gpu_layers, dev->name, sizeof dev->name, &e->backend))
    return cli_usage(cmd, CLI_GPU_LAYERS_NEEDS_GPU);
  return CLI_OK;
}
