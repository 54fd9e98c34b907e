/* sky data prepare | info: labelled text into a prepared data set
 * (sky_dataprep.h, sky_dataset.h), and what a set holds. */
#include "sky_cli.h"

#include "sky_clock.h"
#include "sky_dataprep.h"
#include "sky_dataset.h"
#include "sky_datasplit.h"
#include "sky_err.h"
#include "sky_file.h"
#include "sky_hfmodel.h"
#include "sky_json.h"
#include "sky_opt.h"
#include "sky_tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BAD_SHOWN 20 /* bad rows printed in full; the rest are counted */

static void usage(FILE *to)
{
	fprintf(to, "usage: sky data <prepare|info|split> [options] (sky data <sub> --help)\n\n"
		    "  prepare  tokenize and label a TSV, CSV or JSON Lines file into a .skyds set\n"
		    "  info     rows, labels and their counts, lengths and truncation of a set\n"
		    "  split    a set into one shard per data owner (IID or label-skewed)\n");
}

static void prepare_usage(FILE *to)
{
	fprintf(to,
		"usage: sky data prepare --model-dir DIR --input FILE --out F.skyds [options]\n"
		"  DIR           the model: its tokenizer (tokenizer.json or vocab.txt), and\n"
		"                config.json if present (label2id, vocab_size, positions)\n"
		"  FILE          .tsv (GLUE's files), .csv or .jsonl, or say --format\n"
		"  --format F    tsv, csv or jsonl\n"
		"  --text-col C  the text column: a header name or a 0-based index\n"
		"  --pair-col C  a second text (sentence pairs); '' none\n"
		"  --label-col C the label column\n"
		"                (defaults from the header: GLUE's SST-2, CoLA, MRPC, QNLI,\n"
		"                RTE and MNLI layouts, else text/sentence and label)\n"
		"  --header      line 1 is a header; --no-header: it is not (default: a\n"
		"                header, unless the file has CoLA's shape)\n"
		"  --seq S       tokens per row, specials included (default 128, at most the\n"
		"                model's max_position_embeddings)\n"
		"  --labels A,B  map labels to these names (ids in this order)\n"
		"  --labels-from F.skyds  the names of another set (prepare dev like train)\n"
		"  --skip-bad    skip bad rows and count them (default: fail, write nothing)\n"
		"  --quiet       no progress lines\n"
		"  --json        print the result as one JSON object\n");
}

static void info_usage(FILE *to)
{
	fprintf(to, "usage: sky data info F.skyds [--json]\n");
}

typedef struct cli_ctx {
	long shown;
	int quiet;
	double last;
	double t0;
} cli_ctx;

static void on_bad(void *ctx, long line, const char *reason)
{
	cli_ctx *c = ctx;
	if (c->shown++ < BAD_SHOWN)
		fprintf(stderr, "sky data prepare: line %ld: %s\n", line, reason);
}

static void on_progress(void *ctx, size_t done, size_t total, int64_t rows)
{
	cli_ctx *c = ctx;
	double now = sky_clock_s();
	if (c->quiet || now - c->last < 2.0)
		return;
	c->last = now;
	fprintf(stderr, "sky data prepare: %lld rows, %.0f%% of the input, %.0f s\n",
		(long long)rows, total ? 100.0 * (double)done / (double)total : 100.0, now - c->t0);
}

/* Splits a comma list into names (in place). Returns the count or -1. */
static int split_labels(char *s, const char **out, int cap)
{
	int n = 0;
	for (char *p = s;; ) {
		char *comma = strchr(p, ',');
		if (comma)
			*comma = '\0';
		if (n == cap)
			return -1;
		out[n++] = p;
		if (!comma)
			break;
		p = comma + 1;
	}
	return n;
}

