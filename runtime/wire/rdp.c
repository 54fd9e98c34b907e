/* The RDP accountant of the sampled Gaussian mechanism (sky_rdp.h). */
#include "sky_rdp.h"

#include <math.h>
#include <string.h>

void sky_rdp_init(sky_rdp *a)
{
	memset(a, 0, sizeof *a);
}

static int check_qz(double q, double z, sky_diag *d)
{
	if (!(q > 0.0 && q <= 1.0))
		return sky_diag_set(d, SKY_EINVAL, "sampling rate %g is not in (0, 1]", q);
	if (!(z > 0.0 && isfinite(z)))
		return sky_diag_set(d, SKY_EINVAL, "noise multiplier %g is not a finite number above 0",
				    z);
	return 0;
}

int sky_rdp_sgm(double q, double z, int order, double *out, sky_diag *d)
{
	int rc = check_qz(q, z, d);
	if (rc)
		return rc;
	if (order < SKY_RDP_MIN_ORDER || order > SKY_RDP_MAX_ORDER)
		return sky_diag_set(d, SKY_EINVAL, "order %d is not in [%d, %d]", order,
				    SKY_RDP_MIN_ORDER, SKY_RDP_MAX_ORDER);
	const double a = order, inv2z2 = 1.0 / (2.0 * z * z);
	if (q == 1.0) { /* only k = a survives: the Gaussian mechanism */
		*out = a * inv2z2;
		return 0;
	}
	/* log of each term, then log-sum-exp around the largest */
	double t[SKY_RDP_MAX_ORDER + 1], hi = -INFINITY;
	const double lq = log(q), l1q = log1p(-q), lga = lgamma(a + 1.0);
	for (int k = 0; k <= order; k++) {
		const double kk = k;
		t[k] = lga - lgamma(kk + 1.0) - lgamma(a - kk + 1.0) + (a - kk) * l1q + kk * lq +
		       (kk * kk - kk) * inv2z2;
		if (t[k] > hi)
			hi = t[k];
	}
	double s = 0.0;
	for (int k = 0; k <= order; k++)
		s += exp(t[k] - hi);
	*out = (hi + log(s)) / (a - 1.0);
	return 0;
}

int sky_rdp_add(sky_rdp *a, double q, double z, uint64_t rounds, sky_diag *d)
{
	if (rounds == 0)
		return sky_diag_set(d, SKY_EINVAL, "no rounds to add");
	double step[SKY_RDP_NORDERS];
	for (int i = 0; i < SKY_RDP_NORDERS; i++) {
		int rc = sky_rdp_sgm(q, z, SKY_RDP_MIN_ORDER + i, &step[i], d);
		if (rc)
			return rc;
	}
	for (int i = 0; i < SKY_RDP_NORDERS; i++)
		a->rdp[i] += (double)rounds * step[i];
	a->rounds += rounds;
	return 0;
}

int sky_rdp_epsilon(const sky_rdp *a, double delta, double *epsilon, int *order, sky_diag *d)
{
	if (!(delta > 0.0 && delta < 1.0))
		return sky_diag_set(d, SKY_EINVAL, "delta %g is not in (0, 1)", delta);
	double best = INFINITY;
	int best_order = SKY_RDP_MIN_ORDER;
	const double ld = log(delta);
	for (int i = 0; i < SKY_RDP_NORDERS; i++) {
		const double o = SKY_RDP_MIN_ORDER + i;
		const double e = a->rdp[i] + log((o - 1.0) / o) - (ld + log(o)) / (o - 1.0);
		if (e < best) {
			best = e;
			best_order = SKY_RDP_MIN_ORDER + i;
		}
	}
	if (a->rounds == 0 || best < 0.0)
		best = 0.0;
	*epsilon = best;
	if (order)
		*order = best_order;
	return 0;
}
