/* format.c: Python's string formatting for templates: `fmt % args`
 * (printf-style: %s %r %d %f %x ... with flags, width and precision, and
 * %(name)s with a dict) and str.format() (positional, numbered and named
 * fields, .attr and [key] lookups through the sandbox, !r/!s conversions
 * and the format-spec mini-language). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/eval.h"

/* c is one of the characters of set (never the NUL). */
static bool in_set(const char *set, char c) {
  return c != 0 && strchr(set, c) != NULL;
}

typedef struct {
  char fill[5]; /* UTF-8 of the fill character */
  char align;   /* '<', '>', '^', '=' or 0 */
  char sign;    /* '+', '-', ' ' or 0 */
  bool alt, zero;
  char group;          /* thousands separator: ',' or '_' (0: none) */
  int64_t width, prec; /* -1: not given */
  char type;           /* 0: none */
} spec;

static bool pad_to(tpl_buf *b, const char *s, size_t n, const spec *sp, char default_align) {
  const size_t cps = tpl_utf8_count(s, n);
  const int64_t extra = sp->width > (int64_t)cps ? sp->width - (int64_t)cps : 0;
  if (extra > (int64_t)(tpl_heap_cur->max_str / 4))
    return tpl_err("a string would exceed %zu bytes", tpl_heap_cur->max_str);
  char align = sp->align ? sp->align : default_align;
  const char *fill = sp->fill[0] ? sp->fill : " ";
  const size_t fl = strlen(fill);
  int64_t left = 0;
  if (align == '>')
    left = extra;
  else if (align == '^')
    left = extra / 2;
  else if (align == '=') { /* padding after the sign */
    size_t signlen = n && (s[0] == '-' || s[0] == '+' || s[0] == ' ') ? 1 : 0;
    if (!tpl_buf_put(b, s, signlen)) return false;
    for (int64_t i = 0; i < extra; i++)
      if (!tpl_buf_put(b, fill, fl)) return false;
    return tpl_buf_put(b, s + signlen, n - signlen);
  }
  for (int64_t i = 0; i < left; i++)
    if (!tpl_buf_put(b, fill, fl)) return false;
  if (!tpl_buf_put(b, s, n)) return false;
  for (int64_t i = 0; i < extra - left; i++)
    if (!tpl_buf_put(b, fill, fl)) return false;
  return true;
}

/* Inserts a thousands separator into the integer digits that start s. */
static void group_digits(char *s, size_t cap, char sep) {
  if (!sep) return;
  size_t n = 0;
  while (s[n] >= '0' && s[n] <= '9') n++;
  const size_t len = strlen(s), extra = n ? (n - 1) / 3 : 0;
  if (!extra || len + extra + 1 > cap) return;
  memmove(s + n + extra, s + n, len - n + 1);
  for (size_t j = n, o = n + extra, k = 0; j > 0;) {
    s[--o] = s[--j];
    if (++k % 3 == 0 && j > 0) s[--o] = sep;
  }
}

/* A number with a type letter (d x X o b c e E f F g G %) and the spec's
 * sign, '#' and ','; padding is the caller's. */
