#include "sky_test.h"

#include "sky_caps.h"
#include "sky_json.h"
#include "sky_planmsg.h"
#include "sky_registry.h"

#include <stdio.h>
#include <string.h>

static sky_registry g_r;
static sky_planmsg g_p;

static int msg(const char *id, const char *leaf, const char *payload, double now)
{
	sky_diag d;
	sky_diag_clear(&d);
	return sky_registry_on_board_msg(&g_r, id, leaf, payload, strlen(payload), now,
					 1764511200 + (int64_t)now, &d);
}

static void status(const char *id, int online, int session, double now)
{
	char buf[128];
	sky_status s = {.online = online, .session = session, .keepalive_s = 2};
	sky_status_encode(&s, buf, sizeof buf);
	msg(id, SKY_TOPIC_STATUS, buf, now);
}

/* status or heartbeat from one boot; returns what the registry said */
static int bstatus(const char *id, const char *leaf, const char *boot, int online, int session,
		   double now)
{
	char buf[160];
	sky_status s = {.online = online, .session = session, .keepalive_s = 2,
			.seq = strcmp(leaf, SKY_TOPIC_HEARTBEAT) == 0};
	snprintf(s.boot, sizeof s.boot, "%s", boot);
	if (sky_status_encode(&s, buf, sizeof buf) < 0)
		return 1000;
	return msg(id, leaf, buf, now);
}

static int bcaps(const char *id, const char *boot, int session, double fwd, double now)
{
	sky_caps c;
	char buf[SKY_CAPS_MAX_BYTES];
	memset(&c, 0, sizeof c);
	snprintf(c.id, sizeof c.id, "%s", id);
	snprintf(c.boot, sizeof c.boot, "%s", boot);
	c.session = session;
	strcpy(c.version, "v");
	strcpy(c.board, "host");
	c.threads = 1;
	c.keepalive_s = 2;
	strcpy(c.shape.name, "tiny");
	c.shape.hidden = 32, c.shape.heads = 2, c.shape.ffn = 64, c.shape.seq = 16, c.shape.batch = 8;
	c.fp32 = (sky_caps_times){fwd, fwd, 2 * fwd, 2 * fwd};
	c.mem_bytes = 1 << 30;
	c.probed_at = 1;
	if (sky_caps_encode(&c, buf, sizeof buf, NULL) < 0)
		return 1000;
	return msg(id, SKY_TOPIC_CAPS, buf, now);
}

static int caps(const char *id, const char *claimed_id, int session, double fwd, double now)
{
	sky_caps c;
	char buf[SKY_CAPS_MAX_BYTES];
	memset(&c, 0, sizeof c);
	snprintf(c.id, sizeof c.id, "%s", claimed_id);
	c.session = session;
	strcpy(c.version, "v");
	strcpy(c.board, "host");
	c.threads = 1;
	c.keepalive_s = 2;
	strcpy(c.shape.name, "tiny");
	c.shape.hidden = 32, c.shape.heads = 2, c.shape.ffn = 64, c.shape.seq = 16, c.shape.batch = 8;
	c.fp32 = (sky_caps_times){fwd, fwd, 2 * fwd, 2 * fwd};
	c.mem_bytes = 1 << 30;
	c.probed_at = 1;
	if (sky_caps_encode(&c, buf, sizeof buf, NULL) < 0)
		return 1000;
	return msg(id, SKY_TOPIC_CAPS, buf, now);
}

/* the planner stalled for 10 s after hearing b2 at t=5: those 10 s are not
 * b2's silence; its deadline is 1.5 x 2 s after the stall */
SKY_TEST(the_planners_own_stall_is_not_a_boards_silence)
{
	sky_registry_init(&g_r);
	status("b1", 1, 1, 0.0);
	status("b2", 1, 1, 5.0);
	sky_reg_board *b1 = sky_registry_find(&g_r, "b1"), *b2 = sky_registry_find(&g_r, "b2");
	SKY_EXPECT(b2 && b2->state == SKY_REG_ONLINE);
	SKY_EXPECT_EQ(sky_registry_tick(&g_r, 4.0), 1); /* b1: silent before the stall */
	sky_registry_excuse(&g_r, 10.0);
	SKY_EXPECT(b1 && b1->state == SKY_REG_OFFLINE); /* an offline board stays so */
	SKY_EXPECT_EQ(sky_registry_tick(&g_r, 15.5), 0);
	SKY_EXPECT_EQ(sky_registry_tick(&g_r, 17.9), 0);
	SKY_EXPECT_EQ(sky_registry_tick(&g_r, 18.1), 1);
	SKY_EXPECT(b2->state == SKY_REG_OFFLINE);
}

