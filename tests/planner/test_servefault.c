/* The planner's table of serving requests without an answer, and their
 * replay after a re-plan (planner/servefault.c): what is replayed (only
 * unanswered requests that came before the new first stage subscribed,
 * once every stage is ready, oldest first, the bytes as received), the
 * pace (at most the window unanswered), a second fault replaying again,
 * the time lost to the first answer, and the bounds (entries, bytes, age)
 * with each unanswered request let go counted by its reason. */
#include "sky_test.h"

#include "sky_servefault.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static sky_servefault g_f;

#define NPUB 256
static struct {
	char topic[SKY_TOPIC_BUF];
	char data[256];
	size_t len;
} g_pub[NPUB];
static int g_npub, g_fail_pub;
static long g_dropped[SKY_SF_NREASONS];

static int f_pub(void *ctx, const char *topic, const void *data, size_t len)
{
	if (g_fail_pub || g_npub == NPUB)
		return SKY_ENET;
	snprintf(g_pub[g_npub].topic, sizeof g_pub[g_npub].topic, "%s", topic);
	size_t n = len < sizeof g_pub[g_npub].data ? len : sizeof g_pub[g_npub].data - 1;
	memcpy(g_pub[g_npub].data, data, n);
	g_pub[g_npub].data[n] = '\0';
	g_pub[g_npub++].len = len;
	return 0;
}

static void f_drop(void *ctx, const sky_sf_job *j, const sky_sf_req *r, sky_sf_reason why)
{
	g_dropped[why]++;
}

static char g_buf[SKY_SF_MAX_REQ_BYTES + 16];

static const char *req_json(const char *id)
{
	snprintf(g_buf, sizeof g_buf, "{\"v\":1,\"id\":\"%s\",\"tokens\":[1,2,3]}", id);
	return g_buf;
}

static int req(const char *job, const char *client, const char *id, double now)
{
	const char *p = req_json(id);
	return sky_servefault_on_req(&g_f, job, client, p, strlen(p), now, f_drop, NULL);
}

static int resp(const char *job, const char *client, const char *id, long long epoch, double now,
		double *lost)
{
	char b[200];
	int n = epoch ? snprintf(b, sizeof b,
				 "{\"v\":1,\"id\":\"%s\",\"ok\":true,\"job\":\"%s\",\"epoch\":%lld,"
				 "\"logits\":[0.5,-1]}",
				 id, job, epoch)
		      : snprintf(b, sizeof b,
				 "{\"v\":1,\"id\":\"%s\",\"ok\":false,\"job\":\"%s\",\"code\":\"busy\","
				 "\"error\":\"full\"}",
				 id, job);
	/* from the last stage's board (b<n-1>, as follow() names them) */
	const sky_sf_job *j = sky_servefault_job(&g_f, job);
	char last[16];
	snprintf(last, sizeof last, "b%d", j ? j->n_stages - 1 : 0);
	return sky_servefault_on_resp(&g_f, job, client, last, b, (size_t)n, now, lost);
}

static void ready(const char *job, int k, long long epoch)
{
	char b[64];
	int n = snprintf(b, sizeof b, "{\"epoch\":%lld,\"board\":\"b%d\"}", epoch, k);
	char who[16];
	snprintf(who, sizeof who, "b%d", k);
	sky_servefault_on_ready(&g_f, job, k, who, b, (size_t)n);
}

/* sky_servefault_follow, then the plan's boards b0, b1, ... */
static int follow(const char *job, long long epoch, int n, int queue, int replay, double fault)
{
	int rc = sky_servefault_follow(&g_f, job, epoch, n, queue, replay, fault);
	if (rc)
		return rc;
	const char *b[] = {"b0", "b1", "b2", "b3", "b4", "b5", "b6", "b7"};
	return sky_servefault_boards(&g_f, job, b, n);
}

static int pump(double now, int *fin)
{
	return sky_servefault_pump(&g_f, now, f_pub, NULL, f_drop, fin);
}

static void reset(void)
{
	sky_servefault_init(&g_f);
	g_npub = g_fail_pub = 0;
	memset(g_dropped, 0, sizeof g_dropped);
}

