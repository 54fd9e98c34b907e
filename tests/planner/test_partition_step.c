/* `optimal` with the step objective (planner/partition_step.c): judged by
 * the simulator, against brute force and against the baselines. */
#include "sky_test.h"

#include "planner_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static sky_fleet g_f;
static sky_plan g_p, g_q;
static sky_sim_result g_r;

static double step_of(const sky_plan *p, const sky_job *j)
{
	if (sky_sim_run(p, j, &g_r, NULL))
		return NAN;
	return g_r.step_s;
}

/* On tiny fleets (up to 5 boards, up to 5 layers = 10 half-layer units),
 * both schedules, memory that binds or not, slow links or not, with and
 * without keep_order, some with identical boards: the plan's simulated step
 * equals the shortest over every order of every subset and every contiguous
 * split, and the planner says it is exact. */
SKY_TEST(step_equals_brute_force_on_small_fleets)
{
	sky_rng r;
	sky_rng_seed(&r, 2026);
	int checked = 0, infeasible = 0, mismatches = 0, not_exact = 0, left_out = 0, twins = 0;
	long plans = 0;
	for (int it = 0; it < 400; it++) {
		sky_job j;
		int layers = 1 + (int)sky_rng_below(&r, 5), n = 1 + (int)sky_rng_below(&r, 5);
		test_job(&j, layers, 1 + (int)sky_rng_below(&r, 8),
			 sky_rng_below(&r, 2) ? SKY_SCHED_1F1B : SKY_SCHED_GPIPE);
		j.keep_order = it % 5 == 4;
		test_random_fleet(&r, n, &j, (int)sky_rng_below(&r, 8), &g_f);
		/* a third of the fleets have boards with identical figures (the
		 * search tries such boards once: both must still be usable) */
		for (int i = 1; i < n && it % 3 == 1; i++) {
			if (sky_rng_below(&r, 2)) {
				sky_board *b = &g_f.board[i];
				*b = g_f.board[sky_rng_below(&r, (uint32_t)i)];
				snprintf(b->id, sizeof b->id, "b%d", i);
				twins++;
			}
		}
		long count = 0;
		double brute = test_brute_step(&g_f, &j, j.keep_order, &count);
		plans += count;
		sky_diag d;
		sky_diag_clear(&d);
		int rc = sky_plan_partition(&g_f, &j, SKY_ALGO_OPTIMAL, &g_p, &d);
		if (isinf(brute)) {
			infeasible++;
			SKY_EXPECT_MSG(rc == SKY_ENOMEM, "it %d: nothing fits, optimal rc %d", it, rc);
			continue;
		}
		SKY_EXPECT_MSG(rc == 0, "it %d: optimal failed (%s), brute force %g", it, d.msg, brute);
		if (rc)
			continue;
		checked++;
		SKY_EXPECT(test_plan_sane(&g_f, &j, &g_p));
		double step = step_of(&g_p, &j);
		SKY_EXPECT_MSG(fabs(step - g_p.step_s) <= 1e-12 * step, "it %d: plan says %.12g, sim %.12g",
			       it, g_p.step_s, step);
		if (!(fabs(step - brute) <= 1e-9 * brute)) {
			mismatches++;
			SKY_EXPECT_MSG(0, "it %d (n %d, L %d, m %d, %s%s): optimal %.12g, brute force %.12g",
				       it, n, layers, j.micro_batches, sky_sched_name(j.sched),
				       j.keep_order ? ", keep-order" : "", step, brute);
		}
		not_exact += !g_p.step_exact;
		left_out += g_p.n_stages < n;
	}
	/* the generator must reach every outcome */
	SKY_EXPECT_MSG(checked > 250, "checked %d", checked);
	SKY_EXPECT_MSG(infeasible > 10, "infeasible %d", infeasible);
	SKY_EXPECT_MSG(left_out > 20, "boards left out in %d", left_out);
	SKY_EXPECT_MSG(twins > 100, "twins %d", twins);
	SKY_EXPECT_EQ(mismatches, 0);
	SKY_EXPECT_EQ(not_exact, 0);
	SKY_EXPECT(plans > 100000);
}

