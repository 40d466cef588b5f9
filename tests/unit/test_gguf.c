/* test_gguf.c: the GGUF reader and writer: a writer -> reader round trip of
 * every value type (nested and string arrays included) and of tensors of
 * several types; crafted malformed buffers that must each be rejected; every
 * truncation and many byte mutations of a valid file (no crash); and the
 * committed corpus in tests/fixtures (malformed/ and tiny-llama-valid.gguf). */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "format/gguf.h"
#include "quant/quant.h"
#include "test_check.h"

/* ---- a byte builder for crafted files ---- */
typedef struct {
  uint8_t *p;
  size_t n, cap;
} buf;

static void put(buf *b, const void *src, size_t n) {
  if (b->n + n > b->cap) {
    b->cap = (b->n + n) * 2 + 64;
    b->p = realloc(b->p, b->cap);
  }
  memcpy(b->p + b->n, src, n);
  b->n += n;
}
static void u32(buf *b, uint32_t v) {
  uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
  put(b, x, 4);
}
static void u64(buf *b, uint64_t v) {
  u32(b, (uint32_t)v);
  u32(b, (uint32_t)(v >> 32));
}
static void str(buf *b, const char *s) {
  u64(b, strlen(s));
  put(b, s, strlen(s));
}
static void header(buf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
  put(b, "GGUF", 4);
  u32(b, version);
  u64(b, n_tensors);
  u64(b, n_kv);
}
static void kv_u32(buf *b, const char *key, uint32_t v) {
  str(b, key);
  u32(b, GGUF_TYPE_UINT32);
  u32(b, v);
}
/* A tensor-table entry of an F32 tensor of shape ne (n dims). */
static void tinfo(buf *b, const char *name, uint32_t n, const uint64_t *ne, uint32_t type,
                  uint64_t offset) {
  str(b, name);
  u32(b, n);
  for (uint32_t i = 0; i < n; i++) u64(b, ne[i]);
  u32(b, type);
  u64(b, offset);
}
static void pad32(buf *b) {
  while (b->n % 32) put(b, "", 1);
}
static void zeros(buf *b, size_t n) {
  for (size_t i = 0; i < n; i++) put(b, "", 1);
}

static void expect_reject(buf *b, const char *what, int status) {
  gguf_file *f = NULL;
  int st = gguf_open_memory(b->p, b->n, "crafted.gguf", &f);
  CHECK(st != PASADA_OK, "%s: accepted", what);
  CHECK(f == NULL, "%s: file set on failure", what);
  if (status) CHECK(st == status, "%s: status %d, expected %d (%s)", what, st, status, pa_last_error());
  if (st != PASADA_OK) {
    const char *m = pa_last_error();
    CHECK(strncmp(m, "crafted.gguf: ", 14) == 0 && !strchr(m, '\n'), "%s: message '%s'", what, m);
  }
  gguf_close(f);
  free(b->p);
  memset(b, 0, sizeof *b);
}

/* A valid one-tensor file: header, one kv, tensor [8 x 2] F32 at offset 0. */
static buf valid_small(void) {
  buf b = {0};
  uint64_t ne[2] = {8, 2};
  header(&b, 3, 1, 1);
  kv_u32(&b, "general.alignment", 32);
  tinfo(&b, "t", 2, ne, PA_TYPE_F32, 0);
  pad32(&b);
  zeros(&b, 64);
  return b;
}

