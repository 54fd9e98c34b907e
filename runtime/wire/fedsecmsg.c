/* The messages of a secure federated round; see sky_fedsecmsg.h. */
#include "sky_fedsecmsg.h"

#include "sky_json.h"
#include "sky_topics.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

static const char *const k_phase[] = {"", "shares", "relay", "reveal", "open"};

const char *sky_fedsec_phase_name(sky_fedsec_phase p)
{
	return p >= SKY_FEDSEC_SHARES && p <= SKY_FEDSEC_OPEN ? k_phase[p] : "?";
}

/* The bytes a blob of this list and phase has. */
static uint32_t blob_bytes(sky_fedsec_phase p, int seeds)
{
	if (seeds)
		return p == SKY_FEDSEC_OPEN ? SKY_SECAGG_SEED_BYTES : 0;
	if (p == SKY_FEDSEC_SHARES || p == SKY_FEDSEC_RELAY)
		return SKY_SECAGG_SHARE_BLOB_BYTES;
	if (p == SKY_FEDSEC_OPEN)
		return 1 + SKY_SHAMIR_SECRET_BYTES;
	return 0;
}

static void hex(const unsigned char *b, size_t n, char *out)
{
	static const char k[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++)
		out[2 * i] = k[b[i] >> 4], out[2 * i + 1] = k[b[i] & 15];
	out[2 * n] = 0;
}

static int unhex(const char *s, unsigned char *b, size_t n)
{
	if (strlen(s) != 2 * n)
		return -1;
	for (size_t i = 0; i < 2 * n; i++) {
		char c = s[i];
		int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
		if (v < 0)
			return -1;
		b[i / 2] = (unsigned char)(i % 2 ? (b[i / 2] | v) : v << 4);
	}
	return 0;
}

static int add_ids(cJSON *doc, const char *key, char (*ids)[SKY_FED_ID_CAP], int n)
{
	cJSON *a = cJSON_AddArrayToObject(doc, key);
	for (int i = 0; a && i < n; i++) {
		cJSON *s = sky_topic_segment_ok(ids[i]) ? cJSON_CreateString(ids[i]) : NULL;
		if (!s)
			return SKY_EINVAL;
		cJSON_AddItemToArray(a, s);
	}
	return a ? 0 : SKY_ERANGE;
}

static int add_items(cJSON *doc, const char *key, const sky_fedsec_item *it, int n, uint32_t want)
{
	char h[2 * SKY_FEDSEC_BLOB_MAX + 1];
	cJSON *a = cJSON_AddArrayToObject(doc, key);
	for (int i = 0; a && i < n; i++) {
		if (!sky_topic_segment_ok(it[i].id) || it[i].len != want)
			return SKY_EINVAL;
		cJSON *o = cJSON_CreateObject();
		if (!o)
			return SKY_ERANGE;
		cJSON_AddItemToArray(a, o);
		hex(it[i].b, it[i].len, h);
		if (!cJSON_AddStringToObject(o, "id", it[i].id) || !cJSON_AddStringToObject(o, "b", h))
			return SKY_ERANGE;
	}
	return a ? 0 : SKY_ERANGE;
}

