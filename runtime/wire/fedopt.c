/* Server optimizers, FedProx and the DP pieces of a federated round
 * (sky_fedopt.h). */

/* The same bits on every machine: no a * b + c fused into one rounding
 * (GCC contracts by default in GNU C mode, and AArch64 has the
 * instruction). */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#else
#pragma GCC optimize("fp-contract=off")
#endif

#include "sky_fedopt.h"

#include "sky_fedsum.h"
#include "sky_le.h"

#include <math.h>
#include <mbedtls/chacha20.h>
#include <mbedtls/platform_util.h>
#include <string.h>

sky_fedopt_opts sky_fedopt_defaults(sky_fedopt_kind kind)
{
	sky_fedopt_opts o = {.kind = kind, .lr = 1.0f, .beta = 0.9f, .b1 = 0.9f, .b2 = 0.99f,
			     .tau = 1e-3f};
	if (kind == SKY_FEDOPT_ADAM)
		o.lr = 0.01f;
	return o;
}

static const char *const k_names[] = {"avg", "avgm", "adam"};

const char *sky_fedopt_name(sky_fedopt_kind kind)
{
	return (unsigned)kind < sizeof k_names / sizeof k_names[0] ? k_names[kind] : NULL;
}

int sky_fedopt_parse(const char *name, sky_fedopt_kind *out, sky_diag *d)
{
	for (unsigned i = 0; i < sizeof k_names / sizeof k_names[0]; i++)
		if (name && strcmp(name, k_names[i]) == 0) {
			*out = (sky_fedopt_kind)i;
			return 0;
		}
	return sky_diag_set(d, SKY_EINVAL, "server optimizer '%s' is not one of avg, avgm, adam",
			    name ? name : "");
}

int sky_fedopt_state_floats(sky_fedopt_kind kind)
{
	return kind == SKY_FEDOPT_ADAM ? 2 : kind == SKY_FEDOPT_AVGM ? 1 : 0;
}

static int unit(float x)
{
	return x >= 0.0f && x < 1.0f;
}

int sky_fedopt_init(sky_fedopt *s, const sky_fedopt_opts *o, size_t n, float *state, sky_diag *d)
{
	if (!sky_fedopt_name(o->kind))
		return sky_diag_set(d, SKY_EINVAL, "server optimizer kind %d is unknown", (int)o->kind);
	if (!(o->lr > 0.0f && isfinite(o->lr)))
		return sky_diag_set(d, SKY_EINVAL, "server learning rate %g is not a finite number above 0",
				    (double)o->lr);
	if (o->kind == SKY_FEDOPT_AVGM && !unit(o->beta))
		return sky_diag_set(d, SKY_EINVAL, "server momentum %g is not in [0, 1)", (double)o->beta);
	if (o->kind == SKY_FEDOPT_ADAM) {
		if (!unit(o->b1) || !unit(o->b2))
			return sky_diag_set(d, SKY_EINVAL, "adam's b1 %g and b2 %g must be in [0, 1)",
					    (double)o->b1, (double)o->b2);
		if (!(o->tau > 0.0f && isfinite(o->tau)))
			return sky_diag_set(d, SKY_EINVAL, "adam's tau %g is not a finite number above 0",
					    (double)o->tau);
	}
	const int k = sky_fedopt_state_floats(o->kind);
	if (k && (!state || n == 0))
		return sky_diag_set(d, SKY_EINVAL, "server optimizer %s needs %d x %zu floats of state",
				    sky_fedopt_name(o->kind), k, n);
	memset(s, 0, sizeof *s);
	s->o = *o;
	s->n = n;
	if (k >= 1) {
		s->m = state;
		memset(s->m, 0, n * sizeof *s->m);
	}
	if (k >= 2) {
		s->v = state + n;
		memset(s->v, 0, n * sizeof *s->v);
	}
	return 0;
}

static int finite_all(const float *x, size_t n, const char *what, sky_diag *d)
{
	for (size_t i = 0; i < n; i++)
		if (!isfinite(x[i]))
			return sky_diag_set(d, SKY_EINVAL, "%s element %zu is %g", what, i, (double)x[i]);
	return 0;
}

int sky_fedopt_step(sky_fedopt *s, float *w, const float *mean, sky_diag *d)
{
	int rc = finite_all(mean, s->n, "aggregate", d);
	if (rc)
		return rc;
	const sky_fedopt_opts *o = &s->o;
	switch (o->kind) {
	case SKY_FEDOPT_AVG:
		if (o->lr == 1.0f) /* FedAvg: the mean itself, not w + (mean - w) */
			memcpy(w, mean, s->n * sizeof *w);
		else
			for (size_t i = 0; i < s->n; i++)
				w[i] += o->lr * (mean[i] - w[i]);
		break;
	case SKY_FEDOPT_AVGM:
		for (size_t i = 0; i < s->n; i++) {
			s->m[i] = o->beta * s->m[i] + (mean[i] - w[i]);
			w[i] += o->lr * s->m[i];
		}
		break;
	case SKY_FEDOPT_ADAM: {
		const float c1 = 1.0f - o->b1, c2 = 1.0f - o->b2;
		for (size_t i = 0; i < s->n; i++) {
			const float g = mean[i] - w[i];
			s->m[i] = o->b1 * s->m[i] + c1 * g;
			s->v[i] = o->b2 * s->v[i] + c2 * (g * g);
			w[i] += o->lr * s->m[i] / (sqrtf(s->v[i]) + o->tau);
		}
		break;
	}
	}
	s->rounds++;
	return 0;
}

