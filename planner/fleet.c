/* Fleet files: parsing, validation, writing (format in sky_plan.h). */
#include "sky_plan.h"

#include "sky_file.h"
#include "sky_json.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sky_fleet_init(sky_fleet *f)
{
	f->n = 0;
	f->n_links = 0;
}

/* "board <id>" when the id is usable, else "board #<index>" */
static void board_name(const sky_board *b, int i, char *buf, size_t cap)
{
	if (b->id[0])
		snprintf(buf, cap, "board %s", b->id);
	else
		snprintf(buf, cap, "board #%d", i);
}

static int bad(sky_diag *d, const sky_board *b, int i, const char *field, const char *why,
	       double v)
{
	char name[SKY_BOARD_ID_MAX + 16];
	board_name(b, i, name, sizeof name);
	return sky_diag_set(d, SKY_EINVAL, "%s: field '%s' %s (got %g)", name, field, why, v);
}

int sky_fleet_validate(const sky_fleet *f, sky_diag *d)
{
	if (f->n < 1 || f->n > SKY_PLAN_MAX_BOARDS)
		return sky_diag_set(d, SKY_EINVAL, "fleet: %d boards, allowed 1 to %d", f->n,
				    SKY_PLAN_MAX_BOARDS);
	for (int i = 0; i < f->n; i++) {
		const sky_board *b = &f->board[i];
		size_t len = strnlen(b->id, sizeof b->id);
		if (len == 0 || len == sizeof b->id)
			return sky_diag_set(d, SKY_EINVAL, "board #%d: field 'id' is empty or too long",
					    i);
		for (size_t k = 0; k < len; k++) {
			unsigned char ch = (unsigned char)b->id[k];
			if (ch <= ' ' || ch >= 127 || ch == '"' || ch == '\\' || ch == '/' ||
			    ch == '+' || ch == '#')
				return sky_diag_set(d, SKY_EINVAL,
						    "board #%d: field 'id' has character 0x%02x (ids "
						    "are printable, no space, quote, slash, + or #: "
						    "they become MQTT topic levels)",
						    i, ch);
		}
		for (int k = 0; k < i; k++)
			if (strcmp(f->board[k].id, b->id) == 0)
				return sky_diag_set(d, SKY_EINVAL,
						    "board %s: field 'id' is a duplicate (boards #%d "
						    "and #%d)",
						    b->id, k, i);
		if (!(isfinite(b->fwd_s) && b->fwd_s > 0))
			return bad(d, b, i, "fwd_s", "must be a positive number of seconds", b->fwd_s);
		if (!(isfinite(b->bwd_s) && b->bwd_s > 0))
			return bad(d, b, i, "bwd_s", "must be a positive number of seconds", b->bwd_s);
		if (!(isfinite(b->fwd_int8_s) && b->fwd_int8_s >= 0))
			return bad(d, b, i, "fwd_int8_s", "must be 0 (unknown) or positive",
				   b->fwd_int8_s);
		if (!(isfinite(b->bwd_int8_s) && b->bwd_int8_s >= 0))
			return bad(d, b, i, "bwd_int8_s", "must be 0 (unknown) or positive",
				   b->bwd_int8_s);
		if ((b->fwd_int8_s > 0) != (b->bwd_int8_s > 0))
			return bad(d, b, i, b->fwd_int8_s > 0 ? "bwd_int8_s" : "fwd_int8_s",
				   "must be given with its forward/backward twin", 0);
		if (!(isfinite(b->attn_share) && b->attn_share >= 0 && b->attn_share < 1))
			return bad(d, b, i, "attn_share", "must be 0 (from FLOPs) or in (0, 1)",
				   b->attn_share);
		if (!(isfinite(b->attn_share_int8) && b->attn_share_int8 >= 0 &&
		      b->attn_share_int8 < 1))
			return bad(d, b, i, "attn_share_int8", "must be 0 (attn_share) or in (0, 1)",
				   b->attn_share_int8);
		if (!(isfinite(b->embed_int8_s) && b->embed_int8_s >= 0))
			return bad(d, b, i, "embed_int8_s", "must be 0 (unknown) or positive",
				   b->embed_int8_s);
		if (!(isfinite(b->head_int8_s) && b->head_int8_s >= 0))
			return bad(d, b, i, "head_int8_s", "must be 0 (unknown) or positive",
				   b->head_int8_s);
		if (b->mem_bytes <= 0)
			return bad(d, b, i, "mem_bytes", "must be positive", (double)b->mem_bytes);
		if (!(isfinite(b->bw_Bps) && b->bw_Bps > 0))
			return bad(d, b, i, "bw_Bps", "must be a positive number of bytes/s",
				   b->bw_Bps);
		if (!(isfinite(b->lat_s) && b->lat_s >= 0))
			return bad(d, b, i, "lat_s", "must be a finite number >= 0", b->lat_s);
		if (strnlen(b->site, sizeof b->site) == sizeof b->site || !sky_site_ok(b->site) ||
		    strcmp(b->site, SKY_SITE_CORE) == 0)
			return bad(d, b, i, "site",
				   "must be 1-64 of [A-Za-z0-9_.-] (\"core\" is written as none)", 0);
	}
	if (f->n_links < 0 || f->n_links > SKY_PLAN_MAX_LINKS)
		return sky_diag_set(d, SKY_EINVAL, "fleet: %d links, allowed 0 to %d", f->n_links,
				    SKY_PLAN_MAX_LINKS);
	for (int i = 0; i < f->n_links; i++) {
		const sky_site_link *l = &f->link[i];
		if (strnlen(l->a, sizeof l->a) == sizeof l->a ||
		    strnlen(l->b, sizeof l->b) == sizeof l->b || !sky_site_ok(l->a) ||
		    !sky_site_ok(l->b) || !strcmp(l->a, SKY_SITE_CORE) || !strcmp(l->b, SKY_SITE_CORE))
			return sky_diag_set(d, SKY_EINVAL,
					    "link #%d: fields 'a' and 'b' must be site names", i);
		if (sky_site_eq(l->a, l->b))
			return sky_diag_set(d, SKY_EINVAL, "link #%d: joins site %s to itself", i,
					    sky_site_name(l->a));
		for (int k = 0; k < i; k++)
			if ((sky_site_eq(f->link[k].a, l->a) && sky_site_eq(f->link[k].b, l->b)) ||
			    (sky_site_eq(f->link[k].a, l->b) && sky_site_eq(f->link[k].b, l->a)))
				return sky_diag_set(d, SKY_EINVAL,
						    "link #%d: %s-%s is given twice (links #%d and "
						    "#%d)",
						    i, sky_site_name(l->a), sky_site_name(l->b), k, i);
		if (!(isfinite(l->bw_Bps) && l->bw_Bps > 0))
			return sky_diag_set(d, SKY_EINVAL,
					    "link %s-%s: field 'bw_Bps' must be a positive number of "
					    "bytes/s (got %g)",
					    sky_site_name(l->a), sky_site_name(l->b), l->bw_Bps);
		if (!(isfinite(l->lat_s) && l->lat_s >= 0))
			return sky_diag_set(d, SKY_EINVAL,
					    "link %s-%s: field 'lat_s' must be a finite number >= 0 "
					    "(got %g)",
					    sky_site_name(l->a), sky_site_name(l->b), l->lat_s);
	}
	return 0;
}

