#include "sky_service.h"

#include "sky_ca.h"
#include "sky_caps.h"
#include "sky_clock.h"
#include "sky_file.h"
#include "sky_jobkey.h"
#include "sky_jobstat.h"
#include "sky_json.h"
#include "sky_linkprobe.h"
#include "sky_log.h"
#include "sky_metrics.h"
#include "sky_model.h"
#include "sky_mqtt.h"
#include "sky_plan.h"
#include "sky_planmsg.h"
#include "sky_ratelimit.h"
#include "sky_registry.h"
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

/* ---- job documents ---------------------------------------------------------- */

static int opt_int(const cJSON *doc, const char *key, int lo, int hi, int *out, sky_diag *d)
{
	if (!cJSON_GetObjectItemCaseSensitive(doc, key))
		return 0;
	return sky_json_int(doc, key, lo, hi, out, "job", d);
}

static int opt_str(const cJSON *doc, const char *key, char *buf, size_t cap, sky_diag *d)
{
	if (!cJSON_GetObjectItemCaseSensitive(doc, key))
		return 0;
	return sky_json_str(doc, key, buf, cap, "job", d);
}

static int opt_num(const cJSON *doc, const char *key, double lo, double hi, double *out,
		   sky_diag *d)
{
	if (!cJSON_GetObjectItemCaseSensitive(doc, key))
		return 0;
	return sky_json_num(doc, key, lo, hi, out, "job", d);
}

/* The training settings, with `sky train`'s defaults. */
static int parse_train(const cJSON *doc, sky_job_req *j, sky_diag *d)
{
	char task[16] = "";
	int rc;
	const cJSON *pt = cJSON_GetObjectItemCaseSensitive(doc, "plaintext_frames");
	if ((rc = opt_str(doc, "task", task, sizeof task, d)) != 0)
		return rc;
	if (!task[0])
		return 0;
	if (strcmp(task, "train") != 0)
		return sky_diag_set(d, SKY_EINVAL, "job %s: unknown task '%s' (train)", j->job, task);
	j->train = 1;
	j->steps = 10;
	j->seed = 1;
	j->warmup = -1;
	j->clip = 1.0;
	j->lr = -1;
	snprintf(j->optim, sizeof j->optim, "adamw");
	if ((rc = opt_int(doc, "steps", 1, SKY_PLANMSG_MAX_STEPS, &j->steps, d)) ||
	    (rc = opt_str(doc, "optim", j->optim, sizeof j->optim, d)) ||
	    (rc = opt_num(doc, "lr", 1e-9, 100, &j->lr, d)) ||
	    (rc = opt_int(doc, "seed", 0, 0x7fffffff, &j->seed, d)) ||
	    (rc = opt_int(doc, "warmup", 0, SKY_PLANMSG_MAX_STEPS, &j->warmup, d)) ||
	    (rc = opt_num(doc, "clip", 0, 1e9, &j->clip, d)) ||
	    (rc = opt_num(doc, "stall_s", 0, 1e5, &j->stall_s, d)))
		return rc;
	if (pt && !cJSON_IsBool(pt))
		return sky_diag_set(d, SKY_EFORMAT, "job %s: plaintext_frames must be true or false",
				    j->job);
	j->plaintext = pt && cJSON_IsTrue(pt);
	/* the runtime's sky_optim_parse, which the planner does not link */
	int sgd = strcmp(j->optim, "sgd") == 0;
	if (!sgd && strcmp(j->optim, "adamw") != 0)
		return sky_diag_set(d, SKY_EINVAL, "job %s: unknown optim '%s' (adamw, sgd)", j->job,
				    j->optim);
	if (j->lr < 0)
		j->lr = sgd ? 0.05 : 1e-3;
	if (j->warmup < 0)
		j->warmup = j->steps / 10;
	if (j->warmup > j->steps)
		return sky_diag_set(d, SKY_ERANGE, "job %s: warmup %d is more than steps %d", j->job,
				    j->warmup, j->steps);
	return 0;
}

