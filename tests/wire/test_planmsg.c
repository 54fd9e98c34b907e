#include "sky_test.h"

#include "sky_json.h"
#include "sky_planmsg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static sky_planmsg g_p, g_back; /* ~100 KiB each: not on the stack */

static void sample(sky_planmsg *p, int n_stages, int layers)
{
	memset(p, 0, sizeof *p);
	strcpy(p->job, "j1");
	p->epoch = 7;
	strcpy(p->algo, "optimal");
	p->micro_batches = 4;
	strcpy(p->shape.name, "tiny");
	p->shape.hidden = 64;
	p->shape.heads = 2;
	p->shape.ffn = 128;
	p->shape.seq = 16;
	p->shape.batch = 2;
	p->layers = layers;
	p->n_stages = n_stages;
	int units = 2 * layers;
	for (int i = 0; i < n_stages; i++) {
		snprintf(p->stages[i].board, sizeof p->stages[i].board, "b%02d", i);
		p->stages[i].first = units * i / n_stages;
		p->stages[i].last = units * (i + 1) / n_stages - 1;
		p->stages[i].arena_bytes = 1000000 + i;
		p->stages[i].in_flight = 1 + i % 4;
	}
}

SKY_TEST(round_trip_and_find)
{
	char buf[SKY_PLAN_MAX_BYTES];
	sky_diag d;
	sky_diag_clear(&d);
	sample(&g_p, 16, 16);
	int n = sky_planmsg_encode(&g_p, buf, sizeof buf, &d);
	SKY_EXPECT_MSG(n > 0, "%s", d.msg);
	SKY_EXPECT_EQ(sky_planmsg_decode(buf, (size_t)n, &g_back, &d), 0);
	SKY_EXPECT_EQ(g_back.n_stages, 16);
	SKY_EXPECT_EQ(g_back.epoch, 7);
	SKY_EXPECT_EQ(g_back.layers, 16);
	SKY_EXPECT_EQ(sky_planmsg_find(&g_back, "b05"), 5);
	SKY_EXPECT_EQ(sky_planmsg_find(&g_back, "b99"), -1);
	SKY_EXPECT_EQ(g_back.stages[15].last, 31);
	SKY_EXPECT_EQ(g_back.stages[3].arena_bytes, 1000003);
	SKY_EXPECT_EQ(sky_json_pool_used(), 0);
}

SKY_TEST(stage_sites_round_trip)
{
	char buf[SKY_PLAN_MAX_BYTES];
	sky_diag d;
	sky_diag_clear(&d);
	sample(&g_p, 3, 3);
	strcpy(g_p.stages[0].site, "factory");
	strcpy(g_p.stages[2].site, "shop");
	int n = sky_planmsg_encode(&g_p, buf, sizeof buf, &d);
	SKY_EXPECT_MSG(n > 0, "%s", d.msg);
	SKY_EXPECT(strstr(buf, "\"site\":\"factory\"") != NULL);
	SKY_EXPECT_EQ(sky_planmsg_decode(buf, (size_t)n, &g_back, &d), 0);
	SKY_EXPECT(strcmp(g_back.stages[0].site, "factory") == 0);
	SKY_EXPECT(g_back.stages[1].site[0] == '\0'); /* the core: no "site" */
	SKY_EXPECT(strcmp(g_back.stages[2].site, "shop") == 0);
	strcpy(g_p.stages[1].site, "no/slash");
	SKY_EXPECT_EQ(sky_planmsg_encode(&g_p, buf, sizeof buf, &d), SKY_EINVAL);
	SKY_EXPECT_MSG(strstr(d.msg, "stage 1 site") != NULL, "%s", d.msg);
}

static int decode_edited(const char *from, const char *to, sky_diag *d)
{
	static char buf[SKY_PLAN_MAX_BYTES], out[SKY_PLAN_MAX_BYTES];
	sample(&g_p, 4, 4);
	int n = sky_planmsg_encode(&g_p, buf, sizeof buf, NULL);
	char *at = strstr(buf, from);
	if (n <= 0 || !at)
		return 1000;
	snprintf(out, sizeof out, "%.*s%s%s", (int)(at - buf), buf, to, at + strlen(from));
	sky_diag_clear(d);
	return sky_planmsg_decode(out, strlen(out), &g_back, d);
}

