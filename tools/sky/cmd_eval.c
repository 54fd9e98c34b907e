/* sky eval: held-out accuracy of a saved BERT classifier on the synthetic
 * task, with fp32 or int8 encoder layers (as the weights file holds them). */
#include "sky_cli.h"

#include "bench_util.h"
#include "eval_data.h"
#include "quant_cli.h"

#include "sky_clock.h"
#include "sky_bert.h"
#include "sky_dataset.h"
#include "sky_file.h"
#include "sky_err.h"
#include "sky_hfmodel.h"
#include "sky_kernels_s8.h"
#include "sky_model.h"
#include "sky_quant_model.h"
#include "sky_safetensors.h"
#include "sky_task.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct e_args {
	const char *weights, *precision;
	const char *model_dir; /* a Hugging Face directory instead of weights */
	const char *tokens, *mask, *input; /* logits of given inputs instead of accuracy */
	const char *data;                  /* a prepared set (.skyds): its metrics */
	long batches;
	sky_quant_cli_task task;
	int json;
} e_args;

static void usage(FILE *to)
{
	fprintf(to,
		"usage: sky eval --weights W.safetensors [options]\n"
		"       sky eval --model-dir DIR [options]\n"
		"       sky eval --model-dir DIR --data F.skyds [--precision int8] [--batch B] [--json]\n"
		"  held-out accuracy of a BERT classifier (sky train --save, or sky quantize's\n"
		"  output) on the synthetic task\n"
		"  --model-dir D  a Hugging Face BERT directory (config.json, model.safetensors\n"
		"                 or a sharded index; docs/models.md), read in fp32\n"
		"  --precision P  fp32|int8: what the file's encoder layers must be (default: as\n"
		"                 the file holds them; an fp32 file becomes int8 by sky quantize);\n"
		"                 with --model-dir, int8 quantises DIR/model.safetensors first\n"
		"                 exactly as sky job submit --task infer does (8 calibration\n"
		"                 micro-batches of the synthetic task, seed 1, at the rows' seq),\n"
		"                 which needs a preset's shapes (serving runs those)\n"
		"  --batches N    held-out micro-batches (default 64, as sky train --eval)\n"
		"  --model NAME   %s (default: the file's \"sky_model\" metadata)\n"
		"  --seq S        tokens per sequence (default: the preset's)\n"
		"  --batch B      sequences per micro-batch (default: the preset's)\n"
		"  --seed N       the task's seed, as given to sky train (default 1)\n"
		"  --json         one JSON object on stdout\n"
		"  --tokens LIST  instead: the logits of this input (comma-separated token ids,\n"
		"                 padded to --seq with id 0, mask 0), as one JSON line\n"
		"                 {\"tokens\":N,\"logits\":[...]} with %%.9g (exact floats)\n"
		"  --mask LIST    its attention mask (0 or 1 each; default all 1)\n"
		"  --data F.skyds instead: loss, accuracy, macro-F1, per-class precision and\n"
		"                 recall and the confusion matrix on a prepared set (sky data\n"
		"                 prepare); its labels and tokenizer must be the model's\n"
		"  --input F      the same for every row of F.safetensors: \"input_ids\" I32 or\n"
		"                 I64 (N, L) and optional \"attention_mask\" (N, L); one line each\n",
		sky_model_preset_names());
}

