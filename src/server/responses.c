/* responses.c: a Responses API request into srv_request (see
 * responses.h): the input items become OpenAI-style messages (message items
 * by role, function_call items assistant tool_calls, function_call_output
 * items tool messages, reasoning items reasoning_content), after the stored
 * conversation of previous_response_id and the instructions as the system
 * message; function tools, tool_choice, text.format and the sampling fields
 * are checked here; the response object is echo'd from what was asked. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/chat.h"
#include "server/request.h"
#include "server/responses.h"
#include "server/json_util.h"

#define BAD(e, param, ...) srv_fail(e, 400, "invalid_request_error", NULL, param, __VA_ARGS__)

static bool oom(srv_error *e) {
  return srv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
}

/* ---- input items ---- */

/* content: a string or an array of input_text / output_text parts. */
static bool content_text(const cJSON *content, const char *param, srv_buf *out, srv_error *e) {
  srv_buf_append(out, "", 0);
  if (cJSON_IsString(content)) {
    srv_buf_append(out, content->valuestring, strlen(content->valuestring));
    return true;
  }
  if (!cJSON_IsArray(content))
    return BAD(e, param, "'%s' must be a string or an array of content parts", param);
  const cJSON *part;
  int k = 0;
  char p[96];
  cJSON_ArrayForEach(part, content) {
    snprintf(p, sizeof p, "%s[%d]", param, k++);
    const cJSON *type = srv_json_field(part, "type"), *text = srv_json_field(part, "text");
    if (!cJSON_IsObject(part) || !cJSON_IsString(type))
      return BAD(e, p, "'%s' must be an object with a 'type'", p);
    const char *t = type->valuestring;
    if (strcmp(t, "refusal") == 0)
      text = srv_json_field(part, "refusal");
    else if (strcmp(t, "input_text") != 0 && strcmp(t, "output_text") != 0 &&
             strcmp(t, "text") != 0)
      return BAD(e, p, "content parts of type '%s' are not supported (input_text, output_text)", t);
    if (!cJSON_IsString(text)) return BAD(e, p, "'%s' has no text", p);
    srv_buf_append(out, text->valuestring, strlen(text->valuestring));
  }
  return true;
}

static cJSON *add_message(cJSON *msgs, const char *role, const char *content) {
  cJSON *m = cJSON_CreateObject();
  cJSON_AddStringToObject(m, "role", role);
  cJSON_AddStringToObject(m, "content", content ? content : "");
  cJSON_AddItemToArray(msgs, m);
  return m;
}

typedef struct {
  cJSON *msgs;
  cJSON *last;       /* the latest assistant message (tool outputs answer its calls) */
  srv_buf reasoning; /* of a reasoning item, for the next assistant message */
  bool calls_open;   /* the last message is `last`, which more function calls join */
} input_state;

static cJSON *assistant(input_state *s, const char *content) {
  cJSON *m = s->last = add_message(s->msgs, "assistant", content);
  if (s->reasoning.n) {
    cJSON_AddStringToObject(m, "reasoning_content", s->reasoning.p);
    srv_buf_consume(&s->reasoning, s->reasoning.n);
  }
  return m;
}

static bool message_item(input_state *s, const cJSON *it, const char *p, srv_error *e) {
  char q[96];
  const cJSON *role = srv_json_field(it, "role"), *content = srv_json_field(it, "content");
  snprintf(q, sizeof q, "%s.role", p);
  if (!cJSON_IsString(role)) return BAD(e, q, "'%s' must be a string", q);
  const char *r = role->valuestring;
  if (strcmp(r, "developer") == 0) r = "system";
  if (strcmp(r, "system") != 0 && strcmp(r, "user") != 0 && strcmp(r, "assistant") != 0)
    return BAD(e, q, "role '%s' is not supported (user, assistant, system, developer)", r);
  snprintf(q, sizeof q, "%s.content", p);
  if (!content) return BAD(e, q, "'%s' is required", q);
  srv_buf text = {0};
  bool ok = content_text(content, q, &text, e);
  if (ok && text.failed) ok = oom(e);
  if (ok && r[0] == 'a')
    assistant(s, text.p);
  else if (ok)
    add_message(s->msgs, r, text.p);
  s->calls_open = ok && r[0] == 'a';
  srv_buf_free(&text);
  return ok;
}

