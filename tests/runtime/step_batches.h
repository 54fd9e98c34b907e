/* The micro-batches of a training step as a board's task makes them, for
 * the tests that train a model on one board as a reference
 * (tests/runtime/step_batches.c). */
#ifndef SKY_TEST_STEP_BATCHES_H
#define SKY_TEST_STEP_BATCHES_H

#include "sky_bert.h"

#include <stdint.h>

/* Fills mb[0..micro) with step s's micro-batches (task batches
 * s * micro + i of seed) in ids, types, attn (micro x tokens each) and
 * labels (micro x batch). */
void step_batches(const sky_model_cfg *c, uint64_t seed, long s, int micro, int32_t *ids,
		  int32_t *types, int32_t *attn, int32_t *labels, sky_bert_batch *mb);

#endif
