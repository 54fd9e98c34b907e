/* libFuzzer harness: fleet files over arbitrary bytes, then the planner on
 * whatever parses. Whatever the bytes, sky_fleet_parse returns 0 or an
 * error with a message, leaves the JSON pool empty, and a fleet it accepts
 * writes and parses back to the same boards; every algorithm then either
 * refuses the job or returns a plan that keeps the invariants (all units
 * once, in order, each board's memory), and optimal is never worse than
 * even or sky; the simulator runs on it. */
#include "sky_json.h"
#include "sky_plan.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static sky_fleet g_f, g_back;
static sky_plan g_p[SKY_ALGO_COUNT];
static sky_sim_result g_r;

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
		int ok[SKY_ALGO_COUNT];
		for (int a = 0; a < SKY_ALGO_COUNT; a++) {
			ok[a] = sky_plan_partition(&g_f, &j, (sky_algo)a, &g_p[a], NULL) == 0;
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
			if (next != 2 * j.model.layers)
				abort();
			if (sky_sim_run(p, &j, &g_r, NULL) != 0 || !(g_r.step_s >= 0))
				abort();
		}
		for (int a = 0; a < 2; a++)
			if (ok[a] && (!ok[SKY_ALGO_OPTIMAL] ||
				      g_p[SKY_ALGO_OPTIMAL].bottleneck_s > g_p[a].bottleneck_s * (1 + 1e-12)))
				abort();
	}
	free(copy);
	return 0;
}
