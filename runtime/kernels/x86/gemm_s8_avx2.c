/* int8 GEMM on AVX2. vpmaddubsw would saturate its int16 pair sums
 * (255 * 127 * 2 > 32767) and lose bit-exactness, so both sides are
 * sign-extended to int16 and multiplied with vpmaddwd (exact int32 pair
 * sums). One 16-byte load of the packed block is 4 channels x 4 k; the
 * activation's 4 bytes are broadcast as 4 int16, so each int32 lane holds
 * a partial sum over two k of one channel, and the two halves are added at
 * the end. Tiles of 2 rows x 16 channels; the epilogue is the shared scalar
 * one (a small part of the time next to the K loop). */
#include "sky_kernels_s8.h"

#include <immintrin.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))

INLINE __m256i bcast4(const int8_t *p, int valid)
{
	int32_t av = 0;
	if (valid == 4)
		memcpy(&av, p, 4);
	else
		memcpy(&av, p, (size_t)valid);
	return _mm256_broadcastq_epi64(_mm_cvtepi8_epi16(_mm_cvtsi32_si128(av)));
}

INLINE void tile(const int MRc, int K, const int8_t *a, long lda, const uint8_t *b,
		 const sky_k_gemm_out *o, long m0, int n0, int nvalid)
{
	__m256i acc[2][4];
	_Pragma("GCC unroll 8")
	for (int r = 0; r < MRc; r++)
		_Pragma("GCC unroll 8")
		for (int g = 0; g < 4; g++)
			acc[r][g] = _mm256_setzero_si256();
	int k4n = (K + 3) / 4;
	for (int k4 = 0; k4 < k4n; k4++) {
		/* constant 4 in the loop body except for a ragged last group */
		int valid = k4 < K / 4 ? 4 : K & 3;
		__m256i bw[4];
		_Pragma("GCC unroll 8")
		for (int g = 0; g < 4; g++)
			bw[g] = _mm256_cvtepi8_epi16(
				_mm_loadu_si128((const __m128i *)(b + (size_t)k4 * 64 + g * 16)));
		_Pragma("GCC unroll 8")
		for (int r = 0; r < MRc; r++) {
			__m256i ab = bcast4(a + r * lda + 4 * k4, valid);
			_Pragma("GCC unroll 8")
			for (int g = 0; g < 4; g++)
				acc[r][g] = _mm256_add_epi32(acc[r][g], _mm256_madd_epi16(ab, bw[g]));
		}
	}
	_Pragma("GCC unroll 8")
	for (int r = 0; r < MRc; r++) {
		int32_t t[32], s[16];
		_Pragma("GCC unroll 8")
		for (int g = 0; g < 4; g++)
			_mm256_storeu_si256((__m256i *)(t + 8 * g), acc[r][g]);
		for (int c = 0; c < 16; c++)
			s[c] = (int32_t)((uint32_t)t[2 * c] + (uint32_t)t[2 * c + 1]);
		sky_k_s8_epilogue_row(s, n0, nvalid, o, (int)(m0 + r));
	}
}

void sky_k_gemm_s8_avx2(int M, const int8_t *a, long lda, const sky_k_s8_packed *w,
			const sky_k_gemm_out *o)
{
	int K = w->k, N = w->n;
	size_t bstride = (size_t)w->kp * 16;
	for (int n0 = 0; n0 < N; n0 += 16) {
		const uint8_t *b = w->data + (size_t)(n0 / 16) * bstride;
		int nvalid = N - n0 < 16 ? N - n0 : 16;
		int m = 0;
		for (; m + 2 <= M; m += 2)
			tile(2, K, a + (long)m * lda, lda, b, o, m, n0, nvalid);
		for (; m < M; m++)
			tile(1, K, a + (long)m * lda, lda, b, o, m, n0, nvalid);
	}
}
