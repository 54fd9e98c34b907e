/* A synthetic sequence-classification task for training on a board
 * without a data set: deterministic from a seed, learnable by a small
 * BERT only through attention, and padded so that the attention mask
 * matters.
 *
 * "Which is more frequent, A or B?"  Token ids: 0 [PAD] (not used, see
 * below), 1 [CLS], 2 = A, 3 = B, 4.. filler. Each sequence is [CLS]
 * followed by n-1 real tokens, n uniform in [S/4, S] (at least 3):
 * filler with cA copies of A and cB copies of B (cA != cB, each uniform
 * in [0, (n-1)/2]) at random places. The label is 1 when cA > cB, else 0,
 * so the classes are balanced. Answering needs the [CLS] position to
 * gather counts from the whole sequence (attention), not from a fixed
 * position.
 *
 * The S-n padding positions have attention mask 0 and hold random A and B
 * tokens: a model sees them only if the mask is ignored, and then its
 * counts are wrong. (Real pipelines put [PAD] there; these make a broken
 * mask visible in the accuracy.)
 *
 * Splits: 0 train, 1 held-out; batch i of a split is generated from
 * (seed, split, i), so any batch can be regenerated alone and the splits
 * are independent streams. */
#ifndef SKY_TASK_H
#define SKY_TASK_H

#include "sky_model.h"

#include <stdint.h>

enum { SKY_TASK_TRAIN = 0, SKY_TASK_HELDOUT = 1 };
enum {
	SKY_TASK_PAD = 0,
	SKY_TASK_CLS = 1,
	SKY_TASK_A = 2,
	SKY_TASK_B = 3,
	SKY_TASK_FIRST_FILLER = 4
};

/* Checks the model can hold the task: vocab >= 8, seq >= 4, classes >= 2.
 * Returns 0 or SKY_EINVAL (logged). */
int sky_task_check(const sky_model_cfg *c);

/* Fills one micro-batch (c->batch sequences of c->seq tokens): ids, types
 * (all 0), attn (1 real token, 0 padding) of B*S each, labels of B.
 * Returns 0 or SKY_EINVAL (sky_task_check). */
int sky_task_batch(const sky_model_cfg *c, uint64_t seed, int split, uint64_t index,
		   int32_t *ids, int32_t *types, int32_t *attn, int32_t *labels);

#endif
