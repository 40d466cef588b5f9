/* http.c: routes, authentication, body limits and response writing on
 * libmicrohttpd with one thread per connection, CORS and preflights; the
 * requests that queue jobs (generation, embeddings) are http_generate.c's,
 * the library's loading http_mhd.c's. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "server/anthropic.h"
#include "server/api.h"
#include "server/http_internal.h"
#include "server/replica.h"

#define DISCARD_FACTOR 16 /* over-limit bodies up to this x the limit are read, then 413 */

struct srv_http {
  struct MHD_Daemon *daemon;
  int port;
  srv_resp_store *responses; /* st->responses, freed with the daemon */
};

#define RESPONSES_STORE_BYTES (64u << 20) /* the stored responses' bound besides their count */

static const struct {
  const char *path;
  route r;
  const char *methods; /* the Allow header's list */
} ROUTES[] = {
    {"/health", R_HEALTH, "GET"},
    {"/ready", R_READY, "GET"},
    {"/server_info", R_SERVER_INFO, "GET"},
    {"/get_server_info", R_SERVER_INFO, "GET"},
    {"/model_info", R_MODEL_INFO, "GET"},
    {"/get_model_info", R_MODEL_INFO, "GET"},
    {"/kv_cache/blocks", R_KV_BLOCKS, "GET"},
    {"/get_load", R_GET_LOAD, "GET"},
    {"/metrics", R_METRICS, "GET"},
    {"/v1/models", R_MODELS, "GET"},
    {"/models", R_MODELS, "GET"},
    {"/v1/chat/completions", R_CHAT, "POST"},
    {"/chat/completions", R_CHAT, "POST"},
    {"/v1/completions", R_COMPLETIONS, "POST"},
    {"/completions", R_COMPLETIONS, "POST"},
    {"/tokenize", R_TOKENIZE, "POST"},
    {"/detokenize", R_DETOKENIZE, "POST"},
    {"/apply-template", R_APPLY_TEMPLATE, "POST"},
    {"/v1/messages", R_MESSAGES, "POST"},
    {"/v1/messages/count_tokens", R_COUNT_TOKENS, "POST"},
    {"/v1/responses", R_RESPONSES, "POST"},
    {"/responses", R_RESPONSES, "POST"},
    {"/v1/embeddings", R_EMBEDDINGS, "POST"},
    {"/embeddings", R_EMBEDDINGS, "POST"},
};

/* Paths with an id: the prefix, then the id (a model's may hold '/'). */
static const struct {
  const char *prefix, *endpoint;
  route r;
  const char *methods;
} ID_ROUTES[] = {
    {"/v1/responses/", "/v1/responses/{id}", R_RESPONSE_ID, "GET, DELETE"},
    {"/v1/models/", "/v1/models/{id}", R_MODEL_ID, "GET"},
};

/* Whether method is in the comma-separated list. */
static bool method_in(const char *method, const char *list) {
  size_t n = strlen(method);
  for (const char *p = list; *p;) {
    while (*p == ' ' || *p == ',') p++;
    size_t k = strcspn(p, ",");
    if (k == n && strncmp(p, method, n) == 0) return true;
    p += k;
  }
  return false;
}
/* ---- responses ---- */

/* The Access-Control-Allow-Origin value for the request's Origin: "*" or
 * the origin when --cors-origin allows it, else NULL (no CORS headers). */
static const char *cors_origin(const srv_state *st, struct MHD_Connection *c) {
  const srv_config *cfg = st->cfg;
  if (cfg->n_cors == 0) return NULL;
  const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
  for (int i = 0; i < cfg->n_cors; i++) {
    for (const char *p = cfg->cors[i]; *p;) {
      while (*p == ' ' || *p == ',') p++;
      size_t k = strcspn(p, ","), n = k;
      while (n > 0 && p[n - 1] == ' ') n--;
      if (n == 1 && *p == '*') return "*";
      if (origin && n > 0 && strlen(origin) == n && strncasecmp(p, origin, n) == 0) return origin;
      p += k;
    }
  }
  return NULL;
}

void http_add_cors(const srv_state *st, struct MHD_Connection *c, struct MHD_Response *resp) {
  const char *allow = cors_origin(st, c);
  if (!allow) return;
  MHD_add_response_header(resp, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_ORIGIN, allow);
  if (strcmp(allow, "*") != 0) MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, "Origin");
}

