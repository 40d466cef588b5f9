/* cmd_convert.c: `pasada convert DIR OUT.gguf`: a Hugging Face model folder
 * (src/format/hf.c) written as the GGUF file it is read as: llama.cpp's
 * keys, tensor names and conventions, the weights in their stored type
 * (1-D tensors F32). */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "format/gguf.h"
#include "format/hf.h"

static const char CONVERT_HELP[] =
    "usage: pasada convert [options] DIR OUT.gguf\n"
    "\n"
    "Writes the Hugging Face model folder DIR (config.json, tokenizer.json,\n"
    "tokenizer_config.json, *.safetensors, sharded or not) as a GGUF file, the\n"
    "same model every other command reads from DIR itself (-m DIR): llama.cpp's\n"
    "metadata keys, tensor names and conventions; F32, F16 and BF16 weights kept\n"
    "in their type, norms and biases F32. 'pasada quantize DIR OUT.gguf --type T'\n"
    "writes a quantized file instead.\n"
    "\n"
    "options:\n"
    "  -m, --model DIR           the folder (instead of the DIR argument)\n"
    "  -h, --help                show this help\n"
    "\n"
    "exit status: 0 success, 1 runtime error, 2 usage error\n";

/* token_embd, then the blocks in layer order, then the output tensors */
static long tensor_rank(const char *name) {
  if (!strncmp(name, "token_embd", 10)) return -1;
  if (!strncmp(name, "blk.", 4)) return strtol(name + 4, NULL, 10);
  return 1L << 30;
}

static int cmp_tensor(const void *a, const void *b) {
  const gguf_tensor *x = *(const gguf_tensor *const *)a, *y = *(const gguf_tensor *const *)b;
  long rx = tensor_rank(x->name), ry = tensor_rank(y->name);
  return rx != ry ? (rx < ry ? -1 : 1) : strcmp(x->name, y->name);
}

int cmd_convert(int argc, char **argv) {
  static const struct option opts[] = {
      {"model", required_argument, 0, 'm'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
  const char *cmd = "convert", *in = NULL;
  opterr = 0;
  optind = 0;
  int c;
  while ((c = getopt_long(argc, argv, ":m:h", opts, NULL)) != -1) {
    switch (c) {
      case 'h':
        fputs(CONVERT_HELP, stdout);
        return CLI_OK;
      case 'm':
        in = optarg;
        break;
      default:
        return cli_getopt_error(cmd, c, argv);
    }
  }
  if (!in && optind < argc) in = argv[optind++];
  const char *out = optind < argc ? argv[optind++] : NULL;
  if (optind < argc) return cli_usage(cmd, "unexpected argument '%s'", argv[optind]);
  if (!in) return cli_usage(cmd, "no model folder given");
  if (!out) return cli_usage(cmd, "no output file given");
  if (!hf_is_dir(in))
    return cli_usage(cmd, "'%s' is not a folder (a Hugging Face model folder)", in);

  gguf_file *f = NULL;
  if (gguf_open_model(in, &f) != PASADA_OK) return cli_fail("%s", pasada_last_error());
  gguf_writer *w = gguf_writer_create();
  const gguf_tensor **order = calloc(f->n_tensors + 1, sizeof *order);
  int rc = w && order ? PASADA_OK : PASADA_ERR_NOMEM;
  for (uint64_t i = 0; i < f->n_kv && !rc; i++)
    rc = gguf_writer_set_value(w, f->kv[i].key, &f->kv[i].value);
  for (uint64_t i = 0; order && i < f->n_tensors; i++) order[i] = &f->tensors[i];
  if (!rc) qsort(order, f->n_tensors, sizeof *order, cmp_tensor);
  for (uint64_t i = 0; i < f->n_tensors && !rc; i++) {
    const gguf_tensor *t = order[i];
    rc = gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->nbytes);
  }
  if (!rc) rc = gguf_writer_write(w, out, 3);
  int st = rc ? cli_fail("%s", rc == PASADA_ERR_NOMEM && !w ? "out of memory" : pasada_last_error())
              : CLI_OK;
  if (!rc)
    printf("wrote %s (%llu tensors, %llu metadata keys)\n", out, (unsigned long long)f->n_tensors,
           (unsigned long long)f->n_kv);
  free(order);
  gguf_writer_free(w);
  gguf_close(f);
  return st;
}
