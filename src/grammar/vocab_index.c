/* vocab_index.c: the vocabulary as the token mask walks it: every token,
 * spelled as grammars match it (text, or a special token's reserved
 * sequence), sorted by its bytes, with the length of the prefix each
 * shares with the one before. Walking in that order advances a parse state
 * once per trie node (a shared prefix is matched once) and skips all the
 * tokens below a prefix the grammar rejects. Built once per tokenizer, on
 * first use, and kept with it. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "grammar/grammar.h"
#include "tokenizer/tokenizer_internal.h"

typedef struct {
  uint64_t key; /* the first 8 bytes, big-endian: most comparisons end here */
  int32_t id;
} sort_item;

static const pa_tokenizer *sort_tok; /* qsort has no context argument */

bool pa_gvocab_is_special(const pa_tokenizer *t, int32_t id) {
  const int ty = t->types[id];
  return ty == PA_TOKEN_CONTROL || ty == PA_TOKEN_UNKNOWN || ty == PA_TOKEN_UNUSED ||
         pa_piece_len(t, id) == 0 || pa_tokenizer_is_eog(t, id);
}

size_t pa_gvocab_spelling(const pa_tokenizer *t, int32_t id, uint8_t tmp[PA_G_SPECIAL_LEN],
                          const uint8_t **p) {
  if (!pa_gvocab_is_special(t, id)) {
    *p = (const uint8_t *)t->piece_arena + t->piece_off[id];
    return pa_piece_len(t, id);
  }
  const uint32_t u = (uint32_t)id;
  tmp[0] = 0xFF;
  for (int k = 0; k < 4; k++) tmp[1 + k] = (uint8_t)(0x80 | (u >> (18 - 6 * k) & 0x3F));
  *p = tmp;
  return PA_G_SPECIAL_LEN;
}

static int cmp_items(const void *pa, const void *pb) {
  const sort_item *a = pa, *b = pb;
  if (a->key != b->key) return a->key < b->key ? -1 : 1;
  uint8_t ta[PA_G_SPECIAL_LEN], tb[PA_G_SPECIAL_LEN];
  const uint8_t *sa, *sb;
  const size_t na = pa_gvocab_spelling(sort_tok, a->id, ta, &sa),
               nb = pa_gvocab_spelling(sort_tok, b->id, tb, &sb);
  const size_t n = na < nb ? na : nb;
  const int c = n > 8 ? memcmp(sa + 8, sb + 8, n - 8) : 0;
  if (c) return c;
  if (na != nb) return na < nb ? -1 : 1;
  return a->id < b->id ? -1 : a->id > b->id;
}

/* Text tokens holding 0xFF or 0xFE stay out: they could spell a special
 * token's or a negated reference's sequence byte by byte, and no grammar's
 * text matches them anyway (UTF-8 holds neither byte). */
static bool in_index(const pa_tokenizer *t, int32_t id) {
  if (pa_gvocab_is_special(t, id)) return true;
  const uint8_t *p = (const uint8_t *)t->piece_arena + t->piece_off[id];
  const size_t n = pa_piece_len(t, id);
  return memchr(p, 0xFF, n) == NULL && memchr(p, PA_G_NEG_BYTE, n) == NULL;
}

/* When p[0..n) is a sequence of whole, well-formed UTF-8 characters
 * (shortest forms, no surrogates, at most U+10FFFF), at most 127 of them,
 * whose ASCII ones are printable and neither " nor \ (a JSON string's
 * plain characters): how many, plus 128 when some take several bytes.
 * Else 0. */
static uint8_t plain_chars(const uint8_t *p, size_t n) {
  size_t count = 0;
  bool multi = false;
  for (size_t i = 0; i < n; count++) {
    const uint8_t c = p[i];
    size_t k;
    uint8_t lo = 0x80, hi = 0xBF; /* the second byte's range */
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7F || c == '"' || c == '\\') return 0;
      i++;
      continue;
    }
    multi = true;
    if (c >= 0xC2 && c <= 0xDF) {
      k = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      k = 2;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      k = 3;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return 0;
    }
    if (i + k >= n) return 0; /* cut off */
    if (p[i + 1] < lo || p[i + 1] > hi) return 0;
    for (size_t j = 2; j <= k; j++)
      if (p[i + j] < 0x80 || p[i + j] > 0xBF) return 0;
    i += k + 1;
  }
  return count <= 127 ? (uint8_t)(count | (multi ? 128 : 0)) : 0;
}