static int parse(int argc, char **argv, e_args *a)
{
	const char *cmd = "eval";
	memset(a, 0, sizeof *a);
	a->batches = 64;
	a->task.seed = 1;
	enum {
		O_WEIGHTS = SKY_OPT_FIRST, O_PRECISION, O_BATCHES, O_JSON, O_TOKENS, O_MASK, O_INPUT,
		O_MODEL_DIR, O_DATA
	};
	static const struct option k_opts[] = {{"weights", required_argument, NULL, O_WEIGHTS},
					       {"model-dir", required_argument, NULL, O_MODEL_DIR},
					       {"precision", required_argument, NULL, O_PRECISION},
					       {"batches", required_argument, NULL, O_BATCHES},
					       {"json", no_argument, NULL, O_JSON},
					       {"tokens", required_argument, NULL, O_TOKENS},
					       {"mask", required_argument, NULL, O_MASK},
					       {"input", required_argument, NULL, O_INPUT},
					       {"data", required_argument, NULL, O_DATA},
					       SKY_QUANT_CLI_OPT_TABLE,
					       SKY_OPT_STD,
					       {0}};
	sky_opt op;
	sky_opt_begin(&op, "sky eval", argc, argv, k_opts, 0);
	for (int c; (c = sky_opt_next(&op)) != SKY_OPT_END;) {
		const char *o = op.name, *v = op.arg;
		int rc = 0;
		switch (c) {
		case SKY_OPT_HELP:
			usage(stdout);
			return 1;
		case SKY_OPT_VERSION:
			return 1;
		case O_JSON:
			a->json = 1;
			break;
		case O_WEIGHTS:
			a->weights = v;
			break;
		case O_MODEL_DIR:
			a->model_dir = v;
			break;
		case O_PRECISION:
			a->precision = v;
			break;
		case O_TOKENS:
			a->tokens = v;
			break;
		case O_MASK:
			a->mask = v;
			break;
		case O_INPUT:
			a->input = v;
			break;
		case O_DATA:
			a->data = v;
			break;
		case O_BATCHES:
			rc = sky_cli_int(cmd, o, v, 1, 1000000, &a->batches);
			break;
		default:
			if ((rc = sky_quant_cli_task_opt(cmd, c, o, v, &a->task)) == 0)
				return -1;
		}
		if (rc < 0)
			return -1;
	}
	if (sky_opt_no_args(&op) != 0) {
		usage(stderr);
		return -1;
	}
	if (a->model_dir && a->weights) {
		fprintf(stderr, "sky eval: --weights and --model-dir exclude each other\n");
		return -1;
	}
	if (a->model_dir && a->task.model) {
		fprintf(stderr, "sky eval: --model and --model-dir exclude each other (the directory's "
			"config.json gives the shapes)\n");
		return -1;
	}
	if (!a->weights && !a->model_dir) {
		fprintf(stderr, "sky eval: --weights is required\n");
		usage(stderr);
		return -1;
	}
	if (a->data && (!a->model_dir || a->tokens || a->input)) {
		fprintf(stderr, "sky eval: --data goes with --model-dir, without --tokens or --input\n");
		return -1;
	}
	if (a->tokens && a->input) {
		fprintf(stderr, "sky eval: --tokens and --input exclude each other\n");
		return -1;
	}
	if (a->mask && !a->tokens) {
		fprintf(stderr, "sky eval: --mask goes with --tokens\n");
		return -1;
	}
	if (a->precision && strcmp(a->precision, "fp32") != 0 && strcmp(a->precision, "int8") != 0) {
		fprintf(stderr, "sky eval: --precision expects fp32 or int8, got '%s'\n", a->precision);
		return -1;
	}
	return 0;
}

/* Parses "1,2,3" into out (at most cap values in [lo, hi]). Returns the
 * count or -1 (message printed). */
static int parse_list(const char *opt, const char *text, int32_t *out, int cap, long lo, long hi)
{
	int n = 0;
	const char *p = text;
	while (*p) {
		char *end;
		long v = strtol(p, &end, 10);
		if (end == p || (*end && *end != ',') || v < lo || v > hi || n >= cap) {
			fprintf(stderr, "sky eval: --%s expects up to %d comma-separated integers in "
				"[%ld, %ld], got '%s'\n", opt, cap, lo, hi, text);
			return -1;
		}
		out[n++] = (int32_t)v;
		p = *end ? end + 1 : end;
	}
	if (n == 0)
		fprintf(stderr, "sky eval: --%s is empty\n", opt);
	return n ? n : -1;
}

/* One input's logits as a JSON line; %.9g reads back as the same float. */
static void print_logits(int n, const float *lg, int classes)
{
	printf("{\"tokens\":%d,\"logits\":[", n);
	for (int k = 0; k < classes; k++)
		printf(k ? ",%.9g" : "%.9g", (double)lg[k]);
	printf("]}\n");
}

/* One sequence's logits (classes floats) from whichever model the command
 * opened (a weights file, or a Hugging Face directory). */
typedef int (*forward_fn)(void *model, const int32_t *ids, const int32_t *attn, float *logits);

