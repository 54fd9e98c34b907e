/* The fleet CA: certificates, claim tokens, CSR intake and enrollment; see
 * sky_ca.h. Making the PKI directory is pki.c's, its layout and names
 * pki_layout.c's, the broker config broker_conf.c's. */
#include "sky_ca.h"

#include "ca_internal.h"
#include "sky_clock.h"
#include "sky_crl.h"
#include "sky_file.h"
#include "sky_pki_layout.h"

#include <mbedtls/md.h>
#include <mbedtls/oid.h>
#include <mbedtls/platform_util.h>
#include <mbedtls/sha256.h>
#include <mbedtls/x509_csr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PATH_CAP SKY_PKI_PATH_CAP
/* issued certificates start 5 minutes in the past: a board whose clock is
 * slightly behind still accepts its new certificate */
#define BACKDATE_S 300

/* "YYYYMMDDhhmmss" (what mbedtls_x509write_crt_set_validity wants) for t. */
static void x509_time(int64_t t, char out[16])
{
	char iso[32]; /* "YYYY-MM-DDTHH:MM:SSZ" */
	sky_clock_format_utc(t, iso, sizeof iso);
	static const int pick[] = {0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18};
	for (int i = 0; i < 14; i++)
		out[i] = iso[pick[i]];
	out[14] = '\0';
}

int ca_write_cert(const ca_cert_spec *s, sky_sign_rng *rng, char *out, unsigned char *serial,
		  sky_diag *d)
{
	mbedtls_x509write_cert w;
	mbedtls_mpi sn;
	mbedtls_x509write_crt_init(&w);
	mbedtls_mpi_init(&sn);
	char nb[16], na[16];
	int64_t now = sky_clock_unix();
	x509_time(now - BACKDATE_S, nb);
	x509_time(now + (int64_t)s->days * 86400, na);
	int mrc = sky_sign_rng_func(rng, serial, CA_SERIAL_BYTES);
	/* positive and non-zero (RFC 5280 §4.1.2.2) */
	serial[0] = (unsigned char)((serial[0] & 0x7f) | 0x40);
	if (mrc == 0)
		mrc = mbedtls_mpi_read_binary(&sn, serial, CA_SERIAL_BYTES);
	mbedtls_x509write_crt_set_version(&w, MBEDTLS_X509_CRT_VERSION_3);
	mbedtls_x509write_crt_set_md_alg(&w, MBEDTLS_MD_SHA256);
	mbedtls_x509write_crt_set_subject_key(&w, s->subject_key);
	mbedtls_x509write_crt_set_issuer_key(&w, s->issuer_key);
	if (mrc == 0)
		mrc = mbedtls_x509write_crt_set_serial(&w, &sn);
	if (mrc == 0)
		mrc = mbedtls_x509write_crt_set_validity(&w, nb, na);
	if (mrc == 0)
		mrc = mbedtls_x509write_crt_set_subject_name(&w, s->subject);
	if (mrc == 0)
		mrc = mbedtls_x509write_crt_set_issuer_name(&w, s->issuer);
	if (mrc == 0)
		mrc = mbedtls_x509write_crt_set_basic_constraints(&w, s->is_ca, s->is_ca ? 0 : -1);
	if (mrc == 0)
		mrc = mbedtls_x509write_crt_set_key_usage(&w, s->key_usage);
	if (mrc == 0)
		mrc = mbedtls_x509write_crt_set_subject_key_identifier(&w);
	if (mrc == 0)
		mrc = mbedtls_x509write_crt_set_authority_key_identifier(&w);
	if (mrc == 0 && s->san)
		mrc = mbedtls_x509write_crt_set_extension(
			&w, MBEDTLS_OID_SUBJECT_ALT_NAME, MBEDTLS_OID_SIZE(MBEDTLS_OID_SUBJECT_ALT_NAME),
			0, s->san, s->san_len);
	if (mrc == 0)
		mrc = mbedtls_x509write_crt_pem(&w, (unsigned char *)out, CA_CERT_PEM_CAP,
						sky_sign_rng_func, rng);
	mbedtls_x509write_crt_free(&w);
	mbedtls_mpi_free(&sn);
	if (mrc != 0)
		return sky_diag_set(d, SKY_ECRYPTO, "writing certificate '%s' failed (-0x%04x)",
				    s->subject, (unsigned)-mrc);
	return 0;
}

