/* output_formats.c: the tool-call blocks of the families that write calls
 * inline in their content: JSON call objects between markers (Hermes, Llama
 * 3, Mistral, Granite, Command R, ...), marker-delimited name + JSON sections
 * (DeepSeek, Kimi, Solar), Python calls (LFM2) and Gemma 4's literals, and
 * the table that gives each family its triggers (XML-style parameters are in
 * output_xml.c). Every block parser lists
 * its calls only once the whole block has parsed. */
#include <stdlib.h>
#include <string.h>

#include "server/output_int.h"

#define LEN(s) (sizeof(s) - 1)

/* ---- JSON call objects ---- */

/* {"name": .., "arguments"|"parameters": {..} | "<json>"}, Cohere's
 * {"tool_name": .., "parameters": ..} and {"function": {"name", "arguments"}}.
 * src[0..n): the object's text, whose arguments object is taken as written
 * (compacted), not re-printed from cJSON's doubles. */
static bool pend_call_object(op_state *p, op_pending *pd, const cJSON *o, const char *src,
                             size_t n) {
  if (!cJSON_IsObject(o)) return false;
  const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, "function");
  size_t vs = 0, ve = 0;
  if (cJSON_IsObject(f)) {
    o = f;
    if (op_json_span(src, n, "function", &vs, &ve))
      src += vs, n = ve - vs;
    else
      src = NULL;
  }
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "name");
  if (!name) name = cJSON_GetObjectItemCaseSensitive(o, "tool_name");
  if (!cJSON_IsString(name)) return false;
  const char *key = "arguments";
  const cJSON *args = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!args) args = cJSON_GetObjectItemCaseSensitive(o, key = "parameters");
  const char *nm = name->valuestring;
  if (cJSON_IsString(args))
    return op_pend_text(p, pd, nm, strlen(nm), args->valuestring, strlen(args->valuestring));
  if (args && !cJSON_IsObject(args)) return false;
  if (args && src && op_json_span(src, n, key, &vs, &ve))
    return op_pend_text(p, pd, nm, strlen(nm), src + vs, ve - vs);
  return op_pend_obj(p, pd, nm, strlen(nm), args);
}

typedef struct {
  const char *close; /* the block's end marker; NULL: the block is one JSON value */
  bool sequence;     /* NULL close: objects may follow one another (ws, ';') */
} json_spec;

/* Call objects (or arrays of them) from body to the end marker. */
static blk_rc json_block(op_state *p, size_t at, size_t body, const json_spec *js, size_t *end) {
  op_pending pd = {0};
  size_t i = body;
  blk_rc rc = BLK_NOTCALL;
  int values = 0;
  for (;;) {
    i = op_skip_ws(p, i);
    if (values && i < p->n && (p->t[i] == ',' || p->t[i] == ';')) i = op_skip_ws(p, i + 1);
    if (js->close) {
      int c = op_at3(p, i, js->close);
      if (c == 1 && values) {
        *end = i + strlen(js->close);
        rc = BLK_DONE;
        break;
      }
      if ((c == 2 || i == p->n) && values && p->final) { /* the end marker cut off */
        *end = p->n;
        rc = BLK_DONE;
        break;
      }
    } else if (values && (!js->sequence || (i < p->n && p->t[i] != '{'))) {
      *end = values && js->sequence ? i : *end;
      rc = BLK_DONE;
      break;
    }
    if (i == p->n || (js->close && op_at3(p, i, js->close) == 2)) {
      if (!js->close && values && p->final) {
        *end = p->n;
        rc = BLK_DONE;
        break;
      }
      rc = BLK_MORE;
      break;
    }
    char c = p->t[i];
    *end = i; /* not a call: the text examined so far is content */
    if (c != '{' && c != '[') break;
    size_t e = op_json_end(p->t, p->n, i);
    if (e == (size_t)-1) break;
    if (e == 0) {
      rc = BLK_MORE;
      break;
    }
    cJSON *v = op_json_escapes_ok(p->t + i, e - i) ? cJSON_ParseWithLength(p->t + i, e - i) : NULL;
    bool ok = v != NULL;
    if (cJSON_IsArray(v)) {
      const cJSON *el;
      size_t es = 0, ee = 0;
      ok = cJSON_GetArraySize(v) > 0;
      cJSON_ArrayForEach(el, v) {
        const bool span = op_json_span(p->t + i, e - i, NULL, &es, &ee);
        ok = ok && pend_call_object(p, &pd, el, span ? p->t + i + es : NULL, span ? ee - es : 0);
        if (!span) ee = (size_t)-1; /* the spans are lost: the rest re-printed */
      }
    } else if (v) {
      ok = pend_call_object(p, &pd, v, p->t + i, e - i);
    }
    cJSON_Delete(v);
    if (!ok) {
      *end = e;
      break;
    }
    values++;
    i = e;
    *end = e;
  }
  if (rc == BLK_DONE && !p->oom) op_pend_commit(p, &pd);
  op_pend_free(&pd);
  if (rc == BLK_MORE) *end = at;
  return rc;
}

