#include "sky_test.h"

#include "sky_fedsum.h"
#include "sky_secagg.h"

#include <math.h>
#include <string.h>

#define NOWN 3
#define N 515

static const uint32_t k_weight[NOWN] = {120, 7, 4000}; /* sample counts */

/* Owner i's update: values of every size, signs, and a few at the clip. */
static void update(int i, float *x)
{
	uint32_t s = 12345u + 777u * (uint32_t)i;
	for (int k = 0; k < N; k++) {
		s = s * 1664525u + 1013904223u;
		x[k] = ((float)(s >> 8) / 16777216.0f - 0.5f) * (k % 7 == 0 ? 1e-5f : 0.02f);
	}
	x[i] = 3.0f; /* beyond the clip of 1 */
}

/* FedAvg of the three owners through fixed point matches a float64
 * reference to within the encoding's rounding, and any order of adding
 * gives the same bits. */
SKY_TEST(weighted_mean_matches_a_double_reference_in_any_order)
{
	float x[NOWN][N], out[N], out2[N];
	uint64_t enc[NOWN][N], sum[N], sum2[N];
	uint64_t total = 0;
	for (int i = 0; i < NOWN; i++)
		total += k_weight[i];
	int bits;
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_fx_bits(1.0f, total, &bits, &d), 0);
	/* 2^12 < 4127 < 2^13: 62 - 13 = 49 fraction bits (50 would pass 2^62) */
	SKY_EXPECT_EQ(bits, 49);
	for (int i = 0; i < NOWN; i++) {
		size_t clipped = 99;
		update(i, x[i]);
		SKY_EXPECT_EQ(sky_fx_encode(x[i], N, k_weight[i], 1.0f, bits, enc[i], &clipped, &d), 0);
		SKY_EXPECT_EQ(clipped, 1);
	}
	memset(sum, 0, sizeof sum);
	memset(sum2, 0, sizeof sum2);
	for (int i = 0; i < NOWN; i++)
		sky_fx_add(sum, enc[i], N);
	for (int i = NOWN - 1; i >= 0; i--)
		sky_fx_add(sum2, enc[i], N);
	SKY_EXPECT(memcmp(sum, sum2, sizeof sum) == 0);
	SKY_EXPECT_EQ(sky_fx_decode(sum, N, total, bits, out, &d), 0);
	SKY_EXPECT_EQ(sky_fx_decode(sum2, N, total, bits, out2, &d), 0);
	SKY_EXPECT(memcmp(out, out2, sizeof out) == 0);
	for (int k = 0; k < N; k++) {
		double ref = 0;
		for (int i = 0; i < NOWN; i++) {
			double v = x[i][k] > 1.0f ? 1.0 : x[i][k];
			ref += (double)k_weight[i] * v;
		}
		ref /= (double)total;
		/* each encoding rounds by at most 2^-51 / weight-sum; the float
		 * result by half an ulp */
		double err = fabs((double)out[k] - ref);
		double tol = fabs(ref) * 6e-8 + 3.0 * ldexp(1.0, -bits);
		SKY_EXPECT_MSG(err <= tol, "element %d: %.9g vs %.9g", k, (double)out[k], ref);
	}
}

/* Secure aggregation of the same updates gives the same bits as plain. */
SKY_TEST(secure_and_plain_sums_have_the_same_bits)
{
	float x[N];
	uint64_t enc[NOWN][N], plain[N], masked[N];
	unsigned char seeds[NOWN][32], pair_seed[NOWN][NOWN][32];
	static const char *const ids[NOWN] = {"o1", "o2", "o3"};
	int bits;
	SKY_EXPECT_EQ(sky_fx_bits(1.0f, 4127, &bits, NULL), 0);
	/* pair seeds stand in for the ECDH-derived ones (test_secagg checks the
	 * derivation): any shared 32 bytes cancel the same way */
	for (int i = 0; i < NOWN; i++) {
		memset(seeds[i], 0x30 + i, 32);
		for (int j = 0; j < NOWN; j++)
			for (int b = 0; b < 32; b++)
				pair_seed[i][j][b] = (unsigned char)((i < j ? i * 7 + j : j * 7 + i) + b);
	}
	memset(plain, 0, sizeof plain);
	memset(masked, 0, sizeof masked);
	for (int i = 0; i < NOWN; i++) {
		update(i, x);
		SKY_EXPECT_EQ(sky_fx_encode(x, N, k_weight[i], 1.0f, bits, enc[i], NULL, NULL), 0);
		sky_fx_add(plain, enc[i], N);
		sky_secagg_peer peers[NOWN - 1];
		for (int j = 0, p = 0; j < NOWN; j++)
			if (j != i)
				peers[p++] = (sky_secagg_peer){ids[j], pair_seed[i][j]};
		SKY_EXPECT_EQ(sky_secagg_mask(enc[i], N, 0, seeds[i], ids[i], peers, NOWN - 1, NULL), 0);
		sky_fx_add(masked, enc[i], N);
	}
	SKY_EXPECT_EQ(sky_secagg_unmask(masked, N, 0, (const unsigned char(*)[32])seeds, NOWN, NULL,
					0, NULL),
		      0);
	SKY_EXPECT(memcmp(masked, plain, sizeof plain) == 0);
	float a[N], b[N];
	SKY_EXPECT_EQ(sky_fx_decode(plain, N, 4127, bits, a, NULL), 0);
	SKY_EXPECT_EQ(sky_fx_decode(masked, N, 4127, bits, b, NULL), 0);
	SKY_EXPECT(memcmp(a, b, sizeof a) == 0);
}

