/* sky bench tokenize: MB/s of Sky's BERT tokenizer (sky_tokenizer.h) and
 * of Hugging Face's tokenizers on the same text with the same vocabulary,
 * in one run. HF runs through node (tools/bench_tokenize_hf.js) when node
 * and the npm package are there; otherwise Sky's figure is reported alone
 * with the reason. Both encode every line of the text without truncation
 * and count the pieces, which must agree. */
#include "bench_util.h"
#include "sky_cli.h"
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
		"usage: sky bench tokenize [--model-dir DIR] [--text FILE] [--mb N] [--no-hf]\n"
		"                          [common options]\n"
		"Encodes every line of a text with Sky's tokenizer and with Hugging Face's\n"
		"tokenizers (node and its npm package, encodeBatch), and reports\n"
		"the MB/s of each and the pieces each counted.\n"
		"  --model-dir DIR  tokenizer.json or vocab.txt (default %s)\n"
		"  --text FILE      the text (default: the fortunes collections in\n"
		"                   " FORTUNES ", repeated to --mb)\n"
		"  --mb N           megabytes of fortunes text (default 4)\n"
		"  --hf-threads N   HF's worker threads (RAYON_NUM_THREADS, default 1: Sky\n"
		"                   runs on one)\n"
		"  --no-hf          Sky only\n"
		"common options (defaults here: --warmup 1 --runs 5):\n%s",
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
	if (ns->n >= MAX_NAMES || l >= sizeof ns->name[0] || (l > 4 && !strcmp(name + l - 4, ".dat")) ||
	    (l > 3 && !strcmp(name + l - 3, ".u8")))
		return 0;
	memcpy(ns->name[ns->n++], name, l + 1);
	return 0;
}

static int cmp_name(const void *a, const void *b) { return strcmp(a, b); }

/* The fortunes collections, sorted by name, repeated to at least mb MB, as
 * one buffer; NULL (why printed) if there are none. */
static char *fortunes_text(long mb, size_t *len)
{
	static names ns;
	ns.n = 0;
	if (sky_file_list(FORTUNES, "", add_name, &ns) != 0 || ns.n == 0) {
		fprintf(stderr, "sky bench tokenize: no fortunes in " FORTUNES
				" (apt-get install fortunes, or give --text)\n");
		return NULL;
	}
	qsort(ns.name, (size_t)ns.n, sizeof ns.name[0], cmp_name);
	size_t one = 0;
	char path[512];
	for (int i = 0; i < ns.n; i++) {
		snprintf(path, sizeof path, FORTUNES "/%s", ns.name[i]);
		long long sz = sky_file_size(path);
		one += sz > 0 ? (size_t)sz + 1 : 0;
	}
	size_t want = (size_t)mb << 20, reps = one ? (want + one - 1) / one : 1;
	char *buf = malloc(one * reps + 1);
	if (!buf)
		return NULL;
	size_t off = 0;
	for (int i = 0; i < ns.n; i++) {
		snprintf(path, sizeof path, FORTUNES "/%s", ns.name[i]);
		long n = sky_file_read(path, buf + off, one - off);
		if (n < 0)
			continue;
		off += (size_t)n;
		if (off && buf[off - 1] != '\n')
			buf[off++] = '\n';
	}
	for (size_t r = 1; r < reps; r++)
		memcpy(buf + r * off, buf, off);
	*len = off * reps;
	return buf;
}

typedef struct run_ctx {
	const sky_tokenizer *t;
	const char *text;
	size_t len;
	sky_tok_enc e;
	long tokens;
	long lines;
	int bad;
} run_ctx;

/* Encodes every line; ~all of a run's time is in sky_tok_encode. */
static int run_sky(void *p)
{
	run_ctx *c = p;
	long tokens = 0, lines = 0;
	sky_diag d;
	for (size_t i = 0; i < c->len;) {
		const char *nl = memchr(c->text + i, '\n', c->len - i);
		size_t end = nl ? (size_t)(nl - c->text) : c->len;
		if (sky_tok_encode(c->t, c->text + i, end - i, NULL, 0, &c->e, &d) == 0)
			tokens += c->e.len - 2;
		else
			c->bad++;
		lines++;
		i = end + 1;
	}
	c->tokens = tokens;
	c->lines = lines;
	return 0;
}

/* Where tools/bench_tokenize_hf.js is: $SKY_TOOLS, tools/ here, or beside
 * the build (<repo>/build/<board>/bin/sky). */
static int find_hf_script(char *out, size_t cap)
{
	const char *env = getenv("SKY_TOOLS");
	char bin[1024];
	if (env) {
		snprintf(out, cap, "%s/bench_tokenize_hf.js", env);
		return sky_file_exists(out) ? 0 : SKY_ENOTFOUND;
	}
	snprintf(out, cap, "tools/bench_tokenize_hf.js");
	if (sky_file_exists(out))
		return 0;
	if (sky_file_exe_dir(bin, sizeof bin) == 0) {
		snprintf(out, cap, "%s/../../../tools/bench_tokenize_hf.js", bin);
		if (sky_file_exists(out))
			return 0;
	}
	return SKY_ENOTFOUND;
}

