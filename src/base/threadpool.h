/* threadpool.h: a fixed pool of worker threads created once per context.
 *
 * A job is n_tasks calls fn(arg, i, n_tasks), i = 0 .. n_tasks-1, each run
 * exactly once by whichever thread claims it first (the caller takes part);
 * pa_pool_run_tasks returns when every task is done. Claiming is dynamic (an
 * atomic ticket), so a worker the OS has not scheduled yet delays nothing:
 * the awake threads take its tasks, and a worker that wakes after the job
 * is over finds nothing to claim. Tasks of one job must not wait for each
 * other (they may all run on one thread, one after another). Workers spin
 * briefly between jobs, so the many small ops of a decode step do not pay
 * for a sleep and a wake-up, then sleep on a futex. */
#ifndef PASADA_THREADPOOL_H
#define PASADA_THREADPOOL_H

#include <stdbool.h>
#include <stdint.h>

typedef struct pa_pool pa_pool;
typedef void (*pa_pool_fn)(void *arg, int i, int n);

pa_pool *pa_pool_create(int n_threads); /* NULL on failure */
void pa_pool_free(pa_pool *pool);
int pa_pool_size(const pa_pool *pool);
/* fn(arg, i, n_tasks) for every i < n_tasks, over the pool's threads.
 * pool may be NULL: the caller runs every task. n_tasks <= 0: nothing. */
void pa_pool_run_tasks(pa_pool *pool, pa_pool_fn fn, void *arg, int n_tasks);
/* One task per thread: fn(arg, i, n) for i < n = pa_pool_size(pool). The
 * tasks are still claimed dynamically: i names a share of the work (and of
 * per-thread scratch), not a thread. */
void pa_pool_run(pa_pool *pool, pa_pool_fn fn, void *arg);
/* Profiling (`pasada profile`): while timing is on, each job adds to two
 * counters: the time the caller waits for the other threads after it found
 * no task left to claim (pa_pool_wait_ns), and the sum over every thread
 * that worked on the job of the time from the end of its last task to the
 * end of the job (pa_pool_idle_ns: the barrier's cost in thread-ns). Off by
 * default: one branch per task. Set it only between jobs. */
void pa_pool_set_timing(pa_pool *pool, bool on);
uint64_t pa_pool_wait_ns(const pa_pool *pool);
uint64_t pa_pool_idle_ns(const pa_pool *pool);
/* Splits [0, n) into nth near-equal parts; part ith is [*lo, *hi). */
void pa_split(long n, int ith, int nth, long *lo, long *hi);

#endif
