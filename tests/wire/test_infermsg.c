#include "sky_test.h"

#include "sky_infermsg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEQ 8
#define VOCAB 100

static int32_t g_tok[SEQ], g_mask[SEQ];

static int decode(const char *json, sky_infer_req *r, int *code, sky_diag *d)
{
	memset(r, 0, sizeof *r);
	r->tokens = g_tok;
	r->mask = g_mask;
	r->cap = SEQ;
	sky_diag_clear(d);
	return sky_infer_req_decode(json, strlen(json), SEQ, VOCAB, r, code, d);
}

SKY_TEST(request_round_trip_and_default_mask)
{
	sky_infer_req r, back;
	sky_diag d;
	int code = -1;
	char buf[1024];
	SKY_EXPECT_EQ(decode("{\"v\":1,\"id\":\"r17\",\"tokens\":[1,20,99]}", &r, &code, &d), 0);
	SKY_EXPECT_EQ(code, SKY_INFER_OK);
	SKY_EXPECT(strcmp(r.id, "r17") == 0 && r.n == 3 && !r.has_mask);
	SKY_EXPECT(g_tok[0] == 1 && g_tok[1] == 20 && g_tok[2] == 99);
	SKY_EXPECT(g_mask[0] == 1 && g_mask[1] == 1 && g_mask[2] == 1);
	/* encode with a mask, decode it again */
	int32_t t[3] = {5, 6, 7}, m[3] = {1, 1, 0};
	sky_infer_req out = {.n = 3, .tokens = t, .mask = m, .cap = 3, .has_mask = 1};
	strcpy(out.id, "a.B-9_z");
	int n = sky_infer_req_encode(&out, buf, sizeof buf, &d);
	SKY_EXPECT(n > 0);
	SKY_EXPECT_EQ(decode(buf, &back, &code, &d), 0);
	SKY_EXPECT(strcmp(back.id, "a.B-9_z") == 0 && back.n == 3 && back.has_mask);
	SKY_EXPECT(g_tok[2] == 7 && g_mask[1] == 1 && g_mask[2] == 0);
	/* a buffer too small */
	SKY_EXPECT_EQ(sky_infer_req_encode(&out, buf, 20, &d), SKY_ERANGE);
	/* exactly seq tokens is fine */
	SKY_EXPECT_EQ(decode("{\"v\":1,\"id\":\"x\",\"tokens\":[0,1,2,3,4,5,6,7]}", &r, &code, &d), 0);
	SKY_EXPECT_EQ(r.n, SEQ);
}

/* Each refusal: its code, the id when readable, and the sentence. */
SKY_TEST(request_refusals_name_their_code)
{
	static const struct {
		const char *json;
		int code;
		const char *id, *words;
	} c[] = {
		{"not json", SKY_INFER_MALFORMED, "", "not JSON"},
		{"[1,2]", SKY_INFER_MALFORMED, "", "not a JSON object"},
		{"{\"v\":1,\"tokens\":[1]}", SKY_INFER_MALFORMED, "", "request id"},
		{"{\"v\":1,\"id\":\"a/b\",\"tokens\":[1]}", SKY_INFER_MALFORMED, "", "request id"},
		{"{\"v\":1,\"id\":7,\"tokens\":[1]}", SKY_INFER_MALFORMED, "", "request id"},
		{"{\"v\":2,\"id\":\"r1\",\"tokens\":[1]}", SKY_INFER_MALFORMED, "r1", "version"},
		{"{\"v\":1,\"id\":\"r1\"}", SKY_INFER_MALFORMED, "r1", "'tokens'"},
		{"{\"v\":1,\"id\":\"r1\",\"tokens\":\"1,2\"}", SKY_INFER_MALFORMED, "r1", "'tokens'"},
		{"{\"v\":1,\"id\":\"r1\",\"tokens\":[1,\"2\"]}", SKY_INFER_MALFORMED, "r1",
		 "token 1 is not an integer"},
		{"{\"v\":1,\"id\":\"r1\",\"tokens\":[1.5]}", SKY_INFER_MALFORMED, "r1", "not an integer"},
		{"{\"v\":1,\"id\":\"r1\",\"tokens\":[1],\"mask\":1}", SKY_INFER_MALFORMED, "r1", "'mask'"},
		{"{\"v\":1,\"id\":\"r1\",\"tokens\":[]}", SKY_INFER_WRONG_LENGTH, "r1",
		 "has 0 tokens, the model takes 1 to 8"},
		{"{\"v\":1,\"id\":\"r2\",\"tokens\":[0,1,2,3,4,5,6,7,8]}", SKY_INFER_WRONG_LENGTH, "r2",
		 "has 9 tokens"},
		{"{\"v\":1,\"id\":\"r3\",\"tokens\":[1,2],\"mask\":[1]}", SKY_INFER_WRONG_LENGTH, "r3",
		 "mask has 1 entries for 2 tokens"},
		{"{\"v\":1,\"id\":\"r4\",\"tokens\":[1,100]}", SKY_INFER_BAD_TOKEN, "r4",
		 "token 1 is 100, the vocabulary has 100"},
		{"{\"v\":1,\"id\":\"r5\",\"tokens\":[-1]}", SKY_INFER_BAD_TOKEN, "r5", "token 0 is -1"},
		{"{\"v\":1,\"id\":\"r6\",\"tokens\":[1,2],\"mask\":[1,2]}", SKY_INFER_BAD_MASK, "r6",
		 "mask 1 is 2, it must be 0 or 1"},
	};
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		sky_infer_req r;
		sky_diag d;
		int code = -1;
		int rc = decode(c[i].json, &r, &code, &d);
		SKY_EXPECT_MSG(rc < 0 && code == c[i].code, "%s: rc %d code %s", c[i].json, rc,
			       sky_infer_code_name(code));
		SKY_EXPECT_MSG(strcmp(r.id, c[i].id) == 0, "%s: id '%s'", c[i].json, r.id);
		SKY_EXPECT_MSG(strstr(d.msg, c[i].words) != NULL, "%s: '%s'", c[i].json, d.msg);
	}
}

