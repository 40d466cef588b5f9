/* gguf.h: reader and writer of GGUF files (versions 2 and 3).
 *
 * The reader memory-maps the file and validates everything before anyone
 * uses it: every count, length, offset, dimension and type is checked with
 * overflow-safe arithmetic against the file's size, so a malformed or
 * truncated file yields one error naming what is wrong (never a crash, never
 * an allocation sized by an unchecked field). After gguf_open succeeds the
 * rest of the engine may trust what it returns. */
#ifndef PASADA_GGUF_H
#define PASADA_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
  GGUF_TYPE_UINT8 = 0,
  GGUF_TYPE_INT8 = 1,
  GGUF_TYPE_UINT16 = 2,
  GGUF_TYPE_INT16 = 3,
  GGUF_TYPE_UINT32 = 4,
  GGUF_TYPE_INT32 = 5,
  GGUF_TYPE_FLOAT32 = 6,
  GGUF_TYPE_BOOL = 7,
  GGUF_TYPE_STRING = 8,
  GGUF_TYPE_ARRAY = 9,
  GGUF_TYPE_UINT64 = 10,
  GGUF_TYPE_INT64 = 11,
  GGUF_TYPE_FLOAT64 = 12,
  GGUF_TYPE_COUNT
} gguf_type;

#define GGUF_MAX_DIMS 4
#define GGUF_DEFAULT_ALIGNMENT 32
/* Reader limits (see gguf_read.c and docs/gguf.md). */
#define GGUF_MAX_ALIGNMENT (1u << 20) /* general.alignment: a power of two up to 1 MiB */
#define GGUF_MAX_ARRAY_DEPTH 8        /* arrays of arrays nest at most this deep */
#define GGUF_MAX_KEY_LEN 65535        /* bytes; keys are also non-empty, no control bytes */
#define GGUF_MAX_NAME_LEN 1024        /* bytes of a tensor name (same rules as keys) */

/* A string inside the mapping: not NUL-terminated. */
typedef struct {
  const char *ptr;
  uint64_t len;
} gguf_str;

typedef struct gguf_value gguf_value;
struct gguf_value {
  gguf_type type;
  union {
    uint64_t u64; /* UINT8/16/32/64 and BOOL (0/1) */
    int64_t i64;  /* INT8/16/32/64 */
    double f64;   /* FLOAT32/FLOAT64 */
    gguf_str str;
    struct {
      gguf_type elem_type;
      uint64_t count;
      /* For numeric and bool elements: `count` packed little-endian values
       * inside the mapping (not necessarily aligned: read with memcpy or the
       * gguf_arr_* helpers). NULL for STRING and ARRAY elements. */
      const uint8_t *raw;
      /* For STRING elements: `count` strings; for ARRAY elements: `count`
       * nested values. NULL for numeric elements. */
      gguf_str *strs;
      gguf_value *items;
    } arr;
  };
};

typedef struct {
  char *key; /* NUL-terminated copy; keys contain no NUL byte (checked) */
  gguf_value value;
} gguf_kv;

typedef struct {
  char *name;    /* NUL-terminated copy */
  uint32_t type; /* GGML type number, checked to be known (quant/quant.h) */
  uint32_t n_dims;
  int64_t ne[GGUF_MAX_DIMS]; /* ne[0] is the row length (fastest); unused dims are 1 */
  uint64_t offset;           /* from the start of the data section, checked aligned */
  uint64_t nbytes;           /* checked: offset + nbytes <= data section size */
  const void *data;          /* inside the mapping */
} gguf_tensor;

typedef struct gguf_file {
  char *path;
  uint32_t version;
  uint64_t alignment;
  uint64_t n_kv;
  gguf_kv *kv;
  uint64_t n_tensors;
  gguf_tensor *tensors;
  const uint8_t *map; /* whole file, read-only */
  uint64_t size;
  uint64_t data_offset; /* start of the tensor data section */
  void *internal;       /* reader's private state (lookup tables) */
  /* A model split across files (gguf_open_model) is a view of its parts:
   * n_parts > 1, parts[i] the file of part i + 1; the view has the first
   * part's path, version, alignment and metadata, the tensors of all parts
   * (each one's data inside its own part's mapping), map NULL, size the
   * parts' total and data_offset 0. Any other file: n_parts 1, parts NULL. */
  uint32_t n_parts;
  struct gguf_file **parts;
} gguf_file;

/* Opens and validates `path`. On failure returns a pasada_status and the
 * message (pa_last_error) names the file and what is wrong with it.
 * Checks include: magic, version (2 or 3), counts against the bytes left,
 * string lengths, value and element types, nested arrays (depth-limited),
 * duplicate keys, general.alignment (uint32, a power of two, 1..GGUF_MAX_ALIGNMENT),
 * duplicate tensor names, dims (1..4, each >= 1 and product without overflow),
 * known tensor types, row length a multiple of the type's block size,
 * offsets aligned and tensor data inside the file. */
int gguf_open(const char *path, gguf_file **out);
/* The same checks on a buffer in memory (the fuzzer uses this); the buffer
 * must outlive the returned file. */
int gguf_open_memory(const void *data, uint64_t size, const char *name, gguf_file **out);
void gguf_close(gguf_file *f);
/* Opens a model's file (gguf_split.c): a whole file as gguf_open does, or,
 * when `path` is any part of a model split across files as llama.cpp's
 * gguf-split writes them (names PREFIX-%05d-of-%05d.gguf; keys split.no,
 * 0-based, split.count and split.tensors.count, the model's tensor total, in
 * every part; the metadata in the first), every part, checked, as one view
 * (see gguf_file.n_parts). One-line errors, starting with `path`, name a
 * missing or unreadable part, a part that is not GGUF, split keys that
 * disagree between parts or with a part's name, a tensor in two parts and a
 * tensor total other than split.tensors.count. */