static void test_malformed_buffers(void) {
  buf b = {0};
  uint64_t ne2[2] = {8, 2};
  gguf_file *f = NULL;

  b = valid_small();
  CHECK(gguf_open_memory(b.p, b.n, "ok.gguf", &f) == PASADA_OK, "valid small: %s", pa_last_error());
  gguf_close(f);
  free(b.p);
  memset(&b, 0, sizeof b);

  expect_reject(&b, "empty", PASADA_ERR_FORMAT);
  put(&b, "GGML", 4), u32(&b, 3), u64(&b, 0), u64(&b, 0);
  expect_reject(&b, "bad magic", PASADA_ERR_FORMAT);
  header(&b, 1, 0, 0);
  expect_reject(&b, "version 1", PASADA_ERR_UNSUPPORTED);
  header(&b, 99, 0, 0);
  expect_reject(&b, "version 99", PASADA_ERR_UNSUPPORTED);
  header(&b, 3, 0, UINT64_MAX);
  expect_reject(&b, "kv count huge", PASADA_ERR_FORMAT);
  header(&b, 3, (uint64_t)1 << 62, 0);
  expect_reject(&b, "tensor count huge", PASADA_ERR_FORMAT);

  header(&b, 3, 0, 1), str(&b, ""), u32(&b, GGUF_TYPE_UINT8), put(&b, "x", 1), zeros(&b, 8);
  expect_reject(&b, "empty key", PASADA_ERR_FORMAT);
  header(&b, 3, 0, 1), u64(&b, UINT64_MAX - 3), put(&b, "abcdefghijklmn", 14);
  expect_reject(&b, "key length near 2^64", PASADA_ERR_FORMAT);
  header(&b, 3, 0, 2), kv_u32(&b, "a.b", 1), kv_u32(&b, "a.b", 2);
  expect_reject(&b, "duplicate key", PASADA_ERR_FORMAT);
  header(&b, 3, 0, 1), str(&b, "k"), u32(&b, 13), u32(&b, 0), zeros(&b, 8);
  expect_reject(&b, "unknown value type", PASADA_ERR_FORMAT);
  header(&b, 3, 0, 1), str(&b, "k"), u32(&b, GGUF_TYPE_STRING), u64(&b, UINT64_MAX), zeros(&b, 8);
  expect_reject(&b, "string length 2^64-1", PASADA_ERR_FORMAT);
  header(&b, 3, 0, 1), str(&b, "k"), u32(&b, GGUF_TYPE_ARRAY), u32(&b, GGUF_TYPE_UINT32);
  u64(&b, (uint64_t)1 << 62), zeros(&b, 16);
  expect_reject(&b, "array count * 4 overflows", PASADA_ERR_FORMAT);
  header(&b, 3, 0, 1), str(&b, "k"), u32(&b, GGUF_TYPE_ARRAY), u32(&b, GGUF_TYPE_STRING);
  u64(&b, (uint64_t)1 << 40), zeros(&b, 64);
  expect_reject(&b, "string array count huge", PASADA_ERR_FORMAT);
  header(&b, 3, 0, 1), str(&b, "k"), u32(&b, GGUF_TYPE_ARRAY), u32(&b, 77), u64(&b, 1), zeros(&b, 8);
  expect_reject(&b, "array of unknown type", PASADA_ERR_FORMAT);

  /* Nesting: GGUF_MAX_ARRAY_DEPTH levels pass, one more fails. */
  for (int depth = GGUF_MAX_ARRAY_DEPTH; depth <= GGUF_MAX_ARRAY_DEPTH + 1; depth++) {
    header(&b, 3, 0, 1), str(&b, "nest"), u32(&b, GGUF_TYPE_ARRAY);
    for (int d = 1; d < depth; d++) u32(&b, GGUF_TYPE_ARRAY), u64(&b, 1);
    u32(&b, GGUF_TYPE_UINT8), u64(&b, 1), put(&b, "\7", 1);
    int st = gguf_open_memory(b.p, b.n, "nest.gguf", &f);
    CHECK((st == PASADA_OK) == (depth <= GGUF_MAX_ARRAY_DEPTH), "nesting %d: status %d (%s)", depth,
          st, pa_last_error());
    gguf_close(f);
    f = NULL;
    free(b.p);
    memset(&b, 0, sizeof b);
  }

  uint32_t bad_alignments[] = {0, 48, 1u << 31};
  for (int i = 0; i < 3; i++) {
    header(&b, 3, 0, 1), kv_u32(&b, "general.alignment", bad_alignments[i]);
    expect_reject(&b, "bad alignment", PASADA_ERR_FORMAT);
  }
  header(&b, 3, 0, 1), str(&b, "general.alignment"), u32(&b, GGUF_TYPE_INT32), u32(&b, 32);
  expect_reject(&b, "alignment of type int32", PASADA_ERR_FORMAT);

#define ONE_TENSOR(NAME, ND, NE, TYPE, OFF, DATA) \
  header(&b, 3, 1, 0), tinfo(&b, NAME, ND, NE, TYPE, OFF), pad32(&b), zeros(&b, DATA)
  uint64_t ne5[5] = {8, 1, 1, 1, 1}, ne_zero[2] = {8, 0}, ne_big[3] = {32, 1ull << 40, 1ull << 40};
  uint64_t ne_i64[2] = {1ull << 32, 1ull << 31}, ne_neg[2] = {8, UINT64_MAX - 1};
  uint64_t ne_bytes[1] = {1ull << 62}, ne_q8[2] = {48, 1};
  ONE_TENSOR("t", 0, ne2, PA_TYPE_F32, 0, 64);
  expect_reject(&b, "n_dims 0", PASADA_ERR_FORMAT);
  ONE_TENSOR("t", 5, ne5, PA_TYPE_F32, 0, 64);
  expect_reject(&b, "n_dims 5", PASADA_ERR_FORMAT);
  ONE_TENSOR("t", 2, ne_zero, PA_TYPE_F32, 0, 64);
  expect_reject(&b, "dim 0", PASADA_ERR_FORMAT);
  ONE_TENSOR("t", 2, ne_neg, PA_TYPE_F32, 0, 64);
  expect_reject(&b, "dim > INT64_MAX", PASADA_ERR_FORMAT);
  ONE_TENSOR("t", 3, ne_big, PA_TYPE_F32, 0, 64);
  expect_reject(&b, "dims product overflows u64", PASADA_ERR_FORMAT);
  ONE_TENSOR("t", 2, ne_i64, PA_TYPE_F32, 0, 64);
  expect_reject(&b, "dims product overflows int64", PASADA_ERR_FORMAT);
  ONE_TENSOR("t", 1, ne_bytes, PA_TYPE_F32, 0, 64);
  expect_reject(&b, "byte size overflows", PASADA_ERR_FORMAT);
  ONE_TENSOR("t", 2, ne2, 4, 0, 64);
  expect_reject(&b, "unknown tensor type 4", PASADA_ERR_FORMAT);
  ONE_TENSOR("t", 2, ne2, 1000, 0, 64);
  expect_reject(&b, "unknown tensor type 1000", PASADA_ERR_FORMAT);
  ONE_TENSOR("t", 2, ne_q8, PA_TYPE_Q8_0, 0, 64);
  expect_reject(&b, "row not a multiple of the block", PASADA_ERR_FORMAT);
  ONE_TENSOR("t", 2, ne2, PA_TYPE_F32, 4, 96);
  expect_reject(&b, "misaligned offset", PASADA_ERR_FORMAT);
  ONE_TENSOR("t", 2, ne2, PA_TYPE_F32, 64, 96);
  expect_reject(&b, "data past the end", PASADA_ERR_FORMAT);
  ONE_TENSOR("t", 2, ne2, PA_TYPE_F32, UINT64_MAX - 31, 96);
  expect_reject(&b, "offset + size wraps", PASADA_ERR_FORMAT);
  ONE_TENSOR("", 2, ne2, PA_TYPE_F32, 0, 64);
  expect_reject(&b, "empty tensor name", PASADA_ERR_FORMAT);
  header(&b, 3, 2, 0), tinfo(&b, "t", 2, ne2, PA_TYPE_F32, 0), tinfo(&b, "t", 2, ne2, PA_TYPE_F32, 64);
  pad32(&b), zeros(&b, 128);
  expect_reject(&b, "duplicate tensor", PASADA_ERR_FORMAT);
  header(&b, 3, 1, 0), tinfo(&b, "t", 2, ne2, PA_TYPE_F32, 0);
  expect_reject(&b, "no data section", PASADA_ERR_FORMAT);
#undef ONE_TENSOR
}

