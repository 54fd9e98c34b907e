/* Whole tensor frames: pack (header, payload, checksum, optional AES-GCM
 * seal) and unpack (every check a receiver makes before it uses a frame).
 * The header layout is in sky_frame.h; the per-job key that seals frames
 * reaches each board wrapped for its certificate key (sky_jobkey.h).
 *
 * Sealing (flags bit 0), AES-256-GCM (NIST SP 800-38D) under the job key:
 *   wire payload = nonce (12) | ciphertext (payload_bytes) | tag (16)
 *   associated data = the 128 header bytes with the crc32c field (120..123)
 *                     zeroed: every other header field (job, epoch, step,
 *                     stage, direction, micro-batch, shape, flags) is
 *                     authenticated, so an edited header fails the tag.
 *                     The CRC is left out because it is computed over the
 *                     tag; a CRC edit fails the checksum instead.
 *   crc32c         = CRC32C of nonce | ciphertext | tag, exactly as sent.
 *
 * Nonce scheme: nonce = prefix (8 bytes) | counter (4 bytes, big-endian).
 * The prefix is drawn from the OS's entropy (CTR_DRBG) each time a key
 * object is initialised; the counter counts the frames that object sealed
 * and never wraps (the 2^32-th seal fails with SKY_ERANGE: init a new key
 * object). Within one object the counter never repeats; across objects
 * (boards, threads, restarts of a board, re-sends of a micro-batch, which
 * take the next counter value) the 64-bit prefixes are independent
 * uniform values, so with m key objects ever made under one job key the
 * chance that any two share a prefix is below m^2 / 2^65 (2.7e-16 for a
 * thousand). A deterministic nonce from (epoch, step, stage, micro-batch)
 * was rejected: a step recomputed after a fault may carry different bytes
 * under the same coordinates, which would reuse a nonce.
 *
 * A frame from a board outside the job (no key) can neither be read (the
 * payload is ciphertext) nor injected (its tag cannot be made without the
 * key; a plaintext frame on a sealed job is refused). The same micro-batch
 * may arrive twice (MQTT QoS 1 re-delivery): both copies unpack; the
 * caller dedups.
 *
 * Implementations: on x86 with AES-NI and PCLMULQDQ, and on Arm with the
 * Crypto Extension, GCM runs on those instructions
 * (runtime/wire/aesgcm_internal.h: eight blocks in flight,
 * four GHASH blocks per reduction), byte-identical to Mbed TLS's GCM, which
 * is the reference and the path everywhere else (SKY_CPU_DISABLE=aesgcm
 * forces it). sky_frame_key_impl() says which one a key uses.
 *
 * Thread safety: a sky_frame_key is used by one thread at a time (its GCM
 * context holds per-operation state, its counter is not atomic). A stage
 * that sends on one thread and receives on another keeps one key object
 * for each, both initialised from the same 32 key bytes. */
#ifndef SKY_FRAMESEAL_H
#define SKY_FRAMESEAL_H

#include "sky_err.h"
#include "sky_frame.h"

#include <mbedtls/gcm.h>
#include <stddef.h>
#include <stdint.h>

#define SKY_FRAME_KEY_BYTES 32 /* AES-256 */
/* Round keys and powers of H for the AES-NI/PCLMULQDQ path */
#define SKY_FRAME_ACCEL_BYTES 304

typedef struct sky_frame_key {
	mbedtls_gcm_context gcm; /* AES-256 key schedule and GHASH tables (sealed only) */
	_Alignas(16) unsigned char accel_ks[SKY_FRAME_ACCEL_BYTES]; /* when accel */
	unsigned char prefix[8]; /* nonce prefix, random per key object */
	uint32_t counter;        /* frames sealed by this object so far */
	int sealed;              /* 1: packs seal, unpack requires sealed frames */
	int accel;               /* 1: GCM on the CPU's AES and carry-less multiply (same
				  * bytes as Mbed TLS, ~10x faster); 0: Mbed TLS's GCM */
	int ready;               /* 1 after a successful init */
} sky_frame_key;

/* key NULL: plaintext frames (pack writes plain payloads, unpack refuses
 * sealed ones). Otherwise AES-256-GCM under the 32 key bytes, which are
 * copied into the key schedule (the caller may wipe its copy). Returns 0,
 * or SKY_ECRYPTO (no entropy for the nonce prefix, or the cipher refused
 * the key); k is then unusable (free it anyway). */
int sky_frame_key_init(sky_frame_key *k, const unsigned char key[SKY_FRAME_KEY_BYTES]);
/* Wipes the key schedule. NULL-safe; may be called twice. */
void sky_frame_key_free(sky_frame_key *k);
/* Which GCM implementation k seals with: "aesni-pclmul", "armv8-aes-pmull",
 * "mbedtls", or "none" for a plaintext key (static string). */
const char *sky_frame_key_impl(const sky_frame_key *k);

