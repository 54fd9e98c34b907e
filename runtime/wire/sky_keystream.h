/* The ChaCha20 key stream (RFC 8439: key, nonce zero, block counter from
 * 0) as little-endian 64-bit words, added into a vector: the PRG of
 * secure aggregation's masks (sky_secagg.h).
 *
 * Written here rather than taken from Mbed TLS's mbedtls_chacha20_update
 * because a round masks every element of the model once per peer: the
 * library computes one 64-byte block at a time in scalar code and XORs it
 * into a buffer (about 300 MB/s of key stream on the machines Sky is
 * measured on), where eight blocks computed side by side in vectors
 * (SSE2 on x86-64, NEON on AArch64, through GCC's vector extensions: one
 * source for both) and added straight into the words give about five
 * times that; `sky bench secagg` measures both. The output is the
 * same stream, bit for bit: tests/wire/test_keystream.c compares it with
 * Mbed TLS's at many offsets and lengths, and with RFC 8439's vector.
 *
 * Thread safety: no state. */
#ifndef SKY_KEYSTREAM_H
#define SKY_KEYSTREAM_H

#include <stddef.h>
#include <stdint.h>

#define SKY_KEYSTREAM_KEY_BYTES 32
/* 2^32 blocks of 8 words: the 32-bit block counter's reach. */
#define SKY_KEYSTREAM_MAX_WORDS ((uint64_t)1 << 35)

/* v[i] += sign * KS[first + i] (mod 2^64) for i < n, KS the key stream of
 * key read as little-endian 64-bit words; sign is +1 or -1. The caller
 * keeps first + n <= SKY_KEYSTREAM_MAX_WORDS. */
void sky_keystream_add(uint64_t *v, size_t n, uint64_t first,
		       const unsigned char key[SKY_KEYSTREAM_KEY_BYTES], int sign);

/* The same through Mbed TLS, one block at a time: the reference the tests
 * and the benchmark compare with. Returns 0 or an Mbed TLS error. */
int sky_keystream_add_ref(uint64_t *v, size_t n, uint64_t first,
			  const unsigned char key[SKY_KEYSTREAM_KEY_BYTES], int sign);

#endif
