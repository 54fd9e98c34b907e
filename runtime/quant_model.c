/* A BERT classifier for inference with fp32 or int8 encoder layers, read
 * from a safetensors file (see sky_quant_model.h). */
#include "sky_quant_model.h"

#include "sky_embed.h"
#include "sky_ends.h"
#include "sky_head.h"
#include "sky_kernels_s8.h"
#include "sky_layer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_CAP 96

static void layer_prefix(char *buf, size_t n, int l)
{
	snprintf(buf, n, "bert.encoder.layer.%d.", l);
}

int sky_qmodel_probe(const sky_st_file *f, int *precision, int *layers, sky_diag *d)
{
	char name[NAME_CAP];
	int l = 0, prec = -1;
	for (;; l++) {
		layer_prefix(name, sizeof name, l);
		strcat(name, "attention.self.query.weight");
		const sky_st_tensor *t = sky_st_find(f, name);
		if (!t)
			break;
		int p = t->dtype == SKY_ST_F32 ? SKY_PREC_FP32 : t->dtype == SKY_ST_I8 ? SKY_PREC_INT8 : -1;
		if (p < 0)
			return sky_diag_set(d, SKY_EFORMAT, "tensor %s: dtype %s, expected F32 or I8",
					    name, sky_st_dtype_name(t->dtype));
		if (prec >= 0 && p != prec)
			return sky_diag_set(d, SKY_EFORMAT,
					    "tensor %s: dtype %s, but layer 0 has %s (mixed precisions)",
					    name, sky_st_dtype_name(t->dtype),
					    prec == SKY_PREC_FP32 ? "F32" : "I8");
		prec = p;
	}
	if (l == 0)
		return sky_diag_set(d, SKY_ENOTFOUND,
				    "no encoder layer (bert.encoder.layer.0.attention.self.query.weight)");
	*precision = prec;
	*layers = l;
	return 0;
}

/* Carves everything; the same calls measure and carve. */
static void carve(sky_qmodel *m, sky_arena *a, void **tmp)
{
	const sky_model_cfg *c = &m->cfg;
	size_t T = (size_t)sky_model_tokens(c), H = (size_t)c->hidden;
	m->embed = sky_arena_floats(a, (size_t)sky_model_embed_params(c), SKY_LIFE_PERSIST);
	m->head = sky_arena_floats(a, (size_t)sky_model_head_params(c), SKY_LIFE_PERSIST);
	m->layers = NULL;
	m->q = NULL;
	size_t scratch = sky_head_scratch_floats(c);
	if (m->precision == SKY_PREC_FP32) {
		m->layers = sky_arena_floats(a, (size_t)c->layers * sky_model_layer_params(c),
					     SKY_LIFE_PERSIST);
		if (sky_layer_scratch_floats(c) > scratch)
			scratch = sky_layer_scratch_floats(c);
		*tmp = NULL;
	} else {
		sky_layer_s8 *q = sky_arena_alloc(a, sizeof(sky_layer_s8) * c->layers, SKY_LIFE_PERSIST);
		sky_layer_s8 local;
		int v = sky_k_s8_variant_active();
		for (int l = 0; l < c->layers; l++) {
			sky_layer_s8 *L = q ? &q[l] : &local;
			sky_layer_s8_carve_persist(L, c, v, a);
			if (l == 0)
				sky_layer_s8_carve_scratch(L, a); /* shared by every layer */
			else if (q)
				sky_layer_s8_share_scratch(L, &q[0]);
		}
		m->q = q;
		*tmp = sky_arena_alloc(a, sky_layer_s8_tmp_bytes(c), SKY_LIFE_SCRATCH);
	}
	m->act[0] = sky_arena_floats(a, T * H, SKY_LIFE_SCRATCH);
	m->act[1] = sky_arena_floats(a, T * H, SKY_LIFE_SCRATCH);
	m->mask = sky_arena_floats(a, T, SKY_LIFE_SCRATCH);
	m->logits = sky_arena_floats(a, (size_t)c->batch * c->classes, SKY_LIFE_SCRATCH);
	m->scratch = sky_arena_floats(a, scratch, SKY_LIFE_SCRATCH);
}

