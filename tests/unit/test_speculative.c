/* test_speculative.c: speculative decoding's parts without a model:
 * prompt lookup; the acceptance rule, whose emitted tokens must follow the
 * target sampler's distribution p whatever the draft's q (chi-squared over
 * many seeded draws on fresh random p and q, with a control showing the
 * test tells q from p), the point-mass rule's draws equal to plain
 * sampling's under one seed, greedy's argmax; and the KV cache under
 * drafts rolled back: positions hold the values of the tokens the sequence
 * really has, and a block another sequence shares is never written. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "runtime/kv_cache.h"
#include "runtime/sampler.h"
#include "runtime/speculative.h"
#include "test_check.h"

/* ---- prompt lookup ---- */

static void test_lookup(void) {
  int32_t out[8];
  /* ... 1 2 3 9 ... 1 2 3 -> 9 and what follows, from the latest match */
  const int32_t h[] = {5, 1, 2, 3, 9, 8, 7, 6, 1, 2, 3, 4, 4, 1, 2, 3};
  int32_t n = pa_spec_lookup(h, 16, 3, 1, 4, out);
  CHECK(n == 4 && out[0] == 4 && out[1] == 4 && out[2] == 1 && out[3] == 2,
        "latest match of 1 2 3: got %d tokens, first %d", n, n ? out[0] : -1);
  /* the longest n-gram wins over a later shorter one */
  const int32_t h2[] = {7, 8, 9, 1, 5, 9, 2, 7, 8, 9};
  n = pa_spec_lookup(h2, 10, 3, 1, 2, out);
  CHECK(n == 2 && out[0] == 1 && out[1] == 5, "3-gram 7 8 9 -> 1 5: got %d, %d", n, out[0]);
  n = pa_spec_lookup(h2, 10, 3, 3, 8, out);
  CHECK(n == 7 && out[6] == 9, "continuation runs to the end of the history: %d", n);
  /* no match; a too-short history */
  const int32_t h3[] = {1, 2, 3, 4};
  CHECK(pa_spec_lookup(h3, 4, 3, 1, 4, out) == 0, "no earlier occurrence");
  CHECK(pa_spec_lookup(h3, 1, 3, 1, 4, out) == 0, "one token");
  /* falls back to a 1-gram */
  const int32_t h4[] = {4, 6, 3, 2, 4};
  n = pa_spec_lookup(h4, 5, 3, 1, 2, out);
  CHECK(n == 2 && out[0] == 6 && out[1] == 3, "1-gram 4 -> 6 3: %d", n);
}

/* ---- acceptance ---- */

static uint64_t rng_state = 88172645463325252ull;
static double urand(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (double)(rng_state >> 11) * 0x1.0p-53;
}

/* Critical value of chi-squared with df degrees of freedom at p = 0.0001
 * (Wilson-Hilferty). */
static double chi2_crit(int df) {
  const double z = 3.719, a = 2.0 / (9.0 * df);
  const double c = 1 - a + z * sqrt(a);
  return df * c * c * c;
}

/* Chi-squared of counts against probabilities (cells of p < 1e-12 must be
 * empty: a count there is reported as infinite). */
static double chi2(const int *count, const float *p, int n, int draws, int *df) {
  double x = 0;
  *df = -1;
  for (int i = 0; i < n; i++) {
    if (p[i] < 1e-12f) {
      if (count[i]) return INFINITY;
      continue;
    }
    const double e = (double)p[i] * draws;
    x += (count[i] - e) * (count[i] - e) / e;
    ++*df;
  }
  return x;
}

enum { V = 12, DRAWS = 40000 };

/* Draws index from probs with a uniform u. */
static int draw(const float *probs, int n, double u) {
  double acc = 0;
  for (int i = 0; i < n; i++) {
    acc += probs[i];
    if (u < acc) return i;
  }
  for (int i = n - 1; i >= 0; i--)
    if (probs[i] > 0) return i;
  return 0;
}

/* One trial: fresh random logits and draft distribution q; the emitted
 * tokens over DRAWS draws must follow p (the sampler's distribution). */
