/* Element-wise and row-wise fp32 kernels: bias, residual, LayerNorm, GELU,
 * softmax. Written as plain loops over contiguous rows without branches in
 * the inner loop, so -O2 -march=native vectorises them; they are a small
 * part of a layer's time next to the GEMMs, but only if they stay simple
 * (an erff() call per element would cost more than 10% of a base layer). */
/* GCC 12's -O2 vectorises only loops that need no scalar epilogue ("very
 * cheap" cost model), which rules out almost every loop here; and with
 * -ftrapping-math it will not turn the clamps and selects of exp and erf
 * into vector blends on aarch64. Neither option changes a result: there is
 * no -ffast-math (sums are not reordered), each element is computed by the
 * same operations, and Sky never reads floating-point exception flags. */
#pragma GCC optimize("vect-cost-model=dynamic", "no-trapping-math")

#include "sky_kernels_f32.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Sums and maxima over a row in 8 independent lanes (a GCC vector type,
 * one AVX register or two NEON registers), added up at the end: a single
 * running float sum cannot be vectorised without reordering it, which the
 * compiler may not do on its own. The order is fixed, so results are the
 * same on every run. */
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));

static inline v8f load8(const float *p)
{
	v8f v;
	memcpy(&v, p, sizeof v); /* unaligned load */
	return v;
}

static inline void store8(float *p, v8f v) { memcpy(p, &v, sizeof v); }

static inline float hsum8(v8f v)
{
	return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}

static inline float row_sum(const float *x, int n)
{
	v8f acc = {0};
	int j = 0;
	for (; j + 8 <= n; j += 8)
		acc += load8(x + j);
	float s = hsum8(acc);
	for (; j < n; j++)
		s += x[j];
	return s;
}

static inline float row_max(const float *x, int n)
{
	float m = x[0];
	int j = 0;
	if (n >= 8) {
		v8f acc = load8(x);
		for (j = 8; j + 8 <= n; j += 8) {
			v8f v = load8(x + j);
			v8i gt = v > acc; /* lanes all ones where v is larger */
			acc = (v8f)(((v8i)v & gt) | ((v8i)acc & ~gt));
		}
		for (int k = 0; k < 8; k++)
			m = acc[k] > m ? acc[k] : m;
	}
	for (; j < n; j++)
		m = x[j] > m ? x[j] : m;
	return m;
}

/* sum of (x - c)^2 */
static inline float row_sqdev(const float *x, float c, int n)
{
	v8f acc = {0};
	int j = 0;
	for (; j + 8 <= n; j += 8) {
		v8f d = load8(x + j) - c;
		acc += d * d;
	}
	float s = hsum8(acc);
	for (; j < n; j++)
		s += (x[j] - c) * (x[j] - c);
	return s;
}

/* sum of a * b */
static inline float row_dot(const float *a, const float *b, int n)
{
	v8f acc = {0};
	int j = 0;
	for (; j + 8 <= n; j += 8)
		acc += load8(a + j) * load8(b + j);
	float s = hsum8(acc);
	for (; j < n; j++)
		s += a[j] * b[j];
	return s;
}

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
		const float mean = row_sum(xr, cols) * inv_n;
		/* two passes: the variance of x - mean does not cancel as E[x^2]-mean^2 can */
		const float sq = row_sqdev(xr, mean, cols);
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
			     int rows, int cols, float *dx, float *dg, float *db, float *dsum)
{
	const float inv_n = 1.0f / (float)cols;
	for (int r = 0; r < rows; r++) {
		const float *dyr = dy + (size_t)r * cols;
		const float *hr = xhat + (size_t)r * cols;
		float *dxr = dx + (size_t)r * cols;
		/* one pass for the parameter gradients and both row sums, one for dx
		 * (dx may be dy: each element is read before it is written) */
		v8f s1v = {0}, s2v = {0};
		int j = 0;
		for (; j + 8 <= cols; j += 8) {
			v8f d = load8(dyr + j), h = load8(hr + j), gg = load8(g + j);
			v8f t = d * gg;
			store8(dg + j, load8(dg + j) + d * h);
			store8(db + j, load8(db + j) + d);
			s1v += t;
			s2v += t * h;
		}
		float s1 = hsum8(s1v), s2 = hsum8(s2v);
		for (; j < cols; j++) {
			float d = dyr[j], t = d * g[j];
			dg[j] += d * hr[j];
			db[j] += d;
			s1 += t;
			s2 += t * hr[j];
		}
		const float m1 = s1 * inv_n, m2 = s2 * inv_n, rs = rstd[r];
		if (dsum) {
			for (j = 0; j < cols; j++) {
				float v = rs * (dyr[j] * g[j] - m1 - hr[j] * m2);
				dxr[j] = v;
				dsum[j] += v;
			}
		} else {
			for (j = 0; j < cols; j++)
				dxr[j] = rs * (dyr[j] * g[j] - m1 - hr[j] * m2);
		}
	}
}

