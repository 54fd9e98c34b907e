/* int8 GEMM: the definition (_ref), weight packing, requantisation and the
 * run-time choice of the SIMD variant (see sky_kernels_s8.h). */
#include "sky_kernels_s8.h"

#include "sky_cpu.h"
#include "sky_thread.h"

#include <math.h>
#include <string.h>

const char *sky_k_s8_variant_name(int v)
{
	static const char *names[SKY_K_S8_NVARIANTS] = {"ref", "avx2", "vnni", "neon", "dotprod",
								 "amx"};
	return v >= 0 && v < SKY_K_S8_NVARIANTS ? names[v] : "?";
}

int sky_k_s8_variant_supported(int v)
{
	sky_cpu_features f = sky_cpu_get_features();
	switch (v) {
	case SKY_K_S8_REF:
		return 1;
#if defined(__x86_64__)
	case SKY_K_S8_AVX2:
		return f.avx2;
	case SKY_K_S8_VNNI:
		return f.avx512vnni;
	case SKY_K_S8_AMX:
		return f.amx;
#elif defined(__aarch64__)
	case SKY_K_S8_NEON:
		return f.neon;
	case SKY_K_S8_DOTPROD:
		return f.dotprod;
#endif
	default:
		(void)f;
		return 0;
	}
}

static int g_chosen_once;
static int g_chosen; /* written once, under sky_once */

static void choose_variant(void)
{
	static const int order[] = {SKY_K_S8_AMX, SKY_K_S8_VNNI, SKY_K_S8_AVX2, SKY_K_S8_DOTPROD,
				    SKY_K_S8_NEON};
	g_chosen = SKY_K_S8_REF;
	for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
		if (sky_k_s8_variant_supported(order[i])) {
			g_chosen = order[i];
			break;
		}
	}
}

int sky_k_s8_variant_active(void)
{
	sky_once(&g_chosen_once, choose_variant);
	return g_chosen;
}

int sky_k_s8_variant_offset(int v)
{
	return v == SKY_K_S8_VNNI || v == SKY_K_S8_AMX ? 128 : 0;
}

int sky_k_quant_multiplier(double r, int32_t *mult, int8_t *rshift)
{
	if (!(r > 0) || !isfinite(r) || r >= 1073741824.0)
		return -1;
	int e;
	double m = frexp(r, &e); /* r = m * 2^e, m in [0.5, 1) */
	int64_t q = (int64_t)llround(m * 2147483648.0);
	if (q == ((int64_t)1 << 31)) { /* m rounded up to 1 */
		q >>= 1;
		e++;
	}
	int rs = 31 - e;
	if (rs > 62) { /* r < 2^-32: every requantised value rounds to 0 */
		*mult = 0;
		*rshift = 1;
		return 0;
	}
	if (rs < 1)
		return -1;
	*mult = (int32_t)q;
	*rshift = (int8_t)rs;
	return 0;
}

static int32_t clamp32(int64_t v, int32_t lo, int32_t hi)
{
	return v < lo ? lo : v > hi ? hi : (int32_t)v;
}

static int32_t add_wrap(int32_t a, int32_t b) { return (int32_t)((uint32_t)a + (uint32_t)b); }

void sky_k_requant_s32_s8(const int32_t *x, size_t n, int cols, const int32_t *bias,
			  const int32_t *mult, const int8_t *rshift, int8_t *y)
{
	for (size_t i = 0; i < n; i++) {
		int j = (int)(i % (size_t)cols);
		int32_t v = bias ? add_wrap(x[i], bias[j]) : x[i];
		y[i] = (int8_t)clamp32(sky_k_requant1(v, mult[j], rshift[j]), -128, 127);
	}
}

size_t sky_k_pack_s8_bytes(int n, int k)
{
	size_t np = ((size_t)n + 15) & ~(size_t)15, kp = ((size_t)k + 3) & ~(size_t)3;
	return np * kp;
}

