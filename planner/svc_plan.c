/* Planning a job (svc_internal.h): the working fleet of boards that fit
 * it, the plan over them (sky_plan.h), and publishing it: the next epoch,
 * the training or serving section, frame keys wrapped for each board,
 * checkpoint loads of a resumed plan, signed and retained. */
#include "svc_internal.h"

#include "sky_caps.h"
#include "sky_clock.h"
#include "sky_jobkey.h"
#include "sky_metrics.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The shapes a board's capabilities must have been measured at. */
static void want_shape(const svc_job *j, sky_caps_shape *want)
{
	memset(want, 0, sizeof *want);
	snprintf(want->name, sizeof want->name, "%s", j->model.name);
	want->hidden = j->model.hidden;
	want->heads = j->model.heads;
	want->ffn = j->model.ffn;
	want->seq = j->model.seq;
	want->batch = j->model.batch;
}

/* Registry board b as the planner library's board for job j. */
static void fleet_board(sky_board *fb, const sky_reg_board *b, const svc_job *j,
			const sky_caps_times *t)
{
	memset(fb, 0, sizeof *fb);
	snprintf(fb->id, sizeof fb->id, "%s", b->id);
	fb->fwd_s = t->fwd_attn_s + t->fwd_ffn_s;
	fb->bwd_s = t->bwd_attn_s + t->bwd_ffn_s;
	fb->attn_share = (t->fwd_attn_s + t->bwd_attn_s) / (fb->fwd_s + fb->bwd_s);
	if (b->caps.has_int8) {
		/* there is no int8 backward: an int8 stage runs its backward in fp32 */
		fb->fwd_int8_s = b->caps.int8_fwd_s;
		fb->bwd_int8_s = fb->bwd_s;
	}
	if (j->req.infer) {
		/* measured at the model's micro-batch, served at the job's batch;
		 * serving has no backward (the cost model ignores bwd_int8_s) */
		double k = (double)j->req.serve_batch / j->model.batch;
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
}

/* The budget learned for board id below `reported` (what its report
 * says, as fleet_board takes it), or `reported`: a board whose report
 * changed since is taken at its word again. */
static int64_t learned_budget(const svc *s, const char *id, int64_t reported)
{
	for (int i = 0; i < s->plan.n_mem_cap; i++)
		if (!strcmp(s->plan.mem_cap[i].id, id))
			return s->plan.mem_cap[i].reported == reported &&
					       s->plan.mem_cap[i].budget < reported
				       ? s->plan.mem_cap[i].budget
				       : reported;
	return reported;
}

void svc_plan_learn_budget(svc *s, const char *id, int64_t reported, int64_t budget)
{
	int i = 0;
	while (i < s->plan.n_mem_cap && strcmp(s->plan.mem_cap[i].id, id))
		i++;
	if (i == s->plan.n_mem_cap) {
		if (i == SKY_PLAN_MAX_BOARDS)
			i = 0; /* full: the oldest entry goes (a board learned again) */
		else
			s->plan.n_mem_cap++;
	} else if (s->plan.mem_cap[i].reported == reported && s->plan.mem_cap[i].budget < budget) {
		budget = s->plan.mem_cap[i].budget; /* only ever lower, for one report */
	}
	snprintf(s->plan.mem_cap[i].id, sizeof s->plan.mem_cap[i].id, "%s", id);
	s->plan.mem_cap[i].reported = reported;
	s->plan.mem_cap[i].budget = budget < 0 ? 0 : budget;
}

/* Is board b busy with a job of an operator other than j's? A board's
 * assignment is busy while its job runs: followed (re-plans), not cancelled,
 * and not every stage of that epoch done or stalled in its metrics (one
 * that has sent none yet is starting). */
static int busy_for_another(svc *s, const sky_reg_board *b, const svc_job *j)
{
	char op[SKY_TOPIC_SEGMENT_MAX + 1];
	if (!b->job[0] || !strcmp(b->job, j->req.job) || s->o->share_busy_boards ||
	    svc_relay_cancelled(s, b->job))
		return 0;
	if (svc_relay_owner(s, b->job, op, sizeof op) != 0 || !strcmp(op, j->op))
		return 0; /* nobody's (from before owners were kept), or j's operator's own */
	if (svc_follow_find(s, b->job))
		return 1;
	int rows = 0, open = 0;
	for (int k = 0; k < s->jobs.n; k++) {
		const sky_jobstat_row *r = &s->jobs.row[k];
		if (strcmp(r->job, b->job) || r->epoch != b->epoch)
			continue;
		rows++;
		open += !r->done && !r->stall[0];
	}
	return rows == 0 || open > 0;
}

int svc_plan_fleet(svc *s, const svc_job *j, svc_notes *notes, int *fit, char *why, size_t cap)
{
	int busy = 0;
	sky_registry *r = &s->reg;
	sky_fleet *f = &s->plan.fleet;
	sky_caps_shape want;
	want_shape(j, &want);
	int online = 0;
	sky_fleet_init(f);
	for (int i = 0; i < r->n; i++) {
		sky_reg_board *b = &r->b[i];
		if (b->state != SKY_REG_ONLINE)
			continue;
		online++;
		if (busy_for_another(s, b, j)) {
			busy++;
			continue;
		}
		if (!b->has_caps || !sky_caps_shape_eq(&b->caps.shape, &want)) {
			if (!notes->asked[i]) {
				notes->asked[i] = 1;
				svc_fleet_ask_probe(s, b->id, j);
			}
			continue;
		}
		if (strlen(b->id) >= SKY_BOARD_ID_MAX || f->n >= SKY_PLAN_MAX_BOARDS)
			continue;
		if (j->req.infer && !(b->caps.has_int8 && b->caps.int8_fwd_s > 0)) {
			if (!notes->no_int8[i]) {
				notes->no_int8[i] = 1;
				SKY_WARN("job %s: board %s is not used: it reported no int8 times "
					 "(serving runs the int8 kernels)",
					 j->req.job, b->id);
			}
			continue;
		}
		/* a training job plans on what the board's jobs measured, where
		 * they did (svc_calib.c); serving runs the int8 kernels, which no
		 * training job measures */
		sky_caps_times cal;
		int cal_used = !j->req.infer && svc_calib_times(s, b, &want, &cal);
		s->calib.used[f->n] = (unsigned char)cal_used;
		fleet_board(&f->board[f->n], b, j, cal_used ? &cal : &b->caps.fp32);
		f->board[f->n].mem_bytes = learned_budget(s, b->id, f->board[f->n].mem_bytes);
		f->n++;
	}
	*fit = f->n;
	if (f->n == 0 && busy)
		snprintf(why, cap, "%d online board%s busy with another operator's job, and no other "
				   "reported %s at seq %d batch %d",
			 busy, busy == 1 ? " is" : "s are", want.name, want.seq, want.batch);
	else if (f->n == 0)
		snprintf(why, cap, "no online board reported %s at seq %d batch %d", want.name,
			 want.seq, want.batch);
	return online - busy;
}

/* The planner library's job for j, over the site paths the registry has
 * (from --links, or measured). */
static void lib_job(svc *s, const svc_job *j, sky_job *job, sky_algo *algo)
{
	const sky_registry *r = &s->reg;
	sky_fleet *f = &s->plan.fleet;
	*algo = SKY_ALGO_OPTIMAL;
	/* the library's defaults; a config.json's model ("hf") is no preset */
	sky_job_init(job, j->req.hf.on ? "tiny" : j->model.name);
	job->model = j->model;
	job->micro_batches = j->req.micro_batches;
	sky_algo_parse(j->req.algo, algo);
	sky_sched_parse(j->req.sched, &job->sched);
	sky_objective_parse(j->req.objective, &job->objective);
	job->link_blind = j->req.link_blind || s->o->link_blind;
	job->ckpt = j->req.train && j->req.ckpt_every > 0; /* the stages' checkpoint buffers */
	snprintf(job->owner, sizeof job->owner, "%.*s", (int)sizeof job->owner - 1,
		 j->req.data_owner);
	f->n_links = 0;
	for (int i = 0; i < r->n_links && f->n_links < SKY_PLAN_MAX_LINKS; i++) {
		sky_site_link *l = &f->link[f->n_links++];
		memset(l, 0, sizeof *l);
		snprintf(l->a, sizeof l->a, "%s", r->links[i].a);
		snprintf(l->b, sizeof l->b, "%s", r->links[i].b);
		l->bw_Bps = r->links[i].bw_Bps;
		l->lat_s = r->links[i].lat_s;
	}
	if (j->req.infer) {
		/* serving: int8 forward only, throughput (the slowest stage) */
		job->infer = 1;
		job->prec = SKY_PREC_INT8;
		job->objective = SKY_OBJ_BOTTLENECK;
		job->model.batch = j->req.serve_batch;
	}
}

/* 1 if fleet board k holds the data j reads (its set and eval set). */
static int holds_data(svc *s, const svc_job *j, const sky_fleet *f, int k)
{
	const sky_job_req *r = &j->req;
	return svc_board_holds_set(s, f->board[k].id, r->dataset, r->tokenizer,
				   r->dataset_sha256) &&
	       (!r->eval_dataset[0] ||
		svc_board_holds_set(s, f->board[k].id, r->eval_dataset, r->tokenizer, NULL));
}

/* Fleet f with board h moved to the front, the others in their order. */
static void to_front(sky_fleet *f, int h)
{
	sky_board b = f->board[h];
	memmove(&f->board[1], &f->board[0], (size_t)h * sizeof b);
	f->board[0] = b;
}

/* A job that reads a data set without a data owner: its first stage (the
 * embeddings and the rows) must run on a board holding the set (and the
 * eval set). The plan already made is kept when its first board does;
 * otherwise each board that does is tried first, the fleet's order behind
 * it kept, and the one with the smallest bottleneck wins (s->plan.fleet is
 * reordered to match). Returns 0 or SKY_EINVAL with the reason in d. */
static int place_data(svc *s, const svc_job *j, sky_job *job, sky_algo algo, sky_diag *d)
{
	sky_fleet *f = &s->plan.fleet;
	sky_plan *plan = &s->plan.plan;
	if (plan->n_stages > 0 && holds_data(s, j, f, plan->stage[0].board))
		return 0;
	sky_fleet *f2 = malloc(sizeof *f2);
	sky_plan *p2 = malloc(sizeof *p2), *best = malloc(sizeof *best);
	int best_h = -1, rc = 0;
	if (!f2 || !p2 || !best) {
		rc = sky_diag_set(d, SKY_ENOMEM, "job %s: out of memory placing its data",
				  j->req.job);
		goto exit;
	}
	for (int h = 0; h < f->n; h++) {
		if (!holds_data(s, j, f, h))
			continue;
		/* the fleet's order kept behind it; and the even split, which
		 * gives every board a stage in order (optimal may leave the
		 * holder out when it is the slowest) */
		for (int pass = 0; pass < 2; pass++) {
			sky_job j2 = *job;
			sky_diag ed;
			sky_diag_clear(&ed);
			*f2 = *f;
			to_front(f2, h);
			j2.keep_order = 1;
			if (sky_plan_partition(f2, &j2, pass ? SKY_ALGO_EVEN : algo, p2, &ed) != 0 ||
			    p2->n_stages == 0 || p2->stage[0].board != 0)
				continue;
			if (best_h < 0 || p2->bottleneck_s < best->bottleneck_s) {
				*best = *p2;
				best_h = h;
			}
		}
	}
	if (best_h < 0) {
		rc = sky_diag_set(d, SKY_EINVAL,
				  "job %s: no plan puts its first stage on a board holding data set "
				  "'%s'%s%s%s",
				  j->req.job, j->req.dataset, j->req.eval_dataset[0] ? " and '" : "",
				  j->req.eval_dataset, j->req.eval_dataset[0] ? "'" : "");
		goto exit;
	}
	to_front(f, best_h);
	*plan = *best;
	SKY_INFO("job %s: first stage on %s, which holds data set %s", j->req.job,
		 f->board[0].id, j->req.dataset);
exit:
	free(f2);
	free(p2);
	free(best);
	return rc;
}

/* Fleet index of board id, or -1. */
static int fleet_index(const sky_fleet *f, const char *id)
{
	for (int b = 0; b < f->n; b++)
		if (!strcmp(f->board[b].id, id))
			return b;
	return -1;
}

/* run's plan as a hybrid plan over the working fleet into h (allocated
 * for run->n_stages): its stages, boards and shares. With survivors_only,
 * a board no longer in the fleet is left out and its micro-batches go to
 * the others of its stage, one at a time to the one that would finish its
 * share soonest (a smaller re-plan: every stage keeps its half-layers);
 * without, such a board fails it. Returns 0 or -1 (a stage with none
 * left, or a board missing). */
static int running_hplan(const sky_fleet *f, const run_job *run, const sky_job *job, sky_hplan *h,
			 int survivors_only)
{
	h->micro_batch = run->micro_batch > 0 ? run->micro_batch : job->model.batch;
	h->micro_batches = run->micro_batches > 0 ? run->micro_batches : job->micro_batches;
	h->n_stages = run->n_stages;
	for (int k = 0; k < run->n_stages; k++) {
		sky_hstage *st = &h->stage[k];
		int lost = 0;
		memset(st, 0, sizeof *st);
		st->first_unit = run->first[k];
		st->last_unit = run->last[k];
		for (int i = -1; i < run->n_rep; i++) {
			if (i >= 0 && run->rep_stage[i] != k)
				continue;
			const char *id = i < 0 ? run->board[k] : run->rep_board[i];
			int share = i < 0 ? (run->share0[k] > 0 ? run->share0[k] : h->micro_batches)
					  : run->rep_share[i];
			int b = fleet_index(f, id);
			if (b < 0 && !survivors_only)
				return -1;
			if (b < 0 || st->n_rep == SKY_HPLAN_MAX_REPS) {
				lost += share;
				continue;
			}
			st->rep[st->n_rep].board = b;
			st->rep[st->n_rep++].share = share;
		}
		if (st->n_rep == 0)
			return -1;
		for (; lost > 0; lost--) {
			int best = 0;
			double best_t = 0;
			for (int r = 0; r < st->n_rep; r++) {
				const sky_board *fb = &f->board[st->rep[r].board];
				double t = (st->rep[r].share + 1) * (fb->fwd_s + fb->bwd_s);
				if (r == 0 || t < best_t)
					best = r, best_t = t;
			}
			st->rep[best].share++;
		}
	}
	return 0;
}

/* The smaller re-plan of a running plan with replicas that lost a
 * replica: into h when it evaluates and simulates shorter than *step_s
 * (or *step_s is 0); 1 then, else 0. */
static int survivors_plan(svc *s, const run_job *run, const sky_job *job, sky_hplan *h,
			  double *step_s)
{
	const sky_fleet *f = &s->plan.fleet;
	sky_hplan t;
	sky_hsim_result res;
	int better = 0;
	if (!run || run->n_rep == 0 || sky_hplan_alloc(&t, run->n_stages) != 0)
		return 0;
	if (running_hplan(f, run, job, &t, 1) == 0 && sky_hplan_evaluate(f, job, &t, NULL) == 0 &&
	    sky_hsim_run(f, &t, job, &res, NULL) == 0 && (*step_s <= 0 || res.step_s < *step_s) &&
	    h->cap >= t.n_stages) {
		h->micro_batch = t.micro_batch;
		h->micro_batches = t.micro_batches;
		h->n_stages = t.n_stages;
		memcpy(h->stage, t.stage, sizeof *t.stage * (size_t)t.n_stages);
		sky_hplan_evaluate(f, job, h, NULL);
		h->step_s = *step_s = res.step_s;
		better = 1;
	}
	sky_hplan_free(&t);
	return better;
}

/* A simulated gain below this is not worth replicas (their reduction,
 * more boards that can die): the pipeline plan is kept. */
#define HYBRID_MIN_GAIN 0.02

/* Stage replicas: a training job planned by optimal (and not asked for a
 * pipeline only) is planned again with replicas and micro-batching
 * (sky_plan_hybrid); when that plan's simulated step beats the pipeline's
 * by HYBRID_MIN_GAIN it is the one published (s->plan.use_hyb), with its
 * step in *predicted_s. A job the hybrid planner does not plan (a data
 * owner, a data set, several sites) keeps its pipeline plan, said once. */
static int try_hybrid(svc *s, const svc_job *j, const run_job *run, const sky_job *job,
		      sky_algo algo, double *predicted_s)
{
	sky_hplan *h = &s->plan.hyb;
	const sky_fleet *f = &s->plan.fleet;
	sky_diag d;
	sky_diag_clear(&d);
	s->plan.use_hyb = 0;
	/* (a re-plan of a job that runs float sums stays a pipeline: its
	 * steps go on summing the same way) */
	if (!j->req.train || j->req.no_replicas || algo != SKY_ALGO_OPTIMAL || j->req.dataset[0] ||
	    j->req.data_owner[0] || f->n < 2 || (run && !run->exact_sum))
		return SKY_EINVAL;
	sky_hplan_free(h);
	if (sky_hplan_alloc(h, f->n + 1) != 0)
		return SKY_ENOMEM;
	sky_job hj = *job;
	hj.link_blind = 0;
	double t0 = sky_clock_s();
	int rc = sky_plan_hybrid(f, &hj, h, &d);
	double took = sky_clock_s() - t0;
	/* a running plan with replicas that lost one: its stages kept, the
	 * lost replica's micro-batches shared among the others of its stage,
	 * when that simulates shorter than the search's plan */
	double found = rc == 0 ? h->step_s : 0;
	if (run && run->n_rep > 0 && survivors_plan(s, run, &hj, h, &found)) {
		if (!s->plan.quiet)
			SKY_INFO("job %s: a smaller re-plan: every stage keeps its half-layers, "
				 "the micro-batches of a board gone shared among its stage's others "
				 "(%.3f s a step)",
				 j->req.job, found);
		rc = 0;
	}
	if (rc) {
		if (!s->plan.quiet && run && run->exact_sum)
			SKY_WARN("job %s: no plan at its %d micro-batches of %d (%s): a pipeline at "
				 "the job's own micro-batching goes out, so its steps from here are "
				 "not those of a run without this fault",
				 j->req.job, run->micro_batches, run->micro_batch, d.msg);
		else if (!s->plan.quiet)
			SKY_INFO("job %s: no stage replicas (%s)%s", j->req.job, d.msg,
				 *predicted_s > 0 ? "; the pipeline plan goes out" : "");
		return rc;
	}
	int boards = sky_hplan_boards(h);
	int differs = boards > h->n_stages || h->micro_batch != job->model.batch;
	/* (no pipeline plan: *predicted_s is 0, and this one is the only; a
	 * running job that sums in fixed point keeps its micro-batching,
	 * which only this plan has) */
	if (*predicted_s > 0 && !(run && run->exact_sum) &&
	    (!differs || !(h->step_s < (1 - HYBRID_MIN_GAIN) * *predicted_s))) {
		if (!s->plan.quiet)
			SKY_INFO("job %s: the plan with stage replicas (%.3f s a step) does not beat "
				 "the pipeline's (%.3f s) by %.0f%%; the pipeline plan goes out",
				 j->req.job, h->step_s, *predicted_s, 100 * HYBRID_MIN_GAIN);
		return SKY_EINVAL;
	}
	char pipe[64] = "";
	if (isfinite(h->pipeline_step_s))
		snprintf(pipe, sizeof pipe, " against the pipeline's %.3f s", h->pipeline_step_s);
	if (!s->plan.quiet)
		SKY_INFO("job %s: stage replicas: %d stages over %d boards, %d micro-batches of "
			 "%d, simulated %.3f s a step%s (lower bound %.3f s; planned in %.2f s, %d "
			 "plans simulated)",
			 j->req.job, h->n_stages, boards, h->micro_batches, h->micro_batch, h->step_s,
			 pipe, h->step_lower_bound_s, took, h->evals);
	s->plan.use_hyb = 1;
	*predicted_s = h->step_s;
	return 0;
}

void svc_plan_free(svc *s)
{
	sky_hplan_free(&s->plan.hyb);
	s->plan.use_hyb = 0;
}

/* Plans j over the working fleet into s->plan.plan (or, with stage
 * replicas, s->plan.hyb), with its simulated step in *predicted_s (0 for
 * serving). run: the followed job a re-plan is for (NULL: a first plan);
 * one whose plans sum in fixed point keeps its micro-batch size and count
 * (the steps after the re-plan are the sums of the same micro-batches).
 * Returns 0 or an error in d. */
static int compute(svc *s, const svc_job *j, const run_job *run, sky_job *job, sky_algo *algo,
		   double *predicted_s, sky_diag *d)
{
	sky_fleet *f = &s->plan.fleet;
	lib_job(s, j, job, algo);
	if (run && run->exact_sum && run->micro_batch > 0 && !job->infer)
		job->fix_micro_batch = run->micro_batch;
	else if (j->req.train && !j->req.choose_micro)
		/* replicas at the job's own micro-batch size: the cost model
		 * prices a step as linear in B, and on the demo fleet its
		 * choice of 32 x 1 ran 18.3 s against the pipeline's 12.7 s */
		job->fix_micro_batch = job->model.batch;
	*predicted_s = 0;
	s->plan.use_hyb = 0;
	int rc = sky_plan_partition(f, job, *algo, &s->plan.plan, d);
	if (rc == SKY_ENOMEM && try_hybrid(s, j, run, job, *algo, predicted_s) == 0) {
		/* no pipeline fits at the job's micro-batch; with replicas and
		 * smaller micro-batches one does */
		s->plan.plan.n_stages = 0;
		return 0;
	}
	if (rc)
		return rc;
	if (j->req.train && j->req.dataset[0] && !j->req.data_owner[0] &&
	    (rc = place_data(s, j, job, *algo, d)) != 0)
		return rc;
	/* a link-blind plan still runs on the real links: price its cuts and
	 * predict its step with them */
	if (job->link_blind) {
		sky_diag ed;
		sky_diag_clear(&ed);
		job->link_blind = 0;
		if (sky_plan_evaluate(f, job, &s->plan.plan, &ed) != 0)
			SKY_WARN("job %s: link-blind plan not priced with the links: %s", j->req.job,
				 ed.msg);
	}
	/* the simulated step, once: the training plan carries it (the boards'
	 * stall deadline) and the metrics compare measured steps with it */
	if (!job->infer && sky_sim_run(&s->plan.plan, job, &s->plan.sim, NULL) == 0)
		*predicted_s = s->plan.sim.step_s;
	if (*predicted_s > 0)
		try_hybrid(s, j, run, job, *algo, predicted_s);
	return 0;
}

/* The simulated step of r's running plan with stage replicas under the
 * current capabilities, or 0 when a board of it has none now. */
static double cur_hybrid_step(svc *s, const run_job *r, const sky_job *job)
{
	const sky_fleet *f = &s->plan.fleet;
	sky_hplan h;
	sky_hsim_result res;
	double step = 0;
	if (sky_hplan_alloc(&h, r->n_stages) != 0)
		return 0;
	if (running_hplan(f, r, job, &h, 0) == 0 && sky_hplan_evaluate(f, job, &h, NULL) == 0 &&
	    sky_hsim_run(f, &h, job, &res, NULL) == 0)
		step = res.step_s;
	sky_hplan_free(&h);
	return step;
}

void svc_plan_evaluate(svc *s, const run_job *r, svc_notes *notes, double *new_s, double *cur_s,
		       char *why, size_t cap)
{
	sky_fleet *f = &s->plan.fleet;
	sky_plan *cur = &s->plan.cur;
	sky_job job;
	sky_algo algo;
	sky_diag d;
	int fit = 0;
	sky_diag_clear(&d);
	*new_s = *cur_s = 0;
	why[0] = '\0';
	svc_plan_fleet(s, &r->job, notes, &fit, why, cap);
	if (fit == 0)
		return;
	/* (every second per followed job: the hybrid search says nothing) */
	s->plan.quiet = 1;
	int crc = compute(s, &r->job, r, &job, &algo, new_s, &d);
	s->plan.quiet = 0;
	if (crc != 0) {
		snprintf(why, cap, "%.190s", d.msg);
		return;
	}
	/* the plan that runs, under the same (current) capabilities: a board
	 * whose speed changed changes it too */
	if (r->n_rep > 0 || r->micro_batch > 0) {
		*cur_s = cur_hybrid_step(s, r, &job);
		return;
	}
	memset(cur, 0, sizeof *cur);
	cur->algo = algo;
	cur->n_stages = r->n_stages;
	for (int k = 0; k < r->n_stages; k++) {
		int fi = -1;
		for (int b = 0; b < f->n && fi < 0; b++)
			if (!strcmp(f->board[b].id, r->board[k]))
				fi = b;
		if (fi < 0)
			return; /* a board of the plan has no capabilities now */
		cur->stage[k].board = fi;
		cur->stage[k].first_unit = r->first[k];
		cur->stage[k].last_unit = r->last[k];
	}
	if (r->n_stages > 0 && sky_plan_evaluate(f, &job, cur, NULL) == 0 &&
	    sky_sim_run(cur, &job, &s->plan.sim, NULL) == 0)
		*cur_s = s->plan.sim.step_s;
}

/* The training section of the plan: the job's settings and the
 * simulator's step time for this plan. */
static void fill_train(const svc_plan_req *rq, double predicted_step_s, int owner_lag,
		       int exact_sum, sky_planmsg *p)
{
	sky_plan_train *t = &p->train;
	const sky_job_req *r = &rq->job->req;
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
	t->resume_step = rq->resume_step;
	t->generation = r->ckpt_every > 0 ? (rq->generation > 0 ? rq->generation : 1) : 0;
	if (r->data_owner[0]) {
		/* U-shaped: the owner holds the first and the last stage */
		snprintf(t->owner, sizeof t->owner, "%s", r->data_owner);
		t->owner_lag = owner_lag;
	}
	snprintf(t->dataset, sizeof t->dataset, "%s", r->dataset);
	snprintf(t->eval_dataset, sizeof t->eval_dataset, "%s", r->eval_dataset);
	t->exact_sum = exact_sum;
}

/* The serving section of the plan and each stage's slice, cut from the
 * stored model (sky_deploy.h). The predicted throughput is the served
 * batch over the slowest stage's time (int8 forward and its send). */
static int fill_infer(svc *s, const svc_job *j, sky_planmsg *p, sky_diag *d)
{
	sky_plan_infer *in = &p->infer;
	const sky_job_req *r = &j->req;
	double bottleneck_s = s->plan.plan.bottleneck_s;
	memset(in, 0, sizeof *in);
	in->on = 1;
	in->batch = r->serve_batch;
	in->wait_ms = r->wait_ms;
	in->queue = r->queue;
	in->n_clients = r->n_clients;
	for (int i = 0; i < r->n_clients; i++)
		snprintf(in->clients[i], sizeof in->clients[i], "%s", r->clients[i]);
	in->predicted_seq_s = bottleneck_s > 0 ? r->serve_batch / bottleneck_s : 0;
	in->threads = 0;
	in->sealed = 1;
	snprintf(in->tokenizer, sizeof in->tokenizer, "%s", r->tokenizer);
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
		 r->job, in->batch, in->predicted_seq_s, 1e3 * bottleneck_s);
	return 0;
}

