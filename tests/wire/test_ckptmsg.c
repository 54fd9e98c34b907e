#include "sky_test.h"

#include "sky_ckptmsg.h"

#include <stdlib.h>
#include <string.h>

/* two blocks (3 and 5 floats), parameters and one state vector */
static size_t make(unsigned char *buf, size_t cap, sky_ckpt_meta *m, float *a, float *b)
{
	for (int i = 0; i < 8; i++)
		a[i] = 0.25f * (float)i - 1.0f, b[i] = 100.0f + (float)i;
	sky_ckpt_tensor t[4] = {{-1, 3, a, 3}, {-1, 4, a + 3, 5}, {0, 3, b, 3}, {0, 4, b + 3, 5}};
	memset(m, 0, sizeof *m);
	strcpy(m->job, "j1");
	m->epoch = 7;
	m->step = 12;
	m->blk0 = 3;
	m->nblk = 2;
	m->nvec = 1;
	size_t len = 0;
	SKY_EXPECT_EQ(sky_ckpt_encode(m, t, 4, buf, cap, &len, NULL), 0);
	SKY_EXPECT(len <= sky_ckpt_bound(4, 16));
	return len;
}

SKY_TEST(encode_then_parse_gives_the_same_tensors_and_fields)
{
	unsigned char buf[4096];
	float a[8], b[8];
	sky_ckpt_meta m, got;
	sky_ckpt_tensor t[8];
	int nt = 0;
	size_t len = make(buf, sizeof buf, &m, a, b);
	SKY_EXPECT_EQ(strlen(m.sha), 64);
	SKY_EXPECT_EQ(sky_ckpt_parse(buf, len, &got, t, 8, &nt, NULL), 0);
	SKY_EXPECT_EQ(nt, 4);
	SKY_EXPECT(!strcmp(got.job, "j1") && got.epoch == 7 && got.step == 12 && got.blk0 == 3 &&
		   got.nblk == 2 && got.nvec == 1 && !strcmp(got.sha, m.sha));
	SKY_EXPECT(t[1].vec == -1 && t[1].blk == 4 && t[1].n == 5);
	SKY_EXPECT(memcmp(t[1].data, a + 3, 5 * sizeof(float)) == 0);
	SKY_EXPECT(t[2].vec == 0 && t[2].blk == 3 && memcmp(t[2].data, b, 3 * sizeof(float)) == 0);
	/* a safetensors file: 8-byte header length, header padded to 8 */
	uint64_t hl = 0;
	for (int i = 7; i >= 0; i--)
		hl = hl << 8 | buf[i];
	SKY_EXPECT_EQ(hl % 8, 0);
	SKY_EXPECT_EQ(len, 8 + hl + 16 * sizeof(float));
}

SKY_TEST(a_flipped_tensor_byte_is_refused_by_its_hash)
{
	unsigned char buf[4096];
	float a[8], b[8];
	sky_ckpt_meta m, got;
	sky_ckpt_tensor t[8];
	int nt = 0;
	sky_diag d;
	sky_diag_clear(&d);
	size_t len = make(buf, sizeof buf, &m, a, b);
	buf[len - 2] ^= 0x01;
	SKY_EXPECT_EQ(sky_ckpt_parse(buf, len, &got, t, 8, &nt, &d), SKY_EAUTH);
	SKY_EXPECT_MSG(strstr(d.msg, "SHA-256 mismatch") != NULL, "%s", d.msg);
	SKY_EXPECT_EQ(nt, 0);
}

SKY_TEST(malformed_images_are_refused_as_format_errors)
{
	unsigned char buf[4096], bad[4096];
	float a[8], b[8];
	sky_ckpt_meta m, got;
	sky_ckpt_tensor t[8];
	int nt = 0;
	size_t len = make(buf, sizeof buf, &m, a, b);
	SKY_EXPECT_EQ(sky_ckpt_parse(buf, 4, &got, t, 8, &nt, NULL), SKY_EFORMAT);
	SKY_EXPECT_EQ(sky_ckpt_parse(buf, len - 4, &got, t, 8, &nt, NULL), SKY_EFORMAT); /* truncated */
	SKY_EXPECT_EQ(sky_ckpt_parse(buf, len, &got, t, 3, &nt, NULL), SKY_EFORMAT);     /* cap */
	memcpy(bad, buf, len);
	bad[0] = 0xff, bad[1] = 0xff; /* a header longer than the image */
	SKY_EXPECT_EQ(sky_ckpt_parse(bad, len, &got, t, 8, &nt, NULL), SKY_EFORMAT);
	memcpy(bad, buf, len);
	char *p = NULL; /* "p.3" -> "q.3": not one of ours */
	for (size_t i = 8; i + 5 < len && !p; i++)
		if (!memcmp(bad + i, "\"p.3\"", 5))
			p = (char *)bad + i + 1;
	SKY_EXPECT(p != NULL);
	if (p)
		*p = 'q';
	SKY_EXPECT_EQ(sky_ckpt_parse(bad, len, &got, t, 8, &nt, NULL), SKY_EFORMAT);
}

