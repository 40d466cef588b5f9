/* output_whole.c: the families whose whole output is a sequence of addressed
 * messages rather than content with inline calls: gpt-oss's harmony
 * (<|channel|>analysis / final, to=functions.NAME), the ATEM protocol
 * (to=self / to=user / to=NAME) and functionary v3.2 (>>>recipient\n). */
#define _GNU_SOURCE /* memmem */
#include <stdlib.h>
#include <string.h>

#include "server/output_int.h"

/* The earliest terminator at or after i; next[] caches each one's next
 * position so that a scan over many messages stays linear. */
static size_t earliest(const op_state *p, size_t i, const char *const *terms, int n_terms,
                       size_t *next, size_t *len) {
  size_t best = p->n;
  *len = 0;
  for (int k = 0; k < n_terms; k++) {
    if (next[k] == (size_t)-1 || next[k] < i) next[k] = op_find(p, i, terms[k]);
    if (next[k] < best) {
      best = next[k];
      *len = strlen(terms[k]);
    }
  }
  return best;
}

static size_t hold(const op_state *p, size_t i, const char *const *terms, int n_terms) {
  size_t keep = 0;
  if (p->final) return 0;
  for (int k = 0; k < n_terms; k++) {
    size_t h = op_prefix_tail(p->t + i, p->n - i, terms[k]);
    if (h > keep) keep = h;
  }
  return keep;
}

/* The word after `key` in header h[0..n), or n0 = n1 when absent. */
static void header_word(const char *h, size_t n, const char *key, size_t *n0, size_t *n1) {
  const char *k = memmem(h, n, key, strlen(key));
  *n0 = *n1 = 0;
  if (!k) return;
  size_t i = (size_t)(k - h) + strlen(key), j = i;
  while (j < n && h[j] != ' ' && h[j] != '<' && h[j] != '\n') j++;
  *n0 = i;
  *n1 = j;
}

typedef enum { TO_CONTENT, TO_REASONING, TO_CALL } dest;

typedef struct {
  const char *msg;      /* ends a header */
  const char *terms[4]; /* end a message's body */
  int n_terms;
  bool atem; /* to=self / to=user / to=NAME with <atem:function_calls> */
} msg_spec;

static const msg_spec HARMONY = {
    "<|message|>", {"<|end|>", "<|call|>", "<|return|>", "<|start|>"}, 4, false};
static const msg_spec ATEM = {"<|message|>", {"<|eom|>", "<|eot|>", "<|start|>"}, 3, true};

static void emit(op_state *p, dest d, const char *s, size_t n, bool first) {
  srv_buf *b = d == TO_REASONING ? &p->reasoning : &p->content;
  if (first && b->n && n) srv_buf_append(b, "\n", 1); /* between two messages */
  if (d == TO_REASONING)
    op_reasoning(p, s, n);
  else
    op_content(p, s, n);
}

/* A call's body b[0..n) (terminated or final): listed, else content. */
static void call_body(op_state *p, const msg_spec *ms, const char *h, size_t r0, size_t r1,
                      size_t b0, size_t b1) {
  if (ms->atem) {
    size_t save_n = p->n, end = b0;
    bool save_final = p->final;
    size_t i = op_skip_ws(p, b0);
    p->n = b1;
    p->final = true;
    blk_rc rc = BLK_NOTCALL;
    if (op_at(p, i, "<atem:function_calls>", NULL))
      rc = op_atem_block(p, i, i + strlen("<atem:function_calls>"), &end);
    p->n = save_n;
    p->final = save_final;
    if (rc == BLK_DONE) {
      if (end < b1) op_content(p, p->t + end, b1 - end);
      return;
    }
    op_content(p, p->t + b0, b1 - b0);
    return;
  }
  const char *name = h + r0;
  size_t nn = r1 - r0;
  if (nn > 10 && !memcmp(name, "functions.", 10)) name += 10, nn -= 10;
  op_pending pd = {0};
  if (op_pend_text(p, &pd, name, nn, p->t + b0, b1 - b0))
    op_pend_commit(p, &pd);
  else
    op_content(p, p->t + b0, b1 - b0);
  op_pend_free(&pd);
}

