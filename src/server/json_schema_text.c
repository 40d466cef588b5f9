/* json_schema_text.c: the lexical parts of JSON Schema -> GBNF: GBNF
 * literals, string patterns (an ECMA-262 regex subset, spelled as JSON
 * string content: a character the value holds becomes its JSON spelling,
 * escapes included), string formats, and integer and number ranges as
 * exact digit patterns. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/json_schema_int.h"

void js_literal(srv_buf *b, const char *s, size_t n) {
  js_put(b, "\"");
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)s[i];
    char tmp[8];
    if (ch == '"' || ch == '\\')
      tmp[0] = '\\', tmp[1] = (char)ch, tmp[2] = 0;
    else if (ch == '\n')
      strcpy(tmp, "\\n");
    else if (ch == '\r')
      strcpy(tmp, "\\r");
    else if (ch == '\t')
      strcpy(tmp, "\\t");
    else if (ch < 0x20 || ch == 0x7F)
      snprintf(tmp, sizeof tmp, "\\x%02X", ch);
    else
      tmp[0] = (char)ch, tmp[1] = 0;
    js_put(b, tmp);
  }
  js_put(b, "\"");
}

/* ---- code point sets ---- */

typedef struct {
  uint32_t *r; /* [lo, hi] pairs */
  int n, cap;
} cpset;

static bool cp_add(cpset *s, uint32_t lo, uint32_t hi) {
  if (s->n == s->cap) {
    int cap = s->cap ? s->cap * 2 : 8;
    uint32_t *r = realloc(s->r, (size_t)cap * 2 * sizeof *r);
    if (!r) return false;
    s->r = r;
    s->cap = cap;
  }
  s->r[2 * s->n] = lo;
  s->r[2 * s->n + 1] = hi;
  s->n++;
  return true;
}

