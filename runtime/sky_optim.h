/* Optimizers on flat parameter vectors: SGD with momentum, and AdamW
 * (decoupled weight decay, bias correction), as torch.optim.SGD and
 * torch.optim.AdamW compute them. State lives in caller-provided vectors
 * (from the arena); nothing allocates. */
#ifndef SKY_OPTIM_H
#define SKY_OPTIM_H

#include <stddef.h>

typedef enum { SKY_OPTIM_SGD, SKY_OPTIM_ADAMW } sky_optim_kind;

typedef struct sky_optim_cfg {
	sky_optim_kind kind;
	float lr;
	float momentum;     /* SGD: mu (0: plain SGD) */
	float beta1, beta2; /* AdamW: 0.9, 0.999 */
	float eps;          /* AdamW: 1e-8 */
	float weight_decay; /* SGD: L2 added to the gradient; AdamW: decoupled */
} sky_optim_cfg;

/* Defaults: AdamW lr 1e-3, betas 0.9/0.999, eps 1e-8, wd 0; SGD lr 0.1,
 * momentum 0.9. */
void sky_optim_default(sky_optim_cfg *o, sky_optim_kind kind);
/* "sgd" or "adamw" -> kind; returns 0 or SKY_EINVAL. */
int sky_optim_parse(const char *name, sky_optim_kind *kind);
const char *sky_optim_name(sky_optim_kind kind);
/* State vectors the optimizer needs per parameter: SGD 1 (velocity),
 * AdamW 2 (m, v). */
int sky_optim_state_vectors(sky_optim_kind kind);

/* torch.optim.SGD: g' = g + wd w; v = mu v + g'; w -= lr v (v starts 0). */
void sky_optim_sgd_step(const sky_optim_cfg *o, float *w, const float *g, float *v, size_t n);
/* torch.optim.AdamW, step t >= 1:
 *   w -= lr wd w; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 *   w -= lr (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps). */
void sky_optim_adamw_step(const sky_optim_cfg *o, float *w, const float *g, float *m, float *v,
			  size_t n, long t);
/* Dispatch on o->kind; state holds sky_optim_state_vectors() vectors of n
 * floats back to back. t is the 1-based step number. */
void sky_optim_step(const sky_optim_cfg *o, float *w, const float *g, float *state, size_t n,
		    long t);

/* Scales g so its L2 norm is at most max_norm (if max_norm > 0); returns
 * the norm before scaling (as torch.nn.utils.clip_grad_norm_). */
float sky_optim_clip(float *g, size_t n, float max_norm);

#endif
