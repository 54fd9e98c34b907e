/* sky quantize: an fp32 BERT classifier (sky train --save) to int8 encoder
 * layers, calibrated on micro-batches of the synthetic task's training
 * split, written as safetensors. Reports, per layer, the cosine of the
 * int8 layer's output against the fp32 layer's on the same held-out input. */
#include "sky_cli.h"

#include "bench_util.h"
#include "quant_cli.h"

#include "sky_err.h"
#include "sky_kernels_s8.h"
#include "sky_layer.h"
#include "sky_layer_s8.h"
#include "sky_model.h"
#include "sky_quant_model.h"
#include "sky_safetensors.h"
#include "sky_task.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct q_args {
	const char *in, *out;
	long calib;
	sky_quant_cli_task task;
	int json;
} q_args;

static void usage(FILE *to)
{
	fprintf(to,
		"usage: sky quantize --in W.safetensors --out Wq.safetensors [options]\n"
		"  turns the encoder layers of an fp32 model (sky train --save) into int8:\n"
		"  weights symmetric per output channel, activation ranges calibrated on\n"
		"  micro-batches of the synthetic task's training split\n"
		"  --calib N     calibration micro-batches (default 8)\n"
		"  --model NAME  %s (default: the file's \"sky_model\" metadata)\n"
		"  --seq S       tokens per sequence (default: the preset's)\n"
		"  --batch B     sequences per micro-batch (default: the preset's)\n"
		"  --seed N      the task's seed, as given to sky train (default 1)\n"
		"  --json        one JSON object on stdout\n",
		sky_model_preset_names());
}

static int parse(int argc, char **argv, q_args *a)
{
	const char *cmd = "quantize";
	memset(a, 0, sizeof *a);
	a->calib = 8;
	a->task.seed = 1;
	enum { O_IN = SKY_OPT_FIRST, O_OUT, O_CALIB, O_JSON };
	static const struct option k_opts[] = {{"in", required_argument, NULL, O_IN},
					       {"out", required_argument, NULL, O_OUT},
					       {"calib", required_argument, NULL, O_CALIB},
					       {"json", no_argument, NULL, O_JSON},
					       SKY_QUANT_CLI_OPT_TABLE,
					       SKY_OPT_STD,
					       {0}};
	sky_opt op;
	sky_opt_begin(&op, "sky quantize", argc, argv, k_opts, 0);
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
		case O_IN:
			a->in = v;
			break;
		case O_OUT:
			a->out = v;
			break;
		case O_CALIB:
			rc = sky_cli_int(cmd, o, v, 1, 100000, &a->calib);
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
	if (!a->in || !a->out) {
		fprintf(stderr, "sky quantize: --in and --out are required\n");
		usage(stderr);
		return -1;
	}
	return 0;
}

static double cosine(const float *a, const float *b, size_t n)
{
	double ab = 0, aa = 0, bb = 0;
	for (size_t i = 0; i < n; i++)
		ab += (double)a[i] * b[i], aa += (double)a[i] * a[i], bb += (double)b[i] * b[i];
	return aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : 0;
}

int sky_cmd_quantize(int argc, char **argv)
{
	q_args a;
	int prc = parse(argc, argv, &a);
	if (prc)
		return prc > 0 ? 0 : 2;
	return sky_quantize_file(a.in, a.out, a.calib, &a.task, a.json ? SKY_QUANT_JSON : 0) ? 1 : 0;
}