/* Sites on top of a random fleet: 2 or 3 sites (the core among them a
 * third of the time), boards spread over them at random (so usually
 * interleaved), each site linked to the core (one in ten not: cuts between
 * such sites are then priced as within one), a direct link between two
 * sites a third of the time; a message holds a site path 2 to 62 ms
 * (compute is 10 to 80 ms a layer) and waits 0 to 20 ms more. */
static void site_fleet(sky_rng *r, int n, const sky_job *j, sky_fleet *f)
{
	static const char *const names[] = {"", "fac", "shop", "home"};
	test_random_fleet(r, n, j, (int)sky_rng_below(r, 8), f);
	int S = 2 + (int)sky_rng_below(r, 2), first = sky_rng_below(r, 3) == 0 ? 0 : 1;
	double cut = (double)sky_model_cut_bytes(&j->model);
	for (int i = 0; i < n; i++)
		snprintf(f->board[i].site, sizeof f->board[i].site, "%s",
			 names[first + (int)sky_rng_below(r, (uint32_t)S)]);
	f->n_links = 0;
	for (int s = first; s < first + S; s++) {
		if (!names[s][0] || sky_rng_below(r, 10) == 0)
			continue;
		sky_site_link *l = &f->link[f->n_links++];
		memset(l, 0, sizeof *l);
		snprintf(l->a, sizeof l->a, "%s", names[s]);
		l->bw_Bps = cut / (0.002 + 0.06 * sky_rng_uniform(r));
		l->lat_s = 0.02 * sky_rng_uniform(r);
	}
	if (names[first + S - 2][0] && sky_rng_below(r, 3) == 0) {
		sky_site_link *l = &f->link[f->n_links++];
		memset(l, 0, sizeof *l);
		snprintf(l->a, sizeof l->a, "%s", names[first + S - 2]);
		snprintf(l->b, sizeof l->b, "%s", names[first + S - 1]);
		l->bw_Bps = cut / (0.002 + 0.06 * sky_rng_uniform(r));
		l->lat_s = 0.02 * sky_rng_uniform(r);
	}
}

/* The heuristic alone (what fleets above 8 boards get) on these fleets,
 * measured 2026-12-02 with FIFO hops: optimal on 137 of 160, 0.38% above
 * on average, 6.74% at worst. The bound it is held to: */
#define HEUR_BOUND 1.10

/* The order search with sites, against brute force (every order of every
 * subset, every split, each plan priced by sky_plan_evaluate and
 * simulated): equal whenever the search says it is exact, which on these
 * sizes (2 to 7 boards) it must always be. */
