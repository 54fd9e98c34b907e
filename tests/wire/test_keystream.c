/* The vectorised ChaCha20 key stream (runtime/wire/keystream.c) is Mbed
 * TLS's stream, word for word, at every alignment, length and sign, up to
 * the end of the 32-bit block counter (RFC 8439's own vector is checked
 * through secure aggregation's stream in test_secagg). */
#include "sky_keystream.h"
#include "sky_test.h"

#include <string.h>

static uint64_t g_a[4096], g_b[4096];

SKY_TEST(equals_mbedtls_at_every_offset_length_and_sign)
{
	unsigned char key[32];
	for (int i = 0; i < 32; i++)
		key[i] = (unsigned char)(i * 37 + 5);
	static const uint64_t firsts[] = {0, 1, 7, 8, 9, 31, 32, 33, 63, 1000, 123457,
					  SKY_KEYSTREAM_MAX_WORDS - 4096,
					  SKY_KEYSTREAM_MAX_WORDS - 37};
	static const size_t lens[] = {0, 1, 2, 7, 8, 9, 31, 32, 33, 100, 4096};
	int bad = 0, cases = 0;
	for (size_t f = 0; f < sizeof firsts / sizeof firsts[0]; f++)
		for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++)
			for (int sign = -1; sign <= 1; sign += 2) {
				size_t n = lens[l];
				if (firsts[f] + n > SKY_KEYSTREAM_MAX_WORDS)
					continue;
				for (size_t i = 0; i < n; i++)
					g_a[i] = g_b[i] = i * 0x9e3779b97f4a7c15ull;
				sky_keystream_add(g_a, n, firsts[f], key, sign);
				SKY_EXPECT_EQ(sky_keystream_add_ref(g_b, n, firsts[f], key, sign), 0);
				bad += memcmp(g_a, g_b, n * sizeof *g_a) != 0;
				cases++;
			}
	SKY_EXPECT_MSG(bad == 0, "%d of %d cases differ", bad, cases);
	/* a word the stream adds is removed by the opposite sign */
	memset(g_a, 0, sizeof g_a);
	sky_keystream_add(g_a, 4096, 77, key, 1);
	sky_keystream_add(g_a, 4096, 77, key, -1);
	for (int i = 0; i < 4096; i++)
		SKY_EXPECT(g_a[i] == 0);
}

/* keys one bit apart give streams that share no word */
SKY_TEST(keys_give_their_own_streams)
{
	unsigned char k1[32], k2[32];
	for (int i = 0; i < 32; i++) {
		k1[i] = (unsigned char)i;
		k2[i] = (unsigned char)i;
	}
	k2[31] ^= 1;
	memset(g_a, 0, 64 * sizeof *g_a);
	memset(g_b, 0, 64 * sizeof *g_b);
	sky_keystream_add(g_a, 64, 0, k1, 1);
	sky_keystream_add(g_b, 64, 0, k2, 1);
	int same = 0;
	for (int i = 0; i < 64; i++)
		same += g_a[i] == g_b[i];
	SKY_EXPECT(same == 0);
}
