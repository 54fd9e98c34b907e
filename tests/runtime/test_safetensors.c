#include "sky_test.h"

#include "sky_err.h"
#include "sky_json.h"
#include "sky_safetensors.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A file image: 8-byte length, header text (padded with `pad` spaces), then
 * data_len bytes 0, 1, 2, ... Returns the image length. */
static size_t image(unsigned char *buf, const char *header, size_t pad, size_t data_len)
{
	size_t n = strlen(header) + pad;
	for (int i = 0; i < 8; i++)
		buf[i] = (unsigned char)((uint64_t)n >> (8 * i));
	memcpy(buf + 8, header, strlen(header));
	memset(buf + 8 + strlen(header), ' ', pad);
	for (size_t i = 0; i < data_len; i++)
		buf[8 + n + i] = (unsigned char)i;
	return 8 + n + data_len;
}

static unsigned char g_buf[1 << 16];

/* Parses header + data and expects rc with `word` in the message. */
static void expect_bad(const char *header, size_t data_len, int rc_want, const char *word,
		       int line)
{
	size_t len = image(g_buf, header, 0, data_len);
	sky_st_file f;
	sky_diag d;
	sky_diag_clear(&d);
	int rc = sky_st_parse(&f, g_buf, len, &d);
	SKY_EXPECT_MSG(rc == rc_want, "line %d: rc %d, want %d (%s)", line, rc, rc_want, d.msg);
	SKY_EXPECT_MSG(strstr(d.msg, word) != NULL, "line %d: '%s' lacks '%s'", line, d.msg, word);
	SKY_EXPECT(f.mem == NULL && f.ntensors == 0);
	sky_st_close(&f);
}
#define BAD(h, n, rc, word) expect_bad(h, n, rc, word, __LINE__)

static const char *k_ok = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";

SKY_TEST(parses_a_minimal_file)
{
	size_t len = image(g_buf, k_ok, 3, 8);
	sky_st_file f;
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_st_parse(&f, g_buf, len, &d), 0);
	SKY_EXPECT_EQ(f.ntensors, 1);
	const sky_st_tensor *t = sky_st_find(&f, "a");
	SKY_EXPECT(t != NULL);
	if (t) {
		SKY_EXPECT_EQ(t->dtype, SKY_ST_F32);
		SKY_EXPECT_EQ(t->count, 2);
		SKY_EXPECT_EQ(t->nbytes, 8);
		SKY_EXPECT(t->data == g_buf + 8 + strlen(k_ok) + 3);
	}
	SKY_EXPECT(sky_st_find(&f, "b") == NULL);
	SKY_EXPECT_EQ(sky_json_pool_used(), 0);
	sky_st_close(&f);
	sky_st_close(&f); /* twice is fine */
}

SKY_TEST(empty_header_and_whitespace_padding)
{
	sky_st_file f;
	size_t len = image(g_buf, "{}", 6, 0);
	SKY_EXPECT_EQ(sky_st_parse(&f, g_buf, len, NULL), 0);
	SKY_EXPECT_EQ(f.ntensors, 0);
	sky_st_close(&f);
	len = image(g_buf, "{ }\n\t ", 0, 0);
	SKY_EXPECT_EQ(sky_st_parse(&f, g_buf, len, NULL), 0);
	sky_st_close(&f);
}

