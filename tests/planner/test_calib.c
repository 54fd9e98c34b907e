/* Boards' figures corrected by their jobs' measurements (planner/calib.c,
 * planner/svc_calib.c): a sample from a stage's metrics moves its board's
 * per-half-layer figures, the first outright and later ones by a bounded
 * weight; a sample absurdly far off the probe is refused; only the
 * sender's own figures move (the board is the topic's, checked against the
 * plan by svc_authz.c, never the payload's); the planner's fleet then
 * carries the folded figures, unless the board's probe has since moved
 * far from the one they were measured against; the table survives
 * calib.json. */
#include "sky_test.h"

#include "sky_calib.h"
#include "svc_fake.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static sky_calib g_c;
static char g_json[1 << 16];

static const sky_caps_shape k_shape = {"mini", 256, 4, 1024, 128, 8};
/* the probe: 1 ms each half forward, 2 ms each half backward */
static const sky_caps_times k_probe = {0.001, 0.001, 0.002, 0.002};

static sky_calib_sample sample(int first, int last, double fwd_s, double bwd_s)
{
	sky_calib_sample s = {first, last, fwd_s, bwd_s};
	return s;
}

SKY_TEST(the_first_sample_replaces_the_probe_keeping_its_split_between_halves)
{
	sky_calib_init(&g_c);
	/* units 0..3: two attention and two feed-forward halves; the probe
	 * predicts 4 ms forward and 8 ms backward, the stage measured 12 and 16 */
	sky_calib_sample s = sample(0, 3, 0.012, 0.016);
	SKY_EXPECT_EQ(sky_calib_fold(&g_c, "b1", &k_shape, &k_probe, &s, "j1", 100), 1);
	const sky_calib_entry *e = sky_calib_find(&g_c, "b1", &k_shape);
	SKY_EXPECT(e != NULL);
	SKY_EXPECT_NEAR(e->t.fwd_attn_s, 0.003, 1e-12);
	SKY_EXPECT_NEAR(e->t.fwd_ffn_s, 0.003, 1e-12);
	SKY_EXPECT_NEAR(e->t.bwd_attn_s, 0.004, 1e-12);
	SKY_EXPECT_NEAR(e->t.bwd_ffn_s, 0.004, 1e-12);
	SKY_EXPECT(e->n_fwd == 1 && e->n_bwd == 1 && !strcmp(e->job, "j1"));
	sky_caps_times t;
	SKY_EXPECT_EQ(sky_calib_times(&g_c, "b1", &k_shape, &k_probe, &t), 1);
	SKY_EXPECT_NEAR(t.fwd_attn_s + t.fwd_ffn_s, 0.006, 1e-12);
	/* another board, or the same board at other shapes: still its probe */
	SKY_EXPECT_EQ(sky_calib_times(&g_c, "b2", &k_shape, &k_probe, &t), 0);
	SKY_EXPECT_NEAR(t.fwd_attn_s, 0.001, 1e-12);
	sky_caps_shape other = k_shape;
	other.seq = 64;
	SKY_EXPECT_EQ(sky_calib_times(&g_c, "b1", &other, &k_probe, &t), 0);
}

/* A board whose probe moved far from the one its figures were measured
 * against (restarted at a tenth of its speed, say) is planned on the new
 * probe, not on measurements of the board it was; a probe within the
 * bound keeps the measurements. */
SKY_TEST(a_board_whose_probe_changed_is_planned_on_its_new_probe)
{
	sky_calib_init(&g_c);
	sky_calib_sample s = sample(0, 3, 0.012, 0.016);
	SKY_EXPECT_EQ(sky_calib_fold(&g_c, "b1", &k_shape, &k_probe, &s, "j1", 100), 1);
	sky_caps_times slow = {0.01, 0.01, 0.02, 0.02}, near = {0.0015, 0.0015, 0.003, 0.003}, t;
	SKY_EXPECT_EQ(sky_calib_times(&g_c, "b1", &k_shape, &slow, &t), 0);
	SKY_EXPECT(memcmp(&t, &slow, sizeof t) == 0);
	SKY_EXPECT_EQ(sky_calib_times(&g_c, "b1", &k_shape, &near, &t), 1);
	SKY_EXPECT_NEAR(t.fwd_attn_s, 0.003, 1e-12);
}

