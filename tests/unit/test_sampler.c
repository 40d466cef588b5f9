/* test_sampler.c: the sampler against a plain full-sort reference: greedy,
 * top-k, top-p, min-p, temperature, penalties, seeding, and the empirical
 * distribution of its draws. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "pasada.h"
#include "runtime/sampler.h"
#include "test_check.h"
#include "test_util.h"

/* The test's own generator, independent of the sampler's. */
static uint64_t test_rng = 12345;
static double test_uniform(void) {
  test_rng ^= test_rng << 13;
  test_rng ^= test_rng >> 7;
  test_rng ^= test_rng << 17;
  return (double)(test_rng >> 11) * 0x1.0p-53;
}
static void random_logits(float *l, int32_t n, float scale) {
  for (int32_t i = 0; i < n; i++) l[i] = (float)((test_uniform() * 2.0 - 1.0) * scale);
}

static pasada_sampler *make(pasada_sampler_params p, int32_t n) {
  pasada_sampler *s = NULL;
  int st = pasada_sampler_create(&p, n, &s);
  if (st) {
    fprintf(stderr, "pasada_sampler_create: %s\n", pa_last_error());
    exit(1);
  }
  return s;
}

/* One draw: the token, or -1 when the sampler refuses the call. */
static int32_t sample(pasada_sampler *s, const float *logits, int32_t n_vocab) {
  int32_t id = -1;
  int st = pasada_sampler_sample(s, logits, n_vocab, &id);
  return st == PASADA_OK ? id : -1;
}

static pasada_sampler_params plain(float temp) {
  pasada_sampler_params p = pasada_sampler_default_params();
  p.temp = temp;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = 42;
  return p;
}

/* ---- reference: sort everything, then truncate as the header says ---- */
static const float *ref_logits;
static int ref_cmp(const void *a, const void *b) {
  int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
  if (ref_logits[i] != ref_logits[j]) return ref_logits[i] > ref_logits[j] ? -1 : 1;
  return i < j ? -1 : i > j;
}

static void reference(const pasada_sampler_params *p, const float *l, int32_t n, double *probs) {
  int32_t *idx = malloc((size_t)n * sizeof *idx);
  for (int32_t i = 0; i < n; i++) idx[i] = i;
  ref_logits = l;
  qsort(idx, (size_t)n, sizeof *idx, ref_cmp);
  int32_t m = p->top_k > 0 && p->top_k < n ? p->top_k : n;
  double mx = l[idx[0]];
  if (p->top_p < 1.0f) {
    double z = 0, cum = 0;
    for (int32_t i = 0; i < m; i++) z += exp(l[idx[i]] - mx);
    for (int32_t i = 0; i < m; i++) {
      cum += exp(l[idx[i]] - mx) / z;
      if (cum >= p->top_p) {
        m = i + 1;
        break;
      }
    }
  }
  if (p->min_p > 0.0f) {
    int32_t keep = 0;
    while (keep < m && exp(l[idx[keep]] - mx) >= p->min_p) keep++;
    m = keep > 0 ? keep : 1;
  }
  for (int32_t i = 0; i < n; i++) probs[i] = 0;
  double z = 0;
  for (int32_t i = 0; i < m; i++) z += exp((l[idx[i]] - mx) / p->temp);
  for (int32_t i = 0; i < m; i++) probs[idx[i]] = exp((l[idx[i]] - mx) / p->temp) / z;
  free(idx);
}

/* Largest |sampler - reference| over the vocabulary; also counts the tokens
 * where one side excludes a token the other keeps, and their share of the
 * untruncated distribution's mass (the one top-p cuts). */
