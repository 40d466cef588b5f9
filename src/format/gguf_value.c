/* gguf_value.c: typed access to parsed GGUF values: the getters that turn a
 * key into a checked number or string (with a message naming the key when it
 * is absent or of the wrong type), array element access, type names. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "format/gguf.h"

size_t gguf_type_size(gguf_type t) {
  switch (t) {
  case GGUF_TYPE_UINT8:
  case GGUF_TYPE_INT8:
  case GGUF_TYPE_BOOL: return 1;
  case GGUF_TYPE_UINT16:
  case GGUF_TYPE_INT16: return 2;
  case GGUF_TYPE_UINT32:
  case GGUF_TYPE_INT32:
  case GGUF_TYPE_FLOAT32: return 4;
  case GGUF_TYPE_UINT64:
  case GGUF_TYPE_INT64:
  case GGUF_TYPE_FLOAT64: return 8;
  default: return 0;
  }
}

const char *gguf_type_name(gguf_type t) {
  static const char *const names[GGUF_TYPE_COUNT] = {
      "uint8", "int8",  "uint16", "int16", "uint32", "int32",  "float32",
      "bool",  "string", "array", "uint64", "int64", "float64"};
  return (unsigned)t < GGUF_TYPE_COUNT ? names[t] : "?";
}

static bool is_unsigned(gguf_type t) {
  return t == GGUF_TYPE_UINT8 || t == GGUF_TYPE_UINT16 || t == GGUF_TYPE_UINT32 ||
         t == GGUF_TYPE_UINT64;
}
static bool is_signed(gguf_type t) {
  return t == GGUF_TYPE_INT8 || t == GGUF_TYPE_INT16 || t == GGUF_TYPE_INT32 ||
         t == GGUF_TYPE_INT64;
}

/* Finds `key`; *v stays NULL when absent. Returns an error only when a
 * required key is absent. */
static int lookup(const gguf_file *f, const char *key, bool required, const gguf_value **v) {
  *v = gguf_get(f, key);
  if (!*v && required)
    return pa_error(PASADA_ERR_FORMAT, "%s: required key '%s' is missing", f->path, key);
  return PASADA_OK;
}

static int wrong_type(const gguf_file *f, const char *key, const gguf_value *v, const char *want) {
  return pa_error(PASADA_ERR_FORMAT, "%s: key '%s' has type %s, expected %s", f->path, key,
                  gguf_type_name(v->type), want);
}

/* The value of an integer key as a sign flag and magnitude-safe pair. */
static int get_int(const gguf_file *f, const char *key, const gguf_value *v, bool *neg,
                   uint64_t *mag, int64_t *sval) {
  if (is_unsigned(v->type)) {
    *neg = false;
    *mag = v->u64;
    *sval = v->u64 > INT64_MAX ? INT64_MAX : (int64_t)v->u64;
    return PASADA_OK;
  }
  if (is_signed(v->type)) {
    *neg = v->i64 < 0;
    *mag = *neg ? 0 : (uint64_t)v->i64;
    *sval = v->i64;
    return PASADA_OK;
  }
  return wrong_type(f, key, v, "an integer");
}

int gguf_get_u32(const gguf_file *f, const char *key, bool required, uint32_t *out) {
  const gguf_value *v;
  bool neg;
  uint64_t mag;
  int64_t s;
  int st = lookup(f, key, required, &v);
  if (st || !v) return st;
  if ((st = get_int(f, key, v, &neg, &mag, &s))) return st;
  if (neg || mag > UINT32_MAX)
    return pa_error(PASADA_ERR_FORMAT, "%s: key '%s' is %s%" PRIu64 ", which does not fit in uint32",
                    f->path, key, neg ? "-" : "", neg ? (uint64_t)0 - (uint64_t)s : mag);
  *out = (uint32_t)mag;
  return PASADA_OK;
}

