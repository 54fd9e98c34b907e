/* Signed envelopes: how a plan travels from the planner to the boards so
 * that a board runs only what its planner signed.
 *
 * Shared by both sides (runtime/wire/): the planner signs with its key
 * (planner.key, see planner/sky_ca.h), a board verifies with the planner
 * certificate it received at enrollment (<state>/planner.crt, see
 * runtime/sky_identity.h).
 *
 * Wire format (one JSON object, UTF-8, readable with mosquitto_sub):
 *
 *   {"v":1,"alg":"ES256","signer":"sky-planner",
 *    "payload":"{\"job\":\"j1\",\"epoch\":7,...}",
 *    "sig":"MEUCIQ...=="}
 *
 *   v        format version, must be 1.
 *   alg      "ES256": ECDSA on curve P-256 over SHA-256.
 *   signer   the common name (CN) of the signer's certificate; a verifier
 *            refuses an envelope whose signer differs from the CN of the
 *            certificate it trusts.
 *   payload  the signed document (a plan's JSON text) as a JSON string.
 *            The signature covers exactly the bytes of this string after
 *            JSON unescaping, i.e. the bytes the verifier hands back. The
 *            payload may not contain a NUL byte.
 *   sig      base64 (RFC 4648, with padding) of the DER-encoded ECDSA
 *            signature (SEQUENCE { r INTEGER, s INTEGER }, at most 72 bytes)
 *            over SHA-256(payload bytes).
 *
 * Members other than these five are refused (so nothing unsigned can ride
 * along looking authoritative), as are duplicate members.
 *
 * Replay: the envelope itself carries no counter. The epoch (and the job
 * id) live INSIDE the signed payload; the board parses the payload after
 * verification and refuses an epoch not newer than the last plan it ran.
 * An old envelope replayed verbatim therefore verifies but carries an old
 * epoch: checking that is the caller's job (runtime agent).
 *
 * Bounds: the payload is at most SKY_SIGN_MAX_PAYLOAD bytes and the whole
 * envelope at most SKY_SIGN_MAX_ENVELOPE bytes; larger input is refused
 * before it is parsed.
 *
 * Randomness: ECDSA and key generation need a cryptographic RNG. Sky uses
 * Mbed TLS's CTR_DRBG seeded from its entropy collector (the OS's
 * getrandom/urandom); sky_sign_rng wraps the pair so callers pass one
 * object. Signatures are deterministic ECDSA (RFC 6979) where Mbed TLS
 * provides it; the RNG then only blinds the computation.
 *
 * Thread safety: a sky_signer or sky_sign_rng is used by one thread at a
 * time. sky_verify_envelope() keeps no state of its own and may run on any
 * thread (its JSON goes through the sky_json pool, which is thread-safe;
 * Mbed TLS's bignums do use the heap, thousands of small allocations per
 * verification); it only reads signer_cert (Mbed TLS 2.28 uses static precomputed
 * tables for P-256, so verification does not write to the key). */
#ifndef SKY_SIGN_H
#define SKY_SIGN_H

#include "sky_err.h"

#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/pk.h>
#include <mbedtls/x509_crt.h>
#include <stddef.h>

#define SKY_SIGN_VERSION 1
#define SKY_SIGN_ALG "ES256"
/* Largest signed payload (a plan for a large fleet is a few KiB). */
#define SKY_SIGN_MAX_PAYLOAD (48u << 10)
/* Largest envelope: fits SKY_PLAN_MAX_BYTES (sky_topics.h). Escaping a
 * JSON payload grows it by ~10% in practice (each '"' becomes '\"'); a
 * payload whose envelope does not fit is refused by the signer. */
#define SKY_SIGN_MAX_ENVELOPE (64u << 10)
/* A certificate CN (board ids, "sky-planner") is at most this long. */
#define SKY_SIGN_NAME_MAX 64

/* ---- randomness ------------------------------------------------------------ */

typedef struct sky_sign_rng {
	mbedtls_entropy_context entropy;
	mbedtls_ctr_drbg_context drbg;
	int ready; /* 1 after a successful sky_sign_rng_init */
} sky_sign_rng;

/* Seeds a CTR_DRBG from the system entropy; `personal` (may be NULL) is
 * mixed in to separate users (e.g. "skyd", "sky-ca"). Returns 0 or
 * SKY_ECRYPTO (no entropy). Free with sky_sign_rng_free even on failure. */
int sky_sign_rng_init(sky_sign_rng *r, const char *personal, sky_diag *d);
/* NULL-safe; may be called twice. */
void sky_sign_rng_free(sky_sign_rng *r);
/* The f_rng callback Mbed TLS functions take, with p_rng = the sky_sign_rng.
 * Returns 0 or an Mbed TLS error. */
int sky_sign_rng_func(void *p_rng, unsigned char *out, size_t len);

/* ---- PEM loading (both sides) -------------------------------------------- */