void sky_k_pack_s8(int v, const int8_t *w, int n, int k, long stride_n, long stride_k, void *mem,
		   sky_k_s8_packed *out)
{
	out->n = n;
	out->k = k;
	out->np = (n + 15) & ~15;
	out->kp = (k + 3) & ~3;
	out->variant = v;
	out->offset = sky_k_s8_variant_offset(v);
	out->data = mem;
	/* + 128 modulo 256 is a flip of the top bit */
	uint8_t off = (uint8_t)out->offset;
	uint32_t off4 = off ? 0x80808080u : 0;
	size_t kp = (size_t)out->kp;
	for (int nb = 0; nb < out->np / 16; nb++) {
		uint8_t *blk = out->data + (size_t)nb * kp * 16;
		const int8_t *wb = w + (long)nb * 16 * stride_n;
		int nfull = nb * 16 + 16 <= n;
		for (int k4 = 0; k4 < out->kp / 4; k4++) {
			uint8_t *dst = blk + (size_t)k4 * 64;
			int kk0 = k4 * 4;
			if (nfull && kk0 + 4 <= k && stride_k == 1) { /* rows: 4 bytes at a time */
				for (int c = 0; c < 16; c++) {
					uint32_t word;
					memcpy(&word, wb + c * stride_n + kk0, 4);
					word ^= off4;
					memcpy(dst + c * 4, &word, 4);
				}
			} else if (nfull && kk0 + 4 <= k) {
				for (int c = 0; c < 16; c++)
					for (int q = 0; q < 4; q++)
						dst[c * 4 + q] = (uint8_t)(wb[c * stride_n + (long)(kk0 + q) * stride_k] ^ off);
			} else { /* an edge block: padding with (biased) zeros */
				for (int c = 0; c < 16; c++) {
					int nn = nb * 16 + c;
					for (int q = 0; q < 4; q++) {
						int kk = kk0 + q;
						int8_t val = nn < n && kk < k
								     ? w[(long)nn * stride_n + (long)kk * stride_k]
								     : 0;
						dst[c * 4 + q] = (uint8_t)((uint8_t)val ^ off);
					}
				}
			}
		}
	}
}

int8_t sky_k_packed_get(const sky_k_s8_packed *p, int n, int k)
{
	uint8_t b = p->data[(size_t)(n / 16) * p->kp * 16 + (size_t)(k / 4) * 64 + (n % 16) * 4 +
			    k % 4];
	return (int8_t)(uint8_t)(b - (uint8_t)p->offset);
}

void sky_k_s8_epilogue_row(const int32_t *acc, int n0, int n, const sky_k_gemm_out *o, int m)
{
	for (int j = 0; j < n; j++) {
		int nn = n0 + j;
		int32_t v = o->bias ? add_wrap(acc[j], o->bias[nn]) : acc[j];
		switch (o->type) {
		case SKY_K_OUT_S32:
			((int32_t *)o->c)[m * o->ldc + nn] = v;
			break;
		case SKY_K_OUT_S16:
			((int16_t *)o->c)[m * o->ldc + nn] = (int16_t)clamp32(
				sky_k_requant1(v, o->mult[nn], o->rshift[nn]), -32768, 32767);
			break;
		case SKY_K_OUT_S8:
			((int8_t *)o->c)[m * o->ldc + nn] = (int8_t)clamp32(
				sky_k_requant1(v, o->mult[nn], o->rshift[nn]), -128, 127);
			break;
		}
	}
}

void sky_k_gemm_s8_ref(int M, const int8_t *a, long lda, const sky_k_s8_packed *w,
		       const sky_k_gemm_out *out)
{
	int32_t acc[16];
	for (int m = 0; m < M; m++) {
		const int8_t *ar = a + m * lda;
		for (int n0 = 0; n0 < w->n; n0 += 16) {
			int nn = w->n - n0 < 16 ? w->n - n0 : 16;
			for (int j = 0; j < nn; j++) {
				int32_t s = 0;
				for (int k = 0; k < w->k; k++)
					s += (int32_t)ar[k] * sky_k_packed_get(w, n0 + j, k);
				acc[j] = s;
			}
			sky_k_s8_epilogue_row(acc, n0, nn, out, m);
		}
	}
}

void sky_k_gemm_s8(int M, const int8_t *a, long lda, const sky_k_s8_packed *w,
		   const sky_k_gemm_out *out)
{
	switch (w->variant) {
#if defined(__x86_64__)
	case SKY_K_S8_AVX2:
		sky_k_gemm_s8_avx2(M, a, lda, w, out);
		return;
	case SKY_K_S8_VNNI:
		sky_k_gemm_s8_vnni(M, a, lda, w, out);
		return;
	case SKY_K_S8_AMX:
		/* the feature query is also what asks Linux for the tile state
		 * (without it the first tile instruction is SIGILL); VNNI runs
		 * the same packed bytes when AMX is off */
		if (sky_cpu_get_features().amx)
			sky_k_gemm_s8_amx(M, a, lda, w, out);
		else
			sky_k_gemm_s8_vnni(M, a, lda, w, out);
		return;
#elif defined(__aarch64__)
	case SKY_K_S8_NEON:
		sky_k_gemm_s8_neon(M, a, lda, w, out);
		return;
	case SKY_K_S8_DOTPROD:
		sky_k_gemm_s8_dotprod(M, a, lda, w, out);
		return;
#endif
	default:
		sky_k_gemm_s8_ref(M, a, lda, w, out);
		return;
	}
}
