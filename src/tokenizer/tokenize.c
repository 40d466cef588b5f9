/* tokenize.c: text -> token ids. Cuts the text at special tokens (see
 * special.c), hands each stretch of ordinary text to the model's encoder
 * (bpe.c or spm.c), and adds BOS/EOS when asked. Also the UTF-8 helpers the
 * tokenizer files share. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "tokenizer/tokenizer_internal.h"

int pa_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp) {
  if (n == 0) return 0;
  unsigned char c = s[0];
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  int len;
  uint32_t v, min;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2, v = c & 0x1F, min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3, v = c & 0x0F, min = 0x800;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4, v = c & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if ((size_t)len > n) return 0;
  for (int i = 1; i < len; i++) {
    if ((s[i] & 0xC0) != 0x80) return 0;
    v = (v << 6) | (s[i] & 0x3F);
  }
  if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
  *cp = v;
  return len;
}

int pa_utf8_valid_len(const unsigned char *s, size_t n) {
  uint32_t cp;
  return pa_utf8_decode(s, n, &cp);
}

size_t pa_utf8_encode(uint32_t cp, char *out) {
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xE0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | (cp >> 18));
  out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

static int encode_text(const pa_tokenizer *t, const char *s, size_t len, bool at_start,
                       pa_ids *ids) {
  if (len == 0) return PASADA_OK;
  return t->kind == PA_TOK_BPE   ? pa_bpe_encode(t, s, len, ids)
         : t->kind == PA_TOK_WPM ? pa_wpm_encode(t, s, len, ids)
                                 : pa_spm_encode(t, s, len, at_start, ids);
}

int pa_tokenize(const pa_tokenizer *t, const char *text, size_t len, bool add_special,
                bool parse_special, int32_t **out, size_t *n_out) {
  *out = NULL;
  *n_out = 0;
  if (!text && len) return pa_error(PASADA_ERR_ARG, "pa_tokenize: NULL text");
  pa_ids ids = {0};
  int rc = PASADA_OK;
  /* SentencePiece matches its user-defined pieces after spaces became "▁"
   * (so "▁▁" in the text is the "  " piece too): normalize first. */
  char *norm = NULL;
  if ((t->kind == PA_TOK_SPM || t->escape_spaces) && len > 0) {
    if (len > (SIZE_MAX - 1) / 3 || !(norm = malloc(len * 3 + 1)))
      return pa_error(PASADA_ERR_NOMEM, "tokenizer: out of memory for %zu bytes", len);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
      if (text[i] == ' ')
        memcpy(norm + n, "\xE2\x96\x81", 3), n += 3;
      else
        norm[n++] = text[i];
    }
    text = norm;
    len = n;
  }
  if (add_special && t->add_bos) rc = pa_ids_push(&ids, t->bos);
  for (size_t pos = 0; !rc && pos < len;) {
    size_t at = len, match_len = 0;
    int32_t special = pa_special_next(t, text, len, pos, parse_special, &at, &match_len);
    if (special < 0) at = len;
    /* llama.cpp: the space prefix before every text (after the start or a
     * special token); Metaspace's "first": only at the start */
    rc = encode_text(t, text + pos, at - pos, pos == 0 || !t->space_prefix_first, &ids);
    if (rc || special < 0) break;
    rc = pa_ids_push(&ids, special);
    pos = at + match_len;
  }
  if (!rc && add_special && t->add_eos) rc = pa_ids_push(&ids, t->eos);
  if (!rc && add_special && t->add_sep) rc = pa_ids_push(&ids, t->sep); /* BERT's [SEP] */
  free(norm);
  if (rc) {
    free(ids.v);
    return rc;
  }
  if (!ids.v) { /* empty result: still hand back a freeable pointer */
    ids.v = malloc(sizeof(int32_t));
    if (!ids.v) return pa_error(PASADA_ERR_NOMEM, "tokenizer: out of memory");
  }
  *out = ids.v;
  *n_out = ids.n;
  return PASADA_OK;
}
