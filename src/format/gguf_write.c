/* gguf_write.c: the GGUF writer. Metadata values are deep-copied as they are
 * set; tensors are described (their data stays the caller's) and streamed to
 * disk in gguf_writer_write: header, metadata, tensor table, padding, then
 * each tensor's data padded to the alignment. Files are little-endian v3 (or
 * v2, the same layout) and read back by gguf_read.c and the `gguf` package. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "format/gguf.h"
#include "quant/quant.h"

typedef struct {
  char *key;
  gguf_value value; /* owns its strings and arrays */
} writer_kv;

typedef struct {
  char *name;
  uint32_t type, n_dims;
  int64_t ne[GGUF_MAX_DIMS];
  const void *data;
  uint64_t nbytes;
} writer_tensor;

struct gguf_writer {
  writer_kv *kv;
  size_t n_kv, cap_kv;
  writer_tensor *tensors;
  size_t n_tensors, cap_tensors;
  uint32_t alignment;
};

gguf_writer *gguf_writer_create(void) {
  gguf_writer *w = calloc(1, sizeof *w);
  if (w) w->alignment = GGUF_DEFAULT_ALIGNMENT;
  return w;
}

static void value_free(gguf_value *v) {
  if (v->type == GGUF_TYPE_STRING) free((void *)v->str.ptr);
  if (v->type != GGUF_TYPE_ARRAY) return;
  free((void *)v->arr.raw);
  if (v->arr.strs)
    for (uint64_t i = 0; i < v->arr.count; i++) free((void *)v->arr.strs[i].ptr);
  if (v->arr.items)
    for (uint64_t i = 0; i < v->arr.count; i++) value_free(&v->arr.items[i]);
  free(v->arr.strs);
  free(v->arr.items);
}

void gguf_writer_free(gguf_writer *w) {
  if (!w) return;
  for (size_t i = 0; i < w->n_kv; i++) {
    free(w->kv[i].key);
    value_free(&w->kv[i].value);
  }
  for (size_t i = 0; i < w->n_tensors; i++) free(w->tensors[i].name);
  free(w->kv);
  free(w->tensors);
  free(w);
}

static char *copy_bytes(const char *s, uint64_t len) {
  if (len >= SIZE_MAX) return NULL;
  char *p = malloc((size_t)len + 1);
  if (!p) return NULL;
  if (len) memcpy(p, s, (size_t)len);
  p[len] = 0;
  return p;
}

/* Deep copy of src into dst (zeroed by the caller). On failure dst holds
 * what was copied so far, so value_free(dst) cleans up. */
static int value_clone(gguf_value *dst, const gguf_value *src, int depth) {
  dst->type = src->type;
  if ((unsigned)src->type >= GGUF_TYPE_COUNT)
    return pa_error(PASADA_ERR_ARG, "gguf writer: unknown value type %d", (int)src->type);
  if (src->type == GGUF_TYPE_STRING) {
    dst->str.ptr = copy_bytes(src->str.ptr, src->str.len);
    dst->str.len = src->str.len;
    return dst->str.ptr ? PASADA_OK : pa_error(PASADA_ERR_NOMEM, "gguf writer: out of memory");
  }
  if (src->type != GGUF_TYPE_ARRAY) {
    dst->u64 = src->u64; /* the union's widest member carries any scalar */
    return PASADA_OK;
  }
  if (depth > GGUF_MAX_ARRAY_DEPTH)
    return pa_error(PASADA_ERR_ARG, "gguf writer: arrays nested more than %d deep",
                    GGUF_MAX_ARRAY_DEPTH);
  gguf_type et = src->arr.elem_type;
  uint64_t n = src->arr.count, bytes;
  size_t es = gguf_type_size(et);
  if ((unsigned)et >= GGUF_TYPE_COUNT)
    return pa_error(PASADA_ERR_ARG, "gguf writer: unknown array element type %d", (int)et);
  dst->arr.elem_type = et;
  if (es) {
    if (!pa_mul_u64(n, es, &bytes) || bytes >= SIZE_MAX)
      return pa_error(PASADA_ERR_ARG, "gguf writer: array too large");
    uint8_t *raw = malloc(bytes ? (size_t)bytes : 1);
    if (!raw) return pa_error(PASADA_ERR_NOMEM, "gguf writer: out of memory");
    if (bytes) memcpy(raw, src->arr.raw, (size_t)bytes);
    dst->arr.raw = raw;
    dst->arr.count = n;
    return PASADA_OK;
  }
  size_t item = et == GGUF_TYPE_STRING ? sizeof(gguf_str) : sizeof(gguf_value);
  void *arr = calloc(n ? n : 1, item); /* calloc checks n * item */
  if (!arr || n > SIZE_MAX / item) {
    free(arr);
    return pa_error(PASADA_ERR_NOMEM, "gguf writer: out of memory");
  }
  dst->arr.count = n;
  if (et == GGUF_TYPE_STRING) {
    dst->arr.strs = arr;
    for (uint64_t i = 0; i < n; i++) {
      dst->arr.strs[i].ptr = copy_bytes(src->arr.strs[i].ptr, src->arr.strs[i].len);
      dst->arr.strs[i].len = src->arr.strs[i].len;
      if (!dst->arr.strs[i].ptr) return pa_error(PASADA_ERR_NOMEM, "gguf writer: out of memory");
    }
    return PASADA_OK;
  }
  dst->arr.items = arr;
  for (uint64_t i = 0; i < n; i++) {
    int st = value_clone(&dst->arr.items[i], &src->arr.items[i], depth + 1);
    if (st) return st;
  }
  return PASADA_OK;
}

