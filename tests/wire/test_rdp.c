/* The RDP accountant (runtime/wire/rdp.c) against an independent 60-digit
 * reference (tools/golden/rdp_ref.py, its output below), the Gaussian
 * mechanism's closed form, composition and the conversion's properties. */
#include "sky_rdp.h"
#include "sky_test.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* tools/golden/rdp_ref.py */
static const struct { double q, z; int order; double rdp; } k_rdp[] = {
	{0.01, 1.1, 2, 0.00012851008160516181},
	{0.01, 1.1, 32, 8.4694164336759261},
	{0.1, 2.0, 8, 0.013725430103219919},
	{0.5, 0.8, 3, 1.3819536451436085},
	{0.3, 4.0, 256, 6.79130601431023},
};
static const struct { double q, z; uint64_t rounds; double delta, eps; int order; } k_eps[] = {
	{0.01, 1.1, 1000, 1e-05, 1.7252908180449549, 9},
	{0.1, 1.0, 50, 1e-05, 6.0214919768356907, 4},
	{1.0, 2.0, 10, 1e-06, 8.8553899931630138, 4},
	{0.3, 0.7, 20, 0.001, 14.95550567039629, 2},
};

static int close_rel(double a, double b, double tol)
{
	return fabs(a - b) <= tol * fabs(b);
}

SKY_TEST(one_step_matches_the_high_precision_reference)
{
	for (size_t i = 0; i < sizeof k_rdp / sizeof k_rdp[0]; i++) {
		double r = -1;
		SKY_EXPECT_EQ(sky_rdp_sgm(k_rdp[i].q, k_rdp[i].z, k_rdp[i].order, &r, NULL), 0);
		SKY_EXPECT_MSG(close_rel(r, k_rdp[i].rdp, 1e-9), "q %g z %g order %d: %.17g, want %.17g",
			       k_rdp[i].q, k_rdp[i].z, k_rdp[i].order, r, k_rdp[i].rdp);
	}
}

SKY_TEST(epsilon_matches_the_reference_with_its_order)
{
	for (size_t i = 0; i < sizeof k_eps / sizeof k_eps[0]; i++) {
		sky_rdp a;
		sky_rdp_init(&a);
		SKY_EXPECT_EQ(sky_rdp_add(&a, k_eps[i].q, k_eps[i].z, k_eps[i].rounds, NULL), 0);
		double e = -1;
		int order = 0;
		SKY_EXPECT_EQ(sky_rdp_epsilon(&a, k_eps[i].delta, &e, &order, NULL), 0);
		SKY_EXPECT_MSG(close_rel(e, k_eps[i].eps, 1e-9) && order == k_eps[i].order,
			       "case %zu: eps %.17g at order %d, want %.17g at %d", i, e, order,
			       k_eps[i].eps, k_eps[i].order);
	}
}

/* q = 1: the Gaussian mechanism, RDP a / (2 z^2) at every order */
SKY_TEST(without_sampling_it_is_the_gaussian_mechanism)
{
	for (int o = SKY_RDP_MIN_ORDER; o <= SKY_RDP_MAX_ORDER; o += 37) {
		double r;
		SKY_EXPECT_EQ(sky_rdp_sgm(1.0, 1.5, o, &r, NULL), 0);
		SKY_EXPECT(close_rel(r, o / (2.0 * 1.5 * 1.5), 1e-15));
	}
	/* and a rate just below 1 is just below it (the sum is continuous) */
	double r1, r0;
	SKY_EXPECT_EQ(sky_rdp_sgm(1.0, 1.5, 8, &r1, NULL), 0);
	SKY_EXPECT_EQ(sky_rdp_sgm(1.0 - 1e-9, 1.5, 8, &r0, NULL), 0);
	SKY_EXPECT(r0 < r1 && close_rel(r0, r1, 1e-6));
}

/* Rounds added in pieces cost what they cost at once; more rounds, more
 * noise or a smaller fraction move epsilon the right way; sampling
 * amplifies (q < 1 costs less than q = 1). */
SKY_TEST(composition_and_monotonicity)
{
	sky_rdp a, b;
	sky_rdp_init(&a);
	sky_rdp_init(&b);
	SKY_EXPECT_EQ(sky_rdp_add(&a, 0.2, 1.3, 30, NULL), 0);
	for (int i = 0; i < 3; i++)
		SKY_EXPECT_EQ(sky_rdp_add(&b, 0.2, 1.3, 10, NULL), 0);
	double ea, eb, e2, en, eq, e1;
	SKY_EXPECT_EQ(sky_rdp_epsilon(&a, 1e-5, &ea, NULL, NULL), 0);
	SKY_EXPECT_EQ(sky_rdp_epsilon(&b, 1e-5, &eb, NULL, NULL), 0);
	SKY_EXPECT(a.rounds == 30 && b.rounds == 30 && close_rel(ea, eb, 1e-12));
	SKY_EXPECT_EQ(sky_rdp_add(&b, 0.2, 1.3, 30, NULL), 0);
	SKY_EXPECT_EQ(sky_rdp_epsilon(&b, 1e-5, &e2, NULL, NULL), 0);
	SKY_EXPECT(e2 > ea);
	sky_rdp c;
	sky_rdp_init(&c);
	SKY_EXPECT_EQ(sky_rdp_add(&c, 0.2, 2.6, 30, NULL), 0);
	SKY_EXPECT_EQ(sky_rdp_epsilon(&c, 1e-5, &en, NULL, NULL), 0);
	SKY_EXPECT(en < ea);
	sky_rdp_init(&c);
	SKY_EXPECT_EQ(sky_rdp_add(&c, 0.05, 1.3, 30, NULL), 0);
	SKY_EXPECT_EQ(sky_rdp_epsilon(&c, 1e-5, &eq, NULL, NULL), 0);
	SKY_EXPECT(eq < ea);
	sky_rdp_init(&c);
	SKY_EXPECT_EQ(sky_rdp_add(&c, 1.0, 1.3, 30, NULL), 0);
	SKY_EXPECT_EQ(sky_rdp_epsilon(&c, 1e-5, &e1, NULL, NULL), 0);
	SKY_EXPECT(e1 > ea);
	/* a larger delta buys a smaller epsilon; nothing spent costs nothing */
	double el;
	SKY_EXPECT_EQ(sky_rdp_epsilon(&a, 1e-2, &el, NULL, NULL), 0);
	SKY_EXPECT(el < ea);
	sky_rdp_init(&c);
	SKY_EXPECT_EQ(sky_rdp_epsilon(&c, 1e-5, &el, NULL, NULL), 0);
	SKY_EXPECT(el == 0.0);
}

SKY_TEST(bad_arguments_are_refused_with_the_reason)
{
	sky_rdp a;
	sky_rdp_init(&a);
	sky_diag d;
	double r;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_rdp_add(&a, 0.0, 1.0, 1, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "sampling rate 0 is not in (0, 1]") != NULL);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_rdp_add(&a, 1.5, 1.0, 1, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "sampling rate 1.5") != NULL);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_rdp_add(&a, 0.5, NAN, 1, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "noise multiplier nan") != NULL);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_rdp_add(&a, 0.5, 1.0, 0, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "no rounds") != NULL);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_rdp_sgm(0.5, 1.0, 1, &r, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "order 1 is not in [2, 256]") != NULL);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_rdp_epsilon(&a, 1.0, &r, NULL, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "delta 1 is not in (0, 1)") != NULL);
	SKY_EXPECT(a.rounds == 0 && a.rdp[0] == 0.0);
}
