/* scheduler.c: continuous batching over the engine's paged KV cache.
 *
 * One thread owns the context. Each step: drop cancelled jobs (their blocks
 * go back at once), admit waiting jobs while a slot and enough KV blocks are
 * free (after attaching any cached prefix of their prompt), build one batch
 * of every generating sequence's next token plus up to prefill_chunk prompt
 * tokens of the prefilling ones (oldest first), decode it, then sample each
 * sequence that has logits with its own sampler and append its text to its
 * job. Admission reserves the blocks a job can ever need (prompt + max
 * tokens), so a running sequence never runs out of cache half-way.
 *
 * Speculative decoding: while few sequences run (at most spec_max_seqs),
 * a sequence whose request asks for it (or the server's
 * default) puts a draft after its next token (prompt lookup over its
 * prompt and output, or the draft model's proposal) into the same batch,
 * all rows with logits; its sampling verifies them (pa_spec_verify), the
 * accepted tokens and the one after them are delivered in order, and the
 * sequence's cache is truncated past what was kept. Requests that ask for
 * logprobs or limit their reasoning decode without drafts.
 *
 * A reasoning budget (req.think_limit): the tokens generated inside the
 * family's reasoning block are counted; at the budget, the next steps write
 * the close marker's tokens instead of sampling (the sampler and its
 * grammar accept them as drawn), then the model answers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/scheduler.h"

#include "runtime/speculative.h"

/* One sequence's draw of a step, made on the context's threads. */
typedef struct {
  int32_t row, slot; /* batch row of the logits, the job's slot */
  int32_t token;     /* < 0: the sampler failed (message in err) */
  srv_token_logprob lp;
  char err[160];
} srv_sampled;

/* A slot's speculative-decoding state. */
typedef struct {
  int8_t mode;           /* the slot's pa_spec_mode */
  int32_t max;           /* its draft length */
  int32_t *hist, n_hist; /* its prompt and delivered tokens (lookup's text), n_ctx of room */
  pa_spec_pace pace;
  int32_t row0, n; /* this step: the row of its next token, drafts after it */
  int32_t draft[PA_SPEC_DRAFT_MAX];
  const float *q; /* the draft model's rows (sampled drafts), NULL otherwise */
  int32_t out[PA_SPEC_DRAFT_MAX + 1];
  int32_t n_out, n_acc;
  float *scratch; /* n_vocab floats, made when the slot first drafts */
} srv_spec_slot;

struct srv_sched {
  const pasada_tokenizer *tok;
  pasada_context *ctx;
  srv_metrics *metrics;
  int32_t n_vocab, n_ctx, n_slots, prefill_chunk, max_queue, n_embd;
  int32_t pool_blocks;
  bool recurrent; /* the model has recurrent layers (pasada_model_is_recurrent) */

  pthread_t thread;
  bool started;

  /* shared with the HTTP threads, under mu */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  srv_job *queue_head, *queue_tail;
  int queue_len;
  bool draining;
  double drain_deadline;
  /* srv_sched_call: one call at a time, run between steps */
  void (*call_fn)(pasada_context *ctx, void *arg);
  void *call_arg;
  bool call_done, stopped;
  pthread_cond_t call_cv;

  srv_bell bell; /* rung after each step's output (server.h) */

  /* scheduler thread only */
  srv_job **slot;
  uint64_t *slot_order; /* admission order, for oldest-first prefill */
  uint64_t n_admitted;
  int n_running;
  int32_t cap_batch;
  int32_t *b_token, *b_pos, *b_seq;
  int8_t *b_want;
  srv_sampled *sampled; /* a step's sampling, per sequence with logits */

  /* speculative decoding, per slot (see the top of the file) */
  int spec_default;
  int32_t spec_limit; /* srv_sched_params' */
  int32_t draft_max_default, spec_max_seqs;
  pa_spec_draft *draft;
  pa_spec_mtp *mtp;
  srv_spec_slot *sp; /* n_slots of them */
};

