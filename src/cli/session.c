/* session.c: what `run` and `chat` do alike: load the model and make a
 * context, sampler and streaming detokenizer; render a conversation with the
 * chat template (the model's own Jinja one, a file, or a built-in); tokenize
 * prompts; prefill them in batches; generate and stream tokens to stdout. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int cli_session_open(cli_session *s, const cli_gen_options *o) {
  *s = (cli_session){0};
  s->stdout_tty = isatty(STDOUT_FILENO);
  double t0 = now_s();
  pasada_model_params mp = pasada_model_default_params();
  mp.backend = o->backend; /* NULL: the default, cpu */
  if (pasada_model_load(o->model_path, &mp, &s->model) != PASADA_OK)
    return cli_fail("%s", pasada_last_error());
  s->tok = pasada_model_tokenizer(s->model);
  s->n_vocab = pasada_model_n_vocab(s->model);

  pasada_context_params cp = pasada_context_default_params();
  cp.n_ctx = o->n_ctx;
  cp.n_threads = o->n_threads;
  cp.n_seq_max = 1;
  cp.kv_type = o->kv_type;
  cp.n_rollback = cli_spec_rollback(s->model, o);
  if (pasada_context_create(s->model, &cp, &s->ctx) != PASADA_OK) {
    int rc = cli_fail("%s", pasada_last_error());
    cli_session_close(s);
    return rc;
  }
  s->n_ctx = pasada_context_n_ctx(s->ctx);
  s->n_batch = cp.n_batch > 0 ? cp.n_batch : 512;
  if (pasada_sampler_create(&o->sampling, s->n_vocab, &s->sampler) != PASADA_OK ||
      pasada_detok_create(s->tok, false, &s->detok) != PASADA_OK) {
    int rc = cli_fail("%s", pasada_last_error());
    cli_session_close(s);
    return rc;
  }
  s->load_s = now_s() - t0;
  if (cli_spec_open(s, o) != CLI_OK) {
    cli_session_close(s);
    return CLI_RUNTIME_ERROR;
  }
  if (o->verbose) {
    const pasada_sampler_params *p = &o->sampling;
    fprintf(stderr,
            "pasada: model %s (%s, %d tokens), context %d, batch %d, backend %s, loaded in %.2f s\n"
            "pasada: sampler temp %g, top-k %d, top-p %g, min-p %g, repeat penalty %g over %d, "
            "presence %g, frequency %g, seed %llu\n",
            o->model_path, pasada_model_arch(s->model), s->n_vocab, s->n_ctx, s->n_batch,
            pasada_context_backend(s->ctx), s->load_s,
            (double)p->temp, p->top_k, (double)p->top_p, (double)p->min_p,
            (double)p->repeat_penalty, p->repeat_last_n, (double)p->presence_penalty,
            (double)p->frequency_penalty, (unsigned long long)pasada_sampler_seed(s->sampler));
  }
  return CLI_OK;
}

void cli_session_close(cli_session *s) {
  cli_spec_close(s);
  pasada_detok_free(s->detok);
  pasada_sampler_free(s->sampler);
  pasada_context_free(s->ctx);
  pasada_model_free(s->model);
  *s = (cli_session){0};
}

int cli_session_template(cli_session *s, const cli_gen_options *o, pasada_chat_template *out) {
  if (o->chat_template) {
    if (pasada_chat_from_name(o->chat_template, out) != PASADA_OK)
      return cli_fail("%s", pasada_last_error());
    return CLI_OK;
  }
  if (pasada_chat_detect(s->model, out) != PASADA_OK) {
    const char *why = pasada_last_error();
    if (strstr(why, "--chat-template")) return cli_fail("%s: %s", o->model_path, why);
    return cli_fail("%s: %s; name a chat template with --chat-template (chatml, gemma, llama3)",
                    o->model_path, why);
  }
  if (*out == PASADA_CHAT_NONE)
    return cli_fail(
        "%s: the model has no chat template; name one with --chat-template "
        "(chatml, gemma, llama3) or give one with --chat-template-file",
        o->model_path);
  return CLI_OK;
}

/* The text of token id (special tokens as their text), "" for -1; NULL
 * when memory runs out. */
static char *token_text(const pasada_tokenizer *tok, int32_t id) {
  const size_t n = id >= 0 ? pasada_token_to_piece(tok, id, true, NULL, 0) : 0;
  char *s = malloc(n + 1);
  if (!s) return NULL;
  if (n) pasada_token_to_piece(tok, id, true, s, n);
  s[n] = '\0';
  return s;
}

