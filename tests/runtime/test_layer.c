/* The fp32 encoder layer against a double-precision reference: forward
 * values, and every parameter and input gradient against central finite
 * differences of the reference (for both blocks and each alone). */
#include "sky_test.h"

#include "ref_bert_f64.h"
#include "sky_kernels_f32.h"
#include "sky_layer.h"
#include "sky_rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Small enough that finite differences over every parameter stay fast under
 * qemu, large enough for 2 heads, 2 sequences and padding. */
static sky_model_cfg small_cfg(void)
{
	/* ln_eps, act: BERT's; no dropout */
	sky_model_cfg c = {"test", 8, 2, 12, 1, 5, 2, 11, 7, 2, 3, 0, 0, 0, 0};
	return c;
}

/* Sizes that are not multiples of 8, so every row-wise kernel runs both its
 * 8-lane body and its scalar tail (with H = 8 and S = 5 above, LayerNorm
 * never runs a tail and softmax never runs a body): H 20, F 36, S 9 and
 * T = 27 tokens (the GELU's T x F = 972 elements end in a tail too). */
static sky_model_cfg odd_cfg(void)
{
	/* ln_eps, act: BERT's; no dropout */
	sky_model_cfg c = {"odd", 20, 2, 36, 1, 9, 3, 11, 9, 2, 3, 0, 0, 0, 0};
	return c;
}

/* H 100 (4 heads of 25), S 11, T 22. */
static sky_model_cfg wide_cfg(void)
{
	/* ln_eps, act: BERT's; no dropout */
	sky_model_cfg c = {"wide", 100, 4, 36, 1, 11, 2, 11, 11, 2, 3, 0, 0, 0, 0};
	return c;
}

#define MASK_NEG -1e9f

/* Weights larger than BERT's 0.02 so GELU, softmax and LayerNorm work away
 * from their linear regions, where a wrong derivative would hide. */
static void random_fill(float *p, size_t n, float scale, sky_rng *r)
{
	for (size_t i = 0; i < n; i++)
		p[i] = scale * sky_rng_normal(r);
}

typedef struct fixture {
	sky_model_cfg c;
	size_t np, nx;
	float *w, *x, *mask, *y, *dy, *dx, *dw, *saved, *scratch;
} fixture;

static void fixture_init(fixture *f, sky_model_cfg cfg, int blocks, unsigned long long seed)
{
	f->c = cfg;
	sky_model_cfg *c = &f->c;
	f->np = (size_t)sky_model_layer_params(c);
	f->nx = (size_t)sky_model_tokens(c) * c->hidden;
	f->w = malloc(f->np * sizeof(float));
	f->dw = calloc(f->np, sizeof(float));
	f->x = malloc(f->nx * sizeof(float));
	f->y = malloc(f->nx * sizeof(float));
	f->dy = malloc(f->nx * sizeof(float));
	f->dx = malloc(f->nx * sizeof(float));
	f->mask = calloc((size_t)sky_model_tokens(c), sizeof(float));
	f->saved = malloc(sky_layer_saved_floats(c, blocks) * sizeof(float));
	f->scratch = malloc(sky_layer_scratch_floats(c) * sizeof(float));
	sky_rng r;
	sky_rng_seed(&r, seed);
	/* 0.4 at H = 8, scaled by 1/sqrt(H) beyond, so that wider layers see
	 * pre-activations of the same size (not saturated softmaxes) */
	random_fill(f->w, f->np, 0.4f * sqrtf(8.0f / (float)c->hidden), &r);
	random_fill(f->x, f->nx, 1.0f, &r);
	random_fill(f->dy, f->nx, 1.0f, &r);
	/* LayerNorm gammas near 1, so no direction is scaled away */
	sky_layer_view v;
	sky_layer_bind(c, f->w, &v);
	for (int j = 0; j < c->hidden; j++) {
		v.ln1_g[j] = 1.0f + 0.3f * sky_rng_normal(&r);
		v.ln2_g[j] = 1.0f + 0.3f * sky_rng_normal(&r);
	}
	/* the second sequence has its last two tokens padded */
	f->mask[2 * c->seq - 1] = MASK_NEG;
	f->mask[2 * c->seq - 2] = MASK_NEG;
}