static int qmodel_forward1(void *model, const int32_t *ids, const int32_t *attn, float *logits)
{
	return sky_qmodel_forward(model, ids, attn, logits, NULL);
}

static int bert_forward1(void *model, const int32_t *ids, const int32_t *attn, float *logits)
{
	sky_bert *m = model;
	sky_bert_batch b = {ids, NULL, attn, NULL};
	int rc = sky_bert_predict(m, &b, NULL, NULL);
	if (!rc)
		memcpy(logits, m->logits, (size_t)m->cfg.classes * sizeof *logits);
	return rc;
}

/* --tokens / --input: the model with batch 1, one sequence at a time (as a
 * serving fleet computes each request's logits), for seq S, vocab and
 * classes. Returns the exit code. */
static int run_inputs(const e_args *a, int S, int vocab, int classes, forward_fn fwd, void *model)
{
	sky_diag d;
	sky_diag_clear(&d);
	sky_st_file in;
	sky_st_init(&in);
	int exitc = 1, rc, rows = 1, cols = 0;
	int32_t *ids = calloc((size_t)S, 4), *attn = calloc((size_t)S, 4);
	float *lg = malloc((size_t)classes * sizeof(float));
	const sky_st_tensor *ti = NULL, *tm = NULL;
	if (!ids || !attn || !lg)
		goto exit;
	if (a->input) {
		if ((rc = sky_st_open(&in, a->input, &d)) != 0) {
			fprintf(stderr, "sky eval: %s: %s%s%s\n", a->input, sky_strerror(rc),
				d.msg[0] ? ": " : "", d.msg);
			goto exit;
		}
		ti = sky_st_find(&in, "input_ids");
		tm = sky_st_find(&in, "attention_mask");
		if (!ti || ti->ndim != 2 || (ti->dtype != SKY_ST_I32 && ti->dtype != SKY_ST_I64) ||
		    ti->shape[1] < 1 || ti->shape[1] > S ||
		    (tm && (tm->ndim != 2 || tm->dtype != ti->dtype || tm->shape[0] != ti->shape[0] ||
			    tm->shape[1] != ti->shape[1]))) {
			fprintf(stderr, "sky eval: %s: needs \"input_ids\" I32 or I64 (N, L) with L "
				"at most %d, and \"attention_mask\" of the same shape and dtype if "
				"any\n", a->input, S);
			goto exit;
		}
		rows = (int)ti->shape[0];
		cols = (int)ti->shape[1];
	}
	for (int r = 0; r < rows; r++) {
		int n;
		memset(ids, 0, (size_t)S * 4);
		memset(attn, 0, (size_t)S * 4);
		if (a->tokens) {
			if ((n = parse_list("tokens", a->tokens, ids, S, 0, vocab - 1)) < 0)
				goto exit;
			if (a->mask) {
				int nm = parse_list("mask", a->mask, attn, S, 0, 1);
				if (nm < 0)
					goto exit;
				if (nm != n) {
					fprintf(stderr, "sky eval: --mask has %d values for %d tokens\n",
						nm, n);
					goto exit;
				}
			} else {
				for (int t = 0; t < n; t++)
					attn[t] = 1;
			}
		} else {
			n = cols;
			for (int t = 0; t < n; t++) {
				size_t at = (size_t)r * cols + t;
				int64_t v, mv = 1;
				if (ti->dtype == SKY_ST_I32) {
					int32_t x;
					memcpy(&x, ti->data + at * 4, 4);
					v = x;
					if (tm)
						memcpy(&x, tm->data + at * 4, 4), mv = x;
				} else {
					memcpy(&v, ti->data + at * 8, 8);
					if (tm)
						memcpy(&mv, tm->data + at * 8, 8);
				}
				if (v < 0 || v >= vocab || (mv != 0 && mv != 1)) {
					fprintf(stderr, "sky eval: %s: row %d token %d: id %lld mask %lld "
						"(the vocabulary has %d)\n", a->input, r, t, (long long)v,
						(long long)mv, vocab);
					goto exit;
				}
				ids[t] = (int32_t)v;
				attn[t] = (int32_t)mv;
			}
		}
		if ((rc = fwd(model, ids, attn, lg)) != 0) {
			fprintf(stderr, "sky eval: input %d: %s\n", r, sky_strerror(rc));
			goto exit;
		}
		print_logits(n, lg, classes);
	}
	exitc = 0;
exit:
	sky_st_close(&in);
	free(ids), free(attn), free(lg);
	return exitc;
}

