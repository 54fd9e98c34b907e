#include "sky_test.h"

#include "sky_frame.h"

#include <string.h>

static sky_frame_hdr sample(void)
{
	sky_frame_hdr h;
	memset(&h, 0, sizeof h);
	h.direction = SKY_FRAME_BWD;
	h.dtype = SKY_FRAME_F32;
	h.ndim = 2;
	h.stage = 3;
	h.micro_batch = 5;
	h.shape[0] = 32;
	h.shape[1] = 64;
	strcpy(h.job, "j1");
	return h;
}

SKY_TEST(round_trip_little_endian)
{
	unsigned char buf[SKY_FRAME_HEADER_BYTES + 32 * 64 * 4];
	sky_frame_hdr h = sample(), back;
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_frame_encode(&h, buf, sizeof buf, &d), SKY_FRAME_HEADER_BYTES);
	SKY_EXPECT_EQ(h.payload_bytes, 32 * 64 * 4);
	SKY_EXPECT(memcmp(buf, "SKYF", 4) == 0);
	SKY_EXPECT_EQ(buf[32], (32 * 64 * 4) & 0xff); /* little-endian on every host */
	SKY_EXPECT_EQ(buf[33], (32 * 64 * 4) >> 8);
	SKY_EXPECT_EQ(sky_frame_decode(buf, SKY_FRAME_HEADER_BYTES, 1 << 20, &back, &d), 0);
	SKY_EXPECT_EQ(sky_frame_decode(buf, sizeof buf, 1 << 20, &back, &d), 0);
	SKY_EXPECT_EQ(back.direction, SKY_FRAME_BWD);
	SKY_EXPECT_EQ(back.stage, 3);
	SKY_EXPECT_EQ(back.micro_batch, 5);
	SKY_EXPECT_EQ(back.shape[1], 64);
	SKY_EXPECT(strcmp(back.job, "j1") == 0);
	/* a message whose payload is one byte short */
	SKY_EXPECT_EQ(sky_frame_decode(buf, sizeof buf - 1, 1 << 20, &back, &d), SKY_ERANGE);
}

SKY_TEST(oversize_declared_payload_is_refused_before_allocating)
{
	unsigned char buf[SKY_FRAME_HEADER_BYTES];
	sky_frame_hdr h = sample(), back;
	sky_diag d;
	h.ndim = 4;
	h.shape[0] = h.shape[1] = h.shape[2] = 65536;
	h.shape[3] = 4;
	SKY_EXPECT_EQ(sky_frame_encode(&h, buf, sizeof buf, NULL), SKY_FRAME_HEADER_BYTES);
	unsigned long allocs = sky_test_allocs();
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_frame_decode(buf, sizeof buf, SKY_FRAME_MAX_PAYLOAD_DEFAULT, &back, &d),
		      SKY_ERANGE);
	SKY_EXPECT_MSG(strstr(d.msg, "limit") != NULL, "%s", d.msg);
	SKY_EXPECT_EQ(sky_test_allocs(), allocs);
	/* a payload field that lies about the shape (2^64 - 1 bytes, or a small
	 * number for a huge shape that would wrap around) */
	h = sample();
	sky_frame_encode(&h, buf, sizeof buf, NULL);
	memset(buf + 32, 0xff, 8);
	SKY_EXPECT_EQ(sky_frame_decode(buf, sizeof buf, UINT64_MAX, &back, &d), SKY_ERANGE);
	h = sample();
	h.ndim = 4;
	h.shape[0] = h.shape[1] = h.shape[2] = h.shape[3] = 0xffffffffu;
	SKY_EXPECT_EQ(sky_frame_encode(&h, buf, sizeof buf, &d), SKY_EINVAL); /* overflow */
}

SKY_TEST(every_bad_field_is_refused)
{
	unsigned char good[SKY_FRAME_HEADER_BYTES], buf[SKY_FRAME_HEADER_BYTES];
	sky_frame_hdr h = sample(), back;
	sky_diag d;
	sky_frame_encode(&h, good, sizeof good, NULL);
	struct {
		int off;
		unsigned char v;
	} edits[] = {{0, 'X'}, {4, 2}, {5, 2}, {6, 9}, {7, 0}, {7, 5}, {10, 1},
		     {20, 0} /* shape[1] low byte: 64 -> 0 */, {24, 1} /* shape[2] past ndim */,
		     {40, '/'}, {40, 0} /* empty job */, {50, 'x'} /* after the NUL */, {110, 1}};
	for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
		memcpy(buf, good, sizeof buf);
		buf[edits[i].off] = edits[i].v;
		sky_diag_clear(&d);
		int rc = sky_frame_decode(buf, sizeof buf, 1 << 30, &back, &d);
		SKY_EXPECT_MSG(rc != 0, "edit at byte %d accepted", edits[i].off);
	}
	SKY_EXPECT_EQ(sky_frame_decode(good, 10, 1 << 20, &back, &d), SKY_EFORMAT);
	SKY_EXPECT_EQ(sky_frame_decode(NULL, 0, 1 << 20, &back, &d), SKY_EFORMAT);
	h = sample();
	h.dtype = 7;
	SKY_EXPECT(sky_frame_encode(&h, buf, sizeof buf, &d) < 0);
	h = sample();
	SKY_EXPECT_EQ(sky_frame_encode(&h, buf, 10, &d), SKY_ERANGE);
}