SKY_TEST(online_caps_and_heartbeat_timeout)
{
	sky_registry_init(&g_r);
	status("b1", 1, 1, 0.0);
	SKY_EXPECT_EQ(caps("b1", "b1", 1, 0.01, 0.1), 0);
	sky_reg_board *b = sky_registry_find(&g_r, "b1");
	SKY_EXPECT(b && b->state == SKY_REG_ONLINE && b->has_caps && b->keepalive_s == 2);
	SKY_EXPECT_EQ(msg("b1", SKY_TOPIC_HEARTBEAT,
			  "{\"state\":\"online\",\"session\":1,\"keepalive_s\":2,\"seq\":1}", 1.0), 0);
	/* deadline 1.5 x 2 s after the last message at t=1.0 */
	SKY_EXPECT_EQ(sky_registry_tick(&g_r, 3.9), 0);
	SKY_EXPECT(b->state == SKY_REG_ONLINE);
	SKY_EXPECT_EQ(sky_registry_tick(&g_r, 4.1), 1);
	SKY_EXPECT(b->state == SKY_REG_OFFLINE && !strcmp(b->why, "timeout"));
	SKY_EXPECT_EQ(g_r.c.timeouts, 1);
	/* it comes back with a new session */
	status("b1", 1, 2, 5.0);
	SKY_EXPECT(b->state == SKY_REG_ONLINE && b->session == 2);
}

SKY_TEST(a_boards_site_is_kept_and_written_to_fleet_json)
{
	static char out[1 << 16];
	sky_caps c;
	char buf[SKY_CAPS_MAX_BYTES];
	sky_registry_init(&g_r);
	status("f1", 1, 1, 0.0);
	status("c1", 1, 1, 0.0);
	memset(&c, 0, sizeof c);
	strcpy(c.id, "f1");
	c.session = 1;
	strcpy(c.version, "v");
	strcpy(c.board, "host");
	c.threads = 1;
	c.keepalive_s = 2;
	strcpy(c.shape.name, "tiny");
	c.shape.hidden = 32, c.shape.heads = 2, c.shape.ffn = 64, c.shape.seq = 16, c.shape.batch = 8;
	c.fp32 = (sky_caps_times){0.01, 0.01, 0.02, 0.02};
	c.mem_bytes = 1 << 30;
	c.probed_at = 1;
	strcpy(c.site, "factory");
	SKY_EXPECT(sky_caps_encode(&c, buf, sizeof buf, NULL) > 0);
	SKY_EXPECT_EQ(msg("f1", SKY_TOPIC_CAPS, buf, 0.1), 0);
	SKY_EXPECT_EQ(caps("c1", "c1", 1, 0.01, 0.1), 0);
	SKY_EXPECT(strcmp(sky_registry_find(&g_r, "f1")->caps.site, "factory") == 0);
	int n = sky_registry_to_json(&g_r, 1764511200, out, sizeof out);
	SKY_EXPECT(n > 0);
	const char *f1 = strstr(out, "\"id\":\"f1\""), *c1 = strstr(out, "\"id\":\"c1\"");
	const char *s1 = f1 ? strstr(f1, "\"site\":") : NULL;
	const char *s2 = c1 ? strstr(c1, "\"site\":") : NULL;
	SKY_EXPECT_MSG(s1 && !strncmp(s1, "\"site\":\"factory\"", 16), "%s", out);
	SKY_EXPECT_MSG(s2 && !strncmp(s2, "\"site\":\"core\"", 13), "%s", out);
}

