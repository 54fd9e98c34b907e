/* A whole BERT classifier on one board (see sky_bert.h): the story of one
 * training step is sky_bert_accumulate (forward down, backward up) per
 * micro-batch, then clip and optimizer over one flat vector. */
#include "sky_bert.h"

#include "sky_embed.h"
#include "sky_err.h"
#include "sky_fedopt.h"
#include "sky_fedsum.h"
#include "sky_head.h"
#include "sky_layer.h"
#include "sky_log.h"
#include "sky_safetensors.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t pad16(size_t n) { return (n + 15) & ~(size_t)15; }
static size_t max3(size_t a, size_t b, size_t c)
{
	size_t m = a > b ? a : b;
	return m > c ? m : c;
}

int sky_bert_carve(sky_bert *m, const sky_model_cfg *c, const sky_bert_opts *o, sky_arena *a)
{
	memset(m, 0, sizeof *m);
	if (sky_model_validate(c) != 0)
		return SKY_EINVAL;
	if (o->micro < 1 || !(o->optim.lr > 0) || o->clip_norm < 0) {
		SKY_ERROR("bert: need micro >= 1, lr > 0 and clip >= 0 (got %d, %g, %g)", o->micro,
			  (double)o->optim.lr, (double)o->clip_norm);
		return SKY_EINVAL;
	}
	m->cfg = *c;
	m->opts = *o;
	const size_t T = (size_t)sky_model_tokens(c), H = (size_t)c->hidden;
	m->n_embed = (size_t)sky_model_embed_params(c);
	m->n_layer = (size_t)sky_model_layer_params(c);
	m->n_head = (size_t)sky_model_head_params(c);
	/* each block starts on a 64-byte line; the padding floats stay 0 */
	m->off_layer0 = pad16(m->n_embed);
	m->stride_layer = pad16(m->n_layer);
	m->off_head = m->off_layer0 + (size_t)c->layers * m->stride_layer;
	m->n_params = m->off_head + pad16(m->n_head);
	m->stride_saved = pad16(sky_layer_saved_floats(c, SKY_BLOCK_ALL));

	size_t nstate = (size_t)sky_optim_state_vectors(o->optim.kind) * m->n_params;
	m->params = sky_arena_floats(a, m->n_params, SKY_LIFE_PERSIST);
	m->grads = sky_arena_floats(a, m->n_params, SKY_LIFE_PERSIST);
	m->opt_state = sky_arena_floats(a, nstate, SKY_LIFE_PERSIST);
	m->fx_acc = o->fx_sum ? sky_arena_alloc(a, m->n_params * sizeof *m->fx_acc, SKY_LIFE_PERSIST)
			      : NULL;
	m->emb_saved = sky_arena_floats(a, sky_embed_saved_floats(c), SKY_LIFE_ACT);
	m->layer_saved = sky_arena_floats(a, (size_t)c->layers * m->stride_saved, SKY_LIFE_ACT);
	m->head_saved = sky_arena_floats(a, sky_head_saved_floats(c), SKY_LIFE_ACT);
	for (int i = 0; i < 2; i++) {
		m->act[i] = sky_arena_floats(a, T * H, SKY_LIFE_ACT);
		m->dact[i] = sky_arena_floats(a, T * H, SKY_LIFE_ACT);
	}
	m->mask = sky_arena_floats(a, T, SKY_LIFE_ACT);
	m->logits = sky_arena_floats(a, (size_t)c->batch * c->classes, SKY_LIFE_ACT);
	m->scratch = sky_arena_floats(a,
				      max3(sky_layer_scratch_floats(c), sky_embed_scratch_floats(c),
					   sky_head_scratch_floats(c)),
				      SKY_LIFE_SCRATCH);
	return sky_arena_status(a);
}

int sky_bert_arena_bytes(const sky_model_cfg *c, const sky_bert_opts *o, size_t *bytes)
{
	sky_arena a;
	sky_bert m;
	sky_arena_init(&a, NULL, 0);
	int rc = sky_bert_carve(&m, c, o, &a);
	if (rc)
		return rc;
	*bytes = sky_arena_required(&a);
	return 0;
}

