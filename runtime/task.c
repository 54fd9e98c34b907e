/* The "A or B more frequent" task (see sky_task.h). */
#include "sky_task.h"

#include "sky_err.h"
#include "sky_log.h"
#include "sky_rng.h"

int sky_task_check(const sky_model_cfg *c)
{
	if (c->vocab < 8 || c->seq < 4 || c->classes < 2) {
		SKY_ERROR("task: model %s needs vocab >= 8, seq >= 4 and classes >= 2 "
			  "(has %d, %d, %d)",
			  c->name, c->vocab, c->seq, c->classes);
		return SKY_EINVAL;
	}
	return 0;
}

/* splitmix64 of the three coordinates: a different stream per batch */
static uint64_t mix(uint64_t seed, int split, uint64_t index)
{
	uint64_t z = seed * 0x9E3779B97F4A7C15ull + (uint64_t)split * 0xBF58476D1CE4E5B9ull +
		     index * 0x94D049BB133111EBull;
	z ^= z >> 31;
	z *= 0xD6E8FEB86659FD93ull;
	return z ^ (z >> 29);
}

int sky_task_batch(const sky_model_cfg *c, uint64_t seed, int split, uint64_t index,
		   int32_t *ids, int32_t *types, int32_t *attn, int32_t *labels)
{
	int rc = sky_task_check(c);
	if (rc)
		return rc;
	const int S = c->seq;
	const uint32_t fillers = (uint32_t)(c->vocab - SKY_TASK_FIRST_FILLER);
	sky_rng r;
	sky_rng_seed(&r, mix(seed, split, index));
	for (int b = 0; b < c->batch; b++) {
		int32_t *id = ids + (size_t)b * S, *at = attn + (size_t)b * S;
		int n = S / 4 + (int)sky_rng_below(&r, (uint32_t)(S - S / 4 + 1)); /* [S/4, S] */
		if (n < 3)
			n = 3;
		int m = (n - 1) / 2; /* at most m of each, so both fit */
		uint32_t ca, cb;
		do {
			ca = sky_rng_below(&r, (uint32_t)m + 1);
			cb = sky_rng_below(&r, (uint32_t)m + 1);
		} while (ca == cb);
		id[0] = SKY_TASK_CLS;
		for (int s = 1; s < n; s++)
			id[s] = SKY_TASK_FIRST_FILLER + (int32_t)sky_rng_below(&r, fillers);
		/* A and B at distinct random places among 1..n-1: pick a place
		 * still holding filler each time */
		for (uint32_t k = 0; k < ca + cb; k++) {
			int s;
			do
				s = 1 + (int)sky_rng_below(&r, (uint32_t)(n - 1));
			while (id[s] < SKY_TASK_FIRST_FILLER);
			id[s] = k < ca ? SKY_TASK_A : SKY_TASK_B;
		}
		for (int s = 0; s < S; s++)
			at[s] = s < n;
		/* padding: random A and B tokens that only the mask hides */
		for (int s = n; s < S; s++)
			id[s] = SKY_TASK_A + (int32_t)sky_rng_below(&r, 2);
		for (int s = 0; s < S; s++)
			types[(size_t)b * S + s] = 0;
		labels[b] = ca > cb;
	}
	return 0;
}
