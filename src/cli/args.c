/* args.c: the CLI's plumbing: one-line error and usage messages, strict
 * number parsing, reading prompts from files and streams, growable arrays,
 * the generation options `run` and `chat` share, and the --device and
 * --gpu-layers syntax of every command that runs a model, with the backend
 * name the two make. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "base/base.h"
#include "format/hf.h"

/* ---- messages ---- */

/* fmt's message in buf, on one line (newlines and returns made spaces). */
static void format_line(char *buf, size_t n, const char *fmt, va_list ap) {
  vsnprintf(buf, n, fmt, ap);
  for (char *p = buf; *p; p++)
    if (*p == '\n' || *p == '\r') *p = ' ';
}

int cli_fail(const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  format_line(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fflush(stdout); /* streamed text first, so the error is not in the middle of it */
  fprintf(stderr, "pasada: error: %s\n", msg);
  return CLI_RUNTIME_ERROR;
}

int cli_usage(const char *cmd, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  format_line(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (cmd) {
    fprintf(stderr, "pasada %s: %s\n", cmd, msg);
    fprintf(stderr, "try 'pasada %s --help'\n", cmd);
  } else {
    fprintf(stderr, "pasada: %s\n", msg);
    fprintf(stderr, "try 'pasada --help'\n");
  }
  return CLI_USAGE_ERROR;
}

int cli_usage_line(const char *cmd, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  format_line(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "pasada %s: %s (see pasada %s --help)\n", cmd, msg, cmd);
  return CLI_USAGE_ERROR;
}

/* What getopt_long rejected at argv[optind - 1], in words. */
static void getopt_problem(int opt, char **argv, char *buf, size_t n) {
  const char *arg = optind > 0 ? argv[optind - 1] : "?";
  if (opt == ':')
    snprintf(buf, n, "option '%s' needs a value", arg);
  else if (optopt != 0 && strncmp(arg, "--", 2) == 0 && strchr(arg, '=')) /* a switch given a value */
    snprintf(buf, n, "option '%.*s' takes no value", (int)(strchr(arg, '=') - arg), arg);
  else if (optopt > 0 && optopt < 256 && strncmp(arg, "--", 2) != 0) /* a short option */
    snprintf(buf, n, "unknown option '-%c'", optopt);
  else
    snprintf(buf, n, "unknown option '%s'", arg);
}

int cli_getopt_error(const char *cmd, int opt, char **argv) {
  char msg[512];
  getopt_problem(opt, argv, msg, sizeof msg);
  return cli_usage(cmd, "%s", msg);
}

int cli_getopt_error_line(const char *cmd, int opt, char **argv) {
  char msg[512];
  getopt_problem(opt, argv, msg, sizeof msg);
  return cli_usage_line(cmd, "%s", msg);
}

int cli_shape_option(const char *cmd, int opt, char **argv, const cli_shape_options *o) {
  const char *arg = optarg;
  switch (opt) {
    case 'p':
      if (cli_parse_i32(arg, o->min_prompt, 1 << 20, o->n_prompt)) return CLI_OK;
      return cli_usage_line(cmd, "--prompt: '%s' is not a token count in [%d, 1048576]", arg, o->min_prompt);
    case 'n':
      if (cli_parse_i32(arg, 0, 1 << 20, o->n_gen)) return CLI_OK;
      return cli_usage_line(cmd, "--gen: '%s' is not a token count in [0, 1048576]", arg);
    case 't':
      if (cli_parse_i32(arg, 1, 256, o->n_threads)) return CLI_OK;
      return cli_usage_line(cmd, "--threads: '%s' is not a thread count in [1, 256]", arg);
    case 'b':
      if (cli_parse_i32(arg, 1, 65536, o->n_batch)) return CLI_OK;
      return cli_usage_line(cmd, "--batch: '%s' is not a batch size in [1, 65536]", arg);
    case OPT_SEED:
      if (cli_parse_u64(arg, o->seed)) return CLI_OK;
      return cli_usage_line(cmd, "--seed: '%s' is not a seed (an integer in [0, 2^64))", arg);
    case OPT_KV_TYPE:
      if (cli_parse_kv_type(arg, o->kv_type)) return CLI_OK;
      return cli_usage_line(cmd, "--kv-type: '%s' is not f16, f32 or q8", arg);
    case OPT_DEVICE:
      if (!cli_parse_device(arg)) return cli_usage_line(cmd, CLI_DEVICE_ERROR, arg);
      *o->device = arg;
      return CLI_OK;
    case OPT_GPU_LAYERS:
      if (!cli_parse_gpu_layers(arg, o->gpu_layers)) return cli_usage_line(cmd, CLI_GPU_LAYERS_ERROR, arg);
      return CLI_OK;
    case OPT_QUANTIZE:
      if (hf_set_load_type(arg) != PASADA_OK) return cli_usage_line(cmd, "--quantize: %s", pa_last_error());
      return CLI_OK;
    default: return cli_getopt_error_line(cmd, opt, argv);
  }
}

bool cli_parse_kv_type(const char *s, pasada_kv_type *out) {
  return pasada_kv_type_from_name(s, out) == PASADA_OK;
}

bool cli_parse_device(const char *s) {
  if (!s) return false;
  if (!strcmp(s, "cpu") || !strcmp(s, "vulkan")) return true;
  if (strncmp(s, "vulkan:", 7)) return false;
  const char *n = s + 7;
  if (!*n || strlen(n) > 9) return false; /* a device number fits an int */
  for (; *n; n++)
    if (*n < '0' || *n > '9') return false;
  return true;
}

bool cli_parse_gpu_layers(const char *s, int32_t *out) {
  if (!s || !*s || strlen(s) > 9) return false; /* fits an int before the range check */
  int32_t v = 0;
  for (const char *p = s; *p; p++) {
    if (*p < '0' || *p > '9') return false;
    v = v * 10 + (*p - '0');
  }
  if (v < 1 || v > CLI_GPU_LAYERS_MAX) return false;
  *out = v;
  return true;
}

/* A Vulkan device as --device names it: vulkan or vulkan:N. */
static bool is_gpu_device(const char *device) {
  return device && cli_parse_device(device) && !strncmp(device, "vulkan", 6);
}

bool cli_backend_name(const char *device, int32_t gpu_layers, char *buf, size_t cap, const char **name) {
  if (gpu_layers <= 0) {
    *name = device;
    return true;
  }
  if (!is_gpu_device(device)) return false;
  int n = snprintf(buf, cap, "%s/%d", device, (int)gpu_layers);
  if (n < 0 || (size_t)n >= cap) return false; /* cannot happen with CLI_BACKEND_NAME_MAX */
  *name = buf;
  return true;
}

/* ---- numbers ---- */

bool cli_parse_i32(const char *s, int32_t min, int32_t max, int32_t *out) {
  if (!s || !*s) return false;
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || *end || v < min || v > max) return false;
  *out = (int32_t)v;
  return true;
}

bool cli_parse_u64(const char *s, uint64_t *out) {
  if (!s || !*s || *s == '-' || *s == '+') return false;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || *end) return false;
  *out = (uint64_t)v;
  return true;
}

