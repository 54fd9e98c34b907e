/* The fleet CA's revoked list and CRL; see sky_crl.h. */
#include "sky_crl.h"

#include "sky_clock.h"
#include "sky_enroll.h"
#include "sky_file.h"
#include "sky_log.h"
#include "sky_pki_layout.h"

#include <mbedtls/asn1write.h>
#include <mbedtls/md.h>
#include <mbedtls/oid.h>
#include <mbedtls/pem.h>
#include <mbedtls/x509_crl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PATH_CAP SKY_PKI_PATH_CAP

static const struct {
	int code;
	const char *name, *alias;
} k_reasons[] = {
	{SKY_CRL_REASON_UNSPECIFIED, "unspecified", "unspecified"},
	{SKY_CRL_REASON_KEY_COMPROMISE, "keyCompromise", "key-compromise"},
	{SKY_CRL_REASON_CA_COMPROMISE, "cACompromise", "ca-compromise"},
	{SKY_CRL_REASON_AFFILIATION_CHANGED, "affiliationChanged", "affiliation-changed"},
	{SKY_CRL_REASON_SUPERSEDED, "superseded", "superseded"},
	{SKY_CRL_REASON_CESSATION, "cessationOfOperation", "cessation-of-operation"},
};
#define N_REASONS (sizeof k_reasons / sizeof k_reasons[0])

/* ASCII case-insensitive equality (strcasecmp is <strings.h>, an OS header) */
static int same_ci(const char *a, const char *b)
{
	for (; *a && *b; a++, b++) {
		char x = (*a >= 'A' && *a <= 'Z') ? (char)(*a + 32) : *a;
		char y = (*b >= 'A' && *b <= 'Z') ? (char)(*b + 32) : *b;
		if (x != y)
			return 0;
	}
	return *a == *b;
}

int sky_crl_reason_parse(const char *name, int *code, sky_diag *d)
{
	for (size_t i = 0; name && i < N_REASONS; i++)
		if (same_ci(name, k_reasons[i].name) || same_ci(name, k_reasons[i].alias)) {
			*code = k_reasons[i].code;
			return 0;
		}
	return sky_diag_set(d, SKY_EINVAL,
			    "unknown revocation reason '%s' (unspecified, keyCompromise, "
			    "cACompromise, affiliationChanged, superseded, cessationOfOperation)",
			    name ? name : "");
}

const char *sky_crl_reason_name(int code)
{
	for (size_t i = 0; i < N_REASONS; i++)
		if (k_reasons[i].code == code)
			return k_reasons[i].name;
	return "";
}

/* ---- DER --------------------------------------------------------------------------- */

/* Every asn1write call returns the bytes it wrote or a negative Mbed TLS
 * code; CHK adds the first to len and leaves on the second. */
#define CHK(call)                                                                                  \
	do {                                                                                       \
		int r_ = (call);                                                                   \
		if (r_ < 0)                                                                        \
			return r_;                                                                 \
		len += (size_t)r_;                                                                 \
	} while (0)

/* Time (RFC 5280 §5.1.2.4): UTCTime through 2049, GeneralizedTime from 2050. */
static int write_time(unsigned char **p, unsigned char *start, int64_t t)
{
	char iso[32], s[16]; /* iso: "YYYY-MM-DDTHH:MM:SSZ" */
	sky_clock_format_utc(t, iso, sizeof iso);
	int year = atoi(iso);
	int utc = year < 2050;
	static const int pick[] = {0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18};
	size_t n = 0;
	for (size_t i = utc ? 2 : 0; i < sizeof pick / sizeof pick[0]; i++)
		s[n++] = iso[pick[i]];
	s[n++] = 'Z';
	return mbedtls_asn1_write_tagged_string(
		p, start, utc ? MBEDTLS_ASN1_UTC_TIME : MBEDTLS_ASN1_GENERALIZED_TIME, s, n);
}

/* AlgorithmIdentifier ecdsa-with-SHA256: the parameters are absent (RFC
 * 5758 §3.2), so not mbedtls_asn1_write_algorithm_identifier, which adds a
 * NULL. */