static bool function_call_item(input_state *s, const cJSON *it, const char *p, srv_error *e) {
  const cJSON *call_id = srv_json_field(it, "call_id"), *name = srv_json_field(it, "name"),
              *args = srv_json_field(it, "arguments");
  if (!cJSON_IsString(call_id) || !call_id->valuestring[0])
    return BAD(e, p, "'%s.call_id' must be a non-empty string", p);
  if (!cJSON_IsString(name) || !name->valuestring[0])
    return BAD(e, p, "'%s.name' must be a non-empty string", p);
  if (args && !cJSON_IsString(args)) return BAD(e, p, "'%s.arguments' must be a JSON string", p);
  cJSON *m = s->calls_open ? s->last : assistant(s, "");
  s->calls_open = true;
  cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
  if (!calls) calls = cJSON_AddArrayToObject(m, "tool_calls");
  cJSON *c = cJSON_CreateObject();
  cJSON_AddStringToObject(c, "id", call_id->valuestring);
  cJSON_AddStringToObject(c, "type", "function");
  cJSON *fn = cJSON_AddObjectToObject(c, "function");
  cJSON_AddStringToObject(fn, "name", name->valuestring);
  cJSON_AddStringToObject(fn, "arguments", args ? args->valuestring : "{}");
  cJSON_AddItemToArray(calls, c);
  return true;
}

static bool call_output_item(input_state *s, const cJSON *it, const char *p, srv_error *e) {
  char q[96];
  const cJSON *call_id = srv_json_field(it, "call_id"), *output = srv_json_field(it, "output");
  if (!cJSON_IsString(call_id) || !call_id->valuestring[0])
    return BAD(e, p, "'%s.call_id' must be a non-empty string", p);
  snprintf(q, sizeof q, "%s.output", p);
  if (!output) return BAD(e, q, "'%s' is required", q);
  srv_buf text = {0};
  bool ok = content_text(output, q, &text, e);
  if (ok && text.failed) ok = oom(e);
  if (ok) {
    cJSON *m = add_message(s->msgs, "tool", text.p);
    cJSON_AddStringToObject(m, "tool_call_id", call_id->valuestring);
    const char *name = srv_call_name(s->last, call_id->valuestring);
    if (name) cJSON_AddStringToObject(m, "name", name);
  }
  s->calls_open = false;
  srv_buf_free(&text);
  return ok;
}

/* reasoning: {summary: [{text}], content: [{text}]}: the content if any,
 * else the summary, for the next assistant message. */
static void reasoning_item(input_state *s, const cJSON *it) {
  const cJSON *parts = srv_json_field(it, "content");
  if (!cJSON_IsArray(parts) || cJSON_GetArraySize(parts) == 0)
    parts = srv_json_field(it, "summary");
  const cJSON *part;
  cJSON_ArrayForEach(part, parts) {
    const cJSON *t = srv_json_field(part, "text");
    if (cJSON_IsString(t)) srv_buf_append(&s->reasoning, t->valuestring, strlen(t->valuestring));
  }
  s->calls_open = false;
}

