/* hf_bert.c: a Hugging Face BERT folder (sentence-transformers layout) as
 * llama.cpp's "bert" GGUF keys: config.json's hyper-parameters, the pooling
 * of 1_Pooling/config.json (or the Pooling module modules.json names), the
 * WordPiece vocabulary of tokenizer.json (or vocab.txt) in llama.cpp's spelling, and the
 * tensor names (the forms scripts/bert-to-gguf.py writes). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "format/hf_internal.h"
#include "format/safetensors.h"

enum { TT_NORMAL = 1, TT_CONTROL = 3 };

static int get_uint(const char *path, const pj_value *cfg, const char *key, bool required,
                    uint64_t max, uint64_t *out) {
  const pj_value *j = hf_member(cfg, key);
  if (!j) {
    if (required) return pa_error(PASADA_ERR_FORMAT, "%s: required key '%s' is missing", path, key);
    return PASADA_OK;
  }
  double d = pj_is_num(j) ? j->valuedouble : -1;
  if (!(d >= 1 && d <= (double)max) || floor(d) != d)
    return pa_error(PASADA_ERR_FORMAT, "%s: '%s' is not an integer in [1, %" PRIu64 "]", path, key,
                    max);
  *out = (uint64_t)d;
  return PASADA_OK;
}

static bool str_is(const pj_value *j, const char *s) {
  return pj_is_str(j) && !strcmp(j->valuestring, s);
}

/* pooling_type from the folder's Pooling module: 1 mean, 2 cls; none
 * written when the folder has no pooling configuration. */
static int pooling(const char *dir, gguf_writer *w) {
  pj_value *mods = NULL, *pool = NULL;
  int rc = hf_read_json(dir, "modules.json", true, &mods);
  if (rc) return rc;
  char sub[1200] = "1_Pooling/config.json";
  for (const pj_value *e = pj_is_arr(mods) ? mods->child : NULL; e; e = e->next) {
    const pj_value *type = hf_member(e, "type"), *p = hf_member(e, "path");
    if (pj_is_str(type) && strstr(type->valuestring, ".Pooling") && pj_is_str(p)) {
      if (strstr(p->valuestring, "..") || p->valuestring[0] == '/' ||
          strlen(p->valuestring) > 1000) {
        pj_free(mods);
        return pa_error(PASADA_ERR_FORMAT,
                        "%s/modules.json: the Pooling path is not a folder in it", dir);
      }
      snprintf(sub, sizeof sub, "%s/config.json", p->valuestring);
    }
  }
  pj_free(mods);
  if ((rc = hf_read_json(dir, sub, true, &pool)) || !pool) return rc;
  static const char *modes[] = {
      "pooling_mode_mean_tokens",         "pooling_mode_cls_token",
      "pooling_mode_max_tokens",          "pooling_mode_mean_sqrt_len_tokens",
      "pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken"};
  int pick = -1, n = 0;
  for (int i = 0; i < 6; i++)
    if (pj_is_true(hf_member(pool, modes[i]))) pick = pick < 0 ? i : pick, n++;
  pj_free(pool);
  if (n == 0) return PASADA_OK;
  if (n > 1 || pick > 1)
    return pa_error(PASADA_ERR_UNSUPPORTED,
                    "%s/%s: pooling %s is not supported (mean or cls tokens, one of them)", dir,
                    sub, n > 1 ? "of several modes" : modes[pick]);
  return gguf_writer_set_u32(w, "bert.pooling_type", pick == 0 ? 1 : 2);
}

