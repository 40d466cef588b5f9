/* lex.c: the template lexer: source text to tokens, as jinja2's lexer makes
 * them with trim_blocks and lstrip_blocks (the whitespace rules, raw blocks,
 * comments, newline normalisation, the one trailing newline dropped), and
 * string literals decoded as Python's unicode-escape decodes them. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/tpl.h"

typedef struct {
  const char *s;
  size_t len, pos;
  tpl_tokens *out;
  size_t line_pos; /* line_at's cursor */
  int line;
  bool line_starting;
  char paren[256]; /* brackets open inside the current tag */
  int depth;
} lexer;

/* The line of byte offset off (offsets asked for never decrease much; the
 * cursor moves either way). */
static int line_at(lexer *lx, size_t off) {
  while (lx->line_pos < off) {
    if (lx->s[lx->line_pos] == '\n') lx->line++;
    lx->line_pos++;
  }
  while (lx->line_pos > off) {
    lx->line_pos--;
    if (lx->s[lx->line_pos] == '\n') lx->line--;
  }
  return lx->line;
}

static int lex_fail(lexer *lx, size_t off, const char *fmt, ...) {
  char msg[300];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return pa_error(PASADA_ERR_FORMAT, "template line %d: %s", line_at(lx, off), msg);
}

static tpl_token *push(lexer *lx, uint8_t type, size_t off, size_t len) {
  tpl_tokens *t = lx->out;
  if (t->n == t->cap) {
    const size_t cap = t->cap ? t->cap * 2 : 256;
    tpl_token *nt = realloc(t->t, cap * sizeof(tpl_token));
    if (!nt) return NULL;
    t->t = nt;
    t->cap = cap;
  }
  tpl_token *k = &t->t[t->n++];
  memset(k, 0, sizeof *k);
  k->type = type;
  k->line = line_at(lx, off);
  k->s = lx->s + off;
  k->len = len;
  return k;
}

/* Bytes of the (Python) whitespace character at i, or 0. */
static size_t ws_at(const char *s, size_t len, size_t i) {
  if (i >= len) return 0;
  const unsigned char c = (unsigned char)s[i];
  if (c < 0x80) return tpl_cp_space(c) ? 1 : 0;
  size_t j = i;
  const uint32_t cp = tpl_utf8_next(s, len, &j);
  return tpl_cp_space(cp) ? j - i : 0;
}

static size_t skip_ws(const char *s, size_t len, size_t i) {
  size_t n;
  while ((n = ws_at(s, len, i)) > 0) i += n;
  return i;
}

/* Length of text without its trailing whitespace (str.rstrip()). */
static size_t rstrip_len(const char *s, size_t n) {
  size_t end = n;
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && ((unsigned char)s[start] & 0xC0) == 0x80) start--;
    if (ws_at(s, n, start) != end - start) break;
    end = start;
  }
  return end;
}

/* Emits the data before a tag, applying the tag's whitespace control: sign
 * '-' strips all whitespace before it, lstrip_blocks (block and comment tags,
 * not '+') strips the spaces that start its line. */
static int emit_data(lexer *lx, size_t start, size_t end, char sign, bool lstrip) {
  size_t n = end - start;
  const char *text = lx->s + start;
  if (sign == '-') {
    n = rstrip_len(text, n);
  } else if (sign != '+' && lstrip) {
    size_t l_pos = n;
    while (l_pos > 0 && text[l_pos - 1] != '\n') l_pos--;
    if ((l_pos > 0 || lx->line_starting) && l_pos < n && skip_ws(text, n, l_pos) == n) n = l_pos;
  }
  if (n && !push(lx, TK_DATA, start, n))
    return pa_error(PASADA_ERR_NOMEM, "out of memory for tokens");
  return PASADA_OK;
}

/* The end of a "%}" tag at i ("+%}", "-%}" + whitespace, "%}" + one
 * newline), or 0 when there is none. */
static size_t block_end_at(const lexer *lx, size_t i) {
  const char *s = lx->s;
  const size_t len = lx->len;
  if (i + 2 < len && s[i] == '+' && s[i + 1] == '%' && s[i + 2] == '}') return i + 3;
  if (i + 2 < len && s[i] == '-' && s[i + 1] == '%' && s[i + 2] == '}')
    return skip_ws(s, len, i + 3);
  if (i + 1 < len && s[i] == '%' && s[i + 1] == '}')
    return i + 2 < len && s[i + 2] == '\n' ? i + 3 : i + 2;
  return 0;
}