static bool format_number(tpl_buf *b, tpl_val v, const spec *sp, char type) {
  char tmp[512], digits[400];
  const bool is_float = v.kind == TPL_FLOAT;
  if (in_set("dxXobcn", type) && is_float)
    return tpl_err("Unknown format code '%c' for object of type 'float'", type);
  const char *sign_s = "";
  if (in_set("dxXobn", type)) {
    const int64_t i = v.kind == TPL_INT ? v.i : v.b;
    const uint64_t m = i < 0 ? 0 - (uint64_t)i : (uint64_t)i;
    sign_s = i < 0 ? "-" : sp->sign == '+' ? "+" : sp->sign == ' ' ? " " : "";
    const char *prefix = "";
    if (type == 'x' || type == 'X') {
      snprintf(digits, sizeof digits, type == 'x' ? "%" PRIx64 : "%" PRIX64, m);
      if (sp->alt) prefix = type == 'x' ? "0x" : "0X";
    } else if (type == 'o') {
      snprintf(digits, sizeof digits, "%" PRIo64, m);
      if (sp->alt) prefix = "0o";
    } else if (type == 'b') {
      int k = 0;
      char rev[80];
      uint64_t x = m;
      do rev[k++] = (char)('0' + (x & 1));
      while ((x >>= 1) != 0);
      for (int j = 0; j < k; j++) digits[j] = rev[k - 1 - j];
      digits[k] = 0;
      if (sp->alt) prefix = "0b";
    } else {
      snprintf(digits, sizeof digits, "%" PRIu64, m);
      group_digits(digits, sizeof digits, sp->group);
    }
    snprintf(tmp, sizeof tmp, "%s%s%s", sign_s, prefix, digits);
    return tpl_buf_str(b, tmp);
  }
  if (type == 'c') {
    const int64_t i = v.kind == TPL_INT ? v.i : v.b;
    if (i < 0 || i > 0x10FFFF || (i >= 0xD800 && i <= 0xDFFF))
      return tpl_err("%%c arg not in range(0x110000)");
    return tpl_buf_cp(b, (uint32_t)i);
  }
  /* floating point */
  double x = tpl_num(v);
  int64_t prec = sp->prec < 0 ? 6 : sp->prec;
  if (prec > 300) prec = 300;
  sign_s = signbit(x) && !isnan(x) ? "-" : sp->sign == '+' ? "+" : sp->sign == ' ' ? " " : "";
  const double ax = fabs(x);
  if (isinf(ax) || isnan(ax)) {
    const bool up = type == 'E' || type == 'F' || type == 'G';
    snprintf(tmp, sizeof tmp, "%s%s", sign_s,
             isnan(ax) ? (up ? "NAN" : "nan") : (up ? "INF" : "inf"));
    return tpl_buf_str(b, tmp);
  }
  if (type == '%') {
    snprintf(digits, sizeof digits, sp->alt ? "%#.*f" : "%.*f", (int)prec, ax * 100);
    snprintf(tmp, sizeof tmp, "%s%s%%", sign_s, digits);
    return tpl_buf_str(b, tmp);
  }
  if (type == 0) { /* no type: repr for floats without precision, like 'g' with one */
    if (sp->prec < 0) {
      tpl_float_repr(ax, digits);
    } else {
      snprintf(digits, sizeof digits, "%.*g", (int)(prec ? prec : 1), ax);
      if (!strpbrk(digits, ".e")) strcat(digits, ".0");
    }
  } else {
    if (!in_set("eEfFgG", type)) return tpl_err("Unknown format code '%c'", type);
    char f[8];
    snprintf(f, sizeof f, sp->alt ? "%%#.*%c" : "%%.*%c", type);
    snprintf(digits, sizeof digits, f, (int)prec, ax);
  }
  group_digits(digits, sizeof digits, sp->group);
  snprintf(tmp, sizeof tmp, "%s%s", sign_s, digits);
  return tpl_buf_str(b, tmp);
}

/* ---- str % args ---- */