/* key wrapped for board with the public key of the certificate the CA
 * issued it, into out. Returns 0 or SKY_E* (d says). */
static int wrap_for(svc *s, const sky_planmsg *p, const unsigned char *key, const char *board,
		    char *out, size_t cap, sky_diag *d)
{
	char path[700];
	mbedtls_x509_crt crt;
	int rc;
	mbedtls_x509_crt_init(&crt);
	snprintf(path, sizeof path, "%s/" SKY_CA_CERTS_DIR "/%s.crt", s->o->pki_dir, board);
	if (mbedtls_x509_crt_parse_file(&crt, path) != 0)
		rc = sky_diag_set(d, SKY_ENOTFOUND,
				  "no certificate of board %s in %s to wrap the frame key "
				  "for (enrolled before this planner kept them? re-enroll, or "
				  "submit with --plaintext-frames)",
				  board, path);
	else if ((rc = sky_jobkey_wrap(&crt.pk, key, p->job, board, p->epoch, &s->signer.rng, out,
				       cap, d)) > 0)
		rc = 0;
	mbedtls_x509_crt_free(&crt);
	return rc;
}

/* A fresh frame key for the job, wrapped for each stage's board and each
 * stage replica's. */
static int wrap_keys(svc *s, sky_planmsg *p, sky_diag *d)
{
	unsigned char key[SKY_JOBKEY_BYTES];
	int rc = sky_jobkey_generate(&s->signer.rng, key, d);
	for (int k = 0; k < p->n_stages && !rc; k++)
		rc = wrap_for(s, p, key, p->stages[k].board, p->stages[k].key,
			      sizeof p->stages[k].key, d);
	for (int i = 0; i < p->n_reps && !rc; i++)
		rc = wrap_for(s, p, key, p->reps[i].board, p->reps[i].key, sizeof p->reps[i].key, d);
	memset(key, 0, sizeof key);
	return rc;
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
 * Returns 0 or SKY_E* (logged; why says it). */
static int publish_loads(svc *s, const sky_planmsg *p, char *why, size_t cap)
{
	for (int k = 0; k < p->n_stages; k++) {
		int blk0, nblk, rc;
		unsigned char *img = NULL;
		size_t len = 0;
		char topic[SKY_TOPIC_BUF];
		sky_diag d;
		sky_diag_clear(&d);
		const char *board = p->stages[k].board;
		stage_blocks(p, k, &blk0, &nblk);
		rc = sky_ckpt_image(&s->ckpt, p->job, p->epoch, blk0, nblk, &img, &len, &d);
		/* the stage's board and each of its replicas, which hold the same */
		for (int r = 0; !rc && r < sky_planmsg_n_replicas(p, k); r++) {
			board = sky_planmsg_replica_board(p, k, r);
			if ((rc = sky_topic_job_to(topic, sizeof topic, p->job, SKY_TOPIC_LOAD,
						   board)) == 0)
				rc = svc_publish(s, topic, img, len, 1, 1, &d);
		}
		free(img);
		if (rc) {
			snprintf(why, cap, "checkpoint of step %d for %s: %.120s", p->train.resume_step,
				 board, d.msg);
			SKY_ERROR("job %s epoch %lld not published: %s", p->job, (long long)p->epoch, why);
			return rc;
		}
	}
	return 0;
}

/* The hybrid plan s->plan.hyb into p's stages, replicas and routes: each
 * stage's first replica is its board, the others its replicas; the plan's
 * micro-batch size and count replace the job's (the job trains as `sky
 * train --batch B --micro M --exact-sum`). Returns 0 or SKY_ERANGE. */
static int build_hybrid(svc *s, sky_planmsg *p)
{
	const sky_hplan *h = &s->plan.hyb;
	const sky_fleet *f = &s->plan.fleet;
	unsigned char route[SKY_PLANMSG_MAX_MICRO];
	if (h->n_stages > SKY_PLANMSG_MAX_STAGES || h->micro_batches > SKY_PLANMSG_MAX_MICRO)
		return SKY_ERANGE;
	p->micro_batches = h->micro_batches;
	p->shape.batch = h->micro_batch;
	p->n_stages = h->n_stages;
	for (int k = 0; k < h->n_stages; k++) {
		const sky_hstage *st = &h->stage[k];
		const sky_hrep *r0 = &st->rep[0];
		sky_plan_stage *ps = &p->stages[k];
		snprintf(ps->board, sizeof ps->board, "%s", f->board[r0->board].id);
		snprintf(ps->site, sizeof ps->site, "%s", f->board[r0->board].site);
		ps->first = st->first_unit;
		ps->last = st->last_unit;
		ps->in_flight = r0->in_flight < 1 ? 1 : r0->in_flight;
		ps->arena_bytes = r0->mem_bytes;
	}
	for (int k = 0; k < h->n_stages; k++) {
		const sky_hstage *st = &h->stage[k];
		if (st->n_rep < 2)
			continue;
		for (int r = 1; r < st->n_rep; r++) {
			sky_plan_replica pr;
			memset(&pr, 0, sizeof pr);
			snprintf(pr.board, sizeof pr.board, "%s", f->board[st->rep[r].board].id);
			snprintf(pr.site, sizeof pr.site, "%s", f->board[st->rep[r].board].site);
			pr.in_flight = st->rep[r].in_flight < 1 ? 1 : st->rep[r].in_flight;
			pr.arena_bytes = st->rep[r].mem_bytes;
			if (sky_planmsg_add_replica(p, k, &pr) < 0)
				return SKY_ERANGE;
		}
		for (int mb = 0; mb < h->micro_batches; mb++)
			route[mb] = (unsigned char)sky_hplan_route(st, h->micro_batches, mb);
		sky_planmsg_set_route(p, k, route);
	}
	return 0;
}

/* The plan message of s->plan.plan (or s->plan.hyb) for j, without its
 * epoch. Returns 0 or SKY_ERANGE (a hybrid plan too big for the message). */
static int build_msg(svc *s, const svc_job *j, const sky_job *job, sky_algo algo, sky_planmsg *p)
{
	const sky_plan *pl = &s->plan.plan;
	const sky_fleet *f = &s->plan.fleet;
	memset(p, 0, sizeof *p);
	snprintf(p->job, sizeof p->job, "%s", j->req.job);
	snprintf(p->algo, sizeof p->algo, "%s", sky_algo_name(algo));
	p->micro_batches = job->micro_batches;
	want_shape(j, &p->shape);
	p->layers = job->model.layers;
	if (s->plan.use_hyb)
		return build_hybrid(s, p);
	p->n_stages = pl->n_stages;
	for (int k = 0; k < pl->n_stages; k++) {
		const sky_stage *st = &pl->stage[k];
		snprintf(p->stages[k].board, sizeof p->stages[k].board, "%s", f->board[st->board].id);
		snprintf(p->stages[k].site, sizeof p->stages[k].site, "%s", f->board[st->board].site);
		p->stages[k].first = st->first_unit;
		p->stages[k].last = st->last_unit;
		p->stages[k].in_flight = st->in_flight < 1 ? 1 : st->in_flight;
		p->stages[k].arena_bytes = st->mem_bytes;
	}
	return 0;
}

/* A Hugging Face model's block of the plan (sky_planmsg.h "hf") and, when
 * the job starts from its checkpoint, each stage's slice of it: a data
 * owner's two ends one wrapped slice (sky_slice.h). Returns 0 or the cut's
 * error in d. */
static int fill_hf(svc *s, const svc_job *j, sky_planmsg *p, sky_diag *d)
{
	const sky_job_req *r = &j->req;
	sky_plan_hf *h = &p->hf;
	h->on = 1;
	h->vocab = r->hf.vocab;
	h->max_pos = r->hf.max_pos;
	h->type_vocab = r->hf.type_vocab;
	h->classes = r->hf.classes;
	h->act = r->hf.act;
	h->ln_eps = r->hf.ln_eps;
	h->hidden_drop = r->hf.hidden_drop;
	h->attn_drop = r->hf.attn_drop;
	h->init = r->hf.init[0] != 0;
	if (!h->init)
		return 0;
	const int last = p->n_stages - 1;
	const int owner_ends = p->train.owner[0] && last >= 2 &&
			       !strcmp(p->stages[0].board, p->stages[last].board);
	for (int k = 0; k < p->n_stages; k++) {
		if (owner_ends && k == last) {
			p->stages[k].slice = p->stages[0].slice;
			continue;
		}
		int first = owner_ends && k == 0 ? p->stages[last].first : p->stages[k].first;
		int rc = sky_deploy_cut(&s->deploy, r->hf.init, first, p->stages[k].last,
					&p->stages[k].slice, d);
		if (rc)
			return rc;
		SKY_INFO("job %s stage %d (%s): checkpoint slice %.16s.., %lld bytes", p->job, k,
			 p->stages[k].board, p->stages[k].slice.sha256,
			 (long long)p->stages[k].slice.bytes);
	}
	return 0;
}

/* Plans a pricing round may make before it gives up: each round lowers the
 * budgets a role did not fit, on every board the search could put it on,
 * so few are needed */
#define PRICE_ROUNDS 6

/* Every role of training plan p priced with the board's own function
 * (s->plan.train_bytes) against real, the boards' budgets in the working
 * fleet before the first search: each stage's and replica's arena_bytes is then
 * what its board computes when it takes the plan. A data owner's stage 0
 * holds both its ends (its figure is the arena of both; the last stage's
 * estimate is left, the board sets up no arena for it alone). A role over
 * its board's budget is said in why, and lowers, for the next search of
 * this plan only (the working fleet), the budget of every board that its
 * estimate fits and its figure does not: its own and any other the search
 * would move it to (the estimate's shortfall is the role's, not the
 * board's: on a fleet of equal boards, lowering its board alone only moves
 * it, a board a round). Returns 0 (every role fits), 1 (budgets lowered:
 * plan again) or a negative code (the function failed; why says). */
static int price_roles(svc *s, sky_planmsg *p, const int64_t *real, char *why, size_t cap)
{
	sky_fleet *f = &s->plan.fleet;
	const int last = p->n_stages - 1;
	const int owner_ends = p->train.owner[0] && last >= 2 &&
			       !strcmp(p->stages[0].board, p->train.owner) &&
			       !strcmp(p->stages[last].board, p->stages[0].board);
	int over = 0;
	size_t at = 0;
	/* the budgets this plan was searched over: each role lowers from
	 * these (a board two roles lower takes the lower, not the sum) */
	int64_t was[SKY_PLAN_MAX_BOARDS];
	for (int i = 0; i < f->n; i++)
		was[i] = f->board[i].mem_bytes;
	for (int k = 0; k < p->n_stages; k++) {
		if (owner_ends && k == last)
			continue;
		for (int r = 0; r < sky_planmsg_n_replicas(p, k); r++) {
			const char *id = sky_planmsg_replica_board(p, k, r);
			int64_t need = s->plan.train_bytes(p, k, id);
			if (need < 0) {
				snprintf(why, cap, "stage %d on %s: the board's arena cannot be sized "
						   "(%s)",
					 k, id, sky_strerror((int)need));
				return (int)need;
			}
			int64_t *slot = r == 0 ? &p->stages[k].arena_bytes
					       : &p->reps[p->stages[k].rep0 + r - 1].arena_bytes;
			int64_t est = *slot;
			*slot = need;
			int fi = fleet_index(f, id);
			if (fi < 0 || need <= real[fi])
				continue;
			int64_t budget = real[fi];
			if (at < cap)
				at += (size_t)snprintf(why + at, cap - at,
						       "%sboard %s needs %lld bytes for stage %d, its "
						       "budget is %lld",
						       over ? "; " : "", id, (long long)need, k,
						       (long long)budget);
			/* the search's estimate of this role was short by need -
			 * est: a board whose budget it fits and the figure does
			 * not is lower by that for the next search (at least by
			 * the excess), so the search puts the role only where it
			 * fits. (1 byte at least: a budget must be positive, and
			 * one of 1 fits nothing) */
			for (int i = 0; i < f->n; i++) {
				int64_t m = was[i];
				if (i != fi && !(m >= est && real[i] < need))
					continue;
				int64_t short_by = need - est > need - real[i] ? need - est : need - real[i];
				int64_t lower = m - short_by > 0 ? m - short_by : 1;
				if (lower < f->board[i].mem_bytes)
					f->board[i].mem_bytes = lower;
			}
			over = 1;
		}
	}
	return over;
}

/* p under the next epoch, keys wrapped, signed into s->plan.envelope.
 * Returns the envelope's length, or 0 (logged). */
static int seal(svc *s, const svc_job *j, sky_planmsg *p)
{
	char path[640];
	sky_diag d;
	sky_diag_clear(&d);
	if (svc_store_next_epoch(s, &p->epoch, path, sizeof path) != 0) {
		SKY_ERROR("job %s: cannot persist the epoch in %s; not publishing", p->job, path);
		return 0;
	}
	if ((p->train.sealed || p->infer.sealed) && wrap_keys(s, p, &d) != 0) {
		SKY_WARN("job %s: not planned: %s", j->req.job, d.msg);
		return 0;
	}
	int plen = sky_planmsg_encode(p, s->plan.payload, sizeof s->plan.payload, &d);
	int elen = plen > 0 ? sky_sign_envelope(&s->signer, s->plan.payload, (size_t)plen,
						s->plan.envelope, sizeof s->plan.envelope, &d)
			    : plen;
	if (elen <= 0) {
		SKY_ERROR("job %s: plan not published: %s", p->job, d.msg);
		return 0;
	}
	return elen;
}

/* Sends sealed plan p (elen bytes of s->plan.envelope): loads first, saved
 * before it goes out, retained. Returns 0 or an error (logged). */
static int send_plan(svc *s, const sky_planmsg *p, int elen, svc_plan_result *res)
{
	char topic[SKY_TOPIC_BUF];
	sky_diag d;
	sky_diag_clear(&d);
	if (sky_topic_job(topic, sizeof topic, p->job, SKY_TOPIC_PLAN) != 0) {
		SKY_ERROR("job %s: plan not published: %s", p->job, d.msg);
		return SKY_ERANGE;
	}
	/* a resumed plan: each board's new range from the last complete
	 * checkpoint, retained on its load topic before the plan goes out */
	int rc = 0;
	if (p->train.resume_step > 0 && (rc = publish_loads(s, p, res->why, sizeof res->why)) != 0)
		return rc;
	/* kept before it goes out, so it can be published again if the broker
	 * loses it */
	if ((rc = svc_store_save(s, p->job, s->plan.envelope, (size_t)elen)) != 0)
		return rc;
	/* retained, so a board that (re)connects later still gets it */
	if ((rc = svc_publish(s, topic, s->plan.envelope, (size_t)elen, 1, 1, &d)) != 0)
		SKY_ERROR("job %s: %s", p->job, d.msg);
	return rc;
}

/* rq's plan message into s->plan.msg (computed, built, its training,
 * model and serving sections filled), every role of a training plan
 * priced with the board's own figure (price_roles): a plan with a role
 * over its board's budget is made again over the lowered budget, at most
 * PRICE_ROUNDS times. Returns 0 or an error with res->why saying it. */
static int make_msg(svc *s, const svc_plan_req *rq, const run_job *run, sky_job *job,
		    sky_algo *algo, svc_plan_result *res)
{
	const svc_job *j = rq->job;
	sky_planmsg *p = &s->plan.msg;
	/* what the first plan did not fit (at the boards' own budgets), and
	 * what the last did not */
	char first[sizeof res->why] = "", priced[sizeof res->why] = "";
	sky_diag d;
	/* the budgets the boards decide with (the search's may go lower) */
	int64_t real[SKY_PLAN_MAX_BOARDS];
	for (int i = 0; i < s->plan.fleet.n; i++)
		real[i] = s->plan.fleet.board[i].mem_bytes;
	for (int round = 0;; round++) {
		sky_diag_clear(&d);
		int rc = compute(s, j, run, job, algo, &res->predicted_s, &d);
		if (rc) {
			if (first[0])
				/* a plan whose roles did not fit the boards' own
				 * figures, and none after it: the boards and bytes
				 * first, then why the last search found none */
				snprintf(res->why, sizeof res->why,
					 "no plan fits the boards' own figures: %.90s; then no plan: "
					 "%.50s",
					 first, d.msg);
			else
				snprintf(res->why, sizeof res->why, "%.190s", d.msg);
			if (!rq->replan)
				SKY_WARN("job %s: no plan: %s", j->req.job, res->why);
			return rc;
		}
		if ((rc = build_msg(s, j, job, *algo, p)) != 0) {
			snprintf(res->why, sizeof res->why,
				 "the plan with stage replicas does not fit a plan message");
			SKY_WARN("job %s: not planned: %s", j->req.job, res->why);
			return rc;
		}
		if (j->req.train)
			fill_train(rq, res->predicted_s, s->plan.use_hyb ? 0 : s->plan.plan.owner_lag,
				   s->plan.use_hyb || (run && run->exact_sum), p);
		if (j->req.hf.on && (rc = fill_hf(s, j, p, &d)) != 0) {
			SKY_WARN("job %s: not planned: %s", j->req.job, d.msg);
			snprintf(res->why, sizeof res->why, "%.190s", d.msg);
			return rc;
		}
		if (j->req.infer && (rc = fill_infer(s, j, p, &d)) != 0) {
			SKY_WARN("job %s: not planned: %s", j->req.job, d.msg);
			return rc;
		}
		if (!j->req.train || !s->plan.train_bytes)
			return 0;
		priced[0] = '\0';
		if ((rc = price_roles(s, p, real, priced, sizeof priced)) == 0)
			return 0;
		if (!first[0])
			snprintf(first, sizeof first, "%s", priced);
		if (rc < 0 || round + 1 == PRICE_ROUNDS) {
			snprintf(res->why, sizeof res->why,
				 "no plan fits the boards' own figures: %.90s; after %d plans: %.40s",
				 first, round + 1, priced);
			SKY_WARN("job %s: not planned: %s", j->req.job, res->why);
			return rc < 0 ? rc : SKY_ENOMEM;
		}
		if (!s->plan.quiet)
			SKY_INFO("job %s: planned again: %s", j->req.job, priced);
	}
}

int svc_plan_job(svc *s, const svc_plan_req *rq, svc_plan_result *res)
{
	const svc_job *j = rq->job;
	sky_planmsg *p = &s->plan.msg;
	sky_job job;
	sky_algo algo;
	memset(res, 0, sizeof *res);
	const run_job *run = rq->replan ? svc_follow_find(s, j->req.job) : NULL;
	int rc = make_msg(s, rq, run, &job, &algo, res);
	if (rc)
		return rc;
	int elen = seal(s, j, p);
	if (elen <= 0)
		return SKY_EFORMAT;
	if ((rc = send_plan(s, p, elen, res)) != 0)
		return rc;
	sky_registry_assign(&s->reg, p);
	sky_nojob_note(&s->nojob, p->job, svc_relay_nojob_kind(s, p));
	svc_store_published(s, p);
	s->reg.c.plans_published++;
	res->published = p->epoch;
	if (j->req.train) {
		/* the bound no plan of this job on this fleet beats (with or
		 * without replicas), for the figures file and sky bench fleet */
		double work_s = 0, path_s = 0;
		sky_hplan_bounds(&s->plan.fleet, &job, &work_s, &path_s);
		s->plan.bound_s = work_s > path_s ? work_s : path_s;
		svc_calib_plan_figures(s, p->job, p->epoch);
	}
	if ((p->train.steps > 0 && p->train.ckpt_every > 0) || (p->infer.on && !j->req.no_replan))
		svc_follow_plan(s, rq, p, s->plan.envelope, (size_t)elen, res->predicted_s);
	if (res->predicted_s > 0)
		sky_metrics_set_step_predicted(sky_metrics_default(), p->job, res->predicted_s);
	if (p->n_reps > 0)
		SKY_INFO("job %s epoch %lld published: %d stages, %d stage replicas (%s), %d "
			 "micro-batches of %d, predicted %.3f s a step",
			 p->job, (long long)p->epoch, p->n_stages, p->n_reps, p->algo,
			 p->micro_batches, p->shape.batch, res->predicted_s);
	else
		SKY_INFO("job %s epoch %lld published: %d stages over %d boards (%s), bottleneck "
			 "%.3f ms per micro-batch",
			 p->job, (long long)p->epoch, p->n_stages, s->plan.fleet.n, p->algo,
			 1e3 * s->plan.plan.bottleneck_s);
	return 0;
}
