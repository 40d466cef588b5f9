/* safetensors.c: the safetensors reader and the checked JSON reader used
 * for Hugging Face model folders (config.json, tokenizer.json, the shard
 * index). Both are borders with untrusted files: every length, offset and
 * shape is checked before use, JSON must be valid UTF-8 and shallowly
 * nested, and each problem is one error naming the file. */
#include "format/json.h"
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "format/safetensors.h"
#include "quant/quant.h"

/* Length of the valid UTF-8 sequence at s (1..4), or 0 when it is not one
 * (overlong forms, surrogates and code points past U+10FFFF included). */
static int utf8_len(const uint8_t *s, uint64_t n) {
  uint8_t c = s[0];
  if (c < 0x80) return 1;
  int len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
  if (!len || c > 0xF4 || (uint64_t)len > n) return 0;
  for (int i = 1; i < len; i++)
    if ((s[i] & 0xC0) != 0x80) return 0;
  if (len == 3 && ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] >= 0xA0))) return 0;
  if (len == 4 && ((c == 0xF0 && s[1] < 0x90) || (c == 0xF4 && s[1] >= 0x90))) return 0;
  return len;
}

/* Checks UTF-8 validity, the absence of NUL bytes and the nesting depth
 * (brackets outside strings), then parses. `what` names the text. */
static int parse_json(const char *what, const uint8_t *p, uint64_t n, pj_value **out) {
  *out = NULL;
  int depth = 0;
  bool in_str = false, esc = false;
  for (uint64_t i = 0; i < n;) {
    int len = utf8_len(p + i, n - i);
    if (!len) return pa_error(PASADA_ERR_FORMAT, "%s: not valid UTF-8 at byte %" PRIu64, what, i);
    uint8_t c = p[i];
    if (c == 0) return pa_error(PASADA_ERR_FORMAT, "%s: NUL byte at byte %" PRIu64, what, i);
    if (in_str) {
      if (esc)
        esc = false;
      else if (c == '\\')
        esc = true;
      else if (c == '"')
        in_str = false;
    } else if (c == '"') {
      in_str = true;
    } else if (c == '[' || c == '{') {
      if (++depth > ST_MAX_DEPTH)
        return pa_error(PASADA_ERR_FORMAT, "%s: JSON nested deeper than %d levels", what,
                        ST_MAX_DEPTH);
    } else if (c == ']' || c == '}') {
      depth--;
    }
    i += (uint64_t)len;
  }
  size_t at = 0;
  const char *why = NULL;
  pj_value *j = pj_parse((const char *)p, (size_t)n, ST_MAX_DEPTH, &at, &why);
  if (!j) return pa_error(PASADA_ERR_FORMAT, "%s: invalid JSON at byte %zu: %s", what, at, why);
  *out = j;
  return PASADA_OK;
}

/* Reads a whole regular file of at most ST_MAX_JSON bytes into a malloc'd,
 * NUL-terminated buffer. */
static int read_file(const char *path, uint8_t **out, size_t *len) {
  *out = NULL;
  FILE *fp = fopen(path, "rb");
  if (!fp) return pa_error(PASADA_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fileno(fp), &sb) != 0 || !S_ISREG(sb.st_mode)) {
    fclose(fp);
    return pa_error(PASADA_ERR_IO, "%s: not a regular file", path);
  }
  if ((uint64_t)sb.st_size > ST_MAX_JSON) {
    fclose(fp);
    return pa_error(PASADA_ERR_FORMAT, "%s: %lld bytes is larger than the %" PRIu64 " accepted",
                    path, (long long)sb.st_size, ST_MAX_JSON);
  }
  size_t n = (size_t)sb.st_size;
  uint8_t *buf = malloc(n + 1);
  if (!buf) {
    fclose(fp);
    return pa_error(PASADA_ERR_NOMEM, "%s: out of memory", path);
  }
  size_t got = fread(buf, 1, n, fp);
  fclose(fp);
  if (got != n) {
    free(buf);
    return pa_error(PASADA_ERR_IO, "%s: read failed", path);
  }
  buf[n] = 0;
  *out = buf;
  *len = n;
  return PASADA_OK;
}

