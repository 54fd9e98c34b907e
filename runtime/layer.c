/* One BERT encoder layer, fp32, forward and backward (see sky_layer.h for
 * the equations and the parameter layout).
 *
 * Nearly all the time is in GEMMs: 6 kinds forward (the fused QKV
 * projection, scores and context per sequence and head, the output
 * projection, the two FFN matrices) and 12 backward. Everything else is
 * fused into the GEMMs' start values (bias, residual: beta = 1) or done in
 * one pass over data that is still in cache (softmax, LayerNorm, GELU, the
 * bias gradients). Per-head attention results go to a small scratch block
 * and are copied out once: written straight into the big strided
 * matrices, each of those small GEMMs ran at half speed on cold lines. */
#include "sky_layer.h"

#include "sky_dropout.h"
#include "sky_kernels_f32.h"
#include "sky_rng.h"

#include <math.h>
#include <string.h>

/* every carved part starts on a 64-byte line when the block does */
static size_t pad16(size_t n) { return (n + 15) & ~(size_t)15; }

/* Offsets (floats) of what forward keeps for backward. */
typedef struct saved_layout {
	/* attention block */
	size_t x;     /* (T, H) the layer input: dWqkv needs it */
	size_t qkv;   /* (T, 3H) q | k | v per token */
	size_t p;     /* (B, heads, S, S) attention probabilities */
	size_t ctx;   /* (T, H) context, heads side by side */
	size_t xhat1; /* (T, H) LayerNorm1 normalised input */
	size_t rstd1; /* (T) */
	/* feed-forward block */
	size_t h1;    /* (T, H) its input */
	size_t gp;    /* (T, F) gelu'(u), u = h1 W1^T + b1: all backward needs of u */
	size_t g;     /* (T, F) gelu(u) */
	size_t xhat2; /* (T, H) */
	size_t rstd2; /* (T) */
	size_t total;
} saved_layout;

static saved_layout layout_saved(const sky_model_cfg *c, int blocks)
{
	saved_layout L;
	memset(&L, 0, sizeof L);
	size_t t = (size_t)sky_model_tokens(c), h = (size_t)c->hidden, f = (size_t)c->ffn;
	size_t s = (size_t)c->seq, off = 0;
	if (blocks & SKY_BLOCK_ATTN) {
		L.x = off, off += pad16(t * h);
		L.qkv = off, off += pad16(t * 3 * h);
		L.p = off, off += pad16((size_t)c->batch * c->heads * s * s);
		L.ctx = off, off += pad16(t * h);
		L.xhat1 = off, off += pad16(t * h);
		L.rstd1 = off, off += pad16(t);
	}
	if (blocks & SKY_BLOCK_FFN) {
		L.h1 = off, off += pad16(t * h);
		L.gp = off, off += pad16(t * f);
		L.g = off, off += pad16(t * f);
		L.xhat2 = off, off += pad16(t * h);
		L.rstd2 = off, off += pad16(t);
	}
	L.total = off;
	return L;
}

/* Scratch: five regions, each used by forward (inference) and again by
 * backward, never both at once. */
typedef struct scratch_layout {
	size_t a; /* (T, 3H) qkv | dqkv */
	size_t b; /* (T, H) ctx | dctx */
	size_t c; /* (T, H) h1 | dh1 */
	size_t d; /* (T, F) u | dgelu */
	size_t e; /* (S, S) one head's probabilities | their gradient */
	size_t f; /* (3, S, D) one head's context | dq, dk, dv before they go out */
	size_t g; /* (S, S) backward with dropout: one head's dropped probabilities */
	size_t h; /* (T, H) backward with dropout: the dropped gradient of a dense output */
	size_t total;
} scratch_layout;

