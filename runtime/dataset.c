/* Prepared data sets in safetensors files (sky_dataset.h). */
#include "sky_dataset.h"

#include "sky_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LABELS_JSON_CAP ((size_t)SKY_DS_MAX_LABELS * SKY_DS_LABEL_CAP * 6 + 64)
#define ROWS_MAX ((int64_t)INT32_MAX)

void sky_ds_build_init(sky_ds_build *b, int seq)
{
	memset(b, 0, sizeof *b);
	b->meta.seq = seq;
}

void sky_ds_build_free(sky_ds_build *b)
{
	if (!b)
		return;
	free(b->input_ids);
	free(b->token_type_ids);
	free(b->attention_mask);
	free(b->labels);
	b->input_ids = b->token_type_ids = b->attention_mask = b->labels = NULL;
	b->cap = 0;
}

static int grow(int32_t **p, size_t n)
{
	int32_t *q = realloc(*p, n * sizeof *q);
	if (!q)
		return SKY_ENOMEM;
	*p = q;
	return 0;
}

int sky_ds_build_next(sky_ds_build *b, int32_t **ids, int32_t **types, int32_t **mask)
{
	int64_t r = b->meta.rows;
	size_t S = (size_t)b->meta.seq;
	if (r >= ROWS_MAX)
		return SKY_ERANGE;
	if (r == b->cap) {
		int64_t nc = b->cap ? b->cap * 2 : 1024;
		if (nc > ROWS_MAX)
			nc = ROWS_MAX;
		if (grow(&b->input_ids, (size_t)nc * S) || grow(&b->token_type_ids, (size_t)nc * S) ||
		    grow(&b->attention_mask, (size_t)nc * S) || grow(&b->labels, (size_t)nc))
			return SKY_ENOMEM;
		b->cap = nc;
	}
	*ids = b->input_ids + (size_t)r * S;
	*types = b->token_type_ids + (size_t)r * S;
	*mask = b->attention_mask + (size_t)r * S;
	return 0;
}

void sky_ds_build_commit(sky_ds_build *b, int32_t label)
{
	b->labels[b->meta.rows++] = label;
}

static int is_hex(const char *s, size_t n)
{
	if (strlen(s) != n)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}

/* The label names as a JSON array into buf. */
static int labels_json(const sky_ds_meta *m, char *buf, size_t cap, sky_diag *d)
{
	cJSON *o = sky_json_new_object();
	cJSON *a = o ? cJSON_AddArrayToObject(o, "labels") : NULL;
	int rc = a ? 0 : SKY_ENOMEM;
	for (int i = 0; !rc && i < m->nlabels; i++) {
		cJSON *s = cJSON_CreateString(m->label[i]);
		if (!s)
			rc = SKY_ENOMEM;
		else
			cJSON_AddItemToArray(a, s);
	}
	if (!rc) {
		int n = sky_json_print(a, buf, cap);
		rc = n < 0 ? n : 0;
	}
	sky_json_free(o);
	if (rc)
		sky_diag_set(d, rc, "cannot write the label names");
	return rc;
}

