/* Serving stages: an int8 model cut into slices (sky_slice_cut) and run as
 * a chain of stages (sky_serve_forward, payload to payload, as the frames
 * carry them) gives, for every request, the logits one board's
 * sky_qmodel_forward gives for that request alone: the same bits, under
 * several plans (a cut after a layer, cuts in the middle of layers, one
 * stage holding a single half) and for 1, 2 and 4 threads. A batch
 * allocates nothing. */
#include "sky_test.h"

#include "sky_arena.h"
#include "sky_bert.h"
#include "sky_kernels_s8.h"
#include "sky_layer_s8.h"
#include "sky_quant_model.h"
#include "sky_serve.h"
#include "sky_slice.h"
#include "sky_task.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve_model.h"

#define LAYERS SKY_TEST_SERVE_LAYERS

/* Three requests of different lengths, one with padding inside its mask. */
static const int k_len[3] = {16, 5, 9};
static int32_t tok(int r, int t) { return (int32_t)((r * 7 + t * 13 + 3) % 64); }
static int32_t msk(int r, int t) { return !(r == 2 && t == 4); }

/* One board: each request alone, batch 1, padded with id 0, mask 0. */
static void reference(const sky_model_cfg *c, float ref[3][2])
{
	sky_model_cfg one = *c;
	one.batch = 1;
	sky_st_file f;
	sky_st_init(&f);
	sky_qmodel q;
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_st_open(&f, g_model, &d), 0);
	SKY_EXPECT_EQ(sky_qmodel_open(&q, &f, &one, &d), 0);
	int32_t ids[64] = {0}, attn[64] = {0};
	for (int r = 0; r < 3; r++) {
		for (int t = 0; t < c->seq; t++) {
			ids[t] = t < k_len[r] ? tok(r, t) : 0;
			attn[t] = t < k_len[r] ? msk(r, t) : 0;
		}
		SKY_EXPECT_EQ(sky_qmodel_forward(&q, ids, attn, ref[r], NULL), 0);
	}
	sky_qmodel_close(&q);
	sky_st_close(&f);
}

/* Runs the three requests through the stages of `plan` (half-layer ranges)
 * with `threads` threads; returns how many logits differ from ref. */
static int run_plan(const sky_model_cfg *c, const int (*plan)[2], int n, int threads,
		    float ref[3][2])
{
	static sky_serve st[8];
	sky_diag d;
	sky_diag_clear(&d);
	size_t P = sky_serve_payload_bytes(c);
	unsigned char *buf[8];
	int bad = 0;
	for (int k = 0; k < n; k++) {
		char path[600], sha[65];
		snprintf(path, sizeof path, "%s/slice%d.safetensors", sky_test_tmp_dir(), k);
		SKY_EXPECT_EQ(sky_slice_cut(g_model, plan[k][0], plan[k][1], path, sha, NULL, &d), 0);
		int rc = sky_serve_open(&st[k], path, c, plan[k][0], plan[k][1], threads, &d);
		SKY_EXPECT_MSG(rc == 0, "stage %d: %s", k, d.msg);
		buf[k] = malloc(P);
	}
	sky_serve *s0 = &st[0];
	memset(s0->ids, 0, sizeof(int32_t) * (size_t)sky_model_tokens(c));
	memset(s0->tab.mask, 0, (size_t)sky_model_tokens(c));
	s0->tab.batch = 42;
	s0->tab.n = 3;
	for (int r = 0; r < 3; r++) {
		snprintf(s0->tab.req[r].client, sizeof s0->tab.req[r].client, "sky-client-t");
		snprintf(s0->tab.req[r].id, sizeof s0->tab.req[r].id, "r%d", r);
		s0->tab.req[r].n = k_len[r];
		for (int t = 0; t < k_len[r]; t++) {
			s0->ids[r * c->seq + t] = tok(r, t);
			s0->tab.mask[r * c->seq + t] = (uint8_t)msk(r, t);
		}
	}
	unsigned long before = sky_test_allocs();
	for (int k = 0; k < n; k++) {
		int rc = sky_serve_forward(&st[k], k ? buf[k - 1] : NULL, k < n - 1 ? buf[k] : NULL, &d);
		SKY_EXPECT_MSG(rc == 0, "stage %d forward: %s", k, d.msg);
	}
	SKY_EXPECT_EQ(sky_test_allocs() - before, 0);
	sky_serve *sl = &st[n - 1];
	SKY_EXPECT(sl->tab.n == 3 && sl->tab.batch == 42 && !strcmp(sl->tab.req[1].id, "r1") &&
		   !strcmp(sl->tab.req[2].client, "sky-client-t") && sl->tab.req[2].n == 9);
	for (int r = 0; r < 3; r++)
		bad += memcmp(sl->logits + r * c->classes, ref[r], sizeof(float) * 2) != 0;
	for (int k = 0; k < n; k++) {
		sky_serve_close(&st[k]);
		free(buf[k]);
	}
	return bad;
}

