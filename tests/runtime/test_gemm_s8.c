/* int8 kernels: every SIMD variant this CPU supports is compared byte for
 * byte with _ref on random shapes (odd sizes, tails in M, N and K, strided
 * rows), _ref with an independent triple loop on the unpacked matrix, and
 * the integer non-linearities with their fp64 definitions (error bounds). */
#include "sky_test.h"

#include "sky_cpu.h"
#include "sky_kernels_s8.h"
#include "sky_rng.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int32_t naive_dot(const int8_t *a, const int8_t *w, int k)
{
	int32_t s = 0;
	for (int i = 0; i < k; i++)
		s += a[i] * w[i];
	return s;
}

static int run_variant(int v, sky_rng *rng, int M, int N, int K, int wmin)
{
	int bad = 0;
	long lda = K + (int)sky_rng_below(rng, 3), ldc = N + (int)sky_rng_below(rng, 3);
	int8_t *a = malloc((size_t)M * lda + 1), *w = malloc((size_t)N * K + 1);
	for (long i = 0; i < M * lda; i++)
		a[i] = (int8_t)(sky_rng_below(rng, 256) - 128);
	for (long i = 0; i < (long)N * K; i++)
		w[i] = (int8_t)(wmin + (int)sky_rng_below(rng, (uint32_t)(128 - wmin)));
	int32_t *bias = malloc(sizeof(int32_t) * N), *mult = malloc(sizeof(int32_t) * N);
	int8_t *rsh = malloc((size_t)N);
	for (int j = 0; j < N; j++) {
		bias[j] = (int32_t)sky_rng_below(rng, 200001) - 100000;
		double r = ldexp(0.5 + 0.5 * sky_rng_uniform(rng), -(int)sky_rng_below(rng, 20));
		sky_k_quant_multiplier(r, &mult[j], &rsh[j]);
	}
	void *pk = malloc(sky_k_pack_s8_bytes(N, K)), *pr = malloc(sky_k_pack_s8_bytes(N, K));
	sky_k_s8_packed P, R;
	sky_k_pack_s8(v, w, N, K, K, 1, pk, &P);
	sky_k_pack_s8(SKY_K_S8_REF, w, N, K, K, 1, pr, &R);
	for (int n = 0; n < N; n++)
		for (int k = 0; k < K; k++)
			bad += sky_k_packed_get(&P, n, k) != w[n * K + k];
	size_t cbytes = (size_t)M * ldc * 4;
	unsigned char *c1 = malloc(cbytes), *c2 = malloc(cbytes);
	for (int t = SKY_K_OUT_S32; t <= SKY_K_OUT_S8; t++) {
		memset(c1, 0x5a, cbytes);
		memset(c2, 0x5a, cbytes);
		sky_k_gemm_out o1 = {t, c1, ldc, (t & 1) ? NULL : bias, mult, rsh};
		sky_k_gemm_out o2 = o1;
		o2.c = c2;
		sky_k_gemm_s8(M, a, lda, &P, &o1);
		sky_k_gemm_s8_ref(M, a, lda, &R, &o2);
		if (memcmp(c1, c2, cbytes) != 0) {
			bad++;
			fprintf(stderr, "variant %s differs from ref: M %d N %d K %d type %d\n",
				sky_k_s8_variant_name(v), M, N, K, t);
		}
		if (t == SKY_K_OUT_S32) { /* ref against the plain definition */
			for (int m = 0; m < M; m++)
				for (int n = 0; n < N; n++) {
					int32_t want = naive_dot(a + m * lda, w + n * K, K) + bias[n];
					bad += ((int32_t *)c2)[m * ldc + n] != want;
				}
		}
		if (t == SKY_K_OUT_S8) { /* requantisation against fp64 rounding */
			for (int m = 0; m < M; m++)
				for (int n = 0; n < N; n++) {
					double acc = naive_dot(a + m * lda, w + n * K, K) + bias[n];
					double want = floor(acc * mult[n] * ldexp(1.0, -rsh[n]) + 0.5);
					want = want < -128 ? -128 : want > 127 ? 127 : want;
					bad += ((int8_t *)c2)[m * ldc + n] != (int8_t)want;
				}
		}
	}
	free(a), free(w), free(bias), free(mult), free(rsh), free(pk), free(pr), free(c1), free(c2);
	return bad;
}

