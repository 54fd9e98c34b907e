/* int8 GEMM on Intel AMX: tdpbsud multiplies a 16 x 64 tile of signed
 * activations by a 16-row tile of unsigned weights (each row 16 channels x
 * 4 consecutive k), adding into a 16 x 16 int32 tile. The weights are the
 * VNNI variant's bytes unchanged: W + 128 as u8 in blocks of 16 channels x
 * 4 k, which is exactly AMX's B-tile layout (a block's K/4 rows are 64 bytes
 * apart), so
 *   sum a (W + 128) = sum a W + 128 * rowsum(a)
 * and the row sum is subtracted before the shared AVX-512 epilogue (bias,
 * Q31 requantisation, saturation: gemm_s8_x86_internal.h). Every sum is
 * exact in int32, so the result equals _ref bit for bit.
 *
 * One tile shape for the whole call (16 rows x 64 bytes everywhere): C
 * tiles 0-3 hold a 32-row x 32-channel block, A tiles 4-5 and B tiles 6-7
 * feed four tdpbsud per 64 k. Tails never need another tile shape:
 *   N: the packed weights are padded to 16 channels, extra columns are
 *      computed and not stored;
 *   K: the last K % 64 are added with vpdpbusd on the stored accumulators
 *      (as the VNNI kernel does, zero-padding a row's last 4-byte group);
 *   M: the last M % 16 rows (and every call with K < 64) run the VNNI
 *      kernel, which takes the same packed weights.
 * Rows are walked in blocks of MC so the activation block stays in L2
 * while every 32-channel weight panel streams past it once. The epilogue of
 * one block runs interleaved with the next block's tile instructions. */
#include "gemm_s8_x86_internal.h"
#include "sky_kernels_s8.h"

#include <immintrin.h>
#include <string.h>

#ifndef MC
#define MC 256 /* rows per block kept in L2 (a multiple of 32) */
#endif

/* LDTILECFG's 64-byte operand (Intel SDM vol. 1, 18.2 "palette 1") */
typedef struct tilecfg {
	uint8_t palette;
	uint8_t start_row;
	uint8_t reserved[14];
	uint16_t colsb[16];
	uint8_t rows[16];
} tilecfg;

/* C += the K % 64 tail of row ar times 16 channels at b (VNNI, from memory);
 * b is the channel block's start, groups k4 >= k4_0. */
SKY_X86_INLINE __m512i k_tail(__m512i acc, const int8_t *ar, const uint8_t *b, int k4_0, int K)
{
	int k4n = K / 4;
	for (int k4 = k4_0; k4 < k4n; k4++) {
		int32_t av;
		memcpy(&av, ar + 4 * k4, 4);
		acc = _mm512_dpbusd_epi32(acc, _mm512_loadu_si512((const void *)(b + (size_t)k4 * 64)),
					  _mm512_set1_epi32(av));
	}
	if (K & 3) { /* the row ends inside the last group: pad with zeros */
		uint8_t tmp[4] = {0, 0, 0, 0};
		memcpy(tmp, ar + 4 * k4n, (size_t)(K & 3));
		int32_t av;
		memcpy(&av, tmp, 4);
		acc = _mm512_dpbusd_epi32(acc, _mm512_loadu_si512((const void *)(b + (size_t)k4n * 64)),
					  _mm512_set1_epi32(av));
	}
	return acc;
}

/* The stored C tiles of one block, waiting for their epilogue: finished
 * row by row while the next block's tile instructions run (the AMX unit
 * and the vector units work at the same time), so the epilogue costs
 * little beyond the tiles. */
typedef struct pending {
	int units, done; /* rows to finish (16 per stored tile), finished so far */
	const int32_t *cbuf; /* tile i at cbuf + 256 * i (16 rows of 16 int32) */
	struct {
		const int8_t *a;     /* the tile's first activation row */
		const uint8_t *b;    /* its 16-channel weight block */
		const int32_t *rsum; /* its 16 row sums */
		long m0;
		int n0, cnt; /* first channel, channels to store (1..16) */
	} t[4];
} pending;

/* Rows p->done .. upto-1: K tail, minus 128 * rowsum, epilogue (its
 * per-channel part once per run of rows in the same tile). */
static inline void finish_rows(pending *p, int upto, int K, int K64, long lda,
			       const sky_k_gemm_out *o)
{
	while (p->done < upto) {
		int i = p->done >> 4, end = (i + 1) * 16 < upto ? (i + 1) * 16 : upto;
		sky_x86_epi e;
		sky_x86_epi_prep(o, p->t[i].n0, p->t[i].cnt, &e);
		for (; p->done < end; p->done++) {
			int r = p->done & 15;
			__m512i v = _mm512_load_si512((const void *)(p->cbuf + i * 256 + r * 16));
			if (K64 < K)
				v = k_tail(v, p->t[i].a + r * lda, p->t[i].b, K64 / 4, K);
			v = _mm512_sub_epi32(v, _mm512_set1_epi32(p->t[i].rsum[r] * 128));
			sky_x86_epi_apply(v, &e, o, p->t[i].m0 + r, p->t[i].n0);
		}
	}
}

/* A block of (16 * MRc) rows x (16 * NBc) channels over the first K64 k
 * (a multiple of 64), finishing prev's rows along the way; its tiles are
 * stored to cbuf and described in cur. Tile numbers are immediates, hence
 * the spelled-out cases. */
