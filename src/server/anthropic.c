/* anthropic.c: the Anthropic Messages API (see anthropic.h). A request is
 * checked field by field (errors name the field the way Anthropic's do,
 * "messages.1.content.0"), turned into OpenAI-style messages and tools
 * (tool_use blocks into assistant tool_calls, tool_result blocks into tool
 * messages, thinking blocks into reasoning_content) and rendered by the chat
 * template; the output is split into parts by the turn tracker (turn.h) and
 * returned as content blocks, whole or as stream events. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/anthropic.h"
#include "server/chat.h"
#include "server/request.h"
#include "server/turn.h"
#include "server/json_util.h"

#define BAD(e, param, ...) srv_fail(e, 400, "invalid_request_error", NULL, param, __VA_ARGS__)

struct srv_anth {
  cJSON *tools;       /* the offered tools (OpenAI shape), for the output parser */
  int max_calls;      /* 1: disable_parallel_tool_use */
  bool omit_thinking; /* thinking.display "omitted": thinking blocks without their text */
  srv_turn turn;
  bool started, ended;
};

/* What a request turns into before rendering. */
typedef struct {
  cJSON *messages; /* OpenAI-style */
  cJSON *tools;    /* OpenAI function tools; NULL when none */
  cJSON *extra;    /* template variables (enable_thinking); NULL when none */
  srv_tool_mode mode;
  const char *tool_name; /* SRV_TOOLS_NAMED: the function (in the request's JSON) */
  bool parallel;
  bool omit_thinking;
  int64_t think_budget; /* thinking enabled: budget_tokens; disabled: 0; else -1 (no limit) */
} conv;

static void conv_free(conv *c) {
  cJSON_Delete(c->messages);
  cJSON_Delete(c->tools);
  cJSON_Delete(c->extra);
}

static bool oom(srv_error *e) {
  return srv_fail(e, 500, "api_error", NULL, NULL, "out of memory");
}

/* ---- request: blocks into OpenAI-style messages ---- */

/* A string, or an array of text blocks, appended to out. */
static bool text_blocks(const cJSON *v, const char *param, srv_buf *out, srv_error *e) {
  srv_buf_append(out, "", 0);
  if (cJSON_IsString(v)) {
    srv_buf_append(out, v->valuestring, strlen(v->valuestring));
    return true;
  }
  if (!cJSON_IsArray(v))
    return BAD(e, param, "%s: must be a string or an array of text blocks", param);
  const cJSON *b;
  int k = 0;
  char p[96];
  cJSON_ArrayForEach(b, v) {
    snprintf(p, sizeof p, "%s.%d", param, k++);
    const cJSON *type = srv_json_field(b, "type"), *text = srv_json_field(b, "text");
    if (!cJSON_IsObject(b) || !cJSON_IsString(type))
      return BAD(e, p, "%s: must be an object with a 'type'", p);
    if (strcmp(type->valuestring, "text") != 0)
      return BAD(e, p, "%s: blocks of type '%s' are not supported here (only 'text')", p,
                 type->valuestring);
    if (!cJSON_IsString(text)) return BAD(e, p, "%s.text: must be a string", p);
    srv_buf_append(out, text->valuestring, strlen(text->valuestring));
  }
  return true;
}

static cJSON *add_message(cJSON *msgs, const char *role, const char *content) {
  cJSON *m = cJSON_CreateObject();
  cJSON_AddStringToObject(m, "role", role);
  if (content) cJSON_AddStringToObject(m, "content", content);
  cJSON_AddItemToArray(msgs, m);
  return m;
}

/* last: the conversation's latest assistant message (NULL: none), whose
 * calls a tool result answers. */
static bool tool_result(const cJSON *b, const char *p, cJSON *msgs, const cJSON *last,
                        srv_error *e) {
  char q[160];
  const cJSON *id = srv_json_field(b, "tool_use_id"), *content = srv_json_field(b, "content"),
              *is_error = srv_json_field(b, "is_error");
  if (!cJSON_IsString(id) || !id->valuestring[0])
    return BAD(e, p, "%s.tool_use_id: must be a non-empty string", p);
  if (is_error && !cJSON_IsBool(is_error)) return BAD(e, p, "%s.is_error: must be a boolean", p);
  srv_buf text = {0};
  if (cJSON_IsTrue(is_error)) srv_buf_append(&text, "Error: ", 7);
  snprintf(q, sizeof q, "%s.content", p);
  if (content && !text_blocks(content, q, &text, e)) {
    srv_buf_free(&text);
    return false;
  }
  srv_buf_append(&text, "", 0);
  cJSON *m = add_message(msgs, "tool", text.p ? text.p : "");
  srv_buf_free(&text);
  if (text.failed) return oom(e);
  cJSON_AddStringToObject(m, "tool_call_id", id->valuestring);
  const char *name = srv_call_name(last, id->valuestring);
  if (name) cJSON_AddStringToObject(m, "name", name);
  return true;
}

