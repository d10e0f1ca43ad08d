/* pool.h: independent tasks run on a few threads: the allocator replays of a report, the runs of
 * a batch.
 *
 * Ownership: the pool allocates nothing that outlives mr_pool_run; each thread's worker state
 * is made and released by the caller's functions. */
#ifndef MR_POOL_H
#define MR_POOL_H

#include <stddef.h>

/* One task: index i of the caller's work, with the state of the thread running it (NULL when
 * there is none, or when worker_new gave none). */
typedef void (*mr_task_fn)(void *ctx, void *worker, size_t index);

/* Runs fn(ctx, worker, i) for every i in [0, count), the indices handed out in order to at most
 * `threads` threads (0 counts as 1); the calling thread is one of them. worker_new and
 * worker_free (both may be NULL) make and release each thread's own state. A thread that
 * cannot start leaves its share to the others. Returns when every task has run. */
void mr_pool_run(size_t count, size_t threads, mr_task_fn fn, void *ctx, void *(*worker_new)(void),
                 void (*worker_free)(void *));

/* Caps the threads every later mr_pool_run starts (0: no cap; 1: every task on the calling
 * thread). Call it before any pool runs: main reads MEMREPORT_THREADS. Outputs are the same
 * whatever the cap; tests compare them. */
void mr_pool_set_max_threads(size_t max);
size_t mr_pool_max_threads(void); /* the cap set, 0: none */

#endif
