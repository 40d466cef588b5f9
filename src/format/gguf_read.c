/* gguf_read.c: the GGUF reader, the engine's border with untrusted files.
 * It maps a file (or takes a buffer), parses header, metadata and tensor
 * table, and checks every count, length, offset, dimension and type before
 * anything is allocated from it or anyone uses it. Lookups are hash-based.
 *
 * Limits chosen here (documented in docs/gguf.md):
 *   - arrays nest at most GGUF_MAX_ARRAY_DEPTH (8) levels;
 *   - keys are 1..65535 bytes, tensor names 1..1024 bytes, neither with
 *     control bytes (so every message stays on one line);
 *   - general.alignment is a uint32 power of two in 1..1 MiB;
 *   - tensors have 1..4 dims, each >= 1, with a product that fits int64,
 *     a known type and a row length that is a multiple of its block size;
 *     their offsets are aligned and their data lies inside the file.
 * Tensors may appear in any order and are not checked for overlap (overlap
 * cannot make a read go out of bounds). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "format/gguf.h"
#include "quant/quant.h"

#define GGUF_MAGIC 0x46554747u /* "GGUF" little-endian */

/* ---- arena: every allocation of a parsed file, freed at once ---- */
typedef struct arena_block {
  struct arena_block *next;
  size_t used, cap;
  _Alignas(16) unsigned char data[];
} arena_block;

typedef struct {
  arena_block *blocks;
  uint64_t *kv_table; /* open addressing: index + 1, 0 = empty */
  uint64_t kv_mask;
  uint64_t *tensor_table;
  uint64_t tensor_mask;
  bool mapped; /* map came from mmap (gguf_open) */
  void *anon;  /* gguf_open_anon's mapping (f->map is NULL there) */
  uint64_t anon_size;
} gguf_internal;

#define ARENA_CHUNK ((size_t)64 << 10)

/* Returns zeroed memory for n bytes, or NULL. n is a checked size. */
static void *arena_alloc(gguf_internal *in, uint64_t n) {
  if (n > SIZE_MAX - sizeof(arena_block) - 16) return NULL;
  n = (n + 15) & ~(uint64_t)15;
  arena_block *b = in->blocks;
  if (!b || b->cap - b->used < n) {
    size_t cap = n > ARENA_CHUNK / 4 ? (size_t)n : ARENA_CHUNK;
    arena_block *nb = malloc(sizeof(arena_block) + cap);
    if (!nb) return NULL;
    nb->used = 0;
    nb->cap = cap;
    if (b && cap != ARENA_CHUNK) { /* a big one-off: keep filling the current chunk */
      nb->next = b->next;
      b->next = nb;
    } else {
      nb->next = b;
      in->blocks = nb;
    }
    b = nb;
  }
  void *p = b->data + b->used;
  b->used += (size_t)n;
  memset(p, 0, (size_t)n);
  return p;
}

/* Frees p's block when p is a big one-off that has a block of its own (see
 * arena_alloc); anything else stays until arena_free. */
static void arena_release(gguf_internal *in, const void *p) {
  for (arena_block **link = &in->blocks, *b; p && (b = *link); link = &b->next) {
    if ((const void *)b->data != p) continue;
    if (b->cap == ARENA_CHUNK) return; /* a shared chunk: other values live in it */
    *link = b->next;
    free(b);
    return;
  }
}

static void arena_free(gguf_internal *in) {
  for (arena_block *b = in->blocks, *next; b; b = next) {
    next = b->next;
    free(b);
  }
  in->blocks = NULL;
}

/* ---- hash tables of keys and tensor names ---- */
/* FNV-1a from a per-process random basis, then a finalizer: a crafted file
 * cannot aim many names at one bucket to make opening it quadratic. */
static uint64_t hash_basis(void) {
  static _Atomic uint64_t basis;
  uint64_t b = basis;
  if (b == 0) {
    if (getentropy(&b, sizeof b) != 0) b = (uint64_t)(uintptr_t)&basis ^ (uint64_t)time(NULL);
    b |= 1;
    uint64_t unset = 0; /* the first thread's basis wins, for every table */
    if (!atomic_compare_exchange_strong(&basis, &unset, b)) b = unset;
  }
  return b;
}

