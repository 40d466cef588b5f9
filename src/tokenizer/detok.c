/* detok.c: token ids -> text.
 *
 * Every token's bytes are computed once at load (byte-level BPE through the
 * GPT-2 byte map; SentencePiece with "▁" -> ' ' and <0xNN> -> that byte).
 * The streaming detokenizer joins them and only lets complete UTF-8
 * characters out: an incomplete tail waits for the next token, and bytes that
 * can never form a character become U+FFFD, one per maximal invalid
 * subsequence (as Rust's from_utf8_lossy and Python's "replace" do), so the
 * concatenation of a stream equals pa_detokenize of the whole sequence. */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "tokenizer/tokenizer_internal.h"

static bool is_special_type(int ty) { return ty == PA_TOKEN_CONTROL || ty == PA_TOKEN_UNKNOWN; }

/* Hex value of "<0xNN>", or -1. */
static int byte_token_value(const char *s, uint32_t n) {
  if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
  int v = 0;
  for (int i = 3; i < 5; i++) {
    char c = s[i];
    int d = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                   : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

/* Writes the decoded bytes of token `id` to out (never more than its
 * spelling), returns their count. */
static size_t decode_token(const pa_tokenizer *t, int32_t id, char *out) {
  const char *s = t->text_arena + t->text_off[id];
  uint32_t n = (uint32_t)pa_text_len(t, id);
  int ty = t->types[id];
  if (is_special_type(ty) || (t->kind == PA_TOK_BPE && ty == PA_TOKEN_USER_DEFINED)) {
    memcpy(out, s, n);
    return n;
  }
  size_t o = 0;
  if (t->kind == PA_TOK_SPM || t->kind == PA_TOK_WPM || pa_raw_bpe(t)) {
    int b = ty == PA_TOKEN_BYTE ? byte_token_value(s, n) : -1;
    if (b >= 0) {
      out[0] = (char)b;
      return 1;
    }
    const bool spaces = t->kind != PA_TOK_BPE || t->escape_spaces; /* "\u2581" -> ' ' */
    for (uint32_t i = 0; i < n;) {
      if (spaces && i + 3 <= n && memcmp(s + i, "\xE2\x96\x81", 3) == 0) {
        out[o++] = ' ';
        i += 3;
      } else {
        out[o++] = s[i++];
      }
    }
    return o;
  }
  /* Byte-level: each code point of the spelling is one byte; a character
   * outside the map (a mislabelled token) is kept as it is. */
  for (uint32_t i = 0; i < n;) {
    uint32_t cp;
    int cl = pa_utf8_decode((const unsigned char *)s + i, n - i, &cp);
    int b = cl > 0 ? pa_gpt2_cp_to_byte(cp) : -1;
    if (b >= 0) {
      out[o++] = (char)b;
      i += (uint32_t)cl;
    } else {
      size_t k = cl > 0 ? (size_t)cl : 1;
      memcpy(out + o, s + i, k);
      o += k;
      i += (uint32_t)k;
    }
  }
  return o;
}

/* The most one push of this piece can write: its bytes, plus 2 more for each
 * byte outside a complete character within it (it may turn into U+FFFD),
 * plus up to 3 held-back bytes of earlier tokens, each possibly U+FFFD. */
static size_t push_output_bound(const unsigned char *p, size_t n) {
  size_t loose = 0;
  for (size_t i = 0; i < n;) {
    int k = pa_utf8_valid_len(p + i, n - i);
    if (k > 0) {
      i += (size_t)k;
    } else {
      loose++;
      i++;
    }
  }
  return n + 2 * loose + 9;
}

int pa_pieces_build(pa_tokenizer *t) {
  uint64_t total = 0;
  for (int32_t id = 0; id < t->n_vocab; id++) total += pa_text_len(t, id);
  t->piece_arena = malloc(total ? total : 1);
  t->piece_off = malloc(((size_t)t->n_vocab + 1) * sizeof(uint32_t));
  if (!t->piece_arena || !t->piece_off)
    return pa_error(PASADA_ERR_NOMEM, "tokenizer: out of memory for pieces");
  /* A decoded token is never longer than its spelling. */
  uint64_t off = 0;
  t->max_push_output = 0;
  for (int32_t id = 0; id < t->n_vocab; id++) {
    size_t n = decode_token(t, id, t->piece_arena + off);
    t->piece_off[id] = (uint32_t)off; /* fits: pieces are no longer than the texts */
    size_t bound = push_output_bound((const unsigned char *)t->piece_arena + off, n);
    if (bound > t->max_push_output) t->max_push_output = bound;
    off += n;
  }
  t->piece_off[t->n_vocab] = (uint32_t)off;
  return PASADA_OK;
}

/* The bytes of `id` in a stream: control tokens only when rendered. */
static const char *piece_of(const pa_tokenizer *t, int32_t id, bool render_special, size_t *n) {
  *n = 0;
  if (id < 0 || id >= t->n_vocab) return "";
  if (is_special_type(t->types[id]) && !render_special) return "";
  *n = pa_piece_len(t, id);
  return t->piece_arena + t->piece_off[id];
}

size_t pa_token_to_piece(const pa_tokenizer *t, int32_t id, bool render_special, char *buf,
                         size_t cap) {
  size_t n;
  const char *p = piece_of(t, id, render_special, &n);
  if (buf && cap) memcpy(buf, p, n < cap ? n : cap);
  return n;
}

size_t pa_detok_max_output(const pa_tokenizer *t) { return t->max_push_output; }

/* ---- UTF-8 assembly ---- */

/* How many bytes at s[0..n) form a valid start of one character (*need: the
 * character's full length). Equal to *need: complete; smaller and == n: it
 * may complete later; otherwise invalid (the result, at least 1, is the
 * maximal subpart to replace). */
static size_t utf8_prefix(const unsigned char *s, size_t n, size_t *need) {
  unsigned char c = s[0];
  unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
  if (c < 0x80) return *need = 1, 1;
  if (c >= 0xC2 && c <= 0xDF)
    *need = 2;
  else if (c >= 0xE0 && c <= 0xEF) {
    *need = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    *need = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return *need = 1, 0;
  }
  size_t k = 1;
  for (; k < *need && k < n; k++) {
    unsigned char b = s[k];
    if (k == 1 ? (b < lo || b > hi) : (b & 0xC0) != 0x80) break;
  }
  return k;
}

typedef struct {
  char *buf;
  size_t cap, n;
} out_buf;

static void put(out_buf *o, const void *s, size_t n) {
  size_t k = o->n < o->cap ? o->cap - o->n : 0;
  if (k) memcpy(o->buf + o->n, s, n < k ? n : k);
  o->n += n;
}

/* Emits the complete characters of pending + piece, keeps an incomplete tail. */
static void assemble(pa_detok *d, const char *piece, size_t n, out_buf *o) {
  size_t i = 0;
  /* Finish the character held back from earlier tokens. */
  while (d->n_pending > 0 && i <= n) {
    size_t need, got = utf8_prefix((unsigned char *)d->pending, (size_t)d->n_pending, &need);
    if (got == need) { /* complete (cannot happen for held bytes, kept for safety) */
      put(o, d->pending, need);
      memmove(d->pending, d->pending + need, (size_t)d->n_pending - need);
      d->n_pending -= (int)need;
      continue;
    }
    if (got == (size_t)d->n_pending && i < n) { /* take one more byte and look again */
      d->pending[d->n_pending++] = piece[i++];
      continue;
    }
    if (got == (size_t)d->n_pending) return; /* still incomplete: wait for more */
    put(o, "\xEF\xBF\xBD", 3);               /* invalid: replace its maximal subpart */
    if (got == 0) got = 1; /* a byte no character starts with (what an invalid prefix left) */
    memmove(d->pending, d->pending + got, (size_t)d->n_pending - got);
    d->n_pending -= (int)got;
  }
  const unsigned char *u = (const unsigned char *)piece;
  size_t run = i;
  while (i < n) {
    if (u[i] < 0x80) {
      i++;
      continue;
    }
    size_t need, got = utf8_prefix(u + i, n - i, &need);
    if (got == need) {
      i += need;
      continue;
    }
    put(o, piece + run, i - run);
    if (got == n - i && got > 0) { /* incomplete at the end: hold it */
      memcpy(d->pending, piece + i, got);
      d->n_pending = (int)got;
      return;
    }
    put(o, "\xEF\xBF\xBD", 3);
    i += got ? got : 1;
    run = i;
  }
  put(o, piece + run, n - run);
}

void pa_detok_init(pa_detok *d, const pa_tokenizer *t, bool render_special) {
  memset(d, 0, sizeof *d);
  d->tok = t;
  d->render_special = render_special;
  d->prev = -1; /* -1 until the stream has produced its first byte */
}

size_t pa_detok_push(pa_detok *d, int32_t id, char *buf, size_t cap) {
  const pa_tokenizer *t = d->tok;
  size_t n;
  const char *p = piece_of(t, id, d->render_special, &n);
  /* SentencePiece with add_space_prefix: the space the encoder put in front
   * of the text is not part of it (Hugging Face strips one leading space). */
  if (d->prev < 0 && (t->kind == PA_TOK_SPM || t->kind == PA_TOK_WPM) && t->add_space_prefix && n > 0 && p[0] == ' ') {
    p++;
    n--;
  }
  out_buf o = {buf, cap, 0};
  assemble(d, p, n, &o);
  if (n > 0 || d->n_pending > 0) d->prev = id;
  return o.n < cap ? o.n : cap;
}

size_t pa_detok_flush(pa_detok *d, char *buf, size_t cap) {
  out_buf o = {buf, cap, 0};
  if (d->n_pending > 0) put(&o, "\xEF\xBF\xBD", 3); /* a character that never completed */
  d->n_pending = 0;
  return o.n < cap ? o.n : cap;
}

char *pa_detokenize(const pa_tokenizer *t, const int32_t *ids, size_t n, bool render_special) {
  return pa_detokenize_len(t, ids, n, render_special, NULL);
}

char *pa_detokenize_len(const pa_tokenizer *t, const int32_t *ids, size_t n, bool render_special,
                        size_t *out_len) {
  size_t step = pa_detok_max_output(t), cap = step * 2 + 16, len = 0;
  char *s = malloc(cap);
  if (!s) return NULL;
  pa_detok d;
  pa_detok_init(&d, t, render_special);
  for (size_t i = 0; i <= n; i++) {
    if (cap - len < step + 1) {
      cap = cap * 2 + step;
      char *ns = realloc(s, cap);
      if (!ns) {
        free(s);
        return NULL;
      }
      s = ns;
    }
    len += i < n ? pa_detok_push(&d, ids[i], s + len, cap - len - 1)
                 : pa_detok_flush(&d, s + len, cap - len - 1);
  }
  s[len] = '\0';
  if (out_len) *out_len = len;
  return s;
}