#define JSON_BLOCK(fn, close_, seq)                                    \
  static blk_rc fn(op_state *p, size_t at, size_t body, size_t *end) { \
    static const json_spec js = {close_, seq};                         \
    return json_block(p, at, body, &js, end);                          \
  }
JSON_BLOCK(blk_hermes, "</tool_call>", false)
JSON_BLOCK(blk_tool_calls, "</tool_calls>", true)
JSON_BLOCK(blk_nemotron, "</TOOLCALL>", false)
JSON_BLOCK(blk_action, "<|END_ACTION|>", false)
JSON_BLOCK(blk_one_value, NULL, false)
JSON_BLOCK(blk_llama_json, NULL, true)

/* Llama 3's bare JSON: the '{' the trigger matched is part of the value. */
static blk_rc blk_llama(op_state *p, size_t at, size_t body, size_t *end) {
  (void)body;
  return blk_llama_json(p, at, at, end);
}

/* Command R+: Action: ```json [..] ``` */
static blk_rc blk_command_r_plus(op_state *p, size_t at, size_t body, size_t *end) {
  size_t i = op_skip_ws(p, body);
  static const char *fences[] = {"```json", "```"};
  for (int k = 0; k < 2; k++) {
    int c = op_at3(p, i, fences[k]);
    if (c == 2 || i == p->n) {
      *end = at;
      return BLK_MORE;
    }
    if (c == 1) {
      static const json_spec js = {"```", false};
      return json_block(p, at, i + strlen(fences[k]), &js, end);
    }
  }
  return BLK_NOTCALL;
}

/* ---- name + JSON arguments between markers ---- */

bool op_ident(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.' || c == ':' || c == '/';
}

/* A JSON object at i (after whitespace) then `close` (NULL: none).
 * Sets *e past it, or when it is not one, to where that showed. */
static blk_rc args_then(op_state *p, size_t i, const char *close, size_t *a0, size_t *a1,
                        size_t *e) {
  i = op_skip_ws(p, i);
  *e = i;
  if (i == p->n) return BLK_MORE;
  if (p->t[i] != '{') return BLK_NOTCALL;
  size_t j = op_json_end(p->t, p->n, i);
  if (j == 0) return BLK_MORE;
  if (j == (size_t)-1) return BLK_NOTCALL;
  *a0 = i;
  *a1 = j;
  if (!close) {
    *e = j;
    return BLK_DONE;
  }
  j = op_skip_ws(p, j);
  int c = op_at3(p, j, close);
  if (c == 1) {
    *e = j + strlen(close);
    return BLK_DONE;
  }
  if (c == 2 || j == p->n) {
    if (p->final) { /* only the end marker is missing */
      *e = p->n;
      return BLK_DONE;
    }
    return BLK_MORE;
  }
  *e = j;
  return BLK_NOTCALL;
}

