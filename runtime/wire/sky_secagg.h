/* Secure aggregation: the aggregator of a federated round learns the sum
 * of the owners' updates and nothing about any one of them, and an owner
 * that drops out after masking does not stall the round.
 *
 * After Bonawitz et al., "Practical Secure Aggregation for Privacy-
 * Preserving Machine Learning" (CCS 2017), with the keys Sky already has:
 * every owner is an enrolled board with a P-256 certificate, so a pair of
 * owners agrees on its secrets by ECDH of the two certificate keys, bound
 * to the job and the round by HKDF; no key exchange round is needed.
 *
 * Updates are vectors of 64-bit words (fixed point, runtime/wire/sky_fedsum.h)
 * added modulo 2^64, so masks cancel exactly and the masked sum has the
 * same bits as the plain one. Owner i sends
 *
 *   y_i = x_i + PRG(b_i) + sum_{j > i} PRG(m_ij) - sum_{j < i} PRG(m_ij)
 *
 * where ">" orders owner ids by strcmp, m_ij is the pair's mask seed and
 * b_i a fresh random self-mask seed. The pair masks cancel in the sum over
 * every owner that sent; the self-masks are removed with b_i, which the
 * aggregator rebuilds from t Shamir shares (sky_shamir.h) that i gave the
 * other owners sealed under the pair's share key (so the aggregator that
 * relays them cannot open them). When owner k has masked and then gone,
 * each survivor j reveals m_jk, and the aggregator removes the pair masks
 * that no longer cancel. An honest owner reveals, for one owner, either a
 * share of its self-mask seed (it sent its update) or the pair seed (it
 * did not), never both, so the aggregator can never unmask one update.
 *
 * Per pair and round, HKDF-SHA256 of the ECDH x-coordinate gives two
 * independent 32-byte keys, the mask seed and the share key: revealing a
 * mask seed for a dropped owner tells nothing about the share key, so the
 * shares that owner sealed stay closed. PRG(s) is ChaCha20 (RFC 8439)
 * keyed by s, nonce zero, its key stream read as little-endian 64-bit
 * words; word w of the stream is the mask of vector element w, so a long
 * vector can be masked in chunks at any offset.
 *
 * Thread safety: no state; a sky_sign_rng is used by one thread at a time. */
#ifndef SKY_SECAGG_H
#define SKY_SECAGG_H

#include "sky_err.h"
#include "sky_shamir.h"
#include "sky_sign.h"

#include <mbedtls/pk.h>
#include <stddef.h>
#include <stdint.h>

#define SKY_SECAGG_SEED_BYTES 32
/* A sealed share: version, x, the 32 share bytes, the 16-byte GCM tag. */
#define SKY_SECAGG_SHARE_BLOB_BYTES (1 + 1 + SKY_SHAMIR_SECRET_BYTES + 16)
#define SKY_SECAGG_VERSION 1
/* The ChaCha20 block counter is 32 bits: 2^32 blocks of 8 words each. */
#define SKY_SECAGG_MAX_WORDS ((uint64_t)1 << 35)

/* What one owner and one peer share for one job and round. */
typedef struct sky_secagg_pair {
	unsigned char mask_seed[SKY_SECAGG_SEED_BYTES];
	unsigned char share_key[SKY_SECAGG_SEED_BYTES];
} sky_secagg_pair;

/* A peer of the masking owner: its id and the pair's mask seed. */
typedef struct sky_secagg_peer {
	const char *id;
	const unsigned char *mask_seed; /* SKY_SECAGG_SEED_BYTES */
} sky_secagg_peer;

/* A pair mask that did not cancel: survivor's update holds the mask of its
 * pair with the dropped owner, and survivor revealed the seed. */
typedef struct sky_secagg_revealed {
	const char *survivor, *dropped;
	const unsigned char *mask_seed; /* SKY_SECAGG_SEED_BYTES */
} sky_secagg_revealed;

/* Derives the pair keys of own_id (holding own_key, its certificate's
 * private key) and peer_id (peer_pub, the public key of the peer's
 * certificate) for job and round. Both owners get the same keys, whichever
 * side computes. Returns 0, SKY_EINVAL (a key that is not P-256, an id or
 * job that is not a legal topic segment, the same id twice) or
 * SKY_ECRYPTO. */
int sky_secagg_pair_keys(const mbedtls_pk_context *own_key, const char *own_id,
			 const mbedtls_pk_context *peer_pub, const char *peer_id, const char *job,
			 uint64_t round, sky_sign_rng *rng, sky_secagg_pair *out, sky_diag *d);

/* The commitment an owner publishes for its self-mask seed before the
 * round, SHA-256 over a label, owner, job, round and the seed; the
 * aggregator checks a seed rebuilt from shares against it. Returns 0 or
 * SKY_EINVAL. */
int sky_secagg_commit(const char *owner, const char *job, uint64_t round,
		      const unsigned char seed[SKY_SECAGG_SEED_BYTES], unsigned char out[32],
		      sky_diag *d);

/* v[i] += sign * PRG(seed)[offset + i] (mod 2^64), sign +1 or -1, for n
 * words. Returns 0, or SKY_ERANGE past SKY_SECAGG_MAX_WORDS. */
int sky_secagg_stream(uint64_t *v, size_t n, uint64_t offset,
		      const unsigned char seed[SKY_SECAGG_SEED_BYTES], int sign, sky_diag *d);

/* Masks owner own_id's words v[0..n) (elements offset..offset+n of its
 * update) in place with its self-mask seed and the pair mask of each of
 * its npeers peers. Returns 0, SKY_EINVAL (a peer with own_id's id or an
 * illegal id) or SKY_ERANGE. */
int sky_secagg_mask(uint64_t *v, size_t n, uint64_t offset,
		    const unsigned char self_seed[SKY_SECAGG_SEED_BYTES], const char *own_id,
		    const sky_secagg_peer *peers, size_t npeers, sky_diag *d);

/* Turns sum (the modular sum of the survivors' masked words) into the sum
 * of their updates: subtracts PRG(self_seeds[i]) for each of nself
 * survivors and removes each revealed pair mask. Returns 0, SKY_EINVAL or
 * SKY_ERANGE. */
int sky_secagg_unmask(uint64_t *sum, size_t n, uint64_t offset,
		      const unsigned char (*self_seeds)[SKY_SECAGG_SEED_BYTES], size_t nself,
		      const sky_secagg_revealed *revealed, size_t nrevealed, sky_diag *d);

/* Seals the share `from` gives `to` under their pair's share key (AES-256-
 * GCM; the job, round and both ids are bound as associated data, the
 * direction picks the nonce). Writes SKY_SECAGG_SHARE_BLOB_BYTES into
 * out. Returns 0, SKY_EINVAL or SKY_ECRYPTO. */
int sky_secagg_seal_share(const sky_secagg_pair *pair, const char *from, const char *to,
			  const char *job, uint64_t round, const sky_shamir_share *share,
			  unsigned char out[SKY_SECAGG_SHARE_BLOB_BYTES], sky_diag *d);

/* Opens a share sealed by sky_secagg_seal_share for `to`. Returns 0,
 * SKY_EFORMAT (wrong length or version) or SKY_EAUTH (the tag does not
 * verify: another pair, job, round or direction, or tampered). */
int sky_secagg_open_share(const sky_secagg_pair *pair, const char *from, const char *to,
			  const char *job, uint64_t round, const unsigned char *blob, size_t len,
			  sky_shamir_share *share, sky_diag *d);

#endif
