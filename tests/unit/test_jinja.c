/* test_jinja.c: the Jinja template engine (src/template) piece by piece:
 * Python's float repr and str/repr of values, the JSON reader and the
 * tojson writer (floats, escapes, unicode, indent, separators, sort_keys),
 * the lexer's whitespace control, expressions and operators, filters,
 * tests, macros, loops and scoping, syntax errors with their line, renders
 * on several threads at once, and untrusted templates (endless recursion,
 * huge ranges, output that multiplies, deep nesting, unterminated tags,
 * random bytes) that must fail quickly within the limits. The e2e test
 * (test_templates.py) holds the engine against jinja2 on real templates. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pasada.h"
#include "template/tpl.h"
#include "test_check.h"
#include "test_util.h"

static const char *CTX =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"S\"}, {\"role\": \"user\", \"content\": "
    "\"h\\u00e9 <b>\"}], \"l\": [3, 1, 2], \"d\": {\"b\": 2, \"a\": 1}, \"s\": \"  Hi there  \", "
    "\"f\": 2.5, \"n\": null, \"u\": \"\\u65e5\\u672c\\ud83d\\ude42\", \"x\": 1500.0, \"e\": []}";

/* Renders src with the variables; the output (malloc'd) or NULL with *rc. */
static char *render(const char *src, const char *vars, int *rc) {
  pasada_template *t = NULL;
  char *out = NULL;
  *rc = pasada_template_parse(src, strlen(src), &t);
  if (*rc == PASADA_OK) *rc = pasada_template_render(t, vars, strlen(vars), &out);
  pasada_template_free(t);
  return out;
}

static void expect(const char *src, const char *want) {
  int rc;
  char *out = render(src, CTX, &rc);
  CHECK(rc == PASADA_OK && out && strcmp(out, want) == 0, "%s\n  got  '%s' (%s)\n  want '%s'", src,
        out ? out : "(error)", rc ? pasada_last_error() : "", want);
  pasada_text_free(out);
}

/* A template that must fail (parse: PASADA_ERR_FORMAT, render:
 * PASADA_ERR_ARG) with `part` in its one-line message, within `seconds`. */
static void expect_error_n(const char *src, size_t len, int want_rc, const char *part,
                           double seconds) {
  const double t0 = pa_time_s();
  pasada_template *t = NULL;
  char *out = NULL;
  int rc = pasada_template_parse(src, len, &t);
  if (rc == PASADA_OK) rc = pasada_template_render(t, CTX, strlen(CTX), &out);
  const double took = pa_time_s() - t0;
  const char *msg = pasada_last_error();
  CHECK(rc == want_rc && !out, "%.60s: rc %d (want %d)", src, rc, want_rc);
  CHECK(!part || strstr(msg, part), "%.60s: message '%s' lacks '%s'", src, msg, part);
  CHECK(!strchr(msg, '\n'), "%.60s: message on more than one line: '%s'", src, msg);
  CHECK(took < seconds, "%.60s: took %.2f s (limit %.1f)", src, took, seconds);
  pasada_text_free(out);
  pasada_template_free(t);
}

static void expect_error(const char *src, int want_rc, const char *part, double seconds) {
  expect_error_n(src, strlen(src), want_rc, part, seconds);
}

