#include "sky_test.h"

#include "sky_fedsec_agg.h"
#include "sky_fedsec_owner.h"
#include "sky_fedsum.h"

#include <mbedtls/pk.h>
#include <string.h>

/* Three owners of a secure round through the wire codecs; b3 sends its
 * shares and then drops before its masked update. */
#define N 3
#define NW 777

static sky_sign_rng g_rng;
static mbedtls_pk_context g_priv[N], g_pub[N];
static const char g_id[N][SKY_FED_ID_CAP] = {"b1", "b2", "b3"};
static sky_fedsec_owner g_o[N];
static sky_fedsec_agg g_a;
static sky_fedsec_msg g_m, g_m2;
static char g_buf[SKY_FEDSEC_MAX_BYTES];

static void keys(void)
{
	SKY_EXPECT_EQ(sky_sign_rng_init(&g_rng, "test-fedsec", NULL), 0);
	for (int i = 0; i < N; i++) {
		unsigned char der[256];
		mbedtls_pk_init(&g_priv[i]);
		mbedtls_pk_init(&g_pub[i]);
		SKY_EXPECT_EQ(sky_sign_gen_key(&g_priv[i], &g_rng, NULL), 0);
		int n = mbedtls_pk_write_pubkey_der(&g_priv[i], der, sizeof der);
		SKY_EXPECT_EQ(mbedtls_pk_parse_public_key(&g_pub[i], der + sizeof der - n, (size_t)n), 0);
	}
}

/* m through the codec into g_m2. */
static sky_fedsec_msg *wire(const sky_fedsec_msg *m)
{
	int n = sky_fedsec_msg_encode(m, g_buf, sizeof g_buf);
	SKY_EXPECT(n > 0);
	SKY_EXPECT_EQ(sky_fedsec_msg_decode(g_buf, (size_t)n, &g_m2, NULL), 0);
	return &g_m2;
}

SKY_TEST(round_with_a_drop_unmasks_to_the_plain_sum)
{
	keys();
	sky_diag d;
	unsigned char sampled[N] = {1, 1, 1};
	SKY_EXPECT_EQ(sky_fedsec_agg_open(&g_a, "j1", 4, N, g_id, sampled, NULL), 0);
	SKY_EXPECT_EQ(g_a.t, 2);
	for (int i = 0; i < N; i++) {
		SKY_EXPECT_EQ(sky_fedsec_owner_begin(&g_o[i], "j1", 4, g_id, N, i, &g_priv[i], g_pub,
						     &g_rng, &g_m, NULL), 0);
		SKY_EXPECT_EQ(sky_fedsec_agg_on_shares(&g_a, g_id[i], wire(&g_m), NULL), 0);
	}
	/* a board that is no owner: refused with its reason */
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_fedsec_agg_on_shares(&g_a, "b9", &g_m2, &d), SKY_FEDS_NOT_OWNER + 1);
	SKY_EXPECT(strstr(d.msg, "not an owner") != NULL);
	SKY_EXPECT_EQ(g_a.refused[SKY_FEDS_NOT_OWNER], 1);
	SKY_EXPECT_EQ(sky_fedsec_agg_on_shares(&g_a, "b3", &g_m2, NULL), SKY_FEDS_REPLAY + 1);
	SKY_EXPECT(sky_fedsec_agg_shares_complete(&g_a));
	SKY_EXPECT_EQ(sky_fedsec_agg_close_shares(&g_a, NULL), 0);
	uint64_t sum[NW] = {0}, plain[NW] = {0}, y[NW];
	for (int i = 0; i < N; i++) {
		SKY_EXPECT_EQ(sky_fedsec_agg_relay(&g_a, i, &g_m), 0);
		SKY_EXPECT_EQ(sky_fedsec_owner_on_relay(&g_o[i], wire(&g_m), NULL), 0);
		if (i == 2)
			continue; /* b3 drops here */
		for (int w = 0; w < NW; w++)
			y[w] = (uint64_t)(w * 7 + i * 1000003);
		sky_fx_add(plain, y, NW);
		SKY_EXPECT_EQ(sky_fedsec_owner_mask(&g_o[i], y, NW, 0, NULL), 0);
		SKY_EXPECT(y[5] != (uint64_t)(5 * 7 + i * 1000003));
		sky_fx_add(sum, y, NW);
	}
	unsigned char in[N] = {1, 1, 0};
	SKY_EXPECT_EQ(sky_fedsec_agg_begin_reveal(&g_a, in, NULL), 0);
	/* a request asking both a share and the pair seed of b3 is refused */
	SKY_EXPECT_EQ(sky_fedsec_agg_reveal(&g_a, 0, &g_m), 0);
	sky_fedsec_msg bad = g_m;
	snprintf(bad.u2[bad.nu2++], SKY_FED_ID_CAP, "b3");
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_fedsec_owner_on_reveal(&g_o[0], &bad, &g_m2, &d), SKY_EAUTH);
	SKY_EXPECT(strstr(d.msg, "both") != NULL);
	for (int i = 0; i < 2; i++) {
		SKY_EXPECT_EQ(sky_fedsec_agg_reveal(&g_a, i, &g_m), 0);
		sky_fedsec_msg req = *wire(&g_m), out;
		SKY_EXPECT_EQ(sky_fedsec_owner_on_reveal(&g_o[i], &req, &out, NULL), 0);
		SKY_EXPECT_EQ(out.nitems, 2);
		SKY_EXPECT_EQ(out.nseeds, 1);
		SKY_EXPECT_EQ(sky_fedsec_agg_on_open(&g_a, g_id[i], wire(&out), NULL), 0);
	}
	SKY_EXPECT(sky_fedsec_agg_ready(&g_a, 0));
	SKY_EXPECT_EQ(sky_fedsec_agg_unmask(&g_a, sum, NW, NULL), 0);
	SKY_EXPECT(memcmp(sum, plain, sizeof sum) == 0);
}

