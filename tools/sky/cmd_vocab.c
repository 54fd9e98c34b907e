/* sky vocab build: a WordPiece vocabulary (Hugging Face's vocab.txt
 * format) from training text.
 *
 * The algorithm, simple and deterministic:
 *   1. every line of the corpus goes through BERT's basic tokenizer
 *      (sky_tok_basic: lower case and accents off unless --cased); lines
 *      that are not UTF-8 are skipped and counted;
 *   2. the vocabulary starts with [PAD] [UNK] [CLS] [SEP] [MASK];
 *   3. then every character seen, as a word start ("a") and, where it was
 *      seen inside a word, as a continuation ("##a"), most frequent first,
 *      so that any word of these characters can be spelt;
 *   4. then pieces of 2 to 16 characters, as word starts (the prefixes of
 *      words, whole words included) and continuations ("##" + any later
 *      substring), scored by the characters they save: occurrences x
 *      (length - 1); the best scores fill the vocabulary up to --size.
 * Ties are broken by the token's bytes, so the same corpus and size give
 * the same file on every machine. */
#include "sky_cli.h"

#include "sky_err.h"
#include "sky_file.h"
#include "sky_opt.h"
#include "sky_tokenizer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PIECE_CHARS 16

/* A counting map of strings: open addressing over entries that point into
 * one growing byte store. */
typedef struct entry {
	size_t off;
	uint32_t len, hash;
	uint64_t count;
	uint64_t cont; /* characters: occurrences inside a word */
} entry;

typedef struct counts {
	entry *e;
	size_t n, cap; /* cap a power of two */
	char *bytes;
	size_t nbytes, bcap;
	int oom;
} counts;

static uint32_t hash_bytes(const char *s, size_t n)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 16777619u;
	return h;
}

static entry *counts_get(counts *m, const char *s, size_t len)
{
	if (m->oom)
		return NULL;
	if (2 * (m->n + 1) > m->cap) {
		size_t nc = m->cap ? m->cap * 2 : 1024;
		entry *ne = calloc(nc, sizeof *ne);
		if (!ne) {
			m->oom = 1;
			return NULL;
		}
		for (size_t i = 0; i < m->cap; i++) {
			if (!m->e[i].len)
				continue;
			size_t j = m->e[i].hash & (nc - 1);
			while (ne[j].len)
				j = (j + 1) & (nc - 1);
			ne[j] = m->e[i];
		}
		free(m->e);
		m->e = ne;
		m->cap = nc;
	}
	uint32_t h = hash_bytes(s, len);
	size_t j = h & (m->cap - 1);
	for (; m->e[j].len; j = (j + 1) & (m->cap - 1))
		if (m->e[j].hash == h && m->e[j].len == len &&
		    memcmp(m->bytes + m->e[j].off, s, len) == 0)
			return &m->e[j];
	if (m->nbytes + len + 1 > m->bcap) {
		size_t nb = m->bcap ? m->bcap * 2 : 1 << 16;
		while (nb < m->nbytes + len + 1)
			nb *= 2;
		char *b = realloc(m->bytes, nb);
		if (!b) {
			m->oom = 1;
			return NULL;
		}
		m->bytes = b;
		m->bcap = nb;
	}
	memcpy(m->bytes + m->nbytes, s, len);
	m->bytes[m->nbytes + len] = 0;
	entry *e = &m->e[j];
	e->off = m->nbytes;
	e->len = (uint32_t)len;
	e->hash = h;
	m->nbytes += len + 1;
	m->n++;
	return e;
}

static void counts_free(counts *m)
{
	free(m->e);
	free(m->bytes);
	memset(m, 0, sizeof *m);
}

typedef struct build {
	counts words;
	uint64_t long_words;
} build;

static void on_word(void *ctx, const char *w, size_t len)
{
	build *b = ctx;
	if (!len) {
		b->long_words++;
		return;
	}
	entry *e = counts_get(&b->words, w, len);
	if (e)
		e->count++;
}

/* A candidate token with its score, for sorting. */
typedef struct cand {
	const char *s;
	uint64_t score;
} cand;

static int cand_cmp(const void *pa, const void *pb)
{
	const cand *a = pa, *b = pb;
	if (a->score != b->score)
		return a->score > b->score ? -1 : 1;
	return strcmp(a->s, b->s);
}

