/* skyplan's service (sky_service.h): start, the loop, the broker
 * connection, and the router that hands each message to the file of its
 * concern (svc_internal.h says which file holds what). */
#include "sky_service.h"

#include "svc_internal.h"

#include "sky_clock.h"
#include "sky_file.h"
#include "sky_notify.h"
#include "sky_partchunk.h"
#include "sky_signal.h"

#include <stdio.h>
#include <string.h>

/* the longest the loop hands messages over before its tick runs again */
#define POLL_BUDGET_MS 50

static svc g_svc; /* one service per process; far too big for a stack */

/* ---- the router ----------------------------------------------------------- */

/* One message and what its route's match took from its topic. */
typedef struct svc_msg {
	const char *topic;
	size_t tl;
	const unsigned char *p;
	size_t len;
	int retained;
	double now; /* when it was handed over */
	char seg[SKY_TOPIC_SEGMENT_MAX + 1], leaf[16], to[SKY_TOPIC_SEGMENT_MAX + 1];
	char who[SKY_TOPIC_SEGMENT_MAX + 1]; /* a stage topic's sender, a serving topic's second id */
	int k;
} svc_msg;

typedef struct svc_route svc_route;
struct svc_route {
	int (*match)(const svc_route *rt, svc_msg *m);
	const char *area; /* sky_topic_parse's area, or the topic's prefix */
	const char *leaf; /* NULL: any */
	void (*fn)(svc *s, const svc_msg *m);
};

/* sky/v1/<area>/<seg>/<leaf> */
static int match_area(const svc_route *rt, svc_msg *m)
{
	return sky_topic_parse(m->topic, m->tl, rt->area, m->seg, sizeof m->seg, m->leaf,
			       sizeof m->leaf) == 0 &&
	       (!rt->leaf || strcmp(m->leaf, rt->leaf) == 0);
}

/* sky/v1/job/<seg>/<leaf>/<to> */
static int match_job_to(const svc_route *rt, svc_msg *m)
{
	return sky_topic_parse_job_to(m->topic, m->tl, rt->leaf, m->seg, sizeof m->seg, m->to,
				      sizeof m->to) == 0;
}

/* sky/v1/enroll/<claim connection's client id>/<leaf> */
static int match_enroll(const svc_route *rt, svc_msg *m)
{
	return sky_topic_parse_enroll(m->topic, m->tl, m->seg, sizeof m->seg, m->leaf,
				      sizeof m->leaf) == 0 &&
	       strcmp(m->leaf, rt->leaf) == 0;
}

/* sky/v1/job/<seg>/<leaf>/<to>/<k-th: leaf2> (serving topics with two
 * identities; the second, the sender's, goes to m->leaf2) */
static int match_job_pair(const svc_route *rt, svc_msg *m)
{
	return sky_topic_parse_job_pair(m->topic, m->tl, rt->leaf, m->seg, sizeof m->seg, m->to,
					sizeof m->to, m->who, sizeof m->who) == 0;
}

static int match_prefix(const svc_route *rt, svc_msg *m)
{
	return strncmp(m->topic, rt->area, strlen(rt->area)) == 0;
}

static int match_ready(const svc_route *rt, svc_msg *m)
{
	return svc_serve_parse_ready(m->topic, m->seg, sizeof m->seg, &m->k, m->who,
				     sizeof m->who) == 0;
}

static int match_any(const svc_route *rt, svc_msg *m)
{
	return 1;
}

static void on_submit(svc *s, const svc_msg *m)
{
	svc_submit_on_msg(s, m->seg, (const char *)m->p, m->len);
}

static void on_weights(svc *s, const svc_msg *m)
{
	sky_deploy_on_weights(&s->deploy, m->seg, m->p, m->len, svc_serve_publish, s);
}

static void on_ignore(svc *s, const svc_msg *m)
{
}

