/* optimal with the step-time objective.
 *
 * The bottleneck sets the pace once the pipeline is full, but a step also
 * pays for filling and draining it: roughly one micro-batch's trip through
 * every stage. With many stages and few micro-batches (the paper's 63
 * workers and 32 micro-batches) that trip dominates, and a slow board that
 * lowers the bottleneck a little can lengthen the trip more. So: plan
 * (exactly, for the bottleneck) on the k fastest boards for a sweep of k,
 * simulate each plan's step, keep the shortest. The sweep takes 16 evenly
 * spaced k from n down to n/16, then halves the spacing around the best k
 * until it is 1. The full fleet is always a candidate, so the result's
 * simulated step is never longer than the bottleneck objective's. */
#include "plan_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct step_ws {
	const sky_fleet *f;
	const sky_job *j;
	int *by_speed;     /* fleet indices, fastest first */
	sky_fleet *sub;
	sky_plan *plan;
	sky_sim_result *sim;
	double *step_at;   /* by k; NAN = not tried */
	double best_step;
	int best_k;
} step_ws;

typedef struct keyed_t {
	double t;
	int idx;
} keyed_t;

static int by_time(const void *x, const void *y)
{
	const keyed_t *a = x, *b = y;
	if (a->t != b->t)
		return a->t < b->t ? -1 : 1;
	return (a->idx > b->idx) - (a->idx < b->idx);
}

/* plans and simulates on the k fastest boards (in the fleet's order);
 * keeps the plan in out when it is the best so far */
static void try_k(step_ws *w, int k, sky_plan *out)
{
	if (k < 1 || k > w->f->n || !isnan(w->step_at[k]))
		return;
	w->step_at[k] = INFINITY;
	/* the k fastest, kept in the fleet's order: the fleet's order is the
	 * first seed `optimal` tries */
	unsigned char *pick = calloc((size_t)w->f->n, 1);
	int *map = malloc(sizeof(int) * (size_t)k);
	if (!pick || !map)
		goto exit;
	for (int i = 0; i < k; i++)
		pick[w->by_speed[i]] = 1;
	w->sub->n = 0;
	for (int i = 0; i < w->f->n; i++) {
		if (pick[i]) {
			map[w->sub->n] = i;
			w->sub->board[w->sub->n++] = w->f->board[i];
		}
	}
	if (plan_optimal(w->sub, w->j, w->plan, NULL) || sky_plan_evaluate(w->sub, w->j, w->plan, NULL) ||
	    sky_sim_run(w->plan, w->j, w->sim, NULL))
		goto exit;
	w->step_at[k] = w->sim->step_s;
	if (w->sim->step_s < w->best_step) {
		w->best_step = w->sim->step_s;
		w->best_k = k;
		out->n_stages = w->plan->n_stages;
		for (int s = 0; s < w->plan->n_stages; s++) {
			out->stage[s] = w->plan->stage[s];
			out->stage[s].board = map[w->plan->stage[s].board];
		}
	}
exit:
	free(pick);
	free(map);
}

int plan_optimal_step(const sky_fleet *f, const sky_job *j, sky_plan *out, sky_diag *d)
{
	int n = f->n, rc = 0;
	step_ws w = {f, j, NULL, NULL, NULL, NULL, NULL, INFINITY, 0};
	keyed_t *keys = malloc(sizeof *keys * (size_t)n);
	w.by_speed = malloc(sizeof(int) * (size_t)n);
	w.sub = malloc(sizeof *w.sub);
	w.plan = malloc(sizeof *w.plan);
	w.sim = malloc(sizeof *w.sim);
	w.step_at = malloc(sizeof(double) * (size_t)(n + 1));
	if (!keys || !w.by_speed || !w.sub || !w.plan || !w.sim || !w.step_at) {
		rc = sky_diag_set(d, SKY_ENOMEM, "optimal (step): no memory for the work arrays");
		goto exit;
	}
	for (int i = 0; i < n; i++) {
		keys[i].t = j->prec == SKY_PREC_INT8 ? f->board[i].fwd_int8_s + f->board[i].bwd_int8_s
						     : f->board[i].fwd_s + f->board[i].bwd_s;
		keys[i].idx = i;
	}
	qsort(keys, (size_t)n, sizeof *keys, by_time);
	for (int i = 0; i < n; i++)
		w.by_speed[i] = keys[i].idx;
	for (int k = 0; k <= n; k++)
		w.step_at[k] = NAN;
	/* the full fleet first: if nothing fits there, nothing fits */
	try_k(&w, n, out);
	if (isinf(w.best_step)) {
		rc = plan_optimal(f, j, out, d); /* for its error message */
		if (!rc)
			rc = sky_diag_set(d, SKY_ESTATE, "optimal (step): the simulation failed");
		goto exit;
	}
	int spacing = n / 16 > 1 ? n / 16 : 1;
	for (int i = 1; i < 16; i++)
		try_k(&w, n - i * spacing, out);
	while (spacing > 1) {
		spacing /= 2;
		int c = w.best_k;
		try_k(&w, c - spacing, out);
		try_k(&w, c + spacing, out);
	}
exit:
	free(keys);
	free(w.by_speed);
	free(w.sub);
	free(w.plan);
	free(w.sim);
	free(w.step_at);
	return rc;
}