void ca_name(const char *cn, char *out, size_t cap) { snprintf(out, cap, "CN=%s,O=sky", cn); }

/* ---- tokens ------------------------------------------------------------------- */

/* <dir>/tokens/<sha256(token) hex> */
static int token_path(const char *dir, const char *token, char *out, sky_diag *d)
{
	unsigned char h[32];
	char name[80];
	mbedtls_sha256_ret((const unsigned char *)token, strlen(token), h, 0);
	memcpy(name, "tokens/", 7);
	sky_pki_hex(h, sizeof h, name + 7);
	return sky_pki_path(out, dir, name, d);
}

int sky_ca_token_new(const char *dir, long ttl_s, const char *bind_id, sky_sign_rng *rng,
		     char out[SKY_ENROLL_TOKEN_LEN + 1], sky_diag *d)
{
	if (ttl_s < 1 || ttl_s > SKY_CA_MAX_TOKEN_TTL)
		return sky_diag_set(d, SKY_EINVAL, "token TTL %ld s outside 1..%d", ttl_s,
				    SKY_CA_MAX_TOKEN_TTL);
	if (bind_id && sky_enroll_check_id(bind_id, d) != 0)
		return SKY_EINVAL;
	char path[PATH_CAP], cpath[PATH_CAP], tdir[PATH_CAP], line[128];
	int rc = sky_pki_path(cpath, dir, SKY_CA_KEY_FILE, d);
	if (rc)
		return rc;
	if (!sky_file_exists(cpath))
		return sky_diag_set(d, SKY_ENOTFOUND, "%s: no fleet CA here (run sky pki init)", dir);
	unsigned char raw[SKY_ENROLL_TOKEN_LEN / 2];
	if (sky_sign_rng_func(rng, raw, sizeof raw) != 0)
		return sky_diag_set(d, SKY_ECRYPTO, "token: random generator failed");
	sky_pki_hex(raw, sizeof raw, out);
	mbedtls_platform_zeroize(raw, sizeof raw);
	if ((rc = token_path(dir, out, path, d)) != 0 || (rc = sky_pki_path(tdir, dir, "tokens", d)) != 0)
		return rc;
	int n = snprintf(line, sizeof line, "%lld %s\n", (long long)(sky_clock_unix() + ttl_s),
			 bind_id ? bind_id : "*");
	if (sky_file_mkdirs(tdir, 0700) != 0 || sky_file_write(path, line, (size_t)n, 0600) != 0)
		return sky_diag_set(d, SKY_EIO, "%s: cannot store the token", tdir);
	return 0;
}

int sky_ca_token_use(const char *dir, const char *token, const char *id, int64_t now, int consume,
		     sky_diag *d)
{
	char path[PATH_CAP], ipath[PATH_CAP], line[128], bound[SKY_ENROLL_ID_MAX + 2];
	int rc = sky_enroll_check_token(token, d);
	if (rc)
		return SKY_EAUTH;
	if ((rc = token_path(dir, token, path, d)) != 0)
		return rc;
	long n = sky_file_read(path, line, sizeof line - 1);
	if (n < 0)
		return sky_diag_set(d, SKY_EAUTH, "claim token unknown or already used");
	line[n] = '\0';
	long long expiry = 0;
	if (sscanf(line, "%lld %65s", &expiry, bound) != 2)
		return sky_diag_set(d, SKY_EAUTH, "claim token record is damaged");
	if (now > expiry) {
		remove(path); /* an expired token can never become valid again */
		return sky_diag_set(d, SKY_EAUTH, "claim token expired %lld s ago",
				    (long long)(now - expiry));
	}
	if (strcmp(bound, "*") != 0 && strcmp(bound, id) != 0)
		return sky_diag_set(d, SKY_EAUTH, "claim token is bound to another board id");
	if (strcmp(bound, "*") == 0) {
		char rel[16 + SKY_ENROLL_ID_MAX];
		snprintf(rel, sizeof rel, "issued/%s", id);
		if (sky_enroll_check_id(id, d) != 0 || (rc = sky_pki_path(ipath, dir, rel, d)) != 0)
			return SKY_EAUTH;
		if (sky_file_exists(ipath))
			return sky_diag_set(d, SKY_EAUTH,
					    "board '%s' is already enrolled; re-enrolling needs a "
					    "token bound to it (sky pki token --id %s)",
					    id, id);
	}
	/* remove() succeeds for exactly one of two racing consumers */
	if (consume && remove(path) != 0)
		return sky_diag_set(d, SKY_EAUTH, "claim token unknown or already used");
	return 0;
}