/* Bytes a packed frame takes: header + payload (+ nonce and tag when k is
 * sealing). k NULL means plaintext. */
size_t sky_frame_packed_bytes(const sky_frame_key *k, size_t payload_bytes);

/* Writes header + payload into out: h gives direction, dtype, ndim, stage,
 * micro_batch, shape, job, epoch and step; pack sets h->flags,
 * h->payload_bytes and h->crc. The payload (n bytes, which must equal
 * shape x dtype size) goes into out in one pass: copied when plain,
 * encrypted straight from payload into out when sealed, its CRC computed
 * on the way. payload and out must not overlap. k NULL means plaintext.
 * Returns the total bytes written (sky_frame_packed_bytes), or with d set:
 *   SKY_EINVAL  a header field out of range, or n != shape x dtype size;
 *   SKY_ERANGE  cap smaller than the frame, or this key object has sealed
 *               2^32 - 1 frames (init a new one);
 *   SKY_ESTATE  k not initialised;
 *   SKY_ECRYPTO the cipher failed. */
int sky_frame_pack(sky_frame_key *k, sky_frame_hdr *h, const void *payload, size_t n,
		   unsigned char *out, size_t cap, sky_diag *d);

/* What a receiver expects of the next frame on a topic, from its plan. */
typedef struct sky_frame_expect {
	const char *job;
	int64_t epoch, step;     /* exact */
	int direction, stage;    /* exact: SKY_FRAME_FWD/BWD, this receiving stage */
	uint32_t micro_batches;  /* micro_batch must be below this */
	int dtype, ndim;         /* exact */
	uint32_t shape[4];       /* exact for dims below ndim */
} sky_frame_expect;

/* Why a frame was dropped: one counter per reason (sky fleet status). */
typedef enum {
	SKY_DROP_NONE,      /* accepted */
	SKY_DROP_FORMAT,    /* not a v2 frame: magic, version (v1 named), fields, longer than declared */
	SKY_DROP_TRUNCATED, /* shorter than its header or its declared payload */
	SKY_DROP_OVERSIZE,  /* declares more payload than the receiver's buffer */
	SKY_DROP_JOB,       /* another job */
	SKY_DROP_EPOCH,     /* another plan epoch */
	SKY_DROP_STEP,      /* another step */
	SKY_DROP_MICRO,     /* micro-batch index >= micro_batches */
	SKY_DROP_SHAPE,     /* dtype, ndim or shape differ from the plan */
	SKY_DROP_CHECKSUM,  /* CRC32C of the payload does not match the header */
	SKY_DROP_AUTH,      /* GCM tag fails (forged, edited, other key), sealed-ness differs
			     * from the job's (plaintext frame on a sealed job, or no key) */
	SKY_DROP_ROUTE,     /* addressed to another stage or direction */
	SKY_DROP_N
} sky_frame_drop;

/* Short name of r ("checksum", "auth", ...); "?" if out of range. */
const char *sky_frame_drop_name(sky_frame_drop r);

/* Checks msg[0..len) and, if every check passes, writes its payload
 * (payload_bytes, decrypted when sealed) into dst and fills h. The checks,
 * in this order (the first failure is the reason):
 *   header format (FORMAT; shorter than 128 bytes: TRUNCATED),
 *   declared payload over dst_cap (OVERSIZE),
 *   message length against the header (TRUNCATED if short, FORMAT if long),
 *   want: job, epoch, step, micro-batch < micro_batches, direction and
 *   stage (ROUTE), dtype/ndim/shape (SHAPE),
 *   sealed flag against k (AUTH),
 *   CRC32C of the wire payload (CHECKSUM),
 *   GCM tag with the header as associated data (AUTH).
 * want NULL skips the plan checks (tools and fuzzing only: a stage always
 * passes its plan). k NULL means plaintext. The payload is read once: CRC
 * and copy (or CRC and decryption) run together chunk by chunk, so after a
 * CHECKSUM or AUTH refusal dst may hold partial bytes that must not be used
 * (after AUTH it is zeroed); after any earlier refusal dst is untouched.
 * msg and dst must not overlap.
 * Returns 0 with *why = SKY_DROP_NONE, or a refusal with *why set and d
 * naming the field and both values:
 *   SKY_EFORMAT  FORMAT, TRUNCATED;  SKY_ERANGE  OVERSIZE;
 *   SKY_ESTATE   JOB, EPOCH, STEP, MICRO, ROUTE, SHAPE;
 *   SKY_EIO      CHECKSUM;  SKY_EAUTH  AUTH;
 *   SKY_EINVAL   NULL h or why, or dst NULL with dst_cap > 0 (why FORMAT).
 * h holds the decoded header whenever the header itself was well formed. */
int sky_frame_unpack(sky_frame_key *k, const unsigned char *msg, size_t len,
		     const sky_frame_expect *want, sky_frame_hdr *h, void *dst, size_t dst_cap,
		     sky_frame_drop *why, sky_diag *d);

#endif