SKY_TEST(gaps_overlaps_and_bad_fields_are_refused)
{
	sky_diag d;
	/* stage 1 of 4 over 8 units is [2,3] */
	SKY_EXPECT_EQ(decode_edited("\"first\":2", "\"first\":3", &d), SKY_ERANGE); /* gap */
	SKY_EXPECT_MSG(strstr(d.msg, "stage 1") != NULL, "%s", d.msg);
	SKY_EXPECT_EQ(decode_edited("\"first\":2", "\"first\":1", &d), SKY_ERANGE); /* overlap */
	SKY_EXPECT_EQ(decode_edited("\"last\":7", "\"last\":8", &d), SKY_ERANGE);   /* past end */
	SKY_EXPECT_EQ(decode_edited("\"last\":7", "\"last\":6", &d), SKY_ERANGE);   /* short */
	SKY_EXPECT_EQ(decode_edited("\"board\":\"b01\"", "\"board\":\"b00\"", &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "b00") != NULL);
	SKY_EXPECT_EQ(decode_edited("\"board\":\"b01\"", "\"board\":\"b+\"", &d), SKY_EINVAL);
	SKY_EXPECT_EQ(decode_edited("\"epoch\":7", "\"epoch\":0", &d), SKY_ERANGE);
	SKY_EXPECT_EQ(decode_edited("\"epoch\":7", "\"epoch\":7.5", &d), SKY_EFORMAT);
	SKY_EXPECT_EQ(decode_edited("\"arena_bytes\":1000000", "\"arena_bytes\":1e30", &d),
		      SKY_ERANGE);
	SKY_EXPECT_EQ(decode_edited("\"stages\":[", "\"stages\":{\"x\":[", &d), SKY_EFORMAT);
	SKY_EXPECT_EQ(decode_edited("\"stages\":[", "\"stagez\":[", &d), SKY_EFORMAT);
	SKY_EXPECT_EQ(decode_edited("\"job\":\"j1\"", "\"job\":\"\"", &d), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_json_pool_used(), 0);
}

SKY_TEST(truncated_and_oversize_are_refused)
{
	static char buf[SKY_PLAN_MAX_BYTES + 1];
	sky_diag d;
	sample(&g_p, 4, 4);
	int n = sky_planmsg_encode(&g_p, buf, sizeof buf, NULL);
	SKY_EXPECT(n > 0);
	for (int cut = 0; cut < n; cut += 7) {
		sky_diag_clear(&d);
		SKY_EXPECT(sky_planmsg_decode(buf, (size_t)cut, &g_back, &d) != 0);
	}
	memset(buf, ' ', sizeof buf);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_planmsg_decode(buf, sizeof buf, &g_back, &d), SKY_ERANGE);
	SKY_EXPECT_EQ(sky_json_pool_used(), 0);
}

SKY_TEST(encoder_validates)
{
	char buf[4096];
	sky_diag d;
	sample(&g_p, 2, 2);
	g_p.stages[1].first = 3;
	sky_diag_clear(&d);
	SKY_EXPECT(sky_planmsg_encode(&g_p, buf, sizeof buf, &d) < 0);
	sample(&g_p, 2, 2);
	SKY_EXPECT_EQ(sky_planmsg_encode(&g_p, buf, 32, &d), SKY_ERANGE);
}

SKY_TEST(in_flight_must_be_within_the_micro_batches)
{
	sky_diag d;
	SKY_EXPECT_EQ(decode_edited("\"in_flight\":1", "\"in_flight\":0", &d), SKY_ERANGE);
	SKY_EXPECT_EQ(decode_edited("\"in_flight\":1", "\"in_flight\":5", &d), SKY_ERANGE);
	SKY_EXPECT_MSG(strstr(d.msg, "in_flight") != NULL, "%s", d.msg);
}

static void sample_infer(sky_planmsg *p)
{
	sample(p, 4, 4);
	p->infer.on = 1;
	p->infer.batch = 2;
	p->infer.wait_ms = 2;
	p->infer.queue = 64;
	p->infer.n_clients = 2;
	strcpy(p->infer.clients[0], "sky-client-demo");
	strcpy(p->infer.clients[1], "sky-client-x");
	p->infer.predicted_seq_s = 123.5;
	for (int i = 0; i < p->n_stages; i++) {
		sky_plan_slice *s = &p->stages[i].slice;
		memset(s->sha256, 'a' + i, SKY_PLAN_SHA256_HEX);
		s->sha256[SKY_PLAN_SHA256_HEX] = 0;
		s->bytes = 1000 + i;
		s->chunks = 2;
		s->chunk_bytes = 512;
	}
}