static double compare_to_reference(pasada_sampler_params p, const float *l, int32_t n,
                                   int32_t *support_mismatch, double *mismatch_mass) {
  pasada_sampler *s = make(p, n);
  float *got = malloc((size_t)n * sizeof *got);
  double *want = malloc((size_t)n * sizeof *want);
  int st = pa_sampler_distribution(s, l, n, got);
  CHECK(st == PASADA_OK, "%s", pa_last_error());
  reference(&p, l, n, want);
  double worst = 0, mx = -INFINITY, z = 0, mass = 0;
  for (int32_t i = 0; i < n; i++) mx = l[i] > mx ? l[i] : mx;
  for (int32_t i = 0; i < n; i++) z += isfinite(l[i]) ? exp(l[i] - mx) : 0.0;
  *support_mismatch = 0;
  for (int32_t i = 0; i < n; i++) {
    double d = fabs(got[i] - want[i]);
    if (d > worst) worst = d;
    if ((got[i] > 0) != (want[i] > 0)) (*support_mismatch)++, mass += exp(l[i] - mx) / z;
  }
  *mismatch_mass = mass;
  free(got);
  free(want);
  pasada_sampler_free(s);
  return worst;
}

static void test_greedy(void) {
  const int32_t n = 262144;
  float *l = malloc((size_t)n * sizeof *l);
  random_logits(l, n, 10.0f);
  l[777] = 50.0f;
  pasada_sampler *s = make(plain(0.0f), n);
  CHECK(sample(s, l, n) == 777, "argmax");
  l[100] = 50.0f; /* a tie: the lower id wins */
  CHECK(sample(s, l, n) == 100, "tie goes to the lower id");
  l[100] = 49.0f;
  CHECK(sample(s, l, n) == 777, "argmax after change");
  pasada_sampler_free(s);

  /* top_k = 1 at any temperature is greedy, ties included. */
  pasada_sampler_params p = pasada_sampler_default_params();
  p.top_k = 1;
  p.temp = 1.5f;
  p.seed = 7;
  s = make(p, n);
  pasada_sampler *g = make(plain(0.0f), n);
  for (int rep = 0; rep < 20; rep++) {
    random_logits(l, n, 5.0f);
    if (rep % 2) l[n - 1] = l[3] = 9.0f;
    int32_t a = sample(s, l, n), b = sample(g, l, n);
    CHECK(a == b, "top_k=1 gave %d, greedy %d", a, b);
    if (rep % 2) CHECK(a == 3, "tie with top_k=1 went to %d", a);
  }
  pasada_sampler_free(s);
  pasada_sampler_free(g);

  /* greedy against a plain scan (first index of the largest; NaN ignored;
   * 0 when nothing is above -inf) at lengths that leave every tail, with
   * NaNs, -inf runs and the winner near either end (the block maximum is
   * SIMD on x86-64) */
  for (int rep = 0; rep < 200; rep++) {
    const int32_t m = 1 + (int32_t)(test_uniform() * 5000);
    pasada_sampler *gm = make(plain(0.0f), m);
    random_logits(l, m, 8.0f);
    for (int32_t i = 0; i < m; i++) {
      const int r = (int)(test_uniform() * 16);
      if (r == 0) l[i] = NAN;
      if (r == 1) l[i] = -INFINITY;
    }
    if (rep % 3 == 0) l[rep % 2 ? m - 1 : 0] = 100.0f;
    if (rep % 5 == 0) { /* a tie for the best at two random places (or one) */
      const int32_t a = (int32_t)(test_uniform() * m), b = (int32_t)(test_uniform() * m);
      l[a] = l[b] = 200.0f;
    }
    if (rep % 11 == 0) { /* the best a tie of -0 and +0 */
      for (int32_t i = 0; i < m; i++)
        if (l[i] > 0.0f) l[i] = -l[i];
      l[(int32_t)(test_uniform() * m)] = -0.0f;
      l[(int32_t)(test_uniform() * m)] = 0.0f;
    }
    if (rep % 7 == 0)
      for (int32_t i = 0; i < m; i++) l[i] = i % 2 ? NAN : -INFINITY;
    int32_t want = 0;
    float best = -INFINITY;
    for (int32_t i = 0; i < m; i++)
      if (l[i] > best) best = l[i], want = i; /* strict: the first of equals; NaN never */
    const int32_t got = sample(gm, l, m);
    CHECK(got == want, "greedy over %d logits gave %d, the plain scan %d", m, got, want);
    pasada_sampler_free(gm);
  }
  free(l);
}

