/* openai.c: OpenAI request bodies into srv_request (validated field by
 * field: wrong types and out-of-range values are 400s naming the field) and
 * jobs into OpenAI responses: chat.completion, text_completion, their stream
 * chunks, usage, logprobs and the error shape. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/openai.h"

#define BAD(e, param, ...) srv_fail(e, 400, "invalid_request_error", NULL, param, __VA_ARGS__)

/* ---- field readers: absent and null leave *out alone and succeed ---- */

static const cJSON *field(const cJSON *obj, const char *name) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
  return v && !cJSON_IsNull(v) ? v : NULL;
}

static bool get_bool(const cJSON *obj, const char *name, bool *out, srv_error *e) {
  const cJSON *v = field(obj, name);
  if (!v) return true;
  if (!cJSON_IsBool(v)) return BAD(e, name, "'%s' must be a boolean", name);
  *out = cJSON_IsTrue(v);
  return true;
}

static bool get_number(const cJSON *obj, const char *name, double lo, double hi, double *out,
                       srv_error *e) {
  const cJSON *v = field(obj, name);
  if (!v) return true;
  if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
    return BAD(e, name, "'%s' must be a number", name);
  if (v->valuedouble < lo || v->valuedouble > hi)
    return BAD(e, name, "'%s' is %g, it must be in [%g, %g]", name, v->valuedouble, lo, hi);
  *out = v->valuedouble;
  return true;
}

static bool get_int(const cJSON *obj, const char *name, double lo, double hi, int64_t *out,
                    srv_error *e) {
  const cJSON *v = field(obj, name);
  if (!v) return true;
  if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble != floor(v->valuedouble))
    return BAD(e, name, "'%s' must be an integer", name);
  if (v->valuedouble < lo || v->valuedouble > hi)
    return BAD(e, name, "'%s' is %.0f, it must be in [%.0f, %.0f]", name, v->valuedouble, lo, hi);
  *out = (int64_t)v->valuedouble;
  return true;
}

static bool get_float(const cJSON *obj, const char *name, double lo, double hi, float *out,
                      srv_error *e) {
  double d = *out;
  if (!get_number(obj, name, lo, hi, &d, e)) return false;
  *out = (float)d;
  return true;
}

/* ---- the fields both endpoints share ---- */

static bool parse_stop(const cJSON *root, srv_request *r, srv_error *e) {
  const cJSON *v = field(root, "stop");
  if (!v) return true;
  if (cJSON_IsString(v)) {
    if (!v->valuestring[0]) return true; /* "" stops nothing */
    if (strlen(v->valuestring) > SRV_MAX_STOP_LEN)
      return BAD(e, "stop", "a stop string is longer than %d bytes", SRV_MAX_STOP_LEN);
    r->stop[r->n_stop++] = strdup(v->valuestring);
    return true;
  }
  if (!cJSON_IsArray(v)) return BAD(e, "stop", "'stop' must be a string or an array of strings");
  if (cJSON_GetArraySize(v) > SRV_MAX_STOP)
    return BAD(e, "stop", "'stop' has %d strings, at most %d are allowed", cJSON_GetArraySize(v),
               SRV_MAX_STOP);
  const cJSON *s;
  cJSON_ArrayForEach(s, v) {
    if (!cJSON_IsString(s)) return BAD(e, "stop", "'stop' must be a string or an array of strings");
    if (strlen(s->valuestring) > SRV_MAX_STOP_LEN)
      return BAD(e, "stop", "a stop string is longer than %d bytes", SRV_MAX_STOP_LEN);
    if (s->valuestring[0]) r->stop[r->n_stop++] = strdup(s->valuestring);
  }
  return true;
}

