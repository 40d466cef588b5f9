/* job.c: the life of a job (one request between the HTTP thread and the
 * scheduler): creation, reference counting, and the output the scheduler
 * produces into it (text, logprobs, the finish). */
#include <limits.h>
#include <linux/futex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "server/request.h"
#include "server/server.h"

double srv_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int64_t srv_unix_time(void) {
  return (int64_t)time(NULL);
}

bool srv_fail(srv_error *e, int status, const char *type, const char *code, const char *param,
              const char *fmt, ...) {
  e->status = status;
  e->type = type;
  e->code = code;
  snprintf(e->param, sizeof e->param, "%s", param ? param : "");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->message, sizeof e->message, fmt, ap);
  va_end(ap);
  return false;
}

uint32_t srv_bell_epoch(srv_bell *b) {
  return atomic_load(&b->epoch);
}

void srv_bell_wait(srv_bell *b, uint32_t seen, int ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
  atomic_fetch_add(&b->sleepers, 1);
  /* returns at once when the epoch is no longer `seen` */
  syscall(SYS_futex, (uint32_t *)&b->epoch, FUTEX_WAIT_PRIVATE, seen, &ts, NULL, 0);
  atomic_fetch_sub(&b->sleepers, 1);
}

void srv_bell_ring(srv_bell *b) {
  atomic_fetch_add(&b->epoch, 1);
  /* a sleeper that registers after this load sees the new epoch */
  if (atomic_load(&b->sleepers) > 0)
    syscall(SYS_futex, (uint32_t *)&b->epoch, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

srv_job *srv_job_create(void) {
  srv_job *j = calloc(1, sizeof *j);
  if (!j) return NULL;
  pthread_mutex_init(&j->mu, NULL);
  pthread_cond_init(&j->cv, NULL);
  atomic_init(&j->cancelled, false);
  atomic_init(&j->refs, 1);
  j->bell = NULL;
  j->seq = -1;
  j->next_token = -1;
  j->created = srv_unix_time();
  return j;
}

void srv_job_retain(srv_job *j) {
  atomic_fetch_add(&j->refs, 1);
}

void srv_request_clear(srv_request *r) {
  free(r->prompt);
  for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
  free(r->model);
  free(r->grammar);
  cJSON_Delete(r->tool_defs);
  for (int i = 0; i < r->n_more; i++) free(r->prompts2[i]);
  free(r->prompts2);
  free(r->n_prompts2);
  free(r->bias_ids);
  free(r->bias);
  memset(r, 0, sizeof *r);
}

static void *dup_bytes(const void *p, size_t n) {
  void *q = malloc(n ? n : 1);
  if (q && n) memcpy(q, p, n);
  return q;
}

bool srv_request_clone(const srv_request *src, srv_request *dst) {
  *dst = *src;
  dst->prompt = NULL, dst->model = NULL, dst->grammar = NULL, dst->tool_defs = NULL;
  dst->bias_ids = NULL, dst->bias = NULL, dst->prompts2 = NULL, dst->n_prompts2 = NULL;
  dst->n_more = 0, dst->n_bias = 0, dst->n_stop = 0;
  bool ok = (dst->prompt = dup_bytes(src->prompt, (size_t)src->n_prompt * sizeof(int32_t))) &&
            (!src->model || (dst->model = strdup(src->model))) &&
            (!src->grammar || (dst->grammar = strdup(src->grammar))) &&
            (!src->tool_defs || (dst->tool_defs = cJSON_Duplicate(src->tool_defs, true)));
  for (int i = 0; ok && i < src->n_stop; i++)
    ok = (dst->stop[dst->n_stop++] = strdup(src->stop[i])) != NULL;
  if (ok && src->n_bias) {
    dst->bias_ids = dup_bytes(src->bias_ids, (size_t)src->n_bias * sizeof(int32_t));
    dst->bias = dup_bytes(src->bias, (size_t)src->n_bias * sizeof(float));
    ok = dst->bias_ids && dst->bias;
    dst->n_bias = src->n_bias;
  }
  if (!ok) srv_request_clear(dst);
  return ok;
}

void srv_job_release(srv_job *j) {
  if (!j || atomic_fetch_sub(&j->refs, 1) != 1) return;
  for (int i = 1; i < j->n_choices; i++) srv_job_release(j->choices[i]);
  free(j->choices);
  srv_request_clear(&j->req);
  pasada_sampler_free(j->sampler);
  srv_grammar_put(j->grammar);
  pasada_detok_free(j->detok);
  free(j->text);
  free(j->lp);
  free(j->held);
  free(j->embd);
  pthread_mutex_destroy(&j->mu);
  pthread_cond_destroy(&j->cv);
  free(j);
}

static bool grow(void **buf, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return true;
  size_t c = *cap ? *cap : 64;
  while (c < need) c *= 2;
  void *p = realloc(*buf, c * elem);
  if (!p) return false;
  *buf = p;
  *cap = c;
  return true;
}

bool srv_job_emit(srv_job *j, const char *text, size_t n, const srv_token_logprob *lp) {
  bool ok = true;
  pthread_mutex_lock(&j->mu);
  const bool was_empty = j->n_text == 0 && j->n_lp == 0;
  if (n && grow((void **)&j->text, &j->cap_text, j->n_text + n + 1, 1)) {
    memcpy(j->text + j->n_text, text, n);
    j->n_text += n;
    j->text[j->n_text] = 0;
  } else if (n) {
    ok = false;
  }
  if (lp && grow((void **)&j->lp, &j->cap_lp, j->n_lp + 1, sizeof *j->lp))
    j->lp[j->n_lp++] = *lp;
  else if (lp)
    ok = false;
  /* the first output on the condition variable (the reader waits there
   * until it has some: see wait_output in http.c), the rest by the bell */
  if (!j->bell || (was_empty && (j->n_text || j->n_lp))) pthread_cond_broadcast(&j->cv);
  pthread_mutex_unlock(&j->mu);
  return ok;
}

void srv_job_finish(srv_job *j, srv_finish why, const srv_error *err) {
  pthread_mutex_lock(&j->mu);
  if (j->finish == SRV_PENDING) {
    j->finish = why;
    if (why == SRV_FINISH_ERROR && err) j->error = *err;
    j->t_done = srv_now();
  }
  pthread_cond_broadcast(&j->cv);
  pthread_mutex_unlock(&j->mu);
  if (j->bell) srv_bell_ring(j->bell);
}

const char *srv_finish_name(srv_finish f) {
  switch (f) {
    case SRV_FINISH_STOP:
      return "stop";
    case SRV_FINISH_LENGTH:
      return "length";
    case SRV_FINISH_CANCELLED:
      return "cancelled";
    case SRV_FINISH_ERROR:
      return "error";
    default:
      return "pending";
  }
}
