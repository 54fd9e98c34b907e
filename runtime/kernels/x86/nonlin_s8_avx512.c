/* Integer softmax and GELU on AVX-512 (16 int32 lanes), the same formulas
 * as nonlin_s8.c's _ref step for step, so the bits are the same: int32
 * products where the ref has int32, vpmuldq (signed 32 x 32 -> 64) where it
 * has int64, arithmetic shifts as the ref's >> on signed values. */
#include "sky_kernels_s8.h"

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define EXP_B14 22168
#define EXP_A14 5874
#define EXP_C28 92341796
#define LN2_Q14 11357
#define EXP_ZMAX 18

/* requant(v, mult, rs) per lane with the same rs everywhere: int64 lanes
 * computed in even/odd halves, clamped to [lo, hi], back to int32. */
static inline __m512i requant16(__m512i v, __m512i mult, int rs, int64_t lo, int64_t hi)
{
	__m512i rnd = _mm512_set1_epi64((int64_t)1 << (rs - 1));
	__m128i c = _mm_cvtsi32_si128(rs);
	__m512i pe = _mm512_sra_epi64(_mm512_add_epi64(_mm512_mul_epi32(v, mult), rnd), c);
	__m512i po = _mm512_sra_epi64(
		_mm512_add_epi64(_mm512_mul_epi32(_mm512_srli_epi64(v, 32), mult), rnd), c);
	__m512i vlo = _mm512_set1_epi64(lo), vhi = _mm512_set1_epi64(hi);
	pe = _mm512_min_epi64(_mm512_max_epi64(pe, vlo), vhi);
	po = _mm512_min_epi64(_mm512_max_epi64(po, vlo), vhi);
	return _mm512_mask_blend_epi32((__mmask16)0xAAAA, pe, _mm512_slli_epi64(po, 32));
}

void sky_k_gelu_s16_s8_avx512(const int16_t *x, size_t n, const sky_k_gelu_params *p, int8_t *y)
{
	const __m512i b = _mm512_set1_epi32(p->b), a15 = _mm512_set1_epi32(p->a15);
	const __m512i one15 = _mm512_set1_epi32(1 << 15), r13 = _mm512_set1_epi32(1 << 13);
	const __m512i mult = _mm512_set1_epi32(p->mult), zero = _mm512_setzero_si512();
	const __m128i sh = _mm_cvtsi32_si128(2 * p->f - 14);
	size_t i = 0;
	for (; i < n; i += 16) {
		size_t cnt = n - i < 16 ? n - i : 16;
		__mmask16 km = (__mmask16)(cnt == 16 ? 0xFFFF : (1u << cnt) - 1);
		__m512i xv = _mm512_cvtepi16_epi32(_mm256_maskz_loadu_epi16(km, x + i));
		__m512i t = _mm512_sub_epi32(_mm512_min_epi32(_mm512_abs_epi32(xv), b), b);
		__m512i t2 = _mm512_sra_epi32(_mm512_mullo_epi32(t, t), sh);
		__m512i E = _mm512_add_epi32(
			one15, _mm512_srai_epi32(_mm512_add_epi32(_mm512_mullo_epi32(a15, t2), r13), 14));
		/* sgn(x) E: E, -E or 0 */
		__m512i sE = _mm512_mask_sub_epi32(E, _mm512_cmplt_epi32_mask(xv, zero), zero, E);
		sE = _mm512_mask_mov_epi32(sE, _mm512_cmpeq_epi32_mask(xv, zero), zero);
		__m512i P = _mm512_mullo_epi32(xv, _mm512_add_epi32(one15, sE));
		__m512i r = requant16(P, mult, p->rshift, -128, 127);
		_mm_mask_storeu_epi8(y + i, km, _mm512_cvtepi32_epi8(r));
	}
}

