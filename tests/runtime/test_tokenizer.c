/* BERT's tokenizer against Hugging Face's: every line of
 * tests/data/tokenizer/corpus.txt, alone and paired with the next, with and
 * without truncation, for a cased, an uncased and a lower-case-with-accents
 * vocabulary, each read from vocab.txt + tokenizer_config.json and from the
 * tokenizer.json BertTokenizerFast makes of it; golden ids from
 * tools/golden/tokenizer_golden.js. Then the refusals. */
#include "sky_test.h"

#include "sky_file.h"
#include "sky_json.h"
#include "sky_tokenizer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LINES 512
#define MAX_IDS 4096

typedef struct corpus {
	sky_file_map m;
	int n;
	const char *line[MAX_LINES];
	size_t len[MAX_LINES];
} corpus;

static int corpus_load(corpus *c)
{
	char path[512];
	memset(c, 0, sizeof *c);
	snprintf(path, sizeof path, "%s/tokenizer/corpus.txt", sky_test_data_dir());
	if (sky_file_map_open(&c->m, path) != 0)
		return -1;
	const char *s = (const char *)c->m.data;
	for (size_t i = 0; i < c->m.size && c->n < MAX_LINES;) {
		const char *nl = memchr(s + i, '\n', c->m.size - i);
		size_t end = nl ? (size_t)(nl - s) : c->m.size;
		c->line[c->n] = s + i;
		c->len[c->n++] = end - i;
		i = end + 1;
	}
	return 0;
}

/* Reads a JSON array of integers into v (at most cap); returns its length
 * or -1. */
static int int_array(const cJSON *o, const char *key, int32_t *v, int cap)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key), *x;
	int n = 0;
	if (!cJSON_IsArray(a))
		return -1;
	cJSON_ArrayForEach(x, a)
	{
		if (n >= cap || !cJSON_IsNumber(x))
			return -1;
		v[n++] = (int32_t)x->valuedouble;
	}
	return n;
}

typedef struct check {
	int encodings, mismatches;
	unsigned long allocs;
} check;

static int32_t g_ids[MAX_IDS], g_type[MAX_IDS], g_mask[MAX_IDS];
static int32_t s_ids[MAX_IDS], s_type[MAX_IDS], s_mask[MAX_IDS];

/* Compares Sky with the golden file of vocabulary `golden` for the
 * tokenizer in dir. */
