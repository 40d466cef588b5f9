/* cmd_run.c: `pasada run`: one prompt in, generated text streamed out.
 * The prompt (optionally wrapped in the chat template) is prefilled in one
 * batch (several when longer than the context's batch size), then tokens are
 * sampled and printed as they come until end of generation, -n tokens or a
 * full context. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "server/json_schema.h"

static const char RUN_HELP[] =
    "usage: pasada run -m MODEL [-p PROMPT | -f FILE] [options]\n"
    "\n"
    "Generates text that continues a prompt and streams it to stdout as it is\n"
    "produced. The prompt is -p's text, -f's file, or else what stdin holds. Only\n"
    "the generated text is printed (a newline is added when stdout is a terminal).\n"
    "A statistics line goes to stderr at the end: load time, prompt tokens and\n"
    "their speed, generated tokens and their speed.\n"
    "\n"
    "prompt and length:\n"
    "  -p, --prompt TEXT         the prompt\n"
    "  -f, --file FILE           read the prompt from FILE\n"
    "  -n, --n-predict N         tokens to generate at most (default 256; -1: until the\n"
    "                            end of generation or a full context)\n"
    "  --chat                    wrap the prompt as a user message in the model's chat\n"
    "                            template and generate the assistant's answer\n"
    "                            (its tokenizer.chat_template, a Jinja template)\n"
    "  --chat-template NAME      use chatml, gemma or llama3 instead of the model's own\n"
    "                            template (implies --chat)\n"
    "  --chat-template-file FILE use the Jinja chat template in FILE (implies --chat)\n"
    "  --system TEXT             a system message before the prompt (implies --chat)\n"
    "\n"
    "structured output:\n"
    "  --grammar FILE            constrain the output to a GBNF grammar (start rule root)\n"
    "  --json-schema FILE        constrain the output to JSON valid under a JSON schema\n";

static const char EXIT_HELP[] =
    "\n"
    "exit status: 0 success, 1 runtime error (model file, context too small...),\n"
    "2 usage error\n";

static double per_s(int64_t n, double s) { return s > 0 ? (double)n / s : 0.0; }

enum { OPT_GRAMMAR = 1100, OPT_JSON_SCHEMA };

/* The grammar of --grammar or --json-schema for the session's vocabulary. */
static int load_grammar(const cli_session *s, const char *grammar, const char *schema,
                        pasada_grammar **out) {
  char *text = NULL, *gbnf = NULL;
  size_t len = 0;
  if (cli_read_file(grammar ? grammar : schema, &text, &len)) return CLI_RUNTIME_ERROR;
  int rc = CLI_OK;
  if (schema) {
    cJSON *json = cJSON_ParseWithLength(text, len);
    if (!json) {
      free(text);
      return cli_fail("%s: not valid JSON", schema);
    }
    srv_error e = {0};
    gbnf = srv_json_schema_gbnf(json, &e);
    cJSON_Delete(json);
    if (!gbnf) {
      free(text);
      return cli_fail("%s: %s", schema, e.message);
    }
  }
  const char *g = gbnf ? gbnf : text;
  if (pasada_grammar_create(s->tok, g, strlen(g), NULL, out) != PASADA_OK)
    rc = cli_fail("%s: %s", grammar ? grammar : schema, pasada_last_error());
  free(gbnf);
  free(text);
  return rc;
}

