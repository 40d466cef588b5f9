/* session.c: what `run` and `chat` do alike: load the model and make a
 * context, sampler and streaming detokenizer; tokenize prompts; prefill them
 * in batches; generate and stream tokens to stdout. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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
        "(chatml, gemma, llama3)",
        o->model_path);
  return CLI_OK;
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
