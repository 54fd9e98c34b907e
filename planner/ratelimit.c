/* Token buckets and log throttles; see sky_ratelimit.h. */
#include "sky_ratelimit.h"

#include <stdio.h>
#include <string.h>

void sky_bucket_init(sky_bucket *b, double cap, double per_s)
{
	memset(b, 0, sizeof *b);
	b->cap = b->tokens = cap;
	b->per_s = per_s;
}

int sky_bucket_take(sky_bucket *b, double now)
{
	if (!b->started) {
		b->started = 1;
		b->last = now;
	}
	if (now > b->last) {
		b->tokens += (now - b->last) * b->per_s;
		if (b->tokens > b->cap)
			b->tokens = b->cap;
		b->last = now;
	}
	if (b->tokens < 1.0)
		return 0;
	b->tokens -= 1.0;
	return 1;
}

void sky_keyed_init(sky_keyed_buckets *k, double cap, double per_s)
{
	memset(k, 0, sizeof *k);
	k->cap = cap;
	k->per_s = per_s;
}

int sky_keyed_take(sky_keyed_buckets *k, const char *key, double now)
{
	int found = -1, victim = -1;
	for (int i = 0; i < SKY_KEYED_MAX && found < 0; i++)
		if (k->slot[i].key[0] && strncmp(k->slot[i].key, key, SKY_KEYED_KEY_MAX) == 0)
			found = i;
	/* a free slot, else the one unused longest */
	for (int i = 0; i < SKY_KEYED_MAX && found < 0; i++) {
		if (!k->slot[i].key[0]) {
			victim = i;
			break;
		}
		if (victim < 0 || k->slot[i].used < k->slot[victim].used)
			victim = i;
	}
	if (found < 0) {
		found = victim;
		snprintf(k->slot[found].key, sizeof k->slot[found].key, "%s", key);
		sky_bucket_init(&k->slot[found].b, k->cap, k->per_s);
	}
	k->slot[found].used = now;
	return sky_bucket_take(&k->slot[found].b, now);
}

void sky_log_throttle_init(sky_log_throttle *t, int per_window, double window_s)
{
	memset(t, 0, sizeof *t);
	t->per_window = per_window;
	t->window_s = window_s;
}

long sky_log_throttle_flush(sky_log_throttle *t, double now)
{
	if (!t->started || now - t->start < t->window_s)
		return 0;
	long n = t->suppressed;
	t->start = now;
	t->printed = 0;
	t->suppressed = 0;
	return n;
}

int sky_log_throttle_allow(sky_log_throttle *t, double now, long *flushed)
{
	*flushed = 0;
	if (!t->started) {
		t->started = 1;
		t->start = now;
	} else {
		*flushed = sky_log_throttle_flush(t, now);
	}
	if (t->printed < t->per_window) {
		t->printed++;
		return 1;
	}
	t->suppressed++;
	return 0;
}