/* ---- the CA ----------------------------------------------------------------------- */

void sky_ca_init(sky_ca *ca)
{
	memset(ca, 0, sizeof *ca);
	mbedtls_pk_init(&ca->key);
	mbedtls_x509_crt_init(&ca->crt);
}

void sky_ca_free(sky_ca *ca)
{
	if (!ca)
		return;
	mbedtls_pk_free(&ca->key);
	mbedtls_x509_crt_free(&ca->crt);
	sky_sign_rng_free(&ca->rng);
	sky_ca_init(ca);
}

static int read_text(const char *dir, const char *file, char *buf, size_t cap, sky_diag *d)
{
	char path[PATH_CAP];
	int rc = sky_pki_path(path, dir, file, d);
	if (rc)
		return rc;
	long n = sky_file_read(path, buf, cap - 1);
	if (n < 0)
		return sky_diag_set(d, n == SKY_ENOTFOUND ? SKY_ENOTFOUND : SKY_EIO,
				    "%s: cannot read", path);
	buf[n] = '\0';
	return 0;
}

int sky_ca_open(sky_ca *ca, const char *dir, sky_diag *d)
{
	char path[PATH_CAP];
	sky_ca_free(ca);
	int rc = 0;
	if (snprintf(ca->dir, sizeof ca->dir, "%s", dir) >= (int)sizeof ca->dir) {
		rc = sky_diag_set(d, SKY_ERANGE, "PKI directory path too long");
		goto exit;
	}
	if ((rc = sky_pki_path(path, dir, SKY_CA_KEY_FILE, d)) != 0 ||
	    (rc = sky_sign_load_key(&ca->key, path, d)) != 0 ||
	    (rc = read_text(dir, SKY_CA_CERT_FILE, ca->ca_pem, sizeof ca->ca_pem, d)) != 0 ||
	    (rc = read_text(dir, SKY_CA_PLANNER_CERT_FILE, ca->planner_pem,
			    sizeof ca->planner_pem, d)) != 0)
		goto exit;
	if (mbedtls_x509_crt_parse(&ca->crt, (const unsigned char *)ca->ca_pem,
				   strlen(ca->ca_pem) + 1) != 0 ||
	    !ca->crt.ca_istrue || mbedtls_pk_check_pair(&ca->crt.pk, &ca->key) != 0) {
		rc = sky_diag_set(d, SKY_EAUTH, "%s: ca.crt is not a CA certificate for ca.key",
				  dir);
		goto exit;
	}
	rc = sky_sign_rng_init(&ca->rng, "sky-ca", d);
	if (!rc)
		ca->ready = 1;
exit:
	if (rc)
		sky_ca_free(ca);
	return rc;
}

static int name_cn(const mbedtls_x509_name *nm, char *buf, size_t cap)
{
	int found = 0;
	for (; nm; nm = nm->next) {
		if (!nm->oid.p || MBEDTLS_OID_CMP(MBEDTLS_OID_AT_CN, &nm->oid) != 0)
			continue;
		if (found++) /* two CNs: which one would a TLS stack use? refuse */
			return SKY_EFORMAT;
		if (nm->val.len >= cap)
			return SKY_ERANGE;
		memcpy(buf, nm->val.p, nm->val.len);
		buf[nm->val.len] = '\0';
		if (strlen(buf) != nm->val.len) /* embedded NUL */
			return SKY_EFORMAT;
	}
	return found ? 0 : SKY_ENOTFOUND;
}

