/* kv_replay.c: the ring of the latest KV-event batches (see kv_replay.h):
 * batch seq lives at slot seq % max_batches while first <= seq < next,
 * under one mutex the publisher and the replay thread share. */
#include "server/kv_replay.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  char *data;
  size_t size;
} slot;

struct srv_kv_ring {
  pthread_mutex_t mu;
  slot *slots;
  uint32_t max_batches;
  size_t max_bytes, bytes;
  uint64_t first, next;
};

srv_kv_ring *srv_kv_ring_new(uint32_t max_batches, size_t max_bytes) {
  if (max_batches < 1) max_batches = 1;
  srv_kv_ring *r = calloc(1, sizeof *r);
  if (!r || !(r->slots = calloc(max_batches, sizeof *r->slots))) {
    free(r);
    return NULL;
  }
  r->max_batches = max_batches;
  r->max_bytes = max_bytes;
  pthread_mutex_init(&r->mu, NULL);
  return r;
}

void srv_kv_ring_free(srv_kv_ring *r) {
  if (!r) return;
  for (uint64_t s = r->first; s < r->next; s++) free(r->slots[s % r->max_batches].data);
  free(r->slots);
  pthread_mutex_destroy(&r->mu);
  free(r);
}

/* Drops the oldest kept batch; under r->mu, with one kept. */
static void drop_oldest(srv_kv_ring *r) {
  slot *k = &r->slots[r->first % r->max_batches];
  r->bytes -= k->size;
  free(k->data);
  *k = (slot){0};
  r->first++;
}

void srv_kv_ring_keep(srv_kv_ring *r, uint64_t seq, char *data, size_t size) {
  pthread_mutex_lock(&r->mu);
  if (r->first == r->next || seq != r->next) { /* the first batch, or a break in the numbers */
    while (r->first < r->next) drop_oldest(r);
    r->first = r->next = seq;
  }
  while (r->first < r->next &&
         (r->next - r->first >= r->max_batches || r->bytes + size > r->max_bytes))
    drop_oldest(r);
  if (size > r->max_bytes) {
    free(data);
    r->first = r->next = seq + 1;
  } else {
    r->slots[seq % r->max_batches] = (slot){.data = data, .size = size};
    r->bytes += size;
    r->next = seq + 1;
  }
  pthread_mutex_unlock(&r->mu);
}

void srv_kv_ring_range(srv_kv_ring *r, uint64_t *first, uint64_t *next) {
  pthread_mutex_lock(&r->mu);
  *first = r->first;
  *next = r->next;
  pthread_mutex_unlock(&r->mu);
}

char *srv_kv_ring_copy(srv_kv_ring *r, uint64_t *seq, uint64_t end, size_t *size, bool *nomem) {
  char *copy = NULL;
  *nomem = false;
  pthread_mutex_lock(&r->mu);
  if (*seq < r->first) *seq = r->first;
  if (*seq < r->next && *seq < end) {
    const slot *k = &r->slots[*seq % r->max_batches];
    *size = k->size;
    if ((copy = malloc(k->size ? k->size : 1)))
      memcpy(copy, k->data, k->size);
    else
      *nomem = true;
  }
  pthread_mutex_unlock(&r->mu);
  return copy;
}
