/* sky bench train: fine-tuning throughput of a whole BERT classifier on one
 * board (sky_bert.h: embeddings with the model's whole vocabulary, L
 * encoder layers, pooler, classifier, loss, backward, global-norm clip,
 * AdamW over every parameter, the config's dropout), in sequences per
 * second, next to PyTorch eager doing the same step on the same machine with
 * the same threads (tools/bench_torch_train.py through /usr/bin/python3), in
 * one run.
 *
 * What both sides do per step, so the figures compare like with like: one
 * micro-batch of B sequences of S tokens, every token real (no padding on
 * either side), random ids over the whole vocabulary, token type 0;
 * gradients zeroed, forward with dropout (hidden and attention
 * probabilities, the same probabilities; the masks are each side's own),
 * mean cross-entropy, backward, clip to norm 1, AdamW (lr 2e-5, betas
 * 0.9/0.999, eps 1e-8, no weight decay) over every parameter, the word
 * embedding table's 30522 rows included: nn.Embedding's gradient is dense
 * and torch's AdamW updates every row, and so does Sky's. Sky runs first,
 * frees its model, then PyTorch runs. */
#include "bench_util.h"
#include "sky_arena.h"
#include "sky_bert.h"
#include "sky_cli.h"
#include "sky_err.h"
#include "sky_file.h"
#include "sky_hfmodel.h"
#include "sky_json.h"
#include "sky_model.h"
#include "sky_rng.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TORCH_SCRIPT "bench_torch_train.py"
#define DEFAULT_PYTHON "/usr/bin/python3"

typedef struct train_args {
	sky_model_cfg cfg;
	sky_bench_opts o;
	double lr, clip;
	const char *python;
	int no_torch;
} train_args;

static void usage(FILE *to)
{
	fprintf(to,
		"usage: sky bench train [--model NAME | --model-dir D] [--batch B] [--seq S]\n"
		"                       [--layers N] [--dropout P] [--no-torch] [common options]\n"
		"  sequences/s of one whole fine-tuning step of a BERT classifier (embeddings\n"
		"  with the model's vocabulary, the layers, pooler, classifier, loss, backward,\n"
		"  clip, AdamW over every parameter, dropout), Sky and PyTorch eager with the\n"
		"  same threads (tools/" TORCH_SCRIPT "), in one run\n"
		"  --model NAME      %s (default base: H768, 12 heads,\n"
		"                    FFN 3072, 12 layers, vocab 30522)\n"
		"  --model-dir D     the shapes, GELU form, eps and dropout of a Hugging Face\n"
		"                    BERT directory's config.json (weights stay random)\n"
		"  --batch B         sequences per step (default 8)\n"
		"  --seq S           tokens per sequence, all real (default 128)\n"
		"  --layers N        run only the first N encoder layers (quick runs)\n"
		"  --dropout P       hidden and attention dropout (default: the config's, 0.1\n"
		"                    for a preset, as BERT-base's config)\n"
		"  --lr X            AdamW learning rate (default 2e-5)\n"
		"  --clip X          global gradient norm clip, 0 off (default 1)\n"
		"  --python PATH     the Python with torch (default " DEFAULT_PYTHON ")\n"
		"  --no-torch        Sky only\n"
		"common options (defaults here: --warmup 1 --runs 5):\n%s",
		sky_model_preset_names(), sky_bench_common_help());
}

/* ---- Sky ------------------------------------------------------------------ */

typedef struct sky_side {
	sky_bert m;
	sky_bert_batch b;
	float loss;
} sky_side;

static int run_step(void *ctx)
{
	sky_side *s = ctx;
	return sky_bert_train_step(&s->m, &s->b, &s->loss);
}

