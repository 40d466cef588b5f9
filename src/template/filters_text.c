/* filters_text.c: the filters over text and numbers: tojson (json.dumps
 * with transformers' options), indent, int, float, round, title, truncate,
 * wordcount, striptags, filesizeformat and urlencode, as Python computes
 * them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/filters.h"

/* c is one of the characters of set (never the NUL). */
static bool in_set(const char *set, char c) {
  return c != 0 && strchr(set, c) != NULL;
}

bool tpl_f_tojson(tpl_val v, const tpl_val *p, tpl_val *out) {
  tpl_json_opts o = {.ensure_ascii = tpl_f_arg_bool(p[0], false),
                     .sort_keys = tpl_f_arg_bool(p[3], false)};
  char spaces[64];
  tpl_val indent = p[1], seps = p[2];
  if (tpl_given(indent) && indent.kind != TPL_NONE) {
    if (indent.kind == TPL_STR) {
      o.indent = tpl_s(indent)->s;
      o.indent_len = tpl_s(indent)->len;
    } else if (indent.kind == TPL_INT || indent.kind == TPL_BOOL) {
      int64_t n = indent.kind == TPL_INT ? indent.i : indent.b;
      if (n < 0) n = 0;
      if (n > 63) return tpl_err("tojson: indent above 63 spaces");
      memset(spaces, ' ', (size_t)n);
      spaces[n] = 0;
      o.indent = spaces;
      o.indent_len = (size_t)n;
    } else {
      return tpl_err("tojson: indent must be an int or a string");
    }
  }
  o.item_sep = o.indent ? "," : ", ";
  o.key_sep = ": ";
  if (tpl_given(seps) && seps.kind != TPL_NONE) {
    if (seps.kind != TPL_LIST || tpl_l(seps)->n != 2 || tpl_l(seps)->v[0].kind != TPL_STR ||
        tpl_l(seps)->v[1].kind != TPL_STR)
      return tpl_err("tojson: separators must be two strings");
    o.item_sep = tpl_s(tpl_l(seps)->v[0])->s;
    o.key_sep = tpl_s(tpl_l(seps)->v[1])->s;
    o.item_sep_len = tpl_s(tpl_l(seps)->v[0])->len;
    o.key_sep_len = tpl_s(tpl_l(seps)->v[1])->len;
  } else {
    o.item_sep_len = strlen(o.item_sep);
    o.key_sep_len = 2;
  }
  tpl_buf b = {0};
  if (!tpl_json_dump(&b, v, &o)) {
    tpl_buf_free(&b);
    return false;
  }
  return tpl_buf_take(&b, false, out);
}

bool tpl_f_indent(tpl_rt *rt, tpl_val v, const tpl_val *p, tpl_val *out) {
  if (v.kind == TPL_UNDEF) return tpl_undefined_error(v); /* s += "\n" on undefined */
  tpl_val sv;
  if (!tpl_to_str(v, &sv)) return false;
  const tpl_str *s = tpl_s(sv);
  char spaces[256];
  const char *ind = spaces;
  size_t il = 4;
  memset(spaces, ' ', 4);
  if (tpl_given(p[0])) {
    if (p[0].kind == TPL_STR) {
      ind = tpl_s(p[0])->s;
      il = tpl_s(p[0])->len;
    } else {
      int64_t w;
      if (!tpl_f_arg_int("indent", p[0], 4, &w)) {
        tpl_drop(sv);
        return false;
      }
      if (w < 0) w = 0;
      if (w > 255) w = 255;
      memset(spaces, ' ', (size_t)w);
      il = (size_t)w;
    }
  }
  const bool first = tpl_f_arg_bool(p[1], false), blank = tpl_f_arg_bool(p[2], false);
  /* (s + "\n").splitlines(), joined again with "\n" and the indent before
   * every line but the first (and empty ones unless blank) */
  tpl_buf tmp = {0};
  tpl_val joined = tpl_none(), lines_v = tpl_none();
  const tpl_args none = {0};
  bool unsafe;
  bool ok = tpl_buf_put(&tmp, s->s, s->len) && tpl_buf_put(&tmp, "\n", 1) &&
            tpl_buf_take(&tmp, false, &joined) &&
            tpl_call_method(rt, joined, tpl_method_id(joined, "splitlines", 10, &unsafe), &none,
                            &lines_v);
  if (!ok) tpl_buf_free(&tmp);
  tpl_buf b = {0};
  if (ok && first) ok = tpl_buf_put(&b, ind, il);
  const tpl_list *lines = ok ? tpl_l(lines_v) : NULL;
  for (size_t i = 0; ok && i < lines->n; i++) {
    const tpl_str *line = tpl_s(lines->v[i]);
    if (i) {
      ok = tpl_buf_put(&b, "\n", 1);
      if (ok && (blank || line->len)) ok = tpl_buf_put(&b, ind, il);
    }
    ok = ok && tpl_buf_put(&b, line->s, line->len);
  }
  tpl_drop(joined);
  tpl_drop(lines_v);
  const bool markup = tpl_is_markup(sv);
  tpl_drop(sv);
  if (!ok) {
    tpl_buf_free(&b);
    return false;
  }
  return tpl_buf_take(&b, markup, out);
}

