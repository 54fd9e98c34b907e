/* Jobs belong to their operator, through the service (planner/svc_relay.c,
 * svc_cancel.c, svc_submit.c, svc_plan.c): what a job's stages send is
 * relayed to its owner's topics only, the last state retained; the owner's
 * resubmit clears it; only the owner cancels; one operator's quota of
 * waiting jobs leaves another's submits alone; a board busy with one
 * operator's job is not planned for another's. */
#include "sky_test.h"

#include "svc_fake.h"

#include "sky_owner.h"

#include "sky_file.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <utime.h>

static const char *k_a = "{\"job\":\"ja\",\"model\":\"tiny\",\"submit_id\":\"00000000a1\"}";

static int n_on(const char *topic)
{
	int n = 0;
	for (int i = 0; i < svc_fake_n_pubs; i++)
		n += !strcmp(svc_fake_pubs[i].topic, topic);
	return n;
}

/* alice's job ja on one stage, board b1, epoch 5 */
static svc *alice_runs_ja(const char *name)
{
	svc *s = svc_fake_fresh(name);
	svc_submit_on_msg(s, "sky-op-alice", k_a, strlen(k_a));
	SKY_EXPECT_EQ(s->submit.n_pending, 1);
	sky_reg_board *b = svc_fake_board(s, "b1", SKY_REG_ONLINE);
	SKY_EXPECT(b != NULL);
	snprintf(b->job, sizeof b->job, "ja");
	b->epoch = 5;
	b->stage = 0; /* b1 holds stage 0 of ja's plan: its metrics are taken */
	s->reg.n_jobs = 1;
	snprintf(s->reg.jobs[0].job, sizeof s->reg.jobs[0].job, "ja");
	s->reg.jobs[0].epoch = 5;
	svc_submit_drop(s, "ja"); /* planned */
	return s;
}

/* b1's metrics as skyplan takes them: from a board of the job's plan
 * (svc_authz), then relayed */
static void metrics(svc *s, const char *job, const char *m)
{
	SKY_EXPECT_EQ(svc_authz_on_metrics(s, job, "b1", (const unsigned char *)m, strlen(m)), 0);
	svc_relay_metrics(s, job, "b1", m, strlen(m));
}

SKY_TEST(metrics_and_parts_go_to_the_owner_only)
{
	svc *s = alice_runs_ja("relay1");
	metrics(s, "ja", "{\"epoch\":5,\"stage\":0,\"board\":\"b1\",\"step\":1,\"steps\":2,"
			 "\"loss\":0.5,\"step_s\":0.01}");
	const svc_fake_pub *p = svc_fake_last("sky/v1/jobs/sky-op-alice/job/ja/metrics");
	SKY_EXPECT(p && !p->retained && strstr(p->data, "\"step\":1"));
	SKY_EXPECT(svc_fake_last("sky/v1/jobs/sky-op-alice/job/ja/state") == NULL);
	svc_relay_part(s, "ja", "b1", NULL, (const unsigned char *)"PART", 4);
	p = svc_fake_last("sky/v1/jobs/sky-op-alice/job/ja/part/b1");
	SKY_EXPECT(p && p->retained && p->qos == 1 && p->len == 4);
	/* nothing anywhere but alice's topics */
	for (int i = 0; i < svc_fake_n_pubs; i++)
		SKY_EXPECT_MSG(strncmp(svc_fake_pubs[i].topic, "sky/v1/jobs/sky-op-alice/", 25) == 0,
			       "%s", svc_fake_pubs[i].topic);
	/* the last stage done: the job's last state, retained */
	metrics(s, "ja", "{\"epoch\":5,\"stage\":0,\"board\":\"b1\",\"step\":2,\"steps\":2,"
			 "\"loss\":0.25,\"step_s\":0.01,\"done\":true}");
	p = svc_fake_last("sky/v1/jobs/sky-op-alice/job/ja/state");
	SKY_EXPECT_MSG(p && p->retained &&
			       !strcmp(p->data, "{\"job\":\"ja\",\"epoch\":5,\"state\":\"done\",\"stages\":1,"
						"\"step\":2,\"loss\":0.25}"),
		       "%s", p ? p->data : "(none)");
	/* a job nobody owns is not relayed */
	int before = svc_fake_n_pubs;
	svc_relay_part(s, "nobodys", "b1", NULL, (const unsigned char *)"PART", 4);
	SKY_EXPECT_EQ(svc_fake_n_pubs, before);
}

