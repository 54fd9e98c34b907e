/* Rows of TSV, CSV and JSON Lines files (runtime/datarows.c): GLUE's
 * layouts, columns by name and index, CSV quoting and embedded newlines,
 * JSON values, and every bad-row reason with its line. */
#include "sky_test.h"

#include "sky_datarows.h"
#include "sky_json.h"

#include <stdio.h>
#include <string.h>

#define MAXR 16

typedef struct got {
	int n;
	long line[MAXR];
	char bad[MAXR][320];
	char text[MAXR][128], pair[MAXR][128], label[MAXR][64];
	int has_pair[MAXR], number[MAXR];
} got;

static void cp(char *dst, size_t cap, const char *s, size_t n)
{
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, s, n);
	dst[n] = '\0';
}

static int on_row(void *ctx, const sky_row *r)
{
	got *g = ctx;
	if (g->n >= MAXR)
		return 0;
	int i = g->n++;
	g->line[i] = r->line;
	g->bad[i][0] = '\0';
	if (r->bad) {
		snprintf(g->bad[i], sizeof g->bad[i], "%s", r->bad);
		return 0;
	}
	cp(g->text[i], sizeof g->text[i], r->text, r->text_len);
	g->has_pair[i] = r->pair != NULL;
	if (r->pair)
		cp(g->pair[i], sizeof g->pair[i], r->pair, r->pair_len);
	if (r->label)
		cp(g->label[i], sizeof g->label[i], r->label, r->label_len);
	g->number[i] = r->label_number;
	return 0;
}

static int run(sky_rows_format f, const char *text, got *g, sky_rows_layout *L, sky_diag *d,
	       const char *tc, const char *pc, const char *lc, int header)
{
	sky_rows_opts o;
	sky_rows_opts_default(&o);
	o.format = f;
	o.text_col = tc;
	o.pair_col = pc;
	o.label_col = lc;
	o.header = header;
	memset(g, 0, sizeof *g);
	sky_diag_clear(d);
	return sky_rows_read(text, strlen(text), &o, on_row, g, L, d);
}

SKY_TEST(tsv_sst2_header)
{
	got g;
	sky_rows_layout L;
	sky_diag d;
	const char *f = "sentence\tlabel\r\nit 's a \"charming\" journey\t1\r\n\r\nbad\t0\r\n";
	SKY_EXPECT_EQ(run(SKY_ROWS_TSV, f, &g, &L, &d, NULL, NULL, NULL, -1), 0);
	SKY_EXPECT(strcmp(L.name, "sst2") == 0);
	SKY_EXPECT_EQ(L.header, 1);
	SKY_EXPECT_EQ(g.n, 2);
	SKY_EXPECT(strcmp(g.text[0], "it 's a \"charming\" journey") == 0); /* quotes are text */
	SKY_EXPECT(strcmp(g.label[0], "1") == 0);
	SKY_EXPECT_EQ(g.line[0], 2);
	SKY_EXPECT_EQ(g.line[1], 4); /* the blank line counts, is not a row */
	SKY_EXPECT(!g.has_pair[0]);
}

SKY_TEST(tsv_cola_no_header)
{
	got g;
	sky_rows_layout L;
	sky_diag d;
	const char *f = "gj04\t1\t\tOur friends won't buy this analysis.\n"
			"gj04\t0\t*\tThey drank the pub.\n";
	SKY_EXPECT_EQ(run(SKY_ROWS_TSV, f, &g, &L, &d, NULL, NULL, NULL, -1), 0);
	SKY_EXPECT(strcmp(L.name, "cola") == 0);
	SKY_EXPECT_EQ(L.header, 0);
	SKY_EXPECT_EQ(g.n, 2);
	SKY_EXPECT_EQ(g.line[0], 1);
	SKY_EXPECT(strcmp(g.text[1], "They drank the pub.") == 0);
	SKY_EXPECT(strcmp(g.label[1], "0") == 0);
	/* --header: line 1 is a header even in CoLA's shape */
	SKY_EXPECT_EQ(run(SKY_ROWS_TSV, f, &g, &L, &d, "3", NULL, "1", 1), 0);
	SKY_EXPECT_EQ(L.header, 1);
	SKY_EXPECT_EQ(g.n, 1);
	SKY_EXPECT_EQ(g.line[0], 2);
	/* a named column cannot be found without a header */
	SKY_EXPECT_EQ(run(SKY_ROWS_TSV, f, &g, &L, &d, "sentence", NULL, NULL, -1), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "no header") != NULL);
}

