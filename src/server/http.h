/* http.h: the HTTP side of `pasada serve` on libmicrohttpd (a thread per
 * connection): routing, authentication, body limits, JSON responses and
 * server-sent event streams fed from the jobs the scheduler fills. */
#ifndef PASADA_SERVER_HTTP_H
#define PASADA_SERVER_HTTP_H

#include "server/metrics.h"
#include "server/openai.h"
#include "server/responses.h"
#include "server/scheduler.h"
#include "server/server.h"

/* What the handlers share. mi and sched are set before `ready` turns true;
 * until then /health answers 503 "loading" and generation 503. */
typedef struct {
  const srv_config *cfg;
  srv_metrics *metrics;
  srv_model_info mi;
  srv_sched *sched;
  srv_resp_store *responses; /* the Responses API's stored responses (made by srv_http_start) */
  atomic_bool ready;
  atomic_bool draining; /* SIGTERM came: GET /ready answers 503, work is still taken */
  atomic_bool shutting_down;
  const char *kv_events_topic; /* the KV-event publisher's topic (NULL: none) */
  const char *medium;          /* "CPU" or "GPU": where the KV cache lives */
  atomic_int active; /* requests between arrival and completion */
} srv_state;

typedef struct srv_http srv_http;

/* Binds cfg->host:cfg->port and starts serving; fails with a message. */
int srv_http_start(srv_state *st, srv_http **out);
int srv_http_port(const srv_http *h); /* the bound port (useful with port 0) */
/* Stops accepting connections (new requests on open ones get 503). */
void srv_http_quiesce(srv_http *h, srv_state *st);
/* Waits until no request is in flight or the timeout passes. */
bool srv_http_wait_idle(srv_state *st, double timeout_s);
void srv_http_stop(srv_http *h);

#endif
