#include "sky_service.h"

#include "sky_ca.h"
#include "sky_caps.h"
#include "sky_chunk.h"
#include "sky_ckpt.h"
#include "sky_clock.h"
#include "sky_crl.h"
#include "sky_file.h"
#include "sky_jobkey.h"
#include "sky_jobstat.h"
#include "sky_jobstate.h"
#include "sky_json.h"
#include "sky_linkprobe.h"
#include "sky_log.h"
#include "sky_metrics.h"
#include "sky_model.h"
#include "sky_mqtt.h"
#include "sky_plan.h"
#include "sky_planmsg.h"
#include "sky_nojob.h"
#include "sky_ratelimit.h"
#include "sky_registry.h"
#include "sky_servefault.h"
#include "sky_sign.h"
#include "sky_notify.h"
#include "sky_signal.h"
#include "sky_thread.h"
#include "sky_topics.h"

#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the service ------------------------------------------------------------ */

#define MAX_PENDING 16
/* answers kept for resends: a retrying `sky job submit` gets the same one */
#define MAX_RECENT 32
/* Enrollment intake: per nonce (one claim connection's request) 2 at once
 * and one every 2 s after (a board resends every 3 s); all nonces
 * together 32 at once and 16 per second after, so 16 boards enrolling at
 * once pass and a flood of fresh nonces costs a table look-up each. At
 * most 5 refusal lines per 10 s reach the log; the rest are counted. */
#define ENROLL_NONCE_BURST 2
#define ENROLL_NONCE_PER_S 0.5
#define ENROLL_ALL_BURST 32
#define ENROLL_ALL_PER_S 16
#define LOG_LINES_PER_WINDOW 5
#define LOG_WINDOW_S 10.0
#define REVOKED_CHECK_S 1.0
/* the longest the loop hands messages over before its tick runs again */
#define POLL_BUDGET_MS 50
/* a tick later than this after the one before: the loop itself stalled */
#define LOOP_STALL_S 1.0
/* how long a job re-planned without a revoked board waits for the boards
 * it wants (every online board with matching capabilities) */
#define REPLAN_WAIT_S 10.0

typedef struct pending_job {
	sky_job_req req;
	sky_model_cfg model; /* with the job's layers, seq, batch */
	double since;        /* when it arrived (monotonic) */
	unsigned char asked[SKY_REG_MAX_BOARDS]; /* probe requested of registry board i */
	unsigned char no_int8[SKY_REG_MAX_BOARDS]; /* infer: said that board i has no int8 times */
	/* re-plans of a running training job (see run_job) */
	int replan;          /* plan now over the online boards, without waiting */
	int dry;             /* only compute the plan's predicted step */
	int resume_step, generation;
	/* dry: also the current plan's stages (boards, units), re-simulated
	 * with the boards' current capabilities into current_s */
	int cur_n;
	const char (*cur_board)[SKY_TOPIC_SEGMENT_MAX + 1];
	const int *cur_first, *cur_last;
	double current_s;
	int64_t published;   /* out: the epoch published (0: none) */
	double predicted_s;  /* out: the plan's simulated step */
	char why[200];       /* out: why there is no plan */
} pending_job;

/* A training job with checkpoints, followed until it is done so it can be
 * re-planned: at once when a board of its plan goes offline (from the
 * last complete checkpoint), or, when a board joins or its speed changes,
 * at the next commit if the predicted step improves by more than
 * --replan-gain and the plan is --replan-holdoff old. */
#define MAX_RUNNING 16
#define RUN_MAX_STAGES SKY_JOBSTATE_MAX_STAGES
typedef struct run_job {
	pending_job pj;      /* the request, for re-plans */
	int64_t epoch;       /* of the current plan */
	int generation;
	int n_stages;
	char board[RUN_MAX_STAGES][SKY_TOPIC_SEGMENT_MAX + 1];
	int first[RUN_MAX_STAGES], last[RUN_MAX_STAGES];
	/* drift: each stage's busy seconds a step (metrics busy x step_s):
	 * the mean of its first steps under this plan, the last step seen,
	 * how many steps in a row were off by more than half, and when its
	 * board was last asked to probe again */
	double busy_base[RUN_MAX_STAGES];
	int busy_n[RUN_MAX_STAGES], busy_step[RUN_MAX_STAGES], drift_run[RUN_MAX_STAGES];
	double probe_asked_s[RUN_MAX_STAGES];
	double predicted_s;
	double plan_s;       /* monotonic: when the current plan went out */
	int paused;
	double retry_s;      /* paused: next attempt */
	char pause_why[200]; /* the fault that paused it */
	int want;            /* a voluntary re-plan waits for the next commit */
	char want_why[160];
	long commits_at_want;
	int ask_step, ask_ahead; /* the checkpoint asked for it, and how far ahead */
	double fault_s;      /* monotonic: the fault or decision a re-plan answers (0 none) */
	double next_eval_s;
	/* taken back from <state>/jobs/<job>.run.json at a restart (monotonic
	 * restored_at): until restored_until, a board not heard from since (the
	 * registry restores every board offline) is not taken for dead yet */
	double restored_at, restored_until;
	/* serving: each stage's slice and the signed plan's SHA-256 (kept in
	 * the state file, checked again at a restart) */
	sky_plan_slice slice[RUN_MAX_STAGES];
	char plan_sha[65];
} run_job;

typedef struct svc {
	const sky_service_opts *o;
	char state_dir[512];
	sky_ca ca;
	sky_signer signer;
	mbedtls_x509_crt planner_crt; /* to read our own retained plans back */
	sky_mutex lock; /* registry and queue: Paho's thread vs the main loop */
	sky_registry reg;
	sky_mqtt *m;
	_Atomic int lost; /* set on Paho's thread (on_lost); not under the lock */
	pending_job pending[MAX_PENDING];
	sky_jobstat jobs; /* training jobs, from their metrics (under lock) */
	sky_ckpt_store ckpt; /* checkpoints and job logs (under lock) */
	run_job run[MAX_RUNNING]; /* jobs followed for re-plans (under lock) */
	int n_run;
	int n_pending;
	int64_t epoch;
	/* retained plans on the broker since the last connect, per registry
	 * job: the newest epoch seen there (0: none yet). When republish_at
	 * passes, every job whose plan is missing or older there is published
	 * again from <state>/plans/<job>.env. */
	int64_t on_broker[SKY_REG_MAX_JOBS];
	double republish_at; /* monotonic; 0: nothing due */
	/* working memory for planning (large structs, kept out of the stack) */
	sky_fleet fleet;
	int fleet_reg[SKY_PLAN_MAX_BOARDS]; /* fleet index -> registry index */
	sky_linkprobe links;                /* each site's path through its bridge */
	sky_plan plan;
	sky_planmsg msg;
	char payload[SKY_SIGN_MAX_PAYLOAD];
	char envelope[SKY_SIGN_MAX_ENVELOPE];
	char status_buf[4u << 20];
	char enroll_reply[SKY_ENROLL_REPLY_MAX];
	struct {
		char op[SKY_TOPIC_SEGMENT_MAX + 1];
		char submit_id[33];
		char reply[SKY_JOB_REPLY_MAX_BYTES];
		int len;
	} recent[MAX_RECENT];
	int next_recent;
	sky_bucket enroll_all;
	sky_keyed_buckets enroll_nonce;
	long enroll_limited;
	sky_log_throttle enroll_log, oversize_log, revoked_log;
	/* the CA's revoked list (<pki>/revoked, sky_crl.h), read again every
	 * REVOKED_CHECK_S: `sky pki revoke` needs no message to reach us */
	sky_crl_list revoked;
	double revoked_check_at; /* monotonic */
	sky_deploy deploy; /* model uploads, slices, slice transfers (main thread) */
	/* inference requests for jobs that do not serve (sky_nojob.h) */
	sky_nojob nojob;
	sky_log_throttle req_log;
	char req_resp[SKY_INFER_RESP_MAX_BYTES];
	/* serving jobs' unanswered requests, replayed after a re-plan
	 * (sky_servefault.h; under lock) */
	sky_servefault sf;
	sky_log_throttle sf_log;
} svc;

static svc g_svc; /* one service per process; far too big for a stack */

static run_job *find_run(svc *s, const char *job)
{
	for (int i = 0; i < s->n_run; i++)
		if (!strcmp(s->run[i].pj.req.job, job))
			return &s->run[i];
	return NULL;
}

/* <state>/<name> into buf. Returns 0 or SKY_ERANGE. */
static int state_file(const svc *s, const char *name, char *buf, size_t cap)
{
	int n = snprintf(buf, cap, "%s/%s", s->state_dir, name);
	return (n < 0 || (size_t)n >= cap) ? SKY_ERANGE : 0;
}

/* An infer job's model: uploaded, int8, of the job's shapes; and its batch
 * within the model's. Returns 0 or the reason in d. */
static int check_infer(svc *s, pending_job *pj, sky_diag *d)
{
	sky_job_req *r = &pj->req;
	if (r->serve_batch == 0)
		r->serve_batch = pj->model.batch;
	if (r->serve_batch > pj->model.batch)
		return sky_diag_set(d, SKY_ERANGE,
				    "job %s: serve batch %d is above the model's batch %d (the "
				    "micro-batch the boards probe and serve)",
				    r->job, r->serve_batch, pj->model.batch);
	sky_diag md;
	sky_diag_clear(&md);
	int rc = sky_deploy_check(&s->deploy, r->weights, &pj->model, &md);
	if (rc)
		return sky_diag_set(d, rc, "job %s: %s", r->job, md.msg);
	return 0;
}

/* Parses and queues a job. Returns 0, or the reason it was refused in d
 * (and the log). */
static int queue_job(svc *s, const char *buf, size_t len, const char *from, sky_diag *d)
{
	pending_job pj;
	memset(&pj, 0, sizeof pj);
	int rc = sky_job_req_parse(buf, len, &pj.req, d);
	if (rc != 0) {
		SKY_WARN("job from %s refused: %s", from, d->msg);
		return rc;
	}
	sky_model_preset(pj.req.model, &pj.model);
	if (pj.req.layers)
		pj.model.layers = pj.req.layers;
	if (pj.req.seq)
		pj.model.seq = pj.req.seq;
	if (pj.req.batch)
		pj.model.batch = pj.req.batch;
	if (pj.model.seq > pj.model.max_pos || sky_model_validate(&pj.model) != 0) {
		rc = sky_diag_set(d, SKY_EINVAL, "job %s refused: model %s has invalid shapes",
				  pj.req.job, pj.req.model);
		SKY_WARN("%s", d->msg);
		return rc;
	}
	if (pj.req.infer && (rc = check_infer(s, &pj, d)) != 0) {
		SKY_WARN("job %s from %s refused: %s", pj.req.job, from, d->msg);
		return rc;
	}
	pj.since = sky_clock_s();
	sky_mutex_lock(&s->lock);
	if (s->n_pending < MAX_PENDING) {
		s->pending[s->n_pending++] = pj;
		if (sky_nojob_kind_of(&s->nojob, pj.req.job) == SKY_NOJOB_UNKNOWN)
			sky_nojob_note(&s->nojob, pj.req.job, SKY_NOJOB_QUEUED);
		SKY_INFO("job %s queued from %s (%s, %d layers, seq %d, batch %d, %s, min_boards %d)",
			 pj.req.job, from, pj.req.model, pj.model.layers, pj.model.seq,
			 pj.model.batch, pj.req.algo, pj.req.min_boards);
	} else {
		rc = sky_diag_set(d, SKY_ESTATE, "job %s refused: %d jobs already waiting",
				  pj.req.job, MAX_PENDING);
		SKY_WARN("%s", d->msg);
	}
	sky_mutex_unlock(&s->lock);
	return rc;
}

/* A submission from operator op (its CN, from the topic the ACL let only
 * it publish on): queue it and answer on its reply topic, or, for a resend
 * of a submission already answered, answer the same again. */
static void handle_submit(svc *s, const char *op, const char *p, size_t len)
{
	char topic[SKY_TOPIC_BUF], from[96];
	sky_job_req req;
	sky_job_reply r;
	sky_diag d;
	sky_diag_clear(&d);
	memset(&r, 0, sizeof r);
	if (sky_topic_jobs(topic, sizeof topic, op, SKY_TOPIC_REPLY) != 0)
		return;
	int prc = sky_job_req_parse(p, len, &req, &d);
	if (req.submit_id[0]) {
		for (int i = 0; i < MAX_RECENT; i++)
			if (s->recent[i].len > 0 && !strcmp(s->recent[i].op, op) &&
			    !strcmp(s->recent[i].submit_id, req.submit_id)) {
				SKY_INFO("job %s from %s sent again (submit %s): answered again",
					 req.job, op, req.submit_id);
				sky_mqtt_publish(s->m, topic, s->recent[i].reply,
						 (size_t)s->recent[i].len, 1, 0, NULL);
				return;
			}
	}
	snprintf(from, sizeof from, "operator %s", op);
	int rc = prc ? prc : queue_job(s, p, len, from, &d);
	if (prc)
		SKY_WARN("job from %s refused: %s", from, d.msg);
	snprintf(r.submit_id, sizeof r.submit_id, "%s", req.submit_id);
	snprintf(r.job, sizeof r.job, "%s", req.job);
	r.ok = rc == 0;
	snprintf(r.state, sizeof r.state, "queued");
	snprintf(r.error, sizeof r.error, "%.200s", d.msg[0] ? d.msg : sky_strerror(rc));
	int slot = s->next_recent;
	int n = sky_job_reply_encode(&r, s->recent[slot].reply, sizeof s->recent[slot].reply);
	if (n <= 0) {
		SKY_WARN("job %s from %s: the answer does not fit", req.job, op);
		return;
	}
	sky_mqtt_publish(s->m, topic, s->recent[slot].reply, (size_t)n, 1, 0, NULL);
	if (req.submit_id[0]) {
		snprintf(s->recent[slot].op, sizeof s->recent[slot].op, "%s", op);
		snprintf(s->recent[slot].submit_id, sizeof s->recent[slot].submit_id, "%s",
			 req.submit_id);
		s->recent[slot].len = n;
		s->next_recent = (slot + 1) % MAX_RECENT;
	}
}

