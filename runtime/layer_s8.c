/* The int8 encoder layer: calibration (an fp32 forward that records
 * ranges), quantisation, setup of the fixed-point constants, and the
 * integer forward (see sky_layer_s8.h for the data path). */
#include "sky_layer_s8.h"

#include "sky_kernels_f32.h"
#include "sky_layer.h"
#include "sky_tensor.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

/* Rows of the FFN pre-activation kept at once (int16, F wide: 768 KB for
 * base), the GEMM's own row block, so GELU reads it from L2. */
#define SKY_S8_ROW_BLOCK 128

static const char *k_points[SKY_Q_NPOINTS] = {"x",  "q", "k", "v", "ctx", "ao",
					       "h1", "u", "g", "fo", "y"};

const char *sky_q_point_name(int i) { return i >= 0 && i < SKY_Q_NPOINTS ? k_points[i] : "?"; }

void sky_layer_s8_calib_init(sky_layer_s8_calib *cal) { memset(cal, 0, sizeof *cal); }

/* ---- calibration ---------------------------------------------------------- */

typedef struct calib_layout {
	size_t qkv, ctx, ao, h1, u, fo, p, total;
} calib_layout;

static calib_layout calib_lay(const sky_model_cfg *c)
{
	calib_layout L;
	size_t t = (size_t)sky_model_tokens(c), h = (size_t)c->hidden, f = (size_t)c->ffn;
	size_t off = 0;
	L.qkv = off, off += t * 3 * h;
	L.ctx = off, off += t * h;
	L.ao = off, off += t * h;
	L.h1 = off, off += t * h;
	L.u = off, off += t * f;
	L.fo = off, off += t * h;
	L.p = off, off += (size_t)c->seq * c->seq;
	L.total = off;
	return L;
}

size_t sky_layer_s8_calib_scratch_floats(const sky_model_cfg *c) { return calib_lay(c).total; }

/* Raises *mx to max |x| over rows x cols (stride ld); fails on NaN/inf. */
static int absmax_check(const float *x, int rows, int cols, long ld, float *mx, const char *what,
			sky_diag *d)
{
	float m = *mx;
	for (int r = 0; r < rows; r++)
		for (int j = 0; j < cols; j++) {
			float v = x[r * ld + j];
			if (!isfinite(v))
				return sky_diag_set(d, SKY_EINVAL,
						    "calibration batch: %s holds %s at token %d, column %d",
						    what, isnan(v) ? "NaN" : "infinity", r, j);
			v = fabsf(v);
			if (v > m)
				m = v;
		}
	*mx = m;
	return 0;
}

int sky_layer_s8_supports(const sky_model_cfg *c, sky_diag *d)
{
	if (c->act != SKY_ACT_GELU_ERF)
		return sky_diag_set(d, SKY_EUNSUPPORTED,
				    "int8 layers compute the erf GELU only; model %s has %s "
				    "(use fp32)",
				    c->name, sky_model_act_name(c->act));
	if (sky_model_ln_eps(c) != SKY_MODEL_LN_EPS)
		return sky_diag_set(d, SKY_EUNSUPPORTED,
				    "int8 layers assume layer_norm_eps %g; model %s has %g (use fp32)",
				    (double)SKY_MODEL_LN_EPS, c->name, (double)sky_model_ln_eps(c));
	return 0;
}

