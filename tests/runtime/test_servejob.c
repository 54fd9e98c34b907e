/* Serving jobs over a fake network: three stages of a sealed infer plan,
 * each a sky_servejob driven step by step, their messages carried by a
 * fake bus. Requests go in on the first stage's req topic; the responses
 * on resp/<client> hold one board's logits bit for bit; nothing is
 * allocated after setup; a plaintext frame on the sealed job is dropped
 * (auth), a repeated one (duplicate) and one of an older epoch (epoch) too;
 * a request from a client outside sky-client-* is refused not_allowed; a
 * replay of a request already taken is dropped, of a new one answered. */
#include "sky_test.h"

#include "serve_model.h"

#include "sky_infermsg.h"
#include "sky_quant_model.h"
#include "sky_servejob.h"
#include "sky_slice.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NMSG 64
typedef struct msg {
	char topic[SKY_TOPIC_BUF];
	size_t len;
	unsigned char data[16384];
} msg;
static msg g_bus[NMSG];
static int g_nbus;
static msg g_resp[16];
static int g_nresp;

static int f_publish(void *ctx, const char *topic, const void *data, size_t len, int qos,
		     int retained)
{
	if (strstr(topic, "/metrics"))
		return 0;
	msg *m = strstr(topic, "/resp/") ? (g_nresp < 16 ? &g_resp[g_nresp++] : NULL)
					: (g_nbus < NMSG ? &g_bus[g_nbus++] : NULL);
	if (!m || len > sizeof m->data)
		return SKY_ENET;
	snprintf(m->topic, sizeof m->topic, "%s", topic);
	memcpy(m->data, data, len);
	m->len = len;
	return 0;
}
static void f_poll(void *ctx, int wait_ms) {}
static int f_subscribe(void *ctx, const char *filter) { return 0; }

static sky_planmsg g_plan;
static sky_servejob g_jobs[3];

static void deliver(int njobs)
{
	for (int i = 0; i < g_nbus; i++)
		for (int k = 0; k < njobs; k++)
			sky_servejob_on_msg(&g_jobs[k], g_bus[i].topic, g_bus[i].data, g_bus[i].len);
	g_nbus = 0;
}

