/* sky infer: ask a serving job for logits. Connects as a client identity
 * (infer_client.h), publishes one request per input row at once (they are
 * pipelined through the fleet), waits for every response up to --timeout
 * and prints them in request order.
 *
 * Text (--model-dir D with --text or --input-file): the texts are
 * tokenized here with D's tokenizer, truncated to the plan's sequence
 * length, after D's tokenizer hash was checked against the one the job's
 * signed plan names (the tokenizer of the model it serves); the answers
 * are printed as D's label names (config.json id2label) with the softmax
 * of the logits. */
#include "infer_client.h"
#include "sky_cli.h"
#include "sky_clock.h"
#include "sky_err.h"
#include "sky_hfmodel.h"
#include "sky_opt.h"
#include "sky_planmsg.h"
#include "sky_safetensors.h"
#include "sky_tokenizer.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ROWS 4096
#define MAX_TOKENS 8192 /* a request is at most 64 KiB of JSON anyway */

static void usage(FILE *to)
{
	fprintf(to,
		"usage: sky infer --job J --broker HOST:PORT (--pki DIR | --cert C --key K [--ca CA])\n"
		"                 (--tokens 101,2023,102 [--mask 1,1,1] | --input X.safetensors |\n"
		"                  --model-dir D (--text \"...\" [--pair \"...\"] | --input-file F))\n"
		"                 [--id ID] [--timeout SECONDS] [--json]\n"
		"Sends inference requests to serving job J and prints the logits.\n"
		"  --pki DIR      the client's bundle from `sky pki client NAME` (DIR is\n"
		"                 <pki>/clients/NAME: ca.crt, client.crt, client.key)\n"
		"  --cert, --key  the client certificate and key instead (CN sky-client-*);\n"
		"                 --ca the fleet CA (default: ca.crt beside the certificate)\n"
		"  --broker       the fleet broker as given to skyplan; clients connect to the\n"
		"                 listener beside it (port + 1) with a random client id, so\n"
		"                 several may run at once with one identity\n"
		"  --tokens LIST  one request: token ids, comma-separated (1..seq of them)\n"
		"  --mask LIST    its attention mask, 0 or 1 each (default all 1)\n"
		"  --input F      one request per row of F's tensor input_ids (I32 or I64,\n"
		"                 [rows, seq] or [seq]) with attention_mask (same shape) if\n"
		"                 present; all rows are sent at once\n"
		"  --model-dir D  a Hugging Face directory: the texts are tokenized here with\n"
		"                 its tokenizer (vocab.txt or tokenizer.json), which must be\n"
		"                 the one of the model the job serves (the hash the job's\n"
		"                 plan names, from sky job submit --tokenizer), truncated to\n"
		"                 the plan's sequence length; answers are printed with its\n"
		"                 config.json's label names and their probabilities\n"
		"  --text T       one request: the text T (--pair P: a sentence pair; the\n"
		"                 fleet embeds every token as type 0, see docs/serving.md)\n"
		"  --input-file F one request per line of F: plain text, or a JSON object\n"
		"                 {\"text\":\"...\",\"pair\":\"...\"} (JSON Lines; pair optional)\n"
		"  --id ID        the request id (1-64 of A-Z a-z 0-9 _ . -; several rows get\n"
		"                 ID-0, ID-1, ...; default a random tag)\n"
		"  --timeout S    wait at most S seconds for the responses (default 30)\n"
		"  --json         print each response as the job sent it, one JSON object a line\n"
		"Prints one line per request: its id and the logits (with --model-dir: the\n"
		"label, its probability, every label's, and the text). A refused request (its\n"
		"code and reason on stderr) or a missing response exits 1.\n");
}

typedef struct row {
	char id[SKY_INFER_ID_MAX + 1];
	int32_t *tokens, *mask;
	int n;
	int answered;
	char *raw; /* the response JSON */
	sky_infer_resp resp;
	char *text, *pair; /* --model-dir: the texts (pair NULL if none) */
	int n_a, n_b;      /* their word pieces before truncation */
} row;

typedef struct run {
	row *rows;
	int n_rows, n_answered;
} run;

