/* hf_tokenizer.c: tokenizer.json (+ tokenizer_config.json) to the
 * tokenizer.ggml.* keys llama.cpp's converter writes for byte-level BPE
 * vocabularies: tokens by id (gaps padded as [PADn], unused), token types
 * (added special tokens control, other added tokens user-defined), merges,
 * the pre-tokenizer recognised from tokenizer.json's definition, special
 * token ids, add_bos/add_eos and the chat template. A SentencePiece-style
 * BPE (byte_fallback, spaces as "\u2581": Llama 2, Mistral, Gemma) becomes
 * a "llama" vocabulary instead: <0xNN> tokens typed byte, scores from the
 * merges' ranks, add_space_prefix from the normalizer or pre-tokenizer. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/base.h"
#include "format/hf_internal.h"
#include "format/safetensors.h"
#include "tokenizer/pretok_regex.h"

enum { TT_NORMAL = 1, TT_CONTROL = 3, TT_USER_DEFINED = 4, TT_UNUSED = 5, TT_BYTE = 6 };

static bool is_type(const pj_value *j, const char *type) {
  const pj_value *t = hf_member(j, "type");
  return pj_is_str(t) && !strcmp(t->valuestring, type);
}

/* ByteLevel with add_prefix_space false; *regex: its own GPT-2 split on. */
static bool byte_level(const pj_value *j, bool *regex) {
  if (!is_type(j, "ByteLevel")) return false;
  const pj_value *aps = hf_member(j, "add_prefix_space"), *ur = hf_member(j, "use_regex");
  if (pj_is_true(aps)) return false;
  *regex = !ur || pj_is_true(ur);
  return true;
}

/* The llama.cpp pre-tokenizer name of tokenizer.json's pre_tokenizer into
 * name[cap], or false: ByteLevel alone (GPT-2's words), or a Sequence of
 * Splits (a regex, Isolated, not inverted) and Digits (each digit alone)
 * ending in ByteLevel (with its own regex last, or none), whose regexes in
 * order are those of one of pretok.c's pre-tokenizers. ignore_merges:
 * model.ignore_merges, which picks between names of the same regexes. */
static bool recognise_pre(const pj_value *pt, bool ignore_merges, char *name, size_t cap) {
  bool rx = false;
  if (byte_level(pt, &rx)) return rx && snprintf(name, cap, "gpt-2") > 0;
  if (!is_type(pt, "Sequence")) return false;
  const pj_value *seq = hf_member(pt, "pretokenizers");
  const size_t n = pj_is_arr(seq) ? pj_size(seq) : 0;
  const char *re[8];
  int k = 0;
  if (n < 2 || n > sizeof re / sizeof re[0] || !byte_level(pj_at(seq, n - 1), &rx)) return false;
  for (size_t i = 0; i + 1 < n; i++) {
    const pj_value *a = pj_at(seq, i);
    if (is_type(a, "Digits") && pj_is_true(hf_member(a, "individual_digits"))) {
      re[k++] = RE_DIGIT;
      continue;
    }
    const pj_value *r = hf_member(hf_member(a, "pattern"), "Regex"),
                   *beh = hf_member(a, "behavior");
    if (!is_type(a, "Split") || !pj_is_str(r) || !pj_is_str(beh) ||
        strcmp(beh->valuestring, "Isolated") != 0 || pj_is_true(hf_member(a, "invert")))
      return false;
    re[k++] = r->valuestring;
  }
  if (rx) re[k++] = RE_GPT2;
  return pa_pretok_name_of(re, k, ignore_merges, name, cap);
}

/* ---- SentencePiece-style BPE ---- */

#define SPACE_MARK "\xE2\x96\x81" /* U+2581, SentencePiece's space */

static bool str_is(const pj_value *j, const char *s) {
  return pj_is_str(j) && !strcmp(j->valuestring, s);
}

/* Replace " " -> "\u2581" (a String pattern). */
static bool replaces_spaces(const pj_value *n) {
  return is_type(n, "Replace") && str_is(hf_member(hf_member(n, "pattern"), "String"), " ") &&
         str_is(hf_member(n, "content"), SPACE_MARK);
}