static bool parse_common(const srv_model_info *mi, const cJSON *root, srv_request *r,
                         int64_t *max_tokens, srv_error *e) {
  const cJSON *model = field(root, "model");
  if (model && !cJSON_IsString(model)) return BAD(e, "model", "'model' must be a string");
  r->model = strdup(model ? model->valuestring : mi->name);
  if (!get_bool(root, "stream", &r->stream, e)) return false;
  const cJSON *so = field(root, "stream_options");
  if (so) {
    if (!cJSON_IsObject(so)) return BAD(e, "stream_options", "'stream_options' must be an object");
    if (!get_bool(so, "include_usage", &r->include_usage, e)) return false;
  }
  int64_t n = 1;
  if (!get_int(root, "n", -1e18, 1e18, &n, e)) return false;
  if (n != 1) return BAD(e, "n", "'n' is %lld, only n=1 is supported", (long long)n);
  if (!get_int(root, "max_tokens", 1, 1e15, max_tokens, e)) return false;

  /* OpenAI's defaults: temperature 1, top_p 1, no top-k or min-p cut. */
  pasada_sampler_params *sp = &r->sampling;
  *sp = pasada_sampler_default_params();
  sp->temp = 1.0f;
  sp->top_p = 1.0f;
  sp->top_k = 0;
  sp->min_p = 0.0f;
  sp->repeat_last_n = -1; /* the penalties see every generated token */
  int64_t top_k = 0;
  if (!get_float(root, "temperature", 0, 2, &sp->temp, e) ||
      !get_float(root, "top_p", 0, 1, &sp->top_p, e) ||
      !get_float(root, "min_p", 0, 1, &sp->min_p, e) ||
      !get_int(root, "top_k", 0, 1e9, &top_k, e) ||
      !get_float(root, "presence_penalty", -2, 2, &sp->presence_penalty, e) ||
      !get_float(root, "frequency_penalty", -2, 2, &sp->frequency_penalty, e) ||
      !get_float(root, "repetition_penalty", 1e-3, 100, &sp->repeat_penalty, e))
    return false;
  sp->top_k = (int32_t)top_k;
  if (sp->top_p <= 0.0f) sp->temp = 0.0f; /* nothing left to draw from but the best */
  /* seed: any integer; -1 (or none) draws one from the clock */
  const cJSON *seed = field(root, "seed");
  if (seed) {
    double d = seed->valuedouble;
    if (!cJSON_IsNumber(seed) || !isfinite(d) || d != floor(d))
      return BAD(e, "seed", "'seed' must be an integer");
    if (d < -9.2e18 || d >= 1.8e19) return BAD(e, "seed", "'seed' is out of the 64-bit range");
    sp->seed = d < 0 ? (uint64_t)(int64_t)d : (uint64_t)d;
  }
  return parse_stop(root, r, e);
}

/* Tokenizes the prompt text and checks it against the context. */
static bool tokenize_prompt(const srv_model_info *mi, const char *text, size_t len,
                            const char *param, srv_request *r, srv_error *e) {
  int32_t *ids = NULL;
  size_t n = 0;
  if (pasada_tokenize(mi->tok, text, len, true, true, &ids, &n) != PASADA_OK)
    return BAD(e, param, "the prompt could not be tokenized: %s", pasada_last_error());
  r->prompt = ids;
  r->n_prompt = (int32_t)(n > INT32_MAX ? INT32_MAX : n);
  if (n > (size_t)INT32_MAX) return BAD(e, param, "the prompt is too long");
  return true;
}

static bool check_length(const srv_model_info *mi, const char *param, srv_request *r,
                         int64_t max_tokens, srv_error *e) {
  if (r->n_prompt == 0) return BAD(e, param, "the prompt is empty");
  if (r->n_prompt >= mi->n_ctx)
    return srv_fail(e, 400, "invalid_request_error", "context_length_exceeded", param,
                    "the prompt has %d tokens but the context holds %d (the prompt and at least "
                    "one generated token must fit)",
                    r->n_prompt, mi->n_ctx);
  int64_t room = mi->n_ctx - r->n_prompt;
  r->max_tokens = (int32_t)(max_tokens > 0 && max_tokens < room ? max_tokens : room);
  return true;
}

