/* Prepared data sets: sky_prep_* (runtime/dataprep.c) over each format with
 * the uncased test vocabulary, every bad-row reason with its line,
 * --skip-bad counting, nothing written on failure; and the .skyds file
 * (runtime/dataset.c): round trip, metadata, statistics, refusals. */
#include "sky_test.h"

#include "sky_chunk.h"
#include "sky_dataprep.h"
#include "sky_dataset.h"
#include "sky_file.h"
#include "sky_json.h"
#include "sky_tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXBAD 16

typedef struct bads {
	int n;
	long line[MAXBAD];
	char why[MAXBAD][320];
} bads;

static void on_bad(void *ctx, long line, const char *reason)
{
	bads *b = ctx;
	if (b->n < MAXBAD) {
		b->line[b->n] = line;
		snprintf(b->why[b->n], sizeof b->why[0], "%s", reason);
	}
	b->n++;
}

static sky_tokenizer g_tok;

static const sky_tokenizer *tok(void)
{
	if (!g_tok.block) {
		char dir[512];
		sky_diag d;
		sky_diag_clear(&d);
		snprintf(dir, sizeof dir, "%s/tokenizer/uncased", sky_test_data_dir());
		if (sky_tok_load_dir(&g_tok, dir, &d) != 0)
			fprintf(stderr, "cannot load %s: %s\n", dir, d.msg);
	}
	return &g_tok;
}

static int prep(sky_rows_format f, const char *text, int seq, int skip, const sky_hf_config *hc,
		const char *const *labels, int nlabels, sky_ds_build *b, sky_prep_result *res,
		bads *bad, sky_diag *d)
{
	sky_prep_opts o;
	sky_prep_opts_default(&o);
	o.rows.format = f;
	o.seq = seq;
	o.skip_bad = skip;
	o.labels = labels;
	o.nlabels = nlabels;
	o.on_bad = on_bad;
	o.ctx = bad;
	memset(bad, 0, sizeof *bad);
	sky_diag_clear(d);
	return sky_prep_buf(tok(), hc, text, strlen(text), &o, b, res, d);
}

static const char *write_tmp(const char *name, const char *text)
{
	static char path[4][512];
	static int k;
	char *p = path[k++ % 4];
	snprintf(p, 512, "%s/%s", sky_test_tmp_dir(), name);
	sky_file_write(p, text, strlen(text), 0644);
	return p;
}

SKY_TEST(tsv_integer_labels)
{
	sky_ds_build b;
	sky_prep_result res;
	bads bad;
	sky_diag d;
	const char *f = "sentence\tlabel\nthe cat\t1\na dog\t0\nthe the the the the the\t1\n";
	SKY_EXPECT_EQ(prep(SKY_ROWS_TSV, f, 6, 0, NULL, NULL, 0, &b, &res, &bad, &d), 0);
	SKY_EXPECT_EQ(b.meta.rows, 3);
	SKY_EXPECT_EQ(b.meta.nlabels, 2);
	SKY_EXPECT(strcmp(b.meta.label[0], "0") == 0 && strcmp(b.meta.label[1], "1") == 0);
	SKY_EXPECT(strcmp(b.meta.label_source, "integer") == 0);
	SKY_EXPECT_EQ(b.labels[0], 1);
	SKY_EXPECT_EQ(b.labels[1], 0);
	SKY_EXPECT_EQ(res.truncated, 1); /* 6 words + 2 specials > 6 */
	SKY_EXPECT_EQ(b.meta.truncated, 1);
	const sky_tokenizer *t = tok();
	sky_diag_clear(&d);
	long n = sky_tok_count(t, "the cat", 7, &d); /* [CLS] n pieces [SEP] */
	SKY_EXPECT(n >= 2 && n <= 3);
	SKY_EXPECT_EQ(b.input_ids[0], t->id_cls);
	SKY_EXPECT_EQ(b.attention_mask[n + 1], 1);
	SKY_EXPECT_EQ(b.attention_mask[n + 2], 0);
	SKY_EXPECT_EQ(b.input_ids[n + 1], t->id_sep);
	SKY_EXPECT_EQ(b.input_ids[n + 2], t->id_pad);
	SKY_EXPECT_EQ(b.attention_mask[2 * 6 + 5], 1); /* truncated: full */
	SKY_EXPECT_EQ(b.meta.tokenizer_hash, t->hash);
	sky_ds_build_free(&b);
	sky_ds_build_free(&b); /* twice is fine */
}

