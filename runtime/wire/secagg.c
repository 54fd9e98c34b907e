/* Secure aggregation masks, pair keys and sealed shares; see sky_secagg.h. */
#include "sky_secagg.h"

#include "sky_keystream.h"
#include "sky_le.h"
#include "sky_topics.h"

#include <mbedtls/ecdh.h>
#include <mbedtls/gcm.h>
#include <mbedtls/hkdf.h>
#include <mbedtls/platform_util.h>
#include <mbedtls/sha256.h>
#include <string.h>

#define SALT "sky/v1/secagg"
#define TAG_BYTES 16
/* label, job, round, two ids, NULs between the strings */
#define INFO_MAX (32 + 3 * (SKY_TOPIC_SEGMENT_MAX + 1) + 8)

static mbedtls_ecp_keypair *p256(const mbedtls_pk_context *pk)
{
	if (!pk || mbedtls_pk_get_type(pk) != MBEDTLS_PK_ECKEY)
		return NULL;
	mbedtls_ecp_keypair *kp = mbedtls_pk_ec(*pk);
	return kp && kp->grp.id == MBEDTLS_ECP_DP_SECP256R1 ? kp : NULL;
}

/* label \0 job \0 round(le64) lo \0 hi, with lo < hi by strcmp, so both
 * sides of a pair write the same bytes. Returns the length. */
static size_t pair_info(unsigned char *buf, const char *label, const char *a, const char *b,
			const char *job, uint64_t round)
{
	const char *lo = strcmp(a, b) < 0 ? a : b, *hi = lo == a ? b : a;
	size_t n = 0, l;
	const char *parts[] = {label, job};
	for (int i = 0; i < 2; i++) {
		l = strlen(parts[i]) + 1;
		memcpy(buf + n, parts[i], l);
		n += l;
	}
	sky_le_put64(buf + n, round);
	n += 8;
	l = strlen(lo) + 1;
	memcpy(buf + n, lo, l);
	n += l;
	l = strlen(hi);
	memcpy(buf + n, hi, l);
	return n + l;
}

static int ids_ok(const char *a, const char *b, const char *job, const char *what, sky_diag *d)
{
	if (!sky_topic_segment_ok(a) || !sky_topic_segment_ok(b) || !sky_topic_segment_ok(job))
		return sky_diag_set(d, SKY_EINVAL, "%s: owner '%.64s' / '%.64s' or job '%.64s' is not "
						   "a legal id",
				    what, a ? a : "", b ? b : "", job ? job : "");
	if (strcmp(a, b) == 0)
		return sky_diag_set(d, SKY_EINVAL, "%s: owner '%s' paired with itself", what, a);
	return 0;
}

int sky_secagg_pair_keys(const mbedtls_pk_context *own_key, const char *own_id,
			 const mbedtls_pk_context *peer_pub, const char *peer_id, const char *job,
			 uint64_t round, sky_sign_rng *rng, sky_secagg_pair *out, sky_diag *d)
{
	mbedtls_ecp_keypair *own = p256(own_key), *peer = p256(peer_pub);
	if (!own || !peer || !out)
		return sky_diag_set(d, SKY_EINVAL, "secure aggregation: pair keys need two P-256 keys");
	int rc = ids_ok(own_id, peer_id, job, "secure aggregation pair keys", d);
	if (rc)
		return rc;
	unsigned char info[INFO_MAX], z[32], okm[2 * SKY_SECAGG_SEED_BYTES];
	mbedtls_ecp_group grp;
	mbedtls_mpi zm;
	mbedtls_ecp_group_init(&grp);
	mbedtls_mpi_init(&zm);
	rc = SKY_ECRYPTO;
	/* the ECDH secret is the x-coordinate of d_own * Q_peer = d_peer * Q_own */
	if (mbedtls_ecp_group_load(&grp, MBEDTLS_ECP_DP_SECP256R1) != 0 ||
	    mbedtls_ecdh_compute_shared(&grp, &zm, &peer->Q, &own->d,
					rng ? sky_sign_rng_func : NULL, rng) != 0 ||
	    mbedtls_mpi_write_binary(&zm, z, sizeof z) != 0) {
		sky_diag_set(d, rc, "secure aggregation: ECDH of '%s' and '%s' failed", own_id,
			     peer_id);
		goto exit;
	}
	size_t il = pair_info(info, "pair keys", own_id, peer_id, job, round);
	/* one HKDF output, cut in two: the mask seed and the share key are
	 * independent pseudo-random strings, so revealing one tells nothing of
	 * the other */
	if (mbedtls_hkdf(mbedtls_md_info_from_type(MBEDTLS_MD_SHA256), (const unsigned char *)SALT,
			 strlen(SALT), z, sizeof z, info, il, okm, sizeof okm) != 0) {
		sky_diag_set(d, rc, "secure aggregation: HKDF failed");
		goto exit;
	}
	memcpy(out->mask_seed, okm, SKY_SECAGG_SEED_BYTES);
	memcpy(out->share_key, okm + SKY_SECAGG_SEED_BYTES, SKY_SECAGG_SEED_BYTES);
	rc = 0;
exit:
	mbedtls_platform_zeroize(z, sizeof z);
	mbedtls_platform_zeroize(okm, sizeof okm);
	mbedtls_mpi_free(&zm);
	mbedtls_ecp_group_free(&grp);
	return rc;
}