SKY_X86_INLINE void block(const int MRc, const int NBc, int K, int K64, const int8_t *a, long lda,
			  const uint8_t *b, size_t bstride, const int32_t *rsum,
			  const sky_k_gemm_out *o, long m0, int n0, int nvalid, pending *prev,
			  int32_t *cbuf, pending *cur)
{
	const int8_t *a1 = a + 16 * lda;
	const uint8_t *b1 = b + bstride;
	_tile_zero(0);
	if (NBc == 2)
		_tile_zero(1);
	if (MRc == 2) {
		_tile_zero(2);
		if (NBc == 2)
			_tile_zero(3);
	}
	int steps = K64 / 64, per = (prev->units + steps - 1) / steps, upto = 0;
	for (int k0 = 0; k0 < K64; k0 += 64) {
		/* B rows are k / 4: 64 k are 16 rows of 64 bytes */
		_tile_loadd(4, a + k0, lda);
		_tile_loadd(6, b + (size_t)k0 * 16, 64);
		_tile_dpbsud(0, 4, 6);
		if (NBc == 2) {
			_tile_loadd(7, b1 + (size_t)k0 * 16, 64);
			_tile_dpbsud(1, 4, 7);
		}
		if (MRc == 2) {
			_tile_loadd(5, a1 + k0, lda);
			_tile_dpbsud(2, 5, 6);
			if (NBc == 2)
				_tile_dpbsud(3, 5, 7);
		}
		upto = upto + per < prev->units ? upto + per : prev->units;
		finish_rows(prev, upto, K, K64, lda, o);
	}
	finish_rows(prev, prev->units, K, K64, lda, o);
	/* tiles 0..3 are (row tile, channel block) (0,0) (0,1) (1,0) (1,1) */
	int n = 0;
	for (int i = 0; i < MRc; i++)
		for (int j = 0; j < NBc; j++) {
			int cnt = nvalid - 16 * j;
			if (cnt <= 0) /* all padding: nothing to store */
				continue;
			int32_t *dst = cbuf + n * 256;
			int t = i * 2 + j;
			if (t == 0)
				_tile_stored(0, dst, 64);
			else if (t == 1)
				_tile_stored(1, dst, 64);
			else if (t == 2)
				_tile_stored(2, dst, 64);
			else
				_tile_stored(3, dst, 64);
			cur->t[n].a = a + i * 16 * lda;
			cur->t[n].b = j ? b1 : b;
			cur->t[n].rsum = rsum + i * 16;
			cur->t[n].m0 = m0 + i * 16;
			cur->t[n].n0 = n0 + 16 * j;
			cur->t[n].cnt = cnt > 16 ? 16 : cnt;
			n++;
		}
	cur->cbuf = cbuf;
	cur->units = n * 16;
	cur->done = 0;
}

void sky_k_gemm_s8_amx(int M, const int8_t *a, long lda, const sky_k_s8_packed *w,
		       const sky_k_gemm_out *o)
{
	int K = w->k, N = w->n, K64 = K & ~63, M16 = M & ~15;
	if (K64 == 0 || M16 == 0) { /* no whole tile: the same bytes suit VNNI */
		sky_k_gemm_s8_vnni(M, a, lda, w, o);
		return;
	}
	tilecfg cfg;
	memset(&cfg, 0, sizeof cfg);
	cfg.palette = 1;
	for (int t = 0; t < 8; t++) {
		cfg.rows[t] = 16;
		cfg.colsb[t] = 64;
	}
	/* GCC 12's ldtilecfg and tileloadd asm name only 8 bytes of memory and
	 * none: a barrier makes every byte of cfg (and the caller's a and
	 * weights) stored before the tile instructions read them */
	__asm__ volatile("" : : "r"(&cfg) : "memory");
	_tile_loadconfig(&cfg);
	int32_t rsum[MC];
	/* two sets of stored C tiles: one being finished, one being computed */
	int32_t cbuf[2][4 * 256] __attribute__((aligned(64)));
	pending pend[2];
	int cur = 0;
	pend[1].units = pend[1].done = 0;
	size_t bstride = (size_t)w->kp * 16;
	int nblk = w->np / 16;
	for (int m0 = 0; m0 < M16; m0 += MC) {
		int mc = M16 - m0 < MC ? M16 - m0 : MC;
		for (int r = 0; r < mc; r++)
			rsum[r] = sky_x86_row_sum(a + (long)(m0 + r) * lda, K);
		for (int n0 = 0; n0 < N; n0 += 32) {
			const uint8_t *b = w->data + (size_t)(n0 / 16) * bstride;
			int nvalid = N - n0 < 32 ? N - n0 : 32;
			int two = n0 / 16 + 1 < nblk;
			for (int r = 0; r < mc; r += 32) {
				const int8_t *ar = a + (long)(m0 + r) * lda;
				pending *prev = &pend[cur ^ 1], *next = &pend[cur];
#define BLOCK(MRc, NBc) \
	block(MRc, NBc, K, K64, ar, lda, b, bstride, rsum + r, o, m0 + r, n0, nvalid, prev, cbuf[cur], \
	      next)
				if (r + 32 <= mc) {
					if (two)
						BLOCK(2, 2);
					else
						BLOCK(2, 1);
				} else {
					if (two)
						BLOCK(1, 2);
					else
						BLOCK(1, 1);
				}
#undef BLOCK
				cur ^= 1;
			}
		}
		/* rsum is refilled for the next row block: finish what uses it */
		finish_rows(&pend[cur ^ 1], pend[cur ^ 1].units, K, K64, lda, o);
	}
	_tile_release();
	if (M16 < M) { /* the last M % 16 rows */
		sky_k_gemm_out tail = *o;
		size_t esz = o->type == SKY_K_OUT_S32 ? 4 : o->type == SKY_K_OUT_S16 ? 2 : 1;
		tail.c = (char *)o->c + (size_t)M16 * (size_t)o->ldc * esz;
		sky_k_gemm_s8_vnni(M - M16, a + (long)M16 * lda, lda, w, &tail);
	}
}