static void check_dir(const corpus *c, const char *dir, const char *golden, check *ck)
{
	char path[512];
	sky_tokenizer t;
	sky_diag d;
	sky_diag_clear(&d);
	snprintf(path, sizeof path, "%s/tokenizer/%s", sky_test_data_dir(), dir);
	int rc = sky_tok_load_dir(&t, path, &d);
	SKY_EXPECT_MSG(rc == 0, "%s: %s", dir, d.msg);
	if (rc)
		return;
	snprintf(path, sizeof path, "%s/tokenizer/golden_%s.jsonl", sky_test_data_dir(), golden);
	sky_file_map m = {0};
	SKY_EXPECT(sky_file_map_open(&m, path) == 0);
	const char *s = (const char *)m.data;
	for (size_t i = 0; i < m.size;) {
		const char *nl = memchr(s + i, '\n', m.size - i);
		size_t end = nl ? (size_t)(nl - s) : m.size;
		cJSON *o = sky_json_parse(s + i, end - i, &d);
		i = end + 1;
		SKY_EXPECT(o != NULL);
		if (!o)
			break;
		int line = 0, seq = 0, pair = 0;
		const cJSON *pj = cJSON_GetObjectItemCaseSensitive(o, "pair");
		SKY_EXPECT(sky_json_int(o, "line", 1, c->n, &line, "golden", &d) == 0);
		SKY_EXPECT(sky_json_int(o, "seq", 0, MAX_IDS, &seq, "golden", &d) == 0);
		if (cJSON_IsNumber(pj))
			pair = (int)pj->valuedouble;
		int n = int_array(o, "ids", g_ids, MAX_IDS);
		SKY_EXPECT(int_array(o, "type_ids", g_type, MAX_IDS) == n);
		SKY_EXPECT(int_array(o, "mask", g_mask, MAX_IDS) == n);
		sky_json_free(o);
		if (line < 1 || pair < 0 || pair > c->n || n < 0)
			continue;
		const char *a = c->line[line - 1], *b = pair ? c->line[pair - 1] : NULL;
		size_t alen = c->len[line - 1], blen = pair ? c->len[pair - 1] : 0;
		sky_tok_enc e = {s_ids, s_type, s_mask, seq ? seq : MAX_IDS, seq > 0, 0, 0, 0};
		unsigned long before = sky_test_allocs();
		rc = sky_tok_encode(&t, a, alen, b, blen, &e, &d);
		ck->allocs += sky_test_allocs() - before;
		ck->encodings++;
		int len = seq ? seq : e.len;
		int bad = rc != 0 || len != n;
		for (int k = 0; !bad && k < n; k++)
			bad = s_ids[k] != g_ids[k] || s_type[k] != g_type[k] || s_mask[k] != g_mask[k];
		if (bad && ck->mismatches++ < 8) {
			int k = 0;
			while (k < n && k < len && s_ids[k] == g_ids[k] && s_type[k] == g_type[k] &&
			       s_mask[k] == g_mask[k])
				k++;
			SKY_EXPECT_MSG(0,
				       "%s: line %d%s%.0d seq %d: %d tokens (HF %d), first difference "
				       "at %d: id %d '%s' (HF %d '%s') rc %d %s",
				       dir, line, pair ? " pair " : "", pair, seq, len, n, k,
				       k < len ? s_ids[k] : -1,
				       k < len ? sky_tok_token(&t, s_ids[k]) : "", k < n ? g_ids[k] : -1,
				       k < n ? sky_tok_token(&t, g_ids[k]) : "", rc, d.msg);
		}
	}
	sky_file_map_close(&m);
	sky_tok_free(&t);
}

SKY_TEST(tokenizer_matches_hf_on_the_corpus)
{
	static corpus c;
	SKY_EXPECT(corpus_load(&c) == 0);
	SKY_EXPECT(c.n >= 100);
	static const char *const k_dirs[][2] = {
		{"uncased", "uncased"},		  {"json-uncased", "uncased"},
		{"cased", "cased"},		  {"json-cased", "cased"},
		{"lower-accents", "lower-accents"}, {"json-lower-accents", "lower-accents"},
	};
	for (size_t i = 0; i < sizeof k_dirs / sizeof k_dirs[0]; i++) {
		check ck = {0, 0, 0};
		check_dir(&c, k_dirs[i][0], k_dirs[i][1], &ck);
		printf("   %s: %d encodings, %d differ from HF\n", k_dirs[i][0], ck.encodings,
		       ck.mismatches);
		SKY_EXPECT_EQ(ck.encodings, 4 * c.n);
		SKY_EXPECT_EQ(ck.mismatches, 0);
		SKY_EXPECT_EQ(ck.allocs, 0); /* encoding never allocates */
	}
	sky_file_map_close(&c.m);
}

SKY_TEST(tokenizer_json_and_vocab_txt_are_the_same_tokenizer)
{
	char p1[512], p2[512];
	sky_tokenizer a, b;
	sky_diag d;
	sky_diag_clear(&d);
	snprintf(p1, sizeof p1, "%s/tokenizer/uncased", sky_test_data_dir());
	snprintf(p2, sizeof p2, "%s/tokenizer/json-uncased", sky_test_data_dir());
	SKY_EXPECT(sky_tok_load_dir(&a, p1, &d) == 0);
	SKY_EXPECT(sky_tok_load_dir(&b, p2, &d) == 0);
	SKY_EXPECT_EQ(a.n, b.n);
	SKY_EXPECT_EQ(a.hash, b.hash);
	SKY_EXPECT_EQ(a.id_cls, 2);
	SKY_EXPECT_EQ(sky_tok_find(&a, "[SEP]", 5), 3);
	SKY_EXPECT(strcmp(sky_tok_token(&a, 4), "[MASK]") == 0);
	SKY_EXPECT(sky_tok_token(&a, (int32_t)a.n) == NULL);
	snprintf(p2, sizeof p2, "%s/tokenizer/cased", sky_test_data_dir());
	sky_tok_free(&b);
	SKY_EXPECT(sky_tok_load_dir(&b, p2, &d) == 0);
	SKY_EXPECT(a.hash != b.hash);
	sky_tok_free(&a);
	sky_tok_free(&b);
	sky_tok_free(&b); /* twice is fine */
}

