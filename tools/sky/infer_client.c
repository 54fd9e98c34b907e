/* A client of a serving job; see infer_client.h. */
#include "infer_client.h"

#include "sky_clock.h"
#include "sky_file.h"
#include "sky_mqtt.h"
#include "sky_planmsg.h"
#include "sky_pki_layout.h"
#include "sky_sign.h"
#include "sky_topics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sky_ic {
	sky_mqtt *m;
	char cn[SKY_TOPIC_SEGMENT_MAX + 1];
	char job[SKY_TOPIC_SEGMENT_MAX + 1];
	char req_topic[SKY_TOPIC_BUF], resp_filter[SKY_TOPIC_BUF], plan_topic[SKY_TOPIC_BUF];
	sky_ic_resp_fn fn;
	void *ctx;
	long bad, refused;
	/* the route, from the job's signed plan: requests to its first stage's
	 * board, logits only from its last stage's, errors from the first or
	 * the planner. The previous plan's boards are still heard (answers
	 * in flight at a re-plan); with no plan, requests go to the planner. */
	mbedtls_x509_crt planner;
	int have_plan;
	int64_t epoch;
	char first[2][SKY_TOPIC_SEGMENT_MAX + 1], last[2][SKY_TOPIC_SEGMENT_MAX + 1];
	char payload[SKY_SIGN_MAX_PAYLOAD + 1];
	sky_planmsg plan;
	/* ids answered (a ring of their hashes): a second answer to one is
	 * dropped, so the caller sees each request answered once */
	uint64_t seen[SKY_IC_SEEN];
	long n_seen, dups;
	sky_infer_resp resp;                /* the one being handed to fn */
	char buf[SKY_INFER_REQ_MAX_BYTES];  /* the request being encoded */
};

static int put(char *out, const char *a, const char *b, sky_diag *d)
{
	int n = b ? snprintf(out, SKY_IC_PATH_MAX, "%s/%s", a, b) : snprintf(out, SKY_IC_PATH_MAX, "%s", a);
	if (n < 0 || n >= SKY_IC_PATH_MAX)
		return sky_diag_set(d, SKY_ERANGE, "path too long: %s", a);
	return 0;
}

int sky_ic_resolve(const char *pki, const char *ca, const char *cert, const char *key,
		   sky_ic_files *out, sky_diag *d)
{
	int rc = 0;
	memset(out, 0, sizeof *out);
	if ((!cert || !key) && !pki)
		return sky_diag_set(d, SKY_EINVAL,
				    "no client identity: give --pki DIR (a bundle from `sky pki "
				    "client NAME`, DIR/clients/NAME) or --cert and --key");
	if (cert)
		rc = put(out->cert, cert, NULL, d);
	else
		rc = put(out->cert, pki, SKY_CA_CLIENT_CERT_FILE, d);
	if (!rc)
		rc = key ? put(out->key, key, NULL, d) : put(out->key, pki, SKY_CA_CLIENT_KEY_FILE, d);
	if (!rc && ca) {
		rc = put(out->ca, ca, NULL, d);
	} else if (!rc && pki) {
		rc = put(out->ca, pki, SKY_CA_CERT_FILE, d);
	} else if (!rc) {
		/* beside the certificate, as `sky pki client` lays a bundle out */
		char dir[SKY_IC_PATH_MAX];
		snprintf(dir, sizeof dir, "%s", out->cert);
		char *slash = strrchr(dir, '/');
		if (slash)
			*slash = '\0';
		rc = slash ? put(out->ca, dir, "ca.crt", d) : put(out->ca, "ca.crt", NULL, d);
	}
	if (rc)
		return rc;
	/* the planner's certificate, which signs the plans: beside the CA */
	char dir[SKY_IC_PATH_MAX];
	snprintf(dir, sizeof dir, "%s", out->ca);
	char *slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	rc = slash ? put(out->planner, dir, "planner.crt", d) : put(out->planner, "planner.crt", NULL, d);
	if (rc)
		return rc;
	const char *files[] = {out->ca, out->cert, out->key, out->planner};
	for (int i = 0; i < 4; i++)
		if (!sky_file_exists(files[i]))
			return sky_diag_set(d, SKY_ENOTFOUND, "%s: not there (%s)", files[i],
					    i == 0   ? "the fleet CA; --ca"
					    : i == 1 ? "--cert"
					    : i == 2 ? "--key"
						     : "the planner's certificate, beside the CA: "
						       "`sky pki client NAME` puts it in the bundle");
	return 0;
}

/* FNV-1a of an id. */
static uint64_t id_key(const char *id)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (const char *c = id; *c; c++)
		h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
	return h;
}

