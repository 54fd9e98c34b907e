/* Boards' costs corrected by what their jobs measured (sky_calib.h). */
#include "sky_calib.h"

#include "sky_json.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void sky_calib_init(sky_calib *c) { memset(c, 0, sizeof *c); }

int sky_calib_sample_from_metrics(const char *buf, size_t len, int first_unit, int last_unit,
				  sky_calib_sample *s)
{
	memset(s, 0, sizeof *s);
	s->first_unit = first_unit;
	s->last_unit = last_unit;
	if (len > SKY_METRICS_MAX_BYTES)
		return SKY_EFORMAT;
	cJSON *doc = sky_json_parse(buf, len, NULL);
	if (!cJSON_IsObject(doc)) {
		sky_json_free(doc);
		return SKY_EFORMAT;
	}
	const cJSON *ops = cJSON_GetObjectItemCaseSensitive(doc, "ops"), *op;
	int rc = 0;
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(doc, "infer")) ||
	    cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(doc, "done")) ||
	    cJSON_GetObjectItemCaseSensitive(doc, "stall") || !cJSON_IsArray(ops))
		goto exit;
	double sum_f = 0, sum_b = 0;
	int n_f = 0, n_b = 0;
	cJSON_ArrayForEach(op, ops)
	{
		const cJSON *k = cJSON_GetArrayItem(op, 0), *t0 = cJSON_GetArrayItem(op, 2),
			    *t1 = cJSON_GetArrayItem(op, 3);
		if (!cJSON_IsArray(op) || cJSON_GetArraySize(op) != 4 || !cJSON_IsString(k) ||
		    !cJSON_IsNumber(t0) || !cJSON_IsNumber(t1))
			continue;
		double dt = (t1->valuedouble - t0->valuedouble) * 1e-3;
		if (!(dt >= 0 && dt < 1e6))
			continue; /* reversed or absurd: not a time */
		if (!strcmp(k->valuestring, "F"))
			sum_f += dt, n_f++;
		else if (!strcmp(k->valuestring, "B"))
			sum_b += dt, n_b++;
	}
	s->fwd_s = n_f ? sum_f / n_f : 0;
	s->bwd_s = n_b ? sum_b / n_b : 0;
	rc = s->fwd_s > 0 || s->bwd_s > 0;
exit:
	sky_json_free(doc);
	return rc;
}

static sky_calib_entry *find(sky_calib *c, const char *board, const sky_caps_shape *shape)
{
	for (int i = 0; i < c->n; i++)
		if (!strcmp(c->e[i].board, board) && sky_caps_shape_eq(&c->e[i].shape, shape))
			return &c->e[i];
	return NULL;
}

const sky_calib_entry *sky_calib_find(const sky_calib *c, const char *board,
				      const sky_caps_shape *shape)
{
	return find((sky_calib *)c, board, shape);
}

/* One direction's fold: halves *a (attention) and *f (feed-forward) of the
 * current figures, the probe's pa and pf, n samples so far, na and nf
 * units of each kind, measured m. Returns 1 folded, 0 refused. */
static int fold_one(double *a, double *f, double pa, double pf, int *n, int na, int nf, double m)
{
	double p = na * pa + nf * pf;
	if (!(m > 0) || !(p > 0))
		return 0;
	if (m > p * SKY_CALIB_ABSURD || m < p / SKY_CALIB_ABSURD)
		return -1;
	if (*n == 0) {
		*a = pa, *f = pf; /* the first sample replaces the probe outright */
		double q = m / p;
		*a *= q, *f *= q;
		*n = 1;
		return 1;
	}
	double e = na * *a + nf * *f;
	if (!(e > 0))
		return 0;
	double q = m / e;
	q = q > SKY_CALIB_BOUND ? SKY_CALIB_BOUND : q < 1.0 / SKY_CALIB_BOUND ? 1.0 / SKY_CALIB_BOUND : q;
	double w = 1.0 / (*n + 1);
	w = w < SKY_CALIB_ALPHA ? SKY_CALIB_ALPHA : w;
	double k = pow(q, w);
	*a *= k, *f *= k;
	if (*n < 1 << 30)
		(*n)++;
	return 1;
}

