/* sky: the Sky Computing paper's "dynamic allocation", re-implemented from
 * what its public code does (hpcaitech/SkyComputing,
 * scaelum/dynamics/allocator.py: dynamic_allocate, _allocate_by_mem,
 * _allocate_by_flops_time), not from the paper's prose. Boundaries p[0..n]
 * over whole layers, p[0] = 0, p[n] = L, worker k holds [p[k], p[k+1]):
 *
 * 1. Start from the even split.
 * 2. Memory pass, only if some worker is over its budget: for each worker k
 *    but the last, while it is over budget and holds more than one layer,
 *    hand its last layer to k+1; then while it is under budget and k+1 holds
 *    more than one layer, take k+1's first layer if it still fits. Stop as
 *    soon as every worker fits; repeat passes until nothing changes; fail if
 *    it still does not fit.
 * 3. Balance pass: workload_k = FLOPs of its layers * worker time (its time
 *    per unit of work, normalised by the fastest); target = floor(mean
 *    workload). For each worker k but the last, in order: if its workload is
 *    below target and k+1 holds more than one layer, take k+1's first layer
 *    if memory allows. Repeat until nothing changes or 1000 passes.
 *
 * Where it falls short (kept, because this is the baseline as published):
 * - The branch meant to give a layer back to the next worker compares the
 *   worker's own workload where the next worker's was meant
 *   ("workload_on_next_device" is computed over worker k's range), so its
 *   condition (below target and above target + a layer) can never hold:
 *   boundaries only ever move right, work only flows to earlier workers. A
 *   slow worker that the even split overloads keeps its load: the
 *   bottleneck stays where the even split put it.
 * - It balances to the mean, not the maximum, and greedily from the front,
 *   so whatever is left over lands on the last workers.
 * - It ignores the network (no send time in the workload), cannot reorder
 *   devices or leave a slow one out, and moves whole layers only.
 * - The memory pass never takes layers off the last worker.
 * Here the memory of a range is the shared cost model's stage memory (the
 * paper used a measured per-layer figure times param_scale = 2), and FLOPs
 * come from sky_model_layer_flops_fwd (fwd + bwd = 3x). */
#include "plan_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct sky_state {
	const plan_ctx *c;
	const sky_fleet *f;
	const sky_job *j;
	int n;
	int p[SKY_PLAN_MAX_BOARDS + 1];
	double wt[SKY_PLAN_MAX_BOARDS]; /* normalised worker time */
	double layer_flops;
} sky_state;

/* memory of worker k holding layers [a, b) */
static int64_t mem_of(const sky_state *s, int k, int a, int b)
{
	return stage_mem(s->c, 2 * a, 2 * b, k == 0, k == s->n - 1, plan_in_flight(s->c, s->n - k));
}

static int all_fit(const sky_state *s)
{
	for (int k = 0; k < s->n; k++)
		if (mem_of(s, k, s->p[k], s->p[k + 1]) > s->f->board[k].mem_bytes)
			return 0;
	return 1;
}

static int64_t budget(const sky_state *s, int k) { return s->f->board[k].mem_bytes; }

static int memory_pass(sky_state *s)
{
	int *p = s->p, n = s->n;
	if (all_fit(s))
		return 1;
	int old[SKY_PLAN_MAX_BOARDS + 1];
	for (;;) {
		memcpy(old, p, sizeof(int) * (size_t)(n + 1));
		for (int k = 0; k + 1 < n; k++) {
			while (mem_of(s, k, p[k], p[k + 1]) > budget(s, k) && p[k + 1] - p[k] > 1) {
				p[k + 1]--;
				if (all_fit(s))
					return 1;
			}
			while (mem_of(s, k, p[k], p[k + 1]) < budget(s, k) && p[k + 2] - p[k + 1] > 1) {
				if (mem_of(s, k, p[k], p[k + 1] + 1) < budget(s, k))
					p[k + 1]++;
				else
					break;
				if (all_fit(s))
					return 1;
			}
		}
		if (memcmp(old, p, sizeof(int) * (size_t)(n + 1)) == 0)
			return all_fit(s);
	}
}

static double workload(const sky_state *s, int k)
{
	return (s->p[k + 1] - s->p[k]) * s->layer_flops * s->wt[k];
}

