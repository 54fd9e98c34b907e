/* Revoking boards: the fleet CA's revoked list and the CRL it signs.
 *
 * Mbed TLS 2.28 parses CRLs but cannot write one, so the DER is built here
 * with mbedtls/asn1write.h (RFC 5280 §5.1) and signed with the CA key:
 *
 *   CertificateList ::= SEQUENCE { tbsCertList, signatureAlgorithm, signatureValue }
 *   TBSCertList ::= SEQUENCE {
 *     version v2(1), signature ecdsa-with-SHA256, issuer (the CA's subject,
 *     byte for byte), thisUpdate, nextUpdate, revokedCertificates (omitted
 *     when empty: §5.1.2.6) of { serial, revocationDate, [reasonCode] },
 *     crlExtensions [0] { cRLNumber } }
 *
 * Files in the PKI directory (sky_pki_layout.h):
 *   <pki>/revoked     one line per revoked certificate:
 *                     "<board id> <serial hex> <unix time> <reason code>\n"
 *   <pki>/crl.pem     the CRL over every line of revoked, signed by the CA;
 *                     `sky pki init` writes an empty one, because a broker
 *                     told to check CRLs (mosquitto's crlfile) refuses every
 *                     client whose issuer has none
 *   <pki>/crl.number  the last cRLNumber issued (it only grows, §5.2.3)
 *
 * nextUpdate is the CA certificate's own expiry: OpenSSL refuses every
 * client once the CRL it holds is past nextUpdate, so a short one would
 * lock the whole fleet out on the day nobody re-signed it. */
#ifndef SKY_CRL_H
#define SKY_CRL_H

#include "sky_err.h"
#include "sky_sign.h"

#include <mbedtls/pk.h>
#include <mbedtls/x509_crt.h>
#include <stddef.h>
#include <stdint.h>

#define SKY_CRL_FILE "crl.pem"
#define SKY_CRL_REVOKED_FILE "revoked"
#define SKY_CRL_NUMBER_FILE "crl.number"
#define SKY_CRL_MAX_ENTRIES 1024
#define SKY_CRL_SERIAL_MAX 20 /* octets: RFC 5280 §4.1.2.2 */
/* DER of a full list: ~40 bytes an entry plus the frame */
#define SKY_CRL_DER_MAX (SKY_CRL_MAX_ENTRIES * 48 + 1024)

/* reasonCode values (RFC 5280 §5.3.1); -1: no reasonCode extension */
enum {
	SKY_CRL_REASON_NONE = -1,
	SKY_CRL_REASON_UNSPECIFIED = 0,
	SKY_CRL_REASON_KEY_COMPROMISE = 1,
	SKY_CRL_REASON_CA_COMPROMISE = 2,
	SKY_CRL_REASON_AFFILIATION_CHANGED = 3,
	SKY_CRL_REASON_SUPERSEDED = 4,
	SKY_CRL_REASON_CESSATION = 5,
};

typedef struct sky_crl_entry {
	char id[65];                                /* the board it was issued to */
	unsigned char serial[SKY_CRL_SERIAL_MAX + 1]; /* DER INTEGER content octets */
	size_t serial_len;
	int64_t when;                               /* revocation date, Unix seconds */
	int reason;                                 /* SKY_CRL_REASON_* */
} sky_crl_entry;

typedef struct sky_crl_list {
	int n;
	sky_crl_entry e[SKY_CRL_MAX_ENTRIES];
} sky_crl_list;

/* "unspecified", "keyCompromise", "superseded", ... (the RFC's names; also
 * "key-compromise" style) into *code. Returns 0 or SKY_EINVAL with d listing
 * the names. */
int sky_crl_reason_parse(const char *name, int *code, sky_diag *d);
/* The RFC's name of a reason code ("" for SKY_CRL_REASON_NONE). */
const char *sky_crl_reason_name(int code);

/* Writes the CRL for entries e[0..n) as DER into buf, signed with key (the
 * private key of ca). The DER is written at the END of buf (asn1write
 * writes backwards); *der points at its first byte. Returns its length, or
 * SKY_ERANGE (buf too small, a serial too long) / SKY_ECRYPTO with d set. */
int sky_crl_write_der(mbedtls_pk_context *key, const mbedtls_x509_crt *ca, const sky_crl_entry *e,
		      int n, int64_t this_update, int64_t next_update, int64_t number,
		      sky_sign_rng *rng, unsigned char *buf, size_t cap, unsigned char **der,
		      sky_diag *d);
/* The same as PEM ("-----BEGIN X509 CRL-----") into out, NUL-terminated.
 * Returns the PEM length or the codes above. */
int sky_crl_write_pem(mbedtls_pk_context *key, const mbedtls_x509_crt *ca, const sky_crl_entry *e,
		      int n, int64_t this_update, int64_t next_update, int64_t number,
		      sky_sign_rng *rng, char *out, size_t cap, sky_diag *d);

/* Reads <dir>/revoked into l (a missing file is an empty list). Returns 0
 * or SKY_EFORMAT (a damaged line, named) / SKY_ERANGE / SKY_EIO. */
int sky_crl_list_load(const char *dir, sky_crl_list *l, sky_diag *d);
/* 1 if board id has a revoked certificate in l, else 0. */
int sky_crl_list_has_id(const sky_crl_list *l, const char *id);

/* Signs <dir>/crl.pem anew from <dir>/revoked with the CA in dir (next
 * cRLNumber, thisUpdate now) and checks it by parsing it back. Returns 0 or
 * SKY_ENOTFOUND (no CA) / SKY_EIO / SKY_ECRYPTO / SKY_EFORMAT. */
int sky_crl_refresh(const char *dir, sky_diag *d);

/* Revokes every certificate the CA issued to board id (each serial of
 * <dir>/serials/<id>, and <dir>/certs/<id>.crt and <dir>/issued/<id>): adds
 * those not listed yet to <dir>/revoked with the reason and the time now,
 * and re-signs <dir>/crl.pem. When all are listed already nothing changes.
 * Returns 0 (revoked now), 1 (already revoked), or SKY_ENOTFOUND
 * (no such board: d names the id) / SKY_EINVAL (a bad id) / SKY_ERANGE
 * (the list is full) / the codes of sky_crl_refresh. */
int sky_crl_revoke(const char *dir, const char *id, int reason, sky_diag *d);

#endif