SKY_TEST(site_paths_are_kept_and_written)
{
	static char out[1 << 16];
	sky_registry_init(&g_r);
	SKY_EXPECT_EQ(sky_registry_set_link(&g_r, "fac", "core", 2.5e6, 0.03, 0), 0);
	SKY_EXPECT_EQ(sky_registry_set_link(&g_r, "shop", "", 1e6, 0.01, 0), 0);
	/* the same pair either way round replaces the figures */
	SKY_EXPECT_EQ(sky_registry_set_link(&g_r, "", "fac", 3e6, 0.02, 1764511200), 0);
	SKY_EXPECT_EQ(g_r.n_links, 2);
	SKY_EXPECT_NEAR(g_r.links[0].bw_Bps, 3e6, 0);
	SKY_EXPECT_EQ(sky_registry_set_link(&g_r, "fac", "fac", 1e6, 0, 0), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_registry_set_link(&g_r, "fac", "x/y", 1e6, 0, 0), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_registry_set_link(&g_r, "fac", "shop", 0, 0, 0), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_registry_set_link(&g_r, "fac", "shop", 1e6, -1, 0), SKY_EINVAL);
	SKY_EXPECT_EQ(g_r.n_links, 2);
	int n = sky_registry_to_json(&g_r, 1764511200, out, sizeof out);
	SKY_EXPECT(n > 0);
	SKY_EXPECT_MSG(strstr(out, "\"links\":[{\"a\":\"core\",\"b\":\"fac\",\"bw_Bps\":3000000") !=
			       NULL,
		       "%s", out);
	SKY_EXPECT(strstr(out, "\"measured_unix\":1764511200") != NULL);
	/* a planner restart keeps them */
	static sky_registry back;
	sky_registry_init(&back);
	SKY_EXPECT(sky_registry_restore(&back, out, (size_t)n, NULL) >= 0);
	SKY_EXPECT_EQ(back.n_links, 2);
	SKY_EXPECT(sky_site_eq(back.links[0].a, "core") && !strcmp(back.links[0].b, "fac"));
	SKY_EXPECT_NEAR(back.links[0].lat_s, 0.02, 0);
	SKY_EXPECT_EQ(back.links[0].measured_unix, 1764511200);
	SKY_EXPECT(!strcmp(back.links[1].a, "shop") && back.links[1].b[0] == '\0');
}

SKY_TEST(a_late_will_from_an_old_session_never_kills_a_live_board)
{
	sky_registry_init(&g_r);
	status("b1", 1, 4, 0.0);
	status("b1", 1, 5, 1.0); /* reconnected */
	SKY_EXPECT_EQ(msg("b1", SKY_TOPIC_STATUS, "{\"state\":\"offline\",\"session\":4}", 1.5), 1);
	sky_reg_board *b = sky_registry_find(&g_r, "b1");
	SKY_EXPECT(b->state == SKY_REG_ONLINE);
	SKY_EXPECT_EQ(g_r.c.stale_ignored, 1);
	/* the will of the current session does */
	SKY_EXPECT_EQ(msg("b1", SKY_TOPIC_STATUS, "{\"state\":\"offline\",\"session\":5}", 2.0), 0);
	SKY_EXPECT(b->state == SKY_REG_OFFLINE);
	/* old caps cannot overwrite newer ones either */
	SKY_EXPECT_EQ(caps("b1", "b1", 3, 0.5, 2.5), 1);
	SKY_EXPECT(!b->has_caps);
}

SKY_TEST(a_new_boot_with_a_fresh_counter_is_accepted)
{
	sky_registry_init(&g_r);
	/* without boot ids, a board that lost its session file is stale forever */
	status("old", 1, 13, 0.0);
	status("old", 0, 13, 0.5);
	SKY_EXPECT_EQ(msg("old", SKY_TOPIC_STATUS,
			  "{\"state\":\"online\",\"session\":1,\"keepalive_s\":2}", 1.0), 1);
	/* with them, the new boot proves itself by being online */
	SKY_EXPECT_EQ(bstatus("b1", SKY_TOPIC_STATUS, "aaaa", 1, 13, 0.0), 0);
	SKY_EXPECT_EQ(bstatus("b1", SKY_TOPIC_STATUS, "aaaa", 0, 13, 0.5), 0);
	sky_reg_board *b = sky_registry_find(&g_r, "b1");
	SKY_EXPECT(b->state == SKY_REG_OFFLINE);
	SKY_EXPECT_EQ(bstatus("b1", SKY_TOPIC_STATUS, "bbbb", 1, 1, 1.0), 0);
	SKY_EXPECT(b->state == SKY_REG_ONLINE && b->session == 1 && !strcmp(b->boot, "bbbb"));
	SKY_EXPECT(!strcmp(b->retired[0], "aaaa"));
	SKY_EXPECT_EQ(g_r.c.boots, 1);
	/* and its later sessions count from there */
	SKY_EXPECT_EQ(bstatus("b1", SKY_TOPIC_HEARTBEAT, "bbbb", 1, 2, 2.0), 0);
	SKY_EXPECT_EQ(bstatus("b1", SKY_TOPIC_HEARTBEAT, "bbbb", 1, 1, 2.1), 1);
	SKY_EXPECT(b->session == 2);
	/* a heartbeat is proof of life too (the online status may have been missed) */
	SKY_EXPECT_EQ(bstatus("b1", SKY_TOPIC_HEARTBEAT, "cccc", 1, 1, 3.0), 0);
	SKY_EXPECT(!strcmp(b->boot, "cccc") && !strcmp(b->retired[0], "bbbb") &&
		   !strcmp(b->retired[1], "aaaa"));
	/* a message without a boot id cannot take over from one with */
	SKY_EXPECT_EQ(msg("b1", SKY_TOPIC_STATUS,
			  "{\"state\":\"online\",\"session\":99,\"keepalive_s\":2}", 3.5), 1);
	SKY_EXPECT(!strcmp(b->boot, "cccc"));
}

