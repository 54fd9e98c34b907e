/* sky bench layer: one encoder layer's forward and forward+backward time,
 * next to OpenBLAS sgemm alone on exactly the layer's GEMMs, so the
 * "efficiency" figure says how much of the layer's time is GEMM at the
 * speed the BLAS can do it (1.0 = every non-GEMM op is free).
 *
 * The file dispatches on --precision; each precision has its own
 * bench_layer_<precision>() that fills a JSON object. */
#include "bench_util.h"
#include "sky_blas_core.h"
#include "sky_cli.h"

#include "sky_clock.h"
#include "sky_err.h"
#include "sky_hfmodel.h"
#include "sky_kernels_f32.h"
#include "sky_layer.h"
#include "sky_model.h"
#include "sky_rng.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct layer_bench_args {
	sky_model_cfg cfg;
	sky_bench_opts o;
	const char *precision;
} layer_bench_args;

/* ---- fp32 ----------------------------------------------------------------- */

typedef struct fp32_ctx {
	const sky_model_cfg *c;
	float *w, *dw, *x, *y, *dy, *dx, *mask, *saved, *scratch;
} fp32_ctx;

static int run_fwd(void *p)
{
	fp32_ctx *k = p;
	sky_layer_forward(k->c, k->w, k->x, k->mask, k->y, k->saved, k->scratch, SKY_BLOCK_ALL);
	return 0;
}

static int run_fwdbwd(void *p)
{
	fp32_ctx *k = p;
	sky_layer_forward(k->c, k->w, k->x, k->mask, k->y, k->saved, k->scratch, SKY_BLOCK_ALL);
	sky_layer_backward(k->c, k->w, k->mask, k->saved, k->dy, k->dx, k->dw, k->scratch,
			   SKY_BLOCK_ALL);
	return 0;
}

/* One GEMM shape of the layer and how many times a fwd+bwd runs it. */
typedef struct gemm_shape {
	int ta, tb, m, n, k, lda, ldb, ldc, count;
	int beta1; /* C accumulated (beta = 1: bias or residual start, gradient sum) */
} gemm_shape;

/* Exactly the GEMMs runtime/layer.c issues for SKY_BLOCK_ALL (same
 * transposes, sizes, leading dimensions and beta), forward then backward. */
static int layer_gemms(const sky_model_cfg *c, gemm_shape *g)
{
	const int T = (int)sky_model_tokens(c), H = c->hidden, F = c->ffn, S = c->seq;
	const int D = H / c->heads, H3 = 3 * H, BH = c->batch * c->heads;
	const gemm_shape s[] = {
		/* forward */
		{0, 1, T, H3, H, H, H, H3, 1, 1}, /* qkv = x Wqkv^T */
		{0, 1, S, S, D, H3, H3, S, BH, 0}, /* scores = q k^T per head */
		{0, 0, S, D, S, S, H3, D, BH, 0}, /* ctx = P v, into scratch */
		{0, 1, T, H, H, H, H, H, 1, 1}, /* ctx Wo^T */
		{0, 1, T, F, H, H, H, F, 1, 1}, /* h1 W1^T */
		{0, 1, T, H, F, F, F, H, 1, 1}, /* g W2^T */
		/* backward */
		{1, 0, H, F, T, H, F, F, 1, 1}, /* dW2 */
		{0, 0, T, F, H, H, F, F, 1, 0}, /* dg */
		{1, 0, F, H, T, F, H, H, 1, 1}, /* dW1 */
		{0, 0, T, H, F, F, H, H, 1, 1}, /* dh1 */
		{1, 0, H, H, T, H, H, H, 1, 1}, /* dWo */
		{0, 0, T, H, H, H, H, H, 1, 0}, /* dctx */
		{0, 1, S, S, D, H, H3, S, BH, 0}, /* dP */
		{1, 0, S, D, S, S, H, D, BH, 0}, /* dv, into scratch */
		{0, 0, S, D, S, S, H3, D, BH, 0}, /* dq, into scratch */
		{1, 0, S, D, S, S, H3, D, BH, 0}, /* dk, into scratch */
		{1, 0, H3, H, T, H3, H, H, 1, 1}, /* dWqkv */
		{0, 0, T, H, H3, H3, H, H, 1, 1}, /* dx */
	};
	memcpy(g, s, sizeof s);
	return (int)(sizeof s / sizeof s[0]);
}

