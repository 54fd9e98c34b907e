#include "sky_test.h"

#include "sky_caps.h"
#include "sky_json.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static void sample(sky_caps *c)
{
	memset(c, 0, sizeof *c);
	strcpy(c->id, "b01");
	c->session = 7;
	strcpy(c->boot, "9f3c0a5e7d214b68");
	strcpy(c->version, "1a2b3c-dirty");
	strcpy(c->board, "host");
	c->threads = 2;
	c->keepalive_s = 2;
	strcpy(c->shape.name, "mini");
	c->shape.hidden = 256;
	c->shape.heads = 4;
	c->shape.ffn = 1024;
	c->shape.seq = 128;
	c->shape.batch = 8;
	c->fp32 = (sky_caps_times){0.0021, 0.0030, 0.0045, 0.0061};
	c->mem_bytes = 2147483648ll;
	c->link_bw = 1.2e8;
	c->link_lat_s = 0.0004;
	c->probe_s = 2.1;
	c->probed_at = 1764511200;
}

SKY_TEST(encode_decode_round_trip)
{
	sky_caps c, back;
	char buf[SKY_CAPS_MAX_BYTES];
	sky_diag d;
	sky_diag_clear(&d);
	sample(&c);
	c.has_int8 = 1;
	c.int8_fwd_s = 0.001;
	int n = sky_caps_encode(&c, buf, sizeof buf, &d);
	SKY_EXPECT_MSG(n > 0, "%s", d.msg);
	SKY_EXPECT(strstr(buf, "\"id\":\"b01\"") != NULL); /* readable with mosquitto_sub */
	SKY_EXPECT_EQ(sky_caps_decode(buf, (size_t)n, &back, &d), 0);
	SKY_EXPECT(strcmp(back.id, "b01") == 0 && back.session == 7);
	SKY_EXPECT(strcmp(back.boot, "9f3c0a5e7d214b68") == 0);
	SKY_EXPECT(sky_caps_shape_eq(&back.shape, &c.shape));
	SKY_EXPECT_NEAR(back.fp32.bwd_ffn_s, 0.0061, 1e-15);
	SKY_EXPECT(back.has_int8);
	SKY_EXPECT_NEAR(back.int8_fwd_s, 0.001, 1e-15);
	/* the optional int8 figures: absent reads as 0 (not measured) */
	SKY_EXPECT(back.int8_attn_s == 0 && back.int8_embed_s == 0 && back.int8_head_s == 0);
	SKY_EXPECT(strstr(buf, "\"attn_s\"") == NULL && strstr(buf, "\"embed_s\"") == NULL);
	SKY_EXPECT_EQ(back.mem_bytes, 2147483648ll);
	SKY_EXPECT_NEAR(back.link_lat_s, 0.0004, 1e-15);
	SKY_EXPECT_EQ(back.probed_at, 1764511200);
	SKY_EXPECT_EQ(sky_json_pool_used(), 0); /* nothing left in the pool */
}

/* Replaces the first occurrence of from with to in a valid report and
 * decodes it; returns the code and the diagnostic. */
static int decode_edited(const char *from, const char *to, sky_diag *d)
{
	sky_caps c;
	char buf[SKY_CAPS_MAX_BYTES], out[SKY_CAPS_MAX_BYTES];
	sample(&c);
	int n = sky_caps_encode(&c, buf, sizeof buf, NULL);
	char *at = strstr(buf, from);
	if (n <= 0 || !at)
		return 1000; /* the test itself is wrong */
	snprintf(out, sizeof out, "%.*s%s%s", (int)(at - buf), buf, to, at + strlen(from));
	sky_diag_clear(d);
	return sky_caps_decode(out, strlen(out), &c, d);
}