int hf_bert_config(const char *dir, const char *cfg_path, const pj_value *cfg, gguf_writer *w,
                   uint32_t *n_layer_out) {
  uint64_t n_layer = 0, n_embd = 0, n_ff = 0, n_head = 0, n_ctx = 0, n_types = 2;
  int rc;
  if ((rc = get_uint(cfg_path, cfg, "num_hidden_layers", true, 4096, &n_layer)) ||
      (rc = get_uint(cfg_path, cfg, "hidden_size", true, 1 << 20, &n_embd)) ||
      (rc = get_uint(cfg_path, cfg, "intermediate_size", true, 1 << 24, &n_ff)) ||
      (rc = get_uint(cfg_path, cfg, "num_attention_heads", true, 1 << 16, &n_head)) ||
      (rc = get_uint(cfg_path, cfg, "max_position_embeddings", true, 1 << 24, &n_ctx)) ||
      (rc = get_uint(cfg_path, cfg, "type_vocab_size", false, 16, &n_types)))
    return rc;
  const pj_value *act = hf_member(cfg, "hidden_act"),
                 *pos = hf_member(cfg, "position_embedding_type");
  if (act && !str_is(act, "gelu"))
    return pa_error(PASADA_ERR_UNSUPPORTED, "%s: hidden_act '%.40s' is not supported (gelu)",
                    cfg_path, pj_is_str(act) ? act->valuestring : "?");
  if (pos && !str_is(pos, "absolute"))
    return pa_error(PASADA_ERR_UNSUPPORTED,
                    "%s: position_embedding_type '%.40s' is not supported (absolute)", cfg_path,
                    pj_is_str(pos) ? pos->valuestring : "?");
  const pj_value *eps = hf_member(cfg, "layer_norm_eps");
  if (eps && (!pj_is_num(eps) || !isfinite(eps->valuedouble)))
    return pa_error(PASADA_ERR_FORMAT, "%s: 'layer_norm_eps' is not a number", cfg_path);
  if ((rc = gguf_writer_set_string(w, "general.architecture", "bert")) ||
      (rc = gguf_writer_set_u32(w, "bert.context_length", (uint32_t)n_ctx)) ||
      (rc = gguf_writer_set_u32(w, "bert.embedding_length", (uint32_t)n_embd)) ||
      (rc = gguf_writer_set_u32(w, "bert.feed_forward_length", (uint32_t)n_ff)) ||
      (rc = gguf_writer_set_u32(w, "bert.block_count", (uint32_t)n_layer)) ||
      (rc = gguf_writer_set_u32(w, "bert.attention.head_count", (uint32_t)n_head)) ||
      (rc = gguf_writer_set_f32(w, "bert.attention.layer_norm_epsilon",
                                eps ? (float)eps->valuedouble : 1e-12f)) ||
      (rc = gguf_writer_set_bool(w, "bert.attention.causal", false)) ||
      (rc = gguf_writer_set_u32(w, "tokenizer.ggml.token_type_count", (uint32_t)n_types)))
    return rc;
  *n_layer_out = (uint32_t)n_layer;
  return pooling(dir, w);
}

/* tokenizer_config.json's name for a special token (a string or
 * {"content": ...}), else `def`. */
static const char *special_text(const pj_value *tc, const char *key, const char *def) {
  const pj_value *t = hf_member(tc, key);
  if (pj_is_obj(t)) t = hf_member(t, "content");
  return pj_is_str(t) ? t->valuestring : def;
}

/* BertNormalizer's case and accent flags: lowercase (true when absent),
 * strip_accents (null or absent: as lowercase); stripping accents without
 * lowercasing is refused, as the tokenizer refuses it. */
static int norm_flags(const char *where, const pj_value *lc, const pj_value *acc, bool *lowercase,
                      bool *strip_accents) {
  if ((lc && !pj_is_bool(lc)) || (acc && !pj_is_null(acc) && !pj_is_bool(acc)))
    return pa_error(PASADA_ERR_FORMAT, "%s: the lowercase and strip_accents flags are not booleans",
                    where);
  *lowercase = !lc || pj_is_true(lc);
  *strip_accents = acc && pj_is_bool(acc) ? pj_is_true(acc) : *lowercase;
  if (*strip_accents && !*lowercase)
    return pa_error(PASADA_ERR_UNSUPPORTED,
                    "%s: stripping accents without lowercasing is not supported", where);
  return PASADA_OK;
}

