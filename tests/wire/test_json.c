#include "sky_test.h"

#include "sky_json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

SKY_TEST(parse_read_free_returns_the_pool)
{
	const char *doc = "{\"id\":\"b1\",\"fwd_s\":0.25,\"mem\":1048576,\"bad\":-1}";
	sky_diag d;
	sky_diag_clear(&d);
	unsigned long allocs = sky_test_allocs();
	cJSON *j = sky_json_parse(doc, strlen(doc), &d);
	SKY_EXPECT(j != NULL);
	SKY_EXPECT(sky_json_pool_used() > 0);
	SKY_EXPECT_EQ(sky_test_allocs(), allocs); /* Sky's own code did not allocate */
	char id[8];
	double t;
	int64_t mem;
	SKY_EXPECT_EQ(sky_json_str(j, "id", id, sizeof id, "caps", &d), 0);
	SKY_EXPECT(strcmp(id, "b1") == 0);
	SKY_EXPECT_EQ(sky_json_num(j, "fwd_s", 0, 1e6, &t, "caps", &d), 0);
	SKY_EXPECT_NEAR(t, 0.25, 0);
	SKY_EXPECT_EQ(sky_json_i64(j, "mem", 1, 1ll << 50, &mem, "caps", &d), 0);
	SKY_EXPECT_EQ(mem, 1048576);
	SKY_EXPECT_EQ(sky_json_num(j, "bad", 0, 1, &t, "board b1", &d), SKY_ERANGE);
	SKY_EXPECT(strstr(d.msg, "board b1") && strstr(d.msg, "'bad'"));
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_json_num(j, "missing", 0, 1, &t, "board b1", &d), SKY_ENOTFOUND);
	SKY_EXPECT(strstr(d.msg, "missing") != NULL);
	SKY_EXPECT_EQ(sky_json_str(j, "fwd_s", id, sizeof id, "caps", NULL), SKY_EFORMAT);
	SKY_EXPECT_EQ(sky_json_str(j, "id", id, 2, "caps", NULL), SKY_ERANGE);
	sky_json_free(j);
	SKY_EXPECT_EQ(sky_json_pool_used(), 0);
}

SKY_TEST(a_nul_in_any_string_is_refused_with_its_place)
{
	/* escaped in a value, in a key, alone, in an array; then a raw NUL byte */
	const char *bad[] = {"{\"id\":\"bX\\u0000y\"}", "{\"id\\u0000x\":\"b1\",\"id\":\"b2\"}",
			     "{\"id\":\"\\u0000\"}", "[\"a\\u0000\"]"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		sky_diag d;
		sky_diag_clear(&d);
		SKY_EXPECT_MSG(sky_json_parse(bad[i], strlen(bad[i]), &d) == NULL, "accepted %s",
			       bad[i]);
		SKY_EXPECT_MSG(strstr(d.msg, "NUL") != NULL, "%s", d.msg);
	}
	const char raw[] = "{\"id\":\"bX\0y\"}";
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT(sky_json_parse(raw, sizeof raw - 1, &d) == NULL);
	SKY_EXPECT_MSG(strstr(d.msg, "NUL character at byte 9") != NULL, "%s", d.msg);
	/* an escaped backslash before "u0000" is text, and other escapes stay legal */
	const char *good = "{\"p\":\"C:\\\\u0000\",\"q\":\"\\u0041\\u00e9\"}";
	cJSON *j = sky_json_parse(good, strlen(good), &d);
	SKY_EXPECT_MSG(j != NULL, "%s", d.msg);
	char p[16];
	SKY_EXPECT_EQ(sky_json_str(j, "p", p, sizeof p, "t", NULL), 0);
	SKY_EXPECT(strcmp(p, "C:\\u0000") == 0);
	sky_json_free(j);
	SKY_EXPECT_EQ(sky_json_pool_used(), 0);
}

/* libcjson is a shared library, so the --wrap counter behind
 * sky_test_allocs() never sees its calls; sky_test_heap_allocs() counts
 * every allocation in the process. First show that it sees one made inside
 * a shared library (libc's strdup), then that parsing, reading, printing
 * and deleting a document of a few hundred values makes none: cJSON's
 * hooks point at the pool, which handed out the memory instead. */