/* content: a string, or an array of {"type": "text", "text": ...} parts. */
static bool message_text(const cJSON *content, int i, srv_buf *out, srv_error *e) {
  char param[64];
  snprintf(param, sizeof param, "messages[%d].content", i);
  if (!content) return true;
  if (cJSON_IsString(content)) {
    srv_buf_append(out, content->valuestring, strlen(content->valuestring));
    return true;
  }
  if (!cJSON_IsArray(content))
    return BAD(e, param, "'%s' must be a string or an array of parts", param);
  const cJSON *part;
  int k = 0;
  cJSON_ArrayForEach(part, content) {
    snprintf(param, sizeof param, "messages[%d].content[%d]", i, k++);
    const cJSON *type = field(part, "type"), *text = field(part, "text");
    if (!cJSON_IsObject(part) || !cJSON_IsString(type))
      return BAD(e, param, "'%s' must be an object with a 'type'", param);
    if (strcmp(type->valuestring, "text") != 0)
      return BAD(e, param, "content parts of type '%s' are not supported (only 'text')",
                 type->valuestring);
    if (!cJSON_IsString(text)) return BAD(e, param, "'%s.text' must be a string", param);
    srv_buf_append(out, text->valuestring, strlen(text->valuestring));
  }
  return true;
}

static bool parse_chat(const srv_model_info *mi, const cJSON *root, srv_request *r, srv_error *e) {
  const cJSON *msgs = field(root, "messages");
  if (!msgs) return BAD(e, "messages", "'messages' is required");
  if (!cJSON_IsArray(msgs)) return BAD(e, "messages", "'messages' must be an array");
  int n = cJSON_GetArraySize(msgs);
  if (n == 0) return BAD(e, "messages", "'messages' must not be empty");
  pasada_chat_message *cm = calloc((size_t)n, sizeof *cm);
  srv_buf *texts = calloc((size_t)n, sizeof *texts);
  bool ok = cm && texts;
  if (!ok) srv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
  int i = 0;
  const cJSON *m;
  cJSON_ArrayForEach(m, msgs) {
    if (!ok) break;
    char param[64];
    snprintf(param, sizeof param, "messages[%d]", i);
    if (!cJSON_IsObject(m)) {
      ok = BAD(e, param, "'%s' must be an object", param);
      break;
    }
    const cJSON *role = field(m, "role");
    snprintf(param, sizeof param, "messages[%d].role", i);
    if (!cJSON_IsString(role)) {
      ok = BAD(e, param, "'%s' must be a string", param);
      break;
    }
    const char *rs = role->valuestring;
    if (strcmp(rs, "developer") == 0) rs = "system";
    if (strcmp(rs, "system") != 0 && strcmp(rs, "user") != 0 && strcmp(rs, "assistant") != 0) {
      ok = BAD(e, param, "role '%s' is not supported (system, developer, user, assistant)",
               role->valuestring);
      break;
    }
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
    if (!content || (cJSON_IsNull(content) && strcmp(rs, "assistant") != 0)) {
      snprintf(param, sizeof param, "messages[%d].content", i);
      ok = BAD(e, param, "'%s' is required", param);
      break;
    }
    if (!message_text(cJSON_IsNull(content) ? NULL : content, i, &texts[i], e)) {
      ok = false;
      break;
    }
    srv_buf_append(&texts[i], "", 0);
    cm[i].role = rs;
    cm[i].content = texts[i].p ? texts[i].p : "";
    i++;
  }
  char *prompt = NULL;
  /* a conversation the template rejects is the client's error; a server
   * without a template (or out of memory) fails below with 500 */
  if (ok && mi->tmpl != PASADA_CHAT_NONE && pasada_chat_check(mi->tmpl, cm, (size_t)n) != PASADA_OK)
    ok = BAD(e, "messages", "%s", pasada_last_error());
  if (ok) {
    if (pasada_chat_render_model(mi->model, mi->tmpl, cm, (size_t)n, true, &prompt) != PASADA_OK)
      ok = srv_fail(e, 500, "server_error", NULL, NULL, "the chat template failed: %s",
                    pasada_last_error());
  }
  if (ok) ok = tokenize_prompt(mi, prompt, strlen(prompt), "messages", r, e);
  pasada_text_free(prompt);
  for (int k = 0; texts && k < n; k++) srv_buf_free(&texts[k]);
  free(texts);
  free(cm);
  if (!ok) return false;

  /* logprobs: true and top_logprobs: 0..20 */
  if (!get_bool(root, "logprobs", &r->logprobs, e)) return false;
  int64_t top = 0;
  if (!get_int(root, "top_logprobs", 0, SRV_MAX_TOP_LOGPROBS, &top, e)) return false;
  if (field(root, "top_logprobs") && !r->logprobs)
    return BAD(e, "top_logprobs", "'top_logprobs' needs 'logprobs' set to true");
  r->top_logprobs = (int)top;
  return true;
}

