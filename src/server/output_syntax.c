/* output_syntax.c: the value syntaxes inside tool calls: where a JSON value
 * ends in a stream, compact JSON text, loose literals (Python's, Gemma's
 * <|"|> strings) turned into JSON, and the typing of XML-style parameter
 * values by the request's tool schemas. */
#define _GNU_SOURCE /* memmem */
#include <stdlib.h>
#include <string.h>

#include "server/output_int.h"

static bool ws(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

size_t op_json_end(const char *t, size_t n, size_t i) {
  if (i >= n) return 0;
  char c = t[i];
  if (c == '"') {
    for (size_t k = i + 1; k < n; k++) {
      if (t[k] == '\\')
        k++;
      else if (t[k] == '"')
        return k + 1;
    }
    return 0;
  }
  if (c != '{' && c != '[') {
    size_t k = i;
    while (k < n && (t[k] == '-' || t[k] == '+' || t[k] == '.' || (t[k] >= '0' && t[k] <= '9') ||
                     (t[k] >= 'a' && t[k] <= 'z') || (t[k] >= 'A' && t[k] <= 'Z')))
      k++;
    if (k == i) return (size_t)-1;
    return k < n ? k : 0;
  }
  size_t depth = 0;
  bool in_str = false;
  for (size_t k = i; k < n; k++) {
    char d = t[k];
    if (in_str) {
      if (d == '\\')
        k++;
      else if (d == '"')
        in_str = false;
      continue;
    }
    if (d == '"')
      in_str = true;
    else if (d == '{' || d == '[')
      depth++;
    else if (d == '}' || d == ']') {
      if (--depth == 0) return k + 1;
    }
  }
  return 0;
}

static size_t skip_json_ws(const char *t, size_t n, size_t i) {
  while (i < n && ws(t[i])) i++;
  return i;
}

bool op_json_span(const char *t, size_t n, const char *key, size_t *vs, size_t *ve) {
  size_t i = skip_json_ws(t, n, 0);
  if (i >= n || (t[i] != '{' && t[i] != '[')) return false;
  const bool object = t[i] == '{';
  if (!key && (object || *ve > n)) return false;
  i = key || *ve == 0 ? i + 1 : *ve; /* past the opening bracket, or the last element */
  const size_t klen = key ? strlen(key) : 0;
  for (;;) {
    i = skip_json_ws(t, n, i);
    if (i < n && t[i] == ',') i = skip_json_ws(t, n, i + 1);
    if (i >= n || t[i] == '}' || t[i] == ']') return false;
    bool match = !key;
    if (object) {
      const size_t ke = op_json_end(t, n, i);
      if (t[i] != '"' || ke == 0 || ke == (size_t)-1) return false;
      match = key && ke - i - 2 == klen && memcmp(t + i + 1, key, klen) == 0;
      i = skip_json_ws(t, n, ke);
      if (i >= n || t[i] != ':') return false;
      i = skip_json_ws(t, n, i + 1);
    }
    const size_t e = op_json_end(t, n, i);
    if (e == 0 || e == (size_t)-1) {
      /* a literal that ends the text has no end mark: only inside a container */
      return false;
    }
    if (match) {
      *vs = i;
      *ve = e;
      return true;
    }
    i = e;
  }
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* t[i] follows a backslash in a JSON string: one of JSON's escapes. */
static bool escape_ok(const char *t, size_t n, size_t i) {
  if (i >= n) return false;
  if (t[i] != 'u') return strchr("\"\\/bfnrt", t[i]) && t[i];
  if (i + 4 >= n) return false;
  for (size_t k = 1; k <= 4; k++)
    if (hexval(t[i + k]) < 0) return false;
  return true;
}

bool op_json_escapes_ok(const char *t, size_t n) {
  bool in_str = false;
  for (size_t i = 0; i < n; i++) {
    if (!in_str) {
      in_str = t[i] == '"';
    } else if (t[i] == '\\') {
      if (!escape_ok(t, n, i + 1)) return false;
      i++;
    } else if (t[i] == '"') {
      in_str = false;
    }
  }
  return true;
}

char *op_json_compact(const char *t, size_t n, bool *oom) {
  *oom = false;
  if (!op_json_escapes_ok(t, n)) return NULL;
  const char *end = NULL;
  cJSON *v = cJSON_ParseWithLengthOpts(t, n, &end, false);
  if (!v) return NULL;
  cJSON_Delete(v);
  size_t ctl = 0;
  for (const char *q = end; q < t + n; q++)
    if ((unsigned char)*q > 0x20) return NULL;
  for (size_t i = 0; i < n; i++) ctl += (unsigned char)t[i] < 0x20;
  char *o = malloc(n + 5 * ctl + 1);
  if (!o) {
    *oom = true;
    return NULL;
  }
  size_t k = 0;
  bool in_str = false;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)t[i];
    if (in_str) {
      if (c < 0x20) { /* JSON escapes control characters (a raw NUL too) */
        static const char hex[] = "0123456789abcdef";
        memcpy(o + k, "\\u00", 4);
        o[k + 4] = hex[c >> 4];
        o[k + 5] = hex[c & 15];
        k += 6;
        continue;
      }
      o[k++] = (char)c;
      if (c == '\\' && i + 1 < n)
        o[k++] = t[++i];
      else if (c == '"')
        in_str = false;
      continue;
    }
    if (c <= 0x20) continue; /* cJSON's whitespace, which it lets through */
    if (c == '"') in_str = true;
    o[k++] = (char)c;
  }
  o[k] = 0;
  return o;
}

