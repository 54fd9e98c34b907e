/* sky bench data: rows per second of sky data prepare (sky_prep_file: map
 * the input, SHA-256 it, read the rows, tokenize, label, write the .skyds
 * file) on real text: the lines of the fortunes collections, each labelled
 * by its collection, repeated to --rows rows, as TSV, CSV (every field
 * quoted) and JSON Lines, in one run. */
#include "bench_util.h"
#include "sky_cli.h"
#include "sky_dataprep.h"
#include "sky_err.h"
#include "sky_file.h"
#include "sky_json.h"
#include "sky_tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FORTUNES "/usr/share/games/fortunes"
#define DEFAULT_DIR "tests/data/tokenizer/uncased"
#define MAX_NAMES 256

static void usage(FILE *to)
{
	fprintf(to,
		"usage: sky bench data [--model-dir DIR] [--rows N] [--seq S] [common options]\n"
		"Prepares N rows of fortunes (one line a row, labelled by its collection) as\n"
		"TSV, CSV and JSON Lines with sky data prepare's code, end to end (read,\n"
		"SHA-256, tokenize, label, write), and reports rows per second for each.\n"
		"  --model-dir DIR  the tokenizer (default %s)\n"
		"  --rows N         rows (default 100000)\n"
		"  --seq S          tokens per row (default 128)\n"
		"common options (defaults here: --warmup 1 --runs 3):\n%s",
		DEFAULT_DIR, sky_bench_common_help());
}

typedef struct names {
	char name[MAX_NAMES][128];
	int n;
} names;

static int add_name(void *ctx, const char *name)
{
	names *ns = ctx;
	size_t l = strlen(name);
	if (ns->n >= MAX_NAMES || l >= sizeof ns->name[0] || strchr(name, '.'))
		return 0;
	memcpy(ns->name[ns->n++], name, l + 1);
	return 0;
}

static int cmp_name(const void *a, const void *b) { return strcmp(a, b); }

/* A growing text buffer. */
typedef struct text {
	char *s;
	size_t n, cap;
	int oom;
} text;

static void put(text *t, const char *s, size_t n)
{
	if (t->oom)
		return;
	if (t->n + n > t->cap) {
		size_t nc = t->cap ? t->cap : 1 << 20;
		while (nc < t->n + n)
			nc *= 2;
		char *ns = realloc(t->s, nc);
		if (!ns) {
			t->oom = 1;
			return;
		}
		t->s = ns;
		t->cap = nc;
	}
	memcpy(t->s + t->n, s, n);
	t->n += n;
}

static void puts_(text *t, const char *s) { put(t, s, strlen(s)); }

/* One row in each format. */
static void add_row(text *f, int fmt, const char *s, size_t n, const char *label)
{
	if (fmt == SKY_ROWS_TSV) {
		put(f, s, n);
		puts_(f, "\t");
		puts_(f, label);
		puts_(f, "\n");
	} else if (fmt == SKY_ROWS_CSV) {
		puts_(f, "\"");
		for (size_t i = 0; i < n; i++) {
			put(f, s + i, 1);
			if (s[i] == '"')
				put(f, "\"", 1); /* a quote inside is doubled */
		}
		puts_(f, "\",");
		puts_(f, label);
		puts_(f, "\n");
	} else {
		puts_(f, "{\"text\":\"");
		for (size_t i = 0; i < n; i++) {
			unsigned char c = (unsigned char)s[i];
			char esc[8];
			if (c == '"' || c == '\\') {
				esc[0] = '\\', esc[1] = (char)c;
				put(f, esc, 2);
			} else if (c < 0x20) {
				snprintf(esc, sizeof esc, "\\u%04x", c);
				put(f, esc, 6);
			} else {
				put(f, s + i, 1);
			}
		}
		puts_(f, "\",\"label\":\"");
		puts_(f, label);
		puts_(f, "\"}\n");
	}
}

/* The three inputs: rows lines of the fortunes, cycled. Returns 0 or 1
 * (why printed). */
