/* Throttled warnings (svc_internal.h): the refusal lines a flood of bad
 * messages would repeat, at most LOG_LINES_PER_WINDOW per window each,
 * then one "... N more suppressed" line. */
#include "svc_internal.h"

#include "sky_clock.h"

#include <stdarg.h>
#include <stdio.h>

#define LOG_LINES_PER_WINDOW 5
#define LOG_WINDOW_S 10.0

/* what each throttle's lines are about, in its suppressed line */
static const char *const k_what[SVC_LOG_N] = {
	[SVC_LOG_ENROLL] = "enrollment refusals",
	[SVC_LOG_OVERSIZE] = "oversize messages",
	[SVC_LOG_REVOKED] = "messages from revoked boards",
	[SVC_LOG_REQ] = "inference request refusals",
	[SVC_LOG_SF] = "serving requests not tracked",
};

void svc_log_init(svc *s)
{
	for (int k = 0; k < SVC_LOG_N; k++)
		sky_log_throttle_init(&s->log.t[k], LOG_LINES_PER_WINDOW, LOG_WINDOW_S);
}

/* The line that stands for suppressed ones; for enrollment and requests it
 * also says how many the rate limit dropped before reading them. */
static void suppressed_line(const svc *s, svc_log_kind k, long n)
{
	const sky_log_throttle *t = &s->log.t[k];
	if (k == SVC_LOG_ENROLL || k == SVC_LOG_REQ)
		SKY_WARN("%s: %ld more suppressed in the last %.0f s (%ld requests dropped unread "
			 "by the rate limit so far)",
			 k_what[k], n, t->window_s,
			 k == SVC_LOG_REQ ? s->nojob.limited : svc_enroll_limited(s));
	else
		SKY_WARN("%s: %ld more suppressed in the last %.0f s", k_what[k], n, t->window_s);
}

void svc_warn(svc *s, svc_log_kind kind, const char *fmt, ...)
{
	long flushed = 0;
	int allow = sky_log_throttle_allow(&s->log.t[kind], sky_clock_s(), &flushed);
	if (flushed > 0)
		suppressed_line(s, kind, flushed);
	if (!allow)
		return;
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	SKY_WARN("%s", line);
}

void svc_log_flush(svc *s, double now)
{
	/* a flood that stopped still gets its "N more suppressed" line */
	for (int k = 0; k < SVC_LOG_N; k++) {
		long sup = sky_log_throttle_flush(&s->log.t[k], now);
		if (sup > 0)
			suppressed_line(s, (svc_log_kind)k, sup);
	}
}
