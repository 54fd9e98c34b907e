/* Signed plan envelopes: what verifies, and everything that must not. */
#include "sky_test.h"

#include "sky_ca.h"
#include "sky_file.h"
#include "sky_pki.h"
#include "sky_pki_layout.h"
#include "sky_sign.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Two fleets (their own CA and planner key, both with CN "sky-planner"),
 * made once per test binary. */
static char g_pki[2][512];

static const char *pki(int which)
{
	if (!g_pki[which][0]) {
		snprintf(g_pki[which], sizeof g_pki[which], "%s/pki%d", sky_test_tmp_dir(), which);
		sky_ca_opts o = {.port = 18883};
		sky_diag d;
		sky_diag_clear(&d);
		int rc = sky_ca_init_dir(g_pki[which], &o, &d);
		if (rc) {
			fprintf(stderr, "fixture: %s\n", d.msg);
			exit(2);
		}
	}
	return g_pki[which];
}

static void path(char *buf, size_t cap, int which, const char *file)
{
	snprintf(buf, cap, "%s/%s", pki(which), file);
}

static int load_signer(sky_signer *s, int which)
{
	sky_signer_init(s);
	return sky_ca_load_signer(s, pki(which), NULL);
}

static int load_cert(mbedtls_x509_crt *c, int which, const char *file)
{
	char p[600];
	path(p, sizeof p, which, file);
	mbedtls_x509_crt_init(c);
	return sky_sign_load_cert(c, p, NULL);
}

static const char k_plan[] = "{\"job\":\"j1\",\"epoch\":7,\"stages\":[{\"board\":\"b01\",\"first\":0,"
			     "\"last\":5}],\"note\":\"quote \\\" backslash \\\\ tab\\t\"}";

static char g_env[SKY_SIGN_MAX_ENVELOPE + 1];
static char g_out[SKY_SIGN_MAX_PAYLOAD + 1];

static int sign_plan(int which, const char *payload, size_t len)
{
	sky_signer s;
	int rc = load_signer(&s, which);
	if (rc == 0)
		rc = sky_sign_envelope(&s, payload, len, g_env, sizeof g_env, NULL);
	sky_signer_free(&s);
	return rc;
}

static int verify(const mbedtls_x509_crt *crt, const char *msg, size_t len, sky_diag *d)
{
	size_t n = 0;
	sky_diag_clear(d);
	return sky_verify_envelope(crt, msg, len, g_out, sizeof g_out, &n, d);
}

SKY_TEST(sign_verify_round_trip_is_byte_exact)
{
	/* quotes, backslashes, control characters, UTF-8, a trailing newline */
	const char payload[] = "{\"a\":\"\\\"x\\\\\",\"b\":\"\xc3\xa9\xe2\x82\xac\"}\x01\x1f\t\n";
	size_t len = sizeof payload - 1;
	int n = sign_plan(0, payload, len);
	SKY_EXPECT_MSG(n > 0, "sign rc %d", n);
	SKY_EXPECT_EQ(strlen(g_env), (size_t)n);
	mbedtls_x509_crt crt;
	SKY_EXPECT_EQ(load_cert(&crt, 0, SKY_CA_PLANNER_CERT_FILE), 0);
	size_t plen = 0;
	sky_diag d;
	sky_diag_clear(&d);
	unsigned long allocs = sky_test_allocs();
	SKY_EXPECT_EQ(sky_verify_envelope(&crt, g_env, (size_t)n, g_out, sizeof g_out, &plen, &d), 0);
	/* Sky's own code calls no allocator while verifying (cJSON uses the
	 * pool). The heap is not untouched: Mbed TLS's bignums make about 8000
	 * allocations per ECDSA verification (sky_test_heap_allocs, Dec 2026). */
	SKY_EXPECT_EQ(sky_test_allocs(), allocs);
	SKY_EXPECT_EQ(plen, len);
	SKY_EXPECT(memcmp(g_out, payload, len) == 0 && g_out[len] == '\0');
	/* human-readable: the plan text is visible in the envelope */
	SKY_EXPECT(strstr(g_env, "\"signer\":\"sky-planner\"") != NULL);
	mbedtls_x509_crt_free(&crt);
}

