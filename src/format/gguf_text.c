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
#include "format/gguf.h"

typedef struct {
  char *s;
  size_t n, cap;
  bool oom;
} tbuf;

static void put(tbuf *b, const char *s, size_t n) {
  if (b->oom) return;
  if (n + 1 > b->cap - b->n || !b->s) {
    size_t cap = b->cap ? b->cap : 64;
    while (n + 1 > cap - b->n) {
      if (cap > SIZE_MAX / 2) {
        b->oom = true;
        return;
      }
      cap *= 2;
    }
    char *ns = realloc(b->s, cap);
    if (!ns) {
      b->oom = true;
      return;
    }
    b->s = ns;
    b->cap = cap;
  }
  memcpy(b->s + b->n, s, n);
  b->n += n;
  b->s[b->n] = '\0';
}

static void putf(tbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(tbuf *b, const char *fmt, ...) {
  char tmp[64];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n > 0) put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* The shortest %g form that reads back as the same float (single) or double. */
static void put_float(tbuf *b, double v, bool single) {
  char tmp[40];
  for (int digits = single ? 6 : 15; digits <= (single ? 9 : 17); digits++) {
    snprintf(tmp, sizeof tmp, "%.*g", digits, v);
    if (single ? strtof(tmp, NULL) == (float)v : strtod(tmp, NULL) == v) break;
  }
  put(b, tmp, strlen(tmp));
}

/* A string inside an array: in double quotes, with ", \ and control bytes
 * escaped as in JSON (other bytes, UTF-8 included, as they are). */
static void put_quoted(tbuf *b, gguf_str s) {
  put(b, "\"", 1);
  size_t run = 0;
  for (uint64_t i = 0; i < s.len; i++) {
    unsigned char c = (unsigned char)s.ptr[i];
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    put(b, s.ptr + run, (size_t)i - run);
    run = (size_t)i + 1;
    if (c == '"' || c == '\\') {
      char esc[2] = {'\\', (char)c};
      put(b, esc, 2);
    } else if (c == '\n') {
      put(b, "\\n", 2);
    } else if (c == '\t') {
      put(b, "\\t", 2);
    } else if (c == '\r') {
      put(b, "\\r", 2);
    } else {
      putf(b, "\\u%04x", c);
    }
  }
  put(b, s.ptr + run, (size_t)s.len - run);
  put(b, "\"", 1);
}

static uint64_t read_le(const uint8_t *p, size_t n) {
  uint64_t x = 0;
  for (size_t k = n; k-- > 0;) x = (x << 8) | p[k];
  return x;
}

/* A numeric or bool element `x` (its n little-endian bytes) of type t. */
static void put_number(tbuf *b, gguf_type t, uint64_t x) {
  switch (t) {
  case GGUF_TYPE_INT8: putf(b, "%d", (int8_t)x); break;
  case GGUF_TYPE_INT16: putf(b, "%d", (int16_t)x); break;
  case GGUF_TYPE_INT32: putf(b, "%" PRId32, (int32_t)x); break;
  case GGUF_TYPE_INT64: putf(b, "%" PRId64, (int64_t)x); break;
  case GGUF_TYPE_BOOL: put(b, x ? "true" : "false", x ? 4 : 5); break;
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
  default: putf(b, "%" PRIu64, x); break; /* unsigned */
  }
}

static void put_value(tbuf *b, const gguf_value *v, bool nested) {
  switch (v->type) {
  case GGUF_TYPE_STRING:
    if (nested)
      put_quoted(b, v->str);
    else
      put(b, v->str.ptr, (size_t)v->str.len);
    return;
  case GGUF_TYPE_ARRAY: break;
  case GGUF_TYPE_INT8:
  case GGUF_TYPE_INT16:
  case GGUF_TYPE_INT32:
  case GGUF_TYPE_INT64: putf(b, "%" PRId64, v->i64); return;
  case GGUF_TYPE_FLOAT32: put_float(b, v->f64, true); return;
  case GGUF_TYPE_FLOAT64: put_float(b, v->f64, false); return;
  case GGUF_TYPE_BOOL: put(b, v->u64 ? "true" : "false", v->u64 ? 4 : 5); return;
  default: putf(b, "%" PRIu64, v->u64); return; /* unsigned */
  }
  const gguf_type et = v->arr.elem_type;
  if (et == GGUF_TYPE_STRING && !v->arr.strs && v->arr.count) {
    /* a loaded model's token list and merges: their tables are gone (see
     * gguf_drop_string_arrays); the tokenizer holds them */
    putf(b, "[%" PRIu64 " strings]", v->arr.count);
    return;
  }
  const size_t size = gguf_type_size(et);
  put(b, "[", 1);
  for (uint64_t i = 0; i < v->arr.count && !b->oom; i++) {
    if (i) put(b, ", ", 2);
    if (et == GGUF_TYPE_STRING)
      put_quoted(b, v->arr.strs[i]);
    else if (et == GGUF_TYPE_ARRAY)
      put_value(b, &v->arr.items[i], true);
    else if (size && v->arr.raw)
      put_number(b, et, read_le(v->arr.raw + i * size, size));
  }
  put(b, "]", 1);
}

int gguf_value_text(const gguf_value *v, char **out) {
  *out = NULL;
  tbuf b = {0};
  put_value(&b, v, false);
  if (!b.oom && !b.s) put(&b, "", 0);
  if (b.oom) {
    free(b.s);
    return pa_error(PASADA_ERR_NOMEM, "out of memory for a metadata value as text");
  }
  *out = b.s;
  return PASADA_OK;
}