/* Parses a Jinja template's source into c (its name for --verbose). */
static int chat_parse(cli_chat *c, const char *src, size_t len, const char *what) {
  if (pasada_template_parse(src, len, &c->jinja) != PASADA_OK) return PASADA_ERR_FORMAT;
  snprintf(c->name, sizeof c->name, "%s (Jinja)", what);
  return PASADA_OK;
}

int cli_chat_open(cli_session *s, const cli_gen_options *o, cli_chat *c) {
  *c = (cli_chat){0};
  if (o->chat_template) { /* a built-in by name */
    int rc = cli_session_template(s, o, &c->builtin);
    if (!rc) snprintf(c->name, sizeof c->name, "%s", pasada_chat_name(c->builtin));
    return rc;
  }
  if (o->chat_template_file) {
    char *src = NULL;
    size_t len = 0;
    if (cli_read_file(o->chat_template_file, &src, &len)) return CLI_RUNTIME_ERROR;
    const int prc = chat_parse(c, src, len, o->chat_template_file);
    free(src);
    c->bos = token_text(s->tok, pasada_tokenizer_bos(s->tok));
    c->eos = token_text(s->tok, pasada_tokenizer_eos(s->tok));
    if (prc) {
      int rc = cli_fail("%s: %s", o->chat_template_file, pasada_last_error());
      cli_chat_close(c);
      return rc;
    }
    if (!c->bos || !c->eos) {
      cli_chat_close(c);
      return cli_fail("out of memory");
    }
    return CLI_OK;
  }
  char *src = NULL;
  if (pasada_model_chat_template(s->model, &src, &c->bos, &c->eos) == PASADA_OK) {
    const int prc = chat_parse(c, src, strlen(src), "the model's own");
    pasada_text_free(src);
    if (!prc) return CLI_OK;
    /* a template this engine cannot read: the family's built-in, if any */
    fprintf(stderr,
            "pasada: warning: %s: the model's chat template does not parse (%s); trying a built-in "
            "one\n",
            o->model_path, pasada_last_error());
    cli_chat_close(c);
  }
  int rc = cli_session_template(s, o, &c->builtin);
  if (!rc) snprintf(c->name, sizeof c->name, "%s (built-in)", pasada_chat_name(c->builtin));
  return rc;
}

int cli_chat_render(cli_session *s, const cli_chat *c, const pasada_chat_message *msgs, size_t n,
                    char **out) {
  *out = NULL;
  if (!c->jinja) {
    if (pasada_chat_render_model(s->model, c->builtin, msgs, n, true, out) != PASADA_OK)
      return cli_fail("rendering the chat template: %s", pasada_last_error());
    return CLI_OK;
  }
  /* the variables transformers' apply_chat_template passes */
  cJSON *vars = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(vars, "messages");
  bool ok = vars && list;
  for (size_t i = 0; ok && i < n; i++) {
    cJSON *m = cJSON_CreateObject();
    ok = m && cJSON_AddStringToObject(m, "role", msgs[i].role) &&
         cJSON_AddStringToObject(m, "content", msgs[i].content);
    if (m) cJSON_AddItemToArray(list, m);
  }
  ok = ok && cJSON_AddNullToObject(vars, "tools") && cJSON_AddNullToObject(vars, "documents") &&
       cJSON_AddBoolToObject(vars, "add_generation_prompt", true) &&
       cJSON_AddStringToObject(vars, "bos_token", c->bos ? c->bos : "") &&
       cJSON_AddStringToObject(vars, "eos_token", c->eos ? c->eos : "");
  char *json = ok ? cJSON_PrintUnformatted(vars) : NULL;
  cJSON_Delete(vars);
  if (!json) return cli_fail("out of memory");
  const int rc = pasada_template_render(c->jinja, json, strlen(json), out);
  free(json);
  if (rc != PASADA_OK) return cli_fail("rendering the chat template: %s", pasada_last_error());
  return CLI_OK;
}

void cli_chat_close(cli_chat *c) {
  pasada_template_free(c->jinja);
  pasada_text_free(c->bos);
  pasada_text_free(c->eos);
  *c = (cli_chat){0};
}