static bool is_name_start(uint32_t c) {
  return c == '_' || tpl_cp_alpha(c);
}
static bool is_name_char(uint32_t c) {
  return c == '_' || tpl_cp_alpha(c) || tpl_cp_digit(c) || tpl_cp_word(c);
}

static bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

/* (\d+_)*\d+ at i: its end, or i. */
static size_t digits_at(const char *s, size_t len, size_t i) {
  size_t j = i;
  if (j >= len || !is_digit(s[j])) return i;
  while (j < len && is_digit(s[j])) {
    j++;
    if (j + 1 < len && s[j] == '_' && is_digit(s[j + 1])) j++;
  }
  return j;
}

/* A float literal at i (jinja2's float_re): its end, or i. */
static size_t float_at(const lexer *lx, size_t i) {
  const char *s = lx->s;
  const size_t len = lx->len;
  if (i > 0 && s[i - 1] == '.') return i;
  size_t j = digits_at(s, len, i);
  if (j == i) return i;
  size_t k = j;
  bool frac = false;
  if (k < len && s[k] == '.') {
    const size_t f = digits_at(s, len, k + 1);
    if (f > k + 1) {
      k = f;
      frac = true;
    }
  }
  if (k < len && (s[k] == 'e' || s[k] == 'E')) {
    size_t e = k + 1;
    if (e < len && (s[e] == '+' || s[e] == '-')) e++;
    const size_t d = digits_at(s, len, e);
    if (d > e) return d;
  }
  return frac ? k : i;
}

/* An integer literal at i (jinja2's integer_re): its end, or i. */
static size_t int_at(const lexer *lx, size_t i, int *base) {
  const char *s = lx->s;
  const size_t len = lx->len;
  if (i >= len || !is_digit(s[i])) return i;
  *base = 10;
  if (s[i] == '0' && i + 1 < len) {
    const char p = (char)(s[i + 1] | 0x20);
    const char *set = p == 'b'   ? "01"
                      : p == 'o' ? "01234567"
                      : p == 'x' ? "0123456789abcdef"
                                 : NULL;
    if (set) {
      size_t j = i + 2;
      for (;;) {
        size_t k = j;
        if (k < len && s[k] == '_') k++;
        if (k < len && strchr(set, s[k] | 0x20) && s[k])
          j = k + 1;
        else
          break;
      }
      if (j > i + 2) {
        *base = p == 'b' ? 2 : p == 'o' ? 8 : 16;
        return j;
      }
    }
  }
  if (s[i] == '0') { /* 0(_?0)* */
    size_t j = i + 1;
    for (;;) {
      size_t k = j;
      if (k < len && s[k] == '_') k++;
      if (k < len && s[k] == '0')
        j = k + 1;
      else
        break;
    }
    return j;
  }
  size_t j = i + 1;
  for (;;) {
    size_t k = j;
    if (k < len && s[k] == '_') k++;
    if (k < len && is_digit(s[k]))
      j = k + 1;
    else
      break;
  }
  return j;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = (char)(c | 0x20);
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

/* Decodes a string literal's body (between the quotes) into tok->str. */
static int decode_string(lexer *lx, tpl_token *tok, size_t off, const char *s, size_t n) {
  char *out = malloc(n * 3 + 1); /* \é becomes \xe9: at most 3 bytes per source byte */
  if (!out) return pa_error(PASADA_ERR_NOMEM, "out of memory for a string literal");
  size_t o = 0;
  for (size_t i = 0; i < n;) {
    if (s[i] != '\\') {
      out[o++] = s[i++];
      continue;
    }
    const char e = s[i + 1]; /* the literal's pattern guarantees a character after '\' */
    i += 2;
    uint32_t cp = 0;
    int digits = 0;
    switch (e) {
      case '\n':
        continue;
      case '\\':
        out[o++] = '\\';
        continue;
      case '\'':
        out[o++] = '\'';
        continue;
      case '"':
        out[o++] = '"';
        continue;
      case 'a':
        out[o++] = '\a';
        continue;
      case 'b':
        out[o++] = '\b';
        continue;
      case 'f':
        out[o++] = '\f';
        continue;
      case 'n':
        out[o++] = '\n';
        continue;
      case 'r':
        out[o++] = '\r';
        continue;
      case 't':
        out[o++] = '\t';
        continue;
      case 'v':
        out[o++] = '\v';
        continue;
      case 'x':
        digits = 2;
        break;
      case 'u':
        digits = 4;
        break;
      case 'U':
        digits = 8;
        break;
      case 'N':
        free(out);
        return lex_fail(lx, off, "\\N{...} escapes are not supported in string literals");
      default:
        if (e >= '0' && e <= '7') {
          cp = (uint32_t)(e - '0');
          for (int k = 0; k < 2 && i < n && s[i] >= '0' && s[i] <= '7'; k++)
            cp = cp * 8 + (uint32_t)(s[i++] - '0');
          o += tpl_utf8_put(cp, out + o);
          continue;
        }
        if ((unsigned char)e >=
            0x80) { /* '\' before a non-ASCII character stays as its \x.. form */
          size_t j = i - 1;
          const uint32_t c = tpl_utf8_next(s, n, &j);
          i = j;
          o += (size_t)sprintf(out + o,
                               c < 0x100     ? "\\x%02x"
                               : c < 0x10000 ? "\\u%04x"
                                             : "\\U%08x",
                               c);
          continue;
        }
        out[o++] = '\\';
        out[o++] = e;
        continue;
    }
    for (int k = 0; k < digits; k++) {
      const int h = i < n ? hexval(s[i]) : -1;
      if (h < 0) {
        free(out);
        return lex_fail(lx, off, "truncated \\%c escape in a string literal", e);
      }
      cp = cp * 16 + (uint32_t)h;
      i++;
    }
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      free(out);
      return lex_fail(lx, off, "a string literal's escape is not a Unicode character");
    }
    o += tpl_utf8_put(cp, out + o);
  }
  out[o] = '\0';
  tok->str = out;
  tok->str_len = o;
  return PASADA_OK;
}