SKY_TEST(a_late_will_of_an_old_boot_never_kills_the_new_one)
{
	sky_registry_init(&g_r);
	SKY_EXPECT_EQ(bstatus("b1", SKY_TOPIC_STATUS, "aaaa", 1, 5, 0.0), 0);
	SKY_EXPECT_EQ(bstatus("b1", SKY_TOPIC_STATUS, "bbbb", 1, 1, 1.0), 0); /* restarted */
	sky_reg_board *b = sky_registry_find(&g_r, "b1");
	long stale0 = g_r.c.stale_ignored;
	sky_diag d;
	sky_diag_clear(&d);
	/* the old boot's will arrives late, with a session number above the new one */
	const char *will = "{\"state\":\"offline\",\"boot\":\"aaaa\",\"session\":5}";
	SKY_EXPECT_EQ(sky_registry_on_board_msg(&g_r, "b1", SKY_TOPIC_STATUS, will, strlen(will),
						1.5, 0, &d),
		      1);
	SKY_EXPECT_MSG(strstr(d.msg, "retired boot") != NULL, "%s", d.msg);
	SKY_EXPECT(b->state == SKY_REG_ONLINE && !strcmp(b->boot, "bbbb") && b->session == 1);
	SKY_EXPECT_EQ(bstatus("b1", SKY_TOPIC_STATUS, "aaaa", 0, 6, 1.6), 1);
	SKY_EXPECT_EQ(bstatus("b1", SKY_TOPIC_HEARTBEAT, "aaaa", 1, 7, 1.7), 1);
	SKY_EXPECT(b->state == SKY_REG_ONLINE && !strcmp(b->boot, "bbbb"));
	/* a will from a boot never seen online cannot be placed: ignored, and the
	 * heartbeat deadline still stands */
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(bstatus("b1", SKY_TOPIC_STATUS, "dddd", 0, 1, 1.8), 1);
	SKY_EXPECT(b->state == SKY_REG_ONLINE && !strcmp(b->boot, "bbbb"));
	SKY_EXPECT_EQ(g_r.c.stale_ignored - stale0, 4);
	/* the new boot's own will does */
	SKY_EXPECT_EQ(bstatus("b1", SKY_TOPIC_STATUS, "bbbb", 0, 1, 2.0), 0);
	SKY_EXPECT(b->state == SKY_REG_OFFLINE);
	/* a board never heard from takes whatever comes first, a will included */
	SKY_EXPECT_EQ(bstatus("b2", SKY_TOPIC_STATUS, "eeee", 0, 3, 2.0), 0);
	SKY_EXPECT(sky_registry_find(&g_r, "b2")->state == SKY_REG_OFFLINE);
}

