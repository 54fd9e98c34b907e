/* Preparing a data set (sky_dataprep.h). */
#include "sky_dataprep.h"

#include "sky_chunk.h"
#include "sky_file.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#define PROGRESS_EVERY 8192 /* rows between progress calls */

enum { L_MAP, L_COLLECT, L_INTEGER, L_DATA };

typedef struct prep {
	const sky_tokenizer *t;
	const sky_prep_opts *o;
	sky_ds_build *b;
	sky_prep_result *res;
	sky_diag *d;
	size_t total;
	int mode;           /* L_*: how labels become ids */
	long int_line;      /* L_INTEGER: the line that decided it */
	int max_int;        /* L_INTEGER: the largest label seen */
	int64_t records;
	char why[320];
} prep;

void sky_prep_opts_default(sky_prep_opts *o)
{
	memset(o, 0, sizeof *o);
	sky_rows_opts_default(&o->rows);
	o->seq = SKY_HF_DEFAULT_SEQ;
}

/* 1 if s[0..n) is UTF-8 (NUL allowed: the tokenizer drops it). */
static int utf8_ok(const char *s, size_t n, size_t *bad)
{
	for (size_t i = 0; i < n;) {
		if ((unsigned char)s[i] < 0x80) {
			i++;
			continue;
		}
		utf8proc_int32_t c;
		utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i,
						      (utf8proc_ssize_t)(n - i), &c);
		if (k < 0) {
			*bad = i;
			return 0;
		}
		i += (size_t)k;
	}
	return 1;
}

/* A plain decimal integer 0..max (no sign, no spaces): its value, or -1. */
static long as_int(const char *s, size_t n, long max)
{
	if (n == 0 || n > 9)
		return -1;
	long v = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v <= max ? v : -1;
}

static int find_label(const sky_ds_meta *m, const char *s, size_t n)
{
	for (int i = 0; i < m->nlabels; i++)
		if (strlen(m->label[i]) == n && memcmp(m->label[i], s, n) == 0)
			return i;
	return -1;
}

static void short_text(char *dst, size_t cap, const char *s, size_t n)
{
	size_t k = n < cap - 4 ? n : cap - 4;
	for (size_t i = 0; i < k; i++)
		dst[i] = (unsigned char)s[i] < 0x20 ? '?' : s[i];
	strcpy(dst + k, n > k ? "..." : "");
}

