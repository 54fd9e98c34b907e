/* sky train: train a BERT classifier on one board on the synthetic task
 * (runtime/sky_task.h), printing each step, then held-out accuracy.
 * Everything, the batches included, is carved from one arena that is
 * sealed before the first step. */
#include "sky_cli.h"

#include "sky_arena.h"
#include "sky_bert.h"
#include "sky_clock.h"
#include "sky_err.h"
#include "sky_hfmodel.h"
#include "sky_model.h"
#include "sky_opt.h"
#include "sky_task.h"
#include "train_data.h"

#include <cblas.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct train_args {
	const char *model, *optim, *save;
	const char *model_dir, *save_dir; /* Hugging Face directories in and out */
	const char *data, *eval_data;     /* prepared sets (sky data prepare) */
	long layers, steps, seed, batch, seq, micro, eval, threads, warmup, epochs;
	double lr, clip;
	int json, quiet, init_weights, steps_given, lr_given, exact_sum;
} train_args;

static void usage(FILE *to)
{
	fprintf(to,
		"usage: sky train [options]\n"
		"  trains a BERT classifier on the synthetic \"is A more frequent than B\" task\n"
		"  (padded sequences; see README) and reports held-out accuracy, or with\n"
		"  --model-dir D --data F.skyds fine-tunes D on a prepared data set\n"
		"  --data F        a set from sky data prepare: fine-tune on it, reporting each\n"
		"                  epoch (docs/data.md); lr defaults to 2e-5 (adamw)\n"
		"  --eval-data F   with --data: a dev set evaluated after every epoch (loss,\n"
		"                  accuracy, macro-F1, per-class precision/recall, confusion)\n"
		"  --epochs E      with --data: passes over the set (default 3); or --steps N\n"
		"  --model NAME    %s (default tiny)\n"
		"  --model-dir D   a Hugging Face BERT directory instead (config.json and\n"
		"                  model.safetensors or a sharded index): its shapes, and its\n"
		"                  weights as the start (docs/models.md)\n"
		"  --init-weights  with --model-dir: start from the seed, not the checkpoint\n"
		"  --layers N      encoder layers (default: the preset's)\n"
		"  --steps N       optimizer steps (default 300)\n"
		"  --seed N        weights and data (default 1)\n"
		"  --batch B       sequences per micro-batch (default: the preset's)\n"
		"  --seq S         tokens per sequence (default: the preset's)\n"
		"  --micro N       micro-batches per step, gradients accumulated (default 1)\n"
		"  --exact-sum     add the micro-batches' gradients in fixed point, in no order\n"
		"                  (what a fleet job with stage replicas computes, bit for bit)\n"
		"  --lr X          learning rate (default: adamw 1e-3, sgd 0.05)\n"
		"  --optim NAME    adamw|sgd (sgd: momentum 0.9) (default adamw)\n"
		"  --clip X        global gradient norm clip, 0 off (default 1)\n"
		"  --warmup N      steps of linear learning-rate warm-up, then linear decay to 0\n"
		"                  (default: a tenth of --steps)\n"
		"  --eval N        held-out micro-batches to evaluate (default 64)\n"
		"  --threads N     OpenBLAS threads (default 1)\n"
		"  --save FILE     write the trained weights as safetensors (HuggingFace\n"
		"                  BertForSequenceClassification names)\n"
		"  --save-dir D    write the trained model as a Hugging Face directory\n"
		"                  (config.json with id2label, model.safetensors in F32)\n"
		"  --quiet         no per-step lines\n"
		"  --json          final summary as one JSON object on stdout (steps to stderr)\n"
		"  -h, --help; --version; an option's value follows a space or =\n",
		sky_model_preset_names());
}

