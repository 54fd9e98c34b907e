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


/* Global-norm clipping split into parts that several boards can share
 * bit for bit: each block's squared sum (sky_optim_sumsq, in double, one
 * pass in index order), the norm from every block's sum added in block
 * order (sky_optim_norm), and the scaling (sky_optim_clip_scale: g *=
 * max_norm / (norm + 1e-6) when norm > max_norm > 0, as torch does). One
 * board (sky_bert) and a pipeline of stages both clip this way, with the
 * blocks embeddings, then each half-layer in order, then the head. */
double sky_optim_sumsq(const float *g, size_t n);
float sky_optim_norm(const double *block_sumsq, int n_blocks);
void sky_optim_clip_scale(float *g, size_t n, float norm, float max_norm);

/* The learning rate of step s (0-based) of steps: linear warm-up over
 * warmup steps to lr, then linear decay to 0, as BERT fine-tuning does
 * (and as `sky train` and every stage of a fleet compute it, in float). */
float sky_optim_lr_at(float lr, long s, long steps, long warmup);

#endif