/* Mistral: [TOOL_CALLS][{..}] or [TOOL_CALLS]name[CALL_ID]id[ARGS]{..}. */
static blk_rc blk_mistral(op_state *p, size_t at, size_t body, size_t *end) {
  size_t i = op_skip_ws(p, body);
  if (i < p->n && (p->t[i] == '[' || p->t[i] == '{')) return blk_one_value(p, at, i, end);
  size_t k = i;
  while (k < p->n && op_ident(p->t[k])) k++;
  size_t name_end = k;
  *end = k; /* when not a call: the text examined */
  if (k == p->n) return BLK_MORE;
  if (k == i) return BLK_NOTCALL;
  int c = op_at3(p, k, "[CALL_ID]");
  if (c == 2) return BLK_MORE;
  if (c == 1) {
    k += LEN("[CALL_ID]");
    while (k < p->n && op_ident(p->t[k])) k++;
  }
  c = op_at3(p, k, "[ARGS]");
  *end = k;
  if (c == 2 || k == p->n) return BLK_MORE;
  if (c == 0) return BLK_NOTCALL;
  size_t a0, a1, e;
  blk_rc rc = args_then(p, k + LEN("[ARGS]"), NULL, &a0, &a1, &e);
  *end = e;
  if (rc != BLK_DONE) return rc;
  op_pending pd = {0};
  if (!op_pend_text(p, &pd, p->t + i, name_end - i, p->t + a0, a1 - a0)) {
    op_pend_free(&pd);
    return BLK_NOTCALL;
  }
  op_pend_commit(p, &pd);
  *end = e;
  return BLK_DONE;
}

/* A section of calls: open, (call_open call)*, sec_close. At the end of the
 * generation a cut-off section keeps its whole calls. */
blk_rc op_section(op_state *p, size_t at, size_t body, const char *call_open, const char *sec_close,
                  op_call_fn fn, const void *ctx, size_t *end) {
  op_pending pd = {0};
  size_t i = body;
  blk_rc rc;
  for (;;) {
    i = op_skip_ws(p, i);
    int c = op_at3(p, i, sec_close);
    if (c == 1) {
      rc = BLK_DONE;
      *end = i + strlen(sec_close);
      break;
    }
    int o = op_at3(p, i, call_open);
    if (o == 1) {
      size_t e = i;
      rc = fn(p, ctx, i + strlen(call_open), &e, &pd);
      if (rc == BLK_DONE) {
        i = e;
        continue;
      }
      if (rc == BLK_NOTCALL) {
        *end = e; /* the text examined is content */
        break;
      }
    } else if (c == 2 || o == 2 || i == p->n) {
      rc = BLK_MORE;
    } else {
      rc = pd.n ? BLK_DONE : BLK_NOTCALL; /* text after the calls ends the section */
      *end = i;
      break;
    }
    /* incomplete: at the end of the generation the whole calls stand (and a
       cut-off end marker goes) */
    if (p->final && pd.n) {
      op_pend_commit(p, &pd);
      *end = op_at3(p, i, sec_close) == 2 ? p->n : i;
    } else {
      *end = at;
    }
    op_pend_free(&pd);
    return BLK_MORE;
  }
  if (rc == BLK_DONE && !p->oom) op_pend_commit(p, &pd);
  op_pend_free(&pd);
  return rc;
}

/* Kimi: functions.NAME:IDX<|tool_call_argument_begin|>{..}<|tool_call_end|> */
static blk_rc call_kimi(op_state *p, const void *ctx, size_t i, size_t *e, op_pending *pd) {
  (void)ctx;
  size_t k = op_name_end(p, i, "<|tool_call_argument_begin|>");
  if (k == p->n) return BLK_MORE;
  if (k == (size_t)-1) return BLK_NOTCALL;
  size_t n0 = i, n1 = k;
  if (n1 - n0 > LEN("functions.") && !memcmp(p->t + n0, "functions.", LEN("functions.")))
    n0 += LEN("functions.");
  for (size_t q = n1; q > n0; q--)
    if (p->t[q - 1] == ':') {
      n1 = q - 1;
      break;
    }
  size_t a0, a1;
  blk_rc rc =
      args_then(p, k + LEN("<|tool_call_argument_begin|>"), "<|tool_call_end|>", &a0, &a1, e);
  if (rc != BLK_DONE) return rc;
  return op_pend_text(p, pd, p->t + n0, n1 - n0, p->t + a0, a1 - a0) ? BLK_DONE : BLK_NOTCALL;
}

