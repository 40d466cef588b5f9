/* speculative.c: speculative decoding's drafts and their verification:
 * prompt lookup (n-gram matching over the tokens so far), a draft model's
 * proposals (its own context, cache kept in step with the target's text),
 * and the acceptance rule that keeps the target's output distribution. */
#include "runtime/speculative.h"

#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "runtime/sampler.h"

bool pa_spec_mode_from_name(const char *name, pa_spec_mode *out) {
  static const char *names[] = {"off", "lookup", "draft"};
  for (int i = 0; i < 3; i++)
    if (name && strcmp(name, names[i]) == 0) {
      *out = (pa_spec_mode)i;
      return true;
    }
  return false;
}

const char *pa_spec_mode_name(pa_spec_mode mode) {
  return mode == PA_SPEC_LOOKUP ? "lookup" : mode == PA_SPEC_DRAFT ? "draft" : "off";
}

/* ---- prompt lookup ---- */

int32_t pa_spec_lookup(const int32_t *hist, int32_t n, int32_t ngram_max, int32_t ngram_min,
                       int32_t max, int32_t *out) {
  if (ngram_min < 1) ngram_min = 1;
  for (int32_t g = ngram_max; g >= ngram_min; g--) {
    if (g >= n) continue;
    const int32_t *key = hist + n - g;
    /* the latest earlier start i (i + g <= n - 1: a continuation exists) */
    for (int32_t i = n - g - 1; i >= 0; i--) {
      if (hist[i] != key[0] || memcmp(hist + i, key, (size_t)g * sizeof *key) != 0) continue;
      int32_t m = 0;
      while (m < max && i + g + m < n) {
        out[m] = hist[i + g + m];
        m++;
      }
      return m;
    }
  }
  return 0;
}

/* ---- pacing ---- */

int32_t pa_spec_pace_next(pa_spec_pace *p, int32_t max) {
  if (p->pause > 0) {
    p->pause--;
    return 0;
  }
  if (p->k <= 0 || p->k > max) p->k = max;
  return p->k;
}

void pa_spec_pace_update(pa_spec_pace *p, int32_t drafted, int32_t accepted, int32_t max) {
  if (drafted <= 0) return;
  if (accepted == 0) {
    p->misses++;
    if (p->misses >= 2) {
      const int32_t shift = p->misses - 2 < 4 ? p->misses - 2 : 4;
      p->pause = (1 << shift) < PA_SPEC_PAUSE_MAX ? 1 << shift : PA_SPEC_PAUSE_MAX;
    }
  } else {
    p->misses = 0;
  }
  if (accepted == drafted)
    p->k = drafted * 2 < max ? drafted * 2 : max;
  else
    p->k = accepted + 1;
}

/* ---- acceptance ---- */

/* Index drawn from weights w[0..n) (sum `total` > 0) with uniform u. */
static int32_t draw_weights(const float *w, int32_t n, double total, double u) {
  double target = u * total, acc = 0;
  int32_t last = -1;
  for (int32_t i = 0; i < n; i++) {
    if (w[i] <= 0) continue;
    acc += w[i];
    last = i;
    if (target < acc) return i;
  }
  return last; /* rounding: the last token with weight */
}

