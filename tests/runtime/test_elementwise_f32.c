/* The row-wise and element-wise fp32 kernels (runtime/kernels/elementwise_f32.c)
 * against the float64 reference (ref_bert_f64.c), forward and backward, at
 * every length from 1 (LayerNorm: 3) to 17 and at 20, 23, 36 and 100. A length that is not
 * a multiple of 8 runs both the 8-lane body and the scalar tail after it;
 * layer tests whose sizes are multiples of 8 (or below 8) never run both,
 * so a wrong tail hid there. Gradients are central differences of the
 * reference, not a second copy of the backward formulas.
 *
 * Outputs start as NaN, so an element a kernel forgets to write fails. */
#include "sky_test.h"

#include "ref_bert_f64.h"
#include "sky_kernels_f32.h"
#include "sky_rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const int k_sizes[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 20, 23, 36, 100};
#define N_SIZES ((int)(sizeof k_sizes / sizeof k_sizes[0]))
#define ROWS 3
#define MAXC 100
#define MAXN (ROWS * MAXC)
#define MASK_NEG -1e9f

/* h = 1e-5 in double: truncation ~h^2 and rounding ~1e-16/h, both near
 * 1e-10, far below the fp32 errors under test. */
#define FD_H 1e-5

static void fill(float *p, size_t n, float scale, float shift, sky_rng *r)
{
	for (size_t i = 0; i < n; i++)
		p[i] = shift + scale * sky_rng_normal(r);
}

static void fill_nan(float *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = NAN;
}

/* max |a - b| over max(max |b|, floor): an element's error against the
 * tensor's scale (NaN in a compares as the worst error) */
static double max_err(const float *a, const double *b, size_t n, double floor)
{
	double e = 0, m = floor;
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)a[i] - b[i]);
		e = (d > e || d != d) ? (d != d ? INFINITY : d) : e;
		m = fabs(b[i]) > m ? fabs(b[i]) : m;
	}
	return e / m;
}

/* ---- LayerNorm ------------------------------------------------------------ */

/* L = sum(dy .* LN(x; g, b)) in double; its gradient is what backward computes */
static double ln_loss(const double *x, int rows, int cols, const double *g, const double *b,
		      const double *dy)
{
	double y[MAXN], s = 0;
	ref64_layernorm(x, rows, cols, g, b, 1e-12, y);
	for (int i = 0; i < rows * cols; i++)
		s += y[i] * dy[i];
	return s;
}

/* central differences of ln_loss in each coordinate of v (x, g or b) */
static void ln_fd(double *x, int rows, int cols, double *g, double *b, const double *dy, double *v,
		  int n, double *grad)
{
	for (int i = 0; i < n; i++) {
		double keep = v[i];
		v[i] = keep + FD_H;
		double lp = ln_loss(x, rows, cols, g, b, dy);
		v[i] = keep - FD_H;
		double lm = ln_loss(x, rows, cols, g, b, dy);
		v[i] = keep;
		grad[i] = (lp - lm) / (2 * FD_H);
	}
}

