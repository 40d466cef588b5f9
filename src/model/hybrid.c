/* hybrid.c: what a context keeps for a model with recurrent layers
 * (qwen35): their state is one value per sequence, the state after the
 * sequence's last position, so it cannot be rebuilt from KV blocks the way
 * attention's prefix is. A context keeps snapshots of it, each with the
 * tokens it covers: when a sequence is truncated (ends, or is cut short),
 * its state at its full length is copied into a snapshot slot (backend
 * state_copy), and a caller takes one at the sequence's current length with
 * pasada_seq_snapshot (the CLI chat and the server at the end of every
 * prompt, so that the next turn of a conversation, whose rendering of the
 * previous answer may differ from the tokens generated, resumes after the
 * previous prompt). Prefix reuse for such a model reuses exactly the
 * prefix a snapshot covers (the longest one the prompt extends, short of
 * the prompt's last token), and only when the KV cache still holds every
 * position of it; truncation to a position inside a sequence keeps the
 * longest snapshotted prefix of what it would keep (that very prefix
 * where a snapshot of it exists), else drops the whole sequence (the
 * caller reads pasada_seq_length).
 *
 * Rollback checkpoints (n_ckpt > 0, pasada_context_params.n_rollback):
 * a forward pass that gives a sequence two or more tokens, at positions
 * a..b, also has the backend copy its state after each position of
 * [max(a, b + 1 - n_ckpt), b] into the sequence's n_ckpt slots (b->ckpt,
 * position p's in slot p % n_ckpt of them), so truncating it to one past
 * any of those positions restores the state there: speculative
 * decoding's rejected drafts roll back without decoding anything again.
 * A one-token pass copies nothing and leaves the kept positions as they
 * are (the range [ckpt_lo, ckpt_hi]); a later pass of several tokens
 * extends that range when it continues it, else replaces it. */
#include <string.h>

#include "base/base.h"
#include "model/model.h"

int pa_hybrid_init(struct pa_context *c, int32_t n_snap, int32_t n_ckpt) {
  c->n_snap = n_snap;
  c->n_ckpt = n_ckpt;
  c->snap_len = pa_calloc((size_t)n_snap, sizeof(int32_t));
  c->snap_lru = pa_calloc((size_t)n_snap, sizeof(uint64_t));
  c->snap_tokens = pa_calloc((size_t)n_snap * (size_t)c->n_ctx, sizeof(int32_t));
  c->seq_tokens = pa_calloc((size_t)c->n_ctx, sizeof(int32_t));
  if (!c->snap_len || !c->snap_lru || !c->snap_tokens || !c->seq_tokens)
    return pa_error(PASADA_ERR_NOMEM, "out of memory for %d state snapshots", n_snap);
  if (n_ckpt > 0) {
    c->ckpt_lo = pa_calloc(4 * (size_t)c->n_seq_max, sizeof(int32_t));
    c->ckpt_slot = pa_calloc((size_t)c->n_batch, sizeof(int32_t));
    if (!c->ckpt_lo || !c->ckpt_slot)
      return pa_error(PASADA_ERR_NOMEM, "out of memory for rollback checkpoints");
    c->ckpt_hi = c->ckpt_lo + c->n_seq_max, c->ckpt_first = c->ckpt_hi + c->n_seq_max;
    c->ckpt_last = c->ckpt_first + c->n_seq_max;
    for (int32_t s = 0; s < c->n_seq_max; s++) c->ckpt_hi[s] = -1;
  }
  return PASADA_OK;
}

void pa_hybrid_free(struct pa_context *c) {
  pa_free(c->snap_len);
  pa_free(c->snap_lru);
  pa_free(c->snap_tokens);
  pa_free(c->seq_tokens);
  pa_free(c->ckpt_lo);
  pa_free(c->ckpt_slot);
}

void pa_hybrid_pass(struct pa_context *c, const pa_fwd_batch *b) {
  const int32_t K = c->n_ckpt;
  int32_t *first = c->ckpt_first, *last = c->ckpt_last;
  for (int32_t t = b->n - 1; t >= 0; t--) first[b->seq[t]] = b->pos[t];
  for (int32_t t = 0; t < b->n; t++) last[b->seq[t]] = b->pos[t];
  for (int32_t t = 0; t < b->n; t++) {
    const int32_t s = b->seq[t], p = b->pos[t];
    c->ckpt_slot[t] = -1;
    if (first[s] == last[s]) continue; /* one token: nothing kept, nothing dropped */
    const int32_t lo = first[s] > last[s] + 1 - K ? first[s] : last[s] + 1 - K;
    if (p < lo) continue;
    c->ckpt_slot[t] = c->n_seq_max + c->n_snap + s * K + p % K;
    if (p == lo) { /* the kept range: this pass's, joined to the one before when that ends here */
      const bool joined =
          lo == first[s] && c->ckpt_hi[s] == lo - 1 && c->ckpt_lo[s] <= c->ckpt_hi[s];
      const int32_t ring = last[s] + 1 - K; /* older positions share a slot with this pass's */
      c->ckpt_lo[s] = joined ? (c->ckpt_lo[s] > ring ? c->ckpt_lo[s] : ring) : lo;
      c->ckpt_hi[s] = last[s];
    }
  }
}

