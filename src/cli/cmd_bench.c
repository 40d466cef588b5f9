/* cmd_bench.c: argument parsing for `pasada bench`; the benchmark itself is
 * src/tools/bench.c. Usage errors exit 2, runtime failures 1, each with one
 * line on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/cmd_bench.h"
#include "pasada.h"
#include "server/json_schema.h"
#include "tools/bench.h"
#include "runtime/speculative.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: pasada bench -m MODEL [options]\n"
          "       pasada bench --ceilings [-t N] [--json]\n"
          "\n"
          "Measures prompt processing (pp: a seeded random prompt decoded in batches) and\n"
          "generation (tg: greedy, one token per decode step) in tokens per second over\n"
          "repeats (min / median / max), next to this machine's ceilings measured on the\n"
          "same threads before and after the runs (each the higher of the two): read\n"
          "bandwidth (a buffer far larger than the caches, in 2 MB pages as the weights\n"
          "are), fp32 FMA peak and int8-dot peak. For tg: bytes read per token (weights\n"
          "+ KV) and the achieved GB/s as a share of the read bandwidth; for pp: achieved\n"
          "GFLOP/s as a share of the FMA peak (and of the int8 peak for quantized\n"
          "weights). On a Vulkan device (--device vulkan[:N]) the ceilings are the\n"
          "device's own, measured by shaders before and after the runs: read bandwidth\n"
          "(a 256 MiB device buffer; 64 MiB on a CPU implementation such as lavapipe)\n"
          "and fp32 FMA rate; pp and tg are shares of those, and the device is named\n"
          "in place of the CPU kernels. Progress goes to stderr.\n"
          "\n"
          "options:\n"
          "  -m, --model FILE        GGUF model (required)\n"
          "  -p, --prompt N          prompt tokens (default 512; 0: no pp)\n"
          "  -n, --gen N             generated tokens (default 128; 0: no tg)\n"
          "  -t, --threads N         threads (default: every online core)\n"
          "  -r, --repeats N         repeats (default 3)\n"
          "  -b, --batch N           tokens per decode call during pp (default 512)\n"
          "      --seed N            seed of the prompt token ids (default 1234)\n"
          "      --price-per-hour P  machine price in $/hour: adds $ per million tokens\n"
          CLI_KV_TYPE_HELP CLI_QUANTIZE_HELP
          CLI_DEVICE_HELP
          CLI_GPU_LAYERS_HELP
          "      --no-ceilings       skip the bandwidth and peak probes\n"
          "      --ceilings          measure only this machine's ceilings on -t threads,\n"
          "                          no model (e.g. around another engine's run)\n"
          "\n"
          "constrained decoding (then pp, tg and the ceilings are not measured):\n"
          "      --grammar FILE      a GBNF grammar: per decode step, the batched forward\n"
          "                          pass, every user's full token mask, and the sampling\n"
          "                          phase with and without the grammar (-n steps)\n"
          "      --json-schema FILE  the same for a JSON schema's grammar\n"
          "      --users LIST        sequences decoding together, e.g. 1,16 (default 1,16)\n"
          "      --temp T            the samplers' temperature (default 0.8)\n"
          "      --shared-grammar    one grammar for all users (default: each compiles its\n"
          "                          own, as the server's requests do: cold caches each)\n"
          "\n"
          "speculative decoding (then pp, tg and the ceilings are not measured): greedy\n"
          "generation of -n tokens after a prompt, plain and speculative in turn (-r\n"
          "repeats), the acceptance rate, whether the tokens are the same, and the cost of\n"
          "one pass of 1 to 17 tokens with every row's logits\n"
          "      --lookup            drafts by prompt lookup\n"
          "      --lookup-ngram N    the longest n-gram it matches (default 3)\n"
          "      --draft FILE        drafts by a draft model of the same vocabulary\n"
          "      --mtp               drafts by the model's multi-token-prediction layer\n"
          "      --draft-max N       tokens drafted per step, 1 to 32 (default 8 with\n"
          "                          --lookup, 4 with --draft, 3 with --mtp)\n"
          "      --text FILE         the prompt's text, in the model's chat template\n"
          "                          (default: a code-editing request)\n"
          "      --json              print one JSON object on stdout instead of the table\n"
          "  -q, --quiet             no progress on stderr\n"
          "  -h, --help              this help\n");
}

enum {
  OPT_PRICE = 2400,
  OPT_NO_CEILINGS,
  OPT_JSON,
  OPT_GRAMMAR,
  OPT_JSON_SCHEMA,
  OPT_USERS,
  OPT_TEMP_B,
  OPT_SHARED,
  OPT_LOOKUP_B,
  OPT_MTP_B,
  OPT_LOOKUP_NGRAM_B,
  OPT_DRAFT_B,
  OPT_DRAFT_MAX_B,
  OPT_TEXT,
  OPT_CEILINGS
};

/* --ceilings: the machine's ceilings alone, as a table or one JSON object
 * with the keys of the report's "ceilings". */
