/* embeddings.c: OpenAI's /v1/embeddings on both sides of the scheduler: the
 * request body validated into one token list per input (each run as a job
 * of kind SRV_EMBEDDING), and the finished jobs' pooled vectors rendered as
 * the response (floats, or base64 of little-endian float32 as OpenAI). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "server/embeddings.h"

#define MAX_INPUTS 2048 /* OpenAI's limit of inputs per request */

void srv_embd_request_free(srv_embd_request *r) {
  for (int i = 0; i < r->n; i++) free(r->ids[i]);
  free(r->ids);
  free(r->n_ids);
  free(r->model);
  memset(r, 0, sizeof *r);
}

/* Input i's tokens from a JSON string (tokenized as the CLI does: the
 * model's BOS/EOS flags, special-token text parsed) or an array of ids. */
static bool input_tokens(const srv_model_info *mi, const cJSON *v, int i, bool in_list,
                         srv_embd_request *r, srv_error *e) {
  char param[32];
  snprintf(param, sizeof param, in_list ? "input[%d]" : "input", i);
  int32_t *ids = NULL;
  size_t n = 0;
  if (cJSON_IsString(v)) {
    const char *s = v->valuestring;
    if (!*s)
      return srv_fail(e, 400, "invalid_request_error", NULL, param, "%s is an empty string", param);
    if (pasada_tokenize(mi->tok, s, strlen(s), true, true, &ids, &n) != PASADA_OK)
      return srv_fail(e, 400, "invalid_request_error", NULL, param, "%s: %s", param,
                      pasada_last_error());
    int32_t *own = malloc((n ? n : 1) * sizeof *own);
    if (!own) {
      pasada_text_free(ids);
      return srv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    }
    if (n) memcpy(own, ids, n * sizeof *own);
    pasada_text_free(ids);
    ids = own;
  } else if (cJSON_IsArray(v)) {
    n = (size_t)cJSON_GetArraySize(v);
    ids = malloc((n ? n : 1) * sizeof *ids);
    if (!ids) return srv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    size_t k = 0;
    for (const cJSON *t = v->child; t; t = t->next, k++) {
      const double d = cJSON_IsNumber(t) ? t->valuedouble : -1;
      if (!cJSON_IsNumber(t) || d != floor(d) || d < 0 || d >= mi->n_vocab) {
        free(ids);
        return srv_fail(e, 400, "invalid_request_error", NULL, param,
                        "%s[%zu] is not a token id in [0, %d)", param, k, mi->n_vocab);
      }
      ids[k] = (int32_t)d;
    }
  } else {
    return srv_fail(e, 400, "invalid_request_error", NULL, param,
                    "%s must be a string or an array of token ids", param);
  }
  if (n == 0) {
    free(ids);
    return srv_fail(e, 400, "invalid_request_error", NULL, param, "%s has no tokens", param);
  }
  if (n > (size_t)mi->n_ctx) {
    free(ids);
    return srv_fail(e, 400, "invalid_request_error", "context_length_exceeded", param,
                    "%s has %zu tokens, more than the context's %d", param, n, mi->n_ctx);
  }
  r->ids[i] = ids;
  r->n_ids[i] = (int32_t)n;
  r->n_tokens += (int64_t)n;
  return true;
}

bool srv_embd_parse(const srv_model_info *mi, const char *body, size_t len, srv_embd_request *r,
                    srv_error *e) {
  memset(r, 0, sizeof *r);
  if (!mi->embeddings)
    return srv_fail(
        e, 400, "invalid_request_error", "model_not_embedding", NULL,
        "this server generates text: serve an embedding model with `pasada serve --embeddings`");
  cJSON *root = cJSON_ParseWithLength(body, len);
  if (!root || !cJSON_IsObject(root)) {
    cJSON_Delete(root);
    return srv_fail(e, 400, "invalid_request_error", NULL, NULL, "the body is not a JSON object");
  }
  bool ok = false;
  const cJSON *input = cJSON_GetObjectItemCaseSensitive(root, "input");
  const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "encoding_format");
  const cJSON *dims = cJSON_GetObjectItemCaseSensitive(root, "dimensions");
  const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
  r->dimensions = mi->n_embd;
  if (!input) {
    srv_fail(e, 400, "invalid_request_error", NULL, "input", "'input' is required");
    goto out;
  }
  if (model && !cJSON_IsNull(model) && !cJSON_IsString(model)) {
    srv_fail(e, 400, "invalid_request_error", NULL, "model", "'model' must be a string");
    goto out;
  }
  if (fmt && !cJSON_IsNull(fmt)) {
    if (!cJSON_IsString(fmt) ||
        (strcmp(fmt->valuestring, "float") && strcmp(fmt->valuestring, "base64"))) {
      srv_fail(e, 400, "invalid_request_error", NULL, "encoding_format",
               "'encoding_format' must be \"float\" or \"base64\"");
      goto out;
    }
    r->base64 = !strcmp(fmt->valuestring, "base64");
  }
  if (dims && !cJSON_IsNull(dims)) {
    const double d = cJSON_IsNumber(dims) ? dims->valuedouble : 0;
    if (!cJSON_IsNumber(dims) || d != floor(d) || d < 1 || d > mi->n_embd) {
      srv_fail(e, 400, "invalid_request_error", NULL, "dimensions",
               "'dimensions' must be an integer in [1, %d] (the model's width)", mi->n_embd);
      goto out;
    }
    if ((int32_t)d != mi->n_embd && !mi->matryoshka) {
      srv_fail(e, 400, "invalid_request_error", NULL, "dimensions",
               "'dimensions' %d: this model gives %d-dimensional embeddings only (it is not served "
               "as a Matryoshka model: serve --matryoshka)",
               (int)d, mi->n_embd);
      goto out;
    }
    r->dimensions = (int32_t)d;
  }
  /* a string, a list of token ids, or a list of strings / lists of ids */
  const bool list = cJSON_IsArray(input) && input->child &&
                    (cJSON_IsString(input->child) || cJSON_IsArray(input->child));
  if (cJSON_IsArray(input) && !input->child) {
    srv_fail(e, 400, "invalid_request_error", NULL, "input", "'input' is an empty list");
    goto out;
  }
  const int n = list ? cJSON_GetArraySize(input) : 1;
  if (n > MAX_INPUTS) {
    srv_fail(e, 400, "invalid_request_error", NULL, "input", "'input' has %d items, at most %d", n,
             MAX_INPUTS);
    goto out;
  }
  r->ids = calloc((size_t)n, sizeof *r->ids);
  r->n_ids = calloc((size_t)n, sizeof *r->n_ids);
  r->model = strdup(model && cJSON_IsString(model) ? model->valuestring : mi->name);
  if (!r->ids || !r->n_ids || !r->model) {
    srv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    goto out;
  }
  r->n = n;
  int i = 0;
  for (const cJSON *v = list ? input->child : input; v && i < n; v = v->next, i++)
    if (!input_tokens(mi, v, i, list, r, e)) goto out;
  ok = true;
