/* grammar.h: grammar-constrained decoding, the internals shared by
 * src/grammar/ and the sampler (the public API is pasada_grammar_* in
 * pasada.h).
 *
 * The path of a grammar: GBNF text -> syntax tree (gbnf.c) -> one byte-level
 * automaton per rule, small non-recursive rules inlined into their callers,
 * code-point classes spelled as UTF-8 byte sequences (compile.c, nfa.c) ->
 * deterministic per rule over classes of equivalent bytes (dfa.c). A parse
 * state is a set of heads; a head is a DFA state and the stack of return
 * states below it, hash-consed frames shared by every head (matcher.c). The
 * token mask walks the vocabulary sorted by bytes (vocab.c), sharing each
 * prefix's work, with a per-DFA-state cache of the tokens accepted or
 * rejected whatever the stack holds (mask.c): only the tokens that may leave
 * the rule are walked with the real stack. */
#ifndef PASADA_GRAMMAR_H
#define PASADA_GRAMMAR_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pasada.h"
#include "tokenizer/tokenizer.h"

/* ---- limits on untrusted grammars (each exceeded one is a PASADA_ERR_ARG) ---- */
#define PA_G_MAX_TEXT (1u << 20)     /* bytes of GBNF */
#define PA_G_MAX_RULES 4096          /* rules, named and synthesized */
#define PA_G_MAX_DEPTH 64            /* nesting of groups */
#define PA_G_MAX_POSTFIX 4           /* repetition operators on one item */
#define PA_G_MAX_REPEAT 10000        /* a {m,n} bound */
#define PA_G_MAX_NFA (1u << 19)      /* automaton states before determinization */
#define PA_G_MAX_DFA (1u << 18)      /* automaton states after */
#define PA_G_MAX_TABLE (1u << 22)    /* DFA states x byte classes */
#define PA_G_MAX_ANALYSIS (1u << 28) /* syntax-tree nodes the analyses visit */
#define PA_G_MAX_DETERMINIZE (1u << 24) /* member edges x byte classes determinization scans */
#define PA_G_INLINE_MAX 256          /* automaton states of a rule inlined into callers */
#define PA_G_INLINE_LEVELS 8         /* rules inlined within inlined rules */
#define PA_G_MAX_HEADS 1024          /* heads in one parse state */
#define PA_G_MAX_CLOSURE 2048        /* states one byte's closure visits */
#define PA_G_MAX_FRAMES (1u << 24)   /* stack frames one matcher holds */
#define PA_G_WORK_BUDGET (1u << 27)  /* automaton steps of one mask or accept */

#define PA_G_NONE UINT32_MAX /* no state (dead transition), no frame (empty stack) */
/* A transition whose target is not a plain state (it calls rules or may
 * end its rule) has this bit set: the walks' fast path reads one table. */
#define PA_G_SLOW 0x80000000u

/* ---- syntax tree (gbnf.c) ---- */
typedef enum {
  PA_GX_SEQ,     /* kids[first .. first + count) in order */
  PA_GX_ALT,     /* one of kids[first .. first + count) */
  PA_GX_REPEAT,  /* child repeated min..max times (max -1: no bound) */
  PA_GX_CHARS,   /* one code point in (or, negated, outside) ranges[first .. first + count) */
  PA_GX_LITERAL, /* the UTF-8 bytes lit[first .. first + count) */
  PA_GX_REF,     /* the rule `rule` */
} pa_gx_kind;

typedef struct {
  uint8_t kind;
  bool negated;
  int32_t first, count;
  int32_t child;
  int32_t min, max;
  int32_t rule;
} pa_gx;

typedef struct {
  char *name;
  int32_t expr; /* -1 until defined */
  size_t pos;   /* byte offset of its definition, else of its first reference */
} pa_grule;

typedef struct {
  pa_gx *x;
  int32_t n_x, cap_x;
  int32_t *kids;
  int32_t n_kids, cap_kids;
  uint32_t *ranges; /* [lo, hi] code point pairs */
  int32_t n_ranges, cap_ranges;
  uint8_t *lit;
  int32_t n_lit, cap_lit;
  pa_grule *rules;
  int32_t n_rules, cap_rules;
  const char *src; /* the text, for pa_gast_where (only while it lives) */
  size_t src_len;
} pa_gast;

