/* speculative.h: speculative decoding. Drafts of the next tokens (prompt
 * lookup over the text so far, or a smaller draft model of the same
 * vocabulary) and their verification against the target's logits of one
 * batched pass, so the output is what the target's sampler alone would give:
 * greedy, the same tokens; sampling, the same distribution.
 *
 * The caller decodes [last, d1..dk] for a sequence with every row's logits
 * wanted, calls pa_spec_accept for rows 0, 1, ... in order (accepting each
 * emitted token into the sampler, as pasada_sampler_sample's caller does),
 * stops at the first rejection (the emitted token replaces the draft) or
 * after row k (a token past the draft, for free), then truncates the
 * sequence to the tokens kept (pasada_seq_truncate). */
#ifndef PASADA_SPECULATIVE_H
#define PASADA_SPECULATIVE_H

#include <stdbool.h>
#include <stdint.h>

#include "pasada.h"

/* Most draft tokens one verification takes (pa_spec_draft's buffers). */
#define PA_SPEC_DRAFT_MAX 32

typedef enum {
  PA_SPEC_OFF = 0,
  PA_SPEC_LOOKUP = 1,
  PA_SPEC_DRAFT = 2,
  PA_SPEC_MTP = 3
} pa_spec_mode;
/* "off", "lookup", "draft", "mtp" -> the mode; false for anything else. */
bool pa_spec_mode_from_name(const char *name, pa_spec_mode *out);
const char *pa_spec_mode_name(pa_spec_mode mode);
/* The draft length of a mode when neither the user nor the request says:
 * lookup 8, draft model 4, mtp 3 (the largest: lookup's). */
int32_t pa_spec_default_draft_max(pa_spec_mode mode);
/* The rollback states (pasada_context_params.n_rollback) a model with
 * recurrent layers needs to verify up to draft_max drafts: the pass of the
 * pending token and the drafts rolls back to one past any of its
 * positions but the last. */
static inline int32_t pa_spec_rollback_states(int32_t draft_max) { return draft_max + 1; }

/* Prompt lookup: finds the latest earlier place in hist[0..n) where its
 * last g tokens occur (g from ngram_max down to ngram_min, the longest that
 * matches), and writes the up to `max` tokens that followed there to out.
 * Returns how many (0: no match). O(n * ngram_max) per call. */
int32_t pa_spec_lookup(const int32_t *hist, int32_t n, int32_t ngram_max, int32_t ngram_min,
                       int32_t max, int32_t *out);

/* Verifies one position. `logits` are the target's at this row (n_vocab
 * floats), `draft` the token proposed there (-1: none, a plain draw), and
 * `q` the distribution the draft was drawn from (n_vocab probabilities), or
 * NULL when it was chosen deterministically (prompt lookup, a greedy
 * draft). Writes the token to emit to *out and whether it is the draft to
 * *accepted; the token is not accepted into the sampler (the caller does).
 *  - q NULL (or a greedy sampler): draws x as pasada_sampler_sample does
 *    and accepts iff x == draft, which is the rejection rule for a point
 *    mass (accept with p(d); else draw from p without d, renormalised) and
 *    uses the sampler's generator exactly as generation without a draft
 *    would: the same seed gives the same tokens.
 *  - q given: accepts with probability min(1, p(d) / q(d)) and otherwise
 *    draws from max(0, p - q) renormalised, p being the sampler's
 *    distribution (pa_sampler_distribution: bias, grammar, penalties,
 *    top-k, top-p, min-p, temperature), so the token is distributed as p.
 * scratch holds n_vocab floats. Returns PASADA_OK or the sampler's error. */
int pa_spec_accept(pasada_sampler *s, const float *logits, int32_t n_vocab, int32_t draft,
                   const float *q, float *scratch, int32_t *out, bool *accepted);

/* Verifies a decoded draft of one sequence: rows row0..row0+n_draft of
 * the context's last batch hold the target's logits after the pending
 * token, d[0], ..., d[n_draft-1] (all wanted). Runs pa_spec_accept on
 * them in order, accepting each emitted token into the sampler, and writes
 * the emitted tokens to out (room for n_draft + 1): the accepted drafts,
 * then the first rejection's replacement or, when all were accepted, a
 * token past the draft. Stops early after `limit` tokens or after an
 * end-of-generation token of `tok` (NULL: no such stop). q: the draft's
 * rows as for pa_spec_accept (NULL: deterministic drafts). *n_out gets the
 * count (>= 1), *n_accepted the drafts among them. When generation goes
 * on, the sequence keeps n_out of the batch's tokens (the pending one and
 * every emitted one but the last, which is the next pending token): the
 * caller truncates it to that length. Returns PASADA_OK or the sampler's
 * error. */
int pa_spec_verify(pasada_context *ctx, int32_t row0, pasada_sampler *s,
                   const pasada_tokenizer *tok, const int32_t *draft, int32_t n_draft,
                   const float *q, int32_t n_vocab, float *scratch, int32_t limit, int32_t *out,
                   int32_t *n_out, int32_t *n_accepted);

