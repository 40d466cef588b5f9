/* safetensors.h: reader of safetensors files (Hugging Face's weight format)
 * and of the JSON files that travel with them. The file is memory-mapped and
 * its header (an 8-byte length, then a JSON object of dtype, shape and
 * data_offsets per tensor) is checked against the file before anyone uses
 * it: a malformed file yields one error naming the file and the problem. */
#ifndef PASADA_SAFETENSORS_H
#define PASADA_SAFETENSORS_H

#include <stdbool.h>
#include <stdint.h>

#include "format/gguf.h"
#include "format/json.h"

#define ST_MAX_HEADER ((uint64_t)100 << 20) /* the safetensors library's own limit */
#define ST_MAX_JSON ((uint64_t)256 << 20)   /* config/tokenizer JSON files */
#define ST_MAX_DEPTH 64                     /* JSON nesting accepted */

/* An I64 tensor (position ids beside the weights): opened so the file can
 * be read, never a weight. */
#define ST_TYPE_I64 0x10000u
/* A U8 tensor: gpt-oss's MXFP4 blocks and scales (hf_gptoss.c), nothing else. */
#define ST_TYPE_U8 0x10001u
/* "I64", "U8", or the float type's name. */
static inline const char *st_type_name(uint32_t type) {
  return type == ST_TYPE_I64 ? "I64" : type == ST_TYPE_U8 ? "U8" : type == 0 ? "F32" : type == 1 ? "F16" : "BF16";
}

typedef struct {
  char *name;    /* NUL-terminated */
  uint32_t type; /* PA_TYPE_F32, PA_TYPE_F16, PA_TYPE_BF16, ST_TYPE_I64 or ST_TYPE_U8 */
  uint32_t n_dims;
  int64_t ne[GGUF_MAX_DIMS]; /* GGUF order: ne[0] the last safetensors dim (row length); unused 1 */
  uint64_t nbytes;
  const uint8_t *data; /* inside the mapping */
} st_tensor;

typedef struct {
  char *path;
  const uint8_t *map; /* the whole file, read-only */
  uint64_t size;
  uint64_t data_offset; /* 8 + header length */
  uint64_t n_tensors;
  st_tensor *tensors;
  bool borrowed; /* map is the caller's (st_open_memory) */
} st_file;

/* Maps and validates `path`: header length inside the file (and at most
 * ST_MAX_HEADER), the header valid UTF-8 JSON (nesting at most ST_MAX_DEPTH)
 * whose top level is an object of tensors (plus an optional __metadata__
 * object of strings), no duplicate names, each tensor a known dtype (F32,
 * F16, BF16, I64 as ST_TYPE_I64 and U8 as ST_TYPE_U8; others are refused by name), 0..4 dims each >= 1, data_offsets
 * [begin, end] inside the data section with end - begin the shape's byte
 * size, and no two tensors overlapping. Errors start with `path`. */
int st_open(const char *path, st_file **out);
/* The same checks on a buffer in memory (the fuzzer uses this); the buffer
 * must outlive the result. */
int st_open_memory(const void *data, uint64_t size, const char *name, st_file **out);
void st_close(st_file *f);

/* Reads `path` (at most ST_MAX_JSON bytes), checks it is valid UTF-8 and
 * parses it as JSON nested at most ST_MAX_DEPTH deep; *out is a pj_value tree
 * (pj_value_Delete). Errors start with `path`. */
int st_read_json(const char *path, pj_value **out);
/* Reads `path` (at most ST_MAX_JSON bytes) as UTF-8 text without NUL bytes
 * into a malloc'd NUL-terminated string. */
int st_read_text(const char *path, char **out);

#endif
