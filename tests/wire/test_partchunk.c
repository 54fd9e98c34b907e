/* A part over the message limit, cut into chunks and rebuilt
 * (runtime/wire/partchunk.c): every chunk checked against its topic's
 * index, the part rebuilt in any order, and refused when a chunk is of
 * another part or the whole does not hash to what the chunks name. */
#include "sky_test.h"

#include "sky_partchunk.h"

#include <stdlib.h>
#include <string.h>

/* two and a half chunks */
#define PART_BYTES ((size_t)SKY_PART_CHUNK_BYTES * 5 / 2)

static unsigned char *g_part, *g_msg[3];
static int g_len[3];
static unsigned char g_sha[32];

/* each test's buffers: cut() makes them, done() frees them */
static void done(void)
{
	free(g_part);
	for (int i = 0; i < 3; i++)
		free(g_msg[i]);
	g_part = NULL;
}

static void cut(void)
{
	if (!g_part) {
		g_part = malloc(PART_BYTES);
		for (int i = 0; i < 3; i++)
			g_msg[i] = malloc(SKY_CHUNK_HEADER_BYTES + SKY_PART_CHUNK_BYTES);
	}
	for (size_t i = 0; i < PART_BYTES; i++)
		g_part[i] = (unsigned char)(i * 131 + (i >> 12));
	sky_sha256(g_part, PART_BYTES, g_sha);
	for (uint32_t i = 0; i < 3; i++)
		g_len[i] = sky_chunk_encode(SKY_CHUNK_PART, g_part, PART_BYTES, g_sha,
					    SKY_PART_CHUNK_BYTES, i, g_msg[i],
					    SKY_CHUNK_HEADER_BYTES + SKY_PART_CHUNK_BYTES);
}

SKY_TEST(a_chunk_index_is_a_plain_decimal_below_the_limit)
{
	uint32_t i = 99;
	SKY_EXPECT_EQ(sky_partchunk_index("0", &i), 0);
	SKY_EXPECT_EQ(i, 0);
	SKY_EXPECT_EQ(sky_partchunk_index("17", &i), 0);
	SKY_EXPECT_EQ(i, 17);
	SKY_EXPECT_EQ(sky_partchunk_index("255", &i), 0);
	SKY_EXPECT_EQ(SKY_PART_MAX_CHUNKS, 256);
	const char *bad[] = {"", "256", "01", "-1", "1a", "4294967297", "+"};
	for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
		SKY_EXPECT_MSG(sky_partchunk_index(bad[k], &i) == SKY_EINVAL, "'%s'", bad[k]);
}

SKY_TEST(the_chunks_rebuild_the_part_in_any_order)
{
	cut();
	SKY_EXPECT_EQ(sky_chunk_count(PART_BYTES, SKY_PART_CHUNK_BYTES), 3);
	sky_part_rx rx;
	sky_part_rx_init(&rx);
	const uint32_t order[] = {2, 0, 0, 1}; /* a chunk seen twice is harmless */
	for (int k = 0; k < 4; k++) {
		sky_chunk c;
		sky_diag d;
		sky_diag_clear(&d);
		uint32_t i = order[k];
		SKY_EXPECT_MSG(g_len[i] > 0 && sky_partchunk_check(g_msg[i], (size_t)g_len[i], i, &c,
								   &d) == 0,
			       "chunk %u: %s", i, d.msg);
		SKY_EXPECT_EQ(sky_part_rx_take(&rx, &c, &d), k == 3 ? 1 : 0);
	}
	size_t n = 0;
	unsigned char *b = sky_part_rx_release(&rx, &n);
	SKY_EXPECT(b && n == PART_BYTES && !memcmp(b, g_part, PART_BYTES));
	SKY_EXPECT(rx.buf == NULL);
	free(b);
	done();
}

