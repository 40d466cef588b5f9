/* cmd_embed.c: `pasada embed`: text in, embeddings out. Each input line is
 * tokenized, run through an embedding context (pasada_context_params.pooling)
 * and printed as one JSON array of floats on its own line. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char EMBED_HELP[] =
    "usage: pasada embed -m MODEL [-p TEXT | -f FILE] [options]\n"
    "\n"
    "Prints the embedding of each input as one JSON array of floats per line. The\n"
    "inputs are -p's text (one input), or the lines of -f's file or of stdin (one\n"
    "input per line; a final newline ends the last line, \\r\\n endings are read as\n"
    "\\n). The embedding is the model's final hidden states (after its output norm)\n"
    "pooled over the input's tokens, L2-normalised by default. BOS and EOS are added\n"
    "as the model's add_bos/add_eos flags say.\n"
    "\n"
    "options:\n"
    "  -m, --model FILE          GGUF model (required)\n"
    "  -p, --prompt TEXT         one input\n"
    "  -f, --file FILE           inputs, one per line\n"
    "      --pooling P           last (the last token: Qwen3-Embedding and other\n"
    "                            decoder embedders), mean, or cls (the first token);\n"
    "                            default: the model's pooling_type, else last\n"
    "      --normalize           divide each embedding by its L2 norm (the default)\n"
    "      --no-normalize        print the pooled vector as it is\n"
    "  -t, --threads N           threads (default: all cores)\n"
    "      --device DEV          run on cpu (the default), vulkan (the first GPU) or\n"
    "                            vulkan:N (device N of `pasada devices`)\n"
    "  -h, --help                show this help\n"
    "\n"
    "exit status: 0 success, 1 runtime error, 2 usage error\n";

enum { OPT_POOLING = 2000, OPT_NORMALIZE, OPT_NO_NORMALIZE, OPT_EMBED_DEVICE };

/* Embeds `len` bytes of text (input number `line`, 1-based) on sequence 0
 * of c and prints the vector; CLI_OK or CLI_RUNTIME_ERROR after printing. */
static int embed_one(pasada_model *model, pasada_context *c, const char *text, size_t len,
                     long line, float *vec) {
  int32_t *ids = NULL;
  size_t n = 0;
  if (pasada_tokenize(pasada_model_tokenizer(model), text, len, true, true, &ids, &n) != PASADA_OK)
    return cli_fail("input %ld: %s", line, pasada_last_error());
  if (n == 0) {
    pasada_text_free(ids);
    return cli_fail("input %ld is empty: it has no tokens to embed", line);
  }
  if (n > (size_t)pasada_context_n_ctx(c)) {
    pasada_text_free(ids);
    return cli_fail("input %ld has %zu tokens, more than the context's %d", line, n,
                    pasada_context_n_ctx(c));
  }
  pasada_seq_truncate(c, 0, 0);
  int rc = CLI_OK;
  enum { CHUNK = 512 };
  static int32_t pos[CHUNK], seq[CHUNK];
  for (size_t i0 = 0; i0 < n && rc == CLI_OK; i0 += CHUNK) {
    const int32_t k = (int32_t)(n - i0 < CHUNK ? n - i0 : CHUNK);
    for (int32_t i = 0; i < k; i++) pos[i] = (int32_t)i0 + i, seq[i] = 0;
    const pasada_batch b = {.n_tokens = k, .token = ids + i0, .pos = pos, .seq_id = seq};
    if (pasada_decode(c, &b) != PASADA_OK)
      rc = cli_fail("input %ld: %s", line, pasada_last_error());
  }
  pasada_text_free(ids);
  if (rc == CLI_OK && pasada_get_embeddings(c, 0, vec) != PASADA_OK)
    rc = cli_fail("input %ld: %s", line, pasada_last_error());
  if (rc != CLI_OK) return rc;
  const int32_t E = pasada_model_n_embd(model);
  putchar('[');
  for (int32_t j = 0; j < E; j++) printf(j ? ",%.9g" : "%.9g", (double)vec[j]);
  fputs("]\n", stdout);
  return CLI_OK;
}