static blk_rc blk_kimi(op_state *p, size_t at, size_t body, size_t *end) {
  return op_section(p, at, body, "<|tool_call_begin|>", "<|tool_calls_section_end|>", call_kimi,
                    NULL, end);
}

#define DS(s) "<\xef\xbd\x9c" s "\xef\xbd\x9c>"
#define DS_SEP DS("tool\xe2\x96\x81sep")
#define DSML      \
  "<\xef\xbd\x9c" \
  "DSML"          \
  "\xef\xbd\x9c"

/* DeepSeek R1: function<sep>NAME\n```json\n{..}\n```<call end>; V3.1: NAME<sep>{..}<call end> */
static blk_rc call_deepseek(op_state *p, const void *ctx, size_t i, size_t *e, op_pending *pd) {
  (void)ctx;
  static const char *call_end =
      DS("tool\xe2\x96\x81"
         "call\xe2\x96\x81"
         "end");
  size_t k = op_name_end(p, i, DS_SEP);
  if (k == p->n) return BLK_MORE;
  if (k == (size_t)-1) return BLK_NOTCALL;
  size_t n0 = i, n1 = k, a = k + LEN(DS_SEP);
  bool r1 = k - i == LEN("function") && !memcmp(p->t + i, "function", LEN("function"));
  if (r1) {
    n0 = a;
    n1 = op_name_end(p, a, "\n");
    if (n1 == p->n) return BLK_MORE;
    if (n1 == (size_t)-1) return BLK_NOTCALL;
    a = op_skip_ws(p, n1);
    int c = op_at3(p, a, "```json");
    if (c == 2 || a == p->n) return BLK_MORE;
    if (c == 1) a += LEN("```json");
  }
  size_t a0, a1, j;
  blk_rc rc = args_then(p, a, r1 ? NULL : call_end, &a0, &a1, &j);
  if (rc != BLK_DONE) return rc;
  if (r1) {
    j = op_skip_ws(p, j);
    int c = op_at3(p, j, "```");
    if (c == 2) return BLK_MORE;
    if (c == 1) j += 3;
    j = op_skip_ws(p, j);
    c = op_at3(p, j, call_end);
    if (c == 2 || (c == 0 && j == p->n && !p->final)) return BLK_MORE;
    if (c == 0 && j < p->n) return BLK_NOTCALL;
    j = c == 1 ? j + strlen(call_end) : p->n;
  }
  *e = j;
  return op_pend_text(p, pd, p->t + n0, n1 - n0, p->t + a0, a1 - a0) ? BLK_DONE : BLK_NOTCALL;
}

static blk_rc blk_deepseek(op_state *p, size_t at, size_t body, size_t *end) {
  return op_section(p, at, body,
                    DS("tool\xe2\x96\x81"
                       "call\xe2\x96\x81"
                       "begin"),
                    DS("tool\xe2\x96\x81"
                       "calls\xe2\x96\x81"
                       "end"),
                    call_deepseek, NULL, end);
}

/* Solar: ID<|tool_call:name|>NAME<|tool_call:args|>{..}<|tool_call:end|> */
static blk_rc call_solar(op_state *p, const void *ctx, size_t i, size_t *e, op_pending *pd) {
  (void)ctx;
  size_t k = op_name_end(p, i, "<|tool_call:name|>");
  if (k == p->n) return BLK_MORE;
  if (k == (size_t)-1) return BLK_NOTCALL;
  size_t n0 = k + LEN("<|tool_call:name|>");
  size_t n1 = op_name_end(p, n0, "<|tool_call:args|>");
  if (n1 == p->n) return BLK_MORE;
  if (n1 == (size_t)-1) return BLK_NOTCALL;
  size_t a0, a1;
  blk_rc rc = args_then(p, n1 + LEN("<|tool_call:args|>"), "<|tool_call:end|>", &a0, &a1, e);
  if (rc != BLK_DONE) return rc;
  return op_pend_text(p, pd, p->t + n0, n1 - n0, p->t + a0, a1 - a0) ? BLK_DONE : BLK_NOTCALL;
}

