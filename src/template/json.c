/* json.c: JSON for the template engine: the reader of a render's variables
 * (Python's json.loads: objects keep their key order) and the writer of the
 * tojson filter (Python's json.dumps, byte for byte: separators, indent,
 * sort_keys, ensure_ascii, floats as repr). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/tpl.h"

#define JSON_MAX_DEPTH 512

typedef struct {
  const char *s;
  size_t len, i;
} json_reader;

static bool json_fail(const json_reader *r, const char *what) {
  return tpl_err("JSON: %s at byte %zu", what, r->i);
}

static void skip_ws(json_reader *r) {
  while (r->i < r->len &&
         (r->s[r->i] == ' ' || r->s[r->i] == '\t' || r->s[r->i] == '\n' || r->s[r->i] == '\r'))
    r->i++;
}

static bool read_value(json_reader *r, tpl_val *out, int depth);

static int hex4(const char *p) {
  int v = 0;
  for (int k = 0; k < 4; k++) {
    const char c = p[k];
    v <<= 4;
    if (c >= '0' && c <= '9')
      v |= c - '0';
    else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
      v |= (c | 0x20) - 'a' + 10;
    else
      return -1;
  }
  return v;
}

static bool read_string(json_reader *r, tpl_val *out) {
  r->i++; /* the quote */
  tpl_buf b = {0};
  size_t run = r->i;
  for (;;) {
    if (r->i >= r->len) {
      tpl_buf_free(&b);
      return json_fail(r, "unterminated string");
    }
    const unsigned char c = (unsigned char)r->s[r->i];
    if (c == '"') break;
    if (c < 0x20) {
      tpl_buf_free(&b);
      return json_fail(r, "control character in a string");
    }
    if (c != '\\') {
      r->i++;
      continue;
    }
    if (!tpl_buf_put(&b, r->s + run, r->i - run)) goto fail;
    if (r->i + 1 >= r->len) {
      tpl_buf_free(&b);
      return json_fail(r, "unterminated string");
    }
    const char e = r->s[r->i + 1];
    r->i += 2;
    char ch = 0;
    switch (e) {
      case '"':
        ch = '"';
        break;
      case '\\':
        ch = '\\';
        break;
      case '/':
        ch = '/';
        break;
      case 'b':
        ch = '\b';
        break;
      case 'f':
        ch = '\f';
        break;
      case 'n':
        ch = '\n';
        break;
      case 'r':
        ch = '\r';
        break;
      case 't':
        ch = '\t';
        break;
      case 'u': {
        int cp = r->i + 4 <= r->len ? hex4(r->s + r->i) : -1;
        if (cp < 0) {
          tpl_buf_free(&b);
          return json_fail(r, "bad \\u escape");
        }
        r->i += 4;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          const int lo = r->i + 6 <= r->len && r->s[r->i] == '\\' && r->s[r->i + 1] == 'u'
                             ? hex4(r->s + r->i + 2)
                             : -1;
          if (lo < 0xDC00 || lo > 0xDFFF) {
            tpl_buf_free(&b);
            return json_fail(r, "lone surrogate in a \\u escape");
          }
          r->i += 6;
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
          tpl_buf_free(&b);
          return json_fail(r, "lone surrogate in a \\u escape");
        }
        if (!tpl_buf_cp(&b, (uint32_t)cp)) goto fail;
        run = r->i;
        continue;
      }
      default:
        tpl_buf_free(&b);
        return json_fail(r, "bad escape in a string");
    }
    if (!tpl_buf_put(&b, &ch, 1)) goto fail;
    run = r->i;
  }
  if (!tpl_buf_put(&b, r->s + run, r->i - run)) goto fail;
  r->i++;
  if (!tpl_utf8_valid(b.s ? b.s : "", b.n)) {
    tpl_buf_free(&b);
    return json_fail(r, "invalid UTF-8 in a string");
  }
  return tpl_buf_take(&b, false, out);
fail:
  tpl_buf_free(&b);
  return false;
}