int sky_layer_s8_calibrate(const sky_model_cfg *c, const float *w, const float *x,
			   const float *mask, float *scratch, sky_layer_s8_calib *cal, sky_diag *d)
{
	int rc0 = sky_layer_s8_supports(c, d);
	if (rc0)
		return rc0;
	const int T = (int)sky_model_tokens(c), H = c->hidden, F = c->ffn, S = c->seq;
	const int NH = c->heads, D = H / NH, H3 = 3 * H;
	calib_layout L = calib_lay(c);
	float *qkv = scratch + L.qkv, *ctx = scratch + L.ctx, *ao = scratch + L.ao;
	float *h1 = scratch + L.h1, *u = scratch + L.u, *fo = scratch + L.fo, *p = scratch + L.p;
	float *am = cal->absmax;
	sky_layer_view v;
	sky_layer_bind(c, (float *)w, &v);
	int rc;

	if ((rc = absmax_check(x, T, H, H, &am[SKY_Q_X], "the input", d)) != 0)
		return rc;
	if (mask) {
		for (int t = 0; t < T; t++)
			if (isnan(mask[t]) || mask[t] > 0 || (isinf(mask[t]) && mask[t] > 0))
				return sky_diag_set(d, SKY_EINVAL,
						    "calibration batch: the mask at token %d is %g "
						    "(expected 0 or a negative number)",
						    t, mask[t]);
	}
	/* the fp32 layer, step by step (as runtime/layer.c), keeping each point */
	sky_k_bias_fill_f32(qkv, v.bqkv, NULL, T, H3);
	sky_k_gemm_f32(0, 1, T, H3, H, 1.0f, x, H, v.wqkv, H, 1.0f, qkv, H3);
	if ((rc = absmax_check(qkv, T, H, H3, &am[SKY_Q_Q], "the query projection", d)) ||
	    (rc = absmax_check(qkv + H, T, H, H3, &am[SKY_Q_K], "the key projection", d)) ||
	    (rc = absmax_check(qkv + 2 * H, T, H, H3, &am[SKY_Q_V], "the value projection", d)))
		return rc;
	for (int b = 0; b < c->batch; b++) {
		const float *mb = mask ? mask + (size_t)b * S : NULL;
		for (int hd = 0; hd < NH; hd++) {
			const float *q = qkv + (size_t)b * S * H3 + (size_t)hd * D;
			sky_k_gemm_f32(0, 1, S, S, D, 1.0f / sqrtf((float)D), q, H3, q + H, H3, 0.0f,
				       p, S);
			sky_k_softmax_f32(p, S, S, mb);
			sky_k_gemm_f32(0, 0, S, D, S, 1.0f, p, S, q + 2 * H, H3, 0.0f,
				       ctx + (size_t)b * S * H + (size_t)hd * D, H);
		}
	}
	if ((rc = absmax_check(ctx, T, H, H, &am[SKY_Q_CTX], "the attention context", d)) != 0)
		return rc;
	sky_k_bias_fill_f32(ao, v.bo, NULL, T, H);
	sky_k_gemm_f32(0, 1, T, H, H, 1.0f, ctx, H, v.wo, H, 1.0f, ao, H);
	if ((rc = absmax_check(ao, T, H, H, &am[SKY_Q_AO], "the attention output", d)) != 0)
		return rc;
	for (size_t i = 0; i < (size_t)T * H; i++)
		h1[i] = ao[i] + x[i];
	sky_k_layernorm_f32(h1, T, H, v.ln1_g, v.ln1_b, SKY_LN_EPS, h1, NULL, NULL);
	if ((rc = absmax_check(h1, T, H, H, &am[SKY_Q_H1], "LayerNorm1's output", d)) != 0)
		return rc;
	sky_k_bias_fill_f32(u, v.b1, NULL, T, F);
	sky_k_gemm_f32(0, 1, T, F, H, 1.0f, h1, H, v.w1, H, 1.0f, u, F);
	if ((rc = absmax_check(u, T, F, F, &am[SKY_Q_U], "the FFN pre-activation", d)) != 0)
		return rc;
	sky_k_gelu_f32(u, u, (size_t)T * F);
	if ((rc = absmax_check(u, T, F, F, &am[SKY_Q_G], "the GELU output", d)) != 0)
		return rc;
	sky_k_bias_fill_f32(fo, v.b2, NULL, T, H);
	sky_k_gemm_f32(0, 1, T, H, F, 1.0f, u, F, v.w2, F, 1.0f, fo, H);
	if ((rc = absmax_check(fo, T, H, H, &am[SKY_Q_FO], "the FFN output", d)) != 0)
		return rc;
	for (size_t i = 0; i < (size_t)T * H; i++)
		fo[i] += h1[i];
	sky_k_layernorm_f32(fo, T, H, v.ln2_g, v.ln2_b, SKY_LN_EPS, fo, NULL, NULL);
	if ((rc = absmax_check(fo, T, H, H, &am[SKY_Q_Y], "the layer output", d)) != 0)
		return rc;
	cal->batches++;
	return 0;
}

/* ---- carving -------------------------------------------------------------- */

static size_t fvec_count(const sky_model_cfg *c) { return 9 * (size_t)c->hidden + c->ffn; }

static void carve_packed(sky_k_s8_packed *p, int n, int k, int variant, sky_arena *a, sky_life life)
{
	memset(p, 0, sizeof *p);
	p->n = n, p->k = k, p->np = (n + 15) & ~15, p->kp = (k + 3) & ~3;
	p->variant = variant;
	p->offset = sky_k_s8_variant_offset(variant);
	p->data = sky_arena_alloc(a, sky_k_pack_s8_bytes(n, k), life);
}

size_t sky_layer_s8_tmp_bytes(const sky_model_cfg *c)
{
	size_t h = (size_t)c->hidden, f = (size_t)c->ffn;
	return 3 * h * h > h * f ? 3 * h * h : h * f;
}