SKY_TEST(tsv_glue_pair_layouts)
{
	struct {
		const char *file, *layout, *text, *pair, *label;
	} k[] = {
		{"Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t7\t8\tHe said.\tShe said.\n",
		 "mrpc", "He said.", "She said.", "1"},
		{"index\tquestion\tsentence\tlabel\n0\tWho?\tMe.\tentailment\n", "qnli", "Who?", "Me.",
		 "entailment"},
		{"index\tsentence1\tsentence2\tlabel\n0\tA dog.\tAn animal.\tnot_entailment\n", "rte",
		 "A dog.", "An animal.", "not_entailment"},
		{"index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
		 "sentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1\tgold_label\n"
		 "0\t1\t1e\tgov\t( a )\t( b )\t(ROOT a)\t(ROOT b)\tIt rains.\tIt is wet.\t"
		 "entailment\tentailment\n",
		 "mnli", "It rains.", "It is wet.", "entailment"},
	};
	for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
		got g;
		sky_rows_layout L;
		sky_diag d;
		SKY_EXPECT_EQ(run(SKY_ROWS_TSV, k[i].file, &g, &L, &d, NULL, NULL, NULL, -1), 0);
		SKY_EXPECT_MSG(strcmp(L.name, k[i].layout) == 0, "%s: %s", k[i].layout, L.name);
		SKY_EXPECT_EQ(g.n, 1);
		SKY_EXPECT(strcmp(g.text[0], k[i].text) == 0);
		SKY_EXPECT(g.has_pair[0] && strcmp(g.pair[0], k[i].pair) == 0);
		SKY_EXPECT(strcmp(g.label[0], k[i].label) == 0);
	}
}

SKY_TEST(tsv_wrong_column_count)
{
	got g;
	sky_diag d;
	const char *f = "sentence\tlabel\nfine\t1\ntoo\tmany\t0\nshort\n";
	SKY_EXPECT_EQ(run(SKY_ROWS_TSV, f, &g, NULL, &d, NULL, NULL, NULL, -1), 0);
	SKY_EXPECT_EQ(g.n, 3);
	SKY_EXPECT_EQ(g.line[1], 3);
	SKY_EXPECT_MSG(strcmp(g.bad[1], "3 columns, expected 2 (as the header)") == 0, "%s",
		       g.bad[1]);
	SKY_EXPECT_EQ(g.line[2], 4);
	SKY_EXPECT(strcmp(g.bad[2], "1 column, expected 2 (as the header)") == 0);
	SKY_EXPECT(g.bad[0][0] == '\0');
}

SKY_TEST(columns_by_name_and_index)
{
	got g;
	sky_rows_layout L;
	sky_diag d;
	const char *f = "id,review,stars\n1,good,5\n";
	SKY_EXPECT_EQ(run(SKY_ROWS_CSV, f, &g, &L, &d, "review", NULL, "2", -1), 0);
	SKY_EXPECT(strcmp(g.text[0], "good") == 0 && strcmp(g.label[0], "5") == 0);
	SKY_EXPECT(strcmp(L.label, "stars") == 0 && L.label_i == 2);
	SKY_EXPECT_EQ(run(SKY_ROWS_CSV, f, &g, &L, &d, "body", NULL, "stars", -1), SKY_ENOTFOUND);
	SKY_EXPECT_MSG(strcmp(d.msg, "text column 'body' is not in the header ('id', 'review', "
				     "'stars')") == 0,
		       "%s", d.msg);
	SKY_EXPECT_EQ(run(SKY_ROWS_CSV, f, &g, &L, &d, "1", NULL, "3", -1), SKY_ERANGE);
	SKY_EXPECT(strstr(d.msg, "label column 3: the file has 3 columns") != NULL);
	/* no text column named and none in the header */
	SKY_EXPECT_EQ(run(SKY_ROWS_CSV, f, &g, &L, &d, NULL, NULL, NULL, -1), SKY_ENOTFOUND);
	SKY_EXPECT(strstr(d.msg, "no text column") != NULL);
	/* --no-header: line 1 is a row */
	SKY_EXPECT_EQ(run(SKY_ROWS_CSV, "a,0\nb,1\n", &g, &L, &d, NULL, NULL, NULL, 0), 0);
	SKY_EXPECT_EQ(g.n, 2);
	SKY_EXPECT_EQ(g.line[0], 1);
}

SKY_TEST(csv_quoting_and_embedded_newlines)
{
	got g;
	sky_rows_layout L;
	sky_diag d;
	const char *f = "text,label\r\n"
			"\"one, \"\"two\"\"\r\nthree\",pos\r\n" /* lines 2-3 */
			"\r\n"                                   /* 4: blank */
			"  spaced  ,neg\r\n"                     /* 5 */
			"\"a\n\nb\",neg\n";                      /* 6-8, a blank line inside */
	SKY_EXPECT_EQ(run(SKY_ROWS_CSV, f, &g, &L, &d, NULL, NULL, NULL, -1), 0);
	SKY_EXPECT_EQ(g.n, 3);
	SKY_EXPECT_MSG(strcmp(g.text[0], "one, \"two\"\r\nthree") == 0, "%s", g.text[0]);
	SKY_EXPECT_EQ(g.line[0], 2);
	SKY_EXPECT(strcmp(g.text[1], "  spaced  ") == 0); /* spaces are kept */
	SKY_EXPECT_EQ(g.line[1], 5);
	SKY_EXPECT(strcmp(g.text[2], "a\n\nb") == 0);
	SKY_EXPECT_EQ(g.line[2], 6);
	SKY_EXPECT(strcmp(g.label[2], "neg") == 0);
}