int pa_spec_accept(pasada_sampler *s, const float *logits, int32_t n_vocab, int32_t draft,
                   const float *q, float *scratch, int32_t *out, bool *accepted) {
  *accepted = false;
  if (draft < 0 || draft >= n_vocab || !q) {
    const int st = pasada_sampler_sample(s, logits, n_vocab, out);
    *accepted = st == PASADA_OK && draft >= 0 && *out == draft;
    return st;
  }
  *out = -1;
  const int st = pa_sampler_distribution(s, logits, n_vocab, scratch);
  if (st) return st;
  const double pd = scratch[draft], qd = q[draft];
  const double u = pa_sampler_uniform(s);
  /* u < p/q, without dividing (q(d) > 0 for a drawn d; q(d) = 0 accepts
   * only what p allows, with certainty) */
  if (qd > 0 ? u * qd < pd : pd > 0) {
    *out = draft;
    *accepted = true;
    return PASADA_OK;
  }
  double total = 0;
  for (int32_t i = 0; i < n_vocab; i++) {
    const float r = scratch[i] - q[i];
    scratch[i] = r > 0 ? r : 0;
    total += scratch[i];
  }
  if (!(total > 0)) { /* p <= q everywhere: p == q up to rounding; draw from p */
    const int st2 = pa_sampler_distribution(s, logits, n_vocab, scratch);
    if (st2) return st2;
    for (int32_t i = 0; i < n_vocab; i++) total += scratch[i];
    if (!(total > 0)) return pa_error(PASADA_ERR_ARG, "speculative: no token has probability");
  }
  *out = draw_weights(scratch, n_vocab, total, pa_sampler_uniform(s));
  return PASADA_OK;
}

int pa_spec_verify(pasada_context *ctx, int32_t row0, pasada_sampler *s,
                   const pasada_tokenizer *tok, const int32_t *draft, int32_t n_draft,
                   const float *q, int32_t n_vocab, float *scratch, int32_t limit, int32_t *out,
                   int32_t *n_out, int32_t *n_accepted) {
  *n_out = *n_accepted = 0;
  for (int32_t i = 0; i <= n_draft && *n_out < limit; i++) {
    const float *logits = pasada_get_logits(ctx, row0 + i);
    if (!logits) return pa_error(PASADA_ERR_ARG, "speculative: row %d has no logits", row0 + i);
    const int32_t d = i < n_draft ? draft[i] : -1;
    bool ok;
    int32_t x;
    const int st = pa_spec_accept(s, logits, n_vocab, d, q ? q + (size_t)i * (size_t)n_vocab : NULL,
                                  scratch, &x, &ok);
    if (st) return st;
    pasada_sampler_accept(s, x);
    out[(*n_out)++] = x;
    if (ok) ++*n_accepted;
    if (!ok || (tok && pasada_tokenizer_is_eog(tok, x))) break;
  }
  return PASADA_OK;
}

/* ---- draft model ---- */

struct pa_spec_draft {
  pasada_model *model;
  pasada_context *ctx;
  pasada_sampler *greedy;   /* argmax proposals */
  pasada_sampler **sampler; /* per sequence: sampled proposals */
  int32_t n_seq, n_ctx, n_batch, n_vocab;
  /* a draft with recurrent layers rolls back only into its multi-token
   * passes (n_rollback 2): per sequence the length its last catch-up
   * reached, which the next one starts one short of */
  bool recurrent;
  int32_t *caught;
  int32_t **held; /* per sequence: the tokens its cache holds */
  float **q;      /* per sequence: rows of n_vocab for sampled drafts (made on first use) */
  int32_t *q_rows;
  int32_t *pos, *seqs;
};

int pa_spec_vocab_check(const pasada_model *target, const pasada_model *draft) {
  const int32_t nt = pasada_model_n_vocab(target), nd = pasada_model_n_vocab(draft);
  if (nt != nd)
    return pa_error(PASADA_ERR_ARG,
                    "draft model: its vocabulary has %d tokens, the target's %d: a draft "
                    "must share the target's vocabulary",
                    nd, nt);
  const pasada_tokenizer *a = pasada_model_tokenizer(target), *b = pasada_model_tokenizer(draft);
  char pa[256], pb[256];
  for (int32_t id = 0; id < nt; id++) {
    const size_t la = pasada_token_to_piece(a, id, true, pa, sizeof pa);
    const size_t lb = pasada_token_to_piece(b, id, true, pb, sizeof pb);
    if (la != lb || memcmp(pa, pb, la < sizeof pa ? la : sizeof pa) != 0)
      return pa_error(PASADA_ERR_ARG,
                      "draft model: token %d is '%.*s' there but '%.*s' in the target: a draft "
                      "must share the target's vocabulary",
                      id, (int)(lb < 40 ? lb : 40), pb, (int)(la < 40 ? la : 40), pa);
  }
  return PASADA_OK;
}

