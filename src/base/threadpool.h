/* threadpool.h: a fixed pool of worker threads created once per context.
 * pa_pool_run runs fn(arg, i, n) on every thread (the caller is thread 0)
 * and returns when all are done; workers spin briefly between runs so that
 * the many small ops of a decode step do not pay for a sleep and wake-up. */
#ifndef PASADA_THREADPOOL_H
#define PASADA_THREADPOOL_H

#include <stdbool.h>
#include <stdint.h>

typedef struct pa_pool pa_pool;
typedef void (*pa_pool_fn)(void *arg, int ith, int nth);

pa_pool *pa_pool_create(int n_threads); /* NULL on failure */
void pa_pool_free(pa_pool *pool);
int pa_pool_size(const pa_pool *pool);
/* pool may be NULL: fn runs once on the caller as (arg, 0, 1). */
void pa_pool_run(pa_pool *pool, pa_pool_fn fn, void *arg);
/* Profiling (`pasada profile`): while timing is on, each pa_pool_run adds
 * to two counters: the time the caller waits for the other threads after
 * its own share (pa_pool_wait_ns), and the sum over every thread of the time
 * from the end of its share to the end of the run (pa_pool_idle_ns: the
 * barrier's cost in thread-nanoseconds). Off by default: one branch per run
 * and per worker. Set it only between runs. */
void pa_pool_set_timing(pa_pool *pool, bool on);
uint64_t pa_pool_wait_ns(const pa_pool *pool);
uint64_t pa_pool_idle_ns(const pa_pool *pool);
/* Splits [0, n) into nth near-equal parts; part ith is [*lo, *hi). */
void pa_split(long n, int ith, int nth, long *lo, long *hi);

#endif
