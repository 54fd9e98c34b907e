/* The federated job's messages (runtime/wire/fedmsg.c): the model bundle's
 * layout, the signed round's JSON both ways, update chunks, and what each
 * refuses. */
#include "sky_fedmsg.h"
#include "sky_test.h"

#include <stdlib.h>
#include <string.h>

SKY_TEST(bundle_round_trip_and_refusals)
{
	const char cfg[] = "{\"hidden_size\":8}"; /* 17 bytes: padded to 20 */
	float w[5] = {1.5f, -2.0f, 0.0f, 1e-30f, 3.25f}, back[5];
	uint64_t n = sky_fedb_bytes(strlen(cfg), 5);
	SKY_EXPECT_EQ((long)n, (long)(24 + 20 + 20));
	unsigned char *b = calloc(1, n);
	size_t at = 0, cl = 0, at2 = 0;
	SKY_EXPECT_EQ(sky_fedb_write_head(b, cfg, strlen(cfg), 5, &at), 0);
	sky_fedb_put_words(b + at, w, 5);
	const char *c = NULL;
	uint64_t words = 0;
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_fedb_parse(b, n, &c, &cl, &at2, &words, &d), 0);
	SKY_EXPECT(cl == strlen(cfg) && memcmp(c, cfg, cl) == 0 && at2 == at && words == 5);
	sky_fedb_get_words(b + at2, back, 5);
	SKY_EXPECT(memcmp(back, w, sizeof w) == 0);
	SKY_EXPECT_EQ(sky_fedb_parse(b, n - 1, &c, &cl, &at2, &words, &d), SKY_EFORMAT);
	SKY_EXPECT(strstr(d.msg, "63 bytes, its header says 64") != NULL);
	b[0] = 'X';
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_fedb_parse(b, n, &c, &cl, &at2, &words, &d), SKY_EFORMAT);
	SKY_EXPECT(strstr(d.msg, "no SKYFEDM1 header") != NULL);
	free(b);
}

SKY_TEST(round_message_round_trip)
{
	static sky_fedround_msg m, r;
	char buf[SKY_FEDROUND_MAX_BYTES];
	memset(&m, 0, sizeof m);
	snprintf(m.job, sizeof m.job, "f3");
	m.round = 2, m.rounds = 3;
	memset(m.model_sha256, 'a', 64);
	m.model_bytes = 1000, m.words = 240, m.chunk_bytes = 4096;
	snprintf(m.dataset, sizeof m.dataset, "train");
	m.local_steps = 2, m.batch = 4, m.micro = 2, m.seed = 7, m.warmup = 1;
	snprintf(m.optim, sizeof m.optim, "adamw");
	m.lr = 1e-3, m.clip = 1, m.prox_mu = 0.01;
	m.nown = 2;
	snprintf(m.owner[0], sizeof m.owner[0], "b1");
	snprintf(m.owner[1], sizeof m.owner[1], "b2");
	m.sampled[1] = 1;
	int n = sky_fedround_msg_encode(&m, buf, sizeof buf);
	SKY_EXPECT(n > 0);
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_fedround_msg_decode(buf, (size_t)n, &r, &d), 0);
	SKY_EXPECT(r.round == 2 && r.rounds == 3 && !r.done && r.words == 240 && r.nown == 2);
	SKY_EXPECT(r.lr == m.lr && r.prox_mu == m.prox_mu && r.seed == 7 && r.micro == 2);
	SKY_EXPECT(!r.sampled[0] && r.sampled[1]);
	SKY_EXPECT_EQ(sky_fedround_msg_owner(&r, "b2"), 1);
	SKY_EXPECT_EQ(sky_fedround_msg_owner(&r, "b3"), -1);
	/* an owner that is no board id */
	snprintf(m.owner[1], sizeof m.owner[1], "b/2");
	n = sky_fedround_msg_encode(&m, buf, sizeof buf);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_fedround_msg_decode(buf, (size_t)n, &r, &d), SKY_EFORMAT);
	SKY_EXPECT(strstr(d.msg, "owner 1 is not a board id") != NULL);
}

SKY_TEST(update_chunk_round_trip_and_refusals)
{
	static unsigned char msg[SKY_FEDU_MAX_BYTES];
	float x[3] = {0.5f, -1.0f, 2.0f}, y[3];
	int n = sky_fedupd_encode_plain(4, 1, 65539, x, 3, msg, sizeof msg);
	SKY_EXPECT_EQ(n, 32 + 12);
	sky_fedupd u;
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_fedupd_decode(msg, (size_t)n, &u, &d), 0);
	SKY_EXPECT(u.mode == 1 && u.round == 4 && u.chunk == 1 && u.n == 3 && u.words == 65539);
	sky_fedb_get_words(u.payload, y, 3);
	SKY_EXPECT(memcmp(x, y, sizeof x) == 0);
	SKY_EXPECT_EQ(sky_fedupd_decode(msg, (size_t)n - 1, &u, &d), SKY_EFORMAT);
	SKY_EXPECT(strstr(d.msg, "43 bytes for 3 words") != NULL);
	msg[5] = 9;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_fedupd_decode(msg, (size_t)n, &u, &d), SKY_EFORMAT);
	SKY_EXPECT(strstr(d.msg, "mode 9") != NULL);
	SKY_EXPECT_EQ(sky_fedupd_encode_plain(0, 0, 1, x, 0, msg, sizeof msg), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_fedupd_encode_plain(0, 0, 3, x, 3, msg, 40), SKY_ERANGE);
}
