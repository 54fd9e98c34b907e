#include "sky_test.h"

#include "sky_cost.h"
#include "sky_layer.h"
#include "sky_plan.h"

#include <string.h>

SKY_TEST(halves_add_up_to_a_layer)
{
	const char *names[] = {"tiny", "mini", "base", "large"};
	for (int i = 0; i < 4; i++) {
		sky_model_cfg c;
		SKY_EXPECT_EQ(sky_model_preset(names[i], &c), 0);
		SKY_EXPECT_EQ(sky_cost_half_params(&c, SKY_HALF_ATTN) +
				      sky_cost_half_params(&c, SKY_HALF_FFN),
			      sky_model_layer_params(&c));
		double f = sky_cost_half_flops_fwd(&c, 0) + sky_cost_half_flops_fwd(&c, 1);
		SKY_EXPECT_NEAR(f, sky_model_layer_flops_fwd(&c), 1e-9 * f);
	}
}

/* the planner's activation formula against what the runtime's layer
 * really keeps (which pads each saved tensor to 16 floats) */
SKY_TEST(saved_activations_match_the_runtime)
{
	const char *names[] = {"tiny", "mini", "base", "large"};
	for (int i = 0; i < 4; i++) {
		sky_model_cfg c;
		sky_model_preset(names[i], &c);
		int64_t a = sky_cost_half_saved_floats(&c, SKY_HALF_ATTN);
		int64_t f = sky_cost_half_saved_floats(&c, SKY_HALF_FFN);
		int64_t ra = (int64_t)sky_layer_saved_floats(&c, SKY_BLOCK_ATTN);
		int64_t rf = (int64_t)sky_layer_saved_floats(&c, SKY_BLOCK_FFN);
		SKY_EXPECT_MSG(ra >= a && ra - a < 6 * 16, "%s attn: runtime %lld, planner %lld",
			       names[i], (long long)ra, (long long)a);
		SKY_EXPECT_MSG(rf >= f && rf - f < 5 * 16, "%s ffn: runtime %lld, planner %lld",
			       names[i], (long long)rf, (long long)f);
		int64_t s = sky_cost_layer_scratch_floats(&c);
		int64_t rs = (int64_t)sky_layer_scratch_floats(&c);
		SKY_EXPECT_MSG(rs >= s && rs - s < 5 * 16, "%s scratch: runtime %lld, planner %lld",
			       names[i], (long long)rs, (long long)s);
	}
}

SKY_TEST(optimizer_bytes)
{
	sky_optim o;
	SKY_EXPECT_EQ(sky_cost_optim_parse("adam", &o), 0);
	SKY_EXPECT_EQ(sky_cost_train_bytes_per_param(o), 16);
	SKY_EXPECT_EQ(sky_cost_optim_parse("momentum", &o), 0);
	SKY_EXPECT_EQ(sky_cost_train_bytes_per_param(o), 12);
	SKY_EXPECT_EQ(sky_cost_optim_parse("sgd", &o), 0);
	SKY_EXPECT_EQ(sky_cost_train_bytes_per_param(o), 8);
	SKY_EXPECT_EQ(sky_cost_optim_parse("lamb", &o), SKY_EINVAL);
}

