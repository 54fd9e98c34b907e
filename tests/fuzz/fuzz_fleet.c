/* libFuzzer harness: fleet files over arbitrary bytes, then the planner on
 * whatever parses. Whatever the bytes, sky_fleet_parse returns 0 or an
 * error with a message, leaves the JSON pool empty, and a fleet it accepts
 * writes and parses back to the same boards. Every algorithm then, under
 * each of the two objectives `optimal` knows, either refuses the job or
 * returns a plan that keeps the invariants (all units once, in order, each
 * board's memory) and that the simulator runs; and `optimal` keeps the
 * promise of the objective it was given:
 *   step (the default)  its simulated step is no longer than even's or sky's
 *   bottleneck          its slowest stage is no slower than even's or sky's
 * (not the other way round: the shortest step may well have a larger
 * bottleneck, e.g. everything on one fast board, no fill or drain). */
#include "sky_json.h"
#include "sky_plan.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define REL_TOL 1e-12 /* a relative difference this small is rounding */

static sky_fleet g_f, g_back;
static sky_plan g_p[SKY_ALGO_COUNT];
static sky_sim_result g_r;

/* Plans the job with every algorithm; aborts on a broken invariant. */
static void check_objective(const sky_job *j)
{
	int ok[SKY_ALGO_COUNT];
	double step[SKY_ALGO_COUNT];
	for (int a = 0; a < SKY_ALGO_COUNT; a++) {
		ok[a] = sky_plan_partition(&g_f, j, (sky_algo)a, &g_p[a], NULL) == 0;
		if (!ok[a])
			continue;
		const sky_plan *p = &g_p[a];
		int next = 0;
		for (int k = 0; k < p->n_stages; k++) {
			const sky_stage *s = &p->stage[k];
			if (s->first_unit != next || s->last_unit < s->first_unit ||
			    s->mem_bytes > g_f.board[s->board].mem_bytes || !(s->time_s >= 0))
				abort();
			next = s->last_unit + 1;
		}
		if (next != 2 * j->model.layers)
			abort();
		if (sky_sim_run(p, j, &g_r, NULL) != 0 || !(g_r.step_s >= 0))
			abort();
		step[a] = g_r.step_s;
	}
	const sky_plan *opt = &g_p[SKY_ALGO_OPTIMAL];
	for (int a = SKY_ALGO_EVEN; a <= SKY_ALGO_SKY; a++) {
		if (!ok[a])
			continue;
		if (!ok[SKY_ALGO_OPTIMAL])
			abort(); /* a baseline found a plan that fits: so must optimal */
		double mine = j->objective == SKY_OBJ_STEP ? step[SKY_ALGO_OPTIMAL] : opt->bottleneck_s;
		double theirs = j->objective == SKY_OBJ_STEP ? step[a] : g_p[a].bottleneck_s;
		if (mine > theirs * (1 + REL_TOL))
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *copy = malloc(size ? size : 1); /* private copy: ASan sees overreads */
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	sky_diag d;
	sky_diag_clear(&d);
	int rc = sky_fleet_parse(copy, size, &g_f, &d);
	if (rc != 0 && d.msg[0] == 0)
		abort(); /* every refusal says why */
	if (sky_json_pool_used() != 0)
		abort();
	if (rc == 0) {
		static char buf[1 << 20];
		int n = sky_fleet_write(&g_f, NULL, buf, sizeof buf);
		if (n > 0) {
			if (sky_fleet_parse(buf, (size_t)n, &g_back, NULL) != 0 || g_back.n != g_f.n ||
			    memcmp(g_back.board, g_f.board, sizeof(sky_board) * (size_t)g_f.n) != 0)
				abort();
		}
		sky_job j;
		sky_job_init(&j, "tiny");
		j.model.layers = 1 + (int)(size % 12);
		j.micro_batches = 1 + (int)(size % 5);
		j.sched = size % 2 ? SKY_SCHED_1F1B : SKY_SCHED_GPIPE;
		j.order_evals = 4;
		j.objective = SKY_OBJ_STEP;
		check_objective(&j);
		j.objective = SKY_OBJ_BOTTLENECK;
		check_objective(&j);
	}
	free(copy);
	return 0;
}
