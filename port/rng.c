#include "sky_rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void sky_rng_seed(sky_rng *r, uint64_t seed)
{
	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t sky_rng_u64(sky_rng *r)
{
	uint64_t *s = r->s;
	uint64_t out = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return out;
}

uint32_t sky_rng_below(sky_rng *r, uint32_t n)
{
	uint32_t limit = (uint32_t)(-n) % n; /* values below this are biased */
	for (;;) {
		uint32_t x = (uint32_t)(sky_rng_u64(r) >> 32);
		if (x >= limit)
			return x % n;
	}
}

float sky_rng_uniform(sky_rng *r) { return (float)(sky_rng_u64(r) >> 40) * (1.0f / 16777216.0f); }

float sky_rng_normal(sky_rng *r)
{
	/* u1 in (0,1] so log() is finite */
	double u1 = ((double)(sky_rng_u64(r) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
	double u2 = (double)(sky_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
	return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}
