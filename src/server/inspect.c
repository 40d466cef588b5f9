/* inspect.c: the endpoints that show what the model is given: /tokenize
 * and /detokenize (llama.cpp's shapes) and /apply-template (a conversation
 * rendered by the chat template, as `pasada template` prints it). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/chat.h"
#include "server/openai.h"
#include "server/json_util.h"

#define BAD(e, param, ...) srv_fail(e, 400, "invalid_request_error", NULL, param, __VA_ARGS__)

static cJSON *token_json(const srv_model_info *mi, int32_t id, char *piece, size_t *len) {
  size_t n = pasada_token_to_piece(mi->tok, id, true, piece, PASADA_DETOK_PIECE_MAX);
  if (n > PASADA_DETOK_PIECE_MAX) n = PASADA_DETOK_PIECE_MAX;
  *len = n;
  return srv_json_text(piece, n);
}

/* ---- /tokenize and /detokenize (llama.cpp's shapes) ---- */

char *srv_openai_tokenize(const srv_model_info *mi, const char *body, size_t len, srv_error *e) {
  cJSON *root = cJSON_ParseWithLength(body, len);
  if (!root || !cJSON_IsObject(root)) {
    cJSON_Delete(root);
    BAD(e, NULL, "the body must be a JSON object");
    return NULL;
  }
  bool add_special = false, parse_special = true, with_pieces = false;
  const cJSON *content = srv_json_field(root, "content");
  if (!content) content = srv_json_field(root, "text");
  char *out = NULL;
  if (!cJSON_IsString(content)) {
    BAD(e, "content", "'content' must be a string");
  } else if (srv_json_bool(root, "add_special", &add_special, e) &&
             srv_json_bool(root, "parse_special", &parse_special, e) &&
             srv_json_bool(root, "with_pieces", &with_pieces, e)) {
    int32_t *ids = NULL;
    size_t n = 0;
    if (pasada_tokenize(mi->tok, content->valuestring, strlen(content->valuestring), add_special,
                        parse_special, &ids, &n) != PASADA_OK) {
      BAD(e, "content", "tokenization failed: %s", pasada_last_error());
    } else {
      cJSON *r = cJSON_CreateObject();
      cJSON *arr = cJSON_AddArrayToObject(r, "tokens");
      char piece[PASADA_DETOK_PIECE_MAX];
      size_t plen;
      for (size_t i = 0; i < n; i++) {
        if (!with_pieces) {
          cJSON_AddItemToArray(arr, cJSON_CreateNumber(ids[i]));
          continue;
        }
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "id", ids[i]);
        cJSON_AddItemToObject(o, "piece", token_json(mi, ids[i], piece, &plen));
        cJSON_AddItemToArray(arr, o);
      }
      pasada_text_free(ids);
      out = srv_json_print(r);
      if (!out) srv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    }
  }
  cJSON_Delete(root);
  return out;
}

char *srv_openai_detokenize(const srv_model_info *mi, const char *body, size_t len, srv_error *e) {
  cJSON *root = cJSON_ParseWithLength(body, len);
  if (!root || !cJSON_IsObject(root)) {
    cJSON_Delete(root);
    BAD(e, NULL, "the body must be a JSON object");
    return NULL;
  }
  const cJSON *tokens = srv_json_field(root, "tokens");
  char *out = NULL;
  int n = cJSON_IsArray(tokens) ? cJSON_GetArraySize(tokens) : -1;
  int32_t *ids = n >= 0 ? malloc((size_t)(n > 0 ? n : 1) * sizeof *ids) : NULL;
  bool ok = ids != NULL;
  if (n < 0)
    BAD(e, "tokens", "'tokens' must be an array of token ids");
  else if (!ids)
    srv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
  int k = 0;
  const cJSON *t;
  if (ok) cJSON_ArrayForEach(t, tokens) {
      if (!cJSON_IsNumber(t) || t->valuedouble != floor(t->valuedouble) || t->valuedouble < 0 ||
          t->valuedouble >= mi->n_vocab) {
        ok = BAD(e, "tokens", "'tokens' must hold token ids in [0, %d)", mi->n_vocab);
        break;
      }
      ids[k++] = (int32_t)t->valuedouble;
    }
  if (ok) {
    char *text = NULL;
    if (pasada_detokenize(mi->tok, ids, (size_t)k, false, &text, NULL) != PASADA_OK) {
      srv_fail(e, 500, "server_error", NULL, NULL, "detokenization failed: %s",
               pasada_last_error());
    } else {
      cJSON *r = cJSON_CreateObject();
      cJSON_AddItemToObject(r, "content", srv_json_text(text, strlen(text)));
      pasada_text_free(text);
      out = srv_json_print(r);
    }
  }
  free(ids);
  cJSON_Delete(root);
  return out;
}

/* POST /apply-template: {messages, tools?, add_generation_prompt? (true),
 * chat_template_kwargs?} -> {"prompt": text}. */
char *srv_apply_template(const srv_model_info *mi, const char *body, size_t len, srv_error *e) {
  cJSON *root = cJSON_ParseWithLength(body, len);
  if (!root || !cJSON_IsObject(root)) {
    cJSON_Delete(root);
    BAD(e, NULL, "the body must be a JSON object");
    return NULL;
  }
  char *out = NULL, *prompt = NULL;
  bool add_gen = true;
  const cJSON *tools = srv_json_field(root, "tools"),
              *kwargs = srv_json_field(root, "chat_template_kwargs");
  if (!srv_json_bool(root, "add_generation_prompt", &add_gen, e)) goto done;
  if (tools && !cJSON_IsArray(tools)) {
    BAD(e, "tools", "'tools' must be an array");
    goto done;
  }
  if (kwargs && !cJSON_IsObject(kwargs)) {
    BAD(e, "chat_template_kwargs", "'chat_template_kwargs' must be an object");
    goto done;
  }
  if (!srv_chat_render(mi, srv_json_field(root, "messages"), tools, add_gen, kwargs, &prompt, NULL,
                       e))
    goto done;
  cJSON *r = cJSON_CreateObject();
  cJSON_AddItemToObject(r, "prompt", srv_json_text(prompt, strlen(prompt)));
  out = srv_json_print(r);
  if (!out) srv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
done:
  free(prompt);
  cJSON_Delete(root);
  return out;
}
