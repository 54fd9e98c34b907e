/* The CRL writer and the revoked list (planner/crl.c): every CRL parses
 * back with Mbed TLS, carries the serials it should, and verifies with the
 * CA's key; a tampered one does not. */
#define _GNU_SOURCE /* memmem */
#include "sky_test.h"

#include "sky_ca.h"
#include "sky_clock.h"
#include "sky_crl.h"
#include "sky_file.h"
#include "sky_identity.h"
#include "sky_pki.h"
#include "sky_pki_layout.h"

#include <mbedtls/md.h>
#include <mbedtls/x509_crl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char g_pki[512];
static sky_sign_rng g_rng;

static const char *pki(void)
{
	if (!g_pki[0]) {
		snprintf(g_pki, sizeof g_pki, "%s/pki", sky_test_tmp_dir());
		sky_ca_opts o = {.port = 18997};
		sky_diag d;
		sky_diag_clear(&d);
		if (sky_ca_init_dir(g_pki, &o, &d) != 0) {
			fprintf(stderr, "fixture: %s\n", d.msg);
			exit(2);
		}
	}
	return g_pki;
}

static sky_sign_rng *rng(void)
{
	if (!g_rng.ready && sky_sign_rng_init(&g_rng, "test", NULL) != 0)
		exit(2);
	return &g_rng;
}

static void path(char *buf, size_t cap, const char *name)
{
	snprintf(buf, cap, "%s/%s", pki(), name);
}

/* Enrolls board id through the CA (as skyd --enroll and sky pki issue do);
 * returns sky_ca_enroll's code and its reply in reply. */
static int enroll(const char *id, char *reply, size_t cap)
{
	char state[600], capath[700], tok[SKY_ENROLL_TOKEN_LEN + 1];
	static char req[SKY_ENROLL_REQ_MAX + 1];
	size_t rlen = 0;
	snprintf(state, sizeof state, "%s/state-%s", sky_test_tmp_dir(), id);
	path(capath, sizeof capath, SKY_CA_CERT_FILE);
	sky_ca ca;
	sky_ca_init(&ca);
	int rc = sky_ca_token_new(pki(), 600, id, rng(), tok, NULL);
	if (!rc)
		rc = sky_identity_trust_ca(state, capath, NULL);
	int q = rc ? rc : sky_identity_enroll_request(state, id, tok, rng(), req, sizeof req, NULL);
	if (q < 0)
		return q;
	if ((rc = sky_ca_open(&ca, pki(), NULL)) == 0)
		rc = sky_ca_enroll(&ca, req, (size_t)q, sky_clock_unix(), reply, cap, &rlen, NULL,
				   NULL);
	sky_ca_free(&ca);
	if (rlen < cap)
		reply[rlen] = '\0';
	return rc;
}

static int load_crt(mbedtls_x509_crt *c, const char *file)
{
	char p[700];
	path(p, sizeof p, file);
	mbedtls_x509_crt_init(c);
	return mbedtls_x509_crt_parse_file(c, p);
}

static int load_crl(mbedtls_x509_crl *crl)
{
	char p[700];
	path(p, sizeof p, SKY_CRL_FILE);
	mbedtls_x509_crl_init(crl);
	return mbedtls_x509_crl_parse_file(crl, p);
}

/* The CRL's signature over its TBS with the CA certificate's key. */
static int crl_sig_ok(const mbedtls_x509_crl *crl, const mbedtls_x509_crt *ca)
{
	unsigned char h[32];
	if (crl->sig_md != MBEDTLS_MD_SHA256 || crl->sig_pk != MBEDTLS_PK_ECDSA)
		return 0;
	if (mbedtls_md(mbedtls_md_info_from_type(MBEDTLS_MD_SHA256), crl->tbs.p, crl->tbs.len, h))
		return 0;
	return mbedtls_pk_verify(&((mbedtls_x509_crt *)ca)->pk, MBEDTLS_MD_SHA256, h, sizeof h,
				 crl->sig.p, crl->sig.len) == 0;
}