SKY_TEST(oversize_request_refused_unparsed)
{
	size_t n = SKY_INFER_REQ_MAX_BYTES + 1;
	char *big = malloc(n);
	SKY_EXPECT(big != NULL);
	if (!big)
		return;
	memset(big, ' ', n);
	memcpy(big, "{\"v\":1,\"id\":\"r1\",\"tokens\":[1]}", 30);
	sky_infer_req r = {.tokens = g_tok, .mask = g_mask, .cap = SEQ};
	sky_diag d;
	sky_diag_clear(&d);
	int code = -1;
	SKY_EXPECT_EQ(sky_infer_req_decode(big, n, SEQ, VOCAB, &r, &code, &d), SKY_ERANGE);
	SKY_EXPECT_EQ(code, SKY_INFER_OVERSIZE);
	SKY_EXPECT(r.id[0] == 0);
	SKY_EXPECT(strstr(d.msg, "the limit is 65536") != NULL);
	/* exactly at the limit is parsed */
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_infer_req_decode(big, n - 1, SEQ, VOCAB, &r, &code, &d), 0);
	free(big);
}

SKY_TEST(code_names_round_trip)
{
	for (int c = 0; c < SKY_INFER_NCODES; c++)
		SKY_EXPECT_EQ(sky_infer_code_parse(sky_infer_code_name(c)), c);
	SKY_EXPECT(strcmp(sky_infer_code_name(SKY_INFER_NOT_ALLOWED), "not_allowed") == 0);
	SKY_EXPECT(strcmp(sky_infer_code_name(SKY_INFER_BUSY), "busy") == 0);
	SKY_EXPECT(strcmp(sky_infer_code_name(SKY_INFER_UNKNOWN_JOB), "unknown_job") == 0);
	SKY_EXPECT_EQ(sky_infer_code_parse("nope"), -1);
}

SKY_TEST(response_logits_round_trip_bit_exact)
{
	static sky_infer_resp r, back;
	char buf[SKY_INFER_RESP_MAX_BYTES];
	sky_diag d;
	sky_diag_clear(&d);
	memset(&r, 0, sizeof r);
	strcpy(r.id, "r17");
	strcpy(r.job, "j1");
	r.ok = 1;
	r.epoch = 7;
	r.n_logits = 6;
	float v[6] = {0.125f, -1.5f, 0.1f, 1.17549435e-38f, -3.40282347e38f, 1.0f / 3.0f};
	memcpy(r.logits, v, sizeof v);
	int n = sky_infer_resp_encode(&r, buf, sizeof buf, &d);
	SKY_EXPECT_MSG(n > 0, "%s", d.msg);
	SKY_EXPECT(strstr(buf, "\"logits\":[0.125,-1.5,0.100000001,") != NULL);
	SKY_EXPECT_EQ(sky_infer_resp_decode(buf, (size_t)n, &back, &d), 0);
	SKY_EXPECT(back.ok && back.epoch == 7 && back.n_logits == 6 && !strcmp(back.job, "j1"));
	SKY_EXPECT(memcmp(back.logits, v, sizeof v) == 0);
	/* a non-finite logit is not sent */
	r.logits[2] = 1.0f / 0.0f;
	SKY_EXPECT_EQ(sky_infer_resp_encode(&r, buf, sizeof buf, &d), SKY_EINVAL);
}