typedef struct sgemm_ctx {
	gemm_shape g[32];
	int n;
	float *a, *b, *c;
} sgemm_ctx;

static int run_sgemm(void *p)
{
	sgemm_ctx *k = p;
	for (int i = 0; i < k->n; i++) {
		const gemm_shape *s = &k->g[i];
		for (int r = 0; r < s->count; r++)
			sky_k_gemm_f32(s->ta, s->tb, s->m, s->n, s->k, 1.0f, k->a, s->lda, k->b,
				       s->ldb, s->beta1 ? 1.0f : 0.0f, k->c, s->ldc);
	}
	return 0;
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;
	return (a > b) - (a < b);
}

static void stats_of(double *v, int n, sky_bench_stats *st)
{
	double sum = 0, sq = 0;
	for (int i = 0; i < n; i++)
		sum += v[i];
	st->count = n;
	st->mean = sum / n;
	for (int i = 0; i < n; i++)
		sq += (v[i] - st->mean) * (v[i] - st->mean);
	st->std = n > 1 ? sqrt(sq / (n - 1)) : 0.0;
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	st->min = v[0];
	st->median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
	st->p90 = v[(int)ceil(0.9 * n) - 1];
}

/* Rounds of (forward, forward+backward, sgemm alone), one run of each per
 * round, so a neighbour's load on the shared cores slows all three alike
 * instead of whichever happened to run at the time; efficiency compares
 * like with like. */
static int measure_interleaved(const sky_bench_opts *o, fp32_ctx *k, sgemm_ctx *g,
			       sky_bench_stats *fwd, sky_bench_stats *fb, sky_bench_stats *gemm)
{
	static double t_fwd[SKY_BENCH_MAX_RUNS], t_fb[SKY_BENCH_MAX_RUNS], t_g[SKY_BENCH_MAX_RUNS];
	for (int i = 0; i < o->warmup; i++) {
		run_fwdbwd(k);
		run_sgemm(g);
	}
	int n = 0, runs = o->runs < SKY_BENCH_MAX_RUNS ? o->runs : SKY_BENCH_MAX_RUNS;
	double start = sky_clock_s();
	while (n < runs && (n == 0 || sky_clock_s() - start < o->max_s)) {
		double t0 = sky_clock_s();
		run_fwd(k);
		double t1 = sky_clock_s();
		run_fwdbwd(k);
		double t2 = sky_clock_s();
		run_sgemm(g);
		double t3 = sky_clock_s();
		t_fwd[n] = t1 - t0, t_fb[n] = t2 - t1, t_g[n] = t3 - t2;
		n++;
	}
	stats_of(t_fwd, n, fwd);
	stats_of(t_fb, n, fb);
	stats_of(t_g, n, gemm);
	return 0;
}

static size_t mat_floats(int rows, int ld) { return (size_t)rows * ld; }

static float *alloc_random(size_t n, float scale, sky_rng *r)
{
	float *p = malloc((n ? n : 1) * sizeof *p);
	if (p)
		for (size_t i = 0; i < n; i++)
			p[i] = scale * sky_rng_normal(r);
	return p;
}

