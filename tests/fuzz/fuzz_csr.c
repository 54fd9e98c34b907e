/* libFuzzer harness: the enrollment CA's intake of outside input.
 *
 * The first byte picks what the rest is fed to (mod 3):
 *   0: sky_ca_issue, as a CSR (PEM or DER) for board id "b01": the size
 *      bound, Mbed TLS's CSR parser, the key and self-signature checks, the
 *      CN rule and, for a valid CSR, certificate issuance;
 *   1: sky_ca_enroll, as a whole request message (JSON with id, token and
 *      CSR). A token bound to "b01" ("0123...cdef" below) is re-stored before
 *      every run, so inputs that carry it reach the CSR checks too;
 *   2: sky_enroll_reply_decode, the board's parse of the planner's answer.
 * Whatever the bytes: no crash, no read outside them, no leaked pool
 * memory, every refusal names its reason, and anything issued is a
 * certificate for b01 that chains to the CA. */
#include "sky_ca.h"
#include "sky_clock.h"
#include "sky_file.h"
#include "sky_json.h"
#include "sky_pki.h"

#include <mbedtls/sha256.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOKEN "0123456789abcdef0123456789abcdef"

static sky_ca g_ca;
static char g_token_file[1024];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	const char *tmp = getenv("TMPDIR");
	static char dir[512];
	snprintf(dir, sizeof dir, "%s/sky-fuzz-csr.XXXXXX", tmp ? tmp : "/tmp");
	if (!mkdtemp(dir))
		abort();
	strncat(dir, "/pki", sizeof dir - strlen(dir) - 1);
	sky_ca_opts o = {.port = 1883};
	sky_diag d;
	sky_diag_clear(&d);
	sky_ca_init(&g_ca);
	if (sky_ca_init_dir(dir, &o, &d) != 0 || sky_ca_open(&g_ca, dir, &d) != 0) {
		fprintf(stderr, "fuzz_csr: %s\n", d.msg);
		abort();
	}
	unsigned char h[32];
	mbedtls_sha256_ret((const unsigned char *)TOKEN, strlen(TOKEN), h, 0);
	int n = snprintf(g_token_file, sizeof g_token_file, "%s/tokens/", dir);
	for (int i = 0; i < 32; i++)
		n += snprintf(g_token_file + n, sizeof g_token_file - (size_t)n, "%02x", h[i]);
	return 0;
}

static void check_cert(const char *pem, size_t len)
{
	mbedtls_x509_crt c;
	mbedtls_x509_crt_init(&c);
	uint32_t flags = 0;
	char cn[80];
	if (mbedtls_x509_crt_parse(&c, (const unsigned char *)pem, len + 1) != 0 ||
	    mbedtls_x509_crt_verify(&c, &g_ca.crt, NULL, NULL, &flags, NULL, NULL) != 0 ||
	    sky_sign_cert_cn(&c, cn, sizeof cn) != 0 || strcmp(cn, "b01") != 0 || c.ca_istrue)
		abort();
	mbedtls_x509_crt_free(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	int mode = data[0] % 3;
	size--;
	char *copy = malloc(size ? size : 1); /* private copy: ASan sees overreads */
	if (!copy)
		return 0;
	memcpy(copy, data + 1, size);
	size_t used = sky_json_pool_used();
	sky_diag d;
	sky_diag_clear(&d);
	static char out[SKY_ENROLL_REPLY_MAX];
	int rc;
	if (mode == 0) {
		rc = sky_ca_issue(&g_ca, copy, size, "b01", out, sizeof out, &d);
		if (rc > 0)
			check_cert(out, (size_t)rc);
	} else if (mode == 1) {
		static const char rec[] = "4102444800 b01\n"; /* expires 2100-01-01 */
		if (sky_file_write(g_token_file, rec, sizeof rec - 1, 0600) != 0)
			abort();
		size_t rlen = 0;
		char id[SKY_ENROLL_ID_MAX + 1];
		rc = sky_ca_enroll(&g_ca, copy, size, sky_clock_unix(), out, sizeof out, &rlen, id, &d);
		sky_enroll_reply *r = calloc(1, sizeof *r);
		/* the reply to publish is always well-formed, success or not */
		if (!r || rlen == 0 || sky_enroll_reply_decode(out, rlen, r, NULL) != 0 ||
		    (rc == 0) != (r->error[0] == '\0'))
			abort();
		if (rc == 0)
			check_cert(r->cert, strlen(r->cert));
		free(r);
	} else {
		sky_enroll_reply *r = calloc(1, sizeof *r);
		if (!r)
			abort();
		rc = sky_enroll_reply_decode(copy, size, r, &d);
		free(r);
	}
	if (rc < 0 && d.msg[0] == '\0') /* every refusal says why */
		abort();
	if (sky_json_pool_used() != used)
		abort();
	free(copy);
	return 0;
}
