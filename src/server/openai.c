/* openai.c: OpenAI request bodies into srv_request (validated field by
 * field: wrong types and out-of-range values are 400s naming the field) and
 * jobs into OpenAI responses: chat.completion, text_completion, their stream
 * chunks, usage, logprobs and the error shape. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/chat.h"
#include "server/openai.h"
#include "server/request.h"
#include "server/json_util.h"
#include "server/turn.h"

#define BAD(e, param, ...) srv_fail(e, 400, "invalid_request_error", NULL, param, __VA_ARGS__)

/* ---- the fields both endpoints share ---- */

static bool parse_stop(const cJSON *root, srv_request *r, srv_error *e) {
  const cJSON *v = srv_json_field(root, "stop");
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

/* OpenAI fields the server does not honour are refused, not ignored. */
static bool refuse_unsupported(const cJSON *root, bool chat, srv_error *e) {
  static const char *const refused_chat[] = {"audio", "prediction", "web_search_options",
                                             "functions", "function_call"};
  for (size_t i = 0; chat && i < sizeof refused_chat / sizeof refused_chat[0]; i++)
    if (srv_json_field(root, refused_chat[i]))
      return BAD(e, refused_chat[i], "'%s' is not supported", refused_chat[i]);
  const cJSON *mod = srv_json_field(root, "modalities");
  if (chat && mod) {
    const cJSON *m;
    if (!cJSON_IsArray(mod)) return BAD(e, "modalities", "'modalities' must be an array");
    cJSON_ArrayForEach(m, mod) if (!cJSON_IsString(m) ||
                                   strcmp(m->valuestring, "text") !=
                                       0) return BAD(e, "modalities",
                                                     "only the 'text' modality is supported");
  }
  if (chat) {
    /* fields about the caller or the provider's caching: honoured (nothing
     * to change), their types checked; store, moderation and a verbosity
     * other than the default would change what happens: refused */
    static const char *const strings[] = {"user", "safety_identifier", "prompt_cache_key"};
    for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++) {
      const cJSON *v = srv_json_field(root, strings[i]);
      if (v && !cJSON_IsNull(v) && !cJSON_IsString(v))
        return BAD(e, strings[i], "'%s' must be a string", strings[i]);
    }
    static const char *const objects[] = {"metadata", "prompt_cache_options"};
    for (size_t i = 0; i < sizeof objects / sizeof objects[0]; i++) {
      const cJSON *v = srv_json_field(root, objects[i]);
      if (v && !cJSON_IsNull(v) && !cJSON_IsObject(v))
        return BAD(e, objects[i], "'%s' must be an object", objects[i]);
    }
    const cJSON *v = srv_json_field(root, "store");
    if (v && !cJSON_IsNull(v) && !cJSON_IsFalse(v))
      return BAD(e, "store", "'store' must be false: chat completions are not stored here");
    v = srv_json_field(root, "moderation");
    if (v && !cJSON_IsNull(v)) return BAD(e, "moderation", "'moderation' is not supported");
    v = srv_json_field(root, "verbosity");
    if (v && !cJSON_IsNull(v) && !(cJSON_IsString(v) && strcmp(v->valuestring, "medium") == 0))
      return BAD(e, "verbosity", "'verbosity' must be 'medium' (the model's own length)");
    v = srv_json_field(root, "prompt_cache_retention");
    if (v && !cJSON_IsNull(v) &&
        !(cJSON_IsString(v) && (strcmp(v->valuestring, "in_memory") == 0 ||
                                strcmp(v->valuestring, "24h") == 0)))
      return BAD(e, "prompt_cache_retention",
                 "'prompt_cache_retention' must be 'in_memory' or '24h'");
    v = srv_json_field(root, "service_tier");
    static const char *const tiers[] = {"auto", "default", "flex", "scale", "priority", "fast"};
    bool tier_ok = !v || cJSON_IsNull(v);
    for (size_t i = 0; !tier_ok && cJSON_IsString(v) && i < sizeof tiers / sizeof tiers[0]; i++)
      tier_ok = strcmp(v->valuestring, tiers[i]) == 0;
    if (!tier_ok)
      return BAD(e, "service_tier",
                 "'service_tier' must be one of auto, default, flex, scale, priority, fast");
  }
  const cJSON *suffix = srv_json_field(root, "suffix");
  if (!chat && suffix && (!cJSON_IsString(suffix) || suffix->valuestring[0]))
    return BAD(e, "suffix", "'suffix' is not supported");
  return true;
}