size_t sky_layer_s8_weight_bytes(const sky_model_cfg *c)
{
	int H = c->hidden, F = c->ffn;
	return sky_k_pack_s8_bytes(3 * H, H) + sky_k_pack_s8_bytes(H, H) +
	       sky_k_pack_s8_bytes(F, H) + sky_k_pack_s8_bytes(H, F);
}

void sky_layer_s8_share_scratch(sky_layer_s8 *L, const sky_layer_s8 *from)
{
	L->x8 = from->x8, L->qkv8 = from->qkv8, L->ctx8 = from->ctx8, L->h1_8 = from->h1_8;
	L->g8 = from->g8, L->a16 = from->a16, L->maskbits = from->maskbits;
	L->ws = from->ws, L->workers = from->workers, L->pool = from->pool;
}

static void carve_impl(sky_layer_s8 *L, const sky_model_cfg *c, int variant, sky_arena *a,
		       int with_scratch)
{
	memset(L, 0, sizeof *L);
	L->cfg = *c;
	L->variant = variant;
	size_t H = (size_t)c->hidden, F = (size_t)c->ffn, T = (size_t)sky_model_tokens(c);
	size_t S = (size_t)c->seq, D = H / (size_t)c->heads;
	const sky_life P = SKY_LIFE_PERSIST, X = SKY_LIFE_SCRATCH;
	carve_packed(&L->wqkv, (int)(3 * H), (int)H, variant, a, P);
	carve_packed(&L->wo, (int)H, (int)H, variant, a, P);
	carve_packed(&L->w1, (int)F, (int)H, variant, a, P);
	carve_packed(&L->w2, (int)H, (int)F, variant, a, P);
	L->sw_qkv = sky_arena_floats(a, 3 * H, P);
	L->sw_o = sky_arena_floats(a, H, P);
	L->sw_1 = sky_arena_floats(a, F, P);
	L->sw_2 = sky_arena_floats(a, H, P);
	L->fvec = sky_arena_floats(a, fvec_count(c), P);
	L->bqkv = sky_arena_alloc(a, 4 * 3 * H, P);
	L->bo = sky_arena_alloc(a, 4 * H, P);
	L->b1 = sky_arena_alloc(a, 4 * F, P);
	L->b2 = sky_arena_alloc(a, 4 * H, P);
	L->mqkv = sky_arena_alloc(a, 4 * 3 * H, P);
	L->mo = sky_arena_alloc(a, 4 * H, P);
	L->m1 = sky_arena_alloc(a, 4 * F, P);
	L->m2 = sky_arena_alloc(a, 4 * H, P);
	L->mctx = sky_arena_alloc(a, 4 * D, P);
	L->rqkv = sky_arena_alloc(a, 3 * H, P);
	L->ro = sky_arena_alloc(a, H, P);
	L->r1 = sky_arena_alloc(a, F, P);
	L->r2 = sky_arena_alloc(a, H, P);
	L->rctx = sky_arena_alloc(a, D, P);
	L->ln1_g = sky_arena_alloc(a, 4 * H, P);
	L->ln2_g = sky_arena_alloc(a, 4 * H, P);
	L->ln1_b = sky_arena_alloc(a, 8 * H, P);
	L->ln2_b = sky_arena_alloc(a, 8 * H, P);
	(void)T, (void)S, (void)X;
	if (with_scratch)
		sky_layer_s8_carve_scratch(L, a);
}

void sky_layer_s8_carve(sky_layer_s8 *L, const sky_model_cfg *c, int variant, sky_arena *a)
{
	carve_impl(L, c, variant, a, 1);
}

void sky_layer_s8_carve_persist(sky_layer_s8 *L, const sky_model_cfg *c, int variant, sky_arena *a)
{
	carve_impl(L, c, variant, a, 0);
}

void sky_layer_s8_carve_scratch(sky_layer_s8 *L, sky_arena *a)
{
	sky_layer_s8_carve_scratch_mt(L, a, 1);
}

