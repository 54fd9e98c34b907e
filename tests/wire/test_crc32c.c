#include "sky_test.h"

#include "sky_crc32c.h"
#include "sky_rng.h"

#include <stdlib.h>
#include <string.h>

/* RFC 3720 appendix B.4 (iSCSI CRC32C examples); the RFC prints the CRC
 * bytes in wire order (little-endian), e.g. "aa 36 91 8a" for 0x8A9136AA. */
SKY_TEST(rfc3720_vectors)
{
	unsigned char buf[48];
	memset(buf, 0, 32);
	SKY_EXPECT_EQ(sky_crc32c(0, buf, 32), 0x8A9136AAu);
	memset(buf, 0xff, 32);
	SKY_EXPECT_EQ(sky_crc32c(0, buf, 32), 0x62A8AB43u);
	for (int i = 0; i < 32; i++)
		buf[i] = (unsigned char)i;
	SKY_EXPECT_EQ(sky_crc32c(0, buf, 32), 0x46DD794Eu);
	for (int i = 0; i < 32; i++)
		buf[i] = (unsigned char)(31 - i);
	SKY_EXPECT_EQ(sky_crc32c(0, buf, 32), 0x113FDB5Cu);
	/* an iSCSI Read (10) command PDU */
	static const unsigned char pdu[48] = {
		0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
		0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18, 0x28, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
	SKY_EXPECT_EQ(sky_crc32c(0, pdu, sizeof pdu), 0xD9963A56u);
	SKY_EXPECT_EQ(sky_crc32c(0, "123456789", 9), 0xE3069283u); /* the CRC catalogue's check */
	SKY_EXPECT_EQ(sky_crc32c_sw(0, "123456789", 9), 0xE3069283u);
	SKY_EXPECT_EQ(sky_crc32c(0, NULL, 0), 0);
	SKY_EXPECT_EQ(sky_crc32c(0x1234, NULL, 0), 0x1234);
}

/* The fast path (whatever this CPU takes) equals the plain C one at every
 * length up to past two long three-lane rounds, at every start alignment,
 * and in pieces. */
SKY_TEST(every_path_agrees)
{
	enum { MAX = 2 * 3 * 8192 + 3 * 256 + 77 };
	unsigned char *buf = malloc(MAX + 8);
	SKY_EXPECT(buf != NULL);
	if (!buf)
		return;
	sky_rng r;
	sky_rng_seed(&r, 9);
	for (size_t i = 0; i < MAX + 8; i++)
		buf[i] = (unsigned char)sky_rng_u64(&r);
	printf("# crc32c path: %s\n", sky_crc32c_impl());
	int bad = 0;
	for (size_t n = 0; n <= 1024 && !bad; n++)
		for (size_t a = 0; a < 8; a++)
			if (sky_crc32c(7, buf + a, n) != sky_crc32c_sw(7, buf + a, n))
				bad++;
	SKY_EXPECT_EQ(bad, 0);
	static const size_t big[] = {3 * 256,      3 * 256 + 1, 3 * 8192 - 1, 3 * 8192,
				     3 * 8192 + 5, 6 * 8192,    MAX};
	for (size_t i = 0; i < sizeof big / sizeof big[0]; i++)
		for (size_t a = 0; a < 8; a++)
			SKY_EXPECT_MSG(sky_crc32c(0, buf + a, big[i]) == sky_crc32c_sw(0, buf + a, big[i]),
				       "length %zu at offset %zu", big[i], a);
	uint32_t whole = sky_crc32c(0, buf, MAX);
	for (size_t cut = 0; cut <= MAX; cut += 4099)
		SKY_EXPECT_EQ(sky_crc32c(sky_crc32c(0, buf, cut), buf + cut, MAX - cut), whole);
	/* one flipped bit anywhere changes it */
	buf[MAX / 2] ^= 0x10;
	SKY_EXPECT(sky_crc32c(0, buf, MAX) != whole);
	free(buf);
}