static int bench_layer_fp32(const layer_bench_args *a, cJSON *out)
{
	const sky_model_cfg *c = &a->cfg;
	int rc = SKY_ENOMEM;
	fp32_ctx k = {.c = c};
	sgemm_ctx g = {0};
	sky_rng r;
	sky_rng_seed(&r, 1);
	size_t np = (size_t)sky_model_layer_params(c), nx = (size_t)sky_model_tokens(c) * c->hidden;
	k.w = malloc(np * sizeof(float));
	k.dw = calloc(np, sizeof(float));
	k.x = alloc_random(nx, 1.0f, &r);
	k.dy = alloc_random(nx, 1.0f, &r);
	k.y = malloc(nx * sizeof(float));
	k.dx = malloc(nx * sizeof(float));
	k.mask = calloc((size_t)sky_model_tokens(c), sizeof(float));
	k.saved = malloc(sky_layer_saved_floats(c, SKY_BLOCK_ALL) * sizeof(float));
	k.scratch = malloc(sky_layer_scratch_floats(c) * sizeof(float));
	if (!k.w || !k.dw || !k.x || !k.dy || !k.y || !k.dx || !k.mask || !k.saved || !k.scratch)
		goto exit;
	sky_layer_init(c, k.w, 1);
	/* the last quarter of every other sequence is padding, as in real batches */
	for (int b = 1; b < c->batch; b += 2)
		for (int s = c->seq - c->seq / 4; s < c->seq; s++)
			k.mask[(size_t)b * c->seq + s] = -1e9f;

	/* sgemm alone: operands as large as the largest shape needs, contents
	 * random (BLAS speed does not depend on values, but denormals would) */
	g.n = layer_gemms(c, g.g);
	size_t na = 0, nb = 0, nc = 0;
	for (int i = 0; i < g.n; i++) {
		const gemm_shape *s = &g.g[i];
		size_t sa = s->ta ? mat_floats(s->k, s->lda) : mat_floats(s->m, s->lda);
		size_t sb = s->tb ? mat_floats(s->n, s->ldb) : mat_floats(s->k, s->ldb);
		size_t sc = mat_floats(s->m, s->ldc);
		na = sa > na ? sa : na, nb = sb > nb ? sb : nb, nc = sc > nc ? sc : nc;
	}
	g.a = alloc_random(na, 0.1f, &r);
	g.b = alloc_random(nb, 0.1f, &r);
	g.c = alloc_random(nc, 0.1f, &r);
	if (!g.a || !g.b || !g.c)
		goto exit;
	double gemm_flops = 0;
	for (int i = 0; i < g.n; i++)
		gemm_flops += 2.0 * g.g[i].m * g.g[i].n * g.g[i].k * g.g[i].count;
	const double flops_fwd = sky_model_layer_flops_fwd(c), flops_fwdbwd = 3.0 * flops_fwd;

	sky_bench_stats st_fwd, st_fb, st_gemm;
	if ((rc = measure_interleaved(&a->o, &k, &g, &st_fwd, &st_fb, &st_gemm)) != 0)
		goto exit;

	double gflops = flops_fwdbwd / st_fb.median * 1e-9;
	double sgemm_gflops = gemm_flops / st_gemm.median * 1e-9;
	cJSON_AddNumberToObject(out, "fwd_ms", st_fwd.median * 1e3);
	cJSON_AddNumberToObject(out, "fwdbwd_ms", st_fb.median * 1e3);
	cJSON_AddNumberToObject(out, "gflops_fwd", flops_fwd / st_fwd.median * 1e-9);
	cJSON_AddNumberToObject(out, "gflops_fwdbwd", gflops);
	cJSON_AddNumberToObject(out, "sgemm_ms", st_gemm.median * 1e3);
	cJSON_AddNumberToObject(out, "sgemm_gflops", sgemm_gflops);
	cJSON_AddNumberToObject(out, "efficiency", gflops / sgemm_gflops);
	/* sgemm against the CPU's estimated peak at these threads (0: clock
	 * unknown): a Prescott fallback shows here, not in the efficiency */
	sky_cpu_desc cpu;
	sky_cpu_describe(&cpu);
	double pk = sky_cpu_peak_gflops(&cpu) * a->o.threads;
	cJSON_AddNumberToObject(out, "sgemm_of_peak", pk > 0 ? sgemm_gflops / pk : 0);
	cJSON_AddNumberToObject(out, "flops_fwdbwd", flops_fwdbwd);
	cJSON_AddNumberToObject(out, "sgemm_flops", gemm_flops);
	sky_bench_add_stats(out, "fwd_stats_ms", &st_fwd);
	sky_bench_add_stats(out, "fwdbwd_stats_ms", &st_fb);
	sky_bench_add_stats(out, "sgemm_stats_ms", &st_gemm);
	rc = 0;
exit:
	free(k.w), free(k.dw), free(k.x), free(k.dy), free(k.y), free(k.dx), free(k.mask);
	free(k.saved), free(k.scratch), free(g.a), free(g.b), free(g.c);
	if (rc == SKY_ENOMEM)
		fprintf(stderr, "sky bench layer: out of memory for model %s\n", c->name);
	return rc;
}