static int prepare(int argc, char **argv)
{
	const char *dir = NULL, *in = NULL, *out = NULL, *fmt = NULL, *labels_from = NULL;
	const char *labels_arg = NULL;
	char *labels = NULL;
	int json = 0, quiet = 0;
	long seq = 0;
	sky_prep_opts o;
	sky_prep_opts_default(&o);
	enum {
		O_DIR = SKY_OPT_FIRST, O_IN, O_OUT, O_FMT, O_TEXT, O_PAIR, O_LABEL, O_HDR, O_NOHDR,
		O_SEQ, O_LABELS, O_FROM, O_SKIP, O_QUIET, O_JSON
	};
	static const struct option k_opts[] = {{"model-dir", required_argument, NULL, O_DIR},
					       {"input", required_argument, NULL, O_IN},
					       {"out", required_argument, NULL, O_OUT},
					       {"format", required_argument, NULL, O_FMT},
					       {"text-col", required_argument, NULL, O_TEXT},
					       {"pair-col", required_argument, NULL, O_PAIR},
					       {"label-col", required_argument, NULL, O_LABEL},
					       {"header", no_argument, NULL, O_HDR},
					       {"no-header", no_argument, NULL, O_NOHDR},
					       {"seq", required_argument, NULL, O_SEQ},
					       {"labels", required_argument, NULL, O_LABELS},
					       {"labels-from", required_argument, NULL, O_FROM},
					       {"skip-bad", no_argument, NULL, O_SKIP},
					       {"quiet", no_argument, NULL, O_QUIET},
					       {"json", no_argument, NULL, O_JSON},
					       SKY_OPT_STD,
					       {0}};
	sky_opt op;
	sky_opt_begin(&op, "sky data prepare", argc, argv, k_opts, 0);
	for (int c; (c = sky_opt_next(&op)) != SKY_OPT_END;) {
		switch (c) {
		case SKY_OPT_HELP:
			prepare_usage(stdout);
			return 0;
		case SKY_OPT_VERSION:
			return 0;
		case O_DIR: dir = op.arg; break;
		case O_IN: in = op.arg; break;
		case O_OUT: out = op.arg; break;
		case O_FMT: fmt = op.arg; break;
		case O_TEXT: o.rows.text_col = op.arg; break;
		case O_PAIR: o.rows.pair_col = op.arg; break;
		case O_LABEL: o.rows.label_col = op.arg; break;
		case O_HDR: o.rows.header = 1; break;
		case O_NOHDR: o.rows.header = 0; break;
		case O_SEQ:
			if (sky_cli_int("data prepare", op.name, op.arg, 3, SKY_DS_MAX_SEQ, &seq) < 0)
				return 2;
			break;
		case O_LABELS: labels_arg = op.arg; break;
		case O_FROM: labels_from = op.arg; break;
		case O_SKIP: o.skip_bad = 1; break;
		case O_QUIET: quiet = 1; break;
		case O_JSON: json = 1; break;
		default:
			return 2;
		}
	}
	if (sky_opt_no_args(&op) != 0)
		return 2;
	if (!dir || !in || !out) {
		fprintf(stderr, "sky data prepare: --model-dir, --input and --out are required\n");
		prepare_usage(stderr);
		return 2;
	}
	if (labels_arg && labels_from) {
		fprintf(stderr, "sky data prepare: give --labels or --labels-from, not both\n");
		return 2;
	}
	if (fmt) {
		if (!strcmp(fmt, "tsv"))
			o.rows.format = SKY_ROWS_TSV;
		else if (!strcmp(fmt, "csv"))
			o.rows.format = SKY_ROWS_CSV;
		else if (!strcmp(fmt, "jsonl"))
			o.rows.format = SKY_ROWS_JSONL;
		else {
			fprintf(stderr, "sky data prepare: --format '%s': tsv, csv or jsonl\n", fmt);
			return 2;
		}
	} else if (sky_rows_format_of(in, &o.rows.format) != 0) {
		fprintf(stderr,
			"sky data prepare: %s: cannot tell the format from the name (.tsv, .csv, "
			".jsonl): give --format\n",
			in);
		return 2;
	}
	int rc = 1;
	sky_diag d;
	sky_diag_clear(&d);
	sky_tokenizer t;
	sky_tok_init(&t);
	sky_hf_config *hc = calloc(1, sizeof *hc);
	sky_dataset *from = calloc(1, sizeof *from);
	const char *names[SKY_DS_MAX_LABELS];
	if (!hc || !from) {
		fprintf(stderr, "sky data prepare: out of memory\n");
		goto exit;
	}
	sky_ds_init(from);
	int src = sky_tok_load_dir(&t, dir, &d);
	if (src) {
		fprintf(stderr, "sky data prepare: %s: %s\n", sky_strerror(src), d.msg);
		goto exit;
	}
	src = sky_hf_config_read(dir, hc, &d);
	if (src == SKY_ENOTFOUND && !sky_file_exists(dir)) {
		fprintf(stderr, "sky data prepare: %s: no such directory\n", dir);
		goto exit;
	}
	if (src == SKY_ENOTFOUND) {
		free(hc);
		hc = NULL; /* a tokenizer alone: labels from the file, no shape checks */
		sky_diag_clear(&d);
	} else if (src) {
		fprintf(stderr, "sky data prepare: %s: %s\n", sky_strerror(src), d.msg);
		goto exit;
	}
	o.seq = (int)(seq ? seq : SKY_HF_DEFAULT_SEQ);
	if (!seq && hc && hc->cfg.max_pos < o.seq)
		o.seq = hc->cfg.max_pos;
	if (labels_arg && !(labels = strdup(labels_arg))) {
		fprintf(stderr, "sky data prepare: out of memory\n");
		goto exit;
	}
	if (labels) {
		o.nlabels = split_labels(labels, names, SKY_DS_MAX_LABELS);
		if (o.nlabels < 0) {
			fprintf(stderr, "sky data prepare: --labels: more than %d names\n",
				SKY_DS_MAX_LABELS);
			goto exit;
		}
		o.labels = names;
	}
	if (labels_from) {
		if ((src = sky_ds_open(from, labels_from, &d))) {
			fprintf(stderr, "sky data prepare: --labels-from %s: %s: %s\n", labels_from,
				sky_strerror(src), d.msg);
			goto exit;
		}
		for (int i = 0; i < from->meta.nlabels; i++)
			names[i] = from->meta.label[i];
		o.labels = names;
		o.nlabels = from->meta.nlabels;
	}
	cli_ctx c = {0, quiet, sky_clock_s(), sky_clock_s()};
	o.on_bad = on_bad;
	o.on_progress = on_progress;
	o.ctx = &c;
	sky_prep_result res;
	src = sky_prep_file(&t, hc, in, out, &o, &res, &d);
	if (c.shown > BAD_SHOWN)
		fprintf(stderr, "sky data prepare: ... and %ld more bad rows\n", c.shown - BAD_SHOWN);
	if (src) {
		fprintf(stderr, "sky data prepare: %s: %s; nothing written\n", in, d.msg);
		goto exit;
	}
	double secs = sky_clock_s() - c.t0;
	sky_dataset ds;
	sky_diag_clear(&d);
	if ((src = sky_ds_open(&ds, out, &d))) {
		fprintf(stderr, "sky data prepare: %s does not read back: %s\n", out, d.msg);
		goto exit;
	}
	const sky_rows_layout *L = &res.layout;
	if (json) {
		char buf[8192];
		cJSON *j = sky_json_new_object();
		cJSON_AddStringToObject(j, "out", out);
		cJSON_AddNumberToObject(j, "rows", (double)res.rows);
		cJSON_AddNumberToObject(j, "bad_rows_skipped", (double)res.bad);
		cJSON_AddNumberToObject(j, "truncated", (double)res.truncated);
		cJSON_AddNumberToObject(j, "seq", ds.meta.seq);
		cJSON_AddStringToObject(j, "format", sky_rows_format_name(o.rows.format));
		cJSON_AddStringToObject(j, "layout", L->name);
		cJSON_AddStringToObject(j, "text_col", L->text);
		cJSON_AddStringToObject(j, "pair_col", L->pair);
		cJSON_AddStringToObject(j, "label_col", L->label);
		cJSON_AddStringToObject(j, "label_source", ds.meta.label_source);
		cJSON *a = cJSON_AddArrayToObject(j, "labels");
		for (int i = 0; i < ds.meta.nlabels && a; i++)
			cJSON_AddItemToArray(a, cJSON_CreateString(ds.meta.label[i]));
		cJSON_AddStringToObject(j, "source_sha256", ds.meta.source_sha256);
		cJSON_AddNumberToObject(j, "seconds", secs);
		cJSON_AddNumberToObject(j, "rows_per_s", secs > 0 ? (double)res.rows / secs : 0);
		int n = sky_json_print(j, buf, sizeof buf);
		sky_json_free(j);
		if (n < 0)
			fprintf(stderr, "sky data prepare: result does not fit\n");
		else
			printf("%s\n", buf);
	} else {
		printf("%s: %lld rows of %d tokens, %d labels (%s), %lld truncated, %lld bad rows "
		       "skipped\n",
		       out, (long long)res.rows, ds.meta.seq, ds.meta.nlabels, ds.meta.label_source,
		       (long long)res.truncated, (long long)res.bad);
		printf("  %s as %s: text '%s'%s%s%s, label '%s'\n", in, L->name, L->text,
		       L->pair[0] ? ", pair '" : "", L->pair, L->pair[0] ? "'" : "", L->label);
	}
	sky_ds_close(&ds);
	rc = 0;
exit:
	sky_tok_free(&t);
	if (from)
		sky_ds_close(from);
	free(from);
	free(hc);
	free(labels);
	return rc;
}