static int write_sig_alg(unsigned char **p, unsigned char *start)
{
	size_t len = 0;
	CHK(mbedtls_asn1_write_oid(p, start, MBEDTLS_OID_ECDSA_SHA256,
				   MBEDTLS_OID_SIZE(MBEDTLS_OID_ECDSA_SHA256)));
	CHK(mbedtls_asn1_write_len(p, start, len));
	CHK(mbedtls_asn1_write_tag(p, start, MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE));
	return (int)len;
}

/* Extension ::= SEQUENCE { extnID, extnValue OCTET STRING } around the DER
 * value already written just below *p (vlen bytes). */
static int wrap_extension(unsigned char **p, unsigned char *start, const char *oid, size_t oid_len,
			  size_t vlen)
{
	size_t len = vlen;
	CHK(mbedtls_asn1_write_len(p, start, vlen));
	CHK(mbedtls_asn1_write_tag(p, start, MBEDTLS_ASN1_OCTET_STRING));
	CHK(mbedtls_asn1_write_oid(p, start, oid, oid_len));
	CHK(mbedtls_asn1_write_len(p, start, len));
	CHK(mbedtls_asn1_write_tag(p, start, MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE));
	return (int)(len - vlen);
}

/* One revokedCertificates entry (§5.1.2.6). */
static int write_entry(unsigned char **p, unsigned char *start, const sky_crl_entry *e)
{
	size_t len = 0;
	if (e->reason >= 0) {
		/* crlEntryExtensions: { reasonCode ENUMERATED } (§5.3.1) */
		size_t vlen = 0, elen = 0;
		int r = mbedtls_asn1_write_enum(p, start, e->reason);
		if (r < 0)
			return r;
		vlen = (size_t)r;
		r = wrap_extension(p, start, MBEDTLS_OID_ID_CE "\x15", 3, vlen);
		if (r < 0)
			return r;
		elen = vlen + (size_t)r;
		len += elen;
		CHK(mbedtls_asn1_write_len(p, start, elen));
		CHK(mbedtls_asn1_write_tag(p, start,
					   MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE));
	}
	CHK(write_time(p, start, e->when));
	/* the serial's content octets exactly as in the certificate */
	CHK(mbedtls_asn1_write_raw_buffer(p, start, e->serial, e->serial_len));
	CHK(mbedtls_asn1_write_len(p, start, e->serial_len));
	CHK(mbedtls_asn1_write_tag(p, start, MBEDTLS_ASN1_INTEGER));
	CHK(mbedtls_asn1_write_len(p, start, len));
	CHK(mbedtls_asn1_write_tag(p, start, MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE));
	return (int)len;
}

/* TBSCertList (§5.1.2), written backwards from *p. */
static int write_tbs(unsigned char **p, unsigned char *start, const mbedtls_x509_crt *ca,
		     const sky_crl_entry *e, int n, int64_t this_update, int64_t next_update,
		     int64_t number)
{
	size_t len = 0;
	/* crlExtensions [0] EXPLICIT { cRLNumber INTEGER } (§5.2.3) */
	{
		size_t xlen = 0;
		unsigned char nb[9];
		size_t nl = 0;
		/* big-endian, shortest form, a leading zero if the top bit is set */
		for (int sh = 56; sh >= 0; sh -= 8) {
			unsigned char b = (unsigned char)((uint64_t)number >> sh);
			if (nl || b || sh == 0)
				nb[nl++] = b;
		}
		if (nb[0] & 0x80) {
			memmove(nb + 1, nb, nl++);
			nb[0] = 0;
		}
		int r;
		if ((r = mbedtls_asn1_write_raw_buffer(p, start, nb, nl)) < 0 ||
		    (xlen += (size_t)r, r = mbedtls_asn1_write_len(p, start, nl)) < 0 ||
		    (xlen += (size_t)r, r = mbedtls_asn1_write_tag(p, start, MBEDTLS_ASN1_INTEGER)) < 0)
			return r;
		xlen += (size_t)r;
		if ((r = wrap_extension(p, start, MBEDTLS_OID_CRL_NUMBER,
					MBEDTLS_OID_SIZE(MBEDTLS_OID_CRL_NUMBER), xlen)) < 0)
			return r;
		xlen += (size_t)r;
		len += xlen;
		CHK(mbedtls_asn1_write_len(p, start, xlen)); /* Extensions SEQUENCE */
		CHK(mbedtls_asn1_write_tag(p, start,
					   MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE));
		size_t ext = len;
		CHK(mbedtls_asn1_write_len(p, start, ext));
		CHK(mbedtls_asn1_write_tag(p, start,
					   MBEDTLS_ASN1_CONTEXT_SPECIFIC | MBEDTLS_ASN1_CONSTRUCTED | 0));
	}
	if (n > 0) {
		size_t rlen = 0;
		for (int i = n - 1; i >= 0; i--) {
			int r = write_entry(p, start, &e[i]);
			if (r < 0)
				return r;
			rlen += (size_t)r;
		}
		len += rlen;
		CHK(mbedtls_asn1_write_len(p, start, rlen));
		CHK(mbedtls_asn1_write_tag(p, start,
					   MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE));
	}
	CHK(write_time(p, start, next_update));
	CHK(write_time(p, start, this_update));
	/* issuer: the CA certificate's subject, byte for byte, so that
	 * verifiers match it to the certificate without re-encoding */
	CHK(mbedtls_asn1_write_raw_buffer(p, start, ca->subject_raw.p, ca->subject_raw.len));
	CHK(write_sig_alg(p, start));
	CHK(mbedtls_asn1_write_int(p, start, 1)); /* v2 */
	CHK(mbedtls_asn1_write_len(p, start, len));
	CHK(mbedtls_asn1_write_tag(p, start, MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE));
	return (int)len;
}