static bool read_number(json_reader *r, tpl_val *out) {
  const size_t start = r->i;
  bool is_float = false;
  if (r->s[r->i] == '-') r->i++;
  if (r->i < r->len && r->s[r->i] == 'I') {
    if (r->len - r->i >= 8 && !memcmp(r->s + r->i, "Infinity", 8)) {
      r->i += 8;
      *out = tpl_float(r->s[start] == '-' ? -INFINITY : INFINITY);
      return true;
    }
    return json_fail(r, "bad number");
  }
  if (r->i >= r->len || r->s[r->i] < '0' || r->s[r->i] > '9') return json_fail(r, "bad number");
  if (r->s[r->i] == '0')
    r->i++;
  else
    while (r->i < r->len && r->s[r->i] >= '0' && r->s[r->i] <= '9') r->i++;
  if (r->i < r->len && r->s[r->i] == '.') {
    is_float = true;
    r->i++;
    if (r->i >= r->len || r->s[r->i] < '0' || r->s[r->i] > '9') return json_fail(r, "bad number");
    while (r->i < r->len && r->s[r->i] >= '0' && r->s[r->i] <= '9') r->i++;
  }
  if (r->i < r->len && (r->s[r->i] == 'e' || r->s[r->i] == 'E')) {
    is_float = true;
    r->i++;
    if (r->i < r->len && (r->s[r->i] == '+' || r->s[r->i] == '-')) r->i++;
    if (r->i >= r->len || r->s[r->i] < '0' || r->s[r->i] > '9') return json_fail(r, "bad number");
    while (r->i < r->len && r->s[r->i] >= '0' && r->s[r->i] <= '9') r->i++;
  }
  char tmp[64];
  const size_t n = r->i - start;
  if (n >= sizeof tmp) {
    if (!is_float) return json_fail(r, "integer too large");
    char *big = malloc(n + 1);
    if (!big) return tpl_errc(PASADA_ERR_NOMEM, "out of memory");
    memcpy(big, r->s + start, n);
    big[n] = 0;
    *out = tpl_float(strtod(big, NULL));
    free(big);
    return true;
  }
  memcpy(tmp, r->s + start, n);
  tmp[n] = 0;
  if (is_float) {
    *out = tpl_float(strtod(tmp, NULL));
    return true;
  }
  errno = 0;
  const long long v = strtoll(tmp, NULL, 10);
  if (errno == ERANGE) return json_fail(r, "integer too large");
  *out = tpl_int(v);
  return true;
}

static bool read_container(json_reader *r, tpl_val *out, int depth) {
  const bool obj = r->s[r->i] == '{';
  r->i++;
  tpl_val c;
  if (obj) {
    tpl_dict *d = tpl_dict_new();
    if (!d) return false;
    c = tpl_obj_val(d);
  } else {
    tpl_list *l = tpl_list_new(0, TPL_L_LIST);
    if (!l) return false;
    c = tpl_obj_val(l);
  }
  skip_ws(r);
  if (r->i < r->len && r->s[r->i] == (obj ? '}' : ']')) {
    r->i++;
    *out = c;
    return true;
  }
  for (;;) {
    skip_ws(r);
    tpl_val k = tpl_none(), v;
    if (obj) {
      if (r->i >= r->len || r->s[r->i] != '"') {
        json_fail(r, "expected a key");
        goto fail;
      }
      if (!read_string(r, &k)) goto fail;
      skip_ws(r);
      if (r->i >= r->len || r->s[r->i] != ':') {
        tpl_drop(k);
        json_fail(r, "expected ':'");
        goto fail;
      }
      r->i++;
    }
    if (!read_value(r, &v, depth + 1)) {
      tpl_drop(k);
      goto fail;
    }
    if (obj ? !tpl_dict_set(tpl_d(c), k, v) : !tpl_list_push(tpl_l(c), v)) goto fail;
    skip_ws(r);
    if (r->i < r->len && r->s[r->i] == ',') {
      r->i++;
      continue;
    }
    if (r->i < r->len && r->s[r->i] == (obj ? '}' : ']')) {
      r->i++;
      *out = c;
      return true;
    }
    json_fail(r, obj ? "expected ',' or '}'" : "expected ',' or ']'");
    goto fail;
  }
fail:
  tpl_drop(c);
  return false;
}

