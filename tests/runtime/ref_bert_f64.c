/* Plain-loop double-precision BERT forward (see ref_bert_f64.h). Written
 * from the HuggingFace equations, deliberately without sharing code with
 * runtime/: if both had the same mistake the gradient check would pass. */
#include "ref_bert_f64.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double *dalloc(size_t n) { return calloc(n ? n : 1, sizeof(double)); }

/* y (n, out) = x (n, in) W^T + b, W (out, in) row-major */
static void linear(const double *x, int n, int in, const double *W, const double *b, int out,
		   double *y)
{
	for (int t = 0; t < n; t++)
		for (int o = 0; o < out; o++) {
			double s = b[o];
			for (int i = 0; i < in; i++)
				s += x[(size_t)t * in + i] * W[(size_t)o * in + i];
			y[(size_t)t * out + o] = s;
		}
}

void ref64_layernorm(const double *x, int n, int h, const double *g, const double *b, double eps,
		     double *y)
{
	for (int t = 0; t < n; t++) {
		const double *r = x + (size_t)t * h;
		double *o = y + (size_t)t * h, mean = 0, var = 0;
		for (int j = 0; j < h; j++)
			mean += r[j];
		mean /= h;
		for (int j = 0; j < h; j++)
			var += (r[j] - mean) * (r[j] - mean);
		var /= h;
		double inv = 1.0 / sqrt(var + eps);
		for (int j = 0; j < h; j++)
			o[j] = (r[j] - mean) * inv * g[j] + b[j];
	}
}

/* with the model's eps (BERT's 1e-12 unless its config says otherwise) */
static void layernorm(const sky_model_cfg *c, double *x, int n, int h, const double *g,
		      const double *b)
{
	ref64_layernorm(x, n, h, g, b, (double)sky_model_ln_eps(c), x);
}

/* the tanh GELU, for a model whose config asks for it */
static void gelu_tanh(double *x, size_t n)
{
	for (size_t i = 0; i < n; i++)
		x[i] = 0.5 * x[i] *
		       (1.0 + tanh(sqrt(2.0 / M_PI) * (x[i] + 0.044715 * x[i] * x[i] * x[i])));
}

void ref64_softmax(const double *x, int n, int cols, const double *mask, double *y)
{
	for (int t = 0; t < n; t++) {
		const double *r = x + (size_t)t * cols;
		double *o = y + (size_t)t * cols, mx = -INFINITY, sum = 0;
		for (int j = 0; j < cols; j++) {
			o[j] = r[j] + (mask ? mask[j] : 0.0);
			mx = o[j] > mx ? o[j] : mx;
		}
		for (int j = 0; j < cols; j++) {
			o[j] = exp(o[j] - mx);
			sum += o[j];
		}
		for (int j = 0; j < cols; j++)
			o[j] /= sum;
	}
}

void ref64_gelu(const double *x, size_t n, double *y)
{
	for (size_t i = 0; i < n; i++)
		y[i] = 0.5 * x[i] * (1.0 + erf(x[i] / sqrt(2.0)));
}

/* x[i] *= keep(i) / (1 - p): the mask itself is sky_dropout_keep's (its law
 * is tested on its own in test_dropout), the arithmetic around it here */
static void drop(const sky_dropout *dr, float p, int layer, int site, uint64_t base, double *x,
		 size_t n)
{
	if (!dr || !(p > 0))
		return;
	for (size_t i = 0; i < n; i++)
		x[i] = sky_dropout_keep(dr, p, layer, site, base + i) ? x[i] / (1.0 - (double)p) : 0.0;
}

void ref64_layer_forward(const sky_model_cfg *c, const double *w, const double *x,
			 const double *mask, double *y, int blocks)
{
	ref64_layer_forward_dr(c, w, x, mask, y, blocks, NULL, 0);
}

