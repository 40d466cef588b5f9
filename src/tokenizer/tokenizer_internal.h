/* tokenizer_internal.h: the loaded vocabulary shared by the tokenizer's files
 * (vocab.c loads and validates it; bpe.c, spm.c, pretok.c, special.c encode;
 * detok.c decodes). Nothing here is part of the engine's interface. After
 * pa_tokenizer_load returns, the struct is read-only, so any number of threads
 * may tokenize and detokenize at once (each call owns its scratch memory). */
#ifndef PASADA_TOKENIZER_INTERNAL_H
#define PASADA_TOKENIZER_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer/tokenizer.h"

typedef enum { PA_TOK_BPE = 1, PA_TOK_SPM = 2, PA_TOK_WPM = 3 /* WordPiece (BERT) */ } pa_tok_kind;

#define PA_PRETOK_MAX_REGEX 6
#define PA_EOG_MAX 16

/* Open-addressing table from a byte string to a token id (stored texts). */
typedef struct {
  int32_t *slots; /* token id or -1 */
  uint64_t mask;
} pa_str_table;

/* Merge table of byte-level BPE: (left id, right id) -> rank and result id.
 * The merges sit in rank order in dense arrays; the open-addressing slots
 * hold only a rank (4 bytes a slot rather than 16). */
typedef struct {
  uint32_t *slots; /* rank + 1 of the merge stored there; 0 = empty */
  uint64_t *key;   /* [rank] ((uint64_t)left << 32 | right) + 1 */
  int32_t *result; /* [rank] the merged token */
  uint64_t mask;
} pa_merge_table;

/* Trie of the tokens matched whole in the text before the model runs:
 * control (and unknown) tokens when parse_special, user-defined always. */
typedef struct {
  int32_t first_child, next_sibling;
  int32_t token; /* -1 when no token ends here */
  uint8_t byte;
  bool needs_parse_special;
} pa_trie_node;

typedef struct {
  pa_trie_node *nodes;
  int32_t n_nodes, cap_nodes;
  int32_t root_child[256]; /* children of the root, by first byte */
} pa_special_trie;

typedef struct pa_pretok pa_pretok; /* pretok.c */

struct pa_tokenizer {
  pa_tok_kind kind;
  char model_name[32];
  char pre_name[64];
  int32_t n_vocab;

  /* Token texts exactly as the file spells them, in one arena: the text of
   * id is text_arena[text_off[id] .. text_off[id + 1] - 1), followed by a
   * NUL (n_vocab + 1 offsets; the arena is checked to fit 32 bits). */
  char *text_arena;
  uint32_t *text_off;
  float *scores; /* NULL for BPE without scores */
  uint8_t *types;
  pa_str_table by_text;

  /* What each token decodes to (bytes): byte-level decoded for BPE, with
   * "▁" -> ' ' and <0xNN> -> byte for SPM; control tokens keep their text. */
  char *piece_arena;
  uint32_t *piece_off; /* n_vocab + 1: piece_arena[piece_off[id] .. piece_off[id + 1]) */
  size_t max_push_output; /* the most one pa_detok_push can write */

  int32_t bos, eos, unk, pad, sep, eot, eom;
  bool add_bos, add_eos, add_space_prefix;
  /* SPM: the space prefix goes before the text at the start only, and not
   * when that text begins with a space (Hugging Face's Metaspace,
   * prepend_scheme "first"; key pasada.tokenizer.space_prefix_first);
   * otherwise before every text after the start or a special token, as
   * llama.cpp and SentencePiece-converted legacy tokenizers do. */
  bool space_prefix_first;
  bool add_sep; /* append the separator (BERT's [SEP]) after the text */
  int32_t eog[PA_EOG_MAX];
  int n_eog;

  pa_special_trie special;

  /* BPE */
  pa_merge_table merges;
  int32_t byte_token[256]; /* token of each single byte (-1 when missing) */
  bool ignore_merges;      /* a pre-token that is itself a token is kept whole */
  /* spaces become "\u2581" before merging and turn back into spaces when
   * decoding (Gemma 4, Sarvam) */
  bool escape_spaces;
  /* Gemma 4's own rules: BOS always first; a run of newlines that is a
   * token stays whole */
  bool gemma4_rules;
  /* tokenizer.ggml.model "whitespace" (Jina's v2 zh): whitespace separates
   * pre-tokens and is dropped, as Hugging Face's Whitespace pre-tokenizer
   * does */
  bool drop_whitespace;
  /* lowercase each character first (tokenizer.ggml.normalizer.lowercase:
   * the "whitespace" model, false by default; WordPiece, true by default) */
  bool lowercase;
  /* WordPiece: strip accents (NFD, marks dropped) before lowercasing
   * (tokenizer.ggml.normalizer.strip_accents; default: lowercase) */
  bool strip_accents;
  pa_pretok *pretok;

