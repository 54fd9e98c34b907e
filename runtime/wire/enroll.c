/* Enrollment request/reply messages and the board-id rule; see sky_enroll.h. */
#include "sky_enroll.h"

#include "sky_json.h"

#include <string.h>

int sky_enroll_check_id(const char *id, sky_diag *d)
{
	if (!id || id[0] == '\0')
		return sky_diag_set(d, SKY_EINVAL, "board id is empty");
	size_t n = 0;
	for (; id[n]; n++) {
		unsigned char c = (unsigned char)id[n];
		int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
			 c == '_' || c == '-';
		if (!ok)
			return sky_diag_set(d, SKY_EINVAL,
					    "board id has byte 0x%02x at position %zu (allowed: "
					    "A-Z a-z 0-9 _ -; never # + / or control characters)",
					    c, n);
		if (n >= SKY_ENROLL_ID_MAX)
			return sky_diag_set(d, SKY_EINVAL, "board id is longer than %d characters",
					    SKY_ENROLL_ID_MAX);
	}
	if (strncmp(id, SKY_ENROLL_RESERVED_PREFIX, sizeof SKY_ENROLL_RESERVED_PREFIX - 1) == 0)
		return sky_diag_set(d, SKY_EINVAL,
				    "board id '%s' is reserved for the fleet (ids starting with "
				    "\"" SKY_ENROLL_RESERVED_PREFIX "\" name its own identities)",
				    id);
	return 0;
}

int sky_enroll_check_token(const char *token, sky_diag *d)
{
	size_t n = 0;
	for (; token && token[n] && n <= SKY_ENROLL_TOKEN_LEN; n++) {
		char c = token[n];
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return sky_diag_set(d, SKY_EINVAL, "claim token: not lowercase hex");
	}
	if (n != SKY_ENROLL_TOKEN_LEN)
		return sky_diag_set(d, SKY_EINVAL, "claim token: want %d hex characters",
				    SKY_ENROLL_TOKEN_LEN);
	return 0;
}

/* The message must be an object whose "v" is our version. */
static cJSON *parse_msg(const char *what, const char *msg, size_t len, size_t max, sky_diag *d)
{
	if (!msg || len == 0) {
		sky_diag_set(d, SKY_EFORMAT, "%s: empty message", what);
		return NULL;
	}
	if (len > max) {
		sky_diag_set(d, SKY_ERANGE, "%s: %zu bytes, over the %zu-byte limit (refused unread)",
			     what, len, max);
		return NULL;
	}
	cJSON *doc = sky_json_parse(msg, len, d);
	if (!doc)
		return NULL;
	int64_t v = 0;
	if (!cJSON_IsObject(doc)) {
		sky_diag_set(d, SKY_EFORMAT, "%s: not a JSON object", what);
		goto fail;
	}
	if (sky_json_i64(doc, "v", SKY_ENROLL_VERSION, SKY_ENROLL_VERSION, &v, what, d) != 0)
		goto fail;
	return doc;
fail:
	sky_json_free(doc);
	return NULL;
}

/* Maps a getter's failure to the codes the header promises. */
static int str_member(const cJSON *doc, const char *key, char *buf, size_t cap, const char *what,
		      sky_diag *d)
{
	int rc = sky_json_str(doc, key, buf, cap, what, d);
	return rc == SKY_ENOTFOUND ? SKY_EFORMAT : rc;
}

int sky_enroll_req_decode(const char *msg, size_t len, sky_enroll_req *r, sky_diag *d)
{
	memset(r, 0, sizeof *r);
	cJSON *doc = parse_msg("enrollment request", msg, len, SKY_ENROLL_REQ_MAX, d);
	if (!doc)
		return len > SKY_ENROLL_REQ_MAX ? SKY_ERANGE : SKY_EFORMAT;
	int rc = str_member(doc, "id", r->id, sizeof r->id, "enrollment request", d);
	if (rc == SKY_ERANGE)
		rc = sky_diag_set(d, SKY_EINVAL, "enrollment request: board id too long");
	if (rc)
		goto exit;
	rc = sky_enroll_check_id(r->id, d);
	if (rc)
		goto exit;
	rc = str_member(doc, "token", r->token, sizeof r->token, "enrollment request", d);
	if (rc == SKY_ERANGE)
		rc = sky_diag_set(d, SKY_EINVAL, "claim token: too long");
	if (rc)
		goto exit;
	rc = sky_enroll_check_token(r->token, d);
	if (rc)
		goto exit;
	rc = str_member(doc, "csr", r->csr, sizeof r->csr, "enrollment request", d);
	if (rc == SKY_ERANGE)
		rc = sky_diag_set(d, SKY_ERANGE,
				  "enrollment request: CSR over %d bytes (refused unparsed)",
				  SKY_ENROLL_CSR_MAX);
	if (rc)
		goto exit;
	r->csr_len = strlen(r->csr);
	if (r->csr_len == 0)
		rc = sky_diag_set(d, SKY_EFORMAT, "enrollment request: empty CSR");
exit:
	sky_json_free(doc);
	if (rc)
		r->csr[0] = '\0', r->csr_len = 0;
	return rc;
}

