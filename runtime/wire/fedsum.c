/* Fixed-point federated sums; see sky_fedsum.h. */
#include "sky_fedsum.h"

#include <math.h>

int sky_fx_bits(float clip, uint64_t total_weight, int *bits, sky_diag *d)
{
	if (!bits || !(clip > 0.0f) || !isfinite(clip) || total_weight == 0)
		return sky_diag_set(d, SKY_EINVAL,
				    "fixed point: clip %g and total weight %llu (want a finite clip "
				    "> 0 and a weight >= 1)",
				    (double)clip, (unsigned long long)total_weight);
	/* m = f * 2^e, 0.5 <= f < 1, so m < 2^e and m * 2^(62-e) < 2^62; the
	 * product is rounded up a hair so the bound holds for the exact one */
	int e;
	double m = (double)total_weight * (double)clip;
	(void)frexp(nextafter(m, INFINITY), &e);
	int b = 62 - e;
	if (b > 62)
		b = 62;
	if (b < SKY_FX_MIN_BITS)
		return sky_diag_set(d, SKY_ERANGE,
				    "fixed point: clip %g times total weight %llu leaves %d fraction "
				    "bits (need %d): lower the clip or the weights",
				    (double)clip, (unsigned long long)total_weight, b,
				    SKY_FX_MIN_BITS);
	*bits = b;
	return 0;
}

int sky_fx_encode(const float *x, size_t n, uint32_t w, float clip, int bits, uint64_t *out,
		  size_t *nclipped, sky_diag *d)
{
	size_t clipped = 0;
	if (nclipped)
		*nclipped = 0;
	if ((n && (!x || !out)) || w == 0 || w > SKY_FX_MAX_WEIGHT || bits < SKY_FX_MIN_BITS ||
	    bits > 62 || !(clip > 0.0f) || !isfinite(clip))
		return sky_diag_set(d, SKY_EINVAL,
				    "fixed point encode: weight %u (1..%u), %d bits (%d..62), clip %g",
				    w, SKY_FX_MAX_WEIGHT, bits, SKY_FX_MIN_BITS, (double)clip);
	for (size_t i = 0; i < n; i++) {
		float v = x[i];
		if (!isfinite(v))
			return sky_diag_set(d, SKY_EINVAL, "fixed point encode: element %zu is %g", i,
					    (double)v);
		if (v > clip || v < -clip) {
			v = v > 0 ? clip : -clip;
			clipped++;
		}
		/* exact: 24-bit significand times a weight below 2^29, then a power
		 * of two; |q| <= w * clip * 2^bits < 2^62 */
		long long q = llrint(ldexp((double)v * (double)w, bits));
		out[i] = (uint64_t)q;
	}
	if (nclipped)
		*nclipped = clipped;
	return 0;
}

int sky_fx_grad_bits(int micro)
{
	int bits = SKY_FX_MIN_BITS;
	if (micro < 1 || sky_fx_bits(SKY_FX_GRAD_CLIP, (uint64_t)micro, &bits, NULL) != 0)
		return SKY_FX_MIN_BITS;
	return bits;
}

void sky_fx_accumulate(uint64_t *acc, const float *x, size_t n, float clip, int bits,
		       size_t *nclipped)
{
	size_t clipped = 0;
	const double scale = ldexp(1.0, bits);
	for (size_t i = 0; i < n; i++) {
		float v = x[i];
		if (!(v >= -clip && v <= clip)) { /* also NaN */
			clipped++;
			if (v != v)
				continue;
			v = v > 0 ? clip : -clip;
		}
		/* exact: a 24-bit significand times a power of two */
		acc[i] += (uint64_t)llrint((double)v * scale);
	}
	if (nclipped)
		*nclipped += clipped;
}

void sky_fx_add(uint64_t *acc, const uint64_t *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		acc[i] += v[i];
}

int sky_fx_decode(const uint64_t *sum, size_t n, uint64_t total_weight, int bits, float *out,
		  sky_diag *d)
{
	if ((n && (!sum || !out)) || total_weight == 0 || bits < SKY_FX_MIN_BITS || bits > 62)
		return sky_diag_set(d, SKY_EINVAL,
				    "fixed point decode: total weight %llu, %d bits",
				    (unsigned long long)total_weight, bits);
	for (size_t i = 0; i < n; i++) {
		/* two's complement: the modular sum read as the signed true sum */
		int64_t s = (int64_t)sum[i];
		out[i] = (float)(ldexp((double)s, -bits) / (double)total_weight);
	}
	return 0;
}