SKY_TEST(a_resubmit_by_the_owner_clears_what_was_retained)
{
	svc *s = alice_runs_ja("relay2");
	svc_relay_part(s, "ja", "b1", NULL, (const unsigned char *)"PART", 4);
	svc_relay_part(s, "ja", "b1", NULL, (const unsigned char *)"PART", 4);
	svc_relay_state_msg(s, "ja", "sky-op-alice", 5, "done", NULL);
	svc_fake_n_pubs = 0;
	const char *again = "{\"job\":\"ja\",\"model\":\"tiny\",\"submit_id\":\"00000000a2\"}";
	svc_submit_on_msg(s, "sky-op-alice", again, strlen(again));
	SKY_EXPECT_EQ(s->submit.n_pending, 1);
	const svc_fake_pub *p = svc_fake_last("sky/v1/jobs/sky-op-alice/job/ja/part/b1");
	SKY_EXPECT(p && p->retained && p->len == 0);
	SKY_EXPECT_EQ(n_on("sky/v1/jobs/sky-op-alice/job/ja/part/b1"), 1); /* listed once */
	p = svc_fake_last("sky/v1/jobs/sky-op-alice/job/ja/state");
	SKY_EXPECT(p && p->retained && p->len == 0);
	/* bob's resubmit of it is refused, and clears nothing */
	svc_relay_part(s, "ja", "b1", NULL, (const unsigned char *)"PART", 4);
	svc_fake_n_pubs = 0;
	svc_submit_on_msg(s, "sky-op-bob", again, strlen(again));
	SKY_EXPECT_EQ(n_on("sky/v1/jobs/sky-op-alice/job/ja/part/b1"), 0);
	p = svc_fake_last("sky/v1/jobs/sky-op-bob/reply");
	SKY_EXPECT_MSG(p && strstr(p->data, "job ja belongs to another operator"), "%s",
		       p ? p->data : "(none)");
}

SKY_TEST(a_parts_chunks_are_relayed_under_their_index_and_cleared_by_a_resubmit)
{
	svc *s = alice_runs_ja("relay_chunks");
	svc_relay_part(s, "ja", "b1", "0", (const unsigned char *)"C0", 2);
	svc_relay_part(s, "ja", "b1", "1", (const unsigned char *)"C1", 2);
	const svc_fake_pub *p = svc_fake_last("sky/v1/jobs/sky-op-alice/job/ja/part/b1/1");
	SKY_EXPECT(p && p->retained && p->qos == 1 && p->len == 2 && !memcmp(p->data, "C1", 2));
	SKY_EXPECT(svc_fake_last("sky/v1/jobs/sky-op-alice/job/ja/part/b1/0") != NULL);
	SKY_EXPECT(svc_fake_last("sky/v1/jobs/sky-op-alice/job/ja/part/b1") == NULL);
	svc_fake_n_pubs = 0;
	const char *again = "{\"job\":\"ja\",\"model\":\"tiny\",\"submit_id\":\"00000000a3\"}";
	svc_submit_on_msg(s, "sky-op-alice", again, strlen(again));
	for (int i = 0; i < 2; i++) {
		char t[96];
		snprintf(t, sizeof t, "sky/v1/jobs/sky-op-alice/job/ja/part/b1/%d", i);
		p = svc_fake_last(t);
		SKY_EXPECT_MSG(p && p->retained && p->len == 0, "%s not cleared", t);
	}
}