SKY_TEST(site_round_trips_and_core_is_no_site)
{
	sky_caps c, back;
	char buf[SKY_CAPS_MAX_BYTES];
	sky_diag d;
	sky_diag_clear(&d);
	sample(&c);
	int n = sky_caps_encode(&c, buf, sizeof buf, &d);
	SKY_EXPECT(n > 0 && strstr(buf, "\"site\"") == NULL); /* the core site: left out */
	strcpy(c.site, "factory");
	n = sky_caps_encode(&c, buf, sizeof buf, &d);
	SKY_EXPECT_MSG(n > 0, "%s", d.msg);
	SKY_EXPECT(strstr(buf, "\"site\":\"factory\"") != NULL);
	SKY_EXPECT_EQ(sky_caps_decode(buf, (size_t)n, &back, &d), 0);
	SKY_EXPECT(strcmp(back.site, "factory") == 0);
	/* "core" reads as the core site; a name that could not be a topic
	 * level is refused and named */
	SKY_EXPECT_EQ(decode_edited("\"probe_s\"", "\"site\":\"core\",\"probe_s\"", &d), 0);
	SKY_EXPECT_EQ(decode_edited("\"probe_s\"", "\"site\":\"a/b\",\"probe_s\"", &d), SKY_EINVAL);
	SKY_EXPECT_MSG(strstr(d.msg, "site") != NULL, "%s", d.msg);
	SKY_EXPECT_EQ(decode_edited("\"probe_s\"", "\"site\":7,\"probe_s\"", &d), SKY_EFORMAT);
	strcpy(c.site, "a#");
	SKY_EXPECT_EQ(sky_caps_encode(&c, buf, sizeof buf, &d), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_json_pool_used(), 0);
}

SKY_TEST(absurd_values_are_refused_and_named)
{
	sky_diag d;
	SKY_EXPECT_EQ(decode_edited("\"fwd_attn_s\":0.0021", "\"fwd_attn_s\":-1", &d), SKY_ERANGE);
	SKY_EXPECT_MSG(strstr(d.msg, "fp32.fwd_attn_s") != NULL, "%s", d.msg);
	SKY_EXPECT_EQ(decode_edited("\"bwd_ffn_s\":0.0061", "\"bwd_ffn_s\":0", &d), SKY_ERANGE);
	SKY_EXPECT(strstr(d.msg, "bwd_ffn_s") != NULL);
	/* JSON has no NaN; a board sending one sends invalid JSON */
	SKY_EXPECT_EQ(decode_edited("\"fwd_ffn_s\":0.003", "\"fwd_ffn_s\":NaN", &d), SKY_EFORMAT);
	SKY_EXPECT_EQ(decode_edited("\"fwd_ffn_s\":0.003", "\"fwd_ffn_s\":1e999", &d), SKY_ERANGE);
	SKY_EXPECT_EQ(decode_edited("\"mem_bytes\":2147483648", "\"mem_bytes\":1e30", &d),
		      SKY_ERANGE);
	SKY_EXPECT_MSG(strstr(d.msg, "mem_bytes") != NULL, "%s", d.msg);
	SKY_EXPECT_EQ(decode_edited("\"mem_bytes\":2147483648", "\"mem_bytes\":-5", &d),
		      SKY_ERANGE);
	SKY_EXPECT_EQ(decode_edited("\"lat_s\":0.0004", "\"lat_s\":-0.1", &d), SKY_ERANGE);
	SKY_EXPECT(strstr(d.msg, "lat_s") != NULL);
	SKY_EXPECT_EQ(decode_edited("\"mem_bytes\"", "\"int8\":{\"fwd_s\":-2},\"mem_bytes\"", &d),
		      SKY_ERANGE);
	SKY_EXPECT_MSG(strstr(d.msg, "int8.fwd_s") != NULL, "%s", d.msg);
	/* the int8 halves and the serving ends */
	SKY_EXPECT_EQ(decode_edited("\"mem_bytes\"",
				    "\"int8\":{\"fwd_s\":0.01,\"attn_s\":0.02},\"mem_bytes\"", &d),
		      SKY_ERANGE);
	SKY_EXPECT_MSG(strstr(d.msg, "int8.attn_s") != NULL, "%s", d.msg);
	SKY_EXPECT_EQ(decode_edited("\"mem_bytes\"",
				    "\"int8\":{\"fwd_s\":0.01,\"embed_s\":-1},\"mem_bytes\"", &d),
		      SKY_ERANGE);
	SKY_EXPECT_MSG(strstr(d.msg, "int8.embed_s") != NULL, "%s", d.msg);
	SKY_EXPECT_EQ(decode_edited("\"mem_bytes\"",
				    "\"int8\":{\"fwd_s\":0.01,\"head_s\":\"x\"},\"mem_bytes\"", &d),
		      SKY_EFORMAT);
	SKY_EXPECT_MSG(strstr(d.msg, "head_s") != NULL, "%s", d.msg);
	SKY_EXPECT_EQ(decode_edited("\"heads\":4", "\"heads\":3", &d), SKY_ERANGE);
	SKY_EXPECT_EQ(decode_edited("\"threads\":2", "\"threads\":\"2\"", &d), SKY_EFORMAT);
	SKY_EXPECT(strstr(d.msg, "threads") != NULL);
	SKY_EXPECT_EQ(decode_edited("\"id\":\"b01\"", "\"id\":\"b/#\"", &d), SKY_EINVAL);
	SKY_EXPECT_EQ(decode_edited("\"board\":\"host\"", "\"board\":\"\\u001b[2J\"", &d),
		      SKY_EINVAL);
	SKY_EXPECT_EQ(decode_edited("\"v\":1", "\"v\":2", &d), SKY_ERANGE);
	SKY_EXPECT_EQ(decode_edited("\"session\":7,", "", &d), SKY_ENOTFOUND);
	SKY_EXPECT(strstr(d.msg, "session") != NULL);
	SKY_EXPECT_EQ(sky_json_pool_used(), 0);
}

