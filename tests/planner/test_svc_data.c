/* Jobs that read a data set boards hold (planner/svc_submit.c's checks,
 * planner/svc_plan.c's placement): the stage that reads it goes on a board
 * holding it, or the job is refused with the reason. */
#include "sky_test.h"

#include "svc_fake.h"

#include "sky_jobreq.h"

#include <stdio.h>
#include <string.h>

/* Board id online with capabilities at tiny's shapes, fwd_s seconds a
 * half-layer block (b1 fast, b2 slow), holding set (NULL: none) of
 * tokenizer tok. */
static void board(svc *s, const char *id, double block_s, const char *set, uint32_t tok)
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
	b->caps.mem_bytes = 1ll << 30;
	b->caps.link_bw = 1e8;
	b->caps.link_lat_s = 1e-4;
	if (set) {
		b->caps.n_datasets = 1;
		snprintf(b->caps.datasets[0].name, sizeof b->caps.datasets[0].name, "%s", set);
		b->caps.datasets[0].rows = 100;
		b->caps.datasets[0].labels = 3;
		b->caps.datasets[0].seq = 16;
		memset(b->caps.datasets[0].sha256, 'a', 64);
		b->caps.datasets[0].tokenizer = tok;
	}
	b->has_caps = 1;
}

/* Plans doc over s's boards; the plan's stage 0 board into
 * first (or "" without a plan), the reason into why. */
static int plan(svc *s, const char *doc, char *first, size_t cap, char *why, size_t wcap)
{
	static svc_notes notes;
	svc_job j;
	sky_job_req req;
	sky_diag d;
	svc_plan_result res;
	int fit = 0;
	sky_diag_clear(&d);
	memset(&notes, 0, sizeof notes);
	first[0] = why[0] = '\0';
	if (sky_job_req_parse(doc, strlen(doc), &req, &d) != 0) {
		snprintf(why, wcap, "%.190s", d.msg);
		return -1;
	}
	memset(&j, 0, sizeof j);
	svc_job_from_req(&j, &req);
	svc_plan_fleet(s, &j, &notes, &fit, why, wcap);
	if (fit == 0)
		return -1;
	svc_plan_req rq = {.job = &j, .notes = &notes};
	/* the fake has no signer: the plan is made and filled in, then not
	 * published; what it says is read from the message built */
	memset(&s->plan.msg, 0, sizeof s->plan.msg);
	svc_plan_job(s, &rq, &res);
	snprintf(why, wcap, "%.190s", res.why);
	if (s->plan.msg.n_stages == 0)
		return -1;
	snprintf(first, cap, "%s", s->plan.msg.stages[0].board);
	return 0;
}

#define TRAIN "{\"job\":\"j1\",\"model\":\"tiny\",\"layers\":4,\"task\":\"train\",\"steps\":2,\"plaintext_frames\":true"

SKY_TEST(the_first_stage_goes_to_the_board_holding_the_set)
{
	char first[80], why[200];
	svc *s = svc_fake_fresh("data_first");
	board(s, "b1", 1e-4, NULL, 0);
	board(s, "b2", 1e-3, "train", 0x1234);
	/* without a set, the fast board leads */
	SKY_EXPECT_EQ(plan(s, TRAIN "}", first, sizeof first, why, sizeof why), 0);
	SKY_EXPECT_MSG(strcmp(first, "b1") == 0, "%s", first);
	SKY_EXPECT(s->plan.msg.train.dataset[0] == '\0');
	/* with it, the holder does, and the plan names the set */
	SKY_EXPECT_EQ(plan(s, TRAIN ",\"dataset\":\"train\",\"tokenizer\":\"00001234\"}", first,
			   sizeof first, why, sizeof why),
		      0);
	SKY_EXPECT_MSG(strcmp(first, "b2") == 0, "%s (%s)", first, why);
	SKY_EXPECT(strcmp(s->plan.msg.train.dataset, "train") == 0);
}

