/* Integer softmax, GELU, LayerNorm, residual add and the fp32 edges on
 * AVX2 (x86 without AVX-512), the same formulas as nonlin_s8.c's _ref step
 * for step. AVX2 has no 64-bit arithmetic shift and no 64-bit min/max, so
 * the requantisation (x * m + 2^(rs-1)) >> rs adds 2^62 first (the sum is
 * then non-negative: |x * m| < 2^62), shifts logically and takes
 * 2^(62 - rs) away, which is exact for rs <= 62; clamps use vpcmpgtq. */
#include "sky_kernels_s8.h"

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define EXP_B14 22168
#define EXP_A14 5874
#define EXP_C28 92341796
#define LN2_Q14 11357
#define EXP_ZMAX 18
#define SOFTMAX_MAX_COLS 4096

/* floor((p + 2^(rs-1)) / 2^rs) for int64 lanes p, |p| < 2^62 */
static inline __m256i rshift_round64(__m256i p, int rs)
{
	const __m256i bias = _mm256_set1_epi64x((int64_t)1 << 62);
	__m256i t = _mm256_add_epi64(_mm256_add_epi64(p, _mm256_set1_epi64x((int64_t)1 << (rs - 1))),
				     bias);
	t = _mm256_srl_epi64(t, _mm_cvtsi32_si128(rs));
	return _mm256_sub_epi64(t, _mm256_set1_epi64x((int64_t)1 << (62 - rs)));
}

static inline __m256i clamp64(__m256i v, int64_t lo, int64_t hi)
{
	__m256i vlo = _mm256_set1_epi64x(lo), vhi = _mm256_set1_epi64x(hi);
	v = _mm256_blendv_epi8(v, vlo, _mm256_cmpgt_epi64(vlo, v));
	return _mm256_blendv_epi8(v, vhi, _mm256_cmpgt_epi64(v, vhi));
}

/* requant of 8 int32 lanes with one multiplier and shift, clamped to
 * [lo, hi] in int64, back to 8 int32 lanes */
static inline __m256i requant8(__m256i v, int32_t mult, int rs, int64_t lo, int64_t hi)
{
	__m256i m = _mm256_set1_epi32(mult);
	__m256i pe = clamp64(rshift_round64(_mm256_mul_epi32(v, m), rs), lo, hi);
	__m256i po = clamp64(rshift_round64(_mm256_mul_epi32(_mm256_srli_epi64(v, 32), m), rs), lo, hi);
	return _mm256_blend_epi32(pe, _mm256_slli_epi64(po, 32), 0xAA);
}

/* 8 int32 lanes (each already in [-128, 127] or [0, 255]) to 8 bytes */
static inline void store8_bytes(void *dst, __m256i r, int n)
{
	int32_t t[8];
	uint8_t b[8];
	_mm256_storeu_si256((__m256i *)t, r);
	for (int l = 0; l < 8; l++)
		b[l] = (uint8_t)t[l];
	memcpy(dst, b, (size_t)n);
}

/* ---- GELU ------------------------------------------------------------------ */

void sky_k_gelu_s16_s8_avx2(const int16_t *x, size_t n, const sky_k_gelu_params *p, int8_t *y)
{
	const __m256i b = _mm256_set1_epi32(p->b), a15 = _mm256_set1_epi32(p->a15);
	const __m256i one15 = _mm256_set1_epi32(1 << 15), r13 = _mm256_set1_epi32(1 << 13);
	const __m256i zero = _mm256_setzero_si256();
	const __m128i sh = _mm_cvtsi32_si128(2 * p->f - 14);
	for (size_t i = 0; i < n; i += 8) {
		int cnt = n - i < 8 ? (int)(n - i) : 8;
		int16_t xin[8] = {0};
		memcpy(xin, x + i, (size_t)cnt * 2);
		__m256i xv = _mm256_cvtepi16_epi32(_mm_loadu_si128((const __m128i *)xin));
		__m256i t = _mm256_sub_epi32(_mm256_min_epi32(_mm256_abs_epi32(xv), b), b);
		__m256i t2 = _mm256_sra_epi32(_mm256_mullo_epi32(t, t), sh);
		__m256i E = _mm256_add_epi32(
			one15, _mm256_srai_epi32(_mm256_add_epi32(_mm256_mullo_epi32(a15, t2), r13), 14));
		__m256i sE = _mm256_blendv_epi8(E, _mm256_sub_epi32(zero, E), _mm256_cmpgt_epi32(zero, xv));
		sE = _mm256_andnot_si256(_mm256_cmpeq_epi32(xv, zero), sE);
		__m256i P = _mm256_mullo_epi32(xv, _mm256_add_epi32(one15, sE));
		store8_bytes(y + i, requant8(P, p->mult, p->rshift, -128, 127), cnt);
	}
}

