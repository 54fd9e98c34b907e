/* Shared by the pipeline tests (test_transport, test_trainjob): one step's
 * micro-batches for the one-board reference. */
#include "step_batches.h"

#include "sky_task.h"

void step_batches(const sky_model_cfg *c, uint64_t seed, long s, int micro, int32_t *ids,
		  int32_t *types, int32_t *attn, int32_t *labels, sky_bert_batch *mb)
{
	const size_t T = (size_t)sky_model_tokens(c);
	for (int i = 0; i < micro; i++) {
		sky_task_batch(c, seed, SKY_TASK_TRAIN, (uint64_t)(s * micro + i), ids + i * T,
			       types + i * T, attn + i * T, labels + i * c->batch);
		mb[i] = (sky_bert_batch){ids + i * T, types + i * T, attn + i * T, labels + i * c->batch};
	}
}
