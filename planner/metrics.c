#include "sky_metrics.h"

#include "sky_text.h"
#include "sky_version.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sky_metrics_init(sky_metrics *m)
{
	memset(m, 0, sizeof *m);
	sky_mutex_init(&m->lock);
}

void sky_metrics_free(sky_metrics *m)
{
	if (m)
		sky_mutex_free(&m->lock);
}

static sky_metrics g_default;
static int g_default_once;
static void default_init(void) { sky_metrics_init(&g_default); }

sky_metrics *sky_metrics_default(void)
{
	sky_once(&g_default_once, default_init);
	return &g_default;
}

/* ---- fed figures ------------------------------------------------------------ */

static int reason_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;
	return n >= 1 && n <= SKY_METRICS_REASON_MAX;
}

/* The job's entry, added if new; NULL when the table is full. m->lock held. */
static sky_metrics_job *job_entry(sky_metrics *m, const char *job)
{
	for (int i = 0; i < m->n_jobs; i++)
		if (strcmp(m->jobs[i].job, job) == 0)
			return &m->jobs[i];
	if (m->n_jobs >= SKY_METRICS_MAX_JOBS)
		return NULL;
	sky_metrics_job *j = &m->jobs[m->n_jobs++];
	memset(j, 0, sizeof *j);
	snprintf(j->job, sizeof j->job, "%s", job);
	return j;
}

static int set_step(sky_metrics *m, const char *job, double seconds, int predicted)
{
	if (!m || !job || !sky_topic_segment_ok(job) || !isfinite(seconds) || seconds < 0)
		return SKY_EINVAL;
	int rc = 0;
	sky_mutex_lock(&m->lock);
	sky_metrics_job *j = job_entry(m, job);
	if (!j) {
		rc = SKY_ENOMEM;
	} else if (predicted) {
		j->has_predicted = 1;
		j->step_predicted_s = seconds;
	} else {
		j->has_measured = 1;
		j->step_measured_s = seconds;
	}
	sky_mutex_unlock(&m->lock);
	return rc;
}

int sky_metrics_set_step_measured(sky_metrics *m, const char *job, double seconds)
{
	return set_step(m, job, seconds, 0);
}

int sky_metrics_set_step_predicted(sky_metrics *m, const char *job, double seconds)
{
	return set_step(m, job, seconds, 1);
}

int sky_metrics_add_frames_dropped(sky_metrics *m, const char *job, const char *reason, long n)
{
	if (!m || !job || !sky_topic_segment_ok(job) || !reason_ok(reason) || n < 0)
		return SKY_EINVAL;
	int rc = SKY_ENOMEM;
	sky_mutex_lock(&m->lock);
	sky_metrics_job *j = job_entry(m, job);
	for (int k = 0; j && k < j->n_drops; k++)
		if (strcmp(j->drops[k].reason, reason) == 0) {
			j->drops[k].count += n;
			rc = 0;
			goto exit;
		}
	if (j && j->n_drops < SKY_METRICS_MAX_REASONS) {
		snprintf(j->drops[j->n_drops].reason, sizeof j->drops[0].reason, "%s", reason);
		j->drops[j->n_drops++].count = n;
		rc = 0;
	}
exit:
	sky_mutex_unlock(&m->lock);
	return rc;
}

int sky_metrics_add_refused(sky_metrics *m, const char *job, const char *reason)
{
	if (!m || !job || !sky_topic_segment_ok(job) || !reason_ok(reason))
		return SKY_EINVAL;
	int rc = SKY_ENOMEM;
	sky_mutex_lock(&m->lock);
	sky_metrics_job *j = job_entry(m, job);
	for (int k = 0; j && k < j->n_refused && rc; k++)
		if (strcmp(j->refused[k].reason, reason) == 0) {
			j->refused[k].count++;
			rc = 0;
		}
	if (rc && j && j->n_refused < SKY_METRICS_MAX_REASONS) {
		snprintf(j->refused[j->n_refused].reason, sizeof j->refused[0].reason, "%s", reason);
		j->refused[j->n_refused++].count = 1;
		rc = 0;
	}
	sky_mutex_unlock(&m->lock);
	return rc;
}

