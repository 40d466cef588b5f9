/* cmd_info.c: `pasada info MODEL`: what a GGUF model file holds
 * (architecture, hyper-parameters, tokenizer, tensor types with counts and
 * bytes), as the model module describes it. */
#include <string.h>

#include "cli.h"

static const char INFO_HELP[] =
    "usage: pasada info [options] MODEL\n"
    "\n"
    "Loads MODEL (a GGUF file) and describes it on stdout: architecture,\n"
    "hyper-parameters, tokenizer, and the tensor types with their counts and bytes.\n"
    "A file the engine cannot load is reported with the reason (exit status 1).\n"
    "\n"
    "options:\n"
    "  -m, --model FILE          the model (instead of the MODEL argument)\n"
    "  --vocab-only              load only the tokenizer: works on vocabulary-only\n"
    "                            files and architectures the engine cannot run\n"
    "  -h, --help                show this help\n"
    "\n"
    "exit status: 0 success, 1 runtime error, 2 usage error\n";

int cmd_info(int argc, char **argv) {
  static const struct option opts[] = {{"model", required_argument, 0, 'm'},
                                       {"vocab-only", no_argument, 0, OPT_VOCAB_ONLY},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  const char *cmd = "info", *path = NULL;
  bool vocab_only = false;
  opterr = 0;
  optind = 0;
  int c;
  while ((c = getopt_long(argc, argv, ":m:h", opts, NULL)) != -1) {
    switch (c) {
      case 'h':
        fputs(INFO_HELP, stdout);
        return CLI_OK;
      case 'm':
        path = optarg;
        break;
      case OPT_VOCAB_ONLY:
        vocab_only = true;
        break;
      default:
        return cli_getopt_error(cmd, c, argv);
    }
  }
  if (optind < argc) {
    if (path) return cli_usage(cmd, "the model is given twice ('%s' and -m)", argv[optind]);
    path = argv[optind++];
  }
  if (optind < argc) return cli_usage(cmd, "unexpected argument '%s'", argv[optind]);
  if (!path) return cli_usage(cmd, "no model given");

  pasada_model_params mp = pasada_model_default_params();
  mp.vocab_only = vocab_only;
  mp.keep_file_layout = true; /* described, not run: no repacking */
  pasada_model *model = NULL;
  if (pasada_model_load(path, &mp, &model) != PASADA_OK) return cli_fail("%s", pasada_last_error());
  const int st = pasada_model_print_info(model, stdout);
  pasada_model_free(model);
  if (st != PASADA_OK) return cli_fail("%s", pasada_last_error());
  if (fflush(stdout) != 0) return cli_fail("writing to stdout failed");
  return CLI_OK;
}
