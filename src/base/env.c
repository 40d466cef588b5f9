/* env.c: the parsing of the environment variables env.h lists (those the
 * core library reads besides PASADA_CPU and PASADA_LOG, which base.c reads
 * with the CPU features and the logger they configure). */
#include "base/env.h"

#include <stdlib.h>
#include <string.h>

#include "base/base.h"

/* A byte count from 0 to 1 MB, else -1 (unset) or -1 with a warning. */
static int env_bytes(const char *name) {
  const char *s = getenv(name);
  if (!s || !*s) return -1;
  char *end;
  const long v = strtol(s, &end, 10);
  if (*end == '\0' && v >= 0 && v <= (1L << 20)) return (int)v;
  pa_log(0, "%s=%s ignored: want bytes from 0 to 1048576", name, s);
  return -1;
}

void pa_env_get_prefetch(pa_env_prefetch *out) {
  out->one_token = env_bytes("PASADA_PREFETCH");
  out->x4 = env_bytes("PASADA_PREFETCH_X4");
  out->start = env_bytes("PASADA_PREFETCH_START");
  out->batch = env_bytes("PASADA_PREFETCH_BATCH");
}

bool pa_env_no_repack(void) {
  const char *s = getenv("PASADA_REPACK");
  return s && !strcmp(s, "0");
}
