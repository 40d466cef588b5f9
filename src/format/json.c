/* json.c: the strict JSON reader of json.h: recursive descent over a
 * bounded buffer, depth-limited, each value one node in a tree. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "format/json.h"

typedef struct {
  const unsigned char *p;
  size_t n, pos;
  int max_depth;
  const char *why;
} parser;

static void ws(parser *s) {
  while (s->pos < s->n && (s->p[s->pos] == ' ' || s->p[s->pos] == '\t' || s->p[s->pos] == '\n' ||
                           s->p[s->pos] == '\r'))
    s->pos++;
}

static pj_value *fail(parser *s, const char *why) {
  if (!s->why) s->why = why;
  return NULL;
}

static int hex4(parser *s, uint32_t *out) {
  if (s->n - s->pos < 4) return -1;
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) {
    unsigned char c = s->p[s->pos + i];
    v <<= 4;
    if (c >= '0' && c <= '9')
      v |= c - '0';
    else if (c >= 'a' && c <= 'f')
      v |= c - 'a' + 10;
    else if (c >= 'A' && c <= 'F')
      v |= c - 'A' + 10;
    else
      return -1;
  }
  s->pos += 4;
  *out = v;
  return 0;
}

/* Valid UTF-8 sequence length at p (1..4) within n bytes, 0 if invalid. */
static int utf8_len(const unsigned char *p, size_t n) {
  unsigned char c = p[0];
  if (c < 0x80) return 1;
  int len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
  if (!len || c > 0xF4 || (size_t)len > n) return 0;
  for (int i = 1; i < len; i++)
    if ((p[i] & 0xC0) != 0x80) return 0;
  if (len == 3 && ((c == 0xE0 && p[1] < 0xA0) || (c == 0xED && p[1] >= 0xA0))) return 0;
  if (len == 4 && ((c == 0xF0 && p[1] < 0x90) || (c == 0xF4 && p[1] >= 0x90))) return 0;
  return len;
}

/* A string at s->pos (the opening quote), unescaped into a malloc'd copy. */
static char *string(parser *s) {
  s->pos++; /* the quote */
  size_t start = s->pos, cap = 0;
  while (s->pos < s->n && s->p[s->pos] != '"')
    s->pos += s->p[s->pos] == '\\' ? 2 : 1; /* bound the copy */
  if (s->pos >= s->n) return fail(s, "unterminated string"), NULL;
  cap = s->pos - start + 1;
  s->pos = start;
  char *out = malloc(cap), *o = out;
  if (!out) return fail(s, "out of memory"), NULL;
  while (s->p[s->pos] != '"') {
    unsigned char c = s->p[s->pos];
    if (c < 0x20) return free(out), fail(s, "control character in a string"), NULL;
    if (c != '\\') {
      int len = utf8_len(s->p + s->pos, s->n - s->pos);
      if (!len) return free(out), fail(s, "not valid UTF-8"), NULL;
      memcpy(o, s->p + s->pos, (size_t)len);
      o += len, s->pos += (size_t)len;
      continue;
    }
    s->pos++;
    c = s->p[s->pos++];
    const char *esc = strchr("\"\\/bfnrt", c);
    if (c && esc) {
      *o++ = "\"\\/\b\f\n\r\t"[esc - "\"\\/bfnrt"];
      continue;
    }
    uint32_t cp, lo;
    if (c != 'u' || hex4(s, &cp)) return free(out), fail(s, "bad escape in a string"), NULL;
    if (cp >= 0xD800 && cp < 0xDC00) { /* a high surrogate: its low half must follow */
      if (s->n - s->pos < 6 || s->p[s->pos] != '\\' || s->p[s->pos + 1] != 'u')
        return free(out), fail(s, "lone surrogate in a string"), NULL;
      s->pos += 2;
      if (hex4(s, &lo) || lo < 0xDC00 || lo > 0xDFFF)
        return free(out), fail(s, "lone surrogate in a string"), NULL;
      cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
      return free(out), fail(s, "lone surrogate in a string"), NULL;
    }
    if (cp == 0) return free(out), fail(s, "\\u0000 in a string"), NULL;
    /* at most 4 bytes for the 6 or 12 read: the copy stays within cap */
    if (cp < 0x80)
      *o++ = (char)cp;
    else if (cp < 0x800)
      *o++ = (char)(0xC0 | cp >> 6), *o++ = (char)(0x80 | (cp & 0x3F));
    else if (cp < 0x10000)
      *o++ = (char)(0xE0 | cp >> 12), *o++ = (char)(0x80 | ((cp >> 6) & 0x3F)),
      *o++ = (char)(0x80 | (cp & 0x3F));
    else
      *o++ = (char)(0xF0 | cp >> 18), *o++ = (char)(0x80 | ((cp >> 12) & 0x3F)),
      *o++ = (char)(0x80 | ((cp >> 6) & 0x3F)), *o++ = (char)(0x80 | (cp & 0x3F));
  }
  s->pos++; /* the closing quote */
  *o = 0;
  return out;
}

