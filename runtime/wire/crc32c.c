/* CRC32C: slicing-by-8 in C, and the CPU's CRC32C instruction on three
 * interleaved streams; see sky_crc32c.h.
 *
 * Internally every function works on the raw CRC register (the value
 * between the initial and the final inversion); only the public entry
 * points invert. The register is linear over GF(2), which is what lets
 * three streams run at once: for a block A|B|C of lanes L bytes each,
 *   raw(c, A|B|C) = zeros_2L(raw(c, A)) ^ zeros_L(raw(0, B)) ^ raw(0, C)
 * where zeros_L(x) is the register after feeding L zero bytes to x, a
 * linear map done with four 256-entry tables (one per input byte). */
#include "sky_crc32c.h"

#include "sky_cpu.h"
#include "sky_thread.h"

#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#define HW_TARGET __attribute__((target("sse4.2")))
#define HW_NAME "sse4.2x3"
#elif defined(__aarch64__)
#include <arm_acle.h>
#define HW_TARGET __attribute__((target("+crc")))
#define HW_NAME "armv8-crc32x3"
#endif

#define POLY 0x82F63B78u /* 0x1EDC6F41 bit-reversed */

/* Lane lengths of the interleaved loop: long lanes for bulk data, short
 * ones so a remainder of a few KiB still runs three-wide. Multiples of 8. */
#define LANE_LONG 8192u
#define LANE_SHORT 256u

static uint32_t g_tab[8][256];     /* slicing-by-8: g_tab[k][b] = b followed by k zero bytes */
static uint32_t g_zeros[4][4][256]; /* zeros_L for L = LANE_LONG, 2*LANE_LONG, LANE_SHORT, 2*SHORT */
static uint32_t (*g_raw)(uint32_t, const unsigned char *, size_t);
static int g_once;

static uint64_t load64le(const unsigned char *p)
{
	uint64_t v;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	memcpy(&v, p, 8);
#else
	v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
#endif
	return v;
}

static uint32_t raw_sw(uint32_t c, const unsigned char *p, size_t n)
{
	while (n && ((uintptr_t)p & 7)) {
		c = g_tab[0][(c ^ *p++) & 0xff] ^ (c >> 8);
		n--;
	}
	for (; n >= 8; n -= 8, p += 8) {
		uint64_t w = load64le(p);
		uint32_t lo = c ^ (uint32_t)w, hi = (uint32_t)(w >> 32);
		c = g_tab[7][lo & 0xff] ^ g_tab[6][(lo >> 8) & 0xff] ^ g_tab[5][(lo >> 16) & 0xff] ^
		    g_tab[4][lo >> 24] ^ g_tab[3][hi & 0xff] ^ g_tab[2][(hi >> 8) & 0xff] ^
		    g_tab[1][(hi >> 16) & 0xff] ^ g_tab[0][hi >> 24];
	}
	while (n--)
		c = g_tab[0][(c ^ *p++) & 0xff] ^ (c >> 8);
	return c;
}

static uint32_t zeros(const uint32_t t[4][256], uint32_t x)
{
	return t[0][x & 0xff] ^ t[1][(x >> 8) & 0xff] ^ t[2][(x >> 16) & 0xff] ^ t[3][x >> 24];
}

/* t[j][b] = zeros_len(b << 8j), built from the 32 single-bit images. */
static void make_zeros_table(uint32_t t[4][256], size_t len)
{
	static const unsigned char zero[256];
	uint32_t bit[32];
	for (int i = 0; i < 32; i++) {
		uint32_t c = 1u << i;
		for (size_t left = len; left;) {
			size_t k = left < sizeof zero ? left : sizeof zero;
			c = raw_sw(c, zero, k);
			left -= k;
		}
		bit[i] = c;
	}
	for (int j = 0; j < 4; j++)
		for (int b = 0; b < 256; b++) {
			uint32_t v = 0;
			for (int k = 0; k < 8; k++)
				if (b >> k & 1)
					v ^= bit[8 * j + k];
			t[j][b] = v;
		}
}

#ifdef HW_TARGET
#if defined(__x86_64__)
HW_TARGET static inline uint32_t step64(uint32_t c, uint64_t w)
{
	return (uint32_t)_mm_crc32_u64(c, w);
}
HW_TARGET static inline uint32_t step8(uint32_t c, unsigned char b) { return _mm_crc32_u8(c, b); }
#else
HW_TARGET static inline uint32_t step64(uint32_t c, uint64_t w) { return __crc32cd(c, w); }
HW_TARGET static inline uint32_t step8(uint32_t c, unsigned char b) { return __crc32cb(c, b); }
#endif

/* Three lanes of `lane` bytes at a time while 3*lane bytes remain. */
HW_TARGET static inline uint32_t lanes3(uint32_t c, const unsigned char **pp, size_t *np,
					size_t lane, const uint32_t z1[4][256],
					const uint32_t z2[4][256])
{
	const unsigned char *p = *pp;
	size_t n = *np;
	while (n >= 3 * lane) {
		uint32_t c0 = c, c1 = 0, c2 = 0;
		const unsigned char *a = p, *b = p + lane, *e = p + 2 * lane;
		for (size_t i = 0; i < lane; i += 8) {
			c0 = step64(c0, load64le(a + i));
			c1 = step64(c1, load64le(b + i));
			c2 = step64(c2, load64le(e + i));
		}
		c = zeros(z2, c0) ^ zeros(z1, c1) ^ c2;
		p += 3 * lane;
		n -= 3 * lane;
	}
	*pp = p;
	*np = n;
	return c;
}

HW_TARGET static uint32_t raw_hw(uint32_t c, const unsigned char *p, size_t n)
{
	while (n && ((uintptr_t)p & 7)) {
		c = step8(c, *p++);
		n--;
	}
	c = lanes3(c, &p, &n, LANE_LONG, g_zeros[0], g_zeros[1]);
	c = lanes3(c, &p, &n, LANE_SHORT, g_zeros[2], g_zeros[3]);
	for (; n >= 8; n -= 8, p += 8)
		c = step64(c, load64le(p));
	while (n--)
		c = step8(c, *p++);
	return c;
}
#endif

static void setup(void)
{
	for (uint32_t b = 0; b < 256; b++) {
		uint32_t c = b;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
		g_tab[0][b] = c;
	}
	for (int k = 1; k < 8; k++)
		for (int b = 0; b < 256; b++)
			g_tab[k][b] = (g_tab[k - 1][b] >> 8) ^ g_tab[0][g_tab[k - 1][b] & 0xff];
	g_raw = raw_sw;
#ifdef HW_TARGET
	if (sky_cpu_get_features().crc32c) {
		make_zeros_table(g_zeros[0], LANE_LONG);
		make_zeros_table(g_zeros[1], 2 * LANE_LONG);
		make_zeros_table(g_zeros[2], LANE_SHORT);
		make_zeros_table(g_zeros[3], 2 * LANE_SHORT);
		g_raw = raw_hw;
	}
#endif
}

uint32_t sky_crc32c(uint32_t crc, const void *p, size_t n)
{
	sky_once(&g_once, setup);
	return n ? ~g_raw(~crc, p, n) : crc;
}

uint32_t sky_crc32c_sw(uint32_t crc, const void *p, size_t n)
{
	sky_once(&g_once, setup);
	return n ? ~raw_sw(~crc, p, n) : crc;
}

const char *sky_crc32c_impl(void)
{
	sky_once(&g_once, setup);
#ifdef HW_TARGET
	if (g_raw == raw_hw)
		return HW_NAME;
#endif
	return "slice8";
}