void pa_spec_draft_free(pa_spec_draft *d) {
  if (!d) return;
  pasada_context_free(d->ctx);
  pasada_model_free(d->model);
  pasada_sampler_free(d->greedy);
  for (int32_t i = 0; d->sampler && i < d->n_seq; i++) pasada_sampler_free(d->sampler[i]);
  for (int32_t i = 0; d->held && i < d->n_seq; i++) free(d->held[i]);
  for (int32_t i = 0; d->q && i < d->n_seq; i++) free(d->q[i]);
  free(d->sampler);
  free(d->held);
  free(d->q);
  free(d->q_rows);
  free(d->caught);
  free(d->pos);
  free(d->seqs);
  free(d);
}

int pa_spec_draft_open(const char *path, const pasada_model *target,
                       const pasada_model_params *mparams, int32_t n_seq, int32_t n_ctx,
                       int32_t n_threads, const pasada_sampler_params *sampling,
                       pa_spec_draft **out) {
  *out = NULL;
  pa_spec_draft *d = calloc(1, sizeof *d);
  if (!d) return pa_error(PASADA_ERR_NOMEM, "draft model: out of memory");
  int st = pasada_model_load(path, mparams, &d->model);
  if (st) {
    pa_spec_draft_free(d);
    return pa_error(st, "draft model %s: %s", path, pasada_last_error());
  }
  if ((st = pa_spec_vocab_check(target, d->model))) {
    pa_spec_draft_free(d);
    return st;
  }
  pasada_context_params cp = pasada_context_default_params();
  cp.n_ctx = n_ctx;
  cp.n_seq_max = n_seq;
  cp.n_threads = n_threads;
  cp.n_batch = 512;
  d->recurrent = pasada_model_is_recurrent(d->model);
  cp.n_rollback = d->recurrent ? 2 : 0;
  if ((st = pasada_context_create(d->model, &cp, &d->ctx))) {
    pa_spec_draft_free(d);
    return pa_error(st, "draft model %s: %s", path, pasada_last_error());
  }
  d->n_seq = n_seq;
  d->n_ctx = pasada_context_n_ctx(d->ctx);
  d->n_batch = cp.n_batch;
  d->n_vocab = pasada_model_n_vocab(d->model);
  pasada_sampler_params gp = pasada_sampler_default_params(), sp = *sampling;
  gp.temp = 0;
  gp.repeat_last_n = 0;
  sp.repeat_penalty = 1.0f;
  sp.repeat_last_n = 0;
  sp.presence_penalty = sp.frequency_penalty = 0;
  d->sampler = calloc((size_t)n_seq, sizeof *d->sampler);
  d->held = calloc((size_t)n_seq, sizeof *d->held);
  d->q = calloc((size_t)n_seq, sizeof *d->q);
  d->q_rows = calloc((size_t)n_seq, sizeof *d->q_rows);
  d->caught = calloc((size_t)n_seq, sizeof *d->caught);
  d->pos = malloc((size_t)d->n_batch * sizeof *d->pos);
  d->seqs = malloc((size_t)d->n_batch * sizeof *d->seqs);
  st = d->sampler && d->held && d->q && d->q_rows && d->caught && d->pos && d->seqs ? PASADA_OK
                                                                       : PASADA_ERR_NOMEM;
  if (!st) st = pasada_sampler_create(&gp, d->n_vocab, &d->greedy);
  for (int32_t i = 0; !st && i < n_seq; i++) {
    if (sampling->seed != PASADA_SEED_RANDOM) sp.seed = sampling->seed + 1 + (uint64_t)i;
    st = pasada_sampler_create(&sp, d->n_vocab, &d->sampler[i]);
    if (!st && !(d->held[i] = malloc((size_t)d->n_ctx * sizeof(int32_t)))) st = PASADA_ERR_NOMEM;
  }
  if (st) {
    pa_spec_draft_free(d);
    return st == PASADA_ERR_NOMEM ? pa_error(st, "draft model: out of memory") : st;
  }
  *out = d;
  return PASADA_OK;
}