/* optional number: absent leaves *out alone */
static int opt_num(const cJSON *o, const char *key, double min, double max, double *out,
		   const char *what, sky_diag *d)
{
	if (!cJSON_GetObjectItemCaseSensitive(o, key))
		return 0;
	return sky_json_num(o, key, min, max, out, what, d);
}

static int parse_board(const cJSON *o, int i, sky_board *b, sky_diag *d)
{
	char what[SKY_BOARD_ID_MAX + 16];
	memset(b, 0, sizeof *b);
	snprintf(what, sizeof what, "board #%d", i);
	if (!cJSON_IsObject(o))
		return sky_diag_set(d, SKY_EFORMAT, "%s: must be an object", what);
	int rc = sky_json_str(o, "id", b->id, sizeof b->id, what, d);
	if (rc)
		return rc;
	if (b->id[0])
		snprintf(what, sizeof what, "board %s", b->id);
	/* ranges here are only what a double can carry sanely; the meaning
	 * (positive, finite) is checked once, in sky_fleet_validate */
	const double big = 1e300;
	if ((rc = sky_json_num(o, "fwd_s", -big, big, &b->fwd_s, what, d)) ||
	    (rc = sky_json_num(o, "bwd_s", -big, big, &b->bwd_s, what, d)) ||
	    (rc = opt_num(o, "fwd_int8_s", -big, big, &b->fwd_int8_s, what, d)) ||
	    (rc = opt_num(o, "bwd_int8_s", -big, big, &b->bwd_int8_s, what, d)) ||
	    (rc = opt_num(o, "attn_share", -big, big, &b->attn_share, what, d)) ||
	    (rc = opt_num(o, "attn_share_int8", -big, big, &b->attn_share_int8, what, d)) ||
	    (rc = opt_num(o, "embed_int8_s", -big, big, &b->embed_int8_s, what, d)) ||
	    (rc = opt_num(o, "head_int8_s", -big, big, &b->head_int8_s, what, d)) ||
	    (rc = sky_json_i64(o, "mem_bytes", -SKY_JSON_INT_MAX, SKY_JSON_INT_MAX, &b->mem_bytes,
			       what, d)) ||
	    (rc = sky_json_num(o, "bw_Bps", -big, big, &b->bw_Bps, what, d)) ||
	    (rc = sky_json_num(o, "lat_s", -big, big, &b->lat_s, what, d)))
		return rc;
	if (cJSON_GetObjectItemCaseSensitive(o, "site")) {
		if ((rc = sky_json_str(o, "site", b->site, sizeof b->site, what, d)))
			return rc;
		sky_site_norm(b->site);
	}
	return 0;
}