/* Loads vocab text and expects rc with a message holding want. */
static void refuse_vocab(const char *text, int want_rc, const char *want)
{
	sky_tokenizer t;
	sky_tok_flags f;
	sky_diag d;
	sky_diag_clear(&d);
	sky_tok_flags_default(&f);
	int rc = sky_tok_load_vocab(&t, text, strlen(text), &f, &d);
	SKY_EXPECT_MSG(rc == want_rc, "rc %d, want %d (%s)", rc, want_rc, d.msg);
	SKY_EXPECT_MSG(strstr(d.msg, want) != NULL, "message '%s' lacks '%s'", d.msg, want);
	SKY_EXPECT(t.block == NULL);
}

#define SPECIALS "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n"

SKY_TEST(tokenizer_refuses_bad_vocab_txt)
{
	refuse_vocab(SPECIALS "a\nb\na\n", SKY_EFORMAT, "token 'a' is on line 6 and again on line 8");
	refuse_vocab(SPECIALS "a\n\xff\xfe\n", SKY_EFORMAT, "line 7 is not valid UTF-8");
	refuse_vocab(SPECIALS "a\n\xc3\n", SKY_EFORMAT, "line 7 is not valid UTF-8");
	refuse_vocab(SPECIALS "a\xed\xa0\x80\n", SKY_EFORMAT, "line 6 is not valid UTF-8"); /* surrogate */
	refuse_vocab(SPECIALS "a\n\nb\n", SKY_EFORMAT, "line 7 is empty");
	refuse_vocab("[PAD]\n[UNK]\n[SEP]\n", SKY_ENOTFOUND, "no [CLS]");
	refuse_vocab("[PAD]\n[UNK]\n[CLS]\n", SKY_ENOTFOUND, "no [SEP]");
	refuse_vocab("[PAD]\n[CLS]\n[SEP]\n", SKY_ENOTFOUND, "no unknown token '[UNK]'");
	refuse_vocab("[UNK]\n[CLS]\n[SEP]\n", SKY_ENOTFOUND, "no [PAD]");
	refuse_vocab("", SKY_EFORMAT, "no tokens");
	static char big[SKY_TOK_MAX_TOKEN_BYTES + 64];
	memset(big, 'x', sizeof big - 1);
	memcpy(big, SPECIALS, strlen(SPECIALS));
	refuse_vocab(big, SKY_EFORMAT, "line 6 is");
	/* CRLF line ends are fine, and so is a last line without one */
	sky_tokenizer t;
	sky_tok_flags f;
	sky_diag d;
	sky_diag_clear(&d);
	sky_tok_flags_default(&f);
	const char *crlf = "[PAD]\r\n[UNK]\r\n[CLS]\r\n[SEP]\r\nhello";
	SKY_EXPECT(sky_tok_load_vocab(&t, crlf, strlen(crlf), &f, &d) == 0);
	SKY_EXPECT_EQ(t.n, 5);
	SKY_EXPECT_EQ(sky_tok_find(&t, "hello", 5), 4);
	SKY_EXPECT_EQ(t.id_mask, -1);
	sky_tok_free(&t);
}

static void refuse_json(const char *json, int want_rc, const char *want)
{
	sky_tokenizer t;
	sky_diag d;
	sky_diag_clear(&d);
	int rc = sky_tok_load_json(&t, json, strlen(json), &d);
	SKY_EXPECT_MSG(rc == want_rc, "rc %d, want %d (%s)", rc, want_rc, d.msg);
	SKY_EXPECT_MSG(strstr(d.msg, want) != NULL, "message '%s' lacks '%s'", d.msg, want);
	SKY_EXPECT(t.block == NULL);
}

