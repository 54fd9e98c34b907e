/* Signed envelopes (ES256 over the exact payload bytes); see sky_sign.h. */
#include "sky_sign.h"

#include "sky_file.h"
#include "sky_json.h"

#include <mbedtls/base64.h>
#include <mbedtls/ecp.h>
#include <mbedtls/oid.h>
#include <mbedtls/platform_util.h>
#include <mbedtls/sha256.h>
#include <stdlib.h>
#include <string.h>

/* A DER ECDSA P-256 signature is at most 72 bytes (two 33-byte INTEGERs
 * plus headers); base64 of that is 96 characters. Leave room, refuse more. */
#define SIG_DER_MAX 80
#define SIG_B64_MAX 120
#define PEM_FILE_MAX (64u << 10)

/* ---- randomness ------------------------------------------------------------ */

int sky_sign_rng_init(sky_sign_rng *r, const char *personal, sky_diag *d)
{
	memset(r, 0, sizeof *r);
	mbedtls_entropy_init(&r->entropy);
	mbedtls_ctr_drbg_init(&r->drbg);
	const char *p = personal ? personal : "sky";
	int mrc = mbedtls_ctr_drbg_seed(&r->drbg, mbedtls_entropy_func, &r->entropy,
					(const unsigned char *)p, strlen(p));
	if (mrc != 0)
		return sky_diag_set(d, SKY_ECRYPTO, "seeding the random generator failed (-0x%04x)",
				    (unsigned)-mrc);
	r->ready = 1;
	return 0;
}

void sky_sign_rng_free(sky_sign_rng *r)
{
	if (!r)
		return;
	/* free of a zeroed (never initialised) context is safe in Mbed TLS 2.28 */
	mbedtls_ctr_drbg_free(&r->drbg);
	mbedtls_entropy_free(&r->entropy);
	memset(r, 0, sizeof *r);
}

int sky_sign_rng_func(void *p_rng, unsigned char *out, size_t len)
{
	sky_sign_rng *r = p_rng;
	return mbedtls_ctr_drbg_random(&r->drbg, out, len);
}

/* ---- PEM loading -------------------------------------------------------------- */

/* Reads a PEM file into a fresh NUL-terminated heap buffer (Mbed TLS wants
 * the NUL counted in the length for PEM input). */
static int read_pem(const char *path, char **out, size_t *len, sky_diag *d)
{
	*out = NULL;
	char *buf = malloc(PEM_FILE_MAX + 1);
	if (!buf)
		return sky_diag_set(d, SKY_ENOMEM, "%s: out of memory", path);
	long n = sky_file_read(path, buf, PEM_FILE_MAX);
	if (n < 0) {
		free(buf);
		if (n == SKY_ENOTFOUND)
			return sky_diag_set(d, SKY_ENOTFOUND, "%s: no such file", path);
		if (n == SKY_ERANGE)
			return sky_diag_set(d, SKY_ERANGE, "%s: larger than %u bytes", path,
					    PEM_FILE_MAX);
		return sky_diag_set(d, (int)n, "%s: cannot read", path);
	}
	buf[n] = '\0';
	*out = buf;
	*len = (size_t)n;
	return 0;
}

int sky_sign_load_cert(mbedtls_x509_crt *crt, const char *path, sky_diag *d)
{
	char *pem = NULL;
	size_t n = 0;
	int rc = read_pem(path, &pem, &n, d);
	if (rc)
		return rc;
	int mrc = mbedtls_x509_crt_parse(crt, (const unsigned char *)pem, n + 1);
	if (mrc != 0)
		rc = sky_diag_set(d, SKY_ECRYPTO, "%s: not a PEM certificate (-0x%04x)", path,
				  (unsigned)-mrc);
	free(pem);
	return rc;
}

