/* The rows each training step reads (sky_trainorder.h). */
#include "sky_trainorder.h"

#include "sky_err.h"
#include "sky_rng.h"

#include <string.h>

void sky_trainorder_perm(uint32_t *perm, int64_t rows, uint64_t seed, long epoch)
{
	sky_rng r;
	sky_rng_seed(&r, seed * 0x9e3779b97f4a7c15ull + (uint64_t)epoch + 1);
	for (int64_t i = 0; i < rows; i++)
		perm[i] = (uint32_t)i;
	for (int64_t i = rows - 1; i > 0; i--) {
		uint32_t j = sky_rng_below(&r, (uint32_t)(i + 1));
		uint32_t t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
}

int sky_trainorder_init(sky_trainorder *o, int64_t rows, uint64_t seed, int batch, int micro,
			uint32_t *perm)
{
	memset(o, 0, sizeof *o);
	if (batch < 1 || micro < 1 || rows > 0xffffffffll || !perm)
		return SKY_EINVAL;
	o->rows = rows;
	o->seed = seed;
	o->batch = batch;
	o->micro = micro;
	o->spe = rows / ((int64_t)batch * micro);
	o->epoch = -1;
	o->perm = perm;
	return o->spe < 1 ? SKY_EINVAL : 0;
}

const uint32_t *sky_trainorder_rows(sky_trainorder *o, long s, int i)
{
	long e = sky_trainorder_epoch(o, s);
	if (e != o->epoch) {
		sky_trainorder_perm(o->perm, o->rows, o->seed, e);
		o->epoch = e;
	}
	int64_t k = s % o->spe;
	return o->perm + (k * o->micro + i) * (int64_t)o->batch;
}

void sky_trainorder_take(const sky_dataset *ds, const uint32_t *rows, int batch, int32_t *ids,
			 int32_t *types, int32_t *attn, int32_t *labels)
{
	const size_t S = (size_t)ds->meta.seq;
	for (int k = 0; k < batch; k++) {
		size_t r = rows[k];
		if (ids)
			memcpy(ids + (size_t)k * S, ds->input_ids + r * S, S * 4);
		if (types)
			memcpy(types + (size_t)k * S, ds->token_type_ids + r * S, S * 4);
		if (attn)
			memcpy(attn + (size_t)k * S, ds->attention_mask + r * S, S * 4);
		if (labels)
			labels[k] = ds->labels[r];
	}
}
