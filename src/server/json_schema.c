/* json_schema.c: JSON Schema -> GBNF (see json_schema.h): the walk over a
 * schema, its types, objects (properties in order, optional ones optional,
 * additional ones after them with keys that are not the listed names),
 * arrays (prefix items, then items, counted), $ref (one rule per target, so
 * recursion works), anyOf / oneOf (alternatives, siblings merged into each)
 * and the primitive rules. References are resolved and allOf merged by
 * json_schema_ref.c; strings, numbers and literals are json_schema_text.c's. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/json_schema_int.h"

const char *const js_annotations[] = {"title", "description", "examples",   "default",  "$schema",
                                      "$id",   "$comment",    "deprecated", "readOnly", "writeOnly",
                                      "$defs", "definitions", NULL};
static const char *const handled[] = {"type",
                                      "enum",
                                      "const",
                                      "properties",
                                      "required",
                                      "additionalProperties",
                                      "items",
                                      "prefixItems",
                                      "additionalItems",
                                      "minItems",
                                      "maxItems",
                                      "uniqueItems",
                                      "anyOf",
                                      "oneOf",
                                      "allOf",
                                      "$ref",
                                      "minLength",
                                      "maxLength",
                                      "pattern",
                                      "format",
                                      "minimum",
                                      "maximum",
                                      "exclusiveMinimum",
                                      "exclusiveMaximum",
                                      NULL};
static const char *const object_keys[] = {"properties", "required", "additionalProperties", NULL};
static const char *const array_keys[] = {
    "items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems", NULL};
static const char *const string_keys[] = {"minLength", "maxLength", "pattern", "format", NULL};
static const char *const number_keys[] = {"minimum", "maximum", "exclusiveMinimum",
                                          "exclusiveMaximum", NULL};

bool js_in_list(const char *const *list, const char *k) {
  for (; *list; list++)
    if (!strcmp(*list, k)) return true;
  return false;
}

bool js_fail(js_ctx *c, const char *fmt, ...) {
  if (c->failed) return false;
  c->failed = true;
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return srv_fail(c->e, 400, "invalid_request_error", NULL, "", "json_schema: %s (at %s)", msg,
                  c->path);
}

int js_new_rule(js_ctx *c) {
  if (c->n_rules >= JS_MAX_RULES) {
    js_fail(c, "the schema needs more than %d grammar rules", JS_MAX_RULES);
    return -1;
  }
  return ++c->n_rules;
}

void js_emit_rule(js_ctx *c, int rule, const srv_buf *body) {
  srv_buf_printf(c->out, "%s-%d ::= %s\n", c->prefix, rule, body->n ? body->p : "\"\"");
  if (c->out->n > JS_MAX_OUTPUT) js_fail(c, "the grammar exceeds %u bytes", JS_MAX_OUTPUT);
}

void js_rule_ref(js_ctx *c, srv_buf *b, int rule) {
  srv_buf_printf(b, " %s-%d ", c->prefix, rule);
}

void js_prim(js_ctx *c, srv_buf *b, uint32_t prim) {
  static const struct {
    uint32_t bit;
    const char *name;
  } names[] = {{JS_WS, "ws"},         {JS_CHAR, "char"},     {JS_STRING, "string"},
               {JS_INT, "int"},       {JS_NUMBER, "number"}, {JS_VALUE, "value"},
               {JS_OBJECT, "object"}, {JS_ARRAY, "array"},   {JS_KEYCHAR, "keychar"}};
  c->prims |= prim;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (names[i].bit == prim) srv_buf_printf(b, " %s-%s ", c->prefix, names[i].name);
}

/* ---- paths and references ---- */

size_t js_push_path(js_ctx *c, const char *seg) {
  size_t old = strlen(c->path), n = old;
  if (n + 2 < sizeof c->path) c->path[n++] = '/';
  for (const char *p = seg; *p && n + 3 < sizeof c->path; p++) {
    if (*p == '~' || *p == '/') {
      c->path[n++] = '~';
      c->path[n++] = *p == '~' ? '0' : '1';
    } else {
      c->path[n++] = *p;
    }
  }
  c->path[n] = 0;
  return old;
}
void js_pop_path(js_ctx *c, size_t old) {
  c->path[old] = 0;
}

/* ---- generation ---- */

static bool gen(js_ctx *c, const cJSON *s, srv_buf *expr);

/* The rule of a $ref target, generated on first use. */
static int ref_rule(js_ctx *c, const char *ref) {
  const cJSON *target = js_resolve(c, ref);
  if (!target) return -1;
  for (int i = 0; i < c->n_refs; i++)
    if (c->refs[i].node == target) return c->refs[i].rule;
  int rule = js_new_rule(c);
  if (rule < 0) return -1;
  if (c->n_refs == c->cap_refs) {
    int cap = c->cap_refs ? c->cap_refs * 2 : 8;
    js_ref *v = realloc(c->refs, (size_t)cap * sizeof *v);
    if (!v) return js_fail(c, "out of memory"), -1;
    c->refs = v;
    c->cap_refs = cap;
  }
  c->refs[c->n_refs++] = (js_ref){target, rule};
  char saved[sizeof c->path];
  memcpy(saved, c->path, sizeof saved);
  snprintf(c->path, sizeof c->path, "%s", ref);
  srv_buf body = {0};
  bool ok = gen(c, target, &body);
  if (ok) js_emit_rule(c, rule, &body);
  srv_buf_free(&body);
  memcpy(c->path, saved, sizeof saved);
  return ok ? rule : -1;
}

