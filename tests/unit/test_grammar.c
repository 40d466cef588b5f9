/* test_grammar.c: the GBNF grammar engine without the sampler: the parser
 * (valid grammars, and errors that name the line, column and problem), the
 * matcher on strings against an independent recognizer (each grammar
 * translated to a PCRE2 pattern with subroutine calls: random sentences
 * drawn from the syntax tree and mutations of them must be accepted,
 * completed and rejected alike), and hostile grammars (huge repetitions,
 * left recursion, deep nesting, ambiguity) refused or followed within the
 * limits. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <time.h>

#include "test_grammar_util.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- parser ---- */

static void expect_error(const pasada_tokenizer *tok, const char *gbnf, const char *want) {
  pasada_grammar *g = NULL;
  int st = pasada_grammar_create(tok, gbnf, strlen(gbnf), NULL, &g);
  CHECK(st == PASADA_ERR_ARG && !g, "should fail (%s): %s", want, gbnf);
  if (st == PASADA_ERR_ARG)
    CHECK(strstr(pasada_last_error(), want) != NULL, "error '%s' should say '%s'",
          pasada_last_error(), want);
  pasada_grammar_free(g);
}

static void test_parser(const pasada_tokenizer *tok) {
  static const char *valid[] = {
      "root ::= \"a\"",
      "root ::= \"a\" | \"b\" | \"\"",
      "root ::= (\"a\" \"b\")* \"c\"+ \"d\"? [e-g]{2} [h]{1,} [i]{0,3} [j]{,2}",
      "# comment\nroot ::= x # trailing\nx ::= [^\\n\\t\\]\\-]+\n\n",
      "root ::= (\n  \"a\"\n  | \"b\" # inside a group\n)\n",
      "root ::= \"a\" |\n  \"b\"\n",
      "root ::= \"\\x41\\u00e9\\U0001F600\\\\\\\"\\n\\r\\t\" [\\x00-\\x7F] .",
      "root ::= \"日本\" [ぁ-ゟ]",
      "root ::= value\nvalue ::= \"[\" (value (\",\" value)*)? \"]\" | \"x\"",
      "root ::= a\na ::= b \"x\" | \"y\"\nb ::= \"z\"?",
      "r-1_x ::= \"a\"\nroot ::= r-1_x r-1_x",
      "root ::= \"\"",
  };
  for (size_t i = 0; i < sizeof valid / sizeof valid[0]; i++)
    pasada_grammar_free(compile(tok, valid[i]));

  expect_error(tok, "root ::= \"abc", "line 1, column 10: unterminated literal");
  expect_error(tok, "root ::= x\n", "line 1, column 10: rule 'x' is not defined");
  expect_error(tok, "root ::= \"a\"\nroot ::= \"b\"",
               "line 2, column 1: rule 'root' is defined twice");
  expect_error(tok, "x ::= \"a\"", "no rule 'root'");
  expect_error(tok, "", "no rules");
  expect_error(tok, "root ::= root \"a\" | \"b\"", "'root' is left-recursive");
  expect_error(tok, "root ::= a\na ::= b \"x\"\nb ::= \"\" | a", "left-recursive");
  expect_error(tok, "root ::= \"a\" root", "rule 'root' can never complete");
  expect_error(tok, "root ::= [z-a]", "line 1, column 11: range U+7A-U+61 is empty");
  expect_error(tok, "root ::= \"\\q\"", "line 1, column 11: unknown escape '\\q'");
  expect_error(tok, "root ::= \"\\x4\"", "'\\x' needs 2 hexadecimal digits");
  expect_error(tok, "root ::= \"\\uD800\"", "U+D800 is not a character");
  expect_error(tok, "root ::= \"a\"{3,2}", "the maximum is below the minimum");
  expect_error(tok, "root ::= \"a\"{20000}", "repetition bound above");
  expect_error(tok, "root ::= \"a\"{}", "needs a count");
  expect_error(tok, "root ::= * \"a\"", "line 1, column 10: '*' has nothing before it");
  expect_error(tok, "root ::= \"a\"*****", "repetition operators on one item");
  expect_error(tok, "root ::= (\"a\"", "line 1, column 10: expected ')'");
  expect_error(tok, "root ::= \"a\")", "')' closes no group");
  expect_error(tok, "root ::= \"a\" ::= \"b\"", "expected");
  expect_error(tok, "root = \"a\"", "expected '::=' after the rule name 'root'");
  expect_error(tok, "root ::= \"a\"\n  \"b\"", "line 2, column 3: expected a rule name");
  expect_error(tok, "root ::= <tok>", "line 1, column 10");
  expect_error(tok, "root ::= \"\xC3\"", "invalid UTF-8");
  expect_error(tok, "root ::= a b\n\na ::= \"a\"\nb ::= \"b\" c\n",
               "line 4, column 11: rule 'c' is not defined");
  expect_error(tok, "root ::= [^\\x00-\\U0010FFFF]", "matches no text");
  /* the start rule can be named */
  pasada_grammar *g = NULL;
  CHECK(pasada_grammar_create(tok, "start ::= \"a\"", 13, "start", &g) == PASADA_OK,
        "root 'start': %s", pasada_last_error());
  pasada_grammar_free(g);
}

