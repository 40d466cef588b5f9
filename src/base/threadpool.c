/* threadpool.c: a worker pool whose jobs are lists of tasks claimed through
 * one atomic 64-bit ticket: the job's generation in the high 32 bits, the
 * next unclaimed task in the low 32 (CLOSED while the job is being set up).
 *
 * Publishing job g+1 (the caller, after job g is complete):
 *   1. ticket = (g+1, CLOSED): from here no thread can claim a task of g
 *      (their compare-and-swap expects generation g) or of g+1;
 *   2. fn, arg, n_tasks and the done counter are written;
 *   3. ticket = (g+1, 0), a release store: the job is open;
 *   4. sleeping workers are woken (a futex on `wake`).
 * A worker that sees a new generation reads fn, arg and n_tasks, then
 * claims tasks by compare-and-swap on the ticket; a successful swap proves
 * the job it read was still open, so what it read belongs to that job (the
 * reads come before the swap; the caller's step 2 comes after step 1). A
 * worker that read a later job's fields by mistake fails its swap, since
 * the ticket moved to that job's generation before the fields changed.
 * The caller claims tasks too, then waits until `done` reaches n_tasks. */
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

#define CLOSED 0xFFFFFFFFu
#define TICKET(gen, idx) (((uint64_t)(gen) << 32) | (uint64_t)(idx))
#define GEN(t) ((uint32_t)((t) >> 32))
#define IDX(t) ((uint32_t)(t))

struct pa_pool {
  int n;
  pthread_t *threads;
  _Alignas(64) _Atomic uint64_t ticket;
  _Atomic(pa_pool_fn) fn;
  _Atomic(void *) arg;
  atomic_int n_tasks;
  _Alignas(64) atomic_int done; /* tasks finished in the current job */
  _Alignas(64) atomic_uint wake; /* bumped per job; sleepers wait on it */
  atomic_int sleepers;
  atomic_int stop;
  /* profiling (pa_pool_set_timing): when each thread finished its last task
   * and for which job; the caller's wait, every thread's idle time */
  _Alignas(64) bool timing;
  uint64_t *done_ns;
  uint32_t *done_gen;
  uint64_t wait_ns, idle_ns;
};

/* After this many pause-spins a waiting worker sleeps on the futex, so an
 * idle or oversubscribed machine does not burn a core per worker. */
#define SPIN_LIMIT 50000