/* Exactly the JSON value v, with the same optional whitespace as elsewhere. */
static bool gen_const(js_ctx *c, const cJSON *v, srv_buf *expr) {
  if (++c->depth > JS_MAX_DEPTH) return js_fail(c, "a constant nests deeper than %d", JS_MAX_DEPTH);
  bool ok = true;
  if (cJSON_IsObject(v) || cJSON_IsArray(v)) {
    const bool obj = cJSON_IsObject(v);
    js_put(expr, obj ? "( \"{\"" : "( \"[\"");
    js_prim(c, expr, JS_WS);
    for (const cJSON *x = v->child; ok && x; x = x->next) {
      if (x != v->child) js_put(expr, " \",\" "), js_prim(c, expr, JS_WS);
      if (obj) {
        cJSON *key = cJSON_CreateString(x->string);
        char *text = key ? cJSON_PrintUnformatted(key) : NULL;
        cJSON_Delete(key);
        if (!text) return js_fail(c, "out of memory");
        js_literal(expr, text, strlen(text));
        free(text);
        js_prim(c, expr, JS_WS);
        js_put(expr, " \":\" ");
        js_prim(c, expr, JS_WS);
      }
      ok = gen_const(c, x, expr);
      js_prim(c, expr, JS_WS);
    }
    js_put(expr, obj ? " \"}\" )" : " \"]\" )");
  } else {
    char *text = cJSON_PrintUnformatted(v);
    if (!text) return js_fail(c, "out of memory");
    js_literal(expr, text, strlen(text));
    free(text);
  }
  c->depth--;
  return ok;
}

/* A value of the enum (filtered by `types` when given) as alternatives. */
static bool gen_values(js_ctx *c, const cJSON *s, const cJSON *types, srv_buf *expr) {
  const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
  const cJSON *cn = cJSON_GetObjectItemCaseSensitive(s, "const");
  if (en && !cJSON_IsArray(en)) return js_fail(c, "enum must be an array");
  js_put(expr, "(");
  int n = 0;
  for (const cJSON *v = en ? en->child : cn; v; v = en ? v->next : NULL) {
    if (cn && en && !cJSON_Compare(v, cn, true)) continue;
    if (types) {
      bool ok = false;
      for (const cJSON *t = types->child; t && !ok; t = t->next) {
        const char *ty = t->valuestring;
        ok = (!strcmp(ty, "string") && cJSON_IsString(v)) ||
             (!strcmp(ty, "boolean") && cJSON_IsBool(v)) ||
             (!strcmp(ty, "null") && cJSON_IsNull(v)) ||
             (!strcmp(ty, "object") && cJSON_IsObject(v)) ||
             (!strcmp(ty, "array") && cJSON_IsArray(v)) ||
             (!strcmp(ty, "number") && cJSON_IsNumber(v)) ||
             (!strcmp(ty, "integer") && cJSON_IsNumber(v) &&
              v->valuedouble == floor(v->valuedouble));
      }
      if (!ok) continue;
    }
    if (n++) js_put(expr, " | ");
    if (!gen_const(c, v, expr)) return false;
  }
  js_put(expr, ")");
  if (!n) return js_fail(c, "%s allows no value", en ? "enum" : "const");
  return true;
}

static bool get_count(js_ctx *c, const cJSON *s, const char *k, int64_t *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, k);
  if (!v) return true;
  if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble != floor(v->valuedouble))
    return js_fail(c, "%s must be a non-negative integer", k);
  if (v->valuedouble > JS_MAX_COUNT)
    return js_fail(c, "%s %.0f is above the supported %d", k, v->valuedouble, JS_MAX_COUNT);
  *out = (int64_t)v->valuedouble;
  return true;
}

