/* test_grammar_util.h: what the grammar tests share: a synthetic
 * SentencePiece vocabulary (the 256 byte tokens, control tokens, an end
 * token, and random pieces of JSON-like text, some multi-byte) written as a
 * GGUF and loaded; the real SmolLM2 vocabulary when the fetched model is
 * there; and a brute-force twin of the token mask: a token is allowed when
 * a fresh matcher, fed the accepted text and then the token's bytes,
 * survives. Header-only: each test is one executable. */
#ifndef PASADA_TEST_GRAMMAR_UTIL_H
#define PASADA_TEST_GRAMMAR_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "format/gguf.h"
#include "grammar/grammar.h"
#include "pasada.h"
#include "test_check.h"
#include "test_util.h"

/* A JSON grammar, the first that test_grammar.c and test_grammar_mask.c walk */
#define TEST_GBNF_JSON                                                                            \
  "root ::= value\n"                                                                              \
  "value ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"           \
  "object ::= \"{\" ws ( string \":\" ws value (\",\" ws string \":\" ws value)* )? \"}\" ws\n"   \
  "array ::= \"[\" ws ( value (\",\" ws value)* )? \"]\" ws\n"                                    \
  "string ::= \"\\\"\" ( [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\bfnrt] | \"u\" "            \
  "[0-9a-fA-F]{4}) )* \"\\\"\" ws\n"                                                              \
  "number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? ([eE] [-+]? [0-9]{1,3})? ws\n" \
  "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n"

#define SYN_EOS 2
#define SYN_CONTROL 3 /* a control token that spells "{" */

/* A SentencePiece ("llama") vocabulary of these tokens and types (scores
 * falling with the id; BOS 1, UNK 0, eos), written as a GGUF and loaded. */
static inline pa_tokenizer *write_vocab(const char *const *tokens, const int32_t *types, int n,
                                        uint32_t eos) {
  float *scores = calloc((size_t)n, sizeof *scores);
  for (int i = 0; scores && i < n; i++) scores[i] = -(float)i;
  gguf_writer *w = gguf_writer_create();
  gguf_writer_set_string(w, "general.architecture", "llama");
  gguf_writer_set_string(w, "tokenizer.ggml.model", "llama");
  gguf_writer_set_string_array(w, "tokenizer.ggml.tokens", (const char **)tokens, (uint64_t)n);
  gguf_writer_set_array(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, (uint64_t)n);
  gguf_writer_set_array(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, (uint64_t)n);
  gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
  gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", eos);
  gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0);
  gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", false);
  char path[] = "/tmp/pasada-test-vocab-XXXXXX";
  int fd = mkstemp(path);
  pa_tokenizer *t = NULL;
  if (fd >= 0 && scores) {
    close(fd);
    gguf_file *f = NULL;
    if (!gguf_writer_write(w, path, 3) && !gguf_open(path, &f)) pa_tokenizer_load(f, &t);
    gguf_close(f);
    unlink(path);
  }
  gguf_writer_free(w);
  free(scores);
  CHECK(t != NULL, "test vocabulary: %s", pa_last_error());
  return t;
}

/* A synthetic vocabulary: <unk>, <s>, </s> (end), a control "{", the 256
 * <0xNN> byte tokens, then n_words random pieces. */