static blk_rc blk_solar(op_state *p, size_t at, size_t body, size_t *end) {
  return op_section(p, at, body, "<|tool_call:begin|>", "<|calls|>", call_solar, NULL, end);
}

/* functionary v3.1: <function=NAME>{..}</function> */
static blk_rc blk_function_eq(op_state *p, size_t at, size_t body, size_t *end) {
  *end = at;
  size_t k = op_name_end(p, body, ">");
  if (k == p->n) return BLK_MORE;
  if (k == (size_t)-1) return BLK_NOTCALL;
  size_t a0, a1, e;
  blk_rc rc = args_then(p, k + 1, "</function>", &a0, &a1, &e);
  if (rc == BLK_MORE) return rc;
  *end = e; /* past the call, or the text examined when it is not one */
  if (rc == BLK_NOTCALL) return rc;
  op_pending pd = {0};
  bool ok = op_pend_text(p, &pd, p->t + body, k - body, p->t + a0, a1 - a0);
  if (ok) op_pend_commit(p, &pd);
  op_pend_free(&pd);
  return ok ? BLK_DONE : BLK_NOTCALL;
}

/* ---- Python calls: name(key=value, ...) ---- */

/* One call at t[*i]: name(k=v, ..); name.call(..) is name (Llama's built-in tools). */
static bool py_call(op_state *p, op_pending *pd, const char *t, size_t n, size_t *i) {
  size_t j = *i;
  while (j < n && (t[j] == ' ' || t[j] == '\n')) j++;
  size_t n0 = j;
  while (j < n && op_ident(t[j]) && t[j] != ':') j++;
  size_t n1 = j;
  if (n1 == n0 || j >= n || t[j] != '(') return false;
  if (n1 - n0 > 5 && !memcmp(t + n1 - 5, ".call", 5)) n1 -= 5;
  cJSON *args = cJSON_CreateObject();
  j++;
  for (;;) {
    while (j < n && (t[j] == ' ' || t[j] == '\n' || t[j] == ',')) j++;
    if (j < n && t[j] == ')') break;
    size_t k0 = j;
    while (j < n && op_ident(t[j]) && t[j] != '.' && t[j] != ':') j++;
    size_t k1 = j;
    while (j < n && t[j] == ' ') j++;
    cJSON *v = NULL;
    if (k1 > k0 && j < n && t[j] == '=') {
      j++;
      v = op_loose_value(t, n, &j, 0);
    }
    char key[257];
    if (!v || k1 - k0 > 256 || !args) {
      cJSON_Delete(v);
      cJSON_Delete(args);
      return false;
    }
    memcpy(key, t + k0, k1 - k0);
    key[k1 - k0] = 0;
    cJSON_DeleteItemFromObjectCaseSensitive(args, key);
    cJSON_AddItemToObject(args, key, v);
  }
  bool ok = op_pend_obj(p, pd, t + n0, n1 - n0, args);
  cJSON_Delete(args);
  *i = j + 1;
  return ok;
}

/* LFM2: <|tool_call_start|>[f(a=1), g(b='x')]<|tool_call_end|> (or JSON calls). */
static blk_rc blk_lfm2(op_state *p, size_t at, size_t body, size_t *end) {
  *end = at;
  size_t close = op_find(p, body, "<|tool_call_end|>");
  size_t stop = close;
  if (close == p->n) {
    if (!p->final) return BLK_MORE;
  }
  size_t i = op_skip_ws(p, body);
  if (i < stop && p->t[i] == '{') {
    json_spec js = {"<|tool_call_end|>", true};
    return json_block(p, at, body, &js, end);
  }
  op_pending pd = {0};
  bool ok = i < stop && p->t[i] == '[';
  const char *t = p->t;
  size_t j = i + 1;
  while (ok) {
    while (j < stop && (t[j] == ' ' || t[j] == '\n' || t[j] == ',')) j++;
    if (j < stop && t[j] == ']') {
      j = op_skip_ws(p, j + 1);
      ok = j == stop && pd.n > 0;
      break;
    }
    ok = py_call(p, &pd, t, stop, &j);
  }
  if (ok && close == p->n && !p->final) ok = false;
  if (ok) {
    op_pend_commit(p, &pd);
    *end = close == p->n ? p->n : close + LEN("<|tool_call_end|>");
  }
  op_pend_free(&pd);
  if (!ok && close == p->n) return BLK_MORE;        /* final: the cut-off call is content */
  if (!ok) *end = close + LEN("<|tool_call_end|>"); /* the whole block is content */
  return ok ? BLK_DONE : BLK_NOTCALL;
}