/* Python's int(str, base) and float(str) for the int and float filters. */
static bool parse_int_str(const tpl_str *s, int base, int64_t *out) {
  size_t i = 0, e = s->len;
  while (i < e && tpl_cp_space((unsigned char)s->s[i])) i++;
  while (e > i && tpl_cp_space((unsigned char)s->s[e - 1])) e--;
  bool neg = false;
  if (i < e && (s->s[i] == '+' || s->s[i] == '-')) neg = s->s[i++] == '-';
  if (base == 0 || base == 16 || base == 8 || base == 2) {
    if (e - i > 2 && s->s[i] == '0') {
      const char p = (char)(s->s[i + 1] | 0x20);
      const int pb = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
      if (pb && (base == 0 || base == pb)) {
        base = pb;
        i += 2;
        if (i < e && s->s[i] == '_') i++;
      }
    }
    if (base == 0) base = 10;
  }
  if (i >= e) return false;
  uint64_t v = 0;
  for (size_t k = i; k < e; k++) {
    const char c = s->s[k];
    if (c == '_' && k > i && k + 1 < e && s->s[k - 1] != '_') continue;
    int d = c >= '0' && c <= '9'                     ? c - '0'
            : (c | 0x20) >= 'a' && (c | 0x20) <= 'z' ? (c | 0x20) - 'a' + 10
                                                     : 99;
    if (d >= base) return false;
    if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base) return false;
    v = v * (uint64_t)base + (uint64_t)d;
  }
  if (v > (uint64_t)INT64_MAX + neg) return false;
  *out = neg ? (int64_t)(0 - v) : (int64_t)v;
  return true;
}

static bool parse_float_str(const tpl_str *s, double *out) {
  char buf[128];
  size_t i = 0, e = s->len, o = 0;
  while (i < e && tpl_cp_space((unsigned char)s->s[i])) i++;
  while (e > i && tpl_cp_space((unsigned char)s->s[e - 1])) e--;
  if (e - i >= sizeof buf || e == i) return false;
  for (size_t k = i; k < e; k++) {
    const char c = s->s[k];
    if (c == '_') {
      if (k == i || k + 1 == e || !(s->s[k - 1] >= '0' && s->s[k - 1] <= '9') ||
          !(s->s[k + 1] >= '0' && s->s[k + 1] <= '9'))
        return false;
      continue;
    }
    if (!in_set("0123456789+-.eEinfatyINFATY", c)) return false;
    buf[o++] = c;
  }
  buf[o] = 0;
  if (strchr(buf, 'x') || strchr(buf, 'X')) return false;
  char *end;
  const double d = strtod(buf, &end);
  if (*end) return false;
  /* strtod takes "infinity"/"nan" in any case, as Python does; not "in" or "inf_" */
  *out = d;
  return true;
}