void sky_layer_s8_carve_scratch_mt(sky_layer_s8 *L, sky_arena *a, int workers)
{
	const sky_model_cfg *c = &L->cfg;
	size_t H = (size_t)c->hidden, F = (size_t)c->ffn, T = (size_t)sky_model_tokens(c);
	size_t S = (size_t)c->seq, D = H / (size_t)c->heads;
	const sky_life X = SKY_LIFE_SCRATCH;
	int variant = L->variant;
	if (workers < 1 || workers > SKY_POOL_MAX_THREADS)
		workers = 1;
	/* every activation of one forward, int8/16 */
	L->x8 = sky_arena_alloc(a, T * H, X);
	L->qkv8 = sky_arena_alloc(a, T * 3 * H, X);
	L->ctx8 = sky_arena_alloc(a, T * H, X);
	L->h1_8 = sky_arena_alloc(a, T * H, X);
	L->g8 = sky_arena_alloc(a, T * F, X);
	L->a16 = sky_arena_alloc(a, 2 * T * H, X);
	L->maskbits = sky_arena_alloc(a, T, X);
	/* per worker */
	L->workers = workers;
	L->pool = NULL;
	L->ws = sky_arena_alloc(a, sizeof *L->ws * (size_t)workers, X);
	for (int w = 0; w < workers; w++) {
		sky_layer_s8_ws tmp, *ws = L->ws ? &L->ws[w] : &tmp; /* NULL while measuring */
		ws->pbuf = sky_arena_alloc(a, S * S, X);
		ws->u16 = sky_arena_alloc(a, 2 * (T < SKY_S8_ROW_BLOCK ? T : SKY_S8_ROW_BLOCK) * F, X);
		ws->r32 = sky_arena_alloc(a, 4 * H, X);
		ws->scores = sky_arena_alloc(a, 4 * S * S, X);
		ws->cbias = sky_arena_alloc(a, 4 * D, X);
		carve_packed(&ws->kh, (int)S, (int)D, variant, a, X);
		carve_packed(&ws->vh, (int)D, (int)S, variant, a, X);
	}
}

int sky_layer_s8_use_pool(sky_layer_s8 *L, sky_pool *pool)
{
	if (sky_pool_threads(pool) > L->workers)
		return SKY_EINVAL;
	L->pool = pool;
	return 0;
}

/* ---- quantisation and setup ------------------------------------------------ */

/* Quantises rows x cols of w per row into q (scale absmax / 127, or 1 for
 * an all-zero row so no scale is ever zero). */
static int quant_rows(const float *w, int rows, int cols, int8_t *q, float *scale, const char *what,
		      sky_diag *d)
{
	for (int r = 0; r < rows; r++) {
		const float *wr = w + (size_t)r * cols;
		float m = 0;
		for (int j = 0; j < cols; j++) {
			if (!isfinite(wr[j]))
				return sky_diag_set(d, SKY_EINVAL, "weights %s: %s at row %d, column %d",
						    what, isnan(wr[j]) ? "NaN" : "infinity", r, j);
			m = fmaxf(m, fabsf(wr[j]));
		}
		float s = m > 0 ? m / 127.0f : 1.0f;
		scale[r] = s;
		for (int j = 0; j < cols; j++) {
			float v = nearbyintf(wr[j] / s);
			q[(size_t)r * cols + j] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
		}
	}
	return 0;
}

int sky_layer_s8_from_f32(sky_layer_s8 *L, const float *w, const sky_layer_s8_calib *cal,
			  void *tmp, sky_diag *d)
{
	const sky_model_cfg *c = &L->cfg;
	const int H = c->hidden, F = c->ffn;
	sky_layer_view v;
	sky_layer_bind(c, (float *)w, &v);
	int8_t *q = tmp;
	int rc;
	if (cal->batches < 1)
		return sky_diag_set(d, SKY_EINVAL, "int8 layer: no calibration batch was run");
	memcpy(L->absmax, cal->absmax, sizeof L->absmax);
	/* one matrix at a time through tmp, packed for the kernels */
	if ((rc = quant_rows(v.wqkv, 3 * H, H, q, L->sw_qkv, "attention.self.{query,key,value}", d)))
		return rc;
	sky_k_pack_s8(L->variant, q, 3 * H, H, H, 1, L->wqkv.data, &L->wqkv);
	if ((rc = quant_rows(v.wo, H, H, q, L->sw_o, "attention.output.dense", d)))
		return rc;
	sky_k_pack_s8(L->variant, q, H, H, H, 1, L->wo.data, &L->wo);
	if ((rc = quant_rows(v.w1, F, H, q, L->sw_1, "intermediate.dense", d)))
		return rc;
	sky_k_pack_s8(L->variant, q, F, H, H, 1, L->w1.data, &L->w1);
	if ((rc = quant_rows(v.w2, H, F, q, L->sw_2, "output.dense", d)))
		return rc;
	sky_k_pack_s8(L->variant, q, H, F, F, 1, L->w2.data, &L->w2);
	/* the vectors, in table order: bq bk bv | bo ln1 g b | b1 | b2 ln2 g b */
	float *fv = L->fvec;
	memcpy(fv, v.bqkv, sizeof(float) * 3 * H), fv += 3 * H;
	memcpy(fv, v.bo, sizeof(float) * 3 * H), fv += 3 * H; /* bo ln1_g ln1_b adjacent */
	memcpy(fv, v.b1, sizeof(float) * F), fv += F;
	memcpy(fv, v.b2, sizeof(float) * 3 * H); /* b2 ln2_g ln2_b adjacent */
	for (size_t i = 0; i < fvec_count(c); i++)
		if (!isfinite(L->fvec[i]))
			return sky_diag_set(d, SKY_EINVAL, "weights: a bias or LayerNorm value is %s",
					    isnan(L->fvec[i]) ? "NaN" : "infinite");
	return sky_layer_s8_setup(L, d);
}

