/* One interface over the three algorithms. */
#include "plan_internal.h"

#include <string.h>

int sky_plan_partition(const sky_fleet *f, const sky_job *j, sky_algo algo, sky_plan *out,
		       sky_diag *d)
{
	int rc;
	out->n_stages = 0;
	out->algo = algo;
	out->bottleneck_s = 0;
	out->lower_bound_s = 0;
	out->step_s = 0;
	out->step_exact = 0;
	out->step_lower_bound_s = 0;
	out->owner = 0;
	out->owner_lag = 0;
	out->owner_time_s = 0;
	if ((rc = sky_fleet_validate(f, d)) || (rc = sky_job_validate(j, d)))
		return rc;
	if (j->prec == SKY_PREC_INT8) {
		for (int i = 0; i < f->n; i++)
			if (!(f->board[i].fwd_int8_s > 0))
				return sky_diag_set(d, SKY_EINVAL,
						    "board %s: field 'fwd_int8_s' is missing, and the "
						    "job runs int8",
						    f->board[i].id);
	}
	if (j->owner[0]) {
		/* data stays home: a U-shaped plan (partition_owner.c) */
		if ((rc = plan_owner(f, j, algo, out, d)) != 0)
			return rc;
		out->algo = algo;
		return sky_plan_evaluate(f, j, out, d);
	}
	switch (algo) {
	case SKY_ALGO_EVEN:
		rc = plan_even(f, j, out, d);
		break;
	case SKY_ALGO_SKY:
		rc = plan_sky(f, j, out, d);
		break;
	case SKY_ALGO_OPTIMAL:
		rc = j->objective == SKY_OBJ_STEP ? plan_optimal_step(f, j, out, d)
						  : plan_optimal(f, j, out, d);
		break;
	default:
		return sky_diag_set(d, SKY_EINVAL, "plan: unknown algorithm %d", (int)algo);
	}
	out->algo = algo;
	if (rc)
		return rc;
	/* every algorithm's plan is judged by the same evaluation, which also
	 * refuses one that breaks coverage or memory */
	return sky_plan_evaluate(f, j, out, d);
}
