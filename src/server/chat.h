/* chat.h: a conversation into the model's prompt. Every API (OpenAI chat,
 * Anthropic Messages, Responses) first turns its input into OpenAI-style
 * `messages` (role, content, tool_calls, tool_call_id, reasoning_content)
 * and `tools` (OpenAI function tools), then renders them here: with the
 * model's own Jinja chat template (tokenizer.chat_template) or the one of
 * --chat-template-file, else a built-in family template. */
#ifndef PASADA_SERVER_CHAT_H
#define PASADA_SERVER_CHAT_H

#include <cjson/cJSON.h>

#include "server/openai.h"

/* The prompt text for messages (+ tools, NULL for none) in *prompt
 * (malloc'd). extra: template variables of the request
 * (chat_template_kwargs), or NULL. A template error is a 400 naming its
 * line; *in_reasoning tells whether the prompt ends inside an opened
 * reasoning block (the output parser starts there). */
bool srv_chat_render(const srv_model_info *mi, const cJSON *messages, const cJSON *tools,
                     bool add_generation_prompt, const cJSON *extra, char **prompt,
                     bool *in_reasoning, srv_error *e);

/* Tokenizes a rendered prompt into r->prompt (no BOS added: the template
 * writes it), checking it against the context. */
bool srv_chat_tokenize(const srv_model_info *mi, const char *prompt, const char *param,
                       srv_request *r, srv_error *e);

/* Sets mi's chat rendering up for the model: the built-in template `name`
 * when given, else the Jinja template of `file` when given, else the
 * model's own tokenizer.chat_template, else the built-in template its
 * markers or architecture name (a model template that does not parse is
 * a warning and that fallback); the output style from the template's
 * source. Prints a one-line reason to stderr and returns false when a named
 * template or the file cannot be used. */
bool srv_chat_setup(srv_model_info *mi, const char *name, const char *file);
/* A name for the startup line ("jinja (model)", "chatml", ...). */
const char *srv_chat_describe(const srv_model_info *mi);
void srv_chat_teardown(srv_model_info *mi);

#endif
