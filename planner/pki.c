/* Making and growing a PKI directory (sky pki init, add-operator,
 * add-client, bridge); see sky_pki.h. Each step issues key pairs with the
 * CA's certificate writer (ca_internal.h) and then rewrites the broker's
 * configuration or ACL (sky_broker_conf.h). */
#include "sky_pki.h"

#include "ca_internal.h"
#include "sky_broker_conf.h"
#include "sky_ca.h"
#include "sky_crl.h"
#include "sky_enroll.h"
#include "sky_file.h"
#include "sky_pki_layout.h"
#include "sky_sign.h"

#include <mbedtls/x509_crt.h>
#include <stdio.h>
#include <string.h>

#define PATH_CAP SKY_PKI_PATH_CAP

/* Makes a key pair and a certificate for it, and writes both. */
static int make_pair(const char *dir, const char *key_file, const char *crt_file,
		     ca_cert_spec *s, sky_sign_rng *rng, sky_diag *d)
{
	char kpath[PATH_CAP], cpath[PATH_CAP], pem[CA_CERT_PEM_CAP];
	unsigned char serial[CA_SERIAL_BYTES];
	mbedtls_pk_context key;
	mbedtls_pk_init(&key);
	int rc = sky_pki_path(kpath, dir, key_file, d);
	if (!rc)
		rc = sky_pki_path(cpath, dir, crt_file, d);
	if (!rc)
		rc = sky_sign_gen_key(&key, rng, d);
	if (rc)
		goto exit;
	s->subject_key = &key;
	if (!s->issuer_key)
		s->issuer_key = &key; /* self-signed */
	rc = ca_write_cert(s, rng, pem, serial, d);
	if (!rc)
		rc = sky_sign_write_key(&key, kpath, d);
	if (!rc && sky_file_write(cpath, pem, strlen(pem), 0644) != 0)
		rc = sky_diag_set(d, SKY_EIO, "%s: cannot write", cpath);
exit:
	mbedtls_pk_free(&key);
	return rc;
}

/* A broker's server certificate and key (CN localhost) into dir: the
 * subjectAltName holds DNS "localhost" [2], IP 127.0.0.1 [7] and, if
 * listen is an IPv4 address other than 127.0.0.1, that one too (clients
 * check the address they dial against it). DER by hand: Mbed TLS 2.28 has
 * no SAN writer. */
static int make_broker_pair(const char *dir, const char *cadn, mbedtls_pk_context *cakey,
			    const char *listen, sky_sign_rng *rng, sky_diag *d)
{
	unsigned char san[2 + 11 + 6 + 6] = {0x30, 0x11, 0x82, 0x09, 'l', 'o', 'c', 'a', 'l',
					     'h',  'o',  's',  't',  0x87, 0x04, 127, 0,   0,   1};
	size_t san_len = 19;
	unsigned char ip[4];
	if (listen && sky_ca_parse_ipv4(listen, ip) != 0)
		return sky_diag_set(d, SKY_EINVAL, "listen address '%s' is not an IPv4 address",
				    listen);
	if (listen && !(ip[0] == 127 && ip[1] == 0 && ip[2] == 0 && ip[3] == 1)) {
		san[1] = 0x17;
		san[19] = 0x87;
		san[20] = 0x04;
		memcpy(san + 21, ip, 4);
		san_len = 25;
	}
	ca_cert_spec broker = {.subject = "CN=localhost,O=sky",
			       .issuer = cadn,
			       .issuer_key = cakey,
			       .days = CA_DAYS,
			       .key_usage = MBEDTLS_X509_KU_DIGITAL_SIGNATURE |
					    MBEDTLS_X509_KU_KEY_AGREEMENT,
			       .san = san,
			       .san_len = san_len};
	return make_pair(dir, SKY_CA_BROKER_KEY_FILE, SKY_CA_BROKER_CERT_FILE, &broker, rng, d);
}