static int ceilings_only(int32_t n_threads, bool json) {
  if (n_threads <= 0) {
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    n_threads = n > 0 ? (int32_t)n : 1;
  }
  pa_bench_ceilings c;
  if (pa_bench_measure_ceilings(n_threads, 0, &c) != PASADA_OK) {
    fprintf(stderr, "pasada bench: %s\n", pasada_last_error());
    return 1;
  }
  if (json) {
    printf("{\"source\": \"cpu\", \"threads\": %d, \"read_gbs\": %.3f, \"read_buffer_bytes\": %llu, "
           "\"read_buffer_huge_bytes\": %llu, \"fma_gflops\": %.3f, \"fma_isa\": \"%s\", "
           "\"int8_gops\": %.3f, \"int8_isa\": \"%s\"}\n",
           c.n_threads, c.read_gbs, (unsigned long long)c.read_bytes,
           (unsigned long long)c.read_huge_bytes, c.fma_gflops, c.fma_isa, c.int8_gops, c.int8_isa);
  } else {
    printf("ceilings  %d thread%s: read %.1f GB/s (%.0f MiB buffer, %.0f MiB of it in 2 MB pages) | "
           "fp32 FMA %.1f GFLOP/s (%s) | int8 dot %.1f GOP/s (%s)\n",
           c.n_threads, c.n_threads > 1 ? "s" : "", c.read_gbs, (double)c.read_bytes / (1 << 20),
           (double)c.read_huge_bytes / (1 << 20), c.fma_gflops, c.fma_isa, c.int8_gops, c.int8_isa);
  }
  return 0;
}

/* --grammar / --json-schema: the GBNF text (malloc'd) or NULL after an error message. */
static char *grammar_text(const char *grammar, const char *schema) {
  char *text = NULL;
  size_t len = 0;
  if (cli_read_file(grammar ? grammar : schema, &text, &len)) return NULL;
  if (!schema) return text;
  cJSON *json = cJSON_ParseWithLength(text, len);
  free(text);
  if (!json) {
    fprintf(stderr, "pasada bench: %s: not valid JSON\n", schema);
    return NULL;
  }
  srv_error e = {0};
  char *gbnf = srv_json_schema_gbnf(json, &e);
  cJSON_Delete(json);
  if (!gbnf) fprintf(stderr, "pasada bench: %s: %s\n", schema, e.message);
  return gbnf;
}

/* "1,16" -> users (at most PA_BENCH_MAX_USERS counts in [1, 256]). */
static bool parse_users(const char *s, pa_bench_grammar_params *g) {
  g->n_users = 0;
  char buf[128];
  snprintf(buf, sizeof buf, "%s", s);
  for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    if (g->n_users == PA_BENCH_MAX_USERS || !cli_parse_i32(t, 1, 256, &g->users[g->n_users])) return false;
    g->n_users++;
  }
  return g->n_users > 0;
}