SKY_TEST(forged_payload_is_rejected)
{
	int n = sign_plan(0, k_plan, sizeof k_plan - 1);
	SKY_EXPECT(n > 0);
	mbedtls_x509_crt crt;
	SKY_EXPECT_EQ(load_cert(&crt, 0, SKY_CA_PLANNER_CERT_FILE), 0);
	sky_diag d;
	/* raise the epoch and move a layer boundary: each breaks the signature */
	const char *edits[][2] = {{"\\\"epoch\\\":7", "\\\"epoch\\\":9"},
				  {"\\\"last\\\":5", "\\\"last\\\":6"},
				  {"\\\"j1\\\"", "\\\"j2\\\""}};
	for (size_t i = 0; i < 3; i++) {
		char *copy = malloc((size_t)n + 1);
		memcpy(copy, g_env, (size_t)n + 1);
		char *at = strstr(copy, edits[i][0]);
		SKY_EXPECT_MSG(at != NULL, "edit %zu not found", i);
		if (at)
			memcpy(at, edits[i][1], strlen(edits[i][1]));
		g_out[0] = 'X';
		SKY_EXPECT_EQ(verify(&crt, copy, (size_t)n, &d), SKY_EAUTH);
		SKY_EXPECT(strstr(d.msg, "does not verify") != NULL);
		SKY_EXPECT(g_out[0] == 'X'); /* nothing handed out */
		free(copy);
	}
	mbedtls_x509_crt_free(&crt);
}

SKY_TEST(unsigned_envelopes_are_rejected)
{
	mbedtls_x509_crt crt;
	SKY_EXPECT_EQ(load_cert(&crt, 0, SKY_CA_PLANNER_CERT_FILE), 0);
	sky_diag d;
	const char *no_sig = "{\"v\":1,\"alg\":\"ES256\",\"signer\":\"sky-planner\",\"payload\":\"{}\"}";
	SKY_EXPECT_EQ(verify(&crt, no_sig, strlen(no_sig), &d), SKY_EAUTH);
	SKY_EXPECT(strstr(d.msg, "unsigned") != NULL);
	const char *empty_sig =
		"{\"v\":1,\"alg\":\"ES256\",\"signer\":\"sky-planner\",\"payload\":\"{}\",\"sig\":\"\"}";
	SKY_EXPECT_EQ(verify(&crt, empty_sig, strlen(empty_sig), &d), SKY_EAUTH);
	SKY_EXPECT_MSG(strstr(d.msg, "unsigned (no signature)") != NULL, "%s", d.msg);
	/* a bare plan, as if someone published it without an envelope */
	SKY_EXPECT_EQ(verify(&crt, k_plan, strlen(k_plan), &d), SKY_EFORMAT);
	SKY_EXPECT_MSG(strstr(d.msg, "unexpected member 'job'") != NULL, "%s", d.msg);
	/* garbage signature of the right shape */
	const char *junk = "{\"v\":1,\"alg\":\"ES256\",\"signer\":\"sky-planner\",\"payload\":\"{}\","
			   "\"sig\":\"MEUCIQCqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqgIgVVVVVVVVVVVVV"
			   "VVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVU=\"}";
	SKY_EXPECT_EQ(verify(&crt, junk, strlen(junk), &d), SKY_EAUTH);
	SKY_EXPECT_MSG(strstr(d.msg, "does not verify") != NULL, "junk signature: '%s'", d.msg);
	mbedtls_x509_crt_free(&crt);
}

SKY_TEST(every_truncation_is_rejected)
{
	int n = sign_plan(0, k_plan, sizeof k_plan - 1);
	SKY_EXPECT(n > 0);
	mbedtls_x509_crt crt;
	SKY_EXPECT_EQ(load_cert(&crt, 0, SKY_CA_PLANNER_CERT_FILE), 0);
	sky_diag d;
	int accepted = 0, other = 0;
	/* the prefix is copied so the parser cannot read past it */
	char *buf = malloc(n > 0 ? (size_t)n : 1);
	for (int len = 0; len < n; len++) {
		memcpy(buf, g_env, (size_t)len);
		int rc = verify(&crt, buf, (size_t)len, &d);
		/* refused as truncated, not for some other reason that happens to
		 * hold (the first three others are shown, all are counted) */
		const char *want = len ? "not JSON or truncated" : "empty message";
		if (rc == 0)
			accepted++;
		else if ((rc != SKY_EFORMAT || !strstr(d.msg, want)) && other++ < 3)
			sky_test_fail(__FILE__, __LINE__, "prefix of %d: rc %d (%s)", len, rc, d.msg);
	}
	free(buf);
	SKY_EXPECT_EQ(accepted, 0);
	SKY_EXPECT_EQ(other, 0);
	SKY_EXPECT_EQ(verify(&crt, g_env, (size_t)n, &d), 0);
	mbedtls_x509_crt_free(&crt);
}

