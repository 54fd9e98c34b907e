/* Per-job keys: a job's frames are sealed under one random 32-byte key
 * (sky_frameseal.h); the planner puts it in the signed plan wrapped for
 * each board's certificate key, so the broker that relays the plan cannot
 * read it and a board can open only its own copy.
 *
 * Wrapping (ECIES-style, all P-256 / SHA-256 / AES-256-GCM):
 *   1. an ephemeral key pair (e, E = e*G) for this one wrap;
 *   2. z = x-coordinate of e * B, B the board's certificate public key;
 *   3. w = HKDF-SHA256(salt = "sky/v1/jobkey", ikm = z, info = A) (RFC 5869),
 *      32 bytes, where A (below) names the job, the board, the plan epoch,
 *      E and B's key id, so a blob made for one job/board/epoch derives
 *      another key anywhere else;
 *   4. AES-256-GCM under w of the 32 job-key bytes, nonce 12 zero bytes
 *      (w is used for this one encryption only: E is fresh each time),
 *      associated data A.
 *
 * Blob (then base64, RFC 4648 with padding, for the plan JSON):
 *   off      size  field
 *     0        1   version 1
 *     1       65   E, uncompressed SEC1 point (0x04 | X | Y)
 *    66        8   key id of B: the first 8 bytes of SHA-256 of B's uncompressed point
 *    74        8   plan epoch, u64 little-endian
 *    82        1   J, length of the job id (1..64)
 *    83        J   job id
 *    83+J      1   K, length of the board id (1..64)
 *    84+J      K   board id
 *    84+J+K   32   wrapped key (ciphertext)
 *   116+J+K   16   GCM tag
 * A = bytes [0, 84+J+K). The key id, job, board and epoch travel in clear
 * (they are in the plan anyway) so that a refusal can say which one is
 * wrong; they are also bound by the HKDF info and the tag, so editing them
 * in the blob does not help.
 *
 * Thread safety: no state of its own; a sky_sign_rng is used by one thread
 * at a time. */
#ifndef SKY_JOBKEY_H
#define SKY_JOBKEY_H

#include "sky_err.h"
#include "sky_sign.h"

#include <mbedtls/pk.h>
#include <stddef.h>
#include <stdint.h>

#define SKY_JOBKEY_BYTES 32
#define SKY_JOBKEY_VERSION 1
/* Largest blob: 84 + 64 + 64 + 32 + 16 = 260 bytes, 348 base64 characters,
 * 349 bytes with the terminating NUL; an output buffer of this size always
 * suffices. */
#define SKY_JOBKEY_B64_MAX 349

/* Why an unwrap was refused. */
typedef enum {
	SKY_JOBKEY_OK,
	SKY_JOBKEY_FORMAT,    /* not base64, wrong length or version, bad point, bad ids */
	SKY_JOBKEY_WRONG_KEY, /* wrapped for another board key (key id differs) */
	SKY_JOBKEY_JOB,       /* wrapped for another job */
	SKY_JOBKEY_BOARD,     /* wrapped for another board id */
	SKY_JOBKEY_EPOCH,     /* wrapped for another plan epoch */
	SKY_JOBKEY_TAMPERED,  /* the tag does not verify: blob edited, or forged */
	SKY_JOBKEY_N
} sky_jobkey_refusal;

/* Short name of r ("wrong_key", "tampered", ...); "?" if out of range. */
const char *sky_jobkey_refusal_name(sky_jobkey_refusal r);

/* Draws a new random job key. Returns 0 or SKY_ECRYPTO. */
int sky_jobkey_generate(sky_sign_rng *rng, unsigned char key[SKY_JOBKEY_BYTES], sky_diag *d);

/* Planner side: wraps key for the board whose certificate public key is
 * board_pub (an EC P-256 key, e.g. &crt.pk), bound to job, board (its id,
 * the certificate's CN) and epoch >= 0. Writes the base64 blob,
 * NUL-terminated, into out (SKY_JOBKEY_B64_MAX bytes always suffice).
 * Returns its length (> 0), or with d set: SKY_EINVAL (NULL, not a P-256
 * key, a job or board id that is not 1..64 legal characters, negative
 * epoch), SKY_ERANGE (cap too small), SKY_ECRYPTO. */
int sky_jobkey_wrap(const mbedtls_pk_context *board_pub, const unsigned char key[SKY_JOBKEY_BYTES],
		    const char *job, const char *board, int64_t epoch, sky_sign_rng *rng, char *out,
		    size_t cap, sky_diag *d);

/* Board side: opens blob[0..len) with the board's private key (board.key,
 * sky_sign_load_key), after checking it was made for this key and for
 * exactly this job, board and epoch. On success writes the 32 key bytes
 * and returns 0. Otherwise key is untouched and *why (may be NULL) and d
 * say why: SKY_EFORMAT (FORMAT), SKY_EAUTH (WRONG_KEY, JOB, BOARD, EPOCH,
 * TAMPERED), SKY_EINVAL (NULL, or board_key is not a P-256 private key;
 * why FORMAT), SKY_ECRYPTO (the ECDH or KDF failed; why FORMAT). */
int sky_jobkey_unwrap(const mbedtls_pk_context *board_key, const char *blob, size_t len,
		      const char *job, const char *board, int64_t epoch,
		      unsigned char key[SKY_JOBKEY_BYTES], sky_jobkey_refusal *why, sky_diag *d);

#endif