static bool parse_common(const srv_model_info *mi, const cJSON *root, srv_request *r,
                         int64_t *max_tokens, srv_error *e) {
  const cJSON *model = srv_json_field(root, "model");
  if (model && !cJSON_IsString(model)) return BAD(e, "model", "'model' must be a string");
  r->model = strdup(model ? model->valuestring : mi->name);
  if (!srv_json_bool(root, "stream", &r->stream, e)) return false;
  const cJSON *so = srv_json_field(root, "stream_options");
  if (so) {
    if (!cJSON_IsObject(so)) return BAD(e, "stream_options", "'stream_options' must be an object");
    if (!srv_json_bool(so, "include_usage", &r->include_usage, e)) return false;
  }
  int64_t n = 1;
  if (!srv_json_int(root, "n", 1, SRV_MAX_CHOICES, &n, e)) return false;
  r->n = (int32_t)n;
  if (!srv_json_int(root, "max_tokens", 1, 1e15, max_tokens, e)) return false;

  /* OpenAI's defaults: temperature 1, top_p 1, no top-k or min-p cut. */
  pasada_sampler_params *sp = &r->sampling;
  *sp = pasada_sampler_default_params();
  sp->temp = 1.0f;
  sp->top_p = 1.0f;
  sp->top_k = 0;
  sp->min_p = 0.0f;
  sp->repeat_last_n = -1; /* the penalties see every generated token */
  int64_t top_k = 0;
  if (!srv_json_float(root, "temperature", 0, 2, &sp->temp, e) ||
      !srv_json_float(root, "top_p", 0, 1, &sp->top_p, e) ||
      !srv_json_float(root, "min_p", 0, 1, &sp->min_p, e) ||
      !srv_json_int(root, "top_k", 0, 1e9, &top_k, e) ||
      !srv_json_float(root, "presence_penalty", -2, 2, &sp->presence_penalty, e) ||
      !srv_json_float(root, "frequency_penalty", -2, 2, &sp->frequency_penalty, e) ||
      !srv_json_float(root, "repetition_penalty", 1e-3, 100, &sp->repeat_penalty, e))
    return false;
  sp->top_k = (int32_t)top_k;
  if (sp->top_p <= 0.0f) sp->temp = 0.0f; /* nothing left to draw from but the best */
  /* seed: any integer; -1 (or none) draws one from the clock */
  const cJSON *seed = srv_json_field(root, "seed");
  if (seed) {
    double d = seed->valuedouble;
    if (!cJSON_IsNumber(seed) || !isfinite(d) || d != floor(d))
      return BAD(e, "seed", "'seed' must be an integer");
    if (d < -9.2e18 || d >= 1.8e19) return BAD(e, "seed", "'seed' is out of the 64-bit range");
    sp->seed = d < 0 ? (uint64_t)(int64_t)d : (uint64_t)d;
  }
  if (!srv_request_logit_bias(mi, srv_json_field(root, "logit_bias"), "logit_bias", r, e))
    return false;
  if (!refuse_unsupported(root, r->kind == SRV_CHAT, e)) return false;
  if (!srv_request_speculative(srv_json_field(root, "speculative"), "speculative", r, e))
    return false;
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
  if (!srv_fit_context(mi, max_tokens, param, r, e)) return false;
  r->max_asked = max_tokens;
  if (r->n < 1) r->n = 1;
  if ((int64_t)r->n * (1 + r->n_more) > SRV_MAX_CHOICES)
    return BAD(e, "n", "'n' x the prompts is %lld choices, at most %d are allowed",
               (long long)r->n * (1 + r->n_more), SRV_MAX_CHOICES);
  return true;
}

