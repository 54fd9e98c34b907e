/* The federated job's messages; see sky_fedmsg.h. */
#include "sky_fedmsg.h"

#include "sky_json.h"
#include "sky_le.h"
#include "sky_topics.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define MAX_WORDS (1ull << 35)

static size_t pad4(size_t n)
{
	return (n + 3u) & ~(size_t)3u;
}

uint64_t sky_fedb_bytes(size_t config_len, uint64_t words)
{
	return SKY_FEDB_HEADER + pad4(config_len) + 4u * words;
}

int sky_fedb_write_head(unsigned char *out, const char *config, size_t config_len,
			uint64_t words, size_t *words_at)
{
	if (config_len > SKY_FEDB_MAX_CONFIG || words == 0 || words > MAX_WORDS)
		return SKY_EINVAL;
	memcpy(out, "SKYFEDM1", 8);
	sky_le_put32(out + 8, (uint32_t)config_len);
	sky_le_put32(out + 12, 0);
	sky_le_put64(out + 16, words);
	memcpy(out + SKY_FEDB_HEADER, config, config_len);
	memset(out + SKY_FEDB_HEADER + config_len, 0, pad4(config_len) - config_len);
	*words_at = SKY_FEDB_HEADER + pad4(config_len);
	return 0;
}

int sky_fedb_parse(const unsigned char *b, size_t len, const char **config, size_t *config_len,
		   size_t *words_at, uint64_t *words, sky_diag *d)
{
	if (!b || len < SKY_FEDB_HEADER || memcmp(b, "SKYFEDM1", 8) != 0)
		return sky_diag_set(d, SKY_EFORMAT, "model bundle: no SKYFEDM1 header");
	uint32_t c = sky_le_get32(b + 8);
	uint64_t w = sky_le_get64(b + 16);
	if (c > SKY_FEDB_MAX_CONFIG || sky_le_get32(b + 12) != 0 || w == 0 || w > MAX_WORDS)
		return sky_diag_set(d, SKY_EFORMAT, "model bundle: config of %u bytes, %llu words",
				    (unsigned)c, (unsigned long long)w);
	if (sky_fedb_bytes(c, w) != len)
		return sky_diag_set(d, SKY_EFORMAT,
				    "model bundle: %zu bytes, its header says %llu", len,
				    (unsigned long long)sky_fedb_bytes(c, w));
	*config = (const char *)b + SKY_FEDB_HEADER;
	*config_len = c;
	*words_at = SKY_FEDB_HEADER + pad4(c);
	*words = w;
	return 0;
}

void sky_fedb_get_words(const unsigned char *p, float *out, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		uint32_t u = sky_le_get32(p + 4 * i);
		memcpy(&out[i], &u, 4);
	}
}

void sky_fedb_put_words(unsigned char *p, const float *x, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		uint32_t u;
		memcpy(&u, &x[i], 4);
		sky_le_put32(p + 4 * i, u);
	}
}

/* ---- the round ------------------------------------------------------------ */

