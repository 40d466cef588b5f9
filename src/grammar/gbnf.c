/* gbnf.c: parses llama.cpp's GBNF into a syntax tree: `name ::= ...` rules
 * of alternatives (|), sequences, groups, the repetitions * + ? {m} {m,}
 * {m,n}, "literals", [classes] and [^negated] ones, . (any character), rule
 * references, token references (<[id]>, <|name|>: with a vocabulary) and #
 * comments. A newline ends a rule except inside a group or
 * after |. The text is untrusted: every error names its line and column. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "grammar/grammar.h"
#include "tokenizer/tokenizer_internal.h"

typedef struct {
  const char *s;
  size_t len, pos;
  pa_gast *ast;
  const pa_tokenizer *tok; /* resolves token references; NULL: they are errors */
  int depth;
  int err;                           /* PASADA_OK until the first error */
  int32_t names[2 * PA_G_MAX_RULES]; /* rule ids by name hash, -1 empty */
} parser;

#define NAME_SLOTS (2 * PA_G_MAX_RULES)

static uint32_t name_hash(const char *s, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
  return h;
}

/* 1-based line and column (in bytes) of offset `at`. */
/* Scans from the start: only ever called for an error message. */
void pa_gast_where(const pa_gast *ast, size_t pos, int32_t *line, int32_t *col) {
  int32_t l = 1, c = 1;
  for (size_t i = 0; i < pos && i < ast->src_len; i++) {
    if (ast->src[i] == '\n') {
      l++;
      c = 1;
    } else {
      c++;
    }
  }
  *line = l;
  *col = c;
}

static void line_col(const parser *p, size_t at, int32_t *line, int32_t *col) {
  pa_gast_where(p->ast, at, line, col);
}