enum {
	O_MODEL = SKY_OPT_FIRST, O_OPTIM, O_SAVE, O_LAYERS, O_STEPS, O_SEED, O_BATCH, O_SEQ,
	O_MICRO, O_EVAL, O_THREADS, O_LR, O_CLIP, O_WARMUP, O_JSON, O_QUIET, O_MODEL_DIR,
	O_SAVE_DIR, O_INIT_WEIGHTS, O_DATA, O_EVAL_DATA, O_EPOCHS, O_EXACT_SUM
};

static const struct option k_opts[] = {
	{"model", required_argument, NULL, O_MODEL},	 {"optim", required_argument, NULL, O_OPTIM},
	{"save", required_argument, NULL, O_SAVE},	 {"layers", required_argument, NULL, O_LAYERS},
	{"steps", required_argument, NULL, O_STEPS},	 {"seed", required_argument, NULL, O_SEED},
	{"batch", required_argument, NULL, O_BATCH},	 {"seq", required_argument, NULL, O_SEQ},
	{"micro", required_argument, NULL, O_MICRO},	 {"eval", required_argument, NULL, O_EVAL},
	{"threads", required_argument, NULL, O_THREADS}, {"lr", required_argument, NULL, O_LR},
	{"clip", required_argument, NULL, O_CLIP},	 {"warmup", required_argument, NULL, O_WARMUP},
	{"json", no_argument, NULL, O_JSON},		 {"quiet", no_argument, NULL, O_QUIET},
	{"model-dir", required_argument, NULL, O_MODEL_DIR},
	{"save-dir", required_argument, NULL, O_SAVE_DIR},
	{"init-weights", no_argument, NULL, O_INIT_WEIGHTS},
	{"data", required_argument, NULL, O_DATA},
	{"eval-data", required_argument, NULL, O_EVAL_DATA},
	{"epochs", required_argument, NULL, O_EPOCHS},
	{"exact-sum", no_argument, NULL, O_EXACT_SUM},
	SKY_OPT_STD,					 {0}};