SKY_TEST(later_samples_average_and_an_outlier_moves_the_figures_a_bounded_step)
{
	sky_calib_init(&g_c);
	sky_calib_sample s = sample(1, 1, 0.002, 0); /* one ffn half: twice the probe */
	SKY_EXPECT_EQ(sky_calib_fold(&g_c, "b1", &k_shape, &k_probe, &s, "j1", 100), 1);
	const sky_calib_entry *e = sky_calib_find(&g_c, "b1", &k_shape);
	SKY_EXPECT_NEAR(e->t.fwd_ffn_s, 0.002, 1e-12);
	SKY_EXPECT_EQ(e->n_bwd, 0); /* no backward measured: the probe's stays */
	/* the second sample at 4 ms: half-weighted, in logs: 2 ms * 2^(1/2) */
	s.fwd_s = 0.004;
	SKY_EXPECT_EQ(sky_calib_fold(&g_c, "b1", &k_shape, &k_probe, &s, "j1", 101), 1);
	SKY_EXPECT_NEAR(e->t.fwd_ffn_s, 0.002 * sqrt(2.0), 1e-12);
	/* a step 20x the current figure (the board was descheduled): clamped to
	 * a factor SKY_CALIB_BOUND, weighted 1/3 */
	double before = e->t.fwd_ffn_s;
	s.fwd_s = 20 * before;
	SKY_EXPECT_EQ(sky_calib_fold(&g_c, "b1", &k_shape, &k_probe, &s, "j1", 102), 1);
	SKY_EXPECT_NEAR(e->t.fwd_ffn_s, before * pow(SKY_CALIB_BOUND, 1.0 / 3), 1e-12);
	/* weights go down to SKY_CALIB_ALPHA, not below */
	for (int i = 0; i < 20; i++)
		sky_calib_fold(&g_c, "b1", &k_shape, &k_probe, &s, "j1", 103);
	before = e->t.fwd_ffn_s;
	s.fwd_s = before / 1.5;
	sky_calib_fold(&g_c, "b1", &k_shape, &k_probe, &s, "j1", 104);
	SKY_EXPECT_NEAR(e->t.fwd_ffn_s, before * pow(1 / 1.5, SKY_CALIB_ALPHA), 1e-12);
}

SKY_TEST(a_sample_absurdly_far_off_the_probe_is_refused_and_counted)
{
	sky_calib_init(&g_c);
	sky_calib_sample s = sample(0, 0, 0.001 * SKY_CALIB_ABSURD * 1.5, 0);
	SKY_EXPECT_EQ(sky_calib_fold(&g_c, "b1", &k_shape, &k_probe, &s, "j1", 100), 0);
	const sky_calib_entry *e = sky_calib_find(&g_c, "b1", &k_shape);
	SKY_EXPECT(e != NULL && e->refused == 1 && e->n_fwd == 0);
	sky_caps_times t;
	SKY_EXPECT_EQ(sky_calib_times(&g_c, "b1", &k_shape, &k_probe, &t), 0);
	s.fwd_s = 0.001 / SKY_CALIB_ABSURD / 2; /* absurdly fast too */
	SKY_EXPECT_EQ(sky_calib_fold(&g_c, "b1", &k_shape, &k_probe, &s, "j1", 100), 0);
	SKY_EXPECT_EQ(e->refused, 2);
	/* bad arguments */
	s = sample(3, 2, 0.001, 0);
	SKY_EXPECT_EQ(sky_calib_fold(&g_c, "b1", &k_shape, &k_probe, &s, "j1", 100), SKY_EINVAL);
	s = sample(0, 0, 0.001, 0);
	SKY_EXPECT_EQ(sky_calib_fold(&g_c, "a/b", &k_shape, &k_probe, &s, "j1", 100), SKY_EINVAL);
}

