/* sky_plan_hybrid (planner/partition_hybrid.c): exact against brute force
 * on tiny fleets, its lower bound below every plan, never slower than the
 * pipeline-only optimal, refusals. */
#include "sky_test.h"

#include "planner_util.h"

#include <math.h>
#include <string.h>

static sky_fleet g_f;
static sky_plan g_p;
static sky_sim_result g_r;

/* ---- brute force: every plan of the space, through the public API ---------------- */

typedef struct brute {
	const sky_fleet *f;
	const sky_job *j;
	sky_hplan h;
	int label[8];    /* per board: 0 out, else its stage + 1 */
	double best;
	long plans;
	double lb;       /* every plan's step must be >= this */
	int below;       /* plans that broke it */
} brute;

static void b_eval(brute *b)
{
	sky_hsim_result res;
	if (sky_hplan_evaluate(b->f, b->j, &b->h, NULL))
		return;
	if (sky_hsim_run(b->f, &b->h, b->j, &res, NULL))
		return;
	b->plans++;
	if (res.step_s < b->lb * (1 - 1e-9))
		b->below++;
	if (res.step_s < b->best)
		b->best = res.step_s;
}

/* shares of stage k's replicas from r on (left to deal), then stage k + 1 */
static void b_shares(brute *b, int k, int r, int left)
{
	sky_hstage *s = &b->h.stage[k];
	if (r == s->n_rep - 1) {
		s->rep[r].share = left;
		if (k + 1 == b->h.n_stages)
			b_eval(b);
		else
			b_shares(b, k + 1, 0, b->h.micro_batches);
		return;
	}
	for (int q = 1; q <= left - (s->n_rep - 1 - r); q++) {
		s->rep[r].share = q;
		b_shares(b, k, r + 1, left - q);
	}
}

/* splits of units [s, U) over stages k.. */
static void b_split(brute *b, int k, int s)
{
	const int U = 2 * b->j->model.layers, P = b->h.n_stages;
	if (k == P - 1) {
		b->h.stage[k].first_unit = s;
		b->h.stage[k].last_unit = U - 1;
		b_shares(b, 0, 0, b->h.micro_batches);
		return;
	}
	for (int e = s + 1; e <= U - (P - 1 - k); e++) {
		b->h.stage[k].first_unit = s;
		b->h.stage[k].last_unit = e - 1;
		b_split(b, k + 1, e);
	}
}

/* every labelling of the boards with P stages, each non-empty */
static void b_label(brute *b, int i, int P)
{
	const int n = b->f->n;
	if (i == n) {
		for (int k = 0; k < P; k++)
			b->h.stage[k].n_rep = 0;
		for (int x = 0; x < n; x++)
			if (b->label[x]) {
				sky_hstage *s = &b->h.stage[b->label[x] - 1];
				s->rep[s->n_rep++].board = x; /* replicas in the fleet's order */
			}
		for (int k = 0; k < P; k++)
			if (b->h.stage[k].n_rep == 0 || b->h.stage[k].n_rep > b->h.micro_batches)
				return;
		b->h.n_stages = P;
		b_split(b, 0, 0);
		return;
	}
	for (int l = 0; l <= P; l++) {
		b->label[i] = l;
		b_label(b, i + 1, P);
	}
}

static double brute_step(const sky_fleet *f, const sky_job *j, double lb, long *plans, int *below)
{
	brute b = {.f = f, .j = j, .best = INFINITY, .lb = lb};
	SKY_EXPECT_EQ(sky_hplan_alloc(&b.h, f->n + 1), 0);
	int G = j->model.batch * j->micro_batches, U = 2 * j->model.layers;
	for (int B = 1; B <= G; B++) {
		if (G % B)
			continue;
		b.h.micro_batch = B;
		b.h.micro_batches = G / B;
		for (int P = 1; P <= f->n && P <= U; P++)
			b_label(&b, 0, P);
	}
	sky_hplan_free(&b.h);
	*plans = b.plans;
	*below = b.below;
	return b.best;
}

/* a tiny job: `layers` layers, global batch batch x m */
static void tiny(sky_rng *r, sky_job *j, int n, int flags)
{
	test_job(j, 1 + (int)sky_rng_below(r, 2), 1 + (int)sky_rng_below(r, 2),
		 (sky_sched)sky_rng_below(r, 2));
	j->model.batch = 1 + (int)sky_rng_below(r, 2);
	test_random_fleet(r, n, j, flags, &g_f);
	/* a replicated stage keeps its sums and the others' beside its
	 * weights (hybrid.c): half the fleets get the room for that */
	if (sky_rng_below(r, 2))
		for (int i = 0; i < g_f.n; i++)
			g_f.board[i].mem_bytes *= 4;
}

