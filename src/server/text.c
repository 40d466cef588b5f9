/* text.c: the text rules of the server's output: stop strings matched across
 * token boundaries (with the text that could begin one held back), and
 * UTF-8 validity for everything that goes into JSON. */
#define _GNU_SOURCE /* memmem */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

size_t srv_stop_scan(const char *text, size_t n, char *const *stops, int n_stop, bool *matched) {
  *matched = false;
  size_t first = n;
  for (int i = 0; i < n_stop; i++) {
    size_t len = strlen(stops[i]);
    if (len == 0 || len > n) continue;
    const char *p = memmem(text, n, stops[i], len);
    if (p && (size_t)(p - text) < first) {
      first = (size_t)(p - text);
      *matched = true;
    }
  }
  if (*matched) return first;
  /* No match yet: keep back the longest tail that is a proper prefix of a
   * stop string, since the next token may complete it. */
  size_t hold = 0;
  for (int i = 0; i < n_stop; i++) {
    size_t len = strlen(stops[i]);
    size_t k = len - 1 < n ? len - 1 : n;
    for (; k > hold; k--)
      if (memcmp(text + n - k, stops[i], k) == 0) {
        hold = k;
        break;
      }
  }
  return n - hold;
}

/* Length of the valid UTF-8 character at s[0..n), 0 when invalid. */
static size_t utf8_char(const unsigned char *s, size_t n) {
  unsigned c = s[0];
  if (c < 0x80) return 1;
  size_t len;
  unsigned cp, min;
  if ((c & 0xe0) == 0xc0)
    len = 2, cp = c & 0x1f, min = 0x80;
  else if ((c & 0xf0) == 0xe0)
    len = 3, cp = c & 0x0f, min = 0x800;
  else if ((c & 0xf8) == 0xf0)
    len = 4, cp = c & 0x07, min = 0x10000;
  else
    return 0;
  if (len > n) return 0;
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return len;
}

bool srv_utf8_valid(const char *s, size_t n) {
  const unsigned char *u = (const unsigned char *)s;
  for (size_t i = 0; i < n;) {
    size_t l = utf8_char(u + i, n - i);
    if (!l) return false;
    i += l;
  }
  return true;
}

/* Bytes in the maximal subpart of an ill-formed sequence at s[0..n) (Unicode
 * ch. 3, "U+FFFD substitution of maximal subparts"): a valid lead byte and
 * the continuation bytes that could still have completed it. */
static size_t utf8_bad_run(const unsigned char *s, size_t n) {
  unsigned c = s[0];
  size_t len = (c >= 0xc2 && c <= 0xdf)   ? 2
               : (c >= 0xe0 && c <= 0xef) ? 3
               : (c >= 0xf0 && c <= 0xf4) ? 4
                                          : 0;
  if (len == 0) return 1;
  size_t k = 1;
  for (; k < len && k < n; k++) {
    unsigned lo = 0x80, hi = 0xbf; /* the second byte's range depends on the lead */
    if (k == 1 && c == 0xe0) lo = 0xa0;
    if (k == 1 && c == 0xed) hi = 0x9f;
    if (k == 1 && c == 0xf0) lo = 0x90;
    if (k == 1 && c == 0xf4) hi = 0x8f;
    if (s[k] < lo || s[k] > hi) break;
  }
  return k;
}

char *srv_utf8_sanitize(const char *s, size_t n) {
  const unsigned char *u = (const unsigned char *)s;
  char *out = malloc(n * 3 + 1); /* at worst each byte becomes U+FFFD (3 bytes) */
  if (!out) return NULL;
  size_t o = 0;
  for (size_t i = 0; i < n;) {
    size_t l = utf8_char(u + i, n - i);
    if (l) {
      memcpy(out + o, s + i, l);
      o += l;
      i += l;
    } else {
      memcpy(out + o, "\xef\xbf\xbd", 3);
      o += 3;
      i += utf8_bad_run(u + i, n - i);
    }
  }
  out[o] = 0;
  return out;
}

void srv_buf_append(srv_buf *b, const char *s, size_t n) {
  if (b->failed || n == 0) return;
  if (b->n + n + 1 > b->cap) {
    size_t c = b->cap ? b->cap : 256;
    while (c < b->n + n + 1) c *= 2;
    char *p = realloc(b->p, c);
    if (!p) {
      b->failed = true;
      return;
    }
    b->p = p;
    b->cap = c;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = 0;
}

void srv_buf_printf(srv_buf *b, const char *fmt, ...) {
  char small[512];
  va_list ap;
  va_start(ap, fmt);
  int len = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (len < 0) return;
  if ((size_t)len < sizeof small) {
    srv_buf_append(b, small, (size_t)len);
    return;
  }
  char *big = malloc((size_t)len + 1);
  if (!big) {
    b->failed = true;
    return;
  }
  va_start(ap, fmt);
  vsnprintf(big, (size_t)len + 1, fmt, ap);
  va_end(ap);
  srv_buf_append(b, big, (size_t)len);
  free(big);
}

void srv_buf_consume(srv_buf *b, size_t n) {
  if (n >= b->n) {
    b->n = 0;
  } else {
    memmove(b->p, b->p + n, b->n - n);
    b->n -= n;
  }
  if (b->p) b->p[b->n] = 0;
}

void srv_buf_free(srv_buf *b) {
  free(b->p);
  memset(b, 0, sizeof *b);
}