int sky_ca_issue(sky_ca *ca, const char *csr_pem, size_t csr_len, const char *id, char *out,
		 size_t cap, sky_diag *d)
{
	if (!ca || !ca->ready)
		return sky_diag_set(d, SKY_ESTATE, "CA not opened");
	if (!csr_pem || csr_len == 0)
		return sky_diag_set(d, SKY_EFORMAT, "CSR: empty");
	if (csr_len > SKY_ENROLL_CSR_MAX)
		return sky_diag_set(d, SKY_ERANGE, "CSR: %zu bytes, over the %d-byte limit (not parsed)",
				    csr_len, SKY_ENROLL_CSR_MAX);
	char buf[SKY_ENROLL_CSR_MAX + 1], cn[SKY_ENROLL_ID_MAX + 1], issuer[128], cacn[80];
	char pem[CA_CERT_PEM_CAP], subject[16 + SKY_ENROLL_ID_MAX];
	unsigned char hash[MBEDTLS_MD_MAX_SIZE], serial[CA_SERIAL_BYTES];
	mbedtls_x509_csr csr;
	mbedtls_x509_csr_init(&csr);
	int rc;
	/* the PEM parser needs the terminator inside the length it is given */
	memcpy(buf, csr_pem, csr_len);
	buf[csr_len] = '\0';
	size_t plen = strlen(buf) == csr_len ? csr_len + 1 : csr_len;
	int mrc = mbedtls_x509_csr_parse(&csr, (const unsigned char *)buf, plen);
	if (mrc != 0) {
		rc = sky_diag_set(d, SKY_EFORMAT, "CSR: not a PKCS#10 request (-0x%04x)",
				  (unsigned)-mrc);
		goto exit;
	}
	if (mbedtls_pk_get_type(&csr.pk) != MBEDTLS_PK_ECKEY ||
	    mbedtls_pk_ec(csr.pk)->grp.id != MBEDTLS_ECP_DP_SECP256R1) {
		rc = sky_diag_set(d, SKY_EAUTH, "CSR: key is not EC P-256");
		goto exit;
	}
	/* Mbed TLS parses but does not check the request's self-signature */
	const mbedtls_md_info_t *md = mbedtls_md_info_from_type(csr.sig_md);
	if (!md || csr.sig_md != MBEDTLS_MD_SHA256 || csr.sig_pk != MBEDTLS_PK_ECDSA ||
	    mbedtls_md(md, csr.cri.p, csr.cri.len, hash) != 0 ||
	    mbedtls_pk_verify_ext(csr.sig_pk, csr.sig_opts, &csr.pk, csr.sig_md, hash,
				  mbedtls_md_get_size(md), csr.sig.p, csr.sig.len) != 0) {
		rc = sky_diag_set(d, SKY_EAUTH,
				  "CSR: self-signature missing or invalid (want ECDSA-SHA256 by "
				  "the requested key)");
		goto exit;
	}
	int crc = name_cn(&csr.subject, cn, sizeof cn);
	if (crc == SKY_ERANGE) {
		rc = sky_diag_set(d, SKY_EINVAL, "CSR: CN longer than %d characters",
				  SKY_ENROLL_ID_MAX);
		goto exit;
	}
	if (crc != 0) {
		rc = sky_diag_set(d, SKY_EINVAL, "CSR: subject needs exactly one CN without NULs");
		goto exit;
	}
	if ((rc = sky_enroll_check_id(cn, d)) != 0)
		goto exit;
	if (!id || strcmp(cn, id) != 0) {
		rc = sky_diag_set(d, SKY_EAUTH, "CSR: CN '%s' differs from the requested id '%.64s'",
				  cn, id ? id : "");
		goto exit;
	}
	if (sky_sign_cert_cn(&ca->crt, cacn, sizeof cacn) != 0) {
		rc = sky_diag_set(d, SKY_ECRYPTO, "CA certificate has no CN");
		goto exit;
	}
	ca_name(cacn, issuer, sizeof issuer);
	/* the subject is rebuilt from the checked id: nothing else in the CSR's
	 * subject or attributes reaches the certificate */
	snprintf(subject, sizeof subject, "CN=%s", cn);
	ca_cert_spec s = {.subject_key = &csr.pk,
			  .subject = subject,
			  .issuer_key = &ca->key,
			  .issuer = issuer,
			  .days = SKY_CA_BOARD_DAYS,
			  .key_usage = MBEDTLS_X509_KU_DIGITAL_SIGNATURE};
	if ((rc = ca_write_cert(&s, &ca->rng, pem, serial, d)) != 0)
		goto exit;
	size_t n = strlen(pem);
	if (n + 1 > cap) {
		rc = sky_diag_set(d, SKY_ERANGE, "certificate does not fit %zu bytes", cap);
		goto exit;
	}
	memcpy(out, pem, n + 1);
	rc = (int)n;
exit:
	mbedtls_x509_csr_free(&csr);
	return rc;
}