SKY_TEST(unanswered_requests_before_the_new_first_stage_are_replayed_once_every_stage_is_ready)
{
	reset();
	double lost = -1;
	int fin;
	SKY_EXPECT_EQ(follow("j1", 5, 3, 64, 0, 0), 0);
	SKY_EXPECT_EQ(req("j1", "sky-client-a", "r1", 1.0), 1);
	SKY_EXPECT_EQ(req("j1", "sky-client-b", "r2", 1.1), 1);
	SKY_EXPECT_EQ(req("j1", "sky-client-a", "r3", 1.2), 1);
	SKY_EXPECT_EQ(req("j1", "sky-client-a", "r3", 1.3), 0); /* a copy: tracked once */
	SKY_EXPECT_EQ(req("j9", "sky-client-a", "r1", 1.3), 0); /* not a followed job */
	SKY_EXPECT_EQ(sky_servefault_on_req(&g_f, "j1", "sky-client-a", "{\"v\":1}", 7, 1.3, f_drop,
					    NULL),
		      0); /* no id: the first stage answers it */
	/* an answer of the first plan: not a re-plan's, no time lost */
	SKY_EXPECT_EQ(resp("j1", "sky-client-b", "r2", 5, 1.5, &lost), 0);
	SKY_EXPECT_EQ(pump(2.0, &fin), 0); /* no fault: nothing to replay */

	/* a board dies at 10 s; the re-plan's epoch 6 */
	SKY_EXPECT_EQ(follow("j1", 6, 3, 64, 1, 10.0), 0);
	ready("j1", 1, 6);
	ready("j1", 0, 5); /* an old epoch's ready: not counted */
	SKY_EXPECT_EQ(pump(11.0, &fin), 0);
	SKY_EXPECT_EQ(req("j1", "sky-client-a", "r4", 11.1), 1); /* before stage 0 subscribed */
	ready("j1", 0, 6);
	SKY_EXPECT_EQ(req("j1", "sky-client-a", "r5", 11.2), 1); /* after: the new stage 0 has it */
	SKY_EXPECT_EQ(pump(11.3, &fin), 0);                      /* stage 2 not ready yet */
	SKY_EXPECT_EQ(fin, -1);
	ready("j1", 2, 6);
	SKY_EXPECT_EQ(pump(11.4, &fin), 3);
	SKY_EXPECT_EQ(fin, 0);
	SKY_EXPECT(strcmp(g_pub[0].topic, "sky/v1/job/j1/replay/b0/sky-client-a") == 0);
	SKY_EXPECT(strcmp(g_pub[0].data, req_json("r1")) == 0);
	SKY_EXPECT(strcmp(g_pub[1].data, req_json("r3")) == 0);
	SKY_EXPECT(strcmp(g_pub[2].data, req_json("r4")) == 0);
	SKY_EXPECT_EQ(pump(11.5, &fin), 0); /* once */
	sky_sf_job *j = sky_servefault_job(&g_f, "j1");
	SKY_EXPECT(j && j->replayed == 3 && j->replayed_epoch == 3 && j->tracked == 5);
	/* the first answer under epoch 6 closes the time lost; later ones do not */
	SKY_EXPECT_EQ(resp("j1", "sky-client-a", "r5", 6, 12.25, &lost), 1);
	SKY_EXPECT(lost > 2.24 && lost < 2.26);
	SKY_EXPECT_EQ(resp("j1", "sky-client-a", "r1", 6, 12.5, &lost), 0);
	SKY_EXPECT_EQ(j->answered, 3);

	/* a second fault before r3 and r4 are answered: replayed again under
	 * epoch 7; r1 (answered) is not */
	g_npub = 0;
	SKY_EXPECT_EQ(follow("j1", 7, 2, 64, 1, 13.0), 0);
	ready("j1", 0, 7);
	ready("j1", 1, 7);
	SKY_EXPECT_EQ(pump(14.0, &fin), 2);
	SKY_EXPECT(strcmp(g_pub[0].data, req_json("r3")) == 0);
	SKY_EXPECT(strcmp(g_pub[1].data, req_json("r4")) == 0);
	/* a refusal is an answer too */
	SKY_EXPECT_EQ(resp("j1", "sky-client-a", "r3", 0, 14.5, &lost), 0);
	SKY_EXPECT_EQ(j->answered, 4);
	SKY_EXPECT_EQ(g_dropped[SKY_SF_EVICTED] + g_dropped[SKY_SF_EXPIRED], 0);
}

