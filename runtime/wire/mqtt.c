#include "sky_mqtt.h"

#include "sky_clock.h"
#include "sky_log.h"
#include "sky_mqtt_pool.h"
#include "sky_net.h"
#include "sky_thread.h"
#include "sky_topics.h"

#include <MQTTAsync.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A pending request (connect or subscribe) waits on one of these. The slot
 * lives in the handle, so a callback that fires after its waiter gave up
 * still writes to valid memory. Paho's thread writes code and msg, then
 * stores done; the waiter reads them only after it has seen done != 0 (the
 * atomic store and load order them). */
typedef struct op_slot {
	int busy;           /* under sky_mqtt.lock */
	_Atomic int done;   /* 0 pending, 1 success, -1 failure */
	int code;
	char msg[96];
} op_slot;

#define N_SLOTS 16

/* A received message waiting for sky_mqtt_poll (Paho's own allocations,
 * freed after dispatch). */
typedef struct qmsg {
	struct qmsg *next;
	char *topic;
	size_t topic_len;
	MQTTAsync_message *msg; /* NULL: dropped as oversize, only len is left */
	size_t len;
	size_t held;        /* payload bytes it holds in its pool (0 if oversize) */
	int retained_drop;  /* msg NULL: a retained copy on a class that takes none */
	sky_mqtt_class cls; /* its pool (sky_mqtt_pool.h) */
} qmsg;

struct sky_mqtt {
	MQTTAsync client;
	sky_mqtt_opts o;
	_Atomic int connected; /* cleared on Paho's thread when the link is lost */
	sky_mutex lock; /* slots' busy flags, the queue, pool and oversize */
	op_slot slots[N_SLOTS];
	qmsg *head, *tail;
	sky_mqtt_pool pool; /* what the queue holds, per topic class */
	long oversize;
	long retained_dropped;  /* retained copies on classes that take none */
	long retained_reported; /* of them, logged (owner's thread only) */
	uint64_t retained_ns;   /* its log window's start (owner's thread only) */
	int retained_lines;     /* lines in that window (owner's thread only) */
	long reported[SKY_MQTT_CLASS_N]; /* drops already logged (owner's thread only) */
	uint64_t reported_ns;             /* when (owner's thread only) */
	char uri[300];
	char client_id[128];
};

static op_slot *slot_take(sky_mqtt *m)
{
	op_slot *s = NULL;
	sky_mutex_lock(&m->lock);
	for (int i = 0; i < N_SLOTS && !s; i++)
		if (!m->slots[i].busy) {
			s = &m->slots[i];
			memset(s, 0, sizeof *s);
			s->busy = 1;
		}
	sky_mutex_unlock(&m->lock);
	return s;
}

/* Waits for a slot to finish; returns its state (1, -1, or 0 on timeout).
 * A timed-out slot stays busy until the handle is freed (a callback may
 * still come for it). */
static int slot_wait(sky_mqtt *m, op_slot *s, int timeout_ms)
{
	uint64_t end = sky_clock_ns() + (uint64_t)timeout_ms * 1000000u;
	while (!atomic_load(&s->done) && sky_clock_ns() < end)
		sky_sleep_ms(2);
	int r = atomic_load(&s->done);
	if (r) {
		sky_mutex_lock(&m->lock);
		s->busy = 0;
		sky_mutex_unlock(&m->lock);
	}
	return r;
}

static void on_ok(void *ctx, MQTTAsync_successData *resp)
{
	op_slot *s = ctx;
	/* MQTT 3.1.1 §3.9.3: a SUBACK return code 0x80 is a refusal */
	s->code = resp ? resp->alt.qos : 0;
	atomic_store(&s->done, s->code == 0x80 ? -1 : 1);
}

static void on_fail(void *ctx, MQTTAsync_failureData *resp)
{
	op_slot *s = ctx;
	s->code = resp ? resp->code : -1;
	snprintf(s->msg, sizeof s->msg, "%s",
		 resp && resp->message ? resp->message : MQTTAsync_strerror(s->code));
	atomic_store(&s->done, -1);
}

static void on_conn_ok(void *ctx, MQTTAsync_successData *resp)
{
	op_slot *s = ctx;
	atomic_store(&s->done, 1);
}

static void cb_lost(void *ctx, char *cause)
{
	sky_mqtt *m = ctx;
	atomic_store(&m->connected, 0);
	if (m->o.on_lost)
		m->o.on_lost(m->o.ctx, cause ? cause : "connection lost");
}