/* ---- an independent recognizer: the grammar as a PCRE2 pattern ---- */

typedef struct {
  char *s;
  size_t n, cap;
} buf;

static void put(buf *b, const char *s) {
  size_t k = strlen(s);
  if (b->n + k + 1 > b->cap) {
    b->cap = (b->n + k + 1) * 2;
    b->s = realloc(b->s, b->cap);
  }
  memcpy(b->s + b->n, s, k + 1);
  b->n += k;
}

static uint32_t decode(const uint8_t *s, int *len) {
  uint32_t c = s[0];
  int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  if (n > 1) c &= 0x3Fu >> (n - 1);
  for (int i = 1; i < n; i++) c = c << 6 | (s[i] & 0x3F);
  *len = n;
  return c;
}

static void to_pcre(const pa_gast *a, int32_t x, buf *b) {
  const pa_gx *e = &a->x[x];
  char tmp[64];
  switch (e->kind) {
    case PA_GX_SEQ:
      put(b, "(?:");
      for (int32_t i = 0; i < e->count; i++) to_pcre(a, a->kids[e->first + i], b);
      put(b, ")");
      break;
    case PA_GX_ALT:
      put(b, "(?:");
      for (int32_t i = 0; i < e->count; i++) {
        if (i) put(b, "|");
        to_pcre(a, a->kids[e->first + i], b);
      }
      put(b, ")");
      break;
    case PA_GX_REPEAT:
      put(b, "(?:");
      to_pcre(a, e->child, b);
      if (e->max < 0)
        snprintf(tmp, sizeof tmp, "){%d,}", e->min);
      else
        snprintf(tmp, sizeof tmp, "){%d,%d}", e->min, e->max);
      put(b, tmp);
      break;
    case PA_GX_CHARS:
      if (!e->count) {
        put(b, "(?s:.)");
        break;
      }
      put(b, e->negated ? "[^" : "[");
      for (int32_t i = 0; i < e->count; i++) {
        snprintf(tmp, sizeof tmp, "\\x{%X}-\\x{%X}", a->ranges[2 * (e->first + i)],
                 a->ranges[2 * (e->first + i) + 1]);
        put(b, tmp);
      }
      put(b, "]");
      break;
    case PA_GX_LITERAL:
      put(b, "(?:");
      for (int32_t i = 0; i < e->count;) {
        int len;
        uint32_t c = decode(a->lit + e->first + i, &len);
        snprintf(tmp, sizeof tmp, "\\x{%X}", c);
        put(b, tmp);
        i += len;
      }
      put(b, ")");
      break;
    case PA_GX_REF:
      snprintf(tmp, sizeof tmp, "(?&r%d)", e->rule);
      put(b, tmp);
      break;
  }
}

static pcre2_code *pattern_of(const pa_gast *a, int32_t root) {
  buf b = {0};
  put(&b, "(?(DEFINE)");
  for (int32_t r = 0; r < a->n_rules; r++) {
    char tmp[32];
    snprintf(tmp, sizeof tmp, "(?<r%d>", r);
    put(&b, tmp);
    to_pcre(a, a->rules[r].expr, &b);
    put(&b, ")");
  }
  char tmp[48];
  snprintf(tmp, sizeof tmp, ")\\A(?&r%d)\\z", root);
  put(&b, tmp);
  int err;
  PCRE2_SIZE off;
  pcre2_code *re = pcre2_compile((PCRE2_SPTR)b.s, b.n, PCRE2_UTF, &err, &off, NULL);
  CHECK(re != NULL, "pcre2 pattern of the grammar: error %d at %zu: %s", err, (size_t)off, b.s);
  free(b.s);
  return re;
}

