/* The fleet CA: PKI directory, broker config, tokens, CSR intake, enrollment. */
#include "sky_test.h"

#include "sky_broker_conf.h"
#include "sky_ca.h"
#include "sky_clock.h"
#include "sky_crl.h"
#include "sky_file.h"
#include "sky_pki.h"
#include "sky_pki_layout.h"

#include <mbedtls/x509_csr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char g_pki[512];
static sky_sign_rng g_rng;

static const char *pki(void)
{
	if (!g_pki[0]) {
		snprintf(g_pki, sizeof g_pki, "%s/pki", sky_test_tmp_dir());
		sky_ca_opts o = {.port = 18999, .max_packet = 65536};
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

static void file(char *buf, size_t cap, const char *name) { snprintf(buf, cap, "%s/%s", pki(), name); }

/* Loads the PKI's certificate name into c (initialised here, freed by the
 * caller) and expects it to load and to carry the common name cn. */
static void load_cert_cn(mbedtls_x509_crt *c, const char *name, const char *cn)
{
	char p[700], got[80] = "";
	mbedtls_x509_crt_init(c);
	file(p, sizeof p, name);
	SKY_EXPECT_MSG(sky_sign_load_cert(c, p, NULL) == 0, "%s does not load", name);
	SKY_EXPECT_MSG(sky_sign_cert_cn(c, got, sizeof got) == 0 && strcmp(got, cn) == 0,
		       "%s: CN '%s', want '%s'", name, got, cn);
}

/* A CSR with the given subject string (Mbed TLS DN syntax), signed by key
 * (a fresh P-256 key if NULL), as PEM. Returns the length. */
static int make_csr(const char *subject, mbedtls_ecp_group_id curve, char *out, size_t cap)
{
	mbedtls_pk_context pk;
	mbedtls_pk_init(&pk);
	mbedtls_pk_setup(&pk, mbedtls_pk_info_from_type(MBEDTLS_PK_ECKEY));
	mbedtls_ecp_gen_key(curve, mbedtls_pk_ec(pk), sky_sign_rng_func, rng());
	mbedtls_x509write_csr w;
	mbedtls_x509write_csr_init(&w);
	mbedtls_x509write_csr_set_md_alg(&w, MBEDTLS_MD_SHA256);
	mbedtls_x509write_csr_set_key(&w, &pk);
	int rc = mbedtls_x509write_csr_set_subject_name(&w, subject);
	if (rc == 0)
		rc = mbedtls_x509write_csr_pem(&w, (unsigned char *)out, cap, sky_sign_rng_func, rng());
	mbedtls_x509write_csr_free(&w);
	mbedtls_pk_free(&pk);
	return rc == 0 ? (int)strlen(out) : -1;
}

static int issue(const char *csr, size_t len, const char *id, char *out, size_t cap, sky_diag *d)
{
	sky_ca ca;
	sky_ca_init(&ca);
	int rc = sky_ca_open(&ca, pki(), d);
	if (rc == 0)
		rc = sky_ca_issue(&ca, csr, len, id, out, cap, d);
	sky_ca_free(&ca);
	return rc;
}

SKY_TEST(init_makes_the_layout_with_private_keys)
{
	const char *keys[] = {SKY_CA_KEY_FILE, SKY_CA_BROKER_KEY_FILE, SKY_CA_PLANNER_KEY_FILE,
			      SKY_CA_CLAIM_KEY_FILE, SKY_CA_OPERATOR_KEY_FILE};
	const char *pub[] = {SKY_CA_CERT_FILE,       SKY_CA_BROKER_CERT_FILE, SKY_CA_PLANNER_CERT_FILE,
			     SKY_CA_CLAIM_CERT_FILE, SKY_CA_CLAIM_CA_FILE,    SKY_CA_BROKER_CONF_FILE,
			     SKY_CA_ACL_FILE,        SKY_CA_ACL_CLAIM_FILE,   SKY_CA_OPERATOR_CERT_FILE};
	char p[700];
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
		file(p, sizeof p, keys[i]);
		SKY_EXPECT_MSG(sky_file_mode(p) == 0600, "%s mode %o", keys[i], sky_file_mode(p));
	}
	for (size_t i = 0; i < sizeof pub / sizeof pub[0]; i++) {
		file(p, sizeof p, pub[i]);
		SKY_EXPECT_MSG(sky_file_mode(p) == 0644, "%s mode %o", pub[i], sky_file_mode(p));
	}
	/* every certificate chains to the CA with the CN the ACL expects */
	mbedtls_x509_crt ca, c;
	mbedtls_x509_crt_init(&ca);
	file(p, sizeof p, SKY_CA_CERT_FILE);
	SKY_EXPECT_EQ(sky_sign_load_cert(&ca, p, NULL), 0);
	SKY_EXPECT(ca.ca_istrue);
	const char *certs[][2] = {{SKY_CA_BROKER_CERT_FILE, "localhost"},
				  {SKY_CA_PLANNER_CERT_FILE, "sky-planner"},
				  {SKY_CA_CLAIM_CERT_FILE, "sky-claim"},
				  {SKY_CA_OPERATOR_CERT_FILE, "sky-operator"}};
	for (size_t i = 0; i < sizeof certs / sizeof certs[0]; i++) {
		load_cert_cn(&c, certs[i][0], certs[i][1]);
		uint32_t flags = 0;
		SKY_EXPECT_EQ(mbedtls_x509_crt_verify(&c, &ca, NULL, NULL, &flags, NULL, NULL), 0);
		SKY_EXPECT(!c.ca_istrue);
		mbedtls_x509_crt_free(&c);
	}
	mbedtls_x509_crt_free(&ca);
	/* a second init does not replace the CA */
	sky_ca_opts o = {.port = 1};
	SKY_EXPECT_EQ(sky_ca_init_dir(pki(), &o, NULL), SKY_ESTATE);
	o.port = 0;
	SKY_EXPECT_EQ(sky_ca_init_dir("/nonexistent-never", &o, NULL), SKY_EINVAL);
}

/* 1 if every "pattern" line of a claim-listener ACL is one of the two
 * enrollment lines pinned to the connection's client id. */
static int claim_acl_patterns_are_enrollment_only(const char *acl)
{
	int n = 0;
	for (const char *p = strstr(acl, "pattern"); p; p = strstr(p + 1, "pattern")) {
		if (strncmp(p, "pattern write sky/v1/enroll/%c/csr\n", 35) != 0 &&
		    strncmp(p, "pattern read sky/v1/enroll/%c/cert\n", 35) != 0)
			return 0;
		n++;
	}
	return n == 2;
}

SKY_TEST(broker_config_and_acl)
{
	char p[700], conf[8192], acl[8192];
	file(p, sizeof p, SKY_CA_BROKER_CONF_FILE);
	long n = sky_file_read(p, conf, sizeof conf - 1);
	SKY_EXPECT(n > 0);
	conf[n > 0 ? n : 0] = '\0';
	const char *need[] = {"\nlistener 18999 127.0.0.1\n", "\nrequire_certificate true\n",
			      "\nuse_identity_as_username true\n", "\nallow_anonymous false\n",
			      "\nset_tcp_nodelay true\n", "\nmax_packet_size 65536\n",
			      "\npersistence true\n", "\nuser root\n", "\nacl_file /",
			      "\nper_listener_settings true\n", "\nclientid_prefixes sky:\n",
			      "\nlistener 19000 127.0.0.1\n",
			      /* bounded queues per client */
			      "\nmax_inflight_bytes 67108864\n", "\nmax_queued_bytes 268435456\n",
			      "\nmax_queued_messages 1000\n"};
	for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
		SKY_EXPECT_MSG(strstr(conf, need[i]) != NULL, "missing %s", need[i] + 1);
	/* the fleet listener names clients by CN, the claim listener does not */
	const char *fleet = strstr(conf, "\nlistener 18999 "), *claim = strstr(conf, "\nlistener 19000 ");
	const char *bind = strstr(conf, "\nuse_username_as_clientid true\n");
	SKY_EXPECT(fleet && claim && bind && fleet < bind && bind < claim);
	SKY_EXPECT(bind && strstr(bind + 2, "use_username_as_clientid") == NULL);
	SKY_EXPECT(claim && strstr(claim, "acl_file /") && strstr(strstr(claim, "acl_file /"), "/acl-claim\n"));
	/* retained plans survive a broker restart, in a directory of the PKI */
	char loc[800];
	snprintf(loc, sizeof loc, "\npersistence_location %s/" SKY_CA_BROKER_STATE_DIR "/\n", pki());
	SKY_EXPECT_MSG(strstr(conf, loc) != NULL, "no %s", loc + 1);
	file(p, sizeof p, SKY_CA_BROKER_STATE_DIR);
	SKY_EXPECT_EQ(sky_file_mode(p), 0700);
	file(p, sizeof p, SKY_CA_ACL_FILE);
	n = sky_file_read(p, acl, sizeof acl - 1);
	SKY_EXPECT(n > 0);
	acl[n > 0 ? n : 0] = '\0';
	/* nothing grants a bare wildcard, and boards are confined to %u */
	const char *wide[] = {"read #\n", "write #\n", "readwrite #\n", " sky/v1/#\n"};
	for (size_t i = 0; i < sizeof wide / sizeof wide[0]; i++)
		SKY_EXPECT_MSG(strstr(acl, wide[i]) == NULL, "grants %s", wide[i]);
	SKY_EXPECT(strstr(acl, "pattern write sky/v1/board/%u/caps\n") != NULL);
	/* on the fleet listener the claim identity gets nothing at all */
	SKY_EXPECT(strstr(acl, "user sky-claim\ntopic deny #\n") != NULL);
	SKY_EXPECT(strstr(acl, "enroll/+/csr\n") && !strstr(acl, "topic write sky/v1/enroll/+/csr\n"));
	/* the operator submits under its own CN and nowhere else */
	SKY_EXPECT(strstr(acl, "user sky-operator\ntopic deny sky/v1/board/sky-operator/#\n") != NULL);
	SKY_EXPECT(strstr(acl, "topic write sky/v1/jobs/sky-operator/submit\n") != NULL);
	SKY_EXPECT(strstr(acl, "topic write sky/v1/jobs/+/submit\n") == NULL);
	file(p, sizeof p, SKY_CA_ACL_CLAIM_FILE);
	n = sky_file_read(p, acl, sizeof acl - 1);
	SKY_EXPECT(n > 0);
	acl[n > 0 ? n : 0] = '\0';
	/* the claim identity enrolls under its own connection's id only: one
	 * nonce, one rate-limit bucket per connection, its own answer */
	SKY_EXPECT(strstr(acl, "user sky-claim\npattern write sky/v1/enroll/%c/csr\n"
			       "pattern read sky/v1/enroll/%c/cert\n") != NULL);
	SKY_EXPECT(strstr(acl, "enroll/+/") == NULL);
	/* boards get nothing on this listener; operators their own sections (their
	 * tools connect here), which write nothing under the board tree; the
	 * only patterns are those two */
	SKY_EXPECT(claim_acl_patterns_are_enrollment_only(acl));
	SKY_EXPECT(strstr(acl, "\nuser " SKY_CA_OPERATOR_CN "\n") != NULL);
	SKY_EXPECT(strstr(acl, "write sky/v1/board") == NULL && strstr(acl, "readwrite") == NULL);
	/* port + 1 is the claim listener: 65535 leaves no room */
	SKY_EXPECT_EQ(sky_ca_write_broker_conf(pki(), 65535, 0, NULL), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_ca_write_broker_conf(pki(), 70000, 0, NULL), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_ca_write_broker_conf(pki(), 18999, 10, NULL), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_ca_write_broker_conf(pki(), 18999, 65536, NULL), 0);
	/* mosquitto splits config lines on spaces: such a path is refused, not mangled */
	char spaced[700];
	snprintf(spaced, sizeof spaced, "%s/with space", sky_test_tmp_dir());
	SKY_EXPECT_EQ(sky_file_mkdirs(spaced, 0700), 0);
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_ca_write_broker_conf(spaced, 18999, 0, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "spaces") != NULL);
	SKY_EXPECT_EQ(sky_ca_write_broker_conf("/nonexistent-pki-dir", 18999, 0, NULL), SKY_ENOTFOUND);
}