/* tool_choice: "auto", "none", "required" or {"type": "function",
 * "function": {"name": ...}}. */
static bool parse_tool_choice(const cJSON *root, srv_tool_mode *mode, const char **name,
                              srv_error *e) {
  const cJSON *tc = srv_json_field(root, "tool_choice");
  *mode = SRV_TOOLS_AUTO;
  *name = NULL;
  if (!tc) return true;
  if (cJSON_IsString(tc)) {
    if (strcmp(tc->valuestring, "auto") == 0) return true;
    if (strcmp(tc->valuestring, "none") == 0) {
      *mode = SRV_TOOLS_NONE;
      return true;
    }
    if (strcmp(tc->valuestring, "required") == 0) {
      *mode = SRV_TOOLS_REQUIRED;
      return true;
    }
    return BAD(e, "tool_choice",
               "'tool_choice' is '%s'; it must be auto, none, required or a "
               "function",
               tc->valuestring);
  }
  const cJSON *type = srv_json_field(tc, "type"), *fn = srv_json_field(tc, "function");
  const cJSON *fname = fn ? srv_json_field(fn, "name") : NULL;
  if (!cJSON_IsObject(tc) || !cJSON_IsString(type) || strcmp(type->valuestring, "function") != 0 ||
      !cJSON_IsString(fname))
    return BAD(e, "tool_choice",
               "'tool_choice' must be a string or {\"type\": \"function\", \"function\": "
               "{\"name\": ...}}");
  *mode = SRV_TOOLS_NAMED;
  *name = fname->valuestring;
  return true;
}

/* response_format: text, json_object, or json_schema {name, schema, strict}. */
static bool parse_response_format(const cJSON *root, srv_request *r, srv_error *e) {
  const cJSON *rf = srv_json_field(root, "response_format");
  if (!rf) return true;
  const cJSON *type = srv_json_field(rf, "type");
  if (!cJSON_IsObject(rf) || !cJSON_IsString(type))
    return BAD(e, "response_format", "'response_format' must be an object with a 'type'");
  if (strcmp(type->valuestring, "text") == 0) return true;
  if (strcmp(type->valuestring, "json_object") == 0)
    return srv_request_json(NULL, "response_format", r, e);
  if (strcmp(type->valuestring, "json_schema") == 0) {
    const cJSON *js = srv_json_field(rf, "json_schema");
    if (!cJSON_IsObject(js))
      return BAD(e, "response_format.json_schema",
                 "'response_format.json_schema' must be an object");
    const cJSON *schema = srv_json_field(js, "schema");
    if (schema && !cJSON_IsObject(schema))
      return BAD(e, "response_format.json_schema.schema",
                 "'response_format.json_schema.schema' "
                 "must be a JSON schema object");
    return srv_request_json(schema ? schema : NULL, "response_format.json_schema.schema", r, e);
  }
  return BAD(e, "response_format.type",
             "'response_format.type' is '%s'; it must be text, json_object or json_schema",
             type->valuestring);
}

