/* Stage replicas through the planner service (planner/svc_plan.c,
 * svc_follow.c, svc_authz.c, svc_calib.c, registry.c, jobstat.c): a
 * training job over five equal boards that cannot each hold the model is
 * planned as a pipeline whose stages run on several boards; the plan
 * message carries the replicas and their routes; the follow table, the
 * registry and the metrics and checkpoint checks know every replica; a
 * replica gone re-plans the job; --no-replicas plans as before. */
#include "sky_metrics.h"
#include "sky_test.h"

#include "svc_fake.h"

#include "sky_jobreq.h"

#include <stdio.h>
#include <string.h>

/* Board id online with capabilities at tiny's shapes: block_s seconds a
 * half-layer forward (twice that backward), mem bytes. */
static void board(svc *s, const char *id, double block_s, int64_t mem)
{
	sky_reg_board *b = svc_fake_board(s, id, SKY_REG_ONLINE);
	sky_model_cfg m;
	sky_model_preset("tiny", &m);
	memset(&b->caps, 0, sizeof b->caps);
	snprintf(b->caps.id, sizeof b->caps.id, "%s", id);
	snprintf(b->caps.shape.name, sizeof b->caps.shape.name, "tiny");
	b->caps.shape.hidden = m.hidden;
	b->caps.shape.heads = m.heads;
	b->caps.shape.ffn = m.ffn;
	b->caps.shape.seq = m.seq;
	b->caps.shape.batch = m.batch;
	b->caps.fp32 = (sky_caps_times){block_s, block_s, 2 * block_s, 2 * block_s};
	b->caps.threads = 1;
	b->caps.keepalive_s = 2;
	b->caps.mem_bytes = mem;
	b->caps.link_bw = 1e9;
	b->caps.link_lat_s = 3e-4;
	b->has_caps = 1;
}

static svc_job g_job;
static svc_notes g_notes;

/* Plans doc over s's boards into s->plan.msg (the fake has no signer: the
 * message is built, then not published). Returns its stage count. */
static int plan(svc *s, const char *doc)
{
	sky_job_req req;
	sky_diag d;
	svc_plan_result res;
	char why[200];
	int fit = 0;
	sky_diag_clear(&d);
	memset(&g_notes, 0, sizeof g_notes);
	if (sky_job_req_parse(doc, strlen(doc), &req, &d) != 0)
		return -1;
	memset(&g_job, 0, sizeof g_job);
	svc_job_from_req(&g_job, &req);
	svc_plan_fleet(s, &g_job, &g_notes, &fit, why, sizeof why);
	if (fit == 0)
		return -1;
	svc_plan_req rq = {.job = &g_job, .notes = &g_notes};
	memset(&s->plan.msg, 0, sizeof s->plan.msg);
	svc_plan_job(s, &rq, &res);
	return s->plan.msg.n_stages;
}

/* 4 layers, 2 micro-batches of 8: 16 sequences a step */
#define JOB "{\"job\":\"jr\",\"model\":\"tiny\",\"layers\":4,\"micro_batches\":2,\"task\":\"train\"," \
	    "\"steps\":4,\"plaintext_frames\":true,\"checkpoint_every\":2"

static svc *five_boards(const char *name)
{
	svc *s = svc_fake_fresh(name);
	char id[8];
	for (int i = 1; i <= 5; i++) {
		snprintf(id, sizeof id, "b%d", i);
		board(s, id, 1e-3, 2ll << 20); /* 2 MiB: a replica of the whole model does not fit */
	}
	return s;
}

SKY_TEST(a_training_job_is_planned_with_stage_replicas_and_the_message_routes_them)
{
	svc *s = five_boards("rep_plan");
	SKY_EXPECT(plan(s, JOB ",\"choose_micro\":true}") >= 2);
	const sky_planmsg *p = &s->plan.msg;
	SKY_EXPECT_MSG(p->n_reps > 0, "no replicas in a plan of %d stages", p->n_stages);
	/* the global batch kept: B x M = 8 x 2 */
	SKY_EXPECT_EQ(p->shape.batch * p->micro_batches, 16);
	int boards = 0;
	for (int k = 0; k < p->n_stages; k++) {
		int n = sky_planmsg_n_replicas(p, k), runs[SKY_HPLAN_MAX_REPS] = {0};
		boards += n;
		for (int mb = 0; mb < p->micro_batches; mb++) {
			int r = sky_planmsg_route(p, k, mb);
			SKY_EXPECT(r >= 0 && r < n);
			runs[r]++;
		}
		for (int r = 0; r < n; r++) /* every replica runs some */
			SKY_EXPECT_MSG(runs[r] > 0, "stage %d replica %d runs none", k, r);
	}
	SKY_EXPECT_EQ(boards, 5);
	/* it encodes, and decodes to the same replicas and routes */
	static char buf[1 << 16];
	static sky_planmsg back;
	sky_diag d;
	sky_diag_clear(&d);
	s->plan.msg.epoch = 1;
	int n = sky_planmsg_encode(p, buf, sizeof buf, &d);
	SKY_EXPECT_MSG(n > 0, "%s", d.msg);
	SKY_EXPECT_EQ(sky_planmsg_decode(buf, (size_t)n, &back, &d), 0);
	SKY_EXPECT_EQ(back.n_reps, p->n_reps);
	for (int k = 0; k < p->n_stages; k++)
		for (int mb = 0; mb < p->micro_batches; mb++)
			SKY_EXPECT_EQ(sky_planmsg_route(&back, k, mb), sky_planmsg_route(p, k, mb));
	SKY_EXPECT(s->plan.use_hyb);
}