static bool parse_completion(const srv_model_info *mi, const cJSON *root, srv_request *r,
                             srv_error *e) {
  const cJSON *p = field(root, "prompt");
  if (!p) return BAD(e, "prompt", "'prompt' is required");
  /* a list of one prompt is that prompt */
  if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 &&
      (cJSON_IsString(p->child) || cJSON_IsArray(p->child)))
    p = p->child;
  else if (cJSON_IsArray(p) && p->child && (cJSON_IsString(p->child) || cJSON_IsArray(p->child)))
    return BAD(e, "prompt", "only one prompt per request is supported");
  if (cJSON_IsString(p)) {
    if (!tokenize_prompt(mi, p->valuestring, strlen(p->valuestring), "prompt", r, e)) return false;
  } else if (cJSON_IsArray(p)) {
    int n = cJSON_GetArraySize(p);
    r->prompt = malloc((size_t)(n > 0 ? n : 1) * sizeof(int32_t));
    if (!r->prompt) return srv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    const cJSON *t;
    cJSON_ArrayForEach(t, p) {
      if (!cJSON_IsNumber(t) || t->valuedouble != floor(t->valuedouble))
        return BAD(e, "prompt", "'prompt' must be a string or an array of token ids");
      if (t->valuedouble < 0 || t->valuedouble >= mi->n_vocab)
        return BAD(e, "prompt", "token id %.0f is outside the vocabulary [0, %d)", t->valuedouble,
                   mi->n_vocab);
      r->prompt[r->n_prompt++] = (int32_t)t->valuedouble;
    }
  } else {
    return BAD(e, "prompt", "'prompt' must be a string or an array of token ids");
  }
  int64_t lp = -1;
  if (!get_int(root, "logprobs", 0, SRV_MAX_TOP_LOGPROBS, &lp, e)) return false;
  r->logprobs = lp >= 0;
  r->top_logprobs = lp > 0 ? (int)lp : 0;
  bool echo = false;
  if (!get_bool(root, "echo", &echo, e)) return false;
  if (echo) return BAD(e, "echo", "'echo' is not supported");
  int64_t best_of = 1;
  if (!get_int(root, "best_of", 1, 1e9, &best_of, e)) return false;
  if (best_of != 1) return BAD(e, "best_of", "only best_of=1 is supported");
  return true;
}

bool srv_openai_parse(const srv_model_info *mi, srv_kind kind, const char *body, size_t len,
                      srv_request *req, srv_error *err) {
  memset(req, 0, sizeof *req);
  req->kind = kind;
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(body, len, &end, false);
  if (!root) {
    size_t at = end && end >= body ? (size_t)(end - body) : 0;
    return BAD(err, NULL, "the body is not valid JSON (error near byte %zu)", at);
  }
  bool ok;
  int64_t max_tokens = 0;
  if (!cJSON_IsObject(root)) {
    ok = BAD(err, NULL, "the body must be a JSON object");
  } else {
    ok = parse_common(mi, root, req, &max_tokens, err);
    if (ok && kind == SRV_CHAT) {
      /* max_completion_tokens supersedes max_tokens */
      ok = get_int(root, "max_completion_tokens", 1, 1e15, &max_tokens, err);
      if (ok) ok = parse_chat(mi, root, req, err);
    } else if (ok) {
      ok = parse_completion(mi, root, req, err);
    }
    if (ok) ok = check_length(mi, kind == SRV_CHAT ? "messages" : "prompt", req, max_tokens, err);
  }
  cJSON_Delete(root);
  if (!ok) srv_request_clear(req);
  return ok;
}

/* ---- responses ---- */

static char *print_and_delete(cJSON *root) {
  char *s = root ? cJSON_PrintUnformatted(root) : NULL;
  cJSON_Delete(root);
  return s;
}