static int eval_inputs(const e_args *a, sky_st_file *f, sky_model_cfg cfg)
{
	sky_qmodel m;
	sky_diag d;
	sky_diag_clear(&d);
	int rc;
	cfg.batch = 1;
	if ((rc = sky_qmodel_open(&m, f, &cfg, &d)) != 0) {
		fprintf(stderr, "sky eval: %s: %s: %s\n", a->weights, sky_strerror(rc), d.msg);
		return 1;
	}
	int exitc = run_inputs(a, m.cfg.seq, m.cfg.vocab, m.cfg.classes, qmodel_forward1, &m);
	sky_qmodel_close(&m);
	return exitc;
}

/* --model-dir: the model through the Hugging Face loader, fp32, on the heap
 * (one arena). For --tokens / --input a batch of 1, else the task's
 * held-out accuracy. Returns the exit code. */
static int eval_dir(const e_args *a)
{
	static sky_hf_config hc; /* large (label names): not on the stack */
	sky_diag d;
	sky_diag_clear(&d);
	int rc, exitc = 1;
	if ((rc = sky_hf_config_read(a->model_dir, &hc, &d)) != 0) {
		fprintf(stderr, "sky eval: %s: %s\n", a->model_dir, d.msg);
		return 2;
	}
	sky_model_cfg c = hc.cfg;
	const int inputs = a->tokens || a->input;
	if (a->task.seq > 0)
		c.seq = (int)a->task.seq;
	if (a->task.batch > 0)
		c.batch = (int)a->task.batch;
	if (inputs)
		c.batch = 1;
	if (sky_model_validate(&c) != 0 || (!inputs && sky_task_check(&c) != 0)) {
		fprintf(stderr, "sky eval: batch %d x seq %d does not fit %s or the task\n", c.batch,
			c.seq, a->model_dir);
		return 2;
	}
	sky_bert_opts o;
	memset(&o, 0, sizeof o);
	sky_optim_default(&o.optim, SKY_OPTIM_SGD); /* carved, never stepped */
	o.optim.lr = 1.0f;
	o.micro = 1;
	size_t bytes = 0;
	static sky_bert m;
	void *buf = NULL;
	int32_t *ids = NULL, *types = NULL, *attn = NULL, *labels = NULL, *pred = NULL;
	sky_arena ar;
	if ((rc = sky_bert_arena_bytes(&c, &o, &bytes)) != 0 || !(buf = malloc(bytes))) {
		fprintf(stderr, "sky eval: %s: cannot carve the model (%zu bytes)\n", a->model_dir,
			bytes);
		return 1;
	}
	sky_arena_init(&ar, buf, bytes);
	if ((rc = sky_bert_carve(&m, &c, &o, &ar)) != 0 || (rc = sky_arena_seal(&ar)) != 0) {
		fprintf(stderr, "sky eval: carving the model failed: %s\n", sky_strerror(rc));
		goto exit;
	}
	sky_hf_report rep;
	if ((rc = sky_hf_load_dir(&m, a->model_dir, (unsigned long long)a->task.seed, &rep, &d))) {
		fprintf(stderr, "sky eval: %s: %s\n", a->model_dir, d.msg);
		exitc = 2;
		goto exit;
	}
	if (rep.classifier_init)
		fprintf(stderr, "sky eval: %s has no classifier: its logits come from a seeded "
			"head, not a trained one\n", a->model_dir);
	if (inputs) {
		exitc = run_inputs(a, c.seq, c.vocab, c.classes, bert_forward1, &m);
		goto exit;
	}
	size_t T = (size_t)sky_model_tokens(&c);
	ids = malloc(T * 4), types = malloc(T * 4), attn = malloc(T * 4);
	labels = malloc((size_t)c.batch * 4), pred = malloc((size_t)c.batch * 4);
	if (!ids || !types || !attn || !labels || !pred) {
		fprintf(stderr, "sky eval: out of memory\n");
		goto exit;
	}
	long right = 0, total = 0;
	double t_fwd = 0;
	for (long i = 0; i < a->batches; i++) {
		if ((rc = sky_task_batch(&c, (uint64_t)a->task.seed, SKY_TASK_HELDOUT, (uint64_t)i, ids,
					 types, attn, labels)))
			goto exit;
		sky_bert_batch b = {ids, types, attn, labels};
		double t0 = sky_clock_s();
		if ((rc = sky_bert_predict(&m, &b, pred, NULL)) != 0) {
			fprintf(stderr, "sky eval: batch %ld: %s\n", i, sky_strerror(rc));
			goto exit;
		}
		t_fwd += sky_clock_s() - t0;
		for (int k = 0; k < c.batch; k++)
			right += pred[k] == labels[k];
		total += c.batch;
	}
	double acc = (double)right / (double)total;
	if (a->json) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "model_dir", a->model_dir);
		cJSON_AddNumberToObject(j, "layers", c.layers);
		cJSON_AddNumberToObject(j, "hidden", c.hidden);
		cJSON_AddNumberToObject(j, "labels", c.classes);
		cJSON_AddStringToObject(j, "precision", "fp32");
		cJSON_AddStringToObject(j, "kernel", "openblas-sgemm");
		cJSON_AddNumberToObject(j, "heldout_accuracy", acc);
		cJSON_AddNumberToObject(j, "correct", (double)right);
		cJSON_AddNumberToObject(j, "sequences", (double)total);
		cJSON_AddNumberToObject(j, "batch", c.batch);
		cJSON_AddNumberToObject(j, "seq", c.seq);
		cJSON_AddNumberToObject(j, "forward_ms_per_batch", t_fwd / (double)a->batches * 1e3);
		int prc2 = j ? sky_bench_print(j) : SKY_ENOMEM;
		cJSON_Delete(j);
		if (prc2 != 0)
			goto exit;
	} else {
		printf("%s: %d-layer H %d model, fp32 layers (openblas-sgemm): held-out accuracy %.4f "
		       "(%ld of %ld sequences), %.2f ms per micro-batch\n",
		       a->model_dir, c.layers, c.hidden, acc, right, total,
		       t_fwd / (double)a->batches * 1e3);
	}
	exitc = 0;
