/* test_kv_cache.c: the paged KV cache's prefix reuse: whole cached blocks,
 * then the leading positions of a block that follows the same prefix (a
 * cached full block, or a running sequence's block), copied into a block
 * of the new sequence's own; the values reused equal the ones stored, the
 * copy is private (writing it leaves the source alone), at least one token
 * is always left to decode, and every block comes back. A block that
 * fills with the same tokens as a cached one after the same prefix (two
 * sequences prefilling one prompt at once) is replaced by the cached one,
 * so the sequence's later blocks are cached too. A sequence that ends
 * inside a block leaves it cached as a tail (run_tails). For each cache
 * type, on layers of different shapes (SHAPES: Gemma 4's sliding and
 * global layers, and a layer that stores nothing). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "runtime/kv_cache.h"
#include "test_check.h"

enum { LAYERS = 3, HEADS = 2, HD = 16, BS = 16, SEQS = 5, CTX = 128 };
/* every layer's row is HEADS * HD values wide (or none): 2 heads of 16, 1
 * of 32, none */
static const pa_kv_shape SHAPES[LAYERS] = {{HEADS, HD, HD}, {1, HEADS * HD, HEADS * HD}, {0, HD, HD}};

/* K and V of (token, position, layer) for every head: fixed pseudo-random
 * values, never all zero */
static void kv_values(int32_t token, int32_t pos, int layer, float *k, float *v) {
  uint64_t x = (uint64_t)(uint32_t)token * 0x9e3779b97f4a7c15ull ^
               (uint64_t)pos * 0xbf58476d1ce4e5b9ull ^ (uint64_t)layer * 0x94d049bb133111ebull;
  for (int i = 0; i < HEADS * HD; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    k[i] = (float)((int)(x % 2001) - 1000) * 1e-3f;
    v[i] = (float)((int)((x >> 20) % 2001) - 1000) * 1e-3f + 0.25f;
  }
}

/* Appends tokens[from..to) to seq (positions from..to), all layers. */
static void feed(pa_kv_cache *kv, int32_t seq, const int32_t *tokens, int32_t from, int32_t to) {
  float k[HEADS * HD], v[HEADS * HD];
  for (int32_t p = from; p < to; p++) {
    int st = pa_kv_reserve(kv, 1, &seq, &p);
    CHECK(st == PASADA_OK, "reserve seq %d pos %d: %s", seq, p, pa_last_error());
    if (st) return;
    for (int l = 0; l < LAYERS; l++) {
      kv_values(tokens[p], p, l, k, v);
      pa_kv_store(kv, l, seq, p, k, v);
    }
    pa_kv_commit(kv, 1, &tokens[p], &seq, &p);
  }
}

/* Positions [0, n) of seq read back as (token i, position i) stored them,
 * to the cache type's rounding. */
static void check_values(const pa_kv_cache *kv, int32_t seq, const int32_t *tokens, int32_t n,
                         const char *what) {
  float k[HEADS * HD], v[HEADS * HD], ks[HEADS * HD], vs[HEADS * HD];
  int bad = 0;
  for (int32_t p = 0; p < n; p++)
    for (int l = 0; l < LAYERS; l++) {
      const pa_kv_shape *sh = &kv->shape[l];
      if (sh->n_head_kv == 0) continue;
      kv_values(tokens[p], p, l, k, v);
      for (int h = 0; h < sh->n_head_kv; h++)
        pa_kv_load(kv, l, seq, p, h, ks + h * sh->head_dim_k, vs + h * sh->head_dim_v);
      for (int i = 0; i < HEADS * HD; i++) {
        float tol = kv->values->type == PA_KV_F32 ? 0.0f : kv->values->type == PA_KV_F16 ? 1e-3f : 1.2e-2f;
        float dk = ks[i] - k[i], dv = vs[i] - v[i];
        if (dk > tol || dk < -tol || dv > tol || dv < -tol) bad++;
      }
    }
  CHECK(bad == 0, "%s: %d values differ from the ones stored (%s cache)", what, bad,
        pa_kv_type_name(kv->values->type));
}