static bool convert_input(const cJSON *input, cJSON *msgs, srv_error *e) {
  if (cJSON_IsString(input)) {
    add_message(msgs, "user", input->valuestring);
    return true;
  }
  if (!cJSON_IsArray(input))
    return BAD(e, "input", "'input' must be a string or an array of input items");
  /* a stored conversation ends with the previous response's output */
  const cJSON *tail = msgs->child ? msgs->child->prev : NULL;
  const cJSON *role = srv_json_field(tail, "role");
  input_state s = {.msgs = msgs};
  if (cJSON_IsString(role) && strcmp(role->valuestring, "assistant") == 0) s.last = (cJSON *)tail;
  bool ok = true;
  int i = 0;
  const cJSON *it;
  cJSON_ArrayForEach(it, input) {
    char p[64];
    snprintf(p, sizeof p, "input[%d]", i++);
    if (!cJSON_IsObject(it)) {
      ok = BAD(e, p, "'%s' must be an object", p);
      break;
    }
    const cJSON *type = srv_json_field(it, "type");
    if (type && !cJSON_IsString(type)) {
      ok = BAD(e, p, "'%s.type' must be a string", p);
      break;
    }
    const char *t = type ? type->valuestring : "message";
    if (strcmp(t, "message") == 0)
      ok = message_item(&s, it, p, e);
    else if (strcmp(t, "function_call") == 0)
      ok = function_call_item(&s, it, p, e);
    else if (strcmp(t, "function_call_output") == 0)
      ok = call_output_item(&s, it, p, e);
    else if (strcmp(t, "reasoning") == 0)
      reasoning_item(&s, it);
    else
      ok = BAD(e, p,
               "input items of type '%s' are not supported (message, function_call, "
               "function_call_output, reasoning)",
               t);
    if (!ok) break;
  }
  if (ok && s.reasoning.failed) ok = oom(e);
  srv_buf_free(&s.reasoning);
  return ok;
}

/* ---- tools ---- */

/* tools: [{type: "function", name, description, parameters, strict}] into
 * the chat form; the response echoes the Responses form. */
static bool convert_tools(const cJSON *tools, cJSON **out, srv_error *e) {
  *out = NULL;
  if (!tools) return true;
  if (!cJSON_IsArray(tools)) return BAD(e, "tools", "'tools' must be an array");
  if (cJSON_GetArraySize(tools) == 0) return true;
  cJSON *chat = cJSON_CreateArray();
  *out = chat;
  int i = 0;
  const cJSON *t;
  cJSON_ArrayForEach(t, tools) {
    char p[64];
    snprintf(p, sizeof p, "tools[%d]", i++);
    const cJSON *type = srv_json_field(t, "type");
    if (!cJSON_IsObject(t) || !cJSON_IsString(type))
      return BAD(e, p, "'%s' must be an object with a 'type'", p);
    if (strcmp(type->valuestring, "function") != 0)
      return BAD(e, p, "tools of type '%s' are not supported (only 'function')", type->valuestring);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", "function");
    cJSON *fn = cJSON_CreateObject();
    static const char *const keys[] = {"name", "description", "parameters", "strict"};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
      const cJSON *v = srv_json_field(t, keys[k]);
      if (v) cJSON_AddItemToObject(fn, keys[k], cJSON_Duplicate(v, true));
    }
    cJSON_AddItemToObject(o, "function", fn);
    cJSON_AddItemToArray(chat, o);
  }
  return srv_tools_check(chat, "tools", e);
}

/* tool_choice: "auto" | "none" | "required" | {type: "function", name}. */
static bool parse_tool_choice(const cJSON *tc, srv_tool_mode *mode, const char **name,
                              srv_error *e) {
  *mode = SRV_TOOLS_AUTO;
  *name = NULL;
  if (!tc) return true;
  if (cJSON_IsString(tc)) {
    const char *s = tc->valuestring;
    if (strcmp(s, "auto") == 0) return true;
    if (strcmp(s, "none") == 0)
      *mode = SRV_TOOLS_NONE;
    else if (strcmp(s, "required") == 0)
      *mode = SRV_TOOLS_REQUIRED;
    else
      return BAD(e, "tool_choice",
                 "'tool_choice' is '%s'; it must be auto, none, required or "
                 "a function",
                 s);
    return true;
  }
  const cJSON *type = srv_json_field(tc, "type"), *fname = srv_json_field(tc, "name");
  if (!cJSON_IsObject(tc) || !cJSON_IsString(type))
    return BAD(e, "tool_choice", "'tool_choice' must be a string or an object with a 'type'");
  if (strcmp(type->valuestring, "function") != 0)
    return BAD(e, "tool_choice", "'tool_choice' of type '%s' is not supported (only 'function')",
               type->valuestring);
  if (!cJSON_IsString(fname))
    return BAD(e, "tool_choice.name", "'tool_choice.name' must be a string");
  *mode = SRV_TOOLS_NAMED;
  *name = fname->valuestring;
  return true;
}