int cmd_embed(int argc, char **argv) {
  static const struct option opts[] = {{"model", required_argument, 0, 'm'},
                                       {"prompt", required_argument, 0, 'p'},
                                       {"file", required_argument, 0, 'f'},
                                       {"threads", required_argument, 0, 't'},
                                       {"pooling", required_argument, 0, OPT_POOLING},
                                       {"normalize", no_argument, 0, OPT_NORMALIZE},
                                       {"no-normalize", no_argument, 0, OPT_NO_NORMALIZE},
                                       {"device", required_argument, 0, OPT_EMBED_DEVICE},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  const char *cmd = "embed", *model_path = NULL, *prompt = NULL, *file = NULL, *device = NULL;
  bool normalize = true, pooling_set = false;
  pasada_pooling pooling = PASADA_POOLING_NONE;
  int32_t n_threads = 0;
  opterr = 0;
  optind = 0;
  int c;
  while ((c = getopt_long(argc, argv, ":m:p:f:t:h", opts, NULL)) != -1) {
    switch (c) {
      case 'h':
        fputs(EMBED_HELP, stdout);
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
      case 't':
        if (!cli_parse_i32(optarg, 1, 1024, &n_threads))
          return cli_usage(cmd, "--threads wants a thread count in [1, 1024], not '%s'", optarg);
        break;
      case OPT_POOLING:
        if (pasada_pooling_from_name(optarg, &pooling) != PASADA_OK ||
            pooling == PASADA_POOLING_NONE)
          return cli_usage(cmd, "--pooling: expected last, mean or cls, got '%s'", optarg);
        pooling_set = true;
        break;
      case OPT_NORMALIZE:
        normalize = true;
        break;
      case OPT_NO_NORMALIZE:
        normalize = false;
        break;
      case OPT_EMBED_DEVICE:
        if (!cli_parse_device(optarg)) return cli_usage(cmd, CLI_DEVICE_ERROR, optarg);
        device = optarg;
        break;
      default:
        return cli_getopt_error(cmd, c, argv);
    }
  }
  if (optind < argc) return cli_usage(cmd, "unexpected argument '%s'", argv[optind]);
  if (!model_path) return cli_usage(cmd, "no model given: use -m MODEL");
  if (cli_check_input(cmd, prompt, file, "inputs", "lines")) return CLI_USAGE_ERROR;

  char *owned = NULL;
  const char *text = NULL;
  size_t len = 0;
  if (cli_read_input(prompt, file, &owned, &text, &len)) return CLI_RUNTIME_ERROR;

  pasada_model_params mp = pasada_model_default_params();
  mp.backend = device;
  pasada_model *model = NULL;
  if (pasada_model_load(model_path, &mp, &model) != PASADA_OK) {
    free(owned);
    return cli_fail("%s", pasada_last_error());
  }
  pasada_context_params cp = pasada_context_default_params();
  cp.pooling = pooling_set ? pooling : pasada_model_pooling(model);
  if (cp.pooling == PASADA_POOLING_NONE) cp.pooling = PASADA_POOLING_LAST;
  cp.embd_normalize = normalize;
  cp.n_threads = n_threads;
  pasada_context *ctx = NULL;
  float *vec = malloc((size_t)pasada_model_n_embd(model) * sizeof(float));
  int rc = CLI_OK;
  if (!vec) {
    rc = cli_fail("out of memory");
  } else if (pasada_context_create(model, &cp, &ctx) != PASADA_OK) {
    rc = cli_fail("%s", pasada_last_error());
  } else if (!owned) { /* -p: one input */
    rc = embed_one(model, ctx, text, len, 1, vec);
  } else {
    long line = 0;
    for (size_t i = 0; i < len && rc == CLI_OK;) {
      const char *nl = memchr(text + i, '\n', len - i);
      size_t end = nl ? (size_t)(nl - text) : len, n = end - i;
      if (n > 0 && text[i + n - 1] == '\r') n--;
      rc = embed_one(model, ctx, text + i, n, ++line, vec);
      i = end + 1;
    }
  }
  if (rc == CLI_OK && fflush(stdout) != 0) rc = cli_fail("writing to stdout failed");
  free(vec);
  pasada_context_free(ctx);
  pasada_model_free(model);
  free(owned);
  return rc;
}