int sky_sign_load_key(mbedtls_pk_context *pk, const char *path, sky_diag *d)
{
	int mode = sky_file_mode(path);
	if (mode == SKY_ENOTFOUND)
		return sky_diag_set(d, SKY_ENOTFOUND, "%s: no such file", path);
	if (mode >= 0 && (mode & 077) != 0)
		return sky_diag_set(d, SKY_EAUTH,
				    "%s: private key is readable by others (mode %03o, want 0600)",
				    path, (unsigned)mode);
	char *pem = NULL;
	size_t n = 0;
	int rc = read_pem(path, &pem, &n, d);
	if (rc)
		return rc;
	int mrc = mbedtls_pk_parse_key(pk, (const unsigned char *)pem, n + 1, NULL, 0);
	if (mrc != 0)
		rc = sky_diag_set(d, SKY_ECRYPTO, "%s: not an unencrypted PEM private key (-0x%04x)",
				  path, (unsigned)-mrc);
	/* the key text is secret: do not leave it in freed memory */
	mbedtls_platform_zeroize(pem, n);
	free(pem);
	return rc;
}

int sky_sign_cert_cn(const mbedtls_x509_crt *crt, char *buf, size_t cap)
{
	for (const mbedtls_x509_name *nm = &crt->subject; nm; nm = nm->next) {
		if (!nm->oid.p || MBEDTLS_OID_CMP(MBEDTLS_OID_AT_CN, &nm->oid) != 0)
			continue;
		if (nm->val.len >= cap)
			return SKY_ERANGE;
		memcpy(buf, nm->val.p, nm->val.len);
		buf[nm->val.len] = '\0';
		/* a CN with an embedded NUL would compare equal to its prefix */
		if (strlen(buf) != nm->val.len)
			return SKY_ERANGE;
		return 0;
	}
	return SKY_ENOTFOUND;
}

/* ---- signer ------------------------------------------------------------------------ */

void sky_signer_init(sky_signer *s)
{
	memset(s, 0, sizeof *s);
	mbedtls_pk_init(&s->key);
}

void sky_signer_free(sky_signer *s)
{
	if (!s)
		return;
	mbedtls_pk_free(&s->key);
	sky_sign_rng_free(&s->rng);
	memset(s, 0, sizeof *s);
}

int sky_signer_load(sky_signer *s, const char *key_path, const char *cert_path, sky_diag *d)
{
	mbedtls_x509_crt crt;
	mbedtls_x509_crt_init(&crt);
	sky_signer_free(s);
	sky_signer_init(s);
	int rc = sky_sign_load_key(&s->key, key_path, d);
	if (rc)
		goto exit;
	rc = sky_sign_load_cert(&crt, cert_path, d);
	if (rc)
		goto exit;
	if (!mbedtls_pk_can_do(&s->key, MBEDTLS_PK_ECDSA) ||
	    mbedtls_pk_check_pair(&crt.pk, &s->key) != 0) {
		rc = sky_diag_set(d, SKY_EAUTH, "%s does not hold the EC key of %s", key_path,
				  cert_path);
		goto exit;
	}
	if (sky_sign_cert_cn(&crt, s->name, sizeof s->name) != 0) {
		rc = sky_diag_set(d, SKY_ECRYPTO, "%s: no usable subject CN", cert_path);
		goto exit;
	}
	rc = sky_sign_rng_init(&s->rng, "sky-signer", d);
	if (rc)
		goto exit;
	s->ready = 1;
exit:
	mbedtls_x509_crt_free(&crt);
	if (rc)
		sky_signer_free(s);
	return rc;
}