/* Parses GBNF text into ast. Errors (PASADA_ERR_ARG) name the line and
 * column: syntax, bad escapes, invalid UTF-8, a rule defined twice, a
 * reference to a rule never defined, the limits above. */
int pa_gbnf_parse(const char *text, size_t len, pa_gast *ast);
/* The same, with token references resolved in tok's vocabulary (tok NULL:
 * a token reference is an error). */
int pa_gbnf_parse_vocab(const char *text, size_t len, const pa_tokenizer *tok, pa_gast *ast);
void pa_gast_free(pa_gast *ast);
int32_t pa_gast_find(const pa_gast *ast, const char *name);
/* The 1-based line and column (in bytes) of byte offset pos of the text. */
void pa_gast_where(const pa_gast *ast, size_t pos, int32_t *line, int32_t *col);

/* ---- vocabulary index (vocab.c): built once per tokenizer ---- */
typedef struct pa_gvocab {
  int32_t n_vocab;
  int32_t n_sorted;   /* tokens in the index */
  int32_t *sorted_id; /* [rank] token id, ranks in byte order */
  uint32_t *off;      /* [rank + 1] their bytes: bytes[off[rank] .. off[rank + 1]) */
  uint8_t *bytes;
  uint8_t *lcp;           /* [rank] bytes shared with rank - 1 (at most 255) */
  uint32_t *skip;         /* [rank] the next rank whose lcp is below this one's (pa_gskip_build) */
  uint64_t (*byteset)[4]; /* [rank] the bytes the token holds, as bits */
  uint8_t *plain_chars;   /* [rank] its code points (1-127), + 128 when some are multi-byte,
                           * when it is whole well-formed UTF-8 with no ASCII byte below
                           * 0x20, 0x7F, " or \; else 0 */
  int32_t *rank;          /* [id] rank, -1 for tokens outside the index */
  int32_t *eog;           /* end-of-generation tokens */
  int32_t n_eog;
  uint32_t max_len;
} pa_gvocab;

/* skip[k] = the first j > k with lcp[j] < lcp[k] (n when none): past the
 * tokens that share this one's first lcp[k] bytes with it, so a walk jumps
 * over a rejected prefix's tokens a subtree at a time (lcp only falls
 * along the jumps: at most 255 of them). */
static inline void pa_gskip_build(const uint8_t *lcp, uint32_t n, uint32_t *skip) {
  for (uint32_t k = n; k-- > 0;) {
    uint32_t j = k + 1;
    while (j < n && lcp[j] >= lcp[k]) j = skip[j];
    skip[k] = j;
  }
}
/* The first index from k on whose lcp is below d. */
static inline uint32_t pa_gskip_hop(const uint8_t *lcp, const uint32_t *skip, uint32_t k,
                                    uint32_t n, uint32_t d) {
  while (k < n && lcp[k] >= d) k = skip[k];
  return k;
}

/* How a grammar spells a token. A text token: its piece's bytes. A
 * special token (control, unknown or unused, end-of-generation, or with an
 * empty piece): PA_G_SPECIAL_LEN bytes, 0xFF and then its id in four 6-bit
 * continuation bytes, a sequence no text holds, so only a token reference
 * of the grammar (<[id]>, <|name|>) matches it, and only whole. Returns the
 * length; *p points at the bytes (into the tokenizer or into tmp). */
#define PA_G_SPECIAL_LEN 5
bool pa_gvocab_is_special(const pa_tokenizer *t, int32_t id);
/* A negated token reference (!<[id]>): PA_G_SPECIAL_LEN bytes, 0xFE and the
 * id as in a special token's spelling. No token is spelled with 0xFE (the
 * index leaves out text tokens holding it), so only the matcher's reading
 * of a negation at a token's start crosses it (negation.c). */
#define PA_G_NEG_BYTE 0xFE
static inline size_t pa_gneg_spelling(int32_t id, uint8_t out[PA_G_SPECIAL_LEN]) {
  const uint32_t u = (uint32_t)id;
  out[0] = PA_G_NEG_BYTE;
  for (int k = 0; k < 4; k++) out[1 + k] = (uint8_t)(0x80 | (u >> (18 - 6 * k) & 0x3F));
  return PA_G_SPECIAL_LEN;
}
size_t pa_gvocab_spelling(const pa_tokenizer *t, int32_t id, uint8_t tmp[PA_G_SPECIAL_LEN],
                          const uint8_t **p);

