/* two_models: the thread-safety contract of pasada.h, tried for real
 * (tests/e2e/test_threads.py, also under ThreadSanitizer).
 *
 *   two_models MODEL_A MODEL_B [N_TOKENS] [ROUNDS]
 *
 * Loads both models in one process. Each of three jobs (MODEL_A, MODEL_B,
 * and a second context on MODEL_A) greedily decodes N_TOKENS (default 12)
 * after a prompt on a context of its own, with 2 threads, and records the
 * tokens and a hash of every step's logits: first each job alone, one
 * after another, then the three at once from three threads, ROUNDS times
 * (default 2). Every concurrent run must give the bits of its job alone.
 * Prints one line per job; exit status 0 when all agree, 1 on a mismatch
 * or an error (named on stderr). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pasada.h"

#define MAX_TOKENS 64

typedef struct {
  pasada_model *model;
  const char *prompt;
  int32_t n_gen;
  /* results */
  int32_t tokens[MAX_TOKENS];
  uint64_t hash[MAX_TOKENS];
  int rc;
  char err[256];
} job;

static uint64_t fnv1a(const void *p, size_t n, uint64_t h) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

static int fail(job *j, const char *what) {
  snprintf(j->err, sizeof j->err, "%s: %s", what, pasada_last_error());
  return j->rc = 1;
}

static void *run_job(void *arg) {
  job *j = arg;
  j->rc = 0;
  const pasada_tokenizer *tok = pasada_model_tokenizer(j->model);
  int32_t *ids = NULL;
  size_t n_ids = 0;
  if (pasada_tokenize(tok, j->prompt, strlen(j->prompt), true, false, &ids, &n_ids) != PASADA_OK) {
    fail(j, "tokenize");
    return NULL;
  }
  pasada_context_params cp = pasada_context_default_params();
  cp.n_ctx = (int32_t)n_ids + j->n_gen + 1;
  cp.n_threads = 2;
  pasada_context *ctx = NULL;
  if (pasada_context_create(j->model, &cp, &ctx) != PASADA_OK) {
    fail(j, "context");
    pasada_text_free(ids);
    return NULL;
  }
  const int32_t n_vocab = pasada_model_n_vocab(j->model);
  int32_t pos[512], seq[512] = {0};
  for (size_t i = 0; i < n_ids && i < 512; i++) pos[i] = (int32_t)i;
  pasada_batch b = {.n_tokens = (int32_t)n_ids, .token = ids, .pos = pos, .seq_id = seq};
  int32_t at = (int32_t)n_ids;
  for (int32_t step = 0; step < j->n_gen; step++) {
    if (pasada_decode(ctx, &b) != PASADA_OK) {
      fail(j, "decode");
      break;
    }
    const float *lg = pasada_get_logits(ctx, -1);
    int32_t best = 0;
    for (int32_t v = 1; v < n_vocab; v++)
      if (lg[v] > lg[best]) best = v;
    j->tokens[step] = best;
    j->hash[step] = fnv1a(lg, (size_t)n_vocab * sizeof(float), 14695981039346656037ull);
    pos[0] = at++;
    b = (pasada_batch){.n_tokens = 1, .token = &j->tokens[step], .pos = pos, .seq_id = seq};
  }
  pasada_context_free(ctx);
  pasada_text_free(ids);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: two_models MODEL_A MODEL_B [N_TOKENS] [ROUNDS]\n");
    return 2;
  }
  const int32_t n_gen = argc > 3 ? atoi(argv[3]) : 12;
  const int rounds = argc > 4 ? atoi(argv[4]) : 2;
  if (n_gen < 1 || n_gen >= MAX_TOKENS || rounds < 1) {
    fprintf(stderr, "two_models: N_TOKENS must be in [1, %d), ROUNDS >= 1\n", MAX_TOKENS);
    return 2;
  }
  pasada_model *ma = NULL, *mb = NULL;
  if (pasada_model_load(argv[1], NULL, &ma) != PASADA_OK || pasada_model_load(argv[2], NULL, &mb) != PASADA_OK) {
    fprintf(stderr, "two_models: %s\n", pasada_last_error());
    pasada_model_free(ma);
    return 1;
  }
  job alone[3] = {{.model = ma, .prompt = "The capital of France is", .n_gen = n_gen},
                  {.model = mb, .prompt = "Once upon a time, in a small village,", .n_gen = n_gen},
                  {.model = ma, .prompt = "def fibonacci(n):", .n_gen = n_gen}};
  int bad = 0;
  for (int i = 0; i < 3; i++) {
    run_job(&alone[i]);
    if (alone[i].rc) {
      fprintf(stderr, "two_models: job %d alone: %s\n", i, alone[i].err);
      bad = 1;
    }
  }
  for (int r = 0; r < rounds && !bad; r++) {
    job together[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
      together[i] = (job){.model = alone[i].model, .prompt = alone[i].prompt, .n_gen = n_gen};
      if (pthread_create(&th[i], NULL, run_job, &together[i]) != 0) {
        fprintf(stderr, "two_models: cannot start a thread\n");
        return 1;
      }
    }
    for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 3; i++) {
      if (together[i].rc) {
        fprintf(stderr, "two_models: job %d concurrent: %s\n", i, together[i].err);
        bad = 1;
        continue;
      }
      for (int32_t s = 0; s < n_gen; s++)
        if (together[i].tokens[s] != alone[i].tokens[s] || together[i].hash[s] != alone[i].hash[s]) {
          fprintf(stderr, "two_models: round %d job %d step %d: token %d logits %016llx concurrent, "
                          "token %d logits %016llx alone\n",
                  r, i, s, together[i].tokens[s], (unsigned long long)together[i].hash[s], alone[i].tokens[s],
                  (unsigned long long)alone[i].hash[s]);
          bad = 1;
          break;
        }
    }
  }
  for (int i = 0; i < 3; i++) {
    printf("job %d (%s): tokens", i, i == 1 ? "model B" : "model A");
    for (int32_t s = 0; s < n_gen; s++) printf(" %d", alone[i].tokens[s]);
    printf("\n");
  }
  printf("%s\n", bad ? "MISMATCH" : "same bits alone and concurrent");
  pasada_model_free(ma);
  pasada_model_free(mb);
  return bad;
}
