/* The one entry point of every re-plan (svc_internal.h): a board of a
 * followed job's plan gone (svc_follow.c), a paused job's retry, or a
 * voluntary re-plan at a commit (svc_train.c). The job is planned again
 * over the online boards from its last complete checkpoint; without a plan
 * (no board left, or the boards left cannot hold the model) it is paused,
 * said once, and tried again every second. */
#include "svc_internal.h"

#include "sky_clock.h"
#include "sky_metrics.h"

#include <stdio.h>
#include <string.h>

/* No plan for r: paused (said and logged once), tried again in a second. */
static void pause_job(svc *s, run_job *r, const char *reason, const char *why, double now)
{
	const char *job = r->job.req.job;
	if (!r->replan.paused) {
		char fields[700];
		SKY_WARN("job %s paused: %s, and no plan over the boards left: %s", job, reason,
			 why[0] ? why : "not planned");
		snprintf(fields, sizeof fields,
			 "\"event\":\"pause\",\"epoch\":%lld,\"reason\":\"%.150s\","
			 "\"why\":\"%.200s\"",
			 (long long)r->epoch, reason, why);
		for (char *c = fields; *c; c++)
			*c = *c == '\\' ? '/' : *c;
		sky_ckpt_log(&s->ckpt, job, fields);
		sky_jobstat_set_paused(&s->jobs, job, 1);
		snprintf(r->replan.pause_why, sizeof r->replan.pause_why, "resuming after %.150s", reason);
		r->replan.paused = 1;
		svc_follow_save(s, r);
	}
	r->replan.retry_s = now + 1.0;
}

/* The re-plan that went out, in the job's log, its jobstat row and ours. */
static void note_replan(svc *s, run_job *r, const char *reason, int64_t old_epoch,
			int resume_step, int lost, double now)
{
	const char *job = r->job.req.job;
	char boards[RUN_MAX_STAGES * 16] = "", fields[700];
	size_t bn = 0;
	for (int k = 0; k < r->n_stages && bn < sizeof boards - 70; k++) {
		bn += (size_t)snprintf(boards + bn, sizeof boards - bn, "%s%s", k ? "," : "",
				       r->board[k]);
		/* a stage's replicas after its board: "b1+b4+b5" */
		for (int i = 0; i < r->n_rep && bn < sizeof boards - 70; i++)
			if (r->rep_stage[i] == k)
				bn += (size_t)snprintf(boards + bn, sizeof boards - bn, "+%s",
						       r->rep_board[i]);
	}
	snprintf(fields, sizeof fields,
		 "\"event\":\"replan\",\"generation\":%d,\"epoch\":%lld,\"from_epoch\":%lld,"
		 "\"reason\":\"%.150s\",\"resume_step\":%d,\"lost_steps\":%d,\"predicted_step_s\":%.6f,"
		 "\"boards\":\"%.300s\"",
		 r->generation, (long long)r->epoch, (long long)old_epoch, reason, resume_step, lost,
		 r->predicted_s, boards);
	sky_ckpt_log(&s->ckpt, job, fields);
	sky_jobstat_replan rp;
	memset(&rp, 0, sizeof rp);
	snprintf(rp.job, sizeof rp.job, "%s", job);
	rp.generation = r->generation;
	rp.epoch = r->epoch;
	rp.at_unix = sky_clock_unix();
	rp.resume_step = resume_step;
	rp.lost_steps = lost;
	rp.lost_s = -1;
	rp.replayed = r->job.req.infer ? 0 : -1;
	snprintf(rp.reason, sizeof rp.reason, "%s", reason);
	sky_jobstat_add_replan(&s->jobs, &rp);
	if (r->replan.fault_s <= 0)
		r->replan.fault_s = now;
	if (r->job.req.infer)
		SKY_INFO("job %s re-planned (generation %d, epoch %lld): %s; %d stages over %s; its "
			 "unanswered requests are replayed once every stage is ready",
			 job, r->generation, (long long)r->epoch, reason, r->n_stages, boards);
	else
		SKY_INFO("job %s re-planned (generation %d, epoch %lld): %s; %d stages over %s, "
			 "resuming from step %d (%d step(s) replayed)",
			 job, r->generation, (long long)r->epoch, reason, r->n_stages, boards,
			 resume_step, lost);
}

void svc_replan(svc *s, run_job *r, const char *reason, double now)
{
	const char *job = r->job.req.job;
	svc_plan_req rq = {.job = &r->job, .notes = &s->replan.notes, .replan = 1};
	svc_plan_result res;
	int fit = 0;
	memset(&res, 0, sizeof res);
	s->replan.notes = r->notes; /* a re-plan's asks are its own */
	rq.resume_step = (int)sky_ckpt_last(&s->ckpt, job);
	rq.generation = r->generation + 1;
	int cut = r->job.req.infer ? 0 : svc_train_last_step(s, job, r->epoch);
	int64_t old_epoch = r->epoch;
	svc_plan_fleet(s, &r->job, &s->replan.notes, &fit, res.why, sizeof res.why);
	if (fit > 0)
		svc_plan_job(s, &rq, &res);
	if (!res.published) {
		pause_job(s, r, reason, res.why, now);
		return;
	}
	sky_jobstat_set_paused(&s->jobs, job, 0);
	sky_metrics_add_replan(sky_metrics_default(), job);
	int lost = cut > rq.resume_step ? cut - rq.resume_step : 0;
	note_replan(s, r, reason, old_epoch, rq.resume_step, lost, now);
}

void svc_replan_fault(run_job *r, double now)
{
	r->replan.fault_s = now;
}

double svc_replan_closed(run_job *r)
{
	double at = r->replan.fault_s;
	r->replan.fault_s = 0;
	return at;
}

void svc_replan_resumed(run_job *r)
{
	r->replan.paused = 0;
}

void svc_replan_restore(run_job *r, int paused, const char *why, double retry_s)
{
	r->replan.paused = paused;
	snprintf(r->replan.pause_why, sizeof r->replan.pause_why, "%s", why);
	r->replan.retry_s = retry_s;
}