static scratch_layout layout_scratch(const sky_model_cfg *c)
{
	scratch_layout L;
	size_t t = (size_t)sky_model_tokens(c), h = (size_t)c->hidden, f = (size_t)c->ffn;
	size_t off = 0;
	L.a = off, off += pad16(t * 3 * h);
	L.b = off, off += pad16(t * h);
	L.c = off, off += pad16(t * h);
	L.d = off, off += pad16(t * f);
	L.e = off, off += pad16((size_t)c->seq * c->seq);
	L.f = off, off += pad16((size_t)3 * c->seq * (c->hidden / c->heads));
	/* only a model with dropout needs these two */
	const int dr = sky_model_has_dropout(c);
	L.g = off, off += dr ? pad16((size_t)c->seq * c->seq) : 0;
	L.h = off, off += dr ? pad16(t * h) : 0;
	L.total = off;
	return L;
}

size_t sky_layer_saved_floats(const sky_model_cfg *c, int blocks)
{
	return layout_saved(c, blocks).total;
}

size_t sky_layer_scratch_floats(const sky_model_cfg *c) { return layout_scratch(c).total; }

int sky_layer_tensors(const sky_model_cfg *c, sky_tensor_info *out)
{
	const int h = c->hidden, f = c->ffn;
	const sky_tensor_spec t[SKY_LAYER_NTENSORS] = {
		{"attention.self.query.weight", h, h},
		{"attention.self.key.weight", h, h},
		{"attention.self.value.weight", h, h},
		{"attention.self.query.bias", h, 0},
		{"attention.self.key.bias", h, 0},
		{"attention.self.value.bias", h, 0},
		{"attention.output.dense.weight", h, h},
		{"attention.output.dense.bias", h, 0},
		{"attention.output.LayerNorm.weight", h, 0},
		{"attention.output.LayerNorm.bias", h, 0},
		{"intermediate.dense.weight", f, h},
		{"intermediate.dense.bias", f, 0},
		{"output.dense.weight", h, f},
		{"output.dense.bias", h, 0},
		{"output.LayerNorm.weight", h, 0},
		{"output.LayerNorm.bias", h, 0},
	};
	return sky_tensor_table(t, SKY_LAYER_NTENSORS, out);
}

void sky_layer_bind(const sky_model_cfg *c, float *flat, sky_layer_view *v)
{
	size_t h = (size_t)c->hidden, f = (size_t)c->ffn;
	float *p = flat;
	v->wqkv = p, p += 3 * h * h;
	v->bqkv = p, p += 3 * h;
	v->wo = p, p += h * h;
	v->bo = p, p += h;
	v->ln1_g = p, p += h;
	v->ln1_b = p, p += h;
	v->w1 = p, p += f * h;
	v->b1 = p, p += f;
	v->w2 = p, p += h * f;
	v->b2 = p, p += h;
	v->ln2_g = p, p += h;
	v->ln2_b = p;
}

/* the attention block's tensors are the first ten of the table */
#define ATTN_TENSORS 10

size_t sky_layer_half_offset(const sky_model_cfg *c, int block)
{
	size_t h = (size_t)c->hidden;
	return block == SKY_BLOCK_FFN ? 4 * h * h + 6 * h : 0;
}

size_t sky_layer_half_floats(const sky_model_cfg *c, int block)
{
	size_t h = (size_t)c->hidden, f = (size_t)c->ffn;
	return block == SKY_BLOCK_FFN ? 2 * h * f + f + 3 * h : 4 * h * h + 6 * h;
}

/* Points v's block at half (its own parameters only); the other block's
 * pointers are NULL. */
static void bind_half(const sky_model_cfg *c, float *half, int block, sky_layer_view *v)
{
	size_t h = (size_t)c->hidden, f = (size_t)c->ffn;
	float *p = half;
	memset(v, 0, sizeof *v);
	if (block == SKY_BLOCK_ATTN) {
		v->wqkv = p, p += 3 * h * h;
		v->bqkv = p, p += 3 * h;
		v->wo = p, p += h * h;
		v->bo = p, p += h;
		v->ln1_g = p, p += h;
		v->ln1_b = p;
	} else {
		v->w1 = p, p += f * h;
		v->b1 = p, p += f;
		v->w2 = p, p += h * f;
		v->b2 = p, p += h;
		v->ln2_g = p, p += h;
		v->ln2_b = p;
	}
}

