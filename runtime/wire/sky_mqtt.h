/* A small blocking-where-it-matters layer over Paho's asynchronous MQTT
 * client (MQTTAsync, TLS with client certificates), shared by skyd, skyplan
 * and the `sky` CLI.
 *
 * Connect and subscribe wait for the broker's answer (bounded), so callers
 * know at once when the broker refused their certificate or their ACL
 * denied a subscription; publish only queues (Paho sends in its own
 * thread), so a stage never waits for a hop; flush waits for what is
 * queued. Received messages are queued by Paho's thread and handed to
 * on_msg by sky_mqtt_poll on the caller's thread (so handlers may take the
 * caller's locks and publish without a lock-order cycle with Paho's own
 * mutex); the callee must copy what it keeps (the payload is freed after
 * the call). What waits is held in one pool per topic class (control,
 * frames, bulk: sky_mqtt_pool.h), each with its own bound; a message its
 * class's pool has no room for is dropped and counted there, so a flood of
 * frames never drops a control message. A message over its topic
 * class's limit (sky_topic_max_bytes) is dropped on arrival, before it is
 * queued, and counted; on_oversize (if set) then hears of its topic and
 * size on the caller's thread, on_msg never sees it. on_lost runs on Paho's
 * thread and should only set a flag. After on_lost the handle is dead:
 * close it and connect anew
 * (the caller does that, because a board's will changes with its session
 * number on every connect). */
#ifndef SKY_MQTT_H
#define SKY_MQTT_H

#include "sky_err.h"

#include <stddef.h>
#include <stdint.h>

typedef struct sky_mqtt sky_mqtt;

/* topic is NUL-terminated (topic_len excludes the NUL; an embedded NUL
 * makes strlen(topic) differ from topic_len, which callers must refuse). */
typedef void (*sky_mqtt_msg_fn)(void *ctx, const char *topic, size_t topic_len,
				const unsigned char *payload, size_t len, int retained);
typedef void (*sky_mqtt_lost_fn)(void *ctx, const char *cause);
typedef void (*sky_mqtt_oversize_fn)(void *ctx, const char *topic, size_t topic_len, size_t len);

typedef struct sky_mqtt_opts {
	const char *broker;      /* "host:port" (TLS) */
	const char *client_id;   /* sent with SKY_MQTT_CLIENT_PREFIX in front (unless it
	                            has it); the fleet listener replaces it with our
	                            CN, the claim listener keeps it: make it unique */
	const char *ca_file;     /* PEM trust anchor for the broker's certificate */
	const char *cert_file;   /* our PEM certificate */
	const char *key_file;    /* our PEM key (0600) */
	int keepalive_s;         /* MQTT keepalive; the broker publishes the will after 1.5x */
	int connect_timeout_s;   /* bound on connect (default 10) */
	const char *will_topic;  /* NULL: no will */
	const void *will_payload;
	size_t will_len;
	int will_retained, will_qos;
	int persistent;          /* 1: a persistent session (clean session 0): the
	                            broker keeps our subscriptions and queues QoS 1
	                            messages for them while we are away, across its
	                            own restarts too (persistence on). Only for an
	                            identity with one connection at a time (the
	                            planner): the session is named by the client id */
	sky_mqtt_msg_fn on_msg;
	sky_mqtt_lost_fn on_lost;
	sky_mqtt_oversize_fn on_oversize; /* optional */
	sky_mqtt_oversize_fn on_retained; /* optional: a retained copy on a class that
	                                     takes none, dropped (sky_topic_retained_ok) */
	void *ctx;
} sky_mqtt_opts;

/* Connects over TLS with o's certificate (MQTT 3.1.1; a clean session
 * unless o->persistent) and
 * waits for CONNACK. Returns 0 and *out, or SKY_ENET (refused, TLS failure,
 * timeout) / SKY_EINVAL (bad broker address) with d saying which. */