SKY_TEST(sessions_beyond_2_pow_53_and_bad_boot_ids_are_refused)
{
	sky_diag d;
	/* 9007199254740993 rounds to the double 2^53, which an "at most 2^53"
	 * check let through as session 9007199254740992 */
	SKY_EXPECT_EQ(decode_edited("\"session\":7", "\"session\":9007199254740993", &d),
		      SKY_ERANGE);
	SKY_EXPECT_MSG(strstr(d.msg, "'session'") && strstr(d.msg, "beyond 2^53 - 1"), "%s", d.msg);
	SKY_EXPECT_EQ(decode_edited("\"session\":7", "\"session\":9007199254740992", &d),
		      SKY_ERANGE);
	SKY_EXPECT_EQ(decode_edited("\"session\":7", "\"session\":9007199254740991", &d), 0);
	SKY_EXPECT_EQ(decode_edited("\"9f3c0a5e7d214b68\"", "\"9F3C\"", &d), SKY_EFORMAT);
	SKY_EXPECT(strstr(d.msg, "boot") != NULL);
	SKY_EXPECT_EQ(decode_edited("\"9f3c0a5e7d214b68\"", "17", &d), SKY_EFORMAT);
	/* an older board sends no boot: that reads as "" */
	sky_caps c;
	char buf[SKY_CAPS_MAX_BYTES];
	sample(&c);
	c.boot[0] = '\0';
	int n = sky_caps_encode(&c, buf, sizeof buf, NULL);
	SKY_EXPECT(n > 0 && strstr(buf, "boot") == NULL);
	SKY_EXPECT_EQ(sky_caps_decode(buf, (size_t)n, &c, NULL), 0);
	/* status and heartbeats: the same bound, the same boot rule */
	sky_status st;
	const char *big = "{\"state\":\"online\",\"session\":9007199254740993,\"keepalive_s\":2}";
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_status_decode(big, strlen(big), &st, &d), SKY_ERANGE);
	SKY_EXPECT_MSG(strstr(d.msg, "beyond 2^53 - 1") != NULL, "%s", d.msg);
	const char *seq = "{\"state\":\"online\",\"session\":1,\"keepalive_s\":2,"
			  "\"seq\":9007199254740993}";
	SKY_EXPECT_EQ(sky_status_decode(seq, strlen(seq), &st, NULL), SKY_ERANGE);
	const char *ok = "{\"state\":\"offline\",\"boot\":\"00ff\",\"session\":9007199254740991}";
	SKY_EXPECT_EQ(sky_status_decode(ok, strlen(ok), &st, NULL), 0);
	SKY_EXPECT(st.session == 9007199254740991ll && strcmp(st.boot, "00ff") == 0);
	const char *badboot = "{\"state\":\"offline\",\"boot\":\"x\\n\",\"session\":1}";
	SKY_EXPECT_EQ(sky_status_decode(badboot, strlen(badboot), &st, NULL), SKY_EFORMAT);
	sky_status enc = {.online = 1, .session = 3, .keepalive_s = 2, .seq = 4};
	strcpy(enc.boot, "abc123");
	char sb[SKY_STATUS_MAX_BYTES];
	SKY_EXPECT(sky_status_encode(&enc, sb, sizeof sb) > 0);
	SKY_EXPECT(strcmp(sb, "{\"state\":\"online\",\"boot\":\"abc123\",\"session\":3,"
			      "\"keepalive_s\":2,\"seq\":4}") == 0);
	strcpy(enc.boot, "NOT-HEX");
	SKY_EXPECT_EQ(sky_status_encode(&enc, sb, sizeof sb), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_json_pool_used(), 0);
}

