#include "sky_notify.h"

#include "sky_clock.h"
#include "sky_err.h"
#include "sky_log.h"
#include "sky_version.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <systemd/sd-daemon.h>

/* Only the daemon's main loop calls these (one thread), so plain statics. */
static int g_ready_sent;
static int g_wd_checked;
static uint64_t g_wd_every_ns; /* 0: no watchdog wanted */
static uint64_t g_wd_last_ns;

static int notify_send(const char *msg)
{
	if (!getenv("NOTIFY_SOCKET"))
		return 0;
	int r = sd_notify(0, msg);
	if (r < 0) {
		SKY_WARN("sd_notify(%s): error %d", msg, -r);
		return SKY_EIO;
	}
	return r > 0 ? 1 : 0;
}

int sky_notify_ready(void)
{
	if (g_ready_sent)
		return 0;
	char msg[128];
	snprintf(msg, sizeof msg, "READY=1\nSTATUS=running (%s)", SKY_VERSION);
	int rc = notify_send(msg);
	if (rc == 1)
		g_ready_sent = 1;
	return rc;
}

int sky_notify_watchdog(void)
{
	if (!g_wd_checked) {
		uint64_t usec = 0;
		/* > 0: $WATCHDOG_USEC is set and $WATCHDOG_PID (if any) is us */
		if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0)
			g_wd_every_ns = usec * 1000 / 4;
		g_wd_checked = 1;
	}
	if (!g_wd_every_ns)
		return 0;
	uint64_t now = sky_clock_ns();
	if (g_wd_last_ns && now - g_wd_last_ns < g_wd_every_ns)
		return 0;
	int rc = notify_send("WATCHDOG=1");
	if (rc == 1)
		g_wd_last_ns = now;
	return rc;
}

int sky_notify_stopping(void) { return notify_send("STOPPING=1"); }
