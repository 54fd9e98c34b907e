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
