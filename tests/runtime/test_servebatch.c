/* The first serving stage's batching rule and its flight table, on
 * synthetic clocks and queues (no sleeping, no wall clock): full batches
 * always go, a part-full one goes after wait_s only while the pipeline has
 * room, and in a closed loop of clients the rule sends full batches where
 * "send whatever waited wait_s" sends part-full ones. */
#include "sky_test.h"

#include "serve_model.h"

#include "sky_file.h"
#include "sky_infermsg.h"
#include "sky_servebatch.h"
#include "sky_servejob.h"
#include "sky_slice.h"

#include <stdio.h>
#include <string.h>

static const sky_servebatch_rule k_rule = {.batch = 8, .wait_s = 0.002, .depth = 6};

SKY_TEST(a_full_batch_goes_at_once_whatever_is_in_flight)
{
	int w = -1;
	SKY_EXPECT_EQ(sky_servebatch_decide(&k_rule, 8, 0, 0, &w), SKY_SERVEBATCH_SEND);
	SKY_EXPECT_EQ(w, 0);
	SKY_EXPECT_EQ(sky_servebatch_decide(&k_rule, 8, 0, 6, &w), SKY_SERVEBATCH_SEND);
	SKY_EXPECT_EQ(sky_servebatch_decide(&k_rule, 30, 0, 60, &w), SKY_SERVEBATCH_SEND);
}

SKY_TEST(nothing_waiting_or_not_waited_long_enough_waits)
{
	int w = -1;
	SKY_EXPECT_EQ(sky_servebatch_decide(&k_rule, 0, 5.0, 0, &w), SKY_SERVEBATCH_WAIT);
	SKY_EXPECT_EQ(w, SKY_SERVEBATCH_IDLE_MS);
	/* 0.5 ms of 2 ms waited: wake after the rest (1.5 ms, rounded down, +1) */
	SKY_EXPECT_EQ(sky_servebatch_decide(&k_rule, 3, 0.0005, 0, &w), SKY_SERVEBATCH_WAIT);
	SKY_EXPECT_EQ(w, 2);
	/* also with the pipeline full: the wait comes first */
	SKY_EXPECT_EQ(sky_servebatch_decide(&k_rule, 3, 0.0005, 6, &w), SKY_SERVEBATCH_WAIT);
}

SKY_TEST(a_part_full_batch_goes_after_the_wait_only_while_the_pipeline_has_room)
{
	int w = -1;
	/* lightly loaded: nothing or little in flight, the wait bounds latency */
	SKY_EXPECT_EQ(sky_servebatch_decide(&k_rule, 1, 0.002, 0, &w), SKY_SERVEBATCH_SEND);
	SKY_EXPECT_EQ(sky_servebatch_decide(&k_rule, 7, 0.010, 5, &w), SKY_SERVEBATCH_SEND);
	/* the pipeline holds its depth: keep filling */
	SKY_EXPECT_EQ(sky_servebatch_decide(&k_rule, 7, 0.010, 6, &w), SKY_SERVEBATCH_HOLD);
	SKY_EXPECT_EQ(w, SKY_SERVEBATCH_HOLD_MS);
	SKY_EXPECT_EQ(sky_servebatch_decide(&k_rule, 1, 9.0, 7, &w), SKY_SERVEBATCH_HOLD);
	/* one stage: nothing is ever in flight when it decides */
	sky_servebatch_rule one = {.batch = 4, .wait_s = 0.002, .depth = 1};
	SKY_EXPECT_EQ(sky_servebatch_decide(&one, 1, 0.002, 0, &w), SKY_SERVEBATCH_SEND);
}