bool tpl_f_int(tpl_val v, const tpl_val *p, tpl_val *out) {
  tpl_val dflt = tpl_given(p[0]) ? p[0] : tpl_int(0);
  int64_t base = 10;
  if (!tpl_f_arg_int("int", p[1], 10, &base)) return false;
  switch (v.kind) {
    case TPL_INT:
      *out = v;
      return true;
    case TPL_BOOL:
      *out = tpl_int(v.b);
      return true;
    case TPL_FLOAT:
      if (isfinite(v.f) && fabs(v.f) < 9.2e18)
        *out = tpl_int((int64_t)v.f);
      else
        *out = tpl_ref(dflt);
      return true;
    case TPL_STR: {
      int64_t i;
      double d;
      if (parse_int_str(tpl_s(v), (int)base, &i))
        *out = tpl_int(i);
      else if (parse_float_str(tpl_s(v), &d) && isfinite(d) && fabs(d) < 9.2e18)
        *out = tpl_int((int64_t)d);
      else
        *out = tpl_ref(dflt);
      return true;
    }
    case TPL_UNDEF:
      return tpl_undefined_error(v);
    default:
      *out = tpl_ref(dflt);
      return true;
  }
}

bool tpl_f_float(tpl_val v, const tpl_val *p, tpl_val *out) {
  const tpl_val dflt = tpl_given(p[0]) ? p[0] : tpl_float(0.0);
  double d;
  switch (v.kind) {
    case TPL_FLOAT:
      *out = v;
      return true;
    case TPL_INT:
    case TPL_BOOL:
      *out = tpl_float(tpl_num(v));
      return true;
    case TPL_STR:
      *out = parse_float_str(tpl_s(v), &d) ? tpl_float(d) : tpl_ref(dflt);
      return true;
    case TPL_UNDEF:
      return tpl_undefined_error(v);
    default:
      *out = tpl_ref(dflt);
      return true;
  }
}

bool tpl_f_round(tpl_val v, const tpl_val *p, tpl_val *out) {
  int64_t prec;
  if (!tpl_f_arg_int("round", p[0], 0, &prec)) return false;
  const char *method = "common";
  if (tpl_given(p[1])) {
    if (p[1].kind != TPL_STR) return tpl_err("method must be common, ceil or floor");
    method = tpl_s(p[1])->s;
  }
  if (strcmp(method, "common") && strcmp(method, "ceil") && strcmp(method, "floor"))
    return tpl_err("method must be common, ceil or floor");
  if (!tpl_is_number(v)) {
    if (v.kind == TPL_UNDEF) return tpl_undefined_error(v);
    return tpl_err("type %s doesn't define __round__ method", tpl_type_name(v));
  }
  if (!strcmp(method, "common")) {
    if (v.kind != TPL_FLOAT) { /* int.__round__ keeps an int */
      *out = tpl_int(v.kind == TPL_INT ? v.i : v.b);
      return true;
    }
    if (!isfinite(v.f) || prec > 300) {
      *out = v;
      return true;
    }
    if (prec >= 0) {
      char buf[512];
      snprintf(buf, sizeof buf, "%.*f", (int)prec, v.f); /* correctly rounded, ties to even */
      *out = tpl_float(strtod(buf, NULL));
      return true;
    }
    const double m = pow(10.0, (double)-prec);
    *out = tpl_float(nearbyint(v.f / m) * m);
    return true;
  }
  const double m = pow(10.0, (double)prec), x = tpl_num(v) * m;
  *out = tpl_float((method[0] == 'c' ? ceil(x) : floor(x)) / m);
  return true;
}