static void test_seeded(void) {
  const int32_t n = 50000;
  float *l = malloc((size_t)n * sizeof *l);
  random_logits(l, n, 3.0f);
  pasada_sampler_params p = pasada_sampler_default_params();
  p.seed = 1234;
  p.top_k = 0;
  p.min_p = 0.0f;
  pasada_sampler *a = make(p, n), *b = make(p, n);
  p.seed = 1235;
  pasada_sampler *c = make(p, n);
  const int draws = test_reps(200, 20);
  int32_t first[200];
  int same_ab = 0, same_ac = 0;
  for (int i = 0; i < draws; i++) {
    int32_t x = sample(a, l, n), y = sample(b, l, n), z = sample(c, l, n);
    first[i] = x;
    same_ab += x == y;
    same_ac += x == z;
  }
  CHECK(same_ab == draws, "same seed: %d of %d draws equal", same_ab, draws);
  CHECK(same_ac < draws / 4, "different seeds: %d of %d draws equal", same_ac, draws);
  CHECK(pasada_sampler_seed(a) == 1234, "seed reported");
  pasada_sampler_reset(a);
  int again = 0;
  for (int i = 0; i < draws; i++) again += sample(a, l, n) == first[i];
  CHECK(again == draws, "after reset: %d of %d draws repeat", again, draws);

  p.seed = PASADA_SEED_RANDOM;
  pasada_sampler *r = make(p, n);
  CHECK(pasada_sampler_seed(r) != PASADA_SEED_RANDOM, "a random seed was drawn");
  pasada_sampler_free(a);
  pasada_sampler_free(b);
  pasada_sampler_free(c);
  pasada_sampler_free(r);
  free(l);
}

/* Draws at temperature T with no truncation follow softmax(l / T): a
 * chi-square test over many draws with fixed seeds. */
static void test_distribution(void) {
  const float l[8] = {2.0f, 1.0f, 0.5f, 0.0f, -0.5f, -1.0f, 1.5f, -3.0f};
  const int32_t n = 8;
  const float temps[2] = {1.0f, 0.6f};
  for (int t = 0; t < 2; t++) {
    pasada_sampler *s = make(plain(temps[t]), n);
    double want[8], z = 0;
    for (int i = 0; i < n; i++) z += exp(l[i] / temps[t]);
    for (int i = 0; i < n; i++) want[i] = exp(l[i] / temps[t]) / z;

    float probs[8];
    pa_sampler_distribution(s, l, n, probs);
    for (int i = 0; i < n; i++)
      CHECK(fabs(probs[i] - want[i]) < 1e-6, "T=%g p[%d] %g vs %g", temps[t], i, probs[i], want[i]);

    const int draws = 200000;
    long count[8] = {0};
    for (int d = 0; d < draws; d++) {
      int32_t id = sample(s, l, n);
      CHECK(id >= 0 && id < n, "id %d", id);
      if (id >= 0 && id < n) count[id]++;
    }
    double chi2 = 0;
    for (int i = 0; i < n; i++) {
      double e = want[i] * draws;
      chi2 += (count[i] - e) * (count[i] - e) / e;
    }
    /* 7 degrees of freedom: P(chi2 > 24.32) = 0.001. */
    CHECK(chi2 < 24.32, "T=%g chi-square %.2f", temps[t], chi2);
    pasada_sampler_free(s);
  }
}

/* The whole vocabulary without truncation (weights by block, drawn by
 * skipping whole blocks) and top-p over it (buckets): a vocabulary of a
 * size that is no multiple of the SIMD widths or of the 64-token blocks,
 * with -infinity and NaN logits in the vectorised body and in the tails
 * (they must weigh nothing and never be drawn), and 24 likely tokens
 * spread over many blocks: the draws follow their probabilities (chi-square
 * over the 24 and the rest together). */
/* The sampler's distribution against the reference's: a token at the top-p
 * boundary may fall either way by rounding of the cumulative sum (the
 * sampler's float weights against the reference's doubles), so tokens kept
 * by one side only are allowed when there is one, or when together they
 * hold under 1e-6 of the mass: a flat tail of 131075 tokens puts several
 * within that rounding of the boundary (one case: five tokens of 3.2e-8
 * each, their weights within 2e-4 of each other). */
