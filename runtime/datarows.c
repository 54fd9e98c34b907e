/* Rows of TSV, CSV and JSON Lines files (sky_datarows.h). */
#include "sky_datarows.h"

#include "sky_json.h"

#include <csv.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct field {
	const char *s;
	size_t len;
} field;

typedef struct reader {
	const sky_rows_opts *o;
	sky_row_fn fn;
	void *ctx;
	sky_rows_layout lay;
	sky_diag *d;
	int resolved;    /* the header (or first record) has set the columns */
	int json_array;  /* JSONL: the first row was an array (columns by index) */
	long records;    /* records seen, the header included */
	field *f;        /* (capf) the record being read */
	int nf, capf;
	char *store;     /* CSV: the record's bytes, copied from libcsv's buffer */
	size_t used, cap;
	int too_many;    /* the record has more than SKY_ROWS_MAX_COLS fields */
	int oom;
	long line;       /* where the record being read starts */
	long cur_line;   /* the line being fed to libcsv */
	int at_start;    /* CSV: between records */
	size_t end;      /* bytes consumed */
	int rc;          /* first non-zero: a callback's stop or an error */
	char why[320];
	char num[32];
} reader;

void sky_rows_opts_default(sky_rows_opts *o)
{
	memset(o, 0, sizeof *o);
	o->header = -1;
}

const char *sky_rows_format_name(sky_rows_format f)
{
	return f == SKY_ROWS_CSV ? "csv" : f == SKY_ROWS_JSONL ? "jsonl" : "tsv";
}

static int ends_with(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);
	return a >= b && strcmp(s + a - b, suf) == 0;
}

int sky_rows_format_of(const char *path, sky_rows_format *out)
{
	if (ends_with(path, ".tsv"))
		*out = SKY_ROWS_TSV;
	else if (ends_with(path, ".csv"))
		*out = SKY_ROWS_CSV;
	else if (ends_with(path, ".jsonl") || ends_with(path, ".json") || ends_with(path, ".ndjson"))
		*out = SKY_ROWS_JSONL;
	else
		return SKY_EINVAL;
	return 0;
}

/* A name for messages: at most cap - 1 bytes, controls as '?'. */
static void copy_name(char *dst, size_t cap, const char *s, size_t len)
{
	size_t n = len < cap - 1 ? len : cap - 1;
	for (size_t i = 0; i < n; i++)
		dst[i] = (unsigned char)s[i] < 0x20 ? '?' : s[i];
	dst[n] = '\0';
}

static int is_index(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return 0;
	return 1;
}

static int find_name(const field *f, int n, const char *name)
{
	size_t l = strlen(name);
	for (int i = 0; i < n; i++)
		if (f[i].len == l && memcmp(f[i].s, name, l) == 0)
			return i;
	return -1;
}

/* "a, b, c" of the header, for messages. */
static void list_names(const field *f, int n, char *buf, size_t cap)
{
	size_t at = 0;
	buf[0] = '\0';
	for (int i = 0; i < n && at + 8 < cap; i++) {
		char nm[SKY_ROWS_NAME_CAP];
		copy_name(nm, sizeof nm, f[i].s, f[i].len);
		int w = snprintf(buf + at, cap - at, "%s'%s'", i ? ", " : "", nm);
		if (w < 0 || (size_t)w >= cap - at) {
			snprintf(buf + (cap > 4 ? cap - 4 : 0), 4, "...");
			return;
		}
		at += (size_t)w;
	}
}

/* One column: spec (a name, an index, "" for none, NULL for the default
 * dflt, an index or -1) against the header names (NULL without a header). */
