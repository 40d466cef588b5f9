/* http.c: routes, authentication, body limits and response writing on
 * libmicrohttpd with one thread per connection, CORS and preflights. A
 * generation request is validated by its API (api.c: OpenAI's chat and
 * completions, Anthropic's Messages, OpenAI's Responses), queued to the
 * scheduler, then either waited on (non-streaming) or streamed: the
 * content reader waits on the job for new output and renders it as SSE at
 * the client's pace. Both waits poll the socket, so a client that hangs
 * up has its job cancelled within ~100 ms. */
#define _GNU_SOURCE /* POLLRDHUP */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "server/anthropic.h"
#include "server/embeddings.h"
#include "server/api.h"
#include "server/http.h"
#include "server/replica.h"
#include "server/request.h"
#include "server/turn.h"

/* ---- libmicrohttpd, loaded when the server starts ----
 * Linked, it would be mapped by every command along with the TLS libraries
 * it depends on (~2.4 MiB of RSS, which the memory target of a 135M model
 * cannot spare); loaded with dlopen, only `pasada serve` pays for it. The
 * calls below go through this table (the macros keep the library's names in
 * the code). Its soname first, then the file the build found. */
static struct {
  bool loaded;
  __typeof__(&MHD_start_daemon) start_daemon;
  __typeof__(&MHD_stop_daemon) stop_daemon;
  __typeof__(&MHD_quiesce_daemon) quiesce_daemon;
  __typeof__(&MHD_get_daemon_info) get_daemon_info;
  __typeof__(&MHD_get_connection_info) get_connection_info;
  __typeof__(&MHD_lookup_connection_value) lookup_connection_value;
  __typeof__(&MHD_create_response_from_buffer) create_response_from_buffer;
  __typeof__(&MHD_create_response_from_callback) create_response_from_callback;
  __typeof__(&MHD_add_response_header) add_response_header;
  __typeof__(&MHD_queue_response) queue_response;
  __typeof__(&MHD_destroy_response) destroy_response;
} mhd;

#ifndef PASADA_MHD_PATH
#define PASADA_MHD_PATH "libmicrohttpd.so"
#endif