SKY_TEST(infer_section_round_trips)
{
	static char buf[SKY_PLAN_MAX_BYTES];
	sky_diag d;
	sky_diag_clear(&d);
	sample_infer(&g_p);
	int n = sky_planmsg_encode(&g_p, buf, sizeof buf, &d);
	SKY_EXPECT_MSG(n > 0, "%s", d.msg);
	SKY_EXPECT(strstr(buf, "\"infer\":{\"batch\":2,\"wait_ms\":2,\"queue\":64,"
			       "\"clients\":[\"sky-client-demo\",\"sky-client-x\"]") != NULL);
	SKY_EXPECT(strstr(buf, "\"train\"") == NULL);
	SKY_EXPECT_EQ(sky_planmsg_decode(buf, (size_t)n, &g_back, &d), 0);
	SKY_EXPECT(g_back.infer.on && g_back.infer.batch == 2 && g_back.infer.queue == 64 &&
		   g_back.infer.n_clients == 2 && g_back.infer.predicted_seq_s == 123.5);
	SKY_EXPECT(strcmp(g_back.stages[2].slice.sha256, g_p.stages[2].slice.sha256) == 0);
	SKY_EXPECT(g_back.stages[3].slice.bytes == 1003 && g_back.stages[3].slice.chunks == 2);
	SKY_EXPECT(sky_planmsg_client_ok(&g_back, "sky-client-x"));
	SKY_EXPECT(!sky_planmsg_client_ok(&g_back, "sky-client-other"));
	g_back.infer.n_clients = 0; /* empty list: any client identity, nothing else */
	SKY_EXPECT(sky_planmsg_client_ok(&g_back, "sky-client-other"));
	SKY_EXPECT(!sky_planmsg_client_ok(&g_back, "b01"));
	/* no tokenizer hash: none written, none read */
	SKY_EXPECT(strstr(buf, "tokenizer") == NULL && g_back.infer.tokenizer[0] == 0);
	/* the served model's tokenizer hash travels with the plan */
	strcpy(g_p.infer.tokenizer, "0badf00d");
	n = sky_planmsg_encode(&g_p, buf, sizeof buf, &d);
	SKY_EXPECT_MSG(n > 0 && strstr(buf, "\"tokenizer\":\"0badf00d\"") != NULL, "%s", d.msg);
	SKY_EXPECT_EQ(sky_planmsg_decode(buf, (size_t)n, &g_back, &d), 0);
	SKY_EXPECT(strcmp(g_back.infer.tokenizer, "0badf00d") == 0);
	/* a training plan carries no infer section */
	sample(&g_p, 4, 4);
	n = sky_planmsg_encode(&g_p, buf, sizeof buf, &d);
	SKY_EXPECT(n > 0 && strstr(buf, "infer") == NULL && strstr(buf, "slice") == NULL);
	SKY_EXPECT_EQ(sky_json_pool_used(), 0);
}

SKY_TEST(infer_plans_are_validated)
{
	sky_diag d;
	sample_infer(&g_p);
	g_p.train.steps = 5;
	strcpy(g_p.train.sched, "gpipe");
	strcpy(g_p.train.optim, "sgd");
	g_p.train.lr = 0.1;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_planmsg_validate(&g_p, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "both train and infer") != NULL);
	sample_infer(&g_p);
	g_p.infer.batch = 3; /* model batch is 2 */
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_planmsg_validate(&g_p, &d), SKY_ERANGE);
	SKY_EXPECT(strstr(d.msg, "infer.batch 3") != NULL);
	sample_infer(&g_p);
	g_p.stages[1].slice.sha256[5] = 'G';
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_planmsg_validate(&g_p, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "stage 1 slice.sha256") != NULL);
	sample_infer(&g_p);
	g_p.stages[2].slice.chunks = 3; /* 1002 bytes need exactly 2 chunks of 512 */
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_planmsg_validate(&g_p, &d), SKY_ERANGE);
	sample_infer(&g_p);
	strcpy(g_p.infer.clients[1], "b01");
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_planmsg_validate(&g_p, &d), SKY_EINVAL);
	sample_infer(&g_p);
	strcpy(g_p.infer.tokenizer, "0BADF00D"); /* not lower-case hex */
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_planmsg_validate(&g_p, &d), SKY_EFORMAT);
	SKY_EXPECT_MSG(strstr(d.msg, "infer.tokenizer must be 8 lower-case hex") != NULL, "%s", d.msg);
	sample_infer(&g_p);
	g_p.infer.sealed = 1; /* no keys */
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_planmsg_validate(&g_p, &d), SKY_EINVAL);
	sample(&g_p, 4, 4);
	strcpy(g_p.stages[0].slice.sha256, "00");
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_planmsg_validate(&g_p, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "no infer section") != NULL);
}

