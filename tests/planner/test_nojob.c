#include "sky_test.h"

#include "sky_infermsg.h"
#include "sky_nojob.h"

#include <stdio.h>
#include <string.h>

static sky_nojob g;
static char out[SKY_INFER_RESP_MAX_BYTES], rtopic[SKY_TOPIC_BUF];
static sky_infer_resp resp;

/* One request on topic with payload p at time now; decodes the answer (if
 * any) into resp. Returns what sky_nojob_on_request returned. */
static int ask(const char *topic, const char *p, double now, int *limited)
{
	sky_diag d;
	sky_diag_clear(&d);
	memset(&resp, 0, sizeof resp);
	rtopic[0] = '\0';
	int n = sky_nojob_on_request(&g, topic, strlen(topic), p, strlen(p), now, rtopic,
				     sizeof rtopic, out, sizeof out, limited, &d);
	if (n > 0)
		SKY_EXPECT_EQ(sky_infer_resp_decode(out, (size_t)n, &resp, NULL), 0);
	return n;
}

SKY_TEST(unknown_job_is_answered_to_the_asking_client_with_its_id)
{
	int lim = 0;
	sky_nojob_init(&g);
	int n = ask("sky/v1/job/j9/req/sky-planner/sky-client-demo",
		    "{\"v\":1,\"id\":\"r17\",\"tokens\":[101,2023,102]}", 1.0, &lim);
	SKY_EXPECT(n > 0);
	SKY_EXPECT_EQ(lim, 0);
	SKY_EXPECT(strcmp(rtopic, "sky/v1/job/j9/resp/sky-client-demo/sky-planner") == 0);
	SKY_EXPECT(!resp.ok && resp.code == SKY_INFER_UNKNOWN_JOB);
	SKY_EXPECT(strcmp(resp.id, "r17") == 0 && strcmp(resp.job, "j9") == 0);
	SKY_EXPECT_MSG(strstr(resp.error, "not known") != NULL, "%s", resp.error);
	SKY_EXPECT(strstr(out, "\"code\":\"unknown_job\"") != NULL);
	/* an unreadable request, or one with a bad id, is answered with id "" */
	const char *bad[] = {"not json", "[1,2]", "{\"id\":\"a b\"}", "{\"id\":7}",
			     "{\"v\":1,\"id\":\"x\\u0000y\"}"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		n = ask("sky/v1/job/j9/req/sky-planner/sky-client-demo", bad[i], 1.0 + 0.5 * (double)i, &lim);
		SKY_EXPECT_MSG(n > 0 && resp.code == SKY_INFER_UNKNOWN_JOB && resp.id[0] == '\0',
			       "%s: n %d id '%s'", bad[i], n, resp.id);
	}
	/* not a request topic */
	SKY_EXPECT_EQ(ask("sky/v1/job/j9/resp/sky-client-demo", "{}", 9.0, &lim), SKY_EINVAL);
	SKY_EXPECT_EQ(ask("sky/v1/job/j9/req/sky-planner/a+b", "{}", 9.0, &lim), SKY_EINVAL);
	SKY_EXPECT_EQ(ask("sky/v1/job/j9/plan", "{}", 9.0, &lim), SKY_EINVAL);
	SKY_EXPECT_EQ(g.answered, 6);
}