/* Fills the tensors [lo, hi) of the table at base - skip: the random
 * stream still runs through every weight before lo, so each tensor gets
 * the numbers sky_layer_init gives it. */
static void init_tensors(const sky_model_cfg *c, float *base, size_t skip, unsigned long long seed,
			 int lo, int hi)
{
	sky_tensor_info t[SKY_LAYER_NTENSORS];
	sky_layer_tensors(c, t);
	sky_rng r;
	sky_rng_seed(&r, seed);
	for (int i = 0; i < hi; i++) {
		float *p = i >= lo ? base + (t[i].offset - skip) : NULL;
		if (t[i].ndim == 2) {
			for (size_t k = 0; k < t[i].count; k++) {
				float v = 0.02f * sky_rng_normal(&r);
				if (p)
					p[k] = v;
			}
		} else if (p) {
			/* LayerNorm weights ("...LayerNorm.weight") start at 1, biases at 0 */
			float v = strstr(t[i].name, "LayerNorm.weight") ? 1.0f : 0.0f;
			for (size_t k = 0; k < t[i].count; k++)
				p[k] = v;
		}
	}
}

void sky_layer_init_half(const sky_model_cfg *c, float *half, unsigned long long seed, int block)
{
	if (block == SKY_BLOCK_FFN)
		init_tensors(c, half, sky_layer_half_offset(c, SKY_BLOCK_FFN), seed, ATTN_TENSORS,
			     SKY_LAYER_NTENSORS);
	else
		init_tensors(c, half, 0, seed, 0, ATTN_TENSORS);
}

void sky_layer_init(const sky_model_cfg *c, float *flat, unsigned long long seed)
{
	init_tensors(c, flat, 0, seed, 0, SKY_LAYER_NTENSORS);
}

/* The attention block forward: h1 = LN1((softmax(q k^T / sqrt d + mask) v) Wo^T + bo + x).
 * With sv == NULL (inference) intermediates go to scratch. */
static void attn_forward(const sky_model_cfg *c, const sky_layer_view *w, const float *x,
			 const float *mask, float *h1, float *sv, const saved_layout *SL,
			 float *scratch, const scratch_layout *XL, const sky_dropout *dr, int layer)
{
	const float pa = dr ? dr->attn : 0, ph = dr ? dr->hidden : 0;
	const int T = (int)sky_model_tokens(c), H = c->hidden, S = c->seq, NH = c->heads;
	const int D = H / NH, H3 = 3 * H;
	const float scale = 1.0f / sqrtf((float)D);
	float *qkv = sv ? sv + SL->qkv : scratch + XL->a;
	float *ctx = sv ? sv + SL->ctx : scratch + XL->b;

	if (sv)
		memcpy(sv + SL->x, x, (size_t)T * H * sizeof *x);
	/* qkv = x Wqkv^T + bqkv: one (T,H)x(H,3H) GEMM for all three */
	sky_k_bias_fill_f32(qkv, w->bqkv, NULL, T, H3);
	sky_k_gemm_f32(0, 1, T, H3, H, 1.0f, x, H, w->wqkv, H, 1.0f, qkv, H3);

	for (int b = 0; b < c->batch; b++) {
		const float *mb = mask ? mask + (size_t)b * S : NULL;
		for (int hd = 0; hd < NH; hd++) {
			/* q, k, v of this sequence and head: strided views into qkv */
			const float *q = qkv + (size_t)b * S * H3 + (size_t)hd * D;
			const float *k = q + H, *v = q + 2 * H;
			/* scores in a scratch block that stays in cache across the
			 * three steps; training then keeps a copy for backward */
			float *p = scratch + XL->e;
			sky_k_gemm_f32(0, 1, S, S, D, scale, q, H3, k, H3, 0.0f, p, S);
			sky_k_softmax_f32(p, S, S, mb);
			/* backward needs the probabilities before dropout (softmax's
			 * gradient) and recomputes the dropped ones from the mask */
			if (sv)
				memcpy(sv + SL->p + ((size_t)b * NH + hd) * S * S, p,
				       (size_t)S * S * sizeof *p);
			sky_dropout_apply(dr, pa, layer, SKY_DROP_ATTN_PROBS,
					  ((uint64_t)b * NH + hd) * S * S, p, (size_t)S * S);
			/* this head's context in scratch, then its rows into ctx */
			float *ch = scratch + XL->f;
			sky_k_gemm_f32(0, 0, S, D, S, 1.0f, p, S, v, H3, 0.0f, ch, D);
			float *co = ctx + (size_t)b * S * H + (size_t)hd * D;
			for (int r = 0; r < S; r++)
				memcpy(co + (size_t)r * H, ch + (size_t)r * D, (size_t)D * sizeof *ch);
		}
	}
	/* h1 = LN1(drop(ctx Wo^T + bo) + x): bias and residual are the GEMM's
	 * start value; with dropout the residual is added after it */
	sky_k_bias_fill_f32(h1, w->bo, ph > 0 ? NULL : x, T, H);
	sky_k_gemm_f32(0, 1, T, H, H, 1.0f, ctx, H, w->wo, H, 1.0f, h1, H);
	if (ph > 0) {
		sky_dropout_apply(dr, ph, layer, SKY_DROP_ATTN_OUT, 0, h1, (size_t)T * H);
		for (size_t i = 0; i < (size_t)T * H; i++)
			h1[i] += x[i];
	}
	sky_k_layernorm_f32(h1, T, H, w->ln1_g, w->ln1_b, sky_model_ln_eps(c), h1,
			    sv ? sv + SL->xhat1 : NULL, sv ? sv + SL->rstd1 : NULL);
}

