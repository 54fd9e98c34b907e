#include "sky_test.h"

#include "sky_frame.h"
#include "sky_topics.h"

#include <string.h>

SKY_TEST(segments_refuse_wildcards_separators_and_control_bytes)
{
	SKY_EXPECT(sky_topic_segment_ok("b01"));
	SKY_EXPECT(sky_topic_segment_ok("rpi4-a_2.x"));
	const char *bad[] = {"", "a/b", "a+", "#", "a b", "tab\t", "\x1b[2J", ".", "..", "é", NULL};
	for (int i = 0; bad[i]; i++)
		SKY_EXPECT_MSG(!sky_topic_segment_ok(bad[i]), "accepted '%s'", bad[i]);
	char id[SKY_TOPIC_SEGMENT_MAX + 2];
	memset(id, 'a', sizeof id - 1);
	id[sizeof id - 1] = 0; /* 65 characters */
	SKY_EXPECT(!sky_topic_segment_ok(id));
	id[SKY_TOPIC_SEGMENT_MAX] = 0; /* 64 */
	SKY_EXPECT(sky_topic_segment_ok(id));
	SKY_EXPECT(!sky_topic_segment_ok(NULL));
}

SKY_TEST(builders_and_parser_agree)
{
	char t[SKY_TOPIC_BUF], seg[SKY_TOPIC_SEGMENT_MAX + 1], leaf[16];
	SKY_EXPECT_EQ(sky_topic_board(t, sizeof t, "b07", SKY_TOPIC_STATUS), 0);
	SKY_EXPECT(strcmp(t, "sky/v1/board/b07/status") == 0);
	SKY_EXPECT_EQ(sky_topic_parse(t, strlen(t), "board", seg, sizeof seg, leaf, sizeof leaf), 0);
	SKY_EXPECT(!strcmp(seg, "b07") && !strcmp(leaf, "status"));
	SKY_EXPECT_EQ(sky_topic_job(t, sizeof t, "j1", SKY_TOPIC_PLAN), 0);
	SKY_EXPECT(strcmp(t, "sky/v1/job/j1/plan") == 0);
	SKY_EXPECT_EQ(sky_topic_stage(t, sizeof t, "j1", 3, 1, "b4"), 0);
	SKY_EXPECT(strcmp(t, "sky/v1/job/j1/stage/3/bwd/b4") == 0);
	SKY_EXPECT_EQ(sky_topic_stage(t, sizeof t, "j1", 3, 0, NULL), 0);
	SKY_EXPECT(strcmp(t, "sky/v1/job/j1/stage/3/fwd/+") == 0);
	SKY_EXPECT_EQ(sky_topic_stage(t, sizeof t, "j1", 3, 0, "a+b"), SKY_EINVAL);
	/* an enrollment nonce is the claim connection's client id */
	SKY_EXPECT_EQ(sky_topic_enroll(t, sizeof t, "sky:00ff", SKY_TOPIC_CSR), 0);
	SKY_EXPECT(strcmp(t, "sky/v1/enroll/sky:00ff/csr") == 0);
	SKY_EXPECT_EQ(sky_topic_parse_enroll(t, strlen(t), seg, sizeof seg, leaf, sizeof leaf), 0);
	SKY_EXPECT(!strcmp(seg, "sky:00ff") && !strcmp(leaf, "csr"));
	SKY_EXPECT_EQ(sky_topic_enroll(t, sizeof t, "00ff", SKY_TOPIC_CSR), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_topic_enroll(t, sizeof t, "sky:", SKY_TOPIC_CSR), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_topic_enroll(t, sizeof t, "sky:a/b", SKY_TOPIC_CSR), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_topic_parse_enroll("sky/v1/enroll/00ff/csr", 22, seg, sizeof seg, leaf,
					     sizeof leaf), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_topic_parse_enroll("sky/v1/enroll/sky:a/b/csr", 25, seg, sizeof seg, leaf,
					     sizeof leaf), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_topic_board(t, sizeof t, "b/#", SKY_TOPIC_CAPS), SKY_EINVAL);
	volatile size_t small = 10; /* hidden from the compiler, which would warn */
	SKY_EXPECT_EQ(sky_topic_board(t, small, "b07", SKY_TOPIC_CAPS), SKY_ERANGE);
	SKY_EXPECT_EQ(sky_topic_stage(t, sizeof t, "j1", -1, 0, "b1"), SKY_EINVAL);
}

