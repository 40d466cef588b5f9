/* cmd_perplexity.h: the `pasada perplexity` sub-command (argument parsing
 * and output; the evaluation is src/tools/perplexity.c). */
#ifndef PASADA_CMD_PERPLEXITY_H
#define PASADA_CMD_PERPLEXITY_H

#include "cli.h"
#include "tools/perplexity.h"

/* argv[0] is the sub-command's name. Returns the exit status: 0 done,
 * 1 runtime failure, 2 usage. */
int cmd_perplexity(int argc, char **argv);

/* The options of the evaluation windows, shared with `pasada kld`:
 * -c/--ctx, -b/--batch, --chunks, -t/--threads, --kv-type, --device and
 * --gpu-layers, --quantize. CLI_EVAL_OPTIONS goes into a getopt_long table and
 * CLI_EVAL_SHORT into its short-option string; cli_eval_option parses option
 * `opt` (in a switch's default branch) into *eval, and --device and
 * --gpu-layers into *dev: CLI_OK when it is one of them with a good value,
 * otherwise the usage error (exit status) for a bad value or an unknown
 * option. After the options, cli_eval_backend sets eval->backend from *dev
 * (cli_backend_name; the name lives in dev->name): CLI_OK, or the usage
 * error when --gpu-layers has no GPU device. */
#define CLI_OPT_CHUNKS 2000
#define CLI_OPT_EVAL_KV_TYPE 2001
#define CLI_OPT_EVAL_DEVICE 2002
#define CLI_OPT_EVAL_GPU_LAYERS 2003
#define CLI_OPT_EVAL_QUANTIZE 2004
#define CLI_EVAL_SHORT "c:b:t:"
#define CLI_EVAL_OPTIONS                                                              \
  {"ctx", required_argument, 0, 'c'}, {"ctx-size", required_argument, 0, 'c'},        \
      {"batch", required_argument, 0, 'b'}, {"chunks", required_argument, 0, CLI_OPT_CHUNKS}, \
      {"threads", required_argument, 0, 't'},                                                \
      {"kv-type", required_argument, 0, CLI_OPT_EVAL_KV_TYPE},                               \
      {"device", required_argument, 0, CLI_OPT_EVAL_DEVICE},                                 \
      {"gpu-layers", required_argument, 0, CLI_OPT_EVAL_GPU_LAYERS},                         \
      {"quantize", required_argument, 0, CLI_OPT_EVAL_QUANTIZE}
typedef struct {
  const char *device; /* --device (NULL: not given) */
  int32_t gpu_layers; /* --gpu-layers (0: not given) */
  char name[CLI_BACKEND_NAME_MAX];
} cli_eval_device;
int cli_eval_option(const char *cmd, int opt, char **argv, pa_eval_params *eval, cli_eval_device *dev);
int cli_eval_backend(const char *cmd, cli_eval_device *dev, pa_eval_params *eval);

#endif