SKY_TEST(resigned_by_another_key_is_rejected)
{
	/* fleet 1's planner key, same CN "sky-planner": the board trusts fleet 0's */
	int n = sign_plan(1, k_plan, sizeof k_plan - 1);
	SKY_EXPECT(n > 0);
	mbedtls_x509_crt crt0, crt1, claim;
	SKY_EXPECT_EQ(load_cert(&crt0, 0, SKY_CA_PLANNER_CERT_FILE), 0);
	SKY_EXPECT_EQ(load_cert(&crt1, 1, SKY_CA_PLANNER_CERT_FILE), 0);
	SKY_EXPECT_EQ(load_cert(&claim, 0, SKY_CA_CLAIM_CERT_FILE), 0);
	sky_diag d;
	SKY_EXPECT_EQ(verify(&crt0, g_env, (size_t)n, &d), SKY_EAUTH);
	SKY_EXPECT(strstr(d.msg, "does not verify") != NULL);
	SKY_EXPECT_EQ(verify(&crt1, g_env, (size_t)n, &d), 0);
	/* a certificate with another CN is never the signer */
	SKY_EXPECT_EQ(verify(&claim, g_env, (size_t)n, &d), SKY_EAUTH);
	SKY_EXPECT(strstr(d.msg, "only 'sky-claim' is trusted") != NULL);
	mbedtls_x509_crt_free(&crt0);
	mbedtls_x509_crt_free(&crt1);
	mbedtls_x509_crt_free(&claim);
}

SKY_TEST(malformed_envelopes_are_rejected)
{
	int n = sign_plan(0, "{}", 2);
	SKY_EXPECT(n > 0);
	mbedtls_x509_crt crt;
	SKY_EXPECT_EQ(load_cert(&crt, 0, SKY_CA_PLANNER_CERT_FILE), 0);
	sky_diag d;
	const char *sig = strstr(g_env, "\"sig\":\"");
	SKY_EXPECT(sig != NULL);
	char good_sig[160] = {0};
	if (sig)
		snprintf(good_sig, sizeof good_sig, "%.*s", (int)(strchr(sig + 7, '"') - sig + 1), sig);
	char msg[1024];
	struct {
		const char *fmt;
		int want;
	} cases[] = {
		{"{\"v\":2,\"alg\":\"ES256\",\"signer\":\"sky-planner\",\"payload\":\"{}\",%s}", SKY_EFORMAT},
		{"{\"v\":1,\"alg\":\"RS256\",\"signer\":\"sky-planner\",\"payload\":\"{}\",%s}", SKY_EFORMAT},
		{"{\"v\":1,\"alg\":\"ES256\",\"signer\":\"sky-planner\",\"payload\":{},%s}", SKY_EFORMAT},
		{"{\"v\":1,\"alg\":\"ES256\",\"signer\":\"sky-planner\",\"payload\":\"{}\",%s,\"x\":1}",
		 SKY_EFORMAT},
		{"{\"v\":1,\"alg\":\"ES256\",\"signer\":\"sky-planner\",\"payload\":\"{}\","
		 "\"payload\":\"{}\",%s}",
		 SKY_EFORMAT},
		{"{\"v\":1,\"alg\":\"ES256\",\"signer\":\"sky-planner\",\"payload\":\"{}\",%s}garbage",
		 SKY_EFORMAT},
		{"[{\"v\":1,\"alg\":\"ES256\",\"signer\":\"sky-planner\",\"payload\":\"{}\",%s}]",
		 SKY_EFORMAT},
		{"{\"v\":1,\"alg\":\"ES256\",\"signer\":\"sky-planner\",\"payload\":\"\",%s}", SKY_EFORMAT},
		{" { \"sig\" : 0 } ", SKY_EFORMAT},
		{"{\"v\":1,\"alg\":\"ES256\",\"signer\":\"sky-planner\",\"payload\":\"{}\",\"sig\":\"!!!!\"}",
		 SKY_EFORMAT},
		{"{\"v\":1,\"alg\":\"ES256\",\"signer\":\"sky-planner\",\"payload\":\"{}\",\"sig\":\"QUJD\n\"}",
		 SKY_EFORMAT},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		snprintf(msg, sizeof msg, cases[i].fmt, good_sig);
		int rc = verify(&crt, msg, strlen(msg), &d);
		SKY_EXPECT_MSG(rc == cases[i].want, "case %zu: rc %d (%s)", i, rc, d.msg);
	}
	/* reordered members and whitespace are fine: the signature is over the payload */
	snprintf(msg, sizeof msg,
		 " {%s , \"payload\":\"{}\", \"signer\":\"sky-planner\", \"alg\":\"ES256\", \"v\":1}\n",
		 good_sig);
	SKY_EXPECT_EQ(verify(&crt, msg, strlen(msg), &d), 0);
	/* too big is refused before parsing */
	char *big = malloc(SKY_SIGN_MAX_ENVELOPE + 2);
	memset(big, ' ', SKY_SIGN_MAX_ENVELOPE + 1);
	big[SKY_SIGN_MAX_ENVELOPE + 1] = '\0';
	SKY_EXPECT_EQ(verify(&crt, big, SKY_SIGN_MAX_ENVELOPE + 1, &d), SKY_ERANGE);
	free(big);
	/* a payload buffer too small */
	size_t plen = 0;
	char tiny[2];
	SKY_EXPECT_EQ(sky_verify_envelope(&crt, g_env, (size_t)n, tiny, sizeof tiny, &plen, NULL),
		      SKY_ERANGE);
	SKY_EXPECT_EQ(sky_verify_envelope(NULL, g_env, (size_t)n, g_out, sizeof g_out, &plen, NULL),
		      SKY_EINVAL);
	mbedtls_x509_crt_free(&crt);
}