/* By default replicas keep the job's micro-batch size: the cost model is
 * linear in B, and its choice of smaller ones ran slower than predicted. */
SKY_TEST(replicas_keep_the_jobs_micro_batch_size_unless_asked)
{
	svc *s = five_boards("rep_keep_b");
	SKY_EXPECT(plan(s, JOB "}") >= 1);
	const sky_planmsg *p = &s->plan.msg;
	SKY_EXPECT_EQ(p->shape.batch, 8);
	SKY_EXPECT_EQ(p->micro_batches, 2);
	s = five_boards("rep_choose_b");
	SKY_EXPECT(plan(s, JOB ",\"choose_micro\":true}") >= 1);
	SKY_EXPECT_MSG(s->plan.msg.shape.batch != 8, "the planner kept B = %d", s->plan.msg.shape.batch);
	SKY_EXPECT_EQ(s->plan.msg.shape.batch * s->plan.msg.micro_batches, 16);
	sky_job_req back;
	sky_diag d;
	sky_diag_clear(&d);
	const char *bad = JOB ",\"choose_micro\":1}";
	SKY_EXPECT_EQ(sky_job_req_parse(bad, strlen(bad), &back, &d), SKY_EFORMAT);
	SKY_EXPECT_MSG(strstr(d.msg, "'choose_micro' must be true or false") != NULL, "%s", d.msg);
}

SKY_TEST(no_replicas_plans_a_pipeline_at_the_jobs_micro_batching)
{
	svc *s = five_boards("rep_none");
	SKY_EXPECT(plan(s, JOB ",\"replicas\":false}") >= 2);
	const sky_planmsg *p = &s->plan.msg;
	SKY_EXPECT_EQ(p->n_reps, 0);
	SKY_EXPECT_EQ(p->shape.batch, 8);
	SKY_EXPECT_EQ(p->micro_batches, 2);
	SKY_EXPECT(!s->plan.use_hyb);
	/* and the request says so when it is encoded again */
	char out[2048];
	SKY_EXPECT(sky_job_req_encode(&g_job.req, out, sizeof out) > 0);
	SKY_EXPECT_MSG(strstr(out, "\"replicas\":false") != NULL, "%s", out);
	sky_job_req back;
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_job_req_parse(out, strlen(out), &back, &d), 0);
	SKY_EXPECT_EQ(back.no_replicas, 1);
	/* not a boolean: refused with the field named */
	const char *bad = JOB ",\"replicas\":1}";
	SKY_EXPECT_EQ(sky_job_req_parse(bad, strlen(bad), &back, &d), SKY_EFORMAT);
	SKY_EXPECT_MSG(strstr(d.msg, "'replicas'") != NULL, "%s", d.msg);
}

/* The job planned on five boards, followed and assigned as if published. */
static svc *followed(const char *name, run_job **out)
{
	svc *s = five_boards(name);
	plan(s, JOB ",\"choose_micro\":true}");
	sky_planmsg *p = &s->plan.msg;
	p->epoch = 5;
	svc_plan_req rq = {.job = &g_job, .notes = &g_notes};
	svc_follow_plan(s, &rq, p, "env", 3, 0.1);
	sky_registry_assign(&s->reg, p);
	*out = svc_follow_find(s, "jr");
	return s;
}

/* A replica of a stage with replicas in p: its board, stage and replica index. */
static const char *a_replica(const sky_planmsg *p, int *stage, int *rep)
{
	for (int k = 0; k < p->n_stages; k++)
		if (sky_planmsg_n_replicas(p, k) > 1) {
			*stage = k;
			*rep = 1;
			return sky_planmsg_replica_board(p, k, 1);
		}
	return NULL;
}