SKY_TEST(reports_from_a_new_boot_wait_until_it_is_online)
{
	sky_registry_init(&g_r);
	SKY_EXPECT_EQ(bstatus("b1", SKY_TOPIC_STATUS, "aaaa", 1, 2, 0.0), 0);
	SKY_EXPECT_EQ(bcaps("b1", "aaaa", 2, 0.01, 0.1), 0);
	sky_reg_board *b = sky_registry_find(&g_r, "b1");
	/* the new boot's report comes before its status: held */
	SKY_EXPECT_EQ(bcaps("b1", "bbbb", 1, 0.02, 1.0), 1);
	SKY_EXPECT_NEAR(b->caps.fp32.fwd_attn_s, 0.01, 0);
	SKY_EXPECT(!strcmp(b->boot, "aaaa"));
	char buf[1024];
	sky_planack a = {.board = "b1", .job = "j1", .epoch = 3, .session = 1, .boot = "bbbb",
			 .stage = 0, .ok = 1, .arena_bytes = 990, .expected_bytes = 1000,
			 .budget_bytes = 1 << 20};
	SKY_EXPECT(sky_planack_encode(&a, buf, sizeof buf, NULL) > 0);
	SKY_EXPECT_EQ(msg("b1", SKY_TOPIC_PLAN_ACK, buf, 1.1), 1);
	SKY_EXPECT(b->ack == 0);
	/* online: the held report and ack apply */
	SKY_EXPECT_EQ(bstatus("b1", SKY_TOPIC_STATUS, "bbbb", 1, 1, 1.2), 0);
	SKY_EXPECT_NEAR(b->caps.fp32.fwd_attn_s, 0.02, 0);
	SKY_EXPECT(!strcmp(b->caps.boot, "bbbb") && b->ack == 1 && b->ack_epoch == 3);
	/* the old boot's retained report, delivered again later, is stale */
	SKY_EXPECT_EQ(bcaps("b1", "aaaa", 9, 0.05, 2.0), 1);
	SKY_EXPECT_NEAR(b->caps.fp32.fwd_attn_s, 0.02, 0);
	/* a held report of a boot that never comes online is dropped */
	SKY_EXPECT_EQ(bcaps("b1", "cccc", 1, 0.07, 2.1), 1);
	SKY_EXPECT_EQ(bstatus("b1", SKY_TOPIC_HEARTBEAT, "dddd", 1, 1, 2.2), 0);
	SKY_EXPECT_NEAR(b->caps.fp32.fwd_attn_s, 0.02, 0);
	SKY_EXPECT_EQ(sky_json_pool_used(), 0);
}

SKY_TEST(malformed_and_absurd_caps_are_counted_and_change_nothing)
{
	sky_registry_init(&g_r);
	status("b1", 1, 1, 0.0);
	SKY_EXPECT_EQ(caps("b1", "b1", 1, 0.01, 0.1), 0);
	long before = g_r.c.caps_rejected;
	SKY_EXPECT(msg("b1", SKY_TOPIC_CAPS, "{not json", 0.2) < 0);
	/* negative time (the encoder refuses to write one, so edit a good report) */
	{
		sky_caps c;
		char buf[SKY_CAPS_MAX_BYTES], bad[SKY_CAPS_MAX_BYTES];
		memset(&c, 0, sizeof c);
		strcpy(c.id, "b1");
		c.session = 1, c.threads = 1, c.keepalive_s = 2, c.mem_bytes = 1, c.probed_at = 1;
		strcpy(c.shape.name, "tiny");
		c.shape.hidden = 32, c.shape.heads = 2, c.shape.ffn = 64, c.shape.seq = 16;
		c.shape.batch = 8;
		c.fp32 = (sky_caps_times){0.25, 0.25, 0.25, 0.25};
		SKY_EXPECT(sky_caps_encode(&c, buf, sizeof buf, NULL) > 0);
		char *at = strstr(buf, "\"fwd_ffn_s\":0.25");
		SKY_EXPECT(at != NULL);
		snprintf(bad, sizeof bad, "%.*s\"fwd_ffn_s\":-0.25%s", (int)(at - buf), buf,
			 at + strlen("\"fwd_ffn_s\":0.25"));
		SKY_EXPECT_EQ(msg("b1", SKY_TOPIC_CAPS, bad, 0.3), SKY_ERANGE);
	}
	SKY_EXPECT(caps("b1", "b2", 1, 0.01, 0.4) < 0);      /* someone else's id */
	char big[SKY_CAPS_MAX_BYTES + 10];
	memset(big, ' ', sizeof big - 1);
	big[sizeof big - 1] = 0;
	SKY_EXPECT_EQ(msg("b1", SKY_TOPIC_CAPS, big, 0.5), SKY_ERANGE);
	SKY_EXPECT_EQ(g_r.c.caps_rejected - before, 4);
	SKY_EXPECT_EQ(g_r.c.oversize, 1);
	sky_reg_board *b = sky_registry_find(&g_r, "b1");
	SKY_EXPECT_NEAR(b->caps.fp32.fwd_attn_s, 0.01, 0); /* the good report stands */
	SKY_EXPECT(msg("b1", SKY_TOPIC_STATUS, "{\"state\":\"maybe\",\"session\":1}", 0.6) < 0);
	SKY_EXPECT_EQ(g_r.c.status_rejected, 1);
	SKY_EXPECT_EQ(sky_json_pool_used(), 0);
}