int st_read_json(const char *path, pj_value **out) {
  *out = NULL;
  uint8_t *buf;
  size_t n;
  int rc = read_file(path, &buf, &n);
  if (rc) return rc;
  rc = parse_json(path, buf, n, out);
  free(buf);
  return rc;
}

int st_read_text(const char *path, char **out) {
  *out = NULL;
  uint8_t *buf;
  size_t n;
  int rc = read_file(path, &buf, &n);
  if (rc) return rc;
  for (size_t i = 0; i < n;) {
    int len = utf8_len(buf + i, n - i);
    if (!len || buf[i] == 0) {
      free(buf);
      return pa_error(PASADA_ERR_FORMAT, "%s: not valid UTF-8 text at byte %zu", path, i);
    }
    i += (size_t)len;
  }
  *out = (char *)buf;
  return PASADA_OK;
}

static const struct {
  const char *name;
  uint32_t type;
  uint32_t size; /* bytes per element; 0: a known dtype pasada does not read */
} dtypes[] = {{"F32", PA_TYPE_F32, 4},
              {"F16", PA_TYPE_F16, 2},
              {"BF16", PA_TYPE_BF16, 2},
              {"F64", 0, 0},
              {"I64", ST_TYPE_I64, 8},
              {"I32", 0, 0},
              {"I16", 0, 0},
              {"I8", 0, 0},
              {"U8", ST_TYPE_U8, 1},
              {"BOOL", 0, 0},
              {"F8_E4M3", 0, 0},
              {"F8_E5M2", 0, 0},
              {"U16", 0, 0},
              {"U32", 0, 0},
              {"U64", 0, 0}};

/* A JSON number that is an integer in [0, 2^53]. */
static bool json_uint(const pj_value *j, uint64_t *out) {
  if (!pj_is_num(j)) return false;
  double d = j->valuedouble;
  if (!(d >= 0 && d <= 9007199254740992.0) || floor(d) != d) return false;
  *out = (uint64_t)d;
  return true;
}

/* Checks one header entry and fills t (name set by the caller). */
static int parse_entry(const char *path, const pj_value *e, uint64_t data_size, const uint8_t *data,
                       st_tensor *t, uint64_t *begin) {
  const char *name = e->string;
  if (!pj_is_obj(e))
    return pa_error(PASADA_ERR_FORMAT, "%s: tensor '%.100s' is not an object", path, name);
  const pj_value *dt = pj_get(e, "dtype");
  const pj_value *sh = pj_get(e, "shape");
  const pj_value *off = pj_get(e, "data_offsets");
  if (!pj_is_str(dt) || !pj_is_arr(sh) || !pj_is_arr(off))
    return pa_error(
        PASADA_ERR_FORMAT,
        "%s: tensor '%.100s' lacks a string dtype, a shape array or a data_offsets array", path,
        name);
  size_t k = 0, nd = sizeof dtypes / sizeof dtypes[0];
  while (k < nd && strcmp(dtypes[k].name, dt->valuestring) != 0) k++;
  if (k == nd)
    return pa_error(PASADA_ERR_FORMAT, "%s: tensor '%.100s' has unknown dtype '%.20s'", path, name,
                    dt->valuestring);
  if (!dtypes[k].size)
    return pa_error(PASADA_ERR_UNSUPPORTED,
                    "%s: tensor '%.100s' has dtype %s (supported: F32, F16, BF16)", path, name,
                    dtypes[k].name);
  int n_dims = pj_size(sh);
  if (n_dims > GGUF_MAX_DIMS)
    return pa_error(PASADA_ERR_UNSUPPORTED, "%s: tensor '%.100s' has %d dims (at most %d)", path,
                    name, n_dims, GGUF_MAX_DIMS);
  uint64_t count = 1;
  t->n_dims = n_dims ? (uint32_t)n_dims : 1;
  for (int d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
  for (int d = 0; d < n_dims; d++) {
    uint64_t v;
    if (!json_uint(pj_at(sh, d), &v) || v == 0 || v > INT64_MAX / 8 || count > INT64_MAX / 8 / v)
      return pa_error(PASADA_ERR_FORMAT, "%s: tensor '%.100s' has an invalid shape (dim %d)", path,
                      name, d);
    count *= v;
    t->ne[n_dims - 1 - d] = (int64_t)v;
  }
  uint64_t b, en;
  if (pj_size(off) != 2 || !json_uint(pj_at(off, 0), &b) || !json_uint(pj_at(off, 1), &en) ||
      b > en)
    return pa_error(PASADA_ERR_FORMAT, "%s: tensor '%.100s' has invalid data_offsets", path, name);
  if (en > data_size)
    return pa_error(PASADA_ERR_FORMAT,
                    "%s: tensor '%.100s' data [%" PRIu64 ", %" PRIu64
                    ") is past the end of the data (%" PRIu64 " bytes)",
                    path, name, b, en, data_size);
  if (en - b != count * dtypes[k].size)
    return pa_error(PASADA_ERR_FORMAT,
                    "%s: tensor '%.100s' has %" PRIu64
                    " bytes of data but its %s shape needs %" PRIu64,
                    path, name, en - b, dtypes[k].name, count * dtypes[k].size);
  t->type = dtypes[k].type;
  t->nbytes = en - b;
  t->data = data + b;
  *begin = b;
  return PASADA_OK;
}

typedef struct {
  uint64_t begin, end;
  const char *name;
} span;

static int cmp_span(const void *a, const void *b) {
  const span *x = a, *y = b;
  return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end > y->end) - (x->end < y->end);
}