int srv_sched_create(const pasada_model *model, pasada_context *ctx, int32_t n_seq_max,
                     const srv_sched_params *p, srv_metrics *metrics, srv_sched **out) {
  *out = NULL;
  srv_sched *s = calloc(1, sizeof *s);
  if (!s) return PASADA_ERR_NOMEM;
  s->tok = pasada_model_tokenizer(model);
  s->ctx = ctx;
  s->metrics = metrics;
  s->n_vocab = pasada_model_n_vocab(model);
  s->n_ctx = pasada_context_n_ctx(ctx);
  s->n_embd = pasada_model_n_embd(model);
  s->recurrent = pasada_model_is_recurrent(model);
  s->n_slots = n_seq_max;
  s->prefill_chunk = p->prefill_chunk > 0 ? p->prefill_chunk : 256;
  s->max_queue = p->max_queue;
  pasada_kv_stats kv;
  pasada_kv_get_stats(ctx, &kv);
  s->pool_blocks = kv.n_blocks;
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  pthread_cond_init(&s->call_cv, NULL);
  atomic_init(&s->bell.epoch, 0);
  atomic_init(&s->bell.sleepers, 0);
  s->cap_batch = n_seq_max + s->prefill_chunk;
  s->slot = calloc((size_t)n_seq_max, sizeof *s->slot);
  s->slot_order = calloc((size_t)n_seq_max, sizeof *s->slot_order);
  s->b_token = malloc((size_t)s->cap_batch * sizeof(int32_t));
  s->b_pos = malloc((size_t)s->cap_batch * sizeof(int32_t));
  s->b_seq = malloc((size_t)s->cap_batch * sizeof(int32_t));
  s->b_want = malloc((size_t)s->cap_batch);
  s->sampled = malloc((size_t)n_seq_max * sizeof *s->sampled);
  s->spec_default = p->spec_mode;
  s->spec_limit = p->spec_limit;
  s->draft_max_default = p->draft_max;
  s->spec_max_seqs = p->spec_max_seqs > 0 ? p->spec_max_seqs : SRV_SPEC_MAX_SEQS;
  s->draft = p->draft;
  s->mtp = p->mtp;
  const size_t ns = (size_t)n_seq_max;
  bool spec_ok = (s->sp = calloc(ns, sizeof *s->sp)) != NULL;
  for (int32_t i = 0; spec_ok && i < n_seq_max; i++)
    spec_ok = (s->sp[i].hist = malloc((size_t)s->n_ctx * sizeof(int32_t))) != NULL;
  if (!s->slot || !s->slot_order || !s->b_token || !s->b_pos || !s->b_seq || !s->b_want ||
      !s->sampled || !spec_ok) {
    srv_sched_free(s);
    return PASADA_ERR_NOMEM;
  }
  srv_metrics_gauges(metrics, 0, 0, &kv);
  *out = s;
  return PASADA_OK;
}

void srv_sched_free(srv_sched *s) {
  if (!s) return;
  free(s->slot);
  free(s->slot_order);
  free(s->b_token);
  free(s->b_pos);
  free(s->b_seq);
  free(s->b_want);
  free(s->sampled);
  for (int32_t i = 0; s->sp && i < s->n_slots; i++) {
    free(s->sp[i].hist);
    free(s->sp[i].scratch);
  }
  free(s->sp);
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  pthread_cond_destroy(&s->call_cv);
  free(s);
}

srv_submit_result srv_sched_submit_all(srv_sched *s, srv_job *const *jobs, int n) {
  pthread_mutex_lock(&s->mu);
  srv_submit_result r = SRV_SUBMIT_OK;
  if (s->draining)
    r = SRV_SUBMIT_SHUTTING_DOWN;
  else if (s->queue_len >= s->max_queue || n > s->max_queue - s->queue_len)
    r = SRV_SUBMIT_QUEUE_FULL;
  for (int k = 0; r == SRV_SUBMIT_OK && k < n; k++) {
    srv_job *j = jobs[k];
    srv_job_retain(j);
    j->bell = &s->bell;
    j->t_submit = srv_now();
    j->next = NULL;
    if (s->queue_tail)
      s->queue_tail->next = j;
    else
      s->queue_head = j;
    s->queue_tail = j;
    s->queue_len++;
  }
  if (r == SRV_SUBMIT_OK) pthread_cond_signal(&s->cv);
  pthread_mutex_unlock(&s->mu);
  return r;
}

srv_submit_result srv_sched_submit(srv_sched *s, srv_job *j) {
  return srv_sched_submit_all(s, &j, 1);
}