int sky_calib_fold(sky_calib *c, const char *board, const sky_caps_shape *shape,
		   const sky_caps_times *probe, const sky_calib_sample *s, const char *job,
		   int64_t now_unix)
{
	if (!sky_topic_segment_ok(board) || s->first_unit < 0 || s->last_unit < s->first_unit ||
	    !(sky_caps_layer_s(probe) > 0))
		return SKY_EINVAL;
	int na = 0, nf = 0;
	for (int u = s->first_unit; u <= s->last_unit; u++)
		u % 2 ? nf++ : na++;
	sky_calib_entry *e = find(c, board, shape);
	if (!e) {
		if (c->n == SKY_CALIB_MAX) { /* forget the entry folded longest ago */
			int old = 0;
			for (int i = 1; i < c->n; i++)
				old = c->e[i].at_unix < c->e[old].at_unix ? i : old;
			c->e[old] = c->e[--c->n];
		}
		e = &c->e[c->n++];
		memset(e, 0, sizeof *e);
		snprintf(e->board, sizeof e->board, "%s", board);
		e->shape = *shape;
		e->t = *probe;
	}
	int rf = fold_one(&e->t.fwd_attn_s, &e->t.fwd_ffn_s, probe->fwd_attn_s, probe->fwd_ffn_s,
			  &e->n_fwd, na, nf, s->fwd_s);
	int rb = fold_one(&e->t.bwd_attn_s, &e->t.bwd_ffn_s, probe->bwd_attn_s, probe->bwd_ffn_s,
			  &e->n_bwd, na, nf, s->bwd_s);
	if (rf < 0 || rb < 0)
		e->refused++;
	c->changed = 1;
	if (rf <= 0 && rb <= 0)
		return 0;
	e->probe = *probe;
	snprintf(e->job, sizeof e->job, "%s", job && sky_topic_segment_ok(job) ? job : "");
	e->at_unix = now_unix;
	return 1;
}

int sky_calib_times(const sky_calib *c, const char *board, const sky_caps_shape *shape,
		    const sky_caps_times *probe, sky_caps_times *out)
{
	*out = *probe;
	const sky_calib_entry *e = sky_calib_find(c, board, shape);
	if (!e)
		return 0;
	/* A probe far from the one the figures were measured against means
	 * the board changed (restarted slower, moved, its neighbours now load
	 * it): its old measurements no longer describe it, the probe does. */
	const double now = probe->fwd_attn_s + probe->fwd_ffn_s + probe->bwd_attn_s + probe->bwd_ffn_s,
		     then = e->probe.fwd_attn_s + e->probe.fwd_ffn_s + e->probe.bwd_attn_s +
			    e->probe.bwd_ffn_s;
	if (then > 0 && now > 0 && (now > then * SKY_CALIB_BOUND || now * SKY_CALIB_BOUND < then))
		return 0;
	if (e->n_fwd > 0)
		out->fwd_attn_s = e->t.fwd_attn_s, out->fwd_ffn_s = e->t.fwd_ffn_s;
	if (e->n_bwd > 0)
		out->bwd_attn_s = e->t.bwd_attn_s, out->bwd_ffn_s = e->t.bwd_ffn_s;
	return e->n_fwd > 0 || e->n_bwd > 0;
}

int sky_calib_to_json(const sky_calib *c, char *buf, size_t cap)
{
	size_t n = 0;
#define PUT(...) \
	do { \
		int w_ = snprintf(buf + n, n < cap ? cap - n : 0, __VA_ARGS__); \
		if (w_ < 0 || (n += (size_t)w_) >= cap) \
			return SKY_ERANGE; \
	} while (0)
#define TIMES(t) \
	PUT("{\"fwd_attn_s\":%.9g,\"fwd_ffn_s\":%.9g,\"bwd_attn_s\":%.9g,\"bwd_ffn_s\":%.9g}", \
	    (t).fwd_attn_s, (t).fwd_ffn_s, (t).bwd_attn_s, (t).bwd_ffn_s)
	PUT("{\"v\":1,\"boards\":[");
	for (int i = 0; i < c->n; i++) {
		const sky_calib_entry *e = &c->e[i];
		char name[6 * sizeof e->shape.name + 8];
		sky_json_escape(e->shape.name, name, sizeof name);
		/* board and job passed sky_topic_segment_ok: nothing to escape */
		PUT("%s{\"board\":\"%s\",\"shape\":{\"name\":\"%s\",\"hidden\":%d,\"heads\":%d,"
		    "\"ffn\":%d,\"seq\":%d,\"batch\":%d},\"fp32\":",
		    i ? "," : "", e->board, name, e->shape.hidden, e->shape.heads, e->shape.ffn,
		    e->shape.seq, e->shape.batch);
		TIMES(e->t);
		PUT(",\"probe\":");
		TIMES(e->probe);
		PUT(",\"n_fwd\":%d,\"n_bwd\":%d,\"refused\":%ld,\"job\":\"%s\",\"at\":%lld}", e->n_fwd,
		    e->n_bwd, e->refused, e->job, (long long)e->at_unix);
	}
	PUT("]}\n");
#undef TIMES
#undef PUT
	return (int)n;
}