int sky_fedsec_msg_encode(const sky_fedsec_msg *m, char *buf, size_t cap)
{
	sky_fedsec_phase p = m->phase;
	if (p < SKY_FEDSEC_SHARES || p > SKY_FEDSEC_OPEN || !sky_topic_segment_ok(m->job))
		return SKY_EINVAL;
	cJSON *doc = sky_json_new_object();
	if (!doc)
		return SKY_ERANGE;
	int rc = cJSON_AddNumberToObject(doc, "v", 1) && cJSON_AddStringToObject(doc, "job", m->job) &&
			 cJSON_AddNumberToObject(doc, "round", (double)m->round) &&
			 cJSON_AddStringToObject(doc, "phase", k_phase[p])
		     ? 0
		     : SKY_ERANGE;
	if (!rc && (p == SKY_FEDSEC_RELAY || p == SKY_FEDSEC_REVEAL))
		rc = sky_topic_segment_ok(m->to)
			     ? (cJSON_AddStringToObject(doc, "to", m->to) ? 0 : SKY_ERANGE)
			     : SKY_EINVAL;
	if (!rc && p == SKY_FEDSEC_SHARES) {
		char h[65];
		hex(m->commit, 32, h);
		rc = cJSON_AddStringToObject(doc, "commit", h) ? 0 : SKY_ERANGE;
	}
	if (!rc && p != SKY_FEDSEC_REVEAL)
		rc = add_items(doc, "items", m->items, m->nitems, blob_bytes(p, 0));
	if (!rc && p == SKY_FEDSEC_OPEN)
		rc = add_items(doc, "seeds", m->seeds, m->nseeds, blob_bytes(p, 1));
	if (!rc && p == SKY_FEDSEC_RELAY)
		rc = add_ids(doc, "u1", (char(*)[SKY_FED_ID_CAP])m->u1, m->nu1);
	if (!rc && p == SKY_FEDSEC_REVEAL)
		rc = add_ids(doc, "u2", (char(*)[SKY_FED_ID_CAP])m->u2, m->nu2);
	if (!rc && p == SKY_FEDSEC_REVEAL)
		rc = add_ids(doc, "dropped", (char(*)[SKY_FED_ID_CAP])m->dropped, m->ndropped);
	int n = rc ? rc : sky_json_print(doc, buf, cap);
	sky_json_free(doc);
	return n;
}

/* doc[key], a list of at most SKY_FED_MAX_OWNERS entries: its length, or
 * SKY_EFORMAT. */
static int list_of(const cJSON *doc, const char *key, const cJSON **a, sky_diag *d)
{
	*a = cJSON_GetObjectItemCaseSensitive(doc, key);
	int k = cJSON_IsArray(*a) ? cJSON_GetArraySize(*a) : -1;
	if (k < 0 || k > SKY_FED_MAX_OWNERS)
		return sky_diag_set(d, SKY_EFORMAT, "secure round: '%s' must be a list of at most %d",
				    key, SKY_FED_MAX_OWNERS);
	return k;
}

/* s, entry i of list key, as a board id: copied into out, or SKY_EFORMAT. */
static int take_id(const cJSON *s, const char *key, const char *field, int i, char *out,
		   sky_diag *d)
{
	if (!cJSON_IsString(s) || !sky_topic_segment_ok(s->valuestring) ||
	    strlen(s->valuestring) >= SKY_FED_ID_CAP)
		return sky_diag_set(d, SKY_EFORMAT, "secure round: %s[%d]%s is not a board id", key, i,
				    field);
	snprintf(out, SKY_FED_ID_CAP, "%s", s->valuestring);
	return 0;
}

static int named_twice(const char *key, const char *id, sky_diag *d)
{
	return sky_diag_set(d, SKY_EFORMAT, "secure round: %s names %s twice", key, id);
}

/* A list of distinct board ids. */
static int get_ids(const cJSON *doc, const char *key, char (*ids)[SKY_FED_ID_CAP], int *n,
		   sky_diag *d)
{
	const cJSON *a;
	int k = list_of(doc, key, &a, d);
	for (int i = 0; i < k; i++) {
		if (take_id(cJSON_GetArrayItem(a, i), key, "", i, ids[i], d))
			return SKY_EFORMAT;
		for (int j = 0; j < i; j++)
			if (strcmp(ids[j], ids[i]) == 0)
				return named_twice(key, ids[i], d);
	}
	*n = k > 0 ? k : 0;
	return k < 0 ? k : 0;
}

