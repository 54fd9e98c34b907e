#include "sky_test.h"

#include "sky_file.h"
#include "sky_probe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static sky_model_cfg tiny(void)
{
	sky_model_cfg c;
	sky_model_preset("tiny", &c);
	return c;
}

SKY_TEST(probe_reports_positive_medians_and_a_budget)
{
	sky_model_cfg c = tiny();
	sky_probe_opts o;
	sky_probe_result r;
	sky_diag d;
	sky_diag_clear(&d);
	sky_probe_opts_default(&o, &c);
	o.runs = 3;
	SKY_EXPECT_EQ(sky_probe_run(&o, NULL, &r, &d), 0);
	SKY_EXPECT(r.runs >= 1 && r.runs <= 3);
	SKY_EXPECT(r.fp32.fwd_attn_s > 0 && r.fp32.fwd_ffn_s > 0);
	SKY_EXPECT(r.fp32.bwd_attn_s > 0 && r.fp32.bwd_ffn_s > 0);
	SKY_EXPECT(r.layer_cv >= 0);
	SKY_EXPECT_MSG(r.has_int8 && r.int8_fwd_s > 0, "int8 forward not timed");
	/* its attention half is a part of it, and the serving ends are timed */
	SKY_EXPECT_MSG(r.int8_attn_s > 0 && r.int8_attn_s < r.int8_fwd_s, "attn %g of %g",
		       r.int8_attn_s, r.int8_fwd_s);
	SKY_EXPECT_MSG(r.has_ends && r.int8_embed_s > 0 && r.int8_head_s > 0, "ends %d %g %g",
		       r.has_ends, r.int8_embed_s, r.int8_head_s);
	SKY_EXPECT(r.arena_bytes > 0);
	SKY_EXPECT(r.probe_s > 0);
}

SKY_TEST(time_bound_stops_after_the_first_measured_run)
{
	sky_model_cfg c = tiny();
	sky_probe_opts o;
	sky_probe_result r;
	sky_probe_opts_default(&o, &c);
	o.runs = 50;
	o.max_s = 1e-9; /* already spent when the first run ends */
	SKY_EXPECT_EQ(sky_probe_run(&o, NULL, &r, NULL), 0);
	SKY_EXPECT_EQ(r.runs, 1);
}

SKY_TEST(bad_model_is_refused)
{
	sky_model_cfg c = tiny();
	sky_probe_opts o;
	sky_probe_result r;
	sky_diag d;
	c.heads = 3; /* 32 % 3 != 0 */
	sky_probe_opts_default(&o, &c);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_probe_run(&o, NULL, &r, &d), SKY_EINVAL);
	SKY_EXPECT(d.msg[0] != 0);
}

SKY_TEST(cache_hits_then_invalidates_on_a_shape_or_id_change)
{
	const char *dir = sky_test_tmp_dir();
	sky_model_cfg c = tiny();
	sky_probe_opts o;
	sky_caps caps;
	int hit = -1;
	sky_probe_opts_default(&o, &c);
	o.runs = 2;
	memset(&caps, 0, sizeof caps);
	SKY_EXPECT_EQ(sky_probe_cached(dir, "b01", &o, NULL, &caps, &hit, NULL), 0);
	SKY_EXPECT_EQ(hit, 0);
	double first = caps.fp32.fwd_attn_s;
	SKY_EXPECT(first > 0 && caps.shape.hidden == c.hidden && caps.probed_at > 0);
	sky_caps fresh = caps;
	SKY_EXPECT(fresh.int8_attn_s > 0 && fresh.int8_embed_s > 0 && fresh.int8_head_s > 0);
	char path[512];
	snprintf(path, sizeof path, "%s/%s", dir, SKY_PROBE_CACHE_FILE);
	SKY_EXPECT(sky_file_exists(path));

	memset(&caps, 0, sizeof caps);
	SKY_EXPECT_EQ(sky_probe_cached(dir, "b01", &o, NULL, &caps, &hit, NULL), 0);
	SKY_EXPECT_EQ(hit, 1);
	SKY_EXPECT(caps.fp32.fwd_attn_s == first); /* the cached figure, not a new one */
	SKY_EXPECT(caps.has_int8 && caps.int8_fwd_s > 0);
	/* the serving figures come back from the cache as they were measured */
	SKY_EXPECT(caps.int8_fwd_s == fresh.int8_fwd_s && caps.int8_attn_s == fresh.int8_attn_s &&
		   caps.int8_embed_s == fresh.int8_embed_s && caps.int8_head_s == fresh.int8_head_s);

	o.model.seq = 8; /* another shape: probe again */
	SKY_EXPECT_EQ(sky_probe_cached(dir, "b01", &o, NULL, &caps, &hit, NULL), 0);
	SKY_EXPECT_EQ(hit, 0);
	SKY_EXPECT_EQ(caps.shape.seq, 8);
	SKY_EXPECT_EQ(sky_probe_cached(dir, "b02", &o, NULL, &caps, &hit, NULL), 0);
	SKY_EXPECT_EQ(hit, 0); /* another board id */

	/* a corrupt cache is ignored, not trusted */
	SKY_EXPECT_EQ(sky_file_write(path, "{\"key\":", 7, 0644), 0);
	SKY_EXPECT_EQ(sky_probe_cached(dir, "b02", &o, NULL, &caps, &hit, NULL), 0);
	SKY_EXPECT_EQ(hit, 0);
}

