/* Enrollment (svc_internal.h): a board's CSR on sky/v1/enroll/<nonce>/csr
 * answered with its certificate by the CA, behind rate limits. */
#include "svc_internal.h"

#include "sky_clock.h"

#include <stdio.h>

/* Enrollment intake. The nonce level of the topic is the claim
 * connection's client id: the claim listener's ACL pins it (pattern %c),
 * so a connection cannot post under fresh nonces (the broker denies them)
 * and the bucket per nonce is a bucket per connection: 2 at once and one
 * every 2 s after (a board resends every 3 s), checked first, so what one
 * connection is refused is taken from nobody else. Then two totals: every
 * request that is read (a JSON decode and a token file look-up: 256 at
 * once, 128 per second), and, of those, the ones whose token is valid,
 * which go on to the CSR check and the signing (32 at once, 16 per second,
 * so 16 boards enrolling at once pass). Requests without a valid token,
 * which is all a claim-bundle holder without a token can send, never take
 * from the signing budget: to lock boards out it must keep the read total
 * empty, from over 256 connections at once or 64 new ones a second. At
 * most 5 refusal lines per 10 s reach the log (svc_log.c); the rest are
 * counted. */
#define ENROLL_NONCE_BURST 2
#define ENROLL_NONCE_PER_S 0.5
#define ENROLL_ALL_BURST 256
#define ENROLL_ALL_PER_S 128
#define ENROLL_ISSUE_BURST 32
#define ENROLL_ISSUE_PER_S 16

void svc_enroll_init(svc *s)
{
	sky_bucket_init(&s->enroll.all, ENROLL_ALL_BURST, ENROLL_ALL_PER_S);
	sky_bucket_init(&s->enroll.issue, ENROLL_ISSUE_BURST, ENROLL_ISSUE_PER_S);
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
	/* before anything is parsed: a flood costs a table look-up a message;
	 * the connection's own bucket first, so what it is refused there is
	 * never taken from everyone's */
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
	/* only a request with a valid token may take from the signing budget */
	sky_diag why;
	sky_diag_clear(&why);
	if (sky_ca_enroll_check(&s->ca, p, len, sky_clock_unix(), &why) == 0 &&
	    !sky_bucket_take(&s->enroll.issue, now)) {
		s->reg.c.enroll_refused++;
		svc_warn(s, SVC_LOG_ENROLL,
			 "enrollment on nonce %s left unanswered: over the signing rate limit "
			 "(the board asks again)",
			 nonce);
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