/* The sequence's state restored from its checkpoint after position p0 - 1
 * when it has one; false otherwise. */
static bool rollback(struct pa_context *c, int32_t seq, int32_t p0) {
  if (c->n_ckpt <= 0 || p0 <= 0 || p0 - 1 < c->ckpt_lo[seq] || p0 - 1 > c->ckpt_hi[seq])
    return false;
  const int32_t K = c->n_ckpt;
  c->be->ops->state_copy(c->bc, seq, c->n_seq_max + c->n_snap + seq * K + (p0 - 1) % K);
  pa_kv_truncate(&c->kv, seq, p0);
  c->ckpt_hi[seq] = p0 - 1;
  return true;
}

/* The sequence now holds a state no checkpoint continues: none valid. */
static void no_checkpoints(struct pa_context *c, int32_t seq) {
  if (c->n_ckpt > 0) c->ckpt_lo[seq] = 0, c->ckpt_hi[seq] = -1;
}

/* The first n tokens of sequence seq, from its KV blocks, into out. */
static void seq_tokens(const pa_kv_cache *kv, int32_t seq, int32_t n, int32_t *out) {
  const int32_t bs = kv->block_size;
  for (int32_t p = 0; p < n; p++) out[p] = kv->tokens[(int64_t)kv->table[seq][p / bs] * bs + p % bs];
}

/* The snapshot holding exactly tokens[0, n), or -1. */
static int32_t find_exact(const struct pa_context *c, const int32_t *tokens, int32_t n) {
  for (int32_t i = 0; i < c->n_snap; i++)
    if (c->snap_len[i] == n &&
        !memcmp(c->snap_tokens + (size_t)i * (size_t)c->n_ctx, tokens, (size_t)n * sizeof(int32_t)))
      return i;
  return -1;
}

/* The longest snapshot whose tokens are tokens[0, L) for some 0 < L <= max, or -1. */
static int32_t find_prefix(const struct pa_context *c, const int32_t *tokens, int32_t max) {
  int32_t best = -1;
  for (int32_t i = 0; i < c->n_snap; i++) {
    const int32_t L = c->snap_len[i];
    if (L <= 0 || L > max || (best >= 0 && L <= c->snap_len[best])) continue;
    if (!memcmp(c->snap_tokens + (size_t)i * (size_t)c->n_ctx, tokens, (size_t)L * sizeof(int32_t))) best = i;
  }
  return best;
}

/* Snapshots sequence seq's state at its full length (nothing when empty). */
static void save(struct pa_context *c, int32_t seq) {
  const int32_t len = c->kv.len[seq];
  if (len <= 0) return;
  seq_tokens(&c->kv, seq, len, c->seq_tokens);
  int32_t slot = find_exact(c, c->seq_tokens, len);
  if (slot < 0) { /* the least recently used slot (an empty one first) */
    slot = 0;
    for (int32_t i = 1; i < c->n_snap; i++)
      if (c->snap_lru[i] < c->snap_lru[slot]) slot = i;
    memcpy(c->snap_tokens + (size_t)slot * (size_t)c->n_ctx, c->seq_tokens, (size_t)len * sizeof(int32_t));
    c->snap_len[slot] = len;
    c->be->ops->state_copy(c->bc, c->n_seq_max + slot, seq);
  }
  c->snap_lru[slot] = ++c->snap_clock;
}

void pa_hybrid_snapshot(struct pa_context *c, int32_t seq) {
  save(c, seq); /* the state and the rollback checkpoints stay as they are */
}

void pa_hybrid_truncate(struct pa_context *c, int32_t seq, int32_t p0) {
  const int32_t len = c->kv.len[seq];
  if (p0 >= len) return;
  if (rollback(c, seq, p0)) return; /* a draft rolled back: no snapshot of it */
  int32_t slot = -1;
  if (p0 > 0) {
    seq_tokens(&c->kv, seq, p0, c->seq_tokens);
    slot = find_prefix(c, c->seq_tokens, p0);
    /* the most recently used now, so the snapshot save() takes (n_snap >=
     * 2) never evicts it */
    if (slot >= 0) c->snap_lru[slot] = ++c->snap_clock;
  }
  save(c, seq);
  pa_kv_truncate(&c->kv, seq, slot >= 0 ? c->snap_len[slot] : 0);
  if (slot >= 0) c->be->ops->state_copy(c->bc, seq, c->n_seq_max + slot);
  no_checkpoints(c, seq);
}

int32_t pa_hybrid_reuse_prefix(struct pa_context *c, int32_t seq, const int32_t *tokens, int32_t n) {
  if (c->kv.len[seq] != 0) return c->kv.len[seq];
  const int32_t best = find_prefix(c, tokens, n - 1);
  if (best < 0) return 0;
  const int32_t L = c->snap_len[best];
  /* the KV cache's positions of exactly that prefix (it leaves one token
   * of what it is given to decode: L + 1 tokens) */
  if (pa_kv_reuse_prefix(&c->kv, seq, tokens, L + 1) != L) {
    pa_kv_truncate(&c->kv, seq, 0);
    return 0;
  }
  c->be->ops->state_copy(c->bc, seq, c->n_seq_max + best);
  c->snap_lru[best] = ++c->snap_clock;
  no_checkpoints(c, seq);
  return L;
}