static const struct {
  const char *op;
  uint8_t type;
} OPS[] = {{"//", TK_FLOORDIV}, {"**", TK_POW},     {"==", TK_EQ},    {"!=", TK_NE},
           {">=", TK_GTEQ},     {"<=", TK_LTEQ},    {"+", TK_ADD},    {"-", TK_SUB},
           {"/", TK_DIV},       {"*", TK_MUL},      {"%", TK_MOD},    {"~", TK_TILDE},
           {"[", TK_LBRACKET},  {"]", TK_RBRACKET}, {"(", TK_LPAREN}, {")", TK_RPAREN},
           {"{", TK_LBRACE},    {"}", TK_RBRACE},   {">", TK_GT},     {"<", TK_LT},
           {"=", TK_ASSIGN},    {".", TK_DOT},      {":", TK_COLON},  {"|", TK_PIPE},
           {",", TK_COMMA},     {";", TK_SEMICOLON}};

/* One token inside {{ }} or {% %}; *done when the tag ended. */
static int lex_tag_token(lexer *lx, bool block, bool *done) {
  const char *s = lx->s;
  const size_t len = lx->len, i = lx->pos;
  if (lx->depth == 0) {
    size_t end = 0;
    if (block)
      end = block_end_at(lx, i);
    else if (i + 2 < len && s[i] == '-' && s[i + 1] == '}' && s[i + 2] == '}')
      end = skip_ws(s, len, i + 3);
    else if (i + 1 < len && s[i] == '}' && s[i + 1] == '}')
      end = i + 2;
    if (end) {
      if (!push(lx, block ? TK_BLOCK_END : TK_VAR_END, i, end - i))
        return pa_error(PASADA_ERR_NOMEM, "out of memory for tokens");
      lx->line_starting = s[end - 1] == '\n';
      lx->pos = end;
      *done = true;
      return PASADA_OK;
    }
  }
  size_t j = skip_ws(s, len, i);
  if (j > i) {
    lx->pos = j;
    return PASADA_OK;
  }
  if ((j = float_at(lx, i)) > i) {
    tpl_token *t = push(lx, TK_FLOAT, i, j - i);
    if (!t) return pa_error(PASADA_ERR_NOMEM, "out of memory for tokens");
    char tmp[128];
    size_t o = 0;
    for (size_t k = i; k < j && o + 1 < sizeof tmp; k++)
      if (s[k] != '_') tmp[o++] = s[k];
    tmp[o] = 0;
    t->f = strtod(tmp, NULL);
    lx->pos = j;
    return PASADA_OK;
  }
  int base = 10;
  if ((j = int_at(lx, i, &base)) > i) {
    tpl_token *t = push(lx, TK_INT, i, j - i);
    if (!t) return pa_error(PASADA_ERR_NOMEM, "out of memory for tokens");
    char tmp[128];
    size_t o = 0;
    for (size_t k = base == 10 ? i : i + 2; k < j && o + 1 < sizeof tmp; k++)
      if (s[k] != '_') tmp[o++] = s[k];
    tmp[o] = 0;
    errno = 0;
    const unsigned long long v = strtoull(tmp, NULL, base);
    if (errno == ERANGE || v > (unsigned long long)INT64_MAX || o + 1 >= sizeof tmp)
      return lex_fail(lx, i, "integer literal too large");
    t->i = (int64_t)v;
    lx->pos = j;
    return PASADA_OK;
  }
  {
    size_t k = i;
    const uint32_t c = tpl_utf8_next(s, len, &k);
    if (is_name_start(c)) {
      j = k;
      while (j < len) {
        size_t m = j;
        if (!is_name_char(tpl_utf8_next(s, len, &m))) break;
        j = m;
      }
      if (!push(lx, TK_NAME, i, j - i))
        return pa_error(PASADA_ERR_NOMEM, "out of memory for tokens");
      lx->pos = j;
      return PASADA_OK;
    }
  }
  if (s[i] == '\'' || s[i] == '"') {
    const char q = s[i];
    j = i + 1;
    while (j < len && s[j] != q) j += s[j] == '\\' && j + 1 < len ? 2 : 1;
    if (j < len) {
      tpl_token *t = push(lx, TK_STRING, i, j + 1 - i);
      if (!t) return pa_error(PASADA_ERR_NOMEM, "out of memory for tokens");
      lx->pos = j + 1;
      return decode_string(lx, t, i, s + i + 1, j - i - 1);
    }
  }
  for (size_t k = 0; k < sizeof OPS / sizeof OPS[0]; k++) {
    const size_t n = strlen(OPS[k].op);
    if (i + n > len || memcmp(s + i, OPS[k].op, n)) continue;
    const char c = s[i];
    if (c == '(' || c == '[' || c == '{') {
      if (lx->depth >= (int)sizeof lx->paren) return lex_fail(lx, i, "brackets nested too deeply");
      lx->paren[lx->depth++] = c == '(' ? ')' : c == '[' ? ']' : '}';
    } else if (c == ')' || c == ']' || c == '}') {
      if (lx->depth == 0) return lex_fail(lx, i, "unexpected '%c'", c);
      const char want = lx->paren[--lx->depth];
      if (want != c) return lex_fail(lx, i, "unexpected '%c', expected '%c'", c, want);
    }
    if (!push(lx, OPS[k].type, i, n)) return pa_error(PASADA_ERR_NOMEM, "out of memory for tokens");
    lx->pos = i + n;
    return PASADA_OK;
  }
  return lex_fail(lx, i, "unexpected char '%c'", s[i]);
}

