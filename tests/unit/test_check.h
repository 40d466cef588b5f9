/* test_check.h: the C unit tests' failure counter and CHECK(cond, fmt, ...),
 * which counts a failed condition and prints where it failed, the
 * condition and the message, then lets the test go on. Header-only: each
 * test is one executable. */
#ifndef PASADA_TEST_CHECK_H
#define PASADA_TEST_CHECK_H

#include <stdio.h>

static int failures;

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      failures++;                                                              \
      fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                            \
      fputc('\n', stderr);                                                     \
    }                                                                          \
  } while (0)

#endif