void srv_sched_cancel(srv_sched *s, srv_job *j) {
  atomic_store(&j->cancelled, true);
  pthread_mutex_lock(&s->mu);
  pthread_cond_signal(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

void srv_sched_shutdown(srv_sched *s, double grace) {
  pthread_mutex_lock(&s->mu);
  if (!s->draining) {
    s->draining = true;
    s->drain_deadline = srv_now() + (grace > 0 ? grace : 0);
  }
  pthread_cond_signal(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

void srv_sched_join(srv_sched *s) {
  if (s->started) pthread_join(s->thread, NULL);
  s->started = false;
}

/* ---- a job's end ---- */

/* Records which stop string begins at held[k] (the first listed of those
 * that do): the Anthropic API names it. */
static void note_stop(srv_job *j, size_t k) {
  for (int i = 0; i < j->req.n_stop; i++) {
    size_t len = strlen(j->req.stop[i]);
    if (len && k + len <= j->n_held && memcmp(j->held + k, j->req.stop[i], len) == 0) {
      j->stop_hit = i + 1;
      return;
    }
  }
}

/* Releases the text held back for stop strings at the end of generation
 * (after flushing the detokenizer): a stop string may still complete. */
static void release_held(srv_job *j) {
  char piece[PASADA_DETOK_PIECE_MAX];
  size_t n = pasada_detok_flush(j->detok, piece, sizeof piece);
  srv_buf b = {.p = j->held, .n = j->n_held, .cap = j->cap_held};
  srv_buf_append(&b, piece, n);
  j->held = b.p, j->n_held = b.n, j->cap_held = b.cap;
  bool matched;
  size_t k = srv_stop_scan(j->held, j->n_held, j->req.stop, j->req.n_stop, &matched);
  if (matched) note_stop(j, k);
  srv_job_emit(j, j->held, matched ? k : j->n_held, NULL);
  j->n_held = 0;
}

static void finish_slot(srv_sched *s, int i, srv_finish why, const srv_error *err) {
  srv_job *j = s->slot[i];
  if (why == SRV_FINISH_LENGTH) release_held(j);
  srv_job_finish(j, why, err);
  srv_metrics_job_done(s->metrics, why, j->req.n_prompt, j->n_cached, j->n_generated,
                       srv_now() - j->t_submit);
  pasada_seq_truncate(s->ctx, i, 0);
  s->slot[i] = NULL;
  s->n_running--;
  srv_job_release(j);
}

static void finish_waiting(srv_sched *s, srv_job *j, srv_finish why, const srv_error *err) {
  srv_job_finish(j, why, err);
  srv_metrics_job_done(s->metrics, why, 0, 0, 0, srv_now() - j->t_submit);
  srv_job_release(j);
}

/* ---- admission ---- */

static int32_t final_length(const srv_sched *s, const srv_job *j) {
  int64_t n = (int64_t)j->req.n_prompt + j->req.max_tokens;
  return n < s->n_ctx ? (int32_t)n : s->n_ctx;
}

/* Blocks the running sequences may still take before they finish. */
static int64_t blocks_reserved(const srv_sched *s) {
  int64_t r = 0;
  for (int i = 0; i < s->n_slots; i++) {
    const srv_job *j = s->slot[i];
    if (!j) continue;
    int32_t more = pasada_kv_blocks_needed(s->ctx, final_length(s, j)) -
                   pasada_kv_blocks_needed(s->ctx, pasada_seq_length(s->ctx, i));
    if (more > 0) r += more;
  }
  return r;
}

/* Tries to start `j` in free slot i; false (and nothing attached) when its
 * blocks are not available yet. */
static bool admit(srv_sched *s, int i, srv_job *j) {
  int32_t cached = pasada_seq_reuse_prefix(s->ctx, i, j->req.prompt, j->req.n_prompt);
  if (cached < 0) cached = 0;
  int64_t need = (int64_t)pasada_kv_blocks_needed(s->ctx, final_length(s, j)) -
                 pasada_kv_blocks_needed(s->ctx, cached);
  if (need > s->pool_blocks) need = s->pool_blocks; /* never wait forever: it may still fit */
  int64_t avail = (int64_t)pasada_kv_blocks_available(s->ctx) - blocks_reserved(s);
  if (need > avail && s->n_running > 0) {
    pasada_seq_truncate(s->ctx, i, 0);
    return false;
  }
  s->slot[i] = j;
  s->slot_order[i] = s->n_admitted++;
  s->n_running++;
  j->seq = i;
  j->n_fed = cached;
  j->next_token = -1;
  /* speculation: the request's choice or the server's; none with logprobs
   * or a reasoning budget */
  int mode = j->req.spec_mode > 0 ? j->req.spec_mode - 1 : s->spec_default;
  if (j->req.logprobs || j->req.think_limit || j->req.kind == SRV_EMBEDDING ||
      (mode == PA_SPEC_DRAFT && !s->draft) || (mode == PA_SPEC_MTP && !s->mtp) ||
      s->spec_limit == 0)
    mode = PA_SPEC_OFF;
  /* the reasoning block is open from the start when the prompt opened it
   * or the family has no open marker */
  j->think_state = j->req.in_reasoning || !j->req.think_open[0] ? 1 : 0;
  j->think_used = 0;
  j->think_forced = j->req.think_limit && j->think_state == 1 && j->req.think_budget == 0 ? 0 : -1;
  j->n_think_tail = 0;
  s->sp[i].mode = (int8_t)mode;
  s->sp[i].max = j->req.spec_draft_max > 0  ? j->req.spec_draft_max
                 : s->draft_max_default > 0 ? s->draft_max_default
                                            : pa_spec_default_draft_max((pa_spec_mode)mode);
  if (s->spec_limit > 0 && s->sp[i].max > s->spec_limit) s->sp[i].max = s->spec_limit;
  s->sp[i].pace = (pa_spec_pace){0};
  s->sp[i].n_hist = 0;
  if (mode != PA_SPEC_OFF && j->req.n_prompt < s->n_ctx) {
    memcpy(s->sp[i].hist, j->req.prompt, (size_t)j->req.n_prompt * sizeof(int32_t));
    s->sp[i].n_hist = j->req.n_prompt;
  }
  pthread_mutex_lock(&j->mu);
  j->n_cached = cached;
  pthread_mutex_unlock(&j->mu);
  return true;
}

/* Whether a running job is still prefilling j's prompt: j (another choice
 * of the same request) then waits, to attach the blocks that prefill
 * writes instead of computing them again. */
static bool prefilling_same(const srv_sched *s, const srv_job *j) {
  for (int i = 0; i < s->n_slots; i++) {
    const srv_job *r = s->slot[i];
    if (r && r->n_fed < r->req.n_prompt && r->req.n_prompt == j->req.n_prompt &&
        memcmp(r->req.prompt, j->req.prompt, (size_t)j->req.n_prompt * sizeof(int32_t)) == 0)
      return true;
  }
  return false;
}

/* Drops cancelled waiting jobs, fails them all when draining, and admits
 * from the head of the queue (first come, first served). */
static void admit_waiting(srv_sched *s, bool draining) {
  pthread_mutex_lock(&s->mu);
  srv_job **link = &s->queue_head, *prev = NULL;
  while (*link) {
    srv_job *j = *link;
    bool cancelled = atomic_load(&j->cancelled);
    if (!cancelled && !draining) {
      prev = j;
      link = &j->next;
      continue;
    }
    *link = j->next;
    if (s->queue_tail == j) s->queue_tail = prev;
    s->queue_len--;
    srv_error e;
    srv_fail(&e, 503, "server_error", "shutting_down", NULL, "the server is shutting down");
    finish_waiting(s, j, cancelled ? SRV_FINISH_CANCELLED : SRV_FINISH_ERROR, &e);
  }
  while (s->queue_head && s->n_running < s->n_slots) {
    int i = 0;
    while (s->slot[i]) i++;
    srv_job *j = s->queue_head;
    if (j->wait_prefill && prefilling_same(s, j)) break;
    if (!admit(s, i, j)) break;
    s->queue_head = j->next;
    if (!s->queue_head) s->queue_tail = NULL;
    s->queue_len--;
  }
  pthread_mutex_unlock(&s->mu);
}

/* ---- sampling ---- */

/* The token's log-probability under the model (log-softmax of the raw
 * logits) and the n most likely tokens, ties to the lowest id. */
static void compute_logprobs(const float *logits, int32_t n_vocab, int32_t token, int n,
                             srv_token_logprob *out) {
  float mx = logits[0];
  for (int32_t v = 1; v < n_vocab; v++)
    if (logits[v] > mx) mx = logits[v];
  double sum = 0;
  for (int32_t v = 0; v < n_vocab; v++) sum += exp((double)(logits[v] - mx));
  double lse = (double)mx + log(sum);
  out->token = token;
  out->logprob = (float)((double)logits[token] - lse);
  out->n_top = 0;
  for (int32_t v = 0; v < n_vocab && n > 0; v++) {
    float l = logits[v];
    int k = out->n_top;
    if (k == n && l <= out->top_logprob[k - 1]) continue;
    if (k < n)
      out->n_top++;
    else
      k--; /* replace the smallest */
    while (k > 0 && out->top_logprob[k - 1] < l) {
      out->top_logprob[k] = out->top_logprob[k - 1];
      out->top_token[k] = out->top_token[k - 1];
      k--;
    }
    out->top_logprob[k] = l;
    out->top_token[k] = v;
  }
  for (int k = 0; k < out->n_top; k++)
    out->top_logprob[k] = (float)((double)out->top_logprob[k] - lse);
}

/* Draws entry k of the step's sampling: each sequence has its own sampler,
 * so the draws run side by side on the context's threads. */
static void sample_one(void *arg, int32_t k) {
  srv_sched *s = arg;
  srv_sampled *d = &s->sampled[k];
  srv_job *j = s->slot[d->slot];
  const float *logits = pasada_get_logits(s->ctx, d->row);
  d->token = -1;
  const int i = d->slot;
  if (s->sp[i].n > 0) { /* verify the draft after the next token */
    if (pa_spec_verify(s->ctx, d->row, j->sampler, s->tok, s->sp[i].draft, s->sp[i].n, s->sp[i].q,
                       s->n_vocab, s->sp[i].scratch, j->req.max_tokens - j->n_generated,
                       s->sp[i].out, &s->sp[i].n_out, &s->sp[i].n_acc) != PASADA_OK) {
      snprintf(d->err, sizeof d->err, "%s", pasada_last_error());
      return;
    }
    d->token = s->sp[i].out[0];
    return;
  }
  if (j->think_forced >= 0 && j->think_forced < j->req.n_think_force) { /* the budget is spent */
    d->token = j->req.think_force[j->think_forced++];
  } else if (!logits ||
             pasada_sampler_sample(j->sampler, logits, s->n_vocab, &d->token) != PASADA_OK) {
    snprintf(d->err, sizeof d->err, "%s", logits ? pasada_last_error() : "no logits");
    return;
  }
  pasada_sampler_accept(j->sampler, d->token);
  if (j->req.logprobs && logits)
    compute_logprobs(logits, s->n_vocab, d->token, j->req.top_logprobs, &d->lp);
}

/* Whether s[0..n) holds m. */
static bool holds(const char *s, size_t n, const char *m) {
  const size_t k = strlen(m);
  for (size_t i = 0; k && i + k <= n; i++)
    if (memcmp(s + i, m, k) == 0) return true;
  return false;
}

/* The reasoning budget's count after a token whose text is piece[0..n). */
static void think_track(srv_job *j, const char *piece, size_t n) {
  if (!j->req.think_limit || j->think_state == 2) return;
  const srv_request *r = &j->req;
  if (j->think_forced >= r->n_think_force) { /* the close marker is written */
    j->think_state = 2;
    return;
  }
  /* the last bytes of the output, enough to hold either marker */
  char *t = j->think_tail;
  const size_t cap = sizeof j->think_tail;
  if (n >= cap) {
    memcpy(t, piece + n - cap, cap);
    j->n_think_tail = (uint8_t)cap;
  } else {
    size_t keep = j->n_think_tail + n > cap ? cap - n : j->n_think_tail;
    memmove(t, t + j->n_think_tail - keep, keep);
    memcpy(t + keep, piece, n);
    j->n_think_tail = (uint8_t)(keep + n);
  }
  if (j->think_state == 0) {
    if (!holds(t, j->n_think_tail, r->think_open)) return;
    j->think_state = 1; /* tokens after this one count */
    j->n_think_tail = 0;
    j->think_used = 0;
  } else {
    if (j->think_forced < 0 && holds(t, j->n_think_tail, r->think_close)) {
      j->think_state = 2; /* the model closed it within the budget */
      return;
    }
    if (j->think_forced < 0) j->think_used++;
  }
  if (j->think_forced < 0 && j->think_used >= r->think_budget) j->think_forced = 0;
}

/* Delivers slot i's drawn token (d): its text, stop strings, the end. */
static void on_sampled(srv_sched *s, int i, const srv_sampled *d) {
  srv_job *j = s->slot[i];
  const int32_t tok = d->token;
  if (tok < 0) {
    srv_error e;
    srv_fail(&e, 500, "server_error", NULL, NULL, "sampling failed: %s", d->err);
    finish_slot(s, i, SRV_FINISH_ERROR, &e);
    return;
  }
  double now = srv_now();
  j->n_generated++;
  if (j->n_generated == 1) {
    j->t_first = now;
    srv_metrics_ttft(s->metrics, now - j->t_submit);
  } else {
    srv_metrics_itl(s->metrics, now - j->t_last);
  }
  j->t_last = now;
  if (pasada_tokenizer_is_eog(s->tok, tok)) {
    release_held(j);
    finish_slot(s, i, SRV_FINISH_STOP, NULL);
    return;
  }
  char piece[PASADA_DETOK_PIECE_MAX];
  size_t n = pasada_detok_push(j->detok, tok, piece, sizeof piece);
  think_track(j, piece, n);
  srv_buf b = {.p = j->held, .n = j->n_held, .cap = j->cap_held};
  srv_buf_append(&b, piece, n);
  j->held = b.p, j->n_held = b.n, j->cap_held = b.cap;
  bool matched = false;
  size_t k = srv_stop_scan(j->held ? j->held : "", j->n_held, j->req.stop, j->req.n_stop, &matched);
  srv_job_emit(j, j->held, k, j->req.logprobs ? &d->lp : NULL);
  if (matched) {
    note_stop(j, k);
    j->n_held = 0;
    finish_slot(s, i, SRV_FINISH_STOP, NULL);
    return;
  }
  if (k < j->n_held) memmove(j->held, j->held + k, j->n_held - k);
  j->n_held -= k;
  if (j->n_generated >= j->req.max_tokens || j->n_fed >= s->n_ctx) {
    finish_slot(s, i, SRV_FINISH_LENGTH, NULL);
    return;
  }
  j->next_token = tok;
  if (s->sp[i].mode != PA_SPEC_OFF && s->sp[i].n_hist < s->n_ctx)
    s->sp[i].hist[s->sp[i].n_hist++] = tok;
}

/* Puts slot i's draft after its next token (row s->sp[i].row0) into the
 * batch at b_*[*n]: at most *budget tokens, which it lowers. */
static void add_draft(srv_sched *s, int i, int32_t *n, int32_t *budget) {
  srv_job *j = s->slot[i];
  int32_t k = pa_spec_pace_next(&s->sp[i].pace, s->sp[i].max);
  if (k > j->req.max_tokens - j->n_generated - 1) k = j->req.max_tokens - j->n_generated - 1;
  if (k > s->n_ctx - j->n_fed - 1) k = s->n_ctx - j->n_fed - 1;
  if (k > *budget) k = *budget;
  if (k <= 0) return;
  if (!s->sp[i].scratch && !(s->sp[i].scratch = malloc((size_t)s->n_vocab * sizeof(float)))) return;
  int32_t m = 0;
  s->sp[i].q = NULL;
  if (s->sp[i].mode == PA_SPEC_LOOKUP) {
    m = pa_spec_lookup(s->sp[i].hist, s->sp[i].n_hist, 3, 1, k, s->sp[i].draft);
  } else if (s->sp[i].mode == PA_SPEC_DRAFT) {
    const bool greedy = j->req.sampling.temp <= 0;
    m = pa_spec_draft_propose(s->draft, i, s->sp[i].hist, s->sp[i].n_hist, k, greedy,
                              s->sp[i].draft, &s->sp[i].q);
    if (m < 0) m = 0; /* the draft model failed: decode without a draft */
  } else if (s->sp[i].mode == PA_SPEC_MTP) {
    const bool greedy = j->req.sampling.temp <= 0;
    m = pa_spec_mtp_propose(s->mtp, i, s->sp[i].hist, s->sp[i].n_hist, k, greedy, s->sp[i].draft,
                            &s->sp[i].q);
    if (m < 0) m = 0;
  }
  for (int32_t t = 0; t < m; t++) {
    s->b_token[*n] = s->sp[i].draft[t];
    s->b_pos[*n] = j->n_fed + 1 + t;
    s->b_seq[*n] = i;
    s->b_want[*n] = 1;
    ++*n;
  }
  s->sp[i].n = m;
  *budget -= m;
}

/* Delivers slot i's verified tokens in order (each as on_sampled), then
 * keeps the kept part of its batch rows in the cache (the step counted all
 * of them in n_fed). */
static void on_verified(srv_sched *s, int i, const srv_sampled *d) {
  srv_job *j = s->slot[i];
  const int32_t n_out = s->sp[i].n_out, n_draft = s->sp[i].n;
  j->n_fed += n_out - (1 + n_draft);
  pa_spec_pace_update(&s->sp[i].pace, n_draft, s->sp[i].n_acc, s->sp[i].max);
  if (n_draft > 0)
    srv_metrics_spec(s->metrics, s->sp[i].mode, n_out < n_draft ? n_out : n_draft, s->sp[i].n_acc);
  if (d->token < 0) {
    on_sampled(s, i, d);
    return;
  }
  for (int32_t t = 0; t < n_out && s->slot[i] == j; t++) {
    srv_sampled one = *d;
    one.token = s->sp[i].out[t];
    on_sampled(s, i, &one);
  }
  if (s->slot[i] == j) pasada_seq_truncate(s->ctx, i, j->n_fed);
}

/* ---- one step ---- */

/* Whether other choices of j's request wait for j's prompt (make_choices:
 * the first choice of each prompt, when n > 1) on a recurrent model. They
 * can start only from a state snapshot that leaves them a token to decode
 * (pasada_seq_reuse_prefix), so j's prompt goes in two passes, the last
 * token alone, and j's state before that token is kept for them. */
static bool leads_recurrent_choices(const srv_sched *s, const srv_job *j) {
  return s->recurrent && j->req.kind != SRV_EMBEDDING && j->req.n > 1 && !j->wait_prefill;
}

/* The running job admitted last: the one to give up when the cache is full. */
static int newest_slot(const srv_sched *s) {
  int best = -1;
  for (int i = 0; i < s->n_slots; i++)
    if (s->slot[i] && (best < 0 || s->slot_order[i] > s->slot_order[best])) best = i;
  return best;
}

static void run_step(srv_sched *s) {
  int32_t n = 0;
  for (int i = 0; i < s->n_slots; i++) s->sp[i].n = 0;
  /* every generating sequence's next token, and its draft while few run
   * (prefilling ones count: their prompt chunks fill the batch too) */
  int32_t draft_budget = s->n_running <= s->spec_max_seqs ? s->prefill_chunk / 2 : 0;
  const int32_t draft_total = draft_budget;
  for (int i = 0; i < s->n_slots; i++) {
    srv_job *j = s->slot[i];
    if (!j || j->next_token < 0) continue;
    s->sp[i].row0 = n;
    s->b_token[n] = j->next_token;
    s->b_pos[n] = j->n_fed;
    s->b_seq[n] = i;
    s->b_want[n] = 1;
    n++;
    if (s->sp[i].mode != PA_SPEC_OFF && draft_budget > 0) add_draft(s, i, &n, &draft_budget);
  }
  /* prompt chunks, oldest admission first (a sequence at most once) */
  int32_t budget = s->prefill_chunk - (draft_total - draft_budget);
  uint64_t after = 0; /* admission order already served */
  bool first = true;
  while (budget > 0) {
    int best = -1;
    for (int i = 0; i < s->n_slots; i++) {
      srv_job *j = s->slot[i];
      if (!j || j->next_token >= 0 || j->n_fed >= j->req.n_prompt) continue;
      if (!first && s->slot_order[i] <= after) continue;
      if (best < 0 || s->slot_order[i] < s->slot_order[best]) best = i;
    }
    if (best < 0) break;
    first = false;
    after = s->slot_order[best];
    srv_job *j = s->slot[best];
    int32_t k = j->req.n_prompt - j->n_fed;
    /* an input to embed goes in whole (a bidirectional encoder needs all
     * of it in one pass; serve makes the chunk hold the longest) */
    if (j->req.kind == SRV_EMBEDDING && k > budget) break;
    if (k > budget) k = budget;
    if (k > 1 && j->n_fed + k == j->req.n_prompt && leads_recurrent_choices(s, j)) k--;
    for (int32_t t = 0; t < k; t++) {
      int32_t p = j->n_fed + t;
      s->b_token[n] = j->req.prompt[p];
      s->b_pos[n] = p;
      s->b_seq[n] = best;
      s->b_want[n] = p == j->req.n_prompt - 1 && j->req.kind != SRV_EMBEDDING; /* embeddings: no logits */
      n++;
    }
    budget -= k;
  }
  if (n == 0) return;

  pasada_batch batch = {.n_tokens = n,
                        .token = s->b_token,
                        .pos = s->b_pos,
                        .seq_id = s->b_seq,
                        .want_logits = s->b_want};
  double t0 = srv_now();
  int rc = pasada_decode(s->ctx, &batch);
  if (rc == PASADA_ERR_CONTEXT_FULL) {
    /* The reservation should prevent this; if the cache still runs out,
     * give up the newest sequence rather than corrupt or stall the rest. */
    int v = newest_slot(s);
    srv_job *j = s->slot[v];
    if (j->n_generated > 0) {
      finish_slot(s, v, SRV_FINISH_LENGTH, NULL);
    } else {
      srv_error e;
      srv_fail(&e, 503, "server_error", "kv_cache_full", NULL,
               "the KV cache has no room for this request now (%s)", pasada_last_error());
      finish_slot(s, v, SRV_FINISH_ERROR, &e);
    }
    return;
  }
  if (rc != PASADA_OK) {
    srv_error e;
    srv_fail(&e, 500, "server_error", NULL, NULL, "decode failed: %s", pasada_last_error());
    for (int32_t t = 0; t < n; t++)
      if (s->slot[s->b_seq[t]]) finish_slot(s, s->b_seq[t], SRV_FINISH_ERROR, &e);
    return;
  }
  srv_metrics_step(s->metrics, n, srv_now() - t0);
  for (int32_t t = 0; t < n; t++) s->slot[s->b_seq[t]]->n_fed++;
  /* a recurrent model's state where a prompt ends, for the next turn of its
   * conversation, whose rendering of the answer may differ from the tokens
   * generated, and a token before, for the request's other choices
   * (leads_recurrent_choices) (no-op for other models) */
  for (int32_t t = 0; t < n; t++) {
    const srv_job *j = s->slot[s->b_seq[t]];
    if (j->next_token < 0 && j->req.kind != SRV_EMBEDDING &&
        (s->b_pos[t] == j->req.n_prompt - 1 ||
         (s->b_pos[t] == j->req.n_prompt - 2 && leads_recurrent_choices(s, j))))
      pasada_seq_snapshot(s->ctx, s->b_seq[t]);
  }
  /* the hidden states the context kept for the MTP drafter: none needed by
   * sequences that draft otherwise */
  for (int i = 0; s->mtp && i < s->n_slots; i++)
    if (s->slot[i] && s->sp[i].mode != PA_SPEC_MTP) pa_spec_mtp_forget(s->mtp, i);
  /* an embedding job is done once its whole input is in: its sequence's pool */
  for (int i = 0; i < s->n_slots; i++) {
    srv_job *j = s->slot[i];
    if (!j || j->req.kind != SRV_EMBEDDING || j->n_fed < j->req.n_prompt) continue;
    float *v = malloc((size_t)s->n_embd * sizeof *v);
    srv_error e;
    if (!v || pasada_get_embeddings(s->ctx, i, v) != PASADA_OK) {
      free(v);
      srv_fail(&e, 500, "server_error", NULL, NULL, "embedding failed: %s", v ? pasada_last_error() : "out of memory");
      finish_slot(s, i, SRV_FINISH_ERROR, &e);
      continue;
    }
    pthread_mutex_lock(&j->mu);
    j->embd = v;
    pthread_mutex_unlock(&j->mu);
    finish_slot(s, i, SRV_FINISH_STOP, NULL);
  }
  /* draw every sequence's token at once (a sequence has at most one row
   * with logits), then deliver them in batch order */
  int32_t n_draw = 0;
  for (int32_t t = 0; t < n; t++) {
    const int32_t i = s->b_seq[t];
    const bool draft_row = s->sp[i].n > 0 && t > s->sp[i].row0 && t <= s->sp[i].row0 + s->sp[i].n;
    if (s->b_want[t] && !draft_row && s->slot[i] && n_draw < s->n_slots)
      s->sampled[n_draw++] = (srv_sampled){.row = t, .slot = i};
  }
  pasada_parallel_for(s->ctx, sample_one, s, n_draw);
  for (int32_t k = 0; k < n_draw; k++) {
    const int i = s->sampled[k].slot;
    if (s->sp[i].n > 0)
      on_verified(s, i, &s->sampled[k]);
    else
      on_sampled(s, i, &s->sampled[k]);
  }
  srv_bell_ring(&s->bell); /* the readers of this step's output, all at once */
}

static void publish_gauges(srv_sched *s) {
  pasada_kv_stats kv;
  pasada_kv_get_stats(s->ctx, &kv);
  pthread_mutex_lock(&s->mu);
  int q = s->queue_len;
  pthread_mutex_unlock(&s->mu);
  srv_metrics_gauges(s->metrics, q, s->n_running, &kv);
}

bool srv_sched_call(srv_sched *s, void (*fn)(pasada_context *ctx, void *arg), void *arg) {
  pthread_mutex_lock(&s->mu);
  while (s->call_fn && !s->stopped) pthread_cond_wait(&s->call_cv, &s->mu);
  bool ran = false;
  if (!s->stopped) {
    s->call_fn = fn, s->call_arg = arg, s->call_done = false;
    pthread_cond_signal(&s->cv);
    while (!s->call_done && !s->stopped) pthread_cond_wait(&s->call_cv, &s->mu);
    ran = s->call_done;
    s->call_fn = NULL;
    pthread_cond_broadcast(&s->call_cv); /* the next caller */
  }
  pthread_mutex_unlock(&s->mu);
  return ran;
}

/* Runs a pending srv_sched_call (under s->mu). */
static void run_call(srv_sched *s) {
  if (!s->call_fn || s->call_done) return;
  s->call_fn(s->ctx, s->call_arg);
  s->call_done = true;
  pthread_cond_broadcast(&s->call_cv);
}

static void *sched_main(void *arg) {
  srv_sched *s = arg;
  for (;;) {
    pthread_mutex_lock(&s->mu);
    run_call(s);
    while (!s->draining && s->n_running == 0 && !s->queue_head) {
      pthread_mutex_unlock(&s->mu);
      publish_gauges(s);
      pthread_mutex_lock(&s->mu);
      if (s->draining || s->queue_head) break;
      run_call(s); /* one that came while the lock was let go */
      pthread_cond_wait(&s->cv, &s->mu);
      run_call(s);
    }
    bool draining = s->draining;
    bool past_deadline = draining && srv_now() >= s->drain_deadline;
    pthread_mutex_unlock(&s->mu);

    for (int i = 0; i < s->n_slots; i++) {
      srv_job *j = s->slot[i];
      if (!j) continue;
      if (atomic_load(&j->cancelled))
        finish_slot(s, i, SRV_FINISH_CANCELLED, NULL);
      else if (past_deadline)
        finish_slot(s, i, SRV_FINISH_LENGTH, NULL);
    }
    admit_waiting(s, draining);
    if (draining && s->n_running == 0) break;
    run_step(s);
    publish_gauges(s);
  }
  publish_gauges(s);
  pthread_mutex_lock(&s->mu);
  s->stopped = true; /* a caller of srv_sched_call waits no more */
  pthread_cond_broadcast(&s->call_cv);
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

int srv_sched_start(srv_sched *s) {
  if (pthread_create(&s->thread, NULL, sched_main, s) != 0) return PASADA_ERR_NOMEM;
  s->started = true;
  return PASADA_OK;
}
