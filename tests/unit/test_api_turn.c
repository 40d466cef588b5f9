/* test_api_turn.c: what the Anthropic Messages and Responses APIs share
 * beneath their JSON: the turn tracker (src/server/turn.h) fed a text one
 * byte longer at a time, as a stream sees it, against one final parse (the
 * parts, their order, their text, calls whole in one delta, a turn without
 * output as one empty text part, parallel calls cut to one), and the
 * response store (src/server/responses.h): least recently used eviction by
 * count and by bytes, replacement, deletion, copies. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/responses.h"
#include "server/turn.h"
#include "test_check.h"

/* ---- the turn tracker ---- */

typedef struct {
  srv_buf text[16]; /* per part: what the deltas said */
  int opens, closes, deltas;
  int open_part; /* -1: none */
  bool order_ok;
} record;

static void on_open(void *u, const srv_turn *t, int k) {
  record *r = u;
  (void)t;
  r->order_ok &= r->open_part == -1 && k == r->opens;
  r->open_part = k;
  r->opens++;
}

static void on_delta(void *u, const srv_turn *t, int k, const char *s, size_t n) {
  record *r = u;
  (void)t;
  r->order_ok &= k == r->open_part && k < 16;
  if (k < 16) srv_buf_append(&r->text[k], s, n);
  r->deltas++;
}

static void on_close(void *u, const srv_turn *t, int k) {
  record *r = u;
  (void)t;
  r->order_ok &= k == r->open_part;
  r->open_part = -1;
  r->closes++;
}

static const srv_turn_sink SINK = {on_open, on_delta, on_close};

/* Feeds text byte by byte, then finishes; checks the stream against a
 * single final parse. Returns the streamed turn (the caller frees it). */
static srv_turn stream(const srv_model_info *mi, const srv_job *j, const char *text, int max_calls,
                       record *r) {
  memset(r, 0, sizeof *r);
  r->open_part = -1;
  r->order_ok = true;
  srv_turn t = {.max_calls = max_calls};
  size_t n = strlen(text);
  for (size_t i = 0; i <= n; i++)
    CHECK(srv_turn_update(&t, mi, j, text, i, false, &SINK, r), "update at %zu", i);
  CHECK(srv_turn_update(&t, mi, j, text, n, true, &SINK, r), "final update");
  CHECK(t.closed && r->order_ok, "events out of order for '%s'", text);
  CHECK(r->opens == t.n_parts && r->closes == t.n_parts, "%d opens, %d closes, %d parts", r->opens,
        r->closes, t.n_parts);
  srv_turn whole = {.max_calls = max_calls};
  CHECK(srv_turn_update(&whole, mi, j, text, n, true, NULL, NULL), "whole parse");
  CHECK(whole.n_parts == t.n_parts, "whole %d parts, streamed %d", whole.n_parts, t.n_parts);
  for (int k = 0; k < t.n_parts && k < whole.n_parts && k < 16; k++) {
    const srv_part *a = &t.parts[k], *b = &whole.parts[k];
    CHECK(a->kind == b->kind, "part %d kind", k);
    CHECK(a->text.n == b->text.n && (!a->text.n || !memcmp(a->text.p, b->text.p, a->text.n)),
          "part %d: streamed '%s', whole '%s'", k, a->text.p ? a->text.p : "",
          b->text.p ? b->text.p : "");
    CHECK(r->text[k].n == a->text.n, "part %d: the deltas said %zu bytes of %zu", k, r->text[k].n,
          a->text.n);
    CHECK(a->kind != SRV_PART_CALL || (!strcmp(a->name, b->name) && !strcmp(a->id, b->id)),
          "call %d differs between the parses", k);
  }
  srv_turn_free(&whole);
  for (int k = 0; k < 16; k++) srv_buf_free(&r->text[k]);
  return t;
}