exit:
	free(buf);
	free(ids), free(types), free(attn), free(labels), free(pred);
	return exitc;
}



/* The preset whose shapes (and eps, activation, labels) are the config's:
 * what a serving fleet can run (its plans name a preset). NULL if none. */
static const char *preset_of(const sky_model_cfg *c)
{
	static const char *const names[] = {"tiny", "mini", "base", "large"};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		sky_model_cfg p;
		if (sky_model_preset(names[i], &p) != 0)
			continue;
		if (p.hidden == c->hidden && p.heads == c->heads && p.ffn == c->ffn &&
		    p.vocab == c->vocab && p.max_pos == c->max_pos && p.type_vocab == c->type_vocab &&
		    p.classes == c->classes && c->act == p.act &&
		    sky_model_ln_eps(&p) == sky_model_ln_eps(c))
			return names[i];
	}
	return NULL;
}

/* --model-dir with --precision int8: DIR/model.safetensors quantised into
 * a temporary file as `sky job submit --task infer` quantises it (so the
 * logits are the serving fleet's, bit for bit), then the rows of --data
 * (the same metrics as fp32), or --tokens / --input. Returns the exit code. */
static int eval_dir_int8(const e_args *a)
{
	static sky_hf_config hc;
	static sky_dataset ds;
	static int64_t cm[SKY_HF_MAX_LABELS * SKY_HF_MAX_LABELS];
	sky_diag d;
	sky_diag_clear(&d);
	int rc, exitc = 2, have_ds = 0;
	char w[1024], tmp[1100];
	sky_st_file f;
	sky_st_init(&f);
	sky_qmodel m;
	memset(&m, 0, sizeof m);
	int32_t *ids = NULL, *attn = NULL;
	float *logits = NULL;
	tmp[0] = '\0';
	if ((rc = sky_hf_config_read(a->model_dir, &hc, &d)) != 0) {
		fprintf(stderr, "sky eval: %s: %s\n", a->model_dir, d.msg);
		return 2;
	}
	const char *preset = preset_of(&hc.cfg);
	if (!preset) {
		fprintf(stderr, "sky eval: --precision int8: %s (hidden %d, %d heads, FFN %d, vocab %d, "
			"%d labels, %s) has none of the shapes of %s, which int8 calibration and "
			"serving run; evaluate it in fp32\n", a->model_dir, hc.cfg.hidden, hc.cfg.heads,
			hc.cfg.ffn, hc.cfg.vocab, hc.cfg.classes, hc.act_name, sky_model_preset_names());
		return 2;
	}
	snprintf(w, sizeof w, "%s/model.safetensors", a->model_dir);
	if (!sky_file_exists(w)) {
		fprintf(stderr, "sky eval: --precision int8: %s is not there (a sharded checkpoint is "
			"read in fp32 only)\n", w);
		return 2;
	}
	long seq = a->task.seq;
	if (a->data) {
		if ((rc = sky_ds_open(&ds, a->data, &d)) != 0) {
			fprintf(stderr, "sky eval: %s: %s: %s\n", a->data, sky_strerror(rc), d.msg);
			return 2;
		}
		have_ds = 1;
		if (sky_data_fit("eval", a->model_dir, a->data, &hc, &ds) != 0)
			goto exit;
		seq = ds.meta.seq;
	}
	const char *td = getenv("TMPDIR");
	/* a name no other run picks: the time in ns and an address of this one */
	snprintf(tmp, sizeof tmp, "%s/sky-eval-%lx-%lx.int8.safetensors", td && *td ? td : "/tmp",
		 (unsigned long)(sky_clock_s() * 1e9), (unsigned long)(size_t)&hc);
	sky_quant_cli_task t = {.model = preset, .seq = seq, .batch = 0, .seed = 1};
	if ((rc = sky_quantize_file(w, tmp, 8, &t, SKY_QUANT_QUIET)) != 0) {
		fprintf(stderr, "sky eval: %s could not be quantised (see above)\n", w);
		goto exit;
	}
	exitc = 1;
	if ((rc = sky_st_open(&f, tmp, &d)) != 0) {
		fprintf(stderr, "sky eval: %s: %s\n", tmp, d.msg);
		goto exit;
	}
	sky_model_cfg c;
	if (sky_model_preset(preset, &c) != 0)
		goto exit;
	c.seq = seq > 0 ? (int)seq : c.seq;
	if (a->tokens || a->input) {
		c.batch = 1;
		if ((rc = sky_qmodel_open(&m, &f, &c, &d)) != 0) {
			fprintf(stderr, "sky eval: %s: %s\n", a->model_dir, d.msg);
			goto exit;
		}
		exitc = run_inputs(a, m.cfg.seq, m.cfg.vocab, m.cfg.classes, qmodel_forward1, &m);
		goto exit;
	}
	if (!a->data) {
		fprintf(stderr, "sky eval: --model-dir with --precision int8 takes --data, --tokens or "
			"--input\n");
		exitc = 2;
		goto exit;
	}
	c.batch = (int)(a->task.batch > 0 ? a->task.batch : SKY_HF_DEFAULT_BATCH);
	if ((rc = sky_qmodel_open(&m, &f, &c, &d)) != 0) {
		fprintf(stderr, "sky eval: %s: %s\n", a->model_dir, d.msg);
		goto exit;
	}
	const size_t S = (size_t)c.seq, B = (size_t)c.batch;
	ids = malloc(B * S * 4), attn = malloc(B * S * 4);
	logits = malloc(B * (size_t)c.classes * sizeof *logits);
	if (!ids || !attn || !logits) {
		fprintf(stderr, "sky eval: out of memory\n");
		goto exit;
	}
	int64_t typed = 0;
	for (size_t i = 0; i < (size_t)ds.meta.rows * S; i++)
		typed += ds.token_type_ids[i] != 0;
	if (typed)
		fprintf(stderr, "sky eval: %s has %lld tokens of type 1 (pairs): int8 embeds every "
			"token as type 0, as serving does\n", a->data, (long long)typed);
	sky_clsm met;
	sky_clsm_init(&met, c.classes, cm);
	double t_fwd = 0;
	long nb = 0;
	for (int64_t r0 = 0; r0 < ds.meta.rows; r0 += (int64_t)B, nb++) {
		int used = 0;
		for (size_t k = 0; k < B; k++) {
			int64_t r = r0 + (int64_t)k;
			if (r < ds.meta.rows)
				used++;
			else
				r = ds.meta.rows - 1; /* filler, not counted */
			memcpy(ids + k * S, ds.input_ids + (size_t)r * S, S * 4);
			memcpy(attn + k * S, ds.attention_mask + (size_t)r * S, S * 4);
		}
		double t0 = sky_clock_s();
		if ((rc = sky_qmodel_forward(&m, ids, attn, logits, NULL)) != 0) {
			fprintf(stderr, "sky eval: rows from %lld: %s\n", (long long)r0, sky_strerror(rc));
			goto exit;
		}
		t_fwd += sky_clock_s() - t0;
		for (int k = 0; k < used; k++)
			sky_clsm_add(&met, ds.labels[r0 + k], logits + (size_t)k * (size_t)c.classes);
	}
	double ms = t_fwd / (double)(nb ? nb : 1) * 1e3;
	const char *kernel = sky_k_s8_variant_name(sky_k_s8_variant_active());
	if (a->json) {
		cJSON *j = cJSON_CreateObject();
		if (!j)
			goto exit;
		cJSON_AddStringToObject(j, "model_dir", a->model_dir);
		cJSON_AddStringToObject(j, "data", a->data);
		cJSON_AddStringToObject(j, "precision", "int8");
		cJSON_AddStringToObject(j, "kernel", kernel);
		cJSON_AddStringToObject(j, "preset", preset);
		cJSON_AddNumberToObject(j, "seq", c.seq);
		cJSON_AddNumberToObject(j, "batch", c.batch);
		sky_data_metrics_json(j, &ds, &hc, &met);
		cJSON_AddNumberToObject(j, "forward_ms_per_batch", ms);
		int prc = sky_bench_print(j);
		cJSON_Delete(j);
		if (prc != 0)
			goto exit;
	} else {
		printf("%s on %s: %lld rows, int8 (%s, quantised as for serving): loss %.4f, accuracy "
		       "%.4f, macro-F1 %.4f (%.2f ms per micro-batch)\n",
		       a->model_dir, a->data, (long long)met.total, kernel, sky_clsm_loss(&met),
		       sky_clsm_accuracy(&met), sky_clsm_macro_f1(&met), ms);
		sky_data_metrics_text(&ds, &hc, &met);
	}
	exitc = 0;
exit:
	sky_qmodel_close(&m);
	sky_st_close(&f);
	if (tmp[0])
		sky_file_remove(tmp);
	if (have_ds)
		sky_ds_close(&ds);
	free(ids), free(attn), free(logits);
	return exitc;
}

