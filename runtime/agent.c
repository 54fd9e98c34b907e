#include "sky_agent.h"

#include "sky_caps.h"
#include "sky_clock.h"
#include "sky_enroll.h"
#include "sky_file.h"
#include "sky_identity.h"
#include "sky_jobkey.h"
#include "sky_json.h"
#include "sky_log.h"
#include "sky_mqtt.h"
#include "sky_planmsg.h"
#include "sky_probe.h"
#include "sky_profile.h"
#include "sky_sign.h"
#include "sky_notify.h"
#include "sky_signal.h"
#include "sky_slicefetch.h"
#include "sky_thread.h"
#include "sky_topics.h"
#include "sky_servejob.h"
#include "sky_trainjob.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ECHO_PINGS 10
#define ECHO_BULK_MSGS 8
#define ECHO_BULK_BYTES (128u << 10)

void sky_agent_opts_default(sky_agent_opts *o)
{
	memset(o, 0, sizeof *o);
	sky_model_preset("tiny", &o->model);
	o->keepalive_s = 10;
	o->probe_max_s = SKY_PROBE_DEFAULT_MAX_S;
	o->enroll_timeout_s = 30;
}

static int state_path(const char *dir, const char *file, char *buf, size_t cap)
{
	int n = snprintf(buf, cap, "%s/%s", dir, file);
	return (n < 0 || (size_t)n >= cap) ? SKY_ERANGE : 0;
}

/* Reads the counter <dir>/<file> strictly (sky_file_read_count). Returns 0,
 * or SKY_ENOTFOUND / SKY_EFORMAT / SKY_ERANGE / SKY_EIO with `why` in words
 * for the log: a damaged counter is never read as 0 in silence. */
static int read_counter(const char *dir, const char *file, int64_t *out, const char **why)
{
	char path[1024];
	int rc = state_path(dir, file, path, sizeof path);
	if (rc == 0)
		rc = sky_file_read_count(path, out);
	*why = rc == 0		       ? "read"
	       : rc == SKY_ENOTFOUND ? "missing"
	       : rc == SKY_EFORMAT   ? "empty or not a decimal counter"
	       : rc == SKY_ERANGE    ? "beyond 2^53 - 1"
				     : "unreadable";
	return rc;
}

/* The epoch of the last training plan this board finished (<state>/trained),
 * so a restart does not run a finished job again; 0 when there is none. A
 * file that cannot be read is said and taken as none. */
static int64_t trained_epoch(const char *dir)
{
	int64_t v = 0;
	const char *why = "";
	int rc = read_counter(dir, "trained", &v, &why);
	if (rc && rc != SKY_ENOTFOUND)
		SKY_WARN("%s/trained is %s: taking it as no finished training job", dir, why);
	return rc ? 0 : v;
}

static int write_counter(const char *dir, const char *file, int64_t v)
{
	char path[1024];
	if (state_path(dir, file, path, sizeof path))
		return SKY_ERANGE;
	return sky_file_write_count(path, v, 0644);
}

/* ---- enrollment ---------------------------------------------------------- */

/* enroll_msg fills reply and len under lock, then sets got; the waiting
 * loop reads got without the lock, and reply and len only once got is set
 * (the atomic store and load order them). */
typedef struct enroll_wait {
	char topic[SKY_TOPIC_BUF];
	char reply[SKY_ENROLL_REPLY_MAX]; /* under lock until got */
	size_t len;                       /* under lock until got */
	_Atomic int got;
	sky_mutex lock;
} enroll_wait;

static void enroll_msg(void *ctx, const char *topic, size_t tl, const unsigned char *p, size_t len,
		       int retained)
{
	enroll_wait *w = ctx;
	sky_mutex_lock(&w->lock);
	if (!atomic_load(&w->got) && strcmp(topic, w->topic) == 0) {
		if (len > sizeof w->reply) {
			SKY_WARN("enroll: reply of %zu bytes over the %zu limit, ignored", len,
				 sizeof w->reply);
		} else {
			memcpy(w->reply, p, len);
			w->len = len;
			atomic_store(&w->got, 1);
		}
	}
	sky_mutex_unlock(&w->lock);
}

static void dir_of(const char *path, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s", path);
	char *slash = strrchr(buf, '/');
	if (slash)
		*slash = '\0';
	else
		snprintf(buf, cap, ".");
}

int sky_agent_enroll(const sky_agent_opts *o, sky_diag *d)
{
	int rc = 0;
	sky_mqtt *m = NULL;
	sky_sign_rng rng;
	static enroll_wait w;
	static char req[SKY_ENROLL_REQ_MAX];
	char claim_dir[512], cert[600], key[600], nonce[33], topic[SKY_TOPIC_BUF];
	unsigned char raw[16];

	memset(&rng, 0, sizeof rng);
	if (sky_identity_enrolled(o->state_dir)) {
		SKY_INFO("enroll: %s already holds an identity; not enrolling again", o->state_dir);
		return 0;
	}
	if (!o->id || (rc = sky_enroll_check_id(o->id, d)) != 0)
		return o->id ? rc : sky_diag_set(d, SKY_EINVAL, "enroll: --id is required");
	if (!o->claim_token || !o->claim_ca)
		return sky_diag_set(d, SKY_EINVAL, "enroll: --claim TOKEN and --pki-ca CA.crt are required");
	dir_of(o->claim_ca, claim_dir, sizeof claim_dir);
	snprintf(cert, sizeof cert, "%s/claim.crt", claim_dir);
	snprintf(key, sizeof key, "%s/claim.key", claim_dir);
	if ((rc = sky_file_mkdirs(o->state_dir, 0700)) != 0)
		return sky_diag_set(d, rc, "enroll: cannot create %s", o->state_dir);
	if ((rc = sky_identity_trust_ca(o->state_dir, o->claim_ca, d)) != 0)
		return rc;
	if ((rc = sky_sign_rng_init(&rng, "skyd-enroll", d)) != 0)
		goto exit;
	rc = sky_identity_enroll_request(o->state_dir, o->id, o->claim_token, &rng, req, sizeof req, d);
	if (rc < 0)
		goto exit;
	size_t req_len = (size_t)rc;
	/* the nonce keeps concurrent enrollments apart on the claim topics */
	if (sky_sign_rng_func(&rng, raw, sizeof raw) != 0) {
		rc = sky_diag_set(d, SKY_ECRYPTO, "enroll: no randomness for the nonce");
		goto exit;
	}
	for (size_t i = 0; i < sizeof raw; i++)
		snprintf(nonce + 2 * i, 3, "%02x", raw[i]);
	memset(&w, 0, sizeof w);
	sky_mutex_init(&w.lock);
	sky_topic_enroll(w.topic, sizeof w.topic, nonce, SKY_TOPIC_CERT);
	sky_topic_enroll(topic, sizeof topic, nonce, SKY_TOPIC_CSR);

	/* the claim listener (fleet port + 1) keeps the client id we choose, so
	 * boards enrolling at once do not close each other's connections; a
	 * random id of its own, since the nonce is seen by whoever may read
	 * enrollment replies */
	char client[64], claim_broker[300];
	unsigned char idraw[8];
	if (sky_mqtt_claim_broker(o->broker, claim_broker, sizeof claim_broker) != 0) {
		rc = sky_diag_set(d, SKY_EINVAL, "enroll: broker must be HOST:PORT, got '%s'",
				  o->broker ? o->broker : "");
		goto exit;
	}
	if (sky_sign_rng_func(&rng, idraw, sizeof idraw) != 0) {
		rc = sky_diag_set(d, SKY_ECRYPTO, "enroll: no randomness for the client id");
		goto exit;
	}
	int cn = snprintf(client, sizeof client, "claim-");
	for (size_t i = 0; i < sizeof idraw; i++)
		cn += snprintf(client + cn, sizeof client - (size_t)cn, "%02x", idraw[i]);
	sky_mqtt_opts mo = {.broker = claim_broker, .client_id = client, .ca_file = o->claim_ca,
			    .cert_file = cert, .key_file = key, .keepalive_s = 30,
			    .on_msg = enroll_msg, .ctx = &w};
	if ((rc = sky_mqtt_connect(&m, &mo, d)) != 0)
		goto exit;
	if ((rc = sky_mqtt_subscribe(m, w.topic, 1, 5000, d)) != 0)
		goto exit;
	if ((rc = sky_mqtt_publish(m, topic, req, req_len, 1, 0, d)) != 0)
		goto exit;
	SKY_INFO("enroll: sent a CSR for %s on %s", o->id, topic);
	double end = sky_clock_s() + (o->enroll_timeout_s > 0 ? o->enroll_timeout_s : 30);
	double resend = sky_clock_s() + 3.0;
	while (!atomic_load(&w.got) && sky_clock_s() < end && !sky_signal_stop_requested() &&
	       sky_mqtt_connected(m)) {
		sky_mqtt_poll(m, 10);
		/* the request is not retained: if the planner was not listening yet
		 * (started after us, or restarting), ask again; the reply topic is
		 * ours alone, and the first answer wins */
		if (!atomic_load(&w.got) && sky_clock_s() >= resend) {
			SKY_INFO("enroll: no answer yet; sending the request again");
			sky_mqtt_publish(m, topic, req, req_len, 1, 0, NULL);
			resend = sky_clock_s() + 3.0;
		}
	}
	if (!atomic_load(&w.got)) {
		rc = sky_diag_set(d, SKY_ETIMEOUT, "enroll: no answer from the planner on %s", w.topic);
		goto exit;
	}
	if ((rc = sky_identity_enroll_accept(o->state_dir, o->id, w.reply, w.len, d)) != 0)
		goto exit;
	/* session 0 marks a fresh identity: from now on a missing session file
	 * means the board's state was lost, and skyd says so */
	if ((rc = write_counter(o->state_dir, "session", 0)) != 0) {
		rc = sky_diag_set(d, rc, "enroll: cannot write the session counter in %s",
				  o->state_dir);
		goto exit;
	}
	SKY_INFO("enroll: %s enrolled; certificate in %s", o->id, o->state_dir);
exit:
	sky_mqtt_close(m, 1000);
	sky_sign_rng_free(&rng);
	return rc;
}

