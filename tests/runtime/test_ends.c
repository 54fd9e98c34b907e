/* The portable fp32 ends of an int8 model: embeddings and head from
 * integer-built weights hash to one committed value on every machine (this
 * test runs natively and under qemu-aarch64, with and without FMA in the
 * CPU), and stay within a few ulps of the OpenBLAS/libm versions. */
#include "sky_test.h"

#include "sky_embed.h"
#include "sky_err.h"
#include "sky_ends.h"
#include "sky_head.h"
#include "sky_rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t fnv1a(const void *p, size_t n, uint64_t h)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	return h;
}

/* From running this test natively (x86-64 with FMA); the same value must
 * come out under qemu-aarch64. */
#define ENDS_HASH 0x4b58a463c88646ffull

SKY_TEST(ends_same_bits_everywhere_and_close_to_the_reference)
{
	sky_model_cfg c;
	sky_model_preset("tiny", &c);
	c.batch = 2;
	const int H = c.hidden, T = (int)sky_model_tokens(&c);
	size_t ne = (size_t)sky_model_embed_params(&c), nh = (size_t)sky_model_head_params(&c);
	float *we = malloc(ne * 4), *wh = malloc(nh * 4), *y = malloc((size_t)T * H * 4);
	float *yr = malloc((size_t)T * H * 4), *scratch = malloc(sky_head_scratch_floats(&c) * 4);
	float lg[2][8], lr[16];
	int32_t ids[64];
	sky_rng r;
	sky_rng_seed(&r, 77);
	/* weights k / 256 from an integer RNG: nothing machine-dependent goes in */
	for (size_t i = 0; i < ne; i++)
		we[i] = ((int)sky_rng_below(&r, 513) - 256) / 256.0f;
	for (size_t i = 0; i < nh; i++)
		wh[i] = ((int)sky_rng_below(&r, 129) - 64) / 1024.0f;
	for (int t = 0; t < T; t++)
		ids[t] = (int32_t)sky_rng_below(&r, (uint32_t)c.vocab);
	SKY_EXPECT_EQ(sky_ends_embed(&c, we, ids, y), 0);
	for (int b = 0; b < c.batch; b++)
		sky_ends_head(&c, wh, y + (size_t)b * c.seq * H, lg[b], scratch);
	uint64_t h = fnv1a(y, (size_t)T * H * 4, 1469598103934665603ull);
	for (int b = 0; b < c.batch; b++)
		h = fnv1a(lg[b], (size_t)c.classes * 4, h);
	SKY_EXPECT_MSG(h == ENDS_HASH, "ends hash 0x%016llx, expected 0x%016llx",
		       (unsigned long long)h, (unsigned long long)ENDS_HASH);
	/* close to sky_embed_forward / sky_head_forward */
	SKY_EXPECT_EQ(sky_embed_forward(&c, we, ids, NULL, yr, NULL), 0);
	double e = 0;
	for (int i = 0; i < T * H; i++)
		e = fmax(e, fabs(y[i] - yr[i]));
	SKY_EXPECT_MSG(e < 1e-5, "embeddings differ by %g", e);
	SKY_EXPECT_EQ(sky_head_forward(&c, wh, y, NULL, lr, NULL, NULL, scratch), 0);
	for (int b = 0; b < c.batch; b++)
		for (int k = 0; k < c.classes; k++)
			SKY_EXPECT_NEAR(lg[b][k], lr[b * c.classes + k], 1e-6);
	/* tanh against libm's over its range */
	double worst = 0;
	for (double x = -25; x <= 25; x += 0.0137)
		worst = fmax(worst, fabs(sky_ends_tanh(x) - tanh(x)));
	for (double x = 1e-9; x < 1e-3; x *= 1.7)
		worst = fmax(worst, fabs(sky_ends_tanh(x) - tanh(x)) / x);
	SKY_EXPECT_MSG(worst < 1e-14, "tanh error %g", worst);
	ids[5] = c.vocab;
	SKY_EXPECT_EQ(sky_ends_embed(&c, we, ids, y), SKY_EINVAL);
	free(we), free(wh), free(y), free(yr), free(scratch);
}