static int parse_link(const cJSON *o, int i, sky_site_link *l, sky_diag *d)
{
	char what[32];
	const double big = 1e300;
	int rc;
	memset(l, 0, sizeof *l);
	snprintf(what, sizeof what, "link #%d", i);
	if (!cJSON_IsObject(o))
		return sky_diag_set(d, SKY_EFORMAT, "%s: must be an object", what);
	if ((rc = sky_json_str(o, "a", l->a, sizeof l->a, what, d)) ||
	    (rc = sky_json_str(o, "b", l->b, sizeof l->b, what, d)) ||
	    (rc = sky_json_num(o, "bw_Bps", -big, big, &l->bw_Bps, what, d)) ||
	    (rc = sky_json_num(o, "lat_s", -big, big, &l->lat_s, what, d)))
		return rc;
	if (!l->a[0] || !l->b[0])
		return sky_diag_set(d, SKY_EINVAL, "%s: a site name is empty (the core is \"core\")",
				    what);
	sky_site_norm(l->a);
	sky_site_norm(l->b);
	return 0;
}

static int parse_doc(const char *buf, size_t len, int links_only, sky_fleet *f, sky_diag *d);

int sky_fleet_parse(const char *buf, size_t len, sky_fleet *f, sky_diag *d)
{
	return parse_doc(buf, len, 0, f, d);
}

int sky_fleet_parse_links(const char *buf, size_t len, sky_fleet *f, sky_diag *d)
{
	return parse_doc(buf, len, 1, f, d);
}