static int sign_around(mbedtls_pk_context *key, sky_sign_rng *rng, unsigned char **p,
		       unsigned char *start, size_t tbs_len)
{
	unsigned char hash[32], sig[MBEDTLS_PK_SIGNATURE_MAX_SIZE];
	size_t sig_len = 0, len = tbs_len;
	int r = mbedtls_md(mbedtls_md_info_from_type(MBEDTLS_MD_SHA256), *p, tbs_len, hash);
	if (r == 0)
		r = mbedtls_pk_sign(key, MBEDTLS_MD_SHA256, hash, sizeof hash, sig, &sig_len,
				    sky_sign_rng_func, rng);
	if (r != 0)
		return r;
	/* asn1write writes backwards, but signatureAlgorithm and the
	 * signature come after the TBS: write them in a scratch buffer, move
	 * the TBS down by their size, and put them behind it */
	unsigned char *tbs = *p;
	size_t tail = 0;
	unsigned char scratch[MBEDTLS_PK_SIGNATURE_MAX_SIZE + 64];
	unsigned char *sp = scratch + sizeof scratch;
	int w = mbedtls_asn1_write_bitstring(&sp, scratch, sig, sig_len * 8);
	if (w < 0)
		return w;
	tail += (size_t)w;
	if ((w = write_sig_alg(&sp, scratch)) < 0)
		return w;
	tail += (size_t)w;
	/* the TBS must move down by tail bytes to make room after it */
	if ((size_t)(tbs - start) < tail)
		return MBEDTLS_ERR_ASN1_BUF_TOO_SMALL;
	memmove(tbs - tail, tbs, tbs_len);
	*p = tbs - tail;
	memcpy(*p + tbs_len, sp, tail);
	len += tail;
	int k;
	if ((k = mbedtls_asn1_write_len(p, start, len)) < 0)
		return k;
	len += (size_t)k;
	if ((k = mbedtls_asn1_write_tag(p, start, MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE)) <
	    0)
		return k;
	return (int)(len + (size_t)k);
}