/* "1,2,-3" -> ints; returns the count or -1 with a message. */
static int parse_list(const char *what, const char *s, int32_t *out, int cap)
{
	int n = 0;
	const char *p = s;
	while (*p) {
		char *end;
		errno = 0;
		long v = strtol(p, &end, 10);
		if (end == p || errno || v < INT32_MIN || v > INT32_MAX || (*end && *end != ',') ||
		    n >= cap) {
			fprintf(stderr, "sky infer: %s: expected up to %d comma-separated integers, got '%s'\n",
				what, cap, s);
			return -1;
		}
		out[n++] = (int32_t)v;
		p = *end ? end + 1 : end;
	}
	if (n == 0)
		fprintf(stderr, "sky infer: %s is empty\n", what);
	return n ? n : -1;
}

/* Reads a [rows, seq] or [seq] integer tensor into a fresh int32 array. */
static int32_t *read_ints(const sky_st_file *f, const char *name, int *rows, int *seq,
			  sky_diag *d)
{
	const sky_st_tensor *t = sky_st_find(f, name);
	if (!t) {
		sky_diag_set(d, SKY_ENOTFOUND, "no tensor %s", name);
		return NULL;
	}
	if ((t->dtype != SKY_ST_I32 && t->dtype != SKY_ST_I64) || t->ndim < 1 || t->ndim > 2 ||
	    t->count == 0) {
		sky_diag_set(d, SKY_EFORMAT, "tensor %s: expected I32 or I64 [rows, seq] or [seq], found %s with %d dims",
			     name, sky_st_dtype_name(t->dtype), t->ndim);
		return NULL;
	}
	int64_t r = t->ndim == 2 ? t->shape[0] : 1, s = t->shape[t->ndim - 1];
	if (r < 1 || r > MAX_ROWS || s < 1 || s > MAX_TOKENS) {
		sky_diag_set(d, SKY_ERANGE, "tensor %s: %lld rows of %lld tokens, at most %d of %d", name,
			     (long long)r, (long long)s, MAX_ROWS, MAX_TOKENS);
		return NULL;
	}
	int32_t *out = malloc((size_t)(r * s) * sizeof *out);
	if (!out) {
		sky_diag_set(d, SKY_ENOMEM, "out of memory");
		return NULL;
	}
	for (int64_t i = 0; i < r * s; i++) {
		int64_t v;
		if (t->dtype == SKY_ST_I32) {
			int32_t x;
			memcpy(&x, t->data + 4 * i, 4);
			v = x;
		} else {
			memcpy(&v, t->data + 8 * i, 8);
		}
		if (v < INT32_MIN || v > INT32_MAX) {
			free(out);
			sky_diag_set(d, SKY_ERANGE, "tensor %s: element %lld is %lld, beyond int32", name,
				     (long long)i, (long long)v);
			return NULL;
		}
		out[i] = (int32_t)v;
	}
	*rows = (int)r;
	*seq = (int)s;
	return out;
}

/* A copy of s[0..n) with a NUL, or NULL. */
static char *dup_n(const char *s, size_t n)
{
	char *o = malloc(n + 1);
	if (o) {
		memcpy(o, s, n);
		o[n] = '\0';
	}
	return o;
}

/* One line of --input-file into w: plain text, or a JSON object with
 * "text" (and "pair") strings. Returns 0 or -1 (message printed). */
static int text_line(const char *path, long line, char *s, size_t n, row *w)
{
	size_t i = 0;
	while (i < n && (s[i] == ' ' || s[i] == '\t'))
		i++;
	if (i == n) {
		fprintf(stderr, "sky infer: %s line %ld: empty line (one text a line)\n", path, line);
		return -1;
	}
	if (s[i] != '{') {
		w->text = dup_n(s, n);
		return w->text ? 0 : -1;
	}
	cJSON *o = cJSON_ParseWithLength(s, n);
	const cJSON *t = o ? cJSON_GetObjectItemCaseSensitive(o, "text") : NULL;
	const cJSON *p = o ? cJSON_GetObjectItemCaseSensitive(o, "pair") : NULL;
	int rc = -1;
	if (!o || !cJSON_IsObject(o))
		fprintf(stderr, "sky infer: %s line %ld: not a JSON object (a line starting with '{' is "
				"read as JSON Lines)\n", path, line);
	else if (!cJSON_IsString(t) || !t->valuestring[0])
		fprintf(stderr, "sky infer: %s line %ld: no \"text\" string, or it is empty\n", path,
			line);
	else if (p && (!cJSON_IsString(p) || !p->valuestring[0]))
		fprintf(stderr, "sky infer: %s line %ld: \"pair\" must be a non-empty string\n", path,
			line);
	else if (!(w->text = dup_n(t->valuestring, strlen(t->valuestring))) ||
		 (p && !(w->pair = dup_n(p->valuestring, strlen(p->valuestring)))))
		fprintf(stderr, "sky infer: out of memory\n");
	else
		rc = 0;
	cJSON_Delete(o);
	return rc;
}

