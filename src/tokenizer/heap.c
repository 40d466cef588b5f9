/* heap.c: the binary heap of merge candidates both tokenizers use (BPE by
 * merge rank, SentencePiece by score; see tokenizer_internal.h). */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "tokenizer/tokenizer_internal.h"

#define AT(h, i) ((char *)(h)->v + (size_t)(i) * (h)->size)

int pa_heap_push(pa_heap *h, const void *item) {
  if (h->n == h->cap) {
    size_t cap = h->cap ? h->cap * 2 : 64;
    void *v = realloc(h->v, cap * h->size);
    if (!v) return pa_error(PASADA_ERR_NOMEM, "tokenizer: out of memory");
    h->v = v;
    h->cap = cap;
  }
  size_t i = h->n++;
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!h->before(item, AT(h, parent))) break;
    memcpy(AT(h, i), AT(h, parent), h->size);
    i = parent;
  }
  memcpy(AT(h, i), item, h->size);
  return PASADA_OK;
}

void pa_heap_pop(pa_heap *h, void *top) {
  memcpy(top, AT(h, 0), h->size);
  const size_t n = --h->n;
  if (n == 0) return;
  const char *last = AT(h, n); /* stays in place while it sifts down */
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && h->before(AT(h, c + 1), AT(h, c))) c++;
    if (!h->before(AT(h, c), last)) break;
    memcpy(AT(h, i), AT(h, c), h->size);
    i = c;
  }
  memcpy(AT(h, i), last, h->size);
}

void pa_heap_free(pa_heap *h) {
  free(h->v);
  h->v = NULL;
  h->n = h->cap = 0;
}
