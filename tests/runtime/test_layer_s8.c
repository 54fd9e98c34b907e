/* The int8 layer: close to the fp32 layer (cosine), the same bits on every
 * machine and with every kernel variant (a hash committed here, checked
 * natively and under qemu), no allocation in forward, clear errors on bad
 * calibration input. */
#include "sky_test.h"

#include "sky_arena.h"
#include "sky_kernels_s8.h"
#include "sky_layer.h"
#include "sky_layer_s8.h"
#include "sky_pool.h"
#include "sky_rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static sky_model_cfg tiny(void)
{
	sky_model_cfg c;
	sky_model_preset("tiny", &c);
	return c;
}

typedef struct qlayer {
	sky_layer_s8 L;
	void *mem;
} qlayer;

/* scratch for `workers` threads */
static int qlayer_carve_mt(qlayer *q, const sky_model_cfg *c, int variant, int workers)
{
	sky_arena m;
	sky_arena_init(&m, NULL, 0);
	sky_layer_s8_carve_persist(&q->L, c, variant, &m);
	sky_layer_s8_carve_scratch_mt(&q->L, &m, workers);
	size_t need = sky_arena_required(&m);
	q->mem = malloc(need);
	sky_arena a;
	sky_arena_init(&a, q->mem, need);
	sky_layer_s8_carve_persist(&q->L, c, variant, &a);
	sky_layer_s8_carve_scratch_mt(&q->L, &a, workers);
	return sky_arena_seal(&a);
}

static int qlayer_carve(qlayer *q, const sky_model_cfg *c, int variant)
{
	return qlayer_carve_mt(q, c, variant, 1);
}

static double cosine(const float *a, const float *b, size_t n)
{
	double ab = 0, aa = 0, bb = 0;
	for (size_t i = 0; i < n; i++)
		ab += (double)a[i] * b[i], aa += (double)a[i] * a[i], bb += (double)b[i] * b[i];
	return ab / sqrt(aa * bb);
}

/* fp32 vs int8 on one random layer of shape cfg; returns the cosine */
static double compare_fp32_cfg(const sky_model_cfg *cfg, float wscale, int random_ln,
			       unsigned long long seed)
{
	sky_model_cfg c = *cfg;
	size_t np = (size_t)sky_model_layer_params(&c), nx = (size_t)sky_model_tokens(&c) * c.hidden;
	float *w = malloc(np * 4), *x = malloc(nx * 4), *y = malloc(nx * 4), *yq = malloc(nx * 4);
	float *mask = calloc((size_t)sky_model_tokens(&c), 4);
	float *scratch = malloc(sky_layer_scratch_floats(&c) * 4);
	float *cs = malloc(sky_layer_s8_calib_scratch_floats(&c) * 4);
	void *tmp = malloc(sky_layer_s8_tmp_bytes(&c));
	sky_layer_init(&c, w, seed);
	sky_rng r;
	sky_rng_seed(&r, seed + 1);
	sky_layer_view v;
	sky_layer_bind(&c, w, &v);
	if (wscale > 0) {
		sky_tensor_info t[SKY_LAYER_NTENSORS];
		sky_layer_tensors(&c, t);
		for (int i = 0; i < SKY_LAYER_NTENSORS; i++)
			if (t[i].ndim == 2 || !random_ln)
				for (size_t k = 0; k < t[i].count; k++)
					w[t[i].offset + k] = t[i].ndim == 2 ? wscale * sky_rng_normal(&r)
									  : w[t[i].offset + k];
		if (random_ln) {
			for (int j = 0; j < c.hidden; j++) {
				v.ln1_g[j] = 0.8f + 0.4f * sky_rng_uniform(&r);
				v.ln1_b[j] = 0.1f * sky_rng_normal(&r);
				v.ln2_g[j] = 0.8f + 0.4f * sky_rng_uniform(&r);
				v.ln2_b[j] = 0.1f * sky_rng_normal(&r);
				v.bo[j] = 0.1f * sky_rng_normal(&r);
			}
			for (int j = 0; j < 3 * c.hidden; j++)
				v.bqkv[j] = 0.1f * sky_rng_normal(&r);
			for (int j = 0; j < c.ffn; j++)
				v.b1[j] = 0.1f * sky_rng_normal(&r);
		}
	}
	for (size_t i = 0; i < nx; i++)
		x[i] = sky_rng_normal(&r);
	/* the last 3 tokens of every other sequence are padding */
	for (int b = 0; b < c.batch; b += 2)
		for (int s = c.seq - 3; s < c.seq; s++)
			mask[b * c.seq + s] = -10000.0f;
	sky_layer_forward(&c, w, x, mask, y, NULL, scratch, SKY_BLOCK_ALL);

	sky_layer_s8_calib cal;
	sky_layer_s8_calib_init(&cal);
	sky_diag d;
	sky_diag_clear(&d);
	double cs_out = -2;
	qlayer q;
	SKY_EXPECT_EQ(sky_layer_s8_calibrate(&c, w, x, mask, cs, &cal, &d), 0);
	SKY_EXPECT_EQ(qlayer_carve(&q, &c, sky_k_s8_variant_active()), 0);
	int rc = sky_layer_s8_from_f32(&q.L, w, &cal, tmp, &d);
	SKY_EXPECT_MSG(rc == 0, "from_f32: %s", d.msg);
	if (rc == 0) {
		SKY_EXPECT_EQ(sky_layer_s8_forward(&q.L, x, mask, yq), 0);
		cs_out = cosine(y, yq, nx);
	}
	free(q.mem), free(w), free(x), free(y), free(yq), free(mask), free(scratch), free(cs),
		free(tmp);
	return cs_out;
}