/* How a byte_fallback BPE's tokenizer.json turns spaces into "\u2581": 1
 * with one prepended to the text, 0 without, -1 a definition pasada does
 * not recognise. Llama 2 / Mistral (transformers' legacy conversion):
 * normalizer Prepend("\u2581") + Replace; transformers' current Llama
 * tokenizers: pre-tokenizer Metaspace (prepend_scheme first or never, no
 * split; first: *first_only, the prefix at the start of the text only and
 * not before a space, where the others prefix every text between special
 * tokens); Gemma: normalizer Replace, pre-tokenizer none or a Split on " "
 * (which has no space left to split on). */
static int recognise_spm(const pj_value *tok, bool *first_only) {
  const pj_value *n = hf_member(tok, "normalizer"), *p = hf_member(tok, "pre_tokenizer");
  if (is_type(p, "Sequence") && pj_size(hf_member(p, "pretokenizers")) == 1)
    p = pj_at(hf_member(p, "pretokenizers"), 0);
  if (is_type(n, "Sequence") && pj_size(hf_member(n, "normalizers")) == 1)
    n = pj_at(hf_member(n, "normalizers"), 0);
  if (!p && is_type(n, "Sequence")) {
    const pj_value *seq = hf_member(n, "normalizers");
    if (pj_size(seq) == 2 && is_type(pj_at(seq, 0), "Prepend") &&
        str_is(hf_member(pj_at(seq, 0), "prepend"), SPACE_MARK) && replaces_spaces(pj_at(seq, 1)))
      return 1;
    return -1;
  }
  if (replaces_spaces(n)) {
    if (!p) return 0;
    if (is_type(p, "Split") && str_is(hf_member(hf_member(p, "pattern"), "String"), " ") &&
        !pj_is_true(hf_member(p, "invert")))
      return 0;
    return -1;
  }
  if (!n && is_type(p, "Metaspace") && str_is(hf_member(p, "replacement"), SPACE_MARK) &&
      pj_is_bool(hf_member(p, "split")) && !pj_is_true(hf_member(p, "split"))) {
    const pj_value *scheme = hf_member(p, "prepend_scheme");
    if (str_is(scheme, "first")) return *first_only = true, 1;
    if (str_is(scheme, "never")) return 0;
  }
  return -1;
}

/* An open-addressing table of the vocabulary's strings. */
typedef struct {
  uint32_t cap; /* a power of two */
  int32_t *slot;
  char *const *text;
} str_index;

static size_t utf8_chars(const char *s) {
  size_t n = 0;
  for (; *s; s++) n += ((uint8_t)*s & 0xC0) != 0x80;
  return n;
}

static uint64_t str_hash(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
  return h;
}

static int index_build(str_index *x, char *const *text, uint32_t n) {
  x->cap = 16;
  while (x->cap < 2 * (uint64_t)n) x->cap *= 2;
  x->text = text;
  if (!(x->slot = malloc(x->cap * sizeof *x->slot))) return pa_error(PASADA_ERR_NOMEM, "out of memory");
  memset(x->slot, 0xff, x->cap * sizeof *x->slot);
  for (uint32_t i = 0; i < n; i++) {
    uint32_t h = (uint32_t)str_hash(text[i], strlen(text[i])) & (x->cap - 1);
    while (x->slot[h] >= 0) h = (h + 1) & (x->cap - 1);
    x->slot[h] = (int32_t)i; /* the first id of a string is found first */
  }
  return PASADA_OK;
}

static int32_t index_find(const str_index *x, const char *s, size_t len) {
  for (uint32_t h = (uint32_t)str_hash(s, len) & (x->cap - 1); x->slot[h] >= 0;
       h = (h + 1) & (x->cap - 1)) {
    const char *t = x->text[x->slot[h]];
    if (strlen(t) == len && !memcmp(t, s, len)) return x->slot[h];
  }
  return -1;
}

/* SentencePiece's merge order as scores: the token a merge makes scores
 * minus the merge's rank (its first one), so the highest-scoring pair
 * merges first as the lowest-ranked merge does in tokenizer.json's BPE
 * (their merges are every split of a piece, ranked piece by piece, as
 * transformers writes them); single characters score 0, longer pieces no
 * merge makes score below every merge. <0xNN> pieces are typed byte. */