SKY_TEST(step_with_sites_equals_brute_force_on_small_fleets)
{
	sky_rng r;
	sky_rng_seed(&r, 1212);
	int checked = 0, mismatches = 0, not_exact = 0, grouped = 0, crossing = 0;
	int heur_n = 0, heur_hit = 0;
	double heur_worst = 1, heur_sum = 0;
	long plans = 0;
	for (int it = 0; it < 160; it++) {
		sky_job j;
		int n = 2 + (int)sky_rng_below(&r, it % 8 == 7 ? 6 : 5);
		int layers = 1 + (int)sky_rng_below(&r, n > 6 ? 3 : 4);
		test_job(&j, layers, 1 + (int)sky_rng_below(&r, 6),
			 sky_rng_below(&r, 2) ? SKY_SCHED_1F1B : SKY_SCHED_GPIPE);
		site_fleet(&r, n, &j, &g_f);
		/* boards with identical figures in different sites are not
		 * interchangeable: the search must tell them apart */
		for (int i = 1; i < n && it % 3 == 1; i++) {
			if (sky_rng_below(&r, 2)) {
				sky_board *b = &g_f.board[i];
				char site[sizeof b->site];
				memcpy(site, b->site, sizeof site);
				*b = g_f.board[sky_rng_below(&r, (uint32_t)i)];
				memcpy(b->site, site, sizeof site);
				snprintf(b->id, sizeof b->id, "b%d", i);
			}
		}
		sky_diag d;
		sky_diag_clear(&d);
		SKY_EXPECT_MSG(sky_fleet_validate(&g_f, &d) == 0, "it %d: %s", it, d.msg);
		long count = 0;
		double brute = test_brute_step(&g_f, &j, 0, &count);
		plans += count;
		int rc = sky_plan_partition(&g_f, &j, SKY_ALGO_OPTIMAL, &g_p, &d);
		if (isinf(brute)) {
			SKY_EXPECT_MSG(rc == SKY_ENOMEM, "it %d: nothing fits, optimal rc %d", it, rc);
			continue;
		}
		SKY_EXPECT_MSG(rc == 0, "it %d: optimal failed (%s), brute force %g", it, d.msg, brute);
		if (rc)
			continue;
		checked++;
		SKY_EXPECT(test_plan_sane(&g_f, &j, &g_p));
		double step = step_of(&g_p, &j);
		SKY_EXPECT_MSG(fabs(step - g_p.step_s) <= 1e-12 * step,
			       "it %d: plan says %.12g, sim %.12g", it, g_p.step_s, step);
		if (!(fabs(step - brute) <= 1e-9 * brute)) {
			mismatches++;
			SKY_EXPECT_MSG(0, "it %d (n %d, L %d, m %d, %s): optimal %.12g, brute force %.12g",
				       it, n, layers, j.micro_batches, sky_sched_name(j.sched), step,
				       brute);
		}
		not_exact += !g_p.step_exact;
		crossing += g_p.cross_site_cuts > 0;
		/* the heuristic alone (seeds, site-grouped orders, local search),
		 * as on fleets above 8 boards */
		j.no_exact = 1;
		if (sky_plan_partition(&g_f, &j, SKY_ALGO_OPTIMAL, &g_q, &d) == 0) {
			double h = step_of(&g_q, &j) / brute;
			heur_worst = h > heur_worst ? h : heur_worst;
			heur_sum += h;
			heur_n++;
			heur_hit += h <= 1 + 1e-9;
		}
		/* how often the best plan keeps every site's stages together */
		int runs = 1;
		for (int k = 1; k < g_p.n_stages; k++)
			runs += !sky_site_eq(g_f.board[g_p.stage[k].board].site,
					     g_f.board[g_p.stage[k - 1].board].site);
		unsigned char seen[8] = {0};
		int sites_used = 0;
		for (int k = 0; k < g_p.n_stages; k++) {
			const char *st = g_f.board[g_p.stage[k].board].site;
			int idx = !st[0] ? 0 : !strcmp(st, "fac") ? 1 : !strcmp(st, "shop") ? 2 : 3;
			sites_used += !seen[idx]++;
		}
		grouped += runs == sites_used;
	}
	SKY_EXPECT_MSG(checked > 120, "checked %d", checked);
	SKY_EXPECT_MSG(crossing > 20, "plans crossing sites %d", crossing);
	SKY_EXPECT_EQ(mismatches, 0);
	SKY_EXPECT_EQ(not_exact, 0);
	SKY_EXPECT(plans > 100000);
	printf("  %d fleets with sites checked against %ld plans; %d best plans cross sites, %d "
	       "keep each site's stages together\n",
	       checked, plans, crossing, grouped);
	printf("  the heuristic alone: optimal on %d of %d, %.2f%% above on average, %.2f%% at "
	       "worst\n",
	       heur_hit, heur_n, 100 * (heur_sum / (heur_n ? heur_n : 1) - 1),
	       100 * (heur_worst - 1));
	SKY_EXPECT(heur_n == checked);
	SKY_EXPECT_MSG(heur_worst <= HEUR_BOUND, "heuristic %.4f x the optimum", heur_worst);
}

/* Fleets like the demo: speeds in powers of two from 1 down to
 * 1/32 (or any in between), listed fastest first half the time (as the
 * demo's are), layer times 20 / 35 ms at speed 1 with some spread, the
 * demo's link or a slower one, memory from plenty down to a few layers'
 * worth. */
