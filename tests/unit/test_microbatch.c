/* test_microbatch.c: a batch larger than the forward pass's 128 tokens runs
 * as several passes (context.c); its logits must be the same bits as those
 * of the same tokens decoded one at a time. Three sequences interleaved in
 * one 390-token batch, every row's logits asked for, on each tiny model
 * (llama, qwen2, qwen3, gemma3 with its sliding window, and the mixtures
 * of experts qwen3moe, mixtral and gpt-oss, whose experts see other
 * groups of tokens in each pass). And
 * pasada_parallel_for over those rows (as the server samples them): every
 * index runs once, on the context's threads, reading the logits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pasada.h"
#include "test_check.h"

enum { N_SEQ = 3, PER_SEQ = 130, N = N_SEQ * PER_SEQ };

/* pasada_parallel_for's per-row work: the row's largest logit's index,
 * and how many times the row ran. */
typedef struct {
  pasada_context *ctx;
  int32_t n_vocab;
  int32_t best[N];
  _Atomic int runs[N];
} argmax_job;

static int32_t argmax_of(const float *l, int32_t n) {
  int32_t b = 0;
  for (int32_t v = 1; v < n; v++)
    if (l[v] > l[b]) b = v;
  return b;
}

static void argmax_row(void *arg, int32_t i) {
  argmax_job *a = arg;
  a->runs[i]++;
  const float *l = pasada_get_logits(a->ctx, i);
  a->best[i] = l ? argmax_of(l, a->n_vocab) : -1;
}

static pasada_context *make_context(pasada_model *m, int32_t n_batch) {
  pasada_context_params cp = pasada_context_default_params();
  cp.n_ctx = 160;
  cp.n_seq_max = N_SEQ;
  cp.n_batch = n_batch;
  cp.n_threads = 2;
  pasada_context *c = NULL;
  int rc = pasada_context_create(m, &cp, &c);
  CHECK(rc == PASADA_OK, "%s", pasada_last_error());
  return c;
}

static void check_model(const char *path) {
  pasada_model *m = NULL;
  if (pasada_model_load(path, NULL, &m)) {
    CHECK(0, "%s", pasada_last_error());
    return;
  }
  const int32_t n_vocab = pasada_model_n_vocab(m);
  int32_t tok[N], pos[N], seq[N];
  int8_t want[N];
  int32_t len[N_SEQ] = {0};
  uint64_t s = 0x9e3779b97f4a7c15ull;
  for (int32_t i = 0; i < N; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    seq[i] = (int32_t)((s >> 33) % N_SEQ);
    if (len[seq[i]] == PER_SEQ) seq[i] = len[0] < PER_SEQ ? 0 : len[1] < PER_SEQ ? 1 : 2;
    pos[i] = len[seq[i]]++;
    tok[i] = (int32_t)((s >> 17) % (uint64_t)n_vocab);
    want[i] = 1;
  }
  pasada_context *whole = make_context(m, N), *single = make_context(m, 1);
  float *logits = malloc((size_t)N * (size_t)n_vocab * sizeof(float));
  if (whole && single && logits) {
    pasada_batch b = {.n_tokens = N, .token = tok, .pos = pos, .seq_id = seq, .want_logits = want};
    int rc = pasada_decode(whole, &b);
    CHECK(rc == PASADA_OK, "%s: %s", path, pasada_last_error());
    for (int32_t i = 0; i < N && rc == PASADA_OK; i++) {
      const float *l = pasada_get_logits(whole, i);
      CHECK(l != NULL, "%s: no logits for row %d", path, i);
      if (l) memcpy(logits + (size_t)i * (size_t)n_vocab, l, (size_t)n_vocab * sizeof(float));
    }
    argmax_job *aj = calloc(1, sizeof *aj);
    if (aj && rc == PASADA_OK) {
      aj->ctx = whole;
      aj->n_vocab = n_vocab;
      pasada_parallel_for(whole, argmax_row, aj, N);
      int32_t wrong = 0;
      for (int32_t i = 0; i < N; i++)
        wrong += aj->runs[i] != 1 ||
                 aj->best[i] != argmax_of(logits + (size_t)i * (size_t)n_vocab, n_vocab);
      CHECK(wrong == 0, "%s: pasada_parallel_for: %d of %d rows not run once or wrong", path, wrong, N);
    }
    free(aj);
    int32_t mismatched = 0;
    for (int32_t i = 0; i < N && rc == PASADA_OK; i++) {
      pasada_batch one = {.n_tokens = 1, .token = &tok[i], .pos = &pos[i], .seq_id = &seq[i]};
      if ((rc = pasada_decode(single, &one))) break;
      const float *l = pasada_get_logits(single, 0);
      if (memcmp(l, logits + (size_t)i * (size_t)n_vocab, (size_t)n_vocab * sizeof(float)) != 0)
        mismatched++;
    }
    CHECK(rc == PASADA_OK, "%s: %s", path, pasada_last_error());
    CHECK(mismatched == 0, "%s: %d of %d rows differ from one-token decoding", path, mismatched, N);
    for (int k = 0; k < N_SEQ; k++)
      CHECK(pasada_seq_length(whole, k) == PER_SEQ, "%s: sequence %d has %d positions", path, k,
            pasada_seq_length(whole, k));
  }
  free(logits);
  pasada_context_free(whole);
  pasada_context_free(single);
  pasada_model_free(m);
}

int main(void) {
  const char *dir = getenv("PASADA_SOURCE_DIR");
  const char *names[] = {"llama", "qwen2", "qwen3", "gemma3", "qwen3moe", "mixtral", "gpt-oss"};
  for (int i = 0; i < 7; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/fixtures/tiny/%s.gguf", dir ? dir : ".", names[i]);
    check_model(path);
  }
  if (failures) {
    fprintf(stderr, "test_microbatch: %d failures\n", failures);
    return 1;
  }
  printf("test_microbatch: ok\n");
  return 0;
}