SKY_TEST(operators_get_a_bundle_and_an_acl_section)
{
	char p[700], acl[16384];
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_ca_add_operator(pki(), "alice", &d), 0);
	SKY_EXPECT_EQ(sky_ca_add_operator(pki(), "alice", NULL), SKY_ESTATE);
	SKY_EXPECT_EQ(sky_ca_add_operator(pki(), "a/b", NULL), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_ca_add_operator(pki(), "", NULL), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_ca_add_operator("/nonexistent-pki-dir", "bob", NULL), SKY_ENOTFOUND);
	const char *bundle[] = {"operators/alice/ca.crt", "operators/alice/planner.crt",
				"operators/alice/operator.crt", "operators/alice/operator.key"};
	for (size_t i = 0; i < 4; i++) {
		file(p, sizeof p, bundle[i]);
		SKY_EXPECT_MSG(sky_file_exists(p), "missing %s", bundle[i]);
	}
	SKY_EXPECT_EQ(sky_file_mode(p), 0600);
	mbedtls_x509_crt c;
	load_cert_cn(&c, "operators/alice/operator.crt", "sky-op-alice");
	mbedtls_x509_crt_free(&c);
	file(p, sizeof p, SKY_CA_ACL_FILE);
	long n = sky_file_read(p, acl, sizeof acl - 1);
	acl[n > 0 ? n : 0] = '\0';
	SKY_EXPECT(strstr(acl, "user sky-op-alice\n") != NULL);
	SKY_EXPECT(strstr(acl, "topic write sky/v1/jobs/sky-op-alice/submit\n") != NULL);
	SKY_EXPECT(strstr(acl, "topic write sky/v1/jobs/sky-operator/submit\n") != NULL);
	/* a rewrite (e.g. another port) keeps the operators */
	SKY_EXPECT_EQ(sky_ca_write_broker_conf(pki(), 18999, 65536, NULL), 0);
	n = sky_file_read(p, acl, sizeof acl - 1);
	acl[n > 0 ? n : 0] = '\0';
	SKY_EXPECT(strstr(acl, "user sky-op-alice\n") != NULL);
}