SKY_TEST(gemm_every_variant_matches_ref_bit_exact)
{
	sky_rng rng;
	sky_rng_seed(&rng, 42);
	int ran = 0;
	for (int v = 0; v < SKY_K_S8_NVARIANTS; v++) {
		if (!sky_k_s8_variant_supported(v))
			continue;
		ran++;
		int bad = 0;
		static const int fixed[][3] = {{1, 1, 1},   {8, 32, 64},  {9, 33, 67},
					       {16, 48, 19}, {130, 40, 5}, {3, 17, 128}};
		for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
			bad += run_variant(v, &rng, fixed[i][0], fixed[i][1], fixed[i][2], -127);
		for (int i = 0; i < 40; i++) {
			int M = 1 + (int)sky_rng_below(&rng, 21), N = 1 + (int)sky_rng_below(&rng, 70);
			int K = 1 + (int)sky_rng_below(&rng, 90);
			bad += run_variant(v, &rng, M, N, K, i % 5 == 0 ? -128 : -127);
		}
		/* AMX works on whole 16-row x 64-k tiles in 32 x 32 blocks and
		 * 128-row blocks: shapes around those edges (M % 32 == 16, K %
		 * 64 != 0 with K % 4 != 0, an odd count of 16-channel blocks,
		 * more than one 128-row block) */
		static const int tiles[][3] = {{16, 16, 64},  {32, 32, 64},   {48, 50, 130},
					       {47, 33, 191}, {17, 16, 67},   {64, 80, 256},
					       {160, 31, 64}, {144, 48, 128}, {33, 100, 65}};
		for (size_t i = 0; i < sizeof tiles / sizeof tiles[0]; i++)
			bad += run_variant(v, &rng, tiles[i][0], tiles[i][1], tiles[i][2], -127);
		for (int i = 0; i < 6; i++) {
			int M = 16 + (int)sky_rng_below(&rng, 60), N = 1 + (int)sky_rng_below(&rng, 70);
			int K = 64 + (int)sky_rng_below(&rng, 150);
			bad += run_variant(v, &rng, M, N, K, i % 3 == 0 ? -128 : -127);
		}
		SKY_EXPECT_MSG(bad == 0, "variant %s: %d mismatches", sky_k_s8_variant_name(v), bad);
	}
	SKY_EXPECT(ran >= 1);
#if defined(__x86_64__)
	/* a CPU with usable AMX tests it (and VNNI, whose kernel it shares) */
	if (sky_cpu_get_features().amx)
		SKY_EXPECT(sky_k_s8_variant_supported(SKY_K_S8_AMX) &&
			   sky_k_s8_variant_supported(SKY_K_S8_VNNI));
#endif
	fprintf(stderr, "int8 GEMM variants tested: %d, active: %s\n", ran,
		sky_k_s8_variant_name(sky_k_s8_variant_active()));
}

