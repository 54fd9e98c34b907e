/* A federated round at its aggregator (runtime/wire/fedround.c): chunks in any
 * order give FedAvg's mean bit for bit; every refusal is counted with its
 * reason and leaves the sum as it was; a partial owner never reaches the
 * sum; the deadline's policies; a one-owner job's weights as they are; a
 * secure round's unmasked sum has the plain sum's bits. */
#include "sky_fedopt.h"
#include "sky_fedround.h"
#include "sky_fedsum.h"
#include "sky_secagg.h"
#include "sky_test.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define W ((int)SKY_FED_CHUNK_WORDS + 5) /* two chunks, the second of 5 */
#define NOWN 3

static float g_x[NOWN][W], g_ref[W], g_out[W];
static uint64_t g_scr[2 * W];
static const uint32_t k_w[NOWN] = {120, 7, 3000};
static const char *const k_id[NOWN] = {"b1", "b4", "b7"};

static void fill(void)
{
	for (int k = 0; k < NOWN; k++) {
		uint32_t s = 77u + (uint32_t)k;
		for (int i = 0; i < W; i++) {
			s = s * 1664525u + 1013904223u;
			g_x[k][i] = ((float)(s >> 8) / 16777216.0f - 0.5f) * (float)(k + 1);
		}
	}
}

static sky_fedround_cfg cfg(int nown, int secure)
{
	sky_fedround_cfg c;
	memset(&c, 0, sizeof c);
	snprintf(c.job, sizeof c.job, "fedjob");
	c.round = 4;
	c.words = W;
	c.nown = nown;
	for (int k = 0; k < nown; k++) {
		snprintf(c.owner[k], sizeof c.owner[k], "%s", k_id[k]);
		c.weight[k] = k_w[k];
		c.sampled[k] = 1;
	}
	c.secure = secure;
	c.clip = 8.0f;
	c.deadline_s = 60;
	c.policy = SKY_FED_CLOSE;
	c.min_owners = 1;
	return c;
}

static int send_plain(sky_fedround *r, int k, uint64_t chunk, sky_diag *d)
{
	const size_t at = chunk * SKY_FED_CHUNK_WORDS;
	return sky_fedround_on_plain(r, k_id[k], 4, chunk, g_x[k] + at,
				     chunk ? W - SKY_FED_CHUNK_WORDS : SKY_FED_CHUNK_WORDS, d);
}

static sky_fedround g_r;

SKY_TEST(chunks_in_any_order_give_fedavgs_mean)
{
	fill();
	sky_fedround_cfg c = cfg(NOWN, 0);
	SKY_EXPECT_EQ(sky_fedround_open(&g_r, &c, 100.0, NULL), 0);
	/* interleaved, second chunks first */
	SKY_EXPECT_EQ(send_plain(&g_r, 2, 1, NULL), 0);
	SKY_EXPECT_EQ(send_plain(&g_r, 0, 1, NULL), 0);
	SKY_EXPECT_EQ(send_plain(&g_r, 1, 0, NULL), 0);
	SKY_EXPECT_EQ(sky_fedround_tick(&g_r, 101.0, NULL), 0);
	SKY_EXPECT_EQ(send_plain(&g_r, 0, 0, NULL), 0);
	SKY_EXPECT_EQ(send_plain(&g_r, 1, 1, NULL), 0);
	SKY_EXPECT_EQ(send_plain(&g_r, 2, 0, NULL), 0);
	SKY_EXPECT_EQ(sky_fedround_tick(&g_r, 102.0, NULL), 1);
	SKY_EXPECT(g_r.n_in == 3 && g_r.weight_in == 3127);
	SKY_EXPECT_EQ(sky_fedround_mean(&g_r, g_out, NULL), 0);
	const float *p[NOWN] = {g_x[0], g_x[1], g_x[2]};
	SKY_EXPECT_EQ(sky_fedavg_mean(p, k_w, NOWN, W, 8.0f, g_ref, g_scr, NULL), 0);
	SKY_EXPECT(memcmp(g_out, g_ref, sizeof g_out) == 0);
	sky_fedround_free(&g_r);
}