static void check_reference(pasada_sampler_params p, const float *l, int32_t n, const char *what,
                            size_t c) {
  int32_t mismatch;
  double mass;
  double worst = compare_to_reference(p, l, n, &mismatch, &mass);
  CHECK(mismatch <= 1 || mass < 1e-6,
        "%s case %zu: %d tokens (%.3g of the mass) kept by one side only", what, c, mismatch, mass);
  CHECK(worst < 1e-4, "%s case %zu: max difference %g", what, c, worst);
}

static void test_whole_vocabulary(void) {
  const int32_t n = 1003;
  float *l = malloc((size_t)n * sizeof *l);
  float *probs = malloc((size_t)n * sizeof *probs);
  random_logits(l, n, 1.0f);
  enum { HOT = 24 };
  int32_t hot[HOT];
  for (int h = 0; h < HOT; h++) {
    hot[h] = 3 + h * 41 + (h % 5); /* up to id 951: blocks 0 .. 14 */
    l[hot[h]] = 4.0f + 0.1f * (float)h;
  }
  const int32_t bad[] = {1, 2, 17, 64, 65, 511, 997, 1000, 1001, 1002};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) l[bad[k]] = k % 2 ? NAN : -INFINITY;
  for (int c = 0; c < 2; c++) {
    pasada_sampler_params p = plain(c ? 1.0f : 0.7f);
    if (c) p.top_p = 0.999f; /* top-p within 8 of the best keeps all but the least likely */
    pasada_sampler *s = make(p, n);
    CHECK(pa_sampler_distribution(s, l, n, probs) == PASADA_OK, "%s", pa_last_error());
    double want[n], z = 0, mass = 0;
    for (int32_t i = 0; i < n; i++) want[i] = isfinite(l[i]) ? exp(l[i] / p.temp) : 0.0;
    for (int32_t i = 0; i < n; i++) z += want[i];
    for (int32_t i = 0; i < n; i++) want[i] /= z;
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
      CHECK(probs[bad[k]] == 0.0f, "case %d: p[%d] = %g for a logit of %g", c, bad[k],
            probs[bad[k]], l[bad[k]]);
    for (int32_t i = 0; i < n; i++) {
      mass += probs[i];
      if (c == 0)
        CHECK(fabs(probs[i] - want[i]) < 1e-6, "case %d: p[%d] %g vs %g", c, i, probs[i], want[i]);
    }
    CHECK(fabs(mass - 1.0) < 1e-5, "case %d: mass %g", c, mass);

    const int draws = test_reps(100000, 10000); /* expected counts stay in the tens at least */
    long count[HOT + 1] = {0};
    double expect[HOT + 1] = {0};
    for (int32_t i = 0; i < n; i++) expect[HOT] += probs[i];
    for (int h = 0; h < HOT; h++) expect[h] = probs[hot[h]], expect[HOT] -= probs[hot[h]];
    int stray = 0;
    for (int d = 0; d < draws; d++) {
      const int32_t id = sample(s, l, n);
      int h = 0;
      while (h < HOT && hot[h] != id) h++;
      count[h]++;
      stray += id < 0 || id >= n || probs[id] == 0.0f;
    }
    CHECK(stray == 0, "case %d: %d draws of an impossible token", c, stray);
    double chi2 = 0;
    for (int h = 0; h <= HOT; h++) {
      const double e = expect[h] * draws;
      chi2 += (count[h] - e) * (count[h] - e) / e;
    }
    /* 24 degrees of freedom: P(chi2 > 51.18) = 0.001 */
    CHECK(chi2 < 51.18, "case %d: chi-square %.2f", c, chi2);
    pasada_sampler_free(s);
  }
  free(l);
  free(probs);
}

