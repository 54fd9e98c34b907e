/* Memory accounting through the planner service: every role of a training
 * plan is priced with the board's own figure (planner/svc_plan.c
 * price_roles, which calls what skyplan's main hands in: runtime's
 * sky_trainjob_bytes_as), a plan one of whose roles does not fit that
 * figure is made again under a lowered budget, and a board's refusal for
 * memory re-plans a followed job at once, from the board the plan gives
 * that role only (planner/svc_fleet.c on_refusal); of a job not followed
 * it teaches the board's budget for the next plan. */
#include "sky_test.h"

#include "svc_fake.h"

#include "board_bytes.h"
#include "sky_jobreq.h"

#include <stdio.h>
#include <string.h>

/* what the fake board needs beyond its own figure (a board whose arena
 * grew past what the planner's search estimates), and the calls made */
static int64_t g_extra;
static int g_calls;

static int64_t board_bytes(const sky_planmsg *p, int stage, const char *board)
{
	g_calls++;
	int64_t n = test_board_bytes(p, stage, board, NULL);
	return n < 0 ? n : n + g_extra;
}

/* Board id online with capabilities at tiny's shapes: block_s seconds a
 * half-layer forward (twice that backward), mem bytes. */
static void board(svc *s, const char *id, double block_s, int64_t mem)
{
	sky_reg_board *b = svc_fake_board(s, id, SKY_REG_ONLINE);
	sky_model_cfg m;
	sky_model_preset("tiny", &m);
	memset(&b->caps, 0, sizeof b->caps);
	snprintf(b->caps.id, sizeof b->caps.id, "%s", id);
	snprintf(b->caps.shape.name, sizeof b->caps.shape.name, "tiny");
	b->caps.shape.hidden = m.hidden;
	b->caps.shape.heads = m.heads;
	b->caps.shape.ffn = m.ffn;
	b->caps.shape.seq = m.seq;
	b->caps.shape.batch = m.batch;
	b->caps.fp32 = (sky_caps_times){block_s, block_s, 2 * block_s, 2 * block_s};
	b->caps.threads = 1;
	b->caps.keepalive_s = 2;
	b->caps.mem_bytes = mem;
	b->caps.link_bw = 1e9;
	b->caps.link_lat_s = 3e-4;
	b->has_caps = 1;
}

static svc *boards(const char *name, int n, int64_t mem)
{
	svc *s = svc_fake_fresh(name);
	s->plan.train_bytes = board_bytes;
	g_extra = 0;
	char id[8];
	for (int i = 1; i <= n; i++) {
		snprintf(id, sizeof id, "b%d", i);
		board(s, id, 1e-3, mem);
	}
	return s;
}

static svc_job g_job;
static svc_notes g_notes;
static svc_plan_result g_res;

/* Plans doc over s's boards into s->plan.msg (the fake has no signer: the
 * message is built and priced, then not published). Returns svc_plan_job's
 * code, g_res.why saying why not. */
static int plan(svc *s, const char *doc)
{
	sky_job_req req;
	sky_diag d;
	char why[200];
	int fit = 0;
	sky_diag_clear(&d);
	memset(&g_notes, 0, sizeof g_notes);
	memset(&g_res, 0, sizeof g_res);
	if (sky_job_req_parse(doc, strlen(doc), &req, &d) != 0)
		return SKY_EFORMAT;
	memset(&g_job, 0, sizeof g_job);
	svc_job_from_req(&g_job, &req);
	svc_plan_fleet(s, &g_job, &g_notes, &fit, why, sizeof why);
	if (fit == 0)
		return SKY_ENOTFOUND;
	svc_plan_req rq = {.job = &g_job, .notes = &g_notes};
	memset(&s->plan.msg, 0, sizeof s->plan.msg);
	g_calls = 0;
	int rc = svc_plan_job(s, &rq, &g_res);
	/* a built plan that only failed to go out (no signer) is a plan */
	return rc && s->plan.msg.n_stages > 0 && !strstr(g_res.why, "fits") ? 0 : rc;
}

/* The budget board id reports. */
static int64_t reported(svc *s, const char *id)
{
	const sky_reg_board *b = sky_registry_find(&s->reg, id);
	return b ? b->caps.mem_bytes : -1;
}