float *sky_bert_embed_params(const sky_bert *m) { return m->params; }
float *sky_bert_layer_params(const sky_bert *m, int layer)
{
	return m->params + m->off_layer0 + (size_t)layer * m->stride_layer;
}
float *sky_bert_head_params(const sky_bert *m) { return m->params + m->off_head; }

void sky_bert_init(sky_bert *m, unsigned long long seed)
{
	const sky_model_cfg *c = &m->cfg;
	memset(m->params, 0, m->n_params * sizeof *m->params);
	memset(m->grads, 0, m->n_params * sizeof *m->grads);
	memset(m->opt_state, 0,
	       (size_t)sky_optim_state_vectors(m->opts.optim.kind) * m->n_params * sizeof(float));
	/* one seed per block, so adding a layer does not change the others */
	sky_embed_init(c, sky_bert_embed_params(m), seed);
	for (int l = 0; l < c->layers; l++)
		sky_layer_init(c, sky_bert_layer_params(m, l), seed + 1 + (unsigned long long)l);
	sky_head_init(c, sky_bert_head_params(m), seed + 0x10000);
	m->step = 0;
}

/* HuggingFace turns the 1/0 attention mask into an additive one with the
 * dtype's minimum; any value whose exp underflows to 0 gives the same
 * probabilities, and -1e9 keeps scores finite. */
static void make_mask(sky_bert *m, const int32_t *attn)
{
	size_t t = (size_t)sky_model_tokens(&m->cfg);
	for (size_t i = 0; i < t; i++)
		m->mask[i] = attn && !attn[i] ? -1e9f : 0.0f;
}

/* Forward through the encoder; returns the buffer holding the last
 * layer's output. saved: keep activations for backward. */
static int encode(sky_bert *m, const sky_bert_batch *b, int saved, const sky_dropout *dr,
		  float **out)
{
	const sky_model_cfg *c = &m->cfg;
	int rc = sky_embed_forward_dr(c, sky_bert_embed_params(m), b->ids, b->types, m->act[0],
				      saved ? m->emb_saved : NULL, dr);
	if (rc)
		return rc;
	make_mask(m, b->attn);
	for (int l = 0; l < c->layers; l++)
		sky_layer_forward_dr(c, sky_bert_layer_params(m, l), m->act[l & 1], m->mask,
				     m->act[(l + 1) & 1],
				     saved ? m->layer_saved + (size_t)l * m->stride_saved : NULL,
				     m->scratch, SKY_BLOCK_ALL, dr, l);
	*out = m->act[c->layers & 1];
	return 0;
}

int sky_bert_accumulate(sky_bert *m, const sky_bert_batch *b, float scale, float *loss)
{
	return sky_bert_accumulate_dr(m, b, scale, loss, NULL);
}

int sky_bert_accumulate_dr(sky_bert *m, const sky_bert_batch *b, float scale, float *loss,
			   const sky_dropout *dr)
{
	const sky_model_cfg *c = &m->cfg;
	float *x, l = 0;
	int rc = encode(m, b, 1, dr, &x);
	if (rc)
		return rc;
	if (!b->labels) {
		SKY_ERROR("bert: a training batch needs labels");
		return SKY_EINVAL;
	}
	rc = sky_head_forward_dr(c, sky_bert_head_params(m), x, b->labels, m->logits, &l,
				 m->head_saved, m->scratch, dr);
	if (rc)
		return rc;
	if (loss)
		*loss = l;

	/* backward: head, layers last to first, embeddings */
	float *g = m->grads;
	sky_head_backward_dr(c, sky_bert_head_params(m), b->labels, m->head_saved, scale,
			     m->dact[0], g + m->off_head, m->scratch, dr);
	int cur = 0;
	for (int li = c->layers - 1; li >= 0; li--) {
		sky_layer_backward_dr(c, sky_bert_layer_params(m, li), m->mask,
				      m->layer_saved + (size_t)li * m->stride_saved, m->dact[cur],
				      m->dact[cur ^ 1],
				      g + m->off_layer0 + (size_t)li * m->stride_layer, m->scratch,
				      SKY_BLOCK_ALL, dr, li);
		cur ^= 1;
	}
	sky_embed_backward_dr(c, sky_bert_embed_params(m), b->ids, b->types, m->emb_saved,
			      m->dact[cur], g, m->scratch, dr);
	return 0;
}

