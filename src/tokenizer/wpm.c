/* wpm.c: WordPiece, BERT's tokenizer (tokenizer.ggml.model "bert"), as Hugging
 * Face's BertNormalizer + BertPreTokenizer + WordPiece do it:
 *   normalize: drop NUL, U+FFFD and control characters (but \t \n \r), turn
 *     whitespace into ' ', put spaces around CJK ideographs, strip accents
 *     (NFD, non-spacing marks dropped) and lowercase each character (as
 *     tokenizer.ggml.normalizer.lowercase and .strip_accents say: both by
 *     default, lowercasing alone, or neither for a cased model);
 *   pre-tokenize: split at whitespace (dropped) and around each punctuation
 *     character (general category P*, and the ASCII symbols);
 *   each word: greedy longest match first from its start, the pieces after
 *     the first being continuations; a word longer than 100 characters, or
 *     one that a piece cannot continue, is the unknown token as a whole.
 * The vocabulary is in llama.cpp's spelling: a word-initial piece is
 * "\u2581" + its text, a continuation its bare text (Hugging Face's "##"
 * dropped). The Unicode tables are generated (wpm_tables.h). */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "tokenizer/tokenizer_internal.h"
#include "tokenizer/wpm_tables.h"

#define WPM_MAX_WORD_CHARS 100 /* Hugging Face's max_input_chars_per_word */

static bool in_ranges(const uint32_t (*r)[2], size_t n, uint32_t cp) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (cp < r[mid][0])
      hi = mid;
    else if (cp > r[mid][1])
      lo = mid + 1;
    else
      return true;
  }
  return false;
}
#define IN(table, cp) in_ranges(table, sizeof table / sizeof table[0], cp)

static bool is_control(uint32_t c) {
  return c != '\t' && c != '\n' && c != '\r' && IN(WPM_CONTROL, c);
}

static bool is_punct(uint32_t c) {
  return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
         (c >= 123 && c <= 126) || IN(WPM_PUNCT, c);
}

static bool is_cjk(uint32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

static const char *fold_of(uint32_t c) {
  size_t lo = 0, hi = sizeof WPM_FOLD / sizeof WPM_FOLD[0];
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (c < WPM_FOLD[mid].cp)
      hi = mid;
    else if (c > WPM_FOLD[mid].cp)
      lo = mid + 1;
    else
      return WPM_FOLD[mid].to;
  }
  return NULL;
}

typedef struct {
  uint32_t *v;
  size_t n, cap;
} cps;

static bool cps_push(cps *c, uint32_t cp) {
  if (c->n == c->cap) {
    size_t cap = c->cap ? c->cap * 2 : 64;
    uint32_t *v = realloc(c->v, cap * sizeof *v);
    if (!v) return false;
    c->v = v, c->cap = cap;
  }
  c->v[c->n++] = cp;
  return true;
}

/* Appends code point c after the normalizer's accent stripping and
 * lowercasing (each as the vocabulary says: both, lowercasing alone, or
 * neither). */
static bool push_folded(const pa_tokenizer *t, cps *out, uint32_t c) {
  if (!t->strip_accents) {
    uint32_t low[3] = {c};
    const int m = t->lowercase ? pa_lowercase(c, low) : 1;
    for (int k = 0; k < m; k++)
      if (!cps_push(out, low[k])) return false;
    return true;
  }
  if (c >= 0xAC00 && c <= 0xD7A3) { /* a Hangul syllable: its jamo (NFD) */
    const uint32_t s = c - 0xAC00, l = 0x1100 + s / 588, v = 0x1161 + (s % 588) / 28, t = s % 28;
    return cps_push(out, l) && cps_push(out, v) && (t == 0 || cps_push(out, 0x11A7 + t));
  }
  if (IN(WPM_MARK, c)) return true;
  const char *f = fold_of(c);
  if (!f) return cps_push(out, c);
  for (size_t i = 0, n = strlen(f); i < n;) {
    uint32_t cp;
    int k = pa_utf8_decode((const unsigned char *)f + i, n - i, &cp);
    if (k <= 0 || !cps_push(out, cp)) return false;
    i += (size_t)k;
  }
  return true;
}

/* The pieces of one word (w[0..n) code points) into ids. */
static int encode_word(const pa_tokenizer *t, const uint32_t *w, size_t n, pa_ids *ids) {
  if (n > WPM_MAX_WORD_CHARS) return pa_ids_push(ids, t->unk);
  char buf[3 + WPM_MAX_WORD_CHARS * 4];
  size_t off[WPM_MAX_WORD_CHARS + 1]; /* byte offset of each character after the "\u2581" */
  memcpy(buf, "\xE2\x96\x81", 3);
  off[0] = 3;
  for (size_t i = 0; i < n; i++) off[i + 1] = off[i] + pa_utf8_encode(w[i], buf + off[i]);
  const size_t mark = ids->n;
  for (size_t start = 0; start < n;) {
    int32_t id = -1;
    size_t end = n;
    for (; end > start; end--) {
      const size_t from = start == 0 ? 0 : off[start]; /* a word-initial piece keeps the "\u2581" */
      if ((id = pa_table_find(t, buf + from, off[end] - from)) >= 0 &&
          t->types[id] != PA_TOKEN_CONTROL)
        break;
      id = -1;
    }
    if (id < 0) { /* no piece continues here: the whole word is unknown */
      ids->n = mark;
      return pa_ids_push(ids, t->unk);
    }
    int rc = pa_ids_push(ids, id);
    if (rc) return rc;
    start = end;
  }
  return PASADA_OK;
}

int pa_wpm_encode(const pa_tokenizer *t, const char *text, size_t len, pa_ids *out) {
  cps norm = {0};
  bool ok = true;
  for (size_t i = 0; i < len && ok;) {
    uint32_t c;
    int k = pa_utf8_decode((const unsigned char *)text + i, len - i, &c);
    if (k <= 0) { /* a byte that is not UTF-8: as U+FFFD, which the normalizer drops */
      i++;
      continue;
    }
    i += (size_t)k;
    if (c == 0 || c == 0xFFFD || is_control(c)) continue;
    if (pa_is_white_space(c))
      ok = cps_push(&norm, ' ');
    else if (is_cjk(c))
      ok = cps_push(&norm, ' ') && push_folded(t, &norm, c) && cps_push(&norm, ' ');
    else
      ok = push_folded(t, &norm, c);
  }
  int rc = ok ? PASADA_OK : pa_error(PASADA_ERR_NOMEM, "tokenizer: out of memory");
  /* words: runs of neither whitespace nor punctuation; each punctuation
   * character a word of its own */
  for (size_t i = 0; !rc && i < norm.n;) {
    const uint32_t c = norm.v[i];
    if (pa_is_white_space(c)) {
      i++;
      continue;
    }
    size_t j = i + 1;
    if (!is_punct(c))
      while (j < norm.n && !pa_is_white_space(norm.v[j]) && !is_punct(norm.v[j])) j++;
    rc = encode_word(t, norm.v + i, j - i, out);
    i = j;
  }
  free(norm.v);
  return rc;
}
