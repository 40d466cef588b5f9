/* responses_out.c: a Responses API job into its response object and
 * stream events (see responses.h). The turn tracker's parts are the output
 * items in order (reasoning, message, function_call); an item's id derives
 * from the response's id and its index, so the streamed items and the
 * final object name them alike. A finished response is stored with the
 * conversation that continues from it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/responses.h"
#include "server/json_util.h"

/* "msg_" / "rs_" / "fc_" + the response id's random part + the index. */
static void item_id(const srv_job *j, const srv_part *p, int k, char *out, size_t size) {
  static const char *const prefix[] = {
      [SRV_PART_REASONING] = "rs", [SRV_PART_TEXT] = "msg", [SRV_PART_CALL] = "fc"};
  const char *base = strncmp(j->id, "resp_", 5) == 0 ? j->id + 5 : j->id;
  snprintf(out, size, "%s_%s%02d", prefix[p->kind], base, k);
}

/* The generated tokens' logprobs (a copy), when the request asked for
 * them: every token of the output, as /v1/chat/completions lists them. */
typedef struct {
  const srv_model_info *mi;
  srv_token_logprob *v;
  size_t n;
} lp_list;

static void job_lps(const srv_model_info *mi, srv_job *j, lp_list *l) {
  *l = (lp_list){.mi = mi};
  if (!j->req.logprobs) return;
  pthread_mutex_lock(&j->mu);
  if (j->n_lp && (l->v = malloc(j->n_lp * sizeof *l->v))) {
    memcpy(l->v, j->lp, j->n_lp * sizeof *l->v);
    l->n = j->n_lp;
  }
  pthread_mutex_unlock(&j->mu);
}

/* tokens [from, l->n) as an event's or a part's logprobs array */
static cJSON *lp_json(const lp_list *l, size_t from, bool bytes) {
  if (!l || !l->v || from >= l->n) return cJSON_CreateArray();
  return srv_logprobs_json(l->mi, l->v + from, l->n - from, bytes);
}

/* The message's first text part carries the logprobs (l: NULL for the others). */
static int first_text(const srv_turn *t) {
  for (int k = 0; t && k < t->n_parts; k++)
    if (t->parts[k].kind == SRV_PART_TEXT) return k;
  return -1;
}

static cJSON *text_part(const char *s, size_t n, bool reasoning, const lp_list *l) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "type", reasoning ? "reasoning_text" : "output_text");
  cJSON_AddItemToObject(o, "text", srv_json_text(s, n));
  if (!reasoning) {
    cJSON_AddArrayToObject(o, "annotations");
    cJSON_AddItemToObject(o, "logprobs", lp_json(l, 0, true));
  }
  return o;
}

/* An output item; whole: with its text and final status, else as
 * output_item.added shows it. */
static cJSON *item_json(const srv_job *j, const srv_part *p, int k, bool whole,
                        const char *status, const lp_list *l) {
  char id[96];
  item_id(j, p, k, id, sizeof id);
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "id", id);
  if (!whole) status = "in_progress";
  if (p->kind == SRV_PART_TEXT) {
    cJSON_AddStringToObject(o, "type", "message");
    cJSON_AddStringToObject(o, "status", status);
    cJSON_AddStringToObject(o, "role", "assistant");
    cJSON *c = cJSON_AddArrayToObject(o, "content");
    if (whole) cJSON_AddItemToArray(c, text_part(p->text.p, p->text.n, false, l));
  } else if (p->kind == SRV_PART_REASONING) {
    cJSON_AddStringToObject(o, "type", "reasoning");
    cJSON_AddStringToObject(o, "status", status);
    cJSON_AddArrayToObject(o, "summary");
    cJSON *c = cJSON_AddArrayToObject(o, "content");
    if (whole) cJSON_AddItemToArray(c, text_part(p->text.p, p->text.n, true, NULL));
  } else {
    cJSON_AddStringToObject(o, "type", "function_call");
    cJSON_AddStringToObject(o, "status", status);
    cJSON_AddStringToObject(o, "call_id", p->id);
    cJSON_AddItemToObject(o, "name", srv_json_text(p->name, strlen(p->name)));
    cJSON_AddItemToObject(o, "arguments",
                          whole ? srv_json_text(p->text.p, p->text.n) : srv_json_text("", 0));
  }
  return o;
}