float *sky_bert_block(const sky_bert *m, float *base, int b, size_t *n)
{
	const int L = m->cfg.layers;
	if (b < 0 || b > 2 * L + 1)
		return NULL;
	if (b == 0) {
		*n = m->n_embed;
		return base;
	}
	if (b == 2 * L + 1) {
		*n = m->n_head;
		return base + m->off_head;
	}
	const size_t fo = sky_layer_half_offset(&m->cfg, SKY_BLOCK_FFN);
	float *layer = base + m->off_layer0 + (size_t)((b - 1) / 2) * m->stride_layer;
	int ffn = (b - 1) % 2;
	*n = ffn ? m->n_layer - fo : fo;
	return layer + (ffn ? fo : 0);
}

float sky_bert_clip(sky_bert *m, float max_norm)
{
	/* block by block, in the order a pipeline's stages share: adding each
	 * block's sum to the total as it comes is what sky_optim_norm does */
	double tot = 0;
	size_t n = 0;
	for (int b = 0; b <= 2 * m->cfg.layers + 1; b++) {
		const float *g = sky_bert_block(m, m->grads, b, &n);
		tot += sky_optim_sumsq(g, n);
	}
	float norm = (float)sqrt(tot);
	sky_optim_clip_scale(m->grads, m->n_params, norm, max_norm);
	return norm;
}

int sky_bert_train_step(sky_bert *m, const sky_bert_batch *mb, float *loss)
{
	const int n = m->opts.micro;
	/* check every micro-batch first, so a bad one leaves the model as it was */
	for (int i = 0; i < n; i++) {
		int rc = sky_embed_check(&m->cfg, mb[i].ids, mb[i].types);
		if (rc)
			return rc;
		if (!mb[i].labels) {
			SKY_ERROR("bert: micro-batch %d has no labels", i);
			return SKY_EINVAL;
		}
		for (int b = 0; b < m->cfg.batch; b++) {
			if (mb[i].labels[b] < 0 || mb[i].labels[b] >= m->cfg.classes) {
				SKY_ERROR("bert: micro-batch %d sequence %d has label %d, outside "
					  "[0, %d)",
					  i, b, mb[i].labels[b], m->cfg.classes);
				return SKY_EINVAL;
			}
		}
	}
	memset(m->grads, 0, m->n_params * sizeof *m->grads);
	const int fx = m->opts.fx_sum && m->fx_acc, bits = sky_fx_grad_bits(n);
	if (fx)
		memset(m->fx_acc, 0, m->n_params * sizeof *m->fx_acc);
	double total = 0;
	for (int i = 0; i < n; i++) {
		float l = 0;
		/* the config's dropout, masks keyed by the step being taken */
		sky_dropout drs;
		const sky_dropout *dr =
			sky_dropout_make(&drs, &m->cfg, m->opts.drop_seed, m->step + 1, (uint32_t)i);
		if (fx && i > 0)
			memset(m->grads, 0, m->n_params * sizeof *m->grads);
		int rc = sky_bert_accumulate_dr(m, &mb[i], 1.0f / (float)n, &l, dr);
		if (rc)
			return rc; /* not reached: inputs were checked */
		if (fx) {
			size_t c = 0;
			sky_fx_accumulate(m->fx_acc, m->grads, m->n_params, SKY_FX_GRAD_CLIP, bits, &c);
			m->fx_clipped += (long)c;
		}
		total += l;
	}
	if (fx)
		sky_fx_decode(m->fx_acc, m->n_params, 1, bits, m->grads, NULL);
	if (m->opts.clip_norm > 0)
		sky_bert_clip(m, m->opts.clip_norm);
	if (m->opts.prox_mu > 0 && m->opts.prox_w0)
		sky_fedprox_add(m->grads, m->params, m->opts.prox_w0, m->n_params, m->opts.prox_mu,
				NULL);
	m->step++;
	sky_optim_step(&m->opts.optim, m->params, m->grads, m->opt_state, m->n_params, m->step);
	if (loss)
		*loss = (float)(total / n);
	return 0;
}

