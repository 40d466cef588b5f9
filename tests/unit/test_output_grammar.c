/* test_output_grammar.c: the tool-call grammars of srv_tool_grammar
 * (src/server/output_grammar.c): each family's grammar compiles, accepts
 * the calls its corpus templates render (tests/fixtures/output/cases.json)
 * with and without reasoning before them, and the parser reads what it
 * accepts; it refuses another function than the named one, a second call
 * unless parallel, and text that is not a call; families no grammar can
 * write are refused with a 400; markers that are control tokens of the
 * model's vocabulary are token references. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "server/output.h"
#include "test_grammar_util.h"

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)len + 1);
  if (s && fread(s, 1, (size_t)len, f) != (size_t)len) {
    free(s);
    s = NULL;
  }
  if (s) s[len] = 0;
  fclose(f);
  return s;
}

typedef struct {
  pa_gast ast;
  pa_grammar g;
  bool ok;
} compiled;

static bool compile_ast(const char *gbnf, compiled *c) {
  memset(c, 0, sizeof *c);
  if (pa_gbnf_parse(gbnf, strlen(gbnf), &c->ast)) return false;
  int32_t root = pa_gast_find(&c->ast, "root");
  if (root < 0 || pa_grammar_build(&c->ast, root, &c->g)) return false;
  c->ok = true;
  return true;
}

static void release(compiled *c) {
  if (c->ok) pa_grammar_release(&c->g);
  pa_gast_free(&c->ast);
}

/* 1: a whole sentence of the grammar; 2: a live prefix; 0: rejected. */
static int verdict(compiled *c, const char *s) {
  pa_gmatcher *m;
  if (pa_gmatcher_create(&c->g, &m)) return -1;
  int v = !pa_gmatcher_accept_bytes(m, (const uint8_t *)s, strlen(s)) ? 0
          : pa_gmatcher_can_end(m)                                    ? 1
                                                                      : 2;
  pa_gmatcher_free(m);
  return v;
}

static int n_accepted, n_grammars;

/* How many bytes of s the grammar follows. */
static size_t accepted_len(compiled *c, const char *s) {
  size_t n = strlen(s), k = 0;
  pa_gmatcher *m;
  if (pa_gmatcher_create(&c->g, &m)) return 0;
  while (k < n && pa_gmatcher_accept_bytes(m, (const uint8_t *)s + k, 1)) k++;
  pa_gmatcher_free(m);
  return k;
}