SKY_TEST(only_the_owner_cancels)
{
	svc *s = alice_runs_ja("cancel1");
	const char *c = "{\"job\":\"ja\",\"cancel_id\":\"c1\"}";
	svc_cancel_on_msg(s, "sky-op-bob", c, strlen(c));
	const svc_fake_pub *p = svc_fake_last("sky/v1/jobs/sky-op-bob/reply");
	SKY_EXPECT_MSG(p && !strcmp(p->data, "{\"v\":1,\"submit_id\":\"c1\",\"job\":\"ja\",\"ok\":false,"
					     "\"error\":\"job ja belongs to another operator\"}"),
		       "%s", p ? p->data : "(none)");
	SKY_EXPECT(!svc_relay_cancelled(s, "ja"));
	svc_cancel_on_msg(s, "sky-op-alice", c, strlen(c));
	p = svc_fake_last("sky/v1/jobs/sky-op-alice/reply");
	SKY_EXPECT_MSG(p && !strcmp(p->data, "{\"v\":1,\"submit_id\":\"c1\",\"job\":\"ja\",\"ok\":true,"
					     "\"state\":\"cancelled\"}"),
		       "%s", p ? p->data : "(none)");
	SKY_EXPECT(svc_relay_cancelled(s, "ja"));
	/* remembered across a restart (<state>/cancelled.txt); a line that is
	 * not a job id is skipped */
	memset(s->relay.cancelled, 0, sizeof s->relay.cancelled);
	s->relay.next_cancelled = 0;
	char path[700];
	snprintf(path, sizeof path, "%s/cancelled.txt", s->state_dir);
	SKY_EXPECT_EQ(sky_file_append(path, "../x\n", 5, 0600), 0);
	svc_relay_restore(s);
	SKY_EXPECT(svc_relay_cancelled(s, "ja"));
	SKY_EXPECT(!svc_relay_cancelled(s, "../x"));
	p = svc_fake_last("sky/v1/jobs/sky-op-alice/job/ja/state");
	SKY_EXPECT_MSG(p && p->retained &&
			       !strcmp(p->data, "{\"job\":\"ja\",\"epoch\":5,\"state\":\"cancelled\"}"),
		       "%s", p ? p->data : "(none)");
	/* cancelled: its metrics are not relayed any more */
	int before = svc_fake_n_pubs;
	metrics(s, "ja", "{\"epoch\":5,\"stage\":0,\"board\":\"b1\",\"step\":2,\"steps\":9}");
	SKY_EXPECT_EQ(svc_fake_n_pubs, before);
	/* bad requests are answered with why */
	const char *bad = "{\"job\":\"../x\"}";
	svc_cancel_on_msg(s, "sky-op-alice", bad, strlen(bad));
	p = svc_fake_last("sky/v1/jobs/sky-op-alice/reply");
	SKY_EXPECT_MSG(p && strstr(p->data, "\"ok\":false") && strstr(p->data, "not a job id"), "%s",
		       p ? p->data : "(none)");
	const char *none = "{\"job\":\"nope\"}";
	svc_cancel_on_msg(s, "sky-op-alice", none, strlen(none));
	p = svc_fake_last("sky/v1/jobs/sky-op-alice/reply");
	SKY_EXPECT_MSG(p && strstr(p->data, "no job nope"), "%s", p ? p->data : "(none)");
}