int sky_job_req_parse(const char *buf, size_t len, sky_job_req *j, sky_diag *d)
{
	int rc;
	memset(j, 0, sizeof *j);
	j->micro_batches = 4;
	snprintf(j->algo, sizeof j->algo, "optimal");
	snprintf(j->sched, sizeof j->sched, "1f1b");
	snprintf(j->objective, sizeof j->objective, "step");
	j->wait_s = 30;
	if (!buf || len > SKY_JOB_MAX_BYTES)
		return sky_diag_set(d, SKY_ERANGE, "job: %zu bytes, limit %u", len, SKY_JOB_MAX_BYTES);
	cJSON *doc = sky_json_parse(buf, len, d);
	if (!doc)
		return SKY_EFORMAT;
	sky_model_cfg m;
	sky_algo algo;
	sky_sched sched;
	sky_objective objective;
	/* first, so that even a refusal can name the submission it answers */
	if ((rc = opt_str(doc, "submit_id", j->submit_id, sizeof j->submit_id, d)))
		goto exit;
	for (size_t i = 0; j->submit_id[i]; i++)
		if (!((j->submit_id[i] >= '0' && j->submit_id[i] <= '9') ||
		      (j->submit_id[i] >= 'a' && j->submit_id[i] <= 'f')) ||
		    (j->submit_id[i + 1] == '\0' && i < 7)) {
			j->submit_id[0] = '\0';
			rc = sky_diag_set(d, SKY_EINVAL, "job: submit_id must be 8-32 of [0-9a-f]");
			goto exit;
		}
	if ((rc = sky_json_str(doc, "job", j->job, sizeof j->job, "job", d)) ||
	    (rc = sky_json_str(doc, "model", j->model, sizeof j->model, "job", d)) ||
	    (rc = opt_int(doc, "layers", 1, SKY_PLANMSG_MAX_LAYERS, &j->layers, d)) ||
	    (rc = opt_int(doc, "seq", 1, SKY_CAPS_MAX_DIM, &j->seq, d)) ||
	    (rc = opt_int(doc, "batch", 1, SKY_CAPS_MAX_BATCH, &j->batch, d)) ||
	    (rc = opt_int(doc, "micro_batches", 1, SKY_PLANMSG_MAX_MICRO, &j->micro_batches, d)) ||
	    (rc = opt_int(doc, "min_boards", 0, SKY_REG_MAX_BOARDS, &j->min_boards, d)) ||
	    (rc = opt_str(doc, "algo", j->algo, sizeof j->algo, d)) ||
	    (rc = opt_str(doc, "sched", j->sched, sizeof j->sched, d)) ||
	    (rc = opt_str(doc, "objective", j->objective, sizeof j->objective, d)))
		goto exit;
	const cJSON *lb = cJSON_GetObjectItemCaseSensitive(doc, "link_blind");
	if (lb && !cJSON_IsBool(lb)) {
		rc = sky_diag_set(d, SKY_EFORMAT, "job: 'link_blind' must be true or false");
		goto exit;
	}
	j->link_blind = cJSON_IsTrue(lb);
	if (cJSON_GetObjectItemCaseSensitive(doc, "wait_s") &&
	    (rc = sky_json_num(doc, "wait_s", 0, 3600, &j->wait_s, "job", d)))
		goto exit;
	if ((rc = parse_train(doc, j, d)) != 0)
		goto exit;
	if (!sky_topic_segment_ok(j->job))
		rc = sky_diag_set(d, SKY_EINVAL, "job: id '%s' is not 1-64 of [A-Za-z0-9_.-]", j->job);
	else if (sky_model_preset(j->model, &m) != 0)
		rc = sky_diag_set(d, SKY_EINVAL, "job %s: unknown model '%s' (%s)", j->job, j->model,
				  sky_model_preset_names());
	else if (sky_algo_parse(j->algo, &algo) != 0)
		rc = sky_diag_set(d, SKY_EINVAL, "job %s: unknown algo '%s' (even, sky, optimal)",
				  j->job, j->algo);
	else if (sky_sched_parse(j->sched, &sched) != 0)
		rc = sky_diag_set(d, SKY_EINVAL, "job %s: unknown sched '%s' (gpipe, 1f1b)", j->job,
				  j->sched);
	else if (sky_objective_parse(j->objective, &objective) != 0)
		rc = sky_diag_set(d, SKY_EINVAL, "job %s: unknown objective '%s' (step, bottleneck)",
				  j->job, j->objective);
exit:
	sky_json_free(doc);
	return rc;
}