int sky_metrics_add_replan(sky_metrics *m, const char *job)
{
	if (!m || !job || !sky_topic_segment_ok(job))
		return SKY_EINVAL;
	sky_mutex_lock(&m->lock);
	sky_metrics_job *j = job_entry(m, job);
	if (j)
		j->replans++;
	sky_mutex_unlock(&m->lock);
	return j ? 0 : SKY_ENOMEM;
}

/* ---- the text format -------------------------------------------------------- */

/* A label value: backslash, double quote and newline escaped (the text
 * format, version 0.0.4). */
static void put_label(sky_text *o, const char *name, const char *v)
{
	sky_text_put(o, "%s=\"", name);
	for (const char *c = v; *c && !o->full; c++) {
		if (*c == '\\')
			sky_text_put(o, "\\\\");
		else if (*c == '"')
			sky_text_put(o, "\\\"");
		else if (*c == '\n')
			sky_text_put(o, "\\n");
		else
			sky_text_put(o, "%c", *c);
	}
	sky_text_put(o, "\"");
}

/* HELP and TYPE of a family; in HELP text backslash and newline are escaped */
static void family(sky_text *o, const char *name, const char *type, const char *help)
{
	sky_text_put(o, "# HELP %s ", name);
	for (const char *c = help; *c && !o->full; c++) {
		if (*c == '\\')
			sky_text_put(o, "\\\\");
		else if (*c == '\n')
			sky_text_put(o, "\\n");
		else
			sky_text_put(o, "%c", *c);
	}
	sky_text_put(o, "\n# TYPE %s %s\n", name, type);
}

/* A sample value: the shortest of %.15g / %.17g that reads back the same
 * (as cJSON writes fleet.json), so a scrape and `sky fleet status --json`
 * print the same digits; Prometheus' spellings for the non-finite. */
static void put_value(sky_text *o, double v)
{
	char b[40];
	if (isnan(v)) {
		sky_text_put(o, " NaN\n");
		return;
	}
	if (isinf(v)) {
		sky_text_put(o, v > 0 ? " +Inf\n" : " -Inf\n");
		return;
	}
	snprintf(b, sizeof b, "%.15g", v);
	if (strtod(b, NULL) != v)
		snprintf(b, sizeof b, "%.17g", v);
	sky_text_put(o, " %s\n", b);
}

/* name{l1="v1"[,l2="v2"]} value */
static void sample(sky_text *o, const char *name, const char *l1, const char *v1, const char *l2,
		   const char *v2, double v)
{
	sky_text_put(o, "%s", name);
	if (l1) {
		sky_text_put(o, "{");
		put_label(o, l1, v1);
		if (l2) {
			sky_text_put(o, ",");
			put_label(o, l2, v2);
		}
		sky_text_put(o, "}");
	}
	put_value(o, v);
}

/* A per-board figure from the capability report. */
enum { CAP_FWD, CAP_BWD, CAP_INT8, CAP_MEM, CAP_RTT, CAP_BW, CAP_PROBE };

static int cap_value(const sky_reg_board *b, int which, double *v)
{
	const sky_caps *k = &b->caps;
	if (!b->has_caps)
		return 0;
	switch (which) {
	case CAP_FWD: *v = k->fp32.fwd_attn_s + k->fp32.fwd_ffn_s; return 1;
	case CAP_BWD: *v = k->fp32.bwd_attn_s + k->fp32.bwd_ffn_s; return 1;
	case CAP_INT8: *v = k->int8_fwd_s; return k->has_int8;
	case CAP_MEM: *v = (double)k->mem_bytes; return 1;
	case CAP_RTT: *v = k->link_lat_s; return 1;
	case CAP_BW: *v = k->link_bw; return 1;
	case CAP_PROBE: *v = k->probe_s; return 1;
	}
	return 0;
}

