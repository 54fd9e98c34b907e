/* Enrollment (sky_agent_enroll, step 1 of sky_agent.h): a CSR over the
 * claim identity, answered by the planner with the board's certificate. */
#include "agent_internal.h"

#include "sky_clock.h"
#include "sky_enroll.h"
#include "sky_file.h"
#include "sky_log.h"
#include "sky_signal.h"

#include <stdio.h>
#include <string.h>

/* enroll_msg fills reply and len under lock, then sets got; the waiting
 * loop reads got without the lock, and reply and len only once got is set
 * (the atomic store and load order them). */
typedef struct enroll_wait {
	char topic[SKY_TOPIC_BUF];
	char reply[SKY_ENROLL_REPLY_MAX]; /* under lock until got */
	size_t len;                       /* under lock until got */
	_Atomic int got;
	sky_mutex lock;
} enroll_wait;

static void enroll_msg(void *ctx, const char *topic, size_t tl, const unsigned char *p, size_t len,
		       int retained)
{
	enroll_wait *w = ctx;
	sky_mutex_lock(&w->lock);
	if (!atomic_load(&w->got) && strcmp(topic, w->topic) == 0) {
		if (len > sizeof w->reply) {
			SKY_WARN("enroll: reply of %zu bytes over the %zu limit, ignored", len,
				 sizeof w->reply);
		} else {
			memcpy(w->reply, p, len);
			w->len = len;
			atomic_store(&w->got, 1);
		}
	}
	sky_mutex_unlock(&w->lock);
}

static void dir_of(const char *path, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s", path);
	char *slash = strrchr(buf, '/');
	if (slash)
		*slash = '\0';
	else
		snprintf(buf, cap, ".");
}

/* n random bytes as 2n hex digits at out (room for 2n + 1). Returns 0, or
 * SKY_ECRYPTO with d naming `what` the randomness was for. */
static int random_hex(sky_sign_rng *rng, size_t n, char *out, const char *what, sky_diag *d)
{
	unsigned char raw[16];
	if (n > sizeof raw || sky_sign_rng_func(rng, raw, n) != 0)
		return sky_diag_set(d, SKY_ECRYPTO, "enroll: no randomness for the %s", what);
	for (size_t i = 0; i < n; i++)
		snprintf(out + 2 * i, 3, "%02x", raw[i]);
	return 0;
}

/* Sends the request and waits for the answer on w->topic, asking again
 * every 3 s. Returns 0 once it came, SKY_ETIMEOUT if not within the
 * enrollment timeout (or the connection or the run ended first). */
static int await_cert(const sky_agent_opts *o, sky_mqtt *m, enroll_wait *w, const char *topic,
		      const char *req, size_t req_len, sky_diag *d)
{
	int rc = sky_mqtt_publish(m, topic, req, req_len, 1, 0, d);
	if (rc)
		return rc;
	SKY_INFO("enroll: sent a CSR for %s on %s", o->id, topic);
	double end = sky_clock_s() + (o->enroll_timeout_s > 0 ? o->enroll_timeout_s : 30);
	double resend = sky_clock_s() + 3.0;
	while (!atomic_load(&w->got) && sky_clock_s() < end && !sky_signal_stop_requested() &&
	       sky_mqtt_connected(m)) {
		sky_mqtt_poll(m, 10);
		/* the request is not retained: if the planner was not listening yet
		 * (started after us, or restarting), ask again; the reply topic is
		 * ours alone, and the first answer wins */
		if (!atomic_load(&w->got) && sky_clock_s() >= resend) {
			SKY_INFO("enroll: no answer yet; sending the request again");
			sky_mqtt_publish(m, topic, req, req_len, 1, 0, NULL);
			resend = sky_clock_s() + 3.0;
		}
	}
	if (!atomic_load(&w->got))
		return sky_diag_set(d, SKY_ETIMEOUT, "enroll: no answer from the planner on %s",
				    w->topic);
	return 0;
}

/* Checks the options and trusts the claim bundle's CA. Returns 0, 1 when
 * the board is enrolled already, or the error. */