/* ---- the running agent ------------------------------------------------------- */

typedef struct agent {
	const sky_agent_opts *o;
	sky_identity idn;
	sky_profile prof;
	/* guards everything below (Paho's thread vs the main loop) except the
	 * _Atomic flags, which are read and written without it */
	sky_mutex lock;
	sky_mqtt *m;
	_Atomic int lost; /* set on Paho's thread (on_lost) */
	int64_t session;
	sky_caps caps;
	char boot[SKY_BOOT_ID_MAX + 1]; /* random, drawn at start: orders sessions (sky_caps.h) */
	sky_model_cfg probe_model;
	_Atomic int probe_requested; /* set by on_msg, taken by the main loop */
	/* the plan we hold */
	int64_t epoch;     /* of the last plan run (0: none) */
	sky_planmsg plan;
	int stage;
	char *plan_env;    /* its envelope, kept to recognise a verbatim re-delivery */
	size_t plan_env_len;
	sky_trainjob jobs[2];  /* the stage of the plan we hold, and room for the next */
	sky_trainjob *job;     /* jobs[0] or [1] once a plan is held */
	int64_t arena_bytes;
	int train_pending;     /* the held plan trains and has not run yet */
	int training;          /* the job runs (main thread only: messages are
				* dispatched on it, inside the job's polls) */
	sky_servejob *sj;      /* the serving job of the infer plan we hold, or NULL */
	int serving;           /* sj runs (main thread only, like training) */
	char *pending_env;     /* a plan that came while serving, taken after */
	size_t pending_len;
	char pending_topic[SKY_TOPIC_BUF];
	/* a newer plan of the running job (main thread only, like training):
	 * the job abandons its step and the plan is taken when it has stopped */
	int abandon;
	char *next_env;
	size_t next_env_len;
	/* a resumed plan's checkpoint (sky/v1/job/<job>/load/<id>), main thread */
	int loading, loaded;
	char load_topic[SKY_TOPIC_BUF];
	double next_hb;
	int64_t hb_seq;
	sky_planack ack;   /* the last answer to a plan, re-sent on reconnect */
	int has_ack;
	long plans_rejected;
	/* link probe: set by on_msg, read by link_probe's wait */
	_Atomic uint64_t echo_seq_seen;
	_Atomic int echo_bulk_seen;
	double echo_last_s;
	/* serving: the stage's slice, fetched before the plan is acknowledged;
	 * the serving job is set up once the slice is in place, with the frame
	 * key kept until then */
	sky_slicefetch fetch;
	unsigned char slice_key[SKY_JOBKEY_BYTES];
	int slice_sealed;
	/* scratch for plan handling (too big for Paho's stack) */
	char payload[SKY_SIGN_MAX_PAYLOAD + 1];
	sky_planmsg incoming;
} agent;

int64_t sky_agent_stage_bytes(const sky_planmsg *p, int stage)
{
	if (stage < 0 || stage >= p->n_stages)
		return SKY_EINVAL;
	if (p->infer.on)
		return sky_servejob_bytes(p, stage, 1, NULL);
	return sky_trainjob_bytes(p, stage, NULL);
}

/* Encodes k stamped with the current session and publishes it. */
static void send_ack(agent *a, sky_planack *k)
{
	char topic[SKY_TOPIC_BUF], buf[SKY_PLAN_ACK_MAX_BYTES];
	if (!a->m)
		return;
	k->session = a->session;
	snprintf(k->boot, sizeof k->boot, "%s", a->boot);
	int n = sky_planack_encode(k, buf, sizeof buf, NULL);
	if (n <= 0)
		return;
	sky_topic_board(topic, sizeof topic, a->idn.id, SKY_TOPIC_PLAN_ACK);
	/* retained, so a planner that restarts learns what each board holds */
	sky_mqtt_publish(a->m, topic, buf, (size_t)n, 1, 1, NULL);
}

/* Re-sends the acceptance of the plan we hold (after a reconnect, or when
 * the same plan is delivered again), with the current session: an ack from
 * an older session would be ignored by the planner as stale. */
static void publish_ack(agent *a)
{
	if (a->has_ack)
		send_ack(a, &a->ack);
}

