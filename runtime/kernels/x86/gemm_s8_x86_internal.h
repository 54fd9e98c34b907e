/* Private to the x86 int8 GEMM variants that share the unsigned-weight
 * trick (VNNI, AMX): the fused epilogue for 16 channels of one row and the
 * row sum of the activations. Both variants must apply the same epilogue,
 * so it lives here once. Needs AVX-512 F/BW/VL + VNNI (every includer is
 * compiled with them). */
#ifndef SKY_GEMM_S8_X86_INTERNAL_H
#define SKY_GEMM_S8_X86_INTERNAL_H

#include "sky_kernels_s8.h"

#include <immintrin.h>
#include <stdint.h>

#define SKY_X86_INLINE static inline __attribute__((always_inline))

/* 16 channels n0.. of row m: v + bias, then store or requantise. */
SKY_X86_INLINE void sky_x86_epilogue16(__m512i v, const sky_k_gemm_out *o, long m, int n0, int cnt)
{
	__mmask16 km = cnt >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << cnt) - 1);
	if (o->bias)
		v = _mm512_add_epi32(v, _mm512_maskz_loadu_epi32(km, o->bias + n0));
	if (o->type == SKY_K_OUT_S32) {
		_mm512_mask_storeu_epi32((int32_t *)o->c + m * o->ldc + n0, km, v);
		return;
	}
	__m512i mult = _mm512_maskz_loadu_epi32(km, o->mult + n0);
	__m512i sh = _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(km, o->rshift + n0));
	sh = _mm512_mask_blend_epi32(km, _mm512_set1_epi32(1), sh); /* lanes off: any valid shift */
	__m512i one = _mm512_set1_epi64(1);
	__m512i sh_e = _mm512_and_si512(sh, _mm512_set1_epi64(0xffffffff));
	__m512i sh_o = _mm512_srli_epi64(sh, 32);
	__m512i pe = _mm512_mul_epi32(v, mult); /* low int32 of each int64 lane, signed */
	__m512i po = _mm512_mul_epi32(_mm512_srli_epi64(v, 32), _mm512_srli_epi64(mult, 32));
	pe = _mm512_srav_epi64(_mm512_add_epi64(pe, _mm512_sllv_epi64(one, _mm512_sub_epi64(sh_e, one))),
			       sh_e);
	po = _mm512_srav_epi64(_mm512_add_epi64(po, _mm512_sllv_epi64(one, _mm512_sub_epi64(sh_o, one))),
			       sh_o);
	int lo = o->type == SKY_K_OUT_S8 ? -128 : -32768, hi = o->type == SKY_K_OUT_S8 ? 127 : 32767;
	__m512i vlo = _mm512_set1_epi64(lo), vhi = _mm512_set1_epi64(hi);
	pe = _mm512_min_epi64(_mm512_max_epi64(pe, vlo), vhi);
	po = _mm512_min_epi64(_mm512_max_epi64(po, vlo), vhi);
	__m512i r = _mm512_mask_blend_epi32((__mmask16)0xAAAA, pe, _mm512_slli_epi64(po, 32));
	if (o->type == SKY_K_OUT_S8)
		_mm_mask_storeu_epi8((int8_t *)o->c + m * o->ldc + n0, km, _mm512_cvtepi32_epi8(r));
	else
		_mm256_mask_storeu_epi16((int16_t *)o->c + m * o->ldc + n0, km,
					 _mm512_cvtepi32_epi16(r));
}

/* sum of K int8: vpdpbusd of all-ones (u8) by the row (s8), 64 bytes a step */
static inline int32_t sky_x86_row_sum(const int8_t *a, int K)
{
	const __m512i ones = _mm512_set1_epi8(1);
	__m512i acc = _mm512_setzero_si512();
	int k = 0;
	for (; k + 64 <= K; k += 64)
		acc = _mm512_dpbusd_epi32(acc, ones, _mm512_loadu_si512((const void *)(a + k)));
	if (k < K) {
		__mmask64 km = K - k >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (K - k)) - 1);
		acc = _mm512_dpbusd_epi32(acc, ones, _mm512_maskz_loadu_epi8(km, a + k));
	}
	return _mm512_reduce_add_epi32(acc);
}

#endif
