/* A board's identity: its EC P-256 key pair, the certificate the fleet CA
 * issued for it (CN = board id), the CA certificate it trusts, and the
 * planner certificate whose signature it requires on plans.
 *
 * State directory layout (<state> is skyd's --state dir, one per board):
 *
 *   <state>/board.key    PEM EC private key, mode 0600, made on the board,
 *                        never leaves it
 *   <state>/board.crt    PEM certificate from the CA (CN = board id), 0644
 *   <state>/ca.crt       PEM fleet CA certificate, 0644 (the trust anchor:
 *                        installed from the claim bundle before enrollment,
 *                        see sky_identity_trust_ca)
 *   <state>/planner.crt  PEM planner certificate (CN "sky-planner", signed
 *                        by the CA), 0644; verifies plan signatures
 *
 * Paho's TLS options map directly: trustStore = ca.crt, keyStore =
 * board.crt, privateKey = board.key (sky_identity_path builds the paths).
 *
 * Enrollment (the claim bundle is <pki>/claim/{ca.crt,claim.crt,claim.key},
 * made by `sky pki init`, see planner/sky_ca.h):
 *   1. sky_identity_trust_ca(state, "<claim>/ca.crt")
 *   2. sky_identity_enroll_request(state, id, token, rng, req, ...) makes
 *      board.key if absent (0600) and a CSR with CN = id, and returns the
 *      request JSON to publish on sky/v1/enroll/<nonce>/csr, connected as
 *      the claim identity (claim.crt/claim.key).
 *   3. the planner answers on sky/v1/enroll/<nonce>/cert;
 *      sky_identity_enroll_accept(state, id, reply, len) checks the reply
 *      against ca.crt and board.key and writes board.crt and planner.crt.
 *   4. sky_identity_load(state) on every later start.
 *
 * The request and reply messages are defined in runtime/wire/sky_enroll.h.
 *
 * Board ids: 1..SKY_ID_MAX characters of [A-Za-z0-9_-]. No '#', '+' or '/'
 * (MQTT wildcards and level separators: with a pattern ACL using %u, such
 * an id would let a board reach other boards' topics), no '.', no control
 * characters, not empty, and not one of the fleet's fixed identities
 * ("sky-planner", "sky-claim"). The CA applies the same rule to CSRs. */
#ifndef SKY_IDENTITY_H
#define SKY_IDENTITY_H

#include "sky_enroll.h"
#include "sky_err.h"
#include "sky_sign.h"

#include <mbedtls/pk.h>
#include <mbedtls/x509_crt.h>
#include <stddef.h>

#define SKY_ID_MAX 64

#define SKY_IDENTITY_KEY_FILE "board.key"
#define SKY_IDENTITY_CERT_FILE "board.crt"
#define SKY_IDENTITY_CA_FILE "ca.crt"
#define SKY_IDENTITY_PLANNER_FILE "planner.crt"

/* Identities the fleet reserves (their CNs); no board may take them. */
#define SKY_IDENTITY_PLANNER_CN "sky-planner"
#define SKY_IDENTITY_CLAIM_CN "sky-claim"

/* Returns 1 if id is a valid board id (see the top comment), else 0.
 * Same rule as sky_enroll_check_id(), which gives the reason. */
int sky_identity_valid_id(const char *id);

/* Writes "<dir>/<file>" into buf. Returns 0 or SKY_ERANGE. */
int sky_identity_path(const char *dir, const char *file, char *buf, size_t cap);

/* Creates dir (0700) if needed and generates a new EC P-256 key pair into
 * <dir>/board.key (PEM, mode 0600), unless that file already exists (then
 * it is kept: re-enrolling reuses the key). Returns 0, SKY_EIO, SKY_ECRYPTO. */
int sky_identity_ensure_key(const char *dir, sky_sign_rng *rng, sky_diag *d);

/* Makes a PEM CSR for key (CN = id, signed with key, SHA-256) into out.
 * Returns its length (> 0, NUL-terminated) or SKY_EINVAL (bad id),
 * SKY_ERANGE, SKY_ECRYPTO. */
int sky_identity_make_csr(mbedtls_pk_context *key, const char *id, sky_sign_rng *rng, char *out,
			  size_t cap, sky_diag *d);

/* Copies the CA certificate at ca_path to <dir>/ca.crt (0644), after
 * checking it parses as a CA certificate. Returns 0, SKY_ENOTFOUND,
 * SKY_ECRYPTO, SKY_EIO. */
int sky_identity_trust_ca(const char *dir, const char *ca_path, sky_diag *d);

/* Step 2 above: ensures <dir>/board.key, makes the CSR and writes the
 * request JSON (NUL-terminated) into out. token must be SKY_ENROLL_TOKEN_LEN hex
 * characters. Returns the length or SKY_EINVAL / SKY_ERANGE / SKY_ECRYPTO /
 * SKY_EIO. */
int sky_identity_enroll_request(const char *dir, const char *id, const char *token,
				sky_sign_rng *rng, char *out, size_t cap, sky_diag *d);

/* Step 3 above: parses the reply (at most SKY_ENROLL_REPLY_MAX bytes, see
 * sky_enroll_reply_decode), and
 * requires: no "error" member (else SKY_EAUTH with the planner's reason in
 * d), "id" equal to id, "ca" identical to <dir>/ca.crt, "cert" signed by
 * that CA with CN = id and the public key of <dir>/board.key, "planner"
 * signed by that CA with CN "sky-planner". Then writes board.crt and
 * planner.crt (0644). Returns 0 or SKY_EFORMAT / SKY_EAUTH / SKY_ERANGE /
 * SKY_ENOTFOUND / SKY_EIO. */
int sky_identity_enroll_accept(const char *dir, const char *id, const char *reply, size_t len,
			       sky_diag *d);

/* Returns 1 if <dir> holds board.key, board.crt, ca.crt and planner.crt. */
int sky_identity_enrolled(const char *dir);

/* A loaded identity. Fields are read-only for callers. */
typedef struct sky_identity {
	char id[SKY_ID_MAX + 1]; /* the CN of board.crt */
	mbedtls_pk_context key;  /* board.key */
	mbedtls_x509_crt cert;   /* board.crt */
	mbedtls_x509_crt ca;     /* ca.crt */
	mbedtls_x509_crt planner; /* planner.crt: pass to sky_verify_envelope */
	int loaded;
} sky_identity;

/* Zeroes it; cannot fail. */
void sky_identity_init(sky_identity *idn);
/* Loads all four files from dir and checks: key mode 0600 or stricter,
 * board.crt and planner.crt verify against ca.crt, board.crt's key matches
 * board.key, board.crt's CN is a valid id, planner.crt's CN is
 * "sky-planner". Returns 0 or SKY_ENOTFOUND / SKY_EAUTH / SKY_ECRYPTO with d
 * naming the file. */
int sky_identity_load(sky_identity *idn, const char *dir, sky_diag *d);
/* NULL-safe; may be called twice. */
void sky_identity_free(sky_identity *idn);

#endif
