/* Service manager notification (systemd's sd_notify protocol, through
 * libsystemd): readiness and the watchdog ping. Every call is a no-op when
 * the process was not started with $NOTIFY_SOCKET (by hand, by a test), so
 * the daemons call them unconditionally.
 *
 * The watchdog ping belongs in a daemon's main loop, once per pass, and
 * nowhere else: a loop that wedges stops pinging, and systemd (WatchdogSec=
 * in the unit) kills and restarts the daemon. */
#ifndef SKY_NOTIFY_H
#define SKY_NOTIFY_H

/* Tells the service manager the daemon is up (READY=1, with a STATUS=
 * line). Sends once per process; later calls do nothing. Returns 1 if a
 * message was sent, 0 if there is no $NOTIFY_SOCKET (or already sent), or
 * SKY_EIO if the socket refused it. */
int sky_notify_ready(void);

/* Pings the watchdog (WATCHDOG=1) if the manager asked for one
 * ($WATCHDOG_USEC, and $WATCHDOG_PID if set is this process), at most
 * every quarter of that interval however often it is called, so the main
 * loop may call it on every pass. Returns 1 if a ping was sent, 0 if none
 * was due or no watchdog is wanted, SKY_EIO on a send failure. */
int sky_notify_watchdog(void);

/* Tells the manager the daemon is shutting down (STOPPING=1). Returns as
 * sky_notify_ready. */
int sky_notify_stopping(void);

#endif