/* 1: the whole text matches, 2: it is a prefix of a match, 0: neither, -1:
 * undecided (the match limit). */
static int pcre_verdict(pcre2_code *re, pcre2_match_context *mc, const char *s, size_t n) {
  pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
  int rc = pcre2_match(re, (PCRE2_SPTR)s, n, 0, 0, md, mc);
  int v = rc >= 0 ? 1 : rc == PCRE2_ERROR_NOMATCH ? 0 : -1;
  if (v == 0) {
    rc = pcre2_match(re, (PCRE2_SPTR)s, n, 0, PCRE2_PARTIAL_HARD, md, mc);
    v = rc >= 0 || rc == PCRE2_ERROR_PARTIAL ? 2 : rc == PCRE2_ERROR_NOMATCH ? 0 : -1;
  }
  pcre2_match_data_free(md);
  return v;
}

/* ---- random sentences from the syntax tree ---- */

static void put_cp(buf *b, uint32_t c) {
  char u[5] = {0};
  if (c < 0x80)
    u[0] = (char)c;
  else if (c < 0x800)
    u[0] = (char)(0xC0 | c >> 6), u[1] = (char)(0x80 | (c & 0x3F));
  else if (c < 0x10000)
    u[0] = (char)(0xE0 | c >> 12), u[1] = (char)(0x80 | (c >> 6 & 0x3F)),
    u[2] = (char)(0x80 | (c & 0x3F));
  else
    u[0] = (char)(0xF0 | c >> 18), u[1] = (char)(0x80 | (c >> 12 & 0x3F)),
    u[2] = (char)(0x80 | (c >> 6 & 0x3F)), u[3] = (char)(0x80 | (c & 0x3F));
  put(b, u);
}

/* A code point in (or outside) the class, found by trying; false if none found. */
static bool pick_char(const pa_gast *a, const pa_gx *e, uint32_t *out) {
  static const uint32_t probes[] = {'a',  'z',    '0',     '"', '\\', ' ', '\n',
                                    0xE9, 0x65E5, 0x1F600, '{', 0x7F, 1};
  for (int attempt = 0; attempt < 64; attempt++) {
    uint32_t c;
    if (!e->negated && e->count && attempt < 48) {
      int32_t i = e->first + (int32_t)(rng() % (uint64_t)e->count);
      uint32_t lo = a->ranges[2 * i], hi = a->ranges[2 * i + 1];
      c = lo + (uint32_t)(rng() % (uint64_t)(hi - lo + 1));
    } else {
      c = attempt < 13 ? probes[attempt] : (uint32_t)(rng() % 0x3000);
    }
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    bool in = false;
    for (int32_t i = 0; i < e->count && !in; i++)
      in = c >= a->ranges[2 * (e->first + i)] && c <= a->ranges[2 * (e->first + i) + 1];
    if (in != e->negated) return *out = c, true;
  }
  return false;
}

static bool generate(const pa_gast *a, int32_t x, buf *b, int depth, int *budget) {
  if (--*budget < 0 || depth > 40) return false;
  const pa_gx *e = &a->x[x];
  switch (e->kind) {
    case PA_GX_SEQ:
      for (int32_t i = 0; i < e->count; i++)
        if (!generate(a, a->kids[e->first + i], b, depth + 1, budget)) return false;
      return true;
    case PA_GX_ALT: {
      /* deep down, prefer the later alternatives (usually the base cases) */
      int32_t i = depth > 12 ? e->count - 1 : (int32_t)(rng() % (uint64_t)e->count);
      return generate(a, a->kids[e->first + i], b, depth + 1, budget);
    }
    case PA_GX_REPEAT: {
      int32_t hi = e->max < 0 ? e->min + 3 : e->max;
      if (depth > 12) hi = e->min;
      int32_t k = e->min + (int32_t)(rng() % (uint64_t)(hi - e->min + 1));
      for (int32_t i = 0; i < k; i++)
        if (!generate(a, e->child, b, depth + 1, budget)) return false;
      return true;
    }
    case PA_GX_CHARS: {
      uint32_t c;
      if (!pick_char(a, e, &c)) return false;
      put_cp(b, c);
      return true;
    }
    case PA_GX_LITERAL: {
      char *s = malloc((size_t)e->count + 1);
      memcpy(s, a->lit + e->first, (size_t)e->count);
      s[e->count] = 0;
      put(b, s);
      free(s);
      return true;
    }
    case PA_GX_REF:
      return generate(a, a->rules[e->rule].expr, b, depth + 1, budget);
  }
  return false;
}

