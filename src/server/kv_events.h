/* kv_events.h: `pasada serve --kv-events`: the prefix cache's changes
 * published as vLLM publishes its KV-cache events (ZeroMQ PUB, msgpack
 * event batches), so a cache-aware router (llm-d's precise prefix-cache
 * scorer, a KV indexer) knows which blocks each replica holds. */
#ifndef PASADA_SERVER_KV_EVENTS_H
#define PASADA_SERVER_KV_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pasada.h"

typedef struct srv_kv_events srv_kv_events;

/* Whether this build can publish (libzmq's and msgpack-c's headers were
 * found when it was configured). */
bool srv_kv_events_available(void);

/* Opens a PUB socket on endpoint, by vLLM's rule: an endpoint holding '*'
 * or '::', or an ipc:// or inproc:// one, is bound; any other is connected
 * to (a central subscriber that binds). Every batch goes out as three
 * frames: topic, an 8-byte big-endian sequence number (0, 1, ... per
 * batch) and the msgpack payload. The first batch is AllBlocksCleared: a
 * subscriber drops what it knew of a replica that starts again. medium is
 * the events' medium field ("CPU", "GPU"). Fails with a message in err. */
int srv_kv_events_start(const char *endpoint, const char *topic, const char *medium,
                        int32_t block_size, srv_kv_events **out, char *err, size_t n_err);

/* The callback to give pasada_kv_set_event_callback (user: the publisher).
 * It only queues: a thread of the publisher encodes and sends. */
void srv_kv_events_on_event(void *user, const pasada_kv_event *ev);

/* Sends what is queued, closes the socket (waiting up to a second for
 * delivery) and frees the publisher. NULL: nothing. */
void srv_kv_events_stop(srv_kv_events *p);

#endif