static void test_truncation(void) {
  /* probabilities 0.5 0.3 0.15 0.05 */
  const float l[4] = {logf(0.5f), logf(0.3f), logf(0.15f), logf(0.05f)};
  float probs[4];
  struct {
    int top_k;
    float top_p, min_p;
    int kept; /* the first `kept` ids survive */
  } cases[] = {
      {0, 0.75f, 0.0f, 2},  {0, 0.85f, 0.0f, 3}, {0, 0.4f, 0.0f, 1}, {0, 1.0f, 0.0f, 4},
      {0, 1.0f, 0.2f, 3},   {0, 1.0f, 0.7f, 1},  {0, 1.0f, 0.5f, 2}, {3, 1.0f, 0.0f, 3},
      {3, 0.75f, 0.0f, 2},  {2, 1.0f, 0.2f, 2},  {3, 1.0f, 0.2f, 3}, {0, 0.85f, 0.4f, 2},
      {3, 0.99f, 0.05f, 3}, {0, 0.0f, 0.0f, 1},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    pasada_sampler_params p = plain(1.0f);
    p.top_k = cases[c].top_k;
    p.top_p = cases[c].top_p;
    p.min_p = cases[c].min_p;
    pasada_sampler *s = make(p, 4);
    pa_sampler_distribution(s, l, 4, probs);
    double mass = 0;
    for (int i = 0; i < 4; i++) mass += probs[i];
    for (int i = 0; i < 4; i++)
      CHECK((probs[i] > 0) == (i < cases[c].kept), "case %zu (k %d p %g min_p %g): p[%d] = %g", c,
            p.top_k, p.top_p, p.min_p, i, probs[i]);
    CHECK(fabs(mass - 1.0) < 1e-5, "case %zu: mass %g", c, mass);
    /* and draws never leave the kept set */
    for (int d = 0; d < 2000; d++) {
      int32_t id = sample(s, l, 4);
      CHECK(id >= 0 && id < cases[c].kept, "case %zu drew %d", c, id);
      if (!(id >= 0 && id < cases[c].kept)) break;
    }
    pasada_sampler_free(s);
  }

  /* Full vocabularies against the reference, through each path: top-k heap,
   * growing top-p prefix (flat logits need thousands of candidates),
   * min-p threshold without sorting. */
  const int32_t n = 262144;
  float *big = malloc((size_t)n * sizeof *big);
  struct {
    int top_k;
    float top_p, min_p, temp, scale;
  } full[] = {
      {40, 0.95f, 0.05f, 0.8f, 8.0f}, {0, 0.95f, 0.05f, 0.8f, 8.0f}, {0, 0.5f, 0.0f, 1.0f, 0.5f},
      {0, 0.9f, 0.0f, 1.3f, 15.0f},   {0, 1.0f, 0.1f, 1.0f, 4.0f},   {1000, 0.6f, 0.0f, 0.7f, 2.0f},
      {0, 1.0f, 0.0f, 1.0f, 1.0f},    {0, 0.99f, 0.3f, 1.0f, 1.0f},
  };
  for (size_t c = 0; c < sizeof full / sizeof full[0]; c++) {
    random_logits(big, n, full[c].scale);
    pasada_sampler_params p = plain(full[c].temp);
    p.top_k = full[c].top_k;
    p.top_p = full[c].top_p;
    p.min_p = full[c].min_p;
    check_reference(p, big, n, "full", c);
  }
  free(big);
}

/* Top-p over peaked logits, as real models give (most of the mass within
 * a few of the best logit): the sampler then orders only the tokens near
 * the best one, trying windows of 4, 8 and 16 before it falls back to the
 * buckets. Each case has its best token at 6, `hot` tokens between 6 - gap
 * - spread and 6 - gap, and a background of logits within 2 of `background`,
 * so the kept set ends within the window the comment names, or the buckets
 * decide (the near set too large, or too light). NaN logits must weigh what
 * -inf ones do. */