SKY_TEST(parser_refuses_other_shapes)
{
	char seg[SKY_TOPIC_SEGMENT_MAX + 1], leaf[16];
	const char *bad[] = {"sky/v1/board/b1", "sky/v1/board/b1/caps/x", "sky/v2/board/b1/caps",
			     "sky/v1/job/b1/caps", "sky/v1/board//caps", "sky/v1/board/b+/caps",
			     "sky/v1/boardx/b1/caps", NULL};
	for (int i = 0; bad[i]; i++)
		SKY_EXPECT_MSG(sky_topic_parse(bad[i], strlen(bad[i]), "board", seg, sizeof seg, leaf,
					       sizeof leaf) != 0,
			       "accepted %s", bad[i]);
	/* an embedded NUL must not let "b1\0/../x" pass as b1 */
	const char nul[] = "sky/v1/board/b1/ca\0ps";
	SKY_EXPECT(sky_topic_parse(nul, sizeof nul - 1, "board", seg, sizeof seg, leaf, sizeof leaf) !=
		   0);
	/* a leaf longer than the caller's buffer */
	const char *longleaf = "sky/v1/board/b1/averyveryverylongleaf";
	SKY_EXPECT(sky_topic_parse(longleaf, strlen(longleaf), "board", seg, sizeof seg, leaf,
				   sizeof leaf) != 0);
}

SKY_TEST(each_topic_class_has_its_own_size_limit)
{
	SKY_EXPECT_EQ(sky_topic_max_bytes("sky/v1/board/b1/caps"), SKY_CAPS_MAX_BYTES);
	SKY_EXPECT_EQ(sky_topic_max_bytes("sky/v1/board/b1/status"), SKY_STATUS_MAX_BYTES);
	SKY_EXPECT_EQ(sky_topic_max_bytes("sky/v1/board/b1/heartbeat"), SKY_STATUS_MAX_BYTES);
	SKY_EXPECT_EQ(sky_topic_max_bytes("sky/v1/board/b1/plan-ack"), SKY_PLAN_ACK_MAX_BYTES);
	SKY_EXPECT_EQ(sky_topic_max_bytes("sky/v1/job/j1/plan"), SKY_PLAN_MAX_BYTES);
	/* the data plane's own topics: a class each, or their messages would be dropped */
	SKY_EXPECT(sky_topic_max_bytes("sky/v1/job/j1/stage/2/ready/b1") > 0);
	SKY_EXPECT(sky_topic_max_bytes("sky/v1/job/j1/stage/0/norm/b1") > SKY_FRAME_HEADER_BYTES);
	SKY_EXPECT_EQ(sky_topic_max_bytes("sky/v1/job/j1/metrics/b1"), SKY_METRICS_MAX_BYTES);
	/* the old forms without the sender level have no class any more */
	SKY_EXPECT_EQ(sky_topic_max_bytes("sky/v1/job/j1/stage/2/ready"), 0);
	SKY_EXPECT_EQ(sky_topic_max_bytes("sky/v1/job/j1/metrics"), 0);
	SKY_EXPECT_EQ(sky_topic_max_bytes("sky/v1/job/j1/part/b07"), SKY_MQTT_MAX_PACKET);
	SKY_EXPECT_EQ(sky_topic_max_bytes("sky/v1/job/j1/parts"), 0);
	SKY_EXPECT_EQ(sky_topic_max_bytes("sky/v1/enroll/n1/csr"), SKY_ENROLL_REQ_MAX_BYTES);
	SKY_EXPECT_EQ(sky_topic_max_bytes("sky/v1/jobs/sky-operator/submit"), SKY_JOB_MAX_BYTES);
	SKY_EXPECT_EQ(sky_topic_max_bytes("sky/v1/jobs/sky-operator/reply"), SKY_JOB_REPLY_MAX_BYTES);
	/* only frames may be large */
	SKY_EXPECT(sky_topic_max_bytes("sky/v1/job/j1/stage/3/fwd/b2") > SKY_FRAME_MAX_PAYLOAD_DEFAULT);
	SKY_EXPECT(sky_topic_max_bytes("sky/v1/site/s1/job/j1/stage/3/fwd/b2") >
		   SKY_FRAME_MAX_PAYLOAD_DEFAULT);
	/* a sender named like a leaf changes nothing: the form decides */
	SKY_EXPECT_EQ(sky_topic_max_bytes("sky/v1/job/j1/stage/0/done/fwd"), SKY_SERVE_DONE_MAX_BYTES);
	SKY_EXPECT(sky_topic_max_bytes("sky/v1/board/b1/caps") < (64u << 10));
	/* nothing of ours: nothing allowed */
	SKY_EXPECT_EQ(sky_topic_max_bytes("other/b1/caps"), 0);
	SKY_EXPECT_EQ(sky_topic_max_bytes("sky/v1/board/b1/unknown"), 0);
	SKY_EXPECT_EQ(sky_topic_max_bytes(NULL), 0);
}