void ref64_layer_forward_dr(const sky_model_cfg *c, const double *w, const double *x,
			    const double *mask, double *y, int blocks, const sky_dropout *dr,
			    int layer)
{
	const float pa = dr ? dr->attn : 0, ph = dr ? dr->hidden : 0;
	const int B = c->batch, S = c->seq, H = c->hidden, NH = c->heads, F = c->ffn;
	const int T = B * S, D = H / NH;
	const double *Wq = w, *Wk = Wq + H * H, *Wv = Wk + H * H;
	const double *bq = Wv + H * H, *bk = bq + H, *bv = bk + H;
	const double *Wo = bv + H, *bo = Wo + H * H, *g1 = bo + H, *be1 = g1 + H;
	const double *W1 = be1 + H, *b1 = W1 + (size_t)F * H, *W2 = b1 + F, *b2 = W2 + (size_t)H * F;
	const double *g2 = b2 + H, *be2 = g2 + H;
	double *h1 = dalloc((size_t)T * H);

	if (blocks & 1) {
		double *q = dalloc((size_t)T * H), *k = dalloc((size_t)T * H), *v = dalloc((size_t)T * H);
		double *ctx = dalloc((size_t)T * H), *sc = dalloc((size_t)S);
		linear(x, T, H, Wq, bq, H, q);
		linear(x, T, H, Wk, bk, H, k);
		linear(x, T, H, Wv, bv, H, v);
		for (int b = 0; b < B; b++)
			for (int hd = 0; hd < NH; hd++)
				for (int i = 0; i < S; i++) {
					double mx = -INFINITY, sum = 0;
					for (int j = 0; j < S; j++) {
						double s = 0;
						for (int e = 0; e < D; e++)
							s += q[(size_t)(b * S + i) * H + hd * D + e] *
							     k[(size_t)(b * S + j) * H + hd * D + e];
						s = s / sqrt((double)D) + (mask ? mask[b * S + j] : 0.0);
						sc[j] = s;
						mx = s > mx ? s : mx;
					}
					for (int j = 0; j < S; j++) {
						sc[j] = exp(sc[j] - mx);
						sum += sc[j];
					}
					for (int j = 0; j < S; j++)
						sc[j] /= sum;
					drop(dr, pa, layer, SKY_DROP_ATTN_PROBS,
					     (((uint64_t)b * NH + hd) * S + i) * S, sc, (size_t)S);
					for (int e = 0; e < D; e++) {
						double s = 0;
						for (int j = 0; j < S; j++)
							s += sc[j] * v[(size_t)(b * S + j) * H + hd * D + e];
						ctx[(size_t)(b * S + i) * H + hd * D + e] = s;
					}
				}
		linear(ctx, T, H, Wo, bo, H, h1);
		drop(dr, ph, layer, SKY_DROP_ATTN_OUT, 0, h1, (size_t)T * H);
		for (size_t i = 0; i < (size_t)T * H; i++)
			h1[i] += x[i];
		layernorm(c, h1, T, H, g1, be1);
		free(q), free(k), free(v), free(ctx), free(sc);
	} else {
		memcpy(h1, x, (size_t)T * H * sizeof *x);
	}
	if (blocks & 2) {
		double *u = dalloc((size_t)T * F);
		linear(h1, T, H, W1, b1, F, u);
		if (c->act == SKY_ACT_GELU_TANH)
			gelu_tanh(u, (size_t)T * F);
		else
			ref64_gelu(u, (size_t)T * F, u);
		linear(u, T, F, W2, b2, H, y);
		drop(dr, ph, layer, SKY_DROP_FFN_OUT, 0, y, (size_t)T * H);
		for (size_t i = 0; i < (size_t)T * H; i++)
			y[i] += h1[i];
		layernorm(c, y, T, H, g2, be2);
		free(u);
	} else {
		memcpy(y, h1, (size_t)T * H * sizeof *y);
	}
	free(h1);
}

