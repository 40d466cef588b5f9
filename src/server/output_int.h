/* output_int.h: the parts of the output parser (output.c) that its format
 * modules share: the parse state, the table entry that describes a family,
 * and the syntax helpers (JSON extents, loose literals, XML-style values). */
#ifndef PASADA_SERVER_OUTPUT_INT_H
#define PASADA_SERVER_OUTPUT_INT_H

#include <cjson/cJSON.h>

#include "server/output.h"
#include "server/server.h"

/* One parse of text[0..n). Content and reasoning collect what is released;
 * the engine (output.c) trims and cuts them at the end. */
typedef struct op_state {
  const srv_out_style *st;
  const char *t;
  size_t n;
  const srv_out_opts *o;
  bool final;
  srv_buf content, reasoning;
  srv_tool_call *calls;
  int n_calls, cap_calls;
  bool oom;
  bool stop; /* a custom parser hit text it cannot decide yet: release nothing more */
} op_state;

/* What a block parser says about the block that starts at a trigger. */
typedef enum {
  BLK_DONE,   /* parsed through *end; its calls are listed */
  BLK_MORE,   /* incomplete: its complete calls are listed, the text from *end is
                 undecided (content when the generation has ended) */
  BLK_NOTCALL /* the trigger does not start a call: it is plain content */
} blk_rc;

/* at: where the trigger starts; body: just after it. */
typedef blk_rc (*blk_fn)(op_state *p, size_t at, size_t body, size_t *end);

/* Calls collected while a block is parsed, listed together once the block
 * is known to be whole (a block that turns out malformed lists none). */
typedef struct {
  struct op_pend_call {
    char *name, *args;
  } * v;
  int n, cap;
} op_pending;
/* Adds a call: args is JSON text of an object (compacted), or obj a cJSON
 * object (NULL: {}). False when the name or arguments are not acceptable
 * (or out of memory: p->oom). */
bool op_pend_text(op_state *p, op_pending *pd, const char *name, size_t n_name, const char *args,
                  size_t n_args);
bool op_pend_obj(op_state *p, op_pending *pd, const char *name, size_t n_name, const cJSON *obj);
void op_pend_commit(op_state *p, op_pending *pd); /* lists them and empties pd */
void op_pend_free(op_pending *pd);

typedef struct {
  const char *open;
  blk_fn fn;
  bool line_start; /* the trigger counts only at the start of the output */
} op_trigger;

/* A family: its triggers in content, the wrapper tokens dropped from the
 * content, or a parser of its own for the whole output. */
typedef struct {
  const char *name;
  op_trigger trig[3];
  const char *drop[6];
  bool (*whole)(op_state *p); /* parses the whole output itself (harmony, ...) */
} op_format;

const op_format *op_format_of(srv_out_format f);

/* One call of a section: parses from i (after the call's opening marker),
 * sets *e past it and adds it to pd; ctx is op_section's. */
typedef blk_rc (*op_call_fn)(op_state *p, const void *ctx, size_t i, size_t *e, op_pending *pd);
/* A section of calls from body: (call_open call)* sec_close. Text after
 * whole calls ends it; at the end of the generation a cut-off section keeps
 * its whole calls. */
blk_rc op_section(op_state *p, size_t at, size_t body, const char *call_open, const char *sec_close,
                  op_call_fn fn, const void *ctx, size_t *end);
bool op_ident(char c); /* a character of a function name */

/* XML-style blocks (output_xml.c). */
blk_rc blk_qwen3_coder(op_state *p, size_t at, size_t body, size_t *end);
blk_rc blk_minimax(op_state *p, size_t at, size_t body, size_t *end);
blk_rc blk_dsml_f(op_state *p, size_t at, size_t body, size_t *end);
blk_rc blk_dsml_t(op_state *p, size_t at, size_t body, size_t *end);
blk_rc blk_glm(op_state *p, size_t at, size_t body, size_t *end);
blk_rc blk_minicpm(op_state *p, size_t at, size_t body, size_t *end);

/* The families parsed whole (output_whole.c). */
bool op_whole_harmony(op_state *p);
bool op_whole_functionary(op_state *p);
bool op_whole_atem(op_state *p);
/* <atem:function_calls> .. </atem:function_calls> (output_xml.c). */
blk_rc op_atem_block(op_state *p, size_t at, size_t body, size_t *end);

/* Releases to content / reasoning (the engine trims the ends). */
void op_content(op_state *p, const char *s, size_t n);
void op_reasoning(op_state *p, const char *s, size_t n);

/* Whether text[i..] starts with s; *more = the text ended inside s. */
bool op_at(const op_state *p, size_t i, const char *s, bool *more);
/* 1: text[i..] starts with s; 2: the text ends inside s; 0: neither. */
int op_at3(const op_state *p, size_t i, const char *s);
/* The end of a name that ends at `close` within 256 bytes of i (the first
 * occurrence), n when the text ends first, (size_t)-1 when there is none. */
size_t op_name_end(const op_state *p, size_t i, const char *close);
/* First occurrence of s in text[i..n), or n. */
size_t op_find(const op_state *p, size_t i, const char *s);
size_t op_skip_ws(const op_state *p, size_t i);
/* Longest k such that text[n-k..n) is a proper prefix of s. */
size_t op_prefix_tail(const char *t, size_t n, const char *s);

/* The end of the JSON value that starts at t[i] ('{', '[', '"', a literal):
 * > i when complete; 0 when the text ends first; (size_t)-1 when it is not
 * JSON (a bracket closes the wrong one, a stray character). Linear. */
size_t op_json_end(const char *t, size_t n, size_t i);
/* In the JSON text t[0..n) of an object or array (text cJSON accepted):
 * the span [*vs, *ve) of the member `key` (the first of that name, its key
 * written without escapes) or, with key NULL, of the element after the one
 * ending at *ve (start with *ve = 0). False when there is none. The spans
 * keep a value as the model wrote it (1500.0, integers past 2^53), which a
 * round trip through cJSON's doubles would not. */
bool op_json_span(const char *t, size_t n, const char *key, size_t *vs, size_t *ve);
/* Every escape in the JSON strings of t[0..n) is one of JSON's (cJSON reads
 * \u with a non-hex digit as U+0000; strict parsers, the client's, refuse
 * it, so the parser refuses it before cJSON sees it). */
bool op_json_escapes_ok(const char *t, size_t n);
/* JSON text t[0..n) without insignificant whitespace, NUL-terminated
 * (malloc'd); NULL when it is not a single valid JSON value or out of memory
 * (*oom tells). */
char *op_json_compact(const char *t, size_t n, bool *oom);

/* A loose literal as JSON: Python (True, None, 'str', (tuples)), Gemma's
 * <|"|>-quoted strings, bare keys. Parses at t[*i..n); NULL when not one.
 * Depth is bounded. */
cJSON *op_loose_value(const char *t, size_t n, size_t *i, int depth);

/* The JSON value of an XML-style parameter's text: typed by the parameter's
 * schema in the request's tools (a string stays a string), else JSON when it
 * parses as JSON (or a Python literal), else a string. string_attr: 1 the
 * format marked it a string, 0 marked not, -1 unknown. */
cJSON *op_param_value(const op_state *p, const char *fn, const char *key, const char *v, size_t n,
                      int string_attr);

#endif
