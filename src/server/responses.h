/* responses.h: the OpenAI Responses API (POST /v1/responses, GET and
 * DELETE /v1/responses/{id}): input items (messages, function calls and
 * their outputs) and function tools turned into OpenAI-style messages for
 * the chat template; a job rendered as a response object with message,
 * reasoning and function_call output items, whole or as the API's
 * semantic stream events; and the store of finished responses that
 * previous_response_id continues from. */
#ifndef PASADA_SERVER_RESPONSES_H
#define PASADA_SERVER_RESPONSES_H

#include <cjson/cJSON.h>

#include "server/openai.h"
#include "server/turn.h"

/* ---- the store: finished responses kept in memory, least recently used
 * evicted first, bounded by count and bytes ---- */

typedef struct srv_resp_store srv_resp_store;

srv_resp_store *srv_resp_store_create(int max_entries, size_t max_bytes);
void srv_resp_store_free(srv_resp_store *s);
/* Keeps a response (its object as JSON text) and the conversation that
 * continues from it (OpenAI-style messages, the response's output last),
 * taking both strings. Evicts the least recently used to make room; a
 * response larger than the whole store is not kept. */
void srv_resp_store_put(srv_resp_store *s, const char *id, char *response, char *conversation);
/* A copy of the stored response object / conversation (malloc'd), or NULL
 * when the id is not (or no longer) stored. Marks it recently used. */
char *srv_resp_store_response(srv_resp_store *s, const char *id);
char *srv_resp_store_conversation(srv_resp_store *s, const char *id);
bool srv_resp_store_delete(srv_resp_store *s, const char *id);
int srv_resp_store_count(srv_resp_store *s);

/* ---- a request ---- */

/* A Responses request's own state beside its srv_request: the fields the
 * response object echoes, the conversation to store with the output, and
 * the progress of its stream. */
typedef struct {
  cJSON *echo;         /* instructions, tools, tool_choice, ... as the response shows them */
  cJSON *conversation; /* the rendered messages without the instructions */
  cJSON *tools;        /* the offered tools (chat shape), for the output parser */
  bool store;
  int max_calls; /* 1: parallel_tool_calls false */
  srv_turn turn;
  int seq;        /* the next event's sequence_number */
  size_t lp_sent; /* the tokens whose logprobs went out in output_text.delta events */
  bool started, ended;
} srv_resp;

/* Parses a /v1/responses body into req (kind SRV_RESPONSES) and *out. An
 * unknown previous_response_id is a 404 (code previous_response_not_found);
 * other failures are 400s naming the field. */
bool srv_responses_parse(const srv_model_info *mi, srv_resp_store *store, const char *body,
                         size_t len, srv_request *req, srv_resp **out, srv_error *e);
void srv_responses_free(srv_resp *rs);

/* The response object of a finished job (non-streaming); stores it when
 * the request asked to (store, the default). */
char *srv_responses_response(const srv_model_info *mi, srv_job *j, srv_resp *rs,
                             srv_resp_store *store);

/* Renders into out every stream event the job's output allows now:
 * response.created and response.in_progress first, then per output item
 * output_item.added, content_part.added, the deltas, the .done events and
 * output_item.done, at the finish response.completed (or .incomplete), or
 * an error event and response.failed. Returns true once the stream is
 * complete (the response is stored then). */
bool srv_responses_stream_next(const srv_model_info *mi, srv_job *j, srv_resp *rs,
                               srv_resp_store *store, srv_buf *out);

#endif