static double compare_fp32(float wscale, int random_ln, unsigned long long seed)
{
	sky_model_cfg c = tiny();
	return compare_fp32_cfg(&c, wscale, random_ln, seed);
}

SKY_TEST(int8_layer_close_to_fp32)
{
	double c1 = compare_fp32(0, 0, 11);      /* BERT's initialisation */
	double c2 = compare_fp32(0.15f, 1, 12);  /* wider weights, random LayerNorm and biases */
	fprintf(stderr, "tiny layer, cosine int8 vs fp32: BERT init %.5f, wide weights %.5f\n", c1,
		c2);
	SKY_EXPECT(c1 >= 0.99);
	SKY_EXPECT(c2 >= 0.99);
}

/* Shapes a Hugging Face config may give: hidden sizes that are not
 * multiples of 8 or 64, head widths of 4 and 16, odd FFN widths. */
SKY_TEST(int8_layer_close_to_fp32_at_odd_shapes)
{
	const int shapes[][4] = {{80, 5, 136, 12}, {12, 3, 20, 7}, {36, 4, 50, 5}};
	for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
		sky_model_cfg c = tiny();
		c.hidden = shapes[i][0], c.heads = shapes[i][1], c.ffn = shapes[i][2];
		c.seq = shapes[i][3], c.batch = 3;
		double cs = compare_fp32_cfg(&c, 0.15f, 1, 20 + i);
		fprintf(stderr, "H %d heads %d F %d: cosine int8 vs fp32 %.5f\n", c.hidden, c.heads,
			c.ffn, cs);
		SKY_EXPECT_MSG(cs >= 0.99, "H %d heads %d F %d: cosine %.5f", c.hidden, c.heads,
			       c.ffn, cs);
	}
}

static uint64_t fnv1a(const void *p, size_t n, uint64_t h)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	return h;
}

/* A layer built from integers only (int8 weights from an integer RNG,
 * scales and ranges that are exact binary fractions, inputs k / 64), so
 * nothing machine-dependent goes into it: its output hash must be the same
 * on x86 and aarch64 and with every kernel variant. */
/* 1: run the layer as its two halves, the FFN half from a copy of h1_8
 * with every other scratch buffer clobbered in between, as when the
 * halves run on two boards. */
static int g_halves;

