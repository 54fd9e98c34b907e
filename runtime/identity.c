/* A board's key pair, CSR, enrollment reply checks and loaded identity;
 * see sky_identity.h. */
#include "sky_identity.h"

#include "sky_file.h"

#include <mbedtls/base64.h>
#include <mbedtls/x509_csr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PATH_CAP 1024

int sky_identity_valid_id(const char *id) { return sky_enroll_check_id(id, NULL) == 0; }

int sky_identity_path(const char *dir, const char *file, char *buf, size_t cap)
{
	int n = snprintf(buf, cap, "%s/%s", dir, file);
	return (n < 0 || (size_t)n >= cap) ? SKY_ERANGE : 0;
}

static int path_of(const char *dir, const char *file, char *buf, sky_diag *d)
{
	if (sky_identity_path(dir, file, buf, PATH_CAP) != 0)
		return sky_diag_set(d, SKY_ERANGE, "state directory path too long: %s", dir);
	return 0;
}

/* The four files of an enrolled identity directory. */
typedef struct id_paths {
	char key[PATH_CAP], ca[PATH_CAP], cert[PATH_CAP], planner[PATH_CAP];
} id_paths;

static int paths_of(const char *dir, id_paths *p, sky_diag *d)
{
	int rc = path_of(dir, SKY_IDENTITY_KEY_FILE, p->key, d);
	if (!rc)
		rc = path_of(dir, SKY_IDENTITY_CA_FILE, p->ca, d);
	if (!rc)
		rc = path_of(dir, SKY_IDENTITY_CERT_FILE, p->cert, d);
	if (!rc)
		rc = path_of(dir, SKY_IDENTITY_PLANNER_FILE, p->planner, d);
	return rc;
}

int sky_identity_ensure_key(const char *dir, sky_sign_rng *rng, sky_diag *d)
{
	char path[PATH_CAP];
	int rc = path_of(dir, SKY_IDENTITY_KEY_FILE, path, d);
	if (rc)
		return rc;
	if (sky_file_exists(path))
		return 0;
	if (sky_file_mkdirs(dir, 0700) != 0)
		return sky_diag_set(d, SKY_EIO, "%s: cannot create the state directory", dir);
	mbedtls_pk_context pk;
	mbedtls_pk_init(&pk);
	rc = sky_sign_gen_key(&pk, rng, d);
	if (!rc)
		rc = sky_sign_write_key(&pk, path, d);
	mbedtls_pk_free(&pk);
	return rc;
}

int sky_identity_make_csr(mbedtls_pk_context *key, const char *id, sky_sign_rng *rng, char *out,
			  size_t cap, sky_diag *d)
{
	int rc = sky_enroll_check_id(id, d);
	if (rc)
		return rc;
	/* the id alphabet has no ',', '=' or '\\', so it cannot inject RDNs */
	char subject[16 + SKY_ID_MAX];
	snprintf(subject, sizeof subject, "CN=%s", id);
	mbedtls_x509write_csr req;
	mbedtls_x509write_csr_init(&req);
	mbedtls_x509write_csr_set_md_alg(&req, MBEDTLS_MD_SHA256);
	mbedtls_x509write_csr_set_key(&req, key);
	int mrc = mbedtls_x509write_csr_set_subject_name(&req, subject);
	if (mrc == 0)
		mrc = mbedtls_x509write_csr_pem(&req, (unsigned char *)out, cap, sky_sign_rng_func,
						rng);
	mbedtls_x509write_csr_free(&req);
	if (mrc == MBEDTLS_ERR_ASN1_BUF_TOO_SMALL || mrc == MBEDTLS_ERR_BASE64_BUFFER_TOO_SMALL)
		return sky_diag_set(d, SKY_ERANGE, "CSR does not fit %zu bytes", cap);
	if (mrc != 0)
		return sky_diag_set(d, SKY_ECRYPTO, "making the CSR failed (-0x%04x)",
				    (unsigned)-mrc);
	return (int)strlen(out);
}

/* Is crt a CA certificate (basicConstraints CA:TRUE)? */
static int is_ca(const mbedtls_x509_crt *crt) { return crt->ca_istrue != 0; }

int sky_identity_trust_ca(const char *dir, const char *ca_path, sky_diag *d)
{
	char dst[PATH_CAP], pem[SKY_ENROLL_PEM_MAX + 1];
	mbedtls_x509_crt crt;
	mbedtls_x509_crt_init(&crt);
	int rc = path_of(dir, SKY_IDENTITY_CA_FILE, dst, d);
	if (rc)
		goto exit;
	long n = sky_file_read(ca_path, pem, SKY_ENROLL_PEM_MAX);
	if (n < 0) {
		rc = sky_diag_set(d, n == SKY_ENOTFOUND ? SKY_ENOTFOUND : SKY_EIO,
				  "%s: cannot read the CA certificate", ca_path);
		goto exit;
	}
	pem[n] = '\0';
	if (mbedtls_x509_crt_parse(&crt, (const unsigned char *)pem, (size_t)n + 1) != 0 ||
	    !is_ca(&crt)) {
		rc = sky_diag_set(d, SKY_ECRYPTO, "%s: not a PEM CA certificate", ca_path);
		goto exit;
	}
	if (sky_file_mkdirs(dir, 0700) != 0 || sky_file_write(dst, pem, (size_t)n, 0644) != 0) {
		rc = sky_diag_set(d, SKY_EIO, "%s: cannot write", dst);
		goto exit;
	}
exit:
	mbedtls_x509_crt_free(&crt);
	return rc;
}