static void test_top_p_peaked(void) {
  const int32_t n = 131075; /* the SIMD loops' tails too */
  float *l = malloc((size_t)n * sizeof *l);
  float *l_inf = malloc((size_t)n * sizeof *l_inf);
  float *got = malloc((size_t)n * sizeof *got);
  float *got_inf = malloc((size_t)n * sizeof *got_inf);
  struct {
    int32_t hot;
    float gap, spread, background, top_p, min_p, temp;
  } cases[] = {
      {300, 0.0f, 3.0f, -20.0f, 0.9f, 0.0f, 1.0f},    /* window 4 */
      {300, 0.0f, 3.0f, -20.0f, 0.3f, 0.0f, 1.0f},    /* 4, a light set */
      {300, 4.5f, 3.0f, -20.0f, 0.95f, 0.0f, 0.8f},   /* 8 */
      {2000, 9.0f, 6.0f, -20.0f, 0.99f, 0.0f, 1.0f},  /* 16 */
      {2000, 0.0f, 3.5f, -20.0f, 0.9f, 0.0f, 1.2f},   /* 4, a large set */
      {9000, 0.0f, 2.0f, -20.0f, 0.9f, 0.0f, 1.0f},   /* too many within 4: buckets */
      {5000, 4.5f, 3.0f, -20.0f, 0.9f, 0.0f, 1.0f},   /* 4 too light, 8 too many: buckets */
      {0, 0.0f, 0.0f, -12.5f, 0.999f, 0.0f, 1.0f},    /* the background's mass: buckets */
      {300, 0.0f, 5.0f, -20.0f, 0.95f, 0.2f, 1.0f},   /* min-p cuts inside the window */
      {0, 0.0f, 0.0f, -20.0f, 0.9f, 0.0f, 1.0f},      /* one token holds it all */
      {300, 0.0f, 3.0f, -20.0f, 0.0f, 0.0f, 1.0f},    /* top-p 0: the best alone */
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    random_logits(l, n, 2.0f);
    for (int32_t i = 0; i < n; i++) l[i] += cases[c].background;
    for (int32_t h = 0; h < cases[c].hot; h++)
      l[(int32_t)(test_uniform() * n)] =
          6.0f - cases[c].gap - cases[c].spread * (float)test_uniform();
    l[(int32_t)(test_uniform() * n)] = 6.0f;
    if (cases[c].hot) l[n - 3] = 6.0f - cases[c].gap;
    l[n - 2] = NAN;
    l[n - 1] = -INFINITY;
    for (int32_t k = 0; k < 64; k++) { /* some near the top, some low; never the best */
      const int32_t i = (int32_t)(test_uniform() * n);
      if (l[i] < 5.9f) l[i] = k % 2 ? NAN : -INFINITY;
    }
    for (int32_t i = 0; i < n; i++) l_inf[i] = isnan(l[i]) ? -INFINITY : l[i];
    pasada_sampler_params p = plain(cases[c].temp);
    p.top_p = cases[c].top_p;
    p.min_p = cases[c].min_p;
    check_reference(p, l_inf, n, "peaked", c);

    pasada_sampler *s = make(p, n);
    CHECK(pa_sampler_distribution(s, l, n, got) == PASADA_OK, "%s", pa_last_error());
    CHECK(pa_sampler_distribution(s, l_inf, n, got_inf) == PASADA_OK, "%s", pa_last_error());
    int32_t differ = 0;
    for (int32_t i = 0; i < n; i++) differ += got[i] != got_inf[i];
    CHECK(differ == 0, "peaked case %zu: NaN and -inf logits give %d different p", c, differ);
    int stray = 0;
    for (int d = 0; d < test_reps(200, 10); d++) {
      const int32_t id = sample(s, l, n);
      stray += id < 0 || id >= n || got[id] == 0.0f;
    }
    CHECK(stray == 0, "peaked case %zu: %d draws outside the kept set", c, stray);
    pasada_sampler_free(s);
  }
  free(l);
  free(l_inf);
  free(got);
  free(got_inf);
}

