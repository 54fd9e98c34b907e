/* What the board says about itself: the probe at the job's shapes, the
 * link probe (echoes through the broker) and the capability report. */
#include "agent_internal.h"

#include "sky_clock.h"
#include "sky_log.h"
#include "sky_probe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ECHO_PINGS 10
#define ECHO_BULK_MSGS 8
#define ECHO_BULK_BYTES (128u << 10)

void agent_on_echo(agent *a, const unsigned char *p, size_t len)
{
	if (len < 8)
		return;
	uint64_t seq = 0;
	for (int i = 0; i < 8; i++)
		seq = seq << 8 | p[i];
	if (len >= ECHO_BULK_BYTES)
		atomic_fetch_add(&a->echo_bulk_seen, 1);
	else
		atomic_store(&a->echo_seq_seen, seq);
}

/* Latency: ECHO_PINGS small messages one at a time, median round trip.
 * Bandwidth: ECHO_BULK_MSGS messages of 128 KiB back to back; each crosses
 * the board's link twice (up to the broker and back), so bw = 2 x bytes /
 * time until the last one is back. Bounded: 2 s per ping, 10 s for bulk. */
void agent_link_probe(agent *a)
{
	char topic[SKY_TOPIC_BUF];
	static unsigned char buf[ECHO_BULK_BYTES];
	double rtt[ECHO_PINGS];
	int n = 0;
	sky_topic_board(topic, sizeof topic, a->idn.id, SKY_TOPIC_ECHO);
	for (int i = 0; i < ECHO_PINGS; i++) {
		uint64_t seq = ((uint64_t)a->session << 32) | (uint64_t)(i + 1);
		for (int k = 0; k < 8; k++)
			buf[k] = (unsigned char)(seq >> (56 - 8 * k));
		double t0 = sky_clock_s();
		if (sky_mqtt_publish(a->m, topic, buf, 64, 0, 0, NULL) != 0)
			return;
		/* spin for the first 2 ms (loopback answers in ~1 ms), then sleep,
		 * so sixteen boards probing at once do not starve each other */
		while (atomic_load(&a->echo_seq_seen) != seq && sky_clock_s() - t0 < 2.0 &&
		       !atomic_load(&a->lost))
			sky_mqtt_poll(a->m, sky_clock_s() - t0 > 0.002 ? 1 : 0);
		if (atomic_load(&a->echo_seq_seen) == seq)
			rtt[n++] = sky_clock_s() - t0;
	}
	if (n == 0) {
		SKY_WARN("link probe: no echo came back from the broker");
		return;
	}
	for (int i = 1; i < n; i++) /* insertion sort: n <= 10 */
		for (int j = i; j > 0 && rtt[j] < rtt[j - 1]; j--) {
			double t = rtt[j];
			rtt[j] = rtt[j - 1];
			rtt[j - 1] = t;
		}
	double lat = n % 2 ? rtt[n / 2] : 0.5 * (rtt[n / 2 - 1] + rtt[n / 2]);
	atomic_store(&a->echo_bulk_seen, 0);
	memset(buf, 0xa5, 8);
	double t0 = sky_clock_s();
	for (int i = 0; i < ECHO_BULK_MSGS; i++)
		sky_mqtt_publish(a->m, topic, buf, sizeof buf, 0, 0, NULL);
	while (atomic_load(&a->echo_bulk_seen) < ECHO_BULK_MSGS && sky_clock_s() - t0 < 10.0 &&
	       !atomic_load(&a->lost))
		sky_mqtt_poll(a->m, 1);
	double el = sky_clock_s() - t0;
	int bulk = atomic_load(&a->echo_bulk_seen);
	double bw = bulk > 0 ? 2.0 * bulk * (double)sizeof buf / el : 0;
	sky_mutex_lock(&a->lock);
	a->caps.link_lat_s = lat;
	a->caps.link_bw = bw;
	sky_mutex_unlock(&a->lock);
	SKY_INFO("link probe: round trip %.3f ms (median of %d), %.1f MB/s through the broker",
		 1e3 * lat, n, bw / 1e6);
}

int agent_publish_caps(agent *a)
{
	char buf[SKY_CAPS_MAX_BYTES], topic[SKY_TOPIC_BUF];
	sky_diag d;
	sky_diag_clear(&d);
	sky_mutex_lock(&a->lock);
	a->caps.session = a->session;
	snprintf(a->caps.boot, sizeof a->caps.boot, "%s", a->boot);
	sky_boardsets_to_caps(&a->sets, &a->caps); /* after any probe, which rewrites caps */
	int n = sky_caps_encode(&a->caps, buf, sizeof buf, &d);
	sky_mutex_unlock(&a->lock);
	if (n < 0) {
		SKY_ERROR("capability report not sent: %s", d.msg);
		return n;
	}
	sky_topic_board(topic, sizeof topic, a->idn.id, SKY_TOPIC_CAPS);
	/* retained, so a planner that starts later still sees it */
	return sky_mqtt_publish(a->m, topic, buf, (size_t)n, 1, 1, &d);
}

int agent_probe(agent *a, sky_diag *d)
{
	sky_probe_opts po;
	int hit;
	sky_probe_opts_default(&po, &a->probe_model);
	po.max_s = a->o->probe_max_s;
	sky_caps c;
	sky_mutex_lock(&a->lock);
	c = a->caps;
	sky_mutex_unlock(&a->lock);
	int rc = sky_probe_cached(a->o->state_dir, a->idn.id, &po, &a->prof, &c, &hit, d);
	if (rc)
		return rc;
	/* a test hook: a probe that lies by a known factor (the cache keeps
	 * the truth), so a test can watch the planner correct it from what the
	 * board's jobs measure (tests/integration/test_calib.sh) */
	const char *lie = getenv("SKY_PROBE_FAKE_SCALE");
	double k = lie && *lie ? strtod(lie, NULL) : 0;
	if (k > 0 && k != 1) {
		sky_caps_times *t = &c.fp32;
		t->fwd_attn_s *= k, t->fwd_ffn_s *= k, t->bwd_attn_s *= k, t->bwd_ffn_s *= k;
		c.int8_fwd_s *= k, c.int8_attn_s *= k;
		SKY_WARN("probe: reporting layer times %g times what was measured "
			 "(SKY_PROBE_FAKE_SCALE, a test setting)",
			 k);
	}
	sky_mutex_lock(&a->lock);
	a->caps = c;
	sky_mutex_unlock(&a->lock);
	return 0;
}
