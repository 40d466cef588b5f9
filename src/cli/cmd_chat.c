/* cmd_chat.c: `pasada chat`: an interactive conversation on stdin/stdout.
 *
 * The conversation and its KV cache live across turns. Each turn renders the
 * whole conversation with the chat template, tokenizes it, and compares it
 * with the tokens already in the cache: only the suffix after the first
 * difference is prefilled (the cache is cut back there when the re-tokenized
 * text differs from what was generated). When the conversation outgrows the
 * context, its oldest turns are dropped. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

static const char CHAT_HELP[] =
    "usage: pasada chat -m MODEL [options]\n"
    "\n"
    "An interactive conversation. Each line read from stdin is a user message; the\n"
    "answer streams to stdout, followed by a newline. A \"> \" prompt is written to\n"
    "stderr when stdin is a terminal. The conversation and its KV cache persist\n"
    "between turns: each turn prefills only the tokens the cache does not already\n"
    "hold. When the conversation outgrows the context, its oldest turns are dropped.\n"
    "After each answer a statistics line goes to stderr: tokens prefilled, tokens\n"
    "reused from the cache, tokens generated, and their speeds.\n"
    "\n"
    "commands (alone on a line):\n"
    "  /reset                    forget the conversation (the system message stays)\n"
    "  /exit                     leave (as does the end of stdin)\n"
    "\n"
    "conversation:\n"
    "  -n, --n-predict N         tokens per answer at most (default -1: until the end\n"
    "                            of the turn or a full context)\n"
    "  --chat-template NAME      use chatml, gemma or llama3 instead of the model's own\n"
    "                            template (its tokenizer.chat_template, a Jinja template)\n"
    "  --chat-template-file FILE use the Jinja chat template in FILE\n"
    "  --system TEXT             a system message at the start of the conversation\n";

static const char EXIT_HELP[] =
    "\n"
    "exit status: 0 at the end of input or /exit, 1 runtime error, 2 usage error\n";

static double per_s(int64_t n, double s) { return s > 0 ? (double)n / s : 0.0; }

typedef struct {
  pasada_chat_message *v; /* contents are malloc'd; roles are literals */
  size_t n, cap;
} conversation;

static bool conv_add(conversation *c, const char *role, const char *content, size_t len) {
  if (c->n == c->cap) {
    size_t cap = c->cap ? c->cap * 2 : 16;
    pasada_chat_message *v = realloc(c->v, cap * sizeof *v);
    if (!v) return false;
    c->v = v;
    c->cap = cap;
  }
  char *s = malloc(len + 1);
  if (!s) return false;
  memcpy(s, content, len);
  s[len] = '\0';
  c->v[c->n++] = (pasada_chat_message){role, s};
  return true;
}

/* Removes n messages from index i on. */
static void conv_remove(conversation *c, size_t i, size_t n) {
  for (size_t j = i; j < i + n; j++) free((char *)c->v[j].content);
  memmove(c->v + i, c->v + i + n, (c->n - i - n) * sizeof *c->v);
  c->n -= n;
}

static void conv_free(conversation *c) {
  conv_remove(c, 0, c->n);
  free(c->v);
}

/* Forgets the conversation and the cache (the system message stays). */
static void chat_reset(cli_session *s, conversation *conv, size_t first, cli_tokens *cached) {
  conv_remove(conv, first, conv->n - first);
  pasada_seq_truncate(s->ctx, 0, 0);
  s->pos = 0;
  cached->n = 0;
  pasada_sampler_reset(s->sampler);
}

/* Renders and tokenizes the conversation (ending with the assistant's
 * opening), dropping its oldest turns while it does not fit the context with
 * room for one token of answer. Returns CLI_OK, CLI_RUNTIME_ERROR (printed),
 * or -1 when the last message alone is too long (printed; it is removed). */
static int render_fitting(cli_session *s, const cli_chat *tmpl, conversation *conv, size_t first,
                          cli_tokens *toks) {
  int dropped = 0;
  for (;;) {
    char *text = NULL;
    if (cli_chat_render(s, tmpl, conv->v, conv->n, &text)) return CLI_RUNTIME_ERROR;
    int rc = cli_tokenize_prompt(s, text, strlen(text), toks);
    pasada_text_free(text);
    if (rc) return rc;
    if (toks->n < (size_t)s->n_ctx) break;
    if (conv->n - first <= 1) {
      fprintf(stderr,
              "pasada: this message makes a prompt of %zu tokens but the context holds %d: "
              "ignored (raise -c for longer messages)\n",
              toks->n, s->n_ctx);
      conv_remove(conv, conv->n - 1, 1);
      return -1;
    }
    /* the oldest turn: a user message and the answer after it */
    size_t n = conv->n - first >= 3 && !strcmp(conv->v[first + 1].role, "assistant") ? 2 : 1;
    conv_remove(conv, first, n);
    dropped++;
  }
  if (dropped)
    fprintf(stderr,
            "pasada: the conversation outgrew the context (%d tokens): dropped its %d oldest "
            "turn%s\n",
            s->n_ctx, dropped, dropped == 1 ? "" : "s");
  return CLI_OK;
}

