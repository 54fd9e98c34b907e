/* Integer non-linearities of the int8 layer (I-BERT style; formulas and Q
 * formats in sky_kernels_s8.h), their parameter setup (which alone uses
 * floating point) and the run-time choice of SIMD variants. */
#include "sky_kernels_s8.h"

#include "sky_cpu.h"

#include <math.h>
#include <string.h>

/* I-BERT (arXiv 2101.01321) constants, in the Q formats used below */
#define EXP_B14 22168     /* round(1.353 * 2^14) */
#define EXP_A14 5874      /* round(0.3585 * 2^14) */
#define EXP_C28 92341796  /* round(0.344 * 2^28) */
#define LN2_Q14 11357     /* round(ln 2 * 2^14) */
#define EXP_ZMAX 18       /* 2^-18 is below one Q15 unit: exp gives 0 from here */
#define GELU_A15 (-9463)  /* round(-0.2888 * 2^15) */

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* floor(a / b), b > 0 */
static int64_t floor_div(int64_t a, int64_t b)
{
	int64_t q = a / b;
	return (a % b != 0 && a < 0) ? q - 1 : q;
}

int sky_k_softmax_s8_params(double s_in, sky_k_softmax_params *p)
{
	double c = s_in / log(2.0) * 65536.0; /* Q16 log2 units per accumulator unit */
	if (!(c > 0) || !isfinite(c))
		return -1;
	if (sky_k_quant_multiplier(c, &p->mw, &p->rsw) != 0)
		return -1;
	double dmax = ceil((EXP_ZMAX + 1) * 65536.0 / c);
	p->dmax = dmax > 2147483647.0 ? 2147483647 : (int32_t)dmax;
	return 0;
}

/* exp of one Q16 log2 exponent w <= 0, in Q15 (0 .. 32779) */
static inline int32_t exp_q15(int32_t w)
{
	int32_t nw = -w;
	int32_t z = nw >> 16;
	if (z >= EXP_ZMAX)
		return 0;
	int32_t r14 = (nw & 0xffff) >> 2;                    /* fraction, Q14 */
	int32_t p14 = -((r14 * LN2_Q14 + (1 << 13)) >> 14);  /* p = -r ln2 in (-ln2, 0] */
	int32_t t = p14 + EXP_B14;                           /* p + 1.353, Q14 */
	int32_t l28 = EXP_A14 * ((t * t) >> 14) + EXP_C28;   /* L(p), Q28 */
	return l28 >> (13 + z);
}

void sky_k_softmax_s8_ref(const int32_t *s, int rows, int cols, long lds, const uint8_t *mask,
			  const sky_k_softmax_params *p, uint8_t *y, long ldy)
{
	for (int i = 0; i < rows; i++) {
		const int32_t *row = s + i * lds;
		uint8_t *out = y + i * ldy;
		int32_t mx = INT32_MIN;
		int any = 0;
		for (int j = 0; j < cols; j++) {
			if (mask && mask[j])
				continue;
			any = 1;
			if (row[j] > mx)
				mx = row[j];
		}
		if (!any) {
			memset(out, 0, (size_t)cols);
			continue;
		}
		/* e (Q15) needs 16 bits, so the second pass recomputes it (exact)
		 * rather than keeping a row of scratch */
		int64_t sum = 0;
		for (int j = 0; j < cols; j++) {
			if (mask && mask[j])
				continue;
			int64_t d = clamp64((int64_t)row[j] - mx, -(int64_t)p->dmax, 0);
			sum += exp_q15((int32_t)sky_k_requant1((int32_t)d, p->mw, p->rsw));
		}
		uint64_t inv = ((uint64_t)1 << 46) / (uint64_t)sum;
		for (int j = 0; j < cols; j++) {
			if (mask && mask[j]) {
				out[j] = 0;
				continue;
			}
			int64_t d = clamp64((int64_t)row[j] - mx, -(int64_t)p->dmax, 0);
			uint64_t e = (uint64_t)exp_q15((int32_t)sky_k_requant1((int32_t)d, p->mw, p->rsw));
			uint64_t q = (e * inv + ((uint64_t)1 << 37)) >> 38;
			out[j] = (uint8_t)(q > 255 ? 255 : q);
		}
	}
}

int sky_k_gelu_s8_params(int f, double s_out, sky_k_gelu_params *p)
{
	if (f < 7 || f > 14 || !(s_out > 0) || !isfinite(s_out))
		return -1;
	p->f = f;
	p->b = (int32_t)lround(1.769 * (double)(1 << f));
	p->a15 = GELU_A15;
	return sky_k_quant_multiplier(sqrt(2.0) * ldexp(1.0, -f - 16) / s_out, &p->mult, &p->rshift);
}