SKY_TEST(layernorm_forward_and_backward_match_f64_at_every_length)
{
	sky_rng r;
	sky_rng_seed(&r, 21);
	static float x[MAXN], g[MAXC], b[MAXC], y[MAXN], xhat[MAXN], rstd[ROWS], y2[MAXN];
	static float dy[MAXN], dx[MAXN], dg[MAXC], db[MAXC], dsum[MAXC], dg0[MAXC], dsum0[MAXC];
	static double xd[MAXN], gd[MAXC], bd[MAXC], dyd[MAXN], yr[MAXN], gx[MAXN], gg[MAXC],
		gb[MAXC], one[MAXC], zero[MAXC];
	for (int j = 0; j < MAXC; j++)
		one[j] = 1.0, zero[j] = 0.0;
	for (int si = 0; si < N_SIZES; si++) {
		const int cols = k_sizes[si], n = ROWS * cols;
		/* one or two columns: the output does not depend on x (0 or +-1
		 * times g, plus b), so dx is rounding noise times rstd (1e6 for one
		 * column); nothing to compare */
		if (cols < 3)
			continue;
		/* a mean far from 0 and gammas near 1, so no term is negligible */
		fill(x, (size_t)n, 2.0f, 3.0f, &r);
		fill(g, (size_t)cols, 0.3f, 1.0f, &r);
		fill(b, (size_t)cols, 0.5f, 0.0f, &r);
		fill(dy, (size_t)n, 1.0f, 0.0f, &r);
		fill(dg, (size_t)cols, 1.0f, 0.0f, &r); /* backward accumulates into these */
		fill(db, (size_t)cols, 1.0f, 0.0f, &r);
		fill(dsum, (size_t)cols, 1.0f, 0.0f, &r);
		memcpy(dg0, dg, sizeof dg), memcpy(dsum0, dsum, sizeof dsum);
		float db0[MAXC];
		memcpy(db0, db, sizeof db);
		ref64_from_f32(xd, x, (size_t)n);
		ref64_from_f32(gd, g, (size_t)cols);
		ref64_from_f32(bd, b, (size_t)cols);
		ref64_from_f32(dyd, dy, (size_t)n);

		fill_nan(y, (size_t)n), fill_nan(xhat, (size_t)n), fill_nan(rstd, ROWS);
		sky_k_layernorm_f32(x, ROWS, cols, g, b, 1e-12f, y, xhat, rstd);
		/* fp32 sums of <= 100 terms and a square root: a few 1e-7 of the
		 * row's scale; 1e-5 is a 20x margin, a wrong term is 1e-2 and up */
		ref64_layernorm(xd, ROWS, cols, gd, bd, 1e-12, yr);
		double e = max_err(y, yr, (size_t)n, 1e-30);
		SKY_EXPECT_MSG(e < 1e-5, "cols %d: LN forward err %.3g", cols, e);
		ref64_layernorm(xd, ROWS, cols, one, zero, 1e-12, yr);
		e = max_err(xhat, yr, (size_t)n, 1e-30);
		SKY_EXPECT_MSG(e < 1e-5, "cols %d: xhat err %.3g", cols, e);
		for (int rr = 0; rr < ROWS; rr++) {
			double mean = 0, var = 0;
			for (int j = 0; j < cols; j++)
				mean += xd[rr * cols + j];
			mean /= cols;
			for (int j = 0; j < cols; j++)
				var += (xd[rr * cols + j] - mean) * (xd[rr * cols + j] - mean);
			double want = 1.0 / sqrt(var / cols + 1e-12);
			SKY_EXPECT_MSG(fabs(rstd[rr] - want) <= 1e-5 * want, "cols %d row %d: rstd %.9g vs %.9g",
				       cols, rr, rstd[rr], want);
		}
		/* without xhat/rstd (inference) the output is the same */
		fill_nan(y2, (size_t)n);
		sky_k_layernorm_f32(x, ROWS, cols, g, b, 1e-12f, y2, NULL, NULL);
		ref64_layernorm(xd, ROWS, cols, gd, bd, 1e-12, yr);
		e = max_err(y2, yr, (size_t)n, 1e-30);
		SKY_EXPECT_MSG(e < 1e-5, "cols %d: LN inference forward err %.3g", cols, e);

		fill_nan(dx, (size_t)n);
		sky_k_layernorm_bwd_f32(dy, xhat, rstd, g, ROWS, cols, dx, dg, db, dsum);
		ln_fd(xd, ROWS, cols, gd, bd, dyd, xd, n, gx);
		ln_fd(xd, ROWS, cols, gd, bd, dyd, gd, cols, gg);
		ln_fd(xd, ROWS, cols, gd, bd, dyd, bd, cols, gb);
		/* dx subtracts two row means from dy * g (order-1 terms): fp32
		 * leaves a few 1e-7 of the scale; measured below 1e-6 */
		e = max_err(dx, gx, (size_t)n, 1e-30);
		SKY_EXPECT_MSG(e < 1e-5, "cols %d: LN dx err %.3g", cols, e);
		float acc[MAXC];
		double want[MAXC];
		for (int j = 0; j < cols; j++) {
			acc[j] = dg[j] - dg0[j];
			want[j] = gg[j];
		}
		e = max_err(acc, want, (size_t)cols, 1e-30);
		SKY_EXPECT_MSG(e < 1e-5, "cols %d: LN dg err %.3g", cols, e);
		for (int j = 0; j < cols; j++) {
			acc[j] = db[j] - db0[j];
			want[j] = gb[j];
		}
		e = max_err(acc, want, (size_t)cols, 1e-30);
		SKY_EXPECT_MSG(e < 1e-5, "cols %d: LN db err %.3g", cols, e);
		/* dsum += column sums of dx: the bias gradient of the layer before */
		for (int j = 0; j < cols; j++) {
			acc[j] = dsum[j] - dsum0[j];
			want[j] = 0;
			for (int rr = 0; rr < ROWS; rr++)
				want[j] += gx[rr * cols + j];
		}
		e = max_err(acc, want, (size_t)cols, 1e-2 * ref64_norm2(gx, (size_t)n));
		SKY_EXPECT_MSG(e < 1e-5, "cols %d: LN dsum err %.3g", cols, e);
		/* in place (dx == dy), as the layer calls it, gives the same dx */
		float dxi[MAXN], dgi[MAXC], dbi[MAXC];
		memcpy(dxi, dy, (size_t)n * sizeof *dxi);
		memset(dgi, 0, sizeof dgi), memset(dbi, 0, sizeof dbi);
		sky_k_layernorm_bwd_f32(dxi, xhat, rstd, g, ROWS, cols, dxi, dgi, dbi, NULL);
		SKY_EXPECT_MSG(memcmp(dxi, dx, (size_t)n * sizeof *dx) == 0, "cols %d: in-place dx", cols);
	}
}