/* Positions [0, n) of seqs a and b hold the same bits. */
static void check_same(const pa_kv_cache *kv, int32_t a, int32_t b, int32_t n, const char *what) {
  float ka[HEADS * HD], va[HEADS * HD], kb[HEADS * HD], vb[HEADS * HD];
  int bad = 0;
  for (int32_t p = 0; p < n; p++)
    for (int l = 0; l < LAYERS; l++)
      for (int h = 0; h < kv->shape[l].n_head_kv; h++) {
        pa_kv_load(kv, l, a, p, h, ka, va);
        pa_kv_load(kv, l, b, p, h, kb, vb);
        bad += memcmp(ka, kb, (size_t)kv->shape[l].head_dim_k * sizeof(float)) != 0 ||
               memcmp(va, vb, (size_t)kv->shape[l].head_dim_v * sizeof(float)) != 0;
      }
  CHECK(bad == 0, "%s: %d (position, layer, head) rows differ (%s cache)", what, bad,
        pa_kv_type_name(kv->values->type));
}

/* A cache of 24 blocks for the tests; false (reported) when it cannot be made. */
static bool cache_open(pa_kv_cache *kv, pa_kv_type type) {
  int st = pa_kv_init_layers(kv, LAYERS, SHAPES, SEQS, CTX, BS, 24);
  pa_kv_values *vals = NULL;
  if (st == PASADA_OK && (st = pa_kv_host_create(kv, type, &vals)) != PASADA_OK) pa_kv_free(kv);
  CHECK(st == PASADA_OK, "pa_kv_init: %s", pa_last_error());
  if (st) return false;
  pa_kv_attach(kv, vals);
  kv->owns_values = true;
  CHECK(vals->k[2] == NULL && vals->k_row[1] == HEADS * HD, "a layer of no heads has no storage");
  return true;
}

/* Ends every sequence, checks every block came back, frees the cache. */
static void cache_close(pa_kv_cache *kv) {
  for (int s = 0; s < SEQS; s++) pa_kv_truncate(kv, s, 0);
  CHECK(pa_kv_available(kv) == kv->n_blocks, "every block back: %d of %d", pa_kv_available(kv),
        kv->n_blocks);
  pa_kv_free(kv);
}