SKY_TEST(csv_bad_quoting)
{
	got g;
	sky_diag d;
	const char *f = "text,label\nbad\"quote,1\n\"closed\"junk,0\nfine,1\n\"never closed,0\nx,1\n";
	SKY_EXPECT_EQ(run(SKY_ROWS_CSV, f, &g, NULL, &d, NULL, NULL, NULL, -1), 0);
	SKY_EXPECT_EQ(g.n, 4);
	SKY_EXPECT_EQ(g.line[0], 2);
	SKY_EXPECT_MSG(strncmp(g.bad[0], "malformed CSV quoting", 21) == 0, "%s", g.bad[0]);
	SKY_EXPECT_EQ(g.line[1], 3);
	SKY_EXPECT(strncmp(g.bad[1], "malformed CSV quoting", 21) == 0);
	SKY_EXPECT_EQ(g.line[2], 4);
	SKY_EXPECT(g.bad[2][0] == '\0' && strcmp(g.text[2], "fine") == 0);
	/* the rest of the file is inside the open quote */
	SKY_EXPECT_EQ(g.line[3], 5);
	SKY_EXPECT_MSG(strcmp(g.bad[3], "a quoted field opened on line 5 is never closed") == 0, "%s",
		       g.bad[3]);
	/* wrong column count in CSV */
	SKY_EXPECT_EQ(run(SKY_ROWS_CSV, "text,label\na,b,c\n", &g, NULL, &d, NULL, NULL, NULL, -1), 0);
	SKY_EXPECT(strcmp(g.bad[0], "3 columns, expected 2 (as the header)") == 0);
}

SKY_TEST(jsonl_values)
{
	got g;
	sky_rows_layout L;
	sky_diag d;
	const char *f = "\xef\xbb\xbf{\"text\":\"caf\\u00e9\",\"label\":2}\n"
			"{\"text\":\"b\",\"label\":\"neg\"}\n"
			"\n"
			"{\"text\":\"c\",\"label\":1.5}\n"
			"{\"label\":1}\n"
			"{\"text\":7,\"label\":1}\n"
			"not json\n"
			"[\"x\",1]\n"
			"{\"text\":\"d\",\"label\":true}\n";
	SKY_EXPECT_EQ(run(SKY_ROWS_JSONL, f, &g, &L, &d, NULL, NULL, NULL, -1), 0);
	SKY_EXPECT_EQ(g.n, 8);
	SKY_EXPECT(strcmp(g.text[0], "caf\xc3\xa9") == 0 && strcmp(g.label[0], "2") == 0);
	SKY_EXPECT(g.number[0] && !g.number[1]);
	SKY_EXPECT_EQ(g.line[2], 4);
	SKY_EXPECT_MSG(strcmp(g.bad[2], "label 1.5 in field 'label' is not a whole number") == 0, "%s",
		       g.bad[2]);
	SKY_EXPECT(strcmp(g.bad[3], "no text field 'text'") == 0);
	SKY_EXPECT(strcmp(g.bad[4], "text field 'text' is not a string") == 0);
	SKY_EXPECT_MSG(strncmp(g.bad[5], "not JSON (", 10) == 0, "%s", g.bad[5]);
	SKY_EXPECT_MSG(strcmp(g.bad[6], "a JSON array, but line 1 held an object") == 0, "%s",
		       g.bad[6]);
	SKY_EXPECT(strcmp(g.bad[7], "label field 'label' is not a string or a number") == 0);
	SKY_EXPECT_EQ(sky_json_pool_used(), 0);
	/* arrays: columns by index */
	SKY_EXPECT_EQ(run(SKY_ROWS_JSONL, "[\"a\",\"b\",0]\n[\"c\"]\n", &g, &L, &d, "0", "1", "2",
			  -1),
		      0);
	SKY_EXPECT(strcmp(g.text[0], "a") == 0 && strcmp(g.pair[0], "b") == 0 &&
		   strcmp(g.label[0], "0") == 0);
	SKY_EXPECT(strcmp(g.bad[1], "1 values, expected 3 (as line 1)") == 0);
}

SKY_TEST(empty_file)
{
	got g;
	sky_diag d;
	SKY_EXPECT_EQ(run(SKY_ROWS_TSV, "\n\n", &g, NULL, &d, NULL, NULL, NULL, -1), SKY_EFORMAT);
	SKY_EXPECT(strstr(d.msg, "empty") != NULL);
	SKY_EXPECT_EQ(run(SKY_ROWS_CSV, "", &g, NULL, &d, NULL, NULL, NULL, -1), SKY_EFORMAT);
}

SKY_TEST(format_from_name)
{
	sky_rows_format f;
	SKY_EXPECT(sky_rows_format_of("a/train.tsv", &f) == 0 && f == SKY_ROWS_TSV);
	SKY_EXPECT(sky_rows_format_of("x.csv", &f) == 0 && f == SKY_ROWS_CSV);
	SKY_EXPECT(sky_rows_format_of("x.jsonl", &f) == 0 && f == SKY_ROWS_JSONL);
	SKY_EXPECT_EQ(sky_rows_format_of("x.txt", &f), SKY_EINVAL);
}