/* --input-file: the rows (*out, *n). Returns 0 or -1 (message printed). */
static int read_texts(const char *path, row **out, int *n)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "sky infer: %s: %s\n", path, strerror(errno));
		return -1;
	}
	row *rows = calloc(MAX_ROWS, sizeof *rows);
	char *line = NULL;
	size_t cap = 0;
	long k = 0;
	int rc = rows ? 0 : -1;
	for (ssize_t len; rc == 0 && (len = getline(&line, &cap, f)) >= 0;) {
		k++;
		while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			len--;
		if (*n >= MAX_ROWS) {
			fprintf(stderr, "sky infer: %s: more than %d lines\n", path, MAX_ROWS);
			rc = -1;
		} else if (memchr(line, '\0', (size_t)len)) {
			fprintf(stderr, "sky infer: %s line %ld: a NUL byte\n", path, k);
			rc = -1;
		} else {
			rc = text_line(path, k, line, (size_t)len, &rows[*n]);
			if (rc == 0)
				(*n)++;
		}
	}
	if (rc == 0 && ferror(f)) {
		fprintf(stderr, "sky infer: %s: read error\n", path);
		rc = -1;
	}
	if (rc == 0 && *n == 0) {
		fprintf(stderr, "sky infer: %s has no lines\n", path);
		rc = -1;
	}
	free(line);
	fclose(f);
	*out = rows;
	return rc;
}

/* The served model's tokenizer must be dir's: the plan names its hash. */
static int tokenizer_ok(const sky_planmsg *p, const char *job, const char *dir, uint32_t hash)
{
	char mine[9];
	snprintf(mine, sizeof mine, "%08x", (unsigned)hash);
	if (!p) {
		fprintf(stderr, "sky infer: job %s has no serving plan to check %s's tokenizer against "
				"(is it serving? sky job submit --task infer)\n", job, dir);
		return 0;
	}
	if (!p->infer.tokenizer[0]) {
		fprintf(stderr, "sky infer: job %s names no tokenizer (it was submitted without "
				"--tokenizer), so %s's tokenizer (hash %s) cannot be checked against "
				"the model it serves; refused\n", job, dir, mine);
		return 0;
	}
	if (strcmp(p->infer.tokenizer, mine) != 0) {
		fprintf(stderr, "sky infer: %s's tokenizer (hash %s) is not the tokenizer of the model "
				"job %s serves (hash %s): its ids would mean other tokens; refused\n",
			dir, mine, job, p->infer.tokenizer);
		return 0;
	}
	return 1;
}

/* softmax(logits) in double, the maximum subtracted. */
static void softmax(const float *lg, int n, double *out)
{
	double mx = lg[0], sum = 0;
	for (int k = 1; k < n; k++)
		mx = lg[k] > mx ? lg[k] : mx;
	for (int k = 0; k < n; k++)
		sum += out[k] = exp((double)lg[k] - mx);
	for (int k = 0; k < n; k++)
		out[k] /= sum;
}

/* One answered text request, as a line (or a JSON object). Returns 0, or
 * 1 if the answer does not fit the directory's labels. */