/* A raw block's body from lx->pos to its {% endraw %}. */
static int lex_raw(lexer *lx) {
  const char *s = lx->s;
  const size_t len = lx->len;
  for (size_t p = lx->pos; p + 1 < len; p++) {
    if (s[p] != '{' || s[p + 1] != '%') continue;
    size_t k = p + 2;
    char sign = 0;
    if (k < len && (s[k] == '-' || s[k] == '+')) sign = s[k++];
    k = skip_ws(s, len, k);
    if (len - k < 6 || memcmp(s + k, "endraw", 6)) continue;
    k = skip_ws(s, len, k + 6);
    const size_t end = block_end_at(lx, k);
    if (!end) continue;
    int rc = emit_data(lx, lx->pos, p, sign, true);
    if (rc) return rc;
    lx->line_starting = s[end - 1] == '\n';
    lx->pos = end;
    return PASADA_OK;
  }
  return lex_fail(lx, lx->pos, "Missing end of raw directive");
}

static int lex_comment(lexer *lx) {
  const char *s = lx->s;
  const size_t len = lx->len;
  for (size_t q = lx->pos; q + 1 < len; q++) {
    if (s[q] != '#' || s[q + 1] != '}') continue;
    size_t end = q + 2;
    if (q > lx->pos && s[q - 1] == '-')
      end = skip_ws(s, len, end);
    else if (!(q > lx->pos && s[q - 1] == '+') && end < len && s[end] == '\n')
      end++;
    lx->line_starting = s[end - 1] == '\n';
    lx->pos = end;
    return PASADA_OK;
  }
  return lex_fail(lx, lx->pos, "Missing end of comment tag");
}