SKY_TEST(cjson_never_touches_the_heap)
{
	unsigned long before = sky_test_heap_allocs();
	char *probe = strdup("seen");
	SKY_EXPECT_MSG(sky_test_heap_allocs() > before, "the heap counter missed libc's strdup");
	free(probe);

	static char doc[16384];
	int n = snprintf(doc, sizeof doc, "{\"id\":\"b1\",\"xs\":[");
	for (int i = 0; i < 300; i++)
		n += snprintf(doc + n, sizeof doc - (size_t)n, "%s{\"k%d\":%d.5}", i ? "," : "", i, i);
	n += snprintf(doc + n, sizeof doc - (size_t)n, "]}");
	static char out[16384];
	size_t pool0 = sky_json_pool_used();
	before = sky_test_heap_allocs();
	cJSON *j = sky_json_parse(doc, (size_t)n, NULL);
	size_t pool1 = sky_json_pool_used();
	cJSON *o = sky_json_new_object();
	cJSON_AddStringToObject(o, "s", "a string cJSON copies");
	int printed = sky_json_print(j, out, sizeof out);
	unsigned long heap = sky_test_heap_allocs() - before;
	SKY_EXPECT(j != NULL && o != NULL && printed > 0);
	SKY_EXPECT_MSG(heap == 0, "%lu heap allocations while cJSON built %zu pool bytes", heap,
		       pool1 - pool0);
	/* 600 values at least, each a cJSON node from the pool */
	SKY_EXPECT_MSG(pool1 - pool0 >= 600 * sizeof(cJSON), "pool grew by %zu bytes", pool1 - pool0);
	sky_json_free(o);
	sky_json_free(j);
	SKY_EXPECT_EQ(sky_test_heap_allocs() - before, 0);
	SKY_EXPECT_EQ(sky_json_pool_used(), 0);
}

SKY_TEST(malformed_and_absurd_input_is_refused)
{
	const char *bad[] = {"{", "{\"a\":nan}", "{\"a\":1,}", "[1,2", "\"\\u12\"", ""};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		sky_diag d;
		sky_diag_clear(&d);
		SKY_EXPECT_MSG(sky_json_parse(bad[i], strlen(bad[i]), &d) == NULL, "accepted %s",
			       bad[i]);
		SKY_EXPECT(d.msg[0] != '\0');
	}
	SKY_EXPECT_EQ(sky_json_pool_used(), 0);
	/* a number that overflows to infinity parses but no getter accepts it */
	cJSON *j = sky_json_parse("{\"x\":1e999}", 11, NULL);
	double x;
	SKY_EXPECT(j != NULL);
	SKY_EXPECT_EQ(sky_json_num(j, "x", -1e300, 1e300, &x, "t", NULL), SKY_ERANGE);
	sky_json_free(j);
	/* length is respected: bytes after len are never read */
	j = sky_json_parse("{\"a\":1}garbage", 7, NULL);
	SKY_EXPECT(j != NULL);
	sky_json_free(j);
}

SKY_TEST(integers_beyond_2_pow_53_are_refused_not_rounded)
{
	/* 2^53 + 1 parses to the double 2^53: a bound of "at most 2^53" let it in */
	const char *doc = "{\"max\":9007199254740991,\"p53\":9007199254740992,"
			  "\"p53p1\":9007199254740993,\"neg\":-9007199254740993,"
			  "\"big\":1e300,\"negmax\":-9007199254740991,\"half\":4503599627370495.5}";
	cJSON *j = sky_json_parse(doc, strlen(doc), NULL);
	SKY_EXPECT(j != NULL);
	int64_t v = 7;
	sky_diag d;
	SKY_EXPECT_EQ(sky_json_i64(j, "max", 0, INT64_MAX, &v, "t", NULL), 0);
	SKY_EXPECT_EQ(v, 9007199254740991ll);
	SKY_EXPECT_EQ(sky_json_i64(j, "negmax", INT64_MIN, 0, &v, "t", NULL), 0);
	SKY_EXPECT_EQ(v, -9007199254740991ll);
	const char *bad[] = {"p53", "p53p1", "neg", "big"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		v = 7;
		sky_diag_clear(&d);
		SKY_EXPECT_MSG(sky_json_i64(j, bad[i], INT64_MIN, INT64_MAX, &v, "status", &d) ==
				       SKY_ERANGE,
			       "%s accepted", bad[i]);
		SKY_EXPECT_MSG(strstr(d.msg, "beyond 2^53 - 1") != NULL, "%s: %s", bad[i], d.msg);
		SKY_EXPECT_EQ(v, 7);
	}
	SKY_EXPECT_EQ(sky_json_i64(j, "half", 0, INT64_MAX, &v, "t", NULL), SKY_EFORMAT);
	int iv = 3;
	SKY_EXPECT_EQ(sky_json_int(j, "p53p1", 0, 1 << 30, &iv, "t", NULL), SKY_ERANGE);
	SKY_EXPECT_EQ(iv, 3);
	/* the range check is on the exact integer, not on a rounded double */
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_json_i64(j, "max", 0, 9007199254740990ll, &v, "t", &d), SKY_ERANGE);
	SKY_EXPECT(strstr(d.msg, "9007199254740991, allowed 0 to 9007199254740990") != NULL);
	sky_json_free(j);
	SKY_EXPECT_EQ(sky_json_pool_used(), 0);
}