/* e (Q15) from the Q16 log2 exponent w <= 0, lanes as exp_q15() */
static inline __m512i exp16(__m512i w)
{
	__m512i nw = _mm512_sub_epi32(_mm512_setzero_si512(), w);
	__m512i z = _mm512_srai_epi32(nw, 16);
	__m512i r14 = _mm512_srai_epi32(_mm512_and_si512(nw, _mm512_set1_epi32(0xffff)), 2);
	__m512i p14 = _mm512_sub_epi32(
		_mm512_setzero_si512(),
		_mm512_srai_epi32(_mm512_add_epi32(_mm512_mullo_epi32(r14, _mm512_set1_epi32(LN2_Q14)),
						   _mm512_set1_epi32(1 << 13)),
				  14));
	__m512i t = _mm512_add_epi32(p14, _mm512_set1_epi32(EXP_B14));
	__m512i l28 = _mm512_add_epi32(
		_mm512_mullo_epi32(_mm512_set1_epi32(EXP_A14),
				   _mm512_srai_epi32(_mm512_mullo_epi32(t, t), 14)),
		_mm512_set1_epi32(EXP_C28));
	__mmask16 big = _mm512_cmpge_epi32_mask(z, _mm512_set1_epi32(EXP_ZMAX));
	__m512i e = _mm512_srav_epi32(l28, _mm512_add_epi32(z, _mm512_set1_epi32(13)));
	return _mm512_mask_mov_epi32(e, big, _mm512_setzero_si512());
}

#define SOFTMAX_MAX_COLS 4096

void sky_k_softmax_s8_avx512(const int32_t *s, int rows, int cols, long lds, const uint8_t *mask,
			     const sky_k_softmax_params *p, uint8_t *y, long ldy)
{
	if (cols > SOFTMAX_MAX_COLS) { /* the row of exponents lives on the stack */
		sky_k_softmax_s8_ref(s, rows, cols, lds, mask, p, y, ldy);
		return;
	}
	int32_t e[SOFTMAX_MAX_COLS];
	const __m512i mw = _mm512_set1_epi32(p->mw);
	for (int i = 0; i < rows; i++) {
		const int32_t *row = s + i * lds;
		uint8_t *out = y + i * ldy;
		__m512i vmx = _mm512_set1_epi32(INT32_MIN);
		int any = 0;
		for (int j = 0; j < cols; j += 16) {
			int cnt = cols - j < 16 ? cols - j : 16;
			__mmask16 km = (__mmask16)(cnt == 16 ? 0xFFFF : (1u << cnt) - 1);
			if (mask)
				km &= _mm_cmpeq_epi8_mask(_mm_maskz_loadu_epi8(km, mask + j),
							  _mm_setzero_si128());
			any |= km != 0;
			vmx = _mm512_mask_max_epi32(vmx, km, vmx, _mm512_maskz_loadu_epi32(km, row + j));
		}
		if (!any) {
			memset(out, 0, (size_t)cols);
			continue;
		}
		int32_t mx = _mm512_reduce_max_epi32(vmx);
		int64_t thr64 = (int64_t)mx - p->dmax;
		__m512i thr = _mm512_set1_epi32(thr64 < INT32_MIN ? INT32_MIN : (int32_t)thr64);
		__m512i vm = _mm512_set1_epi32(mx), ndmax = _mm512_set1_epi32(-p->dmax);
		__m512i vsum = _mm512_setzero_si512();
		for (int j = 0; j < cols; j += 16) {
			int cnt = cols - j < 16 ? cols - j : 16;
			__mmask16 km = (__mmask16)(cnt == 16 ? 0xFFFF : (1u << cnt) - 1);
			__mmask16 keep = km;
			if (mask)
				keep &= _mm_cmpeq_epi8_mask(_mm_maskz_loadu_epi8(km, mask + j),
							    _mm_setzero_si128());
			__m512i a = _mm512_maskz_loadu_epi32(km, row + j);
			/* d = max(a - mx, -dmax) without int32 overflow */
			__m512i d = _mm512_mask_mov_epi32(_mm512_sub_epi32(a, vm),
							  _mm512_cmplt_epi32_mask(a, thr), ndmax);
			__m512i w = requant16(d, mw, p->rsw, INT64_MIN / 2, INT64_MAX / 2);
			__m512i ev = _mm512_maskz_mov_epi32(keep, exp16(w));
			vsum = _mm512_add_epi32(vsum, ev);
			_mm512_mask_storeu_epi32(e + j, km, ev);
		}
		uint64_t sum = (uint64_t)(uint32_t)_mm512_reduce_add_epi32(vsum);
		uint64_t inv = ((uint64_t)1 << 46) / sum;
		__m512i vinv = _mm512_set1_epi64((int64_t)inv), rnd = _mm512_set1_epi64((int64_t)1 << 37);
		for (int j = 0; j < cols; j += 16) {
			int cnt = cols - j < 16 ? cols - j : 16;
			__mmask16 km = (__mmask16)(cnt == 16 ? 0xFFFF : (1u << cnt) - 1);
			__m512i ev = _mm512_maskz_loadu_epi32(km, e + j);
			__m512i qe = _mm512_srli_epi64(_mm512_add_epi64(_mm512_mul_epu32(ev, vinv), rnd), 38);
			__m512i qo = _mm512_srli_epi64(
				_mm512_add_epi64(_mm512_mul_epu32(_mm512_srli_epi64(ev, 32), vinv), rnd), 38);
			__m512i q = _mm512_mask_blend_epi32((__mmask16)0xAAAA, qe, _mm512_slli_epi64(qo, 32));
			q = _mm512_min_epi32(q, _mm512_set1_epi32(255));
			_mm_mask_storeu_epi8(out + j, km, _mm512_cvtepi32_epi8(q));
		}
	}
}

