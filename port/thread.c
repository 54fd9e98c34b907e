#define _GNU_SOURCE /* PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP */
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

void sky_once(int *flag, void (*fn)(void))
{
	/* recursive: fn may itself call sky_once for another flag (the CRC32C
	 * setup asks for the CPU's features, whoever first needs a CRC) */
	static pthread_mutex_t lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
	if (__atomic_load_n(flag, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&lock);
	if (!*flag) {
		fn();
		__atomic_store_n(flag, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&lock);
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