static const struct {
	const char *name;
	int which;
	const char *help;
} k_caps[] = {
	{"sky_board_layer_forward_seconds", CAP_FWD,
	 "fp32 forward of one transformer layer for one micro-batch at the probed shape, as the "
	 "board measured it (caps fwd_s in sky fleet status --json)."},
	{"sky_board_layer_backward_seconds", CAP_BWD,
	 "fp32 backward of one transformer layer for one micro-batch at the probed shape, as the "
	 "board measured it (caps bwd_s)."},
	{"sky_board_layer_int8_forward_seconds", CAP_INT8,
	 "int8 forward of one transformer layer for one micro-batch, as the board measured it "
	 "(caps int8_fwd_s; absent for boards that did not probe int8)."},
	{"sky_board_memory_budget_bytes", CAP_MEM,
	 "Memory the board offers for a job's arena (caps mem_bytes)."},
	{"sky_board_link_rtt_seconds", CAP_RTT,
	 "Round trip from the board through the broker, 0 if unknown (caps lat_s)."},
	{"sky_board_link_bandwidth_bytes_per_second", CAP_BW,
	 "Bandwidth from the board through the broker, 0 if unknown (caps bw_Bps)."},
	{"sky_board_probe_duration_seconds", CAP_PROBE,
	 "How long the board's last probe took (caps probe_s)."},
};

static void render_registry(sky_text *o, const sky_registry *r)
{
	static const sky_reg_state states[] = {SKY_REG_ONLINE, SKY_REG_OFFLINE, SKY_REG_ENROLLED,
					       SKY_REG_REVOKED};
	int n = r ? r->n : 0;
	family(o, "sky_boards", "gauge", "Boards the planner knows, by state (enrolled: never heard "
					 "from since enrollment; revoked: on the CRL).");
	for (size_t s = 0; s < sizeof states / sizeof states[0]; s++) {
		int c = 0;
		for (int i = 0; i < n; i++)
			c += r->b[i].state == states[s];
		sample(o, "sky_boards", "state", sky_reg_state_name(states[s]), NULL, NULL, c);
	}
	family(o, "sky_board_online", "gauge",
	       "1 if the board is online, 0 if it is offline or only enrolled.");
	for (int i = 0; i < n; i++)
		sample(o, "sky_board_online", "board", r->b[i].id, NULL, NULL,
		       r->b[i].state == SKY_REG_ONLINE);
	family(o, "sky_board_last_seen_timestamp_seconds", "gauge",
	       "When the planner last heard from the board (Unix seconds; absent if never).");
	for (int i = 0; i < n; i++)
		if (r->b[i].last_seen)
			sample(o, "sky_board_last_seen_timestamp_seconds", "board", r->b[i].id, NULL,
			       NULL, (double)r->b[i].last_seen);
	for (size_t f = 0; f < sizeof k_caps / sizeof k_caps[0]; f++) {
		family(o, k_caps[f].name, "gauge", k_caps[f].help);
		for (int i = 0; i < n; i++) {
			double v;
			if (cap_value(&r->b[i], k_caps[f].which, &v))
				sample(o, k_caps[f].name, "board", r->b[i].id, NULL, NULL, v);
		}
	}
	family(o, "sky_board_stage", "gauge",
	       "The pipeline stage (0 first) the board holds in the job's newest plan.");
	for (int i = 0; i < n; i++)
		if (r->b[i].job[0])
			sample(o, "sky_board_stage", "board", r->b[i].id, "job", r->b[i].job,
			       r->b[i].stage);
	family(o, "sky_job_plan_epoch", "gauge", "Epoch of the job's newest plan (it only grows).");
	for (int j = 0; r && j < r->n_jobs; j++)
		sample(o, "sky_job_plan_epoch", "job", r->jobs[j].job, NULL, NULL,
		       (double)r->jobs[j].epoch);
}

