/* A small pool of worker threads for data-parallel kernels: the int8
 * layer splits its row blocks and attention heads over the board's cores
 * (the profile's `threads`).
 *
 *   sky_pool *p = sky_pool_create(4);           // at start-up: 3 threads + the caller
 *   sky_pool_run(p, n_tasks, fn, ctx);          // fn(ctx, task, worker) for every task
 *   sky_pool_destroy(p);
 *
 * sky_pool_run hands out task indices 0..n-1 in order from one atomic
 * counter to the caller (worker 0) and the pool's threads (workers
 * 1..threads-1), and returns when every task has finished. Which worker
 * runs which task varies from run to run, so a task must write only what
 * its index owns, and use scratch by its worker index: then the result is
 * the same for any thread count. Each run takes a mutex, a broadcast and a
 * wait (a few microseconds): give it tasks of at least tens of
 * microseconds. sky_pool_run allocates nothing; one caller at a time, not
 * from inside a task. */
#ifndef SKY_POOL_H
#define SKY_POOL_H

#define SKY_POOL_MAX_THREADS 64

typedef struct sky_pool sky_pool;
typedef void (*sky_pool_fn)(void *ctx, int task, int worker);

/* Starts threads - 1 workers (threads in 1..SKY_POOL_MAX_THREADS; 1 makes a
 * pool that runs everything on the caller). Returns the pool, or NULL if
 * threads is out of range or a thread cannot be started (logged). */
sky_pool *sky_pool_create(int threads);
/* Stops and joins the workers and frees the pool. NULL-safe. */
void sky_pool_destroy(sky_pool *p);
/* Workers including the caller; 1 for a NULL pool. */
int sky_pool_threads(const sky_pool *p);
/* Runs fn(ctx, t, worker) for t in [0, tasks) and waits for all of them.
 * A NULL pool, one thread or one task runs them in order on the caller. */
void sky_pool_run(sky_pool *p, int tasks, sky_pool_fn fn, void *ctx);

#endif
