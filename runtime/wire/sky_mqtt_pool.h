/* The receive pools of the MQTT layer (sky_mqtt.h): what Paho's thread has
 * received and sky_mqtt_poll has not handed over yet, accounted per topic
 * class, so a flood on one class cannot drop another's messages.
 *
 * Three classes, by the topic's own size limit (sky_topic_max_bytes):
 *   control  limit at most SKY_MQTT_CONTROL_CLASS_MAX: reports, statuses,
 *            plans, plan-acks, commands, metrics, ready, norm, done,
 *            requests, answers, enrollment, submissions
 *   frame    larger, under .../stage/: activations and gradients
 *   bulk     larger, elsewhere: parts, checkpoints, loads, slices, weights
 * Before the pools were split, one 64 MiB pool held all of them, and two
 * 32 MiB messages on any topic a sender could reach filled it: every control
 * message after them (QoS 1 ones already acknowledged to the broker) was
 * dropped. Each pool has a byte and a message bound; a message that does not
 * fit its own pool is dropped and counted in its class, whatever the other
 * pools hold. The caller holds whatever lock guards the pool. */
#ifndef SKY_MQTT_POOL_H
#define SKY_MQTT_POOL_H

#include <stddef.h>

typedef enum sky_mqtt_class {
	SKY_MQTT_CLASS_CONTROL,
	SKY_MQTT_CLASS_FRAME,
	SKY_MQTT_CLASS_BULK,
	SKY_MQTT_CLASS_N
} sky_mqtt_class;

/* A topic class whose limit is at most this is control. */
#define SKY_MQTT_CONTROL_CLASS_MAX (1u << 20)
/* Bounds per pool. Control: 16 messages of the largest control kind (a
 * 1 MiB request or link probe), or thousands of small ones. Frames and
 * bulk: two of the largest messages each (32 MiB frames, parts, chunks). */
#define SKY_MQTT_POOL_CONTROL_BYTES (16u << 20)
#define SKY_MQTT_POOL_CONTROL_MSGS 16384
#define SKY_MQTT_POOL_FRAME_BYTES (64u << 20)
#define SKY_MQTT_POOL_BULK_BYTES (64u << 20)
#define SKY_MQTT_POOL_BIG_MSGS 4096

typedef struct sky_mqtt_pool {
	size_t bytes[SKY_MQTT_CLASS_N]; /* payload bytes held */
	long msgs[SKY_MQTT_CLASS_N];    /* messages held (oversize ones too: their topic) */
	long dropped[SKY_MQTT_CLASS_N]; /* refused because their pool was full */
} sky_mqtt_pool;

/* The class of a received topic (NULL or unknown topics: control, whose
 * limit for them is 0, so their payload is never held). */
sky_mqtt_class sky_mqtt_class_of(const char *topic);
/* Short name of a class ("control", "frame", "bulk"). */
const char *sky_mqtt_class_name(sky_mqtt_class c);
/* Takes room for one message of held payload bytes in class c. Returns 1,
 * or 0 (counted in dropped[c]) when c's pool has no room for it. */
int sky_mqtt_pool_take(sky_mqtt_pool *p, sky_mqtt_class c, size_t held);
/* Gives back what a take of the same class and size took. */
void sky_mqtt_pool_give(sky_mqtt_pool *p, sky_mqtt_class c, size_t held);
#endif
