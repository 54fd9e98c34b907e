/* AES-256-GCM on AES-NI + PCLMULQDQ (x86) or the Armv8 Crypto Extension
 * (AESE/AESMC + PMULL); see aesgcm_internal.h. The algorithm is written
 * once over a handful of 128-bit primitives that each architecture defines.
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

/* ---- per-architecture primitives on one 128-bit register ------------------ */
#if defined(__x86_64__)
#include <immintrin.h>
#define HAVE_ACCEL 1
#define TGT __attribute__((target("aes,pclmul,ssse3,sse4.1")))
typedef __m128i v128;
#define V_LOAD(p) _mm_loadu_si128((const __m128i *)(const void *)(p))
#define V_STORE(p, v) _mm_storeu_si128((__m128i *)(void *)(p), (v))
#define V_XOR(a, b) _mm_xor_si128((a), (b))
#define V_OR(a, b) _mm_or_si128((a), (b))
#define V_ZERO() _mm_setzero_si128()
#define V_SHL64(x, n) _mm_slli_epi64((x), (n)) /* each 64-bit lane */
#define V_SHR64(x, n) _mm_srli_epi64((x), (n))
#define V_LANE_UP(x) _mm_slli_si128((x), 8)   /* low lane to high, low = 0 */
#define V_LANE_DOWN(x) _mm_srli_si128((x), 8) /* high lane to low, high = 0 */
#define V_LANES(lo, hi) _mm_set_epi64x((long long)(hi), (long long)(lo))