static void balance_pass(sky_state *s)
{
	int *p = s->p, n = s->n;
	int old[SKY_PLAN_MAX_BOARDS + 1];
	for (int iter = 0; iter < 1000; iter++) {
		double sum = 0;
		for (int k = 0; k < n; k++)
			sum += workload(s, k);
		double target = floor(sum / n);
		memcpy(old, p, sizeof(int) * (size_t)(n + 1));
		for (int k = 0; k + 1 < n; k++) {
			double cur = workload(s, k);
			if (cur < target && p[k + 2] - p[k + 1] > 1) {
				if (mem_of(s, k, p[k], p[k + 1] + 1) < budget(s, k))
					p[k + 1]++;
			} else {
				double last_layer = s->layer_flops * s->wt[k];
				double next = workload(s, k); /* sic: worker k's, see above */
				if (next < target && cur > target + last_layer && p[k + 1] - p[k] > 1) {
					if (mem_of(s, k + 1, p[k + 1] - 1, p[k + 2]) < budget(s, k + 1))
						p[k + 1]--;
				}
			}
		}
		if (memcmp(old, p, sizeof(int) * (size_t)(n + 1)) == 0)
			break;
	}
}

static int plan_sky_run(sky_state *sp, const sky_fleet *f, const sky_job *j, sky_plan *out,
			sky_diag *d);

int plan_sky(const sky_fleet *f, const sky_job *j, sky_plan *out, sky_diag *d)
{
	sky_state *sp = malloc(sizeof *sp); /* ~50 KB, once per call */
	if (!sp)
		return sky_diag_set(d, SKY_ENOMEM, "sky: no memory for its state");
	int rc = plan_sky_run(sp, f, j, out, d);
	free(sp);
	return rc;
}

static int plan_sky_run(sky_state *s, const sky_fleet *f, const sky_job *j, sky_plan *out,
			sky_diag *d)
{
	plan_ctx c;
	plan_ctx_init(&c, j);
	int L = j->model.layers;
	s->c = &c;
	s->f = f;
	s->j = j;
	s->n = f->n < L ? f->n : L;
	s->layer_flops = 3.0 * sky_model_layer_flops_fwd(&j->model);
	double tmin = INFINITY;
	for (int k = 0; k < s->n; k++) {
		board_cost bc;
		plan_board_cost(&c, j, &f->board[k], &bc);
		s->wt[k] = bc.fwd + bc.bwd;
		if (s->wt[k] < tmin)
			tmin = s->wt[k];
	}
	for (int k = 0; k < s->n; k++)
		s->wt[k] /= tmin;
	/* the even split */
	int base = L / s->n, extra = L % s->n;
	s->p[0] = 0;
	for (int k = 0; k < s->n; k++)
		s->p[k + 1] = s->p[k] + base + (k < extra);
	if (!memory_pass(s)) {
		/* say whether anything could fit at all, else where this pass got stuck */
		sky_diag all;
		sky_diag_clear(&all);
		plan_shortfall(f, j, &all, "sky");
		if (strstr(all.msg, "does not fit"))
			return sky_diag_set(d, SKY_ENOMEM, "%s", all.msg);
		for (int k = 0; k < s->n; k++) {
			int64_t need = mem_of(s, k, s->p[k], s->p[k + 1]);
			if (need > budget(s, k))
				return sky_diag_set(
					d, SKY_ENOMEM,
					"sky: the paper's memory pass found no split in the fleet's order: "
					"board %s (worker %d, layers %d..%d) still needs %.2f GiB, has "
					"%.2f GiB (short by %.2f GiB); it moves one boundary at a time and "
					"never takes layers off the last worker",
					f->board[k].id, k, s->p[k], s->p[k + 1] - 1, need / 1073741824.0,
					budget(s, k) / 1073741824.0,
					(need - budget(s, k)) / 1073741824.0);
		}
		return sky_diag_set(d, SKY_ENOMEM, "sky: the memory pass failed");
	}
	balance_pass(s);
	for (int k = 0; k < s->n; k++) {
		out->stage[k].board = k;
		out->stage[k].first_unit = 2 * s->p[k];
		out->stage[k].last_unit = 2 * s->p[k + 1] - 1;
	}
	out->n_stages = s->n;
	return 0;
}
