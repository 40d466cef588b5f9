/* chat.c: OpenAI-style messages and tools into the model's prompt. The
 * messages are checked here (roles, content parts, tool calls and the tool
 * results that answer them), normalised into what chat templates expect
 * (text parts joined, `developer` as `system`, tool-call arguments as
 * objects), and rendered by the model's Jinja template or a built-in one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/chat.h"
#include "server/json_util.h"

#define BAD(e, param, ...) srv_fail(e, 400, "invalid_request_error", NULL, param, __VA_ARGS__)

/* content: a string, or an array of {"type": "text", "text": ...} parts,
 * joined. NULL content gives "". */
static bool content_text(const cJSON *content, const char *param, srv_buf *out, srv_error *e) {
  srv_buf_append(out, "", 0);
  if (!content || cJSON_IsNull(content)) return true;
  if (cJSON_IsString(content)) {
    srv_buf_append(out, content->valuestring, strlen(content->valuestring));
    return true;
  }
  if (!cJSON_IsArray(content))
    return BAD(e, param, "'%s' must be a string or an array of parts", param);
  const cJSON *part;
  int k = 0;
  char p[128];
  cJSON_ArrayForEach(part, content) {
    snprintf(p, sizeof p, "%s[%d]", param, k++);
    const cJSON *type = srv_json_field(part, "type"), *text = srv_json_field(part, "text");
    if (!cJSON_IsObject(part) || !cJSON_IsString(type))
      return BAD(e, p, "'%s' must be an object with a 'type'", p);
    if (strcmp(type->valuestring, "text") != 0 && strcmp(type->valuestring, "input_text") != 0 &&
        strcmp(type->valuestring, "output_text") != 0)
      return BAD(e, p, "content parts of type '%s' are not supported (only 'text')",
                 type->valuestring);
    if (!cJSON_IsString(text)) return BAD(e, p, "'%s.text' must be a string", p);
    srv_buf_append(out, text->valuestring, strlen(text->valuestring));
  }
  return true;
}

/* One assistant tool call, checked and normalised: {id, type, function:
 * {name, arguments}} with arguments as an object (what templates render
 * with tojson; OpenAI sends them as a JSON string). */
static cJSON *tool_call(const cJSON *tc, const char *param, srv_error *e) {
  char p[192];
  if (!cJSON_IsObject(tc)) {
    BAD(e, param, "'%s' must be an object", param);
    return NULL;
  }
  const cJSON *type = srv_json_field(tc, "type"), *fn = srv_json_field(tc, "function"),
              *id = srv_json_field(tc, "id");
  if (type && (!cJSON_IsString(type) || strcmp(type->valuestring, "function") != 0)) {
    snprintf(p, sizeof p, "%s.type", param);
    BAD(e, p, "'%s' must be \"function\"", p);
    return NULL;
  }
  if (id && !cJSON_IsString(id)) {
    snprintf(p, sizeof p, "%s.id", param);
    BAD(e, p, "'%s' must be a string", p);
    return NULL;
  }
  const cJSON *name = fn ? srv_json_field(fn, "name") : NULL,
              *args = fn ? srv_json_field(fn, "arguments") : NULL;
  if (!cJSON_IsObject(fn) || !cJSON_IsString(name) || !name->valuestring[0]) {
    snprintf(p, sizeof p, "%s.function.name", param);
    BAD(e, p, "'%s' must be a non-empty string", p);
    return NULL;
  }
  cJSON *argobj = NULL;
  if (!args) {
    argobj = cJSON_CreateObject();
  } else if (cJSON_IsString(args)) {
    argobj = cJSON_Parse(args->valuestring);
    if (!argobj || !cJSON_IsObject(argobj)) {
      cJSON_Delete(argobj);
      snprintf(p, sizeof p, "%s.function.arguments", param);
      BAD(e, p, "'%s' must be a JSON object (as a string)", p);
      return NULL;
    }
  } else if (cJSON_IsObject(args)) {
    argobj = cJSON_Duplicate(args, true);
  } else {
    snprintf(p, sizeof p, "%s.function.arguments", param);
    BAD(e, p, "'%s' must be a JSON object (as a string)", p);
    return NULL;
  }
  cJSON *out = cJSON_CreateObject();
  if (id) cJSON_AddStringToObject(out, "id", id->valuestring);
  cJSON_AddStringToObject(out, "type", "function");
  cJSON *f = cJSON_AddObjectToObject(out, "function");
  cJSON_AddStringToObject(f, "name", name->valuestring);
  cJSON_AddItemToObject(f, "arguments", argobj);
  return out;
}