/* Llama 3.x <|python_tag|>: {json} calls, name.call(k="v") built-ins, or
 * code for the code interpreter ("python" with {"code": ..}) to the end. */
static blk_rc blk_python_tag(op_state *p, size_t at, size_t body, size_t *end) {
  size_t i = op_skip_ws(p, body);
  if (i < p->n && p->t[i] == '{') {
    static const json_spec js = {NULL, true};
    return json_block(p, at, i, &js, end);
  }
  *end = at;
  if (!p->final) return BLK_MORE; /* runs to the end of the message */
  if (i == p->n) return BLK_NOTCALL;
  op_pending pd = {0};
  size_t j = i;
  bool ok = py_call(p, &pd, p->t, p->n, &j) && op_skip_ws(p, j) == p->n;
  if (!ok) {
    op_pend_free(&pd);
    pd = (op_pending){0};
    cJSON *a = cJSON_CreateObject();
    size_t len = p->n - i;
    char *code = malloc(len + 1);
    if (a && code) {
      memcpy(code, p->t + i, len);
      code[len] = 0;
      cJSON_AddStringToObject(a, "code", code);
      ok = op_pend_obj(p, &pd, "python", 6, a);
    } else {
      p->oom = true;
    }
    free(code);
    cJSON_Delete(a);
  }
  if (ok) op_pend_commit(p, &pd);
  op_pend_free(&pd);
  *end = p->n;
  return ok ? BLK_DONE : BLK_NOTCALL;
}

/* ---- Gemma 4: <|tool_call>call:NAME{k:<|"|>v<|"|>,n:1}<tool_call|> ---- */

static blk_rc blk_gemma(op_state *p, size_t at, size_t body, size_t *end) {
  *end = at;
  size_t close = op_find(p, body, "<tool_call|>");
  if (close == p->n) return BLK_MORE;
  size_t i = op_skip_ws(p, body);
  if (close - i < 5 || memcmp(p->t + i, "call:", 5)) {
    *end = close + LEN("<tool_call|>");
    return BLK_NOTCALL;
  }
  size_t n0 = i + 5, j = n0;
  while (j < close && op_ident(p->t[j]) && p->t[j] != ':') j++;
  size_t n1 = j;
  cJSON *args = op_loose_value(p->t, close, &j, 0);
  bool ok = cJSON_IsObject(args) && op_skip_ws(p, j) == close;
  op_pending pd = {0};
  ok = ok && op_pend_obj(p, &pd, p->t + n0, n1 - n0, args);
  cJSON_Delete(args);
  if (ok) op_pend_commit(p, &pd);
  op_pend_free(&pd);
  *end = close + LEN("<tool_call|>"); /* the call, or content when it is not one */
  return ok ? BLK_DONE : BLK_NOTCALL;
}

/* ---- the families ---- */