static uint64_t hash_bytes(const char *s, size_t n) {
  uint64_t h = hash_basis();
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  return h ^ (h >> 33);
}

/* Allocates a table with room for n entries at load <= 1/2. n is bounded by
 * the file size, so the table is too. */
static uint64_t *table_new(gguf_internal *in, uint64_t n, uint64_t *mask) {
  uint64_t cap = 8;
  while (cap < n * 2) cap *= 2;
  *mask = cap - 1;
  return arena_alloc(in, cap * sizeof(uint64_t));
}

/* Finds the slot of `name` (or the empty slot where it would go). */
static uint64_t *table_slot(uint64_t *table, uint64_t mask, const char *name, size_t len,
                            const char *(*name_of)(const gguf_file *, uint64_t),
                            const gguf_file *f) {
  uint64_t i = hash_bytes(name, len) & mask;
  for (;;) {
    uint64_t e = table[i];
    if (e == 0) return &table[i];
    const char *other = name_of(f, e - 1);
    if (strlen(other) == len && memcmp(other, name, len) == 0) return &table[i];
    i = (i + 1) & mask;
  }
}

static const char *kv_name(const gguf_file *f, uint64_t i) { return f->kv[i].key; }
static const char *tensor_name(const gguf_file *f, uint64_t i) { return f->tensors[i].name; }

/* ---- the cursor ---- */
typedef struct {
  const char *file; /* name for messages */
  const uint8_t *p;
  uint64_t size, pos;
  gguf_internal *in;
  char ctx[200]; /* what is being read: "key 'general.name'", "tensor 'x'" */
} reader;

static uint64_t left(const reader *r) { return r->size - r->pos; }

/* Fails unless n more bytes are there; `what` says what they are. */
static int need(reader *r, uint64_t n, const char *what) {
  if (n <= left(r)) return PASADA_OK;
  return pa_error(PASADA_ERR_FORMAT,
                  "%s: truncated: %s: %s at offset %" PRIu64 " needs %" PRIu64
                  " bytes but only %" PRIu64 " remain (file size %" PRIu64 ")",
                  r->file, r->ctx, what, r->pos, n, left(r), r->size);
}

static uint64_t le(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

static int rd_u32(reader *r, uint32_t *v, const char *what) {
  int st = need(r, 4, what);
  if (st) return st;
  *v = (uint32_t)le(r->p + r->pos, 4);
  r->pos += 4;
  return PASADA_OK;
}

static int rd_u64(reader *r, uint64_t *v, const char *what) {
  int st = need(r, 8, what);
  if (st) return st;
  *v = le(r->p + r->pos, 8);
  r->pos += 8;
  return PASADA_OK;
}

static int rd_str(reader *r, gguf_str *s, const char *what) {
  uint64_t len, at = r->pos;
  int st = rd_u64(r, &len, what);
  if (st) return st;
  if (len > left(r))
    return pa_error(PASADA_ERR_FORMAT,
                    "%s: %s: %s of %" PRIu64 " bytes at offset %" PRIu64
                    " extends past the end of the file (size %" PRIu64 ")",
                    r->file, r->ctx, what, len, at, r->size);
  s->ptr = (const char *)r->p + r->pos;
  s->len = len;
  r->pos += len;
  return PASADA_OK;
}

/* Writes a printable, shortened form of untrusted bytes (for messages). */
static const char *printable(const char *s, uint64_t len, char *buf, size_t cap) {
  size_t o = 0;
  for (uint64_t i = 0; i < len && o + 8 < cap; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c >= 0x20 && c < 0x7f && c != '\\')
      buf[o++] = (char)c;
    else
      o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", c);
  }
  if (o + 8 >= cap && len > 0) o += (size_t)snprintf(buf + o, cap - o, "...");
  buf[o] = 0;
  return buf;
}

