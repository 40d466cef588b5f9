/* server.h: the types `pasada serve` shares between its modules: the
 * configuration, a validated request, and a job (one request's life between
 * the HTTP thread that received it and the scheduler thread that runs it).
 * The server uses only the public API (pasada.h) of the engine. */
#ifndef PASADA_SERVER_H
#define PASADA_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pasada.h"

#define SRV_MAX_STOP 16         /* stop strings per request */
#define SRV_MAX_STOP_LEN 256    /* bytes per stop string */
#define SRV_MAX_TOP_LOGPROBS 20 /* OpenAI's limit for top_logprobs */
#define SRV_MAX_CHOICES 64      /* choices of one request (n x prompts) */
#define SRV_MAX_CORS 16         /* --cors-origin options */

typedef struct {
  const char *model_path;
  const char *model_alias;   /* the name /v1/models lists (NULL: the file's) */
  const char *chat_template; /* "chatml", "gemma", "llama3"; NULL: the model's */
  const char *chat_template_file; /* a Jinja template file instead of the model's */
  const char *host;
  int port;          /* 0: any free port (printed at start) */
  int parallel;      /* sequences decoded together */
  int n_ctx;         /* positions per sequence */
  int n_threads;     /* compute threads (0: all cores) */
  int prefill_chunk; /* most prompt tokens in one step */
  int kv_block_size; /* 0: the engine's default */
  int64_t kv_blocks; /* 0: from kv_memory_mib, else the engine's default */
  int64_t kv_memory_mib;
  pasada_kv_type kv_type;
  int max_queue;   /* requests waiting for admission before 429 */
  size_t max_body; /* bytes of a request body before 413 */
  int max_connections;
  const char *api_key;   /* NULL: no authentication */
  const char *cors[SRV_MAX_CORS]; /* allowed browser origins, each a comma list ("*": any) */
  int n_cors;                     /* 0: no CORS headers */
  int responses_store;            /* Responses API responses kept for previous_response_id */
  double shutdown_grace; /* seconds running requests may go on after SIGTERM */
  double drain_delay;    /* seconds between SIGTERM (GET /ready turns 503) and closing the socket */
  const char *kv_events; /* ZeroMQ endpoint of the KV-event publisher; NULL: none */
  const char *kv_events_topic; /* its topic (NULL: kv@HOSTNAME@MODEL) */
  const char *kv_events_replay; /* ROUTER endpoint replaying kept batches; NULL: none */
  /* speculative decoding's defaults: --lookup, --draft FILE, --mtp, --draft-max N */
  bool spec_lookup, spec_mtp;
  const char *draft_path;
  int32_t draft_max;
  int32_t spec_max_seqs; /* --spec-max-seqs (0: SRV_SPEC_MAX_SEQS) */
  /* --embeddings: an embedding server (/v1/embeddings; the generating
   * endpoints answer 400), pooling as --pooling says (0: the model's, else
   * last); --matryoshka: `dimensions` below the model's may truncate */
  bool embeddings;
  int pooling;
  bool matryoshka;
  bool verbose;
} srv_config;

/* An error in the OpenAI shape {"error": {message, type, param, code}}. */
typedef struct {
  int status;       /* HTTP status */
  const char *type; /* "invalid_request_error", "server_error", ... */
  const char *code; /* NULL or a short machine-readable code */
  char param[64];   /* the offending field; "" when none */
  char message[512];
} srv_error;