static int make_inputs(long rows, text out[3])
{
	static names ns;
	ns.n = 0;
	if (sky_file_list(FORTUNES, "", add_name, &ns) != 0 || ns.n == 0) {
		fprintf(stderr, "sky bench data: no fortunes in " FORTUNES " (apt-get install fortunes)\n");
		return 1;
	}
	qsort(ns.name, (size_t)ns.n, sizeof ns.name[0], cmp_name);
	puts_(&out[SKY_ROWS_TSV], "sentence\tlabel\n");
	puts_(&out[SKY_ROWS_CSV], "text,label\n");
	long made = 0;
	char path[512];
	while (made < rows) {
		long before = made;
		for (int i = 0; i < ns.n && made < rows; i++) {
			snprintf(path, sizeof path, FORTUNES "/%s", ns.name[i]);
			sky_file_map m = {0};
			if (sky_file_map_open(&m, path) != 0)
				continue;
			const char *s = (const char *)m.data;
			for (size_t at = 0; at < m.size && made < rows;) {
				const char *nl = memchr(s + at, '\n', m.size - at);
				size_t e = nl ? (size_t)(nl - s) : m.size, l = e - at;
				/* lines of words: not "%", no tabs, no overstrikes */
				if (l >= 8 && !memchr(s + at, '\t', l) && !memchr(s + at, '\b', l) &&
				    !memchr(s + at, '\r', l)) {
					for (int f = 0; f < 3; f++)
						add_row(&out[f], f, s + at, l, ns.name[i]);
					made++;
				}
				at = e + 1;
			}
			sky_file_map_close(&m);
		}
		if (made == before)
			break;
	}
	for (int f = 0; f < 3; f++)
		if (out[f].oom) {
			fprintf(stderr, "sky bench data: out of memory building the input\n");
			return 1;
		}
	if (made < rows) {
		fprintf(stderr, "sky bench data: no usable lines in " FORTUNES "\n");
		return 1;
	}
	return 0;
}

typedef struct run_ctx {
	const sky_tokenizer *t;
	const char *in, *out;
	sky_prep_opts o;
	sky_prep_result res;
	int rc;
	char why[256];
} run_ctx;

/* ~all of a run is sky_tok_encode and the file write. */
static int run(void *p)
{
	run_ctx *c = p;
	sky_diag d;
	sky_diag_clear(&d);
	c->rc = sky_prep_file(c->t, NULL, c->in, c->out, &c->o, &c->res, &d);
	if (c->rc)
		snprintf(c->why, sizeof c->why, "%s", d.msg);
	return c->rc ? 1 : 0;
}

