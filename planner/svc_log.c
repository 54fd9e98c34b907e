/* Throttled warnings (svc_internal.h): the refusal lines a flood of bad
 * messages would repeat, at most LOG_LINES_PER_WINDOW per window each,
 * then one "... N more suppressed" line. */
#include "svc_internal.h"

#include "sky_clock.h"
#include "sky_metrics.h"

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
	for (int k = 0; k < SVC_REFUSE_N; k++)
		sky_log_throttle_init(&s->log.refused[k], 1, LOG_WINDOW_S);
}

static const char *const k_refuse[SVC_REFUSE_N] = {
	[SVC_REFUSE_METRICS] = "metrics_not_stage",
	[SVC_REFUSE_READY] = "ready_not_stage",
	[SVC_REFUSE_ANSWER] = "answer_not_stage",
	[SVC_REFUSE_CKPT] = "ckpt_not_holder",
	[SVC_REFUSE_SLICE] = "slice_not_in_plan",
	[SVC_REFUSE_SLICE_RATE] = "slice_rate_limited",
	[SVC_REFUSE_REVOKED] = "revoked",
	[SVC_REFUSE_PART] = "part_not_stage",
	[SVC_REFUSE_PART_CHUNK] = "part_chunk",
};

const char *svc_refuse_name(svc_refuse_kind why)
{
	return why >= 0 && why < SVC_REFUSE_N ? k_refuse[why] : "?";
}

void svc_refused(svc *s, const char *job, const char *board, svc_refuse_kind why,
		 const char *fmt, ...)
{
	const char *name = svc_refuse_name(why);
	sky_jobstat_refuse(&s->jobs, job, name, sky_clock_s());
	sky_metrics_add_refused(sky_metrics_default(), job, name);
	long flushed = 0;
	int allow = sky_log_throttle_allow(&s->log.refused[why], sky_clock_s(), &flushed);
	if (flushed > 0)
		SKY_WARN("refused (%s): %ld more suppressed in the last %.0f s", name, flushed,
			 LOG_WINDOW_S);
	if (!allow)
		return;
	char what[200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	/* job and board come from topic segments ([A-Za-z0-9_.-]) */
	SKY_WARN("job %s: %s from %s refused (%s)", job, what, board, name);
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
	for (int k = 0; k < SVC_REFUSE_N; k++) {
		long sup = sky_log_throttle_flush(&s->log.refused[k], now);
		if (sup > 0)
			SKY_WARN("refused (%s): %ld more suppressed in the last %.0f s",
				 k_refuse[k], sup, LOG_WINDOW_S);
	}
}
