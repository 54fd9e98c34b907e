/* An in-memory network for the pipeline tests (tests/runtime/memnet.c):
 * one inbox a node, all of them in memory the caller provides (shared
 * memory when the nodes are processes); a publish copies the message into
 * every inbox, a poll hands a node's oldest message to a handler. */
#ifndef SKY_TEST_MEMNET_H
#define SKY_TEST_MEMNET_H

#include "sky_topics.h"

#include <stdatomic.h>
#include <stddef.h>

#define MEMNET_QCAP 64
#define MEMNET_MSG_MAX (20u << 10) /* a tiny tensor frame with its mask, header and seal */

typedef struct memnet_msg {
	char topic[SKY_TOPIC_BUF];
	size_t len;
	unsigned char data[MEMNET_MSG_MAX];
} memnet_msg;

typedef struct memnet_inbox {
	atomic_flag lock;
	memnet_msg q[MEMNET_QCAP];
	int head, n;
} memnet_inbox;

typedef void (*memnet_handler)(void *ctx, const char *topic, const unsigned char *data, size_t len);

/* Empties and unlocks in[0..n). */
void memnet_init(memnet_inbox *in, int n);
/* Copies the message into each of in[0..n), waiting while one is full.
 * 0, or SKY_ERANGE when it is longer than MEMNET_MSG_MAX. */
int memnet_publish(memnet_inbox *in, int n, const char *topic, const void *data, size_t len);
/* Hands the oldest message of b to h(ctx, ...) (under b's lock: its slot is
 * not reused meanwhile), waiting up to wait_ms for one. */
void memnet_poll(memnet_inbox *b, int wait_ms, memnet_handler h, void *ctx);

#endif