int sky_job_req_encode(const sky_job_req *j, char *buf, size_t cap)
{
	char shapes[96] = "";
	int k = 0;
	/* 0 means "the preset's": leave such fields out */
	if (j->layers)
		k += snprintf(shapes + k, sizeof shapes - (size_t)k, ",\"layers\":%d", j->layers);
	if (j->seq)
		k += snprintf(shapes + k, sizeof shapes - (size_t)k, ",\"seq\":%d", j->seq);
	if (j->batch)
		snprintf(shapes + k, sizeof shapes - (size_t)k, ",\"batch\":%d", j->batch);
	char sid[64] = "";
	if (j->submit_id[0])
		snprintf(sid, sizeof sid, ",\"submit_id\":\"%s\"", j->submit_id);
	char train[320] = "";
	if (j->train) /* %.17g: the lr a board uses is exactly the one asked for */
		snprintf(train, sizeof train,
			 ",\"task\":\"train\",\"steps\":%d,\"optim\":\"%s\",\"lr\":%.17g,"
			 "\"seed\":%d,\"warmup\":%d,\"clip\":%.17g,\"stall_s\":%g,"
			 "\"plaintext_frames\":%s",
			 j->steps, j->optim, j->lr, j->seed, j->warmup, j->clip, j->stall_s,
			 j->plaintext ? "true" : "false");
	int n = snprintf(buf, cap,
			 "{\"job\":\"%s\",\"model\":\"%s\"%s,\"micro_batches\":%d,\"algo\":\"%s\","
			 "\"sched\":\"%s\",\"objective\":\"%s\",\"min_boards\":%d,\"wait_s\":%g%s%s%s}",
			 j->job, j->model, shapes, j->micro_batches, j->algo, j->sched, j->objective,
			 j->min_boards, j->wait_s, j->link_blind ? ",\"link_blind\":true" : "", sid,
			 train);
	return (n < 0 || (size_t)n >= cap) ? SKY_ERANGE : n;
}

int sky_job_reply_encode(const sky_job_reply *r, char *buf, size_t cap)
{
	cJSON *doc = sky_json_new_object();
	int ok = doc && cJSON_AddNumberToObject(doc, "v", 1) &&
		 cJSON_AddStringToObject(doc, "submit_id", r->submit_id) &&
		 cJSON_AddStringToObject(doc, "job", r->job) && cJSON_AddBoolToObject(doc, "ok", r->ok);
	if (ok)
		ok = r->ok ? cJSON_AddStringToObject(doc, "state", r->state) != NULL
			   : cJSON_AddStringToObject(doc, "error", r->error) != NULL;
	int n = ok ? sky_json_print(doc, buf, cap < SKY_JOB_REPLY_MAX_BYTES ? cap : SKY_JOB_REPLY_MAX_BYTES)
		   : SKY_ERANGE;
	sky_json_free(doc);
	return n;
}