/* ---- softmax -------------------------------------------------------------- */

static double sm_loss(const double *s, int rows, int cols, const double *mask, const double *dy)
{
	double p[MAXN], l = 0;
	ref64_softmax(s, rows, cols, mask, p);
	for (int i = 0; i < rows * cols; i++)
		l += p[i] * dy[i];
	return l;
}

/* mask patterns: none; every fifth column; every column of the 8-lane body
 * (the row's values all in the tail, so its maximum is there) */
static int make_mask(int pattern, int cols, float *mask)
{
	int body = cols / 8 * 8;
	if (pattern == 2 && (body == 0 || body == cols))
		return 0; /* no body-and-tail split at this length */
	for (int j = 0; j < cols; j++) {
		mask[j] = 0.0f;
		if (pattern == 1 && j % 5 == 3)
			mask[j] = MASK_NEG;
		if (pattern == 2 && j < body)
			mask[j] = MASK_NEG;
	}
	return 1;
}

SKY_TEST(softmax_forward_and_backward_match_f64_at_every_length)
{
	sky_rng r;
	sky_rng_seed(&r, 22);
	static float s[MAXN], p[MAXN], ds[MAXN], mask[MAXC];
	static double sd[MAXN], maskd[MAXC], pr[MAXN], dyd[MAXN], gs[MAXN];
	const float scale = 0.37f;
	for (int si = 0; si < N_SIZES; si++) {
		const int cols = k_sizes[si], n = ROWS * cols;
		for (int pattern = 0; pattern < 3; pattern++) {
			if (pattern && !make_mask(pattern, cols, mask))
				continue;
			const float *m = pattern ? mask : NULL;
			/* spread 3: probabilities from near 1 down to 1e-4 and below */
			fill(s, (size_t)n, 3.0f, 0.5f, &r);
			fill(ds, (size_t)n, 1.0f, 0.0f, &r);
			ref64_from_f32(sd, s, (size_t)n);
			ref64_from_f32(dyd, ds, (size_t)n);
			if (m)
				ref64_from_f32(maskd, m, (size_t)cols);
			memcpy(p, s, (size_t)n * sizeof *p);
			sky_k_softmax_f32(p, ROWS, cols, m);
			ref64_softmax(sd, ROWS, cols, m ? maskd : NULL, pr);
			/* exp to 2e-7 relative and a sum of <= 100 terms */
			double e = max_err(p, pr, (size_t)n, 1e-30);
			SKY_EXPECT_MSG(e < 1e-5, "cols %d mask %d: softmax err %.3g", cols, pattern, e);

			for (int i = 0; i < n; i++) {
				double keep = sd[i];
				sd[i] = keep + FD_H;
				double lp = sm_loss(sd, ROWS, cols, m ? maskd : NULL, dyd);
				sd[i] = keep - FD_H;
				double lm = sm_loss(sd, ROWS, cols, m ? maskd : NULL, dyd);
				sd[i] = keep;
				gs[i] = scale * (lp - lm) / (2 * FD_H);
			}
			sky_k_softmax_bwd_f32(p, ds, ROWS, cols, scale);
			e = max_err(ds, gs, (size_t)n, 1e-30);
			SKY_EXPECT_MSG(e < 1e-5, "cols %d mask %d: softmax backward err %.3g", cols, pattern,
				       e);
		}
	}
}