static bool digits(parser *s) {
  size_t at = s->pos;
  while (s->pos < s->n && s->p[s->pos] >= '0' && s->p[s->pos] <= '9') s->pos++;
  return s->pos > at;
}

static pj_value *value(parser *s, int depth);

static pj_value *node(parser *s, pj_type t) {
  pj_value *v = calloc(1, sizeof *v);
  if (!v) return fail(s, "out of memory");
  v->type = t;
  return v;
}

static pj_value *container(parser *s, int depth, bool object) {
  if (depth >= s->max_depth) return fail(s, "nested too deep");
  pj_value *v = node(s, object ? PJ_OBJECT : PJ_ARRAY), **tail = v ? &v->child : NULL;
  if (!v) return NULL;
  s->pos++;
  ws(s);
  if (s->pos < s->n && s->p[s->pos] == (object ? '}' : ']')) {
    s->pos++;
    return v;
  }
  for (;;) {
    char *key = NULL;
    if (object) {
      ws(s);
      if (s->pos >= s->n || s->p[s->pos] != '"')
        return pj_free(v), fail(s, "expected a member name");
      if (!(key = string(s))) return pj_free(v), NULL;
      ws(s);
      if (s->pos >= s->n || s->p[s->pos] != ':')
        return free(key), pj_free(v), fail(s, "expected ':'");
      s->pos++;
    }
    pj_value *e = value(s, depth + 1);
    if (!e) return free(key), pj_free(v), NULL;
    e->string = key;
    *tail = e, tail = &e->next;
    if (v->count == INT32_MAX) return pj_free(v), fail(s, "too many elements");
    v->count++;
    ws(s);
    if (s->pos < s->n && s->p[s->pos] == ',') {
      s->pos++;
      continue;
    }
    if (s->pos < s->n && s->p[s->pos] == (object ? '}' : ']')) {
      s->pos++;
      return v;
    }
    return pj_free(v), fail(s, object ? "expected ',' or '}'" : "expected ',' or ']'");
  }
}

static pj_value *value(parser *s, int depth) {
  ws(s);
  if (s->pos >= s->n) return fail(s, "unexpected end");
  unsigned char c = s->p[s->pos];
  if (c == '{' || c == '[') return container(s, depth, c == '{');
  if (c == '"') {
    char *str = string(s);
    pj_value *v = str ? node(s, PJ_STRING) : NULL;
    if (!v) return free(str), NULL;
    v->valuestring = str;
    return v;
  }
  static const struct {
    const char *word;
    pj_type type;
  } words[] = {{"true", PJ_TRUE}, {"false", PJ_FALSE}, {"null", PJ_NULL}};
  for (int i = 0; i < 3; i++) {
    size_t len = strlen(words[i].word);
    if (s->n - s->pos >= len && !memcmp(s->p + s->pos, words[i].word, len)) {
      s->pos += len;
      return node(s, words[i].type);
    }
  }
  size_t start = s->pos;
  if (c == '-') s->pos++;
  if (s->pos < s->n && s->p[s->pos] == '0')
    s->pos++;
  else if (!digits(s))
    return fail(s, "unexpected character");
  if (s->pos < s->n && s->p[s->pos] == '.' && (s->pos++, !digits(s))) return fail(s, "bad number");
  if (s->pos < s->n && (s->p[s->pos] == 'e' || s->p[s->pos] == 'E')) {
    s->pos++;
    if (s->pos < s->n && (s->p[s->pos] == '+' || s->p[s->pos] == '-')) s->pos++;
    if (!digits(s)) return fail(s, "bad number");
  }
  char buf[64];
  if (s->pos - start >= sizeof buf) return fail(s, "number too long");
  memcpy(buf, s->p + start, s->pos - start);
  buf[s->pos - start] = 0;
  pj_value *v = node(s, PJ_NUMBER);
  if (v) v->valuedouble = strtod(buf, NULL);
  return v;
}

pj_value *pj_parse(const char *text, size_t n, int max_depth, size_t *err_at, const char **why) {
  parser s = {.p = (const unsigned char *)text, .n = n, .max_depth = max_depth};
  pj_value *v = value(&s, 0);
  if (v) {
    ws(&s);
    if (s.pos < s.n) pj_free(v), v = NULL, s.why = "text after the value";
  }
  if (!v) {
    *err_at = s.pos;
    *why = s.why ? s.why : "invalid JSON";
  }
  return v;
}

void pj_free(pj_value *v) {
  while (v) {
    pj_value *next = v->next;
    pj_free(v->child);
    free(v->string);
    free(v->valuestring);
    free(v);
    v = next;
  }
}

const pj_value *pj_get(const pj_value *obj, const char *key) {
  if (!pj_is(obj, PJ_OBJECT)) return NULL;
  for (const pj_value *m = obj->child; m; m = m->next)
    if (!strcmp(m->string, key)) return m;
  return NULL;
}

const pj_value *pj_at(const pj_value *arr, int i) {
  if (!arr || (arr->type != PJ_ARRAY && arr->type != PJ_OBJECT) || i < 0) return NULL;
  const pj_value *e = arr->child;
  while (e && i-- > 0) e = e->next;
  return e;
}
