/* gguf_split.c: models split across several GGUF files, as llama.cpp's
 * gguf-split writes them. From the name of any one part it finds the others,
 * checks every part's split keys against the rest and against its name, and
 * joins the parts into one view (gguf_join) whose tensors stay mapped from
 * their own files. Everything else about each part is gguf_open's. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "format/gguf.h"
#include "format/hf.h"

#define KEY_NO "split.no"
#define KEY_COUNT "split.count"
#define KEY_TENSORS "split.tensors.count"

typedef struct {
  uint32_t no, count; /* count 0: not a split file */
  int64_t n_tensors;
} split_keys;

/* Reads f's split keys into *k (count 0 when split.count is absent or 1).
 * Errors name `name`, the file asked for, and the part's own path. */
static int read_split_keys(const gguf_file *f, const char *name, split_keys *k) {
  memset(k, 0, sizeof *k);
  uint32_t count = 0;
  if (gguf_get_u32(f, KEY_COUNT, false, &count) != PASADA_OK)
    return pa_error(PASADA_ERR_FORMAT, "%s: %s: key '%s' is not an unsigned 32-bit integer", name,
                    f->path, KEY_COUNT);
  if (count <= 1) return PASADA_OK;
  if (count > UINT16_MAX)
    return pa_error(PASADA_ERR_FORMAT, "%s: %s: %s is %" PRIu32 ", more than %u parts", name,
                    f->path, KEY_COUNT, count, UINT16_MAX);
  uint32_t no = 0;
  int64_t nt = 0;
  if (gguf_get_u32(f, KEY_NO, true, &no) != PASADA_OK ||
      gguf_get_i64(f, KEY_TENSORS, true, &nt) != PASADA_OK)
    return pa_error(PASADA_ERR_FORMAT,
                    "%s: %s: a part of a split model (%s %" PRIu32 ") needs integer keys %s and %s",
                    name, f->path, KEY_COUNT, count, KEY_NO, KEY_TENSORS);
  if (no >= count)
    return pa_error(PASADA_ERR_FORMAT,
                    "%s: %s: %s is %" PRIu32 ", expected 0 to %" PRIu32 " (%s %" PRIu32 ")", name,
                    f->path, KEY_NO, no, count - 1, KEY_COUNT, count);
  if (nt < 0)
    return pa_error(PASADA_ERR_FORMAT, "%s: %s: %s is negative", name, f->path, KEY_TENSORS);
  k->no = no, k->count = count, k->n_tensors = nt;
  return PASADA_OK;
}

/* The path of part `no` (0-based) of `count` sharing prefix[0..plen), or
 * NULL when out of memory. */
static char *part_path(const char *prefix, size_t plen, uint32_t no, uint32_t count) {
  size_t cap = plen + 32;
  char *p = malloc(cap);
  if (p)
    snprintf(p, cap, "%.*s-%05" PRIu32 "-of-%05" PRIu32 ".gguf", (int)plen, prefix, no + 1, count);
  return p;
}

/* Opens part `no` at `path` and checks its keys against the first-opened
 * part's (`want`) and its place. */
