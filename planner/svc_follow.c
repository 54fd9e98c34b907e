/* The jobs followed for re-plans (svc_internal.h): a training job with
 * checkpoints or a serving job that re-plans, from its first plan until it
 * is done; kept in <state>/jobs/<job>.run.json (sky_jobstate.h) so a
 * restarted planner follows it again. Every tick: a done job is let go, a
 * board of its plan gone offline re-plans it at once, a paused one tries
 * again, and a training job's own checks run (svc_train.c). */
#include "svc_internal.h"

#include "sky_clock.h"
#include "sky_owner.h"

#include <stdio.h>
#include <string.h>

/* How long a job followed again after a restart waits to hear from its
 * boards (their retained status comes right after the subscription) before
 * one it has not heard from counts as offline. */
#define RESTORE_GRACE_S 10.0

run_job *svc_follow_find(svc *s, const char *job)
{
	for (int i = 0; i < s->follow.n_run; i++)
		if (!strcmp(s->follow.run[i].job.req.job, job))
			return &s->follow.run[i];
	return NULL;
}

int svc_follow_drop(svc *s, const char *job)
{
	run_job *r = svc_follow_find(s, job);
	if (!r)
		return 0;
	/* as a done job is let go (svc_follow_tick): no more re-plans or replays */
	sky_jobstate_remove(s->state_dir, job);
	*r = s->follow.run[--s->follow.n_run];
	return 1;
}

int svc_follow_any_running(const svc *s)
{
	int running = 0;
	for (int i = 0; i < s->follow.n_run; i++)
		running |= !s->follow.run[i].replan.paused;
	return running;
}

/* Keeps what following r needs in <state>/jobs/<job>.run.json, so a
 * restarted planner goes on following it. */
void svc_follow_save(svc *s, const run_job *r)
{
	sky_jobstate *js = &s->follow.js;
	sky_diag d;
	sky_diag_clear(&d);
	memset(js, 0, sizeof *js);
	js->req = r->job.req;
	js->epoch = r->epoch;
	js->generation = r->generation;
	js->predicted_s = r->predicted_s > 0 ? r->predicted_s : 0;
	js->paused = r->replan.paused;
	snprintf(js->pause_why, sizeof js->pause_why, "%s", r->replan.pause_why);
	js->n_stages = r->n_stages;
	for (int k = 0; k < r->n_stages; k++) {
		memcpy(js->board[k], r->board[k], sizeof js->board[k]);
		js->first[k] = r->first[k];
		js->last[k] = r->last[k];
		memcpy(js->slice[k], r->slice[k].sha256, sizeof js->slice[k]);
		js->slice_bytes[k] = r->slice[k].bytes;
		js->share0[k] = r->share0[k];
	}
	js->micro_batch = r->micro_batch;
	js->micro_batches = r->micro_batches;
	js->exact_sum = r->exact_sum;
	js->n_rep = r->n_rep;
	for (int i = 0; i < r->n_rep; i++) {
		memcpy(js->rep_board[i], r->rep_board[i], sizeof js->rep_board[i]);
		js->rep_stage[i] = r->rep_stage[i];
		js->rep_share[i] = r->rep_share[i];
	}
	memcpy(js->plan_sha256, r->plan_sha, sizeof js->plan_sha256);
	if (sky_jobstate_save(s->state_dir, js, &d) != 0)
		SKY_ERROR("job %s: its state is not saved (%s); a planner restart would stop "
			  "following it",
			  r->job.req.job, d.msg);
}

/* The run slot for p's job: its own (a re-plan), or a new one from rq (the
 * first plan). NULL when it cannot be followed (logged). */