static void spread_fleet(sky_rng *r, int n, const sky_job *j, sky_fleet *f)
{
	test_random_fleet(r, n, j, (int)sky_rng_below(r, 8), f); /* memory, ids */
	int sorted = (int)sky_rng_below(r, 2);
	for (int i = 0; i < n; i++) {
		sky_board *b = &f->board[i];
		double speed = sky_rng_below(r, 2) ? 1.0 / (1 << sky_rng_below(r, 6))
						   : 1.0 / (1 + 31 * sky_rng_uniform(r));
		b->fwd_s = 0.020 / speed;
		b->bwd_s = b->fwd_s * (1.5 + 0.5 * sky_rng_uniform(r));
		b->bw_Bps = sky_rng_below(r, 2) ? 1e8 : 1e7 * (1 + 9 * sky_rng_uniform(r));
		b->lat_s = 0.0006;
		/* insertion by speed, ids stay where they were */
		for (int k = i; sorted && k > 0 && f->board[k - 1].fwd_s > f->board[k].fwd_s; k--) {
			sky_board x = f->board[k];
			f->board[k] = f->board[k - 1];
			f->board[k - 1] = x;
		}
	}
	for (int i = 0; i < n; i++)
		snprintf(f->board[i].id, sizeof f->board[i].id, "b%d", i);
}

/* The property the issue asks for: on seeded random fleets of many sizes
 * (1 to 48 boards, 2 to 64 layers, 1 to 32 micro-batches, both schedules,
 * binding memory, slow links, slow boards first, speeds spread up to 32x),
 * `optimal`'s simulated step is never longer than `even`'s or `sky`'s, and
 * never longer than the bottleneck objective's. */
SKY_TEST(step_never_slower_than_even_or_sky)
{
	sky_rng r;
	sky_rng_seed(&r, 9);
	int fleets = 0, vs_even = 0, vs_sky = 0, beat_sky = 0, worse = 0, bounded = 0;
	for (int it = 0; it < 400; it++) {
		sky_job j;
		int n = 1 + (int)sky_rng_below(&r, it % 4 == 3 ? 48 : 12);
		int layers = 2 + (int)sky_rng_below(&r, it % 3 == 2 ? 63 : 24);
		test_job(&j, layers, 1 + (int)sky_rng_below(&r, 32),
			 sky_rng_below(&r, 2) ? SKY_SCHED_1F1B : SKY_SCHED_GPIPE);
		j.order_evals = 16;
		if (it % 2)
			spread_fleet(&r, n, &j, &g_f);
		else
			test_random_fleet(&r, n, &j, (int)sky_rng_below(&r, 8), &g_f);
		sky_diag d;
		sky_diag_clear(&d);
		int rc = sky_plan_partition(&g_f, &j, SKY_ALGO_OPTIMAL, &g_p, &d);
		double opt = rc ? INFINITY : step_of(&g_p, &j);
		if (!rc) {
			SKY_EXPECT(test_plan_sane(&g_f, &j, &g_p));
			/* the lower bound is one: at most the steps of plans that exist */
			SKY_EXPECT_MSG(g_p.step_lower_bound_s > 0 &&
					       g_p.step_lower_bound_s <= opt * (1 + 1e-12),
				       "it %d: lower bound %.9g, step %.9g", it,
				       g_p.step_lower_bound_s, opt);
			bounded += g_p.step_lower_bound_s < opt * (1 - 1e-9);
		}
		fleets += rc == 0;
		for (int a = 0; a < 3; a++) {
			sky_job jb = j;
			sky_algo algo = a == 0 ? SKY_ALGO_EVEN : a == 1 ? SKY_ALGO_SKY : SKY_ALGO_OPTIMAL;
			jb.objective = SKY_OBJ_BOTTLENECK;
			if (sky_plan_partition(&g_f, &jb, algo, &g_q, NULL))
				continue; /* does not fit: nothing to beat */
			SKY_EXPECT_MSG(rc == 0, "it %d: %s fits but optimal fails: %s", it,
				       sky_algo_name(algo), d.msg);
			double other = step_of(&g_q, &j);
			if (!(opt <= other * (1 + 1e-12))) {
				worse++;
				SKY_EXPECT_MSG(0, "it %d (n %d, L %d, m %d, %s): optimal %.9g s, %s%s %.9g s",
					       it, n, layers, j.micro_batches, sky_sched_name(j.sched),
					       opt, sky_algo_name(algo),
					       a == 2 ? " (bottleneck)" : "", other);
			}
			vs_even += a == 0;
			vs_sky += a == 1;
			beat_sky += a == 1 && opt < other * 0.99;
		}
	}
	SKY_EXPECT_MSG(fleets >= 300, "fleets %d", fleets);
	SKY_EXPECT_MSG(vs_even >= 200 && vs_sky >= 200, "compared with even %d, sky %d", vs_even,
		       vs_sky);
	SKY_EXPECT_MSG(beat_sky >= 100, "beat sky by 1%% or more %d times", beat_sky);
	SKY_EXPECT_EQ(worse, 0);
	SKY_EXPECT_MSG(bounded > 50, "not exact, with a bound below: %d", bounded);
}