static bool tool_use(const cJSON *b, const char *p, cJSON *calls, srv_error *e) {
  const cJSON *id = srv_json_field(b, "id"), *name = srv_json_field(b, "name"),
              *input = srv_json_field(b, "input");
  if (!cJSON_IsString(id) || !id->valuestring[0])
    return BAD(e, p, "%s.id: must be a non-empty string", p);
  if (!cJSON_IsString(name) || !name->valuestring[0])
    return BAD(e, p, "%s.name: must be a non-empty string", p);
  if (input && !cJSON_IsObject(input)) return BAD(e, p, "%s.input: must be an object", p);
  char *args = input ? cJSON_PrintUnformatted(input) : strdup("{}");
  if (!args) return oom(e);
  cJSON *c = cJSON_CreateObject();
  cJSON_AddStringToObject(c, "id", id->valuestring);
  cJSON_AddStringToObject(c, "type", "function");
  cJSON *fn = cJSON_AddObjectToObject(c, "function");
  cJSON_AddStringToObject(fn, "name", name->valuestring);
  cJSON_AddStringToObject(fn, "arguments", args);
  free(args);
  cJSON_AddItemToArray(calls, c);
  return true;
}

/* One Anthropic message (index i) into one or more OpenAI-style ones: a
 * user message's tool_result blocks become tool messages, in order with
 * its text; an assistant message's tool_use blocks its tool_calls and its
 * thinking blocks its reasoning_content. */
static bool convert_message(const cJSON *m, int i, cJSON *msgs, cJSON **last, srv_error *e) {
  char p[96];
  snprintf(p, sizeof p, "messages.%d", i);
  if (!cJSON_IsObject(m)) return BAD(e, p, "%s: must be an object", p);
  const cJSON *role = srv_json_field(m, "role"), *content = srv_json_field(m, "content");
  if (!cJSON_IsString(role) ||
      (strcmp(role->valuestring, "user") != 0 && strcmp(role->valuestring, "assistant") != 0))
    return BAD(e, p,
               "%s.role: must be 'user' or 'assistant' (the system prompt is the top-level "
               "'system')",
               p);
  bool user = role->valuestring[0] == 'u';
  snprintf(p, sizeof p, "messages.%d.content", i);
  if (!content) return BAD(e, p, "%s: field required", p);
  if (cJSON_IsString(content)) {
    cJSON *msg = add_message(msgs, role->valuestring, content->valuestring);
    if (!user) *last = msg;
    return true;
  }
  if (!cJSON_IsArray(content)) return BAD(e, p, "%s: must be a string or an array of blocks", p);
  srv_buf text = {0}, thinking = {0};
  cJSON *calls = cJSON_CreateArray();
  bool ok = true, any = false;
  int k = 0;
  const cJSON *b;
  cJSON_ArrayForEach(b, content) {
    char q[128];
    snprintf(q, sizeof q, "%s.%d", p, k++);
    const cJSON *type = srv_json_field(b, "type");
    if (!cJSON_IsObject(b) || !cJSON_IsString(type)) {
      ok = BAD(e, q, "%s: must be an object with a 'type'", q);
      break;
    }
    const char *t = type->valuestring;
    if (strcmp(t, "text") == 0) {
      const cJSON *s = srv_json_field(b, "text");
      if (!cJSON_IsString(s)) {
        ok = BAD(e, q, "%s.text: must be a string", q);
        break;
      }
      srv_buf_append(&text, s->valuestring, strlen(s->valuestring));
      any = true;
    } else if (user && strcmp(t, "tool_result") == 0) {
      if (text.n) { /* the text before it is its own user message */
        add_message(msgs, "user", text.p);
        srv_buf_consume(&text, text.n);
      }
      if (!(ok = tool_result(b, q, msgs, *last, e))) break;
      any = true;
    } else if (!user && strcmp(t, "tool_use") == 0) {
      if (!(ok = tool_use(b, q, calls, e))) break;
    } else if (!user && strcmp(t, "thinking") == 0) {
      const cJSON *s = srv_json_field(b, "thinking");
      if (!cJSON_IsString(s)) {
        ok = BAD(e, q, "%s.thinking: must be a string", q);
        break;
      }
      srv_buf_append(&thinking, s->valuestring, strlen(s->valuestring));
    } else if (!user && strcmp(t, "redacted_thinking") == 0) {
      /* opaque to this server: nothing to render */
    } else {
      ok = BAD(e, q, "%s: content blocks of type '%s' are not supported in %s messages (%s)", q, t,
               role->valuestring, user ? "text, tool_result" : "text, tool_use, thinking");
      break;
    }
  }
  if (ok && (text.failed || thinking.failed)) ok = oom(e);
  if (ok && user && (text.n || !any)) add_message(msgs, "user", text.p ? text.p : "");
  if (ok && !user) {
    cJSON *am = *last = add_message(msgs, "assistant", text.p ? text.p : "");
    if (thinking.n) cJSON_AddStringToObject(am, "reasoning_content", thinking.p);
    if (cJSON_GetArraySize(calls) > 0) {
      cJSON_AddItemToObject(am, "tool_calls", calls);
      calls = NULL;
    }
  }
  cJSON_Delete(calls);
  srv_buf_free(&text);
  srv_buf_free(&thinking);
  return ok;
}