/* Paho's receive thread only queues: handlers run on the owner's thread in
 * sky_mqtt_poll, so they may take the owner's locks and call publish
 * without a lock-order cycle with Paho's internal mutex. */
static int cb_msg(void *ctx, char *topic, int topic_len, MQTTAsync_message *msg)
{
	sky_mqtt *m = ctx;
	qmsg *q = malloc(sizeof *q);
	size_t len = msg->payloadlen > 0 ? (size_t)msg->payloadlen : 0;
	/* Each topic class has its own limit (sky_topic_max_bytes): the
	 * broker's one limit is sized for tensor frames, so without this a
	 * 32 MiB "caps" message would sit in the queue (and two would fill it,
	 * dropping everyone else's control messages) until its handler refused
	 * it. The payload goes now; the handler only hears of its size. */
	size_t held = len;
	if (len > sky_topic_max_bytes(topic)) {
		MQTTAsync_freeMessage(&msg);
		msg = NULL;
		held = 0;
	}
	/* a retained copy on a class that is never published retained
	 * (sky_topic_retained_ok): junk, or a stale message that would be
	 * taken as new on every subscription; the broker cannot refuse it */
	int rdrop = 0;
	if (msg && msg->retained && !sky_topic_retained_ok(topic)) {
		MQTTAsync_freeMessage(&msg);
		msg = NULL;
		held = 0;
		rdrop = 1;
	}
	/* each topic class has its own pool: 32 MiB messages on a frame or
	 * part topic cannot crowd out a plan, a ready or a heartbeat */
	sky_mqtt_class cls = sky_mqtt_class_of(topic);
	sky_mutex_lock(&m->lock);
	if (rdrop)
		m->retained_dropped++;
	else if (!msg)
		m->oversize++;
	if (!q || !sky_mqtt_pool_take(&m->pool, cls, held)) {
		if (!q)
			m->pool.dropped[cls]++;
		sky_mutex_unlock(&m->lock);
		free(q);
		if (msg)
			MQTTAsync_freeMessage(&msg);
		MQTTAsync_free(topic);
		return 1;
	}
	/* Paho passes topic_len 0 when the topic has no embedded NUL */
	q->next = NULL;
	q->topic = topic;
	q->topic_len = topic_len > 0 ? (size_t)topic_len : strlen(topic);
	q->msg = msg;
	q->len = len;
	q->held = held;
	q->retained_drop = rdrop;
	q->cls = cls;
	if (m->tail)
		m->tail->next = q;
	else
		m->head = q;
	m->tail = q;
	sky_mutex_unlock(&m->lock);
	return 1;
}

static qmsg *pop(sky_mqtt *m)
{
	sky_mutex_lock(&m->lock);
	qmsg *q = m->head;
	if (q) {
		m->head = q->next;
		if (!m->head)
			m->tail = NULL;
		sky_mqtt_pool_give(&m->pool, q->cls, q->held);
	}
	sky_mutex_unlock(&m->lock);
	return q;
}

static void free_q(qmsg *q)
{
	if (q->msg)
		MQTTAsync_freeMessage(&q->msg);
	MQTTAsync_free(q->topic);
	free(q);
}

int sky_mqtt_queued(sky_mqtt *m)
{
	if (!m)
		return 0;
	sky_mutex_lock(&m->lock);
	int q = m->head != NULL;
	sky_mutex_unlock(&m->lock);
	return q;
}

int sky_mqtt_poll(sky_mqtt *m, int wait_ms) { return sky_mqtt_poll_for(m, wait_ms, -1); }

/* At most one line per SKY_MQTT_DROP_LOG_S per class says how many
 * messages its full pool dropped since the last line (owner's thread). */
#define SKY_MQTT_DROP_LOG_S 10
static void report_drops(sky_mqtt *m)
{
	uint64_t now = sky_clock_ns();
	if (m->reported_ns && now - m->reported_ns < (uint64_t)SKY_MQTT_DROP_LOG_S * 1000000000u)
		return;
	long d[SKY_MQTT_CLASS_N];
	sky_mutex_lock(&m->lock);
	memcpy(d, m->pool.dropped, sizeof d);
	sky_mutex_unlock(&m->lock);
	for (int c = 0; c < SKY_MQTT_CLASS_N; c++)
		if (d[c] != m->reported[c]) {
			SKY_WARN("mqtt: the %s receive pool was full: %ld %s messages dropped "
				 "(%ld so far); other classes are not affected",
				 sky_mqtt_class_name((sky_mqtt_class)c), d[c] - m->reported[c],
				 sky_mqtt_class_name((sky_mqtt_class)c), d[c]);
			m->reported[c] = d[c];
			m->reported_ns = now;
		}
}