static bool gen_string(js_ctx *c, const cJSON *s, srv_buf *expr) {
  const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(s, "format");
  const cJSON *pat = cJSON_GetObjectItemCaseSensitive(s, "pattern");
  bool lengths = cJSON_GetObjectItemCaseSensitive(s, "minLength") ||
                 cJSON_GetObjectItemCaseSensitive(s, "maxLength");
  if ((fmt != NULL) + (pat != NULL) + lengths > 1)
    return js_fail(c, "%s cannot be combined with %s", fmt ? "format" : "pattern",
                   pat && fmt ? "pattern" : "minLength/maxLength");
  if (fmt) {
    if (!cJSON_IsString(fmt)) return js_fail(c, "format must be a string");
    return js_format(c, fmt->valuestring, expr);
  }
  if (pat) {
    if (!cJSON_IsString(pat)) return js_fail(c, "pattern must be a string");
    return js_pattern(c, pat->valuestring, expr);
  }
  int64_t lo = 0, hi = -1;
  if (!get_count(c, s, "minLength", &lo) || !get_count(c, s, "maxLength", &hi)) return false;
  if (hi >= 0 && hi < lo) return js_fail(c, "maxLength is below minLength");
  if (!lo && hi < 0) {
    js_prim(c, expr, JS_STRING);
    return true;
  }
  js_put(expr, "\"\\\"\" ");
  js_prim(c, expr, JS_CHAR);
  if (hi < 0)
    srv_buf_printf(expr, "{%lld,}", (long long)lo);
  else
    srv_buf_printf(expr, "{%lld,%lld}", (long long)lo, (long long)hi);
  js_put(expr, " \"\\\"\"");
  return true;
}

/* The bounds of a numeric schema: integer values only (draft 4's boolean
 * exclusive* too). */
static bool gen_number(js_ctx *c, const cJSON *s, bool integer, srv_buf *expr) {
  bool has[2] = {false, false}, open[2] = {false, false};
  double v[2] = {0, 0};
  static const char *const keys[2][2] = {{"minimum", "exclusiveMinimum"},
                                         {"maximum", "exclusiveMaximum"}};
  for (int side = 0; side < 2; side++) {
    const cJSON *plain = cJSON_GetObjectItemCaseSensitive(s, keys[side][0]);
    const cJSON *ex = cJSON_GetObjectItemCaseSensitive(s, keys[side][1]);
    if (plain && !cJSON_IsNumber(plain)) return js_fail(c, "%s must be a number", keys[side][0]);
    if (ex && !cJSON_IsNumber(ex) && !cJSON_IsBool(ex))
      return js_fail(c, "%s must be a number", keys[side][1]);
    if (plain) has[side] = true, v[side] = plain->valuedouble;
    if (ex && cJSON_IsTrue(ex)) {
      if (!plain) return js_fail(c, "%s: true needs %s", keys[side][1], keys[side][0]);
      open[side] = true;
    }
    if (ex && cJSON_IsNumber(ex)) {
      double e = ex->valuedouble;
      bool tighter = !has[side] || (side == 0 ? e >= v[side] : e <= v[side]);
      if (tighter) has[side] = true, v[side] = e, open[side] = true;
    }
  }
  if (!has[0] && !has[1]) {
    js_prim(c, expr, integer ? JS_INT : JS_NUMBER);
    return true;
  }
  const double limit = 9999999999999999.0; /* JS_MAX_DIGITS nines */
  int64_t b[2];
  for (int side = 0; side < 2; side++) {
    if (!has[side]) continue;
    double x = v[side];
    if (!isfinite(x)) return js_fail(c, "%s is not finite", keys[side][0]);
    if (integer) { /* the nearest integer inside */
      x = side == 0 ? (open[side] ? floor(x) + 1 : ceil(x)) : (open[side] ? ceil(x) - 1 : floor(x));
      open[side] = false;
    } else if (x != floor(x)) {
      return js_fail(c, "%s %g: a number's bounds must be integers to be enforced",
                     keys[side][open[side]], x);
    }
    if (x > limit) x = limit + 1; /* beyond what the digits reach: empty above, all below */
    if (x < -limit) x = -limit - 1;
    b[side] = (int64_t)x;
  }
  if (integer) return js_integer_range(c, has[0], b[0], has[1], b[1], expr);
  return js_number_range(c, has[0], b[0], open[0], has[1], b[1], open[1], expr);
}

/* The code point at s (UTF-8, validated by the JSON parser) and its length. */
static uint32_t next_cp(const char *s, size_t *len) {
  const unsigned char *u = (const unsigned char *)s;
  uint32_t c = u[0];
  size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  if (n > 1) c &= 0x3Fu >> (n - 1);
  for (size_t i = 1; i < n && u[i]; i++) c = c << 6 | (u[i] & 0x3F);
  *len = n;
  return c;
}

/* Key content (no quotes) that is none of names[0..n), given its first
 * `depth` bytes match theirs: a rule per node of the names' trie (by
 * character), each allowing the end when no name ends there, a character
 * no name continues with (then anything), or a name's next character. */