static int mult_of(double r, int32_t *m, int8_t *rs, const char *what, sky_diag *d)
{
	if (sky_k_quant_multiplier(r, m, rs) != 0)
		return sky_diag_set(d, SKY_ERANGE, "int8 layer: %s rescale factor %g is not representable",
				    what, r);
	return 0;
}

/* int32 bias b / (s_in * s_w[j]) and multipliers s_in * s_w[j] / s_out[j] */
static int setup_linear(int n, const float *bias, const float *sw, double s_in, const double *s_out,
			int out_per, int32_t *b32, int32_t *m, int8_t *rs, const char *what,
			sky_diag *d)
{
	for (int j = 0; j < n; j++) {
		double sa = s_in * sw[j];
		double bq = nearbyint(bias[j] / sa);
		if (!(fabs(bq) < 1073741824.0))
			return sky_diag_set(d, SKY_ERANGE,
					    "int8 layer: %s bias %d (%g) does not fit int32 at scale %g",
					    what, j, bias[j], sa);
		b32[j] = (int32_t)bq;
		int rc = mult_of(sa / s_out[j / out_per], &m[j], &rs[j], what, d);
		if (rc)
			return rc;
	}
	return 0;
}

static int setup_ln(int n, const float *g, const float *b, double s_out, int32_t *gq, int64_t *bq,
		    const char *what, sky_diag *d)
{
	for (int j = 0; j < n; j++) {
		double gv = nearbyint(g[j] / s_out * 32768.0), bv = nearbyint(b[j] / s_out * 2147483648.0);
		if (!(fabs(gv) < 2147483647.0) || !(fabs(bv) < 4.0e18))
			return sky_diag_set(d, SKY_ERANGE, "int8 layer: %s value %d out of range", what, j);
		gq[j] = (int32_t)gv;
		bq[j] = (int64_t)bv;
	}
	return 0;
}