static void fill_ack(agent *a, sky_planack *k, const sky_planmsg *p, int stage, int ok,
		     int64_t bytes, const char *reason)
{
	memset(k, 0, sizeof *k);
	snprintf(k->board, sizeof k->board, "%s", a->idn.id);
	snprintf(k->job, sizeof k->job, "%s", p->job);
	k->epoch = p->epoch;
	k->session = a->session;
	k->stage = stage;
	k->ok = ok;
	k->arena_bytes = bytes;
	k->expected_bytes = p->stages[stage].arena_bytes;
	k->budget_bytes = a->caps.mem_bytes;
	snprintf(k->reason, sizeof k->reason, "%s", reason ? reason : "");
}

/* A refusal goes out once; the plan we hold (and its ack) stays. */
static void refuse(agent *a, const sky_planmsg *p, int stage, int64_t bytes, const char *reason)
{
	sky_planack k;
	fill_ack(a, &k, p, stage, 0, bytes, reason);
	send_ack(a, &k);
}

/* ---- the job's network: the agent's MQTT connection ---------------------- */

/* Also called between a training job's frames, so a long job keeps the
 * board online and systemd's watchdog fed. */
static void heartbeat(agent *a)
{
	sky_notify_watchdog();
	double now = sky_clock_s();
	if (!a->m || now < a->next_hb)
		return;
	char buf[SKY_STATUS_MAX_BYTES], topic[SKY_TOPIC_BUF];
	sky_status st = {.online = 1, .session = a->session, .keepalive_s = a->o->keepalive_s,
			 .seq = ++a->hb_seq};
	snprintf(st.boot, sizeof st.boot, "%s", a->boot);
	int n = sky_status_encode(&st, buf, sizeof buf);
	sky_topic_board(topic, sizeof topic, a->idn.id, SKY_TOPIC_HEARTBEAT);
	sky_mqtt_publish(a->m, topic, buf, (size_t)n, 0, 0, NULL);
	/* four heartbeats per keepalive: the planner's deadline is 1.5 x keepalive */
	a->next_hb = now + a->o->keepalive_s / 4.0;
}

static int net_publish(void *ctx, const char *topic, const void *data, size_t len, int qos,
		       int retained)
{
	agent *a = ctx;
	return a->m ? sky_mqtt_publish(a->m, topic, data, len, qos, retained, NULL) : SKY_ENET;
}

static int do_probe(agent *a, sky_diag *d);
static int publish_caps(agent *a);

/* SIGUSR1: <state>/speed (a number, as skyd --speed) is read again and the
 * board computes at that speed from its next op on, a running job
 * included: an emulated board that slows down or speeds up. */
static void reload_speed(agent *a)
{
	char path[1024], buf[64], *end;
	long n = state_path(a->o->state_dir, "speed", path, sizeof path) == 0
			 ? sky_file_read(path, buf, sizeof buf - 1)
			 : SKY_ERANGE;
	sky_diag d;
	sky_diag_clear(&d);
	if (n <= 0) {
		SKY_WARN("SIGUSR1: no speed in %s; speed unchanged", path);
		return;
	}
	buf[n] = '\0';
	double f = strtod(buf, &end);
	if (end == buf || sky_profile_set_cores(&a->prof, f, &d) != 0) {
		SKY_WARN("SIGUSR1: %s does not hold a usable speed (%s); unchanged", path, d.msg);
		return;
	}
	SKY_INFO("SIGUSR1: now computing at speed %g (from %s)", f, path);
}

/* Between a running job's frames: a speed reload, and a probe the planner
 * asked for (it saw this stage's times drift); the link probe waits for
 * the job's end, its echoes would queue behind the frames. */
static void job_chores(agent *a)
{
	if (sky_signal_take_reload())
		reload_speed(a);
	if (a->training && atomic_exchange(&a->probe_requested, 0)) {
		sky_diag pd;
		sky_diag_clear(&pd);
		if (do_probe(a, &pd) == 0)
			publish_caps(a);
		else
			SKY_ERROR("requested probe failed: %s", pd.msg);
	}
}

static void net_poll(void *ctx, int wait_ms)
{
	agent *a = ctx;
	heartbeat(a); /* the planner must not think a training board is gone */
	job_chores(a);
	if (a->m)
		sky_mqtt_poll(a->m, wait_ms);
}

static int net_stopped(void *ctx)
{
	agent *a = ctx;
	return sky_signal_stop_requested() || a->lost || !a->m || a->abandon;
}

static int net_subscribe(void *ctx, const char *filter)
{
	agent *a = ctx;
	return a->m ? sky_mqtt_subscribe(a->m, filter, 1, 5000, NULL) : SKY_ENET;
}

static sky_transport_net agent_net(agent *a)
{
	sky_transport_net net = {.ctx = a, .publish = net_publish, .poll = net_poll,
				 .stopped = net_stopped, .subscribe = net_subscribe};
	return net;
}

/* The slice of the plan we hold is in place (path): set up its serving
 * job if that waited for the slice, and acknowledge the plan (or refuse it
 * if the stage cannot be set up). */
static void slice_in_place(agent *a, const char *path)
{
	sky_mutex_lock(&a->lock);
	if (a->has_ack == 0 && a->ack.ok && !strcmp(a->fetch.job, a->plan.job) &&
	    a->fetch.epoch == a->plan.epoch) {
		if (a->plan.infer.on && !a->sj) {
			sky_diag d;
			sky_diag_clear(&d);
			sky_transport_net net = agent_net(a);
			sky_servejob *sj = calloc(1, sizeof *sj);
			int rc = sj ? sky_servejob_setup(sj, &a->plan, a->stage, a->idn.id,
							 a->o->state_dir, a->prof.threads,
							 a->slice_sealed ? a->slice_key : NULL, &net, &d)
				    : SKY_ENOMEM;
			memset(a->slice_key, 0, sizeof a->slice_key);
			if (rc) {
				SKY_WARN("plan %s epoch %lld refused: %s", a->plan.job,
					 (long long)a->plan.epoch, d.msg);
				refuse(a, &a->plan, a->stage, a->arena_bytes, d.msg);
				a->has_ack = 1; /* answered: the refusal */
				sky_servejob_free(sj);
				free(sj);
				sky_mutex_unlock(&a->lock);
				return;
			}
			sj->plan = &a->plan;
			sj->prof = &a->prof; /* skyd --speed, as a training stage */
			a->sj = sj;
		}
		a->has_ack = 1;
		SKY_INFO("plan %s epoch %lld: slice in place (%s); acknowledging", a->plan.job,
			 (long long)a->plan.epoch, path);
		publish_ack(a);
	}
	sky_mutex_unlock(&a->lock);
}

/* Runs the training job of the plan we hold (on the main thread). */
static int take_plan(agent *a, const char *topic, const char *msg, size_t len, int from_disk);

/* A resumed plan: waits (up to 60 s, polling) for the planner's checkpoint
 * of this stage's new range, which on_msg loads into the job. Returns 0,
 * SKY_ETIMEOUT or SKY_ENET (stopped, or a newer plan came). */