/* Runs the HF side; returns its JSON document or NULL with why set. */
static cJSON *run_hf(const char *dir, const char *text_path, int runs, int threads, char *why,
		     size_t cap)
{
	char script[1200], cmd[4096], line[8192];
	if (find_hf_script(script, sizeof script) != 0) {
		snprintf(why, cap, "tools/bench_tokenize_hf.js not found (run from the repository)");
		return NULL;
	}
	/* quoted for the shell: the paths are ours or the user's own options */
	snprintf(cmd, sizeof cmd,
		 "command -v node >/dev/null 2>&1 || { echo '{\"ok\":false,\"why\":\"node is not "
		 "installed\"}'; exit 0; }; RAYON_NUM_THREADS=%d node '%s' --model-dir '%s' --text "
		 "'%s' --runs %d",
		 threads, script, dir, text_path, runs);
	FILE *p = popen(cmd, "r");
	if (!p) {
		snprintf(why, cap, "cannot start node");
		return NULL;
	}
	size_t n = fread(line, 1, sizeof line - 1, p);
	pclose(p);
	line[n] = 0;
	sky_diag d;
	sky_diag_clear(&d);
	cJSON *o = n ? sky_json_parse(line, n, &d) : NULL;
	if (!o) {
		snprintf(why, cap, "the node script printed no result");
		return NULL;
	}
	if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "ok"))) {
		const cJSON *w = cJSON_GetObjectItemCaseSensitive(o, "why");
		snprintf(why, cap, "%s", cJSON_IsString(w) ? w->valuestring : "the node script failed");
		sky_json_free(o);
		return NULL;
	}
	return o;
}