static int32_t reasoning_tokens(const srv_model_info *mi, const srv_turn *t) {
  int32_t n = 0;
  for (int i = 0; i < t->n_parts; i++) {
    if (t->parts[i].kind != SRV_PART_REASONING || !t->parts[i].text.n) continue;
    int32_t *ids = NULL;
    size_t k = 0;
    if (pasada_tokenize(mi->tok, t->parts[i].text.p, t->parts[i].text.n, false, false, &ids, &k) ==
        PASADA_OK)
      n += (int32_t)k;
    pasada_text_free(ids);
  }
  return n;
}

/* The response object; status "in_progress" (no output, no usage yet),
 * else from the job's finish. Call with j->mu not held. */
static cJSON *response_json(const srv_model_info *mi, srv_job *j, const srv_resp *rs,
                            const srv_turn *t, const char *status) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "id", j->id);
  cJSON_AddStringToObject(o, "object", "response");
  cJSON_AddNumberToObject(o, "created_at", (double)j->created);
  cJSON_AddStringToObject(o, "status", status);
  bool done = strcmp(status, "completed") == 0 || strcmp(status, "incomplete") == 0;
  if (done) cJSON_AddNumberToObject(o, "completed_at", (double)srv_unix_time());
  cJSON_AddNullToObject(o, "error");
  if (strcmp(status, "incomplete") == 0)
    cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "incomplete_details"), "reason",
                            "max_output_tokens");
  else
    cJSON_AddNullToObject(o, "incomplete_details");
  cJSON_AddStringToObject(o, "model", j->req.model);
  cJSON *out = cJSON_AddArrayToObject(o, "output");
  /* items are whole when listed; a cut response says so in its status */
  lp_list l = {0};
  if (t && done) job_lps(mi, j, &l);
  const int ft = first_text(t);
  for (int k = 0; t && done && k < t->n_parts; k++)
    cJSON_AddItemToArray(out, item_json(j, &t->parts[k], k, true, "completed", k == ft ? &l : NULL));
  free(l.v);
  for (const cJSON *f = rs->echo ? rs->echo->child : NULL; f; f = f->next)
    cJSON_AddItemToObject(o, f->string, cJSON_Duplicate(f, true));
  if (!done) {
    cJSON_AddNullToObject(o, "usage");
    return o;
  }
  int32_t reasoning = reasoning_tokens(mi, t);
  pthread_mutex_lock(&j->mu);
  cJSON *u = cJSON_AddObjectToObject(o, "usage");
  cJSON_AddNumberToObject(u, "input_tokens", j->req.n_prompt);
  cJSON *d = cJSON_AddObjectToObject(u, "input_tokens_details");
  cJSON_AddNumberToObject(d, "cached_tokens", j->n_cached);
  cJSON_AddNumberToObject(d, "cache_write_tokens", 0);
  cJSON_AddNumberToObject(u, "output_tokens", j->n_generated);
  d = cJSON_AddObjectToObject(u, "output_tokens_details");
  cJSON_AddNumberToObject(d, "reasoning_tokens", reasoning);
  cJSON_AddNumberToObject(u, "total_tokens", j->req.n_prompt + j->n_generated);
  pthread_mutex_unlock(&j->mu);
  return o;
}

static const char *final_status(srv_finish f) {
  return f == SRV_FINISH_LENGTH ? "incomplete" : "completed";
}

/* The conversation that continues from this response: the rendered one
 * and the output as one assistant message. */
static char *continued(const srv_resp *rs, const srv_turn *t) {
  cJSON *msgs = cJSON_Duplicate(rs->conversation, true);
  if (!msgs) return NULL;
  srv_buf text = {0}, reasoning = {0};
  cJSON *calls = cJSON_CreateArray();
  for (int k = 0; k < t->n_parts; k++) {
    const srv_part *p = &t->parts[k];
    if (p->kind == SRV_PART_TEXT) srv_buf_append(&text, p->text.p, p->text.n);
    if (p->kind == SRV_PART_REASONING) srv_buf_append(&reasoning, p->text.p, p->text.n);
    if (p->kind != SRV_PART_CALL) continue;
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "id", p->id);
    cJSON_AddStringToObject(c, "type", "function");
    cJSON *fn = cJSON_AddObjectToObject(c, "function");
    cJSON_AddItemToObject(fn, "name", srv_json_text(p->name, strlen(p->name)));
    cJSON_AddItemToObject(fn, "arguments", srv_json_text(p->text.p, p->text.n));
    cJSON_AddItemToArray(calls, c);
  }
  cJSON *m = cJSON_CreateObject();
  cJSON_AddStringToObject(m, "role", "assistant");
  cJSON_AddItemToObject(m, "content", srv_json_text(text.p, text.n));
  if (reasoning.n)
    cJSON_AddItemToObject(m, "reasoning_content", srv_json_text(reasoning.p, reasoning.n));
  if (cJSON_GetArraySize(calls)) {
    cJSON_AddItemToObject(m, "tool_calls", calls);
    calls = NULL;
  }
  cJSON_Delete(calls);
  cJSON_AddItemToArray(msgs, m);
  srv_buf_free(&text);
  srv_buf_free(&reasoning);
  return srv_json_print(msgs);
}

