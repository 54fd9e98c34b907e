/* Shared by the serving tests: a tiny 4-layer BERT, quantised into an int8
 * file as sky quantize writes it (path in g_model). */
#include "sky_test.h"

#include "serve_model.h"

#include "sky_arena.h"
#include "sky_bert.h"
#include "sky_file.h"
#include "sky_kernels_s8.h"
#include "sky_layer_s8.h"
#include "sky_quant_model.h"
#include "sky_slice.h"
#include "sky_task.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LAYERS SKY_TEST_SERVE_LAYERS

char g_model[512];

/* A tiny 4-layer BERT, quantised (calibrated on one task batch) into an
 * int8 file as sky quantize writes it. Returns 0. */
int make_int8_model(sky_model_cfg *c)
{
	sky_model_preset("tiny", c);
	c->layers = LAYERS;
	c->batch = 4;
	sky_bert_opts o;
	memset(&o, 0, sizeof o);
	sky_optim_default(&o.optim, SKY_OPTIM_ADAMW);
	o.micro = 1;
	size_t n = 0;
	sky_diag d;
	sky_diag_clear(&d);
	if (sky_bert_arena_bytes(c, &o, &n))
		return -1;
	void *buf = malloc(n);
	sky_arena a;
	sky_arena_init(&a, buf, n);
	sky_bert m;
	if (sky_bert_carve(&m, c, &o, &a) || sky_arena_seal(&a))
		return -1;
	sky_bert_init(&m, 11);
	char path[512];
	snprintf(path, sizeof path, "%s/w.safetensors", sky_test_tmp_dir());
	snprintf(g_model, sizeof g_model, "%s/wq.safetensors", sky_test_tmp_dir());
	if (sky_bert_save(&m, path, &d))
		return -1;
	size_t T = (size_t)sky_model_tokens(c), H = (size_t)c->hidden;
	int32_t *ids = malloc(T * 4), *types = malloc(T * 4), *attn = malloc(T * 4);
	int32_t *labels = malloc((size_t)c->batch * 4);
	sky_task_batch(c, 1, SKY_TASK_HELDOUT, 0, ids, types, attn, labels);
	sky_st_file f;
	sky_st_init(&f);
	sky_qmodel q32;
	if (sky_st_open(&f, path, &d) || sky_qmodel_open(&q32, &f, c, &d))
		return -1;
	float *layer_in = malloc((size_t)c->layers * T * H * 4);
	sky_qmodel_forward(&q32, ids, attn, NULL, layer_in);
	sky_layer_s8 ql[LAYERS], *qp[LAYERS];
	void *mem[LAYERS];
	void *tmp = malloc(sky_layer_s8_tmp_bytes(c));
	float *cs = malloc(sky_layer_s8_calib_scratch_floats(c) * 4);
	size_t np = (size_t)sky_model_layer_params(c);
	int rc = 0;
	for (int l = 0; l < LAYERS; l++) {
		sky_layer_s8_calib cal;
		sky_layer_s8_calib_init(&cal);
		rc |= sky_layer_s8_calibrate(c, q32.layers + l * np, layer_in + l * T * H, q32.mask,
					     cs, &cal, &d);
		sky_arena ma;
		sky_arena_init(&ma, NULL, 0);
		sky_layer_s8_carve(&ql[l], c, sky_k_s8_variant_active(), &ma);
		size_t need = sky_arena_required(&ma);
		mem[l] = malloc(need);
		sky_arena_init(&ma, mem[l], need);
		sky_layer_s8_carve(&ql[l], c, sky_k_s8_variant_active(), &ma);
		rc |= sky_arena_seal(&ma);
		rc |= sky_layer_s8_from_f32(&ql[l], q32.layers + l * np, &cal, tmp, &d);
		qp[l] = &ql[l];
	}
	rc |= sky_qmodel_save_int8(&q32, qp, g_model, "test", &d);
	SKY_EXPECT_MSG(rc == 0, "%s", d.msg);
	sky_qmodel_close(&q32);
	sky_st_close(&f);
	for (int l = 0; l < LAYERS; l++)
		free(mem[l]);
	free(tmp), free(cs), free(layer_in), free(ids), free(types), free(attn), free(labels);
	free(buf);
	return rc;
}


void serve_plan3(sky_planmsg *p, const sky_model_cfg *c, const char *state, int64_t epoch,
		 int threads, int sealed)
{
	sky_diag d;
	sky_diag_clear(&d);
	char slices[700];
	snprintf(slices, sizeof slices, "%s/slices", state);
	SKY_EXPECT_EQ(sky_file_mkdirs(slices, 0755), 0);
	memset(p, 0, sizeof *p);
	strcpy(p->job, "j1");
	p->epoch = epoch;
	strcpy(p->algo, "test");
	p->micro_batches = 1;
	strcpy(p->shape.name, "tiny");
	p->shape.hidden = c->hidden, p->shape.heads = c->heads, p->shape.ffn = c->ffn;
	p->shape.seq = c->seq, p->shape.batch = c->batch;
	p->layers = c->layers;
	p->n_stages = 3;
	p->infer = (sky_plan_infer){.on = 1, .batch = 2, .wait_ms = 0, .queue = 16,
				    .threads = threads, .sealed = sealed};
	const int range[3][2] = {{0, 2}, {3, 4}, {5, 7}};
	for (int k = 0; k < 3; k++) {
		sky_plan_stage *s = &p->stages[k];
		snprintf(s->board, sizeof s->board, "b%d", k + 1);
		s->first = range[k][0], s->last = range[k][1], s->in_flight = 1;
		if (sealed)
			strcpy(s->key, "wrapped");
		char tmp[800], path[900];
		snprintf(tmp, sizeof tmp, "%s/cut.safetensors", slices);
		SKY_EXPECT_EQ(sky_slice_cut(g_model, s->first, s->last, tmp, s->slice.sha256,
					    &s->slice.bytes, &d),
			      0);
		SKY_EXPECT_EQ(sky_slice_path(path, sizeof path, state, s->slice.sha256), 0);
		SKY_EXPECT_EQ(rename(tmp, path), 0);
		s->slice.chunks = 1;
		s->slice.chunk_bytes = (int)s->slice.bytes;
	}
}