static double num(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

int sky_bench_tokenize(int argc, char **argv)
{
	sky_bench_opts bo;
	sky_bench_opts_default(&bo);
	bo.warmup = 1;
	bo.runs = 5;
	const char *dir = DEFAULT_DIR, *text_path = NULL;
	long mb = 4, hf_threads = 1;
	int no_hf = 0;
	enum { O_DIR = SKY_BENCH_OPT_OWN, O_TEXT, O_MB, O_NOHF, O_HFT };
	static const struct option k_opts[] = {{"model-dir", required_argument, NULL, O_DIR},
					       {"text", required_argument, NULL, O_TEXT},
					       {"mb", required_argument, NULL, O_MB},
					       {"no-hf", no_argument, NULL, O_NOHF},
					       {"hf-threads", required_argument, NULL, O_HFT},
					       SKY_BENCH_OPT_TABLE,
					       SKY_OPT_STD,
					       {0}};
	sky_opt op;
	sky_opt_begin(&op, "sky bench tokenize", argc, argv, k_opts, 0);
	for (int c; (c = sky_opt_next(&op)) != SKY_OPT_END;) {
		int orc = sky_bench_opt("bench tokenize", c, op.name, op.arg, &bo);
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
		} else if (c == O_TEXT) {
			text_path = op.arg;
		} else if (c == O_MB) {
			if (sky_cli_int("bench tokenize", op.name, op.arg, 1, 1024, &mb))
				return 2;
		} else if (c == O_HFT) {
			if (sky_cli_int("bench tokenize", op.name, op.arg, 1, 1024, &hf_threads))
				return 2;
		} else if (c == O_NOHF) {
			no_hf = 1;
		} else {
			return 2;
		}
	}
	if (sky_opt_no_args(&op) != 0)
		return 2;
	int rc = 1;
	sky_tokenizer t;
	sky_tok_init(&t);
	sky_file_map m = {0};
	char *text = NULL, tmp[600] = "";
	cJSON *hf = NULL, *o = NULL;
	long hf_tokens = 0;
	run_ctx c = {0};
	sky_diag d;
	sky_diag_clear(&d);
	int lrc = sky_tok_load_dir(&t, dir, &d);
	if (lrc) {
		fprintf(stderr, "sky bench tokenize: %s: %s\n", sky_strerror(lrc), d.msg);
		goto exit;
	}
	size_t len = 0;
	if (text_path) {
		if (sky_file_map_open(&m, text_path) != 0) {
			fprintf(stderr, "sky bench tokenize: cannot read %s\n", text_path);
			goto exit;
		}
		c.text = (const char *)m.data;
		len = m.size;
	} else {
		text = fortunes_text(mb, &len);
		if (!text)
			goto exit;
		c.text = text;
		const char *td = getenv("TMPDIR");
		snprintf(tmp, sizeof tmp, "%s/sky-bench-tokenize.txt", td && *td ? td : "/tmp");
		if (!no_hf && sky_file_write(tmp, text, len, 0644) != 0) {
			fprintf(stderr, "sky bench tokenize: cannot write %s\n", tmp);
			goto exit;
		}
		text_path = tmp;
	}
	c.t = &t;
	c.len = len;
	/* room for the longest line's pieces: each takes at least a byte */
	size_t longest = 0;
	for (size_t i = 0; i < len;) {
		const char *nl = memchr(c.text + i, '\n', len - i);
		size_t end = nl ? (size_t)(nl - c.text) : len;
		if (end - i > longest)
			longest = end - i;
		i = end + 1;
	}
	if (longest > (1u << 24)) {
		fprintf(stderr, "sky bench tokenize: a line of %zu bytes is too long\n", longest);
		goto exit;
	}
	c.e.cap = (int)longest + 3;
	c.e.ids = malloc((size_t)c.e.cap * 3 * sizeof(int32_t));
	if (!c.e.ids)
		goto exit;
	c.e.type_ids = c.e.ids + c.e.cap;
	c.e.mask = c.e.type_ids + c.e.cap;
	sky_bench_stats st;
	sky_bench_measure(&bo, run_sky, &c, &st);
	double sky_mb_s = (double)len / st.median / 1e6;
	char why[512] = "";
	if (no_hf)
		snprintf(why, sizeof why, "--no-hf");
	else
		hf = run_hf(dir, text_path, bo.runs, (int)hf_threads, why, sizeof why);
	double hf_mb_s = hf ? num(hf, "mb_s") : 0;
	hf_tokens = hf ? (long)num(hf, "tokens") : 0;
	if (!bo.json) {
		printf("tokenize %.2f MB (%ld lines) with %s (%u tokens)\n", (double)len / 1e6,
		       c.lines, dir, t.n);
		printf("  sky  %8.2f MB/s  median %.3f s of %d runs, %ld pieces, %d lines refused\n",
		       sky_mb_s, st.median, st.count, c.tokens, c.bad);
		if (hf)
			printf("  hf   %8.2f MB/s  median %.3f s (tokenizers %s via node, %ld thread(s)), "
			       "%ld pieces%s\n  sky/hf %.2fx\n",
			       hf_mb_s, num(hf, "median_s"),
			       cJSON_GetObjectItemCaseSensitive(hf, "version")->valuestring, hf_threads,
			       hf_tokens,
			       hf_tokens == c.tokens ? " (the same)" : " (DIFFERENT)",
			       sky_mb_s / hf_mb_s);
		else
			printf("  hf   not run: %s\n", why);
		rc = hf && hf_tokens != c.tokens ? 1 : 0;
		goto exit;
	}
	o = sky_json_new_object();
	if (!o)
		goto exit;
	cJSON_AddStringToObject(o, "bench", "tokenize");
	cJSON_AddStringToObject(o, "model_dir", dir);
	cJSON_AddNumberToObject(o, "vocab", t.n);
	cJSON_AddNumberToObject(o, "text_bytes", (double)len);
	cJSON_AddNumberToObject(o, "lines", (double)c.lines);
	cJSON_AddNumberToObject(o, "sky_mb_s", sky_mb_s);
	cJSON_AddNumberToObject(o, "sky_pieces", (double)c.tokens);
	sky_bench_add_stats(o, "sky_ms", &st);
	if (hf) {
		cJSON_AddNumberToObject(o, "hf_mb_s", hf_mb_s);
		cJSON_AddNumberToObject(o, "hf_pieces", (double)hf_tokens);
		cJSON_AddNumberToObject(o, "hf_median_s", num(hf, "median_s"));
		cJSON_AddStringToObject(o, "hf_version",
					cJSON_GetObjectItemCaseSensitive(hf, "version")->valuestring);
		cJSON_AddNumberToObject(o, "hf_threads", (double)hf_threads);
		cJSON_AddNumberToObject(o, "sky_over_hf", sky_mb_s / hf_mb_s);
		cJSON_AddBoolToObject(o, "pieces_agree", hf_tokens == c.tokens);
	} else {
		cJSON_AddNullToObject(o, "hf_mb_s");
		cJSON_AddStringToObject(o, "hf_skipped", why);
	}
	sky_bench_add_env(o, "sky_tokenizer", 1);
	rc = sky_bench_print(o) == 0 && (!hf || hf_tokens == c.tokens) ? 0 : 1;
exit:
	if (rc && hf && hf_tokens != c.tokens)
		fprintf(stderr, "sky bench tokenize: Sky counted %ld pieces, HF %ld\n", c.tokens,
			hf_tokens);
	sky_json_free(o);
	sky_json_free(hf);
	free(c.e.ids);
	free(text);
	sky_file_map_close(&m);
	sky_tok_free(&t);
	return rc;
}
