/* Pooler, classifier and cross-entropy (see sky_head.h). Tiny next to the
 * encoder (B rows, not B*S), so it is written for clarity. */
#include "sky_head.h"

#include "sky_err.h"
#include "sky_kernels_f32.h"
#include "sky_log.h"
#include "sky_rng.h"

#include <math.h>
#include <string.h>

static size_t pad16(size_t n) { return (n + 15) & ~(size_t)15; }

int sky_head_tensors(const sky_model_cfg *c, sky_tensor_info *out)
{
	const int h = c->hidden;
	const sky_tensor_spec t[SKY_HEAD_NTENSORS] = {
		{"pooler.dense.weight", h, h},
		{"pooler.dense.bias", h, 0},
		{"classifier.weight", c->classes, h},
		{"classifier.bias", c->classes, 0},
	};
	return sky_tensor_table(t, SKY_HEAD_NTENSORS, out);
}

void sky_head_bind(const sky_model_cfg *c, float *flat, sky_head_view *v)
{
	size_t h = (size_t)c->hidden;
	v->wp = flat;
	v->bp = v->wp + h * h;
	v->wc = v->bp + h;
	v->bc = v->wc + (size_t)c->classes * h;
}

void sky_head_init(const sky_model_cfg *c, float *flat, unsigned long long seed)
{
	sky_head_view v;
	sky_head_bind(c, flat, &v);
	sky_rng r;
	sky_rng_seed(&r, seed);
	size_t h = (size_t)c->hidden;
	for (size_t i = 0; i < h * h; i++)
		v.wp[i] = 0.02f * sky_rng_normal(&r);
	for (size_t i = 0; i < (size_t)c->classes * h; i++)
		v.wc[i] = 0.02f * sky_rng_normal(&r);
	memset(v.bp, 0, h * sizeof *v.bp);
	memset(v.bc, 0, (size_t)c->classes * sizeof *v.bc);
}

/* saved (and, for inference, scratch): cls (B, H) | pooled (B, H) | probs (B, C) */
typedef struct head_layout {
	size_t cls, pooled, probs, total;
} head_layout;

static head_layout layout(const sky_model_cfg *c)
{
	head_layout L;
	size_t bh = (size_t)c->batch * c->hidden;
	L.cls = 0;
	L.pooled = pad16(bh);
	L.probs = L.pooled + pad16(bh);
	L.total = L.probs + pad16((size_t)c->batch * c->classes);
	return L;
}

size_t sky_head_saved_floats(const sky_model_cfg *c) { return layout(c).total; }

/* inference intermediates, or backward's dpooled (B, H) and dlogits (B, C) */
size_t sky_head_scratch_floats(const sky_model_cfg *c) { return layout(c).total; }

int sky_head_forward(const sky_model_cfg *c, const float *w, const float *x,
		     const int32_t *labels, float *logits, float *loss, float *saved,
		     float *scratch)
{
	return sky_head_forward_dr(c, w, x, labels, logits, loss, saved, scratch, NULL);
}

