#include "sky_test.h"

#include "sky_ckptmsg.h"
#include "sky_cost.h"
#include "sky_layer.h"
#include "sky_plan.h"
#include "sky_planmsg.h"

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
		/* a model with dropout: two more scratch regions for backward */
		c.hidden_drop = 0.1f;
		s = sky_cost_layer_scratch_floats(&c);
		rs = (int64_t)sky_layer_scratch_floats(&c);
		SKY_EXPECT_MSG(rs >= s && rs - s < 7 * 16,
			       "%s scratch with dropout: runtime %lld, planner %lld", names[i],
			       (long long)rs, (long long)s);
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

/* ---- sites: what a cut costs by the link it crosses ------------------------ */

static void site_board(sky_fleet *f, int i, const char *site)
{
	sky_board *b = &f->board[i];
	memset(b, 0, sizeof *b);
	snprintf(b->id, SKY_BOARD_ID_MAX, "b%d", i);
	snprintf(b->site, sizeof b->site, "%s", site);
	b->fwd_s = 1.0, b->bwd_s = 2.0;
	b->mem_bytes = 1ll << 40;
	b->bw_Bps = 1e8, b->lat_s = 0.001;
}

static void site_link(sky_fleet *f, const char *a, const char *b, double bw, double lat)
{
	sky_site_link *l = &f->link[f->n_links++];
	memset(l, 0, sizeof *l);
	snprintf(l->a, sizeof l->a, "%s", a);
	snprintf(l->b, sizeof l->b, "%s", b);
	l->bw_Bps = bw, l->lat_s = lat;
}

SKY_TEST(site_paths_go_through_the_core_unless_named)
{
	static sky_fleet f;
	sky_fleet_init(&f);
	site_link(&f, "fac", "", 2e6, 0.01);
	site_link(&f, "", "shop", 1e6, 0.02); /* named the other way round */
	site_link(&f, "home", "fac", 5e6, 0.005);
	double bw = 0, lat = 0;
	SKY_EXPECT_EQ(sky_fleet_site_path(&f, "fac", "shop", &bw, &lat), 1);
	SKY_EXPECT_NEAR(bw, 1e6, 0); /* the slower hop */
	SKY_EXPECT_NEAR(lat, 0.03, 1e-15); /* both hops */
	SKY_EXPECT_EQ(sky_fleet_site_path(&f, "shop", "fac", &bw, &lat), 1);
	SKY_EXPECT_NEAR(bw, 1e6, 0);
	SKY_EXPECT_EQ(sky_fleet_site_path(&f, "fac", "", &bw, &lat), 1);
	SKY_EXPECT_NEAR(bw, 2e6, 0);
	SKY_EXPECT_NEAR(lat, 0.01, 0);
	SKY_EXPECT_EQ(sky_fleet_site_path(&f, "home", "fac", &bw, &lat), 1); /* named directly */
	SKY_EXPECT_NEAR(bw, 5e6, 0);
	SKY_EXPECT_NEAR(lat, 0.005, 0);
	SKY_EXPECT_EQ(sky_fleet_site_path(&f, "home", "shop", &bw, &lat), SKY_ENOTFOUND);
	SKY_EXPECT_EQ(sky_fleet_site_path(&f, "home", "", &bw, &lat), SKY_ENOTFOUND);
	SKY_EXPECT_EQ(sky_fleet_site_path(&f, "fac", "fac", &bw, &lat), 0);
	SKY_EXPECT_EQ(sky_fleet_site_path(&f, "", "core", &bw, &lat), 0); /* one site */
}