SKY_TEST(assignment_and_acks)
{
	sky_registry_init(&g_r);
	status("b1", 1, 1, 0.0);
	status("b2", 1, 1, 0.0);
	memset(&g_p, 0, sizeof g_p);
	strcpy(g_p.job, "j1");
	g_p.epoch = 3;
	strcpy(g_p.algo, "even");
	g_p.micro_batches = 2;
	strcpy(g_p.shape.name, "tiny");
	g_p.shape.hidden = 32, g_p.shape.heads = 2, g_p.shape.ffn = 64, g_p.shape.seq = 16;
	g_p.shape.batch = 8;
	g_p.layers = 2;
	g_p.n_stages = 2;
	g_p.stages[0] = (sky_plan_stage){.board = "b1", .first = 0, .last = 1, .in_flight = 2, .arena_bytes = 1000};
	g_p.stages[1] = (sky_plan_stage){.board = "b2", .first = 2, .last = 3, .in_flight = 1, .arena_bytes = 900};
	sky_registry_assign(&g_r, &g_p);
	sky_reg_board *b1 = sky_registry_find(&g_r, "b1"), *b2 = sky_registry_find(&g_r, "b2");
	SKY_EXPECT(b1->stage == 0 && b2->stage == 1 && sky_reg_ack(b1) == 0);
	char buf[1024];
	sky_planack a = {.board = "b1", .job = "j1", .epoch = 3, .session = 1, .stage = 0, .ok = 1,
			 .arena_bytes = 990, .expected_bytes = 1000, .budget_bytes = 1 << 20};
	SKY_EXPECT(sky_planack_encode(&a, buf, sizeof buf, NULL) > 0);
	SKY_EXPECT_EQ(msg("b1", SKY_TOPIC_PLAN_ACK, buf, 1.0), 0);
	SKY_EXPECT(sky_reg_ack(b1) == 1 && b1->ack_bytes == 990);
	a = (sky_planack){.board = "b2", .job = "j1", .epoch = 3, .session = 1, .stage = 1, .ok = 0,
			  .arena_bytes = 5000, .budget_bytes = 100, .reason = "does not fit"};
	sky_planack_encode(&a, buf, sizeof buf, NULL);
	SKY_EXPECT_EQ(msg("b2", SKY_TOPIC_PLAN_ACK, buf, 1.0), 0);
	SKY_EXPECT(sky_reg_ack(b2) == -1 && !strcmp(b2->ack_reason, "does not fit"));
	/* an ack posted on another board's topic is refused */
	SKY_EXPECT(msg("b1", SKY_TOPIC_PLAN_ACK, buf, 1.1) < 0);
	/* a new plan without b2 clears its assignment */
	g_p.epoch = 4;
	g_p.n_stages = 1;
	g_p.stages[0] = (sky_plan_stage){.board = "b1", .first = 0, .last = 3, .in_flight = 2, .arena_bytes = 2000};
	sky_registry_assign(&g_r, &g_p);
	SKY_EXPECT(b2->job[0] == 0 && b1->epoch == 4 && sky_reg_ack(b1) == 0);
	/* the old plan read back after a restart changes nothing */
	g_p.epoch = 3;
	g_p.n_stages = 2;
	g_p.stages[0] = (sky_plan_stage){.board = "b1", .first = 0, .last = 1, .in_flight = 2, .arena_bytes = 1000};
	g_p.stages[1] = (sky_plan_stage){.board = "b2", .first = 2, .last = 3, .in_flight = 1, .arena_bytes = 900};
	sky_registry_assign(&g_r, &g_p);
	SKY_EXPECT(b1->epoch == 4 && b1->last == 3);
	SKY_EXPECT(b2->job[0] == 0);

	static char out[1 << 16];
	int n = sky_registry_to_json(&g_r, 1764511200, out, sizeof out);
	SKY_EXPECT(n > 0);
	SKY_EXPECT(strstr(out, "\"id\":\"b1\"") && strstr(out, "\"state\":\"online\""));
	SKY_EXPECT(strstr(out, "\"updated_at\":\"2025-11-30T14:00:00Z\"") != NULL);
	SKY_EXPECT(strstr(out, "\"ack\":\"pending\"") != NULL);
	SKY_EXPECT_EQ(sky_json_pool_used(), 0);
}