/* The messages checked and normalised into a new array (NULL with e set). */
static cJSON *normalise(const cJSON *msgs, srv_error *e) {
  if (!msgs) {
    BAD(e, "messages", "'messages' is required");
    return NULL;
  }
  if (!cJSON_IsArray(msgs)) {
    BAD(e, "messages", "'messages' must be an array");
    return NULL;
  }
  if (!msgs->child) {
    BAD(e, "messages", "'messages' must not be empty");
    return NULL;
  }
  cJSON *out = cJSON_CreateArray();
  cJSON *call_ids = cJSON_CreateObject(); /* ids of the calls made so far */
  int i = 0;
  const cJSON *m;
  char param[96];
  bool ok = out && call_ids;
  cJSON_ArrayForEach(m, msgs) {
    if (!ok) break;
    snprintf(param, sizeof param, "messages[%d]", i);
    if (!cJSON_IsObject(m)) {
      ok = BAD(e, param, "'%s' must be an object", param);
      break;
    }
    const cJSON *role = srv_json_field(m, "role");
    if (!cJSON_IsString(role)) {
      snprintf(param, sizeof param, "messages[%d].role", i);
      ok = BAD(e, param, "'%s' must be a string", param);
      break;
    }
    const char *rs = role->valuestring;
    if (strcmp(rs, "developer") == 0) rs = "system";
    bool assistant = strcmp(rs, "assistant") == 0, tool = strcmp(rs, "tool") == 0;
    if (strcmp(rs, "system") != 0 && strcmp(rs, "user") != 0 && !assistant && !tool) {
      snprintf(param, sizeof param, "messages[%d].role", i);
      ok = BAD(e, param, "role '%s' is not supported (system, developer, user, assistant, tool)",
               role->valuestring);
      break;
    }
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
    const cJSON *calls = srv_json_field(m, "tool_calls");
    snprintf(param, sizeof param, "messages[%d].content", i);
    if ((!content || cJSON_IsNull(content)) && !(assistant && calls) && !assistant) {
      ok = BAD(e, param, "'%s' is required", param);
      break;
    }
    srv_buf text = {0};
    if (!content_text(content, param, &text, e)) {
      srv_buf_free(&text);
      ok = false;
      break;
    }
    cJSON *nm = cJSON_CreateObject();
    cJSON_AddItemToArray(out, nm);
    cJSON_AddStringToObject(nm, "role", rs);
    cJSON_AddStringToObject(nm, "content", text.p ? text.p : "");
    srv_buf_free(&text);
    const cJSON *name = srv_json_field(m, "name");
    if (name) {
      snprintf(param, sizeof param, "messages[%d].name", i);
      if (!cJSON_IsString(name)) {
        ok = BAD(e, param, "'%s' must be a string", param);
        break;
      }
      cJSON_AddStringToObject(nm, "name", name->valuestring);
    }
    const cJSON *reasoning = srv_json_field(m, "reasoning_content");
    if (reasoning) {
      snprintf(param, sizeof param, "messages[%d].reasoning_content", i);
      if (!assistant || !cJSON_IsString(reasoning)) {
        ok = BAD(e, param, "'%s' must be a string on an assistant message", param);
        break;
      }
      cJSON_AddStringToObject(nm, "reasoning_content", reasoning->valuestring);
    }
    if (calls) {
      snprintf(param, sizeof param, "messages[%d].tool_calls", i);
      if (!assistant || !cJSON_IsArray(calls)) {
        ok = BAD(e, param, "'%s' must be an array on an assistant message", param);
        break;
      }
      cJSON *arr = cJSON_AddArrayToObject(nm, "tool_calls");
      int k = 0;
      const cJSON *tc;
      cJSON_ArrayForEach(tc, calls) {
        char p[128];
        snprintf(p, sizeof p, "messages[%d].tool_calls[%d]", i, k++);
        cJSON *c = tool_call(tc, p, e);
        if (!c) {
          ok = false;
          break;
        }
        const cJSON *id = srv_json_field(c, "id");
        if (id && !cJSON_GetObjectItemCaseSensitive(call_ids, id->valuestring))
          cJSON_AddTrueToObject(call_ids, id->valuestring);
        cJSON_AddItemToArray(arr, c);
      }
      if (!ok) break;
    }
    if (tool) {
      const cJSON *id = srv_json_field(m, "tool_call_id");
      snprintf(param, sizeof param, "messages[%d].tool_call_id", i);
      if (!cJSON_IsString(id)) {
        ok = BAD(e, param, "'%s' is required on a tool message", param);
        break;
      }
      if (!cJSON_GetObjectItemCaseSensitive(call_ids, id->valuestring)) {
        ok = BAD(e, param, "'%s' is '%s', which no earlier assistant tool call has", param,
                 id->valuestring);
        break;
      }
      cJSON_AddStringToObject(nm, "tool_call_id", id->valuestring);
    }
    i++;
  }
  cJSON_Delete(call_ids);
  if (!ok) {
    cJSON_Delete(out);
    if (e->status == 0) srv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    return NULL;
  }
  return out;
}