static int gen_key_trie(js_ctx *c, char **names, int n, size_t depth) {
  int rule = js_new_rule(c);
  if (rule < 0) return -1;
  srv_buf body = {0};
  bool word = false;
  for (int i = 0; i < n; i++) word |= strlen(names[i]) == depth;
  js_put(&body, word ? "( " : "( \"\" | ");
  js_put(&body, "[^\"\\\\\\x00-\\x1F");
  for (int i = 0; i < n; i++) {
    if (strlen(names[i]) <= depth) continue;
    size_t len;
    srv_buf_printf(&body, "\\U%08X", next_cp(names[i] + depth, &len));
  }
  js_put(&body, "] ");
  js_prim(c, &body, JS_KEYCHAR);
  js_put(&body, "*");
  bool *done = calloc((size_t)n + 1, 1);
  char **sub = malloc(((size_t)n + 1) * sizeof *sub);
  bool ok = done && sub;
  for (int i = 0; ok && i < n; i++) {
    if (done[i] || strlen(names[i]) <= depth) continue;
    size_t len, len2;
    uint32_t cp = next_cp(names[i] + depth, &len);
    int m = 0;
    for (int j = i; j < n; j++)
      if (!done[j] && strlen(names[j]) > depth && next_cp(names[j] + depth, &len2) == cp)
        sub[m++] = names[j], done[j] = true;
    js_put(&body, " | ");
    js_literal(&body, names[i] + depth, len);
    int child = gen_key_trie(c, sub, m, depth + len);
    if (child < 0)
      ok = false;
    else
      js_rule_ref(c, &body, child);
  }
  js_put(&body, ")");
  if (ok) js_emit_rule(c, rule, &body);
  srv_buf_free(&body);
  free(done);
  free(sub);
  return ok ? rule : -1;
}

static bool gen_object(js_ctx *c, const cJSON *s, srv_buf *expr) {
  const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
  const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
  const cJSON *add = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
  if (props && !cJSON_IsObject(props)) return js_fail(c, "properties must be an object");
  if (req && !cJSON_IsArray(req)) return js_fail(c, "required must be an array");
  for (const cJSON *r = req ? req->child : NULL; r; r = r->next)
    if (!cJSON_IsString(r)) return js_fail(c, "required must list strings");
  if (add && !cJSON_IsBool(add) && !cJSON_IsObject(add))
    return js_fail(c, "additionalProperties must be a boolean or a schema");
  /* members: the properties in order, then required names not among them */
  int k = 0;
  for (const cJSON *p = props ? props->child : NULL; p; p = p->next) k++;
  for (const cJSON *r = req ? req->child : NULL; r; r = r->next)
    if (!props || !cJSON_GetObjectItemCaseSensitive(props, r->valuestring)) k++;
  const cJSON **schema = calloc((size_t)k + 1, sizeof *schema);
  char **names = calloc((size_t)k + 1, sizeof *names);
  bool *required = calloc((size_t)k + 1, 1);
  int *kv = calloc((size_t)k + 1, sizeof *kv);
  bool ok = schema && names && required && kv;
  if (!ok) js_fail(c, "out of memory");
  int i = 0;
  for (const cJSON *p = props ? props->child : NULL; ok && p; p = p->next, i++) {
    names[i] = p->string, schema[i] = p;
    for (const cJSON *r = req ? req->child : NULL; r; r = r->next)
      required[i] |= !strcmp(r->valuestring, p->string);
  }
  for (const cJSON *r = req ? req->child : NULL; ok && r; r = r->next)
    if (!props || !cJSON_GetObjectItemCaseSensitive(props, r->valuestring)) {
      if (cJSON_IsFalse(add))
        ok = js_fail(c, "'%.64s' is required, but not a property and additionalProperties is false",
                     r->valuestring);
      names[i] = r->valuestring, schema[i] = NULL, required[i++] = true;
    }
  /* one rule per member: "name" ws ":" ws value ws */
  for (i = 0; ok && i < k; i++) {
    if ((kv[i] = js_new_rule(c)) < 0) {
      ok = false;
      break;
    }
    srv_buf body = {0};
    cJSON *key = cJSON_CreateString(names[i]);
    char *text = key ? cJSON_PrintUnformatted(key) : NULL;
    cJSON_Delete(key);
    if (!text) {
      ok = js_fail(c, "out of memory");
      break;
    }
    js_literal(&body, text, strlen(text));
    free(text);
    js_prim(c, &body, JS_WS);
    js_put(&body, "\":\"");
    js_prim(c, &body, JS_WS);
    size_t old = js_push_path(c, "properties");
    size_t old2 = js_push_path(c, names[i]);
    if (schema[i])
      ok = gen(c, schema[i], &body);
    else
      js_prim(c, &body, JS_VALUE);
    js_pop_path(c, old2);
    js_pop_path(c, old);
    js_prim(c, &body, JS_WS);
    if (ok) js_emit_rule(c, kv[i], &body);
    srv_buf_free(&body);
  }
  /* additional properties: a key none of the names, then the schema's value */
  srv_buf addkv = {0};
  const bool extra = !cJSON_IsFalse(add);
  if (ok && extra) {
    js_put(&addkv, "\"\\\"\" ");
    if (k) {
      int t = gen_key_trie(c, names, k, 0);
      if (t < 0)
        ok = false;
      else
        js_rule_ref(c, &addkv, t);
    } else {
      js_prim(c, &addkv, JS_KEYCHAR);
      js_put(&addkv, "*");
    }
    js_put(&addkv, " \"\\\"\" ");
    js_prim(c, &addkv, JS_WS);
    js_put(&addkv, "\":\"");
    js_prim(c, &addkv, JS_WS);
    size_t old = js_push_path(c, "additionalProperties");
    if (cJSON_IsObject(add))
      ok = ok && gen(c, add, &addkv);
    else
      js_prim(c, &addkv, JS_VALUE);
    js_pop_path(c, old);
    js_prim(c, &addkv, JS_WS);
  }
  /* the chain: S(i) = nothing written yet from member i on, R(i) = after a
   * member (each next one needs a comma) */
  srv_buf s_next = {0}, r_next = {0}, sep = {0};
  js_put(&sep, "\",\"");
  js_prim(c, &sep, JS_WS);
  if (ok && extra) {
    srv_buf_printf(&s_next, "( %s ( %s %s )* )?", addkv.p, sep.p, addkv.p);
    srv_buf_printf(&r_next, "( %s %s )*", sep.p, addkv.p);
  }
  for (i = k - 1; ok && i >= 0; i--) {
    int rs = js_new_rule(c), rr = js_new_rule(c);
    if (rs < 0 || rr < 0) {
      ok = false;
      break;
    }
    srv_buf sb = {0}, rb = {0};
    /* S(i) */
    js_rule_ref(c, &sb, kv[i]);
    srv_buf_append(&sb, r_next.n ? r_next.p : "\"\"", r_next.n ? r_next.n : 2);
    if (!required[i]) {
      js_put(&sb, " | ");
      srv_buf_append(&sb, s_next.n ? s_next.p : "\"\"", s_next.n ? s_next.n : 2);
    }
    /* R(i) */
    if (!required[i]) js_put(&rb, "( ");
    srv_buf_append(&rb, sep.p, sep.n);
    js_rule_ref(c, &rb, kv[i]);
    if (!required[i]) js_put(&rb, " )?");
    srv_buf_append(&rb, r_next.n ? r_next.p : "\"\"", r_next.n ? r_next.n : 2);
    js_emit_rule(c, rs, &sb);
    js_emit_rule(c, rr, &rb);
    srv_buf_free(&sb);
    srv_buf_free(&rb);
    s_next.n = r_next.n = 0;
    js_rule_ref(c, &s_next, rs);
    js_rule_ref(c, &r_next, rr);
  }
  if (ok) {
    js_put(expr, "\"{\"");
    js_prim(c, expr, JS_WS);
    srv_buf_append(expr, s_next.n ? s_next.p : "\"\"", s_next.n ? s_next.n : 2);
    js_put(expr, " \"}\"");
  }
  srv_buf_free(&s_next);
  srv_buf_free(&r_next);
  srv_buf_free(&sep);
  srv_buf_free(&addkv);
  free(schema);
  free(names);
  free(required);
  free(kv);
  return ok && !c->failed;
}

