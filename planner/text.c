/* The bounded text builder; see sky_text.h. */
#include "sky_text.h"

#include "sky_err.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>

void sky_text_init(sky_text *t, char *buf, size_t cap)
{
	t->buf = buf, t->cap = cap, t->len = 0, t->full = cap == 0;
	if (cap)
		buf[0] = '\0';
}

void sky_text_put(sky_text *t, const char *fmt, ...)
{
	if (t->full)
		return;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= t->cap - t->len) {
		t->full = 1;
		t->buf[t->len] = '\0'; /* what fit, without the cut piece */
		return;
	}
	t->len += (size_t)n;
}

int sky_text_result(const sky_text *t)
{
	return t->full || t->len > INT_MAX ? SKY_ERANGE : (int)t->len;
}