SKY_TEST(a_chunk_under_another_index_or_of_another_kind_is_refused)
{
	cut();
	sky_chunk c;
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_partchunk_check(g_msg[1], (size_t)g_len[1], 2, &c, &d), SKY_EFORMAT);
	SKY_EXPECT_MSG(strstr(d.msg, "part chunk 1 on the topic of chunk 2"), "%s", d.msg);
	/* a slice's chunk of the same bytes is not a part's */
	int n = sky_chunk_encode(SKY_CHUNK_SLICE, g_part, PART_BYTES, g_sha, SKY_PART_CHUNK_BYTES, 0,
				 g_msg[0], SKY_CHUNK_HEADER_BYTES + SKY_PART_CHUNK_BYTES);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_partchunk_check(g_msg[0], (size_t)n, 0, &c, &d), SKY_EFORMAT);
	SKY_EXPECT_MSG(strstr(d.msg, "not a part's"), "%s", d.msg);
	/* chunks of another size */
	n = sky_chunk_encode(SKY_CHUNK_PART, g_part, 4096, g_sha, 1024, 0, g_msg[0],
			     SKY_CHUNK_HEADER_BYTES + SKY_PART_CHUNK_BYTES);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_partchunk_check(g_msg[0], (size_t)n, 0, &c, &d), SKY_EFORMAT);
	SKY_EXPECT_MSG(strstr(d.msg, "chunks of 1024 bytes"), "%s", d.msg);
	/* a payload altered in flight */
	cut();
	g_msg[2][SKY_CHUNK_HEADER_BYTES + 5] ^= 1;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_partchunk_check(g_msg[2], (size_t)g_len[2], 2, &c, &d), SKY_EAUTH);
	done();
}

SKY_TEST(a_chunk_of_another_part_or_a_whole_of_another_hash_is_refused)
{
	cut();
	sky_part_rx rx;
	sky_part_rx_init(&rx);
	sky_chunk c;
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_partchunk_check(g_msg[0], (size_t)g_len[0], 0, &c, &d), 0);
	SKY_EXPECT_EQ(sky_part_rx_take(&rx, &c, &d), 0);
	/* another part (other bytes, so another hash) */
	unsigned char other[32];
	memcpy(other, g_sha, 32);
	other[0] ^= 0xff;
	int n = sky_chunk_encode(SKY_CHUNK_PART, g_part, PART_BYTES, other, SKY_PART_CHUNK_BYTES, 1,
				 g_msg[1], SKY_CHUNK_HEADER_BYTES + SKY_PART_CHUNK_BYTES);
	SKY_EXPECT_EQ(sky_partchunk_check(g_msg[1], (size_t)n, 1, &c, &d), 0);
	SKY_EXPECT_EQ(sky_part_rx_same(&rx, &c), 0);
	SKY_EXPECT_EQ(sky_part_rx_take(&rx, &c, &d), SKY_EINVAL);
	SKY_EXPECT_MSG(strstr(d.msg, "another part"), "%s", d.msg);
	/* a chunk whose own hash holds but whose bytes are not the part's:
	 * the whole is refused */
	g_part[SKY_PART_CHUNK_BYTES + 7] ^= 1;
	n = sky_chunk_encode(SKY_CHUNK_PART, g_part, PART_BYTES, g_sha, SKY_PART_CHUNK_BYTES, 1,
			     g_msg[1], SKY_CHUNK_HEADER_BYTES + SKY_PART_CHUNK_BYTES);
	SKY_EXPECT_EQ(sky_partchunk_check(g_msg[1], (size_t)n, 1, &c, &d), 0);
	SKY_EXPECT_EQ(sky_part_rx_take(&rx, &c, &d), 0);
	SKY_EXPECT_EQ(sky_partchunk_check(g_msg[2], (size_t)g_len[2], 2, &c, &d), 0);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_part_rx_take(&rx, &c, &d), SKY_EAUTH);
	SKY_EXPECT_MSG(strstr(d.msg, "SHA-256 mismatch"), "%s", d.msg);
	SKY_EXPECT(rx.buf == NULL);
	sky_part_rx_free(&rx);
	done();
}