SKY_TEST(checkpoint_settings_travel_and_are_left_out_when_zero)
{
	char buf[SKY_PLAN_MAX_BYTES];
	sky_plan_train *t = &g_p.train;
	sample(&g_p, 2, 2);
	t->steps = 20;
	strcpy(t->sched, "1f1b");
	strcpy(t->optim, "adamw");
	t->lr = 1e-3;
	t->seed = 3;
	int n = sky_planmsg_encode(&g_p, buf, sizeof buf, NULL);
	SKY_EXPECT(n > 0);
	SKY_EXPECT(n > 0 && !strstr(buf, "ckpt_every") && !strstr(buf, "resume_step") &&
		   !strstr(buf, "generation"));
	t->ckpt_every = 2;
	t->resume_step = 6;
	t->generation = 3;
	n = sky_planmsg_encode(&g_p, buf, sizeof buf, NULL);
	SKY_EXPECT(n > 0);
	SKY_EXPECT_EQ(sky_planmsg_decode(buf, (size_t)n, &g_back, NULL), 0);
	SKY_EXPECT(g_back.train.ckpt_every == 2 && g_back.train.resume_step == 6 &&
		   g_back.train.generation == 3);
	/* resuming past the last step is not a plan */
	t->resume_step = 21;
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_planmsg_encode(&g_p, buf, sizeof buf, &d), SKY_ERANGE);
}

/* "exact_sum": left out when off (a plan encodes as before), travels when
 * on, and must be a boolean */
SKY_TEST(exact_sum_travels_and_is_left_out_when_off)
{
	char buf[SKY_PLAN_MAX_BYTES];
	sky_plan_train *t = &g_p.train;
	sample(&g_p, 2, 2);
	t->steps = 4;
	strcpy(t->sched, "gpipe");
	strcpy(t->optim, "adamw");
	t->lr = 1e-3;
	int n = sky_planmsg_encode(&g_p, buf, sizeof buf, NULL);
	SKY_EXPECT(n > 0 && !strstr(buf, "exact_sum"));
	SKY_EXPECT_EQ(sky_planmsg_decode(buf, (size_t)n, &g_back, NULL), 0);
	SKY_EXPECT_EQ(g_back.train.exact_sum, 0);
	t->exact_sum = 1;
	n = sky_planmsg_encode(&g_p, buf, sizeof buf, NULL);
	SKY_EXPECT(n > 0 && strstr(buf, "\"exact_sum\":true"));
	SKY_EXPECT_EQ(sky_planmsg_decode(buf, (size_t)n, &g_back, NULL), 0);
	SKY_EXPECT_EQ(g_back.train.exact_sum, 1);
	char *x = strstr(buf, "\"exact_sum\":true");
	if (x) {
		memcpy(x, "\"exact_sum\":1   ", 16);
		sky_diag d;
		sky_diag_clear(&d);
		SKY_EXPECT_EQ(sky_planmsg_decode(buf, (size_t)n, &g_back, &d), SKY_EFORMAT);
		SKY_EXPECT_MSG(strstr(d.msg, "train.exact_sum") != NULL, "%s", d.msg);
	}
	t->exact_sum = 0;
}

