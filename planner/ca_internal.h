/* The CA's certificate writer, shared by the enrollment path (ca.c) and the
 * commands that make and grow the PKI directory (pki.c). Private to those
 * two files: no public header includes it. */
#ifndef SKY_CA_INTERNAL_H
#define SKY_CA_INTERNAL_H

#include "sky_err.h"
#include "sky_sign.h"

#include <mbedtls/pk.h>
#include <stddef.h>

#define CA_CERT_PEM_CAP 4096
#define CA_DAYS 3650    /* the CA, broker, planner, claim, operator and bridge certificates */
#define CA_SERIAL_BYTES 16

/* What one certificate says; the CA's own is self-signed (issuer_key ==
 * subject_key, issuer == subject). */
typedef struct ca_cert_spec {
	mbedtls_pk_context *subject_key;
	const char *subject; /* "CN=...,O=..." */
	mbedtls_pk_context *issuer_key;
	const char *issuer;
	int is_ca;
	int days;
	unsigned char key_usage;
	const unsigned char *san; /* DER GeneralNames, or NULL */
	size_t san_len;
} ca_cert_spec;

/* Writes the certificate as PEM into out (CA_CERT_PEM_CAP bytes) and its
 * serial (CA_SERIAL_BYTES) into serial. Returns 0 or SKY_ECRYPTO with d set. */
int ca_write_cert(const ca_cert_spec *s, sky_sign_rng *rng, char *out, unsigned char *serial,
		  sky_diag *d);

/* The CA's distinguished name "CN=<cn>,O=sky" into out: unique per fleet,
 * so two fleets' CAs are told apart in logs and by name lookups in TLS
 * stacks. */
void ca_name(const char *cn, char *out, size_t cap);

#endif
