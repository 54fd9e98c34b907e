/* The fleet's certificate authority (planner side): skyplan answers
 * enrollment requests with it and signs plans with the planner key it
 * holds. `sky pki init` makes its directory (sky_pki.h); the files in it
 * are listed in sky_pki_layout.h.
 *
 * Board certificates: CN = board id, validity 1 year from issue (backdated
 * 5 minutes for clock skew), 128-bit random serial, basicConstraints
 * CA:FALSE, keyUsage digitalSignature, signed by the CA with ECDSA-SHA256.
 *
 * Token rules: a token is a one-time secret of SKY_ENROLL_TOKEN_LEN hex
 * characters, valid for its TTL; it may be bound to one board id at mint
 * time. An unbound token cannot claim an id that already has a
 * certificate (so a leaked token cannot impersonate an enrolled board);
 * a token bound to that id can (re-enrollment after a lost key). */
#ifndef SKY_CA_H
#define SKY_CA_H

#include "sky_enroll.h"
#include "sky_err.h"
#include "sky_pki_layout.h" /* the files it reads and writes (service.c names them too) */
#include "sky_sign.h"

#include <mbedtls/pk.h>
#include <mbedtls/x509_crt.h>
#include <stddef.h>
#include <stdint.h>

#define SKY_CA_BOARD_DAYS 365
#define SKY_CA_DEFAULT_TOKEN_TTL 3600 /* seconds */
#define SKY_CA_MAX_TOKEN_TTL (30 * 86400)

/* Mints a one-time claim token valid for ttl_s seconds (1..SKY_CA_MAX_TOKEN_TTL),
 * optionally bound to board id bind_id (NULL: any id). Writes the token
 * (SKY_ENROLL_TOKEN_LEN hex characters + NUL) into out; stores only its
 * SHA-256. Safe to call while skyplan runs (one file per token). Returns 0
 * or SKY_EINVAL / SKY_EIO / SKY_ECRYPTO. */
int sky_ca_token_new(const char *dir, long ttl_s, const char *bind_id, sky_sign_rng *rng,
		     char out[SKY_ENROLL_TOKEN_LEN + 1], sky_diag *d);
/* Checks token for board id at time now (Unix seconds) and, if consume is
 * 1, uses it up (deletes its file; of two racing consumers exactly one
 * wins). Returns 0, or SKY_EAUTH with d saying why: unknown or already
 * used, expired, bound to another id, or (unbound) the id already holds a
 * certificate. An expired token's file is deleted too. */
int sky_ca_token_use(const char *dir, const char *token, const char *id, int64_t now, int consume,
		     sky_diag *d);

/* An opened CA: its key and certificate, the PEMs it sends to boards, an RNG. */
typedef struct sky_ca {
	char dir[512];
	mbedtls_pk_context key;
	mbedtls_x509_crt crt;
	char ca_pem[SKY_ENROLL_PEM_MAX + 1];
	char planner_pem[SKY_ENROLL_PEM_MAX + 1];
	sky_sign_rng rng;
	int ready;
} sky_ca;

/* Zeroes ca; cannot fail. */
void sky_ca_init(sky_ca *ca);
/* Loads ca.key, ca.crt and planner.crt from dir. Returns 0 or
 * SKY_ENOTFOUND / SKY_ECRYPTO / SKY_EAUTH with d naming the file. */
int sky_ca_open(sky_ca *ca, const char *dir, sky_diag *d);
/* NULL-safe; may be called twice. */
void sky_ca_free(sky_ca *ca);

/* CSR intake, in this order: refuses csr_len > SKY_ENROLL_CSR_MAX before
 * parsing (SKY_ERANGE); parses the PEM (SKY_EFORMAT); requires an EC P-256
 * key (SKY_EAUTH), a valid self-signature (SKY_EAUTH), a CN that passes
 * sky_enroll_check_id (SKY_EINVAL) and equals id (SKY_EAUTH). Then issues
 * the certificate (see top comment) as PEM into out. Does not look at
 * tokens. Returns the PEM length (> 0) or the codes above / SKY_ERANGE (out
 * too small) / SKY_ECRYPTO, with d naming what was wrong. */
int sky_ca_issue(sky_ca *ca, const char *csr_pem, size_t csr_len, const char *id, char *out,
		 size_t cap, sky_diag *d);

/* The whole enrollment step for skyplan: decodes the request msg (from
 * sky/v1/enroll/<nonce>/csr), refuses a revoked id (SKY_EAUTH, "board '<id>'
 * is revoked ..."; sky_ca_check_not_revoked), checks the token without consuming it,
 * checks the CSR and issues, consumes the token, records issued/<id>, and
 * writes the reply JSON for sky/v1/enroll/<nonce>/cert into reply (success
 * or refusal; a refusal says why in "error", without secrets). Returns 0
 * if a certificate was issued, else the negative reason; in both cases
 * *reply_len is the reply's length (0 if even a refusal did not fit).
 * id_out (SKY_ENROLL_ID_MAX + 1 bytes, may be NULL) receives the requested
 * id when it was readable, for the log line. */
int sky_ca_enroll(sky_ca *ca, const char *msg, size_t len, int64_t now, char *reply, size_t cap,
		  size_t *reply_len, char *id_out, sky_diag *d);

/* The cheap part of sky_ca_enroll, for rate limits that must not let
 * requests without a valid token crowd out one with: decodes msg, refuses
 * a revoked id and checks the token (without consuming it). No signature
 * is checked or made. Returns 0 if sky_ca_enroll would go on to the CSR and
 * the signing, else its refusal code with d saying why. */
int sky_ca_enroll_check(sky_ca *ca, const char *msg, size_t len, int64_t now, sky_diag *d);

/* Returns 0 if board id has no revoked certificate in <dir>/revoked
 * (sky_crl.h), SKY_EAUTH with d saying it is revoked, or the list's read
 * errors. sky_ca_enroll refuses a revoked id with this, before it looks at
 * the token. */
int sky_ca_check_not_revoked(const char *dir, const char *id, sky_diag *d);

/* Loads the planner's signing identity (<dir>/planner.key and
 * planner.crt) into s, for sky_sign_envelope. Returns as sky_signer_load. */
int sky_ca_load_signer(sky_signer *s, const char *dir, sky_diag *d);

#endif