int sky_crl_write_der(mbedtls_pk_context *key, const mbedtls_x509_crt *ca, const sky_crl_entry *e,
		      int n, int64_t this_update, int64_t next_update, int64_t number,
		      sky_sign_rng *rng, unsigned char *buf, size_t cap, unsigned char **der,
		      sky_diag *d)
{
	for (int i = 0; i < n; i++)
		if (e[i].serial_len == 0 || e[i].serial_len > SKY_CRL_SERIAL_MAX + 1)
			return sky_diag_set(d, SKY_ERANGE, "CRL: serial of '%s' is %zu octets",
					    e[i].id, e[i].serial_len);
	if (!ca || !ca->subject_raw.p || number < 0)
		return sky_diag_set(d, SKY_EINVAL, "CRL: no CA certificate");
	unsigned char *p = buf + cap;
	int tbs = write_tbs(&p, buf, ca, e, n, this_update, next_update, number);
	int all = tbs < 0 ? tbs : sign_around(key, rng, &p, buf, (size_t)tbs);
	if (all == MBEDTLS_ERR_ASN1_BUF_TOO_SMALL)
		return sky_diag_set(d, SKY_ERANGE, "CRL: %d entries do not fit %zu bytes", n, cap);
	if (all < 0)
		return sky_diag_set(d, SKY_ECRYPTO, "CRL: writing or signing failed (-0x%04x)",
				    (unsigned)-all);
	*der = p;
	return all;
}

int sky_crl_write_pem(mbedtls_pk_context *key, const mbedtls_x509_crt *ca, const sky_crl_entry *e,
		      int n, int64_t this_update, int64_t next_update, int64_t number,
		      sky_sign_rng *rng, char *out, size_t cap, sky_diag *d)
{
	unsigned char *buf = malloc(SKY_CRL_DER_MAX), *der = NULL;
	if (!buf)
		return sky_diag_set(d, SKY_ENOMEM, "CRL: out of memory");
	int len = sky_crl_write_der(key, ca, e, n, this_update, next_update, number, rng, buf,
				    SKY_CRL_DER_MAX, &der, d);
	size_t olen = 0;
	if (len > 0) {
		int r = mbedtls_pem_write_buffer("-----BEGIN X509 CRL-----\n",
						 "-----END X509 CRL-----\n", der, (size_t)len,
						 (unsigned char *)out, cap, &olen);
		if (r != 0)
			len = sky_diag_set(d, SKY_ERANGE, "CRL: PEM does not fit %zu bytes", cap);
	}
	free(buf);
	/* olen counts the terminating NUL */
	return len > 0 ? (int)strlen(out) : len;
}

/* ---- the revoked list ------------------------------------------------------------------ */

static int unhex(const char *s, unsigned char *out, size_t cap, size_t *len)
{
	size_t n = strlen(s);
	if (n == 0 || n % 2 || n / 2 > cap)
		return SKY_EFORMAT;
	for (size_t i = 0; i < n / 2; i++) {
		unsigned v = 0;
		if (sscanf(s + 2 * i, "%2x", &v) != 1 || !strchr("0123456789abcdefABCDEF", s[2 * i]) ||
		    !strchr("0123456789abcdefABCDEF", s[2 * i + 1]))
			return SKY_EFORMAT;
		out[i] = (unsigned char)v;
	}
	*len = n / 2;
	return 0;
}

int sky_crl_list_load(const char *dir, sky_crl_list *l, sky_diag *d)
{
	char path[PATH_CAP];
	l->n = 0;
	int rc = sky_pki_path(path, dir, SKY_CRL_REVOKED_FILE, d);
	if (rc)
		return rc;
	FILE *f = fopen(path, "r");
	if (!f)
		return sky_file_exists(path) ? sky_diag_set(d, SKY_EIO, "%s: cannot read", path) : 0;
	char line[256];
	int no = 0;
	while (fgets(line, sizeof line, f)) {
		no++;
		if (line[0] == '\n' || line[0] == '#')
			continue;
		if (l->n >= SKY_CRL_MAX_ENTRIES) {
			rc = sky_diag_set(d, SKY_ERANGE, "%s: over %d entries", path,
					  SKY_CRL_MAX_ENTRIES);
			break;
		}
		sky_crl_entry *e = &l->e[l->n];
		char sn[2 * SKY_CRL_SERIAL_MAX + 8];
		long long when = 0;
		int reason = 0;
		memset(e, 0, sizeof *e);
		if (sscanf(line, "%64s %47s %lld %d", e->id, sn, &when, &reason) != 4 ||
		    sky_enroll_check_id(e->id, NULL) != 0 ||
		    unhex(sn, e->serial, sizeof e->serial, &e->serial_len) != 0 || when < 0 ||
		    reason < SKY_CRL_REASON_NONE || reason > SKY_CRL_REASON_CESSATION) {
			rc = sky_diag_set(d, SKY_EFORMAT, "%s:%d: damaged line", path, no);
			break;
		}
		e->when = when;
		e->reason = reason;
		l->n++;
	}
	fclose(f);
	return rc;
}

