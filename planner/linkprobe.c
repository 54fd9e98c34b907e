/* The planner's probe of each site's path through the bridges; see
 * sky_linkprobe.h. */
#include "sky_linkprobe.h"

#include "sky_topics.h"

#include <stdio.h>
#include <string.h>

#define BULK_BIT (1ull << 63)

void sky_linkprobe_init(sky_linkprobe *lp, double every_s, sky_linkprobe_publish publish,
			void *ctx)
{
	memset(lp, 0, sizeof *lp);
	lp->every_s = every_s > 0 ? every_s : 300;
	lp->publish = publish;
	lp->ctx = ctx;
	lp->cur = -1;
}

int sky_linkprobe_add(sky_linkprobe *lp, const char *site)
{
	if (!site || !site[0] || strcmp(site, SKY_SITE_CORE) == 0 || !sky_topic_segment_ok(site))
		return SKY_EINVAL;
	for (int i = 0; i < lp->n; i++)
		if (strcmp(lp->s[i].site, site) == 0)
			return 0;
	if (lp->n == SKY_LINKPROBE_MAX_SITES)
		return SKY_ERANGE;
	sky_linkprobe_site *s = &lp->s[lp->n++];
	memset(s, 0, sizeof *s);
	snprintf(s->site, sizeof s->site, "%s", site);
	return 0;
}

static void put_seq(unsigned char *b, uint64_t seq)
{
	for (int k = 0; k < 8; k++)
		b[k] = (unsigned char)(seq >> (56 - 8 * k));
}

static int send(sky_linkprobe *lp, size_t len)
{
	char topic[SKY_TOPIC_BUF];
	int n = snprintf(topic, sizeof topic, SKY_TOPIC_ROOT "/site/%s/" SKY_TOPIC_ECHO,
			 lp->s[lp->cur].site);
	if (n < 0 || (size_t)n >= sizeof topic)
		return SKY_ERANGE;
	return lp->publish(lp->ctx, topic, lp->buf, len);
}

static int send_ping(sky_linkprobe *lp, double now)
{
	const sky_linkprobe_site *s = &lp->s[lp->cur];
	lp->seq = ((uint64_t)(s->probes + 1) << 16) | (uint64_t)(lp->ping + 1);
	put_seq(lp->buf, lp->seq);
	lp->t0 = now;
	return send(lp, SKY_LINKPROBE_PING_BYTES);
}

/* sends a train: phase 1 the warm-up, 2 the timed one (each its own seq) */
static int send_bulk(sky_linkprobe *lp, int phase, double now)
{
	lp->phase = phase;
	lp->bulk_back = 0;
	lp->seq = ((uint64_t)(lp->s[lp->cur].probes + 1) << 16) | BULK_BIT | (uint64_t)phase;
	memset(lp->buf, 0x5a, sizeof lp->buf);
	put_seq(lp->buf, lp->seq);
	lp->t0 = now;
	int rc = 0;
	for (int i = 0; i < SKY_LINKPROBE_BULK && !rc; i++)
		rc = send(lp, sizeof lp->buf);
	return rc;
}

/* Ends the probe in flight: figures in if ok, the next turn scheduled. */
static void finish(sky_linkprobe *lp, int ok, double lat, double bw, double now)
{
	sky_linkprobe_site *s = &lp->s[lp->cur];
	s->probes++;
	if (ok) {
		s->measured = 1;
		s->lat_s = lat;
		s->bw_Bps = bw;
		s->at = now;
	} else {
		s->failures++;
	}
	s->next = now + lp->every_s;
	lp->cur = -1;
	lp->seq = 0;
}