bool cli_parse_double(const char *s, double min, double max, double *out) {
  if (!s || !*s) return false;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || *end || !isfinite(v) || v < min || v > max) return false;
  *out = v;
  return true;
}

bool cli_parse_float(const char *s, float min, float max, float *out) {
  if (!s || !*s) return false;
  char *end;
  errno = 0;
  float v = strtof(s, &end);
  if (errno || *end || !isfinite(v) || v < min || v > max) return false;
  *out = v;
  return true;
}

/* ---- reading prompts ---- */

int cli_read_stream(FILE *f, const char *name, char **out, size_t *len) {
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  if (!buf) return cli_fail("out of memory reading %s", name);
  for (;;) {
    if (cap - n < 4096) {
      char *b = cap > SIZE_MAX / 2 ? NULL : realloc(buf, cap * 2);
      if (!b) {
        free(buf);
        return cli_fail("out of memory reading %s", name);
      }
      buf = b;
      cap *= 2;
    }
    size_t got = fread(buf + n, 1, cap - n - 1, f);
    n += got;
    if (got == 0) break;
  }
  if (ferror(f)) {
    free(buf);
    return cli_fail("%s: read error: %s", name, strerror(errno));
  }
  buf[n] = '\0';
  *out = buf;
  *len = n;
  return CLI_OK;
}

