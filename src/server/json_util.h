/* json_util.h: the JSON helpers every request parser and response writer of
 * the server shares: field readers that check a value's type and range and
 * fail with a 400 naming the field, and the builders of output text. */
#ifndef PASADA_SERVER_JSON_UTIL_H
#define PASADA_SERVER_JSON_UTIL_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/server.h"

/* ---- field readers: absent and null fields leave *out alone and succeed;
 * a value of the wrong type or out of [lo, hi] is a 400 on `name` ---- */

/* The member `name` of obj, or NULL when absent or null. */
const cJSON *srv_json_field(const cJSON *obj, const char *name);
bool srv_json_bool(const cJSON *obj, const char *name, bool *out, srv_error *e);
bool srv_json_number(const cJSON *obj, const char *name, double lo, double hi, double *out,
                     srv_error *e);
bool srv_json_int(const cJSON *obj, const char *name, double lo, double hi, int64_t *out,
                  srv_error *e);
bool srv_json_float(const cJSON *obj, const char *name, double lo, double hi, float *out,
                    srv_error *e);

/* ---- builders ---- */

/* root printed without whitespace (malloc'd), then deleted; NULL when root
 * is NULL or out of memory. */
char *srv_json_print(cJSON *root);
/* A JSON string of bytes that may not be valid UTF-8 (invalid sequences
 * become U+FFFD); NULL only when out of memory. */
cJSON *srv_json_text(const char *s, size_t n);

#endif