/* How many tokens to draft, per sequence: drafts that keep being accepted
 * grow toward the maximum, a rejection shrinks the next draft to one past
 * what was accepted, and drafts that are rejected outright over and over
 * pause drafting for 1, 2, 4 ... up to PA_SPEC_PAUSE_MAX steps, so text
 * the drafts cannot guess costs little more than decoding without them. */
#define PA_SPEC_PAUSE_MAX 16
typedef struct {
  int32_t k;      /* the next draft's length (0: start at the maximum) */
  int32_t misses; /* drafts in a row with nothing accepted */
  int32_t pause;  /* steps left without drafting */
} pa_spec_pace;
/* The draft length to use at this step (0: decode without a draft); max is
 * the configured maximum. Counts a paused step. */
int32_t pa_spec_pace_next(pa_spec_pace *p, int32_t max);
/* Records a step's outcome: drafted tokens and how many were accepted. */
void pa_spec_pace_update(pa_spec_pace *p, int32_t drafted, int32_t accepted, int32_t max);

/* ---- draft model ---- */
typedef struct pa_spec_draft pa_spec_draft;

/* Whether a draft model can draft for the target: the same vocabulary size
 * and the same text for every token; PASADA_ERR_ARG naming the first
 * difference. */
int pa_spec_vocab_check(const pasada_model *target, const pasada_model *draft);

/* Loads the draft model at `path` with the target's model parameters, checks
 * its vocabulary against the target's (pa_spec_vocab_check), and makes its
 * context for n_seq sequences of n_ctx positions on n_threads threads.
 * Each sequence gets a sampler with the temperature and truncation of
 * `sampling` (no penalties, bias or grammar: its distribution is only a
 * proposal), seeded from sampling->seed (+1 per sequence). */
int pa_spec_draft_open(const char *path, const pasada_model *target,
                       const pasada_model_params *mparams, int32_t n_seq, int32_t n_ctx,
                       int32_t n_threads, const pasada_sampler_params *sampling,
                       pa_spec_draft **out);
void pa_spec_draft_free(pa_spec_draft *d);
/* Resets sequence seq (its cache and its sampler's generator). */
void pa_spec_draft_reset(pa_spec_draft *d, int32_t seq);
/* Proposes up to max (<= PA_SPEC_DRAFT_MAX) tokens after hist[0..n) for
 * sequence seq: first brings the draft's cache to hist (decoding what it
 * lacks, dropping what differs), then draws one token at a time; greedy
 * (argmax) when `greedy` (*q NULL), else from the draft sampler's
 * distribution, whose rows (n_vocab floats each, valid until the
 * sequence's next proposal) *q then points at (row i for token i).
 * Returns the count (0 when the draft's context is full), or -1 on a
 * decode failure (pasada_last_error says why). */
int32_t pa_spec_draft_propose(pa_spec_draft *d, int32_t seq, const int32_t *hist, int32_t n,
                              int32_t max, bool greedy, int32_t *out, const float **q);
/* The draft model (for statistics and its vocabulary). */
const pasada_model *pa_spec_draft_model(const pa_spec_draft *d);

/* ---- multi-token prediction ----
 * Drafts from the target model's own multi-token-prediction layer
 * (Qwen3.5's mtp.*, llama.cpp's nextn layers): entry j of a sequence pairs
 * the target's final hidden state at position j with the token at j + 1
 * (fc over their two norms, the layer, its norm, the shared output); the
 * last one's logits propose the token after the target's next, and each
 * further draft pairs the MTP's own output hidden state with the token it
 * just proposed. Its entries live in an MTP context of their own (model.h,
 * pa_context_create_mtp), at positions counted from the sequence's first
 * hidden state the target kept (a prefix the target reused from its cache
 * has none: drafting starts after it). */
typedef struct pa_spec_mtp pa_spec_mtp;
/* A drafter for n_seq sequences of n_ctx positions on n_threads threads
 * over target context `target`, which from now on keeps the hidden states
 * of what it decodes (pa_context_keep_hidden); the MTP layer's KV cache of
 * the target's type; samplers as pa_spec_draft_open's. PASADA_ERR_UNSUPPORTED when the model has no
 * multi-token-prediction layer or runs split across backends. */
int pa_spec_mtp_open(pasada_context *target, int32_t n_seq, int32_t n_ctx, int32_t n_threads,
                     const pasada_sampler_params *sampling, pa_spec_mtp **out);
void pa_spec_mtp_free(pa_spec_mtp *d);
/* Resets sequence seq (its entries and its sampler's generator). */
void pa_spec_mtp_reset(pa_spec_mtp *d, int32_t seq);
/* Drops the hidden states the target kept for sequence seq: one that does
 * not draft with the MTP layer (a server's other requests) needs none. */
void pa_spec_mtp_forget(pa_spec_mtp *d, int32_t seq);
/* pa_spec_draft_propose's contract for the target's sequence seq, whose
 * cache holds hist[0..n - 1) (hist[n - 1] is its next token, not yet
 * decoded): makes the entries due from the hidden states the target kept
 * (dropping them), then proposes. 0 when the target kept none of the
 * states due (nothing decoded since the drafter opened). */
int32_t pa_spec_mtp_propose(pa_spec_mtp *d, int32_t seq, const int32_t *hist, int32_t n,
                            int32_t max, bool greedy, int32_t *out, const float **q);

#endif
