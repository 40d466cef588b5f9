/* sbuf.c: the growable string of sbuf.h. */
#include "base/sbuf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pa_sbuf_put(pa_sbuf *b, const char *s, size_t n) {
  if (b->oom) return;
  if (!b->s || n + 1 > b->cap - b->n) {
    size_t cap = b->cap ? b->cap : 64;
    while (n + 1 > cap - b->n) {
      if (cap > SIZE_MAX / 2) {
        b->oom = true;
        return;
      }
      cap *= 2;
    }
    char *ns = realloc(b->s, cap);
    if (!ns) {
      b->oom = true;
      return;
    }
    b->s = ns;
    b->cap = cap;
  }
  memcpy(b->s + b->n, s, n);
  b->n += n;
  b->s[b->n] = '\0';
}

void pa_sbuf_str(pa_sbuf *b, const char *s) { pa_sbuf_put(b, s, strlen(s)); }

void pa_sbuf_printf(pa_sbuf *b, const char *fmt, ...) {
  char tmp[256];
  va_list ap;
  va_start(ap, fmt);
  const int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n > 0) pa_sbuf_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

char *pa_sbuf_finish(pa_sbuf *b) {
  if (!b->oom && !b->s) pa_sbuf_put(b, "", 0);
  if (b->oom) {
    free(b->s);
    b->s = NULL;
    return NULL;
  }
  return b->s;
}