SKY_TEST(deep_nesting_is_bounded)
{
	static char deep[20001];
	memset(deep, '[', 10000);
	memset(deep + 10000, ']', 10000);
	SKY_EXPECT(sky_json_parse(deep, 20000, NULL) == NULL); /* cJSON's nesting limit */
}

SKY_TEST(print_without_allocating)
{
	cJSON *j = sky_json_new_object();
	cJSON_AddNumberToObject(j, "n", 3);
	cJSON_AddStringToObject(j, "s", "x");
	char buf[64];
	int n = sky_json_print(j, buf, sizeof buf);
	SKY_EXPECT(n > 0 && strcmp(buf, "{\"n\":3,\"s\":\"x\"}") == 0);
	SKY_EXPECT_EQ(sky_json_print(j, buf, 8), SKY_ERANGE);
	sky_json_free(j);
}

SKY_TEST(escape_gives_a_json_string_that_decodes_to_the_same_bytes)
{
	char buf[512], doc[600];
	const char *hostile[] = {
		"b1\",\"done\":true,\"x\":\"", /* ends the value and adds a member */
		"b1\n{\"forged\":1}",         /* a new line in a JSON-lines file */
		"\x1b[2J\x1b]0;owned\x07",    /* a terminal clear and title */
		"<3>urgent", "back\\slash", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "\x7f",
	};
	for (size_t i = 0; i < sizeof hostile / sizeof hostile[0]; i++) {
		int n = sky_json_escape(hostile[i], buf, sizeof buf);
		SKY_EXPECT_MSG(n > 0 && (size_t)n == strlen(buf), "%zu", i);
		for (const char *c = buf; *c; c++)
			SKY_EXPECT_MSG((unsigned char)*c >= 0x20 && *c != 0x7f && *c != '<', "%zu: %s", i,
				       buf);
		snprintf(doc, sizeof doc, "{\"s\":\"%s\"}", buf);
		cJSON *j = sky_json_parse(doc, strlen(doc), NULL);
		SKY_EXPECT_MSG(j != NULL, "%zu: %s", i, doc);
		const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "s");
		SKY_EXPECT_MSG(cJSON_IsString(s) && !strcmp(s->valuestring, hostile[i]), "%zu: %s", i,
			       doc);
		SKY_EXPECT_EQ(cJSON_GetArraySize(j), 1);
		sky_json_free(j);
	}
	SKY_EXPECT_EQ(sky_json_escape("\x1b", buf, sizeof buf), 6);
	SKY_EXPECT(!strcmp(buf, "\\u001b"));
	/* bytes that are not UTF-8 (a lone continuation, an overlong '/', a
	 * surrogate, a cut sequence) become U+FFFD: the file stays valid JSON */
	SKY_EXPECT(sky_json_escape("a\x80" "b\xc0\xaf" "c\xed\xa0\x80" "d\xe2\x82", buf, sizeof buf) > 0);
	SKY_EXPECT_MSG(!strcmp(buf, "a\\ufffdb\\ufffd\\ufffdc\\ufffd\\ufffd\\ufffdd\\ufffd\\ufffd"),
		       "%s", buf);
	/* cut at a whole escape, terminated, said so */
	SKY_EXPECT_EQ(sky_json_escape("abc\"", buf, 5), SKY_ERANGE);
	SKY_EXPECT(!strcmp(buf, "abc"));
	SKY_EXPECT_EQ(sky_json_escape("x", buf, 1), SKY_ERANGE);
	SKY_EXPECT(buf[0] == '\0');
}
