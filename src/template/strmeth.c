/* strmeth.c: Python's str methods for templates (strip, split, replace,
 * startswith, upper, title, find, join, ...), counting in code points and
 * with Python's Unicode whitespace; on a Markup string they return Markup
 * and escape what markupsafe escapes (join's items, replace's new text). */
#include <stdlib.h>
#include <string.h>

#include "template/eval.h"

enum {
  S_CAPITALIZE,
  S_CASEFOLD,
  S_CENTER,
  S_COUNT,
  S_ENCODE,
  S_ENDSWITH,
  S_EXPANDTABS,
  S_FIND,
  S_FORMAT,
  S_FORMAT_MAP,
  S_INDEX,
  S_ISALNUM,
  S_ISALPHA,
  S_ISASCII,
  S_ISDECIMAL,
  S_ISDIGIT,
  S_ISIDENTIFIER,
  S_ISLOWER,
  S_ISNUMERIC,
  S_ISPRINTABLE,
  S_ISSPACE,
  S_ISTITLE,
  S_ISUPPER,
  S_JOIN,
  S_LJUST,
  S_LOWER,
  S_LSTRIP,
  S_MAKETRANS,
  S_PARTITION,
  S_REMOVEPREFIX,
  S_REMOVESUFFIX,
  S_REPLACE,
  S_RFIND,
  S_RINDEX,
  S_RJUST,
  S_RPARTITION,
  S_RSPLIT,
  S_RSTRIP,
  S_SPLIT,
  S_SPLITLINES,
  S_STARTSWITH,
  S_STRIP,
  S_SWAPCASE,
  S_TITLE,
  S_TRANSLATE,
  S_UPPER,
  S_ZFILL,
  S_END
};

static const char *const NAMES[S_END] = {
    "capitalize",   "casefold",    "center",    "count",      "encode",       "endswith",
    "expandtabs",   "find",        "format",    "format_map", "index",        "isalnum",
    "isalpha",      "isascii",     "isdecimal", "isdigit",    "isidentifier", "islower",
    "isnumeric",    "isprintable", "isspace",   "istitle",    "isupper",      "join",
    "ljust",        "lower",       "lstrip",    "maketrans",  "partition",    "removeprefix",
    "removesuffix", "replace",     "rfind",     "rindex",     "rjust",        "rpartition",
    "rsplit",       "rstrip",      "split",     "splitlines", "startswith",   "strip",
    "swapcase",     "title",       "translate", "upper",      "zfill"};

int tpl_str_method_id(const char *name, size_t len) {
  for (int i = 0; i < S_END; i++)
    if (strlen(NAMES[i]) == len && !memcmp(NAMES[i], name, len)) return i;
  return -1;
}

const char *tpl_str_method_name(int id) {
  return id >= 0 && id < S_END ? NAMES[id] : "method";
}

/* ---- helpers ---- */

/* The code points of s (malloc'd; *n of them). */
static uint32_t *cps_of(const tpl_str *s, size_t *n) {
  uint32_t *v = malloc((s->ncp + 1) * sizeof *v);
  if (!v) {
    pa_error(PASADA_ERR_NOMEM, "out of memory");
    return NULL;
  }
  size_t k = 0;
  for (size_t i = 0; i < s->len;) v[k++] = tpl_utf8_next(s->s, s->len, &i);
  *n = k;
  return v;
}

static bool new_str(const char *s, size_t len, bool markup, tpl_val *out) {
  tpl_str *r = tpl_str_markup(s, len, markup);
  if (!r) return false;
  *out = tpl_obj_val(r);
  return true;
}

static bool want_str(const char *fn, tpl_val v) {
  if (v.kind == TPL_STR) return true;
  if (v.kind == TPL_UNDEF) return tpl_undefined_error(v);
  return tpl_err("%s() argument must be str, not %s", fn, tpl_type_name(v));
}

