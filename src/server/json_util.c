/* json_util.c: the server's shared JSON field readers (type and range
 * checked, 400 on the field) and output builders; see json_util.h. */
#include <math.h>
#include <stdlib.h>

#include "server/json_util.h"

#define BAD(e, param, ...) srv_fail(e, 400, "invalid_request_error", NULL, param, __VA_ARGS__)

const cJSON *srv_json_field(const cJSON *obj, const char *name) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
  return v && !cJSON_IsNull(v) ? v : NULL;
}

bool srv_json_bool(const cJSON *obj, const char *name, bool *out, srv_error *e) {
  const cJSON *v = srv_json_field(obj, name);
  if (!v) return true;
  if (!cJSON_IsBool(v)) return BAD(e, name, "'%s' must be a boolean", name);
  *out = cJSON_IsTrue(v);
  return true;
}

bool srv_json_number(const cJSON *obj, const char *name, double lo, double hi, double *out,
                     srv_error *e) {
  const cJSON *v = srv_json_field(obj, name);
  if (!v) return true;
  if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
    return BAD(e, name, "'%s' must be a number", name);
  if (v->valuedouble < lo || v->valuedouble > hi)
    return BAD(e, name, "'%s' is %g, it must be in [%g, %g]", name, v->valuedouble, lo, hi);
  *out = v->valuedouble;
  return true;
}

bool srv_json_int(const cJSON *obj, const char *name, double lo, double hi, int64_t *out,
                  srv_error *e) {
  const cJSON *v = srv_json_field(obj, name);
  if (!v) return true;
  if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble != floor(v->valuedouble))
    return BAD(e, name, "'%s' must be an integer", name);
  if (v->valuedouble < lo || v->valuedouble > hi)
    return BAD(e, name, "'%s' is %.0f, it must be in [%.0f, %.0f]", name, v->valuedouble, lo, hi);
  *out = (int64_t)v->valuedouble;
  return true;
}

bool srv_json_float(const cJSON *obj, const char *name, double lo, double hi, float *out,
                    srv_error *e) {
  double d = *out;
  if (!srv_json_number(obj, name, lo, hi, &d, e)) return false;
  *out = (float)d;
  return true;
}

char *srv_json_print(cJSON *root) {
  char *s = root ? cJSON_PrintUnformatted(root) : NULL;
  cJSON_Delete(root);
  return s;
}

cJSON *srv_json_text(const char *s, size_t n) {
  char *clean = srv_utf8_sanitize(s ? s : "", s ? n : 0);
  cJSON *v = cJSON_CreateString(clean ? clean : "");
  free(clean);
  return v;
}