SKY_TEST(quant_multiplier_represents_the_real_value)
{
	int32_t m;
	int8_t r;
	SKY_EXPECT_EQ(sky_k_quant_multiplier(0.5, &m, &r), 0);
	SKY_EXPECT_EQ(m, 1 << 30);
	SKY_EXPECT_EQ(r, 31);
	double vals[] = {1e-9, 3.1e-5, 0.0123, 0.999999999, 1.0, 7.5, 1000.0};
	for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
		SKY_EXPECT_EQ(sky_k_quant_multiplier(vals[i], &m, &r), 0);
		SKY_EXPECT(m >= (1 << 30) && r >= 1 && r <= 62);
		double back = m * ldexp(1.0, -r);
		SKY_EXPECT_NEAR(back / vals[i], 1.0, 1e-9);
	}
	SKY_EXPECT(sky_k_quant_multiplier(0.0, &m, &r) < 0);
	SKY_EXPECT(sky_k_quant_multiplier(-1.0, &m, &r) < 0);
	SKY_EXPECT(sky_k_quant_multiplier(NAN, &m, &r) < 0);
	SKY_EXPECT(sky_k_quant_multiplier(INFINITY, &m, &r) < 0);
	SKY_EXPECT(sky_k_quant_multiplier(1e10, &m, &r) < 0);
	/* round half up, and negative values too */
	SKY_EXPECT_EQ(sky_k_requant1(3, 1 << 30, 32), 1);   /* 0.75 -> 1 */
	SKY_EXPECT_EQ(sky_k_requant1(2, 1 << 30, 32), 1);   /* 0.5 -> 1 */
	SKY_EXPECT_EQ(sky_k_requant1(-2, 1 << 30, 32), 0);  /* -0.5 -> 0 */
	SKY_EXPECT_EQ(sky_k_requant1(-3, 1 << 30, 32), -1); /* -0.75 -> -1 */
	int32_t x[6] = {-1000000, -5, 0, 5, 1000000, 123456}, b[3] = {10, -10, 0}, mm[3];
	int8_t rr[3], y[6];
	for (int j = 0; j < 3; j++)
		sky_k_quant_multiplier(0.01, &mm[j], &rr[j]);
	sky_k_requant_s32_s8(x, 6, 3, b, mm, rr, y);
	SKY_EXPECT_EQ(y[0], -128);
	SKY_EXPECT_EQ(y[1], 0);
	SKY_EXPECT_EQ(y[2], 0);
	SKY_EXPECT_EQ(y[3], 0);
	SKY_EXPECT_EQ(y[4], 127);
	SKY_EXPECT_EQ(y[5], 127);
}

SKY_TEST(isqrt_is_exact)
{
	sky_rng rng;
	sky_rng_seed(&rng, 7);
	for (int i = 0; i < 2000; i++) {
		uint64_t v = sky_rng_u64(&rng) >> sky_rng_below(&rng, 64);
		uint64_t s = sky_k_isqrt64(v);
		SKY_EXPECT(s * s <= v && (s + 1) * (s + 1) > v);
	}
	SKY_EXPECT_EQ(sky_k_isqrt64(0), 0);
	SKY_EXPECT_EQ(sky_k_isqrt64(1), 1);
	SKY_EXPECT_EQ(sky_k_isqrt64(15), 3);
	SKY_EXPECT_EQ(sky_k_isqrt64(16), 4);
}


/* ---- the non-linearities: every SIMD variant the CPU has ------------------
 * Each t_<op> runs the dispatched kernel into the caller's output, then every
 * other supported variant into a copy, counting disagreements in nl_bad; the
 * tests compare the dispatched output with _ref, so all agree with _ref. */
static int nl_bad;