/* e^x for x in about [-87, 88]: 2^n * e^r with n = round(x / ln 2) and a
 * degree-6 Taylor polynomial on |r| <= ln2/2 (truncation error r^7/7! <
 * 1.3e-7 relative). Below -87 it returns 0 (underflow), which softmax
 * wants for masked positions. n is rounded by adding 1.5 * 2^23, which
 * leaves it in the low mantissa bits, and 2^n is built from those bits: no
 * float-to-int conversion and no branch, so loops calling this vectorise. */
static inline float exp_fast(float x)
{
	const float lo = -87.0f, hi = 88.0f, magic = 12582912.0f; /* 1.5 * 2^23 */
	float xc = x < lo ? lo : x;
	xc = xc > hi ? hi : xc;
	float t = xc * 1.44269504088896341f + magic;
	float n = t - magic;
	float r = xc - n * 0.693145751953125f; /* ln2 split in two: n * ln2_hi is exact */
	r = r - n * 1.428606765330187045e-6f;
	float p = 1.0f / 720.0f;
	p = p * r + 1.0f / 120.0f;
	p = p * r + 1.0f / 24.0f;
	p = p * r + 1.0f / 6.0f;
	p = p * r + 0.5f;
	p = p * r + 1.0f;
	p = p * r + 1.0f;
	int32_t tb, bits;
	memcpy(&tb, &t, sizeof tb);
	bits = (tb - 0x4B400000 + 127) * (1 << 23); /* (n + 127) << 23: 2^n, n in [-126, 127] */
	bits &= -(int32_t)(x >= lo);                /* underflow to 0 */
	float scale;
	memcpy(&scale, &bits, sizeof scale);
	return p * scale;
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

void sky_k_gelu_fwd_grad_f32(const float *x, float *y, float *d, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		float cdf, pdf;
		gelu_parts(x[i], &cdf, &pdf);
		y[i] = x[i] * cdf;
		d[i] = cdf + x[i] * pdf;
	}
}

/* tanh(u) and the polynomial's derivative du/dx for the tanh GELU */
static inline void gelu_tanh_parts(float x, float *th, float *dudx)
{
	const float k = 0.79788456080286536f, c = 0.044715f; /* sqrt(2/pi) */
	float u = k * (x + c * x * x * x);
	*th = 1.0f - 2.0f / (exp_fast(2.0f * u) + 1.0f);
	*dudx = k * (1.0f + 3.0f * c * x * x);
}

void sky_k_gelu_tanh_f32(const float *x, float *y, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		float th, du;
		gelu_tanh_parts(x[i], &th, &du);
		y[i] = 0.5f * x[i] * (1.0f + th);
	}
}

void sky_k_gelu_tanh_fwd_grad_f32(const float *x, float *y, float *d, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		float th, du, xi = x[i];
		gelu_tanh_parts(xi, &th, &du);
		y[i] = 0.5f * xi * (1.0f + th);
		d[i] = 0.5f * (1.0f + th) + 0.5f * xi * (1.0f - th * th) * du;
	}
}

void sky_k_gelu_tanh_f32_ref(const float *x, float *y, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		float xi = x[i];
		y[i] = 0.5f * xi *
		       (1.0f + tanhf(0.79788456080286536f * (xi + 0.044715f * xi * xi * xi)));
	}
}

void sky_k_mul_colsum_f32(float *dy, const float *d, int rows, int cols, float *acc)
{
	for (int r = 0; r < rows; r++) {
		float *dr = dy + (size_t)r * cols;
		const float *gr = d + (size_t)r * cols;
		for (int j = 0; j < cols; j++) {
			float v = dr[j] * gr[j];
			dr[j] = v;
			acc[j] += v;
		}
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
		const float mx = row_max(sr, cols);
		for (int j = 0; j < cols; j++)
			sr[j] = exp_fast(sr[j] - mx);
		const float sum = row_sum(sr, cols);
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
		const float dot = row_dot(dr, pr, cols);
		for (int j = 0; j < cols; j++)
			dr[j] = pr[j] * (dr[j] - dot) * scale;
	}
}