static void fixture_free(fixture *f)
{
	free(f->w), free(f->dw), free(f->x), free(f->y), free(f->dy), free(f->dx);
	free(f->mask), free(f->saved), free(f->scratch);
}

/* The dropout the gradient checks run under (NULL: none) and the layer
 * index that keys its masks. */
static const sky_dropout *g_dr;
static int g_layer;

/* L = sum(y .* dy) of the f64 reference; its gradient is what backward
 * computes when given dy. */
static double ref_loss(const sky_model_cfg *c, const double *w, const double *x,
		       const double *mask, const double *dy, double *ybuf, int blocks)
{
	size_t n = (size_t)sky_model_tokens(c) * c->hidden;
	ref64_layer_forward_dr(c, w, x, mask, ybuf, blocks, g_dr, g_layer);
	double s = 0;
	for (size_t i = 0; i < n; i++)
		s += ybuf[i] * dy[i];
	return s;
}

/* Central differences of ref_loss in the coordinates of v (which is w or
 * x) that `take` marks (NULL: all n); the others are left alone. */
static void fd_grad(const sky_model_cfg *c, double *w, double *x, const double *mask,
		    const double *dy, double *v, size_t n, const unsigned char *take, int blocks,
		    double *grad)
{
	/* h = 1e-5: truncation error ~h^2 f''' ~ 1e-10 and rounding ~1e-16/h =
	 * 1e-11, both far below the fp32 errors under test (~1e-6) */
	const double h = 1e-5;
	double *ybuf = malloc((size_t)sky_model_tokens(c) * c->hidden * sizeof(double));
	for (size_t i = 0; i < n; i++) {
		if (take && !take[i])
			continue;
		double keep = v[i];
		v[i] = keep + h;
		double lp = ref_loss(c, w, x, mask, dy, ybuf, blocks);
		v[i] = keep - h;
		double lm = ref_loss(c, w, x, mask, dy, ybuf, blocks);
		v[i] = keep;
		grad[i] = (lp - lm) / (2 * h);
	}
	free(ybuf);
}

/* ||a - b|| / max(||b||, floor) over the marked elements (all if take is NULL) */
static double rel_err_at(const float *a, const double *b, const unsigned char *take, size_t n,
			 double floor)
{
	double d = 0, nb = 0;
	for (size_t i = 0; i < n; i++) {
		if (take && !take[i])
			continue;
		d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
		nb += b[i] * b[i];
	}
	nb = sqrt(nb);
	return sqrt(d) / (nb > floor ? nb : floor);
}

/* Marks `per` random elements of each tensor (fewer if some repeat) and
 * nx_pick of the input x, for shapes too big to difference everywhere. */
static void pick_samples(const sky_model_cfg *c, int per, size_t nx_pick, unsigned char *tw,
			 unsigned char *tx, size_t nx, sky_rng *r)
{
	sky_tensor_info t[SKY_LAYER_NTENSORS];
	sky_layer_tensors(c, t);
	for (int i = 0; i < SKY_LAYER_NTENSORS; i++)
		for (int k = 0; k < per; k++)
			tw[t[i].offset + sky_rng_below(r, (uint32_t)t[i].count)] = 1;
	for (size_t k = 0; k < nx_pick; k++)
		tx[sky_rng_below(r, (uint32_t)nx)] = 1;
}

/* sample = 0: every coordinate; otherwise `sample` elements of each tensor
 * and 4 x sample of the input */