static int check_wordpiece(const char *path, const pj_value *tok, bool *lowercase,
                           bool *strip_accents) {
  const pj_value *model = hf_member(tok, "model"), *norm = hf_member(tok, "normalizer"),
                 *pre = hf_member(tok, "pre_tokenizer");
  const pj_value *prefix = hf_member(model, "continuing_subword_prefix"),
                 *maxc = hf_member(model, "max_input_chars_per_word");
  const pj_value *clean = hf_member(norm, "clean_text"),
                 *cjk = hf_member(norm, "handle_chinese_chars");
  if (!str_is(hf_member(model, "type"), "WordPiece") || (prefix && !str_is(prefix, "##")) ||
      (maxc && !(pj_is_num(maxc) && maxc->valuedouble == 100)))
    return pa_error(PASADA_ERR_UNSUPPORTED,
                    "%s: a bert folder needs a WordPiece model with '##' continuations and words "
                    "of at most 100 characters",
                    path);
  if (!str_is(hf_member(norm, "type"), "BertNormalizer") || (clean && !pj_is_true(clean)) ||
      (cjk && !pj_is_true(cjk)) || !str_is(hf_member(pre, "type"), "BertPreTokenizer"))
    return pa_error(PASADA_ERR_UNSUPPORTED,
                    "%s: only BERT's pipeline is supported (BertNormalizer cleaning the text and "
                    "spacing CJK characters, BertPreTokenizer)",
                    path);
  return norm_flags(path, hf_member(norm, "lowercase"), hf_member(norm, "strip_accents"), lowercase,
                    strip_accents);
}

/* vocab.txt (one token a line, the line number its id) as `raw`: the
 * text is split in place; the normalizer's flags from
 * tokenizer_config.json's do_lower_case and strip_accents. */
static int read_vocab_txt(const char *dir, const pj_value *tc, char **text, const char ***raw,
                          uint32_t *n, bool *lowercase, bool *strip_accents) {
  char path[4096];
  snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
  const pj_value *cjk = hf_member(tc, "tokenize_chinese_chars");
  if (cjk && !pj_is_true(cjk))
    return pa_error(PASADA_ERR_UNSUPPORTED,
                    "%s: only BERT's pipeline is supported (tokenize_chinese_chars)", path);
  int rc = norm_flags(path, hf_member(tc, "do_lower_case"), hf_member(tc, "strip_accents"),
                      lowercase, strip_accents);
  if (rc) return rc;
  snprintf(path, sizeof path, "%s/vocab.txt", dir);
  rc = st_read_text(path, text);
  if (rc) return rc;
  uint32_t lines = 0;
  for (const char *p = *text; *p; p++) lines += *p == '\n';
  *raw = calloc((size_t)lines + 1, sizeof **raw);
  if (!*raw) return pa_error(PASADA_ERR_NOMEM, "out of memory");
  *n = 0;
  for (char *p = *text; *p && *n <= lines;) {
    char *nl = strchr(p, '\n');
    if (nl) *nl = 0;
    size_t len = strlen(p);
    if (len && p[len - 1] == '\r') p[len - 1] = 0;
    (*raw)[(*n)++] = p;
    if (!nl) break;
    p = nl + 1;
  }
  if (*n == 0) return pa_error(PASADA_ERR_FORMAT, "%s: the vocabulary is empty", path);
  if (*n >= (1u << 24)) return pa_error(PASADA_ERR_FORMAT, "%s: too many tokens", path);
  return PASADA_OK;
}

/* tokenizer.json's model.vocab as `raw` (by id, NULL: a gap) and its
 * special added tokens marked in `type`. */