static run_job *slot_for(svc *s, const svc_plan_req *rq, const sky_planmsg *p)
{
	run_job *r = svc_follow_find(s, p->job);
	if (p->n_stages > RUN_MAX_STAGES) {
		SKY_WARN("job %s: %d stages, more than the %d a re-plan follows; no re-plans", p->job,
			 p->n_stages, RUN_MAX_STAGES);
		return NULL;
	}
	if (r)
		return r;
	if (s->follow.n_run == MAX_RUNNING) {
		SKY_WARN("job %s: already following %d jobs; no re-plans for it", p->job, MAX_RUNNING);
		return NULL;
	}
	r = &s->follow.run[s->follow.n_run++];
	memset(r, 0, sizeof *r);
	r->job = *rq->job;
	if (rq->notes)
		r->notes = *rq->notes;
	return r;
}

/* p's stage replicas into r: who runs which stage and how many of its
 * micro-batches (the route's counts), and the plan's micro-batching when
 * it is not the job's own. */
static void follow_replicas(run_job *r, const sky_planmsg *p)
{
	r->n_rep = 0;
	r->micro_batch = r->micro_batches = 0;
	r->exact_sum = p->train.exact_sum;
	if (p->n_reps > 0 || p->train.exact_sum || p->shape.batch != r->job.model.batch ||
	    p->micro_batches != r->job.req.micro_batches) {
		r->micro_batch = p->shape.batch;
		r->micro_batches = p->micro_batches;
	}
	for (int k = 0; k < p->n_stages; k++) {
		int n = sky_planmsg_n_replicas(p, k), share[SKY_HPLAN_MAX_REPS + 1] = {0};
		r->share0[k] = 0;
		if (n < 2)
			continue;
		for (int mb = 0; mb < p->micro_batches; mb++) {
			int q = sky_planmsg_route(p, k, mb);
			if (q >= 0 && q < n && q <= SKY_HPLAN_MAX_REPS)
				share[q]++;
		}
		r->share0[k] = share[0];
		for (int q = 1; q < n && r->n_rep < RUN_MAX_REPS; q++) {
			snprintf(r->rep_board[r->n_rep], sizeof r->rep_board[0], "%s",
				 sky_planmsg_replica_board(p, k, q));
			r->rep_stage[r->n_rep] = k;
			r->rep_share[r->n_rep++] = q <= SKY_HPLAN_MAX_REPS ? share[q] : 0;
		}
	}
}

int svc_follow_boards(const run_job *r)
{
	return r->n_stages + r->n_rep;
}

const char *svc_follow_board(const run_job *r, int i, int *stage)
{
	if (i < r->n_stages) {
		if (stage)
			*stage = i;
		return r->board[i];
	}
	i -= r->n_stages;
	if (i < 0 || i >= r->n_rep)
		return NULL;
	if (stage)
		*stage = r->rep_stage[i];
	return r->rep_board[i];
}

/* Follows p's job (the first plan adds it, a re-plan updates it), tells the
 * store or the replay table its epoch, and keeps it in the job's state
 * file. */
void svc_follow_plan(svc *s, const svc_plan_req *rq, const sky_planmsg *p, const char *env,
		     size_t elen, double predicted_s)
{
	run_job *r = slot_for(s, rq, p);
	if (!r)
		return;
	r->epoch = p->epoch;
	r->generation = p->infer.on ? (rq->generation > 0 ? rq->generation : 1)
				    : p->train.generation;
	r->n_stages = p->n_stages;
	for (int k = 0; k < p->n_stages; k++) {
		snprintf(r->board[k], sizeof r->board[k], "%s", p->stages[k].board);
		r->first[k] = p->stages[k].first;
		r->last[k] = p->stages[k].last;
		r->slice[k] = p->stages[k].slice;
	}
	follow_replicas(r, p);
	svc_train_new_plan(r, p->n_stages);
	unsigned char sha[32];
	sky_sha256(env, elen, sha);
	sky_sha256_hex(sha, r->plan_sha);
	r->predicted_s = predicted_s;
	r->plan_s = sky_clock_s();
	svc_replan_resumed(r);
	r->restored_until = 0;
	if (p->infer.on) {
		/* serving: its unanswered requests are replayed after a re-plan */
		if (sky_servefault_follow(&s->sf, p->job, p->epoch, p->n_stages, p->infer.queue,
					  rq->replan, r->replan.fault_s) != 0 ||
		    svc_serve_sf_boards(s, p) != 0)
			SKY_WARN("job %s: already following %d serving jobs; requests in flight at "
				 "a fault are not replayed",
				 p->job, SKY_SF_MAX_JOBS);
		svc_follow_save(s, r);
		return;
	}
	if (!sky_ckpt_begin(&s->ckpt, p->job, p->epoch, 2 * p->layers + 2))
		SKY_WARN("job %s: the checkpoint store is full", p->job);
	else /* the steps parts may be of (a step out of it is refused unhashed) */
		sky_ckpt_schedule(&s->ckpt, p->job, p->train.steps, p->train.ckpt_every);
	svc_follow_save(s, r);
}