SKY_TEST(replays_are_paced_by_the_window_and_a_failed_publish_is_tried_again)
{
	reset();
	int fin;
	double lost;
	SKY_EXPECT_EQ(follow("j2", 1, 1, 4, 0, 0), 0); /* window 2 */
	char id[16];
	for (int i = 0; i < 5; i++) {
		snprintf(id, sizeof id, "q%d", i);
		SKY_EXPECT_EQ(req("j2", "sky-client-a", id, 1.0 + i), 1);
	}
	SKY_EXPECT_EQ(follow("j2", 2, 1, 4, 1, 9.0), 0);
	ready("j2", 0, 2);
	g_fail_pub = 1;
	SKY_EXPECT_EQ(pump(10.0, &fin), 0); /* the broker is away */
	SKY_EXPECT_EQ(fin, -1);
	g_fail_pub = 0;
	SKY_EXPECT_EQ(pump(10.1, &fin), 2);
	SKY_EXPECT_EQ(fin, -1);
	SKY_EXPECT_EQ(pump(10.2, &fin), 0); /* two out, none answered */
	SKY_EXPECT_EQ(resp("j2", "sky-client-a", "q0", 2, 10.3, &lost), 1);
	SKY_EXPECT_EQ(pump(10.4, &fin), 1);
	SKY_EXPECT_EQ(resp("j2", "sky-client-a", "q1", 2, 10.5, &lost), 0);
	SKY_EXPECT_EQ(resp("j2", "sky-client-a", "q2", 2, 10.5, &lost), 0);
	SKY_EXPECT_EQ(pump(10.6, &fin), 2);
	SKY_EXPECT_EQ(fin, 0);
	for (int i = 0; i < 5; i++) {
		snprintf(id, sizeof id, "q%d", i);
		SKY_EXPECT(strcmp(g_pub[i].data, req_json(id)) == 0);
	}
}

SKY_TEST(the_table_is_bounded_and_the_oldest_unanswered_go_with_a_counted_reason)
{
	reset();
	int fin;
	double lost;
	SKY_EXPECT_EQ(follow("j3", 1, 1, 64, 0, 0), 0);
	char id[16];
	/* more requests than entries: the oldest are pushed out, answered
	 * ones without a count */
	for (int i = 0; i < SKY_SF_MAX_REQS + 100; i++) {
		snprintf(id, sizeof id, "e%d", i);
		SKY_EXPECT_EQ(req("j3", "sky-client-a", id, 1.0), 1);
		if (i < 40)
			resp("j3", "sky-client-a", id, 1, 1.0, &lost);
	}
	sky_sf_job *j = sky_servefault_job(&g_f, "j3");
	SKY_EXPECT_EQ(g_f.tail - g_f.head, (uint64_t)SKY_SF_MAX_REQS);
	SKY_EXPECT_EQ(j->dropped[SKY_SF_EVICTED], 60);
	SKY_EXPECT_EQ(g_dropped[SKY_SF_EVICTED], 60);
	/* requests of 60 KiB: the byte ring holds 69 of them, each intact */
	reset();
	SKY_EXPECT_EQ(follow("j3", 1, 1, 512, 0, 0), 0);
	static char big[60 << 10];
	for (int i = 0; i < 100; i++) {
		int n = snprintf(big, sizeof big, "{\"v\":1,\"id\":\"g%d\",\"pad\":\"", i);
		memset(big + n, 'a' + i % 26, sizeof big - (size_t)n - 2);
		memcpy(big + sizeof big - 2, "\"}", 2);
		snprintf(id, sizeof id, "g%d", i);
		SKY_EXPECT_EQ(sky_servefault_on_req(&g_f, "j3", "sky-client-a", big, sizeof big, 1.0,
						    f_drop, NULL),
			      1);
	}
	int held = (int)(g_f.tail - g_f.head);
	SKY_EXPECT_EQ(held, (int)(SKY_SF_BYTES / sizeof big));
	SKY_EXPECT_EQ(g_dropped[SKY_SF_EVICTED], 100 - held);
	SKY_EXPECT(g_f.btail - g_f.bhead <= SKY_SF_BYTES);
	for (uint64_t i = g_f.head; i < g_f.tail; i++) {
		const sky_sf_req *r = &g_f.req[i % SKY_SF_MAX_REQS];
		const unsigned char *b = g_f.bytes + r->off % SKY_SF_BYTES;
		int k = atoi(r->id + 1);
		char head[32];
		int n = snprintf(head, sizeof head, "{\"v\":1,\"id\":\"g%d\",", k);
		SKY_EXPECT(r->len == sizeof big && memcmp(b, head, (size_t)n) == 0 &&
			   b[sizeof big - 3] == 'a' + k % 26 && b[sizeof big - 1] == '}');
	}
	/* too large to keep: not tracked, counted */
	static char huge[SKY_SF_MAX_REQ_BYTES + 1];
	memset(huge, ' ', sizeof huge);
	SKY_EXPECT_EQ(sky_servefault_on_req(&g_f, "j3", "sky-client-a", huge, sizeof huge, 1.0, f_drop,
					    NULL),
		      SKY_ERANGE);
	SKY_EXPECT_EQ(sky_servefault_job(&g_f, "j3")->untracked, 1);
	/* unanswered past the age limit: expired */
	reset();
	SKY_EXPECT_EQ(follow("j3", 1, 1, 64, 0, 0), 0);
	req("j3", "sky-client-a", "old1", 1.0);
	req("j3", "sky-client-a", "old2", 2.0);
	req("j3", "sky-client-a", "new", 1.0 + SKY_SF_MAX_AGE_S);
	resp("j3", "sky-client-a", "old2", 1, 3.0, &lost);
	SKY_EXPECT_EQ(pump(2.5 + SKY_SF_MAX_AGE_S, &fin), 0);
	SKY_EXPECT_EQ(g_dropped[SKY_SF_EXPIRED], 1);
	SKY_EXPECT_EQ(g_f.tail - g_f.head, 1u);
	SKY_EXPECT_EQ(sky_servefault_job(&g_f, "j3")->dropped[SKY_SF_EXPIRED], 1);
	/* jobs followed are bounded too */
	reset();
	char job[16];
	for (int i = 0; i < SKY_SF_MAX_JOBS; i++) {
		snprintf(job, sizeof job, "s%d", i);
		SKY_EXPECT_EQ(follow(job, 1, 2, 8, 0, 0), 0);
	}
	SKY_EXPECT_EQ(follow("one-more", 1, 2, 8, 0, 0), SKY_ERANGE);
	SKY_EXPECT_EQ(follow("s0", 2, 2, 8, 1, 1.0), 0);
	SKY_EXPECT_EQ(follow("s1", 2, 0, 8, 1, 1.0), SKY_ERANGE);
}