static void on_slice_req(svc *s, const svc_msg *m)
{
	svc_serve_on_slice_req(s, m->seg, (const char *)m->p, m->len);
}

static void on_board(svc *s, const svc_msg *m)
{
	svc_fleet_on_board(s, m->seg, m->leaf, (const char *)m->p, m->len);
}

static void on_plan(svc *s, const svc_msg *m)
{
	svc_store_on_plan(s, m->topic, (const char *)m->p, m->len, m->retained);
}

static void on_metrics(svc *s, const svc_msg *m)
{
	/* taken from a board of the plan: relayed to the job's owner */
	if (svc_authz_on_metrics(s, m->seg, m->to, m->p, m->len) == 0)
		svc_relay_metrics(s, m->seg, m->to, (const char *)m->p, m->len);
}

static void on_part(svc *s, const svc_msg *m)
{
	if (svc_authz_part(s, m->seg, m->to))
		svc_relay_part(s, m->seg, m->to, NULL, m->p, m->len);
}

/* A chunk of a part over the message limit (sky_partchunk.h): from a
 * board of the plan (the ACL pins part/<board>/ to it), and a well-formed
 * chunk of a part under its own index, or refused before it is relayed. */
static void on_part_chunk(svc *s, const svc_msg *m)
{
	if (m->len == 0 || !svc_authz_part(s, m->seg, m->to))
		return; /* empty: a retained copy cleared */
	uint32_t i;
	sky_chunk c;
	sky_diag d;
	sky_diag_clear(&d);
	if (sky_partchunk_index(m->who, &i) != 0)
		sky_diag_set(&d, SKY_EINVAL, "'%s' is no chunk index", m->who);
	else if (sky_partchunk_check(m->p, m->len, i, &c, &d) == 0) {
		svc_relay_part(s, m->seg, m->to, m->who, m->p, m->len);
		return;
	}
	svc_refused(s, m->seg, m->to, SVC_REFUSE_PART_CHUNK, "part chunk (%s)", d.msg);
}

static void on_cancel(svc *s, const svc_msg *m)
{
	svc_cancel_on_msg(s, m->seg, (const char *)m->p, m->len);
}

static void on_csr(svc *s, const svc_msg *m)
{
	svc_enroll_on_csr(s, m->seg, (const char *)m->p, m->len);
}

static void on_site(svc *s, const svc_msg *m)
{
	svc_links_on_msg(s, m->topic, m->p, m->len, m->now);
}

static void on_ckpt(svc *s, const svc_msg *m)
{
	svc_train_on_ckpt(s, m->seg, m->to, m->p, m->len);
}

static void on_resp(svc *s, const svc_msg *m)
{
	svc_serve_on_resp(s, m->seg, m->to, m->who, m->p, m->len);
}

static void on_ready(svc *s, const svc_msg *m)
{
	svc_serve_on_ready(s, m->seg, m->k, m->who, m->p, m->len);
}

static void on_fedupd(svc *s, const svc_msg *m)
{
	svc_fed_on_update(s, m->seg, m->to, m->p, m->len);
}

static void on_req(svc *s, const svc_msg *m)
{
	svc_serve_on_req(s, m->topic, m->tl, m->p, m->len);
}

