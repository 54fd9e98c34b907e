/* Enrollment (svc_internal.h): a board's CSR on sky/v1/enroll/<nonce>/csr
 * answered with its certificate by the CA, behind rate limits. */
#include "svc_internal.h"

#include "sky_clock.h"

#include <stdio.h>

/* Enrollment intake: per nonce (one claim connection's request) 2 at once
 * and one every 2 s after (a board resends every 3 s); all nonces
 * together 32 at once and 16 per second after, so 16 boards enrolling at
 * once pass and a flood of fresh nonces costs a table look-up each. At
 * most 5 refusal lines per 10 s reach the log (svc_log.c); the rest are
 * counted. */
#define ENROLL_NONCE_BURST 2
#define ENROLL_NONCE_PER_S 0.5
#define ENROLL_ALL_BURST 32
#define ENROLL_ALL_PER_S 16

void svc_enroll_init(svc *s)
{
	sky_bucket_init(&s->enroll.all, ENROLL_ALL_BURST, ENROLL_ALL_PER_S);
	sky_keyed_init(&s->enroll.nonce, ENROLL_NONCE_BURST, ENROLL_NONCE_PER_S);
}

long svc_enroll_limited(const svc *s)
{
	return s->enroll.limited;
}

void svc_enroll_on_csr(svc *s, const char *nonce, const char *p, size_t len)
{
	char topic[SKY_TOPIC_BUF], id[SKY_ENROLL_ID_MAX + 1] = "";
	size_t reply_len = 0;
	sky_diag d;
	sky_diag_clear(&d);
	/* before anything is parsed: a flood costs a table look-up a message */
	double now = sky_clock_s();
	if (!sky_keyed_take(&s->enroll.nonce, nonce, now) || !sky_bucket_take(&s->enroll.all, now)) {
		s->enroll.limited++;
		s->reg.c.enroll_refused++;
		svc_warn(s, SVC_LOG_ENROLL,
			 "enrollment on nonce %s dropped unread: over the rate limit "
			 "(%ld dropped so far)",
			 nonce, s->enroll.limited);
		return;
	}
	if (len > SKY_ENROLL_REQ_MAX) {
		s->reg.c.oversize++;
		s->reg.c.enroll_refused++;
		svc_warn(s, SVC_LOG_ENROLL,
			 "enrollment on nonce %s: %zu bytes over the limit, refused unparsed", nonce,
			 len);
		return;
	}
	int rc = sky_ca_enroll(&s->ca, p, len, sky_clock_unix(), s->enroll.reply,
			       sizeof s->enroll.reply, &reply_len, id, &d);
	if (rc == 0) {
		s->reg.c.enrolled++;
		sky_registry_add(&s->reg, id);
		SKY_INFO("enrolled board %s (nonce %s)", id, nonce);
	} else {
		s->reg.c.enroll_refused++;
		svc_warn(s, SVC_LOG_ENROLL, "enrollment refused for '%s' (nonce %s): %s", id, nonce,
			 d.msg);
	}
	s->reg.changed = 1;
	if (reply_len > 0 && sky_topic_enroll(topic, sizeof topic, nonce, SKY_TOPIC_CERT) == 0)
		svc_publish(s, topic, s->enroll.reply, reply_len, 1, 0, NULL);
}
