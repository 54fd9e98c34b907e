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

/* ---- softmax ------------------------------------------------------------- */

#define EXP_B14 22168
#define EXP_A14 5874
#define EXP_C28 92341796
#define LN2_Q14 11357
#define EXP_ZMAX 18
#define SOFTMAX_MAX_COLS 4096

/* 4 scores and their keep lanes (all ones: column kept), the row's tail
 * padded with masked lanes so one code path serves every width */
static inline void load4(const int32_t *row, const uint8_t *mask, int j, int cols, int32x4_t *a,
			 uint32x4_t *keep)
{
	int32_t av[4] = {0, 0, 0, 0};
	uint32_t kv[4] = {0, 0, 0, 0};
	for (int l = 0; l < 4 && j + l < cols; l++) {
		av[l] = row[j + l];
		kv[l] = mask && mask[j + l] ? 0 : 0xffffffffu;
	}
	*a = vld1q_s32(av);
	*keep = vld1q_u32(kv);
}

static inline int32x4_t exp4(int32x4_t w)
{
	int32x4_t nw = vnegq_s32(w);
	int32x4_t z = vshrq_n_s32(nw, 16);
	int32x4_t r14 = vshrq_n_s32(vandq_s32(nw, vdupq_n_s32(0xffff)), 2);
	int32x4_t p14 = vnegq_s32(
		vshrq_n_s32(vmlaq_s32(vdupq_n_s32(1 << 13), r14, vdupq_n_s32(LN2_Q14)), 14));
	int32x4_t t = vaddq_s32(p14, vdupq_n_s32(EXP_B14));
	int32x4_t l28 = vmlaq_s32(vdupq_n_s32(EXP_C28), vdupq_n_s32(EXP_A14),
				  vshrq_n_s32(vmulq_s32(t, t), 14));
	int32x4_t e = vshlq_s32(l28, vnegq_s32(vaddq_s32(z, vdupq_n_s32(13))));
	uint32x4_t big = vcgeq_s32(z, vdupq_n_s32(EXP_ZMAX));
	return vbslq_s32(big, vdupq_n_s32(0), e);
}