static bool parse_chat(const srv_model_info *mi, const cJSON *root, srv_request *r, srv_error *e) {
  const cJSON *tools = srv_json_field(root, "tools");
  if (tools && !srv_tools_check(tools, "tools", e)) return false;
  if (tools && cJSON_GetArraySize(tools) == 0) tools = NULL;
  srv_tool_mode mode;
  const char *name;
  if (!parse_tool_choice(root, &mode, &name, e)) return false;
  bool parallel = true;
  if (!srv_json_bool(root, "parallel_tool_calls", &parallel, e)) return false;
  const cJSON *kwargs = srv_json_field(root, "chat_template_kwargs");
  if (kwargs && !cJSON_IsObject(kwargs))
    return BAD(e, "chat_template_kwargs", "'chat_template_kwargs' must be an object");
  /* reasoning_effort reaches templates that read it (gpt-oss) */
  cJSON *extra = kwargs ? cJSON_Duplicate(kwargs, true) : NULL;
  const cJSON *effort = srv_json_field(root, "reasoning_effort");
  if (effort) {
    if (!cJSON_IsString(effort)) {
      cJSON_Delete(extra);
      return BAD(e, "reasoning_effort", "'reasoning_effort' must be a string");
    }
    if (!extra) extra = cJSON_CreateObject();
    if (extra && !cJSON_GetObjectItemCaseSensitive(extra, "reasoning_effort"))
      cJSON_AddStringToObject(extra, "reasoning_effort", effort->valuestring);
  }
  char *prompt = NULL;
  bool ok =
      srv_chat_render(mi, srv_json_field(root, "messages"), mode == SRV_TOOLS_NONE ? NULL : tools,
                      true, extra, &prompt, &r->in_reasoning, e);
  cJSON_Delete(extra);
  if (ok) ok = srv_chat_tokenize(mi, prompt, "messages", r, e);
  free(prompt);
  if (!ok) return false;
  if (!srv_tools_apply(mi, tools, mode, name, parallel, r, e)) return false;
  if (!parse_response_format(root, r, e)) return false;
  const cJSON *g = srv_json_field(root, "grammar");
  if (g && !cJSON_IsString(g)) return BAD(e, "grammar", "'grammar' must be a string (GBNF)");
  if (g && !srv_request_grammar(g->valuestring, "grammar", r, e)) return false;

  /* logprobs: true and top_logprobs: 0..20 */
  if (!srv_json_bool(root, "logprobs", &r->logprobs, e)) return false;
  int64_t top = 0;
  if (!srv_json_int(root, "top_logprobs", 0, SRV_MAX_TOP_LOGPROBS, &top, e)) return false;
  if (srv_json_field(root, "top_logprobs") && !r->logprobs)
    return BAD(e, "top_logprobs", "'top_logprobs' needs 'logprobs' set to true");
  r->top_logprobs = (int)top;
  return true;
}

/* One prompt: a string or an array of token ids, into ids / *n. */
static bool one_prompt(const srv_model_info *mi, const cJSON *p, int32_t **ids, int32_t *n,
                       srv_error *e) {
  if (cJSON_IsString(p)) {
    srv_request tmp = {0};
    if (!tokenize_prompt(mi, p->valuestring, strlen(p->valuestring), "prompt", &tmp, e)) {
      free(tmp.prompt);
      return false;
    }
    *ids = tmp.prompt;
    *n = tmp.n_prompt;
    return true;
  }
  if (!cJSON_IsArray(p))
    return BAD(e, "prompt", "'prompt' must be a string or an array of token ids");
  int k = cJSON_GetArraySize(p);
  *ids = malloc((size_t)(k > 0 ? k : 1) * sizeof(int32_t));
  *n = 0;
  if (!*ids) return srv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
  const cJSON *t;
  cJSON_ArrayForEach(t, p) {
    if (!cJSON_IsNumber(t) || t->valuedouble != floor(t->valuedouble))
      return BAD(e, "prompt", "'prompt' must be a string or an array of token ids");
    if (t->valuedouble < 0 || t->valuedouble >= mi->n_vocab)
      return BAD(e, "prompt", "token id %.0f is outside the vocabulary [0, %d)", t->valuedouble,
                 mi->n_vocab);
    (*ids)[(*n)++] = (int32_t)t->valuedouble;
  }
  return true;
}

