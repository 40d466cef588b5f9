/* metrics.c: counters, gauges and histograms of the server, and their
 * Prometheus text exposition (version 0.0.4). Label sets are small and
 * fixed-size tables, so an update never allocates. */
#include <stdlib.h>
#include <string.h>

#include "server/metrics.h"

#define N_BUCKETS_MAX 16
#define N_REQUEST_ROWS 64
#define N_REASONS 5

typedef struct {
  int n;
  double bound[N_BUCKETS_MAX];
  uint64_t count[N_BUCKETS_MAX]; /* per bucket (not cumulative) */
  uint64_t total;
  double sum;
} histogram;

typedef struct {
  char endpoint[32];
  int status;
  uint64_t n;
} request_row;

struct srv_metrics {
  pthread_mutex_t mu;
  request_row requests[N_REQUEST_ROWS];
  int n_requests;
  uint64_t finished[N_REASONS];
  uint64_t prompt_tokens, cached_tokens, generated_tokens;
  uint64_t steps, step_tokens;
  double step_seconds;
  uint64_t rejected_queue_full;
  uint64_t spec_steps[4], spec_drafted[4], spec_accepted[4]; /* by pa_spec_mode */
  histogram ttft, itl, e2e;
  int queue_depth, running;
  pasada_kv_stats kv;
};

static void hist_init(histogram *h, const double *bounds, int n) {
  memset(h, 0, sizeof *h);
  h->n = n;
  memcpy(h->bound, bounds, (size_t)n * sizeof *bounds);
}

static void hist_add(histogram *h, double v) {
  int i = 0;
  while (i < h->n && v > h->bound[i]) i++;
  if (i < h->n) h->count[i]++;
  h->total++;
  h->sum += v;
}

srv_metrics *srv_metrics_create(void) {
  srv_metrics *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  pthread_mutex_init(&m->mu, NULL);
  static const double ttft[] = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60};
  static const double itl[] = {0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5};
  static const double e2e[] = {0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
  hist_init(&m->ttft, ttft, (int)(sizeof ttft / sizeof *ttft));
  hist_init(&m->itl, itl, (int)(sizeof itl / sizeof *itl));
  hist_init(&m->e2e, e2e, (int)(sizeof e2e / sizeof *e2e));
  return m;
}

void srv_metrics_free(srv_metrics *m) {
  if (!m) return;
  pthread_mutex_destroy(&m->mu);
  free(m);
}

void srv_metrics_request(srv_metrics *m, const char *endpoint, int status) {
  pthread_mutex_lock(&m->mu);
  int i = 0;
  for (; i < m->n_requests; i++)
    if (m->requests[i].status == status && strcmp(m->requests[i].endpoint, endpoint) == 0) break;
  if (i == m->n_requests && m->n_requests < N_REQUEST_ROWS) {
    request_row *r = &m->requests[m->n_requests++];
    strncpy(r->endpoint, endpoint, sizeof r->endpoint - 1);
    r->status = status;
  }
  if (i < m->n_requests) m->requests[i].n++;
  pthread_mutex_unlock(&m->mu);
}

void srv_metrics_job_done(srv_metrics *m, srv_finish why, int32_t prompt_tokens,
                          int32_t cached_tokens, int32_t generated_tokens, double seconds) {
  pthread_mutex_lock(&m->mu);
  if ((int)why > 0 && (int)why <= N_REASONS) m->finished[why - 1]++;
  m->prompt_tokens += (uint64_t)prompt_tokens;
  m->cached_tokens += (uint64_t)cached_tokens;
  m->generated_tokens += (uint64_t)generated_tokens;
  hist_add(&m->e2e, seconds);
  pthread_mutex_unlock(&m->mu);
}

void srv_metrics_ttft(srv_metrics *m, double seconds) {
  pthread_mutex_lock(&m->mu);
  hist_add(&m->ttft, seconds);
  pthread_mutex_unlock(&m->mu);
}

void srv_metrics_itl(srv_metrics *m, double seconds) {
  pthread_mutex_lock(&m->mu);
  hist_add(&m->itl, seconds);
  pthread_mutex_unlock(&m->mu);
}

void srv_metrics_step(srv_metrics *m, int32_t n_tokens, double seconds) {
  pthread_mutex_lock(&m->mu);
  m->steps++;
  m->step_tokens += (uint64_t)n_tokens;
  m->step_seconds += seconds;
  pthread_mutex_unlock(&m->mu);
}