/* Returns 0 to go on, 1 after --help/--version, SKY_EINVAL (reported). */
static int parse(int argc, char **argv, train_args *a)
{
	const char *cmd = "train";
	memset(a, 0, sizeof *a);
	a->model = "tiny";
	a->optim = "adamw";
	a->steps = 300;
	a->seed = 1;
	a->micro = 1;
	a->eval = 64;
	a->threads = 1;
	a->lr = -1;
	a->warmup = -1;
	a->clip = 1.0;
	int model_given = 0;
	sky_opt p;
	sky_opt_begin(&p, "sky train", argc, argv, k_opts, 0);
	for (int c; (c = sky_opt_next(&p)) != SKY_OPT_END;) {
		const char *o = p.name, *v = p.arg;
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
		case O_QUIET:
			a->quiet = 1;
			break;
		case O_MODEL:
			a->model = v;
			model_given = 1;
			break;
		case O_MODEL_DIR:
			a->model_dir = v;
			break;
		case O_SAVE_DIR:
			a->save_dir = v;
			break;
		case O_INIT_WEIGHTS:
			a->init_weights = 1;
			break;
		case O_DATA:
			a->data = v;
			break;
		case O_EVAL_DATA:
			a->eval_data = v;
			break;
		case O_EPOCHS:
			rc = sky_cli_int(cmd, o, v, 1, 100000, &a->epochs);
			break;
		case O_OPTIM:
			a->optim = v;
			break;
		case O_SAVE:
			a->save = v;
			break;
		case O_LAYERS:
			rc = sky_cli_int(cmd, o, v, 1, 1000, &a->layers);
			break;
		case O_STEPS:
			rc = sky_cli_int(cmd, o, v, 1, 100000000, &a->steps);
			a->steps_given = 1;
			break;
		case O_SEED:
			rc = sky_cli_int(cmd, o, v, 0, 0x7fffffffL, &a->seed);
			break;
		case O_BATCH:
			rc = sky_cli_int(cmd, o, v, 1, 65536, &a->batch);
			break;
		case O_SEQ:
			rc = sky_cli_int(cmd, o, v, 4, 65536, &a->seq);
			break;
		case O_MICRO:
			rc = sky_cli_int(cmd, o, v, 1, 4096, &a->micro);
			break;
		case O_EVAL:
			rc = sky_cli_int(cmd, o, v, 1, 1000000, &a->eval);
			break;
		case O_THREADS:
			rc = sky_cli_int(cmd, o, v, 1, 256, &a->threads);
			break;
		case O_WARMUP:
			rc = sky_cli_int(cmd, o, v, 0, 100000000, &a->warmup);
			break;
		case O_LR:
			rc = sky_cli_double(cmd, o, v, 1e-9, 100, &a->lr);
			a->lr_given = 1;
			break;
		case O_CLIP:
			rc = sky_cli_double(cmd, o, v, 0, 1e9, &a->clip);
			break;
		case O_EXACT_SUM:
			a->exact_sum = 1;
			break;
		default:
			return SKY_EINVAL;
		}
		if (rc)
			return SKY_EINVAL;
	}
	if (sky_opt_no_args(&p) != 0) {
		return SKY_EINVAL;
	}
	if (a->model_dir && model_given) {
		fprintf(stderr, "sky train: --model and --model-dir exclude each other\n");
		return SKY_EINVAL;
	}
	if (a->model_dir && a->layers) {
		fprintf(stderr, "sky train: with --model-dir the config sets the layers (no --layers)\n");
		return SKY_EINVAL;
	}
	if (a->init_weights && !a->model_dir) {
		fprintf(stderr, "sky train: --init-weights goes with --model-dir\n");
		return SKY_EINVAL;
	}
	if (a->data && !a->model_dir) {
		fprintf(stderr, "sky train: --data goes with --model-dir (the model the set was "
				"prepared for)\n");
		return SKY_EINVAL;
	}
	if ((a->eval_data || a->epochs) && !a->data) {
		fprintf(stderr, "sky train: --eval-data and --epochs go with --data\n");
		return SKY_EINVAL;
	}
	if (a->data && a->steps_given && a->epochs) {
		fprintf(stderr, "sky train: --steps and --epochs exclude each other\n");
		return SKY_EINVAL;
	}
	if (a->data && (a->seq || a->save)) {
		fprintf(stderr, "sky train: with --data the set sets the sequence length and the "
				"model is saved with --save-dir (no --seq or --save)\n");
		return SKY_EINVAL;
	}
	return 0;
}

/* Batches for the task, carved with the model. */
typedef struct batch_buf {
	int32_t *ids, *types, *attn, *labels;
} batch_buf;

static void carve_batch(sky_arena *a, const sky_model_cfg *c, batch_buf *b)
{
	size_t t = (size_t)sky_model_tokens(c);
	b->ids = sky_arena_alloc(a, t * sizeof(int32_t), SKY_LIFE_ACT);
	b->types = sky_arena_alloc(a, t * sizeof(int32_t), SKY_LIFE_ACT);
	b->attn = sky_arena_alloc(a, t * sizeof(int32_t), SKY_LIFE_ACT);
	b->labels = sky_arena_alloc(a, (size_t)c->batch * sizeof(int32_t), SKY_LIFE_ACT);
}

/* Everything the run carves: the model, a batch per micro-batch, one for
 * evaluation and its predictions. */
typedef struct run {
	sky_bert m;
	batch_buf mb[64];
	sky_bert_batch view[64];
	batch_buf eval;
	int32_t *pred;
} run;

static int carve_run(run *r, const sky_model_cfg *c, const sky_bert_opts *o, sky_arena *a)
{
	int rc = sky_bert_carve(&r->m, c, o, a);
	if (rc)
		return rc;
	for (int i = 0; i < o->micro; i++)
		carve_batch(a, c, &r->mb[i]);
	carve_batch(a, c, &r->eval);
	r->pred = sky_arena_alloc(a, (size_t)c->batch * sizeof(int32_t), SKY_LIFE_ACT);
	return sky_arena_status(a);
}