/* sends, checks the refusal's kind and text */
#define REFUSED(call, kind, text)                                                               \
	do {                                                                                    \
		sky_diag d_;                                                                    \
		sky_diag_clear(&d_);                                                            \
		sky_diag *d = &d_;                                                              \
		int rc_ = (call);                                                               \
		SKY_EXPECT_MSG(rc_ == (int)(kind) + 1 && strstr(d_.msg, text) != NULL,          \
			       "%s: rc %d, '%s'", sky_fedround_refuse_name(kind), rc_, d_.msg); \
	} while (0)

SKY_TEST(refusals_are_counted_with_their_reason_and_change_nothing)
{
	fill();
	sky_fedround_cfg c = cfg(NOWN, 0);
	c.sampled[1] = 0; /* b4 sits this round out */
	c.min_owners = 2;
	SKY_EXPECT_EQ(sky_fedround_open(&g_r, &c, 0.0, NULL), 0);
	float bad[SKY_FED_CHUNK_WORDS];
	memcpy(bad, g_x[0], sizeof bad);
	bad[3] = NAN;
	uint64_t words[5] = {1, 2, 3, 4, 5};
	REFUSED(sky_fedround_on_plain(&g_r, "b9", 4, 0, g_x[0], SKY_FED_CHUNK_WORDS, d),
		SKY_FEDR_NOT_OWNER, "b9 is not an owner of job fedjob");
	REFUSED(send_plain(&g_r, 1, 0, d), SKY_FEDR_NOT_SAMPLED, "b4 is not sampled in round 4");
	REFUSED(sky_fedround_on_plain(&g_r, "b1", 3, 0, g_x[0], SKY_FED_CHUNK_WORDS, d),
		SKY_FEDR_ROUND, "b1 sent round 3; this is round 4");
	REFUSED(sky_fedround_on_plain(&g_r, "b1", 4, 1, g_x[0], 6, d), SKY_FEDR_SHAPE,
		"b1 sent chunk 1 of 6 elements; the model has 2 chunks, this one of 5");
	REFUSED(sky_fedround_on_plain(&g_r, "b1", 4, 2, g_x[0], 5, d), SKY_FEDR_SHAPE,
		"b1 sent chunk 2 of 5 elements");
	REFUSED(sky_fedround_on_masked(&g_r, "b1", 4, 1, words, 5, d), SKY_FEDR_MODE,
		"b1 sent masked words to a plain round");
	REFUSED(sky_fedround_on_plain(&g_r, "b1", 4, 0, bad, SKY_FED_CHUNK_WORDS, d), SKY_FEDR_VALUE,
		"element 3");
	SKY_EXPECT_EQ(send_plain(&g_r, 0, 0, NULL), 0);
	REFUSED(send_plain(&g_r, 0, 0, d), SKY_FEDR_REPLAY, "b1 sent chunk 0 of round 4 again");
	SKY_EXPECT_EQ(send_plain(&g_r, 0, 1, NULL), 0);
	REFUSED(send_plain(&g_r, 0, 1, d), SKY_FEDR_REPLAY, "again"); /* after it is in */
	SKY_EXPECT_EQ(send_plain(&g_r, 2, 0, NULL), 0);
	SKY_EXPECT_EQ(send_plain(&g_r, 2, 1, NULL), 0);
	SKY_EXPECT_EQ(sky_fedround_tick(&g_r, 1.0, NULL), 1); /* both sampled owners are in */
	REFUSED(send_plain(&g_r, 2, 1, d), SKY_FEDR_CLOSED, "b7: round 4 is closed");
	const long want[SKY_FEDR_N] = {[SKY_FEDR_NOT_OWNER] = 1, [SKY_FEDR_NOT_SAMPLED] = 1,
				       [SKY_FEDR_ROUND] = 1,	 [SKY_FEDR_SHAPE] = 2,
				       [SKY_FEDR_REPLAY] = 2,	 [SKY_FEDR_CLOSED] = 1,
				       [SKY_FEDR_MODE] = 1,	 [SKY_FEDR_VALUE] = 1};
	SKY_EXPECT(memcmp(g_r.refused, want, sizeof want) == 0);
	/* the mean is b1's and b7's, as if nothing else had come */
	SKY_EXPECT_EQ(sky_fedround_mean(&g_r, g_out, NULL), 0);
	const float *p[2] = {g_x[0], g_x[2]};
	const uint32_t w2[2] = {k_w[0], k_w[2]};
	SKY_EXPECT_EQ(sky_fedavg_mean(p, w2, 2, W, 8.0f, g_ref, g_scr, NULL), 0);
	SKY_EXPECT(memcmp(g_out, g_ref, sizeof g_out) == 0);
	sky_fedround_free(&g_r);
}