static void run(pa_kv_type type) {
  pa_kv_cache kv;
  if (!cache_open(&kv, type)) return;
  int32_t a[CTX], b[CTX];
  for (int i = 0; i < CTX; i++) a[i] = 1000 + (i * 37) % 251;

  /* a running sequence 0 of 40 tokens: 2 whole blocks and 8 positions */
  feed(&kv, 0, a, 0, 40);
  /* the same 40 tokens again: 2 blocks attached, 7 positions of seq 0's
   * third block copied (the 40th is left to decode) */
  int32_t got = pa_kv_reuse_prefix(&kv, 1, a, 40);
  CHECK(got == 39, "same prompt as a running sequence: %d cached, want 39", got);
  CHECK(kv.n_seq_blocks[1] == 3, "%d blocks", kv.n_seq_blocks[1]);
  CHECK(kv.table[1][0] == kv.table[0][0] && kv.table[1][1] == kv.table[0][1],
        "whole blocks are shared");
  CHECK(kv.table[1][2] != kv.table[0][2], "the partial block is a copy");
  check_same(&kv, 0, 1, 39, "copied positions");
  check_values(&kv, 1, a, 39, "copied positions");
  /* writing the copy leaves the source alone */
  memcpy(b, a, sizeof b);
  b[39] = 7; /* a different 40th token */
  feed(&kv, 1, b, 39, 48);
  check_values(&kv, 0, a, 40, "the source after its copy was written");
  check_values(&kv, 1, b, 48, "the copy after its own writes");

  /* a prompt that leaves seq 0's tokens at position 35: 35 cached */
  memcpy(b, a, sizeof b);
  b[35] = 9;
  got = pa_kv_reuse_prefix(&kv, 2, b, 60);
  CHECK(got == 35, "diverging at 35: %d cached", got);
  check_values(&kv, 2, b, 35, "diverging prompt");
  pa_kv_truncate(&kv, 2, 0);

  /* a prompt shorter than the cached run: never all of it */
  got = pa_kv_reuse_prefix(&kv, 2, a, 20);
  CHECK(got == 19, "20-token prompt: %d cached, want 19", got);
  pa_kv_truncate(&kv, 2, 0);
  got = pa_kv_reuse_prefix(&kv, 2, a, 1);
  CHECK(got == 0, "1-token prompt: %d cached", got);

  /* nothing in common: nothing cached, no block taken */
  const int32_t avail = pa_kv_available(&kv);
  for (int i = 0; i < CTX; i++) b[i] = 5000 + i;
  got = pa_kv_reuse_prefix(&kv, 2, b, 30);
  CHECK(got == 0 && kv.n_seq_blocks[2] == 0, "unrelated prompt: %d cached", got);
  CHECK(pa_kv_available(&kv) == avail, "no block taken: %d -> %d", avail, pa_kv_available(&kv));

  /* seq 0 grows to 3 whole blocks (the third registered) and ends: a
   * prompt that shares 37 tokens reuses 2 blocks + 5 positions of the
   * cached third block, now in no sequence */
  feed(&kv, 0, a, 40, 50);
  pa_kv_truncate(&kv, 0, 0);
  pa_kv_truncate(&kv, 1, 0);
  memcpy(b, a, sizeof b);
  b[37] = 11;
  got = pa_kv_reuse_prefix(&kv, 3, b, 64);
  CHECK(got == 37, "from a cached full block: %d cached, want 37", got);
  check_values(&kv, 3, b, 37, "from a cached full block");
  feed(&kv, 3, b, 37, 64);
  check_values(&kv, 3, b, 64, "after the rest of the prompt");
  /* the cached block itself is unchanged: a prompt of all 48 takes it whole */
  got = pa_kv_reuse_prefix(&kv, 2, a, 49);
  CHECK(got == 48, "the cached blocks after a copy was written: %d cached, want 48", got);
  check_values(&kv, 2, a, 48, "the cached blocks after a copy was written");
  pa_kv_truncate(&kv, 2, 0);
  pa_kv_truncate(&kv, 3, 0);

  /* no block to copy into: whole blocks only; one evictable: the copy.
   * Seq 0 takes a's cached blocks again as a server would (2 whole, 7
   * positions copied, its 40th decoded) */
  got = pa_kv_reuse_prefix(&kv, 0, a, 40);
  CHECK(got == 39, "a again: %d cached, want 39", got);
  feed(&kv, 0, a, got, 40);
  for (int s = 1; s < 4; s++) { /* the others fill the pool: 3 + 8 + 8 + 5 blocks */
    for (int i = 0; i < CTX; i++) b[i] = 20000 * s + i;
    feed(&kv, s, b, 0, s == 3 ? 80 : 128);
  }
  CHECK(pa_kv_available(&kv) == 0, "pool full: %d available", pa_kv_available(&kv));
  got = pa_kv_reuse_prefix(&kv, 4, a, 40);
  CHECK(got == 32 && kv.n_seq_blocks[4] == 2, "no block to copy into: %d cached, want 32", got);
  pa_kv_truncate(&kv, 4, 0);
  pa_kv_truncate(&kv, 3, 0); /* its 5 whole blocks stay cached, evictable */
  CHECK(pa_kv_available(&kv) == 5, "%d available", pa_kv_available(&kv));
  got = pa_kv_reuse_prefix(&kv, 4, a, 40);
  CHECK(got == 39, "copy into an evicted block: %d cached, want 39", got);
  check_same(&kv, 0, 4, 39, "copy into an evicted block");
  check_values(&kv, 4, a, 39, "copy into an evicted block");

  cache_close(&kv);
}

/* Two sequences prefill the same 16 tokens in one batch (neither block
 * cached yet), then go different ways: the second's first block becomes the
 * cached one (its own copy freed), and its second block is cached too, so a
 * prompt replaying the second sequence finds both. */