/* arena_bytes the plan gives stage k's replica r (0: the stage's board) */
static int64_t priced(const sky_planmsg *p, int k, int r)
{
	return r == 0 ? p->stages[k].arena_bytes : p->reps[p->stages[k].rep0 + r - 1].arena_bytes;
}

/* 4 layers, 2 micro-batches of 8: 16 sequences a step */
#define JOB "{\"job\":\"jm\",\"model\":\"tiny\",\"layers\":4,\"micro_batches\":2,\"task\":\"train\"," \
	    "\"steps\":4,\"plaintext_frames\":true,\"checkpoint_every\":2"

SKY_TEST(every_role_is_priced_with_the_boards_own_figure)
{
	for (int with_reps = 0; with_reps < 2; with_reps++) {
		svc *s = boards(with_reps ? "mem_reps" : "mem_pipe", 5, 2ll << 20);
		int rc = plan(s, with_reps ? JOB ",\"choose_micro\":true}" : JOB ",\"replicas\":false}");
		SKY_EXPECT_MSG(rc == 0, "%s", g_res.why);
		const sky_planmsg *p = &s->plan.msg;
		SKY_EXPECT(p->n_stages >= 2);
		SKY_EXPECT_EQ(p->n_reps > 0, with_reps);
		SKY_EXPECT_EQ(s->plan.use_hyb, with_reps);
		for (int k = 0; k < p->n_stages; k++)
			for (int r = 0; r < sky_planmsg_n_replicas(p, k); r++) {
				const char *id = sky_planmsg_replica_board(p, k, r);
				sky_diag d;
				sky_diag_clear(&d);
				int64_t own = test_board_bytes(p, k, id, &d);
				SKY_EXPECT_MSG(own > 0, "%s", d.msg);
				/* what the board computes when it takes the plan */
				SKY_EXPECT_EQ(priced(p, k, r), own);
				SKY_EXPECT_MSG(own <= reported(s, id), "stage %d on %s: %lld over %lld", k,
					       id, (long long)own, (long long)reported(s, id));
				/* the search's estimate: never above the board's
				 * figure (no margin: a plan that fits is not passed
				 * over) and not far below it (every stage's sums
				 * counted) */
				int64_t est = with_reps ? s->plan.hyb.stage[k].rep[r].mem_bytes
							: s->plan.plan.stage[k].mem_bytes;
				SKY_EXPECT_MSG(est <= own && own - est < own / 10,
					       "%s stage %d on %s: estimate %lld, the board's %lld",
					       with_reps ? "replicas" : "pipeline", k, id, (long long)est,
					       (long long)own);
			}
	}
}

/* Roles in s's plan, and whether each fits its board's report. */
static int roles_fit(svc *s, int *n_roles)
{
	const sky_planmsg *p = &s->plan.msg;
	int fit = 1;
	*n_roles = 0;
	for (int k = 0; k < p->n_stages; k++)
		for (int r = 0; r < sky_planmsg_n_replicas(p, k); r++) {
			const char *id = sky_planmsg_replica_board(p, k, r);
			int64_t need = board_bytes(p, k, id);
			(*n_roles)++;
			if (s->plan.train_bytes)
				SKY_EXPECT_EQ(priced(p, k, r), need);
			if (need > reported(s, id))
				fit = 0;
		}
	return fit;
}

/* Boards that need more than the search estimates (g_extra beyond their
 * own figure): the first plan has a role over its board's budget, so the
 * service plans again under that board's lowered budget until every role
 * fits, and the plan that goes out fits every board. */