SKY_TEST(cuts_are_charged_with_the_link_they_cross)
{
	static sky_fleet f;
	static sky_plan p;
	sky_job j;
	SKY_EXPECT_EQ(sky_job_init(&j, "tiny"), 0);
	j.model.layers = 3;
	j.micro_batches = 4;
	double B = (double)sky_model_cut_bytes(&j.model);
	sky_fleet_init(&f);
	f.n = 4;
	site_board(&f, 0, "fac");
	site_board(&f, 1, "shop");
	site_board(&f, 2, "fac");
	site_board(&f, 3, "fac");
	site_link(&f, "fac", "", 2e6, 0.01);
	site_link(&f, "shop", "", 1e6, 0.02);
	p.n_stages = 4; /* fac | shop | fac | fac */
	for (int k = 0; k < 4; k++)
		p.stage[k] = (sky_stage){.board = k, .first_unit = k, .last_unit = k == 3 ? 5 : k};
	SKY_EXPECT_EQ(sky_plan_evaluate(&f, &j, &p, NULL), 0);
	/* two cuts cross (fac -> shop, shop -> fac), each both ways: every
	 * direction of both hops carries two streams, so per micro-batch the
	 * shop's hops (1e6 B/s, the busier) each spend 2 B / 1e6 */
	SKY_EXPECT_EQ(p.cross_site_cuts, 2);
	SKY_EXPECT_NEAR(p.wan_bytes_per_step, 2 * 2.0 * 4 * B, 0);
	for (int k = 0; k < 2; k++) {
		SKY_EXPECT_EQ(p.stage[k].cross_site, 1);
		SKY_EXPECT_NEAR(p.stage[k].wan_lat_s, 0.03, 1e-15);
		SKY_EXPECT_NEAR(p.stage[k].wan_xfer_s, 2 * B / 1e6, 1e-12);
		SKY_EXPECT_NEAR(p.stage[k].wan_xfer_b_s, 2 * B / 1e6, 1e-12);
		SKY_EXPECT_EQ(p.stage[k].wan_hops, 2);
	}
	/* hop by hop, for the simulator: links 0 (fac-core) and 1 (shop-core),
	 * id = 2 x link + 1 when crossed from its b side (the core) */
	SKY_EXPECT(p.stage[0].wan_hop[0] == 0 && p.stage[0].wan_hop[1] == 3); /* fac>core>shop */
	SKY_EXPECT(p.stage[1].wan_hop[0] == 2 && p.stage[1].wan_hop[1] == 1); /* shop>core>fac */
	SKY_EXPECT_NEAR(p.stage[0].wan_hop_s[0], B / 2e6, 1e-15);
	SKY_EXPECT_NEAR(p.stage[0].wan_hop_s[1], B / 1e6, 1e-15);
	SKY_EXPECT_NEAR(p.stage[0].wan_hop_lat_s[0], 0.01, 0);
	SKY_EXPECT_NEAR(p.stage[0].wan_hop_lat_s[1], 0.02, 0);
	SKY_EXPECT_NEAR(p.stage[1].wan_hop_s[0], B / 1e6, 1e-15);
	SKY_EXPECT_NEAR(p.stage[1].wan_hop_lat_s[0], 0.02, 0);
	SKY_EXPECT_EQ(p.stage[2].wan_hops, 0);
	/* serving sends no gradients: each hop direction carries one stream
	 * (fac>core, core>shop for cut 0; shop>core, core>fac for cut 1) */
	j.infer = 1;
	j.prec = SKY_PREC_INT8;
	j.objective = SKY_OBJ_BOTTLENECK;
	for (int i = 0; i < 4; i++)
		f.board[i].fwd_int8_s = 0.5, f.board[i].bwd_int8_s = 1.0;
	SKY_EXPECT_EQ(sky_plan_evaluate(&f, &j, &p, NULL), 0);
	double Bs = B / sizeof(float); /* int8 activations */
	for (int k = 0; k < 2; k++) {
		SKY_EXPECT_NEAR(p.stage[k].wan_xfer_s, Bs / 1e6, 1e-12);
		SKY_EXPECT(p.stage[k].wan_xfer_b_s == 0);
	}
	SKY_EXPECT_EQ(sky_job_init(&j, "tiny"), 0);
	j.model.layers = 3;
	j.micro_batches = 4;
	SKY_EXPECT_EQ(sky_plan_evaluate(&f, &j, &p, NULL), 0);
	/* within a site: the boards' own links only, as before sites */
	SKY_EXPECT_EQ(p.stage[2].cross_site, 0);
	SKY_EXPECT(p.stage[2].wan_lat_s == 0 && p.stage[2].wan_xfer_s == 0 &&
		   p.stage[2].wan_xfer_b_s == 0);
	SKY_EXPECT_NEAR(p.stage[2].link_s, 0.001 + B / 1e8, 1e-15);
	/* the path's time per message counts toward the bottleneck */
	SKY_EXPECT(p.bottleneck_s >= 2 * B / 1e6);
	/* one crossing alone has the hops to itself */
	f.board[2].site[0] = '\0';
	snprintf(f.board[2].site, sizeof f.board[2].site, "shop");
	SKY_EXPECT_EQ(sky_plan_evaluate(&f, &j, &p, NULL), 0); /* fac | shop | shop | fac */
	SKY_EXPECT_EQ(p.cross_site_cuts, 2);
	SKY_EXPECT_NEAR(p.stage[0].wan_xfer_s, 2 * B / 1e6, 1e-12); /* core->shop: cut 0 fwd, cut 2 bwd */
	snprintf(f.board[3].site, sizeof f.board[3].site, "shop");
	SKY_EXPECT_EQ(sky_plan_evaluate(&f, &j, &p, NULL), 0); /* fac | shop | shop | shop */
	SKY_EXPECT_EQ(p.cross_site_cuts, 1);
	SKY_EXPECT_NEAR(p.stage[0].wan_xfer_s, B / 1e6, 1e-12);
	SKY_EXPECT_NEAR(p.stage[0].wan_xfer_b_s, B / 1e6, 1e-12);
	SKY_EXPECT_NEAR(p.wan_bytes_per_step, 2.0 * 4 * B, 0);
	/* link-blind: priced as one site, but the crossing is still counted */
	j.link_blind = 1;
	SKY_EXPECT_EQ(sky_plan_evaluate(&f, &j, &p, NULL), 0);
	SKY_EXPECT_EQ(p.cross_site_cuts, 1);
	SKY_EXPECT(p.stage[0].cross_site == 0 && p.stage[0].wan_xfer_s == 0 &&
		   p.stage[0].wan_lat_s == 0);
	/* sites the fleet names no path between: nothing beyond the boards' links */
	j.link_blind = 0;
	f.n_links = 1; /* shop's link is gone */
	SKY_EXPECT_EQ(sky_plan_evaluate(&f, &j, &p, NULL), 0);
	SKY_EXPECT_EQ(p.cross_site_cuts, 1);
	SKY_EXPECT(p.stage[0].wan_xfer_s == 0 && p.stage[0].wan_lat_s == 0);
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
	/* memory: int8 FFN weights (2HF+F+3H bytes), no saved activations, the
	 * scratch and 4 cuts of the served batch (fp32 buffers, as training's),
	 * and the fp32 head */
	int64_t H = 768, F = 3072, T = 1024, S = 128, D = 768 / 12;
	int64_t want = (2 * H * F + F + 3 * H) + (5 * T * H + T * F + S * S + 3 * S * D) * 4 +
		       4 * 3145728 + (H * H + H + 2 * H + 2) * 4;
	SKY_EXPECT_EQ(p.stage[1].mem_bytes, want);
	/* the partitioner agrees: with the bottleneck objective */
	static sky_plan q;
	SKY_EXPECT_EQ(sky_plan_partition(&f, &j, SKY_ALGO_OPTIMAL, &q, NULL), 0);
	SKY_EXPECT(q.bottleneck_s <= p.bottleneck_s + 1e-12);
	/* serving with the step objective (a training step) is refused */
	j.objective = SKY_OBJ_STEP;
	SKY_EXPECT_EQ(sky_plan_partition(&f, &j, SKY_ALGO_OPTIMAL, &q, NULL), SKY_EINVAL);
}

