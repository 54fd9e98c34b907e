/* This process as a program: running it again. */
#ifndef SKY_PROC_H
#define SKY_PROC_H

#include <stddef.h>

/* Runs this program's own executable (/proc/self/exe resolved to its path)
 * again with argv and the current environment, in this process. Returns
 * only on failure: SKY_EIO, with the cause and the path in why (at most
 * cap bytes, always terminated). */
int sky_proc_reexec(char **argv, char *why, size_t cap);

#endif
