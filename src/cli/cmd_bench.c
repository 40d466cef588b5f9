/* cmd_bench.c: argument parsing for `pasada bench`; the benchmark itself is
 * src/tools/bench.c. Usage errors exit 2, runtime failures 1, each with one
 * line on stderr. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmd_bench.h"
#include "pasada.h"
#include "tools/bench.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: pasada bench -m MODEL [options]\n"
          "\n"
          "Measures prompt processing (pp: a seeded random prompt decoded in batches) and\n"
          "generation (tg: greedy, one token per decode step) in tokens per second over\n"
          "repeats (min / median / max), next to this machine's ceilings measured first on\n"
          "the same threads: read bandwidth (a buffer far larger than the caches), fp32 FMA\n"
          "peak and int8-dot peak. For tg: bytes read per token (weights + KV) and the\n"
          "achieved GB/s as a share of the read bandwidth; for pp: achieved GFLOP/s as a\n"
          "share of the FMA peak (and of the int8 peak for quantized weights). Progress\n"
          "goes to stderr.\n"
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
          "      --no-ceilings       skip the bandwidth and peak probes\n"
          "      --json              print one JSON object on stdout instead of the table\n"
          "  -q, --quiet             no progress on stderr\n"
          "  -h, --help              this help\n");
}

static int bad(const char *fmt, const char *a, const char *b) {
  fprintf(stderr, "pasada bench: ");
  fprintf(stderr, fmt, a, b);
  fprintf(stderr, " (see pasada bench --help)\n");
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

int cmd_bench(int argc, char **argv) {
  pa_bench_params p;
  pa_bench_default_params(&p);
  bool json = false;
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
    const char *opts[][2] = {{"-m", "--model"},   {"-p", "--prompt"}, {"-n", "--gen"},
                             {"-t", "--threads"}, {"-r", "--repeats"}, {"-b", "--batch"},
                             {"", "--seed"},      {"", "--price-per-hour"}};
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
      if (!parse_int(val, 0, 1 << 20, &v)) return bad("%s: '%s' is not a token count in [0, 1048576]", name, val);
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
      if (!parse_int(val, 1, 1000, &v)) return bad("%s: '%s' is not a repeat count in [1, 1000]", name, val);
      p.repeats = (int32_t)v;
      break;
    case 5:
      if (!parse_int(val, 1, 65536, &v)) return bad("%s: '%s' is not a batch size in [1, 65536]", name, val);
      p.n_batch = (int32_t)v;
      break;
    case 6: {
      char *end;
      errno = 0;
      unsigned long long s = strtoull(val, &end, 10);
      if (errno || *end || !*val || val[0] == '-') return bad("%s: '%s' is not a seed", name, val);
      p.seed = (uint64_t)s;
      break;
    }
    case 7: {
      char *end;
      errno = 0;
      double d = strtod(val, &end);
      if (errno || *end || !*val || !isfinite(d) || d < 0)
        return bad("%s: '%s' is not a price (a non-negative number)", name, val);
      p.price_per_hour = d;
      break;
    }
    }
  }
  if (!p.model_path) return bad("no model given: use -m MODEL%s%s", "", "");
  if (p.n_prompt == 0 && p.n_gen == 0) return bad("nothing to measure: -p and -n are both 0%s%s", "", "");

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