enum MHD_Result http_send_body(srv_state *st, struct MHD_Connection *c, http_req *r, int status,
                               const char *content_type, char *body) {
  static const char oom[] =
      "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\","
      "\"param\":null,\"code\":null}}";
  struct MHD_Response *resp;
  if (body) {
    resp = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
  } else {
    status = 500;
    content_type = "application/json";
    resp = MHD_create_response_from_buffer(sizeof oom - 1, (void *)oom, MHD_RESPMEM_PERSISTENT);
  }
  if (!resp) {
    free(body);
    return MHD_NO;
  }
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
  if (status == 429) MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, "1");
  if (status == 405 && r->methods) MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, r->methods);
  http_add_cors(st, c, resp);
  if (atomic_load(&st->shutting_down) || r->too_large)
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
  enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, resp);
  MHD_destroy_response(resp);
  srv_metrics_request(st->metrics, r->endpoint, status);
  r->responded = true;
  return ret;
}

enum MHD_Result http_send_json(srv_state *st, struct MHD_Connection *c, http_req *r, int status,
                               char *json) {
  return http_send_body(st, c, r, status, "application/json", json);
}

/* An error in the shape of the route's API: Anthropic's for /v1/messages,
 * else OpenAI's. */
enum MHD_Result http_send_error(srv_state *st, struct MHD_Connection *c, http_req *r,
                                const srv_error *e) {
  bool anthropic = r->r == R_MESSAGES || r->r == R_COUNT_TOKENS;
  return http_send_json(st, c, r, e->status,
                        anthropic ? srv_anthropic_error_json(e) : srv_openai_error_json(e));
}

/* A CORS preflight (OPTIONS): 204 with the route's methods and, for an
 * allowed origin, the Access-Control headers. It needs no key. */
static enum MHD_Result send_preflight(srv_state *st, struct MHD_Connection *c, http_req *r) {
  struct MHD_Response *resp =
      MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
  if (!resp) return MHD_NO;
  char methods[64];
  snprintf(methods, sizeof methods, "%s, OPTIONS", r->methods);
  MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, methods);
  if (cors_origin(st, c)) {
    http_add_cors(st, c, resp);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_METHODS, methods);
    /* the headers the SDKs send, and what else the browser asks for (when
     * it is a plain list of header names) */
    char headers[1024] =
        "authorization, content-type, x-api-key, anthropic-version, anthropic-beta";
    const char *want = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                   MHD_HTTP_HEADER_ACCESS_CONTROL_REQUEST_HEADERS);
    const char *name_chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_, ";
    if (want && *want && strlen(want) < sizeof headers - strlen(headers) - 3 &&
        strspn(want, name_chars) == strlen(want)) {
      strcat(headers, ", ");
      strcat(headers, want);
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_HEADERS, headers);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_ACCESS_CONTROL_MAX_AGE, "86400");
  }
  enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_NO_CONTENT, resp);
  MHD_destroy_response(resp);
  srv_metrics_request(st->metrics, r->endpoint, 204);
  r->responded = true;
  return ret;
}

enum MHD_Result http_fail(srv_state *st, struct MHD_Connection *c, http_req *r, int status,
                          const char *type, const char *code, const char *fmt, ...) {
  srv_error e;
  srv_fail(&e, status, type, code, NULL, "-");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e.message, sizeof e.message, fmt, ap);
  va_end(ap);
  return http_send_error(st, c, r, &e);
}

/* ---- dispatch ---- */

/* The key as 'Authorization: Bearer KEY' or (Anthropic's clients)
 * 'x-api-key: KEY', compared in constant time. */
static bool authorized(const srv_state *st, struct MHD_Connection *c) {
  const char *key = st->cfg->api_key;
  if (!key || !*key) return true;
  const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
  if (h && strncmp(h, "Bearer ", 7) == 0)
    h += 7;
  else
    h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "x-api-key");
  if (!h) return false;
  size_t a = strlen(h), b = strlen(key);
  unsigned char diff = (unsigned char)(a != b);
  for (size_t i = 0; i < b; i++) diff |= (unsigned char)(key[i] ^ (i < a ? h[i] : 0));
  return diff == 0;
}