/* Every proper prefix of a valid file that cuts into its tensor data fails;
 * byte mutations never crash (what they yield depends on the byte). */
static void test_truncations_and_mutations(void) {
  buf b = valid_small();
  uint64_t data_end = b.n; /* the one tensor fills the data section exactly */
  gguf_file *f = NULL;
  for (uint64_t n = 0; n < data_end; n++) {
    uint8_t *copy = malloc(n ? n : 1);
    memcpy(copy, b.p, n);
    int st = gguf_open_memory(copy, n, "cut.gguf", &f);
    CHECK(st != PASADA_OK, "prefix of %llu bytes accepted", (unsigned long long)n);
    gguf_close(f);
    f = NULL;
    free(copy);
  }
  uint8_t values[] = {0, 1, 0x7f, 0x80, 0xff};
  for (size_t i = 0; i < b.n - 64; i++)
    for (size_t v = 0; v < sizeof values; v++) {
      uint8_t old = b.p[i];
      b.p[i] = values[v];
      if (gguf_open_memory(b.p, b.n, "mut.gguf", &f) == PASADA_OK) {
        for (uint64_t t = 0; t < f->n_tensors; t++) {
          const gguf_tensor *ti = &f->tensors[t];
          CHECK((const uint8_t *)ti->data + ti->nbytes <= f->map + f->size, "tensor out of bounds");
        }
        gguf_close(f);
        f = NULL;
      }
      b.p[i] = old;
    }
  free(b.p);
}

