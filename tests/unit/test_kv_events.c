/* test_kv_events.c: the block manager's prefix-cache events (what
 * `pasada serve --kv-events` publishes). A mirror kept from the events
 * alone (STORED adds a block after its parent, REMOVED takes one away)
 * must equal the prefix map (pa_kv_cached_hashes) after every operation
 * of a random workload on a small pool: prompts sharing prefixes, reuse,
 * generation, truncation inside shared and own blocks, evictions. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "runtime/kv_cache.h"
#include "test_check.h"

enum { BS = 16, SEQS = 3, CTX = 160, BLOCKS = 14, MAXB = 64 };

typedef struct {
  uint64_t hash[MAXB], parent[MAXB];
  int32_t tokens[MAXB][BS];
  int n, stored, removed;
} mirror;

static int find(const mirror *m, uint64_t h) {
  for (int i = 0; i < m->n; i++)
    if (m->hash[i] == h) return i;
  return -1;
}

static void on_event(void *user, const pa_kv_event *ev) {
  mirror *m = user;
  if (ev->kind == PA_KV_EVENT_STORED) {
    CHECK(ev->n_tokens == BS && ev->tokens, "a stored block carries its %d tokens", BS);
    CHECK(find(m, ev->hash) < 0, "stored twice: %llx", (unsigned long long)ev->hash);
    CHECK(ev->parent_hash == 0 || find(m, ev->parent_hash) >= 0, "stored before its parent: %llx",
          (unsigned long long)ev->parent_hash);
    if (m->n < MAXB && ev->n_tokens == BS) {
      m->hash[m->n] = ev->hash, m->parent[m->n] = ev->parent_hash;
      memcpy(m->tokens[m->n], ev->tokens, sizeof m->tokens[0]);
      m->n++;
    }
    m->stored++;
  } else {
    CHECK(ev->kind == PA_KV_EVENT_REMOVED && !ev->tokens, "a removal: kind %d", ev->kind);
    int i = find(m, ev->hash);
    CHECK(i >= 0, "removed a block never stored: %llx", (unsigned long long)ev->hash);
    if (i >= 0) {
      m->n--;
      m->hash[i] = m->hash[m->n], m->parent[i] = m->parent[m->n];
      memcpy(m->tokens[i], m->tokens[m->n], sizeof m->tokens[0]);
    }
    m->removed++;
  }
}

/* The mirror equals the map: the same hashes with the same parents, and
 * each mirrored block's tokens are the ones the cache holds for it. */
static void check_equal(const pa_kv_cache *kv, const mirror *m, int step) {
  uint64_t h[BLOCKS], p[BLOCKS];
  int32_t n = pa_kv_cached_hashes(kv, h, p, BLOCKS);
  CHECK(n == m->n, "step %d: the map holds %d blocks, the events say %d", step, n, m->n);
  for (int32_t i = 0; i < n && i < BLOCKS; i++) {
    int j = find(m, h[i]);
    CHECK(j >= 0 && m->parent[j] == p[i], "step %d: block %llx missing or with another parent",
          step, (unsigned long long)h[i]);
    for (int32_t b = 0; j >= 0 && b < kv->n_blocks; b++)
      if (kv->registered[b] == PA_KV_FULL && kv->hash[b] == h[i])
        CHECK(!memcmp(kv->tokens + (int64_t)b * BS, m->tokens[j], sizeof m->tokens[0]),
              "step %d: the event's tokens differ from the block's", step);
  }
}

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint32_t rnd(uint32_t n) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (uint32_t)(rng % n);
}

/* Feeds tokens[from..to) to seq one position at a time; false when the
 * pool has no block for it. */
static bool feed(pa_kv_cache *kv, int32_t seq, const int32_t *tokens, int32_t from, int32_t to) {
  for (int32_t p = from; p < to; p++) {
    if (pa_kv_reserve(kv, 1, &seq, &p) != PASADA_OK) return false;
    pa_kv_commit(kv, 1, &tokens[p], &seq, &p);
  }
  return true;
}

int main(void) {
  pa_kv_cache kv;
  CHECK(pa_kv_init(&kv, 1, 1, 16, 16, SEQS, CTX, BS, BLOCKS) == PASADA_OK, "init: %s",
        pa_last_error());
  mirror m = {0};
  kv.on_event = on_event, kv.event_user = &m;
  /* three conversations' beginnings; each prompt is one of them plus a tail */
  int32_t base[3][CTX];
  for (int c = 0; c < 3; c++)
    for (int i = 0; i < CTX; i++) base[c][i] = 1000 * c + (i < 40 ? i : (int)rnd(50));
  int32_t prompt[SEQS][CTX];
  bool live[SEQS] = {false};
  for (int step = 0; step < 600; step++) {
    int32_t s = (int32_t)rnd(SEQS);
    uint32_t op = rnd(10);
    if (!live[s]) { /* a new request: reuse what is cached, then prefill and generate */
      int c = (int)rnd(3);
      int32_t n = 20 + (int32_t)rnd(90);
      memcpy(prompt[s], base[c], sizeof prompt[s]);
      for (int32_t i = 60 + (int32_t)rnd(40); i < CTX; i++) prompt[s][i] = (int32_t)rnd(30000);
      int32_t have = pa_kv_reuse_prefix(&kv, s, prompt[s], n);
      CHECK(have < n, "step %d: reuse left no token to decode", step);
      live[s] = feed(&kv, s, prompt[s], have, n + (int32_t)rnd(30));
      if (!live[s]) pa_kv_truncate(&kv, s, 0); /* no room: the request gives up */
    } else if (op < 3) { /* truncate: drafts rejected, or a rewrite inside a block */
      pa_kv_truncate(&kv, s, (int32_t)rnd((uint32_t)kv.len[s] + 1));
      live[s] = kv.len[s] > 0;
    } else if (op < 6 && kv.len[s] + 8 < CTX) { /* generate more */
      if (!feed(&kv, s, prompt[s], kv.len[s], kv.len[s] + 8)) {
        pa_kv_truncate(&kv, s, 0);
        live[s] = false;
      }
    } else { /* finish */
      pa_kv_truncate(&kv, s, 0);
      live[s] = false;
    }
    check_equal(&kv, &m, step);
  }
  CHECK(m.stored > 50 && m.removed > 20, "the workload stored %d and evicted %d blocks", m.stored,
        m.removed);
  for (int32_t s = 0; s < SEQS; s++) pa_kv_truncate(&kv, s, 0);
  check_equal(&kv, &m, -1);
  pa_kv_free(&kv);
  if (failures) {
    printf("test_kv_events: %d failures\n", failures);
    return 1;
  }
  printf("test_kv_events: ok (%d stored, %d removed)\n", m.stored, m.removed);
  return 0;
}