SKY_TEST(a_plan_over_a_boards_figure_is_made_again_under_a_lower_budget)
{
	for (int with_reps = 0; with_reps < 2; with_reps++) {
		const char *doc = with_reps ? JOB ",\"choose_micro\":true}" : JOB ",\"replicas\":false}";
		int64_t extra = with_reps ? 96 << 10 : 800 << 10;
		/* the plan the search makes at the boards' reports: with the
		 * extra, a role of it does not fit */
		svc *s = boards(with_reps ? "mem_again_r0" : "mem_again_p0", 5, 2ll << 20);
		s->plan.train_bytes = NULL; /* the estimate stands */
		SKY_EXPECT_EQ(plan(s, doc), 0);
		g_extra = extra;
		int n0 = 0;
		SKY_EXPECT_MSG(!roles_fit(s, &n0), "the first plan fits: nothing to show");
		/* priced: planned again, and what goes out fits */
		s = boards(with_reps ? "mem_again_r" : "mem_again_p", 5, 2ll << 20);
		g_extra = extra;
		int rc = plan(s, doc);
		SKY_EXPECT_MSG(rc == 0, "%s", g_res.why);
		int calls = g_calls, n = 0;
		SKY_EXPECT(s->plan.msg.n_stages >= 2);
		SKY_EXPECT(roles_fit(s, &n));
		SKY_EXPECT_MSG(calls > n, "%d roles priced %d times: not planned again", n, calls);
		SKY_EXPECT_EQ(s->plan.use_hyb, with_reps);
	}
}

/* No plan fits the boards' figures: none goes out, and why names the
 * board, the stage and the bytes. */
SKY_TEST(no_plan_that_fits_the_boards_figures_is_refused_with_the_numbers)
{
	svc *s = boards("mem_none", 5, 2ll << 20);
	g_extra = 3ll << 20;
	int rc = plan(s, JOB ",\"replicas\":false}");
	SKY_EXPECT_EQ(rc, SKY_ENOMEM);
	SKY_EXPECT_MSG(strstr(g_res.why, "no plan fits the boards' own figures: board b") &&
			       strstr(g_res.why, "bytes for stage") &&
			       strstr(g_res.why, "its budget is 2097152"),
		       "%s", g_res.why);
}

/* The pipeline job planned on five boards, followed at epoch 5 and
 * assigned as if published. */
static svc *followed(const char *name, run_job **out)
{
	svc *s = boards(name, 5, 2ll << 20);
	SKY_EXPECT_EQ(plan(s, JOB ",\"replicas\":false}"), 0);
	sky_planmsg *p = &s->plan.msg;
	p->epoch = 5;
	svc_plan_req rq = {.job = &g_job, .notes = &g_notes};
	svc_follow_plan(s, &rq, p, "env", 3, 0.1);
	sky_registry_assign(&s->reg, p);
	*out = svc_follow_find(s, "jm");
	return s;
}

/* board's plan-ack refusing stage k of jm at epoch for memory: it needs
 * need bytes, its budget is budget */
static void refuse(svc *s, const char *board, int64_t epoch, int k, int64_t need, int64_t budget)
{
	sky_planack a;
	memset(&a, 0, sizeof a);
	snprintf(a.board, sizeof a.board, "%s", board);
	snprintf(a.job, sizeof a.job, "jm");
	a.epoch = epoch;
	a.stage = k;
	a.arena_bytes = need;
	a.expected_bytes = need;
	a.budget_bytes = budget;
	snprintf(a.reason, sizeof a.reason, "stage needs %lld bytes, the board's budget is %lld",
		 (long long)need, (long long)budget);
	char buf[1024];
	sky_diag d;
	sky_diag_clear(&d);
	int n = sky_planack_encode(&a, buf, sizeof buf, &d);
	SKY_EXPECT_MSG(n > 0, "%s", d.msg);
	svc_fleet_on_board(s, board, SKY_TOPIC_PLAN_ACK, buf, (size_t)n);
}

/* A board refusing its role for memory: the job is re-planned at once
 * (no signer here: the new plan is built, then the job paused, naming the
 * board and bytes), over the budget it said it has, which the new plan
 * keeps to. */
SKY_TEST(a_refusal_for_memory_from_the_roles_board_re_plans_at_once)
{
	run_job *r = NULL;
	svc *s = followed("mem_refused", &r);
	SKY_EXPECT(r != NULL);
	if (!r)
		return;
	char id[SKY_TOPIC_SEGMENT_MAX + 1];
	snprintf(id, sizeof id, "%s", s->plan.msg.stages[0].board);
	int64_t need = s->plan.msg.stages[0].arena_bytes, real = need - 100000;
	refuse(s, id, 5, 0, need, real);
	SKY_EXPECT(r->replan.paused);
	char want[160];
	snprintf(want, sizeof want, "board %s refused stage 0: it needs %lld bytes, its budget is %lld",
		 id, (long long)need, (long long)real);
	SKY_EXPECT_MSG(strstr(r->replan.pause_why, want) != NULL, "%s", r->replan.pause_why);
	/* the new plan gives that board no role over what it has */
	const sky_planmsg *p = &s->plan.msg;
	SKY_EXPECT(p->n_stages >= 2);
	for (int k = 0; k < p->n_stages; k++)
		if (!strcmp(p->stages[k].board, id))
			SKY_EXPECT_MSG(p->stages[k].arena_bytes <= real, "stage %d on %s: %lld over %lld",
				       k, id, (long long)p->stages[k].arena_bytes, (long long)real);
}