/* ---- checkpoints: the buffer a checkpointing stage keeps ------------------- */

/* A 4-layer tiny job with checkpoints on or off, over fleet f. */
static void ckpt_job(sky_job *j, int ckpt)
{
	sky_job_init(j, "tiny");
	j->model.layers = 4;
	j->micro_batches = 2;
	j->ckpt = ckpt;
}

static void ckpt_board(sky_fleet *f, int i, int64_t mem)
{
	sky_board *b = &f->board[i];
	memset(b, 0, sizeof *b);
	snprintf(b->id, SKY_BOARD_ID_MAX, "b%d", i);
	b->fwd_s = 1.0, b->bwd_s = 2.0, b->attn_share = 0.5;
	b->mem_bytes = mem;
	b->bw_Bps = 1e9, b->lat_s = 0;
}

/* runtime/sky_trainjob.h, whose header cannot sit beside sky_plan.h (the
 * runtime's sky_stage is another type than the planner's) */
int64_t sky_trainjob_bytes(const sky_planmsg *p, int stage, sky_diag *d);

/* the planner's extra bytes for a stage's checkpoint buffer are what the
 * runtime carves for it (sky_trainjob_bytes with and without checkpoints),
 * give or take the arena's alignment */
SKY_TEST(checkpoint_buffer_counted_as_the_runtime_carves_it)
{
	static sky_fleet f;
	static sky_plan p0, p1;
	static sky_planmsg pm;
	sky_job j0, j1;
	ckpt_job(&j0, 0);
	ckpt_job(&j1, 1);
	memset(&f, 0, sizeof f);
	f.n = 1;
	ckpt_board(&f, 0, 1ll << 40);
	SKY_EXPECT_EQ(sky_plan_partition(&f, &j0, SKY_ALGO_EVEN, &p0, NULL), 0);
	SKY_EXPECT_EQ(sky_plan_partition(&f, &j1, SKY_ALGO_EVEN, &p1, NULL), 0);
	int64_t extra = p1.stage[0].mem_bytes - p0.stage[0].mem_bytes;
	/* by hand: weights + 2 Adam vectors (12 bytes a parameter); 3 tensors of
	 * each of the 10 blocks, each a header entry, a table row and up to 16
	 * floats of padding; one image header and two allocations' alignment */
	int64_t params = sky_model_embed_params(&j0.model) + sky_model_head_params(&j0.model) +
			 4 * sky_model_layer_params(&j0.model);
	int64_t want = params * 12 + 10 * 3 * (128 + (int64_t)sizeof(sky_ckpt_tensor) + 64) + 8 +
		       1024 + 128;
	SKY_EXPECT_MSG(extra == want, "extra %lld, by hand %lld", (long long)extra,
		       (long long)want);
	/* the runtime's arena for the same single stage (adamw) */
	memset(&pm, 0, sizeof pm);
	snprintf(pm.job, sizeof pm.job, "j");
	pm.epoch = 1;
	snprintf(pm.algo, sizeof pm.algo, "even");
	pm.micro_batches = 2;
	snprintf(pm.shape.name, sizeof pm.shape.name, "tiny");
	pm.shape.hidden = j0.model.hidden, pm.shape.heads = j0.model.heads;
	pm.shape.ffn = j0.model.ffn, pm.shape.seq = j0.model.seq, pm.shape.batch = j0.model.batch;
	pm.layers = 4;
	pm.n_stages = 1;
	pm.stages[0] = (sky_plan_stage){.board = "b0", .first = 0, .last = 7, .in_flight = 2};
	pm.train.steps = 4;
	snprintf(pm.train.sched, sizeof pm.train.sched, "1f1b");
	snprintf(pm.train.optim, sizeof pm.train.optim, "adamw");
	pm.train.lr = 1e-3;
	int64_t r0 = sky_trainjob_bytes(&pm, 0, NULL);
	pm.train.ckpt_every = 2;
	int64_t r1 = sky_trainjob_bytes(&pm, 0, NULL);
	SKY_EXPECT(r0 > 0 && r1 > r0);
	SKY_EXPECT_MSG(extra >= r1 - r0 && extra - (r1 - r0) < 4096,
		       "planner counts %lld bytes of checkpoint buffer, the runtime carves %lld",
		       (long long)extra, (long long)(r1 - r0));
}

