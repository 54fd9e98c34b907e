/* Error codes shared by every Sky module, and a small diagnostic buffer.
 *
 * Functions return int: 0 on success, a negative SKY_E* code on failure, a
 * positive value only when it is a byte count. sky_strerror() turns a code
 * into words; a sky_diag carries the detail (which tensor, which field, what
 * was expected) so the message a user sees names what was wrong. */
#ifndef SKY_ERR_H
#define SKY_ERR_H

#include <stddef.h>

enum {
	SKY_OK = 0,
	SKY_EINVAL = -1,       /* bad argument or malformed input */
	SKY_ENOMEM = -2,       /* arena or pool exhausted, or allocation after seal */
	SKY_EIO = -3,          /* a file or socket operation failed */
	SKY_ERANGE = -4,       /* a number outside what the spec allows */
	SKY_EFORMAT = -5,      /* a file or message that does not follow its format */
	SKY_ENOTFOUND = -6,    /* a named thing (file, preset, board, tensor) is missing */
	SKY_ECRYPTO = -7,      /* a key, certificate or cipher operation failed */
	SKY_ETIMEOUT = -8,     /* a bounded wait ran out */
	SKY_ENET = -9,         /* the broker or the network failed */
	SKY_EAUTH = -10,       /* a signature, certificate or token was rejected */
	SKY_ESTATE = -11,      /* called at the wrong time (e.g. before init) */
	SKY_EUNSUPPORTED = -12 /* asked for something this build or board cannot do */
};

/* Returns a static string describing rc (never NULL). */
const char *sky_strerror(int rc);

/* Detail for the last failure of a call that takes one. Zero it with
 * sky_diag_clear(); sky_diag_set() keeps the first message so the root cause
 * is not overwritten by callers that add context. Both accept NULL. */
typedef struct sky_diag {
	char msg[256];
} sky_diag;

void sky_diag_clear(sky_diag *d);
/* Sets d->msg if empty (printf-style) and returns rc, so a caller can write
 * `return sky_diag_set(d, SKY_EFORMAT, "tensor %s: ...", name);`. */
int sky_diag_set(sky_diag *d, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
