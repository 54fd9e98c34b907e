/* The planner's link probe of a site's path through its bridge, against a
 * simulated path: two one-way links (down to the site and back up), each a
 * FIFO with a bandwidth and a latency, and the clock stepped by the test. */
#include "sky_test.h"

#include "sky_linkprobe.h"

#include <math.h>
#include <string.h>

#define QMAX 64

typedef struct sim {
	double bw, lat;            /* each direction */
	double free_down, free_up; /* when each link is free again */
	int answer;                /* 0: the site is cut off */
	int cold_left;             /* probes of a train still slowed by a cold path */
	double cold_stall;         /* ... each by this long before it goes down */
	int n;
	struct {
		double at;
		char topic[96];
		size_t len;
		unsigned char head[8];
	} q[QMAX];
	long published;
} sim;

static double g_now;

/* One way through a FIFO link: starts when the link is free, takes
 * len / bw to send, arrives lat later. Returns the arrival time. */
static double through(double *free_at, double t, size_t len, double bw, double lat)
{
	double start = t > *free_at ? t : *free_at;
	*free_at = start + (double)len / bw;
	return *free_at + lat;
}

static int sim_publish(void *ctx, const char *topic, const void *data, size_t len)
{
	sim *s = ctx;
	s->published++;
	const char *site = topic + strlen("sky/v1/site/");
	size_t sl = strcspn(site, "/");
	if (!s->answer || s->n == QMAX)
		return 0;
	if (len == SKY_LINKPROBE_BULK_BYTES && s->cold_left > 0) {
		/* a fresh connection: small windows stall the sender */
		s->cold_left--;
		s->free_down = (s->free_down > g_now ? s->free_down : g_now) + s->cold_stall;
	}
	double down = through(&s->free_down, g_now, len, s->bw, s->lat);
	double back = through(&s->free_up, down, len, s->bw, s->lat);
	s->q[s->n].at = back;
	snprintf(s->q[s->n].topic, sizeof s->q[0].topic, "sky/v1/site/%.*s/back/echo", (int)sl, site);
	s->q[s->n].len = len;
	memcpy(s->q[s->n].head, data, 8);
	s->n++;
	return 0;
}

/* Delivers what has arrived by g_now, in order. */
static void deliver(sim *s, sky_linkprobe *lp)
{
	static unsigned char body[SKY_LINKPROBE_BULK_BYTES];
	for (int i = 0; i < s->n;) {
		if (s->q[i].at <= g_now) {
			memcpy(body, s->q[i].head, 8);
			sky_linkprobe_on_msg(lp, s->q[i].topic, body, s->q[i].len, g_now);
			s->q[i] = s->q[--s->n];
		} else {
			i++;
		}
	}
}

/* Runs the probe until a site's figures complete or fail (1 ms steps,
 * the service's loop ticks every 100 ms; deliveries in between). */
static void run_until_done(sim *s, sky_linkprobe *lp, double limit)
{
	double end = g_now + limit;
	double next_tick = g_now;
	while (g_now < end) {
		deliver(s, lp);
		if (g_now >= next_tick) {
			if (sky_linkprobe_tick(lp, g_now))
				return;
			next_tick += 0.1;
		}
		g_now += 0.001;
	}
}

SKY_TEST(linkprobe_measures_a_sites_latency_and_bandwidth_through_the_bridge)
{
	static sky_linkprobe lp;
	sim s = {.bw = 2.5e6, .lat = 0.015, .answer = 1};
	g_now = 100;
	sky_linkprobe_init(&lp, 60, sim_publish, &s);
	SKY_EXPECT_EQ(sky_linkprobe_add(&lp, "factory"), 0);
	SKY_EXPECT_EQ(sky_linkprobe_add(&lp, "factory"), 0); /* known: no second entry */
	SKY_EXPECT_EQ(lp.n, 1);
	SKY_EXPECT_EQ(sky_linkprobe_add(&lp, "core"), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_linkprobe_add(&lp, ""), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_linkprobe_add(&lp, "a/b"), SKY_EINVAL);
	run_until_done(&s, &lp, 30);
	const sky_linkprobe_site *f = &lp.s[0];
	SKY_EXPECT_EQ(f->measured, 1);
	/* one way: the simulated latency plus 64 bytes at 2.5 MB/s */
	SKY_EXPECT_NEAR(f->lat_s, 0.015, 0.0015);
	/* a train of 8 x 64 KiB through two links in series: the spacing of
	 * the returns is the links' rate (1 ms clock steps: within 2%) */
	SKY_EXPECT_MSG(f->bw_Bps > 0.98 * 2.5e6 && f->bw_Bps < 1.02 * 2.5e6, "bw %.0f", f->bw_Bps);
	SKY_EXPECT_EQ(s.published, SKY_LINKPROBE_PINGS + 2 * SKY_LINKPROBE_BULK); /* two trains */
	sky_site_link l[4];
	SKY_EXPECT_EQ(sky_linkprobe_links(&lp, l, 4), 1);
	SKY_EXPECT(strcmp(l[0].a, "factory") == 0 && l[0].b[0] == '\0');
	SKY_EXPECT_NEAR(l[0].bw_Bps, f->bw_Bps, 1e-9);
	/* fresh: nothing more until every_s has passed, then a new probe */
	long before = s.published;
	g_now += 30;
	SKY_EXPECT_EQ(sky_linkprobe_tick(&lp, g_now), 0);
	SKY_EXPECT_EQ(s.published, before);
	g_now += 31;
	s.bw = 1.25e6; /* the link got slower */
	run_until_done(&s, &lp, 30);
	SKY_EXPECT_MSG(f->bw_Bps > 0.98 * 1.25e6 && f->bw_Bps < 1.02 * 1.25e6, "bw %.0f", f->bw_Bps);
	SKY_EXPECT_EQ(f->probes, 2);
}