static void trial_q(int t, const pasada_sampler_params *sp, bool penalties) {
  pasada_sampler *s = NULL;
  CHECK(pasada_sampler_create(sp, V, &s) == PASADA_OK, "%s", pa_last_error());
  if (!s) return;
  float logits[V], p[V], q[V], scratch[V];
  for (int i = 0; i < V; i++) logits[i] = (float)(urand() * 6 - 3);
  if (penalties)
    for (int i = 0; i < 4; i++) pasada_sampler_accept(s, (int32_t)(urand() * V));
  double qs = 0;
  for (int i = 0; i < V; i++) {
    q[i] =
        urand() < 0.25 ? 0.0f : (float)(urand() + 0.01); /* some tokens the draft never proposes */
    qs += q[i];
  }
  for (int i = 0; i < V; i++) q[i] = (float)(q[i] / qs);
  CHECK(pa_sampler_distribution(s, logits, V, p) == PASADA_OK, "%s", pa_last_error());
  int count[V] = {0}, qcount[V] = {0};
  for (int k = 0; k < DRAWS; k++) {
    const int d = draw(q, V, urand());
    qcount[d]++;
    int32_t x;
    bool ok;
    if (pa_spec_accept(s, logits, V, d, q, scratch, &x, &ok) != PASADA_OK || x < 0 || x >= V) {
      CHECK(false, "trial %d: accept failed: %s", t, pa_last_error());
      break;
    }
    CHECK(!ok || x == d, "accepted but emitted %d for draft %d", x, d);
    count[x]++;
  }
  int df, qdf;
  const double x2 = chi2(count, p, V, DRAWS, &df), q2 = chi2(qcount, p, V, DRAWS, &qdf);
  CHECK(df < 1 || x2 < chi2_crit(df), "trial %d: chi-squared %.1f over %d df (critical %.1f)", t,
        x2, df, chi2_crit(df));
  /* control: the draft's own draws are told apart from p (the test has power) */
  double tv = 0;
  for (int i = 0; i < V; i++) tv += fabs((double)p[i] - q[i]);
  if (tv > 0.2)
    CHECK(qdf < 1 || q2 > chi2_crit(qdf > 0 ? qdf : 1), "trial %d: control chi-squared %.1f", t,
          q2);
  pasada_sampler_free(s);
}

/* Point-mass drafts: accept/reject draws equal plain sampling's under the
 * same seed, so the emitted tokens are exactly generation's. */
static void test_point_mass(void) {
  pasada_sampler_params sp = pasada_sampler_default_params();
  sp.seed = 99;
  sp.top_k = 0;
  sp.min_p = 0;
  pasada_sampler *a = NULL, *b = NULL;
  pasada_sampler_create(&sp, V, &a);
  pasada_sampler_create(&sp, V, &b);
  float logits[V], scratch[V];
  int same = 0, acc = 0;
  for (int k = 0; k < 2000; k++) {
    for (int i = 0; i < V; i++) logits[i] = (float)(urand() * 4);
    int32_t x, y;
    bool ok;
    const int32_t d = (int32_t)(urand() * V);
    pasada_sampler_sample(a, logits, V, &x);
    pa_spec_accept(b, logits, V, d, NULL, scratch, &y, &ok);
    same += x == y;
    acc += ok;
    CHECK(ok == (y == d), "accepted iff the draw is the draft");
  }
  CHECK(same == 2000, "point-mass draws equal plain sampling's: %d of 2000", same);
  CHECK(acc > 0 && acc < 2000, "some drafts accepted, some not: %d", acc);
  pasada_sampler_free(a);
  pasada_sampler_free(b);

  /* greedy with a draft distribution: always the argmax */
  sp.temp = 0;
  pasada_sampler *g = NULL;
  pasada_sampler_create(&sp, V, &g);
  float q[V];
  for (int i = 0; i < V; i++) q[i] = 1.0f / V;
  int bad = 0;
  for (int k = 0; k < 500; k++) {
    int best = 0;
    for (int i = 0; i < V; i++) {
      logits[i] = (float)urand();
      if (logits[i] > logits[best]) best = i;
    }
    int32_t y;
    bool ok;
    pa_spec_accept(g, logits, V, (int32_t)(urand() * V), q, scratch, &y, &ok);
    bad += y != best;
  }
  CHECK(bad == 0, "greedy verification emits the argmax: %d misses", bad);
  pasada_sampler_free(g);
}

static void test_acceptance(void) {
  pasada_sampler_params sp = pasada_sampler_default_params();
  sp.seed = 1234;
  sp.top_k = 0, sp.top_p = 1, sp.min_p = 0, sp.temp = 1;
  for (int t = 0; t < 8; t++) trial_q(t, &sp, false);
  /* the sampler's chain applied: temperature, top-k, top-p, min-p, penalties */
  sp.temp = 0.7f, sp.top_k = 8, sp.top_p = 0.9f, sp.min_p = 0.02f, sp.repeat_penalty = 1.3f;
  sp.presence_penalty = 0.5f;
  for (int t = 8; t < 16; t++) trial_q(t, &sp, true);
}

/* ---- the KV cache under rolled-back drafts ---- */

enum { LAYERS = 1, HEADS = 1, HD = 16, BS = 16, SEQS = 4, CTX = 128 };

