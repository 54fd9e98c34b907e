/* The paper's experiment at full scale: 160-layer BERT-large on its 63
 * workers. The quality targets of issue 4 are asserted here. */
#include "sky_test.h"

#include "sky_plan.h"

#include <string.h>

static sky_fleet g_f, g_g;
static sky_plan g_even, g_sky, g_opt;

SKY_TEST(paper_quality_targets)
{
	sky_job j;
	SKY_EXPECT_EQ(sky_paper_job(&j), 0);
	sky_paper_fleet(&j, &g_f);
	SKY_EXPECT_EQ(g_f.n, 63);
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_plan_partition(&g_f, &j, SKY_ALGO_EVEN, &g_even, &d), 0);
	SKY_EXPECT_EQ(sky_plan_partition(&g_f, &j, SKY_ALGO_SKY, &g_sky, &d), 0);
	/* the targets of issue 4 are about the bottleneck */
	j.objective = SKY_OBJ_BOTTLENECK;
	SKY_EXPECT_EQ(sky_plan_partition(&g_f, &j, SKY_ALGO_OPTIMAL, &g_opt, &d), 0);
	double ratio = g_even.bottleneck_s / g_opt.bottleneck_s;
	double to_bound = g_opt.bottleneck_s / g_opt.lower_bound_s;
	SKY_EXPECT_MSG(ratio >= 2.0, "even/optimal bottleneck %.3f, target >= 2.0", ratio);
	SKY_EXPECT_MSG(to_bound <= 1.10, "optimal/lower bound %.4f, target <= 1.10", to_bound);
	SKY_EXPECT(g_opt.bottleneck_s <= g_sky.bottleneck_s);
	/* the published greedy leaves the even split's bottleneck where it was:
	 * worker 4 (7x slower) keeps its 3 layers */
	SKY_EXPECT_NEAR(g_sky.bottleneck_s, g_even.bottleneck_s, 1e-12);
	static sky_sim_result r;
	SKY_EXPECT_EQ(sky_sim_run(&g_opt, &j, &r, NULL), 0);
	double opt_step = r.step_s;
	SKY_EXPECT_EQ(sky_sim_run(&g_even, &j, &r, NULL), 0);
	SKY_EXPECT(opt_step < r.step_s);
	/* with the step objective (the default), leaving the slowest workers
	 * out shortens the step (fill and drain of 63 stages weigh heavily on
	 * 32 micro-batches), and it beats even and sky on the step */
	static sky_plan step_plan;
	j.objective = SKY_OBJ_STEP;
	SKY_EXPECT_EQ(sky_plan_partition(&g_f, &j, SKY_ALGO_OPTIMAL, &step_plan, NULL), 0);
	SKY_EXPECT_EQ(sky_sim_run(&step_plan, &j, &r, NULL), 0);
	SKY_EXPECT_MSG(r.step_s <= 0.97 * opt_step, "step objective %.3f s vs %.3f s", r.step_s,
		       opt_step);
	SKY_EXPECT(step_plan.n_stages < g_f.n);
	SKY_EXPECT_NEAR(step_plan.step_s, r.step_s, 1e-9 * r.step_s);
	double step = r.step_s;
	SKY_EXPECT_EQ(sky_sim_run(&g_sky, &j, &r, NULL), 0);
	SKY_EXPECT_MSG(step < r.step_s, "step objective %.3f s, sky %.3f s", step, r.step_s);
}

/* planner/data/paper-64.json is the same fleet sky_paper_fleet builds */
SKY_TEST(paper_fleet_file_matches)
{
	sky_job j;
	sky_paper_job(&j);
	sky_paper_fleet(&j, &g_f);
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_MSG(sky_fleet_load("planner/data/paper-64.json", &g_g, &d) == 0, "%s", d.msg);
	SKY_EXPECT_EQ(g_g.n, g_f.n);
	SKY_EXPECT(memcmp(g_f.board, g_g.board, sizeof(sky_board) * (size_t)g_f.n) == 0);
}