SKY_TEST(cancel_takes_a_queued_job_out_and_stops_following)
{
	svc *s = svc_fake_fresh("cancel2");
	const char *j = "{\"job\":\"jq\",\"model\":\"tiny\",\"submit_id\":\"00000000c2\",\"wait_s\":100}";
	svc_submit_on_msg(s, "sky-op-alice", j, strlen(j));
	SKY_EXPECT_EQ(s->submit.n_pending, 1);
	const char *c = "{\"job\":\"jq\"}";
	svc_cancel_on_msg(s, "sky-op-alice", c, strlen(c));
	SKY_EXPECT_EQ(s->submit.n_pending, 0);
	/* a followed job: no longer followed, its run file gone */
	const char *t = "{\"job\":\"jt\",\"model\":\"tiny\",\"task\":\"train\",\"steps\":4,"
			"\"checkpoint_every\":2}";
	SKY_EXPECT_EQ(sky_owner_claim(s->state_dir, "jt", "sky-op-alice", NULL), 0);
	run_job *r = svc_fake_follow(s, t, "b1", 0);
	SKY_EXPECT(r != NULL);
	svc_follow_save(s, r);
	char path[700];
	SKY_EXPECT_EQ(sky_jobstate_path(s->state_dir, "jt", path, sizeof path), 0);
	SKY_EXPECT(sky_file_exists(path));
	const char *ct = "{\"job\":\"jt\"}";
	svc_cancel_on_msg(s, "sky-op-alice", ct, strlen(ct));
	SKY_EXPECT(svc_follow_find(s, "jt") == NULL);
	SKY_EXPECT(!sky_file_exists(path));
}

SKY_TEST(one_operators_quota_leaves_the_others_alone)
{
	svc *s = svc_fake_fresh("quota1");
	((sky_service_opts *)s->o)->pending_per_op = 2;
	char doc[200], id[20];
	for (int i = 0; i < 3; i++) {
		snprintf(doc, sizeof doc, "{\"job\":\"b%d\",\"model\":\"tiny\",\"submit_id\":\"%08d\"}", i,
			 i + 1);
		svc_submit_on_msg(s, "sky-op-bob", doc, strlen(doc));
	}
	SKY_EXPECT_EQ(s->submit.n_pending, 2);
	const svc_fake_pub *p = svc_fake_last("sky/v1/jobs/sky-op-bob/reply");
	SKY_EXPECT_MSG(p && strstr(p->data, "operator sky-op-bob has 2 jobs waiting for boards (its "
					   "limit is 2)"),
		       "%s", p ? p->data : "(none)");
	snprintf(id, sizeof id, "x");
	svc_submit_on_msg(s, "sky-op-alice", k_a, strlen(k_a));
	SKY_EXPECT_EQ(s->submit.n_pending, 3);
	p = svc_fake_last("sky/v1/jobs/sky-op-alice/reply");
	SKY_EXPECT(p && strstr(p->data, "\"ok\":true"));
}

SKY_TEST(a_board_busy_with_another_operators_job_is_not_taken)
{
	svc *s = alice_runs_ja("busy1");
	svc_job bj;
	memset(&bj, 0, sizeof bj);
	snprintf(bj.req.job, sizeof bj.req.job, "jb");
	snprintf(bj.op, sizeof bj.op, "sky-op-bob");
	svc_notes notes;
	memset(&notes, 0, sizeof notes);
	int fit = 0;
	char why[200] = "";
	/* ja has not reported yet (starting): busy */
	SKY_EXPECT_EQ(svc_plan_fleet(s, &bj, &notes, &fit, why, sizeof why), 0);
	SKY_EXPECT_MSG(strstr(why, "1 online board is busy with another operator's job"), "%s", why);
	/* alice's own next job may take it (online, counted) */
	svc_job aj = bj;
	snprintf(aj.op, sizeof aj.op, "sky-op-alice");
	SKY_EXPECT_EQ(svc_plan_fleet(s, &aj, &notes, &fit, why, sizeof why), 1);
	/* running: still busy; done: free */
	metrics(s, "ja", "{\"epoch\":5,\"stage\":0,\"board\":\"b1\",\"step\":1,\"steps\":2}");
	SKY_EXPECT_EQ(svc_plan_fleet(s, &bj, &notes, &fit, why, sizeof why), 0);
	metrics(s, "ja", "{\"epoch\":5,\"stage\":0,\"board\":\"b1\",\"step\":2,\"steps\":2,"
			 "\"done\":true}");
	SKY_EXPECT_EQ(svc_plan_fleet(s, &bj, &notes, &fit, why, sizeof why), 1);
	/* a policy that shares busy boards */
	metrics(s, "ja", "{\"epoch\":5,\"stage\":0,\"board\":\"b1\",\"step\":1,\"steps\":2}");
	s->jobs.n = 0;
	SKY_EXPECT_EQ(svc_plan_fleet(s, &bj, &notes, &fit, why, sizeof why), 0);
	((sky_service_opts *)s->o)->share_busy_boards = 1;
	SKY_EXPECT_EQ(svc_plan_fleet(s, &bj, &notes, &fit, why, sizeof why), 1);
	/* cancelled: free */
	((sky_service_opts *)s->o)->share_busy_boards = 0;
	const char *c = "{\"job\":\"ja\"}";
	svc_cancel_on_msg(s, "sky-op-alice", c, strlen(c));
	SKY_EXPECT_EQ(svc_plan_fleet(s, &bj, &notes, &fit, why, sizeof why), 1);
}