static int fail_at(parser *p, size_t at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail_at(parser *p, size_t at, const char *fmt, ...) {
  if (p->err) return p->err;
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  int32_t line, col;
  line_col(p, at, &line, &col);
  p->err = pa_error(PASADA_ERR_ARG, "grammar: line %d, column %d: %s", line, col, msg);
  return p->err;
}

/* ---- growable arrays ---- */

static bool grow(void **v, int32_t *cap, int32_t need, size_t elem) {
  if (need <= *cap) return true;
  int32_t c = *cap ? *cap : 16;
  while (c < need) {
    if (c > INT32_MAX / 2) return false;
    c *= 2;
  }
  void *n = realloc(*v, (size_t)c * elem);
  if (!n) return false;
  *v = n;
  *cap = c;
  return true;
}

static int32_t new_node(parser *p, pa_gx_kind kind, size_t at) {
  pa_gast *a = p->ast;
  if (!grow((void **)&a->x, &a->cap_x, a->n_x + 1, sizeof *a->x)) {
    p->err = pa_error(PASADA_ERR_NOMEM, "grammar: out of memory");
    return -1;
  }
  pa_gx *x = &a->x[a->n_x];
  *x = (pa_gx){.kind = (uint8_t)kind, .child = -1, .rule = -1, .max = 1, .min = 1};
  (void)at;
  return a->n_x++;
}

static bool push_lit(parser *p, uint32_t cp) {
  pa_gast *a = p->ast;
  if (!grow((void **)&a->lit, &a->cap_lit, a->n_lit + 4, 1)) return false;
  uint8_t *o = a->lit + a->n_lit;
  if (cp < 0x80) {
    o[0] = (uint8_t)cp;
    a->n_lit += 1;
  } else if (cp < 0x800) {
    o[0] = (uint8_t)(0xC0 | cp >> 6);
    o[1] = (uint8_t)(0x80 | (cp & 0x3F));
    a->n_lit += 2;
  } else if (cp < 0x10000) {
    o[0] = (uint8_t)(0xE0 | cp >> 12);
    o[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
    o[2] = (uint8_t)(0x80 | (cp & 0x3F));
    a->n_lit += 3;
  } else {
    o[0] = (uint8_t)(0xF0 | cp >> 18);
    o[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
    o[3] = (uint8_t)(0x80 | (cp & 0x3F));
    a->n_lit += 4;
  }
  return true;
}

int32_t pa_gast_find(const pa_gast *ast, const char *name) {
  for (int32_t i = 0; i < ast->n_rules; i++)
    if (!strcmp(ast->rules[i].name, name)) return i;
  return -1;
}

/* The rule named s[0..n), added (undefined) when new; -1 on error. */
static int32_t rule_id(parser *p, const char *s, size_t n, size_t at) {
  pa_gast *a = p->ast;
  uint32_t h = name_hash(s, n) & (NAME_SLOTS - 1);
  for (; p->names[h] >= 0; h = (h + 1) & (NAME_SLOTS - 1)) {
    const char *name = a->rules[p->names[h]].name;
    if (strlen(name) == n && !memcmp(name, s, n)) return p->names[h];
  }
  if (a->n_rules >= PA_G_MAX_RULES) {
    fail_at(p, at, "more than %d rules", PA_G_MAX_RULES);
    return -1;
  }
  char *name = malloc(n + 1);
  if (!name || !grow((void **)&a->rules, &a->cap_rules, a->n_rules + 1, sizeof *a->rules)) {
    free(name);
    p->err = pa_error(PASADA_ERR_NOMEM, "grammar: out of memory");
    return -1;
  }
  memcpy(name, s, n);
  name[n] = 0;
  pa_grule *r = &a->rules[a->n_rules];
  *r = (pa_grule){.name = name, .expr = -1, .pos = at};
  p->names[h] = a->n_rules; /* at most half the slots fill: PA_G_MAX_RULES */
  return a->n_rules++;
}

/* ---- lexing ---- */

static int peek(const parser *p) {
  return p->pos < p->len ? (unsigned char)p->s[p->pos] : -1;
}
static int peek_at(const parser *p, size_t k) {
  return p->pos + k < p->len ? (unsigned char)p->s[p->pos + k] : -1;
}

/* Spaces, tabs and comments; newlines too when newline_ok. */
static void skip_space(parser *p, bool newline_ok) {
  while (p->pos < p->len) {
    char c = p->s[p->pos];
    if (c == ' ' || c == '\t') {
      p->pos++;
    } else if (c == '#') {
      while (p->pos < p->len && p->s[p->pos] != '\n' && p->s[p->pos] != '\r') p->pos++;
    } else if (newline_ok && (c == '\n' || c == '\r')) {
      p->pos++;
    } else {
      break;
    }
  }
}

static bool is_name_char(int c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

static int hex_value(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* One UTF-8 character of the text (validated) into *cp. */
static bool read_utf8(parser *p, uint32_t *cp) {
  size_t at = p->pos;
  const unsigned char *s = (const unsigned char *)p->s + at;
  size_t left = p->len - at;
  uint32_t c = s[0];
  int n = c < 0x80             ? 1
          : (c & 0xE0) == 0xC0 ? 2
          : (c & 0xF0) == 0xE0 ? 3
          : (c & 0xF8) == 0xF0 ? 4
                               : 0;
  if (!n || (size_t)n > left) return fail_at(p, at, "invalid UTF-8 in the grammar"), false;
  if (n > 1) c &= 0x3Fu >> (n - 1);
  for (int i = 1; i < n; i++) {
    if ((s[i] & 0xC0) != 0x80) return fail_at(p, at, "invalid UTF-8 in the grammar"), false;
    c = c << 6 | (s[i] & 0x3F);
  }
  static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (c < least[n] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
    return fail_at(p, at, "invalid UTF-8 in the grammar"), false;
  p->pos += (size_t)n;
  *cp = c;
  return true;
}

/* One character of a literal or class: an escape or a UTF-8 character. */
static bool read_char(parser *p, uint32_t *cp) {
  size_t at = p->pos;
  if (p->pos >= p->len) return fail_at(p, at, "unexpected end of the grammar"), false;
  if (p->s[p->pos] != '\\') return read_utf8(p, cp);
  int e = peek_at(p, 1);
  int digits = 0;
  switch (e) {
    case 'n':
      *cp = '\n';
      break;
    case 't':
      *cp = '\t';
      break;
    case 'r':
      *cp = '\r';
      break;
    case '\\':
    case '"':
    case '[':
    case ']':
    case '-':
      *cp = (uint32_t)e;
      break;
    case 'x':
      digits = 2;
      break;
    case 'u':
      digits = 4;
      break;
    case 'U':
      digits = 8;
      break;
    case -1:
      return fail_at(p, at, "unexpected end of the grammar after '\\'"), false;
    default:
      return fail_at(p, at, "unknown escape '\\%c'", e), false;
  }
  p->pos += 2;
  if (!digits) return true;
  uint32_t v = 0;
  for (int i = 0; i < digits; i++) {
    int h = hex_value(peek(p));
    if (h < 0) return fail_at(p, at, "'\\%c' needs %d hexadecimal digits", e, digits), false;
    v = v << 4 | (uint32_t)h;
    p->pos++;
  }
  if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
    return fail_at(p, at, "U+%X is not a character", v), false;
  *cp = v;
  return true;
}

/* ---- expressions ---- */

static int32_t parse_alternates(parser *p, bool nested);

/* Appends the collected children ids[0..n) to the tree's kids list. */
static int32_t store_kids(parser *p, const int32_t *ids, int32_t n) {
  pa_gast *a = p->ast;
  if (!grow((void **)&a->kids, &a->cap_kids, a->n_kids + n, sizeof *a->kids)) {
    p->err = pa_error(PASADA_ERR_NOMEM, "grammar: out of memory");
    return -1;
  }
  if (n) memcpy(a->kids + a->n_kids, ids, (size_t)n * sizeof *ids);
  int32_t first = a->n_kids;
  a->n_kids += n;
  return first;
}

static int32_t parse_literal(parser *p) {
  size_t at = p->pos++;
  int32_t x = new_node(p, PA_GX_LITERAL, at);
  if (x < 0) return -1;
  int32_t first = p->ast->n_lit;
  for (;;) {
    if (p->pos >= p->len) return fail_at(p, at, "unterminated literal"), -1;
    if (p->s[p->pos] == '"') break;
    uint32_t cp;
    if (!read_char(p, &cp)) return -1;
    if (!push_lit(p, cp)) return p->err = pa_error(PASADA_ERR_NOMEM, "grammar: out of memory"), -1;
  }
  p->pos++;
  p->ast->x[x].first = first;
  p->ast->x[x].count = p->ast->n_lit - first;
  return x;
}

/* A token reference, <[id]> or <text> (the token whose text that is),
 * as a literal of the token's spelling in the grammar's vocabulary
 * (pa_gvocab_spelling): a special token matches only itself, whole; a text
 * token matches its text. Negated (!<...>, the '!' at `at`): one whole
 * token other than that one, spelled as the literal pa_gneg_spelling
 * writes, which the matcher reads at a token's start (negation.c). */
static int32_t parse_token_ref(parser *p, bool negated) {
  const size_t at = p->pos - (negated ? 1 : 0);
  p->pos++;
  const char *close = memchr(p->s + p->pos, '>', p->len - p->pos);
  const char *nl = memchr(p->s + p->pos, '\n', p->len - p->pos);
  if (!close || (nl && nl < close)) return fail_at(p, at, "unterminated token reference"), -1;
  const size_t n = (size_t)(close - (p->s + p->pos));
  if (!p->tok)
    return fail_at(p, at, "token references like <%.*s> need a model's vocabulary",
                   (int)(n < 40 ? n : 40), p->s + p->pos),
           -1;
  int64_t id = -1;
  if (n >= 3 && p->s[p->pos] == '[' && p->s[p->pos + n - 1] == ']') {
    id = 0;
    for (size_t i = p->pos + 1; i < p->pos + n - 1; i++) {
      if (p->s[i] < '0' || p->s[i] > '9') return fail_at(p, at, "<[...]> takes a token id"), -1;
      if (id <= p->tok->n_vocab) id = id * 10 + (p->s[i] - '0');
    }
    if (id >= p->tok->n_vocab)
      return fail_at(p, at, "token %lld is outside the vocabulary (%d tokens)", (long long)id,
                     p->tok->n_vocab),
             -1;
  } else if (n > 0 && n < 256) {
    char name[258];
    snprintf(name, sizeof name, "<%.*s>", (int)n, p->s + p->pos);
    id = pa_tokenizer_find(p->tok, name);
    if (id < 0) return fail_at(p, at, "%s is not a token of this vocabulary", name), -1;
  } else {
    return fail_at(p, at, "a token reference is <[id]> or <text of one token>"), -1;
  }
  p->pos += n + 1;
  uint8_t tmp[PA_G_SPECIAL_LEN];
  const uint8_t *b = tmp;
  const size_t len = negated ? pa_gneg_spelling((int32_t)id, tmp)
                             : pa_gvocab_spelling(p->tok, (int32_t)id, tmp, &b);
  const int32_t x = new_node(p, PA_GX_LITERAL, at);
  if (x < 0) return -1;
  pa_gast *a = p->ast;
  if (!grow((void **)&a->lit, &a->cap_lit, a->n_lit + (int32_t)len, 1))
    return p->err = pa_error(PASADA_ERR_NOMEM, "grammar: out of memory"), -1;
  memcpy(a->lit + a->n_lit, b, len);
  a->x[x].first = a->n_lit;
  a->x[x].count = (int32_t)len;
  a->n_lit += (int32_t)len;
  return x;
}

static bool push_range(parser *p, uint32_t lo, uint32_t hi) {
  pa_gast *a = p->ast;
  if (!grow((void **)&a->ranges, &a->cap_ranges, a->n_ranges + 2, sizeof *a->ranges)) {
    p->err = pa_error(PASADA_ERR_NOMEM, "grammar: out of memory");
    return false;
  }
  a->ranges[a->n_ranges++] = lo;
  a->ranges[a->n_ranges++] = hi;
  return true;
}

static int32_t parse_class(parser *p) {
  size_t at = p->pos++;
  int32_t x = new_node(p, PA_GX_CHARS, at);
  if (x < 0) return -1;
  bool negated = peek(p) == '^';
  if (negated) p->pos++;
  int32_t first = p->ast->n_ranges;
  for (;;) {
    if (p->pos >= p->len) return fail_at(p, at, "unterminated character class"), -1;
    if (p->s[p->pos] == ']') break;
    size_t item = p->pos;
    uint32_t lo, hi;
    if (!read_char(p, &lo)) return -1;
    hi = lo;
    if (peek(p) == '-' && peek_at(p, 1) != ']' && peek_at(p, 1) != -1) {
      p->pos++;
      if (!read_char(p, &hi)) return -1;
      if (hi < lo) return fail_at(p, item, "range U+%X-U+%X is empty", lo, hi), -1;
    }
    if (!push_range(p, lo, hi)) return -1;
  }
  p->pos++;
  pa_gx *n = &p->ast->x[x];
  n->negated = negated;
  n->first = first / 2;
  n->count = (p->ast->n_ranges - first) / 2;
  return x;
}

/* {m}, {m,}, {m,n} (the brace at p->pos). */
static bool parse_braces(parser *p, bool nested, int32_t *min, int32_t *max) {
  size_t at = p->pos++;
  int32_t v[2] = {-1, -1};
  bool comma = false;
  for (int k = 0; k < 2; k++) {
    skip_space(p, nested);
    if (peek(p) >= '0' && peek(p) <= '9') {
      int64_t n = 0;
      while (peek(p) >= '0' && peek(p) <= '9') {
        n = n * 10 + (peek(p) - '0');
        if (n > PA_G_MAX_REPEAT)
          return fail_at(p, at, "repetition bound above %d", PA_G_MAX_REPEAT), false;
        p->pos++;
      }
      v[k] = (int32_t)n;
    }
    skip_space(p, nested);
    if (k == 0 && peek(p) == ',') {
      comma = true;
      p->pos++;
      continue;
    }
    break;
  }
  if (peek(p) != '}') return fail_at(p, at, "expected '}' to close the repetition"), false;
  p->pos++;
  if (v[0] < 0 && !(comma && v[1] >= 0))
    return fail_at(p, at, "a repetition needs a count: {m}, {m,} or {m,n}"), false;
  *min = v[0] < 0 ? 0 : v[0];
  *max = comma ? v[1] : *min;
  if (*max >= 0 && *max < *min)
    return fail_at(p, at, "repetition {%d,%d}: the maximum is below the minimum", *min, *max),
           false;
  return true;
}

static int32_t parse_sequence(parser *p, bool nested) {
  int32_t local[16], *ids = local, n = 0, cap = 16, postfix = 0;
  size_t start = p->pos;
  int32_t result = -1;
  for (;;) {
    int c = peek(p);
    size_t at = p->pos;
    int32_t item = -1;
    if (c == '"') {
      item = parse_literal(p);
    } else if (c == '[') {
      item = parse_class(p);
    } else if (c == '<') {
      item = parse_token_ref(p, false);
    } else if (c == '!' && peek_at(p, 1) == '<') {
      p->pos++;
      item = parse_token_ref(p, true);
    } else if (c == '.') {
      p->pos++;
      item = new_node(p, PA_GX_CHARS, at);
      if (item >= 0) p->ast->x[item].negated = true; /* nothing excluded */
    } else if (c == '(') {
      if (++p->depth > PA_G_MAX_DEPTH) {
        fail_at(p, at, "groups nested deeper than %d", PA_G_MAX_DEPTH);
        goto out;
      }
      p->pos++;
      skip_space(p, true);
      item = parse_alternates(p, true);
      if (item >= 0 && peek(p) != ')') {
        fail_at(p, at, "expected ')' to close this group");
        item = -1;
      }
      if (item >= 0) p->pos++;
      p->depth--;
    } else if (c >= 0 && is_name_char(c)) {
      while (is_name_char(peek(p))) p->pos++;
      int32_t r = rule_id(p, p->s + at, p->pos - at, at);
      item = r < 0 ? -1 : new_node(p, PA_GX_REF, at);
      if (item >= 0) p->ast->x[item].rule = r;
      skip_space(p, nested);
      if (item >= 0 && p->pos + 3 <= p->len && !strncmp(p->s + p->pos, "::=", 3)) {
        fail_at(p, at, "expected a newline before the next rule '%.*s'", (int)(p->pos - at),
                p->s + at);
        goto out;
      }
    } else if (c == '*' || c == '+' || c == '?' || c == '{') {
      if (!n) {
        fail_at(p, at, "'%c' has nothing before it to repeat", c);
        goto out;
      }
      if (++postfix > PA_G_MAX_POSTFIX) {
        fail_at(p, at, "more than %d repetition operators on one item", PA_G_MAX_POSTFIX);
        goto out;
      }
      int32_t min = c == '+' ? 1 : 0, max = c == '?' ? 1 : -1;
      if (c == '{') {
        if (!parse_braces(p, nested, &min, &max)) goto out;
      } else {
        p->pos++;
      }
      int32_t r = new_node(p, PA_GX_REPEAT, at);
      if (r < 0) goto out;
      p->ast->x[r].child = ids[n - 1];
      p->ast->x[r].min = min;
      p->ast->x[r].max = max;
      ids[n - 1] = r;
      skip_space(p, nested);
      continue;
    } else {
      break; /* end of the sequence: | ) newline, end, or an error the caller names */
    }
    if (item < 0) goto out;
    postfix = 0;
    if (n == cap) {
      int32_t *bigger = malloc((size_t)cap * 2 * sizeof *bigger);
      if (!bigger) {
        p->err = pa_error(PASADA_ERR_NOMEM, "grammar: out of memory");
        goto out;
      }
      memcpy(bigger, ids, (size_t)n * sizeof *ids);
      if (ids != local) free(ids);
      ids = bigger;
      cap *= 2;
    }
    ids[n++] = item;
    skip_space(p, nested);
  }
  if (n == 1) {
    result = ids[0];
  } else {
    result = new_node(p, PA_GX_SEQ, start);
    int32_t first = result >= 0 ? store_kids(p, ids, n) : -1;
    if (first < 0) {
      result = -1;
    } else {
      p->ast->x[result].first = first;
      p->ast->x[result].count = n;
    }
  }
out:
  if (ids != local) free(ids);
  return p->err ? -1 : result;
}

static int32_t parse_alternates(parser *p, bool nested) {
  int32_t local[8], *ids = local, n = 0, cap = 8;
  size_t start = p->pos;
  int32_t result = -1;
  for (;;) {
    int32_t s = parse_sequence(p, nested);
    if (s < 0) goto out;
    if (n == cap) {
      int32_t *bigger = malloc((size_t)cap * 2 * sizeof *bigger);
      if (!bigger) {
        p->err = pa_error(PASADA_ERR_NOMEM, "grammar: out of memory");
        goto out;
      }
      memcpy(bigger, ids, (size_t)n * sizeof *ids);
      if (ids != local) free(ids);
      ids = bigger;
      cap *= 2;
    }
    ids[n++] = s;
    if (peek(p) != '|') break;
    p->pos++;
    skip_space(p, true);
  }
  if (n == 1) {
    result = ids[0];
  } else {
    result = new_node(p, PA_GX_ALT, start);
    int32_t first = result >= 0 ? store_kids(p, ids, n) : -1;
    if (first < 0) {
      result = -1;
    } else {
      p->ast->x[result].first = first;
      p->ast->x[result].count = n;
    }
  }
out:
  if (ids != local) free(ids);
  return p->err ? -1 : result;
}

static void describe(const parser *p, char *buf, size_t cap) {
  int c = peek(p);
  if (c < 0)
    snprintf(buf, cap, "the end");
  else if (c == '\n' || c == '\r')
    snprintf(buf, cap, "a newline");
  else if (c < 0x20 || c >= 0x7F)
    snprintf(buf, cap, "byte 0x%02X", c);
  else
    snprintf(buf, cap, "'%c'", c);
}

static int parse_rule(parser *p) {
  size_t at = p->pos;
  while (is_name_char(peek(p))) p->pos++;
  if (p->pos == at) {
    char what[32];
    describe(p, what, sizeof what);
    return fail_at(p, at, "expected a rule name, found %s", what);
  }
  size_t name_end = p->pos;
  skip_space(p, false);
  if (p->pos + 3 > p->len || strncmp(p->s + p->pos, "::=", 3))
    return fail_at(p, p->pos, "expected '::=' after the rule name '%.*s'", (int)(name_end - at),
                   p->s + at);
  p->pos += 3;
  int32_t r = rule_id(p, p->s + at, name_end - at, at);
  if (r < 0) return p->err;
  if (p->ast->rules[r].expr >= 0)
    return fail_at(p, at, "rule '%s' is defined twice", p->ast->rules[r].name);
  skip_space(p, true);
  int32_t e = parse_alternates(p, false);
  if (e < 0) return p->err;
  p->ast->rules[r].expr = e;
  p->ast->rules[r].pos = at;
  int c = peek(p);
  if (c == '\r') p->pos++, c = peek(p);
  if (c == '\n') {
    p->pos++;
  } else if (c != -1) {
    char what[32];
    describe(p, what, sizeof what);
    if (c == ')') return fail_at(p, p->pos, "')' closes no group");
    return fail_at(p, p->pos, "expected a newline or the end after the rule, found %s", what);
  }
  skip_space(p, true);
  return PASADA_OK;
}

int pa_gbnf_parse(const char *text, size_t len, pa_gast *ast) {
  return pa_gbnf_parse_vocab(text, len, NULL, ast);
}

int pa_gbnf_parse_vocab(const char *text, size_t len, const pa_tokenizer *tok, pa_gast *ast) {
  memset(ast, 0, sizeof *ast);
  if (len > PA_G_MAX_TEXT)
    return pa_error(PASADA_ERR_ARG, "grammar: %zu bytes is longer than the limit of %u", len,
                    PA_G_MAX_TEXT);
  parser *p = malloc(sizeof *p); /* the name table makes it large */
  if (!p) return pa_error(PASADA_ERR_NOMEM, "grammar: out of memory");
  *p = (parser){.s = text ? text : "", .len = text ? len : 0, .ast = ast, .tok = tok};
  for (int i = 0; i < NAME_SLOTS; i++) p->names[i] = -1;
  ast->src = p->s;
  ast->src_len = p->len;
  skip_space(p, true);
  while (p->pos < p->len && !p->err) parse_rule(p);
  if (!p->err && ast->n_rules == 0) p->err = pa_error(PASADA_ERR_ARG, "grammar: no rules");
  for (int32_t i = 0; i < ast->n_rules && !p->err; i++) {
    const pa_grule *r = &ast->rules[i];
    if (r->expr < 0) {
      int32_t line, col;
      pa_gast_where(ast, r->pos, &line, &col);
      p->err = pa_error(PASADA_ERR_ARG, "grammar: line %d, column %d: rule '%s' is not defined",
                        line, col, r->name);
    }
  }
  int err = p->err;
  free(p);
  if (err) pa_gast_free(ast);
  return err;
}

void pa_gast_free(pa_gast *ast) {
  for (int32_t i = 0; i < ast->n_rules; i++) free(ast->rules[i].name);
  free(ast->rules);
  free(ast->x);
  free(ast->kids);
  free(ast->ranges);
  free(ast->lit);
  memset(ast, 0, sizeof *ast);
}