static int load_checkpoint(agent *a, sky_diag *d)
{
	const sky_planmsg *p = &a->plan;
	int rc = sky_topic_job_to(a->load_topic, sizeof a->load_topic, p->job, SKY_TOPIC_LOAD,
				     a->idn.id);
	if (rc)
		return sky_diag_set(d, rc, "job %s: no load topic", p->job);
	a->loaded = 0;
	a->loading = 1;
	rc = net_subscribe(a, a->load_topic);
	double end = sky_clock_s() + 60.0;
	while (!rc && !a->loaded && !net_stopped(a) && sky_clock_s() < end)
		net_poll(a, 20);
	a->loading = 0;
	if (rc)
		return sky_diag_set(d, rc, "job %s: cannot subscribe to %s", p->job, a->load_topic);
	if (!a->loaded)
		return net_stopped(a) ? sky_diag_set(d, SKY_ENET, "job %s: stopped while loading",
						     p->job)
				      : sky_diag_set(d, SKY_ETIMEOUT,
						     "job %s epoch %lld: no checkpoint of step %d "
						     "for this stage on %s within 60 s",
						     p->job, (long long)p->epoch,
						     p->train.resume_step, a->load_topic);
	SKY_INFO("job %s epoch %lld: stage %d resumes from the checkpoint of step %d", p->job,
		 (long long)p->epoch, a->stage, p->train.resume_step);
	return 0;
}

/* Takes the newer plan that stopped the job (on_msg kept it). */
static void take_next_plan(agent *a)
{
	char *env = a->next_env;
	size_t len = a->next_env_len;
	char topic[SKY_TOPIC_BUF];
	a->next_env = NULL;
	a->abandon = 0;
	if (!env)
		return;
	sky_topic_job(topic, sizeof topic, a->plan.job, SKY_TOPIC_PLAN);
	sky_mutex_lock(&a->lock);
	take_plan(a, topic, env, len, 0);
	sky_mutex_unlock(&a->lock);
	free(env);
}

static void run_job(agent *a)
{
	sky_diag d;
	sky_diag_clear(&d);
	a->train_pending = 0;
	a->training = 1;
	int rc = a->plan.train.resume_step > 0 ? load_checkpoint(a, &d) : 0;
	if (!rc)
		rc = sky_trainjob_run(a->job, a->o->state_dir, 120.0, &d);
	a->training = 0;
	if (a->abandon) {
		/* a re-plan: the cut step is replayed from the checkpoint under
		 * the new plan (frames of this epoch are dropped by epoch) */
		SKY_WARN("job %s epoch %lld abandoned at step %ld: a newer plan arrived", a->plan.job,
			 (long long)a->plan.epoch, a->job->steps_done);
		take_next_plan(a);
		return;
	}
	if (rc == SKY_ENET && (a->lost || sky_signal_stop_requested())) {
		/* not the job's fault: run it again from its start after a reconnect */
		SKY_WARN("job %s interrupted: %s", a->plan.job, d.msg);
		a->train_pending = !sky_signal_stop_requested();
		return;
	}
	/* ran (or stopped for good): a restart must not run it again */
	write_counter(a->o->state_dir, "trained", a->plan.epoch);
	if (rc)
		SKY_ERROR("%s", d.msg);
}

/* Serves the infer plan we hold until a plan arrives or the board stops
 * (on the main thread); a plan that came meanwhile is taken after. */
static void run_serve(agent *a)
{
	sky_diag d;
	sky_diag_clear(&d);
	a->serving = 1;
	int rc = sky_servejob_run(a->sj, &d);
	a->serving = 0;
	atomic_store(&a->sj->stop, 0);
	if (rc)
		SKY_ERROR("%s", d.msg);
}

/* Verifies and, if acceptable, takes a plan. from_disk: at start, from
 * <state>/plan.env (no ack, no persistence). Called with a->lock held. */
