/* bench_grammar.c: `pasada bench --grammar / --json-schema`: what a grammar
 * costs per decode step. For each user count U, U sequences decode one
 * token each per step in one batch (as the server's continuous batching
 * does); each user follows the grammar with its own sampler. Timed per
 * step: the batched forward pass, the grammar's full token masks (every
 * user's, one after another: the CPU time), and the sampling phase run on
 * the context's threads (as the server does) with the grammar and, on the
 * same logits, without it. The masks are measured on grammars of their own
 * (compiled apart from the samplers'), so neither warms the other's
 * caches. A user whose grammar ends starts it again. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/base.h"
#include "grammar/grammar.h"
#include "tools/bench.h"

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

typedef struct {
  pasada_context *ctx;
  int32_t n_vocab, users;
  pasada_sampler **constrained, **plain;
  int32_t *tok, *plain_tok;
} sample_job;

static void sample_constrained(void *arg, int32_t i) {
  sample_job *j = arg;
  if (pasada_sampler_sample(j->constrained[i], pasada_get_logits(j->ctx, i), j->n_vocab,
                            &j->tok[i]))
    j->tok[i] = -1;
}

static void sample_plain(void *arg, int32_t i) {
  sample_job *j = arg;
  if (pasada_sampler_sample(j->plain[i], pasada_get_logits(j->ctx, i), j->n_vocab,
                            &j->plain_tok[i]))
    j->plain_tok[i] = -1;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The prompt: the model's chat template around a request for the output,
 * or that request alone. */
static int prompt_tokens(const pasada_model *m, int32_t **ids, size_t *n) {
  const pasada_tokenizer *tok = pasada_model_tokenizer(m);
  const char *ask = "Answer with the requested structured output only.";
  pasada_chat_template t;
  char *text = NULL;
  pasada_chat_message msg = {"user", ask};
  if (pasada_chat_detect(m, &t) == PASADA_OK && t != PASADA_CHAT_NONE)
    pasada_chat_render_model(m, t, &msg, 1, true, &text);
  int rc = pasada_tokenize(tok, text ? text : ask, strlen(text ? text : ask), true, true, ids, n);
  pasada_text_free(text);
  return rc;
}