run_job *svc_follow_from_state(svc *s, const sky_jobstate *js)
{
	if (s->follow.n_run == MAX_RUNNING)
		return NULL;
	run_job *r = &s->follow.run[s->follow.n_run];
	double now = sky_clock_s();
	memset(r, 0, sizeof *r);
	svc_job_from_req(&r->job, &js->req);
	if (sky_owner_get(s->state_dir, js->req.job, r->job.op, sizeof r->job.op) != 0)
		r->job.op[0] = '\0'; /* a job from before owners were kept */
	r->epoch = js->epoch;
	r->generation = js->generation;
	r->n_stages = js->n_stages;
	for (int k = 0; k < js->n_stages; k++) {
		memcpy(r->board[k], js->board[k], sizeof r->board[k]);
		r->first[k] = js->first[k];
		r->last[k] = js->last[k];
		memcpy(r->slice[k].sha256, js->slice[k], sizeof r->slice[k].sha256);
		r->slice[k].bytes = js->slice_bytes[k];
		r->share0[k] = js->share0[k];
	}
	r->micro_batch = js->micro_batch;
	r->micro_batches = js->micro_batches;
	r->exact_sum = js->exact_sum;
	r->n_rep = js->n_rep < RUN_MAX_REPS ? js->n_rep : RUN_MAX_REPS;
	for (int i = 0; i < r->n_rep; i++) {
		memcpy(r->rep_board[i], js->rep_board[i], sizeof r->rep_board[i]);
		r->rep_stage[i] = js->rep_stage[i];
		r->rep_share[i] = js->rep_share[i];
	}
	memcpy(r->plan_sha, js->plan_sha256, sizeof r->plan_sha);
	r->predicted_s = js->predicted_s;
	svc_replan_restore(r, js->paused, js->pause_why, now + 1.0);
	r->plan_s = now;
	r->restored_at = now;
	r->restored_until = now + RESTORE_GRACE_S;
	return r;
}

void svc_follow_add(svc *s)
{
	s->follow.n_run++;
}

void svc_follow_predicted(run_job *r, double step_s)
{
	r->predicted_s = step_s;
}

/* 1 when r is no longer followed: done (every stage finished under its
 * epoch), or a serving job whose boards all serve another job now. */
static int let_go(svc *s, const run_job *r)
{
	const char *job = r->job.req.job;
	int done = 0;
	for (int k = 0; k < s->jobs.n; k++)
		done += !strcmp(s->jobs.row[k].job, job) && s->jobs.row[k].epoch == r->epoch &&
			s->jobs.row[k].done;
	/* every board of the plan (a stage's replicas each report done) */
	if (done >= svc_follow_boards(r) && !r->replan.paused) {
		char fields[160];
		snprintf(fields, sizeof fields, "\"event\":\"done\",\"epoch\":%lld,\"generation\":%d",
			 (long long)r->epoch, r->generation);
		sky_ckpt_log(&s->ckpt, job, fields);
		SKY_INFO("job %s done under generation %d (epoch %lld)", job, r->generation,
			 (long long)r->epoch);
		return 1;
	}
	if (r->job.req.infer && svc_serve_displaced(s, r)) {
		/* a board serves one job at a time: re-planning this one now
		 * would take the boards from the job that replaced it */
		SKY_INFO("job %s: every board of its plan (epoch %lld) now serves another job; "
			 "no longer followed",
			 job, (long long)r->epoch);
		return 1;
	}
	return 0;
}

