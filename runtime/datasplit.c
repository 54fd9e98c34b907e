/* Data sets split among owners (sky_datasplit.h). */
#include "sky_datasplit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct rng {
	uint64_t s;
} rng;

static uint64_t next(rng *r) /* splitmix64 */
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double uniform(rng *r) /* (0, 1) */
{
	return ((double)(next(r) >> 11) + 0.5) * 0x1p-53;
}

static uint64_t below(rng *r, uint64_t n) /* [0, n), no modulo bias */
{
	const uint64_t lim = UINT64_MAX - UINT64_MAX % n;
	uint64_t x;
	do
		x = next(r);
	while (x >= lim);
	return x % n;
}

static double normal(rng *r)
{
	return sqrt(-2.0 * log(uniform(r))) * cos(6.283185307179586 * uniform(r));
}

/* Gamma(a, 1), a > 0: Marsaglia and Tsang (2000); a < 1 boosted by
 * Gamma(a + 1) * U^(1/a). */
static double gamma_draw(rng *r, double a)
{
	if (a < 1.0)
		return gamma_draw(r, a + 1.0) * pow(uniform(r), 1.0 / a);
	const double dd = a - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * dd);
	for (;;) {
		double x, v;
		do {
			x = normal(r);
			v = 1.0 + c * x;
		} while (v <= 0.0);
		v = v * v * v;
		const double u = uniform(r);
		if (log(u) < 0.5 * x * x + dd - dd * v + dd * log(v))
			return dd * v;
	}
}

static void shuffle(rng *r, int64_t *a, int64_t n)
{
	for (int64_t i = n - 1; i > 0; i--) {
		int64_t j = (int64_t)below(r, (uint64_t)i + 1), t = a[i];
		a[i] = a[j];
		a[j] = t;
	}
}

int sky_ds_split(const int32_t *labels, int64_t rows, int nlabels, int owners, double alpha,
		 uint64_t seed, int64_t min_rows, int32_t *owner_of, sky_diag *d)
{
	if (owners < 1 || owners > SKY_SPLIT_MAX_OWNERS)
		return sky_diag_set(d, SKY_EINVAL, "%d owners: give 1 to %d", owners,
				    SKY_SPLIT_MAX_OWNERS);
	if (rows < owners)
		return sky_diag_set(d, SKY_EINVAL, "%lld rows cannot give %d owners one each",
				    (long long)rows, owners);
	if (!isfinite(alpha))
		return sky_diag_set(d, SKY_EINVAL, "alpha %g is not a number", alpha);
	if (nlabels < 1)
		return sky_diag_set(d, SKY_EINVAL, "the set has no labels");
	for (int64_t i = 0; i < rows; i++)
		if (labels[i] < 0 || labels[i] >= nlabels)
			return sky_diag_set(d, SKY_EINVAL, "row %lld has label %d, not in [0, %d)",
					    (long long)i, labels[i], nlabels);
	rng r = {seed};
	int64_t *order = malloc((size_t)rows * sizeof *order);
	int64_t *count = calloc((size_t)owners, sizeof *count);
	double *p = malloc((size_t)owners * sizeof *p);
	if (!order || !count || !p) {
		free(order);
		free(count);
		free(p);
		return sky_diag_set(d, SKY_ENOMEM, "no memory for %lld rows", (long long)rows);
	}
	int rc = 0;
	if (alpha <= 0.0) {
		for (int64_t i = 0; i < rows; i++)
			order[i] = i;
		shuffle(&r, order, rows);
		for (int64_t i = 0; i < rows; i++)
			owner_of[order[i]] = (int32_t)(i % owners);
		goto out;
	}
	int64_t smallest = 0;
	for (int t = 0; t < SKY_SPLIT_TRIES; t++) {
		memset(count, 0, (size_t)owners * sizeof *count);
		for (int l = 0; l < nlabels; l++) {
			int64_t n = 0;
			for (int64_t i = 0; i < rows; i++)
				if (labels[i] == l)
					order[n++] = i;
			if (n == 0)
				continue;
			shuffle(&r, order, n);
			double sum = 0.0;
			for (int k = 0; k < owners; k++)
				sum += p[k] = gamma_draw(&r, alpha);
			/* cumulative proportions cut the label's rows */
			double acc = 0.0;
			int64_t from = 0;
			for (int k = 0; k < owners; k++) {
				acc += p[k] / sum;
				int64_t to = k == owners - 1 ? n : (int64_t)llround(acc * (double)n);
				if (to > n)
					to = n;
				for (int64_t i = from; i < to; i++)
					owner_of[order[i]] = (int32_t)k;
				count[k] += to > from ? to - from : 0;
				if (to > from)
					from = to;
			}
		}
		smallest = count[0];
		for (int k = 1; k < owners; k++)
			if (count[k] < smallest)
				smallest = count[k];
		if (smallest >= min_rows)
			goto out;
	}
	rc = sky_diag_set(d, SKY_ERANGE,
			  "no Dirichlet(%g) draw in %d gave each of %d owners %lld rows (the last "
			  "gave one %lld): raise alpha or lower the minimum",
			  alpha, SKY_SPLIT_TRIES, owners, (long long)min_rows, (long long)smallest);
out:
	free(order);
	free(count);
	free(p);
	return rc;
}