static enum MHD_Result dispatch(srv_state *st, struct MHD_Connection *c, http_req *r) {
  if (r->too_large)
    return http_fail(st, c, r, 413, "invalid_request_error", "body_too_large",
                     "the request body is larger than the limit of %zu bytes", st->cfg->max_body);
  if (r->r == R_NOT_FOUND)
    return http_fail(st, c, r, 404, "invalid_request_error", "not_found", "no such endpoint");
  if (r->preflight) return send_preflight(st, c, r);
  if (r->bad_method)
    return http_fail(st, c, r, 405, "invalid_request_error", "method_not_allowed",
                     "method not allowed on this endpoint (allowed: %s)", r->methods);
  if (r->r == R_HEALTH) {
    bool ready = atomic_load(&st->ready), down = atomic_load(&st->shutting_down);
    const char *s = down ? "shutting_down" : ready ? "ok" : "loading";
    char *body = malloc(64);
    if (body) snprintf(body, 64, "{\"status\":\"%s\"}", s);
    return http_send_json(st, c, r, ready && !down ? 200 : 503, body);
  }
  if (r->r == R_READY) { /* like /health, open to probes without a key */
    const char *why;
    bool ready = srv_replica_ready(st, &why);
    return http_send_json(st, c, r, ready ? 200 : 503, srv_replica_ready_json(st, why));
  }
  if (!authorized(st, c))
    return http_fail(st, c, r, 401, "invalid_request_error", "invalid_api_key",
                     "incorrect or missing API key (send 'Authorization: Bearer KEY' or "
                     "'x-api-key: KEY')");
  if (r->r == R_METRICS)
    return http_send_body(st, c, r, 200, "text/plain; version=0.0.4; charset=utf-8",
                          srv_metrics_render(st->metrics));
  if (!atomic_load(&st->ready))
    return http_fail(st, c, r, 503, "server_error", "loading", "the model is still loading");
  if (atomic_load(&st->shutting_down) &&
      (r->r == R_CHAT || r->r == R_COMPLETIONS || r->r == R_MESSAGES || r->r == R_RESPONSES ||
       r->r == R_EMBEDDINGS))
    return http_fail(st, c, r, 503, "server_error", "shutting_down", "the server is shutting down");
  if (st->mi.embeddings &&
      (r->r == R_CHAT || r->r == R_COMPLETIONS || r->r == R_MESSAGES || r->r == R_RESPONSES))
    return http_fail(
        st, c, r, 400, "invalid_request_error", "model_not_generative",
        "this server serves embeddings (pasada serve --embeddings): use /v1/embeddings");
  srv_error e;
  char *out;
  switch (r->r) {
    case R_MODELS:
      return http_send_json(st, c, r, 200, srv_openai_models(&st->mi));
    case R_CHAT:
      return http_generate(st, c, r, SRV_CHAT);
    case R_COMPLETIONS:
      return http_generate(st, c, r, SRV_COMPLETION);
    case R_TOKENIZE:
      out = srv_openai_tokenize(&st->mi, r->body.p ? r->body.p : "", r->body.n, &e);
      return out ? http_send_json(st, c, r, 200, out) : http_send_error(st, c, r, &e);
    case R_DETOKENIZE:
      out = srv_openai_detokenize(&st->mi, r->body.p ? r->body.p : "", r->body.n, &e);
      return out ? http_send_json(st, c, r, 200, out) : http_send_error(st, c, r, &e);
    case R_APPLY_TEMPLATE:
      out = srv_apply_template(&st->mi, r->body.p ? r->body.p : "", r->body.n, &e);
      return out ? http_send_json(st, c, r, 200, out) : http_send_error(st, c, r, &e);
    case R_MESSAGES:
      return http_generate(st, c, r, SRV_MESSAGES);
    case R_COUNT_TOKENS:
      out = srv_anthropic_count_tokens(&st->mi, r->body.p ? r->body.p : "", r->body.n, &e);
      return out ? http_send_json(st, c, r, 200, out) : http_send_error(st, c, r, &e);
    case R_RESPONSES:
      return http_generate(st, c, r, SRV_RESPONSES);
    case R_EMBEDDINGS:
      return http_embeddings(st, c, r);
    case R_RESPONSE_ID:
      out = srv_api_stored_response(st->responses, r->id, r->delete, &e);
      return out ? http_send_json(st, c, r, 200, out) : http_send_error(st, c, r, &e);
    case R_MODEL_ID:
      out = srv_api_model(&st->mi, r->id, &e);
      return out ? http_send_json(st, c, r, 200, out) : http_send_error(st, c, r, &e);
    case R_SERVER_INFO:
      return http_send_json(st, c, r, 200, srv_replica_server_info(st));
    case R_MODEL_INFO:
      return http_send_json(st, c, r, 200, srv_replica_model_info(st));
    case R_KV_BLOCKS:
      out = srv_replica_kv_blocks(st, &e);
      return out ? http_send_json(st, c, r, 200, out) : http_send_error(st, c, r, &e);
    case R_GET_LOAD:
      return http_send_json(st, c, r, 200, srv_replica_load_json(st));
    default:
      return MHD_NO;
  }
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls) {
  srv_state *st = cls;
  http_req *r = *con_cls;
  size_t limit = st->cfg->max_body;
  if (!r) {
    r = calloc(1, sizeof *r);
    if (!r) return MHD_NO;
    *con_cls = r;
    atomic_fetch_add(&st->active, 1);
    r->endpoint = "other";
    for (size_t i = 0; i < sizeof ROUTES / sizeof ROUTES[0]; i++) {
      if (strcmp(url, ROUTES[i].path) != 0) continue;
      r->r = ROUTES[i].r;
      r->endpoint = ROUTES[i].path;
      if (r->endpoint[1] != 'v' && (r->r == R_CHAT || r->r == R_COMPLETIONS || r->r == R_MODELS ||
                                    r->r == R_RESPONSES || r->r == R_EMBEDDINGS))
        r->endpoint = ROUTES[i - 1].path; /* the /v1 spelling */
      r->methods = ROUTES[i].methods;
      break;
    }
    for (size_t i = 0; r->r == R_NOT_FOUND && i < sizeof ID_ROUTES / sizeof ID_ROUTES[0]; i++) {
      size_t n = strlen(ID_ROUTES[i].prefix);
      const char *id = url + n;
      if (strncmp(url, ID_ROUTES[i].prefix, n) != 0 || !*id || strlen(id) >= sizeof r->id ||
          (ID_ROUTES[i].r == R_RESPONSE_ID && strchr(id, '/')))
        continue;
      r->r = ID_ROUTES[i].r;
      r->endpoint = ID_ROUTES[i].endpoint;
      r->methods = ID_ROUTES[i].methods;
      snprintf(r->id, sizeof r->id, "%s", id);
    }
    r->preflight = r->methods && strcmp(method, "OPTIONS") == 0;
    r->bad_method = r->methods && !r->preflight && !method_in(method, r->methods);
    r->delete = strcmp(method, "DELETE") == 0;
    const char *cl =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl) {
      unsigned long long n = strtoull(cl, NULL, 10);
      if (n > limit) r->too_large = true;
      /* far too large: answer at once and close rather than read it all */
      if (n / DISCARD_FACTOR > limit) return dispatch(st, c, r);
    }
    return MHD_YES;
  }
  if (*upload_size) {
    size_t n = *upload_size;
    *upload_size = 0;
    if (r->responded) return MHD_YES;
    r->received += n;
    if (r->received > limit && !r->too_large) {
      r->too_large = true;
      srv_buf_free(&r->body);
    }
    if (r->too_large) {
      /* far too large, with no length announced: MHD cannot answer in the
       * middle of an upload, so the connection is closed */
      if (r->received / DISCARD_FACTOR > limit) {
        srv_metrics_request(st->metrics, r->endpoint, 413);
        r->responded = true;
        return MHD_NO;
      }
      return MHD_YES;
    }
    srv_buf_append(&r->body, upload, n);
    if (r->body.failed)
      return http_fail(st, c, r, 500, "server_error", NULL, "out of memory for the body");
    return MHD_YES;
  }
  if (r->responded) return MHD_YES;
  return dispatch(st, c, r);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode why) {
  srv_state *st = cls;
  http_req *r = *con_cls;
  if (!r) return;
  srv_api_free(r->r == R_MESSAGES ? SRV_MESSAGES : SRV_RESPONSES, r->api);
  if (r->job) {
    pthread_mutex_lock(&r->job->mu);
    bool finished = r->job->finish != SRV_PENDING;
    pthread_mutex_unlock(&r->job->mu);
    if (!finished && st->sched) srv_sched_cancel(st->sched, r->job);
    srv_job_release(r->job);
  }
  srv_buf_free(&r->body);
  free(r);
  *con_cls = NULL;
  atomic_fetch_sub(&st->active, 1);
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
  srv_state *st = cls;
  if (!st->cfg->verbose) return;
  fprintf(stderr, "pasada serve: http: ");
  vfprintf(stderr, fmt, ap);
}

