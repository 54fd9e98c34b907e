/* fp32 kernels: the building blocks of the encoder layer, embeddings and
 * head. Matrices are row-major; a leading dimension (ld) is the distance in
 * floats between rows, so a head's slice of a wider matrix is used in place.
 *
 * Kernels never allocate and never fail: shapes are validated by the caller
 * (sky_model_validate). GEMMs go to OpenBLAS (cblas_sgemm); the rest are
 * simple loops the compiler vectorises. Each has a plain `_ref` version the
 * tests compare against where the fast one differs in how it computes. */
#ifndef SKY_KERNELS_F32_H
#define SKY_KERNELS_F32_H

#include <stddef.h>

/* C(m,n) = alpha * op(A) op(B) + beta * C, op(X) = X or X^T (ta, tb != 0).
 * op(A) is (m,k), op(B) is (k,n). With beta == 1 C is read, so callers put
 * a bias (and a residual) into C first instead of a separate pass after. */
void sky_k_gemm_f32(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
		    const float *b, int ldb, float beta, float *c, int ldc);
/* Same, triple loop, accumulating in double; for tests. */
void sky_k_gemm_f32_ref(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
			const float *b, int ldb, float beta, float *c, int ldc);

/* out[r][j] = bias[j] (+ res[r][j] when res != NULL), rows x cols, ld cols.
 * The start value of a beta = 1 GEMM: bias and residual fused into it. */
void sky_k_bias_fill_f32(float *out, const float *bias, const float *res, int rows, int cols);
/* acc[j] += sum_r x[r][j]: the gradient of a bias. */
void sky_k_colsum_f32(const float *x, int rows, int cols, float *acc);
/* y[i] += x[i] */
void sky_k_add_f32(float *y, const float *x, size_t n);

/* LayerNorm over each row of x (rows x cols): y = xhat * g + b with
 * xhat = (x - mean) * rstd, rstd = 1 / sqrt(var + eps), biased variance.
 * y may equal x (in place). xhat (rows x cols) and rstd (rows) are written
 * when non-NULL, for the backward pass. */
void sky_k_layernorm_f32(const float *x, int rows, int cols, const float *g, const float *b,
			 float eps, float *y, float *xhat, float *rstd);
/* Backward of the above: dx = rstd * (dxh - mean(dxh) - xhat * mean(dxh * xhat))
 * with dxh = dy * g (dx written; dx may equal dy); dg += sum_r dy * xhat,
 * db += sum_r dy; and, when dsum is not NULL, dsum += sum_r dx: the bias
 * gradient of the linear layer before the LayerNorm, fused in. */
void sky_k_layernorm_bwd_f32(const float *dy, const float *xhat, const float *rstd, const float *g,
			     int rows, int cols, float *dx, float *dg, float *db, float *dsum);

/* Exact GELU, x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)), element-wise; y may
 * equal x. The fast version uses a vectorisable erf (max abs error about
 * 2e-7, below float resolution at 1); _ref uses libm erff. */
void sky_k_gelu_f32(const float *x, float *y, size_t n);
void sky_k_gelu_f32_ref(const float *x, float *y, size_t n);
/* y = gelu(x) and d = gelu'(x) in one pass (they share erf's exponential),
 * so training keeps d for backward instead of x. */
void sky_k_gelu_fwd_grad_f32(const float *x, float *y, float *d, size_t n);
/* The tanh GELU (HuggingFace "gelu_new", "gelu_pytorch_tanh"):
 * 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), with tanh from
 * the fast exp (tanh u = 1 - 2 / (e^{2u} + 1), absolute error a few 1e-7);
 * y may equal x. fwd_grad also writes d = gelu'(x). _ref uses libm tanhf. */
void sky_k_gelu_tanh_f32(const float *x, float *y, size_t n);
void sky_k_gelu_tanh_fwd_grad_f32(const float *x, float *y, float *d, size_t n);
void sky_k_gelu_tanh_f32_ref(const float *x, float *y, size_t n);
/* dy[r][j] *= d[r][j] and acc[j] += the product (the bias gradient of the
 * linear layer before the GELU), rows x cols. */
void sky_k_mul_colsum_f32(float *dy, const float *d, int rows, int cols, float *acc);
/* dy[i] *= gelu'(x[i]) = Phi(x) + x phi(x). */
void sky_k_gelu_bwd_f32(const float *x, float *dy, size_t n);
void sky_k_gelu_bwd_f32_ref(const float *x, float *dy, size_t n);

/* Row softmax in place on s (rows x cols, ld cols) after adding mask[j]
 * (additive, per column; NULL for none) to every row. */
void sky_k_softmax_f32(float *s, int rows, int cols, const float *mask);
/* Softmax backward in place: ds = p * (ds - sum_j ds * p) * scale (the
 * attention scale folded in), rows x cols. */
void sky_k_softmax_bwd_f32(const float *p, float *ds, int rows, int cols, float scale);

/* Vectorisable exp for x in [-88, 88] (smaller gives 0), relative error
 * about 2e-7; fills y (may equal x). Used by softmax. */
void sky_k_exp_f32(const float *x, float *y, size_t n);

#endif