static int spm_scores(const char *path, const pj_value *merges, char *const *text, int32_t *type,
                      uint32_t n, float *score) {
  if (merges && !pj_is_arr(merges))
    return pa_error(PASADA_ERR_FORMAT, "%s: model.merges is not an array", path);
  str_index x = {0};
  int rc = index_build(&x, text, n);
  if (rc) return rc;
  for (uint32_t i = 0; i < n; i++) {
    score[i] = 0;
    unsigned b;
    char tail;
    if (type[i] == TT_NORMAL && strlen(text[i]) == 6 &&
        sscanf(text[i], "<0x%2X%c", &b, &tail) == 2 && tail == '>')
      type[i] = TT_BYTE;
  }
  bool *seen = calloc(n, sizeof *seen);
  char *buf = NULL;
  size_t cap = 0;
  if (!seen) rc = pa_error(PASADA_ERR_NOMEM, "out of memory");
  int64_t rank = 0;
  for (const pj_value *e = merges ? merges->child : NULL; e && !rc; e = e->next, rank++) {
    const char *a = NULL, *bb = NULL;
    size_t la = 0;
    if (pj_is_str(e)) { /* "a b": a has no space, "\u2581" stands for one */
      const char *sp = strchr(e->valuestring, ' ');
      if (sp) a = e->valuestring, la = (size_t)(sp - a), bb = sp + 1;
    } else if (pj_is_arr(e) && pj_size(e) == 2 && pj_is_str(e->child) && pj_is_str(e->child->next)) {
      a = e->child->valuestring, la = strlen(a), bb = e->child->next->valuestring;
    }
    if (!a) {
      rc = pa_error(PASADA_ERR_FORMAT, "%s: model.merges[%" PRId64 "] is neither \"a b\" nor [a, b]",
                    path, rank);
      break;
    }
    size_t lb = strlen(bb);
    if (la + lb + 1 > cap) {
      char *nb = realloc(buf, cap = 2 * (la + lb + 1));
      if (!nb) {
        rc = pa_error(PASADA_ERR_NOMEM, "out of memory");
        break;
      }
      buf = nb;
    }
    memcpy(buf, a, la);
    memcpy(buf + la, bb, lb);
    int32_t id = index_find(&x, buf, la + lb);
    if (id >= 0 && !seen[id]) {
      seen[id] = true;
      score[id] = -(float)(rank + 1);
    }
  }
  for (uint32_t i = 0; !rc && i < n; i++) /* after every merge: a piece BPE never makes */
    if (!seen[i] && type[i] == TT_NORMAL && utf8_chars(text[i]) > 1) score[i] = -(float)(rank + 1);
  free(buf);
  free(seen);
  free(x.slot);
  return rc;
}

typedef struct {
  const char *path; /* tokenizer.json */
  uint32_t n;
  char **text; /* by id; borrowed from the pj_value tree or owned pads */
  bool *owned;
  int32_t *type;
} vocab;

static int64_t find_token(const vocab *v, const char *s) {
  for (uint32_t i = 0; i < v->n; i++)
    if (v->text[i] && !strcmp(v->text[i], s)) return i;
  return -1;
}

static bool json_id(const pj_value *j, uint64_t max, uint64_t *out) {
  if (!pj_is_num(j) || !(j->valuedouble >= 0 && j->valuedouble < (double)max) ||
      floor(j->valuedouble) != j->valuedouble)
    return false;
  *out = (uint64_t)j->valuedouble;
  return true;
}