/* ---- round trip ---- */
typedef struct {
  const char *name;
  uint32_t type, n_dims;
  int64_t ne[4];
} tensor_spec;

static const tensor_spec specs[] = {
    {"f32.2d", PA_TYPE_F32, 2, {7, 3, 1, 1}},   {"f16.3d", PA_TYPE_F16, 3, {16, 2, 3, 1}},
    {"bf16.1d", PA_TYPE_BF16, 1, {5, 1, 1, 1}}, {"q8_0", PA_TYPE_Q8_0, 2, {64, 2, 1, 1}},
    {"q4_k", PA_TYPE_Q4_K, 2, {256, 3, 1, 1}},  {"q6_k.4d", PA_TYPE_Q6_K, 4, {256, 1, 2, 2}},
    {"q4_0", PA_TYPE_Q4_0, 1, {96, 1, 1, 1}},
};
#define N_SPECS (sizeof specs / sizeof specs[0])

static uint64_t spec_bytes(const tensor_spec *s) {
  const pa_type_traits *tr = pa_type_get(s->type);
  return (uint64_t)(s->ne[0] / tr->block_size) * tr->type_size * s->ne[1] * s->ne[2] * s->ne[3];
}

static gguf_value nested_value(void) {
  /* [[1, 2, 3], [], [[4]]]-shaped: an array of three arrays */
  static const uint8_t a123[] = {1, 2, 3}, a4[] = {4};
  static gguf_value inner[1], outer[3];
  inner[0] = (gguf_value){.type = GGUF_TYPE_ARRAY, .arr = {.elem_type = GGUF_TYPE_UINT8, .count = 1, .raw = a4}};
  outer[0] = (gguf_value){.type = GGUF_TYPE_ARRAY, .arr = {.elem_type = GGUF_TYPE_UINT8, .count = 3, .raw = a123}};
  outer[1] = (gguf_value){.type = GGUF_TYPE_ARRAY, .arr = {.elem_type = GGUF_TYPE_INT64, .count = 0}};
  outer[2] = (gguf_value){.type = GGUF_TYPE_ARRAY, .arr = {.elem_type = GGUF_TYPE_ARRAY, .count = 1, .items = inner}};
  return (gguf_value){.type = GGUF_TYPE_ARRAY, .arr = {.elem_type = GGUF_TYPE_ARRAY, .count = 3, .items = outer}};
}