/* The bridge lines of a site config, in order ("topic ..." lines only). */
static void topic_lines(const char *conf, char *out, size_t cap)
{
	size_t n = 0;
	out[0] = '\0';
	for (const char *p = conf; p && *p;) {
		const char *e = strchr(p, '\n');
		size_t l = e ? (size_t)(e - p) : strlen(p);
		if (l > 6 && strncmp(p, "topic ", 6) == 0 && n + l + 2 < cap) {
			memcpy(out + n, p, l);
			n += l;
			out[n++] = '\n';
			out[n] = '\0';
		}
		p = e ? e + 1 : NULL;
	}
}

SKY_TEST(sites_get_a_bridge_identity_a_broker_config_and_core_acl_sections)
{
	char p[700], conf[16384], lines[4096], acl[32768];
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_ca_add_site(pki(), "shop", "10.9.0.2", &d), 0);
	SKY_EXPECT_EQ(sky_ca_add_site(pki(), "shop", NULL, NULL), SKY_ESTATE);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_ca_add_site(pki(), "core", NULL, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "core broker's own site") != NULL);
	SKY_EXPECT_EQ(sky_ca_add_site(pki(), "a/b", NULL, NULL), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_ca_add_site(pki(), "x", "10.0.0", NULL), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_ca_add_site("/nonexistent-pki-dir", "x", NULL, NULL), SKY_ENOTFOUND);
	mbedtls_x509_crt c;
	load_cert_cn(&c, "sites/shop/bridge.crt", "sky-bridge-shop");
	mbedtls_x509_crt_free(&c);
	/* the site broker's certificate names the address it listens on */
	mbedtls_x509_crt_init(&c);
	file(p, sizeof p, "sites/shop/broker.crt");
	SKY_EXPECT_EQ(sky_sign_load_cert(&c, p, NULL), 0);
	/* subjectAltName: localhost, 127.0.0.1 and 10.9.0.2 */
	int ips = 0, lo = 0, names = 0;
	for (const mbedtls_x509_sequence *s = &c.subject_alt_names; s && s->buf.p; s = s->next) {
		names++;
		ips += s->buf.len == 4 && memcmp(s->buf.p, "\x0a\x09\x00\x02", 4) == 0;
		lo += s->buf.len == 4 && memcmp(s->buf.p, "\x7f\x00\x00\x01", 4) == 0;
	}
	SKY_EXPECT(names == 3 && ips == 1 && lo == 1);
	mbedtls_x509_crt_free(&c);
	file(p, sizeof p, "sites/shop/bridge.key");
	SKY_EXPECT_EQ(sky_file_mode(p), 0600);

	sky_ca_site_opts so = {.site = "shop", .listen = "10.9.0.2", .port = 19100,
			       .core = "10.9.0.1:18999"};
	SKY_EXPECT_EQ(sky_ca_write_site_conf(pki(), &so, &d), 0);
	file(p, sizeof p, "sites/shop/mosquitto.conf");
	long n = sky_file_read(p, conf, sizeof conf - 1);
	conf[n > 0 ? n : 0] = '\0';
	SKY_EXPECT(strstr(conf, "\nlistener 19100 10.9.0.2\n") != NULL);
	SKY_EXPECT(strstr(conf, "\naddress 10.9.0.1:18999\n") != NULL);
	SKY_EXPECT(strstr(conf, "\naddress 10.9.0.1:19000\n") != NULL); /* claim listener */
	/* the probe connection's id on the core's claim listener (which keeps
	 * ids) is not guessable, so no claim connection can take it; a new
	 * config gets a new one */
	const char *eid = strstr(conf, "\nremote_clientid sky:bridge-echo-shop-");
	size_t hex = eid ? strspn(eid + 38, "0123456789abcdef") : 0;
	SKY_EXPECT_MSG(eid && hex == 32 && eid[38 + 32] == '\n', "echo client id: %.80s",
		       eid ? eid : "(none)");
	char first[40] = "";
	if (eid)
		memcpy(first, eid + 38, 32);
	SKY_EXPECT_EQ(sky_ca_write_site_conf(pki(), &so, &d), 0);
	n = sky_file_read(p, conf, sizeof conf - 1);
	conf[n > 0 ? n : 0] = '\0';
	eid = strstr(conf, "\nremote_clientid sky:bridge-echo-shop-");
	SKY_EXPECT(eid && strncmp(eid + 38, first, 32) != 0);
	SKY_EXPECT(strstr(conf, "\nrequire_certificate true\nuse_identity_as_username true\n"
				"use_username_as_clientid true\n") != NULL);
	SKY_EXPECT(strstr(conf, "/sites/shop/bridge.crt\n") != NULL);
	/* the site broker checks the CA's CRL, a copy beside it that follows
	 * every revocation */
	SKY_EXPECT(strstr(conf, "/sites/shop/ca.crt\ncrlfile ") != NULL &&
		   strstr(conf, "/sites/shop/crl.pem\n") != NULL);
	{
		static char core_crl[8192], site_crl[8192];
		char q[700];
		file(p, sizeof p, SKY_CRL_FILE);
		file(q, sizeof q, "sites/shop/" SKY_CRL_FILE);
		long a = sky_file_read(p, core_crl, sizeof core_crl);
		long b = sky_file_read(q, site_crl, sizeof site_crl);
		SKY_EXPECT(a > 0 && a == b && memcmp(core_crl, site_crl, (size_t)a) == 0);
		SKY_EXPECT_EQ(sky_crl_refresh(pki(), NULL), 0);
		long a2 = sky_file_read(p, core_crl, sizeof core_crl);
		long b2 = sky_file_read(q, site_crl, sizeof site_crl);
		SKY_EXPECT(a2 > 0 && a2 == b2 && memcmp(core_crl, site_crl, (size_t)a2) == 0);
	}
	/* exactly these cross: no plain stage topic (a same-site frame stays),
	 * no echo of a board, nothing outside sky/v1 */
	topic_lines(conf, lines, sizeof lines);
	SKY_EXPECT_MSG(strcmp(lines, "topic sky/v1/board/+/caps out 1\n"
				     "topic sky/v1/board/+/status out 1\n"
				     "topic sky/v1/board/+/heartbeat out 0\n"
				     "topic sky/v1/board/+/plan-ack out 1\n"
				     "topic sky/v1/job/+/metrics/+ out 0\n"
				     "topic sky/v1/job/+/part/+ out 1\n"
				     "topic sky/v1/job/+/part/+/+ out 1\n"
				     "topic sky/v1/job/+/plan in 1\n"
				     "topic sky/v1/board/+/cmd in 1\n"
				     "topic sky/v1/job/+/ckpt/+ out 1\n"
				     "topic sky/v1/job/+/load/+ in 1\n"
				     "topic sky/v1/board/+/slice-req out 1\n"
				     "topic sky/v1/job/+/slice/+ in 1\n"
				     "topic sky/v1/job/+/req/+/+ in 1\n"
				     "topic sky/v1/job/+/replay/+/+ in 1\n"
				     "topic sky/v1/job/+/resp/+/+ out 1\n"
				     "topic sky/v1/site/+/job/+/stage/# out 1\n"
				     "topic job/+/stage/# in 1 sky/v1/ sky/v1/site/shop/\n"
				     "topic echo out 0 sky/v1/site/shop/loop/ sky/v1/site/shop/back/\n"
				     "topic echo in 0 sky/v1/site/shop/loop/ sky/v1/site/shop/\n") == 0,
		       "%s", lines);
	/* the core's ACL: the bridge's sections, and it is denied the plain stage topics */
	file(p, sizeof p, SKY_CA_ACL_FILE);
	n = sky_file_read(p, acl, sizeof acl - 1);
	acl[n > 0 ? n : 0] = '\0';
	const char *sec = strstr(acl, "\nuser sky-bridge-shop\n");
	SKY_EXPECT(sec != NULL);
	SKY_EXPECT(sec && strstr(sec, "topic deny sky/v1/job/+/stage/#\n") != NULL);
	SKY_EXPECT(sec && strstr(sec, "topic read sky/v1/site/shop/job/+/stage/#\n") != NULL);
	SKY_EXPECT(sec && strstr(sec, "topic read sky/v1/site/+/") == NULL);
	SKY_EXPECT(sec && strstr(sec, "topic write sky/v1/job/+/ckpt/+\n"
				      "topic read sky/v1/job/+/load/+\n") != NULL);
	file(p, sizeof p, SKY_CA_ACL_CLAIM_FILE);
	n = sky_file_read(p, acl, sizeof acl - 1);
	acl[n > 0 ? n : 0] = '\0';
	SKY_EXPECT(strstr(acl, "user sky-bridge-shop\ntopic read sky/v1/site/shop/echo\n") != NULL);
	/* bad configurations are refused, with the reason */
	sky_ca_site_opts bad = so;
	bad.core = "core.example:1883";
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_ca_write_site_conf(pki(), &bad, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "IPv4:PORT") != NULL);
	bad = so;
	bad.site = "nowhere";
	SKY_EXPECT_EQ(sky_ca_write_site_conf(pki(), &bad, NULL), SKY_ENOTFOUND);
	bad = so;
	bad.port = 0;
	SKY_EXPECT_EQ(sky_ca_write_site_conf(pki(), &bad, NULL), SKY_EINVAL);
	/* sky pki init --listen: the core's listeners bind there */
	SKY_EXPECT_EQ(sky_ca_write_broker_conf_at(pki(), "10.9.0.1", 18999, 65536, NULL), 0);
	file(p, sizeof p, SKY_CA_BROKER_CONF_FILE);
	n = sky_file_read(p, conf, sizeof conf - 1);
	conf[n > 0 ? n : 0] = '\0';
	SKY_EXPECT(strstr(conf, "\nlistener 18999 10.9.0.1\n") != NULL);
	SKY_EXPECT(strstr(conf, "\nlistener 19000 10.9.0.1\n") != NULL);
	SKY_EXPECT_EQ(sky_ca_write_broker_conf_at(pki(), "10.9.0", 18999, 65536, NULL), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_ca_write_broker_conf(pki(), 18999, 65536, NULL), 0);
}