SKY_TEST(rejects_what_the_format_forbids)
{
	sky_st_file f;
	sky_diag d;
	/* shorter than the length field */
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_st_parse(&f, "\x02\0\0", 3, &d), SKY_EFORMAT);
	SKY_EXPECT(strstr(d.msg, "too short") != NULL);
	/* header length past the end (a truncated file) */
	size_t len = image(g_buf, k_ok, 0, 8);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_st_parse(&f, g_buf, 20, &d), SKY_EFORMAT);
	SKY_EXPECT(strstr(d.msg, "past the end") != NULL);
	/* data truncated: the header is whole, the tensor's bytes are not */
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_st_parse(&f, g_buf, len - 3, &d), SKY_EFORMAT);
	SKY_EXPECT_MSG(strstr(d.msg, "tensor a: data ends at byte 8, past the 5-byte buffer"),
		       "%s", d.msg);
	/* a header length over the limit */
	memset(g_buf, 0, 8);
	g_buf[3] = 0x10; /* 256 MiB */
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_st_parse(&f, g_buf, 64, &d), SKY_ERANGE);
	SKY_EXPECT(strstr(d.msg, "limit") != NULL);
	g_buf[7] = 0x80; /* 2^63 + ...: no wrap-around */
	SKY_EXPECT_EQ(sky_st_parse(&f, g_buf, 64, NULL), SKY_ERANGE);

	BAD("[]", 0, SKY_EFORMAT, "JSON object");
	BAD(" {}", 0, SKY_EFORMAT, "JSON object");
	BAD("{", 0, SKY_EFORMAT, "JSON object");
	BAD("{\"a\"", 0, SKY_EFORMAT, "malformed");
	BAD("{\"a\":}", 0, SKY_EFORMAT, "malformed");
	BAD("{} x", 0, SKY_EFORMAT, "header");
	BAD("{},{}", 0, SKY_EFORMAT, "follows the JSON object");
	BAD("{}{}", 0, SKY_EFORMAT, "header");
	BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}\x01", 4, SKY_EFORMAT,
	    "control byte");
	BAD("{\"a\":1}", 0, SKY_EFORMAT, "tensor a: entry is not a JSON object");
	BAD("{\"\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, SKY_EFORMAT,
	    "empty name");
	BAD("{\"a\":{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, SKY_EFORMAT,
	    "tensor a: unknown dtype 'F33'");
	BAD("{\"a\":{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, SKY_EFORMAT,
	    "unknown dtype");
	BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4, SKY_EFORMAT,
	    "tensor a: shape[0] is not a whole number");
	BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, SKY_EFORMAT,
	    "shape[0]");
	BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":[0,4]}}", 4, SKY_EFORMAT,
	    "shape[0]");
	BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,4]}}", 4, SKY_EFORMAT,
	    "shape is not an array");
	BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
	    SKY_EFORMAT, "9 dimensions");
	BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[67108864,67108864,67108864],\"data_offsets\":[0,"
	    "4]}}",
	    4, SKY_ERANGE, "2^53");
	BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4, SKY_EFORMAT,
	    "begin 4 is after end 0");
	BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 4, SKY_EFORMAT,
	    "data_offsets must be");
	BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, SKY_EFORMAT,
	    "data_offsets must be");
	BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, SKY_EFORMAT,
	    "tensor a: F32 with 2 elements needs 8 bytes, data_offsets span 4");
	BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, SKY_EFORMAT,
	    "tensor a: missing field 'data_offsets'");
	BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", 4,
	    SKY_EFORMAT, "unexpected field 'x'");
	BAD("{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
	    SKY_EFORMAT, "repeated");
	/* regions: overlap, hole, bytes left over, duplicate names */
	BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
	    "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
	    8, SKY_EFORMAT, "overlaps");
	BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
	    "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
	    12, SKY_EFORMAT, "tensor b: data starts at byte 8 of the buffer, expected 4 (leaves a hole)");
	BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, SKY_EFORMAT,
	    "hole");
	BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 6, SKY_EFORMAT,
	    "tensors cover 4 bytes but the buffer has 6");
	BAD("{}", 1, SKY_EFORMAT, "cover 0 bytes");
	BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
	    "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
	    8, SKY_EFORMAT, "tensor a: name repeated");
	/* metadata */
	BAD("{\"__metadata__\":{\"k\":1}}", 0, SKY_EFORMAT, "value of 'k' is not a string");
	BAD("{\"__metadata__\":[]}", 0, SKY_EFORMAT, "__metadata__ is not an object");
	BAD("{\"__metadata__\":{\"k\":\"v\",\"k\":\"w\"}}", 0, SKY_EFORMAT, "key 'k' repeated");
	BAD("{\"__metadata__\":{},\"__metadata__\":{}}", 0, SKY_EFORMAT, "duplicate");
}

