#include "sky_test.h"

#include "planner_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static sky_fleet g_f;
static sky_plan g_p, g_q;

static int rel_eq(double a, double b) { return fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b)); }

/* optimal for the given order equals exhaustive search, on small seeded
 * instances of every kind (plain, slow first, memory bound, slow links) */
SKY_TEST(optimal_equals_exhaustive_search_on_small_instances)
{
	sky_rng r;
	sky_rng_seed(&r, 42);
	int order[8], checked = 0, infeasible = 0, mismatches = 0;
	for (int it = 0; it < 1500; it++) {
		sky_job j;
		int layers = 1 + (int)sky_rng_below(&r, 4), n = 1 + (int)sky_rng_below(&r, 5);
		test_job(&j, layers, 1 + (int)sky_rng_below(&r, 6),
			 sky_rng_below(&r, 2) ? SKY_SCHED_1F1B : SKY_SCHED_GPIPE);
		test_random_fleet(&r, n, &j, (int)sky_rng_below(&r, 8), &g_f);
		for (int i = 0; i < n; i++)
			order[i] = i;
		/* half the time a shuffled order, of a subset */
		int n_order = n;
		if (it % 2) {
			for (int i = n - 1; i > 0; i--) {
				int k = (int)sky_rng_below(&r, (uint32_t)i + 1), t = order[i];
				order[i] = order[k], order[k] = t;
			}
			n_order = 1 + (int)sky_rng_below(&r, (uint32_t)n);
		}
		double ex = test_exhaustive(&g_f, &j, order, n_order);
		sky_diag d;
		sky_diag_clear(&d);
		int rc = sky_plan_optimal_order(&g_f, &j, order, n_order, &g_p, &d);
		if (isinf(ex)) {
			infeasible++;
			SKY_EXPECT_MSG(rc == SKY_ENOMEM, "it %d: exhaustive finds nothing, optimal rc %d",
				       it, rc);
			continue;
		}
		SKY_EXPECT_MSG(rc == 0, "it %d: optimal failed (%s) where exhaustive found %g", it,
			       d.msg, ex);
		if (rc)
			continue;
		checked++;
		if (!rel_eq(g_p.bottleneck_s, ex)) {
			mismatches++;
			SKY_EXPECT_MSG(0, "it %d: optimal %.12g vs exhaustive %.12g (n %d, L %d)", it,
				       g_p.bottleneck_s, ex, n_order, layers);
		}
		SKY_EXPECT(test_plan_sane(&g_f, &j, &g_p));
	}
	/* the generator must exercise both outcomes */
	SKY_EXPECT(checked > 1000);
	SKY_EXPECT(infeasible > 20);
	SKY_EXPECT_EQ(mismatches, 0);
}

/* With sites, the minimum-bottleneck split for an order prices a cut as if
 * it had its site path alone; on orders whose sites come in blocks and
 * whose sites are joined by links of their own, no two streams share a
 * hop, so it must equal exhaustive search with every cut priced (the
 * path's time per message counting toward the bottleneck). */