/* a data owner: its board at both ends, nowhere else; signed with the rest */
SKY_TEST(data_owner_round_trip_and_refusals)
{
	char buf[SKY_PLAN_MAX_BYTES];
	sky_diag d;
	sky_diag_clear(&d);
	sample(&g_p, 4, 4);
	g_p.train.steps = 3;
	strcpy(g_p.train.sched, "1f1b");
	strcpy(g_p.train.optim, "adamw");
	g_p.train.lr = 1e-3;
	g_p.train.seed = 1;
	strcpy(g_p.train.owner, "b00");
	g_p.train.owner_lag = 2;
	strcpy(g_p.stages[3].board, "b00");
	int n = sky_planmsg_encode(&g_p, buf, sizeof buf, &d);
	SKY_EXPECT_MSG(n > 0, "%s", d.msg);
	SKY_EXPECT(strstr(buf, "\"owner\":\"b00\",\"owner_lag\":2") != NULL);
	SKY_EXPECT_EQ(sky_planmsg_decode(buf, (size_t)n, &g_back, &d), 0);
	SKY_EXPECT(strcmp(g_back.train.owner, "b00") == 0);
	SKY_EXPECT_EQ(g_back.train.owner_lag, 2);
	SKY_EXPECT_EQ(sky_planmsg_find(&g_back, "b00"), 0);
	/* the owner in the middle as well */
	strcpy(g_p.stages[2].board, "b00");
	SKY_EXPECT_EQ(sky_planmsg_encode(&g_p, buf, sizeof buf, &d), SKY_EINVAL);
	SKY_EXPECT_MSG(strstr(d.msg, "board b00 has stages 0 and 2") != NULL, "%s", d.msg);
	strcpy(g_p.stages[2].board, "b02");
	/* not at the end */
	strcpy(g_p.stages[3].board, "b03");
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_planmsg_encode(&g_p, buf, sizeof buf, &d), SKY_EINVAL);
	SKY_EXPECT_MSG(strstr(d.msg, "must hold the first and the last") != NULL, "%s", d.msg);
	/* a board at both ends without an owner named */
	strcpy(g_p.stages[3].board, "b00");
	g_p.train.owner[0] = 0;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_planmsg_encode(&g_p, buf, sizeof buf, &d), SKY_EINVAL);
	SKY_EXPECT_MSG(strstr(d.msg, "board b00 has stages 0 and 3") != NULL, "%s", d.msg);
	/* checkpoints are not for U-shaped plans */
	strcpy(g_p.train.owner, "b00");
	g_p.train.ckpt_every = 2;
	SKY_EXPECT_EQ(sky_planmsg_encode(&g_p, buf, sizeof buf, &d), SKY_EINVAL);
}

/* 3 stages of a 3-layer model, stage 1 on b01 and replica r01 (route
 * 0,1,1,0: two micro-batches each), a training plan */
static void sample_reps(sky_planmsg *p)
{
	sample(p, 3, 3);
	p->train.steps = 3;
	strcpy(p->train.sched, "1f1b");
	strcpy(p->train.optim, "adamw");
	p->train.lr = 1e-3;
	p->train.seed = 1;
	p->stages[1].in_flight = 2;
	sky_plan_replica r;
	memset(&r, 0, sizeof r);
	strcpy(r.board, "r01");
	r.in_flight = 2;
	r.arena_bytes = 2000001;
	SKY_EXPECT_EQ(sky_planmsg_add_replica(p, 1, &r), 1);
	const unsigned char route[4] = {0, 1, 1, 0};
	sky_planmsg_set_route(p, 1, route);
}

