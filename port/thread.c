#include "sky_thread.h"

#include "sky_err.h"

#include <pthread.h>
#include <string.h>

_Static_assert(sizeof(pthread_mutex_t) <= sizeof(((sky_mutex *)0)->opaque), "mutex size");
_Static_assert(sizeof(pthread_t) <= sizeof(unsigned long), "pthread_t size");

void sky_mutex_init(sky_mutex *m)
{
	memset(m, 0, sizeof *m);
	pthread_mutex_init((pthread_mutex_t *)m->opaque, NULL);
}
void sky_mutex_lock(sky_mutex *m) { pthread_mutex_lock((pthread_mutex_t *)m->opaque); }
void sky_mutex_unlock(sky_mutex *m) { pthread_mutex_unlock((pthread_mutex_t *)m->opaque); }
void sky_mutex_free(sky_mutex *m) { pthread_mutex_destroy((pthread_mutex_t *)m->opaque); }

/* A flag goes 0 (not run) -> 1 (running) -> 2 (done). fn runs without the
 * lock held, so it may itself call sky_once on another flag (the kernel
 * variant choice asks for the CPU features); one lock and one condition
 * serve every flag, as initialisations are rare and short. */
enum { ONCE_NOT_RUN, ONCE_RUNNING, ONCE_DONE };
static pthread_mutex_t g_once_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_once_cond = PTHREAD_COND_INITIALIZER;

void sky_once(int *flag, void (*fn)(void))
{
	if (__atomic_load_n(flag, __ATOMIC_ACQUIRE) == ONCE_DONE)
		return;
	pthread_mutex_lock(&g_once_lock);
	while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) == ONCE_RUNNING)
		pthread_cond_wait(&g_once_cond, &g_once_lock);
	if (__atomic_load_n(flag, __ATOMIC_ACQUIRE) == ONCE_DONE) {
		pthread_mutex_unlock(&g_once_lock);
		return;
	}
	__atomic_store_n(flag, ONCE_RUNNING, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&g_once_lock);
	fn();
	pthread_mutex_lock(&g_once_lock);
	__atomic_store_n(flag, ONCE_DONE, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&g_once_cond);
	pthread_mutex_unlock(&g_once_lock);
}

int sky_thread_start(sky_thread *t, void *(*fn)(void *), void *arg)
{
	pthread_t th;
	if (pthread_create(&th, NULL, fn, arg) != 0)
		return SKY_EIO;
	t->id = (unsigned long)th;
	return 0;
}

void sky_thread_join(sky_thread *t) { pthread_join((pthread_t)t->id, NULL); }