static int take_plan(agent *a, const char *topic, const char *msg, size_t len, int from_disk)
{
	sky_diag d;
	size_t plen = 0;
	int rc;
	sky_diag_clear(&d);
	if (len > SKY_PLAN_MAX_BYTES) {
		SKY_WARN("plan rejected on %s: %zu bytes over the %u-byte limit (refused unparsed); "
			 "keeping epoch %lld",
			 topic, len, SKY_PLAN_MAX_BYTES, (long long)a->epoch);
		a->plans_rejected++;
		return SKY_ERANGE;
	}
	rc = sky_verify_envelope(&a->idn.planner, msg, len, a->payload, sizeof a->payload, &plen, &d);
	if (rc == 0)
		rc = sky_planmsg_decode(a->payload, plen, &a->incoming, &d);
	if (rc) {
		SKY_WARN("plan rejected on %s: %s (%s); keeping epoch %lld", topic,
			 rc == SKY_EAUTH ? "bad or missing signature" : "malformed", d.msg,
			 (long long)a->epoch);
		a->plans_rejected++;
		return rc;
	}
	sky_planmsg *p = &a->incoming;
	char want[SKY_TOPIC_BUF];
	if (!from_disk && (sky_topic_job(want, sizeof want, p->job, SKY_TOPIC_PLAN) != 0 ||
			   strcmp(want, topic) != 0)) {
		SKY_WARN("plan rejected on %s: it is signed for job %s (topic mismatch); keeping "
			 "epoch %lld",
			 topic, p->job, (long long)a->epoch);
		a->plans_rejected++;
		return SKY_EAUTH;
	}
	int stage = sky_planmsg_find(p, a->idn.id);
	if (stage < 0) {
		if (a->job && a->train_pending && !strcmp(p->job, a->plan.job) && p->epoch > a->epoch) {
			/* re-planned without us: the held epoch must not run any more */
			SKY_INFO("plan %s epoch %lld has no stage for %s: epoch %lld will not run",
				 p->job, (long long)p->epoch, a->idn.id, (long long)a->epoch);
			a->train_pending = 0;
			return 0;
		}
		if (a->sj && !strcmp(p->job, a->plan.job) && p->epoch > a->epoch) {
			/* a serving job re-planned without us: its old epoch must
			 * not take requests (the new first stage does) */
			SKY_INFO("plan %s epoch %lld has no stage for %s: stops serving epoch %lld",
				 p->job, (long long)p->epoch, a->idn.id, (long long)a->epoch);
			sky_servejob_free(a->sj);
			free(a->sj);
			a->sj = NULL;
			return 0;
		}
		SKY_DEBUG("plan %s epoch %lld has no stage for %s", p->job, (long long)p->epoch,
			  a->idn.id);
		return 0;
	}
	if (p->epoch <= a->epoch) {
		if (p->epoch == a->epoch && a->plan_env && len == a->plan_env_len &&
		    memcmp(msg, a->plan_env, len) == 0) {
			/* the same plan again (retained, after a reconnect): say we hold it */
			if (!from_disk)
				publish_ack(a);
			return 0;
		}
		SKY_WARN("plan rejected on %s: epoch %lld is not newer than %lld, the last plan run "
			 "(replayed or stale); keeping it",
			 topic, (long long)p->epoch, (long long)a->epoch);
		a->plans_rejected++;
		return SKY_EAUTH;
	}
	int64_t need = sky_agent_stage_bytes(p, stage);
	if (need < 0) {
		SKY_WARN("plan %s epoch %lld refused: model %s is unknown to this build", p->job,
			 (long long)p->epoch, p->shape.name);
		refuse(a, p, stage, 0, "unknown model preset");
		return (int)need;
	}
	if (a->caps.mem_bytes > 0 && need > a->caps.mem_bytes) {
		char why[160];
		snprintf(why, sizeof why, "stage needs %lld bytes, the board's budget is %lld",
			 (long long)need, (long long)a->caps.mem_bytes);
		SKY_WARN("plan %s epoch %lld refused: %s; keeping epoch %lld", p->job,
			 (long long)p->epoch, why, (long long)a->epoch);
		refuse(a, p, stage, need, why);
		return SKY_ENOMEM;
	}
	/* the job's frame key, wrapped for this board's certificate key */
	unsigned char key[SKY_JOBKEY_BYTES];
	int sealed = (p->train.steps > 0 && p->train.sealed) || (p->infer.on && p->infer.sealed);
	if (sealed) {
		sky_jobkey_refusal why = SKY_JOBKEY_OK;
		const char *blob = p->stages[stage].key;
		if (sky_jobkey_unwrap(&a->idn.key, blob, strlen(blob), p->job, a->idn.id, p->epoch,
				      key, &why, &d) != 0) {
			char r[320];
			snprintf(r, sizeof r, "frame key refused (%s): %s",
				 sky_jobkey_refusal_name(why), d.msg);
			SKY_WARN("plan %s epoch %lld refused: %s", p->job, (long long)p->epoch, r);
			refuse(a, p, stage, need, r);
			return SKY_EAUTH;
		}
	}
	/* measured; the stage's one arena is allocated, carved and sealed here */
	sky_trainjob *next = a->job == &a->jobs[0] ? &a->jobs[1] : &a->jobs[0];
	sky_transport_net net = {.ctx = a, .publish = net_publish, .poll = net_poll,
				 .stopped = net_stopped, .subscribe = net_subscribe};
	/* an infer plan: a serving job from the slice in the board's cache; a
	 * slice not there yet is fetched first (sky_slicefetch.h), and the job
	 * is set up when it is in place (slice_in_place) */
	int slice_ready = 1;
	if (p->infer.on) {
		char sp[700];
		sky_transport_net fnet = agent_net(a);
		int hit = sky_slicefetch_start(&a->fetch, p->job, p->epoch, &p->stages[stage].slice,
					       &fnet, sp, sizeof sp, &d);
		if (hit < 0)
			SKY_WARN("plan %s epoch %lld: slice: %s", p->job, (long long)p->epoch, d.msg);
		slice_ready = hit == 1;
		sky_diag_clear(&d);
	}
	sky_servejob *sj = p->infer.on && slice_ready ? calloc(1, sizeof *sj) : NULL;
	rc = 0;
	if (p->infer.on && slice_ready)
		rc = sj ? sky_servejob_setup(sj, p, stage, a->idn.id, a->o->state_dir,
					     a->prof.threads, sealed ? key : NULL, &net, &d)
			: SKY_ENOMEM;
	else if (!p->infer.on)
		rc = sky_trainjob_setup(next, p, stage, a->idn.id, sealed ? key : NULL, &net, &d);
	memcpy(a->slice_key, key, sizeof key);
	a->slice_sealed = sealed;
	memset(key, 0, sizeof key);
	if (rc) {
		SKY_WARN("plan %s epoch %lld refused: %s", p->job, (long long)p->epoch, d.msg);
		refuse(a, p, stage, need, d.msg);
		sky_servejob_free(sj);
		free(sj);
		return rc;
	}
	/* skyd --speed: the stage computes as slowly as it probed (both of a
	 * data owner's) */
	next->tr.prof = &a->prof;
	if (next->stage2 >= 0)
		next->tr2.prof = &a->prof;
	char *env = malloc(len);
	if (!env) {
		sky_trainjob_free(next);
		sky_servejob_free(sj);
		free(sj);
		return SKY_ENOMEM;
	}
	memcpy(env, msg, len);
	if (a->job)
		sky_trainjob_free(a->job);
	sky_servejob_free(a->sj);
	free(a->sj);
	a->sj = sj;
	free(a->plan_env);
	a->job = p->infer.on ? NULL : next;
	a->arena_bytes = need;
	a->plan_env = env;
	a->plan_env_len = len;
	a->plan = *p;
	if (a->job)
		a->job->plan = &a->plan; /* the job keeps pointing at the plan we hold */
	if (a->sj) {
		a->sj->plan = &a->plan;
		a->sj->prof = &a->prof; /* skyd --speed: it serves as slowly as it probed */
	}
	a->stage = stage;
	a->epoch = p->epoch;
	a->train_pending = p->train.steps > 0 && trained_epoch(a->o->state_dir) < p->epoch;
	/* serving: the plan is acknowledged once the stage's slice is in the
	 * cache (at once on a hit; else when the download completes) */
	if (slice_ready || !p->infer.on)
		memset(a->slice_key, 0, sizeof a->slice_key);
	fill_ack(a, &a->ack, p, stage, 1, need, NULL);
	a->has_ack = slice_ready;
	SKY_INFO("plan %s epoch %lld accepted: stage %d of %d, half-layers %d-%d, arena %lld bytes "
		 "reserved (planner expected %lld)",
		 p->job, (long long)p->epoch, stage, p->n_stages, p->stages[stage].first,
		 p->stages[stage].last, (long long)need, (long long)p->stages[stage].arena_bytes);
	if (!from_disk) {
		char path[1024];
		write_counter(a->o->state_dir, "epoch", a->epoch);
		if (state_path(a->o->state_dir, "plan.env", path, sizeof path) == 0)
			sky_file_write(path, msg, len, 0644);
		publish_ack(a);
	}
	return 0;
}