SKY_TEST(serving_topics_build_parse_and_size)
{
	char t[SKY_TOPIC_BUF], job[SKY_TOPIC_SEGMENT_MAX + 1], who[SKY_TOPIC_SEGMENT_MAX + 1];
	SKY_EXPECT_EQ(sky_topic_job_to(t, sizeof t, "j1", SKY_TOPIC_REQ, "sky-client-demo"), 0);
	SKY_EXPECT(strcmp(t, "sky/v1/job/j1/req/sky-client-demo") == 0);
	SKY_EXPECT_EQ(sky_topic_parse_job_to(t, strlen(t), SKY_TOPIC_REQ, job, sizeof job, who,
					     sizeof who),
		      0);
	SKY_EXPECT(!strcmp(job, "j1") && !strcmp(who, "sky-client-demo"));
	SKY_EXPECT(sky_topic_parse_job_to(t, strlen(t), SKY_TOPIC_RESP, job, sizeof job, who,
					  sizeof who) != 0);
	SKY_EXPECT_EQ(sky_topic_job_to(t, sizeof t, "j1", SKY_TOPIC_REQ, NULL), 0);
	SKY_EXPECT(strcmp(t, "sky/v1/job/j1/req/+") == 0);
	SKY_EXPECT(sky_topic_parse_job_to(t, strlen(t), SKY_TOPIC_REQ, job, sizeof job, who,
					  sizeof who) != 0);
	SKY_EXPECT_EQ(sky_topic_job_to(t, sizeof t, "j1", SKY_TOPIC_RESP, "a/b"), SKY_EINVAL);
	const char *bad[] = {"sky/v1/job/j1/req/a/b", "sky/v1/job//req/a", "sky/v1/job/j1/req/",
			     "sky/v1/job/j1/reqx/a", NULL};
	for (int i = 0; bad[i]; i++)
		SKY_EXPECT_MSG(sky_topic_parse_job_to(bad[i], strlen(bad[i]), SKY_TOPIC_REQ, job,
						      sizeof job, who, sizeof who) != 0,
			       "accepted %s", bad[i]);
	/* size classes: the level decides even when the CN looks like a leaf */
	SKY_EXPECT_EQ(sky_topic_max_bytes("sky/v1/job/j1/req/b1/sky-client-a"),
		      SKY_INFER_REQ_CLASS_BYTES);
	SKY_EXPECT_EQ(sky_topic_max_bytes("sky/v1/job/j1/req/b1/plan"), SKY_INFER_REQ_CLASS_BYTES);
	SKY_EXPECT_EQ(sky_topic_max_bytes("sky/v1/job/j1/resp/sky-client-a/b3"),
		      SKY_INFER_RESP_MAX_BYTES);
	SKY_EXPECT_EQ(sky_topic_max_bytes("sky/v1/job/j1/replay/b1/sky-client-a"),
		      SKY_INFER_REQ_CLASS_BYTES);
	SKY_EXPECT_EQ(sky_topic_max_bytes("sky/v1/job/j1/resp/sky-client-a"), 0);
	SKY_EXPECT_EQ(sky_topic_max_bytes("sky/v1/job/j1/slice/b01"), SKY_MQTT_MAX_PACKET);
	SKY_EXPECT_EQ(sky_topic_max_bytes("sky/v1/board/b01/slice-req"), SKY_SLICE_REQ_MAX_BYTES);
	SKY_EXPECT_EQ(sky_topic_max_bytes("sky/v1/job/j1/stage/0/done/b3"), SKY_SERVE_DONE_MAX_BYTES);
	SKY_EXPECT_EQ(sky_topic_max_bytes("sky/v1/jobs/sky-operator/weights"), SKY_MQTT_MAX_PACKET);
	SKY_EXPECT(SKY_INFER_REQ_CLASS_BYTES > SKY_INFER_REQ_MAX_BYTES);
}