/* dir itself (0700) and the subdirectories it starts with. */
static int make_dirs(const char *dir, sky_diag *d)
{
	char sub[PATH_CAP];
	if (sky_file_mkdirs(dir, 0700) != 0)
		return sky_diag_set(d, SKY_EIO, "%s: cannot create", dir);
	static const char *const subdirs[] = {SKY_CA_CLAIM_DIR, "tokens", "issued", SKY_CA_CERTS_DIR};
	for (size_t i = 0; i < sizeof subdirs / sizeof subdirs[0]; i++) {
		int rc = sky_pki_path(sub, dir, subdirs[i], d);
		if (rc)
			return rc;
		if (sky_file_mkdirs(sub, 0700) != 0)
			return sky_diag_set(d, SKY_EIO, "%s: cannot create", sub);
	}
	return 0;
}

/* The fleet's own identities, signed by the CA (cadn, cakey): the planner
 * (TLS and plan signatures), the claim bundle new boards share, the
 * default operator. */
static int make_identities(const char *dir, const char *cadn, mbedtls_pk_context *cakey,
			   sky_sign_rng *rng, sky_diag *d)
{
	static const struct {
		const char *subject, *key, *crt;
	} ids[] = {
		{"CN=" SKY_ENROLL_PLANNER_CN ",O=sky", SKY_CA_PLANNER_KEY_FILE, SKY_CA_PLANNER_CERT_FILE},
		{"CN=" SKY_ENROLL_CLAIM_CN ",O=sky", SKY_CA_CLAIM_KEY_FILE, SKY_CA_CLAIM_CERT_FILE},
		{"CN=" SKY_CA_OPERATOR_CN ",O=sky", SKY_CA_OPERATOR_KEY_FILE, SKY_CA_OPERATOR_CERT_FILE},
	};
	for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
		ca_cert_spec id = {.subject = ids[i].subject,
				   .issuer = cadn,
				   .issuer_key = cakey,
				   .days = CA_DAYS,
				   .key_usage = MBEDTLS_X509_KU_DIGITAL_SIGNATURE};
		int rc = make_pair(dir, ids[i].key, ids[i].crt, &id, rng, d);
		if (rc)
			return rc;
	}
	return 0;
}

/* The files a new CA starts with besides its keys: empty name lists, the
 * claim bundle's copy of ca.crt, no revoked list. */
static int start_files(const char *dir, sky_diag *d)
{
	char sub[PATH_CAP];
	int rc;
	/* a new CA: operators and clients issued by an old one are gone from
	 * the ACL */
	static const char *const lists[] = {SKY_CA_OPERATORS_FILE, SKY_CA_CLIENTS_FILE};
	for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
		if ((rc = sky_pki_path(sub, dir, lists[i], d)) != 0)
			return rc;
		if (sky_file_write(sub, "", 0, 0644) != 0)
			return sky_diag_set(d, SKY_EIO, "%s: cannot write", sub);
	}
	/* the claim bundle carries the trust anchor a new board needs */
	char capem[CA_CERT_PEM_CAP + 1], src[PATH_CAP];
	if ((rc = sky_pki_path(src, dir, SKY_CA_CERT_FILE, d)) != 0 ||
	    (rc = sky_pki_path(sub, dir, SKY_CA_CLAIM_CA_FILE, d)) != 0)
		return rc;
	long n = sky_file_read(src, capem, CA_CERT_PEM_CAP);
	if (n <= 0 || sky_file_write(sub, capem, (size_t)n, 0644) != 0)
		return sky_diag_set(d, SKY_EIO, "%s: cannot write", sub);
	/* a new CA starts with an empty revoked list and an empty CRL of its
	 * own (the broker refuses every client without one, sky_crl.h) */
	if ((rc = sky_pki_path(sub, dir, SKY_CRL_REVOKED_FILE, d)) != 0)
		return rc;
	remove(sub);
	return 0;
}