/* Registry counters, named as in fleet.json's "counters". */
static void render_counters(sky_text *o, const sky_registry *r)
{
	static const sky_reg_counters zero;
	const sky_reg_counters *c = r ? &r->c : &zero;
	family(o, "sky_messages_refused_total", "counter",
	       "Messages the planner refused or ignored, by the fleet.json counter that counted "
	       "them: caps_rejected, status_rejected, acks_rejected (malformed or absurd), "
	       "enroll_refused, oversize (refused unparsed for size; an oversize capability report "
	       "or enrollment request is also in caps_rejected or enroll_refused), stale_ignored "
	       "(from an older session or boot), retained_dropped (a retained copy of a kind of "
	       "message that is never retained).");
	const struct {
		const char *reason;
		long v;
	} refused[] = {{"caps_rejected", c->caps_rejected},   {"status_rejected", c->status_rejected},
		       {"acks_rejected", c->acks_rejected},   {"enroll_refused", c->enroll_refused},
		       {"oversize", c->oversize},             {"stale_ignored", c->stale_ignored},
		       {"retained_dropped", c->retained_dropped}};
	for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
		sample(o, "sky_messages_refused_total", "reason", refused[i].reason, NULL, NULL,
		       (double)refused[i].v);
	family(o, "sky_caps_reports_accepted_total", "counter",
	       "Capability reports the planner accepted.");
	sample(o, "sky_caps_reports_accepted_total", NULL, NULL, NULL, NULL, (double)c->caps_ok);
	family(o, "sky_board_boots_total", "counter",
	       "Times a board came back under a new boot id (a restart of skyd).");
	sample(o, "sky_board_boots_total", NULL, NULL, NULL, NULL, (double)c->boots);
	family(o, "sky_board_heartbeat_timeouts_total", "counter",
	       "Boards marked offline because nothing came from them for 1.5 x keepalive.");
	sample(o, "sky_board_heartbeat_timeouts_total", NULL, NULL, NULL, NULL, (double)c->timeouts);
	family(o, "sky_enrollments_total", "counter", "Boards the planner's CA enrolled.");
	sample(o, "sky_enrollments_total", NULL, NULL, NULL, NULL, (double)c->enrolled);
	family(o, "sky_plans_published_total", "counter", "Signed plans the planner published.");
	sample(o, "sky_plans_published_total", NULL, NULL, NULL, NULL, (double)c->plans_published);
	family(o, "sky_plan_acks_total", "counter",
	       "Boards' answers to plans: accepted (arena reserved) or refused (did not fit).");
	sample(o, "sky_plan_acks_total", "answer", "accepted", NULL, NULL, (double)c->acks_ok);
	sample(o, "sky_plan_acks_total", "answer", "refused", NULL, NULL, (double)c->acks_refused);
}