/* The first route that matches takes the message. */
static const svc_route k_routes[] = {
	{match_area, "jobs", SKY_TOPIC_SUBMIT, on_submit},
	{match_area, "jobs", SKY_TOPIC_WEIGHTS, on_weights},
	{match_area, "jobs", SKY_TOPIC_CANCEL, on_cancel},
	{match_area, "jobs", NULL, on_ignore},
	{match_area, "board", SKY_TOPIC_SLICE_REQ, on_slice_req},
	{match_area, "board", NULL, on_board},
	{match_area, "job", SKY_TOPIC_PLAN, on_plan},
	{match_job_to, NULL, SKY_TOPIC_METRICS, on_metrics},
	{match_enroll, NULL, SKY_TOPIC_CSR, on_csr},
	{match_prefix, SKY_TOPIC_ROOT "/site/", NULL, on_site},
	{match_job_to, NULL, SKY_TOPIC_CKPT, on_ckpt},
	{match_job_pair, NULL, SKY_TOPIC_RESP, on_resp},
	{match_job_to, NULL, SKY_TOPIC_PART, on_part},
	{match_job_pair, NULL, SKY_TOPIC_PART, on_part_chunk},
	{match_ready, NULL, NULL, on_ready},
	{match_job_to, NULL, SKY_TOPIC_FEDUPD, on_fedupd}, /* federated updates (svc_fed.c) */
	/* requests, and anything else: answered unknown_job if a request */
	{match_any, NULL, NULL, on_req},
};

static void on_msg(void *ctx, const char *topic, size_t tl, const unsigned char *p, size_t len,
		   int retained)
{
	svc *s = ctx;
	/* when it was handed over: a link probe's return is timed then */
	svc_msg m = {.topic = topic, .tl = tl, .p = p, .len = len, .retained = retained,
		     .now = sky_clock_s()};
	if (strlen(topic) != tl)
		return;
	for (size_t i = 0; i < sizeof k_routes / sizeof k_routes[0]; i++) {
		const svc_route *rt = &k_routes[i];
		if (!rt->match(rt, &m))
			continue;
		rt->fn(s, &m);
		return;
	}
}

/* ---- the broker connection ---------------------------------------------------- */

int svc_publish(svc *s, const char *topic, const void *data, size_t len, int qos, int retained,
		sky_diag *d)
{
	if (s->publish)
		return s->publish(s->publish_ctx, topic, data, len, qos, retained, d);
	return sky_mqtt_publish(s->m, topic, data, len, qos, retained, d);
}

static void on_lost(void *ctx, const char *cause)
{
	svc *s = ctx;
	atomic_store(&s->lost, 1);
	SKY_WARN("connection to the broker lost: %s", cause);
}

static const char *const k_subs[] = {
	SKY_TOPIC_ROOT "/board/+/" SKY_TOPIC_STATUS, SKY_TOPIC_ROOT "/board/+/" SKY_TOPIC_HEARTBEAT,
	SKY_TOPIC_ROOT "/board/+/" SKY_TOPIC_CAPS, SKY_TOPIC_ROOT "/board/+/" SKY_TOPIC_PLAN_ACK,
	SKY_TOPIC_SUB_ALL_CSRS, SKY_TOPIC_SUB_ALL_PLANS, SKY_TOPIC_ROOT "/job/+/" SKY_TOPIC_METRICS "/+",
	SKY_TOPIC_SUB_ALL_SUBMITS, SKY_TOPIC_ROOT "/jobs/+/" SKY_TOPIC_WEIGHTS,
	SKY_TOPIC_ROOT "/jobs/+/" SKY_TOPIC_CANCEL,
	/* parts, relayed to each job's owner (svc_relay.c) */
	SKY_TOPIC_ROOT "/job/+/" SKY_TOPIC_PART "/+", SKY_TOPIC_ROOT "/job/+/" SKY_TOPIC_PART "/+/+",
	SKY_TOPIC_ROOT "/board/+/" SKY_TOPIC_SLICE_REQ,
	/* requests, to answer those for jobs that do not serve */
	SKY_TOPIC_ROOT "/job/+/" SKY_TOPIC_REQ "/+/+",
	/* answers and stages' readiness, for serving re-plans */
	SKY_TOPIC_ROOT "/job/+/" SKY_TOPIC_RESP "/+/+",
	SKY_TOPIC_ROOT "/job/+/stage/+/" SKY_TOPIC_READY "/+",
	SKY_TOPIC_ROOT "/job/+/" SKY_TOPIC_CKPT "/+", SKY_TOPIC_ROOT "/site/+/back/" SKY_TOPIC_ECHO,
	/* federated jobs' updates (svc_fed.c) */
	SKY_TOPIC_ROOT "/job/+/" SKY_TOPIC_FEDUPD "/+"};

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
			    .on_msg = on_msg, .on_lost = on_lost, .on_oversize = svc_fleet_on_oversize,
			    .on_retained = svc_fleet_on_retained,
			    /* the broker keeps our subscriptions and queues what
			     * boards and operators send while we are away (one
			     * planner per fleet: the session is its CN's) */
			    .persistent = 1, .ctx = s};
	sky_mqtt *m = NULL;
	atomic_store(&s->lost, 0);
	if ((rc = sky_mqtt_connect(&m, &mo, d)) != 0)
		return rc;
	s->m = m;
	svc_store_connecting(s, 0);
	for (size_t i = 0; i < sizeof k_subs / sizeof k_subs[0]; i++)
		if ((rc = sky_mqtt_subscribe(m, k_subs[i], 1, 5000, d)) != 0)
			return rc;
	svc_store_connecting(s, 1);
	SKY_INFO("connected to %s as %s", s->o->broker, SKY_TOPIC_PLANNER_CN);
	return 0;
}

