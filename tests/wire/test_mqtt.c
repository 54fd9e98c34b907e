/* The MQTT layer without a broker: a refused connect is answered on Paho's
 * thread (on_fail fills the request slot) while the caller waits on it, so
 * this is the cheapest place for SANITIZE=thread to see that hand-over.
 * Connects with a real broker are covered by tests/integration. */
#include "sky_test.h"

#include "sky_mqtt.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* A loopback port that nothing listens on: bound, read back, closed. */
static int closed_port(void)
{
	struct sockaddr_in a;
	socklen_t len = sizeof a;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int port = -1;
	if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	close(fd);
	return port;
}

SKY_TEST(refused_connect_is_reported_from_pahos_thread)
{
	char broker[64];
	int port = closed_port();
	SKY_EXPECT(port > 0);
	snprintf(broker, sizeof broker, "127.0.0.1:%d", port);
	/* certificate files are only read once TCP is up, which it never is */
	sky_mqtt_opts o = {.broker = broker, .client_id = "test-mqtt", .ca_file = "ca.crt",
			   .cert_file = "c.crt", .key_file = "c.key", .connect_timeout_s = 20};
	for (int i = 0; i < 3; i++) {
		sky_mqtt *m = (sky_mqtt *)&o; /* must be cleared on failure */
		sky_diag d;
		sky_diag_clear(&d);
		SKY_EXPECT_EQ(sky_mqtt_connect(&m, &o, &d), SKY_ENET);
		SKY_EXPECT(m == NULL);
		/* the slot's message came back from the callback, not the timeout */
		SKY_EXPECT_MSG(strstr(d.msg, "connect to") && !strstr(d.msg, "timed out"), "%s",
			       d.msg);
		SKY_EXPECT_EQ(sky_mqtt_connected(m), 0);
	}
}

SKY_TEST(bad_broker_address_is_refused_before_any_thread)
{
	sky_mqtt_opts o = {.broker = "no-port", .client_id = "x"};
	sky_mqtt *m = NULL;
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_mqtt_connect(&m, &o, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "HOST:PORT") != NULL);
}

SKY_TEST(backoff_doubles_to_its_cap_with_jitter_and_resets)
{
	sky_mqtt_backoff b;
	sky_mqtt_backoff_init(&b, 500, 5000, 42);
	/* bounds of each draw: [d/2, d] with d = 500, 1000, 2000, 4000, 5000, 5000 */
	static const int bound[] = {500, 1000, 2000, 4000, 5000, 5000, 5000};
	for (size_t i = 0; i < sizeof bound / sizeof bound[0]; i++) {
		int ms = sky_mqtt_backoff_next(&b);
		SKY_EXPECT_MSG(ms >= bound[i] / 2 && ms <= bound[i], "draw %zu: %d ms", i, ms);
	}
	/* jittered: two processes (seeds) do not wait the same, nor one the
	 * same every time at the cap */
	sky_mqtt_backoff c;
	sky_mqtt_backoff_init(&c, 500, 5000, 43);
	int differ = 0, vary = 0, prev = -1;
	for (int i = 0; i < 20; i++) {
		int x = sky_mqtt_backoff_next(&b), y = sky_mqtt_backoff_next(&c);
		differ += x != y;
		vary += prev >= 0 && x != prev;
		prev = x;
		SKY_EXPECT(x >= 2500 && x <= 5000);
	}
	SKY_EXPECT(differ >= 15 && vary >= 15);
	sky_mqtt_backoff_reset(&b);
	int ms = sky_mqtt_backoff_next(&b);
	SKY_EXPECT(ms >= 250 && ms <= 500);
	/* a seed of 0 still draws */
	sky_mqtt_backoff_init(&c, 100, 100, 0);
	SKY_EXPECT(sky_mqtt_backoff_next(&c) >= 50);
}