static bool convert_messages(const cJSON *root, conv *c, srv_error *e) {
  c->messages = cJSON_CreateArray();
  if (!c->messages) return oom(e);
  const cJSON *sys = srv_json_field(root, "system");
  if (sys) {
    srv_buf s = {0};
    bool ok = text_blocks(sys, "system", &s, e);
    if (ok && s.failed) ok = oom(e);
    if (ok) add_message(c->messages, "system", s.p ? s.p : "");
    srv_buf_free(&s);
    if (!ok) return false;
  }
  const cJSON *msgs = srv_json_field(root, "messages");
  if (!msgs) return BAD(e, "messages", "messages: field required");
  if (!cJSON_IsArray(msgs)) return BAD(e, "messages", "messages: must be an array");
  if (cJSON_GetArraySize(msgs) == 0) return BAD(e, "messages", "messages: must not be empty");
  int i = 0;
  const cJSON *m;
  cJSON *last = NULL;
  cJSON_ArrayForEach(m, msgs) if (!convert_message(m, i++, c->messages, &last, e)) return false;
  return true;
}

static bool name_ok(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > 64) return false;
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
          (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-'))
      return false;
  return true;
}

/* tools: [{name, description, input_schema}] into OpenAI function tools;
 * tool_choice: {type: auto | any | tool | none, name, disable_parallel_tool_use}. */
static bool convert_tools(const cJSON *root, conv *c, srv_error *e) {
  const cJSON *tools = srv_json_field(root, "tools"), *tc = srv_json_field(root, "tool_choice");
  c->mode = SRV_TOOLS_AUTO;
  c->parallel = true;
  if (tools && !cJSON_IsArray(tools)) return BAD(e, "tools", "tools: must be an array");
  if (tools && cJSON_GetArraySize(tools) > 512)
    return BAD(e, "tools", "tools: %d tools, at most 512 are allowed", cJSON_GetArraySize(tools));
  if (tools && cJSON_GetArraySize(tools) > 0) {
    c->tools = cJSON_CreateArray();
    int i = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
      char p[64];
      snprintf(p, sizeof p, "tools.%d", i++);
      const cJSON *type = srv_json_field(t, "type"), *name = srv_json_field(t, "name"),
                  *desc = srv_json_field(t, "description"),
                  *schema = srv_json_field(t, "input_schema");
      if (!cJSON_IsObject(t)) return BAD(e, p, "%s: must be an object", p);
      if (type && (!cJSON_IsString(type) || strcmp(type->valuestring, "custom") != 0))
        return BAD(e, p,
                   "%s: tools of type '%s' are not supported (only custom tools with an "
                   "input_schema)",
                   p, cJSON_IsString(type) ? type->valuestring : "?");
      if (!cJSON_IsString(name) || !name_ok(name->valuestring))
        return BAD(e, p, "%s.name: must be 1 to 64 of a-z, A-Z, 0-9, '_' and '-'", p);
      if (desc && !cJSON_IsString(desc)) return BAD(e, p, "%s.description: must be a string", p);
      if (!cJSON_IsObject(schema))
        return BAD(e, p, "%s.input_schema: must be a JSON schema object", p);
      for (const cJSON *u = tools->child; u != t; u = u->next)
        if (strcmp(srv_json_field(u, "name")->valuestring, name->valuestring) == 0)
          return BAD(e, p, "%s.name: the tool name '%s' is given twice", p, name->valuestring);
      cJSON *o = cJSON_CreateObject();
      cJSON_AddStringToObject(o, "type", "function");
      cJSON *fn = cJSON_AddObjectToObject(o, "function");
      cJSON_AddStringToObject(fn, "name", name->valuestring);
      if (desc) cJSON_AddStringToObject(fn, "description", desc->valuestring);
      cJSON_AddItemToObject(fn, "parameters", cJSON_Duplicate(schema, true));
      cJSON_AddItemToArray(c->tools, o);
    }
    if (!srv_tools_check(c->tools, "tools", e)) return false;
  }
  if (!tc) return true;
  const cJSON *type = srv_json_field(tc, "type"), *name = srv_json_field(tc, "name");
  if (!cJSON_IsObject(tc) || !cJSON_IsString(type))
    return BAD(e, "tool_choice", "tool_choice: must be an object with a 'type'");
  bool dp = false;
  if (!srv_json_bool(tc, "disable_parallel_tool_use", &dp, e)) {
    snprintf(e->param, sizeof e->param, "tool_choice.disable_parallel_tool_use");
    return false;
  }
  c->parallel = !dp;
  const char *t = type->valuestring;
  if (strcmp(t, "auto") == 0) return true;
  if (strcmp(t, "none") == 0) {
    c->mode = SRV_TOOLS_NONE;
    return true;
  }
  if (strcmp(t, "any") == 0) {
    c->mode = SRV_TOOLS_REQUIRED;
    return true;
  }
  if (strcmp(t, "tool") != 0)
    return BAD(e, "tool_choice.type", "tool_choice.type: '%s' is not one of auto, any, tool, none",
               t);
  if (!cJSON_IsString(name))
    return BAD(e, "tool_choice.name", "tool_choice.name: field required for type 'tool'");
  if (!c->tools || !srv_tools_has(c->tools, name->valuestring))
    return BAD(e, "tool_choice.name", "tool_choice.name: the tool '%s' is not in 'tools'",
               name->valuestring);
  c->mode = SRV_TOOLS_NAMED;
  c->tool_name = name->valuestring;
  return true;
}