/* An item's rule (a schema, or any value for true / absent). */
static int item_rule(js_ctx *c, const cJSON *item, const char *seg) {
  int rule = js_new_rule(c);
  if (rule < 0) return -1;
  srv_buf body = {0};
  size_t old = js_push_path(c, seg);
  bool ok = true;
  if (!item || cJSON_IsTrue(item))
    js_prim(c, &body, JS_VALUE);
  else
    ok = gen(c, item, &body);
  js_pop_path(c, old);
  if (ok) js_emit_rule(c, rule, &body);
  srv_buf_free(&body);
  return ok ? rule : -1;
}

static bool gen_array(js_ctx *c, const cJSON *s, srv_buf *expr) {
  const cJSON *prefix = cJSON_GetObjectItemCaseSensitive(s, "prefixItems");
  const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
  const cJSON *rest = items;
  const char *rest_name = "items";
  if (!prefix && cJSON_IsArray(items)) { /* draft 4-7 tuples */
    prefix = items;
    rest = cJSON_GetObjectItemCaseSensitive(s, "additionalItems");
    rest_name = "additionalItems";
  } else if (cJSON_GetObjectItemCaseSensitive(s, "additionalItems")) {
    return js_fail(c, "additionalItems needs items to be an array");
  }
  if (prefix && !cJSON_IsArray(prefix)) return js_fail(c, "prefixItems must be an array");
  if (rest && !cJSON_IsBool(rest) && !cJSON_IsObject(rest))
    return js_fail(c, "%s must be a schema", rest_name);
  const cJSON *uniq = cJSON_GetObjectItemCaseSensitive(s, "uniqueItems");
  if (uniq && !cJSON_IsFalse(uniq)) return js_fail(c, "uniqueItems is not supported");
  int64_t lo = 0, hi = -1;
  if (!get_count(c, s, "minItems", &lo) || !get_count(c, s, "maxItems", &hi)) return false;
  const int n_pre = prefix ? cJSON_GetArraySize(prefix) : 0;
  if (cJSON_IsFalse(rest) && (hi < 0 || hi > n_pre)) hi = n_pre;
  if (hi >= 0 && hi < lo)
    return js_fail(c, "minItems is above maxItems (or the items there can be)");
  int *pre = calloc((size_t)n_pre + 1, sizeof *pre);
  if (!pre) return js_fail(c, "out of memory");
  int i = 0;
  bool ok = true;
  for (const cJSON *p = prefix ? prefix->child : NULL; ok && p; p = p->next, i++) {
    char seg[48];
    snprintf(seg, sizeof seg, "%s/%d", prefix == items ? "items" : "prefixItems", i);
    ok = (pre[i] = item_rule(c, p, seg)) >= 0;
  }
  int r = -1;
  if (ok && !cJSON_IsFalse(rest) && (hi < 0 || hi > n_pre))
    ok = (r = item_rule(c, rest, rest_name)) >= 0;
  if (!ok) {
    free(pre);
    return false;
  }
  srv_buf list = {0}, sep = {0};
  js_put(&sep, "\",\"");
  js_prim(c, &sep, JS_WS);
  /* from the innermost: the rest items, counted, after n_pre elements */
  const int64_t used = n_pre;
  if (r >= 0) {
    int64_t a = lo > used ? lo - used : 0, b = hi < 0 ? -1 : hi - used;
    if (n_pre == 0) { /* the first element has no comma */
      srv_buf one = {0};
      js_rule_ref(c, &one, r);
      js_prim(c, &one, JS_WS);
      if (b != 0) {
        srv_buf_printf(&list, "( %s ( %s %s )", one.p, sep.p, one.p);
        if (b < 0)
          srv_buf_printf(&list, "{%lld,}", (long long)(a > 0 ? a - 1 : 0));
        else
          srv_buf_printf(&list, "{%lld,%lld}", (long long)(a > 0 ? a - 1 : 0), (long long)(b - 1));
        js_put(&list, a > 0 ? " )" : " )?");
      }
      srv_buf_free(&one);
    } else {
      srv_buf_printf(&list, "( %s", sep.p);
      js_rule_ref(c, &list, r);
      js_prim(c, &list, JS_WS);
      if (b < 0)
        srv_buf_printf(&list, "){%lld,}", (long long)a);
      else
        srv_buf_printf(&list, "){%lld,%lld}", (long long)a, (long long)b);
    }
  }
  /* then the prefix items, inside out: element j is optional once lo are written */
  for (int j = n_pre - 1; j >= 0; j--) {
    srv_buf el = {0};
    if (j > 0) srv_buf_append(&el, sep.p, sep.n);
    js_rule_ref(c, &el, pre[j]);
    js_prim(c, &el, JS_WS);
    srv_buf_append(&el, list.n ? list.p : "", list.n);
    list.n = 0;
    if (list.p) list.p[0] = 0;
    if (j >= lo)
      srv_buf_printf(&list, "( %s )?", el.p);
    else
      srv_buf_append(&list, el.p, el.n);
    srv_buf_free(&el);
  }
  js_put(expr, "\"[\"");
  js_prim(c, expr, JS_WS);
  srv_buf_append(expr, list.n ? list.p : "", list.n);
  js_put(expr, " \"]\"");
  srv_buf_free(&list);
  srv_buf_free(&sep);
  free(pre);
  return !c->failed;
}

