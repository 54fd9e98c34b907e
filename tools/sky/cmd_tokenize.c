/* sky tokenize: BERT's tokenizer on one text or pair (sky_tokenizer.h),
 * the ids Hugging Face's tokenizers library gives. */
#include "sky_cli.h"

#include "sky_err.h"
#include "sky_json.h"
#include "sky_opt.h"
#include "sky_tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *to)
{
	fprintf(to,
		"usage: sky tokenize --model-dir DIR --text TEXT [--pair TEXT] [--seq S] [--json]\n"
		"  DIR holds tokenizer.json (a WordPiece model), or vocab.txt with\n"
		"  tokenizer_config.json (do_lower_case, strip_accents, tokenize_chinese_chars)\n"
		"  --seq S   truncate longest-first to S tokens and pad to S (default: no\n"
		"            truncation, no padding)\n"
		"  --json    {\"input_ids\":[..],\"token_type_ids\":[..],\"attention_mask\":[..],\n"
		"             \"tokens\":[..]}\n");
}

static cJSON *int_array(const int32_t *v, int n)
{
	cJSON *a = cJSON_CreateArray();
	for (int i = 0; a && i < n; i++)
		cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
	return a;
}

static int print_json(const sky_tokenizer *t, const sky_tok_enc *e, int n)
{
	int rc = 1;
	char *buf = NULL;
	cJSON *o = sky_json_new_object();
	cJSON *toks = cJSON_CreateArray();
	if (!o || !toks)
		goto exit;
	cJSON_AddItemToObject(o, "input_ids", int_array(e->ids, n));
	cJSON_AddItemToObject(o, "token_type_ids", int_array(e->type_ids, n));
	cJSON_AddItemToObject(o, "attention_mask", int_array(e->mask, n));
	for (int i = 0; i < n; i++)
		cJSON_AddItemToArray(toks, cJSON_CreateString(sky_tok_token(t, e->ids[i])));
	cJSON_AddItemToObject(o, "tokens", toks);
	toks = NULL;
	size_t cap = (size_t)n * (SKY_TOK_MAX_TOKEN_BYTES * 6 + 64) + 256;
	buf = malloc(cap);
	int len = buf ? sky_json_print(o, buf, cap) : SKY_ENOMEM;
	if (len < 0) {
		fprintf(stderr, "sky tokenize: cannot print the result: %s\n", sky_strerror(len));
		goto exit;
	}
	printf("%s\n", buf);
	rc = 0;
exit:
	cJSON_Delete(toks);
	sky_json_free(o);
	free(buf);
	return rc;
}

static void print_text(const sky_tokenizer *t, const sky_tok_enc *e, int n)
{
	const char *names[] = {"tokens", "input_ids", "token_type_ids", "attention_mask"};
	const int32_t *rows[] = {NULL, e->ids, e->type_ids, e->mask};
	for (int r = 0; r < 4; r++) {
		printf("%s:", names[r]);
		for (int i = 0; i < n; i++) {
			if (r == 0)
				printf(" %s", sky_tok_token(t, e->ids[i]));
			else
				printf(" %d", rows[r][i]);
		}
		printf("\n");
	}
}

int sky_cmd_tokenize(int argc, char **argv)
{
	const char *dir = NULL, *text = NULL, *pair = NULL;
	long seq = 0;
	int json = 0;
	enum { O_DIR = SKY_OPT_FIRST, O_TEXT, O_PAIR, O_SEQ, O_JSON };
	static const struct option k_opts[] = {{"model-dir", required_argument, NULL, O_DIR},
					       {"text", required_argument, NULL, O_TEXT},
					       {"pair", required_argument, NULL, O_PAIR},
					       {"seq", required_argument, NULL, O_SEQ},
					       {"json", no_argument, NULL, O_JSON},
					       SKY_OPT_STD,
					       {0}};
	sky_opt op;
	sky_opt_begin(&op, "sky tokenize", argc, argv, k_opts, 0);
	for (int c; (c = sky_opt_next(&op)) != SKY_OPT_END;) {
		switch (c) {
		case SKY_OPT_HELP:
			usage(stdout);
			return 0;
		case SKY_OPT_VERSION:
			return 0;
		case O_DIR:
			dir = op.arg;
			break;
		case O_TEXT:
			text = op.arg;
			break;
		case O_PAIR:
			pair = op.arg;
			break;
		case O_SEQ:
			if (sky_cli_int("tokenize", op.name, op.arg, 3, 1 << 20, &seq) < 0)
				return 2;
			break;
		case O_JSON:
			json = 1;
			break;
		default:
			return 2;
		}
	}
	if (sky_opt_no_args(&op) != 0)
		return 2;
	if (!dir || !text) {
		fprintf(stderr, "sky tokenize: --model-dir and --text are required\n");
		usage(stderr);
		return 2;
	}
	sky_tokenizer t;
	sky_tok_enc e = {0};
	sky_diag d;
	sky_diag_clear(&d);
	int rc = sky_tok_load_dir(&t, dir, &d);
	if (rc) {
		fprintf(stderr, "sky tokenize: %s: %s\n", sky_strerror(rc), d.msg);
		return 1;
	}
	/* without --seq: room for every piece (each takes at least one byte) */
	size_t alen = strlen(text), blen = pair ? strlen(pair) : 0;
	e.cap = seq ? (int)seq : (int)(alen + blen + 3);
	e.pad = seq > 0;
	if (!seq && alen + blen + 3 > (1u << 24)) {
		fprintf(stderr, "sky tokenize: text too long\n");
		rc = 1;
		goto exit;
	}
	e.ids = malloc((size_t)e.cap * sizeof(int32_t));
	e.type_ids = malloc((size_t)e.cap * sizeof(int32_t));
	e.mask = malloc((size_t)e.cap * sizeof(int32_t));
	if (!e.ids || !e.type_ids || !e.mask) {
		fprintf(stderr, "sky tokenize: out of memory\n");
		rc = 1;
		goto exit;
	}
	rc = sky_tok_encode(&t, text, alen, pair, blen, &e, &d);
	if (rc) {
		fprintf(stderr, "sky tokenize: %s: %s\n", sky_strerror(rc), d.msg);
		rc = 1;
		goto exit;
	}
	int n = e.pad ? e.cap : e.len;
	if (json)
		rc = print_json(&t, &e, n);
	else
		print_text(&t, &e, n);
exit:
	free(e.ids);
	free(e.type_ids);
	free(e.mask);
	sky_tok_free(&t);
	return rc;
}
