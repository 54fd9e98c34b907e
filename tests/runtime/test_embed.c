/* Embeddings: forward against the f64 reference, every parameter gradient
 * against its central differences, and bad ids rejected. */
#include "sky_test.h"

#include "ref_bert_f64.h"
#include "sky_embed.h"
#include "sky_err.h"
#include "sky_rng.h"

#include <stdlib.h>
#include <string.h>

static sky_model_cfg small_cfg(void)
{
	/* name H heads F L S B vocab max_pos types classes */
	/* ln_eps, act: BERT's; no dropout */
	sky_model_cfg c = {"test", 8, 2, 12, 1, 5, 2, 11, 7, 3, 3, 0, 0, 0, 0};
	return c;
}

SKY_TEST(embed_forward_and_grads_match_f64_reference)
{
	sky_model_cfg c = small_cfg();
	size_t np = (size_t)sky_model_embed_params(&c), T = (size_t)sky_model_tokens(&c);
	size_t nx = T * c.hidden;
	float *w = malloc(np * sizeof(float)), *dw = calloc(np, sizeof(float));
	float *y = malloc(nx * sizeof(float)), *dy = malloc(nx * sizeof(float));
	float *saved = malloc(sky_embed_saved_floats(&c) * sizeof(float));
	float *scratch = malloc(sky_embed_scratch_floats(&c) * sizeof(float));
	double *wd = malloc(np * sizeof(double)), *g = malloc(np * sizeof(double));
	double *yd = malloc(nx * sizeof(double)), *dyd = malloc(nx * sizeof(double));
	/* token 3 appears three times, so its row's gradient must accumulate */
	int32_t ids[10] = {1, 3, 5, 3, 10, 0, 3, 7, 2, 9}, types[10] = {0, 1, 2, 0, 1, 0, 0, 2, 1, 0};
	sky_rng r;
	sky_rng_seed(&r, 3);
	for (size_t i = 0; i < np; i++)
		w[i] = 0.5f * sky_rng_normal(&r);
	sky_embed_view v;
	sky_embed_bind(&c, w, &v);
	for (int j = 0; j < c.hidden; j++)
		v.ln_g[j] = 1.0f + 0.3f * sky_rng_normal(&r);
	for (size_t i = 0; i < nx; i++)
		dy[i] = sky_rng_normal(&r);

	SKY_EXPECT_EQ(sky_embed_forward(&c, w, ids, types, y, saved), 0);
	sky_embed_backward(&c, w, ids, types, saved, dy, dw, scratch);

	ref64_from_f32(wd, w, np);
	ref64_from_f32(dyd, dy, nx);
	ref64_embed_forward(&c, wd, ids, types, yd);
	/* fp32 LayerNorm of order-1 values: a few 1e-7 relative expected */
	SKY_EXPECT(ref64_rel_err(y, yd, nx, 1e-30) < 1e-5);
	const double h = 1e-5;
	for (size_t i = 0; i < np; i++) {
		double keep = wd[i], lp = 0, lm = 0;
		wd[i] = keep + h;
		ref64_embed_forward(&c, wd, ids, types, yd);
		for (size_t k = 0; k < nx; k++)
			lp += yd[k] * dyd[k];
		wd[i] = keep - h;
		ref64_embed_forward(&c, wd, ids, types, yd);
		for (size_t k = 0; k < nx; k++)
			lm += yd[k] * dyd[k];
		wd[i] = keep;
		g[i] = (lp - lm) / (2 * h);
	}
	/* per tensor, as in test_layer.c (same error budget: fp32 LN backward) */
	sky_tensor_info t[SKY_EMBED_NTENSORS];
	SKY_EXPECT_EQ(sky_embed_tensors(&c, t), SKY_EMBED_NTENSORS);
	SKY_EXPECT_EQ(t[4].offset + t[4].count, np);
	double all = ref64_norm2(g, np);
	for (int i = 0; i < SKY_EMBED_NTENSORS; i++) {
		double e = ref64_rel_err(dw + t[i].offset, g + t[i].offset, t[i].count, 1e-2 * all);
		SKY_EXPECT_MSG(e < 1e-5, "d%s rel err %.3g", t[i].name, e);
	}
	/* rows never read get no gradient (token 4 does not occur) */
	for (int j = 0; j < c.hidden; j++)
		SKY_EXPECT(dw[4 * c.hidden + j] == 0.0f);
	free(w), free(dw), free(y), free(dy), free(saved), free(scratch);
	free(wd), free(g), free(yd), free(dyd);
}

SKY_TEST(embed_rejects_out_of_range_ids)
{
	sky_model_cfg c = small_cfg();
	size_t np = (size_t)sky_model_embed_params(&c), nx = (size_t)sky_model_tokens(&c) * c.hidden;
	float *w = calloc(np, sizeof(float)), *y = calloc(nx, sizeof(float));
	int32_t ids[10] = {0}, types[10] = {0};
	SKY_EXPECT_EQ(sky_embed_forward(&c, w, ids, NULL, y, NULL), 0);
	ids[9] = 11; /* vocab is 11 */
	SKY_EXPECT_EQ(sky_embed_forward(&c, w, ids, types, y, NULL), SKY_EINVAL);
	ids[9] = -1;
	SKY_EXPECT_EQ(sky_embed_check(&c, ids, NULL), SKY_EINVAL);
	ids[9] = 0;
	types[3] = 3; /* type_vocab is 3 */
	SKY_EXPECT_EQ(sky_embed_check(&c, ids, types), SKY_EINVAL);
	free(w), free(y);
}

SKY_TEST(embed_init_and_names)
{
	sky_model_cfg c = small_cfg();
	size_t np = (size_t)sky_model_embed_params(&c);
	float *w = malloc(np * sizeof(float));
	sky_embed_init(&c, w, 5);
	sky_embed_view v;
	sky_embed_bind(&c, w, &v);
	for (int j = 0; j < c.hidden; j++)
		SKY_EXPECT(v.ln_g[j] == 1.0f && v.ln_b[j] == 0.0f);
	SKY_EXPECT(v.word[0] != 0.0f && v.type[0] != 0.0f);
	sky_tensor_info t[SKY_EMBED_NTENSORS];
	sky_embed_tensors(&c, t);
	SKY_EXPECT(strcmp(t[0].name, "embeddings.word_embeddings.weight") == 0);
	SKY_EXPECT(strcmp(t[1].name, "embeddings.position_embeddings.weight") == 0);
	SKY_EXPECT(strcmp(t[2].name, "embeddings.token_type_embeddings.weight") == 0);
	SKY_EXPECT(strcmp(t[3].name, "embeddings.LayerNorm.weight") == 0);
	SKY_EXPECT(strcmp(t[4].name, "embeddings.LayerNorm.bias") == 0);
	SKY_EXPECT_EQ((size_t)(v.pos - w), t[1].offset);
	SKY_EXPECT_EQ((size_t)(v.type - w), t[2].offset);
	SKY_EXPECT_EQ((size_t)(v.ln_g - w), t[3].offset);
	free(w);
}