int sky_head_forward_dr(const sky_model_cfg *c, const float *w, const float *x,
			const int32_t *labels, float *logits, float *loss, float *saved,
			float *scratch, const sky_dropout *dr)
{
	const int B = c->batch, S = c->seq, H = c->hidden, C = c->classes;
	if (labels) {
		for (int b = 0; b < B; b++) {
			if (labels[b] < 0 || labels[b] >= C) {
				SKY_ERROR("head: sequence %d has label %d, outside [0, %d)", b,
					  labels[b], C);
				return SKY_EINVAL;
			}
		}
	}
	sky_head_view v;
	sky_head_bind(c, (float *)w, &v);
	head_layout L = layout(c);
	float *buf = saved ? saved : scratch;
	float *cls = buf + L.cls, *pooled = buf + L.pooled, *probs = buf + L.probs;

	/* the first token of each sequence: rows S*H apart */
	for (int b = 0; b < B; b++)
		memcpy(cls + (size_t)b * H, x + (size_t)b * S * H, (size_t)H * sizeof *x);
	sky_k_bias_fill_f32(pooled, v.bp, NULL, B, H);
	sky_k_gemm_f32(0, 1, B, H, H, 1.0f, cls, H, v.wp, H, 1.0f, pooled, H);
	for (size_t i = 0; i < (size_t)B * H; i++)
		pooled[i] = tanhf(pooled[i]);
	/* the classifier reads the dropped pooled output; backward needs the
	 * one before dropout (tanh') and recomputes the dropped one */
	const float *cin = pooled;
	if (dr && dr->hidden > 0 && saved) {
		float *pd = scratch + L.pooled;
		memcpy(pd, pooled, (size_t)B * H * sizeof *pd);
		sky_dropout_apply(dr, dr->hidden, -1, SKY_DROP_POOLED, 0, pd, (size_t)B * H);
		cin = pd;
	}
	sky_k_bias_fill_f32(probs, v.bc, NULL, B, C);
	sky_k_gemm_f32(0, 1, B, C, H, 1.0f, cin, H, v.wc, H, 1.0f, probs, C);
	if (logits)
		memcpy(logits, probs, (size_t)B * C * sizeof *probs);
	/* cross-entropy from log-softmax, computed in double: the loss is
	 * reported and compared, and this is B*C operations */
	double total = 0;
	for (int b = 0; b < B; b++) {
		float *p = probs + (size_t)b * C;
		double mx = p[0], sum = 0;
		for (int k = 1; k < C; k++)
			mx = p[k] > mx ? p[k] : mx;
		for (int k = 0; k < C; k++)
			sum += exp((double)p[k] - mx);
		if (labels)
			total += -((double)p[labels[b]] - mx - log(sum));
		for (int k = 0; k < C; k++)
			p[k] = (float)(exp((double)p[k] - mx) / sum);
	}
	if (loss && labels)
		*loss = (float)(total / B);
	return 0;
}

void sky_head_backward(const sky_model_cfg *c, const float *w, const int32_t *labels,
		       const float *saved, float scale, float *dx, float *dw, float *scratch)
{
	sky_head_backward_dr(c, w, labels, saved, scale, dx, dw, scratch, NULL);
}

void sky_head_backward_dr(const sky_model_cfg *c, const float *w, const int32_t *labels,
			  const float *saved, float scale, float *dx, float *dw, float *scratch,
			  const sky_dropout *dr)
{
	const float ph = dr ? dr->hidden : 0;
	const int B = c->batch, S = c->seq, H = c->hidden, C = c->classes;
	sky_head_view v, d;
	sky_head_bind(c, (float *)w, &v);
	sky_head_bind(c, dw, &d);
	head_layout L = layout(c);
	const float *cls = saved + L.cls, *pooled = saved + L.pooled, *probs = saved + L.probs;
	float *dpool = scratch + L.pooled, *dlog = scratch + L.probs;

	/* d loss / d logits = (softmax - onehot) / B */
	const float k = scale / (float)B;
	for (int b = 0; b < B; b++)
		for (int j = 0; j < C; j++)
			dlog[(size_t)b * C + j] =
				k * (probs[(size_t)b * C + j] - (j == labels[b] ? 1.0f : 0.0f));
	sky_k_colsum_f32(dlog, B, C, d.bc);
	const float *cin = pooled;
	if (ph > 0) { /* dpool's space holds the dropped pooled output until dpool is made */
		memcpy(dpool, pooled, (size_t)B * H * sizeof *dpool);
		sky_dropout_apply(dr, ph, -1, SKY_DROP_POOLED, 0, dpool, (size_t)B * H);
		cin = dpool;
	}
	sky_k_gemm_f32(1, 0, C, H, B, 1.0f, dlog, C, cin, H, 1.0f, d.wc, H);
	sky_k_gemm_f32(0, 0, B, H, C, 1.0f, dlog, C, v.wc, H, 0.0f, dpool, H);
	sky_dropout_apply(dr, ph, -1, SKY_DROP_POOLED, 0, dpool, (size_t)B * H);
	/* tanh' = 1 - tanh^2 */
	for (size_t i = 0; i < (size_t)B * H; i++)
		dpool[i] *= 1.0f - pooled[i] * pooled[i];
	sky_k_colsum_f32(dpool, B, H, d.bp);
	sky_k_gemm_f32(1, 0, H, H, B, 1.0f, dpool, H, cls, H, 1.0f, d.wp, H);
	memset(dx, 0, (size_t)B * S * H * sizeof *dx);
	/* dx[b, 0] = dpooled[b] Wp: one GEMM writing rows S*H apart */
	sky_k_gemm_f32(0, 0, B, H, H, 1.0f, dpool, H, v.wp, H, 0.0f, dx, S * H);
}