  /* SPM */
  int32_t byte_fallback[256]; /* <0xNN> tokens (-1 when missing) */

  /* The vocabulary sorted for grammar masks (src/grammar/vocab_index.c),
   * made on first use; the one field written after load (atomically). */
  struct pa_gvocab *_Atomic grammar_vocab;
};

/* BPE over the text's UTF-8 characters instead of the byte-level map (the
 * SentencePiece-style BPE of Gemma 4 and Sarvam, and the "whitespace"
 * model): a character that is no token becomes its <0xNN> tokens */
static inline bool pa_raw_bpe(const pa_tokenizer *t) {
  return t->escape_spaces || t->drop_whitespace; /* set for BPE vocabularies only */
}

static inline size_t pa_text_len(const pa_tokenizer *t, int32_t id) {
  return t->text_off[id + 1] - t->text_off[id] - 1;
}
static inline size_t pa_piece_len(const pa_tokenizer *t, int32_t id) {
  return t->piece_off[id + 1] - t->piece_off[id];
}

/* Growable id vector used by the encoders. */
typedef struct {
  int32_t *v;
  size_t n, cap;
} pa_ids;
int pa_ids_push(pa_ids *ids, int32_t id);

/* vocab.c */
uint64_t pa_hash_bytes(const char *s, size_t n);
int32_t pa_table_find(const pa_tokenizer *t, const char *s, size_t n);

/* special.c */
int pa_special_build(pa_tokenizer *t);
void pa_special_free(pa_special_trie *trie);
/* Finds the leftmost-longest special token in text[from..len). On success
 * sets *at, *match_len and returns the token id; -1 when none. */
int32_t pa_special_next(const pa_tokenizer *t, const char *text, size_t len, size_t from,
                        bool parse_special, size_t *at, size_t *match_len);

/* pretok.c: the pre-tokenizer regexes of byte-level BPE vocabularies. */
int pa_pretok_create(const char *pre_name, pa_pretok **out, bool *ignore_merges);
void pa_pretok_free(pa_pretok *p);
/* Calls emit(ctx, start, len) for each pre-token of text[0..len), in order;
 * stops at and returns the first non-zero value emit returns. */
typedef int (*pa_pretok_emit)(void *ctx, const char *s, size_t len);
int pa_pretok_split(const pa_pretok *p, const char *text, size_t len, pa_pretok_emit emit,
                    void *ctx);

/* bpe.c */
int pa_bpe_build_merges(pa_tokenizer *t, const void *merges_value /* gguf_value */);
void pa_bpe_free(pa_tokenizer *t);
int pa_bpe_encode(const pa_tokenizer *t, const char *text, size_t len, pa_ids *out);
/* The GPT-2 byte <-> code point map. */
uint32_t pa_gpt2_byte_to_cp(uint8_t b);
int pa_gpt2_cp_to_byte(uint32_t cp); /* -1 when cp is not in the map */

/* spm.c */
int pa_spm_encode(const pa_tokenizer *t, const char *text, size_t len, bool at_start, pa_ids *out);
/* wpm.c: WordPiece (BERT's normalizer, pre-tokenizer and greedy pieces). */
int pa_wpm_encode(const pa_tokenizer *t, const char *text, size_t len, pa_ids *out);

/* detok.c */
int pa_pieces_build(pa_tokenizer *t);

/* UTF-8 helpers. */
/* Length of the valid UTF-8 sequence at s[0..n) (1..4), or 0 when the bytes
 * there do not start a valid, complete sequence. */
int pa_utf8_valid_len(const unsigned char *s, size_t n);
/* Length of a UTF-8 character from its lead byte (1 for invalid leads). */
static inline int pa_utf8_lead_len(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) return 2;
  if ((c & 0xF0) == 0xE0) return 3;
  if ((c & 0xF8) == 0xF0) return 4;
  return 1;
}
size_t pa_utf8_encode(uint32_t cp, char *out); /* 1..4 bytes */
/* Decodes one character at s[0..n); returns its length (0 when invalid). */
int pa_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);
/* unicode.c: White_Space (Rust's char::is_whitespace, which Hugging Face
 * uses); the lowercase of c (Rust's char::to_lowercase: 1 to 3 code points
 * to out, their count returned). */
bool pa_is_white_space(uint32_t c);
int pa_lowercase(uint32_t c, uint32_t out[3]);

/* ---- a binary heap of fixed-size items (heap.c): merge candidates, the
 * one before() says goes first on top ---- */
typedef struct {
  void *v;
  size_t n, cap, size; /* items held, room, bytes per item */
  bool (*before)(const void *a, const void *b);
} pa_heap;
int pa_heap_push(pa_heap *h, const void *item); /* PASADA_ERR_NOMEM (message set) */
void pa_heap_pop(pa_heap *h, void *top);         /* h->n > 0 */
void pa_heap_free(pa_heap *h);

#endif