bool tpl_f_title(tpl_val v, tpl_val *out) {
  /* "".join(w[0].upper() + w[1:].lower() for w in re.split(r"([-\s({\[<]+)", s) if w) */
  tpl_val sv;
  if (!tpl_to_str(v, &sv)) return false;
  const tpl_str *s = tpl_s(sv);
  tpl_buf b = {0};
  bool ok = true, word_start = true;
  for (size_t i = 0; ok && i < s->len;) {
    const uint32_t c = tpl_utf8_next(s->s, s->len, &i);
    const bool sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || tpl_cp_space(c);
    if (sep) {
      /* a separator run is an item of its own: its first char upper-cased */
      ok = tpl_buf_cp(&b, word_start ? tpl_cp_upper(c) : c);
      word_start = false;
      size_t j = i;
      bool more = false;
      if (j < s->len) {
        const uint32_t d = tpl_utf8_next(s->s, s->len, &j);
        more = d == '-' || d == '(' || d == '{' || d == '[' || d == '<' || tpl_cp_space(d);
      }
      word_start = !more;
      continue;
    }
    ok = tpl_buf_cp(&b, word_start ? tpl_cp_upper(c) : tpl_cp_lower(c));
    word_start = false;
  }
  const bool markup = tpl_is_markup(sv);
  tpl_drop(sv);
  if (!ok) {
    tpl_buf_free(&b);
    return false;
  }
  return tpl_buf_take(&b, markup, out);
}

bool tpl_f_truncate(tpl_rt *rt, tpl_val v, const tpl_val *p, tpl_val *out) {
  int64_t length, leeway;
  if (!tpl_f_arg_int("truncate", p[0], 255, &length) ||
      !tpl_f_arg_int("truncate", p[3], 5, &leeway))
    return false;
  const bool killwords = tpl_f_arg_bool(p[1], false);
  const char *end = "...";
  size_t el = 3;
  if (tpl_given(p[2])) {
    if (p[2].kind != TPL_STR) return tpl_err("truncate: end must be a string");
    end = tpl_s(p[2])->s;
    el = tpl_s(p[2])->len;
  }
  tpl_val sv;
  if (!tpl_to_str(v, &sv)) return false;
  const tpl_str *s = tpl_s(sv);
  const int64_t endcp = (int64_t)tpl_utf8_count(end, el);
  if (length < endcp || leeway < 0) {
    tpl_drop(sv);
    return tpl_err("expected length >= %lld, got %lld", (long long)endcp, (long long)length);
  }
  if ((int64_t)s->ncp <= length + leeway) {
    *out = sv;
    return true;
  }
  size_t cut = tpl_utf8_offset(s, (size_t)(length - endcp));
  if (!killwords) { /* rsplit(" ", 1)[0] */
    size_t k = cut;
    while (k > 0 && s->s[k - 1] != ' ') k--;
    if (k > 0) cut = k - 1;
  }
  tpl_buf b = {0};
  bool ok = tpl_buf_put(&b, s->s, cut) && tpl_buf_put(&b, end, el);
  tpl_drop(sv);
  (void)rt;
  if (!ok) {
    tpl_buf_free(&b);
    return false;
  }
  return tpl_buf_take(&b, false, out);
}

bool tpl_f_wordcount(tpl_val v, tpl_val *out) {
  tpl_val sv;
  if (!tpl_to_str(v, &sv)) return false;
  const tpl_str *s = tpl_s(sv);
  int64_t n = 0;
  bool in = false;
  for (size_t i = 0; i < s->len;) {
    const bool w = tpl_cp_word(tpl_utf8_next(s->s, s->len, &i));
    if (w && !in) n++;
    in = w;
  }
  tpl_drop(sv);
  *out = tpl_int(n);
  return true;
}