static bool gen_type(js_ctx *c, const cJSON *s, const char *type, srv_buf *expr) {
  if (!strcmp(type, "string")) return gen_string(c, s, expr);
  if (!strcmp(type, "integer")) return gen_number(c, s, true, expr);
  if (!strcmp(type, "number")) return gen_number(c, s, false, expr);
  if (!strcmp(type, "boolean")) return js_put(expr, "(\"true\" | \"false\")"), true;
  if (!strcmp(type, "null")) return js_put(expr, "\"null\""), true;
  if (!strcmp(type, "object")) return gen_object(c, s, expr);
  if (!strcmp(type, "array")) return gen_array(c, s, expr);
  return js_fail(c, "unknown type '%.64s'", type);
}

/* The type keywords imply when "type" is absent (NULL: none). */
static const char *implied_type(js_ctx *c, const cJSON *s) {
  const char *t = NULL;
  int kinds = 0;
  for (const cJSON *k = s->child; k; k = k->next) {
    const char *kt = js_in_list(object_keys, k->string)   ? "object"
                     : js_in_list(array_keys, k->string)  ? "array"
                     : js_in_list(string_keys, k->string) ? "string"
                     : js_in_list(number_keys, k->string) ? "number"
                                                          : NULL;
    if (kt && (!t || strcmp(t, kt))) t = kt, kinds++;
  }
  if (kinds > 1) return js_fail(c, "keywords of several types and no 'type'"), NULL;
  return t;
}