int sky_secagg_commit(const char *owner, const char *job, uint64_t round,
		      const unsigned char seed[SKY_SECAGG_SEED_BYTES], unsigned char out[32],
		      sky_diag *d)
{
	if (!sky_topic_segment_ok(owner) || !sky_topic_segment_ok(job) || !seed || !out)
		return sky_diag_set(d, SKY_EINVAL, "secure aggregation commit: bad owner or job id");
	static const char label[] = "sky/v1/secagg/commit";
	unsigned char r[8];
	sky_le_put64(r, round);
	mbedtls_sha256_context h;
	mbedtls_sha256_init(&h);
	int bad = mbedtls_sha256_starts_ret(&h, 0) ||
		  mbedtls_sha256_update_ret(&h, (const unsigned char *)label, sizeof label) ||
		  mbedtls_sha256_update_ret(&h, (const unsigned char *)owner, strlen(owner) + 1) ||
		  mbedtls_sha256_update_ret(&h, (const unsigned char *)job, strlen(job) + 1) ||
		  mbedtls_sha256_update_ret(&h, r, sizeof r) ||
		  mbedtls_sha256_update_ret(&h, seed, SKY_SECAGG_SEED_BYTES) ||
		  mbedtls_sha256_finish_ret(&h, out);
	mbedtls_sha256_free(&h);
	return bad ? sky_diag_set(d, SKY_ECRYPTO, "secure aggregation commit: SHA-256 failed") : 0;
}

int sky_secagg_stream(uint64_t *v, size_t n, uint64_t offset,
		      const unsigned char seed[SKY_SECAGG_SEED_BYTES], int sign, sky_diag *d)
{
	if (n == 0)
		return 0;
	if (!v || !seed || (sign != 1 && sign != -1))
		return sky_diag_set(d, SKY_EINVAL, "secure aggregation stream: bad argument");
	if (offset >= SKY_SECAGG_MAX_WORDS || n > SKY_SECAGG_MAX_WORDS - offset)
		return sky_diag_set(d, SKY_ERANGE,
				    "secure aggregation stream: words %llu..%llu past the key stream's "
				    "2^35",
				    (unsigned long long)offset, (unsigned long long)(offset + n));
	sky_keystream_add(v, n, offset, seed, sign);
	return 0;
}

int sky_secagg_mask(uint64_t *v, size_t n, uint64_t offset,
		    const unsigned char self_seed[SKY_SECAGG_SEED_BYTES], const char *own_id,
		    const sky_secagg_peer *peers, size_t npeers, sky_diag *d)
{
	if (!sky_topic_segment_ok(own_id) || (npeers && !peers))
		return sky_diag_set(d, SKY_EINVAL, "secure aggregation mask: bad owner id");
	int rc = sky_secagg_stream(v, n, offset, self_seed, 1, d);
	for (size_t j = 0; !rc && j < npeers; j++) {
		if (!sky_topic_segment_ok(peers[j].id) || !peers[j].mask_seed ||
		    strcmp(peers[j].id, own_id) == 0)
			return sky_diag_set(d, SKY_EINVAL,
					    "secure aggregation mask: peer %zu ('%.64s') of '%s' is "
					    "not a legal other owner",
					    j, peers[j].id ? peers[j].id : "", own_id);
		/* the lower id adds the pair's stream, the higher subtracts it */
		rc = sky_secagg_stream(v, n, offset, peers[j].mask_seed,
				       strcmp(own_id, peers[j].id) < 0 ? 1 : -1, d);
	}
	return rc;
}

int sky_secagg_unmask(uint64_t *sum, size_t n, uint64_t offset,
		      const unsigned char (*self_seeds)[SKY_SECAGG_SEED_BYTES], size_t nself,
		      const sky_secagg_revealed *revealed, size_t nrevealed, sky_diag *d)
{
	if ((nself && !self_seeds) || (nrevealed && !revealed))
		return sky_diag_set(d, SKY_EINVAL, "secure aggregation unmask: NULL argument");
	int rc = 0;
	for (size_t i = 0; !rc && i < nself; i++)
		rc = sky_secagg_stream(sum, n, offset, self_seeds[i], -1, d);
	for (size_t k = 0; !rc && k < nrevealed; k++) {
		const sky_secagg_revealed *r = &revealed[k];
		if (!r->mask_seed || !sky_topic_segment_ok(r->survivor) ||
		    !sky_topic_segment_ok(r->dropped) || strcmp(r->survivor, r->dropped) == 0)
			return sky_diag_set(d, SKY_EINVAL,
					    "secure aggregation unmask: revealed seed %zu names no "
					    "legal pair",
					    k);
		/* undo what the survivor added for this pair */
		rc = sky_secagg_stream(sum, n, offset, r->mask_seed,
				       strcmp(r->survivor, r->dropped) < 0 ? -1 : 1, d);
	}
	return rc;
}