SKY_TEST(clients_get_a_bundle_and_only_their_own_serving_topics)
{
	char p[700], acl[16384];
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_ca_add_client(pki(), "demo", &d), 0);
	SKY_EXPECT_EQ(sky_ca_add_client(pki(), "demo", NULL), SKY_ESTATE);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_ca_add_client(pki(), "a+b", &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "client name") != NULL);
	SKY_EXPECT_EQ(sky_ca_add_client(pki(), "", NULL), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_ca_add_client("/nonexistent-pki-dir", "bob", NULL), SKY_ENOTFOUND);
	const char *bundle[] = {"clients/demo/ca.crt", "clients/demo/client.crt",
				"clients/demo/client.key"};
	for (size_t i = 0; i < 3; i++) {
		file(p, sizeof p, bundle[i]);
		SKY_EXPECT_MSG(sky_file_exists(p), "missing %s", bundle[i]);
	}
	SKY_EXPECT_EQ(sky_file_mode(p), 0600);
	mbedtls_x509_crt c;
	load_cert_cn(&c, "clients/demo/client.crt", "sky-client-demo");
	mbedtls_x509_crt_free(&c);
	/* the fleet listener: nothing for the client (the board patterns there
	 * would hand it every request); boards read requests and answer, the
	 * planner too, operators are denied both */
	file(p, sizeof p, SKY_CA_ACL_FILE);
	long n = sky_file_read(p, acl, sizeof acl - 1);
	acl[n > 0 ? n : 0] = '\0';
	SKY_EXPECT(strstr(acl, "user sky-client-demo\ntopic deny #\n") != NULL);
	/* a board reads only the requests addressed to it, answers only as itself */
	SKY_EXPECT(strstr(acl, "pattern read sky/v1/job/+/req/%u/+\n") != NULL);
	SKY_EXPECT(strstr(acl, "pattern write sky/v1/job/+/resp/+/%u\n") != NULL);
	SKY_EXPECT(strstr(acl, "pattern read sky/v1/job/+/req/+\n") == NULL);
	SKY_EXPECT(strstr(acl, "pattern write sky/v1/job/+/resp/+\n") == NULL);
	/* every job message a board sends carries its id as the last level */
	SKY_EXPECT(strstr(acl, "pattern write sky/v1/job/+/metrics/%u\n") != NULL);
	SKY_EXPECT(strstr(acl, "pattern write sky/v1/job/+/stage/+/+/%u\n") != NULL);
	SKY_EXPECT(strstr(acl, "pattern read sky/v1/job/+/stage/#\n") != NULL);
	SKY_EXPECT(strstr(acl, "pattern write sky/v1/site/+/job/+/stage/+/+/%u\n") != NULL);
	SKY_EXPECT(strstr(acl, "pattern readwrite sky/v1/job/+/stage/#\n") == NULL);
	SKY_EXPECT(strstr(acl, "pattern write sky/v1/job/+/metrics\n") == NULL);
	SKY_EXPECT(strstr(acl, "user sky-op-alice\n") != NULL); /* the operators stay */
	const char *op = strstr(acl, "user sky-operator\n");
	SKY_EXPECT(op && strstr(op, "topic deny sky/v1/job/+/req/#\ntopic deny sky/v1/job/+/resp/#\n"
				    "topic deny sky/v1/job/+/replay/#\n"));
	/* serving faults: boards read the planner's replays, which only the
	 * planner writes; it reads answers and readiness, never frames */
	SKY_EXPECT(strstr(acl, "pattern read sky/v1/job/+/replay/%u/+\n") != NULL);
	const char *pl = strstr(acl, "user sky-planner\n");
	SKY_EXPECT(pl && strstr(pl, "topic write sky/v1/job/+/replay/+/+\n") &&
		   strstr(pl, "topic read sky/v1/job/+/resp/+/+\n") &&
		   strstr(pl, "topic write sky/v1/job/+/resp/+/sky-planner\n") &&
		   strstr(pl, "topic read sky/v1/job/+/stage/+/ready/+\n") &&
		   strstr(pl, "topic deny sky/v1/job/+/stage/+/fwd/#\n"));
	/* the tools listener: its own requests and responses, nothing else */
	file(p, sizeof p, SKY_CA_ACL_CLAIM_FILE);
	n = sky_file_read(p, acl, sizeof acl - 1);
	acl[n > 0 ? n : 0] = '\0';
	const char *mine = strstr(acl, "user sky-client-demo\n");
	SKY_EXPECT(mine != NULL);
	/* its section ends there (a site bridge's section may follow) */
	static const char want[] = "user sky-client-demo\n"
				   "topic write sky/v1/job/+/req/+/sky-client-demo\n"
				   "topic read sky/v1/job/+/resp/sky-client-demo/+\n"
				   "topic read sky/v1/job/+/plan\n";
	if (mine)
		SKY_EXPECT(strncmp(mine, want, sizeof want - 1) == 0 &&
			   (mine[sizeof want - 1] == '\0' || mine[sizeof want - 1] == '\n'));
	SKY_EXPECT(claim_acl_patterns_are_enrollment_only(acl) && strstr(acl, "resp/+") == NULL &&
		   strstr(acl, "req/+\n") == NULL);
	/* a hand-edited list cannot widen the ACL */
	file(p, sizeof p, SKY_CA_CLIENTS_FILE);
	SKY_EXPECT_EQ(sky_file_write(p, "demo\n#\n", 7, 0644), 0);
	SKY_EXPECT_EQ(sky_ca_rewrite_acl(pki(), NULL), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_file_write(p, "demo\n", 5, 0644), 0);
	SKY_EXPECT_EQ(sky_ca_rewrite_acl(pki(), NULL), 0);
}