int sky_ds_write(const char *path, const sky_ds_build *b, sky_diag *d)
{
	const sky_ds_meta *m = &b->meta;
	if (m->rows <= 0)
		return sky_diag_set(d, SKY_EINVAL, "no rows to write");
	if (m->nlabels <= 0 || m->nlabels > SKY_DS_MAX_LABELS)
		return sky_diag_set(d, SKY_EINVAL, "%d labels (1 to %d)", m->nlabels,
				    SKY_DS_MAX_LABELS);
	for (int64_t i = 0; i < m->rows; i++)
		if (b->labels[i] < 0 || b->labels[i] >= m->nlabels)
			return sky_diag_set(d, SKY_EINVAL, "row %lld: label %d of %d",
					    (long long)i, b->labels[i], m->nlabels);
	if (!is_hex(m->source_sha256, 64))
		return sky_diag_set(d, SKY_EINVAL, "source_sha256 is not 64 hex digits");
	char *lj = malloc(LABELS_JSON_CAP);
	if (!lj)
		return sky_diag_set(d, SKY_ENOMEM, "no memory for the label names");
	int rc = labels_json(m, lj, LABELS_JSON_CAP, d);
	if (rc) {
		free(lj);
		return rc;
	}
	char rows[24], seq[16], hash[16], skipped[24], trunc[24];
	snprintf(rows, sizeof rows, "%lld", (long long)m->rows);
	snprintf(seq, sizeof seq, "%d", m->seq);
	snprintf(hash, sizeof hash, "%08x", m->tokenizer_hash);
	snprintf(skipped, sizeof skipped, "%lld", (long long)m->skipped);
	snprintf(trunc, sizeof trunc, "%lld", (long long)m->truncated);
	const sky_st_meta meta[] = {
		{"format", SKY_DS_FORMAT},      {"version", SKY_DS_VERSION},
		{"rows", rows},                 {"seq", seq},
		{"labels", lj},                 {"label_source", m->label_source},
		{"source", m->source},          {"source_sha256", m->source_sha256},
		{"tokenizer_hash", hash},       {"skipped", skipped},
		{"truncated", trunc},
	};
	sky_st_entry t[4] = {
		{"input_ids", SKY_ST_I32, 2, {m->rows, m->seq}, b->input_ids},
		{"token_type_ids", SKY_ST_I32, 2, {m->rows, m->seq}, b->token_type_ids},
		{"attention_mask", SKY_ST_I32, 2, {m->rows, m->seq}, b->attention_mask},
		{"labels", SKY_ST_I32, 1, {m->rows}, b->labels},
	};
	rc = sky_st_write(path, t, 4, meta, (int)(sizeof meta / sizeof meta[0]), d);
	free(lj);
	return rc;
}

void sky_ds_init(sky_dataset *ds)
{
	memset(ds, 0, sizeof *ds);
	sky_st_init(&ds->st);
}

void sky_ds_close(sky_dataset *ds)
{
	if (!ds)
		return;
	sky_st_close(&ds->st);
	sky_ds_init(ds);
}

static const char *need(const sky_st_file *f, const char *key, sky_diag *d)
{
	const char *v = sky_st_meta_get(f, key);
	if (!v)
		sky_diag_set(d, SKY_EFORMAT, "not a Sky data set: no metadata '%s'", key);
	return v;
}

static int meta_int(const sky_st_file *f, const char *key, int64_t min, int64_t max, int64_t *out,
		    sky_diag *d)
{
	const char *v = need(f, key, d);
	if (!v)
		return SKY_EFORMAT;
	char *end;
	long long x = strtoll(v, &end, 10);
	if (!*v || *end || v[0] == '-' || v[0] == '+' || v[0] == ' ')
		return sky_diag_set(d, SKY_EFORMAT, "metadata '%s': '%.40s' is not a whole number", key,
				    v);
	if (x < min || x > max)
		return sky_diag_set(d, SKY_ERANGE, "metadata '%s': %lld outside %lld..%lld", key, x,
				    (long long)min, (long long)max);
	*out = x;
	return 0;
}


static int read_labels(sky_ds_meta *m, const char *text, sky_diag *d)
{
	sky_diag jd;
	sky_diag_clear(&jd);
	cJSON *a = sky_json_parse(text, strlen(text), &jd);
	int rc = 0;
	if (!a || !cJSON_IsArray(a)) {
		rc = sky_diag_set(d, SKY_EFORMAT, "metadata 'labels' is not a JSON array%s%s",
				  a ? "" : ": ", a ? "" : jd.msg);
		goto exit;
	}
	int n = cJSON_GetArraySize(a);
	if (n < 1 || n > SKY_DS_MAX_LABELS) {
		rc = sky_diag_set(d, SKY_ERANGE, "metadata 'labels': %d names (1 to %d)", n,
				  SKY_DS_MAX_LABELS);
		goto exit;
	}
	int i = 0;
	for (const cJSON *c = a->child; c; c = c->next, i++) {
		if (!cJSON_IsString(c) || !c->valuestring[0] ||
		    strlen(c->valuestring) >= SKY_DS_LABEL_CAP) {
			rc = sky_diag_set(d, SKY_EFORMAT,
					  "metadata 'labels': name %d is not a string of 1 to %d bytes",
					  i, SKY_DS_LABEL_CAP - 1);
			goto exit;
		}
		for (int j = 0; j < i; j++)
			if (strcmp(m->label[j], c->valuestring) == 0) {
				rc = sky_diag_set(d, SKY_EFORMAT,
						  "metadata 'labels': '%s' is there twice (%d and %d)",
						  c->valuestring, j, i);
				goto exit;
			}
		strcpy(m->label[i], c->valuestring);
	}
	m->nlabels = n;
exit:
	sky_json_free(a);
	return rc;
}