static void test_float_repr(void) {
  static const struct {
    double v;
    const char *want;
  } cases[] = {{0.1, "0.1"},
               {1e-05, "1e-05"},
               {0.0001, "0.0001"},
               {1e16, "1e+16"},
               {1e15, "1000000000000000.0"},
               {123456789.123, "123456789.123"},
               {-0.0, "-0.0"},
               {1.0, "1.0"},
               {2.5e-7, "2.5e-07"},
               {1e22, "1e+22"},
               {5e-324, "5e-324"},
               {1.7976931348623157e308, "1.7976931348623157e+308"},
               {0.30000000000000004, "0.30000000000000004"},
               {1.5, "1.5"},
               {-123.0, "-123.0"},
               {INFINITY, "inf"},
               {-INFINITY, "-inf"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char buf[40];
    tpl_float_repr(cases[i].v, buf);
    CHECK(!strcmp(buf, cases[i].want), "repr(%.17g): got %s, want %s", cases[i].v, buf,
          cases[i].want);
  }
  char buf[40];
  tpl_float_repr(NAN, buf);
  CHECK(!strcmp(buf, "nan"), "repr(nan): %s", buf);
}

static void test_json(void) {
  /* the reader keeps order, ints and floats apart, unicode escapes */
  expect("{{ x }}|{{ l }}|{{ d }}|{{ n }}|{{ u }}|{{ f }}",
         "1500.0|[3, 1, 2]|{'b': 2, 'a': 1}|None|日本🙂|2.5");
  /* the writer: json.dumps byte for byte */
  expect("{{ d | tojson }}", "{\"b\": 2, \"a\": 1}");
  expect("{{ d | tojson(indent=2) }}", "{\n  \"b\": 2,\n  \"a\": 1\n}");
  expect("{{ d | tojson(sort_keys=true) }}", "{\"a\": 1, \"b\": 2}");
  expect("{{ [1, [2, {}], []] | tojson(indent=1) }}", "[\n 1,\n [\n  2,\n  {}\n ],\n []\n]");
  expect("{{ l | tojson(separators=(',', ':')) }}", "[3,1,2]");
  expect("{{ l | tojson(indent='\\t') }}", "[\n\t3,\n\t1,\n\t2\n]");
  expect("{{ [0.1, 1e-05, 1e16, 1500.0, -0.0, 3] | tojson }}",
         "[0.1, 1e-05, 1e+16, 1500.0, -0.0, 3]");
  expect("{{ u | tojson }}|{{ u | tojson(ensure_ascii=true) }}",
         "\"日本🙂\"|\"\\u65e5\\u672c\\ud83d\\ude42\"");
  expect("{{ '\"q\"\\n\\t\\\\ \\x01 </x>' | tojson }}", "\"\\\"q\\\"\\n\\t\\\\ \\u0001 </x>\"");
  expect("{{ {1: 'a', none: 'b', true: 'c', 2.5: 'd'} | tojson }}",
         "{\"1\": \"c\", \"null\": \"b\", \"2.5\": \"d\"}"); /* True == 1: one key */
  expect("{{ (1, 'a') | tojson }}|{{ true | tojson }}|{{ none | tojson }}", "[1, \"a\"]|true|null");
  expect_error("{{ missing | tojson }}", PASADA_ERR_ARG, "not JSON serializable", 5);
  expect_error("{{ l | map('string') | tojson }}", PASADA_ERR_ARG, "generator", 5);
  /* the filters over sequences on values that are not one: an error, no
   * release of a list never made */
  const char *filters[] = {"select",
                           "reject",
                           "selectattr('a')",
                           "rejectattr('a', 'eq', 1)",
                           "map('string')",
                           "map(attribute='a')",
                           "unique",
                           "sort",
                           "join",
                           "sum",
                           "min",
                           "max",
                           "first",
                           "last",
                           "list",
                           "batch(2)",
                           "slice(2)",
                           "groupby('a')",
                           "dictsort"};
  for (size_t i = 0; i < sizeof filters / sizeof filters[0]; i++) {
    char src[160];
    snprintf(src, sizeof src, "{%% set ns = namespace(n=1) %%}{{ ns | %s | list }}", filters[i]);
    expect_error(src, PASADA_ERR_ARG, "", 5);
  }
  /* bad variables */
  int rc;
  pasada_template *t = NULL;
  char *out = NULL;
  CHECK(pasada_template_parse("x", 1, &t) == PASADA_OK, "parse");
  const char *bad[] = {"[1]",
                       "{\"a\": }",
                       "{\"a\": \"\\ud800\"}",
                       "{\"a\": 1} x",
                       "{\"a\": \"\xff\"}",
                       "",
                       "{\"a\": 99999999999999999999}"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    rc = pasada_template_render(t, bad[i], strlen(bad[i]), &out);
    CHECK(rc == PASADA_ERR_ARG && !out, "variables '%s' accepted", bad[i]);
  }
  char deep[3000];
  memset(deep, '[', sizeof deep);
  rc = pasada_template_render(t, deep, sizeof deep, &out);
  CHECK(rc == PASADA_ERR_ARG && strstr(pasada_last_error(), "deep"), "deep JSON: %s",
        pasada_last_error());
  pasada_template_free(t);
}

static void test_whitespace(void) {
  expect("a  {%- if true -%}  b  {%- endif -%}  c", "abc");
  expect("  {% if true %}\n    x\n  {% endif %}\n  y", "    x\n  y");
  expect("<{% if true %}\na{% endif %}\n>", "<a>");
  expect("  {%+ if true %}k{% endif %}", "  k");
  expect("a{# c #}\nb\n  {# lstripped #}\nc", "ab\nc");
  expect("{% raw %}{{ x }}{% endraw %}", "{{ x }}");
  expect("x {%- raw %} r {% endraw -%} y", "x r y");
  expect("{{ 'a' -}}\n\n   {{- 'b' }}", "ab");
  expect("{% for i in l %}\n{{ i }}\n{% endfor %}", "3\n1\n2\n");
  expect("line\r\nnext\rlast\n", "line\nnext\nlast");
  expect("{{ 'a\\tb\\u00e9\\x41\\101' }}|{{ 'a' 'b' }}", "a\tbéAA|ab");
}

static void test_expressions(void) {
  expect(
      "{{ 7 / 2 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ -7 % 3 }}|{{ 7.5 % 2 }}|{{ 2 ** 10 }}|{{ 4 / 2 }}",
      "3.5|3|-4|2|1.5|1024|2.0");
  expect("{{ 1 + 2 * 3 - 4 }}|{{ -2 ** 2 }}|{{ 2 ** 3 ** 2 }}|{{ 10 - 2 - 3 }}", "3|4|64|5");
  expect("{{ 'ab' * 3 }}|{{ [1] * 2 }}|{{ 'a' ~ 1 ~ none ~ true }}|{{ [1] + [2] }}",
         "ababab|[1, 1]|a1NoneTrue|[1, 2]");
  expect(
      "{{ 1 == 1.0 }}|{{ 1 < 2 < 3 }}|{{ 3 > 2 > 2 }}|{{ 'x' in 'xyz' }}|{{ 5 not in l }}|{{ 'a' "
      "in d }}",
      "True|True|False|True|True|True");
  expect(
      "{{ not l }}|{{ 0 or none or 'z' }}|{{ 1 and 2 }}|{{ 'y' if f > 2 else 'n' }}|{{ 'q' if "
      "false }}",
      "False|z|2|y|");
  expect(
      "{{ l[-1] }}|{{ l[1:] }}|{{ l[::-1] }}|{{ u[1:] }}|{{ s[2:4] }}|{{ l[9] }}|{{ (1,) }}|{{ () "
      "}}",
      "2|[1, 2]|[2, 1, 3]|本🙂|Hi||(1,)|()");
  expect(
      "{{ messages[1].content }}|{{ messages[0]['role'] }}|{{ d.a }}|{{ d['b'] }}|{{ "
      "messages.0.role }}",
      "hé <b>|system|1|2|system");
  expect("{{ [u, \"it's\", 'say \"hi\"', '\\x00\\n'] }}",
         "['日本🙂', \"it's\", 'say \"hi\"', '\\x00\\n']");
  expect("{{ d.items() }}|{{ d.get('z', 0) }}|{{ d.get('a') }}|{{ d.keys() | list }}",
         "dict_items([('b', 2), ('a', 1)])|0|1|['b', 'a']");
  expect("{{ '%s=%d %.2f %5s|%-3s|%05d %x' % ('a', 3, 2.5, 'r', 'l', 42, 255) }}",
         "a=3 2.50     r|l  |00042 ff");
  expect("{{ '{} {:>4} {x} {0}'.format(1, 'b', x=2) }}|{{ '{:,}'.format(1234567) }}",
         "1    b 2 1|1,234,567");
  expect(
      "{{ s.strip() }}|{{ s.split() }}|{{ 'a,b'.split(',') }}|{{ s.upper() }}|{{ 'x y'.title() }}",
      "Hi there|['Hi', 'there']|['a', 'b']|  HI THERE  |X Y");
  expect(
      "{{ s.startswith('  H') }}|{{ s.find('t') }}|{{ 'aXa'.replace('a', 'b') }}|{{ ', "
      "'.join(['a', 'b']) }}",
      "True|5|bXb|a, b");
  expect("{{ '<' | safe + '<' }}|{{ '<b>' | e }}", "<&lt;|&lt;b&gt;");
}

static void test_filters(void) {
  expect(
      "{{ l | sort }}|{{ l | sort(reverse=true) }}|{{ ['b', 'A', 'a'] | sort }}|{{ l | min }}|{{ l "
      "| max }}",
      "[1, 2, 3]|[3, 2, 1]|['A', 'a', 'b']|1|3");
  expect(
      "{{ l | join(', ') }}|{{ l | first }}|{{ l | last }}|{{ l | length }}|{{ u | length }}|{{ e "
      "| first }}",
      "3, 1, 2|3|2|3|3|");
  expect("{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | list }}",
         "['hé <b>']");
  expect(
      "{{ messages | rejectattr('role', 'eq', 'user') | list | length }}|{{ l | select('odd') | "
      "list }}",
      "1|[3, 1]");
  expect(
      "{{ ['a', 'A', 'b'] | unique | list }}|{{ l | sum }}|{{ d | dictsort }}|{{ d | items | list "
      "}}",
      "['a', 'b']|6|[('a', 1), ('b', 2)]|[('b', 2), ('a', 1)]");
  expect("{{ missing | default('x') }}|{{ '' | default('y', true) }}|{{ n | default('z') }}",
         "x|y|None");
  expect(
      "{{ '3' | int + 1 }}|{{ '3.7' | int }}|{{ 'q' | int(5) }}|{{ '2.5' | float }}|{{ 2.567 | "
      "round(2) }}|{{ 2.5 | round }}",
      "4|3|5|2.5|2.57|2.0");
  expect("{{ 'a\\nb' | indent(2) }}|{{ 'a\\n' | indent }}|{{ 'x' | indent(2, true) }}",
         "a\n  b|a\n|  x");
  expect(
      "{{ s | trim }}|{{ '--a--' | trim('-') }}|{{ 'hi-there you' | title }}|{{ 'hELLO' | "
      "capitalize }}",
      "Hi there|a|Hi-There You|Hello");
  expect(
      "{{ 'aXbX' | replace('X', '-') }}|{{ 'abc' | reverse }}|{{ l | reverse | list }}|{{ 'a b  c' "
      "| wordcount }}",
      "a-b-|cba|[2, 1, 3]|3");
  expect(
      "{{ l | map('string') | join }}|{{ 'x%sy' | format(1) }}|{{ 'hello world' | truncate(8) "
      "}}|{{ 'hello world' | truncate(8, leeway=0) }}",
      "312|x1y|hello world|hello...");
  expect(
      "{% set g = l | map('string') %}{{ g | list }}{{ g | list }}|{% if e | select %}gen{% endif "
      "%}",
      "['3', '1', '2'][]|gen");
  expect_error("{{ l | nosuchfilter }}", PASADA_ERR_FORMAT, "No filter named 'nosuchfilter'", 5);
  /* a type letter that is not a number format: an error, for ints and floats */
  expect_error("{{ '{:>q}'.format(1) }}", PASADA_ERR_ARG, "Unknown format code 'q'", 5);
  expect_error("{{ '{:.2y}'.format(1.5) }}", PASADA_ERR_ARG, "Unknown format code 'y'", 5);
  expect_error("{{ '{:5k}'.format(True) }}", PASADA_ERR_ARG, "Unknown format code 'k'", 5);
  expect("{% if false %}{{ l | nosuchfilter }}{% endif %}ok", "ok");
}

static void test_tests(void) {
  expect(
      "{{ missing is defined }}|{{ n is none }}|{{ d is mapping }}|{{ l is sequence }}|{{ s is "
      "string }}",
      "False|True|True|True|True");
  expect(
      "{{ 4 is divisibleby 2 }}|{{ 3 is odd }}|{{ 2 is even }}|{{ 1 is number }}|{{ f is float "
      "}}|{{ 1 is integer }}",
      "True|True|True|True|True|True");
  expect(
      "{{ true is boolean }}|{{ false is false }}|{{ 1 is true }}|{{ 2 is in l }}|{{ 'a' is eq 'a' "
      "}}|{{ range is callable }}",
      "True|True|False|True|True|True");
  expect("{{ d.zz is undefined }}|{{ l.append is defined }}|{{ messages[0].role is string }}",
         "True|False|True");
}

static void test_statements(void) {
  expect(
      "{% for x in l %}{{ loop.index }}{{ loop.first }}{{ loop.last }}{{ loop.revindex }}{{ "
      "loop.length }};{% endfor %}",
      "1TrueFalse33;2FalseFalse23;3FalseTrue13;");
  expect(
      "{% for x in l %}{{ loop.previtem }}/{{ loop.nextitem }}/{{ loop.cycle('a', 'b') }};{% "
      "endfor %}",
      "/1/a;3/2/b;1//a;");
  expect(
      "{% for x in e %}no{% else %}empty{% endfor %}|{% for x in l if x > 1 %}{{ x }}{{ loop.index "
      "}}{% endfor %}",
      "empty|3122");
  expect("{% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %}", "b=2,a=1,");
  expect(
      "{% for x in l %}{% if x == 1 %}{% continue %}{% endif %}{% if x == 2 %}{% break %}{% endif "
      "%}{{ x }}{% endfor %}",
      "3");
  expect(
      "{% set x = 1 %}{% for i in l %}{% set x = i %}{% endfor %}{{ x }}|"
      "{% set ns = namespace(t=0) %}{% for i in l %}{% set ns.t = ns.t + i %}{% endfor %}{{ ns.t "
      "}}",
      "1|6");
  expect(
      "{% set a, b = 1, 2 %}{{ a + b }}|{% set blk %} in {{ f }} {% endset %}[{{ blk }}]|"
      "{% set up | upper %}abc{% endset %}{{ up }}",
      "3|[ in 2.5 ]|ABC");
  expect(
      "{% macro m(a, b=2, c='x') %}{{ a }}-{{ b }}-{{ c }}{% endmacro %}{{ m(1) }}|{{ m(1, 3) "
      "}}|{{ m(1, c='y') }}|{{ m() }}",
      "1-2-x|1-3-x|1-2-y|-2-x");
  expect("{% macro v() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ v(1, 2, k=3) }}",
         "(1, 2){'k': 3}");
  expect(
      "{% macro w(t) %}<{{ caller(t) }}>{% endmacro %}{% call(x) w('in') %}[{{ x }}]{% endcall %}",
      "<[in]>");
  expect("{% macro r(n) %}{% if n > 0 %}{{ n }}{{ r(n - 1) }}{% endif %}{% endmacro %}{{ r(4) }}",
         "4321");
  expect("{% set x = 1 %}{% macro m() %}{{ x }}{% endmacro %}{% set x = 2 %}{{ m() }}", "2");
  expect("{% filter upper %}hi {{ f }}{% endfilter %}|{% with a = 1 %}{{ a }}{% endwith %}{{ a }}",
         "HI 2.5|1");
  expect("{% generation %}g{{ 1 }}{% endgeneration %}", "g1");
  expect(
      "{% for i in [[1, [2]], 3] recursive %}{% if i is iterable %}{{ loop(i) }}{% else %}{{ i "
      "}}{{ loop.depth }}{% endif %}{% endfor %}",
      "122331");
  expect(
      "{{ raise_exception is defined }}|{{ range(3) | list }}|{{ dict(a=1) }}|{{ namespace(a=1).a "
      "}}",
      "True|[0, 1, 2]|{'a': 1}|1");
  expect_error("{{ raise_exception('System role not supported') }}", PASADA_ERR_ARG,
               "template line 1: System role not supported", 5);
  expect_error("\n\n{% for m in messages %}{{ m.content + 1 }}{% endfor %}", PASADA_ERR_ARG,
               "template line 3: can only concatenate str", 5);
  expect_error("{{ l.append(4) }}", PASADA_ERR_ARG, "unsafe", 5);
  expect_error("{{ undefined_thing.x }}", PASADA_ERR_ARG, "'undefined_thing' is undefined", 5);
}

static void test_syntax_errors(void) {
  expect_error("a\nb\n{% for x in l %}\n{% endif %}", PASADA_ERR_FORMAT, "template line 4", 5);
  expect_error("{% endfor %}", PASADA_ERR_FORMAT, "template line 1: unexpected 'endfor'", 5);
  expect_error("{% if x %}", PASADA_ERR_FORMAT, "Unexpected end of template", 5);
  expect_error("{{ 1 + }}", PASADA_ERR_FORMAT, "template line 1", 5);
  expect_error("{{ (1, 2 }}", PASADA_ERR_FORMAT, "unexpected '}'", 5);
  expect_error("{% frobnicate %}", PASADA_ERR_FORMAT, "unknown tag 'frobnicate'", 5);
  expect_error("{% break %}", PASADA_ERR_FORMAT, "outside a loop", 5);
  expect_error("{# never closed", PASADA_ERR_FORMAT, "Missing end of comment tag", 5);
  expect_error("{% raw %}never closed", PASADA_ERR_FORMAT, "Missing end of raw directive", 5);
  expect_error("{{ 'unterminated }}", PASADA_ERR_FORMAT, "unexpected char", 5);
  expect_error("{% macro m(a=1, b) %}{% endmacro %}", PASADA_ERR_FORMAT, "non-default argument", 5);
  expect_error_n("ok\n\xc3\x28", 5, PASADA_ERR_FORMAT, "template line 2: not valid UTF-8", 5);
}

/* ---- untrusted templates ---- */

static char *repeat(const char *a, int n, const char *mid, const char *b) {
  const size_t la = strlen(a), lb = strlen(b), lm = strlen(mid);
  char *s = malloc((size_t)n * (la + lb) + lm + 1), *o = s;
  for (int i = 0; i < n; i++, o += la) memcpy(o, a, la);
  memcpy(o, mid, lm);
  o += lm;
  for (int i = 0; i < n; i++, o += lb) memcpy(o, b, lb);
  *o = 0;
  return s;
}

static void test_malicious(void) {
  const double limit = 30; /* generous: ASan, a loaded machine; a real hang never ends */
  expect_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", PASADA_ERR_ARG,
               "nested more than", limit);
  expect_error("{% for i in range(10**9) %}x{% endfor %}", PASADA_ERR_ARG, "Range too big", limit);
  const char *loops =
      "{% for a in range(100000) %}{% for b in range(100000) %}{{ a }}{% endfor %}{% endfor %}";
  expect_error(loops, PASADA_ERR_ARG, "exceed", limit);
  const char *quiet =
      "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}";
  expect_error(quiet, PASADA_ERR_ARG, "steps", limit);
  const char *dbl =
      "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% "
      "endfor %}{{ ns.s }}";
  expect_error(dbl, PASADA_ERR_ARG, "exceed", limit);
  expect_error("{{ 'x' * 10**12 }}", PASADA_ERR_ARG, "exceed", limit);
  const char *lists =
      "{% set ns = namespace(l=[1]) %}{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}{% "
      "endfor %}";
  expect_error(lists, PASADA_ERR_ARG, NULL, limit);
  const char *nest =
      "{% set ns = namespace(v=1) %}{% for i in range(100000) %}{% set ns.v = [ns.v] %}{% endfor %}"
      "{{ ns.v | tojson }}";
  expect_error(nest, PASADA_ERR_ARG, "deep", limit);
  char *deep = repeat("{% if true %}", 10000, "x", "{% endif %}");
  expect_error(deep, PASADA_ERR_FORMAT, "levels deep", limit);
  free(deep);
  deep = repeat("(", 10000, "1", ")");
  char *expr = malloc(strlen(deep) + 8);
  sprintf(expr, "{{ %s }}", deep);
  expect_error(expr, PASADA_ERR_FORMAT, NULL, limit);
  free(expr);
  free(deep);
  deep = repeat("[", 250, "1", "]");
  expr = malloc(strlen(deep) + 8);
  sprintf(expr, "{{ %s }}", deep);
  expect_error(expr, PASADA_ERR_FORMAT, NULL, limit);
  free(expr);
  free(deep);
  deep = repeat("-", 5000, "1", "");
  expr = malloc(strlen(deep) + 8);
  sprintf(expr, "{{ %s }}", deep);
  expect_error(expr, PASADA_ERR_FORMAT, NULL, limit);
  free(expr);
  free(deep);
  /* deep evaluation: recursion through nested lists stops at the depth limit
   * (bounded C stack), before the macro-call limit */
  deep = repeat("[", 40, "f(n + 1)", "]");
  expr = malloc(strlen(deep) + 200);
  sprintf(expr,
          "{%% macro f(n) %%}{%% for i in [1] %%}{%% if true %%}{{ %s }}{%% endif %%}{%% endfor %%}"
          "{%% endmacro %%}{{ f(0) }}",
          deep);
  expect_error(expr, PASADA_ERR_ARG, "nests deeper than", limit);
  free(expr);
  free(deep);
  expect_error("{% for m in messages %}{{ m.content ", PASADA_ERR_FORMAT, NULL, limit);
  expect_error("{{", PASADA_ERR_FORMAT, NULL, limit);
  expect_error("{%", PASADA_ERR_FORMAT, NULL, limit);
  expect_error_n("\xff\xfe{{ \x80 }}\x00", 10, PASADA_ERR_FORMAT, "UTF-8", limit);
  /* a memory limit below the default, through the internal entry */
  pasada_template *t = NULL;
  const char *big =
      "{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = ns.l + [i] %}{% "
      "endfor %}";
  CHECK(pasada_template_parse(big, strlen(big), &t) == PASADA_OK, "parse");
  tpl_limits lim = tpl_default_limits;
  lim.max_memory = 1 << 20;
  char *out = NULL;
  int rc = tpl_render(t, CTX, strlen(CTX), &lim, &out);
  CHECK(rc == PASADA_ERR_ARG && strstr(pasada_last_error(), "memory limit"), "memory limit: %d %s",
        rc, pasada_last_error());
  free(out);
  pasada_template_free(t);
}