SKY_TEST(signer_refuses_bad_payloads_and_state)
{
	sky_signer s;
	SKY_EXPECT_EQ(load_signer(&s, 0), 0);
	SKY_EXPECT_EQ(strcmp(s.name, "sky-planner"), 0);
	SKY_EXPECT_EQ(sky_sign_envelope(&s, "", 0, g_env, sizeof g_env, NULL), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_sign_envelope(&s, "a\0b", 3, g_env, sizeof g_env, NULL), SKY_EINVAL);
	char small[64];
	SKY_EXPECT_EQ(sky_sign_envelope(&s, "{}", 2, small, sizeof small, NULL), SKY_ERANGE);
	char *huge = malloc(SKY_SIGN_MAX_PAYLOAD + 1);
	memset(huge, 'a', SKY_SIGN_MAX_PAYLOAD + 1);
	SKY_EXPECT_EQ(sky_sign_envelope(&s, huge, SKY_SIGN_MAX_PAYLOAD + 1, g_env, sizeof g_env, NULL),
		      SKY_EINVAL);
	/* the largest payload fits, but one that escapes to more than the envelope limit does not */
	SKY_EXPECT(sky_sign_envelope(&s, huge, SKY_SIGN_MAX_PAYLOAD, g_env, sizeof g_env, NULL) > 0);
	memset(huge, '"', SKY_SIGN_MAX_PAYLOAD);
	SKY_EXPECT_EQ(sky_sign_envelope(&s, huge, SKY_SIGN_MAX_PAYLOAD, g_env, sizeof g_env, NULL),
		      SKY_ERANGE);
	free(huge);
	sky_signer_free(&s);
	sky_signer_free(&s); /* twice is fine */
	SKY_EXPECT_EQ(sky_sign_envelope(&s, "{}", 2, g_env, sizeof g_env, NULL), SKY_ESTATE);
}

