/* Token buckets and log-line throttles for skyplan's intake of requests
 * from outside (enrollment): a flood is refused cheaply, before any
 * parsing, and collapsed into one log line per window instead of one per
 * message.
 *
 * Times are seconds on any monotonic clock (sky_clock_s); nothing here
 * reads a clock or allocates, so tests drive it with made-up times. Not
 * thread-safe: skyplan calls it from its one message-handling thread. */
#ifndef SKY_RATELIMIT_H
#define SKY_RATELIMIT_H

#include <stddef.h>

/* Holds up to cap tokens, refilled at per_s tokens per second. */
typedef struct sky_bucket {
	double tokens, cap, per_s, last;
	int started;
} sky_bucket;

/* Starts full. Cannot fail. */
void sky_bucket_init(sky_bucket *b, double cap, double per_s);
/* Takes one token at time now if there is one. Returns 1 if taken, 0 if
 * the caller is over its rate. */
int sky_bucket_take(sky_bucket *b, double now);

/* Buckets per key (e.g. the enrollment nonce, which names one claim
 * connection's request), for at most SKY_KEYED_MAX keys at a time; a new
 * key takes the slot of the key unused longest (a flood of fresh keys is
 * held back by a global bucket beside this one). */
#define SKY_KEYED_MAX 64
#define SKY_KEYED_KEY_MAX 64
typedef struct sky_keyed_buckets {
	struct {
		char key[SKY_KEYED_KEY_MAX + 1];
		sky_bucket b;
		double used;
	} slot[SKY_KEYED_MAX];
	double cap, per_s;
} sky_keyed_buckets;

void sky_keyed_init(sky_keyed_buckets *k, double cap, double per_s);
/* sky_bucket_take on key's bucket (keys longer than SKY_KEYED_KEY_MAX are
 * cut). Returns 1 or 0 as sky_bucket_take. */
int sky_keyed_take(sky_keyed_buckets *k, const char *key, double now);

/* At most per_window lines per window_s seconds; the rest are counted. */
typedef struct sky_log_throttle {
	double window_s, start;
	int per_window, printed, started;
	long suppressed;
} sky_log_throttle;

void sky_log_throttle_init(sky_log_throttle *t, int per_window, double window_s);
/* Call before logging one line at time now. Returns 1 if the line may be
 * printed, 0 if it is to be suppressed (and counted). If a window has
 * ended with lines suppressed, *flushed receives their number (else 0):
 * the caller prints "... N more suppressed" first. */
int sky_log_throttle_allow(sky_log_throttle *t, double now, long *flushed);
/* For a periodic tick: if the window has ended with lines suppressed,
 * returns their number and starts a new window; else 0. */
long sky_log_throttle_flush(sky_log_throttle *t, double now);

#endif