static int build_vocab(vocab *v, const pj_value *tok, uint32_t n_vocab) {
  const pj_value *model = hf_member(tok, "model"), *vj = hf_member(model, "vocab");
  const pj_value *added = hf_member(tok, "added_tokens");
  if (!pj_is_obj(vj))
    return pa_error(PASADA_ERR_FORMAT, "%s: model.vocab is not an object", v->path);
  if (added && !pj_is_arr(added))
    return pa_error(PASADA_ERR_FORMAT, "%s: added_tokens is not an array", v->path);
  uint64_t max_id = 0, id;
  bool any = false;
  for (const pj_value *e = vj->child; e; e = e->next) {
    if (!json_id(e, INT32_MAX, &id))
      return pa_error(PASADA_ERR_FORMAT, "%s: model.vocab['%.60s'] is not a token id", v->path,
                      e->string);
    max_id = id > max_id ? id : max_id, any = true;
  }
  for (const pj_value *e = added ? added->child : NULL; e; e = e->next) {
    if (!json_id(hf_member(e, "id"), INT32_MAX, &id) || !pj_is_str(hf_member(e, "content")))
      return pa_error(PASADA_ERR_FORMAT, "%s: an added token lacks an id or a content string",
                      v->path);
    max_id = id > max_id ? id : max_id, any = true;
  }
  if (!any) return pa_error(PASADA_ERR_FORMAT, "%s: the vocabulary is empty", v->path);
  if (n_vocab && max_id >= n_vocab)
    return pa_error(PASADA_ERR_FORMAT,
                    "%s: token id %" PRIu64 " is past config.json's vocab_size %u", v->path, max_id,
                    n_vocab);
  v->n = n_vocab ? n_vocab : (uint32_t)max_id + 1;
  v->text = calloc(v->n, sizeof *v->text);
  v->owned = calloc(v->n, sizeof *v->owned);
  v->type = calloc(v->n, sizeof *v->type);
  if (!v->text || !v->owned || !v->type) return pa_error(PASADA_ERR_NOMEM, "out of memory");
  for (const pj_value *e = vj->child; e; e = e->next) {
    json_id(e, INT32_MAX, &id);
    if (v->text[id])
      return pa_error(PASADA_ERR_FORMAT, "%s: token id %" PRIu64 " is given to '%.60s' and '%.60s'",
                      v->path, id, v->text[id], e->string);
    v->text[id] = e->string;
    v->type[id] = TT_NORMAL;
  }
  for (const pj_value *e = added ? added->child : NULL; e; e = e->next) {
    json_id(hf_member(e, "id"), INT32_MAX, &id);
    const char *content = hf_member(e, "content")->valuestring;
    if (v->text[id] && strcmp(v->text[id], content) != 0 && v->type[id] != TT_NORMAL)
      return pa_error(PASADA_ERR_FORMAT, "%s: added token id %" PRIu64 " is given twice", v->path,
                      id);
    v->text[id] = (char *)content;
    v->type[id] = pj_is_true(hf_member(e, "special")) ? TT_CONTROL : TT_USER_DEFINED;
  }
  for (uint32_t i = 0; i < v->n; i++) {
    if (v->text[i]) continue;
    char pad[32];
    snprintf(pad, sizeof pad, "[PAD%u]", i);
    if (!(v->text[i] = pa_strdup(pad))) return pa_error(PASADA_ERR_NOMEM, "out of memory");
    v->owned[i] = true;
    v->type[i] = TT_UNUSED;
  }
  return PASADA_OK;
}

static int write_merges(const char *path, const pj_value *merges, gguf_writer *w) {
  if (!pj_is_arr(merges))
    return pa_error(PASADA_ERR_FORMAT, "%s: model.merges is not an array", path);
  int n = pj_size(merges), i = 0, rc = PASADA_OK;
  char **m = calloc(n ? (size_t)n : 1, sizeof *m);
  if (!m) return pa_error(PASADA_ERR_NOMEM, "out of memory");
  for (const pj_value *e = merges->child; e && !rc; e = e->next, i++) {
    if (pj_is_str(e)) {
      m[i] = pa_strdup(e->valuestring);
    } else if (pj_is_arr(e) && pj_size(e) == 2 && pj_is_str(e->child) &&
               pj_is_str(e->child->next)) {
      size_t a = strlen(e->child->valuestring), b = strlen(e->child->next->valuestring);
      if ((m[i] = malloc(a + b + 2)))
        snprintf(m[i], a + b + 2, "%s %s", e->child->valuestring, e->child->next->valuestring);
    } else {
      rc = pa_error(PASADA_ERR_FORMAT, "%s: model.merges[%d] is neither \"a b\" nor [a, b]", path,
                    i);
      continue;
    }
    if (!m[i]) rc = pa_error(PASADA_ERR_NOMEM, "out of memory");
  }
  if (!rc)
    rc = gguf_writer_set_string_array(w, "tokenizer.ggml.merges", (const char *const *)m,
                                      (uint64_t)n);
  for (int k = 0; k < n; k++) free(m[k]);
  free(m);
  return rc;
}

