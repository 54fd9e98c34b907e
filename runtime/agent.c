/* The board agent's control loop (sky_agent.h): connect and reconnect,
 * heartbeats, the job's network, running the plan held, and the message
 * router. Enrollment, plan acceptance, the planner's commands, the
 * capability report and the persistent counters are in their own files
 * (agent_internal.h). */
#include "agent_internal.h"

#include "sky_clock.h"
#include "sky_file.h"
#include "sky_log.h"
#include "sky_notify.h"
#include "sky_probe.h"
#include "sky_signal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sky_agent_opts_default(sky_agent_opts *o)
{
	memset(o, 0, sizeof *o);
	sky_model_preset("tiny", &o->model);
	o->keepalive_s = 10;
	o->probe_max_s = SKY_PROBE_DEFAULT_MAX_S;
	o->enroll_timeout_s = 30;
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

/* SIGUSR1: <state>/speed (a number, as skyd --speed) is read again and the
 * board computes at that speed from its next op on, a running job
 * included: an emulated board that slows down or speeds up. */
static void reload_speed(agent *a)
{
	char path[1024], buf[64], *end;
	long n = agent_state_path(a->o->state_dir, "speed", path, sizeof path) == 0
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

/* A probe the planner asked for (agent_on_cmd), then the capability
 * report again; with_link: the link probe too. */
static void requested_probe(agent *a, int with_link)
{
	sky_diag pd;
	sky_diag_clear(&pd);
	if (agent_probe(a, &pd) != 0) {
		SKY_ERROR("requested probe failed: %s", pd.msg);
		return;
	}
	if (with_link && !a->o->no_link_probe)
		agent_link_probe(a);
	agent_publish_caps(a);
}

/* Between a running job's frames: a speed reload, and a probe the planner
 * asked for (it saw this stage's times drift); the link probe waits for
 * the job's end, its echoes would queue behind the frames. */
static void job_chores(agent *a)
{
	if (sky_signal_take_reload())
		reload_speed(a);
	if (a->training && atomic_exchange(&a->probe_requested, 0))
		requested_probe(a, 0);
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

sky_transport_net agent_net(agent *a)
{
	sky_transport_net net = {.ctx = a, .publish = net_publish, .poll = net_poll,
				 .stopped = net_stopped, .subscribe = net_subscribe};
	return net;
}

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

/* Runs the training job of the plan we hold (on the main thread). */
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
	if (a->cancelled) {
		/* cancelled (agent_cmd.c): stopped for good, the board is free */
		SKY_WARN("job %s epoch %lld stopped at step %ld: cancelled by the planner",
			 a->plan.job, (long long)a->plan.epoch, a->job->steps_done);
		a->cancelled = 0;
		a->abandon = 0;
		free(a->next_env);
		a->next_env = NULL;
		agent_write_counter(a->o->state_dir, "trained", a->plan.epoch);
		return;
	}
	if (a->abandon) {
		/* a re-plan: the cut step is replayed from the checkpoint under
		 * the new plan (frames of this epoch are dropped by epoch) */
		SKY_WARN("job %s epoch %lld abandoned at step %ld: a newer plan arrived", a->plan.job,
			 (long long)a->plan.epoch, a->job->steps_done);
		agent_take_next_plan(a);
		return;
	}
	if (rc == SKY_ENET && (a->lost || sky_signal_stop_requested())) {
		/* not the job's fault: run it again from its start after a reconnect */
		SKY_WARN("job %s interrupted: %s", a->plan.job, d.msg);
		a->train_pending = !sky_signal_stop_requested();
		return;
	}
	/* ran (or stopped for good): a restart must not run it again */
	agent_write_counter(a->o->state_dir, "trained", a->plan.epoch);
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
	if (a->serve_cancelled) { /* the planner stopped the job (agent_cmd.c) */
		a->serve_cancelled = 0;
		agent_serve_drop(a);
	}
}

void agent_serve_drop(agent *a)
{
	sky_servejob *sj = a->sj;
	if (!sj)
		return;
	/* its ready was retained for stages that subscribe late: cleared, so
	 * nobody takes a stopped stage for a ready one */
	if (a->m && !a->lost && sj->topic_ready[0])
		sj->net.publish(sj->net.ctx, sj->topic_ready, "", 0, 1, 1);
	SKY_INFO("job %s epoch %lld stage %d: serving job let go (%ld batches, %ld requests)",
		 sj->job, (long long)a->plan.epoch, sj->stage, sj->batches, sj->requests);
	sky_servejob_free(sj);
	free(sj);
	a->sj = NULL;
}

/* The checkpoint a resumed plan waits for (load_checkpoint). */
static void on_load(agent *a, const char *topic, const unsigned char *p, size_t len)
{
	sky_diag ld;
	sky_diag_clear(&ld);
	if (len == 0) /* a cleared retained message */
		return;
	if (sky_trainjob_load(a->job, p, len, &ld) == 0)
		a->loaded = 1;
	else
		SKY_WARN("checkpoint on %s refused: %s", topic, ld.msg);
}

/* The router: the running job's messages first, then plans, slices, a
 * checkpoint being loaded, and this board's own topics. */
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
	if (agent_fed_on_msg(a, topic, tl, p, len)) /* federated rounds and models */
		return;
	int is_plan = sky_topic_parse(topic, tl, "job", seg, sizeof seg, leaf, sizeof leaf) == 0 &&
		      strcmp(leaf, SKY_TOPIC_PLAN) == 0;
	if (is_plan && a->serving) {
		agent_plan_while_serving(a, topic, p, len);
		return;
	}
	char sp[700];
	int fr = sky_slicefetch_on_msg(&a->fetch, topic, p, len, sp, sizeof sp);
	if (fr == 2)
		agent_slice_in_place(a, sp);
	if (fr)
		return;
	if (is_plan && a->training) {
		agent_plan_while_training(a, topic, p, len);
		return;
	}
	if (is_plan) {
		sky_mutex_lock(&a->lock);
		agent_take_plan(a, topic, (const char *)p, len, 0);
		sky_mutex_unlock(&a->lock);
		return;
	}
	if (a->loading && !strcmp(topic, a->load_topic)) {
		on_load(a, topic, p, len);
		return;
	}
	if (sky_topic_parse(topic, tl, "board", seg, sizeof seg, leaf, sizeof leaf) != 0 ||
	    strcmp(seg, a->idn.id) != 0)
		return;
	if (strcmp(leaf, SKY_TOPIC_ECHO) == 0)
		agent_on_echo(a, p, len);
	else if (strcmp(leaf, SKY_TOPIC_CMD) == 0)
		agent_on_cmd(a, p, len);
}

static void on_lost(void *ctx, const char *cause)
{
	agent *a = ctx;
	atomic_store(&a->lost, 1);
	SKY_WARN("connection to the broker lost: %s", cause);
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
	if ((rc = agent_write_counter(a->o->state_dir, "session", session)) != 0)
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
		agent_link_probe(a);
	if ((rc = agent_publish_caps(a)) != 0)
		return sky_diag_set(d, rc, "capability report could not be queued");
	if ((rc = agent_fed_subscribe(a, d)) != 0) /* federated jobs (agent_fed.c) */
		return rc;
	/* plans last: the retained ones arrive now, and the caps are already out */
	if ((rc = sky_mqtt_subscribe(m, SKY_TOPIC_SUB_ALL_PLANS, 1, 5000, d)) != 0)
		return rc;
	sky_mutex_lock(&a->lock);
	agent_publish_ack(a); /* the planner may have restarted: say what we hold */
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

_Static_assert(sizeof ((sky_agent_opts *)0)->datasets / sizeof(char *) == SKY_CAPS_MAX_DATASETS,
	       "sky_agent_opts.datasets holds SKY_CAPS_MAX_DATASETS");

/* Identity, profile, boot id, probe and the saved plan: all a board needs
 * before its first connect. Returns 0 or the error (d says it). */
static int agent_start(agent *a, const sky_agent_opts *o, sky_diag *d)
{
	int rc;
	if ((rc = sky_identity_load(&a->idn, o->state_dir, d)) != 0)
		return rc;
	sky_slicefetch_init(&a->fetch, o->state_dir, a->idn.id);
	if (o->id && strcmp(o->id, a->idn.id) != 0)
		return sky_diag_set(d, SKY_EAUTH, "--id %s but the certificate in %s is for %s", o->id,
				    o->state_dir, a->idn.id);
	if ((rc = sky_profile_load(&a->prof, o->profile_path, d)) != 0)
		return rc;
	if (o->speed > 0 && (rc = sky_profile_set_cores(&a->prof, o->speed, d)) != 0)
		return rc;
	if (o->site) {
		snprintf(a->prof.site, sizeof a->prof.site, "%s", o->site);
		sky_site_norm(a->prof.site);
	}
	sky_profile_apply_threads(&a->prof);
	sky_boardsets_init(&a->sets);
	for (int i = 0; i < o->n_datasets; i++)
		if ((rc = sky_boardsets_add_arg(&a->sets, o->datasets[i], d)) != 0)
			return rc;
	if ((rc = sky_boardsets_scan(&a->sets, o->state_dir, d)) != 0)
		return rc;
	for (int i = 0; i < a->sets.n; i++)
		SKY_INFO("data set %s: %lld rows, %d labels, seq %d, sha256 %.12s..., tokenizer %08x",
			 a->sets.s[i].info.name, (long long)a->sets.s[i].info.rows,
			 a->sets.s[i].info.labels, a->sets.s[i].info.seq, a->sets.s[i].info.sha256,
			 (unsigned)a->sets.s[i].info.tokenizer);
	snprintf(a->caps.id, sizeof a->caps.id, "%s", a->idn.id);
	a->caps.keepalive_s = o->keepalive_s;
	a->probe_model = o->model;
	if ((rc = agent_start_boot(a, d)) != 0)
		return rc;
	if ((rc = agent_probe(a, d)) != 0)
		return rc;
	agent_load_saved_plan(a);
	return 0;
}

/* Connects if there is no connection (or it was lost). Returns 0 when
 * connected, 1 when the connect failed and the backoff wait is over. */
static int ensure_connected(agent *a, sky_mqtt_backoff *backoff)
{
	if (a->m && !atomic_load(&a->lost))
		return 0;
	if (a->m) {
		disconnect(a, 0);
		sky_sleep_ms(200);
	}
	sky_diag cd;
	sky_diag_clear(&cd);
	if (connect_once(a, &cd) != 0) {
		int ms = sky_mqtt_backoff_next(backoff);
		SKY_WARN("%s; retrying in %d ms", cd.msg, ms);
		disconnect(a, 0);
		for (int t = 0; t < ms / 50 && !sky_signal_stop_requested(); t++)
			sky_sleep_ms(50);
		return 1;
	}
	sky_mqtt_backoff_reset(backoff);
	a->next_hb = 0;
	return 0;
}

/* One turn of the loop while connected: a speed reload, a probe the
 * planner asked for, the heartbeat, the slice download, the plan held
 * (trained or served), a plan that came while serving, and the messages. */
static void loop_once(agent *a)
{
	if (sky_signal_take_reload())
		reload_speed(a);
	if (atomic_exchange(&a->probe_requested, 0))
		requested_probe(a, 1);
	heartbeat(a);
	if (a->m && !a->lost) {
		sky_transport_net fnet = agent_net(a);
		sky_slicefetch_tick(&a->fetch, sky_clock_s(), &fnet);
	}
	if (a->train_pending && a->job && !a->job->weights_pending && a->m && !a->lost)
		run_job(a);
	if (a->sj && a->m && !a->lost && !a->pending_env)
		run_serve(a);
	agent_fed_tick(a); /* a federated round whose model is in */
	if (a->pending_env) {
		sky_mutex_lock(&a->lock);
		agent_take_plan(a, a->pending_topic, a->pending_env, a->pending_len, 0);
		sky_mutex_unlock(&a->lock);
		free(a->pending_env);
		a->pending_env = NULL;
	}
	/* messages are handled here, on this thread (sky_mqtt_poll) */
	sky_mqtt_poll(a->m, 20);
}

int sky_agent_run(const sky_agent_opts *o, sky_diag *d)
{
	static agent a; /* big (two plans); one agent per process */
	int rc;
	memset(&a, 0, sizeof a);
	a.o = o;
	sky_mutex_init(&a.lock);
	sky_identity_init(&a.idn);
	if ((rc = agent_start(&a, o, d)) != 0)
		goto exit;

	/* 0.5 s doubling to 5 s, jittered: a fleet that lost its broker does
	 * not come back in one burst */
	sky_mqtt_backoff backoff;
	sky_mqtt_backoff_init(&backoff, 500, 5000, sky_clock_ns() ^ (uint64_t)(uintptr_t)&a);
	sky_notify_ready(); /* identity, profile and probe are in hand */
	while (!sky_signal_stop_requested()) {
		sky_notify_watchdog(); /* from this thread only (here and between a job's frames): a wedged loop stops pinging */
		if (ensure_connected(&a, &backoff) != 0)
			continue;
		loop_once(&a);
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
	agent_fed_free(&a);
	free(a.pending_env);
	free(a.plan_env);
	free(a.next_env);
	sky_identity_free(&a.idn);
	sky_mutex_free(&a.lock);
	return rc;
}