int gguf_get_i64(const gguf_file *f, const char *key, bool required, int64_t *out) {
  const gguf_value *v;
  bool neg;
  uint64_t mag;
  int64_t s;
  int st = lookup(f, key, required, &v);
  if (st || !v) return st;
  if ((st = get_int(f, key, v, &neg, &mag, &s))) return st;
  if (!neg && mag > INT64_MAX)
    return pa_error(PASADA_ERR_FORMAT, "%s: key '%s' is %" PRIu64 ", which does not fit in int64",
                    f->path, key, mag);
  *out = s;
  return PASADA_OK;
}

int gguf_get_f32(const gguf_file *f, const char *key, bool required, float *out) {
  const gguf_value *v;
  int st = lookup(f, key, required, &v);
  if (st || !v) return st;
  if (v->type != GGUF_TYPE_FLOAT32 && v->type != GGUF_TYPE_FLOAT64)
    return wrong_type(f, key, v, "float32");
  *out = (float)v->f64;
  return PASADA_OK;
}

int gguf_get_bool(const gguf_file *f, const char *key, bool required, bool *out) {
  const gguf_value *v;
  int st = lookup(f, key, required, &v);
  if (st || !v) return st;
  if (v->type != GGUF_TYPE_BOOL) return wrong_type(f, key, v, "bool");
  *out = v->u64 != 0;
  return PASADA_OK;
}

int gguf_get_string(const gguf_file *f, const char *key, bool required, char **out) {
  const gguf_value *v;
  int st = lookup(f, key, required, &v);
  if (st || !v) return st;
  if (v->type != GGUF_TYPE_STRING) return wrong_type(f, key, v, "string");
  if (v->str.len >= SIZE_MAX) return pa_error(PASADA_ERR_NOMEM, "%s: key '%s' too long", f->path, key);
  char *s = malloc((size_t)v->str.len + 1);
  if (!s) return pa_error(PASADA_ERR_NOMEM, "%s: out of memory reading key '%s'", f->path, key);
  memcpy(s, v->str.ptr, (size_t)v->str.len);
  s[v->str.len] = 0;
  *out = s;
  return PASADA_OK;
}

/* Reads element i of a packed numeric array (little-endian, unaligned). */
static uint64_t raw_elem(const gguf_value *a, uint64_t i, size_t n) {
  const uint8_t *p = a->arr.raw + i * n;
  uint64_t x = 0;
  for (size_t k = n; k-- > 0;) x = (x << 8) | p[k];
  return x;
}

int64_t gguf_arr_i64(const gguf_value *a, uint64_t i) {
  size_t n = gguf_type_size(a->arr.elem_type);
  if (!n || !a->arr.raw) return 0;
  uint64_t x = raw_elem(a, i, n);
  switch (a->arr.elem_type) {
  case GGUF_TYPE_INT8: return (int8_t)x;
  case GGUF_TYPE_INT16: return (int16_t)x;
  case GGUF_TYPE_INT32: return (int32_t)x;
  case GGUF_TYPE_INT64: return (int64_t)x;
  case GGUF_TYPE_BOOL: return x != 0;
  case GGUF_TYPE_FLOAT32:
  case GGUF_TYPE_FLOAT64: {
    double d = gguf_arr_f64(a, i); /* truncated; NaN and out-of-range give 0 */
    return d >= -9.2e18 && d <= 9.2e18 ? (int64_t)d : 0;
  }
  default: return x > INT64_MAX ? INT64_MAX : (int64_t)x; /* unsigned */
  }
}

double gguf_arr_f64(const gguf_value *a, uint64_t i) {
  if (a->arr.elem_type == GGUF_TYPE_FLOAT32 && a->arr.raw) {
    uint32_t b = (uint32_t)raw_elem(a, i, 4);
    float v;
    memcpy(&v, &b, 4);
    return v;
  }
  if (a->arr.elem_type == GGUF_TYPE_FLOAT64 && a->arr.raw) {
    uint64_t b = raw_elem(a, i, 8);
    double v;
    memcpy(&v, &b, 8);
    return v;
  }
  if (a->arr.elem_type == GGUF_TYPE_UINT64 && a->arr.raw) return (double)raw_elem(a, i, 8);
  return (double)gguf_arr_i64(a, i);
}