SKY_TEST(signer_load_checks_key_mode_and_pairing)
{
	char key0[600], crt0[600], crt1[600], loose[600];
	path(key0, sizeof key0, 0, SKY_CA_PLANNER_KEY_FILE);
	path(crt0, sizeof crt0, 0, SKY_CA_PLANNER_CERT_FILE);
	path(crt1, sizeof crt1, 1, SKY_CA_PLANNER_CERT_FILE);
	sky_signer s;
	sky_signer_init(&s);
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_file_mode(key0), 0600);
	/* key of fleet 0 with the certificate of fleet 1 */
	SKY_EXPECT_EQ(sky_signer_load(&s, key0, crt1, &d), SKY_EAUTH);
	/* a key readable by others is refused */
	char pem[1024];
	long n = sky_file_read(key0, pem, sizeof pem);
	SKY_EXPECT(n > 0);
	snprintf(loose, sizeof loose, "%s/loose.key", sky_test_tmp_dir());
	SKY_EXPECT_EQ(sky_file_write(loose, pem, (size_t)n, 0644), 0);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_signer_load(&s, loose, crt0, &d), SKY_EAUTH);
	SKY_EXPECT(strstr(d.msg, "0600") != NULL);
	SKY_EXPECT_EQ(sky_file_write(loose, pem, (size_t)n, 0600), 0);
	SKY_EXPECT_EQ(sky_signer_load(&s, loose, crt0, NULL), 0);
	SKY_EXPECT_EQ(sky_signer_load(&s, "/nonexistent/k", crt0, NULL), SKY_ENOTFOUND);
	/* a certificate is no key (copied 0600 so the mode check passes) */
	n = sky_file_read(crt0, pem, sizeof pem);
	SKY_EXPECT(n > 0);
	SKY_EXPECT_EQ(sky_file_write(loose, pem, (size_t)n, 0600), 0);
	SKY_EXPECT_EQ(sky_signer_load(&s, loose, crt0, NULL), SKY_ECRYPTO);
	sky_signer_free(&s);
}

SKY_TEST(base64_is_canonical)
{
	unsigned char out[16];
	char enc[32];
	SKY_EXPECT_EQ(sky_b64_encode((const unsigned char *)"abc", 3, enc, sizeof enc), 4);
	SKY_EXPECT(strcmp(enc, "YWJj") == 0);
	SKY_EXPECT_EQ(sky_b64_decode("YWJj", 4, out, sizeof out), 3);
	SKY_EXPECT_EQ(sky_b64_decode("YWI=", 4, out, sizeof out), 2);
	SKY_EXPECT_EQ(sky_b64_decode("YWJ", 3, out, sizeof out), SKY_EFORMAT);
	SKY_EXPECT_EQ(sky_b64_decode("YW J", 4, out, sizeof out), SKY_EFORMAT);
	SKY_EXPECT_EQ(sky_b64_decode("Y=Jj", 4, out, sizeof out), SKY_EFORMAT);
	SKY_EXPECT_EQ(sky_b64_decode("YWJjYWJj", 8, out, 2), SKY_ERANGE);
}

SKY_TEST(envelope_with_a_nul_is_rejected)
{
	/* "\u0000junk" after the payload text: read as a C string the payload
	 * is still the signed one, so only the NUL rule catches it */
	int n = sign_plan(0, k_plan, sizeof k_plan - 1);
	SKY_EXPECT(n > 0);
	mbedtls_x509_crt crt;
	SKY_EXPECT_EQ(load_cert(&crt, 0, SKY_CA_PLANNER_CERT_FILE), 0);
	static char copy[SKY_SIGN_MAX_ENVELOPE + 16];
	const char *sig = strstr(g_env, "\",\"sig\":");
	SKY_EXPECT(sig != NULL);
	if (sig) {
		size_t at = (size_t)(sig - g_env);
		memcpy(copy, g_env, at);
		memcpy(copy + at, "\\u0000junk", 10);
		memcpy(copy + at + 10, g_env + at, (size_t)n - at + 1);
		sky_diag d;
		SKY_EXPECT_EQ(verify(&crt, copy, (size_t)n + 10, &d), SKY_EFORMAT);
		SKY_EXPECT_MSG(strstr(d.msg, "NUL") != NULL, "%s", d.msg);
		/* and a raw NUL byte inside the length */
		memcpy(copy, g_env, (size_t)n + 1);
		copy[at - 1] = '\0';
		SKY_EXPECT_EQ(verify(&crt, copy, (size_t)n, &d), SKY_EFORMAT);
		SKY_EXPECT_MSG(strstr(d.msg, "NUL") != NULL, "%s", d.msg);
	}
	mbedtls_x509_crt_free(&crt);
}