SKY_TEST(status_codec_round_trip)
{
	char buf[128];
	sky_status s = {.online = 1, .session = 9, .keepalive_s = 3, .seq = 12}, back;
	SKY_EXPECT(sky_status_encode(&s, buf, sizeof buf) > 0);
	SKY_EXPECT_EQ(sky_status_decode(buf, strlen(buf), &back, NULL), 0);
	SKY_EXPECT(back.online && back.session == 9 && back.keepalive_s == 3 && back.seq == 12);
	s = (sky_status){.online = 0, .session = 9};
	sky_status_encode(&s, buf, sizeof buf);
	SKY_EXPECT(strcmp(buf, "{\"state\":\"offline\",\"session\":9}") == 0);
	SKY_EXPECT_EQ(sky_status_decode(buf, strlen(buf), &back, NULL), 0);
	SKY_EXPECT(!back.online);
	SKY_EXPECT(sky_status_decode("{\"state\":\"online\",\"session\":-1}", 32, &back, NULL) != 0);
}

SKY_TEST(restore_after_a_planner_restart)
{
	static char out[1 << 16];
	sky_registry_init(&g_r);
	sky_registry_add(&g_r, "fresh");
	status("b1", 1, 3, 10.0);
	int n = sky_registry_to_json(&g_r, 1764511200, out, sizeof out);
	SKY_EXPECT(n > 0);
	sky_registry_init(&g_r);
	SKY_EXPECT_EQ(sky_registry_restore(&g_r, out, (size_t)n, NULL), 2);
	sky_reg_board *f = sky_registry_find(&g_r, "fresh"), *b = sky_registry_find(&g_r, "b1");
	SKY_EXPECT(f && f->state == SKY_REG_ENROLLED);
	SKY_EXPECT(b && b->state == SKY_REG_OFFLINE && b->last_seen == 1764511210);
	SKY_EXPECT_EQ(sky_registry_restore(&g_r, "{oops", 5, NULL), SKY_EFORMAT);
	SKY_EXPECT_EQ(sky_json_pool_used(), 0);
}

SKY_TEST(restore_keeps_boots_sessions_assignments_and_jobs)
{
	static char out[1 << 16];
	sky_registry_init(&g_r);
	bstatus("b1", SKY_TOPIC_STATUS, "aaaa", 1, 7, 0.0);
	bstatus("b1", SKY_TOPIC_STATUS, "bbbb", 1, 2, 1.0);
	bstatus("b2", SKY_TOPIC_STATUS, "cccc", 1, 4, 1.0);
	memset(&g_p, 0, sizeof g_p);
	strcpy(g_p.job, "j1");
	g_p.epoch = 6;
	strcpy(g_p.algo, "even");
	g_p.micro_batches = 2;
	strcpy(g_p.shape.name, "tiny");
	g_p.shape.hidden = 32, g_p.shape.heads = 2, g_p.shape.ffn = 64, g_p.shape.seq = 16;
	g_p.shape.batch = 8;
	g_p.layers = 2;
	g_p.n_stages = 2;
	g_p.stages[0] = (sky_plan_stage){.board = "b1", .first = 0, .last = 2, .in_flight = 2, .arena_bytes = 1000};
	g_p.stages[1] = (sky_plan_stage){.board = "b2", .first = 3, .last = 3, .in_flight = 1, .arena_bytes = 900};
	sky_registry_assign(&g_r, &g_p);
	int n = sky_registry_to_json(&g_r, 1764511200, out, sizeof out);
	SKY_EXPECT(n > 0);
	sky_registry_init(&g_r);
	SKY_EXPECT_EQ(sky_registry_restore(&g_r, out, (size_t)n, NULL), 2);
	sky_reg_board *b1 = sky_registry_find(&g_r, "b1"), *b2 = sky_registry_find(&g_r, "b2");
	SKY_EXPECT(b1 && b2);
	SKY_EXPECT(!strcmp(b1->boot, "bbbb") && b1->session == 2 && !strcmp(b1->retired[0], "aaaa"));
	SKY_EXPECT(!strcmp(b1->job, "j1") && b1->epoch == 6 && b1->stage == 0 && b1->first == 0 &&
		   b1->last == 2 && b1->expected_bytes == 1000);
	SKY_EXPECT(b2->stage == 1 && b2->first == 3 && b2->last == 3);
	SKY_EXPECT(g_r.n_jobs == 1 && !strcmp(g_r.jobs[0].job, "j1") && g_r.jobs[0].epoch == 6);
	/* what was stale before the restart is stale after it */
	SKY_EXPECT_EQ(bstatus("b1", SKY_TOPIC_STATUS, "aaaa", 0, 7, 2.0), 1);
	SKY_EXPECT_EQ(bstatus("b1", SKY_TOPIC_STATUS, "bbbb", 0, 1, 2.0), 1);
	SKY_EXPECT_EQ(bstatus("b1", SKY_TOPIC_STATUS, "bbbb", 1, 3, 2.0), 0);
	SKY_EXPECT(b1->state == SKY_REG_ONLINE);
	/* an older plan read back changes nothing */
	g_p.epoch = 5;
	g_p.stages[0].last = 1, g_p.stages[1].first = 2;
	sky_registry_assign(&g_r, &g_p);
	SKY_EXPECT(b1->last == 2 && g_r.jobs[0].epoch == 6);
	SKY_EXPECT_EQ(sky_json_pool_used(), 0);
}

