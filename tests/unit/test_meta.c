/* test_meta.c: the public metadata accessors (pasada_model_meta_count, _key,
 * _value) on the tiny Llama fixture, and gguf_value_text on values of every
 * kind built in memory: numbers, floats in their shortest form, booleans,
 * strings as they are, arrays with quoted and escaped strings, nested
 * arrays, and a dropped string table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "pasada.h"
#include "test_check.h"

/* gguf_value_text of v equals want. */
static void check_text(const gguf_value *v, const char *want) {
  char *got = NULL;
  int st = gguf_value_text(v, &got);
  CHECK(st == PASADA_OK && got && strcmp(got, want) == 0, "got '%s', want '%s'", got ? got : "(null)",
        want);
  free(got);
}

static void test_value_text(void) {
  gguf_value v = {.type = GGUF_TYPE_UINT32, .u64 = 4096};
  check_text(&v, "4096");
  v = (gguf_value){.type = GGUF_TYPE_UINT64, .u64 = UINT64_MAX};
  check_text(&v, "18446744073709551615");
  v = (gguf_value){.type = GGUF_TYPE_INT32, .i64 = -7};
  check_text(&v, "-7");
  v = (gguf_value){.type = GGUF_TYPE_FLOAT32, .f64 = (double)1e-5f};
  check_text(&v, "1e-05");
  v = (gguf_value){.type = GGUF_TYPE_FLOAT32, .f64 = 10000.0};
  check_text(&v, "10000");
  v = (gguf_value){.type = GGUF_TYPE_FLOAT64, .f64 = 0.1};
  check_text(&v, "0.1");
  v = (gguf_value){.type = GGUF_TYPE_BOOL, .u64 = 1};
  check_text(&v, "true");
  static const char s[] = "a \"b\"\n";
  v = (gguf_value){.type = GGUF_TYPE_STRING, .str = {s, sizeof s - 1}};
  check_text(&v, s); /* a string on its own is as it is */
  v = (gguf_value){.type = GGUF_TYPE_STRING, .str = {s, 0}};
  check_text(&v, "");

  /* numeric arrays: little-endian elements inside the mapping */
  const uint8_t i16[] = {0xff, 0xff, 0x02, 0x00, 0x00, 0x80}; /* -1, 2, -32768 */
  v = (gguf_value){.type = GGUF_TYPE_ARRAY};
  v.arr.elem_type = GGUF_TYPE_INT16;
  v.arr.count = 3;
  v.arr.raw = i16;
  check_text(&v, "[-1, 2, -32768]");
  const float f[] = {0.5f, -2.25f};
  v.arr.elem_type = GGUF_TYPE_FLOAT32;
  v.arr.count = 2;
  v.arr.raw = (const uint8_t *)f;
  check_text(&v, "[0.5, -2.25]");
  const uint8_t b[] = {1, 0};
  v.arr.elem_type = GGUF_TYPE_BOOL;
  v.arr.raw = b;
  check_text(&v, "[true, false]");
  v.arr.count = 0;
  check_text(&v, "[]");

  /* string arrays: quoted, with ", \ and control bytes escaped */
  static const char s0[] = "x\"y", s1[] = "back\\slash\t\x01", s2[] = "caf\xc3\xa9";
  gguf_str strs[] = {{s0, sizeof s0 - 1}, {s1, sizeof s1 - 1}, {s2, sizeof s2 - 1}};
  v = (gguf_value){.type = GGUF_TYPE_ARRAY};
  v.arr.elem_type = GGUF_TYPE_STRING;
  v.arr.count = 3;
  v.arr.strs = strs;
  check_text(&v, "[\"x\\\"y\", \"back\\\\slash\\t\\u0001\", \"caf\xc3\xa9\"]");
  v.arr.strs = NULL; /* the table dropped once the tokenizer has it */
  check_text(&v, "[3 strings]");

  /* arrays of arrays */
  gguf_value inner[2];
  const uint8_t u8a[] = {1, 2}, u8b[] = {3};
  for (int k = 0; k < 2; k++) {
    inner[k] = (gguf_value){.type = GGUF_TYPE_ARRAY};
    inner[k].arr.elem_type = GGUF_TYPE_UINT8;
    inner[k].arr.count = k ? 1 : 2;
    inner[k].arr.raw = k ? u8b : u8a;
  }
  v = (gguf_value){.type = GGUF_TYPE_ARRAY};
  v.arr.elem_type = GGUF_TYPE_ARRAY;
  v.arr.count = 2;
  v.arr.items = inner;
  check_text(&v, "[[1, 2], [3]]");
}

static void test_model_meta(const char *root) {
  char path[4096];
  snprintf(path, sizeof path, "%s/tests/fixtures/tiny/llama.gguf", root);
  pasada_model *m = NULL;
  if (pasada_model_load(path, NULL, &m) != PASADA_OK) {
    CHECK(0, "loading %s: %s", path, pasada_last_error());
    return;
  }
  const int64_t n = pasada_model_meta_count(m);
  CHECK(n == 23, "%lld keys", (long long)n);
  int found_arch = 0;
  for (int64_t i = 0; i < n; i++) {
    const char *key = NULL;
    CHECK(pasada_model_meta_key(m, i, &key) == PASADA_OK && key && *key, "key %lld", (long long)i);
    if (key && strcmp(key, "general.architecture") == 0) found_arch = 1;
    char *value = NULL;
    CHECK(key && pasada_model_meta_value(m, key, &value) == PASADA_OK && value, "value of %s",
          key ? key : "?");
    pasada_text_free(value);
  }
  CHECK(found_arch, "general.architecture is among the keys");
  const char *key = "x";
  CHECK(pasada_model_meta_key(m, n, &key) == PASADA_ERR_ARG && key == NULL, "index past the end");
  CHECK(pasada_model_meta_key(m, -1, &key) == PASADA_ERR_ARG, "negative index");

  static const struct {
    const char *key, *value;
  } want[] = {
      {"general.architecture", "llama"},
      {"llama.context_length", "128"},
      {"llama.attention.layer_norm_rms_epsilon", "1e-06"},
      {"llama.rope.freq_base", "10000"},
      {"tokenizer.ggml.add_bos_token", "false"},
      {"tokenizer.ggml.tokens", "[270 strings]"},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    char *value = NULL;
    int st = pasada_model_meta_value(m, want[i].key, &value);
    CHECK(st == PASADA_OK && value && strcmp(value, want[i].value) == 0, "%s = '%s', want '%s'",
          want[i].key, value ? value : "(null)", want[i].value);
    pasada_text_free(value);
  }
  char *value = (char *)"x";
  CHECK(pasada_model_meta_value(m, "no.such.key", &value) == PASADA_ERR_ARG && value == NULL,
        "an absent key");
  CHECK(strstr(pasada_last_error(), "no.such.key") != NULL, "the message names the key: %s",
        pasada_last_error());
  pasada_model_free(m);
}

int main(void) {
  const char *root = getenv("PASADA_SOURCE_DIR");
  if (!root) root = ".";
  test_value_text();
  test_model_meta(root);
  CHECK(strcmp(pasada_version(), PASADA_VERSION_STRING) == 0, "pasada_version() is %s",
        pasada_version());
  if (failures) {
    fprintf(stderr, "test_meta: %d checks failed\n", failures);
    return 1;
  }
  printf("test_meta: ok\n");
  return 0;
}
