/* The worker pool; see sky_pool.h. */
#include "sky_pool.h"

#include "sky_log.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

typedef struct worker_arg {
	struct sky_pool *p;
	int w;
} worker_arg;

struct sky_pool {
	int threads;
	int started;                     /* workers actually running (threads - 1 once up) */
	pthread_t th[SKY_POOL_MAX_THREADS];
	worker_arg arg[SKY_POOL_MAX_THREADS]; /* in the pool: a worker frees nothing */
	pthread_mutex_t mu;
	pthread_cond_t go;               /* a new run (or quit): workers wake */
	pthread_cond_t idle;             /* the last worker left the current run */
	/* the current run; written under mu before gen moves, read under mu */
	unsigned long gen;
	int quit;
	sky_pool_fn fn;
	void *ctx;
	int tasks;
	int busy;                        /* workers still inside the run, under mu */
	atomic_int next;                 /* next task index to hand out */
};

static void drain(sky_pool *p, sky_pool_fn fn, void *ctx, int tasks, int w)
{
	for (;;) {
		int t = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
		if (t >= tasks)
			return;
		fn(ctx, t, w);
	}
}

static void *worker(void *arg)
{
	const worker_arg a = *(const worker_arg *)arg;
	sky_pool *p = a.p;
	/* the generation at creation, not at this thread's first look: a run
	 * may start before this thread gets here, and it must not be missed */
	unsigned long seen = 0;
	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (p->gen == seen && !p->quit)
			pthread_cond_wait(&p->go, &p->mu);
		if (p->quit)
			break;
		seen = p->gen;
		sky_pool_fn fn = p->fn;
		void *ctx = p->ctx;
		int tasks = p->tasks;
		pthread_mutex_unlock(&p->mu);
		drain(p, fn, ctx, tasks, a.w);
		pthread_mutex_lock(&p->mu);
		if (--p->busy == 0)
			pthread_cond_signal(&p->idle);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

sky_pool *sky_pool_create(int threads)
{
	if (threads < 1 || threads > SKY_POOL_MAX_THREADS) {
		SKY_ERROR("pool: %d threads, expected 1..%d", threads, SKY_POOL_MAX_THREADS);
		return NULL;
	}
	sky_pool *p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	p->threads = threads;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->go, NULL);
	pthread_cond_init(&p->idle, NULL);
	atomic_init(&p->next, 0);
	for (int w = 1; w < threads; w++) {
		p->arg[w].p = p, p->arg[w].w = w;
		if (pthread_create(&p->th[w], NULL, worker, &p->arg[w]) != 0) {
			SKY_ERROR("pool: cannot start thread %d of %d", w, threads);
			sky_pool_destroy(p);
			return NULL;
		}
		p->started++;
	}
	return p;
}

void sky_pool_destroy(sky_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->quit = 1;
	pthread_cond_broadcast(&p->go);
	pthread_mutex_unlock(&p->mu);
	for (int w = 1; w <= p->started; w++)
		pthread_join(p->th[w], NULL);
	pthread_cond_destroy(&p->idle);
	pthread_cond_destroy(&p->go);
	pthread_mutex_destroy(&p->mu);
	free(p);
}

int sky_pool_threads(const sky_pool *p) { return p ? p->threads : 1; }

void sky_pool_run(sky_pool *p, int tasks, sky_pool_fn fn, void *ctx)
{
	if (tasks <= 0)
		return;
	if (!p || p->threads == 1 || tasks == 1) {
		for (int t = 0; t < tasks; t++)
			fn(ctx, t, 0);
		return;
	}
	pthread_mutex_lock(&p->mu);
	p->fn = fn, p->ctx = ctx, p->tasks = tasks;
	atomic_store_explicit(&p->next, 0, memory_order_relaxed);
	p->busy = p->started;
	p->gen++;
	pthread_cond_broadcast(&p->go);
	pthread_mutex_unlock(&p->mu);
	drain(p, fn, ctx, tasks, 0);
	/* the workers' writes become visible through the mutex they release */
	pthread_mutex_lock(&p->mu);
	while (p->busy)
		pthread_cond_wait(&p->idle, &p->mu);
	pthread_mutex_unlock(&p->mu);
}