/* The built-in templates know system, user and assistant text only. */
static bool render_builtin(const srv_model_info *mi, const cJSON *msgs, const cJSON *tools,
                           bool add_generation_prompt, char **prompt, srv_error *e) {
  if (mi->tmpl == PASADA_CHAT_NONE)
    return srv_fail(e, 500, "server_error", NULL, NULL,
                    "the model has no chat template (start the server with --chat-template)");
  if (tools)
    return BAD(e, "tools", "the built-in chat template '%s' cannot render tools",
               pasada_chat_name(mi->tmpl));
  int n = cJSON_GetArraySize(msgs);
  pasada_chat_message *cm = calloc((size_t)n, sizeof *cm);
  if (!cm) return srv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
  int i = 0;
  const cJSON *m;
  bool ok = true;
  cJSON_ArrayForEach(m, msgs) {
    cm[i].role = srv_json_field(m, "role")->valuestring;
    cm[i].content = srv_json_field(m, "content")->valuestring;
    if (strcmp(cm[i].role, "tool") == 0 || srv_json_field(m, "tool_calls")) {
      char param[64];
      snprintf(param, sizeof param, "messages[%d]", i);
      ok = BAD(e, param, "the built-in chat template '%s' cannot render tool calls or results",
               pasada_chat_name(mi->tmpl));
      break;
    }
    i++;
  }
  if (ok && pasada_chat_check(mi->tmpl, cm, (size_t)n) != PASADA_OK)
    ok = BAD(e, "messages", "%s", pasada_last_error());
  if (ok && pasada_chat_render_model(mi->model, mi->tmpl, cm, (size_t)n, add_generation_prompt,
                                     prompt) != PASADA_OK)
    ok = srv_fail(e, 500, "server_error", NULL, NULL, "the chat template failed: %s",
                  pasada_last_error());
  free(cm);
  return ok;
}

static bool render_jinja(const srv_model_info *mi, cJSON *msgs, const cJSON *tools,
                         bool add_generation_prompt, const cJSON *extra, char **prompt,
                         srv_error *e) {
  cJSON *ctx = extra ? cJSON_Duplicate(extra, true) : cJSON_CreateObject();
  if (!ctx) return srv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
  /* the request's own variables first; these are the server's */
  const char *own[] = {"messages", "tools", "add_generation_prompt", "bos_token", "eos_token"};
  for (size_t k = 0; k < sizeof own / sizeof own[0]; k++)
    cJSON_DeleteItemFromObjectCaseSensitive(ctx, own[k]);
  cJSON_AddItemReferenceToObject(ctx, "messages", msgs);
  if (tools) cJSON_AddItemReferenceToObject(ctx, "tools", (cJSON *)tools);
  cJSON_AddBoolToObject(ctx, "add_generation_prompt", add_generation_prompt);
  cJSON_AddStringToObject(ctx, "bos_token", mi->bos_text ? mi->bos_text : "");
  cJSON_AddStringToObject(ctx, "eos_token", mi->eos_text ? mi->eos_text : "");
  char *json = cJSON_PrintUnformatted(ctx);
  cJSON_Delete(ctx);
  if (!json) return srv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
  int rc = pasada_template_render(mi->jinja, json, strlen(json), prompt);
  free(json);
  if (rc == PASADA_ERR_NOMEM) return srv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
  if (rc != PASADA_OK)
    return BAD(e, "messages", "the model's chat template cannot render this conversation: %s",
               pasada_last_error());
  return true;
}

bool srv_chat_render(const srv_model_info *mi, const cJSON *messages, const cJSON *tools,
                     bool add_generation_prompt, const cJSON *extra, char **prompt,
                     bool *in_reasoning, srv_error *e) {
  *prompt = NULL;
  if (in_reasoning) *in_reasoning = false;
  cJSON *msgs = normalise(messages, e);
  if (!msgs) return false;
  char *text = NULL;
  bool ok;
  if (mi->jinja) {
    ok = render_jinja(mi, msgs, tools, add_generation_prompt, extra, &text, e);
  } else {
    ok = render_builtin(mi, msgs, tools, add_generation_prompt, &text, e);
  }
  cJSON_Delete(msgs);
  if (!ok) return false;
  /* the template's memory belongs to the library */
  *prompt = strdup(text);
  pasada_text_free(text);
  if (!*prompt) return srv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
  if (in_reasoning && mi->style.think_open[0]) {
    /* the generation prompt opened a reasoning block and left it open */
    const char *open = mi->style.think_open, *close = mi->style.think_close;
    const char *last_open = NULL;
    for (const char *p = strstr(*prompt, open); p; p = strstr(p + 1, open)) last_open = p;
    if (last_open) {
      const char *after = last_open + strlen(open);
      *in_reasoning = !close[0] || !strstr(after, close);
      for (const char *p = after; *in_reasoning && *p; p++)
        if (*p != ' ' && *p != '\n' && *p != '\r' && *p != '\t') *in_reasoning = false;
    }
  }
  return true;
}