int sky_enroll_req_encode(const sky_enroll_req *r, char *out, size_t cap, sky_diag *d)
{
	int rc = sky_enroll_check_id(r->id, d);
	if (rc)
		return rc;
	rc = sky_enroll_check_token(r->token, d);
	if (rc)
		return rc;
	size_t n = strnlen(r->csr, sizeof r->csr);
	if (n == 0 || n > SKY_ENROLL_CSR_MAX)
		return sky_diag_set(d, SKY_EINVAL, "enrollment request: CSR empty or too long");
	cJSON *doc = sky_json_new_object();
	if (!doc || !cJSON_AddNumberToObject(doc, "v", SKY_ENROLL_VERSION) ||
	    !cJSON_AddStringToObject(doc, "id", r->id) ||
	    !cJSON_AddStringToObject(doc, "token", r->token) ||
	    !cJSON_AddStringToObject(doc, "csr", r->csr)) {
		rc = sky_diag_set(d, SKY_ENOMEM, "enrollment request: JSON pool exhausted");
		goto exit;
	}
	rc = sky_json_print(doc, out, cap);
	if (rc < 0)
		rc = sky_diag_set(d, SKY_ERANGE, "enrollment request: does not fit %zu bytes", cap);
exit:
	sky_json_free(doc);
	return rc;
}

int sky_enroll_reply_encode(const sky_enroll_reply *r, char *out, size_t cap, sky_diag *d)
{
	int refusal = r->error[0] != '\0';
	if (!refusal && (!r->cert[0] || !r->ca[0] || !r->planner[0]))
		return sky_diag_set(d, SKY_EINVAL, "enrollment reply: certificates missing");
	int rc;
	cJSON *doc = sky_json_new_object();
	int ok = doc && cJSON_AddNumberToObject(doc, "v", SKY_ENROLL_VERSION) &&
		 cJSON_AddStringToObject(doc, "id", r->id);
	if (ok && refusal)
		ok = cJSON_AddStringToObject(doc, "error", r->error) != NULL;
	if (ok && !refusal)
		ok = cJSON_AddStringToObject(doc, "cert", r->cert) &&
		     cJSON_AddStringToObject(doc, "ca", r->ca) &&
		     cJSON_AddStringToObject(doc, "planner", r->planner);
	if (!ok) {
		rc = sky_diag_set(d, SKY_ENOMEM, "enrollment reply: JSON pool exhausted");
		goto exit;
	}
	rc = sky_json_print(doc, out, cap);
	if (rc < 0)
		rc = sky_diag_set(d, SKY_ERANGE, "enrollment reply: does not fit %zu bytes", cap);
exit:
	sky_json_free(doc);
	return rc;
}

int sky_enroll_reply_decode(const char *msg, size_t len, sky_enroll_reply *r, sky_diag *d)
{
	memset(r, 0, sizeof *r);
	cJSON *doc = parse_msg("enrollment reply", msg, len, SKY_ENROLL_REPLY_MAX, d);
	if (!doc)
		return len > SKY_ENROLL_REPLY_MAX ? SKY_ERANGE : SKY_EFORMAT;
	const char *w = "enrollment reply";
	int rc = str_member(doc, "id", r->id, sizeof r->id, w, d);
	if (rc)
		goto exit;
	if (cJSON_GetObjectItemCaseSensitive(doc, "error")) {
		rc = str_member(doc, "error", r->error, sizeof r->error, w, d);
		if (rc == 0 && r->error[0] == '\0')
			rc = sky_diag_set(d, SKY_EFORMAT, "%s: empty 'error'", w);
		goto exit;
	}
	rc = str_member(doc, "cert", r->cert, sizeof r->cert, w, d);
	if (!rc)
		rc = str_member(doc, "ca", r->ca, sizeof r->ca, w, d);
	if (!rc)
		rc = str_member(doc, "planner", r->planner, sizeof r->planner, w, d);
	if (!rc && (!r->cert[0] || !r->ca[0] || !r->planner[0]))
		rc = sky_diag_set(d, SKY_EFORMAT, "%s: an empty certificate", w);
exit:
	sky_json_free(doc);
	return rc;
}