static int bad(prep *p, long line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(prep *p, long line, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(p->why, sizeof p->why, fmt, ap);
	va_end(ap);
	p->res->bad++;
	if (p->o->on_bad)
		p->o->on_bad(p->o->ctx, line, p->why);
	return 0;
}

/* The label's id, or -1 with the row reported bad. */
static int label_id(prep *p, const sky_row *r)
{
	sky_ds_meta *m = &p->b->meta;
	const char *s = r->label;
	size_t n = r->label_len;
	char shown[48];
	short_text(shown, sizeof shown, s, n);
	size_t at;
	if (n == 0)
		return bad(p, r->line, "empty label"), -1;
	if (!utf8_ok(s, n, &at))
		return bad(p, r->line, "label: invalid UTF-8 at byte %zu (0x%02x)", at,
			   (unsigned char)s[at]),
		       -1;
	if (p->mode == L_COLLECT) {
		if (as_int(s, n, SKY_DS_MAX_LABELS - 1) >= 0) {
			p->mode = L_INTEGER;
			p->int_line = r->line;
			snprintf(m->label_source, sizeof m->label_source, "integer");
		} else {
			p->mode = L_DATA;
			snprintf(m->label_source, sizeof m->label_source, "data");
		}
	}
	if (p->mode == L_MAP) {
		int id = find_label(m, s, n);
		if (id < 0)
			id = (int)as_int(s, n, m->nlabels - 1);
		if (id < 0) {
			char list[160] = "";
			for (int i = 0, at2 = 0; i < m->nlabels && at2 < (int)sizeof list - 8; i++)
				at2 += snprintf(list + at2, sizeof list - (size_t)at2, "%s%s",
						i ? ", " : "", m->label[i]);
			return bad(p, r->line, "unknown label '%s' (labels: %s)", shown, list), -1;
		}
		return id;
	}
	if (p->mode == L_INTEGER) {
		long v = as_int(s, n, SKY_DS_MAX_LABELS - 1);
		if (v < 0)
			return bad(p, r->line,
				   "label '%s' is not an integer 0..%d (this file's labels are "
				   "integers, as on line %ld)",
				   shown, SKY_DS_MAX_LABELS - 1, p->int_line),
			       -1;
		if (v > p->max_int)
			p->max_int = (int)v;
		return (int)v;
	}
	int id = find_label(m, s, n);
	if (id >= 0)
		return id;
	if (n >= SKY_DS_LABEL_CAP)
		return bad(p, r->line, "label '%s' is over %d bytes", shown, SKY_DS_LABEL_CAP - 1), -1;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return bad(p, r->line, "label '%s' holds a control character (0x%02x)", shown,
				   (unsigned char)s[i]),
			       -1;
	if (m->nlabels >= SKY_DS_MAX_LABELS)
		return bad(p, r->line, "label '%s' would be label %d: at most %d", shown,
			   SKY_DS_MAX_LABELS + 1, SKY_DS_MAX_LABELS),
		       -1;
	memcpy(m->label[m->nlabels], s, n);
	m->label[m->nlabels][n] = '\0';
	return m->nlabels++;
}

static int on_row(void *ctx, const sky_row *r)
{
	prep *p = ctx;
	p->records++;
	if (p->o->on_progress && p->records % PROGRESS_EVERY == 0)
		p->o->on_progress(p->o->ctx, r->end, p->total, p->b->meta.rows);
	if (r->bad)
		return bad(p, r->line, "%s", r->bad);
	if (!r->label)
		return sky_diag_set(p->d, SKY_ENOTFOUND,
				    "no label column: the file does not name one (give --label-col)");
	int32_t *ids, *types, *mask;
	int rc = sky_ds_build_next(p->b, &ids, &types, &mask);
	if (rc)
		return sky_diag_set(p->d, rc, "cannot hold row %lld", (long long)p->b->meta.rows + 1);
	sky_tok_enc e = {ids, types, mask, p->b->meta.seq, 1, 0, 0, 0};
	sky_diag td;
	sky_diag_clear(&td);
	rc = sky_tok_encode(p->t, r->text, r->text_len, r->pair, r->pair_len, &e, &td);
	if (rc)
		return bad(p, r->line, "%s", td.msg);
	if (e.n_a == 0)
		return bad(p, r->line, "empty text");
	if (r->pair && e.n_b == 0)
		return bad(p, r->line, "empty pair text");
	int id = label_id(p, r);
	if (id < 0)
		return 0;
	if (e.n_a + e.n_b + (r->pair ? 3 : 2) > p->b->meta.seq)
		p->res->truncated++;
	sky_ds_build_commit(p->b, id);
	return 0;
}

static int generic_labels(const sky_hf_config *hc)
{
	for (int i = 0; i < hc->num_labels; i++) {
		char want[24];
		snprintf(want, sizeof want, "LABEL_%d", i);
		if (strcmp(hc->label[i], want) != 0)
			return 0;
	}
	return 1;
}

static int set_labels(prep *p, const sky_hf_config *hc, sky_diag *d)
{
	sky_ds_meta *m = &p->b->meta;
	const sky_prep_opts *o = p->o;
	if (o->labels) {
		if (o->nlabels < 1 || o->nlabels > SKY_DS_MAX_LABELS)
			return sky_diag_set(d, SKY_EINVAL, "%d labels given (1 to %d)", o->nlabels,
					    SKY_DS_MAX_LABELS);
		for (int i = 0; i < o->nlabels; i++) {
			size_t n = strlen(o->labels[i]), at;
			if (n == 0 || n >= SKY_DS_LABEL_CAP || !utf8_ok(o->labels[i], n, &at))
				return sky_diag_set(d, SKY_EINVAL,
						    "label %d given: not 1 to %d bytes of UTF-8", i,
						    SKY_DS_LABEL_CAP - 1);
			if (find_label(m, o->labels[i], n) >= 0)
				return sky_diag_set(d, SKY_EINVAL, "label '%s' given twice",
						    o->labels[i]);
			strcpy(m->label[m->nlabels++], o->labels[i]);
		}
		snprintf(m->label_source, sizeof m->label_source, "given");
		p->mode = L_MAP;
	} else if (hc && hc->has_labels && !generic_labels(hc)) {
		for (int i = 0; i < hc->num_labels && i < SKY_DS_MAX_LABELS; i++)
			snprintf(m->label[m->nlabels++], SKY_DS_LABEL_CAP, "%s", hc->label[i]);
		snprintf(m->label_source, sizeof m->label_source, "model");
		p->mode = L_MAP;
	} else {
		p->mode = L_COLLECT;
	}
	return 0;
}

int sky_prep_buf(const sky_tokenizer *t, const sky_hf_config *hc, const char *buf, size_t len,
		 const sky_prep_opts *o, sky_ds_build *b, sky_prep_result *res, sky_diag *d)
{
	sky_prep_result dummy;
	if (!res)
		res = &dummy;
	memset(res, 0, sizeof *res);
	sky_ds_build_init(b, o->seq);
	if (o->seq < 3 || o->seq > SKY_DS_MAX_SEQ)
		return sky_diag_set(d, SKY_ERANGE, "--seq %d: 3 to %d", o->seq, SKY_DS_MAX_SEQ);
	if (hc && o->seq > hc->cfg.max_pos)
		return sky_diag_set(d, SKY_ERANGE,
				    "--seq %d is over the model's max_position_embeddings %d", o->seq,
				    hc->cfg.max_pos);
	if (hc && t->n > (uint32_t)hc->cfg.vocab)
		return sky_diag_set(d, SKY_ERANGE,
				    "the tokenizer has %u tokens but the model's vocab_size is %d",
				    t->n, hc->cfg.vocab);
	prep p = {.t = t, .o = o, .b = b, .res = res, .d = d, .total = len};
	int rc = set_labels(&p, hc, d);
	if (!rc)
		rc = sky_rows_read(buf, len, &o->rows, on_row, &p, &res->layout, d);
	if (!rc && p.mode == L_INTEGER) {
		b->meta.nlabels = p.max_int + 1;
		for (int i = 0; i <= p.max_int; i++)
			snprintf(b->meta.label[i], SKY_DS_LABEL_CAP, "%d", i);
	}
	res->rows = b->meta.rows;
	b->meta.skipped = res->bad;
	b->meta.truncated = res->truncated;
	b->meta.tokenizer_hash = t->hash;
	if (!rc && res->bad && !o->skip_bad)
		rc = sky_diag_set(d, SKY_EFORMAT, "%lld bad row%s (--skip-bad skips them)",
				  (long long)res->bad, res->bad == 1 ? "" : "s");
	if (!rc && b->meta.rows == 0)
		rc = sky_diag_set(d, SKY_EFORMAT, "no rows%s", res->bad ? " left: every row is bad" : "");
	if (rc)
		sky_ds_build_free(b);
	return rc;
}

int sky_prep_file(const sky_tokenizer *t, const sky_hf_config *hc, const char *in_path,
		  const char *out_path, const sky_prep_opts *o, sky_prep_result *res, sky_diag *d)
{
	sky_file_map map = {0};
	sky_ds_build b;
	sky_ds_build_init(&b, o->seq);
	int rc = sky_file_map_open(&map, in_path);
	if (rc)
		return sky_diag_set(d, rc, "%.200s: %s", in_path,
				    rc == SKY_ENOTFOUND ? "no such file" : "cannot read it");
	rc = sky_prep_buf(t, hc, (const char *)map.data, map.size, o, &b, res, d);
	if (rc)
		goto exit;
	unsigned char sha[32];
	sky_sha256(map.data, map.size, sha);
	sky_sha256_hex(sha, b.meta.source_sha256);
	const char *base = strrchr(in_path, '/');
	snprintf(b.meta.source, sizeof b.meta.source, "%s", base ? base + 1 : in_path);
	rc = sky_ds_write(out_path, &b, d);
exit:
	sky_ds_build_free(&b);
	sky_file_map_close(&map);
	return rc;
}
