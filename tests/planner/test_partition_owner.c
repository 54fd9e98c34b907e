/* U-shaped plans for a data owner (planner/partition_owner.c, the owner
 * parts of cost.c and sim.c). */
#include "sky_test.h"

#include "planner_util.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static sky_fleet g_f;
static sky_plan g_p, g_q;
static sky_sim_result g_r;

/* every op of both stages once, each stage in its order, S0's forward of
 * i before SL's, SL's backward of i before S0's */
SKY_TEST(owner_order_keeps_each_stage_and_its_dependencies)
{
	int stage[4 * 12], op[4 * 12];
	for (int s = 0; s < 2; s++)
		for (int P = 3; P <= 8; P++)
			for (int m = 1; m <= 12; m++)
				for (int lag = 0; lag <= 12; lag++) {
					int n = sky_plan_owner_order((sky_sched)s, P, m, lag, stage, op);
					SKY_EXPECT_EQ(n, 4 * m);
					int pos_f[2][12], pos_b[2][12], cnt[2] = {0, 0};
					memset(pos_f, -1, sizeof pos_f);
					memset(pos_b, -1, sizeof pos_b);
					for (int i = 0; i < n; i++) {
						int e = stage[i] == P - 1;
						SKY_EXPECT(stage[i] == 0 || stage[i] == P - 1);
						int mb = op[i] >= 0 ? op[i] : -op[i] - 1;
						SKY_EXPECT(mb >= 0 && mb < m);
						if (op[i] >= 0)
							pos_f[e][mb] = i;
						else
							pos_b[e][mb] = i;
						cnt[e]++;
					}
					SKY_EXPECT_EQ(cnt[0], 2 * m);
					SKY_EXPECT_EQ(cnt[1], 2 * m);
					for (int mb = 0; mb < m; mb++) {
						SKY_EXPECT(pos_f[0][mb] >= 0 && pos_b[1][mb] >= 0);
						SKY_EXPECT(pos_f[0][mb] < pos_f[1][mb]);
						SKY_EXPECT(pos_f[1][mb] < pos_b[1][mb]);
						SKY_EXPECT(pos_b[1][mb] < pos_b[0][mb]);
					}
				}
}

/* boards b0 (the owner) .. b(n-1), equal, links free */
static void equal_fleet(int n, double f, double b)
{
	memset(&g_f, 0, sizeof g_f);
	g_f.n = n;
	for (int i = 0; i < n; i++) {
		snprintf(g_f.board[i].id, SKY_BOARD_ID_MAX, "b%d", i);
		g_f.board[i].fwd_s = f, g_f.board[i].bwd_s = b;
		g_f.board[i].attn_share = 0.5;
		g_f.board[i].mem_bytes = 1ll << 40;
		g_f.board[i].bw_Bps = 1e300, g_f.board[i].lat_s = 0;
	}
}

/* a U-plan of P stages, one layer each, owner b0 at both ends */
static void u_plan(int P)
{
	memset(&g_p, 0, sizeof g_p);
	g_p.n_stages = P;
	for (int k = 0; k < P; k++) {
		g_p.stage[k].board = k == 0 || k == P - 1 ? 0 : k;
		g_p.stage[k].first_unit = 2 * k;
		g_p.stage[k].last_unit = 2 * k + 1;
	}
}

/* a 4-layer 1F1B job of 2 micro-batches owned by b0, on three equal boards,
 * in the U-plan of 4 stages */
static void owner_u_job(sky_job *j)
{
	test_job(j, 4, 2, SKY_SCHED_1F1B);
	snprintf(j->owner, sizeof j->owner, "b0");
	equal_fleet(3, 1.0, 2.0);
	u_plan(4);
}

/* the owner's board runs both of its stages: no schedule, P or lag lets
 * the simulator deadlock, and a step is never shorter than the owner's
 * work (4m ops on one CPU) nor than the serial chain of micro-batch 0 */