static int enroll_prepare(const sky_agent_opts *o, sky_diag *d)
{
	int rc;
	if (sky_identity_enrolled(o->state_dir)) {
		SKY_INFO("enroll: %s already holds an identity; not enrolling again", o->state_dir);
		return 1;
	}
	if (!o->id || (rc = sky_enroll_check_id(o->id, d)) != 0)
		return o->id ? rc : sky_diag_set(d, SKY_EINVAL, "enroll: --id is required");
	if (!o->claim_token || !o->claim_ca)
		return sky_diag_set(d, SKY_EINVAL, "enroll: --claim TOKEN and --pki-ca CA.crt are required");
	if ((rc = sky_file_mkdirs(o->state_dir, 0700)) != 0)
		return sky_diag_set(d, rc, "enroll: cannot create %s", o->state_dir);
	return sky_identity_trust_ca(o->state_dir, o->claim_ca, d);
}

int sky_agent_enroll(const sky_agent_opts *o, sky_diag *d)
{
	int rc = 0;
	sky_mqtt *m = NULL;
	sky_sign_rng rng;
	static enroll_wait w;
	static char req[SKY_ENROLL_REQ_MAX];
	char claim_dir[512], cert[600], key[600], nonce[48], topic[SKY_TOPIC_BUF];

	memset(&rng, 0, sizeof rng);
	if ((rc = enroll_prepare(o, d)) != 0)
		return rc > 0 ? 0 : rc;
	dir_of(o->claim_ca, claim_dir, sizeof claim_dir);
	snprintf(cert, sizeof cert, "%s/claim.crt", claim_dir);
	snprintf(key, sizeof key, "%s/claim.key", claim_dir);
	if ((rc = sky_sign_rng_init(&rng, "skyd-enroll", d)) != 0)
		goto exit;
	rc = sky_identity_enroll_request(o->state_dir, o->id, o->claim_token, &rng, req, sizeof req, d);
	if (rc < 0)
		goto exit;
	size_t req_len = (size_t)rc;
	/* the claim listener (fleet port + 1) keeps the client id we choose, so
	 * boards enrolling at once do not close each other's connections. The
	 * id is also the nonce: the claim ACL pins the topic level to it (%c),
	 * so this connection has its own rate-limit bucket at the planner, and
	 * only it reads its answer; random, since whoever knew it could connect
	 * with it and close ours */
	char claim_broker[300];
	snprintf(nonce, sizeof nonce, "%sclaim-", SKY_MQTT_CLIENT_PREFIX);
	if ((rc = random_hex(&rng, 16, nonce + strlen(nonce), "nonce", d)) != 0)
		goto exit;
	memset(&w, 0, sizeof w);
	sky_mutex_init(&w.lock);
	sky_topic_enroll(w.topic, sizeof w.topic, nonce, SKY_TOPIC_CERT);
	sky_topic_enroll(topic, sizeof topic, nonce, SKY_TOPIC_CSR);
	if (sky_mqtt_claim_broker(o->broker, claim_broker, sizeof claim_broker) != 0) {
		rc = sky_diag_set(d, SKY_EINVAL, "enroll: broker must be HOST:PORT, got '%s'",
				  o->broker ? o->broker : "");
		goto exit;
	}
	sky_mqtt_opts mo = {.broker = claim_broker, .client_id = nonce, .ca_file = o->claim_ca,
			    .cert_file = cert, .key_file = key, .keepalive_s = 30,
			    .on_msg = enroll_msg, .ctx = &w};
	if ((rc = sky_mqtt_connect(&m, &mo, d)) != 0)
		goto exit;
	if ((rc = sky_mqtt_subscribe(m, w.topic, 1, 5000, d)) != 0)
		goto exit;
	if ((rc = await_cert(o, m, &w, topic, req, req_len, d)) != 0)
		goto exit;
	if ((rc = sky_identity_enroll_accept(o->state_dir, o->id, w.reply, w.len, d)) != 0)
		goto exit;
	/* session 0 marks a fresh identity: from now on a missing session file
	 * means the board's state was lost, and skyd says so */
	if ((rc = agent_write_counter(o->state_dir, "session", 0)) != 0) {
		rc = sky_diag_set(d, rc, "enroll: cannot write the session counter in %s",
				  o->state_dir);
		goto exit;
	}
	SKY_INFO("enroll: %s enrolled; certificate in %s", o->id, o->state_dir);
exit:
	sky_mqtt_close(m, 1000);
	sky_sign_rng_free(&rng);
	return rc;
}
