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
	SKY_EXPECT_EQ(sky_topic_stage(t, sizeof t, "j1", 3, 1), 0);
	SKY_EXPECT(strcmp(t, "sky/v1/job/j1/stage/3/bwd") == 0);
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
	SKY_EXPECT_EQ(sky_topic_stage(t, sizeof t, "j1", -1, 0), SKY_EINVAL);
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
	SKY_EXPECT(sky_topic_max_bytes("sky/v1/job/j1/stage/2/ready") > 0);
	SKY_EXPECT(sky_topic_max_bytes("sky/v1/job/j1/stage/0/norm") > SKY_FRAME_HEADER_BYTES);
	SKY_EXPECT_EQ(sky_topic_max_bytes("sky/v1/job/j1/part/b07"), SKY_MQTT_MAX_PACKET);
	SKY_EXPECT_EQ(sky_topic_max_bytes("sky/v1/job/j1/parts"), 0);
	SKY_EXPECT_EQ(sky_topic_max_bytes("sky/v1/enroll/n1/csr"), SKY_ENROLL_REQ_MAX_BYTES);
	SKY_EXPECT_EQ(sky_topic_max_bytes("sky/v1/jobs/sky-operator/submit"), SKY_JOB_MAX_BYTES);
	SKY_EXPECT_EQ(sky_topic_max_bytes("sky/v1/jobs/sky-operator/reply"), SKY_JOB_REPLY_MAX_BYTES);
	/* only frames may be large */
	SKY_EXPECT(sky_topic_max_bytes("sky/v1/job/j1/stage/3/fwd") > SKY_FRAME_MAX_PAYLOAD_DEFAULT);
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
	SKY_EXPECT_EQ(sky_topic_max_bytes("sky/v1/job/j1/req/sky-client-a"), SKY_INFER_REQ_CLASS_BYTES);
	SKY_EXPECT_EQ(sky_topic_max_bytes("sky/v1/job/j1/req/plan"), SKY_INFER_REQ_CLASS_BYTES);
	SKY_EXPECT_EQ(sky_topic_max_bytes("sky/v1/job/j1/resp/sky-client-a"), SKY_INFER_RESP_MAX_BYTES);
	SKY_EXPECT_EQ(sky_topic_max_bytes("sky/v1/job/j1/slice/b01"), SKY_MQTT_MAX_PACKET);
	SKY_EXPECT_EQ(sky_topic_max_bytes("sky/v1/board/b01/slice-req"), SKY_SLICE_REQ_MAX_BYTES);
	SKY_EXPECT_EQ(sky_topic_max_bytes("sky/v1/job/j1/stage/0/done"), SKY_SERVE_DONE_MAX_BYTES);
	SKY_EXPECT_EQ(sky_topic_max_bytes("sky/v1/jobs/sky-operator/weights"), SKY_MQTT_MAX_PACKET);
	SKY_EXPECT(SKY_INFER_REQ_CLASS_BYTES > SKY_INFER_REQ_MAX_BYTES);
}