int cli_read_file(const char *path, char **out, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return cli_fail("%s: %s", path, strerror(errno));
  int rc = cli_read_stream(f, path, out, len);
  fclose(f);
  return rc;
}

int cli_read_input(const char *prompt, const char *file, char **owned, const char **text, size_t *len) {
  *owned = NULL;
  if (file) {
    if (cli_read_file(file, owned, len)) return CLI_RUNTIME_ERROR;
  } else if (!prompt) {
    if (cli_read_stream(stdin, "stdin", owned, len)) return CLI_RUNTIME_ERROR;
  }
  *text = *owned ? *owned : prompt;
  if (!*owned) *len = strlen(prompt);
  return CLI_OK;
}

int cli_check_input(const char *cmd, const char *prompt, const char *file, const char *what,
                    const char *on_stdin) {
  if (prompt && file) return cli_usage(cmd, "-p and -f both give the %s: use one of them", what);
  if (!prompt && !file && isatty(STDIN_FILENO))
    return cli_usage(cmd, "no %s: give -p TEXT, -f FILE or %s on stdin", what, on_stdin);
  return CLI_OK;
}

/* ---- growable arrays ---- */

static bool grow(void **p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return true;
  size_t c = *cap ? *cap : 64;
  while (c < need) {
    if (c > SIZE_MAX / 2 / elem) return false;
    c *= 2;
  }
  void *q = realloc(*p, c * elem);
  if (!q) return false;
  *p = q;
  *cap = c;
  return true;
}

bool cli_tokens_push(cli_tokens *t, const int32_t *ids, size_t n) {
  if (!grow((void **)&t->v, &t->cap, t->n + n, sizeof *t->v)) return false;
  if (n) memcpy(t->v + t->n, ids, n * sizeof *ids);
  t->n += n;
  return true;
}

void cli_tokens_free(cli_tokens *t) {
  free(t->v);
  *t = (cli_tokens){0};
}

bool cli_text_append(cli_text *t, const char *s, size_t n) {
  if (!grow((void **)&t->s, &t->cap, t->n + n + 1, 1)) return false;
  if (n) memcpy(t->s + t->n, s, n);
  t->n += n;
  t->s[t->n] = '\0';
  return true;
}

void cli_text_free(cli_text *t) {
  free(t->s);
  *t = (cli_text){0};
}

/* ---- generation options ---- */