static int read_meta(sky_dataset *ds, sky_diag *d)
{
	const sky_st_file *f = &ds->st;
	sky_ds_meta *m = &ds->meta;
	const char *v = need(f, "format", d);
	if (!v)
		return SKY_EFORMAT;
	if (strcmp(v, SKY_DS_FORMAT) != 0)
		return sky_diag_set(d, SKY_EFORMAT, "not a Sky data set: format '%.40s'", v);
	if (!(v = need(f, "version", d)))
		return SKY_EFORMAT;
	if (strcmp(v, SKY_DS_VERSION) != 0)
		return sky_diag_set(d, SKY_EUNSUPPORTED, "data set version '%.20s' (this Sky reads %s)",
				    v, SKY_DS_VERSION);
	int64_t x;
	int rc = meta_int(f, "rows", 1, ROWS_MAX, &m->rows, d);
	if (!rc)
		rc = meta_int(f, "seq", 2, SKY_DS_MAX_SEQ, &x, d);
	if (rc)
		return rc;
	m->seq = (int)x;
	if ((rc = meta_int(f, "skipped", 0, INT64_MAX, &m->skipped, d)) ||
	    (rc = meta_int(f, "truncated", 0, m->rows, &m->truncated, d)))
		return rc;
	if (!(v = need(f, "labels", d)))
		return SKY_EFORMAT;
	if ((rc = read_labels(m, v, d)))
		return rc;
	static const char *const k_src[] = {"model", "given", "data", "integer"};
	if (!(v = need(f, "label_source", d)))
		return SKY_EFORMAT;
	int ok = 0;
	for (size_t i = 0; i < sizeof k_src / sizeof k_src[0]; i++)
		ok |= strcmp(v, k_src[i]) == 0;
	if (!ok)
		return sky_diag_set(d, SKY_EFORMAT, "metadata 'label_source': '%.20s'", v);
	strcpy(m->label_source, v);
	if (!(v = need(f, "source", d)))
		return SKY_EFORMAT;
	snprintf(m->source, sizeof m->source, "%s", v);
	if (!(v = need(f, "source_sha256", d)))
		return SKY_EFORMAT;
	if (!is_hex(v, 64))
		return sky_diag_set(d, SKY_EFORMAT, "metadata 'source_sha256' is not 64 hex digits");
	strcpy(m->source_sha256, v);
	if (!(v = need(f, "tokenizer_hash", d)))
		return SKY_EFORMAT;
	if (!is_hex(v, 8))
		return sky_diag_set(d, SKY_EFORMAT, "metadata 'tokenizer_hash' is not 8 hex digits");
	m->tokenizer_hash = (uint32_t)strtoul(v, NULL, 16);
	return 0;
}

/* Every row: mask 1s (at least 2) then 0s, types 0/1, ids >= 0, label in
 * range. */
static int check_rows(const sky_dataset *ds, sky_diag *d)
{
	const sky_ds_meta *m = &ds->meta;
	size_t S = (size_t)m->seq;
	for (int64_t r = 0; r < m->rows; r++) {
		const int32_t *ids = ds->input_ids + (size_t)r * S, *ty = ds->token_type_ids + (size_t)r * S,
			      *mk = ds->attention_mask + (size_t)r * S;
		if (ds->labels[r] < 0 || ds->labels[r] >= m->nlabels)
			return sky_diag_set(d, SKY_EFORMAT, "row %lld: label %d, the set has %d labels",
					    (long long)r, ds->labels[r], m->nlabels);
		size_t len = 0;
		while (len < S && mk[len] == 1)
			len++;
		if (len < 2)
			return sky_diag_set(d, SKY_EFORMAT, "row %lld: attention mask starts %d, %d",
					    (long long)r, mk[0], S > 1 ? mk[1] : -1);
		for (size_t i = 0; i < S; i++) {
			if (i >= len && mk[i] != 0)
				return sky_diag_set(d, SKY_EFORMAT,
						    "row %lld: attention mask %d at %zu after padding began at %zu",
						    (long long)r, mk[i], i, len);
			if (ids[i] < 0 || (ty[i] != 0 && ty[i] != 1))
				return sky_diag_set(d, SKY_EFORMAT,
						    "row %lld position %zu: id %d, type %d", (long long)r,
						    i, ids[i], ty[i]);
		}
	}
	return 0;
}