int sky_crl_list_has_id(const sky_crl_list *l, const char *id)
{
	for (int i = 0; i < l->n; i++)
		if (strcmp(l->e[i].id, id) == 0)
			return 1;
	return 0;
}

static int list_save(const char *dir, const sky_crl_list *l, sky_diag *d)
{
	char path[PATH_CAP];
	int rc = sky_pki_path(path, dir, SKY_CRL_REVOKED_FILE, d);
	if (rc)
		return rc;
	size_t cap = (size_t)(l->n + 1) * 160, n = 0;
	char *buf = malloc(cap);
	if (!buf)
		return sky_diag_set(d, SKY_ENOMEM, "out of memory");
	for (int i = 0; i < l->n; i++) {
		const sky_crl_entry *e = &l->e[i];
		n += (size_t)snprintf(buf + n, cap - n, "%s ", e->id);
		for (size_t k = 0; k < e->serial_len; k++)
			n += (size_t)snprintf(buf + n, cap - n, "%02x", e->serial[k]);
		n += (size_t)snprintf(buf + n, cap - n, " %lld %d\n", (long long)e->when, e->reason);
	}
	if (sky_file_write(path, buf, n, 0644) != 0)
		rc = sky_diag_set(d, SKY_EIO, "%s: cannot write", path);
	free(buf);
	return rc;
}

/* Unix seconds of a certificate's notAfter. */
static int64_t not_after(const mbedtls_x509_crt *c)
{
	const mbedtls_x509_time *t = &c->valid_to;
	/* days from civil (Howard Hinnant's algorithm) */
	int y = t->year - (t->mon <= 2);
	int era = (y >= 0 ? y : y - 399) / 400;
	unsigned yoe = (unsigned)(y - era * 400);
	unsigned doy = (unsigned)((153 * (t->mon + (t->mon > 2 ? -3 : 9)) + 2) / 5 + t->day - 1);
	unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	int64_t days = (int64_t)era * 146097 + (int64_t)doe - 719468;
	return days * 86400 + t->hour * 3600 + t->min * 60 + t->sec;
}

/* Every site broker (sky pki bridge) checks this CA's CRL too: a copy in
 * <dir>/sites/<site>/ for every site of sites.list whose directory exists,
 * which its mosquitto.conf names (sky_ca_write_site_conf). */
static int copy_to_sites(const char *dir, const char *pem, size_t n, sky_diag *d)
{
	char path[PATH_CAP], rel[64 + SKY_CA_SITE_NAME_MAX], list[4096],
		site[SKY_CA_SITE_NAME_MAX + 1];
	int rc = sky_pki_path(path, dir, SKY_CA_SITES_FILE, d);
	if (rc)
		return rc;
	long ln = sky_file_read(path, list, sizeof list - 1);
	list[ln > 0 ? ln : 0] = '\0';
	for (const char *p = list;;) {
		while (*p == '\n')
			p++;
		if (!*p)
			break;
		size_t l = strcspn(p, "\n");
		snprintf(site, sizeof site, "%.*s", (int)(l < sizeof site ? l : sizeof site - 1), p);
		p += l;
		/* a name the CA would not issue names no site directory of ours */
		if (l >= sizeof site || sky_ca_check_site_name(site, NULL) != 0)
			continue;
		snprintf(rel, sizeof rel, SKY_CA_SITES_DIR "/%s", site);
		if ((rc = sky_pki_path(path, dir, rel, d)) != 0)
			return rc;
		if (!sky_file_is_dir(path))
			continue;
		snprintf(rel, sizeof rel, SKY_CA_SITES_DIR "/%s/" SKY_CRL_FILE, site);
		if ((rc = sky_pki_path(path, dir, rel, d)) != 0)
			return rc;
		if (sky_file_write(path, pem, n, 0644) != 0)
			return sky_diag_set(d, SKY_EIO, "%s: cannot write", path);
	}
	return 0;
}