static void run_duplicates(pa_kv_type type) {
  pa_kv_cache kv;
  if (!cache_open(&kv, type)) return;
  int32_t a[CTX], b[CTX];
  for (int i = 0; i < CTX; i++) a[i] = 300 + (i * 11) % 97, b[i] = i < BS ? a[i] : 7000 + i;
  /* positions 0..15 of both sequences in one batch, as a server step would */
  int32_t seq[2 * BS], pos[2 * BS], tok[2 * BS];
  float k[HEADS * HD], v[HEADS * HD];
  for (int i = 0; i < 2 * BS; i++) seq[i] = i / BS, pos[i] = i % BS, tok[i] = a[i % BS];
  const int st = pa_kv_reserve(&kv, 2 * BS, seq, pos);
  CHECK(st == PASADA_OK, "reserve: %s", pa_last_error());
  if (st) {
    pa_kv_free(&kv);
    return;
  }
  for (int i = 0; i < 2 * BS; i++)
    for (int l = 0; l < LAYERS; l++) {
      kv_values(tok[i], pos[i], l, k, v);
      pa_kv_store(&kv, l, seq[i], pos[i], k, v);
    }
  const int32_t before = pa_kv_available(&kv);
  pa_kv_commit(&kv, 2 * BS, tok, seq, pos);
  CHECK(kv.table[0][0] == kv.table[1][0], "the duplicate block is replaced by the cached one");
  CHECK(kv.ref[kv.table[0][0]] == 2, "the cached block is held by both: ref %d",
        kv.ref[kv.table[0][0]]);
  CHECK(pa_kv_available(&kv) == before + 1, "the copy goes back: %d -> %d available", before,
        pa_kv_available(&kv));
  check_values(&kv, 1, b, BS, "the adopted block");
  feed(&kv, 0, a, BS, 2 * BS + 3);
  feed(&kv, 1, b, BS, 2 * BS + 3);
  int32_t got = pa_kv_reuse_prefix(&kv, 2, b, 2 * BS + 3);
  CHECK(got == 2 * BS + 2, "the second sequence's later blocks are cached: %d cached, want %d", got,
        2 * BS + 2);
  check_values(&kv, 2, b, got, "replaying the second sequence");
  cache_close(&kv);
}

/* Cached tails (blocks with registered == PA_KV_TAIL) and the fill of the
 * one with the most positions. */
static int count_tails(const pa_kv_cache *kv, int32_t *max_fill) {
  int n = 0;
  *max_fill = 0;
  for (int32_t b = 0; b < kv->n_blocks; b++)
    if (kv->registered[b] == PA_KV_TAIL) {
      n++;
      if (kv->fill[b] > *max_fill) *max_fill = kv->fill[b];
    }
  return n;
}

/* A sequence that ends inside a block leaves that block cached as a tail:
 * the same prompt again, or one that continues it (a conversation's next
 * turn), reuses it to the token after the sequence is gone; a tail another
 * cached block covers is not kept twice, a longer one replaces the shorter
 * it extends, a diverging one is kept beside it, and tails are evicted like
 * any cached block when the pool runs out. */