/* thinking: {type: enabled, budget_tokens, display} | {type: adaptive |
 * between_tools} | {type: disabled}: the template's enable_thinking
 * (templates that know it switch the model's reasoning on or off), and a
 * reasoning budget the scheduler enforces: budget_tokens (at least 1024, as
 * Anthropic's API requires, and below max_tokens), 0 when disabled (a model
 * that reasons whatever its template says has its block closed at once);
 * output_config.effort: the template's reasoning_effort. */
static bool convert_thinking(const cJSON *root, conv *c, srv_error *e) {
  const cJSON *th = srv_json_field(root, "thinking"), *oc = srv_json_field(root, "output_config");
  const cJSON *effort = oc ? srv_json_field(oc, "effort") : NULL;
  if (oc && !cJSON_IsObject(oc)) return BAD(e, "output_config", "output_config: must be an object");
  if (effort && !cJSON_IsString(effort))
    return BAD(e, "output_config.effort", "output_config.effort: must be a string");
  if (effort) {
    c->extra = cJSON_CreateObject();
    cJSON_AddStringToObject(c->extra, "reasoning_effort", effort->valuestring);
  }
  if (!th) return true;
  const cJSON *type = srv_json_field(th, "type"), *display = srv_json_field(th, "display");
  if (!cJSON_IsObject(th) || !cJSON_IsString(type))
    return BAD(e, "thinking", "thinking: must be an object with a 'type'");
  const char *t = type->valuestring;
  bool on =
      strcmp(t, "enabled") == 0 || strcmp(t, "adaptive") == 0 || strcmp(t, "between_tools") == 0;
  if (!on && strcmp(t, "disabled") != 0)
    return BAD(e, "thinking.type",
               "thinking.type: '%s' is not one of enabled, adaptive, between_tools, disabled", t);
  if (display && (!cJSON_IsString(display) || (strcmp(display->valuestring, "summarized") != 0 &&
                                               strcmp(display->valuestring, "omitted") != 0)))
    return BAD(e, "thinking.display", "thinking.display: must be 'summarized' or 'omitted'");
  c->omit_thinking = display && strcmp(display->valuestring, "omitted") == 0;
  if (strcmp(type->valuestring, "enabled") == 0) {
    int64_t budget = -1;
    if (!srv_json_int(th, "budget_tokens", 0, 1e9, &budget, e)) {
      snprintf(e->param, sizeof e->param, "thinking.budget_tokens");
      return false;
    }
    if (budget < 0)
      return BAD(e, "thinking.budget_tokens", "thinking.budget_tokens: field required");
    if (budget < 1024)
      return BAD(e, "thinking.budget_tokens",
                 "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024");
    c->think_budget = budget;
  } else if (!on) {
    c->think_budget = 0;
  }
  if (!c->extra) c->extra = cJSON_CreateObject();
  cJSON_AddBoolToObject(c->extra, "enable_thinking", on);
  return true;
}

/* The request's conversation rendered and tokenized into r->prompt. */
static bool render(const srv_model_info *mi, const cJSON *root, conv *c, srv_request *r,
                   srv_error *e) {
  if (!convert_messages(root, c, e) || !convert_tools(root, c, e) || !convert_thinking(root, c, e))
    return false;
  char *prompt = NULL;
  bool ok = srv_chat_render(mi, c->messages, c->mode == SRV_TOOLS_NONE ? NULL : c->tools, true,
                            c->extra, &prompt, &r->in_reasoning, e);
  if (ok) ok = srv_chat_tokenize(mi, prompt, "messages", r, e);
  free(prompt);
  return ok;
}