static int load(sky_dataset *ds, sky_diag *d)
{
	int rc = read_meta(ds, d);
	if (rc)
		return rc;
	const sky_ds_meta *m = &ds->meta;
	const int64_t shape2[2] = {m->rows, m->seq}, shape1[1] = {m->rows};
	const char *names[3] = {"input_ids", "token_type_ids", "attention_mask"};
	const int32_t **views[3] = {&ds->input_ids, &ds->token_type_ids, &ds->attention_mask};
	const sky_st_tensor *t;
	for (int i = 0; i < 3; i++) {
		if ((rc = sky_st_get(&ds->st, names[i], SKY_ST_I32, 2, shape2, &t, d)))
			return rc;
		*views[i] = (const int32_t *)(const void *)t->data;
	}
	if ((rc = sky_st_get(&ds->st, "labels", SKY_ST_I32, 1, shape1, &t, d)))
		return rc;
	ds->labels = (const int32_t *)(const void *)t->data;
	if (ds->st.ntensors != 4)
		return sky_diag_set(d, SKY_EFORMAT, "%d tensors; a data set holds 4", ds->st.ntensors);
	return check_rows(ds, d);
}

int sky_ds_open(sky_dataset *ds, const char *path, sky_diag *d)
{
	sky_ds_init(ds);
	int rc = sky_st_open(&ds->st, path, d);
	if (!rc)
		rc = load(ds, d);
	if (rc)
		sky_ds_close(ds);
	return rc;
}

int sky_ds_parse(sky_dataset *ds, const void *bytes, size_t len, sky_diag *d)
{
	sky_ds_init(ds);
	int rc = sky_st_parse(&ds->st, bytes, len, d);
	if (!rc)
		rc = load(ds, d);
	if (rc)
		sky_ds_close(ds);
	return rc;
}

int sky_ds_row_get(const sky_dataset *ds, int64_t i, sky_ds_row *out)
{
	if (i < 0 || i >= ds->meta.rows)
		return SKY_ERANGE;
	size_t S = (size_t)ds->meta.seq;
	out->ids = ds->input_ids + (size_t)i * S;
	out->types = ds->token_type_ids + (size_t)i * S;
	out->mask = ds->attention_mask + (size_t)i * S;
	out->label = ds->labels[i];
	int len = 0;
	while ((size_t)len < S && out->mask[len])
		len++;
	out->len = len;
	return 0;
}

void sky_ds_stats_get(const sky_dataset *ds, sky_ds_stats *st)
{
	memset(st, 0, sizeof *st);
	int S = ds->meta.seq;
	int64_t *hist = calloc((size_t)S + 1, sizeof *hist);
	double sum = 0;
	st->len_min = S;
	for (int64_t i = 0; i < ds->meta.rows; i++) {
		sky_ds_row r;
		sky_ds_row_get(ds, i, &r);
		st->count[r.label]++;
		st->pairs += r.types[r.len - 1] == 1;
		st->full += r.len == S;
		sum += r.len;
		if (r.len < st->len_min)
			st->len_min = r.len;
		if (r.len > st->len_max)
			st->len_max = r.len;
		if (hist)
			hist[r.len]++;
	}
	st->len_mean = sum / (double)ds->meta.rows;
	if (hist) {
		int64_t acc = 0, p50 = (ds->meta.rows + 1) / 2, p95 = (ds->meta.rows * 95 + 99) / 100;
		for (int l = 0; l <= S; l++) {
			if (acc < p50 && acc + hist[l] >= p50)
				st->len_p50 = l;
			if (acc < p95 && acc + hist[l] >= p95)
				st->len_p95 = l;
			acc += hist[l];
		}
		free(hist);
	}
}