/* A list of {"id": a board id named once, "b": want bytes of hex}. */
static int get_items(const cJSON *doc, const char *key, sky_fedsec_item *it, int *n, uint32_t want,
		     sky_diag *d)
{
	const cJSON *a;
	int k = list_of(doc, key, &a, d);
	for (int i = 0; i < k; i++) {
		const cJSON *o = cJSON_GetArrayItem(a, i);
		const cJSON *b = cJSON_GetObjectItemCaseSensitive(o, "b");
		if (take_id(cJSON_GetObjectItemCaseSensitive(o, "id"), key, ".id", i, it[i].id, d))
			return SKY_EFORMAT;
		for (int j = 0; j < i; j++)
			if (strcmp(it[j].id, it[i].id) == 0)
				return named_twice(key, it[i].id, d);
		if (!cJSON_IsString(b) || unhex(b->valuestring, it[i].b, want) != 0)
			return sky_diag_set(d, SKY_EFORMAT, "secure round: %s[%d].b is not %u bytes of hex",
					    key, i, (unsigned)want);
		it[i].len = want;
	}
	*n = k > 0 ? k : 0;
	return k < 0 ? k : 0;
}

int sky_fedsec_msg_decode(const char *buf, size_t len, sky_fedsec_msg *m, sky_diag *d)
{
	memset(m, 0, sizeof *m);
	if (!buf || len > SKY_FEDSEC_MAX_BYTES)
		return sky_diag_set(d, SKY_ERANGE, "secure round message: %zu bytes, limit %u", len,
				    SKY_FEDSEC_MAX_BYTES);
	cJSON *doc = sky_json_parse(buf, len, d);
	if (!doc)
		return SKY_EFORMAT;
	const char *w = "secure round message";
	int v = 0;
	int64_t r = 0;
	char ph[16] = "";
	int rc = sky_json_int(doc, "v", 1, 1, &v, w, d);
	if (!rc)
		rc = sky_json_str(doc, "job", m->job, sizeof m->job, w, d);
	if (!rc)
		rc = sky_json_i64(doc, "round", 0, 1000000, &r, w, d);
	if (!rc)
		rc = sky_json_str(doc, "phase", ph, sizeof ph, w, d);
	if (!rc && !sky_topic_segment_ok(m->job))
		rc = sky_diag_set(d, SKY_EFORMAT, "%s: job is not a topic segment", w);
	for (int p = SKY_FEDSEC_SHARES; !rc && p <= SKY_FEDSEC_OPEN && !m->phase; p++)
		if (strcmp(ph, k_phase[p]) == 0)
			m->phase = (sky_fedsec_phase)p;
	if (!rc && !m->phase)
		rc = sky_diag_set(d, SKY_EFORMAT, "%s: phase '%s' (shares, relay, reveal, open)", w, ph);
	sky_fedsec_phase p = m->phase;
	m->round = (uint64_t)r;
	if (!rc && (p == SKY_FEDSEC_RELAY || p == SKY_FEDSEC_REVEAL)) {
		rc = sky_json_str(doc, "to", m->to, sizeof m->to, w, d);
		if (!rc && !sky_topic_segment_ok(m->to))
			rc = sky_diag_set(d, SKY_EFORMAT, "%s: 'to' is not a board id", w);
	}
	if (!rc && p == SKY_FEDSEC_SHARES) {
		char h[80];
		rc = sky_json_str(doc, "commit", h, sizeof h, w, d);
		if (!rc && unhex(h, m->commit, 32) != 0)
			rc = sky_diag_set(d, SKY_EFORMAT, "%s: commit is not 32 bytes of hex", w);
	}
	if (!rc && p != SKY_FEDSEC_REVEAL)
		rc = get_items(doc, "items", m->items, &m->nitems, blob_bytes(p, 0), d);
	if (!rc && p == SKY_FEDSEC_OPEN)
		rc = get_items(doc, "seeds", m->seeds, &m->nseeds, blob_bytes(p, 1), d);
	if (!rc && p == SKY_FEDSEC_RELAY)
		rc = get_ids(doc, "u1", m->u1, &m->nu1, d);
	if (!rc && p == SKY_FEDSEC_REVEAL)
		rc = get_ids(doc, "u2", m->u2, &m->nu2, d);
	if (!rc && p == SKY_FEDSEC_REVEAL)
		rc = get_ids(doc, "dropped", m->dropped, &m->ndropped, d);
	sky_json_free(doc);
	return rc == SKY_ENOTFOUND ? SKY_EFORMAT : rc;
}