#define JVOCAB "\"vocab\":{\"[PAD]\":0,\"[UNK]\":1,\"[CLS]\":2,\"[SEP]\":3,\"a\":4}"
#define JPRE "\"pre_tokenizer\":{\"type\":\"BertPreTokenizer\"}"

SKY_TEST(tokenizer_refuses_bad_tokenizer_json)
{
	refuse_json("{\"model\":{\"type\":\"BPE\",\"vocab\":{}}," JPRE "}", SKY_EUNSUPPORTED,
		    "model type 'BPE' is not supported");
	refuse_json("{\"model\":{\"type\":\"WordPiece\"," JVOCAB "},\"normalizer\":{\"type\":\"NFKC\"},"
		    JPRE "}",
		    SKY_EUNSUPPORTED, "normalizer 'NFKC'");
	refuse_json("{\"model\":{\"type\":\"WordPiece\"," JVOCAB "},\"pre_tokenizer\":{\"type\":"
		    "\"Metaspace\"}}",
		    SKY_EUNSUPPORTED, "pre_tokenizer 'Metaspace'");
	refuse_json("{\"model\":{\"type\":\"WordPiece\",\"vocab\":{\"[PAD]\":0,\"[UNK]\":7}}," JPRE "}",
		    SKY_EFORMAT, "token '[UNK]' has id outside 0..1");
	refuse_json("{\"model\":{\"type\":\"WordPiece\",\"vocab\":{\"[PAD]\":0,\"[UNK]\":0}}," JPRE "}",
		    SKY_EFORMAT, "id 0 is given twice");
	refuse_json("{\"model\":{\"type\":\"WordPiece\",\"vocab\":{\"[PAD]\":0,\"[PAD]\":1}}," JPRE "}",
		    SKY_EFORMAT, "token '[PAD]' has ids 0 and 1");
	refuse_json("{\"model\":{\"type\":\"WordPiece\",\"vocab\":{\"[PAD]\":0,\"[UNK]\":1,"
		    "\"[SEP]\":2}}," JPRE "}",
		    SKY_ENOTFOUND, "no [CLS]");
	refuse_json("{\"model\":{\"type\":\"WordPiece\"," JVOCAB ",\"max_input_chars_per_word\":-1},"
		    JPRE "}",
		    SKY_ERANGE, "max_input_chars_per_word");
	refuse_json("{\"model\":{\"type\":\"WordPiece\"," JVOCAB "},\"normalizer\":{\"type\":"
		    "\"BertNormalizer\",\"lowercase\":\"yes\"}," JPRE "}",
		    SKY_EFORMAT, "lowercase is not true, false or null");
	refuse_json("[1,2", SKY_EFORMAT, "");
}

SKY_TEST(tokenizer_refuses_bad_text)
{
	char path[512];
	sky_tokenizer t;
	sky_diag d;
	sky_diag_clear(&d);
	snprintf(path, sizeof path, "%s/tokenizer/uncased", sky_test_data_dir());
	SKY_EXPECT(sky_tok_load_dir(&t, path, &d) == 0);
	int32_t ids[8], ty[8], mk[8];
	sky_tok_enc e = {ids, ty, mk, 8, 1, 0, 0, 0};
	const char *bad = "hello \xe2\x82 world";
	SKY_EXPECT_EQ(sky_tok_encode(&t, bad, strlen(bad), NULL, 0, &e, &d), SKY_EFORMAT);
	SKY_EXPECT_MSG(strstr(d.msg, "text: invalid UTF-8 at byte 6") != NULL, "%s", d.msg);
	sky_diag_clear(&d);
	const char *b2 = "ok \xc0\xaf"; /* overlong '/' */
	SKY_EXPECT_EQ(sky_tok_encode(&t, "fine", 4, b2, strlen(b2), &e, &d), SKY_EFORMAT);
	SKY_EXPECT_MSG(strstr(d.msg, "pair: invalid UTF-8 at byte 3") != NULL, "%s", d.msg);
	sky_diag_clear(&d);
	e.cap = 2;
	SKY_EXPECT_EQ(sky_tok_encode(&t, "a", 1, "b", 1, &e, &d), SKY_EINVAL);
	e.cap = 2;
	SKY_EXPECT_EQ(sky_tok_encode(&t, "a", 1, NULL, 0, &e, &d), 0);
	SKY_EXPECT_EQ(e.len, 2); /* [CLS] [SEP]: a is truncated away */
	SKY_EXPECT_EQ(e.n_a, 1);
	SKY_EXPECT_EQ(sky_tok_count(&t, "the, world", 10, &d), 3);
	sky_tok_free(&t);
}