/* Byte offsets of the code points of s[0..len) into at (at most cap),
 * at[n] = len; returns n. */
static int char_starts(const char *s, size_t len, size_t *at, int cap)
{
	int n = 0;
	for (size_t i = 0; i < len && n < cap; i++)
		if (((unsigned char)s[i] & 0xC0) != 0x80)
			at[n++] = i;
	at[n] = len;
	return n;
}

static void usage(FILE *to)
{
	fprintf(to,
		"usage: sky vocab build --corpus FILE --size N --out vocab.txt [--cased]\n"
		"  a WordPiece vocabulary from training text, one token per line: the special\n"
		"  tokens [PAD] [UNK] [CLS] [SEP] [MASK], every character (and its ## form),\n"
		"  then the 2-16 character pieces that save the most characters\n"
		"  (occurrences x (length - 1)); deterministic. Text is lower-cased and its\n"
		"  accents stripped first, as BERT's uncased tokenizer does, unless --cased.\n"
		"  Prints {\"tokens\":..,\"characters\":..,\"words\":..,\"lines_skipped\":..}\n");
}

static int vocab_build(int argc, char **argv)
{
	const char *corpus = NULL, *out = NULL;
	long size = 0;
	int cased = 0;
	enum { O_CORPUS = SKY_OPT_FIRST, O_SIZE, O_OUT, O_CASED };
	static const struct option k_opts[] = {{"corpus", required_argument, NULL, O_CORPUS},
					       {"size", required_argument, NULL, O_SIZE},
					       {"out", required_argument, NULL, O_OUT},
					       {"cased", no_argument, NULL, O_CASED},
					       SKY_OPT_STD,
					       {0}};
	sky_opt op;
	sky_opt_begin(&op, "sky vocab build", argc, argv, k_opts, 0);
	for (int c; (c = sky_opt_next(&op)) != SKY_OPT_END;) {
		switch (c) {
		case SKY_OPT_HELP:
			usage(stdout);
			return 0;
		case SKY_OPT_VERSION:
			return 0;
		case O_CORPUS:
			corpus = op.arg;
			break;
		case O_OUT:
			out = op.arg;
			break;
		case O_SIZE:
			if (sky_cli_int("vocab build", op.name, op.arg, 6, SKY_TOK_MAX_VOCAB,
					&size) < 0)
				return 2;
			break;
		case O_CASED:
			cased = 1;
			break;
		default:
			return 2;
		}
	}
	if (sky_opt_no_args(&op) != 0)
		return 2;
	if (!corpus || !out || !size) {
		fprintf(stderr, "sky vocab build: --corpus, --size and --out are required\n");
		usage(stderr);
		return 2;
	}
	int rc = 1;
	sky_file_map m = {0};
	build b = {0};
	counts chars = {0}, pieces = {0};
	cand *cands = NULL;
	char *text = NULL;
	uint64_t skipped = 0;
	if (sky_file_map_open(&m, corpus) != 0) {
		fprintf(stderr, "sky vocab build: cannot read %s\n", corpus);
		goto exit;
	}
	sky_tok_flags f;
	sky_tok_flags_default(&f);
	if (cased)
		f.lowercase = f.strip_accents = 0;
	const char *s = (const char *)m.data;
	for (size_t i = 0; i < m.size;) {
		const char *nl = memchr(s + i, '\n', m.size - i);
		size_t end = nl ? (size_t)(nl - s) : m.size;
		sky_diag d;
		sky_diag_clear(&d);
		if (sky_tok_basic(&f, s + i, end - i, on_word, &b, &d) != 0)
			skipped++;
		i = end + 1;
	}
	if (b.words.oom)
		goto oom;
	/* characters, and pieces of every distinct word weighted by its count */
	for (size_t w = 0; w < b.words.cap; w++) {
		const entry *we = &b.words.e[w];
		if (!we->len)
			continue;
		const char *ws = b.words.bytes + we->off;
		size_t at[SKY_TOK_MAX_WORD_CHARS + 2];
		int nc = char_starts(ws, we->len, at, SKY_TOK_MAX_WORD_CHARS + 1);
		char buf[2 + MAX_PIECE_CHARS * 4 + 1] = "##";
		for (int i = 0; i < nc; i++) {
			entry *ce = counts_get(&chars, ws + at[i], at[i + 1] - at[i]);
			if (!ce)
				goto oom;
			ce->count += i == 0 ? we->count : 0;
			ce->cont += i == 0 ? 0 : we->count;
			for (int j = i + 2; j <= nc && j - i <= MAX_PIECE_CHARS; j++) {
				size_t pl = at[j] - at[i];
				memcpy(buf + 2, ws + at[i], pl);
				/* a word start as itself, anything later as ##piece */
				entry *pe = counts_get(&pieces, i ? buf : buf + 2, i ? pl + 2 : pl);
				if (!pe)
					goto oom;
				pe->count += we->count * (uint64_t)(j - i - 1);
			}
		}
	}
	static const char *const k_special[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
	/* characters: starts then continuations, each most frequent first */
	size_t ncand = 2 * chars.n + pieces.n;
	cands = calloc(ncand ? ncand : 1, sizeof *cands);
	text = malloc((chars.nbytes + chars.n * 2) * 2 + pieces.nbytes + 1024);
	if (!cands || !text)
		goto oom;
	size_t nchar = 0, toff = 0;
	for (int pass = 0; pass < 2; pass++) {
		size_t first = nchar;
		for (size_t i = 0; i < chars.cap; i++) {
			const entry *ce = &chars.e[i];
			uint64_t cnt = pass ? ce->cont : ce->count + ce->cont;
			if (!ce->len || !cnt)
				continue;
			char *t = text + toff;
			toff += (size_t)sprintf(t, "%s%s", pass ? "##" : "", chars.bytes + ce->off) + 1;
			cands[nchar++] = (cand){t, cnt};
		}
		qsort(cands + first, nchar - first, sizeof *cands, cand_cmp);
	}
	size_t npiece = 0;
	for (size_t i = 0; i < pieces.cap; i++)
		if (pieces.e[i].len)
			cands[nchar + npiece++] = (cand){pieces.bytes + pieces.e[i].off,
							 pieces.e[i].count};
	qsort(cands + nchar, npiece, sizeof *cands, cand_cmp);
	/* write: specials, characters, pieces, up to size */
	size_t cap = 0, olen = 0;
	for (size_t i = 0; i < nchar + npiece; i++)
		cap += strlen(cands[i].s) + 1;
	char *o = malloc(cap + 64);
	if (!o)
		goto oom;
	long ntok = 0;
	for (int i = 0; i < 5; i++, ntok++)
		olen += (size_t)sprintf(o + olen, "%s\n", k_special[i]);
	long chars_kept = 0;
	for (size_t i = 0; i < nchar + npiece && ntok < size; i++, ntok++) {
		olen += (size_t)sprintf(o + olen, "%s\n", cands[i].s);
		chars_kept += i < nchar;
	}
	if (sky_file_write(out, o, olen, 0644) != 0) {
		fprintf(stderr, "sky vocab build: cannot write %s\n", out);
		free(o);
		goto exit;
	}
	free(o);
	printf("{\"tokens\":%ld,\"characters\":%ld,\"characters_left_out\":%ld,\"words\":%zu,"
	       "\"words_over_100_chars\":%llu,\"lines_skipped\":%llu,\"cased\":%s}\n",
	       ntok, chars_kept, (long)nchar - chars_kept, b.words.n,
	       (unsigned long long)b.long_words, (unsigned long long)skipped,
	       cased ? "true" : "false");
	if ((long)nchar > chars_kept)
		fprintf(stderr,
			"sky vocab build: --size %ld leaves out %ld of the corpus's %zu characters "
			"(their words become [UNK])\n",
			size, (long)nchar - chars_kept, nchar);
	rc = 0;
	goto exit;
oom:
	fprintf(stderr, "sky vocab build: out of memory\n");
exit:
	free(cands);
	free(text);
	counts_free(&b.words);
	counts_free(&chars);
	counts_free(&pieces);
	sky_file_map_close(&m);
	return rc;
}

static void vocab_usage(FILE *to)
{
	fprintf(to, "usage: sky vocab <what> [options] (sky vocab <what> --help)\n\n"
		    "  build    a WordPiece vocab.txt from training text (--corpus, --size)\n");
}

int sky_cmd_vocab(int argc, char **argv)
{
	static const sky_cmd k_subs[] = {
		{"build", "a WordPiece vocab.txt from training text", vocab_build},
	};
	return sky_cli_dispatch("sky vocab", argc, argv, k_subs, 1, vocab_usage);
}
