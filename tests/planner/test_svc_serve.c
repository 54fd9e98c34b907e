/* Serving jobs in the service (planner/svc_serve.c): requests for a job
 * that does not serve answered unknown_job, a stage's ready topic, and
 * displaced serving jobs; with a recording publisher (svc_fake.h). */
#include "sky_test.h"

#include "svc_fake.h"

#include <stdio.h>
#include <string.h>

static void request(svc *s, const char *topic, const char *p)
{
	svc_serve_on_req(s, topic, strlen(topic), (const unsigned char *)p, strlen(p));
}

SKY_TEST(a_request_for_a_job_that_does_not_serve_is_answered_unknown_job)
{
	svc *s = svc_fake_fresh("serve_unknown");
	request(s, "sky/v1/job/j9/req/sky-planner/sky-client-demo", "{\"v\":1,\"id\":\"r1\",\"tokens\":[1]}");
	const svc_fake_pub *p = svc_fake_last("sky/v1/job/j9/resp/sky-client-demo/sky-planner");
	SKY_EXPECT_MSG(p && strstr(p->data, "\"code\":\"unknown_job\"") && strstr(p->data, "\"r1\""),
		       "%s", p ? p->data : "(none)");
	SKY_EXPECT_EQ(s->nojob.answered, 1);
	/* a job that serves is left to its first stage */
	sky_nojob_note(&s->nojob, "j8", SKY_NOJOB_SERVING);
	request(s, "sky/v1/job/j8/req/sky-planner/sky-client-demo", "{\"v\":1,\"id\":\"r2\",\"tokens\":[1]}");
	SKY_EXPECT(svc_fake_last("sky/v1/job/j8/resp/sky-client-demo/sky-planner") == NULL);
	SKY_EXPECT_EQ(svc_fake_n_pubs, 1);
}

SKY_TEST(a_stage_ready_topic_names_its_job_and_stage)
{
	char job[SKY_TOPIC_SEGMENT_MAX + 1], who[SKY_TOPIC_SEGMENT_MAX + 1];
	int k = -1;
	SKY_EXPECT_EQ(svc_serve_parse_ready("sky/v1/job/j1/stage/2/ready/b7", job, sizeof job, &k,
					    who, sizeof who),
		      0);
	SKY_EXPECT(strcmp(job, "j1") == 0 && k == 2 && strcmp(who, "b7") == 0);
	const char *bad[] = {"sky/v1/job/j1/stage/x/ready/b7", "sky/v1/job/j1/stage/2/readyx/b7",
			     "sky/v1/job/j1/stage/-1/ready/b7", "sky/v1/board/b1/stage/2/ready/b7",
			     "sky/v1/job/a+b/stage/2/ready/b7", "sky/v1/job/j1/stage/2/ready",
			     "sky/v1/job/j1/stage/2/ready/b7/x", "sky/v1/job/j1/stage/2/ready/a+b",
			     "sky/v1/site/core/job/j1/stage/2/ready/b7"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		SKY_EXPECT_MSG(svc_serve_parse_ready(bad[i], job, sizeof job, &k, who, sizeof who) ==
				       SKY_EINVAL,
			       "%s", bad[i]);
}

SKY_TEST(a_serving_job_is_displaced_once_every_board_holds_another_job)
{
	svc *s = svc_fake_fresh("serve_displaced");
	sky_reg_board *b = svc_fake_board(s, "b1", SKY_REG_ONLINE);
	run_job *r = svc_fake_follow(s, "{\"job\":\"s1\",\"model\":\"tiny\"}", "b1", 0);
	SKY_EXPECT(b && r);
	if (!b || !r)
		return;
	SKY_EXPECT_EQ(svc_serve_displaced(s, r), 0); /* b1 holds nothing */
	snprintf(b->job, sizeof b->job, "s1");
	SKY_EXPECT_EQ(svc_serve_displaced(s, r), 0);
	snprintf(b->job, sizeof b->job, "s2");
	SKY_EXPECT_EQ(svc_serve_displaced(s, r), 1);
}