/* The demo fleet of issue 9 (planner/data/demo-6.json): mini, 24 layers, 8
 * micro-batches, six boards of speed 1/2, 1/4, 1/4, 1/8, 1/8, 1/16, layer
 * forward / backward 20 / 35 ms at speed 1, 4 GiB each, 100 MB/s and 0.6 ms
 * to the broker (the link that reproduces the figures: sky 12.60 s,
 * optimal by bottleneck 13.28 s). optimal by step must not lose to sky,
 * under either schedule, and is exact there. */
SKY_TEST(demo_fleet_step_beats_sky)
{
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_MSG(sky_fleet_load("planner/data/demo-6.json", &g_f, &d) == 0, "%s", d.msg);
	SKY_EXPECT_EQ(g_f.n, 6);
	SKY_EXPECT_NEAR(g_f.board[5].fwd_s, 0.020 * 16, 1e-12);
	for (int s = 0; s < 2; s++) {
		sky_job j;
		SKY_EXPECT_EQ(sky_job_init(&j, "mini"), 0);
		j.model.layers = 24;
		j.micro_batches = 8;
		j.sched = (sky_sched)s;
		SKY_EXPECT_EQ(sky_plan_partition(&g_f, &j, SKY_ALGO_SKY, &g_q, NULL), 0);
		double sky = step_of(&g_q, &j);
		j.objective = SKY_OBJ_BOTTLENECK;
		SKY_EXPECT_EQ(sky_plan_partition(&g_f, &j, SKY_ALGO_OPTIMAL, &g_q, NULL), 0);
		double bott = step_of(&g_q, &j);
		if (s == SKY_SCHED_1F1B) {
			/* the figures, so this is the fleet it meant */
			SKY_EXPECT_MSG(fabs(sky - 12.60) < 0.005, "sky %.4f s", sky);
			SKY_EXPECT_MSG(fabs(bott - 13.28) < 0.005, "bottleneck %.4f s", bott);
		}
		j.objective = SKY_OBJ_STEP;
		SKY_EXPECT_EQ(sky_plan_partition(&g_f, &j, SKY_ALGO_OPTIMAL, &g_p, NULL), 0);
		double step = step_of(&g_p, &j);
		SKY_EXPECT_MSG(step <= sky, "%s: optimal %.4f s, sky %.4f s", sky_sched_name(j.sched),
			       step, sky);
		SKY_EXPECT(step <= bott);
		SKY_EXPECT_EQ(g_p.step_exact, 1); /* six boards: the branch and bound finishes */
	}
}

/* The default objective is the step; `bottleneck` keeps the exact
 * minimum-bottleneck plan (same as before this objective existed). */
SKY_TEST(default_objective_is_the_step)
{
	sky_job j;
	SKY_EXPECT_EQ(sky_job_init(&j, "tiny"), 0);
	SKY_EXPECT_EQ(j.objective, SKY_OBJ_STEP);
	sky_objective o;
	SKY_EXPECT_EQ(sky_objective_parse("bottleneck", &o), 0);
	SKY_EXPECT_EQ(o, SKY_OBJ_BOTTLENECK);
	SKY_EXPECT_EQ(sky_objective_parse("step", &o), 0);
	SKY_EXPECT_EQ(o, SKY_OBJ_STEP);
	SKY_EXPECT_EQ(sky_objective_parse("fastest", &o), SKY_EINVAL);
}

/* --link-blind is Sky before sites: the same plan as for the fleet with
 * every site name removed, bit for bit */
