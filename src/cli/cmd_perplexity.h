/* cmd_perplexity.h: the `pasada perplexity` sub-command (argument parsing
 * and output; the evaluation is src/tools/perplexity.c). */
#ifndef PASADA_CMD_PERPLEXITY_H
#define PASADA_CMD_PERPLEXITY_H

#include "tools/perplexity.h"

/* argv[0] is the sub-command's name. Returns the exit status: 0 done,
 * 1 runtime failure, 2 usage. */
int cmd_perplexity(int argc, char **argv);

/* The options of the evaluation windows, shared with `pasada kld`:
 * -c/--ctx, -b/--batch, --chunks, -t/--threads, --kv-type and --device.
 * CLI_EVAL_OPTIONS goes into a getopt_long table and CLI_EVAL_SHORT into its
 * short-option string; cli_eval_option parses option `opt` (in a switch's
 * default branch) into *eval: CLI_OK when it is one of them with a good
 * value, otherwise the usage error (exit status) for a bad value or an
 * unknown option. */
#define CLI_OPT_CHUNKS 2000
#define CLI_OPT_EVAL_KV_TYPE 2001
#define CLI_OPT_EVAL_DEVICE 2002
#define CLI_EVAL_SHORT "c:b:t:"
#define CLI_EVAL_OPTIONS                                                              \
  {"ctx", required_argument, 0, 'c'}, {"ctx-size", required_argument, 0, 'c'},        \
      {"batch", required_argument, 0, 'b'}, {"chunks", required_argument, 0, CLI_OPT_CHUNKS}, \
      {"threads", required_argument, 0, 't'},                                                \
      {"kv-type", required_argument, 0, CLI_OPT_EVAL_KV_TYPE},                               \
      {"device", required_argument, 0, CLI_OPT_EVAL_DEVICE}
int cli_eval_option(const char *cmd, int opt, char **argv, pa_eval_params *eval);

#endif