/* pad_step: sequences 0, pad_step, 2 pad_step, ... end in 4 padding tokens */
static uint64_t fixed_layer_hash_mt(const sky_model_cfg *cfg, int variant, int threads,
				    int pad_step, int *rc_out)
{
	sky_model_cfg c = *cfg;
	const int H = c.hidden, F = c.ffn;
	size_t nx = (size_t)sky_model_tokens(&c) * H;
	qlayer q;
	*rc_out = qlayer_carve_mt(&q, &c, variant, threads);
	sky_layer_s8 *L = &q.L;
	sky_pool *pool = threads > 1 ? sky_pool_create(threads) : NULL;
	SKY_EXPECT(threads == 1 || pool != NULL);
	SKY_EXPECT_EQ(sky_layer_s8_use_pool(L, pool), 0);
	sky_rng r;
	sky_rng_seed(&r, 2026);
	int8_t *wq = malloc((size_t)3 * H * F);
	struct {
		sky_k_s8_packed *p;
		int n, k;
		float *sw;
	} mats[4] = {{&L->wqkv, 3 * H, H, L->sw_qkv},
		     {&L->wo, H, H, L->sw_o},
		     {&L->w1, F, H, L->sw_1},
		     {&L->w2, H, F, L->sw_2}};
	for (int m = 0; m < 4; m++) {
		for (int i = 0; i < mats[m].n * mats[m].k; i++)
			wq[i] = (int8_t)((int)sky_rng_below(&r, 255) - 127);
		sky_k_pack_s8(variant, wq, mats[m].n, mats[m].k, mats[m].k, 1, mats[m].p->data,
			      mats[m].p);
		for (int j = 0; j < mats[m].n; j++)
			mats[m].sw[j] = (1 + (int)sky_rng_below(&r, 8)) / 2048.0f;
	}
	for (int i = 0; i < 9 * H + F; i++)
		L->fvec[i] = ((int)sky_rng_below(&r, 33) - 16) / 64.0f;
	for (int j = 0; j < H; j++) { /* LayerNorm gammas in [0.75, 1.25] */
		L->fvec[4 * H + j] = 1.0f + ((int)sky_rng_below(&r, 17) - 8) / 32.0f;
		L->fvec[7 * H + F + j] = 1.0f + ((int)sky_rng_below(&r, 17) - 8) / 32.0f;
	}
	const float ranges[SKY_Q_NPOINTS] = {4, 2, 2, 2, 2, 4, 4, 8, 8, 4, 4};
	memcpy(L->absmax, ranges, sizeof ranges);
	sky_diag d;
	sky_diag_clear(&d);
	int rc = sky_layer_s8_setup(L, &d);
	SKY_EXPECT_MSG(rc == 0, "setup: %s", d.msg);
	float *x = malloc(nx * 4), *y = malloc(nx * 4), *mask = calloc((size_t)sky_model_tokens(&c), 4);
	for (size_t i = 0; i < nx; i++)
		x[i] = ((int)sky_rng_below(&r, 257) - 128) / 64.0f;
	for (int b = 0; b < c.batch; b += pad_step)
		for (int s = c.seq - 4; s < c.seq; s++)
			mask[(size_t)b * c.seq + s] = -1e9f;
	uint64_t h = 0;
	if (rc == 0 && *rc_out == 0) {
		int8_t *h1 = malloc(nx);
		unsigned long before = sky_test_allocs();
		if (g_halves) {
			rc = sky_layer_s8_forward_attn(L, x, mask);
			memcpy(h1, L->h1_8, nx);
			memset(L->h1_8, 0x55, nx), memset(L->x8, 0x33, nx), memset(L->qkv8, 0x11, 3 * nx);
			memset(L->ctx8, 0x22, nx), memset(L->a16, 0x44, 2 * nx);
			rc = rc ? rc : sky_layer_s8_forward_ffn(L, h1, y);
		} else {
			rc = sky_layer_s8_forward(L, x, mask, y);
		}
		SKY_EXPECT_EQ(sky_test_allocs() - before, 0); /* forward never allocates */
		free(h1);
		h = fnv1a(y, nx * 4, 1469598103934665603ull);
		/* the hash covers a real output: many distinct values, none saturated everywhere */
		int distinct = 0;
		unsigned char seen[256] = {0};
		for (size_t i = 0; i < nx; i++) {
			int qv = (int)lrintf(y[i] / L->s_y) + 128;
			if (qv >= 0 && qv < 256 && !seen[qv])
				seen[qv] = 1, distinct++;
		}
		SKY_EXPECT_MSG(distinct > 40, "only %d distinct output values", distinct);
	}
	*rc_out = *rc_out ? *rc_out : rc;
	free(wq), free(x), free(y), free(mask), free(q.mem);
	sky_pool_destroy(pool);
	return h;
}

