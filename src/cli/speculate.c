/* speculate.c: speculative generation for `run` and `chat`: each step
 * drafts tokens (prompt lookup, or a draft model), decodes the pending
 * token and the draft in one batch, keeps the longest prefix the sampler
 * accepts (runtime/speculative.h) and rolls the cache back past it. The
 * tokens are those cli_generate gives for the same sampler and seed. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "runtime/speculative.h"

enum { LOOKUP_NGRAM = 3 };

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The speculation o asks for (one mode; cli_spec_open refuses more). */
static pa_spec_mode mode_of(const cli_gen_options *o) {
  return o->draft_path ? PA_SPEC_DRAFT
         : o->lookup   ? PA_SPEC_LOOKUP
         : o->mtp      ? PA_SPEC_MTP
                       : PA_SPEC_OFF;
}

/* The most tokens one step drafts (0: no speculation). */
static int32_t draft_max_of(const cli_gen_options *o) {
  const pa_spec_mode mode = mode_of(o);
  return mode == PA_SPEC_OFF  ? 0
         : o->draft_max > 0 ? o->draft_max
                            : pa_spec_default_draft_max(mode);
}

int32_t cli_spec_rollback(const pasada_model *m, const cli_gen_options *o) {
  const int32_t k = draft_max_of(o);
  return k > 0 && pasada_model_is_recurrent(m) ? pa_spec_rollback_states(k) : 0;
}

int cli_spec_open(cli_session *s, const cli_gen_options *o) {
  if ((o->draft_path != NULL) + o->lookup + o->mtp > 1)
    return cli_fail("--draft, --lookup and --mtp each choose how to draft: use one of them");
  s->spec_mode = mode_of(o);
  if (s->spec_mode == PA_SPEC_OFF) return CLI_OK;
  s->draft_max = draft_max_of(o);
  s->spec_greedy = o->sampling.temp <= 0;
  s->lookup_ngram = o->lookup_ngram > 0 ? o->lookup_ngram : LOOKUP_NGRAM;
  s->spec_scratch = malloc((size_t)s->n_vocab * sizeof *s->spec_scratch);
  if (!s->spec_scratch) return cli_fail("out of memory");
  /* the drafters' samplers: the session's settings and seed */
  pasada_sampler_params sp = o->sampling;
  if (sp.seed == PASADA_SEED_RANDOM) sp.seed = pasada_sampler_seed(s->sampler);
  if (s->spec_mode == PA_SPEC_DRAFT) {
    double t0 = now_s();
    pasada_model_params mp = pasada_model_default_params();
    mp.backend = o->backend;
    if (pa_spec_draft_open(o->draft_path, s->model, &mp, 1, s->n_ctx, o->n_threads, &sp,
                           &s->draft) != PASADA_OK)
      return cli_fail("%s", pasada_last_error());
    s->load_s += now_s() - t0;
  }
  if (s->spec_mode == PA_SPEC_MTP) {
    if (pa_spec_mtp_open(s->ctx, 1, s->n_ctx, o->n_threads, &sp, &s->mtp) != PASADA_OK)
      return cli_fail("--mtp: %s", pasada_last_error());
  }
  return CLI_OK;
}

void cli_spec_close(cli_session *s) {
  pa_spec_draft_free(s->draft);
  s->draft = NULL;
  pa_spec_mtp_free(s->mtp);
  s->mtp = NULL;
  free(s->spec_scratch);
  s->spec_scratch = NULL;
  cli_tokens_free(&s->hist);
}

const char *cli_spec_stats(const cli_session *s, char *buf, size_t cap) {
  if (s->spec_mode == PA_SPEC_OFF) return "";
  snprintf(buf, cap, " | %s: drafted %lld, accepted %lld (%.0f%%) in %lld steps",
           pa_spec_mode_name((pa_spec_mode)s->spec_mode), (long long)s->spec_drafted,
           (long long)s->spec_accepted,
           s->spec_drafted ? 100.0 * (double)s->spec_accepted / (double)s->spec_drafted : 0.0,
           (long long)s->spec_steps);
  return buf;
}

static void emit(const char *text, size_t n, cli_text *reply) {
  if (!n) return;
  fwrite(text, 1, n, stdout);
  fflush(stdout);
  if (reply) cli_text_append(reply, text, n);
}

/* One token drawn and accepted by the sampler: either the end (true) or
 * counted and printed. */
static bool take(cli_session *s, int32_t tok, int32_t n_predict, cli_text *reply,
                 cli_gen_result *r) {
  char piece[PASADA_DETOK_PIECE_MAX];
  if (pasada_tokenizer_is_eog(s->tok, tok)) {
    r->hit_eog = true;
    return true;
  }
  r->n_generated++;
  emit(piece, pasada_detok_push(s->detok, tok, piece, sizeof piece), reply);
  return n_predict >= 0 && r->n_generated >= n_predict;
}

