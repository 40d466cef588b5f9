/* dispatch.c: the CPU kernel tables and the choice among them. Each SIMD
 * table starts as a copy of the reference and its file overwrites what it
 * implements, so a table is always complete; the choice follows pa_cpu()
 * (which honours PASADA_CPU=scalar|avx2|avx512_vnni) and can be forced for
 * tests. The AMX table is the VNNI one with tile kernels for batches. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "kernels/kernels.h"

static pa_cpu_kernels table_avx2, table_avx512, table_avx512_vnni, table_amx;
static pa_vec_dot_xs_fn xs_avx512[PA_TYPE_COUNT], xs_avx512_vnni[PA_TYPE_COUNT];
static const pa_gemm_kernel *gemm_avx2[PA_TYPE_COUNT], *gemm_avx512[PA_TYPE_COUNT],
    *gemm_avx512_vnni[PA_TYPE_COUNT];
static bool has_avx2, has_avx512, has_avx512_vnni, has_amx;
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

int pa_prefetch_avx512 = 16384, pa_prefetch_x4 = 16384, pa_prefetch_avx2 = 8192, pa_prefetch_start = 0,
    pa_prefetch_batch = 0;

/* A PASADA_PREFETCH*-style override: bytes from 0 to 1 MB into *out (true),
 * else unset (false) or a warning */
static bool env_bytes(const char *name, int *out) {
  const char *s = getenv(name);
  if (!s || !*s) return false;
  char *end;
  const long v = strtol(s, &end, 10);
  if (*end == '\0' && v >= 0 && v <= (1L << 20)) {
    *out = (int)v;
    return true;
  }
  pa_log(0, "%s=%s ignored: want bytes from 0 to 1048576", name, s);
  return false;
}

/* Whether PASADA_PREFETCH, PASADA_PREFETCH_X4 or PASADA_PREFETCH_BATCH
 * set the distances (pa_kernels_fit_prefetch leaves them then). */
static bool env_one_token, env_x4, env_batch;

static void tables_init(void) {
  const pa_cpu_features *f = pa_cpu();
  /* how the streaming kernels ask for their weights (kernels.h) */
  if (f->amd && f->avx512f) {
    pa_prefetch_avx512 = 0;
    pa_prefetch_start = 32768;
    pa_prefetch_batch = 4096;
  }
  int v;
  if ((env_one_token = env_bytes("PASADA_PREFETCH", &v)))
    pa_prefetch_avx512 = pa_prefetch_x4 = pa_prefetch_avx2 = v;
  if ((env_x4 = env_bytes("PASADA_PREFETCH_X4", &v))) pa_prefetch_x4 = v;
  if (env_bytes("PASADA_PREFETCH_START", &v)) pa_prefetch_start = v;
  if ((env_batch = env_bytes("PASADA_PREFETCH_BATCH", &v))) pa_prefetch_batch = v;
  has_avx2 = f->avx2 && f->fma && f->f16c;
  has_avx512 = has_avx2 && f->avx512f && f->avx512bw && f->avx512vl;
  has_avx512_vnni = has_avx512 && f->avx512vnni;
  has_amx = has_avx512_vnni && f->amx_int8;

  table_avx2 = *pa_kernels_reference();
  table_avx2.name = "avx2";
  pa_kernels_fill_avx2(&table_avx2);
  pa_kernels_fill_ilv_avx2(&table_avx2);
  pa_kernels_fill_ilv_avx2_k16(&table_avx2);

  /* AVX-512 keeps the AVX2 kernels for the types it has no wider version of. */
  table_avx512 = table_avx2;
  table_avx512.name = "avx512";
  pa_kernels_fill_avx512(&table_avx512, 0);
  pa_kernels_fill_avx512_quant(&table_avx512);

  table_avx512_vnni = table_avx2;
  table_avx512_vnni.name = "avx512_vnni";
  pa_kernels_fill_avx512(&table_avx512_vnni, 1);
  pa_kernels_fill_avx512_quant(&table_avx512_vnni);
  pa_kernels_fill_ilv_vnni(&table_avx512_vnni);

  /* AMX: the VNNI table with the tile unit's kernels for batches. */
  table_amx = table_avx512_vnni;
  table_amx.name = "amx";
  pa_kernels_fill_ilv_amx(&table_amx);

  pa_kernels_fill_avx512_xs(xs_avx512, 0);
  pa_kernels_fill_avx512_xs(xs_avx512_vnni, 1);

  pa_kernels_fill_avx2_gemm(gemm_avx2);
  pa_kernels_fill_avx512_gemm(gemm_avx512, 0);
  pa_kernels_fill_avx512_gemm(gemm_avx512_vnni, 1);
}