/* A plan of the job: verified with the planner's certificate, the newest
 * epoch sets the route. */
static void on_plan(sky_ic *c, const unsigned char *p, size_t len)
{
	size_t plen = 0;
	if (len == 0 ||
	    sky_verify_envelope(&c->planner, (const char *)p, len, c->payload, sizeof c->payload - 1,
				&plen, NULL) != 0 ||
	    sky_planmsg_decode(c->payload, plen, &c->plan, NULL) != 0 ||
	    strcmp(c->plan.job, c->job) != 0 || (c->have_plan && c->plan.epoch <= c->epoch))
		return;
	memcpy(c->first[1], c->first[0], sizeof c->first[0]);
	memcpy(c->last[1], c->last[0], sizeof c->last[0]);
	c->epoch = c->plan.epoch;
	c->have_plan = 1;
	if (c->plan.infer.on) {
		snprintf(c->first[0], sizeof c->first[0], "%s", c->plan.stages[0].board);
		snprintf(c->last[0], sizeof c->last[0], "%s",
			 c->plan.stages[c->plan.n_stages - 1].board);
	} else {
		/* not a serving plan: the planner answers why */
		snprintf(c->first[0], sizeof c->first[0], "%s", SKY_TOPIC_PLANNER_CN);
		c->last[0][0] = '\0';
	}
	sky_topic_job_pair(c->req_topic, sizeof c->req_topic, c->job, SKY_TOPIC_REQ, c->first[0],
			   c->cn);
}

/* 1 if sender may send this answer: logits only the last stage's board,
 * an error the first stage's board or the planner. */
static int sender_ok(const sky_ic *c, const char *sender, int ok)
{
	for (int i = 0; i < 2; i++) {
		if (ok && c->last[i][0] && !strcmp(sender, c->last[i]))
			return 1;
		if (!ok && c->first[i][0] && !strcmp(sender, c->first[i]))
			return 1;
	}
	return !ok && !strcmp(sender, SKY_TOPIC_PLANNER_CN);
}

static void on_msg(void *ctx, const char *topic, size_t tl, const unsigned char *p, size_t len,
		   int retained)
{
	sky_ic *c = ctx;
	char job[SKY_TOPIC_SEGMENT_MAX + 1], to[SKY_TOPIC_SEGMENT_MAX + 1],
		sender[SKY_TOPIC_SEGMENT_MAX + 1];
	if (strlen(topic) != tl)
		return;
	if (!strcmp(topic, c->plan_topic)) {
		on_plan(c, p, len);
		return;
	}
	/* sky/v1/job/<job>/resp/<our CN>/<sender> */
	if (sky_topic_parse_job_pair(topic, tl, SKY_TOPIC_RESP, job, sizeof job, to, sizeof to,
				     sender, sizeof sender) != 0 ||
	    strcmp(job, c->job) != 0 || strcmp(to, c->cn) != 0)
		return;
	if (sky_infer_resp_decode((const char *)p, len, &c->resp, NULL) != 0) {
		c->bad++;
		return;
	}
	if (!sender_ok(c, sender, c->resp.ok)) {
		c->refused++;
		return;
	}
	if (c->resp.id[0]) {
		/* a request a re-plan replayed may be answered by the old
		 * pipeline and the new one (planner/sky_servefault.h) */
		uint64_t k = id_key(c->resp.id);
		long n = c->n_seen < SKY_IC_SEEN ? c->n_seen : SKY_IC_SEEN;
		for (long i = 0; i < n; i++)
			if (c->seen[i] == k) {
				c->dups++;
				return;
			}
		c->seen[c->n_seen++ % SKY_IC_SEEN] = k;
	}
	c->fn(c->ctx, &c->resp, (const char *)p, len);
}

