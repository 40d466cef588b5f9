/* text.c: text for the template engine: the counted buffer, UTF-8, the
 * Unicode character classes and case mappings Python's str methods use,
 * and Python's str() and repr() of every value (floats as repr(float)). */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/tpl.h"

#define TPL_REPR_DEPTH 200

bool tpl_err(const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  pa_error(PASADA_ERR_ARG, "%s", msg);
  return false;
}

bool tpl_errc(int code, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  pa_error(code, "%s", msg);
  return false;
}

const char *tpl_memmem(const char *hay, size_t n, const char *needle, size_t m) {
  if (m == 0) return hay;
  if (m > n) return NULL;
  const char first = needle[0];
  for (const char *p = hay, *end = hay + n - m; p <= end; p++) {
    p = memchr(p, first, (size_t)(end - p) + 1);
    if (!p) return NULL;
    if (!memcmp(p, needle, m)) return p;
  }
  return NULL;
}

/* ---- buffer ---- */

bool tpl_buf_put(tpl_buf *b, const char *s, size_t n) {
  tpl_heap *h = tpl_heap_cur;
  if (n > h->max_str - b->n) return tpl_err("a string would exceed %zu bytes", h->max_str);
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->n + n + 1) cap *= 2;
    if (cap - b->cap > h->limit - h->used) return tpl_mem_error();
    char *ns = realloc(b->s, cap);
    if (!ns) return tpl_errc(PASADA_ERR_NOMEM, "out of memory for template output");
    h->used += cap - b->cap;
    b->s = ns;
    b->cap = cap;
  }
  if (n) memcpy(b->s + b->n, s, n);
  b->n += n;
  b->s[b->n] = '\0';
  return true;
}

bool tpl_buf_printf(tpl_buf *b, const char *fmt, ...) {
  char tmp[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0) n = 0;
  if ((size_t)n >= sizeof tmp) n = sizeof tmp - 1;
  return tpl_buf_put(b, tmp, (size_t)n);
}

bool tpl_buf_cp(tpl_buf *b, uint32_t cp) {
  char tmp[4];
  return tpl_buf_put(b, tmp, tpl_utf8_put(cp, tmp));
}

void tpl_buf_free(tpl_buf *b) {
  tpl_heap *h = tpl_heap_cur;
  if (h && b->cap) h->used -= b->cap < h->used ? b->cap : h->used;
  free(b->s);
  b->s = NULL;
  b->n = b->cap = 0;
}

bool tpl_buf_take(tpl_buf *b, bool markup, tpl_val *out) {
  tpl_str *s = tpl_str_markup(b->s ? b->s : "", b->n, markup);
  tpl_buf_free(b);
  if (!s) return false;
  *out = tpl_obj_val(s);
  return true;
}

/* ---- UTF-8 (strings are valid UTF-8: checked where they enter) ---- */

uint32_t tpl_utf8_next(const char *s, size_t len, size_t *i) {
  const unsigned char *p = (const unsigned char *)s + *i;
  const size_t left = len - *i;
  uint32_t c = p[0];
  size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  if (n > left) n = left;
  if (n == 2)
    c = ((c & 0x1F) << 6) | (p[1] & 0x3F);
  else if (n == 3)
    c = ((c & 0x0F) << 12) | ((p[1] & 0x3F) << 6) | (p[2] & 0x3F);
  else if (n == 4)
    c = ((c & 0x07) << 18) | ((p[1] & 0x3F) << 12) | ((p[2] & 0x3F) << 6) | (p[3] & 0x3F);
  *i += n;
  return c;
}

size_t tpl_utf8_put(uint32_t cp, char *out) {
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xE0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | (cp >> 18));
  out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