/* a board that holds the whole job without checkpoints is refused it with
 * them (the fit check says by how much) */
SKY_TEST(checkpoint_buffer_can_make_a_board_too_small)
{
	static sky_fleet f;
	static sky_plan p;
	sky_job j;
	sky_diag d;
	sky_diag_clear(&d);
	ckpt_job(&j, 0);
	memset(&f, 0, sizeof f);
	f.n = 1;
	ckpt_board(&f, 0, 1ll << 40);
	SKY_EXPECT_EQ(sky_plan_partition(&f, &j, SKY_ALGO_OPTIMAL, &p, NULL), 0);
	f.board[0].mem_bytes = p.stage[0].mem_bytes; /* exactly enough without */
	SKY_EXPECT_EQ(sky_plan_partition(&f, &j, SKY_ALGO_OPTIMAL, &p, NULL), 0);
	ckpt_job(&j, 1);
	SKY_EXPECT_EQ(sky_plan_partition(&f, &j, SKY_ALGO_OPTIMAL, &p, &d), SKY_ENOMEM);
	SKY_EXPECT_MSG(strstr(d.msg, "does not fit") && strstr(d.msg, "checkpoint buffer"), "%s",
		       d.msg);
}

/* two equal boards, the second with just the memory for its half without
 * checkpoints: with them it is given fewer half-layers */
