/* Federated jobs at their aggregator (planner/svc_fed.c) without a broker:
 * the owners checked at submit (unknown board, no such set, shards whose
 * labels differ), a signed retained round, updates in chunks by sender,
 * the refusals counted by reason in the round's line, and the global model
 * after two rounds exactly sky_fedavg_mean's. */
#include "sky_test.h"

#include "svc_fake.h"

#include "sky_ca.h"
#include "sky_chunk.h"
#include "sky_fedmsg.h"
#include "sky_fedopt.h"
#include "sky_file.h"
#include "sky_pki.h"
#include "sky_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WORDS 70000u /* two update chunks */

static char g_sha[65];

static svc *setup(void)
{
	static char pki[600];
	svc *s = svc_fake_fresh("fed");
	snprintf(pki, sizeof pki, "%s/pki", sky_test_tmp_dir());
	sky_ca_opts o = {.port = 18998, .max_packet = 65536};
	if (!sky_file_exists(pki))
		sky_ca_init_dir(pki, &o, NULL);
	sky_signer_init(&s->signer);
	if (sky_ca_load_signer(&s->signer, pki, NULL) != 0)
		return NULL;
	sky_deploy_init(&s->deploy, s->state_dir, NULL, 0, 0);
	const int rows[3] = {30, 10, 20}, labels[3] = {3, 3, 2};
	for (int i = 0; i < 3; i++) {
		char id[8];
		snprintf(id, sizeof id, "b%d", i + 1);
		sky_reg_board *b = svc_fake_board(s, id, SKY_REG_ONLINE);
		b->has_caps = 1;
		b->caps.n_datasets = 1;
		sky_caps_dataset *ds = &b->caps.datasets[0];
		snprintf(ds->name, sizeof ds->name, "train");
		ds->rows = rows[i], ds->labels = labels[i], ds->seq = 24, ds->tokenizer = 0x1234;
	}
	/* the model: a bundle of WORDS zeros in the planner's store */
	uint64_t n = sky_fedb_bytes(2, WORDS);
	unsigned char *b = calloc(1, n), sha[32];
	size_t at;
	sky_fedb_write_head(b, "{}", 2, WORDS, &at);
	sky_sha256(b, n, sha);
	sky_sha256_hex(sha, g_sha);
	char dir[700], path[800];
	snprintf(dir, sizeof dir, "%s/models", s->state_dir);
	sky_file_mkdirs(dir, 0700);
	snprintf(path, sizeof path, "%s/%s.safetensors", dir, g_sha);
	sky_file_write(path, b, n, 0600);
	free(b);
	return s;
}

static int submit_more(svc *s, const char *job, const char *owners, const char *set,
		       const char *more, sky_diag *d)
{
	static sky_job_req r;
	char doc[1024];
	snprintf(doc, sizeof doc,
		 "{\"job\":\"%s\",\"model\":\"tiny\",\"task\":\"train\",\"dataset\":\"%s\","
		 "\"federated\":{\"model\":\"%s\",\"owners\":[%s],\"rounds\":2,\"local_steps\":1%s}}",
		 job, set, g_sha, owners, more);
	sky_diag_clear(d);
	int rc = sky_job_req_parse(doc, strlen(doc), &r, d);
	return rc ? rc : svc_fed_submit(s, &r, "op1", d);
}

static int submit(svc *s, const char *job, const char *owners, const char *set, sky_diag *d)
{
	return submit_more(s, job, owners, set, "", d);
}

/* Owner id's update: every element v, in chunks (chunk 0 sent twice when
 * replay). */
