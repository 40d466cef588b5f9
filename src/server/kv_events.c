/* kv_events.c: the KV-event publisher of `pasada serve --kv-events`: the
 * engine's prefix-cache callback queues events; a thread groups them into
 * batches, encodes them with msgpack-c and sends them on a ZeroMQ PUB
 * socket in vLLM's framing (see kv_events.h and docs/server.md), and with a
 * replay endpoint keeps the latest batches for a ROUTER socket's thread to
 * send again to a subscriber that asks. libzmq is
 * loaded when the publisher starts, like libmicrohttpd, so the commands
 * that never publish do not map it. */
#include "server/kv_events.h"
#include "server/kv_replay.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef PASADA_KV_EVENTS
#include <zmq.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include <msgpack.h>
#pragma GCC diagnostic pop
#endif

#define MAX_QUEUED (1 << 20) /* events waiting to be sent before new ones are dropped */
#define MAX_GROUP 256        /* blocks in one BlockStored / BlockRemoved event */

#ifndef PASADA_KV_EVENTS

bool srv_kv_events_available(void) {
  return false;
}

int srv_kv_events_start(const char *endpoint, const char *topic, const char *medium,
                        int32_t block_size, const char *replay_endpoint, srv_kv_events **out,
                        char *err, size_t n_err) {
  (void)endpoint, (void)topic, (void)medium, (void)block_size, (void)replay_endpoint;
  *out = NULL;
  snprintf(err, n_err,
           "this build cannot publish KV events: it was configured without libzmq and msgpack-c "
           "(Debian: libzmq3-dev, libmsgpack-dev; scripts/setup-deps installs them)");
  return PASADA_ERR_ARG;
}

void srv_kv_events_on_event(void *user, const pasada_kv_event *ev) {
  (void)user, (void)ev;
}
void srv_kv_events_stop(srv_kv_events *p) {
  (void)p;
}

#else

/* ---- libzmq, loaded when a publisher starts ---- */
static struct {
  bool loaded;
  __typeof__(&zmq_ctx_new) ctx_new;
  __typeof__(&zmq_ctx_term) ctx_term;
  __typeof__(&zmq_socket) socket;
  __typeof__(&zmq_close) close;
  __typeof__(&zmq_setsockopt) setsockopt;
  __typeof__(&zmq_bind) bind;
  __typeof__(&zmq_connect) connect;
  __typeof__(&zmq_send) send;
  __typeof__(&zmq_recv) recv;
  __typeof__(&zmq_poll) poll;
  __typeof__(&zmq_getsockopt) getsockopt;
  __typeof__(&zmq_errno) errno_;
  __typeof__(&zmq_strerror) strerror_;
} z;
static pthread_mutex_t z_mu = PTHREAD_MUTEX_INITIALIZER;

#ifndef PASADA_ZMQ_PATH
#define PASADA_ZMQ_PATH "libzmq.so"
#endif

