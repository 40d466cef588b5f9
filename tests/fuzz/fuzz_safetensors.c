/* fuzz_safetensors.c: libFuzzer target for the safetensors reader and its
 * JSON checks (src/format/safetensors.c). Any input must either be rejected
 * with an error or yield tensors whose every byte lies inside the buffer
 * (ASan watches the reads). Seeds: the safetensors files of
 * tests/fixtures/malformed-hf and tests/fixtures/hf. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "format/safetensors.h"

static volatile uint64_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* a copy of exactly `size` bytes, so ASan sees a read past the end */
  uint8_t *buf = malloc(size ? size : 1);
  if (!buf) return 0;
  memcpy(buf, data, size);
  st_file *f = NULL;
  if (st_open_memory(buf, size, "fuzz", &f) == PASADA_OK) {
    for (uint64_t i = 0; i < f->n_tensors; i++) {
      const st_tensor *t = &f->tensors[i];
      if (t->data < buf || t->data + t->nbytes > buf + size || t->data < buf + f->data_offset)
        abort();
      if (t->nbytes) sink += t->data[0] + t->data[t->nbytes - 1];
      sink += strlen(t->name);
    }
    st_close(f);
  }
  free(buf);
  return 0;
}
