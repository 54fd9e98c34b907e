#include "sky_test.h"

#include "sky_net.h"

#include <string.h>

SKY_TEST(host_and_port_are_split)
{
	char host[SKY_NET_HOST_MAX + 1];
	int port = 0;
	SKY_EXPECT_EQ(sky_net_parse_hostport("127.0.0.1:9464", host, sizeof host, &port, NULL), 0);
	SKY_EXPECT(!strcmp(host, "127.0.0.1") && port == 9464);
	SKY_EXPECT_EQ(sky_net_parse_hostport("[::1]:1", host, sizeof host, &port, NULL), 0);
	SKY_EXPECT(!strcmp(host, "::1") && port == 1);
	SKY_EXPECT_EQ(sky_net_parse_hostport("localhost:65535", host, sizeof host, &port, NULL), 0);
	SKY_EXPECT(!strcmp(host, "localhost") && port == 65535);
}

SKY_TEST(bad_addresses_are_refused_with_a_reason)
{
	static const char *bad[] = {"", "9464", "h:", ":1", "h:0", "h:65536", "h:99999999999",
				    "h:-1", "h:1a", "::1:80", "[::1]80", "[::1:80", "[]:80"};
	char host[8];
	int port;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		sky_diag d;
		sky_diag_clear(&d);
		SKY_EXPECT_MSG(sky_net_parse_hostport(bad[i], host, sizeof host, &port, &d) ==
				       SKY_EINVAL && d.msg[0],
			       "'%s'", bad[i]);
	}
	/* longer than the caller's buffer */
	SKY_EXPECT_EQ(sky_net_parse_hostport("a-long-name:80", host, sizeof host, &port, NULL),
		      SKY_EINVAL);
}

SKY_TEST(listening_twice_on_one_port_fails_with_the_reason)
{
	sky_diag d;
	int fd = -1, port = 0;
	char addr[32];
	for (int i = 0; i < 50 && fd < 0; i++) {
		port = 20000 + (i * 7919 + 1234) % 40000;
		snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
		sky_diag_clear(&d);
		fd = sky_net_listen(addr, 4, &d);
	}
	SKY_EXPECT(fd >= 0);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_net_listen(addr, 4, &d), SKY_EIO);
	SKY_EXPECT_MSG(strstr(d.msg, "in use") != NULL, "%s", d.msg);
	sky_net_close(fd);
}