int sky_ca_init_dir(const char *dir, const sky_ca_opts *o, sky_diag *d)
{
	char path[PATH_CAP], cadn[128], cacn[64];
	mbedtls_pk_context cakey;
	sky_sign_rng rng;
	mbedtls_pk_init(&cakey);
	memset(&rng, 0, sizeof rng);
	int rc = 0;
	if (!dir || !o || o->port < 1 || o->port > 65535) {
		rc = sky_diag_set(d, SKY_EINVAL, "pki init: need a directory and a port 1..65535");
		goto exit;
	}
	if ((rc = sky_pki_path(path, dir, SKY_CA_KEY_FILE, d)) != 0)
		goto exit;
	if (sky_file_exists(path) && !o->force) {
		rc = sky_diag_set(d, SKY_ESTATE,
				  "%s exists: this directory already holds a fleet CA (use --force "
				  "to replace it, which invalidates every board certificate)",
				  path);
		goto exit;
	}
	if ((rc = make_dirs(dir, d)) != 0 || (rc = sky_sign_rng_init(&rng, "sky-ca-init", d)) != 0)
		goto exit;
	unsigned char tag[4];
	char taghex[9];
	sky_sign_rng_func(&rng, tag, sizeof tag);
	sky_pki_hex(tag, sizeof tag, taghex);
	snprintf(cacn, sizeof cacn, "sky-fleet-ca-%s", taghex);
	ca_name(cacn, cadn, sizeof cadn);

	ca_cert_spec ca = {.subject = cadn,
			   .issuer = cadn,
			   .is_ca = 1,
			   .days = CA_DAYS,
			   .key_usage = MBEDTLS_X509_KU_KEY_CERT_SIGN | MBEDTLS_X509_KU_CRL_SIGN};
	if ((rc = make_pair(dir, SKY_CA_KEY_FILE, SKY_CA_CERT_FILE, &ca, &rng, d)) != 0 ||
	    (rc = sky_sign_load_key(&cakey, path, d)) != 0)
		goto exit;
	if ((rc = make_broker_pair(dir, cadn, &cakey, o->listen, &rng, d)) != 0 ||
	    (rc = make_identities(dir, cadn, &cakey, &rng, d)) != 0 ||
	    (rc = start_files(dir, d)) != 0 || (rc = sky_crl_refresh(dir, d)) != 0)
		goto exit;
	rc = sky_ca_write_broker_conf_at(dir, o->listen, o->port, o->max_packet, d);
exit:
	mbedtls_pk_free(&cakey);
	sky_sign_rng_free(&rng);
	return rc;
}

/* ---- operators and clients --------------------------------------------------------- */

/* What sets one kind of named identity apart: operators (sky job) and
 * clients (sky infer) are issued the same way, into their own bundle
 * directories, listed for the ACL. */
typedef struct named_kind {
	const char *what;   /* "operator" */
	const char *prefix; /* CN prefix, "sky-op-" */
	const char *subdir; /* "operators" */
	const char *list;   /* "operators.list" */
	const char *crt, *key;
	int with_planner;   /* the bundle carries planner.crt (to verify plans) */
	int (*check)(const char *name, sky_diag *d); /* its naming rule (sky_pki_layout.h) */
} named_kind;

static const named_kind k_operator = {"operator", SKY_CA_OPERATOR_NAME_PREFIX, SKY_CA_OPERATORS_DIR,
				      SKY_CA_OPERATORS_FILE, SKY_CA_OPERATOR_CERT_FILE,
				      SKY_CA_OPERATOR_KEY_FILE, 1, sky_ca_check_operator_name};
static const named_kind k_client = {"client", SKY_CA_CLIENT_NAME_PREFIX, SKY_CA_CLIENTS_DIR,
				    SKY_CA_CLIENTS_FILE, SKY_CA_CLIENT_CERT_FILE,
				    SKY_CA_CLIENT_KEY_FILE, 1, sky_ca_check_client_name};

/* Copies <dir>/<file> to <out>/<file>. */
static int copy_file(const char *dir, const char *out, const char *file, sky_diag *d)
{
	char src[PATH_CAP], dst[PATH_CAP], buf[CA_CERT_PEM_CAP + 1];
	int rc = sky_pki_path(src, dir, file, d);
	if (!rc)
		rc = sky_pki_path(dst, out, file, d);
	if (rc)
		return rc;
	long n = sky_file_read(src, buf, sizeof buf);
	if (n <= 0 || sky_file_write(dst, buf, (size_t)n, 0644) != 0)
		return sky_diag_set(d, SKY_EIO, "%s: cannot copy to %s", src, dst);
	return 0;
}