static uint64_t fixed_layer_hash(int variant, int *rc_out)
{
	sky_model_cfg c = tiny();
	return fixed_layer_hash_mt(&c, variant, 1, c.batch, rc_out);
}

/* From running this test (x86-64 AVX-512 VNNI natively; the same value must
 * come out under qemu-aarch64 with and without dotprod). */
#define FIXED_LAYER_HASH 0x70d61548aaf2afe9ull

SKY_TEST(int8_layer_bit_exact_across_variants_and_machines)
{
	for (int v = 0; v < SKY_K_S8_NVARIANTS; v++) {
		if (!sky_k_s8_variant_supported(v))
			continue;
		int rc;
		uint64_t h = fixed_layer_hash(v, &rc);
		SKY_EXPECT_EQ(rc, 0);
		SKY_EXPECT_MSG(h == FIXED_LAYER_HASH, "variant %s: output hash 0x%016llx, expected 0x%016llx",
			       sky_k_s8_variant_name(v), (unsigned long long)h,
			       (unsigned long long)FIXED_LAYER_HASH);
	}
}

/* Threads split row blocks and heads; the bits may not depend on how many
 * there are. 7 x 40 tokens: three row blocks (128, 128, 24) and a padded
 * sequence in every other one. */
SKY_TEST(int8_layer_same_bits_for_any_thread_count)
{
	sky_model_cfg c = tiny();
	c.batch = 7, c.seq = 40;
	for (int v = 0; v < SKY_K_S8_NVARIANTS; v++) {
		if (!sky_k_s8_variant_supported(v))
			continue;
		int rc;
		uint64_t h1 = fixed_layer_hash_mt(&c, v, 1, 2, &rc);
		SKY_EXPECT_EQ(rc, 0);
		for (int t = 2; t <= 4; t++) {
			uint64_t ht = fixed_layer_hash_mt(&c, v, t, 2, &rc);
			SKY_EXPECT_EQ(rc, 0);
			SKY_EXPECT_MSG(ht == h1, "variant %s, %d threads: 0x%016llx, 1 thread 0x%016llx",
				       sky_k_s8_variant_name(v), t, (unsigned long long)ht,
				       (unsigned long long)h1);
		}
	}
}

/* The attention half then the FFN half (as two stages run them, with only
 * h1_8 crossing) give the whole layer's bits, for 1, 2 and 4 threads. */
SKY_TEST(int8_halves_chained_equal_the_whole_layer)
{
	sky_model_cfg c = tiny();
	c.batch = 7, c.seq = 40;
	int v = sky_k_s8_variant_active(), rc;
	g_halves = 0;
	uint64_t whole = fixed_layer_hash_mt(&c, v, 1, 2, &rc);
	SKY_EXPECT_EQ(rc, 0);
	g_halves = 1;
	for (int t = 1; t <= 4; t *= 2) {
		uint64_t h = fixed_layer_hash_mt(&c, v, t, 2, &rc);
		SKY_EXPECT_EQ(rc, 0);
		SKY_EXPECT_MSG(h == whole, "%d threads: halves 0x%016llx, whole layer 0x%016llx", t,
			       (unsigned long long)h, (unsigned long long)whole);
	}
	g_halves = 0;
	/* the fixed layer's committed hash, through the halves */
	g_halves = 1;
	uint64_t hf = fixed_layer_hash(v, &rc);
	g_halves = 0;
	SKY_EXPECT_EQ(hf, FIXED_LAYER_HASH);
}