SKY_TEST(a_bad_secure_round_message_is_refused_with_what_is_wrong)
{
	static char seed64[65], blob[2 * SKY_SECAGG_SHARE_BLOB_BYTES + 1], msg[1024];
	memset(seed64, 'a', 64);
	memset(blob, '0', sizeof blob - 1);
	struct {
		const char *fmt, *why;
	} bad[] = {
		{"{\"v\":2,\"job\":\"j\",\"round\":1,\"phase\":\"reveal\",\"to\":\"b1\",\"u2\":[],"
		 "\"dropped\":[]}",
		 "'v'"},
		{"{\"v\":1,\"job\":\"j/x\",\"round\":1,\"phase\":\"reveal\",\"to\":\"b1\",\"u2\":[],"
		 "\"dropped\":[]}",
		 "job is not a topic segment"},
		{"{\"v\":1,\"job\":\"j\",\"round\":1,\"phase\":\"unmask\"}", "phase 'unmask'"},
		{"{\"v\":1,\"job\":\"j\",\"round\":1,\"phase\":\"reveal\",\"to\":\"#\",\"u2\":[],"
		 "\"dropped\":[]}",
		 "'to' is not a board id"},
		{"{\"v\":1,\"job\":\"j\",\"round\":1,\"phase\":\"reveal\",\"to\":\"b1\",\"u2\":[\"b2\","
		 "\"b2\"],\"dropped\":[]}",
		 "u2 names b2 twice"},
		{"{\"v\":1,\"job\":\"j\",\"round\":1,\"phase\":\"reveal\",\"to\":\"b1\",\"u2\":[7],"
		 "\"dropped\":[]}",
		 "u2[0] is not a board id"},
		{"{\"v\":1,\"job\":\"j\",\"round\":1,\"phase\":\"reveal\",\"to\":\"b1\",\"u2\":{}}",
		 "'u2' must be a list"},
		{"{\"v\":1,\"job\":\"j\",\"round\":1,\"phase\":\"shares\",\"commit\":\"%.63s\","
		 "\"items\":[]}",
		 "commit is not 32 bytes of hex"},
		{"{\"v\":1,\"job\":\"j\",\"round\":1,\"phase\":\"shares\",\"commit\":\"%s\","
		 "\"items\":[{\"id\":\"b2\",\"b\":\"abc\"}]}",
		 "items[0].b is not"},
		{"{\"v\":1,\"job\":\"j\",\"round\":1,\"phase\":\"shares\",\"commit\":\"%s\","
		 "\"items\":[{\"id\":\"b2\",\"b\":\"%s\"},{\"id\":\"b2\",\"b\":\"%s\"}]}",
		 "items names b2 twice"},
		{"{\"v\":1,\"job\":\"j\",\"round\":1,\"phase\":\"shares\",\"commit\":\"%s\","
		 "\"items\":[{\"b\":\"%s\"}]}",
		 "items[0].id is not a board id"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		sky_diag d;
		sky_diag_clear(&d);
		int n = snprintf(msg, sizeof msg, bad[i].fmt, seed64, blob, blob);
		SKY_EXPECT(n > 0 && (size_t)n < sizeof msg);
		int rc = sky_fedsec_msg_decode(msg, (size_t)n, &g_m, &d); /* v=2: out of range */
		SKY_EXPECT_MSG(rc == (i == 0 ? SKY_ERANGE : SKY_EFORMAT), "%zu: %d", i, rc);
		SKY_EXPECT_MSG(strstr(d.msg, bad[i].why) != NULL, "%zu: %s", i, d.msg);
	}
	/* the good shape of the last three decodes */
	int n = snprintf(msg, sizeof msg,
			 "{\"v\":1,\"job\":\"j\",\"round\":1,\"phase\":\"shares\",\"commit\":\"%s\","
			 "\"items\":[{\"id\":\"b2\",\"b\":\"%s\"},{\"id\":\"b3\",\"b\":\"%s\"}]}",
			 seed64, blob, blob);
	SKY_EXPECT_EQ(sky_fedsec_msg_decode(msg, (size_t)n, &g_m, NULL), 0);
	SKY_EXPECT(g_m.nitems == 2 && strcmp(g_m.items[1].id, "b3") == 0 &&
		   g_m.items[1].len == SKY_SECAGG_SHARE_BLOB_BYTES);
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_fedsec_msg_decode(msg, SKY_FEDSEC_MAX_BYTES + 1, &g_m, &d), SKY_ERANGE);
	SKY_EXPECT_MSG(strstr(d.msg, "limit") != NULL, "%s", d.msg);
}
