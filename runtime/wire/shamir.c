/* Shamir secret sharing over GF(2^8); see sky_shamir.h. */
#include "sky_shamir.h"

#include <mbedtls/platform_util.h>
#include <string.h>

/* a * b in GF(2^8) mod x^8+x^4+x^3+x+1, eight rounds whatever the inputs. */
static uint8_t gf_mul(uint8_t a, uint8_t b)
{
	unsigned r = 0, x = a;
	for (int i = 0; i < 8; i++) {
		r ^= x & (0u - ((b >> i) & 1u));
		x = (x << 1) ^ (0x11bu & (0u - ((x >> 7) & 1u)));
	}
	return (uint8_t)r;
}

/* a^-1 = a^254 (a^255 = 1 for a != 0); the inverse of 0 is not needed. */
static uint8_t gf_inv(uint8_t a)
{
	uint8_t r = 1, p = a;
	for (int e = 254; e; e >>= 1) {
		if (e & 1)
			r = gf_mul(r, p);
		p = gf_mul(p, p);
	}
	return r;
}

int sky_shamir_split(const uint8_t secret[SKY_SHAMIR_SECRET_BYTES], unsigned n, unsigned t,
		     sky_sign_rng *rng, sky_shamir_share *out, sky_diag *d)
{
	/* coef[j][b]: coefficient of x^(j+1) of byte b's polynomial */
	uint8_t coef[SKY_SHAMIR_MAX_SHARES - 1][SKY_SHAMIR_SECRET_BYTES];
	if (!secret || !out || !rng)
		return sky_diag_set(d, SKY_EINVAL, "shamir split: NULL argument");
	if (n < 1 || n > SKY_SHAMIR_MAX_SHARES || t < 1 || t > n)
		return sky_diag_set(d, SKY_EINVAL,
				    "shamir split: threshold %u of %u shares (want 1 <= t <= n <= %d)",
				    t, n, SKY_SHAMIR_MAX_SHARES);
	/* CTR_DRBG gives at most 1024 bytes per request (MBEDTLS_CTR_DRBG_MAX_REQUEST) */
	size_t need = (size_t)(t - 1) * sizeof coef[0];
	for (size_t at = 0; at < need; at += 1024) {
		size_t len = need - at < 1024 ? need - at : 1024;
		if (sky_sign_rng_func(rng, &coef[0][0] + at, len) != 0) {
			mbedtls_platform_zeroize(coef, sizeof coef);
			return sky_diag_set(d, SKY_ECRYPTO, "shamir split: random generator failed");
		}
	}
	for (unsigned i = 0; i < n; i++) {
		uint8_t x = (uint8_t)(i + 1);
		out[i].x = x;
		for (int b = 0; b < SKY_SHAMIR_SECRET_BYTES; b++) {
			/* Horner from the highest coefficient down to the secret */
			uint8_t y = 0;
			for (unsigned j = t - 1; j >= 1; j--)
				y = gf_mul(y, x) ^ coef[j - 1][b];
			out[i].y[b] = gf_mul(y, x) ^ secret[b];
		}
	}
	mbedtls_platform_zeroize(coef, sizeof coef);
	return 0;
}

int sky_shamir_combine(const sky_shamir_share *shares, unsigned k,
		       uint8_t secret[SKY_SHAMIR_SECRET_BYTES], sky_diag *d)
{
	if (!shares || !secret)
		return sky_diag_set(d, SKY_EINVAL, "shamir combine: NULL argument");
	if (k == 0 || k > SKY_SHAMIR_MAX_SHARES)
		return sky_diag_set(d, SKY_EINVAL, "shamir combine: %u shares (want 1..%d)", k,
				    SKY_SHAMIR_MAX_SHARES);
	for (unsigned i = 0; i < k; i++) {
		if (shares[i].x == 0)
			return sky_diag_set(d, SKY_EINVAL, "shamir combine: share %u has x = 0", i);
		for (unsigned j = 0; j < i; j++)
			if (shares[j].x == shares[i].x)
				return sky_diag_set(d, SKY_EINVAL,
						    "shamir combine: shares %u and %u both have x = %u",
						    j, i, shares[i].x);
	}
	memset(secret, 0, SKY_SHAMIR_SECRET_BYTES);
	for (unsigned i = 0; i < k; i++) {
		/* Lagrange basis at 0: prod_{j != i} x_j / (x_j - x_i); minus is xor */
		uint8_t num = 1, den = 1;
		for (unsigned j = 0; j < k; j++) {
			if (j == i)
				continue;
			num = gf_mul(num, shares[j].x);
			den = gf_mul(den, shares[j].x ^ shares[i].x);
		}
		uint8_t l = gf_mul(num, gf_inv(den));
		for (int b = 0; b < SKY_SHAMIR_SECRET_BYTES; b++)
			secret[b] ^= gf_mul(l, shares[i].y[b]);
	}
	return 0;
}