/* The feed-forward block: y = LN2(gelu(h1 W1^T + b1) W2^T + b2 + h1), with
 * the GELU form the model's config names. */
static void ffn_forward(const sky_model_cfg *c, const sky_layer_view *w, const float *h1,
			float *y, float *sv, const saved_layout *SL, float *scratch,
			const scratch_layout *XL, const sky_dropout *dr, int layer)
{
	const float ph = dr ? dr->hidden : 0;
	const int T = (int)sky_model_tokens(c), H = c->hidden, F = c->ffn;
	/* u in scratch; training keeps gelu(u) and gelu'(u), inference just
	 * gelu(u), in place */
	float *u = scratch + XL->d;
	float *g = sv ? sv + SL->g : u;

	if (sv && h1 != sv + SL->h1)
		memcpy(sv + SL->h1, h1, (size_t)T * H * sizeof *h1);
	sky_k_bias_fill_f32(u, w->b1, NULL, T, F);
	sky_k_gemm_f32(0, 1, T, F, H, 1.0f, h1, H, w->w1, H, 1.0f, u, F);
	const size_t n = (size_t)T * F;
	if (c->act == SKY_ACT_GELU_TANH) {
		if (sv)
			sky_k_gelu_tanh_fwd_grad_f32(u, g, sv + SL->gp, n);
		else
			sky_k_gelu_tanh_f32(u, g, n);
	} else if (sv) {
		sky_k_gelu_fwd_grad_f32(u, g, sv + SL->gp, n);
	} else {
		sky_k_gelu_f32(u, g, n);
	}
	sky_k_bias_fill_f32(y, w->b2, ph > 0 ? NULL : h1, T, H);
	sky_k_gemm_f32(0, 1, T, H, F, 1.0f, g, F, w->w2, F, 1.0f, y, H);
	if (ph > 0) {
		sky_dropout_apply(dr, ph, layer, SKY_DROP_FFN_OUT, 0, y, (size_t)T * H);
		for (size_t i = 0; i < (size_t)T * H; i++)
			y[i] += h1[i];
	}
	sky_k_layernorm_f32(y, T, H, w->ln2_g, w->ln2_b, sky_model_ln_eps(c), y,
			    sv ? sv + SL->xhat2 : NULL, sv ? sv + SL->rstd2 : NULL);
}