static int parse_doc(const char *buf, size_t len, int links_only, sky_fleet *f, sky_diag *d)
{
	sky_fleet_init(f);
	if (len > SKY_FLEET_MAX_BYTES)
		return sky_diag_set(d, SKY_ERANGE, "fleet: %zu bytes, at most %u", len,
				    SKY_FLEET_MAX_BYTES);
	cJSON *doc = sky_json_parse(buf, len, d);
	if (!doc)
		return SKY_EFORMAT;
	int rc = 0;
	const cJSON *boards = cJSON_GetObjectItemCaseSensitive(doc, "boards");
	if (!cJSON_IsObject(doc) || (!links_only && !cJSON_IsArray(boards))) {
		rc = sky_diag_set(d, SKY_EFORMAT, "fleet: expected {\"boards\": [...]}");
		goto exit;
	}
	int n = links_only ? 0 : cJSON_GetArraySize(boards);
	if (!links_only && (n < 1 || n > SKY_PLAN_MAX_BOARDS)) {
		rc = sky_diag_set(d, SKY_ERANGE, "fleet: %d boards, allowed 1 to %d", n,
				  SKY_PLAN_MAX_BOARDS);
		goto exit;
	}
	int i = 0;
	const cJSON *o;
	for (o = links_only ? NULL : boards->child; o; o = o->next) {
		if ((rc = parse_board(o, i, &f->board[i], d)))
			goto exit;
		i++;
	}
	f->n = n;
	const cJSON *links = cJSON_GetObjectItemCaseSensitive(doc, "links");
	if (links) {
		int nl = cJSON_GetArraySize(links);
		if (!cJSON_IsArray(links)) {
			rc = sky_diag_set(d, SKY_EFORMAT, "fleet: 'links' must be an array");
			goto exit;
		}
		if (nl > SKY_PLAN_MAX_LINKS) {
			rc = sky_diag_set(d, SKY_ERANGE, "fleet: %d links, at most %d", nl,
					  SKY_PLAN_MAX_LINKS);
			goto exit;
		}
		i = 0;
		cJSON_ArrayForEach(o, links)
		{
			if ((rc = parse_link(o, i, &f->link[i], d)))
				goto exit;
			i++;
		}
		f->n_links = nl;
	}
	if (links_only) {
		/* the links' checks without boards: validate with one stand-in */
		f->n = 1;
		memset(&f->board[0], 0, sizeof f->board[0]);
		snprintf(f->board[0].id, sizeof f->board[0].id, "x");
		f->board[0].fwd_s = f->board[0].bwd_s = f->board[0].bw_Bps = 1;
		f->board[0].mem_bytes = 1;
		rc = sky_fleet_validate(f, d);
		f->n = 0;
	} else {
		rc = sky_fleet_validate(f, d);
	}
exit:
	if (rc)
		sky_fleet_init(f);
	sky_json_free(doc);
	return rc;
}

static int load_file(const char *path, int links_only, sky_fleet *f, sky_diag *d)
{
	sky_fleet_init(f);
	char *buf = malloc(SKY_FLEET_MAX_BYTES + 1);
	if (!buf)
		return sky_diag_set(d, SKY_ENOMEM, "fleet %s: no memory to read it", path);
	long n = sky_file_read(path, buf, SKY_FLEET_MAX_BYTES + 1);
	int rc;
	if (n == SKY_ENOTFOUND)
		rc = sky_diag_set(d, SKY_ENOTFOUND, "fleet %s: no such file", path);
	else if (n < 0)
		rc = sky_diag_set(d, SKY_EIO, "fleet %s: cannot read it", path);
	else if ((size_t)n > SKY_FLEET_MAX_BYTES)
		rc = sky_diag_set(d, SKY_ERANGE, "fleet %s: larger than %u bytes", path,
				  SKY_FLEET_MAX_BYTES);
	else
		rc = links_only ? sky_fleet_parse_links(buf, (size_t)n, f, d)
				: sky_fleet_parse(buf, (size_t)n, f, d);
	free(buf);
	return rc;
}

int sky_fleet_load(const char *path, sky_fleet *f, sky_diag *d)
{
	return load_file(path, 0, f, d);
}

int sky_fleet_load_links(const char *path, sky_fleet *f, sky_diag *d)
{
	return load_file(path, 1, f, d);
}