SKY_TEST(exact_against_brute_force_and_the_bound_holds)
{
	sky_rng r;
	sky_rng_seed(&r, 2121);
	sky_hplan h;
	SKY_EXPECT_EQ(sky_hplan_alloc(&h, 8), 0);
	int compared = 0, replicated = 0, rebatched = 0;
	for (int it = 0; it < 60; it++) {
		sky_job j;
		int n = 1 + (int)sky_rng_below(&r, 3);
		tiny(&r, &j, n, (int)sky_rng_below(&r, 8));
		sky_diag d;
		sky_diag_clear(&d);
		int rc = sky_plan_hybrid(&g_f, &j, &h, &d);
		double work, path;
		sky_hplan_bounds(&g_f, &j, &work, &path);
		double lb = work > path ? work : path;
		long plans;
		int below;
		double want = brute_step(&g_f, &j, lb, &plans, &below);
		SKY_EXPECT_MSG(below == 0, "fleet %d: %d of %ld plans below the bound %.9g", it, below,
			       plans, lb);
		if (isinf(want)) {
			SKY_EXPECT_EQ(rc, SKY_ENOMEM);
			continue;
		}
		SKY_EXPECT_EQ(rc, 0);
		if (rc)
			continue;
		compared++;
		SKY_EXPECT(h.step_exact);
		SKY_EXPECT_MSG(fabs(h.step_s - want) <= 1e-9 * want,
			       "fleet %d (%d boards, %d layers, batch %d x %d, %s): planned %.12g, "
			       "brute force %.12g over %ld plans",
			       it, n, j.model.layers, j.model.batch, j.micro_batches,
			       sky_sched_name(j.sched), h.step_s, want, plans);
		/* the plan is what it says: evaluated and simulated again */
		sky_hsim_result res;
		SKY_EXPECT_EQ(sky_hplan_evaluate(&g_f, &j, &h, NULL), 0);
		SKY_EXPECT_EQ(sky_hsim_run(&g_f, &h, &j, &res, NULL), 0);
		SKY_EXPECT_NEAR(res.step_s, h.step_s, 1e-12 * h.step_s);
		SKY_EXPECT(h.pipeline_step_s >= h.step_s * (1 - 1e-12));
		replicated += sky_hplan_boards(&h) > h.n_stages;
		rebatched += h.micro_batch != j.model.batch;
	}
	/* the fleets exercise what they are meant to */
	SKY_EXPECT_MSG(compared >= 40 && replicated >= 3 && rebatched >= 3,
		       "compared %d, with replicas %d, another micro-batch size %d", compared,
		       replicated, rebatched);
	sky_hplan_free(&h);
}

/* Larger fleets (the search, not the exhaustive one): never slower than the
 * pipeline-only optimal, the bound below the step. Every stage of a plan
 * with replicas keeps its fixed-point sums (8 bytes a parameter, hybrid.c),
 * which a pipeline plan does not: where the pipeline optimal does not fit
 * once its stages keep them, the search may find nothing, and that is the
 * only refusal it may make. */
SKY_TEST(never_slower_than_the_pipeline_optimal)
{
	sky_rng r;
	sky_rng_seed(&r, 4242);
	sky_hplan h, hp;
	SKY_EXPECT_EQ(sky_hplan_alloc(&h, 33), 0);
	SKY_EXPECT_EQ(sky_hplan_alloc(&hp, 33), 0);
	int compared = 0;
	for (int it = 0; it < 24; it++) {
		sky_job j;
		int n = 5 + (int)sky_rng_below(&r, 12);
		test_job(&j, 2 + (int)sky_rng_below(&r, 10), 2 + (int)sky_rng_below(&r, 10),
			 (sky_sched)(it % 2));
		test_random_fleet(&r, n, &j, (int)sky_rng_below(&r, 8), &g_f);
		sky_job jp = j;
		jp.objective = SKY_OBJ_STEP;
		if (sky_plan_partition(&g_f, &jp, SKY_ALGO_OPTIMAL, &g_p, NULL))
			continue;
		SKY_EXPECT_EQ(sky_sim_run(&g_p, &j, &g_r, NULL), 0);
		int rc = sky_plan_hybrid(&g_f, &j, &h, NULL);
		if (rc == SKY_ENOMEM) {
			/* only when the pipeline plan, its sums kept, does not fit */
			SKY_EXPECT_EQ(sky_hplan_from_plan(&g_f, &j, &g_p, &hp, NULL), SKY_ENOMEM);
			continue;
		}
		SKY_EXPECT_EQ(rc, 0);
		compared++;
		SKY_EXPECT_MSG(h.step_s <= g_r.step_s * (1 + 1e-12), "fleet %d: %.9g, pipeline %.9g",
			       it, h.step_s, g_r.step_s);
		SKY_EXPECT(!h.step_exact);
		SKY_EXPECT(h.step_lower_bound_s > 0 && h.step_lower_bound_s <= h.step_s);
	}
	SKY_EXPECT_MSG(compared >= 16, "only %d fleets compared", compared);
	sky_hplan_free(&h);
	sky_hplan_free(&hp);
}

SKY_TEST(refusals_say_why)
{
	sky_rng r;
	sky_rng_seed(&r, 7);
	sky_job j;
	test_job(&j, 2, 4, SKY_SCHED_1F1B);
	test_random_fleet(&r, 3, &j, 0, &g_f);
	sky_hplan h;
	SKY_EXPECT_EQ(sky_hplan_alloc(&h, 4), 0);
	struct {
		int what;
		const char *why;
	} cases[] = {{0, "training only"}, {1, "data owner"}, {2, "kept board order"},
		     {3, "one site (board b1 is in another)"}};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		sky_job x = j;
		sky_fleet *f = &g_f;
		if (cases[i].what == 0)
			x.infer = 1, x.prec = SKY_PREC_INT8, x.objective = SKY_OBJ_BOTTLENECK;
		if (cases[i].what == 1)
			snprintf(x.owner, sizeof x.owner, "b0");
		if (cases[i].what == 2)
			x.keep_order = 1;
		if (cases[i].what == 3)
			snprintf(f->board[1].site, sizeof f->board[1].site, "shop");
		sky_diag d;
		sky_diag_clear(&d);
		int rc = sky_plan_hybrid(f, &x, &h, &d);
		SKY_EXPECT_MSG(rc != 0 && strstr(d.msg, cases[i].why), "case %zu: rc %d, '%s'", i, rc,
			       d.msg);
		f->board[1].site[0] = 0;
	}
	sky_hplan_free(&h);
}
