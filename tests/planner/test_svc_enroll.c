/* The planner's enrollment intake (planner/svc_enroll.c): its rate limits
 * per claim connection and in total, against what a holder of the claim
 * bundle without a token can send. */
#include "sky_test.h"

#include "sky_ca.h"
#include "sky_file.h"
#include "sky_identity.h"
#include "sky_pki.h"
#include "sky_sign.h"
#include "svc_fake.h"

#include <stdio.h>
#include <string.h>

static const char k_junk[] = "{\"v\":1,\"id\":\"bflood\",\"token\":"
			     "\"00000000000000000000000000000000\",\"csr\":\"x\"}";

/* A service with an open CA, and a valid request for board id into req
 * (its length returned). */
static int setup(svc **out, const char *name, const char *id, char *req, size_t cap)
{
	static sky_sign_rng rng;
	char dir[700], state[700], tok[SKY_ENROLL_TOKEN_LEN + 1];
	svc *s = svc_fake_fresh(name);
	snprintf(dir, sizeof dir, "%s/%s-pki", sky_test_tmp_dir(), name);
	snprintf(state, sizeof state, "%s/%s-%s", sky_test_tmp_dir(), name, id);
	sky_ca_opts o = {.port = 18999, .max_packet = 65536};
	if (!rng.ready && sky_sign_rng_init(&rng, "test-svc-enroll", NULL) != 0)
		return -1;
	if (sky_ca_init_dir(dir, &o, NULL) != 0 || sky_file_mkdirs(state, 0700) != 0)
		return -1;
	sky_ca_init(&s->ca);
	if (sky_ca_open(&s->ca, dir, NULL) != 0 ||
	    sky_ca_token_new(dir, 100, NULL, &rng, tok, NULL) != 0)
		return -1;
	*out = s;
	return sky_identity_enroll_request(state, id, tok, &rng, req, cap, NULL);
}

/* 200 claim connections (their own nonces, as the ACL pins them) each send
 * junk at once, then a board with a valid token asks: the junk had its
 * reads, but took nothing from the signing budget. With one budget for
 * every request (32 at once) the board was dropped unread. */
SKY_TEST(junk_from_many_connections_leaves_the_signing_budget_to_a_valid_token)
{
	static char req[SKY_ENROLL_REQ_MAX];
	svc *s = NULL;
	int n = setup(&s, "many", "bn1", req, sizeof req);
	SKY_EXPECT(n > 0);
	if (n <= 0)
		return;
	char nonce[32];
	for (int i = 0; i < 200; i++) {
		snprintf(nonce, sizeof nonce, "sky:own-%d", i);
		svc_enroll_on_csr(s, nonce, k_junk, sizeof k_junk - 1);
	}
	SKY_EXPECT_EQ(s->reg.c.enroll_refused, 200);
	SKY_EXPECT_EQ(s->reg.c.enrolled, 0);
	svc_enroll_on_csr(s, "sky:claim-good", req, (size_t)n);
	SKY_EXPECT_EQ(s->reg.c.enrolled, 1);
	sky_ca_free(&s->ca);
}

/* One connection sending thousands on its own nonce is held to its own
 * bucket: it costs everyone else two reads. */
SKY_TEST(one_connections_flood_takes_from_nobody_else)
{
	static char req[SKY_ENROLL_REQ_MAX];
	svc *s = NULL;
	int n = setup(&s, "one", "bn2", req, sizeof req);
	SKY_EXPECT(n > 0);
	if (n <= 0)
		return;
	for (int i = 0; i < 5000; i++)
		svc_enroll_on_csr(s, "sky:flood", k_junk, sizeof k_junk - 1);
	SKY_EXPECT_EQ(svc_enroll_limited(s), 5000 - 2);
	svc_enroll_on_csr(s, "sky:claim-good", req, (size_t)n);
	SKY_EXPECT_EQ(s->reg.c.enrolled, 1);
	sky_ca_free(&s->ca);
}
