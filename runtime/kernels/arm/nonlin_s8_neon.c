/* Integer GELU, LayerNorm and residual add on NEON, the same formulas as
 * nonlin_s8.c's _ref step for step (so the same bits): the requantisation
 * rule (x * m + 2^(rs-1)) >> rs is exactly vrshlq_s64 by -rs on the int64
 * product, and saturating narrows are the clamps. Tails run the scalar
 * formula. */
#include "sky_kernels_s8.h"

#include <arm_neon.h>
#include <string.h>

static inline int64_t clamp64(int64_t v, int64_t lo, int64_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

/* requant of 4 int32 lanes with one multiplier and shift, to int64 pairs */
static inline void requant4(int32x4_t v, int32x2_t m, int64x2_t nrs, int64x2_t *lo, int64x2_t *hi)
{
	*lo = vrshlq_s64(vmull_s32(vget_low_s32(v), m), nrs);
	*hi = vrshlq_s64(vmull_high_s32(v, vcombine_s32(m, m)), nrs);
}

static inline int8_t gelu1(int32_t x, const sky_k_gelu_params *p)
{
	int32_t ax = x < 0 ? -x : x;
	int32_t t = (ax < p->b ? ax : p->b) - p->b;
	int32_t t2 = (t * t) >> (2 * p->f - 14);
	int32_t E = (1 << 15) + ((p->a15 * t2 + (1 << 13)) >> 14);
	int32_t P = x * ((1 << 15) + (x > 0 ? E : x < 0 ? -E : 0));
	return (int8_t)clamp64(sky_k_requant1(P, p->mult, p->rshift), -128, 127);
}

static inline int32x4_t gelu_p4(int32x4_t x, const sky_k_gelu_params *p, int32x4_t nsh)
{
	const int32x4_t b = vdupq_n_s32(p->b), one15 = vdupq_n_s32(1 << 15);
	int32x4_t t = vsubq_s32(vminq_s32(vabsq_s32(x), b), b);
	int32x4_t t2 = vshlq_s32(vmulq_s32(t, t), nsh);
	int32x4_t E = vaddq_s32(
		one15, vshrq_n_s32(vmlaq_s32(vdupq_n_s32(1 << 13), vdupq_n_s32(p->a15), t2), 14));
	int32x4_t negE = vnegq_s32(E);
	int32x4_t sE = vbslq_s32(vcltq_s32(x, vdupq_n_s32(0)), negE, E);
	sE = vbslq_s32(vceqq_s32(x, vdupq_n_s32(0)), vdupq_n_s32(0), sE);
	return vmulq_s32(x, vaddq_s32(one15, sE));
}

void sky_k_gelu_s16_s8_neon(const int16_t *x, size_t n, const sky_k_gelu_params *p, int8_t *y)
{
	const int32x4_t nsh = vdupq_n_s32(-(2 * p->f - 14));
	const int32x2_t m = vdup_n_s32(p->mult);
	const int64x2_t nrs = vdupq_n_s64(-p->rshift);
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		int16x8_t xv = vld1q_s16(x + i);
		int32x4_t P0 = gelu_p4(vmovl_s16(vget_low_s16(xv)), p, nsh);
		int32x4_t P1 = gelu_p4(vmovl_high_s16(xv), p, nsh);
		int64x2_t a, b, c, d;
		requant4(P0, m, nrs, &a, &b);
		requant4(P1, m, nrs, &c, &d);
		int32x4_t r0 = vcombine_s32(vqmovn_s64(a), vqmovn_s64(b));
		int32x4_t r1 = vcombine_s32(vqmovn_s64(c), vqmovn_s64(d));
		int16x8_t r16 = vcombine_s16(vqmovn_s32(r0), vqmovn_s32(r1));
		vst1_s8(y + i, vqmovn_s16(r16));
	}
	for (; i < n; i++)
		y[i] = gelu1(x[i], p);
}

