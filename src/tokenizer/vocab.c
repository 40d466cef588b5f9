/* vocab.c: loading the tokenizer from a GGUF file's tokenizer.ggml.* keys.
 *
 * The file is untrusted: every array is checked for its element type and its
 * length against tokenizer.ggml.tokens, every special id against the
 * vocabulary size, every merge against the tokens, and each error names the
 * key at fault. Also the token-text hash table and the small accessors. */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "grammar/grammar.h"
#include "tokenizer/tokenizer_internal.h"

/* ---- hashing ---- */

uint64_t pa_hash_bytes(const char *s, size_t n) {
  /* FNV-1a with a final avalanche: token texts are short. */
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 32;
  return h;
}

static bool text_equals(const pa_tokenizer *t, int32_t id, const char *s, size_t n) {
  return pa_text_len(t, id) == n && memcmp(t->text_arena + t->text_off[id], s, n) == 0;
}

int32_t pa_table_find(const pa_tokenizer *t, const char *s, size_t n) {
  const pa_str_table *tab = &t->by_text;
  if (!tab->slots) return -1;
  for (uint64_t i = pa_hash_bytes(s, n) & tab->mask;; i = (i + 1) & tab->mask) {
    int32_t id = tab->slots[i];
    if (id < 0) return -1;
    if (text_equals(t, id, s, n)) return id;
  }
}

/* Builds the text -> id table; with duplicate texts the first id wins. */
static int table_build(pa_tokenizer *t) {
  uint64_t cap = 1;
  while (cap < (uint64_t)t->n_vocab * 2) cap <<= 1;
  t->by_text.slots = malloc(cap * sizeof(int32_t));
  if (!t->by_text.slots) return pa_error(PASADA_ERR_NOMEM, "tokenizer: out of memory");
  memset(t->by_text.slots, 0xff, cap * sizeof(int32_t));
  t->by_text.mask = cap - 1;
  for (int32_t id = 0; id < t->n_vocab; id++) {
    const char *s = t->text_arena + t->text_off[id];
    size_t n = pa_text_len(t, id);
    uint64_t i = pa_hash_bytes(s, n) & t->by_text.mask;
    for (;; i = (i + 1) & t->by_text.mask) {
      int32_t other = t->by_text.slots[i];
      if (other < 0) {
        t->by_text.slots[i] = id;
        break;
      }
      if (text_equals(t, other, s, n)) break;
    }
  }
  return PASADA_OK;
}

int pa_ids_push(pa_ids *ids, int32_t id) {
  if (ids->n == ids->cap) {
    size_t cap = ids->cap ? ids->cap * 2 : 64;
    int32_t *v = realloc(ids->v, cap * sizeof(int32_t));
    if (!v) return pa_error(PASADA_ERR_NOMEM, "tokenizer: out of memory");
    ids->v = v;
    ids->cap = cap;
  }
  ids->v[ids->n++] = id;
  return PASADA_OK;
}

/* ---- checked reads of the tokenizer keys ---- */

static const char *fname(const gguf_file *f) { return f->path ? f->path : "gguf"; }

/* The array at `key` (NULL when absent and not required), checked to hold
 * elements of the wanted kind: 's' strings, 'i' integers, 'f' numbers. */
static int get_array(const gguf_file *f, const char *key, bool required, char kind,
                     const gguf_value **out) {
  const gguf_value *v = gguf_get(f, key);
  *out = NULL;
  if (!v) {
    if (required)
      return pa_error(PASADA_ERR_FORMAT, "%s: required key '%s' is missing", fname(f), key);
    return PASADA_OK;
  }
  if (v->type != GGUF_TYPE_ARRAY)
    return pa_error(PASADA_ERR_FORMAT, "%s: key '%s' has type %s, expected an array", fname(f), key,
                    gguf_type_name(v->type));
  gguf_type et = v->arr.elem_type;
  bool is_int = et == GGUF_TYPE_UINT8 || et == GGUF_TYPE_INT8 || et == GGUF_TYPE_UINT16 ||
                et == GGUF_TYPE_INT16 || et == GGUF_TYPE_UINT32 || et == GGUF_TYPE_INT32 ||
                et == GGUF_TYPE_UINT64 || et == GGUF_TYPE_INT64;
  bool ok = kind == 's'   ? et == GGUF_TYPE_STRING && (v->arr.strs || v->arr.count == 0)
            : kind == 'i' ? is_int && (v->arr.raw || v->arr.count == 0)
                          : (is_int || et == GGUF_TYPE_FLOAT32 || et == GGUF_TYPE_FLOAT64) &&
                                (v->arr.raw || v->arr.count == 0);
  if (!ok)
    return pa_error(PASADA_ERR_FORMAT, "%s: key '%s' is an array of %s, expected %s", fname(f), key,
                    gguf_type_name(et),
                    kind == 's'   ? "strings"
                    : kind == 'i' ? "integers"
                                  : "numbers");
  *out = v;
  return PASADA_OK;
}

