/* threadpool.c: fork-join worker pool with a spinning wait (then yielding)
 * between jobs. One job at a time: the caller publishes (fn, arg), bumps a
 * generation counter, does its own share, and waits for the others. */
#include "base/threadpool.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"

struct pa_pool {
  int n;
  pthread_t *threads;
  pa_pool_fn fn;
  void *arg;
  _Alignas(64) atomic_uint generation;
  _Alignas(64) atomic_int remaining;
  _Alignas(64) atomic_int stop;
  atomic_int sleepers;
  /* profiling (pa_pool_set_timing): when each thread finished its share,
   * the caller's wait for the others, every thread's idle time till the end;
   * a cache line of their own, away from the lines the workers poll */
  _Alignas(64) bool timing;
  uint64_t *done_ns;
  uint64_t wait_ns, idle_ns;
};

/* After this many pause-spins a waiting worker sleeps on a futex, so an
 * idle or oversubscribed machine does not burn a core per worker. */
#define SPIN_LIMIT 50000

static void futex_wait(atomic_uint *addr, unsigned expected) {
  syscall(SYS_futex, (unsigned *)addr, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}
static void futex_wake_all(atomic_uint *addr) {
  syscall(SYS_futex, (unsigned *)addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

typedef struct {
  pa_pool *pool;
  int ith;
} worker_arg;

static void *worker_main(void *p) {
  worker_arg wa = *(worker_arg *)p;
  free(p);
  pa_pool *pool = wa.pool;
  unsigned seen = 0;
  for (;;) {
    unsigned g;
    int spins = 0;
    while ((g = atomic_load_explicit(&pool->generation, memory_order_acquire)) == seen) {
      if (atomic_load_explicit(&pool->stop, memory_order_relaxed)) return NULL;
      if (++spins > SPIN_LIMIT) {
        atomic_fetch_add(&pool->sleepers, 1);
        futex_wait(&pool->generation, seen);
        atomic_fetch_sub(&pool->sleepers, 1);
        spins = 0;
      }
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
    }
    seen = g;
    if (atomic_load_explicit(&pool->stop, memory_order_relaxed)) return NULL;
    pool->fn(pool->arg, wa.ith, pool->n);
    if (pool->timing) pool->done_ns[wa.ith] = now_ns();
    atomic_fetch_sub_explicit(&pool->remaining, 1, memory_order_acq_rel);
  }
}

pa_pool *pa_pool_create(int n_threads) {
  if (n_threads < 1) n_threads = 1;
  pa_pool *pool = pa_calloc(1, sizeof *pool);
  if (!pool) return NULL;
  pool->n = n_threads;
  pool->threads = calloc((size_t)n_threads, sizeof(pthread_t));
  pool->done_ns = calloc((size_t)n_threads, sizeof(uint64_t));
  if (!pool->threads || !pool->done_ns) {
    free(pool->threads);
    free(pool->done_ns);
    pa_free(pool);
    return NULL;
  }
  for (int i = 1; i < n_threads; i++) {
    worker_arg *wa = malloc(sizeof *wa);
    if (!wa) break;
    wa->pool = pool;
    wa->ith = i;
    if (pthread_create(&pool->threads[i], NULL, worker_main, wa) != 0) {
      free(wa);
      pool->n = i; /* run with the threads we got */
      break;
    }
  }
  return pool;
}

void pa_pool_free(pa_pool *pool) {
  if (!pool) return;
  atomic_store(&pool->stop, 1);
  atomic_fetch_add(&pool->generation, 1);
  futex_wake_all(&pool->generation);
  for (int i = 1; i < pool->n; i++) pthread_join(pool->threads[i], NULL);
  free(pool->threads);
  free(pool->done_ns);
  pa_free(pool);
}

int pa_pool_size(const pa_pool *pool) { return pool ? pool->n : 1; }

void pa_pool_set_timing(pa_pool *pool, bool on) {
  if (pool) pool->timing = on;
}

uint64_t pa_pool_wait_ns(const pa_pool *pool) { return pool ? pool->wait_ns : 0; }
uint64_t pa_pool_idle_ns(const pa_pool *pool) { return pool ? pool->idle_ns : 0; }

void pa_pool_run(pa_pool *pool, pa_pool_fn fn, void *arg) {
  if (!pool || pool->n == 1) {
    fn(arg, 0, 1);
    return;
  }
  pool->fn = fn;
  pool->arg = arg;
  atomic_store_explicit(&pool->remaining, pool->n - 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&pool->generation, 1, memory_order_seq_cst);
  if (atomic_load_explicit(&pool->sleepers, memory_order_seq_cst) > 0) futex_wake_all(&pool->generation);
  fn(arg, 0, pool->n);
  uint64_t t0 = pool->timing ? now_ns() : 0;
  int spins = 0;
  while (atomic_load_explicit(&pool->remaining, memory_order_acquire) > 0) {
    if (++spins > SPIN_LIMIT) sched_yield();
#if defined(__x86_64__)
    else __builtin_ia32_pause();
#endif
  }
  if (pool->timing) {
    uint64_t t1 = now_ns();
    pool->wait_ns += t1 - t0;
    pool->idle_ns += t1 - t0;
    for (int i = 1; i < pool->n; i++) /* published by the workers' release of `remaining` */
      pool->idle_ns += t1 > pool->done_ns[i] ? t1 - pool->done_ns[i] : 0;
  }
}

void pa_split(long n, int ith, int nth, long *lo, long *hi) {
  long per = n / nth, extra = n % nth;
  *lo = ith * per + (ith < extra ? ith : extra);
  *hi = *lo + per + (ith < extra ? 1 : 0);
}