/* The line that stands for suppressed ones; for enrollment it also says
 * how many requests the rate limit dropped before reading them. */
static void suppressed_line(svc *s, const sky_log_throttle *t, const char *what, long n)
{
	if (t == &s->enroll_log || t == &s->req_log)
		SKY_WARN("%s: %ld more suppressed in the last %.0f s (%ld requests dropped unread "
			 "by the rate limit so far)",
			 what, n, t->window_s,
			 t == &s->req_log ? s->nojob.limited : s->enroll_limited);
	else
		SKY_WARN("%s: %ld more suppressed in the last %.0f s", what, n, t->window_s);
}

/* A refusal line through a throttle: at most LOG_LINES_PER_WINDOW per
 * window, then one "... N more suppressed" line. */
static void throttled_warn(svc *s, sky_log_throttle *t, const char *what, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void throttled_warn(svc *s, sky_log_throttle *t, const char *what, const char *fmt, ...)
{
	long flushed = 0;
	int allow = sky_log_throttle_allow(t, sky_clock_s(), &flushed);
	if (flushed > 0)
		suppressed_line(s, t, what, flushed);
	if (!allow)
		return;
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	SKY_WARN("%s", line);
}

/* A request on sky/v1/job/<job>/req/<client>: answered "unknown_job" when
 * the job does not serve (sky_nojob.h). Called with the lock held. */
static void handle_request(svc *s, const char *topic, size_t tl, const char *p, size_t len)
{
	char rtopic[SKY_TOPIC_BUF];
	int limited = 0;
	sky_diag why;
	sky_diag_clear(&why);
	int n = sky_nojob_on_request(&s->nojob, topic, tl, p, len, sky_clock_s(), rtopic,
				     sizeof rtopic, s->req_resp, sizeof s->req_resp, &limited, &why);
	if (n > 0)
		sky_mqtt_publish(s->m, rtopic, s->req_resp, (size_t)n, 1, 0, NULL);
	if (n > 0 || limited)
		throttled_warn(s, &s->req_log, "inference request refusals", "%s", why.msg);
}

static void handle_enroll(svc *s, const char *nonce, const char *p, size_t len)
{
	char topic[SKY_TOPIC_BUF], id[SKY_ENROLL_ID_MAX + 1] = "";
	size_t reply_len = 0;
	sky_diag d;
	sky_diag_clear(&d);
	/* before anything is parsed: a flood costs a table look-up a message */
	double now = sky_clock_s();
	if (!sky_keyed_take(&s->enroll_nonce, nonce, now) || !sky_bucket_take(&s->enroll_all, now)) {
		s->enroll_limited++;
		s->reg.c.enroll_refused++;
		throttled_warn(s, &s->enroll_log, "enrollment refusals",
			       "enrollment on nonce %s dropped unread: over the rate limit "
			       "(%ld dropped so far)",
			       nonce, s->enroll_limited);
		return;
	}
	if (len > SKY_ENROLL_REQ_MAX) {
		s->reg.c.oversize++;
		s->reg.c.enroll_refused++;
		throttled_warn(s, &s->enroll_log, "enrollment refusals",
			       "enrollment on nonce %s: %zu bytes over the limit, refused unparsed",
			       nonce, len);
		return;
	}
	int rc = sky_ca_enroll(&s->ca, p, len, sky_clock_unix(), s->enroll_reply,
			       sizeof s->enroll_reply, &reply_len, id, &d);
	if (rc == 0) {
		s->reg.c.enrolled++;
		sky_registry_add(&s->reg, id);
		SKY_INFO("enrolled board %s (nonce %s)", id, nonce);
	} else {
		s->reg.c.enroll_refused++;
		throttled_warn(s, &s->enroll_log, "enrollment refusals",
			       "enrollment refused for '%s' (nonce %s): %s", id, nonce, d.msg);
	}
	s->reg.changed = 1;
	if (reply_len > 0 && sky_topic_enroll(topic, sizeof topic, nonce, SKY_TOPIC_CERT) == 0)
		sky_mqtt_publish(s->m, topic, s->enroll_reply, reply_len, 1, 0, NULL);
}

/* <state>/plans/<job>.env: the newest signed plan of each job, exactly as
 * published, so a planner restarted after the broker lost its retained
 * messages can publish it again. Returns 0 or SKY_E*. */
static int plan_file(const svc *s, const char *job, char *buf, size_t cap)
{
	int n = snprintf(buf, cap, "%s/plans/%s.env", s->state_dir, job);
	return (n < 0 || (size_t)n >= cap) ? SKY_ERANGE : 0;
}

static int save_plan(svc *s, const char *job, const char *env, size_t len)
{
	char path[700];
	int rc = plan_file(s, job, path, sizeof path);
	if (rc == 0) {
		char dir[640];
		snprintf(dir, sizeof dir, "%s/plans", s->state_dir);
		rc = sky_file_mkdirs(dir, 0700);
	}
	if (rc == 0)
		rc = sky_file_write(path, env, len, 0600);
	if (rc)
		SKY_ERROR("cannot save the plan of job %s in %s: %s", job, path, sky_strerror(rc));
	return rc;
}

/* Reads <state>/plans/<job>.env into s->envelope and verifies it into
 * s->msg. Returns the envelope length or SKY_E*. */
static long load_plan(svc *s, const char *job)
{
	char path[700];
	size_t plen = 0;
	long n = plan_file(s, job, path, sizeof path);
	if (n == 0)
		n = sky_file_read(path, s->envelope, sizeof s->envelope);
	if (n <= 0)
		return n < 0 ? n : SKY_EFORMAT;
	int rc = sky_verify_envelope(&s->planner_crt, s->envelope, (size_t)n, s->payload,
				     sizeof s->payload, &plen, NULL);
	if (rc == 0)
		rc = sky_planmsg_decode(s->payload, plen, &s->msg, NULL);
	if (rc == 0 && strcmp(s->msg.job, job) != 0)
		rc = SKY_EFORMAT;
	return rc ? rc : n;
}

static int job_index(const sky_registry *r, const char *job)
{
	for (int j = 0; j < r->n_jobs; j++)
		if (strcmp(r->jobs[j].job, job) == 0)
			return j;
	return -1;
}

/* Our own plans, read back (retained ones at every connect): they restore
 * the assignments and keep the epoch above every plan ever published, even
 * if <state>/epoch was lost; one newer than our saved copy is saved. The
 * epoch of a retained one is noted, so the republish check knows what the
 * broker holds. Anything that does not verify is ignored. */
static void on_plan(svc *s, const char *topic, const char *p, size_t len, int retained)
{
	size_t plen = 0;
	if (len == 0 || sky_verify_envelope(&s->planner_crt, p, len, s->payload, sizeof s->payload,
					    &plen, NULL) != 0 ||
	    sky_planmsg_decode(s->payload, plen, &s->msg, NULL) != 0)
		return;
	char want[SKY_TOPIC_BUF];
	if (sky_topic_job(want, sizeof want, s->msg.job, SKY_TOPIC_PLAN) != 0 ||
	    strcmp(want, topic) != 0)
		return; /* signed for another job's topic */
	if (s->msg.epoch > s->epoch) {
		SKY_INFO("plan %s epoch %lld found on the broker; next epoch follows it", s->msg.job,
			 (long long)s->msg.epoch);
		s->epoch = s->msg.epoch;
	}
	int j = job_index(&s->reg, s->msg.job);
	if (j < 0 || s->msg.epoch > s->reg.jobs[j].epoch)
		save_plan(s, s->msg.job, p, len);
	sky_registry_assign(&s->reg, &s->msg);
	sky_nojob_note(&s->nojob, s->msg.job, s->msg.infer.on ? SKY_NOJOB_SERVING : SKY_NOJOB_TRAINING);
	j = job_index(&s->reg, s->msg.job);
	if (retained && j >= 0 && s->msg.epoch > s->on_broker[j])
		s->on_broker[j] = s->msg.epoch;
}

/* Publishes again (retained) every saved plan that the broker does not hold
 * at its epoch: after a broker restart without persistence, or a retained
 * message cleared by hand. Called with the lock held. */
static void republish_missing(svc *s)
{
	char topic[SKY_TOPIC_BUF];
	for (int j = 0; j < s->reg.n_jobs; j++) {
		const char *job = s->reg.jobs[j].job;
		if (s->on_broker[j] >= s->reg.jobs[j].epoch)
			continue;
		long n = load_plan(s, job);
		if (n < 0) {
			SKY_WARN("job %s epoch %lld: the broker does not hold its plan and the "
				 "saved copy cannot be used (%s)",
				 job, (long long)s->reg.jobs[j].epoch, sky_strerror((int)n));
			continue;
		}
		if (s->msg.epoch != s->reg.jobs[j].epoch ||
		    sky_topic_job(topic, sizeof topic, job, SKY_TOPIC_PLAN) != 0)
			continue;
		int had = s->on_broker[j] > 0;
		if (sky_mqtt_publish(s->m, topic, s->envelope, (size_t)n, 1, 1, NULL) == 0) {
			s->on_broker[j] = s->msg.epoch;
			SKY_INFO("job %s epoch %lld: the broker %s; republished the saved plan "
				 "(retained)",
				 job, (long long)s->msg.epoch,
				 had ? "held an older plan" : "held no plan");
		}
	}
}

static int deploy_publish(void *ctx, const char *topic, const void *data, size_t len)
{
	svc *s = ctx;
	return s->m ? sky_mqtt_publish(s->m, topic, data, len, 1, 0, NULL) : SKY_ENET;
}

/* Board id asks for its slice: sent if it is the one the job's newest plan
 * (as saved, signed) gives that board. */
static void handle_slice_req(svc *s, const char *id, const char *p, size_t len)
{
	sky_slice_req r;
	sky_diag d;
	sky_diag_clear(&d);
	if (sky_slice_req_decode(p, len, &r, &d) != 0) {
		SKY_WARN("slice request from %s ignored: %s", id, d.msg);
		return;
	}
	const sky_plan_slice *want = NULL;
	if (load_plan(s, r.job) > 0) {
		int k = sky_planmsg_find(&s->msg, id);
		if (k >= 0 && s->msg.infer.on)
			want = &s->msg.stages[k].slice;
	}
	if (sky_deploy_on_slice_req(&s->deploy, id, &r, want, sky_clock_s(), &d) != 0)
		SKY_WARN("slice request from %s refused: %s", id, d.msg);
}

static void replan(svc *s, run_job *r, const char *reason, double now);

/* A checkpoint part (called with the lock held): stored, or refused with
 * the reason; a commit may let a waiting voluntary re-plan go, and closes
 * the time lost of the last re-plan. */
static void on_ckpt(svc *s, const char *job, const char *board, const unsigned char *p, size_t len)
{
	sky_diag d;
	int64_t step = 0;
	double now = sky_clock_s();
	sky_diag_clear(&d);
	int rc = sky_ckpt_on_part(&s->ckpt, job, board, p, len, now, &step, &d);
	if (rc < 0) {
		SKY_WARN("checkpoint part from %s for job %s refused: %s", board, job, d.msg);
		return;
	}
	if (rc == 0)
		return;
	SKY_INFO("job %s: step %lld committed (every stage's checkpoint is in)", job,
		 (long long)step);
	run_job *r = find_run(s, job);
	if (!r)
		return;
	if (r->fault_s > 0) {
		sky_jobstat_replan_lost(&s->jobs, job, now - r->fault_s);
		r->fault_s = 0;
	}
	sky_ckpt_job *cj = sky_ckpt_find(&s->ckpt, job);
	if (r->want && cj && cj->commits > r->commits_at_want)
		replan(s, r, r->want_why, now);
}

/* sky/v1/job/<job>/stage/<k>/ready: job and k. Returns 0 or SKY_EINVAL. */
static int parse_ready(const char *topic, char *job, size_t cap, int *k)
{
	static const char pre[] = SKY_TOPIC_ROOT "/job/";
	if (strncmp(topic, pre, sizeof pre - 1) != 0)
		return SKY_EINVAL;
	const char *j = topic + sizeof pre - 1, *e = strchr(j, '/');
	if (!e || (size_t)(e - j) >= cap || strncmp(e, "/stage/", 7) != 0)
		return SKY_EINVAL;
	char *end;
	long v = strtol(e + 7, &end, 10);
	if (end == e + 7 || strcmp(end, "/" SKY_TOPIC_READY) != 0 || v < 0 || v >= SKY_SF_MAX_STAGES)
		return SKY_EINVAL;
	memcpy(job, j, (size_t)(e - j));
	job[e - j] = '\0';
	*k = (int)v;
	return sky_topic_segment_ok(job) ? 0 : SKY_EINVAL;
}

/* A tracked request let go without an answer (sky_servefault.h). */
static void sf_dropped(void *ctx, const sky_sf_job *j, const sky_sf_req *r, sky_sf_reason why)
{
	svc *s = ctx;
	throttled_warn(s, &s->sf_log, "serving requests not tracked",
		       "job %s: request %s of %s dropped from the replay table unanswered (%s; %ld "
		       "evicted, %ld expired so far)",
		       j->job, r->id, r->client, sky_servefault_reason_name(why),
		       j->dropped[SKY_SF_EVICTED], j->dropped[SKY_SF_EXPIRED]);
}

static int sf_publish(void *ctx, const char *topic, const void *data, size_t len)
{
	svc *s = ctx;
	return s->m && !atomic_load(&s->lost) ? sky_mqtt_publish(s->m, topic, data, len, 1, 0, NULL)
					      : SKY_ENET;
}

/* An answer to a client of a serving job (the planner's own refusals
 * too): the request is answered; the first answer of a re-plan's epoch
 * closes its time lost. Called with the lock held. */
static void on_serve_resp(svc *s, const char *job, const char *client, const unsigned char *p,
			  size_t len)
{
	double lost_s = 0;
	if (sky_servefault_on_resp(&s->sf, job, client, p, len, sky_clock_s(), &lost_s) != 1)
		return;
	const sky_sf_job *j = sky_servefault_job(&s->sf, job);
	run_job *r = find_run(s, job);
	if (r)
		r->fault_s = 0;
	sky_jobstat_replan_lost(&s->jobs, job, lost_s);
	char fields[200];
	snprintf(fields, sizeof fields,
		 "\"event\":\"answered\",\"epoch\":%lld,\"lost_s\":%.3f,\"replayed\":%ld",
		 (long long)(j ? j->epoch : 0), lost_s, j ? j->replayed_epoch : 0);
	sky_ckpt_log(&s->ckpt, job, fields);
	SKY_INFO("job %s epoch %lld answers again: %.3f s after the fault", job,
		 (long long)(j ? j->epoch : 0), lost_s);
}

static void on_msg(void *ctx, const char *topic, size_t tl, const unsigned char *p, size_t len,
		   int retained)
{
	svc *s = ctx;
	/* before the lock, which the loop may hold a while: a link probe's
	 * return is timed when it arrived */
	double now = sky_clock_s();
	char seg[SKY_TOPIC_SEGMENT_MAX + 1], leaf[16];
	sky_diag d;
	sky_diag_clear(&d);
	if (strlen(topic) != tl)
		return;
	if (sky_topic_parse(topic, tl, "jobs", seg, sizeof seg, leaf, sizeof leaf) == 0) {
		if (strcmp(leaf, SKY_TOPIC_SUBMIT) == 0)
			handle_submit(s, seg, (const char *)p, len);
		else if (strcmp(leaf, SKY_TOPIC_WEIGHTS) == 0)
			sky_deploy_on_weights(&s->deploy, seg, p, len, deploy_publish, s);
		return;
	}
	if (sky_topic_parse(topic, tl, "board", seg, sizeof seg, leaf, sizeof leaf) == 0 &&
	    strcmp(leaf, SKY_TOPIC_SLICE_REQ) == 0) {
		sky_mutex_lock(&s->lock); /* s->msg is shared with the planning */
		handle_slice_req(s, seg, (const char *)p, len);
		sky_mutex_unlock(&s->lock);
		return;
	}
	sky_mutex_lock(&s->lock);
	if (sky_topic_parse(topic, tl, "board", seg, sizeof seg, leaf, sizeof leaf) == 0) {
		sky_reg_board *prev = sky_registry_find(&s->reg, seg);
		int was_online = prev && prev->state == SKY_REG_ONLINE;
		char was_boot[SKY_BOOT_ID_MAX + 1] = "";
		int64_t was_session = prev ? prev->session : 0;
		if (prev)
			snprintf(was_boot, sizeof was_boot, "%s", prev->boot);
		int rc = sky_registry_on_board_msg(&s->reg, seg, leaf, (const char *)p, len,
						   sky_clock_s(), sky_clock_unix(), &d);
		sky_reg_board *now_b = sky_registry_find(&s->reg, seg);
		if (now_b && was_boot[0] && strcmp(was_boot, now_b->boot) != 0)
			SKY_INFO("board %s: new boot %s at session %lld replaces boot %s (session "
				 "%lld), whose late messages are now stale",
				 seg, now_b->boot, (long long)now_b->session, was_boot,
				 (long long)was_session);
		if (now_b && was_online != (now_b->state == SKY_REG_ONLINE))
			SKY_INFO("board %s %s (boot %s session %lld, %s)", seg,
				 now_b->state == SKY_REG_ONLINE ? "online" : "offline",
				 now_b->boot[0] ? now_b->boot : "-", (long long)now_b->session,
				 now_b->state == SKY_REG_ONLINE ? leaf : "its will or shutdown status");
		if (rc < 0)
			SKY_WARN("rejected %s from %s: %s", leaf, seg, d.msg);
		else if (rc == 1 && now_b && now_b->state == SKY_REG_REVOKED)
			throttled_warn(s, &s->revoked_log, "messages from revoked boards", "%s",
				       d.msg);
		else if (rc == 1)
			SKY_INFO("%s", d.msg);
		else if (strcmp(leaf, SKY_TOPIC_PLAN_ACK) == 0) {
			sky_reg_board *b = sky_registry_find(&s->reg, seg);
			if (b && sky_reg_ack(b) > 0)
				SKY_INFO("board %s holds job %s epoch %lld stage %d: %lld bytes reserved",
					 seg, b->job, (long long)b->epoch, b->stage,
					 (long long)b->ack_bytes);
			else if (b && b->ack < 0)
				SKY_WARN("board %s refused job %s epoch %lld: %s", seg, b->ack_job,
					 (long long)b->ack_epoch, b->ack_reason);
		}
	} else if (sky_topic_parse(topic, tl, "job", seg, sizeof seg, leaf, sizeof leaf) == 0 &&
		   strcmp(leaf, SKY_TOPIC_PLAN) == 0) {
		on_plan(s, topic, (const char *)p, len, retained);
	} else if (sky_topic_parse(topic, tl, "job", seg, sizeof seg, leaf, sizeof leaf) == 0 &&
		   strcmp(leaf, SKY_TOPIC_METRICS) == 0) {
		sky_jobstat_on_metrics(&s->jobs, seg, (const char *)p, len, sky_clock_s());
	} else if (sky_topic_parse(topic, tl, "enroll", seg, sizeof seg, leaf, sizeof leaf) == 0 &&
		   strcmp(leaf, SKY_TOPIC_CSR) == 0) {
		handle_enroll(s, seg, (const char *)p, len);
	} else if (strncmp(topic, SKY_TOPIC_ROOT "/site/", sizeof SKY_TOPIC_ROOT + 5) == 0) {
		sky_linkprobe_on_msg(&s->links, topic, p, len, now);
	} else {
		char board[SKY_TOPIC_SEGMENT_MAX + 1];
		int k;
		if (sky_topic_parse_job_to(topic, tl, SKY_TOPIC_CKPT, seg, sizeof seg, board,
					   sizeof board) == 0) {
			on_ckpt(s, seg, board, p, len);
		} else if (sky_topic_parse_job_to(topic, tl, SKY_TOPIC_RESP, seg, sizeof seg, board,
						  sizeof board) == 0) {
			on_serve_resp(s, seg, board, p, len);
		} else if (parse_ready(topic, seg, sizeof seg, &k) == 0) {
			sky_servefault_on_ready(&s->sf, seg, k, p, len);
		} else {
			if (sky_topic_parse_job_to(topic, tl, SKY_TOPIC_REQ, seg, sizeof seg, board,
						   sizeof board) == 0 &&
			    sky_servefault_on_req(&s->sf, seg, board, p, len, sky_clock_s(), sf_dropped,
						  s) < 0)
				throttled_warn(s, &s->sf_log, "serving requests not tracked",
					       "job %s: a request of %s is %zu bytes, over the %u a "
					       "replay keeps: not tracked (a fault now would lose it)",
					       seg, board, len, SKY_SF_MAX_REQ_BYTES);
			handle_request(s, topic, tl, (const char *)p, len);
		}
	}
	sky_mutex_unlock(&s->lock);
}

/* A message over its topic class's limit, dropped on arrival (sky_mqtt.h):
 * counted where the registry counts oversize messages, and logged through
 * a throttle. */
static void on_oversize(void *ctx, const char *topic, size_t tl, size_t len)
{
	svc *s = ctx;
	char seg[SKY_TOPIC_SEGMENT_MAX + 1], leaf[16];
	sky_diag d;
	sky_diag_clear(&d);
	if (strlen(topic) != tl)
		return;
	sky_mutex_lock(&s->lock);
	if (sky_topic_parse(topic, tl, "board", seg, sizeof seg, leaf, sizeof leaf) == 0 &&
	    sky_registry_on_board_msg(&s->reg, seg, leaf, NULL, len, sky_clock_s(),
				      sky_clock_unix(), &d) < 0) {
		throttled_warn(s, &s->oversize_log, "oversize messages", "rejected %s from %s: %s",
			       leaf, seg, d.msg);
	} else {
		s->reg.c.oversize++;
		if (sky_topic_parse(topic, tl, "enroll", seg, sizeof seg, leaf, sizeof leaf) == 0)
			s->reg.c.enroll_refused++;
		throttled_warn(s, &s->oversize_log, "oversize messages",
			       "%s: %zu bytes over the %zu limit of its kind, dropped unread", topic,
			       len, sky_topic_max_bytes(topic));
	}
	s->reg.changed = 1;
	sky_mutex_unlock(&s->lock);
}

static void on_lost(void *ctx, const char *cause)
{
	svc *s = ctx;
	atomic_store(&s->lost, 1);
	SKY_WARN("connection to the broker lost: %s", cause);
}

static int connect_svc(svc *s, sky_diag *d)
{
	char ca[600], crt[600], key[600], client[64];
	int rc;
	snprintf(ca, sizeof ca, "%s/%s", s->o->pki_dir, SKY_CA_CERT_FILE);
	snprintf(crt, sizeof crt, "%s/%s", s->o->pki_dir, SKY_CA_PLANNER_CERT_FILE);
	snprintf(key, sizeof key, "%s/%s", s->o->pki_dir, SKY_CA_PLANNER_KEY_FILE);
	snprintf(client, sizeof client, "skyplan"); /* the broker names us by our CN */
	sky_mqtt_opts mo = {.broker = s->o->broker, .client_id = client, .ca_file = ca,
			    .cert_file = crt, .key_file = key,
			    .keepalive_s = s->o->keepalive_s > 0 ? s->o->keepalive_s : 10,
			    .on_msg = on_msg, .on_lost = on_lost, .on_oversize = on_oversize,
			    /* the broker keeps our subscriptions and queues what
			     * boards and operators send while we are away (one
			     * planner per fleet: the session is its CN's) */
			    .persistent = 1, .ctx = s};
	sky_mqtt *m = NULL;
	atomic_store(&s->lost, 0);
	if ((rc = sky_mqtt_connect(&m, &mo, d)) != 0)
		return rc;
	sky_mutex_lock(&s->lock);
	s->m = m;
	sky_mutex_unlock(&s->lock);
	const char *subs[] = {SKY_TOPIC_ROOT "/board/+/" SKY_TOPIC_STATUS,
			      SKY_TOPIC_ROOT "/board/+/" SKY_TOPIC_HEARTBEAT,
			      SKY_TOPIC_ROOT "/board/+/" SKY_TOPIC_CAPS,
			      SKY_TOPIC_ROOT "/board/+/" SKY_TOPIC_PLAN_ACK, SKY_TOPIC_SUB_ALL_CSRS,
			      SKY_TOPIC_SUB_ALL_PLANS, SKY_TOPIC_ROOT "/job/+/" SKY_TOPIC_METRICS,
			      SKY_TOPIC_SUB_ALL_SUBMITS, SKY_TOPIC_ROOT "/jobs/+/" SKY_TOPIC_WEIGHTS,
			      SKY_TOPIC_ROOT "/board/+/" SKY_TOPIC_SLICE_REQ,
			      /* requests, to answer those for jobs that do not serve */
			      SKY_TOPIC_ROOT "/job/+/" SKY_TOPIC_REQ "/+",
			      /* answers and stages' readiness, for serving re-plans */
			      SKY_TOPIC_ROOT "/job/+/" SKY_TOPIC_RESP "/+",
			      SKY_TOPIC_ROOT "/job/+/stage/+/" SKY_TOPIC_READY,
			      SKY_TOPIC_ROOT "/job/+/" SKY_TOPIC_CKPT "/+",
			      SKY_TOPIC_ROOT "/site/+/back/" SKY_TOPIC_ECHO};
	sky_mutex_lock(&s->lock);
	memset(s->on_broker, 0, sizeof s->on_broker);
	s->republish_at = 0;
	sky_mutex_unlock(&s->lock);
	for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
		if ((rc = sky_mqtt_subscribe(m, subs[i], 1, 5000, d)) != 0)
			return rc;
	/* the broker sends retained plans right after the subscription; what
	 * has not come within this grace is missing there (publishing a plan
	 * the broker does hold is harmless: boards re-acknowledge it) */
	sky_mutex_lock(&s->lock);
	s->republish_at = sky_clock_s() + 2.0;
	sky_mutex_unlock(&s->lock);
	SKY_INFO("connected to %s as %s", s->o->broker, SKY_TOPIC_PLANNER_CN);
	return 0;
}

static void drop(svc *s)
{
	sky_mutex_lock(&s->lock);
	sky_mqtt *m = s->m;
	s->m = NULL;
	sky_mutex_unlock(&s->lock);
	sky_mqtt_close(m, 1000);
}

static void save_state(svc *s)
{
	char path[640];
	sky_mutex_lock(&s->lock);
	int64_t unix_s = sky_clock_unix();
	int n = sky_registry_to_json(&s->reg, unix_s, s->status_buf, sizeof s->status_buf);
	/* the scrape's snapshot from the same registry and clock as fleet.json */
	sky_metrics_publish(sky_metrics_default(), &s->reg, unix_s);
	s->reg.changed = 0;
	sky_mutex_unlock(&s->lock);
	if (state_file(s, "fleet.json", path, sizeof path) != 0 || n < 0 || sky_file_write(path, s->status_buf, (size_t)n, 0644) != 0)
		SKY_WARN("cannot write %s", path);
	/* training jobs beside it, once there are any (sky fleet status shows them) */
	sky_mutex_lock(&s->lock);
	int jn = s->jobs.n ? sky_jobstat_to_json(&s->jobs, s->status_buf, sizeof s->status_buf) : 0;
	s->jobs.changed = 0;
	sky_mutex_unlock(&s->lock);
	if (jn > 0 && (state_file(s, "jobs.json", path, sizeof path) != 0 ||
		       sky_file_write(path, s->status_buf, (size_t)jn, 0644) != 0))
		SKY_WARN("cannot write %s", path);
}

static void ask_probe(svc *s, const char *id, const pending_job *pj)
{
	char topic[SKY_TOPIC_BUF], buf[SKY_CMD_MAX_BYTES];
	int n = snprintf(buf, sizeof buf, "{\"cmd\":\"probe\",\"model\":\"%s\",\"seq\":%d,\"batch\":%d}",
			 pj->model.name, pj->model.seq, pj->model.batch);
	if (sky_topic_board(topic, sizeof topic, id, SKY_TOPIC_CMD) == 0)
		sky_mqtt_publish(s->m, topic, buf, (size_t)n, 1, 0, NULL);
	SKY_INFO("asked board %s to probe %s (seq %d, batch %d) for job %s", id, pj->model.name,
		 pj->model.seq, pj->model.batch, pj->req.job);
}

/* The training section of the plan: the job's settings and the
 * simulator's step time for this plan. */
static int fill_train(const pending_job *pj, double predicted_step_s, int owner_lag,
		      sky_planmsg *p, sky_diag *d)
{
	sky_plan_train *t = &p->train;
	const sky_job_req *r = &pj->req;
	memset(t, 0, sizeof *t);
	t->steps = r->steps;
	snprintf(t->sched, sizeof t->sched, "%s", r->sched);
	snprintf(t->optim, sizeof t->optim, "%s", r->optim);
	t->lr = r->lr;
	t->seed = r->seed;
	t->warmup = r->warmup;
	t->clip = r->clip;
	t->stall_s = r->stall_s;
	t->sealed = !r->plaintext;
	t->predicted_step_s = predicted_step_s;
	t->ckpt_every = r->ckpt_every;
	t->resume_step = pj->resume_step;
	t->generation = r->ckpt_every > 0 ? (pj->generation > 0 ? pj->generation : 1) : 0;
	if (r->data_owner[0]) {
		/* U-shaped: the owner holds the first and the last stage */
		snprintf(t->owner, sizeof t->owner, "%s", r->data_owner);
		t->owner_lag = owner_lag;
	}
	(void)d;
	return 0;
}

/* The serving section of the plan and each stage's slice, cut from the
 * stored model (sky_deploy.h). The predicted throughput is the served
 * batch over the slowest stage's time (int8 forward and its send). */
static int fill_infer(svc *s, const pending_job *pj, sky_planmsg *p, sky_diag *d)
{
	sky_plan_infer *in = &p->infer;
	const sky_job_req *r = &pj->req;
	memset(in, 0, sizeof *in);
	in->on = 1;
	in->batch = r->serve_batch;
	in->wait_ms = r->wait_ms;
	in->queue = r->queue;
	in->n_clients = r->n_clients;
	for (int i = 0; i < r->n_clients; i++)
		snprintf(in->clients[i], sizeof in->clients[i], "%s", r->clients[i]);
	in->predicted_seq_s = s->plan.bottleneck_s > 0 ? r->serve_batch / s->plan.bottleneck_s : 0;
	in->threads = 0;
	in->sealed = 1;
	for (int k = 0; k < p->n_stages; k++) {
		int rc = sky_deploy_cut(&s->deploy, r->weights, p->stages[k].first, p->stages[k].last,
					&p->stages[k].slice, d);
		if (rc)
			return rc;
		SKY_INFO("job %s stage %d (%s, half-layers %d-%d): slice %.16s.., %lld bytes in %d "
			 "chunks",
			 r->job, k, p->stages[k].board, p->stages[k].first, p->stages[k].last,
			 p->stages[k].slice.sha256, (long long)p->stages[k].slice.bytes,
			 p->stages[k].slice.chunks);
	}
	SKY_INFO("job %s: serving at batch %d, predicted %.1f sequences/s (bottleneck %.3f ms)",
		 r->job, in->batch, in->predicted_seq_s, 1e3 * s->plan.bottleneck_s);
	return 0;
}

/* A fresh frame key for the job, wrapped for each stage's board with the
 * public key of the certificate the CA issued it. */
static int wrap_keys(svc *s, sky_planmsg *p, sky_diag *d)
{
	unsigned char key[SKY_JOBKEY_BYTES];
	int rc = sky_jobkey_generate(&s->signer.rng, key, d);
	for (int k = 0; k < p->n_stages && !rc; k++) {
		char path[700];
		mbedtls_x509_crt crt;
		mbedtls_x509_crt_init(&crt);
		snprintf(path, sizeof path, "%s/" SKY_CA_CERTS_DIR "/%s.crt", s->o->pki_dir,
			 p->stages[k].board);
		if (mbedtls_x509_crt_parse_file(&crt, path) != 0)
			rc = sky_diag_set(d, SKY_ENOTFOUND,
					  "no certificate of board %s in %s to wrap the frame key "
					  "for (enrolled before this planner kept them? re-enroll, or "
					  "submit with --plaintext-frames)",
					  p->stages[k].board, path);
		else if ((rc = sky_jobkey_wrap(&crt.pk, key, p->job, p->stages[k].board, p->epoch,
					       &s->signer.rng, p->stages[k].key,
					       sizeof p->stages[k].key, d)) > 0)
			rc = 0;
		mbedtls_x509_crt_free(&crt);
	}
	memset(key, 0, sizeof key);
	return rc;
}

/* Queues job again from its newest saved plan (its model, shapes and
 * training settings), to be planned over the boards online now: the way a
 * job is planned when it is submitted. For a job without checkpoints,
 * which check_running does not follow. Called with the lock held. */
static void requeue_job(svc *s, const char *job, const char *why)
{
	for (int k = 0; k < s->n_pending; k++)
		if (strcmp(s->pending[k].req.job, job) == 0)
			return; /* already waiting to be planned */
	long n = load_plan(s, job);
	if (n < 0) {
		SKY_WARN("job %s: cannot re-plan (%s): its saved plan is unusable (%s)", job, why,
			 sky_strerror((int)n));
		return;
	}
	if (s->n_pending >= MAX_PENDING) {
		SKY_WARN("job %s: cannot re-plan (%s): %d jobs already waiting", job, why,
			 MAX_PENDING);
		return;
	}
	const sky_planmsg *p = &s->msg;
	pending_job *pj = &s->pending[s->n_pending];
	memset(pj, 0, sizeof *pj);
	sky_job_req *r = &pj->req;
	snprintf(r->job, sizeof r->job, "%s", p->job);
	snprintf(r->model, sizeof r->model, "%s", p->shape.name);
	r->layers = p->layers;
	r->seq = p->shape.seq;
	r->batch = p->shape.batch;
	r->micro_batches = p->micro_batches;
	snprintf(r->algo, sizeof r->algo, "%s", p->algo);
	snprintf(r->sched, sizeof r->sched, "%s", p->train.sched[0] ? p->train.sched : "1f1b");
	snprintf(r->objective, sizeof r->objective, "step");
	r->wait_s = REPLAN_WAIT_S;
	if (p->train.steps > 0) {
		r->train = 1;
		r->steps = p->train.steps;
		snprintf(r->optim, sizeof r->optim, "%s", p->train.optim);
		r->lr = p->train.lr;
		r->seed = (int)p->train.seed;
		r->warmup = p->train.warmup;
		r->clip = p->train.clip;
		r->stall_s = p->train.stall_s;
		r->plaintext = !p->train.sealed;
		snprintf(r->data_owner, sizeof r->data_owner, "%s", p->train.owner);
	}
	sky_model_preset(r->model, &pj->model);
	pj->model.layers = r->layers;
	pj->model.seq = r->seq;
	pj->model.batch = r->batch;
	pj->since = sky_clock_s();
	s->n_pending++;
	SKY_INFO("job %s epoch %lld: re-planning over the online boards (%s)", job,
		 (long long)p->epoch, why);
}

/* Reads the CA's revoked list and drops every board on it that the
 * registry does not hold as revoked yet: marked revoked (shown in sky
 * fleet status, its messages ignored from now on) and its job re-planned
 * without it: a job with checkpoints by check_running (the board is not
 * online any more), any other queued again. Called with the lock held. */
static void check_revoked(svc *s)
{
	sky_diag d;
	sky_diag_clear(&d);
	if (sky_crl_list_load(s->o->pki_dir, &s->revoked, &d) != 0) {
		throttled_warn(s, &s->revoked_log, "messages from revoked boards",
			       "cannot read the revoked list: %s", d.msg);
		return;
	}
	for (int i = 0; i < s->revoked.n; i++) {
		const sky_crl_entry *e = &s->revoked.e[i];
		sky_reg_board *b = sky_registry_find(&s->reg, e->id);
		if (b && b->state == SKY_REG_REVOKED)
			continue;
		char job[SKY_TOPIC_SEGMENT_MAX + 1] = "";
		int stage = b ? b->stage : -1;
		if (b)
			snprintf(job, sizeof job, "%s", b->job);
		const char *why = e->reason >= 0 ? sky_crl_reason_name(e->reason) : "revoked";
		if (sky_registry_revoke(&s->reg, e->id, why) != 1)
			continue;
		SKY_WARN("board %s revoked (%s; on the CA's CRL): dropped from the fleet%s%s", e->id,
			 why, job[0] ? ", it held a stage of job " : "", job);
		if (job[0] && !find_run(s, job)) {
			char what[96];
			snprintf(what, sizeof what, "board %s revoked, it held stage %d", e->id, stage);
			requeue_job(s, job, what);
		}
	}
}

/* Norm blocks of stage k of p (sky_stage.h): [*blk0, *blk0 + *nblk). */
static void stage_blocks(const sky_planmsg *p, int k, int *blk0, int *nblk)
{
	const sky_plan_stage *st = &p->stages[k];
	*blk0 = st->first == 0 ? 0 : 1 + st->first;
	*nblk = st->last - st->first + 1 + (st->first == 0) + (st->last == 2 * p->layers - 1);
}

/* Publishes, retained on sky/v1/job/<job>/load/<board>, each stage's
 * blocks from the last complete checkpoint, stamped with p's epoch.
 * Returns 0 or SKY_E* (logged; pj->why says it). */
static int publish_loads(svc *s, const sky_planmsg *p, pending_job *pj)
{
	for (int k = 0; k < p->n_stages; k++) {
		int blk0, nblk, rc;
		unsigned char *img = NULL;
		size_t len = 0;
		char topic[SKY_TOPIC_BUF];
		sky_diag d;
		sky_diag_clear(&d);
		stage_blocks(p, k, &blk0, &nblk);
		rc = sky_ckpt_image(&s->ckpt, p->job, p->epoch, blk0, nblk, &img, &len, &d);
		if (!rc && (rc = sky_topic_job_to(topic, sizeof topic, p->job, SKY_TOPIC_LOAD,
						     p->stages[k].board)) == 0)
			rc = sky_mqtt_publish(s->m, topic, img, len, 1, 1, &d);
		free(img);
		if (rc) {
			snprintf(pj->why, sizeof pj->why, "checkpoint of step %d for %s: %.120s",
				 p->train.resume_step, p->stages[k].board, d.msg);
			SKY_ERROR("job %s epoch %lld not published: %s", p->job, (long long)p->epoch,
				  pj->why);
			return rc;
		}
	}
	return 0;
}

/* Keeps what following r needs in <state>/jobs/<job>.run.json (sky_jobstate.h),
 * so a restarted planner goes on following it. */
static void run_save(svc *s, const run_job *r)
{
	static sky_jobstate js; /* the loop's thread only */
	sky_diag d;
	sky_diag_clear(&d);
	memset(&js, 0, sizeof js);
	js.req = r->pj.req;
	js.epoch = r->epoch;
	js.generation = r->generation;
	js.predicted_s = r->predicted_s > 0 ? r->predicted_s : 0;
	js.paused = r->paused;
	snprintf(js.pause_why, sizeof js.pause_why, "%s", r->pause_why);
	js.n_stages = r->n_stages;
	for (int k = 0; k < r->n_stages; k++) {
		memcpy(js.board[k], r->board[k], sizeof js.board[k]);
		js.first[k] = r->first[k];
		js.last[k] = r->last[k];
		memcpy(js.slice[k], r->slice[k].sha256, sizeof js.slice[k]);
		js.slice_bytes[k] = r->slice[k].bytes;
	}
	memcpy(js.plan_sha256, r->plan_sha, sizeof js.plan_sha256);
	if (sky_jobstate_save(s->state_dir, &js, &d) != 0)
		SKY_ERROR("job %s: its state is not saved (%s); a planner restart would stop "
			  "following it",
			  r->pj.req.job, d.msg);
}

/* A training plan with checkpoints, or a serving plan that re-plans, went
 * out (signed as env, elen bytes): follow its job (the first plan adds it,
 * a re-plan updates it), tell the store or the replay table its epoch, and
 * keep it in the job's state file. */
static void follow_job(svc *s, const pending_job *pj, const sky_planmsg *p, const char *env,
		       size_t elen)
{
	run_job *r = find_run(s, p->job);
	if (p->n_stages > RUN_MAX_STAGES) {
		SKY_WARN("job %s: %d stages, more than the %d a re-plan follows; no re-plans", p->job,
			 p->n_stages, RUN_MAX_STAGES);
		return;
	}
	if (!r) {
		if (s->n_run == MAX_RUNNING) {
			SKY_WARN("job %s: already following %d jobs; no re-plans for it", p->job,
				 MAX_RUNNING);
			return;
		}
		r = &s->run[s->n_run++];
		memset(r, 0, sizeof *r);
		r->pj = *pj;
		r->pj.replan = r->pj.dry = 0;
	}
	r->epoch = p->epoch;
	r->generation = p->infer.on ? (pj->generation > 0 ? pj->generation : 1)
				    : p->train.generation;
	r->n_stages = p->n_stages;
	for (int k = 0; k < p->n_stages; k++) {
		snprintf(r->board[k], sizeof r->board[k], "%s", p->stages[k].board);
		r->first[k] = p->stages[k].first;
		r->last[k] = p->stages[k].last;
		r->busy_n[k] = r->busy_step[k] = r->drift_run[k] = 0;
		r->busy_base[k] = 0;
		r->slice[k] = p->stages[k].slice;
	}
	unsigned char sha[32];
	sky_sha256(env, elen, sha);
	sky_sha256_hex(sha, r->plan_sha);
	r->predicted_s = pj->predicted_s;
	r->plan_s = sky_clock_s();
	r->paused = 0;
	r->want = 0;
	r->ask_step = 0;
	r->restored_until = 0;
	if (p->infer.on) {
		/* serving: its unanswered requests are replayed after a re-plan */
		if (sky_servefault_follow(&s->sf, p->job, p->epoch, p->n_stages, p->infer.queue,
					  pj->replan, r->fault_s) != 0)
			SKY_WARN("job %s: already following %d serving jobs; requests in flight at "
				 "a fault are not replayed",
				 p->job, SKY_SF_MAX_JOBS);
		run_save(s, r);
		return;
	}
	if (!sky_ckpt_begin(&s->ckpt, p->job, p->epoch, 2 * p->layers + 2))
		SKY_WARN("job %s: the checkpoint store is full", p->job);
	run_save(s, r);
}

/* Plans pending job pj if enough boards are ready. Returns 1 when the job
 * is done with (published or failed), 0 to keep waiting. Called with the
 * lock held. */
static int publish_probe(void *ctx, const char *topic, const void *data, size_t len)
{
	svc *s = ctx;
	if (!s->m || atomic_load(&s->lost))
		return SKY_ENET;
	return sky_mqtt_publish(s->m, topic, data, len, 0, 0, NULL);
}

/* 1 when a job runs (its frames may be on the site links) and every site
 * has figures: a probe then would measure what the job leaves of a link,
 * not the link (seen on the emulated WAN: 2.6 MB/s but 368 ms one way, the
 * pings queued behind frames in the shaper), and the next plan would take
 * that. New probes wait for the jobs to end; one in flight finishes. */
static int links_busy(const svc *s)
{
	int running = 0;
	for (int i = 0; i < s->n_run; i++)
		running |= !s->run[i].paused;
	for (int i = 0; running && i < s->links.n; i++)
		if (!s->links.s[i].measured)
			return 0;
	return running;
}

/* Every site an online board reports is probed (sky_linkprobe.h); a
 * completed probe's figures become the registry's path between that site
 * and the core, which plans use and fleet.json shows. Called under the
 * lock from the loop. */
static void probe_links(svc *s, double now)
{
	for (int i = 0; i < s->reg.n; i++) {
		const sky_reg_board *b = &s->reg.b[i];
		if (b->state == SKY_REG_ONLINE && b->has_caps && b->caps.site[0])
			sky_linkprobe_add(&s->links, b->caps.site);
	}
	if (s->links.cur < 0 && links_busy(s))
		return;
	int cur = s->links.cur;
	if (!sky_linkprobe_tick(&s->links, now) || cur < 0)
		return;
	const sky_linkprobe_site *ls = &s->links.s[cur];
	if (ls->at != now) {
		SKY_WARN("site %s: link probe through its bridge got no answer%s", ls->site,
			 ls->measured ? "; keeping the last figures" : "");
		return;
	}
	sky_diag d;
	sky_diag_clear(&d);
	if (sky_registry_set_link(&s->reg, ls->site, "", ls->bw_Bps, ls->lat_s, sky_clock_unix()) !=
	    0)
		SKY_WARN("site %s: path figures not kept (the registry's table is full)", ls->site);
	else
		SKY_INFO("site %s: path through its bridge %.3f ms one way, %.2f MB/s", ls->site,
			 1e3 * ls->lat_s, ls->bw_Bps / 1e6);
}

static int try_plan(svc *s, pending_job *pj)
{
	sky_registry *r = &s->reg;
	sky_caps_shape want;
	sky_diag d;
	sky_diag_clear(&d);
	memset(&want, 0, sizeof want);
	snprintf(want.name, sizeof want.name, "%s", pj->model.name);
	want.hidden = pj->model.hidden;
	want.heads = pj->model.heads;
	want.ffn = pj->model.ffn;
	want.seq = pj->model.seq;
	want.batch = pj->model.batch;
	int online = 0;
	sky_fleet_init(&s->fleet);
	for (int i = 0; i < r->n; i++) {
		sky_reg_board *b = &r->b[i];
		if (b->state != SKY_REG_ONLINE)
			continue;
		online++;
		if (!b->has_caps || !sky_caps_shape_eq(&b->caps.shape, &want)) {
			if (!pj->asked[i]) {
				pj->asked[i] = 1;
				ask_probe(s, b->id, pj);
			}
			continue;
		}
		if (strlen(b->id) >= SKY_BOARD_ID_MAX || s->fleet.n >= SKY_PLAN_MAX_BOARDS)
			continue;
		if (pj->req.infer && !(b->caps.has_int8 && b->caps.int8_fwd_s > 0)) {
			if (!pj->no_int8[i]) {
				pj->no_int8[i] = 1;
				SKY_WARN("job %s: board %s is not used: it reported no int8 times "
					 "(serving runs the int8 kernels)",
					 pj->req.job, b->id);
			}
			continue;
		}
		sky_board *fb = &s->fleet.board[s->fleet.n];
		memset(fb, 0, sizeof *fb);
		snprintf(fb->id, sizeof fb->id, "%s", b->id);
		const sky_caps_times *t = &b->caps.fp32;
		fb->fwd_s = t->fwd_attn_s + t->fwd_ffn_s;
		fb->bwd_s = t->bwd_attn_s + t->bwd_ffn_s;
		fb->attn_share = (t->fwd_attn_s + t->bwd_attn_s) / (fb->fwd_s + fb->bwd_s);
		if (b->caps.has_int8) {
			/* there is no int8 backward: an int8 stage runs its backward in fp32 */
			fb->fwd_int8_s = b->caps.int8_fwd_s;
			fb->bwd_int8_s = fb->bwd_s;
		}
		if (pj->req.infer) {
			/* measured at the model's micro-batch, served at the job's batch;
			 * serving has no backward (the cost model ignores bwd_int8_s) */
			double k = (double)pj->req.serve_batch / pj->model.batch;
			fb->fwd_int8_s = b->caps.int8_fwd_s * k;
			fb->bwd_int8_s = fb->fwd_int8_s;
			/* the int8 halves' split and the ends, when the board measured
			 * them (sky_probe.h); every part is linear in the batch */
			if (b->caps.int8_attn_s > 0 && b->caps.int8_attn_s < b->caps.int8_fwd_s)
				fb->attn_share_int8 = b->caps.int8_attn_s / b->caps.int8_fwd_s;
			fb->embed_int8_s = b->caps.int8_embed_s * k;
			fb->head_int8_s = b->caps.int8_head_s * k;
		}
		if (!(fb->attn_share > 0 && fb->attn_share < 1))
			fb->attn_share = 0;
		/* a board that could not measure memory or its link gets stated
		 * defaults rather than none: 1 TiB, 1 GB/s, 0 s (README) */
		fb->mem_bytes = b->caps.mem_bytes > 0 ? b->caps.mem_bytes : (1ll << 40);
		fb->bw_Bps = b->caps.link_bw > 0 ? b->caps.link_bw : 1e9;
		fb->lat_s = b->caps.link_lat_s;
		snprintf(fb->site, sizeof fb->site, "%s", b->caps.site);
		s->fleet_reg[s->fleet.n++] = i;
	}
	int need = pj->replan ? 1 : pj->req.min_boards > 0 ? pj->req.min_boards : online;
	int timed_out = pj->replan || sky_clock_s() - pj->since >= pj->req.wait_s;
	if ((s->fleet.n < need || s->fleet.n == 0) && !timed_out)
		return 0;
	if (s->fleet.n == 0) {
		snprintf(pj->why, sizeof pj->why, "no online board reported %s at seq %d batch %d",
			 want.name, want.seq, want.batch);
		if (!pj->replan)
			SKY_WARN("job %s dropped: %s within %g s", pj->req.job, pj->why, pj->req.wait_s);
		return 1;
	}
	if (s->fleet.n < need)
		SKY_WARN("job %s: planning with %d boards, %d wanted (waited %g s)", pj->req.job,
			 s->fleet.n, need, pj->req.wait_s);

	sky_job job;
	sky_algo algo = SKY_ALGO_OPTIMAL;
	sky_job_init(&job, pj->model.name);
	job.model = pj->model;
	job.micro_batches = pj->req.micro_batches;
	sky_algo_parse(pj->req.algo, &algo);
	sky_sched_parse(pj->req.sched, &job.sched);
	sky_objective_parse(pj->req.objective, &job.objective);
	job.link_blind = pj->req.link_blind || s->o->link_blind;
	job.ckpt = pj->req.train && pj->req.ckpt_every > 0; /* the stages' checkpoint buffers */
	snprintf(job.owner, sizeof job.owner, "%.*s", (int)sizeof job.owner - 1, pj->req.data_owner);
	/* the site paths as the registry has them (from --links, or measured) */
	s->fleet.n_links = 0;
	for (int i = 0; i < r->n_links && s->fleet.n_links < SKY_PLAN_MAX_LINKS; i++) {
		sky_site_link *l = &s->fleet.link[s->fleet.n_links++];
		memset(l, 0, sizeof *l);
		snprintf(l->a, sizeof l->a, "%s", r->links[i].a);
		snprintf(l->b, sizeof l->b, "%s", r->links[i].b);
		l->bw_Bps = r->links[i].bw_Bps;
		l->lat_s = r->links[i].lat_s;
	}
	if (pj->req.infer) {
		/* serving: int8 forward only, throughput (the slowest stage) */
		job.infer = 1;
		job.prec = SKY_PREC_INT8;
		job.objective = SKY_OBJ_BOTTLENECK;
		job.model.batch = pj->req.serve_batch;
	}
	int rc = sky_plan_partition(&s->fleet, &job, algo, &s->plan, &d);
	if (rc) {
		snprintf(pj->why, sizeof pj->why, "%.190s", d.msg);
		if (!pj->dry && !pj->replan)
			SKY_WARN("job %s: no plan: %s", pj->req.job, d.msg);
		return 1;
	}
	/* the simulated step, once: the training plan carries it (the boards'
	 * stall deadline) and the metrics compare measured steps with it */
	static sky_sim_result sim;
	/* a link-blind plan still runs on the real links: price its cuts and
	 * predict its step with them */
	if (job.link_blind) {
		job.link_blind = 0;
		if (sky_plan_evaluate(&s->fleet, &job, &s->plan, &d) != 0)
			SKY_WARN("job %s: link-blind plan not priced with the links: %s", pj->req.job,
				 d.msg);
	}
	double predicted_s = !job.infer && sky_sim_run(&s->plan, &job, &sim, NULL) == 0 ? sim.step_s : 0;
	pj->predicted_s = predicted_s;
	if (pj->dry) {
		/* the plan that runs, under the same (current) capabilities: a
		 * board whose speed changed changes it too */
		static sky_plan cur;
		memset(&cur, 0, sizeof cur);
		cur.algo = algo;
		cur.n_stages = pj->cur_n;
		pj->current_s = 0;
		for (int k = 0; k < pj->cur_n; k++) {
			int fi = -1;
			for (int b = 0; b < s->fleet.n && fi < 0; b++)
				if (!strcmp(s->fleet.board[b].id, pj->cur_board[k]))
					fi = b;
			if (fi < 0)
				return 1; /* a board of the plan has no capabilities now */
			cur.stage[k].board = fi;
			cur.stage[k].first_unit = pj->cur_first[k];
			cur.stage[k].last_unit = pj->cur_last[k];
		}
		if (pj->cur_n > 0 && sky_plan_evaluate(&s->fleet, &job, &cur, NULL) == 0 &&
		    sky_sim_run(&cur, &job, &sim, NULL) == 0)
			pj->current_s = sim.step_s;
		return 1;
	}
	sky_planmsg *p = &s->msg;
	memset(p, 0, sizeof *p);
	snprintf(p->job, sizeof p->job, "%s", pj->req.job);
	snprintf(p->algo, sizeof p->algo, "%s", sky_algo_name(algo));
	p->micro_batches = job.micro_batches;
	p->shape = want;
	p->layers = job.model.layers;
	p->n_stages = s->plan.n_stages;
	for (int k = 0; k < s->plan.n_stages; k++) {
		const sky_stage *st = &s->plan.stage[k];
		snprintf(p->stages[k].board, sizeof p->stages[k].board, "%s",
			 s->fleet.board[st->board].id);
		snprintf(p->stages[k].site, sizeof p->stages[k].site, "%s",
			 s->fleet.board[st->board].site);
		p->stages[k].first = st->first_unit;
		p->stages[k].last = st->last_unit;
		p->stages[k].in_flight = st->in_flight < 1 ? 1 : st->in_flight;
		p->stages[k].arena_bytes = st->mem_bytes;
	}
	if (pj->req.train && fill_train(pj, predicted_s, s->plan.owner_lag, p, &d) != 0) {
		SKY_WARN("job %s: not planned: %s", pj->req.job, d.msg);
		return 1;
	}
	if (pj->req.infer && fill_infer(s, pj, p, &d) != 0) {
		SKY_WARN("job %s: not planned: %s", pj->req.job, d.msg);
		return 1;
	}
	/* the epoch only grows, across restarts too: persist it before use */
	char path[640];
	p->epoch = s->epoch + 1;
	if (state_file(s, "epoch", path, sizeof path) != 0 ||
	    sky_file_write_count(path, p->epoch, 0644) != 0) {
		SKY_ERROR("job %s: cannot persist the epoch in %s; not publishing", p->job, path);
		return 1;
	}
	s->epoch = p->epoch;
	if ((p->train.sealed || p->infer.sealed) && wrap_keys(s, p, &d) != 0) {
		SKY_WARN("job %s: not planned: %s", pj->req.job, d.msg);
		return 1;
	}
	int plen = sky_planmsg_encode(p, s->payload, sizeof s->payload, &d);
	int elen = plen > 0 ? sky_sign_envelope(&s->signer, s->payload, (size_t)plen, s->envelope,
						sizeof s->envelope, &d)
			    : plen;
	char topic[SKY_TOPIC_BUF];
	if (elen <= 0 || sky_topic_job(topic, sizeof topic, p->job, SKY_TOPIC_PLAN) != 0) {
		SKY_ERROR("job %s: plan not published: %s", p->job, d.msg);
		return 1;
	}
	/* a resumed plan: each board's new range from the last complete
	 * checkpoint, retained on its load topic before the plan goes out */
	if (p->train.resume_step > 0 && publish_loads(s, p, pj) != 0)
		return 1;
	/* kept before it goes out, so it can be published again if the broker
	 * loses it */
	if (save_plan(s, p->job, s->envelope, (size_t)elen) != 0)
		return 1;
	/* retained, so a board that (re)connects later still gets it */
	if (sky_mqtt_publish(s->m, topic, s->envelope, (size_t)elen, 1, 1, &d) != 0) {
		SKY_ERROR("job %s: %s", p->job, d.msg);
		return 1;
	}
	sky_registry_assign(&s->reg, p);
	sky_nojob_note(&s->nojob, p->job, p->infer.on ? SKY_NOJOB_SERVING : SKY_NOJOB_TRAINING);
	int j = job_index(&s->reg, p->job);
	if (j >= 0)
		s->on_broker[j] = p->epoch;
	s->reg.c.plans_published++;
	pj->published = p->epoch;
	if ((p->train.steps > 0 && p->train.ckpt_every > 0) || (p->infer.on && !pj->req.no_replan))
		follow_job(s, pj, p, s->envelope, (size_t)elen);
	if (predicted_s > 0)
		sky_metrics_set_step_predicted(sky_metrics_default(), p->job, predicted_s);
	SKY_INFO("job %s epoch %lld published: %d stages over %d boards (%s), bottleneck %.3f ms "
		 "per micro-batch",
		 p->job, (long long)p->epoch, p->n_stages, s->fleet.n, p->algo,
		 1e3 * s->plan.bottleneck_s);
	return 1;
}

/* The highest step any stage of job reported under epoch (0: none). */
static int last_step(const svc *s, const char *job, int64_t epoch)
{
	int step = 0;
	for (int i = 0; i < s->jobs.n; i++)
		if (!strcmp(s->jobs.row[i].job, job) && s->jobs.row[i].epoch == epoch &&
		    s->jobs.row[i].step > step)
			step = s->jobs.row[i].step;
	return step;
}

/* Re-plans r over the online boards from the last complete checkpoint
 * (called with the lock held). No plan (no board left, or the boards left
 * cannot hold the model): the job is paused, said once, and tried again
 * every second. */
static void replan(svc *s, run_job *r, const char *reason, double now)
{
	const char *job = r->pj.req.job;
	static pending_job pj; /* big; the loop's thread only */
	pj = r->pj;
	pj.replan = 1;
	pj.dry = 0;
	pj.resume_step = (int)sky_ckpt_last(&s->ckpt, job);
	pj.generation = r->generation + 1;
	pj.published = 0;
	pj.why[0] = '\0';
	int cut = r->pj.req.infer ? 0 : last_step(s, job, r->epoch);
	int64_t old_epoch = r->epoch;
	char fields[700];
	try_plan(s, &pj);
	if (!pj.published) {
		if (!r->paused) {
			SKY_WARN("job %s paused: %s, and no plan over the boards left: %s", job, reason,
				 pj.why[0] ? pj.why : "not planned");
			snprintf(fields, sizeof fields,
				 "\"event\":\"pause\",\"epoch\":%lld,\"reason\":\"%.150s\","
				 "\"why\":\"%.200s\"",
				 (long long)r->epoch, reason, pj.why);
			for (char *c = fields; *c; c++)
				*c = *c == '\\' ? '/' : *c;
			sky_ckpt_log(&s->ckpt, job, fields);
			sky_jobstat_set_paused(&s->jobs, job, 1);
			snprintf(r->pause_why, sizeof r->pause_why, "resuming after %.150s", reason);
		}
		if (!r->paused) {
			r->paused = 1;
			run_save(s, r);
		}
		r->retry_s = now + 1.0;
		return;
	}
	sky_jobstat_set_paused(&s->jobs, job, 0);
	sky_metrics_add_replan(sky_metrics_default(), job);
	int lost = cut > pj.resume_step ? cut - pj.resume_step : 0;
	char boards[RUN_MAX_STAGES * 16] = "";
	size_t bn = 0;
	for (int k = 0; k < r->n_stages && bn < sizeof boards - 70; k++)
		bn += (size_t)snprintf(boards + bn, sizeof boards - bn, "%s%s", k ? "," : "",
				       r->board[k]);
	snprintf(fields, sizeof fields,
		 "\"event\":\"replan\",\"generation\":%d,\"epoch\":%lld,\"from_epoch\":%lld,"
		 "\"reason\":\"%.150s\",\"resume_step\":%d,\"lost_steps\":%d,\"predicted_step_s\":%.6f,"
		 "\"boards\":\"%.300s\"",
		 r->generation, (long long)r->epoch, (long long)old_epoch, reason, pj.resume_step,
		 lost, r->predicted_s, boards);
	sky_ckpt_log(&s->ckpt, job, fields);
	sky_jobstat_replan rp;
	memset(&rp, 0, sizeof rp);
	snprintf(rp.job, sizeof rp.job, "%s", job);
	rp.generation = r->generation;
	rp.epoch = r->epoch;
	rp.at_unix = sky_clock_unix();
	rp.resume_step = pj.resume_step;
	rp.lost_steps = lost;
	rp.lost_s = -1;
	rp.replayed = r->pj.req.infer ? 0 : -1;
	snprintf(rp.reason, sizeof rp.reason, "%s", reason);
	sky_jobstat_add_replan(&s->jobs, &rp);
	if (r->fault_s <= 0)
		r->fault_s = now;
	if (r->pj.req.infer)
		SKY_INFO("job %s re-planned (generation %d, epoch %lld): %s; %d stages over %s; its "
			 "unanswered requests are replayed once every stage is ready",
			 job, r->generation, (long long)r->epoch, reason, r->n_stages, boards);
	else
		SKY_INFO("job %s re-planned (generation %d, epoch %lld): %s; %d stages over %s, "
			 "resuming from step %d (%d step(s) replayed)",
			 job, r->generation, (long long)r->epoch, reason, r->n_stages, boards,
			 pj.resume_step, lost);
}

#define DRIFT_BASE_STEPS 5  /* steps averaged into a stage's baseline */
#define DRIFT_FACTOR 1.5    /* off by more than this factor ... */
#define DRIFT_STEPS 3       /* ... this many steps in a row: a drift */
#define DRIFT_REPROBE_S 10.0

/* A stage's measured compute (busy seconds a step, from its metrics)
 * drifting from what it was under this plan means its board's speed
 * changed: the board is asked to probe again, and its new capabilities
 * feed the voluntary re-plan check. */
static void check_drift(svc *s, run_job *r, double now)
{
	const char *job = r->pj.req.job;
	for (int i = 0; i < s->jobs.n; i++) {
		const sky_jobstat_row *w = &s->jobs.row[i];
		int k = w->stage;
		if (strcmp(w->job, job) || w->epoch != r->epoch || k >= r->n_stages || w->done ||
		    w->step <= r->busy_step[k] || strcmp(w->board, r->board[k]))
			continue;
		r->busy_step[k] = w->step;
		double busy = w->busy * w->step_s;
		if (!(busy > 0))
			continue;
		if (r->busy_n[k] < DRIFT_BASE_STEPS) {
			r->busy_base[k] = (r->busy_base[k] * r->busy_n[k] + busy) / (r->busy_n[k] + 1);
			r->busy_n[k]++;
			continue;
		}
		double f = busy / r->busy_base[k];
		r->drift_run[k] = f > DRIFT_FACTOR || f < 1.0 / DRIFT_FACTOR ? r->drift_run[k] + 1 : 0;
		if (r->drift_run[k] < DRIFT_STEPS || now - r->probe_asked_s[k] < DRIFT_REPROBE_S)
			continue;
		SKY_INFO("job %s: stage %d (board %s) computes %.2f ms a step, %.2f ms under this "
			 "plan at first: asking it to probe again",
			 job, k, r->board[k], 1e3 * busy, 1e3 * r->busy_base[k]);
		char fields[300];
		snprintf(fields, sizeof fields,
			 "\"event\":\"drift\",\"epoch\":%lld,\"stage\":%d,\"board\":\"%s\","
			 "\"busy_s\":%.6f,\"base_s\":%.6f",
			 (long long)r->epoch, k, r->board[k], busy, r->busy_base[k]);
		sky_ckpt_log(&s->ckpt, job, fields);
		ask_probe(s, r->board[k], &r->pj);
		r->probe_asked_s[k] = now;
		r->drift_run[k] = 0;
		r->busy_n[k] = 0; /* a new baseline at the new speed */
		r->busy_base[k] = 0;
		r->next_eval_s = 0;
	}
}

/* Asks every stage of r for a checkpoint after step `at` (a voluntary
 * re-plan waits for it). Returns at. */
static int ask_ckpt(svc *s, run_job *r, int at)
{
	char buf[SKY_CMD_MAX_BYTES], topic[SKY_TOPIC_BUF];
	int n = snprintf(buf, sizeof buf, "{\"cmd\":\"ckpt\",\"job\":\"%s\",\"epoch\":%lld,\"step\":%d}",
			 r->pj.req.job, (long long)r->epoch, at);
	for (int k = 0; k < r->n_stages; k++)
		if (sky_topic_board(topic, sizeof topic, r->board[k], SKY_TOPIC_CMD) == 0)
			sky_mqtt_publish(s->m, topic, buf, (size_t)n, 1, 0, NULL);
	r->ask_step = at;
	return at;
}

/* A voluntary re-plan waits for the checkpoint it asked for. The step was
 * picked from the stages' metrics as this planner has read them; a
 * planner that reads them late (a loaded machine: its queue of messages
 * trails the boards by seconds) asks for a step the stages have already
 * passed, and a board never checkpoints in the past. Once the metrics
 * show every stage two steps past it with no commit, it is asked again
 * twice as far ahead, while that comes before the next K-th step (which
 * commits anyway). */
static void ask_again_if_passed(svc *s, run_job *r)
{
	const char *job = r->pj.req.job;
	int past = -1, k_every = r->pj.req.ckpt_every;
	for (int i = 0; i < s->jobs.n; i++) {
		const sky_jobstat_row *w = &s->jobs.row[i];
		if (!strcmp(w->job, job) && w->epoch == r->epoch && w->stage < r->n_stages)
			past = past < 0 || w->step < past ? w->step : past;
	}
	if (r->ask_step <= 0 || past < r->ask_step + 2)
		return;
	int seen = last_step(s, job, r->epoch);
	int ahead = r->ask_ahead < 64 ? 2 * r->ask_ahead : 128;
	int next_k = k_every > 0 ? (seen / k_every + 1) * k_every : r->pj.req.steps + 1;
	if (seen + ahead >= next_k || seen + ahead > r->pj.req.steps) {
		r->ask_step = 0; /* the K-th (or last) step's commit comes first */
		return;
	}
	int was = r->ask_step;
	r->ask_ahead = ahead;
	ask_ckpt(s, r, seen + ahead);
	SKY_INFO("job %s: its stages passed step %d before the checkpoint asked there (their "
		 "metrics reach this planner late); asked again after step %d",
		 job, was, r->ask_step);
}

/* 1 when every board of serving job r's plan holds another job's plan now
 * (a newer job was planned over them), else 0. */
static int displaced(const svc *s, const run_job *r)
{
	for (int k = 0; k < r->n_stages; k++) {
		const sky_reg_board *b = sky_registry_find((sky_registry *)&s->reg, r->board[k]);
		if (!b || !b->job[0] || !strcmp(b->job, r->pj.req.job))
			return 0;
	}
	return r->n_stages > 0;
}

/* Follows the running training jobs (called with the lock held, every
 * tick): done ones are let go; a board of a plan gone offline re-plans at
 * once; a paused job tries again; and now and then, if no re-plan is
 * waiting, a plan over the online boards is simulated to see whether a
 * board that joined or changed speed is worth a voluntary re-plan. */
static void check_running(svc *s, double now)
{
	for (int i = 0; i < s->n_run;) {
		run_job *r = &s->run[i];
		const char *job = r->pj.req.job;
		int done = 0;
		for (int k = 0; k < s->jobs.n; k++)
			done += !strcmp(s->jobs.row[k].job, job) && s->jobs.row[k].epoch == r->epoch &&
				s->jobs.row[k].done;
		if (done >= r->n_stages && !r->paused) {
			char fields[160];
			snprintf(fields, sizeof fields, "\"event\":\"done\",\"epoch\":%lld,\"generation\":%d",
				 (long long)r->epoch, r->generation);
			sky_ckpt_log(&s->ckpt, job, fields);
			SKY_INFO("job %s done under generation %d (epoch %lld)", job, r->generation,
				 (long long)r->epoch);
			sky_jobstate_remove(s->state_dir, job);
			s->run[i] = s->run[--s->n_run];
			continue;
		}
		if (r->pj.req.infer && displaced(s, r)) {
			/* a board serves one job at a time: re-planning this one now
			 * would take the boards from the job that replaced it */
			SKY_INFO("job %s: every board of its plan (epoch %lld) now serves another job; "
				 "no longer followed",
				 job, (long long)r->epoch);
			sky_jobstate_remove(s->state_dir, job);
			s->run[i] = s->run[--s->n_run];
			continue;
		}
		i++;
		if (r->paused) {
			if (now >= r->retry_s)
				replan(s, r, r->pause_why, now);
			continue;
		}
		if (r->restored_until > 0) {
			/* just restarted: the broker hands over each board's retained
			 * status; one not heard from yet is not known to be offline */
			int unheard = 0;
			for (int k = 0; k < r->n_stages; k++) {
				const sky_reg_board *b = sky_registry_find(&s->reg, r->board[k]);
				unheard += !b || b->last_heard < r->restored_at;
			}
			if (unheard && now < r->restored_until)
				continue;
			r->restored_until = 0;
		}
		char why[160] = "";
		for (int k = 0; k < r->n_stages && !why[0]; k++) {
			const sky_reg_board *b = sky_registry_find(&s->reg, r->board[k]);
			if (!b || b->state != SKY_REG_ONLINE)
				snprintf(why, sizeof why, "board %s (stage %d) %s", r->board[k], k,
					 b && b->state == SKY_REG_REVOKED ? "revoked" : "offline");
		}
		if (why[0]) {
			r->fault_s = now;
			SKY_WARN("job %s epoch %lld: %s; re-planning over the boards left", job,
				 (long long)r->epoch, why);
			replan(s, r, why, now);
			continue;
		}
		if (r->pj.req.infer)
			continue; /* serving re-plans on faults only (no drift, no gain) */
		check_drift(s, r, now);
		if (r->want)
			ask_again_if_passed(s, r);
		if (r->want || now < r->next_eval_s || now - r->plan_s < s->o->replan_holdoff_s)
			continue;
		r->next_eval_s = now + 1.0;
		static pending_job pj;
		pj = r->pj;
		pj.replan = 1;
		pj.dry = 1;
		pj.predicted_s = 0;
		pj.cur_n = r->n_stages;
		pj.cur_board = (const char (*)[SKY_TOPIC_SEGMENT_MAX + 1])r->board;
		pj.cur_first = r->first;
		pj.cur_last = r->last;
		pj.current_s = 0;
		try_plan(s, &pj);
		/* the plan that runs, re-simulated with today's capabilities (a
		 * board re-probed after a drift), else as it was predicted */
		double cur_s = pj.current_s > 0 ? pj.current_s : r->predicted_s;
		SKY_DEBUG("job %s: a plan over the online boards would predict %.3f ms a step, the "
			  "current %.3f ms (%.3f ms when planned)%s%s",
			  job, 1e3 * pj.predicted_s, 1e3 * cur_s, 1e3 * r->predicted_s,
			  pj.why[0] ? ": " : "", pj.why);
		r->predicted_s = cur_s;
		if (pj.predicted_s > 0 && cur_s > 0 && pj.predicted_s < cur_s * (1.0 - s->o->replan_gain)) {
			sky_ckpt_job *cj = sky_ckpt_find(&s->ckpt, job);
			r->want = 1;
			r->commits_at_want = cj ? cj->commits : 0;
			r->fault_s = now;
			snprintf(r->want_why, sizeof r->want_why,
				 "predicted step %.2f ms -> %.2f ms (%.0f%% better, over %.0f%%)",
				 1e3 * r->predicted_s, 1e3 * pj.predicted_s,
				 100 * (1 - pj.predicted_s / r->predicted_s), 100 * s->o->replan_gain);
			/* ask every stage for a checkpoint a step ahead (they are at
			 * most a step apart), so the re-plan need not wait for the
			 * next K-th step */
			r->ask_ahead = 2;
			int at = ask_ckpt(s, r, last_step(s, job, r->epoch) + r->ask_ahead);
			SKY_INFO("job %s: a plan over the online boards would be faster: %s; checkpoint "
				 "asked after step %d, re-planning at the next commit",
				 job, r->want_why, at);
		}
	}
}

/* How long a job followed again after a restart waits to hear from its
 * boards (their retained status comes right after the subscription) before
 * one it has not heard from counts as offline. */
#define RESTORE_GRACE_S 10.0

/* The next run slot (the caller checked there is one) filled from js, not
 * counted yet: followed again after a restart, a board of its plan given
 * RESTORE_GRACE_S to be heard from. */
static run_job *run_from_state(svc *s, const sky_jobstate *js)
{
	run_job *r = &s->run[s->n_run];
	double now = sky_clock_s();
	memset(r, 0, sizeof *r);
	r->pj.req = js->req;
	sky_model_preset(js->req.model, &r->pj.model);
	if (js->req.layers)
		r->pj.model.layers = js->req.layers;
	if (js->req.seq)
		r->pj.model.seq = js->req.seq;
	if (js->req.batch)
		r->pj.model.batch = js->req.batch;
	r->pj.since = now;
	r->epoch = js->epoch;
	r->generation = js->generation;
	r->n_stages = js->n_stages;
	for (int k = 0; k < js->n_stages; k++) {
		memcpy(r->board[k], js->board[k], sizeof r->board[k]);
		r->first[k] = js->first[k];
		r->last[k] = js->last[k];
		memcpy(r->slice[k].sha256, js->slice[k], sizeof r->slice[k].sha256);
		r->slice[k].bytes = js->slice_bytes[k];
	}
	memcpy(r->plan_sha, js->plan_sha256, sizeof r->plan_sha);
	r->predicted_s = js->predicted_s;
	r->paused = js->paused;
	snprintf(r->pause_why, sizeof r->pause_why, "%s", js->pause_why);
	r->plan_s = now;
	r->retry_s = now + 1.0;
	r->restored_at = now;
	r->restored_until = now + RESTORE_GRACE_S;
	return r;
}

/* A serving job checked by check_serving (its plan in s->msg) followed
 * again: its requests tracked for replays from now on, and known to be
 * served (never answered unknown_job). Returns 0. */
static int restore_serving(svc *s, const sky_jobstate *js)
{
	const char *job = js->req.job;
	run_job *r = run_from_state(s, js);
	if (sky_servefault_follow(&s->sf, job, r->epoch, r->n_stages, s->msg.infer.queue, 0, 0) != 0)
		SKY_WARN("job %s: already following %d serving jobs; requests in flight at a fault "
			 "are not replayed",
			 job, SKY_SF_MAX_JOBS);
	sky_nojob_note(&s->nojob, job, SKY_NOJOB_SERVING);
	s->n_run++;
	run_save(s, r); /* the plan may have been newer than the file */
	sky_jobstate_replans(s->state_dir, job, &s->jobs);
	if (r->paused)
		sky_jobstat_set_paused(&s->jobs, job, 1);
	SKY_INFO("job %s: serving followed again after a restart: epoch %lld, generation %d, %d "
		 "stages, its plan, model and slices verified%s",
		 job, (long long)r->epoch, r->generation, r->n_stages, r->paused ? ", paused" : "");
	return 0;
}

/* A serving job's state file against what it names, at start: its signed
 * plan (<state>/plans/<job>.env) must verify, serve and hash to the file's
 * plan_sha256 with the same stages and slices; or be newer (a restart
 * between publishing a re-plan and saving it: js takes the plan's epoch,
 * stages and slices). The model and every slice must hash to their names;
 * a slice that does not is logged, removed and cut again from the model,
 * which must give the same hash. Leaves the plan in s->msg. Returns 0, or
 * an error with d saying what is wrong (the job is then not followed). */
static int check_serving(svc *s, sky_jobstate *js, sky_diag *d)
{
	const char *job = js->req.job;
	char path[700], hex[65];
	unsigned char sha[32];
	long n = load_plan(s, job);
	plan_file(s, job, path, sizeof path);
	if (n < 0)
		return sky_diag_set(d, (int)n, "its saved plan %s is unusable (%s)", path,
				    n == SKY_ENOTFOUND ? "missing" : sky_strerror((int)n));
	if (!s->msg.infer.on || s->msg.epoch < js->epoch || s->msg.n_stages > RUN_MAX_STAGES)
		return sky_diag_set(d, SKY_EFORMAT,
				    "its saved plan %s (epoch %lld, %d stages) is %s", path,
				    (long long)s->msg.epoch, s->msg.n_stages,
				    !s->msg.infer.on ? "not a serving plan"
				    : s->msg.epoch < js->epoch ? "older than the state file's"
							       : "too many stages to follow");
	sky_sha256(s->envelope, (size_t)n, sha);
	sky_sha256_hex(sha, hex);
	if (s->msg.epoch > js->epoch) {
		SKY_WARN("job %s: its saved plan (epoch %lld) is newer than its state file's "
			 "(epoch %lld); following the plan",
			 job, (long long)s->msg.epoch, (long long)js->epoch);
		js->epoch = s->msg.epoch;
		js->generation++;
		js->paused = 0;
		js->n_stages = s->msg.n_stages;
		memcpy(js->plan_sha256, hex, sizeof js->plan_sha256);
		for (int k = 0; k < js->n_stages; k++) {
			const sky_plan_stage *st = &s->msg.stages[k];
			snprintf(js->board[k], sizeof js->board[k], "%s", st->board);
			js->first[k] = st->first;
			js->last[k] = st->last;
			snprintf(js->slice[k], sizeof js->slice[k], "%s", st->slice.sha256);
			js->slice_bytes[k] = st->slice.bytes;
		}
	}
	if (strcmp(hex, js->plan_sha256) != 0)
		return sky_diag_set(d, SKY_EAUTH,
				    "its saved plan %s hashes to %.16s.., not the %.16s.. its state "
				    "file names",
				    path, hex, js->plan_sha256);
	int same = s->msg.n_stages == js->n_stages;
	for (int k = 0; same && k < js->n_stages; k++) {
		const sky_plan_stage *st = &s->msg.stages[k];
		same = !strcmp(st->board, js->board[k]) && st->first == js->first[k] &&
		       st->last == js->last[k] && !strcmp(st->slice.sha256, js->slice[k]) &&
		       st->slice.bytes == js->slice_bytes[k];
	}
	if (!same)
		return sky_diag_set(d, SKY_EFORMAT,
				    "its saved plan %s has other stages or slices than its state file",
				    path);
	int rc = sky_deploy_model_path(&s->deploy, js->req.weights, path, sizeof path, d);
	if (rc == 0)
		rc = sky_jobstate_check_file(path, js->req.weights, -1, "model", d);
	if (rc)
		return rc;
	for (int k = 0; k < js->n_stages; k++) {
		sky_diag sd;
		sky_diag_clear(&sd);
		snprintf(path, sizeof path, "%s/slices/%s.safetensors", s->state_dir, js->slice[k]);
		char what[40];
		snprintf(what, sizeof what, "slice of stage %d", k);
		if (sky_jobstate_check_file(path, js->slice[k], js->slice_bytes[k], what, &sd) == 0)
			continue;
		SKY_ERROR("job %s: %s; cutting it again from the model", job, sd.msg);
		sky_file_remove(path);
		sky_plan_slice cut;
		sky_diag_clear(&sd);
		rc = sky_deploy_cut(&s->deploy, js->req.weights, js->first[k], js->last[k], &cut, &sd);
		if (rc == 0 && strcmp(cut.sha256, js->slice[k]) != 0)
			rc = sky_diag_set(&sd, SKY_EAUTH, "the cut hashes to %.16s..", cut.sha256);
		if (rc)
			return sky_diag_set(d, rc, "the slice of stage %d (%.16s..) cannot be cut again: %s",
					    k, js->slice[k], sd.msg);
		SKY_INFO("job %s: slice of stage %d cut again from the model (%.16s..)", job, k,
			 js->slice[k]);
	}
	return 0;
}

/* One <state>/jobs/<job>.run.json at start: the job followed again, from
 * its newest plan (the saved plan, if the state file is older: a restart
 * between publishing and saving), with its checkpoints from the store's
 * index, every file verified again. A damaged or missing file is an error
 * naming it; the planner goes on without what it could not read. */
static int restore_run(void *ctx, const char *path)
{
	svc *s = ctx;
	static sky_jobstate js; /* big; start-up only */
	sky_diag d;
	sky_diag_clear(&d);
	if (sky_jobstate_load(path, &js, &d) != 0) {
		SKY_ERROR("%s; that job is not followed", d.msg);
		return 0;
	}
	const char *job = js.req.job;
	if (js.req.infer) {
		if (check_serving(s, &js, &d) != 0) {
			SKY_ERROR("serving job %s (%s): %s; that job is not followed", job, path, d.msg);
			return 0;
		}
		if (s->n_run == MAX_RUNNING) {
			SKY_ERROR("job %s: already following %d jobs; %s not restored", job,
				  MAX_RUNNING, path);
			return 0;
		}
		return restore_serving(s, &js);
	}
	long n = load_plan(s, job);
	if (n < 0)
		SKY_WARN("job %s: its saved plan is unusable (%s); following it as %s says", job,
			 sky_strerror((int)n), path);
	else if (s->msg.epoch > js.epoch && s->msg.train.ckpt_every > 0 &&
		 s->msg.n_stages <= SKY_JOBSTATE_MAX_STAGES) {
		js.epoch = s->msg.epoch;
		js.generation = s->msg.train.generation > js.generation ? s->msg.train.generation
									: js.generation;
		js.n_stages = s->msg.n_stages;
		for (int k = 0; k < js.n_stages; k++) {
			snprintf(js.board[k], sizeof js.board[k], "%s", s->msg.stages[k].board);
			js.first[k] = s->msg.stages[k].first;
			js.last[k] = s->msg.stages[k].last;
		}
		js.paused = 0;
	}
	if (s->n_run == MAX_RUNNING) {
		SKY_ERROR("job %s: already following %d jobs; %s not restored", job, MAX_RUNNING, path);
		return 0;
	}
	run_job *r = run_from_state(s, &js);
	int n_blocks = 2 * r->pj.model.layers + 2;
	int rc = sky_ckpt_restore(&s->ckpt, job, r->epoch, n_blocks, &d);
	if (rc == SKY_EAUTH) {
		SKY_ERROR("job %s: %s (the checkpoint before it is used)", job, d.msg);
	} else if (rc) {
		SKY_ERROR("job %s: %s; its checkpoints are unknown, so a re-plan starts it again "
			  "from step 0",
			  job, d.msg);
		if (!sky_ckpt_begin(&s->ckpt, job, r->epoch, n_blocks))
			SKY_WARN("job %s: the checkpoint store is full", job);
	}
	int64_t last = sky_ckpt_last(&s->ckpt, job);
	if (last >= r->pj.req.steps) {
		/* its last step committed: the boards finished while we were away */
		char fields[160];
		snprintf(fields, sizeof fields,
			 "\"event\":\"done\",\"epoch\":%lld,\"generation\":%d,\"restored\":true",
			 (long long)r->epoch, r->generation);
		sky_ckpt_log(&s->ckpt, job, fields);
		SKY_INFO("job %s: finished while the planner was away (step %lld committed)", job,
			 (long long)last);
		sky_jobstate_remove(s->state_dir, job);
		return 0;
	}
	s->n_run++;
	sky_jobstate_replans(s->state_dir, job, &s->jobs); /* sky fleet status shows them again */
	if (r->paused)
		sky_jobstat_set_paused(&s->jobs, job, 1);
	SKY_INFO("job %s: followed again after a restart: epoch %lld, generation %d, %d stages, "
		 "last committed step %lld%s",
		 job, (long long)r->epoch, r->generation, r->n_stages, (long long)last,
		 r->paused ? ", paused" : "");
	return 0;
}

/* Replays what is due to serving jobs' new first stages, drops requests
 * unanswered too long, and notes a finished replay. Called with the lock
 * held, every tick. */
static void pump_replays(svc *s, double now)
{
	int fin = -1;
	int n = sky_servefault_pump(&s->sf, now, sf_publish, s, sf_dropped, &fin);
	if (n > 0)
		SKY_DEBUG("%d request(s) replayed", n);
	if (fin < 0)
		return;
	const sky_sf_job *j = &s->sf.jobs[fin];
	char fields[200];
	snprintf(fields, sizeof fields, "\"event\":\"replayed\",\"epoch\":%lld,\"requests\":%ld",
		 (long long)j->epoch, j->replayed_epoch);
	sky_ckpt_log(&s->ckpt, j->job, fields);
	sky_jobstat_replan_replayed(&s->jobs, j->job, j->replayed_epoch);
	SKY_INFO("job %s epoch %lld: every stage is ready; %ld unanswered request(s) replayed to "
		 "its first stage",
		 j->job, (long long)j->epoch, j->replayed_epoch);
}

int sky_service_run(const sky_service_opts *o, sky_diag *d)
{
	svc *s = &g_svc;
	int rc;
	memset(s, 0, sizeof *s);
	s->o = o;
	sky_mutex_init(&s->lock);
	sky_ca_init(&s->ca);
	sky_signer_init(&s->signer);
	sky_registry_init(&s->reg);
	sky_linkprobe_init(&s->links, o->link_probe_s > 0 ? o->link_probe_s : 300, publish_probe, s);
	sky_bucket_init(&s->enroll_all, ENROLL_ALL_BURST, ENROLL_ALL_PER_S);
	sky_keyed_init(&s->enroll_nonce, ENROLL_NONCE_BURST, ENROLL_NONCE_PER_S);
	sky_log_throttle_init(&s->enroll_log, LOG_LINES_PER_WINDOW, LOG_WINDOW_S);
	sky_log_throttle_init(&s->oversize_log, LOG_LINES_PER_WINDOW, LOG_WINDOW_S);
	sky_log_throttle_init(&s->revoked_log, LOG_LINES_PER_WINDOW, LOG_WINDOW_S);
	sky_nojob_init(&s->nojob);
	sky_log_throttle_init(&s->req_log, LOG_LINES_PER_WINDOW, LOG_WINDOW_S);
	sky_servefault_init(&s->sf);
	sky_log_throttle_init(&s->sf_log, LOG_LINES_PER_WINDOW, LOG_WINDOW_S);
	if (o->state_dir)
		snprintf(s->state_dir, sizeof s->state_dir, "%s", o->state_dir);
	else
		snprintf(s->state_dir, sizeof s->state_dir, "%s/state", o->pki_dir);
	sky_ckpt_init(&s->ckpt, s->state_dir);
	if ((rc = sky_file_mkdirs(s->state_dir, 0700)) != 0) {
		rc = sky_diag_set(d, rc, "cannot create %s", s->state_dir);
		goto exit;
	}
	sky_deploy_init(&s->deploy, s->state_dir, o->model_ops, o->slice_chunk_bytes,
			o->slice_pace_ms);
	mbedtls_x509_crt_init(&s->planner_crt);
	if ((rc = sky_ca_open(&s->ca, o->pki_dir, d)) != 0 ||
	    (rc = sky_ca_load_signer(&s->signer, o->pki_dir, d)) != 0)
		goto exit;
	{
		char path[640];
		snprintf(path, sizeof path, "%s/%s", o->pki_dir, SKY_CA_PLANNER_CERT_FILE);
		if ((rc = sky_sign_load_cert(&s->planner_crt, path, d)) != 0)
			goto exit;
	}
	{
		/* boards enrolled before a restart are still part of the fleet, with
		 * their boot and session order and their assignments */
		char path[640];
		if (state_file(s, "fleet.json", path, sizeof path) == 0) {
			long n = sky_file_read(path, s->status_buf, sizeof s->status_buf);
			if (n > 0) {
				int k = sky_registry_restore(&s->reg, s->status_buf, (size_t)n, NULL);
				if (k >= 0)
					SKY_INFO("restored %d boards and %d jobs from %s", k,
						 s->reg.n_jobs, path);
				else
					SKY_WARN("%s is damaged; the registry starts empty", path);
			}
		}
	}
	if (o->links_file) {
		/* the site paths as given, until measured figures replace them */
		static sky_fleet lf;
		if ((rc = sky_fleet_load_links(o->links_file, &lf, d)) != 0)
			goto exit;
		for (int i = 0; i < lf.n_links; i++)
			if ((rc = sky_registry_set_link(&s->reg, lf.link[i].a, lf.link[i].b,
							lf.link[i].bw_Bps, lf.link[i].lat_s, 0)) != 0) {
				rc = sky_diag_set(d, rc, "%s: link %d: the registry cannot take it",
						  o->links_file, i);
				goto exit;
			}
		SKY_INFO("%d site paths from %s", lf.n_links, o->links_file);
	}
	{
		char path[640];
		int64_t e = 0;
		int erc = state_file(s, "epoch", path, sizeof path);
		if (erc == 0)
			erc = sky_file_read_count(path, &e);
		if (erc == 0)
			s->epoch = e;
		else if (erc != SKY_ENOTFOUND || s->reg.n_jobs > 0)
			SKY_WARN("plan epoch state lost: %s is %s; the saved plans and the "
				 "broker's retained plans set the floor",
				 path, erc == SKY_ENOTFOUND ? "missing" : "damaged");
	}
	/* the saved plans: their ranges back into the registry, their epochs
	 * into the floor */
	for (int j = 0; j < s->reg.n_jobs; j++) {
		long n = load_plan(s, s->reg.jobs[j].job);
		if (n < 0) {
			SKY_WARN("job %s: saved plan unusable (%s)", s->reg.jobs[j].job,
				 sky_strerror((int)n));
			continue;
		}
		if (s->msg.epoch > s->epoch)
			s->epoch = s->msg.epoch;
		sky_nojob_note(&s->nojob, s->msg.job,
			       s->msg.infer.on ? SKY_NOJOB_SERVING : SKY_NOJOB_TRAINING);
		if (s->msg.epoch >= s->reg.jobs[j].epoch) {
			s->reg.jobs[j].epoch = s->msg.epoch - 1; /* so that assign takes it */
			sky_registry_assign(&s->reg, &s->msg);
		}
	}
	/* the training jobs it followed, with their checkpoints */
	if (sky_jobstate_list(s->state_dir, restore_run, s) != 0)
		SKY_ERROR("cannot list %s/jobs: the jobs followed before a restart are not", s->state_dir);
	if ((rc = connect_svc(s, d)) != 0)
		goto exit;
	if (o->job_file) {
		static char buf[SKY_JOB_MAX_BYTES + 1];
		long n = sky_file_read(o->job_file, buf, sizeof buf - 1);
		if (n < 0) {
			rc = sky_diag_set(d, (int)n, "job file %s: %s", o->job_file, sky_strerror((int)n));
			goto exit;
		}
		sky_diag jd;
		sky_diag_clear(&jd);
		queue_job(s, buf, (size_t)n, o->job_file, &jd);
	}
	SKY_INFO("serving: state in %s, epoch %lld", s->state_dir, (long long)s->epoch);
	double last_save = 0, last_tick = 0;
	int behind = 0; /* the last poll ran out of its budget with messages still queued */
	sky_mqtt_backoff backoff; /* 0.5 s doubling to 5 s, jittered */
	sky_mqtt_backoff_init(&backoff, 500, 5000, sky_clock_ns() ^ (uint64_t)(uintptr_t)s);
	sky_notify_ready();
	while (!sky_signal_stop_requested()) {
		sky_notify_watchdog(); /* from this loop only: a wedged loop stops pinging */
		if (!s->m || atomic_load(&s->lost)) {
			drop(s);
			sky_diag cd;
			sky_diag_clear(&cd);
			if (connect_svc(s, &cd) != 0) {
				int ms = sky_mqtt_backoff_next(&backoff);
				SKY_WARN("%s; retrying in %d ms", cd.msg, ms);
				drop(s);
				for (int t = 0; t < ms / 50 && !sky_signal_stop_requested(); t++)
					sky_sleep_ms(50);
				continue;
			}
			sky_mqtt_backoff_reset(&backoff);
		}
		double now = sky_clock_s();
		sky_mutex_lock(&s->lock);
		static unsigned char was_online[SKY_REG_MAX_BOARDS];
		for (int i = 0; i < s->reg.n; i++)
			was_online[i] = s->reg.b[i].state == SKY_REG_ONLINE;
		/* a board is offline when nothing came from it for 1.5 keepalives;
		 * time this loop did not run is not its silence, and while a
		 * backlog waits unread (the last poll ran out of its budget) its
		 * last message may be among them */
		double gap = last_tick > 0 ? now - last_tick : 0;
		last_tick = now;
		if (gap > LOOP_STALL_S) {
			sky_registry_excuse(&s->reg, gap);
			SKY_WARN("this planner's loop did not run for %.1f s (a loaded machine?); the "
				 "boards' deadlines move on by as much",
				 gap);
		}
		if (!behind && sky_registry_tick(&s->reg, now) > 0)
			for (int i = 0; i < s->reg.n; i++)
				if (was_online[i] && s->reg.b[i].state == SKY_REG_OFFLINE)
					SKY_WARN("board %s offline: nothing heard for %.2f s (keepalive "
						 "%d s, deadline 1.5x)",
						 s->reg.b[i].id, now - s->reg.b[i].last_heard,
						 s->reg.b[i].keepalive_s);
		if (now >= s->revoked_check_at) {
			s->revoked_check_at = now + REVOKED_CHECK_S;
			check_revoked(s);
		}
		if (s->republish_at > 0 && now >= s->republish_at && s->m && !s->lost) {
			s->republish_at = 0;
			republish_missing(s);
		}
		probe_links(s, now);
		check_running(s, now);
		pump_replays(s, now);
		for (int k = 0; k < s->n_pending;) {
			if (try_plan(s, &s->pending[k])) {
				/* dropped without a plan: no longer queued */
				if (sky_nojob_kind_of(&s->nojob, s->pending[k].req.job) == SKY_NOJOB_QUEUED)
					sky_nojob_note(&s->nojob, s->pending[k].req.job, SKY_NOJOB_UNKNOWN);
				s->pending[k] = s->pending[--s->n_pending];
			} else {
				k++;
			}
		}
		int changed = s->reg.changed || s->jobs.changed;
		/* a flood that stopped still gets its "N more suppressed" line */
		long sup = sky_log_throttle_flush(&s->enroll_log, now);
		if (sup > 0)
			suppressed_line(s, &s->enroll_log, "enrollment refusals", sup);
		sup = sky_log_throttle_flush(&s->oversize_log, now);
		if (sup > 0)
			suppressed_line(s, &s->oversize_log, "oversize messages", sup);
		sup = sky_log_throttle_flush(&s->revoked_log, now);
		if (sup > 0)
			suppressed_line(s, &s->revoked_log, "messages from revoked boards", sup);
		sup = sky_log_throttle_flush(&s->req_log, now);
		if (sup > 0)
			suppressed_line(s, &s->req_log, "inference request refusals", sup);
		sup = sky_log_throttle_flush(&s->sf_log, now);
		if (sup > 0)
			suppressed_line(s, &s->sf_log, "serving requests not tracked", sup);
		sky_mutex_unlock(&s->lock);
		/* every change within 0.2 s; every 2 s while a backlog waits (two
		 * more fsyncs a tick would slow its reading further) */
		if ((changed && !behind && now - last_save >= 0.2) || now - last_save >= 2.0) {
			save_state(s);
			last_save = now;
		}
		/* messages are handled on this thread; tick again after ~100 ms,
		 * also while a backlog of messages waits: each poll hands over
		 * what is queued for at most POLL_BUDGET_MS, so the tick (boards
		 * gone, re-plans, replays, queued jobs) is never starved */
		while (sky_clock_s() - now < 0.1 && !atomic_load(&s->lost) &&
		       !sky_signal_stop_requested()) {
			int sending = sky_deploy_pump(&s->deploy, sky_clock_s(), deploy_publish, s);
			double t = sky_clock_s();
			sky_mqtt_poll_for(s->m, sending ? 1 : 5, POLL_BUDGET_MS);
			behind = sky_clock_s() - t >= POLL_BUDGET_MS * 1e-3 && sky_mqtt_queued(s->m);
		}
	}
	SKY_INFO("stopping on signal %d", sky_signal_stop_requested());
	save_state(s);
	rc = 0;
exit:
	drop(s);
	sky_deploy_free(&s->deploy);
	mbedtls_x509_crt_free(&s->planner_crt);
	sky_signer_free(&s->signer);
	sky_ca_free(&s->ca);
	sky_mutex_free(&s->lock);
	return rc;
}
