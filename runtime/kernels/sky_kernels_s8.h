/* int8 fixed-point kernels: GEMM with int32 accumulation and a fused
 * requantising epilogue, and the integer non-linearities of an encoder layer
 * (softmax, GELU, LayerNorm, residual add) in the style of I-BERT
 * (arXiv 2101.01321). No floating point runs inside any of them.
 *
 * Every result is defined exactly in integers, so every variant gives the
 * same bits on every machine; tests compare each SIMD variant with `_ref`
 * byte for byte. The GEMM has AVX2, AVX-512 VNNI, NEON and NEON dot-product
 * variants (sky_k_s8_variant); the non-linearities and the fp32 edges have
 * AVX2, AVX-512 and NEON ones, chosen from sky_cpu_get_features().
 *
 * Requantisation (the one rounding rule, used everywhere):
 *   requant(acc, M, rs) = ((int64)acc * M + 2^(rs-1)) >> rs, then saturated
 * with M a Q31 multiplier in [2^30, 2^31) (or 0) and rs the total right
 * shift in [1, 62]: a real multiplier r = M * 2^-rs, rounded half up (toward
 * +infinity), one rounding only. |acc * M| < 2^62, so the sum never
 * overflows int64. sky_k_quant_multiplier() turns a real r into (M, rs).
 *
 * Kernels never allocate and never fail; shapes are the caller's to check. */
#ifndef SKY_KERNELS_S8_H
#define SKY_KERNELS_S8_H

#include <stddef.h>
#include <stdint.h>

/* ---- variants ------------------------------------------------------------ */

typedef enum {
	SKY_K_S8_REF = 0, /* portable C, the definition */
	SKY_K_S8_AVX2,    /* x86: vpmaddwd on sign-extended int16 */
	SKY_K_S8_VNNI,    /* x86: AVX-512 vpdpbusd (u8 x s8) */
	SKY_K_S8_NEON,    /* aarch64: smull + sadalp */
	SKY_K_S8_DOTPROD, /* aarch64: sdot (Armv8.2 DotProd, e.g. Cortex-A76 of rpi5) */
	SKY_K_S8_AMX,     /* x86: AMX tiles, tdpbsud (s8 x u8), VNNI's packing */
	SKY_K_S8_NVARIANTS
} sky_k_s8_variant;

/* "ref", "avx2", "vnni", "neon", "dotprod", "amx". */
const char *sky_k_s8_variant_name(int v);
/* 1 if variant v is built for this architecture and the CPU (after
 * SKY_CPU_DISABLE) supports it; REF always. */
int sky_k_s8_variant_supported(int v);
/* The fastest supported variant, chosen once from sky_cpu_get_features(). */
int sky_k_s8_variant_active(void);
/* 128 if variant v packs weights as W + 128 (VNNI, AMX), else 0. */
int sky_k_s8_variant_offset(int v);

/* ---- requantisation ------------------------------------------------------ */

/* Real multiplier r (> 0, finite) to a Q31 multiplier and total right shift
 * (setup code only: it uses floating point). Returns 0, or -1 if r is not
 * representable (r <= 0, not finite, or r >= 2^30); r below 2^-32 gives
 * M = 0 (every output 0). */
int sky_k_quant_multiplier(double r, int32_t *mult, int8_t *rshift);
/* The rounding rule above, for one value (int64: clamp before narrowing). */
static inline int64_t sky_k_requant1(int32_t acc, int32_t mult, int rshift)
{
	return ((int64_t)acc * mult + ((int64_t)1 << (rshift - 1))) >> rshift;
}
/* y[i] = clamp(requant(x[i] + bias[j], mult[j], rshift[j]), -128, 127) for
 * n elements, j = i % cols (per output channel; bias may be NULL). */
void sky_k_requant_s32_s8(const int32_t *x, size_t n, int cols, const int32_t *bias,
			  const int32_t *mult, const int8_t *rshift, int8_t *y);

/* ---- GEMM ---------------------------------------------------------------- */

/* Weights packed once at load time for the variant that will run them:
 * blocks of 16 output channels, K in groups of 4 bytes,
 *   data[(n / 16) * kp * 16 + (k / 4) * 64 + (n % 16) * 4 + k % 4] = W[n][k]
 * (the layout vpdpbusd, sdot and, in halves, vpmaddwd and smull want), N
 * padded to a multiple of 16 and K to a multiple of 4 with zeros. The VNNI
 * variant stores W + 128 as unsigned bytes (vpdpbusd multiplies u8 by s8;
 * the broadcast activation is the signed side) and subtracts 128 * rowsum(A)
 * after; AMX uses the very same bytes (they are its B-tile layout: K/4 rows
 * of 16 channels x 4 bytes, unsigned for tdpbsud). */
