/* env.c: the reading of the environment variables the library uses
 * (env.h); each is read once by what it configures. */
#include "base/env.h"

#include <stdio.h>
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

const char *pa_env_cpu_cap(void) {
  const char *s = getenv("PASADA_CPU");
  if (!s || !*s) return NULL;
  if (strcmp(s, "scalar") && strcmp(s, "avx2") && strcmp(s, "avx512") && strcmp(s, "avx512_vnni")) {
    fprintf(stderr, "pasada: PASADA_CPU=%s ignored: want scalar, avx2, avx512 or avx512_vnni\n", s);
    return NULL;
  }
  return s;
}

int pa_env_log_level(void) {
  const char *s = getenv("PASADA_LOG");
  return s && !strcmp(s, "debug") ? 2 : s && !strcmp(s, "info") ? 1 : 0;
}

const char *pa_env_vulkan_loader(void) {
  const char *s = getenv("PASADA_VULKAN_LOADER");
  return s && *s ? s : NULL;
}

bool pa_env_template_now(int64_t *out) {
  const char *s = getenv("PASADA_TEMPLATE_NOW");
  if (!s || !*s) return false;
  char *end;
  const long long v = strtoll(s, &end, 10);
  if (*end != '\0') {
    pa_log(0, "PASADA_TEMPLATE_NOW=%s ignored: want unix seconds", s);
    return false;
  }
  *out = (int64_t)v;
  return true;
}
