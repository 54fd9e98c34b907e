/* Per-job key wrapping for a board's certificate key; see sky_jobkey.h. */
#include "sky_jobkey.h"

#include "sky_topics.h"

#include <mbedtls/ecdh.h>
#include <mbedtls/gcm.h>
#include <mbedtls/hkdf.h>
#include <mbedtls/platform_util.h>
#include <mbedtls/sha256.h>
#include <string.h>

#define POINT_BYTES 65 /* uncompressed P-256 point */
#define KEYID_BYTES 8
#define OFF_POINT 1
#define OFF_KEYID (OFF_POINT + POINT_BYTES)
#define OFF_EPOCH (OFF_KEYID + KEYID_BYTES)
#define OFF_JOBLEN (OFF_EPOCH + 8)
#define TAG_BYTES 16
#define BLOB_MIN (OFF_JOBLEN + 1 + 1 + 1 + 1 + SKY_JOBKEY_BYTES + TAG_BYTES)
#define BLOB_MAX (OFF_JOBLEN + 2 + 2 * SKY_TOPIC_SEGMENT_MAX + SKY_JOBKEY_BYTES + TAG_BYTES)
#define SALT "sky/v1/jobkey"

static const char *const k_names[SKY_JOBKEY_N] = {
	[SKY_JOBKEY_OK] = "ok",       [SKY_JOBKEY_FORMAT] = "format",
	[SKY_JOBKEY_WRONG_KEY] = "wrong_key", [SKY_JOBKEY_JOB] = "job",
	[SKY_JOBKEY_BOARD] = "board", [SKY_JOBKEY_EPOCH] = "epoch",
	[SKY_JOBKEY_TAMPERED] = "tampered",
};

const char *sky_jobkey_refusal_name(sky_jobkey_refusal r)
{
	return (unsigned)r < SKY_JOBKEY_N ? k_names[r] : "?";
}

int sky_jobkey_generate(sky_sign_rng *rng, unsigned char key[SKY_JOBKEY_BYTES], sky_diag *d)
{
	if (!rng || !rng->ready || !key || sky_sign_rng_func(rng, key, SKY_JOBKEY_BYTES) != 0)
		return sky_diag_set(d, SKY_ECRYPTO, "job key: random generator not ready or failed");
	return 0;
}

/* The P-256 key pair inside pk, or NULL if pk is not one. */
static mbedtls_ecp_keypair *p256(const mbedtls_pk_context *pk)
{
	if (!pk || mbedtls_pk_get_type(pk) != MBEDTLS_PK_ECKEY)
		return NULL;
	mbedtls_ecp_keypair *kp = mbedtls_pk_ec(*pk);
	return kp && kp->grp.id == MBEDTLS_ECP_DP_SECP256R1 ? kp : NULL;
}

/* First 8 bytes of SHA-256 of kp's public point. */
static int key_id(const mbedtls_ecp_keypair *kp, unsigned char id[KEYID_BYTES])
{
	unsigned char pt[POINT_BYTES], h[32];
	size_t olen = 0;
	if (mbedtls_ecp_point_write_binary(&kp->grp, &kp->Q, MBEDTLS_ECP_PF_UNCOMPRESSED, &olen, pt,
					   sizeof pt) != 0 ||
	    olen != POINT_BYTES || mbedtls_sha256_ret(pt, olen, h, 0) != 0)
		return SKY_ECRYPTO;
	memcpy(id, h, KEYID_BYTES);
	return 0;
}

