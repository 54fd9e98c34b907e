/* Threads and locks, for the few places that need them (MQTT callbacks run
 * on the client library's thread). */
#ifndef SKY_THREAD_H
#define SKY_THREAD_H

typedef struct sky_mutex {
	_Alignas(16) unsigned char opaque[64]; /* a pthread_mutex_t */
} sky_mutex;

/* Cannot fail (a default mutex). */
void sky_mutex_init(sky_mutex *m);
void sky_mutex_lock(sky_mutex *m);
void sky_mutex_unlock(sky_mutex *m);
void sky_mutex_free(sky_mutex *m);

/* Runs fn exactly once per flag (a zero-initialised int), even when threads
 * race to it; every caller returns after fn has finished. fn may call
 * sky_once for other flags (not for its own). */
void sky_once(int *flag, void (*fn)(void));

typedef struct sky_thread {
	unsigned long id;
} sky_thread;

/* Starts fn(arg) on a new thread. Returns 0 or SKY_EIO. */
int sky_thread_start(sky_thread *t, void *(*fn)(void *), void *arg);
/* Waits for it to end. */
void sky_thread_join(sky_thread *t);

#endif