SKY_TEST(jobs_the_fleet_cannot_place_are_refused_with_the_reason)
{
	svc *s = svc_fake_fresh("data_refused");
	board(s, "b1", 1e-4, "dev", 0x1234);
	board(s, "b2", 1e-3, "train", 0x1234);
	board(s, "b3", 1e-3, NULL, 0);
	struct {
		const char *doc, *why;
	} k[] = {
		{TRAIN ",\"dataset\":\"nosuch\"}", "job j1 refused: no online board holds data set 'nosuch'"},
		{TRAIN ",\"dataset\":\"train\",\"tokenizer\":\"0000beef\"}",
		 "job j1 refused: data set 'train' (on b2) was prepared with tokenizer 00001234, the "
		 "model's is 0000beef"},
		{TRAIN ",\"dataset\":\"train\",\"data_owner\":\"b3\"}",
		 "job j1 refused: data owner b3 does not hold data set 'train' (held by b2)"},
		{TRAIN ",\"dataset\":\"train\",\"eval_dataset\":\"dev\"}",
		 "job j1 refused: no online board holds both data set 'train' (b2) and its eval set "
		 "'dev' (b1)"},
		{TRAIN ",\"dataset\":\"train\",\"eval_dataset\":\"dev\",\"data_owner\":\"b2\"}",
		 "job j1 refused: data owner b2 does not hold eval set 'dev' (held by b1)"},
		{TRAIN ",\"dataset\":\"train\",\"dataset_sha256\":\"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\"}",
		 "job j1 refused: data set 'train' (on b2) is not the file the job names (sha256 "
		 "bbbbbbbbbbbbbbbb...)"},
		{TRAIN ",\"dataset\":\"train\",\"dataset_sha256\":\"abc\"}", "dataset_sha256 is 64"},
		{TRAIN ",\"eval_dataset\":\"dev\"}", "eval_dataset needs dataset"},
		{TRAIN ",\"dataset\":\"a/b\"}", "a data set name is 1-64"},
		{TRAIN ",\"dataset\":\"train\",\"tokenizer\":\"xyz\"}", "tokenizer is not 8"},
	};
	for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
		sky_job_req req;
		sky_diag d;
		sky_diag_clear(&d);
		int rc = sky_job_req_parse(k[i].doc, strlen(k[i].doc), &req, &d);
		if (rc == 0)
			rc = svc_submit_check_data(s, &req, &d);
		SKY_EXPECT(rc < 0);
		SKY_EXPECT_MSG(strstr(d.msg, k[i].why) != NULL, "want '%s', got '%s'", k[i].why, d.msg);
	}
	/* an offline holder holds nothing */
	sky_registry_find(&s->reg, "b2")->state = SKY_REG_OFFLINE;
	sky_job_req req;
	sky_diag d;
	sky_diag_clear(&d);
	const char *doc = TRAIN ",\"dataset\":\"train\"}";
	SKY_EXPECT_EQ(sky_job_req_parse(doc, strlen(doc), &req, &d), 0);
	SKY_EXPECT_EQ(svc_submit_check_data(s, &req, &d), SKY_ENOTFOUND);
	/* and what passes: the set and its eval set on one board */
	board(s, "b4", 1e-3, "train", 0x1234);
	sky_reg_board *b4 = sky_registry_find(&s->reg, "b4");
	b4->caps.n_datasets = 2;
	b4->caps.datasets[1] = b4->caps.datasets[0];
	snprintf(b4->caps.datasets[1].name, sizeof b4->caps.datasets[1].name, "dev");
	doc = TRAIN ",\"dataset\":\"train\",\"eval_dataset\":\"dev\",\"tokenizer\":\"00001234\","
		    "\"dataset_sha256\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}";
	SKY_EXPECT_EQ(sky_job_req_parse(doc, strlen(doc), &req, &d), 0);
	sky_diag_clear(&d);
	SKY_EXPECT_MSG(svc_submit_check_data(s, &req, &d) == 0, "%s", d.msg);
}