static int pick(reader *r, const char *what, const char *spec, int dflt, const field *names,
		int n, int *out, char *name_out)
{
	*out = -1;
	name_out[0] = '\0';
	if (spec && !*spec)
		return 0;
	if (!spec) {
		*out = dflt;
	} else if (is_index(spec)) {
		long v = strtol(spec, NULL, 10);
		if (v >= n)
			return sky_diag_set(r->d, SKY_ERANGE,
					    "%s column %ld: the file has %d column%s (indices from 0)",
					    what, v, n, n == 1 ? "" : "s");
		*out = (int)v;
	} else if (!names) {
		return sky_diag_set(r->d, SKY_EINVAL,
				    "%s column '%s': the file has no header, name columns by index",
				    what, spec);
	} else {
		*out = find_name(names, n, spec);
		if (*out < 0) {
			char list[200];
			list_names(names, n, list, sizeof list);
			return sky_diag_set(r->d, SKY_ENOTFOUND,
					    "%s column '%s' is not in the header (%s)", what, spec, list);
		}
	}
	if (*out >= 0) {
		if (names)
			copy_name(name_out, SKY_ROWS_NAME_CAP, names[*out].s, names[*out].len);
		else
			snprintf(name_out, SKY_ROWS_NAME_CAP, "%d", *out);
	}
	return 0;
}

/* GLUE's layouts by their header names; sets the default columns. */
static const char *layout_of(const field *h, int n, int *t, int *p, int *l)
{
	int s = find_name(h, n, "sentence"), s1 = find_name(h, n, "sentence1"),
	    s2 = find_name(h, n, "sentence2"), q = find_name(h, n, "question"),
	    lab = find_name(h, n, "label"), gold = find_name(h, n, "gold_label"),
	    m1 = find_name(h, n, "#1 String"), m2 = find_name(h, n, "#2 String"),
	    mq = find_name(h, n, "Quality");
	*t = *p = *l = -1;
	if (m1 >= 0 && m2 >= 0 && mq >= 0) {
		*t = m1, *p = m2, *l = mq;
		return "mrpc";
	}
	if (s1 >= 0 && s2 >= 0 && gold >= 0) {
		*t = s1, *p = s2, *l = gold;
		return "mnli";
	}
	if (q >= 0 && s >= 0 && lab >= 0) {
		*t = q, *p = s, *l = lab;
		return "qnli";
	}
	if (s1 >= 0 && s2 >= 0 && lab >= 0) {
		*t = s1, *p = s2, *l = lab;
		return "rte";
	}
	if (s >= 0 && lab >= 0) {
		*t = s, *l = lab;
		return "sst2";
	}
	*t = find_name(h, n, "text");
	if (*t < 0)
		*t = s;
	*p = *t >= 0 ? find_name(h, n, "text_pair") : -1;
	*l = lab;
	return "columns";
}

/* CoLA's shape: 4 fields, the second 0 or 1. */
static int cola_shape(const field *f, int n)
{
	return n == 4 && f[1].len == 1 && (f[1].s[0] == '0' || f[1].s[0] == '1');
}

/* Sets the columns from the first record (names: the header's fields, or
 * NULL when there is none, n the record's field count). */
static int resolve(reader *r, const field *names, int n)
{
	sky_rows_layout *L = &r->lay;
	int t = -1, p = -1, l = -1;
	if (names) {
		L->name = layout_of(names, n, &t, &p, &l);
	} else if (n == 4) {
		L->name = "cola";
		t = 3, l = 1;
	} else {
		L->name = "columns";
		if (n == 2)
			t = 0, l = 1;
	}
	L->ncols = n;
	int rc = pick(r, "text", r->o->text_col, t, names, n, &L->text_i, L->text);
	if (!rc)
		rc = pick(r, "pair", r->o->pair_col, p, names, n, &L->pair_i, L->pair);
	if (!rc)
		rc = pick(r, "label", r->o->label_col, l, names, n, &L->label_i, L->label);
	if (rc)
		return rc;
	if (L->text_i < 0)
		return sky_diag_set(r->d, SKY_ENOTFOUND,
				    "no text column: the %s does not name one (give --text-col)",
				    names ? "header" : "file, which has no header,");
	if (r->o->text_col || r->o->pair_col || r->o->label_col)
		if (strcmp(L->name, "columns") != 0 &&
		    (L->text_i != t || L->pair_i != p || L->label_i != l))
			L->name = "columns";
	r->resolved = 1;
	return 0;
}

static int emit(reader *r, sky_row *row)
{
	row->line = r->line;
	row->end = r->end;
	int rc = r->fn(r->ctx, row);
	if (rc && !r->rc)
		r->rc = rc;
	return rc;
}

static int emit_bad(reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int emit_bad(reader *r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->why, sizeof r->why, fmt, ap);
	va_end(ap);
	sky_row row = {0};
	row.bad = r->why;
	return emit(r, &row);
}