int cmd_chat(int argc, char **argv) {
  static const struct option opts[] = {CLI_GEN_LONG_OPTIONS, {0, 0, 0, 0}};
  const char *cmd = "chat";
  cli_gen_options o;
  cli_gen_defaults(&o, -1);
  opterr = 0;
  optind = 0;
  int c;
  while ((c = getopt_long(argc, argv, ":m:n:t:c:h", opts, NULL)) != -1) {
    switch (c) {
      case 'h':
        fputs(CHAT_HELP, stdout);
        fputs(CLI_GEN_HELP, stdout);
        fputs(EXIT_HELP, stdout);
        return CLI_OK;
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

  cli_session s;
  int rc = cli_session_open(&s, &o);
  if (rc) return rc;
  cli_chat tmpl;
  if ((rc = cli_chat_open(&s, &o, &tmpl))) {
    cli_session_close(&s);
    return rc;
  }
  if (o.verbose) fprintf(stderr, "pasada: chat template %s\n", tmpl.name);

  conversation conv = {0};
  cli_tokens cached = {0}, toks = {0};
  cli_text reply = {0};
  char *line = NULL;
  size_t line_cap = 0;
  const bool interactive = isatty(STDIN_FILENO);
  size_t first = 0; /* index of the first message that may be dropped */
  if (o.system) {
    if (!conv_add(&conv, "system", o.system, strlen(o.system))) {
      rc = cli_fail("out of memory");
      goto done;
    }
    first = 1;
  }

  for (int turn = 1;;) {
    if (interactive) {
      fputs("> ", stderr);
      fflush(stderr);
    }
    ssize_t got = getline(&line, &line_cap, stdin);
    if (got < 0) {
      if (interactive) fputc('\n', stderr);
      break;
    }
    size_t len = (size_t)got;
    while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
    if (len == 0) continue;
    if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) break;
    if (!strcmp(line, "/reset")) {
      chat_reset(&s, &conv, first, &cached);
      fprintf(stderr, "pasada: conversation reset\n");
      continue;
    }
    if (memchr(line, '\0', len)) {
      fprintf(stderr, "pasada: a message cannot hold a NUL byte: ignored\n");
      continue;
    }
    if (!conv_add(&conv, "user", line, len)) {
      rc = cli_fail("out of memory");
      break;
    }
    int fit = render_fitting(&s, &tmpl, &conv, first, &toks);
    if (fit < 0) continue;
    if ((rc = fit)) break;

    /* Reuse the cache up to the first token that differs; feed the rest. */
    size_t common = 0;
    while (common < cached.n && common < toks.n && cached.v[common] == toks.v[common]) common++;
    if (common == toks.n && common > 0) common--; /* something must be decoded for fresh logits */
    if (common < cached.n) {
      pasada_seq_truncate(s.ctx, 0, (int32_t)common);
      common = (size_t)pasada_seq_length(s.ctx, 0); /* a recurrent model may drop more */
      s.pos = (int32_t)common;
      cached.n = common;
    }
    int32_t n_new = (int32_t)(toks.n - common);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    if ((rc = cli_prefill(&s, toks.v + common, n_new))) break;
    /* a recurrent model's state where the prompt ends: the next turn's
     * rendering of this answer may differ from the tokens generated */
    if ((rc = pasada_seq_snapshot(s.ctx, 0))) {
      rc = cli_fail("%s", pasada_last_error());
      break;
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    double prefill_s = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
    if (!cli_tokens_push(&cached, toks.v + common, (size_t)n_new)) {
      rc = cli_fail("out of memory");
      break;
    }

    cli_gen_result r;
    char spec[128];
    reply.n = 0;
    if (!cli_text_append(&reply, "", 0)) {
      rc = cli_fail("out of memory");
      break;
    }
    rc = cli_generate(&s, o.n_predict, &cached, &reply, &r);
    fputc('\n', stdout);
    fflush(stdout);
    if (rc) break;
    if (!conv_add(&conv, "assistant", reply.s, reply.n)) {
      rc = cli_fail("out of memory");
      break;
    }
    if (r.hit_context_end)
      fprintf(stderr,
              "pasada: the context is full (%d tokens): the answer was cut; the oldest "
              "turns will be dropped\n",
              s.n_ctx);
    if (!o.no_stats)
      fprintf(stderr,
              "pasada: turn %d | prefilled %d tokens (reused %zu cached), %.1f tok/s | "
              "generated %d tokens, %.1f tok/s%s\n",
              turn, n_new, common, per_s(n_new, prefill_s), r.n_generated,
              per_s(r.n_generated, r.seconds), cli_spec_stats(&s, spec, sizeof spec));
    turn++;
  }

done:
  free(line);
  cli_text_free(&reply);
  cli_tokens_free(&toks);
  cli_tokens_free(&cached);
  conv_free(&conv);
  cli_chat_close(&tmpl);
  cli_session_close(&s);
  return rc;
}