static const op_format formats[SRV_OUT_COUNT] = {
    [SRV_OUT_PLAIN] = {"plain", {{0}}, {0}, NULL},
    [SRV_OUT_HERMES] = {"hermes", {{"<tool_call>", blk_hermes, false}}, {0}, NULL},
    [SRV_OUT_LLAMA3] = {"llama3",
                        {{"{", blk_llama, true}, {"<|python_tag|>", blk_python_tag, false}},
                        {0},
                        NULL},
    [SRV_OUT_MISTRAL] = {"mistral", {{"[TOOL_CALLS]", blk_mistral, false}}, {0}, NULL},
    [SRV_OUT_GPT_OSS] = {"gpt-oss", {{0}}, {0}, op_whole_harmony},
    [SRV_OUT_DEEPSEEK] = {"deepseek",
                          {{DS("tool\xe2\x96\x81"
                               "calls\xe2\x96\x81"
                               "begin"),
                            blk_deepseek, false}},
                          {0},
                          NULL},
    [SRV_OUT_QWEN3_CODER] = {"qwen3-coder", {{"<tool_call>", blk_qwen3_coder, false}}, {0}, NULL},
    [SRV_OUT_GRANITE] = {"granite",
                         {{"<|tool_call|>", blk_one_value, false}},
                         {"<response>", "</response>"},
                         NULL},
    [SRV_OUT_FUNCTIONARY] = {"functionary",
                             {{"<function=", blk_function_eq, false},
                              {"<|python_tag|>", blk_python_tag, false}},
                             {0},
                             NULL},
    [SRV_OUT_COMMAND_R] = {"command-r",
                           {{"<|START_ACTION|>", blk_action, false}},
                           {"<|START_RESPONSE|>", "<|END_RESPONSE|>", "<|START_TEXT|>",
                            "<|END_TEXT|>"},
                           NULL},
    [SRV_OUT_GEMMA] = {"gemma",
                       {{"<|tool_call>", blk_gemma, false}},
                       {"<|tool_response>"}, /* the model's cue for the results */
                       NULL},
    [SRV_OUT_KIMI] = {"kimi", {{"<|tool_calls_section_begin|>", blk_kimi, false}}, {0}, NULL},
    [SRV_OUT_GLM] = {"glm", {{"<tool_call>", blk_glm, false}}, {0}, NULL},
    [SRV_OUT_MINIMAX] = {"minimax", {{"<minimax:tool_call>", blk_minimax, false}}, {0}, NULL},
    [SRV_OUT_DEEPSEEK_DSML] = {"deepseek-dsml",
                               {{DSML "function_calls>", blk_dsml_f, false},
                                {DSML "tool_calls>", blk_dsml_t, false}},
                               {0},
                               NULL},
    [SRV_OUT_FUNCTIONARY_V32] = {"functionary-v3.2", {{0}}, {0}, op_whole_functionary},
    [SRV_OUT_FIREFUNCTION] = {"firefunction", {{"functools", blk_one_value, false}}, {0}, NULL},
    [SRV_OUT_COMMAND_R_PLUS] = {"command-r-plus",
                                {{"Action:", blk_command_r_plus, false}},
                                {0},
                                NULL},
    [SRV_OUT_MINIMAX_M1] = {"minimax-m1", {{"<tool_calls>", blk_tool_calls, false}}, {0}, NULL},
    [SRV_OUT_APRIEL] = {"apriel",
                        {{"<tool_calls>", blk_tool_calls, false}},
                        {"[END FINAL RESPONSE]"},
                        NULL},
    [SRV_OUT_NEMOTRON] = {"nemotron", {{"<TOOLCALL>", blk_nemotron, false}}, {0}, NULL},
    [SRV_OUT_SOLAR] = {"solar",
                       {{"<|tool_calls|>", blk_solar, false}},
                       {"<|begin|>assistant", "<|content|>", "<|end|>"},
                       NULL},
    [SRV_OUT_LFM2] = {"lfm2", {{"<|tool_call_start|>", blk_lfm2, false}}, {0}, NULL},
    [SRV_OUT_GIGACHAT] = {"gigachat",
                          {{"<|function_call|>", blk_one_value, false},
                           {"function call<|role_sep|>", blk_one_value, false}},
                          {"<|message_sep|>"},
                          NULL},
    [SRV_OUT_MINICPM] = {"minicpm", {{"<function name=\"", blk_minicpm, false}}, {0}, NULL},
    [SRV_OUT_ATEM] = {"atem", {{0}}, {0}, op_whole_atem},
};

const op_format *op_format_of(srv_out_format f) {
  return f >= 0 && f < SRV_OUT_COUNT ? &formats[f] : &formats[SRV_OUT_PLAIN];
}
