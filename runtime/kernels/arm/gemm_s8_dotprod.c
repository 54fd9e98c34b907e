/* int8 GEMM with the Armv8.2 dot-product instruction (sdot; Cortex-A76 of
 * rpi5): one sdot adds four int8 x int8 products into each of four int32
 * lanes, exactly. One 16-byte load of the packed block is 4 channels x 4 k;
 * 16 bytes of an activation row (4 groups of 4 k) are loaded once and each
 * group is picked by lane (vdotq_laneq_s32). Tiles of 4 rows x 16 channels
 * (16 accumulators). */
#include "sky_kernels_s8.h"

#include "epilogue_s8_neon.h"

#include <arm_neon.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))

#define STEP(L) \
	do { \
		_Pragma("GCC unroll 8") \
		for (int g = 0; g < 4; g++) { \
			int8x16_t wv = vld1q_s8((const int8_t *)b + (size_t)(k4 + (L)) * 64 + g * 16); \
			_Pragma("GCC unroll 8") \
			for (int r = 0; r < MRc; r++) \
				acc[r][g] = vdotq_laneq_s32(acc[r][g], wv, av[r], (L)); \
		} \
	} while (0)

INLINE void tile(const int MRc, int K, const int8_t *a, long lda, const uint8_t *b,
		 const sky_k_gemm_out *o, long m0, int n0, int nvalid)
{
	int32x4_t acc[4][4];
	_Pragma("GCC unroll 8")
	for (int r = 0; r < MRc; r++)
		_Pragma("GCC unroll 8")
		for (int g = 0; g < 4; g++)
			acc[r][g] = vdupq_n_s32(0);
	int k4 = 0;
	for (; 4 * k4 + 16 <= K; k4 += 4) {
		int8x16_t av[4];
		_Pragma("GCC unroll 8")
		for (int r = 0; r < MRc; r++)
			av[r] = vld1q_s8(a + r * lda + 4 * k4);
		STEP(0);
		STEP(1);
		STEP(2);
		STEP(3);
	}
	int k4n = (K + 3) / 4;
	if (k4 < k4n) { /* fewer than 16 bytes left in the row: zero-padded copy */
		int8x16_t av[4];
		_Pragma("GCC unroll 8")
		for (int r = 0; r < MRc; r++) {
			int8_t tmp[16] = {0};
			memcpy(tmp, a + r * lda + 4 * k4, (size_t)(K - 4 * k4));
			av[r] = vld1q_s8(tmp);
		}
		int left = k4n - k4;
		STEP(0);
		if (left > 1)
			STEP(1);
		if (left > 2)
			STEP(2);
		if (left > 3)
			STEP(3);
	}
	_Pragma("GCC unroll 8")
	for (int r = 0; r < MRc; r++) {
		sky_neon_epilogue16(acc[r], n0, nvalid, o, m0 + r);
	}
}

void sky_k_gemm_s8_dotprod(int M, const int8_t *a, long lda, const sky_k_s8_packed *w,
			   const sky_k_gemm_out *o)
{
	int K = w->k, N = w->n;
	size_t bstride = (size_t)w->kp * 16;
	for (int n0 = 0; n0 < N; n0 += 16) {
		const uint8_t *b = w->data + (size_t)(n0 / 16) * bstride;
		int nvalid = N - n0 < 16 ? N - n0 : 16;
		int m = 0;
		for (; m + 4 <= M; m += 4)
			tile(4, K, a + (long)m * lda, lda, b, o, m, n0, nvalid);
		for (; m < M; m++)
			tile(1, K, a + (long)m * lda, lda, b, o, m, n0, nvalid);
	}
}