/* A special token id: absent leaves *id at -1; present must be < n_vocab. */
static int get_special(const gguf_file *f, const char *key, int32_t n_vocab, int32_t *id) {
  int64_t v = -1;
  if (!gguf_get(f, key)) return PASADA_OK;
  int rc = gguf_get_i64(f, key, false, &v);
  if (rc) return rc;
  if (v < 0 || v >= n_vocab)
    return pa_error(PASADA_ERR_FORMAT, "%s: %s = %" PRId64 " is not a token id (n_vocab %d)",
                    fname(f), key, v, (int)n_vocab);
  *id = (int32_t)v;
  return PASADA_OK;
}

static int get_flag(const gguf_file *f, const char *key, bool *out) {
  return gguf_get_bool(f, key, false, out);
}

static int load_texts(pa_tokenizer *t, const gguf_file *f, const gguf_value *tokens) {
  uint64_t n = tokens->arr.count, total = 0;
  if (n == 0 || n >= INT32_MAX)
    return pa_error(PASADA_ERR_FORMAT, "%s: tokenizer.ggml.tokens has %" PRIu64 " entries",
                    fname(f), n);
  t->n_vocab = (int32_t)n;
  for (uint64_t i = 0; i < n; i++) {
    if (tokens->arr.strs[i].len > UINT32_MAX / 4)
      return pa_error(PASADA_ERR_FORMAT, "%s: tokenizer.ggml.tokens[%" PRIu64 "] is too long",
                      fname(f), i);
    if (!pa_add_u64(total, tokens->arr.strs[i].len + 1, &total))
      return pa_error(PASADA_ERR_FORMAT, "%s: tokenizer.ggml.tokens too large", fname(f));
  }
  if (total > UINT32_MAX) /* 32-bit offsets */
    return pa_error(PASADA_ERR_FORMAT, "%s: tokenizer.ggml.tokens has %" PRIu64 " bytes of text, more than 4 GiB",
                    fname(f), total);
  t->text_arena = malloc(total ? total : 1);
  t->text_off = malloc((n + 1) * sizeof(uint32_t));
  t->types = malloc(n);
  if (!t->text_arena || !t->text_off || !t->types)
    return pa_error(PASADA_ERR_NOMEM, "tokenizer: out of memory for %" PRIu64 " tokens", n);
  uint64_t off = 0;
  for (uint64_t i = 0; i < n; i++) {
    const gguf_str *s = &tokens->arr.strs[i];
    if (s->len) memcpy(t->text_arena + off, s->ptr, s->len);
    t->text_arena[off + s->len] = '\0';
    t->text_off[i] = (uint32_t)off;
    t->types[i] = PA_TOKEN_NORMAL;
    off += s->len + 1;
  }
  t->text_off[n] = (uint32_t)off;
  return PASADA_OK;
}