/* A whole TSV or CSV record in r->f[0..nf). */
static int record(reader *r)
{
	if (r->rc)
		return r->rc;
	r->records++;
	if (r->too_many)
		return emit_bad(r, "more than %d columns", SKY_ROWS_MAX_COLS);
	if (!r->resolved) {
		int header = r->o->header;
		if (header < 0)
			header = !cola_shape(r->f, r->nf);
		r->lay.header = header;
		int rc = resolve(r, header ? r->f : NULL, r->nf);
		if (rc) {
			r->rc = rc;
			return rc;
		}
		if (header)
			return 0;
	}
	if (r->nf != r->lay.ncols)
		return emit_bad(r, "%d column%s, expected %d (as %s)", r->nf, r->nf == 1 ? "" : "s",
				r->lay.ncols, r->lay.header ? "the header" : "line 1");
	sky_row row = {0};
	row.text = r->f[r->lay.text_i].s;
	row.text_len = r->f[r->lay.text_i].len;
	if (r->lay.pair_i >= 0) {
		row.pair = r->f[r->lay.pair_i].s;
		row.pair_len = r->f[r->lay.pair_i].len;
	}
	if (r->lay.label_i >= 0) {
		row.label = r->f[r->lay.label_i].s;
		row.label_len = r->f[r->lay.label_i].len;
	}
	return emit(r, &row);
}

static int add_field(reader *r, const char *s, size_t len)
{
	if (r->nf >= SKY_ROWS_MAX_COLS) {
		r->too_many = 1;
		return 0;
	}
	if (r->nf == r->capf) {
		int nc = r->capf ? 2 * r->capf : 16;
		field *nf = realloc(r->f, (size_t)nc * sizeof *nf);
		if (!nf) {
			r->oom = 1;
			return SKY_ENOMEM;
		}
		r->f = nf;
		r->capf = nc;
	}
	r->f[r->nf].s = s;
	r->f[r->nf].len = len;
	r->nf++;
	return 0;
}

/* A line without its end ("\n", "\r\n"). */
static size_t line_len(const char *s, size_t n, size_t *next)
{
	const char *nl = memchr(s, '\n', n);
	size_t l = nl ? (size_t)(nl - s) : n;
	*next = nl ? l + 1 : n;
	if (l && s[l - 1] == '\r')
		l--;
	return l;
}

static int read_tsv(reader *r, const char *buf, size_t len)
{
	long line = 0;
	for (size_t at = 0; at < len && !r->rc;) {
		size_t next, l = line_len(buf + at, len - at, &next);
		const char *s = buf + at;
		line++;
		at += next;
		if (l == 0)
			continue;
		r->line = line;
		r->end = at;
		r->nf = 0;
		r->too_many = 0;
		for (size_t b = 0;;) {
			const char *tab = memchr(s + b, '\t', l - b);
			size_t e = tab ? (size_t)(tab - s) : l;
			if (add_field(r, s + b, e - b))
				return SKY_ENOMEM;
			if (!tab)
				break;
			b = e + 1;
		}
		record(r);
	}
	return r->rc;
}

/* libcsv's callbacks: a field (copied: libcsv reuses its buffer) and a
 * record's end. */
static void csv_field(void *s, size_t len, void *ctx)
{
	reader *r = ctx;
	if (r->oom || r->rc)
		return;
	if (r->at_start) {
		/* a record that started within the line fed (after a bare CR) */
		r->line = r->cur_line;
		r->at_start = 0;
	}
	if (r->used + len + 1 > SKY_ROWS_MAX_RECORD) {
		r->used = SKY_ROWS_MAX_RECORD + 1;
		return;
	}
	if (r->used + len + 1 > r->cap) {
		size_t nc = r->cap ? r->cap : 4096;
		while (nc < r->used + len + 1)
			nc *= 2;
		char *ns = realloc(r->store, nc);
		if (!ns) {
			r->oom = 1;
			return;
		}
		r->store = ns;
		r->cap = nc;
	}
	memcpy(r->store + r->used, s ? s : "", len);
	/* offsets for now: the store may move as the record grows */
	if (add_field(r, (const char *)(uintptr_t)r->used, len) == 0)
		r->used += len;
}