/* ---- LayerNorm and residual add: 8 int64 lanes at a time ---------------- */

static inline __mmask8 mask8(int cnt) { return (__mmask8)(cnt >= 8 ? 0xFF : (1u << cnt) - 1); }

/* requant of sign-extended int32 values held in int64 lanes */
static inline __m512i requant8(__m512i v64, __m512i mult64, __m128i rs, __m512i rnd)
{
	return _mm512_sra_epi64(_mm512_add_epi64(_mm512_mul_epi32(v64, mult64), rnd), rs);
}

void sky_k_layernorm_s8_avx512(const int32_t *r, int rows, int cols, const int32_t *g,
			       const int64_t *b, int8_t *y)
{
	const __m512i r30 = _mm512_set1_epi64((int64_t)1 << 30);
	const __m512i lo = _mm512_set1_epi64(-128), hi = _mm512_set1_epi64(127);
	for (int i = 0; i < rows; i++) {
		const int32_t *x = r + (long)i * cols;
		int8_t *out = y + (long)i * cols;
		__m512i vs = _mm512_setzero_si512();
		for (int j = 0; j < cols; j += 8) {
			__mmask8 km = mask8(cols - j);
			vs = _mm512_add_epi64(vs, _mm512_cvtepi32_epi64(_mm256_maskz_loadu_epi32(km, x + j)));
		}
		int64_t sum = _mm512_reduce_add_epi64(vs);
		int32_t mean, mult;
		int rs;
		sky_k_layernorm_row_consts(sum, 0, cols, &mean, &mult, &rs); /* mean only */
		__m512i vmean = _mm512_set1_epi64(mean), vss = _mm512_setzero_si512();
		for (int j = 0; j < cols; j += 8) {
			__mmask8 km = mask8(cols - j);
			__m512i d = _mm512_maskz_sub_epi64(
				km, _mm512_cvtepi32_epi64(_mm256_maskz_loadu_epi32(km, x + j)), vmean);
			vss = _mm512_add_epi64(vss, _mm512_mul_epi32(d, d));
		}
		uint64_t ss = (uint64_t)_mm512_reduce_add_epi64(vss);
		sky_k_layernorm_row_consts(sum, ss, cols, &mean, &mult, &rs);
		__m512i vm = _mm512_set1_epi64(mult), rnd = _mm512_set1_epi64((int64_t)1 << (rs - 1));
		__m128i crs = _mm_cvtsi32_si128(rs);
		for (int j = 0; j < cols; j += 8) {
			__mmask8 km = mask8(cols - j);
			__m512i d = _mm512_sub_epi64(
				_mm512_cvtepi32_epi64(_mm256_maskz_loadu_epi32(km, x + j)), vmean);
			__m512i xh = requant8(d, vm, crs, rnd); /* Q16, fits int32 */
			__m512i gv = _mm512_cvtepi32_epi64(_mm256_maskz_loadu_epi32(km, g + j));
			__m512i v = _mm512_add_epi64(_mm512_mul_epi32(xh, gv),
						     _mm512_add_epi64(_mm512_maskz_loadu_epi64(km, b + j), r30));
			v = _mm512_min_epi64(_mm512_max_epi64(_mm512_srai_epi64(v, 31), lo), hi);
			_mm512_mask_cvtepi64_storeu_epi8(out + j, km, v);
		}
	}
}