/* tokenizer_config.json's bos_token (a string or {"content": ...}) as an
 * id, else config.json's bos_token_id (an integer, or a list: its first). */
static int special_id(const vocab *v, const pj_value *tc, const pj_value *cfg, const char *name,
                      gguf_writer *w) {
  char key[64], gkey[80];
  snprintf(key, sizeof key, "%s_token", name);
  snprintf(gkey, sizeof gkey, "tokenizer.ggml.%s_token_id",
           !strcmp(name, "unk")   ? "unknown"
           : !strcmp(name, "pad") ? "padding"
                                  : name);
  const pj_value *t = hf_member(tc, key);
  if (pj_is_obj(t)) t = hf_member(t, "content");
  if (pj_is_str(t)) {
    int64_t id = find_token(v, t->valuestring);
    if (id < 0 && (!strcmp(name, "unk") || !strcmp(name, "pad")))
      return PASADA_OK; /* names a token it lacks */
    if (id < 0)
      return pa_error(PASADA_ERR_FORMAT,
                      "tokenizer_config.json: %s '%.60s' is not in the vocabulary", key,
                      t->valuestring);
    return gguf_writer_set_u32(w, gkey, (uint32_t)id);
  }
  snprintf(key, sizeof key, "%s_token_id", name);
  const pj_value *j = hf_member(cfg, key);
  if (pj_is_arr(j)) j = pj_at(j, 0);
  uint64_t id;
  if (!j) return PASADA_OK;
  if (!json_id(j, v->n, &id))
    return pa_error(PASADA_ERR_FORMAT, "config.json: %s is not a token id below %u", key, v->n);
  return gguf_writer_set_u32(w, gkey, (uint32_t)id);
}

static int chat_template(const char *dir, const pj_value *tc, gguf_writer *w) {
  const pj_value *ct = hf_member(tc, "chat_template");
  if (pj_is_arr(ct)) { /* [{name, template}]: the default one */
    const pj_value *pick = NULL;
    for (const pj_value *e = ct->child; e; e = e->next) {
      const pj_value *nm = hf_member(e, "name");
      if (pj_is_str(nm) && !strcmp(nm->valuestring, "default")) pick = e;
    }
    ct = pick ? hf_member(pick, "template") : NULL;
  }
  if (pj_is_str(ct)) return gguf_writer_set_string(w, "tokenizer.chat_template", ct->valuestring);
  if (ct)
    return pa_error(PASADA_ERR_FORMAT, "tokenizer_config.json: chat_template is not a string");
  char path[4096];
  struct stat sb;
  snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
  if (stat(path, &sb) != 0) return PASADA_OK;
  char *text = NULL;
  int rc = st_read_text(path, &text);
  if (!rc) rc = gguf_writer_set_string(w, "tokenizer.chat_template", text);
  free(text);
  return rc;
}

static int flag(const pj_value *tc, const char *key, gguf_writer *w) {
  const pj_value *j = hf_member(tc, key);
  if (!j) return PASADA_OK;
  if (!pj_is_bool(j))
    return pa_error(PASADA_ERR_FORMAT, "tokenizer_config.json: %s is not a boolean", key);
  char gkey[64];
  snprintf(gkey, sizeof gkey, "tokenizer.ggml.%s", key);
  return gguf_writer_set_bool(w, gkey, pj_is_true(j));
}

/* The added tokens llama.cpp's converter types user-defined in a Gemma 4
 * vocabulary (so that they are rendered: the chat format's channel and
 * tool markers), where tokenizer.json calls them special. */
static const char *const gemma4_visible[] = {"<|channel>",   "<channel|>",       "<|tool_call>",
                                             "<tool_call|>", "<|tool_response>", "<tool_response|>",
                                             "<|\"|>"};

