/* kv_replay.h: the KV-event publisher's memory of its latest batches
 * (`pasada serve --kv-events-replay`): a ring of encoded batches by
 * sequence number, bounded in count and in bytes, that the publisher's
 * thread fills and the replay socket's thread reads. */
#ifndef PASADA_SERVER_KV_REPLAY_H
#define PASADA_SERVER_KV_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct srv_kv_ring srv_kv_ring;

/* A ring keeping at most max_batches batches (>= 1) and max_bytes bytes of
 * payload. NULL: out of memory. */
srv_kv_ring *srv_kv_ring_new(uint32_t max_batches, size_t max_bytes);

/* Frees the ring and every batch it keeps. NULL: nothing. */
void srv_kv_ring_free(srv_kv_ring *r);

/* Keeps batch seq (data malloc'd, owned by the ring from now on; seq one
 * more than the last kept, or any number on the first call), dropping the
 * oldest batches until both bounds hold. A batch larger than max_bytes by
 * itself is freed, not kept, and everything before it is dropped too: the
 * kept batches are always consecutive. Thread-safe. */
void srv_kv_ring_keep(srv_kv_ring *r, uint64_t seq, char *data, size_t size);

/* The kept batches are first..next-1 (first == next: none). Thread-safe. */
void srv_kv_ring_range(srv_kv_ring *r, uint64_t *first, uint64_t *next);

/* A malloc'd copy of the kept batch *seq, or, when that one was dropped,
 * of the oldest kept (*seq set to it), if it is below end; its size in
 * *size. NULL when there is none below end, and also when memory is short
 * (then *nomem is true). Thread-safe. */
char *srv_kv_ring_copy(srv_kv_ring *r, uint64_t *seq, uint64_t end, size_t *size, bool *nomem);

#endif