/* Appends name to the list <dir>/<list_file> (one name a line: the
 * operators, clients or sites the ACL gives sections to) and rewrites the
 * ACL. what names one entry in the error ("operator": "too many operators"). */
static int list_add(const char *dir, const char *list_file, const char *name, const char *what,
		    sky_diag *d)
{
	char path[PATH_CAP], list[4096];
	int rc = sky_pki_path(path, dir, list_file, d);
	if (rc)
		return rc;
	long n = sky_file_read(path, list, sizeof list - 1);
	n = n > 0 ? n : 0;
	int w = snprintf(list + n, sizeof list - (size_t)n, "%s\n", name);
	if (w < 0 || (size_t)w >= sizeof list - (size_t)n)
		return sky_diag_set(d, SKY_ERANGE, "%s: too many %ss", path, what);
	if (sky_file_write(path, list, (size_t)n + (size_t)w, 0644) != 0)
		return sky_diag_set(d, SKY_EIO, "%s: cannot write", path);
	return sky_ca_rewrite_acl(dir, d);
}

/* Loads the CA's key and certificate from dir and writes its name (the
 * issuer of what it signs) into issuer. */
static int load_issuer(const char *dir, mbedtls_pk_context *cakey, mbedtls_x509_crt *cacrt,
		       char *issuer, size_t cap, sky_diag *d)
{
	char path[PATH_CAP], cacn[80];
	int rc = sky_pki_path(path, dir, SKY_CA_KEY_FILE, d);
	if (rc)
		return rc;
	if (!sky_file_exists(path))
		return sky_diag_set(d, SKY_ENOTFOUND, "%s: no fleet CA here (run sky pki init)", dir);
	if ((rc = sky_sign_load_key(cakey, path, d)) != 0 ||
	    (rc = sky_pki_path(path, dir, SKY_CA_CERT_FILE, d)) != 0 ||
	    (rc = sky_sign_load_cert(cacrt, path, d)) != 0)
		return rc;
	if (sky_sign_cert_cn(cacrt, cacn, sizeof cacn) != 0)
		return sky_diag_set(d, SKY_ECRYPTO, "CA certificate has no CN");
	ca_name(cacn, issuer, cap);
	return 0;
}

/* Issues <prefix><name> into <dir>/<subdir>/<name>/, lists the name and
 * rewrites the ACL; see sky_ca_add_operator. */
static int add_named(const char *dir, const named_kind *k, const char *name, sky_diag *d)
{
	char path[PATH_CAP], out[PATH_CAP], rel[64 + SKY_ENROLL_ID_MAX], issuer[128];
	char subject[96];
	mbedtls_pk_context cakey;
	mbedtls_x509_crt cacrt;
	sky_sign_rng rng;
	mbedtls_pk_init(&cakey);
	mbedtls_x509_crt_init(&cacrt);
	memset(&rng, 0, sizeof rng);
	int rc = k->check(name, d);
	if (rc)
		goto exit;
	snprintf(rel, sizeof rel, "%s/%s", k->subdir, name);
	if ((rc = sky_pki_path(out, dir, rel, d)) != 0 ||
	    (rc = load_issuer(dir, &cakey, &cacrt, issuer, sizeof issuer, d)) != 0)
		goto exit;
	if ((rc = sky_pki_path(path, out, k->crt, d)) != 0)
		goto exit;
	if (sky_file_exists(path)) {
		rc = sky_diag_set(d, SKY_ESTATE, "%s '%s' already exists (%s)", k->what, name, out);
		goto exit;
	}
	if (sky_file_mkdirs(out, 0700) != 0) {
		rc = sky_diag_set(d, SKY_EIO, "%s: cannot create", out);
		goto exit;
	}
	if ((rc = sky_sign_rng_init(&rng, "sky-ca-named", d)) != 0)
		goto exit;
	snprintf(subject, sizeof subject, "CN=%s%s,O=sky", k->prefix, name);
	ca_cert_spec spec = {.subject = subject,
			     .issuer = issuer,
			     .issuer_key = &cakey,
			     .days = SKY_CA_BOARD_DAYS,
			     .key_usage = MBEDTLS_X509_KU_DIGITAL_SIGNATURE};
	if ((rc = make_pair(out, k->key, k->crt, &spec, &rng, d)) ||
	    (rc = copy_file(dir, out, SKY_CA_CERT_FILE, d)) ||
	    (k->with_planner && (rc = copy_file(dir, out, SKY_CA_PLANNER_CERT_FILE, d))))
		goto exit;
	rc = list_add(dir, k->list, name, k->what, d);
exit:
	mbedtls_pk_free(&cakey);
	mbedtls_x509_crt_free(&cacrt);
	sky_sign_rng_free(&rng);
	return rc;
}

