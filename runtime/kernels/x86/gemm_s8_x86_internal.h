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

/* The per-channel half of the epilogue for 16 channels n0.. (cnt of them
 * stored): bias, Q31 multiplier and the shift with its rounding term,
 * split into even and odd int32 lanes for the int64 products. Computed once
 * for all the rows that share those channels. */
typedef struct sky_x86_epi {
	__mmask16 km;
	__m512i bias;           /* zeros when out->bias is NULL (adding 0 changes nothing) */
	__m512i mult_e, mult_o; /* mult in the low int32 of each int64 lane */
	__m512i sh_e, sh_o;     /* rshift per int64 lane */
	__m512i rnd_e, rnd_o;   /* 2^(rshift - 1) */
	__m512i lo, hi;         /* saturation bounds of the output type */
} sky_x86_epi;

SKY_X86_INLINE void sky_x86_epi_prep(const sky_k_gemm_out *o, int n0, int cnt, sky_x86_epi *e)
{
	__mmask16 km = cnt >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << cnt) - 1);
	e->km = km;
	e->bias = o->bias ? _mm512_maskz_loadu_epi32(km, o->bias + n0) : _mm512_setzero_si512();
	if (o->type == SKY_K_OUT_S32) { /* no requantisation (zeros keep the compiler sure) */
		e->mult_e = e->mult_o = e->sh_e = e->sh_o = _mm512_setzero_si512();
		e->rnd_e = e->rnd_o = e->lo = e->hi = _mm512_setzero_si512();
		return;
	}
	__m512i mult = _mm512_maskz_loadu_epi32(km, o->mult + n0);
	__m512i sh = _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(km, o->rshift + n0));
	sh = _mm512_mask_blend_epi32(km, _mm512_set1_epi32(1), sh); /* lanes off: any valid shift */
	__m512i one = _mm512_set1_epi64(1);
	e->mult_e = mult;
	e->mult_o = _mm512_srli_epi64(mult, 32);
	e->sh_e = _mm512_and_si512(sh, _mm512_set1_epi64(0xffffffff));
	e->sh_o = _mm512_srli_epi64(sh, 32);
	e->rnd_e = _mm512_sllv_epi64(one, _mm512_sub_epi64(e->sh_e, one));
	e->rnd_o = _mm512_sllv_epi64(one, _mm512_sub_epi64(e->sh_o, one));
	int lo = o->type == SKY_K_OUT_S8 ? -128 : -32768, hi = o->type == SKY_K_OUT_S8 ? 127 : 32767;
	e->lo = _mm512_set1_epi64(lo);
	e->hi = _mm512_set1_epi64(hi);
}

/* Row m of those channels: v + bias, then store or requantise. */
SKY_X86_INLINE void sky_x86_epi_apply(__m512i v, const sky_x86_epi *e, const sky_k_gemm_out *o,
				      long m, int n0)
{
	v = _mm512_add_epi32(v, e->bias);
	if (o->type == SKY_K_OUT_S32) {
		_mm512_mask_storeu_epi32((int32_t *)o->c + m * o->ldc + n0, e->km, v);
		return;
	}
	__m512i pe = _mm512_mul_epi32(v, e->mult_e); /* low int32 of each int64 lane, signed */
	__m512i po = _mm512_mul_epi32(_mm512_srli_epi64(v, 32), e->mult_o);
	pe = _mm512_srav_epi64(_mm512_add_epi64(pe, e->rnd_e), e->sh_e);
	po = _mm512_srav_epi64(_mm512_add_epi64(po, e->rnd_o), e->sh_o);
	pe = _mm512_min_epi64(_mm512_max_epi64(pe, e->lo), e->hi);
	po = _mm512_min_epi64(_mm512_max_epi64(po, e->lo), e->hi);
	__m512i r = _mm512_mask_blend_epi32((__mmask16)0xAAAA, pe, _mm512_slli_epi64(po, 32));
	if (o->type == SKY_K_OUT_S8)
		_mm_mask_storeu_epi8((int8_t *)o->c + m * o->ldc + n0, e->km, _mm512_cvtepi32_epi8(r));
	else
		_mm256_mask_storeu_epi16((int16_t *)o->c + m * o->ldc + n0, e->km,
					 _mm512_cvtepi32_epi16(r));
}

/* 16 channels n0.. of row m: v + bias, then store or requantise. */
SKY_X86_INLINE void sky_x86_epilogue16(__m512i v, const sky_k_gemm_out *o, long m, int n0, int cnt)
{
	sky_x86_epi e;
	sky_x86_epi_prep(o, n0, cnt, &e);
	sky_x86_epi_apply(v, &e, o, m, n0);
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