int gguf_open_model(const char *path, gguf_file **out);
/* (A `path` that is a directory is a Hugging Face model folder: hf.h.) */
/* Joins parts[0..n) (n >= 2, opened by gguf_open, their split keys checked)
 * into a view (gguf_read.c); adopts the parts, closing them on failure too.
 * Fails naming `name` and both parts when a tensor name is in two parts. */
int gguf_join(gguf_file **parts, uint32_t n, const char *name, gguf_file **out);
/* The file whose mapping holds the byte at p: f itself, one of a view's
 * parts, or NULL when p is in none. */
const gguf_file *gguf_part_holding(const gguf_file *f, const void *p);
/* Frees the element tables of the top-level string arrays (16 bytes per
 * string: a vocabulary's tokens and merges, 1.5 MiB on a 49k vocabulary)
 * once their readers are done with them; such arrays then have arr.strs ==
 * NULL (count and the strings' bytes in the mapping stay). */
void gguf_drop_string_arrays(gguf_file *f);

/* Lookups (hash table built at open; NULL/-1 when absent). */
const gguf_value *gguf_get(const gguf_file *f, const char *key);
int64_t gguf_find_tensor(const gguf_file *f, const char *name);
const gguf_tensor *gguf_get_tensor(const gguf_file *f, const char *name);

/* Typed getters: return PASADA_OK and set *out, or an error status with a
 * message naming the key when it is absent (only when `required`) or has an
 * incompatible type. Integer getters accept any integer type whose value
 * fits; float getters accept FLOAT32/FLOAT64. When absent and not required
 * they leave *out untouched and return PASADA_OK. */
int gguf_get_u32(const gguf_file *f, const char *key, bool required, uint32_t *out);
int gguf_get_i64(const gguf_file *f, const char *key, bool required, int64_t *out);
int gguf_get_f32(const gguf_file *f, const char *key, bool required, float *out);
int gguf_get_bool(const gguf_file *f, const char *key, bool required, bool *out);
/* Returns a NUL-terminated malloc'd copy in *out (caller frees) */
int gguf_get_string(const gguf_file *f, const char *key, bool required, char **out);

/* Array element access (index checked by the caller against count). */
int64_t gguf_arr_i64(const gguf_value *arr, uint64_t i); /* integer/bool element types */
double gguf_arr_f64(const gguf_value *arr, uint64_t i);  /* float or integer element types */
size_t gguf_type_size(gguf_type t); /* 0 for STRING/ARRAY/unknown */
/* A value as text in a malloc'd NUL-terminated string (gguf_text.c): numbers
 * in decimal (floats in the fewest digits that read back the same), true /
 * false, a string as it is, an array as [a, b, c] with its strings quoted and
 * escaped as in JSON; a string array whose table was dropped
 * (gguf_drop_string_arrays) as [N strings]. */
int gguf_value_text(const gguf_value *v, char **out);
const char *gguf_type_name(gguf_type t);

/* ---- writer ----
 * Builds a file in memory-light fashion: metadata and tensor descriptors are
 * collected, then gguf_writer_write streams header, metadata, tensor table and
 * aligned tensor data to disk. Tensor data pointers must stay valid until
 * gguf_writer_write returns. */
typedef struct gguf_writer gguf_writer;
gguf_writer *gguf_writer_create(void);
void gguf_writer_free(gguf_writer *w);
void gguf_writer_set_alignment(gguf_writer *w, uint32_t alignment);
/* Copies a value (deep copy of strings and arrays) from a reader's file,
 * replacing any existing key of that name. */
int gguf_writer_set_value(gguf_writer *w, const char *key, const gguf_value *v);
int gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v);
int gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v);
int gguf_writer_set_f32(gguf_writer *w, const char *key, float v);
int gguf_writer_set_bool(gguf_writer *w, const char *key, bool v);
int gguf_writer_set_string(gguf_writer *w, const char *key, const char *v);
int gguf_writer_set_array(gguf_writer *w, const char *key, gguf_type elem_type,
                          const void *data, uint64_t count); /* numeric elements */
int gguf_writer_set_string_array(gguf_writer *w, const char *key, const char *const *strs,
                                 uint64_t count);
int gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                           const int64_t *ne, const void *data, uint64_t nbytes);
int gguf_writer_write(gguf_writer *w, const char *path, uint32_t version /* 2 or 3 */);
/* The same file in a malloc'd buffer (*buf, caller frees, *size bytes). */
int gguf_writer_write_memory(gguf_writer *w, void **buf, uint64_t *size, uint32_t version);

/* ---- views built by other readers (src/format/hf.c) ---- */
/* Opens a GGUF image held in an anonymous mapping of `size` bytes (adopted:
 * unmapped at close, and on failure). The file reports map NULL: its bytes
 * are no file's pages, so nothing releases or re-reads them as such. */
int gguf_open_anon(void *map, uint64_t size, const char *name, gguf_file **out);
/* A file with no metadata whose n tensors (copied, names too) lie in a
 * mapping of `path` the caller made and checked (adopted: unmapped at close,
 * and on failure); data_offset is where its tensor data starts. */
int gguf_wrap_mapping(const char *path, const uint8_t *map, uint64_t size, uint64_t data_offset,
                      const gguf_tensor *tensors, uint64_t n, gguf_file **out);

#endif