SKY_TEST(serving_jobs_are_left_to_their_first_stage_others_say_why)
{
	int lim = 0;
	sky_nojob_init(&g);
	const char *req = "{\"v\":1,\"id\":\"r1\",\"tokens\":[1]}";
	SKY_EXPECT_EQ(sky_nojob_note(&g, "serve1", SKY_NOJOB_SERVING), 0);
	SKY_EXPECT_EQ(sky_nojob_note(&g, "train1", SKY_NOJOB_TRAINING), 0);
	SKY_EXPECT_EQ(sky_nojob_note(&g, "wait1", SKY_NOJOB_QUEUED), 0);
	SKY_EXPECT_EQ(sky_nojob_note(&g, "a/b", SKY_NOJOB_SERVING), SKY_EINVAL);
	SKY_EXPECT_EQ(ask("sky/v1/job/serve1/req/sky-planner/sky-client-a", req, 1.0, &lim), 0);
	SKY_EXPECT_EQ(lim, 0);
	SKY_EXPECT_EQ(g.silent, 1);
	SKY_EXPECT(ask("sky/v1/job/train1/req/sky-planner/sky-client-a", req, 1.0, &lim) > 0);
	SKY_EXPECT_MSG(strstr(resp.error, "not a serving job") != NULL, "%s", resp.error);
	SKY_EXPECT(ask("sky/v1/job/wait1/req/sky-planner/sky-client-a", req, 1.0, &lim) > 0);
	SKY_EXPECT_MSG(strstr(resp.error, "queued") != NULL, "%s", resp.error);
	/* a cancelled serving job: its boards stop, the planner answers */
	SKY_EXPECT_EQ(sky_nojob_note(&g, "wait1", SKY_NOJOB_CANCELLED), 0);
	SKY_EXPECT(ask("sky/v1/job/wait1/req/sky-planner/sky-client-a", req, 1.0, &lim) > 0);
	SKY_EXPECT_MSG(strstr(resp.error, "job wait1 was cancelled by its operator") != NULL, "%s",
		       resp.error);
	SKY_EXPECT_EQ(resp.code, SKY_INFER_UNKNOWN_JOB);
	/* a re-plan changes what the job is */
	sky_nojob_note(&g, "serve1", SKY_NOJOB_TRAINING);
	SKY_EXPECT(ask("sky/v1/job/serve1/req/sky-planner/sky-client-a", req, 1.0, &lim) > 0);
	sky_nojob_note(&g, "train1", SKY_NOJOB_SERVING);
	SKY_EXPECT_EQ(ask("sky/v1/job/train1/req/sky-planner/sky-client-a", req, 1.0, &lim), 0);
	/* a full table keeps every serving job: non-serving ones give way */
	sky_nojob_init(&g);
	char job[32];
	for (int i = 0; i < SKY_NOJOB_MAX_JOBS; i++) {
		snprintf(job, sizeof job, "s%d", i);
		sky_nojob_note(&g, job, i % 2 ? SKY_NOJOB_SERVING : SKY_NOJOB_TRAINING);
	}
	for (int i = 0; i < SKY_NOJOB_MAX_JOBS; i++) {
		snprintf(job, sizeof job, "new%d", i);
		sky_nojob_note(&g, job, SKY_NOJOB_SERVING);
	}
	int serving = 0;
	for (int i = 0; i < SKY_NOJOB_MAX_JOBS; i++) {
		snprintf(job, sizeof job, "s%d", i);
		serving += sky_nojob_kind_of(&g, job) == SKY_NOJOB_SERVING;
	}
	SKY_EXPECT_EQ(serving, SKY_NOJOB_MAX_JOBS / 2);
	SKY_EXPECT_EQ(sky_nojob_kind_of(&g, "new0"), SKY_NOJOB_SERVING);
	SKY_EXPECT_EQ(sky_nojob_kind_of(&g, "s0"), SKY_NOJOB_UNKNOWN);
}

SKY_TEST(a_flood_is_dropped_unread_past_the_rate_limit)
{
	int lim = 0, answered = 0, limited = 0;
	sky_nojob_init(&g);
	/* one client, 1000 requests in one second: its burst and a second of
	 * its rate are answered, nothing more */
	for (int i = 0; i < 1000; i++) {
		int n = ask("sky/v1/job/nope/req/sky-planner/sky-client-flood", "{\"id\":\"f\"}",
			    10.0 + i / 1000.0, &lim);
		answered += n > 0;
		limited += lim;
	}
	SKY_EXPECT_MSG(answered >= SKY_NOJOB_CLIENT_BURST &&
			       answered <= SKY_NOJOB_CLIENT_BURST + (int)SKY_NOJOB_CLIENT_PER_S + 1,
		       "%d answered", answered);
	SKY_EXPECT_EQ(answered + limited, 1000);
	SKY_EXPECT_EQ(g.limited, limited);
	/* another client is not held back by the first one's flood */
	SKY_EXPECT(ask("sky/v1/job/nope/req/sky-planner/sky-client-other", "{\"id\":\"o\"}", 11.0, &lim) > 0);
	/* 200 clients at once: the bucket for all of them bounds the answers */
	sky_nojob_init(&g);
	answered = 0;
	char topic[SKY_TOPIC_BUF];
	for (int i = 0; i < 2000; i++) {
		snprintf(topic, sizeof topic, "sky/v1/job/nope/req/sky-planner/sky-client-c%d", i % 200);
		answered += ask(topic, "{\"id\":\"x\"}", 20.0 + i / 2000.0, &lim) > 0;
	}
	SKY_EXPECT_MSG(answered >= SKY_NOJOB_ALL_BURST &&
			       answered <= SKY_NOJOB_ALL_BURST + (int)SKY_NOJOB_ALL_PER_S + 1,
		       "%d answered", answered);
	/* the limit refills: later on, an answer again */
	SKY_EXPECT(ask("sky/v1/job/nope/req/sky-planner/sky-client-c1", "{\"id\":\"x\"}", 40.0, &lim) > 0);
	/* an oversize request is answered without being parsed: id "" */
	static char big[SKY_INFER_REQ_MAX_BYTES + 64];
	memset(big, ' ', sizeof big - 1);
	memcpy(big, "{\"id\":\"big\",\"tokens\":[1]}", 25);
	SKY_EXPECT(ask("sky/v1/job/nope/req/sky-planner/sky-client-big", big, 50.0, &lim) > 0);
	SKY_EXPECT(resp.code == SKY_INFER_UNKNOWN_JOB && resp.id[0] == '\0');
}
