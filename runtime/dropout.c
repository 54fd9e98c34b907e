/* Position-keyed dropout masks; see sky_dropout.h. */
#include "sky_dropout.h"

#if defined(__AVX512F__) && defined(__AVX512DQ__)
#include <immintrin.h>
#endif

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
	size_t i = 0;
#if defined(__AVX512F__) && defined(__AVX512DQ__)
	/* the attention probabilities of every layer pass here twice a step
	 * (B x heads x S x S each): 16 elements at a time, the same integer
	 * hash per lane and the same one multiply, so the same bits */
	const __m512i lanes = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
	const __m512i g = _mm512_set1_epi64((long long)GOLDEN);
	const __m512i g8 = _mm512_set1_epi64((long long)(8 * GOLDEN));
	const __m512i g16 = _mm512_set1_epi64((long long)(16 * GOLDEN));
	const __m512i c1 = _mm512_set1_epi64((long long)0xbf58476d1ce4e5b9ull);
	const __m512i c2 = _mm512_set1_epi64((long long)0x94d049bb133111ebull);
	const __m512i vt = _mm512_set1_epi64((long long)t);
	const __m512 vs = _mm512_set1_ps(scale);
	__m512i wv = _mm512_add_epi64(_mm512_set1_epi64((long long)w), _mm512_mullo_epi64(lanes, g));
	for (; i + 16 <= n; i += 16) {
		__m512i z[2] = {wv, _mm512_add_epi64(wv, g8)};
		__mmask8 keep[2];
		for (int h = 0; h < 2; h++) {
			__m512i y = z[h];
			y = _mm512_mullo_epi64(_mm512_xor_si512(y, _mm512_srli_epi64(y, 30)), c1);
			y = _mm512_mullo_epi64(_mm512_xor_si512(y, _mm512_srli_epi64(y, 27)), c2);
			y = _mm512_xor_si512(y, _mm512_srli_epi64(y, 31));
			keep[h] = _mm512_cmpge_epu64_mask(_mm512_srli_epi64(y, 32), vt);
		}
		__mmask16 m = (__mmask16)(keep[0] | (unsigned)keep[1] << 8);
		_mm512_storeu_ps(x + i, _mm512_maskz_mul_ps(m, _mm512_loadu_ps(x + i), vs));
		wv = _mm512_add_epi64(wv, g16);
	}
	w += (uint64_t)i * GOLDEN;
#endif
	for (; i < n; i++, w += GOLDEN)
		x[i] = (mix64(w) >> 32) >= t ? x[i] * scale : 0.0f;
}