SKY_TEST(link_blind_plans_as_if_there_were_no_sites)
{
	sky_rng r;
	sky_rng_seed(&r, 77);
	for (int it = 0; it < 40; it++) {
		sky_job j;
		int n = 2 + (int)sky_rng_below(&r, 10);
		test_job(&j, 2 + (int)sky_rng_below(&r, 12), 1 + (int)sky_rng_below(&r, 8),
			 sky_rng_below(&r, 2) ? SKY_SCHED_1F1B : SKY_SCHED_GPIPE);
		j.objective = it % 2 ? SKY_OBJ_STEP : SKY_OBJ_BOTTLENECK;
		site_fleet(&r, n, &j, &g_f);
		j.link_blind = 1;
		int rc1 = sky_plan_partition(&g_f, &j, SKY_ALGO_OPTIMAL, &g_p, NULL);
		for (int i = 0; i < n; i++)
			memset(g_f.board[i].site, 0, sizeof g_f.board[i].site);
		g_f.n_links = 0;
		j.link_blind = 0;
		int rc2 = sky_plan_partition(&g_f, &j, SKY_ALGO_OPTIMAL, &g_q, NULL);
		SKY_EXPECT_EQ(rc1, rc2);
		if (rc1 || rc2)
			continue;
		SKY_EXPECT_EQ(g_p.n_stages, g_q.n_stages);
		for (int k = 0; k < g_p.n_stages && k < g_q.n_stages; k++)
			SKY_EXPECT(g_p.stage[k].board == g_q.stage[k].board &&
				   g_p.stage[k].first_unit == g_q.stage[k].first_unit &&
				   g_p.stage[k].last_unit == g_q.stage[k].last_unit);
		SKY_EXPECT(g_p.step_s == g_q.step_s && g_p.bottleneck_s == g_q.bottleneck_s);
	}
}

/* The paper's setting (issue 12): 3 sites x 3 boards of unequal speed,
 * listed interleaved, site paths of 20 Mbit/s, mini with 24 layers. The
 * link-blind optimal plan crosses sites at most cuts, and its steady state
 * is held up by uplinks that several of its streams share; link-aware
 * optimal keeps sites together. Every plan is judged by the same
 * link-aware simulation. */
SKY_TEST(geo_fleet_link_aware_beats_link_blind)
{
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_MSG(sky_fleet_load("planner/data/geo-3x3.json", &g_f, &d) == 0, "%s", d.msg);
	SKY_EXPECT_EQ(g_f.n, 9);
	SKY_EXPECT_EQ(g_f.n_links, 3);
	SKY_EXPECT_NEAR(g_f.link[0].bw_Bps, 20e6 / 8, 0);
	for (int i = 0; i < 9; i++) /* interleaved: no two neighbours share a site */
		SKY_EXPECT(i == 0 || !sky_site_eq(g_f.board[i].site, g_f.board[i - 1].site));
	sky_job j;
	SKY_EXPECT_EQ(sky_job_init(&j, "mini"), 0);
	j.model.layers = 24;
	j.micro_batches = 8;
	sky_sim_result *res = malloc(sizeof *res);
	SKY_EXPECT(res != NULL);
	if (!res)
		return;
	double step[3];
	int cuts[3];
	for (int a = 0; a < 3; a++) {
		sky_job pj = j;
		pj.link_blind = a == 1;
		SKY_EXPECT_EQ(sky_plan_partition(&g_f, &pj, a == 0 ? SKY_ALGO_EVEN : SKY_ALGO_OPTIMAL,
						 &g_p, &d),
			      0);
		/* judged with sites priced, whatever chose it */
		SKY_EXPECT_EQ(sky_plan_evaluate(&g_f, &j, &g_p, &d), 0);
		SKY_EXPECT_EQ(sky_sim_run(&g_p, &j, res, &d), 0);
		step[a] = res->step_s;
		cuts[a] = g_p.cross_site_cuts;
		SKY_EXPECT_NEAR(g_p.wan_bytes_per_step,
				2.0 * 8 * (double)sky_model_cut_bytes(&j.model) * cuts[a], 0);
	}
	free(res);
	printf("  even %.2f s (%d cuts cross sites), optimal --link-blind %.2f s (%d), optimal "
	       "%.2f s (%d): %.2fx\n",
	       step[0], cuts[0], step[1], cuts[1], step[2], cuts[2], step[1] / step[2]);
	SKY_EXPECT_EQ(cuts[0], 8);
	SKY_EXPECT(cuts[2] <= 2 && cuts[2] < cuts[1]);
	SKY_EXPECT_MSG(step[1] >= 1.3 * step[2], "link-aware %.3f s, link-blind %.3f s", step[2],
		       step[1]);
	SKY_EXPECT(step[2] < step[0]);
}
