/* turn.h: a generated turn as an ordered list of parts (reasoning, text,
 * tool calls), the form the Anthropic Messages and Responses APIs return.
 * The tracker re-parses the job's text (output.h) at each streaming step and
 * reports what is new as part openings, deltas and closings, so a stream
 * and the final object built from the same parts always agree. */
#ifndef PASADA_SERVER_TURN_H
#define PASADA_SERVER_TURN_H

#include <cjson/cJSON.h>

#include "server/json_util.h"
#include "server/openai.h"

typedef enum { SRV_PART_REASONING = 0, SRV_PART_TEXT, SRV_PART_CALL } srv_part_kind;

typedef struct {
  srv_part_kind kind;
  srv_buf text; /* the reasoning or text so far, or a call's arguments (JSON) */
  char *name;   /* a call's function name */
  char id[40];  /* a call's id as the parser gave it ("call_...") */
  bool open;
} srv_part;

typedef struct {
  srv_part *parts;
  int n_parts, cap_parts;
  size_t n_reasoning, n_content; /* bytes of the parse already handed out */
  int n_calls;                   /* calls of the parse already handed out */
  int max_calls;                 /* 0: any number; 1: parallel calls disabled */
  const cJSON *tool_defs;        /* the request's tools (OpenAI shape) or NULL: types the
                                    values of XML-style call parameters */
  bool closed;                   /* the final update ran */
} srv_turn;

/* What an update reports, in order; any callback may be NULL. A part's
 * delta never comes after its close; a call's whole arguments come in one
 * delta between its open and its close. */
typedef struct {
  void (*open)(void *u, const srv_turn *t, int part);
  void (*delta)(void *u, const srv_turn *t, int part, const char *s, size_t n);
  void (*close)(void *u, const srv_turn *t, int part);
} srv_turn_sink;

/* Re-parses the whole text so far (the job's id seeds the call ids, so
 * every parse of one job names its calls alike). final: the generation has
 * ended: everything is released, the open part closed, and a turn with no
 * part at all gets one empty text part. Returns false when out of memory. */
bool srv_turn_update(srv_turn *t, const srv_model_info *mi, const srv_job *j, const char *text,
                     size_t n, bool final, const srv_turn_sink *sink, void *u);
void srv_turn_free(srv_turn *t);
int srv_turn_calls(const srv_turn *t); /* how many call parts */

/* A snapshot of a job's output text (malloc'd, NUL-terminated) and its
 * finish, taken under the job's lock. NULL when out of memory. */
char *srv_job_text(srv_job *j, size_t *n, srv_finish *finish, srv_error *err);

/* The function name of the call with this id among an assistant message's
 * tool_calls (the first 256), or NULL: a tool message carries it for the
 * templates that print it. */
const char *srv_call_name(const cJSON *assistant, const char *id);

/* "PREFIX" + 24 random hex digits into out (ids of responses, items and
 * messages). */
void srv_make_id(char *out, size_t size, const char *prefix);

/* Clamps max_tokens to the context's room after the prompt (0: all of it);
 * a prompt that leaves no room is a 400 (context_length_exceeded) on param. */
bool srv_fit_context(const srv_model_info *mi, int64_t max_tokens, const char *param,
                     srv_request *r, srv_error *e);

#endif