int sky_job_reply_decode(const char *buf, size_t len, sky_job_reply *r, sky_diag *d)
{
	memset(r, 0, sizeof *r);
	if (!buf || len > SKY_JOB_REPLY_MAX_BYTES)
		return sky_diag_set(d, SKY_ERANGE, "job reply: %zu bytes, limit %u", len,
				    SKY_JOB_REPLY_MAX_BYTES);
	cJSON *doc = sky_json_parse(buf, len, d);
	if (!doc)
		return SKY_EFORMAT;
	const cJSON *ok = cJSON_GetObjectItemCaseSensitive(doc, "ok");
	int rc = sky_json_str(doc, "submit_id", r->submit_id, sizeof r->submit_id, "job reply", d);
	if (!rc)
		rc = sky_json_str(doc, "job", r->job, sizeof r->job, "job reply", d);
	if (!rc && !cJSON_IsBool(ok))
		rc = sky_diag_set(d, SKY_EFORMAT, "job reply: field 'ok' must be true or false");
	if (!rc) {
		r->ok = cJSON_IsTrue(ok);
		rc = r->ok ? sky_json_str(doc, "state", r->state, sizeof r->state, "job reply", d)
			   : sky_json_str(doc, "error", r->error, sizeof r->error, "job reply", d);
	}
	sky_json_free(doc);
	return rc == SKY_ENOTFOUND ? SKY_EFORMAT : rc;
}

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

typedef struct pending_job {
	sky_job_req req;
	sky_model_cfg model; /* with the job's layers, seq, batch */
	double since;        /* when it arrived (monotonic) */
	unsigned char asked[SKY_REG_MAX_BOARDS]; /* probe requested of registry board i */
} pending_job;

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
	sky_log_throttle enroll_log, oversize_log;
} svc;

static svc g_svc; /* one service per process; far too big for a stack */