/* ---- int8 (tools/sky/bench_layer_s8.c) ------------------------------------ */

int sky_bench_layer_s8(const sky_model_cfg *c, const sky_bench_opts *o, cJSON *out);
const char *sky_bench_layer_s8_kernel(void);

static int bench_layer_int8(const layer_bench_args *a, cJSON *out)
{
	return sky_bench_layer_s8(&a->cfg, &a->o, out);
}

/* ---- dispatch ------------------------------------------------------------- */

typedef struct precision_entry {
	const char *name;
	const char *kernel; /* "kernel" fact in the JSON */
	int (*run)(const layer_bench_args *a, cJSON *out);
} precision_entry;

static const precision_entry k_precisions[] = {
	{"fp32", "openblas-sgemm", bench_layer_fp32},
	{"int8", NULL, bench_layer_int8}, /* kernel: the variant chosen at run time */
};
#define N_PRECISIONS (sizeof k_precisions / sizeof k_precisions[0])

static void usage(FILE *to)
{
	fprintf(to,
		"usage: sky bench layer [--model NAME | --model-dir D] [--batch B] [--seq S] [--precision P]\n"
		"                       [common options]\n"
		"  one encoder layer (both blocks), forward and forward+backward, and OpenBLAS\n"
		"  sgemm alone on the same GEMM shapes; efficiency = layer GFLOP/s / sgemm GFLOP/s\n"
		"  --model NAME      %s (default base)\n"
		"  --model-dir D     the shapes, GELU form and eps of a Hugging Face BERT directory's\n"
		"                    config.json instead (weights stay random)\n"
		"  --batch B         sequences per micro-batch (default 8)\n"
		"  --seq S           tokens per sequence (default 128, or the preset's if fewer positions)\n"
		"  --precision P     ",
		sky_model_preset_names());
	for (size_t i = 0; i < N_PRECISIONS; i++)
		fprintf(to, "%s%s", i ? "|" : "", k_precisions[i].name);
	fprintf(to, " (default fp32)\n%s", sky_bench_common_help());
}