static bool parse_completion(const srv_model_info *mi, const cJSON *root, srv_request *r,
                             srv_error *e) {
  const cJSON *p = srv_json_field(root, "prompt");
  if (!p) return BAD(e, "prompt", "'prompt' is required");
  /* a list of prompts (strings or token arrays): each one gets n choices */
  if (cJSON_IsArray(p) && p->child && (cJSON_IsString(p->child) || cJSON_IsArray(p->child))) {
    int n = cJSON_GetArraySize(p);
    if (n > SRV_MAX_CHOICES)
      return BAD(e, "prompt", "'prompt' has %d prompts, at most %d are allowed", n,
                 SRV_MAX_CHOICES);
    r->prompts2 = calloc((size_t)n, sizeof *r->prompts2);
    r->n_prompts2 = calloc((size_t)n, sizeof *r->n_prompts2);
    if (!r->prompts2 || !r->n_prompts2)
      return srv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    const cJSON *q;
    bool first = true;
    cJSON_ArrayForEach(q, p) {
      if (!cJSON_IsString(q) && !cJSON_IsArray(q))
        return BAD(e, "prompt", "'prompt' must be a string, token ids, or a list of those");
      if (first) {
        if (!one_prompt(mi, q, &r->prompt, &r->n_prompt, e)) return false;
        first = false;
        continue;
      }
      int k = r->n_more++;
      if (!one_prompt(mi, q, &r->prompts2[k], &r->n_prompts2[k], e)) return false;
      if (r->n_prompts2[k] == 0) return BAD(e, "prompt", "prompt %d is empty", k + 1);
      if (r->n_prompts2[k] >= mi->n_ctx)
        return srv_fail(e, 400, "invalid_request_error", "context_length_exceeded", "prompt",
                        "prompt %d has %d tokens but the context holds %d", k + 1, r->n_prompts2[k],
                        mi->n_ctx);
    }
  } else if (!one_prompt(mi, p, &r->prompt, &r->n_prompt, e)) {
    return false;
  }
  if (!parse_response_format(root, r, e)) return false;
  const cJSON *g = srv_json_field(root, "grammar");
  if (g && !cJSON_IsString(g)) return BAD(e, "grammar", "'grammar' must be a string (GBNF)");
  if (g && !srv_request_grammar(g->valuestring, "grammar", r, e)) return false;
  int64_t lp = -1;
  if (!srv_json_int(root, "logprobs", 0, SRV_MAX_TOP_LOGPROBS, &lp, e)) return false;
  r->logprobs = lp >= 0;
  r->top_logprobs = lp > 0 ? (int)lp : 0;
  bool echo = false;
  if (!srv_json_bool(root, "echo", &echo, e)) return false;
  if (echo) return BAD(e, "echo", "'echo' is not supported");
  int64_t best_of = 1;
  if (!srv_json_int(root, "best_of", 1, 1e9, &best_of, e)) return false;
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
      ok = srv_json_int(root, "max_completion_tokens", 1, 1e15, &max_tokens, err);
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
  return srv_json_print(root);
}

static cJSON *token_json(const srv_model_info *mi, int32_t id, char *piece, size_t *len) {
  size_t n = pasada_token_to_piece(mi->tok, id, true, piece, PASADA_DETOK_PIECE_MAX);
  if (n > PASADA_DETOK_PIECE_MAX) n = PASADA_DETOK_PIECE_MAX;
  *len = n;
  return srv_json_text(piece, n);
}

static cJSON *bytes_json(const char *piece, size_t n) {
  cJSON *a = cJSON_CreateArray();
  for (size_t i = 0; i < n; i++)
    cJSON_AddItemToArray(a, cJSON_CreateNumber((unsigned char)piece[i]));
  return a;
}

cJSON *srv_logprobs_json(const srv_model_info *mi, const srv_token_logprob *lp, size_t n,
                        bool bytes) {
  cJSON *content = cJSON_CreateArray();
  char piece[PASADA_DETOK_PIECE_MAX];
  size_t len;
  for (size_t i = 0; i < n; i++) {
    cJSON *t = cJSON_CreateObject();
    cJSON_AddItemToObject(t, "token", token_json(mi, lp[i].token, piece, &len));
    cJSON_AddNumberToObject(t, "logprob", lp[i].logprob);
    if (bytes) cJSON_AddItemToObject(t, "bytes", bytes_json(piece, len));
    cJSON *top = cJSON_AddArrayToObject(t, "top_logprobs");
    for (int k = 0; k < lp[i].n_top; k++) {
      cJSON *o = cJSON_CreateObject();
      cJSON_AddItemToObject(o, "token", token_json(mi, lp[i].top_token[k], piece, &len));
      cJSON_AddNumberToObject(o, "logprob", lp[i].top_logprob[k]);
      if (bytes) cJSON_AddItemToObject(o, "bytes", bytes_json(piece, len));
      cJSON_AddItemToArray(top, o);
    }
    cJSON_AddItemToArray(content, t);
  }
  return content;
}