int srv_http_start(srv_state *st, srv_http **out) {
  *out = NULL;
  const srv_config *cfg = st->cfg;
  struct addrinfo hints = {
      .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
  struct addrinfo *ai = NULL;
  char port[16];
  snprintf(port, sizeof port, "%d", cfg->port);
  int rc = getaddrinfo(cfg->host, port, &hints, &ai);
  if (rc != 0) {
    fprintf(stderr, "pasada serve: cannot resolve host '%s': %s\n", cfg->host, gai_strerror(rc));
    return PASADA_ERR_ARG;
  }
  struct sockaddr_storage addr;
  memcpy(&addr, ai->ai_addr, ai->ai_addrlen);
  bool v6 = ai->ai_family == AF_INET6;
  freeaddrinfo(ai);

  if ((rc = srv_mhd_load()) != PASADA_OK) return rc;
  unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
                   MHD_USE_ITC | MHD_USE_ERROR_LOG;
  /* an IPv6 address listens for IPv4 too (IPV6_V6ONLY off): '::' is every
   * address of both */
  if (v6) flags |= MHD_USE_DUAL_STACK;
  if (cfg->responses_store > 0) { /* before the first request can arrive */
    st->responses = srv_resp_store_create(cfg->responses_store, RESPONSES_STORE_BYTES);
    if (!st->responses) return PASADA_ERR_NOMEM;
  }
  struct MHD_Daemon *d = MHD_start_daemon(
      flags, (uint16_t)cfg->port, NULL, NULL, on_request, st, MHD_OPTION_EXTERNAL_LOGGER, mhd_log,
      st, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_NOTIFY_COMPLETED, on_completed,
      st, MHD_OPTION_CONNECTION_LIMIT,
      (unsigned)(cfg->max_connections > 0 ? cfg->max_connections : 256),
      MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)600, MHD_OPTION_END);
  if (!d) {
    fprintf(stderr, "pasada serve: cannot listen on %s:%d: %s\n", cfg->host, cfg->port,
            strerror(errno));
    srv_resp_store_free(st->responses);
    st->responses = NULL;
    return PASADA_ERR_IO;
  }
  srv_http *h = calloc(1, sizeof *h);
  if (!h) {
    MHD_stop_daemon(d);
    srv_resp_store_free(st->responses);
    st->responses = NULL;
    return PASADA_ERR_NOMEM;
  }
  h->daemon = d;
  h->responses = st->responses;
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
  h->port = info ? info->port : cfg->port;
  *out = h;
  return PASADA_OK;
}

int srv_http_port(const srv_http *h) {
  return h->port;
}

void srv_http_quiesce(srv_http *h, srv_state *st) {
  atomic_store(&st->shutting_down, true);
  MHD_socket fd = MHD_quiesce_daemon(h->daemon);
  if (fd != MHD_INVALID_SOCKET) close(fd);
}

bool srv_http_wait_idle(srv_state *st, double timeout_s) {
  double t0 = srv_now();
  while (atomic_load(&st->active) > 0) {
    if (srv_now() - t0 > timeout_s) return false;
    struct timespec ts = {0, 20 * 1000000L};
    nanosleep(&ts, NULL);
  }
  return true;
}

void srv_http_stop(srv_http *h) {
  if (!h) return;
  MHD_stop_daemon(h->daemon);
  srv_resp_store_free(h->responses);
  free(h);
}