static bool read_value(json_reader *r, tpl_val *out, int depth) {
  if (depth > JSON_MAX_DEPTH) return json_fail(r, "nested too deeply");
  skip_ws(r);
  if (r->i >= r->len) return json_fail(r, "unexpected end");
  const char c = r->s[r->i];
  const char *rest = r->s + r->i;
  const size_t left = r->len - r->i;
  if (c == '{' || c == '[') return read_container(r, out, depth);
  if (c == '"') return read_string(r, out);
  if (c == '-' || (c >= '0' && c <= '9')) return read_number(r, out);
  if (left >= 4 && !memcmp(rest, "true", 4)) return r->i += 4, *out = tpl_bool(true), true;
  if (left >= 5 && !memcmp(rest, "false", 5)) return r->i += 5, *out = tpl_bool(false), true;
  if (left >= 4 && !memcmp(rest, "null", 4)) return r->i += 4, *out = tpl_none(), true;
  if (left >= 3 && !memcmp(rest, "NaN", 3)) return r->i += 3, *out = tpl_float(NAN), true;
  if (left >= 8 && !memcmp(rest, "Infinity", 8)) return r->i += 8, *out = tpl_float(INFINITY), true;
  return json_fail(r, "unexpected character");
}

bool tpl_json_parse(const char *s, size_t len, tpl_val *out) {
  json_reader r = {s, len, 0};
  if (!read_value(&r, out, 0)) return false;
  skip_ws(&r);
  if (r.i != len) {
    tpl_drop(*out);
    return json_fail(&r, "extra data after the value");
  }
  return true;
}

/* ---- writer ---- */

