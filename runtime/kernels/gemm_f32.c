/* GEMM: every fp32 matrix product goes to OpenBLAS. */
#include "sky_kernels_f32.h"

#include <cblas.h>

void sky_k_gemm_f32(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
		    const float *b, int ldb, float beta, float *c, int ldc)
{
	cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
		    m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void sky_k_gemm_f32_ref(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
			const float *b, int ldb, float beta, float *c, int ldc)
{
	for (int i = 0; i < m; i++) {
		for (int j = 0; j < n; j++) {
			double s = 0;
			for (int p = 0; p < k; p++) {
				double av = ta ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p];
				double bv = tb ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j];
				s += av * bv;
			}
			float *cij = &c[(size_t)i * ldc + j];
			/* beta == 0 ignores C, as BLAS does (C may hold garbage) */
			*cij = (float)(alpha * s + (beta == 0.0f ? 0.0 : (double)beta * *cij));
		}
	}
}