SKY_TEST(replicas_round_trip_and_route)
{
	static char buf[SKY_PLAN_MAX_BYTES], again[SKY_PLAN_MAX_BYTES];
	sky_diag d;
	sky_diag_clear(&d);
	sample_reps(&g_p);
	int n = sky_planmsg_encode(&g_p, buf, sizeof buf, &d);
	SKY_EXPECT_MSG(n > 0, "%s", d.msg);
	SKY_EXPECT_MSG(strstr(buf, "\"replicas\":[{\"board\":\"r01\",\"in_flight\":2,"
				   "\"arena_bytes\":2000001}],\"route\":[0,1,1,0]") != NULL,
		       "%s", buf);
	SKY_EXPECT_EQ(sky_planmsg_decode(buf, (size_t)n, &g_back, &d), 0);
	SKY_EXPECT_EQ(g_back.n_reps, 1);
	SKY_EXPECT_EQ(sky_planmsg_n_replicas(&g_back, 0), 1);
	SKY_EXPECT_EQ(sky_planmsg_n_replicas(&g_back, 1), 2);
	SKY_EXPECT(strcmp(sky_planmsg_replica_board(&g_back, 1, 1), "r01") == 0);
	SKY_EXPECT(strcmp(sky_planmsg_replica_board(&g_back, 1, 0), "b01") == 0);
	SKY_EXPECT(sky_planmsg_replica_board(&g_back, 1, 2) == NULL);
	SKY_EXPECT_EQ(sky_planmsg_route(&g_back, 1, 2), 1);
	SKY_EXPECT_EQ(sky_planmsg_route(&g_back, 1, 3), 0);
	SKY_EXPECT_EQ(sky_planmsg_route(&g_back, 0, 2), 0);
	SKY_EXPECT_EQ(sky_planmsg_route(&g_back, 1, 4), -1);
	int r = -1;
	SKY_EXPECT_EQ(sky_planmsg_find_replica(&g_back, "r01", &r), 1);
	SKY_EXPECT_EQ(r, 1);
	SKY_EXPECT_EQ(sky_planmsg_find_replica(&g_back, "b02", &r), 2);
	SKY_EXPECT_EQ(r, 0);
	SKY_EXPECT_EQ(sky_planmsg_find_replica(&g_back, "zz", &r), -1);
	SKY_EXPECT_EQ(sky_planmsg_find(&g_back, "r01"), -1); /* the stage's own boards only */
	int n2 = sky_planmsg_encode(&g_back, again, sizeof again, &d);
	SKY_EXPECT(n2 == n && memcmp(buf, again, (size_t)n) == 0);
	/* one board per stage: exactly today's bytes, no replica keys */
	sample(&g_p, 3, 3);
	n = sky_planmsg_encode(&g_p, buf, sizeof buf, &d);
	SKY_EXPECT(n > 0 && strstr(buf, "replicas") == NULL && strstr(buf, "route") == NULL);
	SKY_EXPECT_EQ(sky_json_pool_used(), 0);
}

/* the replica plan's JSON with `from` replaced by `to`, decoded */
static int decode_reps_edited(const char *from, const char *to, sky_diag *d)
{
	static char buf[SKY_PLAN_MAX_BYTES], out[SKY_PLAN_MAX_BYTES];
	sample_reps(&g_p);
	g_p.train.sealed = 1;
	for (int i = 0; i < g_p.n_stages; i++)
		strcpy(g_p.stages[i].key, "a2V5");
	strcpy(g_p.reps[0].key, "a2V5");
	int n = sky_planmsg_encode(&g_p, buf, sizeof buf, NULL);
	char *at = strstr(buf, from);
	if (n <= 0 || !at)
		return 1000;
	snprintf(out, sizeof out, "%.*s%s%s", (int)(at - buf), buf, to, at + strlen(from));
	sky_diag_clear(d);
	return sky_planmsg_decode(out, strlen(out), &g_back, d);
}