/* text.format: {type: text} | {type: json_object} | {type: json_schema, name, schema, strict}. */
static bool parse_text_format(const cJSON *root, srv_request *r, srv_error *e) {
  const cJSON *text = srv_json_field(root, "text");
  if (!text) return true;
  if (!cJSON_IsObject(text)) return BAD(e, "text", "'text' must be an object");
  const cJSON *f = srv_json_field(text, "format");
  if (!f) return true;
  const cJSON *type = srv_json_field(f, "type");
  if (!cJSON_IsObject(f) || !cJSON_IsString(type))
    return BAD(e, "text.format", "'text.format' must be an object with a 'type'");
  const char *t = type->valuestring;
  if (strcmp(t, "text") == 0) return true;
  if (strcmp(t, "json_object") == 0) return srv_request_json(NULL, "text.format", r, e);
  if (strcmp(t, "json_schema") == 0) {
    const cJSON *schema = srv_json_field(f, "schema");
    if (!cJSON_IsObject(schema))
      return BAD(e, "text.format.schema", "'text.format.schema' must be a JSON schema object");
    return srv_request_json(schema, "text.format.schema", r, e);
  }
  return BAD(e, "text.format.type",
             "'text.format.type' is '%s'; it must be text, json_object or json_schema", t);
}

/* ---- the request ---- */

static const char *const refused[] = {"background", "conversation", "prompt"};

/* `include` values: those naming items of the built-in tools and input
 * images can match nothing (such tools and inputs are refused), so they
 * are accepted; message.output_text.logprobs is honoured; encrypted
 * reasoning is refused. */
static const char *const include_inert[] = {"file_search_call.results",
                                            "web_search_call.results",
                                            "web_search_call.action.sources",
                                            "code_interpreter_call.outputs",
                                            "computer_call_output.output.image_url",
                                            "message.input_image.image_url"};

/* The request fields besides sampling, input and tools: each honoured
 * (they change nothing pasada does), or refused naming it. */
static bool parse_other_fields(const cJSON *root, srv_request *r, srv_error *e) {
  const cJSON *inc = srv_json_field(root, "include");
  if (inc && !cJSON_IsNull(inc)) {
    if (!cJSON_IsArray(inc)) return BAD(e, "include", "'include' must be an array of strings");
    for (const cJSON *v = inc->child; v; v = v->next) {
      if (!cJSON_IsString(v)) return BAD(e, "include", "'include' must be an array of strings");
      bool inert = false;
      for (size_t i = 0; i < sizeof include_inert / sizeof include_inert[0]; i++)
        inert |= strcmp(v->valuestring, include_inert[i]) == 0;
      if (inert) continue;
      if (strcmp(v->valuestring, "message.output_text.logprobs") == 0) {
        r->logprobs = true;
        continue;
      }
      if (strcmp(v->valuestring, "reasoning.encrypted_content") == 0)
        return BAD(e, "include",
                   "'include': 'reasoning.encrypted_content' is not supported (reasoning is "
                   "returned as plain text items)");
      return BAD(e, "include", "'include' has an unknown value '%.80s'", v->valuestring);
    }
  }
  int64_t top = 0, max_calls = 1;
  if (!srv_json_int(root, "top_logprobs", 0, 20, &top, e) ||
      !srv_json_int(root, "max_tool_calls", 1, 1e9, &max_calls, e))
    return false;
  /* top_logprobs above 0 asks for logprobs as the include value does */
  r->top_logprobs = (int)top;
  if (top > 0) r->logprobs = true;
  const cJSON *trunc = srv_json_field(root, "truncation");
  if (trunc && !cJSON_IsNull(trunc) &&
      !(cJSON_IsString(trunc) && strcmp(trunc->valuestring, "disabled") == 0))
    return BAD(e, "truncation",
               "'truncation' must be 'disabled' (an input longer than the context is an error, "
               "never cut)");
  const cJSON *tier = srv_json_field(root, "service_tier");
  if (tier && !cJSON_IsNull(tier)) {
    static const char *const tiers[] = {"auto", "default", "flex", "priority", "scale"};
    bool ok = false;
    for (size_t i = 0; cJSON_IsString(tier) && i < sizeof tiers / sizeof tiers[0]; i++)
      ok |= strcmp(tier->valuestring, tiers[i]) == 0;
    if (!ok)
      return BAD(e, "service_tier",
                 "'service_tier' must be one of auto, default, flex, priority, scale");
  }
  static const char *const strings[] = {"prompt_cache_key", "safety_identifier", "user"};
  for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++) {
    const cJSON *v = srv_json_field(root, strings[i]);
    if (v && !cJSON_IsNull(v) && !cJSON_IsString(v))
      return BAD(e, strings[i], "'%s' must be a string", strings[i]);
  }
  const cJSON *so = srv_json_field(root, "stream_options");
  if (so && !cJSON_IsNull(so)) {
    if (!cJSON_IsObject(so)) return BAD(e, "stream_options", "'stream_options' must be an object");
    for (const cJSON *f = so->child; f; f = f->next)
      if (strcmp(f->string, "include_obfuscation") != 0 || !cJSON_IsBool(f))
        return BAD(e, "stream_options",
                   "'stream_options' takes only 'include_obfuscation' (a boolean)");
  }
  return true;
}

