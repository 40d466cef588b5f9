/* test_safetensors: the JSON reader (valid values, escapes, each error),
 * the safetensors reader on headers built here (shapes in
 * GGUF order, data pointers, each defect one error naming it), and the GGUF
 * pieces the Hugging Face view is built from: gguf_writer_write_memory,
 * gguf_open_anon, gguf_wrap_mapping joined by gguf_join. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "base/base.h"
#include "format/gguf.h"
#include "format/safetensors.h"
#include "quant/quant.h"

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

/* A file: the 8-byte length of `header`, the header, then `data_len` bytes
 * counting up. Returns a malloc'd buffer of *size bytes. */
static uint8_t *make(const char *header, size_t data_len, uint64_t *size) {
  size_t h = strlen(header);
  *size = 8 + h + data_len;
  uint8_t *b = malloc(*size);
  for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)h >> (8 * i));
  memcpy(b + 8, header, h);
  for (size_t i = 0; i < data_len; i++) b[8 + h + i] = (uint8_t)i;
  return b;
}

/* The header must be rejected with a message containing `want`. */
static void rejects(const char *header, size_t data_len, const char *want) {
  uint64_t size;
  uint8_t *b = make(header, data_len, &size);
  st_file *f = NULL;
  int rc = st_open_memory(b, size, "t.safetensors", &f);
  CHECK(rc != PASADA_OK && !f, "accepted: %s", header);
  if (rc != PASADA_OK) {
    const char *msg = pa_last_error();
    CHECK(strstr(msg, want) && strstr(msg, "t.safetensors") && !strchr(msg, '\n'),
          "'%s': message '%s' lacks '%s'", header, msg, want);
  }
  st_close(f);
  free(b);
}

static void test_valid(void) {
  uint64_t size;
  uint8_t *b = make(
      "{\"__metadata__\": {\"format\": \"pt\"}, \"b\": {\"dtype\": \"BF16\", \"shape\": [3], "
      "\"data_offsets\": [24, 30]}, \"a\": {\"dtype\": \"F32\", \"shape\": [2, 3], "
      "\"data_offsets\": [0, 24]}}   ",
      30, &size);
  st_file *f = NULL;
  CHECK(st_open_memory(b, size, "v", &f) == PASADA_OK, "%s", pa_last_error());
  if (f) {
    CHECK(f->n_tensors == 2, "%llu tensors", (unsigned long long)f->n_tensors);
    const st_tensor *a = !strcmp(f->tensors[0].name, "a") ? &f->tensors[0] : &f->tensors[1];
    const st_tensor *c = a == &f->tensors[0] ? &f->tensors[1] : &f->tensors[0];
    CHECK(
        a->type == PA_TYPE_F32 && a->n_dims == 2 && a->ne[0] == 3 && a->ne[1] == 2 && a->ne[2] == 1,
        "a's shape");
    CHECK(a->data == b + f->data_offset && a->nbytes == 24, "a's data");
    CHECK(c->type == PA_TYPE_BF16 && c->n_dims == 1 && c->ne[0] == 3 &&
              c->data == b + f->data_offset + 24,
          "b");
  }
  st_close(f);
  free(b);
}

/* I64 tensors (BERT's position ids) open, marked ST_TYPE_I64, their size
 * checked at 8 bytes an element. */
static void test_i64(void) {
  uint64_t size;
  uint8_t *b = make("{\"p\": {\"dtype\": \"I64\", \"shape\": [1, 2], \"data_offsets\": [0, 16]}}",
                    16, &size);
  st_file *f = NULL;
  CHECK(st_open_memory(b, size, "v", &f) == PASADA_OK, "%s", pa_last_error());
  if (f)
    CHECK(f->n_tensors == 1 && f->tensors[0].type == ST_TYPE_I64 && f->tensors[0].ne[0] == 2 &&
              f->tensors[0].nbytes == 16,
          "p");
  st_close(f);
  free(b);
  rejects("{\"p\": {\"dtype\": \"I64\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 8,
          "bytes of data");
}