SKY_TEST(a_pool_larger_than_the_scratch_is_refused)
{
	sky_model_cfg c = tiny();
	qlayer q;
	SKY_EXPECT_EQ(qlayer_carve_mt(&q, &c, SKY_K_S8_REF, 2), 0);
	sky_pool *p3 = sky_pool_create(3), *p2 = sky_pool_create(2);
	SKY_EXPECT_EQ(sky_layer_s8_use_pool(&q.L, p3), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_layer_s8_use_pool(&q.L, p2), 0);
	SKY_EXPECT_EQ(sky_layer_s8_use_pool(&q.L, NULL), 0);
	sky_pool_destroy(p3), sky_pool_destroy(p2);
	free(q.mem);
}

SKY_TEST(bad_calibration_input_is_a_clear_error)
{
	sky_model_cfg c = tiny();
	size_t np = (size_t)sky_model_layer_params(&c), nx = (size_t)sky_model_tokens(&c) * c.hidden;
	float *w = malloc(np * 4), *x = calloc(nx, 4);
	float *cs = malloc(sky_layer_s8_calib_scratch_floats(&c) * 4);
	void *tmp = malloc(sky_layer_s8_tmp_bytes(&c));
	sky_layer_init(&c, w, 1);
	sky_layer_s8_calib cal;
	sky_diag d;
	qlayer q;
	SKY_EXPECT_EQ(qlayer_carve(&q, &c, SKY_K_S8_REF), 0);

	/* no calibration at all */
	sky_layer_s8_calib_init(&cal);
	sky_diag_clear(&d);
	SKY_EXPECT(sky_layer_s8_from_f32(&q.L, w, &cal, tmp, &d) == SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "calibration") != NULL);

	/* an all-zero batch: every range is zero, so scales would be zero */
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_layer_s8_calibrate(&c, w, x, NULL, cs, &cal, &d), 0);
	sky_diag_clear(&d);
	SKY_EXPECT(sky_layer_s8_from_f32(&q.L, w, &cal, tmp, &d) == SKY_EINVAL);
	SKY_EXPECT_MSG(strstr(d.msg, "'x'") && strstr(d.msg, "scale of zero"), "%s", d.msg);

	/* NaN and infinity in the batch */
	x[37] = NAN;
	sky_layer_s8_calib_init(&cal);
	sky_diag_clear(&d);
	SKY_EXPECT(sky_layer_s8_calibrate(&c, w, x, NULL, cs, &cal, &d) == SKY_EINVAL);
	SKY_EXPECT_MSG(strstr(d.msg, "NaN") && strstr(d.msg, "token 1, column 5"), "%s", d.msg);
	x[37] = -INFINITY;
	sky_diag_clear(&d);
	SKY_EXPECT(sky_layer_s8_calibrate(&c, w, x, NULL, cs, &cal, &d) == SKY_EINVAL);
	SKY_EXPECT_MSG(strstr(d.msg, "infinity"), "%s", d.msg);
	SKY_EXPECT_EQ(cal.batches, 0);

	/* NaN in a weight */
	x[37] = 1.0f;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_layer_s8_calibrate(&c, w, x, NULL, cs, &cal, &d), 0);
	float keep = w[5];
	w[5] = NAN;
	sky_diag_clear(&d);
	SKY_EXPECT(sky_layer_s8_from_f32(&q.L, w, &cal, tmp, &d) == SKY_EINVAL);
	SKY_EXPECT_MSG(strstr(d.msg, "NaN"), "%s", d.msg);
	w[5] = keep;
	/* forward refuses a non-finite input instead of quantising it */
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_layer_s8_from_f32(&q.L, w, &cal, tmp, &d), 0);
	float *y = malloc(nx * 4);
	x[3] = INFINITY;
	SKY_EXPECT(sky_layer_s8_forward(&q.L, x, NULL, y) == SKY_EINVAL);
	free(w), free(x), free(cs), free(tmp), free(q.mem), free(y);
}