static int read_tokenizer_json(const char *path, const pj_value *tok, const char ***raw,
                               uint32_t *n, bool *lowercase, bool *strip_accents) {
  int rc = check_wordpiece(path, tok, lowercase, strip_accents);
  if (rc) return rc;
  const pj_value *vj = hf_member(hf_member(tok, "model"), "vocab");
  if (!pj_is_obj(vj)) return pa_error(PASADA_ERR_FORMAT, "%s: model.vocab is not an object", path);
  *n = 0;
  for (const pj_value *e = vj->child; e; e = e->next) {
    double d = pj_is_num(e) ? e->valuedouble : -1;
    if (!(d >= 0 && d < (1 << 24)) || floor(d) != d)
      return pa_error(PASADA_ERR_FORMAT, "%s: model.vocab['%.60s'] is not a token id", path,
                      e->string);
    if ((uint32_t)d + 1 > *n) *n = (uint32_t)d + 1;
  }
  if (*n == 0) return pa_error(PASADA_ERR_FORMAT, "%s: the vocabulary is empty", path);
  if (!(*raw = calloc(*n, sizeof **raw))) return pa_error(PASADA_ERR_NOMEM, "out of memory");
  for (const pj_value *e = vj->child; e; e = e->next) {
    uint32_t id = (uint32_t)e->valuedouble;
    if ((*raw)[id]) return pa_error(PASADA_ERR_FORMAT, "%s: token id %u is given twice", path, id);
    (*raw)[id] = e->string;
  }
  return PASADA_OK;
}

static int64_t find_raw(const char **raw, uint32_t n, const char *s) {
  for (uint32_t i = 0; i < n; i++)
    if (raw[i] && !strcmp(raw[i], s)) return i;
  return -1;
}

int hf_bert_tokenizer(const char *dir, gguf_writer *w) {
  pj_value *tok = NULL, *tc = NULL;
  char path[4096], *vocab_txt = NULL;
  snprintf(path, sizeof path, "%s/tokenizer.json", dir);
  int rc = hf_read_json(dir, "tokenizer.json", true, &tok);
  if (!rc) rc = hf_read_json(dir, "tokenizer_config.json", true, &tc);
  const char **raw = NULL;
  uint32_t n = 0;
  bool lowercase = true, strip_accents = true;
  if (!rc)
    rc = tok ? read_tokenizer_json(path, tok, &raw, &n, &lowercase, &strip_accents)
             : read_vocab_txt(dir, tc, &vocab_txt, &raw, &n, &lowercase, &strip_accents);
  char **text = rc ? NULL : calloc(n, sizeof *text);
  int32_t *type = rc ? NULL : calloc(n, sizeof *type);
  if (!rc && (!text || !type)) rc = pa_error(PASADA_ERR_NOMEM, "out of memory");
  static const struct {
    const char *cfg, *def, *gguf;
    bool required;
  } sp[] = {{"cls_token", "[CLS]", "tokenizer.ggml.bos_token_id", true},
            {"sep_token", "[SEP]", "tokenizer.ggml.seperator_token_id", true},
            {"unk_token", "[UNK]", "tokenizer.ggml.unknown_token_id", true},
            {"pad_token", "[PAD]", "tokenizer.ggml.padding_token_id", false},
            {"mask_token", "[MASK]", "tokenizer.ggml.mask_token_id", false}};
  /* control: tokenizer.json's added tokens marked special; from vocab.txt,
   * the special tokens tokenizer_config.json names (BertTokenizer's) */
  for (uint32_t i = 0; !rc && i < n; i++) type[i] = TT_NORMAL;
  const pj_value *added = hf_member(tok, "added_tokens");
  for (const pj_value *e = !rc && pj_is_arr(added) ? added->child : NULL; e; e = e->next) {
    const pj_value *id = hf_member(e, "id");
    if (pj_is_true(hf_member(e, "special")) && pj_is_num(id) && id->valuedouble >= 0 &&
        id->valuedouble < n && floor(id->valuedouble) == id->valuedouble)
      type[(uint32_t)id->valuedouble] = TT_CONTROL;
  }
  for (size_t i = 0; !rc && !tok && i < sizeof sp / sizeof sp[0]; i++) {
    int64_t id = find_raw(raw, n, special_text(tc, sp[i].cfg, sp[i].def));
    if (id >= 0) type[id] = TT_CONTROL;
  }
  for (uint32_t id = 0; !rc && id < n; id++) {
    const char *s = raw[id];
    char pad[40];
    if (!s) { /* a gap: bert-to-gguf.py's filler */
      snprintf(pad, sizeof pad, "[PAD%u]", id);
      s = pad;
    }
    size_t len = strlen(s);
    if (!(text[id] = malloc(len + 4)))
      rc = pa_error(PASADA_ERR_NOMEM, "out of memory");
    else if (type[id] == TT_CONTROL)
      memcpy(text[id], s, len + 1);
    else if (!strncmp(s, "##", 2))
      memcpy(text[id], s + 2, len - 1);
    else
      snprintf(text[id], len + 4, "\xe2\x96\x81%s", s); /* U+2581 */
  }
  if (!rc) rc = gguf_writer_set_string(w, "tokenizer.ggml.model", "bert");
  if (!rc) rc = gguf_writer_set_string(w, "tokenizer.ggml.pre", "default");
  if (!rc)
    rc = gguf_writer_set_string_array(w, "tokenizer.ggml.tokens", (const char *const *)text, n);
  if (!rc) rc = gguf_writer_set_array(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, type, n);
  for (size_t i = 0; !rc && i < sizeof sp / sizeof sp[0]; i++) {
    const char *want = special_text(tc, sp[i].cfg, sp[i].def);
    int64_t id = find_raw(raw, n, want);
    if (id >= 0)
      rc = gguf_writer_set_u32(w, sp[i].gguf, (uint32_t)id);
    else if (sp[i].required)
      rc = pa_error(PASADA_ERR_FORMAT, "%s: the %s '%.40s' is not in the vocabulary",
                    tok ? path : "vocab.txt", sp[i].cfg, want);
  }
  if (!rc) rc = gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true);
  if (!rc) rc = gguf_writer_set_bool(w, "tokenizer.ggml.add_sep_token", true);
  if (!rc) rc = gguf_writer_set_bool(w, "tokenizer.ggml.normalizer.lowercase", lowercase);
  if (!rc) rc = gguf_writer_set_bool(w, "tokenizer.ggml.normalizer.strip_accents", strip_accents);
  for (uint32_t i = 0; text && i < n; i++) free(text[i]);
  free(text), free(type), free(raw), free(vocab_txt);
  pj_free(tok), pj_free(tc);
  return rc;
}

