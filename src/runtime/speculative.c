/* speculative.c: speculative decoding's drafts and their verification:
 * prompt lookup (n-gram matching over the tokens so far), a draft model's
 * proposals (its own context, cache kept in step with the target's text),
 * and the acceptance rule that keeps the target's output distribution. */
#include "runtime/speculative.h"

#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "model/model.h"
#include "runtime/sampler.h"

bool pa_spec_mode_from_name(const char *name, pa_spec_mode *out) {
  static const char *names[] = {"off", "lookup", "draft", "mtp"};
  for (int i = 0; i < 4; i++)
    if (name && strcmp(name, names[i]) == 0) {
      *out = (pa_spec_mode)i;
      return true;
    }
  return false;
}

const char *pa_spec_mode_name(pa_spec_mode mode) {
  return mode == PA_SPEC_LOOKUP  ? "lookup"
         : mode == PA_SPEC_DRAFT ? "draft"
         : mode == PA_SPEC_MTP   ? "mtp"
                                 : "off";
}

int32_t pa_spec_default_draft_max(pa_spec_mode mode) {
  return mode == PA_SPEC_LOOKUP ? 8 : mode == PA_SPEC_MTP ? 3 : 4;
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

/* ---- proposals (draft model, multi-token prediction) ----
 * The samplers a proposer draws with: greedy (argmax), or per sequence the
 * request's temperature and truncation (no penalties, bias or grammar: its
 * distribution is only a proposal), whose rows verification weighs. */
typedef struct {
  pasada_sampler *greedy;
  pasada_sampler **sampler; /* per sequence */
  float **q; /* per sequence: rows of n_vocab for sampled drafts (made on first use) */
  int32_t *q_rows;
  int32_t n_seq, n_vocab, n_ctx, n_batch;
  /* per sequence the tokens the drafter's cache holds (n_ctx), and a
   * batch's positions and sequences (n_batch) */
  int32_t **held;
  int32_t *pos, *seqs;
} proposer;

static void proposer_free(proposer *p) {
  pasada_sampler_free(p->greedy);
  for (int32_t i = 0; p->sampler && i < p->n_seq; i++) pasada_sampler_free(p->sampler[i]);
  for (int32_t i = 0; p->q && i < p->n_seq; i++) free(p->q[i]);
  for (int32_t i = 0; p->held && i < p->n_seq; i++) free(p->held[i]);
  free(p->sampler);
  free(p->q);
  free(p->q_rows);
  free(p->held);
  free(p->pos);
  free(p->seqs);
}

/* For the drafter's context ctx (n_seq sequences); the samplers seeded
 * from sampling->seed (+1 per sequence). */
static int proposer_init(proposer *p, const pasada_context *ctx, int32_t n_seq, int32_t n_batch,
                         int32_t n_vocab, const pasada_sampler_params *sampling) {
  p->n_seq = n_seq, p->n_vocab = n_vocab, p->n_ctx = pasada_context_n_ctx(ctx),
  p->n_batch = n_batch;
  p->held = calloc((size_t)n_seq, sizeof *p->held);
  p->pos = malloc((size_t)n_batch * sizeof *p->pos);
  p->seqs = malloc((size_t)n_batch * sizeof *p->seqs);
  for (int32_t i = 0; p->held && i < n_seq; i++)
    if (!(p->held[i] = malloc((size_t)p->n_ctx * sizeof(int32_t)))) return PASADA_ERR_NOMEM;
  if (!p->held || !p->pos || !p->seqs) return PASADA_ERR_NOMEM;
  pasada_sampler_params gp = pasada_sampler_default_params(), sp = *sampling;
  gp.temp = 0;
  gp.repeat_last_n = 0;
  sp.repeat_penalty = 1.0f;
  sp.repeat_last_n = 0;
  sp.presence_penalty = sp.frequency_penalty = 0;
  p->sampler = calloc((size_t)n_seq, sizeof *p->sampler);
  p->q = calloc((size_t)n_seq, sizeof *p->q);
  p->q_rows = calloc((size_t)n_seq, sizeof *p->q_rows);
  int st = p->sampler && p->q && p->q_rows ? PASADA_OK : PASADA_ERR_NOMEM;
  if (!st) st = pasada_sampler_create(&gp, n_vocab, &p->greedy);
  for (int32_t i = 0; !st && i < n_seq; i++) {
    if (sampling->seed != PASADA_SEED_RANDOM) sp.seed = sampling->seed + 1 + (uint64_t)i;
    st = pasada_sampler_create(&sp, n_vocab, &p->sampler[i]);
  }
  return st;
}

/* Room for `max` sampled rows of sequence seq (greedy: none); *q their
 * start, or NULL. false: out of memory (pasada_last_error says). */
static bool proposer_rows(proposer *p, int32_t seq, int32_t max, bool greedy, const float **q) {
  if (q) *q = NULL;
  if (greedy) return true;
  if (p->q_rows[seq] < max) {
    float *rows = realloc(p->q[seq], (size_t)max * (size_t)p->n_vocab * sizeof *rows);
    if (!rows) {
      pa_error(PASADA_ERR_NOMEM, "speculative: out of memory for %d rows", max);
      return false;
    }
    p->q[seq] = rows;
    p->q_rows[seq] = max;
  }
  if (q) *q = p->q[seq];
  return true;
}

/* Proposal i of sequence seq from logits: 1 with *tok, 0 when no token
 * has probability, -1 on a sampler error. */
static int proposer_draw(proposer *p, int32_t seq, int32_t i, const float *logits, bool greedy,
                         int32_t *tok) {
  if (greedy) return pasada_sampler_sample(p->greedy, logits, p->n_vocab, tok) ? -1 : 1;
  float *row = p->q[seq] + (size_t)i * (size_t)p->n_vocab;
  if (pa_sampler_distribution(p->sampler[seq], logits, p->n_vocab, row)) return -1;
  double total = 0;
  for (int32_t v = 0; v < p->n_vocab; v++) total += row[v];
  if (!(total > 0)) return 0;
  *tok = draw_weights(row, p->n_vocab, total, pa_sampler_uniform(p->sampler[seq]));
  return 1;
}

/* Decodes tokens[0..n) into the drafter's context ctx, sequence seq, from
 * its length on, in batches, noting them in held; only the last token's
 * logits. h: for an MTP context, the hidden-state rows the tokens pair
 * with (n_embd floats each), else NULL. */
static int proposer_feed(proposer *p, pasada_context *ctx, int32_t seq, const int32_t *tokens,
                         int32_t n, const float *h, int64_t n_embd) {
  const int32_t p0 = pasada_seq_length(ctx, seq);
  for (int32_t done = 0; done < n;) {
    const int32_t len = n - done < p->n_batch ? n - done : p->n_batch;
    for (int32_t i = 0; i < len; i++) {
      p->pos[i] = p0 + done + i;
      p->seqs[i] = seq;
      p->held[seq][p0 + done + i] = tokens[done + i];
    }
    if (h) pa_context_set_mtp_input(ctx, h + (size_t)done * (size_t)n_embd);
    pasada_batch b = {.n_tokens = len, .token = tokens + done, .pos = p->pos, .seq_id = p->seqs};
    const int st = pasada_decode(ctx, &b);
    if (st) return st;
    done += len;
  }
  return PASADA_OK;
}

/* ---- draft model ---- */

struct pa_spec_draft {
  pasada_model *model;
  pasada_context *ctx;
  proposer pr;
  /* a draft with recurrent layers rolls back only into its multi-token
   * passes (n_rollback 2): per sequence the length its last catch-up
   * reached, which the next one starts one short of */
  bool recurrent;
  int32_t *caught;
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
  proposer_free(&d->pr);
  free(d->caught);
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
  st = (d->caught = calloc((size_t)n_seq, sizeof *d->caught)) ? PASADA_OK : PASADA_ERR_NOMEM;
  if (!st)
    st = proposer_init(&d->pr, d->ctx, n_seq, cp.n_batch, pasada_model_n_vocab(d->model), sampling);
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
  pasada_sampler_reset(d->pr.sampler[seq]);
}

const pasada_model *pa_spec_draft_model(const pa_spec_draft *d) {
  return d->model;
}

int32_t pa_spec_draft_propose(pa_spec_draft *d, int32_t seq, const int32_t *hist, int32_t n,
                              int32_t max, bool greedy, int32_t *out, const float **q) {
  if (q) *q = NULL;
  if (max > PA_SPEC_DRAFT_MAX) max = PA_SPEC_DRAFT_MAX;
  if (n <= 0 || max <= 0 || n + max > d->pr.n_ctx) return 0;
  if (!proposer_rows(&d->pr, seq, max, greedy, q)) return -1;
  /* keep what the cache holds of hist, short of its last token; a
   * recurrent draft keeps at most its last catch-up's length less one (its
   * drafts were one-token passes, which keep no state to roll back to),
   * so this catch-up is two or more tokens and keeps the state after its
   * last but one for the next */
  int32_t len = pasada_seq_length(d->ctx, seq), c = 0;
  while (c < len && c < n - 1 && d->pr.held[seq][c] == hist[c]) c++;
  if (d->recurrent && c > d->caught[seq] - 1) c = d->caught[seq] > 0 ? d->caught[seq] - 1 : 0;
  if (c < len) pasada_seq_truncate(d->ctx, seq, c);
  c = pasada_seq_length(d->ctx, seq); /* a recurrent draft may have lost more */
  if (proposer_feed(&d->pr, d->ctx, seq, hist + c, n - c, NULL, 0)) return -1;
  d->caught[seq] = n;
  for (int32_t i = 0; i < max; i++) {
    int32_t tok = -1;
    const int got = proposer_draw(&d->pr, seq, i, pasada_get_logits(d->ctx, -1), greedy, &tok);
    if (got <= 0) return got < 0 ? -1 : i;
    out[i] = tok;
    if (i + 1 == max) return max;
    if (proposer_feed(&d->pr, d->ctx, seq, &tok, 1, NULL, 0)) return -1;
  }
  return max;
}

/* ---- multi-token prediction ---- */

struct pa_spec_mtp {
  pasada_context *target, *ctx; /* ctx: the MTP layer's (pa_context_create_mtp) */
  proposer pr;
  int32_t n_embd;
  /* per sequence: the target position of its entry 0 (base), how many
   * entries the target's hidden states made (real; drafts' entries
   * follow), the token each pairs with (held[j]: the one at position base
   * + j + 1) and the one at base */
  int32_t *base, *real, *first;
  float *g; /* the last draft step's output hidden state */
};

void pa_spec_mtp_free(pa_spec_mtp *d) {
  if (!d) return;
  pasada_context_free(d->ctx);
  proposer_free(&d->pr);
  free(d->base);
  free(d->g);
  free(d);
}

int pa_spec_mtp_open(pasada_context *target, int32_t n_seq, int32_t n_ctx, int32_t n_threads,
                     const pasada_sampler_params *sampling, pa_spec_mtp **out) {
  *out = NULL;
  pa_spec_mtp *d = calloc(1, sizeof *d);
  if (!d) return pa_error(PASADA_ERR_NOMEM, "multi-token prediction: out of memory");
  pasada_context_params cp = pasada_context_default_params();
  cp.n_ctx = n_ctx;
  cp.n_seq_max = n_seq;
  cp.n_threads = n_threads;
  cp.n_batch = 512;
  pasada_kv_stats kv;
  pasada_kv_get_stats(target, &kv);
  cp.kv_type = kv.type; /* the MTP layer's cache as the target's */
  int st = pa_context_create_mtp(target->model, &cp, &d->ctx);
  if (!st) st = pa_context_keep_hidden(target);
  if (st) {
    pa_spec_mtp_free(d);
    return st;
  }
  d->target = target;
  d->n_embd = target->model->hp.n_embd;
  d->base = calloc(3 * (size_t)n_seq, sizeof *d->base);
  d->g = malloc((size_t)d->n_embd * sizeof *d->g);
  st = d->base && d->g ? PASADA_OK : PASADA_ERR_NOMEM;
  if (!st) {
    d->real = d->base + n_seq, d->first = d->real + n_seq;
    st = proposer_init(&d->pr, d->ctx, n_seq, cp.n_batch, pasada_model_n_vocab(target->model),
                       sampling);
  }
  if (st) {
    pa_spec_mtp_free(d);
    return st == PASADA_ERR_NOMEM ? pa_error(st, "multi-token prediction: out of memory") : st;
  }
  *out = d;
  return PASADA_OK;
}

void pa_spec_mtp_reset(pa_spec_mtp *d, int32_t seq) {
  pasada_seq_truncate(d->ctx, seq, 0);
  d->real[seq] = d->base[seq] = 0;
  pasada_sampler_reset(d->pr.sampler[seq]);
}

void pa_spec_mtp_forget(pa_spec_mtp *d, int32_t seq) {
  int32_t pos0 = 0, n = 0;
  pa_context_hidden_rows(d->target, seq, &pos0, &n);
  if (n > 0) pa_context_hidden_drop(d->target, seq, pos0 + n);
}

int32_t pa_spec_mtp_propose(pa_spec_mtp *d, int32_t seq, const int32_t *hist, int32_t n,
                            int32_t max, bool greedy, int32_t *out, const float **q) {
  if (q) *q = NULL;
  if (max > PA_SPEC_DRAFT_MAX) max = PA_SPEC_DRAFT_MAX;
  if (n < 2 || max <= 0 || n + max > d->pr.n_ctx) return 0;
  if (!proposer_rows(&d->pr, seq, max, greedy, q)) return -1;
  /* the target holds positions [0, n - 1); hist[n - 1] is its next token.
   * Entry j (position base + j) pairs the target's hidden state there
   * with the token after it: entries up to position n - 2 are due. */
  int32_t pos0 = 0, nh = 0;
  const float *rows = pa_context_hidden_rows(d->target, seq, &pos0, &nh);
  int32_t base = d->base[seq], keep = d->real[seq];
  if (base > n - 2 || (keep > 0 && hist[base] != d->first[seq])) keep = 0;
  for (int32_t j = 0; j < keep; j++)
    if (base + j + 1 > n - 1 || d->pr.held[seq][j] != hist[base + j + 1]) keep = j;
  if (keep > n - 2 - base) keep = n - 2 - base; /* the last due entry is made again */
  /* nothing of it left, or no rows for what follows: start from the rows */
  if (keep <= 0 || base + keep < pos0) base = pos0, keep = 0;
  const int32_t e = base + keep; /* the first entry to make */
  /* the target kept no hidden states of these */
  if (e > n - 2 || pos0 + nh < n - 1 || !rows) return 0;
  pasada_seq_truncate(d->ctx, seq, keep);
  if (pasada_seq_length(d->ctx, seq) != keep) return 0;
  d->base[seq] = base, d->first[seq] = hist[base];
  if (proposer_feed(&d->pr, d->ctx, seq, hist + e + 1, n - 1 - e,
                    rows + (size_t)(e - pos0) * (size_t)d->n_embd, d->n_embd))
    return -1;
  d->real[seq] = n - 1 - base;
  /* what the next proposal needs comes from later passes */
  pa_context_hidden_drop(d->target, seq, n - 1);
  for (int32_t i = 0; i < max; i++) {
    int32_t tok = -1;
    const int got = proposer_draw(&d->pr, seq, i, pasada_get_logits(d->ctx, -1), greedy, &tok);
    if (got <= 0) return got < 0 ? -1 : i;
    out[i] = tok;
    if (i + 1 == max) return max;
    /* the next entry: the MTP's own output stands for the target's hidden state */
    memcpy(d->g, pa_context_mtp_hidden(d->ctx, -1), (size_t)d->n_embd * sizeof *d->g);
    if (proposer_feed(&d->pr, d->ctx, seq, &tok, 1, d->g, d->n_embd)) return -1;
  }
  return max;
}