SKY_TEST(owner_sim_never_deadlocks_and_charges_one_cpu)
{
	for (int s = 0; s < 2; s++)
		for (int P = 3; P <= 7; P++)
			for (int m = 1; m <= 10; m++)
				for (int lag = 0; lag <= m + 1; lag++) {
					sky_job j;
					test_job(&j, P, m, (sky_sched)s);
					snprintf(j.owner, sizeof j.owner, "b0");
					equal_fleet(P - 1, 1.0, 2.0);
					u_plan(P);
					SKY_EXPECT_EQ(sky_plan_evaluate(&g_f, &j, &g_p, NULL), 0);
					SKY_EXPECT(g_p.owner == 1);
					g_p.owner_lag = lag;
					SKY_EXPECT_EQ(sky_sim_run(&g_p, &j, &g_r, NULL), 0);
					double owner_work = 2.0 * m * 3.0, chain = P * 3.0;
					SKY_EXPECT_MSG(g_r.step_s >= owner_work - 1e-9 &&
							       g_r.step_s >= chain - 1e-9,
						       "%s P %d m %d lag %d: step %g", sky_sched_name((sky_sched)s),
						       P, m, lag, g_r.step_s);
				}
}

/* worked by hand: 3 stages (owner, b1, owner), one layer each, f 1 b 2,
 * m 2, GPipe (the simulator's backwards last-in first-out: B1 then B0).
 * Lag 1: the owner runs S0 F0 0-1, F1 1-2; b1 F0 1-2, F1 2-3; owner SL F0
 * 2-3, F1 3-4, B1 4-6, B0 6-8; b1 B1 6-8, B0 8-10; owner S0 B1 8-10, B0
 * 10-12: 12. Lag 0 puts S0 B1 before SL B0: S0 B1 waits for b1 until 8
 * (8-10), SL B0 10-12, b1 B0 12-14, S0 B0 14-16: 16. */
SKY_TEST(owner_sim_matches_a_hand_worked_step)
{
	sky_job j;
	test_job(&j, 3, 2, SKY_SCHED_GPIPE);
	snprintf(j.owner, sizeof j.owner, "b0");
	equal_fleet(2, 1.0, 2.0);
	u_plan(3);
	SKY_EXPECT_EQ(sky_plan_evaluate(&g_f, &j, &g_p, NULL), 0);
	g_p.owner_lag = 0;
	SKY_EXPECT_EQ(sky_sim_run(&g_p, &j, &g_r, NULL), 0);
	SKY_EXPECT_NEAR(g_r.step_s, 16.0, 1e-9);
	g_p.owner_lag = 1;
	SKY_EXPECT_EQ(sky_sim_run(&g_p, &j, &g_r, NULL), 0);
	SKY_EXPECT_NEAR(g_r.step_s, 12.0, 1e-9);
	SKY_EXPECT_NEAR(g_r.busy_s[0], 6.0, 1e-9);
	SKY_EXPECT_NEAR(g_r.busy_s[2], 6.0, 1e-9);
	/* the owner's time is both of its segments */
	SKY_EXPECT_NEAR(g_p.owner_time_s, 6.0, 1e-9);
	SKY_EXPECT_NEAR(g_p.bottleneck_s, 6.0, 1e-9);
	SKY_EXPECT_EQ(g_p.bottleneck_stage, 0);
}

SKY_TEST(evaluate_refuses_what_is_not_u_shaped)
{
	sky_job j;
	sky_diag d;
	owner_u_job(&j);
	g_p.stage[2].board = 0; /* the owner in the middle too */
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_plan_evaluate(&g_f, &j, &g_p, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "board b0 holds two stages") != NULL);
	u_plan(4);
	g_p.stage[3].board = 2; /* last stage not the owner's */
	g_p.stage[2].board = 1;
	g_p.stage[1].board = 0;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_plan_evaluate(&g_f, &j, &g_p, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "must hold the first and the last") != NULL);
	/* without an owner, the same board twice stays refused */
	j.owner[0] = 0;
	j.model.layers = 3;
	u_plan(3);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_plan_evaluate(&g_f, &j, &g_p, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "holds two stages") != NULL);
	/* an owner the fleet lacks; sky as the algorithm */
	snprintf(j.owner, sizeof j.owner, "nope");
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_plan_partition(&g_f, &j, SKY_ALGO_OPTIMAL, &g_q, &d), SKY_ENOTFOUND);
	SKY_EXPECT(strstr(d.msg, "data owner nope") != NULL);
	snprintf(j.owner, sizeof j.owner, "b1");
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_plan_partition(&g_f, &j, SKY_ALGO_SKY, &g_q, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "not sky") != NULL);
}

