/* scheduler.h: continuous batching. One thread owns the pasada_context; each
 * step it runs one pasada_decode over the next token of every generating
 * sequence plus a chunk of prompt tokens of the sequences being prefilled,
 * then samples for each sequence and appends the text to its job. Requests
 * wait in a bounded FIFO until a sequence slot and enough KV blocks are free. */
#ifndef PASADA_SERVER_SCHEDULER_H
#define PASADA_SERVER_SCHEDULER_H

#include "server/metrics.h"
#include "server/server.h"

typedef struct srv_sched srv_sched;

typedef struct {
  int32_t prefill_chunk; /* most prompt tokens per step (all prefilling sequences together) */
  int max_queue;         /* waiting jobs before submissions are refused */
  /* Speculative decoding: the mode of requests that do not choose
   * (pa_spec_mode), their draft length (0: the mode's,
   * pa_spec_default_draft_max), the draft model (NULL: none; its context has a sequence per
   * slot), and the most running sequences a step still drafts for (0:
   * SRV_SPEC_MAX_SEQS; past it the batch is compute-bound and drafts cost
   * more than they save). Draft tokens come out of the step's
   * prefill_chunk budget (at most half of it). */
  int spec_mode;
  int32_t draft_max;
  struct pa_spec_draft *draft;
  struct pa_spec_mtp *mtp; /* the model's multi-token-prediction drafter (NULL: none) */
  int32_t spec_max_seqs;
  /* a model with recurrent layers: the most tokens a step may draft (the
   * context's n_rollback - 1; 0: no speculation); -1: any */
  int32_t spec_limit;
} srv_sched_params;
#define SRV_SPEC_MAX_SEQS 1

/* The context must have been created with n_seq_max slots and a batch size
 * of at least n_seq_max + prefill_chunk; the scheduler uses it exclusively
 * from srv_sched_start until srv_sched_join returns. */
int srv_sched_create(const pasada_model *model, pasada_context *ctx, int32_t n_seq_max,
                     const srv_sched_params *params, srv_metrics *metrics, srv_sched **out);
int srv_sched_start(srv_sched *s);
void srv_sched_free(srv_sched *s);

typedef enum {
  SRV_SUBMIT_OK = 0,
  SRV_SUBMIT_QUEUE_FULL,
  SRV_SUBMIT_SHUTTING_DOWN
} srv_submit_result;
/* Queues a validated job (the scheduler takes its own reference). */
srv_submit_result srv_sched_submit(srv_sched *s, srv_job *j);
/* Queues n jobs at once, all or none (a request's choices or inputs): no
 * step of the scheduler sees some of them queued and not the others, and
 * past --max-queue (n more than the queue has room for) none is queued. */
srv_submit_result srv_sched_submit_all(srv_sched *s, srv_job *const *jobs, int n);
/* Marks the job cancelled; the scheduler frees its sequence at the next step. */
void srv_sched_cancel(srv_sched *s, srv_job *j);
/* Stops admitting work: waiting jobs fail with 503, running ones go on for
 * at most grace seconds and then finish with "length". Returns at once. */
void srv_sched_shutdown(srv_sched *s, double grace);
/* Runs fn(ctx, arg) on the scheduler thread between two steps, when the
 * context is the caller's to read (fn must be quick and must not decode),
 * and returns once it has run: true, or false when the scheduler has
 * stopped (fn did not run). */
bool srv_sched_call(srv_sched *s, void (*fn)(pasada_context *ctx, void *arg), void *arg);
/* Waits for the scheduler thread to end (after srv_sched_shutdown). */
void srv_sched_join(srv_sched *s);

#endif