/* chat: {"content": [{token, logprob, bytes, top_logprobs: [...]}, ...]} */
static cJSON *chat_logprobs(const srv_model_info *mi, const srv_token_logprob *lp, size_t n) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddItemToObject(root, "content", srv_logprobs_json(mi, lp, n, true));
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

/* The usage of a request: every choice's generated tokens, the prompt
 * tokens of each of its prompts once (choices of one prompt share it). */
static cJSON *usage_json(srv_job *j) {
  int n = j->choices ? j->n_choices : 1, per = j->req.n > 1 ? j->req.n : 1;
  int64_t prompt = 0, generated = 0, cached = 0;
  for (int k = 0; k < n; k++) {
    srv_job *c = j->choices ? j->choices[k] : j;
    pthread_mutex_lock(&c->mu);
    if (k % per == 0) prompt += c->req.n_prompt, cached += c->n_cached;
    generated += c->n_generated;
    pthread_mutex_unlock(&c->mu);
  }
  cJSON *u = cJSON_CreateObject();
  cJSON_AddNumberToObject(u, "prompt_tokens", (double)prompt);
  cJSON_AddNumberToObject(u, "completion_tokens", (double)generated);
  cJSON_AddNumberToObject(u, "total_tokens", (double)(prompt + generated));
  cJSON *d = cJSON_AddObjectToObject(u, "prompt_tokens_details");
  cJSON_AddNumberToObject(d, "cached_tokens", (double)cached);
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

/* The parse options of a job's output; ids derive from the job's id, so
 * every parse of one job names its calls alike. */
static srv_out_opts out_opts(const srv_job *j, bool final) {
  unsigned h = 2166136261u;
  for (const char *p = j->id; *p; p++) h = (h ^ (unsigned char)*p) * 16777619u;
  return (srv_out_opts){.final = final,
                        .tools = j->req.tools,
                        .in_reasoning = j->req.in_reasoning,
                        .id_seed = h,
                        .tool_defs = j->req.tool_defs};
}

static cJSON *tool_call_json(const srv_tool_call *tc, int index, bool with_index) {
  cJSON *o = cJSON_CreateObject();
  if (with_index) cJSON_AddNumberToObject(o, "index", index);
  cJSON_AddStringToObject(o, "id", tc->id);
  cJSON_AddStringToObject(o, "type", "function");
  cJSON *f = cJSON_AddObjectToObject(o, "function");
  cJSON_AddItemToObject(f, "name", srv_json_text(tc->name, strlen(tc->name)));
  cJSON_AddItemToObject(f, "arguments", srv_json_text(tc->arguments, strlen(tc->arguments)));
  return o;
}

/* finish_reason: "tool_calls" when the model ended its turn with calls. */
static const char *finish_reason(srv_finish f, int n_calls) {
  return f == SRV_FINISH_STOP && n_calls > 0 ? "tool_calls" : srv_finish_name(f);
}

/* One finished choice's object (index, message or text, logprobs,
 * finish_reason); NULL when out of memory. */
static cJSON *choice_json(const srv_model_info *mi, srv_job *j) {
  pthread_mutex_lock(&j->mu); /* finished: the scheduler writes no more */
  bool chat = j->req.kind == SRV_CHAT;
  cJSON *c = cJSON_CreateObject();
  cJSON_AddNumberToObject(c, "index", j->choice);
  int n_calls = 0;
  if (chat) {
    srv_output o = {0};
    srv_out_opts opts = out_opts(j, true);
    if (!srv_output_parse(&mi->style, j->text ? j->text : "", j->n_text, &opts, &o)) {
      pthread_mutex_unlock(&j->mu);
      cJSON_Delete(c);
      return NULL;
    }
    cJSON *msg = cJSON_AddObjectToObject(c, "message");
    cJSON_AddStringToObject(msg, "role", "assistant");
    if (o.n_content || !o.n_calls)
      cJSON_AddItemToObject(msg, "content", srv_json_text(o.content, o.n_content));
    else
      cJSON_AddNullToObject(msg, "content");
    if (o.n_reasoning)
      cJSON_AddItemToObject(msg, "reasoning_content", srv_json_text(o.reasoning, o.n_reasoning));
    if (o.n_calls) {
      cJSON *calls = cJSON_AddArrayToObject(msg, "tool_calls");
      for (int k = 0; k < o.n_calls; k++)
        cJSON_AddItemToArray(calls, tool_call_json(&o.calls[k], k, false));
    }
    cJSON_AddNullToObject(msg, "refusal");
    n_calls = o.n_calls;
    srv_output_free(&o);
  } else {
    cJSON_AddItemToObject(c, "text", srv_json_text(j->text, j->n_text));
  }
  if (!j->req.logprobs) {
    cJSON_AddNullToObject(c, "logprobs");
  } else if (chat) {
    cJSON_AddItemToObject(c, "logprobs", chat_logprobs(mi, j->lp, j->n_lp));
  } else {
    size_t off = 0;
    cJSON_AddItemToObject(c, "logprobs", completion_logprobs(mi, j->lp, j->n_lp, &off));
  }
  cJSON_AddStringToObject(c, "finish_reason", finish_reason(j->finish, n_calls));
  pthread_mutex_unlock(&j->mu);
  return c;
}

char *srv_openai_response(const srv_model_info *mi, srv_job *j) {
  bool chat = j->req.kind == SRV_CHAT;
  cJSON *root = envelope(j, chat ? "chat.completion" : "text_completion");
  cJSON *choices = cJSON_AddArrayToObject(root, "choices");
  int n = j->choices ? j->n_choices : 1;
  for (int k = 0; k < n; k++) {
    cJSON *c = choice_json(mi, j->choices ? j->choices[k] : j);
    if (!c) {
      cJSON_Delete(root);
      return NULL;
    }
    cJSON_AddItemToArray(choices, c);
  }
  cJSON_AddItemToObject(root, "usage", usage_json(j));
  return srv_json_print(root);
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
  return srv_json_print(root);
}

/* ---- streaming ---- */

static void sse(srv_buf *out, cJSON *root) {
  char *s = srv_json_print(root);
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
  cJSON_AddNumberToObject(*choice, "index", j->choice);
  cJSON_AddItemToArray(choices, *choice);
  return root;
}

/* Renders one choice's new events; at its finish, the final chunk (or the
 * error event, *error set). Returns true once the choice is complete. */
static bool stream_choice(const srv_model_info *mi, srv_job *j, srv_stream *st, srv_buf *out,
                          bool *error) {
  if (st->sent_end) return true;
  bool chat = j->req.kind == SRV_CHAT;
  srv_output o = {0};
  bool parsed = false;
  pthread_mutex_lock(&j->mu);
  size_t n_text = j->n_text - st->text_off, n_lp = j->n_lp - st->lp_off;
  char *text = NULL;
  srv_finish finish = j->finish;
  if (chat) {
    /* the whole output is parsed again: content, reasoning and calls grow */
    srv_out_opts opts = out_opts(j, finish != SRV_PENDING);
    parsed = srv_output_parse(&mi->style, j->text ? j->text : "", j->n_text, &opts, &o);
  } else if (n_text) {
    text = srv_utf8_sanitize(j->text + st->text_off, n_text);
  }
  srv_token_logprob *lp = NULL;
  if (n_lp && (lp = malloc(n_lp * sizeof *lp))) memcpy(lp, j->lp + st->lp_off, n_lp * sizeof *lp);
  st->text_off = j->n_text;
  st->lp_off = j->n_lp;
  srv_error err = j->error;
  pthread_mutex_unlock(&j->mu);
  if (chat && !parsed) {
    out->failed = true;
    free(lp);
    return true;
  }

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
  if (chat) {
    size_t nr = o.n_reasoning > st->reasoning_off ? o.n_reasoning - st->reasoning_off : 0;
    size_t nc = o.n_content > st->content_off ? o.n_content - st->content_off : 0;
    if (nr) {
      cJSON *root = chunk(j, &c);
      cJSON *delta = cJSON_AddObjectToObject(c, "delta");
      cJSON_AddItemToObject(delta, "reasoning_content",
                            srv_json_text(o.reasoning + st->reasoning_off, nr));
      cJSON_AddNullToObject(c, "logprobs");
      cJSON_AddNullToObject(c, "finish_reason");
      sse(out, root);
      st->reasoning_off = o.n_reasoning;
    }
    if (nc || lp) {
      cJSON *root = chunk(j, &c);
      cJSON *delta = cJSON_AddObjectToObject(c, "delta");
      cJSON_AddItemToObject(delta, "content", srv_json_text(o.content + st->content_off, nc));
      if (lp)
        cJSON_AddItemToObject(c, "logprobs", chat_logprobs(mi, lp, n_lp));
      else
        cJSON_AddNullToObject(c, "logprobs");
      cJSON_AddNullToObject(c, "finish_reason");
      sse(out, root);
      st->content_off += nc;
    }
    /* each call goes out whole once it is complete */
    for (; st->calls_sent < o.n_calls; st->calls_sent++) {
      cJSON *root = chunk(j, &c);
      cJSON *delta = cJSON_AddObjectToObject(c, "delta");
      cJSON *calls = cJSON_AddArrayToObject(delta, "tool_calls");
      cJSON_AddItemToArray(calls, tool_call_json(&o.calls[st->calls_sent], st->calls_sent, true));
      cJSON_AddNullToObject(c, "logprobs");
      cJSON_AddNullToObject(c, "finish_reason");
      sse(out, root);
    }
  } else if (text || lp) {
    cJSON *root = chunk(j, &c);
    cJSON_AddStringToObject(c, "text", text ? text : "");
    if (lp)
      cJSON_AddItemToObject(c, "logprobs",
                            completion_logprobs(mi, lp, n_lp, &st->text_offset_total));
    else
      cJSON_AddNullToObject(c, "logprobs");
    cJSON_AddNullToObject(c, "finish_reason");
    sse(out, root);
  }
  int n_calls = o.n_calls;
  srv_output_free(&o);
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
    cJSON_AddStringToObject(c, "finish_reason", finish_reason(finish, n_calls));
    sse(out, root);
  }
  if (finish == SRV_FINISH_ERROR) *error = true;
  st->sent_end = true;
  return true;
}