void srv_metrics_gauges(srv_metrics *m, int queue_depth, int running, const pasada_kv_stats *kv) {
  pthread_mutex_lock(&m->mu);
  m->queue_depth = queue_depth;
  m->running = running;
  if (kv) m->kv = *kv;
  pthread_mutex_unlock(&m->mu);
}

void srv_metrics_spec(srv_metrics *m, int mode, int32_t drafted, int32_t accepted) {
  if (mode < 1 || mode > 3) return;
  pthread_mutex_lock(&m->mu);
  m->spec_steps[mode]++;
  m->spec_drafted[mode] += (uint64_t)drafted;
  m->spec_accepted[mode] += (uint64_t)accepted;
  pthread_mutex_unlock(&m->mu);
}

void srv_metrics_rejected(srv_metrics *m, const char *reason) {
  pthread_mutex_lock(&m->mu);
  if (strcmp(reason, "queue_full") == 0) m->rejected_queue_full++;
  pthread_mutex_unlock(&m->mu);
}

static void header(srv_buf *b, const char *name, const char *type, const char *help) {
  srv_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void counter(srv_buf *b, const char *name, const char *help, uint64_t v) {
  header(b, name, "counter", help);
  srv_buf_printf(b, "%s %llu\n", name, (unsigned long long)v);
}

static void gauge(srv_buf *b, const char *name, const char *help, double v) {
  header(b, name, "gauge", help);
  srv_buf_printf(b, "%s %.17g\n", name, v);
}

static void hist(srv_buf *b, const char *name, const char *help, const histogram *h) {
  header(b, name, "histogram", help);
  uint64_t cum = 0;
  for (int i = 0; i < h->n; i++) {
    cum += h->count[i];
    srv_buf_printf(b, "%s_bucket{le=\"%g\"} %llu\n", name, h->bound[i], (unsigned long long)cum);
  }
  srv_buf_printf(b, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)h->total);
  srv_buf_printf(b, "%s_sum %.17g\n%s_count %llu\n", name, h->sum, name,
                 (unsigned long long)h->total);
}

/* Blocks held by running sequences over the pool (cached-but-unused
 * blocks count as free: the pool can take them), vLLM's KV usage. */
static double usage(const srv_metrics *m) {
  int32_t used = m->kv.n_blocks - m->kv.n_free - m->kv.n_cached;
  return m->kv.n_blocks > 0 ? (double)used / m->kv.n_blocks : 0.0;
}

/* The names routers scrape, with the types and meanings of the Gateway API
 * Inference Extension's model-server protocol (vLLM's names, which its
 * endpoint picker reads; the older vllm:gpu_cache_usage_perc too) and
 * SGLang's for the same three gauges; pasada's own names above carry the
 * same values. */
static void render_router_names(srv_buf *b, const srv_metrics *m) {
  const double u = usage(m);
  gauge(b, "vllm:num_requests_waiting", "Requests waiting to be processed.", m->queue_depth);
  gauge(b, "vllm:num_requests_running", "Requests in the running batch.", m->running);
  gauge(b, "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", u);
  gauge(b, "vllm:gpu_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", u);
  header(b, "vllm:cache_config_info", "gauge", "Information of the KV cache's configuration.");
  srv_buf_printf(b, "vllm:cache_config_info{block_size=\"%d\",num_gpu_blocks=\"%d\"} 1\n",
                 m->kv.block_size, m->kv.n_blocks);
  counter(b, "vllm:prefix_cache_queries_total",
          "Prefix cache queries, in terms of number of queried tokens.", m->prompt_tokens);
  counter(b, "vllm:prefix_cache_hits_total",
          "Prefix cache hits, in terms of number of cached tokens.", m->cached_tokens);
  counter(b, "vllm:prompt_tokens_total", "Number of prefill tokens processed.", m->prompt_tokens);
  counter(b, "vllm:generation_tokens_total", "Number of generation tokens processed.",
          m->generated_tokens);
  gauge(b, "sglang:num_queue_reqs", "The number of requests in the waiting queue.", m->queue_depth);
  gauge(b, "sglang:num_running_reqs", "The number of running requests.", m->running);
  gauge(b, "sglang:token_usage", "The token usage (fraction of the KV pool in use).", u);
}

void srv_metrics_load(srv_metrics *m, int *queue_depth, int *running, pasada_kv_stats *kv) {
  pthread_mutex_lock(&m->mu);
  *queue_depth = m->queue_depth;
  *running = m->running;
  if (kv) *kv = m->kv;
  pthread_mutex_unlock(&m->mu);
}