const char CLI_GEN_HELP[] =
    "model and context:\n"
    "  -m, --model FILE          GGUF model or Hugging Face folder to load (required)\n"
    "  -t, --threads N           worker threads (default 0: all cores)\n"
    "  -c, --ctx-size N          context length in tokens (default 0: the model's\n"
    "                            training context, at most 4096)\n"
    "  --kv-type T               the KV cache's values: f16 (default: half the memory\n"
    "                            and the bytes attention reads), f32, or q8 (8-bit,\n"
    "                            a scale per position and head: about half of f16)\n"
    "  --device DEV              run on cpu (the default), vulkan (the first GPU) or\n"
    "                            vulkan:N (device N of `pasada devices`)\n"
    "  --gpu-layers N            with a GPU --device: run the first N layers there,\n"
    "                            the rest on the CPU (default: all layers on the GPU)\n"
    "  --quantize T              a Hugging Face folder (-m DIR): quantize its matrices\n"
    "                            to T at load (Q8_0, Q4_K, Q6_K, ...; default: as stored)\n"
    "sampling:\n"
    "  --temp T                  temperature (default 0.8; 0: greedy, always the most\n"
    "                            likely token)\n"
    "  --top-k K                 keep the K most likely tokens (default 40; 0: off)\n"
    "  --top-p P                 keep the smallest set holding probability P\n"
    "                            (default 0.95; 1: off)\n"
    "  --min-p P                 drop tokens less likely than P times the most likely\n"
    "                            (default 0.05; 0: off)\n"
    "  --repeat-penalty R        divide positive logits (multiply negative ones) of the\n"
    "                            tokens in the last --repeat-last-n by R (default 1: off)\n"
    "  --repeat-last-n N         tokens the penalties look back on (default 64; 0: off;\n"
    "                            -1: all)\n"
    "  --presence-penalty P      subtract P from the logit of every token seen there\n"
    "                            (default 0)\n"
    "  --frequency-penalty F     subtract F times its count there (default 0)\n"
    "  --seed S                  seed of the sampler: the same seed, model and options\n"
    "                            give the same text (default: random; -1: random)\n"
    "speculative decoding (the same output, fewer passes over the weights):\n"
    "  --lookup                  draft tokens by prompt lookup: where the last tokens\n"
    "                            occurred before in the prompt or the output, propose\n"
    "                            what followed them (code editing, summaries, quotes)\n"
    "  --lookup-ngram N          longest n-gram --lookup matches (default 3; it falls\n"
    "                            back to shorter ones down to 1)\n"
    "  --draft FILE              draft tokens with a smaller GGUF model of the same\n"
    "                            vocabulary\n"
    "  --mtp                     draft tokens with the model's own multi-token-\n"
    "                            prediction layer (Qwen3.5 checkpoints ship one)\n"
    "  --draft-max N             tokens drafted per step, 1 to 32 (default 8 with\n"
    "                            --lookup, 4 with --draft, 3 with --mtp)\n"
    "output:\n"
    "  --no-stats                do not print the statistics line(s) on stderr\n"
    "  --verbose                 print the model, context and sampler settings on stderr\n"
    "  -h, --help                show this help\n";

void cli_gen_defaults(cli_gen_options *o, int32_t n_predict) {
  *o = (cli_gen_options){0};
  o->sampling = pasada_sampler_default_params();
  o->n_predict = n_predict;
}