/* A random edit at a character boundary. */
static void mutate(buf *b) {
  static const char *ins[] = {"a", "\"", "{", "}", ",", " ", "1", "\xC3\xA9", "\\", "]", "x", "-"};
  size_t cuts[256], nc = 0;
  for (size_t i = 0; i <= b->n && nc < 256; i++)
    if (i == b->n || ((unsigned char)b->s[i] & 0xC0) != 0x80) cuts[nc++] = i;
  size_t at = cuts[rng() % nc];
  int op = (int)(rng() % 3);
  char *out = malloc(b->n + 8);
  size_t n = 0;
  memcpy(out, b->s, at);
  n = at;
  size_t skip = at;
  if (op != 0 && at < b->n) { /* delete or replace one character */
    skip++;
    while (skip < b->n && ((unsigned char)b->s[skip] & 0xC0) == 0x80) skip++;
  }
  if (op != 1) {
    const char *s = ins[rng() % (sizeof ins / sizeof ins[0])];
    memcpy(out + n, s, strlen(s));
    n += strlen(s);
  }
  memcpy(out + n, b->s + skip, b->n - skip);
  n += b->n - skip;
  out[n] = 0;
  free(b->s);
  b->s = out;
  b->n = n;
  b->cap = n + 8;
}

/* The matcher's verdict: 1 complete, 2 a live prefix, 0 rejected. */
static int matcher_verdict(const pasada_grammar *g, const char *s, size_t n) {
  pa_gmatcher *m;
  if (pa_gmatcher_create(g, &m)) return -2;
  int v = !pa_gmatcher_accept_bytes(m, (const uint8_t *)s, n) ? 0 : pa_gmatcher_can_end(m) ? 1 : 2;
  pa_gmatcher_free(m);
  return v;
}

static const char *grammars[] = {
    TEST_GBNF_JSON,
    /* arithmetic (recursion in the middle) */
    "root ::= expr\nexpr ::= term ([-+*/] term)*\nterm ::= num | \"(\" space expr \")\" space\n"
    "num ::= [0-9]+ space\nspace ::= [ \\t\\n]*\n",
    /* right recursion, nullable rules called in loops, optional ambiguity */
    "root ::= a\na ::= \"x\" a | \"y\" b | \"\"\nb ::= e* \"z\"? a\ne ::= \"\" | \"w\"\n",
    /* ambiguous alternatives */
    "root ::= (\"ab\" | \"a\" \"b\" | \"a\" [b-c])+ (\"c\" | \"bc\")?\n",
    /* counted repetitions and any character */
    "root ::= [a-c]{2,4} . \"-\" ([0-9]{3} | \"x\"{0,2}) [^a-z\\n]{1,3}\n",
    /* unicode classes */
    "root ::= ([ぁ-ゟ] | [\\u00e0-\\u00ff] | [\\U0001F600-\\U0001F64F] | \"日本\")+ \"!\"\n",
    /* nested recursion (balanced brackets) */
    "root ::= item*\nitem ::= \"(\" item* \")\" | \"[\" item* \"]\" | \"x\"\n",
    /* chess-like, from the GBNF guide */
    "root ::= \"1. \" move \" \" move \"\\n\" ([1-9] [0-9]? \". \" move \" \" move \"\\n\")+\n"
    "move ::= (pawn | nonpawn | castle) [+#]?\npawn ::= [a-h] [1-8]\n"
    "nonpawn ::= [NBKQR] [a-h]? [1-8]? \"x\"? [a-h] [1-8]\ncastle ::= \"O-O\" \"-O\"?\n",
};