int sky_layer_s8_setup(sky_layer_s8 *L, sky_diag *d)
{
	int rc0 = sky_layer_s8_supports(&L->cfg, d);
	if (rc0)
		return rc0;
	const sky_model_cfg *c = &L->cfg;
	const int H = c->hidden, F = c->ffn, D = H / c->heads;
	const float *am = L->absmax;
	double s[SKY_Q_NPOINTS];
	for (int i = 0; i < SKY_Q_NPOINTS; i++) {
		if (!(am[i] > 0) || !isfinite(am[i]))
			return sky_diag_set(d, SKY_EINVAL,
					    "int8 layer: activation '%s' has range %g, which gives a "
					    "scale of zero or not a number (calibrate on a batch with "
					    "finite, non-zero values)",
					    k_points[i], am[i]);
	}
	for (int i = 0; i < SKY_Q_NPOINTS; i++)
		s[i] = am[i] / 127.0;
	/* the H-wide projections feed residual adds: int16 */
	s[SKY_Q_AO] = am[SKY_Q_AO] / 32767.0;
	s[SKY_Q_FO] = am[SKY_Q_FO] / 32767.0;
	/* the FFN pre-activation: int16 in Q f of u / sqrt2, the largest f that holds it */
	int f = (int)floor(log2(32767.0 * sqrt(2.0) / am[SKY_Q_U]));
	if (f > 14)
		f = 14;
	if (f < 7)
		return sky_diag_set(d, SKY_ERANGE,
				    "int8 layer: FFN pre-activation range %g is too wide for GELU's Q format",
				    am[SKY_Q_U]);
	s[SKY_Q_U] = sqrt(2.0) * ldexp(1.0, -f);
	for (int j = 0; j < 3 * H + H + F + H; j++) {
		float sw = j < 3 * H ? L->sw_qkv[j]
			   : j < 4 * H ? L->sw_o[j - 3 * H]
			   : j < 4 * H + F ? L->sw_1[j - 4 * H] : L->sw_2[j - 4 * H - F];
		if (!(sw > 0) || !isfinite(sw))
			return sky_diag_set(d, SKY_EINVAL, "int8 layer: weight scale %d is %g (must be "
					    "positive and finite)", j, sw);
	}
	const float *fv = L->fvec;
	const float *bqkv = fv, *bo = fv + 3 * H, *ln1g = fv + 4 * H, *ln1b = fv + 5 * H;
	const float *b1 = fv + 6 * H, *b2 = fv + 6 * H + F, *ln2g = b2 + H, *ln2b = b2 + 2 * H;
	double out_qkv[3] = {s[SKY_Q_Q], s[SKY_Q_K], s[SKY_Q_V]};
	int rc;
	if ((rc = setup_linear(3 * H, bqkv, L->sw_qkv, s[SKY_Q_X], out_qkv, H, L->bqkv, L->mqkv,
			       L->rqkv, "attention.self", d)) ||
	    (rc = setup_linear(H, bo, L->sw_o, s[SKY_Q_CTX], &s[SKY_Q_AO], H, L->bo, L->mo, L->ro,
			       "attention.output.dense", d)) ||
	    (rc = setup_linear(F, b1, L->sw_1, s[SKY_Q_H1], &s[SKY_Q_U], F, L->b1, L->m1, L->r1,
			       "intermediate.dense", d)) ||
	    (rc = setup_linear(H, b2, L->sw_2, s[SKY_Q_G], &s[SKY_Q_FO], H, L->b2, L->m2, L->r2,
			       "output.dense", d)))
		return rc;
	/* context: p (scale 2^-8) times v8 */
	for (int j = 0; j < D; j++)
		if ((rc = mult_of(s[SKY_Q_V] / 256.0 / s[SKY_Q_CTX], &L->mctx[j], &L->rctx[j],
				  "attention context", d)))
			return rc;
	if (sky_k_softmax_s8_params(s[SKY_Q_Q] * s[SKY_Q_K] / sqrt((double)D), &L->sm) != 0)
		return sky_diag_set(d, SKY_ERANGE, "int8 layer: softmax input scale out of range");
	if (sky_k_gelu_s8_params(f, s[SKY_Q_G], &L->gelu) != 0)
		return sky_diag_set(d, SKY_ERANGE, "int8 layer: GELU output scale out of range");
	/* residual adds into a common scale where the sum stays below 2^23 */
	double sr1 = (32767.0 * s[SKY_Q_AO] + 127.0 * s[SKY_Q_X]) / 8388608.0;
	double sr2 = (32767.0 * s[SKY_Q_FO] + 127.0 * s[SKY_Q_H1]) / 8388608.0;
	int8_t r8;
	if ((rc = mult_of(s[SKY_Q_AO] / sr1, &L->res1_ma, &r8, "residual 1", d)))
		return rc;
	L->res1_ra = r8;
	if ((rc = mult_of(s[SKY_Q_X] / sr1, &L->res1_mb, &r8, "residual 1", d)))
		return rc;
	L->res1_rb = r8;
	if ((rc = mult_of(s[SKY_Q_FO] / sr2, &L->res2_ma, &r8, "residual 2", d)))
		return rc;
	L->res2_ra = r8;
	if ((rc = mult_of(s[SKY_Q_H1] / sr2, &L->res2_mb, &r8, "residual 2", d)))
		return rc;
	L->res2_rb = r8;
	if ((rc = setup_ln(H, ln1g, ln1b, s[SKY_Q_H1], L->ln1_g, L->ln1_b, "LayerNorm1", d)) ||
	    (rc = setup_ln(H, ln2g, ln2b, s[SKY_Q_Y], L->ln2_g, L->ln2_b, "LayerNorm2", d)))
		return rc;
	L->inv_sx = (float)(1.0 / s[SKY_Q_X]);
	L->s_y = (float)s[SKY_Q_Y];
	return 0;
}

/* ---- forward ---------------------------------------------------------------- */

/* The forward in three parallel phases; every task writes only the rows
 * (or the head) it owns and uses its worker's scratch, so the bits do not
 * depend on the number of threads or on who ran what:
 *   1. per block of rows: quantise x, the q|k|v GEMM;
 *   2. per sequence and head: scores, softmax, context;
 *   3. per block of rows: everything else (the output projection, both
 *      residuals and LayerNorms, the FFN and the exit), which is row-local. */
typedef struct fwd_ctx {
	sky_layer_s8 *L;
	const float *x;
	float *y;
	int T, row_tasks;
	atomic_int bad_input; /* a task found NaN or infinity in x */
} fwd_ctx;

static void rows_of(const fwd_ctx *f, int task, int *t0, int *rows)
{
	*t0 = task * SKY_S8_ROW_BLOCK;
	*rows = f->T - *t0 < SKY_S8_ROW_BLOCK ? f->T - *t0 : SKY_S8_ROW_BLOCK;
}