/* A cold path (a fresh bridge connection: its first train's probes each
 * stall 20 ms before they go down, 1.43 MB/s where the link does 2.5) is
 * warmed by the first train and measured on the second. */
SKY_TEST(linkprobe_times_the_second_train_after_a_cold_first_one)
{
	static sky_linkprobe lp;
	sim s = {.bw = 2.5e6, .lat = 0.005, .answer = 1, .cold_left = SKY_LINKPROBE_BULK,
		 .cold_stall = 0.02};
	g_now = 20;
	sky_linkprobe_init(&lp, 60, sim_publish, &s);
	sky_linkprobe_add(&lp, "factory");
	run_until_done(&s, &lp, 30);
	SKY_EXPECT_EQ(lp.s[0].measured, 1);
	SKY_EXPECT_EQ(s.cold_left, 0);
	SKY_EXPECT_MSG(lp.s[0].bw_Bps > 0.98 * 2.5e6 && lp.s[0].bw_Bps < 1.02 * 2.5e6, "bw %.0f",
		       lp.s[0].bw_Bps);
}

SKY_TEST(linkprobe_a_fast_path_whose_returns_come_bunched_is_measured_too)
{
	/* every probe back within one clock step: no dispersion to measure */
	static sky_linkprobe lp;
	sim s = {.bw = 1e12, .lat = 0.0002, .answer = 1};
	g_now = 50;
	sky_linkprobe_init(&lp, 60, sim_publish, &s);
	sky_linkprobe_add(&lp, "lab");
	run_until_done(&s, &lp, 30);
	SKY_EXPECT_EQ(lp.s[0].measured, 1);
	/* a figure the cost model can use: finite, and at least the train's
	 * bytes over the 1 ms step plus the round trip it took */
	SKY_EXPECT_MSG(isfinite(lp.s[0].bw_Bps) &&
			       lp.s[0].bw_Bps >= SKY_LINKPROBE_BULK * SKY_LINKPROBE_BULK_BYTES / 2e-3,
		       "bw %.0f", lp.s[0].bw_Bps);
}

SKY_TEST(linkprobe_a_silent_site_keeps_its_last_figures_and_is_tried_again)
{
	static sky_linkprobe lp;
	sim s = {.bw = 1e7, .lat = 0.002, .answer = 1};
	g_now = 10;
	sky_linkprobe_init(&lp, 60, sim_publish, &s);
	sky_linkprobe_add(&lp, "shop");
	run_until_done(&s, &lp, 30);
	double bw = lp.s[0].bw_Bps;
	SKY_EXPECT(bw > 0);
	s.answer = 0;
	g_now += 61;
	double t0 = g_now;
	run_until_done(&s, &lp, 60);
	/* every ping waited its deadline, then it gave up */
	SKY_EXPECT(g_now - t0 >= SKY_LINKPROBE_PINGS * SKY_LINKPROBE_PING_S - 0.2);
	SKY_EXPECT_EQ(lp.s[0].failures, 1);
	SKY_EXPECT_NEAR(lp.s[0].bw_Bps, bw, 1e-9);
	SKY_EXPECT_NEAR(lp.s[0].next, g_now + 60, 0.2);
	/* answers for another site, or stale ones, are not taken */
	unsigned char junk[SKY_LINKPROBE_PING_BYTES] = {0};
	SKY_EXPECT_EQ(sky_linkprobe_on_msg(&lp, "sky/v1/site/shop/back/echo", junk, sizeof junk, g_now),
		      0);
}