void sky_k_add_s16_s8_avx512(const int16_t *a, const int8_t *b, size_t n, int32_t ma, int ra,
			     int32_t mb, int rb, int32_t *r)
{
	const __m512i vma = _mm512_set1_epi64(ma), vmb = _mm512_set1_epi64(mb);
	const __m512i rnda = _mm512_set1_epi64((int64_t)1 << (ra - 1));
	const __m512i rndb = _mm512_set1_epi64((int64_t)1 << (rb - 1));
	const __m128i cra = _mm_cvtsi32_si128(ra), crb = _mm_cvtsi32_si128(rb);
	for (size_t i = 0; i < n; i += 8) {
		__mmask8 km = mask8((int)(n - i < 8 ? n - i : 8));
		__m512i av = _mm512_cvtepi16_epi64(_mm_maskz_loadu_epi16(km, a + i));
		__m512i bv = _mm512_cvtepi8_epi64(_mm_maskz_loadu_epi8(km, b + i));
		__m512i s = _mm512_add_epi64(requant8(av, vma, cra, rnda), requant8(bv, vmb, crb, rndb));
		_mm256_mask_storeu_epi32(r + i, km, _mm512_cvtepi64_epi32(s));
	}
}

/* ---- the layer's edges: fp32 <-> int8 ------------------------------------ */

size_t sky_k_quantize_f32_s8_avx512(const float *x, size_t n, float inv_s, int8_t *q)
{
	const __m512 vinv = _mm512_set1_ps(inv_s), lo = _mm512_set1_ps(-128.f);
	const __m512 hi = _mm512_set1_ps(127.f), zero = _mm512_setzero_ps();
	size_t bad = 0;
	for (size_t i = 0; i < n; i += 16) {
		__mmask16 km = (__mmask16)(n - i >= 16 ? 0xFFFF : (1u << (n - i)) - 1);
		__m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(km, x + i), vinv);
		/* v - v is 0 exactly when v is finite */
		__mmask16 fin = _mm512_cmp_ps_mask(_mm512_sub_ps(v, v), zero, _CMP_EQ_OQ);
		bad += (size_t)__builtin_popcount((unsigned)(km & (__mmask16)~fin));
		v = _mm512_maskz_mov_ps(fin, v);
		v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
		/* round to nearest even (the default mode), as the ref's 1.5 * 2^23 trick */
		__m512i r = _mm512_cvt_roundps_epi32(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
		_mm_mask_storeu_epi8(q + i, km, _mm512_cvtepi32_epi8(r));
	}
	return bad;
}

void sky_k_dequantize_s8_f32_avx512(const int8_t *q, size_t n, float s, float *x)
{
	const __m512 vs = _mm512_set1_ps(s);
	for (size_t i = 0; i < n; i += 16) {
		__mmask16 km = (__mmask16)(n - i >= 16 ? 0xFFFF : (1u << (n - i)) - 1);
		__m512 v = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(km, q + i)));
		_mm512_mask_storeu_ps(x + i, km, _mm512_mul_ps(v, vs));
	}
}