/* The bound: total weight x clip x 2^bits stays below 2^62, so the worst
 * case (every owner at +clip or -clip everywhere) decodes exactly. */
SKY_TEST(the_extreme_sum_does_not_overflow)
{
	const uint32_t w = SKY_FX_MAX_WEIGHT;
	const int owners = 4;
	int bits;
	SKY_EXPECT_EQ(sky_fx_bits(8.0f, (uint64_t)w * owners, &bits, NULL), 0);
	/* 2^29 * 4 * 8 = 2^34 exactly; the bound is strict (< 2^62), so 27 */
	SKY_EXPECT_EQ(bits, 62 - 35);
	float hi[2] = {8.0f, -8.0f};
	uint64_t enc[2], sum[2] = {0, 0};
	for (int i = 0; i < owners; i++) {
		SKY_EXPECT_EQ(sky_fx_encode(hi, 2, w, 8.0f, bits, enc, NULL, NULL), 0);
		sky_fx_add(sum, enc, 2);
	}
	float out[2];
	SKY_EXPECT_EQ(sky_fx_decode(sum, 2, (uint64_t)w * owners, bits, out, NULL), 0);
	SKY_EXPECT(out[0] == 8.0f && out[1] == -8.0f);
}

SKY_TEST(bad_input_is_refused_with_the_reason)
{
	int bits = 0;
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_fx_bits(0.0f, 10, &bits, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "finite clip") != NULL);
	SKY_EXPECT_EQ(sky_fx_bits(NAN, 10, &bits, NULL), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_fx_bits(1.0f, 0, &bits, NULL), SKY_EINVAL);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_fx_bits(1e30f, 1000, &bits, &d), SKY_ERANGE);
	SKY_EXPECT(strstr(d.msg, "lower the clip") != NULL);
	float x[3] = {0.5f, NAN, 0.1f};
	uint64_t out[3];
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_fx_encode(x, 3, 5, 1.0f, 40, out, NULL, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "element 1 is nan") != NULL);
	x[1] = INFINITY;
	SKY_EXPECT_EQ(sky_fx_encode(x, 3, 5, 1.0f, 40, out, NULL, NULL), SKY_EINVAL);
	x[1] = 0;
	SKY_EXPECT_EQ(sky_fx_encode(x, 3, 0, 1.0f, 40, out, NULL, NULL), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_fx_encode(x, 3, SKY_FX_MAX_WEIGHT + 1, 1.0f, 40, out, NULL, NULL),
		      SKY_EINVAL);
	SKY_EXPECT_EQ(sky_fx_encode(x, 3, 5, 1.0f, 63, out, NULL, NULL), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_fx_decode(out, 3, 0, 40, x, NULL), SKY_EINVAL);
}

/* The same bits on every machine: the sum and the mean of the three
 * owners' updates hash to the values this test was first run with on
 * x86-64; make check runs it again under qemu on two Arm cores. */
SKY_TEST(the_mean_has_the_same_bits_on_every_machine)
{
	float x[N], out[N];
	uint64_t enc[N], sum[N] = {0};
	int bits;
	SKY_EXPECT_EQ(sky_fx_bits(1.0f, 4127, &bits, NULL), 0);
	for (int i = 0; i < NOWN; i++) {
		update(i, x);
		SKY_EXPECT_EQ(sky_fx_encode(x, N, k_weight[i], 1.0f, bits, enc, NULL, NULL), 0);
		sky_fx_add(sum, enc, N);
	}
	SKY_EXPECT_EQ(sky_fx_decode(sum, N, 4127, bits, out, NULL), 0);
	uint64_t hs = 1469598103934665603ull, ho = hs; /* FNV-1a, 64-bit */
	for (int k = 0; k < N; k++) {
		uint32_t u;
		memcpy(&u, &out[k], 4);
		for (int b = 0; b < 8; b++)
			hs = (hs ^ ((sum[k] >> (8 * b)) & 0xff)) * 1099511628211ull;
		for (int b = 0; b < 4; b++)
			ho = (ho ^ ((u >> (8 * b)) & 0xff)) * 1099511628211ull;
	}
	SKY_EXPECT_MSG(hs == 0xe91650f4d9a373fcull && ho == 0xcd4ad22d2b590881ull, "sum %016llx, mean %016llx", (unsigned long long)hs,
		       (unsigned long long)ho);
}
