/* A board's identity: id rule, key file, CSR, enrollment reply checks. */
#include "sky_test.h"

#include "sky_ca.h"
#include "sky_clock.h"
#include "sky_file.h"
#include "sky_identity.h"
#include "sky_pki.h"
#include "sky_pki_layout.h"

#include <mbedtls/x509_csr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char g_pki[2][512];

static const char *pki(int which)
{
	if (!g_pki[which][0]) {
		snprintf(g_pki[which], sizeof g_pki[which], "%s/pki%d", sky_test_tmp_dir(), which);
		sky_ca_opts o = {.port = 18883};
		sky_diag d;
		sky_diag_clear(&d);
		if (sky_ca_init_dir(g_pki[which], &o, &d) != 0) {
			fprintf(stderr, "fixture: %s\n", d.msg);
			exit(2);
		}
	}
	return g_pki[which];
}

static void state_dir(char *buf, size_t cap, const char *name)
{
	snprintf(buf, cap, "%s/state-%s", sky_test_tmp_dir(), name);
}

static sky_sign_rng g_rng;
static sky_sign_rng *rng(void)
{
	if (!g_rng.ready && sky_sign_rng_init(&g_rng, "test", NULL) != 0)
		exit(2);
	return &g_rng;
}

/* Runs the board's request through fleet `which`'s CA with a fresh token
 * bound to id; the reply goes to reply/rlen. Returns sky_ca_enroll's rc. */
static int enroll_via_ca(int which, const char *state, const char *id, char *reply, size_t cap,
			 size_t *rlen)
{
	char tok[SKY_ENROLL_TOKEN_LEN + 1], req[SKY_ENROLL_REQ_MAX], ca_path[600];
	snprintf(ca_path, sizeof ca_path, "%s/%s", pki(which), SKY_CA_CLAIM_CA_FILE);
	if (sky_ca_token_new(pki(which), 60, id, rng(), tok, NULL) != 0)
		return -100;
	char mine[600];
	snprintf(mine, sizeof mine, "%s/ca.crt", state);
	if (!sky_file_exists(mine) && sky_identity_trust_ca(state, ca_path, NULL) != 0)
		return -101;
	int n = sky_identity_enroll_request(state, id, tok, rng(), req, sizeof req, NULL);
	if (n <= 0)
		return -102;
	sky_ca ca;
	sky_ca_init(&ca);
	int rc = sky_ca_open(&ca, pki(which), NULL);
	if (rc == 0)
		rc = sky_ca_enroll(&ca, req, (size_t)n, sky_clock_unix(), reply, cap, rlen, NULL, NULL);
	sky_ca_free(&ca);
	return rc;
}

SKY_TEST(board_id_rule)
{
	const char *good[] = {"b01", "A", "board_7-x", "0123456789012345678901234567890123456789012345678901234567890123"};
	const char *bad[] = {"",    "#",     "+",      "/",    "a/b",        "a#",  "+a",     "a\x01",
			     "\x7f", "a b",  "a.b",    "..",   "a\tb",       "\xc3\xa9", "sky-claim",
			     "sky-planner",
			     "01234567890123456789012345678901234567890123456789012345678901234"};
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
		SKY_EXPECT_MSG(sky_identity_valid_id(good[i]), "refused '%s'", good[i]);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		SKY_EXPECT_MSG(!sky_identity_valid_id(bad[i]), "accepted bad id %zu", i);
	SKY_EXPECT(!sky_identity_valid_id(NULL));
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_enroll_check_id("a+b", &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "0x2b") && strstr(d.msg, "position 1"));
}