SKY_TEST(malformed_and_oversize_input_is_refused)
{
	sky_caps c;
	sky_diag d;
	static char big[SKY_CAPS_MAX_BYTES + 2];
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_caps_decode("{\"v\":1,", 7, &c, &d), SKY_EFORMAT);
	SKY_EXPECT_EQ(sky_caps_decode("[]", 2, &c, &d), SKY_EFORMAT);
	SKY_EXPECT_EQ(sky_caps_decode("", 0, &c, &d), SKY_EFORMAT);
	memset(big, ' ', sizeof big);
	unsigned long allocs = sky_test_allocs();
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_caps_decode(big, sizeof big, &c, &d), SKY_ERANGE);
	SKY_EXPECT(strstr(d.msg, "unparsed") != NULL);
	SKY_EXPECT_EQ(sky_test_allocs(), allocs);
	SKY_EXPECT_EQ(sky_json_pool_peak() < SKY_CAPS_MAX_BYTES * 8, 1);
}

SKY_TEST(encoder_refuses_what_a_decoder_would)
{
	sky_caps c;
	char buf[4096];
	sky_diag d;
	sample(&c);
	c.fp32.fwd_attn_s = NAN;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_caps_encode(&c, buf, sizeof buf, &d), SKY_ERANGE);
	sample(&c);
	SKY_EXPECT_EQ(sky_caps_encode(&c, buf, 64, &d), SKY_ERANGE); /* too small */
	SKY_EXPECT(sky_caps_layer_s(&c.fp32) > 0.0156 && sky_caps_layer_s(&c.fp32) < 0.0158);
}

SKY_TEST(the_int8_halves_and_serving_ends_round_trip)
{
	sky_caps c, back;
	char buf[SKY_CAPS_MAX_BYTES];
	sky_diag d;
	sky_diag_clear(&d);
	sample(&c);
	c.has_int8 = 1;
	c.int8_fwd_s = 0.0068;
	c.int8_attn_s = 0.0032;
	c.int8_embed_s = 0.0008;
	c.int8_head_s = 0.0005;
	int n = sky_caps_encode(&c, buf, sizeof buf, &d);
	SKY_EXPECT_MSG(n > 0, "%s", d.msg);
	SKY_EXPECT(strstr(buf, "\"attn_s\":") && strstr(buf, "\"embed_s\":") &&
		   strstr(buf, "\"head_s\":"));
	SKY_EXPECT_EQ(sky_caps_decode(buf, (size_t)n, &back, &d), 0);
	SKY_EXPECT_NEAR(back.int8_attn_s, 0.0032, 1e-15);
	SKY_EXPECT_NEAR(back.int8_embed_s, 0.0008, 1e-15);
	SKY_EXPECT_NEAR(back.int8_head_s, 0.0005, 1e-15);
	/* an encoder refuses what a decoder would: the attention half above the layer */
	c.int8_attn_s = 0.007;
	SKY_EXPECT_EQ(sky_caps_encode(&c, buf, sizeof buf, &d), SKY_ERANGE);
	SKY_EXPECT_MSG(strstr(d.msg, "int8.attn_s") != NULL, "%s", d.msg);
	/* and int8 figures without the int8 layer */
	c.int8_attn_s = 0;
	c.has_int8 = 0;
	SKY_EXPECT_EQ(sky_caps_encode(&c, buf, sizeof buf, &d), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_json_pool_used(), 0);
}

SKY_TEST(the_blas_core_is_reported_and_optional)
{
	sky_caps c, back;
	char buf[SKY_CAPS_MAX_BYTES];
	sky_diag d;
	sky_diag_clear(&d);
	sample(&c);
	int n = sky_caps_encode(&c, buf, sizeof buf, &d);
	SKY_EXPECT(n > 0 && strstr(buf, "blas_core") == NULL); /* older boards do not say */
	SKY_EXPECT_EQ(sky_caps_decode(buf, (size_t)n, &back, &d), 0);
	SKY_EXPECT(back.blas_core[0] == '\0');
	strcpy(c.blas_core, "Cooperlake");
	n = sky_caps_encode(&c, buf, sizeof buf, &d);
	SKY_EXPECT_EQ(sky_caps_decode(buf, (size_t)n, &back, &d), 0);
	SKY_EXPECT(strcmp(back.blas_core, "Cooperlake") == 0);
	char *at = strstr(buf, "\"Cooperlake\"");
	SKY_EXPECT(at != NULL);
	if (at)
		memcpy(at, "123456789012", 12); /* a number where a name belongs */
	SKY_EXPECT(sky_caps_decode(buf, (size_t)n, &back, &d) != 0);
	SKY_EXPECT_MSG(strstr(d.msg, "blas_core") != NULL, "%s", d.msg);
}

