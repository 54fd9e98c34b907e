/* The rows each training step reads (runtime/trainorder.c): each epoch a
 * permutation drawn from (seed, epoch), steps taking consecutive runs of
 * it, the leftover rows not read, the same rows for the same (seed, step)
 * wherever it is asked, refusals. */
#include "sky_trainorder.h"
#include "sky_err.h"
#include "sky_test.h"

#include <string.h>

#define ROWS 103 /* 103 = 4 steps of 3 x 8 rows + 7 left over */
static uint32_t g_p[ROWS], g_q[ROWS];

SKY_TEST(each_epoch_is_a_permutation_of_its_own)
{
	sky_trainorder_perm(g_p, ROWS, 42, 0);
	sky_trainorder_perm(g_q, ROWS, 42, 1);
	int seen[ROWS] = {0}, same = 0;
	for (int i = 0; i < ROWS; i++) {
		SKY_EXPECT(g_p[i] < ROWS);
		seen[g_p[i]]++;
		same += g_p[i] == g_q[i];
	}
	for (int i = 0; i < ROWS; i++)
		SKY_EXPECT_EQ(seen[i], 1);
	SKY_EXPECT(same < ROWS / 4); /* epoch 1's order is not epoch 0's */
	sky_trainorder_perm(g_q, ROWS, 42, 0);
	SKY_EXPECT(memcmp(g_p, g_q, sizeof g_p) == 0);
	sky_trainorder_perm(g_q, ROWS, 43, 0);
	SKY_EXPECT(memcmp(g_p, g_q, sizeof g_p) != 0);
}

SKY_TEST(steps_take_consecutive_runs_and_drop_the_rest)
{
	static uint32_t buf[ROWS];
	sky_trainorder o;
	SKY_EXPECT_EQ(sky_trainorder_init(&o, ROWS, 7, 8, 3, buf), 0);
	SKY_EXPECT_EQ(o.spe, 4);
	/* step 5 is step 1 of epoch 1: rows 24.. of epoch 1's order */
	sky_trainorder_perm(g_p, ROWS, 7, 1);
	const uint32_t *r = sky_trainorder_rows(&o, 5, 0);
	SKY_EXPECT(memcmp(r, g_p + 24, 8 * sizeof *r) == 0);
	r = sky_trainorder_rows(&o, 5, 2);
	SKY_EXPECT(memcmp(r, g_p + 40, 8 * sizeof *r) == 0);
	SKY_EXPECT_EQ(sky_trainorder_epoch(&o, 5), 1);
	/* back to epoch 0 redraws its order */
	sky_trainorder_perm(g_q, ROWS, 7, 0);
	r = sky_trainorder_rows(&o, 3, 2);
	SKY_EXPECT(memcmp(r, g_q + 88, 8 * sizeof *r) == 0);
	/* an epoch's last step ends at row 96: rows 96..102 are not read */
	int read[ROWS] = {0};
	for (long s = 0; s < 4; s++)
		for (int i = 0; i < 3; i++) {
			r = sky_trainorder_rows(&o, s, i);
			for (int k = 0; k < 8; k++)
				read[r[k]]++;
		}
	int n = 0;
	for (int i = 0; i < ROWS; i++) {
		SKY_EXPECT(read[i] <= 1);
		n += read[i];
	}
	SKY_EXPECT_EQ(n, 96);
	for (int i = 96; i < ROWS; i++)
		SKY_EXPECT_EQ(read[g_q[i]], 0);
}

SKY_TEST(refusals)
{
	static uint32_t buf[ROWS];
	sky_trainorder o;
	SKY_EXPECT_EQ(sky_trainorder_init(&o, ROWS, 7, 0, 3, buf), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_trainorder_init(&o, ROWS, 7, 8, 0, buf), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_trainorder_init(&o, ROWS, 7, 52, 2, buf), SKY_EINVAL); /* < one step */
	SKY_EXPECT_EQ(sky_trainorder_init(&o, 0x100000000ll, 7, 8, 1, buf), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_trainorder_init(&o, ROWS, 7, 8, 1, NULL), SKY_EINVAL);
}