SKY_TEST(optimal_with_sites_equals_exhaustive_search_for_an_order)
{
	static const char *const names[3] = {"fac", "shop", "home"};
	sky_rng r;
	sky_rng_seed(&r, 4242);
	int order[8], checked = 0, mismatches = 0, path_bound = 0, crossing = 0;
	for (int it = 0; it < 600; it++) {
		sky_job j;
		int layers = 1 + (int)sky_rng_below(&r, 4), n = 2 + (int)sky_rng_below(&r, 5);
		test_job(&j, layers, 1 + (int)sky_rng_below(&r, 6),
			 sky_rng_below(&r, 2) ? SKY_SCHED_1F1B : SKY_SCHED_GPIPE);
		test_random_fleet(&r, n, &j, (int)sky_rng_below(&r, 8), &g_f);
		int S = 2 + (int)sky_rng_below(&r, 2), site = 0;
		for (int i = 0; i < n; i++) {
			order[i] = i;
			if (i > 0 && site < S - 1 && sky_rng_below(&r, 2))
				site++;
			snprintf(g_f.board[i].site, sizeof g_f.board[i].site, "%s", names[site]);
		}
		double cut = (double)sky_model_cut_bytes(&j.model);
		g_f.n_links = 0;
		for (int a = 0; a < S; a++)
			for (int b = a + 1; b < S; b++) {
				sky_site_link *l = &g_f.link[g_f.n_links++];
				memset(l, 0, sizeof *l);
				snprintf(l->a, sizeof l->a, "%s", names[a]);
				snprintf(l->b, sizeof l->b, "%s", names[b]);
				l->bw_Bps = cut / (0.002 + 0.05 * sky_rng_uniform(&r));
				l->lat_s = 0.01 * sky_rng_uniform(&r);
			}
		double ex = test_exhaustive(&g_f, &j, order, n);
		sky_diag d;
		sky_diag_clear(&d);
		int rc = sky_plan_optimal_order(&g_f, &j, order, n, &g_p, &d);
		if (isinf(ex)) {
			SKY_EXPECT_MSG(rc == SKY_ENOMEM, "it %d: exhaustive finds nothing, rc %d", it, rc);
			continue;
		}
		SKY_EXPECT_MSG(rc == 0, "it %d: optimal failed (%s)", it, d.msg);
		if (rc)
			continue;
		checked++;
		path_bound += g_p.bottleneck_s > g_p.stage[g_p.bottleneck_stage].time_s;
		crossing += g_p.cross_site_cuts > 0;
		if (!rel_eq(g_p.bottleneck_s, ex)) {
			mismatches++;
			SKY_EXPECT_MSG(0, "it %d: optimal %.12g vs exhaustive %.12g (n %d, L %d)", it,
				       g_p.bottleneck_s, ex, n, layers);
		}
	}
	SKY_EXPECT_MSG(checked > 400, "checked %d", checked);
	/* the optimum mostly avoids a slow path; some must cross, a few be held up by it */
	SKY_EXPECT_MSG(crossing > 100, "plans crossing sites: %d", crossing);
	SKY_EXPECT_MSG(path_bound > 0, "plans held up by a site path: %d", path_bound);
	SKY_EXPECT_EQ(mismatches, 0);
}

/* optimal by bottleneck never loses to even or sky on the bottleneck, with
 * or without reordering, on thousands of seeded fleets; every plan keeps
 * the invariants (the step objective's own property is in
 * test_partition_step.c) */
SKY_TEST(optimal_never_loses_to_even_or_sky)
{
	sky_rng r;
	sky_rng_seed(&r, 7);
	int cmp_even = 0, cmp_sky = 0, strictly_better = 0;
	for (int it = 0; it < 3000; it++) {
		sky_job j;
		int layers = 2 + (int)sky_rng_below(&r, 30), n = 1 + (int)sky_rng_below(&r, 16);
		int flags = (int)sky_rng_below(&r, 8);
		test_job(&j, layers, 1 + (int)sky_rng_below(&r, 12),
			 sky_rng_below(&r, 2) ? SKY_SCHED_1F1B : SKY_SCHED_GPIPE);
		j.order_evals = 8;
		j.objective = SKY_OBJ_BOTTLENECK;
		test_random_fleet(&r, n, &j, flags, &g_f);
		sky_diag d;
		sky_diag_clear(&d);
		int rc_opt = sky_plan_partition(&g_f, &j, SKY_ALGO_OPTIMAL, &g_p, &d);
		double opt = rc_opt ? INFINITY : g_p.bottleneck_s;
		if (!rc_opt)
			SKY_EXPECT_MSG(test_plan_sane(&g_f, &j, &g_p), "it %d: optimal plan broken", it);
		j.keep_order = 1;
		int rc_keep = sky_plan_partition(&g_f, &j, SKY_ALGO_OPTIMAL, &g_q, NULL);
		/* reordering may find room the fleet's order lacks, never lose it */
		SKY_EXPECT_MSG(rc_keep != 0 || rc_opt == 0, "it %d: reordering lost a fit", it);
		if (!rc_keep) {
			SKY_EXPECT(test_plan_sane(&g_f, &j, &g_q));
			SKY_EXPECT_MSG(opt <= g_q.bottleneck_s * (1 + 1e-12),
				       "it %d: reordering made it worse: %g vs %g", it, opt,
				       g_q.bottleneck_s);
		}
		j.keep_order = 0;
		for (int a = 0; a < 2; a++) {
			sky_algo algo = a ? SKY_ALGO_SKY : SKY_ALGO_EVEN;
			if (sky_plan_partition(&g_f, &j, algo, &g_q, NULL) != 0)
				continue; /* does not fit: nothing to beat */
			SKY_EXPECT_MSG(test_plan_sane(&g_f, &j, &g_q), "it %d: %s plan broken", it,
				       sky_algo_name(algo));
			SKY_EXPECT_MSG(rc_opt == 0, "it %d: %s fits but optimal fails: %s", it,
				       sky_algo_name(algo), d.msg);
			SKY_EXPECT_MSG(opt <= g_q.bottleneck_s * (1 + 1e-12),
				       "it %d: optimal %.9g loses to %s %.9g", it, opt,
				       sky_algo_name(algo), g_q.bottleneck_s);
			if (opt < g_q.bottleneck_s * 0.999)
				strictly_better++;
			a ? cmp_sky++ : cmp_even++;
		}
	}
	SKY_EXPECT(cmp_even > 1000);
	SKY_EXPECT(cmp_sky > 1000);
	SKY_EXPECT(strictly_better > 1000);
}