SKY_TEST(tokens_are_one_time_expiring_and_bound)
{
	char t1[SKY_ENROLL_TOKEN_LEN + 1], t2[SKY_ENROLL_TOKEN_LEN + 1], t3[SKY_ENROLL_TOKEN_LEN + 1];
	int64_t now = sky_clock_unix();
	SKY_EXPECT_EQ(sky_ca_token_new(pki(), 100, NULL, rng(), t1, NULL), 0);
	SKY_EXPECT_EQ(sky_enroll_check_token(t1, NULL), 0);
	/* only a hash is stored: the token text is in no file name */
	char p[700];
	snprintf(p, sizeof p, "%s/tokens/%s", pki(), t1);
	SKY_EXPECT(!sky_file_exists(p));
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_ca_token_use(pki(), t1, "t-a", now, 0, &d), 0); /* check only */
	SKY_EXPECT_EQ(sky_ca_token_use(pki(), t1, "t-a", now, 1, &d), 0); /* use */
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_ca_token_use(pki(), t1, "t-a", now, 1, &d), SKY_EAUTH);
	SKY_EXPECT(strstr(d.msg, "already used") != NULL);
	/* expiry, judged by the clock passed in */
	SKY_EXPECT_EQ(sky_ca_token_new(pki(), 100, NULL, rng(), t2, NULL), 0);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_ca_token_use(pki(), t2, "t-b", now + 101, 1, &d), SKY_EAUTH);
	SKY_EXPECT(strstr(d.msg, "expired") != NULL);
	/* and an expired token is gone for good */
	SKY_EXPECT_EQ(sky_ca_token_use(pki(), t2, "t-b", now, 0, NULL), SKY_EAUTH);
	/* bound to an id */
	SKY_EXPECT_EQ(sky_ca_token_new(pki(), 100, "t-c", rng(), t3, NULL), 0);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_ca_token_use(pki(), t3, "t-d", now, 1, &d), SKY_EAUTH);
	SKY_EXPECT(strstr(d.msg, "bound") != NULL);
	SKY_EXPECT_EQ(sky_ca_token_use(pki(), t3, "t-c", now, 1, NULL), 0);
	/* malformed or unknown tokens, bad TTLs and bad bound ids */
	SKY_EXPECT_EQ(sky_ca_token_use(pki(), "../../etc/passwd", "x", now, 1, NULL), SKY_EAUTH);
	SKY_EXPECT_EQ(sky_ca_token_use(pki(), "0123456789abcdef0123456789abcdef", "x", now, 1, NULL),
		      SKY_EAUTH);
	SKY_EXPECT_EQ(sky_ca_token_new(pki(), 0, NULL, rng(), t1, NULL), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_ca_token_new(pki(), SKY_CA_MAX_TOKEN_TTL + 1, NULL, rng(), t1, NULL),
		      SKY_EINVAL);
	SKY_EXPECT_EQ(sky_ca_token_new(pki(), 10, "a/b", rng(), t1, NULL), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_ca_token_new("/nonexistent-pki", 10, NULL, rng(), t1, NULL), SKY_ENOTFOUND);
}

