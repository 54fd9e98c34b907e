/* The planner's measure of each site's path to the core: the same two
 * figures a board measures to its own broker (runtime/agent.c), taken
 * through the bridges. The planner publishes a probe on
 * sky/v1/site/<site>/echo on the core broker; that site's bridge carries it
 * to the site's broker and back, and it returns on
 * sky/v1/site/<site>/back/echo (planner/broker_conf.c, sky_topics.h). So a
 * probe crosses the site's uplink once each way, as a frame between that
 * site and the core does.
 *
 *   latency:   SKY_LINKPROBE_PINGS small probes one at a time; the median
 *              round trip / 2 is the one-way latency (lat_s)
 *   bandwidth: SKY_LINKPROBE_BULK probes of SKY_LINKPROBE_BULK_BYTES back to
 *              back; each direction carries every byte once and the slower
 *              one paces the train, so after the first is back the others
 *              come one per bottleneck transmission: bw = (n - 1) x bytes /
 *              (last back - first back), the train's dispersion (or, when
 *              the returns come bunched, as on a fast path, all bytes /
 *              the time from sending to the last return: a lower bound).
 *              Two trains go, one after the other, and only the second is
 *              timed: the first warms the path. A bridge connection that
 *              is fresh or has carried little starts with small TCP
 *              windows, and with both directions of the shaped link busy
 *              (the train out, its echo back, the ACKs queued behind the
 *              echo) the first train stalls: measured on a veth pair with
 *              tbf at 20 Mbit/s, a first train read 2.03-2.10 MB/s and the
 *              next ones 2.37-2.41 (TCP payload 2.39 at that rate)
 *
 * One site is probed at a time (probes of two sites would share the core's
 * links), each again every every_s seconds; a site that does not answer
 * (a ping within SKY_LINKPROBE_PING_S, the bulk within
 * SKY_LINKPROBE_BULK_S) keeps its last figures and is tried again at its
 * next turn. Plain data with the clock passed in and publishing through a
 * callback, so tests drive it without a broker; not thread-safe (the
 * service calls it under its lock). */
#ifndef SKY_LINKPROBE_H
#define SKY_LINKPROBE_H

#include "sky_plan.h"

#include <stddef.h>
#include <stdint.h>

#define SKY_LINKPROBE_MAX_SITES 64
#define SKY_LINKPROBE_PINGS 5
#define SKY_LINKPROBE_BULK 8
#define SKY_LINKPROBE_BULK_BYTES (64u << 10)
#define SKY_LINKPROBE_PING_BYTES 64
#define SKY_LINKPROBE_PING_S 2.0
#define SKY_LINKPROBE_BULK_S 20.0

typedef struct sky_linkprobe_site {
	char site[SKY_SITE_MAX + 1];
	int measured;      /* 1 once a probe completed */
	double lat_s;      /* one way, s */
	double bw_Bps;     /* bytes/s */
	double at;         /* monotonic time of the last completed probe */
	double next;       /* monotonic time its next probe is due */
	long probes, failures;
} sky_linkprobe_site;

typedef int (*sky_linkprobe_publish)(void *ctx, const char *topic, const void *data, size_t len);

typedef struct sky_linkprobe {
	double every_s;    /* > 0 */
	sky_linkprobe_publish publish;
	void *ctx;
	int n;
	sky_linkprobe_site s[SKY_LINKPROBE_MAX_SITES];
	/* the probe in progress */
	int cur;           /* index in s, -1: none */
	int phase;         /* 0 pings, 1 the warm-up train, 2 the timed train */
	uint64_t seq;      /* of the ping in flight; a train's probes carry seq | 1 << 63 */
	int ping, n_rtt;
	double rtt[SKY_LINKPROBE_PINGS];
	double t0;         /* when the ping (or the bulk) went out */
	int bulk_back;     /* probes of the train in flight back */
	double bulk_first, bulk_last; /* when the first and the last of them came back */
	unsigned char buf[SKY_LINKPROBE_BULK_BYTES];
} sky_linkprobe;

/* Sets lp up (no sites) to probe each site every every_s seconds (> 0),
 * publishing with publish(ctx, topic, data, len). Cannot fail. */
void sky_linkprobe_init(sky_linkprobe *lp, double every_s, sky_linkprobe_publish publish,
			void *ctx);
/* Adds site (not "" and not "core": the core is not probed) if new; its
 * first probe is due at once. Returns 0, SKY_EINVAL (bad name) or
 * SKY_ERANGE (SKY_LINKPROBE_MAX_SITES known already). */
int sky_linkprobe_add(sky_linkprobe *lp, const char *site);
/* Drives the probe at monotonic time now: starts the next due site's
 * probe, times out a probe that waited too long, sends the next ping.
 * Returns 1 if a site's figures were completed or it failed during this
 * call or the last on_msg (then see sky_linkprobe_site), else 0. */
int sky_linkprobe_tick(sky_linkprobe *lp, double now);
/* A message on sky/v1/site/<site>/back/echo at time now. Returns 1 if it
 * was ours (an answer of the probe in flight), else 0 (stale, or not a
 * probe). A completed probe is folded in at the next tick. */
int sky_linkprobe_on_msg(sky_linkprobe *lp, const char *topic, const unsigned char *p,
			 size_t len, double now);
/* Writes the measured sites as links to the core ({site, "", bw, lat}, the
 * hop format of sky_fleet, sky_plan.h) into out (up to cap). Returns how
 * many. */
int sky_linkprobe_links(const sky_linkprobe *lp, sky_site_link *out, int cap);

#endif