static int check_key(const char *key) {
  size_t n = key ? strlen(key) : 0;
  if (n == 0 || n > GGUF_MAX_KEY_LEN)
    return pa_error(PASADA_ERR_ARG, "gguf writer: key must be 1 to %d bytes", GGUF_MAX_KEY_LEN);
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)key[i] < 0x20 || key[i] == 0x7f)
      return pa_error(PASADA_ERR_ARG, "gguf writer: key contains a control byte");
  return PASADA_OK;
}

int gguf_writer_set_value(gguf_writer *w, const char *key, const gguf_value *v) {
  gguf_value copy;
  int st = check_key(key);
  if (st) return st;
  memset(&copy, 0, sizeof copy);
  if ((st = value_clone(&copy, v, 1))) {
    value_free(&copy);
    return st;
  }
  for (size_t i = 0; i < w->n_kv; i++)
    if (!strcmp(w->kv[i].key, key)) { /* replace in place: the order is kept */
      value_free(&w->kv[i].value);
      w->kv[i].value = copy;
      return PASADA_OK;
    }
  char *k = pa_strdup(key);
  if (w->n_kv == w->cap_kv) {
    size_t cap = w->cap_kv ? w->cap_kv * 2 : 16;
    writer_kv *nkv = realloc(w->kv, cap * sizeof *nkv);
    if (nkv) {
      w->kv = nkv;
      w->cap_kv = cap;
    }
  }
  if (!k || w->n_kv == w->cap_kv) {
    free(k);
    value_free(&copy);
    return pa_error(PASADA_ERR_NOMEM, "gguf writer: out of memory");
  }
  w->kv[w->n_kv].key = k;
  w->kv[w->n_kv].value = copy;
  w->n_kv++;
  return PASADA_OK;
}

void gguf_writer_set_alignment(gguf_writer *w, uint32_t alignment) {
  w->alignment = alignment;
  gguf_writer_set_u32(w, "general.alignment", alignment);
}

int gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v) {
  gguf_value val = {.type = GGUF_TYPE_UINT32, .u64 = v};
  return gguf_writer_set_value(w, key, &val);
}

int gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v) {
  gguf_value val = {.type = GGUF_TYPE_INT32, .i64 = v};
  return gguf_writer_set_value(w, key, &val);
}

int gguf_writer_set_f32(gguf_writer *w, const char *key, float v) {
  gguf_value val = {.type = GGUF_TYPE_FLOAT32, .f64 = v};
  return gguf_writer_set_value(w, key, &val);
}

int gguf_writer_set_bool(gguf_writer *w, const char *key, bool v) {
  gguf_value val = {.type = GGUF_TYPE_BOOL, .u64 = v};
  return gguf_writer_set_value(w, key, &val);
}

int gguf_writer_set_string(gguf_writer *w, const char *key, const char *v) {
  gguf_value val = {.type = GGUF_TYPE_STRING, .str = {v, strlen(v)}};
  return gguf_writer_set_value(w, key, &val);
}

int gguf_writer_set_array(gguf_writer *w, const char *key, gguf_type elem_type, const void *data,
                          uint64_t count) {
  if (gguf_type_size(elem_type) == 0)
    return pa_error(PASADA_ERR_ARG, "gguf writer: key '%s': array element type %s is not numeric",
                    key, gguf_type_name(elem_type));
  gguf_value val = {.type = GGUF_TYPE_ARRAY};
  val.arr.elem_type = elem_type;
  val.arr.count = count;
  val.arr.raw = data;
  return gguf_writer_set_value(w, key, &val);
}

