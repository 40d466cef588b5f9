/* fuzz_grammar.c: libFuzzer target for grammars, the border a request's
 * "grammar" and "response_format" cross: GBNF text (src/grammar) or a JSON
 * schema turned into GBNF (src/server/json_schema.c), compiled for a
 * vocabulary, then followed. Byte 0: bit 0 the rest is a JSON schema
 * instead of GBNF; bit 1 the vocabulary (tiny llama's SentencePiece or tiny
 * qwen2's byte-level BPE). The rest, up to a NUL, is the grammar; after the
 * NUL, text fed to a matcher one byte at a time, the token mask taken after
 * each byte and checked against the single-token look-ahead on a few
 * tokens. Compiling must succeed or fail with PASADA_ERR_ARG and a message
 * (a schema: a 400); nothing may crash, leak or run away (ASan, UBSan, the
 * fuzzer's timeout watch). */
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "pasada.h"
#include "server/json_schema.h"

#ifndef PASADA_FIXTURES_DIR
#define PASADA_FIXTURES_DIR "tests/fixtures"
#endif

static pasada_model *models[2];
static uint64_t *bits;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  const char *dir = getenv("PASADA_FUZZ_FIXTURES");
  if (!dir || !*dir) dir = PASADA_FIXTURES_DIR;
  static const char *const names[2] = {"llama", "qwen2"};
  int32_t most = 0;
  for (int i = 0; i < 2; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/tiny/%s.gguf", dir, names[i]);
    pasada_model_params mp = pasada_model_default_params();
    mp.vocab_only = true;
    if (pasada_model_load(path, &mp, &models[i]) != PASADA_OK) {
      fprintf(stderr, "fuzz_grammar: %s\n", pasada_last_error());
      exit(1);
    }
    int32_t n = pasada_model_n_vocab(models[i]);
    if (n > most) most = n;
  }
  bits = calloc(((size_t)most + 63) / 64, 8);
  return bits ? 0 : 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const pasada_tokenizer *tok = pasada_model_tokenizer(models[(data[0] >> 1) & 1]);
  const char *text = (const char *)data + 1;
  const char *nul = memchr(text, 0, size - 1);
  const size_t len = nul ? (size_t)(nul - text) : size - 1;
  const uint8_t *sample = nul ? (const uint8_t *)nul + 1 : NULL;
  const size_t n_sample = nul ? size - 1 - len - 1 : 0;

  char *gbnf = NULL;
  if (data[0] & 1) {
    cJSON *schema = cJSON_ParseWithLength(text, len);
    if (!schema) return 0;
    srv_error e;
    memset(&e, 0, sizeof e);
    gbnf = srv_json_schema_gbnf(schema, &e);
    cJSON_Delete(schema);
    if (!gbnf) {
      if (e.status != 400 || !e.message[0]) {
        fprintf(stderr, "schema refused with %d: '%s'\n", e.status, e.message);
        abort();
      }
      return 0;
    }
  }
  pasada_grammar *g = NULL;
  const char *src = gbnf ? gbnf : text;
  int st = pasada_grammar_create(tok, src, gbnf ? strlen(gbnf) : len, NULL, &g);
  if (st) {
    /* a schema's grammar may still hit the automaton limits, or never
     * complete where the converter's finiteness check errs towards finite
     * (required names that only an allOf or anyOf merge brings together
     * with a recursive property): the grammar's check says so then;
     * nothing else. A $ref chain that recurses before consuming anything,
     * or a recursion required at every level ({"properties": {"a":
     * {"$ref": "#"}}, "required": ["a"]}), is the converter's 400 (left
     * recursion here would be a bug) */
    if (st != PASADA_ERR_ARG || !pasada_last_error()[0] ||
        (gbnf && !strstr(pasada_last_error(), "exceeds") && !strstr(pasada_last_error(), "too large") &&
         !strstr(pasada_last_error(), "can never complete"))) {
      fprintf(stderr, "grammar refused with %d: '%s'\n", st, pasada_last_error());
      abort();
    }
    free(gbnf);
    return 0;
  }
  pa_gmatcher *m;
  if (pa_gmatcher_create(g, &m) == PASADA_OK) {
    const int32_t nv = g->n_vocab;
    for (size_t i = 0; i <= n_sample && i < 256; i++) {
      int64_t n = pa_gmatcher_mask(m, bits);
      if (n < 0) break;                 /* too costly to follow: an error, fine */
      for (int32_t k = 0; k < 8; k++) { /* the look-ahead agrees with the mask */
        int32_t t = (int32_t)((i * 131 + (size_t)k * 977) % (size_t)nv);
        bool bit = bits[t >> 6] >> (t & 63) & 1;
        if (pa_gmatcher_allows(m, t) != bit) abort();
      }
      if (i == n_sample || !pa_gmatcher_accept_bytes(m, sample + i, 1)) break;
    }
    pa_gmatcher_free(m);
  }
  pasada_grammar_free(g);
  free(gbnf);
  return 0;
}