/* Who may send it: the board holding that role. A refusal of stage 0
 * from a board the plan gives another stage, or none, or for an old
 * epoch, is ignored: no re-plan. */
SKY_TEST(a_refusal_from_a_board_not_holding_the_role_is_ignored)
{
	run_job *r = NULL;
	svc *s = followed("mem_refused_other", &r);
	SKY_EXPECT(r != NULL);
	if (!r)
		return;
	const sky_planmsg *p = &s->plan.msg;
	int64_t need = p->stages[0].arena_bytes;
	char other[SKY_TOPIC_SEGMENT_MAX + 1] = "", out[SKY_TOPIC_SEGMENT_MAX + 1] = "";
	snprintf(other, sizeof other, "%s", p->stages[1].board);
	for (int i = 1; i <= 5 && !out[0]; i++) {
		char id[8];
		snprintf(id, sizeof id, "b%d", i);
		if (sky_planmsg_find_replica(p, id, NULL) < 0)
			snprintf(out, sizeof out, "%s", id);
	}
	SKY_EXPECT(out[0] != '\0');
	refuse(s, other, 5, 0, need, need - 100000);
	refuse(s, out, 5, 0, need, need - 100000);
	refuse(s, p->stages[0].board, 4, 0, need, need - 100000);
	SKY_EXPECT(!r->replan.paused);
	SKY_EXPECT_EQ(r->epoch, 5);
	SKY_EXPECT_EQ(svc_follow_find(s, "jm"), r);
}

/* s->plan's learned budget for board id (-1: none) */
static int64_t learned(const svc *s, const char *id)
{
	for (int i = 0; i < s->plan.n_mem_cap; i++)
		if (!strcmp(s->plan.mem_cap[i].id, id))
			return s->plan.mem_cap[i].budget;
	return -1;
}

/* A job without checkpoints is not followed, so nothing re-plans it; its
 * board's refusal for memory still teaches the planner that board's
 * budget, and the job submitted again gets a plan within it. A refusal
 * of an epoch the planner never published teaches nothing. */
SKY_TEST(a_refusal_of_a_job_not_followed_teaches_the_boards_budget)
{
	svc *s = boards("mem_unfollowed", 5, 2ll << 20);
	const char *doc = "{\"job\":\"jm\",\"model\":\"tiny\",\"layers\":4,\"micro_batches\":2,"
			  "\"task\":\"train\",\"steps\":4,\"plaintext_frames\":true,"
			  "\"checkpoint_every\":0,\"replicas\":false}";
	SKY_EXPECT_EQ(plan(s, doc), 0);
	sky_planmsg *p = &s->plan.msg;
	p->epoch = 7;
	sky_registry_assign(&s->reg, p);
	SKY_EXPECT(svc_follow_find(s, "jm") == NULL);
	char id[SKY_TOPIC_SEGMENT_MAX + 1];
	snprintf(id, sizeof id, "%s", p->stages[0].board);
	int64_t need = p->stages[0].arena_bytes, real = need - 200000;
	refuse(s, id, 6, 0, need, real); /* no such plan */
	SKY_EXPECT_EQ(learned(s, id), -1);
	refuse(s, id, 7, 0, need, real);
	SKY_EXPECT_EQ(learned(s, id), real);
	/* submitted again: no role on that board over what it has */
	SKY_EXPECT_EQ(plan(s, doc), 0);
	SKY_EXPECT(p->n_stages >= 1);
	for (int k = 0; k < p->n_stages; k++)
		if (!strcmp(p->stages[k].board, id))
			SKY_EXPECT_MSG(p->stages[k].arena_bytes <= real, "stage %d on %s: %lld over %lld",
				       k, id, (long long)p->stages[k].arena_bytes, (long long)real);
}
