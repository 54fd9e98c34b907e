/* SGD with momentum and AdamW on flat vectors (see sky_optim.h). Each is
 * one pass over memory; the arithmetic matches torch's formulas so results
 * can be compared with it. */
#include "sky_optim.h"

#include "sky_err.h"

#include <math.h>
#include <string.h>
#if defined(__AVX512F__) && defined(__FMA__)
#include <immintrin.h>
#endif

void sky_optim_default(sky_optim_cfg *o, sky_optim_kind kind)
{
	memset(o, 0, sizeof *o);
	o->kind = kind;
	o->lr = kind == SKY_OPTIM_SGD ? 0.1f : 1e-3f;
	o->momentum = 0.9f;
	o->beta1 = 0.9f;
	o->beta2 = 0.999f;
	o->eps = 1e-8f;
	o->weight_decay = 0.0f;
}

int sky_optim_parse(const char *name, sky_optim_kind *kind)
{
	if (name && strcmp(name, "sgd") == 0)
		*kind = SKY_OPTIM_SGD;
	else if (name && strcmp(name, "adamw") == 0)
		*kind = SKY_OPTIM_ADAMW;
	else
		return SKY_EINVAL;
	return 0;
}

const char *sky_optim_name(sky_optim_kind kind) { return kind == SKY_OPTIM_SGD ? "sgd" : "adamw"; }

int sky_optim_state_vectors(sky_optim_kind kind) { return kind == SKY_OPTIM_SGD ? 1 : 2; }

void sky_optim_sgd_step(const sky_optim_cfg *o, float *w, const float *g, float *v, size_t n)
{
	const float lr = o->lr, mu = o->momentum, wd = o->weight_decay;
	for (size_t i = 0; i < n; i++) {
		float gi = g[i] + wd * w[i];
		v[i] = mu * v[i] + gi;
		w[i] -= lr * v[i];
	}
}

void sky_optim_adamw_step(const sky_optim_cfg *o, float *w, const float *g, float *m, float *v,
			  size_t n, long t)
{
	const float b1 = o->beta1, b2 = o->beta2, lr = o->lr, eps = o->eps;
	/* bias corrections in double: 1 - 0.999^t loses digits in float */
	const float c1 = (float)(1.0 - pow(b1, (double)t));
	const float c2 = (float)sqrt(1.0 - pow(b2, (double)t));
	const float decay = 1.0f - lr * o->weight_decay;
	const float step = lr / c1;
	size_t i = 0;
#if defined(__AVX512F__) && defined(__FMA__)
	/* ~7% of a BERT-base fine-tuning step is this loop (110M parameters,
	 * sqrt and divide each): 16 lanes at a time. Every lane does the
	 * scalar loop's operations in its order, fused where the compiler
	 * fuses the scalar loop below (-ffp-contract=fast with FMA: m and v
	 * each one fused multiply-add), so the bits are the same
	 * (tests/runtime/test_optim.c compares the two). */
	const __m512 vb1 = _mm512_set1_ps(b1), vb2 = _mm512_set1_ps(b2);
	const __m512 va1 = _mm512_set1_ps(1.0f - b1), va2 = _mm512_set1_ps(1.0f - b2);
	const __m512 vdecay = _mm512_set1_ps(decay), vstep = _mm512_set1_ps(step);
	const __m512 vc2 = _mm512_set1_ps(c2), veps = _mm512_set1_ps(eps);
	for (; i + 16 <= n; i += 16) {
		__m512 gi = _mm512_loadu_ps(g + i);
		__m512 mi = _mm512_fmadd_ps(vb1, _mm512_loadu_ps(m + i), _mm512_mul_ps(va1, gi));
		__m512 vi = _mm512_fmadd_ps(vb2, _mm512_loadu_ps(v + i),
					    _mm512_mul_ps(_mm512_mul_ps(va2, gi), gi));
		_mm512_storeu_ps(m + i, mi);
		_mm512_storeu_ps(v + i, vi);
		__m512 den = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(vi), vc2), veps);
		__m512 upd = _mm512_div_ps(_mm512_mul_ps(vstep, mi), den);
		__m512 wd = _mm512_mul_ps(_mm512_loadu_ps(w + i), vdecay);
		/* the scalar loop rounds w * decay before subtracting (its sqrtf
		 * errno branch keeps the two apart): keep the compiler from
		 * fusing them here */
		__asm__("" : "+v"(wd));
		_mm512_storeu_ps(w + i, _mm512_sub_ps(wd, upd));
	}
#endif
	for (; i < n; i++) {
		float gi = g[i];
		m[i] = b1 * m[i] + (1.0f - b1) * gi;
		v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
		w[i] = w[i] * decay - step * m[i] / (sqrtf(v[i]) / c2 + eps);
	}
}

void sky_optim_step(const sky_optim_cfg *o, float *w, const float *g, float *state, size_t n,
		    long t)
{
	if (o->kind == SKY_OPTIM_SGD)
		sky_optim_sgd_step(o, w, g, state, n);
	else
		sky_optim_adamw_step(o, w, g, state, state + n, n, t);
}

float sky_optim_clip(float *g, size_t n, float max_norm)
{
	double s = 0;
	for (size_t i = 0; i < n; i++)
		s += (double)g[i] * g[i];
	float norm = (float)sqrt(s);
	if (max_norm > 0 && norm > max_norm) {
		/* torch adds 1e-6 to the norm before dividing */
		float k = max_norm / (norm + 1e-6f);
		for (size_t i = 0; i < n; i++)
			g[i] *= k;
	}
	return norm;
}

double sky_optim_sumsq(const float *g, size_t n)
{
	double s = 0;
	for (size_t i = 0; i < n; i++)
		s += (double)g[i] * g[i];
	return s;
}

float sky_optim_norm(const double *block_sumsq, int n_blocks)
{
	double s = 0;
	for (int i = 0; i < n_blocks; i++)
		s += block_sumsq[i];
	return (float)sqrt(s);
}

void sky_optim_clip_scale(float *g, size_t n, float norm, float max_norm)
{
	if (max_norm > 0 && norm > max_norm) {
		float k = max_norm / (norm + 1e-6f);
		for (size_t i = 0; i < n; i++)
			g[i] *= k;
	}
}

float sky_optim_lr_at(float lr, long s, long steps, long warmup)
{
	if (s < warmup)
		return lr * (float)(s + 1) / (float)warmup;
	return lr * (float)(steps - s) / (float)(steps - warmup);
}
