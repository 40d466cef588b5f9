/* main.c: the pasada command line: sub-command dispatch, --help and
 * --version. Each sub-command parses its own options (cmd_*.c). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cmd_bench.h"
#include "cmd_kld.h"
#include "cmd_perplexity.h"
#include "cmd_profile.h"
#include "cmd_quantize.h"
#include "cmd_serve.h"
#include "cmd_verify.h"

static const char MAIN_HELP[] =
    "usage: pasada <command> [options]\n"
    "\n"
    "pasada runs large language models stored as GGUF files or Hugging Face\n"
    "folders (config.json, tokenizer.json, *.safetensors: -m DIR).\n"
    "\n"
    "commands:\n"
    "  run        generate text from a prompt, streamed to stdout\n"
    "  chat       an interactive conversation on stdin/stdout\n"
    "  info       describe a model file\n"
    "  tokenize   print the token ids of a text\n"
    "  embed      print the embeddings of texts, one JSON array per line\n"
    "  template   render a conversation with a model's Jinja chat template\n"
    "  serve      an OpenAI-compatible HTTP server (pasada serve --help)\n"
    "  bench      prompt and generation speed against this machine's limits\n"
    "  perplexity perplexity of a model on a text, with its standard error\n"
    "  kld        a quantized model against its base: KL divergence, top-1, size, speed\n"
    "  quantize   convert a GGUF file's weights to another type (Q4_K_M, Q8_0...)\n"
    "  convert    write a Hugging Face model folder as a GGUF file\n"
    "  verify     the fast path against the reference path, layer by layer\n"
    "  profile    time per op, per layer, per phase, against this machine's limits\n"
    "  devices    the CPU and the GPUs that --device names (cpu, vulkan, vulkan:N)\n"
    "\n"
    "options:\n"
    "  -h, --help       show this help\n"
    "  --version        show the version\n"
    "\n"
    "environment:\n"
    "  PASADA_CPU=scalar|avx2|avx512_vnni  use no SIMD instructions beyond these\n"
    "                   (avx512_vnni: all but AMX)\n"
    "  PASADA_REPACK=0  keep weights in the file's layout (no interleaved repacking at load)\n"
    "  PASADA_LOG=debug|info|quiet  how much to log on stderr\n"
    "\n"
    "'pasada <command> --help' tells a command's options.\n"
    "exit status: 0 success, 1 runtime error, 2 usage error\n";

int main(int argc, char **argv) {
  if (argc < 2) return cli_usage(NULL, "no command given");
  const char *cmd = argv[1];
  if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
    fputs(MAIN_HELP, stdout);
    return CLI_OK;
  }
  if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
    printf("pasada %s\n", PASADA_VERSION);
    return CLI_OK;
  }
  static const struct {
    const char *name;
    int (*fn)(int, char **);
  } commands[] = {
      {"run", cmd_run}, {"chat", cmd_chat}, {"info", cmd_info}, {"tokenize", cmd_tokenize}, {"embed", cmd_embed},
      {"template", cmd_template}, {"convert", cmd_convert}, {"serve", cmd_serve}, {"bench", cmd_bench},
      {"perplexity", cmd_perplexity}, {"kld", cmd_kld}, {"quantize", cmd_quantize}, {"verify", cmd_verify},
      {"profile", cmd_profile}, {"devices", cmd_devices}};
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (!strcmp(cmd, commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
  if (cmd[0] == '-') return cli_usage(NULL, "unknown option '%s'", cmd);
  return cli_usage(NULL, "unknown command '%s'", cmd);
}
