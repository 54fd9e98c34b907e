/* The follow table and its tick (planner/svc_follow.c, svc_replan.c), and
 * the submission queue (svc_submit.c), driven with the clock passed in and
 * a recording publisher (svc_fake.h) in the broker's place. */
#include "sky_test.h"

#include "svc_fake.h"

#include <stdio.h>
#include <string.h>

static const char *k_j1 = "{\"job\":\"j1\",\"model\":\"tiny\",\"task\":\"train\",\"steps\":50}";

static svc *fresh(const char *name)
{
	return svc_fake_fresh(name);
}

static sky_reg_board *board(svc *s, const char *id, int state)
{
	sky_reg_board *b = svc_fake_board(s, id, state);
	SKY_EXPECT(b != NULL);
	return b;
}

static run_job *follow_j1(svc *s, int grace)
{
	run_job *r = svc_fake_follow(s, k_j1, "b1", grace);
	SKY_EXPECT(r != NULL);
	return r;
}

static int state_file_paused(svc *s, const char *job, char *why, size_t cap)
{
	static sky_jobstate js;
	char path[700];
	if (sky_jobstate_path(s->state_dir, job, path, sizeof path) != 0 ||
	    sky_jobstate_load(path, &js, NULL) != 0)
		return -1;
	snprintf(why, cap, "%s", js.pause_why);
	return js.paused;
}

SKY_TEST(a_board_gone_pauses_its_job_once_and_it_is_tried_again_each_second)
{
	svc *s = fresh("follow_pause");
	sky_reg_board *b = board(s, "b1", SKY_REG_ONLINE);
	run_job *r = follow_j1(s, 0);
	svc_follow_tick(s, 100.0);
	SKY_EXPECT_EQ(r->replan.paused, 0); /* its board is online */
	b->state = SKY_REG_OFFLINE;
	svc_follow_tick(s, 101.0);
	SKY_EXPECT_EQ(s->follow.n_run, 1);
	SKY_EXPECT_EQ(r->replan.paused, 1); /* no board left to plan over */
	SKY_EXPECT_MSG(strcmp(r->replan.pause_why, "resuming after board b1 (stage 0) offline") == 0, "%s",
		       r->replan.pause_why);
	SKY_EXPECT_NEAR(r->replan.retry_s, 102.0, 1e-9);
	SKY_EXPECT_MSG(strcmp(s->jobs.paused[0], "j1") == 0, "%s", s->jobs.paused[0]);
	char why[200];
	SKY_EXPECT_EQ(state_file_paused(s, "j1", why, sizeof why), 1);
	SKY_EXPECT_MSG(strcmp(why, r->replan.pause_why) == 0, "%s", why);
	/* not due yet, then due: tried again, still paused, a second on */
	svc_follow_tick(s, 101.5);
	SKY_EXPECT_NEAR(r->replan.retry_s, 102.0, 1e-9);
	svc_follow_tick(s, 102.25);
	SKY_EXPECT_EQ(r->replan.paused, 1);
	SKY_EXPECT_NEAR(r->replan.retry_s, 103.25, 1e-9);
	SKY_EXPECT(r->replan.fault_s == 101.0); /* the fault the re-plan answers */
}

SKY_TEST(a_revoked_board_says_so_in_the_pause)
{
	svc *s = fresh("follow_revoked");
	board(s, "b1", SKY_REG_ONLINE);
	run_job *r = follow_j1(s, 0);
	SKY_EXPECT_EQ(sky_registry_revoke(&s->reg, "b1", "key compromise"), 1);
	svc_follow_tick(s, 10.0);
	SKY_EXPECT_EQ(r->replan.paused, 1);
	SKY_EXPECT_MSG(strcmp(r->replan.pause_why, "resuming after board b1 (stage 0) revoked") == 0, "%s",
		       r->replan.pause_why);
}

SKY_TEST(a_done_job_is_let_go_and_its_state_file_removed)
{
	svc *s = fresh("follow_done");
	board(s, "b1", SKY_REG_ONLINE);
	follow_j1(s, 0);
	svc_follow_save(s, &s->follow.run[0]);
	char why[200];
	SKY_EXPECT_EQ(state_file_paused(s, "j1", why, sizeof why), 0);
	/* done under an older epoch does not count */
	sky_jobstat_row *w = &s->jobs.row[s->jobs.n++];
	memset(w, 0, sizeof *w);
	snprintf(w->job, sizeof w->job, "j1");
	snprintf(w->board, sizeof w->board, "b1");
	w->epoch = 2;
	w->done = 1;
	svc_follow_tick(s, 5.0);
	SKY_EXPECT_EQ(s->follow.n_run, 1);
	w->epoch = 3;
	svc_follow_tick(s, 6.0);
	SKY_EXPECT_EQ(s->follow.n_run, 0);
	SKY_EXPECT_EQ(state_file_paused(s, "j1", why, sizeof why), -1);
	SKY_EXPECT(svc_follow_find(s, "j1") == NULL);
}