static int lex_all(lexer *lx) {
  const char *s = lx->s;
  const size_t len = lx->len;
  lx->line_starting = true;
  while (lx->pos < len) {
    size_t p = lx->pos;
    while (p + 1 < len && !(s[p] == '{' && (s[p + 1] == '%' || s[p + 1] == '{' || s[p + 1] == '#')))
      p++;
    if (p + 1 >= len) {
      if (!push(lx, TK_DATA, lx->pos, len - lx->pos))
        return pa_error(PASADA_ERR_NOMEM, "out of memory");
      break;
    }
    const char kind = s[p + 1];
    size_t k = p + 2;
    char sign = 0;
    if (k < len && (s[k] == '-' || s[k] == '+')) sign = s[k++];
    if (kind == '%') { /* a raw block? */
      size_t r = skip_ws(s, len, k);
      if (len - r >= 3 && !memcmp(s + r, "raw", 3)) {
        r = skip_ws(s, len, r + 3);
        size_t end = 0;
        if (r + 2 < len && s[r] == '-' && s[r + 1] == '%' && s[r + 2] == '}')
          end = skip_ws(s, len, r + 3);
        else if (r + 1 < len && s[r] == '%' && s[r + 1] == '}')
          end = r + 2;
        if (end) {
          int rc = emit_data(lx, lx->pos, p, sign, true);
          if (rc) return rc;
          lx->line_starting = s[end - 1] == '\n';
          lx->pos = end;
          if ((rc = lex_raw(lx))) return rc;
          continue;
        }
      }
    }
    int rc = emit_data(lx, lx->pos, p, sign, kind != '{');
    if (rc) return rc;
    lx->line_starting = false;
    lx->pos = k;
    if (kind == '#') {
      if ((rc = lex_comment(lx))) return rc;
      continue;
    }
    const bool block = kind == '%';
    if (!push(lx, block ? TK_BLOCK_BEGIN : TK_VAR_BEGIN, p, k - p))
      return pa_error(PASADA_ERR_NOMEM, "out of memory for tokens");
    lx->depth = 0;
    bool done = false;
    while (!done && lx->pos < len)
      if ((rc = lex_tag_token(lx, block, &done))) return rc;
  }
  if (!push(lx, TK_EOF, len, 0)) return pa_error(PASADA_ERR_NOMEM, "out of memory for tokens");
  return PASADA_OK;
}

int tpl_lex(const char *src, size_t len, tpl_tokens *out) {
  memset(out, 0, sizeof *out);
  const size_t bad = tpl_utf8_prefix(src, len);
  if (bad != len) {
    int line = 1;
    for (size_t i = 0; i < bad; i++) line += src[i] == '\n';
    return pa_error(PASADA_ERR_FORMAT, "template line %d: not valid UTF-8", line);
  }
  char *s = malloc(len + 1);
  if (!s) return pa_error(PASADA_ERR_NOMEM, "out of memory for the template");
  size_t n = 0;
  for (size_t i = 0; i < len; i++) {
    if (src[i] == '\r') {
      s[n++] = '\n';
      if (i + 1 < len && src[i + 1] == '\n') i++;
    } else {
      s[n++] = src[i];
    }
  }
  if (n > 0 && s[n - 1] == '\n') n--; /* keep_trailing_newline=False */
  s[n] = '\0';
  out->src = s;
  out->len = n;
  lexer lx = {.s = s, .len = n, .out = out, .line = 1};
  const int rc = lex_all(&lx);
  if (rc) tpl_tokens_free(out);
  return rc;
}

void tpl_tokens_free(tpl_tokens *t) {
  for (size_t i = 0; i < t->n; i++) free(t->t[i].str);
  free(t->t);
  free(t->src);
  memset(t, 0, sizeof *t);
}