static cJSON *parse_body(const char *body, size_t len, srv_error *e) {
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(body, len, &end, false);
  if (!root) {
    size_t at = end && end >= body ? (size_t)(end - body) : 0;
    BAD(e, NULL, "the body is not valid JSON (error near byte %zu)", at);
    return NULL;
  }
  if (!cJSON_IsObject(root)) {
    cJSON_Delete(root);
    BAD(e, NULL, "the body must be a JSON object");
    return NULL;
  }
  return root;
}

static bool parse_stop(const cJSON *root, srv_request *r, srv_error *e) {
  const cJSON *v = srv_json_field(root, "stop_sequences");
  if (!v) return true;
  if (!cJSON_IsArray(v))
    return BAD(e, "stop_sequences", "stop_sequences: must be an array of strings");
  if (cJSON_GetArraySize(v) > SRV_MAX_STOP)
    return BAD(e, "stop_sequences", "stop_sequences: at most %d are allowed", SRV_MAX_STOP);
  const cJSON *s;
  cJSON_ArrayForEach(s, v) {
    if (!cJSON_IsString(s))
      return BAD(e, "stop_sequences", "stop_sequences: must be an array of strings");
    if (strlen(s->valuestring) > SRV_MAX_STOP_LEN)
      return BAD(e, "stop_sequences", "stop_sequences: a stop sequence is longer than %d bytes",
                 SRV_MAX_STOP_LEN);
    if (s->valuestring[0] && !(r->stop[r->n_stop++] = strdup(s->valuestring))) return oom(e);
  }
  return true;
}

/* Sampling: Anthropic's defaults are temperature 1 and no top-p / top-k cut. */
static bool parse_sampling(const cJSON *root, srv_request *r, srv_error *e) {
  pasada_sampler_params *sp = &r->sampling;
  *sp = pasada_sampler_default_params();
  sp->temp = 1.0f;
  sp->top_p = 1.0f;
  sp->top_k = 0;
  sp->min_p = 0.0f;
  sp->repeat_last_n = -1;
  int64_t top_k = 0;
  if (!srv_json_float(root, "temperature", 0, 1, &sp->temp, e) ||
      !srv_json_float(root, "top_p", 0, 1, &sp->top_p, e) ||
      !srv_json_int(root, "top_k", 0, 1e9, &top_k, e))
    return false;
  sp->top_k = (int32_t)top_k;
  if (sp->top_p <= 0.0f) sp->temp = 0.0f;
  return srv_request_speculative(srv_json_field(root, "speculative"), "speculative", r, e);
}

/* output_format / output_config.format: {type: json_schema, schema}. */
static bool parse_output_format(const cJSON *root, srv_request *r, srv_error *e) {
  const char *param = "output_format";
  const cJSON *f = srv_json_field(root, "output_format");
  if (!f && srv_json_field(root, "output_config")) {
    param = "output_config.format";
    f = srv_json_field(srv_json_field(root, "output_config"), "format");
  }
  if (!f) return true;
  const cJSON *type = srv_json_field(f, "type"), *schema = srv_json_field(f, "schema");
  if (!cJSON_IsObject(f) || !cJSON_IsString(type) || strcmp(type->valuestring, "json_schema") != 0)
    return BAD(e, param, "%s: must be {\"type\": \"json_schema\", \"schema\": {...}}", param);
  if (schema && !cJSON_IsObject(schema))
    return BAD(e, param, "%s.schema: must be a JSON schema object", param);
  return srv_request_json(schema, param, r, e);
}

/* The request fields beyond the conversation and sampling: service_tier
 * and speed accepted (one tier, one speed here), cache_control (the prefix
 * cache needs no marker), inference_geo and user_profile_id (strings);
 * the server-side features a local server does not have (code-execution
 * containers, MCP servers, context editing, cache diagnostics) are refused
 * naming the field. */