SKY_TEST(identity_levels_build_and_parse)
{
	char t[SKY_TOPIC_BUF], job[SKY_TOPIC_SEGMENT_MAX + 1], a[SKY_TOPIC_SEGMENT_MAX + 1],
		b[SKY_TOPIC_SEGMENT_MAX + 1];
	SKY_EXPECT_EQ(sky_topic_job_pair(t, sizeof t, "j1", SKY_TOPIC_REQ, "b1", "sky-client-x"), 0);
	SKY_EXPECT(strcmp(t, "sky/v1/job/j1/req/b1/sky-client-x") == 0);
	SKY_EXPECT_EQ(sky_topic_parse_job_pair(t, strlen(t), SKY_TOPIC_REQ, job, sizeof job, a,
					       sizeof a, b, sizeof b),
		      0);
	SKY_EXPECT(!strcmp(job, "j1") && !strcmp(a, "b1") && !strcmp(b, "sky-client-x"));
	SKY_EXPECT_EQ(sky_topic_job_pair(t, sizeof t, "j1", SKY_TOPIC_RESP, "sky-client-x", NULL), 0);
	SKY_EXPECT(strcmp(t, "sky/v1/job/j1/resp/sky-client-x/+") == 0);
	SKY_EXPECT(sky_topic_parse_job_pair(t, strlen(t), SKY_TOPIC_RESP, job, sizeof job, a,
					    sizeof a, b, sizeof b) != 0);
	const char *bad[] = {"sky/v1/job/j1/req/b1", "sky/v1/job/j1/req/b1/c/d", "sky/v1/job/j1/req//c",
			     "sky/v1/job/j1/resp/b1/c", "sky/v1/job/j+/req/b1/c", NULL};
	for (int i = 0; bad[i]; i++)
		SKY_EXPECT_MSG(sky_topic_parse_job_pair(bad[i], strlen(bad[i]), SKY_TOPIC_REQ, job,
							sizeof job, a, sizeof a, b, sizeof b) != 0,
			       "accepted %s", bad[i]);
	sky_topic_stage_msg m;
	SKY_EXPECT_EQ(sky_topic_site_stage(t, sizeof t, "s1", "j1", 4, SKY_TOPIC_NORM, "b9"), 0);
	SKY_EXPECT(strcmp(t, "sky/v1/site/s1/job/j1/stage/4/norm/b9") == 0);
	SKY_EXPECT_EQ(sky_topic_parse_stage(t, strlen(t), &m), 0);
	SKY_EXPECT(!strcmp(m.site, "s1") && !strcmp(m.job, "j1") && m.stage == 4 &&
		   !strcmp(m.leaf, "norm") && !strcmp(m.sender, "b9"));
	SKY_EXPECT_EQ(sky_topic_stage_leaf(t, sizeof t, "j1", 0, SKY_TOPIC_DONE, "b3"), 0);
	SKY_EXPECT_EQ(sky_topic_parse_stage(t, strlen(t), &m), 0);
	SKY_EXPECT(!m.site[0] && m.stage == 0 && !strcmp(m.leaf, "done") && !strcmp(m.sender, "b3"));
	const char *bads[] = {"sky/v1/job/j1/stage/1/fwd", "sky/v1/job/j1/stage/01/fwd/b1",
			      "sky/v1/job/j1/stage/65536/fwd/b1", "sky/v1/job/j1/stage/-1/fwd/b1",
			      "sky/v1/job/j1/stage/1/fwd/+", "sky/v1/job/j1/stage/1/fwd/b1/x",
			      "sky/v1/site/s1/job/j1/stage/1/fwd", "sky/v1/job/j1/stages/1/fwd/b1",
			      NULL};
	for (int i = 0; bads[i]; i++)
		SKY_EXPECT_MSG(sky_topic_parse_stage(bads[i], strlen(bads[i]), &m) != 0, "accepted %s",
			       bads[i]);
}

