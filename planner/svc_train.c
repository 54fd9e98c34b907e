/* Training jobs followed (svc_internal.h): checkpoint commits, drift of a
 * stage's compute, the checkpoints a voluntary re-plan asks for, the gain
 * check that decides one, and a training job's restore at start. */
#include "svc_internal.h"

#include "sky_clock.h"

#include <stdio.h>
#include <string.h>

#define DRIFT_BASE_STEPS 5  /* steps averaged into a stage's baseline */
#define DRIFT_FACTOR 1.5    /* off by more than this factor ... */
#define DRIFT_STEPS 3       /* ... this many steps in a row: a drift */
#define DRIFT_REPROBE_S 10.0

/* A checkpoint part: stored, or refused with the reason; a commit may let
 * a waiting voluntary re-plan go, and closes the time lost of the last
 * re-plan. */
void svc_train_on_ckpt(svc *s, const char *job, const char *board, const unsigned char *p,
		       size_t len)
{
	sky_diag d;
	int64_t step = 0;
	double now = sky_clock_s();
	sky_diag_clear(&d);
	/* who sent it, before the image is hashed or its tensors read */
	if (!svc_authz_ckpt(s, job, board, p, len))
		return;
	int rc = sky_ckpt_on_part(&s->ckpt, job, board, p, len, now, &step, &d);
	if (rc < 0) {
		SKY_WARN("checkpoint part from %s for job %s refused: %s", board, job, d.msg);
		return;
	}
	if (rc == 0)
		return;
	SKY_INFO("job %s: step %lld committed (every stage's checkpoint is in)", job,
		 (long long)step);
	run_job *r = svc_follow_find(s, job);
	if (!r)
		return;
	double fault_s = svc_replan_closed(r);
	if (fault_s > 0)
		sky_jobstat_replan_lost(&s->jobs, job, now - fault_s);
	sky_ckpt_job *cj = sky_ckpt_find(&s->ckpt, job);
	if (r->train.want && cj && cj->commits > r->train.commits_at_want)
		svc_replan(s, r, r->train.want_why, now);
}

int svc_train_last_step(const svc *s, const char *job, int64_t epoch)
{
	int step = 0;
	for (int i = 0; i < s->jobs.n; i++)
		if (!strcmp(s->jobs.row[i].job, job) && s->jobs.row[i].epoch == epoch &&
		    s->jobs.row[i].step > step)
			step = s->jobs.row[i].step;
	return step;
}

/* A stage's measured compute (busy seconds a step, from its metrics)
 * drifting from what it was under this plan means its board's speed
 * changed: the board is asked to probe again, and its new capabilities
 * feed the voluntary re-plan check. */
static void check_drift(svc *s, run_job *r, double now)
{
	const char *job = r->job.req.job;
	for (int i = 0; i < s->jobs.n; i++) {
		const sky_jobstat_row *w = &s->jobs.row[i];
		int k = w->stage;
		if (strcmp(w->job, job) || w->epoch != r->epoch || k >= r->n_stages || w->done ||
		    w->step <= r->train.busy_step[k] || strcmp(w->board, r->board[k]))
			continue;
		r->train.busy_step[k] = w->step;
		double busy = w->busy * w->step_s;
		if (!(busy > 0))
			continue;
		double *base = &r->train.busy_base[k];
		if (r->train.busy_n[k] < DRIFT_BASE_STEPS) {
			*base = (*base * r->train.busy_n[k] + busy) / (r->train.busy_n[k] + 1);
			r->train.busy_n[k]++;
			continue;
		}
		double f = busy / *base;
		int *run = &r->train.drift_run[k];
		*run = f > DRIFT_FACTOR || f < 1.0 / DRIFT_FACTOR ? *run + 1 : 0;
		if (*run < DRIFT_STEPS || now - r->train.probe_asked_s[k] < DRIFT_REPROBE_S)
			continue;
		SKY_INFO("job %s: stage %d (board %s) computes %.2f ms a step, %.2f ms under this "
			 "plan at first: asking it to probe again",
			 job, k, r->board[k], 1e3 * busy, 1e3 * *base);
		char fields[300];
		snprintf(fields, sizeof fields,
			 "\"event\":\"drift\",\"epoch\":%lld,\"stage\":%d,\"board\":\"%s\","
			 "\"busy_s\":%.6f,\"base_s\":%.6f",
			 (long long)r->epoch, k, r->board[k], busy, *base);
		sky_ckpt_log(&s->ckpt, job, fields);
		svc_fleet_ask_probe(s, r->board[k], &r->job);
		r->train.probe_asked_s[k] = now;
		*run = 0;
		r->train.busy_n[k] = 0; /* a new baseline at the new speed */
		*base = 0;
		r->train.next_eval_s = 0;
	}
}