static void on_msg(void *ctx, const char *topic, size_t tl, const unsigned char *p, size_t len,
		   int retained)
{
	agent *a = ctx;
	char seg[SKY_TOPIC_SEGMENT_MAX + 1], leaf[16];
	if (strlen(topic) != tl)
		return; /* an embedded NUL: not one of ours */
	/* frames, norms and the start barrier of the job that runs */
	if (a->training && sky_trainjob_on_msg(a->job, topic, p, len))
		return;
	/* requests, frames and readiness of the job that serves */
	if (a->serving && sky_servejob_on_msg(a->sj, topic, p, len))
		return;
	if (sky_topic_parse(topic, tl, "job", seg, sizeof seg, leaf, sizeof leaf) == 0 &&
	    strcmp(leaf, SKY_TOPIC_PLAN) == 0 && a->serving) {
		/* a plan ends the serving loop and is taken after it */
		char *env = malloc(len ? len : 1);
		if (env && len <= SKY_PLAN_MAX_BYTES) {
			memcpy(env, p, len);
			free(a->pending_env);
			a->pending_env = env;
			a->pending_len = len;
			snprintf(a->pending_topic, sizeof a->pending_topic, "%s", topic);
			atomic_store(&a->sj->stop, 1);
		} else {
			free(env);
		}
		return;
	}
	{
		char sp[700];
		int fr = sky_slicefetch_on_msg(&a->fetch, topic, p, len, sp, sizeof sp);
		if (fr == 2)
			slice_in_place(a, sp);
		if (fr)
			return;
	}
	if (sky_topic_parse(topic, tl, "job", seg, sizeof seg, leaf, sizeof leaf) == 0 &&
	    strcmp(leaf, SKY_TOPIC_PLAN) == 0) {
		if (a->training) {
			/* the running job owns the arena: a newer, verified plan of the
			 * same job stops it at once (the job's polls see `abandon`),
			 * and is taken when it has stopped */
			sky_diag vd;
			size_t plen = 0;
			sky_diag_clear(&vd);
			if (!a->abandon && len <= SKY_PLAN_MAX_BYTES &&
			    sky_verify_envelope(&a->idn.planner, (const char *)p, len, a->payload,
						sizeof a->payload, &plen, &vd) == 0 &&
			    sky_planmsg_decode(a->payload, plen, &a->incoming, &vd) == 0 &&
			    !strcmp(a->incoming.job, a->plan.job) && a->incoming.epoch > a->epoch &&
			    (a->next_env = malloc(len)) != NULL) {
				memcpy(a->next_env, p, len);
				a->next_env_len = len;
				a->abandon = 1;
				SKY_INFO("job %s: plan epoch %lld (generation %d, resume from step "
					 "%d) arrived while epoch %lld trains; stopping it",
					 a->plan.job, (long long)a->incoming.epoch,
					 a->incoming.train.generation, a->incoming.train.resume_step,
					 (long long)a->epoch);
				return;
			}
			if (!a->abandon)
				SKY_WARN("plan on %s ignored: job %s is training", topic, a->plan.job);
			return;
		}
		sky_mutex_lock(&a->lock);
		take_plan(a, topic, (const char *)p, len, 0);
		sky_mutex_unlock(&a->lock);
		return;
	}
	if (a->loading && !strcmp(topic, a->load_topic)) {
		sky_diag ld;
		sky_diag_clear(&ld);
		if (len == 0) /* a cleared retained message */
			return;
		if (sky_trainjob_load(a->job, p, len, &ld) == 0)
			a->loaded = 1;
		else
			SKY_WARN("checkpoint on %s refused: %s", topic, ld.msg);
		return;
	}
	if (sky_topic_parse(topic, tl, "board", seg, sizeof seg, leaf, sizeof leaf) != 0 ||
	    strcmp(seg, a->idn.id) != 0)
		return;
	if (strcmp(leaf, SKY_TOPIC_ECHO) == 0 && len >= 8) {
		uint64_t seq = 0;
		for (int i = 0; i < 8; i++)
			seq = seq << 8 | p[i];
		if (len >= ECHO_BULK_BYTES)
			atomic_fetch_add(&a->echo_bulk_seen, 1);
		else
			atomic_store(&a->echo_seq_seen, seq);
		return;
	}
	if (strcmp(leaf, SKY_TOPIC_CMD) == 0) {
		sky_diag d;
		sky_diag_clear(&d);
		if (len > SKY_CMD_MAX_BYTES)
			return;
		cJSON *doc = sky_json_parse((const char *)p, len, &d);
		char cmd[16] = "", model[16] = "";
		int64_t seq = 0, batch = 0;
		if (doc && sky_json_str(doc, "cmd", cmd, sizeof cmd, "cmd", &d) == 0 &&
		    strcmp(cmd, "probe") == 0) {
			sky_mutex_lock(&a->lock);
			if (sky_json_str(doc, "model", model, sizeof model, "cmd", NULL) == 0 &&
			    sky_model_preset(model, &a->probe_model) == 0) {
				if (sky_json_i64(doc, "seq", 1, SKY_CAPS_MAX_DIM, &seq, "cmd", NULL) == 0)
					a->probe_model.seq = (int)seq;
				if (sky_json_i64(doc, "batch", 1, SKY_CAPS_MAX_BATCH, &batch, "cmd", NULL) == 0)
					a->probe_model.batch = (int)batch;
			}
			atomic_store(&a->probe_requested, 1);
			sky_mutex_unlock(&a->lock);
			SKY_INFO("probe requested by the planner (model %s)", a->probe_model.name);
		} else if (doc && !strcmp(cmd, "ckpt")) {
			/* a voluntary re-plan is coming: a checkpoint after step `step`
			 * (every stage gets the same step), then the new plan resumes
			 * from it, so no step is lost */
			char job[SKY_TOPIC_SEGMENT_MAX + 1] = "";
			int64_t epoch = 0, step = 0;
			if (sky_json_str(doc, "job", job, sizeof job, "cmd", &d) == 0 &&
			    sky_json_i64(doc, "epoch", 1, SKY_JSON_INT_MAX, &epoch, "cmd", &d) == 0 &&
			    sky_json_i64(doc, "step", 1, SKY_PLANMSG_MAX_STEPS, &step, "cmd", &d) == 0 &&
			    a->training && a->job && !strcmp(job, a->plan.job) && epoch == a->plan.epoch) {
				a->job->ckpt_at = step;
				SKY_INFO("job %s: checkpoint after step %lld asked by the planner", job,
					 (long long)step);
			} else {
				SKY_DEBUG("checkpoint request ignored (not for the job this board runs)");
			}
		} else {
			SKY_WARN("command ignored: %s", d.msg[0] ? d.msg : "unknown command");
		}
		sky_json_free(doc);
	}
}

static void on_lost(void *ctx, const char *cause)
{
	agent *a = ctx;
	atomic_store(&a->lost, 1);
	SKY_WARN("connection to the broker lost: %s", cause);
}

/* Latency: ECHO_PINGS small messages one at a time, median round trip.
 * Bandwidth: ECHO_BULK_MSGS messages of 128 KiB back to back; each crosses
 * the board's link twice (up to the broker and back), so bw = 2 x bytes /
 * time until the last one is back. Bounded: 2 s per ping, 10 s for bulk. */
static void link_probe(agent *a)
{
	char topic[SKY_TOPIC_BUF];
	static unsigned char buf[ECHO_BULK_BYTES];
	double rtt[ECHO_PINGS];
	int n = 0;
	sky_topic_board(topic, sizeof topic, a->idn.id, SKY_TOPIC_ECHO);
	for (int i = 0; i < ECHO_PINGS; i++) {
		uint64_t seq = ((uint64_t)a->session << 32) | (uint64_t)(i + 1);
		for (int k = 0; k < 8; k++)
			buf[k] = (unsigned char)(seq >> (56 - 8 * k));
		double t0 = sky_clock_s();
		if (sky_mqtt_publish(a->m, topic, buf, 64, 0, 0, NULL) != 0)
			return;
		/* spin for the first 2 ms (loopback answers in ~1 ms), then sleep,
		 * so sixteen boards probing at once do not starve each other */
		while (atomic_load(&a->echo_seq_seen) != seq && sky_clock_s() - t0 < 2.0 &&
		       !atomic_load(&a->lost))
			sky_mqtt_poll(a->m, sky_clock_s() - t0 > 0.002 ? 1 : 0);
		if (atomic_load(&a->echo_seq_seen) == seq)
			rtt[n++] = sky_clock_s() - t0;
	}
	if (n == 0) {
		SKY_WARN("link probe: no echo came back from the broker");
		return;
	}
	for (int i = 1; i < n; i++) /* insertion sort: n <= 10 */
		for (int j = i; j > 0 && rtt[j] < rtt[j - 1]; j--) {
			double t = rtt[j];
			rtt[j] = rtt[j - 1];
			rtt[j - 1] = t;
		}
	double lat = n % 2 ? rtt[n / 2] : 0.5 * (rtt[n / 2 - 1] + rtt[n / 2]);
	atomic_store(&a->echo_bulk_seen, 0);
	memset(buf, 0xa5, 8);
	double t0 = sky_clock_s();
	for (int i = 0; i < ECHO_BULK_MSGS; i++)
		sky_mqtt_publish(a->m, topic, buf, sizeof buf, 0, 0, NULL);
	while (atomic_load(&a->echo_bulk_seen) < ECHO_BULK_MSGS && sky_clock_s() - t0 < 10.0 &&
	       !atomic_load(&a->lost))
		sky_mqtt_poll(a->m, 1);
	double el = sky_clock_s() - t0;
	int bulk = atomic_load(&a->echo_bulk_seen);
	double bw = bulk > 0 ? 2.0 * bulk * (double)sizeof buf / el : 0;
	sky_mutex_lock(&a->lock);
	a->caps.link_lat_s = lat;
	a->caps.link_bw = bw;
	sky_mutex_unlock(&a->lock);
	SKY_INFO("link probe: round trip %.3f ms (median of %d), %.1f MB/s through the broker",
		 1e3 * lat, n, bw / 1e6);
}