void sky_k_add_s16_s8_neon(const int16_t *a, const int8_t *b, size_t n, int32_t ma, int ra,
			   int32_t mb, int rb, int32_t *r)
{
	const int32x2_t vma = vdup_n_s32(ma), vmb = vdup_n_s32(mb);
	const int64x2_t nra = vdupq_n_s64(-ra), nrb = vdupq_n_s64(-rb);
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		int16x8_t av = vld1q_s16(a + i);
		int16x8_t bv = vmovl_s8(vld1_s8(b + i));
		for (int h = 0; h < 2; h++) {
			int32x4_t x = vmovl_s16(h ? vget_high_s16(av) : vget_low_s16(av));
			int32x4_t z = vmovl_s16(h ? vget_high_s16(bv) : vget_low_s16(bv));
			int64x2_t x0, x1, z0, z1;
			requant4(x, vma, nra, &x0, &x1);
			requant4(z, vmb, nrb, &z0, &z1);
			/* the ref narrows the int64 sum to int32: the low halves */
			int32x4_t s = vcombine_s32(vmovn_s64(vaddq_s64(x0, z0)), vmovn_s64(vaddq_s64(x1, z1)));
			vst1q_s32(r + i + 4 * h, s);
		}
	}
	for (; i < n; i++)
		r[i] = (int32_t)(sky_k_requant1(a[i], ma, ra) + sky_k_requant1(b[i], mb, rb));
}

void sky_k_layernorm_s8_neon(const int32_t *r, int rows, int cols, const int32_t *g,
			     const int64_t *b, int8_t *y)
{
	for (int i = 0; i < rows; i++) {
		const int32_t *x = r + (long)i * cols;
		int8_t *out = y + (long)i * cols;
		int64x2_t vs = vdupq_n_s64(0);
		int j = 0;
		for (; j + 4 <= cols; j += 4)
			vs = vpadalq_s32(vs, vld1q_s32(x + j));
		int64_t sum = vaddvq_s64(vs);
		for (; j < cols; j++)
			sum += x[j];
		int32_t mean, mult;
		int rs;
		sky_k_layernorm_row_consts(sum, 0, cols, &mean, &mult, &rs); /* mean only */
		int32x4_t vmean = vdupq_n_s32(mean);
		uint64x2_t vss = vdupq_n_u64(0);
		uint64_t ss = 0;
		for (j = 0; j + 4 <= cols; j += 4) {
			int32x4_t dv = vsubq_s32(vld1q_s32(x + j), vmean);
			vss = vaddq_u64(vss, vreinterpretq_u64_s64(vmull_s32(vget_low_s32(dv),
									     vget_low_s32(dv))));
			vss = vaddq_u64(vss, vreinterpretq_u64_s64(vmull_high_s32(dv, dv)));
		}
		ss = vaddvq_u64(vss);
		for (; j < cols; j++) {
			int64_t dd = (int64_t)x[j] - mean;
			ss += (uint64_t)(dd * dd);
		}
		sky_k_layernorm_row_consts(sum, ss, cols, &mean, &mult, &rs);
		vmean = vdupq_n_s32(mean);
		const int32x2_t vm = vdup_n_s32(mult);
		const int64x2_t nrs = vdupq_n_s64(-rs);
		for (j = 0; j + 8 <= cols; j += 8) {
			int32x4_t q[2];
			for (int h = 0; h < 2; h++) {
				int32x4_t dv = vsubq_s32(vld1q_s32(x + j + 4 * h), vmean);
				int64x2_t x0, x1;
				requant4(dv, vm, nrs, &x0, &x1);
				int32x4_t xh = vcombine_s32(vmovn_s64(x0), vmovn_s64(x1)); /* Q16 */
				int32x4_t gv = vld1q_s32(g + j + 4 * h);
				int64x2_t v0 = vaddq_s64(vmull_s32(vget_low_s32(xh), vget_low_s32(gv)),
							 vld1q_s64(b + j + 4 * h));
				int64x2_t v1 = vaddq_s64(vmull_high_s32(xh, gv), vld1q_s64(b + j + 4 * h + 2));
				q[h] = vcombine_s32(vqmovn_s64(vrshrq_n_s64(v0, 31)),
						    vqmovn_s64(vrshrq_n_s64(v1, 31)));
			}
			vst1_s8(out + j, vqmovn_s16(vcombine_s16(vqmovn_s32(q[0]), vqmovn_s32(q[1]))));
		}
		for (; j < cols; j++) {
			int64_t xh = sky_k_requant1(x[j] - mean, mult, rs);
			int64_t v = (xh * g[j] + b[j] + ((int64_t)1 << 30)) >> 31;
			out[j] = (int8_t)clamp64(v, -128, 127);
		}
	}
}