SKY_TEST(ready_and_answers_count_only_from_the_plans_boards)
{
	reset();
	double lost = -1;
	int fin;
	SKY_EXPECT_EQ(follow("j5", 1, 2, 64, 0, 0), 0);
	SKY_EXPECT_EQ(req("j5", "sky-client-a", "r1", 1.0), 1);
	SKY_EXPECT_EQ(follow("j5", 2, 2, 64, 1, 5.0), 0);
	const char *ready = "{\"epoch\":2}";
	/* stage 0's ready from another board: refused, the replay waits */
	SKY_EXPECT_EQ(sky_servefault_on_ready(&g_f, "j5", 0, "b1", ready, strlen(ready)), SKY_EAUTH);
	SKY_EXPECT_EQ(sky_servefault_on_ready(&g_f, "j5", 1, "x9", ready, strlen(ready)), SKY_EAUTH);
	SKY_EXPECT_EQ(pump(6.0, &fin), 0);
	/* an answer to the request from a board outside the job: refused, so
	 * the request is still replayed */
	const char *ans = "{\"v\":1,\"id\":\"r1\",\"ok\":true,\"job\":\"j5\",\"epoch\":2,"
			  "\"logits\":[0.5,-1]}";
	SKY_EXPECT_EQ(sky_servefault_on_resp(&g_f, "j5", "sky-client-a", "x9", ans, strlen(ans), 6.1,
					     &lost),
		      SKY_EAUTH);
	SKY_EXPECT_EQ(sky_servefault_job(&g_f, "j5")->refused_sender, 3);
	SKY_EXPECT_EQ(sky_servefault_job(&g_f, "j5")->answered, 0);
	SKY_EXPECT_EQ(sky_servefault_on_ready(&g_f, "j5", 0, "b0", ready, strlen(ready)), 1);
	SKY_EXPECT_EQ(sky_servefault_on_ready(&g_f, "j5", 1, "b1", ready, strlen(ready)), 1);
	SKY_EXPECT_EQ(pump(6.2, &fin), 1);
	SKY_EXPECT(strcmp(g_pub[0].topic, "sky/v1/job/j5/replay/b0/sky-client-a") == 0);
	/* the planner's own refusal answers too */
	SKY_EXPECT_EQ(sky_servefault_on_resp(&g_f, "j5", "sky-client-a", "sky-planner", ans,
					     strlen(ans), 6.3, &lost),
		      1);
}