static int load_scores_types(pa_tokenizer *t, const gguf_file *f) {
  const gguf_value *scores, *types;
  int rc = get_array(f, "tokenizer.ggml.scores", t->kind == PA_TOK_SPM, 'f', &scores);
  if (rc) return rc;
  if ((rc = get_array(f, "tokenizer.ggml.token_type", false, 'i', &types))) return rc;
  if (scores && scores->arr.count != (uint64_t)t->n_vocab)
    return pa_error(PASADA_ERR_FORMAT,
                    "%s: tokenizer.ggml.scores has %" PRIu64
                    " entries but tokenizer.ggml.tokens has %d",
                    fname(f), scores->arr.count, (int)t->n_vocab);
  if (types && types->arr.count != (uint64_t)t->n_vocab)
    return pa_error(PASADA_ERR_FORMAT,
                    "%s: tokenizer.ggml.token_type has %" PRIu64
                    " entries but tokenizer.ggml.tokens has %d",
                    fname(f), types->arr.count, (int)t->n_vocab);
  if (scores) {
    t->scores = malloc((size_t)t->n_vocab * sizeof(float));
    if (!t->scores) return pa_error(PASADA_ERR_NOMEM, "tokenizer: out of memory");
    for (int32_t i = 0; i < t->n_vocab; i++) {
      double s = gguf_arr_f64(scores, (uint64_t)i);
      if (s != s) /* NaN would break the merge order */
        return pa_error(PASADA_ERR_FORMAT, "%s: tokenizer.ggml.scores[%d] is NaN", fname(f),
                        (int)i);
      t->scores[i] = (float)s;
    }
  }
  if (types) {
    for (int32_t i = 0; i < t->n_vocab; i++) {
      int64_t ty = gguf_arr_i64(types, (uint64_t)i);
      if (ty < 0 || ty > PA_TOKEN_BYTE)
        return pa_error(PASADA_ERR_FORMAT,
                        "%s: tokenizer.ggml.token_type[%d] = %" PRId64
                        " is not a token type (0..6)",
                        fname(f), (int)i, ty);
      t->types[i] = ty == 0 ? PA_TOKEN_NORMAL : (uint8_t)ty; /* 0: undefined -> normal */
    }
  }
  return PASADA_OK;
}

static int load_specials(pa_tokenizer *t, const gguf_file *f) {
  static const struct {
    const char *key;
    size_t field;
  } keys[] = {
      {"tokenizer.ggml.bos_token_id", offsetof(pa_tokenizer, bos)},
      {"tokenizer.ggml.eos_token_id", offsetof(pa_tokenizer, eos)},
      {"tokenizer.ggml.unknown_token_id", offsetof(pa_tokenizer, unk)},
      {"tokenizer.ggml.padding_token_id", offsetof(pa_tokenizer, pad)},
      {"tokenizer.ggml.separator_token_id", offsetof(pa_tokenizer, sep)},
      {"tokenizer.ggml.eot_token_id", offsetof(pa_tokenizer, eot)},
      {"tokenizer.ggml.eom_token_id", offsetof(pa_tokenizer, eom)},
  };
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
    int32_t *id = (int32_t *)((char *)t + keys[i].field);
    *id = -1;
    int rc = get_special(f, keys[i].key, t->n_vocab, id);
    if (rc) return rc;
  }
  /* Defaults as llama.cpp has them: SentencePiece vocabularies add BOS and a
   * leading space unless the file says otherwise; byte-level ones neither. */
  t->add_bos = t->kind == PA_TOK_SPM;
  t->add_eos = false;
  t->add_space_prefix = t->kind == PA_TOK_SPM;
  int rc;
  if ((rc = get_flag(f, "tokenizer.ggml.add_bos_token", &t->add_bos))) return rc;
  if ((rc = get_flag(f, "tokenizer.ggml.add_eos_token", &t->add_eos))) return rc;
  if ((rc = get_flag(f, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix))) return rc;
  if (t->gemma4_rules) t->add_bos = true; /* as llama.cpp: Gemma 4 always begins with BOS */
  /* tokenizer.ggml.normalizer.lowercase, as llama.cpp reads it: WordPiece
   * lowercases unless the file says otherwise, the "whitespace" model only
   * when it says so */
  t->lowercase = t->kind == PA_TOK_WPM;
  if ((t->kind == PA_TOK_WPM || t->drop_whitespace) &&
      (rc = get_flag(f, "tokenizer.ggml.normalizer.lowercase", &t->lowercase)))
    return rc;
  if ((rc = get_flag(f, "pasada.tokenizer.space_prefix_first", &t->space_prefix_first))) return rc;
  if (t->kind == PA_TOK_WPM) {
    /* llama.cpp's files spell the separator's key "seperator"; BERT adds
     * [CLS] (bos) and [SEP] by default, and words start with "\u2581" */
    if (t->sep < 0 && (rc = get_special(f, "tokenizer.ggml.seperator_token_id", t->n_vocab, &t->sep))) return rc;
    /* [CLS] is BERT's beginning token: files that name it only as
     * cls_token_id (llama.cpp's converter writes no bos_token_id) use it */
    if (t->bos < 0 && (rc = get_special(f, "tokenizer.ggml.cls_token_id", t->n_vocab, &t->bos))) return rc;
    t->add_bos = t->add_sep = true;
    t->add_space_prefix = true;
    /* BertNormalizer's accents, as llama.cpp reads them: stripped when
     * lowercasing unless the file says otherwise */
    t->strip_accents = t->lowercase;
    if ((rc = get_flag(f, "tokenizer.ggml.normalizer.strip_accents", &t->strip_accents))) return rc;
    if (t->strip_accents && !t->lowercase)
      return pa_error(PASADA_ERR_UNSUPPORTED,
                      "%s: a bert (WordPiece) vocabulary that strips accents without lowercasing "
                      "is not supported (tokenizer.ggml.normalizer.strip_accents)",
                      fname(f));
    if ((rc = get_flag(f, "tokenizer.ggml.add_bos_token", &t->add_bos))) return rc;
    if ((rc = get_flag(f, "tokenizer.ggml.add_sep_token", &t->add_sep))) return rc;
    if (t->unk < 0)
      return pa_error(PASADA_ERR_FORMAT, "%s: a bert (WordPiece) vocabulary needs tokenizer.ggml.unknown_token_id",
                      fname(f));
    if (t->add_sep && t->sep < 0)
      return pa_error(PASADA_ERR_FORMAT,
                      "%s: tokenizer.ggml.add_sep_token is set but there is no seperator_token_id", fname(f));
  }
  if (t->add_bos && t->bos < 0)
    return pa_error(PASADA_ERR_FORMAT,
                    "%s: tokenizer.ggml.add_bos_token is set but there is no bos_token_id",
                    fname(f));
  if (t->add_eos && t->eos < 0)
    return pa_error(PASADA_ERR_FORMAT,
                    "%s: tokenizer.ggml.add_eos_token is set but there is no eos_token_id",
                    fname(f));
  return PASADA_OK;
}