static void test_penalties(void) {
  const int32_t n = 10;
  float base[10] = {2.0f, -2.0f, 1.0f, -1.0f, 0.5f, 0.0f, 3.0f, -3.0f, 4.0f, 1.5f};
  float l[10];

  /* repetition: positive divided, negative multiplied, once per token however often */
  pasada_sampler_params p = plain(0.0f);
  p.repeat_penalty = 2.0f;
  p.repeat_last_n = 64;
  pasada_sampler *s = make(p, n);
  pasada_sampler_accept(s, 0);
  pasada_sampler_accept(s, 1);
  pasada_sampler_accept(s, 1);
  pasada_sampler_accept(s, 5);
  pasada_sampler_accept(s, -3);  /* ignored */
  pasada_sampler_accept(s, 999); /* ignored */
  memcpy(l, base, sizeof l);
  pa_sampler_penalize(s, l, n);
  CHECK(l[0] == 1.0f, "positive logit halved: %g", l[0]);
  CHECK(l[1] == -4.0f, "negative logit doubled once: %g", l[1]);
  CHECK(l[5] == 0.0f, "zero stays zero: %g", l[5]);
  for (int i = 2; i < n; i++)
    if (i != 5) CHECK(l[i] == base[i], "untouched logit %d changed", i);
  /* greedy on the penalised logits: 8 (4.0) stays best; penalise it away */
  CHECK(sample(s, base, n) == 8, "greedy with penalties");
  pasada_sampler_accept(s, 8); /* 4.0 -> 2.0: 6 (3.0) is now best */
  CHECK(sample(s, base, n) == 6, "the penalty changes the pick");
  pasada_sampler_reset(s);
  memcpy(l, base, sizeof l);
  pa_sampler_penalize(s, l, n);
  CHECK(!memcmp(l, base, sizeof l), "reset empties the window");
  pasada_sampler_free(s);

  /* presence and frequency: l -= count * frequency + presence */
  p = plain(0.0f);
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  s = make(p, n);
  for (int i = 0; i < 3; i++) pasada_sampler_accept(s, 2);
  pasada_sampler_accept(s, 3);
  memcpy(l, base, sizeof l);
  pa_sampler_penalize(s, l, n);
  CHECK(fabsf(l[2] - (1.0f - 3 * 0.25f - 0.5f)) < 1e-6f, "count 3: %g", l[2]);
  CHECK(fabsf(l[3] - (-1.0f - 0.25f - 0.5f)) < 1e-6f, "count 1: %g", l[3]);
  CHECK(l[4] == base[4], "unseen token untouched");
  pasada_sampler_free(s);

  /* the window holds the last repeat_last_n tokens only */
  p = plain(0.0f);
  p.frequency_penalty = 1.0f;
  p.repeat_last_n = 3;
  s = make(p, n);
  int32_t seq[] = {0, 0, 4, 9, 9}; /* window after: 4 9 9 */
  for (size_t i = 0; i < sizeof seq / sizeof seq[0]; i++) pasada_sampler_accept(s, seq[i]);
  memcpy(l, base, sizeof l);
  pa_sampler_penalize(s, l, n);
  CHECK(l[0] == base[0], "token 0 left the window: %g", l[0]);
  CHECK(l[4] == base[4] - 1.0f, "token 4 once: %g", l[4]);
  CHECK(l[9] == base[9] - 2.0f, "token 9 twice: %g", l[9]);
  pasada_sampler_free(s);

  /* repeat_last_n = -1: every accepted token (beyond the initial capacity) */
  p.repeat_last_n = -1;
  s = make(p, n);
  for (int i = 0; i < 1000; i++) pasada_sampler_accept(s, i % 2 ? 7 : 1);
  memcpy(l, base, sizeof l);
  pa_sampler_penalize(s, l, n);
  CHECK(l[1] == base[1] - 500.0f && l[7] == base[7] - 500.0f, "unbounded window: %g %g", l[1],
        l[7]);
  pasada_sampler_free(s);

  /* repeat_last_n = 0: no penalties */
  p.repeat_last_n = 0;
  s = make(p, n);
  pasada_sampler_accept(s, 8);
  CHECK(sample(s, base, n) == 8, "window disabled");
  pasada_sampler_free(s);
}