static void drop(svc *s)
{
	sky_mqtt *m = s->m;
	s->m = NULL;
	sky_mqtt_close(m, 1000);
}

/* Connected again after a loss, or waited a backoff step (1: try again). */
static int reconnect(svc *s, sky_mqtt_backoff *backoff)
{
	drop(s);
	sky_diag cd;
	sky_diag_clear(&cd);
	if (connect_svc(s, &cd) == 0) {
		sky_mqtt_backoff_reset(backoff);
		return 0;
	}
	int ms = sky_mqtt_backoff_next(backoff);
	SKY_WARN("%s; retrying in %d ms", cd.msg, ms);
	drop(s);
	for (int t = 0; t < ms / 50 && !sky_signal_stop_requested(); t++)
		sky_sleep_ms(50);
	return 1;
}

/* ---- start, the loop, stop ---------------------------------------------------- */

/* Everything set up and the saved state read back. Returns 0 or an error in d. */
static int svc_open(svc *s, const sky_service_opts *o, sky_diag *d)
{
	int rc;
	char path[640];
	s->o = o;
	sky_ca_init(&s->ca);
	sky_signer_init(&s->signer);
	sky_registry_init(&s->reg);
	svc_links_init(s);
	svc_enroll_init(s);
	svc_log_init(s);
	sky_nojob_init(&s->nojob);
	sky_servefault_init(&s->sf);
	if (o->state_dir)
		snprintf(s->state_dir, sizeof s->state_dir, "%s", o->state_dir);
	else
		snprintf(s->state_dir, sizeof s->state_dir, "%s/state", o->pki_dir);
	sky_ckpt_init(&s->ckpt, s->state_dir);
	if ((rc = sky_file_mkdirs(s->state_dir, 0700)) != 0)
		return sky_diag_set(d, rc, "cannot create %s", s->state_dir);
	sky_deploy_init(&s->deploy, s->state_dir, o->model_ops, o->slice_chunk_bytes,
			o->slice_pace_ms);
	s->deploy.uploads_per_op = o->uploads_per_op;
	s->plan.train_bytes = o->train_bytes;
	s->deploy.stored_per_op = o->stored_per_op;
	mbedtls_x509_crt_init(&s->planner_crt);
	if ((rc = sky_ca_open(&s->ca, o->pki_dir, d)) != 0 ||
	    (rc = sky_ca_load_signer(&s->signer, o->pki_dir, d)) != 0)
		return rc;
	snprintf(path, sizeof path, "%s/%s", o->pki_dir, SKY_CA_PLANNER_CERT_FILE);
	if ((rc = sky_sign_load_cert(&s->planner_crt, path, d)) != 0 ||
	    (rc = svc_store_restore(s, d)) != 0)
		return rc;
	/* what boards' jobs measured, before any job is planned */
	svc_calib_load(s);
	/* the jobs it followed, with their checkpoints, and those cancelled */
	svc_follow_restore(s);
	svc_relay_restore(s);
	return 0;
}