int sky_bench_layer(int argc, char **argv)
{
	const char *cmd = "bench layer";
	layer_bench_args a;
	const char *model = "base", *model_dir = NULL;
	long batch = 8, seq = 128;
	int seq_given = 0, model_given = 0;
	a.precision = "fp32";
	sky_bench_opts_default(&a.o);
	enum { O_MODEL = SKY_BENCH_OPT_OWN, O_PRECISION, O_BATCH, O_SEQ, O_MODEL_DIR };
	static const struct option k_opts[] = {{"model", required_argument, NULL, O_MODEL},
					       {"model-dir", required_argument, NULL, O_MODEL_DIR},
					       {"precision", required_argument, NULL, O_PRECISION},
					       {"batch", required_argument, NULL, O_BATCH},
					       {"seq", required_argument, NULL, O_SEQ},
					       SKY_BENCH_OPT_TABLE,
					       SKY_OPT_STD,
					       {0}};
	sky_opt po;
	sky_opt_begin(&po, "sky bench layer", argc, argv, k_opts, 0);
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
		} else if (c == O_PRECISION) {
			a.precision = val;
		} else if (c == O_BATCH) {
			if (sky_cli_int(cmd, opt, val, 1, 4096, &batch))
				return 2;
		} else if (c == O_SEQ) {
			if (sky_cli_int(cmd, opt, val, 1, 65536, &seq))
				return 2;
			seq_given = 1;
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
	}
	/* 128 tokens unless the model has fewer positions (tiny) */
	if (!seq_given && seq > a.cfg.max_pos)
		seq = a.cfg.seq;
	a.cfg.batch = (int)batch;
	a.cfg.seq = (int)seq;
	if (sky_model_validate(&a.cfg) != 0) {
		fprintf(stderr, "sky %s: batch %ld x seq %ld does not fit model %s\n", cmd, batch,
			seq, model);
		return 2;
	}
	const precision_entry *p = NULL;
	for (size_t i = 0; i < N_PRECISIONS; i++)
		if (strcmp(a.precision, k_precisions[i].name) == 0)
			p = &k_precisions[i];
	if (!p) {
		fprintf(stderr, "sky %s: precision '%s' is not available in this build (", cmd,
			a.precision);
		for (size_t i = 0; i < N_PRECISIONS; i++)
			fprintf(stderr, "%s%s", i ? ", " : "", k_precisions[i].name);
		fprintf(stderr, ")\n");
		return 2;
	}
	sky_bench_set_threads(a.o.threads);

	int rc = SKY_ENOMEM;
	cJSON *out = cJSON_CreateObject();
	if (!out)
		goto exit;
	cJSON_AddStringToObject(out, "bench", "layer");
	cJSON_AddStringToObject(out, "model", a.cfg.name);
	cJSON_AddStringToObject(out, "precision", p->name);
	cJSON_AddNumberToObject(out, "batch", a.cfg.batch);
	cJSON_AddNumberToObject(out, "seq", a.cfg.seq);
	cJSON_AddNumberToObject(out, "hidden", a.cfg.hidden);
	cJSON_AddNumberToObject(out, "heads", a.cfg.heads);
	cJSON_AddNumberToObject(out, "ffn", a.cfg.ffn);
	if ((rc = p->run(&a, out)) != 0)
		goto exit;
	sky_bench_add_env(out, p->kernel ? p->kernel : sky_bench_layer_s8_kernel(), a.o.threads);
	if (a.o.json) {
		rc = sky_bench_print(out);
	} else {
		/* every top-level figure the precision reported, in its order */
		printf("layer %s %s, batch %d x seq %d, %d thread(s):", a.cfg.name, p->name,
		       a.cfg.batch, a.cfg.seq, a.o.threads);
		const char *skip[] = {"batch", "seq", "hidden", "heads", "ffn", "threads"};
		int first = 1;
		for (cJSON *it = out->child; it; it = it->next) {
			int known = 0;
			for (size_t i = 0; i < sizeof skip / sizeof skip[0]; i++)
				known |= strcmp(it->string, skip[i]) == 0;
			if (known || !cJSON_IsNumber(it))
				continue;
			printf("%s %s %.4g", first ? "" : ",", it->string, it->valuedouble);
			first = 0;
		}
		printf("\n");
		/* sgemm against the machine, so that a slow BLAS shows whatever
		 * the efficiency says */
		const cJSON *sg = cJSON_GetObjectItemCaseSensitive(out, "sgemm_gflops");
		const cJSON *pk = cJSON_GetObjectItemCaseSensitive(out, "cpu_peak_gflops");
		const cJSON *from = cJSON_GetObjectItemCaseSensitive(out, "cpu_peak_from");
		const cJSON *core = cJSON_GetObjectItemCaseSensitive(out, "blas_core");
		const cJSON *best = cJSON_GetObjectItemCaseSensitive(out, "blas_core_best");
		if (cJSON_IsNumber(sg) && cJSON_IsNumber(pk) && cJSON_IsString(from) &&
		    cJSON_IsString(core) && cJSON_IsString(best)) {
			if (pk->valuedouble > 0)
				printf("sgemm %.1f GFLOP/s = %.2f of the CPU's fp32 peak, %.1f GFLOP/s (%s)\n",
				       sg->valuedouble, sg->valuedouble / pk->valuedouble,
				       pk->valuedouble, from->valuestring);
			else
				printf("sgemm %.1f GFLOP/s; the CPU's peak is %s\n", sg->valuedouble,
				       from->valuestring);
			printf("OpenBLAS core %s; this CPU takes %s\n", core->valuestring,
			       best->valuestring);
		}
	}
exit:
	cJSON_Delete(out);
	return rc == 0 ? 0 : 1;
}