/* The corpus's renders of calls for one template: accepted, and parsed. */
static void template_cases(const char *root, const cJSON *tools, const cJSON *t) {
  const char *file = cJSON_GetObjectItem(t, "template")->valuestring;
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", test_templates_dir(root), file);
  char *src = read_file(path);
  if (!src) return;
  srv_out_style st;
  srv_out_style_detect(src, NULL, &st);
  free(src);
  srv_error e = {0};
  compiled c[2]; /* without, with in_reasoning */
  char *gbnf[2];
  bool ok[2];
  for (int r = 0; r < 2; r++) {
    gbnf[r] = srv_tool_grammar(&st, tools, NULL, true, r, &e);
    ok[r] = false;
    memset(&c[r], 0, sizeof c[r]);
    if (!gbnf[r]) {
      CHECK(st.format == SRV_OUT_PLAIN, "%s: no grammar: %s", file, e.message);
      CHECK(e.status == 400, "%s: status %d", file, e.status);
      return;
    }
    ok[r] = compile_ast(gbnf[r], &c[r]);
    CHECK(ok[r], "%s: the grammar does not compile: %s\n%s", file, pasada_last_error(), gbnf[r]);
  }
  n_grammars++;
  const cJSON *k;
  cJSON_ArrayForEach(k, cJSON_GetObjectItem(t, "cases")) {
    int n_calls = cJSON_GetArraySize(cJSON_GetObjectItem(k, "calls"));
    const char *name = cJSON_GetObjectItem(k, "name")->valuestring;
    const char *text = cJSON_GetObjectItem(k, "text")->valuestring;
    int r = cJSON_IsTrue(cJSON_GetObjectItem(k, "in_reasoning"));
    if (!ok[r] || n_calls == 0 || strstr(name, "content_call")) continue;
    /* MiniCPM's template writes an object argument as Python's repr; the
       grammar writes JSON (the parser reads both) */
    if (st.format == SRV_OUT_MINICPM && strstr(text, "{'")) continue;
    /* Gemma 4's template writes an object argument's keys bare ({depth:2});
       the grammar writes JSON there (the parser reads both) */
    if (st.format == SRV_OUT_GEMMA && strstr(text, ":{")) continue;
    int v = verdict(&c[r], text);
    size_t at = v == 0 ? accepted_len(&c[r], text) : strlen(text);
    CHECK(v == 1, "%s/%s: the grammar %s the rendered call at byte %zu: [%.*s]<HERE>[%.40s]", file,
          name, v == 2 ? "wants more after" : "rejects", at, (int)at, text, text + at);
    if (v != 1) continue;
    n_accepted++;
    srv_out_opts o = {.final = true, .tools = true, .in_reasoning = r, .tool_defs = tools};
    srv_output out;
    CHECK(srv_output_parse(&st, text, strlen(text), &o, &out), "parse");
    CHECK(out.n_calls == n_calls, "%s/%s: %d calls parsed", file, name, out.n_calls);
    srv_output_free(&out);
  }
  bool reasons_first = st.think_close[0] && !st.think_open[0];
  if (ok[0] && !reasons_first) CHECK(verdict(&c[0], "Hello") == 0, "%s: accepts content", file);
  for (int r = 0; r < 2; r++) {
    release(&c[r]);
    free(gbnf[r]);
  }

  /* the named function only, one call only */
  char *g = srv_tool_grammar(&st, tools, "search", false, false, &e);
  CHECK(g, "%s: named: %s", file, e.message);
  compiled n;
  if (g && compile_ast(g, &n)) {
    cJSON_ArrayForEach(k, cJSON_GetObjectItem(t, "cases")) {
      const cJSON *calls = cJSON_GetObjectItem(k, "calls");
      const char *name = cJSON_GetObjectItem(k, "name")->valuestring;
      const char *text = cJSON_GetObjectItem(k, "text")->valuestring;
      if (cJSON_GetArraySize(calls) == 0 || strstr(name, "content_call") ||
          cJSON_IsTrue(cJSON_GetObjectItem(k, "in_reasoning")) || reasons_first ||
          (st.format == SRV_OUT_MINICPM && strstr(text, "{'")) ||
          (st.format == SRV_OUT_GEMMA && strstr(text, ":{")))
        continue;
      bool other = false;
      const cJSON *x;
      cJSON_ArrayForEach(x, calls) other |=
          strcmp(cJSON_GetObjectItem(x, "name")->valuestring, "search") != 0;
      int v = verdict(&n, text);
      if (other || cJSON_GetArraySize(calls) > 1)
        CHECK(v == 0, "%s/%s: the grammar for one search call accepts it", file, name);
      else
        CHECK(v == 1, "%s/%s: the grammar for one search call refuses it", file, name);
    }
    release(&n);
  }
  free(g);
}

/* A vocabulary of the 256 byte tokens (ids 5..260) after <unk>, <s>,
 * </s> and two control tokens that are tool-call markers: [TOOL_CALLS] (3)
 * and <|python_tag|> (4). */
static pa_tokenizer *marker_vocab(void) {
  const char *fixed[5] = {"<unk>", "<s>", "</s>", "[TOOL_CALLS]", "<|python_tag|>"};
  char store[256][8];
  const char *tokens[5 + 256];
  int32_t types[5 + 256];
  for (int i = 0; i < 5 + 256; i++) {
    if (i < 5) {
      tokens[i] = fixed[i];
      types[i] = i ? PA_TOKEN_CONTROL : PA_TOKEN_UNKNOWN;
    } else {
      snprintf(store[i - 5], sizeof store[0], "<0x%02X>", i - 5);
      tokens[i] = store[i - 5];
      types[i] = PA_TOKEN_BYTE;
    }
  }
  return write_vocab(tokens, types, 5 + 256, 2);
}

/* With the model's vocabulary in the style, a marker that is a control
 * token is a token reference: the forced call starts with that token, and
 * its text spelled in byte tokens is refused; a family whose markers are
 * text keeps its literals. */