static inline bool pa_gvocab_is_eog(const pa_gvocab *v, int32_t id) {
  for (int32_t i = 0; i < v->n_eog; i++)
    if (v->eog[i] == id) return true;
  return false;
}

/* The tokenizer's index, built on first use and kept with the tokenizer
 * (freed by pa_tokenizer_free). Thread-safe. NULL when out of memory. In the
 * index: every token, spelled as pa_gvocab_spelling says, except text
 * tokens holding the byte 0xFF or 0xFE (no grammar's text can match them:
 * grammars spell text as UTF-8, where neither byte occurs). */
const pa_gvocab *pa_gvocab_get(const pa_tokenizer *tok);
void pa_gvocab_free(pa_gvocab *v);

/* ---- compiled grammar ---- */
enum {
  PA_GS_BYTES = 1, /* has byte transitions */
  PA_GS_CALLS = 2, /* calls rules */
  PA_GS_FINAL = 4, /* its rule may end here */
};

typedef struct {
  uint32_t start; /* the callee's start state */
  uint32_t ret;   /* where the caller goes on; PA_G_NONE: nothing follows (a tail call) */
} pa_gcall;

typedef struct pa_gcache pa_gcache;

struct pa_grammar {
  const pa_gvocab *vocab;
  int32_t n_vocab;
  uint32_t n_states, n_cls;
  uint8_t cls[256];   /* byte -> class */
  uint32_t *trans;    /* [state * n_cls + class] -> state (| PA_G_SLOW) or PA_G_NONE */
  uint8_t *flags;     /* [state] PA_GS_* */
  uint32_t *call_off; /* [state + 1] into calls */
  pa_gcall *calls;
  uint32_t start;              /* the root rule's start state */
  _Atomic(pa_gcache *) *cache; /* [state], built on first use (mask.c) */
};
typedef struct pa_grammar pa_grammar;

/* Frees one state's token cache (mask.c). */
void pa_gcache_free(pa_gcache *c);

/* AST -> automata (compile.c): checks left recursion and rules that never
 * complete, inlines, determinizes. */
int pa_grammar_build(const pa_gast *ast, int32_t root, pa_grammar *g);
void pa_grammar_release(pa_grammar *g);

/* ---- matcher (matcher.c, mask.c): one sequence's parse state ---- */
typedef struct {
  uint32_t node, parent; /* a DFA state; the frame below it (PA_G_NONE: bottom) */
} pa_ghead;

typedef struct pa_gmatcher pa_gmatcher;

int pa_gmatcher_create(const pa_grammar *g, pa_gmatcher **out);
void pa_gmatcher_free(pa_gmatcher *m);
/* Back to the start of the grammar. */
void pa_gmatcher_reset(pa_gmatcher *m);
/* Advances by a token: PASADA_ERR_ARG when the grammar does not allow it
 * (the matcher is then dead: every later call fails). An end-of-generation
 * token is allowed where the grammar can end, and leaves only the end. */
int pa_gmatcher_accept(pa_gmatcher *m, int32_t token);
/* Advances by bytes (tests); false when they are not allowed (nothing changes). */
bool pa_gmatcher_accept_bytes(pa_gmatcher *m, const uint8_t *b, size_t n);
/* Whether the token is allowed now (walks its bytes only). */
bool pa_gmatcher_allows(pa_gmatcher *m, int32_t token);
/* The allowed tokens as n_vocab bits (bit id % 64 of word id / 64); returns
 * how many, or -1 with the error set (a grammar too costly to follow). */
int64_t pa_gmatcher_mask(pa_gmatcher *m, uint64_t *bits);
bool pa_gmatcher_can_end(const pa_gmatcher *m);
bool pa_gmatcher_must_end(const pa_gmatcher *m);
bool pa_gmatcher_dead(const pa_gmatcher *m);
/* The reason the matcher died (or "" while alive). */
const char *pa_gmatcher_error(const pa_gmatcher *m);

#endif