int sky_sign_envelope(sky_signer *s, const char *payload, size_t len, char *out, size_t cap,
		      sky_diag *d)
{
	if (!s || !s->ready)
		return sky_diag_set(d, SKY_ESTATE, "sign: signer not loaded");
	if (!payload || !out || len == 0 || len > SKY_SIGN_MAX_PAYLOAD)
		return sky_diag_set(d, SKY_EINVAL, "sign: payload of %zu bytes (want 1..%u)", len,
				    SKY_SIGN_MAX_PAYLOAD);
	if (memchr(payload, '\0', len))
		return sky_diag_set(d, SKY_EINVAL, "sign: payload holds a NUL byte");

	unsigned char hash[32], sig[MBEDTLS_PK_SIGNATURE_MAX_SIZE];
	char sig_b64[SIG_B64_MAX];
	size_t sig_len = 0;
	char *text = NULL;
	cJSON *env = NULL;
	int rc;

	if (mbedtls_sha256_ret((const unsigned char *)payload, len, hash, 0) != 0 ||
	    mbedtls_pk_sign(&s->key, MBEDTLS_MD_SHA256, hash, sizeof hash, sig, &sig_len,
			    sky_sign_rng_func, &s->rng) != 0 ||
	    sig_len > SIG_DER_MAX) {
		rc = sky_diag_set(d, SKY_ECRYPTO, "sign: ECDSA signing failed");
		goto exit;
	}
	if (sky_b64_encode(sig, sig_len, sig_b64, sizeof sig_b64) < 0) {
		rc = sky_diag_set(d, SKY_ECRYPTO, "sign: signature encoding failed");
		goto exit;
	}
	/* cJSON copies from a C string, so the payload needs its terminator */
	text = malloc(len + 1);
	if (!text) {
		rc = sky_diag_set(d, SKY_ENOMEM, "sign: out of memory");
		goto exit;
	}
	memcpy(text, payload, len);
	text[len] = '\0';
	env = sky_json_new_object();
	if (!env || !cJSON_AddNumberToObject(env, "v", SKY_SIGN_VERSION) ||
	    !cJSON_AddStringToObject(env, "alg", SKY_SIGN_ALG) ||
	    !cJSON_AddStringToObject(env, "signer", s->name) ||
	    !cJSON_AddStringToObject(env, "payload", text) ||
	    !cJSON_AddStringToObject(env, "sig", sig_b64)) {
		rc = sky_diag_set(d, SKY_ENOMEM, "sign: JSON pool exhausted");
		goto exit;
	}
	size_t lim = cap < SKY_SIGN_MAX_ENVELOPE + 1 ? cap : SKY_SIGN_MAX_ENVELOPE + 1;
	rc = sky_json_print(env, out, lim);
	if (rc < 0)
		rc = sky_diag_set(d, SKY_ERANGE,
				  "sign: envelope for a %zu-byte payload exceeds %zu bytes", len,
				  lim - 1);
exit:
	sky_json_free(env);
	free(text);
	return rc;
}

/* ---- verification ------------------------------------------------------------------ */

static const char *const k_members[] = {"v", "alg", "signer", "payload", "sig"};
#define N_MEMBERS (sizeof k_members / sizeof k_members[0])

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