/* The end of a stream: the usage chunk when asked for, then [DONE]. */
static void stream_end(srv_job *j, bool error, srv_buf *out) {
  if (!error && j->req.include_usage) {
    cJSON *u = envelope(j, j->req.kind == SRV_CHAT ? "chat.completion.chunk" : "text_completion");
    cJSON_AddArrayToObject(u, "choices");
    cJSON_AddItemToObject(u, "usage", usage_json(j));
    sse(out, u);
  }
  srv_buf_append(out, "data: [DONE]\n\n", 14);
}

bool srv_stream_next(const srv_model_info *mi, srv_job *j, srv_stream *st, srv_buf *out) {
  if (st->sent_end) return true;
  bool error = false;
  if (!stream_choice(mi, j, st, out, &error)) return false;
  stream_end(j, error, out);
  return true;
}

bool srv_stream_group(const srv_model_info *mi, srv_job *j, srv_stream *sts, srv_buf *out) {
  bool all = true, error = false;
  for (int k = 0; k < j->n_choices; k++) {
    if (sts[k].sent_end) continue;
    all &= stream_choice(mi, j->choices[k], &sts[k], out, &error);
    if (error) break;
  }
  if (!all && !error) return false;
  for (int k = 0; k < j->n_choices; k++) sts[k].sent_end = true;
  stream_end(j, error, out);
  return true;
}
