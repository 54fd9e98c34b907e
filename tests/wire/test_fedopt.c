/* A federated round's server side (runtime/wire/fedopt.c): the server
 * optimizers worked by hand, FedAvg's mean exact and order-free, one
 * owner's weights taken as they are, FedProx's term, DP clipping and
 * noise, refusals with their reasons, and the global model's bits the same
 * on every machine (make check runs this under qemu on two Arm cores). */
#include "sky_fedopt.h"
#include "sky_fedsum.h"
#include "sky_test.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

static int near(double a, double b, double rel)
{
	return fabs(a - b) <= rel * fabs(b) + 1e-30;
}

SKY_TEST(server_optimizers_worked_by_hand)
{
	sky_fedopt s;
	float st[2 * 2];
	/* FedAvg with lr 1: the mean itself, bits and all */
	sky_fedopt_opts o = sky_fedopt_defaults(SKY_FEDOPT_AVG);
	float w[2] = {1.0f, -2.0f};
	const float mean[2] = {1.1f, 3.0e-12f};
	SKY_EXPECT_EQ(sky_fedopt_init(&s, &o, 2, NULL, NULL), 0);
	SKY_EXPECT_EQ(sky_fedopt_step(&s, w, mean, NULL), 0);
	SKY_EXPECT(memcmp(w, mean, sizeof w) == 0 && s.rounds == 1);
	/* lr 0.5: halfway */
	o.lr = 0.5f;
	w[0] = 1.0f;
	w[1] = -2.0f;
	SKY_EXPECT_EQ(sky_fedopt_init(&s, &o, 2, NULL, NULL), 0);
	const float m2[2] = {3.0f, 2.0f};
	SKY_EXPECT_EQ(sky_fedopt_step(&s, w, m2, NULL), 0);
	SKY_EXPECT(w[0] == 2.0f && w[1] == 0.0f);
	/* FedAvgM, beta 0.5, lr 1: round 1 delta 2 -> m 2, w 3; round 2 mean 3
	 * (delta 0) -> m 1, w 4 */
	o = sky_fedopt_defaults(SKY_FEDOPT_AVGM);
	o.beta = 0.5f;
	SKY_EXPECT_EQ(sky_fedopt_init(&s, &o, 1, st, NULL), 0);
	float wm = 1.0f, a1 = 3.0f, a2 = 3.0f;
	SKY_EXPECT_EQ(sky_fedopt_step(&s, &wm, &a1, NULL), 0);
	SKY_EXPECT(wm == 3.0f && st[0] == 2.0f);
	SKY_EXPECT_EQ(sky_fedopt_step(&s, &wm, &a2, NULL), 0);
	SKY_EXPECT(wm == 4.0f && st[0] == 1.0f);
	/* FedAdam, defaults: delta 0.5 -> m 0.05, v 0.0025, w += 0.01 * 0.05 /
	 * (0.05 + 0.001) */
	o = sky_fedopt_defaults(SKY_FEDOPT_ADAM);
	SKY_EXPECT_EQ(sky_fedopt_init(&s, &o, 1, st, NULL), 0);
	float wa = 0.0f, ma = 0.5f;
	SKY_EXPECT_EQ(sky_fedopt_step(&s, &wa, &ma, NULL), 0);
	SKY_EXPECT_MSG(near(st[0], 0.05, 1e-6) && near(st[1], 0.0025, 1e-6), "m %g v %g",
		       (double)st[0], (double)st[1]);
	SKY_EXPECT_MSG(near(wa, 0.01 * 0.05 / 0.051, 1e-6), "w %.9g", (double)wa);
	/* round 2, delta -wa + 0.5 again: m = 0.9 m + 0.1 d, v likewise */
	const double d2 = 0.5 - (double)wa, m_2 = 0.9 * 0.05 + 0.1 * d2,
		     v_2 = 0.99 * 0.0025 + 0.01 * d2 * d2;
	const double w2 = (double)wa + 0.01 * m_2 / (sqrt(v_2) + 0.001);
	SKY_EXPECT_EQ(sky_fedopt_step(&s, &wa, &ma, NULL), 0);
	SKY_EXPECT_MSG(near(wa, w2, 1e-5), "w %.9g, want %.9g", (double)wa, w2);
}

#define NOWN 3
#define NW 257

static void owner_weights(int k, float *x)
{
	uint32_t r = 0x9e3779b9u * (uint32_t)(k + 1);
	for (int i = 0; i < NW; i++) {
		r = r * 1664525u + 1013904223u;
		x[i] = ((float)(r >> 8) / 16777216.0f - 0.5f) * 4.0f * (float)(k + 1);
	}
	x[7] = 1e-30f; /* tiny values exist in real weights */
}