void sky_layer_forward_dr(const sky_model_cfg *c, const float *w, const float *x,
			  const float *mask, float *y, float *saved, float *scratch, int blocks,
			  const sky_dropout *dr, int layer)
{
	sky_layer_view v;
	sky_layer_bind(c, (float *)w, &v);
	saved_layout SL = layout_saved(c, blocks);
	scratch_layout XL = layout_scratch(c);
	if (blocks == SKY_BLOCK_ATTN) {
		attn_forward(c, &v, x, mask, y, saved, &SL, scratch, &XL, dr, layer);
	} else if (blocks == SKY_BLOCK_FFN) {
		ffn_forward(c, &v, x, y, saved, &SL, scratch, &XL, dr, layer);
	} else if (blocks == SKY_BLOCK_ALL) {
		/* h1 goes straight where the FFN keeps its input */
		float *h1 = saved ? saved + SL.h1 : scratch + XL.c;
		attn_forward(c, &v, x, mask, h1, saved, &SL, scratch, &XL, dr, layer);
		ffn_forward(c, &v, h1, y, saved, &SL, scratch, &XL, dr, layer);
	}
}

void sky_layer_forward(const sky_model_cfg *c, const float *w, const float *x, const float *mask,
		       float *y, float *saved, float *scratch, int blocks)
{
	sky_layer_forward_dr(c, w, x, mask, y, saved, scratch, blocks, NULL, 0);
}

/* FFN backward: dy -> dh1 (written), weight gradients added. */
static void ffn_backward(const sky_model_cfg *c, const sky_layer_view *w, sky_layer_view *dw,
			 const float *sv, const saved_layout *SL, const float *dy, float *dh1,
			 float *scratch, const scratch_layout *XL, const sky_dropout *dr, int layer)
{
	const int T = (int)sky_model_tokens(c), H = c->hidden, F = c->ffn;
	const float *h1 = sv + SL->h1, *gp = sv + SL->gp, *g = sv + SL->g;
	const float ph = dr ? dr->hidden : 0;
	float *dg = scratch + XL->d;

	/* da = LN2 backward, kept in dh1: it is also the residual's share of
	 * dh1; its column sum is db2 (with dropout, that of the dropped da) */
	sky_k_layernorm_bwd_f32(dy, sv + SL->xhat2, sv + SL->rstd2, w->ln2_g, T, H, dh1, dw->ln2_g,
				dw->ln2_b, ph > 0 ? NULL : dw->b2);
	const float *dout = dh1; /* the gradient of gelu(u) W2^T + b2 */
	if (ph > 0) {
		float *dd = scratch + XL->h;
		memcpy(dd, dh1, (size_t)T * H * sizeof *dd);
		sky_dropout_apply(dr, ph, layer, SKY_DROP_FFN_OUT, 0, dd, (size_t)T * H);
		sky_k_colsum_f32(dd, T, H, dw->b2);
		dout = dd;
	}
	sky_k_gemm_f32(1, 0, H, F, T, 1.0f, dout, H, g, F, 1.0f, dw->w2, F);
	sky_k_gemm_f32(0, 0, T, F, H, 1.0f, dout, H, w->w2, F, 0.0f, dg, F);
	sky_k_mul_colsum_f32(dg, gp, T, F, dw->b1);
	sky_k_gemm_f32(1, 0, F, H, T, 1.0f, dg, F, h1, H, 1.0f, dw->w1, H);
	/* dh1 = dgelu W1 + da */
	sky_k_gemm_f32(0, 0, T, H, F, 1.0f, dg, F, w->w1, H, 1.0f, dh1, H);
}