/* A retained copy dropped on arrival (cb_msg): on_retained hears of it,
 * and up to SKY_MQTT_RETAINED_LINES lines per SKY_MQTT_DROP_LOG_S say the
 * topic and how many so far (owner's thread). */
#define SKY_MQTT_RETAINED_LINES 8
static void retained_dropped(sky_mqtt *m, const qmsg *q)
{
	uint64_t now = sky_clock_ns();
	sky_mutex_lock(&m->lock);
	long n = m->retained_dropped;
	sky_mutex_unlock(&m->lock);
	if (m->o.on_retained)
		m->o.on_retained(m->o.ctx, q->topic, q->topic_len, q->len);
	if (!m->retained_ns || now - m->retained_ns >= (uint64_t)SKY_MQTT_DROP_LOG_S * 1000000000u) {
		m->retained_ns = now; /* a new window */
		m->retained_lines = 0;
	}
	if (m->retained_lines >= SKY_MQTT_RETAINED_LINES)
		return;
	m->retained_lines++;
	char esc[SKY_TOPIC_BUF * 4];
	SKY_WARN("mqtt: retained message on %s (%zu bytes) dropped: that kind of message is "
		 "never retained (%ld dropped so far, %ld since the last line)",
		 sky_log_escape(q->topic, esc, sizeof esc), q->len, n, n - m->retained_reported);
	m->retained_reported = n;
}

long sky_mqtt_retained_dropped(sky_mqtt *m)
{
	if (!m)
		return 0;
	sky_mutex_lock(&m->lock);
	long n = m->retained_dropped;
	sky_mutex_unlock(&m->lock);
	return n;
}

int sky_mqtt_poll_for(sky_mqtt *m, int wait_ms, int budget_ms)
{
	if (!m)
		return 0;
	report_drops(m);
	uint64_t t0 = sky_clock_ns();
	uint64_t end = t0 + (uint64_t)(wait_ms > 0 ? wait_ms : 0) * 1000000u;
	uint64_t stop = t0 + (uint64_t)(budget_ms > 0 ? budget_ms : 0) * 1000000u;
	int n = 0;
	for (;;) {
		qmsg *q = pop(m);
		if (q) {
			if (q->msg && m->o.on_msg)
				m->o.on_msg(m->o.ctx, q->topic, q->topic_len, q->msg->payload, q->len,
					    q->msg->retained);
			else if (!q->msg && q->retained_drop)
				retained_dropped(m, q);
			else if (!q->msg && m->o.on_oversize)
				m->o.on_oversize(m->o.ctx, q->topic, q->topic_len, q->len);
			free_q(q);
			n++;
			if (budget_ms >= 0 && sky_clock_ns() >= stop)
				return n;
			continue;
		}
		if (n > 0 || sky_clock_ns() >= end)
			return n;
		sky_sleep_ms(1);
	}
}

long sky_mqtt_dropped(sky_mqtt *m)
{
	if (!m)
		return 0;
	sky_mutex_lock(&m->lock);
	long n = 0;
	for (int c = 0; c < SKY_MQTT_CLASS_N; c++)
		n += m->pool.dropped[c];
	sky_mutex_unlock(&m->lock);
	return n;
}

long sky_mqtt_dropped_class(sky_mqtt *m, int cls)
{
	if (!m || cls < 0 || cls >= SKY_MQTT_CLASS_N)
		return 0;
	sky_mutex_lock(&m->lock);
	long n = m->pool.dropped[cls];
	sky_mutex_unlock(&m->lock);
	return n;
}

long sky_mqtt_oversize(sky_mqtt *m)
{
	if (!m)
		return 0;
	sky_mutex_lock(&m->lock);
	long n = m->oversize;
	sky_mutex_unlock(&m->lock);
	return n;
}

int sky_mqtt_claim_broker(const char *broker, char *out, size_t cap)
{
	const char *colon = broker ? strrchr(broker, ':') : NULL;
	char *end = NULL;
	long port = colon ? strtol(colon + 1, &end, 10) : 0;
	if (!colon || colon == broker || !end || *end || port < 1 || port > 65534)
		return SKY_EINVAL;
	int n = snprintf(out, cap, "%.*s:%ld", (int)(colon - broker), broker, port + 1);
	return (n < 0 || (size_t)n >= cap) ? SKY_ERANGE : 0;
}

