/* A federated owner's local training; see sky_fedclient.h. */
#include "sky_fedclient.h"

#include "sky_arena.h"
#include "sky_fedmsg.h"
#include "sky_fedopt.h"
#include "sky_log.h"
#include "sky_optim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Carves m for cfg (at its batch and seq) in one malloc'd arena. */
static int carve(sky_bert *m, const sky_model_cfg *cfg, const sky_bert_opts *o, void **buf,
		 sky_diag *d)
{
	size_t bytes = 0;
	sky_arena ar;
	int rc = sky_bert_arena_bytes(cfg, o, &bytes);
	if (rc)
		return sky_diag_set(d, rc, "the model's shapes do not carve (batch %d x seq %d)",
				    cfg->batch, cfg->seq);
	if (!(*buf = malloc(bytes)))
		return sky_diag_set(d, SKY_ENOMEM, "cannot allocate the model (%zu bytes)", bytes);
	sky_arena_init(&ar, *buf, bytes);
	if ((rc = sky_bert_carve(m, cfg, o, &ar)) != 0 || (rc = sky_arena_seal(&ar)) != 0)
		return sky_diag_set(d, rc, "carving the model failed: %s", sky_strerror(rc));
	return 0;
}

int sky_fedclient_init(sky_fedclient *c, const char *config, size_t config_len,
		       const sky_dataset *ds, const sky_fedclient_opts *o, sky_diag *d)
{
	memset(c, 0, sizeof *c);
	c->o = *o;
	c->ds = ds;
	int rc;
	if (o->micro < 1 || o->micro > SKY_FEDCLIENT_MAX_MICRO || o->batch < 1 ||
	    o->local_steps < 1 || o->total_steps < o->local_steps)
		return sky_diag_set(d, SKY_EINVAL, "batch %d, micro %d, %d local steps of %ld",
				    o->batch, o->micro, o->local_steps, o->total_steps);
	if (!(c->hc = malloc(sizeof *c->hc)))
		return sky_diag_set(d, SKY_ENOMEM, "out of memory");
	if ((rc = sky_hf_config_parse(config, config_len, c->hc, d)) != 0)
		return rc;
	if (ds->meta.nlabels != c->hc->num_labels)
		return sky_diag_set(d, SKY_EINVAL, "the shard has %d labels, the model %d",
				    ds->meta.nlabels, c->hc->num_labels);
	sky_model_cfg cfg = c->hc->cfg;
	cfg.seq = ds->meta.seq;
	cfg.batch = o->batch;
	if (sky_model_validate(&cfg) != 0)
		return sky_diag_set(d, SKY_EINVAL, "batch %d x seq %d does not fit the model",
				    cfg.batch, cfg.seq);
	sky_optim_kind kind;
	if (sky_optim_parse(o->optim, &kind) != 0)
		return sky_diag_set(d, SKY_EINVAL, "unknown optimizer '%s' (adamw, sgd)", o->optim);
	sky_bert_opts bo;
	memset(&bo, 0, sizeof bo);
	sky_optim_default(&bo.optim, kind);
	bo.optim.lr = (float)o->lr;
	bo.micro = o->micro;
	bo.clip_norm = (float)o->clip;
	bo.drop_seed = (uint64_t)o->seed;
	if ((rc = carve(&c->m, &cfg, &bo, &c->buf, d)) != 0)
		return rc;
	/* zeroes the optimizer's state (the weights come with each round) */
	sky_bert_init(&c->m, (unsigned long long)o->seed);
	c->base_lr = bo.optim.lr;
	const size_t T = (size_t)cfg.seq * (size_t)cfg.batch * (size_t)o->micro;
	c->perm = malloc((size_t)ds->meta.rows * sizeof *c->perm);
	c->ids = malloc(T * 4), c->types = malloc(T * 4), c->attn = malloc(T * 4);
	c->labels = malloc((size_t)cfg.batch * (size_t)o->micro * 4);
	c->global = malloc(c->m.n_params * sizeof *c->global);
	if (!c->perm || !c->ids || !c->types || !c->attn || !c->labels || !c->global)
		return sky_diag_set(d, SKY_ENOMEM, "out of memory");
	if (sky_trainorder_init(&c->ord, ds->meta.rows, (uint64_t)o->seed, cfg.batch, o->micro,
				c->perm) != 0)
		return sky_diag_set(d, SKY_EINVAL,
				    "the shard's %lld rows are fewer than one step's %d x %d",
				    (long long)ds->meta.rows, cfg.batch, o->micro);
	const size_t S = (size_t)cfg.seq, B = (size_t)cfg.batch;
	for (int i = 0; i < o->micro; i++)
		c->views[i] = (sky_bert_batch){c->ids + S * B * i, c->types + S * B * i,
					       c->attn + S * B * i, c->labels + B * i};
	if (o->prox_mu > 0) {
		c->m.opts.prox_mu = (float)o->prox_mu;
		c->m.opts.prox_w0 = c->global;
	}
	return 0;
}

uint64_t sky_fedclient_words(const sky_fedclient *c)
{
	return c->m.n_params;
}