static bool whole_messages(op_state *p, const msg_spec *ms) {
  size_t i = 0, next[4] = {(size_t)-1, (size_t)-1, (size_t)-1, (size_t)-1};
  while (i < p->n) {
    size_t h = op_find(p, i, ms->msg);
    if (h == p->n) { /* a header not yet whole; at the end: plain text */
      if (p->final) op_content(p, p->t + i, p->n - i);
      return true;
    }
    const char *hd = p->t + i;
    size_t hn = h - i, r0, r1, c0, c1;
    header_word(hd, hn, "to=", &r0, &r1);
    header_word(hd, hn, "<|channel|>", &c0, &c1);
    dest d = TO_CONTENT;
    if (ms->atem) {
      if (r1 - r0 == 4 && !memcmp(hd + r0, "self", 4))
        d = TO_REASONING;
      else if (r1 > r0 && !(r1 - r0 == 4 && !memcmp(hd + r0, "user", 4)))
        d = TO_CALL;
    } else if (r1 > r0) {
      d = TO_CALL;
    } else if (c1 - c0 == 8 && !memcmp(hd + c0, "analysis", 8)) {
      d = TO_REASONING;
    }
    if (d == TO_CALL && !p->o->tools) d = TO_CONTENT;
    size_t b = h + strlen(ms->msg), tl;
    size_t e = earliest(p, b, ms->terms, ms->n_terms, next, &tl);
    bool whole = e < p->n;
    if (!whole && d == TO_CALL && !p->final) return true; /* the call is not complete */
    if (!whole) e = p->n - hold(p, b, ms->terms, ms->n_terms);
    if (d == TO_CALL)
      call_body(p, ms, hd, r0, r1, b, e);
    else
      emit(p, d, p->t + b, e - b, true);
    if (!whole) return true;
    i = e + tl; /* after <|start|> comes the next header's role */
  }
  return true;
}

bool op_whole_harmony(op_state *p) {
  return whole_messages(p, &HARMONY);
}
bool op_whole_atem(op_state *p) {
  return whole_messages(p, &ATEM);
}

static bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

/* functionary v3.2: the prompt ends in ">>>"; each segment is a recipient
 * line ("all" for the user) and its text, up to the next ">>>". */
bool op_whole_functionary(op_state *p) {
  static const char *const sep[] = {">>>"};
  size_t i = 0;
  while (i < p->n) {
    size_t nl = op_name_end(p, i, "\n");
    if (nl == p->n && !p->final) return true;
    size_t k = i;
    while (k < nl && k < p->n && name_char(p->t[k])) k++;
    bool header = nl != (size_t)-1 && nl < p->n && k == nl && k > i;
    bool all = header && nl - i == 3 && !memcmp(p->t + i, "all", 3);
    size_t b = header ? nl + 1 : i;
    size_t nx = op_find(p, b, ">>>");
    if (!header || all || !p->o->tools) {
      size_t from = all ? b : i;
      size_t e = nx < p->n ? nx : p->n - hold(p, from, sep, 1);
      if (i > 0 && !all && header) op_content(p, ">>>", 3);
      op_content(p, p->t + from, e - from);
      if (nx == p->n) return true;
      i = nx + 3;
      continue;
    }
    if (nx == p->n && !p->final) return true;
    op_pending pd = {0};
    bool ok = op_pend_text(p, &pd, p->t + i, nl - i, p->t + b, nx - b);
    if (!ok && !p->oom && nl - i == 6 && !memcmp(p->t + i, "python", 6)) {
      cJSON *a = cJSON_CreateObject();
      char *code = malloc(nx - b + 1);
      if (a && code) {
        memcpy(code, p->t + b, nx - b);
        code[nx - b] = 0;
        ok = cJSON_AddStringToObject(a, "code", code) && op_pend_obj(p, &pd, "python", 6, a);
      } else {
        p->oom = true;
      }
      free(code);
      cJSON_Delete(a);
    }
    if (ok)
      op_pend_commit(p, &pd);
    else
      op_content(p, p->t + i, nx - i);
    op_pend_free(&pd);
    i = nx < p->n ? nx + 3 : p->n;
  }
  return true;
}