SKY_TEST(a_metrics_message_gives_the_mean_forward_and_backward_of_a_micro_batch)
{
	const char *m = "{\"v\":1,\"step\":2,\"step_s\":0.1,\"ops\":[[\"F\",0,0,3],[\"S\",0,3,3.5],"
			"[\"F\",1,4,9],[\"W\",-1,9,20],[\"B\",1,20,30],[\"B\",0,30,36]]}";
	sky_calib_sample s;
	SKY_EXPECT_EQ(sky_calib_sample_from_metrics(m, strlen(m), 2, 5, &s), 1);
	SKY_EXPECT_NEAR(s.fwd_s, 0.004, 1e-12);
	SKY_EXPECT_NEAR(s.bwd_s, 0.008, 1e-12);
	SKY_EXPECT(s.first_unit == 2 && s.last_unit == 5);
	const char *done = "{\"v\":1,\"step\":4,\"done\":true}";
	SKY_EXPECT_EQ(sky_calib_sample_from_metrics(done, strlen(done), 0, 1, &s), 0);
	const char *bad = "{\"ops\":[[\"F\",0,5,1],[\"F\",0,\"x\",1],7]}"; /* nothing usable */
	SKY_EXPECT_EQ(sky_calib_sample_from_metrics(bad, strlen(bad), 0, 1, &s), 0);
	SKY_EXPECT_EQ(sky_calib_sample_from_metrics("[1", 2, 0, 1, &s), SKY_EFORMAT);
}

SKY_TEST(the_table_survives_its_json_and_a_bad_file_is_refused_with_the_reason)
{
	sky_calib_init(&g_c);
	sky_calib_sample s = sample(0, 3, 0.012, 0.016);
	sky_calib_fold(&g_c, "b1", &k_shape, &k_probe, &s, "j1", 100);
	s = sample(0, 0, 0.0005, 0);
	sky_calib_fold(&g_c, "b2", &k_shape, &k_probe, &s, "j2", 101);
	int n = sky_calib_to_json(&g_c, g_json, sizeof g_json);
	SKY_EXPECT(n > 0);
	static sky_calib back;
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_calib_from_json(&back, g_json, (size_t)n, &d), 0);
	SKY_EXPECT_EQ(back.n, 2);
	const sky_calib_entry *e = sky_calib_find(&back, "b1", &k_shape);
	SKY_EXPECT(e && e->n_fwd == 1 && fabs(e->t.fwd_attn_s - 0.003) < 1e-12 &&
		   !strcmp(e->job, "j1") && e->at_unix == 100);
	const char *twice = "{\"v\":1,\"boards\":[]}";
	SKY_EXPECT_EQ(sky_calib_from_json(&back, twice, strlen(twice), &d), 0);
	SKY_EXPECT_EQ(back.n, 0);
	static char cut[sizeof g_json];
	memcpy(cut, g_json, (size_t)n + 1);
	char *nf = strstr(cut, "\"n_fwd\"");
	memcpy(nf, "\"x_fwd\"", 7); /* b1's forward sample count missing */
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_calib_from_json(&back, cut, (size_t)n, &d), SKY_EFORMAT);
	SKY_EXPECT_MSG(strstr(d.msg, "calib: entry of board b1:") && strstr(d.msg, "n_fwd"), "%s",
		       d.msg);
	char *b1 = strstr(g_json, "\"board\":\"b1\"");
	memcpy(b1, "\"board\":\"/1\"", 12); /* not a board id */
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_calib_from_json(&back, g_json, (size_t)n, &d), SKY_EFORMAT);
	SKY_EXPECT_MSG(strstr(d.msg, "calib: board id '/1' is not a board id") != NULL, "%s", d.msg);
	SKY_EXPECT_EQ(back.n, 0);
	const char *v2 = "{\"v\":2,\"boards\":[]}";
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_calib_from_json(&back, v2, strlen(v2), &d), SKY_EFORMAT);
	SKY_EXPECT_MSG(strstr(d.msg, "not version 1") != NULL, "%s", d.msg);
}

/* ---- through the service: a board's own metrics only ---------------------- */

static const char *k_j1 = "{\"job\":\"j1\",\"model\":\"tiny\",\"task\":\"train\",\"steps\":50,"
			  "\"checkpoint_every\":20}";