bool tpl_percent_format(tpl_rt *rt, tpl_val fmtv, tpl_val args, tpl_val *out) {
  const tpl_str *f = tpl_s(fmtv);
  const tpl_val *pos = &args;
  size_t npos = 1, next = 0;
  const tpl_dict *map = NULL;
  if (args.kind == TPL_LIST && tpl_l(args)->h.sub == TPL_L_TUPLE) {
    pos = tpl_l(args)->v;
    npos = tpl_l(args)->n;
  } else if (args.kind == TPL_DICT) {
    map = tpl_d(args);
  }
  tpl_buf b = {0};
  bool ok = tpl_rt_step(rt, f->len / 256), used_map = false;
  size_t i = 0;
  while (ok && i < f->len) {
    const char *pc = memchr(f->s + i, '%', f->len - i);
    const size_t run = pc ? (size_t)(pc - (f->s + i)) : f->len - i;
    if (!(ok = tpl_buf_put(&b, f->s + i, run))) break;
    i += run;
    if (i >= f->len) break;
    i++; /* '%' */
    spec sp = {.width = -1, .prec = -1};
    tpl_val v = tpl_none();
    bool have_v = false;
    if (i < f->len && f->s[i] == '(') {
      const char *close = memchr(f->s + i, ')', f->len - i);
      if (!map || !close) {
        ok = tpl_err(map ? "incomplete format key" : "format requires a mapping");
        break;
      }
      const tpl_val *x = tpl_dict_get_str(map, f->s + i + 1, (size_t)(close - (f->s + i + 1)));
      if (!x) {
        ok = tpl_err("KeyError: '%.*s'", (int)(close - (f->s + i + 1)), f->s + i + 1);
        break;
      }
      v = *x;
      have_v = used_map = true;
      i = (size_t)(close - f->s) + 1;
    }
    for (; i < f->len && in_set("-+ #0", f->s[i]); i++) {
      const char c = f->s[i];
      if (c == '-')
        sp.align = '<';
      else if (c == '+')
        sp.sign = '+';
      else if (c == ' ' && sp.sign != '+')
        sp.sign = ' ';
      else if (c == '#')
        sp.alt = true;
      else
        sp.zero = true;
    }
    for (int part = 0; part < 2 && ok; part++) {
      if (part == 1) {
        if (i >= f->len || f->s[i] != '.') break;
        i++;
      }
      int64_t n = -1;
      if (i < f->len && f->s[i] == '*') {
        i++;
        if (next >= npos || map) {
          ok = tpl_err("not enough arguments for format string");
          break;
        }
        const tpl_val w = pos[next++];
        if (w.kind != TPL_INT) {
          ok = tpl_err("* wants int");
          break;
        }
        n = w.i;
      } else {
        for (; i < f->len && f->s[i] >= '0' && f->s[i] <= '9'; i++)
          n = (n < 0 ? 0 : n) * 10 + (f->s[i] - '0');
        if (n > 100000) n = 100000;
      }
      if (part == 0)
        sp.width = n;
      else
        sp.prec = n < 0 ? 0 : n;
    }
    if (!ok) break;
    if (i >= f->len) {
      ok = tpl_err("incomplete format");
      break;
    }
    const char conv = f->s[i++];
    if (conv == '%') {
      ok = tpl_buf_put(&b, "%", 1);
      continue;
    }
    if (!have_v) {
      if (map && next == 0 && npos == 1) {
        v = args;
      } else if (next >= npos) {
        ok = tpl_err("not enough arguments for format string");
        break;
      } else {
        v = pos[next];
      }
      next++;
    }
    tpl_buf piece = {0};
    if (conv == 's' || conv == 'r' || conv == 'a') {
      ok = conv == 's'   ? tpl_str_of(&piece, v)
           : conv == 'r' ? tpl_repr(&piece, v, 0)
                         : tpl_ascii(&piece, v);
      if (ok && sp.prec >= 0 && (size_t)sp.prec < tpl_utf8_count(piece.s ? piece.s : "", piece.n)) {
        size_t cut = 0;
        for (int64_t k = 0; k < sp.prec; k++) tpl_utf8_next(piece.s, piece.n, &cut);
        piece.n = cut;
      }
    } else if (in_set("diouxXeEfFgGc", conv)) {
      if (!tpl_is_number(v)) {
        ok = v.kind == TPL_UNDEF ? tpl_undefined_error(v)
                                 : (tpl_err("%%%c format: a real number is required, not %s", conv,
                                            tpl_type_name(v)));
      } else {
        char type = conv == 'i' || conv == 'u' ? 'd' : conv;
        tpl_val num = v;
        if (in_set("doxX", type) && v.kind == TPL_FLOAT) {
          if (!isfinite(v.f) || fabs(v.f) >= 9.2e18)
            ok = tpl_err("integer overflow");
          else
            num = tpl_int((int64_t)v.f);
        }
        spec ns = sp;
        ns.alt = sp.alt && type != 'o' ? sp.alt : false;
        if (ok) ok = format_number(&piece, num, &ns, type);
        if (ok && type == 'o' && sp.alt) { /* %#o is 0o... in Python */
          tpl_buf fixed = {0};
          const bool neg = piece.n && piece.s[0] == '-';
          ok = tpl_buf_put(&fixed, piece.s, neg) && tpl_buf_put(&fixed, "0o", 2) &&
               tpl_buf_put(&fixed, piece.s + neg, piece.n - neg);
          tpl_buf_free(&piece);
          piece = fixed;
        }
        if (ok && sp.prec >= 0 && in_set("dxXo", type)) { /* precision: minimum digits */
          const bool neg = piece.n && (piece.s[0] == '-' || piece.s[0] == '+' || piece.s[0] == ' ');
          const int64_t digs = (int64_t)piece.n - neg;
          if (digs < sp.prec) {
            tpl_buf fixed = {0};
            ok = tpl_buf_put(&fixed, piece.s, neg);
            for (int64_t k = digs; ok && k < sp.prec; k++) ok = tpl_buf_put(&fixed, "0", 1);
            ok = ok && tpl_buf_put(&fixed, piece.s + neg, piece.n - neg);
            tpl_buf_free(&piece);
            piece = fixed;
          }
        }
      }
    } else {
      ok = tpl_err("unsupported format character '%c'", conv);
    }
    if (ok) {
      spec pad = {.width = sp.width, .prec = -1};
      const bool numeric = in_set("diouxXeEfFgG", conv);
      if (sp.align == '<')
        pad.align = '<';
      else if (sp.zero && numeric) {
        pad.align = '=';
        strcpy(pad.fill, "0");
      } else
        pad.align = '>';
      ok = pad_to(&b, piece.s ? piece.s : "", piece.n, &pad, '>');
    }
    tpl_buf_free(&piece);
  }
  if (ok && !map && next < npos)
    ok = tpl_err("not all arguments converted during string formatting");
  (void)used_map;
  if (!ok) {
    tpl_buf_free(&b);
    return false;
  }
  return tpl_buf_take(&b, tpl_is_markup(fmtv), out);
}