static inline int8_t gelu1(int32_t x, const sky_k_gelu_params *p)
{
	int32_t ax = x < 0 ? -x : x;
	int32_t t = (ax < p->b ? ax : p->b) - p->b;          /* Q f, in [-B, 0] */
	int32_t t2 = (t * t) >> (2 * p->f - 14);              /* Q14, < 51300 */
	int32_t E = (1 << 15) + ((p->a15 * t2 + (1 << 13)) >> 14); /* |erf|, Q15 */
	int32_t P = x * ((1 << 15) + (x > 0 ? E : x < 0 ? -E : 0));
	return (int8_t)clamp64(sky_k_requant1(P, p->mult, p->rshift), -128, 127);
}

void sky_k_gelu_s16_s8_ref(const int16_t *x, size_t n, const sky_k_gelu_params *p, int8_t *y)
{
	for (size_t i = 0; i < n; i++)
		y[i] = gelu1(x[i], p);
}

void sky_k_add_s16_s8_ref(const int16_t *a, const int8_t *b, size_t n, int32_t ma, int ra,
			  int32_t mb, int rb, int32_t *r)
{
	for (size_t i = 0; i < n; i++)
		r[i] = (int32_t)(sky_k_requant1(a[i], ma, ra) + sky_k_requant1(b[i], mb, rb));
}

uint32_t sky_k_isqrt64(uint64_t v)
{
	/* bit by bit, from the top: exact and the same everywhere */
	uint64_t res = 0, bit = (uint64_t)1 << 62;
	while (bit > v)
		bit >>= 2;
	while (bit) {
		if (v >= res + bit) {
			v -= res + bit;
			res = (res >> 1) + bit;
		} else {
			res >>= 1;
		}
		bit >>= 2;
	}
	return (uint32_t)res;
}

void sky_k_layernorm_row_consts(int64_t sum, uint64_t ss, int cols, int32_t *mean, int32_t *mult,
				int *rshift)
{
	*mean = (int32_t)floor_div(sum + cols / 2, cols);
	/* ss was taken around the rounded mean: sum (r - mean)^2 */
	uint64_t sd = sky_k_isqrt64(ss / (uint64_t)cols);
	if (sd < 1)
		sd = 1;
	int len = 0; /* bit length of sd: sd in [2^(len-1), 2^len) */
	while ((sd >> len) != 0)
		len++;
	*mult = (int32_t)(((uint64_t)1 << (29 + len)) / sd); /* (2^29, 2^30] */
	*rshift = 13 + len;                                  /* d * mult >> rshift = d 2^16 / sd */
}

int64_t sky_k_layernorm_row_sum(const int32_t *x, int cols)
{
	int64_t sum = 0;
	for (int j = 0; j < cols; j++)
		sum += x[j];
	return sum;
}

void sky_k_layernorm_s8_ref(const int32_t *r, int rows, int cols, const int32_t *g,
			    const int64_t *b, int8_t *y)
{
	for (int i = 0; i < rows; i++) {
		const int32_t *x = r + (long)i * cols;
		int8_t *out = y + (long)i * cols;
		int64_t sum = sky_k_layernorm_row_sum(x, cols);
		int32_t mean = (int32_t)floor_div(sum + cols / 2, cols), mult;
		int rs;
		uint64_t ss = 0;
		for (int j = 0; j < cols; j++) {
			int64_t d = (int64_t)x[j] - mean;
			ss += (uint64_t)(d * d);
		}
		sky_k_layernorm_row_consts(sum, ss, cols, &mean, &mult, &rs);
		for (int j = 0; j < cols; j++) {
			int64_t xh = sky_k_requant1(x[j] - mean, mult, rs); /* Q16 */
			int64_t v = (xh * g[j] + b[j] + ((int64_t)1 << 30)) >> 31;
			out[j] = (int8_t)clamp64(v, -128, 127);
		}
	}
}

size_t sky_k_quantize_f32_s8_ref(const float *x, size_t n, float inv_s, int8_t *q)
{
	size_t bad = 0;
	for (size_t i = 0; i < n; i++) {
		float v = x[i] * inv_s;
		/* |v| < 2^23 after the clamp, so adding and taking away 1.5 * 2^23
		 * rounds to nearest even in the default mode, and vectorises */
		bad += !(v - v == 0); /* NaN or infinity */
		v = v - v == 0 ? v : 0;
		v = v < -128.f ? -128.f : v > 127.f ? 127.f : v;
		v = (v + 12582912.0f) - 12582912.0f;
		q[i] = (int8_t)(int)v;
	}
	return bad;
}