SKY_TEST(checkpoint_buffer_gives_a_tight_board_fewer_layers)
{
	static sky_fleet f;
	static sky_plan p;
	sky_job j;
	ckpt_job(&j, 0);
	memset(&f, 0, sizeof f);
	f.n = 2;
	ckpt_board(&f, 0, 1ll << 40);
	ckpt_board(&f, 1, 1ll << 40);
	j.keep_order = 1;
	SKY_EXPECT_EQ(sky_plan_partition(&f, &j, SKY_ALGO_OPTIMAL, &p, NULL), 0);
	SKY_EXPECT_EQ(p.n_stages, 2);
	int units0 = p.stage[1].last_unit - p.stage[1].first_unit + 1;
	f.board[1].mem_bytes = p.stage[1].mem_bytes;
	SKY_EXPECT_EQ(sky_plan_partition(&f, &j, SKY_ALGO_OPTIMAL, &p, NULL), 0);
	SKY_EXPECT_EQ(p.stage[1].last_unit - p.stage[1].first_unit + 1, units0);
	ckpt_job(&j, 1);
	j.keep_order = 1;
	SKY_EXPECT_EQ(sky_plan_partition(&f, &j, SKY_ALGO_OPTIMAL, &p, NULL), 0);
	int units1 = p.n_stages == 2 ? p.stage[1].last_unit - p.stage[1].first_unit + 1 : 0;
	SKY_EXPECT_MSG(units1 < units0, "board 1: %d half-layers with checkpoints, %d without",
		       units1, units0);
	for (int k = 0; k < p.n_stages; k++)
		SKY_EXPECT(p.stage[k].mem_bytes <= f.board[p.stage[k].board].mem_bytes);
}

/* serving adds the ends (the first stage's requests and embedding, the last
 * stage's head and responses) and splits a layer by the int8 halves' own
 * share; a training job over the same boards is priced as before */
