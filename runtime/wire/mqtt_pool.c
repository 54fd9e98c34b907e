/* Receive pools per topic class; see sky_mqtt_pool.h. */
#include "sky_mqtt_pool.h"

#include "sky_topics.h"

#include <string.h>

static const size_t k_bytes[SKY_MQTT_CLASS_N] = {
	SKY_MQTT_POOL_CONTROL_BYTES, SKY_MQTT_POOL_FRAME_BYTES, SKY_MQTT_POOL_BULK_BYTES};
static const long k_msgs[SKY_MQTT_CLASS_N] = {SKY_MQTT_POOL_CONTROL_MSGS, SKY_MQTT_POOL_BIG_MSGS,
					      SKY_MQTT_POOL_BIG_MSGS};

sky_mqtt_class sky_mqtt_class_of(const char *topic)
{
	/* the limit decides, so a topic class that changes its form or its
	 * limit (sky_topics.h) moves pools with it */
	if (sky_topic_max_bytes(topic) <= SKY_MQTT_CONTROL_CLASS_MAX)
		return SKY_MQTT_CLASS_CONTROL;
	return strstr(topic, "/stage/") ? SKY_MQTT_CLASS_FRAME : SKY_MQTT_CLASS_BULK;
}

const char *sky_mqtt_class_name(sky_mqtt_class c)
{
	static const char *const names[SKY_MQTT_CLASS_N] = {"control", "frame", "bulk"};
	return (unsigned)c < SKY_MQTT_CLASS_N ? names[c] : "?";
}

int sky_mqtt_pool_take(sky_mqtt_pool *p, sky_mqtt_class c, size_t held)
{
	if ((unsigned)c >= SKY_MQTT_CLASS_N)
		c = SKY_MQTT_CLASS_CONTROL;
	if (p->msgs[c] >= k_msgs[c] || held > k_bytes[c] - p->bytes[c]) {
		p->dropped[c]++;
		return 0;
	}
	p->msgs[c]++;
	p->bytes[c] += held;
	return 1;
}

void sky_mqtt_pool_give(sky_mqtt_pool *p, sky_mqtt_class c, size_t held)
{
	if ((unsigned)c >= SKY_MQTT_CLASS_N)
		c = SKY_MQTT_CLASS_CONTROL;
	p->msgs[c]--;
	p->bytes[c] -= held;
}
