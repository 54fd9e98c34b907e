/* AES-256-GCM on AES-NI and PCLMULQDQ; see aesgcm_internal.h.
 *
 * GHASH works on byte-reversed blocks: reversing a block's 16 bytes and
 * loading it little-endian puts the coefficient of x^k at bit 127-k (GCM's
 * bit order, SP 800-38D §6.3). In that representation the carry-less
 * product of two elements is the field product shifted right by one bit;
 * after shifting the 256-bit product left by one, its upper half holds the
 * degrees 0..127 and its lower half D the degrees 128..255, which fold
 * back by x^128 = 1 + x + x^2 + x^7 (mod the GCM polynomial). Folding
 * D * (x + x^2 + x^7) overflows by at most 7 degrees: those come from the
 * low 7 bits of D, so with G = D ^ (D << 127) ^ (D << 126) ^ (D << 121)
 * (128-bit shifts; multiplication by x is a right shift here) the reduced
 * value is  upper ^ G ^ (G >> 1) ^ (G >> 2) ^ (G >> 7). Products are
 * linear, so four of them are summed before one reduction (Horner's rule
 * over H^4..H^1). */
#include "aesgcm_internal.h"

#include "sky_cpu.h"

#include <mbedtls/aes.h>
#include <mbedtls/platform_util.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>

#define TGT __attribute__((target("aes,pclmul,ssse3,sse4.1")))
#define RK(ks, i) _mm_load_si128((const __m128i *)(ks) + (i))
#define HPOW(ks, p) _mm_load_si128((const __m128i *)(ks) + 15 + (p) - 1) /* H^p, p = 1..4 */
#define ROUNDS 14                                                         /* AES-256 */