/* Records the serial of the certificate just issued to id. */
static int record_issued(sky_ca *ca, const char *id, const char *pem, sky_diag *d)
{
	char path[PATH_CAP], rel[16 + SKY_ENROLL_ID_MAX], line[128], sn[2 * CA_SERIAL_BYTES + 8];
	mbedtls_x509_crt crt;
	mbedtls_x509_crt_init(&crt);
	int rc = 0;
	snprintf(rel, sizeof rel, "issued/%s", id);
	if ((rc = sky_pki_path(path, ca->dir, rel, d)) != 0)
		goto exit;
	sn[0] = '\0';
	if (mbedtls_x509_crt_parse(&crt, (const unsigned char *)pem, strlen(pem) + 1) == 0 &&
	    crt.serial.len <= CA_SERIAL_BYTES + 1)
		sky_pki_hex(crt.serial.p, crt.serial.len, sn);
	int n = snprintf(line, sizeof line, "%s %lld\n", sn, (long long)sky_clock_unix());
	if (sky_file_write(path, line, (size_t)n, 0644) != 0)
		rc = sky_diag_set(d, SKY_EIO, "%s: cannot record the issued certificate", path);
	/* every serial the id ever got, so a revoke covers older certificates
	 * (a re-enrolled board's) too; appended and synced */
	if (!rc && sn[0] && (rc = sky_pki_path(path, ca->dir, SKY_CA_SERIALS_DIR, d)) == 0)
		sky_file_mkdirs(path, 0700);
	snprintf(rel, sizeof rel, SKY_CA_SERIALS_DIR "/%s", id);
	if (!rc && sn[0] && (rc = sky_pki_path(path, ca->dir, rel, d)) == 0 &&
	    sky_file_append(path, line, (size_t)n, 0644) != 0)
		rc = sky_diag_set(d, SKY_EIO, "%s: cannot record the issued serial", path);
	/* and the certificate itself: the planner wraps each job's frame key
	 * for its public key (sky_jobkey.h) */
	snprintf(rel, sizeof rel, SKY_CA_CERTS_DIR "/%s.crt", id);
	if (!rc && sky_pki_path(path, ca->dir, SKY_CA_CERTS_DIR, d) == 0)
		sky_file_mkdirs(path, 0700); /* a PKI made before certs/ existed */
	if (!rc && (rc = sky_pki_path(path, ca->dir, rel, d)) == 0 &&
	    sky_file_write(path, pem, strlen(pem), 0644) != 0)
		rc = sky_diag_set(d, SKY_EIO, "%s: cannot keep the issued certificate", path);
exit:
	mbedtls_x509_crt_free(&crt);
	return rc;
}

int sky_ca_check_not_revoked(const char *dir, const char *id, sky_diag *d)
{
	sky_crl_list *l = malloc(sizeof *l);
	if (!l)
		return sky_diag_set(d, SKY_ENOMEM, "out of memory");
	int rc = sky_crl_list_load(dir, l, d);
	if (rc == 0 && sky_crl_list_has_id(l, id))
		rc = sky_diag_set(d, SKY_EAUTH,
				  "board '%s' is revoked (sky pki revoke): it cannot enroll again "
				  "under this id",
				  id);
	free(l);
	return rc;
}