typedef struct sky_k_s8_packed {
	int n, k;       /* logical (out, in) */
	int np, kp;     /* padded to 16 and 4 */
	int variant;    /* the layout's owner (sky_k_s8_variant) */
	int offset;     /* 128 when stored as W + 128, else 0 */
	uint8_t *data;  /* np * kp bytes */
} sky_k_s8_packed;

/* Bytes sky_k_pack_s8 needs at mem for an (n, k) matrix: np * kp. */
size_t sky_k_pack_s8_bytes(int n, int k);
/* Packs W[n][k] = w[n * stride_n + k * stride_k] (so a transposed view
 * packs directly) into mem (sky_k_pack_s8_bytes() bytes, any alignment,
 * 64 recommended) for variant v (sky_k_s8_variant_active() for the fast
 * path). Weights should lie in [-127, 127] (symmetric quantisation); -128
 * works in every variant too. */
void sky_k_pack_s8(int v, const int8_t *w, int n, int k, long stride_n, long stride_k, void *mem,
		   sky_k_s8_packed *out);
/* Plain W[n][k] of a packed matrix (tests, dumps). */
int8_t sky_k_packed_get(const sky_k_s8_packed *p, int n, int k);

typedef enum {
	SKY_K_OUT_S32, /* c = acc + bias (no requantisation) */
	SKY_K_OUT_S16, /* c = clamp(requant(acc + bias), -32768, 32767) */
	SKY_K_OUT_S8   /* c = clamp(requant(acc + bias), -128, 127) */
} sky_k_out_type;

/* Where and how a GEMM writes: element (m, n) at c + m * ldc + n, with
 * per-channel bias (int32, NULL for none; added with int32 wrap-around) and,
 * for S16/S8, per-channel mult and rshift (length n). */
typedef struct sky_k_gemm_out {
	sky_k_out_type type;
	void *c;
	long ldc; /* elements */
	const int32_t *bias;
	const int32_t *mult;
	const int8_t *rshift;
} sky_k_gemm_out;

/* acc[m][n] = sum_k a[m * lda + k] * W[n][k], m < M, n < w->n, then the
 * epilogue of `out`. a is int8 (-128..127), rows of w->k bytes. Runs the
 * variant w was packed for. Sums must fit int32 (K * 128 * 255 < 2^31, so
 * K < 65793). */
void sky_k_gemm_s8(int M, const int8_t *a, long lda, const sky_k_s8_packed *w,
		   const sky_k_gemm_out *out);
void sky_k_gemm_s8_ref(int M, const int8_t *a, long lda, const sky_k_s8_packed *w,
		       const sky_k_gemm_out *out);

/* ---- integer non-linearities --------------------------------------------- */

/* Softmax over each row of int32 scores (rows x cols, ld lds), output u8
 * probabilities with scale 2^-8 (255 = 0.996; a row sums to about 256).
 * mask[j] != 0 marks column j as padding (probability 0; a row with every
 * column masked gives zeros); NULL: none. Scores are acc * s_in; with the
 * row maximum mx (over unmasked columns) the exponent in log2 units is
 *   w = requant(max(acc - mx, -dmax), mw, rsw)             (Q16, w <= 0)
 * (dmax: from there on exp is below one Q15 unit). With -w = z + r, z an
 * integer and r in [0, 1), exp = 2^-z * L(-r ln2) and L is I-BERT's
 * second-order polynomial for exp on (-ln2, 0]:
 *   L(p) = 0.3585 (p + 1.353)^2 + 0.344
 * evaluated with p and p + 1.353 in Q14 and L in Q28 (all int32), then
 * e = L >> (13 + z) in Q15; out = min(255, (e * floor(2^46 / sum e) + 2^37)
 * >> 38), i.e. round(256 e / sum e). */
typedef struct sky_k_softmax_params {
	int32_t dmax;  /* largest difference kept, in accumulator units */
	int32_t mw;    /* Q31 multiplier: difference -> Q16 log2 units */
	int8_t rsw;    /* its right shift */
} sky_k_softmax_params;
/* s_in: real value of one accumulator unit (scale of q * scale of k / sqrt(d)). */
int sky_k_softmax_s8_params(double s_in, sky_k_softmax_params *p);
void sky_k_softmax_s8(const int32_t *s, int rows, int cols, long lds, const uint8_t *mask,
		      const sky_k_softmax_params *p, uint8_t *y, long ldy);
