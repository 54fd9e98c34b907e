/* Packing and unpacking whole tensor frames; see sky_frameseal.h. */
#include "sky_frameseal.h"

#include "aesgcm_internal.h"
#include "sky_crc32c.h"
#include "sky_sign.h"

#include <limits.h>
#include <mbedtls/platform_util.h>
#include <string.h>

/* The payload is processed in chunks small enough to stay in L2 between
 * the CRC and the copy or cipher pass over it; a multiple of 16 as GCM's
 * update calls require. */
#define CHUNK (32u << 10)

_Static_assert(SKY_FRAME_ACCEL_BYTES == SKY_AESGCM_KEY_BYTES, "accel key schedule size");

/* One GCM operation, on whichever implementation the key uses. Returns 0
 * or an Mbed TLS error. */
static int gcm_start(sky_frame_key *k, sky_aesgcm_op *op, int decrypt,
		     const unsigned char *nonce, const unsigned char *aad)
{
	if (k->accel) {
		sky_aesgcm_start(k->accel_ks, op, nonce, aad, SKY_FRAME_HEADER_BYTES);
		return 0;
	}
	return mbedtls_gcm_starts(&k->gcm, decrypt ? MBEDTLS_GCM_DECRYPT : MBEDTLS_GCM_ENCRYPT,
				  nonce, SKY_FRAME_SEAL_NONCE_BYTES, aad, SKY_FRAME_HEADER_BYTES);
}

static int gcm_update(sky_frame_key *k, sky_aesgcm_op *op, int decrypt, const unsigned char *in,
		      unsigned char *out, size_t n)
{
	if (k->accel) {
		sky_aesgcm_update(k->accel_ks, op, decrypt, in, out, n);
		return 0;
	}
	return mbedtls_gcm_update(&k->gcm, n, in, out);
}

static int gcm_finish(sky_frame_key *k, sky_aesgcm_op *op, unsigned char *tag)
{
	if (k->accel) {
		sky_aesgcm_finish(k->accel_ks, op, tag);
		return 0;
	}
	return mbedtls_gcm_finish(&k->gcm, tag, SKY_FRAME_SEAL_TAG_BYTES);
}