SKY_TEST(fedavg_mean_is_exact_and_order_free)
{
	static float x[NOWN][NW], out[NW], out2[NW];
	static uint64_t scratch[2 * NW];
	const uint32_t w[NOWN] = {100, 37, 4000};
	for (int k = 0; k < NOWN; k++)
		owner_weights(k, x[k]);
	const float *p[NOWN] = {x[0], x[1], x[2]}, *q[NOWN] = {x[2], x[0], x[1]};
	const uint32_t wq[NOWN] = {4000, 100, 37};
	SKY_EXPECT_EQ(sky_fedavg_mean(p, w, NOWN, NW, 16.0f, out, scratch, NULL), 0);
	SKY_EXPECT_EQ(sky_fedavg_mean(q, wq, NOWN, NW, 16.0f, out2, scratch, NULL), 0);
	SKY_EXPECT(memcmp(out, out2, sizeof out) == 0);
	/* against a double reference: within one float rounding plus the
	 * fixed point's 2^-bits */
	int bits;
	SKY_EXPECT_EQ(sky_fx_bits(16.0f, 4137, &bits, NULL), 0);
	for (int i = 0; i < NW; i++) {
		double ref = 0;
		for (int k = 0; k < NOWN; k++)
			ref += (double)w[k] * (double)x[k][i];
		ref /= 4137.0;
		SKY_EXPECT_MSG(fabs(out[i] - ref) <= fabs(ref) * 0x1p-24 + ldexp(1.0, -bits),
			       "element %d: %.9g, want %.9g", i, (double)out[i], ref);
	}
	/* one owner: its weights as they are, the tiny one too */
	SKY_EXPECT_EQ(sky_fedavg_mean(p, w, 1, NW, 16.0f, out, scratch, NULL), 0);
	SKY_EXPECT(memcmp(out, x[0], sizeof out) == 0 && out[7] == 1e-30f);
}

SKY_TEST(fedprox_adds_the_proximal_gradient)
{
	float g[3] = {1.0f, 0.0f, -1.0f};
	const float w[3] = {2.0f, 1.0f, 0.0f}, w0[3] = {1.0f, 1.0f, 1.0f};
	SKY_EXPECT_EQ(sky_fedprox_add(g, w, w0, 3, 0.5f, NULL), 0);
	SKY_EXPECT(g[0] == 1.5f && g[1] == 0.0f && g[2] == -1.5f);
	SKY_EXPECT_EQ(sky_fedprox_add(g, w, w0, 3, 0.0f, NULL), 0);
	SKY_EXPECT(g[0] == 1.5f);
}

SKY_TEST(dp_clip_bounds_the_norm)
{
	static float x[1000];
	for (int trial = 0; trial < 50; trial++) {
		uint32_t r = 12345u + (uint32_t)trial;
		const int n = 1 + trial * 19;
		for (int i = 0; i < n; i++) {
			r = r * 1664525u + 1013904223u;
			x[i] = ((float)(r >> 8) / 16777216.0f - 0.5f) * (float)(1 << (trial % 20));
		}
		double before, after = 0;
		const float clip = 0.1f + 0.37f * (float)trial;
		SKY_EXPECT_EQ(sky_dp_clip(x, (size_t)n, clip, &before, NULL), 0);
		for (int i = 0; i < n; i++)
			after += (double)x[i] * x[i];
		after = sqrt(after);
		SKY_EXPECT_MSG(after <= clip, "trial %d: norm %.17g above clip %.9g", trial, after,
			       (double)clip);
		if (before > clip)
			SKY_EXPECT(after > clip * (1 - 1e-5));
		else
			SKY_EXPECT(after == before);
	}
}