SKY_TEST(csr_intake_refuses_bad_ids)
{
	char csr[SKY_ENROLL_CSR_MAX], out[4096];
	struct {
		const char *subject, *id;
		int want;
	} cases[] = {
		{"CN=a#b", "a#b", SKY_EINVAL},
		{"CN=a+b", "a+b", SKY_EINVAL},
		{"CN=a/b", "a/b", SKY_EINVAL},
		{"CN=#", "#", SKY_EINVAL},
		{"CN=a\x01z", "a\x01z", SKY_EINVAL},
		{"CN=a\x1b[31m", "a\x1b[31m", SKY_EINVAL},
		{"CN=a.b", "a.b", SKY_EINVAL},
		{"CN=sky-planner", "sky-planner", SKY_EINVAL},
		{"CN=sky-claim", "sky-claim", SKY_EINVAL},
		{"CN=sky-operator", "sky-operator", SKY_EINVAL},
		{"CN=sky-op-alice", "sky-op-alice", SKY_EINVAL}, /* the fleet's "sky-" */
		{"O=sky", "b1", SKY_EINVAL},             /* no CN */
		{"CN=b1", "b2", SKY_EAUTH},              /* CN is not the requested id */
		{"CN=b1", "b1", 1},                      /* fine */
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		int n = make_csr(cases[i].subject, MBEDTLS_ECP_DP_SECP256R1, csr, sizeof csr);
		SKY_EXPECT_MSG(n > 0, "case %zu: CSR not made", i);
		sky_diag d;
		sky_diag_clear(&d);
		int rc = issue(csr, (size_t)n, cases[i].id, out, sizeof out, &d);
		if (cases[i].want > 0)
			SKY_EXPECT_MSG(rc > 0, "case %zu: rc %d (%s)", i, rc, d.msg);
		else
			SKY_EXPECT_MSG(rc == cases[i].want && d.msg[0], "case %zu: rc %d (%s)", i, rc,
				       d.msg);
	}
}

