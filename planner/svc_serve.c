/* Serving jobs (svc_internal.h): their clients' answers (the first of a
 * re-plan's epoch closes its time lost), the unanswered requests replayed
 * after a re-plan (sky_servefault.h), unknown_job answers for jobs that do
 * not serve (sky_nojob.h), slices asked for by boards, displaced jobs, and
 * a serving job's restore at start. */
#include "svc_internal.h"

#include "sky_clock.h"
#include "sky_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int svc_serve_publish(void *ctx, const char *topic, const void *data, size_t len)
{
	svc *s = ctx;
	return s->m ? svc_publish(s, topic, data, len, 1, 0, NULL) : SKY_ENET;
}

/* A board's slice requests: a few in a burst (a fetch, its retries), then
 * one a second; each past that is refused before it is looked at further. */
#define SLICE_REQ_BURST 16
#define SLICE_REQ_PER_S 1.0

/* Board id asks for its slice: sent if it is the one the job's newest plan
 * (as saved, signed) gives that board. Who asks is checked first, in
 * memory: a revoked board, a board over its rate, or one that holds no
 * stage of that serving job is refused (counted, throttled log) before
 * any file is read or signature checked. */
void svc_serve_on_slice_req(svc *s, const char *id, const char *p, size_t len)
{
	sky_slice_req r;
	sky_diag d;
	sky_diag_clear(&d);
	if (sky_slice_req_decode(p, len, &r, &d) != 0) {
		svc_warn(s, SVC_LOG_REQ, "slice request from %s ignored: %s", id, d.msg);
		return;
	}
	if (svc_authz_revoked(s, id)) {
		svc_refused(s, r.job, id, SVC_REFUSE_REVOKED, "slice request");
		return;
	}
	if (!s->serve.slice_rate_on) {
		sky_keyed_init(&s->serve.slice_rate, SLICE_REQ_BURST, SLICE_REQ_PER_S);
		s->serve.slice_rate_on = 1;
	}
	if (!sky_keyed_take(&s->serve.slice_rate, id, sky_clock_s())) {
		svc_refused(s, r.job, id, SVC_REFUSE_SLICE_RATE, "slice request");
		return;
	}
	run_job *rj = svc_follow_find(s, r.job);
	int k = svc_authz_stage(s, r.job, id, -1, NULL);
	/* serving jobs, and fine-tuning jobs starting from a checkpoint, give
	 * their stages slices */
	if (k < 0 || (rj && !rj->job.req.infer && !rj->job.req.hf.init[0])) {
		svc_refused(s, r.job, id, SVC_REFUSE_SLICE, "slice request");
		return;
	}
	const sky_plan_slice *want = NULL;
	const sky_planmsg *m;
	if (svc_store_load(s, r.job, &m, NULL) > 0) {
		k = sky_planmsg_find(m, id);
		if (k >= 0 && (m->infer.on || (m->hf.on && m->hf.init)))
			want = &m->stages[k].slice;
	}
	if (sky_deploy_on_slice_req(&s->deploy, id, &r, want, sky_clock_s(), &d) != 0)
		SKY_WARN("slice request from %s refused: %s", id, d.msg);
}

int svc_serve_sf_boards(svc *s, const sky_planmsg *p)
{
	const char *b[SKY_SF_MAX_STAGES];
	if (p->n_stages < 1 || p->n_stages > SKY_SF_MAX_STAGES)
		return SKY_ERANGE;
	for (int k = 0; k < p->n_stages; k++)
		b[k] = p->stages[k].board;
	return sky_servefault_boards(&s->sf, p->job, b, p->n_stages);
}

int svc_serve_parse_ready(const char *topic, char *job, size_t cap, int *k, char *sender,
			  size_t scap)
{
	sky_topic_stage_msg m;
	if (sky_topic_parse_stage(topic, strlen(topic), &m) != 0 || m.site[0] ||
	    strcmp(m.leaf, SKY_TOPIC_READY) != 0 || m.stage >= SKY_SF_MAX_STAGES ||
	    strlen(m.job) >= cap || strlen(m.sender) >= scap)
		return SKY_EINVAL;
	snprintf(job, cap, "%s", m.job);
	snprintf(sender, scap, "%s", m.sender);
	*k = m.stage;
	return 0;
}

void svc_serve_on_ready(svc *s, const char *job, int k, const char *sender,
			const unsigned char *p, size_t len)
{
	if (svc_authz_revoked(s, sender)) {
		svc_refused(s, job, sender, SVC_REFUSE_REVOKED, "ready for stage %d", k);
		return;
	}
	if (sky_servefault_on_ready(&s->sf, job, k, sender, p, len) == SKY_EAUTH)
		svc_refused(s, job, sender, SVC_REFUSE_READY, "ready for stage %d", k);
}