static void fill_writer(gguf_writer *w, uint8_t **datas) {
  gguf_value v;
  v = (gguf_value){.type = GGUF_TYPE_UINT8, .u64 = 200};
  gguf_writer_set_value(w, "t.u8", &v);
  v = (gguf_value){.type = GGUF_TYPE_INT8, .i64 = -100};
  gguf_writer_set_value(w, "t.i8", &v);
  v = (gguf_value){.type = GGUF_TYPE_UINT16, .u64 = 60000};
  gguf_writer_set_value(w, "t.u16", &v);
  v = (gguf_value){.type = GGUF_TYPE_INT16, .i64 = -30000};
  gguf_writer_set_value(w, "t.i16", &v);
  gguf_writer_set_u32(w, "t.u32", 4000000000u);
  gguf_writer_set_i32(w, "t.i32", -2000000000);
  gguf_writer_set_f32(w, "t.f32", 1.5f);
  gguf_writer_set_bool(w, "t.bool", true);
  gguf_writer_set_string(w, "t.str", "héllo wörld");
  gguf_writer_set_string(w, "t.empty", "");
  v = (gguf_value){.type = GGUF_TYPE_UINT64, .u64 = UINT64_MAX - 1};
  gguf_writer_set_value(w, "t.u64", &v);
  v = (gguf_value){.type = GGUF_TYPE_INT64, .i64 = INT64_MIN + 1};
  gguf_writer_set_value(w, "t.i64", &v);
  v = (gguf_value){.type = GGUF_TYPE_FLOAT64, .f64 = -0.1};
  gguf_writer_set_value(w, "t.f64", &v);
  gguf_writer_set_u32(w, "t.replaced", 1);
  gguf_writer_set_u32(w, "t.replaced", 2);
  int32_t i32s[] = {-1, 0, 1, 2147483647};
  float f32s[] = {0.5f, -2.0f, 3.25f};
  double f64s[] = {1e300, -1e-300};
  uint8_t bools[] = {1, 0, 1};
  uint16_t u16s[] = {1, 65535};
  gguf_writer_set_array(w, "a.i32", GGUF_TYPE_INT32, i32s, 4);
  gguf_writer_set_array(w, "a.f32", GGUF_TYPE_FLOAT32, f32s, 3);
  gguf_writer_set_array(w, "a.f64", GGUF_TYPE_FLOAT64, f64s, 2);
  gguf_writer_set_array(w, "a.bool", GGUF_TYPE_BOOL, bools, 3);
  gguf_writer_set_array(w, "a.u16", GGUF_TYPE_UINT16, u16s, 2);
  gguf_writer_set_array(w, "a.empty", GGUF_TYPE_UINT32, NULL, 0);
  const char *strs[] = {"a", "", "Ġthe", "<|endoftext|>"};
  gguf_writer_set_string_array(w, "a.str", strs, 4);
  v = nested_value();
  gguf_writer_set_value(w, "a.nested", &v);
  for (size_t i = 0; i < N_SPECS; i++) {
    uint64_t n = spec_bytes(&specs[i]);
    datas[i] = malloc(n);
    for (uint64_t k = 0; k < n; k++) datas[i][k] = (uint8_t)(k * 31 + i);
    int st = gguf_writer_add_tensor(w, specs[i].name, specs[i].type, specs[i].n_dims, specs[i].ne,
                                    datas[i], n);
    CHECK(st == PASADA_OK, "add_tensor %s: %s", specs[i].name, pa_last_error());
  }
  CHECK(gguf_writer_add_tensor(w, "f32.2d", PA_TYPE_F32, 1, specs[0].ne, datas[0], 28) != PASADA_OK,
        "duplicate tensor accepted by the writer");
  CHECK(gguf_writer_add_tensor(w, "bad", PA_TYPE_F32, 1, specs[0].ne, datas[0], 27) != PASADA_OK,
        "wrong byte count accepted by the writer");
}