SKY_TEST(csr_intake_checks_size_key_and_signature)
{
	char csr[8192], out[4096];
	sky_diag d;
	int n = make_csr("CN=b9", MBEDTLS_ECP_DP_SECP256R1, csr, sizeof csr);
	SKY_EXPECT(n > 0);
	/* the same valid CSR padded past the limit: refused before parsing */
	memset(csr + n, '\n', (size_t)(SKY_ENROLL_CSR_MAX + 1 - n));
	csr[SKY_ENROLL_CSR_MAX + 1] = '\0';
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(issue(csr, SKY_ENROLL_CSR_MAX + 1, "b9", out, sizeof out, &d), SKY_ERANGE);
	SKY_EXPECT(strstr(d.msg, "not parsed") != NULL);
	/* at the limit it is parsed (and fine: trailing blank lines are harmless) */
	SKY_EXPECT(issue(csr, SKY_ENROLL_CSR_MAX, "b9", out, sizeof out, NULL) > 0);
	/* another curve */
	n = make_csr("CN=b9", MBEDTLS_ECP_DP_SECP384R1, csr, sizeof csr);
	SKY_EXPECT(n > 0);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(issue(csr, (size_t)n, "b9", out, sizeof out, &d), SKY_EAUTH);
	SKY_EXPECT(strstr(d.msg, "P-256") != NULL);
	/* a broken self-signature: flip a bit of the DER signature */
	n = make_csr("CN=b9", MBEDTLS_ECP_DP_SECP256R1, csr, sizeof csr);
	mbedtls_x509_csr parsed;
	mbedtls_x509_csr_init(&parsed);
	SKY_EXPECT_EQ(mbedtls_x509_csr_parse(&parsed, (const unsigned char *)csr, (size_t)n + 1), 0);
	unsigned char der[2048];
	size_t dlen = parsed.raw.len;
	memcpy(der, parsed.raw.p, dlen);
	SKY_EXPECT(issue((const char *)der, dlen, "b9", out, sizeof out, NULL) > 0); /* DER is fine */
	der[dlen - 3] ^= 0x01;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(issue((const char *)der, dlen, "b9", out, sizeof out, &d), SKY_EAUTH);
	SKY_EXPECT(strstr(d.msg, "self-signature") != NULL);
	/* a CN changed after signing */
	memcpy(der, parsed.raw.p, dlen);
	unsigned char *cn = NULL;
	for (size_t i = 0; i + 1 < dlen && !cn; i++)
		if (der[i] == 'b' && der[i + 1] == '9')
			cn = der + i;
	SKY_EXPECT(cn != NULL);
	if (cn)
		cn[1] = '8';
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(issue((const char *)der, dlen, "b8", out, sizeof out, &d), SKY_EAUTH);
	SKY_EXPECT_MSG(strstr(d.msg, "self-signature") != NULL, "%s", d.msg);
	mbedtls_x509_csr_free(&parsed);
	/* garbage and empty input */
	SKY_EXPECT_EQ(issue("-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n", 40, "b9", out, sizeof out,
			    NULL),
		      SKY_EFORMAT);
	SKY_EXPECT_EQ(issue("", 0, "b9", out, sizeof out, NULL), SKY_EFORMAT);
	sky_ca ca;
	sky_ca_init(&ca);
	SKY_EXPECT_EQ(sky_ca_issue(&ca, csr, (size_t)n, "b9", out, sizeof out, NULL), SKY_ESTATE);
}

SKY_TEST(issued_certificate_is_a_one_year_leaf_for_the_id)
{
	char csr[SKY_ENROLL_CSR_MAX], out[4096], p[700];
	int n = make_csr("CN=leaf1", MBEDTLS_ECP_DP_SECP256R1, csr, sizeof csr);
	int m = issue(csr, (size_t)n, "leaf1", out, sizeof out, NULL);
	SKY_EXPECT(m > 0);
	mbedtls_x509_crt ca, c;
	mbedtls_x509_crt_init(&ca);
	mbedtls_x509_crt_init(&c);
	file(p, sizeof p, SKY_CA_CERT_FILE);
	SKY_EXPECT_EQ(sky_sign_load_cert(&ca, p, NULL), 0);
	SKY_EXPECT_EQ(mbedtls_x509_crt_parse(&c, (const unsigned char *)out, (size_t)m + 1), 0);
	uint32_t flags = 0;
	SKY_EXPECT_EQ(mbedtls_x509_crt_verify(&c, &ca, NULL, NULL, &flags, NULL, NULL), 0);
	char dn[128];
	mbedtls_x509_dn_gets(dn, sizeof dn, &c.subject);
	SKY_EXPECT_MSG(strcmp(dn, "CN=leaf1") == 0, "%s", dn);
	SKY_EXPECT(!c.ca_istrue);
	SKY_EXPECT_EQ(c.serial.len, 16);
	SKY_EXPECT(c.valid_to.year == c.valid_from.year + 1 ||
		   (c.valid_to.year == c.valid_from.year && c.valid_to.mon > c.valid_from.mon));
	/* two certificates never share a serial */
	char out2[4096];
	mbedtls_x509_crt c2;
	mbedtls_x509_crt_init(&c2);
	int m2 = issue(csr, (size_t)n, "leaf1", out2, sizeof out2, NULL);
	SKY_EXPECT(m2 > 0);
	SKY_EXPECT_EQ(mbedtls_x509_crt_parse(&c2, (const unsigned char *)out2, (size_t)m2 + 1), 0);
	SKY_EXPECT(memcmp(c.serial.p, c2.serial.p, 16) != 0);
	mbedtls_x509_crt_free(&c2);
	mbedtls_x509_crt_free(&c);
	mbedtls_x509_crt_free(&ca);
}

/* Builds an enrollment request for id with token and a CSR for csr_cn. */
static int request(const char *id, const char *token, const char *csr_cn, char *out, size_t cap)
{
	sky_enroll_req *r = calloc(1, sizeof *r);
	char subject[100];
	snprintf(subject, sizeof subject, "CN=%s", csr_cn);
	int n = make_csr(subject, MBEDTLS_ECP_DP_SECP256R1, r->csr, sizeof r->csr);
	snprintf(r->id, sizeof r->id, "%s", id);
	snprintf(r->token, sizeof r->token, "%s", token);
	r->csr_len = n > 0 ? (size_t)n : 0;
	int rc = sky_enroll_req_encode(r, out, cap, NULL);
	free(r);
	return rc;
}

/* The cheap check the planner's signing budget hangs on: a valid token
 * passes (and is not spent), anything else is refused as sky_ca_enroll
 * would refuse it. */
SKY_TEST(enroll_check_passes_only_a_valid_token_and_spends_nothing)
{
	char tok[SKY_ENROLL_TOKEN_LEN + 1], req[SKY_ENROLL_REQ_MAX], reply[SKY_ENROLL_REPLY_MAX];
	size_t rlen = 0;
	sky_ca ca;
	sky_ca_init(&ca);
	SKY_EXPECT_EQ(sky_ca_open(&ca, pki(), NULL), 0);
	SKY_EXPECT_EQ(sky_ca_token_new(pki(), 100, NULL, rng(), tok, NULL), 0);
	int64_t now = sky_clock_unix();
	sky_diag d;
	int n = request("k1", tok, "k1", req, sizeof req);
	SKY_EXPECT(n > 0);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_ca_enroll_check(&ca, req, (size_t)n, now, &d), 0);
	SKY_EXPECT_EQ(sky_ca_enroll_check(&ca, req, (size_t)n, now, &d), 0); /* not spent */
	static const char junk[] = "{\"v\":1,\"id\":\"bflood\",\"token\":"
				   "\"00000000000000000000000000000000\",\"csr\":\"x\"}";
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_ca_enroll_check(&ca, junk, sizeof junk - 1, now, &d), SKY_EAUTH);
	SKY_EXPECT_MSG(strstr(d.msg, "unknown or already used") != NULL, "%s", d.msg);
	SKY_EXPECT(sky_ca_enroll_check(&ca, "{", 1, now, NULL) < 0);
	SKY_EXPECT_EQ(sky_ca_enroll(&ca, req, (size_t)n, now, reply, sizeof reply, &rlen, NULL, NULL), 0);
	/* spent by the enrollment: the check now refuses it */
	SKY_EXPECT_EQ(sky_ca_enroll_check(&ca, req, (size_t)n, now, NULL), SKY_EAUTH);
	sky_ca_free(&ca);
}

