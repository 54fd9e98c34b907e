/* int8 GEMM on AVX-512 VNNI: vpdpbusd adds four u8 x s8 products into each
 * int32 lane. The packed weights are the unsigned side (stored as W + 128)
 * and each activation row's four bytes are broadcast as the signed side, so
 *   sum (W + 128) a = sum W a + 128 * rowsum(a)
 * and the row sum (computed once per block of rows) is subtracted before
 * the epilogue. Every sum is exact in int32, so the result equals _ref.
 *
 * Tiles of 8 rows x 48 channels (24 zmm accumulators, 3 weight loads and 8
 * broadcasts per 24 vpdpbusd); rows are walked in blocks of MC so the
 * activation block stays in L2 while every weight panel streams past it
 * once. The epilogue (bias, Q31 requantisation, saturation) runs on the
 * accumulators in registers. */
#include "gemm_s8_x86_internal.h"
#include "sky_kernels_s8.h"

#include <immintrin.h>
#include <string.h>

#ifndef MR
#define MR 8   /* rows per tile */
#endif
#ifndef NB
#define NB 3   /* 16-channel blocks per tile */
#endif
#ifndef MC
#define MC 128 /* rows per block kept in L2 */
#endif

#define INLINE static inline __attribute__((always_inline))

/* Rows m0..m0+MRc-1, channel blocks nb0..nb0+NBc-1 (16 each). */
INLINE void tile(const int MRc, const int NBc, int K, const int8_t *a, long lda, const uint8_t *b,
		 size_t bstride, const int32_t *rsum, const sky_k_gemm_out *o, long m0, int n0,
		 int nvalid)
{
	__m512i acc[MR][NB];
	_Pragma("GCC unroll 8")
	for (int r = 0; r < MRc; r++)
		_Pragma("GCC unroll 8")
		for (int j = 0; j < NBc; j++)
			acc[r][j] = _mm512_setzero_si512();
	int k4n = K / 4;
	for (int k4 = 0; k4 < k4n; k4++) {
		__m512i bv[NB];
		_Pragma("GCC unroll 8")
		for (int j = 0; j < NBc; j++)
			bv[j] = _mm512_loadu_si512((const void *)(b + j * bstride + (size_t)k4 * 64));
		_Pragma("GCC unroll 8")
		for (int r = 0; r < MRc; r++) {
			int32_t av;
			memcpy(&av, a + r * lda + 4 * k4, 4);
			__m512i ab = _mm512_set1_epi32(av);
			_Pragma("GCC unroll 8")
			for (int j = 0; j < NBc; j++)
				acc[r][j] = _mm512_dpbusd_epi32(acc[r][j], bv[j], ab);
		}
	}
	if (K & 3) { /* last group: the row ends inside it, pad with zeros */
		__m512i bv[NB];
		_Pragma("GCC unroll 8")
		for (int j = 0; j < NBc; j++)
			bv[j] = _mm512_loadu_si512((const void *)(b + j * bstride + (size_t)k4n * 64));
		_Pragma("GCC unroll 8")
		for (int r = 0; r < MRc; r++) {
			uint8_t tmp[4] = {0, 0, 0, 0};
			memcpy(tmp, a + r * lda + 4 * k4n, (size_t)(K & 3));
			int32_t av;
			memcpy(&av, tmp, 4);
			__m512i ab = _mm512_set1_epi32(av);
			_Pragma("GCC unroll 8")
			for (int j = 0; j < NBc; j++)
				acc[r][j] = _mm512_dpbusd_epi32(acc[r][j], bv[j], ab);
		}
	}
	_Pragma("GCC unroll 8")
	for (int r = 0; r < MRc; r++) {
		__m512i corr = _mm512_set1_epi32(rsum[r] * 128);
		_Pragma("GCC unroll 8")
		for (int j = 0; j < NBc; j++) {
			int cnt = nvalid - 16 * j;
			if (cnt > 0)
				sky_x86_epilogue16(_mm512_sub_epi32(acc[r][j], corr), o, m0 + r, n0 + 16 * j,
					   cnt);
		}
	}
}

void sky_k_gemm_s8_vnni(int M, const int8_t *a, long lda, const sky_k_s8_packed *w,
			const sky_k_gemm_out *o)
{
	int32_t rsum[MC];
	int K = w->k, N = w->n;
	size_t bstride = (size_t)w->kp * 16;
	for (int m0 = 0; m0 < M; m0 += MC) {
		int mc = M - m0 < MC ? M - m0 : MC;
		for (int r = 0; r < mc; r++)
			rsum[r] = sky_x86_row_sum(a + (long)(m0 + r) * lda, K);
		/* each weight panel (16 * NB channels) stays in L1/L2 while the
		 * block's rows pass it */
		for (int n0 = 0; n0 < N; n0 += 16 * NB) {
			const uint8_t *b = w->data + (size_t)(n0 / 16) * bstride;
			int nvalid = N - n0 < 16 * NB ? N - n0 : 16 * NB;
			int nb = (nvalid + 15) / 16, r = 0;
#define ROWS(NBc) \
	do { \
		for (; r + MR <= mc; r += MR) \
			tile(MR, NBc, K, a + (long)(m0 + r) * lda, lda, b, bstride, rsum + r, o, m0 + r, \
			     n0, nvalid); \
		for (; r < mc; r++) \
			tile(1, NBc, K, a + (long)(m0 + r) * lda, lda, b, bstride, rsum + r, o, m0 + r, \
			     n0, nvalid); \
	} while (0)
			if (nb == NB)
				ROWS(NB);
#if NB > 2
			else if (nb == 2)
				ROWS(2);
#endif
			else
				ROWS(1);
		}
	}
}