SKY_TEST(the_deadline_closes_or_fails_by_the_policy)
{
	fill();
	/* close: b4 sent half its update and b7 nothing; closed with b1 */
	sky_fedround_cfg c = cfg(NOWN, 0);
	SKY_EXPECT_EQ(sky_fedround_open(&g_r, &c, 10.0, NULL), 0);
	SKY_EXPECT_EQ(send_plain(&g_r, 0, 0, NULL), 0);
	SKY_EXPECT_EQ(send_plain(&g_r, 0, 1, NULL), 0);
	SKY_EXPECT_EQ(send_plain(&g_r, 1, 0, NULL), 0);
	SKY_EXPECT_EQ(sky_fedround_tick(&g_r, 69.0, NULL), 0);
	SKY_EXPECT_EQ(sky_fedround_tick(&g_r, 70.0, NULL), 1);
	SKY_EXPECT(g_r.state[0] == SKY_FEDO_IN && g_r.state[1] == SKY_FEDO_LATE &&
		   g_r.state[2] == SKY_FEDO_LATE && g_r.weight_in == k_w[0]);
	SKY_EXPECT_EQ(sky_fedround_mean(&g_r, g_out, NULL), 0);
	/* b1 alone through fixed point: within 2^-bits of its weights */
	for (int i = 0; i < W; i++)
		SKY_EXPECT(fabsf(g_out[i] - g_x[0][i]) <= 1e-6f);
	sky_fedround_free(&g_r);
	/* wait: still open long after the deadline */
	c.policy = SKY_FED_WAIT;
	SKY_EXPECT_EQ(sky_fedround_open(&g_r, &c, 10.0, NULL), 0);
	SKY_EXPECT_EQ(send_plain(&g_r, 0, 0, NULL), 0);
	SKY_EXPECT_EQ(sky_fedround_tick(&g_r, 1e6, NULL), 0);
	sky_fedround_free(&g_r);
	/* close, but below min_owners: the round fails, saying why */
	c.policy = SKY_FED_CLOSE;
	c.min_owners = 2;
	SKY_EXPECT_EQ(sky_fedround_open(&g_r, &c, 10.0, NULL), 0);
	SKY_EXPECT_EQ(send_plain(&g_r, 0, 0, NULL), 0);
	SKY_EXPECT_EQ(send_plain(&g_r, 0, 1, NULL), 0);
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_fedround_tick(&g_r, 70.0, &d), SKY_ETIMEOUT);
	SKY_EXPECT_MSG(strstr(d.msg, "round 4: 1 of 3 sampled owners in at the deadline (60 s), 2 needed"),
		       "%s", d.msg);
	SKY_EXPECT(sky_fedround_mean(&g_r, g_out, NULL) == SKY_EINVAL);
	sky_fedround_free(&g_r);
}

SKY_TEST(a_one_owner_job_keeps_the_weights_as_they_are)
{
	fill();
	g_x[0][9] = 1e-30f; /* below the fixed point's resolution */
	sky_fedround_cfg c = cfg(1, 0);
	SKY_EXPECT_EQ(sky_fedround_open(&g_r, &c, 0.0, NULL), 0);
	SKY_EXPECT_EQ(send_plain(&g_r, 0, 1, NULL), 0);
	SKY_EXPECT_EQ(send_plain(&g_r, 0, 0, NULL), 0);
	SKY_EXPECT_EQ(sky_fedround_tick(&g_r, 1.0, NULL), 1);
	SKY_EXPECT_EQ(sky_fedround_mean(&g_r, g_out, NULL), 0);
	SKY_EXPECT(memcmp(g_out, g_x[0], sizeof g_out) == 0 && g_out[9] == 1e-30f);
	sky_fedround_free(&g_r);
}

/* Masked words from three owners (self masks and pair masks from fixed
 * seeds; the key agreement itself is test_secagg's): the unmasked sum
 * decodes to the plain round's mean, bit for bit. */