SKY_TEST(impossible_job_names_the_shortfall)
{
	sky_job j;
	test_job(&j, 8, 4, SKY_SCHED_1F1B);
	sky_rng r;
	sky_rng_seed(&r, 1);
	test_random_fleet(&r, 3, &j, 0, &g_f);
	for (int i = 0; i < g_f.n; i++)
		g_f.board[i].mem_bytes = 1000;
	for (int a = 0; a < SKY_ALGO_COUNT; a++) {
		sky_diag d;
		sky_diag_clear(&d);
		SKY_EXPECT_EQ(sky_plan_partition(&g_f, &j, (sky_algo)a, &g_p, &d), SKY_ENOMEM);
		SKY_EXPECT_MSG(strstr(d.msg, "short by") != NULL, "%s: %s", sky_algo_name(a), d.msg);
	}
	sky_diag d;
	sky_diag_clear(&d);
	sky_plan_partition(&g_f, &j, SKY_ALGO_OPTIMAL, &g_p, &d);
	SKY_EXPECT(strstr(d.msg, "does not fit") && strstr(d.msg, "GiB"));
}

/* one layer, two equal boards: whole layers cannot split it, half-layers can */
SKY_TEST(half_layers_split_a_layer_between_boards)
{
	sky_job j;
	test_job(&j, 1, 4, SKY_SCHED_GPIPE);
	memset(&g_f, 0, sizeof g_f);
	g_f.n = 2;
	for (int i = 0; i < 2; i++) {
		snprintf(g_f.board[i].id, SKY_BOARD_ID_MAX, "b%d", i);
		g_f.board[i].fwd_s = 1, g_f.board[i].bwd_s = 2;
		g_f.board[i].attn_share = 0.5;
		g_f.board[i].mem_bytes = 1ll << 30;
		g_f.board[i].bw_Bps = 1e15, g_f.board[i].lat_s = 0;
	}
	SKY_EXPECT_EQ(sky_plan_partition(&g_f, &j, SKY_ALGO_OPTIMAL, &g_p, NULL), 0);
	SKY_EXPECT_EQ(g_p.n_stages, 2);
	SKY_EXPECT_EQ(g_p.stage[0].last_unit, 0); /* the attention block */
	SKY_EXPECT_NEAR(g_p.bottleneck_s, 1.5, 1e-6);
	SKY_EXPECT_EQ(sky_plan_partition(&g_f, &j, SKY_ALGO_EVEN, &g_q, NULL), 0);
	SKY_EXPECT_EQ(g_q.n_stages, 1);
	SKY_EXPECT_NEAR(g_q.bottleneck_s, 3.0, 1e-9);
}

/* a board whose link alone takes longer than the whole model elsewhere is
 * left out; the order keeps the others */
SKY_TEST(a_board_that_slows_the_pipeline_is_left_out)
{
	sky_job j;
	test_job(&j, 4, 4, SKY_SCHED_1F1B);
	memset(&g_f, 0, sizeof g_f);
	g_f.n = 3;
	for (int i = 0; i < 3; i++) {
		snprintf(g_f.board[i].id, SKY_BOARD_ID_MAX, "b%d", i);
		g_f.board[i].fwd_s = 1, g_f.board[i].bwd_s = 2;
		g_f.board[i].mem_bytes = 1ll << 30;
		g_f.board[i].bw_Bps = 1e15, g_f.board[i].lat_s = 0.001;
	}
	g_f.board[1].lat_s = 100; /* a satellite link */
	j.keep_order = 1;
	SKY_EXPECT_EQ(sky_plan_partition(&g_f, &j, SKY_ALGO_OPTIMAL, &g_p, NULL), 0);
	SKY_EXPECT_EQ(g_p.n_stages, 2);
	SKY_EXPECT(g_p.stage[0].board == 0 && g_p.stage[1].board == 2);
	SKY_EXPECT(g_p.bottleneck_s < 7);
	/* even and sky must use it, and pay */
	SKY_EXPECT_EQ(sky_plan_partition(&g_f, &j, SKY_ALGO_EVEN, &g_q, NULL), 0);
	SKY_EXPECT(g_q.bottleneck_s > 200);
}