char *srv_openai_error_json(const srv_error *e) {
  cJSON *root = cJSON_CreateObject();
  cJSON *err = cJSON_AddObjectToObject(root, "error");
  cJSON_AddStringToObject(err, "message", e->message);
  cJSON_AddStringToObject(err, "type", e->type ? e->type : "invalid_request_error");
  if (e->param[0])
    cJSON_AddStringToObject(err, "param", e->param);
  else
    cJSON_AddNullToObject(err, "param");
  if (e->code)
    cJSON_AddStringToObject(err, "code", e->code);
  else
    cJSON_AddNullToObject(err, "code");
  return print_and_delete(root);
}

/* A JSON string from bytes that may not be valid UTF-8. */
static cJSON *text_json(const char *s, size_t n) {
  char *clean = srv_utf8_sanitize(s ? s : "", s ? n : 0);
  cJSON *v = cJSON_CreateString(clean ? clean : "");
  free(clean);
  return v;
}

static cJSON *token_json(const srv_model_info *mi, int32_t id, char *piece, size_t *len) {
  size_t n = pasada_token_to_piece(mi->tok, id, true, piece, PASADA_DETOK_PIECE_MAX);
  if (n > PASADA_DETOK_PIECE_MAX) n = PASADA_DETOK_PIECE_MAX;
  *len = n;
  return text_json(piece, n);
}

static cJSON *bytes_json(const char *piece, size_t n) {
  cJSON *a = cJSON_CreateArray();
  for (size_t i = 0; i < n; i++)
    cJSON_AddItemToArray(a, cJSON_CreateNumber((unsigned char)piece[i]));
  return a;
}

/* chat: {"content": [{token, logprob, bytes, top_logprobs: [...]}, ...]} */
static cJSON *chat_logprobs(const srv_model_info *mi, const srv_token_logprob *lp, size_t n) {
  cJSON *root = cJSON_CreateObject();
  cJSON *content = cJSON_AddArrayToObject(root, "content");
  char piece[PASADA_DETOK_PIECE_MAX];
  size_t len;
  for (size_t i = 0; i < n; i++) {
    cJSON *t = cJSON_CreateObject();
    cJSON_AddItemToObject(t, "token", token_json(mi, lp[i].token, piece, &len));
    cJSON_AddNumberToObject(t, "logprob", lp[i].logprob);
    cJSON_AddItemToObject(t, "bytes", bytes_json(piece, len));
    cJSON *top = cJSON_AddArrayToObject(t, "top_logprobs");
    for (int k = 0; k < lp[i].n_top; k++) {
      cJSON *o = cJSON_CreateObject();
      cJSON_AddItemToObject(o, "token", token_json(mi, lp[i].top_token[k], piece, &len));
      cJSON_AddNumberToObject(o, "logprob", lp[i].top_logprob[k]);
      cJSON_AddItemToObject(o, "bytes", bytes_json(piece, len));
      cJSON_AddItemToArray(top, o);
    }
    cJSON_AddItemToArray(content, t);
  }
  cJSON_AddNullToObject(root, "refusal");
  return root;
}

/* completions: {tokens, token_logprobs, top_logprobs: [{text: lp}], text_offset} */
static cJSON *completion_logprobs(const srv_model_info *mi, const srv_token_logprob *lp, size_t n,
                                  size_t *offset) {
  cJSON *root = cJSON_CreateObject();
  cJSON *tokens = cJSON_AddArrayToObject(root, "tokens");
  cJSON *lps = cJSON_AddArrayToObject(root, "token_logprobs");
  cJSON *tops = cJSON_AddArrayToObject(root, "top_logprobs");
  cJSON *offs = cJSON_AddArrayToObject(root, "text_offset");
  char piece[PASADA_DETOK_PIECE_MAX];
  size_t len;
  for (size_t i = 0; i < n; i++) {
    cJSON *tok = token_json(mi, lp[i].token, piece, &len);
    cJSON_AddItemToArray(tokens, tok);
    cJSON_AddItemToArray(lps, cJSON_CreateNumber(lp[i].logprob));
    cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)*offset));
    *offset += len;
    cJSON *top = cJSON_CreateObject();
    for (int k = 0; k < lp[i].n_top; k++) {
      cJSON *name = token_json(mi, lp[i].top_token[k], piece, &len);
      if (!cJSON_GetObjectItemCaseSensitive(top, name->valuestring))
        cJSON_AddNumberToObject(top, name->valuestring, lp[i].top_logprob[k]);
      cJSON_Delete(name);
    }
    cJSON_AddItemToArray(tops, top);
  }
  return root;
}