int sky_fedround_msg_encode(const sky_fedround_msg *m, char *buf, size_t cap)
{
	cJSON *doc = sky_json_new_object();
	cJSON *ow = doc ? cJSON_AddArrayToObject(doc, "owners") : NULL;
	cJSON *sa = doc ? cJSON_AddArrayToObject(doc, "sampled") : NULL;
	int ok = doc && ow && sa && cJSON_AddNumberToObject(doc, "v", 1) &&
		 cJSON_AddStringToObject(doc, "job", m->job) &&
		 cJSON_AddNumberToObject(doc, "round", (double)m->round) &&
		 cJSON_AddNumberToObject(doc, "rounds", (double)m->rounds) &&
		 cJSON_AddBoolToObject(doc, "done", m->done) &&
		 cJSON_AddStringToObject(doc, "model_sha256", m->model_sha256) &&
		 cJSON_AddNumberToObject(doc, "model_bytes", (double)m->model_bytes) &&
		 cJSON_AddNumberToObject(doc, "words", (double)m->words) &&
		 cJSON_AddNumberToObject(doc, "chunk_bytes", m->chunk_bytes) &&
		 cJSON_AddStringToObject(doc, "dataset", m->dataset) &&
		 cJSON_AddNumberToObject(doc, "local_steps", m->local_steps) &&
		 cJSON_AddNumberToObject(doc, "batch", m->batch) &&
		 cJSON_AddNumberToObject(doc, "micro", m->micro) &&
		 cJSON_AddStringToObject(doc, "optim", m->optim) &&
		 cJSON_AddNumberToObject(doc, "lr", m->lr) &&
		 cJSON_AddNumberToObject(doc, "clip", m->clip) &&
		 cJSON_AddNumberToObject(doc, "prox_mu", m->prox_mu) &&
		 cJSON_AddNumberToObject(doc, "dp_clip", m->dp_clip) &&
		 cJSON_AddNumberToObject(doc, "seed", m->seed) &&
		 cJSON_AddNumberToObject(doc, "warmup", m->warmup);
	for (int i = 0; ok && i < m->nown; i++) {
		cJSON *s = cJSON_CreateString(m->owner[i]);
		cJSON *b = cJSON_CreateBool(m->sampled[i]);
		ok = s && b;
		if (s)
			cJSON_AddItemToArray(ow, s);
		if (b)
			cJSON_AddItemToArray(sa, b);
	}
	if (ok && m->secure) {
		cJSON *wt = cJSON_AddArrayToObject(doc, "weights");
		cJSON *ce = cJSON_AddArrayToObject(doc, "certs");
		ok = wt && ce && cJSON_AddBoolToObject(doc, "secure", 1) &&
		     cJSON_AddNumberToObject(doc, "fx_bits", m->fx_bits) &&
		     cJSON_AddNumberToObject(doc, "fx_clip", m->fx_clip);
		for (int i = 0; ok && i < m->nown; i++) {
			cJSON *a = cJSON_CreateNumber(m->weight[i]), *b = cJSON_CreateString(m->cert[i]);
			ok = a && b;
			if (a)
				cJSON_AddItemToArray(wt, a);
			if (b)
				cJSON_AddItemToArray(ce, b);
		}
	}
	int n = ok ? sky_json_print(doc, buf, cap) : SKY_ERANGE;
	sky_json_free(doc);
	return n;
}

/* A secure round's fields: fixed point, weights, certificates. */
static int decode_secure(const cJSON *doc, sky_fedround_msg *m, sky_diag *d)
{
	const cJSON *sec = cJSON_GetObjectItemCaseSensitive(doc, "secure");
	if (!sec)
		return 0;
	if (!cJSON_IsBool(sec))
		return sky_diag_set(d, SKY_EFORMAT, "fed round: 'secure' must be true or false");
	if (!(m->secure = cJSON_IsTrue(sec)))
		return 0;
	const char *w = "fed round";
	int rc = sky_json_int(doc, "fx_bits", 16, 62, &m->fx_bits, w, d);
	if (!rc)
		rc = sky_json_num(doc, "fx_clip", 1e-6, 1e9, &m->fx_clip, w, d);
	const cJSON *wt = cJSON_GetObjectItemCaseSensitive(doc, "weights");
	const cJSON *ce = cJSON_GetObjectItemCaseSensitive(doc, "certs");
	if (!rc && (!cJSON_IsArray(wt) || !cJSON_IsArray(ce) || cJSON_GetArraySize(wt) != m->nown ||
		    cJSON_GetArraySize(ce) != m->nown))
		rc = sky_diag_set(d, SKY_EFORMAT, "fed round: 'weights' and 'certs' must list the %d "
						  "owners", m->nown);
	for (int i = 0; !rc && i < m->nown; i++) {
		const cJSON *a = cJSON_GetArrayItem(wt, i), *b = cJSON_GetArrayItem(ce, i);
		if (!cJSON_IsNumber(a) || a->valuedouble < 1 || a->valuedouble > 536870912.0 ||
		    a->valuedouble != (double)(uint32_t)a->valuedouble)
			rc = sky_diag_set(d, SKY_EFORMAT, "fed round: owner %d's weight", i);
		else if (!cJSON_IsString(b) || strlen(b->valuestring) >= SKY_FED_CERT_CAP)
			rc = sky_diag_set(d, SKY_EFORMAT, "fed round: owner %d's certificate (at most "
							  "%u bytes of PEM)", i, SKY_FED_CERT_CAP - 1);
		else {
			m->weight[i] = (uint32_t)a->valuedouble;
			snprintf(m->cert[i], sizeof m->cert[i], "%s", b->valuestring);
		}
	}
	return rc == SKY_ENOTFOUND ? SKY_EFORMAT : rc;
}

