#include "sky_caps.h"

#include "sky_json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Printable ASCII only: these strings end up in logs and `sky fleet status`,
 * where an escape sequence from a hostile board must not land. */
static int printable(const char *s)
{
	for (; *s; s++)
		if (*s < 0x20 || *s > 0x7e)
			return 0;
	return 1;
}

int sky_boot_id_ok(const char *s)
{
	size_t n = 0;
	for (; s[n]; n++)
		if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f')))
			return 0;
	return n <= SKY_BOOT_ID_MAX;
}

/* Reads the optional "boot" member into buf (SKY_BOOT_ID_MAX + 1 bytes):
 * absent is "", anything but lowercase hex is refused. */
static int get_boot(const cJSON *doc, char *buf, const char *what, sky_diag *d)
{
	buf[0] = '\0';
	if (!cJSON_GetObjectItemCaseSensitive(doc, "boot"))
		return 0;
	int rc = sky_json_str(doc, "boot", buf, SKY_BOOT_ID_MAX + 1, what, d);
	if (rc == 0 && !sky_boot_id_ok(buf))
		rc = sky_diag_set(d, SKY_EFORMAT, "%s: boot must be 1-%d lowercase hex digits", what,
				  SKY_BOOT_ID_MAX);
	if (rc)
		buf[0] = '\0';
	return rc;
}

static int check_time(double t, const char *field, sky_diag *d)
{
	if (!isfinite(t) || t <= 0 || t > SKY_CAPS_MAX_TIME_S)
		return sky_diag_set(d, SKY_ERANGE, "caps: %s is %g s, allowed (0, %g]", field, t,
				    SKY_CAPS_MAX_TIME_S);
	return 0;
}

static int check_times(const sky_caps_times *t, const char *prec, sky_diag *d)
{
	char f[48];
	int rc;
	snprintf(f, sizeof f, "%s.fwd_attn_s", prec);
	if ((rc = check_time(t->fwd_attn_s, f, d)))
		return rc;
	snprintf(f, sizeof f, "%s.fwd_ffn_s", prec);
	if ((rc = check_time(t->fwd_ffn_s, f, d)))
		return rc;
	snprintf(f, sizeof f, "%s.bwd_attn_s", prec);
	if ((rc = check_time(t->bwd_attn_s, f, d)))
		return rc;
	snprintf(f, sizeof f, "%s.bwd_ffn_s", prec);
	return check_time(t->bwd_ffn_s, f, d);
}

static int check_int(long long v, long long lo, long long hi, const char *field, sky_diag *d)
{
	if (v < lo || v > hi)
		return sky_diag_set(d, SKY_ERANGE, "caps: %s is %lld, allowed %lld to %lld", field, v,
				    lo, hi);
	return 0;
}

