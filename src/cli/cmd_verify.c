/* cmd_verify.c: `pasada verify -m MODEL`: argument parsing and the report.
 * The comparison is src/tools/verify.c. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cmd_verify.h"
#include "tools/verify.h"
#include "base/base.h"
#include "format/hf.h"

/* The results are outside the tolerances. */
#define CLI_VERIFY_FAILED 3

static const char VERIFY_HELP[] =
    "usage: pasada verify -m MODEL [options]\n"
    "\n"
    "Checks that the optimized engine computes what the model means. The same tokens\n"
    "run through two backends: the one under test (--backend, default cpu: this\n"
    "CPU's SIMD kernels on 8-bit quantized activations) and the one it is measured\n"
    "against (--against-backend, default ref: weights dequantized to F32, activations\n"
    "in float, sums in double), and it reports:\n"
    "  - per layer, the relative error of the hidden state (the residual stream)\n"
    "    after that layer, max_i |fast_i - ref_i| / max_i |ref_i|: its maximum and\n"
    "    mean over every token;\n"
    "  - for the logits: KL(reference || fast) over the whole vocabulary (mean and\n"
    "    maximum), top-1 agreement and the largest absolute difference.\n"
    "Prompts: one per non-blank line of -f FILE, tokenized with the model's BOS, or\n"
    "four built-in ones (prose, code, arithmetic, French and Japanese). It fails\n"
    "(exit status 3) when a measure exceeds its tolerance, naming the first layer\n"
    "or measure above it.\n"
    "\n"
    "With --against FILE the logits come from a file another engine wrote (a GGUF\n"
    "file: keys logits.n_vocab, logits.source, logits.tokens, logits.prompt_offsets\n"
    "and an F32 tensor `logits` of n_vocab x tokens; scripts/dump-llamacpp-logits\n"
    "writes one from llama.cpp): pasada's fast path runs the file's tokens and its\n"
    "logits are compared with the file's (no layers). --save FILE writes the fast\n"
    "path's logits in that format.\n"
    "\n"
    "options:\n"
    "  -m, --model FILE       the GGUF model (required)\n"
    "  -f, --file FILE        prompts, one per line (default: the built-in ones)\n"
    "  --against FILE         compare with the logits in FILE instead of the reference path\n"
    "  --save FILE            write the fast path's logits to FILE\n"
    "  --backend NAME         the backend under test (default cpu): cpu, cpu:TABLE\n"
    "                         (scalar, avx2, avx512, avx512_vnni, amx: matrix products,\n"
    "                         attention and element-wise ops of that instruction set),\n"
    "                         ref, vulkan (the first GPU) or vulkan:N (device N of\n"
    "                         `pasada devices`)\n"
    "  --against-backend NAME the backend compared with (default ref)\n"
    "  --kernels TABLE        the same as --backend cpu:TABLE\n"
    "  --device DEV           the same as --backend DEV: cpu, vulkan or vulkan:N\n"
    "  --gpu-layers N         with a GPU under test (vulkan, vulkan:N): run the first\n"
    "                         N layers there, the rest on the CPU (default: all\n"
    "                         layers on the GPU)\n"
    "  --quantize T           a Hugging Face folder (-m DIR): quantize its matrices to T\n"
    "                         at load (Q8_0, Q4_K, Q6_K, ...; default: as stored); both\n"
    "                         backends run the quantized weights\n"
    "  -n, --max-tokens N     tokens per prompt at most; longer ones are cut (default 256)\n"
    "  -b, --batch N          tokens per decode call (default 64; 1 checks the decode path)\n"
    "  -t, --threads N        threads (default: every online core)\n"
    "  --tol-hidden X         per layer, the mean over tokens of the hidden state's\n"
    "                         relative error (default 0.05)\n"
    "  --tol-hidden-max X     per layer, that error at any one token (default 0.5)\n"
    "  --tol-kl X             mean KL in nats (default 0.03)\n"
    "  --tol-kl-max X         KL at any one position (default 0.5)\n"
    "  --tol-top1 X           least top-1 agreement, a fraction (default 0.9)\n"
    "  -q, --quiet            no progress on stderr\n"
    "  --json                 one JSON object on stdout instead of the table\n"
    "  -h, --help             show this help\n"
    "\n"
    "exit status: 0 within tolerances, 1 runtime error, 2 usage error,\n"
    "3 a measure outside its tolerance\n";