/* ---- residual add and LayerNorm --------------------------------------------- */

void sky_k_add_s16_s8_avx2(const int16_t *a, const int8_t *b, size_t n, int32_t ma, int ra,
			   int32_t mb, int rb, int32_t *r)
{
	for (size_t i = 0; i < n; i += 4) {
		int cnt = n - i < 4 ? (int)(n - i) : 4;
		int64_t av[4] = {0}, bv[4] = {0};
		for (int l = 0; l < cnt; l++)
			av[l] = a[i + l], bv[l] = b[i + l];
		__m256i x = _mm256_loadu_si256((const __m256i *)av);
		__m256i z = _mm256_loadu_si256((const __m256i *)bv);
		__m256i s = _mm256_add_epi64(
			rshift_round64(_mm256_mul_epi32(x, _mm256_set1_epi64x(ma)), ra),
			rshift_round64(_mm256_mul_epi32(z, _mm256_set1_epi64x(mb)), rb));
		int64_t out[4];
		_mm256_storeu_si256((__m256i *)out, s);
		for (int l = 0; l < cnt; l++)
			r[i + l] = (int32_t)out[l]; /* as the ref: the int64 sum narrowed */
	}
}

static inline __m256i load4_i32_as_i64(const int32_t *p, int cnt)
{
	int32_t t[4] = {0, 0, 0, 0};
	memcpy(t, p, (size_t)cnt * 4);
	return _mm256_cvtepi32_epi64(_mm_loadu_si128((const __m128i *)t));
}

void sky_k_layernorm_s8_avx2(const int32_t *r, int rows, int cols, const int32_t *g,
			     const int64_t *b, int8_t *y)
{
	for (int i = 0; i < rows; i++) {
		const int32_t *x = r + (long)i * cols;
		int8_t *out = y + (long)i * cols;
		__m256i vs = _mm256_setzero_si256();
		for (int j = 0; j < cols; j += 4)
			vs = _mm256_add_epi64(vs, load4_i32_as_i64(x + j, cols - j < 4 ? cols - j : 4));
		int64_t s4[4];
		_mm256_storeu_si256((__m256i *)s4, vs);
		int64_t sum = s4[0] + s4[1] + s4[2] + s4[3];
		int32_t mean, mult;
		int rs;
		sky_k_layernorm_row_consts(sum, 0, cols, &mean, &mult, &rs); /* mean only */
		__m256i vmean = _mm256_set1_epi64x(mean), vss = _mm256_setzero_si256();
		for (int j = 0; j < cols; j += 4) {
			int cnt = cols - j < 4 ? cols - j : 4;
			__m256i d = _mm256_sub_epi64(load4_i32_as_i64(x + j, cnt), vmean);
			/* padding lanes hold -mean: zero their squares */
			__m256i keep = _mm256_cmpgt_epi64(_mm256_set1_epi64x(cnt),
							  _mm256_setr_epi64x(0, 1, 2, 3));
			vss = _mm256_add_epi64(vss, _mm256_and_si256(keep, _mm256_mul_epi32(d, d)));
		}
		_mm256_storeu_si256((__m256i *)s4, vss);
		uint64_t ss = (uint64_t)s4[0] + (uint64_t)s4[1] + (uint64_t)s4[2] + (uint64_t)s4[3];
		sky_k_layernorm_row_consts(sum, ss, cols, &mean, &mult, &rs);
		vmean = _mm256_set1_epi64x(mean);
		const __m256i vm = _mm256_set1_epi64x(mult);
		for (int j = 0; j < cols; j += 4) {
			int cnt = cols - j < 4 ? cols - j : 4;
			__m256i d = _mm256_sub_epi64(load4_i32_as_i64(x + j, cnt), vmean);
			__m256i xh = rshift_round64(_mm256_mul_epi32(d, vm), rs); /* Q16, fits int32 */
			int64_t bb[4] = {0, 0, 0, 0};
			memcpy(bb, b + j, (size_t)cnt * 8);
			__m256i v = _mm256_add_epi64(_mm256_mul_epi32(xh, load4_i32_as_i64(g + j, cnt)),
						     _mm256_loadu_si256((const __m256i *)bb));
			v = clamp64(rshift_round64(v, 31), -128, 127);
			int64_t o4[4];
			_mm256_storeu_si256((__m256i *)o4, v);
			for (int l = 0; l < cnt; l++)
				out[j + l] = (int8_t)o4[l];
		}
	}
}