static cJSON *usage_json(const srv_job *j) {
  cJSON *u = cJSON_CreateObject();
  cJSON_AddNumberToObject(u, "prompt_tokens", j->req.n_prompt);
  cJSON_AddNumberToObject(u, "completion_tokens", j->n_generated);
  cJSON_AddNumberToObject(u, "total_tokens", j->req.n_prompt + j->n_generated);
  cJSON *d = cJSON_AddObjectToObject(u, "prompt_tokens_details");
  cJSON_AddNumberToObject(d, "cached_tokens", j->n_cached);
  return u;
}

static cJSON *envelope(const srv_job *j, const char *object) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "id", j->id);
  cJSON_AddStringToObject(root, "object", object);
  cJSON_AddNumberToObject(root, "created", (double)j->created);
  cJSON_AddStringToObject(root, "model", j->req.model);
  cJSON_AddStringToObject(root, "system_fingerprint", "pasada");
  return root;
}

char *srv_openai_response(const srv_model_info *mi, srv_job *j) {
  pthread_mutex_lock(&j->mu); /* finished: the scheduler writes no more */
  bool chat = j->req.kind == SRV_CHAT;
  cJSON *root = envelope(j, chat ? "chat.completion" : "text_completion");
  cJSON *choices = cJSON_AddArrayToObject(root, "choices");
  cJSON *c = cJSON_CreateObject();
  cJSON_AddNumberToObject(c, "index", 0);
  if (chat) {
    cJSON *msg = cJSON_AddObjectToObject(c, "message");
    cJSON_AddStringToObject(msg, "role", "assistant");
    cJSON_AddItemToObject(msg, "content", text_json(j->text, j->n_text));
    cJSON_AddNullToObject(msg, "refusal");
  } else {
    cJSON_AddItemToObject(c, "text", text_json(j->text, j->n_text));
  }
  if (!j->req.logprobs) {
    cJSON_AddNullToObject(c, "logprobs");
  } else if (chat) {
    cJSON_AddItemToObject(c, "logprobs", chat_logprobs(mi, j->lp, j->n_lp));
  } else {
    size_t off = 0;
    cJSON_AddItemToObject(c, "logprobs", completion_logprobs(mi, j->lp, j->n_lp, &off));
  }
  cJSON_AddStringToObject(c, "finish_reason", srv_finish_name(j->finish));
  cJSON_AddItemToArray(choices, c);
  cJSON_AddItemToObject(root, "usage", usage_json(j));
  pthread_mutex_unlock(&j->mu);
  return print_and_delete(root);
}

char *srv_openai_models(const srv_model_info *mi) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "object", "list");
  cJSON *data = cJSON_AddArrayToObject(root, "data");
  cJSON *m = cJSON_CreateObject();
  cJSON_AddStringToObject(m, "id", mi->name);
  cJSON_AddStringToObject(m, "object", "model");
  cJSON_AddNumberToObject(m, "created", (double)mi->created);
  cJSON_AddStringToObject(m, "owned_by", "pasada");
  cJSON_AddNumberToObject(m, "context_length", mi->n_ctx);
  cJSON_AddItemToArray(data, m);
  return print_and_delete(root);
}

/* ---- streaming ---- */

static void sse(srv_buf *out, cJSON *root) {
  char *s = print_and_delete(root);
  if (!s) {
    out->failed = true;
    return;
  }
  srv_buf_append(out, "data: ", 6);
  srv_buf_append(out, s, strlen(s));
  srv_buf_append(out, "\n\n", 2);
  free(s);
}

static cJSON *chunk(const srv_job *j, cJSON **choice) {
  bool chat = j->req.kind == SRV_CHAT;
  cJSON *root = envelope(j, chat ? "chat.completion.chunk" : "text_completion");
  cJSON *choices = cJSON_AddArrayToObject(root, "choices");
  *choice = cJSON_CreateObject();
  cJSON_AddNumberToObject(*choice, "index", 0);
  cJSON_AddItemToArray(choices, *choice);
  return root;
}