static int info(int argc, char **argv)
{
	int json = 0;
	enum { O_JSON = SKY_OPT_FIRST };
	static const struct option k_opts[] = {{"json", no_argument, NULL, O_JSON}, SKY_OPT_STD, {0}};
	sky_opt op;
	sky_opt_begin(&op, "sky data info", argc, argv, k_opts, 0);
	for (int c; (c = sky_opt_next(&op)) != SKY_OPT_END;) {
		switch (c) {
		case SKY_OPT_HELP:
			info_usage(stdout);
			return 0;
		case SKY_OPT_VERSION:
			return 0;
		case O_JSON:
			json = 1;
			break;
		default:
			return 2;
		}
	}
	if (argc - op.next != 1) {
		fprintf(stderr, "sky data info: give one .skyds file\n");
		info_usage(stderr);
		return 2;
	}
	const char *path = argv[op.next];
	sky_dataset *ds = calloc(1, sizeof *ds);
	sky_ds_stats *st = calloc(1, sizeof *st);
	int rc = 1;
	sky_diag d;
	sky_diag_clear(&d);
	if (!ds || !st) {
		fprintf(stderr, "sky data info: out of memory\n");
		goto exit;
	}
	int src = sky_ds_open(ds, path, &d);
	if (src) {
		fprintf(stderr, "sky data info: %s: %s: %s\n", path, sky_strerror(src), d.msg);
		goto exit;
	}
	sky_ds_stats_get(ds, st);
	const sky_ds_meta *m = &ds->meta;
	if (json) {
		size_t cap = 64u << 10;
		char *buf = malloc(cap);
		cJSON *j = sky_json_new_object();
		cJSON_AddStringToObject(j, "file", path);
		cJSON_AddNumberToObject(j, "rows", (double)m->rows);
		cJSON_AddNumberToObject(j, "seq", m->seq);
		cJSON *a = cJSON_AddArrayToObject(j, "labels");
		for (int i = 0; i < m->nlabels && a; i++) {
			cJSON *l = cJSON_CreateObject();
			cJSON_AddNumberToObject(l, "id", i);
			cJSON_AddStringToObject(l, "name", m->label[i]);
			cJSON_AddNumberToObject(l, "rows", (double)st->count[i]);
			cJSON_AddItemToArray(a, l);
		}
		cJSON_AddStringToObject(j, "label_source", m->label_source);
		cJSON *len = cJSON_AddObjectToObject(j, "length");
		cJSON_AddNumberToObject(len, "min", st->len_min);
		cJSON_AddNumberToObject(len, "mean", st->len_mean);
		cJSON_AddNumberToObject(len, "p50", st->len_p50);
		cJSON_AddNumberToObject(len, "p95", st->len_p95);
		cJSON_AddNumberToObject(len, "max", st->len_max);
		cJSON_AddNumberToObject(j, "truncated", (double)m->truncated);
		cJSON_AddNumberToObject(j, "full_rows", (double)st->full);
		cJSON_AddNumberToObject(j, "pairs", (double)st->pairs);
		cJSON_AddNumberToObject(j, "skipped", (double)m->skipped);
		cJSON_AddStringToObject(j, "source", m->source);
		cJSON_AddStringToObject(j, "source_sha256", m->source_sha256);
		char h[16];
		snprintf(h, sizeof h, "%08x", m->tokenizer_hash);
		cJSON_AddStringToObject(j, "tokenizer_hash", h);
		int n = buf ? sky_json_print(j, buf, cap) : SKY_ENOMEM;
		sky_json_free(j);
		if (n < 0) {
			fprintf(stderr, "sky data info: cannot print: %s\n", sky_strerror(n));
			free(buf);
			goto exit;
		}
		printf("%s\n", buf);
		free(buf);
	} else {
		printf("%s: %lld rows of %d tokens (%lld pairs), from %s\n", path, (long long)m->rows,
		       m->seq, (long long)st->pairs, m->source);
		printf("labels (%s):\n", m->label_source);
		for (int i = 0; i < m->nlabels; i++)
			printf("  %3d %-24s %10lld  %5.1f%%\n", i, m->label[i], (long long)st->count[i],
			       100.0 * (double)st->count[i] / (double)m->rows);
		printf("length: min %d, mean %.1f, median %d, p95 %d, max %d\n", st->len_min,
		       st->len_mean, st->len_p50, st->len_p95, st->len_max);
		printf("truncated to %d: %lld rows (%.1f%%); %lld rows fill it\n", m->seq,
		       (long long)m->truncated, 100.0 * (double)m->truncated / (double)m->rows,
		       (long long)st->full);
		printf("bad rows skipped: %lld\n", (long long)m->skipped);
		printf("source sha256 %s, tokenizer %08x\n", m->source_sha256, m->tokenizer_hash);
	}
	rc = 0;
exit:
	if (ds)
		sky_ds_close(ds);
	free(ds);
	free(st);
	return rc;
}