/* ---- str.format ---- */

static bool parse_spec(const char *s, size_t n, spec *sp) {
  memset(sp, 0, sizeof *sp);
  sp->width = sp->prec = -1;
  size_t i = 0;
  if (n >= 2) {
    size_t j = 0;
    tpl_utf8_next(s, n, &j);
    if (j < n && in_set("<>^=", s[j])) {
      memcpy(sp->fill, s, j);
      sp->align = s[j];
      i = j + 1;
    }
  }
  if (!sp->align && i < n && in_set("<>^=", s[i])) sp->align = s[i++];
  if (i < n && in_set("+- ", s[i])) sp->sign = s[i++];
  if (i < n && s[i] == '#') sp->alt = true, i++;
  if (i < n && s[i] == '0') sp->zero = true, i++;
  if (i < n && s[i] >= '0' && s[i] <= '9') {
    sp->width = 0;
    for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) sp->width = sp->width * 10 + (s[i] - '0');
    if (sp->width > 100000) sp->width = 100000;
  }
  if (i < n && (s[i] == ',' || s[i] == '_')) sp->group = s[i++];
  if (i < n && s[i] == '.') {
    i++;
    sp->prec = 0;
    for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) sp->prec = sp->prec * 10 + (s[i] - '0');
    if (sp->prec > 1000) sp->prec = 1000;
  }
  if (i < n) sp->type = s[i++];
  if (i != n) return tpl_err("Invalid format specifier");
  return true;
}