static void csv_record(int c, void *ctx)
{
	reader *r = ctx;
	(void)c;
	if (!r->oom && !r->rc) {
		if (r->used > SKY_ROWS_MAX_RECORD) {
			r->records++;
			emit_bad(r, "record over %u MiB", SKY_ROWS_MAX_RECORD >> 20);
		} else {
			for (int i = 0; i < r->nf; i++)
				r->f[i].s = r->store + (uintptr_t)r->f[i].s;
			record(r);
		}
	}
	r->nf = 0;
	r->used = 0;
	r->too_many = 0;
	r->at_start = 1;
}

/* Spaces are part of a field (RFC 4180 §2.4): no trimming. */
static int csv_no_space(unsigned char c)
{
	(void)c;
	return 0;
}

static int csv_start(struct csv_parser *p)
{
	if (csv_init(p, CSV_STRICT | CSV_STRICT_FINI) != 0)
		return SKY_ENOMEM;
	csv_set_space_func(p, csv_no_space);
	return 0;
}

static int read_csv(reader *r, const char *buf, size_t len)
{
	struct csv_parser p;
	if (csv_start(&p))
		return SKY_ENOMEM;
	r->at_start = 1;
	long line = 0;
	for (size_t at = 0; at < len && !r->rc && !r->oom;) {
		size_t next;
		size_t l = line_len(buf + at, len - at, &next);
		const char *s = buf + at;
		line++;
		at += next;
		if (r->at_start && l == 0)
			continue; /* a blank line between records */
		if (r->at_start) {
			r->line = line;
			r->at_start = 0;
		}
		r->cur_line = line;
		r->end = at;
		if (csv_parse(&p, s, next, csv_field, csv_record, r) != next) {
			long from = r->line;
			csv_free(&p);
			if (csv_start(&p))
				return SKY_ENOMEM;
			r->nf = 0;
			r->used = 0;
			r->too_many = 0;
			r->at_start = 1;
			r->records++;
			r->line = from;
			char where[48] = "";
			if (line != from)
				snprintf(where, sizeof where, " on line %ld", line);
			emit_bad(r,
				 "malformed CSV quoting%s (a quote inside an unquoted field, or text "
				 "after a closing quote)",
				 where);
		}
	}
	if (!r->rc && !r->oom && csv_fini(&p, csv_field, csv_record, r) != 0 && !r->rc) {
		r->records++;
		emit_bad(r, "a quoted field opened on line %ld is never closed", r->line);
	}
	csv_free(&p);
	if (r->oom && !r->rc)
		r->rc = sky_diag_set(r->d, SKY_ENOMEM, "out of memory reading CSV");
	return r->rc;
}

/* JSONL: the first object's keys (or array length) set the columns. */
static int resolve_json(reader *r, const cJSON *doc)
{
	int n = 0;
	field names[SKY_ROWS_MAX_COLS > 256 ? 256 : SKY_ROWS_MAX_COLS];
	r->lay.header = 0;
	if (cJSON_IsArray(doc)) {
		r->json_array = 1;
		n = cJSON_GetArraySize(doc);
		int rc = resolve(r, NULL, n);
		r->lay.ncols = n;
		return rc;
	}
	for (const cJSON *c = doc->child; c && n < 256; c = c->next)
		if (c->string) {
			names[n].s = c->string;
			names[n].len = strlen(c->string);
			n++;
		}
	int rc = resolve(r, names, n);
	r->lay.ncols = 0;
	r->lay.text_i = r->lay.pair_i = r->lay.label_i = -1; /* by name from here on */
	return rc;
}

static const cJSON *json_get(const reader *r, const cJSON *doc, const char *name, int index)
{
	if (r->json_array)
		return cJSON_GetArrayItem(doc, index);
	return cJSON_GetObjectItemCaseSensitive(doc, name);
}