/* Asks every stage of r for a checkpoint after step `at` (a voluntary
 * re-plan waits for it). Returns at. */
static int ask_ckpt(svc *s, run_job *r, int at)
{
	char buf[SKY_CMD_MAX_BYTES], topic[SKY_TOPIC_BUF];
	int n = snprintf(buf, sizeof buf, "{\"cmd\":\"ckpt\",\"job\":\"%s\",\"epoch\":%lld,\"step\":%d}",
			 r->job.req.job, (long long)r->epoch, at);
	for (int k = 0; k < r->n_stages; k++)
		if (sky_topic_board(topic, sizeof topic, r->board[k], SKY_TOPIC_CMD) == 0)
			svc_publish(s, topic, buf, (size_t)n, 1, 0, NULL);
	r->train.ask_step = at;
	sky_ckpt_ask(&s->ckpt, r->job.req.job, at); /* its parts are taken */
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
	const char *job = r->job.req.job;
	int past = -1, k_every = r->job.req.ckpt_every;
	for (int i = 0; i < s->jobs.n; i++) {
		const sky_jobstat_row *w = &s->jobs.row[i];
		if (!strcmp(w->job, job) && w->epoch == r->epoch && w->stage < r->n_stages)
			past = past < 0 || w->step < past ? w->step : past;
	}
	if (r->train.ask_step <= 0 || past < r->train.ask_step + 2)
		return;
	int seen = svc_train_last_step(s, job, r->epoch);
	int ahead = r->train.ask_ahead < 64 ? 2 * r->train.ask_ahead : 128;
	int next_k = k_every > 0 ? (seen / k_every + 1) * k_every : r->job.req.steps + 1;
	if (seen + ahead >= next_k || seen + ahead > r->job.req.steps) {
		r->train.ask_step = 0; /* the K-th (or last) step's commit comes first */
		return;
	}
	int was = r->train.ask_step;
	r->train.ask_ahead = ahead;
	ask_ckpt(s, r, seen + ahead);
	SKY_INFO("job %s: its stages passed step %d before the checkpoint asked there (their "
		 "metrics reach this planner late); asked again after step %d",
		 job, was, r->train.ask_step);
}

/* Now and then, if no re-plan is waiting, a plan over the online boards is
 * evaluated to see whether a board that joined or changed speed is worth
 * a voluntary re-plan: one at the next commit, after a checkpoint asked a
 * step ahead. */
static void check_gain(svc *s, run_job *r, double now)
{
	const char *job = r->job.req.job;
	double new_s, cur_s;
	char why[200];
	r->train.next_eval_s = now + 1.0;
	s->train.notes = r->notes; /* an evaluation's asks are its own */
	svc_plan_evaluate(s, r, &s->train.notes, &new_s, &cur_s, why, sizeof why);
	/* the plan that runs, re-simulated with today's capabilities (a
	 * board re-probed after a drift), else as it was predicted */
	if (!(cur_s > 0))
		cur_s = r->predicted_s;
	SKY_DEBUG("job %s: a plan over the online boards would predict %.3f ms a step, the "
		  "current %.3f ms (%.3f ms when planned)%s%s",
		  job, 1e3 * new_s, 1e3 * cur_s, 1e3 * r->predicted_s, why[0] ? ": " : "", why);
	svc_follow_predicted(r, cur_s);
	if (!(new_s > 0 && cur_s > 0 && new_s < cur_s * (1.0 - s->o->replan_gain)))
		return;
	sky_ckpt_job *cj = sky_ckpt_find(&s->ckpt, job);
	r->train.want = 1;
	r->train.commits_at_want = cj ? cj->commits : 0;
	svc_replan_fault(r, now);
	snprintf(r->train.want_why, sizeof r->train.want_why,
		 "predicted step %.2f ms -> %.2f ms (%.0f%% better, over %.0f%%)",
		 1e3 * r->predicted_s, 1e3 * new_s, 100 * (1 - new_s / r->predicted_s),
		 100 * s->o->replan_gain);
	/* ask every stage for a checkpoint a step ahead (they are at most a
	 * step apart), so the re-plan need not wait for the next K-th step */
	r->train.ask_ahead = 2;
	int at = ask_ckpt(s, r, svc_train_last_step(s, job, r->epoch) + r->train.ask_ahead);
	SKY_INFO("job %s: a plan over the online boards would be faster: %s; checkpoint "
		 "asked after step %d, re-planning at the next commit",
		 job, r->train.want_why, at);
}