int sky_mqtt_connect(sky_mqtt **out, const sky_mqtt_opts *o, sky_diag *d)
{
	int rc;
	*out = NULL;
	if (!o->broker || !strchr(o->broker, ':') || strlen(o->broker) > 256 || !o->client_id)
		return sky_diag_set(d, SKY_EINVAL, "broker must be HOST:PORT, got '%s'",
				    o->broker ? o->broker : "");
	sky_mqtt *m = calloc(1, sizeof *m);
	if (!m)
		return sky_diag_set(d, SKY_ENOMEM, "no memory for an MQTT handle");
	m->o = *o;
	sky_mutex_init(&m->lock);
	snprintf(m->uri, sizeof m->uri, "ssl://%s", o->broker);
	/* the broker admits only ids with the prefix (sky_topics.h) */
	int has = strncmp(o->client_id, SKY_MQTT_CLIENT_PREFIX, sizeof SKY_MQTT_CLIENT_PREFIX - 1) == 0;
	snprintf(m->client_id, sizeof m->client_id, "%s%s", has ? "" : SKY_MQTT_CLIENT_PREFIX,
		 o->client_id);
	if ((rc = MQTTAsync_create(&m->client, m->uri, m->client_id, MQTTCLIENT_PERSISTENCE_NONE,
				   NULL)) != MQTTASYNC_SUCCESS) {
		rc = sky_diag_set(d, SKY_EINVAL, "MQTT client for %s: %s", m->uri,
				  MQTTAsync_strerror(rc));
		goto fail;
	}
	MQTTAsync_setCallbacks(m->client, m, cb_lost, cb_msg, NULL);

	MQTTAsync_SSLOptions ssl = MQTTAsync_SSLOptions_initializer;
	ssl.trustStore = o->ca_file;
	ssl.keyStore = o->cert_file;
	ssl.privateKey = o->key_file;
	ssl.enableServerCertAuth = 1;
	ssl.verify = 1; /* check the broker's name against its certificate too */
	ssl.sslVersion = MQTT_SSL_VERSION_TLS_1_2;
	MQTTAsync_willOptions will = MQTTAsync_willOptions_initializer;
	MQTTAsync_connectOptions co = MQTTAsync_connectOptions_initializer;
	co.keepAliveInterval = o->keepalive_s > 0 ? o->keepalive_s : 30;
	co.cleansession = o->persistent ? 0 : 1;
	co.connectTimeout = o->connect_timeout_s > 0 ? o->connect_timeout_s : 10;
	co.ssl = &ssl;
	co.MQTTVersion = MQTTVERSION_3_1_1;
	if (o->will_topic) {
		will.topicName = o->will_topic;
		will.message = NULL; /* binary payload below */
		will.payload.data = o->will_payload;
		will.payload.len = (int)o->will_len;
		will.retained = o->will_retained;
		will.qos = o->will_qos;
		co.will = &will;
	}
	op_slot *s = slot_take(m);
	co.onSuccess = on_conn_ok;
	co.onFailure = on_fail;
	co.context = s;
	if ((rc = MQTTAsync_connect(m->client, &co)) != MQTTASYNC_SUCCESS) {
		rc = sky_diag_set(d, SKY_ENET, "connect to %s: %s", o->broker, MQTTAsync_strerror(rc));
		goto fail;
	}
	int r = slot_wait(m, s, co.connectTimeout * 1000 + 2000);
	if (r != 1) {
		rc = sky_diag_set(d, SKY_ENET, "connect to %s as %s: %s", o->broker, m->client_id,
				  r == 0 ? "timed out" : s->msg[0] ? s->msg : "refused");
		goto fail;
	}
	atomic_store(&m->connected, 1);
	/* no Nagle on our side of the link (the broker's config sets its own):
	 * frames and their small neighbours must not wait for a delayed ACK */
	sky_net_nodelay_to_port(atoi(strrchr(o->broker, ':') + 1));
	*out = m;
	return 0;
fail:
	if (m->client)
		MQTTAsync_destroy(&m->client);
	sky_mutex_free(&m->lock);
	free(m);
	return rc;
}