SKY_TEST(a_secure_rounds_unmasked_sum_has_the_plain_bits)
{
	fill();
	sky_fedround_cfg c = cfg(NOWN, 1);
	SKY_EXPECT_EQ(sky_fedround_open(&g_r, &c, 0.0, NULL), 0);
	static uint64_t enc[W];
	unsigned char self[NOWN][SKY_SECAGG_SEED_BYTES], pair[NOWN][NOWN][SKY_SECAGG_SEED_BYTES];
	for (int k = 0; k < NOWN; k++) {
		memset(self[k], 0x10 + k, sizeof self[k]);
		for (int j = 0; j < NOWN; j++)
			memset(pair[k][j], 0x40 + (k < j ? k * 8 + j : j * 8 + k), SKY_SECAGG_SEED_BYTES);
	}
	for (int k = 0; k < NOWN; k++) {
		SKY_EXPECT_EQ(sky_fx_encode(g_x[k], W, k_w[k], 8.0f, g_r.bits, enc, NULL, NULL), 0);
		sky_secagg_peer peers[NOWN - 1];
		int np = 0;
		for (int j = 0; j < NOWN; j++)
			if (j != k)
				peers[np++] = (sky_secagg_peer){k_id[j], pair[k][j]};
		SKY_EXPECT_EQ(sky_secagg_mask(enc, W, 0, self[k], k_id[k], peers, (size_t)np, NULL), 0);
		for (uint64_t ch = 0; ch < 2; ch++)
			SKY_EXPECT_EQ(sky_fedround_on_masked(&g_r, k_id[k], 4, ch,
							     enc + ch * SKY_FED_CHUNK_WORDS,
							     ch ? 5 : SKY_FED_CHUNK_WORDS, NULL),
				      0);
	}
	SKY_EXPECT_EQ(sky_fedround_tick(&g_r, 1.0, NULL), 1);
	SKY_EXPECT(sky_fedround_mean(&g_r, g_out, NULL) == SKY_EINVAL); /* masked still */
	SKY_EXPECT_EQ(sky_secagg_unmask(g_r.sum, W, 0, (const unsigned char(*)[SKY_SECAGG_SEED_BYTES])self,
					NOWN, NULL, 0, NULL),
		      0);
	SKY_EXPECT_EQ(sky_fx_decode(g_r.sum, W, g_r.weight_in, g_r.bits, g_out, NULL), 0);
	const float *p[NOWN] = {g_x[0], g_x[1], g_x[2]};
	SKY_EXPECT_EQ(sky_fedavg_mean(p, k_w, NOWN, W, 8.0f, g_ref, g_scr, NULL), 0);
	SKY_EXPECT(memcmp(g_out, g_ref, sizeof g_out) == 0);
	/* a plain chunk to a secure round is refused */
	sky_diag d;
	sky_diag_clear(&d);
	sky_fedround_free(&g_r);
	SKY_EXPECT_EQ(sky_fedround_open(&g_r, &c, 0.0, NULL), 0);
	SKY_EXPECT_EQ(send_plain(&g_r, 0, 1, &d), (int)SKY_FEDR_MODE + 1);
	SKY_EXPECT(strstr(d.msg, "b1 sent plain words to a secure round") != NULL);
	sky_fedround_free(&g_r);
}

SKY_TEST(a_bad_configuration_is_refused_with_the_reason)
{
	sky_fedround_cfg c = cfg(NOWN, 0);
	sky_diag d;
	snprintf(c.owner[2], sizeof c.owner[2], "b1");
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_fedround_open(&g_r, &c, 0, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "owner b1 is named twice") != NULL);
	c = cfg(NOWN, 0);
	c.weight[1] = 0;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_fedround_open(&g_r, &c, 0, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "owner b4 weighs 0 samples") != NULL);
	c = cfg(NOWN, 0);
	c.min_owners = 4;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_fedround_open(&g_r, &c, 0, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "min_owners 4 is not in [1, 3]") != NULL);
	c = cfg(NOWN, 0);
	memset(c.sampled, 0, sizeof c.sampled);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_fedround_open(&g_r, &c, 0, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "round 4 samples no owner") != NULL);
	c = cfg(NOWN, 0);
	snprintf(c.owner[0], sizeof c.owner[0], "b/1");
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_fedround_open(&g_r, &c, 0, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "owner 0's id 'b/1' is not a board id") != NULL);
	sky_fedround_free(&g_r);
}