static void test_against_pcre(const pasada_tokenizer *tok) {
  pcre2_match_context *mc = pcre2_match_context_create(NULL);
  pcre2_set_match_limit(mc, 200000);
  const int rounds = test_reps(150, 20);
  for (size_t gi = 0; gi < sizeof grammars / sizeof grammars[0]; gi++) {
    const char *text = grammars[gi];
    pasada_grammar *g = compile(tok, text);
    pa_gast ast;
    if (!g || pa_gbnf_parse(text, strlen(text), &ast)) {
      pasada_grammar_free(g);
      continue;
    }
    int32_t root = pa_gast_find(&ast, "root");
    pcre2_code *re = pattern_of(&ast, root);
    int compared = 0, complete = 0, prefix = 0, rejected = 0;
    /* the drawn rounds, then more until the floor below is met (a small
     * PASADA_TEST_SCALE can draw too few by chance) */
    for (int r = 0; re && (r < rounds ||
                           ((compared <= 50 || complete <= 5 || rejected <= 5) && r < 20 * rounds));
         r++) {
      buf b = {0};
      put(&b, "");
      int budget = 400;
      if (!generate(&ast, ast.rules[root].expr, &b, 0, &budget)) {
        free(b.s);
        continue;
      }
      CHECK(matcher_verdict(g, b.s, b.n) == 1,
            "grammar %zu: a sentence it generates is not accepted: '%s'", gi, b.s);
      for (int k = 0; k < 4; k++) {
        if (k) mutate(&b);
        /* every prefix at a character boundary too */
        for (size_t cut = 0; cut <= b.n; cut++) {
          if (cut < b.n && ((unsigned char)b.s[cut] & 0xC0) == 0x80) continue;
          if (cut < b.n && rng() % 4) continue;
          int want = pcre_verdict(re, mc, b.s, cut);
          if (want < 0) continue;
          int got = matcher_verdict(g, b.s, cut);
          CHECK(got == want,
                "grammar %zu: '%.*s': matcher %d, pcre2 %d (1 complete, 2 prefix, 0 no)", gi,
                (int)cut, b.s, got, want);
          compared++;
          complete += want == 1, prefix += want == 2, rejected += want == 0;
        }
      }
      free(b.s);
    }
    printf("grammar %zu: %d strings compared with pcre2 (%d complete, %d prefixes, %d rejected)\n",
           gi, compared, complete, prefix, rejected);
    CHECK(compared > 50 && complete > 5 && rejected > 5, "grammar %zu: too few comparisons", gi);
    pcre2_code_free(re);
    pa_gast_free(&ast);
    pasada_grammar_free(g);
  }
  pcre2_match_context_free(mc);
}

/* ---- known answers ---- */

static void test_strings(const pasada_tokenizer *tok) {
  static const struct {
    const char *gbnf, *text;
    int want; /* 1 complete, 2 prefix, 0 rejected */
  } cases[] = {
      {"root ::= \"ab\"", "ab", 1},
      {"root ::= \"ab\"", "a", 2},
      {"root ::= \"ab\"", "abc", 0},
      {"root ::= \"ab\"", "", 2},
      {"root ::= \"\"", "", 1},
      {"root ::= [a-c]+", "abcab", 1},
      {"root ::= [^a-c]+", "xyz", 1},
      {"root ::= [^a-c]+", "xaz", 0},
      {"root ::= .", "\xE6\x97\xA5", 1},     /* 日: one character, three bytes */
      {"root ::= .", "\xE6\x97", 2},         /* a character cut short */
      {"root ::= .", "\xE6\x97\xA5\xE6", 0}, /* more than one */
      {"root ::= .", "\xED\xA0\x80", 0},     /* a surrogate is not UTF-8 */
      {"root ::= .", "\xC0\xAF", 0},         /* overlong */
      {"root ::= [\\u00e9]", "\xC3\xA9", 1},
      {"root ::= \"\\U0001F600\"", "\xF0\x9F\x98\x80", 1},
      {"root ::= \"a\"{2,3}", "aaa", 1},
      {"root ::= \"a\"{2,3}", "aaaa", 0},
      {"root ::= \"a\"{2,}", "aaaaaaa", 1},
      {"root ::= x x\nx ::= \"(\" x \")\" | \"\"", "(())()", 1},
      {"root ::= x x\nx ::= \"(\" x \")\" | \"\"", "(()))", 0},
      {"root ::= x\nx ::= \"(\" x \")\" | \"\"", "((((((", 2},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    pasada_grammar *g = compile(tok, cases[i].gbnf);
    if (!g) continue;
    int got = matcher_verdict(g, cases[i].text, strlen(cases[i].text));
    CHECK(got == cases[i].want, "%s on '%s': %d, want %d", cases[i].gbnf, cases[i].text, got,
          cases[i].want);
    pasada_grammar_free(g);
  }
}

