/* sbuf.h: a growable NUL-terminated string (chat templates, metadata as
 * text). Appends never fail loudly: a failed allocation sets oom, later
 * appends do nothing, and pa_sbuf_finish reports it. */
#ifndef PASADA_SBUF_H
#define PASADA_SBUF_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
  char *s;
  size_t n, cap;
  bool oom;
} pa_sbuf;

void pa_sbuf_put(pa_sbuf *b, const char *s, size_t n);
void pa_sbuf_str(pa_sbuf *b, const char *s);
/* printf-style, up to 255 bytes of output */
void pa_sbuf_printf(pa_sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The string (the caller frees it; "" when nothing was appended), or NULL
 * when an append ran out of memory (the buffer is freed then). */
char *pa_sbuf_finish(pa_sbuf *b);

#endif