/* the owner's two stages share its memory */
SKY_TEST(owner_memory_is_both_stages)
{
	sky_job j;
	sky_diag d;
	owner_u_job(&j);
	SKY_EXPECT_EQ(sky_plan_evaluate(&g_f, &j, &g_p, NULL), 0);
	int64_t both = g_p.stage[0].mem_bytes + g_p.stage[3].mem_bytes;
	g_f.board[0].mem_bytes = both - 1;
	SKY_EXPECT(g_p.stage[0].mem_bytes <= both - 1 && g_p.stage[3].mem_bytes <= both - 1);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_plan_evaluate(&g_f, &j, &g_p, &d), SKY_ENOMEM);
	SKY_EXPECT(strstr(d.msg, "board b0 (stage 3") != NULL);
	g_f.board[0].mem_bytes = both;
	SKY_EXPECT_EQ(sky_plan_evaluate(&g_f, &j, &g_p, NULL), 0);
}

/* ---- brute force ------------------------------------------------------------ */

typedef struct brute {
	const sky_fleet *f;
	const sky_job *j;
	int oi, U, m;
	int order[8], used[8];
	sky_plan p;
	double best;
	long plans;
} brute;

static void brute_cuts(brute *x, int k, int *cut, int i)
{
	if (i == k + 1) {
		sky_plan *p = &x->p;
		p->n_stages = k + 2;
		for (int s = 0; s < k + 2; s++) {
			p->stage[s].board = s == 0 || s == k + 1 ? x->oi : x->order[s - 1];
			p->stage[s].first_unit = s == 0 ? 0 : cut[s - 1];
			p->stage[s].last_unit = (s == k + 1 ? x->U : cut[s]) - 1;
		}
		if (sky_plan_evaluate(x->f, x->j, p, NULL) != 0)
			return;
		for (int lag = 0; lag <= x->m + k + 2; lag++) {
			sky_sim_result r;
			p->owner_lag = lag;
			x->plans++;
			if (sky_sim_run(p, x->j, &r, NULL) == 0 && r.step_s < x->best)
				x->best = r.step_s;
		}
		return;
	}
	int lo = i == 0 ? 1 : cut[i - 1] + 1;
	for (int u = lo; u <= x->U - (k + 1 - i); u++) {
		cut[i] = u;
		brute_cuts(x, k, cut, i + 1);
	}
}

static void brute_orders(brute *x, int depth)
{
	int cut[16];
	if (depth > 0 && depth + 2 <= x->U)
		brute_cuts(x, depth, cut, 0);
	for (int i = 0; i < x->f->n; i++) {
		if (i == x->oi || x->used[i])
			continue;
		x->used[i] = 1;
		x->order[depth] = i;
		brute_orders(x, depth + 1);
		x->used[i] = 0;
	}
}

static double brute_step(const sky_fleet *f, const sky_job *j, long *plans)
{
	static brute x;
	memset(&x, 0, sizeof x);
	x.f = f, x.j = j, x.U = 2 * j->model.layers, x.m = j->micro_batches;
	x.best = INFINITY;
	for (int i = 0; i < f->n; i++)
		if (!strcmp(f->board[i].id, j->owner))
			x.oi = i;
	/* the owner alone */
	x.p.n_stages = 1;
	x.p.stage[0].board = x.oi;
	x.p.stage[0].first_unit = 0;
	x.p.stage[0].last_unit = x.U - 1;
	sky_sim_result r;
	if (sky_plan_evaluate(f, j, &x.p, NULL) == 0 && sky_sim_run(&x.p, j, &r, NULL) == 0) {
		x.best = r.step_s;
		x.plans++;
	}
	brute_orders(&x, 0);
	*plans = x.plans;
	return x.best;
}

/* optimal with a data owner is the shortest simulated step over every
 * U-shaped plan (every ordered subset of the other boards, a, b, split and
 * lag); its heuristic (what larger fleets get) stays close */
