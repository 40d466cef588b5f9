/* metrics.h: the server's counters, gauges and latency histograms, rendered
 * in the Prometheus text format for GET /metrics. Every function is
 * thread-safe (one mutex; updates are a few additions). */
#ifndef PASADA_SERVER_METRICS_H
#define PASADA_SERVER_METRICS_H

#include "server/server.h"

typedef struct srv_metrics srv_metrics;

srv_metrics *srv_metrics_create(void);
void srv_metrics_free(srv_metrics *m);

/* One HTTP response, by endpoint (the route, or "other") and status. */
void srv_metrics_request(srv_metrics *m, const char *endpoint, int status);
/* A job the scheduler finished: its token counts and end-to-end time. */
void srv_metrics_job_done(srv_metrics *m, srv_finish why, int32_t prompt_tokens,
                          int32_t cached_tokens, int32_t generated_tokens, double seconds);
void srv_metrics_ttft(srv_metrics *m, double seconds);
void srv_metrics_itl(srv_metrics *m, double seconds);
/* One scheduler step: tokens in the batch and its duration. */
void srv_metrics_step(srv_metrics *m, int32_t n_tokens, double seconds);
/* The scheduler's view after a step. */
void srv_metrics_gauges(srv_metrics *m, int queue_depth, int running, const pasada_kv_stats *kv);
void srv_metrics_rejected(srv_metrics *m, const char *reason); /* "queue_full", ... */
/* One verification of a sequence's drafts: its pa_spec_mode (lookup,
 * draft, mtp), the drafts judged and how many were accepted. */
void srv_metrics_spec(srv_metrics *m, int mode, int32_t drafted, int32_t accepted);
/* The last gauges the scheduler reported (readiness reads the queue);
 * kv may be NULL. */
void srv_metrics_load(srv_metrics *m, int *queue_depth, int *running, pasada_kv_stats *kv);

/* The whole exposition as a malloc'd string (NULL when out of memory). */
char *srv_metrics_render(srv_metrics *m);

#endif