void sky_k_softmax_s8_ref(const int32_t *s, int rows, int cols, long lds, const uint8_t *mask,
			  const sky_k_softmax_params *p, uint8_t *y, long ldy);

/* GELU on int16 input x = round(u * 2^f), u = v / sqrt2 (v the
 * pre-activation), int8 output. I-BERT's erf approximation
 *   erf(u) ~ sgn(u) [1 + a (min(|u|, -b) + b)^2],  a = -0.2888, b = -1.769
 * in int32 only:  t = min(|x|, B) - B  (Q f),  t2 = t^2 >> (2f - 14)  (Q14),
 *   E = 2^15 + ((A15 * t2 + 2^13) >> 14)  (|erf|, Q15),
 *   P = x * (2^15 + sgn(x) E)             (|P| < 2^31)
 * (B = round(1.769 * 2^f), A15 = round(a * 2^15)); P is gelu(v) = v/2 (1 +
 * erf(u)) in units of sqrt2 * 2^(-f-16), and y = clamp(requant(P, mult,
 * rshift), -128, 127). f in [7, 14]. */
typedef struct sky_k_gelu_params {
	int f;          /* input Q format: x = round(v / sqrt2 * 2^f) */
	int32_t b;      /* round(1.769 * 2^f) */
	int32_t a15;    /* round(-0.2888 * 2^15) */
	int32_t mult;   /* P -> output scale */
	int8_t rshift;
} sky_k_gelu_params;
/* s_out: scale of the int8 output. Returns 0 or -1 (f outside [7, 14], bad s_out). */
int sky_k_gelu_s8_params(int f, double s_out, sky_k_gelu_params *p);
void sky_k_gelu_s16_s8(const int16_t *x, size_t n, const sky_k_gelu_params *p, int8_t *y);
void sky_k_gelu_s16_s8_ref(const int16_t *x, size_t n, const sky_k_gelu_params *p, int8_t *y);

/* Residual add into a common int32 scale: r[i] = requant(a[i], ma, ra) +
 * requant(b[i], mb, rb), a int16 (a sub-layer's output), b int8 (its input).
 * The scales are the caller's; LayerNorm after it is scale-free. */
void sky_k_add_s16_s8(const int16_t *a, const int8_t *b, size_t n, int32_t ma, int ra, int32_t mb,
		      int rb, int32_t *r);
void sky_k_add_s16_s8_ref(const int16_t *a, const int8_t *b, size_t n, int32_t ma, int ra,
			  int32_t mb, int rb, int32_t *r);

/* Integer LayerNorm of each row of r (rows x cols int32, |r| < 2^24,
 * cols < 8192) to int8:
 *   mean = floor((sum + cols/2) / cols);  d = r - mean;
 *   sd = max(1, isqrt(floor(sum d^2 / cols)))  (exact integer square root);
 *   with L the bit length of sd, mult = floor(2^(29+L) / sd) (a Q31-style
 *   multiplier in (2^29, 2^30]) and xhat = requant(d, mult, 13 + L), which
 *   is d / sd in Q16;
 *   y = clamp((xhat * g[j] + b[j] + 2^30) >> 31, -128, 127)
 * with g = round(gamma / s_out * 2^15) and b = round(beta / s_out * 2^31).
 * Epsilon (1e-12) is far below one unit of the variance and is dropped. */
void sky_k_layernorm_s8(const int32_t *r, int rows, int cols, const int32_t *g, const int64_t *b,
			int8_t *y);
void sky_k_layernorm_s8_ref(const int32_t *r, int rows, int cols, const int32_t *g,
			    const int64_t *b, int8_t *y);
/* The per-row constants above from sum r and sum (r - mean)^2 (shared by
 * the variants so they cannot drift apart). */
void sky_k_layernorm_row_consts(int64_t sum, uint64_t ss, int cols, int32_t *mean, int32_t *mult,
				int *rshift);
int64_t sky_k_layernorm_row_sum(const int32_t *x, int cols);
/* floor(sqrt(v)) for v >= 0, exactly. */
uint32_t sky_k_isqrt64(uint64_t v);

