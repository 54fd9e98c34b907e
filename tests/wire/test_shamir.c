#include "sky_test.h"

#include "sky_shamir.h"

#include <string.h>

static sky_sign_rng g_rng;

static void rng(void)
{
	if (!g_rng.ready)
		SKY_EXPECT_EQ(sky_sign_rng_init(&g_rng, "test-shamir", NULL), 0);
}

static void secret_make(uint8_t s[32])
{
	for (int i = 0; i < 32; i++)
		s[i] = (uint8_t)(i * 37 + 11);
}

/* Every t-subset of n shares (n = 5, t = 3: ten subsets) rebuilds it. */
SKY_TEST(any_t_shares_rebuild_the_secret)
{
	rng();
	uint8_t s[32], back[32];
	sky_shamir_share sh[5], pick[3];
	secret_make(s);
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_shamir_split(s, 5, 3, &g_rng, sh, &d), 0);
	int subsets = 0;
	for (int a = 0; a < 5; a++)
		for (int b = a + 1; b < 5; b++)
			for (int c = b + 1; c < 5; c++) {
				pick[0] = sh[c], pick[1] = sh[a], pick[2] = sh[b];
				memset(back, 0, sizeof back);
				SKY_EXPECT_EQ(sky_shamir_combine(pick, 3, back, &d), 0);
				SKY_EXPECT_MSG(memcmp(back, s, 32) == 0, "subset %d%d%d", a, b, c);
				subsets++;
			}
	SKY_EXPECT_EQ(subsets, 10);
	/* all five, consistent, rebuild it too */
	SKY_EXPECT_EQ(sky_shamir_combine(sh, 5, back, &d), 0);
	SKY_EXPECT(memcmp(back, s, 32) == 0);
	/* a share is not the secret */
	for (int i = 0; i < 5; i++)
		SKY_EXPECT(memcmp(sh[i].y, s, 32) != 0);
}

/* t - 1 shares give some other value, as does one altered share. */
SKY_TEST(too_few_or_wrong_shares_give_another_secret)
{
	rng();
	uint8_t s[32], back[32];
	sky_shamir_share sh[4];
	secret_make(s);
	SKY_EXPECT_EQ(sky_shamir_split(s, 4, 3, &g_rng, sh, NULL), 0);
	SKY_EXPECT_EQ(sky_shamir_combine(sh, 2, back, NULL), 0);
	SKY_EXPECT(memcmp(back, s, 32) != 0);
	sh[1].y[7] ^= 1;
	SKY_EXPECT_EQ(sky_shamir_combine(sh, 3, back, NULL), 0);
	SKY_EXPECT(memcmp(back, s, 32) != 0);
	/* and only byte 7 is off: the bytes are independent polynomials */
	for (int i = 0; i < 32; i++)
		if (i != 7)
			SKY_EXPECT(back[i] == s[i]);
}

/* Threshold 1 is a copy; n = t = 255 is the largest split. */
SKY_TEST(threshold_edges)
{
	rng();
	uint8_t s[32], back[32];
	static sky_shamir_share sh[255];
	secret_make(s);
	SKY_EXPECT_EQ(sky_shamir_split(s, 3, 1, &g_rng, sh, NULL), 0);
	for (int i = 0; i < 3; i++)
		SKY_EXPECT(memcmp(sh[i].y, s, 32) == 0);
	SKY_EXPECT_EQ(sky_shamir_split(s, 255, 255, &g_rng, sh, NULL), 0);
	SKY_EXPECT_EQ(sh[254].x, 255);
	SKY_EXPECT_EQ(sky_shamir_combine(sh, 255, back, NULL), 0);
	SKY_EXPECT(memcmp(back, s, 32) == 0);
	SKY_EXPECT_EQ(sky_shamir_combine(sh, 254, back, NULL), 0);
	SKY_EXPECT(memcmp(back, s, 32) != 0);
}

SKY_TEST(bad_arguments_are_refused_with_the_reason)
{
	rng();
	uint8_t s[32] = {0}, back[32];
	sky_shamir_share sh[3];
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_shamir_split(s, 3, 4, &g_rng, sh, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "threshold 4 of 3") != NULL);
	SKY_EXPECT_EQ(sky_shamir_split(s, 256, 2, &g_rng, sh, NULL), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_shamir_split(s, 3, 0, &g_rng, sh, NULL), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_shamir_split(s, 3, 2, &g_rng, sh, NULL), 0);
	sh[2].x = sh[0].x;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_shamir_combine(sh, 3, back, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "shares 0 and 2 both have x = 1") != NULL);
	sh[2].x = 0;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_shamir_combine(sh, 3, back, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "x = 0") != NULL);
	SKY_EXPECT_EQ(sky_shamir_combine(sh, 0, back, NULL), SKY_EINVAL);
}