int sky_ic_open(sky_ic **out, const char *broker, const sky_ic_files *f, const char *job,
		sky_ic_resp_fn fn, void *ctx, sky_diag *d)
{
	char tools[300], id[32];
	*out = NULL;
	sky_ic *c = calloc(1, sizeof *c);
	mbedtls_x509_crt me;
	mbedtls_x509_crt_init(&me);
	int rc = c ? 0 : sky_diag_set(d, SKY_ENOMEM, "out of memory");
	if (rc)
		goto exit;
	mbedtls_x509_crt_init(&c->planner);
	if ((rc = sky_sign_load_cert(&c->planner, f->planner, d)) != 0)
		goto exit;
	c->fn = fn;
	c->ctx = ctx;
	snprintf(c->job, sizeof c->job, "%s", job ? job : "");
	if (!sky_topic_segment_ok(c->job)) {
		rc = sky_diag_set(d, SKY_EINVAL, "job '%s': 1-64 of A-Z a-z 0-9 _ . -", c->job);
		goto exit;
	}
	/* our CN names our topics; the ACL lets only us use them */
	if ((rc = sky_sign_load_cert(&me, f->cert, d)) != 0)
		goto exit;
	if (sky_sign_cert_cn(&me, c->cn, sizeof c->cn) != 0 ||
	    strncmp(c->cn, SKY_TOPIC_CLIENT_PREFIX, strlen(SKY_TOPIC_CLIENT_PREFIX)) != 0 ||
	    sky_topic_job_pair(c->req_topic, sizeof c->req_topic, c->job, SKY_TOPIC_REQ,
			       SKY_TOPIC_PLANNER_CN, c->cn) ||
	    sky_topic_job_pair(c->resp_filter, sizeof c->resp_filter, c->job, SKY_TOPIC_RESP, c->cn,
			       NULL) ||
	    sky_topic_job(c->plan_topic, sizeof c->plan_topic, c->job, SKY_TOPIC_PLAN)) {
		rc = sky_diag_set(d, SKY_EAUTH,
				  "%s: not a client identity (its CN must start with %s: `sky pki "
				  "client NAME` issues one)",
				  f->cert, SKY_TOPIC_CLIENT_PREFIX);
		goto exit;
	}
	if (sky_mqtt_claim_broker(broker, tools, sizeof tools) != 0) {
		rc = sky_diag_set(d, SKY_EINVAL, "--broker must be HOST:PORT (port below 65535), got '%s'",
				  broker ? broker : "");
		goto exit;
	}
	char tag[9];
	if ((rc = sky_ic_tag(tag)) != 0) {
		sky_diag_set(d, rc, "no randomness for the client id");
		goto exit;
	}
	snprintf(id, sizeof id, "infer-%s", tag);
	sky_mqtt_opts mo = {.broker = tools, .client_id = id, .ca_file = f->ca,
			    .cert_file = f->cert, .key_file = f->key, .keepalive_s = 30,
			    .on_msg = on_msg, .ctx = c};
	if ((rc = sky_mqtt_connect(&c->m, &mo, d)) != 0)
		goto exit;
	if ((rc = sky_mqtt_subscribe(c->m, c->resp_filter, 1, 10000, d)) != 0 ||
	    (rc = sky_mqtt_subscribe(c->m, c->plan_topic, 1, 10000, d)) != 0)
		goto exit;
	/* the plan is retained: it follows the subscription at once if the
	 * job has one */
	for (double t0 = sky_clock_s(); !c->have_plan && sky_clock_s() - t0 < 2.0;)
		sky_mqtt_poll(c->m, 50);
exit:
	mbedtls_x509_crt_free(&me);
	if (rc)
		sky_ic_close(c);
	else
		*out = c;
	return rc;
}

const char *sky_ic_cn(const sky_ic *c) { return c->cn; }

int sky_ic_send(sky_ic *c, const sky_infer_req *r, sky_diag *d)
{
	int n = sky_infer_req_encode(r, c->buf, sizeof c->buf, d);
	if (n < 0)
		return n;
	int rc = sky_mqtt_publish(c->m, c->req_topic, c->buf, (size_t)n, 1, 0, d);
	return rc ? rc : n;
}

int sky_ic_poll(sky_ic *c, int wait_ms) { return sky_mqtt_poll(c->m, wait_ms); }

int sky_ic_connected(sky_ic *c) { return c && sky_mqtt_connected(c->m); }

long sky_ic_bad(const sky_ic *c) { return c->bad; }

long sky_ic_dups(const sky_ic *c) { return c->dups; }

long sky_ic_refused(const sky_ic *c) { return c->refused; }

const sky_planmsg *sky_ic_plan(const sky_ic *c)
{
	return c && c->have_plan && c->plan.infer.on ? &c->plan : NULL;
}

void sky_ic_close(sky_ic *c)
{
	if (!c)
		return;
	if (c->m)
		sky_mqtt_flush(c->m, 1000);
	sky_mqtt_close(c->m, 1000);
	mbedtls_x509_crt_free(&c->planner);
	free(c);
}

int sky_ic_tag(char out[9])
{
	unsigned char raw[4];
	sky_sign_rng rng;
	int rc = sky_sign_rng_init(&rng, "sky-infer", NULL);
	if (!rc)
		rc = sky_sign_rng_func(&rng, raw, sizeof raw) ? SKY_ECRYPTO : 0;
	sky_sign_rng_free(&rng);
	for (int i = 0; i < 4 && !rc; i++)
		snprintf(out + 2 * i, 3, "%02x", raw[i]);
	return rc;
}
