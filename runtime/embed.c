/* BERT embeddings: a gather of three table rows per token, then LayerNorm
 * (see sky_embed.h). Backward scatters the LayerNorm's input gradient back
 * into the rows that were read. */
#include "sky_embed.h"

#include "sky_err.h"
#include "sky_kernels_f32.h"
#include "sky_layer.h"
#include "sky_log.h"
#include "sky_rng.h"

#include <string.h>

static size_t pad16(size_t n) { return (n + 15) & ~(size_t)15; }

int sky_embed_tensors(const sky_model_cfg *c, sky_tensor_info *out)
{
	const int h = c->hidden;
	const sky_tensor_spec t[SKY_EMBED_NTENSORS] = {
		{"embeddings.word_embeddings.weight", c->vocab, h},
		{"embeddings.position_embeddings.weight", c->max_pos, h},
		{"embeddings.token_type_embeddings.weight", c->type_vocab, h},
		{"embeddings.LayerNorm.weight", h, 0},
		{"embeddings.LayerNorm.bias", h, 0},
	};
	return sky_tensor_table(t, SKY_EMBED_NTENSORS, out);
}

void sky_embed_bind(const sky_model_cfg *c, float *flat, sky_embed_view *v)
{
	size_t h = (size_t)c->hidden;
	v->word = flat;
	v->pos = v->word + (size_t)c->vocab * h;
	v->type = v->pos + (size_t)c->max_pos * h;
	v->ln_g = v->type + (size_t)c->type_vocab * h;
	v->ln_b = v->ln_g + h;
}

void sky_embed_init(const sky_model_cfg *c, float *flat, unsigned long long seed)
{
	sky_embed_view v;
	sky_embed_bind(c, flat, &v);
	sky_rng r;
	sky_rng_seed(&r, seed);
	size_t n = (size_t)(v.ln_g - v.word);
	for (size_t i = 0; i < n; i++)
		v.word[i] = 0.02f * sky_rng_normal(&r);
	for (int j = 0; j < c->hidden; j++) {
		v.ln_g[j] = 1.0f;
		v.ln_b[j] = 0.0f;
	}
}

/* saved: xhat (T, H) | rstd (T) */
size_t sky_embed_saved_floats(const sky_model_cfg *c)
{
	size_t t = (size_t)sky_model_tokens(c);
	return pad16(t * c->hidden) + pad16(t);
}

/* LayerNorm backward's output | with dropout, the dropped dy */
size_t sky_embed_scratch_floats(const sky_model_cfg *c)
{
	return (sky_model_has_dropout(c) ? 2 : 1) * pad16((size_t)sky_model_tokens(c) * c->hidden);
}

int sky_embed_check(const sky_model_cfg *c, const int32_t *ids, const int32_t *types)
{
	int64_t t = sky_model_tokens(c);
	for (int64_t i = 0; i < t; i++) {
		if (ids[i] < 0 || ids[i] >= c->vocab) {
			SKY_ERROR("embeddings: token %lld has id %d, outside the vocabulary [0, %d)",
				  (long long)i, ids[i], c->vocab);
			return SKY_EINVAL;
		}
		if (types && (types[i] < 0 || types[i] >= c->type_vocab)) {
			SKY_ERROR("embeddings: token %lld has type %d, outside [0, %d)", (long long)i,
				  types[i], c->type_vocab);
			return SKY_EINVAL;
		}
	}
	return 0;
}

int sky_embed_forward(const sky_model_cfg *c, const float *w, const int32_t *ids,
		      const int32_t *types, float *y, float *saved)
{
	return sky_embed_forward_dr(c, w, ids, types, y, saved, NULL);
}

int sky_embed_forward_dr(const sky_model_cfg *c, const float *w, const int32_t *ids,
			 const int32_t *types, float *y, float *saved, const sky_dropout *dr)
{
	int rc = sky_embed_check(c, ids, types);
	if (rc)
		return rc;
	sky_embed_view v;
	sky_embed_bind(c, (float *)w, &v);
	const int T = (int)sky_model_tokens(c), H = c->hidden, S = c->seq;
	for (int t = 0; t < T; t++) {
		const float *we = v.word + (size_t)ids[t] * H;
		const float *pe = v.pos + (size_t)(t % S) * H;
		const float *te = v.type + (size_t)(types ? types[t] : 0) * H;
		float *yr = y + (size_t)t * H;
		for (int j = 0; j < H; j++)
			yr[j] = we[j] + pe[j] + te[j];
	}
	size_t xo = 0, ro = pad16((size_t)T * H);
	sky_k_layernorm_f32(y, T, H, v.ln_g, v.ln_b, sky_model_ln_eps(c), y, saved ? saved + xo : NULL,
			    saved ? saved + ro : NULL);
	sky_dropout_apply(dr, dr ? dr->hidden : 0, -1, SKY_DROP_EMBED, 0, y, (size_t)T * H);
	return 0;
}

void sky_embed_backward(const sky_model_cfg *c, const float *w, const int32_t *ids,
			const int32_t *types, const float *saved, const float *dy, float *dw,
			float *scratch)
{
	sky_embed_backward_dr(c, w, ids, types, saved, dy, dw, scratch, NULL);
}

void sky_embed_backward_dr(const sky_model_cfg *c, const float *w, const int32_t *ids,
			   const int32_t *types, const float *saved, const float *dy, float *dw,
			   float *scratch, const sky_dropout *dr)
{
	sky_embed_view v, d;
	sky_embed_bind(c, (float *)w, &v);
	sky_embed_bind(c, dw, &d);
	const int T = (int)sky_model_tokens(c), H = c->hidden, S = c->seq;
	float *de = scratch;
	if (dr && dr->hidden > 0) {
		float *dd = scratch + pad16((size_t)T * H);
		memcpy(dd, dy, (size_t)T * H * sizeof *dd);
		sky_dropout_apply(dr, dr->hidden, -1, SKY_DROP_EMBED, 0, dd, (size_t)T * H);
		dy = dd;
	}
	sky_k_layernorm_bwd_f32(dy, saved, saved + pad16((size_t)T * H), v.ln_g, T, H, de, d.ln_g,
				d.ln_b, NULL);
	for (int t = 0; t < T; t++) {
		const float *g = de + (size_t)t * H;
		sky_k_add_f32(d.word + (size_t)ids[t] * H, g, (size_t)H);
		sky_k_add_f32(d.pos + (size_t)(t % S) * H, g, (size_t)H);
		sky_k_add_f32(d.type + (size_t)(types ? types[t] : 0) * H, g, (size_t)H);
	}
}
