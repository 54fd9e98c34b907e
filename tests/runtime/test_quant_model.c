/* A whole model through files: a BERT saved by sky_bert_save opens as an
 * fp32 sky_qmodel whose logits match sky_bert's; its layers quantised and
 * saved reopen as an int8 model whose logits stay close and whose
 * predictions agree; the probe tells the two files apart. */
#include "sky_test.h"

#include "sky_arena.h"
#include "sky_bert.h"
#include "sky_err.h"
#include "sky_kernels_s8.h"
#include "sky_layer_s8.h"
#include "sky_quant_model.h"
#include "sky_task.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

SKY_TEST(fp32_file_to_int8_file_and_back)
{
	sky_model_cfg c;
	sky_model_preset("tiny", &c);
	c.batch = 4;
	sky_bert_opts o;
	memset(&o, 0, sizeof o);
	sky_optim_default(&o.optim, SKY_OPTIM_ADAMW);
	o.micro = 1;
	size_t n = 0;
	SKY_EXPECT_EQ(sky_bert_arena_bytes(&c, &o, &n), 0);
	void *buf = malloc(n);
	sky_arena a;
	sky_arena_init(&a, buf, n);
	sky_bert m;
	SKY_EXPECT_EQ(sky_bert_carve(&m, &c, &o, &a), 0);
	SKY_EXPECT_EQ(sky_arena_seal(&a), 0);
	sky_bert_init(&m, 5);
	char path[512], qpath[512];
	snprintf(path, sizeof path, "%s/w.safetensors", sky_test_tmp_dir());
	snprintf(qpath, sizeof qpath, "%s/wq.safetensors", sky_test_tmp_dir());
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_bert_save(&m, path, &d), 0);

	size_t T = (size_t)sky_model_tokens(&c), H = (size_t)c.hidden;
	int32_t *ids = malloc(T * 4), *types = malloc(T * 4), *attn = malloc(T * 4);
	int32_t *labels = malloc((size_t)c.batch * 4), *pred = malloc((size_t)c.batch * 4);
	float *lf = malloc((size_t)c.batch * c.classes * 4), *lq = malloc((size_t)c.batch * c.classes * 4);
	SKY_EXPECT_EQ(sky_task_batch(&c, 1, SKY_TASK_HELDOUT, 0, ids, types, attn, labels), 0);
	sky_bert_batch bb = {ids, types, attn, labels};
	SKY_EXPECT_EQ(sky_bert_predict(&m, &bb, pred, NULL), 0);

	/* fp32 from the file: the same logits as the model that wrote it */
	sky_st_file f;
	sky_st_init(&f);
	SKY_EXPECT_EQ(sky_st_open(&f, path, &d), 0);
	int prec = -1, layers = 0;
	SKY_EXPECT_EQ(sky_qmodel_probe(&f, &prec, &layers, &d), 0);
	SKY_EXPECT_EQ(prec, SKY_PREC_FP32);
	SKY_EXPECT_EQ(layers, c.layers);
	sky_qmodel q32;
	int rc = sky_qmodel_open(&q32, &f, &c, &d);
	SKY_EXPECT_MSG(rc == 0, "open fp32: %s", d.msg);
	float *layer_in = malloc((size_t)c.layers * T * H * 4);
	SKY_EXPECT_EQ(sky_qmodel_forward(&q32, ids, attn, lf, layer_in), 0);
	for (int i = 0; i < c.batch * c.classes; i++)
		SKY_EXPECT_NEAR(lf[i], m.logits[i], 1e-5 + 1e-4 * fabs(m.logits[i]));

	/* quantise every layer (calibrated on the captured inputs), save, reopen */
	sky_layer_s8 *ql = calloc((size_t)c.layers, sizeof *ql), **qp = calloc((size_t)c.layers, sizeof *qp);
	void **mem = calloc((size_t)c.layers, sizeof *mem);
	void *tmp = malloc(sky_layer_s8_tmp_bytes(&c));
	float *cs = malloc(sky_layer_s8_calib_scratch_floats(&c) * 4);
	size_t np = (size_t)sky_model_layer_params(&c);
	for (int l = 0; l < c.layers; l++) {
		sky_layer_s8_calib cal;
		sky_layer_s8_calib_init(&cal);
		SKY_EXPECT_EQ(sky_layer_s8_calibrate(&c, q32.layers + l * np, layer_in + l * T * H,
						     q32.mask, cs, &cal, &d),
			      0);
		sky_arena ma;
		sky_arena_init(&ma, NULL, 0);
		sky_layer_s8_carve(&ql[l], &c, sky_k_s8_variant_active(), &ma);
		size_t need = sky_arena_required(&ma);
		mem[l] = malloc(need);
		sky_arena_init(&ma, mem[l], need);
		sky_layer_s8_carve(&ql[l], &c, sky_k_s8_variant_active(), &ma);
		SKY_EXPECT_EQ(sky_arena_seal(&ma), 0);
		SKY_EXPECT_EQ(sky_layer_s8_from_f32(&ql[l], q32.layers + l * np, &cal, tmp, &d), 0);
		qp[l] = &ql[l];
	}
	rc = sky_qmodel_save_int8(&q32, qp, qpath, "test", &d);
	SKY_EXPECT_MSG(rc == 0, "save int8: %s", d.msg);
	sky_st_file fq;
	sky_st_init(&fq);
	SKY_EXPECT_EQ(sky_st_open(&fq, qpath, &d), 0);
	SKY_EXPECT_EQ(sky_qmodel_probe(&fq, &prec, &layers, &d), 0);
	SKY_EXPECT_EQ(prec, SKY_PREC_INT8);
	sky_qmodel q8;
	rc = sky_qmodel_open(&q8, &fq, &c, &d);
	SKY_EXPECT_MSG(rc == 0, "open int8: %s", d.msg);
	SKY_EXPECT(q8.weight_bytes * 4 <= q32.weight_bytes);
	unsigned long before = sky_test_allocs();
	SKY_EXPECT_EQ(sky_qmodel_forward(&q8, ids, attn, lq, NULL), 0);
	SKY_EXPECT_EQ(sky_test_allocs() - before, 0);
	double num = 0, den = 0;
	for (int i = 0; i < c.batch * c.classes; i++)
		num += (lq[i] - lf[i]) * (lq[i] - lf[i]), den += lf[i] * lf[i];
	fprintf(stderr, "tiny model logits, int8 vs fp32: relative L2 error %.4f\n", sqrt(num / den));
	SKY_EXPECT(sqrt(num / den) < 0.1);

	sky_qmodel_close(&q8);
	sky_qmodel_close(&q8); /* twice is fine */
	sky_qmodel_close(&q32);
	sky_st_close(&fq);
	sky_st_close(&f);
	for (int l = 0; l < c.layers; l++)
		free(mem[l]);
	free(mem), free(ql), free(qp), free(tmp), free(cs), free(layer_in), free(lf), free(lq);
	free(ids), free(types), free(attn), free(labels), free(pred), free(buf);
}
