/* simple.c: the smallest complete use of libpasada: load a model, tokenize a
 * prompt, generate N tokens greedily with a context and print the text.
 *
 *   simple MODEL.gguf ["PROMPT" [N]]
 *
 * Build it against an installed pasada with pkg-config:
 *   cc simple.c $(pkg-config --cflags --libs pasada) -o simple
 * or with CMake through find_package(pasada) (examples/CMakeLists.txt). */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pasada.h>

/* One line on stderr naming what failed, and the exit status 1. */
static int fail(const char *what) {
  fprintf(stderr, "simple: %s: %s\n", what, pasada_last_error());
  return 1;
}

int main(int argc, char **argv) {
  if (argc < 2 || argc > 4) {
    fprintf(stderr, "usage: simple MODEL.gguf [\"PROMPT\" [N]]\n");
    return 2;
  }
  const char *model_path = argv[1];
  const char *prompt = argc > 2 ? argv[2] : "The capital of France is";
  long n_predict = 32;
  if (argc > 3) {
    char *end = NULL;
    errno = 0;
    n_predict = strtol(argv[3], &end, 10);
    if (errno || end == argv[3] || *end || n_predict < 1 || n_predict > INT_MAX / 2) {
      fprintf(stderr, "simple: N must be a positive number of tokens, not '%s'\n", argv[3]);
      return 2;
    }
  }
  if (strcmp(pasada_version(), PASADA_VERSION_STRING) != 0)
    fprintf(stderr, "simple: built against pasada %s, running with %s\n", PASADA_VERSION_STRING,
            pasada_version());

  int rc = 1;
  pasada_model *model = NULL;
  pasada_context *ctx = NULL;
  pasada_sampler *sampler = NULL;
  pasada_detok *detok = NULL;
  int32_t *text_tokens = NULL, *tokens = NULL, *pos = NULL, *seq = NULL;
  size_t n_text = 0, n_tokens = 0;

  if (pasada_model_load(model_path, NULL, &model) != PASADA_OK) {
    rc = fail("loading the model");
    goto done;
  }
  const pasada_tokenizer *tok = pasada_model_tokenizer(model);
  const int32_t n_vocab = pasada_model_n_vocab(model);

  /* the prompt's tokens (control tokens' text becomes those tokens), after
   * BOS when the model asks for one */
  if (pasada_tokenize(tok, prompt, strlen(prompt), false, true, &text_tokens, &n_text) != PASADA_OK) {
    rc = fail("tokenizing the prompt");
    goto done;
  }
  const int32_t bos = pasada_tokenizer_bos(tok);
  const bool add_bos = pasada_tokenizer_add_bos(tok) && bos >= 0;
  tokens = malloc((n_text + 1) * sizeof *tokens);
  pos = malloc((n_text + 1) * sizeof *pos);
  seq = calloc(n_text + 1, sizeof *seq);
  if (!tokens || !pos || !seq) {
    fprintf(stderr, "simple: out of memory\n");
    goto done;
  }
  if (add_bos) tokens[n_tokens++] = bos;
  memcpy(tokens + n_tokens, text_tokens, n_text * sizeof *tokens);
  n_tokens += n_text;
  if (n_tokens == 0) {
    fprintf(stderr, "simple: the prompt gives no tokens\n");
    goto done;
  }

  /* one sequence, the whole prompt in one batch */
  pasada_context_params cp = pasada_context_default_params();
  cp.n_seq_max = 1;
  if (cp.n_batch < (int32_t)n_tokens) cp.n_batch = (int32_t)n_tokens;
  if (pasada_context_create(model, &cp, &ctx) != PASADA_OK) {
    rc = fail("creating the context");
    goto done;
  }
  const int32_t n_ctx = pasada_context_n_ctx(ctx);
  if ((int64_t)n_tokens >= n_ctx) {
    fprintf(stderr, "simple: the prompt is %zu tokens, the context holds %d\n", n_tokens, n_ctx);
    goto done;
  }
  pasada_sampler_params sp = pasada_sampler_default_params();
  sp.temp = 0.0f; /* greedy: the most likely token each time */
  if (pasada_sampler_create(&sp, n_vocab, &sampler) != PASADA_OK ||
      pasada_detok_create(tok, false, &detok) != PASADA_OK) {
    rc = fail("creating the sampler");
    goto done;
  }

  /* the prompt: positions 0..n-1 of sequence 0; logits of its last token */
  for (size_t i = 0; i < n_tokens; i++) pos[i] = (int32_t)i;
  pasada_batch batch = {.n_tokens = (int32_t)n_tokens, .token = tokens, .pos = pos, .seq_id = seq};
  if (pasada_decode(ctx, &batch) != PASADA_OK) {
    rc = fail("decoding the prompt");
    goto done;
  }
  for (size_t i = 0; i < n_tokens; i++) pasada_sampler_accept(sampler, tokens[i]);

  /* then one token at a time: sample, print, decode it (until the end of
   * generation, N tokens or a full context) */
  char piece[PASADA_DETOK_PIECE_MAX];
  int32_t next_pos = (int32_t)n_tokens;
  const int32_t seq0 = 0;
  for (long i = 0; i < n_predict; i++) {
    int32_t id;
    if (pasada_sampler_sample(sampler, pasada_get_logits(ctx, -1), n_vocab, &id) != PASADA_OK) {
      rc = fail("sampling");
      goto done;
    }
    if (pasada_tokenizer_is_eog(tok, id)) break;
    pasada_sampler_accept(sampler, id);
    fwrite(piece, 1, pasada_detok_push(detok, id, piece, sizeof piece), stdout);
    if (i + 1 == n_predict || next_pos >= n_ctx) break;
    pasada_batch one = {.n_tokens = 1, .token = &id, .pos = &next_pos, .seq_id = &seq0};
    if (pasada_decode(ctx, &one) != PASADA_OK) {
      rc = fail("decoding");
      goto done;
    }
    next_pos++;
  }
  fwrite(piece, 1, pasada_detok_flush(detok, piece, sizeof piece), stdout);
  fputc('\n', stdout);
  rc = fflush(stdout) == 0 ? 0 : 1;

done:
  free(tokens);
  free(pos);
  free(seq);
  pasada_text_free(text_tokens);
  pasada_detok_free(detok);
  pasada_sampler_free(sampler);
  pasada_context_free(ctx);
  pasada_model_free(model);
  return rc;
}
