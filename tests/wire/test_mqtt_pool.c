/* The MQTT layer's receive pools (runtime/wire/mqtt_pool.c): a flood on one
 * topic class must not drop another class's messages. */
#include "sky_test.h"

#include "sky_mqtt_pool.h"
#include "sky_topics.h"

#include <string.h>

SKY_TEST(topics_fall_into_their_classes)
{
	SKY_EXPECT_EQ(sky_mqtt_class_of("sky/v1/board/b1/caps"), SKY_MQTT_CLASS_CONTROL);
	SKY_EXPECT_EQ(sky_mqtt_class_of("sky/v1/job/j/plan"), SKY_MQTT_CLASS_CONTROL);
	SKY_EXPECT_EQ(sky_mqtt_class_of("sky/v1/job/j/stage/1/ready/b1"), SKY_MQTT_CLASS_CONTROL);
	SKY_EXPECT_EQ(sky_mqtt_class_of("sky/v1/job/j/stage/1/norm/b1"), SKY_MQTT_CLASS_CONTROL);
	SKY_EXPECT_EQ(sky_mqtt_class_of("sky/v1/job/j/stage/0/done/b1"), SKY_MQTT_CLASS_CONTROL);
	SKY_EXPECT_EQ(sky_mqtt_class_of("sky/v1/enroll/n1/csr"), SKY_MQTT_CLASS_CONTROL);
	SKY_EXPECT_EQ(sky_mqtt_class_of("sky/v1/job/j/stage/1/fwd/b1"), SKY_MQTT_CLASS_FRAME);
	SKY_EXPECT_EQ(sky_mqtt_class_of("sky/v1/job/j/stage/1/bwd/b1"), SKY_MQTT_CLASS_FRAME);
	SKY_EXPECT_EQ(sky_mqtt_class_of("sky/v1/job/j/ckpt/b1"), SKY_MQTT_CLASS_BULK);
	SKY_EXPECT_EQ(sky_mqtt_class_of("sky/v1/job/j/part/b1"), SKY_MQTT_CLASS_BULK);
	SKY_EXPECT_EQ(sky_mqtt_class_of("nothing/we/know"), SKY_MQTT_CLASS_CONTROL);
	SKY_EXPECT(strcmp(sky_mqtt_class_name(SKY_MQTT_CLASS_FRAME), "frame") == 0);
}

/* The attack the pools stop: 32 MiB messages on topics a board may write,
 * then the control messages a stage and the planner live on. With one
 * shared 64 MiB pool, two junk messages filled it and the plan, the ready
 * and the heartbeat after them were dropped. */
SKY_TEST(junk_frames_and_parts_do_not_drop_control_messages)
{
	static const char *const junk[] = {"sky/v1/job/j/stage/1/fwd/b1", "sky/v1/job/j/stage/1/bwd/b1",
					   "sky/v1/job/j/part/b9", "sky/v1/job/j/ckpt/b9"};
	static const char *const ctl[] = {"sky/v1/job/j/plan", "sky/v1/job/j/stage/2/ready/b1",
					  "sky/v1/board/b1/heartbeat", "sky/v1/job/j/stage/0/done/b1"};
	sky_mqtt_pool p;
	memset(&p, 0, sizeof p);
	size_t big = SKY_FRAME_MAX_PAYLOAD_DEFAULT;
	int admitted = 0;
	for (int round = 0; round < 4; round++)
		for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++)
			admitted += sky_mqtt_pool_take(&p, sky_mqtt_class_of(junk[i]), big);
	/* two of the largest fit each big pool; the rest are dropped there */
	SKY_EXPECT_EQ(admitted, 4);
	SKY_EXPECT(p.dropped[SKY_MQTT_CLASS_FRAME] > 0 && p.dropped[SKY_MQTT_CLASS_BULK] > 0);
	for (size_t i = 0; i < sizeof ctl / sizeof ctl[0]; i++)
		SKY_EXPECT_MSG(sky_mqtt_pool_take(&p, sky_mqtt_class_of(ctl[i]), 200) == 1,
			       "%s dropped behind junk frames", ctl[i]);
	SKY_EXPECT_EQ(p.dropped[SKY_MQTT_CLASS_CONTROL], 0);
	/* handing a frame over makes room for the next one */
	sky_mqtt_pool_give(&p, SKY_MQTT_CLASS_FRAME, big);
	SKY_EXPECT_EQ(sky_mqtt_pool_take(&p, SKY_MQTT_CLASS_FRAME, big), 1);
}

SKY_TEST(a_control_flood_is_bounded_in_bytes_and_count)
{
	sky_mqtt_pool p;
	memset(&p, 0, sizeof p);
	long n = 0;
	while (sky_mqtt_pool_take(&p, SKY_MQTT_CLASS_CONTROL, 16))
		n++;
	SKY_EXPECT_EQ(n, SKY_MQTT_POOL_CONTROL_MSGS);
	SKY_EXPECT_EQ(p.dropped[SKY_MQTT_CLASS_CONTROL], 1);
	memset(&p, 0, sizeof p);
	SKY_EXPECT_EQ(sky_mqtt_pool_take(&p, SKY_MQTT_CLASS_CONTROL, SKY_MQTT_POOL_CONTROL_BYTES), 1);
	SKY_EXPECT_EQ(sky_mqtt_pool_take(&p, SKY_MQTT_CLASS_CONTROL, 1), 0);
	/* frames still come in */
	SKY_EXPECT_EQ(sky_mqtt_pool_take(&p, SKY_MQTT_CLASS_FRAME, 1u << 20), 1);
}