static int hex_ok(const char *s, size_t n)
{
	size_t i = 0;
	for (; s[i]; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return i == n;
}

static int validate_datasets(const sky_caps *c, sky_diag *d)
{
	int rc;
	if (c->n_datasets < 0 || c->n_datasets > SKY_CAPS_MAX_DATASETS)
		return sky_diag_set(d, SKY_ERANGE, "caps %s: %d datasets, allowed 0 to %d", c->id,
				    c->n_datasets, SKY_CAPS_MAX_DATASETS);
	for (int i = 0; i < c->n_datasets; i++) {
		const sky_caps_dataset *s = &c->datasets[i];
		if (!sky_topic_segment_ok(s->name))
			return sky_diag_set(d, SKY_EINVAL,
					    "caps %s: datasets[%d].name is not 1-%d of [A-Za-z0-9_.-]",
					    c->id, i, SKY_TOPIC_SEGMENT_MAX);
		for (int j = 0; j < i; j++)
			if (strcmp(c->datasets[j].name, s->name) == 0)
				return sky_diag_set(d, SKY_EINVAL, "caps %s: dataset '%s' named twice",
						    c->id, s->name);
		if ((rc = check_int(s->rows, 1, SKY_CAPS_DS_MAX_ROWS, "datasets.rows", d)) ||
		    (rc = check_int(s->labels, 1, SKY_CAPS_DS_MAX_LABELS, "datasets.labels", d)) ||
		    (rc = check_int(s->seq, 2, SKY_CAPS_DS_MAX_SEQ, "datasets.seq", d)))
			return rc;
		if (!hex_ok(s->sha256, 64))
			return sky_diag_set(d, SKY_EFORMAT,
					    "caps %s: dataset '%s': sha256 is not 64 lower-case hex digits",
					    c->id, s->name);
	}
	return 0;
}

int sky_caps_validate(const sky_caps *c, sky_diag *d)
{
	int rc;
	if (!sky_topic_segment_ok(c->id))
		return sky_diag_set(d, SKY_EINVAL, "caps: id is not 1-%d of [A-Za-z0-9_.-]",
				    SKY_TOPIC_SEGMENT_MAX);
	if (!printable(c->version) || !printable(c->board) || !printable(c->shape.name) ||
	    !c->shape.name[0])
		return sky_diag_set(d, SKY_EINVAL,
				    "caps %s: version, board and model.name must be printable", c->id);
	if (!sky_boot_id_ok(c->boot))
		return sky_diag_set(d, SKY_EFORMAT, "caps %s: boot must be 1-%d lowercase hex digits",
				    c->id, SKY_BOOT_ID_MAX);
	if ((rc = check_int(c->session, 0, SKY_JSON_INT_MAX, "session", d)) ||
	    (rc = check_int(c->threads, 1, SKY_CAPS_MAX_THREADS, "threads", d)) ||
	    (rc = check_int(c->keepalive_s, 1, 3600, "keepalive_s", d)) ||
	    (rc = check_int(c->shape.hidden, 1, SKY_CAPS_MAX_DIM, "model.hidden", d)) ||
	    (rc = check_int(c->shape.heads, 1, c->shape.hidden, "model.heads", d)) ||
	    (rc = check_int(c->shape.ffn, 1, SKY_CAPS_MAX_DIM, "model.ffn", d)) ||
	    (rc = check_int(c->shape.seq, 1, SKY_CAPS_MAX_DIM, "model.seq", d)) ||
	    (rc = check_int(c->shape.batch, 1, SKY_CAPS_MAX_BATCH, "model.batch", d)) ||
	    (rc = check_int(c->mem_bytes, 0, SKY_CAPS_MAX_MEM_BYTES, "mem_bytes", d)) ||
	    (rc = check_int(c->probed_at, 0, (1ll << 40), "probed_at", d)))
		return rc;
	if (c->shape.hidden % c->shape.heads != 0)
		return sky_diag_set(d, SKY_ERANGE, "caps: model.hidden %d is not a multiple of heads %d",
				    c->shape.hidden, c->shape.heads);
	if ((rc = check_times(&c->fp32, "fp32", d)))
		return rc;
	if (c->has_int8 && (rc = check_time(c->int8_fwd_s, "int8.fwd_s", d)))
		return rc;
	/* the optional int8 figures: 0 (not measured) or a time; the attention
	 * half is part of the whole layer */
	if (c->has_int8 && c->int8_attn_s != 0 &&
	    ((rc = check_time(c->int8_attn_s, "int8.attn_s", d)) || c->int8_attn_s >= c->int8_fwd_s))
		return rc ? rc
			  : sky_diag_set(d, SKY_ERANGE, "caps: int8.attn_s is %g s, not below fwd_s %g s",
					 c->int8_attn_s, c->int8_fwd_s);
	if (c->has_int8 && c->int8_embed_s != 0 && (rc = check_time(c->int8_embed_s, "int8.embed_s", d)))
		return rc;
	if (c->has_int8 && c->int8_head_s != 0 && (rc = check_time(c->int8_head_s, "int8.head_s", d)))
		return rc;
	if (!c->has_int8 && (c->int8_attn_s != 0 || c->int8_embed_s != 0 || c->int8_head_s != 0))
		return sky_diag_set(d, SKY_EINVAL, "caps: int8 figures without int8.fwd_s");
	if (!isfinite(c->link_bw) || c->link_bw < 0 || c->link_bw > SKY_CAPS_MAX_BW)
		return sky_diag_set(d, SKY_ERANGE, "caps: link.bw_Bps is %g, allowed 0 to %g",
				    c->link_bw, SKY_CAPS_MAX_BW);
	if (!isfinite(c->link_lat_s) || c->link_lat_s < 0 || c->link_lat_s > SKY_CAPS_MAX_LAT_S)
		return sky_diag_set(d, SKY_ERANGE, "caps: link.lat_s is %g, allowed 0 to %g",
				    c->link_lat_s, SKY_CAPS_MAX_LAT_S);
	if (!sky_site_ok(c->site) || strcmp(c->site, SKY_SITE_CORE) == 0)
		return sky_diag_set(d, SKY_EINVAL,
				    "caps %s: site is not 1-%d of [A-Za-z0-9_.-] (or is \"core\", "
				    "which is written as no site)",
				    c->id, SKY_SITE_MAX);
	if (!isfinite(c->probe_s) || c->probe_s < 0 || c->probe_s > SKY_CAPS_MAX_TIME_S)
		return sky_diag_set(d, SKY_ERANGE, "caps: probe_s is %g, allowed 0 to %g", c->probe_s,
				    SKY_CAPS_MAX_TIME_S);
	return validate_datasets(c, d);
}

const sky_caps_dataset *sky_caps_dataset_find(const sky_caps *c, const char *name)
{
	for (int i = 0; i < c->n_datasets && i < SKY_CAPS_MAX_DATASETS; i++)
		if (strcmp(c->datasets[i].name, name) == 0)
			return &c->datasets[i];
	return NULL;
}

int sky_caps_shape_eq(const sky_caps_shape *a, const sky_caps_shape *b)
{
	return strcmp(a->name, b->name) == 0 && a->hidden == b->hidden && a->heads == b->heads &&
	       a->ffn == b->ffn && a->seq == b->seq && a->batch == b->batch;
}

static cJSON *times_obj(const sky_caps_times *t)
{
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	cJSON_AddNumberToObject(o, "fwd_attn_s", t->fwd_attn_s);
	cJSON_AddNumberToObject(o, "fwd_ffn_s", t->fwd_ffn_s);
	cJSON_AddNumberToObject(o, "bwd_attn_s", t->bwd_attn_s);
	cJSON_AddNumberToObject(o, "bwd_ffn_s", t->bwd_ffn_s);
	return o;
}

int sky_caps_encode(const sky_caps *c, char *buf, size_t cap, sky_diag *d)
{
	int rc = sky_caps_validate(c, d);
	if (rc)
		return rc;
	cJSON *doc = sky_json_new_object();
	if (!doc)
		return sky_diag_set(d, SKY_ENOMEM, "caps: JSON pool full");
	cJSON_AddNumberToObject(doc, "v", SKY_CAPS_VERSION);
	cJSON_AddStringToObject(doc, "id", c->id);
	cJSON_AddNumberToObject(doc, "session", (double)c->session);
	if (c->boot[0])
		cJSON_AddStringToObject(doc, "boot", c->boot);
	cJSON_AddStringToObject(doc, "version", c->version);
	cJSON_AddStringToObject(doc, "board", c->board);
	if (c->blas_core[0])
		cJSON_AddStringToObject(doc, "blas_core", c->blas_core);
	cJSON_AddNumberToObject(doc, "threads", c->threads);
	cJSON_AddNumberToObject(doc, "keepalive_s", c->keepalive_s);
	cJSON *m = cJSON_AddObjectToObject(doc, "model");
	if (m) {
		cJSON_AddStringToObject(m, "name", c->shape.name);
		cJSON_AddNumberToObject(m, "hidden", c->shape.hidden);
		cJSON_AddNumberToObject(m, "heads", c->shape.heads);
		cJSON_AddNumberToObject(m, "ffn", c->shape.ffn);
		cJSON_AddNumberToObject(m, "seq", c->shape.seq);
		cJSON_AddNumberToObject(m, "batch", c->shape.batch);
	}
	cJSON_AddItemToObject(doc, "fp32", times_obj(&c->fp32));
	if (c->has_int8) {
		cJSON *i8 = cJSON_AddObjectToObject(doc, "int8");
		if (i8) {
			cJSON_AddNumberToObject(i8, "fwd_s", c->int8_fwd_s);
			if (c->int8_attn_s > 0)
				cJSON_AddNumberToObject(i8, "attn_s", c->int8_attn_s);
			if (c->int8_embed_s > 0)
				cJSON_AddNumberToObject(i8, "embed_s", c->int8_embed_s);
			if (c->int8_head_s > 0)
				cJSON_AddNumberToObject(i8, "head_s", c->int8_head_s);
		}
	}
	cJSON_AddNumberToObject(doc, "mem_bytes", (double)c->mem_bytes);
	cJSON *l = cJSON_AddObjectToObject(doc, "link");
	if (l) {
		cJSON_AddNumberToObject(l, "bw_Bps", c->link_bw);
		cJSON_AddNumberToObject(l, "lat_s", c->link_lat_s);
	}
	if (c->site[0])
		cJSON_AddStringToObject(doc, "site", c->site);
	cJSON_AddNumberToObject(doc, "probe_s", c->probe_s);
	cJSON_AddNumberToObject(doc, "probed_at", (double)c->probed_at);
	cJSON *ds = c->n_datasets ? cJSON_AddArrayToObject(doc, "datasets") : NULL;
	for (int i = 0; ds && i < c->n_datasets; i++) {
		const sky_caps_dataset *s = &c->datasets[i];
		char tok[9];
		cJSON *o = cJSON_CreateObject();
		if (!o)
			break;
		cJSON_AddItemToArray(ds, o);
		snprintf(tok, sizeof tok, "%08x", (unsigned)s->tokenizer);
		cJSON_AddStringToObject(o, "name", s->name);
		cJSON_AddNumberToObject(o, "rows", (double)s->rows);
		cJSON_AddNumberToObject(o, "labels", s->labels);
		cJSON_AddNumberToObject(o, "seq", s->seq);
		cJSON_AddStringToObject(o, "sha256", s->sha256);
		cJSON_AddStringToObject(o, "tokenizer", tok);
	}
	rc = sky_json_print(doc, buf, cap);
	sky_json_free(doc);
	if (rc < 0)
		return sky_diag_set(d, rc, "caps %s: JSON does not fit %zu bytes (or pool full)", c->id,
				    cap);
	return rc;
}

static int get_times(const cJSON *doc, const char *key, sky_caps_times *t, sky_diag *d)
{
	const cJSON *o = cJSON_GetObjectItemCaseSensitive(doc, key);
	char what[32];
	int rc;
	if (!cJSON_IsObject(o))
		return sky_diag_set(d, SKY_EFORMAT, "caps: '%s' must be an object", key);
	snprintf(what, sizeof what, "caps.%s", key);
	/* the range (0, max] is checked by validate, so a negative time reads
	 * as "fp32.fwd_attn_s is -1" rather than a generic range message */
	if ((rc = sky_json_num(o, "fwd_attn_s", -INFINITY, INFINITY, &t->fwd_attn_s, what, d)) ||
	    (rc = sky_json_num(o, "fwd_ffn_s", -INFINITY, INFINITY, &t->fwd_ffn_s, what, d)) ||
	    (rc = sky_json_num(o, "bwd_attn_s", -INFINITY, INFINITY, &t->bwd_attn_s, what, d)) ||
	    (rc = sky_json_num(o, "bwd_ffn_s", -INFINITY, INFINITY, &t->bwd_ffn_s, what, d)))
		return rc;
	return 0;
}

/* The optional "datasets" array (ranges in validate). */
static int get_datasets(const cJSON *doc, sky_caps *c, sky_diag *d)
{
	const cJSON *arr = cJSON_GetObjectItemCaseSensitive(doc, "datasets"), *o;
	int rc;
	if (!arr)
		return 0;
	if (!cJSON_IsArray(arr))
		return sky_diag_set(d, SKY_EFORMAT, "caps %s: 'datasets' must be an array", c->id);
	if (cJSON_GetArraySize(arr) > SKY_CAPS_MAX_DATASETS)
		return sky_diag_set(d, SKY_ERANGE, "caps %s: %d datasets, allowed 0 to %d", c->id,
				    cJSON_GetArraySize(arr), SKY_CAPS_MAX_DATASETS);
	cJSON_ArrayForEach(o, arr)
	{
		sky_caps_dataset *s = &c->datasets[c->n_datasets];
		char tok[16];
		if (!cJSON_IsObject(o))
			return sky_diag_set(d, SKY_EFORMAT, "caps %s: datasets[%d] must be an object",
					    c->id, c->n_datasets);
		if ((rc = sky_json_str(o, "name", s->name, sizeof s->name, "caps.datasets", d)) ||
		    (rc = sky_json_i64(o, "rows", 1, SKY_CAPS_DS_MAX_ROWS, &s->rows, "caps.datasets",
				       d)) ||
		    (rc = sky_json_int(o, "labels", 1, SKY_CAPS_DS_MAX_LABELS, &s->labels,
				       "caps.datasets", d)) ||
		    (rc = sky_json_int(o, "seq", 2, SKY_CAPS_DS_MAX_SEQ, &s->seq, "caps.datasets", d)) ||
		    (rc = sky_json_str(o, "sha256", s->sha256, sizeof s->sha256, "caps.datasets", d)) ||
		    (rc = sky_json_str(o, "tokenizer", tok, sizeof tok, "caps.datasets", d)))
			return rc;
		if (!hex_ok(tok, 8))
			return sky_diag_set(d, SKY_EFORMAT,
					    "caps %s: dataset '%s': tokenizer is not 8 lower-case hex digits",
					    c->id, s->name);
		s->tokenizer = (uint32_t)strtoul(tok, NULL, 16);
		c->n_datasets++;
	}
	return 0;
}

int sky_caps_decode(const char *buf, size_t len, sky_caps *c, sky_diag *d)
{
	int rc;
	int64_t v;
	double x;
	memset(c, 0, sizeof *c);
	if (!buf || len > SKY_CAPS_MAX_BYTES)
		return sky_diag_set(d, SKY_ERANGE, "caps: %zu bytes, limit %u (refused unparsed)", len,
				    SKY_CAPS_MAX_BYTES);
	cJSON *doc = sky_json_parse(buf, len, d);
	if (!doc)
		return SKY_EFORMAT;
	if (!cJSON_IsObject(doc)) {
		rc = sky_diag_set(d, SKY_EFORMAT, "caps: not a JSON object");
		goto exit;
	}
	if ((rc = sky_json_i64(doc, "v", SKY_CAPS_VERSION, SKY_CAPS_VERSION, &v, "caps", d)) ||
	    (rc = sky_json_str(doc, "id", c->id, sizeof c->id, "caps", d)) ||
	    (rc = sky_json_i64(doc, "session", 0, SKY_JSON_INT_MAX, &c->session, "caps", d)) ||
	    (rc = get_boot(doc, c->boot, "caps", d)) ||
	    (rc = sky_json_str(doc, "version", c->version, sizeof c->version, "caps", d)) ||
	    (rc = sky_json_str(doc, "board", c->board, sizeof c->board, "caps", d)) ||
	    (cJSON_GetObjectItemCaseSensitive(doc, "blas_core") &&
	     (rc = sky_json_str(doc, "blas_core", c->blas_core, sizeof c->blas_core, "caps", d))) ||
	    (rc = sky_json_int(doc, "threads", 1, SKY_CAPS_MAX_THREADS, &c->threads, "caps", d)) ||
	    (rc = sky_json_int(doc, "keepalive_s", 1, 3600, &c->keepalive_s, "caps", d)))
		goto exit;
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(doc, "model");
	if (!cJSON_IsObject(m)) {
		rc = sky_diag_set(d, SKY_EFORMAT, "caps %s: 'model' must be an object", c->id);
		goto exit;
	}
	if ((rc = sky_json_str(m, "name", c->shape.name, sizeof c->shape.name, "caps.model", d)) ||
	    (rc = sky_json_int(m, "hidden", 1, SKY_CAPS_MAX_DIM, &c->shape.hidden, "caps.model", d)) ||
	    (rc = sky_json_int(m, "heads", 1, SKY_CAPS_MAX_DIM, &c->shape.heads, "caps.model", d)) ||
	    (rc = sky_json_int(m, "ffn", 1, SKY_CAPS_MAX_DIM, &c->shape.ffn, "caps.model", d)) ||
	    (rc = sky_json_int(m, "seq", 1, SKY_CAPS_MAX_DIM, &c->shape.seq, "caps.model", d)) ||
	    (rc = sky_json_int(m, "batch", 1, SKY_CAPS_MAX_BATCH, &c->shape.batch, "caps.model", d)))
		goto exit;
	if ((rc = get_times(doc, "fp32", &c->fp32, d)))
		goto exit;
	const cJSON *i8 = cJSON_GetObjectItemCaseSensitive(doc, "int8");
	if (i8) {
		c->has_int8 = 1;
		if (!cJSON_IsObject(i8)) {
			rc = sky_diag_set(d, SKY_EFORMAT, "caps %s: 'int8' must be an object", c->id);
			goto exit;
		}
		if ((rc = sky_json_num(i8, "fwd_s", -INFINITY, INFINITY, &c->int8_fwd_s, "caps.int8",
				       d)))
			goto exit;
		/* optional (older boards: 0, not measured); ranges in validate */
		static const char *const opt[3] = {"attn_s", "embed_s", "head_s"};
		double *to[3] = {&c->int8_attn_s, &c->int8_embed_s, &c->int8_head_s};
		for (int k = 0; k < 3; k++)
			if (cJSON_GetObjectItemCaseSensitive(i8, opt[k]) &&
			    (rc = sky_json_num(i8, opt[k], -INFINITY, INFINITY, to[k], "caps.int8", d)))
				goto exit;
	}
	/* mem_bytes is read as a double first so 1e30 is named as out of range
	 * rather than failing an integer conversion */
	if ((rc = sky_json_num(doc, "mem_bytes", -INFINITY, INFINITY, &x, "caps", d)))
		goto exit;
	if (x < 0 || x > (double)SKY_CAPS_MAX_MEM_BYTES || x != floor(x)) {
		rc = sky_diag_set(d, SKY_ERANGE, "caps %s: mem_bytes is %g, allowed 0 to %lld", c->id,
				  x, (long long)SKY_CAPS_MAX_MEM_BYTES);
		goto exit;
	}
	c->mem_bytes = (int64_t)x;
	const cJSON *l = cJSON_GetObjectItemCaseSensitive(doc, "link");
	if (l) {
		if (!cJSON_IsObject(l)) {
			rc = sky_diag_set(d, SKY_EFORMAT, "caps %s: 'link' must be an object", c->id);
			goto exit;
		}
		if ((rc = sky_json_num(l, "bw_Bps", -INFINITY, INFINITY, &c->link_bw, "caps.link", d)) ||
		    (rc = sky_json_num(l, "lat_s", -INFINITY, INFINITY, &c->link_lat_s, "caps.link", d)))
			goto exit;
	}
	if (cJSON_GetObjectItemCaseSensitive(doc, "site")) {
		if ((rc = sky_json_str(doc, "site", c->site, sizeof c->site, "caps", d)))
			goto exit;
		sky_site_norm(c->site);
	}
	if ((rc = sky_json_num(doc, "probe_s", -INFINITY, INFINITY, &c->probe_s, "caps", d)) ||
	    (rc = sky_json_i64(doc, "probed_at", 0, (1ll << 40), &c->probed_at, "caps", d)))
		goto exit;
	if ((rc = get_datasets(doc, c, d)))
		goto exit;
	rc = sky_caps_validate(c, d);
exit:
	sky_json_free(doc);
	if (rc)
		memset(c, 0, sizeof *c);
	return rc;
}

int sky_status_encode(const sky_status *s, char *buf, size_t cap)
{
	char boot[SKY_BOOT_ID_MAX + 16] = "";
	if (!sky_boot_id_ok(s->boot))
		return SKY_EINVAL;
	if (s->boot[0])
		snprintf(boot, sizeof boot, "\"boot\":\"%s\",", s->boot);
	int n;
	if (s->online)
		n = snprintf(buf, cap, "{\"state\":\"online\",%s\"session\":%lld,\"keepalive_s\":%d%s",
			     boot, (long long)s->session, s->keepalive_s, s->seq ? "," : "}");
	else
		n = snprintf(buf, cap, "{\"state\":\"offline\",%s\"session\":%lld}", boot,
			     (long long)s->session);
	if (n > 0 && s->online && s->seq && (size_t)n < cap)
		n += snprintf(buf + n, cap - (size_t)n, "\"seq\":%lld}", (long long)s->seq);
	return (n < 0 || (size_t)n >= cap) ? SKY_ERANGE : n;
}

int sky_status_decode(const char *buf, size_t len, sky_status *s, sky_diag *d)
{
	char state[16];
	int64_t v;
	int rc;
	memset(s, 0, sizeof *s);
	if (!buf || len > SKY_STATUS_MAX_BYTES)
		return sky_diag_set(d, SKY_ERANGE, "status: %zu bytes, limit %u", len,
				    SKY_STATUS_MAX_BYTES);
	cJSON *doc = sky_json_parse(buf, len, d);
	if (!doc)
		return SKY_EFORMAT;
	if ((rc = sky_json_str(doc, "state", state, sizeof state, "status", d)) ||
	    (rc = sky_json_i64(doc, "session", 0, SKY_JSON_INT_MAX, &s->session, "status", d)) ||
	    (rc = get_boot(doc, s->boot, "status", d)))
		goto exit;
	if (strcmp(state, "online") == 0) {
		s->online = 1;
		if ((rc = sky_json_i64(doc, "keepalive_s", 1, 3600, &v, "status", d)))
			goto exit;
		s->keepalive_s = (int)v;
	} else if (strcmp(state, "offline") != 0) {
		rc = sky_diag_set(d, SKY_EFORMAT, "status: state must be online or offline");
		goto exit;
	}
	if (cJSON_GetObjectItemCaseSensitive(doc, "seq"))
		rc = sky_json_i64(doc, "seq", 0, SKY_JSON_INT_MAX, &s->seq, "status", d);
exit:
	sky_json_free(doc);
	return rc;
}