static void run_tails(pa_kv_type type) {
  pa_kv_cache kv;
  if (!cache_open(&kv, type)) return;
  int32_t a[CTX], b[CTX];
  int32_t fill = 0;
  for (int i = 0; i < CTX; i++) a[i] = 4000 + (i * 29) % 211;

  /* 2 whole blocks and 5 positions, then the sequence ends */
  feed(&kv, 0, a, 0, 2 * BS + 5);
  pa_kv_truncate(&kv, 0, 0);
  CHECK(count_tails(&kv, &fill) == 1 && fill == 5, "one tail of 5 positions: %d, fill %d",
        count_tails(&kv, &fill), fill);
  CHECK(pa_kv_available(&kv) == kv.n_blocks, "a tail is evictable: %d of %d available",
        pa_kv_available(&kv), kv.n_blocks);
  /* the same prompt and one more token: all 37 positions cached */
  int32_t got = pa_kv_reuse_prefix(&kv, 1, a, 2 * BS + 6);
  CHECK(got == 2 * BS + 5, "prompt repeating an ended sequence: %d cached, want %d", got, 2 * BS + 5);
  check_values(&kv, 1, a, got, "positions from a tail");
  /* a continuation of it (the next turn) */
  got = pa_kv_reuse_prefix(&kv, 2, a, 60);
  CHECK(got == 2 * BS + 5, "continuing prompt: %d cached, want %d", got, 2 * BS + 5);
  /* seq 1 ends with the same 5 positions: not cached twice */
  pa_kv_truncate(&kv, 1, 0);
  CHECK(count_tails(&kv, &fill) == 1 && fill == 5, "a covered tail is not kept: %d tails",
        count_tails(&kv, &fill));
  /* seq 2 goes on to 42 and ends: its 10-position tail replaces the 5 */
  feed(&kv, 2, a, got, 2 * BS + 10);
  pa_kv_truncate(&kv, 2, 0);
  CHECK(count_tails(&kv, &fill) == 1 && fill == 10, "the longer tail replaces the shorter: %d tails, fill %d",
        count_tails(&kv, &fill), fill);
  got = pa_kv_reuse_prefix(&kv, 3, a, 2 * BS + 11);
  CHECK(got == 2 * BS + 10, "from the longer tail: %d cached, want %d", got, 2 * BS + 10);
  check_values(&kv, 3, a, got, "positions from the longer tail");
  pa_kv_truncate(&kv, 3, 0);
  /* diverging at 34: 2 positions of the tail, then its own; both kept */
  memcpy(b, a, sizeof b);
  b[2 * BS + 2] = 17;
  got = pa_kv_reuse_prefix(&kv, 3, b, 2 * BS + 8);
  CHECK(got == 2 * BS + 2, "diverging inside the tail: %d cached, want %d", got, 2 * BS + 2);
  feed(&kv, 3, b, got, 2 * BS + 8);
  pa_kv_truncate(&kv, 3, 0);
  CHECK(count_tails(&kv, &fill) == 2, "a diverging tail is kept beside: %d tails", count_tails(&kv, &fill));
  got = pa_kv_reuse_prefix(&kv, 3, b, 2 * BS + 9);
  CHECK(got == 2 * BS + 8, "from the diverging tail: %d cached, want %d", got, 2 * BS + 8);
  check_values(&kv, 3, b, got, "positions from the diverging tail");
  got = pa_kv_reuse_prefix(&kv, 4, a, 2 * BS + 11);
  CHECK(got == 2 * BS + 10, "the first tail still: %d cached, want %d", got, 2 * BS + 10);
  check_values(&kv, 4, a, got, "the first tail after the second was written");
  pa_kv_truncate(&kv, 3, 0);
  pa_kv_truncate(&kv, 4, 0);

  /* the pool runs out: cached blocks and tails are evicted, all come back */
  for (int s = 0; s < 3; s++) {
    for (int i = 0; i < CTX; i++) b[i] = 30000 * (s + 1) + i;
    feed(&kv, s, b, 0, CTX);
  }
  CHECK(pa_kv_available(&kv) == 0, "pool full: %d available", pa_kv_available(&kv));
  CHECK(count_tails(&kv, &fill) == 0, "tails evicted: %d left", count_tails(&kv, &fill));
  cache_close(&kv);
}

int main(void) {
  run(PA_KV_F32);
  run(PA_KV_F16);
  run(PA_KV_Q8);
  run_duplicates(PA_KV_F32);
  run_duplicates(PA_KV_F16);
  run_duplicates(PA_KV_Q8);
  run_tails(PA_KV_F32);
  run_tails(PA_KV_F16);
  run_tails(PA_KV_Q8);
  if (failures) {
    printf("test_kv_cache: %d failures\n", failures);
    return 1;
  }
  printf("test_kv_cache: ok\n");
  return 0;
}
