/* A followed training job's own checks (planner/svc_train.c): drift of a
 * stage's compute asks its board to probe again, and a checkpoint asked
 * for a step the stages have passed is asked again further ahead; driven
 * with the clock passed in, the stages' metrics written into the jobstat
 * table, and a recording publisher (svc_fake.h). */
#include "sky_test.h"

#include "svc_fake.h"

#include <stdio.h>
#include <string.h>

static const char *k_j1 = "{\"job\":\"j1\",\"model\":\"tiny\",\"task\":\"train\",\"steps\":50,"
			  "\"checkpoint_every\":20}";

/* Stage 0 of j1 on b1 under epoch 3 reports step with busy_s of compute. */
static void metrics(svc *s, int step, double busy_s)
{
	sky_jobstat_row *w = &s->jobs.row[0];
	s->jobs.n = 1;
	snprintf(w->job, sizeof w->job, "j1");
	snprintf(w->board, sizeof w->board, "b1");
	w->epoch = 3;
	w->stage = 0;
	w->step = step;
	w->step_s = 0.1;
	w->busy = busy_s / w->step_s;
}

/* A fresh service following j1 on online board b1 (NULL: could not). */
static run_job *j1_on_b1(const char *name, svc **s)
{
	*s = svc_fake_fresh(name);
	svc_fake_board(*s, "b1", SKY_REG_ONLINE);
	run_job *r = svc_fake_follow(*s, k_j1, "b1", 0);
	SKY_EXPECT(r != NULL);
	return r;
}

SKY_TEST(a_stage_whose_compute_drifts_three_steps_running_is_asked_to_probe_again)
{
	svc *s;
	run_job *r = j1_on_b1("train_drift", &s);
	if (!r)
		return;
	double now = 100;
	for (int step = 1; step <= 5; step++, now += 0.1) /* the baseline */
		metrics(s, step, 0.04), svc_train_tick(s, r, now);
	SKY_EXPECT_NEAR(r->train.busy_base[0], 0.04, 1e-12);
	/* the same step again is not a new sample */
	svc_train_tick(s, r, now);
	SKY_EXPECT_EQ(r->train.busy_n[0], 5);
	metrics(s, 6, 0.05); /* within the factor: no drift */
	svc_train_tick(s, r, now += 0.1);
	SKY_EXPECT_EQ(r->train.drift_run[0], 0);
	for (int step = 7; step <= 8; step++)
		metrics(s, step, 0.12), svc_train_tick(s, r, now += 0.1);
	SKY_EXPECT_EQ(r->train.drift_run[0], 2);
	SKY_EXPECT(svc_fake_last("sky/v1/board/b1/cmd") == NULL);
	metrics(s, 9, 0.12); /* the third off step in a row */
	svc_train_tick(s, r, now += 0.1);
	const svc_fake_pub *p = svc_fake_last("sky/v1/board/b1/cmd");
	SKY_EXPECT_MSG(p && strstr(p->data, "\"cmd\":\"probe\"") != NULL, "%s",
		       p ? p->data : "(none)");
	SKY_EXPECT_NEAR(r->train.probe_asked_s[0], now, 1e-9);
	SKY_EXPECT_EQ(r->train.busy_n[0], 0); /* a new baseline at the new speed */
	SKY_EXPECT_EQ(r->train.drift_run[0], 0);
}

SKY_TEST(a_checkpoint_asked_for_a_passed_step_is_asked_again_twice_as_far_ahead)
{
	svc *s;
	run_job *r = j1_on_b1("train_ask", &s);
	if (!r)
		return;
	r->train.want = 1;
	r->train.ask_step = 4;
	r->train.ask_ahead = 2;
	metrics(s, 5, 0.04); /* one step past: may still come */
	svc_train_tick(s, r, 10);
	SKY_EXPECT_EQ(svc_fake_n_pubs, 0);
	metrics(s, 6, 0.04); /* two past, no commit: asked again at 6 + 4 */
	svc_train_tick(s, r, 11);
	SKY_EXPECT_EQ(r->train.ask_step, 10);
	SKY_EXPECT_EQ(r->train.ask_ahead, 4);
	const svc_fake_pub *p = svc_fake_last("sky/v1/board/b1/cmd");
	SKY_EXPECT_MSG(p && strcmp(p->data, "{\"cmd\":\"ckpt\",\"job\":\"j1\",\"epoch\":3,\"step\":10}") ==
			       0,
		       "%s", p ? p->data : "(none)");
	/* past again, but the K-th step (20) comes before 12 + 8: no ask */
	metrics(s, 12, 0.04);
	svc_train_tick(s, r, 12);
	SKY_EXPECT_EQ(r->train.ask_step, 0);
	SKY_EXPECT_EQ(svc_fake_n_pubs, 1);
}

SKY_TEST(the_last_step_is_the_highest_any_stage_reported_under_the_epoch)
{
	svc *s = svc_fake_fresh("train_last");
	metrics(s, 7, 0.04);
	SKY_EXPECT_EQ(svc_train_last_step(s, "j1", 3), 7);
	SKY_EXPECT_EQ(svc_train_last_step(s, "j1", 4), 0);
	SKY_EXPECT_EQ(svc_train_last_step(s, "j2", 3), 0);
}
