/* libFuzzer harness: the signed plan envelope verifier over arbitrary bytes.
 *
 * A board runs sky_verify_envelope on whatever arrives on its plan topic.
 * Whatever the bytes, it must return 0 or an error without reading outside
 * them, leaking pool memory or writing the payload buffer on failure; and
 * what it accepts must be a payload of the announced length that fits.
 *
 * The trusted certificate below is a fixed planner certificate; the seeds
 * in tests/fuzz/corpus/envelope/ were signed by its key (made once with
 * `sky pki init` and `sky pki sign`), so mutations that keep the signed
 * payload intact (member order, whitespace, escapes) reach the verified
 * path too. */
#include "sky_json.h"
#include "sky_sign.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char k_planner_pem[] =
	"-----BEGIN CERTIFICATE-----\n"
	"MIIBsDCCAVWgAwIBAgIQQ5CrBwngTv5le47DUUkbMzAMBggqhkjOPQQDAgUAMC4x\n"
	"HjAcBgNVBAMMFXNreS1mbGVldC1jYS1jMmU0NjFiZjEMMAoGA1UECgwDc2t5MB4X\n"
	"DTI2MTEzMDE0NTEwMloXDTM2MTEyNzE0NTYwMlowJDEUMBIGA1UEAwwLc2t5LXBs\n"
	"YW5uZXIxDDAKBgNVBAoMA3NreTBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABJ3y\n"
	"vNjAHPMHJ/y+0qTHd5Rz5D1n15+WypP/X/i3STM/wbBge0y4lg/bKcLwwgoGtqW2\n"
	"30oUKWckn/rIYYDX2/GjXTBbMAkGA1UdEwQCMAAwDgYDVR0PAQH/BAQDAgeAMB0G\n"
	"A1UdDgQWBBS9UZOz8orgv1ADg5QNDnCgrILyizAfBgNVHSMEGDAWgBTdWaXqyhF8\n"
	"nCypW8G/XIQpHyrR5jAMBggqhkjOPQQDAgUAA0cAMEQCIGBscI6Q+MED/SrzwBRw\n"
	"lwVT8snYBEvkJfAbnfu/jEfOAiAypgLh5osmj6+iAb5CzEx2EEJFM22h6mqx/i1i\n"
	"9Lci9g==\n"
	"-----END CERTIFICATE-----\n"
;

static mbedtls_x509_crt g_crt;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	mbedtls_x509_crt_init(&g_crt);
	if (mbedtls_x509_crt_parse(&g_crt, (const unsigned char *)k_planner_pem,
				   sizeof k_planner_pem) != 0)
		abort();
	return 0;
}

static char g_payload[SKY_SIGN_MAX_PAYLOAD + 1];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *copy = malloc(size ? size : 1); /* private copy: ASan sees overreads */
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	size_t used = sky_json_pool_used();
	size_t plen = 0;
	sky_diag d;
	sky_diag_clear(&d);
	g_payload[0] = '\x7f';
	int rc = sky_verify_envelope(&g_crt, copy, size, g_payload, sizeof g_payload, &plen, &d);
	if (rc == 0) {
		if (plen == 0 || plen > SKY_SIGN_MAX_PAYLOAD || g_payload[plen] != '\0' ||
		    strlen(g_payload) != plen)
			abort();
	} else {
		if (rc > 0 || d.msg[0] == '\0') /* every refusal says why */
			abort();
		if (g_payload[0] != '\x7f') /* nothing handed out on failure */
			abort();
	}
	if (sky_json_pool_used() != used) /* the pool is returned */
		abort();
	free(copy);
	return 0;
}