static int read_times(const cJSON *o, const char *key, sky_caps_times *t, sky_diag *d)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!cJSON_IsObject(x))
		return sky_diag_set(d, SKY_EFORMAT, "calib: \"%s\" is not an object", key);
	int rc;
	if ((rc = sky_json_num(x, "fwd_attn_s", 0, 1e6, &t->fwd_attn_s, "calib", d)) ||
	    (rc = sky_json_num(x, "fwd_ffn_s", 0, 1e6, &t->fwd_ffn_s, "calib", d)) ||
	    (rc = sky_json_num(x, "bwd_attn_s", 0, 1e6, &t->bwd_attn_s, "calib", d)) ||
	    (rc = sky_json_num(x, "bwd_ffn_s", 0, 1e6, &t->bwd_ffn_s, "calib", d)))
		return SKY_EFORMAT;
	return 0;
}

static int read_entry(const cJSON *o, sky_calib_entry *e, sky_diag *d)
{
	memset(e, 0, sizeof *e);
	const cJSON *sh = cJSON_GetObjectItemCaseSensitive(o, "shape");
	int64_t at = 0;
	sky_diag f; /* the field's own words, put after the board's id */
	sky_diag_clear(&f);
	if (!cJSON_IsObject(o) || !cJSON_IsObject(sh))
		return sky_diag_set(d, SKY_EFORMAT, "calib: an entry is not an object with a shape");
	if (sky_json_str(o, "board", e->board, sizeof e->board, "calib", &f))
		return sky_diag_set(d, SKY_EFORMAT, "%s", f.msg);
	if (!sky_topic_segment_ok(e->board))
		return sky_diag_set(d, SKY_EFORMAT, "calib: board id '%.64s' is not a board id",
				    e->board);
	if (sky_json_str(sh, "name", e->shape.name, sizeof e->shape.name, "calib", &f) ||
	    sky_json_int(sh, "hidden", 1, 1 << 20, &e->shape.hidden, "calib", &f) ||
	    sky_json_int(sh, "heads", 1, 1 << 20, &e->shape.heads, "calib", &f) ||
	    sky_json_int(sh, "ffn", 1, 1 << 24, &e->shape.ffn, "calib", &f) ||
	    sky_json_int(sh, "seq", 1, 1 << 24, &e->shape.seq, "calib", &f) ||
	    sky_json_int(sh, "batch", 1, 1 << 24, &e->shape.batch, "calib", &f) ||
	    read_times(o, "fp32", &e->t, &f) || read_times(o, "probe", &e->probe, &f) ||
	    sky_json_int(o, "n_fwd", 0, 1 << 30, &e->n_fwd, "calib", &f) ||
	    sky_json_int(o, "n_bwd", 0, 1 << 30, &e->n_bwd, "calib", &f) ||
	    sky_json_str(o, "job", e->job, sizeof e->job, "calib", &f) ||
	    sky_json_i64(o, "at", 0, SKY_JSON_INT_MAX, &at, "calib", &f))
		return sky_diag_set(d, SKY_EFORMAT, "calib: entry of board %s: %.200s", e->board,
				    f.msg);
	double refused = 0;
	sky_json_num(o, "refused", 0, 1e15, &refused, "calib", NULL);
	e->refused = (long)refused;
	e->at_unix = at;
	if ((e->n_fwd > 0 && !(e->t.fwd_attn_s + e->t.fwd_ffn_s > 0)) ||
	    (e->n_bwd > 0 && !(e->t.bwd_attn_s + e->t.bwd_ffn_s > 0)))
		return sky_diag_set(d, SKY_EFORMAT, "calib: board %s has samples and no time",
				    e->board);
	return 0;
}

int sky_calib_from_json(sky_calib *c, const char *buf, size_t len, sky_diag *d)
{
	sky_calib_init(c);
	if (len > SKY_CALIB_MAX_BYTES)
		return sky_diag_set(d, SKY_EFORMAT, "calib: %zu bytes, over %u", len,
				    SKY_CALIB_MAX_BYTES);
	cJSON *doc = sky_json_parse(buf, len, d);
	if (!doc)
		return SKY_EFORMAT;
	int rc = 0, v = 0;
	const cJSON *boards = cJSON_GetObjectItemCaseSensitive(doc, "boards"), *b;
	if (sky_json_int(doc, "v", 1, 1, &v, "calib", NULL) || !cJSON_IsArray(boards)) {
		rc = sky_diag_set(d, SKY_EFORMAT, "calib: not version 1 with a \"boards\" array");
		goto exit;
	}
	cJSON_ArrayForEach(b, boards)
	{
		if (c->n == SKY_CALIB_MAX) {
			rc = sky_diag_set(d, SKY_EFORMAT, "calib: more than %d entries", SKY_CALIB_MAX);
			goto exit;
		}
		if ((rc = read_entry(b, &c->e[c->n], d)) != 0)
			goto exit;
		if (find(c, c->e[c->n].board, &c->e[c->n].shape)) {
			rc = sky_diag_set(d, SKY_EFORMAT, "calib: board %s twice at one shape",
					  c->e[c->n].board);
			goto exit;
		}
		c->n++;
	}
exit:
	sky_json_free(doc);
	if (rc)
		c->n = 0;
	return rc;
}