static bool format_field(tpl_buf *b, tpl_val v, const char *specs, size_t sn) {
  spec sp;
  if (!parse_spec(specs, sn, &sp)) return false;
  tpl_buf piece = {0};
  bool ok;
  char dflt = '<';
  if (tpl_is_number(v) && sp.type == 's')
    return tpl_err("Unknown format code 's' for object of type '%s'", tpl_type_name(v));
  if (v.kind == TPL_STR || (!tpl_is_number(v) && sp.type == 0) || sp.type == 's') {
    if (sp.type && sp.type != 's')
      return tpl_err("Unknown format code '%c' for object of type '%s'", sp.type, tpl_type_name(v));
    if (!tpl_is_number(v) && v.kind != TPL_STR && sn)
      return tpl_err("unsupported format string passed to %s.__format__", tpl_type_name(v));
    ok = tpl_str_of(&piece, v);
    if (ok && sp.prec >= 0) {
      size_t cut = 0;
      for (int64_t k = 0; k < sp.prec && cut < piece.n; k++) tpl_utf8_next(piece.s, piece.n, &cut);
      piece.n = cut;
    }
  } else if (tpl_is_number(v)) {
    char type = sp.type;
    if (type == 0 && v.kind != TPL_FLOAT) type = 'd';
    if (type == 'n') type = v.kind == TPL_FLOAT ? 'g' : 'd';
    if (type && !in_set("dxXobceEfFgG%", type))
      return tpl_err("Unknown format code '%c' for object of type '%s'", type, tpl_type_name(v));
    const tpl_val num = v;
    if (v.kind == TPL_BOOL && sp.type == 0 && !sn)
      ok = tpl_str_of(&piece, v);
    else if (v.kind != TPL_FLOAT && in_set("eEfFgG%", type))
      ok = format_number(&piece, tpl_float(tpl_num(num)), &sp, type);
    else
      ok = format_number(&piece, num, &sp, type);
    dflt = '>';
    if (sp.zero && !sp.align) {
      sp.align = '=';
      strcpy(sp.fill, "0");
    }
  } else {
    ok = tpl_str_of(&piece, v);
  }
  ok = ok && pad_to(b, piece.s ? piece.s : "", piece.n, &sp, dflt);
  tpl_buf_free(&piece);
  return ok;
}

/* The replacement fields of fs[0..flen) into b; a format spec may hold
 * fields itself ("{0:{1}}"), one level deep, numbered on from the outer. */