static void store_response(srv_resp_store *store, const srv_resp *rs, const srv_job *j,
                           const char *response, const srv_turn *t) {
  if (!store || !rs->store || !response) return;
  char *copy = strdup(response);
  srv_resp_store_put(store, j->id, copy, copy ? continued(rs, t) : NULL);
}

char *srv_responses_response(const srv_model_info *mi, srv_job *j, srv_resp *rs,
                             srv_resp_store *store) {
  size_t n;
  srv_finish f;
  char *text = srv_job_text(j, &n, &f, NULL);
  srv_turn t = {.max_calls = rs->max_calls, .tool_defs = rs->tools};
  bool ok = text && srv_turn_update(&t, mi, j, text, n, true, NULL, NULL);
  free(text);
  char *out = ok ? srv_json_print(response_json(mi, j, rs, &t, final_status(f))) : NULL;
  store_response(store, rs, j, out, &t);
  srv_turn_free(&t);
  return out;
}

/* ---- streaming ---- */

typedef struct {
  srv_buf *out;
  srv_resp *rs;
  const srv_job *j;
  lp_list lps; /* the tokens so far; rs->lp_sent of them went out in deltas */
} sink_ctx;

static void event(sink_ctx *c, const char *type, cJSON *ev) {
  cJSON_AddStringToObject(ev, "type", type);
  cJSON_AddNumberToObject(ev, "sequence_number", c->rs->seq++);
  char *s = srv_json_print(ev);
  if (!s) {
    c->out->failed = true;
    return;
  }
  srv_buf_printf(c->out, "event: %s\ndata: ", type);
  srv_buf_append(c->out, s, strlen(s));
  srv_buf_append(c->out, "\n\n", 2);
  free(s);
}

/* An event about part k: {item_id, output_index[, content_index]}. */
static cJSON *part_event(const sink_ctx *c, const srv_turn *t, int k, bool content) {
  char id[96];
  item_id(c->j, &t->parts[k], k, id, sizeof id);
  cJSON *ev = cJSON_CreateObject();
  cJSON_AddStringToObject(ev, "item_id", id);
  cJSON_AddNumberToObject(ev, "output_index", k);
  if (content) cJSON_AddNumberToObject(ev, "content_index", 0);
  return ev;
}

static void on_open(void *u, const srv_turn *t, int k) {
  sink_ctx *c = u;
  const srv_part *p = &t->parts[k];
  cJSON *ev = cJSON_CreateObject();
  cJSON_AddNumberToObject(ev, "output_index", k);
  cJSON_AddItemToObject(ev, "item", item_json(c->j, p, k, false, NULL, NULL));
  event(c, "response.output_item.added", ev);
  if (p->kind == SRV_PART_CALL) return;
  ev = part_event(c, t, k, true);
  cJSON_AddItemToObject(ev, "part", text_part("", 0, p->kind == SRV_PART_REASONING, NULL));
  event(c, "response.content_part.added", ev);
}

static void on_delta(void *u, const srv_turn *t, int k, const char *s, size_t n) {
  sink_ctx *c = u;
  srv_part_kind kind = t->parts[k].kind;
  cJSON *ev = part_event(c, t, k, kind != SRV_PART_CALL);
  cJSON_AddItemToObject(ev, "delta", srv_json_text(s, n));
  if (kind == SRV_PART_TEXT) {
    /* the tokens generated since the last text delta */
    const bool first = k == first_text(t);
    cJSON_AddItemToObject(ev, "logprobs", lp_json(first ? &c->lps : NULL, c->rs->lp_sent, false));
    if (first && c->lps.n > c->rs->lp_sent) c->rs->lp_sent = c->lps.n;
  }
  event(c,
        kind == SRV_PART_TEXT        ? "response.output_text.delta"
        : kind == SRV_PART_REASONING ? "response.reasoning_text.delta"
                                     : "response.function_call_arguments.delta",
        ev);
}

