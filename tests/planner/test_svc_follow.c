/* The follow table and its tick (planner/svc_follow.c, svc_replan.c), and
 * the submission queue (svc_submit.c), driven with the clock passed in and
 * no broker: a publish goes nowhere (s->m is NULL), so what is checked is
 * the state each step leaves. */
#include "sky_test.h"

#include "svc_internal.h"

#include "sky_file.h"

#include <stdio.h>
#include <string.h>

static svc g_s; /* far too big for a stack */
static sky_service_opts g_o;

static svc *fresh(const char *name)
{
	svc *s = &g_s;
	memset(s, 0, sizeof *s);
	memset(&g_o, 0, sizeof g_o);
	g_o.pki_dir = sky_test_tmp_dir();
	g_o.replan_holdoff_s = 1e9; /* no voluntary re-plans here */
	s->o = &g_o;
	snprintf(s->state_dir, sizeof s->state_dir, "%s/%s", sky_test_tmp_dir(), name);
	sky_file_mkdirs(s->state_dir, 0700);
	sky_registry_init(&s->reg);
	sky_ckpt_init(&s->ckpt, s->state_dir);
	svc_log_init(s);
	svc_enroll_init(s);
	sky_nojob_init(&s->nojob);
	sky_servefault_init(&s->sf);
	return s;
}

static sky_reg_board *board(svc *s, const char *id, int state)
{
	sky_reg_board *b = sky_registry_add(&s->reg, id);
	SKY_EXPECT(b != NULL);
	if (b)
		b->state = state;
	return b;
}

/* Training job j1 on one stage on board b1, followed (as restored from its
 * state file), with no restart grace unless grace. */
static run_job *follow_j1(svc *s, int grace)
{
	static sky_jobstate js;
	const char *doc = "{\"job\":\"j1\",\"model\":\"tiny\",\"task\":\"train\",\"steps\":50}";
	memset(&js, 0, sizeof js);
	SKY_EXPECT_EQ(sky_job_req_parse(doc, strlen(doc), &js.req, NULL), 0);
	js.epoch = 3;
	js.generation = 1;
	js.n_stages = 1;
	snprintf(js.board[0], sizeof js.board[0], "b1");
	js.first[0] = 0;
	js.last[0] = 3;
	run_job *r = svc_follow_from_state(s, &js);
	SKY_EXPECT(r != NULL);
	svc_follow_add(s);
	if (!grace)
		r->restored_until = 0;
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
	SKY_EXPECT(strstr(s->submit.recent[0].reply, "\"ok\":true") != NULL);
	svc_submit_on_msg(s, "sky-op-alice", k_doc, strlen(k_doc));
	SKY_EXPECT_EQ(s->submit.n_pending, 1); /* answered again, not queued twice */
	SKY_EXPECT_EQ(s->submit.next_recent, 1);
	/* another operator's submission of the same id is its own */
	svc_submit_on_msg(s, "sky-op-bob", k_doc, strlen(k_doc));
	SKY_EXPECT_EQ(s->submit.n_pending, 2);
	/* a refusal is answered too, with why */
	const char *bad = "{\"job\":\"q2\",\"model\":\"nope\",\"submit_id\":\"00000000aa\"}";
	svc_submit_on_msg(s, "sky-op-alice", bad, strlen(bad));
	SKY_EXPECT_EQ(s->submit.n_pending, 2);
	SKY_EXPECT_MSG(strstr(s->submit.recent[2].reply, "unknown model") != NULL, "%s",
		       s->submit.recent[2].reply);
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
	s->submit.pending[0].since -= 10;        /* wait_s is over */
	svc_submit_tick(s, 0);
	SKY_EXPECT_EQ(s->submit.n_pending, 0);
	SKY_EXPECT_EQ(sky_nojob_kind_of(&s->nojob, "q1"), SKY_NOJOB_UNKNOWN);
	/* a full queue refuses */
	for (int i = 0; i < MAX_PENDING; i++)
		SKY_EXPECT_EQ(svc_submit_queue(s, k_doc, strlen(k_doc), "test", &d), 0);
	SKY_EXPECT_EQ(svc_submit_queue(s, k_doc, strlen(k_doc), "test", &d), SKY_ESTATE);
	SKY_EXPECT_MSG(strstr(d.msg, "16 jobs already waiting") != NULL, "%s", d.msg);
}