SKY_TEST(names_first_seen_and_pairs)
{
	sky_ds_build b;
	sky_prep_result res;
	bads bad;
	sky_diag d;
	const char *f = "index\tsentence1\tsentence2\tlabel\n"
			"0\tthe cat\ta dog\tnot_entailment\n"
			"1\tthe dog\tthe cat\tentailment\n"
			"2\ta cat\ta cat\tnot_entailment\n";
	SKY_EXPECT_EQ(prep(SKY_ROWS_TSV, f, 16, 0, NULL, NULL, 0, &b, &res, &bad, &d), 0);
	SKY_EXPECT(strcmp(res.layout.name, "rte") == 0);
	SKY_EXPECT_EQ(b.meta.nlabels, 2);
	SKY_EXPECT(strcmp(b.meta.label[0], "not_entailment") == 0);
	SKY_EXPECT(strcmp(b.meta.label_source, "data") == 0);
	SKY_EXPECT_EQ(b.labels[1], 1);
	SKY_EXPECT_EQ(b.labels[2], 0);
	/* [CLS] the cat [SEP] a dog [SEP]: types 0 (a and its [SEP]) then 1 */
	sky_diag_clear(&d);
	long na = sky_tok_count(tok(), "the cat", 7, &d), nb = sky_tok_count(tok(), "a dog", 5, &d);
	SKY_EXPECT_EQ(b.token_type_ids[na + 1], 0);
	SKY_EXPECT_EQ(b.token_type_ids[na + 2], 1);
	SKY_EXPECT_EQ(b.token_type_ids[na + nb + 2], 1);
	SKY_EXPECT_EQ(b.token_type_ids[na + nb + 3], 0);
	SKY_EXPECT_EQ(b.attention_mask[na + nb + 2], 1);
	SKY_EXPECT_EQ(b.attention_mask[na + nb + 3], 0);
	sky_ds_build_free(&b);
}