int sky_verify_envelope(const mbedtls_x509_crt *signer_cert, const char *msg, size_t len,
			char *payload_buf, size_t payload_cap, size_t *payload_len, sky_diag *d)
{
	if (!signer_cert || !msg || !payload_buf || !payload_len)
		return sky_diag_set(d, SKY_EINVAL, "plan envelope: NULL argument");
	if (len > SKY_SIGN_MAX_ENVELOPE)
		return sky_diag_set(d, SKY_ERANGE,
				    "plan envelope: %zu bytes, over the %u-byte limit (refused unread)",
				    len, SKY_SIGN_MAX_ENVELOPE);
	if (len == 0)
		return sky_diag_set(d, SKY_EFORMAT, "plan envelope: empty message");
	/* no signed payload holds a NUL (sky_sign_envelope refuses one), and a
	 * string cut at one would read as something else than what was sent */
	size_t nul = sky_json_nul_at(msg, len);
	if (nul < len)
		return sky_diag_set(d, SKY_EFORMAT,
				    "plan envelope: a NUL character at byte %zu (raw or \\u0000)", nul);

	int rc;
	const char *end = NULL;
	(void)sky_json_pool_used(); /* installs the pool hooks before cJSON runs */
	cJSON *env = cJSON_ParseWithLengthOpts(msg, len, &end, 0);
	if (!env) {
		size_t at = end && end >= msg ? (size_t)(end - msg) : 0;
		return sky_diag_set(d, SKY_EFORMAT,
				    "plan envelope: not JSON or truncated (near byte %zu of %zu)", at,
				    len);
	}
	for (const char *p = end; p && p < msg + len; p++) {
		if (!is_ws(*p)) {
			rc = sky_diag_set(d, SKY_EFORMAT,
					  "plan envelope: trailing bytes after the JSON object");
			goto exit;
		}
	}
	if (!cJSON_IsObject(env)) {
		rc = sky_diag_set(d, SKY_EFORMAT, "plan envelope: not a JSON object");
		goto exit;
	}
	/* exactly the five members, each once */
	int seen[N_MEMBERS] = {0};
	for (const cJSON *m = env->child; m; m = m->next) {
		size_t i = 0;
		while (i < N_MEMBERS && !(m->string && strcmp(m->string, k_members[i]) == 0))
			i++;
		if (i == N_MEMBERS) {
			rc = sky_diag_set(d, SKY_EFORMAT, "plan envelope: unexpected member '%.40s'",
					  m->string ? m->string : "");
			goto exit;
		}
		if (seen[i]++) {
			rc = sky_diag_set(d, SKY_EFORMAT, "plan envelope: member '%s' appears twice",
					  k_members[i]);
			goto exit;
		}
	}
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(env, "v");
	const cJSON *alg = cJSON_GetObjectItemCaseSensitive(env, "alg");
	const cJSON *signer = cJSON_GetObjectItemCaseSensitive(env, "signer");
	const cJSON *payload = cJSON_GetObjectItemCaseSensitive(env, "payload");
	const cJSON *sig = cJSON_GetObjectItemCaseSensitive(env, "sig");
	if (!sig || (cJSON_IsString(sig) && sig->valuestring[0] == '\0')) {
		rc = sky_diag_set(d, SKY_EAUTH, "plan envelope: unsigned (no signature)");
		goto exit;
	}
	if (!v || !cJSON_IsNumber(v) || v->valuedouble != SKY_SIGN_VERSION) {
		rc = sky_diag_set(d, SKY_EFORMAT, "plan envelope: member 'v' must be %d",
				  SKY_SIGN_VERSION);
		goto exit;
	}
	if (!alg || !cJSON_IsString(alg) || strcmp(alg->valuestring, SKY_SIGN_ALG) != 0) {
		rc = sky_diag_set(d, SKY_EFORMAT, "plan envelope: member 'alg' must be \"%s\"",
				  SKY_SIGN_ALG);
		goto exit;
	}
	if (!signer || !cJSON_IsString(signer) || !payload || !cJSON_IsString(payload) ||
	    !cJSON_IsString(sig)) {
		rc = sky_diag_set(d, SKY_EFORMAT,
				  "plan envelope: members 'signer', 'payload' and 'sig' must be strings");
		goto exit;
	}
	char cn[SKY_SIGN_NAME_MAX + 1];
	if (sky_sign_cert_cn(signer_cert, cn, sizeof cn) != 0) {
		rc = sky_diag_set(d, SKY_EAUTH, "plan envelope: trusted certificate has no CN");
		goto exit;
	}
	if (strcmp(cn, signer->valuestring) != 0) {
		rc = sky_diag_set(d, SKY_EAUTH,
				  "plan envelope: signed by '%.64s', but only '%s' is trusted",
				  signer->valuestring, cn);
		goto exit;
	}
	size_t plen = strlen(payload->valuestring);
	if (plen == 0 || plen > SKY_SIGN_MAX_PAYLOAD) {
		rc = sky_diag_set(d, SKY_EFORMAT, "plan envelope: payload of %zu bytes (want 1..%u)",
				  plen, SKY_SIGN_MAX_PAYLOAD);
		goto exit;
	}
	unsigned char der[SIG_DER_MAX];
	size_t slen = strlen(sig->valuestring);
	int dlen = slen > SIG_B64_MAX ? SKY_ERANGE
				      : sky_b64_decode(sig->valuestring, slen, der, sizeof der);
	if (dlen <= 0) {
		rc = sky_diag_set(d, SKY_EFORMAT,
				  "plan envelope: 'sig' is not base64 of a DER ECDSA signature");
		goto exit;
	}
	if (!mbedtls_pk_can_do(&signer_cert->pk, MBEDTLS_PK_ECDSA)) {
		rc = sky_diag_set(d, SKY_EAUTH, "plan envelope: trusted certificate is not ECDSA");
		goto exit;
	}
	unsigned char hash[32];
	if (mbedtls_sha256_ret((const unsigned char *)payload->valuestring, plen, hash, 0) != 0) {
		rc = sky_diag_set(d, SKY_ECRYPTO, "plan envelope: hashing failed");
		goto exit;
	}
	/* mbedtls_pk_verify takes a non-const context but does not change it */
	int mrc = mbedtls_pk_verify((mbedtls_pk_context *)&signer_cert->pk, MBEDTLS_MD_SHA256, hash,
				    sizeof hash, der, (size_t)dlen);
	if (mrc != 0) {
		rc = sky_diag_set(d, SKY_EAUTH,
				  "plan envelope: signature does not verify with %s's key (forged, "
				  "altered or signed by another key; -0x%04x)",
				  cn, (unsigned)-mrc);
		goto exit;
	}
	if (plen + 1 > payload_cap) {
		rc = sky_diag_set(d, SKY_ERANGE, "plan envelope: payload of %zu bytes, buffer %zu",
				  plen, payload_cap);
		goto exit;
	}
	memcpy(payload_buf, payload->valuestring, plen + 1);
	*payload_len = plen;
	rc = 0;
exit:
	sky_json_free(env);
	return rc;
}

