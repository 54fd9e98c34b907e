/* What a federated round does with the owners' updates once they are
 * summed (sky_fedsum.h): the server's optimizer step on the global model,
 * FedProx's proximal term on an owner's gradients, and the clipping and
 * Gaussian noise of differential privacy (sky_rdp.h accounts for it).
 *
 * The aggregate is the weighted mean of the owners' weights after the
 * round's local steps (FedAvg's weights: sample counts; with DP every owner
 * weighs 1), summed exactly in fixed point. Its difference from the round's
 * global weights w, delta = mean - w, is the round's update (for secure
 * aggregation, masking the weights hides the same as masking the update:
 * w is public). The server then moves the global weights:
 *
 *   avg   w  = mean when lr is 1 (FedAvg, McMahan et al. 2017: the mean
 *              itself, not w + (mean - w), which can differ in the last
 *              bit); w += lr * delta otherwise
 *   avgm  m  = beta * m + delta; w += lr * m      (Hsu et al. 2019, FedAvgM)
 *   adam  m  = b1 * m + (1 - b1) * delta
 *         v  = b2 * v + (1 - b2) * delta^2
 *         w += lr * m / (sqrt(v) + tau)          (Reddi et al. 2021, FedAdam; no bias
 *                                                correction, as there)
 *
 * A round with one owner: its weights are the mean (the aggregator takes
 * them as they are, not through fixed point), so with FedAvg a one-owner
 * federated job ends with what ordinary fine-tuning gives, bit for bit.
 *
 * Every element is computed in float, one operation at a time in this
 * order, with contraction into fused multiply-adds off in fedopt.c, so the
 * global model has the same bits on x86-64 and AArch64 (test_fedopt checks
 * a hash that make check recomputes under qemu).
 *
 * Memory: the caller's. The server's state is m (avgm, adam) and v (adam),
 * n floats each; sky_fedopt_state_floats says how many to give.
 *
 * Thread safety: none needed; no globals. */
#ifndef SKY_FEDOPT_H
#define SKY_FEDOPT_H

#include "sky_err.h"

#include <stddef.h>
#include <stdint.h>

typedef enum sky_fedopt_kind {
	SKY_FEDOPT_AVG = 0,
	SKY_FEDOPT_AVGM,
	SKY_FEDOPT_ADAM,
} sky_fedopt_kind;

typedef struct sky_fedopt_opts {
	sky_fedopt_kind kind;
	float lr;	/* server learning rate; FedAvg is avg with 1 */
	float beta;	/* avgm's momentum, [0, 1) */
	float b1, b2;	/* adam's, [0, 1) */
	float tau;	/* adam's adaptivity, > 0 */
} sky_fedopt_opts;

/* avg, lr 1; avgm beta 0.9; adam b1 0.9, b2 0.99, tau 1e-3, lr 0.01
 * (Reddi et al.'s grid centre). */
sky_fedopt_opts sky_fedopt_defaults(sky_fedopt_kind kind);

/* "avg", "avgm", "adam"; NULL for an unknown kind. */
const char *sky_fedopt_name(sky_fedopt_kind kind);
/* The kind named name (as above); SKY_EINVAL naming it otherwise. */
int sky_fedopt_parse(const char *name, sky_fedopt_kind *out, sky_diag *d);

typedef struct sky_fedopt {
	sky_fedopt_opts o;
	size_t n;
	float *m, *v; /* the caller's, n floats each when the kind needs it */
	uint64_t rounds;
} sky_fedopt;

/* Floats of state per model float: 0 (avg), 1 (avgm), 2 (adam). */
int sky_fedopt_state_floats(sky_fedopt_kind kind);

/* Checks the options and zeroes the state. state holds
 * sky_fedopt_state_floats(kind) * n floats (may be NULL for avg).
 * Returns 0 or SKY_EINVAL naming the option. */
int sky_fedopt_init(sky_fedopt *s, const sky_fedopt_opts *o, size_t n, float *state, sky_diag *d);

/* One round: w[0..n) (the round's global weights) moved by the aggregate
 * mean[0..n) of the owners' weights. Returns 0 or
 * SKY_EINVAL (a non-finite element of mean, named by index; w untouched
 * then). */
int sky_fedopt_step(sky_fedopt *s, float *w, const float *mean, sky_diag *d);

/* The round's aggregate: out[0..n) = the mean of nown owners' weights
 * x[k][0..n), owner k weighing w[k] (its sample count), each element
 * clipped to +-clip and summed exactly in fixed point (sky_fedsum.h), in
 * any owner order the same bits. One owner: its weights as they are.
 * scratch holds 2n words. Returns 0, SKY_EINVAL (no owner, a weight of 0
 * or above SKY_FX_MAX_WEIGHT, a non-finite element) or SKY_ERANGE (the
 * clip and weights leave too few fraction bits). */
int sky_fedavg_mean(const float *const *x, const uint32_t *w, size_t nown, size_t n, float clip,
		    float *out, uint64_t *scratch, sky_diag *d);

/* FedProx: g[i] += mu * (w[i] - w0[i]), the gradient of (mu / 2) * |w -
 * w0|^2, added to an owner's gradients each local step (w0 the round's
 * global weights). mu >= 0 and finite. */
int sky_fedprox_add(float *g, const float *w, const float *w0, size_t n, float mu, sky_diag *d);

/* Differential privacy, on one owner's update x[0..n): scales it to L2
 * norm at most clip (computed in double, in index order) and writes the
 * norm it had into *norm (may be NULL). After it the norm, computed the
 * same way, is <= clip. Returns 0, or SKY_EINVAL (clip not finite and > 0,
 * a non-finite element). */
int sky_dp_clip(float *x, size_t n, float clip, double *norm, sky_diag *d);

/* Adds independent Gaussian noise of deviation stddev to x[0..n): the
 * normals come from ChaCha20 keyed by seed (32 bytes the aggregator draws
 * from its entropy source each job and keeps) at counter round, by the
 * Box-Muller transform, element i from words 2i and 2i+1 of the stream.
 * The same seed and round give the same noise on one machine (libm's log
 * and cos may round differently elsewhere, which the guarantee does not
 * need). Returns 0 or SKY_EINVAL (stddev negative or not finite). */
int sky_dp_noise(float *x, size_t n, double stddev, const unsigned char seed[32], uint64_t round,
		 sky_diag *d);

#endif
