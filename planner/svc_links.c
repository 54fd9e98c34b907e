/* Link probes (svc_internal.h): every site an online board reports is
 * probed through its bridge (sky_linkprobe.h); a completed probe's figures
 * become the registry's path between that site and the core, which plans
 * use and fleet.json shows. */
#include "svc_internal.h"

#include "sky_clock.h"

static int publish_probe(void *ctx, const char *topic, const void *data, size_t len)
{
	svc *s = ctx;
	if (!s->m || atomic_load(&s->lost))
		return SKY_ENET;
	return svc_publish(s, topic, data, len, 0, 0, NULL);
}

void svc_links_init(svc *s)
{
	sky_linkprobe_init(&s->links.probe, s->o->link_probe_s > 0 ? s->o->link_probe_s : 300,
			   publish_probe, s);
}

void svc_links_on_msg(svc *s, const char *topic, const unsigned char *p, size_t len, double now)
{
	sky_linkprobe_on_msg(&s->links.probe, topic, p, len, now);
}

/* 1 when a job runs (its frames may be on the site links) and every site
 * has figures: a probe then would measure what the job leaves of a link,
 * not the link (seen on the emulated WAN: 2.6 MB/s but 368 ms one way, the
 * pings queued behind frames in the shaper), and the next plan would take
 * that. New probes wait for the jobs to end; one in flight finishes. */
static int links_busy(const svc *s)
{
	int running = svc_follow_any_running(s);
	for (int i = 0; running && i < s->links.probe.n; i++)
		if (!s->links.probe.s[i].measured)
			return 0;
	return running;
}

void svc_links_tick(svc *s, double now)
{
	sky_linkprobe *lp = &s->links.probe;
	for (int i = 0; i < s->reg.n; i++) {
		const sky_reg_board *b = &s->reg.b[i];
		if (b->state == SKY_REG_ONLINE && b->has_caps && b->caps.site[0])
			sky_linkprobe_add(lp, b->caps.site);
	}
	if (lp->cur < 0 && links_busy(s))
		return;
	int cur = lp->cur;
	if (!sky_linkprobe_tick(lp, now) || cur < 0)
		return;
	const sky_linkprobe_site *ls = &lp->s[cur];
	if (ls->at != now) {
		SKY_WARN("site %s: link probe through its bridge got no answer%s", ls->site,
			 ls->measured ? "; keeping the last figures" : "");
		return;
	}
	if (sky_registry_set_link(&s->reg, ls->site, "", ls->bw_Bps, ls->lat_s, sky_clock_unix()) !=
	    0)
		SKY_WARN("site %s: path figures not kept (the registry's table is full)", ls->site);
	else
		SKY_INFO("site %s: path through its bridge %.3f ms one way, %.2f MB/s", ls->site,
			 1e3 * ls->lat_s, ls->bw_Bps / 1e6);
}