bool srv_chat_tokenize(const srv_model_info *mi, const char *prompt, const char *param,
                       srv_request *r, srv_error *e) {
  size_t len = strlen(prompt);
  /* a template that writes bos_token itself gets no second one */
  bool add_special = !(mi->bos_text && mi->bos_text[0] &&
                       strncmp(prompt, mi->bos_text, strlen(mi->bos_text)) == 0);
  int32_t *ids = NULL;
  size_t n = 0;
  if (pasada_tokenize(mi->tok, prompt, len, add_special, true, &ids, &n) != PASADA_OK)
    return BAD(e, param, "the prompt could not be tokenized: %s", pasada_last_error());
  free(r->prompt);
  r->prompt = ids;
  r->n_prompt = (int32_t)(n > INT32_MAX ? INT32_MAX : n);
  if (n > (size_t)INT32_MAX) return BAD(e, param, "the prompt is too long");
  return true;
}

static char *token_text(const pasada_tokenizer *tok, int32_t id) {
  char piece[PASADA_DETOK_PIECE_MAX + 1];
  if (id < 0) return strdup("");
  size_t n = pasada_token_to_piece(tok, id, true, piece, PASADA_DETOK_PIECE_MAX);
  if (n > PASADA_DETOK_PIECE_MAX) n = PASADA_DETOK_PIECE_MAX;
  piece[n] = 0;
  return strdup(piece);
}

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  srv_buf b = {0};
  char chunk[65536];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0 && b.n < (64u << 20))
    srv_buf_append(&b, chunk, n);
  bool err = ferror(f);
  fclose(f);
  srv_buf_append(&b, "", 0);
  if (err || b.failed || b.n >= (64u << 20)) {
    srv_buf_free(&b);
    return NULL;
  }
  return b.p;
}

bool srv_chat_setup(srv_model_info *mi, const char *name, const char *file) {
  mi->bos_text = token_text(mi->tok, pasada_tokenizer_bos(mi->tok));
  mi->eos_text = token_text(mi->tok, pasada_tokenizer_eos(mi->tok));
  char *src = NULL;
  if (name) {
    if (pasada_chat_from_name(name, &mi->tmpl) != PASADA_OK) {
      fprintf(stderr, "pasada serve: %s\n", pasada_last_error());
      return false;
    }
  } else if (file) {
    src = read_file(file);
    if (!src) {
      fprintf(stderr, "pasada serve: cannot read the chat template file %s\n", file);
      return false;
    }
    pasada_template *t = NULL;
    if (pasada_template_parse(src, strlen(src), &t) != PASADA_OK) {
      fprintf(stderr, "pasada serve: %s: %s\n", file, pasada_last_error());
      free(src);
      return false;
    }
    mi->jinja = t;
    mi->jinja_origin = strdup(file);
  } else if (pasada_model_meta_value(mi->model, "tokenizer.chat_template", &src) == PASADA_OK) {
    pasada_template *t = NULL;
    if (pasada_template_parse(src, strlen(src), &t) == PASADA_OK) {
      mi->jinja = t;
      mi->jinja_origin = strdup("model");
    } else {
      fprintf(stderr,
              "pasada serve: warning: the model's chat template does not parse (%s); using a "
              "built-in template\n",
              pasada_last_error());
    }
  }
  if (!name && !mi->jinja && pasada_chat_detect(mi->model, &mi->tmpl) != PASADA_OK) {
    fprintf(stderr, "pasada serve: warning: %s; /v1/chat/completions will fail\n",
            pasada_last_error());
    mi->tmpl = PASADA_CHAT_NONE;
  }
  srv_out_style_detect(mi->jinja ? src : NULL, pasada_model_arch(mi->model), &mi->style);
  mi->style.vocab = mi->tok;
  if (src && !file)
    pasada_text_free(src);
  else
    free(src);
  return true;
}

const char *srv_chat_describe(const srv_model_info *mi) {
  if (mi->jinja)
    return strcmp(mi->jinja_origin, "model") == 0 ? "the model's (jinja)" : mi->jinja_origin;
  return pasada_chat_name(mi->tmpl);
}

void srv_chat_teardown(srv_model_info *mi) {
  pasada_template_free((pasada_template *)mi->jinja);
  mi->jinja = NULL;
  free(mi->bos_text);
  free(mi->eos_text);
  free(mi->jinja_origin);
  mi->bos_text = mi->eos_text = mi->jinja_origin = NULL;
}
