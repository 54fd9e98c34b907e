/* sky_mqtt_close while messages are still arriving, against a real broker:
 * each cycle connects as the operator on the claim listener (as sky job
 * collect does), subscribes to a topic another process floods, waits for
 * the first message, and closes at once, after a few polls, or after a
 * short idle while Paho's receive thread keeps queueing. Built with
 * SANITIZE=address, a callback that touches the handle after close freed it
 * is a heap-use-after-free report; without sanitizers, a crash.
 *
 * It needs the broker, so tests/integration/test_mqtt_close.sh starts one,
 * floods it and runs this binary with
 *   SKY_MQTT_CLOSE_BROKER  HOST:PORT of the claim listener
 *   SKY_MQTT_CLOSE_PKI     the PKI directory (ca.crt, operator.crt/key)
 *   SKY_MQTT_CLOSE_FILTER  the filter to subscribe to
 *   SKY_MQTT_CLOSE_CYCLES  connect/close cycles (default 20)
 * Without SKY_MQTT_CLOSE_BROKER (the unit-test legs of make check) the
 * broker test says so and checks only that close is NULL-safe. */
#include "sky_test.h"

#include "sky_clock.h"
#include "sky_mqtt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static long g_msgs; /* on_msg runs on this thread (sky_mqtt_poll) */

static void on_msg(void *ctx, const char *topic, size_t tl, const unsigned char *p, size_t len,
		   int retained)
{
	g_msgs++;
}

SKY_TEST(close_is_null_safe)
{
	sky_mqtt_close(NULL, 0);
	sky_mqtt_close(NULL, 1000);
	SKY_EXPECT_EQ(sky_mqtt_connected(NULL), 0);
}

SKY_TEST(close_while_a_flood_arrives)
{
	const char *broker = getenv("SKY_MQTT_CLOSE_BROKER");
	const char *pki = getenv("SKY_MQTT_CLOSE_PKI");
	const char *filter = getenv("SKY_MQTT_CLOSE_FILTER");
	const char *cyc = getenv("SKY_MQTT_CLOSE_CYCLES");
	if (!broker || !pki || !filter) {
		printf("close_while_a_flood_arrives: no broker given (SKY_MQTT_CLOSE_BROKER); "
		       "tests/integration/test_mqtt_close.sh runs it\n");
		return;
	}
	int cycles = cyc ? atoi(cyc) : 20;
	char ca[512], crt[512], key[512], id[64];
	snprintf(ca, sizeof ca, "%s/ca.crt", pki);
	snprintf(crt, sizeof crt, "%s/operator.crt", pki);
	snprintf(key, sizeof key, "%s/operator.key", pki);
	int got_all = 1;
	for (int i = 0; i < cycles; i++) {
		/* the claim listener keeps client ids: one per process and cycle */
		snprintf(id, sizeof id, "sky-closetest-%d-%d", (int)getpid(), i);
		sky_mqtt_opts o = {.broker = broker, .client_id = id, .ca_file = ca,
				   .cert_file = crt, .key_file = key, .keepalive_s = 30,
				   .on_msg = on_msg};
		sky_mqtt *m = NULL;
		sky_diag d;
		sky_diag_clear(&d);
		int rc = sky_mqtt_connect(&m, &o, &d);
		SKY_EXPECT_MSG(rc == 0, "cycle %d: connect: %s", i, d.msg);
		if (rc)
			return;
		rc = sky_mqtt_subscribe(m, filter, 1, 10000, &d);
		SKY_EXPECT_MSG(rc == 0, "cycle %d: subscribe %s: %s", i, filter, d.msg);
		/* wait (bounded) until the flood reaches us: Paho's thread is
		 * then busy queueing when close starts */
		long before = g_msgs;
		uint64_t end = sky_clock_ns() + 20000000000ull;
		while (!rc && g_msgs == before && sky_clock_ns() < end)
			sky_mqtt_poll(m, 10);
		if (g_msgs == before)
			got_all = 0;
		switch (i % 3) {
		case 0: /* close at once, the queue full of undispatched messages */
			break;
		case 1: /* a few more dispatches first */
			for (int k = 0; k < 5; k++)
				sky_mqtt_poll(m, 1);
			break;
		default: /* idle: Paho queues, nobody dispatches */
			sky_sleep_ms(1 + i % 7);
			break;
		}
		/* alternately with and without waiting for the DISCONNECT */
		sky_mqtt_close(m, (i & 1) ? 1000 : 0);
	}
	SKY_EXPECT_MSG(got_all, "some cycle saw no message from the flood within 20 s");
	printf("close_while_a_flood_arrives: %d cycles, %ld messages dispatched\n", cycles, g_msgs);
}