int sky_fedavg_mean(const float *const *x, const uint32_t *w, size_t nown, size_t n, float clip,
		    float *out, uint64_t *scratch, sky_diag *d)
{
	if (nown == 0)
		return sky_diag_set(d, SKY_EINVAL, "no owner's weights to average");
	uint64_t total = 0;
	for (size_t k = 0; k < nown; k++) {
		if (w[k] == 0 || w[k] > SKY_FX_MAX_WEIGHT)
			return sky_diag_set(d, SKY_EINVAL, "owner %zu weighs %u samples, not in [1, %u]", k,
					    w[k], SKY_FX_MAX_WEIGHT);
		total += w[k];
	}
	if (nown == 1) {
		int rc = finite_all(x[0], n, "owner 0's weights", d);
		if (rc == 0)
			memcpy(out, x[0], n * sizeof *out);
		return rc;
	}
	int bits, rc = sky_fx_bits(clip, total, &bits, d);
	if (rc)
		return rc;
	uint64_t *sum = scratch, *enc = scratch + n;
	memset(sum, 0, n * sizeof *sum);
	for (size_t k = 0; k < nown; k++) {
		rc = sky_fx_encode(x[k], n, w[k], clip, bits, enc, NULL, d);
		if (rc)
			return rc;
		sky_fx_add(sum, enc, n);
	}
	return sky_fx_decode(sum, n, total, bits, out, d);
}

int sky_fedprox_add(float *g, const float *w, const float *w0, size_t n, float mu, sky_diag *d)
{
	if (!(mu >= 0.0f && isfinite(mu)))
		return sky_diag_set(d, SKY_EINVAL, "FedProx mu %g is not a finite number >= 0", (double)mu);
	if (mu == 0.0f)
		return 0;
	for (size_t i = 0; i < n; i++)
		g[i] += mu * (w[i] - w0[i]);
	return 0;
}

static double norm2(const float *x, size_t n)
{
	double s = 0.0;
	for (size_t i = 0; i < n; i++)
		s += (double)x[i] * (double)x[i];
	return sqrt(s);
}

int sky_dp_clip(float *x, size_t n, float clip, double *norm, sky_diag *d)
{
	if (!(clip > 0.0f && isfinite(clip)))
		return sky_diag_set(d, SKY_EINVAL, "DP clip %g is not a finite number above 0",
				    (double)clip);
	int rc = finite_all(x, n, "update", d);
	if (rc)
		return rc;
	const double nx = norm2(x, n);
	if (norm)
		*norm = nx;
	if (nx <= clip)
		return 0;
	/* Rounding each scaled element to float can leave the norm a few ulps
	 * above the clip: shrink the factor until it is not (one pass in
	 * practice; the bound is what the privacy guarantee rests on). */
	double f = (double)clip / nx;
	float *y = x;
	for (int tries = 0; tries < 8; tries++) {
		double s = 0.0;
		for (size_t i = 0; i < n; i++) {
			const float v = (float)((double)x[i] * f);
			s += (double)v * (double)v;
		}
		if (sqrt(s) <= clip)
			break;
		f *= 1.0 - 1e-6;
	}
	for (size_t i = 0; i < n; i++)
		y[i] = (float)((double)x[i] * f);
	return 0;
}

/* 53 random bits as a double in [0, 1). */
static double unit53(uint64_t w)
{
	return (double)(w >> 11) * 0x1p-53;
}

int sky_dp_noise(float *x, size_t n, double stddev, const unsigned char seed[32], uint64_t round,
		 sky_diag *d)
{
	if (!(stddev >= 0.0 && isfinite(stddev)))
		return sky_diag_set(d, SKY_EINVAL, "DP noise deviation %g is not a finite number >= 0",
				    stddev);
	if (stddev == 0.0 || n == 0)
		return 0;
	unsigned char nonce[12] = {0};
	sky_le_put64(nonce, round);
	mbedtls_chacha20_context c;
	mbedtls_chacha20_init(&c);
	int rc = mbedtls_chacha20_setkey(&c, seed) || mbedtls_chacha20_starts(&c, nonce, 0);
	static const unsigned char zeros[16];
	const double two_pi = 6.283185307179586;
	for (size_t i = 0; i < n && rc == 0; i++) {
		unsigned char ks[16];
		rc = mbedtls_chacha20_update(&c, sizeof ks, zeros, ks);
		if (rc)
			break;
		/* u1 in (0, 1] so its log is finite; u2 in [0, 1) */
		const double u1 = 1.0 - unit53(sky_le_get64(ks)),
			     u2 = unit53(sky_le_get64(ks + 8));
		const double z = sqrt(-2.0 * log(u1)) * cos(two_pi * u2);
		x[i] = (float)((double)x[i] + stddev * z);
		mbedtls_platform_zeroize(ks, sizeof ks);
	}
	mbedtls_chacha20_free(&c);
	if (rc)
		return sky_diag_set(d, SKY_ECRYPTO, "ChaCha20 failed (-0x%04x)", (unsigned)-rc);
	return 0;
}
