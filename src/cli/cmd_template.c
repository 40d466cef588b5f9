/* cmd_template.c: `pasada template`: renders a conversation with a model's
 * own Jinja chat template (or a template file) as transformers'
 * apply_chat_template would, and prints the prompt. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char TEMPLATE_HELP[] =
    "usage: pasada template (-m MODEL | --chat-template-file FILE) -f CONVERSATION.json\n"
    "                       [--tools TOOLS.json] [--no-generation-prompt]\n"
    "\n"
    "Renders a conversation with a Jinja chat template and prints the prompt on stdout,\n"
    "byte for byte what Hugging Face transformers' apply_chat_template renders.\n"
    "\n"
    "The conversation is a JSON object: an OpenAI-style \"messages\" array and any other\n"
    "key as a template variable (bos_token, eos_token, enable_thinking, ...). As\n"
    "transformers passes them, \"tools\" and \"documents\" are null unless given, and\n"
    "add_generation_prompt is true. bos_token and eos_token default to the model's BOS\n"
    "and EOS token text, or to \"\" with a template file.\n"
    "\n"
    "options:\n"
    "  -m, --model FILE              use the model's own template (tokenizer.chat_template;\n"
    "                                only its vocabulary is loaded)\n"
    "      --chat-template-file FILE use the Jinja template in FILE\n"
    "  -f, --file FILE               the conversation (JSON object)\n"
    "      --tools FILE              a JSON array of tools: the `tools` variable\n"
    "      --no-generation-prompt    add_generation_prompt false (e.g. to continue the\n"
    "                                last assistant message)\n"
    "  -h, --help                    show this help\n"
    "\n"
    "environment:\n"
    "  PASADA_TEMPLATE_NOW=SECONDS   the time strftime_now() formats (default: now)\n"
    "\n"
    "exit status: 0 success, 1 bad template or render failure, 2 usage error\n";

enum { OPT_TEMPLATE_FILE = 3000, OPT_TOOLS, OPT_NO_GEN };

/* Reads a JSON file: its text in *text and whether it is an object or an
 * array (*kind: cJSON_Object / cJSON_Array / 0); prints the error. */
static int read_json(const char *path, char **text, int *kind) {
  size_t len = 0;
  if (cli_read_file(path, text, &len)) return CLI_RUNTIME_ERROR;
  const char *end = NULL;
  cJSON *j = cJSON_ParseWithLengthOpts(*text, len + 1, &end, true); /* with its NUL */
  if (!j) {
    const size_t at = end ? (size_t)(end - *text) : 0;
    free(*text);
    *text = NULL;
    return cli_fail("%s: not valid JSON (at byte %zu)", path, at);
  }
  *kind = cJSON_IsObject(j) ? cJSON_Object : cJSON_IsArray(j) ? cJSON_Array : 0;
  cJSON_Delete(j);
  return CLI_OK;
}

static bool put(cli_text *t, const char *s) {
  return cli_text_append(t, s, strlen(s));
}

/* s as a JSON string literal (malloc'd), or NULL. */
static char *json_string(const char *s) {
  cJSON *j = cJSON_CreateString(s);
  char *out = j ? cJSON_PrintUnformatted(j) : NULL;
  cJSON_Delete(j);
  return out;
}

