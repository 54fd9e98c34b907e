/* Position-keyed dropout masks; see sky_dropout.h. */
#include "sky_dropout.h"

#define GOLDEN 0x9e3779b97f4a7c15ull

static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

uint64_t sky_dropout_key(uint64_t seed, uint64_t step, uint32_t micro)
{
	return mix64(mix64(mix64(seed ^ 0x64726f706f7574ull /* "dropout" */) + step) + micro);
}

const sky_dropout *sky_dropout_make(sky_dropout *out, const sky_model_cfg *c, uint64_t seed,
				    uint64_t step, uint32_t micro)
{
	if (!out || !c || (!(c->hidden_drop > 0) && !(c->attn_drop > 0)))
		return NULL;
	out->key = sky_dropout_key(seed, step, micro);
	out->hidden = c->hidden_drop > 0 ? c->hidden_drop : 0;
	out->attn = c->attn_drop > 0 ? c->attn_drop : 0;
	return out;
}

/* The Weyl sequence's start for one site of one layer. */
static uint64_t site_key(const sky_dropout *d, int layer, int site)
{
	return mix64(d->key + ((uint64_t)(uint32_t)(layer + 1) << 8 | (uint64_t)(uint8_t)site));
}

/* keep when the top 32 bits reach p's threshold: P(keep) = 1 - p to 2^-32 */
static uint64_t threshold(float p) { return (uint64_t)((double)p * 4294967296.0); }

int sky_dropout_keep(const sky_dropout *d, float p, int layer, int site, uint64_t i)
{
	if (!d || !(p > 0))
		return 1;
	return (mix64(site_key(d, layer, site) + (i + 1) * GOLDEN) >> 32) >= threshold(p);
}

void sky_dropout_apply(const sky_dropout *d, float p, int layer, int site, uint64_t base,
		       float *x, size_t n)
{
	if (!d || !(p > 0))
		return;
	const uint64_t k = site_key(d, layer, site), t = threshold(p);
	const float scale = 1.0f / (1.0f - p);
	uint64_t w = k + (base + 1) * GOLDEN;
	for (size_t i = 0; i < n; i++, w += GOLDEN)
		x[i] = (mix64(w) >> 32) >= t ? x[i] * scale : 0.0f;
}