static int n_entries(const mbedtls_x509_crl *crl)
{
	int n = 0;
	for (const mbedtls_x509_crl_entry *e = &crl->entry; e && e->serial.len; e = e->next)
		n++;
	return n;
}

SKY_TEST(init_writes_an_empty_crl_signed_by_the_ca)
{
	mbedtls_x509_crt ca;
	mbedtls_x509_crl crl;
	SKY_EXPECT_EQ(load_crt(&ca, SKY_CA_CERT_FILE), 0);
	SKY_EXPECT_EQ(load_crl(&crl), 0);
	SKY_EXPECT_EQ(crl.version, 2);
	SKY_EXPECT_EQ(n_entries(&crl), 0);
	SKY_EXPECT(crl_sig_ok(&crl, &ca));
	/* the issuer is the CA's subject byte for byte */
	SKY_EXPECT(crl.issuer_raw.len == ca.subject_raw.len &&
		   !memcmp(crl.issuer_raw.p, ca.subject_raw.p, ca.subject_raw.len));
	/* next update is the CA's own expiry, years away */
	SKY_EXPECT(crl.next_update.year >= crl.this_update.year + 9);
	mbedtls_x509_crl_free(&crl);
	mbedtls_x509_crt_free(&ca);
	char p[700];
	path(p, sizeof p, SKY_CA_BROKER_CONF_FILE);
	static char conf[8192];
	long n = sky_file_read(p, conf, sizeof conf - 1);
	SKY_EXPECT(n > 0);
	conf[n > 0 ? n : 0] = '\0';
	/* both listeners check it */
	const char *a = strstr(conf, "\ncrlfile ");
	SKY_EXPECT(a && strstr(a + 1, "\ncrlfile "));
}