SKY_TEST(zero_sized_tensors_and_scalars)
{
	/* a 0-element tensor at the same offset as the next one is legal */
	const char *h = "{\"z\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[0,0]},"
			"\"s\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[0,8]},"
			"\"e\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[8,8]},"
			"\"__metadata__\":{\"format\":\"pt\"}}";
	size_t len = image(g_buf, h, 0, 8);
	sky_st_file f;
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_st_parse(&f, g_buf, len, &d), 0);
	SKY_EXPECT_MSG(d.msg[0] == 0, "%s", d.msg);
	SKY_EXPECT_EQ(f.ntensors, 3);
	const sky_st_tensor *s = sky_st_find(&f, "s");
	SKY_EXPECT(s && s->ndim == 0 && s->count == 1 && s->nbytes == 8);
	const sky_st_tensor *z = sky_st_find(&f, "z");
	SKY_EXPECT(z && z->count == 0 && z->ndim == 2);
	SKY_EXPECT(sky_st_meta_get(&f, "format") && strcmp(sky_st_meta_get(&f, "format"), "pt") == 0);
	SKY_EXPECT(sky_st_meta_get(&f, "other") == NULL);
	sky_st_close(&f);
}

SKY_TEST(lookup_names_what_was_expected_and_found)
{
	const char *h = "{\"attention.self.query.weight\":{\"dtype\":\"F16\",\"shape\":[32,32],"
			"\"data_offsets\":[0,2048]}}";
	size_t len = image(g_buf, h, (8 - (8 + strlen(h)) % 8) % 8, 2048);
	sky_st_file f;
	sky_diag d;
	SKY_EXPECT_EQ(sky_st_parse(&f, g_buf, len, NULL), 0);
	const float *p = NULL;
	int shape[2] = {32, 32};
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_st_get_f32(&f, "attention.self.query.weight", 2, shape, &p, &d),
		      SKY_EFORMAT);
	SKY_EXPECT_MSG(strcmp(d.msg, "tensor attention.self.query.weight: expected F32 (32, 32), "
				     "found F16 (32, 32)") == 0,
		       "%s", d.msg);
	int64_t s64[2] = {32, -1};
	const sky_st_tensor *t = NULL;
	SKY_EXPECT_EQ(sky_st_get(&f, "attention.self.query.weight", SKY_ST_F16, 2, s64, &t, NULL), 0);
	SKY_EXPECT(t && t->shape[1] == 32);
	s64[0] = 16;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_st_get(&f, "attention.self.query.weight", SKY_ST_F16, 2, s64, &t, &d),
		      SKY_EFORMAT);
	SKY_EXPECT_MSG(strstr(d.msg, "expected F16 (16, *), found F16 (32, 32)"), "%s", d.msg);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_st_get_f32(&f, "attention.self.key.weight", 2, shape, &p, &d),
		      SKY_ENOTFOUND);
	SKY_EXPECT_MSG(strstr(d.msg, "tensor attention.self.key.weight: missing (expected F32 (32, 32))"),
		       "%s", d.msg);
	/* lookups allocate nothing */
	unsigned long before = sky_test_allocs();
	for (int i = 0; i < 10; i++)
		SKY_EXPECT(sky_st_find(&f, "attention.self.query.weight") != NULL);
	SKY_EXPECT_EQ(sky_test_allocs(), before);
	sky_st_close(&f);
}

SKY_TEST(misaligned_data_is_copied_not_viewed)
{
	/* pad so the buffer starts at an odd file offset */
	const char *h = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
	size_t pad = (8 - (8 + strlen(h)) % 8) % 8 + 1;
	size_t n = strlen(h) + pad;
	size_t len = image(g_buf, h, pad, 0);
	float vals[2] = {1.5f, -2.25f};
	memcpy(g_buf + 8 + n, vals, 8);
	len += 8;
	/* the mapping is page aligned; model that with an aligned copy */
	static _Alignas(64) unsigned char img[256];
	memcpy(img, g_buf, len);
	sky_st_file f;
	sky_diag d;
	SKY_EXPECT_EQ(sky_st_parse(&f, img, len, NULL), 0);
	const float *p = NULL;
	int shape[1] = {2};
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_st_get_f32(&f, "w", 1, shape, &p, &d), SKY_EFORMAT);
	SKY_EXPECT_MSG(strstr(d.msg, "not 4-byte aligned"), "%s", d.msg);
	float out[2] = {0, 0};
	SKY_EXPECT_EQ(sky_st_copy_f32(&f, "w", 1, shape, out, NULL), 0);
	SKY_EXPECT(out[0] == 1.5f && out[1] == -2.25f);
	sky_st_close(&f);
}