static bool parse_other_fields(const cJSON *root, srv_error *e) {
  const cJSON *speed = srv_json_field(root, "speed");
  if (speed && !cJSON_IsNull(speed) &&
      !(cJSON_IsString(speed) && (strcmp(speed->valuestring, "standard") == 0 ||
                                  strcmp(speed->valuestring, "fast") == 0)))
    return BAD(e, "speed", "speed: must be 'standard' or 'fast'");
  const cJSON *cc = srv_json_field(root, "cache_control");
  if (cc && !cJSON_IsNull(cc) && !cJSON_IsObject(cc))
    return BAD(e, "cache_control", "cache_control: must be an object");
  static const char *const strings[] = {"inference_geo", "user_profile_id"};
  for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++) {
    const cJSON *v = srv_json_field(root, strings[i]);
    if (v && !cJSON_IsNull(v) && !cJSON_IsString(v))
      return BAD(e, strings[i], "%s: must be a string", strings[i]);
  }
  const cJSON *tier = srv_json_field(root, "service_tier");
  if (tier && !(cJSON_IsString(tier) && (strcmp(tier->valuestring, "auto") == 0 ||
                                         strcmp(tier->valuestring, "standard_only") == 0)))
    return BAD(e, "service_tier", "service_tier: must be 'auto' or 'standard_only'");
  static const char *const refused[] = {"container", "mcp_servers", "context_management",
                                        "diagnostics"};
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    const cJSON *v = srv_json_field(root, refused[i]);
    if (v && !cJSON_IsNull(v) && !(cJSON_IsArray(v) && !v->child))
      return BAD(e, refused[i], "%s: not supported by this server", refused[i]);
  }
  return true;
}

bool srv_anthropic_parse(const srv_model_info *mi, const char *body, size_t len, srv_request *req,
                         srv_anth **out, srv_error *e) {
  memset(req, 0, sizeof *req);
  *out = NULL;
  req->kind = SRV_MESSAGES;
  cJSON *root = parse_body(body, len, e);
  if (!root) return false;
  conv c = {.think_budget = -1};
  srv_anth *a = calloc(1, sizeof *a);
  bool ok = a != NULL || oom(e);
  const cJSON *model = srv_json_field(root, "model"), *meta = srv_json_field(root, "metadata");
  int64_t max_tokens = -1;
  if (ok && model && !cJSON_IsString(model)) ok = BAD(e, "model", "model: must be a string");
  if (ok && !(req->model = strdup(model ? model->valuestring : mi->name))) ok = oom(e);
  if (ok) ok = srv_json_int(root, "max_tokens", 1, 1e15, &max_tokens, e);
  if (ok && max_tokens < 0) ok = BAD(e, "max_tokens", "max_tokens: field required");
  if (ok && meta && !cJSON_IsObject(meta)) ok = BAD(e, "metadata", "metadata: must be an object");
  if (ok) ok = srv_json_bool(root, "stream", &req->stream, e) && parse_other_fields(root, e);
  if (ok) ok = parse_sampling(root, req, e) && parse_stop(root, req, e);
  if (ok) ok = render(mi, root, &c, req, e);
  if (ok && c.think_budget >= max_tokens)
    ok = BAD(e, "max_tokens",
             "max_tokens: must be greater than thinking.budget_tokens (%lld); the budget counts "
             "toward max_tokens",
             (long long)c.think_budget);
  if (ok && c.think_budget >= 0)
    ok = srv_request_think_budget(mi, (int32_t)c.think_budget, req, e);
  if (ok) ok = srv_fit_context(mi, max_tokens, "messages", req, e);
  if (ok) ok = srv_tools_apply(mi, c.tools, c.mode, c.tool_name, c.parallel, req, e);
  if (ok) ok = parse_output_format(root, req, e);
  if (ok) {
    a->max_calls = c.parallel ? 0 : 1;
    a->omit_thinking = c.omit_thinking;
    a->tools = c.tools;
    c.tools = NULL;
    a->turn.max_calls = a->max_calls;
    a->turn.tool_defs = a->tools;
  }
  conv_free(&c);
  cJSON_Delete(root);
  if (!ok) {
    srv_request_clear(req);
    free(a);
    return false;
  }
  *out = a;
  return true;
}

void srv_anthropic_free(srv_anth *a) {
  if (!a) return;
  srv_turn_free(&a->turn);
  cJSON_Delete(a->tools);
  free(a);
}

char *srv_anthropic_count_tokens(const srv_model_info *mi, const char *body, size_t len,
                                 srv_error *e) {
  cJSON *root = parse_body(body, len, e);
  if (!root) return NULL;
  conv c = {0};
  srv_request r = {.kind = SRV_MESSAGES};
  char *out = NULL;
  if (render(mi, root, &c, &r, e)) {
    char buf[64];
    snprintf(buf, sizeof buf, "{\"input_tokens\":%d}", r.n_prompt);
    if (!(out = strdup(buf))) oom(e);
  }
  conv_free(&c);
  srv_request_clear(&r);
  cJSON_Delete(root);
  return out;
}

/* ---- responses ---- */

char *srv_anthropic_error_json(const srv_error *e) {
  const char *type = "api_error";
  switch (e->status) {
    case 400:
    case 405:
    case 422:
      type = "invalid_request_error";
      break;
    case 401:
      type = "authentication_error";
      break;
    case 403:
      type = "permission_error";
      break;
    case 404:
      type = "not_found_error";
      break;
    case 413:
      type = "request_too_large";
      break;
    case 429:
      type = "rate_limit_error";
      break;
    case 503:
    case 529:
      type = "overloaded_error";
      break;
    default:
      break;
  }
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "type", "error");
  cJSON *err = cJSON_AddObjectToObject(root, "error");
  cJSON_AddStringToObject(err, "type", type);
  cJSON_AddStringToObject(err, "message", e->message);
  return srv_json_print(root);
}

