/* openai.h: the OpenAI API's JSON on both sides of the scheduler: request
 * bodies validated into srv_request (every field checked here, at the
 * border), and jobs rendered into responses, stream chunks and errors. */
#ifndef PASADA_SERVER_OPENAI_H
#define PASADA_SERVER_OPENAI_H

#include "server/output.h"
#include "server/server.h"

/* What the request mapping needs to know about the loaded model. */
typedef struct {
  const pasada_model *model; /* for the chat template's own additions */
  const pasada_tokenizer *tok;
  pasada_chat_template tmpl;     /* the built-in template (when jinja is NULL) */
  const struct pa_template *jinja; /* the model's own or --chat-template-file's; NULL: tmpl */
  char *bos_text, *eos_text;     /* the template's bos_token / eos_token */
  char *jinja_origin;            /* "model" or the file's path */
  srv_out_style style;           /* how the model writes reasoning and tool calls */
  const char *name; /* listed by /v1/models */
  int64_t created;  /* when the model was loaded */
  int32_t n_ctx, n_vocab;
  bool has_draft; /* a draft model was loaded (serve --draft): "speculative" mode "draft" */
  bool has_mtp;   /* serve --mtp: "speculative" mode "mtp" */
  /* a model with recurrent layers: the most tokens a step may draft (the
   * rollback states its context made at start: 0 without --lookup or
   * --draft); -1: any (no recurrent layers) */
  int32_t spec_limit;
  bool embeddings;  /* an embedding server (serve --embeddings) */
  bool matryoshka;  /* `dimensions` below n_embd truncate and renormalise (serve --matryoshka) */
  int32_t n_embd;
} srv_model_info;

/* Parses a /v1/chat/completions (SRV_CHAT) or /v1/completions body. On
 * failure fills err (status 400 and the field at fault) and returns false. */
bool srv_openai_parse(const srv_model_info *mi, srv_kind kind, const char *body, size_t len,
                      srv_request *req, srv_error *err);

/* Each returns a malloc'd NUL-terminated string (NULL when out of memory). */
char *srv_openai_error_json(const srv_error *e);
/* The whole response of a finished job (non-streaming). */
char *srv_openai_response(const srv_model_info *mi, srv_job *j);
/* Tokens' logprobs as chat's logprobs.content lists them: [{token,
 * logprob, bytes, top_logprobs: [{token, logprob, bytes}]}] (bytes left
 * out without `bytes`, as the Responses API's stream events show them). */
struct cJSON *srv_logprobs_json(const srv_model_info *mi, const srv_token_logprob *lp, size_t n,
                         bool bytes);
/* GET /v1/models */
char *srv_openai_models(const srv_model_info *mi);
/* POST /tokenize, /detokenize and /apply-template (inspect.c): the
 * response body, or NULL with err set. */
char *srv_openai_tokenize(const srv_model_info *mi, const char *body, size_t len, srv_error *err);
char *srv_openai_detokenize(const srv_model_info *mi, const char *body, size_t len, srv_error *err);
char *srv_apply_template(const srv_model_info *mi, const char *body, size_t len, srv_error *err);

/* Streaming: the state of one SSE response, advanced by srv_stream_next. */
typedef struct {
  size_t text_off, lp_off;  /* what was already sent of the job's output */
  size_t text_offset_total; /* completions' text_offset of the next token */
  size_t content_off, reasoning_off; /* chat: what was sent of the parsed output */
  int calls_sent;
  bool sent_role, sent_end;
} srv_stream;

/* Renders into out every SSE event the job's output allows now (content
 * chunks, then at the finish the final chunk, the usage chunk and
 * "data: [DONE]"). The caller holds no lock. Returns true once the
 * stream is complete. */
bool srv_stream_next(const srv_model_info *mi, srv_job *j, srv_stream *st, srv_buf *out);
/* The same for a request of several choices (j->choices; sts: one state
 * per choice): each choice's chunks carry its index; the usage and [DONE]
 * come once, after the last choice's end. */
bool srv_stream_group(const srv_model_info *mi, srv_job *j, srv_stream *sts, srv_buf *out);

#endif