static bool dump_str(tpl_buf *b, const char *s, size_t len, bool ascii) {
  if (!tpl_buf_put(b, "\"", 1)) return false;
  size_t run = 0;
  for (size_t i = 0; i < len;) {
    const size_t start = i;
    const unsigned char c0 = (unsigned char)s[i];
    char tmp[16];
    const char *e = NULL;
    if (c0 < 0x80) {
      i++;
      switch (c0) {
        case '"':
          e = "\\\"";
          break;
        case '\\':
          e = "\\\\";
          break;
        case '\n':
          e = "\\n";
          break;
        case '\r':
          e = "\\r";
          break;
        case '\t':
          e = "\\t";
          break;
        case '\b':
          e = "\\b";
          break;
        case '\f':
          e = "\\f";
          break;
        default:
          if (c0 < 0x20) {
            snprintf(tmp, sizeof tmp, "\\u%04x", c0);
            e = tmp;
          }
      }
    } else {
      const uint32_t cp = tpl_utf8_next(s, len, &i);
      if (ascii) {
        if (cp >= 0x10000) {
          const uint32_t v = cp - 0x10000;
          snprintf(tmp, sizeof tmp, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
        } else {
          snprintf(tmp, sizeof tmp, "\\u%04x", cp);
        }
        e = tmp;
      }
    }
    if (!e) {
      run += i - start;
      continue;
    }
    if (!tpl_buf_put(b, s + start - run, run) || !tpl_buf_str(b, e)) return false;
    run = 0;
  }
  return tpl_buf_put(b, s + len - run, run) && tpl_buf_put(b, "\"", 1);
}

static bool dump_float(tpl_buf *b, double f) {
  if (isnan(f)) return tpl_buf_str(b, "NaN");
  if (isinf(f)) return tpl_buf_str(b, f < 0 ? "-Infinity" : "Infinity");
  char num[40];
  tpl_float_repr(f, num);
  return tpl_buf_str(b, num);
}

static bool newline(tpl_buf *b, const tpl_json_opts *o, int level) {
  if (!tpl_buf_put(b, "\n", 1)) return false;
  for (int i = 0; i < level; i++)
    if (!tpl_buf_put(b, o->indent, o->indent_len)) return false;
  return true;
}

static bool dump(tpl_buf *b, tpl_val v, const tpl_json_opts *o, int level);

/* A dict key as json.dumps writes it: str, or a number, bool or None made text. */
static bool dump_key(tpl_buf *b, tpl_val k, const tpl_json_opts *o) {
  char num[40];
  switch (k.kind) {
    case TPL_STR:
      return dump_str(b, tpl_s(k)->s, tpl_s(k)->len, o->ensure_ascii);
    case TPL_BOOL:
      return tpl_buf_str(b, k.b ? "\"true\"" : "\"false\"");
    case TPL_NONE:
      return tpl_buf_str(b, "\"null\"");
    case TPL_INT:
      return tpl_buf_printf(b, "\"%" PRId64 "\"", k.i);
    case TPL_FLOAT:
      if (isnan(k.f)) return tpl_buf_str(b, "\"NaN\"");
      if (isinf(k.f)) return tpl_buf_str(b, k.f < 0 ? "\"-Infinity\"" : "\"Infinity\"");
      tpl_float_repr(k.f, num);
      return tpl_buf_printf(b, "\"%s\"", num);
    default:
      return tpl_err("keys must be str, int, float, bool or None, not %s", tpl_type_name(k));
  }
}

static bool dump_dict(tpl_buf *b, const tpl_dict *d, const tpl_json_opts *o, int level) {
  if (d->n == 0) return tpl_buf_put(b, "{}", 2);
  size_t *order = malloc(d->n * sizeof(size_t));
  if (!order) return tpl_errc(PASADA_ERR_NOMEM, "out of memory");
  for (size_t i = 0; i < d->n; i++) order[i] = i;
  bool ok = true;
  if (o->sort_keys) { /* insertion sort: stable, and a failed comparison stops it */
    for (size_t i = 1; i < d->n && ok; i++) {
      const size_t x = order[i];
      size_t j = i;
      while (j > 0) {
        bool lt;
        if (!tpl_less(d->k[x], d->k[order[j - 1]], &lt)) {
          ok = false;
          break;
        }
        if (!lt) break;
        order[j] = order[j - 1];
        j--;
      }
      order[j] = x;
    }
  }
  ok = ok && tpl_buf_put(b, "{", 1);
  if (ok && o->indent) ok = newline(b, o, level + 1);
  for (size_t i = 0; ok && i < d->n; i++) {
    if (i) {
      ok = tpl_buf_put(b, o->item_sep, o->item_sep_len);
      if (ok && o->indent) ok = newline(b, o, level + 1);
    }
    ok = ok && dump_key(b, d->k[order[i]], o) && tpl_buf_put(b, o->key_sep, o->key_sep_len) &&
         dump(b, d->v[order[i]], o, level + 1);
  }
  if (ok && o->indent) ok = newline(b, o, level);
  free(order);
  return ok && tpl_buf_put(b, "}", 1);
}

static bool dump(tpl_buf *b, tpl_val v, const tpl_json_opts *o, int level) {
  if (level > JSON_MAX_DEPTH) return tpl_err("tojson: a value nested too deeply");
  switch (v.kind) {
    case TPL_NONE:
      return tpl_buf_put(b, "null", 4);
    case TPL_BOOL:
      return v.b ? tpl_buf_put(b, "true", 4) : tpl_buf_put(b, "false", 5);
    case TPL_INT:
      return tpl_buf_printf(b, "%" PRId64, v.i);
    case TPL_FLOAT:
      return dump_float(b, v.f);
    case TPL_STR:
      return dump_str(b, tpl_s(v)->s, tpl_s(v)->len, o->ensure_ascii);
    case TPL_DICT:
      return dump_dict(b, tpl_d(v), o, level);
    case TPL_LIST: {
      const tpl_list *l = tpl_l(v);
      if (l->h.sub != TPL_L_LIST && l->h.sub != TPL_L_TUPLE) break;
      if (l->n == 0) return tpl_buf_put(b, "[]", 2);
      if (!tpl_buf_put(b, "[", 1)) return false;
      if (o->indent && !newline(b, o, level + 1)) return false;
      for (size_t i = 0; i < l->n; i++) {
        if (i) {
          if (!tpl_buf_put(b, o->item_sep, o->item_sep_len)) return false;
          if (o->indent && !newline(b, o, level + 1)) return false;
        }
        if (!dump(b, l->v[i], o, level + 1)) return false;
      }
      if (o->indent && !newline(b, o, level)) return false;
      return tpl_buf_put(b, "]", 1);
    }
    default:
      break;
  }
  return tpl_err("Object of type %s is not JSON serializable", tpl_type_name(v));
}

bool tpl_json_dump(tpl_buf *b, tpl_val v, const tpl_json_opts *o) {
  return dump(b, v, o, 0);
}