/* A tracked request let go without an answer (sky_servefault.h). */
static void sf_dropped(void *ctx, const sky_sf_job *j, const sky_sf_req *r, sky_sf_reason why)
{
	svc *s = ctx;
	svc_warn(s, SVC_LOG_SF,
		 "job %s: request %s of %s dropped from the replay table unanswered (%s; %ld "
		 "evicted, %ld expired so far)",
		 j->job, r->id, r->client, sky_servefault_reason_name(why), j->dropped[SKY_SF_EVICTED],
		 j->dropped[SKY_SF_EXPIRED]);
}

static int sf_publish(void *ctx, const char *topic, const void *data, size_t len)
{
	svc *s = ctx;
	return s->m && !atomic_load(&s->lost) ? svc_publish(s, topic, data, len, 1, 0, NULL)
					      : SKY_ENET;
}

/* An answer to a client of a serving job (the planner's own refusals
 * too): the request is answered; the first answer of a re-plan's epoch
 * closes its time lost. */
void svc_serve_on_resp(svc *s, const char *job, const char *client, const char *sender,
		       const unsigned char *p, size_t len)
{
	double lost_s = 0;
	if (strcmp(sender, SKY_TOPIC_PLANNER_CN) != 0 && svc_authz_revoked(s, sender)) {
		svc_refused(s, job, sender, SVC_REFUSE_REVOKED, "answer to %s", client);
		return;
	}
	int rc = sky_servefault_on_resp(&s->sf, job, client, sender, p, len, sky_clock_s(), &lost_s);
	if (rc == SKY_EAUTH)
		svc_refused(s, job, sender, SVC_REFUSE_ANSWER, "answer to %s", client);
	if (rc != 1)
		return;
	const sky_sf_job *j = sky_servefault_job(&s->sf, job);
	run_job *r = svc_follow_find(s, job);
	if (r)
		svc_replan_closed(r);
	sky_jobstat_replan_lost(&s->jobs, job, lost_s);
	char fields[200];
	snprintf(fields, sizeof fields,
		 "\"event\":\"answered\",\"epoch\":%lld,\"lost_s\":%.3f,\"replayed\":%ld",
		 (long long)(j ? j->epoch : 0), lost_s, j ? j->replayed_epoch : 0);
	sky_ckpt_log(&s->ckpt, job, fields);
	SKY_INFO("job %s epoch %lld answers again: %.3f s after the fault", job,
		 (long long)(j ? j->epoch : 0), lost_s);
}

/* A request on sky/v1/job/<job>/req/<client>: answered "unknown_job" when
 * the job does not serve (sky_nojob.h). */
static void answer_unknown(svc *s, const char *topic, size_t tl, const char *p, size_t len)
{
	char rtopic[SKY_TOPIC_BUF];
	int limited = 0;
	sky_diag why;
	sky_diag_clear(&why);
	int n = sky_nojob_on_request(&s->nojob, topic, tl, p, len, sky_clock_s(), rtopic,
				     sizeof rtopic, s->serve.req_resp, sizeof s->serve.req_resp,
				     &limited, &why);
	if (n > 0)
		svc_publish(s, rtopic, s->serve.req_resp, (size_t)n, 1, 0, NULL);
	if (n > 0 || limited)
		svc_warn(s, SVC_LOG_REQ, "%s", why.msg);
}

void svc_serve_on_req(svc *s, const char *topic, size_t tl, const unsigned char *p, size_t len)
{
	char job[SKY_TOPIC_SEGMENT_MAX + 1], to[SKY_TOPIC_SEGMENT_MAX + 1],
		client[SKY_TOPIC_SEGMENT_MAX + 1];
	if (sky_topic_parse_job_pair(topic, tl, SKY_TOPIC_REQ, job, sizeof job, to, sizeof to,
				     client, sizeof client) == 0 &&
	    sky_servefault_on_req(&s->sf, job, client, p, len, sky_clock_s(), sf_dropped, s) < 0)
		svc_warn(s, SVC_LOG_SF,
			 "job %s: a request of %s is %zu bytes, over the %u a "
			 "replay keeps: not tracked (a fault now would lose it)",
			 job, client, len, SKY_SF_MAX_REQ_BYTES);
	answer_unknown(s, topic, tl, (const char *)p, len);
}

/* Replays what is due to serving jobs' new first stages, drops requests
 * unanswered too long, and notes a finished replay. */
void svc_serve_tick(svc *s, double now)
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

int svc_serve_displaced(const svc *s, const run_job *r)
{
	for (int k = 0; k < r->n_stages; k++) {
		const sky_reg_board *b = sky_registry_find((sky_registry *)&s->reg, r->board[k]);
		if (!b || !b->job[0] || !strcmp(b->job, r->job.req.job))
			return 0;
	}
	return r->n_stages > 0;
}

/* js's plan (m, n bytes as env) newer than the state file: js takes its
 * epoch, stages and slices. */