int sky_fedround_msg_decode(const char *buf, size_t len, sky_fedround_msg *m, sky_diag *d)
{
	memset(m, 0, sizeof *m);
	if (!buf || len > SKY_FEDROUND_MAX_BYTES)
		return sky_diag_set(d, SKY_ERANGE, "fed round: %zu bytes, limit %u", len,
				    SKY_FEDROUND_MAX_BYTES);
	cJSON *doc = sky_json_parse(buf, len, d);
	if (!doc)
		return SKY_EFORMAT;
	const char *w = "fed round";
	int64_t r = 0, rs = 0, mb = 0, words = 0;
	int cb = 0, v = 0;
	int rc = sky_json_int(doc, "v", 1, 1, &v, w, d);
	if (!rc)
		rc = sky_json_str(doc, "job", m->job, sizeof m->job, w, d);
	if (!rc)
		rc = sky_json_i64(doc, "round", 0, 1000000, &r, w, d);
	if (!rc)
		rc = sky_json_i64(doc, "rounds", 1, 1000000, &rs, w, d);
	if (!rc)
		rc = sky_json_str(doc, "model_sha256", m->model_sha256, sizeof m->model_sha256, w, d);
	if (!rc)
		rc = sky_json_i64(doc, "model_bytes", 1, (int64_t)1 << 40, &mb, w, d);
	if (!rc)
		rc = sky_json_i64(doc, "words", 1, (int64_t)MAX_WORDS, &words, w, d);
	if (!rc)
		rc = sky_json_int(doc, "chunk_bytes", 64, 4 << 20, &cb, w, d);
	if (!rc)
		rc = sky_json_str(doc, "dataset", m->dataset, sizeof m->dataset, w, d);
	if (!rc)
		rc = sky_json_int(doc, "local_steps", 1, 1000000, &m->local_steps, w, d);
	if (!rc)
		rc = sky_json_int(doc, "batch", 1, 65536, &m->batch, w, d);
	if (!rc)
		rc = sky_json_int(doc, "micro", 1, 64, &m->micro, w, d);
	if (!rc)
		rc = sky_json_str(doc, "optim", m->optim, sizeof m->optim, w, d);
	if (!rc)
		rc = sky_json_num(doc, "lr", 0, 100, &m->lr, w, d);
	if (!rc)
		rc = sky_json_num(doc, "clip", 0, 1e9, &m->clip, w, d);
	if (!rc)
		rc = sky_json_num(doc, "prox_mu", 0, 1e6, &m->prox_mu, w, d);
	if (!rc)
		rc = sky_json_num(doc, "dp_clip", 0, 1e9, &m->dp_clip, w, d);
	if (!rc)
		rc = sky_json_int(doc, "seed", 0, 0x7fffffff, &m->seed, w, d);
	if (!rc)
		rc = sky_json_int(doc, "warmup", 0, 0x7fffffff, &m->warmup, w, d);
	const cJSON *done = cJSON_GetObjectItemCaseSensitive(doc, "done");
	const cJSON *ow = cJSON_GetObjectItemCaseSensitive(doc, "owners");
	const cJSON *sa = cJSON_GetObjectItemCaseSensitive(doc, "sampled");
	if (!rc && !cJSON_IsBool(done))
		rc = sky_diag_set(d, SKY_EFORMAT, "fed round: 'done' must be true or false");
	int n = cJSON_IsArray(ow) ? cJSON_GetArraySize(ow) : -1;
	if (!rc && (n < 1 || n > SKY_FED_MAX_OWNERS || !cJSON_IsArray(sa) ||
		    cJSON_GetArraySize(sa) != n))
		rc = sky_diag_set(d, SKY_EFORMAT,
				  "fed round: 'owners' and 'sampled' must be lists of 1-%d, alike",
				  SKY_FED_MAX_OWNERS);
	for (int i = 0; !rc && i < n; i++) {
		const cJSON *o = cJSON_GetArrayItem(ow, i), *s = cJSON_GetArrayItem(sa, i);
		if (!cJSON_IsString(o) || !sky_topic_segment_ok(o->valuestring) ||
		    strlen(o->valuestring) >= SKY_FED_ID_CAP || !cJSON_IsBool(s))
			rc = sky_diag_set(d, SKY_EFORMAT, "fed round: owner %d is not a board id", i);
		else {
			snprintf(m->owner[i], sizeof m->owner[i], "%s", o->valuestring);
			m->sampled[i] = (unsigned char)cJSON_IsTrue(s);
		}
	}
	if (!rc) {
		m->nown = n;
		m->done = cJSON_IsTrue(done);
		m->round = (uint64_t)r;
		m->rounds = (uint64_t)rs;
		m->model_bytes = (uint64_t)mb;
		m->words = (uint64_t)words;
		m->chunk_bytes = (uint32_t)cb;
		if (!sky_topic_segment_ok(m->job) || !sky_topic_segment_ok(m->dataset) ||
		    strlen(m->model_sha256) != 64 ||
		    strspn(m->model_sha256, "0123456789abcdef") != 64)
			rc = sky_diag_set(d, SKY_EFORMAT,
					  "fed round: job, dataset or model_sha256 malformed");
	}
	if (!rc)
		rc = decode_secure(doc, m, d);
	sky_json_free(doc);
	return rc == SKY_ENOTFOUND ? SKY_EFORMAT : rc;
}

