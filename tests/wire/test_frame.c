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
	h.epoch = 7;
	h.step = 0x0102030405LL;
	h.crc = 0xA1B2C3D4u;
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
	SKY_EXPECT_EQ(buf[4], 2);
	SKY_EXPECT_EQ(back.epoch, 7);
	SKY_EXPECT_EQ(back.step, 0x0102030405LL);
	SKY_EXPECT_EQ(back.crc, 0xA1B2C3D4u);
	SKY_EXPECT_EQ(back.flags, 0);
	SKY_EXPECT_EQ(buf[104], 7);                  /* epoch u64 LE at 104 */
	SKY_EXPECT_EQ(buf[112], 5);                  /* step u64 LE at 112 */
	SKY_EXPECT_EQ(buf[116], 1);
	SKY_EXPECT_EQ(buf[120], 0xD4);               /* crc32c u32 LE at 120 */
	SKY_EXPECT_EQ(buf[123], 0xA1);
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
	} edits[] = {{0, 'X'}, {4, 3}, {4, 1}, {5, 2}, {6, 9}, {7, 0}, {7, 5}, {10, 2}, {11, 1},
		     {20, 0} /* shape[1] low byte: 64 -> 0 */, {24, 1} /* shape[2] past ndim */,
		     {40, '/'}, {40, 0} /* empty job */, {50, 'x'} /* after the NUL */,
		     {111, 0x80} /* epoch over 2^63-1 */, {119, 0x80} /* step likewise */,
		     {124, 1}, {127, 1} /* reserved */};
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
	h = sample();
	h.epoch = -1;
	SKY_EXPECT_EQ(sky_frame_encode(&h, buf, sizeof buf, &d), SKY_EINVAL);
	h = sample();
	h.flags = 2;
	SKY_EXPECT_EQ(sky_frame_encode(&h, buf, sizeof buf, &d), SKY_EINVAL);
}

/* A version-1 frame (before epoch, step and checksum) is refused, and the
 * message says what it is. */
SKY_TEST(version_1_frame_is_refused_by_name)
{
	unsigned char buf[SKY_FRAME_HEADER_BYTES];
	sky_frame_hdr h = sample(), back;
	h.epoch = h.step = 0;
	h.crc = 0;
	sky_frame_encode(&h, buf, sizeof buf, NULL);
	buf[4] = 1; /* what a v1 sender wrote: the same bytes, reserved zeros at 104.. */
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_frame_decode(buf, sizeof buf, 1 << 20, &back, &d), SKY_EFORMAT);
	SKY_EXPECT_MSG(strstr(d.msg, "version 1") && strstr(d.msg, "needs version 2"), "%s", d.msg);
}

/* The sealed flag makes the message 28 bytes (nonce and tag) longer. */
SKY_TEST(sealed_flag_counts_nonce_and_tag)
{
	enum { N = 32 * 64 * 4 };
	static unsigned char buf[SKY_FRAME_HEADER_BYTES + N + SKY_FRAME_SEAL_OVERHEAD];
	sky_frame_hdr h = sample(), back;
	h.flags = SKY_FRAME_FLAG_SEALED;
	SKY_EXPECT_EQ(sky_frame_encode(&h, buf, sizeof buf, NULL), SKY_FRAME_HEADER_BYTES);
	SKY_EXPECT_EQ(sky_frame_wire_payload(&h), N + 28);
	SKY_EXPECT_EQ(sky_frame_decode(buf, sizeof buf, 1 << 20, &back, NULL), 0);
	SKY_EXPECT_EQ(back.flags, SKY_FRAME_FLAG_SEALED);
	SKY_EXPECT_EQ(back.payload_bytes, N);
	SKY_EXPECT_EQ(sky_frame_decode(buf, sizeof buf - 28, 1 << 20, &back, NULL), SKY_ERANGE);
}
