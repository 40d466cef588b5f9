/* test_json_schema.c: JSON Schema -> GBNF on the cases of
 * tests/fixtures/schemas/cases.json: each schema compiles to a grammar;
 * its valid instances, written compact, with single spaces and pretty
 * (newlines and indentation), are accepted whole by the grammar's matcher;
 * its invalid instances (and the "stricter" ones this grammar refuses by
 * design, like properties out of order) are refused; unsupported schemas
 * fail with a 400 naming the keyword. Then json_object mode (no schema) and
 * two schemas sharing one grammar under their own prefixes.
 * tests/e2e/test_structured.py checks the same cases against the Python
 * jsonschema package and model output. */
#include <cjson/cJSON.h>

#include "server/json_schema.h"
#include "test_grammar_util.h"

static char *read_all(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  rewind(f);
  char *b = malloc((size_t)n + 1);
  if (b && fread(b, 1, (size_t)n, f) != (size_t)n) n = 0;
  if (b) b[n] = 0;
  fclose(f);
  return b;
}

/* ---- writing instances: compact, spaced, pretty ---- */

static void put(srv_buf *b, const char *s) {
  srv_buf_append(b, s, strlen(s));
}

static void write_json(srv_buf *b, const cJSON *v, int mode, int depth) {
  if (!cJSON_IsObject(v) && !cJSON_IsArray(v)) {
    char *t = cJSON_PrintUnformatted(v);
    put(b, t);
    free(t);
    return;
  }
  const bool obj = cJSON_IsObject(v);
  put(b, obj ? "{" : "[");
  char indent[64];
  for (const cJSON *x = v->child; x; x = x->next) {
    if (x != v->child) put(b, ",");
    if (mode == 1) put(b, " ");
    if (mode == 2) snprintf(indent, sizeof indent, "\n%*s", 2 * (depth + 1), ""), put(b, indent);
    if (obj) {
      cJSON *k = cJSON_CreateString(x->string);
      char *t = cJSON_PrintUnformatted(k);
      put(b, t);
      free(t);
      cJSON_Delete(k);
      put(b, mode ? ": " : ":");
    }
    write_json(b, x, mode, depth + 1);
  }
  if (v->child && mode == 1) put(b, " ");
  if (v->child && mode == 2)
    snprintf(indent, sizeof indent, "\n%*s", 2 * depth, ""), put(b, indent);
  put(b, obj ? "}" : "]");
}

static bool accepts(const pasada_grammar *g, const char *text) {
  pa_gmatcher *m;
  if (pa_gmatcher_create(g, &m)) return false;
  bool ok =
      pa_gmatcher_accept_bytes(m, (const uint8_t *)text, strlen(text)) && pa_gmatcher_can_end(m);
  pa_gmatcher_free(m);
  return ok;
}

static void check_list(const pasada_grammar *g, const char *name, const cJSON *list, bool want,
                       bool all_modes, const char *gbnf, int *count) {
  for (const cJSON *v = list ? list->child : NULL; v; v = v->next) {
    for (int mode = 0; mode < (all_modes ? 3 : 1); mode++) {
      srv_buf b = {0};
      if (cJSON_IsString(v) && !strcmp(list->string, "invalid_text"))
        put(&b, v->valuestring);
      else
        write_json(&b, v, mode, 0);
      bool got = accepts(g, b.p ? b.p : "");
      CHECK(got == want, "%s: %s '%s' (%s)\n%s", name, want ? "refused valid" : "accepted invalid",
            b.p,
            mode == 0   ? "compact"
            : mode == 1 ? "spaced"
                        : "pretty",
            gbnf);
      (*count)++;
      srv_buf_free(&b);
    }
  }
}