static void phase_qkv(void *ctx, int task, int worker)
{
	fwd_ctx *f = ctx;
	sky_layer_s8 *L = f->L;
	const int H = L->cfg.hidden, H3 = 3 * H;
	int t0, rows;
	rows_of(f, task, &t0, &rows);
	if (sky_k_quantize_f32_s8(f->x + (size_t)t0 * H, (size_t)rows * H, L->inv_sx,
				  L->x8 + (size_t)t0 * H) != 0) {
		atomic_store(&f->bad_input, 1);
		return;
	}
	/* q|k|v: one GEMM, per-channel requantisation to three scales */
	sky_k_gemm_out o = {SKY_K_OUT_S8, L->qkv8 + (size_t)t0 * H3, H3, L->bqkv, L->mqkv, L->rqkv};
	sky_k_gemm_s8(rows, L->x8 + (size_t)t0 * H, H, &L->wqkv, &o);
}

static void phase_attention(void *ctx, int task, int worker)
{
	fwd_ctx *f = ctx;
	sky_layer_s8 *L = f->L;
	sky_layer_s8_ws *w = &L->ws[worker];
	const sky_model_cfg *c = &L->cfg;
	const int H = c->hidden, S = c->seq, NH = c->heads, D = H / NH, H3 = 3 * H;
	const int b = task / NH, hd = task % NH;
	const int8_t *q = L->qkv8 + (size_t)b * S * H3 + (size_t)hd * D;
	const int8_t *k = q + H, *v = q + 2 * H;
	/* scores = q k^T: the keys are this GEMM's "weights" */
	sky_k_pack_s8(L->variant, k, S, D, H3, 1, w->kh.data, &w->kh);
	sky_k_gemm_out os = {SKY_K_OUT_S32, w->scores, S, NULL, NULL, NULL};
	sky_k_gemm_s8(S, q, H3, &w->kh, &os);
	sky_k_softmax_s8(w->scores, S, S, S, L->maskbits + (size_t)b * S, &L->sm,
			 (uint8_t *)w->pbuf, S);
	/* p is u8; as int8 p - 128 (a flip of the top bit, 8 bytes at a time),
	 * with 128 * sum_k v[k][j] added back through the bias */
	for (int i = 0; i + 8 <= S * S; i += 8) {
		uint64_t wv;
		memcpy(&wv, w->pbuf + i, 8);
		wv ^= 0x8080808080808080ull;
		memcpy(w->pbuf + i, &wv, 8);
	}
	for (int i = S * S & ~7; i < S * S; i++)
		w->pbuf[i] = (int8_t)((uint8_t)w->pbuf[i] ^ 0x80);
	for (int j = 0; j < D; j++)
		w->cbias[j] = 0;
	for (int kk = 0; kk < S; kk++) {
		const int8_t *vr = v + (size_t)kk * H3;
		for (int j = 0; j < D; j++)
			w->cbias[j] += vr[j];
	}
	for (int j = 0; j < D; j++)
		w->cbias[j] *= 128;
	sky_k_pack_s8(L->variant, v, D, S, 1, H3, w->vh.data, &w->vh);
	sky_k_gemm_out oc = {SKY_K_OUT_S8, L->ctx8 + (size_t)b * S * H + (size_t)hd * D, H, w->cbias,
			     L->mctx, L->rctx};
	sky_k_gemm_s8(S, w->pbuf, S, &w->vh, &oc);
}

/* The attention half's row-local end: h1 = LN1(ctx Wo^T + bo + x), the
 * residual and LayerNorm a row at a time so the int32 sum stays in L1. */
static void rows_attn(sky_layer_s8 *L, sky_layer_s8_ws *w, int t0, int rows)
{
	const int H = L->cfg.hidden;
	const size_t oh = (size_t)t0 * H;
	sky_k_gemm_out oo = {SKY_K_OUT_S16, L->a16 + oh, H, L->bo, L->mo, L->ro};
	sky_k_gemm_s8(rows, L->ctx8 + oh, H, &L->wo, &oo);
	for (int t = 0; t < rows; t++) {
		size_t o = oh + (size_t)t * H;
		sky_k_add_s16_s8(L->a16 + o, L->x8 + o, (size_t)H, L->res1_ma, L->res1_ra, L->res1_mb,
				 L->res1_rb, w->r32);
		sky_k_layernorm_s8(w->r32, 1, H, L->ln1_g, L->ln1_b, L->h1_8 + o);
	}
}

/* The FFN half, row-local: y8 = LN2(gelu(h1 W1^T + b1) W2^T + b2 + h1)
 * into x8 (the FFN pre-activation of the block goes through GELU while it
 * is still in L2), then y = dequant(y8) when y is wanted. */