static void test_rejects(void) {
  uint64_t size;
  uint8_t *b = make("{}", 0, &size);
  b[0] = 0xff; /* length past the end */
  st_file *f = NULL;
  CHECK(st_open_memory(b, size, "t.safetensors", &f) != PASADA_OK &&
            strstr(pa_last_error(), "past the end"),
        "len");
  CHECK(st_open_memory(b, 5, "t.safetensors", &f) != PASADA_OK &&
            strstr(pa_last_error(), "too short"),
        "short");
  free(b);
  rejects("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}", 8,
          "invalid JSON");
  rejects("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}} x", 8,
          "invalid JSON");
  rejects("{\"\xc3\x28\": 1}", 0, "UTF-8");
  rejects(
      "{\"a\": "
      "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]"
      "]]]]]]]]]]]]]]]]"
      "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}",
      0, "nested");
  rejects("[]", 0, "not a JSON object");
  rejects("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 16]}}", 8,
          "past the end of the data");
  rejects("{\"a\": {\"dtype\": \"F32\", \"shape\": [3], \"data_offsets\": [0, 8]}}", 8,
          "bytes of data");
  rejects("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [8, 0]}}", 8,
          "data_offsets");
  rejects("{\"a\": {\"dtype\": \"Q4\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 8,
          "unknown dtype");
  rejects("{\"a\": {\"dtype\": \"I32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 8, "I32");
  rejects("{\"a\": {\"dtype\": \"F32\", \"shape\": [-2], \"data_offsets\": [0, 8]}}", 8, "shape");
  rejects("{\"a\": {\"dtype\": \"F32\", \"shape\": [2.5], \"data_offsets\": [0, 8]}}", 8, "shape");
  rejects("{\"a\": {\"dtype\": \"F32\", \"shape\": [1,1,1,1,2], \"data_offsets\": [0, 8]}}", 8,
          "dims");
  rejects("{\"a\": {\"dtype\": \"F32\", \"shape\": [2]}}", 8, "data_offsets");
  rejects(
      "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, "
      "\"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}",
      12, "overlap");
  rejects(
      "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, "
      "\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [8, 16]}}",
      16, "named twice");
  rejects("{\"__metadata__\": {\"x\": 1}}", 0, "__metadata__");
}

/* The JSON reader (format/json.h): values, escapes, and each error. */
static void test_json(void) {
  const char *ok =
      " {\"a\": [1, -2.5e3, true, false, null], \"s\": \"x\\u00e9\\ud83d\\ude00\\n\\\"\", "
      "\"o\": {}, \"e\": []} ";
  size_t at;
  const char *why;
  pj_value *v = pj_parse(ok, strlen(ok), 8, &at, &why);
  CHECK(v && v->count == 4, "valid JSON rejected at %zu: %s", v ? 0 : at, v ? "" : why);
  if (v) {
    const pj_value *a = pj_get(v, "a"), *s = pj_get(v, "s");
    CHECK(pj_size(a) == 5 && pj_at(a, 1)->valuedouble == -2500.0 && pj_is_true(pj_at(a, 2)) &&
              pj_is(pj_at(a, 3), PJ_FALSE) && pj_is_null(pj_at(a, 4)) && !pj_at(a, 5),
          "array");
    CHECK(pj_is_str(s) && !strcmp(s->valuestring, "x\xc3\xa9\xf0\x9f\x98\x80\n\""), "string '%s'",
          s ? s->valuestring : "?");
    CHECK(pj_is_obj(pj_get(v, "o")) && pj_size(pj_get(v, "e")) == 0 && !pj_get(v, "zz"),
          "empty containers");
  }
  pj_free(v);
  static const struct {
    const char *text, *why;
  } bad[] = {{"", "unexpected end"},
             {"{\"a\" 1}", "expected ':'"},
             {"[1 2]", "expected ','"},
             {"{\"a\": 1,}", "member name"},
             {"[01]", "expected ','"},
             {"[1.]", "bad number"},
             {"[-]", "unexpected character"},
             {"\"abc", "unterminated"},
             {"\"a\\x\"", "bad escape"},
             {"\"\\ud800\"", "lone surrogate"},
             {"\"\\udc00\"", "lone surrogate"},
             {"\"\\u0000\"", "\\u0000"},
             {"\"a\tb\"", "control character"},
             {"\"\xff\"", "UTF-8"},
             {"[[[[[[[[[]]]]]]]]]", "nested"},
             {"{} x", "text after"},
             {"tru", "unexpected character"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    v = pj_parse(bad[i].text, strlen(bad[i].text), 8, &at, &why);
    CHECK(!v && strstr(why, bad[i].why), "'%s': %s (expected %s)", bad[i].text,
          v ? "accepted" : why, bad[i].why);
    pj_free(v);
  }
}

/* The view hf.c builds: metadata and one tensor in an anonymous GGUF image,
 * another tensor in a wrapped mapping, joined. */
static void test_view(void) {
  float x[4] = {1, 2, 3, 4}, y[8];
  for (int i = 0; i < 8; i++) y[i] = (float)i;
  gguf_writer *w = gguf_writer_create();
  gguf_writer_set_string(w, "general.architecture", "llama");
  const int64_t ne_x[1] = {4}, ne_y[2] = {4, 2};
  gguf_writer_add_tensor(w, "x", PA_TYPE_F32, 1, ne_x, x, sizeof x);
  void *img = NULL;
  uint64_t size = 0;
  CHECK(gguf_writer_write_memory(w, &img, &size, 3) == PASADA_OK && size > 0, "%s",
        pa_last_error());
  gguf_writer_free(w);
  void *map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  memcpy(map, img, size);
  free(img);
  gguf_file *parts[2] = {NULL, NULL}, *view = NULL;
  CHECK(gguf_open_anon(map, size, "dir", &parts[0]) == PASADA_OK, "%s", pa_last_error());
  uint8_t *shard = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  memcpy(shard + 64, y, sizeof y);
  gguf_tensor t = {
      .name = "y", .type = PA_TYPE_F32, .n_dims = 2, .nbytes = sizeof y, .data = shard + 64};
  memcpy(t.ne, ne_y, sizeof ne_y);
  t.ne[2] = t.ne[3] = 1;
  CHECK(gguf_wrap_mapping("dir/model.safetensors", shard, 4096, 64, &t, 1, &parts[1]) == PASADA_OK,
        "wrap");
  CHECK(gguf_join(parts, 2, "dir", &view) == PASADA_OK, "%s", pa_last_error());
  if (view) {
    const gguf_tensor *gx = gguf_get_tensor(view, "x"), *gy = gguf_get_tensor(view, "y");
    CHECK(gx && !memcmp(gx->data, x, sizeof x), "x");
    CHECK(gy && gy->data == shard + 64 && gy->ne[1] == 2, "y");
    CHECK(gguf_part_holding(view, gy->data) == view->parts[1], "y's part");
    CHECK(gguf_part_holding(view, gx->data) == NULL, "x is in no file's pages");
    char *arch = NULL;
    CHECK(gguf_get_string(view, "general.architecture", true, &arch) == PASADA_OK &&
              !strcmp(arch, "llama"),
          "kv");
    free(arch);
  }
  gguf_close(view);
}

int main(void) {
  test_json();
  test_valid();
  test_rejects();
  test_i64();
  test_view();
  if (failures) fprintf(stderr, "test_safetensors: %d failures\n", failures);
  return failures ? 1 : 0;
}