int sky_bert_predict(sky_bert *m, const sky_bert_batch *b, int32_t *pred, float *loss)
{
	const sky_model_cfg *c = &m->cfg;
	float *x, l = 0;
	int rc = encode(m, b, 0, NULL, &x);
	if (rc)
		return rc;
	rc = sky_head_forward(c, sky_bert_head_params(m), x, b->labels, m->logits,
			      b->labels ? &l : NULL, NULL, m->scratch);
	if (rc)
		return rc;
	if (loss)
		*loss = l;
	for (int i = 0; i < c->batch; i++) {
		const float *lg = m->logits + (size_t)i * c->classes;
		int best = 0;
		for (int k = 1; k < c->classes; k++)
			best = lg[k] > lg[best] ? k : best;
		if (pred)
			pred[i] = best;
	}
	return 0;
}

/* Names in the file: BertForSequenceClassification puts "bert." before
 * everything but the classifier. */
enum { NAME_CAP = 96 };

int sky_bert_save(const sky_bert *m, const char *path, sky_diag *d)
{
	const sky_model_cfg *c = &m->cfg;
	int n = SKY_EMBED_NTENSORS + c->layers * SKY_LAYER_NTENSORS + SKY_HEAD_NTENSORS, k = 0;
	int rc = SKY_ENOMEM;
	sky_st_entry *e = calloc((size_t)n, sizeof *e);
	char *names = calloc((size_t)n, NAME_CAP);
	sky_tensor_info te[SKY_EMBED_NTENSORS], tl[SKY_LAYER_NTENSORS], th[SKY_HEAD_NTENSORS];
	if (!e || !names)
		goto exit;
	sky_embed_tensors(c, te);
	sky_layer_tensors(c, tl);
	sky_head_tensors(c, th);
	rc = sky_st_block_entries("bert.", te, SKY_EMBED_NTENSORS, sky_bert_embed_params(m), e,
				  names, NAME_CAP, d);
	k += SKY_EMBED_NTENSORS;
	for (int l = 0; l < c->layers && !rc; l++) {
		char prefix[48];
		snprintf(prefix, sizeof prefix, "bert.encoder.layer.%d.", l);
		rc = sky_st_block_entries(prefix, tl, SKY_LAYER_NTENSORS, sky_bert_layer_params(m, l),
					  e + k, names + (size_t)k * NAME_CAP, NAME_CAP, d);
		k += SKY_LAYER_NTENSORS;
	}
	/* pooler (the first two head tensors) under "bert.", classifier at the top */
	if (!rc)
		rc = sky_st_block_entries("bert.", th, 2, sky_bert_head_params(m), e + k,
					  names + (size_t)k * NAME_CAP, NAME_CAP, d);
	k += 2;
	if (!rc)
		rc = sky_st_block_entries("", th + 2, 2, sky_bert_head_params(m), e + k,
					  names + (size_t)k * NAME_CAP, NAME_CAP, d);
	k += 2;
	if (!rc) {
		const sky_st_meta meta[] = {{"format", "pt"}, {"sky_model", c->name}};
		rc = sky_st_write(path, e, k, meta, 2, d);
	}
exit:
	free(e);
	free(names);
	return rc;
}

int sky_bert_load(sky_bert *m, const char *path, sky_diag *d)
{
	const sky_model_cfg *c = &m->cfg;
	sky_tensor_info te[SKY_EMBED_NTENSORS], tl[SKY_LAYER_NTENSORS], th[SKY_HEAD_NTENSORS];
	sky_st_file f;
	sky_st_init(&f);
	int rc = sky_st_open(&f, path, d);
	if (rc)
		goto exit;
	sky_embed_tensors(c, te);
	sky_layer_tensors(c, tl);
	sky_head_tensors(c, th);
	rc = sky_st_load_block(&f, "bert.", te, SKY_EMBED_NTENSORS, sky_bert_embed_params(m), d);
	for (int l = 0; l < c->layers && !rc; l++) {
		char prefix[48];
		snprintf(prefix, sizeof prefix, "bert.encoder.layer.%d.", l);
		rc = sky_st_load_block(&f, prefix, tl, SKY_LAYER_NTENSORS, sky_bert_layer_params(m, l),
				       d);
	}
	if (!rc)
		rc = sky_st_load_block(&f, "bert.", th, 2, sky_bert_head_params(m), d);
	if (!rc)
		rc = sky_st_load_block(&f, "", th + 2, 2, sky_bert_head_params(m), d);
exit:
	sky_st_close(&f);
	return rc;
}