void svc_train_new_plan(run_job *r, int n_stages)
{
	for (int k = 0; k < n_stages; k++) {
		r->train.busy_n[k] = r->train.busy_step[k] = r->train.drift_run[k] = 0;
		r->train.busy_base[k] = 0;
	}
	r->train.want = 0;
	r->train.ask_step = 0;
}

void svc_train_tick(svc *s, run_job *r, double now)
{
	check_drift(s, r, now);
	if (r->train.want)
		ask_again_if_passed(s, r);
	if (r->train.want || now < r->train.next_eval_s || now - r->plan_s < s->o->replan_holdoff_s)
		return;
	check_gain(s, r, now);
}

/* js from the saved plan, when that is newer (a restart between
 * publishing and saving the state file). */
static void take_newer_plan(svc *s, sky_jobstate *js, const char *path)
{
	const sky_planmsg *m;
	long n = svc_store_load(s, js->req.job, &m, NULL);
	if (n < 0) {
		SKY_WARN("job %s: its saved plan is unusable (%s); following it as %s says",
			 js->req.job, sky_strerror((int)n), path);
		return;
	}
	if (!(m->epoch > js->epoch && m->train.ckpt_every > 0 &&
	      m->n_stages <= SKY_JOBSTATE_MAX_STAGES))
		return;
	js->epoch = m->epoch;
	js->generation = m->train.generation > js->generation ? m->train.generation : js->generation;
	js->n_stages = m->n_stages;
	for (int k = 0; k < js->n_stages; k++) {
		snprintf(js->board[k], sizeof js->board[k], "%s", m->stages[k].board);
		js->first[k] = m->stages[k].first;
		js->last[k] = m->stages[k].last;
	}
	js->paused = 0;
}

/* A training job's checkpoints back from the store's index. Returns the
 * last committed step. */
static int64_t restore_ckpts(svc *s, const run_job *r)
{
	const char *job = r->job.req.job;
	sky_diag d;
	sky_diag_clear(&d);
	int n_blocks = 2 * r->job.model.layers + 2;
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
	/* the steps parts may be of (a step out of it is refused unhashed) */
	sky_ckpt_schedule(&s->ckpt, job, r->job.req.steps, r->job.req.ckpt_every);
	return sky_ckpt_last(&s->ckpt, job);
}

int svc_train_restore(svc *s, sky_jobstate *js, const char *path)
{
	const char *job = js->req.job;
	take_newer_plan(s, js, path);
	run_job *r = svc_follow_from_state(s, js);
	if (!r) {
		SKY_ERROR("job %s: already following %d jobs; %s not restored", job, MAX_RUNNING, path);
		return 0;
	}
	int64_t last = restore_ckpts(s, r);
	if (last >= r->job.req.steps) {
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
	svc_follow_add(s);
	sky_jobstate_replans(s->state_dir, job, &s->jobs); /* sky fleet status shows them again */
	if (r->replan.paused)
		sky_jobstat_set_paused(&s->jobs, job, 1);
	SKY_INFO("job %s: followed again after a restart: epoch %lld, generation %d, %d stages, "
		 "last committed step %lld%s",
		 job, (long long)r->epoch, r->generation, r->n_stages, (long long)last,
		 r->replan.paused ? ", paused" : "");
	return 0;
}