void sky_k_softmax_s8_neon(const int32_t *s, int rows, int cols, long lds, const uint8_t *mask,
			   const sky_k_softmax_params *p, uint8_t *y, long ldy)
{
	if (cols > SOFTMAX_MAX_COLS) { /* the row of exponents lives on the stack */
		sky_k_softmax_s8_ref(s, rows, cols, lds, mask, p, y, ldy);
		return;
	}
	int32_t e[SOFTMAX_MAX_COLS + 4];
	const int32x2_t mw = vdup_n_s32(p->mw);
	const int64x2_t nrs = vdupq_n_s64(-p->rsw);
	for (int i = 0; i < rows; i++) {
		const int32_t *row = s + i * lds;
		uint8_t *out = y + i * ldy;
		int32x4_t vmx = vdupq_n_s32(INT32_MIN);
		uint32x4_t vany = vdupq_n_u32(0);
		for (int j = 0; j < cols; j += 4) {
			int32x4_t a;
			uint32x4_t keep;
			load4(row, mask, j, cols, &a, &keep);
			vany = vorrq_u32(vany, keep);
			vmx = vmaxq_s32(vmx, vbslq_s32(keep, a, vdupq_n_s32(INT32_MIN)));
		}
		if (vmaxvq_u32(vany) == 0) {
			memset(out, 0, (size_t)cols);
			continue;
		}
		int32_t mx = vmaxvq_s32(vmx);
		int64_t thr64 = (int64_t)mx - p->dmax;
		int32x4_t thr = vdupq_n_s32(thr64 < INT32_MIN ? INT32_MIN : (int32_t)thr64);
		int32x4_t vm = vdupq_n_s32(mx), ndmax = vdupq_n_s32(-p->dmax);
		uint32x4_t vsum = vdupq_n_u32(0);
		for (int j = 0; j < cols; j += 4) {
			int32x4_t a;
			uint32x4_t keep;
			load4(row, mask, j, cols, &a, &keep);
			/* d = max(a - mx, -dmax) without int32 overflow */
			int32x4_t d = vbslq_s32(vcltq_s32(a, thr), ndmax, vsubq_s32(a, vm));
			int64x2_t w0, w1;
			requant4(d, mw, nrs, &w0, &w1);
			int32x4_t w = vcombine_s32(vmovn_s64(w0), vmovn_s64(w1));
			int32x4_t ev = vandq_s32(exp4(w), vreinterpretq_s32_u32(keep));
			vsum = vaddq_u32(vsum, vreinterpretq_u32_s32(ev));
			vst1q_s32(e + j, ev);
		}
		uint64_t sum = vaddvq_u32(vsum);
		uint64_t inv = ((uint64_t)1 << 46) / sum;
		const uint32x2_t vinv = vdup_n_u32((uint32_t)inv);
		int j = 0;
		for (; j + 4 <= cols; j += 4) {
			uint32x4_t ev = vreinterpretq_u32_s32(vld1q_s32(e + j));
			uint64x2_t q0 = vrshrq_n_u64(vmull_u32(vget_low_u32(ev), vinv), 38);
			uint64x2_t q1 = vrshrq_n_u64(vmull_u32(vget_high_u32(ev), vinv), 38);
			uint32x4_t q = vminq_u32(vcombine_u32(vmovn_u64(q0), vmovn_u64(q1)),
						 vdupq_n_u32(255));
			uint8_t qb[8];
			vst1_u8(qb, vmovn_u16(vcombine_u16(vmovn_u32(q), vmovn_u32(q))));
			memcpy(out + j, qb, 4);
		}
		for (; j < cols; j++) {
			uint64_t q = ((uint64_t)(uint32_t)e[j] * inv + ((uint64_t)1 << 37)) >> 38;
			out[j] = (uint8_t)(q > 255 ? 255 : q);
		}
	}
}

/* ---- the layer's edges: fp32 <-> int8 ------------------------------------ */

size_t sky_k_quantize_f32_s8_neon(const float *x, size_t n, float inv_s, int8_t *q)
{
	size_t i = 0, bad = 0;
	const float32x4_t lo = vdupq_n_f32(-128.f), hi = vdupq_n_f32(127.f);
	for (; i + 8 <= n; i += 8) {
		int32x4_t r[2];
		for (int h = 0; h < 2; h++) {
			float32x4_t v = vmulq_n_f32(vld1q_f32(x + i + 4 * h), inv_s);
			uint32x4_t fin = vceqq_f32(vsubq_f32(v, v), vdupq_n_f32(0)); /* finite */
			bad += 4 - (size_t)vaddvq_u32(vshrq_n_u32(fin, 31));
			v = vbslq_f32(fin, v, vdupq_n_f32(0));
			v = vminq_f32(vmaxq_f32(v, lo), hi);
			r[h] = vcvtnq_s32_f32(v); /* to nearest, ties to even */
		}
		int16x8_t r16 = vcombine_s16(vmovn_s32(r[0]), vmovn_s32(r[1]));
		vst1_s8(q + i, vmovn_s16(r16));
	}
	if (i < n)
		bad += sky_k_quantize_f32_s8_ref(x + i, n - i, inv_s, q + i);
	return bad;
}

void sky_k_dequantize_s8_f32_neon(const int8_t *q, size_t n, float s, float *x)
{
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		int16x8_t v = vmovl_s8(vld1_s8(q + i));
		vst1q_f32(x + i, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(v))), s));
		vst1q_f32(x + i + 4, vmulq_n_f32(vcvtq_f32_s32(vmovl_high_s16(v)), s));
	}
	if (i < n)
		sky_k_dequantize_s8_f32_ref(q + i, n - i, s, x + i);
}