/* one plan computed by hand: base model, two boards, 1F1B */
SKY_TEST(stage_time_and_memory_by_hand)
{
	static sky_fleet f;
	static sky_plan p;
	sky_job j;
	SKY_EXPECT_EQ(sky_job_init(&j, "base"), 0);
	j.model.layers = 2;
	j.micro_batches = 4;
	j.optim = SKY_OPTIM_SGD;
	memset(&f, 0, sizeof f);
	f.n = 2;
	for (int i = 0; i < 2; i++) {
		snprintf(f.board[i].id, SKY_BOARD_ID_MAX, "b%d", i);
		f.board[i].fwd_s = 1.0 + i, f.board[i].bwd_s = 2.0 + 2 * i;
		f.board[i].attn_share = 0.25;
		f.board[i].mem_bytes = 1ll << 40;
		f.board[i].bw_Bps = 1e8, f.board[i].lat_s = 0.01;
	}
	p.n_stages = 2;
	p.stage[0] = (sky_stage){.board = 0, .first_unit = 0, .last_unit = 2}; /* L0, L1 attn */
	p.stage[1] = (sky_stage){.board = 1, .first_unit = 3, .last_unit = 3}; /* L1 ffn */
	SKY_EXPECT_EQ(sky_plan_evaluate(&f, &j, &p, NULL), 0);
	/* T = 8*128 tokens, H 768: a cut is 8*128*768*4 = 3145728 bytes */
	double link = 0.01 + 3145728.0 / 1e8;
	SKY_EXPECT_NEAR(p.stage[0].link_s, link, 1e-12);
	SKY_EXPECT_NEAR(p.stage[0].time_s, 3.0 * (0.25 + 0.75 + 0.25) + link, 1e-12);
	SKY_EXPECT_NEAR(p.stage[1].time_s, 6.0 * 0.75 + link, 1e-12);
	SKY_EXPECT_EQ(p.bottleneck_stage, 1);
	SKY_EXPECT_EQ(p.stage[0].in_flight, 2); /* 1F1B: min(m, stages to the end) */
	SKY_EXPECT_EQ(p.stage[1].in_flight, 1);
	/* stage 1 memory: FFN params 2HF+F+3H at 8 bytes (SGD), 1 micro-batch of
	 * 2TH+2TF+T saved floats, scratch 5TH+TF+S^2+3S(H/heads), 4 cuts, head
	 * H^2+H+2H+2 */
	int64_t H = 768, F = 3072, T = 1024, S = 128, D = 768 / 12;
	int64_t want = (2 * H * F + F + 3 * H) * 8 + (2 * T * H + 2 * T * F + T) * 4 +
		       (5 * T * H + T * F + S * S + 3 * S * D) * 4 + 4 * 3145728 +
		       (H * H + H + 2 * H + 2) * 8 + 2 * 8 * H * 4;
	SKY_EXPECT_EQ(p.stage[1].mem_bytes, want);
	SKY_EXPECT_NEAR(p.lower_bound_s, 2.0 / (1.0 / 3 + 1.0 / 6), 1e-12);
}

/* serving: the int8 forward only, int8 cuts (a quarter of the bytes), and
 * only the forward message; the last stage sends nothing */
SKY_TEST(serving_stage_time_by_hand)
{
	static sky_fleet f;
	static sky_plan p;
	sky_job j;
	SKY_EXPECT_EQ(sky_job_init(&j, "base"), 0);
	j.model.layers = 2;
	j.infer = 1;
	j.prec = SKY_PREC_INT8;
	j.objective = SKY_OBJ_BOTTLENECK;
	memset(&f, 0, sizeof f);
	f.n = 2;
	for (int i = 0; i < 2; i++) {
		snprintf(f.board[i].id, SKY_BOARD_ID_MAX, "b%d", i);
		f.board[i].fwd_s = 1.0, f.board[i].bwd_s = 2.0;
		f.board[i].fwd_int8_s = 0.5 + i, f.board[i].bwd_int8_s = 7.0;
		f.board[i].attn_share = 0.25;
		f.board[i].mem_bytes = 1ll << 40;
		f.board[i].bw_Bps = 1e8, f.board[i].lat_s = 0.01;
	}
	p.n_stages = 2;
	p.stage[0] = (sky_stage){.board = 0, .first_unit = 0, .last_unit = 2};
	p.stage[1] = (sky_stage){.board = 1, .first_unit = 3, .last_unit = 3};
	SKY_EXPECT_EQ(sky_plan_evaluate(&f, &j, &p, NULL), 0);
	double link = 0.01 + 3145728.0 / 4 / 1e8; /* 8*128*768 int8 bytes */
	SKY_EXPECT_NEAR(p.stage[0].time_s, 0.5 * (0.25 + 0.75 + 0.25) + link, 1e-12);
	SKY_EXPECT_NEAR(p.stage[0].send_s, link, 1e-12);
	SKY_EXPECT_NEAR(p.stage[1].time_s, 1.5 * 0.75, 1e-12);
	SKY_EXPECT_NEAR(p.stage[1].send_s, 0, 0);
	/* the partitioner agrees: with the bottleneck objective */
	static sky_plan q;
	SKY_EXPECT_EQ(sky_plan_partition(&f, &j, SKY_ALGO_OPTIMAL, &q, NULL), 0);
	SKY_EXPECT(q.bottleneck_s <= p.bottleneck_s + 1e-12);
	/* serving with the step objective (a training step) is refused */
	j.objective = SKY_OBJ_STEP;
	SKY_EXPECT_EQ(sky_plan_partition(&f, &j, SKY_ALGO_OPTIMAL, &q, NULL), SKY_EINVAL);
}
