/* Element-wise and row-wise fp32 kernels: bias, residual, LayerNorm, GELU,
 * softmax. Written as plain loops over contiguous rows without branches in
 * the inner loop, so -O2 -march=native vectorises them; they are a small
 * part of a layer's time next to the GEMMs, but only if they stay simple
 * (an erff() call per element would cost more than 10% of a base layer). */
#include "sky_kernels_f32.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

void sky_k_bias_fill_f32(float *out, const float *bias, const float *res, int rows, int cols)
{
	for (int r = 0; r < rows; r++) {
		float *o = out + (size_t)r * cols;
		if (res) {
			const float *x = res + (size_t)r * cols;
			for (int j = 0; j < cols; j++)
				o[j] = bias[j] + x[j];
		} else {
			memcpy(o, bias, (size_t)cols * sizeof *o);
		}
	}
}

void sky_k_colsum_f32(const float *x, int rows, int cols, float *acc)
{
	for (int r = 0; r < rows; r++) {
		const float *xr = x + (size_t)r * cols;
		for (int j = 0; j < cols; j++)
			acc[j] += xr[j];
	}
}

void sky_k_add_f32(float *y, const float *x, size_t n)
{
	for (size_t i = 0; i < n; i++)
		y[i] += x[i];
}

void sky_k_layernorm_f32(const float *x, int rows, int cols, const float *g, const float *b,
			 float eps, float *y, float *xhat, float *rstd)
{
	const float inv_n = 1.0f / (float)cols;
	for (int r = 0; r < rows; r++) {
		const float *xr = x + (size_t)r * cols;
		float *yr = y + (size_t)r * cols;
		float sum = 0.0f;
		for (int j = 0; j < cols; j++)
			sum += xr[j];
		const float mean = sum * inv_n;
		/* two passes: the variance of x - mean does not cancel as E[x^2]-mean^2 can */
		float sq = 0.0f;
		for (int j = 0; j < cols; j++) {
			float d = xr[j] - mean;
			sq += d * d;
		}
		const float rs = 1.0f / sqrtf(sq * inv_n + eps);
		if (rstd)
			rstd[r] = rs;
		if (xhat) {
			float *hr = xhat + (size_t)r * cols;
			for (int j = 0; j < cols; j++) {
				float h = (xr[j] - mean) * rs;
				hr[j] = h;
				yr[j] = h * g[j] + b[j];
			}
		} else {
			for (int j = 0; j < cols; j++)
				yr[j] = (xr[j] - mean) * rs * g[j] + b[j];
		}
	}
}

void sky_k_layernorm_bwd_f32(const float *dy, const float *xhat, const float *rstd, const float *g,
			     int rows, int cols, float *dx, float *dg, float *db)
{
	const float inv_n = 1.0f / (float)cols;
	for (int r = 0; r < rows; r++) {
		const float *dyr = dy + (size_t)r * cols;
		const float *hr = xhat + (size_t)r * cols;
		float *dxr = dx + (size_t)r * cols;
		float s1 = 0.0f, s2 = 0.0f;
		for (int j = 0; j < cols; j++) {
			float d = dyr[j] * g[j];
			s1 += d;
			s2 += d * hr[j];
			dg[j] += dyr[j] * hr[j];
			db[j] += dyr[j];
		}
		const float m1 = s1 * inv_n, m2 = s2 * inv_n, rs = rstd[r];
		for (int j = 0; j < cols; j++)
			dxr[j] = rs * (dyr[j] * g[j] - m1 - hr[j] * m2);
	}
}

/* e^x for x in about [-87, 88]: 2^n * e^r with n = round(x / ln 2) and a
 * degree-6 Taylor polynomial on |r| <= ln2/2 (truncation error r^7/7! <
 * 1.3e-7 relative). Below -87 it returns 0 (underflow), which softmax
 * wants for masked positions. Branch-free so loops calling it vectorise. */