SKY_TEST(revoke_lists_the_boards_serial_and_verifies)
{
	static char reply[SKY_ENROLL_REPLY_MAX + 1];
	SKY_EXPECT_EQ(enroll("rv-a", reply, sizeof reply), 0);
	SKY_EXPECT_EQ(enroll("rv-b", reply, sizeof reply), 0);
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_crl_revoke(pki(), "rv-a", SKY_CRL_REASON_KEY_COMPROMISE, &d), 0);
	mbedtls_x509_crt ca, a, b;
	mbedtls_x509_crl crl;
	SKY_EXPECT_EQ(load_crt(&ca, SKY_CA_CERT_FILE), 0);
	SKY_EXPECT_EQ(load_crt(&a, SKY_CA_CERTS_DIR "/rv-a.crt"), 0);
	SKY_EXPECT_EQ(load_crt(&b, SKY_CA_CERTS_DIR "/rv-b.crt"), 0);
	SKY_EXPECT_EQ(load_crl(&crl), 0);
	SKY_EXPECT_EQ(n_entries(&crl), 1);
	SKY_EXPECT(crl.entry.serial.len == a.serial.len &&
		   !memcmp(crl.entry.serial.p, a.serial.p, a.serial.len));
	SKY_EXPECT_EQ(mbedtls_x509_crt_is_revoked(&a, &crl), 1);
	SKY_EXPECT_EQ(mbedtls_x509_crt_is_revoked(&b, &crl), 0);
	SKY_EXPECT(crl_sig_ok(&crl, &ca));
	/* Mbed TLS's own chain check with the CRL: a revoked, b fine */
	uint32_t fl = 0;
	SKY_EXPECT(mbedtls_x509_crt_verify(&a, &ca, &crl, NULL, &fl, NULL, NULL) != 0);
	SKY_EXPECT(fl & MBEDTLS_X509_BADCERT_REVOKED);
	fl = 0;
	SKY_EXPECT_EQ(mbedtls_x509_crt_verify(&b, &ca, &crl, NULL, &fl, NULL, NULL), 0);
	/* the reason code is in the entry's extensions, ending in ENUMERATED 1
	 * (Mbed TLS keeps p at the SEQUENCE's tag, len its content's length) */
	SKY_EXPECT(crl.entry.entry_ext.len > 0 &&
		   !memcmp(crl.entry.entry_ext.p + 2 + crl.entry.entry_ext.len - 3, "\x0a\x01\x01",
			   3));
	mbedtls_x509_crl_free(&crl);

	/* again: nothing changes, not even the file */
	char p[700];
	static char before[8192], after[8192];
	path(p, sizeof p, SKY_CRL_FILE);
	long n1 = sky_file_read(p, before, sizeof before);
	SKY_EXPECT_EQ(sky_crl_revoke(pki(), "rv-a", SKY_CRL_REASON_NONE, NULL), 1);
	long n2 = sky_file_read(p, after, sizeof after);
	SKY_EXPECT(n1 > 0 && n1 == n2 && !memcmp(before, after, (size_t)n1));

	/* a second board: both listed, in order, the CRL number grew */
	SKY_EXPECT_EQ(sky_crl_revoke(pki(), "rv-b", SKY_CRL_REASON_NONE, NULL), 0);
	SKY_EXPECT_EQ(load_crl(&crl), 0);
	SKY_EXPECT_EQ(n_entries(&crl), 2);
	SKY_EXPECT_EQ(mbedtls_x509_crt_is_revoked(&a, &crl), 1);
	SKY_EXPECT_EQ(mbedtls_x509_crt_is_revoked(&b, &crl), 1);
	SKY_EXPECT(crl.entry.next && crl.entry.next->entry_ext.len == 0); /* no reason given */
	SKY_EXPECT(crl_sig_ok(&crl, &ca));
	mbedtls_x509_crl_free(&crl);
	int64_t num = 0;
	path(p, sizeof p, SKY_CRL_NUMBER_FILE);
	SKY_EXPECT_EQ(sky_file_read_count(p, &num), 0);
	SKY_EXPECT(num >= 3); /* init, rv-a, rv-b */

	sky_crl_list *l = malloc(sizeof *l);
	SKY_EXPECT(l && sky_crl_list_load(pki(), l, NULL) == 0);
	SKY_EXPECT(l && l->n == 2 && sky_crl_list_has_id(l, "rv-a") && sky_crl_list_has_id(l, "rv-b") &&
		   !sky_crl_list_has_id(l, "rv-c") && l->e[0].reason == SKY_CRL_REASON_KEY_COMPROMISE);
	free(l);
	mbedtls_x509_crt_free(&a);
	mbedtls_x509_crt_free(&b);
	mbedtls_x509_crt_free(&ca);
}

SKY_TEST(a_revoked_id_cannot_enroll_again)
{
	static char reply[SKY_ENROLL_REPLY_MAX + 1];
	SKY_EXPECT_EQ(enroll("rv-c", reply, sizeof reply), 0);
	SKY_EXPECT_EQ(sky_crl_revoke(pki(), "rv-c", SKY_CRL_REASON_NONE, NULL), 0);
	/* even with a token bound to it */
	SKY_EXPECT_EQ(enroll("rv-c", reply, sizeof reply), SKY_EAUTH);
	SKY_EXPECT_MSG(strstr(reply, "is revoked") != NULL, "%s", reply);
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_ca_check_not_revoked(pki(), "rv-c", &d), SKY_EAUTH);
	SKY_EXPECT_EQ(sky_ca_check_not_revoked(pki(), "rv-d", NULL), 0);
}

/* A board enrolled twice (a token bound to it: a lost key) holds two valid
 * certificates; a revoke puts both on the CRL, and Mbed TLS's chain check
 * refuses both. */
