#include "sky_signal.h"

#include "sky_err.h"

#include <signal.h>
#include <string.h>

static volatile sig_atomic_t g_stop;

static void on_stop(int signo) { g_stop = signo; }

int sky_signal_install(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_stop;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGTERM, &sa, NULL) != 0 || sigaction(SIGINT, &sa, NULL) != 0)
		return SKY_EIO;
	sa.sa_handler = SIG_IGN;
	if (sigaction(SIGPIPE, &sa, NULL) != 0)
		return SKY_EIO;
	return 0;
}

int sky_signal_stop_requested(void) { return (int)g_stop; }

void sky_signal_request_stop(int signo) { g_stop = signo ? signo : SIGTERM; }