int gguf_writer_set_string_array(gguf_writer *w, const char *key, const char *const *strs,
                                 uint64_t count) {
  gguf_str *s = calloc(count ? count : 1, sizeof *s);
  if (!s || count > SIZE_MAX / sizeof *s) {
    free(s);
    return pa_error(PASADA_ERR_NOMEM, "gguf writer: out of memory");
  }
  for (uint64_t i = 0; i < count; i++) s[i] = (gguf_str){strs[i], strlen(strs[i])};
  gguf_value val = {.type = GGUF_TYPE_ARRAY};
  val.arr.elem_type = GGUF_TYPE_STRING;
  val.arr.count = count;
  val.arr.strs = s;
  int st = gguf_writer_set_value(w, key, &val);
  free(s);
  return st;
}

int gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                           const int64_t *ne, const void *data, uint64_t nbytes) {
  size_t len = name ? strlen(name) : 0;
  if (len == 0 || len > GGUF_MAX_NAME_LEN)
    return pa_error(PASADA_ERR_ARG, "gguf writer: tensor name must be 1 to %d bytes",
                    GGUF_MAX_NAME_LEN);
  const pa_type_traits *tr = pa_type_get(type);
  if (!tr) return pa_error(PASADA_ERR_ARG, "gguf writer: tensor '%s': unknown type %u", name, type);
  if (n_dims < 1 || n_dims > GGUF_MAX_DIMS)
    return pa_error(PASADA_ERR_ARG, "gguf writer: tensor '%s': %u dimensions", name, n_dims);
  uint64_t rows = 1, need = 0;
  for (uint32_t d = 0; d < n_dims; d++) {
    if (ne[d] < 1) return pa_error(PASADA_ERR_ARG, "gguf writer: tensor '%s': dimension %u < 1", name, d);
    if (d > 0 && !pa_mul_u64(rows, (uint64_t)ne[d], &rows))
      return pa_error(PASADA_ERR_ARG, "gguf writer: tensor '%s': size overflows", name);
  }
  if (ne[0] % tr->block_size)
    return pa_error(PASADA_ERR_ARG, "gguf writer: tensor '%s': row length %" PRId64
                    " is not a multiple of %" PRId64, name, ne[0], tr->block_size);
  uint64_t row_bytes;
  if (!pa_mul_u64((uint64_t)(ne[0] / tr->block_size), tr->type_size, &row_bytes) ||
      !pa_mul_u64(row_bytes, rows, &need) || need != nbytes)
    return pa_error(PASADA_ERR_ARG, "gguf writer: tensor '%s': %" PRIu64
                    " bytes given, its shape and type need %" PRIu64, name, nbytes, need);
  for (size_t i = 0; i < w->n_tensors; i++)
    if (!strcmp(w->tensors[i].name, name))
      return pa_error(PASADA_ERR_ARG, "gguf writer: tensor '%s' added twice", name);
  if (w->n_tensors == w->cap_tensors) {
    size_t cap = w->cap_tensors ? w->cap_tensors * 2 : 16;
    writer_tensor *nt = realloc(w->tensors, cap * sizeof *nt);
    if (!nt) return pa_error(PASADA_ERR_NOMEM, "gguf writer: out of memory");
    w->tensors = nt;
    w->cap_tensors = cap;
  }
  writer_tensor *t = &w->tensors[w->n_tensors];
  memset(t, 0, sizeof *t);
  if (!(t->name = pa_strdup(name))) return pa_error(PASADA_ERR_NOMEM, "gguf writer: out of memory");
  t->type = type;
  t->n_dims = n_dims;
  for (int d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = (uint32_t)d < n_dims ? ne[d] : 1;
  t->data = data;
  t->nbytes = nbytes;
  w->n_tensors++;
  return PASADA_OK;
}

/* ---- serialization ---- */
typedef struct {
  FILE *fp;
  uint64_t pos;
  bool failed;
} out_stream;

static void put(out_stream *o, const void *p, uint64_t n) {
  if (o->failed || n == 0) return;
  if (fwrite(p, 1, (size_t)n, o->fp) != n) o->failed = true;
  o->pos += n;
}

static void put_le(out_stream *o, uint64_t v, int n) {
  uint8_t b[8];
  for (int i = 0; i < n; i++) b[i] = (uint8_t)(v >> (8 * i));
  put(o, b, (uint64_t)n);
}

static void put_str(out_stream *o, const char *s, uint64_t len) {
  put_le(o, len, 8);
  put(o, s, len);
}

static void pad(out_stream *o, uint64_t alignment) {
  static const uint8_t zeros[256];
  uint64_t n = (alignment - o->pos % alignment) % alignment;
  while (n > 0) {
    uint64_t k = n < sizeof zeros ? n : sizeof zeros;
    put(o, zeros, k);
    n -= k;
  }
}

static void put_value(out_stream *o, const gguf_value *v) {
  switch (v->type) {
  case GGUF_TYPE_STRING: put_str(o, v->str.ptr, v->str.len); break;
  case GGUF_TYPE_ARRAY:
    put_le(o, (uint64_t)v->arr.elem_type, 4);
    put_le(o, v->arr.count, 8);
    if (v->arr.raw) put(o, v->arr.raw, v->arr.count * gguf_type_size(v->arr.elem_type));
    if (v->arr.strs)
      for (uint64_t i = 0; i < v->arr.count; i++) put_str(o, v->arr.strs[i].ptr, v->arr.strs[i].len);
    if (v->arr.items)
      for (uint64_t i = 0; i < v->arr.count; i++) put_value(o, &v->arr.items[i]);
    break;
  case GGUF_TYPE_FLOAT32: {
    float f = (float)v->f64;
    uint32_t b;
    memcpy(&b, &f, 4);
    put_le(o, b, 4);
    break;
  }
  case GGUF_TYPE_FLOAT64: {
    uint64_t b;
    memcpy(&b, &v->f64, 8);
    put_le(o, b, 8);
    break;
  }
  case GGUF_TYPE_BOOL: put_le(o, v->u64 != 0, 1); break;
  default: put_le(o, v->u64, (int)gguf_type_size(v->type)); break; /* two's complement */
  }
}

/* Streams the file to fp (closed here, on failure too); `path` names it in errors. */
static int write_stream(gguf_writer *w, FILE *fp, const char *path, uint32_t version) {
  if (version != 2 && version != 3) {
    fclose(fp);
    return pa_error(PASADA_ERR_ARG, "gguf writer: version %u (only 2 and 3 are written)", version);
  }
  /* A general.alignment key, when set, is the alignment the reader will use. */
  uint64_t alignment = w->alignment;
  for (size_t i = 0; i < w->n_kv; i++)
    if (!strcmp(w->kv[i].key, "general.alignment")) {
      const gguf_value *v = &w->kv[i].value;
      if (v->type != GGUF_TYPE_UINT32) {
        fclose(fp);
        return pa_error(PASADA_ERR_ARG, "gguf writer: general.alignment must be uint32");
      }
      alignment = v->u64;
    }
  if (alignment == 0 || (alignment & (alignment - 1)) || alignment > GGUF_MAX_ALIGNMENT) {
    fclose(fp);
    return pa_error(PASADA_ERR_ARG, "gguf writer: alignment %" PRIu64 " is not a power of two in 1..%u",
                    alignment, GGUF_MAX_ALIGNMENT);
  }
  out_stream o = {.fp = fp};
  put(&o, "GGUF", 4);
  put_le(&o, version, 4);
  put_le(&o, w->n_tensors, 8);
  put_le(&o, w->n_kv, 8);
  for (size_t i = 0; i < w->n_kv; i++) {
    put_str(&o, w->kv[i].key, strlen(w->kv[i].key));
    put_le(&o, (uint64_t)w->kv[i].value.type, 4);
    put_value(&o, &w->kv[i].value);
  }
  uint64_t offset = 0;
  for (size_t i = 0; i < w->n_tensors; i++) {
    const writer_tensor *t = &w->tensors[i];
    put_str(&o, t->name, strlen(t->name));
    put_le(&o, t->n_dims, 4);
    for (uint32_t d = 0; d < t->n_dims; d++) put_le(&o, (uint64_t)t->ne[d], 8);
    put_le(&o, t->type, 4);
    put_le(&o, offset, 8);
    offset += t->nbytes + (alignment - t->nbytes % alignment) % alignment;
  }
  pad(&o, alignment);
  for (size_t i = 0; i < w->n_tensors; i++) {
    put(&o, w->tensors[i].data, w->tensors[i].nbytes);
    pad(&o, alignment);
  }
  int err = o.failed ? errno : 0;
  if (fclose(fp) != 0 && !err) err = errno ? errno : EIO;
  if (o.failed || err)
    return pa_error(PASADA_ERR_IO, "%s: write failed: %s", path, strerror(err ? err : EIO));
  return PASADA_OK;
}

int gguf_writer_write(gguf_writer *w, const char *path, uint32_t version) {
  FILE *fp = fopen(path, "wb");
  if (!fp) return pa_error(PASADA_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
  return write_stream(w, fp, path, version);
}

int gguf_writer_write_memory(gguf_writer *w, void **buf, uint64_t *size, uint32_t version) {
  char *p = NULL;
  size_t n = 0;
  *buf = NULL;
  *size = 0;
  FILE *fp = open_memstream(&p, &n);
  if (!fp) return pa_error(PASADA_ERR_NOMEM, "gguf writer: out of memory");
  int rc = write_stream(w, fp, "<memory>", version);
  if (rc) {
    free(p);
    return rc;
  }
  *buf = p;
  *size = n;
  return PASADA_OK;
}