/* ---- loose literals ---- */

static const char GQ[] = "<|\"|>"; /* Gemma 4's string quote */

static size_t skip(const char *t, size_t n, size_t i) {
  while (i < n && ws(t[i])) i++;
  return i;
}

static bool starts(const char *t, size_t n, size_t i, const char *s) {
  size_t k = strlen(s);
  return i + k <= n && memcmp(t + i, s, k) == 0;
}

static void put_utf8(char *o, size_t *k, unsigned cp) {
  if (cp < 0x80)
    o[(*k)++] = (char)cp;
  else if (cp < 0x800) {
    o[(*k)++] = (char)(0xc0 | cp >> 6);
    o[(*k)++] = (char)(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    o[(*k)++] = (char)(0xe0 | cp >> 12);
    o[(*k)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
    o[(*k)++] = (char)(0x80 | (cp & 0x3f));
  } else {
    o[(*k)++] = (char)(0xf0 | cp >> 18);
    o[(*k)++] = (char)(0x80 | ((cp >> 12) & 0x3f));
    o[(*k)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
    o[(*k)++] = (char)(0x80 | (cp & 0x3f));
  }
}

/* A Python string literal ('...' or "...", backslash escapes) at t[*i]. */
static cJSON *py_string(const char *t, size_t n, size_t *i) {
  char q = t[*i];
  char *o = malloc(n - *i + 1);
  if (!o) return NULL;
  size_t k = 0;
  for (size_t j = *i + 1; j < n; j++) {
    char c = t[j];
    size_t after = j + 1;
    while (after < n && t[after] == ' ') after++;
    /* a quote not followed by a delimiter is the text's own (an unescaped
       'it's' as templates write it) */
    if (c == q && (after == n || strchr(",)]}:", t[after]))) {
      o[k] = 0;
      cJSON *s = cJSON_CreateString(o);
      free(o);
      *i = j + 1;
      return s;
    }
    if (c != '\\') {
      o[k++] = c;
      continue;
    }
    if (++j >= n) break;
    char e = t[j];
    int w = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
    if (w) {
      unsigned cp = 0;
      if (j + (size_t)w >= n) break;
      bool ok = true;
      for (int d = 1; d <= w; d++) {
        int h = hexval(t[j + (size_t)d]);
        if (h < 0) ok = false;
        cp = cp * 16 + (unsigned)(h < 0 ? 0 : h);
      }
      if (!ok || cp > 0x10ffff || cp == 0 || (cp >= 0xd800 && cp < 0xe000)) break;
      put_utf8(o, &k, cp);
      j += (size_t)w;
      continue;
    }
    switch (e) {
      case 'n':
        o[k++] = '\n';
        break;
      case 't':
        o[k++] = '\t';
        break;
      case 'r':
        o[k++] = '\r';
        break;
      case '0':
        break; /* NUL cannot be in a C string: dropped */
      default:
        o[k++] = e;
        break;
    }
  }
  free(o);
  return NULL;
}

static cJSON *gemma_string(const char *t, size_t n, size_t *i) {
  size_t a = *i + strlen(GQ);
  const char *e = memmem(t + a, n - a, GQ, strlen(GQ));
  if (!e) return NULL;
  size_t len = (size_t)(e - (t + a));
  char *s = malloc(len + 1);
  if (!s) return NULL;
  memcpy(s, t + a, len);
  s[len] = 0;
  for (size_t k = 0; k < len; k++)
    if (!s[k]) s[k] = ' ';
  cJSON *v = cJSON_CreateString(s);
  free(s);
  *i = (size_t)(e - t) + strlen(GQ);
  return v;
}

static bool ident_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.' || (unsigned char)c >= 0x80;
}

/* Whether s is a number in JSON's syntax. */
static bool json_number(const char *s) {
  if (*s == '-') s++;
  if (*s == '0')
    s++;
  else if (*s >= '1' && *s <= '9')
    while (*s >= '0' && *s <= '9') s++;
  else
    return false;
  if (*s == '.') {
    if (!(*++s >= '0' && *s <= '9')) return false;
    while (*s >= '0' && *s <= '9') s++;
  }
  if (*s == 'e' || *s == 'E') {
    s++;
    if (*s == '+' || *s == '-') s++;
    if (!(*s >= '0' && *s <= '9')) return false;
    while (*s >= '0' && *s <= '9') s++;
  }
  return *s == 0;
}

/* A JSON number's text; Python's "+1", "1_000", ".5" are taken through strtod. */
static cJSON *number(const char *t, size_t n, size_t *i) {
  size_t j = *i;
  while (j < n && (t[j] == '-' || t[j] == '+' || t[j] == '.' || t[j] == '_' || t[j] == 'e' ||
                   t[j] == 'E' || (t[j] >= '0' && t[j] <= '9')))
    j++;
  size_t len = j - *i;
  if (len == 0 || len > 64) return NULL;
  char buf[72];
  size_t k = 0;
  for (size_t q = *i; q < j; q++)
    if (t[q] != '_') buf[k++] = t[q];
  buf[k] = 0;
  char *end;
  double d = strtod(buf, &end);
  if (end != buf + k || k == 0) return NULL;
  *i = j;
  /* JSON's own number syntax is kept as written (big integers stay exact). */
  if (json_number(buf)) return cJSON_CreateRaw(buf);
  return cJSON_CreateNumber(d);
}

cJSON *op_loose_value(const char *t, size_t n, size_t *i, int depth) {
  size_t j = skip(t, n, *i);
  if (j >= n || depth > 64) return NULL;
  cJSON *v = NULL;
  char c = t[j];
  if (starts(t, n, j, GQ)) {
    v = gemma_string(t, n, &j);
  } else if (c == '"' || c == '\'') {
    v = py_string(t, n, &j);
  } else if (c == '{') {
    v = cJSON_CreateObject();
    j = skip(t, n, j + 1);
    while (v && j < n && t[j] != '}') {
      size_t k = j;
      char *key = NULL;
      if (starts(t, n, j, GQ) || t[j] == '"' || t[j] == '\'') {
        cJSON *ks = starts(t, n, j, GQ) ? gemma_string(t, n, &k) : py_string(t, n, &k);
        if (ks) key = strdup(ks->valuestring);
        cJSON_Delete(ks);
      } else {
        while (k < n && ident_char(t[k])) k++;
        if (k > j && (key = malloc(k - j + 1))) {
          memcpy(key, t + j, k - j);
          key[k - j] = 0;
        }
      }
      k = skip(t, n, k);
      cJSON *val = NULL;
      if (key && k < n && t[k] == ':') {
        k++;
        val = op_loose_value(t, n, &k, depth + 1);
      }
      if (!val) {
        free(key);
        cJSON_Delete(v);
        return NULL;
      }
      cJSON_AddItemToObject(v, key, val);
      free(key);
      j = skip(t, n, k);
      if (j < n && t[j] == ',')
        j = skip(t, n, j + 1);
      else if (j < n && t[j] != '}')
        j = n;
    }
    if (j >= n) {
      cJSON_Delete(v);
      return NULL;
    }
    j++;
  } else if (c == '[' || c == '(') {
    char close = c == '[' ? ']' : ')';
    v = cJSON_CreateArray();
    j = skip(t, n, j + 1);
    while (v && j < n && t[j] != close) {
      cJSON *e = op_loose_value(t, n, &j, depth + 1);
      if (!e) {
        cJSON_Delete(v);
        return NULL;
      }
      cJSON_AddItemToArray(v, e);
      j = skip(t, n, j);
      if (j < n && t[j] == ',')
        j = skip(t, n, j + 1);
      else if (j < n && t[j] != close)
        j = n;
    }
    if (j >= n) {
      cJSON_Delete(v);
      return NULL;
    }
    j++;
  } else if (c == '-' || c == '+' || c == '.' || (c >= '0' && c <= '9')) {
    v = number(t, n, &j);
  } else {
    size_t k = j;
    while (k < n && ident_char(t[k])) k++;
    size_t len = k - j;
#define IS(w) (len == strlen(w) && memcmp(t + j, w, len) == 0)
    if (IS("true") || IS("True"))
      v = cJSON_CreateTrue();
    else if (IS("false") || IS("False"))
      v = cJSON_CreateFalse();
    else if (IS("null") || IS("None") || IS("none"))
      v = cJSON_CreateNull();
#undef IS
    j = k;
  }
  if (v) *i = j;
  return v;
}

/* ---- XML-style parameter values ---- */

/* The schema type of parameter `key` of function `fn` in the request's
 * tools: 1 a string, 0 another type, -1 unknown. */
static int schema_is_string(const cJSON *tools, const char *fn, const char *key) {
  const cJSON *t;
  cJSON_ArrayForEach(t, tools) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(t, "function");
    if (!f) f = t;
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(f, "name");
    if (!cJSON_IsString(name) || strcmp(name->valuestring, fn)) continue;
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(f, "parameters");
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(params, "properties");
    const cJSON *ty =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(props, key), "type");
    if (cJSON_IsString(ty)) return strcmp(ty->valuestring, "string") == 0;
    if (cJSON_IsArray(ty)) { /* ["string", "null"]: a string unless it says null */
      bool str = false, other = false;
      const cJSON *e;
      cJSON_ArrayForEach(e, ty) {
        if (cJSON_IsString(e) && !strcmp(e->valuestring, "string"))
          str = true;
        else if (cJSON_IsString(e) && strcmp(e->valuestring, "null"))
          other = true;
      }
      return str && !other ? 1 : str ? -1 : 0;
    }
    return -1;
  }
  return -1;
}