static int json_row(reader *r, const cJSON *doc)
{
	if (!cJSON_IsObject(doc) && !cJSON_IsArray(doc))
		return emit_bad(r, "not a JSON object");
	if (!r->resolved) {
		int rc = resolve_json(r, doc);
		if (rc) {
			r->rc = rc;
			return rc;
		}
		if (r->json_array)
			r->lay.ncols = cJSON_GetArraySize(doc);
	}
	if (r->json_array != cJSON_IsArray(doc))
		return emit_bad(r, "a JSON %s, but line 1 held an %s",
				r->json_array ? "object" : "array", r->json_array ? "array" : "object");
	if (r->json_array && cJSON_GetArraySize(doc) != r->lay.ncols)
		return emit_bad(r, "%d values, expected %d (as line 1)", cJSON_GetArraySize(doc),
				r->lay.ncols);
	sky_row row = {0};
	const char *want[3] = {r->lay.text, r->lay.pair, r->lay.label};
	int wi[3] = {atoi(r->lay.text), atoi(r->lay.pair), atoi(r->lay.label)};
	for (int k = 0; k < 3; k++) {
		if (!want[k][0])
			continue;
		const cJSON *v = json_get(r, doc, want[k], wi[k]);
		const char *what = k == 0 ? "text" : k == 1 ? "pair" : "label";
		if (!v)
			return emit_bad(r, "no %s field '%s'", what, want[k]);
		if (cJSON_IsString(v)) {
			const char *s = v->valuestring;
			size_t l = strlen(s);
			if (k == 0)
				row.text = s, row.text_len = l;
			else if (k == 1)
				row.pair = s, row.pair_len = l;
			else
				row.label = s, row.label_len = l;
		} else if (k == 2 && cJSON_IsNumber(v)) {
			double x = v->valuedouble;
			if (!(x >= -1e15 && x <= 1e15) || x != (double)(long long)x)
				return emit_bad(r, "label %g in field '%s' is not a whole number", x,
						want[k]);
			snprintf(r->num, sizeof r->num, "%lld", (long long)x);
			row.label = r->num;
			row.label_len = strlen(r->num);
			row.label_number = 1;
		} else {
			return emit_bad(r, "%s field '%s' is not a string%s", what, want[k],
					k == 2 ? " or a number" : "");
		}
	}
	return emit(r, &row);
}

static int read_jsonl(reader *r, const char *buf, size_t len)
{
	long line = 0;
	for (size_t at = 0; at < len && !r->rc;) {
		size_t next, l = line_len(buf + at, len - at, &next);
		const char *s = buf + at;
		line++;
		at += next;
		size_t b = 0;
		while (b < l && (s[b] == ' ' || s[b] == '\t'))
			b++;
		if (b == l)
			continue;
		r->line = line;
		r->end = at;
		r->records++;
		if (l > SKY_ROWS_MAX_RECORD) {
			emit_bad(r, "line over %u MiB", SKY_ROWS_MAX_RECORD >> 20);
			continue;
		}
		sky_diag jd;
		sky_diag_clear(&jd);
		cJSON *doc = sky_json_parse(s, l, &jd);
		if (!doc) {
			emit_bad(r, "not JSON (%s)", jd.msg);
			continue;
		}
		json_row(r, doc);
		sky_json_free(doc);
	}
	return r->rc;
}

int sky_rows_read(const char *buf, size_t len, const sky_rows_opts *o, sky_row_fn fn, void *ctx,
		  sky_rows_layout *layout, sky_diag *d)
{
	reader r;
	memset(&r, 0, sizeof r);
	r.o = o;
	r.fn = fn;
	r.ctx = ctx;
	r.d = d;
	r.lay.name = "columns";
	r.lay.text_i = r.lay.pair_i = r.lay.label_i = -1;
	if (len >= 3 && memcmp(buf, "\xef\xbb\xbf", 3) == 0) {
		buf += 3;
		len -= 3;
	}
	int rc;
	if (o->format == SKY_ROWS_CSV)
		rc = read_csv(&r, buf, len);
	else if (o->format == SKY_ROWS_JSONL)
		rc = read_jsonl(&r, buf, len);
	else
		rc = read_tsv(&r, buf, len);
	if (!rc && r.oom)
		rc = sky_diag_set(d, SKY_ENOMEM, "out of memory reading rows");
	if (!rc && r.records == 0)
		rc = sky_diag_set(d, SKY_EFORMAT, "no rows: the file is empty");
	if (layout)
		*layout = r.lay;
	free(r.f);
	free(r.store);
	return rc;
}
