/* sky bench layer --precision int8: the int8 encoder layer's forward, next
 * to the int8 GEMMs alone on exactly the layer's shapes (efficiency = how
 * much of the time is GEMM at the speed the kernel can do it) and to the
 * fp32 layer on the same input (cosine of the outputs, speed-up).
 *
 * Same weights, input and padding as the fp32 bench (sky_layer_init seed
 * 1, inputs N(0, 1) from seed 1, the last quarter of every other sequence
 * padded); calibration on a second batch (seed 2) so the cosine is
 * measured on data the ranges were not taken from. */
#include "bench_util.h"

#include "sky_arena.h"
#include "sky_err.h"
#include "sky_kernels_s8.h"
#include "sky_layer.h"
#include "sky_layer_s8.h"
#include "sky_model.h"
#include "sky_pool.h"
#include "sky_rng.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sky_bench_layer_s8(const sky_model_cfg *c, const sky_bench_opts *o, cJSON *out);
const char *sky_bench_layer_s8_kernel(void);

const char *sky_bench_layer_s8_kernel(void)
{
	static char buf[32];
	snprintf(buf, sizeof buf, "int8-%s", sky_k_s8_variant_name(sky_k_s8_variant_active()));
	return buf;
}

typedef struct s8_ctx {
	const sky_model_cfg *c;
	sky_layer_s8 *L;
	const float *w, *x, *mask;
	float *y, *scratch;
} s8_ctx;

static int run_s8(void *p)
{
	s8_ctx *k = p;
	return sky_layer_s8_forward(k->L, k->x, k->mask, k->y);
}

static int run_f32(void *p)
{
	s8_ctx *k = p;
	sky_layer_forward(k->c, k->w, k->x, k->mask, k->y, NULL, k->scratch, SKY_BLOCK_ALL);
	return 0;
}

/* The GEMMs the int8 forward issues (same shapes, operands, epilogues and
 * split over the pool's threads), nothing else: per head the packed
 * keys/values of the last forward stand in for each head's own. */
#define GEMM_ROWS 128 /* the forward's row block (SKY_S8_ROW_BLOCK) */

static void gemm_rows_qkv(void *p, int task, int worker)
{
	s8_ctx *k = p;
	sky_layer_s8 *L = k->L;
	const int T = (int)sky_model_tokens(k->c), H = k->c->hidden, H3 = 3 * H;
	int t0 = task * GEMM_ROWS, rows = T - t0 < GEMM_ROWS ? T - t0 : GEMM_ROWS;
	sky_k_gemm_out o = {SKY_K_OUT_S8, L->qkv8 + (size_t)t0 * H3, H3, L->bqkv, L->mqkv, L->rqkv};
	sky_k_gemm_s8(rows, L->x8 + (size_t)t0 * H, H, &L->wqkv, &o);
}

static void gemm_heads(void *p, int task, int worker)
{
	s8_ctx *k = p;
	sky_layer_s8 *L = k->L;
	sky_layer_s8_ws *w = &L->ws[worker];
	const int H = k->c->hidden, S = k->c->seq, D = H / k->c->heads, H3 = 3 * H;
	const int b = task / k->c->heads, hd = task % k->c->heads;
	const int8_t *q = L->qkv8 + (size_t)b * S * H3 + (size_t)hd * D;
	sky_k_gemm_out os = {SKY_K_OUT_S32, w->scores, S, NULL, NULL, NULL};
	sky_k_gemm_s8(S, q, H3, &L->ws[0].kh, &os);
	sky_k_gemm_out oc = {SKY_K_OUT_S8, L->ctx8 + (size_t)b * S * H + (size_t)hd * D, H,
			     L->ws[0].cbias, L->mctx, L->rctx};
	sky_k_gemm_s8(S, w->pbuf, S, &L->ws[0].vh, &oc);
}