int sky_crl_refresh(const char *dir, sky_diag *d)
{
	char path[PATH_CAP];
	mbedtls_pk_context key;
	mbedtls_x509_crt ca;
	mbedtls_x509_crl back;
	sky_sign_rng rng;
	mbedtls_pk_init(&key);
	mbedtls_x509_crt_init(&ca);
	mbedtls_x509_crl_init(&back);
	memset(&rng, 0, sizeof rng);
	sky_crl_list *l = malloc(sizeof *l);
	size_t pem_cap = SKY_CRL_DER_MAX * 4 / 3 + 1024;
	char *pem = malloc(pem_cap);
	int rc = 0;
	if (!l || !pem) {
		rc = sky_diag_set(d, SKY_ENOMEM, "out of memory");
		goto exit;
	}
	if ((rc = sky_pki_path(path, dir, SKY_CA_KEY_FILE, d)) != 0)
		goto exit;
	if (!sky_file_exists(path)) {
		rc = sky_diag_set(d, SKY_ENOTFOUND, "%s: no fleet CA here (run sky pki init)", dir);
		goto exit;
	}
	if ((rc = sky_sign_load_key(&key, path, d)) != 0 ||
	    (rc = sky_pki_path(path, dir, SKY_CA_CERT_FILE, d)) != 0 ||
	    (rc = sky_sign_load_cert(&ca, path, d)) != 0 || (rc = sky_crl_list_load(dir, l, d)) != 0 ||
	    (rc = sky_sign_rng_init(&rng, "sky-crl", d)) != 0)
		goto exit;
	int64_t number = 0;
	if ((rc = sky_pki_path(path, dir, SKY_CRL_NUMBER_FILE, d)) != 0)
		goto exit;
	int nrc = sky_file_read_count(path, &number);
	if (nrc != 0 && nrc != SKY_ENOTFOUND) {
		rc = sky_diag_set(d, SKY_EFORMAT, "%s is damaged (the CRL number must only grow)",
				  path);
		goto exit;
	}
	number++;
	/* the number is spent before the CRL carrying it exists */
	if (sky_file_write_count(path, number, 0644) != 0) {
		rc = sky_diag_set(d, SKY_EIO, "%s: cannot write", path);
		goto exit;
	}
	int64_t now = sky_clock_unix();
	int n = sky_crl_write_pem(&key, &ca, l->e, l->n, now, not_after(&ca), number, &rng, pem,
				  pem_cap, d);
	if (n < 0) {
		rc = n;
		goto exit;
	}
	/* what the broker will read must parse */
	if (mbedtls_x509_crl_parse(&back, (const unsigned char *)pem, (size_t)n + 1) != 0) {
		rc = sky_diag_set(d, SKY_EFORMAT, "CRL: the new CRL does not parse back");
		goto exit;
	}
	if ((rc = sky_pki_path(path, dir, SKY_CRL_FILE, d)) != 0)
		goto exit;
	if (sky_file_write(path, pem, (size_t)n, 0644) != 0) {
		rc = sky_diag_set(d, SKY_EIO, "%s: cannot write", path);
		goto exit;
	}
	rc = copy_to_sites(dir, pem, (size_t)n, d);
exit:
	mbedtls_pk_free(&key);
	mbedtls_x509_crt_free(&ca);
	mbedtls_x509_crl_free(&back);
	sky_sign_rng_free(&rng);
	free(l);
	free(pem);
	return rc;
}

#define MAX_ISSUED 64 /* certificates of one id a revoke looks at */

/* Adds serial hex sn to e[0..*n) unless it is there. */
static void add_serial(sky_crl_entry *e, int *n, const unsigned char *sn, size_t len)
{
	if (len == 0 || len > sizeof e->serial || *n >= MAX_ISSUED)
		return;
	for (int i = 0; i < *n; i++)
		if (e[i].serial_len == len && memcmp(e[i].serial, sn, len) == 0)
			return;
	memset(&e[*n], 0, sizeof e[*n]);
	memcpy(e[*n].serial, sn, len);
	e[(*n)++].serial_len = len;
}

/* The serials of every certificate the CA issued to id: each line of
 * <dir>/serials/<id> (appended at every issue), the current
 * <dir>/certs/<id>.crt, and <dir>/issued/<id> (PKIs from before serials/
 * existed have only those two). Returns how many (>= 1) or SKY_ENOTFOUND. */