/* ---- hostile grammars ---- */

static void test_hostile(const pasada_tokenizer *tok) {
  /* expansion past the limits: refused, quickly */
  double t0 = now_s();
  expect_error(tok, "root ::= ((\"a\"{1000}){1000}){1000}", "exceeds");
  CHECK(now_s() - t0 < 5.0, "refusing huge repetitions took %.1f s", now_s() - t0);
  /* nested through calls, each rule stays small: compiled, followed */
  t0 = now_s();
  pasada_grammar *nested = compile(tok, "root ::= x{10000}\nx ::= y{10000}\ny ::= \"a\"{10000}");
  if (nested) CHECK(matcher_verdict(nested, "aaaa", 4) == 2, "nested repetitions: a prefix");
  pasada_grammar_free(nested);
  CHECK(now_s() - t0 < 5.0, "nested repetitions took %.1f s", now_s() - t0);
  /* deep nesting: refused past the limit, no stack overflow */
  buf b = {0};
  put(&b, "root ::= ");
  for (int i = 0; i < 5000; i++) put(&b, "(");
  put(&b, "\"a\"");
  for (int i = 0; i < 5000; i++) put(&b, ")");
  expect_error(tok, b.s, "nested deeper than");
  /* a long chain of rules, each calling the next */
  b.n = 0;
  for (int i = 0; i < 3000; i++) {
    char line[64];
    snprintf(line, sizeof line, "%s ::= \"x\" r%d\n", i ? "" : "root", i + 1);
    if (i) snprintf(line, sizeof line, "r%d ::= \"x\" r%d | \"y\"\n", i, i + 1);
    put(&b, line);
  }
  put(&b, "r3000 ::= \"z\"\n");
  t0 = now_s();
  pasada_grammar *g = compile(tok, b.s);
  CHECK(now_s() - t0 < 5.0, "a chain of 3000 rules took %.1f s", now_s() - t0);
  if (g) CHECK(matcher_verdict(g, "xxxxy", 5) == 1, "chain: xxxxy");
  pasada_grammar_free(g);
  /* too many rules */
  b.n = 0;
  put(&b, "root ::= \"a\"\n");
  for (int i = 0; i < 5000; i++) {
    char line[64];
    snprintf(line, sizeof line, "u%d ::= \"a\"\n", i);
    put(&b, line);
  }
  expect_error(tok, b.s, "more than 4096 rules");
  /* mutual left recursion through nullable prefixes */
  expect_error(tok, "root ::= a\na ::= n b\nb ::= n n a \"x\" | \"y\"\nn ::= \"\" | \"q\"",
               "left-recursive");
  /* exponential ambiguity: followed within the limits (an error, never a hang) */
  g = compile(tok, "root ::= x*\nx ::= \"a\" | \"a\" \"a\" | y\ny ::= \"a\" x | \"a\"");
  if (g) {
    char s[200];
    memset(s, 'a', sizeof s);
    t0 = now_s();
    int v = matcher_verdict(g, s, sizeof s);
    CHECK(v == 1 || v == 0, "ambiguous grammar: verdict %d", v);
    CHECK(now_s() - t0 < 5.0, "ambiguous grammar took %.1f s", now_s() - t0);
  }
  pasada_grammar_free(g);
  /* text over the size limit */
  char *big = malloc(PA_G_MAX_TEXT + 2);
  memset(big, '#', PA_G_MAX_TEXT + 1);
  big[PA_G_MAX_TEXT + 1] = 0;
  g = NULL;
  CHECK(pasada_grammar_create(tok, big, PA_G_MAX_TEXT + 1, NULL, &g) == PASADA_ERR_ARG,
        "a text over the limit");
  free(big);
  free(b.s);
}

int main(void) {
  test_seed("test_grammar");
  pa_tokenizer *tok = synthetic_vocab(400);
  if (!tok) return 1;
  test_parser(tok);
  test_strings(tok);
  test_against_pcre(tok);
  test_hostile(tok);
  pa_tokenizer_free(tok);
  if (failures) fprintf(stderr, "test_grammar: %d failures\n", failures);
  return failures ? 1 : 0;
}