/* 1 while r, just restored, waits for a board of its plan to be heard
 * from: the broker hands over each board's retained status; one not heard
 * from yet is not known to be offline. */
static int restore_wait(svc *s, run_job *r, double now)
{
	if (r->restored_until <= 0)
		return 0;
	int unheard = 0;
	for (int i = 0; i < svc_follow_boards(r); i++) {
		const sky_reg_board *b = sky_registry_find(&s->reg, svc_follow_board(r, i, NULL));
		unheard += !b || b->last_heard < r->restored_at;
	}
	if (unheard && now < r->restored_until)
		return 1;
	r->restored_until = 0;
	return 0;
}

/* A board of r's plan offline or revoked: re-planned over the boards left
 * at once. Returns 1 when it was. */
static int replan_if_gone(svc *s, run_job *r, double now)
{
	char why[160] = "";
	for (int i = 0; i < svc_follow_boards(r) && !why[0]; i++) {
		int k = 0;
		const char *id = svc_follow_board(r, i, &k);
		const sky_reg_board *b = sky_registry_find(&s->reg, id);
		if (!b || b->state != SKY_REG_ONLINE)
			snprintf(why, sizeof why, "board %s (stage %d%s) %s", id, k,
				 i >= r->n_stages ? ", a replica" : "",
				 b && b->state == SKY_REG_REVOKED ? "revoked" : "offline");
	}
	if (!why[0])
		return 0;
	svc_replan_fault(r, now);
	SKY_WARN("job %s epoch %lld: %s; re-planning over the boards left", r->job.req.job,
		 (long long)r->epoch, why);
	svc_replan(s, r, why, now);
	return 1;
}

void svc_follow_tick(svc *s, double now)
{
	for (int i = 0; i < s->follow.n_run;) {
		run_job *r = &s->follow.run[i];
		if (let_go(s, r)) {
			sky_jobstate_remove(s->state_dir, r->job.req.job);
			*r = s->follow.run[--s->follow.n_run];
			continue;
		}
		i++;
		if (r->replan.paused) {
			if (now >= r->replan.retry_s)
				svc_replan(s, r, r->replan.pause_why, now);
			continue;
		}
		if (restore_wait(s, r, now) || replan_if_gone(s, r, now))
			continue;
		if (!r->job.req.infer) /* serving re-plans on faults only (no drift, no gain) */
			svc_train_tick(s, r, now);
	}
}

/* One <state>/jobs/<job>.run.json at start: the job followed again, from
 * its newest plan, every file verified again (svc_train.c, svc_serve.c).
 * A damaged or missing file is an error naming it; the planner goes on
 * without what it could not read. */
static int restore_run(void *ctx, const char *path)
{
	svc *s = ctx;
	sky_jobstate *js = &s->follow.loaded;
	sky_diag d;
	sky_diag_clear(&d);
	if (sky_jobstate_load(path, js, &d) != 0) {
		SKY_ERROR("%s; that job is not followed", d.msg);
		return 0;
	}
	return js->req.infer ? svc_serve_restore(s, js, path) : svc_train_restore(s, js, path);
}

void svc_follow_restore(svc *s)
{
	if (sky_jobstate_list(s->state_dir, restore_run, s) != 0)
		SKY_ERROR("cannot list %s/jobs: the jobs followed before a restart are not", s->state_dir);
}