SKY_TEST(key_is_made_once_with_mode_0600)
{
	char dir[600], key[700], pem1[1024], pem2[1024];
	state_dir(dir, sizeof dir, "key");
	SKY_EXPECT_EQ(sky_identity_ensure_key(dir, rng(), NULL), 0);
	SKY_EXPECT_EQ(sky_identity_path(dir, SKY_IDENTITY_KEY_FILE, key, sizeof key), 0);
	SKY_EXPECT_EQ(sky_file_mode(key), 0600);
	long n1 = sky_file_read(key, pem1, sizeof pem1);
	SKY_EXPECT(n1 > 0 && strstr(pem1, "PRIVATE KEY") != NULL);
	SKY_EXPECT_EQ(sky_identity_ensure_key(dir, rng(), NULL), 0);
	long n2 = sky_file_read(key, pem2, sizeof pem2);
	SKY_EXPECT(n1 == n2 && memcmp(pem1, pem2, (size_t)n1) == 0);
}

SKY_TEST(csr_carries_the_id_and_verifies)
{
	mbedtls_pk_context pk;
	mbedtls_pk_init(&pk);
	SKY_EXPECT_EQ(sky_sign_gen_key(&pk, rng(), NULL), 0);
	char pem[SKY_ENROLL_CSR_MAX];
	int n = sky_identity_make_csr(&pk, "b42", rng(), pem, sizeof pem, NULL);
	SKY_EXPECT(n > 0 && n < 1024);
	mbedtls_x509_csr csr;
	mbedtls_x509_csr_init(&csr);
	SKY_EXPECT_EQ(mbedtls_x509_csr_parse(&csr, (const unsigned char *)pem, (size_t)n + 1), 0);
	char dn[128];
	mbedtls_x509_dn_gets(dn, sizeof dn, &csr.subject);
	SKY_EXPECT_MSG(strcmp(dn, "CN=b42") == 0, "subject %s", dn);
	mbedtls_x509_csr_free(&csr);
	SKY_EXPECT_EQ(sky_identity_make_csr(&pk, "b/42", rng(), pem, sizeof pem, NULL), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_identity_make_csr(&pk, "b42", rng(), pem, 100, NULL), SKY_ERANGE);
	mbedtls_pk_free(&pk);
}

SKY_TEST(enrollment_round_trip_then_load)
{
	char dir[600], reply[SKY_ENROLL_REPLY_MAX];
	size_t rlen = 0;
	state_dir(dir, sizeof dir, "b01");
	SKY_EXPECT(!sky_identity_enrolled(dir));
	SKY_EXPECT_EQ(enroll_via_ca(0, dir, "b01", reply, sizeof reply, &rlen), 0);
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_identity_enroll_accept(dir, "b01", reply, rlen, &d), 0);
	SKY_EXPECT_MSG(sky_identity_enrolled(dir), "%s", d.msg);
	sky_identity idn;
	sky_identity_init(&idn);
	SKY_EXPECT_EQ(sky_identity_load(&idn, dir, &d), 0);
	SKY_EXPECT(idn.loaded && strcmp(idn.id, "b01") == 0);
	char cn[80];
	SKY_EXPECT_EQ(sky_sign_cert_cn(&idn.planner, cn, sizeof cn), 0);
	SKY_EXPECT(strcmp(cn, "sky-planner") == 0);
	sky_identity_free(&idn);
	sky_identity_free(&idn);
}