int cli_tokenize_prompt(cli_session *s, const char *text, size_t len, cli_tokens *out) {
  int32_t *ids = NULL;
  size_t n = 0;
  if (pasada_tokenize(s->tok, text, len, false, true, &ids, &n) != PASADA_OK)
    return cli_fail("tokenizing the prompt: %s", pasada_last_error());
  int32_t bos = pasada_tokenizer_bos(s->tok);
  bool ok = true;
  out->n = 0;
  if (pasada_tokenizer_add_bos(s->tok) && bos >= 0 && (n == 0 || ids[0] != bos))
    ok = cli_tokens_push(out, &bos, 1);
  ok = ok && cli_tokens_push(out, ids, n);
  pasada_text_free(ids);
  if (!ok) return cli_fail("out of memory for %zu prompt tokens", n);
  return CLI_OK;
}

int cli_prefill(cli_session *s, const int32_t *tokens, int32_t n) {
  int32_t *pos = malloc((size_t)s->n_batch * sizeof *pos);
  int32_t *seq = calloc((size_t)s->n_batch, sizeof *seq);
  if (!pos || !seq) {
    free(pos);
    free(seq);
    return cli_fail("out of memory for a batch of %d tokens", s->n_batch);
  }
  int rc = CLI_OK;
  for (int32_t done = 0; done < n;) {
    int32_t len = n - done < s->n_batch ? n - done : s->n_batch;
    for (int32_t i = 0; i < len; i++) pos[i] = s->pos + i;
    pasada_batch b = {
        .n_tokens = len, .token = tokens + done, .pos = pos, .seq_id = seq, .want_logits = NULL};
    if (pasada_decode(s->ctx, &b) != PASADA_OK) {
      rc = cli_fail("%s", pasada_last_error());
      break;
    }
    for (int32_t i = 0; i < len; i++) pasada_sampler_accept(s->sampler, tokens[done + i]);
    if (s->spec_mode && !cli_tokens_push(&s->hist, tokens + done, (size_t)len)) {
      rc = cli_fail("out of memory");
      break;
    }
    s->pos += len;
    done += len;
  }
  free(pos);
  free(seq);
  return rc;
}

static void emit(const char *text, size_t n, cli_text *reply) {
  if (!n) return;
  fwrite(text, 1, n, stdout);
  fflush(stdout);
  if (reply) cli_text_append(reply, text, n);
}

int cli_generate(cli_session *s, int32_t n_predict, cli_tokens *fed, cli_text *reply,
                 cli_gen_result *r) {
  if (s->spec_mode) return cli_generate_spec(s, n_predict, fed, reply, r);
  *r = (cli_gen_result){0};
  double t0 = now_s();
  char piece[PASADA_DETOK_PIECE_MAX];
  const int32_t seq = 0;
  const float *logits = pasada_get_logits(s->ctx, -1);
  int rc = CLI_OK;
  pasada_detok_reset(s->detok);
  while (n_predict < 0 || r->n_generated < n_predict) {
    if (!logits) {
      rc = cli_fail("no logits to sample from (nothing was decoded)");
      break;
    }
    int32_t tok;
    if (pasada_sampler_sample(s->sampler, logits, s->n_vocab, &tok) != PASADA_OK) {
      rc = cli_fail("%s", pasada_last_error());
      break;
    }
    pasada_sampler_accept(s->sampler, tok);
    if (pasada_tokenizer_is_eog(s->tok, tok)) {
      r->hit_eog = true;
      break;
    }
    r->n_generated++;
    emit(piece, pasada_detok_push(s->detok, tok, piece, sizeof piece), reply);
    if (n_predict >= 0 && r->n_generated >= n_predict) break; /* its logits are not needed */
    if (s->pos >= s->n_ctx) {
      r->hit_context_end = true;
      break;
    }
    pasada_batch b = {
        .n_tokens = 1, .token = &tok, .pos = &s->pos, .seq_id = &seq, .want_logits = NULL};
    if (pasada_decode(s->ctx, &b) != PASADA_OK) {
      rc = cli_fail("%s", pasada_last_error());
      break;
    }
    s->pos++;
    if (fed && !cli_tokens_push(fed, &tok, 1)) {
      rc = cli_fail("out of memory");
      break;
    }
    logits = pasada_get_logits(s->ctx, -1);
  }
  emit(piece, pasada_detok_flush(s->detok, piece, sizeof piece), reply);
  r->seconds = now_s() - t0;
  return rc;
}
