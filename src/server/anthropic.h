/* anthropic.h: the Anthropic Messages API (POST /v1/messages and
 * /v1/messages/count_tokens) on both sides of the scheduler: a request's
 * system, messages (text, tool_use, tool_result and thinking blocks) and
 * tools turned into OpenAI-style messages and rendered by the chat template
 * (chat.h); a finished or running job rendered as a message with text,
 * thinking and tool_use blocks, or as Anthropic's stream events; errors in
 * Anthropic's shape. */
#ifndef PASADA_SERVER_ANTHROPIC_H
#define PASADA_SERVER_ANTHROPIC_H

#include "server/openai.h"

/* A Messages request's own state beside its srv_request: what the response
 * needs (parallel tool use) and the progress of its stream. */
typedef struct srv_anth srv_anth;

/* Parses a /v1/messages body into req (kind SRV_MESSAGES) and *out. On
 * failure fills e (400 with the field at fault in param) and returns false. */
bool srv_anthropic_parse(const srv_model_info *mi, const char *body, size_t len, srv_request *req,
                         srv_anth **out, srv_error *e);
void srv_anthropic_free(srv_anth *a);

/* POST /v1/messages/count_tokens: {"input_tokens": N}, or NULL with e set. */
char *srv_anthropic_count_tokens(const srv_model_info *mi, const char *body, size_t len,
                                 srv_error *e);

/* {"type": "error", "error": {"type", "message"}}, the type from e->status
 * (invalid_request_error, authentication_error, not_found_error,
 * request_too_large, rate_limit_error, api_error, overloaded_error). */
char *srv_anthropic_error_json(const srv_error *e);

/* The message of a finished job (non-streaming). */
char *srv_anthropic_response(const srv_model_info *mi, srv_job *j, srv_anth *a);

/* Renders into out every stream event the job's output allows now:
 * message_start and a ping first, then content_block_start / _delta /
 * _stop per block, at the finish message_delta (stop_reason, usage) and
 * message_stop, or an error event. Returns true once the stream is
 * complete. */
bool srv_anthropic_stream_next(const srv_model_info *mi, srv_job *j, srv_anth *a, srv_buf *out);

#endif