/* appends printf output at *at; returns 0 or SKY_ERANGE when it would not fit */
static int put(char *buf, size_t cap, size_t *at, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int put(char *buf, size_t cap, size_t *at, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf + *at, cap - *at, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= cap - *at)
		return SKY_ERANGE;
	*at += (size_t)n;
	return 0;
}

int sky_fleet_write(const sky_fleet *f, const char *what, char *buf, size_t cap)
{
	/* written by hand, not through cJSON: ids are validated (no quote or
	 * backslash) and numbers printed with %.17g round-trip exactly; a 1,024-
	 * board fleet would not fit the JSON pool's print buffer otherwise */
	size_t at = 0;
	if (cap == 0)
		return SKY_ERANGE;
	if (put(buf, cap, &at, "{"))
		return SKY_ERANGE;
	if (what) {
		if (put(buf, cap, &at, "\"what\":\""))
			return SKY_ERANGE;
		for (const char *s = what; *s; s++) {
			unsigned char ch = (unsigned char)*s;
			int rc = ch == '"' || ch == '\\' ? put(buf, cap, &at, "\\%c", ch)
				 : ch < ' '		 ? put(buf, cap, &at, "\\u%04x", ch)
							 : put(buf, cap, &at, "%c", ch);
			if (rc)
				return SKY_ERANGE;
		}
		if (put(buf, cap, &at, "\","))
			return SKY_ERANGE;
	}
	if (put(buf, cap, &at, "\"boards\":[\n"))
		return SKY_ERANGE;
	for (int i = 0; i < f->n; i++) {
		const sky_board *b = &f->board[i];
		if (put(buf, cap, &at, "{\"id\":\"%s\",\"fwd_s\":%.17g,\"bwd_s\":%.17g", b->id,
			b->fwd_s, b->bwd_s))
			return SKY_ERANGE;
		if (b->fwd_int8_s > 0 &&
		    put(buf, cap, &at, ",\"fwd_int8_s\":%.17g,\"bwd_int8_s\":%.17g", b->fwd_int8_s,
			b->bwd_int8_s))
			return SKY_ERANGE;
		if (b->attn_share > 0 && put(buf, cap, &at, ",\"attn_share\":%.17g", b->attn_share))
			return SKY_ERANGE;
		if (b->attn_share_int8 > 0 &&
		    put(buf, cap, &at, ",\"attn_share_int8\":%.17g", b->attn_share_int8))
			return SKY_ERANGE;
		if (b->embed_int8_s > 0 && put(buf, cap, &at, ",\"embed_int8_s\":%.17g", b->embed_int8_s))
			return SKY_ERANGE;
		if (b->head_int8_s > 0 && put(buf, cap, &at, ",\"head_int8_s\":%.17g", b->head_int8_s))
			return SKY_ERANGE;
		if (put(buf, cap, &at, ",\"mem_bytes\":%lld,\"bw_Bps\":%.17g,\"lat_s\":%.17g",
			(long long)b->mem_bytes, b->bw_Bps, b->lat_s))
			return SKY_ERANGE;
		/* site names are validated segments: no quote or backslash */
		if (b->site[0] && put(buf, cap, &at, ",\"site\":\"%s\"", b->site))
			return SKY_ERANGE;
		if (put(buf, cap, &at, "}%s\n", i + 1 < f->n ? "," : ""))
			return SKY_ERANGE;
	}
	if (put(buf, cap, &at, "]"))
		return SKY_ERANGE;
	if (f->n_links > 0 && put(buf, cap, &at, ",\"links\":[\n"))
		return SKY_ERANGE;
	for (int i = 0; i < f->n_links; i++) {
		const sky_site_link *l = &f->link[i];
		if (put(buf, cap, &at, "{\"a\":\"%s\",\"b\":\"%s\",\"bw_Bps\":%.17g,\"lat_s\":%.17g}%s\n",
			sky_site_name(l->a), sky_site_name(l->b), l->bw_Bps, l->lat_s,
			i + 1 < f->n_links ? "," : "]"))
			return SKY_ERANGE;
	}
	if (put(buf, cap, &at, "}\n"))
		return SKY_ERANGE;
	return (int)at;
}

