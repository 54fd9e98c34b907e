/* The synthetic task: deterministic, labels that match a recount of the
 * tokens, balanced classes, padding masked, independent splits. */
#include "sky_test.h"

#include "sky_err.h"
#include "sky_task.h"

#include <string.h>

SKY_TEST(task_batches_are_deterministic_and_correct)
{
	sky_model_cfg c;
	SKY_EXPECT_EQ(sky_model_preset("tiny", &c), 0);
	c.batch = 64;
	static int32_t ids[64 * 16], types[64 * 16], attn[64 * 16], labels[64];
	static int32_t ids2[64 * 16], types2[64 * 16], attn2[64 * 16], labels2[64];
	long ones = 0, total = 0, padded = 0;
	for (uint64_t i = 0; i < 20; i++) {
		SKY_EXPECT_EQ(sky_task_batch(&c, 7, SKY_TASK_TRAIN, i, ids, types, attn, labels), 0);
		SKY_EXPECT_EQ(sky_task_batch(&c, 7, SKY_TASK_TRAIN, i, ids2, types2, attn2, labels2), 0);
		SKY_EXPECT(memcmp(ids, ids2, sizeof ids) == 0 && memcmp(labels, labels2, sizeof labels) == 0);
		SKY_EXPECT(memcmp(attn, attn2, sizeof attn) == 0);
		for (int b = 0; b < c.batch; b++) {
			const int32_t *id = ids + b * 16, *at = attn + b * 16;
			int ca = 0, cb = 0, n = 0;
			SKY_EXPECT_EQ(id[0], SKY_TASK_CLS);
			for (int s = 0; s < 16; s++) {
				SKY_EXPECT(id[s] >= 0 && id[s] < c.vocab);
				SKY_EXPECT_EQ(types[b * 16 + s], 0);
				if (at[s]) {
					SKY_EXPECT_EQ(n, s); /* real tokens first, then padding */
					n++;
					ca += id[s] == SKY_TASK_A;
					cb += id[s] == SKY_TASK_B;
				} else {
					/* padding holds A or B, which only the mask hides */
					SKY_EXPECT(id[s] == SKY_TASK_A || id[s] == SKY_TASK_B);
				}
			}
			SKY_EXPECT(n >= 4 && n <= 16);
			SKY_EXPECT(ca != cb);
			SKY_EXPECT_EQ(labels[b], ca > cb);
			ones += labels[b];
			total++;
			padded += n < 16;
		}
	}
	/* balanced: 1280 labels, expect 640 +- a few sigma (sigma ~ 18) */
	SKY_EXPECT_MSG(ones > 560 && ones < 720, "%ld of %ld labels are 1", ones, total);
	SKY_EXPECT_MSG(padded > total / 2, "%ld of %ld sequences padded", padded, total);
	/* another split, another seed: different data */
	SKY_EXPECT_EQ(sky_task_batch(&c, 7, SKY_TASK_HELDOUT, 0, ids2, types2, attn2, labels2), 0);
	SKY_EXPECT_EQ(sky_task_batch(&c, 7, SKY_TASK_TRAIN, 0, ids, types, attn, labels), 0);
	SKY_EXPECT(memcmp(ids, ids2, sizeof ids) != 0);
	SKY_EXPECT_EQ(sky_task_batch(&c, 8, SKY_TASK_TRAIN, 0, ids2, types2, attn2, labels2), 0);
	SKY_EXPECT(memcmp(ids, ids2, sizeof ids) != 0);
}

SKY_TEST(task_rejects_models_too_small)
{
	sky_model_cfg c;
	SKY_EXPECT_EQ(sky_model_preset("tiny", &c), 0);
	int32_t ids[128], types[128], attn[128], labels[8];
	c.vocab = 7;
	SKY_EXPECT_EQ(sky_task_batch(&c, 1, 0, 0, ids, types, attn, labels), SKY_EINVAL);
	c.vocab = 64;
	c.seq = 3;
	SKY_EXPECT_EQ(sky_task_check(&c), SKY_EINVAL);
	c.seq = 16;
	c.classes = 1;
	SKY_EXPECT_EQ(sky_task_check(&c), SKY_EINVAL);
}