static double median(double *v, int n)
{
	for (int i = 1; i < n; i++) /* insertion sort: n <= SKY_LINKPROBE_PINGS */
		for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
			double t = v[j];
			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int sky_linkprobe_tick(sky_linkprobe *lp, double now)
{
	if (lp->cur < 0) {
		int due = -1;
		for (int i = 0; i < lp->n; i++)
			if (lp->s[i].next <= now && (due < 0 || lp->s[i].next < lp->s[due].next))
				due = i;
		if (due < 0)
			return 0;
		lp->cur = due;
		lp->phase = 0;
		lp->ping = 0;
		lp->n_rtt = 0;
		if (send_ping(lp, now) != 0) {
			finish(lp, 0, 0, 0, now);
			return 1;
		}
		return 0;
	}
	if (lp->phase == 0) {
		int answered = lp->seq == 0;
		if (!answered && now - lp->t0 < SKY_LINKPROBE_PING_S)
			return 0;
		/* answered, or lost: the next ping, or the bulk after the last */
		if (++lp->ping < SKY_LINKPROBE_PINGS) {
			if (send_ping(lp, now) != 0) {
				finish(lp, 0, 0, 0, now);
				return 1;
			}
			return 0;
		}
		if (lp->n_rtt == 0) {
			finish(lp, 0, 0, 0, now);
			return 1;
		}
		if (send_bulk(lp, 1, now) != 0) {
			finish(lp, 0, 0, 0, now);
			return 1;
		}
		return 0;
	}
	if (lp->bulk_back < SKY_LINKPROBE_BULK && now - lp->t0 < SKY_LINKPROBE_BULK_S)
		return 0;
	if (lp->phase == 1) {
		/* the path is warm (or the warm-up came back only in part, its
		 * deadline passed): the timed train */
		if (lp->bulk_back == 0 || send_bulk(lp, 2, now) != 0) {
			finish(lp, 0, 0, 0, now);
			return 1;
		}
		return 0;
	}
	/* the bulk's time ends when its last probe came back (on_msg); a bulk
	 * cut short by the deadline counts what came back */
	if (lp->bulk_back == 0) {
		finish(lp, 0, 0, 0, now);
		return 1;
	}
	/* the train's dispersion: after the first came back, the others
	 * arrive one per bottleneck transmission time (the round trip and the
	 * store-and-forward of the first are not bandwidth). Arrivals bunched
	 * closer than that (a fast path: the receiving side, which handles
	 * messages in batches, spaced them) and a train of one fall back to
	 * the whole time since sending, a lower bound. */
	double total = lp->bulk_last - lp->t0;
	double disp = lp->bulk_last - lp->bulk_first;
	double bw = total > 0 ? (double)lp->bulk_back * SKY_LINKPROBE_BULK_BYTES / total : 0;
	if (lp->bulk_back > 1 && disp > total / (2.0 * lp->bulk_back))
		bw = (double)(lp->bulk_back - 1) * SKY_LINKPROBE_BULK_BYTES / disp;
	double lat = 0.5 * median(lp->rtt, lp->n_rtt);
	finish(lp, bw > 0, lat, bw, now);
	return 1;
}

int sky_linkprobe_on_msg(sky_linkprobe *lp, const char *topic, const unsigned char *p,
			 size_t len, double now)
{
	char want[SKY_TOPIC_BUF];
	if (lp->cur < 0 || len < 8)
		return 0;
	snprintf(want, sizeof want, SKY_TOPIC_ROOT "/site/%s/back/" SKY_TOPIC_ECHO,
		 lp->s[lp->cur].site);
	if (strcmp(topic, want) != 0)
		return 0;
	uint64_t seq = 0;
	for (int i = 0; i < 8; i++)
		seq = seq << 8 | p[i];
	if (lp->phase == 0 && lp->seq && seq == lp->seq) {
		lp->rtt[lp->n_rtt++] = now - lp->t0;
		lp->seq = 0; /* answered: the next tick sends the next ping */
		return 1;
	}
	if (lp->phase >= 1 && seq == lp->seq && len == SKY_LINKPROBE_BULK_BYTES) {
		if (lp->bulk_back++ == 0)
			lp->bulk_first = now;
		lp->bulk_last = now;
		return 1;
	}
	return 0;
}

int sky_linkprobe_links(const sky_linkprobe *lp, sky_site_link *out, int cap)
{
	int n = 0;
	for (int i = 0; i < lp->n && n < cap; i++) {
		const sky_linkprobe_site *s = &lp->s[i];
		if (!s->measured)
			continue;
		memset(&out[n], 0, sizeof out[n]);
		snprintf(out[n].a, sizeof out[n].a, "%s", s->site);
		out[n].bw_Bps = s->bw_Bps;
		out[n].lat_s = s->lat_s;
		n++;
	}
	return n;
}