int sky_qmodel_open(sky_qmodel *m, const sky_st_file *f, const sky_model_cfg *cfg, sky_diag *d)
{
	int rc, prec, layers;
	memset(m, 0, sizeof *m);
	if ((rc = sky_qmodel_probe(f, &prec, &layers, d)) != 0)
		return rc;
	m->cfg = *cfg;
	m->cfg.layers = layers;
	m->precision = prec;
	if (sky_model_validate(&m->cfg) != 0)
		return sky_diag_set(d, SKY_EINVAL, "model %s with %d layers: invalid shape",
				    cfg->name, layers);
	const sky_model_cfg *c = &m->cfg;
	void *tmp = NULL;
	sky_arena meas;
	sky_arena_init(&meas, NULL, 0);
	carve(m, &meas, &tmp);
	m->arena_bytes = sky_arena_required(&meas);
	m->mem = malloc(m->arena_bytes); /* the one allocation, at load time */
	if (!m->mem)
		return sky_diag_set(d, SKY_ENOMEM, "model %s: %zu bytes of arena", c->name,
				    m->arena_bytes);
	sky_arena a;
	sky_arena_init(&a, m->mem, m->arena_bytes);
	carve(m, &a, &tmp);
	if ((rc = sky_arena_seal(&a)) != 0)
		return sky_diag_set(d, rc, "model %s: arena carve failed", c->name);

	sky_tensor_info te[SKY_EMBED_NTENSORS], tl[SKY_LAYER_NTENSORS], th[SKY_HEAD_NTENSORS];
	sky_embed_tensors(c, te);
	sky_layer_tensors(c, tl);
	sky_head_tensors(c, th);
	if ((rc = sky_st_load_block(f, "bert.", te, SKY_EMBED_NTENSORS, m->embed, d)) ||
	    (rc = sky_st_load_block(f, "bert.", th, 2, m->head, d)) ||
	    (rc = sky_st_load_block(f, "", th + 2, 2, m->head, d)))
		return rc;
	size_t np = (size_t)sky_model_layer_params(c);
	m->weight_bytes = 0;
	for (int l = 0; l < c->layers; l++) {
		char prefix[48];
		layer_prefix(prefix, sizeof prefix, l);
		if (prec == SKY_PREC_FP32) {
			rc = sky_st_load_block(f, prefix, tl, SKY_LAYER_NTENSORS, m->layers + l * np, d);
			m->weight_bytes += np * sizeof(float);
		} else {
			rc = sky_layer_s8_load(&m->q[l], f, prefix, tmp, d);
			m->weight_bytes += sky_layer_s8_weight_bytes(c);
		}
		if (rc)
			return rc;
	}
	return 0;
}

void sky_qmodel_close(sky_qmodel *m)
{
	if (!m)
		return;
	free(m->mem);
	m->mem = NULL;
}