SKY_TEST(the_follow_table_and_the_registry_know_every_replica)
{
	run_job *r = NULL;
	svc *s = followed("rep_follow", &r);
	const sky_planmsg *p = &s->plan.msg;
	SKY_EXPECT(r != NULL);
	if (!r)
		return;
	SKY_EXPECT_EQ(svc_follow_boards(r), 5);
	SKY_EXPECT_EQ(r->n_rep, p->n_reps);
	SKY_EXPECT_EQ(r->micro_batches, p->micro_batches);
	int k = -1, rep = 0;
	const char *rb = a_replica(p, &k, &rep);
	SKY_EXPECT(rb != NULL);
	if (!rb)
		return;
	const sky_reg_board *b = sky_registry_find(&s->reg, rb);
	SKY_EXPECT(b && !strcmp(b->job, "jr") && b->stage == k && b->replica == rep);
	/* shares as the route counts them, summing to M per stage */
	int sum = r->share0[k];
	for (int i = 0; i < r->n_rep; i++)
		sum += r->rep_stage[i] == k ? r->rep_share[i] : 0;
	SKY_EXPECT_EQ(sum, p->micro_batches);
	/* kept in the state file and read back (a restarted planner) */
	static sky_jobstate js;
	sky_diag d;
	sky_diag_clear(&d);
	char path[700];
	sky_jobstate_path(s->state_dir, "jr", path, sizeof path);
	SKY_EXPECT_EQ(sky_jobstate_load(path, &js, &d), 0);
	SKY_EXPECT_EQ(js.n_rep, r->n_rep);
	SKY_EXPECT_EQ(js.micro_batches, p->micro_batches);
	SKY_EXPECT_EQ(js.share0[k], r->share0[k]);
	SKY_EXPECT(js.n_rep > 0 && !strcmp(js.rep_board[0], r->rep_board[0]));
}

SKY_TEST(a_replica_may_send_its_stages_metrics_and_checkpoint_blocks_only)
{
	run_job *r = NULL;
	svc *s = followed("rep_authz", &r);
	const sky_planmsg *p = &s->plan.msg;
	int k = -1, rep = 0;
	const char *rb = a_replica(p, &k, &rep);
	SKY_EXPECT(r && rb);
	if (!r || !rb)
		return;
	char m[256];
	snprintf(m, sizeof m, "{\"v\":1,\"job\":\"jr\",\"epoch\":5,\"stage\":%d,\"step\":1,\"steps\":4}",
		 k);
	SKY_EXPECT_EQ(svc_authz_on_metrics(s, "jr", rb, (const unsigned char *)m, strlen(m)), 0);
	int row = -1;
	for (int i = 0; i < s->jobs.n; i++)
		if (!strcmp(s->jobs.row[i].board, rb))
			row = i;
	SKY_EXPECT(row >= 0 && s->jobs.row[row].stage == k && s->jobs.row[row].replica == rep);
	/* a row each: the stage's own board's does not overwrite it */
	SKY_EXPECT_EQ(svc_authz_on_metrics(s, "jr", p->stages[k].board, (const unsigned char *)m,
					   strlen(m)),
		      0);
	SKY_EXPECT(row >= 0 && !strcmp(s->jobs.row[row].board, rb));
	static char out[1 << 16];
	SKY_EXPECT(sky_jobstat_to_json(&s->jobs, out, sizeof out) > 0);
	char want[96];
	snprintf(want, sizeof want, "\"board\":\"%s\",\"step\":1,\"replica\":%d,", rb, rep);
	SKY_EXPECT_MSG(strstr(out, want) != NULL, "%s not in %s", want, out);
	/* an outsider's metrics are refused */
	SKY_EXPECT_EQ(svc_authz_on_metrics(s, "jr", "bx", (const unsigned char *)m, strlen(m)), -1);
	/* a checkpoint image of its stage's blocks passes the sender check;
	 * another stage's blocks do not */
	int lo = p->stages[k].first == 0 ? 0 : 1 + p->stages[k].first;
	int other = k == 0 ? 1 : 0;
	int olo = p->stages[other].first == 0 ? 0 : 1 + p->stages[other].first;
	for (int pass = 0; pass < 2; pass++) {
		char hdr[160], img[256];
		int hl = snprintf(hdr, sizeof hdr,
				  "{\"__metadata__\":{\"sky_blk0\":\"%d\",\"sky_nblk\":\"1\"}}",
				  pass ? olo : lo);
		for (int i = 0; i < 8; i++)
			img[i] = (char)((uint64_t)hl >> (8 * i));
		memcpy(img + 8, hdr, (size_t)hl);
		SKY_EXPECT_EQ(svc_authz_ckpt(s, "jr", rb, (const unsigned char *)img, 8 + (size_t)hl),
			      pass ? 0 : 1);
	}
	SKY_EXPECT_EQ(sky_jobstat_refused_n(&s->jobs, "jr", "ckpt_not_holder"), 1);
}