/* The associated data of a sealed share, and its nonce: byte 0 tells the
 * direction (1: from the lower id to the higher), so the two shares of a
 * pair never use one nonce under one key. */
static size_t share_ad(unsigned char *ad, unsigned char nonce[12], const char *from,
		       const char *to, const char *job, uint64_t round)
{
	size_t n = pair_info(ad, "share", from, to, job, round);
	ad[n++] = strcmp(from, to) < 0 ? 1 : 2;
	memset(nonce, 0, 12);
	nonce[0] = ad[n - 1];
	return n;
}

int sky_secagg_seal_share(const sky_secagg_pair *pair, const char *from, const char *to,
			  const char *job, uint64_t round, const sky_shamir_share *share,
			  unsigned char out[SKY_SECAGG_SHARE_BLOB_BYTES], sky_diag *d)
{
	if (!pair || !share || !out)
		return sky_diag_set(d, SKY_EINVAL, "secure aggregation share: NULL argument");
	int rc = ids_ok(from, to, job, "secure aggregation share", d);
	if (rc)
		return rc;
	unsigned char ad[INFO_MAX + 1], nonce[12], plain[1 + SKY_SHAMIR_SECRET_BYTES];
	size_t al = share_ad(ad, nonce, from, to, job, round);
	plain[0] = share->x;
	memcpy(plain + 1, share->y, SKY_SHAMIR_SECRET_BYTES);
	out[0] = SKY_SECAGG_VERSION;
	mbedtls_gcm_context g;
	mbedtls_gcm_init(&g);
	rc = mbedtls_gcm_setkey(&g, MBEDTLS_CIPHER_ID_AES, pair->share_key, 256) ||
	     mbedtls_gcm_crypt_and_tag(&g, MBEDTLS_GCM_ENCRYPT, sizeof plain, nonce, sizeof nonce, ad,
				       al, plain, out + 1, TAG_BYTES, out + 1 + sizeof plain);
	mbedtls_gcm_free(&g);
	mbedtls_platform_zeroize(plain, sizeof plain);
	return rc ? sky_diag_set(d, SKY_ECRYPTO, "secure aggregation share: AES-GCM failed") : 0;
}

int sky_secagg_open_share(const sky_secagg_pair *pair, const char *from, const char *to,
			  const char *job, uint64_t round, const unsigned char *blob, size_t len,
			  sky_shamir_share *share, sky_diag *d)
{
	if (!pair || !share || !blob)
		return sky_diag_set(d, SKY_EINVAL, "secure aggregation share: NULL argument");
	int rc = ids_ok(from, to, job, "secure aggregation share", d);
	if (rc)
		return rc;
	if (len != SKY_SECAGG_SHARE_BLOB_BYTES || blob[0] != SKY_SECAGG_VERSION)
		return sky_diag_set(d, SKY_EFORMAT,
				    "share from '%s': %zu bytes, version %u (want %d bytes, version %d)",
				    from, len, len ? blob[0] : 0, SKY_SECAGG_SHARE_BLOB_BYTES,
				    SKY_SECAGG_VERSION);
	unsigned char ad[INFO_MAX + 1], nonce[12], plain[1 + SKY_SHAMIR_SECRET_BYTES];
	size_t al = share_ad(ad, nonce, from, to, job, round);
	mbedtls_gcm_context g;
	mbedtls_gcm_init(&g);
	rc = mbedtls_gcm_setkey(&g, MBEDTLS_CIPHER_ID_AES, pair->share_key, 256);
	int bad = rc || mbedtls_gcm_auth_decrypt(&g, sizeof plain, nonce, sizeof nonce, ad, al,
						 blob + 1 + sizeof plain, TAG_BYTES, blob + 1, plain);
	mbedtls_gcm_free(&g);
	if (bad) {
		mbedtls_platform_zeroize(plain, sizeof plain);
		return sky_diag_set(d, SKY_EAUTH,
				    "share from '%s' to '%s' (job %s, round %llu) does not verify: "
				    "another pair, job, round or direction, or tampered",
				    from, to, job, (unsigned long long)round);
	}
	share->x = plain[0];
	memcpy(share->y, plain + 1, SKY_SHAMIR_SECRET_BYTES);
	mbedtls_platform_zeroize(plain, sizeof plain);
	return 0;
}