/* <state>/<name> into buf. Returns 0 or SKY_ERANGE. */
static int state_file(const svc *s, const char *name, char *buf, size_t cap)
{
	int n = snprintf(buf, cap, "%s/%s", s->state_dir, name);
	return (n < 0 || (size_t)n >= cap) ? SKY_ERANGE : 0;
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
	pj.since = sky_clock_s();
	sky_mutex_lock(&s->lock);
	if (s->n_pending < MAX_PENDING) {
		s->pending[s->n_pending++] = pj;
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
	if (t == &s->enroll_log)
		SKY_WARN("%s: %ld more suppressed in the last %.0f s (%ld requests dropped unread "
			 "by the rate limit so far)",
			 what, n, t->window_s, s->enroll_limited);
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

static void on_msg(void *ctx, const char *topic, size_t tl, const unsigned char *p, size_t len,
		   int retained)
{
	svc *s = ctx;
	char seg[SKY_TOPIC_SEGMENT_MAX + 1], leaf[16];
	sky_diag d;
	sky_diag_clear(&d);
	if (strlen(topic) != tl)
		return;
	if (sky_topic_parse(topic, tl, "jobs", seg, sizeof seg, leaf, sizeof leaf) == 0) {
		if (strcmp(leaf, SKY_TOPIC_SUBMIT) == 0)
			handle_submit(s, seg, (const char *)p, len);
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
		sky_linkprobe_on_msg(&s->links, topic, p, len, sky_clock_s());
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
			    .ctx = s};
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
			      SKY_TOPIC_SUB_ALL_SUBMITS,
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
static int fill_train(const pending_job *pj, double predicted_step_s, sky_planmsg *p,
		      sky_diag *d)
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
	(void)d;
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
	int need = pj->req.min_boards > 0 ? pj->req.min_boards : online;
	int timed_out = sky_clock_s() - pj->since >= pj->req.wait_s;
	if ((s->fleet.n < need || s->fleet.n == 0) && !timed_out)
		return 0;
	if (s->fleet.n == 0) {
		SKY_WARN("job %s dropped: no online board reported %s at seq %d batch %d within %g s",
			 pj->req.job, want.name, want.seq, want.batch, pj->req.wait_s);
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
	int rc = sky_plan_partition(&s->fleet, &job, algo, &s->plan, &d);
	if (rc) {
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
	double predicted_s = sky_sim_run(&s->plan, &job, &sim, NULL) == 0 ? sim.step_s : 0;
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
	if (pj->req.train && fill_train(pj, predicted_s, p, &d) != 0) {
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
	if (p->train.sealed && wrap_keys(s, p, &d) != 0) {
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
	int j = job_index(&s->reg, p->job);
	if (j >= 0)
		s->on_broker[j] = p->epoch;
	s->reg.c.plans_published++;
	if (predicted_s > 0)
		sky_metrics_set_step_predicted(sky_metrics_default(), p->job, predicted_s);
	SKY_INFO("job %s epoch %lld published: %d stages over %d boards (%s), bottleneck %.3f ms "
		 "per micro-batch",
		 p->job, (long long)p->epoch, p->n_stages, s->fleet.n, p->algo,
		 1e3 * s->plan.bottleneck_s);
	return 1;
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
	if (o->state_dir)
		snprintf(s->state_dir, sizeof s->state_dir, "%s", o->state_dir);
	else
		snprintf(s->state_dir, sizeof s->state_dir, "%s/state", o->pki_dir);
	if ((rc = sky_file_mkdirs(s->state_dir, 0700)) != 0) {
		rc = sky_diag_set(d, rc, "cannot create %s", s->state_dir);
		goto exit;
	}
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
		if (s->msg.epoch >= s->reg.jobs[j].epoch) {
			s->reg.jobs[j].epoch = s->msg.epoch - 1; /* so that assign takes it */
			sky_registry_assign(&s->reg, &s->msg);
		}
	}
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
	double last_save = 0;
	int backoff_ms = 1000;
	sky_notify_ready();
	while (!sky_signal_stop_requested()) {
		sky_notify_watchdog(); /* from this loop only: a wedged loop stops pinging */
		if (!s->m || atomic_load(&s->lost)) {
			drop(s);
			sky_diag cd;
			sky_diag_clear(&cd);
			if (connect_svc(s, &cd) != 0) {
				SKY_WARN("%s; retrying in %d ms", cd.msg, backoff_ms);
				drop(s);
				for (int t = 0; t < backoff_ms / 50 && !sky_signal_stop_requested(); t++)
					sky_sleep_ms(50);
				backoff_ms = backoff_ms * 2 > 5000 ? 5000 : backoff_ms * 2;
				continue;
			}
			backoff_ms = 1000;
		}
		double now = sky_clock_s();
		sky_mutex_lock(&s->lock);
		static unsigned char was_online[SKY_REG_MAX_BOARDS];
		for (int i = 0; i < s->reg.n; i++)
			was_online[i] = s->reg.b[i].state == SKY_REG_ONLINE;
		if (sky_registry_tick(&s->reg, now) > 0)
			for (int i = 0; i < s->reg.n; i++)
				if (was_online[i] && s->reg.b[i].state == SKY_REG_OFFLINE)
					SKY_WARN("board %s offline: nothing heard for %.2f s (keepalive "
						 "%d s, deadline 1.5x)",
						 s->reg.b[i].id, now - s->reg.b[i].last_heard,
						 s->reg.b[i].keepalive_s);
		if (s->republish_at > 0 && now >= s->republish_at && s->m && !s->lost) {
			s->republish_at = 0;
			republish_missing(s);
		}
		probe_links(s, now);
		for (int k = 0; k < s->n_pending;) {
			if (try_plan(s, &s->pending[k])) {
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
		sky_mutex_unlock(&s->lock);
		if ((changed && now - last_save >= 0.2) || now - last_save >= 2.0) {
			save_state(s);
			last_save = now;
		}
		/* messages are handled on this thread; tick again after ~100 ms */
		while (sky_clock_s() - now < 0.1 && !atomic_load(&s->lost) &&
		       !sky_signal_stop_requested())
			sky_mqtt_poll(s->m, 5);
	}
	SKY_INFO("stopping on signal %d", sky_signal_stop_requested());
	save_state(s);
	rc = 0;
exit:
	drop(s);
	mbedtls_x509_crt_free(&s->planner_crt);
	sky_signer_free(&s->signer);
	sky_ca_free(&s->ca);
	sky_mutex_free(&s->lock);
	return rc;
}
