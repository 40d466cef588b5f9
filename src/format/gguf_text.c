/* gguf_text.c: a GGUF metadata value as text, for the public metadata
 * accessor (pasada_model_meta_value): integers in decimal, floats in the
 * fewest digits that read back to the same value, booleans as true/false,
 * strings as they are, arrays as [a, b, c] with their strings quoted. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/sbuf.h"
#include "format/gguf.h"

/* The shortest %g form that reads back as the same float (single) or double. */
static void put_float(pa_sbuf *b, double v, bool single) {
  char tmp[40];
  for (int digits = single ? 6 : 15; digits <= (single ? 9 : 17); digits++) {
    snprintf(tmp, sizeof tmp, "%.*g", digits, v);
    if (single ? strtof(tmp, NULL) == (float)v : strtod(tmp, NULL) == v) break;
  }
  pa_sbuf_put(b, tmp, strlen(tmp));
}

/* A string inside an array: in double quotes, with ", \ and control bytes
 * escaped as in JSON (other bytes, UTF-8 included, as they are). */
static void put_quoted(pa_sbuf *b, gguf_str s) {
  pa_sbuf_put(b, "\"", 1);
  size_t run = 0;
  for (uint64_t i = 0; i < s.len; i++) {
    unsigned char c = (unsigned char)s.ptr[i];
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    pa_sbuf_put(b, s.ptr + run, (size_t)i - run);
    run = (size_t)i + 1;
    if (c == '"' || c == '\\') {
      char esc[2] = {'\\', (char)c};
      pa_sbuf_put(b, esc, 2);
    } else if (c == '\n') {
      pa_sbuf_put(b, "\\n", 2);
    } else if (c == '\t') {
      pa_sbuf_put(b, "\\t", 2);
    } else if (c == '\r') {
      pa_sbuf_put(b, "\\r", 2);
    } else {
      pa_sbuf_printf(b, "\\u%04x", c);
    }
  }
  pa_sbuf_put(b, s.ptr + run, (size_t)s.len - run);
  pa_sbuf_put(b, "\"", 1);
}

static uint64_t read_le(const uint8_t *p, size_t n) {
  uint64_t x = 0;
  for (size_t k = n; k-- > 0;) x = (x << 8) | p[k];
  return x;
}

/* A numeric or bool element `x` (its n little-endian bytes) of type t. */
static void put_number(pa_sbuf *b, gguf_type t, uint64_t x) {
  switch (t) {
  case GGUF_TYPE_INT8: pa_sbuf_printf(b, "%d", (int8_t)x); break;
  case GGUF_TYPE_INT16: pa_sbuf_printf(b, "%d", (int16_t)x); break;
  case GGUF_TYPE_INT32: pa_sbuf_printf(b, "%" PRId32, (int32_t)x); break;
  case GGUF_TYPE_INT64: pa_sbuf_printf(b, "%" PRId64, (int64_t)x); break;
  case GGUF_TYPE_BOOL: pa_sbuf_put(b, x ? "true" : "false", x ? 4 : 5); break;
  case GGUF_TYPE_FLOAT32: {
    uint32_t bits = (uint32_t)x;
    float f;
    memcpy(&f, &bits, 4);
    put_float(b, f, true);
    break;
  }
  case GGUF_TYPE_FLOAT64: {
    double d;
    memcpy(&d, &x, 8);
    put_float(b, d, false);
    break;
  }
  default: pa_sbuf_printf(b, "%" PRIu64, x); break; /* unsigned */
  }
}

static void put_value(pa_sbuf *b, const gguf_value *v, bool nested) {
  switch (v->type) {
  case GGUF_TYPE_STRING:
    if (nested)
      put_quoted(b, v->str);
    else
      pa_sbuf_put(b, v->str.ptr, (size_t)v->str.len);
    return;
  case GGUF_TYPE_ARRAY: break;
  case GGUF_TYPE_INT8:
  case GGUF_TYPE_INT16:
  case GGUF_TYPE_INT32:
  case GGUF_TYPE_INT64: pa_sbuf_printf(b, "%" PRId64, v->i64); return;
  case GGUF_TYPE_FLOAT32: put_float(b, v->f64, true); return;
  case GGUF_TYPE_FLOAT64: put_float(b, v->f64, false); return;
  case GGUF_TYPE_BOOL: pa_sbuf_put(b, v->u64 ? "true" : "false", v->u64 ? 4 : 5); return;
  default: pa_sbuf_printf(b, "%" PRIu64, v->u64); return; /* unsigned */
  }
  const gguf_type et = v->arr.elem_type;
  if (et == GGUF_TYPE_STRING && !v->arr.strs && v->arr.count) {
    /* a loaded model's token list and merges: their tables are gone (see
     * gguf_drop_string_arrays); the tokenizer holds them */
    pa_sbuf_printf(b, "[%" PRIu64 " strings]", v->arr.count);
    return;
  }
  const size_t size = gguf_type_size(et);
  pa_sbuf_put(b, "[", 1);
  for (uint64_t i = 0; i < v->arr.count && !b->oom; i++) {
    if (i) pa_sbuf_put(b, ", ", 2);
    if (et == GGUF_TYPE_STRING)
      put_quoted(b, v->arr.strs[i]);
    else if (et == GGUF_TYPE_ARRAY)
      put_value(b, &v->arr.items[i], true);
    else if (size && v->arr.raw)
      put_number(b, et, read_le(v->arr.raw + i * size, size));
  }
  pa_sbuf_put(b, "]", 1);
}

int gguf_value_text(const gguf_value *v, char **out) {
  *out = NULL;
  pa_sbuf b = {0};
  put_value(&b, v, false);
  *out = pa_sbuf_finish(&b);
  return *out ? PASADA_OK : pa_error(PASADA_ERR_NOMEM, "out of memory for a metadata value as text");
}