static void futex_wait(atomic_uint *addr, unsigned expected) {
  syscall(SYS_futex, (unsigned *)addr, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}
static void futex_wake_all(atomic_uint *addr) {
  syscall(SYS_futex, (unsigned *)addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static void cpu_relax(void) {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield");
#endif
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Claims and runs tasks of the job whose ticket the caller last read (t),
 * until none is left or the job changed. */
static void work_on(pa_pool *pool, uint64_t t, int self) {
  const uint32_t gen = GEN(t);
  const pa_pool_fn fn = atomic_load_explicit(&pool->fn, memory_order_relaxed);
  void *arg = atomic_load_explicit(&pool->arg, memory_order_relaxed);
  const uint32_t n = (uint32_t)atomic_load_explicit(&pool->n_tasks, memory_order_relaxed);
  for (;;) {
    if (GEN(t) != gen || IDX(t) >= n) return; /* over, closed, or all claimed */
    if (!atomic_compare_exchange_weak_explicit(&pool->ticket, &t, t + 1, memory_order_acq_rel,
                                               memory_order_acquire))
      continue; /* t now holds the ticket's current value */
    fn(arg, (int)IDX(t), (int)n);
    if (pool->timing) {
      pool->done_ns[self] = now_ns();
      pool->done_gen[self] = gen;
    }
    atomic_fetch_add_explicit(&pool->done, 1, memory_order_release);
    t = atomic_load_explicit(&pool->ticket, memory_order_acquire);
  }
}

typedef struct {
  pa_pool *pool;
  int ith;
} worker_arg;

static void *worker_main(void *p) {
  worker_arg wa = *(worker_arg *)p;
  free(p);
  pa_pool *pool = wa.pool;
  uint32_t seen = 0; /* the last generation this worker took part in */
  int spins = 0;
  for (;;) {
    if (atomic_load_explicit(&pool->stop, memory_order_acquire)) return NULL;
    const uint64_t t = atomic_load_explicit(&pool->ticket, memory_order_acquire);
    if (GEN(t) != seen && IDX(t) != CLOSED) {
      work_on(pool, t, wa.ith);
      seen = GEN(t);
      spins = 0;
      continue;
    }
    if (++spins <= SPIN_LIMIT) {
      cpu_relax();
      continue;
    }
    /* sleep until the next job: announce it, then re-check before waiting
     * (the publisher bumps `wake` after opening a job and wakes sleepers) */
    atomic_fetch_add(&pool->sleepers, 1);
    const unsigned w = atomic_load(&pool->wake);
    const uint64_t t2 = atomic_load(&pool->ticket);
    if ((GEN(t2) == seen || IDX(t2) == CLOSED) && !atomic_load(&pool->stop)) futex_wait(&pool->wake, w);
    atomic_fetch_sub(&pool->sleepers, 1);
    spins = 0;
  }
}

pa_pool *pa_pool_create(int n_threads) {
  if (n_threads < 1) n_threads = 1;
  pa_pool *pool = pa_calloc(1, sizeof *pool);
  if (!pool) return NULL;
  pool->n = n_threads;
  pool->threads = calloc((size_t)n_threads, sizeof(pthread_t));
  pool->done_ns = calloc((size_t)n_threads, sizeof(uint64_t));
  pool->done_gen = calloc((size_t)n_threads, sizeof(uint32_t));
  if (!pool->threads || !pool->done_ns || !pool->done_gen) {
    free(pool->threads);
    free(pool->done_ns);
    free(pool->done_gen);
    pa_free(pool);
    return NULL;
  }
  atomic_init(&pool->ticket, TICKET(0, CLOSED));
  for (int i = 1; i < n_threads; i++) {
    worker_arg *wa = malloc(sizeof *wa);
    if (!wa) {
      pool->n = i;
      break;
    }
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
  atomic_fetch_add(&pool->wake, 1);
  futex_wake_all(&pool->wake);
  for (int i = 1; i < pool->n; i++) pthread_join(pool->threads[i], NULL);
  free(pool->threads);
  free(pool->done_ns);
  free(pool->done_gen);
  pa_free(pool);
}

int pa_pool_size(const pa_pool *pool) { return pool ? pool->n : 1; }

void pa_pool_set_timing(pa_pool *pool, bool on) {
  if (pool) pool->timing = on;
}

uint64_t pa_pool_wait_ns(const pa_pool *pool) { return pool ? pool->wait_ns : 0; }
uint64_t pa_pool_idle_ns(const pa_pool *pool) { return pool ? pool->idle_ns : 0; }

void pa_pool_run_tasks(pa_pool *pool, pa_pool_fn fn, void *arg, int n_tasks) {
  if (n_tasks <= 0) return;
  if (!pool || pool->n == 1 || n_tasks == 1) {
    for (int i = 0; i < n_tasks; i++) fn(arg, i, n_tasks);
    return;
  }
  /* publish: close, fill in, open, wake */
  const uint32_t gen = GEN(atomic_load_explicit(&pool->ticket, memory_order_relaxed)) + 1;
  atomic_exchange_explicit(&pool->ticket, TICKET(gen, CLOSED), memory_order_acq_rel);
  atomic_store_explicit(&pool->fn, fn, memory_order_relaxed);
  atomic_store_explicit(&pool->arg, arg, memory_order_relaxed);
  atomic_store_explicit(&pool->n_tasks, n_tasks, memory_order_relaxed);
  atomic_store_explicit(&pool->done, 0, memory_order_relaxed);
  atomic_store_explicit(&pool->ticket, TICKET(gen, 0), memory_order_seq_cst);
  atomic_fetch_add_explicit(&pool->wake, 1, memory_order_seq_cst);
  if (atomic_load_explicit(&pool->sleepers, memory_order_seq_cst) > 0) futex_wake_all(&pool->wake);

  work_on(pool, TICKET(gen, 0), 0);
  const uint64_t t0 = pool->timing ? now_ns() : 0;
  int spins = 0;
  while (atomic_load_explicit(&pool->done, memory_order_acquire) < n_tasks) {
    if (++spins > SPIN_LIMIT)
      sched_yield(); /* a worker holding a task may need this core */
    else
      cpu_relax();
  }
  if (pool->timing) {
    const uint64_t t1 = now_ns();
    pool->wait_ns += t1 - t0;
    pool->idle_ns += t1 - t0;
    for (int i = 1; i < pool->n; i++) /* published by the workers' release of `done` */
      if (pool->done_gen[i] == gen && t1 > pool->done_ns[i]) pool->idle_ns += t1 - pool->done_ns[i];
  }
}

void pa_pool_run(pa_pool *pool, pa_pool_fn fn, void *arg) {
  pa_pool_run_tasks(pool, fn, arg, pa_pool_size(pool));
}

void pa_split(long n, int ith, int nth, long *lo, long *hi) {
  long per = n / nth, extra = n % nth;
  *lo = ith * per + (ith < extra ? ith : extra);
  *hi = *lo + per + (ith < extra ? 1 : 0);
}