static inline pa_tokenizer *synthetic_vocab(int n_words) {
  static const char *parts[] = {"{",
                                "}",
                                "[",
                                "]",
                                "\"",
                                ":",
                                ",",
                                "\xE2\x96\x81",
                                "\n",
                                "a",
                                "b",
                                "ab",
                                "true",
                                "false",
                                "null",
                                "1",
                                "0",
                                "-",
                                ".",
                                "e",
                                "\\",
                                "\xC3\xA9",
                                "\xE6\x97\xA5",
                                "\xF0\x9F\x98\x80",
                                "\xED\xA0\x80", /* a surrogate: not UTF-8 */
                                "x",
                                "name",
                                "\t",
                                "u",
                                "9",
                                "E",
                                "+",
                                "\"\x3A"};
  const int n_parts = (int)(sizeof parts / sizeof parts[0]);
  const int n = 4 + 256 + n_words;
  char **store = calloc((size_t)n, sizeof *store);
  const char **tokens = calloc((size_t)n, sizeof *tokens);
  int32_t *types = calloc((size_t)n, sizeof *types);
  const char *fixed[4] = {"<unk>", "<s>", "</s>", "{"};
  const int fixed_type[4] = {PA_TOKEN_UNKNOWN, PA_TOKEN_CONTROL, PA_TOKEN_CONTROL,
                             PA_TOKEN_CONTROL};
  int k = 0;
  for (int i = 0; i < 4; i++) store[k] = strdup(fixed[i]), types[k++] = fixed_type[i];
  for (int b = 0; b < 256; b++) {
    char s[8];
    snprintf(s, sizeof s, "<0x%02X>", b);
    store[k] = strdup(s), types[k++] = PA_TOKEN_BYTE;
  }
  /* every part is a token of its own (the tests name "a" and "b"); the rest
   * are random concatenations of one to four parts */
  for (int i = 0; i < n_parts && k < n; i++)
    store[k] = strdup(parts[i]), types[k++] = PA_TOKEN_NORMAL;
  while (k < n) {
    char s[64] = "";
    int np = 1 + (int)(rng() % 4);
    for (int i = 0; i < np; i++) strcat(s, parts[rng() % (uint64_t)n_parts]);
    bool dup = false;
    for (int j = 0; j < k && !dup; j++) dup = !strcmp(store[j], s);
    if (dup) continue;
    store[k] = strdup(s);
    types[k++] = rng() % 16 ? PA_TOKEN_NORMAL : PA_TOKEN_USER_DEFINED;
  }
  for (int i = 0; i < n; i++) tokens[i] = store[i];
  pa_tokenizer *t = write_vocab(tokens, types, n, SYN_EOS);
  for (int i = 0; i < n; i++) free(store[i]);
  free(store), free(tokens), free(types);
  return t;
}

/* The SmolLM2 model's vocabulary (vocab_only) when the fetched model is
 * there, else NULL (said once). */
static inline pasada_model *smollm2_vocab(void) {
  const char *dir = getenv("PASADA_MODELS_DIR");
  char path[1024];
  if (dir)
    snprintf(path, sizeof path, "%s/SmolLM2-135M-Instruct.Q4_1.gguf", dir);
  else
    snprintf(path, sizeof path, "%s/.cache/pasada/models/SmolLM2-135M-Instruct.Q4_1.gguf",
             getenv("HOME") ? getenv("HOME") : ".");
  if (access(path, R_OK)) {
    printf("(%s missing: the real-vocabulary checks are skipped)\n", path);
    return NULL;
  }
  pasada_model_params mp = pasada_model_default_params();
  mp.vocab_only = true;
  pasada_model *m = NULL;
  CHECK(pasada_model_load(path, &mp, &m) == PASADA_OK, "%s: %s", path, pasada_last_error());
  return m;
}

static inline pasada_grammar *compile(const pasada_tokenizer *tok, const char *gbnf) {
  pasada_grammar *g = NULL;
  int st = pasada_grammar_create(tok, gbnf, strlen(gbnf), NULL, &g);
  CHECK(st == PASADA_OK, "grammar should compile: %s\n%s", pasada_last_error(), gbnf);
  return g;
}

/* The brute-force twin: is `token` allowed after the bytes text[0..n)? m
 * is a scratch matcher of the same grammar, reset and fed them here. */
static inline bool twin_allows(pa_gmatcher *m, const pa_gvocab *v, const uint8_t *text, size_t n,
                               int32_t token) {
  pa_gmatcher_reset(m);
  if (!pa_gmatcher_accept_bytes(m, text, n)) return false;
  if (pa_gvocab_is_eog(v, token)) return pa_gmatcher_can_end(m);
  const int32_t r = v->rank[token];
  if (r < 0) return false;
  return pa_gmatcher_accept_bytes(m, v->bytes + v->off[r], v->off[r + 1] - v->off[r]);
}

#endif
