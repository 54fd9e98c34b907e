/* Optimizers: one step (and a second, for the state) against values
 * computed by hand from torch's formulas. */
#include "sky_test.h"

#include "sky_err.h"
#include "sky_optim.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

SKY_TEST(sgd_momentum_two_steps_by_hand)
{
	sky_optim_cfg o;
	sky_optim_default(&o, SKY_OPTIM_SGD);
	o.lr = 0.1f;
	o.momentum = 0.9f;
	o.weight_decay = 0.01f;
	float w[2] = {1.0f, -2.0f}, g[2] = {0.5f, 0.25f}, v[2] = {0, 0};
	sky_optim_sgd_step(&o, w, g, v, 2);
	/* g' = g + 0.01 w = (0.51, 0.23); v = g'; w -= 0.1 v */
	SKY_EXPECT_NEAR(v[0], 0.51, 1e-7);
	SKY_EXPECT_NEAR(v[1], 0.23, 1e-7);
	SKY_EXPECT_NEAR(w[0], 0.949, 1e-7);
	SKY_EXPECT_NEAR(w[1], -2.023, 1e-6);
	sky_optim_sgd_step(&o, w, g, v, 2);
	/* g' = (0.5 + 0.00949, 0.25 - 0.02023); v = 0.9 v + g' */
	SKY_EXPECT_NEAR(v[0], 0.9 * 0.51 + 0.50949, 1e-6);
	SKY_EXPECT_NEAR(v[1], 0.9 * 0.23 + 0.22977, 1e-6);
	SKY_EXPECT_NEAR(w[0], 0.949 - 0.1 * (0.459 + 0.50949), 1e-6);
	SKY_EXPECT_NEAR(w[1], -2.023 - 0.1 * (0.207 + 0.22977), 1e-6);
}

SKY_TEST(adamw_two_steps_by_hand)
{
	sky_optim_cfg o;
	sky_optim_default(&o, SKY_OPTIM_ADAMW);
	o.lr = 0.01f;
	o.weight_decay = 0.1f;
	float w[2] = {1.0f, -0.5f}, g[2] = {0.2f, -0.4f}, st[4] = {0};
	sky_optim_step(&o, w, g, st, 2, 1);
	/* step 1: m = 0.1 g, v = 0.001 g^2; mhat = g, vhat = g^2, so the
	 * update is lr * g / (|g| + eps) = lr * sign(g), after decay
	 * w *= 1 - lr * wd = 0.999 */
	SKY_EXPECT_NEAR(st[0], 0.02, 1e-8);
	/* (1 - 0.999f) is 0.00099998713 in float: a relative 1e-4 */
	SKY_EXPECT_NEAR(st[2], 0.001 * 0.04, 4e-9);
	SKY_EXPECT_NEAR(w[0], 0.999 - 0.01 * 0.2 / (0.2 + 1e-8), 1e-6);
	SKY_EXPECT_NEAR(w[1], -0.4995 + 0.01 * 0.4 / (0.4 + 1e-8), 1e-6);
	float w1 = w[0];
	float g2[2] = {0.1f, 0.0f};
	sky_optim_step(&o, w, g2, st, 2, 2);
	/* step 2 on w[0]: m = 0.9*0.02 + 0.1*0.1 = 0.028; v = 0.999*4e-5 +
	 * 0.001*0.01 = 4.996e-5; mhat = m / (1 - 0.81) = 0.147368;
	 * vhat = v / (1 - 0.998001) = 0.0249925; sqrt = 0.158090 */
	double mhat = 0.028 / 0.19, vhat = 4.996e-5 / (1 - 0.999 * 0.999);
	double expect = w1 * 0.999 - 0.01 * mhat / (sqrt(vhat) + 1e-8);
	SKY_EXPECT_NEAR(w[0], expect, 2e-6);
}

/* The loop as it was written before it had SIMD lanes: every lane of the
 * vector path must give its bits (the fleet and one board, and runs before
 * and after, compare weights byte for byte). */
static void adamw_scalar(const sky_optim_cfg *o, float *w, const float *g, float *m, float *v,
			 size_t n, long t)
{
	const float b1 = o->beta1, b2 = o->beta2, lr = o->lr, eps = o->eps;
	const float c1 = (float)(1.0 - pow(b1, (double)t));
	const float c2 = (float)sqrt(1.0 - pow(b2, (double)t));
	const float decay = 1.0f - lr * o->weight_decay;
	const float step = lr / c1;
	for (size_t i = 0; i < n; i++) {
		float gi = g[i];
		m[i] = b1 * m[i] + (1.0f - b1) * gi;
		v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
		w[i] = w[i] * decay - step * m[i] / (sqrtf(v[i]) / c2 + eps);
	}
}

SKY_TEST(adamw_same_bits_as_the_scalar_loop)
{
	enum { N = 16 * 37 + 5 };
	static float w[2][N], g[N], m[2][N], v[2][N];
	uint32_t x = 12345;
	for (int i = 0; i < N; i++) {
		/* values over many magnitudes, some gradients exactly 0 */
		x = x * 1664525u + 1013904223u;
		float u = (float)(x >> 8) / 16777216.0f - 0.5f;
		w[0][i] = w[1][i] = u * 2.0f;
		g[i] = i % 11 == 0 ? 0.0f : u * powf(10.0f, (float)(i % 9) - 6.0f);
	}
	sky_optim_cfg o;
	sky_optim_default(&o, SKY_OPTIM_ADAMW);
	o.lr = 2e-5f;
	o.weight_decay = 0.01f;
	for (long t = 1; t <= 3; t++) {
		sky_optim_adamw_step(&o, w[0], g, m[0], v[0], N, t);
		adamw_scalar(&o, w[1], g, m[1], v[1], N, t);
	}
	SKY_EXPECT(memcmp(w[0], w[1], sizeof w[0]) == 0);
	SKY_EXPECT(memcmp(m[0], m[1], sizeof m[0]) == 0);
	SKY_EXPECT(memcmp(v[0], v[1], sizeof v[0]) == 0);
}

SKY_TEST(clip_scales_to_max_norm)
{
	float g[2] = {3.0f, 4.0f};
	SKY_EXPECT_NEAR(sky_optim_clip(g, 2, 10.0f), 5.0, 1e-6);
	SKY_EXPECT(g[0] == 3.0f && g[1] == 4.0f); /* under the limit: untouched */
	SKY_EXPECT_NEAR(sky_optim_clip(g, 2, 1.0f), 5.0, 1e-6);
	SKY_EXPECT_NEAR(g[0], 0.6, 1e-6);
	SKY_EXPECT_NEAR(g[1], 0.8, 1e-6);
}

SKY_TEST(optim_names)
{
	sky_optim_kind k;
	SKY_EXPECT_EQ(sky_optim_parse("sgd", &k), 0);
	SKY_EXPECT_EQ(k, SKY_OPTIM_SGD);
	SKY_EXPECT_EQ(sky_optim_parse("adamw", &k), 0);
	SKY_EXPECT_EQ(k, SKY_OPTIM_ADAMW);
	SKY_EXPECT_EQ(sky_optim_parse("adam", &k), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_optim_parse(NULL, &k), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_optim_state_vectors(SKY_OPTIM_SGD), 1);
	SKY_EXPECT_EQ(sky_optim_state_vectors(SKY_OPTIM_ADAMW), 2);
	SKY_EXPECT(strcmp(sky_optim_name(SKY_OPTIM_ADAMW), "adamw") == 0);
}
