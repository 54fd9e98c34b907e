/* Helpers shared by the planner tests: seeded random fleets and an
 * exhaustive search to check `optimal` against. */
#ifndef SKY_PLANNER_UTIL_H
#define SKY_PLANNER_UTIL_H

#include "sky_plan.h"
#include "sky_rng.h"

enum {
	FLEET_PLAIN = 0,
	FLEET_SLOW_FIRST = 1, /* the slowest boards come first */
	FLEET_MEM_BOUND = 2,  /* budgets near what a few units need */
	FLEET_SLOW_LINKS = 4, /* links whose send time rivals compute */
};

/* n boards with random times (speed spread up to 8x), budgets and links
 * for job j, shaped by flags (FLEET_*). */
void test_random_fleet(sky_rng *r, int n, const sky_job *j, int flags, sky_fleet *f);
/* A tiny-preset job with `layers` layers, m micro-batches, a schedule. */
void test_job(sky_job *j, int layers, int m, sky_sched s);
/* Smallest bottleneck over every subsequence of order[0..n) and every
 * contiguous split of the units over it that fits memory (evaluated with
 * sky_plan_evaluate). INFINITY when nothing fits. Small n and layers only. */
double test_exhaustive(const sky_fleet *f, const sky_job *j, const int *order, int n);
/* Checks coverage, contiguity, one stage per board and memory directly
 * (independently of sky_plan_evaluate). Returns 1 when all hold. */
int test_plan_sane(const sky_fleet *f, const sky_job *j, const sky_plan *p);



/* An independent exact method for medium sizes: dynamic programming over
 * (boards used from the front, units covered, stages after) with the cost
 * model re-derived here from sky_cost.h and the board fields, trying every
 * start for every stage (no bisection, no monotonicity assumed). Returns
 * the smallest bottleneck, INFINITY when nothing fits. n <= 16, layers <= 32. */
double test_dp_optimum(const sky_fleet *f, const sky_job *j, const int *order, int n);

/* Brute force for the step objective: the shortest sky_sim_run step over
 * every order of every subset of the fleet's boards (only the fleet's order
 * with keep_order) and every contiguous split of the units, within memory
 * (sky_plan_evaluate). INFINITY when nothing fits; *plans (if not NULL)
 * counts the plans simulated. Tiny fleets only (n <= 16, and mind n! x
 * C(2L - 1, n - 1)). */
double test_brute_step(const sky_fleet *f, const sky_job *j, int keep_order, long *plans);
#endif