/* One user count: fills row. */
static int run_users(const pa_bench_grammar_params *p, pasada_model *m, pasada_grammar *shared,
                     pasada_grammar *shared_masks, int32_t users, pa_bench_grammar_row *row) {
  const pasada_tokenizer *tok = pasada_model_tokenizer(m);
  const int32_t nv = pasada_model_n_vocab(m);
  int32_t *prompt = NULL;
  size_t n_prompt = 0;
  int rc = prompt_tokens(m, &prompt, &n_prompt);
  if (rc) return rc;
  pasada_context_params cp = pasada_context_default_params();
  cp.n_seq_max = users;
  cp.n_ctx = (int32_t)(n_prompt + (size_t)p->n_gen + 8) * users;
  cp.n_threads = p->n_threads;
  cp.kv_type = p->kv_type;
  cp.n_batch = (int32_t)n_prompt * users > 512 ? 512 : (int32_t)n_prompt * users;
  if (cp.n_batch < users) cp.n_batch = users;
  pasada_context *ctx = NULL;
  pasada_grammar **own = calloc(2 * (size_t)users, sizeof *own); /* the samplers', the masks' */
  pasada_sampler **con = calloc((size_t)users, sizeof *con),
                 **pl = calloc((size_t)users, sizeof *pl);
  pa_gmatcher **mt = calloc((size_t)users, sizeof *mt);
  int32_t *tok_b = malloc((size_t)users * sizeof *tok_b),
          *pos = malloc((size_t)users * sizeof *pos);
  int32_t *seq = malloc((size_t)users * sizeof *seq), *toks = malloc((size_t)users * sizeof *toks);
  int32_t *ptoks = malloc((size_t)users * sizeof *ptoks);
  int8_t *want = malloc((size_t)users);
  double *mask_ms = malloc(((size_t)p->n_gen + 1) * sizeof *mask_ms);
  uint64_t *bits = malloc(((size_t)nv + 63) / 64 * 8);
  if (!own || !con || !pl || !mt || !tok_b || !pos || !seq || !toks || !ptoks || !want ||
      !mask_ms || !bits) {
    rc = pa_error(PASADA_ERR_NOMEM, "bench: out of memory");
    goto out;
  }
  if ((rc = pasada_context_create(m, &cp, &ctx))) goto out;
  pasada_sampler_params sp = pasada_sampler_default_params();
  sp.temp = p->temp;
  sp.top_k = 0, sp.top_p = 1.0f,
  sp.min_p = 0.0f; /* the server's default chain: the whole vocabulary */
  for (int32_t u = 0; u < users; u++) {
    const pasada_grammar *g = shared, *gm = shared_masks;
    if (!g) {
      if ((rc = pasada_grammar_create(tok, p->gbnf, p->gbnf_len, NULL, &own[2 * u])) ||
          (rc = pasada_grammar_create(tok, p->gbnf, p->gbnf_len, NULL, &own[2 * u + 1])))
        goto out;
      g = own[2 * u], gm = own[2 * u + 1];
    }
    sp.seed = p->seed + (uint64_t)u;
    if ((rc = pasada_sampler_create(&sp, nv, &con[u])) ||
        (rc = pasada_sampler_create(&sp, nv, &pl[u])) || (rc = pa_gmatcher_create(gm, &mt[u])) ||
        (rc = pasada_sampler_set_grammar(con[u], g)))
      goto out;
  }
  /* the prompts, one sequence at a time (not timed) */
  for (int32_t u = 0; u < users && !rc; u++) {
    for (size_t done = 0; done < n_prompt && !rc;) {
      int32_t len =
          (int32_t)(n_prompt - done < (size_t)cp.n_batch ? n_prompt - done : (size_t)cp.n_batch);
      int32_t *ps = malloc((size_t)len * sizeof *ps), *ss = malloc((size_t)len * sizeof *ss);
      if (!ps || !ss) rc = pa_error(PASADA_ERR_NOMEM, "bench: out of memory");
      for (int32_t i = 0; !rc && i < len; i++) ps[i] = (int32_t)done + i, ss[i] = u;
      pasada_batch b = {
          .n_tokens = len, .token = prompt + done, .pos = ps, .seq_id = ss, .want_logits = NULL};
      if (!rc) rc = pasada_decode(ctx, &b);
      free(ps);
      free(ss);
      done += (size_t)len;
    }
    /* the first token of each user: from its own prompt's logits */
    if (!rc && pasada_sampler_sample(con[u], pasada_get_logits(ctx, -1), nv, &tok_b[u]))
      rc = PASADA_ERR_ARG;
    if (!rc) {
      pasada_sampler_accept(con[u], tok_b[u]);
      pa_gmatcher_accept(mt[u], tok_b[u]);
      pos[u] = (int32_t)n_prompt, seq[u] = u, want[u] = 1;
    }
  }
  if (rc) goto out;
  sample_job job = {ctx, nv, users, con, pl, toks, ptoks};
  double decode_sum = 0, mask_sum = 0, con_sum = 0, plain_sum = 0, mask_max = 0;
  row->users = users;
  row->restarts = 0;
  for (int32_t step = 0; step < p->n_gen; step++) {
    pasada_batch b = {
        .n_tokens = users, .token = tok_b, .pos = pos, .seq_id = seq, .want_logits = want};
    double t0 = now_ms();
    if ((rc = pasada_decode(ctx, &b))) goto out;
    double t1 = now_ms();
    /* the masks alone, every user's, one after another */
    for (int32_t u = 0; u < users; u++) {
      double a = now_ms();
      if (pa_gmatcher_mask(mt[u], bits) < 0) {
        rc = PASADA_ERR_ARG;
        goto out;
      }
      double d = now_ms() - a;
      if (d > mask_max) mask_max = d;
    }
    double t2 = now_ms();
    pasada_parallel_for(ctx, sample_constrained, &job, users);
    double t3 = now_ms();
    pasada_parallel_for(ctx, sample_plain, &job, users);
    double t4 = now_ms();
    decode_sum += t1 - t0, mask_sum += t2 - t1, con_sum += t3 - t2, plain_sum += t4 - t3;
    mask_ms[step] = t2 - t1;
    for (int32_t u = 0; u < users; u++) {
      if (toks[u] < 0) {
        rc = pa_error(PASADA_ERR_ARG, "bench: sampling under the grammar failed: %s",
                      pasada_last_error());
        goto out;
      }
      pasada_sampler_accept(con[u], toks[u]);
      pa_gmatcher_accept(mt[u], toks[u]);
      if (pasada_tokenizer_is_eog(tok, toks[u]) || pasada_sampler_grammar_must_end(con[u])) {
        pasada_sampler_reset(con[u]); /* the grammar again, from its start */
        pa_gmatcher_reset(mt[u]);
        row->restarts++;
      }
      tok_b[u] = toks[u];
      pos[u]++;
    }
    if (p->progress && (step + 1) % 32 == 0)
      fprintf(stderr, "pasada bench: %d users, step %d/%d\n", users, step + 1, p->n_gen);
  }
  const int32_t n = p->n_gen;
  row->steps = n;
  row->decode_ms = decode_sum / n;
  row->mask_ms = mask_sum / n;
  row->mask_user_max_ms = mask_max;
  qsort(mask_ms, (size_t)n, sizeof *mask_ms, cmp_double);
  row->mask_p50_ms = mask_ms[n / 2];
  row->mask_max_ms = mask_ms[n - 1];
  row->sample_grammar_ms = con_sum / n;
  row->sample_plain_ms = plain_sum / n;
out:
  for (int32_t u = 0; u < users; u++) {
    if (con) pasada_sampler_free(con[u]);
    if (pl) pasada_sampler_free(pl[u]);
    if (mt) pa_gmatcher_free(mt[u]);
    if (own) pasada_grammar_free(own[2 * u]), pasada_grammar_free(own[2 * u + 1]);
  }
  pasada_context_free(ctx);
  free(own), free(con), free(pl), free(mt), free(tok_b), free(pos), free(seq), free(toks),
      free(ptoks);
  free(want), free(mask_ms), free(bits);
  pasada_text_free(prompt);
  return rc;
}