SKY_TEST(only_the_retained_classes_take_a_retained_copy)
{
	static const char *const yes[] = {
		"sky/v1/board/b1/caps", "sky/v1/board/b1/status", "sky/v1/board/b1/plan-ack",
		"sky/v1/job/j1/plan", "sky/v1/job/j1/stage/2/ready/b3",
		"sky/v1/site/s1/job/j1/stage/0/ready/b1", "sky/v1/job/j1/part/b1",
		"sky/v1/job/j1/load/b2", "sky/v1/jobs/sky-operator/job/j1/state",
		"sky/v1/jobs/sky-operator/job/j1/part/b1", NULL};
	static const char *const no[] = {
		"sky/v1/board/b1/heartbeat", "sky/v1/board/b1/echo", "sky/v1/board/b1/cmd",
		"sky/v1/board/b1/slice-req", "sky/v1/job/j1/metrics/b1",
		"sky/v1/job/j1/stage/1/fwd/b1", "sky/v1/job/j1/stage/1/bwd/b3",
		"sky/v1/job/j1/stage/1/norm/b2", "sky/v1/job/j1/stage/0/done/b3",
		"sky/v1/site/s1/job/j1/stage/1/fwd/b1", "sky/v1/job/j1/ckpt/b1",
		"sky/v1/job/j1/slice/b1", "sky/v1/job/j1/req/b1/sky-client-t",
		"sky/v1/job/j1/resp/sky-client-t/b3", "sky/v1/job/j1/replay/b1/sky-client-t",
		"sky/v1/jobs/sky-operator/submit", "sky/v1/jobs/sky-operator/cancel",
		"sky/v1/jobs/sky-operator/weights", "sky/v1/jobs/sky-operator/reply",
		"sky/v1/jobs/sky-operator/job/j1/metrics", "sky/v1/enroll/sky:n1/csr",
		"sky/v1/enroll/sky:n1/cert", "sky/v1/job/j1/plan/x", "sky/v1/job/j1/part",
		"sky/v2/job/j1/plan", "other/topic", "", NULL};
	for (int i = 0; yes[i]; i++)
		SKY_EXPECT_MSG(sky_topic_retained_ok(yes[i]), "%s refused", yes[i]);
	for (int i = 0; no[i]; i++)
		SKY_EXPECT_MSG(!sky_topic_retained_ok(no[i]), "%s taken", no[i]);
	SKY_EXPECT(!sky_topic_retained_ok(NULL));
}
