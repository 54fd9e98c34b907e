/* A seedable, deterministic random number generator (xoshiro256**, seeded
 * through splitmix64). The same seed gives the same numbers on every
 * machine, so initial weights and synthetic data are reproducible. */
#ifndef SKY_RNG_H
#define SKY_RNG_H

#include <stdint.h>

typedef struct sky_rng {
	uint64_t s[4];
} sky_rng;

void sky_rng_seed(sky_rng *r, uint64_t seed);
uint64_t sky_rng_u64(sky_rng *r);
/* Uniform integer in [0, n); n > 0. Unbiased (rejection sampling). */
uint32_t sky_rng_below(sky_rng *r, uint32_t n);
/* Uniform float in [0, 1), 24 random bits. */
float sky_rng_uniform(sky_rng *r);
/* Standard normal (Box-Muller on doubles); bit-identical across machines
 * that implement IEEE double log/sqrt/cos correctly rounded enough. */
float sky_rng_normal(sky_rng *r);

#endif