SKY_TEST(write_then_read_back_every_kind)
{
	float a[6] = {1, 2, 3, 4, 5, -6};
	int8_t q[5] = {-128, -1, 0, 1, 127};
	int32_t s[4] = {1 << 30, -7, 0, 42};
	double one = 3.25;
	sky_st_entry e[5] = {
		{.name = "q", .dtype = SKY_ST_I8, .ndim = 1, .shape = {5}, .data = q},
		{.name = "a", .dtype = SKY_ST_F32, .ndim = 2, .shape = {2, 3}, .data = a},
		{.name = "s", .dtype = SKY_ST_I32, .ndim = 2, .shape = {2, 2}, .data = s},
		{.name = "one", .dtype = SKY_ST_F64, .ndim = 0, .data = &one},
		{.name = "none", .dtype = SKY_ST_U8, .ndim = 2, .shape = {0, 4}, .data = NULL},
	};
	sky_st_meta meta[2] = {{"format", "pt"}, {"note", "quote \" and \\ and \xc3\xa9"}};
	char path[512];
	snprintf(path, sizeof path, "%s/w.safetensors", sky_test_tmp_dir());
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_st_write(path, e, 5, meta, 2, &d), 0);
	SKY_EXPECT_MSG(d.msg[0] == 0, "%s", d.msg);

	sky_st_file f;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_st_open(&f, path, &d), 0);
	SKY_EXPECT_MSG(d.msg[0] == 0, "%s", d.msg);
	SKY_EXPECT_EQ(f.ntensors, 5);
	SKY_EXPECT_EQ((8 + f.header_len) % 8, 0);
	/* header padding is spaces, as the format allows */
	unsigned char last = f.map.data ? f.map.data[8 + f.header_len - 1] : 0;
	SKY_EXPECT(last == ' ' || last == '}');
	const float *pa = NULL;
	int sh[2] = {2, 3};
	SKY_EXPECT_EQ(sky_st_get_f32(&f, "a", 2, sh, &pa, NULL), 0);
	SKY_EXPECT(pa && memcmp(pa, a, sizeof a) == 0);
	const sky_st_tensor *t = NULL;
	int64_t s5[1] = {5}, s22[2] = {2, 2}, s04[2] = {0, 4};
	SKY_EXPECT_EQ(sky_st_get(&f, "q", SKY_ST_I8, 1, s5, &t, NULL), 0);
	SKY_EXPECT(t && memcmp(t->data, q, 5) == 0);
	SKY_EXPECT_EQ(sky_st_get(&f, "s", SKY_ST_I32, 2, s22, &t, NULL), 0);
	SKY_EXPECT(t && memcmp(t->data, s, sizeof s) == 0);
	SKY_EXPECT_EQ(sky_st_get(&f, "one", SKY_ST_F64, 0, NULL, &t, NULL), 0);
	SKY_EXPECT(t && memcmp(t->data, &one, 8) == 0);
	SKY_EXPECT_EQ(sky_st_get(&f, "none", SKY_ST_U8, 2, s04, &t, NULL), 0);
	/* every tensor is aligned for its type (largest elements first) */
	for (int i = 0; i < f.ntensors; i++)
		SKY_EXPECT((uintptr_t)f.tensors[i].data % sky_st_dtype_size(f.tensors[i].dtype) == 0);
	SKY_EXPECT(sky_st_meta_get(&f, "note") &&
		   strcmp(sky_st_meta_get(&f, "note"), meta[1].value) == 0);
	sky_st_close(&f);

	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_st_open(&f, "/nonexistent/x.safetensors", &d), SKY_ENOTFOUND);
	SKY_EXPECT(strstr(d.msg, "/nonexistent/x.safetensors") != NULL);
}

