/* api.h: what differs between the generating APIs the server speaks
 * (OpenAI chat and completions, Anthropic Messages, OpenAI Responses),
 * behind one interface for the HTTP side: parsing a body into a request
 * and the API's own state, the finished response, the stream's events, and
 * the endpoints of the stored Responses and the model by id. */
#ifndef PASADA_SERVER_API_H
#define PASADA_SERVER_API_H

#include "server/openai.h"
#include "server/responses.h"

/* Parses a body of the kind's API into req; *api receives the API's own
 * state for the request (NULL for chat and completions), which
 * srv_api_free releases. On failure fills e and returns false. */
bool srv_api_parse(const srv_model_info *mi, srv_resp_store *store, srv_kind kind, const char *body,
                   size_t len, srv_request *req, void **api, srv_error *e);
void srv_api_free(srv_kind kind, void *api);

/* The whole response of a finished job in its API's shape (a Responses
 * response is stored when it asked to be). NULL when out of memory. */
char *srv_api_response(const srv_model_info *mi, srv_resp_store *store, srv_job *j, void *api);

/* Renders into out every stream event the job's output allows now (oai:
 * the chat / completions stream's state). Returns true once complete. */
bool srv_api_stream(const srv_model_info *mi, srv_resp_store *store, srv_job *j, void *api,
                    srv_stream *oai, srv_buf *out);

/* GET /v1/models/{id}: the model's entry of /v1/models, or NULL with a 404
 * (model_not_found) in e. */
char *srv_api_model(const srv_model_info *mi, const char *id, srv_error *e);

/* GET (del false) and DELETE (del true) /v1/responses/{id}: the stored
 * response / {"id", "object", "deleted"}, or NULL with a 404 in e. */
char *srv_api_stored_response(srv_resp_store *store, const char *id, bool del, srv_error *e);

#endif
