/* cli.h: what the sub-commands of the `pasada` command line share: exit
 * codes and their one-line messages, argument helpers, the generation
 * options of `run` and `chat`, and a session (model, context, sampler,
 * streaming detokenizer) with prefill and streamed generation. The CLI uses
 * only the public API (pasada.h). */
#ifndef PASADA_CLI_H
#define PASADA_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pasada.h"

#define PASADA_VERSION "0.1.0"

/* Exit codes. */
enum { CLI_OK = 0, CLI_RUNTIME_ERROR = 1, CLI_USAGE_ERROR = 2 };

/* Bytes that hold any backend name cli_backend_name composes ("vulkan:N/L"
 * with N of at most 9 digits, L of at most 5). */
#define CLI_BACKEND_NAME_MAX 32

/* Prints "pasada: error: <message>" on one line of stderr (newlines in the
 * message become spaces) and returns CLI_RUNTIME_ERROR. */
int cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints "pasada CMD: <message>" and "try 'pasada CMD --help'" on stderr and
 * returns CLI_USAGE_ERROR. */
int cli_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same on one line: "pasada CMD: <message> (see pasada CMD --help)"
 * (bench and profile: their usage errors are one line). */
int cli_usage_line(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The usage error for what getopt_long rejected at argv[optind - 1]
 * (cli_usage's two lines, or cli_usage_line's one). */
int cli_getopt_error(const char *cmd, int opt, char **argv);
int cli_getopt_error_line(const char *cmd, int opt, char **argv);

/* Strict number parsing: the whole string, in range. */
bool cli_parse_i32(const char *s, int32_t min, int32_t max, int32_t *out);
bool cli_parse_u64(const char *s, uint64_t *out);
bool cli_parse_float(const char *s, float min, float max, float *out);
bool cli_parse_double(const char *s, double min, double max, double *out);

/* Reads a whole file (or stream) into a malloc'd NUL-terminated buffer;
 * returns CLI_OK or prints the error and returns CLI_RUNTIME_ERROR. */
/* The run-shape options `bench` and `profile` share: -p/--prompt,
 * -n/--gen, -t/--threads, -b/--batch, --seed (OPT_SEED), --kv-type
 * (OPT_KV_TYPE), --device (OPT_DEVICE) and --gpu-layers (OPT_GPU_LAYERS;
 * cli_backend_name makes the backend name of the last two), parsed into the
 * fields the pointers name (min_prompt: the least -p takes); for the
 * default branch of their getopt switch. Returns CLI_OK when `opt` is one
 * of them with a good value, otherwise the usage error (exit status, after
 * printing) for a bad value or an option getopt rejected. */
typedef struct {
  int32_t *n_prompt, *n_gen, *n_threads, *n_batch;
  uint64_t *seed;
  int32_t min_prompt;
  pasada_kv_type *kv_type;
  const char **device; /* --device (OPT_DEVICE) */
  int32_t *gpu_layers; /* --gpu-layers (OPT_GPU_LAYERS) */
} cli_shape_options;
int cli_shape_option(const char *cmd, int opt, char **argv, const cli_shape_options *o);
/* Their long options, with -m/--model, -q/--quiet and -h/--help. */
#define CLI_SHAPE_LONG_OPTIONS                                                              \
  {"model", required_argument, 0, 'm'}, {"prompt", required_argument, 0, 'p'},              \
      {"gen", required_argument, 0, 'n'}, {"threads", required_argument, 0, 't'},           \
      {"batch", required_argument, 0, 'b'}, {"seed", required_argument, 0, OPT_SEED},       \
      {"kv-type", required_argument, 0, OPT_KV_TYPE},                                       \
      {"device", required_argument, 0, OPT_DEVICE},                                         \
      {"gpu-layers", required_argument, 0, OPT_GPU_LAYERS},                                 \
      {"quantize", required_argument, 0, OPT_QUANTIZE},                                     \
      {"quiet", no_argument, 0, 'q'}, {"help", no_argument, 0, 'h'}

int cli_read_file(const char *path, char **out, size_t *len);
int cli_read_stream(FILE *f, const char *name, char **out, size_t *len);
/* A command's input text: -p's `prompt`, else the file `file` (-f), else
 * all of stdin; *owned is what to free (NULL for the prompt), *text and
 * *len the bytes. CLI_RUNTIME_ERROR (reported) when a read fails. */
int cli_read_input(const char *prompt, const char *file, char **owned, const char **text, size_t *len);
/* The usage checks before cli_read_input: -p and -f not both, and some input
 * when stdin is a terminal. `what` names the input in the messages ("prompt",
 * "text"), `on_stdin` what stdin would hold ("text", "lines"). CLI_OK, or
 * CLI_USAGE_ERROR (reported). */
int cli_check_input(const char *cmd, const char *prompt, const char *file, const char *what,
                    const char *on_stdin);

/* ---- growable arrays ---- */
typedef struct {
  int32_t *v;
  size_t n, cap;
} cli_tokens;
typedef struct {
  char *s; /* NUL-terminated */
  size_t n, cap;
} cli_text;
bool cli_tokens_push(cli_tokens *t, const int32_t *ids, size_t n);
void cli_tokens_free(cli_tokens *t);
bool cli_text_append(cli_text *t, const char *s, size_t n);
void cli_text_free(cli_text *t);

/* ---- generation options (run, chat) ---- */
typedef struct {
  const char *model_path;
  pasada_sampler_params sampling;
  int32_t n_predict;         /* -1: until end of generation or a full context */
  int32_t n_threads;         /* 0: all cores */
  int32_t n_ctx;             /* 0: the model's training context, at most 4096 */
  const char *chat_template; /* a built-in template's name; NULL: the model's own */
  const char *chat_template_file; /* --chat-template-file: a Jinja template */
  const char *system;
  bool no_stats, verbose;
  pasada_kv_type kv_type;    /* --kv-type */
  const char *device;        /* --device (NULL: the model's default, cpu) */
  int32_t gpu_layers;        /* --gpu-layers (0: not given, every layer on the device) */
  /* The model's backend (NULL: the default, cpu), from device and gpu_layers
   * by cli_gen_backend; backend_name holds it when it is composed. */
  const char *backend;
  char backend_name[CLI_BACKEND_NAME_MAX];
  /* speculative decoding: --draft MODEL, --lookup (prompt lookup over
   * the text so far with n-grams of --lookup-ngram tokens down to 1) or
   * --mtp (the model's multi-token-prediction layer), each drafting up to
   * --draft-max tokens a step (0: the mode's default) */
  const char *draft_path;
  bool lookup, mtp;
  int32_t draft_max, lookup_ngram;
} cli_gen_options;

/* getopt_long ids of the options run and chat share (beyond single letters). */
enum {
  OPT_TEMP = 1000,
  OPT_TOP_K,
  OPT_TOP_P,
  OPT_MIN_P,
  OPT_REPEAT_PENALTY,
  OPT_REPEAT_LAST_N,
  OPT_PRESENCE_PENALTY,
  OPT_FREQUENCY_PENALTY,
  OPT_SEED,
  OPT_CHAT,
  OPT_CHAT_TEMPLATE,
  OPT_SYSTEM,
  OPT_NO_STATS,
  OPT_VERBOSE,
  OPT_RAW,
  OPT_VOCAB_ONLY,
  OPT_KV_TYPE,
  OPT_DEVICE,
  OPT_GPU_LAYERS,
  OPT_CHAT_TEMPLATE_FILE,
  OPT_DRAFT,
  OPT_DRAFT_MAX,
  OPT_LOOKUP,
  OPT_MTP,
  OPT_LOOKUP_NGRAM,
  OPT_QUANTIZE,
};
/* The --kv-type option's help line and parser (run, chat, serve, bench,
 * profile, perplexity, kld): "f16", "f32" or "q8"; false for anything else. */
#define CLI_KV_TYPE_HELP                                                                 \
  "      --kv-type T         the KV cache's values: f16 (default: half the memory and\n" \
  "                          the bytes attention reads), f32, or q8 (8-bit, a scale\n"  \
  "                          per position and head: about half of f16)\n"
bool cli_parse_kv_type(const char *s, pasada_kv_type *out);
/* --quantize TYPE (run, chat, bench, profile; serve, verify, perplexity and kld
 * spell it out in their own layouts): a Hugging Face folder's
 * matrices quantized to TYPE at load (hf_set_load_type); its help line. */
#define CLI_QUANTIZE_HELP                                                                  \
  "      --quantize T        a Hugging Face folder (-m DIR): quantize its matrices to T\n" \
  "                          at load (Q8_0, Q4_K, Q6_K, ...; default: as stored)\n"

/* --device DEV (run, chat, serve, bench, profile, verify, perplexity, kld):
 * "cpu", "vulkan" (the first GPU) or "vulkan:N" (device N of `pasada
 * devices`, N in decimal digits). These are backend names as
 * pasada_model_params.backend takes them, so the value is passed on as it
 * is; whether the device exists is the backend's to say when the model
 * loads. cli_parse_device says whether s has that form; CLI_DEVICE_ERROR is
 * the usage message for a value that has not (one %s: the value). */
bool cli_parse_device(const char *s);
#define CLI_DEVICE_ERROR "--device: expected cpu, vulkan or vulkan:N, got '%s'"
/* The help line of bench and profile (their options' layout). */
#define CLI_DEVICE_HELP                                                                  \
  "      --device DEV        run on cpu (the default), vulkan (the first GPU) or\n"     \
  "                          vulkan:N (device N of `pasada devices`)\n"

/* --gpu-layers N (every command with --device): with a GPU device, the
 * first N layers of the model run there and the embedding, the other layers
 * and the output on the CPU, so a model larger than the GPU's memory still
 * runs. N is decimal digits, 1 to CLI_GPU_LAYERS_MAX; whether the model has
 * that many layers is the engine's to say when it loads. cli_parse_gpu_layers
 * says whether s is such an N (into *out); CLI_GPU_LAYERS_ERROR is the usage
 * message for one that is not (one %s: the value). */
#define CLI_GPU_LAYERS_MAX 99999
bool cli_parse_gpu_layers(const char *s, int32_t *out);
#define CLI_GPU_LAYERS_ERROR "--gpu-layers: expected a layer count from 1 to 99999, got '%s'"
#define CLI_GPU_LAYERS_NEEDS_GPU "--gpu-layers needs a GPU: --device vulkan or vulkan:N"
/* The help lines of bench and profile (their options' layout). */
#define CLI_GPU_LAYERS_HELP                                                              \
  "      --gpu-layers N      with a GPU --device: run the first N layers there,\n"   \
  "                          the rest on the CPU (default: all layers on the GPU)\n"

/* The backend name of --device DEV and --gpu-layers N, as
 * pasada_model_params.backend takes it; every command composes it here.
 * Without N (gpu_layers 0) it is DEV itself (NULL when --device was not
 * given: the default, cpu); with N it is "DEV/N" (e.g. "vulkan:0/12"),
 * written into buf (cap bytes; CLI_BACKEND_NAME_MAX hold any). Sets *name
 * and returns true, or returns false when N is given and DEV is not a GPU
 * device (absent, cpu, or another backend's name): CLI_GPU_LAYERS_NEEDS_GPU
 * is the usage message. */
bool cli_backend_name(const char *device, int32_t gpu_layers, char *buf, size_t cap, const char **name);

/* clang-format off */
#define CLI_GEN_LONG_OPTIONS                                          \
  {"model", required_argument, 0, 'm'},                               \
  {"n-predict", required_argument, 0, 'n'},                           \
  {"threads", required_argument, 0, 't'},                             \
  {"ctx-size", required_argument, 0, 'c'},                            \
  {"kv-type", required_argument, 0, OPT_KV_TYPE},                     \
  {"device", required_argument, 0, OPT_DEVICE},                       \
  {"gpu-layers", required_argument, 0, OPT_GPU_LAYERS},               \
  {"quantize", required_argument, 0, OPT_QUANTIZE},                   \
  {"temp", required_argument, 0, OPT_TEMP},                           \
  {"top-k", required_argument, 0, OPT_TOP_K},                         \
  {"top-p", required_argument, 0, OPT_TOP_P},                         \
  {"min-p", required_argument, 0, OPT_MIN_P},                         \
  {"repeat-penalty", required_argument, 0, OPT_REPEAT_PENALTY},       \
  {"repeat-last-n", required_argument, 0, OPT_REPEAT_LAST_N},         \
  {"presence-penalty", required_argument, 0, OPT_PRESENCE_PENALTY},   \
  {"frequency-penalty", required_argument, 0, OPT_FREQUENCY_PENALTY}, \
  {"seed", required_argument, 0, OPT_SEED},                           \
  {"chat-template", required_argument, 0, OPT_CHAT_TEMPLATE},         \
  {"chat-template-file", required_argument, 0, OPT_CHAT_TEMPLATE_FILE}, \
  {"system", required_argument, 0, OPT_SYSTEM},                       \
  {"no-stats", no_argument, 0, OPT_NO_STATS},                         \
  {"verbose", no_argument, 0, OPT_VERBOSE},                           \
  {"draft", required_argument, 0, OPT_DRAFT},                         \
  {"draft-max", required_argument, 0, OPT_DRAFT_MAX},                 \
  {"lookup", no_argument, 0, OPT_LOOKUP},                             \
  {"mtp", no_argument, 0, OPT_MTP},                                   \
  {"lookup-ngram", required_argument, 0, OPT_LOOKUP_NGRAM},           \
  {"help", no_argument, 0, 'h'}
/* clang-format on */

/* The --help text of the shared options. */
extern const char CLI_GEN_HELP[];

void cli_gen_defaults(cli_gen_options *o, int32_t n_predict);
/* Handles one shared option: 1 when handled, 0 when `opt` is not one of
 * them, CLI_USAGE_ERROR (after printing) when its value is bad. */
int cli_gen_option(const char *cmd, int opt, const char *arg, cli_gen_options *o);
/* After the options: o->backend from o->device and o->gpu_layers
 * (cli_backend_name). CLI_OK, or CLI_USAGE_ERROR (after printing) when
 * --gpu-layers has no GPU device. */
int cli_gen_backend(const char *cmd, cli_gen_options *o);

/* ---- session: everything generation needs, for one sequence ---- */
typedef struct {
  pasada_model *model;
  const pasada_tokenizer *tok;
  pasada_context *ctx;
  pasada_sampler *sampler;
  pasada_detok *detok;
  int32_t n_ctx, n_batch, n_vocab;
  int32_t pos; /* tokens in the KV cache of sequence 0 */
  double load_s;
  bool stdout_tty;
  /* speculative decoding (cli_spec_open): the mode (pa_spec_mode), the
   * draft model, the tokens sequence 0's cache holds (prompt lookup's
   * text), and the counts for the statistics line */
  int spec_mode;
  struct pa_spec_draft *draft;
  struct pa_spec_mtp *mtp;
  int32_t draft_max, lookup_ngram;
  bool spec_greedy; /* temp <= 0: drafts are the draft model's argmax */
  cli_tokens hist;
  float *spec_scratch;
  int64_t spec_steps, spec_drafted, spec_accepted;
} cli_session;

/* Loads the model and creates the context, sampler and detokenizer; prints
 * the error and returns CLI_RUNTIME_ERROR on failure. */
int cli_session_open(cli_session *s, const cli_gen_options *o);
void cli_session_close(cli_session *s);

/* The chat template the options name or the model declares; prints the
 * error (suggesting --chat-template) and returns non-zero on failure. */
int cli_session_template(cli_session *s, const cli_gen_options *o, pasada_chat_template *out);

/* How `run --chat` and `chat` render a conversation: the model's own Jinja
 * template (tokenizer.chat_template) by default, a Jinja file
 * (--chat-template-file), or a built-in template (--chat-template NAME, and
 * the model's family when it has no template of its own). */
typedef struct {
  pasada_chat_template builtin; /* PASADA_CHAT_NONE: the Jinja template */
  pasada_template *jinja;
  char *bos, *eos;  /* the model's BOS and EOS text, the template's bos_token/eos_token */
  char name[96];    /* for --verbose */
} cli_chat;
/* Chooses and prepares the template; prints the error and returns non-zero
 * on failure (a model's own template that does not parse falls back, with a
 * warning, to its family's built-in one). */
int cli_chat_open(cli_session *s, const cli_gen_options *o, cli_chat *c);
/* The conversation as the model's prompt, ending with the assistant's
 * opening (release it with pasada_text_free); prints the error. */
int cli_chat_render(cli_session *s, const cli_chat *c, const pasada_chat_message *msgs, size_t n,
                    char **out);
void cli_chat_close(cli_chat *c);

/* Tokenizes text meant as a prompt: special-token text is parsed, BOS is
 * prepended when the model wants one and the text did not already start with
 * it, EOS is never appended. Prints the error and returns non-zero on failure. */
int cli_tokenize_prompt(cli_session *s, const char *text, size_t len, cli_tokens *out);

/* Feeds n tokens to sequence 0 from position s->pos on, in batches of at
 * most n_batch; only the last token's logits are computed. Prints the error
 * and returns non-zero on failure. */
int cli_prefill(cli_session *s, const int32_t *tokens, int32_t n);

typedef struct {
  int32_t n_generated;
  double seconds;
  bool hit_eog, hit_context_end;
} cli_gen_result;

/* Samples from the last logits and streams the text to stdout (flushed per
 * token) until end of generation, n_predict tokens (-1: no limit) or a full
 * context. Every generated token that was fed back is appended to `fed`
 * (when not NULL): the last one is not fed, as nothing would read its
 * logits. The text goes to `reply` too (when not NULL). Prints the error and
 * returns non-zero on failure. */
int cli_generate(cli_session *s, int32_t n_predict, cli_tokens *fed, cli_text *reply,
                 cli_gen_result *r);

/* ---- speculative decoding (speculate.c) ---- */
/* Sets up the session's speculation from the options (after
 * cli_session_open): loads the draft model (its vocabulary checked against
 * the model's). Prints the error and returns non-zero on failure. */
int cli_spec_open(cli_session *s, const cli_gen_options *o);
/* The context's n_rollback for o's speculation on model m (0: none, or a
 * model without recurrent layers). */
int32_t cli_spec_rollback(const pasada_model *m, const cli_gen_options *o);
/* Frees what cli_spec_open made (cli_session_close calls it). */
void cli_spec_close(cli_session *s);
/* cli_generate with drafts verified in batches: the same tokens for the
 * same sampler (see runtime/speculative.h). */
int cli_generate_spec(cli_session *s, int32_t n_predict, cli_tokens *fed, cli_text *reply,
                      cli_gen_result *r);
/* " | MODE: drafted D, accepted A (P%) in S steps" for the statistics line,
 * or "" without speculation (buf of cap bytes). D counts the drafts
 * verification judged, not those past a rejection or the end. */
const char *cli_spec_stats(const cli_session *s, char *buf, size_t cap);

/* ---- sub-commands: argv[0] is the sub-command's name ---- */
int cmd_run(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_embed(int argc, char **argv);
int cmd_convert(int argc, char **argv); /* cmd_convert.c */
int cmd_template(int argc, char **argv);
int cmd_devices(int argc, char **argv);

#endif