int sky_identity_enroll_request(const char *dir, const char *id, const char *token,
				sky_sign_rng *rng, char *out, size_t cap, sky_diag *d)
{
	char path[PATH_CAP];
	mbedtls_pk_context key;
	mbedtls_pk_init(&key);
	sky_enroll_req *req = calloc(1, sizeof *req);
	int rc = req ? 0 : sky_diag_set(d, SKY_ENOMEM, "enrollment: out of memory");
	if (!rc)
		rc = sky_enroll_check_id(id, d);
	if (!rc)
		rc = sky_enroll_check_token(token, d);
	if (!rc)
		rc = sky_identity_ensure_key(dir, rng, d);
	if (!rc)
		rc = path_of(dir, SKY_IDENTITY_KEY_FILE, path, d);
	if (!rc)
		rc = sky_sign_load_key(&key, path, d);
	if (rc)
		goto exit;
	rc = sky_identity_make_csr(&key, id, rng, req->csr, sizeof req->csr, d);
	if (rc < 0)
		goto exit;
	req->csr_len = (size_t)rc;
	snprintf(req->id, sizeof req->id, "%s", id);
	snprintf(req->token, sizeof req->token, "%s", token);
	rc = sky_enroll_req_encode(req, out, cap, d);
exit:
	mbedtls_pk_free(&key);
	free(req);
	return rc;
}

/* Parses one PEM certificate from text (NUL-terminated). */
static int parse_pem_cert(mbedtls_x509_crt *crt, const char *pem, const char *what, sky_diag *d)
{
	int mrc = mbedtls_x509_crt_parse(crt, (const unsigned char *)pem, strlen(pem) + 1);
	if (mrc != 0)
		return sky_diag_set(d, SKY_EFORMAT, "%s: not a PEM certificate (-0x%04x)", what,
				    (unsigned)-mrc);
	return 0;
}

/* crt must chain to ca and carry CN want_cn. */
static int check_issued(mbedtls_x509_crt *crt, mbedtls_x509_crt *ca, const char *want_cn,
			const char *what, sky_diag *d)
{
	uint32_t flags = 0;
	if (mbedtls_x509_crt_verify(crt, ca, NULL, NULL, &flags, NULL, NULL) != 0) {
		char info[160];
		if (mbedtls_x509_crt_verify_info(info, sizeof info, "", flags) < 0)
			info[0] = '\0';
		for (char *p = info; *p; p++)
			if (*p == '\n')
				*p = ' ';
		return sky_diag_set(d, SKY_EAUTH, "%s: not valid under the fleet CA (%s)", what,
				    info);
	}
	char cn[SKY_ID_MAX + 1];
	if (sky_sign_cert_cn(crt, cn, sizeof cn) != 0 || strcmp(cn, want_cn) != 0)
		return sky_diag_set(d, SKY_EAUTH, "%s: CN is not '%s'", what, want_cn);
	return 0;
}