static void special_markers(const cJSON *tools) {
  pa_tokenizer *v = marker_vocab();
  if (!v) return;
  const int32_t byte = 5;
  srv_error e = {0};
  srv_out_style st = {.format = SRV_OUT_MISTRAL, .vocab = v};
  char *g = srv_tool_grammar(&st, tools, "search", false, false, &e);
  CHECK(g && strstr(g, "<[3]>") && !strstr(g, "TOOL_CALLS"), "mistral: marker by reference: %s",
        g ? g : e.message);
  pasada_grammar *pg = NULL;
  pa_gmatcher *m = NULL;
  if (g && pasada_grammar_create(v, g, strlen(g), NULL, &pg) == PASADA_OK &&
      pa_gmatcher_create(pg, &m) == PASADA_OK) {
    CHECK(pa_gmatcher_allows(m, 3), "mistral: [TOOL_CALLS] allowed first");
    CHECK(!pa_gmatcher_allows(m, byte + '[') && !pa_gmatcher_allows(m, 4),
          "mistral: '[' and <|python_tag|> refused first");
    CHECK(pa_gmatcher_accept(m, 3) == PASADA_OK && pa_gmatcher_allows(m, byte + '['),
          "mistral: then the JSON array");
  } else {
    CHECK(0, "mistral grammar with references compiles: %s", pasada_last_error());
  }
  pa_gmatcher_free(m);
  pasada_grammar_free(pg);
  free(g);
  st = (srv_out_style){.format = SRV_OUT_HERMES, .vocab = v};
  g = srv_tool_grammar(&st, tools, "search", false, false, &e);
  CHECK(g && !strstr(g, "<[") && strstr(g, "<tool_call>"), "hermes: text markers stay literals");
  free(g);
  pa_tokenizer_free(v);
}

static void refusals(const cJSON *tools) {
  srv_error e = {0};
  srv_out_style st = {.format = SRV_OUT_HERMES};
  CHECK(!srv_tool_grammar(&st, tools, "nope", true, false, &e) && e.status == 400 &&
            !strcmp(e.param, "tool_choice"),
        "an unknown name: %d %s", e.status, e.message);
  cJSON *none = cJSON_CreateArray();
  memset(&e, 0, sizeof e);
  CHECK(!srv_tool_grammar(&st, none, NULL, true, false, &e) && e.status == 400, "no tools");
  cJSON_Delete(none);
  cJSON *bad = cJSON_Parse("[{\"type\":\"function\",\"function\":{\"name\":\"a b\"}}]");
  memset(&e, 0, sizeof e);
  CHECK(!srv_tool_grammar(&st, bad, NULL, true, false, &e) && e.status == 400,
        "a name with a space");
  cJSON_Delete(bad);
  srv_out_format no[] = {SRV_OUT_PLAIN};
  for (int i = 0; i < 1; i++) {
    srv_out_style s = {.format = no[i]};
    memset(&e, 0, sizeof e);
    CHECK(!srv_tool_grammar(&s, tools, NULL, true, false, &e) && e.status == 400,
          "%s has no grammar", srv_out_format_name(no[i]));
  }
  /* every family's grammar compiles, also without parameters schemas */
  cJSON *bare = cJSON_Parse("[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]");
  for (int f = 0; f < SRV_OUT_COUNT; f++)
    for (int v = 0; v < 2; v++) {
      srv_out_style s = {.format = (srv_out_format)f, .variant = v};
      strcpy(s.think_open, "<think>");
      strcpy(s.think_close, "</think>");
      for (int t = 0; t < 2; t++) {
        char *g = srv_tool_grammar(&s, t ? bare : tools, NULL, v, t, &e);
        if (!g) continue;
        compiled c;
        CHECK(compile_ast(g, &c), "%s/%d: %s\n%s", srv_out_format_name(s.format), v,
              pasada_last_error(), g);
        release(&c);
        free(g);
      }
    }
  cJSON_Delete(bare);
}

int main(void) {
  const char *root = getenv("PASADA_SOURCE_DIR");
  if (!root) root = ".";
  char path[4096];
  snprintf(path, sizeof path, "%s/tests/fixtures/output/cases.json", root);
  char *js = read_file(path);
  CHECK(js, "cannot read %s", path);
  cJSON *doc = js ? cJSON_Parse(js) : NULL;
  free(js);
  const cJSON *tools = cJSON_GetObjectItem(doc, "tools"), *t;
  cJSON_ArrayForEach(t, cJSON_GetObjectItem(doc, "templates")) template_cases(root, tools, t);
  refusals(tools);
  special_markers(tools);
  cJSON_Delete(doc);
  printf("test_output_grammar: %d grammars, %d rendered calls accepted, %d failures\n", n_grammars,
         n_accepted, failures);
  return failures ? 1 : 0;
}