SKY_TEST(a_revoked_board_is_never_online_again_and_its_reports_are_ignored)
{
	static char out[1 << 16];
	sky_registry_init(&g_r);
	SKY_EXPECT_EQ(bstatus("rv", SKY_TOPIC_STATUS, "aaaa", 1, 1, 0.0), 0);
	SKY_EXPECT_EQ(bcaps("rv", "aaaa", 1, 0.01, 0.1), 0);
	SKY_EXPECT_EQ(bstatus("ok", SKY_TOPIC_STATUS, "cccc", 1, 1, 0.0), 0);
	sky_reg_board *b = sky_registry_find(&g_r, "rv");
	SKY_EXPECT(b && b->state == SKY_REG_ONLINE && b->has_caps);
	SKY_EXPECT_EQ(sky_registry_revoke(&g_r, "rv", "keyCompromise"), 1);
	SKY_EXPECT_EQ(sky_registry_revoke(&g_r, "rv", "keyCompromise"), 0); /* already */
	SKY_EXPECT(b->state == SKY_REG_REVOKED && !b->has_caps && !strcmp(b->why, "keyCompromise"));
	SKY_EXPECT_EQ(g_r.c.revoked, 1);
	/* what it sends after (its old connection, a new boot) changes nothing */
	SKY_EXPECT_EQ(bstatus("rv", SKY_TOPIC_STATUS, "aaaa", 1, 2, 1.0), 1);
	SKY_EXPECT_EQ(bstatus("rv", SKY_TOPIC_HEARTBEAT, "bbbb", 1, 1, 1.1), 1);
	SKY_EXPECT_EQ(bcaps("rv", "aaaa", 2, 0.01, 1.2), 1);
	SKY_EXPECT(b->state == SKY_REG_REVOKED && !b->has_caps && b->session == 1);
	SKY_EXPECT_EQ(g_r.c.revoked_ignored, 3);
	SKY_EXPECT_EQ(sky_registry_tick(&g_r, 100.0), 1); /* only "ok" times out */
	SKY_EXPECT(b->state == SKY_REG_REVOKED);
	/* a board never heard of can be revoked too */
	SKY_EXPECT_EQ(sky_registry_revoke(&g_r, "gone", NULL), 1);
	SKY_EXPECT_EQ(sky_registry_revoke(&g_r, "a/b", NULL), SKY_EINVAL);
	/* shown as revoked, and still revoked after a planner restart */
	int n = sky_registry_to_json(&g_r, 1764511200, out, sizeof out);
	SKY_EXPECT(n > 0 && strstr(out, "\"state\":\"revoked\",\"why\":\"keyCompromise\"") != NULL);
	sky_registry_init(&g_r);
	SKY_EXPECT_EQ(sky_registry_restore(&g_r, out, (size_t)n, NULL), 3);
	b = sky_registry_find(&g_r, "rv");
	SKY_EXPECT(b && b->state == SKY_REG_REVOKED && !strcmp(b->why, "keyCompromise"));
	SKY_EXPECT(sky_registry_find(&g_r, "gone")->state == SKY_REG_REVOKED);
	SKY_EXPECT_EQ(bstatus("rv", SKY_TOPIC_STATUS, "dddd", 1, 1, 200.0), 1);
	SKY_EXPECT(b->state == SKY_REG_REVOKED);
	SKY_EXPECT_EQ(sky_json_pool_used(), 0);
}
