/* Splitting a set among owners (runtime/datasplit.c): every row to one
 * owner in range, IID shares within one row, Dirichlet shares skewed at a
 * small alpha and near even at a large one, the seed deciding, refusals. */
#include "sky_datasplit.h"
#include "sky_test.h"

#include <string.h>

#define ROWS 3000
static int32_t g_lab[ROWS], g_own[ROWS], g_own2[ROWS];

static void labels(void)
{
	for (int i = 0; i < ROWS; i++)
		g_lab[i] = i % 5;
}

/* the mean over owners of the largest label's share of the owner's rows */
static double dominance(const int32_t *own, int owners)
{
	int c[16][5];
	memset(c, 0, sizeof c);
	for (int i = 0; i < ROWS; i++)
		c[own[i]][g_lab[i]]++;
	double s = 0;
	for (int k = 0; k < owners; k++) {
		int n = 0, mx = 0;
		for (int l = 0; l < 5; l++) {
			n += c[k][l];
			mx = c[k][l] > mx ? c[k][l] : mx;
		}
		s += n ? (double)mx / n : 0;
	}
	return s / owners;
}

SKY_TEST(iid_and_dirichlet_shares)
{
	labels();
	SKY_EXPECT_EQ(sky_ds_split(g_lab, ROWS, 5, 7, 0.0, 3, 1, g_own, NULL), 0);
	int n[7] = {0};
	for (int i = 0; i < ROWS; i++) {
		SKY_EXPECT(g_own[i] >= 0 && g_own[i] < 7);
		n[g_own[i]]++;
	}
	for (int k = 0; k < 7; k++)
		SKY_EXPECT(n[k] == ROWS / 7 || n[k] == ROWS / 7 + 1);
	const double iid = dominance(g_own, 7);
	SKY_EXPECT_EQ(sky_ds_split(g_lab, ROWS, 5, 7, 0.1, 3, 1, g_own, NULL), 0);
	const double skew = dominance(g_own, 7);
	SKY_EXPECT_EQ(sky_ds_split(g_lab, ROWS, 5, 7, 1000.0, 3, 1, g_own, NULL), 0);
	const double flat = dominance(g_own, 7);
	SKY_EXPECT_MSG(iid < 0.25 && flat < 0.25 && skew > 0.6, "iid %g, alpha 1000 %g, alpha 0.1 %g", iid,
		       flat, skew);
	/* the seed decides: the same seed the same split, another another */
	SKY_EXPECT_EQ(sky_ds_split(g_lab, ROWS, 5, 7, 0.5, 11, 1, g_own, NULL), 0);
	SKY_EXPECT_EQ(sky_ds_split(g_lab, ROWS, 5, 7, 0.5, 11, 1, g_own2, NULL), 0);
	SKY_EXPECT(memcmp(g_own, g_own2, sizeof g_own) == 0);
	SKY_EXPECT_EQ(sky_ds_split(g_lab, ROWS, 5, 7, 0.5, 12, 1, g_own2, NULL), 0);
	SKY_EXPECT(memcmp(g_own, g_own2, sizeof g_own) != 0);
	/* a minimum share is met by redrawing */
	SKY_EXPECT_EQ(sky_ds_split(g_lab, ROWS, 5, 7, 0.5, 11, 200, g_own, NULL), 0);
	memset(n, 0, sizeof n);
	for (int i = 0; i < ROWS; i++)
		n[g_own[i]]++;
	for (int k = 0; k < 7; k++)
		SKY_EXPECT(n[k] >= 200);
}

SKY_TEST(bad_input_is_refused_with_the_reason)
{
	labels();
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_ds_split(g_lab, ROWS, 5, 0, 0.0, 1, 1, g_own, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "0 owners: give 1 to 1024") != NULL);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_ds_split(g_lab, 3, 5, 4, 0.0, 1, 1, g_own, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "3 rows cannot give 4 owners one each") != NULL);
	g_lab[17] = 9;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_ds_split(g_lab, ROWS, 5, 4, 0.5, 1, 1, g_own, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "row 17 has label 9, not in [0, 5)") != NULL);
	labels();
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_ds_split(g_lab, ROWS, 5, 7, 0.01, 1, 1000, g_own, &d), SKY_ERANGE);
	SKY_EXPECT(strstr(d.msg, "raise alpha or lower the minimum") != NULL);
}