TGT static inline v128 rev(v128 x)
{
	return _mm_shuffle_epi8(x, _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
}
/* Carry-less products of the 64-bit lanes: low x low, high x high, and the
 * sum of the two cross products. */
TGT static inline v128 clmul_ll(v128 a, v128 b) { return _mm_clmulepi64_si128(a, b, 0x00); }
TGT static inline v128 clmul_hh(v128 a, v128 b) { return _mm_clmulepi64_si128(a, b, 0x11); }
TGT static inline v128 clmul_x(v128 a, v128 b)
{
	return _mm_xor_si128(_mm_clmulepi64_si128(a, b, 0x01), _mm_clmulepi64_si128(a, b, 0x10));
}
/* AES-NI: aesenc = ShiftRows, SubBytes, MixColumns, then the round key */
#define AES_FIRST(x, k) _mm_xor_si128((x), (k))
#define AES_ROUND(x, k) _mm_aesenc_si128((x), (k))
#define AES_LAST(x, k, k2) ((void)(k), _mm_aesenclast_si128((x), (k2))) /* k went in the rounds */
#define AES_FEATURE(f) ((f).aesgcm)
TGT static inline v128 counter_block(v128 j0, uint32_t c)
{
	return _mm_insert_epi32(j0, (int)__builtin_bswap32(c), 3);
}

#elif defined(__aarch64__)
#include <arm_neon.h>
#define HAVE_ACCEL 1
#define TGT __attribute__((target("+crypto")))
typedef uint8x16_t v128;
#define V_LOAD(p) vld1q_u8((const uint8_t *)(p))
#define V_STORE(p, v) vst1q_u8((uint8_t *)(p), (v))
#define V_XOR(a, b) veorq_u8((a), (b))
#define V_OR(a, b) vorrq_u8((a), (b))
#define V_ZERO() vdupq_n_u8(0)
#define V_SHL64(x, n) vreinterpretq_u8_u64(vshlq_n_u64(vreinterpretq_u64_u8(x), (n)))
#define V_SHR64(x, n) vreinterpretq_u8_u64(vshrq_n_u64(vreinterpretq_u64_u8(x), (n)))
#define V_LANE_UP(x) vextq_u8(vdupq_n_u8(0), (x), 8)
#define V_LANE_DOWN(x) vextq_u8((x), vdupq_n_u8(0), 8)
#define V_LANES(lo, hi) vreinterpretq_u8_u64(vcombine_u64(vcreate_u64(lo), vcreate_u64(hi)))

TGT static inline v128 rev(v128 x)
{
	x = vrev64q_u8(x);
	return vextq_u8(x, x, 8);
}
TGT static inline poly64_t lane(v128 x, int hi)
{
	return (poly64_t)(hi ? vgetq_lane_u64(vreinterpretq_u64_u8(x), 1)
			     : vgetq_lane_u64(vreinterpretq_u64_u8(x), 0));
}
TGT static inline v128 clmul_ll(v128 a, v128 b)
{
	return vreinterpretq_u8_p128(vmull_p64(lane(a, 0), lane(b, 0)));
}
TGT static inline v128 clmul_hh(v128 a, v128 b)
{
	return vreinterpretq_u8_p128(vmull_p64(lane(a, 1), lane(b, 1)));
}
TGT static inline v128 clmul_x(v128 a, v128 b)
{
	return veorq_u8(vreinterpretq_u8_p128(vmull_p64(lane(a, 0), lane(b, 1))),
			vreinterpretq_u8_p128(vmull_p64(lane(a, 1), lane(b, 0))));
}
/* Armv8: aese = round key, SubBytes, ShiftRows; aesmc = MixColumns. The
 * same rounds as AES-NI's, with the key addition one step earlier. */
#define AES_FIRST(x, k) (x) /* the first key goes in with the first aese */
#define AES_ROUND(x, k) vaesmcq_u8(vaeseq_u8((x), (k)))
#define AES_LAST(x, k, k2) veorq_u8(vaeseq_u8((x), (k)), (k2))
#define AES_FEATURE(f) ((f).aesgcm)
TGT static inline v128 counter_block(v128 j0, uint32_t c)
{
	return vreinterpretq_u8_u32(
		vsetq_lane_u32(__builtin_bswap32(c), vreinterpretq_u32_u8(j0), 3));
}
#endif

/* ---- AES-256 CTR and GHASH, written once over the primitives ------------ */
#ifdef HAVE_ACCEL
#define ROUNDS 14 /* AES-256 */
#define RK(ks, i) V_LOAD((ks) + 16 * (i))
#define HPOW(ks, p) V_LOAD((ks) + 16 * (15 + (p) - 1)) /* H^p, p = 1..4 */

/* AES-NI adds round key i after round i's other steps, Armv8 before them;
 * AES_FIRST/AES_ROUND/AES_LAST place the 15 keys accordingly: on x86 key 0
 * first, keys 1..13 in the rounds, key 14 last; on Armv8 keys 0..12 in the
 * rounds, key 13 in the last aese and key 14 added after it. */
#if defined(__x86_64__)
#define RK_ROUND(r) (r)       /* rounds r = 1..13 use key r */
#else
#define RK_ROUND(r) ((r) - 1) /* rounds r = 1..13 use key r-1 */
#endif

TGT static inline v128 aes_block(const unsigned char *ks, v128 x)
{
	x = AES_FIRST(x, RK(ks, 0));
	for (int r = 1; r < ROUNDS; r++)
		x = AES_ROUND(x, RK(ks, RK_ROUND(r)));
	return AES_LAST(x, RK(ks, ROUNDS - 1), RK(ks, ROUNDS));
}

/* Unreduced product a*b added into (lo, mid, hi). */
TGT static inline void mul_add(v128 a, v128 b, v128 *lo, v128 *mid, v128 *hi)
{
	*lo = V_XOR(*lo, clmul_ll(a, b));
	*hi = V_XOR(*hi, clmul_hh(a, b));
	*mid = V_XOR(*mid, clmul_x(a, b));
}

/* 128-bit right shift by n (1..63) */
#define SHR128(x, n) V_OR(V_SHR64((x), (n)), V_SHL64(V_LANE_DOWN(x), 64 - (n)))

TGT static inline v128 reduce(v128 lo, v128 mid, v128 hi)
{
	lo = V_XOR(lo, V_LANE_UP(mid));
	hi = V_XOR(hi, V_LANE_DOWN(mid));
	/* the 256-bit product hi:lo, shifted left by one bit */
	v128 clo = V_SHR64(lo, 63), chi = V_SHR64(hi, 63);
	lo = V_OR(V_SHL64(lo, 1), V_LANE_UP(clo));
	hi = V_OR(V_OR(V_SHL64(hi, 1), V_LANE_UP(chi)), V_LANE_DOWN(clo));
	/* fold the lower half (degrees 128..255) into the upper */
	v128 over = V_XOR(V_XOR(V_SHL64(lo, 63), V_SHL64(lo, 62)), V_SHL64(lo, 57));
	v128 g = V_XOR(lo, V_LANE_UP(over));
	v128 r = V_XOR(hi, g);
	r = V_XOR(r, SHR128(g, 1));
	r = V_XOR(r, SHR128(g, 2));
	return V_XOR(r, SHR128(g, 7));
}

TGT static inline v128 gmul(v128 a, v128 b)
{
	v128 lo = V_ZERO(), mid = lo, hi = lo;
	mul_add(a, b, &lo, &mid, &hi);
	return reduce(lo, mid, hi);
}

/* y = (y ^ b0) H^4 ^ b1 H^3 ^ b2 H^2 ^ b3 H, blocks already byte-reversed */
TGT static inline v128 ghash4(const unsigned char *ks, v128 y, v128 b0, v128 b1, v128 b2,
			      v128 b3)
{
	v128 lo = V_ZERO(), mid = lo, hi = lo;
	mul_add(V_XOR(y, b0), HPOW(ks, 4), &lo, &mid, &hi);
	mul_add(b1, HPOW(ks, 3), &lo, &mid, &hi);
	mul_add(b2, HPOW(ks, 2), &lo, &mid, &hi);
	mul_add(b3, HPOW(ks, 1), &lo, &mid, &hi);
	return reduce(lo, mid, hi);
}

/* GHASH over p[0..n), the last partial block zero-padded. */
TGT static v128 ghash_bytes(const unsigned char *ks, v128 y, const unsigned char *p, size_t n)
{
	for (; n >= 64; n -= 64, p += 64)
		y = ghash4(ks, y, rev(V_LOAD(p)), rev(V_LOAD(p + 16)), rev(V_LOAD(p + 32)),
			   rev(V_LOAD(p + 48)));
	for (; n >= 16; n -= 16, p += 16)
		y = gmul(V_XOR(y, rev(V_LOAD(p))), HPOW(ks, 1));
	if (n) {
		unsigned char last[16] = {0};
		memcpy(last, p, n);
		y = gmul(V_XOR(y, rev(V_LOAD(last))), HPOW(ks, 1));
	}
	return y;
}

TGT static void init_accel(unsigned char *ks, const mbedtls_aes_context *aes)
{
	/* Mbed TLS keeps the round keys in FIPS-197 byte order (AES-NI's
	 * layout, and on a little-endian CPU its table code's too) */
	memcpy(ks, aes->rk, 16 * (ROUNDS + 1));
	v128 h = rev(aes_block(ks, V_ZERO())), p = h;
	for (int i = 1; i <= 4; i++) {
		V_STORE(ks + 16 * (15 + i - 1), p);
		p = gmul(p, h);
	}
}

TGT static void start_accel(const unsigned char *ks, sky_aesgcm_op *op,
			    const unsigned char nonce[12], const unsigned char *aad, size_t aad_len)
{
	memcpy(op->j0, nonce, 12);
	op->j0[12] = op->j0[13] = op->j0[14] = 0;
	op->j0[15] = 1;
	op->ctr = 2; /* counter 1 is J0, for the tag */
	op->aad_bytes = aad_len;
	op->text_bytes = 0;
	V_STORE(op->y, ghash_bytes(ks, V_ZERO(), aad, aad_len));
}

TGT static void update_accel(const unsigned char *ks, sky_aesgcm_op *op, int decrypt,
			     const unsigned char *in, unsigned char *out, size_t n)
{
	v128 y = V_LOAD(op->y), j0 = V_LOAD(op->j0);
	uint32_t c = op->ctr;
	op->text_bytes += n;
	/* eight blocks in flight: an AES round has a latency of several cycles
	 * and a throughput of one or two per cycle */
	for (; n >= 128; n -= 128, in += 128, out += 128) {
		v128 x[8], t[8];
		for (int i = 0; i < 8; i++)
			x[i] = AES_FIRST(counter_block(j0, c + (uint32_t)i), RK(ks, 0));
		c += 8;
		for (int r = 1; r < ROUNDS; r++) {
			v128 k = RK(ks, RK_ROUND(r));
			for (int i = 0; i < 8; i++)
				x[i] = AES_ROUND(x[i], k);
		}
		v128 k13 = RK(ks, ROUNDS - 1), k14 = RK(ks, ROUNDS);
		for (int i = 0; i < 8; i++) {
			v128 v = V_LOAD(in + 16 * i);
			v128 o = V_XOR(v, AES_LAST(x[i], k13, k14));
			V_STORE(out + 16 * i, o);
			t[i] = rev(decrypt ? v : o);
		}
		y = ghash4(ks, y, t[0], t[1], t[2], t[3]);
		y = ghash4(ks, y, t[4], t[5], t[6], t[7]);
	}
	while (n) {
		size_t m = n < 16 ? n : 16;
		unsigned char ksb[16], blk[16] = {0};
		V_STORE(ksb, aes_block(ks, counter_block(j0, c++)));
		if (decrypt)
			memcpy(blk, in, m); /* GHASH reads the ciphertext, before in == out loses it */
		for (size_t i = 0; i < m; i++)
			out[i] = in[i] ^ ksb[i];
		if (!decrypt)
			memcpy(blk, out, m);
		y = gmul(V_XOR(y, rev(V_LOAD(blk))), HPOW(ks, 1));
		in += m;
		out += m;
		n -= m;
	}
	op->ctr = c;
	V_STORE(op->y, y);
}

TGT static void finish_accel(const unsigned char *ks, sky_aesgcm_op *op, unsigned char tag[16])
{
	v128 y = V_LOAD(op->y);
	/* len(A) || len(C) in bits, each 64-bit big-endian; reversed, that is
	 * the little-endian pair (len C, len A) */
	v128 lens = V_LANES(op->text_bytes * 8, op->aad_bytes * 8);
	y = gmul(V_XOR(y, lens), HPOW(ks, 1));
	V_STORE(tag, V_XOR(rev(y), aes_block(ks, V_LOAD(op->j0))));
}
#endif

int sky_aesgcm_init(unsigned char *ks, const unsigned char key[32])
{
#ifdef HAVE_ACCEL
	if (!AES_FEATURE(sky_cpu_get_features()))
		return 0;
	mbedtls_aes_context aes;
	mbedtls_aes_init(&aes);
	int ok = mbedtls_aes_setkey_enc(&aes, key, 256) == 0 && aes.nr == ROUNDS;
	if (ok)
		init_accel(ks, &aes);
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
#ifdef HAVE_ACCEL
	start_accel(ks, op, nonce, aad, aad_len);
#endif
}

void sky_aesgcm_update(const unsigned char *ks, sky_aesgcm_op *op, int decrypt,
		       const unsigned char *in, unsigned char *out, size_t n)
{
#ifdef HAVE_ACCEL
	update_accel(ks, op, decrypt, in, out, n);
#endif
}

void sky_aesgcm_finish(const unsigned char *ks, sky_aesgcm_op *op, unsigned char tag[16])
{
#ifdef HAVE_ACCEL
	finish_accel(ks, op, tag);
#endif
}