static void gemm_rows_rest(void *p, int task, int worker)
{
	s8_ctx *k = p;
	sky_layer_s8 *L = k->L;
	sky_layer_s8_ws *w = &L->ws[worker];
	const int T = (int)sky_model_tokens(k->c), H = k->c->hidden, F = k->c->ffn;
	int t0 = task * GEMM_ROWS, rows = T - t0 < GEMM_ROWS ? T - t0 : GEMM_ROWS;
	sky_k_gemm_out oo = {SKY_K_OUT_S16, L->a16 + (size_t)t0 * H, H, L->bo, L->mo, L->ro};
	sky_k_gemm_s8(rows, L->ctx8 + (size_t)t0 * H, H, &L->wo, &oo);
	sky_k_gemm_out o1 = {SKY_K_OUT_S16, w->u16, F, L->b1, L->m1, L->r1};
	sky_k_gemm_s8(rows, L->h1_8 + (size_t)t0 * H, H, &L->w1, &o1);
	sky_k_gemm_out o2 = {SKY_K_OUT_S16, L->a16 + (size_t)t0 * H, H, L->b2, L->m2, L->r2};
	sky_k_gemm_s8(rows, L->g8 + (size_t)t0 * F, F, &L->w2, &o2);
}

static int run_gemms(void *p)
{
	s8_ctx *k = p;
	int row_tasks = ((int)sky_model_tokens(k->c) + GEMM_ROWS - 1) / GEMM_ROWS;
	sky_pool_run(k->L->pool, row_tasks, gemm_rows_qkv, k);
	sky_pool_run(k->L->pool, k->c->batch * k->c->heads, gemm_heads, k);
	sky_pool_run(k->L->pool, row_tasks, gemm_rows_rest, k);
	return 0;
}

