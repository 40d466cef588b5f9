/* fuzz_openai.c: libFuzzer target for the server's request bodies (the
 * border every client byte crosses: server/openai.c). Byte 0 picks the
 * endpoint and, for chat, the template: bits 0-1 chat completions,
 * completions, /tokenize, /detokenize; bits 2-3 chatml, gemma, llama3, or
 * none (chat then fails with 500: the server has no template); bit 4 the
 * tokenizer; bit 5 /v1/embeddings instead (bit 6: a Matryoshka model);
 * the rest is the body. Any body must
 * either give a request whose fields are in range (checked below) or a
 * client error (4xx, with a message) whose JSON renders; nothing may leave a buffer or
 * leak (ASan and UBSan watch).
 *
 * The tokenizers are tiny llama's (SentencePiece) and tiny qwen2's
 * (byte-level BPE), from tests/fixtures/tiny (PASADA_FUZZ_FIXTURES or the
 * source tree), loaded once at start. Seeds:
 * the test writes a few valid and invalid bodies (tests/e2e/test_fuzz.py). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pasada.h"
#include "server/embeddings.h"
#include "server/openai.h"

#ifndef PASADA_FIXTURES_DIR
#define PASADA_FIXTURES_DIR "tests/fixtures"
#endif

static pasada_model *models[2]; /* tiny llama (SentencePiece), tiny qwen2 (byte-level BPE) */
static srv_model_info info;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  const char *dir = getenv("PASADA_FUZZ_FIXTURES");
  if (!dir || !*dir) dir = PASADA_FIXTURES_DIR;
  static const char *const names[2] = {"llama", "qwen2"};
  for (int i = 0; i < 2; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/tiny/%s.gguf", dir, names[i]);
    pasada_model_params mp = pasada_model_default_params();
    mp.vocab_only = true;
    if (pasada_model_load(path, &mp, &models[i]) != PASADA_OK) {
      fprintf(stderr, "fuzz_openai: %s\n", pasada_last_error());
      exit(1);
    }
  }
  info.name = "tiny";
  info.created = 1;
  info.n_ctx = 64;
  return 0;
}

/* /v1/embeddings: a request in range renders with made-up vectors. */
static void check_embeddings(const char *body, size_t len, bool matryoshka, srv_error *e, char **out) {
  enum { N_EMBD = 8 };
  info.embeddings = true;
  info.matryoshka = matryoshka;
  info.n_embd = N_EMBD;
  srv_embd_request r;
  if (!srv_embd_parse(&info, body, len, &r, e)) return;
  if (r.n < 1 || r.n > 2048 || r.dimensions < 1 || r.dimensions > N_EMBD ||
      (!matryoshka && r.dimensions != N_EMBD) || !r.model)
    abort();
  static const float vec[N_EMBD] = {0.5f, -0.5f, 0.25f, 0, 1, -1, 0.125f, 2};
  const float **vecs = malloc((size_t)r.n * sizeof *vecs);
  if (!vecs) abort();
  for (int i = 0; i < r.n; i++) {
    if (r.n_ids[i] < 1 || r.n_ids[i] > info.n_ctx) abort();
    for (int32_t k = 0; k < r.n_ids[i]; k++)
      if (r.ids[i][k] < 0 || r.ids[i][k] >= info.n_vocab) abort();
    vecs[i] = vec;
  }
  r.n_embd = N_EMBD;
  *out = srv_embd_response(&r, vecs);
  if (!*out) abort();
  free(vecs);
  srv_embd_request_free(&r);
}

static void check_request(const srv_request *r) {
  if (r->n_prompt < 1 || r->n_prompt > info.n_ctx) abort(); /* the context's bound is checked */
  for (int32_t i = 0; i < r->n_prompt; i++)
    if (r->prompt[i] < 0 || r->prompt[i] >= info.n_vocab) abort();
  if (r->max_tokens < 1) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  static const pasada_chat_template tmpls[4] = {PASADA_CHAT_CHATML, PASADA_CHAT_GEMMA,
                                                PASADA_CHAT_LLAMA3, PASADA_CHAT_NONE};
  info.tmpl = tmpls[(data[0] >> 2) & 3];
  info.model = models[(data[0] >> 4) & 1];
  info.tok = pasada_model_tokenizer(info.model);
  info.n_vocab = pasada_model_n_vocab(info.model);
  const char *body = (const char *)data + 1;
  const size_t len = size - 1;
  srv_error e;
  memset(&e, 0, sizeof e);
  char *out = NULL;
  info.embeddings = false;
  if (data[0] & 0x20)
    check_embeddings(body, len, (data[0] & 0x40) != 0, &e, &out);
  else
    switch (data[0] & 3) {
      case 0:
      case 1: {
        srv_request r;
        memset(&r, 0, sizeof r);
        const bool ok =
            srv_openai_parse(&info, (data[0] & 3) ? SRV_COMPLETION : SRV_CHAT, body, len, &r, &e);
        if (ok) check_request(&r);
        srv_request_clear(&r);
        if (ok) return 0;
        break;
      }
      case 2:
        out = srv_openai_tokenize(&info, body, len, &e);
        break;
      default:
        out = srv_openai_detokenize(&info, body, len, &e);
        break;
    }
  if (!out) { /* an error with a message, that renders: a client's (4xx), or a
               * 500 for chat without a template (the server's configuration) */
    const bool no_template = !(data[0] & 0x20) && (data[0] & 3) == 0 && info.tmpl == PASADA_CHAT_NONE;
    if (!(e.status >= 400 && e.status <= 499) && !(no_template && e.status == 500)) {
      fprintf(stderr, "status %d: %s\n", e.status, e.message);
      abort();
    }
    if (!e.message[0]) abort();
    out = srv_openai_error_json(&e);
    if (!out) abort();
  }
  free(out);
  return 0;
}