/* What the data plane fed; m->lock held. */
static void render_fed(sky_text *o, const sky_metrics *m, const sky_registry *r)
{
	family(o, "sky_job_replans_total", "counter",
	       "Plans of the job after its first, made because a board died, joined or drifted. "
	       "Re-planning does not exist yet, so this is 0 for every job.");
	for (int j = 0; r && j < r->n_jobs; j++) {
		long v = 0;
		for (int k = 0; k < m->n_jobs; k++)
			if (strcmp(m->jobs[k].job, r->jobs[j].job) == 0)
				v = m->jobs[k].replans;
		sample(o, "sky_job_replans_total", "job", r->jobs[j].job, NULL, NULL, (double)v);
	}
	for (int k = 0; k < m->n_jobs; k++) {
		int in_reg = 0;
		for (int j = 0; r && j < r->n_jobs; j++)
			in_reg |= strcmp(m->jobs[k].job, r->jobs[j].job) == 0;
		if (!in_reg && m->jobs[k].replans)
			sample(o, "sky_job_replans_total", "job", m->jobs[k].job, NULL, NULL,
			       (double)m->jobs[k].replans);
	}
	family(o, "sky_job_step_measured_seconds", "gauge",
	       "One training step of the job as the fleet measured it (last report; absent until "
	       "the data plane reports one).");
	for (int k = 0; k < m->n_jobs; k++)
		if (m->jobs[k].has_measured)
			sample(o, "sky_job_step_measured_seconds", "job", m->jobs[k].job, NULL, NULL,
			       m->jobs[k].step_measured_s);
	family(o, "sky_job_step_predicted_seconds", "gauge",
	       "One training step of the job's current plan as the planner's simulator predicted "
	       "it.");
	for (int k = 0; k < m->n_jobs; k++)
		if (m->jobs[k].has_predicted)
			sample(o, "sky_job_step_predicted_seconds", "job", m->jobs[k].job, NULL, NULL,
			       m->jobs[k].step_predicted_s);
	family(o, "sky_job_messages_refused_total", "counter",
	       "Messages on the job's topics the planner refused before any work on them, by "
	       "reason: a sender the job's signed plan does not allow (metrics_not_stage, "
	       "ready_not_stage, answer_not_stage, ckpt_not_holder, slice_not_in_plan), a revoked "
	       "board (revoked), a board over its rate (slice_rate_limited); absent until one is "
	       "refused.");
	for (int k = 0; k < m->n_jobs; k++)
		for (int d = 0; d < m->jobs[k].n_refused; d++)
			sample(o, "sky_job_messages_refused_total", "job", m->jobs[k].job, "reason",
			       m->jobs[k].refused[d].reason, (double)m->jobs[k].refused[d].count);
	family(o, "sky_frames_dropped_total", "counter",
	       "Tensor frames dropped because they disagreed with the plan, by reason (absent "
	       "until the data plane reports a drop).");
	for (int k = 0; k < m->n_jobs; k++)
		for (int d = 0; d < m->jobs[k].n_drops; d++)
			sample(o, "sky_frames_dropped_total", "job", m->jobs[k].job, "reason",
			       m->jobs[k].drops[d].reason, (double)m->jobs[k].drops[d].count);
}

int sky_metrics_render(sky_metrics *m, const sky_registry *r, int64_t unix_s, char *buf,
		       size_t cap)
{
	if (!m || !buf || cap == 0)
		return SKY_EINVAL;
	sky_text o;
	sky_text_init(&o, buf, cap);
	family(&o, "sky_build_info", "gauge", "The planner's version (the value is always 1).");
	sample(&o, "sky_build_info", "version", SKY_VERSION, NULL, NULL, 1);
	family(&o, "sky_registry_updated_timestamp_seconds", "gauge",
	       "When this snapshot of the registry was taken (Unix seconds): fleet.json's "
	       "updated_unix written at the same moment.");
	sample(&o, "sky_registry_updated_timestamp_seconds", NULL, NULL, NULL, NULL, (double)unix_s);
	render_registry(&o, r);
	render_counters(&o, r);
	sky_mutex_lock(&m->lock);
	render_fed(&o, m, r);
	sky_mutex_unlock(&m->lock);
	return sky_text_result(&o);
}

void sky_metrics_set_serving(sky_metrics *m, int on) { atomic_store(&m->serving, on ? 1 : 0); }

int sky_metrics_publish(sky_metrics *m, const sky_registry *r, int64_t unix_s)
{
	if (!m || !atomic_load(&m->serving))
		return 0;
	int n = sky_metrics_render(m, r, unix_s, m->scratch, sizeof m->scratch);
	if (n < 0)
		return n;
	sky_mutex_lock(&m->lock);
	memcpy(m->text, m->scratch, (size_t)n + 1);
	m->text_len = (size_t)n;
	sky_mutex_unlock(&m->lock);
	return 0;
}

int sky_metrics_scrape(sky_metrics *m, int (*fn)(const char *text, size_t len, void *arg),
		       void *arg)
{
	sky_mutex_lock(&m->lock);
	int rc = fn(m->text, m->text_len, arg);
	sky_mutex_unlock(&m->lock);
	return rc;
}
