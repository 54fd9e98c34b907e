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
	char path[512];
	snprintf(path, sizeof path, "%s/%s", dir, SKY_PROBE_CACHE_FILE);
	SKY_EXPECT(sky_file_exists(path));

	memset(&caps, 0, sizeof caps);
	SKY_EXPECT_EQ(sky_probe_cached(dir, "b01", &o, NULL, &caps, &hit, NULL), 0);
	SKY_EXPECT_EQ(hit, 1);
	SKY_EXPECT(caps.fp32.fwd_attn_s == first); /* the cached figure, not a new one */
	SKY_EXPECT(caps.has_int8 && caps.int8_fwd_s > 0);

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
