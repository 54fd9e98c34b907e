/* Classification metrics (runtime/clsmetrics.c) against figures worked by
 * hand (and as scikit-learn's classification_report gives them). */
#include "sky_test.h"

#include "sky_clsmetrics.h"

#include <math.h>

/* truth / prediction of 10 rows over 3 classes; class 2 is never
 * predicted, and a 4th class never occurs (left out of macro-F1) */
static const int k_truth[10] = {0, 0, 0, 0, 1, 1, 1, 2, 2, 0};
static const int k_pred[10] = {0, 0, 1, 0, 1, 1, 0, 1, 0, 0};

SKY_TEST(report_by_hand)
{
	int64_t cm[16];
	sky_clsm m;
	sky_clsm_init(&m, 4, cm);
	for (int i = 0; i < 10; i++) {
		float lg[4] = {0, 0, 0, 0};
		lg[k_pred[i]] = 2;
		SKY_EXPECT_EQ(sky_clsm_add(&m, k_truth[i], lg), k_pred[i]);
	}
	SKY_EXPECT_EQ(m.total, 10);
	SKY_EXPECT_NEAR(sky_clsm_accuracy(&m), 0.6, 1e-12);
	SKY_EXPECT_EQ(cm[0 * 4 + 0], 4);
	SKY_EXPECT_EQ(cm[0 * 4 + 1], 1);
	SKY_EXPECT_EQ(cm[1 * 4 + 0], 1);
	SKY_EXPECT_EQ(cm[2 * 4 + 1], 1);
	sky_clsm_class c;
	sky_clsm_class_get(&m, 0, &c); /* TP 4, predicted 6, support 5 */
	SKY_EXPECT_EQ(c.support, 5);
	SKY_EXPECT_EQ(c.predicted, 6);
	SKY_EXPECT_NEAR(c.precision, 4.0 / 6, 1e-12);
	SKY_EXPECT_NEAR(c.recall, 0.8, 1e-12);
	SKY_EXPECT_NEAR(c.f1, 2 * (4.0 / 6) * 0.8 / (4.0 / 6 + 0.8), 1e-12);
	sky_clsm_class_get(&m, 1, &c); /* TP 2, predicted 4, support 3 */
	SKY_EXPECT_NEAR(c.precision, 0.5, 1e-12);
	SKY_EXPECT_NEAR(c.recall, 2.0 / 3, 1e-12);
	sky_clsm_class_get(&m, 2, &c); /* never predicted: 0, not NaN */
	SKY_EXPECT(c.precision == 0 && c.recall == 0 && c.f1 == 0);
	double f0 = 2 * (4.0 / 6) * 0.8 / (4.0 / 6 + 0.8), f1 = 2 * 0.5 * (2.0 / 3) / (0.5 + 2.0 / 3);
	SKY_EXPECT_NEAR(sky_clsm_macro_f1(&m), (f0 + f1 + 0) / 3, 1e-12); /* class 3 left out */
	/* loss: each row's logits (2 at the prediction, 0 elsewhere over 4) */
	double right = log(exp(2.0) + 3) - 2, wrong = log(exp(2.0) + 3);
	SKY_EXPECT_NEAR(sky_clsm_loss(&m), (6 * right + 4 * wrong) / 10, 1e-12);
}

SKY_TEST(xent_is_stable)
{
	float lg[2] = {1000.0f, -1000.0f};
	SKY_EXPECT_NEAR(sky_clsm_xent(lg, 2, 0), 0, 1e-12);
	SKY_EXPECT_NEAR(sky_clsm_xent(lg, 2, 1), 2000, 1e-9);
	float eq[3] = {1, 1, 1};
	SKY_EXPECT_EQ(sky_clsm_argmax(eq, 3), 0);
	SKY_EXPECT_NEAR(sky_clsm_xent(eq, 3, 2), log(3.0), 1e-12);
	int64_t cm[4];
	sky_clsm m;
	sky_clsm_init(&m, 2, cm);
	SKY_EXPECT(sky_clsm_accuracy(&m) == 0 && sky_clsm_loss(&m) == 0 && sky_clsm_macro_f1(&m) == 0);
}
