/* fuzz_gguf.c: libFuzzer target for the GGUF reader. Any input must either be
 * rejected with an error or yield a file whose every value, string, array
 * element and tensor byte can be read without leaving the buffer (ASan and
 * UBSan watch). Seeds: tests/fixtures/malformed and tiny-llama-valid.gguf. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "format/gguf.h"

static volatile uint64_t sink;

/* Touches every byte a consumer could read from a value. */
static void walk_value(const gguf_value *v) {
  switch (v->type) {
  case GGUF_TYPE_STRING:
    for (uint64_t i = 0; i < v->str.len; i++) sink += (uint8_t)v->str.ptr[i];
    break;
  case GGUF_TYPE_ARRAY:
    for (uint64_t i = 0; i < v->arr.count; i++) {
      if (v->arr.raw) {
        sink += (uint64_t)gguf_arr_i64(v, i);
        sink += (uint64_t)(gguf_arr_f64(v, i) != 0);
      } else if (v->arr.strs) {
        const gguf_str *s = &v->arr.strs[i];
        if (s->len) sink += (uint8_t)s->ptr[0] + (uint8_t)s->ptr[s->len - 1];
      } else if (v->arr.items) {
        walk_value(&v->arr.items[i]);
      } else {
        abort(); /* a non-empty array must carry its elements */
      }
    }
    break;
  default: sink += v->u64; break;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  gguf_file *f = NULL;
  if (gguf_open_memory(data, size, "fuzz.gguf", &f) != PASADA_OK) {
    if (f) abort();
    return 0;
  }
  for (uint64_t i = 0; i < f->n_kv; i++) {
    const gguf_kv *kv = &f->kv[i];
    if (gguf_get(f, kv->key) != &kv->value) abort(); /* lookups find what was parsed */
    walk_value(&kv->value);
    uint32_t u;
    int64_t s;
    float x;
    bool b;
    char *str = NULL;
    gguf_get_u32(f, kv->key, false, &u);
    gguf_get_i64(f, kv->key, false, &s);
    gguf_get_f32(f, kv->key, false, &x);
    gguf_get_bool(f, kv->key, false, &b);
    if (gguf_get_string(f, kv->key, false, &str) == PASADA_OK) free(str);
  }
  for (uint64_t i = 0; i < f->n_tensors; i++) {
    const gguf_tensor *t = &f->tensors[i];
    if (gguf_find_tensor(f, t->name) != (int64_t)i) abort();
    const uint8_t *p = t->data;
    if (p < f->map || p + t->nbytes > f->map + f->size) abort();
    if (t->nbytes) sink += p[0] + p[t->nbytes - 1];
  }
  gguf_close(f);
  return 0;
}