/* Attention backward: dh1 -> dx (written), weight gradients added. */
static void attn_backward(const sky_model_cfg *c, const sky_layer_view *w, sky_layer_view *dw,
			  const float *sv, const saved_layout *SL, const float *dh1, float *dx,
			  float *scratch, const scratch_layout *XL, const sky_dropout *dr, int layer)
{
	const float pa = dr ? dr->attn : 0, ph = dr ? dr->hidden : 0;
	const int T = (int)sky_model_tokens(c), H = c->hidden, S = c->seq, NH = c->heads;
	const int D = H / NH, H3 = 3 * H;
	const float scale = 1.0f / sqrtf((float)D);
	const float *x = sv + SL->x, *qkv = sv + SL->qkv, *ctx = sv + SL->ctx;
	float *dqkv = scratch + XL->a, *dctx = scratch + XL->b, *dp = scratch + XL->e;

	/* da kept in dx: the residual's share of dx, the rest is added last */
	sky_k_layernorm_bwd_f32(dh1, sv + SL->xhat1, sv + SL->rstd1, w->ln1_g, T, H, dx, dw->ln1_g,
				dw->ln1_b, ph > 0 ? NULL : dw->bo);
	const float *dout = dx; /* the gradient of ctx Wo^T + bo */
	if (ph > 0) {
		float *dd = scratch + XL->h;
		memcpy(dd, dx, (size_t)T * H * sizeof *dd);
		sky_dropout_apply(dr, ph, layer, SKY_DROP_ATTN_OUT, 0, dd, (size_t)T * H);
		sky_k_colsum_f32(dd, T, H, dw->bo);
		dout = dd;
	}
	sky_k_gemm_f32(1, 0, H, H, T, 1.0f, dout, H, ctx, H, 1.0f, dw->wo, H);
	sky_k_gemm_f32(0, 0, T, H, H, 1.0f, dout, H, w->wo, H, 0.0f, dctx, H);

	for (int b = 0; b < c->batch; b++) {
		for (int hd = 0; hd < NH; hd++) {
			size_t o3 = (size_t)b * S * H3 + (size_t)hd * D;
			const float *q = qkv + o3, *k = q + H, *v = q + 2 * H;
			/* this head's gradients in cache-resident scratch first, then
			 * copied into the strided dqkv once (written straight into
			 * dqkv, every GEMM output line would be fetched cold) */
			float *dq = scratch + XL->f, *dk = dq + (size_t)S * D, *dv = dk + (size_t)S * D;
			const float *dc = dctx + (size_t)b * S * H + (size_t)hd * D;
			const float *p = sv + SL->p + ((size_t)b * NH + hd) * S * S;
			/* with dropout, ctx came from the dropped probabilities */
			const float *pd = p;
			uint64_t base = ((uint64_t)b * NH + hd) * S * S;
			if (pa > 0) {
				float *t = scratch + XL->g;
				memcpy(t, p, (size_t)S * S * sizeof *t);
				sky_dropout_apply(dr, pa, layer, SKY_DROP_ATTN_PROBS, base, t,
						  (size_t)S * S);
				pd = t;
			}
			/* dP = dctx v^T ; dv = P^T dctx */
			sky_k_gemm_f32(0, 1, S, S, D, 1.0f, dc, H, v, H3, 0.0f, dp, S);
			sky_k_gemm_f32(1, 0, S, D, S, 1.0f, pd, S, dc, H, 0.0f, dv, D);
			/* through the dropout to the probabilities softmax made */
			sky_dropout_apply(dr, pa, layer, SKY_DROP_ATTN_PROBS, base, dp, (size_t)S * S);
			/* dscores (scale folded in); the mask is a constant: no gradient */
			sky_k_softmax_bwd_f32(p, dp, S, S, scale);
			/* dq = dS k ; dk = dS^T q */
			sky_k_gemm_f32(0, 0, S, D, S, 1.0f, dp, S, k, H3, 0.0f, dq, D);
			sky_k_gemm_f32(1, 0, S, D, S, 1.0f, dp, S, q, H3, 0.0f, dk, D);
			float *out = dqkv + o3;
			for (int r = 0; r < S; r++)
				for (int part = 0; part < 3; part++)
					memcpy(out + (size_t)r * H3 + (size_t)part * H,
					       dq + (size_t)part * S * D + (size_t)r * D,
					       (size_t)D * sizeof *dq);
			/* the bias gradient of q, k, v while the head is in cache */
			for (int part = 0; part < 3; part++)
				sky_k_colsum_f32(dq + (size_t)part * S * D, S, D,
						 dw->bqkv + (size_t)part * H + (size_t)hd * D);
		}
	}
	sky_k_gemm_f32(1, 0, H3, H, T, 1.0f, dqkv, H3, x, H, 1.0f, dw->wqkv, H);
	/* dx = dqkv Wqkv + da */
	sky_k_gemm_f32(0, 0, T, H, H3, 1.0f, dqkv, H3, w->wqkv, H, 1.0f, dx, H);
}

