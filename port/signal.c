#include "sky_signal.h"

#include "sky_err.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

/* Atomic, not volatile sig_atomic_t: the handler may run on any thread
 * (Paho's included) while the main loop reads the flag. A lock-free atomic
 * is safe to store from a signal handler (C11 7.14.1.1). */
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "a signal handler needs a lock-free int");
static _Atomic int g_stop;

static _Atomic int g_reload;

static void on_stop(int signo) { atomic_store(&g_stop, signo); }
static void on_reload(int signo) { atomic_store(&g_reload, 1); }

int sky_signal_install(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_stop;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGTERM, &sa, NULL) != 0 || sigaction(SIGINT, &sa, NULL) != 0)
		return SKY_EIO;
	sa.sa_handler = on_reload;
	if (sigaction(SIGUSR1, &sa, NULL) != 0)
		return SKY_EIO;
	sa.sa_handler = SIG_IGN;
	if (sigaction(SIGPIPE, &sa, NULL) != 0)
		return SKY_EIO;
	return 0;
}

int sky_signal_stop_requested(void) { return atomic_load(&g_stop); }

int sky_signal_take_reload(void) { return atomic_exchange(&g_reload, 0); }

void sky_signal_request_stop(int signo) { atomic_store(&g_stop, signo ? signo : SIGTERM); }

int sky_signal_reload(long pid)
{
	if (pid < 2 || pid != (long)(pid_t)pid)
		return SKY_EINVAL;
	if (kill((pid_t)pid, SIGHUP) == 0)
		return 0;
	return errno == ESRCH ? SKY_ENOTFOUND : errno == EPERM ? SKY_EAUTH : SKY_EIO;
}
