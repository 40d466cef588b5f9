/* replica.h: what a router asks of one replica of `pasada serve`:
 * readiness apart from liveness (GET /ready), the worker metadata SGLang's
 * model gateway reads (GET /server_info, GET /model_info), and the prefix
 * cache's block hashes (GET /kv_cache/blocks), which a KV-event consumer
 * compares with what the events told it. */
#ifndef PASADA_SERVER_REPLICA_H
#define PASADA_SERVER_REPLICA_H

#include "server/http.h"

/* Whether the replica takes new work now: loaded, not draining or
 * shutting down, and with room in the waiting queue. *why: "ok",
 * "loading", "draining", "shutting_down" or "queue_full". */
bool srv_replica_ready(srv_state *st, const char **why);

/* The bodies of GET /ready ({"status", "queue", "max_queue"}),
 * /server_info and /model_info; malloc'd, NULL when out of memory. */
char *srv_replica_ready_json(srv_state *st, const char *why);
char *srv_replica_server_info(srv_state *st);
char *srv_replica_model_info(srv_state *st);

/* GET /get_load, in SGLang's shape, which sglang-router's load monitor
 * polls for its power_of_two policy: an array of one object per data-
 * parallel rank (one here), {"dp_rank": 0, "num_reqs": running + waiting,
 * "num_waiting_reqs", "num_tokens"}; num_tokens counts the KV positions
 * held by running sequences (used blocks times the block size; cached
 * blocks no sequence uses are free to evict and not counted), the number
 * the router sums over ranks and compares. malloc'd; NULL: out of memory. */
char *srv_replica_load_json(srv_state *st);

/* GET /kv_cache/blocks: {"block_size", "blocks": [{"hash", "parent"}]},
 * the full blocks of the prefix cache read on the scheduler thread between
 * two steps (hashes as JSON integers, parent null for a first block).
 * NULL with e set when the scheduler has stopped or memory is short. */
char *srv_replica_kv_blocks(srv_state *st, srv_error *e);

#endif