static bool want_int(const char *fn, tpl_val v, int64_t *out) {
  if (v.kind == TPL_INT || v.kind == TPL_BOOL) {
    *out = v.kind == TPL_INT ? v.i : v.b;
    return true;
  }
  if (v.kind == TPL_UNDEF) return tpl_undefined_error(v);
  return tpl_err("%s(): '%s' object cannot be interpreted as an integer", fn, tpl_type_name(v));
}

static bool in_set(uint32_t c, const uint32_t *set, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (set[i] == c) return true;
  return false;
}

/* strip / lstrip / rstrip with chars (NULL: whitespace) */
static bool strip(const tpl_str *s, tpl_val chars, bool left, bool right, bool markup,
                  tpl_val *out) {
  uint32_t *set = NULL;
  size_t nset = 0;
  if (tpl_given(chars) && chars.kind != TPL_NONE) {
    if (!want_str("strip", chars)) return false;
    if (!(set = cps_of(tpl_s(chars), &nset))) return false;
  }
  size_t from = 0, to = s->len;
  if (left)
    while (from < to) {
      size_t j = from;
      const uint32_t c = tpl_utf8_next(s->s, s->len, &j);
      if (set ? !in_set(c, set, nset) : !tpl_cp_space(c)) break;
      from = j;
    }
  if (right)
    while (to > from) {
      size_t k = to - 1;
      while (k > from && ((unsigned char)s->s[k] & 0xC0) == 0x80) k--;
      size_t j = k;
      const uint32_t c = tpl_utf8_next(s->s, s->len, &j);
      if (set ? !in_set(c, set, nset) : !tpl_cp_space(c)) break;
      to = k;
    }
  free(set);
  return new_str(s->s + from, to - from, markup, out);
}

static bool push_piece(tpl_list *l, const char *s, size_t n, bool markup) {
  tpl_val v;
  return new_str(s, n, markup, &v) && tpl_list_push(l, v);
}