int pa_bench_grammar_run(const pa_bench_grammar_params *p, pa_bench_grammar_result *r) {
  memset(r, 0, sizeof *r);
  if (p->n_gen < 1) return pa_error(PASADA_ERR_ARG, "bench: -n must be at least 1 with a grammar");
  pasada_model_params mp = pasada_model_default_params();
  mp.backend = p->backend;
  pasada_model *m = NULL;
  int rc = pasada_model_load(p->model_path, &mp, &m);
  if (rc) return rc;
  const pasada_tokenizer *tok = pasada_model_tokenizer(m);
  r->n_vocab = pasada_model_n_vocab(m);
  pa_gvocab_get(
      tok); /* the vocabulary index is the tokenizer's, built once: not the grammar's cost */
  pasada_grammar *g = NULL, *gm = NULL;
  double t0 = now_ms();
  rc = pasada_grammar_create(tok, p->gbnf, p->gbnf_len, NULL, &g);
  r->compile_ms = now_ms() - t0;
  if (!rc) r->n_states = g->n_states;
  if (!rc) rc = pasada_grammar_create(tok, p->gbnf, p->gbnf_len, NULL, &gm);
  for (int i = 0; !rc && i < p->n_users; i++) {
    if (p->progress)
      fprintf(stderr, "pasada bench: %d users, %d steps, %s grammar\n", p->users[i], p->n_gen,
              p->shared ? "one shared" : "each its own");
    rc = run_users(p, m, p->shared ? g : NULL, p->shared ? gm : NULL, p->users[i], &r->rows[i]);
    r->n_rows = i + 1;
  }
  pasada_grammar_free(g);
  pasada_grammar_free(gm);
  pasada_model_free(m);
  return rc;
}

void pa_bench_grammar_print(FILE *f, const pa_bench_grammar_params *p,
                            const pa_bench_grammar_result *r, bool json) {
  if (json) {
    fprintf(f,
            "{\"grammar\": {\"source\": \"%s\", \"states\": %u, \"compile_ms\": %.3f}, "
            "\"n_vocab\": %d, "
            "\"temp\": %g, \"shared\": %s, \"rows\": [",
            p->source, r->n_states, r->compile_ms, r->n_vocab, (double)p->temp,
            p->shared ? "true" : "false");
    for (int i = 0; i < r->n_rows; i++) {
      const pa_bench_grammar_row *w = &r->rows[i];
      fprintf(f,
              "%s{\"users\": %d, \"steps\": %d, \"decode_ms\": %.4f, \"mask_ms\": %.4f, "
              "\"mask_p50_ms\": %.4f, "
              "\"mask_max_ms\": %.4f, \"mask_user_max_ms\": %.4f, \"sample_plain_ms\": %.4f, "
              "\"sample_grammar_ms\": %.4f, \"mask_share\": %.5f, \"restarts\": %d}",
              i ? ", " : "", w->users, w->steps, w->decode_ms, w->mask_ms, w->mask_p50_ms,
              w->mask_max_ms, w->mask_user_max_ms, w->sample_plain_ms, w->sample_grammar_ms,
              w->decode_ms > 0 ? w->mask_ms / w->decode_ms : 0.0, w->restarts);
    }
    fprintf(f, "]}\n");
    return;
  }
  fprintf(f, "grammar %s: %u states, compiled in %.2f ms; vocabulary %d tokens; temp %g; %s\n",
          p->source, r->n_states, r->compile_ms, r->n_vocab, (double)p->temp,
          p->shared ? "one grammar shared by the users"
                    : "each user its own grammar (cold caches each)");
  fprintf(f, "%6s %6s %12s %28s %8s %26s\n", "users", "steps", "decode ms",
          "masks ms/step mean p50 max", "% step", "sampling ms plain/grammar");
  for (int i = 0; i < r->n_rows; i++) {
    const pa_bench_grammar_row *w = &r->rows[i];
    fprintf(f, "%6d %6d %12.2f %10.3f %8.3f %8.3f %7.1f%% %12.3f / %-10.3f\n", w->users, w->steps,
            w->decode_ms, w->mask_ms, w->mask_p50_ms, w->mask_max_ms,
            w->decode_ms > 0 ? 100.0 * w->mask_ms / w->decode_ms : 0.0, w->sample_plain_ms,
            w->sample_grammar_ms);
  }
  fprintf(f,
          "masks: every user's full token mask per step, one after another (one user's worst: %.3f "
          "ms);\n"
          "sampling: the step's draws on the context's threads, as the server runs them\n",
          r->n_rows ? r->rows[r->n_rows - 1].mask_user_max_ms : 0.0);
}