int cmd_bench(int argc, char **argv) {
  static const struct option opts[] = {CLI_SHAPE_LONG_OPTIONS,
                                       {"repeats", required_argument, 0, 'r'},
                                       {"price-per-hour", required_argument, 0, OPT_PRICE},
                                       {"no-ceilings", no_argument, 0, OPT_NO_CEILINGS},
                                       {"json", no_argument, 0, OPT_JSON},
                                       {"grammar", required_argument, 0, OPT_GRAMMAR},
                                       {"json-schema", required_argument, 0, OPT_JSON_SCHEMA},
                                       {"users", required_argument, 0, OPT_USERS},
                                       {"temp", required_argument, 0, OPT_TEMP_B},
                                       {"shared-grammar", no_argument, 0, OPT_SHARED},
                                       {"lookup", no_argument, 0, OPT_LOOKUP_B},
                                       {"mtp", no_argument, 0, OPT_MTP_B},
                                       {"lookup-ngram", required_argument, 0, OPT_LOOKUP_NGRAM_B},
                                       {"draft", required_argument, 0, OPT_DRAFT_B},
                                       {"draft-max", required_argument, 0, OPT_DRAFT_MAX_B},
                                       {"text", required_argument, 0, OPT_TEXT},
                                       {"ceilings", no_argument, 0, OPT_CEILINGS},
                                       {0, 0, 0, 0}};
  const char *cmd = "bench";
  pa_bench_params p;
  pa_bench_default_params(&p);
  bool json = false, only_ceilings = false;
  const char *grammar = NULL, *schema = NULL;
  pa_bench_grammar_params gp = {.users = {1, 16}, .n_users = 2, .temp = 0.8f};
  pa_bench_spec_params sp = {.lookup_ngram = 3};
  bool lookup = false, mtp = false;
  opterr = 0;
  const char *device = NULL;
  int32_t gpu_layers = 0;
  char backend[CLI_BACKEND_NAME_MAX];
  const cli_shape_options shape = {&p.n_prompt, &p.n_gen,   &p.n_threads, &p.n_batch, &p.seed,
                                   0,           &p.kv_type, &device,      &gpu_layers};
  optind = 0;
  int c;
  int others = 0; /* options --ceilings does not take */
  while ((c = getopt_long(argc, argv, ":m:p:n:t:r:b:qh", opts, NULL)) != -1) {
    others += c != 't' && c != 'q' && c != OPT_JSON && c != OPT_CEILINGS;
    switch (c) {
      case 'h': usage(stdout); return CLI_OK;
      case 'm': p.model_path = optarg; break;
      case 'q': p.progress = false; break;
      case OPT_NO_CEILINGS: p.skip_ceilings = true; break;
      case OPT_JSON: json = true; break;
      case OPT_CEILINGS: only_ceilings = true; break;
      case OPT_GRAMMAR: grammar = optarg; break;
      case OPT_JSON_SCHEMA: schema = optarg; break;
      case OPT_SHARED: gp.shared = true; break;
      case OPT_LOOKUP_B: lookup = true; break;
      case OPT_MTP_B: mtp = true; break;
      case OPT_DRAFT_B: sp.draft_path = optarg; break;
      case OPT_TEXT: sp.text_path = optarg; break;
      case OPT_LOOKUP_NGRAM_B:
        if (!cli_parse_i32(optarg, 1, 64, &sp.lookup_ngram))
          return cli_usage_line(cmd, "--lookup-ngram: '%s' is not a count in [1, 64]", optarg);
        break;
      case OPT_DRAFT_MAX_B:
        if (!cli_parse_i32(optarg, 1, PA_SPEC_DRAFT_MAX, &sp.draft_max))
          return cli_usage_line(cmd, "--draft-max: '%s' is not a count in [1, 32]", optarg);
        break;
      case OPT_USERS:
        if (!parse_users(optarg, &gp))
          return cli_usage_line(cmd, "--users: '%s' is not a list of user counts in [1, 256] (at most %d)", optarg,
                                PA_BENCH_MAX_USERS);
        break;
      case OPT_TEMP_B:
        if (!cli_parse_float(optarg, 0.0f, 100.0f, &gp.temp))
          return cli_usage_line(cmd, "--temp: '%s' is not a temperature in [0, 100]", optarg);
        break;
      case 'r':
        if (!cli_parse_i32(optarg, 1, 1000, &p.repeats))
          return cli_usage_line(cmd, "--repeats: '%s' is not a repeat count in [1, 1000]", optarg);
        break;
      case OPT_PRICE:
        if (!cli_parse_double(optarg, 0, 1e300, &p.price_per_hour))
          return cli_usage_line(cmd, "--price-per-hour: '%s' is not a price (a non-negative number)", optarg);
        break;
      default: {
        const int rc = cli_shape_option(cmd, c, argv, &shape);
        if (rc != CLI_OK) return rc;
      }
    }
  }
  if (optind < argc) return cli_usage_line(cmd, "unexpected argument '%s'", argv[optind]);
  if (only_ceilings) {
    if (others)
      return cli_usage_line(cmd, "--ceilings measures the machine alone: give only -t, --json, -q");
    return ceilings_only(p.n_threads, json);
  }
  if (!p.model_path) return cli_usage_line(cmd, "no model given: use -m MODEL");
  if (!cli_backend_name(device, gpu_layers, backend, sizeof backend, &p.backend))
    return cli_usage_line(cmd, CLI_GPU_LAYERS_NEEDS_GPU);
  if (grammar && schema) return cli_usage_line(cmd, "--grammar and --json-schema: give one of them");
  if ((sp.draft_path != NULL) + lookup + mtp > 1)
    return cli_usage_line(cmd, "--draft, --lookup and --mtp each choose how to draft: give one");
  sp.mode = sp.draft_path ? PA_SPEC_DRAFT
            : lookup      ? PA_SPEC_LOOKUP
            : mtp         ? PA_SPEC_MTP
                          : PA_SPEC_OFF;
  if (sp.mode != PA_SPEC_OFF && (grammar || schema))
    return cli_usage_line(cmd, "speculative decoding and --grammar are separate benchmarks: give one");
  if (sp.mode != PA_SPEC_OFF) {
    sp.model_path = p.model_path, sp.backend = p.backend, sp.kv_type = p.kv_type;
    sp.n_gen = p.n_gen > 0 ? p.n_gen : 128, sp.n_threads = p.n_threads, sp.repeats = p.repeats;
    sp.progress = p.progress;
    if (!sp.draft_max) sp.draft_max = pa_spec_default_draft_max((pa_spec_mode)sp.mode);
    pa_bench_spec_result sr;
    if (pa_bench_spec_run(&sp, &sr) != PASADA_OK) {
      fprintf(stderr, "pasada bench: %s\n", pasada_last_error());
      return 1;
    }
    pa_bench_spec_print(stdout, &sp, &sr, json);
    return 0;
  }
  if (grammar || schema) {
    char *gbnf = grammar_text(grammar, schema);
    if (!gbnf) return 1;
    gp.model_path = p.model_path, gp.backend = p.backend, gp.source = grammar ? grammar : schema;
    gp.gbnf = gbnf, gp.gbnf_len = strlen(gbnf);
    gp.n_gen = p.n_gen, gp.n_threads = p.n_threads, gp.seed = p.seed, gp.progress = p.progress;
    gp.kv_type = p.kv_type;
    pa_bench_grammar_result gr;
    int rc = pa_bench_grammar_run(&gp, &gr);
    free(gbnf);
    if (rc) {
      fprintf(stderr, "pasada bench: %s\n", pasada_last_error());
      return 1;
    }
    pa_bench_grammar_print(stdout, &gp, &gr, json);
    return 0;
  }
  if (p.n_prompt == 0 && p.n_gen == 0) return cli_usage_line(cmd, "nothing to measure: -p and -n are both 0");

  pa_bench_result r;
  int rc = pa_bench_run(&p, &r);
  if (rc) {
    fprintf(stderr, "pasada bench: %s\n", pasada_last_error());
    return 1;
  }
  if (json) {
    if (pa_bench_print_json(stdout, &p, &r)) {
      fprintf(stderr, "pasada bench: out of memory writing the JSON report\n");
      return 1;
    }
  } else {
    pa_bench_print_table(stdout, &p, &r);
  }
  return 0;
}