/* ---- softmax ------------------------------------------------------------------- */

static inline __m256i exp8(__m256i w)
{
	__m256i nw = _mm256_sub_epi32(_mm256_setzero_si256(), w);
	__m256i z = _mm256_srai_epi32(nw, 16);
	__m256i r14 = _mm256_srai_epi32(_mm256_and_si256(nw, _mm256_set1_epi32(0xffff)), 2);
	__m256i p14 = _mm256_sub_epi32(
		_mm256_setzero_si256(),
		_mm256_srai_epi32(_mm256_add_epi32(_mm256_mullo_epi32(r14, _mm256_set1_epi32(LN2_Q14)),
						   _mm256_set1_epi32(1 << 13)),
				  14));
	__m256i t = _mm256_add_epi32(p14, _mm256_set1_epi32(EXP_B14));
	__m256i l28 = _mm256_add_epi32(
		_mm256_mullo_epi32(_mm256_set1_epi32(EXP_A14),
				   _mm256_srai_epi32(_mm256_mullo_epi32(t, t), 14)),
		_mm256_set1_epi32(EXP_C28));
	__m256i big = _mm256_cmpgt_epi32(z, _mm256_set1_epi32(EXP_ZMAX - 1));
	__m256i e = _mm256_srav_epi32(l28, _mm256_add_epi32(z, _mm256_set1_epi32(13)));
	return _mm256_andnot_si256(big, e);
}

/* 8 scores and keep lanes (all ones: kept); the tail padded with masked lanes */
static inline void load8(const int32_t *row, const uint8_t *mask, int j, int cols, __m256i *a,
			 __m256i *keep)
{
	int32_t av[8] = {0}, kv[8] = {0};
	for (int l = 0; l < 8 && j + l < cols; l++) {
		av[l] = row[j + l];
		kv[l] = mask && mask[j + l] ? 0 : -1;
	}
	*a = _mm256_loadu_si256((const __m256i *)av);
	*keep = _mm256_loadu_si256((const __m256i *)kv);
}