SKY_TEST(malformed_and_forged_replica_plans_are_refused)
{
	sky_diag d;
#define REFUSED(from, to, rc, text)                                                   \
	do {                                                                          \
		SKY_EXPECT_EQ(decode_reps_edited(from, to, &d), rc);                  \
		SKY_EXPECT_MSG(strstr(d.msg, text) != NULL, "%s: %s", to, d.msg);     \
	} while (0)
	SKY_EXPECT_EQ(decode_reps_edited("\"route\":[0,1,1,0]", "\"route\":[0,1,1,0]", &d), 0);
	/* a replica that is another stage's board, or twice in the plan */
	REFUSED("\"board\":\"r01\"", "\"board\":\"b02\"", SKY_EINVAL,
		"board b02 is stage 2's and a replica");
	REFUSED("\"board\":\"r01\"", "\"board\":\"b01\"", SKY_EINVAL,
		"board b01 is stage 1's and a replica");
	REFUSED("\"board\":\"r01\",\"in_flight\":2,\"arena_bytes\":2000001,\"key\":\"a2V5\"}",
		"\"board\":\"r01\",\"in_flight\":1,\"arena_bytes\":1,\"key\":\"a2V5\"},"
		"{\"board\":\"r01\",\"in_flight\":1,\"arena_bytes\":1,\"key\":\"a2V5\"}",
		SKY_EINVAL, "board r01 is a replica twice");
	REFUSED("\"board\":\"r01\"", "\"board\":\"r/1\"", SKY_EINVAL, "replica 1 board id");
	/* routes: length, range, a replica with no micro-batch */
	REFUSED("\"route\":[0,1,1,0]", "\"route\":[0,1,1]", SKY_EFORMAT,
		"route has 3 entries, micro_batches is 4");
	REFUSED("\"route\":[0,1,1,0]", "\"route\":[0,1,2,0]", SKY_ERANGE,
		"route[2] must be a replica number 0 to 1");
	REFUSED("\"route\":[0,1,1,0]", "\"route\":[0,1,-1,0]", SKY_ERANGE, "route[2]");
	REFUSED("\"route\":[0,1,1,0]", "\"route\":[0,1,0.5,0]", SKY_ERANGE, "route[2]");
	REFUSED("\"route\":[0,1,1,0]", "\"route\":[0,1,\"1\",0]", SKY_ERANGE, "route[2]");
	REFUSED("\"route\":[0,1,1,0]", "\"route\":[0,0,0,0]", SKY_EINVAL,
		"stage 1 replica 1 (r01) runs no micro-batch");
	REFUSED("\"route\":[0,1,1,0]", "\"route\":[1,1,1,1]", SKY_EINVAL,
		"stage 1 replica 0 (b01) runs no micro-batch");
	/* in flight beyond the replica's share */
	REFUSED("\"route\":[0,1,1,0]", "\"route\":[0,1,0,0]", SKY_ERANGE,
		"stage 1 replica 1 in_flight 2, allowed 1 to 1");
	REFUSED("\"route\":[0,1,1,0]", "\"route\":[0,1,1,1]", SKY_ERANGE,
		"stage 1 in_flight 2, allowed 1 to 1");
	/* one without the other, wrong types, sealed without a key */
	REFUSED(",\"route\":[0,1,1,0]", "", SKY_EFORMAT, "go together");
	REFUSED("\"replicas\":[", "\"replicas\":[],\"x\":[", SKY_EFORMAT, "go together");
	REFUSED("\"replicas\":[{", "\"replicas\":[7,{", SKY_EFORMAT, "replicas[0]: must be an object");
	REFUSED("\"arena_bytes\":2000001,\"key\":\"a2V5\"", "\"arena_bytes\":2000001", SKY_EINVAL,
		"sealed frames but stage 1 replica 1 has no key");
	REFUSED("\"in_flight\":2,\"arena_bytes\":2000001", "\"arena_bytes\":2000001", SKY_ENOTFOUND,
		"in_flight");
	/* not for a data owner's plan, nor a serving one */
	REFUSED("\"seed\":1,", "\"seed\":1,\"owner\":\"b00\",\"owner_lag\":1,", SKY_EINVAL,
		"must hold the first and the last");
	sample_reps(&g_p);
	strcpy(g_p.train.owner, "b00");
	strcpy(g_p.stages[2].board, "b00");
	char buf[SKY_PLAN_MAX_BYTES];
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_planmsg_encode(&g_p, buf, sizeof buf, &d), SKY_EINVAL);
	SKY_EXPECT_MSG(strstr(d.msg, "a data owner has no stage replicas") != NULL, "%s", d.msg);
	sample_reps(&g_p);
	g_p.train.steps = 0;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_planmsg_encode(&g_p, buf, sizeof buf, &d), SKY_EINVAL);
	SKY_EXPECT_MSG(strstr(d.msg, "for training plans only") != NULL, "%s", d.msg);
	/* a plan struct whose replica lists disagree */
	sample_reps(&g_p);
	g_p.n_reps = 2;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_planmsg_encode(&g_p, buf, sizeof buf, &d), SKY_EINVAL);
	SKY_EXPECT_MSG(strstr(d.msg, "2 replicas listed, 1 belong") != NULL, "%s", d.msg);
	SKY_EXPECT_EQ(sky_json_pool_used(), 0);
#undef REFUSED
}