/* Checks a key or tensor name and returns a NUL-terminated copy in *out. */
static int check_name(reader *r, gguf_str s, uint64_t max_len, const char *kind, char **out) {
  char shown[96];
  if (s.len == 0) return pa_error(PASADA_ERR_FORMAT, "%s: %s: empty %s", r->file, r->ctx, kind);
  if (s.len > max_len)
    return pa_error(PASADA_ERR_FORMAT, "%s: %s: %s '%s' is %" PRIu64 " bytes long (limit %" PRIu64 ")",
                    r->file, r->ctx, kind, printable(s.ptr, s.len, shown, sizeof shown), s.len,
                    max_len);
  for (uint64_t i = 0; i < s.len; i++) {
    unsigned char c = (unsigned char)s.ptr[i];
    if (c < 0x20 || c == 0x7f)
      return pa_error(PASADA_ERR_FORMAT, "%s: %s: %s '%s' contains control byte 0x%02x", r->file,
                      r->ctx, kind, printable(s.ptr, s.len, shown, sizeof shown), c);
  }
  char *copy = arena_alloc(r->in, s.len + 1);
  if (!copy) return pa_error(PASADA_ERR_NOMEM, "%s: out of memory", r->file);
  memcpy(copy, s.ptr, s.len);
  *out = copy;
  return PASADA_OK;
}

/* ---- values ---- */
static int parse_value(reader *r, gguf_type type, int depth, gguf_value *v);

static int parse_array(reader *r, int depth, gguf_value *v) {
  uint32_t et;
  uint64_t count, min_size;
  int st;
  if (depth > GGUF_MAX_ARRAY_DEPTH)
    return pa_error(PASADA_ERR_FORMAT, "%s: %s: arrays nested more than %d deep at offset %" PRIu64,
                    r->file, r->ctx, GGUF_MAX_ARRAY_DEPTH, r->pos);
  if ((st = rd_u32(r, &et, "array element type"))) return st;
  if (et >= GGUF_TYPE_COUNT)
    return pa_error(PASADA_ERR_FORMAT, "%s: %s: array of unknown element type %" PRIu32
                    " at offset %" PRIu64, r->file, r->ctx, et, r->pos - 4);
  if ((st = rd_u64(r, &count, "array length"))) return st;
  v->arr.elem_type = (gguf_type)et;
  v->arr.count = count;
  size_t esize = gguf_type_size((gguf_type)et);
  /* Smallest encoding of one element: a string is its 8-byte length, an
   * array its 4-byte type and 8-byte count. Bound the count by it before
   * anything is allocated. */
  min_size = esize ? esize : et == GGUF_TYPE_STRING ? 8 : 12;
  uint64_t total;
  if (!pa_mul_u64(count, min_size, &total) || total > left(r))
    return pa_error(PASADA_ERR_FORMAT,
                    "%s: %s: array of %" PRIu64 " %s elements at offset %" PRIu64
                    " needs at least %" PRIu64 " bytes per element but only %" PRIu64
                    " bytes remain (file size %" PRIu64 ")",
                    r->file, r->ctx, count, gguf_type_name((gguf_type)et), r->pos - 12, min_size,
                    left(r), r->size);
  if (esize) {
    v->arr.raw = r->p + r->pos;
    r->pos += total;
    return PASADA_OK;
  }
  if (et == GGUF_TYPE_STRING) {
    v->arr.strs = arena_alloc(r->in, count * sizeof(gguf_str));
    if (!v->arr.strs) return pa_error(PASADA_ERR_NOMEM, "%s: out of memory", r->file);
    for (uint64_t i = 0; i < count; i++)
      if ((st = rd_str(r, &v->arr.strs[i], "string array element"))) return st;
    return PASADA_OK;
  }
  v->arr.items = arena_alloc(r->in, count * sizeof(gguf_value));
  if (!v->arr.items) return pa_error(PASADA_ERR_NOMEM, "%s: out of memory", r->file);
  for (uint64_t i = 0; i < count; i++)
    if ((st = parse_value(r, GGUF_TYPE_ARRAY, depth + 1, &v->arr.items[i]))) return st;
  return PASADA_OK;
}

static int parse_value(reader *r, gguf_type type, int depth, gguf_value *v) {
  v->type = type;
  if (type == GGUF_TYPE_STRING) return rd_str(r, &v->str, "string value");
  if (type == GGUF_TYPE_ARRAY) return parse_array(r, depth, v);
  size_t n = gguf_type_size(type);
  int st = need(r, n, "value");
  if (st) return st;
  uint64_t x = le(r->p + r->pos, (int)n);
  r->pos += n;
  switch (type) {
  case GGUF_TYPE_INT8: v->i64 = (int8_t)x; break;
  case GGUF_TYPE_INT16: v->i64 = (int16_t)x; break;
  case GGUF_TYPE_INT32: v->i64 = (int32_t)x; break;
  case GGUF_TYPE_INT64: v->i64 = (int64_t)x; break;
  case GGUF_TYPE_BOOL: v->u64 = x != 0; break;
  case GGUF_TYPE_FLOAT32: {
    uint32_t b = (uint32_t)x;
    float fv;
    memcpy(&fv, &b, 4);
    v->f64 = fv;
    break;
  }
  case GGUF_TYPE_FLOAT64: memcpy(&v->f64, &x, 8); break;
  default: v->u64 = x; break; /* unsigned integers */
  }
  return PASADA_OK;
}