int sky_ca_enroll_check(sky_ca *ca, const char *msg, size_t len, int64_t now, sky_diag *d)
{
	if (!ca || !ca->ready)
		return sky_diag_set(d, SKY_ESTATE, "CA not opened");
	sky_enroll_req *req = calloc(1, sizeof *req);
	if (!req)
		return sky_diag_set(d, SKY_ENOMEM, "out of memory");
	int rc = sky_enroll_req_decode(msg, len, req, d);
	if (!rc)
		rc = sky_ca_check_not_revoked(ca->dir, req->id, d);
	if (!rc)
		rc = sky_ca_token_use(ca->dir, req->token, req->id, now, 0, d);
	free(req);
	return rc;
}

int sky_ca_enroll(sky_ca *ca, const char *msg, size_t len, int64_t now, char *reply, size_t cap,
		  size_t *reply_len, char *id_out, sky_diag *d)
{
	sky_diag why;
	sky_diag_clear(&why);
	*reply_len = 0;
	if (id_out)
		id_out[0] = '\0';
	sky_enroll_req *req = calloc(1, sizeof *req);
	sky_enroll_reply *rep = calloc(1, sizeof *rep);
	int rc;
	if (!req || !rep) {
		rc = sky_diag_set(&why, SKY_ENOMEM, "out of memory");
		goto exit;
	}
	if (!ca || !ca->ready) {
		rc = sky_diag_set(&why, SKY_ESTATE, "CA not opened");
		goto exit;
	}
	rc = sky_enroll_req_decode(msg, len, req, &why);
	if (rc) {
		/* an id that failed the rule is not echoed back or logged raw */
		req->id[0] = '\0';
		goto exit;
	}
	if (id_out)
		memcpy(id_out, req->id, strlen(req->id) + 1);
	/* a revoked id stays revoked: no token brings it back (before the
	 * token is looked at, so the refusal names the real reason) */
	if ((rc = sky_ca_check_not_revoked(ca->dir, req->id, &why)) != 0)
		goto exit;
	/* token first without using it up, so a bad CSR does not burn it */
	if ((rc = sky_ca_token_use(ca->dir, req->token, req->id, now, 0, &why)) != 0)
		goto exit;
	if ((rc = sky_ca_issue(ca, req->csr, req->csr_len, req->id, rep->cert, sizeof rep->cert,
			       &why)) < 0)
		goto exit;
	if ((rc = sky_ca_token_use(ca->dir, req->token, req->id, now, 1, &why)) != 0)
		goto exit;
	if ((rc = record_issued(ca, req->id, rep->cert, &why)) != 0)
		goto exit;
	memcpy(rep->ca, ca->ca_pem, sizeof rep->ca);
	memcpy(rep->planner, ca->planner_pem, sizeof rep->planner);
	rc = 0;
exit:
	if (rep) {
		if (rc) {
			memset(rep, 0, sizeof *rep);
			snprintf(rep->error, sizeof rep->error, "%.*s", SKY_ENROLL_ERROR_MAX,
				 why.msg[0] ? why.msg : sky_strerror(rc));
		}
		if (req)
			memcpy(rep->id, req->id, sizeof rep->id);
		sky_diag dd;
		sky_diag_clear(&dd);
		int n = sky_enroll_reply_encode(rep, reply, cap, &dd);
		if (n > 0)
			*reply_len = (size_t)n;
		else if (rc == 0)
			rc = sky_diag_set(&why, n, "enrollment reply: %s", dd.msg);
	}
	if (rc)
		sky_diag_set(d, rc, "%s", why.msg[0] ? why.msg : sky_strerror(rc));
	free(req);
	free(rep);
	return rc;
}

int sky_ca_load_signer(sky_signer *s, const char *dir, sky_diag *d)
{
	char k[PATH_CAP], c[PATH_CAP];
	int rc = sky_pki_path(k, dir, SKY_CA_PLANNER_KEY_FILE, d);
	if (!rc)
		rc = sky_pki_path(c, dir, SKY_CA_PLANNER_CERT_FILE, d);
	if (!rc)
		rc = sky_signer_load(s, k, c, d);
	return rc;
}