int sky_ca_add_operator(const char *dir, const char *name, sky_diag *d)
{
	return add_named(dir, &k_operator, name, d);
}

int sky_ca_add_client(const char *dir, const char *name, sky_diag *d)
{
	return add_named(dir, &k_client, name, d);
}

/* ---- sites ---------------------------------------------------------------------- */

int sky_ca_add_site(const char *dir, const char *site, const char *listen, sky_diag *d)
{
	char path[PATH_CAP], out[PATH_CAP], rel[64], issuer[128], subject[96];
	mbedtls_pk_context cakey;
	mbedtls_x509_crt cacrt;
	sky_sign_rng rng;
	mbedtls_pk_init(&cakey);
	mbedtls_x509_crt_init(&cacrt);
	memset(&rng, 0, sizeof rng);
	int rc = sky_ca_check_site_name(site, d);
	if (rc)
		goto exit;
	snprintf(rel, sizeof rel, SKY_CA_SITES_DIR "/%s", site);
	if ((rc = sky_pki_path(out, dir, rel, d)) != 0 ||
	    (rc = load_issuer(dir, &cakey, &cacrt, issuer, sizeof issuer, d)) != 0 ||
	    (rc = sky_pki_path(path, out, SKY_CA_BRIDGE_CERT_FILE, d)) != 0)
		goto exit;
	if (sky_file_exists(path)) {
		rc = sky_diag_set(d, SKY_ESTATE, "site '%s' already has a bridge (%s)", site, out);
		goto exit;
	}
	if (sky_file_mkdirs(out, 0700) != 0) {
		rc = sky_diag_set(d, SKY_EIO, "%s: cannot create", out);
		goto exit;
	}
	if ((rc = sky_sign_rng_init(&rng, "sky-ca-site", d)) != 0)
		goto exit;
	/* the site broker's server certificate: its boards and nobody else
	 * dial it, on loopback or on listen */
	if ((rc = make_broker_pair(out, issuer, &cakey, listen, &rng, d)) != 0)
		goto exit;
	/* the bridge is a client of the core broker, like any fleet identity */
	snprintf(subject, sizeof subject, "CN=" SKY_CA_BRIDGE_CN_PREFIX "%s,O=sky", site);
	ca_cert_spec br = {.subject = subject,
			   .issuer = issuer,
			   .issuer_key = &cakey,
			   .days = CA_DAYS,
			   .key_usage = MBEDTLS_X509_KU_DIGITAL_SIGNATURE};
	if ((rc = make_pair(out, SKY_CA_BRIDGE_KEY_FILE, SKY_CA_BRIDGE_CERT_FILE, &br, &rng, d)) ||
	    (rc = copy_file(dir, out, SKY_CA_CERT_FILE, d)))
		goto exit;
	rc = list_add(dir, SKY_CA_SITES_FILE, site, "site", d);
exit:
	mbedtls_pk_free(&cakey);
	mbedtls_x509_crt_free(&cacrt);
	sky_sign_rng_free(&rng);
	return rc;
}

