/* pool.c: a shared counter of task indices and up to `threads` threads taking from it. */
#include "base/pool.h"

#include <pthread.h>
#include <stdlib.h>

#include "base/mem.h"

typedef struct {
	size_t count, next;
	mr_task_fn fn;
	void *ctx;
	void *(*worker_new)(void);
	void (*worker_free)(void *);
	pthread_mutex_t lock;
} pool;

static void *work(void *arg)
{
	pool *p = arg;
	void *worker = p->worker_new ? p->worker_new() : NULL;
	for (;;) {
		pthread_mutex_lock(&p->lock);
		size_t i = p->next < p->count ? p->next++ : p->count;
		pthread_mutex_unlock(&p->lock);
		if (i == p->count)
			break;
		p->fn(p->ctx, worker, i);
	}
	if (p->worker_free && worker)
		p->worker_free(worker);
	return NULL;
}

static size_t max_threads; /* 0: no cap; written once, before any pool runs */

void mr_pool_set_max_threads(size_t max)
{
	max_threads = max;
}

size_t mr_pool_max_threads(void)
{
	return max_threads;
}

void mr_pool_run(size_t count, size_t threads, mr_task_fn fn, void *ctx, void *(*worker_new)(void),
                 void (*worker_free)(void *))
{
	pool p = {count, 0, fn, ctx, worker_new, worker_free, PTHREAD_MUTEX_INITIALIZER};
	size_t extra = MR_MIN(threads, count);
	if (max_threads)
		extra = MR_MIN(extra, max_threads);
	extra = extra ? extra - 1 : 0; /* the calling thread is one */
	pthread_t *th = extra ? mr_alloc_array(extra, sizeof *th) : NULL;
	size_t started = 0;
	while (th && started < extra && pthread_create(&th[started], NULL, work, &p) == 0)
		started++;
	work(&p);
	for (size_t t = 0; t < started; t++)
		pthread_join(th[t], NULL);
	free(th);
	pthread_mutex_destroy(&p.lock);
}