static int fill(const sky_model_cfg *c, uint64_t seed, int split, uint64_t index, batch_buf *b,
		sky_bert_batch *v)
{
	v->ids = b->ids, v->types = b->types, v->attn = b->attn, v->labels = b->labels;
	return sky_task_batch(c, seed, split, index, b->ids, b->types, b->attn, b->labels);
}

/* Held-out accuracy and mean loss over n micro-batches. */
static int evaluate(run *r, uint64_t seed, long n, double *acc, double *loss)
{
	const sky_model_cfg *c = &r->m.cfg;
	long right = 0, total = 0;
	double lsum = 0;
	for (long i = 0; i < n; i++) {
		sky_bert_batch v;
		float l = 0;
		int rc = fill(c, seed, SKY_TASK_HELDOUT, (uint64_t)i, &r->eval, &v);
		if (!rc)
			rc = sky_bert_predict(&r->m, &v, r->pred, &l);
		if (rc)
			return rc;
		for (int b = 0; b < c->batch; b++)
			right += r->pred[b] == v.labels[b];
		total += c->batch;
		lsum += l;
	}
	*acc = (double)right / (double)total;
	*loss = lsum / (double)n;
	return 0;
}

int sky_cmd_train(int argc, char **argv)
{
	train_args a;
	int prc = parse(argc, argv, &a);
	if (prc)
		return prc > 0 ? 0 : 2;
	if (a.data && a.exact_sum) {
		fprintf(stderr, "sky train: --exact-sum is not available with --data yet\n");
		return 2;
	}
	if (a.data) {
		openblas_set_num_threads((int)a.threads);
		sky_train_data_args t = {
			.model_dir = a.model_dir, .data = a.data, .eval_data = a.eval_data,
			.save_dir = a.save_dir, .optim = a.optim,
			.steps = a.steps_given ? a.steps : 0, .epochs = a.epochs, .seed = a.seed,
			.batch = a.batch, .micro = a.micro, .warmup = a.warmup,
			.lr = a.lr_given ? a.lr : 0, .clip = a.clip, .json = a.json, .quiet = a.quiet,
			.init_weights = a.init_weights,
		};
		return sky_train_data(&t);
	}
	sky_model_cfg c;
	static sky_hf_config hc; /* large (label names): not on the stack */
	sky_diag d;
	sky_diag_clear(&d);
	if (a.model_dir) {
		int hrc = sky_hf_config_read(a.model_dir, &hc, &d);
		if (hrc) {
			fprintf(stderr, "sky train: %s: %s\n", a.model_dir, d.msg);
			return 2;
		}
		c = hc.cfg;
	} else if (sky_model_preset(a.model, &c) != 0) {
		fprintf(stderr, "sky train: unknown model '%s' (%s)\n", a.model,
			sky_model_preset_names());
		return 2;
	}
	if (a.layers)
		c.layers = (int)a.layers;
	if (a.batch)
		c.batch = (int)a.batch;
	if (a.seq)
		c.seq = (int)a.seq;
	if (sky_model_validate(&c) != 0 || sky_task_check(&c) != 0) {
		fprintf(stderr, "sky train: model %s cannot run with these options\n", c.name);
		return 2;
	}
	sky_bert_opts o;
	memset(&o, 0, sizeof o);
	sky_optim_kind kind;
	if (sky_optim_parse(a.optim, &kind) != 0) {
		fprintf(stderr, "sky train: --optim expects adamw or sgd, got '%s'\n", a.optim);
		return 2;
	}
	if (a.micro > 64) {
		fprintf(stderr, "sky train: --micro is at most 64\n");
		return 2;
	}
	sky_optim_default(&o.optim, kind);
	o.optim.lr = a.lr > 0 ? (float)a.lr : (kind == SKY_OPTIM_SGD ? 0.05f : 1e-3f);
	o.micro = (int)a.micro;
	o.clip_norm = (float)a.clip;
	o.drop_seed = (uint64_t)a.seed; /* the config's dropout, masks from the run's seed */
	o.fx_sum = a.exact_sum;
	openblas_set_num_threads((int)a.threads);

	/* measure, allocate once, carve, seal */
	int rc;
	static run r;
	sky_arena meas, arena;
	sky_arena_init(&meas, NULL, 0);
	if ((rc = carve_run(&r, &c, &o, &meas)) != 0) {
		fprintf(stderr, "sky train: %s\n", sky_strerror(rc));
		return 2;
	}
	size_t bytes = sky_arena_required(&meas);
	void *buf = malloc(bytes);
	if (!buf) {
		fprintf(stderr, "sky train: cannot allocate the %zu-byte arena\n", bytes);
		return 1;
	}
	sky_arena_init(&arena, buf, bytes);
	rc = carve_run(&r, &c, &o, &arena);
	if (!rc)
		rc = sky_arena_seal(&arena);
	if (rc) {
		fprintf(stderr, "sky train: carving the arena failed: %s\n", sky_strerror(rc));
		free(buf);
		return 1;
	}
	if (a.model_dir && !a.init_weights) {
		/* the checkpoint's weights; what it lacks (pooler, classifier)
		 * comes from the seed */
		sky_hf_report rep;
		if ((rc = sky_hf_load_dir(&r.m, a.model_dir, (unsigned long long)a.seed, &rep,
					  &d)) != 0) {
			fprintf(stderr, "sky train: %s: %s\n", a.model_dir, d.msg);
			free(buf);
			return 2;
		}
	} else {
		sky_bert_init(&r.m, (unsigned long long)a.seed);
	}
	for (int i = 0; i < o.micro; i++)
		r.view[i] = (sky_bert_batch){0};

	FILE *prog = a.json ? stderr : stdout;
	if (!a.quiet && a.model_dir)
		fprintf(prog,
			"sky train: %s (%d labels, %s, layer_norm_eps %g, dropout %g hidden, %g "
			"attention), from the %s\n",
			a.model_dir, c.classes, hc.act_name, hc.ln_eps, (double)c.hidden_drop,
			(double)c.attn_drop, a.init_weights ? "seed" : "checkpoint");
	if (!a.quiet)
		fprintf(prog,
			"sky train: model %s, %d layers, H %d, batch %d x seq %d, %d micro-batch(es), "
			"%s lr %g, arena %.1f MiB\n",
			c.name, c.layers, c.hidden, c.batch, c.seq, o.micro, sky_optim_name(kind),
			(double)o.optim.lr, (double)bytes / (1 << 20));
	double first_loss = 0, last_loss = 0, t_start = sky_clock_s(), ms_sum = 0;
	const float lr = o.optim.lr;
	const long warmup = a.warmup >= 0 ? a.warmup : a.steps / 10;
	for (long s = 0; s < a.steps; s++) {
		/* linear warm-up then linear decay, as BERT fine-tuning does */
		r.m.opts.optim.lr = sky_optim_lr_at(lr, s, a.steps, warmup);
		for (int i = 0; i < o.micro && !rc; i++)
			rc = fill(&c, (uint64_t)a.seed, SKY_TASK_TRAIN, (uint64_t)(s * o.micro + i),
				  &r.mb[i], &r.view[i]);
		float loss = 0;
		double t0 = sky_clock_s();
		if (!rc)
			rc = sky_bert_train_step(&r.m, r.view, &loss);
		double ms = (sky_clock_s() - t0) * 1e3;
		if (rc) {
			fprintf(stderr, "sky train: step %ld failed: %s\n", s + 1, sky_strerror(rc));
			free(buf);
			return 1;
		}
		ms_sum += ms;
		if (s == 0)
			first_loss = loss;
		last_loss = loss;
		if (!a.quiet)
			fprintf(prog, "step %ld loss %.4f ms %.2f\n", s + 1, (double)loss, ms);
	}
	double train_s = sky_clock_s() - t_start;
	double acc = 0, eval_loss = 0;
	if ((rc = evaluate(&r, (uint64_t)a.seed, a.eval, &acc, &eval_loss)) != 0) {
		fprintf(stderr, "sky train: evaluation failed: %s\n", sky_strerror(rc));
		free(buf);
		return 1;
	}
	if (a.save_dir) {
		if ((rc = sky_hf_save_dir(&r.m, a.model_dir ? &hc : NULL, a.save_dir, &d)) != 0) {
			fprintf(stderr, "sky train: cannot save %s: %s%s%s\n", a.save_dir,
				sky_strerror(rc), d.msg[0] ? ": " : "", d.msg);
			free(buf);
			return 1;
		}
	}
	if (a.save) {
		sky_diag_clear(&d);
		if ((rc = sky_bert_save(&r.m, a.save, &d)) != 0) {
			fprintf(stderr, "sky train: cannot save %s: %s%s%s\n", a.save,
				sky_strerror(rc), d.msg[0] ? ": " : "", d.msg);
			free(buf);
			return 1;
		}
	}
	if (a.json) {
		cJSON *j = cJSON_CreateObject();
		if (!j) {
			free(buf);
			return 1;
		}
		cJSON_AddStringToObject(j, "model", c.name);
		cJSON_AddNumberToObject(j, "layers", c.layers);
		cJSON_AddNumberToObject(j, "batch", c.batch);
		cJSON_AddNumberToObject(j, "seq", c.seq);
		cJSON_AddNumberToObject(j, "micro", o.micro);
		cJSON_AddStringToObject(j, "optim", sky_optim_name(kind));
		/* the value asked for, as a double (the float would print 0.0010000000474974513) */
		cJSON_AddNumberToObject(j, "lr", a.lr > 0 ? a.lr : (kind == SKY_OPTIM_SGD ? 0.05 : 1e-3));
		cJSON_AddNumberToObject(j, "warmup", (double)warmup);
		cJSON_AddNumberToObject(j, "seed", (double)a.seed);
		cJSON_AddNumberToObject(j, "steps", (double)a.steps);
		cJSON_AddNumberToObject(j, "first_loss", first_loss);
		cJSON_AddNumberToObject(j, "last_loss", last_loss);
		cJSON_AddNumberToObject(j, "heldout_accuracy", acc);
		cJSON_AddNumberToObject(j, "heldout_loss", eval_loss);
		cJSON_AddNumberToObject(j, "heldout_sequences", (double)a.eval * c.batch);
		cJSON_AddNumberToObject(j, "step_ms_mean", ms_sum / (double)a.steps);
		cJSON_AddNumberToObject(j, "train_s", train_s);
		cJSON_AddNumberToObject(j, "arena_bytes", (double)bytes);
		if (a.save)
			cJSON_AddStringToObject(j, "saved", a.save);
		if (a.model_dir) {
			cJSON_AddStringToObject(j, "model_dir", a.model_dir);
			cJSON_AddStringToObject(j, "start", a.init_weights ? "seed" : "checkpoint");
			cJSON_AddNumberToObject(j, "hidden_dropout", (double)c.hidden_drop);
			cJSON_AddNumberToObject(j, "attention_dropout", (double)c.attn_drop);
		}
		if (a.save_dir)
			cJSON_AddStringToObject(j, "saved_dir", a.save_dir);
		char *s = cJSON_PrintUnformatted(j);
		if (s)
			puts(s);
		cJSON_free(s);
		cJSON_Delete(j);
	} else {
		printf("first loss %.4f, last loss %.4f; held-out accuracy %.4f (%ld sequences, "
		       "loss %.4f); %.2f s, %.2f ms/step\n",
		       first_loss, last_loss, acc, a.eval * c.batch, eval_loss, train_s,
		       ms_sum / (double)a.steps);
		if (a.save)
			printf("saved %s\n", a.save);
		if (a.save_dir)
			printf("saved %s\n", a.save_dir);
	}
	free(buf);
	return 0;
}