SKY_TEST(enrollment_reply_checks)
{
	char a[600], b[600], other[600], reply[SKY_ENROLL_REPLY_MAX];
	size_t rlen = 0;
	sky_diag d;
	state_dir(a, sizeof a, "c1");
	state_dir(b, sizeof b, "c1-otherkey");
	state_dir(other, sizeof other, "c1-otherfleet");
	SKY_EXPECT_EQ(enroll_via_ca(0, a, "c1", reply, sizeof reply, &rlen), 0);
	/* the reply is for c1, not c2 */
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_identity_enroll_accept(a, "c2", reply, rlen, &d), SKY_EAUTH);
	/* a state dir with another key (same id) cannot take this certificate */
	char ca_path[600];
	snprintf(ca_path, sizeof ca_path, "%s/%s", pki(0), SKY_CA_CLAIM_CA_FILE);
	SKY_EXPECT_EQ(sky_identity_trust_ca(b, ca_path, NULL), 0);
	SKY_EXPECT_EQ(sky_identity_ensure_key(b, rng(), NULL), 0);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_identity_enroll_accept(b, "c1", reply, rlen, &d), SKY_EAUTH);
	SKY_EXPECT_MSG(strstr(d.msg, "not for") != NULL, "%s", d.msg);
	/* a board that trusts fleet 1's CA refuses fleet 0's answer */
	snprintf(ca_path, sizeof ca_path, "%s/%s", pki(1), SKY_CA_CLAIM_CA_FILE);
	SKY_EXPECT_EQ(sky_identity_trust_ca(other, ca_path, NULL), 0);
	SKY_EXPECT_EQ(sky_identity_ensure_key(other, rng(), NULL), 0);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_identity_enroll_accept(other, "c1", reply, rlen, &d), SKY_EAUTH);
	SKY_EXPECT_MSG(strstr(d.msg, "another CA") != NULL, "%s", d.msg);
	/* truncated replies */
	for (size_t len = 0; len < rlen; len += 97)
		SKY_EXPECT(sky_identity_enroll_accept(a, "c1", reply, len, NULL) < 0);
	/* a refusal is reported with the planner's reason */
	const char *no = "{\"v\":1,\"id\":\"c1\",\"error\":\"claim token expired\"}";
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_identity_enroll_accept(a, "c1", no, strlen(no), &d), SKY_EAUTH);
	SKY_EXPECT(strstr(d.msg, "claim token expired") != NULL);
	SKY_EXPECT(!sky_identity_enrolled(a)); /* nothing was installed by the bad replies */
	SKY_EXPECT_EQ(sky_identity_enroll_accept(a, "c1", reply, rlen, NULL), 0);
	SKY_EXPECT(sky_identity_enrolled(a));
}

SKY_TEST(load_refuses_loose_key_and_foreign_certs)
{
	char dir[600], reply[SKY_ENROLL_REPLY_MAX], key[700], crt[700], pem[2048];
	size_t rlen = 0;
	state_dir(dir, sizeof dir, "d1");
	SKY_EXPECT_EQ(enroll_via_ca(0, dir, "d1", reply, sizeof reply, &rlen), 0);
	SKY_EXPECT_EQ(sky_identity_enroll_accept(dir, "d1", reply, rlen, NULL), 0);
	sky_identity idn;
	sky_identity_init(&idn);
	sky_diag d;
	sky_identity_path(dir, SKY_IDENTITY_KEY_FILE, key, sizeof key);
	long n = sky_file_read(key, pem, sizeof pem);
	SKY_EXPECT(n > 0);
	SKY_EXPECT_EQ(sky_file_write(key, pem, (size_t)n, 0644), 0);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_identity_load(&idn, dir, &d), SKY_EAUTH);
	SKY_EXPECT(strstr(d.msg, "0600") != NULL);
	SKY_EXPECT_EQ(sky_file_write(key, pem, (size_t)n, 0600), 0);
	SKY_EXPECT_EQ(sky_identity_load(&idn, dir, NULL), 0);
	/* a planner certificate from another fleet is not accepted as ours */
	char other[600];
	snprintf(other, sizeof other, "%s/%s", pki(1), SKY_CA_PLANNER_CERT_FILE);
	n = sky_file_read(other, pem, sizeof pem);
	sky_identity_path(dir, SKY_IDENTITY_PLANNER_FILE, crt, sizeof crt);
	SKY_EXPECT_EQ(sky_file_write(crt, pem, (size_t)n, 0644), 0);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_identity_load(&idn, dir, &d), SKY_EAUTH);
	SKY_EXPECT(!idn.loaded);
	SKY_EXPECT_EQ(sky_identity_load(&idn, "/nonexistent/state", NULL), SKY_ENOTFOUND);
	sky_identity_free(&idn);
}
