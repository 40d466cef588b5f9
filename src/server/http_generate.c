/* http_generate.c: the requests that queue jobs to the scheduler. A
 * generation request is validated by its API (api.c: OpenAI's chat and
 * completions, Anthropic's Messages, OpenAI's Responses), queued, then
 * either waited on (non-streaming) or streamed: the content reader waits
 * on the job for new output and renders it as SSE at the client's pace.
 * Both waits poll the socket, so a client that hangs up has its job
 * cancelled within ~100 ms. /v1/embeddings queues one job per input. */
#define _GNU_SOURCE /* POLLRDHUP */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "server/api.h"
#include "server/embeddings.h"
#include "server/http_internal.h"
#include "server/request.h"
#include "server/turn.h"

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

/* Queues a request's n jobs, all or none. When the scheduler refuses them,
 * answers 429 (the queue has no room for n) or 503 (shutting down) into
 * *refused: false. */
static bool submit_all(srv_state *st, struct MHD_Connection *c, http_req *r, srv_job *const *jobs,
                       int n, enum MHD_Result *refused) {
  const srv_submit_result sr = srv_sched_submit_all(st->sched, jobs, n);
  if (sr == SRV_SUBMIT_OK) return true;
  if (sr == SRV_SUBMIT_QUEUE_FULL) {
    srv_metrics_rejected(st->metrics, "queue_full");
    *refused = http_fail(st, c, r, 429, "rate_limit_error", "queue_full",
                         "the server is busy: the request queue is full, retry later");
  } else {
    *refused =
        http_fail(st, c, r, 503, "server_error", "shutting_down", "the server is shutting down");
  }
  return false;
}

/* Waits for job w to finish: its finish, and its error in *e. SRV_PENDING
 * when the client hung up meanwhile (w is then cancelled, the request
 * counted as a 499). */
static srv_finish wait_finish(srv_state *st, struct MHD_Connection *c, http_req *r, srv_job *w,
                              srv_error *e) {
  for (;;) {
    if (!wait_output(st, c, w, true, 0, 0, 1e30)) {
      srv_metrics_request(st->metrics, r->endpoint, 499); /* client closed the request */
      return SRV_PENDING;
    }
    pthread_mutex_lock(&w->mu);
    const srv_finish f = w->finish;
    *e = w->error;
    pthread_mutex_unlock(&w->mu);
    if (f != SRV_PENDING) return f;
  }
}

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

enum MHD_Result http_generate(srv_state *st, struct MHD_Connection *c, http_req *r, srv_kind kind) {
  srv_error e;
  srv_request req;
  if (!srv_api_parse(&st->mi, st->responses, kind, r->body.p ? r->body.p : "", r->body.n, &req,
                     &r->api, &e))
    return http_send_error(st, c, r, &e);
  srv_job *j = srv_job_create();
  if (!j) {
    srv_request_clear(&req);
    return http_fail(st, c, r, 500, "server_error", NULL, "out of memory");
  }
  j->req = req;
  r->job = j;
  make_id(j);
  if (!prepare_job(st, j, &e) || !make_choices(st, j, &e)) return http_send_error(st, c, r, &e);

  int n_jobs = j->choices ? j->n_choices : 1;
  enum MHD_Result refused;
  if (!submit_all(st, c, r, j->choices ? j->choices : &j, n_jobs, &refused)) return refused;

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
    http_add_cors(st, c, resp);
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, resp);
    MHD_destroy_response(resp);
    srv_metrics_request(st->metrics, r->endpoint, 200);
    r->responded = true;
    return ret;
  }

  for (int k = 0; k < n_jobs; k++) {
    srv_finish f = wait_finish(st, c, r, j->choices ? j->choices[k] : j, &e);
    if (f == SRV_PENDING || f == SRV_FINISH_ERROR || f == SRV_FINISH_CANCELLED) {
      cancel_all(st, j);
      return f == SRV_FINISH_ERROR ? http_send_error(st, c, r, &e) : MHD_NO;
    }
  }
  return http_send_json(st, c, r, 200, srv_api_response(&st->mi, st->responses, j, r->api));
}

/* /v1/embeddings: one job per input (the first holds the others as its
 * choices), each queued to the scheduler, which batches their prompts with
 * whatever else runs; the answer once every input is done. */
enum MHD_Result http_embeddings(srv_state *st, struct MHD_Connection *c, http_req *r) {
  srv_error e;
  srv_embd_request er;
  if (!srv_embd_parse(&st->mi, r->body.p ? r->body.p : "", r->body.n, &er, &e))
    return http_send_error(st, c, r, &e);
  er.n_embd = st->mi.n_embd;
  srv_job *j = srv_job_create();
  srv_job **jobs = calloc((size_t)er.n, sizeof *jobs);
  if (!j || !jobs) {
    srv_job_release(j);
    free(jobs);
    srv_embd_request_free(&er);
    return http_fail(st, c, r, 500, "server_error", NULL, "out of memory");
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
    return http_fail(st, c, r, 500, "server_error", NULL, "out of memory");
  }
  enum MHD_Result refused;
  if (!submit_all(st, c, r, jobs, er.n, &refused)) {
    srv_embd_request_free(&er);
    return refused;
  }
  const float **vecs = calloc((unsigned)er.n, sizeof *vecs);
  for (int k = 0; k < er.n; k++) {
    srv_job *w = jobs[k];
    srv_finish f = wait_finish(st, c, r, w, &e);
    if (f != SRV_FINISH_STOP || !w->embd) {
      cancel_all(st, j);
      free(vecs);
      srv_embd_request_free(&er);
      if (f == SRV_PENDING || f == SRV_FINISH_CANCELLED) return MHD_NO;
      if (f != SRV_FINISH_ERROR)
        srv_fail(&e, 500, "server_error", NULL, NULL, "an input was not embedded");
      return http_send_error(st, c, r, &e);
    }
    if (vecs) vecs[k] = w->embd;
  }
  char *out = vecs ? srv_embd_response(&er, vecs) : NULL;
  free(vecs);
  srv_embd_request_free(&er);
  if (!out) return http_fail(st, c, r, 500, "server_error", NULL, "out of memory");
  return http_send_json(st, c, r, 200, out);
}