SKY_TEST(the_flight_table_counts_reports_and_forgets_stale_batches)
{
	sky_servebatch_flight f;
	sky_servebatch_init(&f);
	sky_servebatch_sent(&f, 100, 0.0);
	sky_servebatch_sent(&f, 101, 1.0);
	sky_servebatch_sent(&f, 102, 2.0);
	SKY_EXPECT_EQ(sky_servebatch_in_flight(&f, 2.5, 10.0), 3);
	SKY_EXPECT_EQ(sky_servebatch_done(&f, 101), 1);
	SKY_EXPECT_EQ(sky_servebatch_done(&f, 101), 0); /* a repeated report */
	SKY_EXPECT_EQ(sky_servebatch_done(&f, 7), 0);   /* another run's */
	SKY_EXPECT_EQ(f.done, 1);
	SKY_EXPECT_EQ(f.stray, 2);
	SKY_EXPECT_EQ(sky_servebatch_in_flight(&f, 2.5, 10.0), 2);
	/* at 11.5 with a 10 s bound, batch 100 (sent at 0) is stale, 102 is not */
	SKY_EXPECT_EQ(sky_servebatch_in_flight(&f, 11.5, 10.0), 1);
	SKY_EXPECT_EQ(f.lost, 1);
	SKY_EXPECT_EQ(f.batch[0], 102);
	SKY_EXPECT_EQ(sky_servebatch_in_flight(&f, 12.5, 10.0), 0);
	SKY_EXPECT_EQ(f.lost, 2);
	/* a full table forgets its oldest */
	for (int i = 0; i < SKY_SERVEBATCH_MAX + 3; i++)
		sky_servebatch_sent(&f, 1000 + (uint64_t)i, 20.0 + i);
	SKY_EXPECT_EQ(f.n, SKY_SERVEBATCH_MAX);
	SKY_EXPECT_EQ(f.lost, 5);
	SKY_EXPECT_EQ(f.batch[0], 1003);
	SKY_EXPECT_EQ(sky_servebatch_done(&f, 1003 + SKY_SERVEBATCH_MAX - 1), 1);
}

SKY_TEST(the_stale_bound_follows_the_predicted_pace)
{
	/* 6 stages at 60 seq/s in batches of 8: 4 x 7 x 8/60 = 3.73 s */
	SKY_EXPECT(fabs(sky_servebatch_stale_s(6, 8, 60.0) - 4.0 * 7 * 8 / 60.0) < 1e-9);
	SKY_EXPECT_EQ(sky_servebatch_stale_s(6, 8, 0), 2);
	SKY_EXPECT_EQ(sky_servebatch_stale_s(2, 1, 1000.0), 2);
}

/* ---- a closed loop on a synthetic clock ------------------------------------------
 *
 * A pipeline of `depth` stages, each busy `stage_us` per batch (whatever its
 * fill), fed by `clients` clients that send their next request when their
 * last is answered. Answers of one batch come back to the first stage
 * spread out: request i of a batch arrives `spread_us` * (i + 1) after the
 * batch left the last stage (clients and a broker are not instantaneous).
 * The first stage decides with sky_servebatch_decide whenever a request
 * arrives, a batch leaves the pipeline or its wait bound comes; depth_rule
 * is the rule's depth (a huge one is the old "send whatever waited
 * wait_s"). The clock counts whole microseconds, so that "waited wait_s"
 * is exact. */

#define SIM_MAX 4096
#define NEVER (1ll << 62)

typedef struct sim {
	long long arrive[SIM_MAX]; /* pending request arrivals */
	int n_arrive;
	long long exit_at[SIM_MAX]; /* when each batch in flight leaves the last stage */
	int exit_n[SIM_MAX], exit_id[SIM_MAX];
	int n_exit;
	long long free_at[16]; /* when each stage is next free */
	long long queue[SIM_MAX]; /* arrival times of the waiting requests, oldest first */
	int queued;
} sim;

static int min_at(const long long *v, int n)
{
	int k = 0;
	for (int i = 1; i < n; i++)
		if (v[i] < v[k])
			k = i;
	return k;
}

/* Returns the mean fill (requests per batch / batch) of the batches after
 * the first `warm`, `batches` in all; *part_full counts those part-full. */