SKY_TEST(model_label2id_and_given_labels)
{
	const char *cfg = "{\"hidden_size\":8,\"num_attention_heads\":2,\"intermediate_size\":16,"
			  "\"num_hidden_layers\":1,\"vocab_size\":4000,\"max_position_embeddings\":"
			  "64,\"type_vocab_size\":2,\"id2label\":{\"0\":\"neg\",\"1\":\"pos\"},"
			  "\"label2id\":{\"neg\":0,\"pos\":1}}";
	sky_hf_config *hc = calloc(1, sizeof *hc);
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_hf_config_parse(cfg, strlen(cfg), hc, &d), 0);
	sky_ds_build b;
	sky_prep_result res;
	bads bad;
	const char *f = "text,label\nthe cat,pos\na dog,neg\nthe dog,1\nthe end,maybe\n";
	SKY_EXPECT_EQ(prep(SKY_ROWS_CSV, f, 16, 1, hc, NULL, 0, &b, &res, &bad, &d), 0);
	SKY_EXPECT(strcmp(b.meta.label_source, "model") == 0);
	SKY_EXPECT_EQ(b.meta.rows, 3);
	SKY_EXPECT_EQ(b.labels[0], 1);
	SKY_EXPECT_EQ(b.labels[1], 0);
	SKY_EXPECT_EQ(b.labels[2], 1); /* an integer is an id */
	SKY_EXPECT_EQ(bad.n, 1);
	SKY_EXPECT_EQ(bad.line[0], 5);
	SKY_EXPECT_MSG(strcmp(bad.why[0], "unknown label 'maybe' (labels: neg, pos)") == 0, "%s",
		       bad.why[0]);
	SKY_EXPECT_EQ(b.meta.skipped, 1);
	sky_ds_build_free(&b);
	/* seq over the model's positions; the tokenizer larger than the model */
	SKY_EXPECT_EQ(prep(SKY_ROWS_CSV, f, 65, 1, hc, NULL, 0, &b, &res, &bad, &d), SKY_ERANGE);
	SKY_EXPECT(strstr(d.msg, "max_position_embeddings 64") != NULL);
	hc->cfg.vocab = 100;
	SKY_EXPECT_EQ(prep(SKY_ROWS_CSV, f, 16, 1, hc, NULL, 0, &b, &res, &bad, &d), SKY_ERANGE);
	SKY_EXPECT(strstr(d.msg, "vocab_size is 100") != NULL);
	free(hc);
	/* a given list: ids in its order */
	const char *names[] = {"pos", "neg"};
	SKY_EXPECT_EQ(prep(SKY_ROWS_CSV, "text,label\nthe cat,neg\n", 16, 0, NULL, names, 2, &b, &res,
			   &bad, &d),
		      0);
	SKY_EXPECT(strcmp(b.meta.label_source, "given") == 0);
	SKY_EXPECT_EQ(b.labels[0], 1);
	sky_ds_build_free(&b);
}

SKY_TEST(jsonl_rows)
{
	sky_ds_build b;
	sky_prep_result res;
	bads bad;
	sky_diag d;
	const char *f = "{\"text\":\"the cat\",\"label\":\"a\"}\n{\"text\":\"a dog\",\"label\":\"b\"}\n";
	SKY_EXPECT_EQ(prep(SKY_ROWS_JSONL, f, 8, 0, NULL, NULL, 0, &b, &res, &bad, &d), 0);
	SKY_EXPECT_EQ(b.meta.rows, 2);
	SKY_EXPECT_EQ(b.labels[1], 1);
	sky_ds_build_free(&b);
	SKY_EXPECT_EQ(sky_json_pool_used(), 0);
}

