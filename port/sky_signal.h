/* Clean shutdown on SIGTERM and SIGINT for the daemons (skyd, skyplan).
 *
 * The handler only sets a flag (the one thing a signal handler may safely
 * do); the daemon's main loop polls sky_signal_stop_requested() and shuts
 * down in order: publish what must be said, disconnect, free. SIGPIPE is
 * ignored so a dropped socket is an error code, not a dead process.
 * SIGUSR1 sets a reload flag the daemon takes when it can. */
#ifndef SKY_SIGNAL_H
#define SKY_SIGNAL_H

/* Installs the handlers. Returns 0 or SKY_EIO. */
int sky_signal_install(void);
/* The signal number that asked us to stop (SIGTERM 15, SIGINT 2), or 0. */
int sky_signal_stop_requested(void);
/* 1 once after each SIGUSR1 (a daemon's "read your settings again", e.g.
 * skyd's <state>/speed), then 0 until the next. */
int sky_signal_take_reload(void);
/* Sets the flag as a signal would (tests, and a daemon stopping itself). */
void sky_signal_request_stop(int signo);
/* Sends SIGHUP to process pid (mosquitto re-reads its config and CRL).
 * Returns 0, SKY_EINVAL (pid < 2), SKY_ENOTFOUND (no such process) or
 * SKY_EAUTH (not ours to signal). */
int sky_signal_reload(long pid);

#endif