void pa_kernels_fit_prefetch(uint64_t weight_bytes) {
  pthread_once(&tables_once, tables_init);
  const pa_cpu_features *f = pa_cpu();
  if (f->amd || !f->avx512f) return;
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  const int d = l3 > 0 && weight_bytes <= (uint64_t)l3 / 4 ? 8192 : 3072;
  if (!env_one_token) pa_prefetch_avx512 = d;
  if (!env_one_token && !env_x4) pa_prefetch_x4 = d;
  if (!env_batch) pa_prefetch_batch = d;
}

const pa_cpu_kernels *pa_kernels_avx2(void) {
  pthread_once(&tables_once, tables_init);
  return has_avx2 ? &table_avx2 : NULL;
}

const pa_cpu_kernels *pa_kernels_avx512(void) {
  pthread_once(&tables_once, tables_init);
  return has_avx512 ? &table_avx512 : NULL;
}

const pa_cpu_kernels *pa_kernels_avx512_vnni(void) {
  pthread_once(&tables_once, tables_init);
  return has_avx512_vnni ? &table_avx512_vnni : NULL;
}

const pa_cpu_kernels *pa_kernels_amx(void) {
  pthread_once(&tables_once, tables_init);
  return has_amx ? &table_amx : NULL;
}

const pa_cpu_kernels *pa_kernels_best(void) {
  const pa_cpu_kernels *k = pa_kernels_amx();
  if (!k) k = pa_kernels_avx512_vnni();
  if (!k) k = pa_kernels_avx512();
  if (!k) k = pa_kernels_avx2();
  if (!k) k = pa_kernels_reference();
  return k;
}

static _Atomic(const pa_cpu_kernels *) forced;

void pa_kernels_set(const pa_cpu_kernels *k) { atomic_store(&forced, k); }

const pa_cpu_kernels *pa_kernels_current(void) {
  const pa_cpu_kernels *k = atomic_load_explicit(&forced, memory_order_relaxed);
  return k ? k : pa_kernels_best();
}

pa_vec_dot_xs_fn pa_kernels_vec_dot_xs(const pa_cpu_kernels *k, pa_type type) {
  pthread_once(&tables_once, tables_init);
  if ((unsigned)type >= PA_TYPE_COUNT) return NULL;
  if (k == &table_avx512) return xs_avx512[type];
  if (k == &table_avx512_vnni || k == &table_amx) return xs_avx512_vnni[type];
  return NULL;
}

const pa_gemm_kernel *pa_kernels_gemm(const pa_cpu_kernels *k, pa_type type) {
  pthread_once(&tables_once, tables_init);
  if ((unsigned)type >= PA_TYPE_COUNT) return NULL;
  if (k == &table_avx2) return gemm_avx2[type];
  if (k == &table_avx512) return gemm_avx512[type];
  if (k == &table_avx512_vnni || k == &table_amx) return gemm_avx512_vnni[type];
  return NULL;
}

void pa_prepare_x_sums(pa_type act_type, const void *x, int64_t n, float *d_out, float *sums) {
  const int64_t nb = n / 32;
  if (act_type == PA_TYPE_Q8_1) {
    const block_q8_1 *b = x;
    for (int64_t i = 0; i < nb; i++) {
      pa_f16 d, s;
      memcpy(&d, &b[i].d, 2);
      memcpy(&s, &b[i].s, 2);
      d_out[i] = pa_f16_to_f32(d);
      sums[i] = pa_f16_to_f32(s);
    }
    return;
  }
  const block_q8_0 *b = x;
  for (int64_t i = 0; i < nb; i++) {
    pa_f16 d;
    memcpy(&d, &b[i].d, 2);
    int sum = 0;
    for (int l = 0; l < 32; l++) sum += b[i].qs[l];
    d_out[i] = pa_f16_to_f32(d);
    sums[i] = (float)sum;
  }
}

bool pa_kernels_self_prefetch(const pa_cpu_kernels *k, pa_type type) {
  pthread_once(&tables_once, tables_init);
  /* with no distance set they ask for nothing: the row loop asks instead */
  return (k == &table_avx512 || k == &table_avx512_vnni || k == &table_amx) &&
         type == PA_TYPE_Q6_K && pa_prefetch_avx512 > 0;
}
