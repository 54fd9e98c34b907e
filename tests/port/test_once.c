/* Once-only initialisation (sky_once, port/thread.c) and the lazy statics
 * built on it: several threads race to the first use of the CPU feature
 * cache, the int8 kernel choice and the log level. The answers must agree;
 * under SANITIZE=thread a racy initialisation is also a report, which fails
 * the run. Nothing else in this binary touches those statics, so the race
 * is to their real first use. */
#include "sky_test.h"

#include "sky_clock.h"
#include "sky_cpu.h"
#include "sky_kernels_s8.h"
#include "sky_log.h"
#include "sky_thread.h"

#include <stdatomic.h>
#include <string.h>

#define N_THREADS 4
#define WAIT_S 60.0 /* generous: a slow, loaded machine still answers in ms */

/* Holds every thread at the gate until all have started, so their first
 * calls overlap as much as the scheduler allows. */
static _Atomic int g_gate;

static void gate_wait(void)
{
	atomic_fetch_add(&g_gate, 1);
	while (atomic_load(&g_gate) < N_THREADS)
		;
}

typedef struct first_use {
	sky_cpu_features f;
	int variant;
	int log_info;
} first_use;

static void *first_use_thread(void *arg)
{
	first_use *r = arg;
	gate_wait();
	r->f = sky_cpu_get_features();
	r->variant = sky_k_s8_variant_active();
	r->log_info = sky_log_enabled(SKY_LOG_INFO);
	return NULL;
}

SKY_TEST(lazy_statics_first_use_from_many_threads)
{
	sky_thread t[N_THREADS];
	first_use r[N_THREADS];
	memset(r, 0, sizeof r);
	atomic_store(&g_gate, 0);
	int started = 0;
	for (int i = 0; i < N_THREADS; i++)
		started += sky_thread_start(&t[i], first_use_thread, &r[i]) == 0;
	SKY_EXPECT_EQ(started, N_THREADS);
	if (started != N_THREADS)
		return; /* the others wait at the gate forever; the binary fails */
	for (int i = 0; i < N_THREADS; i++)
		sky_thread_join(&t[i]);
	sky_cpu_features now = sky_cpu_get_features();
	for (int i = 0; i < N_THREADS; i++) {
		SKY_EXPECT(memcmp(&r[i].f, &now, sizeof now) == 0);
		SKY_EXPECT_EQ(r[i].variant, sky_k_s8_variant_active());
		SKY_EXPECT(sky_k_s8_variant_supported(r[i].variant));
		SKY_EXPECT_EQ(r[i].log_info, sky_log_enabled(SKY_LOG_INFO));
	}
}

static _Atomic int g_runs;
static int g_flag;

static void count_run(void)
{
	sky_sleep_ms(20); /* keep the others waiting while this one runs */
	atomic_fetch_add(&g_runs, 1);
}

static void *once_thread(void *arg)
{
	gate_wait();
	sky_once(&g_flag, count_run);
	/* every caller returns after fn has finished */
	*(int *)arg = atomic_load(&g_runs);
	return NULL;
}

SKY_TEST(once_runs_once_and_everyone_waits_for_it)
{
	sky_thread t[N_THREADS];
	int seen[N_THREADS] = {0};
	atomic_store(&g_gate, 0);
	for (int i = 0; i < N_THREADS; i++)
		SKY_EXPECT_EQ(sky_thread_start(&t[i], once_thread, &seen[i]), 0);
	for (int i = 0; i < N_THREADS; i++)
		sky_thread_join(&t[i]);
	SKY_EXPECT_EQ(atomic_load(&g_runs), 1);
	for (int i = 0; i < N_THREADS; i++)
		SKY_EXPECT_EQ(seen[i], 1);
	sky_once(&g_flag, count_run);
	SKY_EXPECT_EQ(atomic_load(&g_runs), 1);
}

static int g_outer, g_inner;
static _Atomic int g_inner_runs, g_nested_done;

static void inner(void) { atomic_fetch_add(&g_inner_runs, 1); }
static void outer(void) { sky_once(&g_inner, inner); }

static void *nested_thread(void *arg)
{
	sky_once(&g_outer, outer);
	atomic_store(&g_nested_done, 1);
	return NULL;
}

/* The int8 kernel choice runs inside a once and asks for the CPU features,
 * another once: nesting must not wait for itself. Run on a thread so that a
 * deadlock is a bounded failure, not a hung test. */
SKY_TEST(once_may_nest)
{
	sky_thread t;
	SKY_EXPECT_EQ(sky_thread_start(&t, nested_thread, NULL), 0);
	double end = sky_clock_s() + WAIT_S;
	while (!atomic_load(&g_nested_done) && sky_clock_s() < end)
		sky_sleep_ms(1);
	SKY_EXPECT_MSG(atomic_load(&g_nested_done), "a nested sky_once did not return in %.0f s",
		       WAIT_S);
	if (!atomic_load(&g_nested_done))
		return; /* leave the stuck thread; the test has failed */
	sky_thread_join(&t);
	SKY_EXPECT_EQ(atomic_load(&g_inner_runs), 1);
}
