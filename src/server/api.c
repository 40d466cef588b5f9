/* api.c: one interface over the generating APIs (see api.h): each call
 * goes to the API of the request's kind. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/anthropic.h"
#include "server/api.h"

bool srv_api_parse(const srv_model_info *mi, srv_resp_store *store, srv_kind kind, const char *body,
                   size_t len, srv_request *req, void **api, srv_error *e) {
  *api = NULL;
  switch (kind) {
    case SRV_MESSAGES:
      return srv_anthropic_parse(mi, body, len, req, (srv_anth **)api, e);
    case SRV_RESPONSES:
      return srv_responses_parse(mi, store, body, len, req, (srv_resp **)api, e);
    default:
      return srv_openai_parse(mi, kind, body, len, req, e);
  }
}

void srv_api_free(srv_kind kind, void *api) {
  if (kind == SRV_MESSAGES) srv_anthropic_free(api);
  if (kind == SRV_RESPONSES) srv_responses_free(api);
}

char *srv_api_response(const srv_model_info *mi, srv_resp_store *store, srv_job *j, void *api) {
  switch (j->req.kind) {
    case SRV_MESSAGES:
      return srv_anthropic_response(mi, j, api);
    case SRV_RESPONSES:
      return srv_responses_response(mi, j, api, store);
    default:
      return srv_openai_response(mi, j);
  }
}

bool srv_api_stream(const srv_model_info *mi, srv_resp_store *store, srv_job *j, void *api,
                    srv_stream *oai, srv_buf *out) {
  if (j->req.kind == SRV_MESSAGES || j->req.kind == SRV_RESPONSES) {
    /* these re-read the whole text each time: the offsets tell the HTTP
     * side's wait what was seen */
    pthread_mutex_lock(&j->mu);
    oai->text_off = j->n_text;
    oai->lp_off = j->n_lp;
    pthread_mutex_unlock(&j->mu);
  }
  switch (j->req.kind) {
    case SRV_MESSAGES:
      return srv_anthropic_stream_next(mi, j, api, out);
    case SRV_RESPONSES:
      return srv_responses_stream_next(mi, j, api, store, out);
    default:
      return srv_stream_next(mi, j, oai, out);
  }
}

char *srv_api_model(const srv_model_info *mi, const char *id, srv_error *e) {
  if (strcmp(id, mi->name) != 0) {
    srv_fail(e, 404, "invalid_request_error", "model_not_found", "model",
             "The model '%.200s' does not exist (this server has '%.200s')", id, mi->name);
    return NULL;
  }
  /* the entry /v1/models lists, so the two always agree */
  char *list = srv_openai_models(mi);
  cJSON *root = list ? cJSON_Parse(list) : NULL;
  free(list);
  cJSON *m = cJSON_DetachItemFromArray(cJSON_GetObjectItemCaseSensitive(root, "data"), 0);
  char *out = m ? cJSON_PrintUnformatted(m) : NULL;
  cJSON_Delete(m);
  cJSON_Delete(root);
  if (!out) srv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
  return out;
}

char *srv_api_stored_response(srv_resp_store *store, const char *id, bool del, srv_error *e) {
  char *out = NULL;
  if (!del) {
    out = srv_resp_store_response(store, id);
  } else if (srv_resp_store_delete(store, id)) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "object", "response");
    cJSON_AddBoolToObject(o, "deleted", true);
    out = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!out) srv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    return out;
  }
  if (!out)
    srv_fail(e, 404, "invalid_request_error", "not_found", NULL,
             "No response with id '%.100s' is stored (it was not stored, was deleted, or was "
             "evicted)",
             id);
  return out;
}
