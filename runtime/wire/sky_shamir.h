/* Shamir secret sharing of 32-byte secrets, t of n, over GF(2^8).
 *
 * Secure aggregation (sky_secagg.h) needs it: each federated owner splits
 * the seed of its self-mask among the other owners, so that when the round
 * closes the aggregator can remove the self-masks of the owners whose
 * update arrived, from any t shares, without waiting for an owner that has
 * gone (Bonawitz et al., CCS 2017, section 4).
 *
 * Each of the 32 secret bytes is the constant term of its own random
 * polynomial of degree t-1 over GF(2^8) (the AES field, x^8+x^4+x^3+x+1);
 * share i is every polynomial evaluated at x = i (1..255). Any t shares
 * give the secret by Lagrange interpolation at 0; t-1 shares are uniformly
 * distributed whatever the secret, so they tell nothing about it. Field
 * arithmetic is written without tables or data-dependent branches, so its
 * timing does not depend on the secret.
 *
 * Shamir alone does not notice a wrong share: interpolation then yields a
 * different secret. Callers compare the result with a commitment the owner
 * published beforehand (sky_secagg_commit), which is how a forged share is
 * refused.
 *
 * Thread safety: no state. */
#ifndef SKY_SHAMIR_H
#define SKY_SHAMIR_H

#include "sky_err.h"
#include "sky_sign.h"

#include <stdint.h>

#define SKY_SHAMIR_SECRET_BYTES 32
#define SKY_SHAMIR_MAX_SHARES 255 /* x is one non-zero field element */

typedef struct sky_shamir_share {
	uint8_t x;                            /* 1..255, distinct within one split */
	uint8_t y[SKY_SHAMIR_SECRET_BYTES];   /* the 32 polynomials at x */
} sky_shamir_share;

/* Splits secret into n shares (x = 1..n) any t of which rebuild it;
 * 1 <= t <= n <= 255. The coefficients come from rng. Returns 0, SKY_EINVAL
 * (bad n or t, NULL pointers) or SKY_ECRYPTO (the generator failed); the
 * coefficients are wiped before return. */
int sky_shamir_split(const uint8_t secret[SKY_SHAMIR_SECRET_BYTES], unsigned n, unsigned t,
		     sky_sign_rng *rng, sky_shamir_share *out, sky_diag *d);

/* Rebuilds the secret from k shares (k >= the split's t; more are fine if
 * they are consistent). Returns 0, or SKY_EINVAL for k == 0, an x of 0 or
 * two shares with the same x (named in d). With fewer than t shares, or a
 * wrong one, the result is some other 32 bytes: check it against a
 * commitment. */
int sky_shamir_combine(const sky_shamir_share *shares, unsigned k,
		       uint8_t secret[SKY_SHAMIR_SECRET_BYTES], sky_diag *d);

#endif
