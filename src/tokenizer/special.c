/* special.c: finding special tokens in the text before the model runs.
 *
 * Control (and unknown) tokens are matched when the caller asks for
 * parse_special; user-defined tokens always (as Hugging Face and llama.cpp
 * both do). Matching is leftmost-longest, as Hugging Face's added-token
 * matcher: the earliest position wins, and there the longest token. A byte
 * trie keeps that linear in the text for any number of special tokens. */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "tokenizer/tokenizer_internal.h"

static int32_t new_node(pa_special_trie *trie, uint8_t byte) {
  if (trie->n_nodes == trie->cap_nodes) {
    int32_t cap = trie->cap_nodes ? trie->cap_nodes * 2 : 1024;
    pa_trie_node *nodes = realloc(trie->nodes, (size_t)cap * sizeof *nodes);
    if (!nodes) return -1;
    trie->nodes = nodes;
    trie->cap_nodes = cap;
  }
  pa_trie_node *n = &trie->nodes[trie->n_nodes];
  n->first_child = n->next_sibling = n->token = -1;
  n->byte = byte;
  n->needs_parse_special = false;
  return trie->n_nodes++;
}

static int32_t child(const pa_special_trie *trie, int32_t node, uint8_t byte) {
  for (int32_t c = trie->nodes[node].first_child; c >= 0; c = trie->nodes[c].next_sibling)
    if (trie->nodes[c].byte == byte) return c;
  return -1;
}

static int insert(pa_special_trie *trie, const char *s, size_t n, int32_t token,
                  bool needs_parse_special) {
  int32_t node = trie->root_child[(uint8_t)s[0]];
  if (node < 0) {
    if ((node = new_node(trie, (uint8_t)s[0])) < 0) return PASADA_ERR_NOMEM;
    trie->root_child[(uint8_t)s[0]] = node;
  }
  for (size_t i = 1; i < n; i++) {
    int32_t c = child(trie, node, (uint8_t)s[i]);
    if (c < 0) {
      if ((c = new_node(trie, (uint8_t)s[i])) < 0) return PASADA_ERR_NOMEM;
      trie->nodes[c].next_sibling = trie->nodes[node].first_child;
      trie->nodes[node].first_child = c;
    }
    node = c;
  }
  if (trie->nodes[node].token < 0) { /* duplicate texts: the first id wins */
    trie->nodes[node].token = token;
    trie->nodes[node].needs_parse_special = needs_parse_special;
  }
  return PASADA_OK;
}

int pa_special_build(pa_tokenizer *t) {
  pa_special_trie *trie = &t->special;
  memset(trie, 0, sizeof *trie);
  for (int b = 0; b < 256; b++) trie->root_child[b] = -1;
  const int32_t named[] = {t->bos, t->eos, t->unk, t->pad, t->sep, t->eot, t->eom};
  for (int32_t id = 0; id < t->n_vocab; id++) {
    int ty = t->types[id];
    bool named_special = false;
    for (size_t k = 0; k < sizeof named / sizeof named[0]; k++) named_special |= named[k] == id;
    bool user = ty == PA_TOKEN_USER_DEFINED;
    bool control = ty == PA_TOKEN_CONTROL || ty == PA_TOKEN_UNKNOWN || named_special;
    if ((!user && !control) || pa_text_len(t, id) == 0) continue;
    const char *s = t->text_arena + t->text_off[id];
    size_t n = pa_text_len(t, id);
    /* SentencePiece matches on text whose spaces are "▁" already
     * (tokenize.c), so a piece spelled with spaces is stored that way. */
    char *spelled = NULL;
    if ((t->kind == PA_TOK_SPM || t->escape_spaces) && memchr(s, ' ', n)) {
      if (!(spelled = malloc(n * 3))) return pa_error(PASADA_ERR_NOMEM, "tokenizer: out of memory");
      size_t k = 0;
      for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ')
          memcpy(spelled + k, "\xE2\x96\x81", 3), k += 3;
        else
          spelled[k++] = s[i];
      }
      s = spelled;
      n = k;
    }
    int rc = insert(trie, s, n, id, !user);
    free(spelled);
    if (rc) return pa_error(PASADA_ERR_NOMEM, "tokenizer: out of memory for special tokens");
  }
  return PASADA_OK;
}

void pa_special_free(pa_special_trie *trie) {
  free(trie->nodes);
  trie->nodes = NULL;
  trie->n_nodes = trie->cap_nodes = 0;
}

int32_t pa_special_next(const pa_tokenizer *t, const char *text, size_t len, size_t from,
                        bool parse_special, size_t *at, size_t *match_len) {
  const pa_special_trie *trie = &t->special;
  if (trie->n_nodes == 0) return -1;
  for (size_t i = from; i < len; i++) {
    int32_t node = trie->root_child[(uint8_t)text[i]];
    int32_t best = -1;
    size_t best_len = 0;
    for (size_t j = i + 1; node >= 0; j++) {
      const pa_trie_node *n = &trie->nodes[node];
      if (n->token >= 0 && (parse_special || !n->needs_parse_special)) {
        best = n->token;
        best_len = j - i;
      }
      if (j >= len) break;
      node = child(trie, node, (uint8_t)text[j]);
    }
    if (best >= 0) {
      *at = i;
      *match_len = best_len;
      return best;
    }
  }
  return -1;
}
