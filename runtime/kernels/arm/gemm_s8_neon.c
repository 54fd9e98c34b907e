/* int8 GEMM on NEON (Armv8-A baseline, e.g. Cortex-A72 of rpi4): smull
 * multiplies 8 int8 pairs into exact int16 products (|-128 * -128| fits),
 * sadalp adds adjacent products into int32 lanes. One 16-byte load of the
 * packed block is 4 channels x 4 k; each int32 lane holds a sum over two k
 * of one channel, and pairwise adds finish the channel sums. Tiles of
 * 2 rows x 16 channels; the epilogue is vectorised too (epilogue_s8_neon.h). */
#include "sky_kernels_s8.h"

#include "epilogue_s8_neon.h"

#include <arm_neon.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))

INLINE void tile(const int MRc, int K, const int8_t *a, long lda, const uint8_t *b,
		 const sky_k_gemm_out *o, long m0, int n0, int nvalid)
{
	int32x4_t lo[2][4], hi[2][4];
	_Pragma("GCC unroll 8")
	for (int r = 0; r < MRc; r++)
		_Pragma("GCC unroll 8")
		for (int g = 0; g < 4; g++)
			lo[r][g] = hi[r][g] = vdupq_n_s32(0);
	int k4n = (K + 3) / 4, kfull = K / 4;
	for (int k4 = 0; k4 < k4n; k4++) {
		int8x16_t wv[4];
		_Pragma("GCC unroll 8")
		for (int g = 0; g < 4; g++)
			wv[g] = vld1q_s8((const int8_t *)b + (size_t)k4 * 64 + g * 16);
		_Pragma("GCC unroll 8")
		for (int r = 0; r < MRc; r++) {
			int32_t av = 0;
			if (k4 < kfull)
				memcpy(&av, a + r * lda + 4 * k4, 4);
			else
				memcpy(&av, a + r * lda + 4 * k4, (size_t)(K & 3));
			int8x16_t a16 = vreinterpretq_s8_s32(vdupq_n_s32(av));
			_Pragma("GCC unroll 8")
			for (int g = 0; g < 4; g++) {
				lo[r][g] = vpadalq_s16(lo[r][g], vmull_s8(vget_low_s8(a16),
									 vget_low_s8(wv[g])));
				hi[r][g] = vpadalq_s16(hi[r][g], vmull_high_s8(a16, wv[g]));
			}
		}
	}
	_Pragma("GCC unroll 8")
	for (int r = 0; r < MRc; r++) {
		int32x4_t s[4];
		_Pragma("GCC unroll 8")
		for (int g = 0; g < 4; g++)
			s[g] = vpaddq_s32(lo[r][g], hi[r][g]);
		sky_neon_epilogue16(s, n0, nvalid, o, m0 + r);
	}
}

void sky_k_gemm_s8_neon(int M, const int8_t *a, long lda, const sky_k_s8_packed *w,
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
