/* Which rows of a data set each training step reads: the one rule that
 * sky train --data on one board and every board of a fleet job follow, so
 * both read the same rows in the same order and give the same bits.
 *
 * Epoch e visits the set in its own order, a Fisher-Yates permutation drawn
 * from (seed, e). A step takes batch x micro consecutive rows of that order;
 * the rows left over after an epoch's last whole step are not read in that
 * epoch (a DataLoader's drop_last). Step s (from 0) is step s % spe of epoch
 * s / spe, spe = rows / (batch x micro). */
#ifndef SKY_TRAINORDER_H
#define SKY_TRAINORDER_H

#include "sky_dataset.h"

#include <stdint.h>

typedef struct sky_trainorder {
	int64_t rows;
	uint64_t seed;
	int batch, micro;
	int64_t spe;    /* steps per epoch */
	long epoch;     /* the epoch perm holds, -1 before the first */
	uint32_t *perm; /* (rows), the caller's */
} sky_trainorder;

/* Fisher-Yates permutation of 0..rows-1 from (seed, epoch) into perm. */
void sky_trainorder_perm(uint32_t *perm, int64_t rows, uint64_t seed, long epoch);

/* Sets o up for a set of rows rows, batch x micro rows a step, perm a
 * caller's buffer of rows entries. Returns 0, or SKY_EINVAL (batch or micro
 * below 1, rows over 2^32 - 1, or fewer rows than one step). */
int sky_trainorder_init(sky_trainorder *o, int64_t rows, uint64_t seed, int batch, int micro,
			uint32_t *perm);

/* The batch row indices of micro-batch i of step s (redraws perm when s is
 * in another epoch than the last call's). */
const uint32_t *sky_trainorder_rows(sky_trainorder *o, long s, int i);

/* The epoch step s is in (from 0). */
static inline long sky_trainorder_epoch(const sky_trainorder *o, long s)
{
	return (long)(s / o->spe);
}

/* Copies the rows of one micro-batch of ds into its buffers (batch x seq
 * ids, types and mask, batch labels); any pointer may be NULL to skip it (a
 * stage that does not need the labels, one that needs only them). */
void sky_trainorder_take(const sky_dataset *ds, const uint32_t *rows, int batch, int32_t *ids,
			 int32_t *types, int32_t *attn, int32_t *labels);

#endif