/* board id online with a probe of 1 ms / 2 ms halves at r's shapes */
static sky_reg_board *probed(svc *s, const char *id, const run_job *r)
{
	sky_reg_board *b = svc_fake_board(s, id, SKY_REG_ONLINE);
	b->has_caps = 1;
	memset(&b->caps.shape, 0, sizeof b->caps.shape);
	snprintf(b->caps.shape.name, sizeof b->caps.shape.name, "%s", r->job.model.name);
	b->caps.shape.hidden = r->job.model.hidden;
	b->caps.shape.heads = r->job.model.heads;
	b->caps.shape.ffn = r->job.model.ffn;
	b->caps.shape.seq = r->job.model.seq;
	b->caps.shape.batch = r->job.model.batch;
	b->caps.fp32 = k_probe;
	b->caps.mem_bytes = 1ll << 30;
	return b;
}

/* metrics of step `step` whose micro-batch forward takes fwd_ms */
static int send(svc *s, const char *from, int step, double fwd_ms, const char *payload_board)
{
	char m[512];
	int n = snprintf(m, sizeof m,
			 "{\"v\":1,\"job\":\"j1\",\"epoch\":3,\"stage\":0,\"board\":\"%s\",\"step\":%d,"
			 "\"steps\":50,\"step_s\":0.5,\"busy\":0.5,\"ops\":[[\"F\",0,0,%g],[\"B\",0,%g,%g]]}",
			 payload_board, step, fwd_ms, fwd_ms, 3 * fwd_ms);
	return svc_authz_on_metrics(s, "j1", from, (const unsigned char *)m, (size_t)n);
}

SKY_TEST(only_the_senders_own_figures_move_and_the_next_plan_uses_them)
{
	svc *s = svc_fake_fresh("calib_authz");
	svc_fake_board(s, "b1", SKY_REG_ONLINE);
	run_job *r = svc_fake_follow(s, k_j1, "b1", 0); /* stage 0: units 0..3 */
	SKY_EXPECT(r != NULL);
	if (!r)
		return;
	probed(s, "b1", r);
	probed(s, "b2", r);
	sky_caps_shape sh = s->reg.b[0].caps.shape;
	/* the first report of the stage warms up: not folded */
	SKY_EXPECT_EQ(send(s, "b1", 1, 40, "b1"), 0);
	SKY_EXPECT(sky_calib_find(&s->calib.t, "b1", &sh) == NULL);
	/* b2 holds no stage of j1: refused by svc_authz, nothing folded */
	SKY_EXPECT_EQ(send(s, "b2", 2, 40, "b2"), -1);
	SKY_EXPECT(sky_calib_find(&s->calib.t, "b2", &sh) == NULL);
	/* b1 saying it is b2 moves b1's figures, not b2's: 4 units, 40 ms forward,
	 * 80 backward, against the probe's 4 and 8 */
	SKY_EXPECT_EQ(send(s, "b1", 2, 40, "b2"), 0);
	SKY_EXPECT(sky_calib_find(&s->calib.t, "b2", &sh) == NULL);
	const sky_calib_entry *e = sky_calib_find(&s->calib.t, "b1", &sh);
	SKY_EXPECT(e != NULL && e->n_fwd == 1 && !strcmp(e->job, "j1"));
	if (!e)
		return;
	SKY_EXPECT_NEAR(e->t.fwd_attn_s, 0.01, 1e-9);
	SKY_EXPECT_NEAR(e->t.bwd_ffn_s, 0.02, 1e-9);
	/* the fleet the planner builds for the next plan carries b1's measured
	 * figures and b2's probe */
	static svc_notes notes;
	char why[200];
	int fit = 0;
	svc_plan_fleet(s, &r->job, &notes, &fit, why, sizeof why);
	SKY_EXPECT_EQ(fit, 2);
	for (int i = 0; i < s->plan.fleet.n; i++) {
		const sky_board *fb = &s->plan.fleet.board[i];
		int is_b1 = !strcmp(fb->id, "b1");
		SKY_EXPECT_NEAR(fb->fwd_s, is_b1 ? 0.02 : 0.002, 1e-9);
		SKY_EXPECT_NEAR(fb->bwd_s, is_b1 ? 0.04 : 0.004, 1e-9);
		SKY_EXPECT_EQ(s->calib.used[i], is_b1);
	}
	/* and it is saved for the next start of the planner */
	svc_calib_tick(s, 1e9);
	svc_calib_load(s);
	SKY_EXPECT(sky_calib_find(&s->calib.t, "b1", &sh) != NULL);
}