static void put32le(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

int sky_frame_key_init(sky_frame_key *k, const unsigned char key[SKY_FRAME_KEY_BYTES])
{
	memset(k, 0, sizeof *k);
	mbedtls_gcm_init(&k->gcm);
	if (!key) {
		k->ready = 1;
		return 0;
	}
	sky_sign_rng rng;
	int rc = sky_sign_rng_init(&rng, "sky-frame-nonce", NULL);
	if (rc == 0 && sky_sign_rng_func(&rng, k->prefix, sizeof k->prefix) != 0)
		rc = SKY_ECRYPTO;
	sky_sign_rng_free(&rng);
	if (rc == 0 && mbedtls_gcm_setkey(&k->gcm, MBEDTLS_CIPHER_ID_AES, key, 256) != 0)
		rc = SKY_ECRYPTO;
	if (rc)
		return SKY_ECRYPTO;
	k->accel = sky_aesgcm_init(k->accel_ks, key);
	k->sealed = 1;
	k->ready = 1;
	return 0;
}

void sky_frame_key_free(sky_frame_key *k)
{
	if (!k)
		return;
	/* mbedtls_gcm_free of a zeroed context is safe and wipes it */
	mbedtls_gcm_free(&k->gcm);
	mbedtls_platform_zeroize(k, sizeof *k);
}

const char *sky_frame_key_impl(const sky_frame_key *k)
{
#if defined(__aarch64__)
	return !k || !k->sealed ? "none" : k->accel ? "armv8-aes-pmull" : "mbedtls";
#else
	return !k || !k->sealed ? "none" : k->accel ? "aesni-pclmul" : "mbedtls";
#endif
}

size_t sky_frame_packed_bytes(const sky_frame_key *k, size_t payload_bytes)
{
	return SKY_FRAME_HEADER_BYTES + payload_bytes +
	       (k && k->sealed ? SKY_FRAME_SEAL_OVERHEAD : 0);
}

int sky_frame_pack(sky_frame_key *k, sky_frame_hdr *h, const void *payload, size_t n,
		   unsigned char *out, size_t cap, sky_diag *d)
{
	if (k && !k->ready)
		return sky_diag_set(d, SKY_ESTATE, "frame pack: key not initialised");
	if (!h || !out || (!payload && n))
		return sky_diag_set(d, SKY_EINVAL, "frame pack: NULL argument");
	int sealed = k && k->sealed;
	h->flags = sealed ? SKY_FRAME_FLAG_SEALED : 0;
	h->crc = 0;
	int rc = sky_frame_encode(h, out, cap, d); /* also fills h->payload_bytes */
	if (rc < 0)
		return rc;
	if (h->payload_bytes != n)
		return sky_diag_set(d, SKY_EINVAL,
				    "frame pack: %zu payload bytes, but the shape and dtype need %llu",
				    n, (unsigned long long)h->payload_bytes);
	size_t total = sky_frame_packed_bytes(k, n);
	if (total < n || total > (size_t)INT_MAX)
		return sky_diag_set(d, SKY_ERANGE, "frame pack: %zu payload bytes is too large", n);
	if (cap < total)
		return sky_diag_set(d, SKY_ERANGE, "frame pack: %zu-byte buffer, frame needs %zu", cap,
				    total);
	const unsigned char *src = payload;
	unsigned char *dst = out + SKY_FRAME_HEADER_BYTES;
	uint32_t crc = 0;
	if (!sealed) {
		for (size_t off = 0; off < n; off += CHUNK) {
			size_t m = n - off < CHUNK ? n - off : CHUNK;
			memcpy(dst + off, src + off, m);
			crc = sky_crc32c(crc, dst + off, m);
		}
	} else {
		if (k->counter == UINT32_MAX)
			return sky_diag_set(d, SKY_ERANGE,
					    "frame pack: this key object sealed 2^32-1 frames; init a "
					    "new one (fresh nonce prefix)");
		unsigned char *nonce = dst, *ct = dst + SKY_FRAME_SEAL_NONCE_BYTES;
		uint32_t c = k->counter++;
		memcpy(nonce, k->prefix, 8);
		nonce[8] = (unsigned char)(c >> 24);
		nonce[9] = (unsigned char)(c >> 16);
		nonce[10] = (unsigned char)(c >> 8);
		nonce[11] = (unsigned char)c;
		/* the header (crc still zero) is the associated data */
		sky_aesgcm_op op;
		if (gcm_start(k, &op, 0, nonce, out) != 0)
			return sky_diag_set(d, SKY_ECRYPTO, "frame pack: GCM start failed");
		crc = sky_crc32c(0, nonce, SKY_FRAME_SEAL_NONCE_BYTES);
		for (size_t off = 0; off < n; off += CHUNK) {
			size_t m = n - off < CHUNK ? n - off : CHUNK;
			if (gcm_update(k, &op, 0, src + off, ct + off, m) != 0)
				return sky_diag_set(d, SKY_ECRYPTO, "frame pack: GCM encryption failed");
			crc = sky_crc32c(crc, ct + off, m);
		}
		if (gcm_finish(k, &op, ct + n) != 0)
			return sky_diag_set(d, SKY_ECRYPTO, "frame pack: GCM tag failed");
		crc = sky_crc32c(crc, ct + n, SKY_FRAME_SEAL_TAG_BYTES);
	}
	h->crc = crc;
	put32le(out + SKY_FRAME_OFF_CRC, crc);
	return (int)total;
}

static const char *const k_drop_names[SKY_DROP_N] = {
	[SKY_DROP_NONE] = "none",         [SKY_DROP_FORMAT] = "format",
	[SKY_DROP_TRUNCATED] = "truncated", [SKY_DROP_OVERSIZE] = "oversize",
	[SKY_DROP_JOB] = "job",           [SKY_DROP_EPOCH] = "epoch",
	[SKY_DROP_STEP] = "step",         [SKY_DROP_MICRO] = "micro_batch",
	[SKY_DROP_SHAPE] = "shape",       [SKY_DROP_CHECKSUM] = "checksum",
	[SKY_DROP_AUTH] = "auth",         [SKY_DROP_ROUTE] = "route",
};

const char *sky_frame_drop_name(sky_frame_drop r)
{
	return (unsigned)r < SKY_DROP_N ? k_drop_names[r] : "?";
}

static int drop(sky_frame_drop *why, sky_frame_drop r, int rc)
{
	*why = r;
	return rc;
}

/* The plan's expectations, in the order sky_frameseal.h lists them. */
static int check_want(const sky_frame_expect *w, const sky_frame_hdr *h, sky_frame_drop *why,
		      sky_diag *d)
{
	if (!w->job || strcmp(w->job, h->job) != 0)
		return drop(why, SKY_DROP_JOB,
			    sky_diag_set(d, SKY_ESTATE, "frame: job '%s', expected '%s'", h->job,
					 w->job ? w->job : "(none)"));
	if (h->epoch != w->epoch)
		return drop(why, SKY_DROP_EPOCH,
			    sky_diag_set(d, SKY_ESTATE, "frame: epoch %lld, expected %lld",
					 (long long)h->epoch, (long long)w->epoch));
	if (h->step != w->step)
		return drop(why, SKY_DROP_STEP,
			    sky_diag_set(d, SKY_ESTATE, "frame: step %lld, expected %lld",
					 (long long)h->step, (long long)w->step));
	if (h->micro_batch >= w->micro_batches)
		return drop(why, SKY_DROP_MICRO,
			    sky_diag_set(d, SKY_ESTATE, "frame: micro-batch %u, the step has %u",
					 h->micro_batch, w->micro_batches));
	if (h->direction != w->direction || h->stage != w->stage)
		return drop(why, SKY_DROP_ROUTE,
			    sky_diag_set(d, SKY_ESTATE, "frame: for stage %d %s, this is stage %d %s",
					 h->stage, h->direction ? "bwd" : "fwd", w->stage,
					 w->direction ? "bwd" : "fwd"));
	int same = h->dtype == w->dtype && h->ndim == w->ndim;
	for (int i = 0; same && i < h->ndim; i++)
		same = h->shape[i] == w->shape[i];
	if (!same)
		return drop(why, SKY_DROP_SHAPE,
			    sky_diag_set(d, SKY_ESTATE,
					 "frame: dtype %d shape [%u,%u,%u,%u] (ndim %d), plan says "
					 "dtype %d [%u,%u,%u,%u] (ndim %d)",
					 h->dtype, h->shape[0], h->shape[1], h->shape[2], h->shape[3],
					 h->ndim, w->dtype, w->shape[0], w->shape[1], w->shape[2],
					 w->shape[3], w->ndim));
	return 0;
}

int sky_frame_unpack(sky_frame_key *k, const unsigned char *msg, size_t len,
		     const sky_frame_expect *want, sky_frame_hdr *h, void *dst, size_t dst_cap,
		     sky_frame_drop *why, sky_diag *d)
{
	sky_frame_drop ignored;
	if (!why)
		why = &ignored;
	*why = SKY_DROP_FORMAT;
	if (!h || (!dst && dst_cap) || (k && !k->ready))
		return sky_diag_set(d, SKY_EINVAL, "frame unpack: NULL argument or key not ready");
	if (!msg || len < SKY_FRAME_HEADER_BYTES) {
		memset(h, 0, sizeof *h);
		return drop(why, SKY_DROP_TRUNCATED,
			    sky_diag_set(d, SKY_EFORMAT, "frame: %zu bytes, header needs %d", len,
					 SKY_FRAME_HEADER_BYTES));
	}
	/* the header alone: format, and payload_bytes against shape x dtype */
	int rc = sky_frame_decode(msg, SKY_FRAME_HEADER_BYTES, UINT64_MAX, h, d);
	if (rc)
		return drop(why, SKY_DROP_FORMAT, SKY_EFORMAT);
	uint64_t n = h->payload_bytes, wire = sky_frame_wire_payload(h);
	if (n > dst_cap)
		return drop(why, SKY_DROP_OVERSIZE,
			    sky_diag_set(d, SKY_ERANGE,
					 "frame: declares %llu payload bytes, the buffer holds %zu",
					 (unsigned long long)n, dst_cap));
	if (len - SKY_FRAME_HEADER_BYTES < wire)
		return drop(why, SKY_DROP_TRUNCATED,
			    sky_diag_set(d, SKY_EFORMAT,
					 "frame: %zu bytes after the header, it declares %llu",
					 len - SKY_FRAME_HEADER_BYTES, (unsigned long long)wire));
	if (len - SKY_FRAME_HEADER_BYTES > wire)
		return drop(why, SKY_DROP_FORMAT,
			    sky_diag_set(d, SKY_EFORMAT,
					 "frame: %zu bytes after the header, it declares only %llu",
					 len - SKY_FRAME_HEADER_BYTES, (unsigned long long)wire));
	if (want && (rc = check_want(want, h, why, d)))
		return rc;
	int sealed = (h->flags & SKY_FRAME_FLAG_SEALED) != 0, keyed = k && k->sealed;
	if (sealed != keyed)
		return drop(why, SKY_DROP_AUTH,
			    sky_diag_set(d, SKY_EAUTH,
					 sealed ? "frame: sealed, and this receiver has no job key"
						: "frame: plaintext, but this job's frames must be sealed "
						  "(not from a member of the job?)"));

	const unsigned char *src = msg + SKY_FRAME_HEADER_BYTES;
	unsigned char *out = dst;
	uint32_t crc = 0;
	if (!sealed) {
		for (uint64_t off = 0; off < n; off += CHUNK) {
			size_t m = n - off < CHUNK ? (size_t)(n - off) : CHUNK;
			crc = sky_crc32c(crc, src + off, m);
			memcpy(out + off, src + off, m);
		}
		if (crc != h->crc)
			return drop(why, SKY_DROP_CHECKSUM,
				    sky_diag_set(d, SKY_EIO,
						 "frame: payload CRC32C 0x%08x, header says 0x%08x", crc,
						 h->crc));
		*why = SKY_DROP_NONE;
		return 0;
	}

	unsigned char aad[SKY_FRAME_HEADER_BYTES], tag[SKY_FRAME_SEAL_TAG_BYTES];
	memcpy(aad, msg, sizeof aad);
	memset(aad + SKY_FRAME_OFF_CRC, 0, 4);
	const unsigned char *nonce = src, *ct = src + SKY_FRAME_SEAL_NONCE_BYTES, *mtag = ct + n;
	sky_aesgcm_op op;
	if (gcm_start(k, &op, 1, nonce, aad) != 0)
		return drop(why, SKY_DROP_AUTH, sky_diag_set(d, SKY_EAUTH, "frame: GCM start failed"));
	crc = sky_crc32c(0, nonce, SKY_FRAME_SEAL_NONCE_BYTES);
	for (uint64_t off = 0; off < n; off += CHUNK) {
		size_t m = n - off < CHUNK ? (size_t)(n - off) : CHUNK;
		crc = sky_crc32c(crc, ct + off, m);
		if (gcm_update(k, &op, 1, ct + off, out + off, m) != 0) {
			rc = sky_diag_set(d, SKY_EAUTH, "frame: GCM decryption failed");
			goto refuse_auth;
		}
	}
	crc = sky_crc32c(crc, mtag, SKY_FRAME_SEAL_TAG_BYTES);
	if (gcm_finish(k, &op, tag) != 0) {
		rc = sky_diag_set(d, SKY_EAUTH, "frame: GCM tag failed");
		goto refuse_auth;
	}
	if (crc != h->crc) {
		/* corrupted on the way: a bad checksum says more than a bad tag */
		mbedtls_platform_zeroize(out, (size_t)n);
		return drop(why, SKY_DROP_CHECKSUM,
			    sky_diag_set(d, SKY_EIO, "frame: payload CRC32C 0x%08x, header says 0x%08x",
					 crc, h->crc));
	}
	unsigned char diff = 0; /* constant time: no early exit on the first bad byte */
	for (size_t i = 0; i < sizeof tag; i++)
		diff |= tag[i] ^ mtag[i];
	if (diff) {
		rc = sky_diag_set(d, SKY_EAUTH,
				  "frame: GCM tag does not verify (forged, edited, or sealed under "
				  "another key)");
		goto refuse_auth;
	}
	*why = SKY_DROP_NONE;
	return 0;
refuse_auth:
	mbedtls_platform_zeroize(out, (size_t)n);
	return drop(why, SKY_DROP_AUTH, SKY_EAUTH);
}