int sky_qmodel_forward(sky_qmodel *m, const int32_t *ids, const int32_t *attn, float *logits,
		       float *layer_in)
{
	const sky_model_cfg *c = &m->cfg;
	size_t T = (size_t)sky_model_tokens(c), H = (size_t)c->hidden;
	size_t np = (size_t)sky_model_layer_params(c);
	int rc;
	for (size_t i = 0; i < T; i++)
		m->mask[i] = attn && !attn[i] ? -1e9f : 0.0f;
	/* int8: the fp32 ends in portable arithmetic (sky_ends.h), so the
	 * logits are the same bits on every machine, as a serving fleet's */
	if (m->precision == SKY_PREC_INT8)
		rc = sky_ends_embed(c, m->embed, ids, m->act[0]);
	else
		rc = sky_embed_forward(c, m->embed, ids, NULL, m->act[0], NULL);
	if (rc)
		return rc;
	int cur = 0;
	for (int l = 0; l < c->layers; l++) {
		if (layer_in)
			memcpy(layer_in + l * T * H, m->act[cur], T * H * sizeof(float));
		if (m->precision == SKY_PREC_FP32)
			sky_layer_forward(c, m->layers + l * np, m->act[cur], m->mask, m->act[1 - cur],
					  NULL, m->scratch, SKY_BLOCK_ALL);
		else if ((rc = sky_layer_s8_forward(&m->q[l], m->act[cur], m->mask, m->act[1 - cur])))
			return rc;
		cur = 1 - cur;
	}
	if (m->precision == SKY_PREC_INT8) {
		float *out = logits ? logits : m->logits;
		for (int b = 0; b < c->batch; b++)
			sky_ends_head(c, m->head, m->act[cur] + (size_t)b * c->seq * H,
				      out + (size_t)b * c->classes, m->scratch);
		return 0;
	}
	return sky_head_forward(c, m->head, m->act[cur], NULL, logits ? logits : m->logits, NULL,
				NULL, m->scratch);
}

int sky_qmodel_save_int8(const sky_qmodel *m, sky_layer_s8 *const *q, const char *path,
			 const char *calib_note, sky_diag *d)
{
	const sky_model_cfg *c = &m->cfg;
	int per = SKY_LAYER_S8_NENTRIES;
	int n = SKY_EMBED_NTENSORS + c->layers * per + SKY_HEAD_NTENSORS, k = 0, rc = SKY_ENOMEM;
	size_t wb = sky_layer_s8_weight_bytes(c);
	/* written once, after quantising: plain heap is fine here */
	sky_st_entry *e = calloc((size_t)n, sizeof *e);
	char *names = calloc((size_t)n, NAME_CAP);
	int8_t *wbuf = malloc(wb * (size_t)c->layers);
	sky_tensor_info te[SKY_EMBED_NTENSORS], th[SKY_HEAD_NTENSORS];
	if (!e || !names || !wbuf) {
		sky_diag_set(d, rc, "saving %s: out of memory", path);
		goto exit;
	}
	sky_embed_tensors(c, te);
	sky_head_tensors(c, th);
	if ((rc = sky_st_block_entries("bert.", te, SKY_EMBED_NTENSORS, m->embed, e, names, NAME_CAP,
				       d)))
		goto exit;
	k = SKY_EMBED_NTENSORS;
	for (int l = 0; l < c->layers; l++) {
		char prefix[48];
		layer_prefix(prefix, sizeof prefix, l);
		rc = sky_layer_s8_entries(q[l], prefix, wbuf + wb * l, names + (size_t)k * NAME_CAP,
					  e + k, d);
		if (rc < 0)
			goto exit;
		k += rc;
	}
	if ((rc = sky_st_block_entries("bert.", th, 2, m->head, e + k, names + (size_t)k * NAME_CAP,
				       NAME_CAP, d)))
		goto exit;
	k += 2;
	if ((rc = sky_st_block_entries("", th + 2, 2, m->head, e + k, names + (size_t)k * NAME_CAP,
				       NAME_CAP, d)))
		goto exit;
	k += 2;
	const sky_st_meta meta[] = {{"format", "pt"},
				    {"sky_model", c->name},
				    {"sky.precision", "int8"},
				    {"sky.quantisation",
				     "weights int8 symmetric per output channel (W = q * scale); "
				     "activations per tensor, scale = act_absmax / 127 (int16 points "
				     "ao, fo: / 32767)"},
				    {"sky.calibration", calib_note ? calib_note : ""}};
	rc = sky_st_write(path, e, k, meta, 5, d);
exit:
	free(e);
	free(names);
	free(wbuf);
	return rc;
}