/* Each reason a row is bad, with its line; without --skip-bad it fails. */
SKY_TEST(bad_row_reasons)
{
	sky_ds_build b;
	sky_prep_result res;
	bads bad;
	sky_diag d;
	const char *f = "sentence\tlabel\n"
			"the cat\t0\n"         /* 2 fine */
			"the\tcat\t0\n"        /* 3 wrong column count */
			"   \t1\n"             /* 4 empty text */
			"caf\xe9 noir\t1\n"    /* 5 invalid UTF-8 (Latin-1) */
			"the dog\tpositive\n"  /* 6 not an integer, as line 2 */
			"the dog\t\n"          /* 7 empty label */
			"a dog\t1\n";          /* 8 fine */
	SKY_EXPECT_EQ(prep(SKY_ROWS_TSV, f, 16, 0, NULL, NULL, 0, &b, &res, &bad, &d), SKY_EFORMAT);
	SKY_EXPECT_MSG(strcmp(d.msg, "5 bad rows (--skip-bad skips them)") == 0, "%s", d.msg);
	SKY_EXPECT(b.input_ids == NULL); /* freed */
	SKY_EXPECT_EQ(bad.n, 5);
	long lines[] = {3, 4, 5, 6, 7};
	const char *why[] = {"3 columns, expected 2 (as the header)", "empty text",
			     "text: invalid UTF-8 at byte 3 (0xe9)",
			     "label 'positive' is not an integer 0..255 (this file's labels are "
			     "integers, as on line 2)",
			     "empty label"};
	for (int i = 0; i < 5; i++) {
		SKY_EXPECT_EQ(bad.line[i], lines[i]);
		SKY_EXPECT_MSG(strcmp(bad.why[i], why[i]) == 0, "line %ld: %s", bad.line[i],
			       bad.why[i]);
	}
	/* --skip-bad: the two good rows, five counted */
	SKY_EXPECT_EQ(prep(SKY_ROWS_TSV, f, 16, 1, NULL, NULL, 0, &b, &res, &bad, &d), 0);
	SKY_EXPECT_EQ(b.meta.rows, 2);
	SKY_EXPECT_EQ(res.bad, 5);
	SKY_EXPECT_EQ(b.meta.skipped, 5);
	sky_ds_build_free(&b);
	/* a pair that is empty; a label that is not UTF-8; every row bad */
	const char *g = "text,text_pair,label\nthe cat,,x\nthe cat,a dog,\xff\n";
	SKY_EXPECT_EQ(prep(SKY_ROWS_CSV, g, 16, 1, NULL, NULL, 0, &b, &res, &bad, &d), SKY_EFORMAT);
	SKY_EXPECT(strcmp(bad.why[0], "empty pair text") == 0);
	SKY_EXPECT_MSG(strcmp(bad.why[1], "label: invalid UTF-8 at byte 0 (0xff)") == 0, "%s",
		       bad.why[1]);
	SKY_EXPECT(strstr(d.msg, "every row is bad") != NULL);
	/* a collected name with a control character (shown as '?') */
	SKY_EXPECT_EQ(prep(SKY_ROWS_JSONL, "{\"text\":\"the\",\"label\":\"a\\u001b[2J\"}\n", 16, 1,
			   NULL, NULL, 0, &b, &res, &bad, &d),
		      SKY_EFORMAT);
	SKY_EXPECT_MSG(strcmp(bad.why[0], "label 'a?[2J' holds a control character (0x1b)") == 0,
		       "%s", bad.why[0]);
	/* CSV with an embedded newline in a quoted field is a good row */
	SKY_EXPECT_EQ(prep(SKY_ROWS_CSV, "text,label\n\"the\ncat\",a\n", 16, 0, NULL, NULL, 0, &b,
			   &res, &bad, &d),
		      0);
	SKY_EXPECT_EQ(b.attention_mask[3], 1); /* [CLS] the cat [SEP] */
	SKY_EXPECT_EQ(b.attention_mask[4], 0);
	sky_ds_build_free(&b);
	/* no label column */
	SKY_EXPECT_EQ(prep(SKY_ROWS_CSV, "text,x\nthe,1\n", 16, 0, NULL, NULL, 0, &b, &res, &bad, &d),
		      SKY_ENOTFOUND);
	SKY_EXPECT(strstr(d.msg, "no label column") != NULL);
}