static int mhd_load(void) {
  if (mhd.loaded) return PASADA_OK;
  const char *names[] = {"libmicrohttpd.so.12", PASADA_MHD_PATH};
  void *lib = NULL;
  for (size_t i = 0; i < sizeof names / sizeof names[0] && !lib; i++)
    lib = dlopen(names[i], RTLD_NOW);
  if (!lib) {
    fprintf(stderr, "pasada serve: cannot load libmicrohttpd (%s): %s\n", PASADA_MHD_PATH,
            dlerror());
    return PASADA_ERR_IO;
  }
#define MHD_SYM(field, name)                                          \
  if (!(*(void **)&mhd.field = dlsym(lib, #name))) {                  \
    fprintf(stderr, "pasada serve: libmicrohttpd lacks %s\n", #name); \
    dlclose(lib);                                                     \
    return PASADA_ERR_IO;                                             \
  }
  MHD_SYM(start_daemon, MHD_start_daemon)
  MHD_SYM(stop_daemon, MHD_stop_daemon)
  MHD_SYM(quiesce_daemon, MHD_quiesce_daemon)
  MHD_SYM(get_daemon_info, MHD_get_daemon_info)
  MHD_SYM(get_connection_info, MHD_get_connection_info)
  MHD_SYM(lookup_connection_value, MHD_lookup_connection_value)
  MHD_SYM(create_response_from_buffer, MHD_create_response_from_buffer)
  MHD_SYM(create_response_from_callback, MHD_create_response_from_callback)
  MHD_SYM(add_response_header, MHD_add_response_header)
  MHD_SYM(queue_response, MHD_queue_response)
  MHD_SYM(destroy_response, MHD_destroy_response)
#undef MHD_SYM
  mhd.loaded = true; /* the library stays loaded for the process's life */
  return PASADA_OK;
}

#define MHD_start_daemon mhd.start_daemon
#define MHD_stop_daemon mhd.stop_daemon
#define MHD_quiesce_daemon mhd.quiesce_daemon
#define MHD_get_daemon_info mhd.get_daemon_info
#define MHD_get_connection_info mhd.get_connection_info
#define MHD_lookup_connection_value mhd.lookup_connection_value
#define MHD_create_response_from_buffer mhd.create_response_from_buffer
#define MHD_create_response_from_callback mhd.create_response_from_callback
#define MHD_add_response_header mhd.add_response_header
#define MHD_queue_response mhd.queue_response
#define MHD_destroy_response mhd.destroy_response

#define WAIT_SLICE_MS 100  /* how often a waiting thread checks the socket */
#define STREAM_PING_S 15.0 /* an SSE comment after this long without output */
#define DISCARD_FACTOR 16  /* over-limit bodies up to this x the limit are read, then 413 */

struct srv_http {
  struct MHD_Daemon *daemon;
  int port;
  srv_resp_store *responses; /* st->responses, freed with the daemon */
};

#define RESPONSES_STORE_BYTES (64u << 20) /* the stored responses' bound besides their count */

typedef enum {
  R_NOT_FOUND = 0,
  R_HEALTH,
  R_METRICS,
  R_MODELS,
  R_CHAT,
  R_COMPLETIONS,
  R_TOKENIZE,
  R_DETOKENIZE,
  R_APPLY_TEMPLATE,
  R_MESSAGES,     /* Anthropic */
  R_COUNT_TOKENS, /* Anthropic */
  R_RESPONSES,
  R_RESPONSE_ID, /* /v1/responses/{id} */
  R_MODEL_ID,    /* /v1/models/{id} */
  R_READY,       /* readiness, for routers and Kubernetes */
  R_SERVER_INFO, /* SGLang's worker metadata */
  R_MODEL_INFO,
  R_KV_BLOCKS, /* the prefix cache's full blocks */
  R_GET_LOAD,  /* SGLang's load report, for power_of_two routing */
  R_EMBEDDINGS
} route;

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

/* One request on a connection (MHD's *con_cls). */
typedef struct {
  route r;
  const char *endpoint; /* metrics label: the canonical path, or "other" */
  const char *methods;  /* the route's (Allow) */
  char id[128];         /* an id route's id */
  bool delete;          /* the method is DELETE */
  bool bad_method, preflight;
  void *api; /* the Messages / Responses request's own state (until a stream takes it) */
  srv_buf body;
  uint64_t received;
  bool too_large;
  bool responded;
  srv_job *job; /* our reference while the request lives */
} http_req;

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

static void add_cors(const srv_state *st, struct MHD_Connection *c, struct MHD_Response *resp) {
  const char *allow = cors_origin(st, c);
  if (!allow) return;
  MHD_add_response_header(resp, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_ORIGIN, allow);
  if (strcmp(allow, "*") != 0) MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, "Origin");
}

static enum MHD_Result send_body(srv_state *st, struct MHD_Connection *c, http_req *r, int status,
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
  add_cors(st, c, resp);
  if (atomic_load(&st->shutting_down) || r->too_large)
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
  enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, resp);
  MHD_destroy_response(resp);
  srv_metrics_request(st->metrics, r->endpoint, status);
  r->responded = true;
  return ret;
}

static enum MHD_Result send_json(srv_state *st, struct MHD_Connection *c, http_req *r, int status,
                                 char *json) {
  return send_body(st, c, r, status, "application/json", json);
}

/* An error in the shape of the route's API: Anthropic's for /v1/messages,
 * else OpenAI's. */
static enum MHD_Result send_error(srv_state *st, struct MHD_Connection *c, http_req *r,
                                  const srv_error *e) {
  bool anthropic = r->r == R_MESSAGES || r->r == R_COUNT_TOKENS;
  return send_json(st, c, r, e->status,
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
    add_cors(st, c, resp);
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

static enum MHD_Result fail(srv_state *st, struct MHD_Connection *c, http_req *r, int status,
                            const char *type, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));
static enum MHD_Result fail(srv_state *st, struct MHD_Connection *c, http_req *r, int status,
                            const char *type, const char *code, const char *fmt, ...) {
  srv_error e;
  srv_fail(&e, status, type, code, NULL, "-");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e.message, sizeof e.message, fmt, ap);
  va_end(ap);
  return send_error(st, c, r, &e);
}

/* ---- client liveness ---- */

/* True when the peer has closed its side of the connection. */
static bool client_gone(struct MHD_Connection *c) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
  if (!ci) return false;
  struct pollfd p = {.fd = ci->connect_fd, .events = POLLIN | POLLRDHUP};
  if (poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
  if (p.revents & POLLIN) {
    char ch;
    return recv(ci->connect_fd, &ch, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
  }
  return false;
}

static void deadline_in(struct timespec *ts, int ms) {
  clock_gettime(CLOCK_REALTIME, ts);
  ts->tv_nsec += (long)ms * 1000000L;
  ts->tv_sec += ts->tv_nsec / 1000000000L;
  ts->tv_nsec %= 1000000000L;
}

/* Waits until the job has output past (text_off, lp_off) (unless
 * only_finish) or has finished. False when the client hung up meanwhile (the
 * job is then cancelled). Also returns true after max_wait_s without news
 * (the stream then sends a ping). A stream that has had output waits for
 * more on the scheduler's bell (rung once per step for every reader);
 * before its first output (a request waiting for admission or in prefill,
 * which a ring every step would wake for nothing) and for the finish alone,
 * on the job's condition variable (signalled by the first output and the
 * finish). */
static bool wait_output(srv_state *st, struct MHD_Connection *c, srv_job *j, bool only_finish,
                        size_t text_off, size_t lp_off, double max_wait_s) {
  double t0 = srv_now(), checked = t0;
  srv_bell *bell = only_finish || (text_off == 0 && lp_off == 0) ? NULL : j->bell;
  for (;;) {
    const uint32_t epoch = bell ? srv_bell_epoch(bell) : 0; /* before the look (server.h) */
    pthread_mutex_lock(&j->mu);
    if (j->finish != SRV_PENDING ||
        (!only_finish && (j->n_text != text_off || j->n_lp != lp_off))) {
      pthread_mutex_unlock(&j->mu);
      return true;
    }
    if (bell) {
      pthread_mutex_unlock(&j->mu);
      srv_bell_wait(bell, epoch, WAIT_SLICE_MS);
    } else {
      struct timespec ts;
      deadline_in(&ts, WAIT_SLICE_MS);
      pthread_cond_timedwait(&j->cv, &j->mu, &ts);
      pthread_mutex_unlock(&j->mu);
    }
    /* by the clock, not on timeouts only: a job producing tokens faster
     * than the slice wakes us before every timeout */
    double now = srv_now();
    if (now - checked < WAIT_SLICE_MS * 1e-3) continue;
    checked = now;
    if (client_gone(c)) {
      srv_sched_cancel(st->sched, j);
      return false;
    }
    if (now - t0 >= max_wait_s) return true;
  }
}

/* ---- streaming ---- */

typedef struct {
  srv_state *st;
  struct MHD_Connection *conn;
  srv_job *job;
  srv_stream stream;
  srv_stream *streams; /* a request of several choices: one state per choice */
  void *api;           /* the API's own state of the request (owned) */
  srv_buf out;
  bool started, done;
} stream_ctx;

/* Cancels every unfinished choice of the request whose first job is j. */
static void cancel_all(srv_state *st, srv_job *j) {
  int n = j->choices ? j->n_choices : 1;
  for (int k = 0; k < n; k++) {
    srv_job *c = j->choices ? j->choices[k] : j;
    pthread_mutex_lock(&c->mu);
    bool finished = c->finish != SRV_PENDING;
    pthread_mutex_unlock(&c->mu);
    if (!finished) srv_sched_cancel(st->sched, c);
  }
}

/* The first unfinished choice of j's request (NULL when all are). */
static srv_job *unfinished_choice(srv_job *j) {
  for (int k = 0; j->choices && k < j->n_choices; k++) {
    srv_job *c = j->choices[k];
    pthread_mutex_lock(&c->mu);
    bool finished = c->finish != SRV_PENDING;
    pthread_mutex_unlock(&c->mu);
    if (!finished) return c;
  }
  return NULL;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
  stream_ctx *sc = cls;
  srv_job *j = sc->job;
  for (;;) {
    if (sc->out.n > 0) {
      size_t n = sc->out.n < max ? sc->out.n : max;
      memcpy(buf, sc->out.p, n);
      srv_buf_consume(&sc->out, n);
      return (ssize_t)n;
    }
    if (sc->done) return MHD_CONTENT_READER_END_OF_STREAM;
    if (client_gone(sc->conn)) {
      cancel_all(sc->st, j);
      return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    if (sc->streams) {
      /* several choices: wait for news of one still running (they decode
       * in the same steps, so the others' news is at most a step behind) */
      srv_job *w = unfinished_choice(j);
      if (sc->started && w) {
        const size_t text_off = sc->streams[w->choice].text_off,
                     lp_off = sc->streams[w->choice].lp_off;
        if (!wait_output(sc->st, sc->conn, w, false, text_off, lp_off, STREAM_PING_S)) {
          cancel_all(sc->st, j);
          return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        pthread_mutex_lock(&w->mu);
        const bool news = w->finish != SRV_PENDING || w->n_text != text_off || w->n_lp != lp_off;
        pthread_mutex_unlock(&w->mu);
        if (!news) { /* a quiet while (admission, a long prefill): keep the client's reader alive */
          srv_buf_append(&sc->out, ": ping\n\n", 8);
          continue;
        }
      }
      sc->started = true;
      sc->done = srv_stream_group(&sc->st->mi, j, sc->streams, &sc->out);
      if (sc->out.failed) return MHD_CONTENT_READER_END_WITH_ERROR;
      continue;
    }
    /* every stream but completions' opens at once (chat's role chunk,
     * message_start, response.created) */
    bool first = j->req.kind != SRV_COMPLETION && !sc->started;
    sc->started = true;
    if (!first) {
      size_t text_off = sc->stream.text_off, lp_off = sc->stream.lp_off;
      if (!wait_output(sc->st, sc->conn, j, false, text_off, lp_off, STREAM_PING_S))
        return MHD_CONTENT_READER_END_WITH_ERROR;
      pthread_mutex_lock(&j->mu);
      bool news = j->finish != SRV_PENDING || j->n_text != text_off || j->n_lp != lp_off;
      pthread_mutex_unlock(&j->mu);
      if (!news) {
        if (j->req.kind == SRV_MESSAGES)
          srv_buf_printf(&sc->out, "event: ping\ndata: {\"type\":\"ping\"}\n\n");
        else
          srv_buf_append(&sc->out, ": ping\n\n", 8);
        continue;
      }
    }
    sc->done = srv_api_stream(&sc->st->mi, sc->st->responses, j, sc->api, &sc->stream, &sc->out);
    if (sc->out.failed) return MHD_CONTENT_READER_END_WITH_ERROR;
  }
}

static void stream_free(void *cls) {
  stream_ctx *sc = cls;
  cancel_all(sc->st, sc->job);
  free(sc->streams);
  srv_api_free(sc->job->req.kind, sc->api);
  srv_job_release(sc->job);
  srv_buf_free(&sc->out);
  free(sc);
}

/* ---- generation ---- */

static void make_id(srv_job *j) {
  static atomic_uint_fast64_t counter;
  uint64_t x = atomic_fetch_add(&counter, 1) + (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull;
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  if (j->req.kind == SRV_MESSAGES || j->req.kind == SRV_RESPONSES) {
    /* random: a stored response is read back by its id alone */
    srv_make_id(j->id, sizeof j->id, j->req.kind == SRV_MESSAGES ? "msg_" : "resp_");
    return;
  }
  snprintf(j->id, sizeof j->id, "%s-%016llx", j->req.kind == SRV_CHAT ? "chatcmpl" : "cmpl",
           (unsigned long long)x);
}

/* A job's sampler (with its grammar) and detokenizer. */
static bool prepare_job(srv_state *st, srv_job *j, srv_error *e) {
  if (!srv_request_sampler(&st->mi, &j->req, &j->sampler, &j->grammar, e)) return false;
  /* a family whose reasoning or tool-call markers are special tokens needs
   * them in the text the output parser reads (it removes them) */
  const srv_out_style *style = &st->mi.style;
  bool special =
      j->req.kind != SRV_COMPLETION && (style->format != SRV_OUT_PLAIN || style->think_open[0]);
  if (pasada_detok_create(st->mi.tok, special, &j->detok) != PASADA_OK)
    return srv_fail(e, 500, "server_error", NULL, NULL, "%s", pasada_last_error());
  return true;
}

/* A request of several choices (n > 1, several prompts): one job per
 * choice beside j (choice 0), each with the request's fields, its prompt,
 * and a seed of its own (the request's + the choice's index). Choices of
 * one prompt after its first wait for that one's prefill and share its KV
 * blocks. */
static bool make_choices(srv_state *st, srv_job *j, srv_error *e) {
  int per = j->req.n > 1 ? j->req.n : 1, total = per * (1 + j->req.n_more);
  if (total <= 1) return true;
  if (!(j->choices = calloc((size_t)total, sizeof *j->choices)))
    return srv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
  j->choices[0] = j;
  j->n_choices = 1;
  for (int k = 1; k < total; k++) {
    srv_job *c = srv_job_create();
    if (!c) return srv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    j->choices[j->n_choices++] = c;
    if (!srv_request_clone(&j->req, &c->req))
      return srv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    int p = k / per;
    if (p > 0) {
      int32_t n = j->req.n_prompts2[p - 1];
      int32_t *ids = malloc((size_t)n * sizeof *ids);
      if (!ids) return srv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
      memcpy(ids, j->req.prompts2[p - 1], (size_t)n * sizeof *ids);
      free(c->req.prompt);
      c->req.prompt = ids;
      c->req.n_prompt = n;
      int64_t room = st->mi.n_ctx - n, asked = j->req.max_asked;
      c->req.max_tokens = (int32_t)(asked > 0 && asked < room ? asked : room);
    }
    if (c->req.sampling.seed != PASADA_SEED_RANDOM) c->req.sampling.seed += (uint64_t)k;
    c->choice = k;
    c->wait_prefill = k % per != 0;
    memcpy(c->id, j->id, sizeof c->id);
    c->created = j->created;
    if (!prepare_job(st, c, e)) return false;
  }
  return true;
}

static enum MHD_Result handle_generate(srv_state *st, struct MHD_Connection *c, http_req *r,
                                       srv_kind kind) {
  srv_error e;
  srv_request req;
  if (!srv_api_parse(&st->mi, st->responses, kind, r->body.p ? r->body.p : "", r->body.n, &req,
                     &r->api, &e))
    return send_error(st, c, r, &e);
  srv_job *j = srv_job_create();
  if (!j) {
    srv_request_clear(&req);
    return fail(st, c, r, 500, "server_error", NULL, "out of memory");
  }
  j->req = req;
  r->job = j;
  make_id(j);
  if (!prepare_job(st, j, &e) || !make_choices(st, j, &e)) return send_error(st, c, r, &e);

  int n_jobs = j->choices ? j->n_choices : 1;
  for (int k = 0; k < n_jobs; k++) {
    srv_submit_result sr = srv_sched_submit(st->sched, j->choices ? j->choices[k] : j);
    if (sr == SRV_SUBMIT_OK) continue;
    for (int m = 0; m < k; m++) srv_sched_cancel(st->sched, j->choices[m]);
    if (sr == SRV_SUBMIT_QUEUE_FULL) {
      srv_metrics_rejected(st->metrics, "queue_full");
      return fail(st, c, r, 429, "rate_limit_error", "queue_full",
                  "the server is busy: the request queue is full, retry later");
    }
    return fail(st, c, r, 503, "server_error", "shutting_down", "the server is shutting down");
  }

  if (j->req.stream) {
    stream_ctx *sc = calloc(1, sizeof *sc);
    if (!sc) {
      cancel_all(st, j);
      return MHD_NO;
    }
    sc->st = st;
    sc->conn = c;
    sc->job = j;
    if (j->choices && !(sc->streams = calloc((size_t)j->n_choices, sizeof *sc->streams))) {
      free(sc);
      cancel_all(st, j);
      return MHD_NO;
    }
    sc->api = r->api;
    r->api = NULL;
    srv_job_retain(j);
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024,
                                                                  stream_read, sc, stream_free);
    if (!resp) {
      stream_free(sc);
      return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(resp, "X-Accel-Buffering", "no");
    add_cors(st, c, resp);
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, resp);
    MHD_destroy_response(resp);
    srv_metrics_request(st->metrics, r->endpoint, 200);
    r->responded = true;
    return ret;
  }

  for (int k = 0; k < n_jobs; k++) {
    srv_job *w = j->choices ? j->choices[k] : j;
    for (;;) {
      if (!wait_output(st, c, w, true, 0, 0, 1e30)) {
        cancel_all(st, j);
        srv_metrics_request(st->metrics, r->endpoint, 499); /* client closed the request */
        return MHD_NO;
      }
      pthread_mutex_lock(&w->mu);
      srv_finish f = w->finish;
      e = w->error;
      pthread_mutex_unlock(&w->mu);
      if (f == SRV_FINISH_ERROR) {
        cancel_all(st, j);
        return send_error(st, c, r, &e);
      }
      if (f == SRV_FINISH_CANCELLED) {
        cancel_all(st, j);
        return MHD_NO;
      }
      if (f != SRV_PENDING) break;
    }
  }
  return send_json(st, c, r, 200, srv_api_response(&st->mi, st->responses, j, r->api));
}

/* /v1/embeddings: one job per input (the first holds the others as its
 * choices), each queued to the scheduler, which batches their prompts with
 * whatever else runs; the answer once every input is done. */
static enum MHD_Result handle_embeddings(srv_state *st, struct MHD_Connection *c, http_req *r) {
  srv_error e;
  srv_embd_request er;
  if (!srv_embd_parse(&st->mi, r->body.p ? r->body.p : "", r->body.n, &er, &e)) return send_error(st, c, r, &e);
  er.n_embd = st->mi.n_embd;
  srv_job *j = srv_job_create();
  srv_job **jobs = calloc((size_t)er.n, sizeof *jobs);
  if (!j || !jobs) {
    srv_job_release(j);
    free(jobs);
    srv_embd_request_free(&er);
    return fail(st, c, r, 500, "server_error", NULL, "out of memory");
  }
  r->job = j;
  make_id(j);
  jobs[0] = j;
  bool ok = true;
  for (int k = 1; k < er.n && ok; k++) ok = (jobs[k] = srv_job_create()) != NULL;
  for (int k = 0; k < er.n && ok; k++) {
    srv_request *q = &jobs[k]->req;
    q->kind = SRV_EMBEDDING;
    q->prompt = er.ids[k], er.ids[k] = NULL; /* the job owns the tokens now */
    q->n_prompt = er.n_ids[k];
    q->max_tokens = 0;
    jobs[k]->choice = k;
  }
  j->choices = jobs, j->n_choices = er.n;
  if (!ok) {
    for (int k = 1; k < er.n; k++)
      if (!jobs[k]) {
        j->n_choices = k;
        break;
      }
    srv_embd_request_free(&er);
    return fail(st, c, r, 500, "server_error", NULL, "out of memory");
  }
  for (int k = 0; k < er.n; k++) {
    srv_submit_result sr = srv_sched_submit(st->sched, jobs[k]);
    if (sr == SRV_SUBMIT_OK) continue;
    for (int m = 0; m < k; m++) srv_sched_cancel(st->sched, jobs[m]);
    srv_embd_request_free(&er);
    if (sr == SRV_SUBMIT_QUEUE_FULL) {
      srv_metrics_rejected(st->metrics, "queue_full");
      return fail(st, c, r, 429, "rate_limit_error", "queue_full",
                  "the server is busy: the request queue is full, retry later");
    }
    return fail(st, c, r, 503, "server_error", "shutting_down", "the server is shutting down");
  }
  const float **vecs = calloc((size_t)er.n, sizeof *vecs);
  for (int k = 0; k < er.n; k++) {
    srv_job *w = jobs[k];
    if (!wait_output(st, c, w, true, 0, 0, 1e30)) {
      cancel_all(st, j);
      free(vecs);
      srv_embd_request_free(&er);
      srv_metrics_request(st->metrics, r->endpoint, 499); /* client closed the request */
      return MHD_NO;
    }
    pthread_mutex_lock(&w->mu);
    srv_finish f = w->finish;
    e = w->error;
    pthread_mutex_unlock(&w->mu);
    if (f != SRV_FINISH_STOP || !w->embd) {
      cancel_all(st, j);
      free(vecs);
      srv_embd_request_free(&er);
      if (f == SRV_FINISH_CANCELLED) return MHD_NO;
      if (f != SRV_FINISH_ERROR) srv_fail(&e, 500, "server_error", NULL, NULL, "an input was not embedded");
      return send_error(st, c, r, &e);
    }
    if (vecs) vecs[k] = w->embd;
  }
  char *out = vecs ? srv_embd_response(&er, vecs) : NULL;
  free(vecs);
  srv_embd_request_free(&er);
  if (!out) return fail(st, c, r, 500, "server_error", NULL, "out of memory");
  return send_json(st, c, r, 200, out);
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
    return fail(st, c, r, 413, "invalid_request_error", "body_too_large",
                "the request body is larger than the limit of %zu bytes", st->cfg->max_body);
  if (r->r == R_NOT_FOUND)
    return fail(st, c, r, 404, "invalid_request_error", "not_found", "no such endpoint");
  if (r->preflight) return send_preflight(st, c, r);
  if (r->bad_method)
    return fail(st, c, r, 405, "invalid_request_error", "method_not_allowed",
                "method not allowed on this endpoint (allowed: %s)", r->methods);
  if (r->r == R_HEALTH) {
    bool ready = atomic_load(&st->ready), down = atomic_load(&st->shutting_down);
    const char *s = down ? "shutting_down" : ready ? "ok" : "loading";
    char *body = malloc(64);
    if (body) snprintf(body, 64, "{\"status\":\"%s\"}", s);
    return send_json(st, c, r, ready && !down ? 200 : 503, body);
  }
  if (r->r == R_READY) { /* like /health, open to probes without a key */
    const char *why;
    bool ready = srv_replica_ready(st, &why);
    return send_json(st, c, r, ready ? 200 : 503, srv_replica_ready_json(st, why));
  }
  if (!authorized(st, c))
    return fail(st, c, r, 401, "invalid_request_error", "invalid_api_key",
                "incorrect or missing API key (send 'Authorization: Bearer KEY' or "
                "'x-api-key: KEY')");
  if (r->r == R_METRICS)
    return send_body(st, c, r, 200, "text/plain; version=0.0.4; charset=utf-8",
                     srv_metrics_render(st->metrics));
  if (!atomic_load(&st->ready))
    return fail(st, c, r, 503, "server_error", "loading", "the model is still loading");
  if (atomic_load(&st->shutting_down) &&
      (r->r == R_CHAT || r->r == R_COMPLETIONS || r->r == R_MESSAGES || r->r == R_RESPONSES ||
       r->r == R_EMBEDDINGS))
    return fail(st, c, r, 503, "server_error", "shutting_down", "the server is shutting down");
  if (st->mi.embeddings && (r->r == R_CHAT || r->r == R_COMPLETIONS || r->r == R_MESSAGES || r->r == R_RESPONSES))
    return fail(st, c, r, 400, "invalid_request_error", "model_not_generative",
                "this server serves embeddings (pasada serve --embeddings): use /v1/embeddings");
  srv_error e;
  char *out;
  switch (r->r) {
    case R_MODELS:
      return send_json(st, c, r, 200, srv_openai_models(&st->mi));
    case R_CHAT:
      return handle_generate(st, c, r, SRV_CHAT);
    case R_COMPLETIONS:
      return handle_generate(st, c, r, SRV_COMPLETION);
    case R_TOKENIZE:
      out = srv_openai_tokenize(&st->mi, r->body.p ? r->body.p : "", r->body.n, &e);
      return out ? send_json(st, c, r, 200, out) : send_error(st, c, r, &e);
    case R_DETOKENIZE:
      out = srv_openai_detokenize(&st->mi, r->body.p ? r->body.p : "", r->body.n, &e);
      return out ? send_json(st, c, r, 200, out) : send_error(st, c, r, &e);
    case R_APPLY_TEMPLATE:
      out = srv_apply_template(&st->mi, r->body.p ? r->body.p : "", r->body.n, &e);
      return out ? send_json(st, c, r, 200, out) : send_error(st, c, r, &e);
    case R_MESSAGES:
      return handle_generate(st, c, r, SRV_MESSAGES);
    case R_COUNT_TOKENS:
      out = srv_anthropic_count_tokens(&st->mi, r->body.p ? r->body.p : "", r->body.n, &e);
      return out ? send_json(st, c, r, 200, out) : send_error(st, c, r, &e);
    case R_RESPONSES:
      return handle_generate(st, c, r, SRV_RESPONSES);
    case R_EMBEDDINGS:
      return handle_embeddings(st, c, r);
    case R_RESPONSE_ID:
      out = srv_api_stored_response(st->responses, r->id, r->delete, &e);
      return out ? send_json(st, c, r, 200, out) : send_error(st, c, r, &e);
    case R_MODEL_ID:
      out = srv_api_model(&st->mi, r->id, &e);
      return out ? send_json(st, c, r, 200, out) : send_error(st, c, r, &e);
    case R_SERVER_INFO:
      return send_json(st, c, r, 200, srv_replica_server_info(st));
    case R_MODEL_INFO:
      return send_json(st, c, r, 200, srv_replica_model_info(st));
    case R_KV_BLOCKS:
      out = srv_replica_kv_blocks(st, &e);
      return out ? send_json(st, c, r, 200, out) : send_error(st, c, r, &e);
    case R_GET_LOAD:
      return send_json(st, c, r, 200, srv_replica_load_json(st));
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
      if (r->endpoint[1] != 'v' &&
          (r->r == R_CHAT || r->r == R_COMPLETIONS || r->r == R_MODELS || r->r == R_RESPONSES ||
           r->r == R_EMBEDDINGS))
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
      return fail(st, c, r, 500, "server_error", NULL, "out of memory for the body");
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

  if ((rc = mhd_load()) != PASADA_OK) return rc;
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