SKY_TEST(dp_noise_has_its_deviation_and_follows_the_seed)
{
	enum { N = 200000 };
	static float x[N], y[N];
	unsigned char seed[32];
	for (int i = 0; i < 32; i++)
		seed[i] = (unsigned char)(i * 7 + 1);
	memset(x, 0, sizeof x);
	SKY_EXPECT_EQ(sky_dp_noise(x, N, 2.5, seed, 3, NULL), 0);
	double s = 0, s2 = 0;
	for (int i = 0; i < N; i++) {
		s += x[i];
		s2 += (double)x[i] * x[i];
	}
	const double mean = s / N, sd = sqrt(s2 / N - mean * mean);
	/* the seed is fixed, so these are fixed numbers; the bounds are about
	 * 5 standard errors of a true N(0, 2.5^2) sample of this size */
	SKY_EXPECT_MSG(fabs(mean) < 0.03 && fabs(sd - 2.5) < 0.02, "mean %g sd %g", mean, sd);
	memset(y, 0, sizeof y);
	SKY_EXPECT_EQ(sky_dp_noise(y, N, 2.5, seed, 3, NULL), 0);
	SKY_EXPECT(memcmp(x, y, sizeof x) == 0);
	memset(y, 0, sizeof y);
	SKY_EXPECT_EQ(sky_dp_noise(y, N, 2.5, seed, 4, NULL), 0);
	int same = 0;
	for (int i = 0; i < N; i++)
		same += x[i] == y[i];
	SKY_EXPECT(same < 10);
	SKY_EXPECT_EQ(sky_dp_noise(y, N, 0.0, seed, 4, NULL), 0); /* no noise: unchanged */
	SKY_EXPECT(memcmp(x, y, sizeof x) != 0);
}

SKY_TEST(bad_options_are_refused_with_the_reason)
{
	sky_fedopt s;
	sky_diag d;
	float st[4], v[2] = {0, 0}, m[2] = {0, NAN};
	sky_fedopt_opts o = sky_fedopt_defaults(SKY_FEDOPT_ADAM);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_fedopt_init(&s, &o, 2, NULL, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "adam needs 2 x 2 floats of state") != NULL);
	o.b2 = 1.0f;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_fedopt_init(&s, &o, 2, st, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "b2 1 must be in [0, 1)") != NULL);
	o = sky_fedopt_defaults(SKY_FEDOPT_AVGM);
	o.lr = -1.0f;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_fedopt_init(&s, &o, 2, st, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "server learning rate -1") != NULL);
	o = sky_fedopt_defaults(SKY_FEDOPT_AVG);
	SKY_EXPECT_EQ(sky_fedopt_init(&s, &o, 2, NULL, NULL), 0);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_fedopt_step(&s, v, m, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "aggregate element 1 is nan") != NULL && v[0] == 0.0f);
	sky_fedopt_kind k;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_fedopt_parse("sgd", &k, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "'sgd' is not one of avg, avgm, adam") != NULL);
	SKY_EXPECT(sky_fedopt_parse("avgm", &k, NULL) == 0 && k == SKY_FEDOPT_AVGM);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_dp_clip(v, 2, 0.0f, NULL, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "DP clip 0") != NULL);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_fedprox_add(v, v, v, 2, -0.1f, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "FedProx mu -0.1") != NULL);
	const float *p[1] = {v};
	const uint32_t w0[1] = {0};
	uint64_t scr[4];
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_fedavg_mean(p, w0, 1, 2, 1.0f, m, scr, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "owner 0 weighs 0 samples") != NULL);
	unsigned char seed[32] = {0};
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_dp_noise(v, 2, -1.0, seed, 0, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "DP noise deviation -1") != NULL);
}

/* Five rounds of FedAdam over three owners' weights: the global model's
 * hash is the value first seen on x86-64; the qemu legs recompute it. */
SKY_TEST(the_global_model_has_the_same_bits_on_every_machine)
{
	static float x[NOWN][NW], g[NW], mean[NW], st[2 * NW];
	static uint64_t scratch[2 * NW];
	const uint32_t w[NOWN] = {100, 37, 4000};
	sky_fedopt s;
	sky_fedopt_opts o = sky_fedopt_defaults(SKY_FEDOPT_ADAM);
	SKY_EXPECT_EQ(sky_fedopt_init(&s, &o, NW, st, NULL), 0);
	memset(g, 0, sizeof g);
	for (int r = 0; r < 5; r++) {
		for (int k = 0; k < NOWN; k++) {
			owner_weights(k + r, x[k]);
			for (int i = 0; i < NW; i++)
				x[k][i] = g[i] + 0.01f * x[k][i];
		}
		const float *p[NOWN] = {x[0], x[1], x[2]};
		SKY_EXPECT_EQ(sky_fedavg_mean(p, w, NOWN, NW, 16.0f, mean, scratch, NULL), 0);
		SKY_EXPECT_EQ(sky_fedopt_step(&s, g, mean, NULL), 0);
	}
	uint64_t h = 1469598103934665603ull; /* FNV-1a, 64-bit */
	for (int i = 0; i < NW; i++) {
		uint32_t u;
		memcpy(&u, &g[i], 4);
		for (int b = 0; b < 4; b++)
			h = (h ^ ((u >> (8 * b)) & 0xff)) * 1099511628211ull;
	}
	SKY_EXPECT_MSG(h == 0xad511f69dc87bea7ull, "global model %016llx", (unsigned long long)h);
}