static void check_grads(sky_model_cfg cfg, int blocks, int sample)
{
	fixture f;
	fixture_init(&f, cfg, blocks, 100 + blocks);
	sky_model_cfg *c = &f.c;
	sky_layer_forward_dr(c, f.w, f.x, f.mask, f.y, f.saved, f.scratch, blocks, g_dr, g_layer);
	sky_layer_backward_dr(c, f.w, f.mask, f.saved, f.dy, f.dx, f.dw, f.scratch, blocks, g_dr,
			      g_layer);

	double *w = malloc(f.np * sizeof(double)), *x = malloc(f.nx * sizeof(double));
	double *mask = malloc((size_t)sky_model_tokens(c) * sizeof(double));
	double *dy = malloc(f.nx * sizeof(double));
	double *gw = malloc(f.np * sizeof(double)), *gx = malloc(f.nx * sizeof(double));
	double *yref = malloc(f.nx * sizeof(double));
	ref64_from_f32(w, f.w, f.np);
	ref64_from_f32(x, f.x, f.nx);
	ref64_from_f32(mask, f.mask, (size_t)sky_model_tokens(c));
	ref64_from_f32(dy, f.dy, f.nx);

	/* forward: fp32 vs f64 on the same (fp32-representable) inputs. Outputs
	 * are LayerNorm'd (order 1); fp32 through ~10 ops with sums of <= 12
	 * terms should stay within a few 1e-7 relative, plus the 1.5e-7 of
	 * the erf approximation. 1e-5 leaves margin and still catches any
	 * wrong formula (those give errors of order 1e-2 and up). */
	ref64_layer_forward_dr(c, w, x, mask, yref, blocks, g_dr, g_layer);
	double ef = ref64_rel_err(f.y, yref, f.nx, 1e-30);
	SKY_EXPECT_MSG(ef < 1e-5, "%s blocks %d forward rel err %.3g", c->name, blocks, ef);

	/* gradients: the reference's central differences are exact to ~1e-9;
	 * ours are fp32 (unit roundoff 6e-8) through about ten operations, and
	 * LN backward subtracts means of order-1 terms, so we expect a few 1e-7
	 * relative (measured: 5e-8 to 6e-7 per tensor on x86). The bound is
	 * 1e-5 per tensor: 20x margin for other BLAS summation orders (aarch64),
	 * while any wrong term (a missed scale, a dropped row) gives 1e-2 and up.
	 * Tensors whose true gradient is (near) zero, such as the key bias
	 * (softmax ignores a per-row constant), are normalised by 1e-2 of the
	 * whole gradient's norm instead, so rounding noise does not fail them
	 * but a real gradient where none should be does. */
	unsigned char *tw = NULL, *tx = NULL;
	if (sample) {
		sky_rng r;
		sky_rng_seed(&r, 300 + blocks);
		tw = calloc(f.np, 1), tx = calloc(f.nx, 1);
		pick_samples(c, sample, 4 * (size_t)sample, tw, tx, f.nx, &r);
	}
	memset(gw, 0, f.np * sizeof *gw);
	memset(gx, 0, f.nx * sizeof *gx);
	fd_grad(c, w, x, mask, dy, w, f.np, tw, blocks, gw);
	fd_grad(c, w, x, mask, dy, x, f.nx, tx, blocks, gx);
	double all = ref64_norm2(gw, f.np); /* entries not sampled are 0 */
	if (tw) { /* scale a sample's norm to the whole gradient's */
		size_t picked = 0;
		for (size_t i = 0; i < f.np; i++)
			picked += tw[i];
		all *= sqrt((double)f.np / (double)(picked ? picked : 1));
	}
	sky_tensor_info t[SKY_LAYER_NTENSORS];
	sky_layer_tensors(c, t);
	int in_attn = 0;
	for (int i = 0; i < SKY_LAYER_NTENSORS; i++) {
		in_attn = i < 10; /* the first 10 tensors belong to the attention block */
		int runs = in_attn ? (blocks & SKY_BLOCK_ATTN) : (blocks & SKY_BLOCK_FFN);
		double e = rel_err_at(f.dw + t[i].offset, gw + t[i].offset,
				      tw ? tw + t[i].offset : NULL, t[i].count, 1e-2 * all);
		SKY_EXPECT_MSG(e < 1e-5, "%s blocks %d: d%s rel err %.3g", c->name, blocks, t[i].name,
			       e);
		if (!runs) {
			/* a block that did not run adds nothing */
			for (size_t k = 0; k < t[i].count; k++)
				SKY_EXPECT(f.dw[t[i].offset + k] == 0.0f);
		}
	}
	double ex = rel_err_at(f.dx, gx, tx, f.nx, 1e-30);
	SKY_EXPECT_MSG(ex < 1e-5, "%s blocks %d: dx rel err %.3g", c->name, blocks, ex);

	/* gradients accumulate: a second backward doubles dw */
	float *dw1 = malloc(f.np * sizeof(float));
	memcpy(dw1, f.dw, f.np * sizeof(float));
	sky_layer_backward_dr(c, f.w, f.mask, f.saved, f.dy, f.dx, f.dw, f.scratch, blocks, g_dr,
			      g_layer);
	size_t bad = 0;
	for (size_t i = 0; i < f.np; i++)
		bad += fabsf(f.dw[i] - 2 * dw1[i]) > 1e-6f * (1 + fabsf(dw1[i]));
	SKY_EXPECT_EQ(bad, 0);

	free(dw1), free(w), free(x), free(mask), free(dy), free(gw), free(gx), free(yref);
	free(tw), free(tx);
	fixture_free(&f);
}

