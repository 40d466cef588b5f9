/* bpe.c: byte-level BPE (tokenizer.ggml.model "gpt2").
 *
 * Each pre-token's bytes start as single-byte tokens; then the adjacent pair
 * of lowest merge rank is merged, leftmost first on ties, until no pair has a
 * merge (Hugging Face's BPE). Merges are looked up by token-id pair in a hash
 * table built once at load, and the candidates sit in a binary heap, so a
 * word of n bytes costs O(n log n) however long it is. */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "format/gguf.h"
#include "tokenizer/tokenizer_internal.h"

/* ---- the GPT-2 byte <-> code point map ----
 * Printable Latin-1 bytes (! to ~, ¡ to ¬, ® to ÿ) stand for themselves; the
 * other 68 bytes map, in order, to U+0100 onwards. */
static bool byte_is_printable(int b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

/* The 68 others, in order: 0x00-0x20 (33), 0x7F-0xA0 (34), 0xAD (1). */
uint32_t pa_gpt2_byte_to_cp(uint8_t b) {
  if (byte_is_printable(b)) return b;
  if (b <= 0x20) return 0x100 + b;
  if (b <= 0xA0) return 0x100 + 33 + (b - 0x7F);
  return 0x100 + 67; /* 0xAD */
}

int pa_gpt2_cp_to_byte(uint32_t cp) {
  if (cp < 0x100) return byte_is_printable((int)cp) ? (int)cp : -1;
  uint32_t n = cp - 0x100;
  if (n < 33) return (int)n;
  if (n < 67) return (int)(0x7F + n - 33);
  return n == 67 ? 0xAD : -1;
}

/* ---- merge table ---- */

static uint64_t pair_key(int32_t l, int32_t r) {
  return ((uint64_t)(uint32_t)l << 32 | (uint32_t)r) + 1;
}

static uint64_t mix64(uint64_t x) {
  x ^= x >> 31;
  x *= 0x9e3779b97f4a7c15ull;
  x ^= x >> 29;
  return x;
}

static bool merge_find(const pa_merge_table *m, int32_t l, int32_t r, int32_t *rank,
                       int32_t *result) {
  if (!m->slots) return false;
  uint64_t key = pair_key(l, r);
  for (uint64_t i = mix64(key) & m->mask;; i = (i + 1) & m->mask) {
    uint32_t s = m->slots[i];
    if (s == 0) return false;
    if (m->key[s - 1] == key) {
      *rank = (int32_t)(s - 1);
      *result = m->result[s - 1];
      return true;
    }
  }
}

int pa_bpe_build_merges(pa_tokenizer *t, const void *value) {
  const gguf_value *merges = value;
  uint64_t n = merges->arr.count;
  if (n >= INT32_MAX) return pa_error(PASADA_ERR_FORMAT, "tokenizer.ggml.merges is too long");
  uint64_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  pa_merge_table *m = &t->merges;
  m->slots = calloc(cap, sizeof *m->slots);
  m->key = malloc((n ? n : 1) * sizeof *m->key);
  m->result = malloc((n ? n : 1) * sizeof *m->result);
  if (!m->slots || !m->key || !m->result)
    return pa_error(PASADA_ERR_NOMEM, "tokenizer: out of memory for merges");
  m->mask = cap - 1;
  char *buf = NULL;
  size_t buf_cap = 0;
  for (uint64_t k = 0; k < n; k++) {
    const gguf_str *s = &merges->arr.strs[k];
    const char *sp = s->len > 1 ? memchr(s->ptr + 1, ' ', s->len - 1) : NULL;
    if (!sp) {
      free(buf);
      return pa_error(PASADA_ERR_FORMAT,
                      "tokenizer.ggml.merges[%llu] is not two tokens separated by a space",
                      (unsigned long long)k);
    }
    size_t ln = (size_t)(sp - s->ptr), rn = s->len - ln - 1;
    int32_t l = pa_table_find(t, s->ptr, ln), r = pa_table_find(t, sp + 1, rn);
    if (ln + rn > buf_cap) {
      buf_cap = (ln + rn) * 2;
      char *nb = realloc(buf, buf_cap);
      if (!nb) {
        free(buf);
        return pa_error(PASADA_ERR_NOMEM, "tokenizer: out of memory for merges");
      }
      buf = nb;
    }
    memcpy(buf, s->ptr, ln);
    memcpy(buf + ln, sp + 1, rn);
    int32_t res = l >= 0 && r >= 0 ? pa_table_find(t, buf, ln + rn) : -1;
    if (res < 0) {
      free(buf);
      return pa_error(PASADA_ERR_FORMAT, "tokenizer.ggml.merges[%llu] '%.*s' %s",
                      (unsigned long long)k, (int)(s->len > 80 ? 80 : s->len), s->ptr,
                      l < 0 || r < 0 ? "names a part that is not a token"
                                     : "merges into a string that is not a token");
    }
    uint64_t key = pair_key(l, r), i = mix64(key) & m->mask;
    m->key[k] = key;
    m->result[k] = res;
    while (m->slots[i] != 0 && m->key[m->slots[i] - 1] != key) i = (i + 1) & m->mask;
    if (m->slots[i] == 0) m->slots[i] = (uint32_t)k + 1; /* a repeated pair keeps its first (lowest) rank */
  }
  free(buf);
  /* Single bytes: the token spelled by each byte's code point. */
  for (int b = 0; b < 256; b++) {
    char u[4];
    size_t un = pa_utf8_encode(pa_gpt2_byte_to_cp((uint8_t)b), u);
    t->byte_token[b] = pa_table_find(t, u, un);
  }
  return PASADA_OK;
}

void pa_bpe_free(pa_tokenizer *t) {
  free(t->merges.slots);
  free(t->merges.key);
  free(t->merges.result);
  memset(&t->merges, 0, sizeof t->merges);
}

/* ---- encoding ---- */

typedef struct {
  int32_t id, prev, next;
} symbol;

typedef struct {
  int32_t rank, left, right, left_id, right_id;
} candidate;

typedef struct {
  const pa_tokenizer *t;
  pa_ids *out;
  symbol *sym;
  pa_heap heap; /* of candidate */
  size_t sym_cap;
  char *spelled; /* the byte-level spelling of a word (ignore_merges) */
  size_t spelled_cap;
} bpe_state;

static bool cand_less(const void *pa, const void *pb) {
  const candidate *a = pa, *b = pb;
  return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static int try_pair(bpe_state *st, int32_t left) {
  if (left < 0) return PASADA_OK;
  int32_t right = st->sym[left].next;
  if (right < 0 || st->sym[left].id < 0 || st->sym[right].id < 0)
    return PASADA_OK; /* raw_bpe: no token */
  int32_t rank, result;
  if (!merge_find(&st->t->merges, st->sym[left].id, st->sym[right].id, &rank, &result))
    return PASADA_OK;
  candidate c = {rank, left, right, st->sym[left].id, st->sym[right].id};
  return pa_heap_push(&st->heap, &c);
}

/* ignore_merges: a word that is a token as a whole is that token. */
static int32_t whole_word(bpe_state *st, const char *s, size_t len) {
  if (len * 2 > st->spelled_cap) {
    size_t cap = len * 2 + 16;
    char *b = realloc(st->spelled, cap);
    if (!b) return -1;
    st->spelled = b;
    st->spelled_cap = cap;
  }
  size_t n = 0;
  for (size_t i = 0; i < len; i++)
    n += pa_utf8_encode(pa_gpt2_byte_to_cp((uint8_t)s[i]), st->spelled + n);
  return pa_table_find(st->t, st->spelled, n);
}

static int merge_all(bpe_state *st, int32_t n);

/* The length of the UTF-8 sequence a lead byte starts (0: not a lead byte). */
static size_t utf8_len(uint8_t c) {
  return c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
}

/* raw_bpe: the word's UTF-8 characters are the symbols; one that is no
 * token (id -2 - its byte offset) merges with nothing and comes out as its
 * bytes' <0xNN> tokens (a byte without one is dropped, as llama.cpp does);
 * with Gemma 4's rules a word of newlines only that is a token is that
 * token. */
static int raw_bpe_word(bpe_state *st, const char *s, size_t len) {
  const pa_tokenizer *t = st->t;
  size_t nl = 0;
  while (t->gemma4_rules && nl < len && s[nl] == '\n') nl++;
  if (t->gemma4_rules && nl == len) {
    int32_t id = pa_table_find(t, s, len);
    if (id >= 0) return pa_ids_push(st->out, id);
  }
  int32_t n = 0;
  for (size_t i = 0; i < len;) {
    size_t cl = utf8_len((uint8_t)s[i]);
    if (cl == 0 || cl > len - i) cl = 1;
    int32_t id = pa_table_find(t, s + i, cl);
    st->sym[n] = (symbol){id >= 0 ? id : -2 - (int32_t)i, n - 1, -1};
    if (n > 0) st->sym[n - 1].next = n;
    n++;
    i += cl;
  }
  int rc = merge_all(st, n);
  for (int32_t i = n > 0 ? 0 : -1; !rc && i >= 0; i = st->sym[i].next) {
    const int32_t id = st->sym[i].id;
    if (id >= 0) {
      rc = pa_ids_push(st->out, id);
      continue;
    }
    const size_t at = (size_t)(-2 - id);
    size_t cl = utf8_len((uint8_t)s[at]);
    if (cl == 0 || cl > len - at) cl = 1;
    for (size_t k = 0; !rc && k < cl; k++) {
      const int32_t b = t->byte_fallback[(uint8_t)s[at + k]];
      if (b >= 0) rc = pa_ids_push(st->out, b);
    }
  }
  return rc;
}

static int bpe_word(void *ctx, const char *s, size_t len) {
  bpe_state *st = ctx;
  const pa_tokenizer *t = st->t;
  if (t->drop_whitespace) { /* the pre-tokenizer's gaps are runs of whitespace */
    uint32_t c;
    if (pa_utf8_decode((const unsigned char *)s, len, &c) > 0 && pa_is_white_space(c))
      return PASADA_OK;
  }
  if (t->ignore_merges) {
    int32_t id = whole_word(st, s, len);
    if (id >= 0) return pa_ids_push(st->out, id);
  }
  if (len > st->sym_cap) {
    symbol *sym = realloc(st->sym, len * sizeof *sym);
    if (!sym) return pa_error(PASADA_ERR_NOMEM, "tokenizer: out of memory");
    st->sym = sym;
    st->sym_cap = len;
  }
  int32_t n = 0;
  if (pa_raw_bpe(t)) return raw_bpe_word(st, s, len);
  for (size_t i = 0; i < len; i++) {
    int32_t id = t->byte_token[(uint8_t)s[i]];
    /* A vocabulary without this byte (SmolLM2 lacks 0x1D): the byte is
     * dropped, as Hugging Face's BPE without an unk_token does. */
    if (id < 0) continue;
    st->sym[n] = (symbol){id, n - 1, -1};
    if (n > 0) st->sym[n - 1].next = n;
    n++;
  }
  int rc = merge_all(st, n);
  for (int32_t i = n > 0 ? 0 : -1; !rc && i >= 0; i = st->sym[i].next) rc = pa_ids_push(st->out, st->sym[i].id);
  return rc;
}

/* Merges the n symbols of st->sym, lowest rank first (ties: leftmost). */
static int merge_all(bpe_state *st, int32_t n) {
  const pa_tokenizer *t = st->t;
  st->heap.n = 0;
  for (int32_t i = 0; i + 1 < n; i++) {
    int rc = try_pair(st, i);
    if (rc) return rc;
  }
  while (st->heap.n > 0) {
    candidate c;
    pa_heap_pop(&st->heap, &c);
    symbol *l = &st->sym[c.left];
    if (l->id != c.left_id || l->next != c.right || st->sym[c.right].id != c.right_id) continue;
    int32_t rank, result;
    merge_find(&t->merges, c.left_id, c.right_id, &rank, &result);
    symbol *r = &st->sym[c.right];
    l->id = result;
    l->next = r->next;
    if (r->next >= 0) st->sym[r->next].prev = c.left;
    r->id = -1; /* dead: no candidate will match it again */
    r->next = -1;
    int rc = try_pair(st, l->prev);
    if (!rc) rc = try_pair(st, c.left);
    if (rc) return rc;
  }
  return PASADA_OK;
}

int pa_bpe_encode(const pa_tokenizer *t, const char *text, size_t len, pa_ids *out) {
  bpe_state st = {.t = t, .out = out, .heap = {.size = sizeof(candidate), .before = cand_less}};
  char *lower = NULL;
  if (t->lowercase) { /* a lowercase takes at most 1.5 times the bytes (U+0130, U+023A: 2 -> 3) */
    if (len > (SIZE_MAX - 1) / 3 || !(lower = malloc(len * 3 + 1)))
      return pa_error(PASADA_ERR_NOMEM, "tokenizer: out of memory for %zu bytes", len);
    size_t n = 0;
    for (size_t i = 0; i < len;) {
      uint32_t c;
      int cl = pa_utf8_decode((const unsigned char *)text + i, len - i, &c);
      if (cl <= 0) { /* an invalid byte stays as it is */
        lower[n++] = text[i++];
        continue;
      }
      uint32_t low[3];
      for (int k = 0, m = pa_lowercase(c, low); k < m; k++) n += pa_utf8_encode(low[k], lower + n);
      i += (size_t)cl;
    }
    text = lower;
    len = n;
  }
  int rc = pa_pretok_split(t->pretok, text, len, bpe_word, &st);
  free(lower);
  free(st.sym);
  pa_heap_free(&st.heap);
  free(st.spelled);
  return rc;
}
