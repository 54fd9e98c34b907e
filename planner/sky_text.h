/* A bounded text builder over a caller's buffer, for the planner's
 * renderers that write whole documents into memory (the Prometheus text
 * format, SVG pictures). It appends with printf formats; once something
 * does not fit, it keeps what fit, NUL-terminated, and drops everything
 * after (sticky, like a stream's error), so a renderer checks once at the
 * end. Allocates nothing. */
#ifndef SKY_TEXT_H
#define SKY_TEXT_H

#include <stddef.h>

typedef struct sky_text {
	char *buf;
	size_t cap, len;
	int full; /* a write did not fit */
} sky_text;

/* Starts an empty text in buf[0..cap) (cap may be 0: everything is full). */
void sky_text_init(sky_text *t, char *buf, size_t cap);
/* Appends printf-formatted text, or marks t full. */
void sky_text_put(sky_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The text's length, or SKY_ERANGE if anything did not fit. */
int sky_text_result(const sky_text *t);

#endif