/* ---- GELU ----------------------------------------------------------------- */

SKY_TEST(gelu_forward_and_backward_match_f64_at_every_length)
{
	sky_rng r;
	sky_rng_seed(&r, 23);
	static float x[MAXN], y[MAXN], y2[MAXN], d[MAXN], dy[MAXN], dy2[MAXN], acc[MAXC], acc0[MAXC];
	static double xd[MAXN], yr[MAXN], dr[MAXN], t1[1], t2[1];
	for (int si = 0; si < N_SIZES; si++) {
		const int cols = k_sizes[si];
		/* element-wise kernels see n = cols, and rows x cols through the layer */
		for (int rows = 1; rows <= ROWS; rows += ROWS - 1) {
			const int n = rows * cols;
			fill(x, (size_t)n, 2.5f, 0.0f, &r); /* both tails of erf and the middle */
			ref64_from_f32(xd, x, (size_t)n);
			ref64_gelu(xd, (size_t)n, yr);
			for (int i = 0; i < n; i++) {
				double a = xd[i] + FD_H, b = xd[i] - FD_H;
				ref64_gelu(&a, 1, t1);
				ref64_gelu(&b, 1, t2);
				dr[i] = (t1[0] - t2[0]) / (2 * FD_H);
			}
			/* A&S 7.1.26 erf: |error| <= 1.5e-7, times |x|/2 in GELU; its
			 * derivative is about 1e-6 (see kernel_gelu_and_exp_match_libm) */
			fill_nan(y, (size_t)n);
			sky_k_gelu_f32(x, y, (size_t)n);
			fill_nan(y2, (size_t)n), fill_nan(d, (size_t)n);
			sky_k_gelu_fwd_grad_f32(x, y2, d, (size_t)n);
			fill(dy, (size_t)n, 1.0f, 0.0f, &r);
			memcpy(dy2, dy, (size_t)n * sizeof *dy);
			sky_k_gelu_bwd_f32(x, dy, (size_t)n);
			int bad_y = 0, bad_y2 = 0, bad_d = 0, bad_bwd = 0;
			for (int i = 0; i < n; i++) {
				double tol = 1 + fabs(xd[i]);
				bad_y += !(fabs(y[i] - yr[i]) <= 5e-7 * tol);
				bad_y2 += !(fabs(y2[i] - yr[i]) <= 5e-7 * tol);
				bad_d += !(fabs(d[i] - dr[i]) <= 2e-6 * tol);
				bad_bwd += !(fabs(dy[i] - dy2[i] * dr[i]) <= 2e-6 * tol * (1 + fabs(dy2[i])));
			}
			SKY_EXPECT_MSG(bad_y == 0, "n %d: gelu wrong at %d elements", n, bad_y);
			SKY_EXPECT_MSG(bad_y2 == 0, "n %d: gelu_fwd_grad y wrong at %d elements", n, bad_y2);
			SKY_EXPECT_MSG(bad_d == 0, "n %d: gelu_fwd_grad d wrong at %d elements", n, bad_d);
			SKY_EXPECT_MSG(bad_bwd == 0, "n %d: gelu_bwd wrong at %d elements", n, bad_bwd);

			/* dy *= d and acc += column sums of the product, rows x cols */
			fill(acc, (size_t)cols, 1.0f, 0.0f, &r);
			memcpy(acc0, acc, sizeof acc);
			sky_k_mul_colsum_f32(dy2, d, rows, cols, acc);
			int bad_mul = 0, bad_acc = 0;
			for (int j = 0; j < cols; j++) {
				double want = acc0[j], mag = fabs(acc0[j]);
				for (int rr = 0; rr < rows; rr++) {
					int i = rr * cols + j;
					double v = (double)dy[i]; /* = dy0 * gelu'(x), checked above */
					want += v;
					mag += fabs(v);
					bad_mul += !(fabs(dy2[i] - v) <= 2e-6 * (1 + fabs(v)));
				}
				bad_acc += !(fabs(acc[j] - want) <= 1e-6 * (1 + mag));
			}
			SKY_EXPECT_MSG(bad_mul == 0, "rows %d cols %d: mul_colsum product wrong at %d", rows,
				       cols, bad_mul);
			SKY_EXPECT_MSG(bad_acc == 0, "rows %d cols %d: mul_colsum sums wrong at %d", rows,
				       cols, bad_acc);
		}
	}
}