SKY_TEST(layer_grads_all_blocks) { check_grads(small_cfg(), SKY_BLOCK_ALL, 0); }
SKY_TEST(layer_grads_attention_block) { check_grads(small_cfg(), SKY_BLOCK_ATTN, 0); }
SKY_TEST(layer_grads_ffn_block) { check_grads(small_cfg(), SKY_BLOCK_FFN, 0); }
/* Sampled: differences in every coordinate of these take 30 s under qemu.
 * A wrong tail in a row-wise kernel spoils whole rows of the gradients, so
 * a sample of each tensor is enough to see it (checked with mutants of the
 * LayerNorm backward and GELU tails). */
SKY_TEST(layer_grads_odd_sizes_sampled) { check_grads(odd_cfg(), SKY_BLOCK_ALL, 24); }
SKY_TEST(layer_grads_hidden_100_sampled) { check_grads(wide_cfg(), SKY_BLOCK_ALL, 4); }

/* Dropout at all three sites, heavy enough (0.3, 0.25) that a mask missing
 * from one backward term shows: forward and every gradient against the
 * f64 reference under the same masks. */
static void check_grads_dropout(sky_model_cfg cfg, int blocks, int sample)
{
	sky_dropout dr;
	cfg.hidden_drop = 0.3f;
	cfg.attn_drop = 0.25f;
	SKY_EXPECT(sky_dropout_make(&dr, &cfg, 42, 3, 1) == &dr);
	g_dr = &dr;
	g_layer = 5;
	check_grads(cfg, blocks, sample);
	g_dr = NULL;
	g_layer = 0;
}

SKY_TEST(layer_grads_with_dropout_all_blocks) { check_grads_dropout(small_cfg(), SKY_BLOCK_ALL, 0); }
SKY_TEST(layer_grads_with_dropout_attention_block)
{
	check_grads_dropout(small_cfg(), SKY_BLOCK_ATTN, 0);
}
SKY_TEST(layer_grads_with_dropout_ffn_block) { check_grads_dropout(small_cfg(), SKY_BLOCK_FFN, 0); }
SKY_TEST(layer_grads_with_dropout_odd_sizes_sampled)
{
	check_grads_dropout(odd_cfg(), SKY_BLOCK_ALL, 24);
}

/* Dropout changes the output (it is applied), depends on the layer index
 * and the micro-batch, and with probabilities 0 (or no context) the _dr
 * functions are the plain ones bit for bit. */
