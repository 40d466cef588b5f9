/* http_internal.h: what the HTTP side's files share (http.c: routes,
 * dispatch, responses, the daemon; http_generate.c: generation and
 * embedding requests, waits and streams; http_mhd.c: libmicrohttpd,
 * loaded when the server starts). */
#ifndef PASADA_SERVER_HTTP_INTERNAL_H
#define PASADA_SERVER_HTTP_INTERNAL_H

#include <microhttpd.h>

#include "server/http.h"

/* ---- libmicrohttpd, loaded when the server starts ----
 * Linked, it would be mapped by every command along with the TLS libraries
 * it depends on (~2.4 MiB of RSS, which the memory target of a 135M model
 * cannot spare); loaded with dlopen, only `pasada serve` pays for it. The
 * calls below go through this table (the macros keep the library's names in
 * the code). Its soname first, then the file the build found. */
typedef struct {
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
} srv_mhd_table;
extern srv_mhd_table srv_mhd;
/* Loads the library into srv_mhd (once); fails with a message. */
int srv_mhd_load(void);

#define MHD_start_daemon srv_mhd.start_daemon
#define MHD_stop_daemon srv_mhd.stop_daemon
#define MHD_quiesce_daemon srv_mhd.quiesce_daemon
#define MHD_get_daemon_info srv_mhd.get_daemon_info
#define MHD_get_connection_info srv_mhd.get_connection_info
#define MHD_lookup_connection_value srv_mhd.lookup_connection_value
#define MHD_create_response_from_buffer srv_mhd.create_response_from_buffer
#define MHD_create_response_from_callback srv_mhd.create_response_from_callback
#define MHD_add_response_header srv_mhd.add_response_header
#define MHD_queue_response srv_mhd.queue_response
#define MHD_destroy_response srv_mhd.destroy_response

#define WAIT_SLICE_MS 100  /* how often a waiting thread checks the socket */
#define STREAM_PING_S 15.0 /* an SSE comment after this long without output */

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

/* Responses (http.c). http_send_body queues body (freed; NULL: a 500
 * "out of memory") with its content type, CORS headers and the status's
 * own (Retry-After, Allow), and counts it in the metrics; http_send_error
 * sends e in the route's API's shape (Anthropic's for /v1/messages, else
 * OpenAI's); http_fail, one made of status, type, code and a message. */
void http_add_cors(const srv_state *st, struct MHD_Connection *c, struct MHD_Response *resp);
enum MHD_Result http_send_body(srv_state *st, struct MHD_Connection *c, http_req *r, int status,
                               const char *content_type, char *body);
enum MHD_Result http_send_json(srv_state *st, struct MHD_Connection *c, http_req *r, int status,
                               char *json);
enum MHD_Result http_send_error(srv_state *st, struct MHD_Connection *c, http_req *r,
                                const srv_error *e);
enum MHD_Result http_fail(srv_state *st, struct MHD_Connection *c, http_req *r, int status,
                          const char *type, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));

/* Requests that queue jobs (http_generate.c): a generation of kind (chat,
 * completions, Messages, Responses), answered whole or streamed as SSE,
 * and /v1/embeddings. */
enum MHD_Result http_generate(srv_state *st, struct MHD_Connection *c, http_req *r, srv_kind kind);
enum MHD_Result http_embeddings(srv_state *st, struct MHD_Connection *c, http_req *r);

#endif