SKY_TEST(owner_optimal_equals_brute_force_on_small_fleets)
{
	sky_rng r;
	sky_rng_seed(&r, 12);
	int cases = 0, exact = 0, alone = 0;
	long plans = 0;
	double gap_sum = 0, gap_max = 0;
	for (int t = 0; t < 60; t++) {
		sky_job j;
		int n = 3 + (int)sky_rng_below(&r, 2), layers = 2 + (int)sky_rng_below(&r, 2);
		int m = 1 + (int)sky_rng_below(&r, 4);
		test_job(&j, layers, m, sky_rng_below(&r, 2) ? SKY_SCHED_1F1B : SKY_SCHED_GPIPE);
		test_random_fleet(&r, n, &j, t % 3 == 0 ? FLEET_SLOW_LINKS : FLEET_PLAIN, &g_f);
		for (int i = 0; i < n; i++)
			g_f.board[i].mem_bytes = 1ll << 40;
		if (t % 4 == 1) /* sites, and a slow path between them */
			for (int i = 0; i < n; i++)
				snprintf(g_f.board[i].site, sizeof g_f.board[i].site, "%s",
					 i % 2 ? "shop" : "");
		if (t % 4 == 1) {
			g_f.n_links = 1;
			snprintf(g_f.link[0].a, sizeof g_f.link[0].a, "shop");
			g_f.link[0].b[0] = 0;
			g_f.link[0].bw_Bps = 2e5;
			g_f.link[0].lat_s = 0.01;
		}
		snprintf(j.owner, sizeof j.owner, "b%d", (int)sky_rng_below(&r, (uint32_t)n));
		long np = 0;
		double want = brute_step(&g_f, &j, &np);
		plans += np;
		sky_diag d;
		sky_diag_clear(&d);
		SKY_EXPECT_EQ(sky_plan_partition(&g_f, &j, SKY_ALGO_OPTIMAL, &g_p, &d), 0);
		SKY_EXPECT(g_p.owner == (g_p.n_stages >= 3));
		alone += g_p.n_stages == 1;
		SKY_EXPECT(g_p.n_stages != 2);
		SKY_EXPECT(g_p.stage[0].board == g_p.stage[g_p.n_stages - 1].board);
		SKY_EXPECT(!strcmp(g_f.board[g_p.stage[0].board].id, j.owner));
		SKY_EXPECT_EQ(sky_sim_run(&g_p, &j, &g_r, NULL), 0);
		SKY_EXPECT_MSG(fabs(g_r.step_s - want) <= 1e-9 * want,
			       "case %d (n %d L %d m %d %s): optimal %.9g, brute force %.9g", t, n,
			       layers, m, sky_sched_name(j.sched), g_r.step_s, want);
		exact += g_p.step_exact;
		/* the heuristic alone */
		j.no_exact = 1;
		SKY_EXPECT_EQ(sky_plan_partition(&g_f, &j, SKY_ALGO_OPTIMAL, &g_q, &d), 0);
		SKY_EXPECT_EQ(sky_sim_run(&g_q, &j, &g_r, NULL), 0);
		double gap = g_r.step_s / want - 1;
		SKY_EXPECT_MSG(gap >= -1e-9 && gap <= 0.10, "case %d: heuristic %.9g vs %.9g", t,
			       g_r.step_s, want);
		gap_sum += gap;
		if (gap > gap_max)
			gap_max = gap;
		cases++;
	}
	SKY_EXPECT_EQ(exact, cases);
	printf("  %d fleets (%d best with the owner alone), %ld plans simulated by brute force; "
	       "heuristic %.2f%% above on average, %.2f%% at worst\n",
	       cases, alone, plans, 100 * gap_sum / cases, 100 * gap_max);
	SKY_EXPECT(alone < cases); /* the U-shape is exercised */
}

/* even with an owner: layers in equal runs, the owner at both ends */
SKY_TEST(owner_even_splits_layers_equally)
{
	sky_job j;
	test_job(&j, 6, 4, SKY_SCHED_1F1B);
	snprintf(j.owner, sizeof j.owner, "b1");
	equal_fleet(3, 1.0, 2.0);
	SKY_EXPECT_EQ(sky_plan_partition(&g_f, &j, SKY_ALGO_EVEN, &g_p, NULL), 0);
	SKY_EXPECT_EQ(g_p.n_stages, 4);
	SKY_EXPECT_EQ(g_p.stage[0].board, 1);
	SKY_EXPECT_EQ(g_p.stage[1].board, 0);
	SKY_EXPECT_EQ(g_p.stage[2].board, 2);
	SKY_EXPECT_EQ(g_p.stage[3].board, 1);
	SKY_EXPECT_EQ(g_p.stage[0].last_unit, 3);
	SKY_EXPECT_EQ(g_p.stage[3].first_unit, 10);
	SKY_EXPECT_EQ(sky_sim_run(&g_p, &j, &g_r, NULL), 0);
}