static void on_close(void *u, const srv_turn *t, int k) {
  sink_ctx *c = u;
  const srv_part *p = &t->parts[k];
  if (p->kind == SRV_PART_CALL) {
    cJSON *ev = part_event(c, t, k, false);
    cJSON_AddItemToObject(ev, "name", srv_json_text(p->name, strlen(p->name)));
    cJSON_AddItemToObject(ev, "arguments", srv_json_text(p->text.p, p->text.n));
    event(c, "response.function_call_arguments.done", ev);
  } else {
    bool r = p->kind == SRV_PART_REASONING;
    const lp_list *l = k == first_text(t) ? &c->lps : NULL;
    cJSON *ev = part_event(c, t, k, true);
    cJSON_AddItemToObject(ev, "text", srv_json_text(p->text.p, p->text.n));
    if (!r) cJSON_AddItemToObject(ev, "logprobs", lp_json(l, 0, false));
    event(c, r ? "response.reasoning_text.done" : "response.output_text.done", ev);
    ev = part_event(c, t, k, true);
    cJSON_AddItemToObject(ev, "part", text_part(p->text.p, p->text.n, r, l));
    event(c, "response.content_part.done", ev);
  }
  cJSON *ev = cJSON_CreateObject();
  cJSON_AddNumberToObject(ev, "output_index", k);
  cJSON_AddItemToObject(ev, "item",
                        item_json(c->j, p, k, true, "completed",
                                  k == first_text(t) ? &c->lps : NULL));
  event(c, "response.output_item.done", ev);
}

bool srv_responses_stream_next(const srv_model_info *mi, srv_job *j, srv_resp *rs,
                               srv_resp_store *store, srv_buf *out) {
  if (rs->ended) return true;
  sink_ctx c = {.out = out, .rs = rs, .j = j};
  if (!rs->started) {
    cJSON *ev = cJSON_CreateObject();
    cJSON_AddItemToObject(ev, "response", response_json(mi, j, rs, NULL, "in_progress"));
    event(&c, "response.created", ev);
    ev = cJSON_CreateObject();
    cJSON_AddItemToObject(ev, "response", response_json(mi, j, rs, NULL, "in_progress"));
    event(&c, "response.in_progress", ev);
    rs->started = true;
  }
  size_t n;
  srv_finish f;
  srv_error err;
  job_lps(mi, j, &c.lps); /* before the text: no token listed before its text */
  char *text = srv_job_text(j, &n, &f, &err);
  if (!text || f == SRV_FINISH_ERROR) {
    free(c.lps.v);
    c.lps.v = NULL;
  }
  if (!text) {
    out->failed = true;
    return true;
  }
  if (f == SRV_FINISH_ERROR) {
    free(text);
    cJSON *ev = cJSON_CreateObject();
    if (err.code)
      cJSON_AddStringToObject(ev, "code", err.code);
    else
      cJSON_AddStringToObject(ev, "code", err.status >= 500 ? "server_error" : "invalid_request");
    cJSON_AddStringToObject(ev, "message", err.message);
    if (err.param[0])
      cJSON_AddStringToObject(ev, "param", err.param);
    else
      cJSON_AddNullToObject(ev, "param");
    event(&c, "error", ev);
    cJSON *resp = response_json(mi, j, rs, NULL, "failed");
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "code", err.status >= 500 ? "server_error" : "invalid_prompt");
    cJSON_AddStringToObject(e, "message", err.message);
    cJSON_ReplaceItemInObject(resp, "error", e);
    ev = cJSON_CreateObject();
    cJSON_AddItemToObject(ev, "response", resp);
    event(&c, "response.failed", ev);
    rs->ended = true;
    return true;
  }
  const srv_turn_sink sink = {on_open, on_delta, on_close};
  bool final = f != SRV_PENDING;
  if (final) { /* nothing is emitted after the finish: all the tokens */
    free(c.lps.v);
    job_lps(mi, j, &c.lps);
  }
  if (!srv_turn_update(&rs->turn, mi, j, text, n, final, &sink, &c)) out->failed = true;
  free(c.lps.v);
  free(text);
  if (!final) return false;
  const char *status = final_status(f);
  cJSON *resp = response_json(mi, j, rs, &rs->turn, status);
  char *s = cJSON_PrintUnformatted(resp);
  store_response(store, rs, j, s, &rs->turn);
  free(s);
  cJSON *ev = cJSON_CreateObject();
  cJSON_AddItemToObject(ev, "response", resp);
  event(&c, strcmp(status, "completed") == 0 ? "response.completed" : "response.incomplete", ev);
  rs->ended = true;
  return true;
}
