/* even: equal layer counts in the fleet's order, the paper's baseline
 * (SkyComputing's even_allocate: floor(L/n) layers each, the first L mod n
 * boards one more). With fewer layers than boards the boards past the last
 * layer get nothing. Memory and speed are ignored; a plan that does not fit
 * is refused by the evaluation with the board and its shortfall. */
#include "plan_internal.h"

int plan_even(const sky_fleet *f, const sky_job *j, sky_plan *out, sky_diag *d)
{
	int L = j->model.layers, n = f->n < L ? f->n : L;
	int base = L / n, extra = L % n, layer = 0;
	for (int k = 0; k < n; k++) {
		int cnt = base + (k < extra);
		out->stage[k].board = k;
		out->stage[k].first_unit = 2 * layer;
		out->stage[k].last_unit = 2 * (layer + cnt) - 1;
		layer += cnt;
	}
	out->n_stages = n;
	return 0;
}