static bool zmq_load(char *err, size_t n_err) {
  pthread_mutex_lock(&z_mu);
  bool ok = z.loaded;
  if (!ok) {
    const char *names[] = {"libzmq.so.5", PASADA_ZMQ_PATH};
    void *lib = NULL;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !lib; i++)
      lib = dlopen(names[i], RTLD_NOW);
    if (!lib) {
      snprintf(err, n_err, "cannot load libzmq (%s): %s", PASADA_ZMQ_PATH, dlerror());
    } else {
      ok = true;
#define Z_SYM(field, name)                             \
  if (ok && !(*(void **)&z.field = dlsym(lib, #name))) \
    ok = false, snprintf(err, n_err, "libzmq lacks %s", #name);
      Z_SYM(ctx_new, zmq_ctx_new)
      Z_SYM(ctx_term, zmq_ctx_term)
      Z_SYM(socket, zmq_socket)
      Z_SYM(close, zmq_close)
      Z_SYM(setsockopt, zmq_setsockopt)
      Z_SYM(bind, zmq_bind)
      Z_SYM(connect, zmq_connect)
      Z_SYM(send, zmq_send)
      Z_SYM(recv, zmq_recv)
      Z_SYM(poll, zmq_poll)
      Z_SYM(getsockopt, zmq_getsockopt)
      Z_SYM(errno_, zmq_errno)
      Z_SYM(strerror_, zmq_strerror)
#undef Z_SYM
      if (ok)
        z.loaded = true; /* stays loaded for the process's life */
      else
        dlclose(lib);
    }
  }
  pthread_mutex_unlock(&z_mu);
  return ok;
}

bool srv_kv_events_available(void) {
  return true;
}

/* One queued event; a STORED one's tokens are at tok_off in the token queue. */
typedef struct {
  int kind; /* PASADA_KV_EVENT_*, or 0: AllBlocksCleared */
  uint64_t hash, parent;
  size_t tok_off;
} queued;

struct srv_kv_events {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  queued *q;
  size_t n_q, cap_q;
  int32_t *tok;
  size_t n_tok, cap_tok;
  bool stop;
  uint64_t dropped;
  pthread_t thread;
  bool started;
  void *ctx, *sock;
  char *topic;
  char medium[16];
  int32_t block_size;
  _Atomic uint64_t seq;
  /* replay: the kept batches, and the ROUTER socket's thread */
  srv_kv_ring *ring;
  void *rsock;
  pthread_t rthread;
  bool rstarted;
  atomic_bool rstop;
};

/* Appends one event under p->mu; false when the queue is full or memory short. */
static bool enqueue(srv_kv_events *p, int kind, uint64_t hash, uint64_t parent,
                    const int32_t *tokens, int32_t n_tokens) {
  if (p->n_q >= MAX_QUEUED) return false;
  if (p->n_q == p->cap_q) {
    size_t cap = p->cap_q ? p->cap_q * 2 : 256;
    queued *q = realloc(p->q, cap * sizeof *q);
    if (!q) return false;
    p->q = q, p->cap_q = cap;
  }
  size_t n = tokens ? (size_t)n_tokens : 0;
  if (p->n_tok + n > p->cap_tok) {
    size_t cap = p->cap_tok ? p->cap_tok : 4096;
    while (cap < p->n_tok + n) cap *= 2;
    int32_t *t = realloc(p->tok, cap * sizeof *t);
    if (!t) return false;
    p->tok = t, p->cap_tok = cap;
  }
  if (n) memcpy(p->tok + p->n_tok, tokens, n * sizeof *tokens);
  p->q[p->n_q++] = (queued){.kind = kind, .hash = hash, .parent = parent, .tok_off = p->n_tok};
  p->n_tok += n;
  return true;
}

void srv_kv_events_on_event(void *user, const pasada_kv_event *ev) {
  srv_kv_events *p = user;
  if (ev->kind == PASADA_KV_EVENT_STORED && ev->n_tokens != p->block_size) return; /* not a block */
  pthread_mutex_lock(&p->mu);
  bool was_empty = p->n_q == 0;
  if (!enqueue(p, ev->kind, ev->block_hash, ev->parent_hash,
               ev->kind == PASADA_KV_EVENT_STORED ? ev->tokens : NULL, ev->n_tokens)) {
    if (p->dropped++ == 0)
      fprintf(stderr, "pasada serve: kv-events: the queue is full; events are dropped\n");
  }
  if (was_empty) pthread_cond_signal(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

/* How many queued events from i on form one wire event: consecutive
 * STORED blocks that chain (each the previous one's child), or
 * consecutive REMOVED ones; an AllBlocksCleared stands alone. */
static size_t group_len(const queued *q, size_t i, size_t n) {
  size_t k = 1;
  if (q[i].kind == 0) return 1;
  while (i + k < n && k < MAX_GROUP && q[i + k].kind == q[i].kind &&
         (q[i].kind != PASADA_KV_EVENT_STORED || q[i + k].parent == q[i + k - 1].hash))
    k++;
  return k;
}

static void pack_str(msgpack_packer *pk, const char *s) {
  size_t n = strlen(s);
  msgpack_pack_str(pk, n);
  msgpack_pack_str_body(pk, s, n);
}

/* The payload of a batch: EventBatch as msgspec's array_like struct,
 * [ts, [event, ...]] (data_parallel_rank omitted), each event a tagged
 * array: ["BlockStored", block_hashes, parent_block_hash, token_ids,
 * block_size, lora_id, medium], ["BlockRemoved", block_hashes, medium],
 * ["AllBlocksCleared"]. */
static void encode(srv_kv_events *p, const queued *q, size_t n, const int32_t *tok,
                   msgpack_sbuffer *sb) {
  msgpack_packer pk;
  msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  size_t n_groups = 0;
  for (size_t i = 0; i < n; i += group_len(q, i, n)) n_groups++;
  msgpack_pack_array(&pk, 2);
  msgpack_pack_double(&pk, (double)ts.tv_sec + ts.tv_nsec * 1e-9);
  msgpack_pack_array(&pk, n_groups);
  for (size_t i = 0; i < n;) {
    size_t k = group_len(q, i, n);
    if (q[i].kind == 0) {
      msgpack_pack_array(&pk, 1);
      pack_str(&pk, "AllBlocksCleared");
    } else if (q[i].kind == PASADA_KV_EVENT_STORED) {
      msgpack_pack_array(&pk, 7);
      pack_str(&pk, "BlockStored");
      msgpack_pack_array(&pk, k);
      for (size_t j = 0; j < k; j++) msgpack_pack_uint64(&pk, q[i + j].hash);
      if (q[i].parent)
        msgpack_pack_uint64(&pk, q[i].parent);
      else
        msgpack_pack_nil(&pk);
      msgpack_pack_array(&pk, k * (size_t)p->block_size);
      for (size_t j = 0; j < k; j++)
        for (int32_t t = 0; t < p->block_size; t++)
          msgpack_pack_int32(&pk, tok[q[i + j].tok_off + (size_t)t]);
      msgpack_pack_int32(&pk, p->block_size);
      msgpack_pack_nil(&pk); /* lora_id */
      pack_str(&pk, p->medium);
    } else {
      msgpack_pack_array(&pk, 3);
      pack_str(&pk, "BlockRemoved");
      msgpack_pack_array(&pk, k);
      for (size_t j = 0; j < k; j++) msgpack_pack_uint64(&pk, q[i + j].hash);
      pack_str(&pk, p->medium);
    }
    i += k;
  }
}

static void send_batch(srv_kv_events *p, const queued *q, size_t n, const int32_t *tok) {
  msgpack_sbuffer sb;
  msgpack_sbuffer_init(&sb);
  encode(p, q, n, tok, &sb);
  uint64_t seq = atomic_load(&p->seq);
  unsigned char be[8];
  for (int i = 0; i < 8; i++) be[i] = (unsigned char)(seq >> (56 - 8 * i));
  /* PUB never blocks: past the high-water mark a subscriber misses the batch (and sees the gap) */
  if (z.send(p->sock, p->topic, strlen(p->topic), ZMQ_SNDMORE) < 0 ||
      z.send(p->sock, be, sizeof be, ZMQ_SNDMORE) < 0 || z.send(p->sock, sb.data, sb.size, 0) < 0)
    fprintf(stderr, "pasada serve: kv-events: send failed: %s\n", z.strerror_(z.errno_()));
  atomic_store(&p->seq, seq + 1);
  if (p->ring) {
    size_t size = sb.size;
    srv_kv_ring_keep(p->ring, seq, msgpack_sbuffer_release(&sb), size);
  }
  msgpack_sbuffer_destroy(&sb);
}

#define ID_MAX 256 /* a ZeroMQ routing id has at most 255 bytes */

/* Sends one replay message: the peer's id, the empty frame when its
 * request had one, then the given frames. */
static void send_reply(srv_kv_events *p, const unsigned char *id, size_t n_id, bool delim,
                       const void *a, size_t n_a, const void *b, size_t n_b) {
  /* ROUTER never blocks: a message for a peer gone, or past its high-water mark, is dropped */
  z.send(p->rsock, id, n_id, ZMQ_SNDMORE);
  if (delim) z.send(p->rsock, "", 0, ZMQ_SNDMORE);
  z.send(p->rsock, a, n_a, ZMQ_SNDMORE);
  z.send(p->rsock, b, n_b, 0);
}

/* Reads one request, all its frames, and answers it (see kv_events.h):
 * the kept batches from its start to the newest one kept when it came,
 * then the end marker. */
static void serve_replay(srv_kv_events *p) {
  unsigned char frame[3][ID_MAX], spare[ID_MAX];
  int len[3] = {0}, n = 0, more = 1;
  while (more) { /* the frames after the first have come with it: recv does not wait */
    int r = z.recv(p->rsock, n < 3 ? frame[n] : spare, ID_MAX, 0);
    if (r < 0) return;
    if (n < 3) len[n] = r;
    n++;
    size_t n_more = sizeof more;
    if (z.getsockopt(p->rsock, ZMQ_RCVMORE, &more, &n_more) != 0) return;
  }
  if (n < 2 || n > 3 || len[0] > ID_MAX || (n == 3 && len[1] != 0) || len[n - 1] != 8) return;
  uint64_t start = 0;
  for (int i = 0; i < 8; i++) start = start << 8 | frame[n - 1][i];
  bool delim = n == 3;
  uint64_t first, end;
  srv_kv_ring_range(p->ring, &first, &end); /* what is kept when the request comes */
  for (uint64_t s = start < first ? first : start; s < end; s++) {
    size_t size = 0;
    bool nomem;
    char *copy = srv_kv_ring_copy(p->ring, &s, end, &size, &nomem);
    if (!copy) {
      if (nomem) fprintf(stderr, "pasada serve: kv-events replay: out of memory\n");
      break;
    }
    unsigned char be[8];
    for (int i = 0; i < 8; i++) be[i] = (unsigned char)(s >> (56 - 8 * i));
    send_reply(p, frame[0], (size_t)len[0], delim, be, sizeof be, copy, size);
    free(copy);
  }
  static const unsigned char END[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  send_reply(p, frame[0], (size_t)len[0], delim, END, sizeof END, "", 0);
}

/* Answers replay requests until stopped, looking for the stop every 100 ms. */
static void *replay_main(void *arg) {
  srv_kv_events *p = arg;
  while (!atomic_load(&p->rstop)) {
    zmq_pollitem_t it = {.socket = p->rsock, .events = ZMQ_POLLIN};
    if (z.poll(&it, 1, 100) > 0 && (it.revents & ZMQ_POLLIN)) serve_replay(p);
  }
  return NULL;
}

/* Takes what is queued, a batch at a time, until stopped with nothing left. */
static void *publisher_main(void *arg) {
  srv_kv_events *p = arg;
  queued *q = NULL;
  int32_t *tok = NULL;
  size_t cap_q = 0, cap_tok = 0;
  for (;;) {
    pthread_mutex_lock(&p->mu);
    while (!p->stop && p->n_q == 0) pthread_cond_wait(&p->cv, &p->mu);
    if (p->n_q == 0) {
      pthread_mutex_unlock(&p->mu);
      break;
    }
    /* swap the queue with our spare arrays: the engine's thread never waits on a send */
    queued *tq = p->q;
    int32_t *tt = p->tok;
    size_t n = p->n_q, tcq = p->cap_q, tct = p->cap_tok;
    p->q = q, p->cap_q = cap_q, p->n_q = 0;
    p->tok = tok, p->cap_tok = cap_tok, p->n_tok = 0;
    pthread_mutex_unlock(&p->mu);
    send_batch(p, tq, n, tt);
    q = tq, cap_q = tcq, tok = tt, cap_tok = tct;
  }
  free(q);
  free(tok);
  return NULL;
}

/* Binds the replay ROUTER socket and starts its thread. */
static int start_replay(srv_kv_events *p, const char *endpoint, char *err, size_t n_err) {
  if (!(p->ring = srv_kv_ring_new(SRV_KV_REPLAY_BATCHES, SRV_KV_REPLAY_BYTES)) ||
      !(p->rsock = z.socket(p->ctx, ZMQ_ROUTER))) {
    snprintf(err, n_err, "cannot make the replay socket: %s",
             p->ring ? z.strerror_(z.errno_()) : "out of memory");
    return PASADA_ERR_IO;
  }
  int hwm = SRV_KV_REPLAY_BATCHES + 2, linger = 0; /* one whole replay fits */
  z.setsockopt(p->rsock, ZMQ_SNDHWM, &hwm, sizeof hwm);
  z.setsockopt(p->rsock, ZMQ_LINGER, &linger, sizeof linger);
  if (z.bind(p->rsock, endpoint) != 0) {
    snprintf(err, n_err, "cannot bind the replay endpoint %s: %s", endpoint,
             z.strerror_(z.errno_()));
    return PASADA_ERR_ARG;
  }
  if (pthread_create(&p->rthread, NULL, replay_main, p) != 0) {
    snprintf(err, n_err, "cannot start the replay thread");
    return PASADA_ERR_IO;
  }
  p->rstarted = true;
  return PASADA_OK;
}

int srv_kv_events_start(const char *endpoint, const char *topic, const char *medium,
                        int32_t block_size, const char *replay_endpoint, srv_kv_events **out,
                        char *err, size_t n_err) {
  *out = NULL;
  if (!zmq_load(err, n_err)) return PASADA_ERR_IO;
  srv_kv_events *p = calloc(1, sizeof *p);
  if (!p || !(p->topic = strdup(topic ? topic : ""))) {
    free(p);
    snprintf(err, n_err, "out of memory");
    return PASADA_ERR_NOMEM;
  }
  snprintf(p->medium, sizeof p->medium, "%s", medium);
  p->block_size = block_size;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  atomic_init(&p->seq, 0);
  atomic_init(&p->rstop, false);
  int rc = PASADA_ERR_IO;
  p->ctx = z.ctx_new();
  if (!p->ctx || !(p->sock = z.socket(p->ctx, ZMQ_PUB))) {
    snprintf(err, n_err, "cannot make a ZeroMQ PUB socket: %s", z.strerror_(z.errno_()));
    goto fail;
  }
  int hwm = 100000, linger = 1000;
  z.setsockopt(p->sock, ZMQ_SNDHWM, &hwm, sizeof hwm);
  z.setsockopt(p->sock, ZMQ_LINGER, &linger, sizeof linger);
  bool bind = strchr(endpoint, '*') || strstr(endpoint, "::") || !strncmp(endpoint, "ipc://", 6) ||
              !strncmp(endpoint, "inproc://", 9);
  if ((bind ? z.bind(p->sock, endpoint) : z.connect(p->sock, endpoint)) != 0) {
    snprintf(err, n_err, "cannot %s %s: %s", bind ? "bind" : "connect to", endpoint,
             z.strerror_(z.errno_()));
    rc = PASADA_ERR_ARG;
    goto fail;
  }
  if (replay_endpoint && (rc = start_replay(p, replay_endpoint, err, n_err)) != PASADA_OK)
    goto fail;
  rc = PASADA_ERR_IO;
  enqueue(p, 0, 0, 0, NULL, 0); /* AllBlocksCleared: whatever a subscriber knew is gone */
  if (pthread_create(&p->thread, NULL, publisher_main, p) != 0) {
    snprintf(err, n_err, "cannot start the publisher thread");
    goto fail;
  }
  p->started = true;
  *out = p;
  return PASADA_OK;
fail:
  srv_kv_events_stop(p);
  return rc;
}

void srv_kv_events_stop(srv_kv_events *p) {
  if (!p) return;
  if (p->started) {
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
  }
  if (p->rstarted) {
    atomic_store(&p->rstop, true);
    pthread_join(p->rthread, NULL);
  }
  if (p->rsock) z.close(p->rsock);
  srv_kv_ring_free(p->ring);
  if (p->sock) z.close(p->sock); /* lingers up to a second to deliver */
  if (p->ctx) z.ctx_term(p->ctx);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->cv);
  free(p->q);
  free(p->tok);
  free(p->topic);
  free(p);
}

#endif