static int issued_serials(const char *dir, const char *id, sky_crl_entry *e, sky_diag *d)
{
	char path[PATH_CAP], rel[32 + SKY_ENROLL_ID_MAX], sn[80];
	static char text[MAX_ISSUED * 64];
	unsigned char raw[SKY_CRL_SERIAL_MAX + 1];
	size_t len = 0;
	int n = 0;
	snprintf(rel, sizeof rel, SKY_CA_SERIALS_DIR "/%s", id);
	long k = sky_pki_path(path, dir, rel, d) == 0 ? sky_file_read(path, text, sizeof text - 1) : -1;
	if (k == SKY_ERANGE)
		SKY_WARN("%s: more than fits %zu bytes; the first lines are revoked", path,
			 sizeof text - 1);
	for (char *line = k > 0 ? (text[k] = '\0', text) : NULL, *next; line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (sscanf(line, "%79s", sn) == 1 && unhex(sn, raw, sizeof raw, &len) == 0)
			add_serial(e, &n, raw, len);
	}
	mbedtls_x509_crt crt;
	mbedtls_x509_crt_init(&crt);
	snprintf(rel, sizeof rel, SKY_CA_CERTS_DIR "/%s.crt", id);
	if (sky_pki_path(path, dir, rel, d) == 0 && mbedtls_x509_crt_parse_file(&crt, path) == 0)
		add_serial(e, &n, crt.serial.p, crt.serial.len);
	mbedtls_x509_crt_free(&crt);
	snprintf(rel, sizeof rel, "issued/%s", id);
	k = sky_pki_path(path, dir, rel, d) == 0 ? sky_file_read(path, text, sizeof text - 1) : -1;
	if (k > 0) {
		text[k] = '\0';
		if (sscanf(text, "%79s", sn) == 1 && unhex(sn, raw, sizeof raw, &len) == 0)
			add_serial(e, &n, raw, len);
	}
	if (n > 0)
		return n;
	return sky_diag_set(d, SKY_ENOTFOUND,
			    "no board '%s': the CA in %s never issued it a certificate", id, dir);
}

int sky_crl_revoke(const char *dir, const char *id, int reason, sky_diag *d)
{
	char path[PATH_CAP];
	if (!id || sky_enroll_check_id(id, d) != 0)
		return SKY_EINVAL;
	int rc = sky_pki_path(path, dir, SKY_CA_KEY_FILE, d);
	if (rc)
		return rc;
	if (!sky_file_exists(path))
		return sky_diag_set(d, SKY_ENOTFOUND, "%s: no fleet CA here (run sky pki init)", dir);
	sky_crl_list *l = malloc(sizeof *l);
	if (!l)
		return sky_diag_set(d, SKY_ENOMEM, "out of memory");
	static sky_crl_entry e[MAX_ISSUED];
	int n = 0, added = 0;
	if ((rc = sky_crl_list_load(dir, l, d)) != 0 || (rc = n = issued_serials(dir, id, e, d)) < 0)
		goto exit;
	/* every certificate of the id, older ones (re-enrolled) too */
	for (int k = 0; k < n; k++) {
		int listed = 0;
		for (int i = 0; i < l->n && !listed; i++)
			listed = l->e[i].serial_len == e[k].serial_len &&
				 memcmp(l->e[i].serial, e[k].serial, e[k].serial_len) == 0;
		if (listed)
			continue;
		if (l->n >= SKY_CRL_MAX_ENTRIES) {
			rc = sky_diag_set(d, SKY_ERANGE, "the revoked list holds %d entries already",
					  SKY_CRL_MAX_ENTRIES);
			goto exit;
		}
		snprintf(e[k].id, sizeof e[k].id, "%s", id);
		e[k].when = sky_clock_unix();
		e[k].reason = reason;
		l->e[l->n++] = e[k];
		added++;
	}
	if (!added) {
		rc = 1; /* every one listed already: nothing changes */
		goto exit;
	}
	if ((rc = list_save(dir, l, d)) != 0)
		goto exit;
	rc = sky_crl_refresh(dir, d);
exit:
	free(l);
	return rc;
}