int hf_bert_tensor_name(const char *hf, uint32_t n_layer, char *out, size_t cap) {
  if (!strncmp(hf, "bert.", 5)) hf += 5;
  static const struct {
    const char *hf, *gguf;
  } fixed[] = {{"embeddings.word_embeddings.weight", "token_embd.weight"},
               {"embeddings.position_embeddings.weight", "position_embd.weight"},
               {"embeddings.token_type_embeddings.weight", "token_types.weight"},
               {"embeddings.LayerNorm.weight", "token_embd_norm.weight"},
               {"embeddings.LayerNorm.bias", "token_embd_norm.bias"}};
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
    if (!strcmp(hf, fixed[i].hf)) return snprintf(out, cap, "%s", fixed[i].gguf), 0;
  if (!strcmp(hf, "embeddings.position_ids") || !strncmp(hf, "pooler.", 7)) return 1;
  unsigned layer;
  int at = 0;
  if (sscanf(hf, "encoder.layer.%u.%n", &layer, &at) != 1 || at == 0 || layer >= n_layer) return -1;
  static const struct {
    const char *hf, *gguf;
  } parts[] = {{"attention.self.query.", "attn_q"},
               {"attention.self.key.", "attn_k"},
               {"attention.self.value.", "attn_v"},
               {"attention.output.dense.", "attn_output"},
               {"attention.output.LayerNorm.", "attn_output_norm"},
               {"intermediate.dense.", "ffn_up"},
               {"output.dense.", "ffn_down"},
               {"output.LayerNorm.", "layer_output_norm"}};
  const char *rest = hf + at;
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
    size_t len = strlen(parts[i].hf);
    if (strncmp(rest, parts[i].hf, len) != 0) continue;
    const char *kind = rest + len;
    if (strcmp(kind, "weight") != 0 && strcmp(kind, "bias") != 0) return -1;
    snprintf(out, cap, "blk.%u.%s.%s", layer, parts[i].gguf, kind);
    return 0;
  }
  return -1;
}