SKY_TEST(stage_bytes_grow_with_units_and_micro_batches_and_carve)
{
	sky_model_cfg c = tiny(); /* 2 layers: units 0..3 */
	int64_t mid1 = sky_probe_stage_bytes(&c, 1, 2, 4, 1, NULL, 0);
	int64_t mid2 = sky_probe_stage_bytes(&c, 1, 2, 4, 2, NULL, 0);
	int64_t one = sky_probe_stage_bytes(&c, 1, 1, 4, 1, NULL, 0);
	int64_t first = sky_probe_stage_bytes(&c, 0, 0, 4, 1, NULL, 0);
	int64_t attn_only = sky_probe_stage_bytes(&c, 2, 2, 4, 1, NULL, 0);
	SKY_EXPECT(mid1 > 0 && mid2 > mid1 && mid1 > one);
	SKY_EXPECT(first > attn_only); /* the embeddings ride on the first stage */
	SKY_EXPECT_EQ(sky_probe_stage_bytes(&c, 2, 1, 4, 1, NULL, 0), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_probe_stage_bytes(&c, 0, 4, 4, 1, NULL, 0), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_probe_stage_bytes(&c, 0, 1, 4, 0, NULL, 0), SKY_EINVAL);
	void *buf = malloc((size_t)mid2);
	SKY_EXPECT(buf != NULL);
	SKY_EXPECT_EQ(sky_probe_stage_bytes(&c, 1, 2, 4, 2, buf, (uint64_t)mid2), mid2);
	free(buf);
}

/* The time of one run at the first rung (unscaled), from a probe given
 * no time at all. */
static double first_rung_s(const sky_probe_result *r)
{
	return (r->fp32.fwd_attn_s + r->fp32.bwd_attn_s) / r->scale_attn +
	       (r->fp32.fwd_ffn_s + r->fp32.bwd_ffn_s) / r->scale_ffn;
}

/* skyd --speed F sets the profile's speed (sky_profile_set_cores); the probe
 * must see it: a board at speed 0.02 reports about 25 times the layer time
 * of one at 0.5. On a loaded machine a board that sleeps most of the time
 * (the stretch) gets the CPU sooner when it wakes than one that sleeps less,
 * so its compute runs faster and the ratio comes out lower: at a load
 * average of 12 on 2 cores, speed 0.1 against 1 measured 1.6 instead of 10,
 * and 0.1 against 0.5 measured 1.9 instead of 5. The probes alternate, the
 * fastest of each kind is compared, and the window is wide; without the
 * stretch the ratio is about 1. The shape gives natively 15-20 ms per run
 * (past scheduling noise); on a machine 30x slower (qemu) the tiny model. */
SKY_TEST(probe_sees_the_emulated_speed)
{
	sky_model_cfg c;
	sky_model_preset("mini", &c);
	c.batch = 1;
	sky_probe_opts o;
	sky_probe_result r;
	sky_profile p;
	sky_profile_defaults(&p);
	/* one OpenBLAS thread, as skyd sets it: idle worker threads woken per
	 * GEMM after a stretch sleep cost tens of ms on a busy machine */
	sky_profile_apply_threads(&p);
	sky_probe_opts_default(&o, &c);
	o.int8 = 0;
	o.runs = 5;
	o.max_s = 1e-9;
	SKY_EXPECT_EQ(sky_probe_run(&o, &p, &r, NULL), 0); /* also warms caches and OpenBLAS */
	if (first_rung_s(&r) > 0.01)
		sky_model_preset("tiny", &o.model);
	o.max_s = 0.5;
	double best[2] = {1e30, 1e30};
	for (int k = 0; k < 6; k++) {
		SKY_EXPECT_EQ(sky_profile_set_cores(&p, k % 2 ? 0.02 : 0.5, NULL), 0);
		SKY_EXPECT_EQ(sky_probe_run(&o, &p, &r, NULL), 0);
		double t = sky_caps_layer_s(&r.fp32);
		if (t < best[k % 2])
			best[k % 2] = t;
	}
	double ratio = best[1] / best[0];
	SKY_EXPECT_MSG(ratio > 3.0 && ratio < 200.0,
		       "layer time ratio at speed 0.02 vs 0.5: %.2f (fastest %.3f ms vs %.3f ms)", ratio,
		       1e3 * best[1], 1e3 * best[0]);
}