enum { OPT_AGAINST = 2300, OPT_SAVE, OPT_KERNELS, OPT_TOL_HIDDEN, OPT_TOL_HIDDEN_MAX, OPT_TOL_KL, OPT_TOL_KL_MAX, OPT_TOL_TOP1, OPT_JSON, OPT_BACKEND, OPT_AGAINST_BACKEND };

static bool parse_tol(const char *s, double max, double *out) {
  float v;
  if (!cli_parse_float(s, 0.0f, (float)max, &v)) return false;
  *out = v;
  return true;
}

int cmd_verify(int argc, char **argv) {
  static const struct option opts[] = {{"model", required_argument, 0, 'm'},
                                       {"file", required_argument, 0, 'f'},
                                       {"against", required_argument, 0, OPT_AGAINST},
                                       {"save", required_argument, 0, OPT_SAVE},
                                       {"kernels", required_argument, 0, OPT_KERNELS},
                                       {"backend", required_argument, 0, OPT_BACKEND},
                                       {"against-backend", required_argument, 0, OPT_AGAINST_BACKEND},
                                       {"device", required_argument, 0, OPT_DEVICE},
                                       {"gpu-layers", required_argument, 0, OPT_GPU_LAYERS},
                                       {"quantize", required_argument, 0, OPT_QUANTIZE},
                                       {"max-tokens", required_argument, 0, 'n'},
                                       {"batch", required_argument, 0, 'b'},
                                       {"threads", required_argument, 0, 't'},
                                       {"tol-hidden", required_argument, 0, OPT_TOL_HIDDEN},
                                       {"tol-hidden-max", required_argument, 0, OPT_TOL_HIDDEN_MAX},
                                       {"tol-kl", required_argument, 0, OPT_TOL_KL},
                                       {"tol-kl-max", required_argument, 0, OPT_TOL_KL_MAX},
                                       {"tol-top1", required_argument, 0, OPT_TOL_TOP1},
                                       {"quiet", no_argument, 0, 'q'},
                                       {"json", no_argument, 0, OPT_JSON},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  const char *cmd = "verify";
  pa_verify_params p = {.n_batch = 64, .max_tokens = 256, .tol = pa_verify_default_tol(), .progress = true};
  bool json = false, tol_set[4] = {0}; /* [1..3]: the logits' tolerances */
  const char *kernels = NULL, *device = NULL;
  int32_t gpu_layers = 0;
  char kernels_backend[48], backend_name[CLI_BACKEND_NAME_MAX];
  opterr = 0;
  optind = 0;
  int c;
  while ((c = getopt_long(argc, argv, ":m:f:n:b:t:qh", opts, NULL)) != -1) {
    switch (c) {
      case 'h': fputs(VERIFY_HELP, stdout); return CLI_OK;
      case 'm': p.model_path = optarg; break;
      case 'f': p.prompts_path = optarg; break;
      case OPT_AGAINST: p.against_path = optarg; break;
      case OPT_SAVE: p.save_path = optarg; break;
      case OPT_KERNELS: kernels = optarg; break;
      case OPT_BACKEND: p.backend = optarg; break;
      case OPT_AGAINST_BACKEND: p.against_backend = optarg; break;
      case OPT_DEVICE:
        if (!cli_parse_device(optarg)) return cli_usage(cmd, CLI_DEVICE_ERROR, optarg);
        device = optarg;
        break;
      case OPT_GPU_LAYERS:
        if (!cli_parse_gpu_layers(optarg, &gpu_layers)) return cli_usage(cmd, CLI_GPU_LAYERS_ERROR, optarg);
        break;
      case OPT_QUANTIZE:
        if (hf_set_load_type(optarg) != PASADA_OK) return cli_usage(cmd, "--quantize: %s", pa_last_error());
        break;
      case 'q': p.progress = false; break;
      case OPT_JSON: json = true; break;
      case 'n':
        if (!cli_parse_i32(optarg, 1, 1 << 20, &p.max_tokens))
          return cli_usage(cmd, "--max-tokens: '%s' is not a token count in [1, 1048576]", optarg);
        break;
      case 'b':
        if (!cli_parse_i32(optarg, 1, 1 << 20, &p.n_batch))
          return cli_usage(cmd, "--batch: '%s' is not a token count in [1, 1048576]", optarg);
        break;
      case 't':
        if (!cli_parse_i32(optarg, 1, 256, &p.n_threads))
          return cli_usage(cmd, "--threads: '%s' is not a thread count in [1, 256]", optarg);
        break;
      case OPT_TOL_HIDDEN:
        if (!parse_tol(optarg, 1e30, &p.tol.hidden_mean))
          return cli_usage(cmd, "--tol-hidden: '%s' is not a non-negative number", optarg);
        break;
      case OPT_TOL_HIDDEN_MAX:
        if (!parse_tol(optarg, 1e30, &p.tol.hidden_max))
          return cli_usage(cmd, "--tol-hidden-max: '%s' is not a non-negative number", optarg);
        break;
      case OPT_TOL_KL:
        if (!parse_tol(optarg, 1e30, &p.tol.kl_mean))
          return cli_usage(cmd, "--tol-kl: '%s' is not a non-negative number", optarg);
        tol_set[1] = true;
        break;
      case OPT_TOL_KL_MAX:
        if (!parse_tol(optarg, 1e30, &p.tol.kl_max))
          return cli_usage(cmd, "--tol-kl-max: '%s' is not a non-negative number", optarg);
        tol_set[2] = true;
        break;
      case OPT_TOL_TOP1:
        if (!parse_tol(optarg, 1.0, &p.tol.top1))
          return cli_usage(cmd, "--tol-top1: '%s' is not a fraction in [0, 1]", optarg);
        tol_set[3] = true;
        break;
      default: return cli_getopt_error(cmd, c, argv);
    }
  }
  if (optind < argc) return cli_usage(cmd, "unexpected argument '%s'", argv[optind]);
  if (!p.model_path) return cli_usage(cmd, "no model given (-m FILE)");
  if (p.against_path && p.prompts_path)
    return cli_usage(cmd, "--against takes its tokens from the file: drop -f");
  if (p.against_path) { /* its own defaults for what was not set */
    pa_verify_tol d = pa_verify_default_tol_against();
    if (!tol_set[1]) p.tol.kl_mean = d.kl_mean;
    if (!tol_set[2]) p.tol.kl_max = d.kl_max;
    if (!tol_set[3]) p.tol.top1 = d.top1;
  }
  if (device) {
    if (p.backend) return cli_usage(cmd, "--device and --backend both name the backend under test");
    if (kernels) return cli_usage(cmd, "--device and --kernels both name the backend under test");
    p.backend = device;
  }
  if (kernels) {
    if (!pa_kernels_is_name(kernels))
      return cli_usage(cmd, "--kernels: '%s' is not one of " PA_KERNEL_TABLE_NAMES, kernels);
    if (p.backend) return cli_usage(cmd, "--kernels and --backend both name the backend under test");
    snprintf(kernels_backend, sizeof kernels_backend, "cpu:%s", kernels);
    p.backend = kernels_backend;
  }
  if (p.against_path && p.against_backend)
    return cli_usage(cmd, "--against compares with a file: drop --against-backend");
  if (!cli_backend_name(p.backend, gpu_layers, backend_name, sizeof backend_name, &p.backend))
    return cli_usage(cmd, CLI_GPU_LAYERS_NEEDS_GPU);

  pa_verify_result r;
  if (pa_verify_run(&p, &r) != PASADA_OK) return cli_fail("%s", pasada_last_error());
  int rc = r.pass ? CLI_OK : CLI_VERIFY_FAILED;
  if (json) {
    if (pa_verify_print_json(stdout, &r)) rc = cli_fail("out of memory writing the JSON report");
  } else {
    pa_verify_print_table(stdout, &r);
  }
  if (!r.pass) fprintf(stderr, "pasada: verify failed: %s\n", r.failure);
  pa_verify_result_free(&r);
  return rc;
}