TGT static inline __m128i rev(__m128i x)
{
	return _mm_shuffle_epi8(x, _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
}

TGT static inline __m128i aes_block(const unsigned char *ks, __m128i x)
{
	x = _mm_xor_si128(x, RK(ks, 0));
	for (int r = 1; r < ROUNDS; r++)
		x = _mm_aesenc_si128(x, RK(ks, r));
	return _mm_aesenclast_si128(x, RK(ks, ROUNDS));
}

/* Unreduced product a*b added into (lo, mid, hi). */
TGT static inline void mul_add(__m128i a, __m128i b, __m128i *lo, __m128i *mid, __m128i *hi)
{
	*lo = _mm_xor_si128(*lo, _mm_clmulepi64_si128(a, b, 0x00));
	*hi = _mm_xor_si128(*hi, _mm_clmulepi64_si128(a, b, 0x11));
	*mid = _mm_xor_si128(*mid, _mm_xor_si128(_mm_clmulepi64_si128(a, b, 0x01),
						 _mm_clmulepi64_si128(a, b, 0x10)));
}

/* 128-bit right shift by n (1..63) */
#define SHR128(x, n) _mm_or_si128(_mm_srli_epi64((x), (n)), _mm_slli_epi64(_mm_srli_si128((x), 8), 64 - (n)))

TGT static inline __m128i reduce(__m128i lo, __m128i mid, __m128i hi)
{
	lo = _mm_xor_si128(lo, _mm_slli_si128(mid, 8));
	hi = _mm_xor_si128(hi, _mm_srli_si128(mid, 8));
	/* the 256-bit product hi:lo, shifted left by one bit */
	__m128i clo = _mm_srli_epi64(lo, 63), chi = _mm_srli_epi64(hi, 63);
	lo = _mm_or_si128(_mm_slli_epi64(lo, 1), _mm_slli_si128(clo, 8));
	hi = _mm_or_si128(_mm_or_si128(_mm_slli_epi64(hi, 1), _mm_slli_si128(chi, 8)),
			  _mm_srli_si128(clo, 8));
	/* fold the lower half (degrees 128..255) into the upper */
	__m128i over = _mm_xor_si128(_mm_xor_si128(_mm_slli_epi64(lo, 63), _mm_slli_epi64(lo, 62)),
				     _mm_slli_epi64(lo, 57));
	__m128i g = _mm_xor_si128(lo, _mm_slli_si128(over, 8));
	__m128i r = _mm_xor_si128(hi, g);
	r = _mm_xor_si128(r, SHR128(g, 1));
	r = _mm_xor_si128(r, SHR128(g, 2));
	return _mm_xor_si128(r, SHR128(g, 7));
}

TGT static inline __m128i gmul(__m128i a, __m128i b)
{
	__m128i lo = _mm_setzero_si128(), mid = lo, hi = lo;
	mul_add(a, b, &lo, &mid, &hi);
	return reduce(lo, mid, hi);
}

/* y = (y ^ b0) H^4 ^ b1 H^3 ^ b2 H^2 ^ b3 H, blocks already byte-reversed */
TGT static inline __m128i ghash4(const unsigned char *ks, __m128i y, __m128i b0, __m128i b1,
				 __m128i b2, __m128i b3)
{
	__m128i lo = _mm_setzero_si128(), mid = lo, hi = lo;
	mul_add(_mm_xor_si128(y, b0), HPOW(ks, 4), &lo, &mid, &hi);
	mul_add(b1, HPOW(ks, 3), &lo, &mid, &hi);
	mul_add(b2, HPOW(ks, 2), &lo, &mid, &hi);
	mul_add(b3, HPOW(ks, 1), &lo, &mid, &hi);
	return reduce(lo, mid, hi);
}

/* GHASH over p[0..n), the last partial block zero-padded. */
TGT static __m128i ghash_bytes(const unsigned char *ks, __m128i y, const unsigned char *p,
			       size_t n)
{
	for (; n >= 64; n -= 64, p += 64)
		y = ghash4(ks, y, rev(_mm_loadu_si128((const __m128i *)p)),
			   rev(_mm_loadu_si128((const __m128i *)p + 1)),
			   rev(_mm_loadu_si128((const __m128i *)p + 2)),
			   rev(_mm_loadu_si128((const __m128i *)p + 3)));
	for (; n >= 16; n -= 16, p += 16)
		y = gmul(_mm_xor_si128(y, rev(_mm_loadu_si128((const __m128i *)p))), HPOW(ks, 1));
	if (n) {
		unsigned char last[16] = {0};
		memcpy(last, p, n);
		y = gmul(_mm_xor_si128(y, rev(_mm_loadu_si128((const __m128i *)last))), HPOW(ks, 1));
	}
	return y;
}

TGT static inline __m128i counter_block(__m128i j0, uint32_t c)
{
	return _mm_insert_epi32(j0, (int)__builtin_bswap32(c), 3);
}

TGT static void init_x86(unsigned char *ks, const mbedtls_aes_context *aes)
{
	for (int r = 0; r <= ROUNDS; r++)
		_mm_store_si128((__m128i *)ks + r, _mm_loadu_si128((const __m128i *)aes->rk + r));
	__m128i h = rev(aes_block(ks, _mm_setzero_si128())), p = h;
	for (int i = 1; i <= 4; i++) {
		_mm_store_si128((__m128i *)ks + 15 + i - 1, p);
		p = gmul(p, h);
	}
}

TGT static void start_x86(const unsigned char *ks, sky_aesgcm_op *op, const unsigned char nonce[12],
			  const unsigned char *aad, size_t aad_len)
{
	unsigned char j0[16];
	memcpy(j0, nonce, 12);
	j0[12] = j0[13] = j0[14] = 0;
	j0[15] = 1;
	memcpy(op->j0, j0, 16);
	op->ctr = 2; /* counter 1 is J0, for the tag */
	op->aad_bytes = aad_len;
	op->text_bytes = 0;
	_mm_store_si128((__m128i *)op->y, ghash_bytes(ks, _mm_setzero_si128(), aad, aad_len));
}

TGT static void update_x86(const unsigned char *ks, sky_aesgcm_op *op, int decrypt,
			   const unsigned char *in, unsigned char *out, size_t n)
{
	__m128i y = _mm_load_si128((const __m128i *)op->y);
	__m128i j0 = _mm_load_si128((const __m128i *)op->j0);
	uint32_t c = op->ctr;
	op->text_bytes += n;
	/* eight blocks in flight: AES-NI has a latency of several cycles per
	 * round and a throughput of one or two per cycle */
	for (; n >= 128; n -= 128, in += 128, out += 128) {
		__m128i x[8], t[8];
		for (int i = 0; i < 8; i++)
			x[i] = _mm_xor_si128(counter_block(j0, c + (uint32_t)i), RK(ks, 0));
		c += 8;
		for (int r = 1; r < ROUNDS; r++) {
			__m128i k = RK(ks, r);
			for (int i = 0; i < 8; i++)
				x[i] = _mm_aesenc_si128(x[i], k);
		}
		for (int i = 0; i < 8; i++) {
			__m128i ki = _mm_aesenclast_si128(x[i], RK(ks, ROUNDS));
			__m128i v = _mm_loadu_si128((const __m128i *)in + i);
			__m128i o = _mm_xor_si128(v, ki);
			_mm_storeu_si128((__m128i *)out + i, o);
			t[i] = rev(decrypt ? v : o);
		}
		y = ghash4(ks, y, t[0], t[1], t[2], t[3]);
		y = ghash4(ks, y, t[4], t[5], t[6], t[7]);
	}
	while (n) {
		size_t m = n < 16 ? n : 16;
		unsigned char ksb[16], blk[16] = {0};
		_mm_storeu_si128((__m128i *)ksb, aes_block(ks, counter_block(j0, c++)));
		if (decrypt)
			memcpy(blk, in, m); /* GHASH reads the ciphertext, before in == out loses it */
		for (size_t i = 0; i < m; i++)
			out[i] = in[i] ^ ksb[i];
		if (!decrypt)
			memcpy(blk, out, m);
		y = gmul(_mm_xor_si128(y, rev(_mm_loadu_si128((const __m128i *)blk))), HPOW(ks, 1));
		in += m;
		out += m;
		n -= m;
	}
	op->ctr = c;
	_mm_store_si128((__m128i *)op->y, y);
}

TGT static void finish_x86(const unsigned char *ks, sky_aesgcm_op *op, unsigned char tag[16])
{
	__m128i y = _mm_load_si128((const __m128i *)op->y);
	/* len(A) || len(C) in bits, each 64-bit big-endian; reversed, that is
	 * the little-endian pair (len C, len A) */
	__m128i lens = _mm_set_epi64x((long long)(op->aad_bytes * 8), (long long)(op->text_bytes * 8));
	y = gmul(_mm_xor_si128(y, lens), HPOW(ks, 1));
	__m128i t = _mm_xor_si128(rev(y), aes_block(ks, _mm_load_si128((const __m128i *)op->j0)));
	_mm_storeu_si128((__m128i *)tag, t);
}
#endif

int sky_aesgcm_init(unsigned char *ks, const unsigned char key[32])
{
#if defined(__x86_64__)
	if (!sky_cpu_get_features().aesgcm)
		return 0;
	mbedtls_aes_context aes;
	mbedtls_aes_init(&aes);
	int ok = mbedtls_aes_setkey_enc(&aes, key, 256) == 0 && aes.nr == ROUNDS;
	if (ok)
		init_x86(ks, &aes);
	mbedtls_aes_free(&aes); /* wipes its copy of the round keys */
	return ok;
#else
	(void)ks;
	(void)key;
	return 0;
#endif
}

void sky_aesgcm_start(const unsigned char *ks, sky_aesgcm_op *op, const unsigned char nonce[12],
		      const unsigned char *aad, size_t aad_len)
{
#if defined(__x86_64__)
	start_x86(ks, op, nonce, aad, aad_len);
#endif
}

void sky_aesgcm_update(const unsigned char *ks, sky_aesgcm_op *op, int decrypt,
		       const unsigned char *in, unsigned char *out, size_t n)
{
#if defined(__x86_64__)
	update_x86(ks, op, decrypt, in, out, n);
#endif
}

void sky_aesgcm_finish(const unsigned char *ks, sky_aesgcm_op *op, unsigned char tag[16])
{
#if defined(__x86_64__)
	finish_x86(ks, op, tag);
#endif
}