/* One tick of the loop: boards gone, revocations,
 * republishing, link probes, followed jobs, replays, queued jobs, and the
 * suppressed-lines flush. */
static void svc_tick(svc *s, double now, double gap, int behind)
{
	svc_fleet_tick(s, now, gap, behind);
	svc_store_tick(s, now);
	svc_links_tick(s, now);
	svc_follow_tick(s, now);
	svc_serve_tick(s, now);
	svc_submit_tick(s, now);
	svc_gc_tick(s, now);
	svc_calib_tick(s, now);
	svc_fed_tick(s, now);
	svc_log_flush(s, now);
}

/* Runs until a stop signal. */
static void svc_loop(svc *s)
{
	double last_save = 0, last_tick = 0;
	int behind = 0; /* the last poll ran out of its budget with messages still queued */
	sky_mqtt_backoff backoff; /* 0.5 s doubling to 5 s, jittered */
	sky_mqtt_backoff_init(&backoff, 500, 5000, sky_clock_ns() ^ (uint64_t)(uintptr_t)s);
	sky_notify_ready();
	while (!sky_signal_stop_requested()) {
		sky_notify_watchdog(); /* from this loop only: a wedged loop stops pinging */
		if ((!s->m || atomic_load(&s->lost)) && reconnect(s, &backoff))
			continue;
		double now = sky_clock_s();
		double gap = last_tick > 0 ? now - last_tick : 0;
		last_tick = now;
		svc_tick(s, now, gap, behind);
		int changed = s->reg.changed || s->jobs.changed;
		/* every change within 0.2 s; every 2 s while a backlog waits (two
		 * more fsyncs a tick would slow its reading further) */
		if ((changed && !behind && now - last_save >= 0.2) || now - last_save >= 2.0) {
			svc_store_save_state(s);
			last_save = now;
		}
		/* messages are handled on this thread; tick again after ~100 ms,
		 * also while a backlog of messages waits: each poll hands over
		 * what is queued for at most POLL_BUDGET_MS, so the tick (boards
		 * gone, re-plans, replays, queued jobs) is never starved */
		while (sky_clock_s() - now < 0.1 && !atomic_load(&s->lost) &&
		       !sky_signal_stop_requested()) {
			int sending = sky_deploy_pump(&s->deploy, sky_clock_s(), svc_serve_publish, s);
			double t = sky_clock_s();
			sky_mqtt_poll_for(s->m, sending ? 1 : 5, POLL_BUDGET_MS);
			behind = sky_clock_s() - t >= POLL_BUDGET_MS * 1e-3 && sky_mqtt_queued(s->m);
		}
	}
}

int sky_service_run(const sky_service_opts *o, sky_diag *d)
{
	svc *s = &g_svc;
	memset(s, 0, sizeof *s);
	int rc = svc_open(s, o, d);
	if (rc == 0)
		rc = connect_svc(s, d);
	if (rc == 0 && o->job_file)
		rc = svc_submit_file(s, o->job_file, d);
	if (rc)
		goto exit;
	SKY_INFO("serving: state in %s, epoch %lld", s->state_dir, (long long)svc_store_epoch(s));
	svc_loop(s);
	SKY_INFO("stopping on signal %d", sky_signal_stop_requested());
	svc_store_save_state(s);
	svc_calib_tick(s, sky_clock_s() + 2.0); /* the last folds, if not written yet */
exit:
	drop(s);
	svc_plan_free(s);
	sky_deploy_free(&s->deploy);
	mbedtls_x509_crt_free(&s->planner_crt);
	sky_signer_free(&s->signer);
	sky_ca_free(&s->ca);
	return rc;
}