/* ---- header, metadata, tensors ---- */
static int parse_kvs(reader *r, gguf_file *f) {
  gguf_internal *in = r->in;
  int st;
  in->kv_table = table_new(in, f->n_kv, &in->kv_mask);
  if (!in->kv_table) return pa_error(PASADA_ERR_NOMEM, "%s: out of memory", r->file);
  for (uint64_t i = 0; i < f->n_kv; i++) {
    gguf_kv *kv = &f->kv[i];
    gguf_str key;
    uint32_t type;
    snprintf(r->ctx, sizeof r->ctx, "metadata entry #%" PRIu64, i);
    if ((st = rd_str(r, &key, "key"))) return st;
    if ((st = check_name(r, key, GGUF_MAX_KEY_LEN, "key", &kv->key))) return st;
    snprintf(r->ctx, sizeof r->ctx, "key '%.150s'", kv->key);
    uint64_t *slot = table_slot(in->kv_table, in->kv_mask, kv->key, key.len, kv_name, f);
    if (*slot)
      return pa_error(PASADA_ERR_FORMAT, "%s: %s appears twice (entries #%" PRIu64 " and #%" PRIu64 ")",
                      r->file, r->ctx, *slot - 1, i);
    if ((st = rd_u32(r, &type, "value type"))) return st;
    if (type >= GGUF_TYPE_COUNT)
      return pa_error(PASADA_ERR_FORMAT, "%s: %s: unknown value type %" PRIu32 " at offset %" PRIu64,
                      r->file, r->ctx, type, r->pos - 4);
    if ((st = parse_value(r, (gguf_type)type, 1, &kv->value))) return st;
    *slot = i + 1; /* only now: a half-parsed entry is never looked up */
  }
  return PASADA_OK;
}

static int parse_alignment(reader *r, gguf_file *f) {
  f->alignment = GGUF_DEFAULT_ALIGNMENT;
  const gguf_value *v = gguf_get(f, "general.alignment");
  if (!v) return PASADA_OK;
  if (v->type != GGUF_TYPE_UINT32)
    return pa_error(PASADA_ERR_FORMAT, "%s: key 'general.alignment' has type %s, expected uint32",
                    r->file, gguf_type_name(v->type));
  if (v->u64 == 0 || (v->u64 & (v->u64 - 1)) || v->u64 > GGUF_MAX_ALIGNMENT)
    return pa_error(PASADA_ERR_FORMAT,
                    "%s: key 'general.alignment' is %" PRIu64
                    ", expected a power of two from 1 to %u",
                    r->file, v->u64, GGUF_MAX_ALIGNMENT);
  f->alignment = v->u64;
  return PASADA_OK;
}