static void add_eog(pa_tokenizer *t, int32_t id) {
  if (id < 0) return;
  for (int i = 0; i < t->n_eog; i++)
    if (t->eog[i] == id) return;
  if (t->n_eog < PA_EOG_MAX) t->eog[t->n_eog++] = id;
}

/* End of generation: eos, eot, eom, and the end-of-turn markers of the
 * families we know, whatever their declared type. */
static void build_eog(pa_tokenizer *t) {
  static const char *const markers[] = {
      "<|eot_id|>", "<|im_end|>",      "<|end|>", "<end_of_turn>", "<|endoftext|>",
      "<|eom_id|>", "<|end_of_text|>", "<EOT>",   "<|return|>",    "<|call|>",
  };
  add_eog(t, t->eos);
  add_eog(t, t->eot);
  add_eog(t, t->eom);
  for (size_t i = 0; i < sizeof markers / sizeof markers[0]; i++)
    add_eog(t, pa_table_find(t, markers[i], strlen(markers[i])));
}

/* SPM: <0xNN> tokens (BYTE type) for byte fallback. */
static void build_byte_fallback(pa_tokenizer *t) {
  for (int b = 0; b < 256; b++) {
    char name[8];
    snprintf(name, sizeof name, "<0x%02X>", b);
    t->byte_fallback[b] = pa_table_find(t, name, 6);
  }
}

