#include "sky_test.h"

#include "sky_chunk.h"

#include <stdint.h>
#include <string.h>

static unsigned char g_file[1000], g_msg[SKY_CHUNK_HEADER_BYTES + 1024];

static void fill(void)
{
	for (size_t i = 0; i < sizeof g_file; i++)
		g_file[i] = (unsigned char)(i * 7 + 3);
}

SKY_TEST(count_rounds_up_and_an_empty_file_is_one_chunk)
{
	SKY_EXPECT_EQ(sky_chunk_count(1000, 256), 4);
	SKY_EXPECT_EQ(sky_chunk_count(1024, 256), 4);
	SKY_EXPECT_EQ(sky_chunk_count(1025, 256), 5);
	SKY_EXPECT_EQ(sky_chunk_count(0, 256), 1);
	SKY_EXPECT_EQ(sky_chunk_count(10, 0), 0);
}

SKY_TEST(every_chunk_decodes_and_the_chunks_rebuild_the_file)
{
	fill();
	unsigned char sha[32], back[sizeof g_file];
	sky_sha256(g_file, sizeof g_file, sha);
	size_t at = 0;
	for (uint32_t i = 0; i < 4; i++) {
		int n = sky_chunk_encode(SKY_CHUNK_SLICE, g_file, sizeof g_file, sha, 256, i, g_msg,
					 sizeof g_msg);
		SKY_EXPECT_EQ(n, SKY_CHUNK_HEADER_BYTES + (i < 3 ? 256 : 1000 - 768));
		sky_chunk c;
		sky_chunk_reason why = SKY_CHUNK_NREASONS;
		sky_diag d;
		sky_diag_clear(&d);
		SKY_EXPECT_EQ(sky_chunk_decode(g_msg, (size_t)n, &c, &why, &d), 0);
		SKY_EXPECT_EQ(why, SKY_CHUNK_OK);
		SKY_EXPECT(c.index == i && c.total == 4 && c.chunk_bytes == 256 && c.file_bytes == 1000);
		SKY_EXPECT(memcmp(c.file_sha, sha, 32) == 0);
		SKY_EXPECT_EQ(sky_chunk_expect(&c, SKY_CHUNK_SLICE, sha, 1000, 256, i, &why, &d), 0);
		memcpy(back + at, c.data, c.len);
		at += c.len;
	}
	SKY_EXPECT_EQ(at, sizeof g_file);
	SKY_EXPECT(memcmp(back, g_file, sizeof g_file) == 0);
	SKY_EXPECT_EQ(sky_chunk_encode(SKY_CHUNK_SLICE, g_file, sizeof g_file, sha, 256, 4, g_msg,
				       sizeof g_msg),
		      SKY_EINVAL);
	SKY_EXPECT_EQ(sky_chunk_encode(SKY_CHUNK_SLICE, g_file, sizeof g_file, sha, 256, 0, g_msg, 100),
		      SKY_ERANGE);
}