int cmd_run(int argc, char **argv) {
  static const struct option opts[] = {CLI_GEN_LONG_OPTIONS,
                                       {"prompt", required_argument, 0, 'p'},
                                       {"file", required_argument, 0, 'f'},
                                       {"chat", no_argument, 0, OPT_CHAT},
                                       {"grammar", required_argument, 0, OPT_GRAMMAR},
                                       {"json-schema", required_argument, 0, OPT_JSON_SCHEMA},
                                       {0, 0, 0, 0}};
  const char *cmd = "run";
  cli_gen_options o;
  cli_gen_defaults(&o, 256);
  const char *prompt = NULL, *file = NULL, *grammar_file = NULL, *schema_file = NULL;
  bool chat = false;
  opterr = 0;
  optind = 0;
  int c;
  while ((c = getopt_long(argc, argv, ":m:p:f:n:t:c:h", opts, NULL)) != -1) {
    switch (c) {
      case 'h':
        fputs(RUN_HELP, stdout);
        fputs(CLI_GEN_HELP, stdout);
        fputs(EXIT_HELP, stdout);
        return CLI_OK;
      case 'p':
        prompt = optarg;
        break;
      case 'f':
        file = optarg;
        break;
      case OPT_CHAT:
        chat = true;
        break;
      case OPT_GRAMMAR:
        grammar_file = optarg;
        break;
      case OPT_JSON_SCHEMA:
        schema_file = optarg;
        break;
      case '?':
      case ':':
        return cli_getopt_error(cmd, c, argv);
      default: {
        int r = cli_gen_option(cmd, c, optarg, &o);
        if (r == CLI_USAGE_ERROR) return r;
        if (r == 0) return cli_usage(cmd, "unhandled option '%s'", argv[optind - 1]);
      }
    }
  }
  if (optind < argc) return cli_usage(cmd, "unexpected argument '%s'", argv[optind]);
  if (!o.model_path) return cli_usage(cmd, "no model given: use -m MODEL");
  if (cli_gen_backend(cmd, &o)) return CLI_USAGE_ERROR;
  if (grammar_file && schema_file)
    return cli_usage(cmd, "--grammar and --json-schema both constrain the output: use one of them");
  if (cli_check_input(cmd, prompt, file, "prompt", "text")) return CLI_USAGE_ERROR;
  if (o.chat_template || o.chat_template_file || o.system) chat = true;

  /* The prompt's text. */
  char *owned = NULL;
  const char *text = NULL;
  size_t len = 0;
  if (cli_read_input(prompt, file, &owned, &text, &len)) return CLI_RUNTIME_ERROR;

  cli_session s;
  int rc = cli_session_open(&s, &o);
  if (rc) {
    free(owned);
    return rc;
  }
  char *rendered = NULL;
  cli_tokens toks = {0};
  pasada_grammar *grammar = NULL;
  if ((grammar_file || schema_file) && (rc = load_grammar(&s, grammar_file, schema_file, &grammar)))
    goto done;
  if (chat) {
    if (memchr(text, '\0', len)) {
      rc = cli_fail("the prompt contains a NUL byte, which a chat message cannot hold");
      goto done;
    }
    cli_chat tmpl;
    if ((rc = cli_chat_open(&s, &o, &tmpl))) goto done;
    if (o.verbose) fprintf(stderr, "pasada: chat template %s\n", tmpl.name);
    pasada_chat_message msgs[2];
    size_t n_msgs = 0;
    if (o.system) msgs[n_msgs++] = (pasada_chat_message){"system", o.system};
    msgs[n_msgs++] = (pasada_chat_message){"user", text};
    rc = cli_chat_render(&s, &tmpl, msgs, n_msgs, &rendered);
    cli_chat_close(&tmpl);
    if (rc) goto done;
    text = rendered;
    len = strlen(rendered);
  }
  if ((rc = cli_tokenize_prompt(&s, text, len, &toks))) goto done;
  if (toks.n == 0) {
    rc = cli_fail("the prompt is empty and the model adds no BOS token: nothing to start from");
    goto done;
  }
  if (toks.n > (size_t)s.n_ctx) {
    rc = cli_fail(
        "the prompt is %zu tokens but the context holds %d: shorten it or raise -c "
        "(the model was trained on %d)",
        toks.n, s.n_ctx, pasada_model_n_ctx_train(s.model));
    goto done;
  }

  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  if ((rc = cli_prefill(&s, toks.v, (int32_t)toks.n))) goto done;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  /* after the prompt: the sampler's grammar follows only generated tokens */
  if (grammar && pasada_sampler_set_grammar(s.sampler, grammar) != PASADA_OK) {
    rc = cli_fail("%s", pasada_last_error());
    goto done;
  }
  double prefill_s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;

  cli_gen_result r;
  rc = cli_generate(&s, o.n_predict, NULL, NULL, &r);
  if (s.stdout_tty) fputc('\n', stdout);
  fflush(stdout);
  if (rc) goto done;
  char spec[128];
  if (!o.no_stats)
    fprintf(stderr,
            "pasada: load %.2f s | prompt %zu tokens, %.1f tok/s | generated %d tokens, "
            "%.1f tok/s%s%s\n",
            s.load_s, toks.n, per_s((int64_t)toks.n, prefill_s), r.n_generated,
            per_s(r.n_generated, r.seconds), cli_spec_stats(&s, spec, sizeof spec),
            r.hit_context_end ? " | stopped: context full" : "");

done:
  cli_tokens_free(&toks);
  pasada_text_free(rendered);
  cli_session_close(&s);
  pasada_grammar_free(grammar); /* after the sampler that used it */
  free(owned);
  return rc;
}