/* The paper's balancer as published: a worker below the mean takes layers
 * from its successor, but an overloaded one never gives any back. */
SKY_TEST(sky_moves_boundaries_one_way_only)
{
	sky_job j;
	test_job(&j, 9, 2, SKY_SCHED_GPIPE);
	j.objective = SKY_OBJ_BOTTLENECK; /* it compares bottlenecks */
	memset(&g_f, 0, sizeof g_f);
	g_f.n = 3;
	const double t[3] = {1, 3, 1}; /* a slow board in the middle */
	for (int i = 0; i < 3; i++) {
		snprintf(g_f.board[i].id, SKY_BOARD_ID_MAX, "b%d", i);
		g_f.board[i].fwd_s = t[i], g_f.board[i].bwd_s = 2 * t[i];
		g_f.board[i].mem_bytes = 1ll << 30;
		g_f.board[i].bw_Bps = 1e15, g_f.board[i].lat_s = 0;
	}
	SKY_EXPECT_EQ(sky_plan_partition(&g_f, &j, SKY_ALGO_SKY, &g_p, NULL), 0);
	/* even: 3,3,3 layers -> workloads 3, 9, 3 (in layer FLOPs x fastest
	 * time), mean 5. Pass 1: worker 0 is below it and takes worker 1's
	 * first layer (4,2,3); worker 1 (6) is above, and the give-back branch
	 * is dead. Pass 2: workloads 4, 6, 3, mean 4.33: worker 0 takes another
	 * (5,1,3), then worker 1 (3) takes from worker 2 (5,2,2). Pass 3: mean
	 * 4.33 again, workers 0 and 1 are above it: done. */
	SKY_EXPECT_EQ(g_p.n_stages, 3);
	SKY_EXPECT_EQ(g_p.stage[0].last_unit + 1, 2 * 5);
	SKY_EXPECT_EQ(g_p.stage[1].last_unit + 1, 2 * 7);
	SKY_EXPECT_NEAR(g_p.bottleneck_s, 18.0, 1e-9); /* worker 1: 2 layers x 9 s */
	/* now the mirror image: the slow board first. The even split gives it
	 * 3 layers (9) and nothing can take them off it. */
	g_f.board[0].fwd_s = 3, g_f.board[0].bwd_s = 6;
	g_f.board[1].fwd_s = 1, g_f.board[1].bwd_s = 2;
	SKY_EXPECT_EQ(sky_plan_partition(&g_f, &j, SKY_ALGO_SKY, &g_p, NULL), 0);
	SKY_EXPECT_EQ(g_p.stage[0].last_unit + 1, 2 * 3);
	SKY_EXPECT_NEAR(g_p.bottleneck_s, 27.0, 1e-9);
	SKY_EXPECT_EQ(sky_plan_partition(&g_f, &j, SKY_ALGO_OPTIMAL, &g_q, NULL), 0);
	SKY_EXPECT(g_q.bottleneck_s < 0.5 * g_p.bottleneck_s);
}

SKY_TEST(memory_decides_the_split_and_is_respected)
{
	/* two equally fast boards, the first with room for about one layer:
	 * optimal must give the second more, and stay within both budgets */
	sky_job j;
	test_job(&j, 6, 4, SKY_SCHED_1F1B);
	memset(&g_f, 0, sizeof g_f);
	g_f.n = 2;
	for (int i = 0; i < 2; i++) {
		snprintf(g_f.board[i].id, SKY_BOARD_ID_MAX, "b%d", i);
		g_f.board[i].fwd_s = 1, g_f.board[i].bwd_s = 2;
		g_f.board[i].mem_bytes = 1ll << 30;
		g_f.board[i].bw_Bps = 1e15;
	}
	j.keep_order = 1;
	SKY_EXPECT_EQ(sky_plan_partition(&g_f, &j, SKY_ALGO_OPTIMAL, &g_p, NULL), 0);
	SKY_EXPECT_EQ(g_p.n_stages, 2);
	int64_t one_layer_first = g_p.stage[0].mem_bytes; /* 3 layers at this point */
	g_f.board[0].mem_bytes = one_layer_first / 2;
	SKY_EXPECT_EQ(sky_plan_partition(&g_f, &j, SKY_ALGO_OPTIMAL, &g_q, NULL), 0);
	SKY_EXPECT(test_plan_sane(&g_f, &j, &g_q));
	SKY_EXPECT(g_q.stage[0].last_unit < g_p.stage[0].last_unit);
	SKY_EXPECT(g_q.stage[0].mem_bytes <= g_f.board[0].mem_bytes);
	/* even ignores memory and is refused, naming the board */
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_plan_partition(&g_f, &j, SKY_ALGO_EVEN, &g_q, &d), SKY_ENOMEM);
	SKY_EXPECT_MSG(strstr(d.msg, "board b0") && strstr(d.msg, "short by"), "%s", d.msg);
}

