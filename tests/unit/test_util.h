/* test_util.h: what the C unit tests share: a seeded xorshift generator
 * whose seed is fresh each run (time and clock) unless PASADA_TEST_SEED
 * replays one, printed so that a failure can be reproduced; and the size
 * knob PASADA_TEST_SCALE of the longest tests; where the chat-template
 * corpus is. Header-only: each test is
 * one executable. */
#ifndef PASADA_TEST_UTIL_H
#define PASADA_TEST_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

static uint64_t rng_state = 0x2545F4914F6CDD1DULL;

static inline uint64_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

/* uniform in [0, 1) */
static inline double rnd_unit(void) {
  return (double)(rng() >> 11) / 9007199254740992.0;
}

/* Seeds rng from PASADA_TEST_SEED or the clock and prints the seed. */
static inline uint64_t test_seed(const char *test) {
  const char *env = getenv("PASADA_TEST_SEED");
  uint64_t seed =
      env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL) * 2654435761u + (uint64_t)clock();
  if (!seed) seed = 1;
  rng_state = seed;
  printf("%s: seed %llu (PASADA_TEST_SEED replays)\n", test, (unsigned long long)seed);
  return seed;
}

/* PASADA_TEST_SCALE, in (0, 1] (default 1): the share of their work that
 * the longest tests do (draws, timed repetitions, cache types per weight
 * type, the tokenizer's long word); every code path they reach stays
 * reached. For an emulated run (scripts/test-aarch64: qemu-user, 10-20x
 * slower than native). Said once per test when below 1. */
static inline double test_scale(void) {
  static int said;
  const char *env = getenv("PASADA_TEST_SCALE");
  double s = env ? strtod(env, NULL) : 1.0;
  if (!(s > 0.0 && s <= 1.0)) s = 1.0;
  if (s < 1.0 && !said++) printf("PASADA_TEST_SCALE=%g: that share of the work\n", s);
  return s;
}

/* n repetitions scaled by test_scale(), at least `least`. */
static inline int test_reps(int n, int least) {
  const int k = (int)((double)n * test_scale() + 0.5);
  return k > least ? k : least;
}

/* The chat-template corpus: $PASADA_CHAT_TEMPLATES, else
 * ../shared/chat-templates beside the checkout at root, else
 * /work/shared/chat-templates (the e2e tests' conftest.CHAT_TEMPLATES looks
 * alike). */
static inline const char *test_templates_dir(const char *root) {
  static char dir[2048];
  const char *env = getenv("PASADA_CHAT_TEMPLATES");
  if (env && *env) return env;
  snprintf(dir, sizeof dir, "%s/../shared/chat-templates", root);
  struct stat sb;
  if (stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode)) return dir;
  return "/work/shared/chat-templates";
}

#endif