int hf_tokenizer_to_gguf(const char *dir, const pj_value *config, uint32_t n_vocab, bool gemma4,
                         gguf_writer *w) {
  pj_value *tok = NULL, *tc = NULL;
  char path[4096];
  snprintf(path, sizeof path, "%s/tokenizer.json", dir);
  int rc = hf_read_json(dir, "tokenizer.json", false, &tok);
  if (!rc) rc = hf_read_json(dir, "tokenizer_config.json", true, &tc);
  vocab v = {.path = path};
  const pj_value *model = hf_member(tok, "model");
  if (!rc && !pj_is_obj(model)) rc = pa_error(PASADA_ERR_FORMAT, "%s: no model object", path);
  if (!rc && !is_type(model, "BPE"))
    rc = pa_error(
        PASADA_ERR_UNSUPPORTED, "%s: tokenizer model '%.40s' is not supported (byte-level BPE)",
        path, pj_is_str(hf_member(model, "type")) ? hf_member(model, "type")->valuestring : "?");
  const bool spm = !rc && pj_is_true(hf_member(model, "byte_fallback"));
  int space_prefix = -1;
  bool first_only = false;
  if (spm && (space_prefix = recognise_spm(tok, &first_only)) < 0)
    rc = pa_error(PASADA_ERR_UNSUPPORTED,
                  "%s: the normalizer and pre_tokenizer of this SentencePiece-style BPE "
                  "(byte_fallback) are not ones pasada recognises (Prepend + Replace \" \" by "
                  "\"\\u2581\"; Replace alone; Metaspace without split, prepend_scheme first or "
                  "never)",
                  path);
  char pre[32] = "default";
  if (!rc && !spm &&
      !recognise_pre(hf_member(tok, "pre_tokenizer"), pj_is_true(hf_member(model, "ignore_merges")),
                     pre, sizeof pre))
    rc = pa_error(
        PASADA_ERR_UNSUPPORTED,
        "%s: the pre_tokenizer is not one pasada recognises (ByteLevel alone, or Splits and "
        "Digits then ByteLevel whose regexes are those of a known pre-tokenizer: %s)",
        path, pa_pretok_supported());
  float *scores = NULL;
  if (!rc) rc = build_vocab(&v, tok, n_vocab);
  if (!rc && spm && !(scores = malloc(v.n * sizeof *scores)))
    rc = pa_error(PASADA_ERR_NOMEM, "out of memory");
  if (!rc && spm) rc = spm_scores(path, hf_member(model, "merges"), v.text, v.type, v.n, scores);
  /* Gemma 4's SentencePiece-style BPE runs by its merges (llama.cpp's
   * "gemma4" vocabulary: spaces as "\u2581", no prefix) */
  const bool g4 = !rc && spm && gemma4 && space_prefix == 0 && !first_only;
  for (size_t i = 0; g4 && i < sizeof gemma4_visible / sizeof gemma4_visible[0]; i++) {
    const int64_t id = find_token(&v, gemma4_visible[i]);
    if (id >= 0 && v.type[id] == TT_CONTROL) v.type[id] = TT_USER_DEFINED;
  }
  if (!rc)
    rc = gguf_writer_set_string(w, "tokenizer.ggml.model", g4 ? "gemma4" : spm ? "llama" : "gpt2");
  if (!rc) rc = gguf_writer_set_string(w, "tokenizer.ggml.pre", pre);
  if (!rc)
    rc = gguf_writer_set_string_array(w, "tokenizer.ggml.tokens", (const char *const *)v.text, v.n);
  if (!rc && spm) rc = gguf_writer_set_array(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, v.n);
  if (!rc) rc = gguf_writer_set_array(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, v.type, v.n);
  if (!rc && spm) rc = gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", space_prefix == 1);
  if (!rc && spm && first_only)
    rc = gguf_writer_set_bool(w, "pasada.tokenizer.space_prefix_first", true);
  if (!rc && (!spm || g4)) rc = write_merges(path, hf_member(model, "merges"), w);
  const char *specials[] = {"bos", "eos", "unk", "pad"};
  for (size_t i = 0; i < 4 && !rc; i++) rc = special_id(&v, tc, config, specials[i], w);
  if (!rc) rc = flag(tc, "add_bos_token", w);
  if (!rc) rc = flag(tc, "add_eos_token", w);
  if (!rc) rc = chat_template(dir, tc, w);
  for (uint32_t i = 0; v.owned && i < v.n; i++)
    if (v.owned[i]) free(v.text[i]);
  free(v.text), free(v.owned), free(v.type);
  free(scores);
  pj_free(tok);
  pj_free(tc);
  return rc;
}