SKY_TEST(writer_rejects_bad_entries)
{
	float a[1] = {0};
	sky_st_entry e[2] = {
		{.name = "a", .dtype = SKY_ST_F32, .ndim = 1, .shape = {1}, .data = a},
		{.name = "a", .dtype = SKY_ST_F32, .ndim = 1, .shape = {1}, .data = a},
	};
	size_t size;
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_st_encoded_size(e, 2, NULL, 0, &size, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "repeated") != NULL);
	e[1].name = "__metadata__";
	SKY_EXPECT_EQ(sky_st_encoded_size(e, 2, NULL, 0, &size, NULL), SKY_EINVAL);
	e[1].name = "b";
	e[1].shape[0] = -1;
	SKY_EXPECT_EQ(sky_st_encoded_size(e, 2, NULL, 0, &size, NULL), SKY_EINVAL);
	e[1].shape[0] = 1;
	e[1].data = NULL;
	SKY_EXPECT_EQ(sky_st_encoded_size(e, 2, NULL, 0, &size, NULL), SKY_EINVAL);
	e[1].data = a;
	SKY_EXPECT_EQ(sky_st_encoded_size(e, 2, NULL, 0, &size, NULL), 0);
	/* a buffer that is too small is an error, not an overrun */
	unsigned char small[40];
	size_t len = 0;
	SKY_EXPECT_EQ(sky_st_encode(e, 2, NULL, 0, small, sizeof small, &len, NULL), SKY_ERANGE);
	unsigned char *big = malloc(size);
	SKY_EXPECT_EQ(sky_st_encode(e, 2, NULL, 0, big, size, &len, NULL), 0);
	SKY_EXPECT(len <= size && len > 8);
	sky_st_file f;
	SKY_EXPECT_EQ(sky_st_parse(&f, big, len, NULL), 0);
	SKY_EXPECT_EQ(f.ntensors, 2);
	sky_st_close(&f);
	free(big);
}

SKY_TEST(block_save_and_load_with_prefix)
{
	/* a toy block: W (3, 2) then b (3) */
	sky_tensor_info table[2] = {
		{"dense.weight", 2, {3, 2}, 0, 6},
		{"dense.bias", 1, {3, 0}, 6, 3},
	};
	float flat[9], back[9];
	for (int i = 0; i < 9; i++)
		flat[i] = (float)i * 0.5f - 1.0f;
	char path[512];
	snprintf(path, sizeof path, "%s/block.safetensors", sky_test_tmp_dir());
	sky_st_meta meta[1] = {{"model", "toy"}};
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_st_save_block(path, "encoder.layer.3.", table, 2, flat, meta, 1, &d), 0);
	sky_st_file f;
	SKY_EXPECT_EQ(sky_st_open(&f, path, &d), 0);
	SKY_EXPECT(sky_st_find(&f, "encoder.layer.3.dense.weight") != NULL);
	SKY_EXPECT(sky_st_find(&f, "dense.weight") == NULL);
	memset(back, 0, sizeof back);
	SKY_EXPECT_EQ(sky_st_load_block(&f, "encoder.layer.3.", table, 2, back, &d), 0);
	SKY_EXPECT(memcmp(back, flat, sizeof flat) == 0);
	/* a wrong prefix names the missing tensor */
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_st_load_block(&f, "", table, 2, back, &d), SKY_ENOTFOUND);
	SKY_EXPECT_MSG(strstr(d.msg, "tensor dense.weight: missing (expected F32 (3, 2))"), "%s",
		       d.msg);
	/* a table that disagrees on a shape */
	table[1].shape[0] = 4;
	table[1].count = 4;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_st_load_block(&f, "encoder.layer.3.", table, 2, back, &d), SKY_EFORMAT);
	SKY_EXPECT_MSG(strstr(d.msg, "encoder.layer.3.dense.bias: expected F32 (4), found F32 (3)"),
		       "%s", d.msg);
	sky_st_close(&f);
}

SKY_TEST(header_parsing_releases_the_json_pool)
{
	size_t len = image(g_buf, k_ok, 0, 8);
	for (int i = 0; i < 3; i++) {
		sky_st_file f;
		SKY_EXPECT_EQ(sky_st_parse(&f, g_buf, len, NULL), 0);
		sky_st_close(&f);
		SKY_EXPECT_EQ(sky_json_pool_used(), 0);
		SKY_EXPECT_EQ(sky_st_parse(&f, g_buf, len - 1, NULL), SKY_EFORMAT);
		SKY_EXPECT_EQ(sky_json_pool_used(), 0);
	}
}