static void send(svc *s, const char *job, const char *id, uint64_t round, float v, int replay)
{
	static float x[SKY_FED_CHUNK_WORDS];
	static unsigned char msg[SKY_FEDU_MAX_BYTES];
	for (uint32_t i = 0; i < SKY_FED_CHUNK_WORDS; i++)
		x[i] = v;
	for (uint32_t c = 0; c * SKY_FED_CHUNK_WORDS < WORDS; c++) {
		uint32_t n = WORDS - c * SKY_FED_CHUNK_WORDS;
		if (n > SKY_FED_CHUNK_WORDS)
			n = SKY_FED_CHUNK_WORDS;
		int len = sky_fedupd_encode_plain(round, c, WORDS, x, n, msg, sizeof msg);
		svc_fed_on_update(s, job, id, msg, (size_t)len);
		if (replay && c == 0)
			svc_fed_on_update(s, job, id, msg, (size_t)len);
	}
}

SKY_TEST(owners_are_checked_at_submit)
{
	svc *s = setup();
	SKY_EXPECT(s != NULL);
	sky_diag d;
	SKY_EXPECT(submit(s, "fa", "\"b1\",\"b9\"", "train", &d) == SKY_ENOTFOUND);
	SKY_EXPECT_MSG(strstr(d.msg, "owner b9 is not a board of this fleet") != NULL, "%s", d.msg);
	SKY_EXPECT(submit(s, "fb", "\"b1\"", "other", &d) == SKY_ENOTFOUND);
	SKY_EXPECT_MSG(strstr(d.msg, "owner b1 holds no data set named other") != NULL, "%s", d.msg);
	SKY_EXPECT(submit(s, "fc", "\"b1\",\"b3\"", "train", &d) == SKY_EINVAL);
	SKY_EXPECT_MSG(strstr(d.msg, "b3's shard of train has 2 labels") != NULL &&
			       strstr(d.msg, "the shards must come from one set") != NULL,
		       "%s", d.msg);
	SKY_EXPECT(svc_fake_last("sky/v1/job/fa/fedround") == NULL);
}

SKY_TEST(two_rounds_with_refusals_give_the_fedavg_mean)
{
	svc *s = setup();
	sky_diag d;
	SKY_EXPECT_EQ(submit(s, "f", "\"b1\",\"b2\"", "train", &d), 0);
	const svc_fake_pub *p = svc_fake_last("sky/v1/job/f/fedround");
	SKY_EXPECT(p && p->retained);
	if (p) { /* signed by the planner: what an owner checks */
		static char pay[SKY_SIGN_MAX_PAYLOAD + 1], path[700];
		static sky_fedround_msg m;
		size_t plen = 0;
		mbedtls_x509_crt crt;
		mbedtls_x509_crt_init(&crt);
		snprintf(path, sizeof path, "%s/pki/%s", sky_test_tmp_dir(), SKY_CA_PLANNER_CERT_FILE);
		SKY_EXPECT_EQ(sky_sign_load_cert(&crt, path, NULL), 0);
		SKY_EXPECT_EQ(sky_verify_envelope(&crt, p->data, p->len, pay, sizeof pay, &plen, NULL),
			      0);
		SKY_EXPECT_EQ(sky_fedround_msg_decode(pay, plen, &m, NULL), 0);
		SKY_EXPECT(m.round == 0 && m.rounds == 2 && m.nown == 2 && m.sampled[0] &&
			   m.sampled[1] && !strcmp(m.model_sha256, g_sha) && m.words == WORDS);
		mbedtls_x509_crt_free(&crt);
	}
	SKY_EXPECT(svc_fake_last("sky/v1/job/f/fedmodel") != NULL);
	/* round 0: b1 (30 rows) all 1, b2 (10 rows) all 2; bad chunks meanwhile */
	send(s, "f", "b1", 0, 1.0f, 1);  /* its chunk 0 twice: a replay */
	send(s, "f", "b9", 0, 5.0f, 0);  /* no owner */
	send(s, "f", "b2", 7, 5.0f, 0);  /* another round */
	svc_fed_tick(s, 1e9);
	SKY_EXPECT(svc_fake_last("sky/v1/jobs/op1/job/f/metrics") == NULL); /* b2 not in yet */
	send(s, "f", "b2", 0, 2.0f, 0);
	svc_fed_tick(s, 1e9);
	p = svc_fake_last("sky/v1/jobs/op1/job/f/metrics");
	SKY_EXPECT(p != NULL);
	if (p) {
		SKY_EXPECT_MSG(strstr(p->data, "\"fed_replay\":1") &&
				       strstr(p->data, "\"fed_not_owner\":2") &&
				       strstr(p->data, "\"fed_wrong_round\":2") &&
				       strstr(p->data, "\"owners_in\":[\"b1\",\"b2\"]"),
			       "%s", p->data);
	}
	/* round 1, then the end: the final model relayed to op1, retained */
	send(s, "f", "b2", 1, 3.0f, 0);
	send(s, "f", "b1", 1, 0.5f, 0);
	svc_fed_tick(s, 1e9);
	p = svc_fake_last("sky/v1/jobs/op1/job/f/fedmodel");
	SKY_EXPECT(p && p->retained);
	const svc_fake_pub *st = svc_fake_last("sky/v1/jobs/op1/job/f/state");
	SKY_EXPECT(st && strstr(st->data, "\"state\":\"done\"") != NULL);
	if (p) {
		/* FedAvg: (30 x 0.5 + 10 x 3) / 40, by sky_fedavg_mean */
		float a[4] = {0.5f, 0.5f, 0.5f, 0.5f}, b[4] = {3, 3, 3, 3}, want[4], got[4];
		const float *x[2] = {a, b};
		uint32_t w[2] = {30, 10};
		uint64_t scratch[8];
		SKY_EXPECT_EQ(sky_fedavg_mean(x, w, 2, 4, 64.0f, want, scratch, NULL), 0);
		sky_fedb_get_words((const unsigned char *)p->data + 28, got, 4);
		SKY_EXPECT(memcmp(want, got, sizeof got) == 0);
		SKY_EXPECT_NEAR(got[0], 1.125, 1e-6);
	}
	/* the job is over: a late chunk changes nothing and is not counted */
	send(s, "f", "b1", 1, 9.0f, 0);
	sky_deploy_free(&s->deploy);
	sky_signer_free(&s->signer);
}

