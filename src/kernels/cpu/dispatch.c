/* dispatch.c: the CPU kernel tables and the choice among them. Each SIMD
 * table starts as a copy of the reference and its file overwrites what it
 * implements, so a table is always complete; the choice follows pa_cpu()
 * (which honours PASADA_CPU=scalar|avx2) and can be forced for tests. */
#include <pthread.h>
#include <stdatomic.h>

#include "base/base.h"
#include "kernels/kernels.h"

static pa_cpu_kernels table_avx2, table_avx512, table_avx512_vnni;
static bool has_avx2, has_avx512, has_avx512_vnni;
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void tables_init(void) {
  const pa_cpu_features *f = pa_cpu();
  has_avx2 = f->avx2 && f->fma && f->f16c;
  has_avx512 = has_avx2 && f->avx512f && f->avx512bw && f->avx512vl;
  has_avx512_vnni = has_avx512 && f->avx512vnni;

  table_avx2 = *pa_kernels_reference();
  table_avx2.name = "avx2";
  pa_kernels_fill_avx2(&table_avx2);

  /* AVX-512 keeps the AVX2 kernels for the types it has no wider version of. */
  table_avx512 = table_avx2;
  table_avx512.name = "avx512";
  pa_kernels_fill_avx512(&table_avx512, 0);

  table_avx512_vnni = table_avx2;
  table_avx512_vnni.name = "avx512_vnni";
  pa_kernels_fill_avx512(&table_avx512_vnni, 1);
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

const pa_cpu_kernels *pa_kernels_best(void) {
  const pa_cpu_kernels *k = pa_kernels_avx512_vnni();
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