void sky_layer_backward_dr(const sky_model_cfg *c, const float *w, const float *mask,
			   const float *saved, const float *dy, float *dx, float *dw,
			   float *scratch, int blocks, const sky_dropout *dr, int layer)
{
	sky_layer_view v, dv;
	sky_layer_bind(c, (float *)w, &v);
	sky_layer_bind(c, dw, &dv);
	saved_layout SL = layout_saved(c, blocks);
	scratch_layout XL = layout_scratch(c);
	if (blocks == SKY_BLOCK_ATTN) {
		attn_backward(c, &v, &dv, saved, &SL, dy, dx, scratch, &XL, dr, layer);
	} else if (blocks == SKY_BLOCK_FFN) {
		ffn_backward(c, &v, &dv, saved, &SL, dy, dx, scratch, &XL, dr, layer);
	} else if (blocks == SKY_BLOCK_ALL) {
		float *dh1 = scratch + XL.c;
		ffn_backward(c, &v, &dv, saved, &SL, dy, dh1, scratch, &XL, dr, layer);
		attn_backward(c, &v, &dv, saved, &SL, dh1, dx, scratch, &XL, dr, layer);
	}
}

void sky_layer_backward(const sky_model_cfg *c, const float *w, const float *mask,
			const float *saved, const float *dy, float *dx, float *dw, float *scratch,
			int blocks)
{
	sky_layer_backward_dr(c, w, mask, saved, dy, dx, dw, scratch, blocks, NULL, 0);
}

void sky_layer_half_forward_dr(const sky_model_cfg *c, const float *w, const float *x,
			       const float *mask, float *y, float *saved, float *scratch, int block,
			       const sky_dropout *dr, int layer)
{
	sky_layer_view v;
	bind_half(c, (float *)w, block, &v);
	saved_layout SL = layout_saved(c, block);
	scratch_layout XL = layout_scratch(c);
	if (block == SKY_BLOCK_ATTN)
		attn_forward(c, &v, x, mask, y, saved, &SL, scratch, &XL, dr, layer);
	else
		ffn_forward(c, &v, x, y, saved, &SL, scratch, &XL, dr, layer);
}

void sky_layer_half_forward(const sky_model_cfg *c, const float *w, const float *x,
			    const float *mask, float *y, float *saved, float *scratch, int block)
{
	sky_layer_half_forward_dr(c, w, x, mask, y, saved, scratch, block, NULL, 0);
}

void sky_layer_half_backward_dr(const sky_model_cfg *c, const float *w, const float *mask,
				const float *saved, const float *dy, float *dx, float *dw,
				float *scratch, int block, const sky_dropout *dr, int layer)
{
	sky_layer_view v, dv;
	(void)mask; /* a constant: no gradient flows through it */
	bind_half(c, (float *)w, block, &v);
	bind_half(c, dw, block, &dv);
	saved_layout SL = layout_saved(c, block);
	scratch_layout XL = layout_scratch(c);
	if (block == SKY_BLOCK_ATTN)
		attn_backward(c, &v, &dv, saved, &SL, dy, dx, scratch, &XL, dr, layer);
	else
		ffn_backward(c, &v, &dv, saved, &SL, dy, dx, scratch, &XL, dr, layer);
}

void sky_layer_half_backward(const sky_model_cfg *c, const float *w, const float *mask,
			     const float *saved, const float *dy, float *dx, float *dw,
			     float *scratch, int block)
{
	sky_layer_half_backward_dr(c, w, mask, saved, dy, dx, dw, scratch, block, NULL, 0);
}