int sky_bench_data(int argc, char **argv)
{
	sky_bench_opts bo;
	sky_bench_opts_default(&bo);
	bo.warmup = 1;
	bo.runs = 3;
	const char *dir = DEFAULT_DIR;
	long rows = 100000, seq = 128;
	enum { O_DIR = SKY_BENCH_OPT_OWN, O_ROWS, O_SEQ };
	static const struct option k_opts[] = {{"model-dir", required_argument, NULL, O_DIR},
					       {"rows", required_argument, NULL, O_ROWS},
					       {"seq", required_argument, NULL, O_SEQ},
					       SKY_BENCH_OPT_TABLE,
					       SKY_OPT_STD,
					       {0}};
	sky_opt op;
	sky_opt_begin(&op, "sky bench data", argc, argv, k_opts, 0);
	for (int c; (c = sky_opt_next(&op)) != SKY_OPT_END;) {
		int orc = sky_bench_opt("bench data", c, op.name, op.arg, &bo);
		if (orc < 0)
			return 2;
		if (orc)
			continue;
		if (c == SKY_OPT_HELP) {
			usage(stdout);
			return 0;
		} else if (c == SKY_OPT_VERSION) {
			return 0;
		} else if (c == O_DIR) {
			dir = op.arg;
		} else if (c == O_ROWS) {
			if (sky_cli_int("bench data", op.name, op.arg, 1, 10000000, &rows))
				return 2;
		} else if (c == O_SEQ) {
			if (sky_cli_int("bench data", op.name, op.arg, 3, SKY_DS_MAX_SEQ, &seq))
				return 2;
		} else {
			return 2;
		}
	}
	if (sky_opt_no_args(&op) != 0)
		return 2;
	int rc = 1;
	sky_tokenizer t;
	sky_tok_init(&t);
	text in[3] = {{0}};
	static const char *const k_fmt[3] = {"tsv", "csv", "jsonl"};
	char path[3][600], out[600];
	const char *td = getenv("TMPDIR");
	td = td && *td ? td : "/tmp";
	snprintf(out, sizeof out, "%s/sky-bench-data.skyds", td);
	for (int f = 0; f < 3; f++)
		snprintf(path[f], sizeof path[f], "%s/sky-bench-data.%s", td, k_fmt[f]);
	cJSON *o = NULL;
	sky_diag d;
	sky_diag_clear(&d);
	int lrc = sky_tok_load_dir(&t, dir, &d);
	if (lrc) {
		fprintf(stderr, "sky bench data: %s: %s\n", sky_strerror(lrc), d.msg);
		goto exit;
	}
	if (make_inputs(rows, in))
		goto exit;
	/* the result is built after the runs: a JSON document alive while JSON
	 * Lines are parsed would keep the bounded pool from resetting */
	struct {
		double rps, mbs;
		size_t in_bytes;
		long long out_bytes;
		int64_t kept, truncated;
		sky_bench_stats st;
	} r[3];
	for (int f = 0; f < 3; f++) {
		if (sky_file_write(path[f], in[f].s, in[f].n, 0644) != 0) {
			fprintf(stderr, "sky bench data: cannot write %s\n", path[f]);
			goto exit;
		}
		run_ctx c = {.t = &t, .in = path[f], .out = out};
		sky_prep_opts_default(&c.o);
		c.o.rows.format = (sky_rows_format)f;
		c.o.seq = (int)seq;
		c.o.skip_bad = 1;
		sky_bench_stats st;
		int mrc = sky_bench_measure(&bo, run, &c, &st);
		long long outb = sky_file_size(out);
		sky_file_remove(path[f]);
		sky_file_remove(out);
		if (mrc) {
			fprintf(stderr, "sky bench data: %s: %s\n", k_fmt[f], c.why);
			goto exit;
		}
		r[f].rps = st.median > 0 ? (double)c.res.rows / st.median : 0;
		r[f].mbs = st.median > 0 ? (double)in[f].n / st.median / 1e6 : 0;
		r[f].in_bytes = in[f].n;
		r[f].out_bytes = outb;
		r[f].kept = c.res.rows;
		r[f].truncated = c.res.truncated;
		r[f].st = st;
		if (!bo.json)
			printf("%-5s %8ld rows  %7.0f rows/s  %6.1f MB/s of input  (median of %d, "
			       "%.2f s)\n",
			       k_fmt[f], (long)c.res.rows, r[f].rps, r[f].mbs, st.count, st.median);
	}
	o = sky_json_new_object();
	cJSON_AddStringToObject(o, "bench", "data");
	cJSON_AddNumberToObject(o, "rows", (double)rows);
	cJSON_AddNumberToObject(o, "seq", (double)seq);
	cJSON_AddStringToObject(o, "model_dir", dir);
	cJSON_AddNumberToObject(o, "vocab", t.n);
	cJSON_AddNumberToObject(o, "out_bytes", (double)r[0].out_bytes);
	for (int f = 0; f < 3; f++) {
		char key[64];
		snprintf(key, sizeof key, "%s_rows_per_s", k_fmt[f]);
		cJSON_AddNumberToObject(o, key, r[f].rps);
		snprintf(key, sizeof key, "%s_input_mb_s", k_fmt[f]);
		cJSON_AddNumberToObject(o, key, r[f].mbs);
		snprintf(key, sizeof key, "%s_input_bytes", k_fmt[f]);
		cJSON_AddNumberToObject(o, key, (double)r[f].in_bytes);
		snprintf(key, sizeof key, "%s_rows_kept", k_fmt[f]);
		cJSON_AddNumberToObject(o, key, (double)r[f].kept);
		snprintf(key, sizeof key, "%s_truncated", k_fmt[f]);
		cJSON_AddNumberToObject(o, key, (double)r[f].truncated);
		snprintf(key, sizeof key, "%s_ms", k_fmt[f]);
		sky_bench_add_stats(o, key, &r[f].st);
	}
	sky_bench_add_env(o, "scalar", 1);
	if (bo.json && sky_bench_print(o) != 0)
		goto exit;
	rc = 0;
exit:
	sky_json_free(o);
	for (int f = 0; f < 3; f++)
		free(in[f].s);
	sky_tok_free(&t);
	return rc;
}