SKY_TEST(layer_dropout_is_keyed_and_off_by_default)
{
	sky_model_cfg cfg = small_cfg();
	fixture f;
	fixture_init(&f, cfg, SKY_BLOCK_ALL, 11);
	sky_model_cfg *c = &f.c;
	float *y0 = malloc(f.nx * sizeof(float)), *y1 = malloc(f.nx * sizeof(float));
	sky_layer_forward(c, f.w, f.x, f.mask, y0, NULL, f.scratch, SKY_BLOCK_ALL);
	sky_layer_forward_dr(c, f.w, f.x, f.mask, y1, NULL, f.scratch, SKY_BLOCK_ALL, NULL, 3);
	SKY_EXPECT(memcmp(y0, y1, f.nx * sizeof(float)) == 0);
	sky_dropout none;
	SKY_EXPECT(sky_dropout_make(&none, c, 1, 1, 0) == NULL);
	sky_model_cfg d = *c;
	d.hidden_drop = 0.1f;
	d.attn_drop = 0.1f;
	sky_dropout a, b, m;
	sky_dropout_make(&a, &d, 1, 1, 0);
	sky_dropout_make(&b, &d, 1, 1, 0);
	sky_dropout_make(&m, &d, 1, 1, 1);
	float *ya = malloc(f.nx * sizeof(float)), *yb = malloc(f.nx * sizeof(float));
	sky_layer_forward_dr(&d, f.w, f.x, f.mask, ya, NULL, f.scratch, SKY_BLOCK_ALL, &a, 3);
	sky_layer_forward_dr(&d, f.w, f.x, f.mask, yb, NULL, f.scratch, SKY_BLOCK_ALL, &b, 3);
	SKY_EXPECT(memcmp(ya, yb, f.nx * sizeof(float)) == 0);
	SKY_EXPECT(memcmp(ya, y0, f.nx * sizeof(float)) != 0);
	sky_layer_forward_dr(&d, f.w, f.x, f.mask, yb, NULL, f.scratch, SKY_BLOCK_ALL, &a, 4);
	SKY_EXPECT(memcmp(ya, yb, f.nx * sizeof(float)) != 0);
	sky_layer_forward_dr(&d, f.w, f.x, f.mask, yb, NULL, f.scratch, SKY_BLOCK_ALL, &m, 3);
	SKY_EXPECT(memcmp(ya, yb, f.nx * sizeof(float)) != 0);
	free(y0), free(y1), free(ya), free(yb);
	fixture_free(&f);
}

/* Running the two blocks as two stages equals running the layer at once,
 * forward and backward, bit for bit (same operations in the same order). */
static void split_blocks_equal_whole(sky_model_cfg cfg)
{
	fixture a, b;
	fixture_init(&a, cfg, SKY_BLOCK_ALL, 7);
	fixture_init(&b, cfg, SKY_BLOCK_ATTN, 7);
	sky_model_cfg *c = &a.c;
	float *s2 = malloc(sky_layer_saved_floats(c, SKY_BLOCK_FFN) * sizeof(float));
	float *h1 = malloc(a.nx * sizeof(float)), *dh1 = malloc(a.nx * sizeof(float));
	float *dw2 = calloc(a.np, sizeof(float));
	sky_layer_forward(c, a.w, a.x, a.mask, a.y, a.saved, a.scratch, SKY_BLOCK_ALL);
	sky_layer_backward(c, a.w, a.mask, a.saved, a.dy, a.dx, a.dw, a.scratch, SKY_BLOCK_ALL);

	sky_layer_forward(c, b.w, b.x, b.mask, h1, b.saved, b.scratch, SKY_BLOCK_ATTN);
	sky_layer_forward(c, b.w, h1, b.mask, b.y, s2, b.scratch, SKY_BLOCK_FFN);
	sky_layer_backward(c, b.w, b.mask, s2, b.dy, dh1, dw2, b.scratch, SKY_BLOCK_FFN);
	sky_layer_backward(c, b.w, b.mask, b.saved, dh1, b.dx, dw2, b.scratch, SKY_BLOCK_ATTN);
	SKY_EXPECT_MSG(memcmp(a.y, b.y, a.nx * sizeof(float)) == 0, "%s y", c->name);
	SKY_EXPECT_MSG(memcmp(a.dx, b.dx, a.nx * sizeof(float)) == 0, "%s dx", c->name);
	SKY_EXPECT_MSG(memcmp(a.dw, dw2, a.np * sizeof(float)) == 0, "%s dw", c->name);
	free(s2), free(h1), free(dh1), free(dw2);
	fixture_free(&a);
	fixture_free(&b);
}

SKY_TEST(layer_split_blocks_equal_whole)
{
	split_blocks_equal_whole(small_cfg());
	split_blocks_equal_whole(odd_cfg());
	split_blocks_equal_whole(wide_cfg());
}

/* Inference (saved == NULL) computes the same output as training. */
SKY_TEST(layer_inference_equals_training_forward)
{
	const sky_model_cfg cfgs[] = {small_cfg(), odd_cfg(), wide_cfg()};
	for (int k = 0; k < 3; k++)
		for (int blocks = 1; blocks <= 3; blocks++) {
			fixture f;
			fixture_init(&f, cfgs[k], blocks, 9);
			float *y2 = malloc(f.nx * sizeof(float));
			sky_layer_forward(&f.c, f.w, f.x, f.mask, f.y, f.saved, f.scratch, blocks);
			sky_layer_forward(&f.c, f.w, f.x, f.mask, y2, NULL, f.scratch, blocks);
			SKY_EXPECT_MSG(memcmp(f.y, y2, f.nx * sizeof(float)) == 0, "%s blocks %d",
				       f.c.name, blocks);
			free(y2);
			fixture_free(&f);
		}
}