char *srv_metrics_render(srv_metrics *m) {
  srv_buf b = {0};
  pthread_mutex_lock(&m->mu);
  header(&b, "pasada_requests_total", "counter", "HTTP responses by endpoint and status.");
  for (int i = 0; i < m->n_requests; i++)
    srv_buf_printf(&b, "pasada_requests_total{endpoint=\"%s\",status=\"%d\"} %llu\n",
                   m->requests[i].endpoint, m->requests[i].status,
                   (unsigned long long)m->requests[i].n);
  static const char *reasons[N_REASONS] = {"stop", "length", "cancelled", "error", "other"};
  header(&b, "pasada_requests_finished_total", "counter",
         "Generation requests the scheduler finished, by reason.");
  for (int i = 0; i < 4; i++)
    srv_buf_printf(&b, "pasada_requests_finished_total{reason=\"%s\"} %llu\n", reasons[i],
                   (unsigned long long)m->finished[i]);
  counter(&b, "pasada_requests_rejected_queue_full_total",
          "Requests answered 429 because the waiting queue was full.", m->rejected_queue_full);
  static const char *modes[4] = {"off", "lookup", "draft", "mtp"};
  const struct {
    const char *name, *help;
    const uint64_t *v;
  } spec[] = {{"pasada_spec_steps_total",
               "Speculative verifications of a sequence's drafts, by drafter.", m->spec_steps},
              {"pasada_spec_draft_tokens_total",
               "Drafted tokens the verifications judged, by drafter.", m->spec_drafted},
              {"pasada_spec_accepted_tokens_total", "Drafted tokens accepted, by drafter.",
               m->spec_accepted}};
  for (size_t k = 0; k < sizeof spec / sizeof spec[0]; k++) {
    header(&b, spec[k].name, "counter", spec[k].help);
    for (int i = 1; i < 4; i++)
      srv_buf_printf(&b, "%s{mode=\"%s\"} %llu\n", spec[k].name, modes[i],
                     (unsigned long long)spec[k].v[i]);
  }
  counter(&b, "pasada_prompt_tokens_total", "Prompt tokens of finished requests.",
          m->prompt_tokens);
  counter(&b, "pasada_generation_tokens_total", "Tokens generated (sampled).", m->generated_tokens);
  counter(&b, "pasada_prefix_cache_hit_tokens_total",
          "Prompt tokens whose KV entries came from the prefix cache.", m->cached_tokens);
  counter(&b, "pasada_scheduler_steps_total", "Batched forward passes.", m->steps);
  counter(&b, "pasada_scheduler_step_tokens_total", "Tokens in all batched forward passes.",
          m->step_tokens);
  header(&b, "pasada_scheduler_step_seconds_total", "counter", "Time spent in forward passes.");
  srv_buf_printf(&b, "pasada_scheduler_step_seconds_total %.17g\n", m->step_seconds);
  hist(&b, "pasada_time_to_first_token_seconds", "From submission to the first sampled token.",
       &m->ttft);
  hist(&b, "pasada_inter_token_latency_seconds", "Between successive tokens of a request.",
       &m->itl);
  hist(&b, "pasada_request_duration_seconds", "From submission to the finish.", &m->e2e);
  gauge(&b, "pasada_queue_depth", "Requests waiting for admission.", m->queue_depth);
  gauge(&b, "pasada_running_sequences", "Sequences in the running batch.", m->running);
  int32_t used = m->kv.n_blocks - m->kv.n_free - m->kv.n_cached;
  gauge(&b, "pasada_kv_blocks_total", "KV cache blocks in the pool.", m->kv.n_blocks);
  gauge(&b, "pasada_kv_blocks_used", "KV blocks held by running sequences.", used);
  gauge(&b, "pasada_kv_blocks_free", "KV blocks neither used nor cached.", m->kv.n_free);
  gauge(&b, "pasada_kv_blocks_cached", "Unused KV blocks holding a reusable prefix.",
        m->kv.n_cached);
  gauge(&b, "pasada_kv_block_size", "Positions per KV block.", m->kv.block_size);
  gauge(&b, "pasada_kv_bytes", "Memory of the KV pool.", (double)m->kv.bytes);
  gauge(&b, "pasada_kv_cache_usage_ratio",
        "Fraction of the KV pool held by running sequences (0 to 1).", usage(m));
  render_router_names(&b, m);
  pthread_mutex_unlock(&m->mu);
  if (b.failed) {
    srv_buf_free(&b);
    return NULL;
  }
  return b.p;
}