static void test_turn(void) {
  srv_model_info mi;
  memset(&mi, 0, sizeof mi);
  mi.style.format = SRV_OUT_HERMES;
  snprintf(mi.style.think_open, sizeof mi.style.think_open, "<think>");
  snprintf(mi.style.think_close, sizeof mi.style.think_close, "</think>");
  srv_job j;
  memset(&j, 0, sizeof j);
  snprintf(j.id, sizeof j.id, "msg_0123456789abcdef");
  record r;

  srv_turn t = stream(&mi, &j, "Hello there, world.", 0, &r);
  CHECK(t.n_parts == 1 && t.parts[0].kind == SRV_PART_TEXT, "plain text: %d parts", t.n_parts);
  CHECK(t.n_parts == 1 && !strcmp(t.parts[0].text.p, "Hello there, world."), "plain text");
  srv_turn_free(&t);

  t = stream(&mi, &j, "", 0, &r);
  CHECK(t.n_parts == 1 && t.parts[0].kind == SRV_PART_TEXT && t.parts[0].text.n == 0,
        "no output: one empty text part, not %d parts", t.n_parts);
  srv_turn_free(&t);

  t = stream(&mi, &j, "<think>Paris is in France.</think>It is Paris.", 0, &r);
  CHECK(t.n_parts == 2 && t.parts[0].kind == SRV_PART_REASONING && t.parts[1].kind == SRV_PART_TEXT,
        "reasoning then text: %d parts", t.n_parts);
  if (t.n_parts == 2)
    CHECK(
        strstr(t.parts[0].text.p, "Paris is in France") && strstr(t.parts[1].text.p, "It is Paris"),
        "reasoning '%s', text '%s'", t.parts[0].text.p, t.parts[1].text.p);
  srv_turn_free(&t);

  j.req.tools = true;
  const char *calls =
      "Checking.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n"
      "</tool_call><tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 2, \"b\": 3}}\n"
      "</tool_call>";
  t = stream(&mi, &j, calls, 0, &r);
  CHECK(srv_turn_calls(&t) == 2, "two calls, not %d", srv_turn_calls(&t));
  int k = t.n_parts - 2;
  if (srv_turn_calls(&t) == 2 && k >= 0) {
    CHECK(!strcmp(t.parts[k].name, "get_weather") && !strcmp(t.parts[k + 1].name, "add"), "names");
    CHECK(strstr(t.parts[k].text.p, "Oslo") && strstr(t.parts[k + 1].text.p, "3"), "arguments");
    CHECK(strcmp(t.parts[k].id, t.parts[k + 1].id) != 0 && t.parts[k].id[0], "ids differ");
    CHECK(t.parts[0].kind == SRV_PART_TEXT, "the text before the calls comes first");
  }
  srv_turn_free(&t);
  t = stream(&mi, &j, calls, 1, &r);
  CHECK(srv_turn_calls(&t) == 1 && !strcmp(t.parts[t.n_parts - 1].name, "get_weather"),
        "parallel calls off: the first call only");
  srv_turn_free(&t);
  j.req.tools = false;
  t = stream(&mi, &j, calls, 0, &r);
  CHECK(srv_turn_calls(&t) == 0, "tools not offered: calls are text");
  srv_turn_free(&t);
}

/* ---- the response store ---- */

static char *dup(const char *s) {
  char *p = malloc(strlen(s) + 1);
  strcpy(p, s);
  return p;
}

static bool has(srv_resp_store *s, const char *id) {
  char *r = srv_resp_store_response(s, id);
  free(r);
  return r != NULL;
}

static void test_store(void) {
  srv_resp_store *s = srv_resp_store_create(3, 1 << 20);
  srv_resp_store_put(s, "a", dup("{\"id\":\"a\"}"), dup("[1]"));
  srv_resp_store_put(s, "b", dup("{\"id\":\"b\"}"), dup("[2]"));
  srv_resp_store_put(s, "c", dup("{\"id\":\"c\"}"), dup("[3]"));
  char *conv = srv_resp_store_conversation(s, "a"); /* a is now the most recent */
  CHECK(conv && !strcmp(conv, "[1]"), "conversation of a: %s", conv ? conv : "(none)");
  free(conv);
  srv_resp_store_put(s, "d", dup("{\"id\":\"d\"}"), dup("[4]"));
  CHECK(srv_resp_store_count(s) == 3, "count %d", srv_resp_store_count(s));
  CHECK(!has(s, "b") && has(s, "a") && has(s, "c") && has(s, "d"), "b was least recently used");
  srv_resp_store_put(s, "c", dup("{\"id\":\"c2\"}"), dup("[5]"));
  char *r = srv_resp_store_response(s, "c");
  CHECK(r && !strcmp(r, "{\"id\":\"c2\"}") && srv_resp_store_count(s) == 3, "replaced");
  free(r);
  CHECK(srv_resp_store_delete(s, "a") && !srv_resp_store_delete(s, "a") && !has(s, "a"), "delete");
  CHECK(!srv_resp_store_response(s, "zz") && !srv_resp_store_conversation(s, "zz"), "unknown id");
  srv_resp_store_free(s);

  /* by bytes: each entry ~1 KiB in a 2.5 KiB store */
  s = srv_resp_store_create(100, 2560);
  char big[1001];
  memset(big, 'x', 1000);
  big[1000] = 0;
  srv_resp_store_put(s, "x1", dup(big), dup("[]"));
  srv_resp_store_put(s, "x2", dup(big), dup("[]"));
  srv_resp_store_put(s, "x3", dup(big), dup("[]"));
  CHECK(srv_resp_store_count(s) == 2 && !has(s, "x1") && has(s, "x3"), "bytes bound: %d kept",
        srv_resp_store_count(s));
  char *huge = malloc(4000);
  memset(huge, 'y', 3999);
  huge[3999] = 0;
  srv_resp_store_put(s, "h", huge,
                     dup("[]")); /* larger than the store: not kept, nothing evicted */
  CHECK(!has(s, "h") && srv_resp_store_count(s) == 2, "an oversized response is not kept");
  srv_resp_store_free(s);
  srv_resp_store_free(NULL);
}

int main(void) {
  test_turn();
  test_store();
  if (failures) fprintf(stderr, "test_api_turn: %d checks failed\n", failures);
  return failures ? 1 : 0;
}
