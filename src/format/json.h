/* json.h: a small strict JSON reader for the files of Hugging Face model
 * folders (safetensors headers, config.json, tokenizer.json): RFC 8259
 * syntax, valid UTF-8 only, strings unescaped to UTF-8 (surrogate pairs
 * joined; a lone surrogate or \u0000 is an error), nesting limited, every
 * error with the byte offset where it was found. The core library depends on
 * no JSON library (tests/e2e/test_library.py checks it). */
#ifndef PASADA_JSON_H
#define PASADA_JSON_H

#include <stdbool.h>
#include <stddef.h>

typedef enum { PJ_NULL, PJ_FALSE, PJ_TRUE, PJ_NUMBER, PJ_STRING, PJ_ARRAY, PJ_OBJECT } pj_type;

typedef struct pj_value {
  pj_type type;
  struct pj_value *next;  /* the next element or member of the parent */
  struct pj_value *child; /* the first element or member (arrays, objects) */
  int count;              /* elements or members (arrays, objects) */
  char *string;           /* a member's key (NUL-terminated), else NULL */
  char *valuestring;      /* PJ_STRING: the value (NUL-terminated) */
  double valuedouble;     /* PJ_NUMBER */
} pj_value;

/* Parses n bytes (only white space may follow the value). Returns NULL when
 * the text is not valid JSON nested at most max_depth deep, with *err_at the
 * byte offset of the problem and *why what it is; or when out of memory. */
pj_value *pj_parse(const char *text, size_t n, int max_depth, size_t *err_at, const char **why);
void pj_free(pj_value *v);

/* The first member named key of an object (NULL: none, or v not an object);
 * element i of an array (NULL: out of range). */
const pj_value *pj_get(const pj_value *obj, const char *key);
const pj_value *pj_at(const pj_value *arr, int i);

static inline bool pj_is(const pj_value *v, pj_type t) {
  return v && v->type == t;
}
static inline bool pj_is_obj(const pj_value *v) {
  return pj_is(v, PJ_OBJECT);
}
static inline bool pj_is_arr(const pj_value *v) {
  return pj_is(v, PJ_ARRAY);
}
static inline bool pj_is_str(const pj_value *v) {
  return pj_is(v, PJ_STRING);
}
static inline bool pj_is_num(const pj_value *v) {
  return pj_is(v, PJ_NUMBER);
}
static inline bool pj_is_null(const pj_value *v) {
  return pj_is(v, PJ_NULL);
}
static inline bool pj_is_true(const pj_value *v) {
  return pj_is(v, PJ_TRUE);
}
static inline bool pj_is_bool(const pj_value *v) {
  return pj_is(v, PJ_TRUE) || pj_is(v, PJ_FALSE);
}
static inline int pj_size(const pj_value *v) {
  return v ? v->count : 0;
}

#endif