static double run_loop(int depth, int depth_rule, int clients, long long stage_us,
		       long long spread_us, int batches, int warm, long *part_full)
{
	static sim s;
	memset(&s, 0, sizeof s);
	const sky_servebatch_rule r = {.batch = 8, .wait_s = 0.002, .depth = depth_rule};
	const long long wait_us = 2000;
	sky_servebatch_flight f;
	sky_servebatch_init(&f);
	long long now = 0;
	int sent = 0, reqs = 0, counted = 0;
	*part_full = 0;
	for (int i = 0; i < clients; i++)
		s.arrive[s.n_arrive++] = spread_us * i;
	for (int guard = 0; sent < batches && guard < 1000000; guard++) {
		/* decide until it says no */
		for (;;) {
			int w;
			int in = sky_servebatch_in_flight(&f, (double)now / 1e6, 1e9);
			double waited = s.queued ? (double)(now - s.queue[0]) / 1e6 : 0;
			if (sky_servebatch_decide(&r, s.queued, waited, in, &w) != SKY_SERVEBATCH_SEND)
				break;
			int n = s.queued < r.batch ? s.queued : r.batch;
			memmove(s.queue, s.queue + n, sizeof s.queue[0] * (size_t)(s.queued - n));
			s.queued -= n;
			long long t = now; /* through the stages, each when it is free */
			for (int k = 0; k < depth; k++) {
				s.free_at[k] = (t > s.free_at[k] ? t : s.free_at[k]) + stage_us;
				t = s.free_at[k];
			}
			sky_servebatch_sent(&f, (uint64_t)sent, (double)now / 1e6);
			s.exit_at[s.n_exit] = t;
			s.exit_n[s.n_exit] = n;
			s.exit_id[s.n_exit++] = sent;
			if (sent++ >= warm) {
				reqs += n;
				counted++;
				*part_full += n < r.batch;
			}
		}
		/* the next event: an arrival, a batch's exit, or the wait bound */
		int ka = s.n_arrive ? min_at(s.arrive, s.n_arrive) : -1;
		int ke = s.n_exit ? min_at(s.exit_at, s.n_exit) : -1;
		long long ta = ka >= 0 ? s.arrive[ka] : NEVER, te = ke >= 0 ? s.exit_at[ke] : NEVER;
		long long tw = s.queued > 0 && s.queue[0] + wait_us > now ? s.queue[0] + wait_us : NEVER;
		if (tw < ta && tw < te) {
			now = tw;
		} else if (ta <= te) {
			now = ta;
			s.queue[s.queued++] = ta;
			s.arrive[ka] = s.arrive[--s.n_arrive];
		} else {
			/* the batch's answers: its clients' next requests, spread out */
			now = te;
			sky_servebatch_done(&f, (uint64_t)s.exit_id[ke]);
			for (int i = 0; i < s.exit_n[ke] && s.n_arrive < SIM_MAX; i++)
				s.arrive[s.n_arrive++] = now + spread_us * (i + 1);
			s.n_exit--;
			s.exit_at[ke] = s.exit_at[s.n_exit];
			s.exit_n[ke] = s.exit_n[s.n_exit];
			s.exit_id[ke] = s.exit_id[s.n_exit];
		}
	}
	return counted ? (double)reqs / (8.0 * counted) : 0;
}

SKY_TEST(in_a_closed_loop_the_rule_sends_full_batches_where_the_plain_wait_does_not)
{
	/* 64 clients (8 batches' worth) on 6 stages of 100 ms each; a batch's
	 * answers come back as requests 1 ms apart, so 8 of them take 8 ms:
	 * longer than the 2 ms wait */
	long part_rule = -1, part_plain = -1;
	double fill_rule = run_loop(6, 6, 64, 100000, 1000, 400, 50, &part_rule);
	double fill_plain = run_loop(6, 1 << 30, 64, 100000, 1000, 400, 50, &part_plain);
	SKY_EXPECT_MSG(fill_rule == 1.0 && part_rule == 0, "fill %.3f, %ld part-full", fill_rule,
		       part_rule);
	SKY_EXPECT_MSG(fill_plain < 0.9 && part_plain > 100, "plain wait: fill %.3f, %ld part-full",
		       fill_plain, part_plain);
	/* a light load: 3 clients, never a full batch; each batch still goes
	 * (the pipeline has room), so no request waits for company for ever */
	long part_light = 0;
	double fill_light = run_loop(6, 6, 3, 100000, 1000, 100, 10, &part_light);
	SKY_EXPECT_MSG(fill_light > 0 && fill_light <= 3.0 / 8 && part_light == 90,
		       "light load: fill %.3f, %ld part-full", fill_light, part_light);
}

