#include "sky_err.h"

#include <stdarg.h>
#include <stdio.h>

const char *sky_strerror(int rc)
{
	switch (rc) {
	case SKY_OK: return "success";
	case SKY_EINVAL: return "invalid argument or input";
	case SKY_ENOMEM: return "out of planned memory";
	case SKY_EIO: return "input/output error";
	case SKY_ERANGE: return "value out of range";
	case SKY_EFORMAT: return "malformed data";
	case SKY_ENOTFOUND: return "not found";
	case SKY_ECRYPTO: return "cryptographic operation failed";
	case SKY_ETIMEOUT: return "timed out";
	case SKY_ENET: return "network or broker error";
	case SKY_EAUTH: return "authentication failed";
	case SKY_ESTATE: return "operation not allowed in this state";
	case SKY_EUNSUPPORTED: return "not supported here";
	default: return rc > 0 ? "byte count" : "unknown error";
	}
}

void sky_diag_clear(sky_diag *d)
{
	if (d)
		d->msg[0] = '\0';
}

int sky_diag_set(sky_diag *d, int rc, const char *fmt, ...)
{
	if (d && d->msg[0] == '\0') {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(d->msg, sizeof d->msg, fmt, ap);
		va_end(ap);
	}
	return rc;
}