static bool gen(js_ctx *c, const cJSON *s, srv_buf *expr) {
  if (c->failed) return false;
  if (cJSON_IsTrue(s)) return js_prim(c, expr, JS_VALUE), true;
  if (cJSON_IsFalse(s)) return js_fail(c, "the schema false matches nothing");
  if (!cJSON_IsObject(s)) return js_fail(c, "a schema must be an object or a boolean");
  for (const cJSON *k = s->child; k; k = k->next)
    if (!js_in_list(js_annotations, k->string) && !js_in_list(handled, k->string))
      return js_fail(c, "unsupported keyword '%.64s'", k->string);
  if (++c->depth > JS_MAX_DEPTH) return js_fail(c, "schemas nest deeper than %d", JS_MAX_DEPTH);
  bool ok = true;
  const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
  const cJSON *all = cJSON_GetObjectItemCaseSensitive(s, "allOf");
  const cJSON *any = cJSON_GetObjectItemCaseSensitive(s, "anyOf");
  const cJSON *one = cJSON_GetObjectItemCaseSensitive(s, "oneOf");
  if (ref && !js_constrains(s, "$ref")) { /* a plain reference: a rule, so recursion works */
    if (!cJSON_IsString(ref)) ok = js_fail(c, "$ref must be a string");
    int rule = ok ? ref_rule(c, ref->valuestring) : -1;
    if (rule < 0)
      ok = false;
    else
      js_rule_ref(c, expr, rule);
  } else if (ref || all) {
    const cJSON *flat = js_flatten(c, s);
    ok = flat && gen(c, flat, expr);
  } else if (any || one) {
    if (any && one) ok = js_fail(c, "anyOf and oneOf together are not supported");
    const cJSON *alts = any ? any : one;
    const char *name = any ? "anyOf" : "oneOf";
    if (ok && (!cJSON_IsArray(alts) || !cJSON_GetArraySize(alts)))
      ok = js_fail(c, "%s must be a non-empty array", name);
    cJSON *siblings = NULL;
    if (ok && js_constrains(s, name)) {
      siblings = js_own(c, cJSON_Duplicate(s, true));
      if (siblings) cJSON_DeleteItemFromObjectCaseSensitive(siblings, name);
      ok = siblings != NULL;
    }
    js_put(expr, "(");
    int i = 0;
    for (const cJSON *b = ok ? alts->child : NULL; ok && b; b = b->next, i++) {
      char seg[32];
      snprintf(seg, sizeof seg, "%s/%d", name, i);
      size_t old = js_push_path(c, seg);
      if (i) js_put(expr, " | ");
      const cJSON *branch = b;
      if (siblings) {
        const cJSON *flat = js_flatten(c, b);
        branch = flat ? js_merge(c, siblings, flat) : NULL;
      }
      ok = branch && gen(c, branch, expr);
      js_pop_path(c, old);
    }
    js_put(expr, ")");
  } else {
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(s, "type");
    cJSON *types = js_own(c, cJSON_CreateArray());
    if (!types) ok = false;
    if (ok && type) {
      if (!cJSON_IsString(type) && !cJSON_IsArray(type))
        ok = js_fail(c, "type must be a string or an array");
      for (const cJSON *t = cJSON_IsArray(type) ? type->child : NULL; ok && t; t = t->next)
        if (!cJSON_IsString(t)) ok = js_fail(c, "type must list strings");
      if (ok) js_as_types(c, type, types);
    } else if (ok) {
      const char *t = implied_type(c, s);
      if (c->failed)
        ok = false;
      else if (t)
        cJSON_AddItemToArray(types, cJSON_CreateString(t));
    }
    if (!ok) {
    } else if (cJSON_GetObjectItemCaseSensitive(s, "enum") ||
               cJSON_GetObjectItemCaseSensitive(s, "const")) {
      ok = gen_values(c, s, cJSON_GetArraySize(types) ? types : NULL, expr);
    } else if (!cJSON_GetArraySize(types)) {
      js_prim(c, expr, JS_VALUE);
    } else {
      js_put(expr, "(");
      int i = 0;
      for (const cJSON *t = types->child; ok && t; t = t->next, i++) {
        if (i) js_put(expr, " | ");
        ok = gen_type(c, s, t->valuestring, expr);
      }
      js_put(expr, ")");
    }
  }
  c->depth--;
  if (expr->failed) return js_fail(c, "out of memory");
  return ok && !c->failed;
}

/* ---- the primitives and the entry points ---- */