void ref64_embed_forward(const sky_model_cfg *c, const double *w, const int32_t *ids,
			 const int32_t *types, double *y)
{
	ref64_embed_forward_dr(c, w, ids, types, y, NULL);
}

void ref64_embed_forward_dr(const sky_model_cfg *c, const double *w, const int32_t *ids,
			    const int32_t *types, double *y, const sky_dropout *dr)
{
	const int S = c->seq, H = c->hidden, T = c->batch * S;
	const double *word = w, *pos = word + (size_t)c->vocab * H;
	const double *type = pos + (size_t)c->max_pos * H, *g = type + (size_t)c->type_vocab * H;
	const double *b = g + H;
	for (int t = 0; t < T; t++)
		for (int j = 0; j < H; j++)
			y[(size_t)t * H + j] = word[(size_t)ids[t] * H + j] +
					       pos[(size_t)(t % S) * H + j] +
					       type[(size_t)(types ? types[t] : 0) * H + j];
	layernorm(c, y, T, H, g, b);
	drop(dr, dr ? dr->hidden : 0, -1, SKY_DROP_EMBED, 0, y, (size_t)T * H);
}

double ref64_head_forward(const sky_model_cfg *c, const double *w, const double *x,
			  const int32_t *labels, double *logits)
{
	return ref64_head_forward_dr(c, w, x, labels, logits, NULL);
}

double ref64_head_forward_dr(const sky_model_cfg *c, const double *w, const double *x,
			     const int32_t *labels, double *logits, const sky_dropout *dr)
{
	const int S = c->seq, H = c->hidden, C = c->classes, B = c->batch;
	const double *Wp = w, *bp = Wp + (size_t)H * H, *Wc = bp + H, *bc = Wc + (size_t)C * H;
	double *pooled = dalloc((size_t)H), *lg = dalloc((size_t)C), loss = 0;
	for (int b = 0; b < B; b++) {
		linear(x + (size_t)b * S * H, 1, H, Wp, bp, H, pooled);
		for (int j = 0; j < H; j++)
			pooled[j] = tanh(pooled[j]);
		drop(dr, dr ? dr->hidden : 0, -1, SKY_DROP_POOLED, (uint64_t)b * H, pooled,
		     (size_t)H);
		linear(pooled, 1, H, Wc, bc, C, lg);
		double mx = lg[0], sum = 0;
		for (int k = 1; k < C; k++)
			mx = lg[k] > mx ? lg[k] : mx;
		for (int k = 0; k < C; k++)
			sum += exp(lg[k] - mx);
		loss += -(lg[labels[b]] - mx - log(sum));
		if (logits)
			memcpy(logits + (size_t)b * C, lg, (size_t)C * sizeof *lg);
	}
	free(pooled), free(lg);
	return loss / B;
}

void ref64_from_f32(double *d, const float *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		d[i] = s[i];
}

void ref64_to_f32(float *d, const double *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		d[i] = (float)s[i];
}

double ref64_norm2(const double *b, size_t n)
{
	double s = 0;
	for (size_t i = 0; i < n; i++)
		s += b[i] * b[i];
	return sqrt(s);
}

double ref64_rel_err(const float *a, const double *b, size_t n, double floor)
{
	double d = 0;
	for (size_t i = 0; i < n; i++)
		d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
	double nb = ref64_norm2(b, n);
	return sqrt(d) / (nb > floor ? nb : floor);
}

double ref32_rel_err(const float *a, const float *b, size_t n)
{
	double d = 0, nb = 0;
	for (size_t i = 0; i < n; i++) {
		d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
		nb += (double)b[i] * b[i];
	}
	return sqrt(d) / (nb > 0 ? sqrt(nb) : 1e-30);
}

double ref32_norm2(const float *a, size_t n)
{
	double s = 0;
	for (size_t i = 0; i < n; i++)
		s += (double)a[i] * a[i];
	return sqrt(s);
}