static bool parse_sampling(const cJSON *root, srv_request *r, int64_t *max_tokens, srv_error *e) {
  pasada_sampler_params *sp = &r->sampling;
  *sp = pasada_sampler_default_params();
  sp->temp = 1.0f;
  sp->top_p = 1.0f;
  sp->top_k = 0;
  sp->min_p = 0.0f;
  sp->repeat_last_n = -1;
  if (!srv_json_float(root, "temperature", 0, 2, &sp->temp, e) ||
      !srv_json_float(root, "top_p", 0, 1, &sp->top_p, e) ||
      !srv_json_int(root, "max_output_tokens", 1, 1e15, max_tokens, e))
    return false;
  if (sp->top_p <= 0.0f) sp->temp = 0.0f;
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    const cJSON *v = srv_json_field(root, refused[i]);
    if (v && !cJSON_IsFalse(v)) return BAD(e, refused[i], "'%s' is not supported", refused[i]);
  }
  const cJSON *meta = srv_json_field(root, "metadata");
  if (meta && !cJSON_IsObject(meta)) return BAD(e, "metadata", "'metadata' must be an object");
  return parse_other_fields(root, r, e) &&
         srv_request_speculative(srv_json_field(root, "speculative"), "speculative", r, e);
}

/* The fields the response object shows, from the request (with OpenAI's
 * defaults where it said nothing). */