SKY_TEST(revoke_covers_every_certificate_of_a_board)
{
	static char reply[SKY_ENROLL_REPLY_MAX + 1], first[4096];
	char p[700];
	SKY_EXPECT_EQ(enroll("rv-twice", reply, sizeof reply), 0);
	path(p, sizeof p, SKY_CA_CERTS_DIR "/rv-twice.crt");
	long n = sky_file_read(p, first, sizeof first - 1);
	SKY_EXPECT(n > 0);
	first[n > 0 ? n : 0] = '\0';
	SKY_EXPECT_EQ(enroll("rv-twice", reply, sizeof reply), 0);
	mbedtls_x509_crt ca, old, cur;
	mbedtls_x509_crl crl;
	SKY_EXPECT_EQ(load_crt(&ca, SKY_CA_CERT_FILE), 0);
	SKY_EXPECT_EQ(load_crt(&cur, SKY_CA_CERTS_DIR "/rv-twice.crt"), 0);
	mbedtls_x509_crt_init(&old);
	SKY_EXPECT_EQ(mbedtls_x509_crt_parse(&old, (const unsigned char *)first, (size_t)n + 1), 0);
	SKY_EXPECT(old.serial.len != cur.serial.len ||
		   memcmp(old.serial.p, cur.serial.p, cur.serial.len) != 0);
	/* both valid before */
	uint32_t fl = 0;
	SKY_EXPECT_EQ(mbedtls_x509_crt_verify(&old, &ca, NULL, NULL, &fl, NULL, NULL), 0);
	SKY_EXPECT_EQ(mbedtls_x509_crt_verify(&cur, &ca, NULL, NULL, &fl, NULL, NULL), 0);
	SKY_EXPECT_EQ(sky_crl_revoke(pki(), "rv-twice", SKY_CRL_REASON_KEY_COMPROMISE, NULL), 0);
	SKY_EXPECT_EQ(load_crl(&crl), 0);
	SKY_EXPECT_EQ(mbedtls_x509_crt_is_revoked(&old, &crl), 1);
	SKY_EXPECT_EQ(mbedtls_x509_crt_is_revoked(&cur, &crl), 1);
	fl = 0;
	SKY_EXPECT(mbedtls_x509_crt_verify(&old, &ca, &crl, NULL, &fl, NULL, NULL) != 0 &&
		   (fl & MBEDTLS_X509_BADCERT_REVOKED));
	fl = 0;
	SKY_EXPECT(mbedtls_x509_crt_verify(&cur, &ca, &crl, NULL, &fl, NULL, NULL) != 0 &&
		   (fl & MBEDTLS_X509_BADCERT_REVOKED));
	mbedtls_x509_crl_free(&crl);
	/* the revoked list names the board once per certificate */
	sky_crl_list *l = malloc(sizeof *l);
	int mine = 0;
	SKY_EXPECT(l && sky_crl_list_load(pki(), l, NULL) == 0);
	for (int i = 0; l && i < l->n; i++)
		mine += strcmp(l->e[i].id, "rv-twice") == 0;
	SKY_EXPECT_EQ(mine, 2);
	free(l);
	/* again: both listed, nothing changes */
	SKY_EXPECT_EQ(sky_crl_revoke(pki(), "rv-twice", SKY_CRL_REASON_NONE, NULL), 1);
	mbedtls_x509_crt_free(&old);
	mbedtls_x509_crt_free(&cur);
	mbedtls_x509_crt_free(&ca);
}