/* Parses one or more PEM certificates from file path into crt (which must
 * have been mbedtls_x509_crt_init'ed). Returns 0, SKY_ENOTFOUND (no file),
 * SKY_ERANGE (file over 64 KiB) or SKY_ECRYPTO (not a certificate), with d
 * naming the path. */
int sky_sign_load_cert(mbedtls_x509_crt *crt, const char *path, sky_diag *d);
/* Parses an unencrypted PEM private key from path into pk (initialised by
 * mbedtls_pk_init). Returns 0, SKY_ENOTFOUND, SKY_ECRYPTO (not a key), or
 * SKY_EAUTH if the file is readable by group or others (a key must be
 * 0600 or stricter), with d naming the path. */
int sky_sign_load_key(mbedtls_pk_context *pk, const char *path, sky_diag *d);
/* Copies the CN of crt's subject into buf (cap bytes). Returns 0,
 * SKY_ENOTFOUND (no CN) or SKY_ERANGE (too long). */
int sky_sign_cert_cn(const mbedtls_x509_crt *crt, char *buf, size_t cap);

/* ---- keys (both sides) ------------------------------------------------------ */

/* Makes pk (initialised by mbedtls_pk_init, not set up) a new EC P-256 key
 * pair. Returns 0 or SKY_ECRYPTO. */
int sky_sign_gen_key(mbedtls_pk_context *pk, sky_sign_rng *rng, sky_diag *d);
/* Writes pk's private key as PEM to path with mode 0600 (atomically; the
 * buffer is wiped after). Returns 0 or SKY_EIO / SKY_ECRYPTO. */
int sky_sign_write_key(mbedtls_pk_context *pk, const char *path, sky_diag *d);

/* ---- signing (planner) ----------------------------------------------------- */

/* A loaded signing identity: the private key, the CN of its certificate
 * (goes into "signer") and an RNG. */
typedef struct sky_signer {
	mbedtls_pk_context key;
	char name[SKY_SIGN_NAME_MAX + 1];
	sky_sign_rng rng;
	int ready;
} sky_signer;

/* Zeroes s; cannot fail. */
void sky_signer_init(sky_signer *s);
/* Loads key_path (PEM EC P-256 key, 0600) and cert_path (its certificate,
 * whose CN becomes the signer name) and checks that they belong together.
 * Returns 0, or SKY_ENOTFOUND / SKY_ECRYPTO / SKY_EAUTH with d set.
 * planner/sky_ca.h has sky_ca_load_signer() for a PKI directory. */
int sky_signer_load(sky_signer *s, const char *key_path, const char *cert_path, sky_diag *d);
/* NULL-safe; may be called twice. */
void sky_signer_free(sky_signer *s);

/* Signs payload[0..len) and writes the envelope (NUL-terminated) into out.
 * Returns the envelope's length in bytes (> 0, excluding the NUL), or
 * SKY_EINVAL (payload empty, holds a NUL, or over SKY_SIGN_MAX_PAYLOAD),
 * SKY_ERANGE (out too small or over SKY_SIGN_MAX_ENVELOPE), SKY_ESTATE
 * (signer not loaded), SKY_ECRYPTO (signing failed), SKY_ENOMEM (JSON pool). */
int sky_sign_envelope(sky_signer *s, const char *payload, size_t len, char *out, size_t cap,
		      sky_diag *d);

/* ---- verification (board) -------------------------------------------------- */

/* Checks that msg[0..len) is a well-formed envelope signed by the key of
 * signer_cert, whose CN equals the envelope's "signer". On success copies
 * the payload into payload_buf (payload_cap bytes; NUL-terminated, so it
 * needs payload length + 1), sets *payload_len and returns 0. Fails with
 * d saying why (the board logs it and keeps its last good plan):
 *   SKY_ERANGE   msg larger than SKY_SIGN_MAX_ENVELOPE (refused unparsed),
 *                or payload_buf too small;
 *   SKY_EFORMAT  not JSON, truncated, a missing/extra/duplicate member,
 *                wrong version or algorithm, bad base64, empty payload;
 *   SKY_EAUTH    unsigned (empty sig), signer name mismatch, or a
 *                signature that does not verify (forged, tampered, or
 *                signed by another key);
 *   SKY_EINVAL   NULL arguments.
 * Nothing is written to payload_buf unless the signature verified. */
int sky_verify_envelope(const mbedtls_x509_crt *signer_cert, const char *msg, size_t len,
			char *payload_buf, size_t payload_cap, size_t *payload_len, sky_diag *d);

/* ---- base64 helpers (exposed for tests and the fuzz harness) --------------- */

/* Standard base64 with padding. Return the output length (>= 0, output
 * NUL-terminated for encode) or SKY_ERANGE (cap too small) / SKY_EFORMAT
 * (decode: not canonical base64). */
int sky_b64_encode(const unsigned char *in, size_t len, char *out, size_t cap);
int sky_b64_decode(const char *in, size_t len, unsigned char *out, size_t cap);

#endif
