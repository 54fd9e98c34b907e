#define _GNU_SOURCE
#include "sky_proc.h"

#include "sky_err.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int sky_proc_reexec(char **argv, char *why, size_t cap)
{
	char self[PATH_MAX];
	/* the path, not /proc/self/exe itself: under qemu-user the link names
	 * the guest program, and exec of the link would start the emulator */
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n <= 0) {
		snprintf(why, cap, "cannot find this program: %s", strerror(errno));
		return SKY_EIO;
	}
	self[n] = '\0';
	execv(self, argv);
	snprintf(why, cap, "cannot run %s again: %s", self, strerror(errno));
	return SKY_EIO;
}