int sky_identity_enroll_accept(const char *dir, const char *id, const char *reply, size_t len,
			       sky_diag *d)
{
	id_paths paths;
	mbedtls_pk_context key;
	mbedtls_x509_crt ca, ca_sent, cert, planner;
	mbedtls_pk_init(&key);
	mbedtls_x509_crt_init(&ca);
	mbedtls_x509_crt_init(&ca_sent);
	mbedtls_x509_crt_init(&cert);
	mbedtls_x509_crt_init(&planner);
	sky_enroll_reply *r = calloc(1, sizeof *r);
	int rc = r ? 0 : sky_diag_set(d, SKY_ENOMEM, "enrollment: out of memory");
	if (!rc)
		rc = paths_of(dir, &paths, d);
	if (!rc)
		rc = sky_enroll_reply_decode(reply, len, r, d);
	if (rc)
		goto exit;
	if (r->error[0]) {
		rc = sky_diag_set(d, SKY_EAUTH, "enrollment refused by the planner: %s", r->error);
		goto exit;
	}
	if (strcmp(r->id, id) != 0) {
		rc = sky_diag_set(d, SKY_EAUTH, "enrollment reply is for board '%.64s', not '%s'",
				  r->id, id);
		goto exit;
	}
	if ((rc = sky_sign_load_cert(&ca, paths.ca, d)) != 0 ||
	    (rc = sky_sign_load_key(&key, paths.key, d)) != 0 ||
	    (rc = parse_pem_cert(&ca_sent, r->ca, "enrollment reply 'ca'", d)) != 0 ||
	    (rc = parse_pem_cert(&cert, r->cert, "enrollment reply 'cert'", d)) != 0 ||
	    (rc = parse_pem_cert(&planner, r->planner, "enrollment reply 'planner'", d)) != 0)
		goto exit;
	/* the CA we trusted from the claim bundle is the one that answers */
	if (ca_sent.raw.len != ca.raw.len || memcmp(ca_sent.raw.p, ca.raw.p, ca.raw.len) != 0) {
		rc = sky_diag_set(d, SKY_EAUTH, "enrollment reply names another CA than %s",
				  paths.ca);
		goto exit;
	}
	if ((rc = check_issued(&cert, &ca, id, "issued certificate", d)) != 0 ||
	    (rc = check_issued(&planner, &ca, SKY_IDENTITY_PLANNER_CN, "planner certificate",
			       d)) != 0)
		goto exit;
	if (mbedtls_pk_check_pair(&cert.pk, &key) != 0) {
		rc = sky_diag_set(d, SKY_EAUTH, "issued certificate is not for %s", paths.key);
		goto exit;
	}
	if (sky_file_write(paths.cert, r->cert, strlen(r->cert), 0644) != 0 ||
	    sky_file_write(paths.planner, r->planner, strlen(r->planner), 0644) != 0) {
		rc = sky_diag_set(d, SKY_EIO, "%s: cannot write the certificates", dir);
		goto exit;
	}
exit:
	mbedtls_pk_free(&key);
	mbedtls_x509_crt_free(&ca);
	mbedtls_x509_crt_free(&ca_sent);
	mbedtls_x509_crt_free(&cert);
	mbedtls_x509_crt_free(&planner);
	free(r);
	return rc;
}

int sky_identity_enrolled(const char *dir)
{
	static const char *const files[] = {SKY_IDENTITY_KEY_FILE, SKY_IDENTITY_CERT_FILE,
					    SKY_IDENTITY_CA_FILE, SKY_IDENTITY_PLANNER_FILE};
	char path[PATH_CAP];
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
		if (sky_identity_path(dir, files[i], path, sizeof path) != 0 ||
		    !sky_file_exists(path))
			return 0;
	return 1;
}

void sky_identity_init(sky_identity *idn)
{
	memset(idn, 0, sizeof *idn);
	mbedtls_pk_init(&idn->key);
	mbedtls_x509_crt_init(&idn->cert);
	mbedtls_x509_crt_init(&idn->ca);
	mbedtls_x509_crt_init(&idn->planner);
}

void sky_identity_free(sky_identity *idn)
{
	if (!idn)
		return;
	mbedtls_pk_free(&idn->key);
	mbedtls_x509_crt_free(&idn->cert);
	mbedtls_x509_crt_free(&idn->ca);
	mbedtls_x509_crt_free(&idn->planner);
	sky_identity_init(idn);
}

int sky_identity_load(sky_identity *idn, const char *dir, sky_diag *d)
{
	id_paths paths;
	sky_identity_free(idn);
	int rc = paths_of(dir, &paths, d);
	if (rc)
		goto exit;
	if ((rc = sky_sign_load_key(&idn->key, paths.key, d)) != 0 ||
	    (rc = sky_sign_load_cert(&idn->ca, paths.ca, d)) != 0 ||
	    (rc = sky_sign_load_cert(&idn->cert, paths.cert, d)) != 0 ||
	    (rc = sky_sign_load_cert(&idn->planner, paths.planner, d)) != 0)
		goto exit;
	if (!is_ca(&idn->ca)) {
		rc = sky_diag_set(d, SKY_EAUTH, "%s: not a CA certificate", paths.ca);
		goto exit;
	}
	if (sky_sign_cert_cn(&idn->cert, idn->id, sizeof idn->id) != 0 ||
	    sky_enroll_check_id(idn->id, NULL) != 0) {
		rc = sky_diag_set(d, SKY_EAUTH, "%s: CN is not a valid board id", paths.cert);
		goto exit;
	}
	if ((rc = check_issued(&idn->cert, &idn->ca, idn->id, paths.cert, d)) != 0 ||
	    (rc = check_issued(&idn->planner, &idn->ca, SKY_IDENTITY_PLANNER_CN, paths.planner,
			       d)) != 0)
		goto exit;
	if (mbedtls_pk_check_pair(&idn->cert.pk, &idn->key) != 0) {
		rc = sky_diag_set(d, SKY_EAUTH, "%s does not hold the key of %s", paths.key,
				  paths.cert);
		goto exit;
	}
	idn->loaded = 1;
exit:
	if (rc)
		sky_identity_free(idn);
	return rc;
}