/* Fills `e` and returns false, so validators can `return srv_fail(...)`. */
bool srv_fail(srv_error *e, int status, const char *type, const char *code, const char *param,
              const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* The API a request came through: its parsing and rendering differ, the
 * scheduler's work does not. */
typedef enum {
  SRV_CHAT = 0,       /* OpenAI /v1/chat/completions */
  SRV_COMPLETION = 1, /* OpenAI /v1/completions */
  SRV_MESSAGES = 2,   /* Anthropic /v1/messages */
  SRV_RESPONSES = 3,  /* OpenAI /v1/responses */
  SRV_EMBEDDING = 4   /* OpenAI /v1/embeddings: one input, no generation */
} srv_kind;

/* A request after validation: everything the scheduler needs, in engine terms. */
typedef struct {
  srv_kind kind;
  bool stream;
  bool include_usage; /* stream_options.include_usage */
  int32_t *prompt;    /* malloc'd token ids */
  int32_t n_prompt;
  int32_t max_tokens; /* already clamped to the context */
  pasada_sampler_params sampling;
  char *stop[SRV_MAX_STOP];
  int n_stop;
  bool logprobs;
  int top_logprobs;
  char *model; /* the name echoed back */
  bool tools;        /* tools were offered: the output is parsed for tool calls */
  struct cJSON *tool_defs; /* owned: those tools (OpenAI shape), typing parsed arguments */
  bool in_reasoning; /* the prompt ends inside an opened reasoning block */
  char *grammar;     /* GBNF (root rule "root") constraining the output; NULL: free */
  int32_t *bias_ids; /* logit_bias: malloc'd token ids and their biases */
  float *bias;
  int n_bias;
  int32_t n;           /* choices per prompt (OpenAI's n); 0 or 1: one */
  int64_t max_asked;   /* the client's max_tokens (0: none), for the other prompts' clamps */
  int32_t **prompts2;  /* completions: the prompts after the first (malloc'd), each n choices */
  int32_t *n_prompts2;
  int32_t n_more;
  /* speculative decoding ("speculative": {"mode", "draft_max"}): 0 the
   * server's default, else 1 + the pa_spec_mode; draft_max 0: the server's */
  int spec_mode;
  int32_t spec_draft_max;
  /* A reasoning budget (Anthropic's thinking.budget_tokens; 0 for thinking
   * disabled): once think_budget tokens were generated inside the family's
   * reasoning block (from think_open, or from the start when the prompt
   * opened it or the family has no open marker) and think_close has not
   * come, the scheduler writes the tokens think_force, then lets the model
   * answer. */
  bool think_limit;
  int32_t think_budget;
  char think_open[40], think_close[40];
  int32_t think_force[24];
  int n_think_force;
} srv_request;

typedef enum {
  SRV_PENDING = 0,
  SRV_FINISH_STOP,      /* end-of-generation token or a stop string */
  SRV_FINISH_LENGTH,    /* max_tokens, the context's end, or shutdown */
  SRV_FINISH_CANCELLED, /* the client went away */
  SRV_FINISH_ERROR      /* see job->error */
} srv_finish;

/* The scheduler's bell: streaming readers sleep on it, and the scheduler
 * rings it once per step after handing out that step's tokens, so a step
 * of 16 users costs one wake-up call instead of 16 (each a futex wake that,
 * on a 2-vCPU VM, took the scheduler ~50 us: 5-6% of a 16-user step). A
 * reader takes the epoch before it looks at its job: output appended after
 * that look comes before the next ring, which moves the epoch, so the wait
 * returns at once or is woken (no lost wake-ups). */
typedef struct {
  _Atomic uint32_t epoch;
  atomic_int sleepers;
} srv_bell;
uint32_t srv_bell_epoch(srv_bell *b);
/* Sleeps until the epoch moves past `seen`, or ms milliseconds pass. */
void srv_bell_wait(srv_bell *b, uint32_t seen, int ms);
void srv_bell_ring(srv_bell *b);

typedef struct {
  int32_t token;
  float logprob;
  int32_t n_top;
  int32_t top_token[SRV_MAX_TOP_LOGPROBS];
  float top_logprob[SRV_MAX_TOP_LOGPROBS];
} srv_token_logprob;

/* A job is reference counted: the HTTP side holds one reference for the
 * life of its connection's request, the scheduler one from submission until
 * it finishes the job. The scheduler only appends to the output (text,
 * logprobs, finish) under `mu` and never waits for the client; the HTTP
 * thread reads at its own pace, so a slow client costs the scheduler
 * nothing. */
typedef struct srv_job {
  srv_request req;
  pasada_sampler *sampler; /* owned: the request's own seed and penalties */
  struct pa_grammar *grammar; /* owned: the compiled output grammar (NULL: free output) */
  pasada_detok *detok;     /* owned */
  char id[48];
  int64_t created; /* unix seconds */

  pthread_mutex_t mu;
  pthread_cond_t cv; /* signalled at the first output and the finish (each output without a bell) */
  srv_bell *bell;    /* the scheduler's, set on submission: rung after each step's output */
  char *text; /* released output text (stop strings already cut) */
  size_t n_text, cap_text;
  srv_token_logprob *lp;
  size_t n_lp, cap_lp;
  int32_t n_cached;    /* prompt positions reused from the prefix cache */
  int32_t n_generated; /* sampled tokens, end-of-generation included */
  int32_t stop_hit;    /* 1 + the index in req.stop of the string that ended the output; 0: none */
  srv_finish finish;
  srv_error error;
  double t_submit, t_first, t_done; /* monotonic seconds */
  float *embd; /* SRV_EMBEDDING: the pooled embedding (n_embd floats), set at the finish */

  atomic_bool cancelled;
  atomic_int refs;

  /* A request of several choices (n > 1, or several prompts) is one job
   * per choice; the first holds references to the others. */
  struct srv_job **choices; /* choices[0] is this job; NULL: a single choice */
  int n_choices;
  int choice;        /* this job's index among the request's choices */
  bool wait_prefill; /* admitted only once no running job is prefilling the same prompt, whose
                        KV blocks it then shares */

  /* scheduler-private from here on */
  struct srv_job *next; /* the waiting queue */
  int32_t seq;          /* -1 while waiting */
  int32_t n_fed;        /* positions in the cache (prompt, then generated) */
  int32_t next_token;   /* the sampled token to feed next step; -1 while prefilling */
  char *held;           /* text held back: it may be the start of a stop string */
  size_t n_held, cap_held;
  double t_last; /* the previous token's time (inter-token latency) */
  /* the reasoning budget (req.think_limit): 0 before the reasoning block,
   * 1 inside it, 2 after it; tokens generated inside; think_forced: the
   * next of req.think_force to write (-1: not forcing); the text's last
   * bytes, where the markers are looked for */
  int8_t think_state;
  int32_t think_used, think_forced;
  char think_tail[80];
  uint8_t n_think_tail;
} srv_job;

/* job.c */
srv_job *srv_job_create(void);
void srv_job_retain(srv_job *j);
void srv_job_release(srv_job *j);
void srv_request_clear(srv_request *r);
/* A deep copy of src (one choice's request) into dst; false when out of memory. */
bool srv_request_clone(const srv_request *src, srv_request *dst);
/* Scheduler side: appends released text (and one logprob entry when lp is
 * non-NULL); signals the job's condition variable for its first output (or
 * every output when it has no bell); later output is announced by the
 * scheduler's ring after the step. Returns false when out of memory. */
bool srv_job_emit(srv_job *j, const char *text, size_t n, const srv_token_logprob *lp);
/* Scheduler side: marks the job finished (err only for SRV_FINISH_ERROR)
 * and wakes its reader (the job's condition variable and its bell). */
void srv_job_finish(srv_job *j, srv_finish why, const srv_error *err);
const char *srv_finish_name(srv_finish f); /* "stop", "length", ... */

/* text.c */
/* How many bytes of text[0..n) can be released now given the stop strings:
 * everything before a match (*matched = true), else everything except the
 * longest tail that could be the beginning of a stop string. */
size_t srv_stop_scan(const char *text, size_t n, char *const *stops, int n_stop, bool *matched);
/* Copies at most n bytes to a NUL-terminated malloc'd string with every
 * invalid UTF-8 sequence replaced by U+FFFD (JSON needs valid UTF-8). */
char *srv_utf8_sanitize(const char *s, size_t n);
/* Whether s[0..n) is valid UTF-8. */
bool srv_utf8_valid(const char *s, size_t n);

/* A growable byte buffer (always NUL-terminated when non-empty). */
typedef struct {
  char *p;
  size_t n, cap;
  bool failed; /* an allocation failed: the content is incomplete */
} srv_buf;
void srv_buf_append(srv_buf *b, const char *s, size_t n);
void srv_buf_printf(srv_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void srv_buf_consume(srv_buf *b, size_t n); /* drops the first n bytes */
void srv_buf_free(srv_buf *b);

double srv_now(void); /* monotonic seconds */
int64_t srv_unix_time(void);

#endif
