/* port/notify.c against a fake service manager: a unix datagram socket
 * named by $NOTIFY_SOCKET that this test reads, as systemd would. */
#include "sky_notify.h"
#include "sky_test.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* Receives one pending datagram into buf (NUL-terminated) without
 * waiting; returns its length or -1 if none is queued. */
static long recv_now(int fd, char *buf, size_t cap)
{
	ssize_t n = recv(fd, buf, cap - 1, MSG_DONTWAIT);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return (long)n;
}

/* One test: the module keeps per-process state (ready once, the watchdog
 * interval read once), so the steps run in this order. */
SKY_TEST(notify_ready_and_watchdog_with_fake_manager)
{
	char buf[256];
	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
	SKY_EXPECT(sky_notify_ready() == 0); /* no manager: a no-op */
	SKY_EXPECT(sky_notify_stopping() == 0);

	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s/notify.sock", sky_test_tmp_dir());
	int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
	SKY_EXPECT(fd >= 0);
	unlink(sa.sun_path);
	SKY_EXPECT(bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
	setenv("NOTIFY_SOCKET", sa.sun_path, 1);
	/* a 8 s watchdog: a ping is due every 2 s */
	setenv("WATCHDOG_USEC", "8000000", 1);
	char pid[32];
	snprintf(pid, sizeof pid, "%d", (int)getpid());
	setenv("WATCHDOG_PID", pid, 1);

	SKY_EXPECT(sky_notify_ready() == 1);
	SKY_EXPECT(recv_now(fd, buf, sizeof buf) > 0);
	SKY_EXPECT(strncmp(buf, "READY=1\n", 8) == 0);
	SKY_EXPECT(strstr(buf, "STATUS=running") != NULL);
	SKY_EXPECT(sky_notify_ready() == 0); /* once per process */
	SKY_EXPECT(recv_now(fd, buf, sizeof buf) < 0);

	SKY_EXPECT(sky_notify_watchdog() == 1);
	SKY_EXPECT(recv_now(fd, buf, sizeof buf) > 0);
	SKY_EXPECT(strcmp(buf, "WATCHDOG=1") == 0);
	/* the main loop calls it on every pass; only one ping per quarter interval */
	SKY_EXPECT(sky_notify_watchdog() == 0);
	SKY_EXPECT(recv_now(fd, buf, sizeof buf) < 0);
	sleep(3);
	SKY_EXPECT(sky_notify_watchdog() == 1);
	SKY_EXPECT(recv_now(fd, buf, sizeof buf) > 0);
	SKY_EXPECT(strcmp(buf, "WATCHDOG=1") == 0);

	SKY_EXPECT(sky_notify_stopping() == 1);
	SKY_EXPECT(recv_now(fd, buf, sizeof buf) > 0);
	SKY_EXPECT(strcmp(buf, "STOPPING=1") == 0);
	close(fd);
	unsetenv("NOTIFY_SOCKET");
}