int sky_fedround_msg_owner(const sky_fedround_msg *m, const char *id)
{
	return sky_fed_id_find(m->owner, m->nown, id);
}

/* ---- update chunks -------------------------------------------------------------- */

/* The chunk header both encoders write: magic, version 1, the kind (1 plain
 * float32, 2 masked 64-bit words), round, chunk index, count, model words. */
static void put_upd_header(unsigned char *out, int kind, uint64_t round, uint32_t chunk,
			   uint32_t n, uint64_t words)
{
	memcpy(out, "SKYU", 4);
	out[4] = 1;
	out[5] = (unsigned char)kind;
	sky_le_put16(out + 6, 0);
	sky_le_put64(out + 8, round);
	sky_le_put32(out + 16, chunk);
	sky_le_put32(out + 20, n);
	sky_le_put64(out + 24, words);
}

int sky_fedupd_encode_plain(uint64_t round, uint32_t chunk, uint64_t words, const float *x,
			    uint32_t n, unsigned char *out, size_t cap)
{
	if (n == 0 || n > SKY_FED_CHUNK_WORDS)
		return SKY_EINVAL;
	size_t len = SKY_FEDU_HEADER + 4u * (size_t)n;
	if (cap < len)
		return SKY_ERANGE;
	put_upd_header(out, 1, round, chunk, n, words);
	sky_fedb_put_words(out + SKY_FEDU_HEADER, x, n);
	return (int)len;
}

int sky_fedupd_encode_masked(uint64_t round, uint32_t chunk, uint64_t words, const uint64_t *w,
			     uint32_t n, unsigned char *out, size_t cap)
{
	if (n == 0 || n > SKY_FED_CHUNK_WORDS)
		return SKY_EINVAL;
	size_t len = SKY_FEDU_HEADER + 8u * (size_t)n;
	if (cap < len)
		return SKY_ERANGE;
	put_upd_header(out, 2, round, chunk, n, words);
	for (uint32_t i = 0; i < n; i++)
		sky_le_put64(out + SKY_FEDU_HEADER + 8u * i, w[i]);
	return (int)len;
}

int sky_fedupd_decode(const unsigned char *p, size_t len, sky_fedupd *u, sky_diag *d)
{
	memset(u, 0, sizeof *u);
	if (!p || len < SKY_FEDU_HEADER || memcmp(p, "SKYU", 4) != 0 || p[4] != 1)
		return sky_diag_set(d, SKY_EFORMAT, "update chunk: no SKYU version 1 header");
	u->mode = p[5];
	u->round = sky_le_get64(p + 8);
	u->chunk = sky_le_get32(p + 16);
	u->n = sky_le_get32(p + 20);
	u->words = sky_le_get64(p + 24);
	size_t per = u->mode == 1 ? 4u : u->mode == 2 ? 8u : 0u;
	if (!per || sky_le_get16(p + 6) != 0)
		return sky_diag_set(d, SKY_EFORMAT, "update chunk: mode %d", u->mode);
	if (u->n == 0 || u->n > SKY_FED_CHUNK_WORDS || len != SKY_FEDU_HEADER + per * u->n)
		return sky_diag_set(d, SKY_EFORMAT, "update chunk: %zu bytes for %u words", len,
				    (unsigned)u->n);
	u->payload = p + SKY_FEDU_HEADER;
	return 0;
}
