/* test_kv_replay: the ring of kept KV-event batches (server/kv_replay.h):
 * the count and byte bounds drop the oldest first, the kept batches stay
 * consecutive (a batch over the byte bound alone, or a break in the
 * sequence numbers, starts again), a copy of a dropped batch is the oldest
 * kept one, and every byte comes back as it went in. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/kv_replay.h"

static int failures;
#define CHECK(c)                                                     \
  do {                                                               \
    if (!(c)) {                                                      \
      fprintf(stderr, "%s:%d: CHECK(%s)\n", __FILE__, __LINE__, #c); \
      failures++;                                                    \
    }                                                                \
  } while (0)

/* A batch of `size` bytes, each (seq + i) & 0xff. */
static char *batch(uint64_t seq, size_t size) {
  char *p = malloc(size ? size : 1);
  for (size_t i = 0; i < size; i++) p[i] = (char)((seq + i) & 0xff);
  return p;
}

/* Whether the ring gives back batch seq of `size` bytes, exactly. */
static bool holds(srv_kv_ring *r, uint64_t seq, size_t size) {
  uint64_t s = seq;
  size_t n = 0;
  bool nomem;
  char *c = srv_kv_ring_copy(r, &s, UINT64_MAX, &n, &nomem);
  bool ok = c && s == seq && n == size && !nomem;
  for (size_t i = 0; ok && i < size; i++) ok = c[i] == (char)((seq + i) & 0xff);
  free(c);
  return ok;
}

static void range_is(srv_kv_ring *r, uint64_t first, uint64_t next, int line) {
  uint64_t f, n;
  srv_kv_ring_range(r, &f, &n);
  if (f != first || n != next) {
    fprintf(stderr, "line %d: range %llu..%llu, want %llu..%llu\n", line, (unsigned long long)f,
            (unsigned long long)n, (unsigned long long)first, (unsigned long long)next);
    failures++;
  }
}

int main(void) {
  /* by count: 4 batches */
  srv_kv_ring *r = srv_kv_ring_new(4, 1 << 20);
  range_is(r, 0, 0, __LINE__);
  for (uint64_t s = 0; s < 10; s++) srv_kv_ring_keep(r, s, batch(s, 10 + s), 10 + s);
  range_is(r, 6, 10, __LINE__);
  for (uint64_t s = 6; s < 10; s++) CHECK(holds(r, s, 10 + s));
  uint64_t s = 2; /* dropped: the oldest kept instead */
  size_t n;
  bool nomem;
  char *c = srv_kv_ring_copy(r, &s, UINT64_MAX, &n, &nomem);
  CHECK(c && s == 6 && n == 16);
  free(c);
  s = 8; /* at or past end: none */
  CHECK(!srv_kv_ring_copy(r, &s, 8, &n, &nomem) && !nomem);
  s = 10;
  CHECK(!srv_kv_ring_copy(r, &s, UINT64_MAX, &n, &nomem) && !nomem);
  srv_kv_ring_free(r);

  /* by bytes: 100 bytes, batches of 30: three fit */
  r = srv_kv_ring_new(1000, 100);
  for (uint64_t q = 5; q < 12; q++) srv_kv_ring_keep(r, q, batch(q, 30), 30);
  range_is(r, 9, 12, __LINE__);
  srv_kv_ring_keep(r, 12, batch(12, 70), 70); /* 30 + 70: two go */
  range_is(r, 11, 13, __LINE__);
  CHECK(holds(r, 11, 30) && holds(r, 12, 70));
  srv_kv_ring_keep(r, 13, batch(13, 0), 0); /* an empty payload is a batch too */
  range_is(r, 11, 14, __LINE__);
  CHECK(holds(r, 13, 0));
  /* larger than the bound alone: not kept, nor anything before it */
  srv_kv_ring_keep(r, 14, batch(14, 101), 101);
  range_is(r, 15, 15, __LINE__);
  s = 0;
  CHECK(!srv_kv_ring_copy(r, &s, UINT64_MAX, &n, &nomem) && !nomem);
  srv_kv_ring_keep(r, 15, batch(15, 100), 100); /* exactly the bound */
  range_is(r, 15, 16, __LINE__);
  CHECK(holds(r, 15, 100));
  /* a break in the numbers: what came before is not kept with it */
  srv_kv_ring_keep(r, 40, batch(40, 10), 10);
  range_is(r, 40, 41, __LINE__);
  CHECK(holds(r, 40, 10));
  srv_kv_ring_free(r);

  /* a long run: every kept batch intact after many wraps */
  r = srv_kv_ring_new(7, 1000);
  for (uint64_t q = 0; q < 10000; q++) srv_kv_ring_keep(r, q, batch(q, q % 300), q % 300);
  uint64_t f, e;
  srv_kv_ring_range(r, &f, &e);
  CHECK(e == 10000 && e - f <= 7 && e - f >= 1);
  size_t total = 0;
  for (uint64_t q = f; q < e; q++) {
    CHECK(holds(r, q, q % 300));
    total += q % 300;
  }
  CHECK(total <= 1000);
  srv_kv_ring_free(r);
  srv_kv_ring_free(NULL);

  if (failures) {
    fprintf(stderr, "test_kv_replay: %d failures\n", failures);
    return 1;
  }
  printf("test_kv_replay: ok\n");
  return 0;
}
