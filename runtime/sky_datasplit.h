/* Splitting a prepared data set among data owners, for federated jobs and
 * their benchmarks: IID (rows dealt at random) or with label skew, each
 * label's rows divided among the owners in proportions drawn from a
 * symmetric Dirichlet(alpha) (Hsu, Qi and Brown 2019; small alpha: each
 * owner holds few labels, large alpha: close to IID).
 *
 * Deterministic from the seed: the generator is splitmix64 and the
 * Dirichlet's gammas come from Marsaglia and Tsang's method (libm's log,
 * exp and sqrt; one machine gives one split). A draw that leaves an owner
 * with fewer than min_rows rows is redrawn (the next draw of the same
 * stream), up to SKY_SPLIT_TRIES times.
 *
 * Thread safety: no state. */
#ifndef SKY_DATASPLIT_H
#define SKY_DATASPLIT_H

#include "sky_err.h"

#include <stdint.h>

#define SKY_SPLIT_MAX_OWNERS 1024
#define SKY_SPLIT_TRIES 100

/* owner_of[r] = the owner (0..owners-1) of row r, for rows rows with
 * labels in [0, nlabels). alpha <= 0: IID (rows shuffled, dealt in turn,
 * so owners differ by at most one row). Returns 0, SKY_EINVAL (owners
 * outside [1, SKY_SPLIT_MAX_OWNERS] or above rows, a label out of range,
 * alpha not finite) or SKY_ERANGE (no draw in SKY_SPLIT_TRIES gave every
 * owner min_rows rows: the message says the smallest share seen). */
int sky_ds_split(const int32_t *labels, int64_t rows, int nlabels, int owners, double alpha,
		 uint64_t seed, int64_t min_rows, int32_t *owner_of, sky_diag *d);

#endif