void pa_spec_draft_reset(pa_spec_draft *d, int32_t seq) {
  pasada_seq_truncate(d->ctx, seq, 0);
  d->caught[seq] = 0;
  pasada_sampler_reset(d->sampler[seq]);
}

const pasada_model *pa_spec_draft_model(const pa_spec_draft *d) {
  return d->model;
}

/* Decodes tokens[0..n) into sequence seq from its length on, in batches;
 * only the last token's logits. */
static int feed(pa_spec_draft *d, int32_t seq, const int32_t *tokens, int32_t n) {
  int32_t p0 = pasada_seq_length(d->ctx, seq);
  for (int32_t done = 0; done < n;) {
    const int32_t len = n - done < d->n_batch ? n - done : d->n_batch;
    for (int32_t i = 0; i < len; i++) {
      d->pos[i] = p0 + done + i;
      d->seqs[i] = seq;
      d->held[seq][p0 + done + i] = tokens[done + i];
    }
    pasada_batch b = {.n_tokens = len, .token = tokens + done, .pos = d->pos, .seq_id = d->seqs};
    const int st = pasada_decode(d->ctx, &b);
    if (st) return st;
    done += len;
  }
  return PASADA_OK;
}

int32_t pa_spec_draft_propose(pa_spec_draft *d, int32_t seq, const int32_t *hist, int32_t n,
                              int32_t max, bool greedy, int32_t *out, const float **q) {
  if (q) *q = NULL;
  if (max > PA_SPEC_DRAFT_MAX) max = PA_SPEC_DRAFT_MAX;
  if (n <= 0 || max <= 0 || n + max > d->n_ctx) return 0;
  if (!greedy && d->q_rows[seq] < max) { /* rows for this many sampled drafts */
    float *rows = realloc(d->q[seq], (size_t)max * (size_t)d->n_vocab * sizeof *rows);
    if (!rows) {
      pa_error(PASADA_ERR_NOMEM, "draft model: out of memory for %d rows", max);
      return -1;
    }
    d->q[seq] = rows;
    d->q_rows[seq] = max;
  }
  if (q && !greedy) *q = d->q[seq];
  /* keep what the cache holds of hist, short of its last token; a
   * recurrent draft keeps at most its last catch-up's length less one (its
   * drafts were one-token passes, which keep no state to roll back to),
   * so this catch-up is two or more tokens and keeps the state after its
   * last but one for the next */
  int32_t len = pasada_seq_length(d->ctx, seq), c = 0;
  while (c < len && c < n - 1 && d->held[seq][c] == hist[c]) c++;
  if (d->recurrent && c > d->caught[seq] - 1) c = d->caught[seq] > 0 ? d->caught[seq] - 1 : 0;
  if (c < len) pasada_seq_truncate(d->ctx, seq, c);
  c = pasada_seq_length(d->ctx, seq); /* a recurrent draft may have lost more */
  if (feed(d, seq, hist + c, n - c)) return -1;
  d->caught[seq] = n;
  for (int32_t i = 0; i < max; i++) {
    const float *logits = pasada_get_logits(d->ctx, -1);
    int32_t tok = -1;
    if (greedy) {
      if (pasada_sampler_sample(d->greedy, logits, d->n_vocab, &tok)) return -1;
    } else {
      float *row = d->q[seq] + (size_t)i * (size_t)d->n_vocab;
      if (pa_sampler_distribution(d->sampler[seq], logits, d->n_vocab, row)) return -1;
      double total = 0;
      for (int32_t v = 0; v < d->n_vocab; v++) total += row[v];
      if (!(total > 0)) return i;
      tok = draw_weights(row, d->n_vocab, total, pa_sampler_uniform(d->sampler[seq]));
    }
    out[i] = tok;
    if (i + 1 == max) return max;
    if (feed(d, seq, &tok, 1)) return -1;
  }
  return max;
}