static cJSON *echo_fields(const cJSON *root, const srv_request *r, int64_t max_tokens,
                          bool parallel, bool store) {
  cJSON *o = cJSON_CreateObject();
  static const char *const copied[] = {"instructions",  "previous_response_id", "metadata",
                                       "user",          "prompt_cache_key",     "safety_identifier",
                                       "max_tool_calls"};
  for (size_t i = 0; i < sizeof copied / sizeof copied[0]; i++) {
    const cJSON *v = srv_json_field(root, copied[i]);
    if (v)
      cJSON_AddItemToObject(o, copied[i], cJSON_Duplicate(v, true));
    else if (strcmp(copied[i], "metadata") == 0)
      cJSON_AddObjectToObject(o, "metadata");
    else
      cJSON_AddNullToObject(o, copied[i]);
  }
  const cJSON *tools = srv_json_field(root, "tools"), *tc = srv_json_field(root, "tool_choice");
  cJSON_AddItemToObject(o, "tools", tools ? cJSON_Duplicate(tools, true) : cJSON_CreateArray());
  cJSON_AddItemToObject(o, "tool_choice",
                        tc ? cJSON_Duplicate(tc, true) : cJSON_CreateString("auto"));
  cJSON_AddBoolToObject(o, "parallel_tool_calls", parallel);
  cJSON_AddNumberToObject(o, "temperature", r->sampling.temp);
  cJSON_AddNumberToObject(o, "top_p", r->sampling.top_p);
  if (max_tokens > 0)
    cJSON_AddNumberToObject(o, "max_output_tokens", (double)max_tokens);
  else
    cJSON_AddNullToObject(o, "max_output_tokens");
  const cJSON *text = srv_json_field(root, "text");
  if (text && srv_json_field(text, "format")) {
    cJSON_AddItemToObject(o, "text", cJSON_Duplicate(text, true));
  } else {
    cJSON *t = cJSON_AddObjectToObject(o, "text");
    cJSON_AddStringToObject(cJSON_AddObjectToObject(t, "format"), "type", "text");
  }
  const cJSON *reasoning = srv_json_field(root, "reasoning");
  cJSON *re = cJSON_AddObjectToObject(o, "reasoning");
  const cJSON *effort = srv_json_field(reasoning, "effort"),
              *summary = srv_json_field(reasoning, "summary");
  if (cJSON_IsString(effort))
    cJSON_AddStringToObject(re, "effort", effort->valuestring);
  else
    cJSON_AddNullToObject(re, "effort");
  if (cJSON_IsString(summary))
    cJSON_AddStringToObject(re, "summary", summary->valuestring);
  else
    cJSON_AddNullToObject(re, "summary");
  cJSON_AddBoolToObject(o, "store", store);
  cJSON_AddStringToObject(o, "truncation", "disabled");
  cJSON_AddNumberToObject(o, "top_logprobs", r->top_logprobs);
  cJSON_AddStringToObject(o, "service_tier", "default");
  cJSON_AddFalseToObject(o, "background");
  return o;
}

/* The conversation so far: the stored one of previous_response_id, then
 * the input's messages. */
static bool conversation(srv_resp_store *store, const cJSON *root, cJSON **out, srv_error *e) {
  *out = NULL;
  const cJSON *prev = srv_json_field(root, "previous_response_id");
  cJSON *msgs = NULL;
  if (prev) {
    if (!cJSON_IsString(prev))
      return BAD(e, "previous_response_id", "'previous_response_id' must be a string");
    char *text = srv_resp_store_conversation(store, prev->valuestring);
    if (!text)
      return srv_fail(e, 404, "invalid_request_error", "previous_response_not_found",
                      "previous_response_id",
                      "Previous response with id '%.100s' not found (it was not stored, or it was "
                      "evicted from the server's store).",
                      prev->valuestring);
    msgs = cJSON_Parse(text);
    free(text);
    if (!cJSON_IsArray(msgs)) {
      cJSON_Delete(msgs);
      return oom(e);
    }
  } else {
    msgs = cJSON_CreateArray();
  }
  *out = msgs;
  const cJSON *input = srv_json_field(root, "input");
  if (!input) return BAD(e, "input", "'input' is required");
  return convert_input(input, msgs, e);
}

/* reasoning.effort reaches templates as reasoning_effort, and switches
 * enable_thinking (off for "none") for templates that read that. */
static bool template_extra(const cJSON *root, cJSON **extra, srv_error *e) {
  *extra = NULL;
  const cJSON *re = srv_json_field(root, "reasoning");
  if (!re) return true;
  if (!cJSON_IsObject(re)) return BAD(e, "reasoning", "'reasoning' must be an object");
  const cJSON *effort = srv_json_field(re, "effort");
  if (effort && !cJSON_IsString(effort))
    return BAD(e, "reasoning.effort", "'reasoning.effort' must be a string");
  if (effort) {
    *extra = cJSON_CreateObject();
    cJSON_AddStringToObject(*extra, "reasoning_effort", effort->valuestring);
    cJSON_AddBoolToObject(*extra, "enable_thinking", strcmp(effort->valuestring, "none") != 0);
  }
  return true;
}