SKY_TEST(replicas_fill_up_to_the_limit)
{
	static char buf[SKY_PLAN_MAX_BYTES];
	sky_diag d;
	sample(&g_p, 2, 2);
	g_p.micro_batches = 128;
	g_p.train.steps = 1;
	strcpy(g_p.train.sched, "gpipe");
	strcpy(g_p.train.optim, "sgd");
	g_p.train.lr = 0.1;
	sky_plan_replica r;
	memset(&r, 0, sizeof r);
	r.in_flight = 1;
	unsigned char route[128];
	for (int k = 0; k < 2; k++) {
		for (int i = 0; i < SKY_PLANMSG_MAX_REPLICAS / 2; i++) {
			snprintf(r.board, sizeof r.board, "r%d_%d", k, i);
			SKY_EXPECT_EQ(sky_planmsg_add_replica(&g_p, k, &r), i + 1);
		}
		for (int mb = 0; mb < 128; mb++)
			route[mb] = (unsigned char)(mb % (1 + SKY_PLANMSG_MAX_REPLICAS / 2));
		sky_planmsg_set_route(&g_p, k, route);
	}
	SKY_EXPECT_EQ(sky_planmsg_add_replica(&g_p, 1, &r), SKY_ERANGE);
	SKY_EXPECT_EQ(sky_planmsg_add_replica(&g_p, 0, &r), SKY_ERANGE);
	sky_diag_clear(&d);
	int n = sky_planmsg_encode(&g_p, buf, sizeof buf, &d);
	SKY_EXPECT_MSG(n > 0, "%s", d.msg);
	SKY_EXPECT_EQ(sky_planmsg_decode(buf, (size_t)n, &g_back, &d), 0);
	SKY_EXPECT_EQ(g_back.n_reps, SKY_PLANMSG_MAX_REPLICAS);
	SKY_EXPECT_EQ(sky_planmsg_route(&g_back, 1, 127), 127 % 33);
}

/* a config.json's model: its numbers travel exactly; a train plan starting
 * from the checkpoint names every stage's slice */
SKY_TEST(hf_model_round_trips_and_init_needs_slices)
{
	char buf[SKY_PLAN_MAX_BYTES];
	sky_diag d;
	sky_diag_clear(&d);
	sample(&g_p, 2, 2);
	strcpy(g_p.shape.name, SKY_PLAN_HF_NAME);
	sky_plan_train *t = &g_p.train;
	t->steps = 4;
	strcpy(t->sched, "1f1b");
	strcpy(t->optim, "adamw");
	t->lr = 1e-3;
	sky_plan_hf *h = &g_p.hf;
	h->on = 1;
	h->vocab = 600;
	h->max_pos = 64;
	h->type_vocab = 2;
	h->classes = 3;
	h->act = 0;
	h->ln_eps = (double)1e-7f;
	h->hidden_drop = (double)0.1f;
	h->attn_drop = (double)0.1f;
	int n = sky_planmsg_encode(&g_p, buf, sizeof buf, &d);
	SKY_EXPECT_MSG(n > 0, "%s", d.msg);
	SKY_EXPECT_EQ(sky_planmsg_decode(buf, (size_t)n, &g_back, &d), 0);
	SKY_EXPECT(g_back.hf.on && g_back.hf.vocab == 600 && g_back.hf.max_pos == 64 &&
		   g_back.hf.classes == 3 && !g_back.hf.init);
	SKY_EXPECT((float)g_back.hf.ln_eps == 1e-7f && (float)g_back.hf.hidden_drop == 0.1f &&
		   (float)g_back.hf.attn_drop == 0.1f);
	/* init without slices: refused naming the stage */
	h->init = 1;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_planmsg_encode(&g_p, buf, sizeof buf, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "stage 0 slice.sha256") != NULL);
	for (int k = 0; k < 2; k++) {
		memset(g_p.stages[k].slice.sha256, 'a', 64);
		g_p.stages[k].slice.bytes = 1000;
		g_p.stages[k].slice.chunks = 1;
		g_p.stages[k].slice.chunk_bytes = 4096;
	}
	n = sky_planmsg_encode(&g_p, buf, sizeof buf, &d);
	SKY_EXPECT_MSG(n > 0, "%s", d.msg);
	SKY_EXPECT_EQ(sky_planmsg_decode(buf, (size_t)n, &g_back, &d), 0);
	SKY_EXPECT(g_back.hf.init && g_back.stages[1].slice.bytes == 1000);
	/* slices in a train plan of a preset: still refused */
	h->on = 0;
	strcpy(g_p.shape.name, "tiny");
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_planmsg_encode(&g_p, buf, sizeof buf, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "has a slice but no infer section") != NULL);
	/* an hf block under a preset's name, a vocabulary out of range */
	h->on = 1;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_planmsg_encode(&g_p, buf, sizeof buf, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "an hf model is named 'tiny'") != NULL);
	strcpy(g_p.shape.name, SKY_PLAN_HF_NAME);
	h->vocab = SKY_PLAN_HF_MAX_VOCAB + 1;
	SKY_EXPECT_EQ(sky_planmsg_encode(&g_p, buf, sizeof buf, &d), SKY_ERANGE);
	SKY_EXPECT_EQ(sky_json_pool_used(), 0);
}