static void adopt_newer(sky_jobstate *js, const sky_planmsg *m, const char *hex)
{
	SKY_WARN("job %s: its saved plan (epoch %lld) is newer than its state file's "
		 "(epoch %lld); following the plan",
		 js->req.job, (long long)m->epoch, (long long)js->epoch);
	js->epoch = m->epoch;
	js->generation++;
	js->paused = 0;
	js->n_stages = m->n_stages;
	memcpy(js->plan_sha256, hex, sizeof js->plan_sha256);
	for (int k = 0; k < js->n_stages; k++) {
		const sky_plan_stage *st = &m->stages[k];
		snprintf(js->board[k], sizeof js->board[k], "%s", st->board);
		js->first[k] = st->first;
		js->last[k] = st->last;
		snprintf(js->slice[k], sizeof js->slice[k], "%s", st->slice.sha256);
		js->slice_bytes[k] = st->slice.bytes;
	}
}

/* A serving job's signed plan (<state>/plans/<job>.env) against its state
 * file: it must verify, serve and hash to the file's plan_sha256 with the
 * same stages and slices; or be newer (a restart between publishing a
 * re-plan and saving it: adopt_newer). Returns 0 (*plan the plan) or an
 * error with d saying what is wrong. */
static int check_plan(svc *s, sky_jobstate *js, const sky_planmsg **plan, sky_diag *d)
{
	char path[700], hex[65];
	unsigned char sha[32];
	const sky_planmsg *m;
	const char *env;
	long n = svc_store_load(s, js->req.job, &m, &env);
	svc_store_plan_file(s, js->req.job, path, sizeof path);
	if (n < 0)
		return sky_diag_set(d, (int)n, "its saved plan %s is unusable (%s)", path,
				    n == SKY_ENOTFOUND ? "missing" : sky_strerror((int)n));
	if (!m->infer.on || m->epoch < js->epoch || m->n_stages > RUN_MAX_STAGES)
		return sky_diag_set(d, SKY_EFORMAT,
				    "its saved plan %s (epoch %lld, %d stages) is %s", path,
				    (long long)m->epoch, m->n_stages,
				    !m->infer.on ? "not a serving plan"
				    : m->epoch < js->epoch ? "older than the state file's"
							   : "too many stages to follow");
	sky_sha256(env, (size_t)n, sha);
	sky_sha256_hex(sha, hex);
	if (m->epoch > js->epoch)
		adopt_newer(js, m, hex);
	if (strcmp(hex, js->plan_sha256) != 0)
		return sky_diag_set(d, SKY_EAUTH,
				    "its saved plan %s hashes to %.16s.., not the %.16s.. its state "
				    "file names",
				    path, hex, js->plan_sha256);
	int same = m->n_stages == js->n_stages;
	for (int k = 0; same && k < js->n_stages; k++) {
		const sky_plan_stage *st = &m->stages[k];
		same = !strcmp(st->board, js->board[k]) && st->first == js->first[k] &&
		       st->last == js->last[k] && !strcmp(st->slice.sha256, js->slice[k]) &&
		       st->slice.bytes == js->slice_bytes[k];
	}
	if (!same)
		return sky_diag_set(d, SKY_EFORMAT,
				    "its saved plan %s has other stages or slices than its state file",
				    path);
	*plan = m;
	return 0;
}

/* The model and every slice must hash to their names; a slice that does
 * not is logged, removed and cut again from the model, which must give
 * the same hash. Returns 0 or an error in d. */
static int check_files(svc *s, const sky_jobstate *js, sky_diag *d)
{
	const char *job = js->req.job;
	char path[700];
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

/* A serving job checked against its plan and files followed again: its
 * requests tracked for replays from now on, and known to be served (never
 * answered unknown_job). */
int svc_serve_restore(svc *s, sky_jobstate *js, const char *path)
{
	const char *job = js->req.job;
	const sky_planmsg *m = NULL;
	sky_diag d;
	sky_diag_clear(&d);
	if (check_plan(s, js, &m, &d) != 0 || check_files(s, js, &d) != 0) {
		SKY_ERROR("serving job %s (%s): %s; that job is not followed", job, path, d.msg);
		return 0;
	}
	run_job *r = svc_follow_from_state(s, js);
	if (!r) {
		SKY_ERROR("job %s: already following %d jobs; %s not restored", job, MAX_RUNNING, path);
		return 0;
	}
	if (sky_servefault_follow(&s->sf, job, r->epoch, r->n_stages, m->infer.queue, 0, 0) != 0 ||
	    svc_serve_sf_boards(s, m) != 0)
		SKY_WARN("job %s: already following %d serving jobs; requests in flight at a fault "
			 "are not replayed",
			 job, SKY_SF_MAX_JOBS);
	sky_nojob_note(&s->nojob, job, SKY_NOJOB_SERVING);
	svc_follow_add(s);
	svc_follow_save(s, r); /* the plan may have been newer than the file */
	sky_jobstate_replans(s->state_dir, job, &s->jobs);
	if (r->replan.paused)
		sky_jobstat_set_paused(&s->jobs, job, 1);
	SKY_INFO("job %s: serving followed again after a restart: epoch %lld, generation %d, %d "
		 "stages, its plan, model and slices verified%s",
		 job, (long long)r->epoch, r->generation, r->n_stages, r->replan.paused ? ", paused" : "");
	return 0;
}