#define NL_RUN(ok, call_into_t, bytes) \
	do { \
		if (ok) { \
			memcpy(t, out, bytes); \
			call_into_t; \
			if (memcmp(t, out, bytes) != 0) { \
				nl_bad++; \
				fprintf(stderr, "%s: %s differs from the dispatched kernel\n", \
					__func__, #call_into_t); \
			} \
		} \
	} while (0)

static void t_softmax(const int32_t *s, int rows, int cols, long lds, const uint8_t *mask,
		      const sky_k_softmax_params *p, uint8_t *out, long ldy)
{
	sky_k_softmax_s8(s, rows, cols, lds, mask, p, out, ldy);
	size_t n = (size_t)(rows - 1) * (size_t)ldy + (size_t)cols;
	uint8_t *t = malloc(n);
	sky_cpu_features f = sky_cpu_get_features();
	(void)f;
#if defined(__x86_64__)
	NL_RUN(f.avx2, sky_k_softmax_s8_avx2(s, rows, cols, lds, mask, p, t, ldy), n);
	NL_RUN(f.avx512, sky_k_softmax_s8_avx512(s, rows, cols, lds, mask, p, t, ldy), n);
#elif defined(__aarch64__)
	NL_RUN(f.neon, sky_k_softmax_s8_neon(s, rows, cols, lds, mask, p, t, ldy), n);
#endif
	free(t);
}

static void t_gelu(const int16_t *x, size_t n, const sky_k_gelu_params *p, int8_t *out)
{
	sky_k_gelu_s16_s8(x, n, p, out);
	int8_t *t = malloc(n);
	sky_cpu_features f = sky_cpu_get_features();
	(void)f;
#if defined(__x86_64__)
	NL_RUN(f.avx2, sky_k_gelu_s16_s8_avx2(x, n, p, t), n);
	NL_RUN(f.avx512, sky_k_gelu_s16_s8_avx512(x, n, p, t), n);
#elif defined(__aarch64__)
	NL_RUN(f.neon, sky_k_gelu_s16_s8_neon(x, n, p, t), n);
#endif
	free(t);
}

static void t_layernorm(const int32_t *r, int rows, int cols, const int32_t *g, const int64_t *b,
			int8_t *out)
{
	sky_k_layernorm_s8(r, rows, cols, g, b, out);
	size_t n = (size_t)rows * cols;
	int8_t *t = malloc(n);
	sky_cpu_features f = sky_cpu_get_features();
	(void)f;
#if defined(__x86_64__)
	NL_RUN(f.avx2, sky_k_layernorm_s8_avx2(r, rows, cols, g, b, t), n);
	NL_RUN(f.avx512, sky_k_layernorm_s8_avx512(r, rows, cols, g, b, t), n);
#elif defined(__aarch64__)
	NL_RUN(f.neon, sky_k_layernorm_s8_neon(r, rows, cols, g, b, t), n);
#endif
	free(t);
}

static void t_add(const int16_t *a, const int8_t *b, size_t n, int32_t ma, int ra, int32_t mb,
		  int rb, int32_t *out)
{
	sky_k_add_s16_s8(a, b, n, ma, ra, mb, rb, out);
	int32_t *t = malloc(n * 4);
	sky_cpu_features f = sky_cpu_get_features();
	(void)f;
#if defined(__x86_64__)
	NL_RUN(f.avx2, sky_k_add_s16_s8_avx2(a, b, n, ma, ra, mb, rb, t), n * 4);
	NL_RUN(f.avx512, sky_k_add_s16_s8_avx512(a, b, n, ma, ra, mb, rb, t), n * 4);
#elif defined(__aarch64__)
	NL_RUN(f.neon, sky_k_add_s16_s8_neon(a, b, n, ma, ra, mb, rb, t), n * 4);
#endif
	free(t);
}

static size_t t_quantize(const float *x, size_t n, float inv_s, int8_t *out)
{
	size_t bad = sky_k_quantize_f32_s8(x, n, inv_s, out);
	int8_t *t = malloc(n);
	sky_cpu_features f = sky_cpu_get_features();
	(void)f;
#if defined(__x86_64__)
	NL_RUN(f.avx2, nl_bad += sky_k_quantize_f32_s8_avx2(x, n, inv_s, t) != bad, n);
	NL_RUN(f.avx512, nl_bad += sky_k_quantize_f32_s8_avx512(x, n, inv_s, t) != bad, n);
#elif defined(__aarch64__)
	NL_RUN(f.neon, nl_bad += sky_k_quantize_f32_s8_neon(x, n, inv_s, t) != bad, n);
#endif
	free(t);
	return bad;
}

static void t_dequantize(const int8_t *q, size_t n, float s, float *out)
{
	sky_k_dequantize_s8_f32(q, n, s, out);
	float *t = malloc(n * 4);
	sky_cpu_features f = sky_cpu_get_features();
	(void)f;
#if defined(__x86_64__)
	NL_RUN(f.avx2, sky_k_dequantize_s8_f32_avx2(q, n, s, t), n * 4);
	NL_RUN(f.avx512, sky_k_dequantize_s8_f32_avx512(q, n, s, t), n * 4);
#elif defined(__aarch64__)
	NL_RUN(f.neon, sky_k_dequantize_s8_f32_neon(q, n, s, t), n * 4);
#endif
	free(t);
}

SKY_TEST(softmax_close_to_fp64_and_variants_agree)
{
	nl_bad = 0;
	sky_rng rng;
	sky_rng_seed(&rng, 3);
	int rows = 7, cols = 77;
	double s_in = 2e-3;
	sky_k_softmax_params p;
	SKY_EXPECT_EQ(sky_k_softmax_s8_params(s_in, &p), 0);
	int32_t *s = malloc(sizeof(int32_t) * rows * cols);
	uint8_t *y = malloc((size_t)rows * cols), *y2 = malloc((size_t)rows * cols);
	uint8_t mask[77] = {0};
	for (int j = 70; j < cols; j++)
		mask[j] = 1;
	for (int i = 0; i < rows * cols; i++)
		s[i] = (int32_t)(sky_rng_normal(&rng) * (i / cols + 1) * 800);
	sky_k_softmax_s8_ref(s, rows, cols, cols, mask, &p, y, cols);
	double maxerr = 0;
	for (int i = 0; i < rows; i++) {
		double mx = -1e300, sum = 0;
		for (int j = 0; j < 70; j++)
			mx = fmax(mx, s[i * cols + j] * s_in);
		for (int j = 0; j < 70; j++)
			sum += exp(s[i * cols + j] * s_in - mx);
		for (int j = 0; j < cols; j++) {
			double want = j < 70 ? exp(s[i * cols + j] * s_in - mx) / sum : 0;
			maxerr = fmax(maxerr, fabs(y[i * cols + j] / 256.0 - want));
		}
	}
	fprintf(stderr, "softmax: max abs error vs fp64 %.5f (one output unit is %.5f)\n", maxerr,
		1 / 256.0);
	SKY_EXPECT(maxerr < 0.012);
	t_softmax(s, rows, cols, cols, mask, &p, y2, cols);
	SKY_EXPECT(memcmp(y, y2, (size_t)rows * cols) == 0);
	/* random shapes, masks and extreme scores (differences beyond int32) */
	for (int it = 0; it < 30; it++) {
		int rr = 1 + (int)sky_rng_below(&rng, 4), cc = 1 + (int)sky_rng_below(&rng, 77);
		uint8_t mk[77];
		for (int j = 0; j < cc; j++)
			mk[j] = sky_rng_below(&rng, 4) == 0;
		for (int i = 0; i < rr * cc; i++) {
			uint32_t kind = sky_rng_below(&rng, 8);
			s[i] = kind == 0   ? INT32_MIN
			       : kind == 1 ? INT32_MAX
			       : (int32_t)(sky_rng_normal(&rng) * 3000);
		}
		sky_k_softmax_params pp;
		sky_k_softmax_s8_params(ldexp(1.0, -(int)sky_rng_below(&rng, 16)), &pp);
		sky_k_softmax_s8_ref(s, rr, cc, cc, it & 1 ? mk : NULL, &pp, y, cc);
		t_softmax(s, rr, cc, cc, it & 1 ? mk : NULL, &pp, y2, cc);
		SKY_EXPECT_MSG(memcmp(y, y2, (size_t)rr * cc) == 0, "softmax variant differs, %d x %d",
			       rr, cc);
	}
	/* a fully masked row gives zeros, not a division by zero */
	memset(mask, 1, sizeof mask);
	sky_k_softmax_s8_ref(s, 1, cols, cols, mask, &p, y, cols);
	SKY_EXPECT(y[0] == 0 && y[cols - 1] == 0);
	free(s), free(y), free(y2);
	SKY_EXPECT_EQ(nl_bad, 0);
}

SKY_TEST(gelu_close_to_fp64_and_variants_agree)
{
	nl_bad = 0;
	int f = 11;
	double s_out = 10.0 / 127;
	sky_k_gelu_params p;
	SKY_EXPECT_EQ(sky_k_gelu_s8_params(f, s_out, &p), 0);
	enum { N = 65536 };
	int16_t *x = malloc(sizeof(int16_t) * N);
	int8_t *y = malloc(N), *y2 = malloc(N);
	for (int i = 0; i < N; i++)
		x[i] = (int16_t)(i - 32768);
	sky_k_gelu_s16_s8_ref(x, N, &p, y);
	double maxerr = 0;
	for (int i = 0; i < N; i++) {
		double v = x[i] * sqrt(2.0) / (1 << f);
		double want = 0.5 * v * (1 + erf(v / sqrt(2.0)));
		maxerr = fmax(maxerr, fabs(y[i] * s_out - fmin(want, 127 * s_out)));
	}
	fprintf(stderr, "gelu: max abs error vs fp64 %.4f over v in [-22.6, 22.6] (output unit %.4f)\n",
		maxerr, s_out);
	SKY_EXPECT(maxerr < 0.03 + s_out);
	t_gelu(x, N, &p, y2);
	SKY_EXPECT(memcmp(y, y2, N) == 0);
	for (int ff = 7; ff <= 14; ff++) { /* every Q format, odd lengths (tails) */
		SKY_EXPECT_EQ(sky_k_gelu_s8_params(ff, s_out * (ff - 6), &p), 0);
		size_t n = (size_t)(N - 5 * ff);
		sky_k_gelu_s16_s8_ref(x + ff, n, &p, y);
		t_gelu(x + ff, n, &p, y2);
		SKY_EXPECT_MSG(memcmp(y, y2, n) == 0, "gelu variant differs at f = %d", ff);
	}
	SKY_EXPECT(sky_k_gelu_s8_params(0, s_out, &p) < 0);
	SKY_EXPECT(sky_k_gelu_s8_params(f, 0.0, &p) < 0);
	free(x), free(y), free(y2);
	SKY_EXPECT_EQ(nl_bad, 0);
}

SKY_TEST(layernorm_close_to_fp64)
{
	nl_bad = 0;
	sky_rng rng;
	sky_rng_seed(&rng, 5);
	int rows = 5, cols = 96;
	double s_out = 4.0 / 127;
	int32_t *r = malloc(sizeof(int32_t) * rows * cols), *g = malloc(sizeof(int32_t) * cols);
	int64_t *b = malloc(sizeof(int64_t) * cols);
	int8_t *y = malloc((size_t)rows * cols);
	double *gam = malloc(sizeof(double) * cols), *bet = malloc(sizeof(double) * cols);
	for (int j = 0; j < cols; j++) {
		gam[j] = 0.5 + sky_rng_uniform(&rng);
		bet[j] = 0.2 * sky_rng_normal(&rng);
		g[j] = (int32_t)lround(gam[j] / s_out * 32768);
		b[j] = llround(bet[j] / s_out * 2147483648.0);
	}
	for (int i = 0; i < rows * cols; i++)
		r[i] = (int32_t)(sky_rng_normal(&rng) * (1 << 18) + (1 << 16));
	sky_k_layernorm_s8(r, rows, cols, g, b, y);
	double maxerr = 0;
	for (int i = 0; i < rows; i++) {
		double m = 0, v = 0;
		for (int j = 0; j < cols; j++)
			m += r[i * cols + j];
		m /= cols;
		for (int j = 0; j < cols; j++)
			v += (r[i * cols + j] - m) * (r[i * cols + j] - m);
		v /= cols;
		for (int j = 0; j < cols; j++) {
			double want = (r[i * cols + j] - m) / sqrt(v) * gam[j] + bet[j];
			want = fmax(fmin(want, 127 * s_out), -128 * s_out);
			maxerr = fmax(maxerr, fabs(y[i * cols + j] * s_out - want));
		}
	}
	fprintf(stderr, "layernorm: max abs error vs fp64 %.4f (output unit %.4f)\n", maxerr, s_out);
	SKY_EXPECT(maxerr <= 0.51 * s_out + 1e-3);
	/* the dispatched variant against _ref, odd widths, wide and narrow rows */
	int8_t *y2 = malloc((size_t)rows * cols);
	for (int it = 0; it < 20; it++) {
		int cc = 1 + (int)sky_rng_below(&rng, cols), rr = 1 + (int)sky_rng_below(&rng, rows);
		int sh = (int)sky_rng_below(&rng, 24);
		for (int i = 0; i < rr * cc; i++)
			r[i] = (int32_t)(sky_rng_normal(&rng) * (1 << sh)) + (it & 1 ? 1000 : -1000);
		sky_k_layernorm_s8_ref(r, rr, cc, g, b, y);
		t_layernorm(r, rr, cc, g, b, y2);
		SKY_EXPECT_MSG(memcmp(y, y2, (size_t)rr * cc) == 0, "layernorm variant differs, %d x %d",
			       rr, cc);
	}
	/* residual add: variant against _ref */
	int16_t a16[77];
	int8_t b8[77];
	int32_t s1[77], s2[77];
	for (int i = 0; i < 77; i++)
		a16[i] = (int16_t)(sky_rng_below(&rng, 65536) - 32768), b8[i] = (int8_t)(i * 7 - 200);
	int32_t ma, mb;
	int8_t ra, rb;
	sky_k_quant_multiplier(37.5, &ma, &ra);
	sky_k_quant_multiplier(1234.5, &mb, &rb);
	sky_k_add_s16_s8_ref(a16, b8, 77, ma, ra, mb, rb, s1);
	t_add(a16, b8, 77, ma, ra, mb, rb, s2);
	SKY_EXPECT(memcmp(s1, s2, sizeof s1) == 0);
	SKY_EXPECT_EQ(s1[0], (int32_t)(sky_k_requant1(a16[0], ma, ra) + sky_k_requant1(b8[0], mb, rb)));
	free(y2);
	free(r), free(g), free(b), free(y), free(gam), free(bet);
	SKY_EXPECT_EQ(nl_bad, 0);
}

SKY_TEST(quantize_edges_round_half_even_and_count_non_finite)
{
	nl_bad = 0;
	enum { N = 203 };
	float x[N], back[N], back2[N];
	int8_t q1[N], q2[N];
	sky_rng rng;
	sky_rng_seed(&rng, 9);
	for (int i = 0; i < N; i++)
		x[i] = (sky_rng_uniform(&rng) - 0.5f) * 300.0f;
	x[0] = 2.5f, x[1] = -2.5f, x[2] = 3.5f, x[3] = 127.5f, x[4] = -128.5f, x[5] = NAN;
	x[6] = INFINITY, x[7] = -INFINITY, x[8] = 0.49999997f;
	size_t b1 = sky_k_quantize_f32_s8_ref(x, N, 1.0f, q1);
	size_t b2 = t_quantize(x, N, 1.0f, q2);
	SKY_EXPECT_EQ(b1, 3);
	SKY_EXPECT_EQ(b2, 3);
	SKY_EXPECT(memcmp(q1, q2, N) == 0);
	SKY_EXPECT(q1[0] == 2 && q1[1] == -2 && q1[2] == 4 && q1[3] == 127 && q1[4] == -128);
	SKY_EXPECT(q1[5] == 0 && q1[6] == 0 && q1[7] == 0 && q1[8] == 0);
	for (int i = 9; i < N; i++) {
		double want = fmax(-128, fmin(127, nearbyint(x[i])));
		SKY_EXPECT_MSG(q1[i] == (int8_t)want, "x %g -> %d", x[i], q1[i]);
	}
	sky_k_dequantize_s8_f32_ref(q1, N, 0.25f, back);
	t_dequantize(q1, N, 0.25f, back2);
	SKY_EXPECT(memcmp(back, back2, sizeof back) == 0);
	SKY_EXPECT(back[0] == 0.5f);
	SKY_EXPECT_EQ(nl_bad, 0);
}