int cli_generate_spec(cli_session *s, int32_t n_predict, cli_tokens *fed, cli_text *reply,
                      cli_gen_result *r) {
  *r = (cli_gen_result){0};
  const double t0 = now_s();
  const int32_t seq = 0;
  int32_t token[PA_SPEC_DRAFT_MAX + 1], pos[PA_SPEC_DRAFT_MAX + 1], seqs[PA_SPEC_DRAFT_MAX + 1];
  int32_t emitted[PA_SPEC_DRAFT_MAX + 1];
  int8_t want[PA_SPEC_DRAFT_MAX + 1];
  pa_spec_pace pace = {0};
  char piece[PASADA_DETOK_PIECE_MAX];
  int rc = CLI_OK;
  if (s->hist.n > (size_t)s->pos) s->hist.n = (size_t)s->pos; /* the caller truncated the cache */
  pasada_detok_reset(s->detok);
  const float *logits = pasada_get_logits(s->ctx, -1);
  int32_t tok;
  if (!logits) {
    rc = cli_fail("no logits to sample from (nothing was decoded)");
    goto out;
  }
  if (n_predict == 0) goto out;
  if (pasada_sampler_sample(s->sampler, logits, s->n_vocab, &tok) != PASADA_OK) {
    rc = cli_fail("%s", pasada_last_error());
    goto out;
  }
  pasada_sampler_accept(s->sampler, tok);
  if (take(s, tok, n_predict, reply, r)) goto out;
  for (;;) {
    /* tok is drawn, not yet decoded */
    if (s->pos >= s->n_ctx) {
      r->hit_context_end = true;
      break;
    }
    if (!cli_tokens_push(&s->hist, &tok, 1)) {
      rc = cli_fail("out of memory");
      break;
    }
    const int32_t limit = n_predict < 0 ? PA_SPEC_DRAFT_MAX + 1 : n_predict - r->n_generated;
    int32_t k = pa_spec_pace_next(&pace, s->draft_max);
    if (k > limit - 1) k = limit - 1;
    if (k > s->n_ctx - s->pos - 1) k = s->n_ctx - s->pos - 1;
    const float *q = NULL;
    int32_t n_draft = 0;
    if (k > 0 && s->spec_mode == PA_SPEC_LOOKUP) {
      n_draft = pa_spec_lookup(s->hist.v, (int32_t)s->hist.n, s->lookup_ngram, 1, k, token + 1);
    } else if (k > 0) {
      /* greedy: the draft's argmax, a point mass; else a draw from its
       * distribution, whose rows verification weighs against the target's */
      n_draft = s->spec_mode == PA_SPEC_MTP
                    ? pa_spec_mtp_propose(s->mtp, 0, s->hist.v, (int32_t)s->hist.n, k,
                                          s->spec_greedy, token + 1, &q)
                    : pa_spec_draft_propose(s->draft, 0, s->hist.v, (int32_t)s->hist.n, k,
                                            s->spec_greedy, token + 1, &q);
      if (n_draft < 0) {
        rc = cli_fail("%s: %s",
                      s->spec_mode == PA_SPEC_MTP ? "multi-token prediction" : "draft model",
                      pasada_last_error());
        break;
      }
      if (s->spec_greedy) q = NULL;
    }
    token[0] = tok;
    for (int32_t i = 0; i <= n_draft; i++) {
      pos[i] = s->pos + i;
      seqs[i] = seq;
      want[i] = 1;
    }
    pasada_batch b = {
        .n_tokens = n_draft + 1, .token = token, .pos = pos, .seq_id = seqs, .want_logits = want};
    if (pasada_decode(s->ctx, &b) != PASADA_OK) {
      rc = cli_fail("%s", pasada_last_error());
      break;
    }
    int32_t n_out, n_acc;
    if (pa_spec_verify(s->ctx, 0, s->sampler, s->tok, token + 1, n_draft, q, s->n_vocab,
                       s->spec_scratch, limit, emitted, &n_out, &n_acc) != PASADA_OK) {
      rc = cli_fail("%s", pasada_last_error());
      break;
    }
    s->spec_steps++;
    s->spec_drafted += n_out < n_draft ? n_out : n_draft; /* the drafts judged */
    s->spec_accepted += n_acc;
    pa_spec_pace_update(&pace, n_draft, n_acc, s->draft_max);
    bool stop = false;
    for (int32_t i = 0; i < n_out && !stop; i++) stop = take(s, emitted[i], n_predict, reply, r);
    /* the cache keeps the pending token and every emitted one but the last */
    if (fed && !cli_tokens_push(fed, token, (size_t)n_out)) rc = cli_fail("out of memory");
    if (n_out > 1 && !cli_tokens_push(&s->hist, token + 1, (size_t)n_out - 1))
      rc = cli_fail("out of memory");
    s->pos += n_out;
    pasada_seq_truncate(s->ctx, seq, s->pos);
    /* a recurrent model's rollback states fell short */
    if (pasada_seq_length(s->ctx, seq) != s->pos) {
      rc = cli_fail("rolling the rejected drafts back lost the sequence (%d of %d positions kept)",
                    pasada_seq_length(s->ctx, seq), s->pos);
      break;
    }
    tok = emitted[n_out - 1];
    if (stop || rc) break;
  }
out:
  emit(piece, pasada_detok_flush(s->detok, piece, sizeof piece), reply);
  r->seconds = now_s() - t0;
  return rc;
}