int sky_mqtt_connect(sky_mqtt **out, const sky_mqtt_opts *o, sky_diag *d);
/* Subscribes and waits up to timeout_ms for SUBACK. Returns 0, SKY_EAUTH if
 * the broker refused (return code 0x80, e.g. its ACL), SKY_ETIMEOUT or
 * SKY_ENET. */
int sky_mqtt_subscribe(sky_mqtt *m, const char *filter, int qos, int timeout_ms, sky_diag *d);
/* Queues a message. Returns 0, SKY_ERANGE (over 256 MiB, MQTT 3.1.1 §2.2.3)
 * or SKY_ENET (not connected, queue full). */
int sky_mqtt_publish(sky_mqtt *m, const char *topic, const void *data, size_t len, int qos,
		     int retained, sky_diag *d);
/* Waits up to timeout_ms until every queued message has been handed to
 * the broker (QoS 0: written; QoS 1: PUBACK). Returns 0 or SKY_ETIMEOUT. */
int sky_mqtt_flush(sky_mqtt *m, int timeout_ms);
/* Hands queued messages to on_msg on this thread; if none is queued, waits
 * up to wait_ms for one. Returns how many it dispatched. */
int sky_mqtt_poll(sky_mqtt *m, int wait_ms);
/* The same, but stops handing over once budget_ms have passed since the
 * call (after one message at least), even if more are queued: a caller
 * with its own periodic work keeps doing it while a backlog drains.
 * budget_ms < 0: no bound (sky_mqtt_poll). */
int sky_mqtt_poll_for(sky_mqtt *m, int wait_ms, int budget_ms);
/* 1 when a received message waits for sky_mqtt_poll, else 0 (NULL-safe). */
int sky_mqtt_queued(sky_mqtt *m);
/* Messages dropped because their class's pool was full (all classes). */
long sky_mqtt_dropped(sky_mqtt *m);
/* The same for one class (sky_mqtt_class, sky_mqtt_pool.h). */
long sky_mqtt_dropped_class(sky_mqtt *m, int cls);
/* Messages dropped because they were over their topic class's limit. */
long sky_mqtt_oversize(sky_mqtt *m);
/* Retained copies dropped because their class takes none (sky_topic_retained_ok). */
long sky_mqtt_retained_dropped(sky_mqtt *m);
/* The claim listener's address for a fleet broker "HOST:PORT": the same
 * host, port + 1 (planner/broker_conf.c). New boards enroll there, and
 * operator tools (sky job submit/watch/collect) connect there, because it
 * keeps their own random client ids, so several may run at once. Returns 0, SKY_EINVAL (no port,
 * or 65535) or SKY_ERANGE (out too small). */
int sky_mqtt_claim_broker(const char *broker, char *out, size_t cap);
/* Reconnect delays: doubling from base_ms up to max_ms, each one drawn
 * uniformly from [d/2, d] (equal jitter), so boards that lost the same
 * broker do not all come back in the same millisecond. */
typedef struct sky_mqtt_backoff {
	int base_ms, max_ms, cur_ms;
	uint64_t state; /* xorshift state, never 0 */
} sky_mqtt_backoff;
/* seed: anything that differs between processes (0 is replaced). */
void sky_mqtt_backoff_init(sky_mqtt_backoff *b, int base_ms, int max_ms, uint64_t seed);
/* The next delay in ms (base_ms/2 .. max_ms), then doubles the bound. */
int sky_mqtt_backoff_next(sky_mqtt_backoff *b);
/* After a success: the next failure starts from base_ms again. */
void sky_mqtt_backoff_reset(sky_mqtt_backoff *b);

/* 1 while connected. */
int sky_mqtt_connected(sky_mqtt *m);
/* Disconnects cleanly (so the broker does NOT publish the will), waiting
 * up to timeout_ms, and frees everything. NULL-safe. */
void sky_mqtt_close(sky_mqtt *m, int timeout_ms);
#endif
