/* test_rollback.c: a model with recurrent layers rolled back inside a batch
 * (pasada_context_params.n_rollback) on the tiny Qwen3.5 fixture: two
 * sequences each decode a prompt, then a 5-token draft in one interleaved
 * batch; each is truncated into its draft and continued with another
 * token, whose logits must equal those of a context that decoded the kept
 * tokens and that token one after another. Also: a truncation past the
 * kept states drops the sequence (as without n_rollback), a one-token pass
 * keeps the range, and the parameter's bounds. And the state snapshots a
 * caller takes (pasada_seq_snapshot) where a prompt ends: truncation inside
 * the positions after one and prefix reuse go back to it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pasada.h"
#include "test_check.h"

enum { NP = 9, ND = 5, CTX = 64 };

static const char *model_path(void) {
  static char path[1024];
  const char *dir = getenv("PASADA_SOURCE_DIR");
  snprintf(path, sizeof path, "%s/tests/fixtures/tiny/qwen35.gguf", dir ? dir : ".");
  return path;
}

static pasada_context *make(pasada_model *m, int32_t n_seq, int32_t n_rollback) {
  pasada_context_params p = pasada_context_default_params();
  p.n_ctx = CTX;
  p.n_seq_max = n_seq;
  p.n_threads = 2;
  p.n_rollback = n_rollback;
  pasada_context *c = NULL;
  CHECK(pasada_context_create(m, &p, &c) == PASADA_OK, "%s", pasada_last_error());
  return c;
}

/* Decodes n tokens of seq from position p0 as one batch; every row's logits. */
static void feed(pasada_context *c, int32_t seq, const int32_t *tok, int32_t n, int32_t p0) {
  int32_t pos[CTX], sq[CTX];
  int8_t want[CTX];
  for (int32_t i = 0; i < n; i++) pos[i] = p0 + i, sq[i] = seq, want[i] = 1;
  const pasada_batch b = {
      .n_tokens = n, .token = tok, .pos = pos, .seq_id = sq, .want_logits = want};
  CHECK(pasada_decode(c, &b) == PASADA_OK, "%s", pasada_last_error());
}

/* The logits after tokens[0..n) decoded one at a time in a fresh context. */
static void reference(pasada_model *m, const int32_t *tok, int32_t n, float *out, int32_t n_vocab) {
  pasada_context *r = make(m, 1, 0);
  if (!r) return;
  for (int32_t i = 0; i < n; i++) feed(r, 0, tok + i, 1, i);
  memcpy(out, pasada_get_logits(r, -1), (size_t)n_vocab * sizeof(float));
  pasada_context_free(r);
}

static double max_diff(const float *a, const float *b, int32_t n) {
  double d = 0;
  for (int32_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i]));
  return d;
}

/* Sequence seq of c (prompt, then draft: NP + ND positions) truncated to
 * keep and continued with token x, against the reference. */
static void continue_check(pasada_model *m, pasada_context *c, int32_t seq, const int32_t *text,
                           int32_t keep, int32_t x, const char *what) {
  const int32_t nv = pasada_model_n_vocab(m);
  float *want = malloc((size_t)nv * sizeof(float));
  int32_t ref[CTX];
  memcpy(ref, text, (size_t)keep * sizeof(int32_t));
  ref[keep] = x;
  reference(m, ref, keep + 1, want, nv);
  feed(c, seq, &x, 1, keep);
  const float *got = pasada_get_logits(c, -1);
  const double d = got ? max_diff(got, want, nv) : INFINITY;
  if (getenv("ROLLBACK_SHOW")) printf("%s %g\n", what, d);
  CHECK(d <= 1e-4, "%s: logits after rolling back to %d and decoding %d differ by %g", what, keep,
        x, d);
  free(want);
}