static void check_file(const gguf_file *f, uint8_t **datas, uint64_t alignment) {
  const gguf_value *v;
  CHECK(f->alignment == alignment, "alignment %llu", (unsigned long long)f->alignment);
  CHECK(f->data_offset % alignment == 0, "data offset not aligned");
#define SCALAR(KEY, TYPE, FIELD, VAL)                                                    \
  v = gguf_get(f, KEY);                                                                \
  CHECK(v && v->type == TYPE && v->FIELD == VAL, "%s wrong", KEY);
  SCALAR("t.u8", GGUF_TYPE_UINT8, u64, 200);
  SCALAR("t.i8", GGUF_TYPE_INT8, i64, -100);
  SCALAR("t.u16", GGUF_TYPE_UINT16, u64, 60000);
  SCALAR("t.i16", GGUF_TYPE_INT16, i64, -30000);
  SCALAR("t.u32", GGUF_TYPE_UINT32, u64, 4000000000u);
  SCALAR("t.i32", GGUF_TYPE_INT32, i64, -2000000000);
  SCALAR("t.f32", GGUF_TYPE_FLOAT32, f64, 1.5);
  SCALAR("t.bool", GGUF_TYPE_BOOL, u64, 1);
  SCALAR("t.u64", GGUF_TYPE_UINT64, u64, UINT64_MAX - 1);
  SCALAR("t.i64", GGUF_TYPE_INT64, i64, INT64_MIN + 1);
  SCALAR("t.f64", GGUF_TYPE_FLOAT64, f64, -0.1);
  SCALAR("t.replaced", GGUF_TYPE_UINT32, u64, 2);
#undef SCALAR
  v = gguf_get(f, "t.str");
  CHECK(v && v->type == GGUF_TYPE_STRING && v->str.len == strlen("héllo wörld") &&
            !memcmp(v->str.ptr, "héllo wörld", v->str.len), "t.str wrong");
  v = gguf_get(f, "t.empty");
  CHECK(v && v->type == GGUF_TYPE_STRING && v->str.len == 0, "t.empty wrong");
  v = gguf_get(f, "a.i32");
  CHECK(v && v->arr.elem_type == GGUF_TYPE_INT32 && v->arr.count == 4 && gguf_arr_i64(v, 0) == -1 &&
            gguf_arr_i64(v, 3) == 2147483647, "a.i32 wrong");
  v = gguf_get(f, "a.f32");
  CHECK(v && v->arr.count == 3 && gguf_arr_f64(v, 2) == 3.25, "a.f32 wrong");
  v = gguf_get(f, "a.f64");
  CHECK(v && v->arr.count == 2 && gguf_arr_f64(v, 0) == 1e300 && gguf_arr_f64(v, 1) == -1e-300,
        "a.f64 wrong");
  v = gguf_get(f, "a.bool");
  CHECK(v && v->arr.elem_type == GGUF_TYPE_BOOL && gguf_arr_i64(v, 0) == 1 && gguf_arr_i64(v, 1) == 0,
        "a.bool wrong");
  v = gguf_get(f, "a.u16");
  CHECK(v && gguf_arr_i64(v, 1) == 65535 && gguf_arr_f64(v, 1) == 65535.0, "a.u16 wrong");
  v = gguf_get(f, "a.empty");
  CHECK(v && v->arr.elem_type == GGUF_TYPE_UINT32 && v->arr.count == 0, "a.empty wrong");
  v = gguf_get(f, "a.str");
  CHECK(v && v->arr.elem_type == GGUF_TYPE_STRING && v->arr.count == 4 && v->arr.strs &&
            v->arr.strs[1].len == 0 && v->arr.strs[3].len == 13 &&
            !memcmp(v->arr.strs[2].ptr, "Ġthe", strlen("Ġthe")), "a.str wrong");
  v = gguf_get(f, "a.nested");
  CHECK(v && v->arr.elem_type == GGUF_TYPE_ARRAY && v->arr.count == 3 && v->arr.items, "a.nested");
  if (v && v->arr.items && v->arr.count == 3) {
    const gguf_value *it = v->arr.items;
    CHECK(it[0].arr.count == 3 && gguf_arr_i64(&it[0], 2) == 3, "nested[0]");
    CHECK(it[1].arr.elem_type == GGUF_TYPE_INT64 && it[1].arr.count == 0, "nested[1]");
    CHECK(it[2].arr.elem_type == GGUF_TYPE_ARRAY && it[2].arr.count == 1 && it[2].arr.items &&
              gguf_arr_i64(&it[2].arr.items[0], 0) == 4, "nested[2]");
  }
  CHECK(gguf_get(f, "absent") == NULL, "absent key found");
  CHECK(f->n_tensors == N_SPECS, "n_tensors %llu", (unsigned long long)f->n_tensors);
  for (size_t i = 0; i < N_SPECS; i++) {
    const gguf_tensor *t = gguf_get_tensor(f, specs[i].name);
    CHECK(t && gguf_find_tensor(f, specs[i].name) == (int64_t)i, "tensor %s missing", specs[i].name);
    if (!t) continue;
    CHECK(t->type == specs[i].type && t->n_dims == specs[i].n_dims &&
              !memcmp(t->ne, specs[i].ne, sizeof t->ne), "tensor %s shape/type", t->name);
    CHECK(t->nbytes == spec_bytes(&specs[i]) && !memcmp(t->data, datas[i], t->nbytes),
          "tensor %s data", t->name);
    CHECK(t->offset % alignment == 0, "tensor %s offset", t->name);
  }
  CHECK(gguf_get_tensor(f, "nope") == NULL && gguf_find_tensor(f, "nope") == -1, "absent tensor");
}