static int publish_caps(agent *a)
{
	char buf[SKY_CAPS_MAX_BYTES], topic[SKY_TOPIC_BUF];
	sky_diag d;
	sky_diag_clear(&d);
	sky_mutex_lock(&a->lock);
	a->caps.session = a->session;
	snprintf(a->caps.boot, sizeof a->caps.boot, "%s", a->boot);
	int n = sky_caps_encode(&a->caps, buf, sizeof buf, &d);
	sky_mutex_unlock(&a->lock);
	if (n < 0) {
		SKY_ERROR("capability report not sent: %s", d.msg);
		return n;
	}
	sky_topic_board(topic, sizeof topic, a->idn.id, SKY_TOPIC_CAPS);
	/* retained, so a planner that starts later still sees it */
	return sky_mqtt_publish(a->m, topic, buf, (size_t)n, 1, 1, &d);
}

static int do_probe(agent *a, sky_diag *d)
{
	sky_probe_opts po;
	int hit;
	sky_probe_opts_default(&po, &a->probe_model);
	po.max_s = a->o->probe_max_s;
	sky_caps c;
	sky_mutex_lock(&a->lock);
	c = a->caps;
	sky_mutex_unlock(&a->lock);
	int rc = sky_probe_cached(a->o->state_dir, a->idn.id, &po, &a->prof, &c, &hit, d);
	if (rc)
		return rc;
	sky_mutex_lock(&a->lock);
	a->caps = c;
	sky_mutex_unlock(&a->lock);
	return 0;
}

static int connect_once(agent *a, sky_diag *d)
{
	char will[SKY_STATUS_MAX_BYTES], status_topic[SKY_TOPIC_BUF], topic[SKY_TOPIC_BUF];
	char online[SKY_STATUS_MAX_BYTES], ca[600], crt[600], key[600];
	sky_status st = {0};
	int rc;
	/* a new session number for every connect, persisted first so a crash
	 * right after cannot make the next connect reuse it */
	int64_t session = a->session + 1;
	if ((rc = write_counter(a->o->state_dir, "session", session)) != 0)
		return sky_diag_set(d, rc, "cannot persist the session number in %s",
				    a->o->state_dir);
	a->session = session;
	st.session = session;
	snprintf(st.boot, sizeof st.boot, "%s", a->boot);
	int wn = sky_status_encode(&st, will, sizeof will);
	st.online = 1;
	st.keepalive_s = a->o->keepalive_s;
	int on = sky_status_encode(&st, online, sizeof online);
	sky_topic_board(status_topic, sizeof status_topic, a->idn.id, SKY_TOPIC_STATUS);
	sky_identity_path(a->o->state_dir, SKY_IDENTITY_CA_FILE, ca, sizeof ca);
	sky_identity_path(a->o->state_dir, SKY_IDENTITY_CERT_FILE, crt, sizeof crt);
	sky_identity_path(a->o->state_dir, SKY_IDENTITY_KEY_FILE, key, sizeof key);
	sky_mqtt_opts mo = {.broker = a->o->broker, .client_id = a->idn.id, .ca_file = ca,
			    .cert_file = crt, .key_file = key, .keepalive_s = a->o->keepalive_s,
			    .will_topic = status_topic, .will_payload = will, .will_len = (size_t)wn,
			    .will_retained = 1, .will_qos = 1, .on_msg = on_msg, .on_lost = on_lost,
			    .ctx = a};
	sky_mqtt *m = NULL;
	atomic_store(&a->lost, 0);
	if ((rc = sky_mqtt_connect(&m, &mo, d)) != 0)
		return rc;
	sky_mutex_lock(&a->lock);
	a->m = m;
	sky_mutex_unlock(&a->lock);
	sky_mqtt_publish(m, status_topic, online, (size_t)on, 1, 1, NULL);
	sky_topic_board(topic, sizeof topic, a->idn.id, SKY_TOPIC_ECHO);
	if ((rc = sky_mqtt_subscribe(m, topic, 0, 5000, d)) != 0)
		return rc;
	sky_topic_board(topic, sizeof topic, a->idn.id, SKY_TOPIC_CMD);
	if ((rc = sky_mqtt_subscribe(m, topic, 1, 5000, d)) != 0)
		return rc;
	SKY_INFO("connected to %s as %s, session %lld (boot %s)", a->o->broker, a->idn.id,
		 (long long)session, a->boot);
	if (!a->o->no_link_probe)
		link_probe(a);
	if ((rc = publish_caps(a)) != 0)
		return sky_diag_set(d, rc, "capability report could not be queued");
	/* plans last: the retained ones arrive now, and the caps are already out */
	if ((rc = sky_mqtt_subscribe(m, SKY_TOPIC_SUB_ALL_PLANS, 1, 5000, d)) != 0)
		return rc;
	sky_mutex_lock(&a->lock);
	publish_ack(a); /* the planner may have restarted: say what we hold */
	sky_mutex_unlock(&a->lock);
	sky_slicefetch_reconnected(&a->fetch);
	return 0;
}

static void disconnect(agent *a, int clean)
{
	sky_mqtt *m;
	sky_mutex_lock(&a->lock);
	m = a->m;
	a->m = NULL;
	sky_mutex_unlock(&a->lock);
	if (!m)
		return;
	if (clean && sky_mqtt_connected(m)) {
		char buf[SKY_STATUS_MAX_BYTES], topic[SKY_TOPIC_BUF];
		sky_status st = {.online = 0, .session = a->session};
		snprintf(st.boot, sizeof st.boot, "%s", a->boot);
		int n = sky_status_encode(&st, buf, sizeof buf);
		sky_topic_board(topic, sizeof topic, a->idn.id, SKY_TOPIC_STATUS);
		sky_mqtt_publish(m, topic, buf, (size_t)n, 1, 1, NULL);
		sky_mqtt_flush(m, 2000);
	}
	sky_mqtt_close(m, 1000);
}

/* The plan epoch is the board's guard against replayed plans. The saved
 * plan (<state>/plan.env, signed) is re-verified; if <state>/epoch is lost or
 * damaged, that plan's own epoch is the floor, said out loud. */