static pa_gvocab *build(const pa_tokenizer *t) {
  const int32_t n = t->n_vocab;
  pa_gvocab *v = calloc(1, sizeof *v);
  sort_item *items = malloc(((size_t)n + 1) * sizeof *items);
  if (!v || !items) goto fail;
  v->n_vocab = n;
  int32_t m = 0;
  size_t total = 0;
  for (int32_t id = 0; id < n; id++) {
    if (!in_index(t, id)) continue;
    uint8_t tmp[PA_G_SPECIAL_LEN];
    const uint8_t *p;
    const size_t len = pa_gvocab_spelling(t, id, tmp, &p);
    uint64_t key = 0;
    for (size_t i = 0; i < 8; i++) key = key << 8 | (i < len ? p[i] : 0);
    items[m++] = (sort_item){key, id};
    total += len;
  }
  /* One at a time: sort_tok is the comparison's context. */
  static pthread_mutex_t sort_lock = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&sort_lock);
  sort_tok = t;
  qsort(items, (size_t)m, sizeof *items, cmp_items);
  pthread_mutex_unlock(&sort_lock);

  v->n_sorted = m;
  v->sorted_id = malloc(((size_t)m + 1) * sizeof *v->sorted_id);
  v->off = malloc(((size_t)m + 1) * sizeof *v->off);
  v->bytes = malloc(total + 1);
  v->lcp = malloc((size_t)m + 1);
  v->skip = malloc(((size_t)m + 1) * sizeof *v->skip);
  v->byteset = calloc((size_t)m + 1, sizeof *v->byteset);
  v->plain_chars = malloc((size_t)m + 1);
  v->rank = malloc(((size_t)n + 1) * sizeof *v->rank);
  v->eog = malloc(((size_t)n + 1) * sizeof *v->eog);
  if (!v->sorted_id || !v->off || !v->bytes || !v->lcp || !v->skip || !v->byteset ||
      !v->plain_chars || !v->rank || !v->eog)
    goto fail;
  for (int32_t id = 0; id < n; id++) v->rank[id] = -1;
  size_t off = 0;
  for (int32_t r = 0; r < m; r++) {
    int32_t id = items[r].id;
    uint8_t tmp[PA_G_SPECIAL_LEN];
    const uint8_t *p;
    const size_t len = pa_gvocab_spelling(t, id, tmp, &p);
    v->sorted_id[r] = id;
    v->rank[id] = r;
    v->off[r] = (uint32_t)off;
    memcpy(v->bytes + off, p, len);
    for (size_t i = 0; i < len; i++)
      v->byteset[r][v->bytes[off + i] >> 6] |= 1ull << (v->bytes[off + i] & 63);
    v->plain_chars[r] = plain_chars(v->bytes + off, len);
    uint32_t l = 0;
    if (r > 0) {
      const uint8_t *a = v->bytes + v->off[r - 1], *b = v->bytes + off;
      uint32_t na = (uint32_t)(off - v->off[r - 1]);
      while (l < na && l < len && l < 255 && a[l] == b[l]) l++;
    }
    v->lcp[r] = (uint8_t)l;
    off += len;
    if (len > v->max_len) v->max_len = (uint32_t)len;
  }
  v->off[m] = (uint32_t)off;
  pa_gskip_build(v->lcp, (uint32_t)m, v->skip);
  for (int32_t id = 0; id < n; id++)
    if (pa_tokenizer_is_eog(t, id)) v->eog[v->n_eog++] = id;
  free(items);
  return v;
fail:
  free(items);
  pa_gvocab_free(v);
  return NULL;
}

const pa_gvocab *pa_gvocab_get(const pa_tokenizer *tok) {
  pa_tokenizer *t = (pa_tokenizer *)tok; /* the cache slot is the only field written */
  pa_gvocab *v = atomic_load_explicit(&t->grammar_vocab, memory_order_acquire);
  if (v) return v;
  pa_gvocab *made = build(tok);
  if (!made) return NULL;
  pa_gvocab *expected = NULL;
  if (atomic_compare_exchange_strong_explicit(&t->grammar_vocab, &expected, made,
                                              memory_order_acq_rel, memory_order_acquire))
    return made;
  pa_gvocab_free(made); /* another thread built it first */
  return expected;
}

void pa_gvocab_free(pa_gvocab *v) {
  if (!v) return;
  free(v->sorted_id);
  free(v->off);
  free(v->bytes);
  free(v->lcp);
  free(v->skip);
  free(v->byteset);
  free(v->plain_chars);
  free(v->rank);
  free(v->eog);
  free(v);
}