/* A tool_use id from the parser's call id: "toolu_" + its random part. */
static void tool_use_id(const srv_part *p, char *out, size_t size) {
  const char *id = strncmp(p->id, "call_", 5) == 0 ? p->id + 5 : p->id;
  snprintf(out, size, "toolu_%s", id);
}

/* A block as content_block_start shows it (empty), or whole. */
static cJSON *block_json(const srv_part *p, bool whole, bool omit_thinking) {
  cJSON *b = cJSON_CreateObject();
  bool omit = omit_thinking && p->kind == SRV_PART_REASONING;
  const char *s = whole && !omit ? p->text.p : "";
  size_t n = whole && !omit ? p->text.n : 0;
  if (p->kind == SRV_PART_TEXT) {
    cJSON_AddStringToObject(b, "type", "text");
    cJSON_AddItemToObject(b, "text", srv_json_text(s, n));
  } else if (p->kind == SRV_PART_REASONING) {
    cJSON_AddStringToObject(b, "type", "thinking");
    cJSON_AddItemToObject(b, "thinking", srv_json_text(s, n));
    cJSON_AddStringToObject(b, "signature", "");
  } else {
    char id[64];
    tool_use_id(p, id, sizeof id);
    cJSON_AddStringToObject(b, "type", "tool_use");
    cJSON_AddStringToObject(b, "id", id);
    cJSON_AddItemToObject(b, "name", srv_json_text(p->name, strlen(p->name)));
    cJSON *input = whole ? cJSON_Parse(p->text.p ? p->text.p : "{}") : NULL;
    if (!cJSON_IsObject(input)) {
      cJSON_Delete(input);
      input = cJSON_CreateObject();
    }
    cJSON_AddItemToObject(b, "input", input);
  }
  return b;
}

static const char *stop_reason(const srv_job *j, const srv_turn *t) {
  if (j->finish == SRV_FINISH_LENGTH) return "max_tokens";
  if (srv_turn_calls(t) > 0) return "tool_use";
  return j->stop_hit > 0 ? "stop_sequence" : "end_turn";
}

static void add_stop_sequence(cJSON *o, const srv_job *j, const srv_turn *t) {
  if (strcmp(stop_reason(j, t), "stop_sequence") == 0)
    cJSON_AddStringToObject(o, "stop_sequence", j->req.stop[j->stop_hit - 1]);
  else
    cJSON_AddNullToObject(o, "stop_sequence");
}

/* usage: input_tokens are the prompt's tokens not read from the prefix
 * cache (Anthropic counts cache reads apart). Call with j->mu held. */
static cJSON *usage_json(const srv_job *j, bool start) {
  cJSON *u = cJSON_CreateObject();
  int32_t cached = start ? 0 : j->n_cached;
  cJSON_AddNumberToObject(u, "input_tokens", j->req.n_prompt - cached);
  cJSON_AddNumberToObject(u, "cache_creation_input_tokens", 0);
  cJSON_AddNumberToObject(u, "cache_read_input_tokens", cached);
  cJSON_AddNumberToObject(u, "output_tokens", start ? 0 : j->n_generated);
  return u;
}

static cJSON *message_json(const srv_job *j, const char *model) {
  cJSON *m = cJSON_CreateObject();
  cJSON_AddStringToObject(m, "id", j->id);
  cJSON_AddStringToObject(m, "type", "message");
  cJSON_AddStringToObject(m, "role", "assistant");
  cJSON_AddStringToObject(m, "model", model);
  return m;
}

char *srv_anthropic_response(const srv_model_info *mi, srv_job *j, srv_anth *a) {
  size_t n;
  srv_finish f;
  char *text = srv_job_text(j, &n, &f, NULL);
  srv_turn t = {.max_calls = a ? a->max_calls : 0, .tool_defs = a ? a->tools : NULL};
  bool ok = text && srv_turn_update(&t, mi, j, text, n, true, NULL, NULL);
  free(text);
  if (!ok) {
    srv_turn_free(&t);
    return NULL;
  }
  cJSON *m = message_json(j, j->req.model);
  cJSON *content = cJSON_AddArrayToObject(m, "content");
  for (int i = 0; i < t.n_parts; i++)
    cJSON_AddItemToArray(content, block_json(&t.parts[i], true, a && a->omit_thinking));
  pthread_mutex_lock(&j->mu);
  cJSON_AddStringToObject(m, "stop_reason", stop_reason(j, &t));
  add_stop_sequence(m, j, &t);
  cJSON_AddItemToObject(m, "usage", usage_json(j, false));
  pthread_mutex_unlock(&j->mu);
  srv_turn_free(&t);
  return srv_json_print(m);
}

