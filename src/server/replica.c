/* replica.c: the endpoints a router reads from a replica (see replica.h):
 * readiness, SGLang's worker metadata (the fields sglang-router's worker
 * discovery reads from /server_info and /model_info) and the prefix
 * cache's blocks. */
#include "server/replica.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

bool srv_replica_ready(srv_state *st, const char **why) {
  int queue = 0, running = 0;
  if (atomic_load(&st->shutting_down))
    *why = "shutting_down";
  else if (atomic_load(&st->draining))
    *why = "draining";
  else if (!atomic_load(&st->ready))
    *why = "loading";
  else {
    srv_metrics_load(st->metrics, &queue, &running, NULL);
    *why = queue >= st->cfg->max_queue ? "queue_full" : "ok";
  }
  return strcmp(*why, "ok") == 0;
}

char *srv_replica_ready_json(srv_state *st, const char *why) {
  int queue = 0, running = 0;
  srv_metrics_load(st->metrics, &queue, &running, NULL);
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "status", why);
  cJSON_AddNumberToObject(o, "queue", queue);
  cJSON_AddNumberToObject(o, "running", running);
  cJSON_AddNumberToObject(o, "max_queue", st->cfg->max_queue);
  char *s = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  return s;
}

/* SGLang's /server_info names: sglang-router takes model_path,
 * served_model_name, tp_size, dp_size and disaggregation_mode ("null": a
 * regular worker) as the worker's labels; the sizes tell an operator the
 * replica's capacity. */
char *srv_replica_server_info(srv_state *st) {
  const srv_config *cfg = st->cfg;
  pasada_kv_stats kv = {0};
  int queue = 0, running = 0;
  srv_metrics_load(st->metrics, &queue, &running, &kv); /* the scheduler's last view */
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "engine", "pasada");
  cJSON_AddStringToObject(o, "version", pasada_version());
  cJSON_AddStringToObject(o, "model_path", cfg->model_path);
  cJSON_AddStringToObject(o, "served_model_name", st->mi.name ? st->mi.name : "");
  cJSON_AddNumberToObject(o, "tp_size", 1);
  cJSON_AddNumberToObject(o, "dp_size", 1);
  cJSON_AddStringToObject(o, "disaggregation_mode", "null");
  cJSON_AddNumberToObject(o, "context_length", st->mi.n_ctx);
  cJSON_AddNumberToObject(o, "max_running_requests", cfg->parallel);
  cJSON_AddNumberToObject(o, "max_queued_requests", cfg->max_queue);
  cJSON_AddNumberToObject(o, "max_prefill_tokens", cfg->prefill_chunk);
  cJSON_AddNumberToObject(o, "max_total_tokens", (double)kv.n_blocks * kv.block_size);
  cJSON_AddNumberToObject(o, "page_size", kv.block_size);
  cJSON_AddStringToObject(o, "kv_cache_dtype", pasada_kv_type_name(kv.type));
  if (cfg->kv_events) {
    cJSON *e = cJSON_AddObjectToObject(o, "kv_events");
    cJSON_AddStringToObject(e, "publisher", "zmq");
    cJSON_AddStringToObject(e, "endpoint", cfg->kv_events);
    cJSON_AddStringToObject(e, "topic", st->kv_events_topic ? st->kv_events_topic : "");
    cJSON_AddNumberToObject(e, "block_size", kv.block_size);
    cJSON_AddStringToObject(e, "medium", st->medium ? st->medium : "CPU");
    if (cfg->kv_events_replay)
      cJSON_AddStringToObject(e, "replay_endpoint", cfg->kv_events_replay);
    else
      cJSON_AddNullToObject(e, "replay_endpoint");
  } else {
    cJSON_AddNullToObject(o, "kv_events");
  }
  char *s = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  return s;
}

/* SGLang's /model_info: model_path, is_generation and model_type (the
 * GGUF architecture); tokenizer_path is null, as the tokenizer lives in
 * the GGUF file a router cannot load. */
char *srv_replica_model_info(srv_state *st) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "model_path", st->cfg->model_path);
  cJSON_AddNullToObject(o, "tokenizer_path");
  cJSON_AddBoolToObject(o, "is_generation", true);
  cJSON_AddStringToObject(o, "served_model_name", st->mi.name ? st->mi.name : "");
  if (st->mi.model) cJSON_AddStringToObject(o, "model_type", pasada_model_arch(st->mi.model));
  cJSON_AddNumberToObject(o, "max_context_length", st->mi.n_ctx);
  cJSON_AddNumberToObject(o, "vocab_size", st->mi.n_vocab);
  char *s = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  return s;
}

char *srv_replica_load_json(srv_state *st) {
  pasada_kv_stats kv = {0};
  int queue = 0, running = 0;
  srv_metrics_load(st->metrics, &queue, &running, &kv); /* the scheduler's last view */
  int64_t held = (int64_t)kv.n_blocks - kv.n_free - kv.n_cached;
  cJSON *a = cJSON_CreateArray(), *o = cJSON_CreateObject();
  cJSON_AddItemToArray(a, o);
  cJSON_AddNumberToObject(o, "dp_rank", 0);
  cJSON_AddNumberToObject(o, "num_reqs", running + queue);
  cJSON_AddNumberToObject(o, "num_waiting_reqs", queue);
  cJSON_AddNumberToObject(o, "num_tokens", (double)(held > 0 ? held : 0) * kv.block_size);
  char *s = cJSON_PrintUnformatted(a);
  cJSON_Delete(a);
  return s;
}

typedef struct {
  uint64_t *hash, *parent;
  int32_t n, cap, block_size;
  bool nomem;
} blocks_read;

/* On the scheduler thread: the prefix cache's blocks into r. */
static void read_blocks(pasada_context *ctx, void *arg) {
  blocks_read *r = arg;
  pasada_kv_stats kv;
  pasada_kv_get_stats(ctx, &kv);
  r->block_size = kv.block_size;
  r->cap = kv.n_blocks; /* the map never holds more blocks than the pool */
  r->hash = malloc((size_t)(r->cap > 0 ? r->cap : 1) * sizeof *r->hash);
  r->parent = malloc((size_t)(r->cap > 0 ? r->cap : 1) * sizeof *r->parent);
  if (!r->hash || !r->parent) {
    r->nomem = true;
    return;
  }
  r->n = pasada_kv_cached_blocks(ctx, r->hash, r->parent, r->cap);
}

char *srv_replica_kv_blocks(srv_state *st, srv_error *e) {
  blocks_read r = {0};
  if (!st->sched || !srv_sched_call(st->sched, read_blocks, &r)) {
    srv_fail(e, 503, "server_error", "shutting_down", NULL, "the scheduler has stopped");
    return NULL;
  }
  srv_buf b = {0};
  if (!r.nomem) {
    srv_buf_printf(&b, "{\"block_size\":%d,\"n_blocks\":%d,\"blocks\":[", r.block_size, r.n);
    for (int32_t i = 0; i < r.n && i < r.cap; i++) {
      srv_buf_printf(&b, "%s{\"hash\":%llu,\"parent\":", i ? "," : "",
                     (unsigned long long)r.hash[i]);
      if (r.parent[i])
        srv_buf_printf(&b, "%llu}", (unsigned long long)r.parent[i]);
      else
        srv_buf_printf(&b, "null}");
    }
    srv_buf_printf(&b, "]}");
  }
  free(r.hash);
  free(r.parent);
  if (r.nomem || b.failed) {
    srv_buf_free(&b);
    srv_fail(e, 500, "server_error", NULL, NULL, "out of memory for the block list");
    return NULL;
  }
  return b.p;
}