SKY_TEST(file_round_trip)
{
	const char *in = write_tmp("train.csv", "text,label\nthe cat,b\na dog,a\nthe dog,b\n");
	char out[512];
	snprintf(out, sizeof out, "%s/train.skyds", sky_test_tmp_dir());
	sky_prep_opts o;
	sky_prep_opts_default(&o);
	o.rows.format = SKY_ROWS_CSV;
	o.seq = 8;
	sky_prep_result res;
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_prep_file(tok(), NULL, in, out, &o, &res, &d), 0);
	sky_dataset ds;
	SKY_EXPECT_EQ(sky_ds_open(&ds, out, &d), 0);
	SKY_EXPECT_EQ(ds.meta.rows, 3);
	SKY_EXPECT_EQ(ds.meta.seq, 8);
	SKY_EXPECT_EQ(ds.meta.nlabels, 2);
	SKY_EXPECT(strcmp(ds.meta.label[0], "b") == 0);
	SKY_EXPECT(strcmp(ds.meta.source, "train.csv") == 0);
	/* sha256 of the input's bytes */
	unsigned char sha[32];
	char hex[65];
	const char *text = "text,label\nthe cat,b\na dog,a\nthe dog,b\n";
	sky_sha256(text, strlen(text), sha);
	sky_sha256_hex(sha, hex);
	SKY_EXPECT(strcmp(ds.meta.source_sha256, hex) == 0);
	SKY_EXPECT_EQ(ds.meta.tokenizer_hash, tok()->hash);
	sky_ds_row r;
	SKY_EXPECT_EQ(sky_ds_row_get(&ds, 1, &r), 0);
	SKY_EXPECT_EQ(r.label, 1);
	SKY_EXPECT_EQ(r.len, 2 + sky_tok_count(tok(), "a dog", 5, &d));
	SKY_EXPECT_EQ(sky_ds_row_get(&ds, 3, &r), SKY_ERANGE);
	sky_ds_stats st;
	sky_ds_stats_get(&ds, &st);
	SKY_EXPECT_EQ(st.count[0], 2);
	SKY_EXPECT_EQ(st.count[1], 1);
	SKY_EXPECT_EQ(st.len_min, 2 + sky_tok_count(tok(), "the cat", 7, &d));
	SKY_EXPECT_EQ(st.len_max, 2 + sky_tok_count(tok(), "a dog", 5, &d));
	SKY_EXPECT_EQ(st.pairs, 0);
	sky_ds_close(&ds);
	sky_ds_close(&ds);
}

/* A failure writes nothing, and leaves a set already there as it was. */
SKY_TEST(nothing_written_on_failure)
{
	const char *in = write_tmp("bad.tsv", "sentence\tlabel\nthe cat\t0\nbroken row\n");
	char out[512];
	snprintf(out, sizeof out, "%s/bad.skyds", sky_test_tmp_dir());
	sky_prep_opts o;
	sky_prep_opts_default(&o);
	o.seq = 8;
	sky_prep_result res;
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_prep_file(tok(), NULL, in, out, &o, &res, &d), SKY_EFORMAT);
	SKY_EXPECT(!sky_file_exists(out));
	sky_file_write(out, "old", 3, 0644);
	SKY_EXPECT_EQ(sky_prep_file(tok(), NULL, in, out, &o, &res, &d), SKY_EFORMAT);
	char buf[8];
	SKY_EXPECT_EQ(sky_file_read(out, buf, sizeof buf), 3);
	o.skip_bad = 1;
	SKY_EXPECT_EQ(sky_prep_file(tok(), NULL, in, out, &o, &res, &d), 0);
	SKY_EXPECT(sky_file_size(out) > 3);
	SKY_EXPECT_EQ(sky_prep_file(tok(), NULL, "/nonexistent/x.tsv", out, &o, &res, &d),
		      SKY_ENOTFOUND);
}

static int count_tmp(void *ctx, const char *name)
{
	if (strstr(name, ".tmp."))
		(*(int *)ctx)++;
	return 0;
}

SKY_TEST(no_temporary_files_left)
{
	int n = 0;
	sky_file_list(sky_test_tmp_dir(), "", count_tmp, &n);
	SKY_EXPECT_EQ(n, 0);
}