static void test_cases(const pasada_tokenizer *tok) {
  const char *root = getenv("PASADA_SOURCE_DIR");
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/fixtures/schemas/cases.json", root ? root : ".");
  char *text = read_all(path);
  CHECK(text != NULL, "cannot read %s", path);
  cJSON *cases = text ? cJSON_Parse(text) : NULL;
  CHECK(cJSON_IsArray(cases), "%s is not a JSON array", path);
  int n_cases = 0, n_errors = 0, n_instances = 0;
  for (const cJSON *cs = cases ? cases->child : NULL; cs; cs = cs->next) {
    const char *name = cJSON_GetObjectItem(cs, "name")->valuestring;
    const cJSON *schema = cJSON_GetObjectItem(cs, "schema");
    const cJSON *err = cJSON_GetObjectItem(cs, "error");
    srv_error e = {0};
    char *gbnf = srv_json_schema_gbnf(schema, &e);
    n_cases++;
    if (err) {
      CHECK(!gbnf && e.status == 400 && strstr(e.message, err->valuestring),
            "%s: want a 400 naming '%s', got %d '%s'", name, err->valuestring, e.status,
            gbnf ? gbnf : e.message);
      CHECK(!gbnf || !strchr(e.message, '\n'), "%s: one line", name);
      n_errors++;
      free(gbnf);
      continue;
    }
    CHECK(gbnf != NULL, "%s: %s", name, e.message);
    if (!gbnf) continue;
    pasada_grammar *g = NULL;
    CHECK(pasada_grammar_create(tok, gbnf, strlen(gbnf), NULL, &g) == PASADA_OK,
          "%s: grammar: %s\n%s", name, pasada_last_error(), gbnf);
    if (g) {
      check_list(g, name, cJSON_GetObjectItem(cs, "valid"), true, true, gbnf, &n_instances);
      check_list(g, name, cJSON_GetObjectItem(cs, "invalid"), false, false, gbnf, &n_instances);
      check_list(g, name, cJSON_GetObjectItem(cs, "invalid_text"), false, false, gbnf,
                 &n_instances);
      check_list(g, name, cJSON_GetObjectItem(cs, "stricter"), false, false, gbnf, &n_instances);
      /* bounded whitespace: the model cannot pad forever */
      CHECK(!accepts(g, "                                                            "),
            "%s: endless spaces", name);
    }
    pasada_grammar_free(g);
    free(gbnf);
  }
  printf("%d schemas (%d refused as unsupported), %d instances checked\n", n_cases, n_errors,
         n_instances);
  CHECK(n_cases >= 50 && n_instances >= 300, "too few cases");
  cJSON_Delete(cases);
  free(text);
}

static void test_json_object(const pasada_tokenizer *tok) {
  srv_error e = {0};
  char *gbnf = srv_json_schema_gbnf(NULL, &e);
  CHECK(gbnf != NULL, "json_object: %s", e.message);
  pasada_grammar *g = NULL;
  if (gbnf)
    CHECK(pasada_grammar_create(tok, gbnf, strlen(gbnf), NULL, &g) == PASADA_OK, "%s",
          pasada_last_error());
  if (g) {
    static const char *yes[] = {"{}", "{\"a\": [1, 2.5e3, {\"b\": null}], \"c\": \"\\u00e9\\n\"}",
                                "{ \"x\" : true }", " {}", "\n  {}"};
    static const char *no[] = {
        "[]", "1", "\"s\"", "{\"a\" 1}", "{\"a\": 01}", "{\"a\": [1,]}", "{'a': 1}", "  {}", "{} "};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
      CHECK(accepts(g, yes[i]), "json_object refused %s", yes[i]);
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
      CHECK(!accepts(g, no[i]), "json_object accepted %s", no[i]);
  }
  pasada_grammar_free(g);
  free(gbnf);
}

/* Two schemas' rules in one grammar: the helper names do not collide. */
static void test_prefixes(const pasada_tokenizer *tok) {
  cJSON *a = cJSON_Parse(
      "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\"}},\"required\":[\"n\"],"
      "\"additionalProperties\":false}");
  cJSON *b = cJSON_Parse("{\"type\":\"array\",\"items\":{\"type\":\"string\",\"maxLength\":2}}");
  srv_buf out = {0};
  srv_error e = {0};
  put(&out, "root ::= \"A\" tool-a | \"B\" tool-b\n");
  CHECK(srv_json_schema_rules(a, "tool-a", &out, &e), "tool-a: %s", e.message);
  CHECK(srv_json_schema_rules(b, "tool-b", &out, &e), "tool-b: %s", e.message);
  CHECK(!srv_json_schema_rules(a, "bad name!", &out, &e) && e.status == 400,
        "a bad rule name is refused");
  pasada_grammar *g = NULL;
  CHECK(pasada_grammar_create(tok, out.p, out.n, NULL, &g) == PASADA_OK, "shared grammar: %s\n%s",
        pasada_last_error(), out.p);
  if (g) {
    CHECK(accepts(g, "A{\"n\":1}") && accepts(g, "B[\"ab\"]"), "both schemas");
    CHECK(!accepts(g, "A[\"ab\"]") && !accepts(g, "B{\"n\":1}") && !accepts(g, "B[\"abc\"]"),
          "each its own");
  }
  pasada_grammar_free(g);
  srv_buf_free(&out);
  cJSON_Delete(a);
  cJSON_Delete(b);
}

int main(void) {
  test_seed("test_json_schema");
  pa_tokenizer *tok = synthetic_vocab(100);
  if (!tok) return 1;
  test_cases(tok);
  test_json_object(tok);
  test_prefixes(tok);
  pa_tokenizer_free(tok);
  if (failures) fprintf(stderr, "test_json_schema: %d failures\n", failures);
  return failures ? 1 : 0;
}
