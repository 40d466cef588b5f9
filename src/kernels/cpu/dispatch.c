/* dispatch.c: the CPU kernel tables and the choice among them. Each SIMD
 * table starts as a copy of the reference and its file overwrites what it
 * implements, so a table is always complete; the choice follows pa_cpu()
 * (which honours PASADA_CPU=scalar|avx2|avx512_vnni); a backend may run
 * any of them by name. The AMX table is the VNNI one with tile kernels for
 * batches. Everything here is set once (pthread_once) and read-only after:
 * the choice of a table and its prefetch distances travel with each product
 * (pa_cpu_exec), so contexts of different models never share mutable state. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "base/env.h"
#include "kernels/kernels.h"

static pa_cpu_kernels table_avx2, table_avx512, table_avx512_vnni, table_amx;
static pa_vec_dot_xs_fn xs_avx512[PA_TYPE_COUNT], xs_avx512_vnni[PA_TYPE_COUNT];
static const pa_gemm_kernel *gemm_avx2[PA_TYPE_COUNT], *gemm_avx512[PA_TYPE_COUNT],
    *gemm_avx512_vnni[PA_TYPE_COUNT];
static bool has_avx2, has_avx512, has_avx512_vnni, has_amx;
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

/* The CPU's prefetch defaults (kernels.h, docs/architecture.md) and
 * which of them the environment set (pa_prefetch_fit leaves those). */
static pa_prefetch pf_defaults = {.avx512 = 16384, .x4 = 16384, .avx2 = 8192, .start = 0, .batch = 0};
static pa_env_prefetch pf_env;
int pa_prefetch_q6k_file;

static void tables_init(void) {
  const pa_cpu_features *f = pa_cpu();
  /* how the streaming kernels ask for their weights (kernels.h) */
  if (f->amd && f->avx512f) {
    pf_defaults.avx512 = pf_defaults.x4 = 0;
    pf_defaults.start = 32768;
    pf_defaults.batch = 4096;
  }
  pa_env_get_prefetch(&pf_env);
  if (pf_env.one_token >= 0) pf_defaults.avx512 = pf_defaults.x4 = pf_defaults.avx2 = pf_env.one_token;
  if (pf_env.x4 >= 0) pf_defaults.x4 = pf_env.x4;
  if (pf_env.start >= 0) pf_defaults.start = pf_env.start;
  if (pf_env.batch >= 0) pf_defaults.batch = pf_env.batch;
  pa_prefetch_q6k_file = pf_defaults.avx512;
  has_avx2 = f->avx2 && f->fma && f->f16c;
  has_avx512 = has_avx2 && f->avx512f && f->avx512bw && f->avx512vl;
  has_avx512_vnni = has_avx512 && f->avx512vnni;
  has_amx = has_avx512_vnni && f->amx_int8;

#if defined(__x86_64__) /* elsewhere pa_cpu() reports none of these tables' features */
  table_avx2 = *pa_kernels_reference();
  table_avx2.name = "avx2";
  pa_kernels_fill_avx2(&table_avx2);
  pa_kernels_fill_iq_avx2(&table_avx2);
  pa_kernels_fill_iq_grid_avx2(&table_avx2);
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
  pa_kernels_fill_iq_avx512_vnni(&table_avx512_vnni);
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
  /* Where an AVX-512 table keeps the AVX2 one-token kernel of a type (and
   * has no dot_xs for it), the AVX2 GEMM kernel gives that kernel's bits,
   * so the table takes it too (the grid I-quants). */
  for (int t = 0; t < PA_TYPE_COUNT; t++) {
    if (!gemm_avx512[t] && !xs_avx512[t] && table_avx512.vec_dot[t] == table_avx2.vec_dot[t])
      gemm_avx512[t] = gemm_avx2[t];
    if (!gemm_avx512_vnni[t] && !xs_avx512_vnni[t] &&
        table_avx512_vnni.vec_dot[t] == table_avx2.vec_dot[t])
      gemm_avx512_vnni[t] = gemm_avx2[t];
  }
#endif
}

const pa_prefetch *pa_prefetch_defaults(void) {
  pthread_once(&tables_once, tables_init);
  return &pf_defaults;
}

pa_prefetch pa_prefetch_fit(uint64_t weight_bytes) {
  pthread_once(&tables_once, tables_init);
  pa_prefetch p = pf_defaults;
  const pa_cpu_features *f = pa_cpu();
  if (f->amd || !f->avx512f || weight_bytes == 0) return p;
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  const int d = l3 > 0 && weight_bytes <= (uint64_t)l3 / 4 ? 8192 : 3072;
  if (pf_env.one_token < 0) p.avx512 = d;
  if (pf_env.one_token < 0 && pf_env.x4 < 0) p.x4 = d;
  if (pf_env.batch < 0) p.batch = d;
  return p;
}

static pa_cpu_exec exec_best;
static pthread_once_t exec_once = PTHREAD_ONCE_INIT;

static void exec_best_init(void) { pa_cpu_exec_init(&exec_best, NULL, 0); }

const pa_cpu_exec *pa_cpu_exec_best(void) {
  pthread_once(&exec_once, exec_best_init);
  return &exec_best;
}

void pa_cpu_exec_init(pa_cpu_exec *e, const pa_cpu_kernels *k, uint64_t weight_bytes) {
  if (!k) k = pa_kernels_best();
  e->k = k;
  const pa_isa isa = pa_kernels_isa(k);
  e->ops = isa == PA_ISA_PLAIN ? pa_ops_plain() : isa == PA_ISA_AVX2 ? pa_ops_avx2() : pa_ops_avx512();
  if (!e->ops) e->ops = pa_ops_best();
  e->pf = pa_prefetch_fit(weight_bytes);
}

pa_isa pa_kernels_isa(const pa_cpu_kernels *k) {
  return k == pa_kernels_reference() ? PA_ISA_PLAIN : k == pa_kernels_avx2() ? PA_ISA_AVX2 : PA_ISA_AVX512;
}

static const struct {
  const char *name;
  const pa_cpu_kernels *(*get)(void);
} NAMED[] = {{"scalar", pa_kernels_reference},
             {"avx2", pa_kernels_avx2},
             {"avx512", pa_kernels_avx512},
             {"avx512_vnni", pa_kernels_avx512_vnni},
             {"amx", pa_kernels_amx}};

bool pa_kernels_is_name(const char *name) {
  for (size_t i = 0; name && i < sizeof NAMED / sizeof NAMED[0]; i++)
    if (!strcmp(name, NAMED[i].name)) return true;
  return false;
}

const pa_cpu_kernels *pa_kernels_by_name(const char *name) {
  for (size_t i = 0; name && i < sizeof NAMED / sizeof NAMED[0]; i++)
    if (!strcmp(name, NAMED[i].name)) return NAMED[i].get();
  return NULL;
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
         type == PA_TYPE_Q6_K && pa_prefetch_q6k_file > 0;
}
