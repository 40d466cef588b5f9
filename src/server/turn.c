/* turn.c: a generated turn as ordered parts, tracked across re-parses of a
 * growing text (see turn.h), and the ids and context fit the Anthropic
 * Messages and Responses parsers share. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "server/turn.h"
#include "server/json_util.h"

#define BAD(e, param, ...) srv_fail(e, 400, "invalid_request_error", NULL, param, __VA_ARGS__)

/* ---- the turn tracker ---- */

static srv_part *current(srv_turn *t) {
  return t->n_parts > 0 && t->parts[t->n_parts - 1].open ? &t->parts[t->n_parts - 1] : NULL;
}

static void close_current(srv_turn *t, const srv_turn_sink *sink, void *u) {
  srv_part *p = current(t);
  if (!p) return;
  p->open = false;
  if (sink && sink->close) sink->close(u, t, t->n_parts - 1);
}

/* Opens a part of this kind unless the open one is of it already. */
static srv_part *open_part(srv_turn *t, srv_part_kind kind, const srv_turn_sink *sink, void *u) {
  srv_part *p = current(t);
  if (p && p->kind == kind && kind != SRV_PART_CALL) return p;
  close_current(t, sink, u);
  if (t->n_parts == t->cap_parts) {
    int cap = t->cap_parts ? 2 * t->cap_parts : 4;
    srv_part *np = realloc(t->parts, (size_t)cap * sizeof *np);
    if (!np) return NULL;
    t->parts = np;
    t->cap_parts = cap;
  }
  p = &t->parts[t->n_parts++];
  memset(p, 0, sizeof *p);
  p->kind = kind;
  p->open = true;
  if (sink && sink->open && kind != SRV_PART_CALL) sink->open(u, t, t->n_parts - 1);
  return p;
}

static bool grow(srv_turn *t, srv_part_kind kind, const char *s, size_t have, size_t *sent,
                 const srv_turn_sink *sink, void *u) {
  if (have <= *sent) return true;
  srv_part *p = open_part(t, kind, sink, u);
  if (!p) return false;
  srv_buf_append(&p->text, s + *sent, have - *sent);
  if (p->text.failed) return false;
  if (sink && sink->delta) sink->delta(u, t, t->n_parts - 1, s + *sent, have - *sent);
  *sent = have;
  return true;
}

bool srv_turn_update(srv_turn *t, const srv_model_info *mi, const srv_job *j, const char *text,
                     size_t n, bool final, const srv_turn_sink *sink, void *u) {
  if (t->closed) return true;
  unsigned h = 2166136261u;
  for (const char *p = j->id; *p; p++) h = (h ^ (unsigned char)*p) * 16777619u;
  srv_out_opts opts = {.final = final,
                       .tools = j->req.tools,
                       .in_reasoning = j->req.in_reasoning,
                       .id_seed = h,
                       .tool_defs = t->tool_defs};
  srv_output o;
  if (!srv_output_parse(&mi->style, text ? text : "", n, &opts, &o)) return false;
  bool ok = grow(t, SRV_PART_REASONING, o.reasoning, o.n_reasoning, &t->n_reasoning, sink, u) &&
            grow(t, SRV_PART_TEXT, o.content, o.n_content, &t->n_content, sink, u);
  for (; ok && t->n_calls < o.n_calls; t->n_calls++) {
    if (t->max_calls > 0 && srv_turn_calls(t) >= t->max_calls) continue;
    const srv_tool_call *c = &o.calls[t->n_calls];
    srv_part *p = open_part(t, SRV_PART_CALL, sink, u);
    if (!p || !(p->name = strdup(c->name ? c->name : ""))) {
      ok = false;
      break;
    }
    snprintf(p->id, sizeof p->id, "%s", c->id);
    const char *args = c->arguments && c->arguments[0] ? c->arguments : "{}";
    srv_buf_append(&p->text, args, strlen(args));
    if (p->text.failed) {
      ok = false;
      break;
    }
    int k = t->n_parts - 1;
    if (sink && sink->open) sink->open(u, t, k);
    if (sink && sink->delta) sink->delta(u, t, k, p->text.p, p->text.n);
    close_current(t, sink, u);
  }
  srv_output_free(&o);
  if (!ok) return false;
  if (final) {
    if (t->n_parts == 0 && !open_part(t, SRV_PART_TEXT, sink, u)) return false;
    close_current(t, sink, u);
    t->closed = true;
  }
  return true;
}

int srv_turn_calls(const srv_turn *t) {
  int n = 0;
  for (int i = 0; i < t->n_parts; i++) n += t->parts[i].kind == SRV_PART_CALL;
  return n;
}

void srv_turn_free(srv_turn *t) {
  for (int i = 0; i < t->n_parts; i++) {
    srv_buf_free(&t->parts[i].text);
    free(t->parts[i].name);
  }
  free(t->parts);
  memset(t, 0, sizeof *t);
}

char *srv_job_text(srv_job *j, size_t *n, srv_finish *finish, srv_error *err) {
  pthread_mutex_lock(&j->mu);
  *n = j->n_text;
  char *s = malloc(j->n_text + 1);
  if (s) {
    if (j->n_text) memcpy(s, j->text, j->n_text);
    s[j->n_text] = 0;
  }
  *finish = j->finish;
  if (err) *err = j->error;
  pthread_mutex_unlock(&j->mu);
  return s;
}

const char *srv_call_name(const cJSON *assistant, const char *id) {
  const cJSON *tc;
  int k = 0;
  cJSON_ArrayForEach(tc, srv_json_field(assistant, "tool_calls")) {
    if (k++ == 256) break;
    const cJSON *tid = srv_json_field(tc, "id");
    const cJSON *name = srv_json_field(srv_json_field(tc, "function"), "name");
    if (cJSON_IsString(tid) && cJSON_IsString(name) && strcmp(tid->valuestring, id) == 0)
      return name->valuestring;
  }
  return NULL;
}

void srv_make_id(char *out, size_t size, const char *prefix) {
  static atomic_uint_fast64_t counter;
  uint64_t r[2];
  if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
    /* no entropy yet: a counter mixed with the clock is unique enough */
    r[0] = atomic_fetch_add(&counter, 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)time(NULL);
    r[1] = (uint64_t)clock() * 0xbf58476d1ce4e5b9ull ^ r[0] >> 29;
  }
  snprintf(out, size, "%s%016llx%08llx", prefix, (unsigned long long)r[0],
           (unsigned long long)(r[1] & 0xffffffffu));
}

bool srv_fit_context(const srv_model_info *mi, int64_t max_tokens, const char *param,
                     srv_request *r, srv_error *e) {
  if (r->n_prompt == 0) return BAD(e, param, "the prompt is empty");
  if (r->n_prompt >= mi->n_ctx)
    return srv_fail(e, 400, "invalid_request_error", "context_length_exceeded", param,
                    "the prompt has %d tokens but the context holds %d (the prompt and at least "
                    "one generated token must fit)",
                    r->n_prompt, mi->n_ctx);
  int64_t room = mi->n_ctx - r->n_prompt;
  r->max_tokens = (int32_t)(max_tokens > 0 && max_tokens < room ? max_tokens : room);
  return true;
}