SKY_TEST(a_restored_job_gives_its_boards_the_grace_before_taking_them_for_dead)
{
	svc *s = fresh("follow_grace");
	board(s, "b1", SKY_REG_OFFLINE); /* the registry restores every board offline */
	run_job *r = follow_j1(s, 1);
	double t0 = r->restored_at;
	svc_follow_tick(s, t0 + 1.0);
	SKY_EXPECT_EQ(r->replan.paused, 0);
	SKY_EXPECT(r->restored_until > 0);
	/* grace over, still unheard: offline, re-planned (paused: no board) */
	svc_follow_tick(s, r->restored_until + 0.5);
	SKY_EXPECT_EQ(r->restored_until, 0);
	SKY_EXPECT_EQ(r->replan.paused, 1);
}

static const char *k_doc = "{\"job\":\"q1\",\"model\":\"tiny\",\"submit_id\":\"0123456789abcdef\","
			   "\"wait_s\":5}";

SKY_TEST(a_submission_is_queued_once_and_a_resend_answered_again)
{
	svc *s = fresh("submit_once");
	svc_submit_on_msg(s, "sky-op-alice", k_doc, strlen(k_doc));
	SKY_EXPECT_EQ(s->submit.n_pending, 1);
	SKY_EXPECT_EQ(sky_nojob_kind_of(&s->nojob, "q1"), SKY_NOJOB_QUEUED);
	const svc_fake_pub *p = svc_fake_last("sky/v1/jobs/sky-op-alice/reply");
	SKY_EXPECT(p && p->qos == 1 && !p->retained);
	SKY_EXPECT_MSG(p && strcmp(p->data, "{\"v\":1,\"submit_id\":\"0123456789abcdef\",\"job\":"
				       "\"q1\",\"ok\":true,\"state\":\"queued\"}") == 0,
		       "%s", p ? p->data : "(none)");
	svc_submit_on_msg(s, "sky-op-alice", k_doc, strlen(k_doc));
	SKY_EXPECT_EQ(s->submit.n_pending, 1); /* answered again, not queued twice */
	SKY_EXPECT_EQ(svc_fake_n_pubs, 2);
	SKY_EXPECT(strcmp(svc_fake_pubs[1].data, svc_fake_pubs[0].data) == 0);
	SKY_EXPECT_EQ(s->submit.next_recent, 1);
	/* another operator's submission of the same id is refused, with why */
	svc_submit_on_msg(s, "sky-op-bob", k_doc, strlen(k_doc));
	SKY_EXPECT_EQ(s->submit.n_pending, 1);
	p = svc_fake_last("sky/v1/jobs/sky-op-bob/reply");
	SKY_EXPECT_MSG(p && strstr(p->data, "\"ok\":false") &&
			       strstr(p->data, "job q1 belongs to another operator"),
		       "%s", p ? p->data : "(none)");
	/* and bob's own job is queued */
	const char *bobs = "{\"job\":\"qb\",\"model\":\"tiny\",\"submit_id\":\"00000000bb\"}";
	svc_submit_on_msg(s, "sky-op-bob", bobs, strlen(bobs));
	SKY_EXPECT_EQ(s->submit.n_pending, 2);
	/* a refusal is answered too, with why */
	const char *bad = "{\"job\":\"q2\",\"model\":\"nope\",\"submit_id\":\"00000000aa\"}";
	svc_submit_on_msg(s, "sky-op-alice", bad, strlen(bad));
	SKY_EXPECT_EQ(s->submit.n_pending, 2);
	p = svc_fake_last("sky/v1/jobs/sky-op-alice/reply");
	SKY_EXPECT_MSG(p && strstr(p->data, "\"ok\":false") && strstr(p->data, "unknown model"),
		       "%s", p ? p->data : "(none)");
}

SKY_TEST(a_queued_job_waits_for_its_boards_then_is_dropped_without_any)
{
	svc *s = fresh("submit_wait");
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(svc_submit_queue(s, k_doc, strlen(k_doc), "test", &d), 0);
	board(s, "b1", SKY_REG_ONLINE); /* online, but no capabilities at the job's shapes */
	svc_submit_tick(s, 0);
	SKY_EXPECT_EQ(s->submit.n_pending, 1);  /* within wait_s */
	SKY_EXPECT_EQ(s->submit.pending[0].notes.asked[0], 1); /* asked to probe, once */
	const svc_fake_pub *p = svc_fake_last("sky/v1/board/b1/cmd");
	SKY_EXPECT_MSG(p && strcmp(p->data, "{\"cmd\":\"probe\",\"model\":\"tiny\",\"seq\":16,"
				       "\"batch\":8}") == 0,
		       "%s", p ? p->data : "(none)");
	svc_submit_tick(s, 0);
	SKY_EXPECT_EQ(svc_fake_n_pubs, 1);
	s->submit.pending[0].since -= 10;        /* wait_s is over */
	svc_submit_tick(s, 0);
	SKY_EXPECT_EQ(s->submit.n_pending, 0);
	SKY_EXPECT_EQ(sky_nojob_kind_of(&s->nojob, "q1"), SKY_NOJOB_UNKNOWN);
	/* a full queue refuses */
	for (int i = 0; i < MAX_PENDING; i++)
		SKY_EXPECT_EQ(svc_submit_queue(s, k_doc, strlen(k_doc), "test", &d), 0);
	SKY_EXPECT_EQ(svc_submit_queue(s, k_doc, strlen(k_doc), "test", &d), SKY_ESTATE);
	SKY_EXPECT_MSG(strstr(d.msg, "64 jobs already waiting") != NULL, "%s", d.msg);
}