SKY_TEST(data_sets_round_trip_and_bad_ones_are_refused)
{
	sky_caps c, back;
	char buf[SKY_CAPS_MAX_BYTES];
	sky_diag d;
	sky_diag_clear(&d);
	sample(&c);
	/* none: no key at all (older planners read the report as before) */
	int n = sky_caps_encode(&c, buf, sizeof buf, &d);
	SKY_EXPECT(n > 0 && strstr(buf, "datasets") == NULL);
	c.n_datasets = SKY_CAPS_MAX_DATASETS;
	for (int i = 0; i < c.n_datasets; i++) {
		sky_caps_dataset *s = &c.datasets[i];
		snprintf(s->name, sizeof s->name, "set-%d.with_a_long_name_to_fill_the_report_%d", i, i);
		s->rows = 2147483647ll - i;
		s->labels = 256;
		s->seq = 8192;
		memset(s->sha256, 'f', 64);
		s->sha256[0] = (char)('0' + i);
		s->tokenizer = 0xdeadbeefu - (uint32_t)i;
	}
	n = sky_caps_encode(&c, buf, sizeof buf, &d);
	SKY_EXPECT_MSG(n > 0, "%s", d.msg);
	SKY_EXPECT_EQ(sky_caps_decode(buf, (size_t)n, &back, &d), 0);
	SKY_EXPECT_EQ(back.n_datasets, SKY_CAPS_MAX_DATASETS);
	SKY_EXPECT(memcmp(back.datasets, c.datasets, sizeof c.datasets) == 0);
	SKY_EXPECT(strstr(buf, "\"tokenizer\":\"deadbeef\"") != NULL);
	SKY_EXPECT(sky_caps_dataset_find(&back, c.datasets[3].name) == &back.datasets[3]);
	SKY_EXPECT(sky_caps_dataset_find(&back, "nope") == NULL);
	/* refusals, each naming what is wrong */
	c.n_datasets = 2;
	struct {
		const char *from, *to, *why;
	} bad[] = {
		{"\"rows\":2147483647", "\"rows\":0", "field 'rows' is 0"},
		{"\"labels\":256", "\"labels\":257", "field 'labels' is 257"},
		{"\"seq\":8192", "\"seq\":1", "field 'seq' is 1"},
		{"\"sha256\":\"0", "\"sha256\":\"X", "sha256 is not 64"},
		{"\"tokenizer\":\"deadbeef\"", "\"tokenizer\":\"deadbee\"", "tokenizer is not 8"},
		{"\"name\":\"set-0", "\"name\":\"set/0", "datasets[0].name is not"},
		{"\"name\":\"set-1.with_a_long_name_to_fill_the_report_1\"",
		 "\"name\":\"set-0.with_a_long_name_to_fill_the_report_0\"", "named twice"},
		{"\"datasets\":[", "\"datasets\":7,\"x\":[", "'datasets' must be an array"},
	};
	for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
		char b2[SKY_CAPS_MAX_BYTES + 64];
		n = sky_caps_encode(&c, buf, sizeof buf, &d);
		SKY_EXPECT(n > 0);
		const char *at = strstr(buf, bad[k].from);
		SKY_EXPECT_MSG(at != NULL, "%s", bad[k].from);
		if (!at)
			continue;
		snprintf(b2, sizeof b2, "%.*s%s%s", (int)(at - buf), buf, bad[k].to,
			 at + strlen(bad[k].from));
		sky_diag_clear(&d);
		SKY_EXPECT(sky_caps_decode(b2, strlen(b2), &back, &d) < 0);
		SKY_EXPECT_MSG(strstr(d.msg, bad[k].why) != NULL, "%s: %s", bad[k].why, d.msg);
	}
	/* more than the cap */
	c.n_datasets = SKY_CAPS_MAX_DATASETS + 1;
	SKY_EXPECT(sky_caps_encode(&c, buf, sizeof buf, &d) < 0);
	SKY_EXPECT_EQ(sky_json_pool_used(), 0);
}