static int bench_sky(const train_args *a, cJSON *out)
{
	const sky_model_cfg *c = &a->cfg;
	static sky_side s;
	int rc = SKY_ENOMEM;
	void *buf = NULL;
	int32_t *ids = NULL, *labels = NULL;
	sky_bert_opts bo;
	memset(&bo, 0, sizeof bo);
	sky_optim_default(&bo.optim, SKY_OPTIM_ADAMW);
	bo.optim.lr = (float)a->lr;
	bo.micro = 1;
	bo.clip_norm = (float)a->clip;
	bo.drop_seed = 1;
	size_t bytes = 0;
	if ((rc = sky_bert_arena_bytes(c, &bo, &bytes)) != 0)
		goto exit;
	rc = SKY_ENOMEM;
	buf = malloc(bytes);
	const size_t T = (size_t)c->batch * c->seq;
	ids = malloc(T * sizeof *ids);
	labels = malloc((size_t)c->batch * sizeof *labels);
	if (!buf || !ids || !labels) {
		fprintf(stderr, "sky bench train: cannot allocate the model (%zu bytes)\n", bytes);
		goto exit;
	}
	sky_arena ar;
	sky_arena_init(&ar, buf, bytes);
	if ((rc = sky_bert_carve(&s.m, c, &bo, &ar)) != 0 || (rc = sky_arena_seal(&ar)) != 0)
		goto exit;
	sky_bert_init(&s.m, 1);
	sky_rng r;
	sky_rng_seed(&r, 2);
	for (size_t i = 0; i < T; i++)
		ids[i] = (int32_t)sky_rng_below(&r, (uint32_t)c->vocab);
	for (int i = 0; i < c->batch; i++)
		labels[i] = (int32_t)sky_rng_below(&r, (uint32_t)c->classes);
	/* token type 0 and every token real, as the torch side */
	s.b = (sky_bert_batch){ids, NULL, NULL, labels};
	sky_bench_stats st;
	if ((rc = sky_bench_measure(&a->o, run_step, &s, &st)) != 0)
		goto exit;
	cJSON_AddNumberToObject(out, "params", (double)(sky_model_embed_params(c) +
							 c->layers * sky_model_layer_params(c) +
							 sky_model_head_params(c)));
	cJSON_AddNumberToObject(out, "arena_bytes", (double)bytes);
	cJSON_AddNumberToObject(out, "sky_step_ms", st.median * 1e3);
	cJSON_AddNumberToObject(out, "sky_sequences_per_s", c->batch / st.median);
	cJSON_AddNumberToObject(out, "sky_last_loss", s.loss);
	sky_bench_add_stats(out, "sky_step_stats_ms", &st);
	rc = 0;
exit:
	free(buf), free(ids), free(labels);
	return rc;
}

/* ---- PyTorch -------------------------------------------------------------- */

/* Where tools/bench_torch_train.py is: $SKY_TOOLS, tools/ here, or beside
 * the build (<repo>/build/<board>/bin/sky). */
static int find_torch_script(char *out, size_t cap)
{
	const char *env = getenv("SKY_TOOLS");
	char bin[1024];
	if (env) {
		snprintf(out, cap, "%s/" TORCH_SCRIPT, env);
		return sky_file_exists(out) ? 0 : SKY_ENOTFOUND;
	}
	snprintf(out, cap, "tools/" TORCH_SCRIPT);
	if (sky_file_exists(out))
		return 0;
	if (sky_file_exe_dir(bin, sizeof bin) == 0) {
		snprintf(out, cap, "%s/../../../tools/" TORCH_SCRIPT, bin);
		if (sky_file_exists(out))
			return 0;
	}
	return SKY_ENOTFOUND;
}