static int cmp_pair(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

/* Sorted, merged. */
static void cp_norm(cpset *s) {
  if (!s->n) return;
  qsort(s->r, (size_t)s->n, 2 * sizeof *s->r, cmp_pair);
  int m = 0;
  for (int i = 0; i < s->n; i++) {
    if (m && s->r[2 * i] <= s->r[2 * m - 1] + 1) {
      if (s->r[2 * i + 1] > s->r[2 * m - 1]) s->r[2 * m - 1] = s->r[2 * i + 1];
    } else {
      s->r[2 * m] = s->r[2 * i], s->r[2 * m + 1] = s->r[2 * i + 1], m++;
    }
  }
  s->n = m;
}

static bool cp_complement(cpset *s) {
  cp_norm(s);
  cpset o = {0};
  uint32_t next = 0;
  bool ok = true;
  for (int i = 0; i < s->n && ok; i++) {
    if (s->r[2 * i] > next) ok = cp_add(&o, next, s->r[2 * i] - 1);
    next = s->r[2 * i + 1] + 1;
  }
  if (ok && next <= 0x10FFFF) ok = cp_add(&o, next, 0x10FFFF);
  free(s->r);
  *s = o;
  return ok;
}

static bool cp_has(const cpset *s, uint32_t c) {
  for (int i = 0; i < s->n; i++)
    if (c >= s->r[2 * i] && c <= s->r[2 * i + 1]) return true;
  return false;
}

/* The JSON spelling of one character of a string value, as GBNF. */
static void json_char(srv_buf *b, uint32_t c) {
  char tmp[16];
  if (c == '"')
    js_put(b, "\"\\\\\\\"\"");
  else if (c == '\\')
    js_put(b, "\"\\\\\\\\\"");
  else if (c < 0x20) {
    static const char *const short_form[0x20] = {
        [8] = "b", [9] = "t", [10] = "n", [12] = "f", [13] = "r"};
    snprintf(tmp, sizeof tmp, "u%04X", c);
    js_put(b, "\"\\\\");
    js_put(b, short_form[c] ? short_form[c] : tmp);
    js_put(b, "\"");
  } else {
    snprintf(tmp, sizeof tmp, "[\\U%08X]", c);
    js_put(b, tmp);
  }
}

/* One character of the set, as its JSON spelling: plain characters in one
 * class, then the quote, the backslash and control characters escaped. */
static bool emit_set(js_ctx *c, cpset *s, srv_buf *b) {
  cp_norm(s);
  srv_buf cls = {0};
  int alts = 0;
  for (int i = 0; i < s->n; i++) {
    uint32_t lo = s->r[2 * i], hi = s->r[2 * i + 1];
    /* plain: >= 0x20, not " or \, no surrogates */
    uint32_t cuts[][2] = {{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0xD7FF}, {0xE000, 0x10FFFF}};
    for (size_t k = 0; k < 4; k++) {
      uint32_t a = lo > cuts[k][0] ? lo : cuts[k][0], z = hi < cuts[k][1] ? hi : cuts[k][1];
      if (a <= z) srv_buf_printf(&cls, "\\U%08X-\\U%08X", a, z);
    }
  }
  js_put(b, "(");
  if (cls.n) {
    srv_buf_printf(b, "[%s]", cls.p);
    alts++;
  }
  srv_buf_free(&cls);
  bool all_ctl = true;
  for (uint32_t ch = 0; ch < 0x20; ch++) all_ctl &= cp_has(s, ch);
  for (uint32_t ch = 0; ch < 0x20; ch++) {
    if (!cp_has(s, ch)) continue;
    if (all_ctl && ch != '\b' && ch != '\t' && ch != '\n' && ch != '\f' && ch != '\r') continue;
    js_put(b, alts++ ? " | " : "");
    json_char(b, ch);
  }
  if (all_ctl)
    js_put(b, alts++ ? " | \"\\\\u00\" [01] [0-9a-fA-F]" : "\"\\\\u00\" [01] [0-9a-fA-F]");
  if (cp_has(s, '"')) js_put(b, alts++ ? " | " : ""), json_char(b, '"');
  if (cp_has(s, '\\')) js_put(b, alts++ ? " | " : ""), json_char(b, '\\');
  js_put(b, ")");
  if (!alts) return js_fail(c, "pattern: a character class matches no character");
  return true;
}

/* ---- patterns ---- */

typedef struct {
  js_ctx *c;
  const char *s;
  size_t pos, len;
  int depth;
} rx;

static bool rx_fail(rx *r, const char *what) {
  return js_fail(r->c, "pattern '%.120s': %s at offset %zu", r->s, what, r->pos);
}

static bool rx_alt(rx *r, srv_buf *b);

static int hexval(int ch) {
  return ch >= '0' && ch <= '9'   ? ch - '0'
         : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
         : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                  : -1;
}

/* A UTF-8 character of the pattern. */
static uint32_t rx_utf8(rx *r) {
  const unsigned char *u = (const unsigned char *)r->s + r->pos;
  uint32_t c = u[0];
  size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  if (r->pos + n > r->len) n = r->len - r->pos;
  if (n > 1) c &= 0x3Fu >> (n - 1);
  for (size_t i = 1; i < n; i++) c = c << 6 | (u[i] & 0x3F);
  r->pos += n;
  return c;
}

static bool add_class_escape(cpset *s, int e) {
  static const uint32_t space[] = {0x09,   0x0D,   0x20,   0x20,   0xA0,   0xA0,   0x1680,
                                   0x1680, 0x2000, 0x200A, 0x2028, 0x2029, 0x202F, 0x202F,
                                   0x205F, 0x205F, 0x3000, 0x3000, 0xFEFF, 0xFEFF};
  cpset t = {0};
  bool ok = true;
  int lower = e | 0x20;
  if (lower == 'd')
    ok = cp_add(&t, '0', '9');
  else if (lower == 'w')
    ok = cp_add(&t, '0', '9') && cp_add(&t, 'A', 'Z') && cp_add(&t, 'a', 'z') &&
         cp_add(&t, '_', '_');
  else
    for (size_t i = 0; i < sizeof space / sizeof space[0] && ok; i += 2)
      ok = cp_add(&t, space[i], space[i + 1]);
  if (ok && e != lower) ok = cp_complement(&t); /* \D \W \S */
  for (int i = 0; i < t.n && ok; i++) ok = cp_add(s, t.r[2 * i], t.r[2 * i + 1]);
  free(t.r);
  return ok;
}

/* An escape after '\' (r->pos past the backslash): a character in *cp, or
 * a class added to s (returns 2). 0 on error. */
static int rx_escape(rx *r, uint32_t *cp, cpset *s) {
  if (r->pos >= r->len) return rx_fail(r, "a '\\' at the end"), 0;
  int e = (unsigned char)r->s[r->pos++];
  switch (e) {
    case 'd':
    case 'D':
    case 'w':
    case 'W':
    case 's':
    case 'S':
      return add_class_escape(s, e) ? 2 : (rx_fail(r, "out of memory"), 0);
    case 'n':
      *cp = '\n';
      return 1;
    case 't':
      *cp = '\t';
      return 1;
    case 'r':
      *cp = '\r';
      return 1;
    case 'f':
      *cp = '\f';
      return 1;
    case 'v':
      *cp = '\v';
      return 1;
    case '0':
      *cp = 0;
      return 1;
    case 'x':
    case 'u': {
      int digits = e == 'x' ? 2 : 4;
      uint32_t v = 0;
      for (int i = 0; i < digits; i++) {
        int h = r->pos < r->len ? hexval((unsigned char)r->s[r->pos]) : -1;
        if (h < 0) return rx_fail(r, "a bad \\x or \\u escape"), 0;
        v = v << 4 | (uint32_t)h;
        r->pos++;
      }
      if (v >= 0xD800 && v <= 0xDFFF) return rx_fail(r, "a surrogate escape"), 0;
      *cp = v;
      return 1;
    }
    default:
      if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9'))
        return rx_fail(r, "an unsupported escape (word boundaries, back-references, \\p...)"), 0;
      r->pos--;
      *cp = rx_utf8(r); /* an escaped punctuation character stands for itself */
      return 1;
  }
}

static bool rx_class(rx *r, srv_buf *b) {
  size_t start = r->pos++;
  cpset s = {0};
  bool neg = r->pos < r->len && r->s[r->pos] == '^';
  if (neg) r->pos++;
  bool ok = true;
  while (ok) {
    if (r->pos >= r->len) {
      r->pos = start;
      ok = rx_fail(r, "an unterminated class");
      break;
    }
    if (r->s[r->pos] == ']') {
      r->pos++;
      break;
    }
    uint32_t lo, hi;
    int kind = 1;
    if (r->s[r->pos] == '\\') {
      r->pos++;
      kind = rx_escape(r, &lo, &s);
    } else {
      lo = rx_utf8(r);
    }
    if (!kind) {
      ok = false;
      break;
    }
    if (kind == 2) continue;
    hi = lo;
    if (r->pos + 1 < r->len && r->s[r->pos] == '-' && r->s[r->pos + 1] != ']') {
      r->pos++;
      if (r->s[r->pos] == '\\') {
        r->pos++;
        cpset dummy = {0};
        kind = rx_escape(r, &hi, &dummy);
        free(dummy.r);
        if (kind != 1) {
          ok = kind ? rx_fail(r, "a class escape as a range end") : false;
          break;
        }
      } else {
        hi = rx_utf8(r);
      }
      if (hi < lo) {
        ok = rx_fail(r, "a range out of order");
        break;
      }
    }
    ok = cp_add(&s, lo, hi);
  }
  if (ok && neg) ok = cp_complement(&s);
  if (ok) ok = emit_set(r->c, &s, b);
  free(s.r);
  return ok;
}

static bool rx_atom(rx *r, srv_buf *b) {
  char ch = r->s[r->pos];
  if (ch == '(') {
    if (++r->depth > 64) return rx_fail(r, "groups nested too deep");
    r->pos++;
    if (r->pos < r->len && r->s[r->pos] == '?') {
      if (r->pos + 1 < r->len && r->s[r->pos + 1] == ':') {
        r->pos += 2;
      } else if (r->pos + 1 < r->len && r->s[r->pos + 1] == '<' && r->pos + 2 < r->len &&
                 r->s[r->pos + 2] != '=' && r->s[r->pos + 2] != '!') {
        while (r->pos < r->len && r->s[r->pos] != '>') r->pos++; /* a named group */
        r->pos++;
      } else {
        return rx_fail(r, "lookarounds are not supported");
      }
    }
    js_put(b, "(");
    if (!rx_alt(r, b)) return false;
    if (r->pos >= r->len || r->s[r->pos] != ')') return rx_fail(r, "an unclosed group");
    r->pos++;
    js_put(b, ")");
    r->depth--;
    return true;
  }
  if (ch == '[') return rx_class(r, b);
  cpset s = {0};
  uint32_t cp = 0;
  int kind = 1;
  if (ch == '.') {
    r->pos++;
    kind = cp_add(&s, '\n', '\n') && cp_add(&s, '\r', '\r') && cp_add(&s, 0x2028, 0x2029) &&
                   cp_complement(&s)
               ? 2
               : 0;
  } else if (ch == '\\') {
    r->pos++;
    kind = rx_escape(r, &cp, &s);
  } else if (ch == '^' || ch == '$') {
    return rx_fail(
        r, "an anchor inside the pattern (only a leading ^ and a trailing $ are supported)");
  } else if (ch == '*' || ch == '+' || ch == '?' || ch == '{') {
    return rx_fail(r, "a quantifier with nothing to repeat");
  } else {
    cp = rx_utf8(r);
  }
  bool ok = kind != 0;
  if (ok && kind == 2)
    ok = emit_set(r->c, &s, b);
  else if (ok)
    json_char(b, cp);
  free(s.r);
  return ok;
}

/* A quantifier after an atom, if any, appended in GBNF. */
static bool rx_quant(rx *r, srv_buf *b) {
  if (r->pos >= r->len) return true;
  char ch = r->s[r->pos];
  if (ch == '*' || ch == '+' || ch == '?') {
    char q[2] = {ch, 0};
    js_put(b, q);
    r->pos++;
  } else if (ch == '{') {
    size_t at = r->pos;
    long m = -1, n = -1;
    char *end;
    m = strtol(r->s + r->pos + 1, &end, 10);
    if (end == r->s + r->pos + 1) return true; /* a literal '{' in ECMA's annex B: refuse below */
    bool comma = *end == ',';
    if (comma) {
      const char *p = end + 1;
      n = *p == '}' ? -1 : strtol(p, &end, 10);
      if (*p == '}') end = (char *)p;
    } else {
      n = m;
    }
    if (*end != '}' || m < 0 || m > JS_MAX_COUNT || n > JS_MAX_COUNT || (n >= 0 && n < m)) {
      r->pos = at;
      return rx_fail(r, "a bad or too large {m,n}");
    }
    r->pos = (size_t)(end - r->s) + 1;
    if (n < 0)
      srv_buf_printf(b, "{%ld,}", m);
    else
      srv_buf_printf(b, "{%ld,%ld}", m, n);
  } else {
    return true;
  }
  if (r->pos < r->len && r->s[r->pos] == '?') r->pos++; /* lazy: the same language */
  if (r->pos < r->len && strchr("*+?{", r->s[r->pos]))
    return rx_fail(r, "a quantifier after a quantifier");
  return true;
}

static bool rx_seq(rx *r, srv_buf *b) {
  js_put(b, "(\"\"");
  while (r->pos < r->len && r->s[r->pos] != '|' && r->s[r->pos] != ')') {
    js_put(b, " (");
    if (!rx_atom(r, b)) return false;
    js_put(b, ")");
    if (!rx_quant(r, b)) return false;
  }
  js_put(b, ")");
  return true;
}

static bool rx_alt(rx *r, srv_buf *b) {
  js_put(b, "(");
  if (!rx_seq(r, b)) return false;
  while (r->pos < r->len && r->s[r->pos] == '|') {
    r->pos++;
    js_put(b, " | ");
    if (!rx_seq(r, b)) return false;
  }
  js_put(b, ")");
  return true;
}

bool js_pattern(js_ctx *c, const char *pattern, srv_buf *expr) {
  rx r = {.c = c, .s = pattern, .len = strlen(pattern)};
  bool start = r.len && pattern[0] == '^';
  size_t end = r.len;
  bool anchored_end = false;
  if (end > (size_t)start && pattern[end - 1] == '$') {
    size_t bs = 0; /* an escaped $ is a character */
    for (size_t i = end - 1; i > 0 && pattern[i - 1] == '\\'; i--) bs++;
    if (!(bs & 1)) anchored_end = true, end--;
  }
  r.pos = start;
  r.len = end;
  /* a top-level | with an anchor would bind the anchor to one branch */
  if (start || anchored_end) {
    int depth = 0;
    bool cls = false;
    for (size_t i = r.pos; i < r.len; i++) {
      char ch = pattern[i];
      if (ch == '\\')
        i++;
      else if (cls)
        cls = ch != ']';
      else if (ch == '[')
        cls = true;
      else if (ch == '(')
        depth++;
      else if (ch == ')')
        depth--;
      else if (ch == '|' && !depth)
        return js_fail(c, "pattern '%.120s': anchors with a top-level '|' (write ^(a|b)$)",
                       pattern);
    }
  }
  js_put(expr, "\"\\\"\" ");
  if (!start) js_prim(c, expr, JS_CHAR), js_put(expr, "* ");
  if (!rx_alt(&r, expr)) return false;
  if (r.pos != r.len) return rx_fail(&r, "an unmatched ')'");
  if (!anchored_end) js_put(expr, " "), js_prim(c, expr, JS_CHAR), js_put(expr, "*");
  js_put(expr, " \"\\\"\"");
  return true;
}

bool js_format(js_ctx *c, const char *format, srv_buf *expr) {
  static const char date[] =
      "[0-9]{4} \"-\" ( \"0\" [1-9] | \"1\" [0-2] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"3\" [01] "
      ")";
  static const char time[] =
      "( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" ( [0-5] [0-9] | \"60\" ) ( \".\" "
      "[0-9]{1,9} )? "
      "( [Zz] | [+-] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )";
  js_put(expr, "\"\\\"\" ");
  if (!strcmp(format, "date")) {
    js_put(expr, date);
  } else if (!strcmp(format, "time")) {
    js_put(expr, time);
  } else if (!strcmp(format, "date-time")) {
    srv_buf_printf(expr, "%s [Tt] %s", date, time);
  } else if (!strcmp(format, "uuid")) {
    js_put(expr,
           "[0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" "
           "[0-9a-fA-F]{12}");
  } else if (!strcmp(format, "email")) {
    js_put(expr,
           "[A-Za-z0-9._%+-]{1,64} \"@\" [A-Za-z0-9] [A-Za-z0-9-]{0,62} ( \".\" [A-Za-z0-9] "
           "[A-Za-z0-9-]{0,62} ){1,8}");
  } else {
    return js_fail(c, "format '%.64s' is not supported (date, time, date-time, uuid, email are)",
                   format);
  }
  js_put(expr, " \"\\\"\"");
  return true;
}

/* ---- number ranges ---- */

#define JS_MAXV 9999999999999999LL /* JS_MAX_DIGITS nines */

/* Decimal strings of exactly the same length, x <= y, without sign. */
static void fixed_range(srv_buf *b, const char *x, const char *y) {
  size_t n = strlen(x);
  if (!n) return;
  if (!strcmp(x, y)) {
    js_literal(b, x, n);
    return;
  }
  if (x[0] == y[0]) {
    js_literal(b, x, 1);
    js_put(b, " ");
    fixed_range(b, x + 1, y + 1);
    return;
  }
  bool x_zeros = strspn(x + 1, "0") == n - 1, y_nines = strspn(y + 1, "9") == n - 1;
  int lo = x[0] - '0' + (x_zeros ? 0 : 1), hi = y[0] - '0' - (y_nines ? 0 : 1);
  char nines[32], zeros[32];
  memset(nines, '9', n - 1), nines[n - 1] = 0;
  memset(zeros, '0', n - 1), zeros[n - 1] = 0;
  int alts = 0;
  js_put(b, "(");
  if (!x_zeros) {
    js_literal(b, x, 1);
    js_put(b, " ");
    fixed_range(b, x + 1, nines);
    alts++;
  }
  if (lo <= hi) {
    srv_buf_printf(b, "%s[%d-%d]", alts++ ? " | " : "", lo, hi);
    if (n > 1) srv_buf_printf(b, " [0-9]{%zu}", n - 1);
  }
  if (!y_nines) {
    js_put(b, alts++ ? " | " : "");
    js_literal(b, y, 1);
    js_put(b, " ");
    fixed_range(b, zeros, y + 1);
  }
  js_put(b, ")");
}

/* Non-negative integers in [a, b], without leading zeros. */
static void uint_range(srv_buf *b, int64_t a, int64_t z) {
  js_put(b, "(");
  int alts = 0;
  int64_t p = 1;
  for (int len = 1; len <= JS_MAX_DIGITS; len++, p *= 10) {
    int64_t lo = len == 1 ? 0 : p, hi = p * 10 - 1;
    if (lo < a) lo = a;
    if (hi > z) hi = z;
    if (lo > hi) continue;
    char x[32], y[32];
    snprintf(x, sizeof x, "%lld", (long long)lo);
    snprintf(y, sizeof y, "%lld", (long long)hi);
    js_put(b, alts++ ? " | " : "");
    fixed_range(b, x, y);
  }
  js_put(b, ")");
}

bool js_integer_range(js_ctx *c, bool has_lo, int64_t lo, bool has_hi, int64_t hi, srv_buf *expr) {
  int64_t a = has_lo && lo > -JS_MAXV ? lo : -JS_MAXV, z = has_hi && hi < JS_MAXV ? hi : JS_MAXV;
  if (a > z)
    return js_fail(c, "the integer range holds no integer of at most %d digits", JS_MAX_DIGITS);
  js_put(expr, "(");
  int alts = 0;
  if (z >= 0) uint_range(expr, a > 0 ? a : 0, z), alts++;
  if (a < 0) {
    js_put(expr, alts++ ? " | \"-\" " : "\"-\" ");
    uint_range(expr, z < -1 ? -z : 1, -a);
  }
  js_put(expr, ")");
  return true;
}

/* Non-negative decimals x with a <(=) x <(=) z (z absent: any), integer
 * bounds; false when none. */
static bool nonneg_range(srv_buf *b, int64_t a, bool a_open, bool has_z, int64_t z, bool z_open) {
  static const char any_frac[] = " ( \".\" [0-9]{1,16} )?";
  static const char zero_frac[] = " ( \".\" \"0\"{1,16} )?";
  static const char nonzero_frac[] = " \".\" \"0\"{0,15} [1-9] [0-9]{0,15}";
  int64_t any_lo = a_open ? a + 1 : a, any_hi = has_z ? z - 1 : JS_MAXV;
  int alts = 0;
  js_put(b, "(");
  if (any_lo <= any_hi) {
    uint_range(b, any_lo, any_hi);
    js_put(b, any_frac);
    alts++;
  }
  if (a_open && (!has_z || z > a)) { /* a itself, and a fraction above it */
    char t[32];
    snprintf(t, sizeof t, "%lld", (long long)a);
    js_put(b, alts++ ? " | " : "");
    js_literal(b, t, strlen(t));
    js_put(b, nonzero_frac);
  }
  if (has_z && !z_open && z >= any_lo && (z > a || !a_open)) { /* z with a zero fraction */
    char t[32];
    snprintf(t, sizeof t, "%lld", (long long)z);
    js_put(b, alts++ ? " | " : "");
    js_literal(b, t, strlen(t));
    js_put(b, zero_frac);
  }
  js_put(b, ")");
  return alts > 0;
}

bool js_number_range(js_ctx *c, bool has_lo, int64_t lo, bool lo_open, bool has_hi, int64_t hi,
                     bool hi_open, srv_buf *expr) {
  if (has_lo && has_hi && (lo > hi || (lo == hi && (lo_open || hi_open))))
    return js_fail(c, "the number range is empty");
  srv_buf pos = {0}, neg = {0};
  bool any_pos = false, any_neg = false;
  /* x >= 0 */
  if (!has_hi || hi > 0 || (hi == 0 && !hi_open)) {
    bool a_open = has_lo && lo >= 0 && lo_open;
    any_pos = nonneg_range(&pos, has_lo && lo > 0 ? lo : 0, a_open, has_hi, hi, hi_open);
  }
  /* x < 0: |x| in (max(-hi, 0), -lo) with the openness swapped */
  if (!has_lo || lo < 0) {
    int64_t a = has_hi && hi < 0 ? -hi : 0;
    bool a_open = has_hi && hi < 0 ? hi_open : true; /* |x| > 0 */
    any_neg = nonneg_range(&neg, a, a_open, has_lo, has_lo ? -lo : 0, lo_open);
  }
  if (!any_pos && !any_neg) {
    srv_buf_free(&pos), srv_buf_free(&neg);
    return js_fail(c, "the number range is empty");
  }
  js_put(expr, "(");
  if (any_pos) srv_buf_append(expr, pos.p, pos.n);
  if (any_neg) js_put(expr, any_pos ? " | \"-\" " : "\"-\" "), srv_buf_append(expr, neg.p, neg.n);
  js_put(expr, ")");
  srv_buf_free(&pos), srv_buf_free(&neg);
  return true;
}
