/* Threads through port/sky_thread.h. Also the qemu leg's smoke test: a
 * guest whose loader and libc do not match (qemu-aarch64 -L pointing at a
 * cross sysroot while libc comes from the host's arm64 ld.so cache) spins
 * forever in the first pthread_create, so this binary runs first in each
 * qemu leg under a short `timeout -s KILL` and a hang there stops the leg
 * in seconds instead of leaving check stuck. */
#include "sky_test.h"

#include "sky_err.h"
#include "sky_thread.h"

#define NTHREADS 4
#define NADDS 10000

typedef struct worker {
	sky_mutex *lock;
	long *counter;
	int index;
	int ran; /* written by the worker, read after join (join orders it) */
} worker;

static void *add_many(void *arg)
{
	worker *w = arg;
	for (int i = 0; i < NADDS; i++) {
		sky_mutex_lock(w->lock);
		(*w->counter)++;
		sky_mutex_unlock(w->lock);
	}
	w->ran = w->index + 1;
	return NULL;
}

SKY_TEST(threads_start_run_and_join)
{
	sky_mutex lock;
	long counter = 0;
	sky_thread t[NTHREADS];
	worker w[NTHREADS];
	int started = 0;
	sky_mutex_init(&lock);
	for (int i = 0; i < NTHREADS; i++) {
		w[i] = (worker){.lock = &lock, .counter = &counter, .index = i};
		if (sky_thread_start(&t[i], add_many, &w[i]) == 0)
			started++;
		else
			break;
	}
	SKY_EXPECT_EQ(started, NTHREADS);
	for (int i = 0; i < started; i++)
		sky_thread_join(&t[i]);
	for (int i = 0; i < started; i++)
		SKY_EXPECT_EQ(w[i].ran, i + 1); /* each ran on its own argument */
	/* the lock made every increment count */
	SKY_EXPECT_EQ(counter, (long)NTHREADS * NADDS);
	sky_mutex_free(&lock);
}

static int once_flag;
static int once_calls;
static void count_once(void) { __atomic_add_fetch(&once_calls, 1, __ATOMIC_RELAXED); }

static void *call_once(void *arg)
{
	(void)arg;
	sky_once(&once_flag, count_once);
	return NULL;
}

SKY_TEST(once_runs_once_across_threads)
{
	sky_thread t[NTHREADS];
	int started = 0;
	while (started < NTHREADS && sky_thread_start(&t[started], call_once, NULL) == 0)
		started++;
	SKY_EXPECT_EQ(started, NTHREADS);
	call_once(NULL);
	for (int i = 0; i < started; i++)
		sky_thread_join(&t[i]);
	SKY_EXPECT_EQ(once_calls, 1);
}