/* Values at a position: a function of every token up to it (as a real
 * model's K and V are), exact in F32. */
static float prefix_value(const int32_t *tokens, int32_t pos) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t i = 0; i <= pos; i++) h = (h ^ (uint32_t)tokens[i]) * 1099511628211ull;
  return (float)(h % 1000003);
}

/* Writes tokens[from..to) of seq as one batch (a verification pass). */
static void write_batch(pa_kv_cache *kv, int32_t seq, const int32_t *tokens, int32_t from,
                        int32_t to) {
  int32_t s[CTX] = {0}, p[CTX] = {0};
  for (int32_t i = from; i < to; i++) s[i - from] = seq, p[i - from] = i;
  CHECK(pa_kv_reserve(kv, to - from, s, p) == PASADA_OK, "reserve: %s", pa_last_error());
  float k[HD], v[HD];
  for (int32_t i = from; i < to; i++) {
    for (int d = 0; d < HD; d++) k[d] = v[d] = prefix_value(tokens, i) + (float)d;
    pa_kv_store(kv, 0, seq, i, k, v);
  }
  pa_kv_commit(kv, to - from, tokens + from, s, p);
}

static void check_seq(const pa_kv_cache *kv, int32_t seq, const int32_t *tokens, const char *what) {
  float k[HD], v[HD];
  int bad = 0;
  CHECK(kv->len[seq] > 0, "%s: empty", what);
  for (int32_t i = 0; i < kv->len[seq]; i++) {
    pa_kv_load(kv, 0, seq, i, 0, k, v);
    if (k[0] != prefix_value(tokens, i) || v[3] != prefix_value(tokens, i) + 3) bad++;
  }
  CHECK(bad == 0, "%s: %d of %d positions hold another text's values", what, bad, kv->len[seq]);
}

static void test_kv_rollback(void) {
  pa_kv_cache kv;
  CHECK(pa_kv_init_host(&kv, LAYERS, HEADS, HD, HD, PA_KV_F32, SEQS, CTX, BS, 0) == PASADA_OK, "%s",
        pa_last_error());
  int32_t prompt[CTX], drafted[CTX], real[CTX];
  for (int i = 0; i < CTX; i++) {
    prompt[i] = 100 + i % 7;
    drafted[i] = i < 20 ? prompt[i] : 500 + i; /* a draft that fills block 1 and more */
    real[i] = i < 23 ? drafted[i] : 900 + i;   /* 3 drafts accepted, then another text */
  }
  /* seq 0: the prompt, a 14-token draft (block 1 fills and registers), 3 kept */
  write_batch(&kv, 0, drafted, 0, 20);
  write_batch(&kv, 0, drafted, 20, 34);
  pa_kv_truncate(&kv, 0, 23);
  write_batch(&kv, 0, real, 23, 40);
  check_seq(&kv, 0, real, "seq 0 after a rolled-back draft");
  /* a prompt that is the rejected draft attaches only values of its text */
  int32_t m = pa_kv_reuse_prefix(&kv, 1, drafted, 34);
  check_seq(&kv, 1, drafted, "seq 1 attaching the drafted text");
  (void)m;
  int32_t m2 = pa_kv_reuse_prefix(&kv, 2, real, 40);
  CHECK(m2 >= 32, "the kept text is cached: %d positions reused", m2);
  check_seq(&kv, 2, real, "seq 2 attaching the kept text");

  /* seq 3 drafts the same block as seq 1's (the twin is shared), then rolls
   * back into it: the shared block must be copied, not written */
  int32_t m3 = pa_kv_reuse_prefix(&kv, 3, drafted, 20);
  if (m3 < 20) write_batch(&kv, 3, drafted, m3, 20);
  write_batch(&kv, 3, drafted, 20, 33);
  pa_kv_truncate(&kv, 3, 21);
  int32_t other[CTX];
  memcpy(other, drafted, sizeof other);
  for (int i = 21; i < CTX; i++) other[i] = 700 + i;
  write_batch(&kv, 3, other, 21, 36);
  check_seq(&kv, 3, other, "seq 3 after rolling back into a shared block");
  check_seq(&kv, 1, drafted, "seq 1 after seq 3 wrote past its rollback");
  for (int s = 0; s < SEQS; s++) pa_kv_truncate(&kv, s, 0);
  pa_kv_free(&kv);
}

int main(void) {
  test_lookup();
  test_acceptance();
  test_point_mass();
  test_kv_rollback();
  if (failures) {
    fprintf(stderr, "test_speculative: %d failures\n", failures);
    return 1;
  }
  printf("test_speculative: ok\n");
  return 0;
}
