/* An owner's side of a secure federated round (docs/federation.md, "Secure
 * aggregation in the round loop"), without a broker.
 *
 *   begin   from the signed round: every member's certificate checked
 *           against the fleet CA and its CN against the member's id, the
 *           pair keys by ECDH with each, a fresh self-mask seed b, its
 *           commitment and its Shamir shares (t of n), each sealed for its
 *           member: the "shares" message;
 *   relay   the shares the others sealed for this owner, opened, and U1;
 *   mask    the fixed-point update plus PRG(b) and the pair masks of the
 *           other members of U1;
 *   reveal  for each survivor its share of that survivor's seed, for each
 *           dropped owner the pair mask seed: never both for one owner in
 *           a round (a request that asks for both, or contradicts an
 *           earlier one, or leaves out an owner of U1, is refused).
 *
 * Memory: the struct (~20 KB). One thread. */
#ifndef SKY_FEDSEC_OWNER_H
#define SKY_FEDSEC_OWNER_H

#include "sky_err.h"
#include "sky_fedsecmsg.h"
#include "sky_sign.h"

#include <mbedtls/pk.h>
#include <mbedtls/x509_crt.h>

typedef struct sky_fedsec_owner {
	char job[SKY_FED_ID_CAP];
	uint64_t round;
	int n, t, me;
	char id[SKY_FED_MAX_OWNERS][SKY_FED_ID_CAP];
	sky_secagg_pair pair[SKY_FED_MAX_OWNERS]; /* pair[me] unused */
	unsigned char self_seed[SKY_SECAGG_SEED_BYTES];
	sky_shamir_share got[SKY_FED_MAX_OWNERS]; /* got[k]: k's share of its seed for us */
	unsigned char has_got[SKY_FED_MAX_OWNERS];
	unsigned char in_u1[SKY_FED_MAX_OWNERS];
	int have_u1;
	/* what this owner revealed this round: 1 a share, 2 a pair seed */
	unsigned char revealed[SKY_FED_MAX_OWNERS];
} sky_fedsec_owner;

/* Checks pem (a member's certificate) against ca and that its CN is id;
 * the public key into pk (mbedtls_pk_init'ed by the caller, freed by it).
 * Returns 0 or SKY_EAUTH naming what failed. */
int sky_fedsec_check_cert(const mbedtls_x509_crt *ca, const char *pem, const char *id,
			  mbedtls_pk_context *pk, sky_diag *d);

/* Begins the round: members ids[0..n), this owner ids[me] with its
 * certificate key own_key, pubs[k] each member's checked public key
 * (pubs[me] is ignored). Fills m (phase shares). Wipes the struct first.
 * Returns 0, SKY_EINVAL or SKY_ECRYPTO. */
int sky_fedsec_owner_begin(sky_fedsec_owner *o, const char *job, uint64_t round,
			   const char (*ids)[SKY_FED_ID_CAP], int n, int me,
			   const mbedtls_pk_context *own_key, const mbedtls_pk_context *pubs,
			   sky_sign_rng *rng, sky_fedsec_msg *m, sky_diag *d);
/* A relay (its signature already checked). Returns 0, SKY_EINVAL (another
 * round or recipient, U1 not of members or without this owner, a second
 * relay) or SKY_EAUTH (a share that does not open). */
int sky_fedsec_owner_on_relay(sky_fedsec_owner *o, const sky_fedsec_msg *m, sky_diag *d);
/* Masks v[0..n) (elements offset.. of the fixed-point update) in place.
 * Returns 0, SKY_ESTATE (no U1 yet) or secagg's error. */
int sky_fedsec_owner_mask(const sky_fedsec_owner *o, uint64_t *v, size_t n, uint64_t offset,
			  sky_diag *d);
/* A reveal request (signature checked) into the open message out. Returns
 * 0 or SKY_EINVAL / SKY_EAUTH naming why it is refused (then nothing is
 * revealed). */
int sky_fedsec_owner_on_reveal(sky_fedsec_owner *o, const sky_fedsec_msg *m, sky_fedsec_msg *out,
			       sky_diag *d);
/* Wipes the secrets. */
void sky_fedsec_owner_free(sky_fedsec_owner *o);

#endif