static void test_errors(void) {
  pasada_sampler *s = NULL;
  pasada_sampler_params p = pasada_sampler_default_params();
  p.top_p = 1.5f;
  CHECK(pasada_sampler_create(&p, 10, &s) == PASADA_ERR_ARG && !s, "top_p > 1 rejected");
  CHECK(strstr(pa_last_error(), "top_p") != NULL, "message names the field: %s", pa_last_error());
  p = pasada_sampler_default_params();
  p.repeat_penalty = 0.0f;
  CHECK(pasada_sampler_create(&p, 10, &s) == PASADA_ERR_ARG, "repeat_penalty 0 rejected");
  p = pasada_sampler_default_params();
  p.top_k = -1;
  CHECK(pasada_sampler_create(&p, 10, &s) == PASADA_ERR_ARG, "negative top_k rejected");
  CHECK(pasada_sampler_create(NULL, 0, &s) == PASADA_ERR_ARG, "n_vocab 0 rejected");
  CHECK(pasada_sampler_create(NULL, 10, &s) == PASADA_OK, "defaults accepted");
  float l[10] = {0};
  int32_t got = 0;
  CHECK(pasada_sampler_sample(s, l, 9, &got) == PASADA_ERR_ARG && got == -1,
        "wrong n_vocab rejected");
  CHECK(pasada_sampler_sample(s, NULL, 10, &got) == PASADA_ERR_ARG, "no logits rejected");
  CHECK(pasada_sampler_sample(s, l, 10, NULL) == PASADA_ERR_ARG, "no output rejected");
  /* all logits masked: still a valid id */
  for (int i = 0; i < 10; i++) l[i] = -INFINITY;
  int32_t id = sample(s, l, 10);
  CHECK(id >= 0 && id < 10, "masked logits gave %d", id);
  pasada_sampler_free(s);
}

/* Not a check: how long a draw takes on a Gemma-3-sized vocabulary. */
static void report_speed(void) {
  const int32_t n = 262144;
  float *l = malloc((size_t)n * sizeof *l);
  random_logits(l, n, 8.0f);
  pasada_sampler_params p = pasada_sampler_default_params();
  p.seed = 1;
  p.repeat_penalty = 1.1f;
  pasada_sampler *s = make(p, n);
  for (int i = 0; i < 64; i++) pasada_sampler_accept(s, i * 97);
  const int reps = test_reps(200, 10);
  double t0 = pa_time_s();
  for (int i = 0; i < reps; i++) sample(s, l, n);
  double dt = (pa_time_s() - t0) / reps;
  printf("sampler: %.1f us per token at n_vocab %d (defaults + repeat penalty)\n", dt * 1e6, n);
  pasada_sampler_free(s);
  s = make(plain(1.0f), n); /* the server's default: OpenAI's temperature 1, top-p 1 */
  t0 = pa_time_s();
  for (int i = 0; i < reps; i++) sample(s, l, n);
  dt = (pa_time_s() - t0) / reps;
  printf("sampler: %.1f us per token at n_vocab %d (temperature 1, no truncation)\n", dt * 1e6, n);
  pasada_sampler_free(s);
  pasada_sampler_params tp = plain(1.0f);
  tp.top_p = 0.9f;
  s = make(tp, n);
  for (int32_t i = 0; i < n; i++) l[i] = l[i] * 0.25f - 12.0f; /* peaked: 200 tokens on top */
  for (int32_t k = 0; k < 200; k++) l[(int32_t)(test_uniform() * n)] = 5.0f * (float)test_uniform();
  t0 = pa_time_s();
  for (int i = 0; i < reps; i++) sample(s, l, n);
  dt = (pa_time_s() - t0) / reps;
  printf("sampler: %.1f us per token at n_vocab %d (top-p 0.9, peaked logits)\n", dt * 1e6, n);
  pasada_sampler_free(s);
  free(l);
}

int main(void) {
  test_greedy();
  test_seeded();
  test_distribution();
  test_whole_vocabulary();
  test_truncation();
  test_top_p_peaked();
  test_penalties();
  test_errors();
  report_speed();
  if (failures) {
    fprintf(stderr, "test_sampler: %d checks failed\n", failures);
    return 1;
  }
  printf("test_sampler: all checks passed\n");
  return 0;
}