/* ---- base64 --------------------------------------------------------------------------- */

int sky_b64_encode(const unsigned char *in, size_t len, char *out, size_t cap)
{
	size_t olen = 0;
	if (mbedtls_base64_encode((unsigned char *)out, cap, &olen, in, len) != 0)
		return SKY_ERANGE;
	return (int)olen;
}

static int b64_char(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '+' || c == '/';
}

int sky_b64_decode(const char *in, size_t len, unsigned char *out, size_t cap)
{
	/* Mbed TLS skips line breaks and spaces; a signature has none, so only
	 * the canonical alphabet with 0-2 '=' at the end passes. */
	if (len % 4 != 0)
		return SKY_EFORMAT;
	size_t pad = 0;
	while (pad < 2 && pad < len && in[len - 1 - pad] == '=')
		pad++;
	for (size_t i = 0; i < len - pad; i++)
		if (!b64_char(in[i]))
			return SKY_EFORMAT;
	size_t olen = 0;
	int mrc = mbedtls_base64_decode(out, cap, &olen, (const unsigned char *)in, len);
	if (mrc == MBEDTLS_ERR_BASE64_BUFFER_TOO_SMALL)
		return SKY_ERANGE;
	if (mrc != 0)
		return SKY_EFORMAT;
	return (int)olen;
}

/* ---- keys -------------------------------------------------------------------------------- */

int sky_sign_gen_key(mbedtls_pk_context *pk, sky_sign_rng *rng, sky_diag *d)
{
	int mrc = mbedtls_pk_setup(pk, mbedtls_pk_info_from_type(MBEDTLS_PK_ECKEY));
	if (mrc == 0)
		mrc = mbedtls_ecp_gen_key(MBEDTLS_ECP_DP_SECP256R1, mbedtls_pk_ec(*pk),
					  sky_sign_rng_func, rng);
	if (mrc != 0)
		return sky_diag_set(d, SKY_ECRYPTO, "EC P-256 key generation failed (-0x%04x)",
				    (unsigned)-mrc);
	return 0;
}

int sky_sign_write_key(mbedtls_pk_context *pk, const char *path, sky_diag *d)
{
	unsigned char pem[1024]; /* a P-256 key in PEM is ~230 bytes */
	int rc = 0;
	if (mbedtls_pk_write_key_pem(pk, pem, sizeof pem) != 0) {
		rc = sky_diag_set(d, SKY_ECRYPTO, "%s: cannot encode the private key", path);
		goto exit;
	}
	if (sky_file_write(path, pem, strlen((char *)pem), 0600) != 0)
		rc = sky_diag_set(d, SKY_EIO, "%s: cannot write", path);
exit:
	mbedtls_platform_zeroize(pem, sizeof pem);
	return rc;
}