int sky_bench_layer_s8(const sky_model_cfg *c, const sky_bench_opts *o, cJSON *out)
{
	int rc = SKY_ENOMEM;
	size_t np = (size_t)sky_model_layer_params(c), nx = (size_t)sky_model_tokens(c) * c->hidden;
	float *w = malloc(np * sizeof(float)), *x = malloc(nx * sizeof(float));
	float *xc = malloc(nx * sizeof(float)), *y = malloc(nx * sizeof(float));
	float *yq = malloc(nx * sizeof(float));
	float *mask = calloc((size_t)sky_model_tokens(c), sizeof(float));
	float *scratch = malloc(sky_layer_scratch_floats(c) * sizeof(float));
	float *cs = malloc(sky_layer_s8_calib_scratch_floats(c) * sizeof(float));
	void *tmp = malloc(sky_layer_s8_tmp_bytes(c)), *mem = NULL;
	sky_layer_s8 L;
	sky_pool *pool = NULL;
	sky_diag d;
	sky_diag_clear(&d);
	if (!w || !x || !xc || !y || !yq || !mask || !scratch || !cs || !tmp)
		goto exit;
	sky_layer_init(c, w, 1);
	sky_rng r;
	sky_rng_seed(&r, 1);
	for (size_t i = 0; i < nx; i++)
		x[i] = sky_rng_normal(&r);
	sky_rng_seed(&r, 2);
	for (size_t i = 0; i < nx; i++)
		xc[i] = sky_rng_normal(&r);
	for (int b = 1; b < c->batch; b += 2)
		for (int s = c->seq - c->seq / 4; s < c->seq; s++)
			mask[(size_t)b * c->seq + s] = -1e9f;

	/* quantise: calibrate on xc, measure the arena, allocate once, seal */
	sky_layer_s8_calib cal;
	sky_layer_s8_calib_init(&cal);
	if ((rc = sky_layer_s8_calibrate(c, w, xc, mask, cs, &cal, &d)))
		goto exit;
	int v = sky_k_s8_variant_active();
	sky_arena a;
	sky_arena_init(&a, NULL, 0);
	sky_layer_s8_carve_persist(&L, c, v, &a);
	sky_layer_s8_carve_scratch_mt(&L, &a, o->threads);
	size_t need = sky_arena_required(&a);
	if (!(mem = malloc(need))) {
		rc = SKY_ENOMEM;
		goto exit;
	}
	sky_arena_init(&a, mem, need);
	sky_layer_s8_carve_persist(&L, c, v, &a);
	sky_layer_s8_carve_scratch_mt(&L, &a, o->threads);
	if ((rc = sky_arena_seal(&a)) || (rc = sky_layer_s8_from_f32(&L, w, &cal, tmp, &d)))
		goto exit;
	/* the int8 kernels' threads (the fp32 layer's are OpenBLAS's, same count) */
	if (o->threads > 1 && (!(pool = sky_pool_create(o->threads)) ||
			       (rc = sky_layer_s8_use_pool(&L, pool)))) {
		rc = rc ? rc : SKY_EIO;
		goto exit;
	}

	s8_ctx k = {c, &L, w, x, mask, yq, scratch};
	s8_ctx kf = {c, &L, w, x, mask, y, scratch};
	sky_bench_stats st_q, st_f, st_g;
	if ((rc = sky_bench_measure(o, run_s8, &k, &st_q)) ||
	    (rc = sky_bench_measure(o, run_f32, &kf, &st_f)) ||
	    (rc = sky_bench_measure(o, run_gemms, &k, &st_g)))
		goto exit;
	/* the outputs of the last runs: same input, same weights */
	double ab = 0, aa = 0, bb = 0;
	for (size_t i = 0; i < nx; i++)
		ab += (double)y[i] * yq[i], aa += (double)y[i] * y[i], bb += (double)yq[i] * yq[i];
	double cosv = ab / sqrt(aa * bb);

	const int T = (int)sky_model_tokens(c), H = c->hidden, F = c->ffn, S = c->seq;
	double gemm_ops = 2.0 * T * (3.0 * H * H + H * H + 2.0 * H * F) +
			  2.0 * 2.0 * c->batch * S * S * (double)H;
	double ops_fwd = sky_model_layer_flops_fwd(c); /* the same count: 2 per multiply-add */
	double gops = ops_fwd / st_q.median * 1e-9, gemm_gops = gemm_ops / st_g.median * 1e-9;
	size_t wbytes = sky_layer_s8_weight_bytes(c);
	size_t wbytes_f32 = 4 * (4 * (size_t)H * H + 2 * (size_t)H * F);

	cJSON_AddNumberToObject(out, "fwd_ms", st_q.median * 1e3);
	cJSON_AddNullToObject(out, "fwdbwd_ms"); /* inference only: no int8 backward */
	cJSON_AddNumberToObject(out, "gflops_fwd", gops);
	cJSON_AddNullToObject(out, "gflops_fwdbwd");
	cJSON_AddNumberToObject(out, "gops", gops);
	cJSON_AddNumberToObject(out, "gemm_ms", st_g.median * 1e3);
	cJSON_AddNumberToObject(out, "gemm_gops", gemm_gops);
	cJSON_AddNumberToObject(out, "efficiency", gops / gemm_gops);
	cJSON_AddNumberToObject(out, "ops_fwd", ops_fwd);
	cJSON_AddNumberToObject(out, "gemm_ops", gemm_ops);
	cJSON_AddNumberToObject(out, "cosine_vs_fp32", cosv);
	cJSON_AddNumberToObject(out, "fp32_fwd_ms", st_f.median * 1e3);
	cJSON_AddNumberToObject(out, "speedup_vs_fp32", st_f.median / st_q.median);
	cJSON_AddStringToObject(out, "kernel_variant", sky_k_s8_variant_name(v));
	cJSON_AddNumberToObject(out, "weight_bytes_int8", (double)wbytes);
	cJSON_AddNumberToObject(out, "weight_bytes_fp32", (double)wbytes_f32);
	cJSON_AddNumberToObject(out, "weight_ratio", (double)wbytes / (double)wbytes_f32);
	cJSON_AddNumberToObject(out, "arena_persist_bytes", (double)a.by_life[SKY_LIFE_PERSIST]);
	cJSON_AddNumberToObject(out, "arena_scratch_bytes", (double)a.by_life[SKY_LIFE_SCRATCH]);
	sky_bench_add_stats(out, "fwd_stats_ms", &st_q);
	sky_bench_add_stats(out, "fp32_fwd_stats_ms", &st_f);
	sky_bench_add_stats(out, "gemm_stats_ms", &st_g);
	rc = 0;
exit:
	if (rc && d.msg[0])
		fprintf(stderr, "sky bench layer: int8: %s\n", d.msg);
	else if (rc == SKY_ENOMEM)
		fprintf(stderr, "sky bench layer: out of memory for model %s\n", c->name);
	free(w), free(x), free(xc), free(y), free(yq), free(mask), free(scratch), free(cs);
	free(tmp), free(mem);
	sky_pool_destroy(pool);
	return rc;
}