static void load_saved_plan(agent *a)
{
	char path[1024];
	static char buf[SKY_PLAN_MAX_BYTES];
	const char *why;
	int64_t epoch = 0;
	long n = state_path(a->o->state_dir, "plan.env", path, sizeof path) == 0
			 ? sky_file_read(path, buf, sizeof buf)
			 : SKY_ERANGE;
	int rc = read_counter(a->o->state_dir, "epoch", &epoch, &why);
	int known = rc == 0;
	if (rc != 0 && (rc != SKY_ENOTFOUND || n > 0))
		SKY_WARN("plan epoch state lost: %s/epoch is %s; %s", a->o->state_dir, why,
			 n > 0 ? "the saved plan's own (signed) epoch is the floor now"
			       : "no saved plan either: any signed plan will be taken");
	if (n <= 0) {
		a->epoch = known ? epoch : 0;
		return;
	}
	a->epoch = known ? epoch - 1 : 0; /* take_plan wants newer; the saved one is `epoch` */
	sky_mutex_lock(&a->lock);
	rc = take_plan(a, path, buf, (size_t)n, 1);
	sky_mutex_unlock(&a->lock);
	if (rc != 0 || a->epoch < epoch || a->epoch <= 0) {
		SKY_WARN("saved plan %s not usable; waiting for a new one", path);
		a->epoch = known ? epoch : 0;
		return;
	}
	if (!known || a->epoch > epoch) {
		SKY_WARN("plan epoch recovered from the saved plan: %lld", (long long)a->epoch);
		write_counter(a->o->state_dir, "epoch", a->epoch);
	}
}

/* A random boot id for this run, and the session counter it continues. A
 * fresh identity has session 0 (written at enrollment). A missing or
 * damaged counter means the board's state was lost or restored from an old
 * image: start again at session 1, loudly; the new boot id is what lets the
 * planner accept the fresh numbers (planner/sky_registry.h). */
static int start_boot(agent *a, sky_diag *d)
{
	sky_sign_rng rng;
	unsigned char raw[8];
	const char *why;
	int64_t last = 0;
	memset(&rng, 0, sizeof rng);
	int rc = sky_sign_rng_init(&rng, "skyd-boot", d);
	if (rc == 0 && sky_sign_rng_func(&rng, raw, sizeof raw) != 0)
		rc = sky_diag_set(d, SKY_ECRYPTO, "no randomness for the boot id");
	sky_sign_rng_free(&rng);
	if (rc)
		return rc;
	for (size_t i = 0; i < sizeof raw; i++)
		snprintf(a->boot + 2 * i, 3, "%02x", raw[i]);
	rc = read_counter(a->o->state_dir, "session", &last, &why);
	if (rc == SKY_EIO)
		return sky_diag_set(d, rc, "%s/session: %s", a->o->state_dir, why);
	if (rc) {
		SKY_WARN("session state lost: %s/session is %s although this board holds an "
			 "identity (state lost, damaged or restored from an old image); starting "
			 "again at session 1 under the new boot id %s",
			 a->o->state_dir, why, a->boot);
		last = 0;
	} else if (last >= SKY_FILE_COUNT_MAX - 1000000) {
		/* 2^53 connects do not happen; a number this big was written by hand */
		SKY_WARN("session state damaged: %s/session holds %lld, too near 2^53; starting "
			 "again at session 1 under the new boot id %s",
			 a->o->state_dir, (long long)last, a->boot);
		last = 0;
	}
	a->session = last;
	SKY_INFO("boot %s: sessions continue from %lld", a->boot, (long long)last);
	return 0;
}

int sky_agent_run(const sky_agent_opts *o, sky_diag *d)
{
	static agent a; /* big (two plans); one agent per process */
	int rc;
	memset(&a, 0, sizeof a);
	a.o = o;
	sky_mutex_init(&a.lock);
	sky_identity_init(&a.idn);
	if ((rc = sky_identity_load(&a.idn, o->state_dir, d)) != 0)
		goto exit;
	sky_slicefetch_init(&a.fetch, o->state_dir, a.idn.id);
	if (o->id && strcmp(o->id, a.idn.id) != 0) {
		rc = sky_diag_set(d, SKY_EAUTH, "--id %s but the certificate in %s is for %s", o->id,
				  o->state_dir, a.idn.id);
		goto exit;
	}
	if ((rc = sky_profile_load(&a.prof, o->profile_path, d)) != 0)
		goto exit;
	if (o->speed > 0 && (rc = sky_profile_set_cores(&a.prof, o->speed, d)) != 0)
		goto exit;
	if (o->site) {
		snprintf(a.prof.site, sizeof a.prof.site, "%s", o->site);
		sky_site_norm(a.prof.site);
	}
	sky_profile_apply_threads(&a.prof);
	snprintf(a.caps.id, sizeof a.caps.id, "%s", a.idn.id);
	a.caps.keepalive_s = o->keepalive_s;
	a.probe_model = o->model;
	if ((rc = start_boot(&a, d)) != 0)
		goto exit;
	if ((rc = do_probe(&a, d)) != 0)
		goto exit;
	load_saved_plan(&a);

	/* 0.5 s doubling to 5 s, jittered: a fleet that lost its broker does
	 * not come back in one burst */
	sky_mqtt_backoff backoff;
	sky_mqtt_backoff_init(&backoff, 500, 5000, sky_clock_ns() ^ (uint64_t)(uintptr_t)&a);
	sky_notify_ready(); /* identity, profile and probe are in hand */
	while (!sky_signal_stop_requested()) {
		sky_notify_watchdog(); /* from this thread only (here and between a job's frames): a wedged loop stops pinging */
		if (!a.m || atomic_load(&a.lost)) {
			if (a.m) {
				disconnect(&a, 0);
				sky_sleep_ms(200);
			}
			sky_diag cd;
			sky_diag_clear(&cd);
			if (connect_once(&a, &cd) != 0) {
				int ms = sky_mqtt_backoff_next(&backoff);
				SKY_WARN("%s; retrying in %d ms", cd.msg, ms);
				disconnect(&a, 0);
				for (int t = 0; t < ms / 50 && !sky_signal_stop_requested(); t++)
					sky_sleep_ms(50);
				continue;
			}
			sky_mqtt_backoff_reset(&backoff);
			a.next_hb = 0;
		}
		if (sky_signal_take_reload())
			reload_speed(&a);
		if (atomic_exchange(&a.probe_requested, 0)) {
			sky_diag pd;
			sky_diag_clear(&pd);
			if (do_probe(&a, &pd) == 0) {
				if (!o->no_link_probe)
					link_probe(&a);
				publish_caps(&a);
			} else {
				SKY_ERROR("requested probe failed: %s", pd.msg);
			}
		}
		heartbeat(&a);
		if (a.m && !a.lost) {
			sky_transport_net fnet = agent_net(&a);
			sky_slicefetch_tick(&a.fetch, sky_clock_s(), &fnet);
		}
		if (a.train_pending && a.job && a.m && !a.lost)
			run_job(&a);
		if (a.sj && a.m && !a.lost && !a.pending_env)
			run_serve(&a);
		if (a.pending_env) {
			sky_mutex_lock(&a.lock);
			take_plan(&a, a.pending_topic, a.pending_env, a.pending_len, 0);
			sky_mutex_unlock(&a.lock);
			free(a.pending_env);
			a.pending_env = NULL;
		}
		/* messages are handled here, on this thread (sky_mqtt_poll) */
		sky_mqtt_poll(a.m, 20);
	}
	SKY_INFO("stopping on signal %d: status offline, disconnecting", sky_signal_stop_requested());
	disconnect(&a, 1);
	rc = 0;
exit:
	disconnect(&a, 0);
	sky_trainjob_free(&a.jobs[0]);
	sky_trainjob_free(&a.jobs[1]);
	sky_servejob_free(a.sj);
	free(a.sj);
	free(a.pending_env);
	free(a.plan_env);
	free(a.next_env);
	sky_identity_free(&a.idn);
	sky_mutex_free(&a.lock);
	return rc;
}