void sky_k_softmax_s8_avx2(const int32_t *s, int rows, int cols, long lds, const uint8_t *mask,
			   const sky_k_softmax_params *p, uint8_t *y, long ldy)
{
	if (cols > SOFTMAX_MAX_COLS) { /* the row of exponents lives on the stack */
		sky_k_softmax_s8_ref(s, rows, cols, lds, mask, p, y, ldy);
		return;
	}
	int32_t e[SOFTMAX_MAX_COLS + 8];
	const __m256i imin = _mm256_set1_epi32(INT32_MIN);
	for (int i = 0; i < rows; i++) {
		const int32_t *row = s + i * lds;
		uint8_t *out = y + i * ldy;
		__m256i vmx = imin, vany = _mm256_setzero_si256();
		for (int j = 0; j < cols; j += 8) {
			__m256i a, keep;
			load8(row, mask, j, cols, &a, &keep);
			vany = _mm256_or_si256(vany, keep);
			vmx = _mm256_max_epi32(vmx, _mm256_blendv_epi8(imin, a, keep));
		}
		if (_mm256_testz_si256(vany, vany)) {
			memset(out, 0, (size_t)cols);
			continue;
		}
		int32_t t8[8];
		_mm256_storeu_si256((__m256i *)t8, vmx);
		int32_t mx = t8[0];
		for (int l = 1; l < 8; l++)
			mx = t8[l] > mx ? t8[l] : mx;
		int64_t thr64 = (int64_t)mx - p->dmax;
		__m256i thr = _mm256_set1_epi32(thr64 < INT32_MIN ? INT32_MIN : (int32_t)thr64);
		__m256i vm = _mm256_set1_epi32(mx), ndmax = _mm256_set1_epi32(-p->dmax);
		__m256i vsum = _mm256_setzero_si256();
		for (int j = 0; j < cols; j += 8) {
			__m256i a, keep;
			load8(row, mask, j, cols, &a, &keep);
			/* d = max(a - mx, -dmax) without int32 overflow */
			__m256i d = _mm256_blendv_epi8(_mm256_sub_epi32(a, vm), ndmax,
						       _mm256_cmpgt_epi32(thr, a));
			__m256i w = requant8(d, p->mw, p->rsw, INT64_MIN / 4, INT64_MAX / 4);
			__m256i ev = _mm256_and_si256(exp8(w), keep);
			vsum = _mm256_add_epi32(vsum, ev);
			_mm256_storeu_si256((__m256i *)(e + j), ev);
		}
		_mm256_storeu_si256((__m256i *)t8, vsum);
		uint64_t sum = 0;
		for (int l = 0; l < 8; l++)
			sum += (uint32_t)t8[l];
		uint64_t inv = ((uint64_t)1 << 46) / sum;
		const __m256i vinv = _mm256_set1_epi64x((int64_t)inv);
		const __m256i rnd = _mm256_set1_epi64x((int64_t)1 << 37);
		for (int j = 0; j < cols; j += 8) {
			__m256i ev = _mm256_loadu_si256((const __m256i *)(e + j));
			__m256i qe = _mm256_srli_epi64(_mm256_add_epi64(_mm256_mul_epu32(ev, vinv), rnd), 38);
			__m256i qo = _mm256_srli_epi64(
				_mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(ev, 32), vinv), rnd), 38);
			__m256i q = _mm256_blend_epi32(qe, _mm256_slli_epi64(qo, 32), 0xAA);
			q = _mm256_min_epi32(q, _mm256_set1_epi32(255));
			store8_bytes(out + j, q, cols - j < 8 ? cols - j : 8);
		}
	}
}

/* ---- the layer's edges: fp32 <-> int8 ------------------------------------- */

size_t sky_k_quantize_f32_s8_avx2(const float *x, size_t n, float inv_s, int8_t *q)
{
	const __m256 vinv = _mm256_set1_ps(inv_s), lo = _mm256_set1_ps(-128.f);
	const __m256 hi = _mm256_set1_ps(127.f), zero = _mm256_setzero_ps();
	size_t bad = 0, i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), vinv);
		__m256 fin = _mm256_cmp_ps(_mm256_sub_ps(v, v), zero, _CMP_EQ_OQ); /* finite */
		bad += (size_t)(8 - __builtin_popcount((unsigned)_mm256_movemask_ps(fin)));
		v = _mm256_and_ps(v, fin);
		v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
		store8_bytes(q + i, _mm256_cvtps_epi32(v), 8); /* to nearest even (default mode) */
	}
	if (i < n)
		bad += sky_k_quantize_f32_s8_ref(x + i, n - i, inv_s, q + i);
	return bad;
}

void sky_k_dequantize_s8_f32_avx2(const int8_t *q, size_t n, float s, float *x)
{
	const __m256 vs = _mm256_set1_ps(s);
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(q + i)));
		_mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_cvtepi32_ps(v), vs));
	}
	if (i < n)
		sky_k_dequantize_s8_f32_ref(q + i, n - i, s, x + i);
}