static void emit_prims(js_ctx *c) {
  /* what uses what: value -> object, array, string, number; object -> string, value, ws ... */
  if (c->prims & JS_VALUE) c->prims |= JS_OBJECT | JS_ARRAY | JS_STRING | JS_NUMBER;
  if (c->prims & (JS_OBJECT | JS_ARRAY)) c->prims |= JS_VALUE | JS_WS | JS_STRING | JS_NUMBER;
  if (c->prims & JS_STRING) c->prims |= JS_CHAR;
  if (c->prims & JS_NUMBER) c->prims |= JS_INT;
  const char *p = c->prefix;
  srv_buf *o = c->out;
  if (c->prims & JS_WS) srv_buf_printf(o, "%s-ws ::= ( \" \" | \"\\n\" [ \\t]{0,24} )?\n", p);
  if (c->prims & JS_CHAR)
    srv_buf_printf(
        o,
        "%s-char ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} )\n",
        p);
  if (c->prims & JS_KEYCHAR) srv_buf_printf(o, "%s-keychar ::= [^\"\\\\\\x00-\\x1F]\n", p);
  if (c->prims & JS_STRING) srv_buf_printf(o, "%s-string ::= \"\\\"\" %s-char* \"\\\"\"\n", p, p);
  if (c->prims & JS_INT)
    srv_buf_printf(o, "%s-int ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,%d} )\n", p, JS_MAX_DIGITS - 1);
  if (c->prims & JS_NUMBER)
    srv_buf_printf(o, "%s-number ::= %s-int ( \".\" [0-9]{1,%d} )? ( [eE] [-+]? [0-9]{1,3} )?\n", p,
                   p, JS_MAX_DIGITS);
  if (c->prims & JS_VALUE)
    srv_buf_printf(
        o,
        "%s-value ::= %s-object | %s-array | %s-string | %s-number | \"true\" | \"false\" | "
        "\"null\"\n",
        p, p, p, p, p);
  if (c->prims & JS_OBJECT)
    srv_buf_printf(o,
                   "%s-object ::= \"{\" %s-ws ( %s-member ( \",\" %s-ws %s-member )* )? \"}\"\n"
                   "%s-member ::= %s-string %s-ws \":\" %s-ws %s-value %s-ws\n",
                   p, p, p, p, p, p, p, p, p, p, p);
  if (c->prims & JS_ARRAY)
    srv_buf_printf(
        o, "%s-array ::= \"[\" %s-ws ( %s-value %s-ws ( \",\" %s-ws %s-value %s-ws )* )? \"]\"\n",
        p, p, p, p, p, p, p);
}

static bool is_rule_name(const char *s) {
  if (!*s) return false;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
          *s == '-' || *s == '_'))
      return false;
  return true;
}

/* Whether every key and string of v is valid UTF-8 (the JSON parser does
 * not check; GBNF needs it), within JS_MAX_DEPTH levels. */
static bool utf8_clean(const cJSON *v, int depth) {
  if (depth > 4 * JS_MAX_DEPTH) return false;
  if (v->string && !srv_utf8_valid(v->string, strlen(v->string))) return false;
  if (cJSON_IsString(v) && !srv_utf8_valid(v->valuestring, strlen(v->valuestring))) return false;
  for (const cJSON *k = v->child; k; k = k->next)
    if (!utf8_clean(k, depth + 1)) return false;
  return true;
}

bool srv_json_schema_rules(const cJSON *schema, const char *prefix, srv_buf *out, srv_error *e) {
  js_ctx c = {.root = schema, .prefix = prefix, .out = out, .e = e, .path = "#"};
  if (!prefix || !is_rule_name(prefix))
    return srv_fail(e, 400, "invalid_request_error", NULL, "", "json_schema: bad rule name '%s'",
                    prefix ? prefix : "");
  if (!schema || !utf8_clean(schema, 0))
    return srv_fail(e, 400, "invalid_request_error", NULL, "", "json_schema: %s",
                    schema ? "invalid UTF-8 or nesting too deep" : "no schema");
  srv_buf body = {0};
  bool ok = js_check_ref_cycles(&c) && js_check_finite(&c) && gen(&c, schema, &body);
  if (ok) {
    srv_buf_printf(out, "%s ::= %s\n", prefix, body.p ? body.p : "\"\"");
    emit_prims(&c);
  }
  srv_buf_free(&body);
  for (int i = 0; i < c.n_owned; i++) cJSON_Delete(c.owned[i]);
  free(c.owned);
  free(c.refs);
  if (ok && out->failed)
    ok = srv_fail(e, 500, "server_error", NULL, "", "json_schema: out of memory");
  return ok && !c.failed;
}

char *srv_json_schema_gbnf(const cJSON *schema, srv_error *e) {
  /* the value may follow the same bounded whitespace as inside it (a JSON
   * text may start with whitespace; models often open with a newline) */
  srv_buf out = {0};
  js_put(&out, "root ::= ( \" \" | \"\\n\" [ \\t]{0,24} )? root-v\n");
  bool ok;
  if (!schema) {
    cJSON *obj = cJSON_CreateObject();
    cJSON_AddStringToObject(obj, "type", "object");
    ok = obj && srv_json_schema_rules(obj, "root-v", &out, e);
    cJSON_Delete(obj);
  } else {
    ok = srv_json_schema_rules(schema, "root-v", &out, e);
  }
  if (!ok || out.failed) {
    if (ok) srv_fail(e, 500, "server_error", NULL, "", "json_schema: out of memory");
    srv_buf_free(&out);
    return NULL;
  }
  return out.p;
}