static bool format_fields(tpl_rt *rt, tpl_buf *b, const char *fs, size_t flen, const tpl_args *a,
                          size_t *auto_idx, int depth) {
  bool ok = true;
  for (size_t i = 0; ok && i < flen;) {
    const char c = fs[i];
    if (c == '}') {
      if (i + 1 < flen && fs[i + 1] == '}') {
        ok = tpl_buf_put(b, "}", 1);
        i += 2;
        continue;
      }
      ok = tpl_err("Single '}' encountered in format string");
      break;
    }
    if (c != '{') {
      ok = tpl_buf_put(b, &fs[i], 1);
      i++;
      continue;
    }
    if (i + 1 < flen && fs[i + 1] == '{') {
      ok = tpl_buf_put(b, "{", 1);
      i += 2;
      continue;
    }
    const char *close = NULL;
    for (size_t k = i + 1, open = 1; k < flen; k++) { /* the matching '}' */
      open += fs[k] == '{';
      if (fs[k] == '}' && --open == 0) {
        close = fs + k;
        break;
      }
    }
    if (!close) {
      ok = tpl_err("Single '{' encountered in format string");
      break;
    }
    const char *field = fs + i + 1;
    const size_t flen = (size_t)(close - field);
    i = (size_t)(close - fs) + 1;
    /* field_name[!conv][:spec] */
    size_t name_end = 0;
    while (name_end < flen && field[name_end] != '!' && field[name_end] != ':') name_end++;
    char conv = 0;
    const char *specs = "";
    size_t sn = 0;
    size_t k = name_end;
    if (k < flen && field[k] == '!') {
      conv = k + 1 < flen ? field[k + 1] : 0;
      k += 2;
    }
    if (k < flen && field[k] == ':') {
      specs = field + k + 1;
      sn = flen - k - 1;
    }
    /* the first part: an index, a name or nothing */
    size_t p = 0;
    while (p < name_end && field[p] != '.' && field[p] != '[') p++;
    tpl_val v;
    if (p == 0) {
      if (*auto_idx >= a->n_pos) {
        ok = tpl_err("Replacement index %zu out of range for positional args tuple", *auto_idx);
        break;
      }
      v = tpl_ref(a->pos[(*auto_idx)++]);
    } else if (field[0] >= '0' && field[0] <= '9') {
      size_t idx = 0;
      for (size_t q = 0; q < p; q++) idx = idx * 10 + (size_t)(field[q] - '0');
      if (idx >= a->n_pos) {
        ok = tpl_err("Replacement index %zu out of range for positional args tuple", idx);
        break;
      }
      v = tpl_ref(a->pos[idx]);
    } else {
      size_t kw = 0;
      while (kw < a->n_kw && (strlen(a->kw_names[kw]) != p || memcmp(a->kw_names[kw], field, p)))
        kw++;
      if (kw == a->n_kw) {
        ok = tpl_err("KeyError: '%.*s'", (int)p, field);
        break;
      }
      v = tpl_ref(a->kw[kw]);
    }
    while (ok && p < name_end) { /* .attr and [key] */
      tpl_val next;
      if (field[p] == '.') {
        size_t e = p + 1;
        while (e < name_end && field[e] != '.' && field[e] != '[') e++;
        ok = tpl_getattr(rt, v, field + p + 1, e - p - 1, &next);
        p = e;
      } else {
        const char *rb = memchr(field + p, ']', name_end - p);
        if (!rb) {
          ok = tpl_err("Missing ']' in format string");
          break;
        }
        const char *key = field + p + 1;
        const size_t kl = (size_t)(rb - key);
        bool digits = kl > 0;
        for (size_t q = 0; q < kl; q++) digits &= key[q] >= '0' && key[q] <= '9';
        tpl_val kv;
        if (digits) {
          int64_t n = 0;
          for (size_t q = 0; q < kl; q++) n = n * 10 + (key[q] - '0');
          kv = tpl_int(n);
          ok = true;
        } else {
          ok = tpl_str_val(key, kl, &kv);
        }
        ok = ok && tpl_getitem(rt, v, kv, &next);
        if (!digits) tpl_drop(kv);
        p = (size_t)(rb - field) + 1;
      }
      tpl_drop(v);
      if (!ok) break;
      v = next;
    }
    if (!ok) break;
    if (conv == 'r' || conv == 'a') {
      tpl_buf rb = {0};
      ok = conv == 'r' ? tpl_repr(&rb, v, 0) : tpl_ascii(&rb, v);
      tpl_drop(v);
      if (!ok || !tpl_buf_take(&rb, false, &v)) {
        tpl_buf_free(&rb);
        ok = false;
        break;
      }
    } else if (conv == 's') {
      tpl_val sv;
      ok = tpl_to_str(v, &sv);
      tpl_drop(v);
      if (!ok) break;
      v = sv;
    } else if (conv) {
      tpl_drop(v);
      ok = tpl_err("Unknown conversion specifier %c", conv);
      break;
    }
    tpl_buf nested = {0};
    if (memchr(specs, '{', sn)) { /* fields inside the spec */
      if (depth > 0)
        ok = tpl_err("Max string recursion exceeded");
      else
        ok = format_fields(rt, &nested, specs, sn, a, auto_idx, depth + 1);
      specs = nested.s ? nested.s : "";
      sn = nested.n;
    }
    if (!ok)
      ;
    else if (v.kind == TPL_UNDEF && v.sub == TPL_UNDEF_UNSAFE)
      ok = tpl_undefined_error(v);
    else
      ok = format_field(b, v, specs, sn);
    tpl_buf_free(&nested);
    tpl_drop(v);
  }
  return ok;
}

bool tpl_str_format(tpl_rt *rt, tpl_val fmtv, const tpl_args *a, tpl_val *out) {
  const tpl_str *f = tpl_s(fmtv);
  tpl_buf b = {0};
  size_t auto_idx = 0;
  if (!tpl_rt_step(rt, f->len / 256) || !format_fields(rt, &b, f->s, f->len, a, &auto_idx, 0)) {
    tpl_buf_free(&b);
    return false;
  }
  return tpl_buf_take(&b, tpl_is_markup(fmtv), out);
}