/* split / rsplit */
static bool split(tpl_rt *rt, const tpl_str *s, tpl_val sep, int64_t maxsplit, bool from_right,
                  bool markup, tpl_val *out) {
  tpl_list *l = tpl_list_new(0, TPL_L_LIST);
  if (!l) return false;
  bool ok = tpl_rt_step(rt, s->len / 256);
  if (ok && (!tpl_given(sep) || sep.kind == TPL_NONE)) { /* runs of whitespace */
    size_t n;
    uint32_t *c = cps_of(s, &n);
    size_t *off = malloc((n + 1) * sizeof *off);
    if (!c || !off) {
      free(c);
      free(off);
      tpl_release_obj(&l->h);
      return tpl_errc(PASADA_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0, o = 0; i <= n; i++) {
      off[i] = o;
      if (i < n) tpl_utf8_next(s->s, s->len, &o);
    }
    int64_t splits = 0;
    if (!from_right) {
      size_t i = 0;
      while (ok) {
        while (i < n && tpl_cp_space(c[i])) i++;
        if (i >= n) break;
        if (maxsplit >= 0 && splits >= maxsplit) {
          ok = push_piece(l, s->s + off[i], off[n] - off[i], markup);
          break;
        }
        size_t j = i;
        while (j < n && !tpl_cp_space(c[j])) j++;
        ok = push_piece(l, s->s + off[i], off[j] - off[i], markup);
        splits++;
        i = j;
      }
    } else {
      size_t i = n;
      while (ok) {
        while (i > 0 && tpl_cp_space(c[i - 1])) i--;
        if (i == 0) break;
        if (maxsplit >= 0 && splits >= maxsplit) {
          ok = push_piece(l, s->s, off[i], markup);
          break;
        }
        size_t j = i;
        while (j > 0 && !tpl_cp_space(c[j - 1])) j--;
        ok = push_piece(l, s->s + off[j], off[i] - off[j], markup);
        splits++;
        i = j;
      }
    }
    free(c);
    free(off);
  } else if (ok) {
    if (!want_str(from_right ? "rsplit" : "split", sep))
      ok = false;
    else if (tpl_s(sep)->len == 0)
      ok = tpl_err("empty separator");
    else {
      const tpl_str *p = tpl_s(sep);
      int64_t splits = 0;
      if (!from_right) {
        size_t i = 0;
        for (;;) {
          const char *hit = (maxsplit < 0 || splits < maxsplit)
                                ? tpl_memmem(s->s + i, s->len - i, p->s, p->len)
                                : NULL;
          if (!hit) {
            ok = push_piece(l, s->s + i, s->len - i, markup);
            break;
          }
          if (!(ok = push_piece(l, s->s + i, (size_t)(hit - (s->s + i)), markup))) break;
          i = (size_t)(hit - s->s) + p->len;
          splits++;
        }
      } else {
        size_t end = s->len;
        for (;;) {
          const char *hit = NULL;
          if ((maxsplit < 0 || splits < maxsplit) && end >= p->len)
            for (size_t k = end - p->len + 1; k-- > 0;)
              if (!memcmp(s->s + k, p->s, p->len)) {
                hit = s->s + k;
                break;
              }
          if (!hit) {
            ok = push_piece(l, s->s, end, markup);
            break;
          }
          const size_t at = (size_t)(hit - s->s);
          if (!(ok = push_piece(l, s->s + at + p->len, end - at - p->len, markup))) break;
          end = at;
          splits++;
        }
      }
    }
    if (ok && from_right) { /* pieces were found right to left */
      for (size_t i = 0, j = l->n ? l->n - 1 : 0; i < j; i++, j--) {
        const tpl_val t = l->v[i];
        l->v[i] = l->v[j];
        l->v[j] = t;
      }
    }
  }
  if (ok && from_right && (!tpl_given(sep) || sep.kind == TPL_NONE))
    for (size_t i = 0, j = l->n ? l->n - 1 : 0; i < j; i++, j--) {
      const tpl_val t = l->v[i];
      l->v[i] = l->v[j];
      l->v[j] = t;
    }
  if (!ok) {
    tpl_release_obj(&l->h);
    return false;
  }
  *out = tpl_obj_val(l);
  return true;
}

static bool is_line_break(uint32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
         c == 0x85 || c == 0x2028 || c == 0x2029;
}

static bool splitlines(const tpl_str *s, bool keepends, bool markup, tpl_val *out) {
  tpl_list *l = tpl_list_new(0, TPL_L_LIST);
  if (!l) return false;
  size_t start = 0, i = 0;
  bool ok = true;
  while (ok && i < s->len) {
    size_t j = i;
    const uint32_t c = tpl_utf8_next(s->s, s->len, &j);
    if (!is_line_break(c)) {
      i = j;
      continue;
    }
    if (c == '\r' && j < s->len && s->s[j] == '\n') j++;
    ok = push_piece(l, s->s + start, (keepends ? j : i) - start, markup);
    start = i = j;
  }
  if (ok && start < s->len) ok = push_piece(l, s->s + start, s->len - start, markup);
  if (!ok) {
    tpl_release_obj(&l->h);
    return false;
  }
  *out = tpl_obj_val(l);
  return true;
}

/* Maps every code point (upper, lower, swapcase, casefold, title, capitalize). */
static bool recase(const tpl_str *s, int id, bool markup, tpl_val *out) {
  tpl_buf b = {0};
  bool ok = true, prev_cased = false, first = true;
  for (size_t i = 0; ok && i < s->len;) {
    const uint32_t c = tpl_utf8_next(s->s, s->len, &i);
    uint32_t r = c;
    switch (id) {
      case S_UPPER:
        if (c == 0xDF) {
          ok = tpl_buf_put(&b, "SS", 2);
          continue;
        }
        r = tpl_cp_upper(c);
        break;
      case S_LOWER:
      case S_CASEFOLD:
        if (id == S_CASEFOLD && c == 0xDF) {
          ok = tpl_buf_put(&b, "ss", 2);
          continue;
        }
        r = tpl_cp_lower(c);
        break;
      case S_SWAPCASE:
        r = tpl_cp_is_upper(c) ? tpl_cp_lower(c) : tpl_cp_upper(c);
        break;
      case S_TITLE:
        r = prev_cased ? tpl_cp_lower(c) : tpl_cp_upper(c);
        prev_cased = tpl_cp_cased(c);
        break;
      case S_CAPITALIZE:
        r = first ? tpl_cp_upper(c) : tpl_cp_lower(c);
        break;
      default:
        break;
    }
    first = false;
    ok = tpl_buf_cp(&b, r);
  }
  if (!ok) {
    tpl_buf_free(&b);
    return false;
  }
  return tpl_buf_take(&b, markup, out);
}

/* The byte range of s[start:end] (code point indices, slice semantics). */
static void sub_range(const tpl_str *s, tpl_val start, tpl_val end, size_t *from, size_t *to) {
  const int64_t n = (int64_t)s->ncp;
  int64_t a = 0, e = n;
  if (tpl_given(start) && (start.kind == TPL_INT || start.kind == TPL_BOOL))
    a = start.kind == TPL_INT ? start.i : start.b;
  if (tpl_given(end) && (end.kind == TPL_INT || end.kind == TPL_BOOL))
    e = end.kind == TPL_INT ? end.i : end.b;
  if (a < 0) a = a + n < 0 ? 0 : a + n;
  if (e < 0) e = e + n < 0 ? 0 : e + n;
  if (a > n) a = n;
  if (e > n) e = n;
  if (e < a) e = a;
  *from = tpl_utf8_offset(s, (size_t)a);
  *to = tpl_utf8_offset(s, (size_t)e);
}

static bool affix(const tpl_str *s, tpl_val arg, tpl_val start, tpl_val end, bool suffix,
                  bool *out) {
  size_t from, to;
  sub_range(s, start, end, &from, &to);
  const tpl_val *opts = &arg;
  size_t n = 1;
  if (arg.kind == TPL_LIST && tpl_l(arg)->h.sub == TPL_L_TUPLE) {
    opts = tpl_l(arg)->v;
    n = tpl_l(arg)->n;
  }
  *out = false;
  for (size_t i = 0; i < n; i++) {
    if (opts[i].kind != TPL_STR)
      return tpl_err("%s first arg must be str or a tuple of str, not %s",
                     suffix ? "endswith" : "startswith", tpl_type_name(opts[i]));
    const tpl_str *p = tpl_s(opts[i]);
    if (p->len > to - from) continue;
    if (!memcmp(suffix ? s->s + to - p->len : s->s + from, p->s, p->len)) *out = true;
  }
  return true;
}

/* find / rfind / index / rindex / count */
static bool search(const tpl_str *s, int id, tpl_val sub, tpl_val start, tpl_val end,
                   tpl_val *out) {
  if (!want_str(NAMES[id], sub)) return false;
  const tpl_str *p = tpl_s(sub);
  size_t from, to;
  sub_range(s, start, end, &from, &to);
  if (tpl_given(start) && (start.kind == TPL_INT) && start.i > (int64_t)s->ncp) {
    *out = tpl_int(id == S_COUNT ? 0 : -1);
    if (id == S_INDEX || id == S_RINDEX) return tpl_err("substring not found");
    return true;
  }
  if (id == S_COUNT) {
    int64_t c = 0;
    if (p->len == 0)
      c = (int64_t)tpl_utf8_count(s->s + from, to - from) + 1;
    else
      for (size_t i = from; i + p->len <= to;) {
        const char *hit = tpl_memmem(s->s + i, to - i, p->s, p->len);
        if (!hit) break;
        c++;
        i = (size_t)(hit - s->s) + p->len;
      }
    *out = tpl_int(c);
    return true;
  }
  long at = -1;
  if (id == S_FIND || id == S_INDEX) {
    const char *hit = p->len <= to - from ? tpl_memmem(s->s + from, to - from, p->s, p->len) : NULL;
    if (p->len == 0) hit = s->s + from;
    if (hit) at = (long)(hit - s->s);
  } else if (p->len <= to - from) {
    for (size_t k = to - p->len + 1; k-- > from;)
      if (!memcmp(s->s + k, p->s, p->len)) {
        at = (long)k;
        break;
      }
  }
  if (at < 0) {
    if (id == S_INDEX || id == S_RINDEX) return tpl_err("substring not found");
    *out = tpl_int(-1);
    return true;
  }
  *out = tpl_int((int64_t)tpl_utf8_count(s->s, (size_t)at));
  return true;
}

static bool replace(tpl_rt *rt, const tpl_str *s, tpl_val oldv, tpl_val newv, tpl_val countv,
                    bool markup, tpl_val *out) {
  if (!want_str("replace", oldv) || !want_str("replace", newv)) return false;
  int64_t count = -1;
  if (tpl_given(countv) && !want_int("replace", countv, &count)) return false;
  const tpl_str *o = tpl_s(oldv);
  tpl_buf esc = {0};
  const char *ns = tpl_s(newv)->s;
  size_t nl = tpl_s(newv)->len;
  if (markup && !tpl_is_markup(newv)) { /* Markup.replace escapes the new text */
    if (!tpl_escape(&esc, ns, nl)) {
      tpl_buf_free(&esc);
      return false;
    }
    ns = esc.s ? esc.s : "";
    nl = esc.n;
  }
  tpl_buf b = {0};
  bool ok = tpl_rt_step(rt, s->len / 256);
  int64_t done = 0;
  if (ok && o->len == 0) { /* "" matches before every character and at the end */
    for (size_t i = 0; ok && i <= s->len;) {
      if (count < 0 || done < count) {
        ok = tpl_buf_put(&b, ns, nl);
        done++;
      }
      if (i == s->len) break;
      const size_t st = i;
      tpl_utf8_next(s->s, s->len, &i);
      ok = ok && tpl_buf_put(&b, s->s + st, i - st);
    }
  } else if (ok) {
    size_t i = 0;
    while (ok) {
      const char *hit =
          (count < 0 || done < count) ? tpl_memmem(s->s + i, s->len - i, o->s, o->len) : NULL;
      if (!hit) {
        ok = tpl_buf_put(&b, s->s + i, s->len - i);
        break;
      }
      ok = tpl_buf_put(&b, s->s + i, (size_t)(hit - (s->s + i))) && tpl_buf_put(&b, ns, nl);
      i = (size_t)(hit - s->s) + o->len;
      done++;
    }
  }
  tpl_buf_free(&esc);
  if (!ok) {
    tpl_buf_free(&b);
    return false;
  }
  return tpl_buf_take(&b, markup, out);
}

static bool join(tpl_rt *rt, const tpl_str *s, tpl_val items_v, bool markup, tpl_val *out) {
  tpl_list *items;
  if (!tpl_iterate(items_v, &items)) return false;
  tpl_buf b = {0};
  bool ok = tpl_rt_step(rt, items->n / 64);
  for (size_t i = 0; ok && i < items->n; i++) {
    const tpl_val x = items->v[i];
    if (x.kind != TPL_STR) {
      ok = tpl_err("sequence item %zu: expected str instance, %s found", i, tpl_type_name(x));
      break;
    }
    if (i) ok = tpl_buf_put(&b, s->s, s->len);
    if (markup && !tpl_is_markup(x))
      ok = ok && tpl_escape(&b, tpl_s(x)->s, tpl_s(x)->len);
    else
      ok = ok && tpl_buf_put(&b, tpl_s(x)->s, tpl_s(x)->len);
  }
  tpl_release_obj(&items->h);
  if (!ok) {
    tpl_buf_free(&b);
    return false;
  }
  return tpl_buf_take(&b, markup, out);
}

/* center / ljust / rjust / zfill */
static bool pad(const tpl_str *s, int id, tpl_val widthv, tpl_val fillv, bool markup,
                tpl_val *out) {
  int64_t width = 0;
  if (!want_int(NAMES[id], widthv, &width)) return false;
  const char *fill = " ";
  size_t fl = 1;
  if (tpl_given(fillv)) {
    if (!want_str(NAMES[id], fillv)) return false;
    if (tpl_s(fillv)->ncp != 1)
      return tpl_err("The fill character must be exactly one character long");
    fill = tpl_s(fillv)->s;
    fl = tpl_s(fillv)->len;
  }
  const int64_t n = (int64_t)s->ncp;
  if (width <= n) return new_str(s->s, s->len, markup, out);
  if ((uint64_t)width > tpl_heap_cur->max_str / 4)
    return tpl_err("a string would exceed %zu bytes", tpl_heap_cur->max_str);
  const int64_t total = width - n;
  int64_t left = 0;
  if (id == S_RJUST || id == S_ZFILL)
    left = total;
  else if (id == S_CENTER)
    left = total / 2 + (total & width & 1);
  const int64_t right = total - left;
  tpl_buf b = {0};
  bool ok = true;
  size_t body = 0;
  if (id == S_ZFILL) {
    fill = "0";
    fl = 1;
    if (s->len && (s->s[0] == '+' || s->s[0] == '-')) {
      ok = tpl_buf_put(&b, s->s, 1);
      body = 1;
    }
  }
  for (int64_t i = 0; ok && i < left; i++) ok = tpl_buf_put(&b, fill, fl);
  ok = ok && tpl_buf_put(&b, s->s + body, s->len - body);
  for (int64_t i = 0; ok && i < right; i++) ok = tpl_buf_put(&b, fill, fl);
  if (!ok) {
    tpl_buf_free(&b);
    return false;
  }
  return tpl_buf_take(&b, markup, out);
}

static bool partition(const tpl_str *s, tpl_val sepv, bool right, bool markup, tpl_val *out) {
  if (!want_str(right ? "rpartition" : "partition", sepv)) return false;
  const tpl_str *p = tpl_s(sepv);
  if (!p->len) return tpl_err("empty separator");
  long at = -1;
  if (!right) {
    const char *hit = tpl_memmem(s->s, s->len, p->s, p->len);
    if (hit) at = (long)(hit - s->s);
  } else if (p->len <= s->len) {
    for (size_t k = s->len - p->len + 1; k-- > 0;)
      if (!memcmp(s->s + k, p->s, p->len)) {
        at = (long)k;
        break;
      }
  }
  tpl_list *t = tpl_list_new(3, TPL_L_TUPLE);
  if (!t) return false;
  bool ok;
  if (at < 0) {
    ok = right ? push_piece(t, "", 0, markup) && push_piece(t, "", 0, markup) &&
                     push_piece(t, s->s, s->len, markup)
               : push_piece(t, s->s, s->len, markup) && push_piece(t, "", 0, markup) &&
                     push_piece(t, "", 0, markup);
  } else {
    ok = push_piece(t, s->s, (size_t)at, markup) && push_piece(t, p->s, p->len, markup) &&
         push_piece(t, s->s + at + p->len, s->len - (size_t)at - p->len, markup);
  }
  if (!ok) {
    tpl_release_obj(&t->h);
    return false;
  }
  *out = tpl_obj_val(t);
  return true;
}

static bool predicate(const tpl_str *s, int id) {
  if (id == S_ISASCII) return s->ncp == s->len;
  if (id == S_ISPRINTABLE) {
    for (size_t i = 0; i < s->len;)
      if (!tpl_cp_printable(tpl_utf8_next(s->s, s->len, &i))) return false;
    return true;
  }
  if (!s->len) return false;
  bool any_cased = false, prev_cased = false;
  size_t k = 0;
  for (size_t i = 0; i < s->len; k++) {
    const uint32_t c = tpl_utf8_next(s->s, s->len, &i);
    switch (id) {
      case S_ISALNUM:
        if (!tpl_cp_alpha(c) && !tpl_cp_digit(c)) return false;
        break;
      case S_ISALPHA:
        if (!tpl_cp_alpha(c)) return false;
        break;
      case S_ISDECIMAL:
      case S_ISDIGIT:
      case S_ISNUMERIC:
        if (!tpl_cp_digit(c)) return false;
        break;
      case S_ISSPACE:
        if (!tpl_cp_space(c)) return false;
        break;
      case S_ISIDENTIFIER:
        if (!(c == '_' || tpl_cp_alpha(c) || (k > 0 && tpl_cp_digit(c)))) return false;
        break;
      case S_ISLOWER:
        if (tpl_cp_is_upper(c)) return false;
        any_cased |= tpl_cp_is_lower(c);
        break;
      case S_ISUPPER:
        if (tpl_cp_is_lower(c) && !tpl_cp_is_upper(c)) return false;
        any_cased |= tpl_cp_is_upper(c);
        break;
      case S_ISTITLE:
        if (tpl_cp_is_upper(c)) {
          if (prev_cased) return false;
          prev_cased = any_cased = true;
        } else if (tpl_cp_is_lower(c)) {
          if (!prev_cased) return false;
          prev_cased = any_cased = true;
        } else {
          prev_cased = false;
        }
        break;
      default:
        return false;
    }
  }
  if (id == S_ISLOWER || id == S_ISUPPER || id == S_ISTITLE) return any_cased;
  return true;
}

static bool expandtabs(const tpl_str *s, tpl_val sizev, bool markup, tpl_val *out) {
  int64_t size = 8;
  if (tpl_given(sizev) && !want_int("expandtabs", sizev, &size)) return false;
  tpl_buf b = {0};
  bool ok = true;
  int64_t col = 0;
  for (size_t i = 0; ok && i < s->len;) {
    const size_t st = i;
    const uint32_t c = tpl_utf8_next(s->s, s->len, &i);
    if (c == '\t') {
      if (size > 0) {
        const int64_t n = size - col % size;
        for (int64_t k = 0; ok && k < n; k++) ok = tpl_buf_put(&b, " ", 1);
        col += n;
      }
    } else {
      ok = tpl_buf_put(&b, s->s + st, i - st);
      col = (c == '\n' || c == '\r') ? 0 : col + 1;
    }
  }
  if (!ok) {
    tpl_buf_free(&b);
    return false;
  }
  return tpl_buf_take(&b, markup, out);
}

bool tpl_str_method(tpl_rt *rt, tpl_val self, int id, const tpl_args *a, tpl_val *out) {
  const tpl_str *s = tpl_s(self);
  const bool mk = tpl_is_markup(self);
  tpl_val p[3];
  const char *fn = NAMES[id];
  if (id != S_FORMAT && id != S_FORMAT_MAP && a->n_kw && id != S_SPLIT && id != S_RSPLIT &&
      id != S_SPLITLINES && id != S_EXPANDTABS)
    return tpl_err("%s() takes no keyword arguments", fn);
  switch (id) {
    case S_STRIP:
    case S_LSTRIP:
    case S_RSTRIP: {
      static const char *const n[] = {"chars"};
      if (!tpl_bind(fn, a, n, 1, 0, p)) return false;
      return strip(s, p[0], id != S_RSTRIP, id != S_LSTRIP, mk, out);
    }
    case S_SPLIT:
    case S_RSPLIT: {
      static const char *const n[] = {"sep", "maxsplit"};
      if (!tpl_bind(fn, a, n, 2, 0, p)) return false;
      int64_t maxsplit = -1;
      if (tpl_given(p[1]) && !want_int(fn, p[1], &maxsplit)) return false;
      return split(rt, s, p[0], maxsplit, id == S_RSPLIT, mk, out);
    }
    case S_SPLITLINES: {
      static const char *const n[] = {"keepends"};
      if (!tpl_bind(fn, a, n, 1, 0, p)) return false;
      return splitlines(s, tpl_given(p[0]) && tpl_truthy(p[0]), mk, out);
    }
    case S_STARTSWITH:
    case S_ENDSWITH: {
      static const char *const n[] = {"prefix", "start", "end"};
      bool r;
      if (!tpl_bind(fn, a, n, 3, 1, p) || !affix(s, p[0], p[1], p[2], id == S_ENDSWITH, &r))
        return false;
      *out = tpl_bool(r);
      return true;
    }
    case S_FIND:
    case S_RFIND:
    case S_INDEX:
    case S_RINDEX:
    case S_COUNT: {
      static const char *const n[] = {"sub", "start", "end"};
      return tpl_bind(fn, a, n, 3, 1, p) && search(s, id, p[0], p[1], p[2], out);
    }
    case S_REPLACE: {
      static const char *const n[] = {"old", "new", "count"};
      return tpl_bind(fn, a, n, 3, 2, p) && replace(rt, s, p[0], p[1], p[2], mk, out);
    }
    case S_UPPER:
    case S_LOWER:
    case S_CASEFOLD:
    case S_SWAPCASE:
    case S_TITLE:
    case S_CAPITALIZE:
      if (a->n_pos) return tpl_err("%s() takes no arguments", fn);
      return tpl_rt_step(rt, s->len / 256) && recase(s, id, mk, out);
    case S_JOIN: {
      static const char *const n[] = {"iterable"};
      return tpl_bind(fn, a, n, 1, 1, p) && join(rt, s, p[0], mk, out);
    }
    case S_CENTER:
    case S_LJUST:
    case S_RJUST:
    case S_ZFILL: {
      static const char *const n[] = {"width", "fillchar"};
      if (!tpl_bind(fn, a, n, id == S_ZFILL ? 1 : 2, 1, p)) return false;
      return pad(s, id, p[0], id == S_ZFILL ? (tpl_val){.kind = TPL_UNDEF, .sub = 0xff} : p[1], mk,
                 out);
    }
    case S_PARTITION:
    case S_RPARTITION: {
      static const char *const n[] = {"sep"};
      return tpl_bind(fn, a, n, 1, 1, p) && partition(s, p[0], id == S_RPARTITION, mk, out);
    }
    case S_REMOVEPREFIX:
    case S_REMOVESUFFIX: {
      static const char *const n[] = {"affix"};
      if (!tpl_bind(fn, a, n, 1, 1, p) || !want_str(fn, p[0])) return false;
      const tpl_str *x = tpl_s(p[0]);
      if (x->len <= s->len &&
          !memcmp(id == S_REMOVEPREFIX ? s->s : s->s + s->len - x->len, x->s, x->len))
        return new_str(id == S_REMOVEPREFIX ? s->s + x->len : s->s, s->len - x->len, mk, out);
      return new_str(s->s, s->len, mk, out);
    }
    case S_EXPANDTABS: {
      static const char *const n[] = {"tabsize"};
      return tpl_bind(fn, a, n, 1, 0, p) && expandtabs(s, p[0], mk, out);
    }
    case S_FORMAT:
      return tpl_str_format(rt, self, a, out);
    case S_FORMAT_MAP: {
      if (a->n_pos != 1 || a->n_kw) return tpl_err("format_map() takes exactly one argument");
      if (a->pos[0].kind != TPL_DICT) return tpl_err("format_map() needs a mapping");
      const tpl_dict *d = tpl_d(a->pos[0]);
      tpl_args kw = {0};
      kw.kw_names = malloc((d->n + 1) * sizeof(char *));
      kw.kw = malloc((d->n + 1) * sizeof(tpl_val));
      bool ok = kw.kw_names && kw.kw;
      for (size_t i = 0; ok && i < d->n; i++)
        if (d->k[i].kind == TPL_STR) {
          kw.kw_names[kw.n_kw] = tpl_s(d->k[i])->s;
          kw.kw[kw.n_kw++] = d->v[i];
        }
      if (!ok) pa_error(PASADA_ERR_NOMEM, "out of memory");
      ok = ok && tpl_str_format(rt, self, &kw, out);
      free((void *)kw.kw_names);
      free(kw.kw);
      return ok;
    }
    case S_ENCODE:
    case S_TRANSLATE:
    case S_MAKETRANS:
      return tpl_err("str.%s() is not supported in templates", fn);
    default:
      if (a->n_pos) return tpl_err("%s() takes no arguments", fn);
      *out = tpl_bool(predicate(s, id));
      return true;
  }
}
