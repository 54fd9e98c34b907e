#include "sky_test.h"

#include "sky_dropout.h"

#include <string.h>

static sky_dropout ctx(float ph, float pa, uint64_t seed, uint64_t step, uint32_t micro)
{
	sky_model_cfg c;
	memset(&c, 0, sizeof c);
	c.hidden_drop = ph;
	c.attn_drop = pa;
	sky_dropout d;
	memset(&d, 0, sizeof d);
	SKY_EXPECT(sky_dropout_make(&d, &c, seed, step, micro) == &d);
	return d;
}

/* About 1 - p of the elements are kept, the kept ones scaled by 1/(1-p),
 * the rest zero. 100000 draws: the kept count's standard deviation is
 * ~145 at p = 0.1, so +-1% (1000) is about 7 deviations. */
SKY_TEST(keeps_one_minus_p_and_scales_them)
{
	static float x[100000];
	const float ps[] = {0.1f, 0.5f, 0.9f};
	for (int k = 0; k < 3; k++) {
		sky_dropout d = ctx(ps[k], 0, 7, 1, 0);
		for (int i = 0; i < 100000; i++)
			x[i] = 2.0f;
		sky_dropout_apply(&d, ps[k], 0, SKY_DROP_FFN_OUT, 0, x, 100000);
		int kept = 0;
		for (int i = 0; i < 100000; i++) {
			SKY_EXPECT(x[i] == 0.0f || x[i] == 2.0f * (1.0f / (1.0f - ps[k])));
			kept += x[i] != 0.0f;
			SKY_EXPECT(sky_dropout_keep(&d, ps[k], 0, SKY_DROP_FFN_OUT, (uint64_t)i) ==
				   (x[i] != 0.0f));
		}
		int want = (int)(100000 * (1 - ps[k]));
		SKY_EXPECT_MSG(kept > want - 1000 && kept < want + 1000, "p %g: kept %d", ps[k], kept);
	}
}

/* An element's mask depends on its index, not on how the tensor was cut:
 * a stage that computes rows 300.. draws what one board draws there. */
SKY_TEST(masks_are_addressed_by_element)
{
	static float whole[1000], parts[1000];
	sky_dropout d = ctx(0.3f, 0, 99, 5, 2);
	for (int i = 0; i < 1000; i++)
		whole[i] = parts[i] = (float)i;
	sky_dropout_apply(&d, 0.3f, 4, SKY_DROP_ATTN_OUT, 0, whole, 1000);
	sky_dropout_apply(&d, 0.3f, 4, SKY_DROP_ATTN_OUT, 0, parts, 301);
	sky_dropout_apply(&d, 0.3f, 4, SKY_DROP_ATTN_OUT, 301, parts + 301, 699);
	SKY_EXPECT(memcmp(whole, parts, sizeof whole) == 0);
}

/* Another seed, step, micro-batch, layer or site: another mask (the
 * masks of 4096 elements at p = 0.5 agree on about half of them). */
SKY_TEST(every_key_part_changes_the_mask)
{
	sky_dropout base = ctx(0.5f, 0.5f, 1, 1, 0);
	sky_dropout other[3] = {ctx(0.5f, 0.5f, 2, 1, 0), ctx(0.5f, 0.5f, 1, 2, 0),
				ctx(0.5f, 0.5f, 1, 1, 1)};
	for (int k = 0; k < 5; k++) {
		int same = 0;
		for (uint64_t i = 0; i < 4096; i++) {
			int a = sky_dropout_keep(&base, 0.5f, 0, SKY_DROP_EMBED, i), b;
			if (k < 3)
				b = sky_dropout_keep(&other[k], 0.5f, 0, SKY_DROP_EMBED, i);
			else if (k == 3)
				b = sky_dropout_keep(&base, 0.5f, 1, SKY_DROP_EMBED, i);
			else
				b = sky_dropout_keep(&base, 0.5f, 0, SKY_DROP_POOLED, i);
			same += a == b;
		}
		SKY_EXPECT_MSG(same > 1748 && same < 2348, "variant %d: %d of 4096 agree", k, same);
	}
}

/* No probability, no context: nothing changes; the masks are integer
 * arithmetic, so this count is the same on every machine (rechecked under
 * qemu by make check). */
SKY_TEST(off_when_zero_and_the_same_everywhere)
{
	float x[4] = {1, 2, 3, 4};
	sky_dropout d = ctx(0.2f, 0, 3, 1, 0);
	sky_dropout_apply(NULL, 0.5f, 0, SKY_DROP_EMBED, 0, x, 4);
	sky_dropout_apply(&d, 0.0f, 0, SKY_DROP_EMBED, 0, x, 4);
	SKY_EXPECT(x[0] == 1 && x[1] == 2 && x[2] == 3 && x[3] == 4);
	sky_model_cfg c;
	memset(&c, 0, sizeof c);
	SKY_EXPECT(sky_dropout_make(&d, &c, 1, 1, 0) == NULL);
	uint64_t h = 0;
	for (uint64_t i = 0; i < 64; i++)
		h = h << 1 | (uint64_t)sky_dropout_keep(&d, 0.5f, 2, SKY_DROP_ATTN_PROBS, i);
	SKY_EXPECT_MSG(h == 0x022d61eb05839e80ull, "mask bits %016llx", (unsigned long long)h);
}