/* Random templates built from fragments of the syntax: none may crash or
 * hang (the sanitizers watch), each either renders or fails with a message. */
static void test_random_templates(void) {
  static const char *const frags[] = {
      "{{",     "}}",       "{%",     "%}",       "{#",    "#}",        "-",    "+",      " ",
      "\n",     "if",       "for",    "in",       "endif", "endfor",    "else", "set",    "=",
      "x",      "l",        "d",      "messages", "(",     ")",         "[",    "]",      "{",
      "}",      ",",        ".",      ":",        "|",     "'s'",       "1",    "2.5",    "loop",
      "macro",  "endmacro", "m",      "~",        "*",     "**",        "/",    "%",      "is",
      "not",    "defined",  "tojson", "length",   "range", "namespace", "call", "caller", "raw",
      "endraw", "\xc3\xa9", "\xff",   "\\",       "\"",    "and",       "or"};
  const size_t nf = sizeof frags / sizeof frags[0];
  char src[512];
  int rendered = 0;
  for (int k = 0; k < 3000; k++) {
    size_t n = 0;
    const int parts = 1 + (int)(rng() % 40);
    for (int i = 0; i < parts; i++) {
      const char *f = frags[rng() % nf];
      const size_t fl = strlen(f);
      if (n + fl + 1 >= sizeof src) break;
      memcpy(src + n, f, fl);
      n += fl;
    }
    src[n] = 0;
    pasada_template *t = NULL;
    char *out = NULL;
    int rc = pasada_template_parse(src, n, &t);
    if (rc == PASADA_OK) {
      rc = pasada_template_render(t, CTX, strlen(CTX), &out);
      rendered += rc == PASADA_OK;
    }
    CHECK(rc == PASADA_OK || (rc != PASADA_OK && pasada_last_error()[0]), "no message for '%s'",
          src);
    pasada_text_free(out);
    pasada_template_free(t);
  }
  CHECK(rendered > 0, "no random template rendered");
}