static bool parse(const srv_model_info *mi, srv_resp_store *store, const cJSON *root,
                  srv_request *r, srv_resp *rs, srv_error *e) {
  const cJSON *model = srv_json_field(root, "model"), *instr = srv_json_field(root, "instructions");
  if (model && !cJSON_IsString(model)) return BAD(e, "model", "'model' must be a string");
  if (!(r->model = strdup(model ? model->valuestring : mi->name))) return oom(e);
  int64_t max_tokens = 0;
  bool parallel = true;
  rs->store = true;
  if (!srv_json_bool(root, "stream", &r->stream, e) ||
      !srv_json_bool(root, "store", &rs->store, e) ||
      !srv_json_bool(root, "parallel_tool_calls", &parallel, e) ||
      !parse_sampling(root, r, &max_tokens, e))
    return false;
  if (instr && !cJSON_IsString(instr))
    return BAD(e, "instructions", "'instructions' must be a string");
  cJSON *tools = NULL, *extra = NULL, *msgs = NULL;
  srv_tool_mode mode;
  const char *name;
  bool ok = convert_tools(srv_json_field(root, "tools"), &tools, e) &&
            parse_tool_choice(srv_json_field(root, "tool_choice"), &mode, &name, e) &&
            template_extra(root, &extra, e) && conversation(store, root, &rs->conversation, e);
  if (ok && (msgs = cJSON_Duplicate(rs->conversation, true)) && instr) {
    cJSON *sys = cJSON_CreateObject();
    cJSON_AddStringToObject(sys, "role", "system");
    cJSON_AddStringToObject(sys, "content", instr->valuestring);
    cJSON_InsertItemInArray(msgs, 0, sys);
  }
  if (ok && !msgs) ok = oom(e);
  char *prompt = NULL;
  if (ok)
    ok = srv_chat_render(mi, msgs, mode == SRV_TOOLS_NONE ? NULL : tools, true, extra, &prompt,
                         &r->in_reasoning, e);
  if (ok) ok = srv_chat_tokenize(mi, prompt, "input", r, e);
  free(prompt);
  if (ok) ok = srv_fit_context(mi, max_tokens, "input", r, e);
  if (ok) ok = srv_tools_apply(mi, tools, mode, name, parallel, r, e);
  if (ok) ok = parse_text_format(root, r, e);
  if (ok) {
    rs->max_calls = parallel ? 0 : 1;
    rs->turn.max_calls = rs->max_calls;
    rs->tools = tools;
    rs->turn.tool_defs = tools;
    tools = NULL;
    rs->echo = echo_fields(root, r, max_tokens, parallel, rs->store);
    if (!rs->echo) ok = oom(e);
  }
  cJSON_Delete(tools);
  cJSON_Delete(extra);
  cJSON_Delete(msgs);
  return ok;
}

bool srv_responses_parse(const srv_model_info *mi, srv_resp_store *store, const char *body,
                         size_t len, srv_request *req, srv_resp **out, srv_error *e) {
  memset(req, 0, sizeof *req);
  *out = NULL;
  req->kind = SRV_RESPONSES;
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(body, len, &end, false);
  if (!root) {
    size_t at = end && end >= body ? (size_t)(end - body) : 0;
    return BAD(e, NULL, "the body is not valid JSON (error near byte %zu)", at);
  }
  srv_resp *rs = calloc(1, sizeof *rs);
  bool ok = rs ? cJSON_IsObject(root) ? parse(mi, store, root, req, rs, e)
                                      : BAD(e, NULL, "the body must be a JSON object")
               : oom(e);
  cJSON_Delete(root);
  if (!ok) {
    srv_request_clear(req);
    srv_responses_free(rs);
    return false;
  }
  *out = rs;
  return true;
}

void srv_responses_free(srv_resp *rs) {
  if (!rs) return;
  cJSON_Delete(rs->echo);
  cJSON_Delete(rs->conversation);
  cJSON_Delete(rs->tools);
  srv_turn_free(&rs->turn);
  free(rs);
}