static int print_text_answer(const row *w, const sky_hf_config *hc, const char *dir, int json)
{
	const sky_infer_resp *r = &w->resp;
	double pr[SKY_INFER_MAX_CLASSES];
	if (r->n_logits != hc->num_labels || r->n_logits < 1) {
		fprintf(stderr, "sky infer: request %s: the job answered %d logits but %s has %d "
				"labels (is it serving this model?)\n", w->id, r->n_logits, dir,
			hc->num_labels);
		return 1;
	}
	softmax(r->logits, r->n_logits, pr);
	int best = 0;
	for (int k = 1; k < r->n_logits; k++)
		if (r->logits[k] > r->logits[best])
			best = k;
	if (!json) {
		printf("%s  %s %.4f  (", w->id, hc->label[best], pr[best]);
		for (int k = 0; k < r->n_logits; k++)
			printf("%s%s %.4f", k ? ", " : "", hc->label[k], pr[k]);
		printf(")  %.60s%s%s%.40s\n", w->text, strlen(w->text) > 60 ? "..." : "",
		       w->pair ? " | " : "", w->pair ? w->pair : "");
		return 0;
	}
	cJSON *o = cJSON_CreateObject(), *probs, *lg;
	if (!o)
		return 1;
	cJSON_AddNumberToObject(o, "v", 1);
	cJSON_AddStringToObject(o, "id", w->id);
	cJSON_AddBoolToObject(o, "ok", 1);
	cJSON_AddStringToObject(o, "job", r->job);
	cJSON_AddNumberToObject(o, "epoch", (double)r->epoch);
	cJSON_AddStringToObject(o, "text", w->text);
	if (w->pair)
		cJSON_AddStringToObject(o, "pair", w->pair);
	cJSON_AddNumberToObject(o, "tokens", w->n);
	cJSON_AddStringToObject(o, "label", hc->label[best]);
	cJSON_AddNumberToObject(o, "label_id", best);
	probs = cJSON_AddObjectToObject(o, "probs");
	lg = cJSON_AddArrayToObject(o, "logits");
	for (int k = 0; probs && lg && k < r->n_logits; k++) {
		cJSON_AddNumberToObject(probs, hc->label[k], pr[k]);
		cJSON_AddItemToArray(lg, cJSON_CreateNumber((double)r->logits[k]));
	}
	char *txt = cJSON_PrintUnformatted(o);
	if (txt)
		printf("%s\n", txt);
	cJSON_free(txt);
	cJSON_Delete(o);
	return txt ? 0 : 1;
}

static void on_resp(void *ctx, const sky_infer_resp *r, const char *raw, size_t len)
{
	run *u = ctx;
	for (int i = 0; i < u->n_rows; i++) {
		row *w = &u->rows[i];
		if (w->answered || strcmp(w->id, r->id) != 0)
			continue;
		w->raw = malloc(len + 1);
		if (w->raw) {
			memcpy(w->raw, raw, len);
			w->raw[len] = '\0';
		}
		w->resp = *r;
		w->answered = 1;
		u->n_answered++;
		return;
	}
	/* not ours (an earlier run's, or an unreadable request's id ""): the
	 * refusal of an unreadable request still names the reason */
	if (!r->ok && r->id[0] == '\0')
		fprintf(stderr, "sky infer: a request of job %s was refused without its id (%s): %s\n",
			r->job, sky_infer_code_name(r->code), r->error);
}