SKY_TEST(sealed_three_stage_job_answers_with_one_boards_logits)
{
	sky_model_cfg c;
	if (make_int8_model(&c) != 0)
		return;
	sky_diag d;
	sky_diag_clear(&d);
	char state[600];
	snprintf(state, sizeof state, "%s/state", sky_test_tmp_dir());
	sky_planmsg *p = &g_plan;
	serve_plan3(p, &c, state, 3, 2, 1);
	SKY_EXPECT_EQ(sky_planmsg_validate(p, &d), 0);
	unsigned char key[SKY_FRAME_KEY_BYTES];
	for (int i = 0; i < SKY_FRAME_KEY_BYTES; i++)
		key[i] = (unsigned char)(i * 7 + 1);
	sky_transport_net net = {.publish = f_publish, .poll = f_poll, .subscribe = f_subscribe};
	for (int k = 0; k < 3; k++) {
		int rc = sky_servejob_setup(&g_jobs[k], p, k, p->stages[k].board, state, 1, key, &net,
					    &d);
		SKY_EXPECT_MSG(rc == 0, "stage %d: %s", k, d.msg);
		if (rc)
			return;
	}
	/* a slice whose bytes differ from the plan's hash is refused */
	sky_servejob other;
	sky_planmsg bad = *p;
	bad.stages[1].slice.sha256[0] = bad.stages[1].slice.sha256[0] == 'a' ? 'b' : 'a';
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_servejob_setup(&other, &bad, 1, "b2", state, 1, key, &net, &d),
		      SKY_ENOTFOUND);
	SKY_EXPECT(strstr(d.msg, "not in the cache") != NULL);

	unsigned long before = sky_test_allocs();
	for (int k = 0; k < 3; k++)
		SKY_EXPECT_EQ(sky_servejob_start(&g_jobs[k], &d), 0);
	/* requests: three good ones from sky-client-t, one from a board id */
	static const int32_t toks[3][5] = {{1, 2, 3, 4, 5}, {9, 8}, {60, 0, 7, 7}};
	static const int lens[3] = {5, 2, 4};
	char buf[512], topic[SKY_TOPIC_BUF];
	sky_topic_job_pair(topic, sizeof topic, "j1", SKY_TOPIC_REQ, "b1", "sky-client-t");
	for (int r = 0; r < 3; r++) {
		int32_t mask[5] = {1, 1, 1, 1, 1};
		sky_infer_req q = {.n = lens[r], .tokens = (int32_t *)toks[r], .mask = mask, .cap = 5};
		snprintf(q.id, sizeof q.id, "q%d", r);
		int n = sky_infer_req_encode(&q, buf, sizeof buf, &d);
		SKY_EXPECT(n > 0);
		f_publish(NULL, topic, buf, (size_t)n, 1, 0);
	}
	sky_topic_job_pair(topic, sizeof topic, "j1", SKY_TOPIC_REQ, "b1", "b9");
	const char *x1 = "{\"v\":1,\"id\":\"x1\",\"tokens\":[1]}";
	f_publish(NULL, topic, x1, strlen(x1), 1, 0);
	for (int it = 0; it < 200 && g_nresp < 4; it++) {
		deliver(3);
		for (int k = 0; k < 3; k++) {
			int w;
			sky_servejob_step(&g_jobs[k], &w);
		}
	}
	SKY_EXPECT_EQ(sky_test_allocs() - before, 0);
	SKY_EXPECT_EQ(g_nresp, 4);
	/* one board, each request alone */
	sky_model_cfg one = c;
	one.batch = 1;
	sky_st_file f;
	sky_st_init(&f);
	sky_qmodel q;
	SKY_EXPECT_EQ(sky_st_open(&f, g_model, &d), 0);
	SKY_EXPECT_EQ(sky_qmodel_open(&q, &f, &one, &d), 0);
	int matched = 0, refused = 0;
	for (int i = 0; i < g_nresp; i++) {
		static sky_infer_resp rr;
		SKY_EXPECT_EQ(sky_infer_resp_decode((const char *)g_resp[i].data, g_resp[i].len, &rr, &d), 0);
		if (!rr.ok) {
			refused += rr.code == SKY_INFER_NOT_ALLOWED && !strcmp(rr.id, "x1") &&
				   strstr(g_resp[i].topic, "/resp/b9") != NULL;
			continue;
		}
		int r = rr.id[1] - '0';
		int32_t ids[64] = {0}, attn[64] = {0};
		float want[2];
		for (int t = 0; t < lens[r]; t++)
			ids[t] = toks[r][t], attn[t] = 1;
		SKY_EXPECT_EQ(sky_qmodel_forward(&q, ids, attn, want, NULL), 0);
		SKY_EXPECT(rr.epoch == 3 && rr.n_logits == 2 && strstr(g_resp[i].topic, "/resp/sky-client-t"));
		matched += memcmp(want, rr.logits, sizeof want) == 0;
	}
	SKY_EXPECT_EQ(matched, 3);
	SKY_EXPECT_EQ(refused, 1);
	SKY_EXPECT(g_jobs[0].batches == 2 && g_jobs[2].responses == 3); /* batch 2: 2 + 1 */

	/* a plaintext frame, right in every field, on the sealed job: auth */
	static unsigned char payload[1 << 16], wire[1 << 16];
	size_t P = sky_serve_payload_bytes(&c);
	memset(payload, 0, P);
	sky_frame_hdr h = {.direction = SKY_FRAME_FWD, .dtype = SKY_FRAME_S8, .ndim = 1, .stage = 1,
			   .shape = {(uint32_t)P}, .epoch = 3,
			   .step = (int64_t)g_jobs[0].next_batch + 77};
	strcpy(h.job, "j1");
	int n = sky_frame_pack(NULL, &h, payload, P, wire, sizeof wire, &d);
	SKY_EXPECT(n > 0);
	long auth = g_jobs[1].drops[SKY_DROP_AUTH];
	/* from a board that is not stage 0's: refused by the topic's sender
	 * level, before the frame is looked at */
	static const char *const not_b1[] = {"b3", "b2", "x9"};
	for (int i = 0; i < 3; i++) {
		sky_topic_stage(topic, sizeof topic, "j1", 1, 0, not_b1[i]);
		SKY_EXPECT_EQ(sky_servejob_on_msg(&g_jobs[1], topic, wire, (size_t)n), 1);
	}
	SKY_EXPECT_EQ(g_jobs[1].drops[SKY_TDROP_SENDER], 3);
	SKY_EXPECT_EQ(g_jobs[1].drops[SKY_DROP_AUTH], auth);
	/* a done report and a ready to the first stage from a board that may
	 * not send them */
	const char *rd = "{\"epoch\":3,\"batch\":1,\"n\":1}";
	sky_topic_stage_leaf(topic, sizeof topic, "j1", 0, SKY_TOPIC_DONE, "b2");
	SKY_EXPECT_EQ(sky_servejob_on_msg(&g_jobs[0], topic, (const unsigned char *)rd, strlen(rd)), 1);
	sky_topic_stage_leaf(topic, sizeof topic, "j1", 2, SKY_TOPIC_READY, "b2");
	SKY_EXPECT_EQ(sky_servejob_on_msg(&g_jobs[0], topic, (const unsigned char *)rd, strlen(rd)), 1);
	SKY_EXPECT_EQ(g_jobs[0].drops[SKY_TDROP_SENDER], 2);
	sky_topic_stage(topic, sizeof topic, "j1", 1, 0, "b1");
	sky_servejob_on_msg(&g_jobs[1], topic, wire, (size_t)n);
	SKY_EXPECT_EQ(g_jobs[1].drops[SKY_DROP_AUTH], auth + 1);
	/* a sealed frame of a batch already seen: duplicate */
	long dup = g_jobs[1].drops[SKY_TDROP_DUPLICATE];
	h.step = (int64_t)g_jobs[0].next_batch - 1;
	sky_frame_key k2;
	SKY_EXPECT_EQ(sky_frame_key_init(&k2, key), 0);
	n = sky_frame_pack(&k2, &h, payload, P, wire, sizeof wire, &d);
	sky_servejob_on_msg(&g_jobs[1], topic, wire, (size_t)n);
	SKY_EXPECT_EQ(g_jobs[1].drops[SKY_TDROP_DUPLICATE], dup + 1);
	sky_frame_key_free(&k2);

	/* a burst: the first stage runs five batches before stage 1 hears of
	 * any, and stage 1 has two slots: every request is still answered */
	g_jobs[1].n_slots = 2;
	g_nresp = 0;
	sky_topic_job_pair(topic, sizeof topic, "j1", SKY_TOPIC_REQ, "b1", "sky-client-t");
	for (int r = 0; r < 10; r++) {
		int32_t mask[5] = {1, 1, 1, 1, 1};
		sky_infer_req bq = {.n = lens[r % 3], .tokens = (int32_t *)toks[r % 3], .mask = mask,
				    .cap = 5};
		snprintf(bq.id, sizeof bq.id, "b%d", r);
		int bn = sky_infer_req_encode(&bq, buf, sizeof buf, &d);
		f_publish(NULL, topic, buf, (size_t)bn, 1, 0);
	}
	deliver(1); /* the requests, to the first stage only */
	for (int it = 0; it < 10; it++) {
		int w;
		sky_servejob_step(&g_jobs[0], &w);
	}
	SKY_EXPECT_EQ(g_nbus, 5);
	for (int it = 0; it < 50 && g_nresp < 10; it++) {
		deliver(3);
		for (int k = 1; k < 3; k++) {
			int w;
			sky_servejob_step(&g_jobs[k], &w);
		}
	}
	SKY_EXPECT_EQ(g_nresp, 10);
	SKY_EXPECT_EQ(g_jobs[1].ring_full, 3);
	SKY_EXPECT_EQ(g_jobs[1].drops[SKY_TDROP_RING_FULL], 0);

	/* a frame of an older epoch (a plan before a re-plan): dropped, epoch */
	long ep = g_jobs[1].drops[SKY_DROP_EPOCH];
	h.epoch = 2;
	h.step = 991;
	SKY_EXPECT_EQ(sky_frame_key_init(&k2, key), 0);
	n = sky_frame_pack(&k2, &h, payload, P, wire, sizeof wire, &d);
	sky_frame_key_free(&k2);
	sky_topic_stage(topic, sizeof topic, "j1", 1, 0, "b1");
	sky_servejob_on_msg(&g_jobs[1], topic, wire, (size_t)n);
	SKY_EXPECT_EQ(g_jobs[1].drops[SKY_DROP_EPOCH], ep + 1);

	/* replays (planner/sky_servefault.h): the planner's copy of a request
	 * this stage already took is dropped; of one it never saw, run and
	 * answered; the client's own second request with a used id still runs
	 * (ids are the client's business) */
	g_nresp = 0;
	static const char *const rp[3][2] = {{SKY_TOPIC_REPLAY, "b3"}, {SKY_TOPIC_REPLAY, "z1"},
					     {SKY_TOPIC_REQ, "b4"}};
	for (int r = 0; r < 3; r++) {
		int32_t mask[5] = {1, 1, 1, 1, 1};
		sky_infer_req rq = {.n = lens[0], .tokens = (int32_t *)toks[0], .mask = mask, .cap = 5};
		snprintf(rq.id, sizeof rq.id, "%s", rp[r][1]);
		int rn = sky_infer_req_encode(&rq, buf, sizeof buf, &d);
		sky_topic_job_pair(topic, sizeof topic, "j1", rp[r][0], "b1", "sky-client-t");
		f_publish(NULL, topic, buf, (size_t)rn, 1, 0);
	}
	for (int it = 0; it < 50 && g_nresp < 2; it++) {
		deliver(3);
		for (int k = 0; k < 3; k++) {
			int w;
			sky_servejob_step(&g_jobs[k], &w);
		}
	}
	for (int it = 0; it < 5; it++) { /* nothing more comes */
		deliver(3);
		for (int k = 0; k < 3; k++) {
			int w;
			sky_servejob_step(&g_jobs[k], &w);
		}
	}
	SKY_EXPECT_EQ(g_nresp, 2);
	SKY_EXPECT_EQ(g_jobs[0].replay_dups, 1);
	SKY_EXPECT_EQ(g_jobs[0].replays, 1);
	int z1 = 0, b4 = 0;
	for (int i = 0; i < g_nresp; i++) {
		static sky_infer_resp rr;
		SKY_EXPECT_EQ(sky_infer_resp_decode((const char *)g_resp[i].data, g_resp[i].len, &rr, &d), 0);
		z1 += rr.ok && !strcmp(rr.id, "z1") && strstr(g_resp[i].topic, "/resp/sky-client-t");
		b4 += rr.ok && !strcmp(rr.id, "b4");
	}
	SKY_EXPECT(z1 == 1 && b4 == 1);

	/* 65 sealed frames the first stage sent, recorded, taken by stage 1,
	 * then replayed in rotation (a window of the last 64 numbers would take
	 * the first one again, and so on round): every replay is refused
	 * before it is decrypted or run, none goes on to the next stage */
	static unsigned char rec[65][1 << 13];
	static size_t rec_n[65];
	int nrec = 0;
	sky_topic_job_pair(topic, sizeof topic, "j1", SKY_TOPIC_REQ, "b1", "sky-client-t");
	for (int i = 0; i < 65; i++) {
		for (int r = 0; r < 2; r++) { /* a full batch */
			int32_t mask[5] = {1, 1, 1, 1, 1};
			sky_infer_req rq = {.n = 3, .tokens = (int32_t *)toks[2], .mask = mask, .cap = 5};
			snprintf(rq.id, sizeof rq.id, "r%d.%d", i, r);
			int rn = sky_infer_req_encode(&rq, buf, sizeof buf, &d);
			f_publish(NULL, topic, buf, (size_t)rn, 1, 0);
		}
		deliver(1);
		int w;
		sky_servejob_step(&g_jobs[0], &w);
		for (int m = 0; m < g_nbus; m++)
			if (strstr(g_bus[m].topic, "/stage/1/") && nrec < 65 &&
			    g_bus[m].len <= sizeof rec[0]) {
				memcpy(rec[nrec], g_bus[m].data, g_bus[m].len);
				rec_n[nrec++] = g_bus[m].len;
			}
		g_nbus = 0;
	}
	SKY_EXPECT_EQ(nrec, 65);
	sky_topic_stage(topic, sizeof topic, "j1", 1, 0, "b1");
	long out0 = g_jobs[1].frames_out;
	for (int i = 0; i < nrec; i++) {
		sky_servejob_on_msg(&g_jobs[1], topic, rec[i], rec_n[i]);
		int w;
		sky_servejob_step(&g_jobs[1], &w);
		g_nbus = 0;
	}
	SKY_EXPECT_EQ(g_jobs[1].frames_out, out0 + 65);
	dup = g_jobs[1].drops[SKY_TDROP_DUPLICATE];
	for (int r = 0; r < 2 * nrec; r++) {
		sky_servejob_on_msg(&g_jobs[1], topic, rec[r % nrec], rec_n[r % nrec]);
		int w;
		sky_servejob_step(&g_jobs[1], &w);
		g_nbus = 0;
	}
	SKY_EXPECT_EQ(g_jobs[1].drops[SKY_TDROP_DUPLICATE], dup + 2 * 65);
	SKY_EXPECT_EQ(g_jobs[1].frames_out, out0 + 65);

	sky_qmodel_close(&q);
	sky_st_close(&f);
	for (int k = 0; k < 3; k++)
		sky_servejob_free(&g_jobs[k]);
}