/* fp32 <-> int8 at the edges of an int8 layer (not inner loops):
 * q = round_half_even(clamp(x * inv_s, -128, 127)); x = q * s. A NaN or
 * infinite x gives q = 0; the count of those is returned. */
size_t sky_k_quantize_f32_s8(const float *x, size_t n, float inv_s, int8_t *q);
size_t sky_k_quantize_f32_s8_ref(const float *x, size_t n, float inv_s, int8_t *q);
void sky_k_dequantize_s8_f32(const int8_t *q, size_t n, float s, float *x);
void sky_k_dequantize_s8_f32_ref(const int8_t *q, size_t n, float s, float *x);

/* ---- per-variant entry points (the dispatcher's and tests' use) ---------- */
#if defined(__x86_64__)
void sky_k_gemm_s8_avx2(int M, const int8_t *a, long lda, const sky_k_s8_packed *w,
			const sky_k_gemm_out *out);
void sky_k_gemm_s8_vnni(int M, const int8_t *a, long lda, const sky_k_s8_packed *w,
			const sky_k_gemm_out *out);
void sky_k_gemm_s8_amx(int M, const int8_t *a, long lda, const sky_k_s8_packed *w,
		       const sky_k_gemm_out *out);
void sky_k_softmax_s8_avx512(const int32_t *s, int rows, int cols, long lds, const uint8_t *mask,
			     const sky_k_softmax_params *p, uint8_t *y, long ldy);
void sky_k_gelu_s16_s8_avx512(const int16_t *x, size_t n, const sky_k_gelu_params *p, int8_t *y);
void sky_k_layernorm_s8_avx512(const int32_t *r, int rows, int cols, const int32_t *g,
			       const int64_t *b, int8_t *y);
void sky_k_add_s16_s8_avx512(const int16_t *a, const int8_t *b, size_t n, int32_t ma, int ra,
			     int32_t mb, int rb, int32_t *r);
void sky_k_softmax_s8_avx2(const int32_t *s, int rows, int cols, long lds, const uint8_t *mask,
			   const sky_k_softmax_params *p, uint8_t *y, long ldy);
void sky_k_gelu_s16_s8_avx2(const int16_t *x, size_t n, const sky_k_gelu_params *p, int8_t *y);
void sky_k_layernorm_s8_avx2(const int32_t *r, int rows, int cols, const int32_t *g,
			     const int64_t *b, int8_t *y);
void sky_k_add_s16_s8_avx2(const int16_t *a, const int8_t *b, size_t n, int32_t ma, int ra,
			   int32_t mb, int rb, int32_t *r);
size_t sky_k_quantize_f32_s8_avx2(const float *x, size_t n, float inv_s, int8_t *q);
void sky_k_dequantize_s8_f32_avx2(const int8_t *q, size_t n, float s, float *x);
size_t sky_k_quantize_f32_s8_avx512(const float *x, size_t n, float inv_s, int8_t *q);
void sky_k_dequantize_s8_f32_avx512(const int8_t *q, size_t n, float s, float *x);
#elif defined(__aarch64__)
void sky_k_gemm_s8_neon(int M, const int8_t *a, long lda, const sky_k_s8_packed *w,
			const sky_k_gemm_out *out);
void sky_k_gemm_s8_dotprod(int M, const int8_t *a, long lda, const sky_k_s8_packed *w,
			   const sky_k_gemm_out *out);
size_t sky_k_quantize_f32_s8_neon(const float *x, size_t n, float inv_s, int8_t *q);
void sky_k_dequantize_s8_f32_neon(const int8_t *q, size_t n, float s, float *x);
void sky_k_softmax_s8_neon(const int32_t *s, int rows, int cols, long lds, const uint8_t *mask,
			   const sky_k_softmax_params *p, uint8_t *y, long ldy);
void sky_k_gelu_s16_s8_neon(const int16_t *x, size_t n, const sky_k_gelu_params *p, int8_t *y);
void sky_k_layernorm_s8_neon(const int32_t *r, int rows, int cols, const int32_t *g,
			     const int64_t *b, int8_t *y);
void sky_k_add_s16_s8_neon(const int16_t *a, const int8_t *b, size_t n, int32_t ma, int ra,
			   int32_t mb, int rb, int32_t *r);
#endif

/* The epilogue for one row of n accumulators (shared by the variants that
 * do not vectorise it): acc + bias, requantise, clamp, store at c. */
void sky_k_s8_epilogue_row(const int32_t *acc, int n0, int n, const sky_k_gemm_out *out, int m);

#endif
