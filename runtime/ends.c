/* The portable fp32 ends of an int8 model (see sky_ends.h). */
#include "sky_ends.h"

#include "sky_embed.h"
#include "sky_err.h"
#include "sky_head.h"
#include "sky_layer.h"

#include <math.h>

/* a * b + c must round twice wherever it is written here */
#pragma GCC optimize("fp-contract=off")

/* e^y for 0 <= y <= 64: y = k ln2 + r with |r| <= ln2 / 2 (ln2 split in
 * two, the high part with 11 trailing zero bits, so k * LN2_HI is exact),
 * e^r by its Taylor series to r^13 (below 1e-17 for |r| <= 0.35), then
 * scaled by 2^k exactly. */
static double exp_portable(double y)
{
	static const double LN2_HI = 6.93147180369123816490e-01;
	static const double LN2_LO = 1.90821492927058770002e-10;
	static const double INV_LN2 = 1.44269504088896338700e+00;
	double k = floor(y * INV_LN2 + 0.5);
	double r = (y - k * LN2_HI) - k * LN2_LO;
	double p = 1.0 / 6227020800.0; /* 1/13! */
	static const double inv_fact[13] = {1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0,
					    1.0 / 362880.0,    1.0 / 40320.0,    1.0 / 5040.0,
					    1.0 / 720.0,       1.0 / 120.0,      1.0 / 24.0,
					    1.0 / 6.0,         0.5,              1.0,
					    1.0};
	for (int i = 0; i < 13; i++) {
		double t = p * r;
		p = t + inv_fact[i];
	}
	return ldexp(p, (int)k);
}

double sky_ends_tanh(double x)
{
	double a = fabs(x), t;
	if (a > 22.0) {
		t = 1.0; /* tanh is 1 to double precision */
	} else if (a < 0.01) {
		/* a - a^3/3 + 2a^5/15 - 17a^7/315 (the next term is below 1e-17 a) */
		double a2 = a * a, u = a2 * (-17.0 / 315.0);
		u = u + 2.0 / 15.0;
		u = a2 * u;
		u = u - 1.0 / 3.0;
		u = a2 * u;
		u = a * u;
		t = a + u;
	} else {
		double e = exp_portable(2.0 * a);
		t = (e - 1.0) / (e + 1.0);
	}
	return x < 0 ? -t : t;
}

int sky_ends_embed(const sky_model_cfg *c, const float *w, const int32_t *ids, float *y)
{
	int rc = sky_embed_check(c, ids, NULL);
	if (rc)
		return rc;
	sky_embed_view v;
	sky_embed_bind(c, (float *)w, &v);
	const int T = (int)sky_model_tokens(c), H = c->hidden, S = c->seq;
	for (int t = 0; t < T; t++) {
		const float *we = v.word + (size_t)ids[t] * H;
		const float *pe = v.pos + (size_t)(t % S) * H;
		const float *te = v.type;
		float *yr = y + (size_t)t * H;
		double mean = 0, var = 0;
		for (int j = 0; j < H; j++) {
			yr[j] = we[j] + pe[j] + te[j];
			mean += yr[j];
		}
		mean /= H;
		for (int j = 0; j < H; j++) {
			double dlt = yr[j] - mean;
			double sq = dlt * dlt;
			var += sq;
		}
		var /= H;
		double rstd = 1.0 / sqrt(var + (double)sky_model_ln_eps(c));
		for (int j = 0; j < H; j++) {
			double n = (yr[j] - mean) * rstd;
			double g = n * v.ln_g[j];
			yr[j] = (float)(g + v.ln_b[j]);
		}
	}
	return 0;
}

void sky_ends_head(const sky_model_cfg *c, const float *w, const float *x0, float *logits,
		   float *scratch)
{
	const int H = c->hidden, C = c->classes;
	sky_head_view v;
	sky_head_bind(c, (float *)w, &v);
	float *pooled = scratch;
	for (int j = 0; j < H; j++) {
		double s = v.bp[j];
		const float *row = v.wp + (size_t)j * H;
		for (int k = 0; k < H; k++) {
			double p = (double)row[k] * x0[k]; /* exact */
			s += p;
		}
		pooled[j] = (float)sky_ends_tanh(s);
	}
	for (int k = 0; k < C; k++) {
		double s = v.bc[k];
		const float *row = v.wc + (size_t)k * H;
		for (int j = 0; j < H; j++) {
			double p = (double)row[j] * pooled[j];
			s += p;
		}
		logits[k] = (float)s;
	}
}