/* ---- streaming ---- */

static void event(srv_buf *out, const char *name, cJSON *data) {
  char *s = srv_json_print(data);
  if (!s) {
    out->failed = true;
    return;
  }
  srv_buf_printf(out, "event: %s\ndata: ", name);
  srv_buf_append(out, s, strlen(s));
  srv_buf_append(out, "\n\n", 2);
  free(s);
}

typedef struct {
  srv_buf *out;
  const srv_anth *a;
} sink_ctx;

static void on_open(void *u, const srv_turn *t, int k) {
  sink_ctx *c = u;
  cJSON *ev = cJSON_CreateObject();
  cJSON_AddStringToObject(ev, "type", "content_block_start");
  cJSON_AddNumberToObject(ev, "index", k);
  cJSON_AddItemToObject(ev, "content_block", block_json(&t->parts[k], false, false));
  event(c->out, "content_block_start", ev);
}

static void on_delta(void *u, const srv_turn *t, int k, const char *s, size_t n) {
  sink_ctx *c = u;
  if (c->a->omit_thinking && t->parts[k].kind == SRV_PART_REASONING) return;
  static const char *const kinds[][2] = {[SRV_PART_REASONING] = {"thinking_delta", "thinking"},
                                         [SRV_PART_TEXT] = {"text_delta", "text"},
                                         [SRV_PART_CALL] = {"input_json_delta", "partial_json"}};
  const char *const *kd = kinds[t->parts[k].kind];
  cJSON *ev = cJSON_CreateObject();
  cJSON_AddStringToObject(ev, "type", "content_block_delta");
  cJSON_AddNumberToObject(ev, "index", k);
  cJSON *d = cJSON_AddObjectToObject(ev, "delta");
  cJSON_AddStringToObject(d, "type", kd[0]);
  cJSON_AddItemToObject(d, kd[1], srv_json_text(s, n));
  event(c->out, "content_block_delta", ev);
}

static void on_close(void *u, const srv_turn *t, int k) {
  sink_ctx *c = u;
  (void)t;
  cJSON *ev = cJSON_CreateObject();
  cJSON_AddStringToObject(ev, "type", "content_block_stop");
  cJSON_AddNumberToObject(ev, "index", k);
  event(c->out, "content_block_stop", ev);
}

bool srv_anthropic_stream_next(const srv_model_info *mi, srv_job *j, srv_anth *a, srv_buf *out) {
  if (a->ended) return true;
  if (!a->started) {
    cJSON *ev = cJSON_CreateObject();
    cJSON_AddStringToObject(ev, "type", "message_start");
    cJSON *m = message_json(j, j->req.model);
    cJSON_AddArrayToObject(m, "content");
    cJSON_AddNullToObject(m, "stop_reason");
    cJSON_AddNullToObject(m, "stop_sequence");
    cJSON_AddItemToObject(m, "usage", usage_json(j, true));
    cJSON_AddItemToObject(ev, "message", m);
    event(out, "message_start", ev);
    srv_buf_printf(out, "event: ping\ndata: {\"type\":\"ping\"}\n\n");
    a->started = true;
  }
  size_t n;
  srv_finish f;
  srv_error err;
  char *text = srv_job_text(j, &n, &f, &err);
  if (!text) {
    out->failed = true;
    return true;
  }
  if (f == SRV_FINISH_ERROR) {
    free(text);
    char *s = srv_anthropic_error_json(&err);
    srv_buf_printf(
        out, "event: error\ndata: %s\n\n",
        s ? s : "{\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"error\"}}");
    free(s);
    a->ended = true;
    return true;
  }
  const srv_turn_sink sink = {on_open, on_delta, on_close};
  sink_ctx c = {out, a};
  bool final = f != SRV_PENDING;
  if (!srv_turn_update(&a->turn, mi, j, text, n, final, &sink, &c)) out->failed = true;
  free(text);
  if (!final) return false;

  cJSON *ev = cJSON_CreateObject();
  cJSON_AddStringToObject(ev, "type", "message_delta");
  cJSON *d = cJSON_AddObjectToObject(ev, "delta");
  pthread_mutex_lock(&j->mu);
  cJSON_AddStringToObject(d, "stop_reason", stop_reason(j, &a->turn));
  add_stop_sequence(d, j, &a->turn);
  cJSON_AddItemToObject(ev, "usage", usage_json(j, false));
  pthread_mutex_unlock(&j->mu);
  event(out, "message_delta", ev);
  srv_buf_printf(out, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
  a->ended = true;
  return true;
}