size_t tpl_utf8_prefix(const char *str, size_t len) {
  const unsigned char *s = (const unsigned char *)str;
  for (size_t i = 0; i < len;) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    size_t n;
    uint32_t cp, min;
    if (c >= 0xC2 && c <= 0xDF)
      n = 2, cp = c & 0x1F, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF)
      n = 3, cp = c & 0x0F, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4)
      n = 4, cp = c & 0x07, min = 0x10000;
    else
      return i;
    if (len - i < n) return i;
    for (size_t k = 1; k < n; k++) {
      if ((s[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += n;
  }
  return len;
}

bool tpl_utf8_valid(const char *s, size_t len) {
  return tpl_utf8_prefix(s, len) == len;
}

size_t tpl_utf8_count(const char *s, size_t len) {
  size_t n = 0;
  for (size_t i = 0; i < len; i++) n += ((unsigned char)s[i] & 0xC0) != 0x80;
  return n;
}

size_t tpl_utf8_offset(const tpl_str *s, size_t i) {
  if (s->ncp == s->len) return i;
  size_t off = 0;
  while (i-- > 0 && off < s->len) tpl_utf8_next(s->s, s->len, &off);
  return off;
}

/* ---- character classes ---- */

bool tpl_cp_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

bool tpl_cp_digit(uint32_t c) {
  return (c >= '0' && c <= '9') || (c >= 0x660 && c <= 0x669) || (c >= 0x6F0 && c <= 0x6F9) ||
         (c >= 0x966 && c <= 0x96F) || (c >= 0xFF10 && c <= 0xFF19);
}

/* Letters: ASCII exactly; beyond it, what is not punctuation, a symbol, a
 * digit, a space or a control character in the common blocks. */
bool tpl_cp_alpha(uint32_t c) {
  if (c < 0x80) return (c | 0x20) >= 'a' && (c | 0x20) <= 'z';
  if (c < 0xC0) return c == 0xAA || c == 0xB5 || c == 0xBA;
  if (c == 0xD7 || c == 0xF7) return false;
  if (tpl_cp_space(c) || tpl_cp_digit(c) || !tpl_cp_printable(c)) return false;
  if (c >= 0x2000 && c <= 0x2BFF) return false; /* punctuation, symbols, arrows, math */
  if (c >= 0x3000 && c <= 0x303F) return false; /* CJK punctuation */
  if (c >= 0xFF00 && c <= 0xFF20) return false;
  if (c >= 0x1F000) return c >= 0x20000;      /* emoji and symbols; CJK extensions are letters */
  if (c >= 0x300 && c <= 0x36F) return false; /* combining marks */
  return true;
}

bool tpl_cp_word(uint32_t c) {
  return c == '_' || tpl_cp_alpha(c) || tpl_cp_digit(c) || (c >= 0x300 && c <= 0x36F);
}

bool tpl_cp_printable(uint32_t c) {
  if (c < 0x20 || (c >= 0x7F && c <= 0xA0)) return false;
  if (c == 0xAD || c == 0x1680 || (c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F) ||
      (c >= 0x205F && c <= 0x206F) || c == 0x3000 || c == 0xFEFF || (c >= 0xFFF9 && c <= 0xFFFB))
    return false;
  if ((c >= 0x600 && c <= 0x605) || c == 0x61C || c == 0x6DD || c == 0x70F || c == 0x180E)
    return false;
  if ((c >= 0xD800 && c <= 0xF8FF) || (c >= 0xFDD0 && c <= 0xFDEF) || (c & 0xFFFE) == 0xFFFE)
    return false;
  if (c >= 0xE0000 || (c >= 0x1D173 && c <= 0x1D17A) || (c >= 0x13430 && c <= 0x1343F))
    return false;
  return true;
}

/* Simple (one to one) case pairs: [first, last, delta to the other case,
 * step] for upper-case ranges. */
static const struct {
  uint32_t lo, hi;
  int32_t delta;
  uint8_t step;
} CASE_PAIRS[] = {
    {0x41, 0x5A, 32, 1},     {0xC0, 0xD6, 32, 1},       {0xD8, 0xDE, 32, 1},
    {0x100, 0x12E, 1, 2},    {0x132, 0x136, 1, 2},      {0x139, 0x147, 1, 2},
    {0x14A, 0x176, 1, 2},    {0x179, 0x17D, 1, 2},      {0x182, 0x184, 1, 2},
    {0x1A0, 0x1A4, 1, 2},    {0x1CD, 0x1DB, 1, 2},      {0x1DE, 0x1EE, 1, 2},
    {0x1F8, 0x21E, 1, 2},    {0x222, 0x232, 1, 2},      {0x386, 0x386, 38, 1},
    {0x388, 0x38A, 37, 1},   {0x38C, 0x38C, 64, 1},     {0x38E, 0x38F, 63, 1},
    {0x391, 0x3A1, 32, 1},   {0x3A3, 0x3AB, 32, 1},     {0x3D8, 0x3EE, 1, 2},
    {0x400, 0x40F, 80, 1},   {0x410, 0x42F, 32, 1},     {0x460, 0x480, 1, 2},
    {0x48A, 0x4BE, 1, 2},    {0x4C1, 0x4CD, 1, 2},      {0x4D0, 0x52E, 1, 2},
    {0x531, 0x556, 48, 1},   {0x10A0, 0x10C5, 7264, 1}, {0x1E00, 0x1E94, 1, 2},
    {0x1EA0, 0x1EFE, 1, 2},  {0x1F08, 0x1F0F, -8, 1},   {0x1F18, 0x1F1D, -8, 1},
    {0x1F28, 0x1F2F, -8, 1}, {0x1F38, 0x1F3F, -8, 1},   {0x1F48, 0x1F4D, -8, 1},
    {0x1F68, 0x1F6F, -8, 1}, {0x2160, 0x216F, 16, 1},   {0x24B6, 0x24CF, 26, 1},
    {0x2C00, 0x2C2F, 48, 1}, {0xA640, 0xA66C, 1, 2},    {0xA680, 0xA69A, 1, 2},
    {0xA722, 0xA72E, 1, 2},  {0xA732, 0xA76E, 1, 2},    {0xA779, 0xA77B, 1, 2},
    {0xA77E, 0xA786, 1, 2},  {0xFF21, 0xFF3A, 32, 1},   {0x10400, 0x10427, 40, 1},
};

uint32_t tpl_cp_lower(uint32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  if (c == 0x178) return 0xFF;
  if (c == 0x130) return 'i';
  for (size_t i = 0; i < sizeof CASE_PAIRS / sizeof CASE_PAIRS[0]; i++)
    if (c >= CASE_PAIRS[i].lo && c <= CASE_PAIRS[i].hi &&
        (c - CASE_PAIRS[i].lo) % CASE_PAIRS[i].step == 0)
      return (uint32_t)((int32_t)c + CASE_PAIRS[i].delta);
  return c;
}

uint32_t tpl_cp_upper(uint32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
  if (c == 0xFF) return 0x178;
  if (c == 0xB5) return 0x39C;
  if (c == 0x131) return 'I';
  if (c == 0x17F) return 'S';
  if (c == 0x3C2) return 0x3A3;
  for (size_t i = 0; i < sizeof CASE_PAIRS / sizeof CASE_PAIRS[0]; i++) {
    const int32_t d = CASE_PAIRS[i].delta;
    const uint32_t lo = (uint32_t)((int32_t)CASE_PAIRS[i].lo + d),
                   hi = (uint32_t)((int32_t)CASE_PAIRS[i].hi + d);
    if (c >= lo && c <= hi && (c - lo) % CASE_PAIRS[i].step == 0) return (uint32_t)((int32_t)c - d);
  }
  return c;
}

bool tpl_cp_is_upper(uint32_t c) {
  return tpl_cp_lower(c) != c;
}
bool tpl_cp_is_lower(uint32_t c) {
  return tpl_cp_upper(c) != c || c == 0xDF || (c >= 0x250 && c <= 0x2AF);
}
bool tpl_cp_cased(uint32_t c) {
  return tpl_cp_is_upper(c) || tpl_cp_is_lower(c);
}

/* ---- numbers ---- */

void tpl_float_repr(double f, char *buf) {
  if (isnan(f)) {
    strcpy(buf, "nan");
    return;
  }
  if (isinf(f)) {
    strcpy(buf, f < 0 ? "-inf" : "inf");
    return;
  }
  if (f == 0) {
    strcpy(buf, signbit(f) ? "-0.0" : "0.0");
    return;
  }
  /* the shortest digits that read back as f, as Python's repr finds them */
  char tmp[40];
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(tmp, sizeof tmp, "%.*e", prec - 1, f);
    if (strtod(tmp, NULL) == f) break;
  }
  const char *p = tmp;
  char *o = buf;
  if (*p == '-') *o++ = *p++;
  char digits[24];
  int nd = 0;
  for (; *p && *p != 'e'; p++)
    if (*p >= '0' && *p <= '9') digits[nd++] = *p;
  while (nd > 1 && digits[nd - 1] == '0') nd--;
  const int exp10 = atoi(p + 1), decpt = exp10 + 1;
  if (decpt <= -4 || decpt > 16) {
    *o++ = digits[0];
    if (nd > 1) {
      *o++ = '.';
      memcpy(o, digits + 1, (size_t)nd - 1);
      o += nd - 1;
    }
    sprintf(o, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    return;
  }
  if (decpt <= 0) {
    *o++ = '0';
    *o++ = '.';
    for (int i = 0; i < -decpt; i++) *o++ = '0';
    memcpy(o, digits, (size_t)nd);
    o += nd;
  } else if (decpt >= nd) {
    memcpy(o, digits, (size_t)nd);
    o += nd;
    for (int i = nd; i < decpt; i++) *o++ = '0';
    *o++ = '.';
    *o++ = '0';
  } else {
    memcpy(o, digits, (size_t)decpt);
    o += decpt;
    *o++ = '.';
    memcpy(o, digits + decpt, (size_t)(nd - decpt));
    o += nd - decpt;
  }
  *o = '\0';
}

/* ---- str() and repr() ---- */

static bool repr_str(tpl_buf *b, const char *s, size_t len) {
  const bool has_sq = memchr(s, '\'', len) != NULL, has_dq = memchr(s, '"', len) != NULL;
  const char q = has_sq && !has_dq ? '"' : '\'';
  if (!tpl_buf_put(b, &q, 1)) return false;
  size_t run = 0;
  for (size_t i = 0; i < len;) {
    const size_t start = i;
    const uint32_t c = tpl_utf8_next(s, len, &i);
    const char *esc = NULL;
    char tmp[12];
    if (c == (uint32_t)q || c == '\\') {
      tmp[0] = '\\';
      tmp[1] = (char)c;
      tmp[2] = 0;
      esc = tmp;
    } else if (c == '\n')
      esc = "\\n";
    else if (c == '\r')
      esc = "\\r";
    else if (c == '\t')
      esc = "\\t";
    else if (!tpl_cp_printable(c)) {
      if (c < 0x100)
        snprintf(tmp, sizeof tmp, "\\x%02x", c);
      else if (c < 0x10000)
        snprintf(tmp, sizeof tmp, "\\u%04x", c);
      else
        snprintf(tmp, sizeof tmp, "\\U%08x", c);
      esc = tmp;
    }
    if (!esc) {
      run += i - start;
      continue;
    }
    if (!tpl_buf_put(b, s + start - run, run) || !tpl_buf_str(b, esc)) return false;
    run = 0;
  }
  if (!tpl_buf_put(b, s + len - run, run)) return false;
  return tpl_buf_put(b, &q, 1);
}

static bool repr_items(tpl_buf *b, const tpl_list *l, const char *open, const char *close,
                       int depth) {
  if (!tpl_buf_str(b, open)) return false;
  for (size_t i = 0; i < l->n; i++) {
    if (i && !tpl_buf_put(b, ", ", 2)) return false;
    if (!tpl_repr(b, l->v[i], depth + 1)) return false;
  }
  if (l->h.sub == TPL_L_TUPLE && l->n == 1 && !tpl_buf_put(b, ",", 1)) return false;
  return tpl_buf_str(b, close);
}

static bool repr_dict(tpl_buf *b, const tpl_dict *d, int depth) {
  if (!tpl_buf_put(b, "{", 1)) return false;
  for (size_t i = 0; i < d->n; i++) {
    if (i && !tpl_buf_put(b, ", ", 2)) return false;
    if (!tpl_repr(b, d->k[i], depth + 1) || !tpl_buf_put(b, ": ", 2) ||
        !tpl_repr(b, d->v[i], depth + 1))
      return false;
  }
  return tpl_buf_put(b, "}", 1);
}

bool tpl_repr(tpl_buf *b, tpl_val v, int depth) {
  if (depth > TPL_REPR_DEPTH) return tpl_err("a value nested too deeply to print");
  char num[40];
  switch (v.kind) {
    case TPL_UNDEF:
      return tpl_buf_str(b, "Undefined");
    case TPL_STR:
      if (tpl_is_markup(v)) {
        return tpl_buf_str(b, "Markup(") && repr_str(b, tpl_s(v)->s, tpl_s(v)->len) &&
               tpl_buf_put(b, ")", 1);
      }
      return repr_str(b, tpl_s(v)->s, tpl_s(v)->len);
    case TPL_LIST: {
      const tpl_list *l = tpl_l(v);
      switch (l->h.sub) {
        case TPL_L_LIST:
          return repr_items(b, l, "[", "]", depth);
        case TPL_L_TUPLE:
          return repr_items(b, l, "(", ")", depth);
        case TPL_L_ITEMS:
          return repr_items(b, l, "dict_items([", "])", depth);
        case TPL_L_KEYS:
          return repr_items(b, l, "dict_keys([", "])", depth);
        case TPL_L_VALUES:
          return repr_items(b, l, "dict_values([", "])", depth);
        case TPL_L_RANGE:
          if (l->r_step != 1)
            return tpl_buf_printf(b, "range(%" PRId64 ", %" PRId64 ", %" PRId64 ")", l->r_start,
                                  l->r_stop, l->r_step);
          return tpl_buf_printf(b, "range(%" PRId64 ", %" PRId64 ")", l->r_start, l->r_stop);
        default:
          return tpl_buf_printf(b, "<%s object at %p>", tpl_type_name(v), (void *)v.o);
      }
    }
    case TPL_DICT:
      return repr_dict(b, tpl_d(v), depth);
    case TPL_NS:
      return tpl_buf_str(b, "<Namespace ") && repr_dict(b, tpl_d(v), depth) &&
             tpl_buf_put(b, ">", 1);
    case TPL_FUNC: {
      const tpl_func *f = (const tpl_func *)v.o;
      if (f->fkind == TPL_F_MACRO)
        return tpl_buf_printf(b, "<Macro '%s'>", f->name ? f->name : "caller");
      if (f->fkind == TPL_F_METHOD)
        return tpl_buf_printf(b, "<built-in method %s of %s object at %p>", f->name,
                              tpl_type_name(f->self), (void *)f->self.o);
      return tpl_buf_printf(b, "<function %s at %p>", f->name, (void *)f);
    }
    case TPL_LOOP: {
      const tpl_loop *l = (const tpl_loop *)v.o;
      return tpl_buf_printf(b, "<LoopContext %zu/%zu>", l->index0 + 1, l->seq->n);
    }
    default:
      break;
  }
  switch (v.kind) {
    case TPL_NONE:
      return tpl_buf_put(b, "None", 4);
    case TPL_BOOL:
      return v.b ? tpl_buf_put(b, "True", 4) : tpl_buf_put(b, "False", 5);
    case TPL_INT:
      snprintf(num, sizeof num, "%" PRId64, v.i);
      return tpl_buf_str(b, num);
    case TPL_FLOAT:
      tpl_float_repr(v.f, num);
      return tpl_buf_str(b, num);
    default:
      return tpl_buf_str(b, "<object>");
  }
}

bool tpl_ascii(tpl_buf *b, tpl_val v) {
  tpl_buf r = {0};
  bool ok = tpl_repr(&r, v, 0);
  for (size_t i = 0; ok && i < r.n;) {
    const size_t st = i;
    const uint32_t c = tpl_utf8_next(r.s, r.n, &i);
    if (c < 0x80)
      ok = tpl_buf_put(b, r.s + st, i - st);
    else if (c < 0x100)
      ok = tpl_buf_printf(b, "\\x%02x", c);
    else if (c < 0x10000)
      ok = tpl_buf_printf(b, "\\u%04x", c);
    else
      ok = tpl_buf_printf(b, "\\U%08x", c);
  }
  tpl_buf_free(&r);
  return ok;
}

bool tpl_str_of(tpl_buf *b, tpl_val v) {
  switch (v.kind) {
    case TPL_UNDEF:
      return true;
    case TPL_STR:
      return tpl_buf_put(b, tpl_s(v)->s, tpl_s(v)->len);
    default:
      return tpl_repr(b, v, 0);
  }
}

bool tpl_to_str(tpl_val v, tpl_val *out) {
  if (v.kind == TPL_STR) {
    *out = tpl_ref(v);
    return true;
  }
  tpl_buf b = {0};
  if (!tpl_str_of(&b, v)) {
    tpl_buf_free(&b);
    return false;
  }
  return tpl_buf_take(&b, false, out);
}

bool tpl_escape(tpl_buf *b, const char *s, size_t len) {
  size_t run = 0;
  for (size_t i = 0; i < len; i++) {
    const char *e = NULL;
    switch (s[i]) {
      case '&':
        e = "&amp;";
        break;
      case '<':
        e = "&lt;";
        break;
      case '>':
        e = "&gt;";
        break;
      case '"':
        e = "&#34;";
        break;
      case '\'':
        e = "&#39;";
        break;
      default:
        run++;
        continue;
    }
    if (!tpl_buf_put(b, s + i - run, run) || !tpl_buf_str(b, e)) return false;
    run = 0;
  }
  return tpl_buf_put(b, s + len - run, run);
}
