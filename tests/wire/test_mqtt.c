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