static int cmp_name(const void *a, const void *b) {
  return strcmp(((const st_tensor *)a)->name, ((const st_tensor *)b)->name);
}

static int parse_header(st_file *f, const pj_value *h) {
  const char *path = f->path;
  if (!pj_is_obj(h))
    return pa_error(PASADA_ERR_FORMAT, "%s: the header is not a JSON object", path);
  uint64_t n = 0;
  for (const pj_value *e = h->child; e; e = e->next) n += strcmp(e->string, "__metadata__") != 0;
  f->tensors = calloc(n ? n : 1, sizeof *f->tensors);
  span *sp = calloc(n ? n : 1, sizeof *sp);
  if (!f->tensors || !sp) {
    free(sp);
    return pa_error(PASADA_ERR_NOMEM, "%s: out of memory", path);
  }
  const uint64_t data_size = f->size - f->data_offset;
  int rc = PASADA_OK;
  for (const pj_value *e = h->child; e && !rc; e = e->next) {
    if (!strcmp(e->string, "__metadata__")) {
      if (!pj_is_obj(e))
        rc = pa_error(PASADA_ERR_FORMAT, "%s: __metadata__ is not an object", path);
      for (const pj_value *m = e->child; m && !rc; m = m->next)
        if (!pj_is_str(m))
          rc = pa_error(PASADA_ERR_FORMAT, "%s: __metadata__ '%.100s' is not a string", path,
                        m->string);
      continue;
    }
    if (strlen(e->string) == 0 || strlen(e->string) > GGUF_MAX_NAME_LEN) {
      rc = pa_error(PASADA_ERR_FORMAT, "%s: a tensor name is empty or longer than %d bytes", path,
                    GGUF_MAX_NAME_LEN);
      break;
    }
    st_tensor *t = &f->tensors[f->n_tensors];
    if (!(t->name = pa_strdup(e->string))) {
      rc = pa_error(PASADA_ERR_NOMEM, "%s: out of memory", path);
      break;
    }
    f->n_tensors++;
    uint64_t b = 0;
    rc = parse_entry(path, e, data_size, f->map + f->data_offset, t, &b);
    sp[f->n_tensors - 1] = (span){b, b + t->nbytes, t->name};
  }
  if (!rc && n > 1) { /* names first: a name given twice also overlaps itself */
    st_tensor *sorted = malloc(n * sizeof *sorted);
    if (!sorted) rc = pa_error(PASADA_ERR_NOMEM, "%s: out of memory", path);
    if (!rc) {
      memcpy(sorted, f->tensors, n * sizeof *sorted);
      qsort(sorted, n, sizeof *sorted, cmp_name);
      for (uint64_t i = 1; i < n && !rc; i++)
        if (!strcmp(sorted[i].name, sorted[i - 1].name))
          rc = pa_error(PASADA_ERR_FORMAT, "%s: tensor '%.100s' is named twice", path,
                        sorted[i].name);
      free(sorted);
    }
    if (!rc) qsort(sp, n, sizeof *sp, cmp_span);
    for (uint64_t i = 1; i < n && !rc; i++)
      if (sp[i].begin < sp[i - 1].end)
        rc = pa_error(PASADA_ERR_FORMAT, "%s: tensors '%.100s' and '%.100s' overlap", path,
                      sp[i - 1].name, sp[i].name);
  }
  free(sp);
  return rc;
}