/* ---- the rule in a serving job ------------------------------------------------------
 *
 * Three stages of an infer plan (batch 2, wait 0 ms) over a fake bus, each a
 * sky_servejob stepped by hand. Seven requests: the first stage sends three
 * full batches, then holds the seventh request (part-full, waited its 0 ms,
 * three batches in flight on three stages) however often it is stepped,
 * until the last stage's report that a batch left reaches it. */

#define NMSG 64
typedef struct msg {
	char topic[SKY_TOPIC_BUF];
	size_t len;
	unsigned char data[16384];
} msg;
static msg g_bus[NMSG];
static int g_nbus, g_nresp, g_ndone;

static int f_publish(void *ctx, const char *topic, const void *data, size_t len, int qos,
		     int retained)
{
	if (strstr(topic, "/metrics"))
		return 0;
	if (strstr(topic, "/resp/")) {
		g_nresp++;
		return 0;
	}
	g_ndone += strstr(topic, "/stage/0/done") != NULL;
	if (g_nbus >= NMSG || len > sizeof g_bus[0].data)
		return SKY_ENET;
	msg *m = &g_bus[g_nbus++];
	snprintf(m->topic, sizeof m->topic, "%s", topic);
	memcpy(m->data, data, len);
	m->len = len;
	return 0;
}
static void f_poll(void *ctx, int wait_ms) {}
static int f_subscribe(void *ctx, const char *filter) { return 0; }

static sky_planmsg g_plan;
static sky_servejob g_jobs[3];

/* Hands the bus to stages [from, to); messages for stage 0 (reports) stay
 * on the bus when from > 0. */
static void deliver(int from, int to)
{
	int keep = 0;
	for (int i = 0; i < g_nbus; i++) {
		int taken = 0;
		for (int k = from; k < to; k++)
			taken |= sky_servejob_on_msg(&g_jobs[k], g_bus[i].topic, g_bus[i].data,
						     g_bus[i].len);
		if (!taken && from > 0 && strstr(g_bus[i].topic, "/stage/0/"))
			g_bus[keep++] = g_bus[i];
	}
	g_nbus = keep;
}

static int frames_to(int stage)
{
	char t[SKY_TOPIC_BUF];
	char from[8];
	snprintf(from, sizeof from, "b%d", stage); /* stage k-1's board: b<k> */
	sky_topic_stage(t, sizeof t, "j1", stage, 0, from);
	int n = 0;
	for (int i = 0; i < g_nbus; i++)
		n += strcmp(g_bus[i].topic, t) == 0;
	return n;
}

