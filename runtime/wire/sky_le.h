/* Little-endian integers in byte buffers: every binary format on the wire
 * (frame headers, slice chunks, the serving payload) is little-endian, so
 * it reads the same on x86 and Arm boards whatever the host's order. */
#ifndef SKY_LE_H
#define SKY_LE_H

#include <stdint.h>

static inline void sky_le_put16(unsigned char *p, uint16_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
}

static inline void sky_le_put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static inline void sky_le_put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static inline uint16_t sky_le_get16(const unsigned char *p)
{
	return (uint16_t)(p[0] | (unsigned)p[1] << 8);
}

static inline uint32_t sky_le_get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t sky_le_get64(const unsigned char *p)
{
	return (uint64_t)sky_le_get32(p) | (uint64_t)sky_le_get32(p + 4) << 32;
}

#endif