int cli_gen_option(const char *cmd, int opt, const char *arg, cli_gen_options *o) {
  pasada_sampler_params *sp = &o->sampling;
  switch (opt) {
    case 'm':
      o->model_path = arg;
      return 1;
    case 'n':
      if (!cli_parse_i32(arg, -1, INT32_MAX, &o->n_predict))
        return cli_usage(cmd, "-n wants a token count (-1: no limit), not '%s'", arg);
      return 1;
    case 't':
      if (!cli_parse_i32(arg, 0, 1024, &o->n_threads))
        return cli_usage(cmd, "-t wants a thread count in [0, 1024], not '%s'", arg);
      return 1;
    case 'c':
      if (!cli_parse_i32(arg, 0, 1 << 22, &o->n_ctx))
        return cli_usage(cmd, "-c wants a context length in [0, 4194304], not '%s'", arg);
      return 1;
    case OPT_KV_TYPE:
      if (!cli_parse_kv_type(arg, &o->kv_type)) return cli_usage(cmd, "--kv-type wants f16, f32 or q8, not '%s'", arg);
      return 1;
    case OPT_DEVICE:
      if (!cli_parse_device(arg)) return cli_usage(cmd, CLI_DEVICE_ERROR, arg);
      o->device = arg;
      return 1;
    case OPT_GPU_LAYERS:
      if (!cli_parse_gpu_layers(arg, &o->gpu_layers)) return cli_usage(cmd, CLI_GPU_LAYERS_ERROR, arg);
      return 1;
    case OPT_QUANTIZE:
      if (hf_set_load_type(arg) != PASADA_OK) return cli_usage(cmd, "--quantize: %s", pa_last_error());
      return 1;
    case OPT_TEMP:
      if (!cli_parse_float(arg, 0.0f, 1000.0f, &sp->temp))
        return cli_usage(cmd, "--temp wants a number >= 0, not '%s'", arg);
      return 1;
    case OPT_TOP_K:
      if (!cli_parse_i32(arg, 0, INT32_MAX, &sp->top_k))
        return cli_usage(cmd, "--top-k wants a count >= 0, not '%s'", arg);
      return 1;
    case OPT_TOP_P:
      if (!cli_parse_float(arg, 0.0f, 1.0f, &sp->top_p))
        return cli_usage(cmd, "--top-p wants a number in [0, 1], not '%s'", arg);
      return 1;
    case OPT_MIN_P:
      if (!cli_parse_float(arg, 0.0f, 1.0f, &sp->min_p))
        return cli_usage(cmd, "--min-p wants a number in [0, 1], not '%s'", arg);
      return 1;
    case OPT_REPEAT_PENALTY:
      if (!cli_parse_float(arg, 1e-6f, 1000.0f, &sp->repeat_penalty))
        return cli_usage(cmd, "--repeat-penalty wants a number > 0, not '%s'", arg);
      return 1;
    case OPT_REPEAT_LAST_N:
      if (!cli_parse_i32(arg, -1, INT32_MAX, &sp->repeat_last_n))
        return cli_usage(cmd, "--repeat-last-n wants a count >= -1, not '%s'", arg);
      return 1;
    case OPT_PRESENCE_PENALTY:
      if (!cli_parse_float(arg, -1000.0f, 1000.0f, &sp->presence_penalty))
        return cli_usage(cmd, "--presence-penalty wants a number, not '%s'", arg);
      return 1;
    case OPT_FREQUENCY_PENALTY:
      if (!cli_parse_float(arg, -1000.0f, 1000.0f, &sp->frequency_penalty))
        return cli_usage(cmd, "--frequency-penalty wants a number, not '%s'", arg);
      return 1;
    case OPT_SEED:
      if (!strcmp(arg, "-1"))
        sp->seed = PASADA_SEED_RANDOM;
      else if (!cli_parse_u64(arg, &sp->seed))
        return cli_usage(cmd, "--seed wants a number in [0, 2^64) or -1, not '%s'", arg);
      return 1;
    case OPT_CHAT_TEMPLATE: {
      pasada_chat_template t;
      if (pasada_chat_from_name(arg, &t) != PASADA_OK)
        return cli_usage(cmd, "unknown chat template '%s' (known: chatml, gemma, llama3)", arg);
      if (o->chat_template_file)
        return cli_usage(cmd, "--chat-template and --chat-template-file both name the template: use one");
      o->chat_template = arg;
      return 1;
    }
    case OPT_CHAT_TEMPLATE_FILE:
      if (o->chat_template)
        return cli_usage(cmd, "--chat-template and --chat-template-file both name the template: use one");
      o->chat_template_file = arg;
      return 1;
    case OPT_SYSTEM:
      o->system = arg;
      return 1;
    case OPT_DRAFT:
      o->draft_path = arg;
      return 1;
    case OPT_DRAFT_MAX:
      if (!cli_parse_i32(arg, 1, 32, &o->draft_max))
        return cli_usage(cmd, "--draft-max wants a count from 1 to 32, not '%s'", arg);
      return 1;
    case OPT_LOOKUP:
      o->lookup = true;
      return 1;
    case OPT_MTP:
      o->mtp = true;
      return 1;
    case OPT_LOOKUP_NGRAM:
      if (!cli_parse_i32(arg, 1, 64, &o->lookup_ngram))
        return cli_usage(cmd, "--lookup-ngram wants a count from 1 to 64, not '%s'", arg);
      return 1;
    case OPT_NO_STATS:
      o->no_stats = true;
      return 1;
    case OPT_VERBOSE:
      o->verbose = true;
      return 1;
    default:
      return 0;
  }
}

int cli_gen_backend(const char *cmd, cli_gen_options *o) {
  if (!cli_backend_name(o->device, o->gpu_layers, o->backend_name, sizeof o->backend_name, &o->backend))
    return cli_usage(cmd, CLI_GPU_LAYERS_NEEDS_GPU);
  return CLI_OK;
}