static inline float exp_fast(float x)
{
	const float lo = -87.0f, hi = 88.0f;
	float xc = x < lo ? lo : (x > hi ? hi : x);
	float n = floorf(xc * 1.44269504088896341f + 0.5f);
	float r = xc - n * 0.693145751953125f; /* ln2 split in two for exact n*ln2_hi */
	r = r - n * 1.428606765330187045e-6f;
	float p = 1.0f / 720.0f;
	p = p * r + 1.0f / 120.0f;
	p = p * r + 1.0f / 24.0f;
	p = p * r + 1.0f / 6.0f;
	p = p * r + 0.5f;
	p = p * r + 1.0f;
	p = p * r + 1.0f;
	int32_t bits = ((int32_t)n + 127) << 23;
	float scale;
	memcpy(&scale, &bits, sizeof scale);
	float e = p * scale;
	return x < lo ? 0.0f : e;
}

void sky_k_exp_f32(const float *x, float *y, size_t n)
{
	for (size_t i = 0; i < n; i++)
		y[i] = exp_fast(x[i]);
}

/* Phi(x) and the normal density phi(x) together, from erf by Abramowitz &
 * Stegun 7.1.26 (|error| <= 1.5e-7 on erf): erf(z) = 1 - t*P(t) e^{-z^2},
 * t = 1 / (1 + p z), z = |x| / sqrt 2. e^{-z^2} = e^{-x^2/2} is also the
 * density's exponential, so backward gets phi for free. */
static inline void gelu_parts(float x, float *cdf, float *pdf)
{
	float z = fabsf(x) * 0.70710678118654752f;
	float t = 1.0f / (1.0f + 0.3275911f * z);
	float poly = 1.061405429f;
	poly = poly * t - 1.453152027f;
	poly = poly * t + 1.421413741f;
	poly = poly * t - 0.284496736f;
	poly = poly * t + 0.254829592f;
	poly = poly * t;
	float e = exp_fast(-z * z);
	float erf_abs = 1.0f - poly * e;
	float erf = x < 0.0f ? -erf_abs : erf_abs;
	*cdf = 0.5f + 0.5f * erf;
	*pdf = e * 0.39894228040143268f;
}

void sky_k_gelu_f32(const float *x, float *y, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		float cdf, pdf;
		gelu_parts(x[i], &cdf, &pdf);
		y[i] = x[i] * cdf;
	}
}

void sky_k_gelu_bwd_f32(const float *x, float *dy, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		float cdf, pdf;
		gelu_parts(x[i], &cdf, &pdf);
		dy[i] *= cdf + x[i] * pdf;
	}
}

void sky_k_gelu_f32_ref(const float *x, float *y, size_t n)
{
	for (size_t i = 0; i < n; i++)
		y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
}

void sky_k_gelu_bwd_f32_ref(const float *x, float *dy, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		float cdf = 0.5f * (1.0f + erff(x[i] * 0.70710678118654752f));
		float pdf = expf(-0.5f * x[i] * x[i]) * 0.39894228040143268f;
		dy[i] *= cdf + x[i] * pdf;
	}
}

void sky_k_softmax_f32(float *s, int rows, int cols, const float *mask)
{
	for (int r = 0; r < rows; r++) {
		float *sr = s + (size_t)r * cols;
		if (mask) {
			for (int j = 0; j < cols; j++)
				sr[j] += mask[j];
		}
		float mx = sr[0];
		for (int j = 1; j < cols; j++)
			mx = sr[j] > mx ? sr[j] : mx;
		/* exp in its own loop: a float sum in the same loop would stop
		 * vectorisation (the compiler may not reorder the additions) */
		for (int j = 0; j < cols; j++)
			sr[j] = exp_fast(sr[j] - mx);
		float sum = 0.0f;
		for (int j = 0; j < cols; j++)
			sum += sr[j];
		const float inv = 1.0f / sum; /* sum >= 1: the maximum contributes e^0 */
		for (int j = 0; j < cols; j++)
			sr[j] *= inv;
	}
}

void sky_k_softmax_bwd_f32(const float *p, float *ds, int rows, int cols, float scale)
{
	for (int r = 0; r < rows; r++) {
		const float *pr = p + (size_t)r * cols;
		float *dr = ds + (size_t)r * cols;
		float dot = 0.0f;
		for (int j = 0; j < cols; j++)
			dot += dr[j] * pr[j];
		for (int j = 0; j < cols; j++)
			dr[j] = pr[j] * (dr[j] - dot) * scale;
	}
}