cJSON *op_param_value(const op_state *p, const char *fn, const char *key, const char *v, size_t n,
                      int string_attr) {
  int is_str = string_attr;
  if (is_str < 0 && p->o->tool_defs)
    is_str = schema_is_string((const cJSON *)p->o->tool_defs, fn, key);
  char *s = malloc(n + 1);
  if (!s) return NULL;
  memcpy(s, v, n);
  s[n] = 0;
  for (size_t k = 0; k < n; k++)
    if (!s[k]) s[k] = ' ';
  cJSON *r = NULL;
  if (is_str != 1 && op_json_escapes_ok(v, n)) {
    const char *end = NULL;
    r = cJSON_ParseWithLengthOpts(v, n, &end, false);
    if (r) {
      for (const char *q = end; q < v + n; q++)
        if (!ws(*q)) {
          cJSON_Delete(r);
          r = NULL;
          break;
        }
    }
    if (!r) { /* a Python literal (True, {'a': 1}) */
      size_t i = 0;
      r = op_loose_value(v, n, &i, 0);
      if (r && skip(v, n, i) != n) {
        cJSON_Delete(r);
        r = NULL;
      }
    }
    /* Unknown type: text that reads as a JSON string stays the raw text. */
    if (r && is_str < 0 && cJSON_IsString(r)) {
      cJSON_Delete(r);
      r = NULL;
    }
  }
  if (!r) r = cJSON_CreateString(s);
  free(s);
  return r;
}
