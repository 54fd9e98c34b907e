#include "sky_test.h"

#include "sky_pool.h"

#include <stdatomic.h>
#include <string.h>

#define MAX_TASKS 1000

typedef struct counts {
	atomic_int ran[MAX_TASKS];
	atomic_int by_worker[SKY_POOL_MAX_THREADS];
	atomic_int bad_worker;
	int threads;
} counts;

static void count_task(void *ctx, int t, int w)
{
	counts *c = ctx;
	atomic_fetch_add(&c->ran[t], 1);
	if (w < 0 || w >= c->threads)
		atomic_fetch_add(&c->bad_worker, 1);
	else
		atomic_fetch_add(&c->by_worker[w], 1);
}

static counts g_c;

SKY_TEST(every_task_runs_exactly_once_for_any_thread_count)
{
	const int threads[] = {1, 2, 3, 4, 8};
	const int tasks[] = {0, 1, 2, 3, 7, 64, MAX_TASKS};
	for (size_t i = 0; i < sizeof threads / sizeof threads[0]; i++) {
		sky_pool *p = sky_pool_create(threads[i]);
		SKY_EXPECT(p != NULL);
		SKY_EXPECT_EQ(sky_pool_threads(p), threads[i]);
		/* many runs on one pool: generations must not mix */
		for (int rep = 0; rep < 20; rep++) {
			for (size_t k = 0; k < sizeof tasks / sizeof tasks[0]; k++) {
				memset(&g_c, 0, sizeof g_c);
				g_c.threads = threads[i];
				sky_pool_run(p, tasks[k], count_task, &g_c);
				int total = 0;
				for (int t = 0; t < MAX_TASKS; t++) {
					int want = t < tasks[k];
					SKY_EXPECT_MSG(atomic_load(&g_c.ran[t]) == want,
						       "threads %d tasks %d: task %d ran %d times",
						       threads[i], tasks[k], t, atomic_load(&g_c.ran[t]));
				}
				for (int w = 0; w < threads[i]; w++)
					total += atomic_load(&g_c.by_worker[w]);
				SKY_EXPECT_EQ(total, tasks[k]);
				SKY_EXPECT_EQ(atomic_load(&g_c.bad_worker), 0);
			}
		}
		sky_pool_destroy(p);
	}
}

/* A run returns only after every task finished: a task that takes a while
 * on another worker is visible to the caller right after the run. */
typedef struct slow {
	int out[64];
} slow;

static void slow_task(void *ctx, int t, int w)
{
	slow *s = ctx;
	volatile unsigned long spin = 0;
	for (unsigned long i = 0; i < 20000ul * (unsigned long)(t % 5 + 1); i++)
		spin += i;
	s->out[t] = t * 3 + 1 + (int)(spin & 0);
}

SKY_TEST(run_waits_for_every_task)
{
	sky_pool *p = sky_pool_create(3);
	SKY_EXPECT(p != NULL);
	for (int rep = 0; rep < 50; rep++) {
		slow s;
		memset(&s, 0, sizeof s);
		sky_pool_run(p, 64, slow_task, &s);
		for (int t = 0; t < 64; t++)
			SKY_EXPECT_EQ(s.out[t], t * 3 + 1);
	}
	sky_pool_destroy(p);
}

SKY_TEST(bad_sizes_and_null_pools)
{
	SKY_EXPECT(sky_pool_create(0) == NULL);
	SKY_EXPECT(sky_pool_create(SKY_POOL_MAX_THREADS + 1) == NULL);
	SKY_EXPECT_EQ(sky_pool_threads(NULL), 1);
	memset(&g_c, 0, sizeof g_c);
	g_c.threads = 1;
	sky_pool_run(NULL, 5, count_task, &g_c); /* in order on the caller */
	SKY_EXPECT_EQ(atomic_load(&g_c.by_worker[0]), 5);
	sky_pool_destroy(NULL);
}