static int open_part(const char *name, const char *path, uint32_t no, const split_keys *want,
                     const char *arch, gguf_file **out) {
  int rc = gguf_open(path, out);
  if (rc) {
    /* the reader's line names the part; say which part of what it is */
    if (rc == PASADA_ERR_IO && !strstr(pa_last_error(), "not a regular file")) {
      char why[512]; /* pa_error writes where pa_last_error's text is */
      snprintf(why, sizeof why, "%s", pa_last_error());
      return pa_error(PASADA_ERR_IO,
                      "%s: part %" PRIu32 " of %" PRIu32
                      " of the split model is missing or unreadable (%s)",
                      name, no + 1, want->count, why);
    }
    pa_error_prefix("%s: part %" PRIu32 " of %" PRIu32 " of the split model", name, no + 1,
                    want->count);
    return rc;
  }
  split_keys k;
  if ((rc = read_split_keys(*out, name, &k))) return rc;
  if (k.count != want->count || k.n_tensors != want->n_tensors)
    return pa_error(PASADA_ERR_FORMAT,
                    "%s: %s is not a part of the same split model (%s %" PRIu32 ", %s %" PRId64
                    "; expected %" PRIu32 " and %" PRId64 ")",
                    name, path, KEY_COUNT, k.count, KEY_TENSORS, k.n_tensors, want->count,
                    want->n_tensors);
  if (k.no != no)
    return pa_error(PASADA_ERR_FORMAT,
                    "%s: %s says it is part %" PRIu32 " (%s %" PRIu32 "), its name part %" PRIu32,
                    name, path, k.no + 1, KEY_NO, k.no, no + 1);
  char *a = NULL;
  if ((rc = gguf_get_string(*out, "general.architecture", false, &a))) return rc;
  bool other = a && arch && strcmp(a, arch) != 0;
  if (other)
    rc = pa_error(PASADA_ERR_FORMAT, "%s: %s is part of a '%s' model, %s of a '%s' one", name, path,
                  a, name, arch);
  free(a);
  return rc;
}

/* Opens every part of the split model `named` (a part, keys k) belongs to
 * and joins them. Takes `named`. */
static int open_parts(const char *path, gguf_file *named, const split_keys *k, gguf_file **out) {
  char suffix[40];
  snprintf(suffix, sizeof suffix, "-%05" PRIu32 "-of-%05" PRIu32 ".gguf", k->no + 1, k->count);
  size_t len = strlen(path), slen = strlen(suffix);
  if (len <= slen || strcmp(path + len - slen, suffix) != 0) {
    gguf_close(named);
    return pa_error(PASADA_ERR_FORMAT,
                    "%s: part %" PRIu32 " of %" PRIu32
                    " of a split model (%s, %s), but its name does not end in %s, "
                    "so the other parts cannot be found",
                    path, k->no + 1, k->count, KEY_NO, KEY_COUNT, suffix);
  }
  gguf_file **parts = calloc(k->count, sizeof *parts);
  if (!parts) {
    gguf_close(named);
    return pa_error(PASADA_ERR_NOMEM, "%s: out of memory", path);
  }
  parts[k->no] = named;
  char *arch = NULL;
  int rc = gguf_get_string(named, "general.architecture", false, &arch);
  for (uint32_t i = 0; i < k->count && !rc; i++) {
    if (parts[i]) continue;
    char *pp = part_path(path, len - slen, i, k->count);
    rc = pp ? open_part(path, pp, i, k, arch, &parts[i])
            : pa_error(PASADA_ERR_NOMEM, "%s: out of memory", path);
    free(pp);
  }
  free(arch);
  uint64_t total = 0;
  for (uint32_t i = 0; i < k->count && !rc; i++) total += parts[i]->n_tensors;
  if (!rc && total != (uint64_t)k->n_tensors)
    rc = pa_error(PASADA_ERR_FORMAT,
                  "%s: the %" PRIu32 " parts hold %" PRIu64 " tensors, %s says %" PRId64, path,
                  k->count, total, KEY_TENSORS, k->n_tensors);
  if (rc) {
    for (uint32_t i = 0; i < k->count; i++) gguf_close(parts[i]);
    free(parts);
    return rc;
  }
  rc = gguf_join(parts, k->count, path, out);
  free(parts);
  return rc;
}

int gguf_open_model(const char *path, gguf_file **out) {
  *out = NULL;
  if (hf_is_dir(path)) return hf_open(path, out); /* a Hugging Face model folder (hf.c) */
  gguf_file *f = NULL;
  int rc = gguf_open(path, &f);
  if (rc) return rc;
  split_keys k;
  if ((rc = read_split_keys(f, path, &k))) {
    gguf_close(f);
    return rc;
  }
  if (k.count == 0) {
    *out = f;
    return PASADA_OK;
  }
  return open_parts(path, f, &k, out);
}