SKY_TEST(serving_prices_the_ends_and_the_int8_split_training_does_not)
{
	static sky_fleet f;
	static sky_plan p, t0, t1;
	sky_job j;
	SKY_EXPECT_EQ(sky_job_init(&j, "base"), 0);
	j.model.layers = 3;
	memset(&f, 0, sizeof f);
	f.n = 3;
	for (int i = 0; i < 3; i++) {
		snprintf(f.board[i].id, SKY_BOARD_ID_MAX, "b%d", i);
		f.board[i].fwd_s = 1.0, f.board[i].bwd_s = 2.0;
		f.board[i].fwd_int8_s = 0.5, f.board[i].bwd_int8_s = 0.5;
		f.board[i].attn_share = 0.25;
		f.board[i].mem_bytes = 1ll << 40;
		f.board[i].bw_Bps = 1e8, f.board[i].lat_s = 0.01;
	}
	p.n_stages = 3;
	p.stage[0] = (sky_stage){.board = 0, .first_unit = 0, .last_unit = 1};
	p.stage[1] = (sky_stage){.board = 1, .first_unit = 2, .last_unit = 2};
	p.stage[2] = (sky_stage){.board = 2, .first_unit = 3, .last_unit = 5};
	/* training, before the serving figures exist */
	t0 = p;
	SKY_EXPECT_EQ(sky_plan_evaluate(&f, &j, &t0, NULL), 0);
	for (int i = 0; i < 3; i++) {
		f.board[i].attn_share_int8 = 0.5;
		f.board[i].embed_int8_s = 0.03 * (i + 1);
		f.board[i].head_int8_s = 0.02 * (i + 1);
	}
	t1 = p;
	SKY_EXPECT_EQ(sky_plan_evaluate(&f, &j, &t1, NULL), 0);
	for (int k = 0; k < 3; k++) {
		SKY_EXPECT(t1.stage[k].time_s == t0.stage[k].time_s);
		SKY_EXPECT(t1.stage[k].fwd_s == t0.stage[k].fwd_s);
	}
	SKY_EXPECT(t1.bottleneck_s == t0.bottleneck_s);
	/* serving: int8 forward 0.5 a layer, halves 0.5 each */
	j.infer = 1;
	j.prec = SKY_PREC_INT8;
	j.objective = SKY_OBJ_BOTTLENECK;
	SKY_EXPECT_EQ(sky_plan_evaluate(&f, &j, &p, NULL), 0);
	double link = 0.01 + 3145728.0 / 4 / 1e8;
	/* stage 0: a whole layer, plus board 0's first-stage end */
	SKY_EXPECT_NEAR(p.stage[0].time_s, 0.5 + 0.03 + link, 1e-12);
	SKY_EXPECT_NEAR(p.stage[0].fwd_s, 0.5 + 0.03, 1e-12);
	/* stage 1: one attention half (0.5 of the layer, not attn_share's 0.25),
	 * no end */
	SKY_EXPECT_NEAR(p.stage[1].time_s, 0.25 + link, 1e-12);
	/* stage 2: FFN, attention, FFN halves, plus board 2's last-stage end */
	SKY_EXPECT_NEAR(p.stage[2].time_s, 0.75 + 0.06, 1e-12);
	SKY_EXPECT_NEAR(p.bottleneck_s, 0.81, 1e-12);
	/* the partitioner sees the same prices: its plan's bottleneck is what
	 * evaluating it gives, and no worse than this one */
	static sky_plan q;
	SKY_EXPECT_EQ(sky_plan_partition(&f, &j, SKY_ALGO_OPTIMAL, &q, NULL), 0);
	SKY_EXPECT(q.bottleneck_s <= p.bottleneck_s + 1e-12);
	static sky_plan e;
	e = q;
	SKY_EXPECT_EQ(sky_plan_evaluate(&f, &j, &e, NULL), 0);
	SKY_EXPECT_NEAR(e.bottleneck_s, q.bottleneck_s, 1e-12);
	SKY_EXPECT(q.stage[0].time_s >= 0.03 && q.stage[q.n_stages - 1].time_s > 0.02);
}