SKY_TEST(unknown_or_bad_ids_are_refused_by_name)
{
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_crl_revoke(pki(), "never-enrolled", SKY_CRL_REASON_NONE, &d), SKY_ENOTFOUND);
	SKY_EXPECT_MSG(strstr(d.msg, "'never-enrolled'") != NULL, "%s", d.msg);
	SKY_EXPECT_EQ(sky_crl_revoke(pki(), "a/b", SKY_CRL_REASON_NONE, NULL), SKY_EINVAL);
	char nopki[600];
	snprintf(nopki, sizeof nopki, "%s/no-pki", sky_test_tmp_dir());
	SKY_EXPECT_EQ(sky_crl_revoke(nopki, "x1", SKY_CRL_REASON_NONE, NULL), SKY_ENOTFOUND);
	int code = -7;
	SKY_EXPECT_EQ(sky_crl_reason_parse("keyCompromise", &code, NULL), 0);
	SKY_EXPECT_EQ(code, SKY_CRL_REASON_KEY_COMPROMISE);
	SKY_EXPECT_EQ(sky_crl_reason_parse("cessation-of-operation", &code, NULL), 0);
	SKY_EXPECT_EQ(code, SKY_CRL_REASON_CESSATION);
	SKY_EXPECT_EQ(sky_crl_reason_parse("SUPERSEDED", &code, NULL), 0);
	SKY_EXPECT_EQ(code, SKY_CRL_REASON_SUPERSEDED);
	SKY_EXPECT_EQ(sky_crl_reason_parse("because", &code, NULL), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_crl_reason_parse("keyCompromiseX", &code, NULL), SKY_EINVAL);
}

/* Many entries, serials with the top bit set (content with a leading 0x00)
 * and short ones, a date past 2049 (GeneralizedTime), a big CRL number. */
SKY_TEST(writer_round_trips_many_entries_and_both_time_forms)
{
	mbedtls_x509_crt ca;
	mbedtls_pk_context key;
	mbedtls_pk_init(&key);
	char p[700];
	SKY_EXPECT_EQ(load_crt(&ca, SKY_CA_CERT_FILE), 0);
	path(p, sizeof p, SKY_CA_KEY_FILE);
	SKY_EXPECT_EQ(sky_sign_load_key(&key, p, NULL), 0);
	enum { N = 300 };
	static sky_crl_entry e[N];
	for (int i = 0; i < N; i++) {
		memset(&e[i], 0, sizeof e[i]);
		snprintf(e[i].id, sizeof e[i].id, "b%d", i);
		e[i].serial_len = (size_t)(1 + i % 17);
		for (size_t k = 0; k < e[i].serial_len; k++)
			e[i].serial[k] = (unsigned char)(i * 7 + k * 13 + 1);
		e[i].serial[0] &= 0x7f; /* positive */
		if (i % 5 == 0 && e[i].serial_len < 17) {
			memmove(e[i].serial + 1, e[i].serial, e[i].serial_len++);
			e[i].serial[0] = 0;
			e[i].serial[1] |= 0x80;
		}
		e[i].when = 1700000000 + i;
		e[i].reason = i % 3 == 0 ? SKY_CRL_REASON_NONE : i % 6;
	}
	static unsigned char buf[SKY_CRL_DER_MAX];
	unsigned char *der = NULL;
	int64_t t2051 = 2556144000; /* 2051-01-01 */
	int n = sky_crl_write_der(&key, &ca, e, N, 1700000000, t2051, 0x123456789aLL, rng(), buf,
				  sizeof buf, &der, NULL);
	SKY_EXPECT(n > 0);
	mbedtls_x509_crl crl;
	mbedtls_x509_crl_init(&crl);
	SKY_EXPECT_EQ(mbedtls_x509_crl_parse_der(&crl, der, (size_t)(n > 0 ? n : 0)), 0);
	SKY_EXPECT_EQ(n_entries(&crl), N);
	SKY_EXPECT_EQ(crl.next_update.year, 2051);
	SKY_EXPECT_EQ(crl.this_update.year, 2023);
	int i = 0, same = 1;
	for (const mbedtls_x509_crl_entry *x = &crl.entry; x && x->serial.len; x = x->next, i++)
		same &= x->serial.len == e[i].serial_len &&
			!memcmp(x->serial.p, e[i].serial, e[i].serial_len) &&
			x->revocation_date.year == 2023;
	SKY_EXPECT(same && i == N);
	SKY_EXPECT(crl_sig_ok(&crl, &ca));
	mbedtls_x509_crl_free(&crl);

	/* too small a buffer is a clean SKY_ERANGE */
	SKY_EXPECT_EQ(sky_crl_write_der(&key, &ca, e, N, 1700000000, t2051, 1, rng(), buf, 512,
					&der, NULL),
		      SKY_ERANGE);
	mbedtls_pk_free(&key);
	mbedtls_x509_crt_free(&ca);
}