SKY_TEST(plan_evaluate_refuses_broken_plans)
{
	sky_job j;
	test_job(&j, 3, 2, SKY_SCHED_GPIPE);
	sky_rng r;
	sky_rng_seed(&r, 3);
	test_random_fleet(&r, 3, &j, 0, &g_f);
	for (int i = 0; i < 3; i++)
		g_f.board[i].mem_bytes = 1ll << 40;
	g_p.n_stages = 2;
	g_p.stage[0] = (sky_stage){.board = 0, .first_unit = 0, .last_unit = 2};
	g_p.stage[1] = (sky_stage){.board = 1, .first_unit = 3, .last_unit = 5};
	SKY_EXPECT_EQ(sky_plan_evaluate(&g_f, &j, &g_p, NULL), 0);
	g_p.stage[1].first_unit = 4; /* a gap */
	SKY_EXPECT_EQ(sky_plan_evaluate(&g_f, &j, &g_p, NULL), SKY_EINVAL);
	g_p.stage[1].first_unit = 2; /* an overlap */
	SKY_EXPECT_EQ(sky_plan_evaluate(&g_f, &j, &g_p, NULL), SKY_EINVAL);
	g_p.stage[1] = (sky_stage){.board = 0, .first_unit = 3, .last_unit = 5}; /* same board */
	SKY_EXPECT_EQ(sky_plan_evaluate(&g_f, &j, &g_p, NULL), SKY_EINVAL);
	g_p.stage[1] = (sky_stage){.board = 1, .first_unit = 3, .last_unit = 4}; /* short */
	SKY_EXPECT_EQ(sky_plan_evaluate(&g_f, &j, &g_p, NULL), SKY_EINVAL);
}

/* medium instances (up to 12 boards, 16 layers) against an independent
 * dynamic programme that tries every split point of every stage */
SKY_TEST(optimal_equals_an_independent_dp_on_medium_instances)
{
	sky_rng r;
	sky_rng_seed(&r, 99);
	int order[16], checked = 0, infeasible = 0;
	for (int it = 0; it < 1500; it++) {
		sky_job j;
		int layers = 1 + (int)sky_rng_below(&r, 16), n = 1 + (int)sky_rng_below(&r, 12);
		test_job(&j, layers, 1 + (int)sky_rng_below(&r, 16),
			 sky_rng_below(&r, 2) ? SKY_SCHED_1F1B : SKY_SCHED_GPIPE);
		j.optim = (sky_optim)sky_rng_below(&r, 3);
		test_random_fleet(&r, n, &j, (int)sky_rng_below(&r, 8), &g_f);
		for (int i = 0; i < n; i++)
			order[i] = i;
		for (int i = n - 1; i > 0; i--) {
			int k = (int)sky_rng_below(&r, (uint32_t)i + 1), t = order[i];
			order[i] = order[k], order[k] = t;
		}
		double dp = test_dp_optimum(&g_f, &j, order, n);
		sky_diag d;
		sky_diag_clear(&d);
		int rc = sky_plan_optimal_order(&g_f, &j, order, n, &g_p, &d);
		if (isinf(dp)) {
			infeasible++;
			SKY_EXPECT_MSG(rc == SKY_ENOMEM, "it %d: dp finds nothing, optimal rc %d", it, rc);
			continue;
		}
		SKY_EXPECT_MSG(rc == 0, "it %d: optimal failed (%s), dp %g", it, d.msg, dp);
		if (rc)
			continue;
		checked++;
		SKY_EXPECT_MSG(rel_eq(g_p.bottleneck_s, dp), "it %d: optimal %.12g vs dp %.12g", it,
			       g_p.bottleneck_s, dp);
	}
	SKY_EXPECT(checked > 1000);
	SKY_EXPECT(infeasible > 20);
}
