/* Shared by the pipeline tests (test_transport, test_trainjob): an
 * in-memory network, one inbox a node. */
#include "memnet.h"

#include "sky_clock.h"
#include "sky_err.h"

#include <stdio.h>
#include <string.h>

static void lock(memnet_inbox *b)
{
	while (atomic_flag_test_and_set(&b->lock))
		sky_sleep_ms(0);
}
static void unlock(memnet_inbox *b) { atomic_flag_clear(&b->lock); }

void memnet_init(memnet_inbox *in, int n)
{
	for (int i = 0; i < n; i++) {
		in[i].head = in[i].n = 0;
		atomic_flag_clear(&in[i].lock);
	}
}

int memnet_publish(memnet_inbox *in, int n, const char *topic, const void *data, size_t len)
{
	if (len > MEMNET_MSG_MAX)
		return SKY_ERANGE;
	for (int i = 0; i < n; i++) {
		memnet_inbox *b = &in[i];
		for (;;) {
			lock(b);
			if (b->n < MEMNET_QCAP)
				break;
			unlock(b);
			sky_sleep_ms(1);
		}
		memnet_msg *m = &b->q[(b->head + b->n) % MEMNET_QCAP];
		snprintf(m->topic, sizeof m->topic, "%s", topic);
		memcpy(m->data, data, len);
		m->len = len;
		b->n++;
		unlock(b);
	}
	return 0;
}

void memnet_poll(memnet_inbox *b, int wait_ms, memnet_handler h, void *ctx)
{
	double end = sky_clock_s() + wait_ms / 1e3;
	for (;;) {
		lock(b);
		if (b->n) {
			memnet_msg *m = &b->q[b->head];
			h(ctx, m->topic, m->data, m->len);
			b->head = (b->head + 1) % MEMNET_QCAP;
			b->n--;
			unlock(b);
			return;
		}
		unlock(b);
		if (sky_clock_s() >= end)
			return;
		sky_sleep_ms(1); /* under qemu a spinning process starves the computing one */
	}
}