SKY_TEST(a_tampered_crl_fails_to_parse_or_to_verify)
{
	mbedtls_x509_crt ca;
	mbedtls_pk_context key;
	mbedtls_pk_init(&key);
	char p[700];
	SKY_EXPECT_EQ(load_crt(&ca, SKY_CA_CERT_FILE), 0);
	path(p, sizeof p, SKY_CA_KEY_FILE);
	SKY_EXPECT_EQ(sky_sign_load_key(&key, p, NULL), 0);
	sky_crl_entry e;
	memset(&e, 0, sizeof e);
	snprintf(e.id, sizeof e.id, "t1");
	memcpy(e.serial, "\x41\x42\x43\x44\x45\x46\x47\x48", 8);
	e.serial_len = 8;
	e.when = 1800000000;
	e.reason = SKY_CRL_REASON_NONE;
	static unsigned char buf[4096], copy[4096];
	unsigned char *der = NULL;
	int n = sky_crl_write_der(&key, &ca, &e, 1, 1800000000, 1900000000, 5, rng(), buf,
				  sizeof buf, &der, NULL);
	SKY_EXPECT(n > 0 && n <= (int)sizeof copy);
	if (n <= 0)
		return;
	mbedtls_x509_crl crl;
	mbedtls_x509_crl_init(&crl);
	SKY_EXPECT_EQ(mbedtls_x509_crl_parse_der(&crl, der, (size_t)n), 0);
	SKY_EXPECT(crl_sig_ok(&crl, &ca));
	mbedtls_x509_crl_free(&crl);

	/* one bit of the serial flipped: still a CRL, but not the CA's */
	memcpy(copy, der, (size_t)n);
	unsigned char *sp = memmem(copy, (size_t)n, "\x41\x42\x43\x44", 4);
	SKY_EXPECT(sp != NULL);
	if (sp)
		sp[3] ^= 1;
	mbedtls_x509_crl_init(&crl);
	SKY_EXPECT_EQ(mbedtls_x509_crl_parse_der(&crl, copy, (size_t)n), 0);
	SKY_EXPECT(!crl_sig_ok(&crl, &ca));
	mbedtls_x509_crl_free(&crl);

	/* the outer length broken: no CRL at all */
	memcpy(copy, der, (size_t)n);
	copy[2] ^= 0x10;
	mbedtls_x509_crl_init(&crl);
	SKY_EXPECT(mbedtls_x509_crl_parse_der(&crl, copy, (size_t)n) != 0);
	mbedtls_x509_crl_free(&crl);

	/* signed by another key (a board's): parses, does not verify */
	mbedtls_pk_context other;
	mbedtls_pk_init(&other);
	SKY_EXPECT_EQ(sky_sign_gen_key(&other, rng(), NULL), 0);
	n = sky_crl_write_der(&other, &ca, &e, 1, 1800000000, 1900000000, 6, rng(), buf, sizeof buf,
			      &der, NULL);
	mbedtls_x509_crl_init(&crl);
	SKY_EXPECT(n > 0 && mbedtls_x509_crl_parse_der(&crl, der, (size_t)n) == 0);
	SKY_EXPECT(!crl_sig_ok(&crl, &ca));
	mbedtls_x509_crl_free(&crl);
	mbedtls_pk_free(&other);
	mbedtls_pk_free(&key);
	mbedtls_x509_crt_free(&ca);
}