SKY_TEST(enroll_consumes_the_token_only_on_success)
{
	char tok[SKY_ENROLL_TOKEN_LEN + 1], req[SKY_ENROLL_REQ_MAX], reply[SKY_ENROLL_REPLY_MAX];
	char id_seen[SKY_ENROLL_ID_MAX + 1];
	size_t rlen = 0;
	sky_ca ca;
	sky_ca_init(&ca);
	SKY_EXPECT_EQ(sky_ca_open(&ca, pki(), NULL), 0);
	SKY_EXPECT_EQ(sky_ca_token_new(pki(), 100, NULL, rng(), tok, NULL), 0);
	int64_t now = sky_clock_unix();
	sky_diag d;
	/* a CSR whose CN differs from the id: refused, token kept */
	int n = request("e1", tok, "e2", req, sizeof req);
	SKY_EXPECT(n > 0);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_ca_enroll(&ca, req, (size_t)n, now, reply, sizeof reply, &rlen, id_seen, &d),
		      SKY_EAUTH);
	SKY_EXPECT(strcmp(id_seen, "e1") == 0);
	sky_enroll_reply *r = calloc(1, sizeof *r);
	SKY_EXPECT_EQ(sky_enroll_reply_decode(reply, rlen, r, NULL), 0);
	SKY_EXPECT(r->error[0] && strstr(r->error, "differs") && strcmp(r->id, "e1") == 0);
	SKY_EXPECT(strstr(reply, tok) == NULL); /* the secret is never echoed */
	/* the right CSR with the same token: issued */
	n = request("e1", tok, "e1", req, sizeof req);
	SKY_EXPECT_EQ(sky_ca_enroll(&ca, req, (size_t)n, now, reply, sizeof reply, &rlen, NULL, &d), 0);
	SKY_EXPECT_EQ(sky_enroll_reply_decode(reply, rlen, r, NULL), 0);
	SKY_EXPECT(!r->error[0] && strstr(r->cert, "BEGIN CERTIFICATE") && strstr(r->ca, "BEGIN") &&
		   strstr(r->planner, "BEGIN"));
	/* and the token is spent */
	n = request("e3", tok, "e3", req, sizeof req);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_ca_enroll(&ca, req, (size_t)n, now, reply, sizeof reply, &rlen, NULL, &d),
		      SKY_EAUTH);
	SKY_EXPECT(strstr(d.msg, "already used") != NULL);
	/* an unbound token cannot take the enrolled id e1 */
	SKY_EXPECT_EQ(sky_ca_token_new(pki(), 100, NULL, rng(), tok, NULL), 0);
	n = request("e1", tok, "e1", req, sizeof req);
	SKY_EXPECT_EQ(sky_ca_enroll(&ca, req, (size_t)n, now, reply, sizeof reply, &rlen, NULL, NULL),
		      SKY_EAUTH);
	/* a request with a bad id gets a reply that does not echo it */
	const char *evil = "{\"v\":1,\"id\":\"a/#\",\"token\":\"0123456789abcdef0123456789abcdef\","
			   "\"csr\":\"x\"}";
	SKY_EXPECT_EQ(sky_ca_enroll(&ca, evil, strlen(evil), now, reply, sizeof reply, &rlen, id_seen,
				    NULL),
		      SKY_EINVAL);
	SKY_EXPECT(rlen > 0 && id_seen[0] == '\0');
	SKY_EXPECT_EQ(sky_enroll_reply_decode(reply, rlen, r, NULL), 0);
	SKY_EXPECT(r->id[0] == '\0' && r->error[0]);
	/* oversize requests are refused unread */
	char *big = malloc(SKY_ENROLL_REQ_MAX + 1);
	memset(big, ' ', SKY_ENROLL_REQ_MAX + 1);
	SKY_EXPECT_EQ(sky_ca_enroll(&ca, big, SKY_ENROLL_REQ_MAX + 1, now, reply, sizeof reply, &rlen,
				    NULL, NULL),
		      SKY_ERANGE);
	free(big);
	free(r);
	sky_ca_free(&ca);
	sky_ca_free(&ca);
}

SKY_TEST(planner_signs_plans_the_boards_verify)
{
	sky_signer s;
	sky_signer_init(&s);
	SKY_EXPECT_EQ(sky_ca_load_signer(&s, pki(), NULL), 0);
	static char env[SKY_SIGN_MAX_ENVELOPE + 1], out[256];
	const char *plan = "{\"job\":\"j\",\"epoch\":1}";
	int n = sky_sign_envelope(&s, plan, strlen(plan), env, sizeof env, NULL);
	SKY_EXPECT(n > 0);
	mbedtls_x509_crt c;
	mbedtls_x509_crt_init(&c);
	char p[700];
	file(p, sizeof p, SKY_CA_PLANNER_CERT_FILE);
	SKY_EXPECT_EQ(sky_sign_load_cert(&c, p, NULL), 0);
	size_t plen = 0;
	SKY_EXPECT_EQ(sky_verify_envelope(&c, env, (size_t)n, out, sizeof out, &plen, NULL), 0);
	SKY_EXPECT(plen == strlen(plan) && memcmp(out, plan, plen) == 0);
	mbedtls_x509_crt_free(&c);
	sky_signer_free(&s);
}