/* planner/svc_gc.c */
static void old_file(const char *path, long long bytes, double age_s)
{
	static char zeros[4096];
	SKY_EXPECT_EQ(sky_file_write(path, zeros, (size_t)bytes, 0600), 0);
	struct utimbuf t;
	t.actime = t.modtime = (time_t)(time(NULL) - (time_t)age_s);
	SKY_EXPECT_EQ(utime(path, &t), 0);
}

SKY_TEST(the_store_is_bounded_least_recently_used_first_and_abandoned_parts_go)
{
	svc *s = svc_fake_fresh("gc1");
	char d1[700], d2[700], p[800];
	snprintf(d1, sizeof d1, "%s/models", s->state_dir);
	snprintf(d2, sizeof d2, "%s/slices", s->state_dir);
	sky_file_mkdirs(d1, 0700);
	sky_file_mkdirs(d2, 0700);
	char a[65], b[65], c[65], e[65];
	memset(a, 'a', 64), memset(b, 'b', 64), memset(c, 'c', 64), memset(e, 'e', 64);
	a[64] = b[64] = c[64] = e[64] = '\0';
	/* models a (oldest, needed by a queued job), b (old), c (just uploaded);
	 * slice e (older than b); an abandoned .part */
	snprintf(p, sizeof p, "%s/%s.safetensors", d1, a);
	old_file(p, 1000, 5000);
	snprintf(p, sizeof p, "%s/%s.safetensors", d1, b);
	old_file(p, 1000, 3000);
	snprintf(p, sizeof p, "%s/%s.safetensors", d1, c);
	old_file(p, 1000, 10);
	snprintf(p, sizeof p, "%s/%s.safetensors", d2, e);
	old_file(p, 1000, 4000);
	snprintf(p, sizeof p, "%s/%s.part", d1, b);
	old_file(p, 100, 120);
	s->submit.n_pending = 1;
	snprintf(s->submit.pending[0].job.req.weights, sizeof s->submit.pending[0].job.req.weights,
		 "%s", a);
	((sky_service_opts *)s->o)->store_max_bytes = 2500;
	svc_gc_run(s, (double)time(NULL));
	snprintf(p, sizeof p, "%s/%s.part", d1, b);
	SKY_EXPECT(!sky_file_exists(p));
	snprintf(p, sizeof p, "%s/%s.safetensors", d1, a);
	SKY_EXPECT(sky_file_exists(p)); /* oldest, but needed */
	snprintf(p, sizeof p, "%s/%s.safetensors", d2, e);
	SKY_EXPECT(!sky_file_exists(p)); /* least recently used */
	snprintf(p, sizeof p, "%s/%s.safetensors", d1, b);
	SKY_EXPECT(!sky_file_exists(p)); /* next; then 2000 bytes: below the bound */
	snprintf(p, sizeof p, "%s/%s.safetensors", d1, c);
	SKY_EXPECT(sky_file_exists(p));
	/* unbounded: nothing more goes */
	((sky_service_opts *)s->o)->store_max_bytes = 0;
	s->submit.n_pending = 0;
	svc_gc_run(s, (double)time(NULL));
	snprintf(p, sizeof p, "%s/%s.safetensors", d1, a);
	SKY_EXPECT(sky_file_exists(p));
}