static void rows_ffn(sky_layer_s8 *L, sky_layer_s8_ws *w, int t0, int rows, float *y)
{
	const int H = L->cfg.hidden, F = L->cfg.ffn;
	const size_t oh = (size_t)t0 * H;
	sky_k_gemm_out o1 = {SKY_K_OUT_S16, w->u16, F, L->b1, L->m1, L->r1};
	sky_k_gemm_s8(rows, L->h1_8 + oh, H, &L->w1, &o1);
	sky_k_gelu_s16_s8(w->u16, (size_t)rows * F, &L->gelu, L->g8 + (size_t)t0 * F);
	sky_k_gemm_out o2 = {SKY_K_OUT_S16, L->a16 + oh, H, L->b2, L->m2, L->r2};
	sky_k_gemm_s8(rows, L->g8 + (size_t)t0 * F, F, &L->w2, &o2);
	for (int t = 0; t < rows; t++) {
		size_t o = oh + (size_t)t * H;
		sky_k_add_s16_s8(L->a16 + o, L->h1_8 + o, (size_t)H, L->res2_ma, L->res2_ra,
				 L->res2_mb, L->res2_rb, w->r32);
		sky_k_layernorm_s8(w->r32, 1, H, L->ln2_g, L->ln2_b, L->x8 + o);
	}
	/* exit */
	if (y)
		sky_k_dequantize_s8_f32(L->x8 + oh, (size_t)rows * H, L->s_y, y + oh);
}

static void phase_rows(void *ctx, int task, int worker)
{
	fwd_ctx *f = ctx;
	int t0, rows;
	rows_of(f, task, &t0, &rows);
	rows_attn(f->L, &f->L->ws[worker], t0, rows);
	rows_ffn(f->L, &f->L->ws[worker], t0, rows, f->y);
}

static void phase_rows_attn(void *ctx, int task, int worker)
{
	fwd_ctx *f = ctx;
	int t0, rows;
	rows_of(f, task, &t0, &rows);
	rows_attn(f->L, &f->L->ws[worker], t0, rows);
}

static void phase_rows_ffn(void *ctx, int task, int worker)
{
	fwd_ctx *f = ctx;
	int t0, rows;
	rows_of(f, task, &t0, &rows);
	rows_ffn(f->L, &f->L->ws[worker], t0, rows, f->y);
}

/* A forward's context over L's tokens (x, y as the forward takes them). */
static void fwd_begin(fwd_ctx *f, sky_layer_s8 *L, const float *x, float *y)
{
	f->L = L;
	f->x = x;
	f->y = y;
	f->T = (int)sky_model_tokens(&L->cfg);
	f->row_tasks = (f->T + SKY_S8_ROW_BLOCK - 1) / SKY_S8_ROW_BLOCK;
	atomic_init(&f->bad_input, 0);
}

/* The first two phases of a forward that starts at the attention: the
 * padding bits of the mask, quantising x and q|k|v (the only float work
 * before the exit), then attention. Returns 0 or SKY_EINVAL (x holds NaN
 * or infinity). */
static int fwd_attention(fwd_ctx *f, const float *mask)
{
	sky_layer_s8 *L = f->L;
	for (int t = 0; t < f->T; t++)
		L->maskbits[t] = mask && mask[t] < -1.0f;
	sky_pool_run(L->pool, f->row_tasks, phase_qkv, f);
	if (atomic_load(&f->bad_input))
		return SKY_EINVAL;
	sky_pool_run(L->pool, L->cfg.batch * L->cfg.heads, phase_attention, f);
	return 0;
}

int sky_layer_s8_forward_attn(sky_layer_s8 *L, const float *x, const float *mask)
{
	fwd_ctx f;
	fwd_begin(&f, L, x, NULL);
	int rc = fwd_attention(&f, mask);
	if (rc)
		return rc;
	sky_pool_run(L->pool, f.row_tasks, phase_rows_attn, &f);
	return 0;
}

int sky_layer_s8_forward_ffn(sky_layer_s8 *L, const int8_t *h1, float *y)
{
	fwd_ctx f;
	fwd_begin(&f, L, NULL, y);
	if (h1 && h1 != L->h1_8)
		memcpy(L->h1_8, h1, (size_t)f.T * L->cfg.hidden);
	sky_pool_run(L->pool, f.row_tasks, phase_rows_ffn, &f);
	return 0;
}

int sky_layer_s8_forward(sky_layer_s8 *L, const float *x, const float *mask, float *y)
{
	fwd_ctx f;
	fwd_begin(&f, L, x, y);
	int rc = fwd_attention(&f, mask);
	if (rc)
		return rc;
	sky_pool_run(L->pool, f.row_tasks, phase_rows, &f);
	return 0;
}