/* Files that are not data sets, or are damaged, are refused naming why. */
SKY_TEST(open_refusals)
{
	sky_ds_build b;
	sky_prep_result res;
	bads bad;
	sky_diag d;
	SKY_EXPECT_EQ(prep(SKY_ROWS_TSV, "sentence\tlabel\nthe cat\t0\na dog\t1\n", 4, 0, NULL, NULL,
			   0, &b, &res, &bad, &d),
		      0);
	char path[512];
	snprintf(path, sizeof path, "%s/ok.skyds", sky_test_tmp_dir());
	SKY_EXPECT_EQ(sky_ds_write(path, &b, &d), SKY_EINVAL); /* no source hash */
	SKY_EXPECT(strstr(d.msg, "source_sha256") != NULL);
	memset(b.meta.source_sha256, 'a', 64);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_ds_write(path, &b, &d), 0);
	sky_file_map m;
	SKY_EXPECT_EQ(sky_file_map_open(&m, path), 0);
	unsigned char *copy = malloc(m.size);
	memcpy(copy, m.data, m.size);
	sky_dataset ds;
	SKY_EXPECT_EQ(sky_ds_parse(&ds, copy, m.size, &d), 0);
	sky_ds_close(&ds);
	/* a label out of range (the last 8 bytes are the labels 0, 1) */
	copy[m.size - 4] = 7;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_ds_parse(&ds, copy, m.size, &d), SKY_EFORMAT);
	SKY_EXPECT_MSG(strcmp(d.msg, "row 1: label 7, the set has 2 labels") == 0, "%s", d.msg);
	copy[m.size - 4] = 1;
	/* a mask that is not 1s then 0s: mask row 0 is "1 1 1 1" -> set [1] to 0 */
	sky_st_file st;
	sky_st_init(&st);
	SKY_EXPECT_EQ(sky_st_parse(&st, copy, m.size, &d), 0);
	const sky_st_tensor *t = sky_st_find(&st, "attention_mask");
	size_t at = (size_t)(t->data - copy);
	sky_st_close(&st);
	copy[at + 4] = 0;
	copy[at + 8] = 0;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_ds_parse(&ds, copy, m.size, &d), SKY_EFORMAT);
	SKY_EXPECT_MSG(strstr(d.msg, "row 0: attention mask starts 1, 0") != NULL, "%s", d.msg);
	free(copy);
	sky_file_map_close(&m);
	/* a plain safetensors file */
	float w[2] = {1, 2};
	sky_st_entry e = {"w", SKY_ST_F32, 1, {2}, w};
	snprintf(path, sizeof path, "%s/w.safetensors", sky_test_tmp_dir());
	SKY_EXPECT_EQ(sky_st_write(path, &e, 1, NULL, 0, &d), 0);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_ds_open(&ds, path, &d), SKY_EFORMAT);
	SKY_EXPECT_MSG(strcmp(d.msg, "not a Sky data set: no metadata 'format'") == 0, "%s", d.msg);
	sky_ds_build_free(&b);
}

typedef struct prog {
	int calls;
	size_t last_done, total;
	int64_t last_rows;
	int bad;
} prog;

static void on_progress(void *ctx, size_t done, size_t total, int64_t rows)
{
	prog *p = ctx;
	if (done < p->last_done || done > total || rows < p->last_rows)
		p->bad++;
	p->calls++;
	p->last_done = done;
	p->total = total;
	p->last_rows = rows;
}

/* Long inputs report progress every few thousand rows: bytes read only
 * grow, rows kept too. */
SKY_TEST(progress_on_long_inputs)
{
	size_t cap = 20000 * 16 + 32, n = 0;
	char *f = malloc(cap);
	n += (size_t)snprintf(f + n, cap - n, "sentence\tlabel\n");
	for (int i = 0; i < 20000; i++)
		n += (size_t)snprintf(f + n, cap - n, "the cat\t%d\n", i % 2);
	sky_prep_opts o;
	sky_prep_opts_default(&o);
	o.seq = 8;
	prog p = {0};
	o.on_progress = on_progress;
	o.ctx = &p;
	sky_ds_build b;
	sky_prep_result res;
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_prep_buf(tok(), NULL, f, n, &o, &b, &res, &d), 0);
	SKY_EXPECT_EQ(b.meta.rows, 20000);
	SKY_EXPECT_EQ(p.calls, 2); /* every 8192 rows */
	SKY_EXPECT_EQ(p.bad, 0);
	SKY_EXPECT_EQ(p.total, n);
	SKY_EXPECT(p.last_rows >= 16383 && p.last_rows <= 16384);
	sky_ds_build_free(&b);
	free(f);
}