int cmd_template(int argc, char **argv) {
  static const struct option opts[] = {
      {"model", required_argument, 0, 'm'},
      {"chat-template-file", required_argument, 0, OPT_TEMPLATE_FILE},
      {"file", required_argument, 0, 'f'},
      {"tools", required_argument, 0, OPT_TOOLS},
      {"no-generation-prompt", no_argument, 0, OPT_NO_GEN},
      {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  const char *cmd = "template", *model_path = NULL, *tmpl_path = NULL, *conv_path = NULL,
             *tools_path = NULL;
  bool gen_prompt = true;
  opterr = 0;
  optind = 0;
  int c;
  while ((c = getopt_long(argc, argv, ":m:f:h", opts, NULL)) != -1) {
    switch (c) {
      case 'h':
        fputs(TEMPLATE_HELP, stdout);
        return CLI_OK;
      case 'm':
        model_path = optarg;
        break;
      case OPT_TEMPLATE_FILE:
        tmpl_path = optarg;
        break;
      case 'f':
        conv_path = optarg;
        break;
      case OPT_TOOLS:
        tools_path = optarg;
        break;
      case OPT_NO_GEN:
        gen_prompt = false;
        break;
      default:
        return cli_getopt_error(cmd, c, argv);
    }
  }
  if (optind < argc) return cli_usage(cmd, "unexpected argument '%s'", argv[optind]);
  if (!model_path == !tmpl_path)
    return cli_usage(cmd, "give the template: -m MODEL or --chat-template-file FILE (one of them)");
  if (!conv_path) return cli_usage(cmd, "no conversation: use -f CONVERSATION.json");

  char *conv_text = NULL, *tools_text = NULL;
  int kind = 0;
  if (read_json(conv_path, &conv_text, &kind)) return CLI_RUNTIME_ERROR;
  if (kind != cJSON_Object) {
    free(conv_text);
    return cli_fail("%s: the conversation must be a JSON object with a \"messages\" array",
                    conv_path);
  }
  if (tools_path) {
    if (read_json(tools_path, &tools_text, &kind)) {
      free(conv_text);
      return CLI_RUNTIME_ERROR;
    }
    if (kind != cJSON_Array) {
      free(conv_text);
      free(tools_text);
      return cli_fail("%s: the tools must be a JSON array", tools_path);
    }
  }

  char *src = NULL, *bos = NULL, *eos = NULL;
  size_t src_len = 0;
  int rc = CLI_OK;
  if (model_path) {
    pasada_model_params mp = pasada_model_default_params();
    mp.vocab_only = true;
    pasada_model *model = NULL;
    if (pasada_model_load(model_path, &mp, &model) != PASADA_OK ||
        pasada_model_chat_template(model, &src, &bos, &eos) != PASADA_OK)
      rc = cli_fail("%s", pasada_last_error());
    pasada_model_free(model);
    if (!rc) src_len = strlen(src);
  } else if (cli_read_file(tmpl_path, &src, &src_len)) {
    rc = CLI_RUNTIME_ERROR;
  }

  /* The variables as JSON text, spliced rather than rebuilt (cJSON keeps
   * numbers as doubles and would print 1500.0 as 1500): the defaults, the
   * conversation's own keys, then what the options set. A key given twice
   * keeps its last value. */
  char *json = NULL;
  if (!rc) {
    cli_text v = {0};
    char *b = json_string(bos ? bos : ""), *e = json_string(eos ? eos : "");
    const char *body_start = strchr(conv_text, '{') + 1, *body_end = strrchr(conv_text, '}');
    bool empty = true;
    for (const char *q = body_start; q < body_end; q++)
      empty &= *q == ' ' || *q == '\t' || *q == '\n' || *q == '\r';
    bool ok = b && e &&
              put(&v, "{\"messages\": [], \"tools\": null, \"documents\": null, \"bos_token\": ") &&
              put(&v, b) && put(&v, ", \"eos_token\": ") && put(&v, e);
    if (ok && !empty)
      ok = put(&v, ", ") && cli_text_append(&v, body_start, (size_t)(body_end - body_start));
    if (ok && tools_text) ok = put(&v, ", \"tools\": ") && put(&v, tools_text);
    if (ok)
      ok = put(&v, gen_prompt ? ", \"add_generation_prompt\": true}"
                              : ", \"add_generation_prompt\": false}");
    free(b);
    free(e);
    if (!ok) {
      cli_text_free(&v);
      rc = cli_fail("out of memory");
    } else {
      json = v.s;
    }
  }
  free(conv_text);
  free(tools_text);

  pasada_template *t = NULL;
  char *out = NULL;
  if (!rc && pasada_template_parse(src, src_len, &t) != PASADA_OK)
    rc = cli_fail("%s", pasada_last_error());
  if (!rc && pasada_template_render(t, json, strlen(json), &out) != PASADA_OK)
    rc = cli_fail("%s", pasada_last_error());
  if (!rc) {
    fputs(out, stdout);
    if (fflush(stdout) != 0) rc = cli_fail("writing to stdout failed");
  }
  pasada_text_free(out);
  pasada_template_free(t);
  free(json);
  pasada_text_free(src);
  pasada_text_free(bos);
  pasada_text_free(eos);
  return rc;
}