SKY_TEST(dp_rounds_say_epsilon_and_add_noise)
{
	svc *s = setup();
	sky_diag d;
	SKY_EXPECT_EQ(submit_more(s, "fd", "\"b1\",\"b2\"", "train",
				  ",\"dp_clip\":1,\"dp_noise\":1.1", &d), 0);
	send(s, "fd", "b1", 0, 0.25f, 0);
	send(s, "fd", "b2", 0, 0.75f, 0);
	svc_fed_tick(s, 1e9);
	const svc_fake_pub *p = svc_fake_last("sky/v1/jobs/op1/job/fd/metrics");
	SKY_EXPECT(p && strstr(p->data, "\"epsilon\":") && strstr(p->data, "\"delta\":1e-05"));
	double e1 = p ? strtod(strstr(p->data, "\"epsilon\":") + 10, NULL) : 0;
	send(s, "fd", "b1", 1, 0.25f, 0);
	send(s, "fd", "b2", 1, 0.75f, 0);
	svc_fed_tick(s, 1e9);
	p = svc_fake_last("sky/v1/jobs/op1/job/fd/metrics");
	double e2 = p ? strtod(strstr(p->data, "\"epsilon\":") + 10, NULL) : 0;
	SKY_EXPECT_MSG(e1 > 0 && e2 > e1, "epsilon %g then %g", e1, e2); /* rounds add */
	p = svc_fake_last("sky/v1/jobs/op1/job/fd/fedmodel");
	SKY_EXPECT(p != NULL);
	if (p) { /* every owner weighs 1: the mean is 0.5, plus noise of deviation 1.1 / 2 */
		float got[64];
		int off = 0;
		sky_fedb_get_words((const unsigned char *)p->data + 28, got, 64);
		for (int i = 0; i < 64; i++)
			off += got[i] != 0.5f;
		SKY_EXPECT_MSG(off == 64, "%d of 64 elements moved by the noise", off);
	}
	sky_deploy_free(&s->deploy);
	sky_signer_free(&s->signer);
}