SKY_TEST(response_error_round_trip)
{
	static sky_infer_resp r, back;
	char buf[1024];
	sky_diag d;
	sky_diag_clear(&d);
	sky_infer_resp_error(&r, "r9", "j1", SKY_INFER_BAD_TOKEN,
			     "token 7 is 40000, the vocabulary has 30522");
	int n = sky_infer_resp_encode(&r, buf, sizeof buf, &d);
	SKY_EXPECT(n > 0);
	SKY_EXPECT(strstr(buf, "\"code\":\"bad_token\"") != NULL);
	SKY_EXPECT_EQ(sky_infer_resp_decode(buf, (size_t)n, &back, &d), 0);
	SKY_EXPECT(!back.ok && back.code == SKY_INFER_BAD_TOKEN && !strcmp(back.id, "r9"));
	SKY_EXPECT(strcmp(back.error, "token 7 is 40000, the vocabulary has 30522") == 0);
	/* an unreadable request is answered with id "" */
	sky_infer_resp_error(&r, "a/b", "j1", SKY_INFER_OVERSIZE, "too big");
	n = sky_infer_resp_encode(&r, buf, sizeof buf, &d);
	SKY_EXPECT(n > 0 && strstr(buf, "\"id\":\"\"") != NULL);
	const char *bad[] = {"{\"v\":1,\"id\":\"r\",\"ok\":false,\"job\":\"j\",\"code\":\"zzz\",\"error\":\"\"}",
			     "{\"v\":1,\"id\":\"r\",\"ok\":true,\"job\":\"j\",\"epoch\":1,\"logits\":[]}",
			     "{\"v\":1,\"id\":\"r\",\"ok\":true,\"job\":\"j\",\"epoch\":1,\"logits\":[1e39]}",
			     "{\"v\":1,\"id\":\"r\",\"ok\":1,\"job\":\"j\"}", NULL};
	for (int i = 0; bad[i]; i++)
		SKY_EXPECT_MSG(sky_infer_resp_decode(bad[i], strlen(bad[i]), &back, &d) != 0,
			       "accepted %s", bad[i]);
}

SKY_TEST(a_ready_is_parsed_whole_or_refused_with_the_reason)
{
	int64_t ep = -1;
	sky_diag d;
	const char *ok = "{\"epoch\":9007199254740991,\"board\":\"b1\"}";
	SKY_EXPECT_EQ(sky_infer_ready_parse(ok, strlen(ok), &ep, NULL), 0);
	SKY_EXPECT(ep == 9007199254740991ll);
	struct {
		const char *msg, *why;
	} bad[] = {
		{"{\"board\":\"b1\"}", "epoch"},
		{"{\"epoch\":-1}", "epoch"},
		{"{\"epoch\":9007199254740992}", "beyond 2^53 - 1"},
		{"{\"epoch\":\"3\"}", "epoch"},
		{"[3]", "not an object"},
		{"{\"epoch\":3", ""},
		{"", "ready of 0 bytes"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		sky_diag_clear(&d);
		ep = 5;
		SKY_EXPECT_EQ(sky_infer_ready_parse(bad[i].msg, strlen(bad[i].msg), &ep, &d),
			      SKY_EFORMAT);
		SKY_EXPECT_MSG(d.msg[0] && strstr(d.msg, bad[i].why) != NULL, "%zu: %s", i, d.msg);
		SKY_EXPECT_EQ(ep, 0);
	}
	/* one bound for both readers: the first stage and skyplan once
	 * disagreed at exactly 256 bytes */
	static char big[SKY_SERVE_READY_MAX_BYTES + 1];
	memset(big, ' ', sizeof big);
	memcpy(big, ok, strlen(ok));
	SKY_EXPECT_EQ(sky_infer_ready_parse(big, SKY_SERVE_READY_MAX_BYTES, &ep, NULL), 0);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_infer_ready_parse(big, sizeof big, &ep, &d), SKY_EFORMAT);
	SKY_EXPECT_MSG(strstr(d.msg, "ready of 257 bytes, 1 to 256 allowed") != NULL, "%s", d.msg);
}