/* Longest-first truncation on every pair of lengths, as HF keeps them
 * (golden_truncation.jsonl): one-piece words and one word of many pieces. */
SKY_TEST(tokenizer_truncates_as_hf_on_every_length_pair)
{
	static const char k_vocab[] = "[PAD]\n[UNK]\n[CLS]\n[SEP]\na\nb\n##a\n##b\n";
	static char ta[256], tb[256];
	sky_tokenizer t;
	sky_tok_flags f;
	sky_diag d;
	sky_diag_clear(&d);
	sky_tok_flags_default(&f);
	SKY_EXPECT(sky_tok_load_vocab(&t, k_vocab, strlen(k_vocab), &f, &d) == 0);
	char path[512];
	snprintf(path, sizeof path, "%s/tokenizer/golden_truncation.jsonl", sky_test_data_dir());
	sky_file_map m = {0};
	SKY_EXPECT(sky_file_map_open(&m, path) == 0);
	const char *s = (const char *)m.data;
	int grids = 0, cases = 0, bad = 0;
	for (size_t i = 0; i < m.size;) {
		const char *nl = memchr(s + i, '\n', m.size - i);
		size_t end = nl ? (size_t)(nl - s) : m.size;
		cJSON *o = sky_json_parse(s + i, end - i, &d);
		i = end + 1;
		int seq = 0, words = 0, max = 0;
		SKY_EXPECT(o && sky_json_int(o, "seq", 3, 64, &seq, "grid", &d) == 0 &&
			   sky_json_int(o, "words", 0, 1, &words, "grid", &d) == 0 &&
			   sky_json_int(o, "max", 0, 120, &max, "grid", &d) == 0);
		const cJSON *kept = cJSON_GetObjectItemCaseSensitive(o, "kept"), *k = NULL;
		SKY_EXPECT_EQ(cJSON_GetArraySize(kept), (max + 1) * (max + 1));
		k = kept ? kept->child : NULL;
		for (int na = 0; na <= max; na++) {
			for (int nb = 0; nb <= max && k; nb++, k = k->next) {
				size_t la = 0, lb = 0;
				for (int j = 0; j < na; j++)
					la += (size_t)sprintf(ta + la, words && j ? " a" : "a");
				for (int j = 0; j < nb; j++)
					lb += (size_t)sprintf(tb + lb, words && j ? " b" : "b");
				sky_tok_enc e = {s_ids, s_type, s_mask, seq, 1, 0, 0, 0};
				SKY_EXPECT(sky_tok_encode(&t, ta, la, tb, lb, &e, &d) == 0);
				int ca = 0, cb = 0;
				for (int j = 0; j < e.len; j++) {
					ca += s_ids[j] == 4 || s_ids[j] == 6;
					cb += s_ids[j] == 5 || s_ids[j] == 7;
				}
				int wa = (int)cJSON_GetArrayItem(k, 0)->valuedouble;
				int wb = (int)cJSON_GetArrayItem(k, 1)->valuedouble;
				cases++;
				if ((ca != wa || cb != wb) && bad++ < 5)
					SKY_EXPECT_MSG(0, "seq %d %s: %d, %d pieces kept as %d, %d (HF %d, %d)",
						       seq, words ? "words" : "one word", na, nb, ca, cb,
						       wa, wb);
			}
		}
		grids++;
		sky_json_free(o);
	}
	printf("   %d grids, %d length pairs, %d differ from HF\n", grids, cases, bad);
	SKY_EXPECT_EQ(grids, 8);
	SKY_EXPECT_EQ(bad, 0);
	sky_file_map_close(&m);
	sky_tok_free(&t);
}