bool tpl_f_striptags(tpl_val v, tpl_val *out) {
  tpl_val sv;
  if (!tpl_to_str(v, &sv)) return false;
  const tpl_str *s = tpl_s(sv);
  tpl_buf b = {0};
  bool ok = true, space = false;
  for (size_t i = 0; ok && i < s->len;) {
    if (s->s[i] == '<') {
      const bool comment = s->len - i >= 4 && !memcmp(s->s + i, "<!--", 4);
      const char *e =
          comment ? tpl_memmem(s->s + i, s->len - i, "-->", 3) : memchr(s->s + i, '>', s->len - i);
      if (e) {
        i = (size_t)(e - s->s) + (comment ? 3 : 1);
        continue;
      }
    }
    const size_t st = i;
    const uint32_t c = tpl_utf8_next(s->s, s->len, &i);
    if (tpl_cp_space(c)) {
      space = b.n > 0;
      continue;
    }
    if (space) ok = tpl_buf_put(&b, " ", 1);
    space = false;
    ok = ok && tpl_buf_put(&b, s->s + st, i - st);
  }
  tpl_drop(sv);
  if (!ok) {
    tpl_buf_free(&b);
    return false;
  }
  /* the common entities back to characters */
  tpl_buf u = {0};
  for (size_t i = 0; ok && i < b.n;) {
    static const struct {
      const char *e, *c;
    } ents[] = {{"&amp;", "&"},   {"&lt;", "<"},   {"&gt;", ">"},
                {"&quot;", "\""}, {"&#34;", "\""}, {"&#39;", "'"}};
    bool hit = false;
    for (size_t k = 0; k < sizeof ents / sizeof ents[0] && !hit; k++) {
      const size_t el = strlen(ents[k].e);
      if (b.n - i >= el && !memcmp(b.s + i, ents[k].e, el)) {
        ok = tpl_buf_str(&u, ents[k].c);
        i += el;
        hit = true;
      }
    }
    if (!hit) ok = tpl_buf_put(&u, b.s + i++, 1);
  }
  tpl_buf_free(&b);
  if (!ok) {
    tpl_buf_free(&u);
    return false;
  }
  return tpl_buf_take(&u, false, out);
}

bool tpl_f_filesize(tpl_val v, const tpl_val *p, tpl_val *out) {
  double bytes;
  if (tpl_is_number(v))
    bytes = tpl_num(v);
  else if (v.kind == TPL_STR) {
    tpl_val f;
    const tpl_val none[1] = {TPL_NOT_GIVEN};
    if (!tpl_f_float(v, none, &f)) return false;
    bytes = f.f;
  } else
    return tpl_err("filesizeformat: not a number");
  const bool binary = tpl_f_arg_bool(p[0], false);
  const double base = binary ? 1024 : 1000;
  static const char *const dec[] = {"kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"};
  static const char *const bin[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"};
  char buf[64];
  if (bytes == 1)
    snprintf(buf, sizeof buf, "1 Byte");
  else if (bytes < base)
    snprintf(buf, sizeof buf, "%lld Bytes", (long long)bytes);
  else {
    int i = 0;
    double unit = base * base;
    while (i < 7 && bytes >= unit) {
      unit *= base;
      i++;
    }
    snprintf(buf, sizeof buf, "%.1f %s", base * bytes / unit, binary ? bin[i] : dec[i]);
  }
  return tpl_str_val(buf, strlen(buf), out);
}

bool tpl_f_urlencode(tpl_val v, tpl_val *out) {
  tpl_val sv;
  if (v.kind == TPL_DICT || (v.kind == TPL_LIST))
    return tpl_err("urlencode of a mapping is not supported");
  if (!tpl_to_str(v, &sv)) return false;
  const tpl_str *s = tpl_s(sv);
  tpl_buf b = {0};
  bool ok = true;
  for (size_t i = 0; ok && i < s->len; i++) {
    const unsigned char c = (unsigned char)s->s[i];
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z' ? true
                                               : (c >= '0' && c <= '9') || in_set("_.-~/", c))
      ok = tpl_buf_put(&b, (const char *)&c, 1);
    else
      ok = tpl_buf_printf(&b, "%%%02X", c);
  }
  tpl_drop(sv);
  if (!ok) {
    tpl_buf_free(&b);
    return false;
  }
  return tpl_buf_take(&b, false, out);
}