int sky_mqtt_subscribe(sky_mqtt *m, const char *filter, int qos, int timeout_ms, sky_diag *d)
{
	if (!m || !atomic_load(&m->connected))
		return sky_diag_set(d, SKY_ENET, "subscribe %s: not connected", filter);
	op_slot *s = slot_take(m);
	if (!s)
		return sky_diag_set(d, SKY_ENET, "subscribe %s: too many requests pending", filter);
	MQTTAsync_responseOptions ro = MQTTAsync_responseOptions_initializer;
	ro.onSuccess = on_ok;
	ro.onFailure = on_fail;
	ro.context = s;
	int rc = MQTTAsync_subscribe(m->client, filter, qos, &ro);
	if (rc != MQTTASYNC_SUCCESS) {
		atomic_store(&s->done, -1); /* no callback will come */
		slot_wait(m, s, 0);
		return sky_diag_set(d, SKY_ENET, "subscribe %s: %s", filter, MQTTAsync_strerror(rc));
	}
	int r = slot_wait(m, s, timeout_ms);
	if (r == 0)
		return sky_diag_set(d, SKY_ETIMEOUT, "subscribe %s: no SUBACK in %d ms", filter,
				    timeout_ms);
	if (r < 0)
		return sky_diag_set(d, s->code == 0x80 ? SKY_EAUTH : SKY_ENET,
				    "subscribe %s: refused by the broker (%s)", filter,
				    s->code == 0x80 ? "ACL" : s->msg);
	return 0;
}

int sky_mqtt_publish(sky_mqtt *m, const char *topic, const void *data, size_t len, int qos,
		     int retained, sky_diag *d)
{
	if (len > 268435455u - 65536u) /* MQTT 3.1.1 §2.2.3 less the header */
		return sky_diag_set(d, SKY_ERANGE, "publish %s: %zu bytes is over MQTT's limit", topic,
				    len);
	if (!m || !atomic_load(&m->connected))
		return sky_diag_set(d, SKY_ENET, "publish %s: not connected", topic);
	MQTTAsync_message msg = MQTTAsync_message_initializer;
	msg.payload = (void *)data;
	msg.payloadlen = (int)len;
	msg.qos = qos;
	msg.retained = retained;
	int rc = MQTTAsync_sendMessage(m->client, topic, &msg, NULL);
	if (rc != MQTTASYNC_SUCCESS)
		return sky_diag_set(d, SKY_ENET, "publish %s: %s", topic, MQTTAsync_strerror(rc));
	return 0;
}

int sky_mqtt_flush(sky_mqtt *m, int timeout_ms)
{
	if (!m)
		return 0;
	uint64_t end = sky_clock_ns() + (uint64_t)timeout_ms * 1000000u;
	for (;;) {
		MQTTAsync_token *tokens = NULL;
		int n = 0;
		if (MQTTAsync_getPendingTokens(m->client, &tokens) == MQTTASYNC_SUCCESS && tokens) {
			while (tokens[n] != -1)
				n++;
			MQTTAsync_free(tokens);
		}
		if (n == 0)
			return 0;
		if (sky_clock_ns() >= end || !atomic_load(&m->connected))
			return SKY_ETIMEOUT;
		sky_sleep_ms(2);
	}
}

int sky_mqtt_connected(sky_mqtt *m) { return m && atomic_load(&m->connected); }

void sky_mqtt_close(sky_mqtt *m, int timeout_ms)
{
	if (!m)
		return;
	if (atomic_load(&m->connected)) {
		MQTTAsync_disconnectOptions dc = MQTTAsync_disconnectOptions_initializer;
		dc.timeout = timeout_ms;
		op_slot *s = slot_take(m);
		if (s) {
			dc.onSuccess = on_conn_ok;
			dc.onFailure = on_fail;
			dc.context = s;
		}
		if (MQTTAsync_disconnect(m->client, &dc) == MQTTASYNC_SUCCESS && s)
			slot_wait(m, s, timeout_ms + 500);
		atomic_store(&m->connected, 0);
	}
	MQTTAsync_destroy(&m->client);
	for (qmsg *q = pop(m); q; q = pop(m))
		free_q(q);
	sky_mutex_free(&m->lock);
	free(m);
}

void sky_mqtt_backoff_init(sky_mqtt_backoff *b, int base_ms, int max_ms, uint64_t seed)
{
	b->base_ms = base_ms > 1 ? base_ms : 2;
	b->max_ms = max_ms > b->base_ms ? max_ms : b->base_ms;
	b->cur_ms = b->base_ms;
	b->state = seed ? seed : 0x9e3779b97f4a7c15ull;
}

int sky_mqtt_backoff_next(sky_mqtt_backoff *b)
{
	/* xorshift64 (Marsaglia 2003): plenty for spreading reconnects */
	uint64_t x = b->state;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	b->state = x;
	int half = b->cur_ms / 2;
	int ms = half + (int)(x % (uint64_t)(b->cur_ms - half + 1));
	b->cur_ms = b->cur_ms > b->max_ms / 2 ? b->max_ms : b->cur_ms * 2;
	return ms;
}

void sky_mqtt_backoff_reset(sky_mqtt_backoff *b) { b->cur_ms = b->base_ms; }