void sky_k_dequantize_s8_f32_ref(const int8_t *q, size_t n, float s, float *x)
{
	for (size_t i = 0; i < n; i++)
		x[i] = (float)q[i] * s;
}

void sky_k_softmax_s8(const int32_t *s, int rows, int cols, long lds, const uint8_t *mask,
		      const sky_k_softmax_params *p, uint8_t *y, long ldy)
{
#if defined(__x86_64__)
	if (sky_cpu_get_features().avx512) {
		sky_k_softmax_s8_avx512(s, rows, cols, lds, mask, p, y, ldy);
		return;
	}
	if (sky_cpu_get_features().avx2) {
		sky_k_softmax_s8_avx2(s, rows, cols, lds, mask, p, y, ldy);
		return;
	}
#elif defined(__aarch64__)
	if (sky_cpu_get_features().neon) {
		sky_k_softmax_s8_neon(s, rows, cols, lds, mask, p, y, ldy);
		return;
	}
#endif
	sky_k_softmax_s8_ref(s, rows, cols, lds, mask, p, y, ldy);
}

void sky_k_layernorm_s8(const int32_t *r, int rows, int cols, const int32_t *g, const int64_t *b,
			int8_t *y)
{
#if defined(__x86_64__)
	if (sky_cpu_get_features().avx512) {
		sky_k_layernorm_s8_avx512(r, rows, cols, g, b, y);
		return;
	}
	if (sky_cpu_get_features().avx2) {
		sky_k_layernorm_s8_avx2(r, rows, cols, g, b, y);
		return;
	}
#elif defined(__aarch64__)
	if (sky_cpu_get_features().neon) {
		sky_k_layernorm_s8_neon(r, rows, cols, g, b, y);
		return;
	}
#endif
	sky_k_layernorm_s8_ref(r, rows, cols, g, b, y);
}

void sky_k_add_s16_s8(const int16_t *a, const int8_t *b, size_t n, int32_t ma, int ra, int32_t mb,
		      int rb, int32_t *r)
{
#if defined(__x86_64__)
	if (sky_cpu_get_features().avx512) {
		sky_k_add_s16_s8_avx512(a, b, n, ma, ra, mb, rb, r);
		return;
	}
	if (sky_cpu_get_features().avx2) {
		sky_k_add_s16_s8_avx2(a, b, n, ma, ra, mb, rb, r);
		return;
	}
#elif defined(__aarch64__)
	if (sky_cpu_get_features().neon) {
		sky_k_add_s16_s8_neon(a, b, n, ma, ra, mb, rb, r);
		return;
	}
#endif
	sky_k_add_s16_s8_ref(a, b, n, ma, ra, mb, rb, r);
}

void sky_k_gelu_s16_s8(const int16_t *x, size_t n, const sky_k_gelu_params *p, int8_t *y)
{
#if defined(__x86_64__)
	if (sky_cpu_get_features().avx512) {
		sky_k_gelu_s16_s8_avx512(x, n, p, y);
		return;
	}
	if (sky_cpu_get_features().avx2) {
		sky_k_gelu_s16_s8_avx2(x, n, p, y);
		return;
	}
#elif defined(__aarch64__)
	if (sky_cpu_get_features().neon) {
		sky_k_gelu_s16_s8_neon(x, n, p, y);
		return;
	}
#endif
	sky_k_gelu_s16_s8_ref(x, n, p, y);
}

size_t sky_k_quantize_f32_s8(const float *x, size_t n, float inv_s, int8_t *q)
{
#if defined(__x86_64__)
	if (sky_cpu_get_features().avx512)
		return sky_k_quantize_f32_s8_avx512(x, n, inv_s, q);
	if (sky_cpu_get_features().avx2)
		return sky_k_quantize_f32_s8_avx2(x, n, inv_s, q);
#elif defined(__aarch64__)
	if (sky_cpu_get_features().neon)
		return sky_k_quantize_f32_s8_neon(x, n, inv_s, q);
#endif
	return sky_k_quantize_f32_s8_ref(x, n, inv_s, q);
}

void sky_k_dequantize_s8_f32(const int8_t *q, size_t n, float s, float *x)
{
#if defined(__x86_64__)
	if (sky_cpu_get_features().avx512) {
		sky_k_dequantize_s8_f32_avx512(q, n, s, x);
		return;
	}
	if (sky_cpu_get_features().avx2) {
		sky_k_dequantize_s8_f32_avx2(q, n, s, x);
		return;
	}
#elif defined(__aarch64__)
	if (sky_cpu_get_features().neon) {
		sky_k_dequantize_s8_f32_neon(q, n, s, x);
		return;
	}
#endif
	sky_k_dequantize_s8_f32_ref(q, n, s, x);
}
