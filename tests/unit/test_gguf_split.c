/* test_gguf_split: gguf_open_model on models split across files, written
 * here with gguf_writer in llama.cpp's gguf-split layout: the view's
 * metadata and tensors, which part holds each tensor's bytes, any part
 * named, and a one-line error for each defect. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "format/gguf.h"

static int failures;
#define CHECK(cond, ...)                                            \
  do {                                                              \
    if (!(cond)) {                                                  \
      fprintf(stderr, "%s:%d: check failed: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                                 \
      fprintf(stderr, "\n");                                        \
      failures++;                                                   \
    }                                                               \
  } while (0)

static char dir[] = "/tmp/pasada-split-XXXXXX";
static float data[3][16];

static void part_path(char *path, size_t cap, const char *prefix, int no, int count) {
  snprintf(path, cap, "%s/%s-%05d-of-%05d.gguf", dir, prefix, no + 1, count);
}

/* Writes part no of count with tensor "t<no>" (and "t0" again when dup),
 * split.tensors.count n_total, and in the first part the model metadata. */
static void write_part(const char *prefix, int no, int count, int n_total, bool dup, int no_key) {
  char path[256], name[16];
  part_path(path, sizeof path, prefix, no, count);
  gguf_writer *w = gguf_writer_create();
  gguf_writer_set_u32(w, "split.no", (uint32_t)no_key);
  gguf_writer_set_u32(w, "split.count", (uint32_t)count);
  gguf_writer_set_i32(w, "split.tensors.count", n_total);
  if (no == 0) gguf_writer_set_string(w, "general.architecture", "llama");
  int64_t ne[1] = {16};
  snprintf(name, sizeof name, "t%d", no);
  gguf_writer_add_tensor(w, name, 0, 1, ne, data[no], sizeof data[no]);
  if (dup) gguf_writer_add_tensor(w, "t0", 0, 1, ne, data[0], sizeof data[0]);
  CHECK(gguf_writer_write(w, path, 3) == PASADA_OK, "write %s: %s", path, pa_last_error());
  gguf_writer_free(w);
}

static int open_named(const char *prefix, int no, int count, gguf_file **f) {
  char path[256];
  part_path(path, sizeof path, prefix, no, count);
  return gguf_open_model(path, f);
}

/* Expects opening part `no` to fail with one line that starts with its
 * path and contains `what`. */
static void expect_error(const char *prefix, int no, int count, const char *what) {
  gguf_file *f = NULL;
  char path[256];
  part_path(path, sizeof path, prefix, no, count);
  int rc = gguf_open_model(path, &f);
  const char *m = pa_last_error();
  CHECK(rc != PASADA_OK && !f, "%s: accepted", path);
  CHECK(rc == PASADA_OK || (!strncmp(m, path, strlen(path)) && strstr(m, what) && !strchr(m, '\n')),
        "%s: message '%s' (expected '%s')", path, m, what);
  gguf_close(f);
}

int main(void) {
  for (int p = 0; p < 3; p++)
    for (int i = 0; i < 16; i++) data[p][i] = (float)(p * 100 + i);
  if (!mkdtemp(dir)) return perror("mkdtemp"), 1;

  for (int p = 0; p < 3; p++) write_part("good", p, 3, 3, false, p);
  for (int named = 0; named < 3; named++) {
    gguf_file *f = NULL;
    CHECK(open_named("good", named, 3, &f) == PASADA_OK, "part %d: %s", named + 1, pa_last_error());
    if (!f) continue;
    CHECK(f->n_parts == 3 && f->parts && f->n_tensors == 3, "view: %u parts, %llu tensors",
          f->n_parts, (unsigned long long)f->n_tensors);
    CHECK(strstr(f->path, "good-00001-of-00003.gguf") != NULL, "view path %s", f->path);
    char *arch = NULL;
    CHECK(gguf_get_string(f, "general.architecture", true, &arch) == PASADA_OK && arch &&
              !strcmp(arch, "llama"),
          "metadata of the first part");
    free(arch);
    for (int p = 0; p < 3; p++) {
      char name[8];
      snprintf(name, sizeof name, "t%d", p);
      const gguf_tensor *t = gguf_get_tensor(f, name);
      CHECK(t && !memcmp(t->data, data[p], sizeof data[p]), "tensor %s", name);
      CHECK(t && gguf_part_holding(f, t->data) == f->parts[p], "tensor %s in part %d", name, p + 1);
    }
    CHECK(gguf_part_holding(f, data[0]) == NULL, "memory outside every part");
    gguf_drop_string_arrays(f);
    gguf_close(f);
  }

  write_part("missing", 0, 3, 3, false, 0);
  write_part("missing", 2, 3, 3, false, 2);
  expect_error("missing", 0, 3, "part 2 of 3 of the split model is missing");
  expect_error("missing", 2, 3, "missing-00002-of-00003.gguf: cannot open");

  write_part("dup", 0, 2, 3, false, 0);
  write_part("dup", 1, 2, 3, true, 1);
  expect_error("dup", 0, 2, "tensor 't0' is in two parts");

  write_part("total", 0, 2, 5, false, 0);
  write_part("total", 1, 2, 5, false, 1);
  expect_error("total", 1, 2, "hold 2 tensors, split.tensors.count says 5");

  write_part("counts", 0, 2, 2, false, 0);
  write_part("counts", 1, 2, 7, false, 1);
  expect_error("counts", 0, 2, "not a part of the same split model");

  write_part("number", 0, 2, 2, false, 0);
  write_part("number", 1, 2, 2, false, 0);
  expect_error("number", 0, 2, "says it is part 1");
  expect_error("number", 1, 2, "does not end in -00001-of-00002.gguf");

  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  if (failures)
    fprintf(stderr, "test_gguf_split: %d failure(s)\n", failures);
  else
    printf("test_gguf_split: ok\n");
  return failures != 0;
}