out:
  cJSON_Delete(root);
  if (!ok) srv_embd_request_free(r);
  return ok;
}

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* n bytes as standard base64 (with padding) into out (4 * ceil(n / 3) + 1 bytes). */
static void base64(const uint8_t *p, size_t n, char *out) {
  size_t o = 0;
  for (size_t i = 0; i < n; i += 3) {
    const uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
                       (i + 2 < n ? p[i + 2] : 0);
    out[o++] = B64[v >> 18 & 63];
    out[o++] = B64[v >> 12 & 63];
    out[o++] = i + 1 < n ? B64[v >> 6 & 63] : '=';
    out[o++] = i + 2 < n ? B64[v & 63] : '=';
  }
  out[o] = 0;
}

char *srv_embd_response(const srv_embd_request *r, const float *const *vecs) {
  const int32_t D = r->dimensions;
  cJSON *root = cJSON_CreateObject();
  cJSON *data = cJSON_AddArrayToObject(root, "data");
  float *v = malloc((size_t)D * sizeof *v);
  char *b64 = malloc(((size_t)D * 4 + 2) / 3 * 4 + 1);
  bool ok = root && data && v && b64;
  for (int i = 0; ok && i < r->n; i++) {
    /* the first D values, renormalised when truncated (Matryoshka) */
    double ss = 0, full = 0;
    for (int32_t k = 0; k < D; k++) ss += (double)vecs[i][k] * vecs[i][k];
    for (int32_t k = 0; k < r->n_embd; k++) full += (double)vecs[i][k] * vecs[i][k];
    const double scale = D < r->n_embd && ss > 0 ? sqrt(full / ss) : 1.0;
    for (int32_t k = 0; k < D; k++) v[k] = (float)(vecs[i][k] * scale);
    cJSON *item = cJSON_CreateObject();
    ok = item && cJSON_AddItemToArray(data, item);
    if (!ok) break;
    cJSON_AddStringToObject(item, "object", "embedding");
    cJSON_AddNumberToObject(item, "index", i);
    if (r->base64) {
      uint8_t *bytes = (uint8_t *)v; /* little-endian float32, as OpenAI's */
      for (int32_t k = 0; k < D; k++) {
        uint32_t u;
        memcpy(&u, &v[k], 4);
        bytes[4 * k] = (uint8_t)u, bytes[4 * k + 1] = (uint8_t)(u >> 8);
        bytes[4 * k + 2] = (uint8_t)(u >> 16), bytes[4 * k + 3] = (uint8_t)(u >> 24);
      }
      base64(bytes, (size_t)D * 4, b64);
      ok = cJSON_AddStringToObject(item, "embedding", b64) != NULL;
    } else {
      cJSON *arr = cJSON_AddArrayToObject(item, "embedding");
      for (int32_t k = 0; ok && arr && k < D; k++)
        ok = cJSON_AddItemToArray(arr, cJSON_CreateNumber(v[k]));
      ok = ok && arr;
    }
  }
  char *out = NULL;
  if (ok) {
    cJSON_AddStringToObject(root, "object", "list");
    cJSON_AddStringToObject(root, "model", r->model);
    cJSON *usage = cJSON_AddObjectToObject(root, "usage");
    if (usage) {
      cJSON_AddNumberToObject(usage, "prompt_tokens", (double)r->n_tokens);
      cJSON_AddNumberToObject(usage, "total_tokens", (double)r->n_tokens);
    }
    out = cJSON_PrintUnformatted(root);
  }
  free(v);
  free(b64);
  cJSON_Delete(root);
  return out;
}
