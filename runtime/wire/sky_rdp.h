/* The privacy a federated job has spent: a Rényi differential privacy
 * (RDP) accountant for the sampled Gaussian mechanism.
 *
 * Each round of a job with --dp-clip C --dp-noise Z samples each owner
 * with probability q (the round's fraction), clips each sampled owner's
 * update to norm C, adds them with weight 1 and adds Gaussian noise of
 * deviation Z*C to the sum. One round is then the sampled Gaussian
 * mechanism with noise multiplier Z; its RDP at integer order a >= 2 is
 * (Mironov, Talwar and Zhang, "Rényi Differential Privacy of the Sampled
 * Gaussian Mechanism", 2019, section 3.3)
 *
 *   eps_a = log( sum_{k=0..a} C(a,k) (1-q)^(a-k) q^k exp((k^2 - k) / (2 Z^2)) ) / (a - 1)
 *
 * summed in log space (every term is positive, so nothing cancels). RDP
 * composes by adding: R rounds cost R * eps_a at every order. The (eps,
 * delta) reported is the best over the orders of the conversion of Balle
 * et al. ("Hypothesis testing interpretations and Rényi differential
 * privacy", 2020, theorem 21)
 *
 *   eps = rdp_a + log((a - 1) / a) - (log delta + log a) / (a - 1)
 *
 * which is never above the classic rdp_a + log(1/delta) / (a - 1).
 * Only integer orders 2..SKY_RDP_MAX_ORDER are used: the bound is valid,
 * and a little looser than one that also searches fractional orders.
 *
 * With q = 1 the sum collapses to exp((a^2 - a) / (2 Z^2)) and eps_a =
 * a / (2 Z^2), the Gaussian mechanism's exact RDP; the tests check that
 * and an independent high-precision reference (tools/golden/rdp_ref.py).
 *
 * Thread safety: no state beyond the caller's sky_rdp. */
#ifndef SKY_RDP_H
#define SKY_RDP_H

#include "sky_err.h"

#include <stdint.h>

#define SKY_RDP_MIN_ORDER 2
#define SKY_RDP_MAX_ORDER 256
#define SKY_RDP_NORDERS (SKY_RDP_MAX_ORDER - SKY_RDP_MIN_ORDER + 1)

/* The RDP spent so far, per order. Zero-initialise, or sky_rdp_init. */
typedef struct sky_rdp {
	double rdp[SKY_RDP_NORDERS]; /* rdp[i] at order SKY_RDP_MIN_ORDER + i */
	uint64_t rounds;
} sky_rdp;

void sky_rdp_init(sky_rdp *a);

/* The RDP at integer order `order` of one sampled Gaussian step with
 * sampling rate q in (0, 1] and noise multiplier z > 0. Returns 0 with
 * *out, or SKY_EINVAL naming the bad argument. */
int sky_rdp_sgm(double q, double z, int order, double *out, sky_diag *d);

/* Adds `rounds` rounds of the sampled Gaussian mechanism (q, z).
 * Returns 0 or SKY_EINVAL (q outside (0, 1], z not finite and > 0,
 * rounds 0); a is unchanged then. */
int sky_rdp_add(sky_rdp *a, double q, double z, uint64_t rounds, sky_diag *d);

/* The smallest epsilon over the orders at which everything added so far
 * is (epsilon, delta)-DP, with the order that gives it in *order (may be
 * NULL). delta in (0, 1). Nothing added: epsilon 0. Returns 0 or
 * SKY_EINVAL. */
int sky_rdp_epsilon(const sky_rdp *a, double delta, double *epsilon, int *order, sky_diag *d);

#endif
