#include "sky_infermsg.h"

#include "sky_json.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const k_codes[SKY_INFER_NCODES] = {
	"ok",          "oversize",    "malformed",   "wrong_length", "bad_token",
	"bad_mask",    "unknown_job", "not_allowed", "busy"};

const char *sky_infer_code_name(int code)
{
	return code >= 0 && code < SKY_INFER_NCODES ? k_codes[code] : "?";
}

int sky_infer_code_parse(const char *name)
{
	for (int i = 0; name && i < SKY_INFER_NCODES; i++)
		if (strcmp(name, k_codes[i]) == 0)
			return i;
	return -1;
}

int sky_infer_id_ok(const char *id)
{
	size_t n;
	if (!id)
		return 0;
	for (n = 0; id[n]; n++) {
		char c = id[n];
		if (n >= SKY_INFER_ID_MAX ||
		    !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-' || c == '.'))
			return 0;
	}
	return n > 0;
}

static int rc_of(int code)
{
	return code == SKY_INFER_OVERSIZE ? SKY_ERANGE
	       : code == SKY_INFER_MALFORMED ? SKY_EFORMAT
					     : SKY_EINVAL;
}
/* Sets *code and d's sentence; evaluates to the SKY_E* that goes with it. */
#define REFUSE(c, ...) (*code = (c), sky_diag_set(d, rc_of(c), __VA_ARGS__))

/* An integer array element: 1 and *v if it is a whole number that fits. */
static int whole(const cJSON *e, long long *v)
{
	if (!cJSON_IsNumber(e))
		return 0;
	double x = e->valuedouble;
	if (!(x >= -2147483648.0 && x <= 2147483647.0) || x != floor(x))
		return 0;
	*v = (long long)x;
	return 1;
}

int sky_infer_req_decode(const char *buf, size_t len, int seq, int vocab, sky_infer_req *r,
			 int *code, sky_diag *d)
{
	int rc;
	long long v;
	r->id[0] = '\0';
	r->n = 0;
	r->has_mask = 0;
	*code = SKY_INFER_MALFORMED;
	if (seq < 1 || vocab < 1 || r->cap < seq || !r->tokens || !r->mask)
		return sky_diag_set(d, SKY_EINVAL, "request: decoder set up for seq %d, cap %d", seq,
				    r->cap);
	if (!buf || len > SKY_INFER_REQ_MAX_BYTES)
		return REFUSE(SKY_INFER_OVERSIZE, "request is %zu bytes, the limit is %u", len,
			      SKY_INFER_REQ_MAX_BYTES);
	sky_diag pd = {{0}};
	cJSON *doc = sky_json_parse(buf, len, &pd);
	if (!doc)
		return REFUSE(SKY_INFER_MALFORMED, "request is not JSON (%s)", pd.msg);
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(doc, "id");
	const cJSON *ver = cJSON_GetObjectItemCaseSensitive(doc, "v");
	const cJSON *tok = cJSON_GetObjectItemCaseSensitive(doc, "tokens");
	const cJSON *mask = cJSON_GetObjectItemCaseSensitive(doc, "mask");
	if (!cJSON_IsObject(doc)) {
		rc = REFUSE(SKY_INFER_MALFORMED, "request is not a JSON object");
		goto exit;
	}
	if (!cJSON_IsString(id) || !sky_infer_id_ok(id->valuestring)) {
		rc = REFUSE(SKY_INFER_MALFORMED,
			    "request id must be 1 to %d characters of [A-Za-z0-9_.-]",
			    SKY_INFER_ID_MAX);
		goto exit;
	}
	strcpy(r->id, id->valuestring);
	if (!whole(ver, &v) || v != SKY_INFER_VERSION) {
		rc = REFUSE(SKY_INFER_MALFORMED, "request version must be %d", SKY_INFER_VERSION);
		goto exit;
	}
	if (!cJSON_IsArray(tok)) {
		rc = REFUSE(SKY_INFER_MALFORMED, "request has no 'tokens' array");
		goto exit;
	}
	if (mask && !cJSON_IsArray(mask)) {
		rc = REFUSE(SKY_INFER_MALFORMED, "request 'mask' must be an array");
		goto exit;
	}
	int n = cJSON_GetArraySize(tok);
	if (n < 1 || n > seq) {
		rc = REFUSE(SKY_INFER_WRONG_LENGTH, "request has %d tokens, the model takes 1 to %d", n,
			    seq);
		goto exit;
	}
	if (mask && cJSON_GetArraySize(mask) != n) {
		rc = REFUSE(SKY_INFER_WRONG_LENGTH, "request mask has %d entries for %d tokens",
			    cJSON_GetArraySize(mask), n);
		goto exit;
	}
	int i = 0;
	const cJSON *e;
	cJSON_ArrayForEach(e, tok)
	{
		if (!whole(e, &v)) {
			rc = REFUSE(SKY_INFER_MALFORMED, "token %d is not an integer", i);
			goto exit;
		}
		if (v < 0 || v >= vocab) {
			rc = REFUSE(SKY_INFER_BAD_TOKEN, "token %d is %lld, the vocabulary has %d", i, v,
				    vocab);
			goto exit;
		}
		r->tokens[i++] = (int32_t)v;
	}
	i = 0;
	if (mask) {
		r->has_mask = 1;
		cJSON_ArrayForEach(e, mask)
		{
			if (!whole(e, &v)) {
				rc = REFUSE(SKY_INFER_MALFORMED, "mask %d is not an integer", i);
				goto exit;
			}
			if (v != 0 && v != 1) {
				rc = REFUSE(SKY_INFER_BAD_MASK, "mask %d is %lld, it must be 0 or 1", i, v);
				goto exit;
			}
			r->mask[i++] = (int32_t)v;
		}
	} else {
		for (i = 0; i < n; i++)
			r->mask[i] = 1;
	}
	r->n = n;
	*code = SKY_INFER_OK;
	rc = 0;
exit:
	sky_json_free(doc);
	return rc;
}

int sky_infer_req_encode(const sky_infer_req *r, char *buf, size_t cap, sky_diag *d)
{
	if (!sky_infer_id_ok(r->id) || r->n < 1 || !r->tokens || (r->has_mask && !r->mask))
		return sky_diag_set(d, SKY_EINVAL, "request: bad id or no tokens");
	size_t o = 0;
	int k = snprintf(buf, cap, "{\"v\":%d,\"id\":\"%s\",\"tokens\":[", SKY_INFER_VERSION, r->id);
	if (k < 0 || (size_t)k >= cap)
		goto range;
	o = (size_t)k;
	for (int pass = 0; pass < 1 + (r->has_mask != 0); pass++) {
		const int32_t *a = pass ? r->mask : r->tokens;
		if (pass) {
			k = snprintf(buf + o, cap - o, "],\"mask\":[");
			if (k < 0 || (size_t)k >= cap - o)
				goto range;
			o += (size_t)k;
		}
		for (int i = 0; i < r->n; i++) {
			k = snprintf(buf + o, cap - o, i ? ",%d" : "%d", (int)a[i]);
			if (k < 0 || (size_t)k >= cap - o)
				goto range;
			o += (size_t)k;
		}
	}
	k = snprintf(buf + o, cap - o, "]}");
	if (k < 0 || (size_t)k >= cap - o)
		goto range;
	return (int)(o + (size_t)k);
range:
	return sky_diag_set(d, SKY_ERANGE, "request %s does not fit %zu bytes", r->id, cap);
}

void sky_infer_resp_error(sky_infer_resp *r, const char *id, const char *job, int code,
			  const char *error)
{
	memset(r, 0, sizeof *r);
	snprintf(r->id, sizeof r->id, "%s", id && sky_infer_id_ok(id) ? id : "");
	snprintf(r->job, sizeof r->job, "%s", job ? job : "");
	r->code = code;
	snprintf(r->error, sizeof r->error, "%s", error ? error : "");
}

int sky_infer_resp_encode(const sky_infer_resp *r, char *buf, size_t cap, sky_diag *d)
{
	/* %.9g of a float is at most 15 characters ("-1.17549435e-38") */
	static char raw[SKY_INFER_MAX_CLASSES * 16 + 4];
	if ((r->id[0] && !sky_infer_id_ok(r->id)) || !sky_topic_segment_ok(r->job))
		return sky_diag_set(d, SKY_EINVAL, "response: bad id or job");
	if (r->ok && (r->n_logits < 1 || r->n_logits > SKY_INFER_MAX_CLASSES))
		return sky_diag_set(d, SKY_EINVAL, "response: %d logits", r->n_logits);
	if (!r->ok && (r->code <= SKY_INFER_OK || r->code >= SKY_INFER_NCODES))
		return sky_diag_set(d, SKY_EINVAL, "response: unknown code %d", r->code);
	if (r->ok && (r->epoch < 1 || r->epoch > SKY_JSON_INT_MAX))
		return sky_diag_set(d, SKY_EINVAL, "response: epoch %lld", (long long)r->epoch);
	size_t o = 0;
	if (r->ok) {
		raw[o++] = '[';
		for (int i = 0; i < r->n_logits; i++) {
			if (!isfinite(r->logits[i]))
				return sky_diag_set(d, SKY_EINVAL, "response %s: logit %d is not finite",
						    r->id, i);
			o += (size_t)snprintf(raw + o, sizeof raw - o, i ? ",%.9g" : "%.9g",
					      (double)r->logits[i]);
		}
		raw[o++] = ']';
		raw[o] = '\0';
	}
	cJSON *doc = sky_json_new_object();
	if (!doc)
		return sky_diag_set(d, SKY_ENOMEM, "response: JSON pool full");
	cJSON_AddNumberToObject(doc, "v", SKY_INFER_VERSION);
	cJSON_AddStringToObject(doc, "id", r->id);
	cJSON_AddBoolToObject(doc, "ok", r->ok != 0);
	cJSON_AddStringToObject(doc, "job", r->job);
	if (r->ok) {
		cJSON_AddNumberToObject(doc, "epoch", (double)r->epoch);
		cJSON_AddRawToObject(doc, "logits", raw);
	} else {
		cJSON_AddStringToObject(doc, "code", sky_infer_code_name(r->code));
		cJSON_AddStringToObject(doc, "error", r->error);
	}
	int rc = sky_json_print(doc, buf, cap);
	sky_json_free(doc);
	return rc < 0 ? sky_diag_set(d, rc, "response %s does not fit %zu bytes", r->id, cap) : rc;
}

int sky_infer_resp_decode(const char *buf, size_t len, sky_infer_resp *r, sky_diag *d)
{
	int rc;
	int64_t v;
	char code[24];
	memset(r, 0, sizeof *r);
	if (!buf || len > SKY_INFER_RESP_MAX_BYTES)
		return sky_diag_set(d, SKY_ERANGE, "response: %zu bytes, limit %u", len,
				    SKY_INFER_RESP_MAX_BYTES);
	cJSON *doc = sky_json_parse(buf, len, d);
	if (!doc)
		return SKY_EFORMAT;
	const cJSON *ok = cJSON_GetObjectItemCaseSensitive(doc, "ok");
	if ((rc = sky_json_i64(doc, "v", SKY_INFER_VERSION, SKY_INFER_VERSION, &v, "response", d)) ||
	    (rc = sky_json_str(doc, "id", r->id, sizeof r->id, "response", d)) ||
	    (rc = sky_json_str(doc, "job", r->job, sizeof r->job, "response", d)))
		goto exit;
	if (!cJSON_IsBool(ok)) {
		rc = sky_diag_set(d, SKY_EFORMAT, "response: 'ok' must be true or false");
		goto exit;
	}
	r->ok = cJSON_IsTrue(ok);
	if (r->ok) {
		const cJSON *lg = cJSON_GetObjectItemCaseSensitive(doc, "logits"), *e;
		if ((rc = sky_json_i64(doc, "epoch", 1, SKY_JSON_INT_MAX, &r->epoch, "response", d)))
			goto exit;
		int n = cJSON_IsArray(lg) ? cJSON_GetArraySize(lg) : -1;
		if (n < 1 || n > SKY_INFER_MAX_CLASSES) {
			rc = sky_diag_set(d, SKY_EFORMAT, "response %s: 'logits' must be an array of 1 "
					  "to %d numbers", r->id, SKY_INFER_MAX_CLASSES);
			goto exit;
		}
		cJSON_ArrayForEach(e, lg)
		{
			if (!cJSON_IsNumber(e) || !isfinite(e->valuedouble) ||
			    fabs(e->valuedouble) > 3.4028235e38) {
				rc = sky_diag_set(d, SKY_EFORMAT, "response %s: logit %d is not a float",
						  r->id, r->n_logits);
				goto exit;
			}
			r->logits[r->n_logits++] = (float)e->valuedouble;
		}
	} else {
		if ((rc = sky_json_str(doc, "code", code, sizeof code, "response", d)) ||
		    (rc = sky_json_str(doc, "error", r->error, sizeof r->error, "response", d)))
			goto exit;
		r->code = sky_infer_code_parse(code);
		if (r->code <= SKY_INFER_OK) {
			rc = sky_diag_set(d, SKY_EFORMAT, "response %s: unknown code '%s'", r->id,
					  code);
			goto exit;
		}
	}
	if ((r->id[0] && !sky_infer_id_ok(r->id)) || !sky_topic_segment_ok(r->job))
		rc = sky_diag_set(d, SKY_EFORMAT, "response: bad id or job");
exit:
	sky_json_free(doc);
	return rc;
}

int sky_infer_ready_parse(const void *p, size_t len, int64_t *epoch, sky_diag *d)
{
	int64_t ep = 0;
	*epoch = 0;
	if (len == 0 || len > SKY_SERVE_READY_MAX_BYTES)
		return sky_diag_set(d, SKY_EFORMAT, "ready of %zu bytes, 1 to %u allowed", len,
				    SKY_SERVE_READY_MAX_BYTES);
	cJSON *doc = sky_json_parse((const char *)p, len, d);
	if (!doc)
		return SKY_EFORMAT;
	int rc = 0;
	if (!cJSON_IsObject(doc))
		rc = sky_diag_set(d, SKY_EFORMAT, "ready: not an object");
	else if (sky_json_i64(doc, "epoch", 0, SKY_JSON_INT_MAX, &ep, "ready", d))
		rc = SKY_EFORMAT;
	sky_json_free(doc);
	if (!rc)
		*epoch = ep;
	return rc;
}