/* Padding is hidden: changing a padded token's input does not change the
 * other tokens' outputs. */
SKY_TEST(layer_mask_hides_padding)
{
	fixture f;
	fixture_init(&f, small_cfg(), SKY_BLOCK_ALL, 11);
	sky_model_cfg *c = &f.c;
	float *y2 = malloc(f.nx * sizeof(float));
	sky_layer_forward(c, f.w, f.x, f.mask, f.y, NULL, f.scratch, SKY_BLOCK_ALL);
	size_t pad = (size_t)(2 * c->seq - 1) * c->hidden;
	for (int j = 0; j < c->hidden; j++)
		f.x[pad + j] += 5.0f;
	sky_layer_forward(c, f.w, f.x, f.mask, y2, NULL, f.scratch, SKY_BLOCK_ALL);
	SKY_EXPECT(memcmp(f.y, y2, pad * sizeof(float)) == 0);
	/* and without the mask it would have */
	sky_layer_forward(c, f.w, f.x, NULL, y2, NULL, f.scratch, SKY_BLOCK_ALL);
	sky_layer_forward(c, f.w, f.x, NULL, f.y, NULL, f.scratch, SKY_BLOCK_ALL);
	for (int j = 0; j < c->hidden; j++)
		f.x[pad + j] -= 5.0f;
	sky_layer_forward(c, f.w, f.x, NULL, y2, NULL, f.scratch, SKY_BLOCK_ALL);
	SKY_EXPECT(memcmp(f.y + (size_t)c->seq * c->hidden, y2 + (size_t)c->seq * c->hidden,
			  (size_t)c->hidden * sizeof(float)) != 0);
	free(y2);
	fixture_free(&f);
}

SKY_TEST(layer_tensor_table_matches_bind)
{
	sky_model_cfg c = small_cfg();
	sky_tensor_info t[SKY_LAYER_NTENSORS];
	SKY_EXPECT_EQ(sky_layer_tensors(&c, t), SKY_LAYER_NTENSORS);
	size_t np = (size_t)sky_model_layer_params(&c);
	SKY_EXPECT_EQ(t[15].offset + t[15].count, np);
	float *base = NULL;
	float dummy;
	base = &dummy;
	sky_layer_view v;
	sky_layer_bind(&c, base, &v);
	SKY_EXPECT(strcmp(t[0].name, "attention.self.query.weight") == 0);
	SKY_EXPECT_EQ(v.wqkv - base, t[0].offset);
	SKY_EXPECT_EQ(v.bqkv - base, t[3].offset);
	SKY_EXPECT_EQ(v.wo - base, t[6].offset);
	SKY_EXPECT_EQ(v.bo - base, t[7].offset);
	SKY_EXPECT_EQ(v.ln1_g - base, t[8].offset);
	SKY_EXPECT_EQ(v.ln1_b - base, t[9].offset);
	SKY_EXPECT_EQ(v.w1 - base, t[10].offset);
	SKY_EXPECT_EQ(v.b1 - base, t[11].offset);
	SKY_EXPECT_EQ(v.w2 - base, t[12].offset);
	SKY_EXPECT_EQ(v.b2 - base, t[13].offset);
	SKY_EXPECT_EQ(v.ln2_g - base, t[14].offset);
	SKY_EXPECT_EQ(v.ln2_b - base, t[15].offset);
	SKY_EXPECT(t[10].shape[0] == c.ffn && t[10].shape[1] == c.hidden);
	SKY_EXPECT(t[12].shape[0] == c.hidden && t[12].shape[1] == c.ffn);
	SKY_EXPECT(strcmp(t[15].name, "output.LayerNorm.bias") == 0);
}