int sky_cmd_infer(int argc, char **argv)
{
	const char *job = NULL, *broker = NULL, *pki = NULL, *ca = NULL, *cert = NULL, *key = NULL;
	const char *tokens = NULL, *mask = NULL, *input = NULL, *id = NULL;
	const char *model_dir = NULL, *text = NULL, *pair = NULL, *input_file = NULL;
	double timeout_s = 30;
	int json = 0;
	enum {
		O_JOB = SKY_OPT_FIRST, O_BROKER, O_PKI, O_CA, O_CERT, O_KEY, O_TOKENS, O_MASK, O_INPUT,
		O_ID, O_TIMEOUT, O_JSON, O_MODEL_DIR, O_TEXT, O_PAIR, O_INPUT_FILE
	};
	static const struct option k_opts[] = {{"job", required_argument, NULL, O_JOB},
					       {"broker", required_argument, NULL, O_BROKER},
					       {"pki", required_argument, NULL, O_PKI},
					       {"ca", required_argument, NULL, O_CA},
					       {"cert", required_argument, NULL, O_CERT},
					       {"key", required_argument, NULL, O_KEY},
					       {"tokens", required_argument, NULL, O_TOKENS},
					       {"mask", required_argument, NULL, O_MASK},
					       {"input", required_argument, NULL, O_INPUT},
					       {"id", required_argument, NULL, O_ID},
					       {"timeout", required_argument, NULL, O_TIMEOUT},
					       {"json", no_argument, NULL, O_JSON},
					       {"model-dir", required_argument, NULL, O_MODEL_DIR},
					       {"text", required_argument, NULL, O_TEXT},
					       {"pair", required_argument, NULL, O_PAIR},
					       {"input-file", required_argument, NULL, O_INPUT_FILE},
					       SKY_OPT_STD,
					       {0}};
	sky_opt op;
	sky_opt_begin(&op, "sky infer", argc, argv, k_opts, 0);
	for (int c; (c = sky_opt_next(&op)) != SKY_OPT_END;) {
		switch (c) {
		case SKY_OPT_HELP:
			usage(stdout);
			return 0;
		case SKY_OPT_VERSION:
			return 0;
		case O_JOB:
			job = op.arg;
			break;
		case O_BROKER:
			broker = op.arg;
			break;
		case O_PKI:
			pki = op.arg;
			break;
		case O_CA:
			ca = op.arg;
			break;
		case O_CERT:
			cert = op.arg;
			break;
		case O_KEY:
			key = op.arg;
			break;
		case O_TOKENS:
			tokens = op.arg;
			break;
		case O_MASK:
			mask = op.arg;
			break;
		case O_INPUT:
			input = op.arg;
			break;
		case O_ID:
			id = op.arg;
			break;
		case O_JSON:
			json = 1;
			break;
		case O_MODEL_DIR:
			model_dir = op.arg;
			break;
		case O_TEXT:
			text = op.arg;
			break;
		case O_PAIR:
			pair = op.arg;
			break;
		case O_INPUT_FILE:
			input_file = op.arg;
			break;
		case O_TIMEOUT:
			if (sky_cli_double("infer", op.name, op.arg, 0.1, 86400, &timeout_s) != 0)
				return 2;
			break;
		default:
			return 2;
		}
	}
	if (sky_opt_no_args(&op) != 0)
		return 2;
	if (!job || !broker || (!!tokens + !!input + !!text + !!input_file) != 1) {
		fprintf(stderr, "sky infer: --job, --broker and one of --tokens, --input, --text or "
				"--input-file are required (sky infer --help)\n");
		return 2;
	}
	const int texts = text || input_file;
	if (texts != !!model_dir) {
		fprintf(stderr, "sky infer: %s\n",
			texts ? "--text and --input-file need --model-dir D (its tokenizer and labels)"
			      : "--model-dir goes with --text or --input-file");
		return 2;
	}
	if (pair && !text) {
		fprintf(stderr, "sky infer: --pair goes with --text (an --input-file line gives "
				"\"pair\" in JSON)\n");
		return 2;
	}
	if (text && (!text[0] || (pair && !pair[0]))) {
		fprintf(stderr, "sky infer: --%s is empty\n", text[0] ? "pair" : "text");
		return 2;
	}
	if (mask && !tokens) {
		fprintf(stderr, "sky infer: --mask goes with --tokens (an --input file has attention_mask)\n");
		return 2;
	}
	if (id && !sky_infer_id_ok(id)) {
		fprintf(stderr, "sky infer: --id: 1-64 characters of A-Z a-z 0-9 _ . -, got '%s'\n", id);
		return 2;
	}
	sky_diag d;
	sky_diag_clear(&d);
	sky_ic_files files;
	if (sky_ic_resolve(pki, ca, cert, key, &files, &d) != 0) {
		fprintf(stderr, "sky infer: %s\n", d.msg);
		return 2;
	}

	/* the requests */
	static run u;
	static sky_hf_config hc; /* large (label names): not on the stack */
	sky_tokenizer tk;
	sky_tok_init(&tk);
	memset(&u, 0, sizeof u);
	int32_t *all_tok = NULL, *all_mask = NULL;
	int rows = 1, seq = 0, rc = 1;
	sky_ic *c = NULL;
	if (texts) {
		/* the directory's tokenizer and labels; the texts (tokenized once
		 * the plan says the sequence length) */
		if (sky_hf_config_read(model_dir, &hc, &d) != 0 || sky_tok_load_dir(&tk, model_dir, &d)) {
			fprintf(stderr, "sky infer: %s: %s\n", model_dir, d.msg);
			rc = 2;
			goto exit;
		}
		if (input_file) {
			rows = 0;
			if (read_texts(input_file, &u.rows, &rows) != 0) {
				u.n_rows = rows;
				rc = 2;
				goto exit;
			}
		} else {
			u.rows = calloc(1, sizeof *u.rows);
			if (!u.rows || !(u.rows[0].text = dup_n(text, strlen(text))) ||
			    (pair && !(u.rows[0].pair = dup_n(pair, strlen(pair)))))
				goto exit;
		}
		u.n_rows = rows;
	} else if (tokens) {
		all_tok = malloc(MAX_TOKENS * sizeof *all_tok);
		all_mask = mask ? malloc(MAX_TOKENS * sizeof *all_mask) : NULL;
		if (!all_tok || (mask && !all_mask))
			goto exit;
		seq = parse_list("--tokens", tokens, all_tok, MAX_TOKENS);
		if (seq < 0) {
			rc = 2;
			goto exit;
		}
		if (mask) {
			int nm = parse_list("--mask", mask, all_mask, MAX_TOKENS);
			if (nm < 0) {
				rc = 2;
				goto exit;
			}
			if (nm != seq) {
				fprintf(stderr, "sky infer: --mask has %d values for %d tokens\n", nm, seq);
				rc = 2;
				goto exit;
			}
		}
	} else {
		sky_st_file f;
		sky_st_init(&f);
		int mr = 0, ms = 0;
		if (sky_st_open(&f, input, &d) != 0 ||
		    !(all_tok = read_ints(&f, "input_ids", &rows, &seq, &d))) {
			fprintf(stderr, "sky infer: %s: %s\n", input, d.msg);
			sky_st_close(&f);
			rc = 2;
			goto exit;
		}
		if (sky_st_find(&f, "attention_mask") &&
		    (!(all_mask = read_ints(&f, "attention_mask", &mr, &ms, &d)) || mr != rows ||
		     ms != seq)) {
			fprintf(stderr, "sky infer: %s: attention_mask: %s\n", input,
				d.msg[0] ? d.msg : "not the shape of input_ids");
			sky_st_close(&f);
			rc = 2;
			goto exit;
		}
		sky_st_close(&f);
	}
	if (!u.rows && !(u.rows = calloc((size_t)rows, sizeof *u.rows)))
		goto exit;
	u.n_rows = rows;
	char tag[9] = "";
	if (!id && sky_ic_tag(tag) != 0)
		goto exit;
	for (int i = 0; i < rows; i++) {
		row *w = &u.rows[i];
		if (!texts) {
			w->tokens = all_tok + (size_t)i * (size_t)seq;
			w->mask = all_mask ? all_mask + (size_t)i * (size_t)seq : NULL;
			w->n = seq;
		}
		if (id && rows == 1)
			snprintf(w->id, sizeof w->id, "%s", id);
		else
			snprintf(w->id, sizeof w->id, "%.50s-%d", id ? id : tag, i);
	}

	if (sky_ic_open(&c, broker, &files, job, on_resp, &u, &d) != 0) {
		fprintf(stderr, "sky infer: %s\n", d.msg);
		goto exit;
	}
	if (texts) {
		/* the tokenizer the job's model was trained with, checked before a
		 * single id leaves; then each text at the plan's length */
		const sky_planmsg *p = sky_ic_plan(c);
		if (!tokenizer_ok(p, job, model_dir, tk.hash))
			goto exit;
		seq = p->shape.seq;
		all_tok = malloc((size_t)rows * (size_t)seq * 3 * sizeof *all_tok);
		if (!all_tok)
			goto exit;
		for (int i = 0; i < rows; i++) {
			row *w = &u.rows[i];
			int32_t *base = all_tok + (size_t)i * (size_t)seq * 3;
			sky_tok_enc e = {.ids = base, .type_ids = base + seq, .mask = base + 2 * seq,
					 .cap = seq, .pad = 0};
			if (sky_tok_encode(&tk, w->text, strlen(w->text), w->pair,
					   w->pair ? strlen(w->pair) : 0, &e, &d) != 0) {
				fprintf(stderr, "sky infer: request %s: %s\n", w->id, d.msg);
				rc = 2;
				goto exit;
			}
			w->tokens = e.ids;
			w->mask = NULL;
			w->n = e.len;
			w->n_a = e.n_a;
			w->n_b = e.n_b;
			if (e.n_a + e.n_b + (w->pair ? 3 : 2) > seq)
				fprintf(stderr, "sky infer: request %s: truncated to %d tokens (the "
						"plan's sequence length)\n", w->id, seq);
		}
		int pairs = 0;
		for (int i = 0; i < rows; i++)
			pairs += u.rows[i].pair != NULL;
		if (pairs)
			fprintf(stderr, "sky infer: %d sentence pair(s): serving embeds every token as "
					"type 0 (the second text's token type ids are not sent)\n", pairs);
	}
	/* every request at once: the fleet pipelines them */
	for (int i = 0; i < rows; i++) {
		sky_infer_req q = {.n = u.rows[i].n, .tokens = u.rows[i].tokens,
				   .mask = u.rows[i].mask, .cap = u.rows[i].n,
				   .has_mask = u.rows[i].mask != NULL};
		snprintf(q.id, sizeof q.id, "%s", u.rows[i].id);
		if (sky_ic_send(c, &q, &d) < 0) {
			fprintf(stderr, "sky infer: request %s not sent: %s\n", q.id, d.msg);
			goto exit;
		}
	}
	double t0 = sky_clock_s();
	while (u.n_answered < rows && sky_clock_s() - t0 < timeout_s) {
		if (!sky_ic_connected(c)) {
			fprintf(stderr, "sky infer: the connection to the broker was lost\n");
			break;
		}
		sky_ic_poll(c, 50);
	}
	if (sky_ic_refused(c) > 0) /* from a sender the plan does not allow */
		fprintf(stderr, "sky infer: %ld response(s) from a sender the job's plan does not "
				"allow dropped\n",
			sky_ic_refused(c));
	if (sky_ic_dups(c) > 0) /* a re-planned job answered a replayed request twice */
		fprintf(stderr, "sky infer: %ld duplicate response(s) dropped\n", sky_ic_dups(c));
	int refused = 0, missing = 0;
	for (int i = 0; i < rows; i++) {
		row *w = &u.rows[i];
		if (!w->answered) {
			missing++;
			fprintf(stderr, "sky infer: no response to request %s within %g s (is job %s serving?)\n",
				w->id, timeout_s, job);
			if (json)
				printf("{\"v\":1,\"id\":\"%s\",\"ok\":false,\"job\":\"%s\",\"code\":\"timeout\","
				       "\"error\":\"no response within %g s\"}\n",
				       w->id, job, timeout_s);
			continue;
		}
		if (!w->resp.ok) {
			refused++;
			fprintf(stderr, "sky infer: request %s refused by job %s (%s): %s\n", w->id,
				w->resp.job, sky_infer_code_name(w->resp.code), w->resp.error);
		}
		if (texts && w->resp.ok) {
			refused += print_text_answer(w, &hc, model_dir, json);
		} else if (json) {
			printf("%s\n", w->raw ? w->raw : "{}");
		} else if (w->resp.ok) {
			printf("%s epoch %lld logits", w->id, (long long)w->resp.epoch);
			for (int k = 0; k < w->resp.n_logits; k++)
				printf(" %.9g", (double)w->resp.logits[k]);
			printf("\n");
		}
	}
	rc = refused || missing ? 1 : 0;
exit:
	sky_ic_close(c);
	for (int i = 0; i < u.n_rows; i++)
		free(u.rows[i].raw), free(u.rows[i].text), free(u.rows[i].pair);
	sky_tok_free(&tk);
	free(u.rows);
	free(all_tok);
	free(all_mask);
	return rc;
}