int sky_fedclient_round(sky_fedclient *c, uint64_t round, const float *global, float *out,
			sky_diag *d)
{
	sky_bert *m = &c->m;
	const size_t n = m->n_params, S = (size_t)m->cfg.seq, B = (size_t)m->cfg.batch;
	memcpy(c->global, global, n * sizeof *global);
	memcpy(m->params, global, n * sizeof *global);
	const long s0 = (long)round * c->o.local_steps;
	m->step = s0; /* the job's step: dropout masks and the optimizer's count */
	double lsum = 0;
	for (int k = 0; k < c->o.local_steps; k++) {
		const long s = s0 + k;
		for (int i = 0; i < c->o.micro; i++)
			sky_trainorder_take(c->ds, sky_trainorder_rows(&c->ord, s, i), m->cfg.batch,
					    c->ids + S * B * i, c->types + S * B * i,
					    c->attn + S * B * i, c->labels + B * i);
		m->opts.optim.lr = sky_optim_lr_at(c->base_lr, s, c->o.total_steps, c->o.warmup);
		float loss = 0;
		int rc = sky_bert_train_step(m, c->views, &loss);
		if (rc)
			return sky_diag_set(d, rc, "local step %ld failed: %s", s + 1,
					    sky_strerror(rc));
		lsum += loss;
	}
	c->last_loss = lsum / c->o.local_steps;
	memcpy(out, m->params, n * sizeof *out);
	if (c->o.dp_clip > 0) {
		/* the update, clipped to the DP norm, on top of the global weights */
		for (size_t i = 0; i < n; i++)
			out[i] -= global[i];
		int rc = sky_dp_clip(out, n, (float)c->o.dp_clip, NULL, d);
		if (rc)
			return rc;
		for (size_t i = 0; i < n; i++)
			out[i] += global[i];
	}
	return 0;
}

void sky_fedclient_free(sky_fedclient *c)
{
	if (!c)
		return;
	free(c->buf), free(c->hc), free(c->perm), free(c->ids), free(c->types), free(c->attn);
	free(c->labels), free(c->global);
	memset(c, 0, sizeof *c);
}

/* A model of the config's shapes to hold weights only (batch 1, short
 * sequences): what bundling and saving need. */
static int carve_holder(sky_bert *m, const sky_hf_config *hc, void **buf, sky_diag *d)
{
	sky_model_cfg cfg = hc->cfg;
	cfg.batch = 1;
	cfg.seq = cfg.max_pos < 8 ? cfg.max_pos : 8;
	sky_bert_opts bo;
	memset(&bo, 0, sizeof bo);
	sky_optim_default(&bo.optim, SKY_OPTIM_SGD);
	bo.micro = 1;
	return carve(m, &cfg, &bo, buf, d);
}

int sky_fedclient_bundle_dir(const char *dir, int init_weights, int seed, unsigned char **out,
			     size_t *len, sky_diag *d)
{
	char path[4096];
	sky_hf_config *hc = malloc(sizeof *hc);
	char *cfgtext = NULL;
	void *buf = NULL;
	sky_bert m;
	int rc;
	*out = NULL;
	if (!hc)
		return sky_diag_set(d, SKY_ENOMEM, "out of memory");
	snprintf(path, sizeof path, "%s/config.json", dir);
	FILE *f = fopen(path, "rb");
	long cl = -1;
	if (f && fseek(f, 0, SEEK_END) == 0)
		cl = ftell(f);
	if (!f || cl < 0 || cl > (long)SKY_FEDB_MAX_CONFIG || fseek(f, 0, SEEK_SET) != 0 ||
	    !(cfgtext = malloc((size_t)cl + 1)) || fread(cfgtext, 1, (size_t)cl, f) != (size_t)cl) {
		rc = sky_diag_set(d, SKY_EIO, "cannot read %s (at most %u bytes)", path,
				  SKY_FEDB_MAX_CONFIG);
		goto exit;
	}
	if ((rc = sky_hf_config_parse(cfgtext, (size_t)cl, hc, d)) != 0 ||
	    (rc = carve_holder(&m, hc, &buf, d)) != 0)
		goto exit;
	if (init_weights) {
		sky_bert_init(&m, (unsigned long long)seed);
	} else {
		sky_hf_report rep;
		if ((rc = sky_hf_load_dir(&m, dir, (unsigned long long)seed, &rep, d)) != 0)
			goto exit;
	}
	uint64_t bytes = sky_fedb_bytes((size_t)cl, m.n_params);
	size_t at = 0;
	if (!(*out = malloc(bytes))) {
		rc = sky_diag_set(d, SKY_ENOMEM, "out of memory (%llu bytes)",
				  (unsigned long long)bytes);
		goto exit;
	}
	if ((rc = sky_fedb_write_head(*out, cfgtext, (size_t)cl, m.n_params, &at)) != 0) {
		sky_diag_set(d, rc, "%s: cannot bundle", dir);
		goto exit;
	}
	sky_fedb_put_words(*out + at, m.params, m.n_params);
	*len = (size_t)bytes;
exit:
	if (f)
		fclose(f);
	if (rc) {
		free(*out);
		*out = NULL;
	}
	free(cfgtext), free(buf), free(hc);
	return rc;
}

int sky_fedclient_save_dir(const unsigned char *bundle, size_t len, const char *dir,
			   sky_diag *d)
{
	const char *cfgtext;
	size_t cl, at;
	uint64_t words;
	void *buf = NULL;
	sky_bert m;
	sky_hf_config *hc = malloc(sizeof *hc);
	int rc;
	if (!hc)
		return sky_diag_set(d, SKY_ENOMEM, "out of memory");
	if ((rc = sky_fedb_parse(bundle, len, &cfgtext, &cl, &at, &words, d)) != 0 ||
	    (rc = sky_hf_config_parse(cfgtext, cl, hc, d)) != 0 ||
	    (rc = carve_holder(&m, hc, &buf, d)) != 0)
		goto exit;
	if (words != m.n_params) {
		rc = sky_diag_set(d, SKY_EFORMAT, "the bundle has %llu words, its config's model %zu",
				  (unsigned long long)words, m.n_params);
		goto exit;
	}
	sky_fedb_get_words(bundle + at, m.params, words);
	rc = sky_hf_save_dir(&m, hc, dir, d);
exit:
	free(buf), free(hc);
	return rc;
}