static int parse_tensor_info(reader *r, gguf_file *f, uint64_t i) {
  gguf_internal *in = r->in;
  gguf_tensor *t = &f->tensors[i];
  gguf_str name;
  uint64_t dim, rows = 1, elems = 1;
  int st;
  snprintf(r->ctx, sizeof r->ctx, "tensor #%" PRIu64, i);
  if ((st = rd_str(r, &name, "name"))) return st;
  if ((st = check_name(r, name, GGUF_MAX_NAME_LEN, "tensor name", &t->name))) return st;
  snprintf(r->ctx, sizeof r->ctx, "tensor '%.150s'", t->name);
  uint64_t *slot = table_slot(in->tensor_table, in->tensor_mask, t->name, name.len, tensor_name, f);
  if (*slot)
    return pa_error(PASADA_ERR_FORMAT, "%s: %s appears twice (tensors #%" PRIu64 " and #%" PRIu64 ")",
                    r->file, r->ctx, *slot - 1, i);
  if ((st = rd_u32(r, &t->n_dims, "dimension count"))) return st;
  if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
    return pa_error(PASADA_ERR_FORMAT, "%s: %s: %" PRIu32 " dimensions, expected 1 to %d", r->file,
                    r->ctx, t->n_dims, GGUF_MAX_DIMS);
  for (int d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
  for (uint32_t d = 0; d < t->n_dims; d++) {
    if ((st = rd_u64(r, &dim, "dimension"))) return st;
    if (dim == 0 || dim > INT64_MAX)
      return pa_error(PASADA_ERR_FORMAT, "%s: %s: dimension %" PRIu32 " is %" PRIu64
                      ", expected 1 to 2^63-1", r->file, r->ctx, d, dim);
    if (!pa_mul_u64(elems, dim, &elems) || elems > INT64_MAX)
      return pa_error(PASADA_ERR_FORMAT, "%s: %s: the number of elements overflows 64 bits",
                      r->file, r->ctx);
    t->ne[d] = (int64_t)dim;
    if (d > 0) rows *= dim; /* <= elems, cannot overflow */
  }
  if ((st = rd_u32(r, &t->type, "type"))) return st;
  const pa_type_traits *tr = pa_type_get(t->type);
  if (!tr || tr->block_size <= 0 || tr->type_size == 0)
    return pa_error(PASADA_ERR_FORMAT, "%s: %s: unknown tensor type %" PRIu32, r->file, r->ctx,
                    t->type);
  if (t->ne[0] % tr->block_size)
    return pa_error(PASADA_ERR_FORMAT,
                    "%s: %s: row length %" PRId64 " is not a multiple of the block size %" PRId64
                    " of type %s", r->file, r->ctx, t->ne[0], tr->block_size, tr->name);
  uint64_t row_bytes;
  if (!pa_mul_u64((uint64_t)(t->ne[0] / tr->block_size), tr->type_size, &row_bytes) ||
      !pa_mul_u64(row_bytes, rows, &t->nbytes))
    return pa_error(PASADA_ERR_FORMAT, "%s: %s: data size overflows 64 bits", r->file, r->ctx);
  if ((st = rd_u64(r, &t->offset, "data offset"))) return st;
  *slot = i + 1;
  return PASADA_OK;
}

/* Places every tensor in the data section once its start is known. */
static int place_tensors(reader *r, gguf_file *f) {
  uint64_t data_size = f->size - f->data_offset;
  for (uint64_t i = 0; i < f->n_tensors; i++) {
    gguf_tensor *t = &f->tensors[i];
    uint64_t end, abs_end;
    if (t->offset % f->alignment)
      return pa_error(PASADA_ERR_FORMAT,
                      "%s: tensor '%.150s': data offset %" PRIu64
                      " is not a multiple of the alignment %" PRIu64,
                      r->file, t->name, t->offset, f->alignment);
    if (!pa_add_u64(t->offset, t->nbytes, &end) || end > data_size) {
      bool ok = pa_add_u64(f->data_offset, t->offset, &abs_end);
      return pa_error(PASADA_ERR_FORMAT,
                      "%s: tensor '%.150s': data [offset %" PRIu64 "%s, %" PRIu64
                      " bytes] extends past the end of the file (size %" PRIu64 ")",
                      r->file, t->name, ok ? abs_end : t->offset,
                      ok ? "" : " in the data section", t->nbytes, f->size);
    }
    t->data = f->map + f->data_offset + t->offset;
  }
  return PASADA_OK;
}

static int parse(reader *r, gguf_file *f) {
  uint32_t magic;
  int st;
  snprintf(r->ctx, sizeof r->ctx, "header");
  if (r->size == 0)
    return pa_error(PASADA_ERR_FORMAT, "%s: empty file (0 bytes), not a GGUF file", r->file);
  if (r->size < 4)
    return pa_error(PASADA_ERR_FORMAT, "%s: not a GGUF file (only %" PRIu64 " bytes)", r->file,
                    r->size);
  rd_u32(r, &magic, "magic");
  if (magic != GGUF_MAGIC) {
    char shown[40];
    return pa_error(PASADA_ERR_FORMAT, "%s: not a GGUF file (starts with '%s', expected 'GGUF')",
                    r->file, printable((const char *)r->p, 4, shown, sizeof shown));
  }
  if ((st = rd_u32(r, &f->version, "version"))) return st;
  if (f->version == 1)
    return pa_error(PASADA_ERR_UNSUPPORTED,
                    "%s: GGUF version 1 is not supported (only 2 and 3; re-convert the model)",
                    r->file);
  if (f->version != 2 && f->version != 3)
    return pa_error(PASADA_ERR_UNSUPPORTED,
                    "%s: unsupported GGUF version %" PRIu32 "%s (supported: 2 and 3)", r->file,
                    f->version, (f->version & 0xffff) == 0 ? ", a big-endian file?" : "");
  if ((st = rd_u64(r, &f->n_tensors, "tensor count"))) return st;
  if ((st = rd_u64(r, &f->n_kv, "metadata count"))) return st;
  /* Every entry takes at least 14 bytes (8 key length, 1 key byte, 4 type,
   * 1 value byte), every tensor 33 (8 + 1 name, 4 n_dims, 8 dim, 4 type,
   * 8 offset): bound both counts before allocating for them. */
  uint64_t kv_min, t_min, total;
  if (!pa_mul_u64(f->n_kv, 14, &kv_min) || !pa_mul_u64(f->n_tensors, 33, &t_min) ||
      !pa_add_u64(kv_min, t_min, &total) || total > left(r))
    return pa_error(PASADA_ERR_FORMAT,
                    "%s: truncated or corrupt header: %" PRIu64 " metadata entries and %" PRIu64
                    " tensors cannot fit in the %" PRIu64 " bytes after the header (file size %" PRIu64 ")",
                    r->file, f->n_kv, f->n_tensors, left(r), r->size);
  f->kv = arena_alloc(r->in, f->n_kv * sizeof(gguf_kv));
  f->tensors = arena_alloc(r->in, f->n_tensors * sizeof(gguf_tensor));
  r->in->tensor_table = table_new(r->in, f->n_tensors, &r->in->tensor_mask);
  if (!f->kv || !f->tensors || !r->in->tensor_table)
    return pa_error(PASADA_ERR_NOMEM, "%s: out of memory", r->file);
  if ((st = parse_kvs(r, f))) return st;
  if ((st = parse_alignment(r, f))) return st;
  for (uint64_t i = 0; i < f->n_tensors; i++)
    if ((st = parse_tensor_info(r, f, i))) return st;
  /* The data section starts at the next multiple of the alignment. A file
   * without tensors may end before it (nothing to pad for). */
  uint64_t start = r->pos + (f->alignment - r->pos % f->alignment) % f->alignment;
  if (start > r->size) {
    if (f->n_tensors > 0)
      return pa_error(PASADA_ERR_FORMAT,
                      "%s: truncated: the tensor data section starts at offset %" PRIu64
                      " (after the tensor table and padding), past the end of the file (size %" PRIu64
                      ")", r->file, start, r->size);
    start = r->size;
  }
  f->data_offset = start;
  return place_tensors(r, f);
}

/* Parses a buffer; when `mapped` the result owns the mapping (and unmaps it
 * on failure too). */
static int open_buffer(const uint8_t *map, uint64_t size, const char *name, bool mapped,
                       gguf_file **out) {
  *out = NULL;
  gguf_file *f = calloc(1, sizeof *f);
  gguf_internal *in = calloc(1, sizeof *in);
  char *path = pa_strdup(name);
  if (!f || !in || !path) {
    if (mapped) munmap((void *)map, (size_t)size);
    free(f);
    free(in);
    free(path);
    return pa_error(PASADA_ERR_NOMEM, "%s: out of memory", name);
  }
  f->path = path;
  f->map = map;
  f->size = size;
  f->internal = in;
  f->n_parts = 1;
  in->mapped = mapped;
  reader r = {.file = name, .p = map, .size = size, .in = in};
  int st = parse(&r, f);
  if (st) {
    gguf_close(f);
    return st;
  }
  *out = f;
  return PASADA_OK;
}

int gguf_open_memory(const void *data, uint64_t size, const char *name, gguf_file **out) {
  if (!name) name = "<memory>";
  if (!data && size) return pa_error(PASADA_ERR_ARG, "%s: NULL buffer", name);
  return open_buffer(data, size, name, false, out);
}

int gguf_open(const char *path, gguf_file **out) {
  struct stat sb;
  *out = NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return pa_error(PASADA_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  if (fstat(fd, &sb) != 0) {
    int e = errno;
    close(fd);
    return pa_error(PASADA_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
  }
  if (!S_ISREG(sb.st_mode)) {
    close(fd);
    return pa_error(PASADA_ERR_IO, "%s: not a regular file", path);
  }
  uint64_t size = (uint64_t)sb.st_size;
  if (size == 0) {
    close(fd);
    return open_buffer(NULL, 0, path, false, out); /* reports the empty file */
  }
  if (size > SIZE_MAX) {
    close(fd);
    return pa_error(PASADA_ERR_IO, "%s: too large to map (%" PRIu64 " bytes)", path, size);
  }
  void *map = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
  int e = errno;
  close(fd); /* the mapping keeps the file */
  if (map == MAP_FAILED) return pa_error(PASADA_ERR_IO, "%s: cannot map: %s", path, strerror(e));
  return open_buffer(map, size, path, true, out);
}

int gguf_open_anon(void *map, uint64_t size, const char *name, gguf_file **out) {
  int rc = open_buffer(map, size, name, true, out);
  if (rc) return rc; /* unmapped by open_buffer */
  gguf_internal *in = (*out)->internal;
  in->mapped = false;
  in->anon = map;
  in->anon_size = size;
  (*out)->map = NULL;
  return PASADA_OK;
}

int gguf_wrap_mapping(const char *path, const uint8_t *map, uint64_t size, uint64_t data_offset,
                      const gguf_tensor *tensors, uint64_t n, gguf_file **out) {
  *out = NULL;
  gguf_file *f = calloc(1, sizeof *f);
  gguf_internal *in = calloc(1, sizeof *in);
  char *p = pa_strdup(path);
  if (!f || !in || !p) {
    munmap((void *)map, (size_t)size);
    free(f), free(in), free(p);
    return pa_error(PASADA_ERR_NOMEM, "%s: out of memory", path);
  }
  f->path = p, f->map = map, f->size = size, f->data_offset = data_offset, f->internal = in;
  f->n_parts = 1, f->version = 3, f->alignment = GGUF_DEFAULT_ALIGNMENT;
  in->mapped = true;
  f->tensors = arena_alloc(in, n * sizeof(gguf_tensor) + 1);
  in->kv_table = table_new(in, 0, &in->kv_mask);
  in->tensor_table = table_new(in, n, &in->tensor_mask);
  if (!f->tensors || !in->kv_table || !in->tensor_table) {
    gguf_close(f);
    return pa_error(PASADA_ERR_NOMEM, "%s: out of memory", path);
  }
  for (uint64_t i = 0; i < n; i++) {
    gguf_tensor *t = &f->tensors[i];
    *t = tensors[i];
    size_t len = strlen(tensors[i].name);
    if (!(t->name = arena_alloc(in, len + 1))) {
      gguf_close(f);
      return pa_error(PASADA_ERR_NOMEM, "%s: out of memory", path);
    }
    memcpy(t->name, tensors[i].name, len);
    uint64_t *slot = table_slot(in->tensor_table, in->tensor_mask, t->name, len, tensor_name, f);
    if (*slot) {
      int st = pa_error(PASADA_ERR_FORMAT, "%s: tensor '%.150s' is named twice", path, t->name);
      gguf_close(f);
      return st;
    }
    f->n_tensors = i + 1;
    *slot = i + 1;
  }
  *out = f;
  return PASADA_OK;
}

void gguf_close(gguf_file *f) {
  if (!f) return;
  gguf_internal *in = f->internal;
  if (in) {
    if (in->mapped) munmap((void *)f->map, (size_t)f->size);
    if (in->anon) munmap(in->anon, (size_t)in->anon_size);
    arena_free(in);
    free(in);
  }
  for (uint32_t i = 0; f->parts && i < f->n_parts; i++) gguf_close(f->parts[i]);
  free(f->parts);
  free(f->path);
  free(f);
}

int gguf_join(gguf_file **parts, uint32_t n, const char *name, gguf_file **out) {
  *out = NULL;
  gguf_file *f = calloc(1, sizeof *f);
  gguf_internal *in = calloc(1, sizeof *in);
  gguf_file **own = calloc(n, sizeof *own);
  char *path = pa_strdup(parts[0]->path);
  if (!f || !in || !own || !path) {
    for (uint32_t i = 0; i < n; i++) gguf_close(parts[i]);
    free(f), free(in), free(own), free(path);
    return pa_error(PASADA_ERR_NOMEM, "%s: out of memory", name);
  }
  memcpy(own, parts, n * sizeof *own);
  f->internal = in, f->parts = own, f->n_parts = n, f->path = path;
  const gguf_file *first = parts[0];
  const gguf_internal *fin = first->internal;
  f->version = first->version;
  f->alignment = first->alignment;
  f->n_kv = first->n_kv;
  f->kv = first->kv; /* the first part's metadata and its lookup table */
  in->kv_table = fin->kv_table;
  in->kv_mask = fin->kv_mask;
  uint64_t total = 0; /* each part's count is bounded by its size: no overflow */
  for (uint32_t i = 0; i < n; i++) total += parts[i]->n_tensors, f->size += parts[i]->size;
  f->tensors = arena_alloc(in, total * sizeof(gguf_tensor) + 1);
  in->tensor_table = table_new(in, total, &in->tensor_mask);
  uint32_t *part_of = calloc(total + 1, sizeof *part_of); /* for the duplicate's message */
  if (!f->tensors || !in->tensor_table || !part_of) {
    free(part_of);
    gguf_close(f);
    return pa_error(PASADA_ERR_NOMEM, "%s: out of memory", name);
  }
  for (uint32_t p = 0; p < n; p++) {
    for (uint64_t i = 0; i < parts[p]->n_tensors; i++) {
      const gguf_tensor *t = &parts[p]->tensors[i];
      uint64_t *slot = table_slot(in->tensor_table, in->tensor_mask, t->name, strlen(t->name), tensor_name, f);
      if (*slot) {
        uint32_t q = part_of[*slot - 1];
        int st = pa_error(PASADA_ERR_FORMAT, "%s: tensor '%.150s' is in two parts of the split model: %s and %s",
                          name, t->name, parts[q]->path, parts[p]->path);
        free(part_of);
        gguf_close(f);
        return st;
      }
      part_of[f->n_tensors] = p;
      f->tensors[f->n_tensors++] = *t;
      *slot = f->n_tensors;
    }
  }
  free(part_of);
  *out = f;
  return PASADA_OK;
}

const gguf_file *gguf_part_holding(const gguf_file *f, const void *p) {
  for (uint32_t i = 0; f && i < (f->parts ? f->n_parts : 1); i++) {
    const gguf_file *g = f->parts ? f->parts[i] : f;
    const uint8_t *b = p;
    if (g->map && b >= g->map && (uint64_t)(b - g->map) < g->size) return g;
  }
  return NULL;
}

void gguf_drop_string_arrays(gguf_file *f) {
  if (f->parts) f = f->parts[0]; /* a view's metadata is its first part's */
  gguf_internal *in = f->internal;
  for (uint64_t i = 0; in && i < f->n_kv; i++) {
    gguf_value *v = &f->kv[i].value;
    if (v->type != GGUF_TYPE_ARRAY || v->arr.elem_type != GGUF_TYPE_STRING) continue;
    arena_release(in, v->arr.strs);
    v->arr.strs = NULL;
  }
}

/* ---- lookups ---- */
const gguf_value *gguf_get(const gguf_file *f, const char *key) {
  const gguf_internal *in = f->internal;
  if (!key || !in->kv_table) return NULL;
  uint64_t *slot = table_slot(in->kv_table, in->kv_mask, key, strlen(key), kv_name, f);
  return *slot ? &f->kv[*slot - 1].value : NULL;
}

int64_t gguf_find_tensor(const gguf_file *f, const char *name) {
  const gguf_internal *in = f->internal;
  if (!name || !in->tensor_table) return -1;
  uint64_t *slot = table_slot(in->tensor_table, in->tensor_mask, name, strlen(name), tensor_name, f);
  return *slot ? (int64_t)(*slot - 1) : -1;
}

const gguf_tensor *gguf_get_tensor(const gguf_file *f, const char *name) {
  int64_t i = gguf_find_tensor(f, name);
  return i < 0 ? NULL : &f->tensors[i];
}