bool srv_stream_next(const srv_model_info *mi, srv_job *j, srv_stream *st, srv_buf *out) {
  if (st->sent_end) return true;
  bool chat = j->req.kind == SRV_CHAT;
  pthread_mutex_lock(&j->mu);
  size_t n_text = j->n_text - st->text_off, n_lp = j->n_lp - st->lp_off;
  char *text = n_text ? srv_utf8_sanitize(j->text + st->text_off, n_text) : NULL;
  srv_token_logprob *lp = NULL;
  if (n_lp && (lp = malloc(n_lp * sizeof *lp))) memcpy(lp, j->lp + st->lp_off, n_lp * sizeof *lp);
  st->text_off = j->n_text;
  st->lp_off = j->n_lp;
  srv_finish finish = j->finish;
  srv_error err = j->error;
  pthread_mutex_unlock(&j->mu);

  cJSON *c;
  if (chat && !st->sent_role) {
    cJSON *root = chunk(j, &c);
    cJSON *delta = cJSON_AddObjectToObject(c, "delta");
    cJSON_AddStringToObject(delta, "role", "assistant");
    cJSON_AddStringToObject(delta, "content", "");
    cJSON_AddNullToObject(c, "logprobs");
    cJSON_AddNullToObject(c, "finish_reason");
    sse(out, root);
    st->sent_role = true;
  }
  if (text || lp) {
    cJSON *root = chunk(j, &c);
    if (chat) {
      cJSON *delta = cJSON_AddObjectToObject(c, "delta");
      cJSON_AddStringToObject(delta, "content", text ? text : "");
    } else {
      cJSON_AddStringToObject(c, "text", text ? text : "");
    }
    if (lp && chat)
      cJSON_AddItemToObject(c, "logprobs", chat_logprobs(mi, lp, n_lp));
    else if (lp)
      cJSON_AddItemToObject(c, "logprobs",
                            completion_logprobs(mi, lp, n_lp, &st->text_offset_total));
    else
      cJSON_AddNullToObject(c, "logprobs");
    cJSON_AddNullToObject(c, "finish_reason");
    sse(out, root);
  }
  free(text);
  free(lp);
  if (finish == SRV_PENDING) return false;

  if (finish == SRV_FINISH_ERROR) {
    char *e = srv_openai_error_json(&err);
    srv_buf_printf(out, "data: %s\n\n", e ? e : "{\"error\":{\"message\":\"error\"}}");
    free(e);
  } else {
    cJSON *root = chunk(j, &c);
    if (chat)
      cJSON_AddObjectToObject(c, "delta");
    else
      cJSON_AddStringToObject(c, "text", "");
    cJSON_AddNullToObject(c, "logprobs");
    cJSON_AddStringToObject(c, "finish_reason", srv_finish_name(finish));
    sse(out, root);
    if (j->req.include_usage) {
      cJSON *u = envelope(j, chat ? "chat.completion.chunk" : "text_completion");
      cJSON_AddArrayToObject(u, "choices");
      pthread_mutex_lock(&j->mu);
      cJSON_AddItemToObject(u, "usage", usage_json(j));
      pthread_mutex_unlock(&j->mu);
      sse(out, u);
    }
  }
  srv_buf_append(out, "data: [DONE]\n\n", 14);
  st->sent_end = true;
  return true;
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
  const cJSON *content = field(root, "content");
  if (!content) content = field(root, "text");
  char *out = NULL;
  if (!cJSON_IsString(content)) {
    BAD(e, "content", "'content' must be a string");
  } else if (get_bool(root, "add_special", &add_special, e) &&
             get_bool(root, "parse_special", &parse_special, e) &&
             get_bool(root, "with_pieces", &with_pieces, e)) {
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
      out = print_and_delete(r);
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
  const cJSON *tokens = field(root, "tokens");
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
      cJSON_AddItemToObject(r, "content", text_json(text, strlen(text)));
      pasada_text_free(text);
      out = print_and_delete(r);
    }
  }
  free(ids);
  cJSON_Delete(root);
  return out;
}