SKY_TEST(the_first_stage_holds_a_part_full_batch_while_the_pipeline_is_full)
{
	sky_model_cfg c;
	if (make_int8_model(&c) != 0)
		return;
	sky_diag d;
	sky_diag_clear(&d);
	char state[600];
	snprintf(state, sizeof state, "%s/state", sky_test_tmp_dir());
	sky_planmsg *p = &g_plan;
	serve_plan3(p, &c, state, 5, 1, 0);
	sky_transport_net net = {.publish = f_publish, .poll = f_poll, .subscribe = f_subscribe};
	for (int k = 0; k < 3; k++) {
		int rc = sky_servejob_setup(&g_jobs[k], p, k, p->stages[k].board, state, 1, NULL, &net,
					    &d);
		SKY_EXPECT_MSG(rc == 0, "stage %d: %s", k, d.msg);
		if (rc)
			return;
		SKY_EXPECT_EQ(sky_servejob_start(&g_jobs[k], &d), 0);
	}
	deliver(0, 3); /* the ready messages: the first stage opens */
	char buf[512], topic[SKY_TOPIC_BUF];
	sky_topic_job_pair(topic, sizeof topic, "j1", SKY_TOPIC_REQ, "b1", "sky-client-t");
	for (int r = 0; r < 7; r++) {
		int32_t toks[3] = {5, 6, 7}, mask[3] = {1, 1, 1};
		sky_infer_req q = {.n = 3, .tokens = toks, .mask = mask, .cap = 3};
		snprintf(q.id, sizeof q.id, "r%d", r);
		int n = sky_infer_req_encode(&q, buf, sizeof buf, &d);
		SKY_EXPECT(n > 0);
		sky_servejob_on_msg(&g_jobs[0], topic, (const unsigned char *)buf, (size_t)n);
	}
	sky_servejob *j0 = &g_jobs[0];
	int w = 0;
	for (int it = 0; it < 10; it++)
		sky_servejob_step(j0, &w);
	SKY_EXPECT_EQ(frames_to(1), 3);
	SKY_EXPECT_EQ(j0->q_len, 1);
	SKY_EXPECT(j0->held > 0);
	SKY_EXPECT_EQ(w, SKY_SERVEBATCH_HOLD_MS);
	/* the later stages answer the three batches; the reports stay on the
	 * bus, and the first stage, stepped in between, still holds */
	for (int it = 0; it < 50 && g_ndone < 3; it++) {
		deliver(1, 3);
		for (int k = 0; k < 3; k++)
			sky_servejob_step(&g_jobs[k], &w);
	}
	SKY_EXPECT_EQ(g_nresp, 6);
	SKY_EXPECT_EQ(g_ndone, 3);
	SKY_EXPECT_EQ(j0->q_len, 1);
	SKY_EXPECT_EQ(j0->batches, 3);
	/* a report of another epoch does not count */
	char other[SKY_TOPIC_BUF];
	sky_topic_stage_leaf(other, sizeof other, "j1", 0, SKY_TOPIC_DONE, "b3");
	char rep[96];
	int rn = snprintf(rep, sizeof rep, "{\"epoch\":4,\"batch\":%llu,\"n\":2}",
			  (unsigned long long)j0->flight.batch[0]);
	SKY_EXPECT_EQ(sky_servejob_on_msg(j0, other, (const unsigned char *)rep, (size_t)rn), 1);
	sky_servejob_step(j0, &w);
	SKY_EXPECT_EQ(j0->batches, 3);
	/* the reports reach it: a batch has left, the seventh request goes */
	deliver(0, 1);
	SKY_EXPECT_EQ(j0->flight.done, 3);
	SKY_EXPECT_EQ(sky_servejob_step(j0, &w), 1);
	SKY_EXPECT_EQ(j0->batches, 4);
	for (int it = 0; it < 50 && g_nresp < 7; it++) {
		deliver(0, 3);
		for (int k = 0; k < 3; k++)
			sky_servejob_step(&g_jobs[k], &w);
	}
	SKY_EXPECT_EQ(g_nresp, 7);
	for (int k = 0; k < 3; k++)
		sky_servejob_free(&g_jobs[k]);
}

SKY_TEST(a_done_report_is_parsed_whole_or_refused_with_the_reason)
{
	int64_t ep;
	uint64_t b;
	int n;
	sky_diag d;
	const char *ok = "{\"epoch\":4,\"batch\":1883540181484522,\"n\":2}";
	SKY_EXPECT_EQ(sky_servebatch_done_parse(ok, strlen(ok), &ep, &b, &n, NULL), 0);
	SKY_EXPECT(ep == 4 && b == 1883540181484522ull && n == 2);
	struct {
		const char *msg, *why;
	} bad[] = {
		{"{\"epoch\":4}", "batch"},
		{"{\"epoch\":4,\"batch\":-1}", "batch"},
		{"{\"epoch\":4,\"batch\":9007199254740992}", "beyond 2^53 - 1"},
		{"{\"epoch\":4,\"batch\":1.5}", "batch"},
		{"{\"epoch\":4,\"batch\":1,\"n\":70000}", "'n'"},
		{"[1,2]", "not an object"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		sky_diag_clear(&d);
		SKY_EXPECT_EQ(sky_servebatch_done_parse(bad[i].msg, strlen(bad[i].msg), &ep, &b, &n, &d),
			      SKY_EFORMAT);
		SKY_EXPECT_MSG(strstr(d.msg, bad[i].why) != NULL, "%zu: %s", i, d.msg);
	}
	static char big[400];
	memset(big, ' ', sizeof big);
	memcpy(big, ok, strlen(ok));
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_servebatch_done_parse(big, sizeof big, &ep, &b, &n, &d), SKY_EFORMAT);
	SKY_EXPECT_MSG(strstr(d.msg, "done report of 400 bytes, at most 256") != NULL, "%s", d.msg);
}