static void test_getters(const gguf_file *f) {
  uint32_t u = 7;
  int64_t i = 0;
  float x = 0;
  bool b = false;
  char *s = NULL;
  CHECK(gguf_get_u32(f, "t.u8", true, &u) == PASADA_OK && u == 200, "u32 from u8");
  CHECK(gguf_get_u32(f, "t.i8", true, &u) != PASADA_OK, "u32 from negative accepted");
  CHECK(gguf_get_u32(f, "t.u64", true, &u) != PASADA_OK, "u32 from huge u64 accepted");
  CHECK(gguf_get_u32(f, "t.str", true, &u) != PASADA_OK, "u32 from string accepted");
  CHECK(strstr(pa_last_error(), "t.str"), "message names the key: %s", pa_last_error());
  CHECK(gguf_get_u32(f, "absent", true, &u) != PASADA_OK, "required absent accepted");
  u = 7;
  CHECK(gguf_get_u32(f, "absent", false, &u) == PASADA_OK && u == 7, "optional absent");
  CHECK(gguf_get_i64(f, "t.i64", true, &i) == PASADA_OK && i == INT64_MIN + 1, "i64");
  CHECK(gguf_get_i64(f, "t.u64", true, &i) != PASADA_OK, "i64 from huge u64 accepted");
  CHECK(gguf_get_i64(f, "t.u32", true, &i) == PASADA_OK && i == 4000000000, "i64 from u32");
  CHECK(gguf_get_f32(f, "t.f64", true, &x) == PASADA_OK && fabsf(x + 0.1f) < 1e-7f, "f32 from f64");
  CHECK(gguf_get_f32(f, "t.u32", true, &x) != PASADA_OK, "f32 from u32 accepted");
  CHECK(gguf_get_bool(f, "t.bool", true, &b) == PASADA_OK && b, "bool");
  CHECK(gguf_get_string(f, "t.str", true, &s) == PASADA_OK && s && !strcmp(s, "héllo wörld"), "string");
  free(s);
  CHECK(gguf_get_string(f, "t.u8", true, &s) != PASADA_OK, "string from u8 accepted");
}

static void test_round_trip(void) {
  char dir[] = "/tmp/test_gguf_XXXXXX", path[300], path2[300];
  uint8_t *datas[N_SPECS] = {0};
  CHECK(mkdtemp(dir) != NULL, "mkdtemp");
  for (int variant = 0; variant < 3; variant++) {
    uint32_t version = variant == 1 ? 2 : 3;
    uint64_t alignment = variant == 2 ? 64 : 32;
    gguf_writer *w = gguf_writer_create();
    if (variant == 2) gguf_writer_set_alignment(w, 64);
    fill_writer(w, datas);
    snprintf(path, sizeof path, "%s/rt%d.gguf", dir, variant);
    CHECK(gguf_writer_write(w, path, version) == PASADA_OK, "write: %s", pa_last_error());
    gguf_writer_free(w);
    gguf_file *f = NULL;
    int st = gguf_open(path, &f);
    CHECK(st == PASADA_OK, "open round trip %d: %s", variant, pa_last_error());
    if (st == PASADA_OK) {
      CHECK(f->version == version, "version");
      check_file(f, datas, alignment);
      test_getters(f);
      /* Copy every value through set_value (deep copies of the mapping). */
      gguf_writer *w2 = gguf_writer_create();
      for (uint64_t k = 0; k < f->n_kv; k++) gguf_writer_set_value(w2, f->kv[k].key, &f->kv[k].value);
      for (uint64_t k = 0; k < f->n_tensors; k++) {
        const gguf_tensor *t = &f->tensors[k];
        gguf_writer_add_tensor(w2, t->name, t->type, t->n_dims, t->ne, t->data, t->nbytes);
      }
      snprintf(path2, sizeof path2, "%s/copy%d.gguf", dir, variant);
      CHECK(gguf_writer_write(w2, path2, 3) == PASADA_OK, "write copy: %s", pa_last_error());
      gguf_writer_free(w2);
      gguf_file *g = NULL;
      CHECK(gguf_open(path2, &g) == PASADA_OK, "open copy: %s", pa_last_error());
      if (g) check_file(g, datas, alignment);
      gguf_close(g);
      unlink(path2);
    }
    gguf_close(f);
    unlink(path);
    for (size_t i = 0; i < N_SPECS; i++) free(datas[i]);
  }
  rmdir(dir);
  gguf_file *f = NULL;
  CHECK(gguf_open("/nonexistent/x.gguf", &f) == PASADA_ERR_IO, "missing file not an IO error");
  CHECK(gguf_open("/tmp", &f) == PASADA_ERR_IO, "directory not an IO error");
}

/* gguf_drop_string_arrays: a big string array (its own arena block, freed)
 * and a small one (inside a shared chunk, kept) lose their element tables;
 * every other value, before and after them in the arena, stays readable
 * (under ASan a freed block still in use, or freed twice at close, fails). */