int sky_cmd_eval(int argc, char **argv)
{
	e_args a;
	int prc = parse(argc, argv, &a);
	if (prc)
		return prc > 0 ? 0 : 2;
	if (a.model_dir && a.precision && strcmp(a.precision, "int8") == 0)
		return eval_dir_int8(&a);
	if (a.data)
		return sky_eval_data(a.model_dir, a.data, (unsigned long long)a.task.seed, a.task.batch,
				     a.json);
	if (a.model_dir)
		return eval_dir(&a);
	int rc, exitc = 1;
	sky_diag d;
	sky_diag_clear(&d);
	sky_st_file f;
	sky_st_init(&f);
	sky_qmodel m;
	memset(&m, 0, sizeof m);
	sky_model_cfg cfg;
	int32_t *ids = NULL, *types = NULL, *attn = NULL, *labels = NULL;
	float *logits = NULL;

	if ((rc = sky_st_open(&f, a.weights, &d)) != 0) {
		fprintf(stderr, "sky eval: %s: %s%s%s\n", a.weights, sky_strerror(rc),
			d.msg[0] ? ": " : "", d.msg);
		goto exit;
	}
	if (sky_quant_cli_cfg("eval", &f, &a.task, &cfg))
		goto exit;
	int prec, layers;
	if ((rc = sky_qmodel_probe(&f, &prec, &layers, &d)) != 0) {
		fprintf(stderr, "sky eval: %s: %s\n", a.weights, d.msg);
		goto exit;
	}
	const char *pname = prec == SKY_PREC_INT8 ? "int8" : "fp32";
	if (a.precision && strcmp(a.precision, pname) != 0) {
		fprintf(stderr, "sky eval: %s holds %s encoder layers, not %s%s\n", a.weights, pname,
			a.precision,
			prec == SKY_PREC_FP32 ? " (make an int8 file with sky quantize)" : "");
		goto exit;
	}
	if (a.tokens || a.input) {
		exitc = eval_inputs(&a, &f, cfg);
		goto exit;
	}
	if ((rc = sky_qmodel_open(&m, &f, &cfg, &d)) != 0) {
		fprintf(stderr, "sky eval: %s: %s: %s\n", a.weights, sky_strerror(rc), d.msg);
		goto exit;
	}
	const sky_model_cfg *c = &m.cfg;
	size_t T = (size_t)sky_model_tokens(c);
	ids = malloc(T * 4), types = malloc(T * 4), attn = malloc(T * 4);
	labels = malloc((size_t)c->batch * 4);
	logits = malloc((size_t)c->batch * c->classes * sizeof(float));
	if (!ids || !types || !attn || !labels || !logits) {
		fprintf(stderr, "sky eval: out of memory\n");
		goto exit;
	}
	long right = 0, total = 0;
	double t_fwd = 0;
	for (long i = 0; i < a.batches; i++) {
		if ((rc = sky_task_batch(c, (uint64_t)a.task.seed, SKY_TASK_HELDOUT, (uint64_t)i, ids,
					 types, attn, labels)))
			goto exit;
		double t0 = sky_clock_s();
		if ((rc = sky_qmodel_forward(&m, ids, attn, logits, NULL))) {
			fprintf(stderr, "sky eval: batch %ld: %s\n", i, sky_strerror(rc));
			goto exit;
		}
		t_fwd += sky_clock_s() - t0;
		for (int b = 0; b < c->batch; b++) {
			const float *lg = logits + (size_t)b * c->classes;
			int best = 0;
			for (int k = 1; k < c->classes; k++)
				if (lg[k] > lg[best])
					best = k;
			right += best == labels[b];
		}
		total += c->batch;
	}
	double acc = (double)right / (double)total;
	const char *kernel = prec == SKY_PREC_INT8 ? sky_k_s8_variant_name(sky_k_s8_variant_active())
						   : "openblas-sgemm";
	if (a.json) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "weights", a.weights);
		cJSON_AddStringToObject(j, "model", c->name);
		cJSON_AddNumberToObject(j, "layers", c->layers);
		cJSON_AddStringToObject(j, "precision", pname);
		cJSON_AddStringToObject(j, "kernel", kernel);
		cJSON_AddNumberToObject(j, "heldout_accuracy", acc);
		cJSON_AddNumberToObject(j, "correct", (double)right);
		cJSON_AddNumberToObject(j, "sequences", (double)total);
		cJSON_AddNumberToObject(j, "batch", c->batch);
		cJSON_AddNumberToObject(j, "seq", c->seq);
		cJSON_AddNumberToObject(j, "forward_ms_per_batch", t_fwd / (double)a.batches * 1e3);
		cJSON_AddNumberToObject(j, "layer_weight_bytes", (double)m.weight_bytes);
		int prc2 = j ? sky_bench_print(j) : SKY_ENOMEM; /* prints without allocating */
		cJSON_Delete(j);
		if (prc2 != 0)
			goto exit;
	} else {
		printf("%s: %s %d-layer model, %s layers (%s): held-out accuracy %.4f (%ld of %ld "
		       "sequences), %.2f ms per micro-batch\n",
		       a.weights, c->name, c->layers, pname, kernel, acc, right, total,
		       t_fwd / (double)a.batches * 1e3);
	}
	exitc = 0;
exit:
	sky_qmodel_close(&m);
	sky_st_close(&f);
	free(ids), free(types), free(attn), free(labels), free(logits);
	return exitc;
}