/* A slow board must still finish the probe near its bound: the old probe
 * ran a warm-up and a run at the job's shape whatever they cost. The board
 * is made slow relative to the bound from this machine's own figures (so
 * the test means the same natively and under qemu): the bound leaves room
 * for a few runs of the smallest rung, and the emulated speed makes one
 * run at the job's shape about 8x the bound (under qemu it already is).
 * Noise only adds time, so the fastest of three probes is held to the
 * bound, with room for one run over it. */
SKY_TEST(bound_holds_on_a_slow_board)
{
	sky_model_cfg c;
	sky_model_preset("mini", &c);
	sky_probe_opts o;
	sky_probe_result r;
	sky_profile p;
	sky_profile_defaults(&p);
	/* one OpenBLAS thread, as skyd sets it: idle worker threads woken per
	 * GEMM after a stretch sleep cost tens of ms on a busy machine */
	sky_profile_apply_threads(&p);
	sky_probe_opts_default(&o, &c);
	/* this machine: the first rung's time, and the job's shape estimated
	 * from it (no time at all: the probe stays on the first rung) */
	o.max_s = 1e-9;
	SKY_EXPECT_EQ(sky_probe_run(&o, &p, &r, NULL), 0);
	double rung_s = first_rung_s(&r);
	double full_s = sky_caps_layer_s(&r.fp32);
	o.max_s = 3 * rung_s > 0.5 ? 3 * rung_s : 0.5;
	double speed = full_s / (8 * o.max_s);
	p.speed = speed < 1 ? speed : 1;
	double fastest = 1e30;
	for (int k = 0; k < 3; k++) {
		SKY_EXPECT_EQ(sky_probe_run(&o, &p, &r, NULL), 0);
		SKY_EXPECT_MSG(r.timed_batch * r.timed_seq < c.batch * c.seq,
			       "timed at batch %d x seq %d, the job's shape, at speed %g",
			       r.timed_batch, r.timed_seq, p.speed);
		SKY_EXPECT(r.scale_ffn > 1 && r.scale_attn > 1);
		SKY_EXPECT(r.fp32.fwd_attn_s > 0 && r.has_int8 && r.int8_fwd_s > 0);
		if (r.probe_s < fastest)
			fastest = r.probe_s;
	}
	SKY_EXPECT_MSG(fastest < 4 * o.max_s,
		       "fastest of 3 probes took %.2f s against a %.2f s bound (speed %.3g, first "
		       "rung %.4f s, job's shape ~%.3f s per run)",
		       fastest, o.max_s, p.speed, rung_s, full_s / p.speed);
}

/* The figures from a smaller shape are scaled by block FLOPs: with no time
 * at all, the probe stays on the first rung (one sequence of 16 tokens),
 * and the scale is exactly the FLOP ratio of each block. */
SKY_TEST(smallest_rung_scales_by_block_flops)
{
	sky_model_cfg c;
	sky_model_preset("mini", &c); /* H 256, F 1024, S 128, B 8 */
	sky_probe_opts o;
	sky_probe_result r;
	sky_probe_opts_default(&o, &c);
	o.max_s = 1e-9;
	SKY_EXPECT_EQ(sky_probe_run(&o, NULL, &r, NULL), 0);
	SKY_EXPECT_EQ(r.timed_batch, 1);
	SKY_EXPECT_EQ(r.timed_seq, 16);
	SKY_EXPECT_EQ(r.runs, 1);
	SKY_EXPECT_EQ(r.ladder_steps, 1);
	/* feed-forward: tokens 1024 / 16; attention: (T 8 H^2 + 4 T S H) ratio */
	SKY_EXPECT_NEAR(r.scale_ffn, 64.0, 1e-9);
	double full = 1024.0 * 8 * 256 * 256 + 4.0 * 1024 * 128 * 256;
	double rung = 16.0 * 8 * 256 * 256 + 4.0 * 16 * 16 * 256;
	SKY_EXPECT_NEAR(r.scale_attn, full / rung, 1e-9);
	SKY_EXPECT_EQ(r.int8_batch, 1);
	SKY_EXPECT_EQ(r.int8_seq, 16);
}