/* w = HKDF-SHA256(SALT, x(d * Q), info), the one-time AES key. */
static int derive(mbedtls_ecp_group *grp, const mbedtls_ecp_point *q, const mbedtls_mpi *dsec,
		  sky_sign_rng *rng, const unsigned char *info, size_t info_len, unsigned char w[32])
{
	mbedtls_mpi z;
	unsigned char zb[32];
	int rc = SKY_ECRYPTO;
	mbedtls_mpi_init(&z);
	/* a NULL RNG makes Mbed TLS blind the multiplication with its own */
	if (mbedtls_ecdh_compute_shared(grp, &z, q, dsec, rng ? sky_sign_rng_func : NULL, rng) != 0 ||
	    mbedtls_mpi_write_binary(&z, zb, sizeof zb) != 0)
		goto exit;
	if (mbedtls_hkdf(mbedtls_md_info_from_type(MBEDTLS_MD_SHA256), (const unsigned char *)SALT,
			 strlen(SALT), zb, sizeof zb, info, info_len, w, 32) != 0)
		goto exit;
	rc = 0;
exit:
	mbedtls_platform_zeroize(zb, sizeof zb);
	mbedtls_mpi_free(&z);
	return rc;
}

static void put64le(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get64le(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

int sky_jobkey_wrap(const mbedtls_pk_context *board_pub, const unsigned char key[SKY_JOBKEY_BYTES],
		    const char *job, const char *board, int64_t epoch, sky_sign_rng *rng, char *out,
		    size_t cap, sky_diag *d)
{
	mbedtls_ecp_keypair *b = p256(board_pub);
	if (!b || !key || !out || !rng || !rng->ready)
		return sky_diag_set(d, SKY_EINVAL,
				    "job key wrap: NULL argument, or the board key is not EC P-256");
	if (!sky_topic_segment_ok(job) || !sky_topic_segment_ok(board) || epoch < 0)
		return sky_diag_set(d, SKY_EINVAL, "job key wrap: job '%.64s' / board '%.64s' / "
						   "epoch %lld not legal",
				    job ? job : "", board ? board : "", (long long)epoch);
	size_t jl = strlen(job), bl = strlen(board);
	size_t alen = OFF_JOBLEN + 1 + jl + 1 + bl, blen = alen + SKY_JOBKEY_BYTES + TAG_BYTES;
	unsigned char blob[BLOB_MAX], w[32];
	mbedtls_ecp_group grp;
	mbedtls_mpi e;
	mbedtls_ecp_point E;
	mbedtls_gcm_context gcm;
	mbedtls_ecp_group_init(&grp);
	mbedtls_mpi_init(&e);
	mbedtls_ecp_point_init(&E);
	mbedtls_gcm_init(&gcm);
	int rc = SKY_ECRYPTO;
	size_t olen = 0;
	static const unsigned char zero_nonce[12];

	if (mbedtls_ecp_group_load(&grp, MBEDTLS_ECP_DP_SECP256R1) != 0 ||
	    mbedtls_ecdh_gen_public(&grp, &e, &E, sky_sign_rng_func, rng) != 0 ||
	    mbedtls_ecp_point_write_binary(&grp, &E, MBEDTLS_ECP_PF_UNCOMPRESSED, &olen,
					   blob + OFF_POINT, POINT_BYTES) != 0 ||
	    olen != POINT_BYTES || key_id(b, blob + OFF_KEYID) != 0) {
		rc = sky_diag_set(d, SKY_ECRYPTO, "job key wrap: ephemeral key failed");
		goto exit;
	}
	blob[0] = SKY_JOBKEY_VERSION;
	put64le(blob + OFF_EPOCH, (uint64_t)epoch);
	blob[OFF_JOBLEN] = (unsigned char)jl;
	memcpy(blob + OFF_JOBLEN + 1, job, jl);
	blob[OFF_JOBLEN + 1 + jl] = (unsigned char)bl;
	memcpy(blob + OFF_JOBLEN + 2 + jl, board, bl);
	if (derive(&grp, &b->Q, &e, rng, blob, alen, w) != 0 ||
	    mbedtls_gcm_setkey(&gcm, MBEDTLS_CIPHER_ID_AES, w, 256) != 0 ||
	    mbedtls_gcm_crypt_and_tag(&gcm, MBEDTLS_GCM_ENCRYPT, SKY_JOBKEY_BYTES, zero_nonce,
				      sizeof zero_nonce, blob, alen, key, blob + alen, TAG_BYTES,
				      blob + alen + SKY_JOBKEY_BYTES) != 0) {
		rc = sky_diag_set(d, SKY_ECRYPTO, "job key wrap: key agreement or encryption failed");
		goto exit;
	}
	rc = sky_b64_encode(blob, blen, out, cap);
	if (rc < 0)
		rc = sky_diag_set(d, SKY_ERANGE, "job key wrap: %zu-byte buffer, blob needs %zu", cap,
				  (blen + 2) / 3 * 4 + 1);
exit:
	mbedtls_platform_zeroize(w, sizeof w);
	mbedtls_gcm_free(&gcm);
	mbedtls_ecp_point_free(&E);
	mbedtls_mpi_free(&e);
	mbedtls_ecp_group_free(&grp);
	return rc;
}

static int refuse(sky_jobkey_refusal *why, sky_jobkey_refusal r, int rc)
{
	if (why)
		*why = r;
	return rc;
}

int sky_jobkey_unwrap(const mbedtls_pk_context *board_key, const char *blob, size_t len,
		      const char *job, const char *board, int64_t epoch,
		      unsigned char key[SKY_JOBKEY_BYTES], sky_jobkey_refusal *why, sky_diag *d)
{
	mbedtls_ecp_keypair *b = p256(board_key);
	if (!b || !blob || !key || !job || !board)
		return refuse(why, SKY_JOBKEY_FORMAT,
			      sky_diag_set(d, SKY_EINVAL, "job key: NULL argument, or the board key "
							  "is not EC P-256"));
	if (mbedtls_mpi_cmp_int(&b->d, 0) == 0)
		return refuse(why, SKY_JOBKEY_FORMAT,
			      sky_diag_set(d, SKY_EINVAL, "job key: the board key has no private part"));
	unsigned char raw[BLOB_MAX], w[32], plain[SKY_JOBKEY_BYTES], id[KEYID_BYTES];
	int n = len > (BLOB_MAX + 2) / 3 * 4 ? SKY_ERANGE : sky_b64_decode(blob, len, raw, sizeof raw);
	if (n < BLOB_MIN)
		return refuse(why, SKY_JOBKEY_FORMAT,
			      sky_diag_set(d, SKY_EFORMAT,
					   "job key: not base64 of a wrapped key (%zu characters)", len));
	if (raw[0] != SKY_JOBKEY_VERSION)
		return refuse(why, SKY_JOBKEY_FORMAT,
			      sky_diag_set(d, SKY_EFORMAT, "job key: blob version %u, expected %d",
					   raw[0], SKY_JOBKEY_VERSION));
	size_t jl = raw[OFF_JOBLEN], at = OFF_JOBLEN + 1 + jl;
	size_t bl = at < (size_t)n ? raw[at] : 0;
	size_t alen = at + 1 + bl;
	char bjob[SKY_TOPIC_SEGMENT_MAX + 1], bboard[SKY_TOPIC_SEGMENT_MAX + 1];
	if (jl < 1 || jl > SKY_TOPIC_SEGMENT_MAX || bl < 1 || bl > SKY_TOPIC_SEGMENT_MAX ||
	    alen + SKY_JOBKEY_BYTES + TAG_BYTES != (size_t)n)
		return refuse(why, SKY_JOBKEY_FORMAT,
			      sky_diag_set(d, SKY_EFORMAT,
					   "job key: id lengths %zu/%zu do not fit a %d-byte blob", jl,
					   bl, n));
	memcpy(bjob, raw + OFF_JOBLEN + 1, jl);
	bjob[jl] = '\0';
	memcpy(bboard, raw + at + 1, bl);
	bboard[bl] = '\0';
	if (!sky_topic_segment_ok(bjob) || !sky_topic_segment_ok(bboard))
		return refuse(why, SKY_JOBKEY_FORMAT,
			      sky_diag_set(d, SKY_EFORMAT, "job key: blob names an illegal id"));
	if (key_id(b, id) != 0)
		return refuse(why, SKY_JOBKEY_FORMAT,
			      sky_diag_set(d, SKY_ECRYPTO, "job key: cannot encode the board key"));
	if (memcmp(id, raw + OFF_KEYID, KEYID_BYTES) != 0)
		return refuse(why, SKY_JOBKEY_WRONG_KEY,
			      sky_diag_set(d, SKY_EAUTH,
					   "job key: wrapped for another board key (key id "
					   "%02x%02x%02x%02x..., this board's %02x%02x%02x%02x...)",
					   raw[OFF_KEYID], raw[OFF_KEYID + 1], raw[OFF_KEYID + 2],
					   raw[OFF_KEYID + 3], id[0], id[1], id[2], id[3]));
	if (strcmp(bjob, job) != 0)
		return refuse(why, SKY_JOBKEY_JOB,
			      sky_diag_set(d, SKY_EAUTH, "job key: wrapped for job '%s', not '%.64s'",
					   bjob, job));
	if (strcmp(bboard, board) != 0)
		return refuse(why, SKY_JOBKEY_BOARD,
			      sky_diag_set(d, SKY_EAUTH,
					   "job key: wrapped for board '%s', not '%.64s'", bboard,
					   board));
	uint64_t bepoch = get64le(raw + OFF_EPOCH);
	if (epoch < 0 || bepoch != (uint64_t)epoch)
		return refuse(why, SKY_JOBKEY_EPOCH,
			      sky_diag_set(d, SKY_EAUTH, "job key: wrapped for epoch %llu, not %lld",
					   (unsigned long long)bepoch, (long long)epoch));

	mbedtls_ecp_group grp;
	mbedtls_ecp_point E;
	mbedtls_gcm_context gcm;
	mbedtls_ecp_group_init(&grp);
	mbedtls_ecp_point_init(&E);
	mbedtls_gcm_init(&gcm);
	static const unsigned char zero_nonce[12];
	int rc;
	if (mbedtls_ecp_group_load(&grp, MBEDTLS_ECP_DP_SECP256R1) != 0 ||
	    mbedtls_ecp_point_read_binary(&grp, &E, raw + OFF_POINT, POINT_BYTES) != 0 ||
	    mbedtls_ecp_check_pubkey(&grp, &E) != 0) {
		rc = refuse(why, SKY_JOBKEY_FORMAT,
			    sky_diag_set(d, SKY_EFORMAT,
					 "job key: the ephemeral key is not a point on P-256"));
		goto exit;
	}
	if (derive(&grp, &E, &b->d, NULL, raw, alen, w) != 0 ||
	    mbedtls_gcm_setkey(&gcm, MBEDTLS_CIPHER_ID_AES, w, 256) != 0) {
		rc = refuse(why, SKY_JOBKEY_FORMAT,
			    sky_diag_set(d, SKY_ECRYPTO, "job key: key agreement failed"));
		goto exit;
	}
	if (mbedtls_gcm_auth_decrypt(&gcm, SKY_JOBKEY_BYTES, zero_nonce, sizeof zero_nonce, raw,
				     alen, raw + alen + SKY_JOBKEY_BYTES, TAG_BYTES, raw + alen,
				     plain) != 0) {
		rc = refuse(why, SKY_JOBKEY_TAMPERED,
			    sky_diag_set(d, SKY_EAUTH,
					 "job key: the wrapped key does not authenticate (blob edited "
					 "or forged)"));
		goto exit;
	}
	memcpy(key, plain, SKY_JOBKEY_BYTES);
	rc = refuse(why, SKY_JOBKEY_OK, 0);
exit:
	mbedtls_platform_zeroize(plain, sizeof plain);
	mbedtls_platform_zeroize(w, sizeof w);
	mbedtls_gcm_free(&gcm);
	mbedtls_ecp_point_free(&E);
	mbedtls_ecp_group_free(&grp);
	return rc;
}