SKY_TEST(layer_init_is_bert_like_and_deterministic)
{
	sky_model_cfg c;
	SKY_EXPECT_EQ(sky_model_preset("tiny", &c), 0);
	size_t np = (size_t)sky_model_layer_params(&c);
	float *a = malloc(np * sizeof(float)), *b = malloc(np * sizeof(float));
	sky_layer_init(&c, a, 42);
	sky_layer_init(&c, b, 42);
	SKY_EXPECT(memcmp(a, b, np * sizeof(float)) == 0);
	sky_layer_init(&c, b, 43);
	SKY_EXPECT(memcmp(a, b, np * sizeof(float)) != 0);
	sky_layer_view v;
	sky_layer_bind(&c, a, &v);
	double s = 0, s2 = 0;
	size_t n = (size_t)3 * c.hidden * c.hidden;
	for (size_t i = 0; i < n; i++)
		s += v.wqkv[i], s2 += (double)v.wqkv[i] * v.wqkv[i];
	SKY_EXPECT_NEAR(s / n, 0.0, 0.002);
	SKY_EXPECT_NEAR(sqrt(s2 / n), 0.02, 0.001);
	for (int j = 0; j < c.hidden; j++) {
		SKY_EXPECT(v.ln1_g[j] == 1.0f && v.ln2_g[j] == 1.0f);
		SKY_EXPECT(v.ln1_b[j] == 0.0f && v.bo[j] == 0.0f && v.b2[j] == 0.0f);
	}
	for (int j = 0; j < c.ffn; j++)
		SKY_EXPECT(v.b1[j] == 0.0f);
	free(a), free(b);
}

/* Kernels that differ from their _ref in how they compute. */
SKY_TEST(kernel_gemm_matches_ref_all_transposes)
{
	sky_rng r;
	sky_rng_seed(&r, 5);
	const int m = 7, n = 5, k = 9;
	float a[9 * 9], b[9 * 9], c1[7 * 6], c2[7 * 6];
	random_fill(a, 81, 1.0f, &r);
	random_fill(b, 81, 1.0f, &r);
	for (int ta = 0; ta < 2; ta++)
		for (int tb = 0; tb < 2; tb++) {
			int lda = ta ? m + 1 : k, ldb = tb ? k : n + 1;
			random_fill(c1, 42, 1.0f, &r);
			memcpy(c2, c1, sizeof c1);
			sky_k_gemm_f32(ta, tb, m, n, k, 0.5f, a, lda, b, ldb, 1.0f, c1, 6);
			sky_k_gemm_f32_ref(ta, tb, m, n, k, 0.5f, a, lda, b, ldb, 1.0f, c2, 6);
			for (int i = 0; i < 42; i++)
				SKY_EXPECT_NEAR(c1[i], c2[i], 1e-5 * (1 + fabsf(c2[i])));
		}
}

SKY_TEST(kernel_gelu_and_exp_match_libm)
{
	enum { N = 2001 };
	static float x[N], y1[N], y2[N], d1[N], d2[N];
	for (int i = 0; i < N; i++)
		x[i] = -10.0f + 20.0f * i / (N - 1);
	sky_k_gelu_f32(x, y1, N);
	sky_k_gelu_f32_ref(x, y2, N);
	for (int i = 0; i < N; i++) {
		d1[i] = d2[i] = 1.0f;
		/* A&S 7.1.26: |erf error| <= 1.5e-7, times |x|/2 in GELU */
		SKY_EXPECT_NEAR(y1[i], y2[i], 2e-7 * (1 + fabsf(x[i])));
	}
	sky_k_gelu_bwd_f32(x, d1, N);
	sky_k_gelu_bwd_f32_ref(x, d2, N);
	for (int i = 0; i < N; i++)
		SKY_EXPECT_NEAR(d1[i], d2[i], 1e-6 * (1 + fabsf(x[i])));
	for (int i = 0; i < N; i++)
		x[i] = -100.0f + 188.0f * i / (N - 1);
	sky_k_exp_f32(x, y1, N);
	for (int i = 0; i < N; i++) {
		float e = expf(x[i]);
		if (x[i] < -87.0f)
			SKY_EXPECT(y1[i] == 0.0f);
		else
			SKY_EXPECT_MSG(fabsf(y1[i] - e) <= 4e-7f * e, "exp(%g) %g vs %g", x[i], y1[i], e);
	}
}
