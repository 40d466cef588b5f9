/* cmd_tokenize.c: `pasada tokenize`: text in, token ids out (one line,
 * space-separated). Loads only the vocabulary, so it works on
 * vocabulary-only GGUF files. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char TOKENIZE_HELP[] =
    "usage: pasada tokenize -m MODEL [-p TEXT | -f FILE] [--raw]\n"
    "\n"
    "Prints the token ids of a text on one line, separated by spaces. The text is\n"
    "-p's, -f's file's, or else what stdin holds, byte for byte. Only the model's\n"
    "vocabulary is loaded: vocabulary-only GGUF files work.\n"
    "\n"
    "By default BOS and EOS are added as the model's add_bos/add_eos flags say, and\n"
    "the text of special tokens (\"<|im_start|>\", \"<start_of_turn>\"...) becomes those\n"
    "tokens.\n"
    "\n"
    "options:\n"
    "  -m, --model FILE          GGUF model or vocabulary file (required)\n"
    "  -p, --prompt TEXT         the text\n"
    "  -f, --file FILE           read the text from FILE\n"
    "  --raw                     add no BOS/EOS, and tokenize special-token text as\n"
    "                            plain text\n"
    "  -h, --help                show this help\n"
    "\n"
    "exit status: 0 success, 1 runtime error, 2 usage error\n";

int cmd_tokenize(int argc, char **argv) {
  static const struct option opts[] = {
      {"model", required_argument, 0, 'm'}, {"prompt", required_argument, 0, 'p'},
      {"file", required_argument, 0, 'f'},  {"raw", no_argument, 0, OPT_RAW},
      {"help", no_argument, 0, 'h'},        {0, 0, 0, 0}};
  const char *cmd = "tokenize", *model_path = NULL, *prompt = NULL, *file = NULL;
  bool raw = false;
  opterr = 0;
  optind = 0;
  int c;
  while ((c = getopt_long(argc, argv, ":m:p:f:h", opts, NULL)) != -1) {
    switch (c) {
      case 'h':
        fputs(TOKENIZE_HELP, stdout);
        return CLI_OK;
      case 'm':
        model_path = optarg;
        break;
      case 'p':
        prompt = optarg;
        break;
      case 'f':
        file = optarg;
        break;
      case OPT_RAW:
        raw = true;
        break;
      default:
        return cli_getopt_error(cmd, c, argv);
    }
  }
  if (optind < argc) return cli_usage(cmd, "unexpected argument '%s'", argv[optind]);
  if (!model_path) return cli_usage(cmd, "no model given: use -m MODEL");
  if (cli_check_input(cmd, prompt, file, "text", "text")) return CLI_USAGE_ERROR;

  char *owned = NULL;
  const char *text = NULL;
  size_t len = 0;
  if (cli_read_input(prompt, file, &owned, &text, &len)) return CLI_RUNTIME_ERROR;

  pasada_model_params mp = pasada_model_default_params();
  mp.vocab_only = true;
  pasada_model *model = NULL;
  if (pasada_model_load(model_path, &mp, &model) != PASADA_OK) {
    free(owned);
    return cli_fail("%s", pasada_last_error());
  }
  int32_t *ids = NULL;
  size_t n = 0;
  int rc = CLI_OK;
  if (pasada_tokenize(pasada_model_tokenizer(model), text, len, !raw, !raw, &ids, &n) !=
      PASADA_OK) {
    rc = cli_fail("%s", pasada_last_error());
  } else {
    for (size_t i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
    putchar('\n');
    if (fflush(stdout) != 0) rc = cli_fail("writing to stdout failed");
  }
  pasada_text_free(ids);
  pasada_model_free(model);
  free(owned);
  return rc;
}
