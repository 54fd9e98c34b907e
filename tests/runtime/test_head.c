/* Classification head: loss against the f64 reference, parameter and
 * input gradients against central differences, the loss scale, and bad
 * labels rejected. */
#include "sky_test.h"

#include "ref_bert_f64.h"
#include "sky_err.h"
#include "sky_head.h"
#include "sky_rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static sky_model_cfg small_cfg(void)
{
	/* ln_eps, act: BERT's; no dropout */
	sky_model_cfg c = {"test", 8, 2, 12, 1, 5, 3, 11, 7, 2, 3, 0, 0, 0, 0};
	return c;
}

static double ref_loss_fd(const sky_model_cfg *c, const double *w, const double *x,
			  const int32_t *labels, double *v, size_t i)
{
	const double h = 1e-5;
	double keep = v[i];
	v[i] = keep + h;
	double lp = ref64_head_forward(c, w, x, labels, NULL);
	v[i] = keep - h;
	double lm = ref64_head_forward(c, w, x, labels, NULL);
	v[i] = keep;
	return (lp - lm) / (2 * h);
}

SKY_TEST(head_loss_and_grads_match_f64_reference)
{
	sky_model_cfg c = small_cfg();
	size_t np = (size_t)sky_model_head_params(&c), nx = (size_t)sky_model_tokens(&c) * c.hidden;
	float *w = malloc(np * sizeof(float)), *dw = calloc(np, sizeof(float));
	float *x = malloc(nx * sizeof(float)), *dx = malloc(nx * sizeof(float));
	float *saved = malloc(sky_head_saved_floats(&c) * sizeof(float));
	float *scratch = malloc(sky_head_scratch_floats(&c) * sizeof(float));
	float logits[9], loss = 0;
	double *wd = malloc(np * sizeof(double)), *xd = malloc(nx * sizeof(double));
	double *gw = malloc(np * sizeof(double)), *gx = malloc(nx * sizeof(double)), lref[9];
	int32_t labels[3] = {2, 0, 1};
	sky_rng r;
	sky_rng_seed(&r, 8);
	for (size_t i = 0; i < np; i++)
		w[i] = 0.4f * sky_rng_normal(&r);
	for (size_t i = 0; i < nx; i++)
		x[i] = sky_rng_normal(&r);

	SKY_EXPECT_EQ(sky_head_forward(&c, w, x, labels, logits, &loss, saved, scratch), 0);
	/* scale 0.5: as one of two accumulated micro-batches */
	sky_head_backward(&c, w, labels, saved, 0.5f, dx, dw, scratch);

	ref64_from_f32(wd, w, np);
	ref64_from_f32(xd, x, nx);
	double lr = ref64_head_forward(&c, wd, xd, labels, lref);
	SKY_EXPECT_NEAR(loss, lr, 1e-6 * (1 + fabs(lr)));
	SKY_EXPECT(ref64_rel_err(logits, lref, 9, 1e-30) < 1e-5);
	for (size_t i = 0; i < np; i++)
		gw[i] = 0.5 * ref_loss_fd(&c, wd, xd, labels, wd, i);
	for (size_t i = 0; i < nx; i++)
		gx[i] = 0.5 * ref_loss_fd(&c, wd, xd, labels, xd, i);
	/* same budget as the layer: fp32 through a handful of ops, 1e-5 */
	sky_tensor_info t[SKY_HEAD_NTENSORS];
	SKY_EXPECT_EQ(sky_head_tensors(&c, t), SKY_HEAD_NTENSORS);
	SKY_EXPECT_EQ(t[3].offset + t[3].count, np);
	double all = ref64_norm2(gw, np);
	for (int i = 0; i < SKY_HEAD_NTENSORS; i++) {
		double e = ref64_rel_err(dw + t[i].offset, gw + t[i].offset, t[i].count, 1e-2 * all);
		SKY_EXPECT_MSG(e < 1e-5, "d%s rel err %.3g", t[i].name, e);
	}
	double ex = ref64_rel_err(dx, gx, nx, 1e-30);
	SKY_EXPECT_MSG(ex < 1e-5, "dx rel err %.3g", ex);
	/* only each sequence's first token gets a gradient */
	for (int b = 0; b < c.batch; b++)
		for (int s = 1; s < c.seq; s++)
			for (int j = 0; j < c.hidden; j++)
				SKY_EXPECT(dx[((size_t)b * c.seq + s) * c.hidden + j] == 0.0f);
	SKY_EXPECT(strcmp(t[0].name, "pooler.dense.weight") == 0);
	SKY_EXPECT(strcmp(t[2].name, "classifier.weight") == 0);
	free(w), free(dw), free(x), free(dx), free(saved), free(scratch);
	free(wd), free(xd), free(gw), free(gx);
}

SKY_TEST(head_inference_matches_training_and_rejects_bad_labels)
{
	sky_model_cfg c = small_cfg();
	size_t np = (size_t)sky_model_head_params(&c), nx = (size_t)sky_model_tokens(&c) * c.hidden;
	float *w = malloc(np * sizeof(float)), *x = malloc(nx * sizeof(float));
	float *saved = malloc(sky_head_saved_floats(&c) * sizeof(float));
	float *scratch = malloc(sky_head_scratch_floats(&c) * sizeof(float));
	float l1[9], l2[9], loss = -1;
	int32_t labels[3] = {0, 1, 2};
	sky_head_init(&c, w, 4);
	for (size_t i = 0; i < nx; i++)
		x[i] = (float)(i % 7) - 3.0f;
	SKY_EXPECT_EQ(sky_head_forward(&c, w, x, labels, l1, &loss, saved, scratch), 0);
	SKY_EXPECT(loss > 0);
	SKY_EXPECT_EQ(sky_head_forward(&c, w, x, NULL, l2, NULL, NULL, scratch), 0);
	SKY_EXPECT(memcmp(l1, l2, sizeof l1) == 0);
	labels[1] = 3;
	SKY_EXPECT_EQ(sky_head_forward(&c, w, x, labels, l2, &loss, saved, scratch), SKY_EINVAL);
	labels[1] = -1;
	SKY_EXPECT_EQ(sky_head_forward(&c, w, x, labels, l2, &loss, saved, scratch), SKY_EINVAL);
	free(w), free(x), free(saved), free(scratch);
}