/* One template rendered from four threads at once: the same text. */
typedef struct {
  const pasada_template *t;
  char *out;
  int rc;
} job;

static void *render_job(void *arg) {
  job *j = arg;
  for (int i = 0; i < 50 && j->rc == PASADA_OK; i++) {
    free(j->out);
    j->out = NULL;
    j->rc = pasada_template_render(j->t, CTX, strlen(CTX), &j->out);
  }
  return NULL;
}

static void test_threads(void) {
  const char *src =
      "{% macro show(m) %}{{ m.role | upper }}: {{ m.content }}{% endmacro %}{% set ns = "
      "namespace(n=0) %}"
      "{% for m in messages %}{% set ns.n = ns.n + 1 %}{{ show(m) }}|{% endfor %}{{ ns.n }}{{ d | "
      "tojson }}";
  pasada_template *t = NULL;
  CHECK(pasada_template_parse(src, strlen(src), &t) == PASADA_OK, "parse: %s", pasada_last_error());
  job jobs[4] = {{0}};
  pthread_t th[4];
  for (int i = 0; i < 4; i++) {
    jobs[i].t = t;
    pthread_create(&th[i], NULL, render_job, &jobs[i]);
  }
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < 4; i++) {
    CHECK(jobs[i].rc == PASADA_OK && jobs[i].out &&
              !strcmp(jobs[i].out, "SYSTEM: S|USER: hé <b>|2{\"b\": 2, \"a\": 1}"),
          "thread %d: %s", i, jobs[i].out ? jobs[i].out : "(error)");
    free(jobs[i].out);
  }
  pasada_template_free(t);
}

static void test_time(void) {
  setenv("PASADA_TEMPLATE_NOW", "1767225600", 1);
  setenv("TZ", "UTC", 1);
  tzset();
  expect("{{ strftime_now('%Y-%m-%d %H:%M %b') }}", "2026-01-01 00:00 Jan");
}

int main(void) {
  test_seed("test_jinja");
  test_float_repr();
  test_json();
  test_whitespace();
  test_expressions();
  test_filters();
  test_tests();
  test_statements();
  test_syntax_errors();
  test_time();
  test_threads();
  test_malicious();
  test_random_templates();
  if (failures)
    fprintf(stderr, "test_jinja: %d check(s) failed\n", failures);
  else
    printf("test_jinja: ok\n");
  return failures ? 1 : 0;
}