/* Each damage is refused with its own reason and words. */
SKY_TEST(damaged_chunks_are_refused_with_their_reason)
{
	fill();
	unsigned char sha[32];
	sky_sha256(g_file, sizeof g_file, sha);
	int n = sky_chunk_encode(SKY_CHUNK_SLICE, g_file, sizeof g_file, sha, 256, 1, g_msg,
				 sizeof g_msg);
	SKY_EXPECT(n > 0);
	sky_chunk c;
	sky_chunk_reason why;
	sky_diag d;

	/* one payload bit */
	g_msg[SKY_CHUNK_HEADER_BYTES + 5] ^= 1;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_chunk_decode(g_msg, (size_t)n, &c, &why, &d), SKY_EAUTH);
	SKY_EXPECT_EQ(why, SKY_CHUNK_BAD_HASH);
	SKY_EXPECT_MSG(strstr(d.msg, "SHA-256 mismatch") != NULL, "%s", d.msg);
	g_msg[SKY_CHUNK_HEADER_BYTES + 5] ^= 1;

	/* cut short: the sizes disagree */
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_chunk_decode(g_msg, (size_t)n - 1, &c, &why, &d), SKY_EFORMAT);
	SKY_EXPECT_EQ(why, SKY_CHUNK_MALFORMED);

	/* an index past the file */
	g_msg[8] = 9;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_chunk_decode(g_msg, (size_t)n, &c, &why, &d), SKY_EFORMAT);
	SKY_EXPECT_EQ(why, SKY_CHUNK_MALFORMED);
	SKY_EXPECT_MSG(strstr(d.msg, "index 9 of 4") != NULL, "%s", d.msg);
	g_msg[8] = 1;

	/* not a chunk */
	g_msg[0] = 'X';
	SKY_EXPECT_EQ(sky_chunk_decode(g_msg, (size_t)n, &c, &why, NULL), SKY_EFORMAT);
	SKY_EXPECT_EQ(why, SKY_CHUNK_MALFORMED);
	g_msg[0] = 'S';

	/* oversize, before anything is read */
	SKY_EXPECT_EQ(sky_chunk_decode(g_msg, SKY_CHUNK_MAX_BYTES + 1, &c, &why, NULL), SKY_ERANGE);
	SKY_EXPECT_EQ(why, SKY_CHUNK_OVERSIZE);

	/* sound, but not what the receiver wants */
	SKY_EXPECT_EQ(sky_chunk_decode(g_msg, (size_t)n, &c, &why, NULL), 0);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_chunk_expect(&c, SKY_CHUNK_SLICE, sha, 1000, 256, 2, &why, &d), SKY_EINVAL);
	SKY_EXPECT_EQ(why, SKY_CHUNK_BAD_INDEX);
	SKY_EXPECT_MSG(strstr(d.msg, "chunk 2 is needed next") != NULL, "%s", d.msg);
	unsigned char other[32];
	memcpy(other, sha, 32);
	other[0] ^= 0xff;
	SKY_EXPECT_EQ(sky_chunk_expect(&c, SKY_CHUNK_SLICE, other, 1000, 256, 1, &why, NULL),
		      SKY_EINVAL);
	SKY_EXPECT_EQ(why, SKY_CHUNK_UNASKED);
	SKY_EXPECT_EQ(sky_chunk_expect(&c, SKY_CHUNK_MODEL, sha, 1000, 256, 1, &why, NULL), SKY_EINVAL);
	SKY_EXPECT_EQ(why, SKY_CHUNK_UNASKED);
}

SKY_TEST(sha256_hex_round_trips_and_matches_a_known_digest)
{
	unsigned char sha[32], back[32];
	char hex[65];
	sky_sha256("abc", 3, sha);
	sky_sha256_hex(sha, hex);
	/* FIPS 180-2, appendix B.1 */
	SKY_EXPECT(strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0);
	SKY_EXPECT_EQ(sky_sha256_parse(hex, back), 0);
	SKY_EXPECT(memcmp(sha, back, 32) == 0);
	SKY_EXPECT_EQ(sky_sha256_parse("ab", back), SKY_EFORMAT);
	hex[10] = 'g';
	SKY_EXPECT_EQ(sky_sha256_parse(hex, back), SKY_EFORMAT);
}

SKY_TEST(slice_request_round_trips_and_refuses_bad_fields)
{
	sky_slice_req r, b;
	char buf[SKY_SLICE_REQ_MAX_BYTES];
	memset(&r, 0, sizeof r);
	snprintf(r.job, sizeof r.job, "j1");
	memset(r.sha, 0xab, 32);
	r.from = 7;
	int n = sky_slice_req_encode(&r, buf, sizeof buf);
	SKY_EXPECT(n > 0);
	SKY_EXPECT_EQ(sky_slice_req_decode(buf, (size_t)n, &b, NULL), 0);
	SKY_EXPECT(!strcmp(b.job, "j1") && b.from == 7 && memcmp(b.sha, r.sha, 32) == 0);
	const char *bad[] = {"{\"job\":\"j/1\",\"sha256\":\"" /* bad id */
			     "abababababababababababababababababababababababababababababababab\",\"from\":0}",
			     "{\"job\":\"j1\",\"sha256\":\"abc\",\"from\":0}",
			     "{\"job\":\"j1\",\"sha256\":\""
			     "abababababababababababababababababababababababababababababababab\",\"from\":-1}",
			     "[]", NULL};
	for (int i = 0; bad[i]; i++)
		SKY_EXPECT_MSG(sky_slice_req_decode(bad[i], strlen(bad[i]), &b, NULL) != 0, "took %s",
			       bad[i]);
}