static void split_usage(FILE *to)
{
	fprintf(to,
		"usage: sky data split F.skyds --owners N --out-prefix P [options]\n"
		"  writes P-0.skyds .. P-<N-1>.skyds, one shard per data owner, every row in\n"
		"  exactly one; all or nothing\n"
		"  --owners N     shards (1 to %d)\n"
		"  --alpha A      label skew: each label's rows divided among the owners in\n"
		"                 Dirichlet(A) proportions (0.5: strongly skewed; 100: near\n"
		"                 IID); 0 (default): IID, rows dealt at random\n"
		"  --seed S       the draw (default 1); the same seed, the same shards\n"
		"  --min-rows M   redraw until every shard has M rows (default 1)\n"
		"  --json         the shards' rows and label counts as one JSON object\n",
		SKY_SPLIT_MAX_OWNERS);
}

static int split(int argc, char **argv)
{
	long owners = 0, seed = 1, min_rows = 1;
	double alpha = 0.0;
	const char *prefix = NULL;
	int json = 0;
	enum { O_OWNERS = SKY_OPT_FIRST, O_ALPHA, O_SEED, O_MIN, O_PREFIX, O_JSON };
	static const struct option k_opts[] = {{"owners", required_argument, NULL, O_OWNERS},
					       {"alpha", required_argument, NULL, O_ALPHA},
					       {"seed", required_argument, NULL, O_SEED},
					       {"min-rows", required_argument, NULL, O_MIN},
					       {"out-prefix", required_argument, NULL, O_PREFIX},
					       {"json", no_argument, NULL, O_JSON},
					       SKY_OPT_STD,
					       {0}};
	sky_opt op;
	sky_opt_begin(&op, "sky data split", argc, argv, k_opts, 0);
	for (int c; (c = sky_opt_next(&op)) != SKY_OPT_END;) {
		switch (c) {
		case SKY_OPT_HELP:
			split_usage(stdout);
			return 0;
		case SKY_OPT_VERSION:
			return 0;
		case O_OWNERS:
			if (sky_cli_int("data split", op.name, op.arg, 1, SKY_SPLIT_MAX_OWNERS, &owners) < 0)
				return 2;
			break;
		case O_ALPHA:
			if (sky_cli_double("data split", op.name, op.arg, 0.0, 1e6, &alpha) < 0)
				return 2;
			break;
		case O_SEED:
			if (sky_cli_int("data split", op.name, op.arg, 0, 0x7fffffffL, &seed) < 0)
				return 2;
			break;
		case O_MIN:
			if (sky_cli_int("data split", op.name, op.arg, 1, 1L << 30, &min_rows) < 0)
				return 2;
			break;
		case O_PREFIX:
			prefix = op.arg;
			break;
		case O_JSON:
			json = 1;
			break;
		default:
			return 2;
		}
	}
	if (argc - op.next != 1 || !owners || !prefix || !*prefix) {
		fprintf(stderr, "sky data split: give one .skyds file, --owners and --out-prefix\n");
		split_usage(stderr);
		return 2;
	}
	const char *path = argv[op.next];
	sky_dataset *ds = calloc(1, sizeof *ds);
	sky_ds_build *b = calloc(1, sizeof *b);
	int32_t *owner_of = NULL;
	int64_t(*count)[SKY_DS_MAX_LABELS] = NULL;
	int rc = 1, written = 0;
	char out[4096];
	sky_diag d;
	sky_diag_clear(&d);
	if (!ds || !b) {
		fprintf(stderr, "sky data split: out of memory\n");
		goto exit;
	}
	int src = sky_ds_open(ds, path, &d);
	if (src) {
		fprintf(stderr, "sky data split: %s: %s: %s\n", path, sky_strerror(src), d.msg);
		goto exit;
	}
	const sky_ds_meta *m = &ds->meta;
	owner_of = malloc((size_t)m->rows * sizeof *owner_of);
	count = calloc((size_t)owners, sizeof *count);
	if (!owner_of || !count) {
		fprintf(stderr, "sky data split: out of memory for %lld rows\n", (long long)m->rows);
		goto exit;
	}
	src = sky_ds_split(ds->labels, m->rows, m->nlabels, (int)owners, alpha, (uint64_t)seed,
			   min_rows, owner_of, &d);
	if (src) {
		fprintf(stderr, "sky data split: %s: %s\n", path, d.msg);
		goto exit;
	}
	for (int64_t r = 0; r < m->rows; r++)
		count[owner_of[r]][ds->labels[r]]++;
	cJSON *j = json ? sky_json_new_object() : NULL;
	cJSON *arr = j ? cJSON_AddArrayToObject(j, "shards") : NULL;
	for (int k = 0; k < owners; k++) {
		sky_ds_build_init(b, m->seq);
		b->meta = *m;
		b->meta.rows = 0;
		int n = snprintf(b->meta.source, sizeof b->meta.source, "%s shard %d of %ld", m->source,
				 k, owners);
		if (n < 0 || (size_t)n >= sizeof b->meta.source)
			snprintf(b->meta.source, sizeof b->meta.source, "shard %d of %ld", k, owners);
		const size_t S = (size_t)m->seq;
		int64_t fill = 0;
		for (int64_t r = 0; r < m->rows && src == 0; r++) {
			if (owner_of[r] != k)
				continue;
			int32_t *ids, *types, *mask;
			src = sky_ds_build_next(b, &ids, &types, &mask);
			if (src)
				break;
			memcpy(ids, ds->input_ids + (size_t)r * S, S * sizeof *ids);
			memcpy(types, ds->token_type_ids + (size_t)r * S, S * sizeof *types);
			memcpy(mask, ds->attention_mask + (size_t)r * S, S * sizeof *mask);
			sky_ds_build_commit(b, ds->labels[r]);
			fill += mask[S - 1] != 0;
		}
		/* the set counts its truncated rows, not which: a shard's are among
		 * its rows that fill the sequence (the set's count would be more
		 * than the shard's rows, which sky_ds_open refuses) */
		if (b->meta.truncated > fill)
			b->meta.truncated = fill;
		snprintf(out, sizeof out, "%s-%d.skyds", prefix, k);
		if (src == 0)
			src = sky_ds_write(out, b, &d);
		const int64_t rows = b->meta.rows;
		sky_ds_build_free(b);
		if (src) {
			fprintf(stderr, "sky data split: %s: %s: %s\n", out, sky_strerror(src), d.msg);
			json = 0;
			break;
		}
		written = k + 1;
		if (arr) {
			cJSON *o = cJSON_CreateObject();
			cJSON_AddStringToObject(o, "file", out);
			cJSON_AddNumberToObject(o, "rows", (double)rows);
			cJSON *c = cJSON_AddArrayToObject(o, "label_rows");
			for (int l = 0; l < m->nlabels && c; l++)
				cJSON_AddItemToArray(c, cJSON_CreateNumber((double)count[k][l]));
			cJSON_AddItemToArray(arr, o);
		} else if (!json) {
			printf("%s: %lld rows;", out, (long long)rows);
			for (int l = 0; l < m->nlabels; l++)
				printf(" %s %lld", m->label[l], (long long)count[k][l]);
			printf("\n");
		}
	}
	if (src) {
		for (int k = 0; k < written; k++) { /* all or nothing */
			snprintf(out, sizeof out, "%s-%d.skyds", prefix, k);
			remove(out);
		}
		sky_json_free(j);
		goto exit;
	}
	if (j) {
		cJSON_AddStringToObject(j, "source", path);
		cJSON_AddNumberToObject(j, "owners", (double)owners);
		cJSON_AddNumberToObject(j, "alpha", alpha);
		cJSON_AddNumberToObject(j, "seed", (double)seed);
		size_t cap = 256u << 10;
		char *buf = malloc(cap);
		int n = buf ? sky_json_print(j, buf, cap) : SKY_ENOMEM;
		sky_json_free(j);
		if (n < 0) {
			fprintf(stderr, "sky data split: cannot print: %s\n", sky_strerror(n));
			free(buf);
			goto exit;
		}
		printf("%s\n", buf);
		free(buf);
	}
	rc = 0;
exit:
	if (ds)
		sky_ds_close(ds);
	free(ds);
	free(b);
	free(owner_of);
	free(count);
	return rc;
}

int sky_cmd_data(int argc, char **argv)
{
	static const sky_cmd subs[] = {
		{"prepare", "tokenize and label a TSV, CSV or JSON Lines file", prepare},
		{"info", "what a prepared set holds", info},
		{"split", "a set into one shard per data owner", split},
	};
	return sky_cli_dispatch("sky data", argc, argv, subs, sizeof subs / sizeof subs[0], usage);
}