/* Runs the torch side; returns its JSON document, or NULL with why set. */
static cJSON *run_torch(const train_args *a, char *why, size_t cap)
{
	const sky_model_cfg *c = &a->cfg;
	char script[1200], cmd[4096], line[8192];
	if (find_torch_script(script, sizeof script) != 0) {
		snprintf(why, cap, "tools/" TORCH_SCRIPT " not found (run from the repository, or "
				   "set SKY_TOOLS)");
		return NULL;
	}
	if (!sky_file_is_exec(a->python)) {
		snprintf(why, cap, "%s is not an executable", a->python);
		return NULL;
	}
	/* quoted for the shell: the paths are ours or the user's own options */
	snprintf(cmd, sizeof cmd,
		 "'%s' '%s' --hidden %d --heads %d --ffn %d --layers %d --vocab %d --max-pos %d "
		 "--type-vocab %d --classes %d --batch %d --seq %d --hidden-dropout %.9g "
		 "--attn-dropout %.9g --ln-eps %.9g --act %s --lr %.9g --clip %.9g --threads %d "
		 "--runs %d --warmup %d --max-seconds %.9g",
		 a->python, script, c->hidden, c->heads, c->ffn, c->layers, c->vocab, c->max_pos,
		 c->type_vocab, c->classes, c->batch, c->seq, (double)c->hidden_drop,
		 (double)c->attn_drop, (double)sky_model_ln_eps(c),
		 c->act == SKY_ACT_GELU_TANH ? "gelu_tanh" : "gelu", a->lr, a->clip, a->o.threads,
		 a->o.runs, a->o.warmup, a->o.max_s);
	fflush(stdout);
	FILE *p = popen(cmd, "r");
	if (!p) {
		snprintf(why, cap, "cannot start %s", a->python);
		return NULL;
	}
	size_t n = fread(line, 1, sizeof line - 1, p);
	int st = pclose(p);
	line[n] = 0;
	sky_diag d;
	sky_diag_clear(&d);
	cJSON *o = n ? sky_json_parse(line, n, &d) : NULL;
	if (!o) {
		snprintf(why, cap, "%s printed no result (exit status %d)", TORCH_SCRIPT, st);
		return NULL;
	}
	if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "ok"))) {
		const cJSON *w = cJSON_GetObjectItemCaseSensitive(o, "why");
		snprintf(why, cap, "%s", cJSON_IsString(w) ? w->valuestring : "the torch script failed");
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

static const char *str(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	return cJSON_IsString(v) ? v->valuestring : "";
}

/* ---- the command ---------------------------------------------------------- */

int sky_bench_train(int argc, char **argv)
{
	const char *cmd = "bench train";
	static train_args a;
	const char *model = "base", *model_dir = NULL;
	long batch = 8, seq = 128, layers = 0;
	double dropout = -1;
	int model_given = 0;
	memset(&a, 0, sizeof a);
	a.lr = 2e-5;
	a.clip = 1.0;
	a.python = DEFAULT_PYTHON;
	sky_bench_opts_default(&a.o);
	a.o.warmup = 1;
	a.o.runs = 5;
	enum {
		O_MODEL = SKY_BENCH_OPT_OWN,
		O_MODEL_DIR,
		O_BATCH,
		O_SEQ,
		O_LAYERS,
		O_DROPOUT,
		O_LR,
		O_CLIP,
		O_PYTHON,
		O_NO_TORCH
	};
	static const struct option k_opts[] = {{"model", required_argument, NULL, O_MODEL},
					       {"model-dir", required_argument, NULL, O_MODEL_DIR},
					       {"batch", required_argument, NULL, O_BATCH},
					       {"seq", required_argument, NULL, O_SEQ},
					       {"layers", required_argument, NULL, O_LAYERS},
					       {"dropout", required_argument, NULL, O_DROPOUT},
					       {"lr", required_argument, NULL, O_LR},
					       {"clip", required_argument, NULL, O_CLIP},
					       {"python", required_argument, NULL, O_PYTHON},
					       {"no-torch", no_argument, NULL, O_NO_TORCH},
					       SKY_BENCH_OPT_TABLE,
					       SKY_OPT_STD,
					       {0}};
	sky_opt po;
	sky_opt_begin(&po, "sky bench train", argc, argv, k_opts, 0);
	for (int c; (c = sky_opt_next(&po)) != SKY_OPT_END;) {
		int rc = sky_bench_opt(cmd, c, po.name, po.arg, &a.o);
		if (rc < 0)
			return 2;
		if (rc > 0)
			continue;
		const char *opt = po.name, *val = po.arg;
		if (c == SKY_OPT_HELP) {
			usage(stdout);
			return 0;
		} else if (c == SKY_OPT_VERSION) {
			return 0;
		} else if (c == O_MODEL) {
			model = val;
			model_given = 1;
		} else if (c == O_MODEL_DIR) {
			model_dir = val;
		} else if (c == O_BATCH) {
			if (sky_cli_int(cmd, opt, val, 1, 4096, &batch))
				return 2;
		} else if (c == O_SEQ) {
			if (sky_cli_int(cmd, opt, val, 1, 65536, &seq))
				return 2;
		} else if (c == O_LAYERS) {
			if (sky_cli_int(cmd, opt, val, 1, 1000, &layers))
				return 2;
		} else if (c == O_DROPOUT) {
			if (sky_cli_double(cmd, opt, val, 0, 0.99, &dropout))
				return 2;
		} else if (c == O_LR) {
			if (sky_cli_double(cmd, opt, val, 1e-12, 10, &a.lr))
				return 2;
		} else if (c == O_CLIP) {
			if (sky_cli_double(cmd, opt, val, 0, 1e9, &a.clip))
				return 2;
		} else if (c == O_PYTHON) {
			a.python = val;
		} else if (c == O_NO_TORCH) {
			a.no_torch = 1;
		} else {
			return 2;
		}
	}
	if (sky_opt_no_args(&po) != 0) {
		usage(stderr);
		return 2;
	}
	if (model_dir && model_given) {
		fprintf(stderr, "sky %s: --model and --model-dir exclude each other\n", cmd);
		return 2;
	}
	if (model_dir) {
		static sky_hf_config hc; /* large (label names): not on the stack */
		sky_diag d;
		sky_diag_clear(&d);
		if (sky_hf_config_read(model_dir, &hc, &d) != 0) {
			fprintf(stderr, "sky %s: %s: %s\n", cmd, model_dir, d.msg);
			return 2;
		}
		a.cfg = hc.cfg;
		model = model_dir;
	} else if (sky_model_preset(model, &a.cfg) != 0) {
		fprintf(stderr, "sky %s: unknown model '%s' (%s)\n", cmd, model,
			sky_model_preset_names());
		return 2;
	} else {
		/* BERT-base's config.json says 0.1 for both */
		a.cfg.hidden_drop = a.cfg.attn_drop = 0.1f;
	}
	if (dropout >= 0)
		a.cfg.hidden_drop = a.cfg.attn_drop = (float)dropout;
	if (layers > a.cfg.layers) {
		fprintf(stderr, "sky %s: --layers %ld is more than the %d layers of %s\n", cmd, layers,
			a.cfg.layers, model);
		return 2;
	}
	if (layers > 0)
		a.cfg.layers = (int)layers;
	if (seq > a.cfg.max_pos) {
		fprintf(stderr, "sky %s: --seq %ld is more than the %d positions of %s\n", cmd, seq,
			a.cfg.max_pos, model);
		return 2;
	}
	a.cfg.batch = (int)batch;
	a.cfg.seq = (int)seq;
	if (sky_model_validate(&a.cfg) != 0) {
		fprintf(stderr, "sky %s: batch %ld x seq %ld does not fit model %s\n", cmd, batch,
			seq, model);
		return 2;
	}
	sky_bench_set_threads(a.o.threads);

	const sky_model_cfg *c = &a.cfg;
	int rc = SKY_ENOMEM;
	cJSON *out = sky_json_new_object(), *t = NULL;
	char why[512] = "";
	if (!out)
		goto exit;
	cJSON_AddStringToObject(out, "bench", "train");
	cJSON_AddStringToObject(out, "model", model_dir ? model_dir : c->name);
	cJSON_AddNumberToObject(out, "batch", c->batch);
	cJSON_AddNumberToObject(out, "seq", c->seq);
	cJSON_AddNumberToObject(out, "layers", c->layers);
	cJSON_AddNumberToObject(out, "hidden", c->hidden);
	cJSON_AddNumberToObject(out, "heads", c->heads);
	cJSON_AddNumberToObject(out, "ffn", c->ffn);
	cJSON_AddNumberToObject(out, "vocab", c->vocab);
	cJSON_AddNumberToObject(out, "max_pos", c->max_pos);
	cJSON_AddNumberToObject(out, "classes", c->classes);
	cJSON_AddNumberToObject(out, "hidden_dropout", c->hidden_drop);
	cJSON_AddNumberToObject(out, "attention_dropout", c->attn_drop);
	cJSON_AddStringToObject(out, "optim", "adamw");
	cJSON_AddNumberToObject(out, "lr", a.lr);
	cJSON_AddNumberToObject(out, "clip", a.clip);
	if ((rc = bench_sky(&a, out)) != 0) {
		fprintf(stderr, "sky %s: the Sky step failed: %s\n", cmd, sky_strerror(rc));
		goto exit;
	}
	double sky_sps = num(out, "sky_sequences_per_s");
	if (a.no_torch)
		snprintf(why, sizeof why, "--no-torch");
	else
		t = run_torch(&a, why, sizeof why);
	double torch_sps = t ? num(t, "sequences_per_s") : 0;
	if (t) {
		cJSON_AddNumberToObject(out, "torch_step_ms", num(t, "step_ms"));
		cJSON_AddNumberToObject(out, "torch_sequences_per_s", torch_sps);
		cJSON_AddNumberToObject(out, "sky_over_torch", torch_sps > 0 ? sky_sps / torch_sps : 0);
		cJSON_AddStringToObject(out, "torch_version", str(t, "torch"));
		cJSON_AddNumberToObject(out, "torch_threads", num(t, "threads"));
		cJSON_AddStringToObject(out, "torch_blas_core", str(t, "openblas_core"));
		cJSON_AddStringToObject(out, "torch_omp_wait_policy", str(t, "omp_wait_policy"));
		cJSON_AddBoolToObject(out, "torch_adamw_foreach",
				      cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(t,
										    "adamw_foreach")));
		cJSON_AddNumberToObject(out, "torch_params", num(t, "params"));
	} else {
		cJSON_AddNullToObject(out, "torch_sequences_per_s");
		cJSON_AddStringToObject(out, "torch_not_run", why);
	}
	sky_bench_add_env(out, "openblas-sgemm", a.o.threads);
	if (a.o.json) {
		rc = sky_bench_print(out);
	} else {
		printf("train %s: %d layer(s), H%d, %d heads, FFN %d, vocab %d, batch %d x seq %d, "
		       "dropout %g/%g, AdamW, %d thread(s)\n",
		       model_dir ? model_dir : c->name, c->layers, c->hidden, c->heads, c->ffn,
		       c->vocab, c->batch, c->seq, (double)c->hidden_drop, (double)c->attn_drop,
		       a.o.threads);
		printf("  sky    %8.2f sequences/s  (step %.1f ms, median of %d)\n", sky_sps,
		       num(out, "sky_step_ms"),
		       (int)num(cJSON_GetObjectItemCaseSensitive(out, "sky_step_stats_ms"), "count"));
		if (t)
			printf("  torch  %8.2f sequences/s  (step %.1f ms, torch %s, %d thread(s))\n"
			       "  sky/torch %.2fx\n",
			       torch_sps, num(t, "step_ms"), str(t, "torch"), (int)num(t, "threads"),
			       torch_sps > 0 ? sky_sps / torch_sps : 0);
		else
			printf("  torch  not run: %s\n", why);
		rc = 0;
	}
exit:
	sky_json_free(out);
	sky_json_free(t);
	return rc == 0 ? 0 : 1;
}
