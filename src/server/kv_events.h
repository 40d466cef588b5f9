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
 * the events' medium field ("CPU", "GPU").
 *
 * replay_endpoint (NULL: none): the publisher also keeps the latest
 * batches (up to SRV_KV_REPLAY_BATCHES of them and SRV_KV_REPLAY_BYTES of
 * payload, the oldest dropped first) and answers replay requests on a
 * ROUTER socket bound there, as vLLM's replay_endpoint does: a request is
 * [identity, "", start] as the ROUTER reads it (a DEALER peer sends
 * ["", start]; [identity, start], from a DEALER that sends [start] alone,
 * is answered without the empty frame), start an 8-byte big-endian
 * sequence number; the reply is one message [identity, "", seq, payload]
 * per kept batch whose seq >= start, in order, then [identity, "", END,
 * ""], END being eight 0xFF bytes (-1). Other requests are ignored. A
 * subscriber that starts late, or misses batches, replays from the
 * sequence it needs (0: all that is kept, from AllBlocksCleared on while
 * nothing was dropped; a first seq above its start says older batches
 * were). Fails with a message in err. */
#define SRV_KV_REPLAY_BATCHES 10000
#define SRV_KV_REPLAY_BYTES (64u << 20)
int srv_kv_events_start(const char *endpoint, const char *topic, const char *medium,
                        int32_t block_size, const char *replay_endpoint, srv_kv_events **out,
                        char *err, size_t n_err);

/* The callback to give pasada_kv_set_event_callback (user: the publisher).
 * It only queues: a thread of the publisher encodes and sends. */
void srv_kv_events_on_event(void *user, const pasada_kv_event *ev);

/* Sends what is queued, closes the socket (waiting up to a second for
 * delivery) and frees the publisher. NULL: nothing. */
void srv_kv_events_stop(srv_kv_events *p);

#endif