int sky_quantize_file(const char *in, const char *out, long calib, const sky_quant_cli_task *task,
		      int flags)
{
	q_args a = {.in = in, .out = out, .calib = calib, .task = *task,
		    .json = (flags & SKY_QUANT_JSON) != 0};
	int quiet = (flags & SKY_QUANT_QUIET) != 0;
	int rc, exitc = SKY_EINVAL;
	sky_diag d;
	sky_diag_clear(&d);
	sky_st_file f;
	sky_st_init(&f);
	sky_qmodel m;
	memset(&m, 0, sizeof m);
	sky_model_cfg cfg;
	/* everything below is the CLI's one-off setup: plain heap */
	sky_layer_s8_calib *cal = NULL;
	sky_layer_s8 *q = NULL, **qp = NULL;
	float *layer_in = NULL, *cs = NULL, *y32 = NULL, *yq = NULL, *scratch = NULL;
	int32_t *ids = NULL, *types = NULL, *attn = NULL, *labels = NULL;
	void *qmem = NULL, *tmp = NULL;
	double *cos = NULL;
	cJSON *j = NULL;

	if ((rc = sky_st_open(&f, a.in, &d)) != 0) {
		fprintf(stderr, "sky quantize: %s: %s%s%s\n", a.in, sky_strerror(rc),
			d.msg[0] ? ": " : "", d.msg);
		goto exit;
	}
	if (sky_quant_cli_cfg("quantize", &f, &a.task, &cfg))
		goto exit;
	if ((rc = sky_qmodel_open(&m, &f, &cfg, &d)) != 0) {
		fprintf(stderr, "sky quantize: %s: %s: %s\n", a.in, sky_strerror(rc), d.msg);
		goto exit;
	}
	if (m.precision != SKY_PREC_FP32) {
		fprintf(stderr, "sky quantize: %s already holds int8 layers\n", a.in);
		goto exit;
	}
	const sky_model_cfg *c = &m.cfg;
	const int L = c->layers;
	size_t T = (size_t)sky_model_tokens(c), H = (size_t)c->hidden, np = (size_t)sky_model_layer_params(c);
	cal = calloc((size_t)L, sizeof *cal);
	cos = calloc((size_t)L, sizeof *cos);
	layer_in = malloc((size_t)L * T * H * sizeof(float));
	cs = malloc(sky_layer_s8_calib_scratch_floats(c) * sizeof(float));
	y32 = malloc(T * H * sizeof(float));
	yq = malloc(T * H * sizeof(float));
	scratch = malloc(sky_layer_scratch_floats(c) * sizeof(float));
	ids = malloc(T * 4), types = malloc(T * 4), attn = malloc(T * 4);
	labels = malloc((size_t)c->batch * 4);
	tmp = malloc(sky_layer_s8_tmp_bytes(c));
	qp = calloc((size_t)L, sizeof *qp);
	if (!cal || !cos || !layer_in || !cs || !y32 || !yq || !scratch || !ids || !types || !attn ||
	    !labels || !tmp || !qp) {
		fprintf(stderr, "sky quantize: out of memory\n");
		goto exit;
	}

	/* calibration: every layer sees its fp32 input on each batch */
	for (int l = 0; l < L; l++)
		sky_layer_s8_calib_init(&cal[l]);
	for (long i = 0; i < a.calib; i++) {
		if ((rc = sky_task_batch(c, (uint64_t)a.task.seed, SKY_TASK_TRAIN, (uint64_t)i, ids,
					 types, attn, labels)) ||
		    (rc = sky_qmodel_forward(&m, ids, attn, NULL, layer_in))) {
			fprintf(stderr, "sky quantize: calibration batch %ld: %s\n", i, sky_strerror(rc));
			goto exit;
		}
		for (int l = 0; l < L; l++) {
			if ((rc = sky_layer_s8_calibrate(c, m.layers + l * np, layer_in + l * T * H, m.mask,
							 cs, &cal[l], &d))) {
				fprintf(stderr, "sky quantize: layer %d: %s\n", l, d.msg);
				goto exit;
			}
		}
	}

	/* the int8 layers: weights each, one shared scratch */
	int v = sky_k_s8_variant_active();
	sky_arena ar;
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 0) {
			sky_arena_init(&ar, NULL, 0);
		} else {
			size_t need = sky_arena_required(&ar);
			if (!(qmem = malloc(need)) || !(q = calloc((size_t)L, sizeof *q))) {
				fprintf(stderr, "sky quantize: out of memory\n");
				goto exit;
			}
			sky_arena_init(&ar, qmem, need);
		}
		sky_layer_s8 tmpl;
		for (int l = 0; l < L; l++) {
			sky_layer_s8 *Lq = pass ? &q[l] : &tmpl;
			sky_layer_s8_carve_persist(Lq, c, v, &ar);
			if (l == 0)
				sky_layer_s8_carve_scratch(Lq, &ar);
			else if (pass)
				sky_layer_s8_share_scratch(Lq, &q[0]);
		}
	}
	if ((rc = sky_arena_seal(&ar)) != 0) {
		fprintf(stderr, "sky quantize: arena: %s\n", sky_strerror(rc));
		goto exit;
	}
	for (int l = 0; l < L; l++) {
		qp[l] = &q[l];
		if ((rc = sky_layer_s8_from_f32(&q[l], m.layers + l * np, &cal[l], tmp, &d))) {
			fprintf(stderr, "sky quantize: layer %d: %s\n", l, d.msg);
			goto exit;
		}
	}

	/* per-layer agreement on held-out batch 0, each layer on its fp32 input */
	if ((rc = sky_task_batch(c, (uint64_t)a.task.seed, SKY_TASK_HELDOUT, 0, ids, types, attn,
				 labels)) ||
	    (rc = sky_qmodel_forward(&m, ids, attn, NULL, layer_in)))
		goto exit;
	double cmin = 1;
	for (int l = 0; l < L; l++) {
		const float *x = layer_in + l * T * H;
		sky_layer_forward(c, m.layers + l * np, x, m.mask, y32, NULL, scratch, SKY_BLOCK_ALL);
		if ((rc = sky_layer_s8_forward(&q[l], x, m.mask, yq)))
			goto exit;
		cos[l] = cosine(y32, yq, T * H);
		cmin = cos[l] < cmin ? cos[l] : cmin;
	}

	char note[160];
	snprintf(note, sizeof note, "%ld micro-batches (%d x %d) of the synthetic task, seed %ld, split train",
		 a.calib, c->batch, c->seq, a.task.seed);
	if ((rc = sky_qmodel_save_int8(&m, qp, a.out, note, &d))) {
		fprintf(stderr, "sky quantize: cannot write %s: %s: %s\n", a.out, sky_strerror(rc), d.msg);
		goto exit;
	}
	size_t fp32_bytes = (size_t)L * np * sizeof(float), int8_bytes = (size_t)L * sky_layer_s8_weight_bytes(c);
	if (quiet) {
		fprintf(stderr, "quantised %d layers of %s to int8 (calibrated on %ld micro-batches, lowest "
		       "cosine vs fp32 %.5f): %s\n",
		       L, c->name, a.calib, cmin, a.out);
	} else if (a.json) {
		j = cJSON_CreateObject();
		if (!j)
			goto exit;
		cJSON_AddStringToObject(j, "in", a.in);
		cJSON_AddStringToObject(j, "out", a.out);
		cJSON_AddStringToObject(j, "model", c->name);
		cJSON_AddNumberToObject(j, "layers", L);
		cJSON_AddNumberToObject(j, "calib_batches", (double)a.calib);
		cJSON_AddStringToObject(j, "kernel", sky_k_s8_variant_name(v));
		cJSON *arr = cJSON_AddArrayToObject(j, "cosine_vs_fp32");
		for (int l = 0; l < L; l++)
			cJSON_AddItemToArray(arr, cJSON_CreateNumber(cos[l]));
		cJSON_AddNumberToObject(j, "cosine_min", cmin);
		cJSON_AddNumberToObject(j, "layer_weight_bytes_fp32", (double)fp32_bytes);
		cJSON_AddNumberToObject(j, "layer_weight_bytes_int8", (double)int8_bytes);
		if (sky_bench_print(j) != 0) /* prints without allocating */
			goto exit;
	} else {
		printf("quantised %d layers of %s (%s kernels), calibrated on %ld micro-batches\n", L,
		       c->name, sky_k_s8_variant_name(v), a.calib);
		for (int l = 0; l < L; l++)
			printf("  layer %2d: cosine int8 vs fp32 %.5f\n", l, cos[l]);
		printf("layer weights: fp32 %zu bytes, int8 %zu bytes (%.3f)\nwrote %s\n", fp32_bytes,
		       int8_bytes, (double)int8_bytes / (double)fp32_bytes, a.out);
	}
	exitc = 0;
exit:
	cJSON_Delete(j);
	sky_qmodel_close(&m);
	sky_st_close(&f);
	free(cal), free(cos), free(layer_in), free(cs), free(y32), free(yq), free(scratch);
	free(ids), free(types), free(attn), free(labels), free(tmp), free(qp), free(q), free(qmem);
	return exitc;
}
