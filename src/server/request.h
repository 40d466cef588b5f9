/* request.h: request parts every generating API shares, checked at the
 * border and turned into engine terms: function tools and the tool choice,
 * structured output (a JSON schema or a GBNF grammar), logit biases. The
 * OpenAI chat, Anthropic Messages and Responses parsers translate their own
 * shapes into these. */
#ifndef PASADA_SERVER_REQUEST_H
#define PASADA_SERVER_REQUEST_H

#include <cjson/cJSON.h>

#include "server/openai.h"

typedef enum {
  SRV_TOOLS_AUTO = 0, /* the model may call a tool */
  SRV_TOOLS_NONE,     /* the model answers in text: tools are neither shown nor parsed */
  SRV_TOOLS_REQUIRED, /* at least one call, constrained by the family's tool-call grammar */
  SRV_TOOLS_NAMED     /* one call of the named function, constrained likewise */
} srv_tool_mode;

/* Checks OpenAI function tools, [{"type": "function", "function": {"name",
 * "description", "parameters", "strict"}}]: names unique and of
 * [A-Za-z0-9_-]{1,64}, parameters an object. param names the field. */
bool srv_tools_check(const cJSON *tools, const char *param, srv_error *e);

/* Whether `name` is one of the tools' functions. */
bool srv_tools_has(const cJSON *tools, const char *name);

/* Sets r->tools and, for REQUIRED and NAMED, r->grammar (the family's
 * tool-call syntax with each function's parameters as its arguments'
 * schema). A family whose calls the server cannot parse is a 400. */
bool srv_tools_apply(const srv_model_info *mi, const cJSON *tools, srv_tool_mode mode,
                     const char *name, bool parallel, srv_request *r, srv_error *e);

/* Output constrained to JSON: schema NULL for any JSON object
 * (json_object), else the schema; sets r->grammar. A grammar already set
 * (tools, grammar) is a 400 on param. */
bool srv_request_json(const cJSON *schema, const char *param, srv_request *r, srv_error *e);

/* A GBNF grammar given by the client; compiled when the job is made. */
bool srv_request_grammar(const char *gbnf, const char *param, srv_request *r, srv_error *e);

/* OpenAI's logit_bias: {"token id": bias in [-100, 100]}. */
bool srv_request_logit_bias(const srv_model_info *mi, const cJSON *bias, const char *param,
                            srv_request *r, srv_error *e);

/* The "speculative" object: {"mode": "lookup" | "draft" | "off",
 * "draft_max": 1..32}, both optional; any other member, type or value is a
 * 400 on param. Sets r->spec_mode and r->spec_draft_max. */
bool srv_request_speculative(const cJSON *spec, const char *param, srv_request *r, srv_error *e);

/* A reasoning budget of `budget` tokens (0: no reasoning) on r, with the
 * model family's markers (the reasoning block's open and close markers;
 * gpt-oss: the analysis channel, closed by <|end|> and followed by the final
 * channel). A family without reasoning markers reasons in no block the
 * server knows: nothing to limit. False (a 500) only when the close marker
 * does not tokenize. */
bool srv_request_think_budget(const srv_model_info *mi, int32_t budget, srv_request *r,
                              srv_error *e);

/* Makes the job's sampler from r: its parameters, logit biases and the
 * compiled grammar (a reference to the grammar cache's: give it back with
 * srv_grammar_put after freeing the sampler). A grammar that does not
 * compile is a 400. */
bool srv_request_sampler(const srv_model_info *mi, const srv_request *r, pasada_sampler **out,
                         pasada_grammar **grammar, srv_error *e);

/* Returns a grammar srv_request_sampler gave (NULL: nothing). */
void srv_grammar_put(pasada_grammar *g);
/* Frees the cached grammars (at shutdown, none in use). */
void srv_grammar_cache_clear(void);

#endif