static void test_drop_string_arrays(void) {
  enum { N_BIG = 5000 };
  static char store[N_BIG][12];
  static const char *big[N_BIG];
  for (int i = 0; i < N_BIG; i++) snprintf(store[i], sizeof store[i], "s%d", i), big[i] = store[i];
  const char *small[] = {"x", "yz"};
  gguf_writer *w = gguf_writer_create();
  gguf_writer_set_string(w, "a.before", "first");
  gguf_writer_set_string_array(w, "a.small", small, 2);
  gguf_writer_set_string_array(w, "a.big", big, N_BIG);
  gguf_writer_set_u32(w, "a.after", 77);
  gguf_writer_set_string(w, "a.last", "last");
  char path[] = "/tmp/test_gguf_drop_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0, "mkstemp");
  if (fd < 0) return;
  close(fd);
  CHECK(gguf_writer_write(w, path, 3) == PASADA_OK, "write: %s", pa_last_error());
  gguf_writer_free(w);
  gguf_file *f = NULL;
  CHECK(gguf_open(path, &f) == PASADA_OK, "open: %s", pa_last_error());
  unlink(path);
  if (!f) return;
  const gguf_value *vb = gguf_get(f, "a.big"), *vs = gguf_get(f, "a.small");
  CHECK(vb && vb->arr.strs && vb->arr.strs[N_BIG - 1].len == 5 &&
            !memcmp(vb->arr.strs[N_BIG - 1].ptr, "s4999", 5),
        "big array before the drop");
  gguf_drop_string_arrays(f);
  CHECK(vb->arr.strs == NULL && vb->arr.count == N_BIG && vs->arr.strs == NULL && vs->arr.count == 2,
        "string arrays dropped, counts kept");
  uint32_t u = 0;
  char *a = NULL, *z = NULL;
  CHECK(gguf_get_u32(f, "a.after", true, &u) == PASADA_OK && u == 77, "u32 after the drop");
  CHECK(gguf_get_string(f, "a.before", true, &a) == PASADA_OK && a && !strcmp(a, "first") &&
            gguf_get_string(f, "a.last", true, &z) == PASADA_OK && z && !strcmp(z, "last"),
        "strings after the drop");
  free(a), free(z);
  gguf_drop_string_arrays(f); /* twice: nothing left to free */
  gguf_close(f);
}

/* The committed corpus: tok-* and model-* are valid GGUF (a later loader
 * rejects them), every other malformed file is rejected here. */
static void test_corpus(void) {
  const char *root = getenv("PASADA_SOURCE_DIR");
  char path[1024];
  gguf_file *f = NULL;
  if (!root) root = ".";
  snprintf(path, sizeof path, "%s/tests/fixtures/tiny-llama-valid.gguf", root);
  CHECK(gguf_open(path, &f) == PASADA_OK, "valid fixture rejected: %s", pa_last_error());
  if (f) CHECK(gguf_get_tensor(f, "blk.0.ffn_down.weight") != NULL, "valid fixture lacks ffn_down");
  gguf_close(f);
  snprintf(path, sizeof path, "%s/tests/fixtures/malformed", root);
  DIR *d = opendir(path);
  CHECK(d != NULL, "cannot open %s", path);
  if (!d) return;
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) {
    size_t len = strlen(e->d_name);
    if (len < 6 || strcmp(e->d_name + len - 5, ".gguf")) continue;
    bool valid_gguf = !strncmp(e->d_name, "tok-", 4) || !strncmp(e->d_name, "model-", 6);
    snprintf(path, sizeof path, "%s/tests/fixtures/malformed/%s", root, e->d_name);
    f = NULL;
    int st = gguf_open(path, &f);
    const char *m = pa_last_error();
    if (valid_gguf)
      CHECK(st == PASADA_OK, "%s should be valid GGUF: %s", e->d_name, m);
    else
      CHECK(st != PASADA_OK && strstr(m, e->d_name) && !strchr(m, '\n'), "%s: status %d, '%s'",
            e->d_name, st, st ? m : "");
    if (getenv("GGUF_TEST_VERBOSE") && st) printf("%s\n", m);
    gguf_close(f);
    n++;
  }
  closedir(d);
  CHECK(n >= 40, "only %d files in the malformed corpus", n);
}

int main(void) {
  test_malformed_buffers();
  test_truncations_and_mutations();
  test_round_trip();
  test_drop_string_arrays();
  test_corpus();
  if (failures) fprintf(stderr, "test_gguf: %d failure(s)\n", failures);
  else printf("test_gguf: ok\n");
  return failures != 0;
}