int pa_tokenizer_load(const gguf_file *f, pa_tokenizer **out) {
  *out = NULL;
  char *model = NULL, *pre = NULL;
  int rc = gguf_get_string(f, "tokenizer.ggml.model", true, &model);
  if (rc) return rc;
  pa_tokenizer *t = calloc(1, sizeof *t);
  if (!t) {
    free(model);
    return pa_error(PASADA_ERR_NOMEM, "tokenizer: out of memory");
  }
  for (int b = 0; b < 256; b++) t->byte_token[b] = t->byte_fallback[b] = -1;
  if (strcmp(model, "gpt2") == 0) {
    t->kind = PA_TOK_BPE;
  } else if (strcmp(model, "llama") == 0) {
    t->kind = PA_TOK_SPM;
  } else if (strcmp(model, "bert") == 0) {
    t->kind = PA_TOK_WPM;
  } else if (strcmp(model, "gemma4") == 0) {
    t->kind = PA_TOK_BPE;
  } else if (strcmp(model, "whitespace") == 0) {
    t->kind = PA_TOK_BPE;
  } else {
    rc =
        pa_error(PASADA_ERR_UNSUPPORTED,
                 "%s: tokenizer.ggml.model '%.40s' is not supported (supported: gpt2, llama, bert, "
                 "gemma4, whitespace)",
                 fname(f), model);
    goto fail;
  }
  snprintf(t->model_name, sizeof t->model_name, "%s", model);
  if ((rc = gguf_get_string(f, "tokenizer.ggml.pre", false, &pre))) goto fail;
  snprintf(t->pre_name, sizeof t->pre_name, "%s",
           strcmp(model, "gemma4") == 0       ? "gemma4"
           : strcmp(model, "whitespace") == 0 ? "whitespace"
           : pre                              ? pre
                                              : "default");
  /* SentencePiece-style BPE (spaces as "\u2581", UTF-8 characters, <0xNN>
   * fallback): Gemma 4's, and Granite Embedding 311M's byte-level-named
   * vocabulary with its rules (llama.cpp runs both alike); Sarvam's without
   * them. The "whitespace" model: UTF-8 characters, whitespace dropped. */
  if (t->kind == PA_TOK_BPE) {
    const char *pn = t->pre_name;
    t->gemma4_rules = strcmp(pn, "gemma4") == 0 || strcmp(pn, "granite-embed-multi-311m") == 0;
    t->escape_spaces = t->gemma4_rules || strcmp(pn, "sarvam-moe") == 0;
    t->drop_whitespace = strcmp(pn, "whitespace") == 0;
  }

  const gguf_value *tokens;
  if ((rc = get_array(f, "tokenizer.ggml.tokens", true, 's', &tokens))) goto fail;
  if ((rc = load_texts(t, f, tokens))) goto fail;
  if ((rc = load_scores_types(t, f))) goto fail;
  if ((rc = table_build(t))) goto fail;
  if ((rc = load_specials(t, f))) goto fail;

  if (t->kind == PA_TOK_BPE) {
    if ((rc = pa_pretok_create(t->pre_name, &t->pretok, &t->ignore_merges))) {
      pa_error_prefix("%s", fname(f));
      goto fail;
    }
    const gguf_value *merges;
    if ((rc = get_array(f, "tokenizer.ggml.merges", true, 's', &merges))) goto fail;
    if ((rc = pa_bpe_build_merges(t, merges))) {
      pa_error_prefix("%s", fname(f));
      goto fail;
    }
    if (pa_raw_bpe(t)) build_byte_fallback(t);
  } else {
    build_byte_fallback(t);
  }
  build_eog(t);
  if ((rc = pa_special_build(t)) || (rc = pa_pieces_build(t))) goto fail;
  free(model);
  free(pre);
  *out = t;
  return PASADA_OK;
fail:
  free(model);
  free(pre);
  pa_tokenizer_free(t);
  return rc;
}

void pa_tokenizer_free(pa_tokenizer *t) {
  if (!t) return;
  free(t->text_arena);
  free(t->text_off);
  free(t->scores);
  free(t->types);
  free(t->by_text.slots);
  free(t->piece_arena);
  free(t->piece_off);
  pa_special_free(&t->special);
  pa_bpe_free(t);
  pa_pretok_free(t->pretok);
  pa_gvocab_free(atomic_load(&t->grammar_vocab));
  free(t);
}

/* ---- accessors ---- */

int32_t pa_tokenizer_n_vocab(const pa_tokenizer *t) { return t->n_vocab; }
int32_t pa_tokenizer_bos(const pa_tokenizer *t) { return t->bos; }
int32_t pa_tokenizer_eos(const pa_tokenizer *t) { return t->eos; }
bool pa_tokenizer_add_bos(const pa_tokenizer *t) { return t->add_bos; }
bool pa_tokenizer_add_eos(const pa_tokenizer *t) { return t->add_eos; }
const char *pa_tokenizer_model_name(const pa_tokenizer *t) { return t->model_name; }
const char *pa_tokenizer_pre_name(const pa_tokenizer *t) { return t->pre_name; }

bool pa_tokenizer_is_eog(const pa_tokenizer *t, int32_t id) {
  for (int i = 0; i < t->n_eog; i++)
    if (t->eog[i] == id) return true;
  return false;
}

int32_t pa_tokenizer_find(const pa_tokenizer *t, const char *text) {
  return pa_table_find(t, text, strlen(text));
}

int pa_tokenizer_token_type(const pa_tokenizer *t, int32_t id) {
  return id >= 0 && id < t->n_vocab ? t->types[id] : 0;
}

const char *pa_tokenizer_token_text(const pa_tokenizer *t, int32_t id) {
  return id >= 0 && id < t->n_vocab ? t->text_arena + t->text_off[id] : NULL;
}