/* A stage's metrics count its drops since its epoch began; the Prometheus
 * counter adds what each report adds, and nothing for an outsider's. */
SKY_TEST(a_stages_drops_feed_the_frames_dropped_counter)
{
	run_job *r = NULL;
	svc *s = followed("rep_drops", &r);
	const sky_planmsg *p = &s->plan.msg;
	const char *b0 = p->stages[0].board;
	static const char *const reports[] = {
		"{\"v\":1,\"job\":\"jr\",\"stage\":0,\"step\":1,\"drops\":{\"replica\":2}}",
		"{\"v\":1,\"job\":\"jr\",\"stage\":0,\"step\":2,\"drops\":{\"replica\":5,\"epoch\":1}}",
		"{\"v\":1,\"job\":\"jr\",\"stage\":0,\"step\":3,\"drops\":{\"replica\":5,\"epoch\":1}}",
	};
	for (size_t i = 0; i < 3; i++)
		SKY_EXPECT_EQ(svc_authz_on_metrics(s, "jr", b0, (const unsigned char *)reports[i],
						   strlen(reports[i])),
			      0);
	/* an outsider's drops are not counted */
	SKY_EXPECT_EQ(svc_authz_on_metrics(s, "jr", "bx", (const unsigned char *)reports[1],
					   strlen(reports[1])),
		      -1);
	static char out[1 << 16];
	SKY_EXPECT(sky_metrics_render(sky_metrics_default(), NULL, 1, out, sizeof out) > 0);
	SKY_EXPECT_MSG(strstr(out, "sky_frames_dropped_total{job=\"jr\",reason=\"replica\"} 5\n"),
		       "%s", strstr(out, "sky_frames_dropped") ? strstr(out, "sky_frames_dropped") : out);
	SKY_EXPECT(strstr(out, "sky_frames_dropped_total{job=\"jr\",reason=\"epoch\"} 1\n") != NULL);
}

SKY_TEST(a_replica_gone_offline_re_plans_the_job_and_done_counts_every_board)
{
	run_job *r = NULL;
	svc *s = followed("rep_gone", &r);
	const sky_planmsg *p = &s->plan.msg;
	int k = -1, rep = 0;
	const char *rp = a_replica(p, &k, &rep);
	SKY_EXPECT(r && rp);
	if (!r || !rp)
		return;
	char rb[SKY_TOPIC_SEGMENT_MAX + 1]; /* (a re-plan builds s->plan.msg again) */
	snprintf(rb, sizeof rb, "%s", rp);
	/* every stage's own board done is not the job done: its replicas run too */
	for (int i = 0; i < p->n_stages; i++) {
		const char *d = "{\"v\":1,\"job\":\"jr\",\"epoch\":5,\"step\":4,\"steps\":4,\"done\":true}";
		sky_jobstat_on_metrics(&s->jobs, "jr", p->stages[i].board, i, 5, d, strlen(d), 1.0);
	}
	svc_follow_tick(s, 2.0);
	SKY_EXPECT(svc_follow_find(s, "jr") != NULL);
	/* the replica offline: the job is re-planned (without a signer here
	 * the new plan cannot go out, so it is paused, naming the replica) */
	int B = p->shape.batch, M = p->micro_batches;
	SKY_EXPECT(p->train.exact_sum);
	/* (the boards left with room for the whole model, where a first plan
	 * would take other micro-batches, 16 of 1) */
	for (int i = 0; i < s->reg.n; i++)
		s->reg.b[i].caps.mem_bytes = 4ll << 20;
	sky_reg_board *b = sky_registry_find(&s->reg, rb);
	b->state = SKY_REG_OFFLINE;
	svc_follow_tick(s, 3.0);
	/* the new plan (built, not published here) leaves the replica out and
	 * keeps the running plan's micro-batching and fixed-point sums, so the
	 * steps it redoes are the same sums of the same micro-batches */
	SKY_EXPECT(s->plan.msg.n_stages > 0 && sky_planmsg_find_replica(&s->plan.msg, rb, NULL) < 0);
	SKY_EXPECT_EQ(s->plan.msg.shape.batch, B);
	SKY_EXPECT_EQ(s->plan.msg.micro_batches, M);
	SKY_EXPECT(s->plan.msg.train.exact_sum);
	r = svc_follow_find(s, "jr");
	SKY_EXPECT(r && r->replan.paused);
	char want[160];
	snprintf(want, sizeof want, "board %s (stage %d, a replica) offline", rb, k);
	SKY_EXPECT_MSG(r && strstr(r->replan.pause_why, want) != NULL, "%s", r ? r->replan.pause_why : "");
}