SKY_TEST(a_buffer_too_small_is_a_range_error)
{
	unsigned char buf[64];
	float a[8] = {0};
	sky_ckpt_tensor t[1] = {{-1, 0, a, 8}};
	sky_ckpt_meta m;
	memset(&m, 0, sizeof m);
	strcpy(m.job, "j");
	m.nblk = 1;
	size_t len = 0;
	SKY_EXPECT_EQ(sky_ckpt_encode(&m, t, 1, buf, sizeof buf, &len, NULL), SKY_ERANGE);
}

/* a header edited in place (same length, so the hash placeholder and the
 * offsets keep their bytes) */
static void edit(unsigned char *buf, size_t len, const char *from, const char *to)
{
	size_t n = strlen(from);
	SKY_EXPECT_EQ(n, strlen(to));
	for (size_t i = 8; i + n <= len; i++)
		if (!memcmp(buf + i, from, n)) {
			memcpy(buf + i, to, n);
			return;
		}
	SKY_EXPECT_MSG(0, "'%s' not in the header", from);
}

SKY_TEST(the_header_is_checked_against_the_data_before_any_hash)
{
	unsigned char buf[4096], bad[4096];
	float a[8], b[8];
	sky_ckpt_meta m, got;
	sky_ckpt_tensor t[8];
	int nt = 0;
	sky_diag d;
	size_t len = make(buf, sizeof buf, &m, a, b);
	/* the header alone parses; the hash is a separate call */
	SKY_EXPECT_EQ(sky_ckpt_parse_header(buf, len, &got, t, 8, &nt, NULL), 0);
	SKY_EXPECT_EQ(nt, 4);
	SKY_EXPECT_EQ(sky_ckpt_verify(buf, len, &got, NULL), 0);
	struct {
		const char *from, *to, *why;
	} cases[] = {
		{"\"s0.4\"", "\"s0.3\"", "tensor 's0.3' twice"},
		{"\"sky_nblk\":\"2\"", "\"sky_nblk\":\"1\"", "is not one of ours"},
		{"\"sky_nvec\":\"1\"", "\"sky_nvec\":\"0\"", "is not one of ours"},
		{"\"sky_step\":\"12\"", "\"sky_step\":\"-1\"", "sky_step '-1' out of range"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		memcpy(bad, buf, len);
		edit(bad, len, cases[i].from, cases[i].to);
		sky_diag_clear(&d);
		SKY_EXPECT_EQ(sky_ckpt_parse_header(bad, len, &got, t, 8, &nt, &d), SKY_EFORMAT);
		SKY_EXPECT_MSG(strstr(d.msg, cases[i].why) != NULL, "%zu: %s", i, d.msg);
	}
	/* one tensor shorter than the one of the same block */
	sky_ckpt_tensor u[4] = {{-1, 3, a, 3}, {-1, 4, a + 3, 5}, {0, 3, b, 2}, {0, 4, b + 3, 5}};
	size_t ulen = 0;
	SKY_EXPECT_EQ(sky_ckpt_encode(&m, u, 4, bad, sizeof bad, &ulen, NULL), 0);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_ckpt_parse_header(bad, ulen, &got, t, 8, &nt, &d), SKY_EFORMAT);
	SKY_EXPECT_MSG(strstr(d.msg, "block 3's tensors differ in length (3 and 2 floats)"), "%s",
		       d.msg);
	/* a block missing */
	SKY_EXPECT_EQ(sky_ckpt_encode(&m, u, 3, bad, sizeof bad, &ulen, NULL), 0);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_ckpt_parse_header(bad, ulen, &got, t, 8, &nt, &d), SKY_EFORMAT);
	SKY_EXPECT_MSG(strstr(d.msg, "3 tensors in 40 bytes, blocks 3+2 with 1 state vectors "
				     "declare 4"), "%s", d.msg);
}
