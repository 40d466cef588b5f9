/* json_schema_int.h: what json_schema.c (schemas, objects, arrays,
 * references, combinators) and json_schema_text.c (string patterns and
 * formats, number ranges, GBNF literals) share. Private to them. */
#ifndef PASADA_SERVER_JSON_SCHEMA_INT_H
#define PASADA_SERVER_JSON_SCHEMA_INT_H

#include <stdint.h>
#include <string.h>

#include "server/json_schema.h"

#define JS_MAX_DEPTH 64          /* nesting of schemas (and of $ref expansions in allOf) */
#define JS_MAX_RULES 20000       /* helper rules of one schema */
#define JS_MAX_OUTPUT (4u << 20) /* bytes of GBNF */
#define JS_MAX_COUNT 10000       /* minItems, maxItems, minLength, maxLength, repetitions */
#define JS_MAX_DIGITS 16         /* integer digits (and fraction digits) of a number */

/* Primitive rules emitted once, when used. */
enum {
  JS_WS = 1,
  JS_CHAR = 2,
  JS_STRING = 4,
  JS_INT = 8,
  JS_NUMBER = 16,
  JS_VALUE = 32,
  JS_OBJECT = 64,
  JS_ARRAY = 128,
  JS_KEYCHAR = 256,
};

typedef struct {
  const cJSON *node; /* a $ref target */
  int rule;
} js_ref;

typedef struct {
  const cJSON *root;
  const char *prefix;
  srv_buf *out;
  srv_error *e;
  int n_rules;
  uint32_t prims;
  js_ref *refs;
  int n_refs, cap_refs;
  cJSON **owned; /* merged schemas, freed at the end */
  int n_owned, cap_owned;
  int depth;
  char path[512]; /* the current schema's JSON pointer */
  bool failed;
} js_ctx;

bool js_fail(js_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void js_put(srv_buf *b, const char *s) {
  srv_buf_append(b, s, strlen(s));
}
/* A new helper rule's number (its name: prefix-N). */
int js_new_rule(js_ctx *c);
/* Writes the rule "prefix-N ::= body". */
void js_emit_rule(js_ctx *c, int rule, const srv_buf *body);
/* "prefix-name" of a primitive, marking it used. */
void js_prim(js_ctx *c, srv_buf *b, uint32_t prim);
void js_rule_ref(js_ctx *c, srv_buf *b, int rule);

/* json_schema.c */
extern const char *const js_annotations[]; /* keywords that constrain nothing */
bool js_in_list(const char *const *list, const char *k);
/* Appends "/seg" (JSON-pointer escaped) to c->path; returns the old length
 * for js_pop_path. */
size_t js_push_path(js_ctx *c, const char *seg);
void js_pop_path(js_ctx *c, size_t old);

/* json_schema_ref.c */
/* The schema a local "$ref" names (a JSON pointer after '#') in root;
 * NULL with *why: 1 not local, 2 names nothing, 3 not a pointer. */
const cJSON *js_pointer(const cJSON *root, const char *ref, int *why);
/* The schema a local "$ref" names (a JSON pointer after '#'); NULL with the
 * error set. */
const cJSON *js_resolve(js_ctx *c, const char *ref);
/* Whether no $ref chain of the schema reaches its own start before the
 * value's first character (through $ref, allOf, anyOf, oneOf: the keywords
 * that consume nothing of their own); false with the 400 naming the chain.
 * Recursion under properties, items and the like (a tree) is fine. */
bool js_check_ref_cycles(js_ctx *c);
/* Keeps x until the end of the walk (freed with the context); NULL on NULL. */
cJSON *js_own(js_ctx *c, cJSON *x);
/* Whether schema s has keywords other than annotations and `except`. */
bool js_constrains(const cJSON *s, const char *except);
/* s with its $ref and allOf folded in (an owned schema, or s itself). */
const cJSON *js_flatten(js_ctx *c, const cJSON *s);
/* The schema both a and b describe (owned), where their keywords merge. */
cJSON *js_merge(js_ctx *c, const cJSON *a, const cJSON *b);
/* The type names of "type" t (a string or an array) appended to out. */
cJSON *js_as_types(js_ctx *c, const cJSON *t, cJSON *out);

/* json_schema_finite.c */
/* Whether the schema and every schema a $ref of it names have a finite
 * instance; false with the 400 naming the recursion that every instance
 * must take (a required property, an array's minItems, allOf). Runs after
 * js_check_ref_cycles. */
bool js_check_finite(js_ctx *c);

/* json_schema_text.c */
/* A GBNF literal spelling s[0..n) (UTF-8) exactly. */
void js_literal(srv_buf *b, const char *s, size_t n);
/* The JSON string (quotes included) whose value matches the regex
 * `pattern` (ECMA-262 subset: literals, escapes, classes, ., groups, |,
 * quantifiers, ^ and $ at the ends; unanchored ends match anything). */
bool js_pattern(js_ctx *c, const char *pattern, srv_buf *expr);
/* The JSON string of a format: date, time, date-time, uuid, email. */
bool js_format(js_ctx *c, const char *format, srv_buf *expr);
/* An integer in [lo, hi] (each bound optional), as JSON. */
bool js_integer_range(js_ctx *c, bool has_lo, int64_t lo, bool has_hi, int64_t hi, srv_buf *expr);
/* A number in [lo, hi] with integer bounds (each optional; exclusive ones
 * open), as JSON. */
bool js_number_range(js_ctx *c, bool has_lo, int64_t lo, bool lo_open, bool has_hi, int64_t hi,
                     bool hi_open, srv_buf *expr);

#endif