int main(void) {
  pasada_model *m = NULL;
  if (pasada_model_load(model_path(), NULL, &m) != PASADA_OK) {
    fprintf(stderr, "test_rollback: %s\n", pasada_last_error());
    return 1;
  }
  CHECK(pasada_model_is_recurrent(m), "the fixture has recurrent layers");
  const int32_t nv = pasada_model_n_vocab(m);
  int32_t text[2][NP + ND];
  for (int s = 0; s < 2; s++)
    for (int i = 0; i < NP + ND; i++) text[s][i] = (int32_t)((37 * i + 11 * s + 5) % nv);

  for (int32_t K = 4; K <= 8; K += 4) {
    pasada_context *c = make(m, 2, K);
    if (!c) break;
    for (int s = 0; s < 2; s++) feed(c, s, text[s], NP, 0);
    /* the drafts of both sequences in one batch, interleaved */
    int32_t tok[2 * ND], pos[2 * ND], sq[2 * ND];
    int8_t want[2 * ND];
    for (int i = 0; i < 2 * ND; i++)
      sq[i] = i % 2, tok[i] = text[i % 2][NP + i / 2], pos[i] = NP + i / 2, want[i] = 1;
    const pasada_batch b = {
        .n_tokens = 2 * ND, .token = tok, .pos = pos, .seq_id = sq, .want_logits = want};
    CHECK(pasada_decode(c, &b) == PASADA_OK, "%s", pasada_last_error());
    /* seq 0 keeps 2 drafts, seq 1 keeps 4 */
    pasada_seq_truncate(c, 0, NP + 2);
    pasada_seq_truncate(c, 1, NP + 4);
    CHECK(pasada_seq_length(c, 0) == NP + 2, "K=%d: seq 0 kept %d", K, pasada_seq_length(c, 0));
    CHECK(pasada_seq_length(c, 1) == NP + 4, "K=%d: seq 1 kept %d", K, pasada_seq_length(c, 1));
    continue_check(m, c, 0, text[0], NP + 2, 3, "seq 0");
    continue_check(m, c, 1, text[1], NP + 4, 4, "seq 1");
    /* after a one-token pass the kept states are still there */
    pasada_seq_truncate(c, 0, NP + 2);
    CHECK(pasada_seq_length(c, 0) == NP + 2, "K=%d: seq 0 back to %d after a one-token pass: %d", K,
          NP + 2, pasada_seq_length(c, 0));
    continue_check(m, c, 0, text[0], NP + 2, 6, "seq 0 again");
    /* every draft rejected: the state after the prompt's last token, kept
     * when K covers the whole draft (8), else the sequence is dropped */
    pasada_seq_truncate(c, 1, NP + 1);
    if (K >= ND) {
      CHECK(pasada_seq_length(c, 1) == NP + 1, "K=%d: seq 1 kept %d", K, pasada_seq_length(c, 1));
      continue_check(m, c, 1, text[1], NP + 1, 7, "seq 1, drafts rejected");
    } else {
      CHECK(pasada_seq_length(c, 1) == 0,
            "K=%d: seq 1 truncated past its kept states has %d positions", K,
            pasada_seq_length(c, 1));
    }
    pasada_context_free(c);
  }
  /* without n_rollback the same truncation drops the sequence */
  pasada_context *c = make(m, 1, 0);
  if (c) {
    feed(c, 0, text[0], NP + ND, 0);
    pasada_seq_truncate(c, 0, NP + 2);
    CHECK(pasada_seq_length(c, 0) == 0, "without n_rollback: %d positions kept",
          pasada_seq_length(c, 0));
    pasada_context_free(c);
  }
  /* snapshots taken where a prompt ends (pasada_seq_snapshot): a
   * truncation inside the positions after one goes back to the longest
   * (and keeps it while it saves the full sequence: a newer snapshot is
   * what goes), and a prompt extending one's tokens reuses them */
  c = make(m, 1, 0);
  if (c) {
    feed(c, 0, text[0], NP, 0);
    CHECK(pasada_seq_snapshot(c, 0) == PASADA_OK, "%s", pasada_last_error());
    feed(c, 0, text[0] + NP, 2, NP);
    CHECK(pasada_seq_snapshot(c, 0) == PASADA_OK, "%s", pasada_last_error());
    feed(c, 0, text[0] + NP + 2, ND - 2, NP + 2);
    pasada_seq_truncate(c, 0, NP + 1);
    CHECK(pasada_seq_length(c, 0) == NP, "truncated to %d after a snapshot of %d: %d kept", NP + 1,
          NP, pasada_seq_length(c, 0));
    continue_check(m, c, 0, text[0], NP, 8, "from the prompt's snapshot");
    pasada_seq_truncate(c, 0, 0);
    CHECK(pasada_seq_snapshot(c, 1) == PASADA_ERR_ARG, "a snapshot of sequence 1 of 1 is refused");
    pasada_context_free(c);
  }
  c = make(m, 2, 0);
  if (c) {
    feed(c, 1, text[1], NP, 0);
    CHECK(pasada_seq_snapshot(c, 1) == PASADA_OK, "%s", pasada_last_error());
    feed(c, 1, text[1] + NP, ND, NP);
    pasada_seq_truncate(c, 1, 0);
    int32_t prompt[NP + 2];
    memcpy(prompt, text[1], NP * sizeof(int32_t));
    prompt[NP] = 9, prompt[NP + 1] = 10;
    const int32_t got = pasada_seq_reuse_prefix(c, 0, prompt, NP + 2);
    CHECK(got == NP, "a prompt extending the snapshot of %d tokens reused %d", NP, got);
    if (got == NP) continue_check(m, c, 0, prompt, NP, 9, "reusing the prompt's snapshot");
    pasada_context_free(c);
  }
  /* bounds */
  pasada_context_params p = pasada_context_default_params();
  p.n_rollback = PASADA_ROLLBACK_MAX + 1;
  CHECK(pasada_context_create(m, &p, &c) == PASADA_ERR_ARG,
        "n_rollback past the maximum is refused");
  p.n_rollback = -1;
  CHECK(pasada_context_create(m, &p, &c) == PASADA_ERR_ARG, "a negative n_rollback is refused");
  pasada_model_free(m);
  if (failures) {
    fprintf(stderr, "test_rollback: %d failures\n", failures);
    return 1;
  }
  printf("test_rollback: ok\n");
  return 0;
}