/* Checks the header of f (map, size set) and fills its tensor table. */
static int parse_file(st_file *f) {
  const char *path = f->path;
  if (f->size < 8)
    return pa_error(PASADA_ERR_FORMAT,
                    "%s: %" PRIu64 " bytes is too short for a safetensors header", path, f->size);
  uint64_t hlen = 0;
  for (int i = 0; i < 8; i++) hlen |= (uint64_t)f->map[i] << (8 * i);
  if (hlen > f->size - 8 || hlen > ST_MAX_HEADER)
    return pa_error(PASADA_ERR_FORMAT,
                    "%s: header length %" PRIu64 " is past the end of the file (%" PRIu64 " bytes)",
                    path, hlen, f->size);
  if (hlen < 2)
    return pa_error(PASADA_ERR_FORMAT, "%s: header length %" PRIu64 " is too short", path, hlen);
  f->data_offset = 8 + hlen;
  pj_value *h = NULL;
  char what[1100];
  snprintf(what, sizeof what, "%s: header", path);
  int rc = parse_json(what, f->map + 8, hlen, &h);
  if (!rc) rc = parse_header(f, h);
  pj_free(h);
  return rc;
}

int st_open_memory(const void *data, uint64_t size, const char *name, st_file **out) {
  *out = NULL;
  st_file *f = calloc(1, sizeof *f);
  if (!f || !(f->path = pa_strdup(name))) {
    free(f);
    return pa_error(PASADA_ERR_NOMEM, "%s: out of memory", name);
  }
  f->map = data;
  f->size = size;
  f->borrowed = true;
  int rc = parse_file(f);
  if (rc) {
    st_close(f);
    return rc;
  }
  *out = f;
  return PASADA_OK;
}

int st_open(const char *path, st_file **out) {
  *out = NULL;
  st_file *f = calloc(1, sizeof *f);
  if (!f || !(f->path = pa_strdup(path))) {
    free(f);
    return pa_error(PASADA_ERR_NOMEM, "%s: out of memory", path);
  }
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat sb;
  int rc = PASADA_OK;
  if (fd < 0) {
    rc = pa_error(PASADA_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  } else if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    rc = pa_error(PASADA_ERR_IO, "%s: not a regular file", path);
  } else if ((uint64_t)sb.st_size < 8) {
    rc = pa_error(PASADA_ERR_FORMAT, "%s: %lld bytes is too short for a safetensors header", path,
                  (long long)sb.st_size);
  } else {
    f->size = (uint64_t)sb.st_size;
    void *map = mmap(NULL, (size_t)f->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED)
      rc = pa_error(PASADA_ERR_IO, "%s: cannot map: %s", path, strerror(errno));
    else
      f->map = map;
  }
  if (fd >= 0) close(fd);
  if (!rc) rc = parse_file(f);
  if (rc) {
    st_close(f);
    return rc;
  }
  *out = f;
  return PASADA_OK;
}

void st_close(st_file *f) {
  if (!f) return;
  if (f->map && !f->borrowed) munmap((void *)f->map, (size_t)f->size);
  for (uint64_t i = 0; i < f->n_tensors; i++) free(f->tensors[i].name);
  free(f->tensors);
  free(f->path);
  free(f);
}