SKY_TEST(stages_chained_give_one_boards_logits_bit_for_bit)
{
	sky_model_cfg c;
	if (make_int8_model(&c) != 0)
		return;
	float ref[3][2];
	reference(&c, ref);
	static const int whole[1][2] = {{0, 7}};
	static const int even[4][2] = {{0, 1}, {2, 3}, {4, 5}, {6, 7}};
	static const int mid[4][2] = {{0, 2}, {3, 3}, {4, 6}, {7, 7}};
	static const int odd[3][2] = {{0, 0}, {1, 4}, {5, 7}};
	struct {
		const char *name;
		const int (*p)[2];
		int n;
	} plans[] = {{"whole", whole, 1}, {"even", even, 4}, {"mid", mid, 4}, {"odd", odd, 3}};
	for (size_t i = 0; i < sizeof plans / sizeof plans[0]; i++)
		for (int t = 1; t <= 4; t *= 2) {
			int bad = run_plan(&c, plans[i].p, plans[i].n, t, ref);
			SKY_EXPECT_MSG(bad == 0, "plan %s, %d threads: %d requests' logits differ",
				       plans[i].name, t, bad);
		}
	fprintf(stderr, "reference logits: r0 %.9g %.9g, r1 %.9g %.9g\n", ref[0][0], ref[0][1],
		ref[1][0], ref[1][1]);
}

SKY_TEST(slices_hold_only_their_range)
{
	sky_model_cfg c;
	if (make_int8_model(&c) != 0)
		return;
	char path[600], sha[65], sha2[65];
	int64_t bytes = 0, b2 = 0;
	sky_diag d;
	sky_diag_clear(&d);
	snprintf(path, sizeof path, "%s/s.safetensors", sky_test_tmp_dir());
	SKY_EXPECT_EQ(sky_slice_cut(g_model, 3, 4, path, sha, &bytes, &d), 0);
	sky_st_file f;
	sky_st_init(&f);
	SKY_EXPECT_EQ(sky_st_open(&f, path, &d), 0);
	SKY_EXPECT(sky_st_find(&f, "bert.encoder.layer.1.attention.self.query.weight") != NULL);
	SKY_EXPECT(sky_st_find(&f, "bert.encoder.layer.2.output.dense.weight") != NULL);
	SKY_EXPECT(sky_st_find(&f, "bert.encoder.layer.0.attention.self.query.weight") == NULL);
	SKY_EXPECT(sky_st_find(&f, "bert.encoder.layer.3.attention.self.query.weight") == NULL);
	SKY_EXPECT(sky_st_find(&f, "bert.embeddings.word_embeddings.weight") == NULL);
	SKY_EXPECT(sky_st_find(&f, "classifier.weight") == NULL);
	SKY_EXPECT(sky_st_meta_get(&f, "sky.slice") && !strcmp(sky_st_meta_get(&f, "sky.slice"), "3-4/4"));
	sky_st_close(&f);
	/* the same cut again: the same bytes, so the same hash */
	SKY_EXPECT_EQ(sky_slice_sha256_file(path, sha2, &b2, &d), 0);
	SKY_EXPECT(strcmp(sha, sha2) == 0 && bytes == b2 && bytes > 0);
	SKY_EXPECT_EQ(sky_slice_cut(g_model, 3, 4, path, sha2, NULL, &d), 0);
	SKY_EXPECT(strcmp(sha, sha2) == 0);
	/* a stage whose slice lacks a layer it needs names the tensor */
	sky_serve s;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_serve_open(&s, path, &c, 2, 5, 1, &d), 0);
	sky_serve_close(&s);
	SKY_EXPECT(sky_serve_open(&s, path, &c, 2, 6, 1, &d) != 0);
	SKY_EXPECT_MSG(strstr(d.msg, "bert.encoder.layer.3.") != NULL, "%s", d.msg);
	sky_diag_clear(&d);
	SKY_EXPECT(sky_serve_open(&s, path, &c, 0, 4, 1, &d) != 0);
	SKY_EXPECT_MSG(strstr(d.msg, "embeddings") != NULL, "%s", d.msg);
	/* the range is checked */
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_slice_cut(g_model, 5, 8, path, sha, NULL, &d), SKY_ERANGE);
	char p2[600];
	SKY_EXPECT_EQ(sky_slice_path(p2, sizeof p2, "/st", sha2), 0);
	SKY_EXPECT(strncmp(p2, "/st/slices/", 11) == 0 && strstr(p2, ".safetensors"));
	SKY_EXPECT_EQ(sky_slice_path(p2, sizeof p2, "/st", "abc"), SKY_EINVAL);
}
