/* spm.c: SentencePiece-style BPE (tokenizer.ggml.model "llama").
 *
 * Spaces become "▁" (with one prepended to each text at the start or after
 * a special token when the file asks for add_space_prefix; see
 * space_prefix_first for the other rule); the text starts as one symbol per UTF-8
 * character; then the adjacent pair whose concatenation is a token with the
 * highest score merges, leftmost first on ties, until no pair is a token.
 * Only normal and user-defined pieces take part, as in SentencePiece.
 * Symbols that are not tokens fall back to their bytes (<0xNN> tokens), or
 * to the unknown token when the vocabulary has no byte tokens. */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "tokenizer/tokenizer_internal.h"

typedef struct {
  uint32_t start, len; /* in the normalized text; len 0 = merged away */
  int32_t prev, next;
} symbol;

typedef struct {
  float score;
  int32_t left, right;
  uint32_t len;
} candidate;

typedef struct {
  const pa_tokenizer *t;
  const char *text;
  symbol *sym;
  pa_heap heap; /* of candidate */
} spm_state;

static bool mergeable(const pa_tokenizer *t, int32_t id) {
  return id >= 0 && (t->types[id] == PA_TOKEN_NORMAL || t->types[id] == PA_TOKEN_USER_DEFINED);
}

/* Higher score first; on equal scores the leftmost pair. */
static bool cand_before(const void *pa, const void *pb) {
  const candidate *a = pa, *b = pb;
  return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static int try_pair(spm_state *st, int32_t left) {
  if (left < 0) return PASADA_OK;
  int32_t right = st->sym[left].next;
  if (right < 0) return PASADA_OK;
  uint32_t len = st->sym[left].len + st->sym[right].len;
  int32_t id = pa_table_find(st->t, st->text + st->sym[left].start, len);
  if (!mergeable(st->t, id)) return PASADA_OK;
  candidate c = {st->t->scores[id], left, right, len};
  return pa_heap_push(&st->heap, &c);
}

static int emit_symbol(const pa_tokenizer *t, const char *s, uint32_t len, pa_ids *out) {
  int32_t id = pa_table_find(t, s, len);
  if (mergeable(t, id)) return pa_ids_push(out, id);
  for (uint32_t i = 0; i < len; i++) {
    int32_t b = t->byte_fallback[(uint8_t)s[i]];
    if (b < 0) { /* no byte tokens: the whole symbol is unknown */
      return t->unk >= 0 ? pa_ids_push(out, t->unk) : PASADA_OK;
    }
    int rc = pa_ids_push(out, b);
    if (rc) return rc;
  }
  return PASADA_OK;
}

int pa_spm_encode(const pa_tokenizer *t, const char *text, size_t len, bool at_start, pa_ids *out) {
  static const char space_mark[3] = {(char)0xE2, (char)0x96, (char)0x81}; /* U+2581 */
  if (len == 0) return PASADA_OK;
  size_t n_spaces = 0;
  for (size_t i = 0; i < len; i++) n_spaces += text[i] == ' ';
  if (len > (UINT32_MAX - 3) / 3)
    return pa_error(PASADA_ERR_ARG, "tokenizer: text of %zu bytes is too long", len);
  bool prefix = at_start && t->add_space_prefix &&
                !(t->space_prefix_first && (text[0] == ' ' || (len >= 3 && !memcmp(text, space_mark, 3))));
  size_t n_norm = 0;
  char *norm = malloc(len + 2 * n_spaces + 3);
  symbol *sym = malloc((len + 1) * sizeof *sym);
  if (!norm || !sym) {
    free(norm);
    free(sym);
    return pa_error(PASADA_ERR_NOMEM, "tokenizer: out of memory");
  }
  if (prefix) {
    memcpy(norm, space_mark, 3);
    n_norm = 3;
  }
  for (size_t i = 0; i < len; i++) {
    if (text[i] == ' ') {
      memcpy(norm + n_norm, space_mark, 3);
      n_norm += 3;
    } else {
      norm[n_norm++] = text[i];
    }
  }
  int32_t n = 0;
  for (size_t i = 0; i < n_norm;) {
    int cl = pa_utf8_valid_len((const unsigned char *)norm + i, n_norm - i);
    if (cl <= 0) cl = 1; /* an invalid byte is a symbol of its own */
    sym[n] = (symbol){(uint32_t)i, (uint32_t)cl, n - 1, -1};
    if (n > 0) sym[n - 1].next = n;
    n++;
    i += (size_t)cl;
  }
  spm_state st = {.t = t, .text = norm, .sym = sym, .heap = {.size = sizeof(candidate), .before = cand_before}};
  int rc = PASADA_OK;
  for (int32_t i = 0; i + 1 < n && !rc; i++) rc = try_pair(&st, i);
  while (!rc && st.heap.n > 0) {
    candidate c;
    pa_heap_pop(&st.heap, &c);
    symbol *l = &sym[c.left], *r = &sym[c.right];
    if (l->len == 0 || r->len == 0 || l->next != c.right || l->len + r->len != c.len) continue;
    l->len += r->len;
    l->next = r->next;
    if (r->next >= 0) sym[r->next].prev = c.left;
    r->len = 0;
    rc = try_pair(&st, l->prev);
    if (!rc) rc = try_pair(&st, c.left);
  }
  for (int32_t i = n > 0 ? 0 : -1; i >= 0 && !rc; i = sym[i].next)
    rc = emit_symbol(t, norm + sym[i].start, sym[i].len, out);
  pa_heap_free(&st.heap);
  free(sym);
  free(norm);
  return rc;
}
